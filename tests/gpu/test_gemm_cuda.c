/* test_gemm_cuda.c -- the H100/H200 GEMM against the CPU oracle, every bit.
 *
 *   test_gemm_cuda [--quick]
 *
 * Reference: nvfp4_gemm_cpu() with NVFP4_MODEL_SM90 (bit-identical to the
 * plain oracle nvfp4_gemm_ref(), which this program also spot-checks).
 * Data: nvfp4_quantize() of seeded realistic values (weights ~N(0, 0.02)
 * with outlier columns, heavy-tailed activations with outlier channels),
 * then adversarial blocks written over the codes and scales.
 * --quick runs the small cases only (compute-sanitizer uses it). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nvfp4.h"
#include "testlib.h"
#include "seed_linears.h"
#include "cuda/sm90/plan.h"
#include "nvfp4_testing.h"

#define CUDA_OK(call)                                                                  \
    do {                                                                               \
        cudaError_t e_ = (call);                                                       \
        if (e_ != cudaSuccess) {                                                       \
            fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_),    \
                    __FILE__, __LINE__, #call);                                        \
            exit(2);                                                                   \
        }                                                                              \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- data ---------------------------------------------------------------- */

static float *weights_f32(int64_t n, int64_t k, uint64_t seed)
{
    float *w = malloc((size_t)(n * k) * sizeof *w);
    uint64_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n * k; i++) w[i] = (float)(0.02 * test_normal(&s));
    /* outlier input columns (a few channels 10-30x larger) */
    for (int j = 0; j < 8; j++) {
        int64_t c = (int64_t)(test_rand(&s) % (uint64_t)k);
        double f = 10 + 20 * ((double)(test_rand(&s) % 1000) / 1000.0);
        for (int64_t r = 0; r < n; r++) w[r * k + c] *= (float)f;
    }
    return w;
}

static float *acts_f32(int64_t m, int64_t k, uint64_t seed)
{
    float *x = malloc((size_t)(m * k) * sizeof *x);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
    for (int64_t i = 0; i < m * k; i++) {
        double g = test_normal(&s), h = test_normal(&s);
        x[i] = (float)(g * exp(0.8 * h)); /* heavy-tailed (log-normal scale mixture) */
    }
    for (int j = 0; j < 6; j++) { /* outlier channels */
        int64_t c = (int64_t)(test_rand(&s) % (uint64_t)k);
        for (int64_t r = 0; r < m; r++) x[r * k + c] *= 50.0f;
    }
    return x;
}

static void set_scale(nvfp4_tensor *t, int64_t r, int64_t cb, uint8_t v)
{
    t->scales[nvfp4_tiled_scale_offset(r, cb, t->cols)] = v;
}

/* Overwrite about one block in `every` with an adversarial pattern. */
static void adversarial(nvfp4_tensor *t, uint64_t seed, int every)
{
    uint64_t s = seed + 12345;
    int64_t nb = t->cols / 16;
    for (int64_t r = 0; r < t->rows; r++) {
        for (int64_t cb = 0; cb < nb; cb++) {
            if (test_rand(&s) % (uint64_t)every) continue;
            uint8_t *codes = t->codes + r * (t->cols / 2) + cb * 8;
            switch (test_rand(&s) % 9) {
            case 0: /* largest magnitudes, largest scale */
                memset(codes, 0x77, 8);
                set_scale(t, r, cb, 0x7E);
                break;
            case 1: /* smallest subnormal scale */
                for (int i = 0; i < 8; i++) codes[i] = (uint8_t)test_rand(&s);
                set_scale(t, r, cb, 0x01);
                break;
            case 2: /* negative zeros and zeros */
                memset(codes, (test_rand(&s) & 1) ? 0x88 : 0x80, 8);
                break;
            case 3: /* zero scale with non-zero codes */
                for (int i = 0; i < 8; i++) codes[i] = (uint8_t)test_rand(&s);
                set_scale(t, r, cb, 0x00);
                break;
            case 4: /* scale with its sign bit set (the hardware ignores it) */
                set_scale(t, r, cb, (uint8_t)(0x80 | (test_rand(&s) % 0x7F)));
                break;
            case 5: /* cancellation: +6 and -6 alternating at the largest scale */
                memset(codes, 0x7F, 8);
                set_scale(t, r, cb, 0x7E);
                break;
            case 6: /* one huge element among tiny ones */
                memset(codes, 0x11, 8);
                codes[test_rand(&s) % 8] = 0x71;
                set_scale(t, r, cb, (uint8_t)(0x70 + test_rand(&s) % 14));
                break;
            case 7: /* random codes, random (finite) scale */
                for (int i = 0; i < 8; i++) codes[i] = (uint8_t)test_rand(&s);
                set_scale(t, r, cb, (uint8_t)(test_rand(&s) % 0x7F));
                break;
            default: /* subnormal scales 1..7 */
                for (int i = 0; i < 8; i++) codes[i] = (uint8_t)test_rand(&s);
                set_scale(t, r, cb, (uint8_t)(1 + test_rand(&s) % 7));
                break;
            }
        }
    }
}

static void quantize_or_die(nvfp4_tensor *t, const float *x, int64_t rows, int64_t cols)
{
    nvfp4_status st = nvfp4_quantize(t, x, NVFP4_DTYPE_F32, rows, cols, NULL,
                                     NVFP4_VARIANT_EAGER, 0);
    if (st != NVFP4_OK) {
        fprintf(stderr, "nvfp4_quantize: %s\n", nvfp4_last_error());
        exit(2);
    }
}

static nvfp4_tensor make_weight(int64_t n, int64_t k, uint64_t seed)
{
    float *w = weights_f32(n, k, seed);
    nvfp4_tensor t;
    quantize_or_die(&t, w, n, k);
    free(w);
    adversarial(&t, seed, 97);
    return t;
}

static nvfp4_tensor make_act(int64_t m, int64_t k, uint64_t seed)
{
    float *x = acts_f32(m, k, seed);
    nvfp4_tensor t;
    quantize_or_die(&t, x, m, k);
    free(x);
    t.rows = m; /* the quantizer pads rows to 16; the GEMM takes exactly m */
    adversarial(&t, seed ^ 0xABCD, 89);
    return t;
}

/* A new tensor holding rows idx[0..cnt) of t (tiled scales). */
static nvfp4_tensor take_rows(const nvfp4_tensor *t, const int64_t *idx, int64_t cnt)
{
    nvfp4_tensor o;
    if (nvfp4_tensor_alloc(&o, cnt, t->cols, NVFP4_HI_FIRST, NVFP4_SCALES_TILED) != NVFP4_OK) {
        fprintf(stderr, "alloc: %s\n", nvfp4_last_error());
        exit(2);
    }
    o.per_tensor_scale = t->per_tensor_scale;
    for (int64_t i = 0; i < cnt; i++) {
        memcpy(o.codes + i * (t->cols / 2), t->codes + idx[i] * (t->cols / 2), (size_t)t->cols / 2);
        for (int64_t cb = 0; cb < t->cols / 16; cb++)
            o.scales[nvfp4_tiled_scale_offset(i, cb, t->cols)] = nvfp4_tensor_scale(t, idx[i], cb);
    }
    return o;
}

/* ---- device side ---------------------------------------------------------- */

typedef struct dev_tensor {
    nvfp4_cuda_operand op;
    void *codes, *scales, *pts;
} dev_tensor;

static dev_tensor upload(const nvfp4_tensor *t)
{
    dev_tensor d;
    size_t cb = (size_t)(t->rows * t->cols / 2);
    size_t sb = nvfp4_scales_bytes(t->rows, t->cols, NVFP4_SCALES_TILED);
    CUDA_OK(cudaMalloc(&d.codes, cb));
    CUDA_OK(cudaMalloc(&d.scales, sb));
    CUDA_OK(cudaMalloc(&d.pts, sizeof(float)));
    CUDA_OK(cudaMemcpy(d.codes, t->codes, cb, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d.scales, t->scales, sb, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d.pts, &t->per_tensor_scale, sizeof(float), cudaMemcpyHostToDevice));
    d.op.codes = d.codes;
    d.op.scales = d.scales;
    d.op.per_tensor_scale = d.pts;
    d.op.rows = t->rows;
    d.op.cols = t->cols;
    return d;
}

static void dev_free(dev_tensor *d)
{
    cudaFree(d->codes);
    cudaFree(d->scales);
    cudaFree(d->pts);
}

#define GUARD 4096 /* elements after each output that must stay untouched */
static int g_k_slices = 0; /* k_slices of every gpu_gemm call */
/* out at this many elements past a 256-byte boundary (1: not 16-byte
 * aligned, so the wgmma kernel stores it element by element, not staged) */
static int g_out_offset = 0;

/* Run the CUDA GEMM; raw/out (host, m*n) receive the results.  Checks that
 * nothing past the outputs was written.  Returns the status. */
static nvfp4_status gpu_gemm(const dev_tensor *a, const dev_tensor *b, const float *bias_dev,
                             float *raw, uint16_t *out)
{
    int64_t m = a->op.rows, n = b->op.rows;
    size_t mn = (size_t)(m * n);
    float *d_raw = NULL;
    uint16_t *d_out = NULL;
    void *ws = NULL;
    size_t wsb = nvfp4_cuda_gemm_workspace(m, n, a->op.cols);
    CUDA_OK(cudaMalloc((void **)&d_raw, (mn + GUARD) * sizeof(float)));
    CUDA_OK(cudaMalloc((void **)&d_out, (mn + GUARD + (size_t)g_out_offset) * sizeof(uint16_t)));
    CUDA_OK(cudaMalloc(&ws, wsb ? wsb : 256));
    /* poison: unwritten outputs show up as NaN patterns */
    CUDA_OK(cudaMemset(d_raw, 0xFF, (mn + GUARD) * sizeof(float)));
    CUDA_OK(cudaMemset(d_out, 0xFF, (mn + GUARD + (size_t)g_out_offset) * sizeof(uint16_t)));
    uint16_t *const d_out0 = d_out;
    d_out += g_out_offset;
    nvfp4_cuda_gemm_args g;
    memset(&g, 0, sizeof g);
    g.a = a->op;
    g.b = b->op;
    g.bias = bias_dev;
    g.raw = raw ? d_raw : NULL;
    g.out = out ? d_out : NULL;
    g.workspace = ws;
    g.workspace_bytes = wsb;
    g.k_slices = g_k_slices;
    nvfp4_status st = nvfp4_gemm_cuda(&g);
    if (st == NVFP4_OK) {
        CUDA_OK(cudaDeviceSynchronize());
        float *gr = malloc(GUARD * sizeof(float));
        uint16_t *go = malloc(GUARD * sizeof(uint16_t));
        CUDA_OK(cudaMemcpy(gr, d_raw + mn, GUARD * sizeof(float), cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(go, d_out + mn, GUARD * sizeof(uint16_t), cudaMemcpyDeviceToHost));
        int clean = 1;
        for (int i = 0; i < GUARD; i++) {
            uint32_t u;
            memcpy(&u, &gr[i], 4);
            if (u != 0xFFFFFFFFu || go[i] != 0xFFFF) clean = 0;
        }
        CHECKF(clean, "the kernel wrote past the %lld x %lld outputs", (long long)m, (long long)n);
        free(gr);
        free(go);
        if (raw) CUDA_OK(cudaMemcpy(raw, d_raw, mn * sizeof(float), cudaMemcpyDeviceToHost));
        if (out) CUDA_OK(cudaMemcpy(out, d_out, mn * sizeof(uint16_t), cudaMemcpyDeviceToHost));
    }
    cudaFree(d_raw);
    cudaFree(d_out0);
    cudaFree(ws);
    return st;
}

static void cpu_gemm(const nvfp4_tensor *a, const nvfp4_tensor *b, const float *bias, float *raw,
                     uint16_t *out)
{
    nvfp4_gemm_args g;
    memset(&g, 0, sizeof g);
    g.a = a;
    g.b = b;
    g.bias = bias;
    g.raw = raw;
    g.out = out;
    g.model = NVFP4_MODEL_SM90;
    g.nthreads = 0;
    if (nvfp4_gemm_cpu(&g) != NVFP4_OK) {
        fprintf(stderr, "nvfp4_gemm_cpu: %s\n", nvfp4_last_error());
        exit(2);
    }
}

static float *bias_values(int64_t n, uint64_t seed)
{
    float *b = malloc((size_t)n * sizeof *b);
    uint64_t s = seed + 99;
    for (int64_t i = 0; i < n; i++) /* BF16 values widened exactly */
        b[i] = nvfp4_bf16_to_f32(nvfp4_bf16_from_f32((float)(0.5 * test_normal(&s))));
    return b;
}

static float *upload_floats(const float *x, int64_t n)
{
    float *d = NULL;
    CUDA_OK(cudaMalloc((void **)&d, (size_t)n * sizeof(float)));
    CUDA_OK(cudaMemcpy(d, x, (size_t)n * sizeof(float), cudaMemcpyHostToDevice));
    return d;
}

/* Compare rows idx[] of GPU outputs (full m x n) with reference rows (cnt x n). */
static void compare_rows(const char *what, const float *graw, const uint16_t *gout, int64_t n,
                         const int64_t *idx, int64_t cnt, const float *rraw, const uint16_t *rout)
{
    float *sr = malloc((size_t)(cnt * n) * sizeof(float));
    uint16_t *so = malloc((size_t)(cnt * n) * sizeof(uint16_t));
    for (int64_t i = 0; i < cnt; i++) {
        if (graw) memcpy(sr + i * n, graw + idx[i] * n, (size_t)n * sizeof(float));
        if (gout) memcpy(so + i * n, gout + idx[i] * n, (size_t)n * sizeof(uint16_t));
    }
    char buf[160];
    if (graw && rraw) {
        snprintf(buf, sizeof buf, "%s raw (rows are sample indices)", what);
        test_equal_bits(buf, sr, rraw, 4, cnt, n);
    }
    if (gout && rout) {
        snprintf(buf, sizeof buf, "%s out (rows are sample indices)", what);
        test_equal_bits(buf, so, rout, 2, cnt, n);
    }
    free(sr);
    free(so);
}

/* A GEMM's status and its outputs against the reference, every bit. */
static void expect_exact(nvfp4_status st, const float *graw, const uint16_t *gout, const float *rraw,
                         const uint16_t *rout, int64_t m, int64_t n)
{
    CHECKF(st == NVFP4_OK, "%s", nvfp4_last_error());
    if (st != NVFP4_OK) return;
    test_equal_bits("raw", graw, rraw, 4, m, n);
    test_equal_bits("out", gout, rout, 2, m, n);
}

/* ---- tests ------------------------------------------------------------------ */

/* The kernels a GEMM of NVFP4 activations can be forced onto (the
 * in-kernel A producer's twins run in test_linear_cuda). */
static int gemm_kernel(int v) { return !nvfp4_sm90_kernels[v].bf16; }

/* Whether kernel v takes K slices: the register kernels but REGR, the wgmma
 * tiles with bn = 64. */
static int takes_slices(const nvfp4_sm90_kernel *x)
{
    return x->family == NVFP4_SM90_WGMMA ? x->mt <= 64 : x->family != NVFP4_SM90_REGR;
}

static int kernel_index(const char *name)
{
    for (int v = 0; v < nvfp4_sm90_num_kernels; v++)
        if (!strcmp(nvfp4_sm90_kernels[v].name, name)) return v;
    fprintf(stderr, "no kernel %s\n", name);
    exit(2);
}

/* Every kernel, forced, on small shapes with K tails, against the full CPU
 * reference (and the plain oracle nvfp4_gemm_ref on a corner). */
static void test_kernels_small(int quick)
{
    /* K tails (K % 64 == 32, K = 32), partial last stages, small M (every
     * register kernel; N not a multiple of a warp's rows), and (the last
     * shape) many tiles per CTA so the stage ring wraps across tiles. */
    static const int64_t shapes[][3] = {
        {5, 464, 448}, {16, 208, 480}, {9, 48, 32},  {8, 2064, 992}, {300, 464, 448},
        {37, 128, 480}, {1, 16, 32},  {129, 208, 96},
        /* several chains per CTA, K % 128 = 32, M = 17..32, more chains than 132 x 16 */
        {3, 8192, 224}, {32, 4224, 160}, {17, 112, 288}, {2, 65536, 96}, {4, 12800, 96},
        {32, 12800, 96},
        /* three 16-row chains a CTA (REGR), K tails of 14 and 2 blocks, one chunk */
        {1, 4352, 480}, {13, 5376, 800}, {2, 4352, 32},
        {1000, 2048, 480}};
    size_t nshapes = sizeof shapes / sizeof shapes[0] - (quick ? 1 : 0);
    for (size_t si = 0; si < nshapes; si++) {
        int64_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
        nvfp4_tensor a = make_act(m, k, 11 + si), b = make_weight(n, k, 23 + si);
        float *bias = bias_values(n, si);
        float *rraw = malloc((size_t)(m * n) * 4), *graw = malloc((size_t)(m * n) * 4);
        uint16_t *rout = malloc((size_t)(m * n) * 2), *gout = malloc((size_t)(m * n) * 2);
        cpu_gemm(&a, &b, bias, rraw, rout);
        {
            /* the plain oracle agrees with the CPU backend on the first rows */
            int64_t mm = m < 3 ? m : 3;
            int64_t idx[3] = {0, 1, 2};
            nvfp4_tensor a3 = take_rows(&a, idx, mm);
            float *r3 = malloc((size_t)(mm * n) * 4);
            uint16_t *o3 = malloc((size_t)(mm * n) * 2);
            nvfp4_gemm_args g = {&a3, &b, bias, r3, o3, NVFP4_MODEL_SM90, 1, 1};
            TEST("oracle vs cpu backend") {
                CHECK(nvfp4_gemm_ref(&g) == NVFP4_OK);
                test_equal_bits("ref vs cpu raw", r3, rraw, 4, mm, n);
                test_equal_bits("ref vs cpu out", o3, rout, 2, mm, n);
            }
            free(r3);
            free(o3);
            nvfp4_tensor_free(&a3);
        }
        dev_tensor da = upload(&a), db = upload(&b);
        float *dbias = upload_floats(bias, n);
        /* every kernel */
        for (int v = 0; v < nvfp4_sm90_num_kernels; v++) {
            if (!gemm_kernel(v)) continue;
            const nvfp4_sm90_kernel *x = &nvfp4_sm90_kernels[v];
            static char name[112];
            snprintf(name, sizeof name, "%s, M=%lld N=%lld K=%lld", x->name, (long long)m, (long long)n, (long long)k);
            TEST(name) {
                nvfp4_sm90_force_kernel(v);
                nvfp4_status st = gpu_gemm(&da, &db, dbias, graw, gout);
                if (NVFP4_SM90_IS_REG(x) && m > x->mt) {
                    CHECKF(st == NVFP4_ERR_UNSUPPORTED, "register kernel at M=%lld: got %d", (long long)m, st);
                    continue;
                }
                expect_exact(st, graw, gout, rraw, rout, m, n);
            }
        }
        /* stream-K forced on small grids: split tiles (pieces starting and
         * ending on any chunk, K tails in the tail piece) on every kernel
         * that can run it; the others, and M <= 64, refuse */
        for (int v = 0; v < nvfp4_sm90_num_kernels; v++) {
            const nvfp4_sm90_kernel *x = &nvfp4_sm90_kernels[v];
            if (x->family != NVFP4_SM90_WGMMA) continue;
            const int capable = NVFP4_SM90_SK_TILE(x->mt, x->nc) && m > NVFP4_SM90_SK_MIN_M && !x->sliced;
            const int64_t tiles = ((n + 64 * x->nc - 1) / (64 * x->nc)) * ((m + x->mt - 1) / x->mt);
            static const int grids[] = {2, 3, 5, 7};
            for (size_t gi = 0; gi < sizeof grids / sizeof grids[0]; gi++) {
                if (capable && tiles < grids[gi]) continue;
                static char name[112];
                snprintf(name, sizeof name, "stream-K on %d CTAs, %s, M=%lld N=%lld K=%lld", grids[gi], x->name,
                         (long long)m, (long long)n, (long long)k);
                TEST(name) {
                    nvfp4_sm90_force_kernel(v);
                    nvfp4_sm90_force_stream_k(grids[gi]);
                    nvfp4_status st = gpu_gemm(&da, &db, dbias, graw, gout);
                    if (!capable) {
                        CHECKF(st == NVFP4_ERR_UNSUPPORTED, "stream-K forced on %s M=%lld: got %d", x->name,
                               (long long)m, st);
                        continue;
                    }
                    expect_exact(st, graw, gout, rraw, rout, m, n);
                }
            }
        }
        nvfp4_sm90_force_stream_k(0);
        /* the wgmma kernels with out not 16-byte aligned, and with the
         * element-by-element epilogue forced: the staged one needs 16-byte rows */
        for (int pass = 0; pass < 2; pass++) {
            g_out_offset = pass == 0;
            nvfp4_sm90_force_epilogue(pass == 0);
            for (int v = 0; v < nvfp4_sm90_num_wgmma; v++) {
                static char name[112];
                snprintf(name, sizeof name, "%s epilogue, %s, M=%lld N=%lld K=%lld",
                         pass == 0 ? "unaligned out" : "element-by-element", nvfp4_sm90_kernels[v].name, (long long)m,
                         (long long)n, (long long)k);
                TEST(name) {
                    nvfp4_sm90_force_kernel(v);
                    nvfp4_status st = gpu_gemm(&da, &db, dbias, graw, gout);
                    expect_exact(st, graw, gout, rraw, rout, m, n);
                }
            }
        }
        g_out_offset = 0;
        nvfp4_sm90_force_epilogue(1);
        nvfp4_sm90_force_kernel(-1);
        dev_free(&da);
        dev_free(&db);
        cudaFree(dbias);
        free(bias);
        free(rraw);
        free(graw);
        free(rout);
        free(gout);
        nvfp4_tensor_free(&a);
        nvfp4_tensor_free(&b);
    }
}

/* Columns [c0, c1) of t as a new tensor (row-major scales). */
static nvfp4_tensor take_cols(const nvfp4_tensor *t, int64_t c0, int64_t c1)
{
    nvfp4_tensor o;
    if (nvfp4_tensor_alloc(&o, t->rows, c1 - c0, NVFP4_HI_FIRST, NVFP4_SCALES_ROW_MAJOR) != NVFP4_OK) {
        fprintf(stderr, "alloc: %s\n", nvfp4_last_error());
        exit(2);
    }
    o.per_tensor_scale = t->per_tensor_scale;
    for (int64_t r = 0; r < t->rows; r++) {
        memcpy(o.codes + r * ((c1 - c0) / 2), t->codes + r * (t->cols / 2) + c0 / 2, (size_t)(c1 - c0) / 2);
        for (int64_t cb = 0; cb < (c1 - c0) / 16; cb++)
            o.scales[r * ((c1 - c0) / 16) + cb] = nvfp4_tensor_scale(t, r, c0 / 16 + cb);
    }
    return o;
}

/* The K-slice contract built from one-chain GEMMs: slice s (the rule of
 * nvfp4_k_slice_elems) is the S = 1 GEMM of columns [s*len, (s+1)*len), and
 * the partials are added in slice order in FP32 (RNE), then the epilogue. */
static void slice_reference(const nvfp4_tensor *a, const nvfp4_tensor *b, const float *bias, int S,
                            float *raw, uint16_t *out)
{
    const int64_t m = a->rows, n = b->rows, k = a->cols, len = nvfp4_k_slice_elems(k, S);
    float *part = malloc((size_t)(m * n) * sizeof(float));
    int first = 1;
    for (int64_t c0 = 0; c0 < k; c0 += len) {
        const int64_t c1 = c0 + len < k ? c0 + len : k;
        nvfp4_tensor as = take_cols(a, c0, c1), bs = take_cols(b, c0, c1);
        cpu_gemm(&as, &bs, NULL, part, NULL);
        for (int64_t i = 0; i < m * n; i++) raw[i] = first ? part[i] : raw[i] + part[i];
        first = 0;
        nvfp4_tensor_free(&as);
        nvfp4_tensor_free(&bs);
    }
    const float alpha = nvfp4_gemm_alpha(a->per_tensor_scale, b->per_tensor_scale);
    for (int64_t i = 0; i < m * n; i++) out[i] = nvfp4_epilogue(raw[i], alpha, bias ? &bias[i % n] : NULL);
    free(part);
}

/* K slices on every kernel that takes them (the register kernels but REGR,
 * the wgmma tiles with bn = 64) and through the planner, against
 * slice_reference. */
static void test_k_slices(void)
{
    static const int64_t shapes[][3] = {{5, 48, 448}, {13, 64, 480}, {1, 32, 992}, {100, 80, 480}, {200, 48, 1024}};
    static const int slices[] = {2, 3, 7, 40};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int64_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
        nvfp4_tensor a = make_act(m, k, 70 + si), b = make_weight(n, k, 80 + si);
        float *bias = bias_values(n, 90 + si);
        dev_tensor da = upload(&a), db = upload(&b);
        float *dbias = upload_floats(bias, n);
        float *rraw = malloc((size_t)(m * n) * 4), *graw = malloc((size_t)(m * n) * 4);
        uint16_t *rout = malloc((size_t)(m * n) * 2), *gout = malloc((size_t)(m * n) * 2);
        for (size_t j = 0; j < sizeof slices / sizeof slices[0]; j++) {
            slice_reference(&a, &b, bias, slices[j], rraw, rout);
            g_k_slices = slices[j];
            for (int v = -1; v < nvfp4_sm90_num_kernels; v++) {
                const nvfp4_sm90_kernel *x = v >= 0 ? &nvfp4_sm90_kernels[v] : NULL;
                if (x && (!gemm_kernel(v) || (NVFP4_SM90_IS_REG(x) && m > x->mt) || !takes_slices(x))) continue;
                static char name[128];
                snprintf(name, sizeof name, "k_slices=%d %s, M=%lld N=%lld K=%lld", slices[j],
                         x ? x->name : "(planned)", (long long)m, (long long)n, (long long)k);
                TEST(name) {
                    nvfp4_sm90_force_kernel(v);
                    nvfp4_status st = gpu_gemm(&da, &db, dbias, graw, gout);
                    expect_exact(st, graw, gout, rraw, rout, m, n);
                }
            }
            nvfp4_sm90_force_kernel(-1);
        }
        TEST("k_slices = 1 is the one-chain contract") {
            g_k_slices = 1;
            nvfp4_status st = gpu_gemm(&da, &db, dbias, graw, gout);
            CHECKF(st == NVFP4_OK, "%s", nvfp4_last_error());
            cpu_gemm(&a, &b, bias, rraw, rout);
            if (st == NVFP4_OK) test_equal_bits("raw", graw, rraw, 4, m, n);
        }
        TEST("a wgmma tile without the K-slice code refuses k_slices > 1") {
            g_k_slices = 2;
            nvfp4_sm90_force_kernel(kernel_index("nvfp4_sm90_gemm_bn256_nc2"));
            CHECK(gpu_gemm(&da, &db, dbias, graw, gout) == NVFP4_ERR_UNSUPPORTED);
            nvfp4_sm90_force_kernel(-1);
        }
        g_k_slices = 0;
        dev_free(&da);
        dev_free(&db);
        cudaFree(dbias);
        free(bias);
        free(rraw);
        free(graw);
        free(rout);
        free(gout);
        nvfp4_tensor_free(&a);
        nvfp4_tensor_free(&b);
    }
}

static void test_errors(void)
{
    TEST("argument errors") {
        nvfp4_tensor a = make_act(4, 48, 1), b = make_weight(16, 48, 2);
        dev_tensor da = upload(&a), db = upload(&b);
        float raw[64];
        nvfp4_status st = gpu_gemm(&da, &db, NULL, raw, NULL);
        CHECKF(st == NVFP4_ERR_UNSUPPORTED, "K=48 should be unsupported, got %d", st);
        CHECK(strstr(nvfp4_last_error(), "K=48") != NULL);
        nvfp4_tensor a2 = make_act(4, 64, 3), b2 = make_weight(16, 64, 4);
        dev_tensor da2 = upload(&a2), db2 = upload(&b2);
        nvfp4_cuda_gemm_args g;
        memset(&g, 0, sizeof g);
        g.a = da2.op;
        g.b = db2.op;
        g.raw = (float *)da2.codes; /* never written: the call must fail first */
        st = nvfp4_gemm_cuda(&g);
        CHECKF(st == NVFP4_ERR_INVALID_ARGUMENT, "no workspace: got %d", st);
        CHECK(strstr(nvfp4_last_error(), "workspace") != NULL);
        g.b.rows = 20;
        st = nvfp4_gemm_cuda(&g);
        CHECKF(st == NVFP4_ERR_INVALID_ARGUMENT, "N=20: got %d", st);
        g.b.rows = 16;
        g.b.cols = 32;
        st = nvfp4_gemm_cuda(&g);
        CHECKF(st == NVFP4_ERR_INVALID_ARGUMENT, "K mismatch: got %d", st);
        dev_free(&da2);
        dev_free(&db2);
        nvfp4_tensor_free(&a2);
        nvfp4_tensor_free(&b2);
        CHECK(nvfp4_gemm_cuda(NULL) == NVFP4_ERR_INVALID_ARGUMENT);
        dev_free(&da);
        dev_free(&db);
        nvfp4_tensor_free(&a);
        nvfp4_tensor_free(&b);
    }
}

/* Rows to check in an m-row GEMM: edges, tile boundaries, random others. */
static int64_t sample_rows(int64_t m, int64_t *idx, int64_t max, uint64_t seed)
{
    int64_t cnt = 0;
    static const int64_t fixed[] = {0, 1, 7, 8, 15, 16, 63, 64, 127, 128, 255, 256, 1023, 1024};
    if (m <= max) {
        for (int64_t i = 0; i < m; i++) idx[cnt++] = i;
        return cnt;
    }
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0] && cnt < max - 8; i++)
        if (fixed[i] < m) idx[cnt++] = fixed[i];
    idx[cnt++] = m - 1;
    uint64_t s = seed + 5;
    while (cnt < max) idx[cnt++] = (int64_t)(test_rand(&s) % (uint64_t)m);
    return cnt;
}

/* One linear at one M: GPU with and without bias vs the CPU on sampled rows. */
static void test_linear(const seed_linear *L, const nvfp4_tensor *w, const dev_tensor *dw,
                        const float *bias, const float *dbias, int64_t m, int64_t max_rows,
                        uint64_t seed)
{
    static char name[96];
    snprintf(name, sizeof name, "%s M=%lld (N=%lld K=%lld)", L->name, (long long)m,
             (long long)L->n, (long long)L->k);
    TEST(name) {
        double t0 = now_s();
        nvfp4_tensor a = make_act(m, L->k, seed);
        dev_tensor da = upload(&a);
        size_t mn = (size_t)(m * L->n);
        float *graw = malloc(mn * 4), *graw_nb = malloc(mn * 4);
        uint16_t *gout = malloc(mn * 2), *gout_nb = malloc(mn * 2);
        nvfp4_status st = gpu_gemm(&da, dw, dbias, graw, gout);
        CHECKF(st == NVFP4_OK, "%s", nvfp4_last_error());
        st = gpu_gemm(&da, dw, NULL, graw_nb, gout_nb);
        CHECKF(st == NVFP4_OK, "%s", nvfp4_last_error());
        int64_t *idx = malloc((size_t)max_rows * sizeof *idx);
        int64_t cnt = sample_rows(m, idx, max_rows, seed);
        nvfp4_tensor as = take_rows(&a, idx, cnt);
        float *rraw = malloc((size_t)(cnt * L->n) * 4);
        uint16_t *rout = malloc((size_t)(cnt * L->n) * 2), *rout_nb = malloc((size_t)(cnt * L->n) * 2);
        double t1 = now_s();
        cpu_gemm(&as, w, bias, rraw, rout);
        double t2 = now_s();
        float alpha = nvfp4_gemm_alpha(a.per_tensor_scale, w->per_tensor_scale);
        for (int64_t i = 0; i < cnt * L->n; i++) rout_nb[i] = nvfp4_epilogue(rraw[i], alpha, NULL);
        compare_rows("bias", graw, gout, L->n, idx, cnt, rraw, rout);
        compare_rows("no bias", graw_nb, gout_nb, L->n, idx, cnt, rraw, rout_nb);
        printf("  %-40s rows checked %4lld / %lld, cpu %.1fs, total %.1fs\n", name,
               (long long)cnt, (long long)m, t2 - t1, now_s() - t0);
        fflush(stdout);
        free(idx);
        free(rraw);
        free(rout);
        free(rout_nb);
        free(graw);
        free(graw_nb);
        free(gout);
        free(gout_nb);
        nvfp4_tensor_free(&as);
        nvfp4_tensor_free(&a);
        dev_free(&da);
    }
}

/* A row's bits do not depend on M or on its position; 10 runs agree. */
static void test_invariance(const seed_linear *L, const dev_tensor *dw, const float *dbias)
{
    TEST("batch invariance and repeatability") {
        const int64_t big = 2048;
        nvfp4_tensor a = make_act(big, L->k, 777);
        dev_tensor da = upload(&a);
        size_t mn = (size_t)(big * L->n);
        float *raw = malloc(mn * 4), *raw2 = malloc(mn * 4);
        uint16_t *out = malloc(mn * 2), *out2 = malloc(mn * 2);
        CHECK(gpu_gemm(&da, dw, dbias, raw, out) == NVFP4_OK);
        int same = 1;
        for (int rep = 0; rep < 10; rep++) {
            CHECK(gpu_gemm(&da, dw, dbias, raw2, out2) == NVFP4_OK);
            if (memcmp(raw, raw2, mn * 4) || memcmp(out, out2, mn * 2)) same = 0;
        }
        CHECKF(same, "10 repeated M=2048 runs differ");
        /* the same bits data-parallel (the plan above is stream-K on 132 SMs) */
        nvfp4_sm90_force_stream_k(-1);
        CHECK(gpu_gemm(&da, dw, dbias, raw2, out2) == NVFP4_OK);
        nvfp4_sm90_force_stream_k(0);
        test_equal_bits("M=2048 data-parallel vs stream-K (raw)", raw2, raw, 4, big, L->n);
        test_equal_bits("M=2048 data-parallel vs stream-K (out)", out2, out, 2, big, L->n);
        /* M=128: the first 128 rows of the same activations */
        int64_t first[128];
        for (int i = 0; i < 128; i++) first[i] = i;
        nvfp4_tensor a128 = take_rows(&a, first, 128);
        dev_tensor d128 = upload(&a128);
        float *raw128 = malloc((size_t)(128 * L->n) * 4);
        uint16_t *out128 = malloc((size_t)(128 * L->n) * 2);
        CHECK(gpu_gemm(&d128, dw, dbias, raw128, out128) == NVFP4_OK);
        test_equal_bits("M=128 rows vs the same rows in M=2048 (raw)", raw128, raw, 4, 128, L->n);
        test_equal_bits("M=128 rows vs the same rows in M=2048 (out)", out128, out, 2, 128, L->n);
        /* single rows at several positions, and every kernel forced on one */
        static const int64_t pos[] = {0, 77, 127, 128, 1000, 2047};
        float *raw1 = malloc((size_t)L->n * 4);
        uint16_t *out1 = malloc((size_t)L->n * 2);
        for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++) {
            nvfp4_tensor a1 = take_rows(&a, &pos[i], 1);
            dev_tensor d1 = upload(&a1);
            int nv = i == 0 ? nvfp4_sm90_num_kernels : 1;
            for (int v = 0; v < nv; v++) {
                if (i == 0 && !gemm_kernel(v)) continue;
                nvfp4_sm90_force_kernel(i == 0 ? v : -1);
                CHECK(gpu_gemm(&d1, dw, dbias, raw1, out1) == NVFP4_OK);
                char what[112];
                snprintf(what, sizeof what, "row %lld alone (%s) vs in M=2048 (raw)", (long long)pos[i],
                         i == 0 ? nvfp4_sm90_kernels[v].name : "planned");
                test_equal_bits(what, raw1, raw + pos[i] * L->n, 4, 1, L->n);
                snprintf(what, sizeof what, "row %lld alone vs in M=2048 (out)", (long long)pos[i]);
                test_equal_bits(what, out1, out + pos[i] * L->n, 2, 1, L->n);
            }
            nvfp4_sm90_force_kernel(-1);
            dev_free(&d1);
            nvfp4_tensor_free(&a1);
        }
        free(raw1);
        free(out1);
        free(raw128);
        free(out128);
        dev_free(&d128);
        nvfp4_tensor_free(&a128);
        free(raw);
        free(raw2);
        free(out);
        free(out2);
        dev_free(&da);
        nvfp4_tensor_free(&a);
    }
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    char dev[128], cc[16];
    if (!nvfp4_cuda_available() || nvfp4_cuda_device_name(dev, sizeof dev, cc, sizeof cc) != NVFP4_OK) {
        /* a failure, not a pass: tests/gpu/run.sh must not count it */
        fprintf(stderr, "test_gemm_cuda: no sm_90 device\n");
        return 1;
    }
    printf("device: %s (%s), cpu reference: %s\n", dev, cc, nvfp4_cpu_simd_name());
    test_errors();
    test_kernels_small(quick);
    test_k_slices();
    if (!quick) {
        static const int64_t ms[] = {1, 7, 16, 100, 129, 512, 2048};
        for (int li = 0; li < 4; li++) {
            const seed_linear *L = &SEED_LINEARS[li];
            double t0 = now_s();
            nvfp4_tensor w = make_weight(L->n, L->k, 1000 + li);
            dev_tensor dw = upload(&w);
            float *bias = bias_values(L->n, 50 + li);
            float *dbias = upload_floats(bias, L->n);
            printf("%s: weights ready in %.1fs\n", L->name, now_s() - t0);
            /* M=128: every row */
            test_linear(L, &w, &dw, bias, dbias, 128, 128, 300 + li);
            /* the other M, spread over the linears (each M on two of them);
             * sampled rows where M is large */
            for (int j = 0; j < 7; j++) {
                if (j % 4 != li && (j + 2) % 4 != li) continue;
                int64_t m = ms[j];
                test_linear(L, &w, &dw, bias, dbias, m, m <= 512 ? m : 256, 400 + li * 10 + j);
            }
            if (li == 1) test_invariance(L, &dw, dbias);
            cudaFree(dbias);
            free(bias);
            dev_free(&dw);
            nvfp4_tensor_free(&w);
        }
    }
    return test_summary("gemm_cuda");
}
