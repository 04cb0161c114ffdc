/* gguf.c -- llama.cpp's GGUF container: a validating reader over a mapping
 * and a streaming, atomic writer.
 *
 * Layout (version 2 and 3, little-endian): "GGUF", u32 version, u64 tensor
 * count, u64 key-value count; the key-value pairs (string key, u32 type,
 * value; strings are u64 length + bytes, arrays u32 element type + u64
 * count + elements); the tensor infos (name, u32 n_dims, n_dims u64 ne,
 * u32 ggml type, u64 offset); padding to the alignment (general.alignment,
 * default 32); the data, each tensor at its offset, a multiple of the
 * alignment.  Every count and length is checked against the bytes left
 * before it is used; a rejected file is NVFP4_ERR_MALFORMED with a
 * one-line message naming the file. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fmt_internal.h"

static const uint8_t gguf_magic[4] = {'G', 'G', 'U', 'F'};

/* Limits that keep a hostile file from asking for absurd allocations. */
#define GGUF_MAX_STRING ((uint64_t)1 << 24)
#define GGUF_MAX_ARRAY_NEST 1

/* ggml's type table (ggml.c type_traits): elements per block, bytes per
 * block; 0 = no such type. */
static const struct {
    const char *name;
    uint32_t block, bytes;
} ggml_types[] = {
    [0] = {"F32", 1, 4},       [1] = {"F16", 1, 2},       [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},    [6] = {"Q5_0", 32, 22},    [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},    [9] = {"Q8_1", 32, 40},    [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110}, [12] = {"Q4_K", 256, 144}, [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210}, [15] = {"Q8_K", 256, 292}, [16] = {"IQ2_XXS", 256, 66},
    [17] = {"IQ2_XS", 256, 74}, [18] = {"IQ3_XXS", 256, 98}, [19] = {"IQ1_S", 256, 50},
    [20] = {"IQ4_NL", 32, 18}, [21] = {"IQ3_S", 256, 110}, [22] = {"IQ2_S", 256, 82},
    [23] = {"IQ4_XS", 256, 136}, [24] = {"I8", 1, 1},     [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},      [27] = {"I64", 1, 8},      [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 256, 56}, [30] = {"BF16", 1, 2},     [34] = {"TQ1_0", 256, 54},
    [35] = {"TQ2_0", 256, 66}, [39] = {"MXFP4", 32, 17},  [40] = {"NVFP4", 64, 36},
    [41] = {"Q1_0", 128, 18},
};
#define GGML_TYPE_SLOTS (sizeof ggml_types / sizeof ggml_types[0])

const char *nvfp4_ggml_type_name(uint32_t type)
{
    return type < GGML_TYPE_SLOTS && ggml_types[type].name ? ggml_types[type].name : NULL;
}

int nvfp4_ggml_size(uint32_t type, int ndim, const int64_t *ne, uint64_t *nbytes)
{
    if (type >= GGML_TYPE_SLOTS || !ggml_types[type].block || ndim < 1 || ndim > GGUF_MAX_DIMS)
        return 0;
    uint64_t block = ggml_types[type].block, bytes = ggml_types[type].bytes;
    if (ne[0] < 0 || (uint64_t)ne[0] % block) return 0;
    uint64_t n = (uint64_t)ne[0] / block * bytes;
    for (int d = 1; d < ndim; d++) {
        if (ne[d] < 0) return 0;
        if (ne[d] && n > UINT64_MAX / 2 / (uint64_t)ne[d]) return 0;
        n *= (uint64_t)ne[d];
    }
    *nbytes = n;
    return 1;
}

static const struct {
    nvfp4_dtype dtype;
    uint32_t ggml;
} dtype_map[] = {
    {NVFP4_DTYPE_F32, GGML_F32}, {NVFP4_DTYPE_F16, GGML_F16}, {NVFP4_DTYPE_BF16, GGML_BF16},
    {NVFP4_DTYPE_F64, GGML_F64}, {NVFP4_DTYPE_I8, GGML_I8},   {NVFP4_DTYPE_I16, GGML_I16},
    {NVFP4_DTYPE_I32, GGML_I32}, {NVFP4_DTYPE_I64, GGML_I64},
};

int nvfp4_ggml_from_dtype(nvfp4_dtype d)
{
    for (size_t i = 0; i < sizeof dtype_map / sizeof dtype_map[0]; i++)
        if (dtype_map[i].dtype == d) return (int)dtype_map[i].ggml;
    return -1;
}

nvfp4_dtype nvfp4_ggml_to_dtype(uint32_t type)
{
    for (size_t i = 0; i < sizeof dtype_map / sizeof dtype_map[0]; i++)
        if (dtype_map[i].ggml == type) return dtype_map[i].dtype;
    return NVFP4_DTYPE_INVALID;
}

/*---- reader ----*/

struct nvfp4_gguf {
    char *path;
    void *map;
    size_t map_len;
    const uint8_t *bytes;
    size_t len;
    uint32_t version, alignment;
    gguf_kv *kvs;
    size_t nkv;
    gguf_tensor *tensors; /* file order */
    size_t count;
    const gguf_tensor **by_name;
};

typedef struct cursor {
    const nvfp4_gguf *g;
    size_t pos;
} cursor;

static nvfp4_status bad(const nvfp4_gguf *g, const char *fmt, ...) NVFP4_PRINTF(2, 3);
static nvfp4_status bad(const nvfp4_gguf *g, const char *fmt, ...)
{
    char what[320], label[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return nvfp4_fail(NVFP4_ERR_MALFORMED, "%s: %s", nvfp4_io_printable(label, sizeof label, g->path),
                      what);
}

static int take(cursor *c, size_t n, const uint8_t **p)
{
    if (n > c->g->len - c->pos) return 0;
    *p = c->g->bytes + c->pos;
    c->pos += n;
    return 1;
}

static int take_u32(cursor *c, uint32_t *v)
{
    const uint8_t *p;
    if (!take(c, 4, &p)) return 0;
    *v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return 1;
}

static int take_u64(cursor *c, uint64_t *v)
{
    uint32_t lo, hi;
    if (!take_u32(c, &lo) || !take_u32(c, &hi)) return 0;
    *v = (uint64_t)hi << 32 | lo;
    return 1;
}

/* A string as a new NUL-terminated copy; 0 on a short file, -1 on a NUL
 * inside or an absurd length, -2 out of memory. */
static int take_string(cursor *c, char **out)
{
    uint64_t n;
    const uint8_t *p;
    *out = NULL;
    if (!take_u64(c, &n)) return 0;
    if (n > GGUF_MAX_STRING) return -1;
    if (!take(c, (size_t)n, &p)) return 0;
    if (memchr(p, 0, (size_t)n)) return -1;
    char *s = malloc((size_t)n + 1);
    if (!s) return -2;
    memcpy(s, p, (size_t)n);
    s[n] = '\0';
    *out = s;
    return 1;
}

static size_t value_size(uint32_t type)
{
    switch (type) {
    case GGUF_U8: case GGUF_I8: case GGUF_BOOL: return 1;
    case GGUF_U16: case GGUF_I16: return 2;
    case GGUF_U32: case GGUF_I32: case GGUF_F32: return 4;
    case GGUF_U64: case GGUF_I64: case GGUF_F64: return 8;
    default: return 0;
    }
}

/* Skip over one value of `type`, checking every length. */
static nvfp4_status skip_value(cursor *c, uint32_t type, const char *key, int depth)
{
    const nvfp4_gguf *g = c->g;
    char k[96];
    const uint8_t *p;
    size_t fixed = value_size(type);
    if (fixed) {
        if (!take(c, fixed, &p))
            return bad(g, "key '%s': the value runs past the end of the file",
                       nvfp4_io_printable(k, sizeof k, key));
        return NVFP4_OK;
    }
    if (type == GGUF_STRING) {
        uint64_t n;
        if (!take_u64(c, &n) || n > g->len - c->pos)
            return bad(g, "key '%s': a string runs past the end of the file",
                       nvfp4_io_printable(k, sizeof k, key));
        c->pos += (size_t)n;
        return NVFP4_OK;
    }
    if (type == GGUF_ARRAY) {
        uint32_t et;
        uint64_t n;
        if (depth >= GGUF_MAX_ARRAY_NEST)
            return bad(g, "key '%s': arrays of arrays are not part of GGUF",
                       nvfp4_io_printable(k, sizeof k, key));
        if (!take_u32(c, &et) || !take_u64(c, &n))
            return bad(g, "key '%s': the array header runs past the end of the file",
                       nvfp4_io_printable(k, sizeof k, key));
        size_t es = value_size(et);
        if (es) {
            if (n > (g->len - c->pos) / es)
                return bad(g, "key '%s': %llu array elements run past the end of the file",
                           nvfp4_io_printable(k, sizeof k, key), (unsigned long long)n);
            c->pos += (size_t)n * es;
            return NVFP4_OK;
        }
        if (et != GGUF_STRING && et != GGUF_ARRAY)
            return bad(g, "key '%s': unknown array element type %u",
                       nvfp4_io_printable(k, sizeof k, key), et);
        if (n > (g->len - c->pos) / 8) /* each element takes 8 bytes at least */
            return bad(g, "key '%s': %llu array elements run past the end of the file",
                       nvfp4_io_printable(k, sizeof k, key), (unsigned long long)n);
        for (uint64_t i = 0; i < n; i++) {
            nvfp4_status s = skip_value(c, et, key, depth + 1);
            if (s != NVFP4_OK) return s;
        }
        return NVFP4_OK;
    }
    return bad(g, "key '%s': unknown value type %u", nvfp4_io_printable(k, sizeof k, key), type);
}

static int cmp_tensor_name(const void *a, const void *b)
{
    return strcmp((*(const gguf_tensor *const *)a)->name, (*(const gguf_tensor *const *)b)->name);
}

static int cmp_tensor_offset(const void *a, const void *b)
{
    const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
    return x->data < y->data ? -1 : x->data > y->data;
}

static void free_gguf(nvfp4_gguf *g)
{
    if (!g) return;
    for (size_t i = 0; i < g->nkv; i++) free((char *)g->kvs[i].key);
    for (size_t i = 0; i < g->count; i++) free((char *)g->tensors[i].name);
    free(g->kvs);
    free(g->tensors);
    free(g->by_name);
    if (g->map) munmap(g->map, g->map_len);
    free(g->path);
    free(g);
}

static nvfp4_status parse_kvs(nvfp4_gguf *g, cursor *c, uint64_t nkv)
{
    g->kvs = calloc(nkv ? (size_t)nkv : 1, sizeof *g->kvs);
    if (!g->kvs) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "%s: no memory", g->path);
    for (uint64_t i = 0; i < nkv; i++) {
        char *key;
        int r = take_string(c, &key);
        if (r == -2) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "%s: no memory", g->path);
        if (r <= 0)
            return bad(g, "key-value pair %llu: the key %s", (unsigned long long)i,
                       r == 0 ? "runs past the end of the file" : "holds a NUL byte or is absurdly long");
        gguf_kv *kv = &g->kvs[g->nkv++];
        kv->key = key;
        char k[96];
        for (size_t j = 0; j + 1 < g->nkv; j++)
            if (!strcmp(g->kvs[j].key, key))
                return bad(g, "key '%s' appears twice", nvfp4_io_printable(k, sizeof k, key));
        if (!take_u32(c, &kv->type))
            return bad(g, "key '%s': the type runs past the end of the file",
                       nvfp4_io_printable(k, sizeof k, key));
        size_t start = c->pos;
        nvfp4_status s = skip_value(c, kv->type, key, 0);
        if (s != NVFP4_OK) return s;
        kv->value = g->bytes + start;
        kv->value_len = c->pos - start;
        if (!strcmp(key, "general.alignment")) {
            uint32_t a;
            if (kv->type != GGUF_U32) return bad(g, "general.alignment is not a u32");
            memcpy(&a, kv->value, 4);
            if (a == 0 || (a & (a - 1)) || a > 1u << 20)
                return bad(g, "general.alignment %u is not a power of two up to 2^20", a);
            g->alignment = a;
        }
    }
    return NVFP4_OK;
}

static nvfp4_status parse_tensor_infos(nvfp4_gguf *g, cursor *c, uint64_t count,
                                       uint64_t *offsets)
{
    for (uint64_t i = 0; i < count; i++) {
        gguf_tensor *t = &g->tensors[g->count];
        char *name;
        int r = take_string(c, &name);
        if (r == -2) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "%s: no memory", g->path);
        if (r <= 0)
            return bad(g, "tensor info %llu: the name %s", (unsigned long long)i,
                       r == 0 ? "runs past the end of the file" : "holds a NUL byte or is absurdly long");
        t->name = name;
        g->count++;
        char n[96];
        nvfp4_io_printable(n, sizeof n, name);
        uint32_t nd;
        if (!take_u32(c, &nd)) return bad(g, "tensor '%s': the info runs past the end of the file", n);
        if (nd < 1 || nd > GGUF_MAX_DIMS)
            return bad(g, "tensor '%s': %u dimensions (GGUF has 1 to %d)", n, nd, GGUF_MAX_DIMS);
        t->ndim = (int)nd;
        for (int d = 0; d < t->ndim; d++) {
            uint64_t v;
            if (!take_u64(c, &v)) return bad(g, "tensor '%s': the info runs past the end of the file", n);
            if (v > (uint64_t)INT64_MAX) return bad(g, "tensor '%s': dimension %d is absurd", n, d);
            t->ne[d] = (int64_t)v;
        }
        for (int d = t->ndim; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        if (!take_u32(c, &t->type) || !take_u64(c, &offsets[i]))
            return bad(g, "tensor '%s': the info runs past the end of the file", n);
        if (!nvfp4_ggml_type_name(t->type))
            return bad(g, "tensor '%s': unknown ggml type %u", n, t->type);
        if (t->ne[0] % (int64_t)ggml_types[t->type].block)
            return bad(g, "tensor '%s': %s rows hold whole blocks of %u elements; ne[0] is %lld",
                       n, ggml_types[t->type].name, ggml_types[t->type].block, (long long)t->ne[0]);
        if (!nvfp4_ggml_size(t->type, t->ndim, t->ne, &t->nbytes))
            return bad(g, "tensor '%s': its size overflows", n);
    }
    return NVFP4_OK;
}

static nvfp4_status parse(nvfp4_gguf *g)
{
    cursor c = {g, 0};
    const uint8_t *p;
    uint64_t count, nkv;
    if (!take(&c, 4, &p) || memcmp(p, gguf_magic, 4))
        return bad(g, "does not start with \"GGUF\" (not a GGUF file)");
    if (!take_u32(&c, &g->version) || !take_u64(&c, &count) || !take_u64(&c, &nkv))
        return bad(g, "the header runs past the end of the file");
    if (g->version != 2 && g->version != 3)
        return bad(g, "GGUF version %u (this reader knows 2 and 3, little-endian)", g->version);
    /* a key-value pair takes 13 bytes at least, a tensor info 32 */
    if (nkv > (g->len - c.pos) / 13) return bad(g, "%llu key-value pairs cannot fit in the file",
                                                (unsigned long long)nkv);
    nvfp4_status s = parse_kvs(g, &c, nkv);
    if (s != NVFP4_OK) return s;
    if (count > (g->len - c.pos) / 32) return bad(g, "%llu tensors cannot fit in the file",
                                                  (unsigned long long)count);
    g->tensors = calloc(count ? (size_t)count : 1, sizeof *g->tensors);
    g->by_name = calloc(count ? (size_t)count : 1, sizeof *g->by_name);
    uint64_t *offsets = calloc(count ? (size_t)count : 1, sizeof *offsets);
    if (!g->tensors || !g->by_name || !offsets) {
        free(offsets);
        return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "%s: no memory for %llu tensors", g->path,
                          (unsigned long long)count);
    }
    s = parse_tensor_infos(g, &c, count, offsets);
    uint64_t a = g->alignment, base = ((uint64_t)c.pos + a - 1) / a * a;
    if (s == NVFP4_OK && base > g->len)
        s = bad(g, "the data section starts past the end of the file");
    for (size_t i = 0; s == NVFP4_OK && i < g->count; i++) {
        gguf_tensor *t = &g->tensors[i];
        char n[96];
        nvfp4_io_printable(n, sizeof n, t->name);
        uint64_t room = g->len - base;
        if (offsets[i] % a)
            s = bad(g, "tensor '%s': offset %llu is not a multiple of the alignment %llu", n,
                    (unsigned long long)offsets[i], (unsigned long long)a);
        else if (offsets[i] > room || t->nbytes > room - offsets[i])
            s = bad(g, "tensor '%s': bytes [%llu, +%llu) run past the end of the file (truncated?)",
                    n, (unsigned long long)offsets[i], (unsigned long long)t->nbytes);
        else
            t->data = g->bytes + base + offsets[i];
        g->by_name[i] = t;
    }
    free(offsets);
    if (s != NVFP4_OK) return s;
    qsort(g->by_name, g->count, sizeof *g->by_name, cmp_tensor_name);
    for (size_t i = 1; i < g->count; i++)
        if (!strcmp(g->by_name[i - 1]->name, g->by_name[i]->name)) {
            char n[96];
            return bad(g, "tensor '%s' appears twice",
                       nvfp4_io_printable(n, sizeof n, g->by_name[i]->name));
        }
    /* no two tensors share a byte */
    const gguf_tensor **order = malloc((g->count ? g->count : 1) * sizeof *order);
    if (!order) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "%s: no memory", g->path);
    memcpy(order, g->by_name, g->count * sizeof *order);
    qsort(order, g->count, sizeof *order, cmp_tensor_offset);
    for (size_t i = 1; i < g->count && s == NVFP4_OK; i++)
        if (order[i - 1]->data + order[i - 1]->nbytes > order[i]->data) {
            char n1[96], n2[96];
            s = bad(g, "tensors '%s' and '%s' overlap", nvfp4_io_printable(n1, sizeof n1, order[i - 1]->name),
                    nvfp4_io_printable(n2, sizeof n2, order[i]->name));
        }
    free(order);
    return s;
}

static nvfp4_status open_bytes(nvfp4_gguf **out, nvfp4_gguf *g)
{
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    nvfp4_status s = parse(g);
    if (s != NVFP4_OK) {
        free_gguf(g);
        return s;
    }
    *out = g;
    return NVFP4_OK;
}

static nvfp4_gguf *new_gguf(const char *label)
{
    nvfp4_gguf *g = calloc(1, sizeof *g);
    if (g) g->path = strdup(label);
    if (g && !g->path) {
        free(g);
        g = NULL;
    }
    return g;
}

nvfp4_status nvfp4_gguf_open_memory(nvfp4_gguf **out, const void *bytes, size_t n,
                                    const char *label)
{
    if (!out || (!bytes && n))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_gguf_open_memory: NULL argument");
    *out = NULL;
    nvfp4_gguf *g = new_gguf(label ? label : "<memory>");
    if (!g) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "gguf: no memory");
    g->bytes = bytes;
    g->len = n;
    return open_bytes(out, g);
}

nvfp4_status nvfp4_gguf_open(nvfp4_gguf **out, const char *path)
{
    if (!out || !path) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_gguf_open: NULL argument");
    *out = NULL;
    void *map;
    size_t len;
    nvfp4_status s = nvfp4_io_map(path, 1, &map, &len);
    if (s != NVFP4_OK) return s;
    nvfp4_gguf *g = new_gguf(path);
    if (!g) {
        if (map) munmap(map, len);
        return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "gguf: no memory");
    }
    g->map = map;
    g->map_len = map ? len : 0;
    g->bytes = map;
    g->len = map ? len : 0;
    return open_bytes(out, g);
}

void nvfp4_gguf_close(nvfp4_gguf *g) { free_gguf(g); }
const char *nvfp4_gguf_path(const nvfp4_gguf *g) { return g ? g->path : NULL; }
size_t nvfp4_gguf_count(const nvfp4_gguf *g) { return g ? g->count : 0; }
size_t nvfp4_gguf_kv_count(const nvfp4_gguf *g) { return g ? g->nkv : 0; }
uint32_t nvfp4_gguf_alignment(const nvfp4_gguf *g) { return g ? g->alignment : 0; }

void nvfp4_gguf_map_range(const nvfp4_gguf *g, const uint8_t **base, size_t *len)
{
    *base = g && g->map ? g->map : NULL;
    *len = g && g->map ? g->map_len : 0;
}

const gguf_tensor *nvfp4_gguf_get(const nvfp4_gguf *g, size_t i)
{
    return g && i < g->count ? &g->tensors[i] : NULL;
}

const gguf_kv *nvfp4_gguf_kv(const nvfp4_gguf *g, size_t i)
{
    return g && i < g->nkv ? &g->kvs[i] : NULL;
}

const gguf_tensor *nvfp4_gguf_find(const nvfp4_gguf *g, const char *name)
{
    if (!g || !name || !g->count) return NULL;
    gguf_tensor key = {0};
    key.name = name;
    const gguf_tensor *pk = &key;
    const gguf_tensor **hit = bsearch(&pk, g->by_name, g->count, sizeof *g->by_name, cmp_tensor_name);
    return hit ? *hit : NULL;
}

/*---- writer ----*/

/* ggml's loader keeps names in 64-byte buffers (GGML_MAX_NAME). */
#define GGML_MAX_NAME 64

typedef struct gw_kv {
    char *key;
    uint32_t type;
    uint8_t *value;
    size_t len;
} gw_kv;

typedef struct gw_tensor {
    char *name;
    uint32_t type;
    int ndim;
    int64_t ne[GGUF_MAX_DIMS];
    uint64_t nbytes, offset;
    const void *data;
    fmt_fill_fn fill;
    void *ctx;
} gw_tensor;

struct nvfp4_gguf_writer {
    gw_kv *kvs;
    size_t nkv, kv_cap;
    gw_tensor *tensors;
    size_t count, cap;
    uint32_t alignment;
};

nvfp4_status nvfp4_gguf_writer_new(nvfp4_gguf_writer **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "gguf writer: no memory");
    (*out)->alignment = GGUF_DEFAULT_ALIGNMENT;
    return NVFP4_OK;
}

void nvfp4_gguf_writer_free(nvfp4_gguf_writer *w)
{
    if (!w) return;
    for (size_t i = 0; i < w->nkv; i++) {
        free(w->kvs[i].key);
        free(w->kvs[i].value);
    }
    for (size_t i = 0; i < w->count; i++) free(w->tensors[i].name);
    free(w->kvs);
    free(w->tensors);
    free(w);
}

static int grow(void **items, size_t *cap, size_t count, size_t size)
{
    if (count < *cap) return 1;
    size_t n = *cap ? *cap * 2 : 16;
    void *p = realloc(*items, n * size);
    if (!p) return 0;
    *items = p;
    *cap = n;
    return 1;
}

nvfp4_status nvfp4_gguf_writer_kv(nvfp4_gguf_writer *w, const char *key, uint32_t type,
                                  const void *value, size_t len)
{
    char k[96];
    nvfp4_io_printable(k, sizeof k, key);
    for (size_t i = 0; i < w->nkv; i++)
        if (!strcmp(w->kvs[i].key, key))
            return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "gguf writer: key '%s' added twice", k);
    if (!strcmp(key, "general.alignment")) {
        uint32_t a = 0;
        if (type == GGUF_U32 && len == 4) memcpy(&a, value, 4);
        if (!a || (a & (a - 1)) || a > 1u << 20)
            return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                              "gguf writer: general.alignment must be a u32 power of two");
        w->alignment = a;
    }
    if (!grow((void **)&w->kvs, &w->kv_cap, w->nkv, sizeof *w->kvs))
        return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "gguf writer: no memory");
    gw_kv *kv = &w->kvs[w->nkv];
    kv->key = strdup(key);
    kv->value = malloc(len ? len : 1);
    if (!kv->key || !kv->value) {
        free(kv->key);
        free(kv->value);
        return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "gguf writer: no memory");
    }
    memcpy(kv->value, value, len);
    kv->type = type;
    kv->len = len;
    w->nkv++;
    return NVFP4_OK;
}

nvfp4_status nvfp4_gguf_writer_kv_string(nvfp4_gguf_writer *w, const char *key, const char *s)
{
    size_t n = strlen(s);
    uint8_t *buf = malloc(8 + n);
    if (!buf) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "gguf writer: no memory");
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(buf + 8, s, n);
    nvfp4_status st = nvfp4_gguf_writer_kv(w, key, GGUF_STRING, buf, 8 + n);
    free(buf);
    return st;
}

nvfp4_status nvfp4_gguf_writer_tensor(nvfp4_gguf_writer *w, const char *name, uint32_t type,
                                      int ndim, const int64_t *ne, const void *data,
                                      fmt_fill_fn fill, void *ctx)
{
    char n[96];
    nvfp4_io_printable(n, sizeof n, name);
    if (strlen(name) >= GGML_MAX_NAME)
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED,
                          "tensor '%s': GGUF readers (ggml) take names of at most %d bytes",
                          n, GGML_MAX_NAME - 1);
    uint64_t nbytes = 0;
    if (!nvfp4_ggml_size(type, ndim, ne, &nbytes) || !nbytes || (!data && !fill))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "gguf writer: tensor '%s': no %s tensor has that shape, or no data", n,
                          nvfp4_ggml_type_name(type) ? nvfp4_ggml_type_name(type) : "such");
    for (size_t i = 0; i < w->count; i++)
        if (!strcmp(w->tensors[i].name, name))
            return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "gguf writer: tensor '%s' added twice", n);
    if (!grow((void **)&w->tensors, &w->cap, w->count, sizeof *w->tensors))
        return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "gguf writer: no memory");
    gw_tensor *t = &w->tensors[w->count];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    if (!t->name) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "gguf writer: no memory");
    t->type = type;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->ne[d] = ne[d];
    t->nbytes = nbytes;
    t->data = data;
    t->fill = fill;
    t->ctx = ctx;
    w->count++;
    return NVFP4_OK;
}

/* Little-endian serialization into a growing buffer. */
typedef struct buf {
    uint8_t *p;
    size_t len, cap;
    int oom;
} buf;

static void put(buf *b, const void *data, size_t n)
{
    if (b->oom) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void put_u32(buf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, x, 4);
}

static void put_u64(buf *b, uint64_t v)
{
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}

static void put_string(buf *b, const char *s)
{
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

nvfp4_status nvfp4_gguf_writer_write(nvfp4_gguf_writer *w, const char *path,
                                     void (*progress)(void *ctx, uint64_t done, uint64_t total),
                                     void *progress_ctx)
{
    buf h = {0};
    uint64_t a = w->alignment, off = 0;
    put(&h, gguf_magic, 4);
    put_u32(&h, 3);
    put_u64(&h, w->count);
    put_u64(&h, w->nkv);
    for (size_t i = 0; i < w->nkv; i++) {
        put_string(&h, w->kvs[i].key);
        put_u32(&h, w->kvs[i].type);
        put(&h, w->kvs[i].value, w->kvs[i].len);
    }
    for (size_t i = 0; i < w->count; i++) {
        gw_tensor *t = &w->tensors[i];
        put_string(&h, t->name);
        put_u32(&h, (uint32_t)t->ndim);
        for (int d = 0; d < t->ndim; d++) put_u64(&h, (uint64_t)t->ne[d]);
        put_u32(&h, t->type);
        put_u64(&h, off);
        t->offset = off;
        off = (off + t->nbytes + a - 1) / a * a;
    }
    static const uint8_t zeros[64];
    while (!h.oom && h.len % a) {
        uint64_t n = a - h.len % a;
        put(&h, zeros, n < sizeof zeros ? (size_t)n : sizeof zeros);
    }
    if (h.oom) {
        free(h.p);
        return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "gguf writer: no memory for the header");
    }
    uint64_t total = h.len + off, done = 0;
    nvfp4_atomic_file *af = NULL;
    nvfp4_status st = nvfp4_atomic_open(&af, path);
    if (st != NVFP4_OK) {
        free(h.p);
        return st;
    }
    int fd = nvfp4_atomic_fd(af), e = nvfp4_write_all(fd, h.p, h.len);
    free(h.p);
    done += h.len;
    for (size_t i = 0; !e && i < w->count; i++) {
        gw_tensor *t = &w->tensors[i];
        uint8_t *tmp = NULL;
        const uint8_t *data = t->data;
        if (!data) {
            tmp = malloc(t->nbytes ? (size_t)t->nbytes : 1);
            if (!tmp) st = nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "gguf writer: no memory for '%s'", t->name);
            else st = t->fill(t->ctx, tmp, (size_t)t->nbytes);
            if (st != NVFP4_OK) {
                free(tmp);
                nvfp4_atomic_discard(af);
                return st;
            }
            data = tmp;
        }
        e = nvfp4_write_all(fd, data, (size_t)t->nbytes);
        free(tmp);
        uint64_t pad = (a - t->nbytes % a) % a;
        while (!e && pad) {
            size_t n = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
            e = nvfp4_write_all(fd, zeros, n);
            pad -= n;
        }
        done = h.len + (i + 1 < w->count ? w->tensors[i + 1].offset : off);
        if (progress) progress(progress_ctx, done, total);
    }
    return nvfp4_atomic_commit_after(af, e);
}
