/* cmd_check.c -- `nvfp4 check`: is the NVFP4 GEMM bit-exact against the
 * accumulation model of its hardware?  A table, and a JSON report with the
 * keys GB10 check reports use (device, compute_capability, rows, kernel,
 * results, findings, status) and more.
 *
 * For each layer: make (or load) the weight and the activations, quantize them
 * with ComfyUI's quantizer, run the chosen backend, and compare every bit of
 * the FP32 accumulators (raw) and the BF16 outputs (out) with an oracle that
 * does not share the backend's code:
 *   - on a GPU, all M x N outputs against the CPU backend;
 *   - on every backend, sampled rows x columns against the plain reference
 *     model code (nvfp4_gemm_ref).
 * It also checks batch invariance (a sampled row computed alone vs inside the
 * batch) and repeatability (a second run), and measures on the sampled outputs
 * how often the correctly rounded sum and a plain FP32 FMA loop disagree with
 * the model: the built-in data is made so that they do (synth.c), so a
 * backend that computes either instead of the model fails.
 *
 * Exit status: 0 every compared bit matches, 1 some differ (or a row's bits
 * depend on the batch or the run), 2 the check could not be done (a bad
 * option, a layer that does not load, a backend error). */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "synth.h"

/* Exit statuses (above). */
enum { CHECK_PASSED = 0, CHECK_DIFFERS = 1, CHECK_ERROR = 2 };

static const char help[] =
    "usage: nvfp4 check [options]\n"
    "\n"
    "Is the NVFP4 GEMM bit-exact?  Runs the backend (the GPU kernel when an sm_90\n"
    "GPU is usable, else the CPU backend) and compares every bit of its FP32\n"
    "accumulators and of its BF16 outputs (after the per-tensor scales and bias)\n"
    "with the accumulation model of the hardware (docs/CONTRACT.md): on a GPU all\n"
    "outputs against the CPU backend, and on every backend sampled outputs against\n"
    "the plain reference model code.  It also checks that a row gives the same bits\n"
    "alone and inside the batch and across two runs, and shows how often the\n"
    "correctly rounded sum and a plain FP32 fused-multiply-add loop differ from\n"
    "the model on those outputs.\n"
    "\n"
    "Default data: the 4 linear layers of a transformer decoder block with hidden\n"
    "size 5376, attention width 7168 and MLP width 14336 -- attn_qkv_proj\n"
    "21504x5376, attn_out_proj 5376x7168, mlp_fc1 28672x5376 (up and gate),\n"
    "mlp_fc2 5376x14336 (N x K) -- with seeded synthetic weights and activations\n"
    "that have what real ones have (per-block scale spread, outlier channels, a\n"
    "first token with massive activations, sign cancellation), quantized by\n"
    "ComfyUI's quantizer.\n"
    "\n"
    "Prints a table and writes a JSON report (keys device, compute_capability,\n"
    "rows, kernel, results, findings, status, and more: README.md).  Progress goes\n"
    "to stderr, a line per stage when stderr is not a terminal.\n"
    "Exit status: 0 every compared bit matches (and something was compared),\n"
    "1 some differ, 2 the check could not be done (bad option, a layer that does\n"
    "not load, a backend error).\n"
    "\n"
    "options:\n"
    "  --rows N            activation rows M (default 128 on a GPU, 16 on the CPU so\n"
    "                      that a 2-core machine finishes in well under a minute)\n"
    "  --backend B         auto (default: cuda when an sm_90 GPU is usable and the\n"
    "                      model is sm90), cuda, cpu\n"
    "  --model M           the accumulation model checked against: sm90 (default: the\n"
    "                      H100 / H200 tensor core, measured), exact (the correctly\n"
    "                      rounded sum), sm120 (GB10 / RTX Blackwell, as published);\n"
    "                      the CUDA kernels implement sm90 only\n"
    "  --layers L1,L2,...  check only these layers: built-in ones, or with ...\n"
    "  --checkpoint PATH   ... layers of an NVFP4 checkpoint in any format (a\n"
    "                      .safetensors file, a directory of them, a .gguf file):\n"
    "                      LAYER.weight with its scales, optional input scale and\n"
    "                      LAYER.bias; the activations stay synthetic\n"
    "  --k-slices S        the contract with S K slices (docs/CONTRACT.md; default 1:\n"
    "                      one chain per output), in the backend and every oracle\n"
    "  --streaming-a       feed BF16 activations to the backend's linear path (on a GPU\n"
    "                      the GEMM's fused activation quantizer) and compare its\n"
    "                      outputs with quantize-then-GEMM and its NVFP4 activations\n"
    "                      with the C quantizer's, bit for bit (on the CPU both sides\n"
    "                      are the same code: the report says so)\n"
    "  --oracle-rows N|all rows compared with the plain reference model (default 2 on\n"
    "                      the CPU, 4 on a GPU; always the first and the last row;\n"
    "                      all: every row, and every column unless --oracle-cols\n"
    "                      says otherwise: slow) ...\n"
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
    synth_input input; /* what feeds the layer (synthetic activations) */
} linear_spec;

/* A decoder block with hidden size 5376, attention width 7168 (Q, K and V
 * each) and MLP width 14336 (up and gate fused in mlp_fc1). */
static const linear_spec builtin_linears[4] = {
    {"attn_qkv_proj", 21504, 5376, SYNTH_INPUT_HIDDEN},
    {"attn_out_proj", 5376, 7168, SYNTH_INPUT_HIDDEN},
    {"mlp_fc1", 28672, 5376, SYNTH_INPUT_HIDDEN},
    {"mlp_fc2", 5376, 14336, SYNTH_INPUT_GATED},
};
#define BUILTIN_BLOCK \
    "a transformer decoder block (hidden size 5376, attention width 7168, MLP width 14336)"

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
    diff_stats raw, out;   /* against oracles that do not share the backend's code */
    diff_stats sraw, sout; /* streaming A: the linear path against quantize-then-GEMM */
    int batch_invariant, repeatable;
    int quantized_equal; /* streaming A: the backend's NVFP4 activations == the C quantizer's */
    int64_t rows_full;   /* rows compared in full with the CPU backend (GPU backend) */
    int64_t rows_stream; /* streaming A: rows compared with quantize-then-GEMM */
    int64_t rows_ref, cols_ref;
    uint64_t ulp_raw_max, ulp_out_max;
    double ulp_raw_mean, ulp_out_mean;
    int64_t sampled;      /* outputs the reference model computed */
    int64_t exact_differ; /* ... on which the correctly rounded sum has other FP32 bits */
    int64_t fma_differ;   /* ... on which a plain FP32 FMA loop has other FP32 bits */
    double t_backend_ms, t_oracle_ms, t_ref_ms;
    int error;
    char error_msg[512];
} result;

typedef struct ctx {
    int cuda, threads, streaming;
    int k_slices; /* the contract's K slices (docs/CONTRACT.md), 1 = one chain */
    nvfp4_model model;
#ifdef NVFP4_TESTING
    const char *substitute; /* the GEMM that replaces the backend's, or NULL */
#endif
} ctx;

static const char *const C = "check";

/* Progress: a rewritten line on a terminal (cli_progress); otherwise, unless
 * NVFP4_NO_PROGRESS is set, one line per stage, so that a piped or logged
 * run shows where it is. */
static void stage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void stage(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (cli_is_tty()) cli_progress("%s", line);
    else if (!getenv("NVFP4_NO_PROGRESS")) fprintf(stderr, "nvfp4 check: %s\n", line);
}

static const char *model_words(nvfp4_model m)
{
    switch (m) {
    case NVFP4_MODEL_SM90: return "the H100 / H200 tensor core's accumulation, measured bit for bit";
    case NVFP4_MODEL_EXACT: return "the correctly rounded sum";
    case NVFP4_MODEL_SM120: return "GB10 / RTX Blackwell block-scaled accumulation as published, "
                                   "not yet run on such a GPU";
    }
    return "";
}

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

/* Row r of t as the GEMM's exact operand values a'(r, k) = e2m1 * |e4m3|
 * (docs/CONTRACT.md; per-tensor scale left out). */
static void operand_row(const nvfp4_tensor *t, int64_t r, float *dst)
{
    for (int64_t b = 0; b < t->cols / 16; b++) {
        float s = fabsf(nvfp4_e4m3_to_f32(nvfp4_tensor_scale(t, r, b)));
        for (int64_t i = b * 16; i < b * 16 + 16; i++)
            dst[i] = nvfp4_e2m1_to_f32(nvfp4_tensor_code(t, r, i)) * s;
    }
}

/* x[k] * y[k] summed with fmaf in increasing k: a plain FP32 loop, one
 * rounding per product (the products themselves are exact). */
static float fma_dot(const float *x, const float *y, int64_t k)
{
    float acc = 0;
    for (int64_t i = 0; i < k; i++) acc = fmaf(x[i], y[i], acc);
    return acc;
}

#ifdef NVFP4_TESTING
/* Test builds only (tests/cli): NVFP4_CHECK_SUBSTITUTE names a GEMM that
 * replaces the backend's -- "fma-loop" (fma_dot, then the contract's
 * epilogue) or a model name (the CPU backend under that model) -- so that
 * the tests can show `check` failing a backend that computes the wrong sum. */
static nvfp4_status substitute_gemm(const ctx *cx, const nvfp4_gemm_args *g)
{
    nvfp4_model m;
    if (nvfp4_model_from_name(&m, cx->substitute) == NVFP4_OK) {
        nvfp4_gemm_args s = *g;
        s.model = m;
        return nvfp4_gemm_cpu(&s);
    }
    const nvfp4_tensor *a = g->a, *b = g->b;
    int64_t mr = a->rows, n = b->rows, k = a->cols;
    float *x = malloc((size_t)(mr * k) * sizeof *x), *y = malloc((size_t)k * sizeof *y);
    if (!x || !y) {
        free(x), free(y);
        return NVFP4_ERR_OUT_OF_MEMORY;
    }
    float alpha = nvfp4_gemm_alpha(a->per_tensor_scale, b->per_tensor_scale);
    for (int64_t r = 0; r < mr; r++) operand_row(a, r, x + r * k);
    for (int64_t c = 0; c < n; c++) {
        operand_row(b, c, y);
        for (int64_t r = 0; r < mr; r++) {
            float acc = fma_dot(x + r * k, y, k);
            if (g->raw) g->raw[r * n + c] = acc;
            if (g->out) g->out[r * n + c] = nvfp4_epilogue(acc, alpha, g->bias ? &g->bias[c] : NULL);
        }
    }
    free(x), free(y);
    return NVFP4_OK;
}
#endif

static nvfp4_status run_backend(const ctx *cx, nvfp4_gemm_args *g)
{
    g->model = cx->model;
    g->nthreads = cx->threads;
    g->k_slices = cx->k_slices;
#ifdef NVFP4_TESTING
    if (cx->substitute) return substitute_gemm(cx, g);
#endif
    return cx->cuda ? nvfp4_gemm_cuda_host(g) : nvfp4_gemm_cpu(g);
}

/* The backend's linear path: BF16 activations in, quantized inside. */
static nvfp4_status run_linear(const ctx *cx, nvfp4_linear_args *la)
{
    nvfp4_status st = cx->cuda ? nvfp4_linear_cuda_host(la) : nvfp4_linear_cpu(la);
#ifdef NVFP4_TESTING
    if (st == NVFP4_OK && cx->substitute) { /* the same activations, the substitute's sums */
        nvfp4_tensor view = *la->x_quantized;
        view.rows = la->m;
        nvfp4_gemm_args g = {.a = &view, .b = la->weight, .bias = la->bias, .raw = la->raw,
                             .out = la->out, .model = la->model, .nthreads = la->nthreads,
                             .k_slices = la->k_slices};
        st = substitute_gemm(cx, &g);
    }
#endif
    return st;
}

static void fail_result(result *res, const char *what)
{
    res->error = 1;
    snprintf(res->error_msg, sizeof res->error_msg, "%s: %s", what, nvfp4_last_error());
}

static void fail_oom(result *res)
{
    res->error = 1;
    snprintf(res->error_msg, sizeof res->error_msg, "out of memory");
}

/* Everything for one layer.  A: the quantized activations, B: the weight. */
static void check_linear(const ctx *cx, result *res, const nvfp4_tensor *A, const nvfp4_tensor *B,
                         const float *bias, int oracle_rows, int64_t ref_cols, uint64_t seed,
                         int idx, int total)
{
    int64_t m = A->rows, n = B->rows, k = A->cols;
    size_t mn = (size_t)(m * n);
    float *raw = malloc(mn * 4), *raw2 = malloc(mn * 4), *oraw = NULL;
    uint16_t *out = malloc(mn * 2), *out2 = malloc(mn * 2), *oout = NULL;
    diff_init(&res->raw);
    diff_init(&res->out);
    res->batch_invariant = res->repeatable = 1;
    if (!raw || !raw2 || !out || !out2) {
        fail_oom(res);
        goto done;
    }
    nvfp4_gemm_args g = {.a = A, .b = B, .bias = bias, .raw = raw, .out = out};
    stage("[%d/%d] %s: %s backend, %lld x %lld x %lld ...", idx, total, res->lin.name,
          cx->cuda ? "GPU" : "CPU", (long long)m, (long long)n, (long long)k);
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
        fail_result(res, "backend (second run)");
        goto done;
    }
    res->repeatable = !memcmp(raw, raw2, mn * 4) && !memcmp(out, out2, mn * 2);

    if (cx->cuda) { /* every output against the CPU backend */
        oraw = malloc(mn * 4);
        oout = malloc(mn * 2);
        if (!oraw || !oout) {
            fail_oom(res);
            goto done;
        }
        stage("[%d/%d] %s: CPU backend on all %lld rows ...", idx, total, res->lin.name,
              (long long)m);
        nvfp4_gemm_args o = {.a = A, .b = B, .bias = bias, .raw = oraw, .out = oout,
                             .model = cx->model, .nthreads = cx->threads,
                             .k_slices = cx->k_slices};
        t0 = cli_now();
        if (nvfp4_gemm_cpu(&o) != NVFP4_OK) {
            fail_result(res, "CPU backend");
            goto done;
        }
        res->t_oracle_ms = 1e3 * (cli_now() - t0);
        diff_add(&res->raw, raw, oraw, 4, m, n, NULL, NULL);
        diff_add(&res->out, out, oout, 2, m, n, NULL, NULL);
        res->rows_full = m;
    }

    /* Sampled rows x sampled columns: the plain reference model, the exact
     * sum and the FMA loop (the plain model code is slow: a full row of
     * mlp_fc1 is 9.6 million steps).  Sampled rows, all columns: batch
     * invariance. */
    if (oracle_rows > m) oracle_rows = (int)m;
    int64_t ns = n < ref_cols ? n : ref_cols;
    int64_t *cols = malloc((size_t)ns * sizeof *cols);
    float *rr = malloc((size_t)ns * 4), *xr = malloc((size_t)ns * 4), *br = malloc((size_t)n * 4);
    uint16_t *ro = malloc((size_t)ns * 2), *xo = malloc((size_t)ns * 2), *bo = malloc((size_t)n * 2);
    float *bias_sub = bias ? malloc((size_t)ns * 4) : NULL;
    float *got_r = malloc((size_t)ns * 4), *xa = malloc((size_t)k * 4), *yb = malloc((size_t)k * 4);
    uint16_t *got_o = malloc((size_t)ns * 2);
    nvfp4_tensor bsub = {0};
    uint64_t s = seed * 31 + (uint64_t)idx;
    double ulp_raw_sum = 0, ulp_out_sum = 0;
    if (!cols || !rr || !xr || !br || !ro || !xo || !bo || !got_r || !got_o || !xa || !yb ||
        (bias && !bias_sub)) {
        fail_oom(res);
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
    if (oracle_rows > 0)
        stage("[%d/%d] %s: reference model, exact sum and FMA loop on %d row%s x %lld columns ...",
              idx, total, res->lin.name, oracle_rows, oracle_rows == 1 ? "" : "s", (long long)ns);
    for (int i = 0; i < oracle_rows; i++) {
        int64_t r = oracle_rows == m ? i : i == 0 ? 0 : i == 1 ? m - 1
                  : (int64_t)((s = s * 6364136223846793005ULL + 1442695040888963407ULL) >> 33) % m;
        nvfp4_tensor a1 = {0};
        if (gather_rows(&a1, A, &r, 1) != NVFP4_OK) {
            fail_result(res, "row copy");
            break;
        }
        if (cli_is_tty())
            cli_progress("[%d/%d] %s: reference model, row %lld (%d/%d) x %lld columns ...", idx,
                         total, res->lin.name, (long long)r, i + 1, oracle_rows, (long long)ns);
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
        /* The correctly rounded sum: how far the model's result is from it. */
        nvfp4_gemm_args e = {.a = &a1, .b = &bsub, .bias = bias_sub, .raw = xr, .out = xo,
                             .model = NVFP4_MODEL_EXACT, .nthreads = cx->threads};
        if (st == NVFP4_OK) st = nvfp4_gemm_cpu(&e);
        if (st == NVFP4_OK) {
            operand_row(&a1, 0, xa);
            for (int64_t j = 0; j < ns; j++) {
                uint64_t d = cli_ulp_distance(rr[j], xr[j]);
                uint64_t o16 = cli_ulp_distance(nvfp4_bf16_to_f32(ro[j]), nvfp4_bf16_to_f32(xo[j]));
                if (o16 != UINT64_MAX) o16 >>= 16;
                if (d > res->ulp_raw_max) res->ulp_raw_max = d;
                if (o16 > res->ulp_out_max) res->ulp_out_max = o16;
                ulp_raw_sum += (double)d;
                ulp_out_sum += (double)o16;
                res->exact_differ += nvfp4_f32_bits(xr[j]) != nvfp4_f32_bits(rr[j]);
                /* A plain FP32 FMA loop over the same operands (one chain, as
                 * a loop is written: no K slices). */
                operand_row(&bsub, j, yb);
                res->fma_differ += nvfp4_f32_bits(fma_dot(xa, yb, k)) != nvfp4_f32_bits(rr[j]);
                res->sampled++;
            }
        }
        nvfp4_tensor_free(&a1);
        if (st != NVFP4_OK) {
            fail_result(res, "sampled rows");
            break;
        }
    }
    if (res->sampled) {
        res->ulp_raw_mean = ulp_raw_sum / (double)res->sampled;
        res->ulp_out_mean = ulp_out_sum / (double)res->sampled;
    }
    res->cols_ref = ns;
    nvfp4_tensor_free(&bsub);
    free(cols), free(rr), free(xr), free(br), free(ro), free(xo), free(bo);
    free(bias_sub), free(got_r), free(got_o), free(xa), free(yb);
done:
    diff_finish(&res->raw);
    diff_finish(&res->out);
    free(raw), free(raw2), free(out), free(out2), free(oraw), free(oout);
}

/* Every output of the layer compared with an oracle that does not share the
 * backend's code: the CPU backend (GPU runs), or the reference model on all
 * rows and columns. */
static int every_output(const result *r)
{
    return r->rows_full == r->m || (r->rows_ref == r->m && r->cols_ref == r->lin.n);
}

/* Outputs of the layer compared with such an oracle. */
static int64_t outputs_checked(const result *r)
{
    return every_output(r) ? r->m * r->lin.n : r->rows_ref * r->cols_ref;
}

static int layer_differs(const result *r)
{
    return !r->raw.equal || !r->out.equal || !r->sraw.equal || !r->sout.equal ||
           !r->batch_invariant || !r->repeatable || !r->quantized_equal;
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

/* Bytes of host memory one layer's check holds at its peak: the BF16
 * weight and activations with their NVFP4 copies, and the M x N results
 * (raw FP32 + out BF16) of the run, its repeat, the CPU backend on a GPU
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
    nvfp4_model model;
} check_opts;

/* Everything a run holds; check_free releases it. */
typedef struct check_state {
    check_opts o;
    ctx cx;
    int default_rows;
    linear_spec *lins;
    int nlin;
    nvfp4_ckpt *cf;             /* the checkpoint (any format), when --checkpoint */
    nvfp4_atomic_file *report;  /* the JSON report, opened before the run */
    char dev[256], cc[32], kernel[256];
    result *res;
    double t_total;
} check_state;

/* Parse: 0 to run, 1 after an error, 2 after --help. */
static int check_parse(int argc, char **argv, check_opts *o)
{
    *o = (check_opts){.backend = "auto", .json_path = "nvfp4-check.json", .seed = 2026,
                      .k_slices = 1, .model = NVFP4_MODEL_SM90};
    const char *backend = o->backend;
    long long threads = 0;
    int force = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int shared = cli_shared_option(C, argc, argv, &i, &threads, &backend, &o->model);
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
    if (o->ckpt && !o->layers)
        return cli_error(C, "--checkpoint needs --layers (the layers to check)");
    const char *report = strcmp(o->json_path, "-") ? o->json_path : NULL;
    if (cli_check_paths(C, &o->ckpt, 1, &report, 1, force)) return 1;
    o->backend = backend;
    o->threads = threads;
    return 0;
}

/* The layers named by --layers (or the 4 built-in ones) into s->lins:
 * checkpoint layers must exist as NVFP4 weights, built-in names must be
 * known.  0, or 1 after an error. */
static int check_layers(check_state *s)
{
    const char *layers = s->o.layers;
    if (!layers) {
        s->lins = malloc(sizeof builtin_linears);
        if (!s->lins) return cli_error(C, "out of memory");
        memcpy(s->lins, builtin_linears, sizeof builtin_linears);
        s->nlin = 4;
        return 0;
    }
    int cap = 1;
    for (const char *p = layers; *p; p++) cap += *p == ',';
    s->lins = calloc((size_t)cap, sizeof *s->lins);
    if (!s->lins) return cli_error(C, "out of memory");
    const char *p = layers;
    while (*p) {
        linear_spec *l = &s->lins[s->nlin];
        size_t L = strcspn(p, ",");
        char shown[300];
        if (L == 0 || L >= sizeof l->name)
            return cli_error(C, "--layers: empty or too long layer name");
        memcpy(l->name, p, L);
        l->name[L] = '\0';
        cli_printable(shown, sizeof shown, l->name);
        if (s->cf) {
            char wname[300];
            snprintf(wname, sizeof wname, "%.255s.weight", l->name);
            if (nvfp4_ckpt_dims(s->cf, wname, &l->n, &l->k) != NVFP4_OK) { /* for the memory estimate */
                if (cli_not_quantized(C, s->cf, s->o.ckpt, wname)) return 1;
                return cli_error(C, "--layers: %s has no NVFP4 layer '%s' (no NVFP4 weight "
                                    "'%s.weight'; `nvfp4 inspect` lists its layers, `nvfp4 "
                                    "quantize` makes them)", s->o.ckpt, shown, shown);
            }
            l->input = SYNTH_INPUT_HIDDEN;
        } else {
            int found = 0;
            for (int b = 0; b < 4 && !found; b++)
                if (!strcmp(builtin_linears[b].name, l->name)) *l = builtin_linears[b], found = 1;
            if (!found)
                return cli_error(C, "--layers: no built-in layer '%s' (attn_qkv_proj, "
                                    "attn_out_proj, mlp_fc1, mlp_fc2; --checkpoint FILE for a "
                                    "checkpoint's layers)", shown);
        }
        s->nlin++;
        p += L + (p[L] == ',');
    }
    if (s->nlin == 0) return cli_error(C, "--layers names no layer");
    return 0;
}

/* Prepare: backend, rows, the layers, the memory estimate, the report file,
 * the header lines.  0, or 1 after an error. */
static int check_prepare(check_state *s)
{
    check_opts *o = &s->o;
    long long rows = o->rows, oracle_rows = o->oracle_rows, ref_cols = o->ref_cols;
    const long long threads = o->threads;
    const char *backend = o->backend, *json_path = o->json_path;
    const int streaming = o->streaming;
    ctx cx = {.threads = (int)threads, .model = o->model, .streaming = streaming,
              .k_slices = (int)o->k_slices};
    const char *why_cpu = "";
    if (!strcmp(backend, "cuda")) {
        if (cx.model != NVFP4_MODEL_SM90)
            return cli_error(C, "--backend cuda: the CUDA kernels implement the sm90 model only; "
                                "--model %s runs on --backend cpu", nvfp4_model_name(cx.model));
        if (!nvfp4_cuda_available())
            return cli_error(C, "--backend cuda: no usable sm_90 GPU in this build/machine "
                                "(use --backend cpu)");
        cx.cuda = 1;
    } else if (!strcmp(backend, "auto")) {
        int gpu = nvfp4_cuda_available();
        cx.cuda = gpu && cx.model == NVFP4_MODEL_SM90;
        if (gpu && !cx.cuda) why_cpu = " (the CUDA kernels implement the sm90 model only)";
    }
#ifdef NVFP4_TESTING
    cx.substitute = getenv("NVFP4_CHECK_SUBSTITUTE");
    if (cx.substitute && !*cx.substitute) cx.substitute = NULL;
    nvfp4_model sm;
    if (cx.substitute && strcmp(cx.substitute, "fma-loop") &&
        nvfp4_model_from_name(&sm, cx.substitute) != NVFP4_OK)
        return cli_error(C, "NVFP4_CHECK_SUBSTITUTE: fma-loop, sm90, exact or sm120");
#endif
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

    if (o->ckpt) {
        nvfp4_status st = nvfp4_ckpt_open(&s->cf, o->ckpt, NVFP4_FORMAT_UNKNOWN);
        if (st != NVFP4_OK) return cli_lib_error(C, st, "cannot read checkpoint");
    }
    if (check_layers(s)) return 1;
    /* Refuse a run this machine cannot hold rather than start it. */
    double need = 0;
    const char *need_for = "";
    for (int i = 0; i < s->nlin; i++) {
        double b = memory_estimate(rows, s->lins[i].n, s->lins[i].k, cx.cuda, streaming);
        if (b > need) need = b, need_for = s->lins[i].name;
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
#ifdef NVFP4_TESTING
    if (cx.substitute)
        snprintf(kernel, sizeof s->kernel, "test substitute: %s (NVFP4_CHECK_SUBSTITUTE)",
                 cx.substitute);
#endif
    printf("nvfp4 check: %s backend%s on %s (%s%s)\n", cx.cuda ? "GPU" : "CPU", why_cpu, dev,
           cx.cuda ? "compute capability " : "no CUDA device used", cx.cuda ? cc : "");
    printf("  kernel: %s\n", kernel);
    printf("  model:  %s -- %s\n", nvfp4_model_name(cx.model), model_words(cx.model));
    if (cx.k_slices > 1) printf("  K cut into %d slices whose partial sums are added in FP32\n", cx.k_slices);
    if (s->cf)
        printf("  data:   %d layer%s of %s, %lld synthetic activation row%s%s\n", s->nlin,
               s->nlin == 1 ? "" : "s", o->ckpt, rows, rows == 1 ? "" : "s",
               streaming ? " fed as BF16 to the backend's linear path" : "");
    else
        printf("  data:   %s%s%s, %lld activation row%s%s; synthetic (--seed %lld) with per-block "
               "scale spread, outlier channels, massive activations in row 0 and sign "
               "cancellation, quantized by ComfyUI's quantizer%s\n",
               !o->layers ? "the 4 linear layers" : s->nlin == 1 ? "layer " : "layers ",
               o->layers ? o->layers : "",
               " of " BUILTIN_BLOCK, rows, rows == 1 ? "" : "s",
               s->default_rows && !cx.cuda ? " (the CPU default; 128 on a GPU: --rows 128)" : "",
               o->seed, streaming ? "; fed as BF16 to the backend's linear path" : "");
    return 0;
}

/* Streaming A: BF16 activations xa through the backend's linear path; its
 * outputs against quantize-then-GEMM (the C quantizer's A, the CPU backend),
 * its NVFP4 activations against A's bytes. */
static void check_streaming(const check_state *s, int i, result *r, const uint16_t *xa,
                            const nvfp4_tensor *A, const nvfp4_tensor *W, const float *bias,
                            const float *in_scale)
{
    const ctx *cx = &s->cx;
    const int64_t rows = s->o.rows, n = W->rows;
    size_t mn = (size_t)(rows * n);
    nvfp4_tensor XQ = {0};
    float *lraw = malloc(mn * 4), *qraw = malloc(mn * 4);
    uint16_t *lout = malloc(mn * 2), *qout = malloc(mn * 2);
    if (!lraw || !lout || !qraw || !qout) {
        fail_oom(r);
        goto done;
    }
    nvfp4_linear_args la = {.x = xa, .x_dtype = NVFP4_DTYPE_BF16, .m = rows, .k = r->lin.k,
                            .weight = W, .input_scale = in_scale, .bias = bias, .raw = lraw,
                            .out = lout, .model = cx->model, .nthreads = cx->threads,
                            .x_quantized = &XQ, .k_slices = cx->k_slices};
    stage("[%d/%d] %s: %s linear path (BF16 activations in), %lld rows ...", i + 1, s->nlin,
          r->lin.name, cx->cuda ? "GPU" : "CPU", (long long)rows);
    double t0 = cli_now();
    if (run_linear(cx, &la) != NVFP4_OK) {
        fail_result(r, "linear");
        goto done;
    }
    double t_linear = 1e3 * (cli_now() - t0);
    /* the backend's quantized activations: the C quantizer's bytes */
    r->quantized_equal = quantized_same(&XQ, A);
    /* the GEMM on the C quantizer's activations against the oracles */
    check_linear(cx, r, A, W, bias, (int)s->o.oracle_rows, s->o.ref_cols, (uint64_t)s->o.seed,
                 i + 1, s->nlin);
    if (r->error) goto done;
    /* the linear path's outputs against quantize-then-GEMM, bit for bit */
    stage("[%d/%d] %s: quantize-then-GEMM on the CPU, %lld rows ...", i + 1, s->nlin, r->lin.name,
          (long long)rows);
    nvfp4_gemm_args g = {.a = A, .b = W, .bias = bias, .raw = qraw, .out = qout,
                         .model = cx->model, .nthreads = cx->threads, .k_slices = cx->k_slices};
    if (nvfp4_gemm_cpu(&g) != NVFP4_OK) {
        fail_result(r, "quantize-then-GEMM");
        goto done;
    }
    diff_add(&r->sraw, lraw, qraw, 4, rows, n, NULL, NULL);
    diff_add(&r->sout, lout, qout, 2, rows, n, NULL, NULL);
    diff_finish(&r->sraw);
    diff_finish(&r->sout);
    r->rows_stream = rows;
    r->t_backend_ms = t_linear;
done:
    nvfp4_tensor_free(&XQ);
    free(lraw), free(lout), free(qraw), free(qout);
}

/* Run: one layer's data, backend call and comparisons into *r. */
static void check_one(const check_state *s, int i, result *r)
{
    const ctx cx = s->cx;
    const long long rows = s->o.rows, threads = s->o.threads, seed = s->o.seed;
    const int nlin = s->nlin;
    nvfp4_ckpt *cf = s->cf;
    r->lin = s->lins[i];
    r->quantized_equal = 1;
    diff_init(&r->raw);
    diff_init(&r->out);
    diff_init(&r->sraw);
    diff_init(&r->sout);
    nvfp4_tensor W = {0}, A = {0};
    float *bias = NULL, in_scale = 0;
    int has_in = 0;
    uint16_t *xw = NULL, *xa = NULL;
    nvfp4_status st = NVFP4_OK;
    /* by name, so a layer's data does not depend on which others --layers names */
    uint64_t lseed = (uint64_t)seed * 1000003ULL;
    for (const char *p = r->lin.name; *p; p++) lseed = (lseed ^ (uint8_t)*p) * 0x100000001B3ULL;
    if (cf) {
        stage("[%d/%d] %s: loading the layer ...", i + 1, nlin, r->lin.name);
        nvfp4_layer L = {0};
        nvfp4_status ls = nvfp4_ckpt_load_layer(&L, cf, r->lin.name);
        if (ls != NVFP4_OK) {
            r->error = 1;
            snprintf(r->error_msg, sizeof r->error_msg, "cannot load the layer: %s: %s",
                     nvfp4_status_str(ls), nvfp4_last_error());
            return;
        }
        W = L.weight; /* W and bias own the layer's arrays from here */
        bias = L.bias;
        in_scale = L.input_scale;
        has_in = L.has_input_scale;
        r->lin.n = W.rows;
        r->lin.k = W.cols;
    } else {
        stage("[%d/%d] %s: synthesizing and quantizing the %lld x %lld weight ...", i + 1, nlin,
              r->lin.name, (long long)r->lin.n, (long long)r->lin.k);
        xw = malloc((size_t)(r->lin.n * r->lin.k) * 2);
        if (!xw || synth_layer_weight(xw, r->lin.n, r->lin.k, lseed)) st = NVFP4_ERR_OUT_OF_MEMORY;
        else st = nvfp4_quantize(&W, xw, NVFP4_DTYPE_BF16, r->lin.n, r->lin.k, NULL,
                                 NVFP4_VARIANT_EAGER, (int)threads);
        free(xw);
    }
    r->m = rows;
    xa = malloc((size_t)(rows * r->lin.k) * 2);
    if (st == NVFP4_OK && (!xa || synth_layer_input(xa, rows, r->lin.k, lseed + 1, r->lin.input)))
        st = NVFP4_ERR_OUT_OF_MEMORY;
    if (st == NVFP4_OK) {
        st = nvfp4_quantize(&A, xa, NVFP4_DTYPE_BF16, rows, r->lin.k, has_in ? &in_scale : NULL,
                            NVFP4_VARIANT_EAGER, (int)threads);
        A.rows = rows; /* the quantizer pads rows to 16; the GEMM takes the first M */
    }
    if (st != NVFP4_OK) {
        r->error = 1;
        snprintf(r->error_msg, sizeof r->error_msg, "preparing data: %s: %s",
                 nvfp4_status_str(st), nvfp4_last_error());
    } else if (s->o.streaming) {
        check_streaming(s, i, r, xa, &A, &W, bias, has_in ? &in_scale : NULL);
    } else {
        check_linear(&cx, r, &A, &W, bias, (int)s->o.oracle_rows, s->o.ref_cols, (uint64_t)seed,
                     i + 1, nlin);
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

static double share(int64_t part, int64_t whole) { return whole ? (double)part / (double)whole : 0; }

/* A time in us, ms or s. */
static void fmt_time(char *buf, size_t n, double ms)
{
    if (ms < 1) snprintf(buf, n, "%.1f us", 1e3 * ms);
    else if (ms < 1e4) snprintf(buf, n, "%.1f ms", ms);
    else snprintf(buf, n, "%.1f s", 1e-3 * ms);
}

/* Report (1/2): the table, with the first difference of each layer that differs. */
static void check_print_table(const check_state *s)
{
    const ctx cx = s->cx;
    const char *model = nvfp4_model_name(cx.model);
    int w = 15; /* the layer column: as wide as the longest name */
    for (int i = 0; i < s->nlin; i++) {
        int L = (int)strlen(s->res[i].lin.name);
        if (L > w) w = L < 64 ? L : 64;
    }
    printf("\n%-*s %-16s %-8s %-8s %-9s %-7s %-9s %-9s %-10s %s\n", w, "layer", "M x N x K",
           "FP32 acc", "BF16 out", "row alone", "2nd run", "exact sum", "FMA loop", "backend",
           "compared with an independent oracle");
    int64_t sampled = 0, exact_differ = 0, fma_differ = 0;
    uint64_t ulp_max = 0;
    int stream_self = 0;
    for (int i = 0; i < s->nlin; i++) {
        const result *r = &s->res[i];
        char mnk[64];
        snprintf(mnk, sizeof mnk, "%lldx%lldx%lld", (long long)r->m, (long long)r->lin.n,
                 (long long)r->lin.k);
        if (r->error) {
            printf("%-*s %-16s ERROR: %s\n", w, r->lin.name, r->m ? mnk : "-", r->error_msg);
            continue;
        }
        char ex[32], fma[32], tb[32], cmp[128];
        snprintf(ex, sizeof ex, "%.2f%%", 100.0 * share(r->exact_differ, r->sampled));
        snprintf(fma, sizeof fma, "%.2f%%", 100.0 * share(r->fma_differ, r->sampled));
        fmt_time(tb, sizeof tb, r->t_backend_ms);
        if (r->rows_full == r->m)
            snprintf(cmp, sizeof cmp, "all %lldx%lld (CPU backend); %lldx%lld (reference model)",
                     (long long)r->m, (long long)r->lin.n, (long long)r->rows_ref,
                     (long long)r->cols_ref);
        else if (every_output(r))
            snprintf(cmp, sizeof cmp, "all %lldx%lld (reference model)", (long long)r->m,
                     (long long)r->lin.n);
        else
            snprintf(cmp, sizeof cmp, "%lldx%lld of %lldx%lld (reference model)",
                     (long long)r->rows_ref, (long long)r->cols_ref, (long long)r->m,
                     (long long)r->lin.n);
        printf("%-*s %-16s %-8s %-8s %-9s %-7s %-9s %-9s %-10s %s\n", w, r->lin.name, mnk,
               r->raw.equal && r->sraw.equal ? "EXACT" : "DIFF",
               r->out.equal && r->sout.equal ? "EXACT" : "DIFF",
               r->batch_invariant ? "same" : "DIFFERS", r->repeatable ? "same" : "DIFFERS", ex,
               fma, tb, cmp);
        const struct { const diff_stats *d; const char *what; int bf16; } diffs[] = {
            {&r->raw, "FP32 accumulators vs the model", 0},
            {&r->out, "BF16 outputs vs the model", 1},
            {&r->sraw, "linear path vs quantize-then-GEMM, FP32 accumulators", 0},
            {&r->sout, "linear path vs quantize-then-GEMM, BF16 outputs", 1},
        };
        for (int d = 0; d < 4; d++)
            if (!diffs[d].d->equal)
                printf(diffs[d].bf16 ? "  %s: %lld of %lld differ, the first at (row %lld, col "
                                       "%lld): got 0x%04x, want 0x%04x\n"
                                     : "  %s: %lld of %lld differ, the first at (row %lld, col "
                                       "%lld): got 0x%08x, want 0x%08x\n",
                       diffs[d].what, (long long)diffs[d].d->differ,
                       (long long)diffs[d].d->compared, (long long)diffs[d].d->row,
                       (long long)diffs[d].d->col, diffs[d].d->got, diffs[d].d->want);
        if (!r->quantized_equal)
            printf("  the NVFP4 activations the linear path made differ from the C quantizer's\n");
        sampled += r->sampled;
        exact_differ += r->exact_differ;
        fma_differ += r->fma_differ;
        if (r->ulp_raw_max > ulp_max) ulp_max = r->ulp_raw_max;
        stream_self |= r->rows_stream > 0 && !cx.cuda;
    }
    printf("FP32 acc: the FP32 accumulators; BF16 out: the BF16 outputs after the per-tensor "
           "scales (and bias).\n"
           "row alone: a row computed alone gives the bits it gets inside the batch; 2nd run: "
           "a second run gives the same bits.\n"
           "exact sum, FMA loop: share of the outputs compared with the reference model on "
           "which the correctly\nrounded sum, or a plain FP32 fused-multiply-add loop, has "
           "other FP32 bits than the %s model.\n", model);
    if (sampled && cx.model != NVFP4_MODEL_EXACT)
        printf("Over all layers: the exact sum differs on %.2f%% (by at most %llu FP32 ULP), "
               "the FMA loop on %.2f%% of %lld outputs%s\n", 100.0 * share(exact_differ, sampled),
               (unsigned long long)ulp_max, 100.0 * share(fma_differ, sampled), (long long)sampled,
               exact_differ && fma_differ ? ":\na backend that computed either would fail this "
                                            "check." : ".");
    else if (sampled)
        printf("Over all layers: the FMA loop differs from the exact sum on %.2f%% of %lld "
               "outputs%s\n", 100.0 * share(fma_differ, sampled), (long long)sampled,
               fma_differ ? ": a backend that computed it would fail this check." : ".");
    if (sampled && !fma_differ)
        printf("On this data a plain FP32 FMA loop gives the model's bits on every compared "
               "output: this run\ncould not tell such a loop from the model (the built-in "
               "data can).\n");
    if (stream_self)
        printf("Linear path on the CPU: it is nvfp4_quantize then nvfp4_gemm_cpu, the very code "
               "quantize-then-GEMM\nruns, so comparing the two over every output shows the path "
               "is put together right, not that the\nGEMM is; the GEMM's independent check is "
               "the reference-model column above.\n");
}

/* Report (2/2): findings, status and the JSON document (returned); *rc the
 * exit status. */
static json_t *check_build_report(const check_state *s, int *rc, char *status_txt,
                                  size_t status_len)
{
    const ctx cx = s->cx;
    const int nlin = s->nlin, streaming = s->o.streaming;
    const long long rows = s->o.rows, seed = s->o.seed;
    const char *model = nvfp4_model_name(cx.model);
    const result *res = s->res;
    json_t *root = json_object(), *results = json_array(), *findings = json_array();
    char names_ok[1024] = "", buf[2048];
    int n_error = 0, n_differ = 0, n_inv = 0;
    int64_t sampled = 0, exact_differ = 0, fma_differ = 0;
    uint64_t ulp_max = 0;
    int64_t outputs_all = 0, outputs_seen = 0;
    for (int i = 0; i < nlin; i++) {
        const result *r = &res[i];
        json_t *o = json_object();
        json_object_set_new(o, "linear", json_string(r->lin.name));
        json_object_set_new(o, "mnk", json_pack("[I,I,I]", (json_int_t)r->m, (json_int_t)r->lin.n,
                                                (json_int_t)r->lin.k));
        outputs_all += r->m * r->lin.n;
        if (r->error) {
            n_error++;
            json_object_set_new(o, "error", json_string(r->error_msg));
            json_object_set_new(o, "raw_blockscaled_equal", json_false());
            json_object_set_new(o, "fused_alpha_equal", json_false());
            json_array_append_new(results, o);
            continue;
        }
        /* raw_* : the FP32 accumulators; fused_alpha_* : the BF16 outputs
         * after the per-tensor scales (and bias): the keys GB10 check reports use */
        json_object_set_new(o, "raw_blockscaled_equal", json_boolean(r->raw.equal && r->sraw.equal));
        jdiff_into(o, "raw", &r->raw);
        json_object_set_new(o, "fused_alpha_equal", json_boolean(r->out.equal && r->sout.equal));
        jdiff_into(o, "fused_alpha", &r->out);
        if (!r->raw.equal) {
            char g[16], w[16];
            snprintf(g, sizeof g, "0x%08x", r->raw.got);
            snprintf(w, sizeof w, "0x%08x", r->raw.want);
            json_object_set_new(o, "raw_first_difference",
                                json_pack("{s:I,s:I,s:s,s:s}", "row", (json_int_t)r->raw.row, "col",
                                          (json_int_t)r->raw.col, "got", g, "want", w));
        }
        json_object_set_new(o, "oracle_model", json_string(model));
        json_object_set_new(o, "outputs_compared", json_integer((json_int_t)outputs_checked(r)));
        json_object_set_new(o, "outputs_compared_with_reference_model",
                            json_integer((json_int_t)(r->rows_ref * r->cols_ref)));
        json_object_set_new(o, "rows_compared_with_cpu_oracle", json_integer((json_int_t)r->rows_full));
        json_object_set_new(o, "rows_compared_with_reference_model", json_integer((json_int_t)r->rows_ref));
        json_object_set_new(o, "columns_per_reference_row", json_integer((json_int_t)r->cols_ref));
        if (streaming) {
            json_object_set_new(o, "streaming_quantized_equal", json_boolean(r->quantized_equal));
            json_object_set_new(o, "streaming_outputs_equal",
                                json_boolean(r->sraw.equal && r->sout.equal));
            json_object_set_new(o, "streaming_rows_compared_with_quantize_then_gemm",
                                json_integer((json_int_t)r->rows_stream));
            /* on the CPU the linear path runs the same code as quantize-then-GEMM */
            json_object_set_new(o, "streaming_comparison_independent", json_boolean(cx.cuda));
        }
        json_object_set_new(o, "batch_invariant", json_boolean(r->batch_invariant));
        json_object_set_new(o, "repeatable", json_boolean(r->repeatable));
        json_object_set_new(o, "ulp_vs_exact",
                            json_pack("{s:I,s:f,s:I,s:f}", "raw_max", (json_int_t)r->ulp_raw_max,
                                      "raw_mean", r->ulp_raw_mean, "out_max_bf16",
                                      (json_int_t)r->ulp_out_max, "out_mean_bf16", r->ulp_out_mean));
        json_object_set_new(o, "outputs_compared_with_exact_sum_and_fma_loop",
                            json_integer((json_int_t)r->sampled));
        json_object_set_new(o, "exact_sum_mismatch_fraction", json_real(share(r->exact_differ, r->sampled)));
        json_object_set_new(o, "fp32_fma_loop_mismatch_fraction", json_real(share(r->fma_differ, r->sampled)));
        json_object_set_new(o, "timings_ms",
                            json_pack("{s:f,s:f,s:f}", "backend_call", r->t_backend_ms,
                                      "cpu_oracle", r->t_oracle_ms, "reference_rows", r->t_ref_ms));
        json_array_append_new(results, o);
        if (layer_differs(r)) {
            n_differ++;
        } else {
            size_t L = strlen(names_ok);
            snprintf(names_ok + L, sizeof names_ok - L, "%s%s", L ? ", " : "", r->lin.name);
        }
        n_inv += r->batch_invariant && r->repeatable;
        sampled += r->sampled;
        exact_differ += r->exact_differ;
        fma_differ += r->fma_differ;
        if (r->ulp_raw_max > ulp_max) ulp_max = r->ulp_raw_max;
        outputs_seen += outputs_checked(r);
    }
    int n_checked = nlin - n_error;
    int sampled_only = outputs_seen < outputs_all;

    /* Findings: what an outsider needs to read the result. */
    for (int i = 0; i < nlin; i++) {
        const result *r = &res[i];
        if (r->error)
            snprintf(buf, sizeof buf, "%s could not be checked: %s.", r->lin.name, r->error_msg);
        else if (!r->raw.equal || !r->out.equal)
            snprintf(buf, sizeof buf,
                     "%s is not bit-exact against the %s model: %lld FP32 accumulators and %lld "
                     "BF16 outputs of %lld compared differ; the first FP32 difference at (row "
                     "%lld, col %lld).", r->lin.name, model, (long long)r->raw.differ,
                     (long long)r->out.differ, (long long)r->raw.compared, (long long)r->raw.row,
                     (long long)r->raw.col);
        else
            continue;
        json_array_append_new(findings, json_string(buf));
    }
    if (n_checked && !n_differ) {
        snprintf(buf, sizeof buf,
                 "The FP32 accumulators and the BF16 outputs (after the per-tensor scales and "
                 "bias) are bit-exact against the %s model for %s at %lld rows, on %s.", model,
                 names_ok, rows, sampled_only ? "the sampled outputs" : "every output");
        json_array_append_new(findings, json_string(buf));
    }
    for (int i = 0; i < nlin; i++) {
        const result *r = &res[i];
        if (r->error) continue;
        if (!r->quantized_equal) {
            snprintf(buf, sizeof buf, "%s: the NVFP4 activations the backend's linear path made "
                     "differ from the C quantizer's bytes.", r->lin.name);
            json_array_append_new(findings, json_string(buf));
        }
        if (!r->sraw.equal || !r->sout.equal) {
            snprintf(buf, sizeof buf, "%s: the backend's linear path differs from "
                     "quantize-then-GEMM on %lld FP32 accumulators and %lld BF16 outputs of %lld.",
                     r->lin.name, (long long)r->sraw.differ, (long long)r->sout.differ,
                     (long long)r->sraw.compared);
            json_array_append_new(findings, json_string(buf));
        }
    }
    if (n_checked) {
        snprintf(buf, sizeof buf,
                 "Batch invariance and repeatability: %d of %d layers give bit-identical rows "
                 "whether a row is computed alone or inside M=%lld, and across two runs.", n_inv,
                 n_checked, rows);
        json_array_append_new(findings, json_string(buf));
    }
    for (int i = 0; i < nlin; i++)
        if (res[i].lin.k >= 14336 && !res[i].error && res[i].raw.equal) {
            snprintf(buf, sizeof buf,
                     "%s (K=%lld) needs no special reduction policy: one k16 step per NVFP4 block "
                     "in increasing k, from a zero accumulator, is the whole contract.",
                     res[i].lin.name, (long long)res[i].lin.k);
            json_array_append_new(findings, json_string(buf));
        }
    if (sampled) {
        if (cx.model == NVFP4_MODEL_EXACT)
            snprintf(buf, sizeof buf,
                     "On the %lld outputs compared with the reference model a plain FP32 FMA loop "
                     "differs from the correctly rounded sum on %.2f%%.", (long long)sampled,
                     100.0 * share(fma_differ, sampled));
        else
            snprintf(buf, sizeof buf,
                     "On the %lld outputs compared with the reference model the correctly rounded "
                     "sum differs from the %s model on %.2f%% (by at most %llu FP32 ULP) and a "
                     "plain FP32 FMA loop on %.2f%%. NVFP4 products have at most 12 significant "
                     "bits, so a sum stays exact in FP32 until the running sum is far larger than "
                     "some products; on data with real layers' spread it is not, truncation and "
                     "round-to-nearest part ways, and an FP32 loop is not a valid reference for "
                     "tensor-core results.", (long long)sampled, model,
                     100.0 * share(exact_differ, sampled), (unsigned long long)ulp_max,
                     100.0 * share(fma_differ, sampled));
        json_array_append_new(findings, json_string(buf));
        if (!fma_differ) {
            snprintf(buf, sizeof buf,
                     "On this data a plain FP32 FMA loop gives the model's bits on every compared "
                     "output, so this run could not tell such a loop from the model.");
            json_array_append_new(findings, json_string(buf));
        }
    }
    if (streaming && !cx.cuda && n_checked) {
        snprintf(buf, sizeof buf,
                 "Linear path on the CPU: nvfp4_linear_cpu is nvfp4_quantize then nvfp4_gemm_cpu, "
                 "the code quantize-then-GEMM runs, so comparing the two over every output shows "
                 "the path is put together right, not that the GEMM is; the GEMM was compared "
                 "with the independent reference model on %lld outputs.", (long long)outputs_seen);
        json_array_append_new(findings, json_string(buf));
    }

    if (n_error) {
        *rc = CHECK_ERROR;
        snprintf(status_txt, status_len,
                 "ERROR: %d of %d layer%s could not be checked%s%s; exit status %d.", n_error, nlin,
                 nlin == 1 ? "" : "s", n_differ ? " and some of the others differ from the model"
                                                : "",
                 n_checked ? "" : " (nothing was compared)", CHECK_ERROR);
    } else if (n_differ) {
        *rc = CHECK_DIFFERS;
        snprintf(status_txt, status_len,
                 "FAILED: %d of %d layer%s not bit-exact against the %s model (see above); exit "
                 "status %d.", n_differ, nlin, nlin == 1 ? " is" : "s are", model, CHECK_DIFFERS);
    } else if (!sampled_only) {
        *rc = CHECK_PASSED;
        snprintf(status_txt, status_len,
                 "PASSED: the FP32 accumulators and the BF16 outputs of every layer are bit-exact "
                 "against the %s model, every output compared; rows give the same bits alone and "
                 "in the batch, and across two runs.", model);
    } else {
        *rc = CHECK_PASSED;
        snprintf(status_txt, status_len,
                 "PASSED on sampled outputs: the %lld outputs compared with the independent "
                 "reference model (%.2f%% of %lld; FP32 accumulators and BF16 outputs) are "
                 "bit-exact against the %s model on every layer; rows give the same bits alone "
                 "and in the batch, and across two runs. --oracle-rows all compares every output "
                 "(slow).", (long long)outputs_seen, 100.0 * share(outputs_seen, outputs_all),
                 (long long)outputs_all, model);
    }

    json_object_set_new(root, "device", json_string(s->dev));
    json_object_set_new(root, "compute_capability", json_string(s->cc));
    json_object_set_new(root, "rows", json_integer((json_int_t)rows));
    json_object_set_new(root, "kernel", json_string(s->kernel));
    json_object_set_new(root, "backend", json_string(cx.cuda ? "cuda" : "cpu"));
    json_object_set_new(root, "oracle_model", json_string(model));
    json_object_set_new(root, "k_slices", json_integer(cx.k_slices));
    json_object_set_new(root, "streaming_a", json_boolean(streaming));
    if (s->o.ckpt)
        json_object_set_new(root, "data", json_string(s->o.ckpt));
    else
        json_object_set_new(root, "data",
                            json_string("synthetic (seeded): " BUILTIN_BLOCK "; per-block scale "
                                        "spread, outlier channels, massive activations in row 0, "
                                        "sign cancellation; quantized by ComfyUI's quantizer "
                                        "(eager)"));
    json_object_set_new(root, "seed", json_integer((json_int_t)seed));
    json_object_set_new(root, "results", results);
    json_object_set_new(root, "findings", findings);
    json_object_set_new(root, "outputs_total", json_integer((json_int_t)outputs_all));
    json_object_set_new(root, "outputs_compared", json_integer((json_int_t)outputs_seen));
    json_object_set_new(root, "every_output_compared",
                        json_boolean(!n_error && outputs_all > 0 && !sampled_only));
    json_object_set_new(root, "status", json_string(status_txt));
    json_object_set_new(root, "exit_status", json_integer(*rc));
    json_object_set_new(root, "total_seconds", json_real(s->t_total));
    return root;
}

static void check_free(check_state *s)
{
    nvfp4_atomic_discard(s->report); /* NULL once committed */
    nvfp4_ckpt_close(s->cf);
    free(s->lins);
    free(s->res);
}

int cmd_check(int argc, char **argv)
{
    check_state st = {0};
    check_state *s = &st;
    int parsed = check_parse(argc, argv, &s->o);
    if (parsed) return parsed == 2 ? CHECK_PASSED : CHECK_ERROR;
    if (check_prepare(s)) {
        check_free(s);
        return CHECK_ERROR;
    }
    s->res = calloc((size_t)s->nlin, sizeof *s->res);
    if (!s->res) {
        check_free(s);
        cli_error(C, "out of memory");
        return CHECK_ERROR;
    }
    double t_all = cli_now();
    for (int i = 0; i < s->nlin; i++) {
        check_one(s, i, &s->res[i]);
        if (s->res[i].error) {
            cli_progress_done();
            cli_error(C, "%s: %s", s->res[i].lin.name, s->res[i].error_msg);
        }
    }
    cli_progress_done();
    s->t_total = cli_now() - t_all;

    check_print_table(s);
    char status_txt[768];
    int rc = CHECK_ERROR;
    json_t *root = check_build_report(s, &rc, status_txt, sizeof status_txt);
    printf("\n%s\n", status_txt);
    if (s->report) {
        char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
        nvfp4_status wst = text ? nvfp4_atomic_write(s->report, text, strlen(text)) : NVFP4_ERR_OUT_OF_MEMORY;
        if (wst == NVFP4_OK) wst = nvfp4_atomic_commit(s->report);
        else nvfp4_atomic_discard(s->report);
        s->report = NULL;
        if (wst != NVFP4_OK) {
            cli_lib_error(C, wst, "cannot write the report");
            rc = CHECK_ERROR;
        } else {
            printf("report: %s (%.1f s)\n", s->o.json_path, s->t_total);
        }
        free(text);
    }
    json_decref(root);
    check_free(s);
    return rc;
}
