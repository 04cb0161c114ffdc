/* safetensors_read.c -- map a safetensors file and validate all of its header
 * before handing out a single tensor.
 *
 * Layout: u64 little-endian header length N, N bytes of JSON (an object:
 * tensor name -> {"dtype", "shape", "data_offsets": [begin, end]}, plus an
 * optional "__metadata__" string map), then the data buffer the offsets are
 * relative to.  As in the format's specification the buffer must be covered
 * exactly: no overlaps, no holes, no trailing bytes (a file that could hide a
 * second payload, or was cut short, is rejected).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "io_internal.h"

struct nvfp4_st_file {
    char *path;                     /* path or label, for messages */
    void *map;                      /* mmap'ed file (NULL for open_memory) */
    size_t map_len;
    nvfp4_st_tensor *tensors;       /* sorted by data offset */
    size_t count;
    const nvfp4_st_tensor **by_name; /* sorted by name, for find */
    char **meta_keys;
    char **meta_values;
    size_t meta_count;
};

/* One header entry while parsing: the tensor plus where its bytes are. */
typedef struct st_entry {
    nvfp4_st_tensor t;
    uint64_t begin, end;
    size_t order; /* position in the header, to sort ties stably */
} st_entry;

typedef struct st_parse {
    const char *label;
    const uint8_t *data; /* buffer after the header */
    size_t data_len;
} st_parse;

const char *nvfp4_io_printable(char *buf, size_t len, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (!s) s = "(null)";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (o + 8 >= len) { /* room for "\xNN" or "..." and the NUL */
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        if (*p >= 0x20 && *p < 0x7f) {
            buf[o++] = (char)*p;
        } else {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[*p >> 4];
            buf[o++] = hex[*p & 15];
        }
    }
    buf[o] = '\0';
    return buf;
}

/* "LABEL: tensor 'NAME': what" (or "LABEL: what" when tensor is NULL). */
static nvfp4_status st_bad(const st_parse *p, const char *tensor, const char *fmt, ...)
    NVFP4_PRINTF(3, 4);
static nvfp4_status st_bad(const st_parse *p, const char *tensor, const char *fmt, ...)
{
    char what[320], label[128], name[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    nvfp4_io_printable(label, sizeof label, p->label);
    if (tensor)
        return nvfp4_fail(NVFP4_ERR_MALFORMED, "%s: tensor '%s': %s", label,
                          nvfp4_io_printable(name, sizeof name, tensor), what);
    return nvfp4_fail(NVFP4_ERR_MALFORMED, "%s: %s", label, what);
}

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "an unknown JSON value";
}

/* A non-negative JSON integer, or -1 (not an integer) / -2 (negative). */
static int json_to_u64(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v)) return -1;
    json_int_t i = json_integer_value(v);
    if (i < 0) return -2;
    *out = (uint64_t)i;
    return 0;
}

static void free_file(nvfp4_st_file *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->count; i++) free((char *)f->tensors[i].name);
    for (size_t i = 0; i < f->meta_count; i++) {
        free(f->meta_keys[i]);
        free(f->meta_values[i]);
    }
    free(f->tensors);
    free(f->by_name);
    free(f->meta_keys);
    free(f->meta_values);
    if (f->map) munmap(f->map, f->map_len);
    free(f->path);
    free(f);
}

/* jansson stops at the first repeated key and says "duplicate object key"
 * without the key when it is long; its error position is just past the
 * key's closing quote, so recover the key from the raw text there.  An
 * unescaped quote preceded (modulo white space) by '{' or ',' opens a key:
 * a quote inside a string is always escaped. */
static int duplicate_key_at(const char *hdr, size_t hdr_len, int position, char *out, size_t len)
{
    if (position < 2 || (size_t)position > hdr_len || hdr[position - 1] != '"') return 0;
    size_t stop = (size_t)position > 65536 ? (size_t)position - 65536 : 0;
    for (size_t i = (size_t)position - 1; i-- > stop;) {
        if (hdr[i] != '"') continue;
        size_t j = i;
        while (j > 0 && strchr(" \t\r\n", hdr[j - 1])) j--;
        if (j == 0 || (hdr[j - 1] != '{' && hdr[j - 1] != ',')) continue;
        json_error_t err;
        json_t *key = json_loadb(hdr + i, (size_t)position - i, JSON_DECODE_ANY, &err);
        int ok = key && json_is_string(key);
        if (ok) nvfp4_io_printable(out, len, json_string_value(key));
        json_decref(key);
        return ok;
    }
    return 0;
}

static nvfp4_status parse_metadata(nvfp4_st_file *f, const st_parse *p, json_t *meta)
{
    if (!json_is_object(meta))
        return st_bad(p, NULL, "\"__metadata__\" is %s, not an object of strings",
                      json_kind(meta));
    size_t n = json_object_size(meta);
    f->meta_keys = calloc(n ? n : 1, sizeof *f->meta_keys);
    f->meta_values = calloc(n ? n : 1, sizeof *f->meta_values);
    if (!f->meta_keys || !f->meta_values)
        return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "%s: no memory for the metadata", p->label);
    const char *key;
    json_t *value;
    json_object_foreach(meta, key, value) {
        if (!json_is_string(value)) {
            char k[128];
            return st_bad(p, NULL, "\"__metadata__\" value of '%s' is %s, not a string",
                          nvfp4_io_printable(k, sizeof k, key), json_kind(value));
        }
        char *k = strdup(key), *v = strdup(json_string_value(value));
        if (!k || !v) {
            free(k);
            free(v);
            return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "%s: no memory for the metadata",
                              p->label);
        }
        f->meta_keys[f->meta_count] = k;
        f->meta_values[f->meta_count] = v;
        f->meta_count++;
    }
    return NVFP4_OK;
}

static nvfp4_status parse_entry(st_entry *e, const st_parse *p, const char *name, json_t *v)
{
    if (!json_is_object(v)) return st_bad(p, name, "entry is %s, not an object", json_kind(v));

    json_t *jdtype = json_object_get(v, "dtype");
    if (!jdtype) return st_bad(p, name, "missing \"dtype\"");
    if (!json_is_string(jdtype))
        return st_bad(p, name, "\"dtype\" is %s, not a string", json_kind(jdtype));
    e->t.dtype = nvfp4_dtype_from_name(json_string_value(jdtype));
    if (e->t.dtype == NVFP4_DTYPE_INVALID) {
        char d[64];
        return st_bad(p, name, "unknown dtype '%s'",
                      nvfp4_io_printable(d, sizeof d, json_string_value(jdtype)));
    }

    json_t *jshape = json_object_get(v, "shape");
    if (!jshape) return st_bad(p, name, "missing \"shape\"");
    if (!json_is_array(jshape))
        return st_bad(p, name, "\"shape\" is %s, not an array", json_kind(jshape));
    size_t rank = json_array_size(jshape);
    if (rank > NVFP4_ST_MAX_DIMS)
        return st_bad(p, name, "rank %zu is more than %d dimensions", rank, NVFP4_ST_MAX_DIMS);
    e->t.ndim = (int)rank;
    /* The product of the non-zero dims must fit in int64_t, so that callers
     * can multiply dims without overflow whatever the zero dims are. */
    uint64_t nonzero = 1;
    int has_zero = 0;
    for (size_t d = 0; d < rank; d++) {
        uint64_t dim;
        int r = json_to_u64(json_array_get(jshape, d), &dim);
        if (r == -1)
            return st_bad(p, name, "shape[%zu] is %s, not an integer", d,
                          json_kind(json_array_get(jshape, d)));
        if (r == -2)
            return st_bad(p, name, "shape[%zu] = %lld is negative", d,
                          (long long)json_integer_value(json_array_get(jshape, d)));
        if (dim != 0) {
            if (nonzero > (uint64_t)INT64_MAX / dim)
                return st_bad(p, name, "the product of the shape overflows 64 bits");
            nonzero *= dim;
        }
        has_zero |= dim == 0;
        e->t.shape[d] = (int64_t)dim;
    }
    uint64_t elems = has_zero ? 0 : nonzero;
    size_t esize = nvfp4_dtype_size(e->t.dtype);
    if (elems > (uint64_t)INT64_MAX / esize)
        return st_bad(p, name, "shape x %s size overflows 64 bits", nvfp4_dtype_name(e->t.dtype));
    uint64_t want_bytes = elems * esize;

    json_t *joff = json_object_get(v, "data_offsets");
    if (!joff) return st_bad(p, name, "missing \"data_offsets\"");
    if (!json_is_array(joff) || json_array_size(joff) != 2) {
        if (json_is_array(joff))
            return st_bad(p, name, "\"data_offsets\" has %zu elements, not 2 ([begin, end])",
                          json_array_size(joff));
        return st_bad(p, name, "\"data_offsets\" is %s, not [begin, end]", json_kind(joff));
    }
    for (size_t k = 0; k < 2; k++) {
        json_t *jo = json_array_get(joff, k);
        int r = json_to_u64(jo, k ? &e->end : &e->begin);
        if (r == -1)
            return st_bad(p, name, "data_offsets[%zu] is %s, not an integer", k, json_kind(jo));
        if (r == -2)
            return st_bad(p, name, "data_offsets[%zu] = %lld is negative", k,
                          (long long)json_integer_value(jo));
    }
    if (e->begin > e->end)
        return st_bad(p, name, "data_offsets begin %llu is after end %llu",
                      (unsigned long long)e->begin, (unsigned long long)e->end);
    if (e->end > p->data_len)
        return st_bad(p, name, "data_offsets end %llu is past the end of the data (%zu bytes)",
                      (unsigned long long)e->end, p->data_len);
    if (e->end - e->begin != want_bytes)
        return st_bad(p, name,
                      "shape (%llu elements of %s) needs %llu bytes but data_offsets [%llu, %llu] "
                      "hold %llu",
                      (unsigned long long)elems, nvfp4_dtype_name(e->t.dtype),
                      (unsigned long long)want_bytes, (unsigned long long)e->begin,
                      (unsigned long long)e->end, (unsigned long long)(e->end - e->begin));
    e->t.data = p->data + e->begin;
    e->t.nbytes = (size_t)want_bytes;
    return NVFP4_OK;
}

static int cmp_offset(const void *a, const void *b)
{
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int cmp_name(const void *a, const void *b)
{
    const nvfp4_st_tensor *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

/* Every byte of the data must belong to exactly one tensor. */
static nvfp4_status check_coverage(const st_parse *p, const st_entry *e, size_t n)
{
    uint64_t covered = 0;
    for (size_t i = 0; i < n; i++) {
        if (e[i].begin < covered) {
            char prev[128];
            nvfp4_io_printable(prev, sizeof prev, e[i - 1].t.name);
            return st_bad(p, e[i].t.name,
                          "data_offsets [%llu, %llu] overlap tensor '%s' [%llu, %llu]",
                          (unsigned long long)e[i].begin, (unsigned long long)e[i].end, prev,
                          (unsigned long long)e[i - 1].begin, (unsigned long long)e[i - 1].end);
        }
        if (e[i].begin > covered)
            return st_bad(p, e[i].t.name,
                          "bytes [%llu, %llu) of the data before it belong to no tensor",
                          (unsigned long long)covered, (unsigned long long)e[i].begin);
        covered = e[i].end;
    }
    if (covered != p->data_len)
        return st_bad(p, NULL,
                      "bytes [%llu, %zu) at the end of the data belong to no tensor "
                      "(trailing garbage, or a header that lost entries)",
                      (unsigned long long)covered, p->data_len);
    return NVFP4_OK;
}

static nvfp4_status parse_header(nvfp4_st_file *f, const uint8_t *bytes, size_t nbytes)
{
    st_parse p = {f->path, NULL, 0};
    if (nbytes < 8)
        return st_bad(&p, NULL,
                      "file is %zu bytes, shorter than the 8-byte header length that starts "
                      "a safetensors file",
                      nbytes);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | bytes[i];
    if (hlen > NVFP4_ST_MAX_HEADER)
        return st_bad(&p, NULL, "header length %llu is absurd (limit %llu bytes)",
                      (unsigned long long)hlen, (unsigned long long)NVFP4_ST_MAX_HEADER);
    if (hlen > nbytes - 8)
        return st_bad(&p, NULL,
                      "header length %llu runs past the end of the file (%zu bytes; truncated?)",
                      (unsigned long long)hlen, nbytes);
    const char *hdr = (const char *)bytes + 8;
    if (hlen == 0 || hdr[0] != '{')
        return st_bad(&p, NULL, "header does not start with '{' (not a safetensors file?)");
    p.data = bytes + 8 + hlen;
    p.data_len = nbytes - 8 - (size_t)hlen;

    json_error_t err;
    json_t *root = json_loadb(hdr, (size_t)hlen, JSON_REJECT_DUPLICATES, &err);
    if (!root) {
        char key[128];
        if (json_error_code(&err) == json_error_duplicate_key &&
            duplicate_key_at(hdr, (size_t)hlen, err.position, key, sizeof key))
            return st_bad(&p, NULL,
                          "'%s' appears twice in the header (tensor names and metadata keys "
                          "must be unique)",
                          key);
        return st_bad(&p, NULL, "header is not valid JSON: %s (header byte %d)", err.text,
                      err.position);
    }
    nvfp4_status s = NVFP4_OK;
    st_entry *entries = NULL;
    size_t n = 0;
    if (!json_is_object(root)) {
        s = st_bad(&p, NULL, "header is %s, not a JSON object", json_kind(root));
        goto done;
    }
    size_t cap = json_object_size(root);
    entries = calloc(cap ? cap : 1, sizeof *entries);
    if (!entries) {
        s = nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "%s: no memory for %zu header entries", f->path,
                       cap);
        goto done;
    }
    const char *key;
    json_t *value;
    json_object_foreach(root, key, value) {
        if (strcmp(key, "__metadata__") == 0) {
            s = parse_metadata(f, &p, value);
            if (s != NVFP4_OK) goto done;
            continue;
        }
        st_entry *e = &entries[n];
        s = parse_entry(e, &p, key, value);
        if (s != NVFP4_OK) goto done;
        e->order = n;
        e->t.name = strdup(key);
        if (!e->t.name) {
            s = nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "%s: no memory for tensor names", f->path);
            goto done;
        }
        n++;
    }
    qsort(entries, n, sizeof *entries, cmp_offset);
    s = check_coverage(&p, entries, n);
    if (s != NVFP4_OK) goto done;

    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    f->by_name = calloc(n ? n : 1, sizeof *f->by_name);
    if (!f->tensors || !f->by_name) {
        s = nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "%s: no memory for %zu tensors", f->path, n);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        f->tensors[i] = entries[i].t;
        entries[i].t.name = NULL; /* now owned by f */
        f->by_name[i] = &f->tensors[i];
    }
    f->count = n;
    qsort(f->by_name, n, sizeof *f->by_name, cmp_name);

done:
    if (entries)
        for (size_t i = 0; i < n; i++) free((char *)entries[i].t.name);
    free(entries);
    json_decref(root);
    return s;
}

static nvfp4_status new_file(nvfp4_st_file **out, const char *label)
{
    nvfp4_st_file *f = calloc(1, sizeof *f);
    if (f) f->path = strdup(label);
    if (!f || !f->path) {
        free(f);
        return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "safetensors: no memory to open %s", label);
    }
    *out = f;
    return NVFP4_OK;
}

nvfp4_status nvfp4_st_open_memory(nvfp4_st_file **out, const void *bytes, size_t nbytes,
                                  const char *label)
{
    if (!out) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_st_open_memory: out is NULL");
    *out = NULL;
    if (!label) label = "<memory>";
    if (!bytes && nbytes)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_st_open_memory: %s: bytes is NULL but nbytes is %zu", label,
                          nbytes);
    nvfp4_st_file *f;
    nvfp4_status s = new_file(&f, label);
    if (s != NVFP4_OK) return s;
    s = parse_header(f, bytes, nbytes);
    if (s != NVFP4_OK) {
        free_file(f);
        return s;
    }
    *out = f;
    return NVFP4_OK;
}

nvfp4_status nvfp4_st_open(nvfp4_st_file **out, const char *path)
{
    if (!out) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_st_open: out is NULL");
    *out = NULL;
    if (!path) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_st_open: path is NULL");
    void *map;
    size_t size;
    nvfp4_status s = nvfp4_io_map(path, 8, &map, &size);
    if (s != NVFP4_OK) return s;
    nvfp4_st_file *f;
    s = new_file(&f, path);
    if (s != NVFP4_OK) {
        if (map) munmap(map, size);
        return s;
    }
    f->map = map;
    f->map_len = map ? size : 0;
    s = parse_header(f, f->map, size);
    if (s != NVFP4_OK) {
        free_file(f);
        return s;
    }
    *out = f;
    return NVFP4_OK;
}

void nvfp4_st_close(nvfp4_st_file *f) { free_file(f); }

size_t nvfp4_st_count(const nvfp4_st_file *f) { return f ? f->count : 0; }

const nvfp4_st_tensor *nvfp4_st_get(const nvfp4_st_file *f, size_t i)
{
    return f && i < f->count ? &f->tensors[i] : NULL;
}

const nvfp4_st_tensor *nvfp4_st_find(const nvfp4_st_file *f, const char *name)
{
    if (!f || !name || f->count == 0) return NULL;
    nvfp4_st_tensor key = {0};
    key.name = name;
    const nvfp4_st_tensor *pkey = &key;
    const nvfp4_st_tensor **hit =
        bsearch(&pkey, f->by_name, f->count, sizeof *f->by_name, cmp_name);
    return hit ? *hit : NULL;
}

size_t nvfp4_st_metadata_count(const nvfp4_st_file *f) { return f ? f->meta_count : 0; }

void nvfp4_st_metadata(const nvfp4_st_file *f, size_t i, const char **key, const char **value)
{
    int ok = f && i < f->meta_count;
    if (key) *key = ok ? f->meta_keys[i] : NULL;
    if (value) *value = ok ? f->meta_values[i] : NULL;
}

const char *nvfp4_st_path(const nvfp4_st_file *f) { return f ? f->path : NULL; }

void nvfp4_st_map_range(const nvfp4_st_file *f, const uint8_t **base, size_t *len)
{
    *base = f ? f->map : NULL;
    *len = f && f->map ? f->map_len : 0;
}
