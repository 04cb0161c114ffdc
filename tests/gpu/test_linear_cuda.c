/* test_linear_cuda.c -- nvfp4_linear_cuda() against nvfp4_linear_cpu(), every bit.
 *
 *   test_linear_cuda [--quick]
 *
 * The four linears of the seed report (QKV 21504x5376, attn-out 5376x7168,
 * FC1 28672x5376, FC2 5376x14336) at M = 128 and other M (1, 16, 37, 300,
 * 2048), both quantizer variants, static and dynamic per-tensor scale, with
 * and without bias.  Checked:
 *  - raw and out == nvfp4_linear_cpu (model SM90) on every row for M <= 128;
 *    for larger M on sampled rows (edges, tile edges, random rows; a row's
 *    result does not depend on the other rows, the dynamic scale aside,
 *    which the CPU side then gets as the static scale nvfp4_quantize()
 *    computed over the WHOLE input);
 *  - the quantized activations (x_codes, x_scales, x_scale) == nvfp4_quantize
 *    over the whole input, which pins the dynamic scale;
 *  - a small linear (k = 500, not a multiple of 16) against the literal
 *    nvfp4_linear_cpu() on all rows, dynamic scale included;
 *  - the fused producer's FP16 operands == the GEMM's own workspace after
 *    its pre-pass dequantized the same codes (finite and NaN/Inf/subnormal
 *    inputs): the producer speaks the GEMM's workspace format, bit for bit;
 *  - M <= 8: the register GEMM's in-kernel A producer (it quantizes the BF16
 *    activations itself) == the CPU linear, and == the quantizer kernel +
 *    GEMM on NaN/Inf inputs too (raw, out and the per-tensor scale), on
 *    every kernel width it has (one, two and four chains per MMA warp) and
 *    with K tails;
 *  - each kernel reads the words the kernel before it writes (the amax
 *    pass's, the quantizer's per-tensor scale) only after waiting for that
 *    grid (the stores delayed by a hook).
 * Weights are random NVFP4 (codes and E4M3 scales), activations BF16. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nvfp4.h"
#include "testlib.h"
#include "formats/layout.h"
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

static int64_t stat_runs, stat_rows_checked, stat_outputs_checked;
static double stat_cpu_s;

/* ---- data ---------------------------------------------------------------- */

/* Random NVFP4 weight: any code, block scales in a checkpoint's range. */
static void random_weight(nvfp4_tensor *w, int64_t n, int64_t k, uint64_t seed)
{
    if (nvfp4_tensor_alloc(w, n, k, NVFP4_HI_FIRST, NVFP4_SCALES_TILED) != NVFP4_OK) exit(2);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    size_t cb = (size_t)(n * k / 2);
    for (size_t i = 0; i < cb; i += 8) {
        uint64_t u = test_rand(&s);
        memcpy(w->codes + i, &u, cb - i < 8 ? cb - i : 8);
    }
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < k / 16; c++)
            w->scales[nvfp4_tiled_scale_offset(r, c, k)] = (uint8_t)(0x30 + test_rand(&s) % 0x4E);
    w->per_tensor_scale = 0.000321f;
}

static uint16_t *random_bf16(int64_t m, int64_t k, uint64_t seed)
{
    uint16_t *x = malloc((size_t)(m * k) * sizeof *x);
    uint64_t s = seed * 0xD1B54A32D192ED03ull + 5;
    int64_t out_c[4];
    for (int j = 0; j < 4; j++) out_c[j] = (int64_t)(test_rand(&s) % (uint64_t)k);
    for (int64_t r = 0; r < m; r++)
        for (int64_t c = 0; c < k; c++) {
            double g = test_normal(&s);
            if (test_rand(&s) % 50 == 0) g *= 8;
            for (int j = 0; j < 4; j++)
                if (c == out_c[j]) g *= 40;
            x[r * k + c] = nvfp4_bf16_from_f32((float)g);
        }
    return x;
}

/* Blocks of zeros, subnormals, E2M1 ties, equal values, huge outliers;
 * finite = 0 also sprinkles NaN and Inf. */
static uint16_t *adversarial_bf16(int64_t m, int64_t k, uint64_t seed, int finite)
{
    static const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    uint16_t *x = malloc((size_t)(m * k) * sizeof *x);
    uint64_t s = seed * 0x2545F4914F6CDD1Dull + 9;
    for (int64_t r = 0; r < m; r++)
        for (int64_t c0 = 0; c0 < k; c0 += 16) {
            int kind = (int)(test_rand(&s) % 7);
            for (int64_t c = c0; c < c0 + 16 && c < k; c++) {
                uint64_t u = test_rand(&s);
                uint16_t b;
                switch (kind) {
                case 0: b = (u & 1) ? 0x8000 : 0; break;
                case 1: b = (uint16_t)((u & 0x8000) | (1 + (u >> 8) % 0x7F)); break;
                case 2: b = nvfp4_bf16_from_f32(c == c0 ? 6.0f : ((u & 1) ? -1 : 1) * ties[(u >> 1) % 7]); break;
                case 3: b = 0x4321; break;
                case 4: b = (c == c0 + 3) ? 0x7F7F : nvfp4_bf16_from_f32((float)test_normal(&s)); break;
                case 5: b = (uint16_t)(u >> 20); break; /* any bits */
                default: b = nvfp4_bf16_from_f32((float)test_normal(&s)); break;
                }
                if (finite && (b & 0x7F80) == 0x7F80) b = 0x3F80;
                x[r * k + c] = b;
            }
        }
    return x;
}

/* ---- device helpers ------------------------------------------------------ */

typedef struct dev_weight {
    nvfp4_cuda_operand op;
    uint8_t *codes, *scales;
    float *pts;
} dev_weight;

static void upload_weight(dev_weight *d, const nvfp4_tensor *w)
{
    size_t cb = (size_t)(w->rows * w->cols / 2), sb = nvfp4_scales_bytes(w->rows, w->cols, NVFP4_SCALES_TILED);
    CUDA_OK(cudaMalloc((void **)&d->codes, cb));
    CUDA_OK(cudaMalloc((void **)&d->scales, sb));
    CUDA_OK(cudaMalloc((void **)&d->pts, sizeof(float)));
    CUDA_OK(cudaMemcpy(d->codes, w->codes, cb, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d->scales, w->scales, sb, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d->pts, &w->per_tensor_scale, sizeof(float), cudaMemcpyHostToDevice));
    d->op.codes = d->codes;
    d->op.scales = d->scales;
    d->op.per_tensor_scale = d->pts;
    d->op.rows = w->rows;
    d->op.cols = w->cols;
}

static void free_weight(dev_weight *d)
{
    cudaFree(d->codes);
    cudaFree(d->scales);
    cudaFree(d->pts);
}

/* One GPU linear; host copies of everything it produced. */
typedef struct gpu_linear {
    float *raw;
    uint16_t *out;
    uint8_t *codes, *scales;
    float pts;
} gpu_linear;

static void free_gpu_linear(gpu_linear *g)
{
    free(g->raw);
    free(g->out);
    free(g->codes);
    free(g->scales);
}

static void run_gpu_linear(gpu_linear *g, const uint16_t *d_x, int64_t m, int64_t k,
                           const dev_weight *w, const float *d_input_scale, nvfp4_variant v,
                           const float *d_bias)
{
    int64_t n = w->op.rows, kp = w->op.cols, prows = (m + 15) / 16 * 16;
    size_t cb = (size_t)(prows * kp / 2), sb = nvfp4_scales_bytes(prows, kp, NVFP4_SCALES_TILED);
    size_t ws = nvfp4_linear_cuda_workspace(m, n, k);
    CHECK(ws > 0);
    void *d_ws;
    float *d_raw, *d_pts;
    uint16_t *d_out;
    uint8_t *d_codes, *d_scales;
    CUDA_OK(cudaMalloc(&d_ws, ws));
    CUDA_OK(cudaMalloc((void **)&d_raw, (size_t)(m * n) * 4));
    CUDA_OK(cudaMalloc((void **)&d_out, (size_t)(m * n) * 2));
    CUDA_OK(cudaMalloc((void **)&d_codes, cb));
    CUDA_OK(cudaMalloc((void **)&d_scales, sb));
    CUDA_OK(cudaMalloc((void **)&d_pts, 4));
    /* Poison: everything asked for must be written. */
    CUDA_OK(cudaMemset(d_ws, 0xA5, ws));
    CUDA_OK(cudaMemset(d_raw, 0xA5, (size_t)(m * n) * 4));
    CUDA_OK(cudaMemset(d_out, 0xA5, (size_t)(m * n) * 2));
    CUDA_OK(cudaMemset(d_codes, 0xA5, cb));
    CUDA_OK(cudaMemset(d_scales, 0xA5, sb));
    CUDA_OK(cudaMemset(d_pts, 0xA5, 4));
    nvfp4_cuda_linear_args a = {
        .x = d_x, .m = m, .k = k, .weight = &w->op, .input_scale = d_input_scale, .variant = v,
        .bias = d_bias, .raw = d_raw, .out = d_out, .x_codes = d_codes, .x_scales = d_scales,
        .x_scale = d_pts, .stream = NULL, .workspace = d_ws, .workspace_bytes = ws,
    };
    nvfp4_status st = nvfp4_linear_cuda(&a);
    CHECKF(st == NVFP4_OK, "nvfp4_linear_cuda: %s", nvfp4_last_error());
    CUDA_OK(cudaDeviceSynchronize());
    stat_runs++;
    g->raw = malloc((size_t)(m * n) * 4);
    g->out = malloc((size_t)(m * n) * 2);
    /* Without the debug outputs (the quantized activations stay in the
     * workspace), into fresh poisoned outputs: the same bits. */
    {
        float *d_raw2;
        uint16_t *d_out2;
        CUDA_OK(cudaMalloc((void **)&d_raw2, (size_t)(m * n) * 4));
        CUDA_OK(cudaMalloc((void **)&d_out2, (size_t)(m * n) * 2));
        CUDA_OK(cudaMemset(d_raw2, 0x5A, (size_t)(m * n) * 4));
        CUDA_OK(cudaMemset(d_out2, 0x5A, (size_t)(m * n) * 2));
        CUDA_OK(cudaMemset(d_ws, 0x5A, ws));
        nvfp4_cuda_linear_args b = a;
        b.x_codes = NULL, b.x_scales = NULL, b.x_scale = NULL, b.raw = d_raw2, b.out = d_out2;
        st = nvfp4_linear_cuda(&b);
        CHECKF(st == NVFP4_OK, "nvfp4_linear_cuda (no debug outputs): %s", nvfp4_last_error());
        CUDA_OK(cudaDeviceSynchronize());
        float *raw2 = malloc((size_t)(m * n) * 4);
        uint16_t *out2 = malloc((size_t)(m * n) * 2);
        CUDA_OK(cudaMemcpy(g->raw, d_raw, (size_t)(m * n) * 4, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(g->out, d_out, (size_t)(m * n) * 2, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(raw2, d_raw2, (size_t)(m * n) * 4, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(out2, d_out2, (size_t)(m * n) * 2, cudaMemcpyDeviceToHost));
        test_equal_bits("raw without debug outputs", raw2, g->raw, 4, m, n);
        test_equal_bits("out without debug outputs", out2, g->out, 2, m, n);
        free(raw2);
        free(out2);
        cudaFree(d_raw2);
        cudaFree(d_out2);
    }
    g->codes = malloc(cb);
    g->scales = malloc(sb);
    CUDA_OK(cudaMemcpy(g->raw, d_raw, (size_t)(m * n) * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(g->out, d_out, (size_t)(m * n) * 2, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(g->codes, d_codes, cb, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(g->scales, d_scales, sb, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&g->pts, d_pts, 4, cudaMemcpyDeviceToHost));
    cudaFree(d_ws);
    cudaFree(d_raw);
    cudaFree(d_out);
    cudaFree(d_codes);
    cudaFree(d_scales);
    cudaFree(d_pts);
}

/* ---- checks -------------------------------------------------------------- */

/* The in-kernel A producer (forced on) against the quantizer kernel + GEMM
 * (forced off) on the same input: raw, out and the per-tensor scale of the
 * producer with and without the debug copies, and those copies (codes,
 * tiled scales) against the quantizer kernel's, every bit.  Inputs may hold
 * NaN and Inf. */
static void check_inkernel_vs_kernels(const char *label, const uint16_t *x, int64_t m, int64_t k,
                                      const dev_weight *w, const float *input_scale, nvfp4_variant v,
                                      const float *d_bias)
{
    char what[240];
    const int64_t n = w->op.rows, kp = w->op.cols, prows = (m + 15) / 16 * 16;
    snprintf(what, sizeof what, "%s M=%lld N=%lld K=%lld %s %s", label, (long long)m, (long long)n,
             (long long)kp, v == NVFP4_VARIANT_CUDA ? "cuda" : "eager", input_scale ? "static" : "dynamic");
    nvfp4_sm90_force_inkernel_a(1);
    CHECKF(nvfp4_sm90_linear_inkernel(m, n, kp, 0), "%s: the in-kernel producer is not planned", what);
    nvfp4_sm90_force_inkernel_a(-1);
    const size_t ws = nvfp4_linear_cuda_workspace(m, n, k), nr = (size_t)(m * n);
    const size_t cb = (size_t)(prows * kp / 2), sb = nvfp4_scales_bytes(prows, kp, NVFP4_SCALES_TILED);
    uint16_t *d_x;
    float *d_in = NULL;
    void *d_ws;
    CUDA_OK(cudaMalloc((void **)&d_x, (size_t)(m * k) * 2));
    CUDA_OK(cudaMemcpy(d_x, x, (size_t)(m * k) * 2, cudaMemcpyHostToDevice));
    if (input_scale) {
        CUDA_OK(cudaMalloc((void **)&d_in, 4));
        CUDA_OK(cudaMemcpy(d_in, input_scale, 4, cudaMemcpyHostToDevice));
    }
    CUDA_OK(cudaMalloc(&d_ws, ws));
    /* run 0: two kernels with the copies; 1: in-kernel with them; 2: in-kernel without */
    float *raw[3], *d_raw[3], pts[3], *d_pts[3];
    uint16_t *out[3], *d_out[3];
    uint8_t *codes[2], *scales[2], *d_codes[2], *d_scales[2];
    for (int run = 0; run < 3; run++) {
        const int poison = 0xA5 - 0x3B * run; /* a different poison per run */
        CUDA_OK(cudaMalloc((void **)&d_raw[run], nr * 4));
        CUDA_OK(cudaMalloc((void **)&d_out[run], nr * 2));
        CUDA_OK(cudaMalloc((void **)&d_pts[run], 4));
        CUDA_OK(cudaMemset(d_raw[run], poison, nr * 4));
        CUDA_OK(cudaMemset(d_out[run], poison, nr * 2));
        CUDA_OK(cudaMemset(d_pts[run], poison, 4));
        CUDA_OK(cudaMemset(d_ws, 0x5A, ws));
        nvfp4_cuda_linear_args a = {
            .x = d_x, .m = m, .k = k, .weight = &w->op, .input_scale = d_in, .variant = v, .bias = d_bias,
            .raw = d_raw[run], .out = d_out[run], .x_scale = d_pts[run], .workspace = d_ws,
            .workspace_bytes = ws,
        };
        if (run < 2) {
            CUDA_OK(cudaMalloc((void **)&d_codes[run], cb));
            CUDA_OK(cudaMalloc((void **)&d_scales[run], sb));
            CUDA_OK(cudaMemset(d_codes[run], poison, cb));
            CUDA_OK(cudaMemset(d_scales[run], poison, sb));
            a.x_codes = d_codes[run], a.x_scales = d_scales[run];
        }
        nvfp4_sm90_force_inkernel_a(run > 0);
        nvfp4_status st = nvfp4_linear_cuda(&a);
        nvfp4_sm90_force_inkernel_a(-1);
        CHECKF(st == NVFP4_OK, "%s: nvfp4_linear_cuda (run %d): %s", what, run, nvfp4_last_error());
        CUDA_OK(cudaDeviceSynchronize());
        stat_runs++;
        raw[run] = malloc(nr * 4);
        out[run] = malloc(nr * 2);
        CUDA_OK(cudaMemcpy(raw[run], d_raw[run], nr * 4, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(out[run], d_out[run], nr * 2, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(&pts[run], d_pts[run], 4, cudaMemcpyDeviceToHost));
        if (run < 2) {
            codes[run] = malloc(cb);
            scales[run] = malloc(sb);
            CUDA_OK(cudaMemcpy(codes[run], d_codes[run], cb, cudaMemcpyDeviceToHost));
            CUDA_OK(cudaMemcpy(scales[run], d_scales[run], sb, cudaMemcpyDeviceToHost));
        }
    }
    char w2[360];
    for (int run = 1; run < 3; run++) {
        const char *how = run == 1 ? "in-kernel producer with copies" : "in-kernel producer";
        snprintf(w2, sizeof w2, "%s: raw, %s vs quantizer kernel", what, how);
        test_equal_bits(w2, raw[run], raw[0], 4, m, n);
        snprintf(w2, sizeof w2, "%s: out, %s vs quantizer kernel", what, how);
        test_equal_bits(w2, out[run], out[0], 2, m, n);
        snprintf(w2, sizeof w2, "%s: x_scale, %s vs quantizer kernel", what, how);
        test_equal_bits(w2, &pts[run], &pts[0], 4, 1, 1);
    }
    snprintf(w2, sizeof w2, "%s: x_codes, in-kernel producer vs quantizer kernel", what);
    test_equal_bits(w2, codes[1], codes[0], 1, prows, kp / 2);
    snprintf(w2, sizeof w2, "%s: x_scales, in-kernel producer vs quantizer kernel", what);
    test_equal_bits(w2, scales[1], scales[0], 1, 1, (int64_t)sb);
    for (int run = 0; run < 3; run++) {
        free(raw[run]), free(out[run]);
        cudaFree(d_raw[run]), cudaFree(d_out[run]), cudaFree(d_pts[run]);
        if (run < 2) free(codes[run]), free(scales[run]), cudaFree(d_codes[run]), cudaFree(d_scales[run]);
    }
    cudaFree(d_ws), cudaFree(d_x), cudaFree(d_in);
}

/* Rows to check: both edges, row-tile edges, random others. */
static int64_t sample_rows(int64_t m, int64_t *idx, int64_t max, uint64_t seed)
{
    int64_t cnt = 0;
    int64_t fixed[] = {0, m - 1, 63, 64, 127, 128, m / 2};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0] && cnt < max; i++) {
        int64_t r = fixed[i], dup = 0;
        if (r < 0 || r >= m) continue;
        for (int64_t j = 0; j < cnt; j++) dup |= idx[j] == r;
        if (!dup) idx[cnt++] = r;
    }
    uint64_t s = seed + 77;
    while (cnt < max && cnt < m) {
        int64_t r = (int64_t)(test_rand(&s) % (uint64_t)m), dup = 0;
        for (int64_t j = 0; j < cnt; j++) dup |= idx[j] == r;
        if (!dup) idx[cnt++] = r;
    }
    return cnt;
}

/* GPU linear vs CPU linear on sampled rows, and the quantized activations
 * vs nvfp4_quantize on all rows. */
static void check_linear(const char *label, const uint16_t *x, int64_t m, int64_t k,
                         const nvfp4_tensor *w, const dev_weight *dw, const float *input_scale,
                         nvfp4_variant v, const float *bias, const float *d_bias,
                         int64_t max_rows, int all_rows_literal)
{
    char name[200], what[260];
    int64_t n = w->rows, kp = w->cols, prows = (m + 15) / 16 * 16;
    snprintf(name, sizeof name, "%s M=%lld N=%lld K=%lld %s %s%s", label, (long long)m,
             (long long)n, (long long)kp, v == NVFP4_VARIANT_CUDA ? "cuda" : "eager",
             input_scale ? "static" : "dynamic", bias ? " bias" : "");
    double t0 = now_s();
    uint16_t *d_x;
    float *d_in = NULL;
    CUDA_OK(cudaMalloc((void **)&d_x, (size_t)(m * k) * 2));
    CUDA_OK(cudaMemcpy(d_x, x, (size_t)(m * k) * 2, cudaMemcpyHostToDevice));
    if (input_scale) {
        CUDA_OK(cudaMalloc((void **)&d_in, 4));
        CUDA_OK(cudaMemcpy(d_in, input_scale, 4, cudaMemcpyHostToDevice));
    }
    gpu_linear g;
    run_gpu_linear(&g, d_x, m, k, dw, d_in, v, d_bias);
    double t_gpu = now_s() - t0;

    /* quantized activations, whole input */
    nvfp4_tensor q = {0};
    nvfp4_status st = nvfp4_quantize(&q, x, NVFP4_DTYPE_BF16, m, k, input_scale, v, 0);
    CHECKF(st == NVFP4_OK, "%s: nvfp4_quantize: %s", name, nvfp4_last_error());
    snprintf(what, sizeof what, "%s: x_codes", name);
    test_equal_bits(what, g.codes, q.codes, 1, prows, kp / 2);
    snprintf(what, sizeof what, "%s: x_scales", name);
    test_equal_bits(what, g.scales, q.scales, 1, 1,
                    (int64_t)nvfp4_scales_bytes(prows, kp, NVFP4_SCALES_TILED));
    snprintf(what, sizeof what, "%s: x_scale", name);
    test_equal_bits(what, &g.pts, &q.per_tensor_scale, 4, 1, 1);
    float pts_all = q.per_tensor_scale;
    nvfp4_tensor_free(&q);

    /* CPU linear: all rows literally, or sampled rows with the whole
     * input's per-tensor scale */
    int64_t *idx = malloc((size_t)m * sizeof *idx);
    int64_t cnt;
    const uint16_t *xs;
    uint16_t *xsub = NULL;
    const float *cpu_scale;
    if (all_rows_literal) {
        cnt = m;
        for (int64_t i = 0; i < m; i++) idx[i] = i;
        xs = x;
        cpu_scale = input_scale;
    } else {
        cnt = sample_rows(m, idx, max_rows, (uint64_t)(m * 31 + n));
        xsub = malloc((size_t)(cnt * k) * 2);
        for (int64_t i = 0; i < cnt; i++) memcpy(xsub + i * k, x + idx[i] * k, (size_t)k * 2);
        xs = xsub;
        cpu_scale = input_scale ? input_scale : &pts_all;
    }
    float *rraw = malloc((size_t)(cnt * n) * 4), *graw = malloc((size_t)(cnt * n) * 4);
    uint16_t *rout = malloc((size_t)(cnt * n) * 2), *gout = malloc((size_t)(cnt * n) * 2);
    double t1 = now_s();
    nvfp4_linear_args la = {
        .x = xs, .x_dtype = NVFP4_DTYPE_BF16, .m = cnt, .k = k, .weight = w,
        .input_scale = cpu_scale, .variant = v, .bias = bias, .raw = rraw, .out = rout,
        .model = NVFP4_MODEL_SM90, .nthreads = 0,
    };
    st = nvfp4_linear_cpu(&la);
    double t_cpu = now_s() - t1;
    stat_cpu_s += t_cpu;
    CHECKF(st == NVFP4_OK, "%s: nvfp4_linear_cpu: %s", name, nvfp4_last_error());
    for (int64_t i = 0; i < cnt; i++) {
        memcpy(graw + i * n, g.raw + idx[i] * n, (size_t)n * 4);
        memcpy(gout + i * n, g.out + idx[i] * n, (size_t)n * 2);
    }
    snprintf(what, sizeof what, "%s: raw (row = sample index)", name);
    test_equal_bits(what, graw, rraw, 4, cnt, n);
    snprintf(what, sizeof what, "%s: out (row = sample index)", name);
    test_equal_bits(what, gout, rout, 2, cnt, n);
    stat_rows_checked += cnt;
    stat_outputs_checked += cnt * n;
    printf("  %-62s rows %4lld/%-4lld gpu+copy %.2fs cpu %.2fs\n", name, (long long)cnt,
           (long long)m, t_gpu, t_cpu);
    fflush(stdout);
    free(idx);
    free(xsub);
    free(rraw);
    free(graw);
    free(rout);
    free(gout);
    free_gpu_linear(&g);
    cudaFree(d_x);
    cudaFree(d_in);
}

/* The producer's FP16 operands against the GEMM's workspace after its own
 * pre-pass dequantized nvfp4_quantize_cuda()'s codes of the same input. */
static void check_workspace_format(const char *label, const uint16_t *x, int64_t m, int64_t k,
                                   const dev_weight *dw, const float *input_scale, nvfp4_variant v)
{
    char what[200];
    int64_t n = dw->op.rows, kp = (k + 15) / 16 * 16, prows = (m + 15) / 16 * 16;
    size_t cb = (size_t)(prows * kp / 2), sb = nvfp4_scales_bytes(prows, kp, NVFP4_SCALES_TILED);
    size_t gws = nvfp4_cuda_gemm_workspace(m, n, kp), ab = (size_t)(m * kp) * 2;
    uint16_t *d_x, *d_act;
    uint8_t *d_codes, *d_scales;
    float *d_f, *d_raw;
    void *d_gws;
    CUDA_OK(cudaMalloc((void **)&d_x, (size_t)(m * k) * 2));
    CUDA_OK(cudaMalloc((void **)&d_act, ab));
    CUDA_OK(cudaMalloc((void **)&d_codes, cb));
    CUDA_OK(cudaMalloc((void **)&d_scales, sb));
    CUDA_OK(cudaMalloc((void **)&d_f, 4 * sizeof(float)));
    CUDA_OK(cudaMalloc((void **)&d_raw, (size_t)(m * n) * 4));
    CUDA_OK(cudaMalloc(&d_gws, gws));
    CUDA_OK(cudaMemcpy(d_x, x, (size_t)(m * k) * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(d_act, 0xA5, ab));
    CUDA_OK(cudaMemset(d_gws, 0x5A, gws));
    if (input_scale) CUDA_OK(cudaMemcpy(d_f, input_scale, 4, cudaMemcpyHostToDevice));
    const float *d_in = input_scale ? d_f : NULL;

    nvfp4_cuda_quantize_args qa = {.x = d_x, .m = m, .k = k, .input_scale = d_in, .variant = v,
                                   .codes = d_codes, .scales = d_scales,
                                   .per_tensor_scale = d_f + 1};
    nvfp4_status st = nvfp4_quantize_cuda(&qa);
    CHECKF(st == NVFP4_OK, "nvfp4_quantize_cuda: %s", nvfp4_last_error());
    nvfp4_cuda_gemm_args ga = {.a = {d_codes, d_scales, d_f + 1, m, kp}, .b = dw->op,
                               .raw = d_raw, .workspace = d_gws, .workspace_bytes = gws};
    st = nvfp4_gemm_cuda(&ga);
    CHECKF(st == NVFP4_OK, "nvfp4_gemm_cuda: %s", nvfp4_last_error());
    st = nvfp4_sm90_produce_operands(d_x, m, k, d_in, d_f + 2, v, d_act, kp, NULL, NULL);
    CHECKF(st == NVFP4_OK, "nvfp4_sm90_produce_operands: %s", nvfp4_last_error());
    CUDA_OK(cudaDeviceSynchronize());
    uint16_t *prod = malloc(ab), *gemm = malloc(ab);
    CUDA_OK(cudaMemcpy(prod, d_act, ab, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(gemm, d_gws, ab, cudaMemcpyDeviceToHost));
    snprintf(what, sizeof what, "%s M=%lld K=%lld %s %s: producer == GEMM pre-pass workspace",
             label, (long long)m, (long long)kp, v == NVFP4_VARIANT_CUDA ? "cuda" : "eager",
             input_scale ? "static" : "dynamic");
    test_equal_bits(what, prod, gemm, 2, m, kp);
    free(prod);
    free(gemm);
    cudaFree(d_x);
    cudaFree(d_act);
    cudaFree(d_codes);
    cudaFree(d_scales);
    cudaFree(d_f);
    cudaFree(d_raw);
    cudaFree(d_gws);
}

/* Device time per call (CUDA events around `reps` back-to-back calls). */
typedef enum timed_op {
    OP_GEMM, OP_QUANT_STATIC, OP_QUANT_DYNAMIC, OP_LINEAR_STATIC, OP_LINEAR_DYNAMIC,
    OP_PRODUCER /* the fused linear's A producer alone (no raw/out: the GEMM is skipped) */
} timed_op;

static float time_op(timed_op op, const nvfp4_cuda_linear_args *la, const nvfp4_cuda_quantize_args *qa,
                     const nvfp4_cuda_gemm_args *ga, int reps)
{
    cudaEvent_t e0, e1;
    CUDA_OK(cudaEventCreate(&e0));
    CUDA_OK(cudaEventCreate(&e1));
    float ms = 0;
    for (int pass = 0; pass < 2; pass++) { /* warm-up, then measured */
        int n = pass ? reps : 3;
        CUDA_OK(cudaEventRecord(e0, NULL));
        for (int i = 0; i < n; i++) {
            nvfp4_status st = NVFP4_OK;
            nvfp4_cuda_linear_args l = *la;
            nvfp4_cuda_quantize_args q = *qa;
            switch (op) {
            case OP_GEMM: st = nvfp4_gemm_cuda(ga); break;
            case OP_QUANT_DYNAMIC: q.input_scale = NULL; /* fall through */
            case OP_QUANT_STATIC: st = nvfp4_quantize_cuda(&q); break;
            case OP_LINEAR_DYNAMIC: l.input_scale = NULL; /* fall through */
            case OP_LINEAR_STATIC: st = nvfp4_linear_cuda(&l); break;
            case OP_PRODUCER: l.raw = NULL, l.out = NULL; st = nvfp4_linear_cuda(&l); break;
            }
            if (st != NVFP4_OK) {
                CHECKF(st == NVFP4_OK, "timed call %d: %s", (int)op, nvfp4_last_error());
                break;
            }
        }
        CUDA_OK(cudaEventRecord(e1, NULL));
        CUDA_OK(cudaEventSynchronize(e1));
        CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
        ms /= (float)n;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return ms * 1000.0f; /* microseconds */
}

static void time_linear(const char *name, int64_t n, int64_t k, int64_t m)
{
    nvfp4_tensor w;
    random_weight(&w, n, k, 77);
    dev_weight dw;
    upload_weight(&dw, &w);
    uint16_t *x = random_bf16(m, k, 5);
    int64_t prows = (m + 15) / 16 * 16;
    size_t cb = (size_t)(prows * k / 2), sb = nvfp4_scales_bytes(prows, k, NVFP4_SCALES_TILED);
    size_t lws = nvfp4_linear_cuda_workspace(m, n, k), gws = nvfp4_cuda_gemm_workspace(m, n, k);
    uint16_t *d_x, *d_out;
    uint8_t *d_codes, *d_scales;
    float *d_f;
    void *d_lws, *d_gws;
    CUDA_OK(cudaMalloc((void **)&d_x, (size_t)(m * k) * 2));
    CUDA_OK(cudaMalloc((void **)&d_out, (size_t)(m * n) * 2));
    CUDA_OK(cudaMalloc((void **)&d_codes, cb));
    CUDA_OK(cudaMalloc((void **)&d_scales, sb));
    CUDA_OK(cudaMalloc((void **)&d_f, 2 * sizeof(float)));
    CUDA_OK(cudaMalloc(&d_lws, lws));
    CUDA_OK(cudaMalloc(&d_gws, gws));
    CUDA_OK(cudaMemcpy(d_x, x, (size_t)(m * k) * 2, cudaMemcpyHostToDevice));
    const float in_scale = 0.0157f;
    CUDA_OK(cudaMemcpy(d_f, &in_scale, 4, cudaMemcpyHostToDevice));
    nvfp4_cuda_quantize_args qa = {.x = d_x, .m = m, .k = k, .input_scale = d_f,
                                   .variant = NVFP4_VARIANT_EAGER, .codes = d_codes,
                                   .scales = d_scales, .per_tensor_scale = d_f + 1};
    CHECK(nvfp4_quantize_cuda(&qa) == NVFP4_OK);
    nvfp4_cuda_gemm_args ga = {.a = {d_codes, d_scales, d_f + 1, m, k}, .b = dw.op, .out = d_out,
                               .workspace = d_gws, .workspace_bytes = gws};
    nvfp4_cuda_linear_args la = {.x = d_x, .m = m, .k = k, .weight = &dw.op, .input_scale = d_f,
                                 .variant = NVFP4_VARIANT_EAGER, .out = d_out,
                                 .workspace = d_lws, .workspace_bytes = lws};
    float t_gemm = time_op(OP_GEMM, &la, &qa, &ga, 20);
    float t_qs = time_op(OP_QUANT_STATIC, &la, &qa, &ga, 20);
    float t_qd = time_op(OP_QUANT_DYNAMIC, &la, &qa, &ga, 20);
    float t_ls = time_op(OP_LINEAR_STATIC, &la, &qa, &ga, 20);
    float t_ld = time_op(OP_LINEAR_DYNAMIC, &la, &qa, &ga, 20);
    float t_p = time_op(OP_PRODUCER, &la, &qa, &ga, 20);
    printf("  timing %-9s M=%-5lld N=%-6lld K=%-6lld gemm(NVFP4 A) %7.1f us | quantize static %6.1f "
           "dynamic %6.1f us | linear static %7.1f dynamic %7.1f us | producer alone %6.1f us\n",
           name, (long long)m, (long long)n, (long long)k, t_gemm, t_qs, t_qd, t_ls, t_ld, t_p);
    fflush(stdout);
    free(x);
    cudaFree(d_x);
    cudaFree(d_out);
    cudaFree(d_codes);
    cudaFree(d_scales);
    cudaFree(d_f);
    cudaFree(d_lws);
    cudaFree(d_gws);
    free_weight(&dw);
    nvfp4_tensor_free(&w);
}

typedef struct linear_shape {
    const char *name;
    int64_t n, k;
    int64_t ms[3];
} linear_shape;

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    if (!nvfp4_cuda_available()) {
        fprintf(stderr, "test_linear_cuda: no sm_90 device\n");
        return 1;
    }
    const float static_scale = 0.0157f; /* a calibrated input_scale's size */
    double t_start = now_s();

    TEST("small linear, literal CPU linear on every row")
    {
        nvfp4_tensor w;
        random_weight(&w, 256, 512, 3);
        dev_weight dw;
        upload_weight(&dw, &w);
        float bias[256], *d_bias;
        uint64_t s = 99;
        for (int i = 0; i < 256; i++) bias[i] = nvfp4_bf16_to_f32(nvfp4_bf16_from_f32((float)test_normal(&s)));
        CUDA_OK(cudaMalloc((void **)&d_bias, sizeof bias));
        CUDA_OK(cudaMemcpy(d_bias, bias, sizeof bias, cudaMemcpyHostToDevice));
        uint16_t *x = random_bf16(50, 500, 1);
        uint16_t *xa = adversarial_bf16(45, 500, 2, 1);
        for (int vi = 0; vi < 2; vi++)
            for (int si = 0; si < 2; si++) {
                nvfp4_variant v = vi ? NVFP4_VARIANT_CUDA : NVFP4_VARIANT_EAGER;
                const float *sc = si ? &static_scale : NULL;
                check_linear("small", x, 50, 500, &w, &dw, sc, v, vi ? NULL : bias,
                             vi ? NULL : d_bias, 0, 1);
                check_linear("small adversarial", xa, 45, 500, &w, &dw, sc, v, bias, d_bias, 0, 1);
                check_workspace_format("small", x, 50, 500, &dw, sc, v);
                check_workspace_format("small adversarial", xa, 45, 500, &dw, sc, v);
            }
        uint16_t *xn = adversarial_bf16(40, 512, 4, 0); /* with NaN and Inf */
        for (int vi = 0; vi < 2; vi++)
            for (int si = 0; si < 2; si++)
                check_workspace_format("small NaN/Inf", xn, 40, 512, &dw, si ? &static_scale : NULL,
                                       vi ? NVFP4_VARIANT_CUDA : NVFP4_VARIANT_EAGER);
        free(x);
        free(xa);
        free(xn);
        cudaFree(d_bias);
        free_weight(&dw);
        nvfp4_tensor_free(&w);
    }

    TEST("the four linears")
    {
        static const linear_shape shapes[4] = {
            {"qkv", 21504, 5376, {128, 1, 2048}},
            {"attn_out", 5376, 7168, {128, 37, 0}},
            {"fc1", 28672, 5376, {128, 16, 0}},
            {"fc2", 5376, 14336, {128, 300, 0}},
        };
        for (int li = 0; li < 4; li++) {
            const linear_shape *L = &shapes[li];
            nvfp4_tensor w;
            random_weight(&w, L->n, L->k, (uint64_t)(10 + li));
            dev_weight dw;
            upload_weight(&dw, &w);
            float *bias = malloc((size_t)L->n * 4), *d_bias;
            uint64_t s = 1000 + (uint64_t)li;
            for (int64_t i = 0; i < L->n; i++)
                bias[i] = nvfp4_bf16_to_f32(nvfp4_bf16_from_f32((float)(0.1 * test_normal(&s))));
            CUDA_OK(cudaMalloc((void **)&d_bias, (size_t)L->n * 4));
            CUDA_OK(cudaMemcpy(d_bias, bias, (size_t)L->n * 4, cudaMemcpyHostToDevice));
            for (int mi = 0; mi < 3 && L->ms[mi]; mi++) {
                int64_t m = L->ms[mi];
                if (quick && m != 128) continue;
                uint16_t *x = random_bf16(m, L->k, (uint64_t)(100 * li + mi));
                for (int vi = 0; vi < 2; vi++)
                    for (int si = 0; si < 2; si++) {
                        nvfp4_variant v = vi ? NVFP4_VARIANT_CUDA : NVFP4_VARIANT_EAGER;
                        int with_bias = (vi + si) % 2 == 0;
                        /* M <= 128: every row against the literal CPU linear
                         * (dynamic scale included); larger M: sampled rows */
                        check_linear(L->name, x, m, L->k, &w, &dw, si ? &static_scale : NULL, v,
                                     with_bias ? bias : NULL, with_bias ? d_bias : NULL,
                                     quick ? 4 : 48, !quick && m <= 128);
                    }
                if (m == 128) check_workspace_format(L->name, x, m, L->k, &dw, NULL, NVFP4_VARIANT_EAGER);
                free(x);
            }
            free(bias);
            cudaFree(d_bias);
            free_weight(&dw);
            nvfp4_tensor_free(&w);
        }
    }

    TEST("in-kernel A producer (M <= 8): the CPU linear, and the quantizer kernel + GEMM")
    {
        /* (N, K of the weight, k of x, whether the planned kernel has an
         * in-kernel twin): REGR with R = 4 (n256, n272), 3 (attn-out, n5376)
         * and 2 (n8192) and REGW (FC1) have one; REGM (QKV, two chains per
         * MMA warp) has none (kernels.def), so QKV checks the planned path
         * only.  K tails of 2 and 12 blocks; x's k not a multiple of 16
         * (TMA's zeros pad the last block). */
        static const struct { const char *name; int64_t n, kp, k; int twin; } S[] = {
            {"n256 k504", 256, 512, 504, 1},  {"n272 k800", 272, 800, 800, 1},
            {"attn_out", 5376, 7168, 7168, 1}, {"qkv", 21504, 5376, 5376, 0},
            {"fc1", 28672, 5376, 5376, 1},    {"n5376 k448", 5376, 448, 440, 1},
            {"n8192 k1056", 8192, 1056, 1048, 1},
        };
        static const int64_t ms[] = {1, 2, 5, 8};
        for (size_t si_ = 0; si_ < sizeof S / sizeof S[0]; si_++) {
            nvfp4_tensor w;
            random_weight(&w, S[si_].n, S[si_].kp, 40 + (uint64_t)si_);
            dev_weight dw;
            upload_weight(&dw, &w);
            float *bias = malloc((size_t)S[si_].n * 4), *d_bias;
            uint64_t s = 77 + (uint64_t)si_;
            for (int64_t i = 0; i < S[si_].n; i++)
                bias[i] = nvfp4_bf16_to_f32(nvfp4_bf16_from_f32((float)(0.1 * test_normal(&s))));
            CUDA_OK(cudaMalloc((void **)&d_bias, (size_t)S[si_].n * 4));
            CUDA_OK(cudaMemcpy(d_bias, bias, (size_t)S[si_].n * 4, cudaMemcpyHostToDevice));
            const int big = S[si_].n > 1024;
            for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
                const int64_t m = ms[mi], k = S[si_].k;
                if ((quick || big) && m != 1 && m != 8) continue;
                uint16_t *xr = random_bf16(m, k, 500 + 10 * si_ + mi);
                uint16_t *xa = adversarial_bf16(m, k, 600 + 10 * si_ + mi, 1);
                uint16_t *xn = adversarial_bf16(m, k, 700 + 10 * si_ + mi, 0); /* NaN and Inf */
                for (int vi = 0; vi < 2; vi++)
                    for (int sc = 0; sc < 2; sc++) {
                        const nvfp4_variant v = vi ? NVFP4_VARIANT_CUDA : NVFP4_VARIANT_EAGER;
                        const float *in = sc ? &static_scale : NULL;
                        const int wb = (vi + sc + (int)mi) % 2 == 0;
                        /* the planned path against the CPU linear; then the
                         * in-kernel producer (forced) against the planned
                         * two-kernel path, NaN and Inf inputs included */
                        check_linear(S[si_].name, xr, m, k, &w, &dw, in, v, wb ? bias : NULL,
                                     wb ? d_bias : NULL, 8, 1);
                        check_linear(S[si_].name, xa, m, k, &w, &dw, in, v, wb ? NULL : bias,
                                     wb ? NULL : d_bias, 8, 1);
                        if (!S[si_].twin) {
                            nvfp4_sm90_force_inkernel_a(1);
                            CHECKF(!nvfp4_sm90_linear_inkernel(m, S[si_].n, S[si_].kp, 0),
                                   "%s M=%lld: an in-kernel twin is planned where none is built",
                                   S[si_].name, (long long)m);
                            nvfp4_sm90_force_inkernel_a(-1);
                            continue;
                        }
                        check_inkernel_vs_kernels(S[si_].name, xa, m, k, &dw, in, v, wb ? d_bias : NULL);
                        check_inkernel_vs_kernels(S[si_].name, xn, m, k, &dw, in, v, wb ? NULL : d_bias);
                    }
                free(xr), free(xa), free(xn);
            }
            free(bias);
            cudaFree(d_bias);
            free_weight(&dw);
            nvfp4_tensor_free(&w);
        }
    }

    TEST("each kernel reads the scale words of the one before only after waiting for it")
    {
        /* The quantizer's thread 0 stores the per-tensor scale, and each
         * amax-pass CTA its word, ~100 us late (the hook), into a poisoned
         * workspace: a kernel that read them before its griddepcontrol.wait
         * gets the poison (a race that once made REGR read the previous
         * call's scale).  Every kernel kind the planner takes after
         * the quantizer: REGR (N = 5376, M = 1 and 16), REGM (QKV, M = 1),
         * REGW (FC1, M = 16), the wgmma tiles (M = 32, 128); and at M = 1
         * the in-kernel A producer after the amax pass. */
        static const struct { const char *name; int64_t n, kp, k, m; } D[] = {
            {"n5376 k448", 5376, 448, 440, 1}, {"n5376 k448", 5376, 448, 440, 16}, {"qkv", 21504, 5376, 5376, 1},
            {"fc1", 28672, 5376, 5376, 16},    {"attn_out", 5376, 7168, 7168, 32}, {"attn_out", 5376, 7168, 7168, 128},
        };
        CHECKF(nvfp4_q_delay_stores(200000) == 0, "nvfp4_q_delay_stores failed");
        for (size_t i = 0; i < sizeof D / sizeof D[0]; i++) {
            if (quick && i % 2) continue;
            nvfp4_tensor w;
            random_weight(&w, D[i].n, D[i].kp, 90 + (uint64_t)i);
            dev_weight dw;
            upload_weight(&dw, &w);
            uint16_t *x = random_bf16(D[i].m, D[i].k, 910 + (uint64_t)i);
            for (int ik = 0; ik < 2; ik++) {
                nvfp4_sm90_force_inkernel_a(ik); /* 1: where the plan has a twin (the M = 1 entries) */
                if (ik && !nvfp4_sm90_linear_inkernel(D[i].m, D[i].n, D[i].kp, 0)) continue;
                char label[64];
                snprintf(label, sizeof label, "late stores%s %s", ik ? " in-kernel" : "", D[i].name);
                for (int sc = 0; sc < 2; sc++)
                    check_linear(label, x, D[i].m, D[i].k, &w, &dw, sc ? &static_scale : NULL,
                                 i % 2 ? NVFP4_VARIANT_CUDA : NVFP4_VARIANT_EAGER, NULL, NULL, D[i].m, 1);
            }
            nvfp4_sm90_force_inkernel_a(-1);
            free(x);
            free_weight(&dw);
            nvfp4_tensor_free(&w);
        }
        CHECKF(nvfp4_q_delay_stores(0) == 0, "nvfp4_q_delay_stores(0) failed");
    }

    if (!quick) TEST("timing (device time per call, 20 calls after 3 warm-ups)")
    {
        static const struct { const char *name; int64_t n, k, m; } T[] = {
            {"qkv", 21504, 5376, 128}, {"attn_out", 5376, 7168, 128}, {"fc1", 28672, 5376, 128},
            {"fc2", 5376, 14336, 128}, {"qkv", 21504, 5376, 1}, {"qkv", 21504, 5376, 2048},
            {"fc2", 5376, 14336, 2048}, {"fc1", 28672, 5376, 2048}, {"fc2", 5376, 14336, 8192}};
        for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) time_linear(T[i].name, T[i].n, T[i].k, T[i].m);
    }

    TEST("host convenience: nvfp4_linear_cuda_host == nvfp4_linear_cpu, every bit")
    {
        nvfp4_tensor w, wlo;
        random_weight(&w, 272, 512, 5);
        /* the host glue converts a lo-first, row-major weight itself */
        CHECK(nvfp4_tensor_convert(&wlo, &w, NVFP4_LO_FIRST, NVFP4_SCALES_ROW_MAJOR) == NVFP4_OK);
        float bias[272];
        uint64_t s = 7;
        for (int i = 0; i < 272; i++) bias[i] = (float)test_normal(&s);
        const int64_t ms[3] = {1, 33, 130};
        for (int mi = 0; mi < 3; mi++)
            for (int vi = 0; vi < 2; vi++)
                for (int si = 0; si < 2; si++) {
                    int64_t m = ms[mi], k = 500, n = 272;
                    uint16_t *x = mi == 1 ? adversarial_bf16(m, k, 20 + (uint64_t)vi, 1)
                                          : random_bf16(m, k, 30 + (uint64_t)(mi * 4 + vi * 2 + si));
                    float *r0 = malloc((size_t)(m * n) * 4), *r1 = malloc((size_t)(m * n) * 4);
                    uint16_t *o0 = malloc((size_t)(m * n) * 2), *o1 = malloc((size_t)(m * n) * 2);
                    nvfp4_tensor q0 = {0}, q1 = {0};
                    nvfp4_linear_args la = {
                        .x = x, .x_dtype = NVFP4_DTYPE_BF16, .m = m, .k = k,
                        .weight = si ? &wlo : &w, .input_scale = si ? &static_scale : NULL,
                        .variant = vi ? NVFP4_VARIANT_CUDA : NVFP4_VARIANT_EAGER,
                        .bias = (vi + si) % 2 ? bias : NULL, .raw = r0, .out = o0,
                        .model = NVFP4_MODEL_SM90, .x_quantized = &q0};
                    CHECK(nvfp4_linear_cpu(&la) == NVFP4_OK);
                    la.raw = r1, la.out = o1, la.x_quantized = &q1;
                    nvfp4_status st = nvfp4_linear_cuda_host(&la);
                    CHECKF(st == NVFP4_OK, "nvfp4_linear_cuda_host: %s", nvfp4_last_error());
                    if (st == NVFP4_OK) {
                        char what[96];
                        snprintf(what, sizeof what, "host M=%lld variant %d %s: raw", (long long)m,
                                 vi, si ? "static" : "dynamic");
                        test_equal_bits(what, r1, r0, 4, m, n);
                        snprintf(what, sizeof what, "host M=%lld variant %d %s: out", (long long)m,
                                 vi, si ? "static" : "dynamic");
                        test_equal_bits(what, o1, o0, 2, m, n);
                        CHECK(q1.rows == q0.rows && q1.cols == q0.cols &&
                              q1.nibble_order == q0.nibble_order && q1.scale_layout == q0.scale_layout);
                        CHECK(nvfp4_f32_bits(q1.per_tensor_scale) == nvfp4_f32_bits(q0.per_tensor_scale));
                        CHECK(memcmp(q1.codes, q0.codes, (size_t)(q0.rows * q0.cols / 2)) == 0);
                        CHECK(memcmp(q1.scales, q0.scales,
                                     nvfp4_scales_bytes(q0.rows, q0.cols, q0.scale_layout)) == 0);
                    }
                    nvfp4_tensor_free(&q0);
                    nvfp4_tensor_free(&q1);
                    free(x), free(r0), free(r1), free(o0), free(o1);
                }
        /* a weight of N = 37 rows (the rows nvfp4 quantize records when it pads
         * them): the conveniences pad N to 16 for the kernels and return the
         * 37 columns, the CPU's bits */
        {
            nvfp4_tensor w37;
            random_weight(&w37, 37, 512, 9);
            int64_t m = 5, k = 500, n = 37;
            uint16_t *x = random_bf16(m, k, 41);
            float r0[5 * 37], r1[5 * 37];
            uint16_t o0[5 * 37], o1[5 * 37];
            nvfp4_tensor q0 = {0};
            nvfp4_linear_args la = {.x = x, .x_dtype = NVFP4_DTYPE_BF16, .m = m, .k = k,
                                    .weight = &w37, .bias = bias, .raw = r0, .out = o0,
                                    .model = NVFP4_MODEL_SM90, .x_quantized = &q0};
            CHECK(nvfp4_linear_cpu(&la) == NVFP4_OK);
            la.raw = r1, la.out = o1, la.x_quantized = NULL;
            nvfp4_status st = nvfp4_linear_cuda_host(&la);
            CHECKF(st == NVFP4_OK, "N = 37 linear: %s", nvfp4_last_error());
            if (st == NVFP4_OK) {
                test_equal_bits("host N=37: raw", r1, r0, 4, m, n);
                test_equal_bits("host N=37: out", o1, o0, 2, m, n);
            }
            nvfp4_tensor view = q0; /* the m real rows */
            view.rows = m;
            nvfp4_gemm_args g = {.a = &view, .b = &w37, .bias = bias, .raw = r1, .out = o1,
                                 .model = NVFP4_MODEL_SM90};
            memset(r1, 0xFF, sizeof r1), memset(o1, 0xFF, sizeof o1);
            st = nvfp4_gemm_cuda_host(&g);
            CHECKF(st == NVFP4_OK, "N = 37 gemm: %s", nvfp4_last_error());
            if (st == NVFP4_OK) {
                test_equal_bits("host gemm N=37: raw", r1, r0, 4, m, n);
                test_equal_bits("host gemm N=37: out", o1, o0, 2, m, n);
            }
            nvfp4_tensor_free(&q0);
            nvfp4_tensor_free(&w37);
            free(x);
        }
        /* what the GPU path does not take, it refuses with a message */
        uint16_t xh[32] = {0};
        float rr[272 * 2];
        nvfp4_linear_args bad = {.x = xh, .x_dtype = NVFP4_DTYPE_F16, .m = 1, .k = 16, .weight = &w,
                                 .raw = rr, .model = NVFP4_MODEL_SM90};
        CHECK(nvfp4_linear_cuda_host(&bad) == NVFP4_ERR_UNSUPPORTED);
        CHECK(strstr(nvfp4_last_error(), "BF16") != NULL);
        bad.x_dtype = NVFP4_DTYPE_BF16, bad.model = NVFP4_MODEL_EXACT;
        CHECK(nvfp4_linear_cuda_host(&bad) == NVFP4_ERR_UNSUPPORTED);
        bad.model = NVFP4_MODEL_SM90; /* k = 16 against K = 512 */
        CHECK(nvfp4_linear_cuda_host(&bad) == NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(strstr(nvfp4_last_error(), "columns") != NULL);
        nvfp4_tensor_free(&wlo);
        nvfp4_tensor_free(&w);
    }

    TEST("argument errors")
    {
        nvfp4_cuda_linear_args a = {0};
        CHECK(nvfp4_linear_cuda(NULL) == NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(nvfp4_linear_cuda(&a) == NVFP4_ERR_INVALID_ARGUMENT);
        nvfp4_cuda_operand op = {(const uint8_t *)256, (const uint8_t *)256, (const float *)256, 64, 64};
        a.x = (const uint16_t *)256, a.weight = &op, a.m = 4, a.k = 40; /* 48 != 64 */
        CHECK(nvfp4_linear_cuda(&a) == NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(strstr(nvfp4_last_error(), "columns") != NULL);
        a.k = 64;
        CHECK(nvfp4_linear_cuda(&a) == NVFP4_ERR_INVALID_ARGUMENT); /* no workspace */
        CHECK(strstr(nvfp4_last_error(), "workspace") != NULL);
        CHECK(nvfp4_linear_cuda_workspace(0, 64, 64) == 0);
        CHECK(nvfp4_linear_cuda_workspace(4, 64, 64) > 0);
    }

    printf("test_linear_cuda: %lld GPU linears, %lld rows / %lld outputs compared with the CPU "
           "linear (cpu %.1fs), total %.1fs\n",
           (long long)stat_runs, (long long)stat_rows_checked, (long long)stat_outputs_checked,
           stat_cpu_s, now_s() - t_start);
    return test_summary("linear_cuda");
}
