/* safetensors_write.c -- queue tensors, then write them atomically.
 *
 * The file is deterministic: the header is compact JSON with "__metadata__"
 * first (when set), then the tensors in the order they were added, their
 * data contiguous in that order; the header is padded with spaces so the
 * data starts at a multiple of 8.  It is written to a temporary file in the
 * target's directory, fsync'ed and renamed over the target, so a reader
 * sees either the old file or the complete new one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "fmt_internal.h"

/* Data is written, and progress reported, in pieces of at most this size. */
#define ST_WRITE_CHUNK ((size_t)64 << 20)

typedef struct st_item {
    char *name;
    nvfp4_dtype dtype;
    int ndim;
    int64_t shape[NVFP4_ST_MAX_DIMS];
    const void *data;
    size_t nbytes;
    void *owned; /* the copy made by add_copy, else NULL */
    fmt_fill_fn fill; /* add_fill: makes the bytes when they are written */
    void *fill_ctx;
} st_item;

struct nvfp4_st_writer {
    st_item *items;
    size_t count, cap;
    size_t *slots; /* open-addressing name index: item index + 1, 0 = empty */
    size_t nslots; /* a power of two, more than twice count */
    char **meta_keys, **meta_values;
    size_t meta_count, meta_cap;
};

static size_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ULL;
    return (size_t)h;
}

/* The slot holding `name`, or the empty slot where it would go. */
static size_t *name_slot(const nvfp4_st_writer *w, const char *name)
{
    size_t mask = w->nslots - 1;
    for (size_t i = name_hash(name) & mask;; i = (i + 1) & mask)
        if (!w->slots[i] || strcmp(w->items[w->slots[i] - 1].name, name) == 0) return &w->slots[i];
}

/* Rebuild the index for the queued items with room for `want` of them. */
static int reindex(nvfp4_st_writer *w, size_t want)
{
    size_t n = 64;
    while (n < 2 * want + 2) n *= 2;
    size_t *slots = calloc(n, sizeof *slots);
    if (!slots) return 0;
    free(w->slots);
    w->slots = slots;
    w->nslots = n;
    for (size_t i = 0; i < w->count; i++) *name_slot(w, w->items[i].name) = i + 1;
    return 1;
}

static int is_utf8(const char *s)
{
    json_t *j = json_string(s); /* jansson validates UTF-8 here */
    int ok = j != NULL;
    json_decref(j);
    return ok;
}

nvfp4_status nvfp4_st_writer_new(nvfp4_st_writer **out)
{
    if (!out) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_st_writer_new: out is NULL");
    *out = calloc(1, sizeof **out);
    if (!*out) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "nvfp4_st_writer_new: no memory");
    return NVFP4_OK;
}

size_t nvfp4_st_writer_size(const nvfp4_st_writer *w) { return w ? w->count : 0; }

void nvfp4_st_writer_truncate(nvfp4_st_writer *w, size_t count)
{
    if (!w) return;
    while (w->count > count) {
        st_item *it = &w->items[--w->count];
        free(it->name);
        free(it->owned);
    }
    if (w->slots) { /* rebuild in place: the table is big enough for fewer items */
        memset(w->slots, 0, w->nslots * sizeof *w->slots);
        for (size_t i = 0; i < w->count; i++) *name_slot(w, w->items[i].name) = i + 1;
    }
}

void nvfp4_st_writer_free(nvfp4_st_writer *w)
{
    if (!w) return;
    nvfp4_st_writer_truncate(w, 0);
    for (size_t i = 0; i < w->meta_count; i++) {
        free(w->meta_keys[i]);
        free(w->meta_values[i]);
    }
    free(w->items);
    free(w->slots);
    free(w->meta_keys);
    free(w->meta_values);
    free(w);
}

/* Everything a reader would check, checked before anything is queued. */
static nvfp4_status check_tensor(const nvfp4_st_writer *w, const char *name, nvfp4_dtype dtype,
                                 int ndim, const int64_t *shape, const void *data, size_t nbytes)
{
    char shown[128];
    if (!w) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_st_writer_add: writer is NULL");
    if (!name || !name[0])
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_st_writer_add: tensor name is NULL or empty");
    nvfp4_io_printable(shown, sizeof shown, name);
    if (strcmp(name, "__metadata__") == 0 || !is_utf8(name))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_st_writer_add: tensor '%s': the name is reserved or not UTF-8",
                          shown);
    if (nvfp4_dtype_size(dtype) == 0)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_st_writer_add: tensor '%s': invalid dtype %d", shown, (int)dtype);
    if (ndim < 0 || ndim > NVFP4_ST_MAX_DIMS || (ndim > 0 && !shape))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_st_writer_add: tensor '%s': ndim %d is not in 0..%d (or shape "
                          "is NULL)",
                          shown, ndim, NVFP4_ST_MAX_DIMS);
    uint64_t nonzero = 1;
    int has_zero = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                              "nvfp4_st_writer_add: tensor '%s': shape[%d] = %lld is negative",
                              shown, d, (long long)shape[d]);
        if (shape[d] == 0) {
            has_zero = 1;
        } else if (nonzero > (uint64_t)INT64_MAX / (uint64_t)shape[d]) {
            return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                              "nvfp4_st_writer_add: tensor '%s': shape product overflows", shown);
        } else {
            nonzero *= (uint64_t)shape[d];
        }
    }
    uint64_t elems = has_zero ? 0 : nonzero;
    size_t want;
    if (elems > SIZE_MAX || !nvfp4_mul_size((size_t)elems, nvfp4_dtype_size(dtype), &want) ||
        want != nbytes)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_st_writer_add: tensor '%s': %llu elements of %s are not %zu "
                          "bytes",
                          shown, (unsigned long long)elems, nvfp4_dtype_name(dtype), nbytes);
    if (nbytes && !data)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_st_writer_add: tensor '%s': data is NULL", shown);
    if (w->slots && *name_slot(w, name))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_st_writer_add: tensor '%s' was already added", shown);
    return NVFP4_OK;
}

static nvfp4_status push_item(nvfp4_st_writer *w, const char *name, nvfp4_dtype dtype, int ndim,
                              const int64_t *shape, const void *data, size_t nbytes, void *owned)
{
    if (2 * (w->count + 1) + 2 > w->nslots && !reindex(w, 2 * (w->count + 1)))
        return NVFP4_ERR_OUT_OF_MEMORY;
    if (w->count == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        st_item *items = realloc(w->items, cap * sizeof *items);
        if (!items) return NVFP4_ERR_OUT_OF_MEMORY;
        w->items = items;
        w->cap = cap;
    }
    st_item *it = &w->items[w->count];
    memset(it, 0, sizeof *it);
    it->name = strdup(name);
    if (!it->name) return NVFP4_ERR_OUT_OF_MEMORY;
    it->dtype = dtype;
    it->ndim = ndim;
    for (int d = 0; d < ndim; d++) it->shape[d] = shape[d];
    it->data = data;
    it->nbytes = nbytes;
    it->owned = owned;
    w->count++;
    *name_slot(w, name) = w->count;
    return NVFP4_OK;
}

nvfp4_status nvfp4_st_writer_add(nvfp4_st_writer *w, const char *name, nvfp4_dtype dtype,
                                 int ndim, const int64_t *shape, const void *data, size_t nbytes)
{
    nvfp4_status s = check_tensor(w, name, dtype, ndim, shape, data, nbytes);
    if (s != NVFP4_OK) return s;
    if (push_item(w, name, dtype, ndim, shape, data, nbytes, NULL) != NVFP4_OK)
        return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "nvfp4_st_writer_add: no memory");
    return NVFP4_OK;
}

nvfp4_status nvfp4_st_writer_add_copy(nvfp4_st_writer *w, const char *name, nvfp4_dtype dtype,
                                      int ndim, const int64_t *shape, const void *data,
                                      size_t nbytes)
{
    nvfp4_status s = check_tensor(w, name, dtype, ndim, shape, data, nbytes);
    if (s != NVFP4_OK) return s;
    void *copy = malloc(nbytes ? nbytes : 1);
    if (!copy)
        return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY,
                          "nvfp4_st_writer_add_copy: no memory for %zu bytes", nbytes);
    if (nbytes) memcpy(copy, data, nbytes);
    if (push_item(w, name, dtype, ndim, shape, copy, nbytes, copy) != NVFP4_OK) {
        free(copy);
        return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "nvfp4_st_writer_add_copy: no memory");
    }
    return NVFP4_OK;
}

nvfp4_status nvfp4_st_writer_add_fill(nvfp4_st_writer *w, const char *name, nvfp4_dtype dtype,
                                      int ndim, const int64_t *shape, size_t nbytes,
                                      fmt_fill_fn fill, void *ctx)
{
    /* checked as if the bytes were there: any non-NULL pointer stands in */
    nvfp4_status s = check_tensor(w, name, dtype, ndim, shape, (const void *)&fill, nbytes);
    if (s != NVFP4_OK) return s;
    if (!fill) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_st_writer_add_fill: no fill");
    if (push_item(w, name, dtype, ndim, shape, NULL, nbytes, NULL) != NVFP4_OK)
        return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "nvfp4_st_writer_add_fill: no memory");
    w->items[w->count - 1].fill = fill;
    w->items[w->count - 1].fill_ctx = ctx;
    return NVFP4_OK;
}

nvfp4_status nvfp4_st_writer_set_metadata(nvfp4_st_writer *w, const char *key, const char *value)
{
    if (!w || !key || !value)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_st_writer_set_metadata: writer, key or value is NULL");
    if (!is_utf8(key) || !is_utf8(value)) {
        char shown[128];
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_st_writer_set_metadata: '%s': key or value is not UTF-8",
                          nvfp4_io_printable(shown, sizeof shown, key));
    }
    char *v = strdup(value);
    if (!v) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "nvfp4_st_writer_set_metadata: no memory");
    for (size_t i = 0; i < w->meta_count; i++) {
        if (strcmp(w->meta_keys[i], key) == 0) { /* a key set again keeps its place */
            free(w->meta_values[i]);
            w->meta_values[i] = v;
            return NVFP4_OK;
        }
    }
    if (w->meta_count == w->meta_cap) {
        size_t cap = w->meta_cap ? w->meta_cap * 2 : 8;
        char **k = realloc(w->meta_keys, cap * sizeof *k);
        if (k) w->meta_keys = k;
        char **vs = k ? realloc(w->meta_values, cap * sizeof *vs) : NULL;
        if (vs) w->meta_values = vs;
        if (!k || !vs) {
            free(v);
            return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "nvfp4_st_writer_set_metadata: no memory");
        }
        w->meta_cap = cap;
    }
    char *k = strdup(key);
    if (!k) {
        free(v);
        return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "nvfp4_st_writer_set_metadata: no memory");
    }
    w->meta_keys[w->meta_count] = k;
    w->meta_values[w->meta_count] = v;
    w->meta_count++;
    return NVFP4_OK;
}

/* The header JSON (compact, deterministic), or NULL when out of memory. */
static char *header_json(const nvfp4_st_writer *w)
{
    json_t *root = json_object();
    int ok = root != NULL;
    if (ok && w->meta_count) {
        json_t *meta = json_object();
        ok = meta && json_object_set_new(root, "__metadata__", meta) == 0;
        for (size_t i = 0; ok && i < w->meta_count; i++)
            ok = json_object_set_new(meta, w->meta_keys[i], json_string(w->meta_values[i])) == 0;
    }
    uint64_t offset = 0;
    for (size_t i = 0; ok && i < w->count; i++) {
        const st_item *it = &w->items[i];
        json_t *entry = json_object(), *shape = json_array(), *offs = json_array();
        ok = entry && shape && offs;
        ok = ok && json_object_set_new(entry, "dtype", json_string(nvfp4_dtype_name(it->dtype))) == 0;
        for (int d = 0; ok && d < it->ndim; d++)
            ok = json_array_append_new(shape, json_integer((json_int_t)it->shape[d])) == 0;
        ok = ok && json_array_append_new(offs, json_integer((json_int_t)offset)) == 0;
        offset += it->nbytes;
        ok = ok && json_array_append_new(offs, json_integer((json_int_t)offset)) == 0;
        /* set_new takes the reference even when it fails */
        ok = ok && json_object_set_new(entry, "shape", json_incref(shape)) == 0;
        ok = ok && json_object_set_new(entry, "data_offsets", json_incref(offs)) == 0;
        ok = ok && json_object_set_new(root, it->name, json_incref(entry)) == 0;
        json_decref(shape);
        json_decref(offs);
        json_decref(entry);
    }
    char *text = ok ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    return text;
}

typedef struct st_progress {
    void (*fn)(void *ctx, uint64_t done, uint64_t total);
    void *ctx;
    uint64_t done, reported, total;
    nvfp4_status fill_status; /* a fill callback's failure */
} st_progress;

static void advance(st_progress *p, size_t n)
{
    p->done += n;
    if (p->fn && (p->done - p->reported >= ST_WRITE_CHUNK || p->done == p->total)) {
        p->reported = p->done;
        p->fn(p->ctx, p->done, p->total);
    }
}

/* Write header and data to fd; 0 or an errno. */
static int write_contents(int fd, const nvfp4_st_writer *w, const char *json, st_progress *pr)
{
    size_t jlen = strlen(json);
    size_t hlen = (jlen + 7) & ~(size_t)7;
    uint8_t *head = malloc(8 + hlen);
    if (!head) return ENOMEM;
    for (int i = 0; i < 8; i++) head[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    memcpy(head + 8, json, jlen);
    memset(head + 8 + jlen, ' ', hlen - jlen);
    int e = nvfp4_write_all(fd, head, 8 + hlen);
    free(head);
    if (e) return e;
    advance(pr, 8 + hlen);
    for (size_t i = 0; i < w->count; i++) {
        const st_item *it = &w->items[i];
        const uint8_t *p = it->data;
        uint8_t *made = NULL;
        if (it->fill) { /* one tensor's bytes in memory at a time */
            made = malloc(it->nbytes ? it->nbytes : 1);
            if (!made) return ENOMEM;
            pr->fill_status = it->fill(it->fill_ctx, made, it->nbytes);
            if (pr->fill_status != NVFP4_OK) {
                free(made);
                return ECANCELED;
            }
            p = made;
        }
        for (size_t left = it->nbytes; left > 0 && !e;) {
            size_t n = left < ST_WRITE_CHUNK ? left : ST_WRITE_CHUNK;
            e = nvfp4_write_all(fd, p, n);
            p += n;
            left -= n;
            advance(pr, n);
        }
        free(made);
        if (e) return e;
    }
    return 0;
}

nvfp4_status nvfp4_st_writer_commit(nvfp4_st_writer *w, nvfp4_atomic_file *f,
                                    void (*progress)(void *ctx, uint64_t done, uint64_t total),
                                    void *progress_ctx)
{
    if (!w || !f) {
        nvfp4_atomic_discard(f);
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_st_writer_commit: writer or file is NULL");
    }
    uint64_t data_bytes = 0;
    for (size_t i = 0; i < w->count; i++) {
        if (w->items[i].nbytes > (uint64_t)INT64_MAX - data_bytes) {
            nvfp4_status st = nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                                         "%s: the tensors add up to more than 2^63 bytes",
                                         nvfp4_atomic_shown(f));
            nvfp4_atomic_discard(f);
            return st;
        }
        data_bytes += w->items[i].nbytes;
    }
    char *json = header_json(w);
    if (!json) {
        nvfp4_status st = nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "%s: no memory for the header",
                                     nvfp4_atomic_shown(f));
        nvfp4_atomic_discard(f);
        return st;
    }
    size_t hlen = (strlen(json) + 7) & ~(size_t)7;
    st_progress pr = {progress, progress_ctx, 0, 0, 8 + hlen + data_bytes, NVFP4_OK};
    int e = write_contents(nvfp4_atomic_fd(f), w, json, &pr);
    free(json);
    if (pr.fill_status != NVFP4_OK) { /* the callback's message stands */
        nvfp4_atomic_discard(f);
        return pr.fill_status;
    }
    return nvfp4_atomic_commit_after(f, e);
}

nvfp4_status nvfp4_st_writer_write(nvfp4_st_writer *w, const char *path,
                                   void (*progress)(void *ctx, uint64_t done, uint64_t total),
                                   void *progress_ctx)
{
    if (!w || !path || !path[0])
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_st_writer_write: writer or path is NULL or empty");
    nvfp4_atomic_file *af = NULL;
    nvfp4_status st = nvfp4_atomic_open(&af, path);
    if (st != NVFP4_OK) return st;
    return nvfp4_st_writer_commit(w, af, progress, progress_ctx);
}
