/* explain.c -- nvfp4_explain(): which contract (accumulation model, K
 * slices, slice rule, order of combining the slice partials) reproduces
 * another GEMM's outputs bit for bit?  docs/EXPLAIN.md.
 *
 * How it stays fast.
 *  - Candidates that compute the same thing (same model, same slice
 *    boundaries, a combination order that is the same expression for that
 *    many slices) are evaluated once.
 *  - A slice partial (model, k0, k1) is computed once per evaluation set and
 *    shared by every candidate that has that slice; chains that start at the
 *    same k0 (sm90, sm120, fma) are run once and read at every end needed.
 *  - sm90 and exact use the CPU backend's kernels (nvfp4_cpu_gemm_slice)
 *    whenever the operands are NVFP4 values (given as NVFP4, or 16-bit values
 *    that factor exactly into E2M1 codes times E4M3 block scales).
 *  - Phase 1 runs every candidate on a sample of outputs (a grid of spread
 *    rows and columns); phase 2 runs only those that matched the whole sample
 *    on every output, row chunk by row chunk, and drops a candidate once it
 *    has a mismatch while another is still perfect.  Phase 2 goes in rounds,
 *    most preferred kinds (model, k_slices) first; once two kinds match
 *    everything the answer is "ambiguous" and the remaining candidates keep
 *    their sample-only evaluation (counted in "sample_only_candidates"). */
#include <jansson.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "cpu/cpu_internal.h"
#include "oracle/oracle_internal.h"

enum { EM_SM90, EM_SM120, EM_EXACT, EM_FMA, EM_PAIRWISE, EM_COUNT };
static const char *const model_names[EM_COUNT] = {"sm90", "sm120", "exact", "fma", "pairwise"};
enum { RULE_GROUP64, RULE_EQUAL, RULE_TILE128, RULE_TILE256, RULE_COUNT };
static const char *const rule_names[RULE_COUNT] = {"group64", "equal", "tile128", "tile256"};
static const int64_t rule_unit[RULE_COUNT] = {64, 16, 128, 256};
enum { COMB_ORDER, COMB_REVERSED, COMB_PAIRWISE, COMB_COUNT };
static const char *const comb_names[COMB_COUNT] = {"order", "reversed", "pairwise"};

#define DEFAULT_MAX_K_SLICES 32
#define LIMIT_MAX_K_SLICES 256
#define SAMPLE_ROWS 8
#define SAMPLE_COLS 32
#define CHUNK_OUTPUTS ((int64_t)1 << 18) /* outputs per phase-2 chunk (before the slice cap) */
#define CHUNK_FLOATS ((int64_t)1 << 25)  /* partial values held per chunk, all slices */
#define MAX_ALIASES (RULE_COUNT * LIMIT_MAX_K_SLICES)

/*-------------------------------------------------------------------------
 *  Candidates
 *-------------------------------------------------------------------------*/
typedef struct cand {
    int model, rule, combine, k_slices; /* k_slices: the number of non-empty slices */
    int64_t len;                        /* elements per slice */
    int naliases;
    uint16_t *aliases;                  /* (rule << 12) | S of the requests it stands for */
    int64_t evaluated, matched;
    int has_first;                      /* first mismatch (row-major order) */
    int64_t first_row, first_col;
    float first_got;
    uint32_t first_ref_bits;
    int alive; /* still evaluated */
} cand;

static int64_t rule_len(int rule, int64_t k, int s)
{
    if (rule == RULE_GROUP64) return nvfp4_k_slice_elems(k, s); /* the contract's rule */
    int64_t unit = rule_unit[rule];
    int64_t units = (k + unit - 1) / unit;
    int64_t per = (units + s - 1) / s;
    return (per < 1 ? 1 : per) * unit;
}

static int slice_count(int64_t k, int64_t len) { return k == 0 ? 1 : (int)((k + len - 1) / len); }

/* For this many slices, is `how` the same expression as one already listed? */
static int combine_redundant(int how, int count)
{
    if (how == COMB_REVERSED) return count <= 2;  /* p0 + p1 == p1 + p0 */
    if (how == COMB_PAIRWISE) return count <= 3;  /* (p0 + p1) + p2 is "order" */
    return 0;
}

/*-------------------------------------------------------------------------
 *  Engine state
 *-------------------------------------------------------------------------*/
typedef struct engine {
    const nvfp4_explain_args *args;
    int64_t M, N, K, Kp; /* Kp: K rounded up to 16 (the NVFP4 operands' width) */
    int nvfp4_given;     /* sm120 is a candidate only then */
    int have_nv;         /* A, B below hold the operands as NVFP4 */
    int fast;            /* sm90 / exact through the CPU kernels */
    nvfp4_tensor A, B;   /* row-major scales */
    nvfp4_operand type;  /* of the 16-bit values */
    const uint16_t *a16, *b16; /* M x K, N x K values (caller's or built here) */
    uint16_t *own_a16, *own_b16;
    uint8_t *bcodes, *bscales; /* B as one code per byte and its scales (sm120), on demand */
    float *to_f32;             /* 65536-entry table: 16-bit pattern -> float */
    int nthreads;
    cand *cands;
    int ncands;
    int unconfirmed; /* matched the whole sample, not run on everything (ambiguity was settled) */
    double progress_lo, progress_hi;
} engine;

static void report(engine *e, double f)
{
    if (!e->args->progress) return;
    double v = e->progress_lo + (e->progress_hi - e->progress_lo) * (f < 0 ? 0 : f > 1 ? 1 : f);
    e->args->progress(e->args->progress_ctx, v);
}

/* 16-bit value of element (r, k) of an NVFP4 operand (exact FP16). */
static uint16_t nv_value(const nvfp4_tensor *t, int64_t r, int64_t k)
{
    return nvfp4_oracle_f16_operand(nvfp4_tensor_code(t, r, k),
                                    nvfp4_tensor_scale(t, r, k / NVFP4_BLOCK));
}

/* Factor 16-bit values (rows x k) into NVFP4 (rows x roundup(k,16), row-major
 * scales, hi-first): per 16-block an E4M3 scale s and codes with
 * v = e2m1 * s exactly.  @return 1 on success, 0 if some block has no such
 * factorisation (or memory ran out). */
static int factor_nvfp4(nvfp4_tensor *t, const uint16_t *x, int64_t rows, int64_t k,
                        const float *to_f32)
{
    static const float mags[7] = {6, 4, 3, 2, 1.5f, 1, 0.5f};
    int64_t kp = (k + 15) / 16 * 16;
    if (nvfp4_tensor_alloc(t, rows, kp, NVFP4_HI_FIRST, NVFP4_SCALES_ROW_MAJOR) != NVFP4_OK) {
        nvfp4_clear_error();
        return 0;
    }
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t j = 0; j < kp / 16; j++) {
            float v[16], vmax = 0;
            for (int i = 0; i < 16; i++) {
                int64_t kk = j * 16 + i;
                v[i] = kk < k ? to_f32[x[r * k + kk]] : 0.0f;
                if (!isfinite(v[i])) goto fail;
                if (fabsf(v[i]) > vmax) vmax = fabsf(v[i]);
            }
            uint8_t codes[16], scale = 0;
            int found = 0;
            if (vmax == 0) {
                for (int i = 0; i < 16; i++) codes[i] = signbit(v[i]) ? 8 : 0;
                found = 1;
            }
            for (int c = 0; c < 7 && !found; c++) {
                float s = vmax / mags[c];
                uint8_t sb = nvfp4_e4m3_from_f32(s);
                if ((sb & 0x7f) == 0x7f || sb == 0 || nvfp4_e4m3_to_f32(sb) != s) continue;
                found = 1;
                for (int i = 0; i < 16 && found; i++) {
                    uint8_t code = nvfp4_e2m1_from_f32(v[i] / s);
                    if (nvfp4_e2m1_to_f32(code) * s != v[i]) found = 0; /* exact product */
                    codes[i] = signbit(v[i]) ? (uint8_t)(code | 8) : code;
                }
                scale = sb;
            }
            if (!found) goto fail;
            t->scales[r * (kp / 16) + j] = scale;
            uint8_t *bytes = t->codes + r * (kp / 2) + j * 8;
            for (int i = 0; i < 8; i++) bytes[i] = (uint8_t)(codes[2 * i] << 4 | codes[2 * i + 1]);
        }
    }
    return 1;
fail:
    nvfp4_tensor_free(t);
    return 0;
}

static int any_nan_scale(const nvfp4_tensor *t)
{
    for (int64_t r = 0; r < t->rows; r++)
        for (int64_t j = 0; j < t->cols / 16; j++)
            if ((nvfp4_tensor_scale(t, r, j) & 0x7f) == 0x7f) return 1;
    return 0;
}

/*-------------------------------------------------------------------------
 *  Evaluation sets: the outputs (rows x cols) one pass computes
 *-------------------------------------------------------------------------*/
typedef struct evalset {
    int64_t nr, nc;
    const int64_t *rows, *cols; /* global indices; NULL: contiguous from row0 / col 0 */
    int64_t row0;
    nvfp4_tensor ta, tb;        /* NVFP4 rows (views or copies) when e->have_nv */
    int own_ta, own_tb;
    const uint16_t *a16, *b16;  /* nr x K, nc x K */
    uint16_t *own_a16, *own_b16;
    const uint8_t *acodes, *ascales, *bcodes, *bscales; /* sm120: one code per byte, Kp wide */
    uint8_t *own_acodes, *own_ascales, *own_bcodes, *own_bscales;
} evalset;

static int64_t set_row(const evalset *s, int64_t i) { return s->rows ? s->rows[i] : s->row0 + i; }
static int64_t set_col(const evalset *s, int64_t j) { return s->cols ? s->cols[j] : j; }

static void set_free(evalset *s)
{
    if (s->own_ta) nvfp4_tensor_free(&s->ta);
    if (s->own_tb) nvfp4_tensor_free(&s->tb);
    free(s->own_a16);
    free(s->own_b16);
    free(s->own_acodes);
    free(s->own_ascales);
    free(s->own_bcodes);
    free(s->own_bscales);
    memset(s, 0, sizeof *s);
}

/* Copy rows idx[0..n) of a row-major NVFP4 tensor. */
static int copy_nv_rows(nvfp4_tensor *dst, const nvfp4_tensor *src, const int64_t *idx, int64_t n)
{
    if (nvfp4_tensor_alloc(dst, n, src->cols, src->nibble_order, NVFP4_SCALES_ROW_MAJOR) != NVFP4_OK)
        return 0;
    dst->per_tensor_scale = src->per_tensor_scale;
    size_t cb = (size_t)src->cols / 2, sb = (size_t)src->cols / 16;
    for (int64_t i = 0; i < n; i++) {
        memcpy(dst->codes + i * cb, src->codes + idx[i] * cb, cb);
        memcpy(dst->scales + i * sb, src->scales + idx[i] * sb, sb);
    }
    return 1;
}

/* 16-bit values of rows idx[0..n) (or rows first..first+n-1 when idx is NULL). */
static uint16_t *values_of_rows(const engine *e, int b_side, const int64_t *idx, int64_t first,
                                int64_t n)
{
    const uint16_t *src = b_side ? e->b16 : e->a16;
    const nvfp4_tensor *t = b_side ? &e->B : &e->A;
    uint16_t *v = malloc((size_t)(n ? n : 1) * (size_t)e->K * 2);
    if (!v) return NULL;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = idx ? idx[i] : first + i;
        if (src)
            memcpy(v + i * e->K, src + r * e->K, (size_t)e->K * 2);
        else
            for (int64_t k = 0; k < e->K; k++) v[i * e->K + k] = nv_value(t, r, k);
    }
    return v;
}

/* One code per byte and the scales of rows (sm120). */
static int codes_of_rows(const engine *e, int b_side, const int64_t *idx, int64_t first, int64_t n,
                         uint8_t **codes, uint8_t **scales)
{
    const nvfp4_tensor *t = b_side ? &e->B : &e->A;
    int64_t K = t->cols, nb = K / 16;
    *codes = malloc((size_t)(n ? n : 1) * (size_t)K);
    *scales = malloc((size_t)(n ? n : 1) * (size_t)(nb ? nb : 1));
    if (!*codes || !*scales) return 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = idx ? idx[i] : first + i;
        for (int64_t k = 0; k < K; k++) (*codes)[i * K + k] = nvfp4_tensor_code(t, r, k);
        memcpy(*scales + i * nb, t->scales + r * nb, (size_t)nb); /* row-major */
    }
    return 1;
}

/*-------------------------------------------------------------------------
 *  Slice partials
 *-------------------------------------------------------------------------*/
typedef struct slice {
    int model;
    int64_t k0, k1;
    float *vals; /* nr * nc */
} slice;

static int slice_cmp(const void *x, const void *y)
{
    const slice *a = x, *b = y;
    if (a->model != b->model) return a->model - b->model;
    if (a->k0 != b->k0) return a->k0 < b->k0 ? -1 : 1;
    if (a->k1 != b->k1) return a->k1 < b->k1 ? -1 : 1;
    return 0;
}

static int64_t find_slice(const slice *sl, int64_t n, int model, int64_t k0, int64_t k1)
{
    slice key = {model, k0, k1, NULL};
    const slice *hit = bsearch(&key, sl, (size_t)n, sizeof *sl, slice_cmp);
    return hit ? hit - sl : -1;
}

/* pairwise FP32 sum of the products a[i] * b[i], i < n: left half first n/2 */
static float pairwise_dot(const uint16_t *a, const uint16_t *b, int64_t n, const float *f)
{
    if (n == 0) return 0.0f;
    if (n == 1) return f[a[0]] * f[b[0]]; /* exact for 16-bit operands */
    int64_t h = n / 2;
    float l = pairwise_dot(a, b, h, f);
    float r = pairwise_dot(a + h, b + h, n - h, f);
    return l + r;
}

typedef struct gen_ctx {
    const engine *e;
    const evalset *set;
    slice *sl; /* the generic slices, sorted */
    int64_t nsl;
    int64_t base; /* output index of item 0 */
} gen_ctx;

static void gen_outputs(void *p, int64_t begin, int64_t end)
{
    gen_ctx *g = p;
    const engine *e = g->e;
    const evalset *s = g->set;
    const int64_t K = e->K, Kp = e->Kp;
    const float *f = e->to_f32;
    for (int64_t o = g->base + begin; o < g->base + end; o++) {
        int64_t r = o / s->nc, c = o % s->nc;
        const uint16_t *a = s->a16 ? s->a16 + r * K : NULL, *b = s->b16 ? s->b16 + c * K : NULL;
        for (int64_t i = 0; i < g->nsl;) {
            int model = g->sl[i].model;
            int64_t k0 = g->sl[i].k0, j = i;
            while (j < g->nsl && g->sl[j].model == model && g->sl[j].k0 == k0) j++;
            float acc = 0.0f;
            int64_t k = k0;
            for (int64_t t = i; t < j; t++) {
                int64_t k1 = g->sl[t].k1;
                switch (model) {
                case EM_FMA:
                    for (; k < k1; k++) acc = fmaf(f[a[k]], f[b[k]], acc);
                    break;
                case EM_SM90:
                    for (; k < k1; k += 16) {
                        if (k + 16 <= K) {
                            acc = nvfp4_sm90_step(acc, a + k, b + k, e->type);
                        } else { /* the last step of K, padded with zeros */
                            uint16_t pa[16] = {0}, pb[16] = {0};
                            memcpy(pa, a + k, (size_t)(K - k) * 2);
                            memcpy(pb, b + k, (size_t)(K - k) * 2);
                            acc = nvfp4_sm90_step(acc, pa, pb, e->type);
                        }
                    }
                    break;
                case EM_SM120:
                    for (; k < k1; k += 64) {
                        uint8_t ac[64] = {0}, bc[64] = {0}, as[4] = {0}, bs[4] = {0};
                        int64_t n = Kp - k < 64 ? Kp - k : 64;
                        memcpy(ac, s->acodes + r * Kp + k, (size_t)n);
                        memcpy(bc, s->bcodes + c * Kp + k, (size_t)n);
                        memcpy(as, s->ascales + r * (Kp / 16) + k / 16, (size_t)n / 16);
                        memcpy(bs, s->bscales + c * (Kp / 16) + k / 16, (size_t)n / 16);
                        acc = nvfp4_sm120_step(acc, ac, as, bc, bs);
                    }
                    break;
                case EM_EXACT:
                    acc = nvfp4_exact_dot(0.0f, a + k0, b + k0, k1 - k0, e->type);
                    break;
                default:
                    acc = pairwise_dot(a + k0, b + k0, k1 - k0, f);
                    break;
                }
                g->sl[t].vals[o] = acc;
            }
            i = j;
        }
    }
}

static int is_fast(const engine *e, int model)
{
    return e->fast && (model == EM_SM90 || model == EM_EXACT);
}

/* Compute every slice in sl[0..n) for the set. */
static nvfp4_status compute_slices(engine *e, evalset *s, slice *sl, int64_t n)
{
    int64_t outputs = s->nr * s->nc;
    int need16 = 0, need_codes = 0;
    for (int64_t i = 0; i < n; i++) {
        if (sl[i].model == EM_SM120) need_codes = 1;
        else if (!is_fast(e, sl[i].model)) need16 = 1;
    }
    if (need16 && (!s->a16 || !s->b16))
        return nvfp4_fail(NVFP4_ERR_INTERNAL, "nvfp4_explain: 16-bit operands missing");
    if (need_codes && (!s->acodes || !s->bcodes))
        return nvfp4_fail(NVFP4_ERR_INTERNAL, "nvfp4_explain: NVFP4 codes missing");
    int64_t nfast = 0, done = 0;
    if (n == 0) return NVFP4_OK;
    for (int64_t i = 0; i < n; i++) nfast += is_fast(e, sl[i].model);
    for (int64_t i = 0; i < n; i++) {
        if (!is_fast(e, sl[i].model)) continue;
        int64_t k1 = (sl[i].k1 + 15) / 16 * 16; /* K padded with zeros to Kp */
        nvfp4_status st = nvfp4_cpu_gemm_slice(&s->ta, &s->tb,
                                               sl[i].model == EM_SM90 ? NVFP4_MODEL_SM90
                                                                      : NVFP4_MODEL_EXACT,
                                               sl[i].k0, k1, sl[i].vals, e->nthreads);
        if (st != NVFP4_OK) return st;
        report(e, (double)++done / (double)(n > 0 ? n : 1));
    }
    /* the generic slices are contiguous runs in the sorted list: compact them */
    slice *gen = malloc((size_t)(n ? n : 1) * sizeof *gen);
    if (!gen) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "nvfp4_explain: out of memory");
    int64_t ng = 0;
    for (int64_t i = 0; i < n; i++)
        if (!is_fast(e, sl[i].model)) gen[ng++] = sl[i];
    nvfp4_status st = NVFP4_OK;
    /* in pieces, for progress */
    int64_t pieces = outputs > 4096 ? 16 : 1;
    for (int64_t p = 0; ng > 0 && p < pieces && st == NVFP4_OK; p++) {
        int64_t b0 = outputs * p / pieces, b1 = outputs * (p + 1) / pieces;
        gen_ctx g = {e, s, gen, ng, b0};
        st = nvfp4_parallel_for(b1 - b0, 16, e->nthreads, gen_outputs, &g);
        report(e, (double)(nfast + (n - nfast) * (p + 1) / pieces) / (double)n);
    }
    free(gen);
    return st;
}

/*-------------------------------------------------------------------------
 *  Combining and comparing
 *-------------------------------------------------------------------------*/
static float combine_pairwise(const float *p, int n)
{
    if (n == 1) return p[0];
    int h = n / 2;
    float l = combine_pairwise(p, h);
    float r = combine_pairwise(p + h, n - h);
    return l + r;
}

static float combine(const float *p, int n, int how)
{
    if (how == COMB_PAIRWISE) return combine_pairwise(p, n);
    float acc;
    if (how == COMB_REVERSED) {
        acc = p[n - 1];
        for (int i = n - 2; i >= 0; i--) acc = acc + p[i];
    } else {
        acc = p[0];
        for (int i = 1; i < n; i++) acc = acc + p[i];
    }
    return acc;
}

/* Evaluate the alive candidates on the set whose slices are computed. */
static void evaluate(engine *e, const evalset *s, slice *sl, int64_t nsl)
{
    const nvfp4_explain_args *args = e->args;
    int64_t outputs = s->nr * s->nc;
    for (int ci = 0; ci < e->ncands; ci++) {
        cand *c = &e->cands[ci];
        if (!c->alive) continue;
        const float *parts[LIMIT_MAX_K_SLICES];
        for (int t = 0; t < c->k_slices; t++) {
            int64_t k0 = t * c->len, k1 = k0 + c->len < e->K ? k0 + c->len : e->K;
            int64_t idx = find_slice(sl, nsl, c->model, k0, k1);
            parts[t] = sl[idx].vals;
        }
        int64_t matched = 0;
        float p[LIMIT_MAX_K_SLICES] = {0};
        for (int64_t o = 0; o < outputs; o++) {
            for (int t = 0; t < c->k_slices; t++) p[t] = parts[t][o];
            float v = combine(p, c->k_slices, c->combine);
            int64_t gr = set_row(s, o / s->nc), gc = set_col(s, o % s->nc);
            size_t gi = (size_t)(gr * e->N + gc);
            int ok;
            uint32_t ref_bits;
            if (args->ref) {
                ref_bits = nvfp4_f32_bits(args->ref[gi]);
                ok = nvfp4_f32_bits(v) == ref_bits;
            } else {
                ref_bits = args->ref_bf16[gi];
                ok = nvfp4_epilogue(v, args->alpha, args->bias ? &args->bias[gc] : NULL) ==
                     args->ref_bf16[gi];
            }
            if (ok) {
                matched++;
            } else if (!c->has_first || gr < c->first_row ||
                       (gr == c->first_row && gc < c->first_col)) {
                c->has_first = 1;
                c->first_row = gr;
                c->first_col = gc;
                c->first_got = v;
                c->first_ref_bits = ref_bits;
            }
        }
        c->evaluated += outputs;
        c->matched += matched;
    }
}

/* Collect the distinct slices of the alive candidates, allocate their values. */
static nvfp4_status gather_slices(const engine *e, int64_t outputs, slice **out, int64_t *nout)
{
    int64_t cap = 0;
    for (int ci = 0; ci < e->ncands; ci++)
        if (e->cands[ci].alive) cap += e->cands[ci].k_slices;
    slice *sl = malloc((size_t)(cap ? cap : 1) * sizeof *sl);
    if (!sl) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "nvfp4_explain: out of memory");
    int64_t n = 0;
    for (int ci = 0; ci < e->ncands; ci++) {
        const cand *c = &e->cands[ci];
        if (!c->alive) continue;
        for (int t = 0; t < c->k_slices; t++) {
            int64_t k0 = t * c->len, k1 = k0 + c->len < e->K ? k0 + c->len : e->K;
            sl[n++] = (slice){c->model, k0, k1, NULL};
        }
    }
    qsort(sl, (size_t)n, sizeof *sl, slice_cmp);
    int64_t u = 0;
    for (int64_t i = 0; i < n; i++)
        if (u == 0 || slice_cmp(&sl[u - 1], &sl[i]) != 0) sl[u++] = sl[i];
    for (int64_t i = 0; i < u; i++) {
        sl[i].vals = malloc((size_t)(outputs ? outputs : 1) * sizeof(float));
        if (!sl[i].vals) {
            for (int64_t j = 0; j < i; j++) free(sl[j].vals);
            free(sl);
            return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY,
                              "nvfp4_explain: out of memory for %lld slice partials",
                              (long long)u);
        }
    }
    *out = sl;
    *nout = u;
    return NVFP4_OK;
}

static void free_slices(slice *sl, int64_t n)
{
    for (int64_t i = 0; i < n; i++) free(sl[i].vals);
    free(sl);
}

/*-------------------------------------------------------------------------
 *  Building evaluation sets
 *-------------------------------------------------------------------------*/
typedef struct needs {
    int fast, values, codes;
} needs;

static needs alive_needs(const engine *e)
{
    needs n = {0, 0, 0};
    for (int ci = 0; ci < e->ncands; ci++) {
        const cand *c = &e->cands[ci];
        if (!c->alive) continue;
        if (c->model == EM_SM120) n.codes = 1;
        else if (is_fast(e, c->model)) n.fast = 1;
        else n.values = 1;
    }
    return n;
}

static nvfp4_status oom(void) { return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "nvfp4_explain: out of memory"); }

/* The sample: rows idx_r x cols idx_c, everything copied. */
static nvfp4_status build_sample(const engine *e, evalset *s, const int64_t *ir, int64_t nr,
                                 const int64_t *ic, int64_t nc, needs nd)
{
    memset(s, 0, sizeof *s);
    s->nr = nr;
    s->nc = nc;
    s->rows = ir;
    s->cols = ic;
    if (nd.fast) {
        if (!copy_nv_rows(&s->ta, &e->A, ir, nr) || !copy_nv_rows(&s->tb, &e->B, ic, nc)) return oom();
        s->own_ta = s->own_tb = 1;
    }
    if (nd.values) {
        s->a16 = s->own_a16 = values_of_rows(e, 0, ir, 0, nr);
        s->b16 = s->own_b16 = values_of_rows(e, 1, ic, 0, nc);
        if (!s->a16 || !s->b16) return oom();
    }
    if (nd.codes) {
        if (!codes_of_rows(e, 0, ir, 0, nr, &s->own_acodes, &s->own_ascales) ||
            !codes_of_rows(e, 1, ic, 0, nc, &s->own_bcodes, &s->own_bscales))
            return oom();
        s->acodes = s->own_acodes;
        s->ascales = s->own_ascales;
        s->bcodes = s->own_bcodes;
        s->bscales = s->own_bscales;
    }
    return NVFP4_OK;
}

/* Rows [r0, r1) x every column: A rows viewed or copied, B whole (cached). */
static nvfp4_status build_chunk(engine *e, evalset *s, int64_t r0, int64_t r1, needs nd)
{
    memset(s, 0, sizeof *s);
    s->nr = r1 - r0;
    s->nc = e->N;
    s->row0 = r0;
    if (nd.fast) {
        s->ta = e->A; /* row-major scales: a view of rows r0.. */
        s->ta.rows = r1 - r0;
        s->ta.codes = e->A.codes + r0 * (e->Kp / 2);
        s->ta.scales = e->A.scales + r0 * (e->Kp / 16);
        s->tb = e->B;
    }
    if (nd.values) {
        if (e->a16) {
            s->a16 = e->a16 + r0 * e->K;
        } else {
            s->a16 = s->own_a16 = values_of_rows(e, 0, NULL, r0, r1 - r0);
            if (!s->a16) return oom();
        }
        if (!e->b16) {
            e->b16 = e->own_b16 = values_of_rows(e, 1, NULL, 0, e->N);
            if (!e->b16) return oom();
        }
        s->b16 = e->b16;
    }
    if (nd.codes) {
        if (!codes_of_rows(e, 0, NULL, r0, r1 - r0, &s->own_acodes, &s->own_ascales)) return oom();
        if (!e->bcodes && !codes_of_rows(e, 1, NULL, 0, e->N, &e->bcodes, &e->bscales)) return oom();
        s->acodes = s->own_acodes;
        s->ascales = s->own_ascales;
        s->bcodes = e->bcodes;
        s->bscales = e->bscales;
    }
    return NVFP4_OK;
}

/* Slices of the alive candidates on one set, then their evaluation. */
static nvfp4_status run_set(engine *e, evalset *s)
{
    slice *sl = NULL;
    int64_t nsl = 0;
    nvfp4_status st = gather_slices(e, s->nr * s->nc, &sl, &nsl);
    if (st != NVFP4_OK) return st;
    st = compute_slices(e, s, sl, nsl);
    if (st == NVFP4_OK) evaluate(e, s, sl, nsl);
    free_slices(sl, nsl);
    return st;
}

/*-------------------------------------------------------------------------
 *  The candidate family
 *-------------------------------------------------------------------------*/
static nvfp4_status make_candidates(engine *e, int max_s)
{
    int cap = EM_COUNT * RULE_COUNT * max_s * COMB_COUNT;
    e->cands = calloc((size_t)cap, sizeof *e->cands);
    if (!e->cands) return oom();
    for (int model = 0; model < EM_COUNT; model++) {
        if (model == EM_SM120 && !e->nvfp4_given) continue;
        for (int s = 1; s <= max_s; s++) {
            for (int rule = 0; rule < RULE_COUNT; rule++) {
                int64_t len = rule_len(rule, e->K, s);
                if (model == EM_SM120 && len % 64) continue; /* whole k64 steps only */
                int count = slice_count(e->K, len);
                if (count == 1) len = e->K;
                for (int how = 0; how < COMB_COUNT; how++) {
                    if (combine_redundant(how, count)) continue;
                    cand *c = NULL;
                    for (int i = 0; i < e->ncands && !c; i++)
                        if (e->cands[i].model == model && e->cands[i].len == len &&
                            e->cands[i].combine == how)
                            c = &e->cands[i];
                    if (!c) {
                        c = &e->cands[e->ncands++];
                        c->model = model;
                        c->rule = rule;
                        c->combine = how;
                        c->k_slices = count;
                        c->len = len;
                        c->alive = 1;
                        c->aliases = malloc(MAX_ALIASES * sizeof *c->aliases);
                        if (!c->aliases) return oom();
                    }
                    if (c->naliases < MAX_ALIASES)
                        c->aliases[c->naliases++] = (uint16_t)(rule << 12 | s);
                }
            }
        }
    }
    return NVFP4_OK;
}

static int cand_full(const engine *e, const cand *c)
{
    return c->evaluated == e->M * e->N && c->matched == c->evaluated;
}

/* Preference among equals: fewer slices, then the order models, rules and
 * combinations are listed in. */
static int cand_pref(const cand *a, const cand *b)
{
    if (a->k_slices != b->k_slices) return a->k_slices - b->k_slices;
    if (a->model != b->model) return a->model - b->model;
    if (a->rule != b->rule) return a->rule - b->rule;
    return a->combine - b->combine;
}

/* Best first: matched share, then evaluated on more, then fewer slices, then
 * the order models, rules and combinations are listed in. */
static int cand_cmp(const void *x, const void *y)
{
    const cand *a = x, *b = y;
    double fa = a->evaluated ? (double)a->matched / (double)a->evaluated : 0;
    double fb = b->evaluated ? (double)b->matched / (double)b->evaluated : 0;
    if (fa != fb) return fa > fb ? -1 : 1;
    if (a->evaluated != b->evaluated) return a->evaluated > b->evaluated ? -1 : 1;
    return cand_pref(a, b);
}

/*-------------------------------------------------------------------------
 *  JSON
 *-------------------------------------------------------------------------*/
static json_t *cand_json(const engine *e, const cand *c, int with_detail)
{
    json_t *o = json_object();
    json_object_set_new(o, "model", json_string(model_names[c->model]));
    json_object_set_new(o, "k_slices", json_integer(c->k_slices));
    json_object_set_new(o, "slice_rule", json_string(rule_names[c->rule]));
    json_object_set_new(o, "slice_elems", json_integer(c->len));
    json_object_set_new(o, "combine", json_string(comb_names[c->combine]));
    json_object_set_new(o, "matched",
                        json_real(c->evaluated ? (double)c->matched / (double)c->evaluated : 0.0));
    json_object_set_new(o, "matched_count", json_integer(c->matched));
    json_object_set_new(o, "evaluated", json_integer(c->evaluated));
    json_object_set_new(o, "matches_all", json_boolean(cand_full(e, c)));
    json_t *al = json_array();
    for (int i = 0; i < c->naliases; i++) {
        char buf[48];
        snprintf(buf, sizeof buf, "%s/S=%d", rule_names[c->aliases[i] >> 12], c->aliases[i] & 0xfff);
        json_array_append_new(al, json_string(buf));
    }
    json_object_set_new(o, "aliases", al);
    if (with_detail) {
        if (c->has_first) {
            json_t *m = json_object();
            char b1[16], b2[16];
            json_object_set_new(m, "row", json_integer(c->first_row));
            json_object_set_new(m, "col", json_integer(c->first_col));
            int bf16 = e->args->ref == NULL;
            float refv = bf16 ? nvfp4_bf16_to_f32((uint16_t)c->first_ref_bits)
                              : nvfp4_f32_from_bits(c->first_ref_bits);
            uint32_t got_bits = bf16 ? nvfp4_epilogue(c->first_got, e->args->alpha,
                                                      e->args->bias ? &e->args->bias[c->first_col]
                                                                    : NULL)
                                     : nvfp4_f32_bits(c->first_got);
            float gotv = bf16 ? nvfp4_bf16_to_f32((uint16_t)got_bits) : c->first_got;
            json_object_set_new(m, "ref", isfinite(refv) ? json_real(refv) : json_null());
            json_object_set_new(m, "got", isfinite(gotv) ? json_real(gotv) : json_null());
            snprintf(b1, sizeof b1, bf16 ? "0x%04x" : "0x%08x", (unsigned)c->first_ref_bits);
            snprintf(b2, sizeof b2, bf16 ? "0x%04x" : "0x%08x", (unsigned)got_bits);
            json_object_set_new(m, "ref_bits", json_string(b1));
            json_object_set_new(m, "got_bits", json_string(b2));
            json_object_set_new(o, "first_mismatch", m);
        } else {
            json_object_set_new(o, "first_mismatch", json_null());
        }
    }
    return o;
}

static nvfp4_status write_json(engine *e, int64_t sample_outputs, char **json)
{
    qsort(e->cands, (size_t)e->ncands, sizeof *e->cands, cand_cmp);
    const cand *best = &e->cands[0];
    int best_full = cand_full(e, best), unique = best_full, distinct_full = 0;
    json_t *fm = json_array();
    for (int i = 0; i < e->ncands; i++) {
        const cand *c = &e->cands[i];
        if (!cand_full(e, c)) continue;
        int new_kind = 1; /* a (model, k_slices) not seen among earlier full matches */
        for (int j = 0; j < i; j++)
            if (cand_full(e, &e->cands[j]) && e->cands[j].model == c->model &&
                e->cands[j].k_slices == c->k_slices)
                new_kind = 0;
        distinct_full += new_kind;
        if (c->model != best->model || c->k_slices != best->k_slices) unique = 0;
        if (json_array_size(fm) < 64) {
            json_t *o = json_object();
            json_object_set_new(o, "model", json_string(model_names[c->model]));
            json_object_set_new(o, "k_slices", json_integer(c->k_slices));
            json_object_set_new(o, "slice_rule", json_string(rule_names[c->rule]));
            json_object_set_new(o, "combine", json_string(comb_names[c->combine]));
            json_array_append_new(fm, o);
        }
    }
    int ambiguous = distinct_full >= 2;
    char verdict[400];
    if (unique)
        snprintf(verdict, sizeof verdict,
                 "unique: %s, %d K slice%s (%s, %s) reproduces all %lld outputs; no other model "
                 "or K-slice count does",
                 model_names[best->model], best->k_slices, best->k_slices == 1 ? "" : "s",
                 rule_names[best->rule], comb_names[best->combine], (long long)(e->M * e->N));
    else if (ambiguous)
        snprintf(verdict, sizeof verdict,
                 "ambiguous: %s%d contracts with different models or K slices reproduce all %lld "
                 "outputs; the data cannot tell them apart",
                 e->unconfirmed ? "at least " : "", distinct_full, (long long)(e->M * e->N));
    else
        snprintf(verdict, sizeof verdict,
                 "no candidate reproduces every output; the best, %s with %d K slice%s, matches "
                 "%.6f of %lld",
                 model_names[best->model], best->k_slices, best->k_slices == 1 ? "" : "s",
                 best->evaluated ? (double)best->matched / (double)best->evaluated : 0.0,
                 (long long)best->evaluated);

    json_t *root = json_object();
    const nvfp4_explain_args *a = e->args;
    json_object_set_new(root, "outputs", json_integer(e->M * e->N));
    json_object_set_new(root, "m", json_integer(e->M));
    json_object_set_new(root, "n", json_integer(e->N));
    json_object_set_new(root, "k", json_integer(e->K));
    json_object_set_new(root, "operands",
                        json_string(e->nvfp4_given ? "nvfp4"
                                                   : a->type16 == NVFP4_OPERAND_F16 ? "f16" : "bf16"));
    json_object_set_new(root, "operands_nvfp4_values", json_boolean(e->have_nv));
    json_object_set_new(root, "reference", json_string(a->ref ? "f32" : "bf16"));
    json_object_set_new(root, "sample_outputs", json_integer(sample_outputs));
    json_object_set_new(root, "candidates_evaluated", json_integer(e->ncands));
    json_t *cl = json_array();
    for (int i = 0; i < e->ncands; i++) json_array_append_new(cl, cand_json(e, &e->cands[i], 0));
    json_object_set_new(root, "candidates", cl);
    json_object_set_new(root, "best", cand_json(e, best, 1));
    json_object_set_new(root, "unique", json_boolean(unique));
    json_object_set_new(root, "ambiguous", json_boolean(ambiguous));
    json_object_set_new(root, "full_match_kinds", json_integer(distinct_full));
    json_object_set_new(root, "sample_only_candidates", json_integer(e->unconfirmed));
    json_object_set_new(root, "full_matches", fm);
    json_object_set_new(root, "verdict", json_string(verdict));
    char *text = json_dumps(root, JSON_INDENT(1) | JSON_REAL_PRECISION(9));
    json_decref(root);
    if (!text) return oom();
    *json = text; /* malloc'ed by jansson's default allocator: nvfp4_free() frees it */
    return NVFP4_OK;
}

/*-------------------------------------------------------------------------
 *  Entry point
 *-------------------------------------------------------------------------*/
static nvfp4_status check_args(const nvfp4_explain_args *a)
{
    const char *fn = "nvfp4_explain";
    if (!a) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: args is NULL", fn);
    if ((a->a != NULL) != (a->b != NULL) || (a->a16 != NULL) != (a->b16 != NULL) ||
        (a->a != NULL) == (a->a16 != NULL))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "%s: give either both NVFP4 operands (a, b) or both 16-bit ones "
                          "(a16, b16)", fn);
    if (a->a) {
        nvfp4_status st = nvfp4_check_gemm_operand(a->a, fn, "A");
        if (st == NVFP4_OK) st = nvfp4_check_gemm_operand(a->b, fn, "B");
        if (st != NVFP4_OK) return st;
        if (a->a->cols != a->b->cols)
            return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: K differs: A has %lld, B %lld", fn,
                              (long long)a->a->cols, (long long)a->b->cols);
    } else if (a->type16 != NVFP4_OPERAND_F16 && a->type16 != NVFP4_OPERAND_BF16) {
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: unknown 16-bit type %d", fn,
                          (int)a->type16);
    }
    int64_t m = a->a ? a->a->rows : a->m, n = a->a ? a->b->rows : a->n,
            k = a->a ? a->a->cols : a->k;
    if (m < 1 || n < 1 || k < 1)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: empty shape M=%lld N=%lld K=%lld", fn,
                          (long long)m, (long long)n, (long long)k);
    size_t t;
    if (!nvfp4_mul_size((size_t)m, (size_t)n, &t) || !nvfp4_mul_size(t, 4, &t) ||
        !nvfp4_mul_size((size_t)m > (size_t)n ? (size_t)m : (size_t)n, (size_t)k * 4, &t))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: shape M=%lld N=%lld K=%lld is too large",
                          fn, (long long)m, (long long)n, (long long)k);
    if ((a->ref != NULL) == (a->ref_bf16 != NULL))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "%s: give exactly one reference: ref (F32) or ref_bf16", fn);
    if (a->nthreads < 0)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: nthreads is %d", fn, a->nthreads);
    if (a->max_k_slices < 0 || a->max_k_slices > LIMIT_MAX_K_SLICES)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: max_k_slices = %d is outside 0..%d", fn,
                          a->max_k_slices, LIMIT_MAX_K_SLICES);
    return NVFP4_OK;
}

static void engine_free(engine *e)
{
    nvfp4_tensor_free(&e->A);
    nvfp4_tensor_free(&e->B);
    free(e->own_a16);
    free(e->own_b16);
    free(e->bcodes);
    free(e->bscales);
    free(e->to_f32);
    for (int i = 0; i < e->ncands; i++) free(e->cands[i].aliases);
    free(e->cands);
}

nvfp4_status nvfp4_explain(const nvfp4_explain_args *args, char **json)
{
    if (json) *json = NULL;
    if (!json) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_explain: json is NULL");
    nvfp4_status st = check_args(args);
    if (st != NVFP4_OK) return st;
    engine e;
    memset(&e, 0, sizeof e);
    e.args = args;
    e.nthreads = args->nthreads ? args->nthreads : nvfp4_default_threads();
    e.nvfp4_given = args->a != NULL;
    e.M = e.nvfp4_given ? args->a->rows : args->m;
    e.N = e.nvfp4_given ? args->b->rows : args->n;
    e.K = e.nvfp4_given ? args->a->cols : args->k;
    e.Kp = (e.K + 15) / 16 * 16;
    e.type = e.nvfp4_given ? NVFP4_OPERAND_F16 : args->type16;
    e.to_f32 = malloc(65536 * sizeof(float));
    if (!e.to_f32) return oom();
    for (uint32_t v = 0; v < 65536; v++)
        e.to_f32[v] = e.type == NVFP4_OPERAND_F16 ? nvfp4_f16_to_f32((uint16_t)v)
                                                  : nvfp4_bf16_to_f32((uint16_t)v);
    if (e.nvfp4_given) {
        st = nvfp4_tensor_convert(&e.A, args->a, NVFP4_HI_FIRST, NVFP4_SCALES_ROW_MAJOR);
        if (st == NVFP4_OK)
            st = nvfp4_tensor_convert(&e.B, args->b, NVFP4_HI_FIRST, NVFP4_SCALES_ROW_MAJOR);
        if (st != NVFP4_OK) {
            engine_free(&e);
            return st;
        }
        e.have_nv = 1;
    } else {
        e.a16 = args->a16;
        e.b16 = args->b16;
        e.have_nv = factor_nvfp4(&e.A, args->a16, e.M, e.K, e.to_f32) &&
                    factor_nvfp4(&e.B, args->b16, e.N, e.K, e.to_f32);
        if (!e.have_nv) {
            nvfp4_tensor_free(&e.A);
            nvfp4_tensor_free(&e.B);
        }
    }
    /* the kernels' NaN rule is per row; NaN scales go through the model steps */
    e.fast = e.have_nv && !any_nan_scale(&e.A) && !any_nan_scale(&e.B);

    st = make_candidates(&e, args->max_k_slices ? args->max_k_slices : DEFAULT_MAX_K_SLICES);

    /* Phase 1: the sample, every candidate */
    int64_t nr = e.M < SAMPLE_ROWS ? e.M : SAMPLE_ROWS, nc = e.N < SAMPLE_COLS ? e.N : SAMPLE_COLS;
    int64_t ir[SAMPLE_ROWS], ic[SAMPLE_COLS];
    for (int64_t i = 0; i < nr; i++) ir[i] = nr > 1 ? i * (e.M - 1) / (nr - 1) : 0;
    for (int64_t j = 0; j < nc; j++) ic[j] = nc > 1 ? j * (e.N - 1) / (nc - 1) : 0;
    int whole = nr == e.M && nc == e.N;
    e.progress_lo = 0;
    e.progress_hi = whole ? 1.0 : 0.2;
    report(&e, 0);
    if (st == NVFP4_OK) {
        evalset s;
        st = build_sample(&e, &s, ir, nr, ic, nc, alive_needs(&e));
        if (st == NVFP4_OK) st = run_set(&e, &s);
        set_free(&s);
    }

    /* Phase 2: what matched the whole sample, on every output -- in rounds,
     * most preferred (fewest slices, then model order) first: 2 kinds
     * (model, k_slices), then 4, 8, ...; once two kinds match everything the
     * answer is "ambiguous" and the rest stay evaluated on the sample only. */
    if (st == NVFP4_OK && !whole) {
        int *surv = malloc((size_t)(e.ncands ? e.ncands : 1) * sizeof *surv);
        if (!surv) st = oom();
        int nsurv = 0;
        for (int i = 0; st == NVFP4_OK && i < e.ncands; i++) {
            cand *c = &e.cands[i];
            c->alive = 0;
            if (c->matched == c->evaluated) surv[nsurv++] = i;
        }
        /* preference order (insertion sort: a few hundred at most) */
        for (int i = 1; i < nsurv; i++)
            for (int j = i; j > 0 && cand_pref(&e.cands[surv[j]], &e.cands[surv[j - 1]]) < 0; j--) {
                int t = surv[j];
                surv[j] = surv[j - 1];
                surv[j - 1] = t;
            }
        int pos = 0, want = 2, confirmed = 0, round = 0;
        while (st == NVFP4_OK && pos < nsurv && confirmed < 2) {
            int end = pos, kinds = 0, max_slices = 0;
            while (end < nsurv) {
                const cand *c = &e.cands[surv[end]];
                int new_kind = end == pos || c->model != e.cands[surv[end - 1]].model ||
                               c->k_slices != e.cands[surv[end - 1]].k_slices;
                if (new_kind && kinds == want) break;
                kinds += new_kind;
                end++;
            }
            for (int i = pos; i < end; i++) {
                cand *c = &e.cands[surv[i]];
                c->alive = 1;
                c->evaluated = c->matched = 0;
                c->has_first = 0;
                max_slices += c->k_slices;
            }
            int64_t per_chunk = CHUNK_OUTPUTS;
            if (CHUNK_FLOATS / max_slices < per_chunk) per_chunk = CHUNK_FLOATS / max_slices;
            int64_t chunk_rows = per_chunk / e.N > 0 ? per_chunk / e.N : 1;
            double lo = 0.2 + 0.8 * (1.0 - 1.0 / (double)(1 << round)),
                   hi = 0.2 + 0.8 * (1.0 - 1.0 / (double)(2 << round));
            for (int64_t r0 = 0; r0 < e.M && st == NVFP4_OK; r0 += chunk_rows) {
                int64_t r1 = r0 + chunk_rows < e.M ? r0 + chunk_rows : e.M;
                int any_alive = 0;
                for (int i = pos; i < end; i++) any_alive |= e.cands[surv[i]].alive;
                if (!any_alive) break;
                e.progress_lo = lo + (hi - lo) * (double)r0 / (double)e.M;
                e.progress_hi = lo + (hi - lo) * (double)r1 / (double)e.M;
                evalset s;
                st = build_chunk(&e, &s, r0, r1, alive_needs(&e));
                if (st == NVFP4_OK) st = run_set(&e, &s);
                set_free(&s);
                /* early rejection: once something is still perfect, stop the rest */
                int any_perfect = 0;
                for (int i = pos; i < end; i++) {
                    const cand *c = &e.cands[surv[i]];
                    if (c->alive && c->matched == c->evaluated) any_perfect = 1;
                }
                if (any_perfect)
                    for (int i = pos; i < end; i++) {
                        cand *c = &e.cands[surv[i]];
                        if (c->alive && c->matched != c->evaluated) c->alive = 0;
                    }
            }
            for (int i = pos; i < end; i++) {
                cand *c = &e.cands[surv[i]];
                c->alive = 0;
                int full = cand_full(&e, c), new_kind = full;
                for (int j = pos; j < i && full; j++)
                    if (cand_full(&e, &e.cands[surv[j]]) && e.cands[surv[j]].model == c->model &&
                        e.cands[surv[j]].k_slices == c->k_slices)
                        new_kind = 0;
                confirmed += new_kind;
            }
            pos = end;
            want *= 2;
            round++;
        }
        e.unconfirmed = nsurv - pos;
        free(surv);
    }
    if (st == NVFP4_OK) {
        e.progress_lo = e.progress_hi = 1.0;
        report(&e, 1);
        st = write_json(&e, nr * nc, json);
    }
    engine_free(&e);
    return st;
}

void nvfp4_free(void *p) { free(p); }
