/* fmt_internal.h -- what the checkpoint-format sources share (formats.c,
 * gguf.c, ckpt.c, convert.c); not installed. */
#ifndef NVFP4_FMT_INTERNAL_H
#define NVFP4_FMT_INTERNAL_H

#include <stdint.h>

#include "io_internal.h"

/* The pieces of an NVFP4 tensor W (a layer L = W without ".weight"). */
typedef enum fmt_piece {
    FMT_CODES,
    FMT_SCALES,
    FMT_TENSOR_SCALE,
    FMT_INPUT_SCALE,
    FMT_BIAS,
    FMT_MARKER /* ComfyUI's L.comfy_quant */
} fmt_piece;

/* The stored name of a piece of W in format tr, malloc'ed (NULL: no memory,
 * or a piece the format does not have). */
char *nvfp4_fmt_piece(const nvfp4_format_traits *tr, const char *w, fmt_piece piece);

/* The layer name of W (W without a trailing ".weight"), malloc'ed. */
char *nvfp4_fmt_layer(const char *w);

/* s + suffix, malloc'ed (NULL: no memory). */
char *nvfp4_fmt_cat(const char *s, const char *suffix);

/* A tensor's rows record (metadata NVFP4_ST_ROWS_KEY_PREFIX + W: the rows
 * it had before ComfyUI's padding): 1 with *rows set when value is a row
 * count that padding to 16 could have turned into `stored` rows, else 0. */
int nvfp4_fmt_rows_record(const char *value, int64_t stored, int64_t *rows);

/* ComfyUI's layer marker: the bytes of L.comfy_quant. */
extern const char nvfp4_fmt_comfy_marker[];
size_t nvfp4_fmt_comfy_marker_len(void);

/* ggml's NVFP4 block: 64 elements in 36 bytes. */
#define FMT_GGML_BLOCK 64
#define FMT_GGML_BLOCK_BYTES 36

/* Row r of a lo-first, row-major tensor (cols % 64 == 0) as ggml blocks
 * (cols / 64 * 36 bytes), and back.  Bytes are moved, nothing else. */
void nvfp4_fmt_ggml_pack_row(uint8_t *blocks, const uint8_t *codes_lo, const uint8_t *scales,
                             int64_t cols);
void nvfp4_fmt_ggml_unpack_row(uint8_t *codes_lo, uint8_t *scales, const uint8_t *blocks,
                               int64_t cols);

/* The E4M3 byte with ggml's value for a UE4M3 byte u (bit 7 ignored; 0x7F is
 * zero), or -1 for 0xFF (480, which E4M3 cannot hold). */
int nvfp4_fmt_ue4m3_as_e4m3(uint8_t u);

/* Copy rows x cols codes between nibble orders / a different stored width:
 * dst rows hold dst_cols codes, src rows src_cols (the extra columns of the
 * wider one are zero codes).  Orders are NVFP4_HI_FIRST / NVFP4_LO_FIRST. */
void nvfp4_fmt_copy_codes(uint8_t *dst, int64_t dst_cols, nvfp4_nibble_order dst_order,
                          const uint8_t *src, int64_t src_cols, nvfp4_nibble_order src_order,
                          int64_t rows);

/* A 1 if v's reciprocal is an FP32 number (v = +-2^e with 2^-e normal and
 * finite), so that a multiplier and a divisor can stand for each other. */
int nvfp4_fmt_exact_reciprocal(float v);

/*---- GGUF (gguf.c) ----*/

/* ggml tensor types this code reads and writes by name; sizes of all known. */
enum {
    GGML_F32 = 0, GGML_F16 = 1, GGML_I8 = 24, GGML_I16 = 25, GGML_I32 = 26, GGML_I64 = 27,
    GGML_F64 = 28, GGML_BF16 = 30, GGML_NVFP4 = 40
};

/* GGUF value types. */
enum {
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5,
    GGUF_F32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_U64 = 10,
    GGUF_I64 = 11, GGUF_F64 = 12
};

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

typedef struct gguf_tensor {
    const char *name;
    uint32_t type;
    int ndim;
    int64_t ne[GGUF_MAX_DIMS]; /* ggml order: ne[0] is the row length */
    const uint8_t *data;
    uint64_t nbytes;
} gguf_tensor;

typedef struct gguf_kv {
    const char *key;
    uint32_t type;        /* GGUF_* */
    const uint8_t *value; /* the serialized value (after the type), value_len bytes */
    uint64_t value_len;
} gguf_kv;

typedef struct nvfp4_gguf nvfp4_gguf;

nvfp4_status nvfp4_gguf_open(nvfp4_gguf **out, const char *path);
nvfp4_status nvfp4_gguf_open_memory(nvfp4_gguf **out, const void *bytes, size_t n,
                                    const char *label);
void nvfp4_gguf_close(nvfp4_gguf *g);
const char *nvfp4_gguf_path(const nvfp4_gguf *g);
size_t nvfp4_gguf_count(const nvfp4_gguf *g);
const gguf_tensor *nvfp4_gguf_get(const nvfp4_gguf *g, size_t i);
const gguf_tensor *nvfp4_gguf_find(const nvfp4_gguf *g, const char *name);
size_t nvfp4_gguf_kv_count(const nvfp4_gguf *g);
const gguf_kv *nvfp4_gguf_kv(const nvfp4_gguf *g, size_t i);
uint32_t nvfp4_gguf_alignment(const nvfp4_gguf *g);
/* The file's mapping (NULL for nvfp4_gguf_open_memory's bytes). */
void nvfp4_gguf_map_range(const nvfp4_gguf *g, const uint8_t **base, size_t *len);

/* *nbytes of a tensor of ggml type `type` and shape ne; 0 for an unknown
 * type, a row length that is not a whole number of blocks, or an overflow. */
int nvfp4_ggml_size(uint32_t type, int ndim, const int64_t *ne, uint64_t *nbytes);
const char *nvfp4_ggml_type_name(uint32_t type);
/* The ggml type of a safetensors dtype and back (-1 / INVALID: none). */
int nvfp4_ggml_from_dtype(nvfp4_dtype d);
nvfp4_dtype nvfp4_ggml_to_dtype(uint32_t type);

/* A tensor's bytes, produced when the writer gets to it (fill writes exactly
 * nbytes into buf, or returns an error). */
typedef nvfp4_status (*fmt_fill_fn)(void *ctx, uint8_t *buf, size_t nbytes);

typedef struct nvfp4_gguf_writer nvfp4_gguf_writer;
nvfp4_status nvfp4_gguf_writer_new(nvfp4_gguf_writer **out);
void nvfp4_gguf_writer_free(nvfp4_gguf_writer *w);
/* A key-value pair as its serialized value bytes (copied). */
nvfp4_status nvfp4_gguf_writer_kv(nvfp4_gguf_writer *w, const char *key, uint32_t type,
                                  const void *value, size_t len);
nvfp4_status nvfp4_gguf_writer_kv_string(nvfp4_gguf_writer *w, const char *key, const char *s);
/* data (borrowed) or fill/ctx gives the bytes. */
nvfp4_status nvfp4_gguf_writer_tensor(nvfp4_gguf_writer *w, const char *name, uint32_t type,
                                      int ndim, const int64_t *ne, const void *data,
                                      fmt_fill_fn fill, void *ctx);
nvfp4_status nvfp4_gguf_writer_write(nvfp4_gguf_writer *w, const char *path,
                                     void (*progress)(void *ctx, uint64_t done, uint64_t total),
                                     void *progress_ctx);

/*---- safetensors tensors written from a callback (safetensors_write.c) ----*/
nvfp4_status nvfp4_st_writer_add_fill(nvfp4_st_writer *w, const char *name, nvfp4_dtype dtype,
                                      int ndim, const int64_t *shape, size_t nbytes,
                                      fmt_fill_fn fill, void *ctx);

#endif
