/* convert.c -- one checkpoint format to another, exactly or not at all.
 *
 * A plan first: every NVFP4 tensor's pieces are found, each per-tensor and
 * input scale is mapped to the target's direction, GGUF's scale bytes are
 * checked against E4M3 (and back), and anything the target cannot hold
 * stops the conversion before a byte is written (or, with allow_rescale,
 * is rounded and noted).  Then each output file is written through a
 * writer whose NVFP4 tensors are made by a callback when the writer gets
 * to them: one source tensor read and converted at a time (a one-entry
 * cache serves its codes and scales), every other tensor copied from the
 * input's mapping, whose pages are given back once read. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "ckpt_internal.h"

static const char index_name[] = "model.safetensors.index.json";
static const char meta_scale_prefix[] = "nvfp4.source_scale.";
static const char meta_input_prefix[] = "nvfp4.source_input_scale.";

struct cv;

typedef enum cv_kind { CV_COPY, CV_CODES, CV_SCALES, CV_TSCALE, CV_ISCALE, CV_MARKER } cv_kind;

typedef struct cv_scalar {
    int present;
    int ndim;    /* the stored rank: the source's, from safetensors */
    float value; /* in the target's direction */
    char *meta;  /* provenance value when rounded ("multiplies 0x...") */
} cv_scalar;

typedef struct cv_group {
    const char *w;
    const ck_entry *codes, *scales, *tscale, *iscale, *marker;
    int64_t rows, cols, out_cols; /* out_cols: columns the target stores */
    cv_scalar ts, is;
    int sign_fold;       /* GGUF target: negative scales folded into the codes */
} cv_group;

typedef struct cv_item {
    char *name;
    int shard;
    cv_kind kind;
    const ck_entry *src; /* CV_COPY */
    cv_group *g;
    nvfp4_dtype dtype; /* safetensors view */
    int ndim;
    int64_t shape[NVFP4_ST_MAX_DIMS];
    uint32_t ggml_type; /* GGUF view */
    int gndim;
    int64_t ne[GGUF_MAX_DIMS];
    size_t nbytes;
    const void *data; /* CV_COPY: the bytes in the input's mapping */
    struct cv *owner;
} cv_item;

struct cv {
    nvfp4_ckpt *in;
    const nvfp4_format_traits *src, *dst;
    const nvfp4_convert_options *opt;
    cv_group *groups;
    size_t ngroups;
    cv_item *items;
    size_t nitems, cap;
    uint8_t *consumed; /* per in->sorted entry */
    char **out_shards;
    size_t nout;
    /* the converted tensor the callbacks serve */
    const cv_group *cached;
    uint8_t *codes, *scales;
    size_t codes_bytes, scales_bytes;
    size_t filled_groups;
};
typedef struct cv cv;

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

static void note(cv *c, const char *fmt, ...) NVFP4_PRINTF(2, 3);
static void note(cv *c, const char *fmt, ...)
{
    if (!c->opt->note) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    c->opt->note(c->opt->ctx, line);
}

static nvfp4_status oom(void) { return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "convert: no memory"); }

/*---- the plan: per-tensor and input scales ----*/

static const char *dir_word(nvfp4_scale_direction d)
{
    return d == NVFP4_SCALE_DIVIDES ? "divides" : "multiplies";
}

/* The provenance recorded by an earlier rounding, if it matches: the source
 * value it came from, in the target's direction. */
static int restored(const cv *c, const char *prefix, const char *w, float now, float *out)
{
    char key[1024];
    snprintf(key, sizeof key, "%s%s", prefix, w);
    const char *val = NULL; /* safetensors metadata or GGUF string pairs */
    for (size_t i = 0; i < nvfp4_ckpt_metadata_count(c->in) && !val; i++) {
        const char *k, *v;
        nvfp4_ckpt_metadata(c->in, i, &k, &v);
        if (!strcmp(k, key)) val = v;
    }
    char word[16];
    unsigned bits;
    if (!val || sscanf(val, "%15s 0x%8x", word, &bits) != 2) return 0;
    if (strcmp(word, dir_word(c->dst->tensor_scale_direction))) return 0;
    float was = nvfp4_f32_from_bits(bits);
    if (nvfp4_f32_bits(1.0f / was) != nvfp4_f32_bits(now)) return 0; /* changed since */
    *out = was;
    return 1;
}

/* Map one stored scale (present, v, in the source's direction) to the
 * target's; refuse (0) when no FP32 value is exact and rounding is not
 * allowed. */
static int map_scale(cv *c, const char *w, const char *what, const char *prefix, int present,
                     float v, int ndim, cv_scalar *out, char *why, size_t why_len)
{
    out->present = present;
    out->ndim = present && !c->in->gguf ? ndim : c->dst->tensor_scale_ndim;
    if (!present) {
        out->value = 1.0f;
        return 1;
    }
    if (c->src->tensor_scale_direction == c->dst->tensor_scale_direction) {
        out->value = v;
        return 1;
    }
    float was;
    if (nvfp4_fmt_exact_reciprocal(v)) {
        out->value = 1.0f / v;
    } else if (restored(c, prefix, w, v, &was)) {
        out->value = was;
    } else if (c->opt->allow_rescale) {
        out->value = 1.0f / v; /* rounded, as compressed-tensors' ModelOpt converter does */
        char meta[64];
        snprintf(meta, sizeof meta, "%s 0x%08x", dir_word(c->src->tensor_scale_direction),
                 nvfp4_f32_bits(v));
        out->meta = strdup(meta);
        if (!out->meta) return -1;
        double rel = isfinite(v) && v != 0 ? fabs((double)out->value * (double)v - 1.0) : NAN;
        note(c, "%s: %s %.9g (0x%08x) %s; the target %s, so it is stored as FP32(1/x) = %.9g "
                "(0x%08x), off by %.3g of itself (the source's bits go in the metadata, "
                "for the way back)",
             w, what, (double)v, nvfp4_f32_bits(v), dir_word(c->src->tensor_scale_direction),
             dir_word(c->dst->tensor_scale_direction), (double)out->value,
             nvfp4_f32_bits(out->value), rel);
    } else {
        snprintf(why, why_len,
                 "%s: %s %.9g (0x%08x) %s the block scales; %s's %s them, and 1/x is no FP32 "
                 "number (only powers of two are): set allow_rescale (nvfp4 convert "
                 "--allow-rescale) to store FP32(1/x), as compressed-tensors' own converter does",
                 w, what, (double)v, nvfp4_f32_bits(v), dir_word(c->src->tensor_scale_direction),
                 c->dst->name, c->dst->tensor_scale_direction == NVFP4_SCALE_DIVIDES ? "divides" : "multiplies");
        return 0;
    }
    return 1;
}

/* GGUF's scale bytes against E4M3, both ways (s: the row-major scales of
 * the group); 0 with why when refused. */
static int check_scale_bytes(cv *c, cv_group *g, const uint8_t *s, size_t n, char *why, size_t len)
{
    size_t zero7f = 0, bit7 = 0, ff = 0, nan = 0, neg = 0;
    int from_gguf = c->src->scale_code == NVFP4_SCALE_UE4M3, to_gguf = c->dst->scale_code == NVFP4_SCALE_UE4M3;
    if (from_gguf == to_gguf) return 1;
    for (size_t i = 0; i < n; i++) {
        if (from_gguf) {
            ff += s[i] == 0xFF;
            zero7f += (s[i] & 0x7F) == 0x7F && s[i] != 0xFF;
            bit7 += (s[i] & 0x80) && s[i] != 0xFF;
        } else {
            nan += (s[i] & 0x7F) == 0x7F;
            neg += (s[i] & 0x80) && (s[i] & 0x7F) != 0x7F && s[i] != 0x80;
        }
    }
    if (from_gguf) {
        if (zero7f) note(c, "%s: %zu UE4M3 scale byte%s 0x7F (ggml: zero) written as E4M3 0x00", g->w,
                         zero7f, zero7f == 1 ? "" : "s");
        if (bit7) note(c, "%s: %zu scale byte%s with bit 7 set (ggml ignores it) written without it",
                       g->w, bit7, bit7 == 1 ? "" : "s");
        if (ff && !c->opt->allow_rescale) {
            snprintf(why, len, "%s: %zu GGUF scale byte%s 0xFF, which ggml reads as 480: no E4M3 "
                     "scale holds that (allow_rescale / --allow-rescale writes 448)",
                     g->w, ff, ff == 1 ? "" : "s");
            return 0;
        }
        if (ff) note(c, "%s: %zu scale byte%s 0xFF (480) written as 448 (0x7E)", g->w, ff, ff == 1 ? "" : "s");
        return 1;
    }
    if ((nan || neg) && !c->opt->allow_rescale) {
        snprintf(why, len,
                 "%s: %zu NaN and %zu negative E4M3 block scales; ggml's UE4M3 has no sign and no "
                 "NaN (allow_rescale / --allow-rescale writes NaN blocks as zero and moves a "
                 "negative scale's sign into its block's codes)",
                 g->w, nan, neg);
        return 0;
    }
    if (nan) note(c, "%s: %zu NaN block scale%s written as ggml's zero (0x7F)", g->w, nan, nan == 1 ? "" : "s");
    if (neg) note(c, "%s: %zu negative block scale%s made positive, their blocks' code signs flipped "
                     "(the values are the same, zeros change sign)", g->w, neg, neg == 1 ? "" : "s");
    g->sign_fold = neg != 0;
    return 1;
}

/* Nonzero bytes of a tiled scale array that belong to no block. */
static size_t tile_padding_bytes(const nvfp4_tensor *t)
{
    size_t n = nvfp4_scales_bytes(t->rows, t->cols, NVFP4_SCALES_TILED), nonzero = 0, real = 0;
    for (size_t i = 0; i < n; i++) nonzero += t->scales[i] != 0;
    for (int64_t r = 0; r < t->rows; r++)
        for (int64_t b = 0; b < t->cols / 16; b++)
            real += t->scales[nvfp4_tiled_scale_offset(r, b, t->cols)] != 0;
    return nonzero - real;
}

/* The input pages around a tensor already read. */
static void release_in(const nvfp4_ckpt *in, const ck_entry *e)
{
    const uint8_t *base;
    size_t len;
    if (!e) return;
    if (e->gg) {
        nvfp4_gguf_map_range(in->gguf, &base, &len);
        nvfp4_io_release(base, len, e->gg->data, (size_t)e->gg->nbytes);
    } else {
        nvfp4_st_map_range(in->shards[e->shard].st, &base, &len);
        nvfp4_io_release(base, len, e->st->data, e->st->nbytes);
    }
}

static nvfp4_status plan_group(cv *c, cv_group *g, char *why, size_t len)
{
    /* the arrays only when their bytes decide: GGUF's scale code, tile padding */
    int bytes = c->src->scale_code != c->dst->scale_code ||
                (c->src->scale_store == NVFP4_STORE_TILED && c->dst->scale_store != NVFP4_STORE_TILED);
    nvfp4_ckpt_tensor ct;
    nvfp4_status s = bytes ? nvfp4_ckpt_read(&ct, c->in, g->w) : nvfp4_ck_probe(&ct, c->in, g->w);
    if (s != NVFP4_OK) return s;
    /* the pages read: the arrays, or the scalars (a 4-byte read maps a folio) */
    const ck_entry *read[4] = {g->codes, g->scales, g->tscale, g->iscale};
    for (int k = ct.t.codes ? 0 : 2; k < 4; k++) release_in(c->in, read[k]);
    g->rows = ct.t.rows;
    g->cols = ct.t.cols;
    g->out_cols = c->dst->format == NVFP4_FORMAT_COMPRESSED_TENSORS ? ct.stored_cols : ct.t.cols;
    int ok = 1;
    if (c->dst->format == NVFP4_FORMAT_GGUF && (ct.t.cols % FMT_GGML_BLOCK || ct.stored_cols != ct.t.cols)) {
        snprintf(why, len, "%s: %lld columns; GGUF's NVFP4 rows are whole blocks of 64 elements "
                 "(ggml rejects a row that is not)", g->w, (long long)ct.stored_cols);
        ok = 0;
    } else if (ct.stored_cols != ct.t.cols && c->dst->format != NVFP4_FORMAT_COMPRESSED_TENSORS) {
        note(c, "%s: %lld columns padded with zero codes to %lld (%s stores whole blocks of 16)",
             g->w, (long long)ct.stored_cols, (long long)ct.t.cols, c->dst->name);
    }
    if (ok) {
        int r = map_scale(c, g->w, c->src->format == NVFP4_FORMAT_COMPRESSED_TENSORS
                                       ? "weight_global_scale" : "the per-tensor scale",
                          meta_scale_prefix, ct.has_tensor_scale, ct.tensor_scale,
                          ct.tensor_scale_ndim, &g->ts, why, len);
        if (r > 0)
            r = map_scale(c, g->w, "the input scale", meta_input_prefix, ct.has_input_scale,
                          ct.input_scale, ct.input_scale_ndim, &g->is, why, len);
        if (r < 0) s = oom();
        ok = r > 0;
    }
    if (ok && s == NVFP4_OK && ct.t.scales && ct.t.scale_layout == NVFP4_SCALES_TILED &&
        c->dst->scale_store != NVFP4_STORE_TILED) {
        size_t pad = tile_padding_bytes(&ct.t);
        if (pad)
            note(c, "%s: %zu nonzero byte%s in the scale tiles' padding (no block's) not carried",
                 g->w, pad, pad == 1 ? "" : "s");
    }
    if (ok && s == NVFP4_OK && c->src->scale_code != c->dst->scale_code) {
        nvfp4_tensor rm; /* the blocks' scales only, not a tile's padding */
        s = nvfp4_tensor_convert(&rm, &ct.t, NVFP4_LO_FIRST, NVFP4_SCALES_ROW_MAJOR);
        if (s == NVFP4_OK)
            ok = check_scale_bytes(c, g, rm.scales,
                                   nvfp4_scales_bytes(rm.rows, rm.cols, NVFP4_SCALES_ROW_MAJOR), why, len);
        nvfp4_tensor_free(&rm);
    }
    /* GGUF without L.scale means 1: every other target stores it */
    if (!ct.has_tensor_scale && c->dst->format != NVFP4_FORMAT_GGUF) g->ts.present = 1;
    nvfp4_ckpt_tensor_free(&ct);
    if (s == NVFP4_OK && !ok) s = NVFP4_ERR_UNSUPPORTED;
    return s;
}

/*---- the plan: output tensors ----*/

static cv_item *new_item(cv *c, const char *name, int shard, cv_kind kind)
{
    if (c->nitems == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        cv_item *p = realloc(c->items, cap * sizeof *p);
        if (!p) return NULL;
        c->items = p;
        c->cap = cap;
    }
    cv_item *it = &c->items[c->nitems];
    memset(it, 0, sizeof *it);
    it->name = strdup(name);
    if (!it->name) return NULL;
    it->shard = shard;
    it->kind = kind;
    it->owner = c;
    c->nitems++;
    return it;
}

static int out_shard(const cv *c, const ck_entry *e)
{
    return c->nout > 1 && e && e->shard >= 0 ? e->shard : 0;
}

/* Both views of an item's shape: safetensors dims and GGUF ne (reversed). */
static void set_shape(cv_item *it, nvfp4_dtype dt, uint32_t gt, int ndim, const int64_t *shape)
{
    it->dtype = dt;
    it->ggml_type = gt;
    it->ndim = ndim;
    for (int d = 0; d < ndim; d++) it->shape[d] = shape[d];
    it->gndim = ndim ? ndim : 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) it->ne[d] = 1;
    for (int d = 0; d < ndim; d++) it->ne[d] = shape[ndim - 1 - d];
}

static nvfp4_status add_copy_item(cv *c, const ck_entry *e)
{
    char n[128];
    nvfp4_io_printable(n, sizeof n, e->name);
    nvfp4_dtype dt;
    int ndim;
    int64_t shape[NVFP4_ST_MAX_DIMS];
    if (e->gg) {
        dt = nvfp4_ggml_to_dtype(e->gg->type);
        if (dt == NVFP4_DTYPE_INVALID)
            return nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "tensor '%s' is ggml type %s, which safetensors "
                              "has no dtype for", n, nvfp4_ggml_type_name(e->gg->type));
        ndim = e->gg->ndim;
        for (int d = 0; d < ndim; d++) shape[d] = e->gg->ne[ndim - 1 - d];
    } else {
        dt = e->st->dtype;
        ndim = e->st->ndim;
        for (int d = 0; d < ndim; d++) shape[d] = e->st->shape[d];
    }
    int gt = nvfp4_ggml_from_dtype(dt);
    if (c->dst->format == NVFP4_FORMAT_GGUF) {
        if (gt < 0)
            return nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "tensor '%s' is %s, which GGUF has no type for",
                              n, nvfp4_dtype_name(dt));
        if (ndim > GGUF_MAX_DIMS)
            return nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "tensor '%s' has %d dimensions; GGUF holds %d",
                              n, ndim, GGUF_MAX_DIMS);
    }
    cv_item *it = new_item(c, e->name, out_shard(c, e), CV_COPY);
    if (!it) return oom();
    it->src = e;
    set_shape(it, dt, gt < 0 ? 0 : (uint32_t)gt, ndim, shape);
    it->data = e->gg ? (const void *)e->gg->data : e->st->data;
    it->nbytes = e->gg ? (size_t)e->gg->nbytes : e->st->nbytes;
    return NVFP4_OK;
}

static nvfp4_status add_group_items(cv *c, cv_group *g)
{
    const nvfp4_format_traits *t = c->dst;
    char *names[5] = {nvfp4_fmt_piece(t, g->w, FMT_CODES), nvfp4_fmt_piece(t, g->w, FMT_SCALES),
                      nvfp4_fmt_piece(t, g->w, FMT_TENSOR_SCALE),
                      nvfp4_fmt_piece(t, g->w, FMT_INPUT_SCALE), nvfp4_fmt_piece(t, g->w, FMT_MARKER)};
    nvfp4_status s = names[0] && names[2] && names[3] && names[4] ? NVFP4_OK : oom();
    int64_t rows = g->rows, cols = g->out_cols;
    cv_item *it;
    if (s == NVFP4_OK && (it = new_item(c, names[0], out_shard(c, g->codes), CV_CODES))) {
        it->g = g;
        if (t->format == NVFP4_FORMAT_GGUF) {
            int64_t sh[2] = {rows, cols};
            set_shape(it, NVFP4_DTYPE_INVALID, GGML_NVFP4, 2, sh);
            it->nbytes = (size_t)rows * (size_t)(cols / FMT_GGML_BLOCK) * FMT_GGML_BLOCK_BYTES;
        } else {
            int64_t sh[2] = {rows, cols / 2};
            set_shape(it, NVFP4_DTYPE_U8, 0, 2, sh);
            it->nbytes = (size_t)(rows * cols / 2);
        }
    } else if (s == NVFP4_OK) s = oom();
    if (s == NVFP4_OK && names[1]) {
        if ((it = new_item(c, names[1], out_shard(c, g->scales ? g->scales : g->codes), CV_SCALES))) {
            it->g = g;
            nvfp4_scale_layout l = t->scale_store == NVFP4_STORE_TILED ? NVFP4_SCALES_TILED : NVFP4_SCALES_ROW_MAJOR;
            int64_t sc = (g->cols + 15) / 16;
            int64_t sh[2] = {l == NVFP4_SCALES_TILED ? (rows + 127) / 128 * 128 : rows,
                             l == NVFP4_SCALES_TILED ? (sc + 3) / 4 * 4 : sc};
            set_shape(it, NVFP4_DTYPE_F8_E4M3, 0, 2, sh);
            it->nbytes = (size_t)(sh[0] * sh[1]);
        } else s = oom();
    }
    cv_scalar *sc[2] = {&g->ts, &g->is};
    const ck_entry *src[2] = {g->tscale ? g->tscale : g->codes, g->iscale};
    for (int k = 0; s == NVFP4_OK && k < 2; k++) {
        if (!sc[k]->present) continue;
        if (!(it = new_item(c, names[2 + k], out_shard(c, src[k]), k ? CV_ISCALE : CV_TSCALE))) {
            s = oom();
            break;
        }
        it->g = g;
        int64_t one = 1;
        set_shape(it, NVFP4_DTYPE_F32, GGML_F32, t->format == NVFP4_FORMAT_GGUF ? 1 : sc[k]->ndim, &one);
        it->nbytes = 4;
    }
    if (s == NVFP4_OK && t->format == NVFP4_FORMAT_COMFYUI && g->marker) {
        s = add_copy_item(c, g->marker); /* ComfyUI's own marker, as it was */
    } else if (s == NVFP4_OK && t->format == NVFP4_FORMAT_COMFYUI && ends_with(g->w, ".weight")) {
        if ((it = new_item(c, names[4], out_shard(c, g->codes), CV_MARKER))) {
            int64_t n = (int64_t)nvfp4_fmt_comfy_marker_len();
            set_shape(it, NVFP4_DTYPE_U8, 0, 1, &n);
            it->nbytes = (size_t)n;
        } else s = oom();
    }
    for (int k = 0; k < 5; k++) free(names[k]);
    return s;
}

static void consume(cv *c, const char *name, const ck_entry **slot)
{
    const ck_entry *e = name ? nvfp4_ck_find(c->in, name) : NULL;
    if (slot) *slot = e;
    if (e) c->consumed[e - c->in->sorted] = 1;
}

static nvfp4_status plan(cv *c)
{
    c->ngroups = c->in->nweights;
    c->groups = calloc(c->ngroups ? c->ngroups : 1, sizeof *c->groups);
    c->consumed = calloc(c->in->nsorted ? c->in->nsorted : 1, 1);
    if (!c->groups || !c->consumed) return oom();
    for (size_t i = 0; i < c->ngroups; i++) {
        cv_group *g = &c->groups[i];
        g->w = c->in->weights[i];
        char *p[5] = {nvfp4_fmt_piece(c->src, g->w, FMT_CODES), nvfp4_fmt_piece(c->src, g->w, FMT_SCALES),
                      nvfp4_fmt_piece(c->src, g->w, FMT_TENSOR_SCALE),
                      nvfp4_fmt_piece(c->src, g->w, FMT_INPUT_SCALE), nvfp4_fmt_piece(c->src, g->w, FMT_MARKER)};
        consume(c, p[0], &g->codes);
        consume(c, p[1], &g->scales);
        consume(c, p[2], &g->tscale);
        consume(c, p[3], &g->iscale);
        consume(c, p[4], &g->marker);
        for (int k = 0; k < 5; k++) free(p[k]);
    }
    /* every value the target must hold, checked before anything is written */
    size_t refused = 0;
    char first[768] = "";
    for (size_t i = 0; i < c->ngroups; i++) {
        char why[768] = "";
        nvfp4_status s = plan_group(c, &c->groups[i], why, sizeof why);
        if (s == NVFP4_ERR_UNSUPPORTED) {
            if (!refused++) memcpy(first, why, sizeof first);
        } else if (s != NVFP4_OK) {
            return s;
        }
    }
    if (refused)
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "%s%s", first,
                          refused > 1 ? " (and as much for more tensors)" : "");
    /* the output's tensors, in the input's order */
    const ck_entry **order = c->in->order;
    nvfp4_status s = NVFP4_OK;
    for (size_t i = 0; s == NVFP4_OK && i < c->in->nsorted; i++) {
        const ck_entry *e = order[i];
        cv_group *g = NULL;
        for (size_t k = 0; k < c->ngroups && !g; k++)
            if (c->groups[k].codes == e) g = &c->groups[k];
        if (g) s = add_group_items(c, g);
        else if (!c->consumed[e - c->in->sorted]) s = add_copy_item(c, e);
    }
    return s;
}

/*---- making the NVFP4 tensors' bytes ----*/

/* Flip the code signs of every block whose (row-major, E4M3) scale is
 * negative, and clear the scale's sign; codes lo-first row-major. */
static void fold_signs(uint8_t *codes, uint8_t *scales, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < cols / 16; b++) {
            uint8_t *s = &scales[r * (cols / 16) + b];
            if (!(*s & 0x80) || (*s & 0x7F) == 0x7F || *s == 0x80) continue;
            *s &= 0x7F;
            for (int k = 0; k < 8; k++) codes[r * (cols / 2) + b * 8 + k] ^= 0x88;
        }
}

static nvfp4_status convert_group(cv *c, const cv_group *g)
{
    if (c->cached == g) return NVFP4_OK;
    free(c->codes);
    free(c->scales);
    c->codes = c->scales = NULL;
    c->cached = NULL;
    nvfp4_ckpt_tensor ct;
    nvfp4_status s = nvfp4_ckpt_read(&ct, c->in, g->w);
    if (s != NVFP4_OK) return s;
    release_in(c->in, g->codes);
    release_in(c->in, g->scales);
    nvfp4_nibble_order order = c->dst->packing == NVFP4_PACK_HI_FIRST ? NVFP4_HI_FIRST : NVFP4_LO_FIRST;
    nvfp4_scale_layout layout = c->dst->scale_store == NVFP4_STORE_TILED ? NVFP4_SCALES_TILED : NVFP4_SCALES_ROW_MAJOR;
    nvfp4_tensor o;
    s = nvfp4_tensor_convert(&o, &ct.t, order, layout);
    if (s == NVFP4_OK && c->src->scale_code != c->dst->scale_code) {
        /* the scale bytes in the target's code (padding is 0 and stays 0) */
        size_t ns = nvfp4_scales_bytes(o.rows, o.cols, layout);
        if (c->src->scale_code == NVFP4_SCALE_UE4M3) {
            for (size_t i = 0; i < ns; i++) {
                int v = nvfp4_fmt_ue4m3_as_e4m3(o.scales[i]);
                o.scales[i] = v < 0 ? 0x7E : (uint8_t)v; /* 480: 448, when allowed */
            }
        } else {
            if (g->sign_fold) fold_signs(o.codes, o.scales, o.rows, o.cols);
            for (size_t i = 0; i < ns; i++)
                o.scales[i] = (o.scales[i] & 0x7F) == 0x7F ? 0x7F : (uint8_t)(o.scales[i] & 0x7F);
        }
    }
    nvfp4_ckpt_tensor_free(&ct);
    if (s != NVFP4_OK) return s;
    if (c->dst->format == NVFP4_FORMAT_GGUF) {
        size_t row = (size_t)(o.cols / FMT_GGML_BLOCK) * FMT_GGML_BLOCK_BYTES;
        c->codes_bytes = row * (size_t)o.rows;
        c->codes = malloc(c->codes_bytes ? c->codes_bytes : 1);
        if (!c->codes) {
            nvfp4_tensor_free(&o);
            return oom();
        }
        for (int64_t r = 0; r < o.rows; r++)
            nvfp4_fmt_ggml_pack_row(c->codes + (size_t)r * row, o.codes + r * (o.cols / 2),
                                    o.scales + r * (o.cols / 16), o.cols);
        nvfp4_tensor_free(&o);
    } else {
        c->codes_bytes = (size_t)(o.rows * g->out_cols / 2);
        c->codes = malloc(c->codes_bytes ? c->codes_bytes : 1);
        if (!c->codes) {
            nvfp4_tensor_free(&o);
            return oom();
        }
        nvfp4_fmt_copy_codes(c->codes, g->out_cols, order, o.codes, o.cols, order, o.rows);
        free(o.codes);
        c->scales = o.scales;
        c->scales_bytes = nvfp4_scales_bytes(o.rows, o.cols, layout);
    }
    c->cached = g;
    return NVFP4_OK;
}

static nvfp4_status fill(void *ctx, uint8_t *buf, size_t n)
{
    cv_item *it = ctx;
    cv *c = it->owner;
    const cv_group *g = it->g;
    float v;
    switch (it->kind) {
    case CV_COPY: /* through a buffer, so the input's pages can go once copied */
        memcpy(buf, it->data, n);
        release_in(c->in, it->src);
        return NVFP4_OK;
    case CV_TSCALE:
    case CV_ISCALE:
        v = it->kind == CV_TSCALE ? g->ts.value : g->is.value;
        memcpy(buf, &v, 4);
        return NVFP4_OK;
    case CV_MARKER:
        memcpy(buf, nvfp4_fmt_comfy_marker, n);
        return NVFP4_OK;
    default: break;
    }
    nvfp4_status s = convert_group(c, g);
    if (s != NVFP4_OK) return s;
    if (it->kind == CV_CODES) {
        if (c->opt->progress) {
            char line[512], shown[256];
            snprintf(line, sizeof line, "[%zu/%zu] %s (%lld x %lld)", ++c->filled_groups, c->ngroups,
                     nvfp4_io_printable(shown, sizeof shown, g->w), (long long)g->rows,
                     (long long)g->out_cols);
            c->opt->progress(c->opt->ctx, line);
        }
        memcpy(buf, c->codes, n < c->codes_bytes ? n : c->codes_bytes);
    } else {
        memcpy(buf, c->scales, n < c->scales_bytes ? n : c->scales_bytes);
    }
    return NVFP4_OK;
}

/*---- writing ----*/

static int is_provenance(const char *key)
{
    return !strncmp(key, meta_scale_prefix, sizeof meta_scale_prefix - 1) ||
           !strncmp(key, meta_input_prefix, sizeof meta_input_prefix - 1);
}

/* The provenance of the scales rounded into shard `shard` (all: -1). */
static nvfp4_status each_provenance(cv *c, int shard,
                                    nvfp4_status (*add)(void *w, const char *k, const char *v),
                                    void *w)
{
    for (size_t i = 0; i < c->nitems; i++) {
        const cv_item *it = &c->items[i];
        if ((it->kind != CV_TSCALE && it->kind != CV_ISCALE) || (shard >= 0 && it->shard != shard))
            continue;
        const char *meta = it->kind == CV_TSCALE ? it->g->ts.meta : it->g->is.meta;
        if (!meta) continue;
        char *key = nvfp4_fmt_cat(it->kind == CV_TSCALE ? meta_scale_prefix : meta_input_prefix, it->g->w);
        nvfp4_status s = key ? add(w, key, meta) : oom();
        free(key);
        if (s != NVFP4_OK) return s;
    }
    return NVFP4_OK;
}

static nvfp4_status st_meta(void *w, const char *k, const char *v)
{
    return nvfp4_st_writer_set_metadata(w, k, v);
}

static nvfp4_status gguf_meta(void *w, const char *k, const char *v)
{
    return nvfp4_gguf_writer_kv_string(w, k, v);
}

/* Whether an earlier shard than `shard` has metadata key k. */
static int seen_before(const cv *c, size_t shard, const char *k)
{
    for (size_t s = 0; s < shard; s++) {
        nvfp4_st_file *f = c->in->shards[s].st;
        for (size_t i = 0; i < nvfp4_st_metadata_count(f); i++) {
            const char *key;
            nvfp4_st_metadata(f, i, &key, NULL);
            if (!strcmp(key, k)) return 1;
        }
    }
    return 0;
}

/* The source's string metadata (a shard's, or all of it: shard -1; a key
 * in several shards once, the first shard's). */
static nvfp4_status each_source_meta(cv *c, int shard,
                                     nvfp4_status (*add)(void *w, const char *k, const char *v),
                                     void *w)
{
    if (c->in->gguf) {
        size_t dropped = 0;
        for (size_t i = 0; i < nvfp4_gguf_kv_count(c->in->gguf); i++) {
            const gguf_kv *kv = nvfp4_gguf_kv(c->in->gguf, i);
            if (is_provenance(kv->key)) continue;
            if (kv->type != GGUF_STRING) {
                dropped++;
                continue;
            }
            char *v = strndup((const char *)kv->value + 8, (size_t)kv->value_len - 8);
            nvfp4_status s = v ? add(w, kv->key, v) : oom();
            free(v);
            if (s != NVFP4_OK) return s;
        }
        if (dropped)
            note(c, "%zu GGUF key-value pair%s that %s not strings (safetensors metadata holds "
                    "strings only) not carried", dropped, dropped == 1 ? "" : "s", dropped == 1 ? "is" : "are");
        return NVFP4_OK;
    }
    for (size_t s = 0; s < c->in->nshards; s++) {
        if (shard >= 0 && (int)s != shard) continue;
        nvfp4_st_file *f = c->in->shards[s].st;
        for (size_t i = 0; i < nvfp4_st_metadata_count(f); i++) {
            const char *k, *v;
            nvfp4_st_metadata(f, i, &k, &v);
            if (is_provenance(k) || (shard < 0 && seen_before(c, s, k))) continue;
            nvfp4_status st = add(w, k, v);
            if (st != NVFP4_OK) return st;
        }
    }
    return NVFP4_OK;
}

static nvfp4_status write_st(cv *c, int shard, const char *path)
{
    nvfp4_st_writer *w = NULL;
    nvfp4_status s = nvfp4_st_writer_new(&w);
    if (s == NVFP4_OK) s = each_source_meta(c, c->nout > 1 ? shard : -1, st_meta, w);
    if (s == NVFP4_OK) s = each_provenance(c, c->nout > 1 ? shard : -1, st_meta, w);
    for (size_t i = 0; s == NVFP4_OK && i < c->nitems; i++) {
        cv_item *it = &c->items[i];
        if (it->shard != shard) continue;
        s = nvfp4_st_writer_add_fill(w, it->name, it->dtype, it->ndim, it->shape, it->nbytes, fill, it);
    }
    if (s == NVFP4_OK) s = nvfp4_st_writer_write(w, path, NULL, NULL);
    nvfp4_st_writer_free(w);
    return s;
}

static nvfp4_status write_gguf(cv *c, const char *path)
{
    nvfp4_gguf_writer *w = NULL;
    nvfp4_status s = nvfp4_gguf_writer_new(&w);
    if (s == NVFP4_OK && c->in->gguf) {
        for (size_t i = 0; s == NVFP4_OK && i < nvfp4_gguf_kv_count(c->in->gguf); i++) {
            const gguf_kv *kv = nvfp4_gguf_kv(c->in->gguf, i);
            if (!is_provenance(kv->key))
                s = nvfp4_gguf_writer_kv(w, kv->key, kv->type, kv->value, (size_t)kv->value_len);
        }
    } else if (s == NVFP4_OK) {
        s = each_source_meta(c, -1, gguf_meta, w);
    }
    if (s == NVFP4_OK) s = each_provenance(c, -1, gguf_meta, w);
    for (size_t i = 0; s == NVFP4_OK && i < c->nitems; i++) {
        cv_item *it = &c->items[i];
        s = nvfp4_gguf_writer_tensor(w, it->name, it->ggml_type, it->gndim, it->ne, NULL, fill, it);
    }
    if (s == NVFP4_OK) s = nvfp4_gguf_writer_write(w, path, NULL, NULL);
    nvfp4_gguf_writer_free(w);
    return s;
}

/*---- a directory's other files ----*/

static char *join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (p) {
        memcpy(p, dir, a);
        p[a] = '/';
        memcpy(p + a + 1, name, b + 1);
    }
    return p;
}

static nvfp4_status write_json(const char *dir, const char *name, json_t *j, size_t flags)
{
    char *text = json_dumps(j, JSON_INDENT(2) | flags);
    char *path = join(dir, name);
    nvfp4_status s = text && path ? NVFP4_OK : oom();
    if (s == NVFP4_OK) {
        size_t n = strlen(text);
        nvfp4_atomic_file *af = NULL;
        s = nvfp4_atomic_open(&af, path);
        if (s == NVFP4_OK) s = nvfp4_atomic_write(af, text, n);
        if (s == NVFP4_OK) s = nvfp4_atomic_write(af, "\n", 1);
        if (s == NVFP4_OK) s = nvfp4_atomic_commit(af);
        else nvfp4_atomic_discard(af);
    }
    free(text);
    free(path);
    return s;
}

/* Modules whose .weight the output keeps unquantized (2-D floats): what the
 * target's config excludes. */
static json_t *excluded_modules(const cv *c)
{
    json_t *list = json_array();
    for (size_t i = 0; list && i < c->nitems; i++) {
        const cv_item *it = &c->items[i];
        if (it->kind != CV_COPY || it->ndim != 2 || !ends_with(it->name, ".weight")) continue;
        if (it->dtype != NVFP4_DTYPE_BF16 && it->dtype != NVFP4_DTYPE_F16 && it->dtype != NVFP4_DTYPE_F32)
            continue;
        char *layer = nvfp4_fmt_layer(it->name);
        if (layer) json_array_append_new(list, json_string(layer));
        free(layer);
    }
    return list;
}

static int has_input_scales(const cv *c)
{
    for (size_t i = 0; i < c->ngroups; i++)
        if (c->groups[i].is.present) return 1;
    return 0;
}

static json_t *nvfp4_args(const char *dynamic_value)
{
    json_t *a = json_object();
    json_object_set_new(a, "num_bits", json_integer(4));
    json_object_set_new(a, "type", json_string("float"));
    json_object_set_new(a, "strategy", json_string("tensor_group"));
    json_object_set_new(a, "symmetric", json_true());
    json_object_set_new(a, "group_size", json_integer(16));
    json_object_set_new(a, "scale_dtype", json_string("torch.float8_e4m3fn"));
    json_object_set_new(a, "dynamic", dynamic_value ? json_string(dynamic_value) : json_false());
    if (dynamic_value) json_object_set_new(a, "observer", json_string("static_minmax"));
    return a;
}

static json_t *quant_config(const cv *c, json_t **hf_quant)
{
    json_t *q = json_object();
    *hf_quant = NULL;
    if (c->dst->format == NVFP4_FORMAT_MODELOPT) {
        json_t *producer = json_pack("{s:s, s:s}", "name", "nvfp4", "version", "0.1.0");
        json_object_set_new(q, "quant_method", json_string("modelopt"));
        json_object_set_new(q, "quant_algo", json_string(has_input_scales(c) ? "NVFP4" : "W4A16_NVFP4"));
        json_object_set_new(q, "kv_cache_quant_algo", json_null());
        json_object_set_new(q, "group_size", json_integer(16));
        json_object_set_new(q, "exclude_modules", excluded_modules(c));
        json_object_set_new(q, "producer", json_incref(producer));
        json_t *inner = json_pack("{s:s, s:n, s:i, s:o}", "quant_algo",
                                  has_input_scales(c) ? "NVFP4" : "W4A16_NVFP4", "kv_cache_quant_algo",
                                  "group_size", 16, "exclude_modules", excluded_modules(c));
        *hf_quant = json_pack("{s:o, s:o}", "producer", producer, "quantization", inner);
    } else {
        json_t *group = json_object();
        json_object_set_new(group, "targets", json_pack("[s]", "Linear"));
        json_object_set_new(group, "weights", nvfp4_args(NULL));
        json_object_set_new(group, "input_activations", has_input_scales(c) ? nvfp4_args("local") : json_null());
        json_object_set_new(group, "output_activations", json_null());
        json_object_set_new(group, "format", json_string("nvfp4-pack-quantized"));
        json_object_set_new(q, "config_groups", json_pack("{s:o}", "group_0", group));
        json_object_set_new(q, "format", json_string("nvfp4-pack-quantized"));
        json_object_set_new(q, "ignore", excluded_modules(c));
        json_object_set_new(q, "kv_cache_scheme", json_null());
        json_object_set_new(q, "quant_method", json_string("compressed-tensors"));
        json_object_set_new(q, "quantization_status", json_string("compressed"));
    }
    return q;
}

static nvfp4_status write_configs(cv *c, const char *dir)
{
    nvfp4_status s = NVFP4_OK;
    int same = c->src->format == c->dst->format;
    json_t *hf = NULL;
    if (c->in->config) {
        json_t *cfg = json_deep_copy(c->in->config);
        if (!cfg) return oom();
        if (!same) {
            json_object_del(cfg, "quantization_config");
            if (c->dst->format == NVFP4_FORMAT_MODELOPT || c->dst->format == NVFP4_FORMAT_COMPRESSED_TENSORS)
                json_object_set_new(cfg, "quantization_config", quant_config(c, &hf));
        }
        s = write_json(dir, "config.json", cfg, 0);
        json_decref(cfg);
    } else if (!same && c->dst->format == NVFP4_FORMAT_MODELOPT) {
        json_decref(quant_config(c, &hf));
    }
    if (same && c->in->hf_quant && c->dst->format == NVFP4_FORMAT_MODELOPT) hf = json_incref(c->in->hf_quant);
    if (s == NVFP4_OK && hf) s = write_json(dir, "hf_quant_config.json", hf, 0);
    json_decref(hf);
    return s;
}

static nvfp4_status write_index(cv *c, const char *dir)
{
    json_t *map = json_object();
    uint64_t total = 0;
    for (size_t i = 0; map && i < c->nitems; i++) {
        json_object_set_new(map, c->items[i].name, json_string(c->out_shards[c->items[i].shard]));
        total += c->items[i].nbytes;
    }
    json_t *idx = json_pack("{s:{s:I}, s:o}", "metadata", "total_size", (json_int_t)total, "weight_map", map);
    nvfp4_status s = idx ? write_json(dir, index_name, idx, JSON_SORT_KEYS) : oom();
    json_decref(idx);
    return s;
}

static nvfp4_status copy_file(const char *from, const char *to)
{
    FILE *f = fopen(from, "rb");
    if (!f) return nvfp4_fail(NVFP4_ERR_IO, "%s: cannot open: %s", from, strerror(errno));
    nvfp4_atomic_file *af = NULL;
    nvfp4_status s = nvfp4_atomic_open(&af, to);
    char buf[65536];
    size_t n;
    while (s == NVFP4_OK && (n = fread(buf, 1, sizeof buf, f)) > 0) s = nvfp4_atomic_write(af, buf, n);
    if (s == NVFP4_OK && ferror(f)) s = nvfp4_fail(NVFP4_ERR_IO, "%s: cannot read", from);
    fclose(f);
    if (s == NVFP4_OK) s = nvfp4_atomic_commit(af);
    else nvfp4_atomic_discard(af);
    return s;
}

static nvfp4_status copy_other_files(cv *c, const char *dir)
{
    if (!c->in->is_dir) return NVFP4_OK;
    DIR *d = opendir(c->in->dir);
    if (!d) return NVFP4_OK;
    struct dirent *de;
    nvfp4_status s = NVFP4_OK;
    size_t copied = 0;
    while (s == NVFP4_OK && (de = readdir(d))) {
        const char *n = de->d_name;
        if (n[0] == '.' || ends_with(n, ".safetensors") || ends_with(n, ".gguf") || !strcmp(n, index_name) ||
            !strcmp(n, "config.json") || !strcmp(n, "hf_quant_config.json"))
            continue;
        char *from = join(c->in->dir, n), *to = join(dir, n);
        struct stat st;
        if (!from || !to) s = oom();
        else if (stat(from, &st) == 0 && S_ISREG(st.st_mode)) {
            s = copy_file(from, to);
            copied++;
        }
        free(from);
        free(to);
    }
    closedir(d);
    if (copied) note(c, "%zu other file%s of the checkpoint copied", copied, copied == 1 ? "" : "s");
    return s;
}

/*---- the entry point ----*/

static void free_cv(cv *c)
{
    for (size_t i = 0; i < c->nitems; i++) free(c->items[i].name);
    for (size_t i = 0; i < c->ngroups; i++) {
        free(c->groups[i].ts.meta);
        free(c->groups[i].is.meta);
    }
    for (size_t i = 0; i < c->nout; i++) free(c->out_shards[i]);
    free(c->out_shards);
    free(c->items);
    free(c->groups);
    free(c->consumed);
    free(c->codes);
    free(c->scales);
    nvfp4_ckpt_close(c->in);
}

nvfp4_status nvfp4_convert(const char *in, const char *out, const nvfp4_convert_options *opt)
{
    if (!in || !out || !opt) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_convert: NULL argument");
    cv c;
    memset(&c, 0, sizeof c);
    c.opt = opt;
    c.dst = nvfp4_format_traits_of(opt->to);
    if (!c.dst) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_convert: no target format");
    char shown[256];
    nvfp4_io_printable(shown, sizeof shown, out);
    int to_gguf = ends_with(out, ".gguf"), to_file = to_gguf || ends_with(out, ".safetensors");
    if (to_gguf != (opt->to == NVFP4_FORMAT_GGUF))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: %s", shown,
                          to_gguf ? "a .gguf file holds the gguf format only"
                                  : "a GGUF checkpoint is one file: name the output *.gguf");
    nvfp4_status s = nvfp4_ckpt_open(&c.in, in, opt->from);
    if (s != NVFP4_OK) return s;
    c.src = nvfp4_format_traits_of(c.in->format);
    if (!c.src || !c.in->nweights) {
        char p[256];
        s = nvfp4_fail(NVFP4_ERR_NOT_FOUND, "%s: no NVFP4 tensors to convert (%s)",
                       nvfp4_io_printable(p, sizeof p, in), c.in->evidence);
        free_cv(&c);
        return s;
    }
    /* output files: the input's shards into a directory, else one */
    int dir = !to_file;
    c.nout = dir && c.in->nshards > 1 ? c.in->nshards : 1;
    c.out_shards = calloc(c.nout, sizeof *c.out_shards);
    for (size_t i = 0; c.out_shards && i < c.nout; i++)
        c.out_shards[i] = strdup(c.nout > 1 ? c.in->shards[i].name : "model.safetensors");
    if (!c.out_shards || !c.out_shards[c.nout - 1]) s = oom();
    if (s == NVFP4_OK) s = plan(&c);
    if (s == NVFP4_OK && dir) {
        struct stat st;
        if (stat(out, &st) == 0 ? !S_ISDIR(st.st_mode) : mkdir(out, 0755) != 0)
            s = nvfp4_fail(NVFP4_ERR_IO, "%s: cannot make the output directory: %s", shown,
                           errno ? strerror(errno) : "a file is in the way");
    }
    if (s == NVFP4_OK && to_gguf) {
        s = write_gguf(&c, out);
    } else if (s == NVFP4_OK && !dir) {
        s = write_st(&c, 0, out);
    } else if (s == NVFP4_OK) {
        for (size_t i = 0; s == NVFP4_OK && i < c.nout; i++) {
            char *p = join(out, c.out_shards[i]);
            s = p ? write_st(&c, (int)i, p) : oom();
            free(p);
        }
        if (s == NVFP4_OK && (c.nout > 1 || c.in->index)) s = write_index(&c, out);
        if (s == NVFP4_OK) s = write_configs(&c, out);
        if (s == NVFP4_OK) s = copy_other_files(&c, out);
    }
    free_cv(&c);
    return s;
}

/*---- one tensor onto a safetensors writer ----*/

nvfp4_status nvfp4_st_add_format(nvfp4_st_writer *w, const char *weight_name, const nvfp4_ckpt_tensor *ct)
{
    if (!w || !weight_name || !ct || !ct->t.codes || !ct->t.scales)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_st_add_format: NULL argument");
    const nvfp4_format_traits *tr = nvfp4_format_traits_of(ct->format);
    if (!tr || tr->format == NVFP4_FORMAT_GGUF)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_st_add_format: a %s tensor goes through nvfp4_convert()",
                          tr ? tr->name : "format-less");
    nvfp4_nibble_order order = tr->packing == NVFP4_PACK_HI_FIRST ? NVFP4_HI_FIRST : NVFP4_LO_FIRST;
    nvfp4_scale_layout layout = tr->scale_store == NVFP4_STORE_TILED ? NVFP4_SCALES_TILED : NVFP4_SCALES_ROW_MAJOR;
    if (ct->t.nibble_order != order || ct->t.scale_layout != layout || ct->stored_cols != ct->t.cols)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_st_add_format: the tensor is not in %s's layout", tr->name);
    char *names[5] = {nvfp4_fmt_piece(tr, weight_name, FMT_CODES), nvfp4_fmt_piece(tr, weight_name, FMT_SCALES),
                      nvfp4_fmt_piece(tr, weight_name, FMT_TENSOR_SCALE),
                      nvfp4_fmt_piece(tr, weight_name, FMT_INPUT_SCALE),
                      nvfp4_fmt_piece(tr, weight_name, FMT_MARKER)};
    nvfp4_status s = names[0] && names[1] && names[2] && names[3] && names[4] ? NVFP4_OK : oom();
    size_t before = nvfp4_st_writer_size(w);
    int64_t cs[2] = {ct->t.rows, ct->t.cols / 2}, one = 1;
    int64_t ss[2] = {layout == NVFP4_SCALES_TILED ? (ct->t.rows + 127) / 128 * 128 : ct->t.rows,
                     layout == NVFP4_SCALES_TILED ? (ct->t.cols / 16 + 3) / 4 * 4 : ct->t.cols / 16};
    if (s == NVFP4_OK)
        s = nvfp4_st_writer_add(w, names[0], NVFP4_DTYPE_U8, 2, cs, ct->t.codes, (size_t)(cs[0] * cs[1]));
    if (s == NVFP4_OK)
        s = nvfp4_st_writer_add(w, names[1], NVFP4_DTYPE_F8_E4M3, 2, ss, ct->t.scales,
                                nvfp4_scales_bytes(ct->t.rows, ct->t.cols, layout));
    if (s == NVFP4_OK)
        s = nvfp4_st_writer_add_copy(w, names[2], NVFP4_DTYPE_F32, tr->tensor_scale_ndim, &one,
                                     &ct->tensor_scale, 4);
    if (s == NVFP4_OK && ct->has_input_scale)
        s = nvfp4_st_writer_add_copy(w, names[3], NVFP4_DTYPE_F32, tr->tensor_scale_ndim, &one,
                                     &ct->input_scale, 4);
    if (s == NVFP4_OK && tr->format == NVFP4_FORMAT_COMFYUI && ends_with(weight_name, ".weight")) {
        int64_t n = (int64_t)nvfp4_fmt_comfy_marker_len();
        s = nvfp4_st_writer_add(w, names[4], NVFP4_DTYPE_U8, 1, &n, nvfp4_fmt_comfy_marker, (size_t)n);
    }
    if (s != NVFP4_OK) nvfp4_st_writer_truncate(w, before);
    for (int k = 0; k < 5; k++) free(names[k]);
    return s;
}
