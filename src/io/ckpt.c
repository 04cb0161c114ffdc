/* ckpt.c -- a checkpoint of any NVFP4 format: one safetensors file, a
 * directory of them (sharded through model.safetensors.index.json), or a
 * GGUF file; the format detected from its configs and tensors; NVFP4
 * tensors read exactly as stored (nvfp4_ckpt_tensor) and linear layers
 * loaded the way the GEMM wants them.  Files are mapped: a tensor's bytes
 * are only touched when it is read. */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "ckpt_internal.h"

static const char index_name[] = "model.safetensors.index.json";

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const ck_entry *)a)->name, ((const ck_entry *)b)->name);
}

const ck_entry *nvfp4_ck_find(const nvfp4_ckpt *c, const char *name)
{
    if (!name || !c->nsorted) return NULL;
    ck_entry key = {0};
    key.name = name;
    return bsearch(&key, c->sorted, c->nsorted, sizeof *c->sorted, cmp_entry);
}

/*---- opening ----*/

static char *join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static json_t *load_json(const char *dir, const char *name)
{
    char *p = join(dir, name);
    json_t *j = NULL;
    if (p && is_file(p)) {
        json_error_t err;
        j = json_load_file(p, JSON_REJECT_DUPLICATES, &err);
        if (j && !json_is_object(j)) {
            json_decref(j);
            j = NULL;
        }
    }
    free(p);
    return j;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The shard file names of a directory: the index's weight_map values
 * (sorted, unique), else model.safetensors, else every *.safetensors. */
static nvfp4_status list_shards(nvfp4_ckpt *c, char ***names, size_t *n)
{
    char shown[256];
    nvfp4_io_printable(shown, sizeof shown, c->path);
    *names = NULL;
    *n = 0;
    char *ip = join(c->dir, index_name);
    if (!ip) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "%s: no memory", shown);
    if (is_file(ip)) {
        json_error_t err;
        json_t *idx = json_load_file(ip, JSON_REJECT_DUPLICATES, &err);
        free(ip);
        json_t *map = idx ? json_object_get(idx, "weight_map") : NULL;
        if (!map || !json_is_object(map)) {
            json_decref(idx);
            return nvfp4_fail(NVFP4_ERR_MALFORMED, "%s/%s: %s", shown, index_name,
                              idx ? "no \"weight_map\" object" : err.text);
        }
        size_t cap = json_object_size(map);
        char **v = calloc(cap ? cap : 1, sizeof *v);
        c->index = idx; /* kept: nvfp4_ck_check_index() reads it after the shards */
        if (!v) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "%s: no memory", shown);
        const char *k;
        json_t *val;
        json_object_foreach(map, k, val) {
            const char *f = json_string_value(val);
            if (!f || strchr(f, '/') || !strcmp(f, "..") || !strcmp(f, ".")) {
                char kk[128];
                for (size_t i = 0; i < *n; i++) free(v[i]);
                free(v);
                return nvfp4_fail(NVFP4_ERR_MALFORMED,
                                  "%s/%s: weight_map['%s'] is not a file name in the directory",
                                  shown, index_name, nvfp4_io_printable(kk, sizeof kk, k));
            }
            int seen = 0;
            for (size_t i = 0; i < *n && !seen; i++) seen = !strcmp(v[i], f);
            if (!seen && !(v[(*n)++] = strdup(f))) {
                for (size_t i = 0; i + 1 < *n; i++) free(v[i]);
                free(v);
                return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "%s: no memory", shown);
            }
        }
        qsort(v, *n, sizeof *v, cmp_str);
        *names = v;
        return NVFP4_OK;
    }
    free(ip);
    char *single = join(c->dir, "model.safetensors");
    if (!single) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "%s: no memory", shown);
    int have_single = is_file(single);
    free(single);
    size_t cap = 16;
    char **v = calloc(cap, sizeof *v);
    if (!v) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "%s: no memory", shown);
    if (have_single) {
        v[0] = strdup("model.safetensors");
        *n = v[0] != NULL;
    } else {
        DIR *d = opendir(c->dir);
        struct dirent *de;
        while (d && (de = readdir(d))) {
            if (!ends_with(de->d_name, ".safetensors") || de->d_name[0] == '.') continue;
            if (*n == cap) {
                char **g = realloc(v, 2 * cap * sizeof *v);
                if (!g) break;
                v = g;
                cap *= 2;
            }
            if ((v[*n] = strdup(de->d_name))) (*n)++;
        }
        if (d) closedir(d);
        qsort(v, *n, sizeof *v, cmp_str);
    }
    if (!*n) {
        free(v);
        return nvfp4_fail(NVFP4_ERR_NOT_FOUND, "%s: no %s, model.safetensors or *.safetensors",
                          shown, index_name);
    }
    *names = v;
    return NVFP4_OK;
}

static nvfp4_status collect_metadata(nvfp4_ckpt *c)
{
    size_t n = c->gguf ? nvfp4_gguf_kv_count(c->gguf) : 0;
    for (size_t s = 0; s < c->nshards; s++) n += nvfp4_st_metadata_count(c->shards[s].st);
    c->meta_k = calloc(n ? n : 1, sizeof *c->meta_k);
    c->meta_v = calloc(n ? n : 1, sizeof *c->meta_v);
    c->meta_owned = calloc(n ? n : 1, sizeof *c->meta_owned);
    if (!c->meta_k || !c->meta_v || !c->meta_owned)
        return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "checkpoint: no memory");
    for (size_t i = 0; c->gguf && i < nvfp4_gguf_kv_count(c->gguf); i++) {
        const gguf_kv *kv = nvfp4_gguf_kv(c->gguf, i);
        if (kv->type != GGUF_STRING) continue;
        char *v = strndup((const char *)kv->value + 8, (size_t)kv->value_len - 8);
        if (!v) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "checkpoint: no memory");
        c->meta_owned[c->nmeta] = v;
        c->meta_k[c->nmeta] = kv->key;
        c->meta_v[c->nmeta++] = v;
    }
    for (size_t s = 0; s < c->nshards; s++)
        for (size_t i = 0; i < nvfp4_st_metadata_count(c->shards[s].st); i++) {
            nvfp4_st_metadata(c->shards[s].st, i, &c->meta_k[c->nmeta], &c->meta_v[c->nmeta]);
            c->nmeta++;
        }
    return NVFP4_OK;
}

/* Every tensor of the checkpoint, sorted by name; duplicates are an error. */
static nvfp4_status build_index(nvfp4_ckpt *c)
{
    size_t total = 0;
    if (c->gguf) total = nvfp4_gguf_count(c->gguf);
    for (size_t s = 0; s < c->nshards; s++) total += nvfp4_st_count(c->shards[s].st);
    c->sorted = calloc(total ? total : 1, sizeof *c->sorted);
    if (!c->sorted) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "checkpoint: no memory");
    size_t n = 0;
    if (c->gguf) {
        for (size_t i = 0; i < nvfp4_gguf_count(c->gguf); i++) {
            const gguf_tensor *t = nvfp4_gguf_get(c->gguf, i);
            c->sorted[n++] = (ck_entry){t->name, 0, -1, NULL, t};
        }
    }
    for (size_t s = 0; s < c->nshards; s++)
        for (size_t i = 0; i < nvfp4_st_count(c->shards[s].st); i++) {
            const nvfp4_st_tensor *t = nvfp4_st_get(c->shards[s].st, i);
            c->sorted[n++] = (ck_entry){t->name, 0, (int)s, t, NULL};
        }
    for (size_t i = 0; i < n; i++) c->sorted[i].order = (int)i; /* file order, shards in turn */
    c->nsorted = n;
    qsort(c->sorted, n, sizeof *c->sorted, cmp_entry);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(c->sorted[i - 1].name, c->sorted[i].name)) {
            char a[128];
            return nvfp4_fail(NVFP4_ERR_MALFORMED, "%s: tensor '%s' is in two shards",
                              c->path, nvfp4_io_printable(a, sizeof a, c->sorted[i].name));
        }
    c->order = malloc((n ? n : 1) * sizeof *c->order);
    if (!c->order) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "checkpoint: no memory");
    for (size_t i = 0; i < n; i++) c->order[c->sorted[i].order] = &c->sorted[i];
    nvfp4_status ms = collect_metadata(c);
    if (ms != NVFP4_OK) return ms;
    if (c->index) { /* the index must name the shard that holds each tensor */
        json_t *map = json_object_get(c->index, "weight_map");
        const char *k;
        json_t *val;
        json_object_foreach(map, k, val) {
            const ck_entry *e = nvfp4_ck_find(c, k);
            if (!e || e->shard < 0 || strcmp(c->shards[e->shard].name, json_string_value(val))) {
                char a[128], b[128];
                return nvfp4_fail(NVFP4_ERR_MALFORMED, "%s: the index puts '%s' in %s, %s",
                                  c->path, nvfp4_io_printable(a, sizeof a, k),
                                  nvfp4_io_printable(b, sizeof b, json_string_value(val)),
                                  e ? "but another shard holds it" : "which does not hold it");
            }
        }
    }
    return NVFP4_OK;
}

static int gguf_magic_at(const char *path)
{
    FILE *f = fopen(path, "rb");
    unsigned char m[4] = {0};
    size_t n = f ? fread(m, 1, 4, f) : 0;
    if (f) fclose(f);
    return n == 4 && !memcmp(m, "GGUF", 4);
}

void nvfp4_ckpt_close(nvfp4_ckpt *c)
{
    if (!c) return;
    for (size_t s = 0; s < c->nshards; s++) {
        nvfp4_st_close(c->shards[s].st);
        free(c->shards[s].name);
    }
    free(c->shards);
    nvfp4_gguf_close(c->gguf);
    json_decref(c->config);
    json_decref(c->hf_quant);
    json_decref(c->index);
    for (size_t i = 0; i < c->nweights; i++) free(c->weights[i]);
    free(c->weights);
    for (size_t i = 0; c->meta_owned && i < c->nmeta; i++) free(c->meta_owned[i]);
    free(c->meta_owned);
    free(c->meta_k);
    free(c->meta_v);
    free(c->order);
    free(c->sorted);
    free(c->path);
    free(c->dir);
    free(c);
}

/*---- detection ----*/

static const char *json_str_at(json_t *o, const char *k1, const char *k2)
{
    json_t *v = o ? json_object_get(o, k1) : NULL;
    if (v && k2) v = json_is_object(v) ? json_object_get(v, k2) : NULL;
    return v && json_is_string(v) ? json_string_value(v) : NULL;
}

static void evidence(nvfp4_ckpt *c, const char *fmt, ...) NVFP4_PRINTF(2, 3);
static void evidence(nvfp4_ckpt *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->evidence, sizeof c->evidence, fmt, ap);
    va_end(ap);
}

/* A candidate NVFP4 tensor W of a safetensors checkpoint in format tr: the
 * codes tensor is U8 2-D and the block-scale and per-tensor-scale tensors
 * exist.  Shapes and dtypes are checked when W is read. */
static int st_candidate(const nvfp4_ckpt *c, const nvfp4_format_traits *tr, const char *codes_name,
                        char **w_out)
{
    size_t cs = strlen(tr->codes_suffix), n = strlen(codes_name);
    if (n <= cs || strcmp(codes_name + n - cs, tr->codes_suffix)) return 0;
    const ck_entry *e = nvfp4_ck_find(c, codes_name);
    if (!e || !e->st || e->st->dtype != NVFP4_DTYPE_U8 || e->st->ndim < 2) return 0;
    char *w = strndup(codes_name, n - cs);
    char *sc = w ? nvfp4_fmt_piece(tr, w, FMT_SCALES) : NULL;
    char *ts = w ? nvfp4_fmt_piece(tr, w, FMT_TENSOR_SCALE) : NULL;
    int ok = sc && ts && nvfp4_ck_find(c, sc) && nvfp4_ck_find(c, ts);
    free(sc);
    free(ts);
    if (ok) *w_out = w;
    else free(w);
    return ok;
}

/* What the scale tensors of the ComfyUI/ModelOpt-shaped candidates say:
 * 1 tiled only, 2 row-major only, 3 both possible (ambiguous), 4 neither
 * (malformed: the reader will say how), 0 no candidates. */
static int scale_shapes(const nvfp4_ckpt *c, int *markers)
{
    const nvfp4_format_traits *tr = nvfp4_format_traits_of(NVFP4_FORMAT_MODELOPT);
    int tiled = 0, rowmajor = 0, both = 0, neither = 0;
    *markers = 0;
    for (size_t i = 0; i < c->nsorted; i++) {
        const ck_entry *e = &c->sorted[i];
        if (ends_with(e->name, ".comfy_quant")) (*markers)++;
        char *w = NULL;
        if (!st_candidate(c, tr, e->name, &w)) continue;
        char *sc = nvfp4_fmt_piece(tr, w, FMT_SCALES);
        const ck_entry *s = sc ? nvfp4_ck_find(c, sc) : NULL;
        free(sc);
        free(w);
        if (!s) continue;
        if (s->st->ndim != 2) {
            neither++;
            continue;
        }
        int64_t rows = e->st->shape[0], cols = e->st->shape[1] * 2;
        int is_tiled = s->st->shape[0] == round_up(rows, 128) &&
                       s->st->shape[1] == round_up(cols / NVFP4_BLOCK, 4);
        int is_row = s->st->shape[0] == rows && s->st->shape[1] == (cols + 15) / 16;
        if (is_tiled && is_row) both++;
        else if (is_tiled) tiled++;
        else if (is_row) rowmajor++;
        else neither++;
    }
    return tiled && !rowmajor ? 1 : rowmajor && !tiled ? 2 : (both || (tiled && rowmajor)) ? 3
                                                                                   : neither ? 4 : 0;
}

static nvfp4_format detect(nvfp4_ckpt *c)
{
    if (c->gguf) {
        size_t n = 0;
        for (size_t i = 0; i < nvfp4_gguf_count(c->gguf); i++)
            n += nvfp4_gguf_get(c->gguf, i)->type == GGML_NVFP4;
        evidence(c, "GGUF file, %zu tensor%s of ggml type NVFP4 (40)", n, n == 1 ? "" : "s");
        return NVFP4_FORMAT_GGUF;
    }
    const nvfp4_format_traits *ct = nvfp4_format_traits_of(NVFP4_FORMAT_COMPRESSED_TENSORS);
    size_t packed = 0;
    for (size_t i = 0; i < c->nsorted; i++) {
        char *w = NULL;
        if (st_candidate(c, ct, c->sorted[i].name, &w)) packed++;
        free(w);
    }
    const char *qm = json_str_at(c->config, "quantization_config", "quant_method");
    const char *qfmt = json_str_at(c->config, "quantization_config", "format");
    if (packed) {
        evidence(c, "%zu tensor%s *.weight_packed with *.weight_global_scale%s%s%s", packed,
                 packed == 1 ? "" : "s", qm ? "; config.json quant_method " : "", qm ? qm : "",
                 qfmt ? (!strcmp(qfmt, "nvfp4-pack-quantized") ? ", format nvfp4-pack-quantized" : "") : "");
        return NVFP4_FORMAT_COMPRESSED_TENSORS;
    }
    if (qm && !strcmp(qm, "compressed-tensors")) {
        evidence(c, "config.json quantization_config.quant_method compressed-tensors");
        return NVFP4_FORMAT_COMPRESSED_TENSORS;
    }
    if (qm && !strcmp(qm, "modelopt")) {
        const char *algo = json_str_at(c->config, "quantization_config", "quant_algo");
        evidence(c, "config.json quantization_config.quant_method modelopt%s%s",
                 algo ? ", quant_algo " : "", algo ? algo : "");
        return NVFP4_FORMAT_MODELOPT;
    }
    const char *producer = json_str_at(c->hf_quant, "producer", "name");
    const char *algo = json_str_at(c->hf_quant, "quantization", "quant_algo");
    if (c->hf_quant && algo) {
        evidence(c, "hf_quant_config.json: producer %s, quant_algo %s", producer ? producer : "?",
                 algo);
        return NVFP4_FORMAT_MODELOPT;
    }
    int markers;
    int shapes = scale_shapes(c, &markers);
    if (markers) {
        evidence(c, "%d ComfyUI comfy_quant layer marker%s", markers, markers == 1 ? "" : "s");
        return NVFP4_FORMAT_COMFYUI;
    }
    switch (shapes) {
    case 1:
        evidence(c, "block scales in the 128x4-tiled shape [roundup(rows,128), roundup(cols/16,4)]");
        return NVFP4_FORMAT_COMFYUI;
    case 2:
        evidence(c, "block scales in the row-major shape [rows, cols/16], no config file");
        return NVFP4_FORMAT_MODELOPT;
    case 3: {
        /* both shapes fit (rows % 128 == 0, cols % 64 == 0): ComfyUI loads a
         * layer as NVFP4 only with its marker, so L.weight without one is
         * ModelOpt's; bare names (x, x_scale, x_scale_2) are ComfyUI's tensors */
        int weights = 0, total = 0;
        const nvfp4_format_traits *mo = nvfp4_format_traits_of(NVFP4_FORMAT_MODELOPT);
        for (size_t i = 0; i < c->nsorted; i++) {
            char *w = NULL;
            if (!st_candidate(c, mo, c->sorted[i].name, &w)) continue;
            total++;
            weights += ends_with(w, ".weight");
            free(w);
        }
        if (weights * 2 > total) {
            evidence(c, "scale shapes fit both layouts; *.weight tensors without a ComfyUI marker "
                        "(ComfyUI would not load them as NVFP4): taken as modelopt "
                        "(override with --from)");
            return NVFP4_FORMAT_MODELOPT;
        }
        evidence(c, "scale shapes fit both layouts; bare tensor names: taken as comfyui "
                    "(override with --from)");
        return NVFP4_FORMAT_COMFYUI;
    }
    case 4:
        evidence(c, "NVFP4-named tensors whose scales fit no layout: read as comfyui, the "
                    "reader says what is wrong");
        return NVFP4_FORMAT_COMFYUI;
    default:
        evidence(c, "no NVFP4 tensors");
        return NVFP4_FORMAT_UNKNOWN;
    }
}

static nvfp4_status list_weights(nvfp4_ckpt *c)
{
    const nvfp4_format_traits *tr = nvfp4_format_traits_of(c->format);
    c->weights = calloc(c->nsorted ? c->nsorted : 1, sizeof *c->weights);
    if (!c->weights) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "checkpoint: no memory");
    if (!tr) return NVFP4_OK;
    const ck_entry **order = c->order;
    for (size_t i = 0; i < c->nsorted; i++) {
        const ck_entry *e = order[i];
        char *w = NULL;
        if (c->gguf) {
            if (e->gg->type == GGML_NVFP4) w = strdup(e->name);
            if (e->gg->type == GGML_NVFP4 && !w)
                return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "checkpoint: no memory");
        } else {
            st_candidate(c, tr, e->name, &w);
        }
        if (w) c->weights[c->nweights++] = w;
    }
    return NVFP4_OK;
}

nvfp4_status nvfp4_ckpt_open(nvfp4_ckpt **out, const char *path, nvfp4_format assume)
{
    if (!out || !path) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_ckpt_open: NULL argument");
    *out = NULL;
    if (assume != NVFP4_FORMAT_UNKNOWN && !nvfp4_format_traits_of(assume))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_ckpt_open: unknown format %d", (int)assume);
    char shown[256];
    nvfp4_io_printable(shown, sizeof shown, path);
    struct stat st;
    if (stat(path, &st) != 0) return nvfp4_fail(NVFP4_ERR_IO, "%s: %s", shown, strerror(errno));
    nvfp4_ckpt *c = calloc(1, sizeof *c);
    if (!c || !(c->path = strdup(path))) {
        free(c);
        return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "%s: no memory", shown);
    }
    nvfp4_status s = NVFP4_OK;
    if (S_ISDIR(st.st_mode)) {
        c->is_dir = 1;
        c->dir = strdup(path);
    } else {
        const char *slash = strrchr(path, '/');
        c->dir = slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
        if (c->dir && !c->dir[0]) { /* "/file" */
            free(c->dir);
            c->dir = strdup("/");
        }
    }
    if (!c->dir) s = nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "%s: no memory", shown);
    if (s == NVFP4_OK && !c->is_dir && (ends_with(path, ".gguf") || gguf_magic_at(path))) {
        s = nvfp4_gguf_open(&c->gguf, path);
    } else if (s == NVFP4_OK) {
        char **names = NULL;
        size_t n = 0;
        if (c->is_dir) {
            s = list_shards(c, &names, &n);
        } else {
            names = calloc(1, sizeof *names);
            const char *base = strrchr(path, '/');
            if (names && (names[0] = strdup(base ? base + 1 : path))) n = 1;
            else s = nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "%s: no memory", shown);
        }
        c->shards = calloc(n ? n : 1, sizeof *c->shards);
        if (s == NVFP4_OK && !c->shards) s = nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "%s: no memory", shown);
        for (size_t i = 0; i < n; i++) {
            if (s == NVFP4_OK) {
                char *p = c->is_dir ? join(c->dir, names[i]) : strdup(path);
                s = p ? nvfp4_st_open(&c->shards[i].st, p)
                      : nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "%s: no memory", shown);
                free(p);
                if (s == NVFP4_OK) {
                    c->shards[i].name = names[i];
                    names[i] = NULL;
                    c->nshards++;
                }
            }
            free(names[i]);
        }
        free(names);
    }
    if (s == NVFP4_OK) {
        c->config = load_json(c->dir, "config.json");
        c->hf_quant = load_json(c->dir, "hf_quant_config.json");
        s = build_index(c);
    }
    if (s == NVFP4_OK) {
        c->format = detect(c);
        if (assume != NVFP4_FORMAT_UNKNOWN && assume != c->format) {
            char was[sizeof c->evidence];
            memcpy(was, c->evidence, sizeof was);
            evidence(c, "given as %s (detection said %s: %s)", nvfp4_format_traits_of(assume)->name,
                     c->format ? nvfp4_format_traits_of(c->format)->name : "unknown", was);
            c->format = assume;
        }
        if ((c->gguf != NULL) != (c->format == NVFP4_FORMAT_GGUF))
            s = nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: a %s file cannot hold %s tensors", shown,
                           c->gguf ? "GGUF" : "safetensors", nvfp4_format_traits_of(c->format)->name);
    }
    if (s == NVFP4_OK) s = list_weights(c);
    if (s != NVFP4_OK) {
        nvfp4_ckpt_close(c);
        return s;
    }
    *out = c;
    return NVFP4_OK;
}

nvfp4_format nvfp4_ckpt_format(const nvfp4_ckpt *c) { return c ? c->format : NVFP4_FORMAT_UNKNOWN; }
const char *nvfp4_ckpt_evidence(const nvfp4_ckpt *c) { return c ? c->evidence : ""; }
size_t nvfp4_ckpt_count(const nvfp4_ckpt *c) { return c ? c->nweights : 0; }
const char *nvfp4_ckpt_name(const nvfp4_ckpt *c, size_t i)
{
    return c && i < c->nweights ? c->weights[i] : NULL;
}

size_t nvfp4_ckpt_entries(const nvfp4_ckpt *c) { return c ? c->nsorted : 0; }

nvfp4_status nvfp4_ckpt_entry_at(const nvfp4_ckpt *c, size_t i, nvfp4_ckpt_entry *out)
{
    if (!c || !out || i >= c->nsorted)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_ckpt_entry_at: no entry %zu", i);
    memset(out, 0, sizeof *out);
    const ck_entry *e = c->order[i];
    out->name = e->name;
    if (e->gg) {
        const char *slash = strrchr(c->path, '/');
        out->file = slash ? slash + 1 : c->path;
        out->type = nvfp4_ggml_type_name(e->gg->type);
        out->dtype = nvfp4_ggml_to_dtype(e->gg->type);
        out->ndim = e->gg->ndim;
        for (int d = 0; d < e->gg->ndim; d++) out->shape[d] = e->gg->ne[e->gg->ndim - 1 - d];
        out->data = e->gg->data;
        out->nbytes = (size_t)e->gg->nbytes;
    } else {
        out->file = c->shards[e->shard].name;
        out->type = nvfp4_dtype_name(e->st->dtype);
        out->dtype = e->st->dtype;
        out->ndim = e->st->ndim;
        memcpy(out->shape, e->st->shape, sizeof out->shape);
        out->data = e->st->data;
        out->nbytes = e->st->nbytes;
    }
    return NVFP4_OK;
}

size_t nvfp4_ckpt_metadata_count(const nvfp4_ckpt *c) { return c ? c->nmeta : 0; }

void nvfp4_ckpt_metadata(const nvfp4_ckpt *c, size_t i, const char **key, const char **value)
{
    int ok = c && i < c->nmeta;
    if (key) *key = ok ? c->meta_k[i] : NULL;
    if (value) *value = ok ? c->meta_v[i] : NULL;
}

nvfp4_status nvfp4_ckpt_dims(const nvfp4_ckpt *c, const char *w, int64_t *rows, int64_t *cols)
{
    const nvfp4_format_traits *tr = c && w ? nvfp4_format_traits_of(c->format) : NULL;
    char *cn = tr ? nvfp4_fmt_piece(tr, w, FMT_CODES) : NULL;
    const ck_entry *e = cn ? nvfp4_ck_find(c, cn) : NULL;
    free(cn);
    if (e && e->gg && e->gg->type == GGML_NVFP4) {
        *rows = e->gg->ne[1];
        *cols = e->gg->ne[0];
        return NVFP4_OK;
    }
    if (e && e->st && e->st->dtype == NVFP4_DTYPE_U8 && e->st->ndim == 2) {
        *rows = e->st->shape[0];
        *cols = 2 * e->st->shape[1];
        return NVFP4_OK;
    }
    char shown[128];
    return nvfp4_fail(NVFP4_ERR_NOT_FOUND, "no NVFP4 tensor '%s'",
                      nvfp4_io_printable(shown, sizeof shown, w ? w : ""));
}

/*---- reading ----*/

static nvfp4_status not_found(const nvfp4_ckpt *c, const char *w, const char *piece)
{
    char a[128], b[128], p[128];
    return nvfp4_fail(NVFP4_ERR_NOT_FOUND, "%s: NVFP4 tensor '%s': no tensor '%s'",
                      nvfp4_io_printable(p, sizeof p, c->path), nvfp4_io_printable(a, sizeof a, w),
                      nvfp4_io_printable(b, sizeof b, piece));
}

static void shape_str(char *buf, size_t len, nvfp4_dtype dtype, int ndim, const int64_t *shape)
{
    size_t o = (size_t)snprintf(buf, len, "%s [", nvfp4_dtype_name(dtype));
    for (int d = 0; d < ndim && o < len; d++)
        o += (size_t)snprintf(buf + o, len - o, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (o < len) snprintf(buf + o, len - o, "]");
}

/* One F32 value stored as [] or [1] (GGUF: one F32 element). */
nvfp4_status nvfp4_ck_scalar(const nvfp4_ckpt *c, const char *name, float *v, int *ndim, int *found)
{
    const ck_entry *e = nvfp4_ck_find(c, name);
    *found = e != NULL;
    if (!e) return NVFP4_OK;
    char n[128], got[96];
    nvfp4_io_printable(n, sizeof n, name);
    if (e->gg) {
        if (e->gg->type != GGML_F32 || e->gg->nbytes != 4)
            return nvfp4_fail(NVFP4_ERR_MALFORMED, "%s: '%s' is %s with %llu bytes; want one F32",
                              c->path, n, nvfp4_ggml_type_name(e->gg->type),
                              (unsigned long long)e->gg->nbytes);
        memcpy(v, e->gg->data, 4);
        *ndim = 1;
        return NVFP4_OK;
    }
    if (e->st->dtype != NVFP4_DTYPE_F32 || e->st->nbytes != 4 || e->st->ndim > 1) {
        shape_str(got, sizeof got, e->st->dtype, e->st->ndim, e->st->shape);
        return nvfp4_fail(NVFP4_ERR_MALFORMED, "%s: '%s' is %s; want an F32 scalar ([] or [1])",
                          c->path, n, got);
    }
    memcpy(v, e->st->data, 4); /* little-endian file, little-endian host */
    *ndim = e->st->ndim;
    return NVFP4_OK;
}

static nvfp4_status read_scales_info(const nvfp4_ckpt *c, const nvfp4_format_traits *tr,
                                     const char *w, nvfp4_ckpt_tensor *out)
{
    char *ts = nvfp4_fmt_piece(tr, w, FMT_TENSOR_SCALE), *is = nvfp4_fmt_piece(tr, w, FMT_INPUT_SCALE);
    nvfp4_status s = ts && is ? NVFP4_OK : nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "no memory");
    if (s == NVFP4_OK)
        s = nvfp4_ck_scalar(c, ts, &out->tensor_scale, &out->tensor_scale_ndim, &out->has_tensor_scale);
    if (s == NVFP4_OK && !out->has_tensor_scale && !tr->tensor_scale_optional)
        s = not_found(c, w, ts);
    if (s == NVFP4_OK)
        s = nvfp4_ck_scalar(c, is, &out->input_scale, &out->input_scale_ndim, &out->has_input_scale);
    if (s == NVFP4_OK) {
        float m = out->has_tensor_scale ? out->tensor_scale : 1.0f;
        if (tr->tensor_scale_direction == NVFP4_SCALE_DIVIDES) m = 1.0f / m;
        out->t.per_tensor_scale = m;
    }
    free(ts);
    free(is);
    return s;
}

/* with_data 0: every check, the shape and the scalars, but no arrays
 * (out->t.codes and scales stay NULL). */
static nvfp4_status read_st(nvfp4_ckpt_tensor *out, const nvfp4_ckpt *c, const nvfp4_format_traits *tr,
                            const char *w, int with_data)
{
    char *cn = nvfp4_fmt_piece(tr, w, FMT_CODES), *sn = nvfp4_fmt_piece(tr, w, FMT_SCALES);
    nvfp4_status s = NVFP4_OK;
    char n[128], got[96], p[128];
    nvfp4_io_printable(n, sizeof n, w);
    nvfp4_io_printable(p, sizeof p, c->path);
    if (!cn || !sn) {
        s = nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "no memory");
        goto done;
    }
    const ck_entry *ce = nvfp4_ck_find(c, cn), *se = nvfp4_ck_find(c, sn);
    if (!ce || !ce->st) { s = not_found(c, w, cn); goto done; }
    if (!se || !se->st) { s = not_found(c, w, sn); goto done; }
    const nvfp4_st_tensor *codes = ce->st, *scales = se->st;
    shape_str(got, sizeof got, codes->dtype, codes->ndim, codes->shape);
    if (codes->ndim > 2 && codes->dtype == NVFP4_DTYPE_U8) {
        s = nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "%s: NVFP4 tensor '%s': codes are %s; stacked "
                       "(3-D and more) NVFP4 tensors are not handled", p, n, got);
        goto done;
    }
    int64_t col_unit = tr->format == NVFP4_FORMAT_COMPRESSED_TENSORS ? 1 : 8;
    if (codes->dtype != NVFP4_DTYPE_U8 || codes->ndim != 2 || codes->shape[0] < 1 ||
        codes->shape[1] < 1 || codes->shape[1] % col_unit) {
        s = nvfp4_fail(NVFP4_ERR_MALFORMED, "%s: NVFP4 tensor '%s': codes are %s; want U8 [rows, "
                       "cols/2] with rows >= 1 and cols a positive multiple of %d",
                       p, n, got, col_unit == 1 ? 2 : 16);
        goto done;
    }
    int64_t rows = codes->shape[0], stored = codes->shape[1] * 2, cols = round_up(stored, 16);
    nvfp4_scale_layout layout =
        tr->scale_store == NVFP4_STORE_TILED ? NVFP4_SCALES_TILED : NVFP4_SCALES_ROW_MAJOR;
    int64_t want_r = layout == NVFP4_SCALES_TILED ? round_up(rows, 128) : rows;
    int64_t want_c = layout == NVFP4_SCALES_TILED ? round_up(cols / 16, 4) : cols / 16;
    shape_str(got, sizeof got, scales->dtype, scales->ndim, scales->shape);
    if ((scales->dtype != NVFP4_DTYPE_F8_E4M3 && scales->dtype != NVFP4_DTYPE_U8) ||
        scales->ndim != 2 || scales->shape[0] != want_r || scales->shape[1] != want_c) {
        char sn_shown[128];
        s = nvfp4_fail(NVFP4_ERR_MALFORMED,
                       "%s: NVFP4 tensor '%s': '%s' is %s; codes of %lld x %lld need F8_E4M3 "
                       "[%lld, %lld] (%s block scales)",
                       p, n, nvfp4_io_printable(sn_shown, sizeof sn_shown, sn), got, (long long)rows,
                       (long long)stored, (long long)want_r, (long long)want_c,
                       layout == NVFP4_SCALES_TILED ? "128x4 tiled" : "row-major");
        goto done;
    }
    nvfp4_nibble_order order = tr->packing == NVFP4_PACK_HI_FIRST ? NVFP4_HI_FIRST : NVFP4_LO_FIRST;
    if (with_data) {
        s = nvfp4_tensor_alloc(&out->t, rows, cols, order, layout);
        if (s != NVFP4_OK) goto done;
        nvfp4_fmt_copy_codes(out->t.codes, cols, order, codes->data, stored, order, rows);
        memcpy(out->t.scales, scales->data, scales->nbytes);
    } else {
        out->t = (nvfp4_tensor){rows, cols, NULL, NULL, 1.0f, order, layout};
    }
    out->stored_cols = stored;
    s = read_scales_info(c, tr, w, out);
done:
    free(cn);
    free(sn);
    return s;
}

static nvfp4_status read_gguf(nvfp4_ckpt_tensor *out, const nvfp4_ckpt *c, const nvfp4_format_traits *tr,
                              const char *w, int with_data)
{
    const ck_entry *e = nvfp4_ck_find(c, w);
    char n[128], p[128];
    nvfp4_io_printable(n, sizeof n, w);
    nvfp4_io_printable(p, sizeof p, c->path);
    if (!e || !e->gg) return not_found(c, w, w);
    const gguf_tensor *g = e->gg;
    if (g->type != GGML_NVFP4)
        return nvfp4_fail(NVFP4_ERR_MALFORMED, "%s: '%s' is ggml type %s, not NVFP4", p, n,
                          nvfp4_ggml_type_name(g->type));
    if (g->ne[2] != 1 || g->ne[3] != 1)
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "%s: NVFP4 tensor '%s' has %d dimensions; stacked "
                          "(3-D and more) NVFP4 tensors are not handled", p, n, g->ndim);
    int64_t cols = g->ne[0], rows = g->ne[1];
    if (rows < 1 || cols < FMT_GGML_BLOCK)
        return nvfp4_fail(NVFP4_ERR_MALFORMED, "%s: NVFP4 tensor '%s' is %lld x %lld (empty)", p, n,
                          (long long)rows, (long long)cols);
    if (!with_data) {
        out->t = (nvfp4_tensor){rows, cols, NULL, NULL, 1.0f, NVFP4_LO_FIRST, NVFP4_SCALES_ROW_MAJOR};
        out->stored_cols = cols;
        return read_scales_info(c, tr, w, out);
    }
    nvfp4_status s = nvfp4_tensor_alloc(&out->t, rows, cols, NVFP4_LO_FIRST, NVFP4_SCALES_ROW_MAJOR);
    if (s != NVFP4_OK) return s;
    size_t row_bytes = (size_t)(cols / FMT_GGML_BLOCK) * FMT_GGML_BLOCK_BYTES;
    for (int64_t r = 0; r < rows; r++)
        nvfp4_fmt_ggml_unpack_row(out->t.codes + r * (cols / 2), out->t.scales + r * (cols / 16),
                                  g->data + (size_t)r * row_bytes, cols);
    out->stored_cols = cols;
    return read_scales_info(c, tr, w, out);
}

static nvfp4_status read_any(nvfp4_ckpt_tensor *out, const nvfp4_ckpt *c, const char *w, int with_data)
{
    if (!out || !c || !w) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_ckpt_read: NULL argument");
    memset(out, 0, sizeof *out);
    const nvfp4_format_traits *tr = nvfp4_format_traits_of(c->format);
    if (!tr) {
        char p[128];
        return nvfp4_fail(NVFP4_ERR_NOT_FOUND, "%s: no NVFP4 tensors (%s)",
                          nvfp4_io_printable(p, sizeof p, c->path), c->evidence);
    }
    nvfp4_status s = c->gguf ? read_gguf(out, c, tr, w, with_data) : read_st(out, c, tr, w, with_data);
    if (s != NVFP4_OK) nvfp4_ckpt_tensor_free(out);
    else out->format = c->format;
    return s;
}

nvfp4_status nvfp4_ckpt_rows(const nvfp4_ckpt *c, const char *w, int64_t *rows)
{
    if (!c || !w || !rows) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_ckpt_rows: NULL argument");
    int64_t stored, cols;
    nvfp4_status s = nvfp4_ckpt_dims(c, w, &stored, &cols);
    if (s != NVFP4_OK) return s;
    *rows = stored;
    size_t plen = sizeof NVFP4_ST_ROWS_KEY_PREFIX - 1;
    for (size_t i = 0; i < c->nmeta; i++) {
        const char *k = c->meta_k[i];
        if (strncmp(k, NVFP4_ST_ROWS_KEY_PREFIX, plen) || strcmp(k + plen, w)) continue;
        if (nvfp4_fmt_rows_record(c->meta_v[i], stored, rows)) return NVFP4_OK;
        char p[128], n[128];
        return nvfp4_fail(NVFP4_ERR_MALFORMED,
                          "%s: NVFP4 tensor '%s': the metadata '%s%s' is not a row count of %lld "
                          "stored rows (ComfyUI pads rows to a multiple of 16)",
                          nvfp4_io_printable(p, sizeof p, c->path), nvfp4_io_printable(n, sizeof n, w),
                          NVFP4_ST_ROWS_KEY_PREFIX, n, (long long)stored);
    }
    return NVFP4_OK;
}

/* Narrow t (as read, stored rows) to W's logical rows (nvfp4_ckpt_rows):
 * the rows past them are padding. */
static nvfp4_status logical_rows(nvfp4_tensor *t, const nvfp4_ckpt *c, const char *w)
{
    int64_t rows;
    nvfp4_status s = nvfp4_ckpt_rows(c, w, &rows);
    if (s == NVFP4_OK) t->rows = rows;
    return s;
}

nvfp4_status nvfp4_ckpt_read(nvfp4_ckpt_tensor *out, const nvfp4_ckpt *c, const char *w)
{
    return read_any(out, c, w, 1);
}

nvfp4_status nvfp4_ck_probe(nvfp4_ckpt_tensor *out, const nvfp4_ckpt *c, const char *w)
{
    return read_any(out, c, w, 0);
}

/*---- layers ----*/

static nvfp4_status load_bias(nvfp4_layer *l, const nvfp4_ckpt *c, const char *name)
{
    const ck_entry *e = nvfp4_ck_find(c, name);
    if (!e) return NVFP4_OK;
    int64_t rows = l->weight.rows, n;
    nvfp4_dtype dt;
    const uint8_t *p;
    if (e->gg) {
        dt = nvfp4_ggml_to_dtype(e->gg->type);
        n = e->gg->ne[0];
        p = e->gg->data;
        if (e->gg->ndim != 1) dt = NVFP4_DTYPE_INVALID;
    } else {
        dt = e->st->dtype;
        n = e->st->ndim == 1 ? e->st->shape[0] : -1;
        p = e->st->data;
    }
    char shown[128];
    if ((dt != NVFP4_DTYPE_F32 && dt != NVFP4_DTYPE_F16 && dt != NVFP4_DTYPE_BF16) || n < 0 || n > rows)
        return nvfp4_fail(NVFP4_ERR_MALFORMED, "'%s' must be a 1-D float tensor of at most %lld values",
                          nvfp4_io_printable(shown, sizeof shown, name), (long long)rows);
    l->bias = calloc((size_t)rows, sizeof *l->bias); /* N padded: zero-extended */
    if (!l->bias) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "no memory for the bias");
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        if (dt == NVFP4_DTYPE_F32) {
            memcpy(&l->bias[i], p + 4 * i, 4);
        } else {
            memcpy(&h, p + 2 * i, 2);
            l->bias[i] = dt == NVFP4_DTYPE_F16 ? nvfp4_f16_to_f32(h) : nvfp4_bf16_to_f32(h);
        }
    }
    return NVFP4_OK;
}

nvfp4_status nvfp4_ckpt_load_layer(nvfp4_layer *out, const nvfp4_ckpt *c, const char *layer)
{
    if (!out || !c || !layer)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_ckpt_load_layer: NULL argument");
    memset(out, 0, sizeof *out);
    if (c->format == NVFP4_FORMAT_COMFYUI && c->nshards == 1) /* ComfyUI's own loader, as ever */
        return nvfp4_st_load_layer(out, c->shards[0].st, layer);
    const nvfp4_format_traits *tr = nvfp4_format_traits_of(c->format);
    char *w = nvfp4_fmt_cat(layer, ".weight");
    char *bias = w && tr ? nvfp4_fmt_piece(tr, w, FMT_BIAS) : NULL;
    nvfp4_ckpt_tensor ct;
    nvfp4_status s = w && (bias || !tr) ? nvfp4_ckpt_read(&ct, c, w)
                                       : nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "no memory");
    if (s == NVFP4_OK) {
        s = nvfp4_ckpt_tensor_values(&out->weight, &ct);
        if (s == NVFP4_OK) s = logical_rows(&out->weight, c, w);
        if (ct.has_input_scale) {
            out->has_input_scale = 1;
            out->input_scale = tr->tensor_scale_direction == NVFP4_SCALE_DIVIDES
                                   ? 1.0f / ct.input_scale : ct.input_scale;
        }
        nvfp4_ckpt_tensor_free(&ct);
    }
    if (s == NVFP4_OK) s = load_bias(out, c, bias);
    free(w);
    free(bias);
    if (s != NVFP4_OK) nvfp4_layer_free(out);
    return s;
}

nvfp4_status nvfp4_load_layer(nvfp4_layer *out, const char *path, const char *layer)
{
    if (out) memset(out, 0, sizeof *out);
    nvfp4_ckpt *c = NULL;
    nvfp4_status s = nvfp4_ckpt_open(&c, path, NVFP4_FORMAT_UNKNOWN);
    if (s == NVFP4_OK) s = nvfp4_ckpt_load_layer(out, c, layer);
    nvfp4_ckpt_close(c);
    return s;
}

nvfp4_status nvfp4_load_tensor(nvfp4_tensor *out, const char *path, const char *w)
{
    if (!out) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_load_tensor: NULL argument");
    memset(out, 0, sizeof *out);
    nvfp4_ckpt *c = NULL;
    nvfp4_status s = nvfp4_ckpt_open(&c, path, NVFP4_FORMAT_UNKNOWN);
    if (s == NVFP4_OK && c->format == NVFP4_FORMAT_COMFYUI && c->nshards == 1) {
        s = nvfp4_st_load_nvfp4(out, c->shards[0].st, w); /* ComfyUI's own loader, as ever */
    } else if (s == NVFP4_OK) {
        nvfp4_ckpt_tensor ct;
        s = nvfp4_ckpt_read(&ct, c, w);
        if (s == NVFP4_OK) s = nvfp4_ckpt_tensor_values(out, &ct);
        if (s == NVFP4_OK) s = logical_rows(out, c, w);
        if (s != NVFP4_OK) nvfp4_tensor_free(out);
        nvfp4_ckpt_tensor_free(&ct);
    }
    nvfp4_ckpt_close(c);
    return s;
}

nvfp4_status nvfp4_detect_format(nvfp4_format *out, const char *path, char *why, size_t why_len)
{
    if (!out) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_detect_format: NULL argument");
    *out = NVFP4_FORMAT_UNKNOWN;
    nvfp4_ckpt *c = NULL;
    nvfp4_status s = nvfp4_ckpt_open(&c, path, NVFP4_FORMAT_UNKNOWN);
    if (s != NVFP4_OK) return s;
    *out = c->format;
    if (why && why_len) snprintf(why, why_len, "%s", c->evidence);
    nvfp4_ckpt_close(c);
    return NVFP4_OK;
}
