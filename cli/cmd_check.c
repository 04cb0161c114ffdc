/* cmd_check.c -- `nvfp4 check`: the P0 gate in one command, in the seed's schema.
 *
 * For each linear: make (or load) the weight and the activations, quantize them
 * with ComfyUI's quantizer, run the chosen backend, and compare every bit of raw
 * and out with the C oracle of that backend's hardware model:
 *   - all M x N outputs against the fast CPU oracle backend (when the backend
 *     is the GPU; the CPU backend is itself that oracle's fast path), and
 *   - sampled rows against the plain reference model code (nvfp4_gemm_ref).
 * It also checks batch invariance (a sampled row computed alone vs inside the
 * batch), repeatability (a second run), the distance from the exact oracle in
 * ULPs, and how often a plain FP32-FMA loop (the stock check) disagrees. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "synth.h"

static const char help[] =
    "usage: nvfp4 check [options]\n"
    "\n"
    "The P0 gate: is the NVFP4 GEMM bit-exact, raw and with the alpha-before-BF16\n"
    "epilogue, against the accumulation oracle of its hardware (docs/CONTRACT.md)?\n"
    "Default: the seed's four linears (attn_qkv_proj 21504x5376, attn_out_proj\n"
    "5376x7168, mlp_fc1 28672x5376, mlp_fc2 5376x14336) on seeded synthetic data\n"
    "quantized by ComfyUI's quantizer.  Prints a table and writes a JSON report with\n"
    "the seed report's keys (device, compute_capability, rows, kernel, results,\n"
    "findings, status) plus the oracle model, ULP error against the exact oracle,\n"
    "timings and batch invariance.  Exit status 0 only when everything compared is\n"
    "bit-exact and something was compared; a sampled check says so.\n"
    "\n"
    "options:\n"
    "  --rows N            activation rows M (default 128 on a GPU, 16 on the CPU so\n"
    "                      that a 2-core machine finishes in well under a minute)\n"
    "  --backend B         auto (default: cuda when an sm_90 GPU is usable), cuda, cpu\n"
    "  --checkpoint FILE   take the weights from a ComfyUI NVFP4 checkpoint ...\n"
    "  --layers L1,L2,...  ... these layers (LAYER.weight, _scale, _scale_2, optional\n"
    "                      LAYER.input_scale and LAYER.bias); activations stay synthetic\n"
    "  --k-slices S        the contract with S K slices (docs/CONTRACT.md; default 1:\n"
    "                      one chain per output), in the backend and every oracle\n"
    "  --streaming-a       feed BF16 activations to the backend's linear path (on a GPU\n"
    "                      the GEMM's fused A producer) and compare its outputs with\n"
    "                      quantize-then-GEMM and its NVFP4 activations with the C\n"
    "                      quantizer's, bit for bit\n"
    "  --oracle-rows N|all rows also checked against the plain reference model and the\n"
    "                      exact oracle (default 2 on the CPU, 4 on a GPU; all: every\n"
    "                      row, and every column unless --oracle-cols says otherwise) ...\n"
    "  --oracle-cols N|all ... on N columns spread over the output (default 1024)\n"
    "  --seed S            synthetic data seed (default 2026)\n"
    "  --json FILE         report path (default nvfp4-check.json; '-' for none)\n"
    "  --threads N         CPU threads (default: all cores)\n"
    "  --force             write the report even over the --checkpoint file\n";

/* --oracle-rows / --oracle-cols all: more than any dimension */
#define ORACLE_ALL ((long long)1 << 40)

typedef struct linear_spec {
    char name[256];
    int64_t n, k;
} linear_spec;

static const linear_spec seed_linears[4] = {
    {"attn_qkv_proj", 21504, 5376},
    {"attn_out_proj", 5376, 7168},
    {"mlp_fc1", 28672, 5376},
    {"mlp_fc2", 5376, 14336},
};

typedef struct diff_stats {
    int equal;
    double max_abs, mean_abs;
    int64_t compared, differ;
    int64_t row, col; /* first difference */
    uint32_t got, want;
} diff_stats;

typedef struct result {
    linear_spec lin;
    int64_t m;
    diff_stats raw, out;
    int batch_invariant, repeatable;
    int quantized_equal; /* streaming A: the backend's NVFP4 activations == the C quantizer's */
    int64_t rows_full, rows_ref, cols_ref;
    uint64_t ulp_raw_max, ulp_out_max;
    double ulp_raw_mean, ulp_out_mean;
    double fma_mismatch; /* fraction of sampled raw outputs an FP32 FMA loop gets wrong */
    double t_backend_ms, t_oracle_ms, t_ref_ms;
    int error;
    char error_msg[512];
} result;

typedef struct ctx {
    int cuda, threads, streaming;
    int k_slices; /* the contract's K slices (docs/CONTRACT.md), 1 = one chain */
    nvfp4_model model;
} ctx;

static void diff_init(diff_stats *d)
{
    memset(d, 0, sizeof *d);
    d->equal = 1;
    d->row = d->col = -1;
}

/* Compare FP32 (size 4) or BF16 (size 2) arrays; accumulate into d. */
static void diff_add(diff_stats *d, const void *got, const void *want, int size, int64_t rows,
                     int64_t cols, const int64_t *row_ids, const int64_t *col_ids)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            size_t i = (size_t)(r * cols + c);
            uint32_t g = 0, w = 0;
            float gf, wf;
            if (size == 4) {
                memcpy(&g, (const char *)got + 4 * i, 4);
                memcpy(&w, (const char *)want + 4 * i, 4);
                gf = nvfp4_f32_from_bits(g);
                wf = nvfp4_f32_from_bits(w);
            } else {
                uint16_t g16, w16;
                memcpy(&g16, (const char *)got + 2 * i, 2);
                memcpy(&w16, (const char *)want + 2 * i, 2);
                g = g16, w = w16;
                gf = nvfp4_bf16_to_f32(g16);
                wf = nvfp4_bf16_to_f32(w16);
            }
            d->compared++;
            int same = g == w || (isnan(gf) && isnan(wf)); /* NaN payloads aside */
            if (same) continue;
            d->differ++;
            double ad = fabs((double)gf - (double)wf);
            if (isnan(ad)) ad = INFINITY;
            if (d->equal) {
                d->row = row_ids ? row_ids[r] : r;
                d->col = col_ids ? col_ids[c] : c;
                d->got = g;
                d->want = w;
            }
            d->equal = 0;
            if (ad > d->max_abs) d->max_abs = ad;
            d->mean_abs += ad;
        }
}

/* mean_abs: from a sum to the mean over the compared outputs. */
static void diff_finish(diff_stats *d)
{
    if (d->differ) d->mean_abs /= (double)d->compared;
}

/* Fold finished stats s into finished stats d. */
static void diff_merge(diff_stats *d, const diff_stats *s)
{
    int64_t compared = d->compared + s->compared;
    double sum = d->mean_abs * (double)d->compared + s->mean_abs * (double)s->compared;
    if (d->equal && !s->equal) {
        d->row = s->row, d->col = s->col;
        d->got = s->got, d->want = s->want;
    }
    d->equal = d->equal && s->equal;
    if (s->max_abs > d->max_abs) d->max_abs = s->max_abs;
    d->differ += s->differ;
    d->compared = compared;
    d->mean_abs = compared ? sum / (double)compared : 0;
}

/* Copy rows idx[0..count) of t into a new tensor (row-major scales, same
 * nibble order): the sampled rows of A, or the sampled columns' weight rows. */
static nvfp4_status gather_rows(nvfp4_tensor *dst, const nvfp4_tensor *t, const int64_t *idx,
                                int64_t count)
{
    nvfp4_status st =
        nvfp4_tensor_alloc(dst, count, t->cols, t->nibble_order, NVFP4_SCALES_ROW_MAJOR);
    if (st != NVFP4_OK) return st;
    size_t row_bytes = (size_t)(t->cols / 2);
    for (int64_t i = 0; i < count; i++) {
        memcpy(dst->codes + (size_t)i * row_bytes, t->codes + (size_t)idx[i] * row_bytes, row_bytes);
        for (int64_t b = 0; b < t->cols / 16; b++)
            dst->scales[i * (t->cols / 16) + b] = nvfp4_tensor_scale(t, idx[i], b);
    }
    dst->per_tensor_scale = t->per_tensor_scale;
    return NVFP4_OK;
}

static nvfp4_status run_backend(const ctx *cx, nvfp4_gemm_args *g)
{
    g->model = cx->model;
    g->nthreads = cx->threads;
    g->k_slices = cx->k_slices;
    return cx->cuda ? nvfp4_gemm_cuda_host(g) : nvfp4_gemm_cpu(g);
}

/* a'(r, k) * b'(n, k) summed with fmaf in increasing k: the stock FP32 check. */
static float fma_loop(const nvfp4_tensor *a, int64_t r, const nvfp4_tensor *b, int64_t n)
{
    float acc = 0;
    for (int64_t k = 0; k < a->cols; k++) {
        float x = nvfp4_e2m1_to_f32(nvfp4_tensor_code(a, r, k)) *
                  fabsf(nvfp4_e4m3_to_f32(nvfp4_tensor_scale(a, r, k / 16)));
        float y = nvfp4_e2m1_to_f32(nvfp4_tensor_code(b, n, k)) *
                  fabsf(nvfp4_e4m3_to_f32(nvfp4_tensor_scale(b, n, k / 16)));
        acc = fmaf(x, y, acc);
    }
    return acc;
}

static void fail_result(result *res, const char *what)
{
    res->error = 1;
    snprintf(res->error_msg, sizeof res->error_msg, "%s: %s", what, nvfp4_last_error());
}

/* Everything for one linear.  A: the quantized activations, B: the weight. */
static void check_linear(const ctx *cx, result *res, const nvfp4_tensor *A, const nvfp4_tensor *B,
                         const float *bias, int oracle_rows, int64_t ref_cols, uint64_t seed,
                         int idx, int total)
{
    int64_t m = A->rows, n = B->rows;
    size_t mn = (size_t)(m * n);
    float *raw = malloc(mn * 4), *raw2 = malloc(mn * 4), *oraw = NULL;
    uint16_t *out = malloc(mn * 2), *out2 = malloc(mn * 2), *oout = NULL;
    diff_init(&res->raw);
    diff_init(&res->out);
    res->batch_invariant = res->repeatable = 1;
    if (!raw || !raw2 || !out || !out2) {
        res->error = 1;
        snprintf(res->error_msg, sizeof res->error_msg, "out of memory");
        goto done;
    }
    nvfp4_gemm_args g = {.a = A, .b = B, .bias = bias, .raw = raw, .out = out};
    cli_progress("[%d/%d] %s: backend (%s) M=%lld ...", idx, total, res->lin.name,
                 cx->cuda ? "cuda" : "cpu", (long long)m);
    double t0 = cli_now();
    if (run_backend(cx, &g) != NVFP4_OK) {
        fail_result(res, "backend");
        goto done;
    }
    res->t_backend_ms = 1e3 * (cli_now() - t0);

    /* Repeatability: the same call again, bit for bit. */
    g.raw = raw2;
    g.out = out2;
    if (run_backend(cx, &g) != NVFP4_OK) {
        fail_result(res, "backend (repeat)");
        goto done;
    }
    res->repeatable = !memcmp(raw, raw2, mn * 4) && !memcmp(out, out2, mn * 2);

    if (cx->cuda) { /* whole output against the CPU oracle backend */
        oraw = malloc(mn * 4);
        oout = malloc(mn * 2);
        if (!oraw || !oout) {
            res->error = 1;
            snprintf(res->error_msg, sizeof res->error_msg, "out of memory");
            goto done;
        }
        cli_progress("[%d/%d] %s: CPU oracle on all %lld rows ...", idx, total, res->lin.name,
                     (long long)m);
        nvfp4_gemm_args o = {.a = A, .b = B, .bias = bias, .raw = oraw, .out = oout,
                             .model = cx->model, .nthreads = cx->threads,
                             .k_slices = cx->k_slices};
        t0 = cli_now();
        if (nvfp4_gemm_cpu(&o) != NVFP4_OK) {
            fail_result(res, "CPU oracle");
            goto done;
        }
        res->t_oracle_ms = 1e3 * (cli_now() - t0);
        diff_add(&res->raw, raw, oraw, 4, m, n, NULL, NULL);
        diff_add(&res->out, out, oout, 2, m, n, NULL, NULL);
        res->rows_full = m;
    }

    /* Sampled rows x sampled columns: the plain reference model, the exact
     * oracle and the FMA loop (the plain model code is slow: a full row of FC1
     * is 9.6 million steps).  Sampled rows, all columns: batch invariance. */
    if (oracle_rows > m) oracle_rows = (int)m;
    int64_t ns = n < ref_cols ? n : ref_cols;
    int64_t *cols = malloc((size_t)ns * sizeof *cols);
    float *rr = malloc((size_t)ns * 4), *xr = malloc((size_t)ns * 4), *br = malloc((size_t)n * 4);
    uint16_t *ro = malloc((size_t)ns * 2), *xo = malloc((size_t)ns * 2), *bo = malloc((size_t)n * 2);
    float *bias_sub = bias ? malloc((size_t)ns * 4) : NULL;
    float *got_r = malloc((size_t)ns * 4);
    uint16_t *got_o = malloc((size_t)ns * 2);
    nvfp4_tensor bsub = {0};
    uint64_t s = seed * 31 + (uint64_t)idx;
    double ulp_raw_sum = 0, ulp_out_sum = 0;
    int64_t fma_bad = 0, fma_n = 0, ulp_n = 0;
    if (!cols || !rr || !xr || !br || !ro || !xo || !bo || !got_r || !got_o || (bias && !bias_sub)) {
        res->error = 1;
        snprintf(res->error_msg, sizeof res->error_msg, "out of memory");
        oracle_rows = 0;
    } else {
        for (int64_t j = 0; j < ns; j++) cols[j] = ns == n ? j : j * (n - 1) / (ns - 1); /* spread, first and last */
        if (bias)
            for (int64_t j = 0; j < ns; j++) bias_sub[j] = bias[cols[j]];
        if (gather_rows(&bsub, B, cols, ns) != NVFP4_OK) {
            fail_result(res, "column sample");
            oracle_rows = 0;
        }
    }
    for (int i = 0; i < oracle_rows; i++) {
        int64_t r = oracle_rows == m ? i : i == 0 ? 0 : i == 1 ? m - 1
                  : (int64_t)((s = s * 6364136223846793005ULL + 1442695040888963407ULL) >> 33) % m;
        nvfp4_tensor a1 = {0};
        if (gather_rows(&a1, A, &r, 1) != NVFP4_OK) {
            fail_result(res, "row copy");
            break;
        }
        cli_progress("[%d/%d] %s: reference model, row %lld (%d/%d) x %lld columns ...", idx, total,
                     res->lin.name, (long long)r, i + 1, oracle_rows, (long long)ns);
        nvfp4_gemm_args o = {.a = &a1, .b = &bsub, .bias = bias_sub, .raw = rr, .out = ro,
                             .model = cx->model, .k_slices = cx->k_slices};
        t0 = cli_now();
        nvfp4_status st = nvfp4_gemm_ref(&o);
        res->t_ref_ms += 1e3 * (cli_now() - t0);
        if (st == NVFP4_OK) {
            for (int64_t j = 0; j < ns; j++) {
                got_r[j] = raw[(size_t)(r * n + cols[j])];
                got_o[j] = out[(size_t)(r * n + cols[j])];
            }
            diff_add(&res->raw, got_r, rr, 4, 1, ns, &r, cols);
            diff_add(&res->out, got_o, ro, 2, 1, ns, &r, cols);
            res->rows_ref++;
        }
        /* The same row alone through the backend (batch invariance), all columns. */
        nvfp4_gemm_args b1 = {.a = &a1, .b = B, .bias = bias, .raw = br, .out = bo};
        if (st == NVFP4_OK) st = run_backend(cx, &b1);
        if (st == NVFP4_OK &&
            (memcmp(br, raw + (size_t)r * (size_t)n, (size_t)n * 4) ||
             memcmp(bo, out + (size_t)r * (size_t)n, (size_t)n * 2)))
            res->batch_invariant = 0;
        /* Distance from the exact oracle. */
        nvfp4_gemm_args e = {.a = &a1, .b = &bsub, .bias = bias_sub, .raw = xr, .out = xo,
                             .model = NVFP4_MODEL_EXACT, .nthreads = cx->threads};
        if (st == NVFP4_OK) st = nvfp4_gemm_cpu(&e);
        if (st == NVFP4_OK)
            for (int64_t j = 0; j < ns; j++) {
                uint64_t d = cli_ulp_distance(rr[j], xr[j]);
                uint64_t o16 = cli_ulp_distance(nvfp4_bf16_to_f32(ro[j]), nvfp4_bf16_to_f32(xo[j]));
                if (o16 != UINT64_MAX) o16 >>= 16;
                if (d > res->ulp_raw_max) res->ulp_raw_max = d;
                if (o16 > res->ulp_out_max) res->ulp_out_max = o16;
                ulp_raw_sum += (double)d;
                ulp_out_sum += (double)o16;
                ulp_n++;
            }
        /* The stock check: an FP32 FMA loop over the same outputs. */
        if (st == NVFP4_OK)
            for (int64_t j = 0; j < ns; j++) {
                float f = fma_loop(&a1, 0, &bsub, j);
                fma_n++;
                fma_bad += nvfp4_f32_bits(f) != nvfp4_f32_bits(rr[j]);
            }
        nvfp4_tensor_free(&a1);
        if (st != NVFP4_OK) {
            fail_result(res, "sampled rows");
            break;
        }
    }
    if (ulp_n) {
        res->ulp_raw_mean = ulp_raw_sum / (double)ulp_n;
        res->ulp_out_mean = ulp_out_sum / (double)ulp_n;
    }
    res->cols_ref = ns;
    res->fma_mismatch = fma_n ? (double)fma_bad / (double)fma_n : 0;
    nvfp4_tensor_free(&bsub);
    free(cols), free(rr), free(xr), free(br), free(ro), free(xo), free(bo);
    free(bias_sub), free(got_r), free(got_o);
done:
    diff_finish(&res->raw);
    diff_finish(&res->out);
    free(raw), free(raw2), free(out), free(out2), free(oraw), free(oout);
}

/* Every output of the linear compared: against the CPU oracle or
 * quantize-then-GEMM (all rows), or the reference model on all rows and columns. */
static int every_output(const result *r)
{
    return r->rows_full == r->m || (r->rows_ref == r->m && r->cols_ref == r->lin.n);
}

/* Streaming A: the quantized activations a backend's linear returned against
 * the C quantizer's, every byte of the padded codes and tiled scales. */
static int quantized_same(const nvfp4_tensor *got, const nvfp4_tensor *want)
{
    int64_t mp = (want->rows + 15) / 16 * 16;
    if (got->rows != mp || got->cols != want->cols || got->nibble_order != want->nibble_order ||
        got->scale_layout != want->scale_layout ||
        nvfp4_f32_bits(got->per_tensor_scale) != nvfp4_f32_bits(want->per_tensor_scale))
        return 0;
    return !memcmp(got->codes, want->codes, (size_t)(mp * want->cols / 2)) &&
           !memcmp(got->scales, want->scales,
                   nvfp4_scales_bytes(mp, want->cols, want->scale_layout));
}

static void cpu_name(char *buf, size_t n)
{
    snprintf(buf, n, "CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10)) {
            char *p = strchr(line, ':');
            if (p) {
                p++;
                while (*p == ' ') p++;
                p[strcspn(p, "\n")] = '\0';
                snprintf(buf, n, "%s", p);
            }
            break;
        }
    }
    fclose(f);
}

static json_t *jdiff_into(json_t *o, const char *prefix, const diff_stats *d)
{
    char k[64];
    snprintf(k, sizeof k, "%s_max_abs", prefix);
    json_object_set_new(o, k, json_real(d->max_abs));
    if (!d->equal) {
        snprintf(k, sizeof k, "%s_mean_abs", prefix);
        json_object_set_new(o, k, json_real(d->mean_abs));
    }
    return o;
}

/* LAYER.weight of a checkpoint when it is the U8 [N, K/2] of an NVFP4 layer. */
static const nvfp4_st_tensor *checkpoint_weight(const nvfp4_st_file *f, const char *layer)
{
    char name[300];
    snprintf(name, sizeof name, "%.255s.weight", layer);
    const nvfp4_st_tensor *t = nvfp4_st_find(f, name);
    return t && t->ndim == 2 && t->dtype == NVFP4_DTYPE_U8 ? t : NULL;
}

/* Bytes of host memory one linear's check holds at its peak: the BF16
 * weight and activations with their NVFP4 copies, and the M x N results
 * (raw FP32 + out BF16) of the run, its repeat, the CPU oracle on a GPU
 * and, for streaming A, the linear's and quantize-then-GEMM's. */
static double memory_estimate(int64_t m, int64_t n, int64_t k, int cuda, int streaming)
{
    double per_elem = 2.0 + 0.5 + 1.0 / 16; /* BF16 + codes + block scales */
    double results = 2 + cuda + 2 * streaming;
    return per_elem * (double)k * ((double)n + (double)m) + 6.0 * results * (double)m * (double)n;
}

/*------------------------------- stages -------------------------------*/

typedef struct check_opts {
    const char *backend, *ckpt, *layers, *json_path;
    /* oracle rows / cols: 0 = the default, ORACLE_ALL = every row / column */
    long long rows, oracle_rows, threads, seed, ref_cols, k_slices;
    int streaming;
} check_opts;

/* Everything a run holds; check_free releases it. */
typedef struct check_state {
    check_opts o;
    ctx cx;
    int default_rows;
    linear_spec *lins;
    int nlin;
    nvfp4_st_file *cf;          /* the checkpoint, when --checkpoint */
    nvfp4_atomic_file *report;  /* the JSON report, opened before the run */
    char dev[256], cc[32], kernel[256];
    result *res;
    double t_total;
} check_state;

static const char *const C = "check";

/* Parse: 0 to run, 1 after an error, 2 after --help. */
static int check_parse(int argc, char **argv, check_opts *o)
{
    *o = (check_opts){.backend = "auto", .json_path = "nvfp4-check.json", .seed = 2026, .k_slices = 1};
    const char *backend = o->backend;
    long long threads = 0;
    int force = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int shared = cli_shared_option(C, argc, argv, &i, &threads, &backend, NULL);
        if (shared < 0) return 1;
        if (shared) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return 2;
        } else if (!strcmp(a, "--rows")) {
            if (++i >= argc || cli_parse_int(argv[i], &o->rows) || o->rows < 1 || o->rows > 1 << 20)
                return cli_error(C, "--rows needs a count >= 1");
        } else if (!strcmp(a, "--oracle-rows")) {
            if (++i < argc && !strcmp(argv[i], "all")) o->oracle_rows = ORACLE_ALL;
            else if (i >= argc || cli_parse_int(argv[i], &o->oracle_rows) || o->oracle_rows < 1 ||
                     o->oracle_rows > 1 << 20)
                return cli_error(C, "--oracle-rows needs a count from 1 to --rows, or all");
        } else if (!strcmp(a, "--oracle-cols")) {
            if (++i < argc && !strcmp(argv[i], "all")) o->ref_cols = ORACLE_ALL;
            else if (i >= argc || cli_parse_int(argv[i], &o->ref_cols) || o->ref_cols < 2 ||
                     o->ref_cols > ORACLE_ALL)
                return cli_error(C, "--oracle-cols needs a count >= 2, or all");
        } else if (!strcmp(a, "--checkpoint")) {
            if (++i >= argc) return cli_error(C, "--checkpoint needs a file");
            o->ckpt = argv[i];
        } else if (!strcmp(a, "--layers")) {
            if (++i >= argc) return cli_error(C, "--layers needs L1,L2,...");
            o->layers = argv[i];
        } else if (!strcmp(a, "--streaming-a")) {
            o->streaming = 1;
        } else if (!strcmp(a, "--k-slices")) {
            if (++i >= argc || cli_parse_int(argv[i], &o->k_slices) || o->k_slices < 1 ||
                o->k_slices > NVFP4_MAX_K_SLICES)
                return cli_error(C, "--k-slices needs a count in 1..%d", NVFP4_MAX_K_SLICES);
        } else if (!strcmp(a, "--seed")) {
            if (++i >= argc || cli_parse_int(argv[i], &o->seed)) return cli_error(C, "--seed needs an integer");
        } else if (!strcmp(a, "--json")) {
            if (++i >= argc) return cli_error(C, "--json needs a file (or '-')");
            o->json_path = argv[i];
        } else if (!strcmp(a, "--force")) {
            force = 1;
        } else {
            return cli_error(C, "unknown argument '%s' (try --help)", a);
        }
    }
    if (!!o->ckpt != !!o->layers) return cli_error(C, "--checkpoint and --layers go together");
    const char *report = strcmp(o->json_path, "-") ? o->json_path : NULL;
    if (cli_check_paths(C, &o->ckpt, 1, &report, 1, force)) return 1;
    o->backend = backend;
    o->threads = threads;
    return 0;
}

/* Prepare: backend, rows, the linears, the memory estimate, the report file,
 * the header line.  0, or 1 after an error. */
static int check_prepare(check_state *s)
{
    check_opts *o = &s->o;
    long long rows = o->rows, oracle_rows = o->oracle_rows, ref_cols = o->ref_cols;
    const long long threads = o->threads;
    const char *backend = o->backend, *ckpt = o->ckpt, *layers = o->layers, *json_path = o->json_path;
    const int streaming = o->streaming;
    ctx cx = {.threads = (int)threads, .model = NVFP4_MODEL_SM90, .streaming = streaming,
              .k_slices = (int)o->k_slices};
    s->cx = cx;
    if (!strcmp(backend, "cuda")) {
        if (!nvfp4_cuda_available())
            return cli_error(C, "--backend cuda: no usable sm_90 GPU in this build/machine "
                                "(use --backend cpu)");
        cx.cuda = 1;
    } else if (!strcmp(backend, "auto")) {
        cx.cuda = nvfp4_cuda_available();
    }
    s->cx = cx;
    s->default_rows = !rows;
    if (!rows) rows = cx.cuda ? 128 : 16;
    if (oracle_rows > rows && oracle_rows != ORACLE_ALL)
        return cli_error(C, "--oracle-rows %lld is more than the %lld rows checked (--rows); "
                            "--oracle-rows all compares every row", oracle_rows, rows);
    if (!ref_cols) ref_cols = oracle_rows == ORACLE_ALL ? ORACLE_ALL : 1024;
    if (oracle_rows == ORACLE_ALL) oracle_rows = rows;
    if (!oracle_rows) oracle_rows = cx.cuda ? 4 : 2;
    if (oracle_rows > rows) oracle_rows = rows;
    o->rows = rows, o->oracle_rows = oracle_rows, o->ref_cols = ref_cols;

    /* The linears. */
    int nlin = 0;
    linear_spec *lins = NULL;
    nvfp4_st_file *cf = NULL;
    if (ckpt) {
        nvfp4_status st = nvfp4_st_open(&cf, ckpt);
        if (st != NVFP4_OK) return cli_lib_error(C, st, "cannot read checkpoint");
        s->cf = cf;
        int cap = 1;
        for (const char *p = layers; *p; p++) cap += *p == ',';
        s->lins = lins = calloc((size_t)cap, sizeof *lins);
        if (!lins) return cli_error(C, "out of memory");
        const char *p = layers;
        while (*p) {
            size_t L = strcspn(p, ",");
            if (L == 0 || L >= sizeof lins[0].name)
                return cli_error(C, "--layers: empty or too long layer name");
            memcpy(lins[nlin].name, p, L);
            lins[nlin].name[L] = '\0';
            const nvfp4_st_tensor *wt = checkpoint_weight(cf, lins[nlin].name);
            if (wt) { /* NAME.weight is U8 [N, K/2]: for the memory estimate */
                lins[nlin].n = wt->shape[0];
                lins[nlin].k = 2 * wt->shape[1];
            }
            nlin++;
            p += L + (p[L] == ',');
        }
        if (nlin == 0) return cli_error(C, "--layers names no layer");
    } else {
        s->lins = lins = malloc(sizeof seed_linears);
        if (!lins) return cli_error(C, "out of memory");
        memcpy(lins, seed_linears, sizeof seed_linears);
        nlin = 4;
    }
    s->nlin = nlin;
    /* Refuse a run this machine cannot hold rather than start it. */
    double need = 0;
    const char *need_for = "";
    for (int i = 0; i < nlin; i++) {
        double b = memory_estimate(rows, lins[i].n, lins[i].k, cx.cuda, streaming);
        if (b > need) need = b, need_for = lins[i].name;
    }
    double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (have > 0 && need > have)
        return cli_error(C, "--rows %lld needs about %.1f GiB of memory (%s), more than this "
                            "machine's %.1f GiB; use fewer rows", rows, need / 1073741824.0,
                         need_for, have / 1073741824.0);
    /* Open the report now, so an unwritable path fails before the run. */
    if (strcmp(json_path, "-")) {
        nvfp4_status st = nvfp4_atomic_open(&s->report, json_path);
        if (st != NVFP4_OK) return cli_lib_error(C, st, "--json: cannot write the report");
    }

    char *dev = s->dev, *cc = s->cc, *kernel = s->kernel;
    snprintf(cc, sizeof s->cc, "none");
    if (cx.cuda) {
        if (nvfp4_cuda_device_name(dev, sizeof s->dev, cc, sizeof s->cc) != NVFP4_OK)
            snprintf(dev, sizeof s->dev, "CUDA device");
    } else {
        cpu_name(dev, sizeof s->dev);
    }
    if (cx.cuda)
        snprintf(kernel, sizeof s->kernel,
                 "nvfp4 sm90a GEMM: M <= 32 the register mma.sync kernel (8-row weight chains "
                 "dequantized in registers), else the persistent warp-specialized wgmma kernel; "
                 "exact FP16 dequantization, one k16 step per NVFP4 block");
    else
        snprintf(kernel, sizeof s->kernel, "nvfp4 CPU backend (%s, %d threads)", nvfp4_cpu_simd_name(),
                 threads ? (int)threads : nvfp4_default_threads());
    printf("nvfp4 check: %s (%s%s), backend %s, oracle model %s, M = %lld row%s%s%s\n", dev,
           cx.cuda ? "compute capability " : "no CUDA device", cx.cuda ? cc : "", cx.cuda ? "cuda" : "cpu", nvfp4_model_name(cx.model), rows,
           rows == 1 ? "" : "s",
           s->default_rows && !cx.cuda ? " (CPU default; the GPU default is 128: --rows 128)" : "",
           streaming ? ", streaming A (BF16 activations quantized by the backend)" : "");

    return 0;
}

/* Run: one linear's data, backend call and comparisons into *r. */
static void check_one(const check_state *s, int i, result *r)
{
    const ctx cx = s->cx;
    const long long rows = s->o.rows, oracle_rows = s->o.oracle_rows, ref_cols = s->o.ref_cols;
    const long long threads = s->o.threads, seed = s->o.seed;
    const int streaming = s->o.streaming, nlin = s->nlin;
    const linear_spec *lins = s->lins;
    nvfp4_st_file *cf = s->cf;
    r->lin = lins[i];
    r->quantized_equal = 1;
    nvfp4_tensor W = {0}, A = {0};
    float *bias = NULL, in_scale = 0;
    int has_in = 0;
    uint16_t *xw = NULL, *xa = NULL;
    nvfp4_status st = NVFP4_OK;
    uint64_t lseed = (uint64_t)seed * 1000003ULL + (uint64_t)i * 7919ULL;
    if (cf) {
        nvfp4_layer L = {0};
        if (cli_load_layer(C, cf, lins[i].name, &L)) {
            r->error = 1;
            snprintf(r->error_msg, sizeof r->error_msg, "cannot load layer");
            return;
        }
        W = L.weight; /* W and bias own the layer's arrays from here */
        bias = L.bias;
        in_scale = L.input_scale;
        has_in = L.has_input_scale;
        r->lin.n = W.rows;
        r->lin.k = W.cols;
    } else {
        cli_progress("[%d/%d] %s: synthesizing and quantizing the %lld x %lld weight ...", i + 1,
                     nlin, r->lin.name, (long long)r->lin.n, (long long)r->lin.k);
        xw = malloc((size_t)(r->lin.n * r->lin.k) * 2);
        if (!xw) st = NVFP4_ERR_OUT_OF_MEMORY;
        else {
            synth_bf16(xw, r->lin.n, r->lin.k, lseed, SYNTH_WEIGHTS);
            st = nvfp4_quantize(&W, xw, NVFP4_DTYPE_BF16, r->lin.n, r->lin.k, NULL,
                                NVFP4_VARIANT_EAGER, (int)threads);
        }
        free(xw);
    }
    r->m = rows;
    xa = malloc((size_t)(rows * r->lin.k) * 2);
    if (st == NVFP4_OK && !xa) st = NVFP4_ERR_OUT_OF_MEMORY;
    if (st == NVFP4_OK) {
        synth_bf16(xa, rows, r->lin.k, lseed + 1, SYNTH_ACTIVATIONS);
        st = nvfp4_quantize(&A, xa, NVFP4_DTYPE_BF16, rows, r->lin.k, has_in ? &in_scale : NULL,
                            NVFP4_VARIANT_EAGER, (int)threads);
        A.rows = rows; /* the quantizer pads rows to 16; the GEMM takes the first M */
    }
    if (st != NVFP4_OK) {
        r->error = 1;
        snprintf(r->error_msg, sizeof r->error_msg, "preparing data: %s: %s",
                 nvfp4_status_str(st), nvfp4_last_error());
    } else if (streaming) {
        /* Backend: BF16 activations through the linear path; oracle: the
         * C quantizer, then the GEMM -- compared inside check_linear. */
        nvfp4_tensor XQ = {0};
        size_t mn = (size_t)(rows * W.rows);
        float *lraw = malloc(mn * 4);
        uint16_t *lout = malloc(mn * 2);
        nvfp4_linear_args la = {.x = xa, .x_dtype = NVFP4_DTYPE_BF16, .m = rows, .k = r->lin.k,
                                .weight = &W, .input_scale = has_in ? &in_scale : NULL,
                                .bias = bias, .raw = lraw, .out = lout, .model = cx.model,
                                .nthreads = (int)threads, .x_quantized = &XQ,
                                .k_slices = cx.k_slices};
        double t0 = cli_now();
        cli_progress("[%d/%d] %s: streaming A linear (%s) M=%lld ...", i + 1, nlin, r->lin.name,
                     cx.cuda ? "cuda" : "cpu", (long long)rows);
        if (!lraw || !lout) st = NVFP4_ERR_OUT_OF_MEMORY;
        else st = cx.cuda ? nvfp4_linear_cuda_host(&la) : nvfp4_linear_cpu(&la);
        double t_linear = 1e3 * (cli_now() - t0);
        if (st == NVFP4_OK) {
            /* the backend's quantized activations: the C quantizer's bytes */
            r->quantized_equal = quantized_same(&XQ, &A);
            check_linear(&cx, r, &A, &W, bias, (int)oracle_rows, ref_cols, (uint64_t)seed, i + 1, nlin);
            /* the streaming result must equal quantize-then-GEMM bit for bit */
            nvfp4_gemm_args g = {.a = &A, .b = &W, .bias = bias, .model = cx.model,
                                 .nthreads = (int)threads, .k_slices = cx.k_slices};
            float *qraw = malloc(mn * 4);
            uint16_t *qout = malloc(mn * 2);
            g.raw = qraw, g.out = qout;
            if (qraw && qout && nvfp4_gemm_cpu(&g) == NVFP4_OK) {
                diff_stats sr, so;
                diff_init(&sr);
                diff_init(&so);
                diff_add(&sr, lraw, qraw, 4, rows, W.rows, NULL, NULL);
                diff_add(&so, lout, qout, 2, rows, W.rows, NULL, NULL);
                diff_finish(&sr);
                diff_finish(&so);
                diff_merge(&r->raw, &sr);
                diff_merge(&r->out, &so);
                r->rows_full = rows; /* every row against the CPU quantize-then-GEMM */
            } else {
                r->error = 1;
                snprintf(r->error_msg, sizeof r->error_msg, "quantize-then-GEMM: %s",
                         qraw && qout ? nvfp4_last_error() : "out of memory");
            }
            free(qraw), free(qout);
            r->t_backend_ms = t_linear;
        } else {
            r->error = 1;
            snprintf(r->error_msg, sizeof r->error_msg, "linear: %s", nvfp4_last_error());
        }
        nvfp4_tensor_free(&XQ);
        free(lraw), free(lout);
    } else {
        check_linear(&cx, r, &A, &W, bias, (int)oracle_rows, ref_cols, (uint64_t)seed, i + 1, nlin);
    }
    if (!r->error && (r->raw.compared == 0 || r->out.compared == 0)) {
        r->error = 1; /* a check that compared nothing has not passed */
        snprintf(r->error_msg, sizeof r->error_msg, "no output was compared");
    }
    free(xa);
    free(bias);
    nvfp4_tensor_free(&W);
    nvfp4_tensor_free(&A);
}

/* Report (1/2): the table. */
static void check_print_table(const check_state *s)
{
    const ctx cx = s->cx;
    const int nlin = s->nlin;
    const result *res = s->res;
    /* Table. */
    printf("\n%-16s %-20s %-6s %-6s %-9s %-9s %-9s %-10s %-10s %s\n", "linear", "M x N x K", "raw",
           "alpha", "batch-inv", "repeat", "ulp(raw)", "fma-loop", "time", "compared");
    for (int i = 0; i < nlin; i++) {
        const result *r = &res[i];
        char mnk[64];
        snprintf(mnk, sizeof mnk, "%lldx%lldx%lld", (long long)r->m, (long long)r->lin.n,
                 (long long)r->lin.k);
        if (r->error) {
            printf("%-16s %-20s ERROR: %s\n", r->lin.name, mnk, r->error_msg);
            continue;
        }
        char ulp[32], fma[32], tb[32], cmp[64];
        snprintf(ulp, sizeof ulp, "%llu/%.2f", (unsigned long long)r->ulp_raw_max, r->ulp_raw_mean);
        snprintf(fma, sizeof fma, "%.2f%% off", 100.0 * r->fma_mismatch);
        snprintf(tb, sizeof tb, "%.1f us", 1e3 * r->t_backend_ms);
        if (r->rows_full == r->m)
            snprintf(cmp, sizeof cmp, "all %lldx%lld + %lldx%lld ref", (long long)r->m,
                     (long long)r->lin.n, (long long)r->rows_ref, (long long)r->cols_ref);
        else if (r->rows_ref == r->m && r->cols_ref == r->lin.n)
            snprintf(cmp, sizeof cmp, "all %lldx%lld ref", (long long)r->m, (long long)r->lin.n);
        else
            snprintf(cmp, sizeof cmp, "sampled %lldx%lld ref", (long long)r->rows_ref,
                     (long long)r->cols_ref);
        printf("%-16s %-20s %-6s %-6s %-9s %-9s %-9s %-10s %-10s %s\n", r->lin.name, mnk,
               r->raw.equal ? "EXACT" : "DIFF", r->out.equal ? "EXACT" : "DIFF",
               r->batch_invariant ? "yes" : "NO", r->repeatable ? "yes" : "NO", ulp, fma, tb, cmp);
        if (!r->quantized_equal)
            printf("  streaming A: the backend's quantized activations differ from the C "
                   "quantizer's\n");
        if (!r->raw.equal)
            printf("  raw: %lld of %lld differ, first at (row %lld, col %lld): got 0x%08x want 0x%08x\n",
                   (long long)r->raw.differ, (long long)r->raw.compared, (long long)r->raw.row,
                   (long long)r->raw.col, r->raw.got, r->raw.want);
        if (!r->out.equal)
            printf("  out: %lld of %lld differ, first at (row %lld, col %lld): got 0x%04x want 0x%04x\n",
                   (long long)r->out.differ, (long long)r->out.compared, (long long)r->out.row,
                   (long long)r->out.col, r->out.got, r->out.want);
    }
    printf("ulp(raw): max/mean distance of the %s result from the exact (correctly rounded) sum, "
           "on the reference rows.\nfma-loop: share of those outputs a plain FP32 FMA loop "
           "(the stock check) gets wrong.\n", nvfp4_model_name(cx.model));

}

/* Report (2/2): findings, status and the JSON document (returned). */
static json_t *check_build_report(const check_state *s, int all_ok, char *status_txt, size_t status_len)
{
    const ctx cx = s->cx;
    const int nlin = s->nlin, streaming = s->o.streaming;
    const long long rows = s->o.rows, seed = s->o.seed;
    const char *ckpt = s->o.ckpt, *dev = s->dev, *cc = s->cc, *kernel = s->kernel;
    const result *res = s->res;
    const double t_total = s->t_total;
    /* Findings and status. */
    json_t *root = json_object(), *results = json_array(), *findings = json_array();
    char names_ok[1024] = "", buf[2048];
    int n_raw_ok = 0, n_out_ok = 0, n_inv = 0;
    uint64_t ulp_max = 0;
    double fma_max = 0;
    for (int i = 0; i < nlin; i++) {
        const result *r = &res[i];
        json_t *o = json_object();
        json_object_set_new(o, "linear", json_string(r->lin.name));
        json_object_set_new(o, "mnk", json_pack("[I,I,I]", (json_int_t)r->m, (json_int_t)r->lin.n,
                                                (json_int_t)r->lin.k));
        if (r->error) {
            json_object_set_new(o, "error", json_string(r->error_msg));
            json_object_set_new(o, "raw_blockscaled_equal", json_false());
            json_object_set_new(o, "fused_alpha_equal", json_false());
            json_array_append_new(results, o);
            continue;
        }
        json_object_set_new(o, "raw_blockscaled_equal", json_boolean(r->raw.equal));
        jdiff_into(o, "raw", &r->raw);
        json_object_set_new(o, "fused_alpha_equal", json_boolean(r->out.equal));
        jdiff_into(o, "fused_alpha", &r->out);
        if (!r->raw.equal)
            json_object_set_new(o, "raw_first_difference",
                                json_pack("{s:I,s:I}", "row", (json_int_t)r->raw.row, "col",
                                          (json_int_t)r->raw.col));
        json_object_set_new(o, "oracle_model", json_string(nvfp4_model_name(cx.model)));
        json_object_set_new(o, "outputs_compared", json_integer((json_int_t)r->raw.compared));
        json_object_set_new(o, "rows_compared_with_cpu_oracle", json_integer((json_int_t)r->rows_full));
        json_object_set_new(o, "rows_compared_with_reference_model", json_integer((json_int_t)r->rows_ref));
        json_object_set_new(o, "columns_per_reference_row", json_integer((json_int_t)r->cols_ref));
        if (streaming)
            json_object_set_new(o, "streaming_quantized_equal", json_boolean(r->quantized_equal));
        json_object_set_new(o, "batch_invariant", json_boolean(r->batch_invariant));
        json_object_set_new(o, "repeatable", json_boolean(r->repeatable));
        json_object_set_new(o, "ulp_vs_exact",
                            json_pack("{s:I,s:f,s:I,s:f}", "raw_max", (json_int_t)r->ulp_raw_max,
                                      "raw_mean", r->ulp_raw_mean, "out_max_bf16",
                                      (json_int_t)r->ulp_out_max, "out_mean_bf16", r->ulp_out_mean));
        json_object_set_new(o, "fp32_fma_loop_mismatch_fraction", json_real(r->fma_mismatch));
        json_object_set_new(o, "timings_ms",
                            json_pack("{s:f,s:f,s:f}", "backend_call", r->t_backend_ms,
                                      "cpu_oracle", r->t_oracle_ms,
                                      "reference_rows", r->t_ref_ms));
        if (!r->raw.equal) {
            char g[16], w[16];
            snprintf(g, sizeof g, "0x%08x", r->raw.got);
            snprintf(w, sizeof w, "0x%08x", r->raw.want);
            json_object_set_new(json_object_get(o, "raw_first_difference"), "got", json_string(g));
            json_object_set_new(json_object_get(o, "raw_first_difference"), "want", json_string(w));
        }
        json_array_append_new(results, o);
        n_raw_ok += r->raw.equal;
        n_out_ok += r->out.equal;
        n_inv += r->batch_invariant && r->repeatable;
        if (r->raw.equal && r->out.equal) {
            size_t L = strlen(names_ok);
            snprintf(names_ok + L, sizeof names_ok - L, "%s%s", L ? ", " : "", r->lin.name);
        }
        if (r->ulp_raw_max > ulp_max) ulp_max = r->ulp_raw_max;
        if (r->fma_mismatch > fma_max) fma_max = r->fma_mismatch;
    }
    /* Which outputs were compared: all of them, or a sample. */
    double outputs_all = 0, outputs_seen = 0;
    for (int i = 0; i < nlin; i++) {
        const result *r = &res[i];
        double all = (double)r->m * (double)r->lin.n;
        outputs_all += all;
        outputs_seen += r->error ? 0 : every_output(r) ? all : (double)r->rows_ref * (double)r->cols_ref;
    }
    int sampled = outputs_seen < outputs_all;
    if (n_raw_ok == nlin && n_out_ok == nlin) {
        snprintf(buf, sizeof buf,
                 "The raw NVFP4 GEMM and the alpha-before-BF16 epilogue are bit-exact against the "
                 "%s oracle for every linear (%s) at %lld row%s, on %s.", nvfp4_model_name(cx.model),
                 names_ok, rows, rows == 1 ? "" : "s", sampled ? "the sampled outputs" : "every output");
        json_array_append_new(findings, json_string(buf));
    } else {
        for (int i = 0; i < nlin; i++) {
            const result *r = &res[i];
            if (r->error)
                snprintf(buf, sizeof buf, "%s: not checked: %s", r->lin.name, r->error_msg);
            else if (!r->raw.equal || !r->out.equal)
                snprintf(buf, sizeof buf,
                         "%s differs from the %s oracle: raw %lld / fused %lld of %lld outputs; first "
                         "raw difference at (row %lld, col %lld).", r->lin.name,
                         nvfp4_model_name(cx.model), (long long)r->raw.differ,
                         (long long)r->out.differ, (long long)r->raw.compared,
                         (long long)r->raw.row, (long long)r->raw.col);
            else
                continue;
            json_array_append_new(findings, json_string(buf));
        }
    }
    for (int i = 0; i < nlin; i++)
        if (!res[i].error && !res[i].quantized_equal) {
            snprintf(buf, sizeof buf,
                     "%s: streaming A: the NVFP4 activations the backend produced differ from the "
                     "C quantizer's bytes.", res[i].lin.name);
            json_array_append_new(findings, json_string(buf));
        }
    snprintf(buf, sizeof buf,
             "Batch invariance and repeatability: %d of %d linears give bit-identical rows whether "
             "a row is computed alone or inside M=%lld, and across two runs.", n_inv, nlin, rows);
    json_array_append_new(findings, json_string(buf));
    for (int i = 0; i < nlin; i++)
        if (res[i].lin.k >= 14336 && res[i].raw.equal && !res[i].error) {
            snprintf(buf, sizeof buf,
                     "%s (K=%lld) needs no special reduction policy: one k16 step per NVFP4 block "
                     "in increasing k, from a zero accumulator, is the whole contract.",
                     res[i].lin.name, (long long)res[i].lin.k);
            json_array_append_new(findings, json_string(buf));
        }
    snprintf(buf, sizeof buf,
             "On the sampled outputs the %s accumulator's truncation is at most %llu FP32 ULP from "
             "the correctly rounded sum, and a plain FP32 FMA loop disagrees with it on %.2f%% of "
             "them. NVFP4 products are short (at most 12 significant bits), so sums often stay exact "
             "in FP32; where they do not, truncation and FMA rounding part ways, which is why an "
             "FMA loop is not an oracle.", nvfp4_model_name(cx.model),
             (unsigned long long)ulp_max, 100.0 * fma_max);
    json_array_append_new(findings, json_string(buf));
    if (!all_ok)
        snprintf(status_txt, status_len,
                 "P0 remains active: see findings for the linears that are not bit-exact.");
    else if (!sampled)
        snprintf(status_txt, status_len,
                 "P0 passed: raw and alpha-epilogue outputs are bit-exact to the oracle on every "
                 "linear, every output compared, batch-invariant and repeatable.");
    else
        snprintf(status_txt, status_len,
                 "P0 passed on sampled outputs: the %.0f raw and alpha-epilogue outputs compared "
                 "(%.2f%% of %.0f) are bit-exact to the oracle on every linear, batch-invariant "
                 "and repeatable; --oracle-rows all compares every output.",
                 outputs_seen, 100.0 * outputs_seen / outputs_all, outputs_all);

    json_object_set_new(root, "device", json_string(dev));
    json_object_set_new(root, "compute_capability", json_string(cc));
    json_object_set_new(root, "rows", json_integer((json_int_t)rows));
    json_object_set_new(root, "kernel", json_string(kernel));
    json_object_set_new(root, "backend", json_string(cx.cuda ? "cuda" : "cpu"));
    json_object_set_new(root, "oracle_model", json_string(nvfp4_model_name(cx.model)));
    json_object_set_new(root, "k_slices", json_integer(cx.k_slices));
    json_object_set_new(root, "streaming_a", json_boolean(streaming));
    json_object_set_new(root, "data", json_string(ckpt ? ckpt : "synthetic (seeded), quantized by the ComfyUI quantizer (eager)"));
    json_object_set_new(root, "seed", json_integer((json_int_t)seed));
    json_object_set_new(root, "results", results);
    json_object_set_new(root, "findings", findings);
    json_object_set_new(root, "every_output_compared", json_boolean(!sampled));
    json_object_set_new(root, "status", json_string(status_txt));
    json_object_set_new(root, "total_seconds", json_real(t_total));
    return root;
}

static void check_free(check_state *s)
{
    nvfp4_atomic_discard(s->report); /* NULL once committed */
    nvfp4_st_close(s->cf);
    free(s->lins);
    free(s->res);
}

int cmd_check(int argc, char **argv)
{
    check_state st = {0};
    check_state *s = &st;
    int parsed = check_parse(argc, argv, &s->o);
    if (parsed) return parsed == 2 ? 0 : 1;
    if (check_prepare(s)) {
        check_free(s);
        return 1;
    }
    s->res = calloc((size_t)s->nlin, sizeof *s->res);
    if (!s->res) {
        check_free(s);
        return cli_error(C, "out of memory");
    }
    double t_all = cli_now();
    int all_ok = 1;
    for (int i = 0; i < s->nlin; i++) {
        result *r = &s->res[i];
        check_one(s, i, r);
        if (r->error || !r->raw.equal || !r->out.equal || !r->batch_invariant || !r->repeatable ||
            !r->quantized_equal)
            all_ok = 0;
    }
    cli_progress_done();
    s->t_total = cli_now() - t_all;

    check_print_table(s);
    char status_txt[512];
    json_t *root = check_build_report(s, all_ok, status_txt, sizeof status_txt);
    printf("\n%s\n", status_txt);
    int rc = all_ok ? 0 : 1;
    if (s->report) {
        char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
        nvfp4_status wst = text ? nvfp4_atomic_write(s->report, text, strlen(text)) : NVFP4_ERR_OUT_OF_MEMORY;
        if (wst == NVFP4_OK) wst = nvfp4_atomic_commit(s->report);
        else nvfp4_atomic_discard(s->report);
        s->report = NULL;
        if (wst != NVFP4_OK) {
            cli_lib_error(C, wst, "cannot write the report");
            rc = 1;
        } else {
            printf("report: %s (%.1f s)\n", s->o.json_path, s->t_total);
        }
        free(text);
    }
    json_decref(root);
    check_free(s);
    return rc;
}
