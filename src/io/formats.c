/* formats.c -- the table of checkpoint-format conventions, the names of an
 * NVFP4 tensor's pieces in each format, and the byte moves between them.
 *
 * Every convention below was read from the tools' sources and checked by
 * running them (tools/gen_format_golden.py; docs/FORMATS.md): ComfyUI
 * (comfy-kitchen), nvidia-modelopt 0.47, compressed-tensors 0.20 (with
 * llm-compressor's observers), gguf 0.19 / ggml. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt_internal.h"

static const nvfp4_format_traits traits[NVFP4_FORMAT_COUNT_] = {
    [NVFP4_FORMAT_COMFYUI] = {
        .format = NVFP4_FORMAT_COMFYUI, .name = "comfyui", .container = "safetensors",
        .codes_suffix = "", .scale_suffix = "_scale", .tensor_scale_suffix = "_scale_2",
        .input_scale_suffix = ".input_scale",
        .packing = NVFP4_PACK_HI_FIRST, .scale_store = NVFP4_STORE_TILED,
        .scale_code = NVFP4_SCALE_E4M3, .tensor_scale_direction = NVFP4_SCALE_MULTIPLIES,
        .tensor_scale_optional = 0, .tensor_scale_ndim = 0, .col_multiple = 16,
        .zero_nan = "a zero block gets scale 0x00 and codes +0; NaN blocks scale 0x7F "
                    "(eager); a NaN or zero per-tensor scale makes every block 0x7F/0xFF",
        .padding = "rows and columns zero-padded to 16 before quantizing (stored padded); "
                   "scale tiles padded to 128 rows x 4 blocks with 0x00",
        .rounding = "s = min((amax / 6) / s2, 448) to E4M3 (RNE); code = E2M1 RNE of "
                    "x / (s2 * s) (eager) or x * rcp(s2 * s) (CUDA); -0 kept",
    },
    [NVFP4_FORMAT_MODELOPT] = {
        .format = NVFP4_FORMAT_MODELOPT, .name = "modelopt", .container = "safetensors",
        .codes_suffix = "", .scale_suffix = "_scale", .tensor_scale_suffix = "_scale_2",
        .input_scale_suffix = ".input_scale",
        .packing = NVFP4_PACK_LO_FIRST, .scale_store = NVFP4_STORE_ROW_MAJOR,
        .scale_code = NVFP4_SCALE_E4M3, .tensor_scale_direction = NVFP4_SCALE_MULTIPLIES,
        .tensor_scale_optional = 0, .tensor_scale_ndim = 0, .col_multiple = 16,
        .zero_nan = "a zero block gets scale 1.0 (0x38) and codes 0; block scales are "
                    "clamped to [2^-9, 448]; a NaN block gets 0xFF (0x7F in PyTorch's scalar "
                    "tail), NaN codes 7 (+6)",
        .padding = "columns zero-padded to 16 (stored padded); rows not padded",
        .rounding = "s2 = amax / 2688; s = clamp(amax_b / (6 * s2), 2^-9, 448) to E4M3 "
                    "(RNE); code = E2M1 RNE of x / (s * s2), the sign from that quotient "
                    "(-0 gives +0)",
    },
    [NVFP4_FORMAT_COMPRESSED_TENSORS] = {
        .format = NVFP4_FORMAT_COMPRESSED_TENSORS, .name = "compressed-tensors",
        .container = "safetensors", .codes_suffix = "_packed", .scale_suffix = "_scale",
        .tensor_scale_suffix = "_global_scale", .input_scale_suffix = ".input_global_scale",
        .packing = NVFP4_PACK_LO_FIRST, .scale_store = NVFP4_STORE_ROW_MAJOR,
        .scale_code = NVFP4_SCALE_E4M3, .tensor_scale_direction = NVFP4_SCALE_DIVIDES,
        .tensor_scale_optional = 0, .tensor_scale_ndim = 1, .col_multiple = 16,
        .zero_nan = "a zero block gets scale 0.125 (0x20) and codes 0; a NaN or infinite "
                    "global scale becomes 1; a NaN block gets 0xFF (0x7F in PyTorch's scalar "
                    "tail), NaN codes 8 (BF16 input) or 0 (F16, F32)",
        .padding = "none: columns must be a multiple of 16",
        .rounding = "g = 2688 / amax in x's dtype (1/amax, then times 2688); s = E4M3 RNE "
                    "of g * (amax_b / 6, in x's dtype), 0 -> 0.125; code = E2M1 RNE of "
                    "x / (s / g), the sign from x (-0 gives +0)",
    },
    [NVFP4_FORMAT_GGUF] = {
        .format = NVFP4_FORMAT_GGUF, .name = "gguf", .container = "gguf",
        .codes_suffix = "", .scale_suffix = NULL, .tensor_scale_suffix = NULL,
        .input_scale_suffix = ".input_scale",
        .packing = NVFP4_PACK_GGML_HALVES, .scale_store = NVFP4_STORE_GGML_BLOCKS,
        .scale_code = NVFP4_SCALE_UE4M3, .tensor_scale_direction = NVFP4_SCALE_MULTIPLIES,
        .tensor_scale_optional = 1, .tensor_scale_ndim = 1, .col_multiple = FMT_GGML_BLOCK,
        .zero_nan = "UE4M3 0x00 and 0x7F decode as 0 (no NaN); ggml's quantizer saturates "
                    "at 0x7E; llama.cpp's converter copies E4M3 bytes with bit 7 cleared",
        .padding = "none: rows are whole 64-element blocks (ne0 % 64 == 0)",
        .rounding = "no NVFP4 quantizer used here (read and written only); the per-tensor "
                    "scale is an optional F32 tensor L.scale (absent: 1)",
    },
};

const nvfp4_format_traits *nvfp4_format_traits_of(nvfp4_format format)
{
    if ((int)format <= NVFP4_FORMAT_UNKNOWN || format >= NVFP4_FORMAT_COUNT_) return NULL;
    return &traits[format];
}

nvfp4_status nvfp4_format_from_name(nvfp4_format *out, const char *name)
{
    if (!out || !name)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_format_from_name: NULL argument");
    for (int f = NVFP4_FORMAT_COMFYUI; f < NVFP4_FORMAT_COUNT_; f++) {
        if (!strcmp(traits[f].name, name)) {
            *out = (nvfp4_format)f;
            return NVFP4_OK;
        }
    }
    char shown[64];
    return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                      "'%s' is not a format (comfyui, modelopt, compressed-tensors, gguf)",
                      nvfp4_io_printable(shown, sizeof shown, name));
}

char *nvfp4_fmt_cat(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    char *r = malloc(a + b + 1);
    if (r) {
        memcpy(r, s, a);
        memcpy(r + a, suffix, b + 1);
    }
    return r;
}

static const char weight_suffix[] = ".weight";

char *nvfp4_fmt_layer(const char *w)
{
    size_t n = strlen(w), s = sizeof weight_suffix - 1;
    if (n > s && !strcmp(w + n - s, weight_suffix)) n -= s;
    char *r = malloc(n + 1);
    if (r) {
        memcpy(r, w, n);
        r[n] = '\0';
    }
    return r;
}

char *nvfp4_fmt_piece(const nvfp4_format_traits *tr, const char *w, fmt_piece piece)
{
    const char *suffix = NULL;
    int on_layer = 0;
    switch (piece) {
    case FMT_CODES: suffix = tr->codes_suffix; break;
    case FMT_SCALES: suffix = tr->scale_suffix; break;
    case FMT_TENSOR_SCALE:
        suffix = tr->tensor_scale_suffix;
        if (tr->format == NVFP4_FORMAT_GGUF) { /* llama.cpp: .weight -> .scale */
            suffix = ".scale";
            on_layer = 1;
        }
        break;
    case FMT_INPUT_SCALE: suffix = tr->input_scale_suffix; on_layer = 1; break;
    case FMT_BIAS: suffix = ".bias"; on_layer = 1; break;
    case FMT_MARKER: suffix = ".comfy_quant"; on_layer = 1; break;
    }
    if (!suffix) return NULL;
    if (!on_layer) return nvfp4_fmt_cat(w, suffix);
    char *layer = nvfp4_fmt_layer(w);
    char *r = layer ? nvfp4_fmt_cat(layer, suffix) : NULL;
    free(layer);
    return r;
}

int nvfp4_fmt_rows_record(const char *value, int64_t stored, int64_t *rows)
{
    char *end;
    errno = 0;
    long long r = strtoll(value, &end, 10); /* decimal digits only, as the writer writes them */
    if (value[0] < '0' || value[0] > '9' || errno || *end || r < 1 || r > stored ||
        stored > (r + 15) / 16 * 16) /* ComfyUI pads rows to a multiple of 16 */
        return 0;
    *rows = r;
    return 1;
}

const char nvfp4_fmt_comfy_marker[] = "{\"format\": \"nvfp4\"}";
size_t nvfp4_fmt_comfy_marker_len(void) { return sizeof nvfp4_fmt_comfy_marker - 1; }

/*---- byte moves ----*/

void nvfp4_fmt_ggml_pack_row(uint8_t *blocks, const uint8_t *codes_lo, const uint8_t *scales,
                             int64_t cols)
{
    for (int64_t b = 0; b < cols / FMT_GGML_BLOCK; b++) {
        uint8_t *out = blocks + b * FMT_GGML_BLOCK_BYTES;
        memcpy(out, scales + 4 * b, 4);
        for (int s = 0; s < 4; s++) {
            const uint8_t *in = codes_lo + b * 32 + s * 8; /* 16 codes, lo-first */
            uint8_t e[16];
            for (int j = 0; j < 8; j++) {
                e[2 * j] = in[j] & 15;
                e[2 * j + 1] = in[j] >> 4;
            }
            for (int j = 0; j < 8; j++) out[4 + 8 * s + j] = (uint8_t)(e[j] | e[j + 8] << 4);
        }
    }
}

void nvfp4_fmt_ggml_unpack_row(uint8_t *codes_lo, uint8_t *scales, const uint8_t *blocks,
                               int64_t cols)
{
    for (int64_t b = 0; b < cols / FMT_GGML_BLOCK; b++) {
        const uint8_t *in = blocks + b * FMT_GGML_BLOCK_BYTES;
        memcpy(scales + 4 * b, in, 4);
        for (int s = 0; s < 4; s++) {
            uint8_t e[16];
            for (int j = 0; j < 8; j++) {
                e[j] = in[4 + 8 * s + j] & 15;
                e[j + 8] = in[4 + 8 * s + j] >> 4;
            }
            uint8_t *out = codes_lo + b * 32 + s * 8;
            for (int j = 0; j < 8; j++) out[j] = (uint8_t)(e[2 * j] | e[2 * j + 1] << 4);
        }
    }
}

int nvfp4_fmt_ue4m3_as_e4m3(uint8_t u)
{
    if (u == 0xFF) return -1;
    u &= 0x7F;
    return u == 0x7F ? 0x00 : u;
}

void nvfp4_fmt_copy_codes(uint8_t *dst, int64_t dst_cols, nvfp4_nibble_order dst_order,
                          const uint8_t *src, int64_t src_cols, nvfp4_nibble_order src_order,
                          int64_t rows)
{
    int64_t n = dst_cols < src_cols ? dst_cols : src_cols; /* even: both are */
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *d = dst + r * (dst_cols / 2);
        const uint8_t *s = src + r * (src_cols / 2);
        if (dst_order == src_order) memcpy(d, s, (size_t)(n / 2));
        else nvfp4_swap_nibbles(d, s, (size_t)(n / 2));
        memset(d + n / 2, 0, (size_t)((dst_cols - n) / 2));
    }
}

int nvfp4_fmt_exact_reciprocal(float v)
{
    if (!isfinite(v) || v == 0.0f) return 0;
    int e;
    float m = frexpf(fabsf(v), &e); /* |v| = m * 2^e, m in [0.5, 1) */
    float r = 1.0f / v;
    /* a power of two whose reciprocal neither overflows nor loses bits */
    return m == 0.5f && isfinite(r) && (double)r * (double)v == 1.0;
}

/*---- nvfp4_ckpt_tensor ----*/

void nvfp4_ckpt_tensor_free(nvfp4_ckpt_tensor *ct)
{
    if (!ct) return;
    nvfp4_tensor_free(&ct->t);
    memset(ct, 0, sizeof *ct);
}

nvfp4_status nvfp4_ckpt_tensor_values(nvfp4_tensor *out, const nvfp4_ckpt_tensor *ct)
{
    if (!out || !ct || !ct->t.codes || !ct->t.scales)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_ckpt_tensor_values: NULL argument");
    memset(out, 0, sizeof *out);
    const nvfp4_format_traits *tr = nvfp4_format_traits_of(ct->format);
    if (!tr || tr->scale_code == NVFP4_SCALE_E4M3)
        return nvfp4_tensor_convert(out, &ct->t, NVFP4_HI_FIRST, NVFP4_SCALES_TILED);
    /* GGUF: the UE4M3 bytes made E4M3 first (value for value) */
    nvfp4_tensor e4 = ct->t;
    size_t nb = nvfp4_scales_bytes(ct->t.rows, ct->t.cols, ct->t.scale_layout);
    e4.scales = malloc(nb ? nb : 1);
    if (!e4.scales) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "nvfp4_ckpt_tensor_values: no memory");
    for (size_t i = 0; i < nb; i++) {
        int v = nvfp4_fmt_ue4m3_as_e4m3(ct->t.scales[i]);
        if (v < 0) {
            int64_t per_row = ct->t.cols / NVFP4_BLOCK;
            free(e4.scales);
            return nvfp4_fail(NVFP4_ERR_UNSUPPORTED,
                              "GGUF scale byte 0xFF (row %lld, block %lld) means 480, which no "
                              "E4M3 scale holds",
                              (long long)((int64_t)i / per_row), (long long)((int64_t)i % per_row));
        }
        e4.scales[i] = (uint8_t)v;
    }
    nvfp4_status s = nvfp4_tensor_convert(out, &e4, NVFP4_HI_FIRST, NVFP4_SCALES_TILED);
    free(e4.scales);
    return s;
}
