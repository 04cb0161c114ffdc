/* test_sm120_emu.c -- the sm120 GEMM and linear (src/cuda/sm120) against the
 * CPU sm120 backend, every output bit.
 *
 * One source, two programs (tests/gpu/gpu.mk):
 *   test_sm120_emu  built with NVFP4_SM120_EMULATE against the library whose
 *                   sm120 object is the emulated build (sm_90a, the MMA done
 *                   by shuffles and the C rule, mma.cuh): runs on an H100 /
 *                   H200 and proves everything around the tensor core;
 *   sm120_suite     the same against the library itself: runs on a GB10 /
 *                   RTX Blackwell (tests/gpu/gb10.sh), through the public
 *                   nvfp4_gemm_cuda / nvfp4_linear_cuda.
 *
 * Reference: nvfp4_gemm_cpu() / nvfp4_linear_cpu() with NVFP4_MODEL_SM120
 * (bit-identical to nvfp4_gemm_ref, tests/unit/test_gemm_cpu.c), on every
 * output.  Cases:
 *  - the four linears QKV 21504x5376, attn-out 5376x7168, FC1 28672x5376,
 *    FC2 5376x14336 at M = 1, 16, 128 (one CPU run of the 128 rows: M = 1
 *    and 16 are its first rows, so equal bits also mean batch invariance),
 *    raw and out with bias; K slices on FC2 and QKV;
 *  - odd shapes: M, N not multiples of the units, K not a multiple of 64 or
 *    32 (8-byte copies), codes not 16-byte aligned, wide and adversarial
 *    scales (zero, subnormal, 448, NaN, sign bits), -0 codes, NaN bytes in
 *    the tiled layout's padding, raw only / out only / neither;
 *  - (emulated build) the same shapes planned for other devices: one CTA
 *    (every unit on four warps), an H100's shared memory (deep rings), a
 *    small shared memory (fewer warps);
 *  - repeatability;
 *  - streaming A: BF16 activations through the linear (the quantizer
 *    kernels, then the GEMM as their programmatic dependent), eager and
 *    cuda variants, static and dynamic scale, against nvfp4_linear_cpu:
 *    raw, out, the quantized codes, scales and the scale used; NaN / Inf
 *    inputs against the GPU GEMM on the linear's own quantized activations;
 *  - argument errors.
 * Exit status 0 only when every check passed; 2 without the right GPU. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/sm120/sm120.h"
#include "nvfp4.h"
#include "sm120_data.h"
#include "seed_linears.h"
#include "testlib.h"

#define CUDA_OK(call)                                                                                \
    do {                                                                                             \
        cudaError_t e_ = (call);                                                                     \
        if (e_ != cudaSuccess) {                                                                     \
            fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_), __FILE__, __LINE__, \
                    #call);                                                                          \
            exit(2);                                                                                 \
        }                                                                                            \
    } while (0)

#ifdef NVFP4_SM120_EMULATE
#define SUITE "sm120_emu"
static nvfp4_status gemm_call(const nvfp4_cuda_gemm_args *g) { return nvfp4_sm120_gemm(g); }
static nvfp4_status linear_call(const nvfp4_cuda_linear_args *l) { return nvfp4_sm120_linear(l); }
#else
#define SUITE "sm120_suite"
static nvfp4_status gemm_call(const nvfp4_cuda_gemm_args *g) { return nvfp4_gemm_cuda(g); }
static nvfp4_status linear_call(const nvfp4_cuda_linear_args *l) { return nvfp4_linear_cuda(l); }
#endif

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/*----------------------------------- data -----------------------------------*/

static float *make_bias(int64_t n, uint64_t seed)
{
    float *b = malloc((size_t)n * sizeof *b);
    uint64_t s = seed + 99;
    for (int64_t i = 0; i < n; i++) b[i] = nvfp4_bf16_to_f32(nvfp4_bf16_from_f32((float)test_normal(&s)));
    return b;
}

/*------------------------------ device operands ------------------------------*/

typedef struct dev_op {
    uint8_t *base_codes; /* the allocation; codes may start `shift` bytes in */
    uint8_t *codes, *scales;
    float *pts;
    nvfp4_cuda_operand op;
} dev_op;

static void upload(dev_op *d, const nvfp4_tensor *t, int64_t rows, size_t shift)
{
    const size_t cb = (size_t)(t->rows * t->cols / 2), sb = nvfp4_scales_bytes(t->rows, t->cols, NVFP4_SCALES_TILED);
    CUDA_OK(cudaMalloc((void **)&d->base_codes, cb + 16));
    CUDA_OK(cudaMalloc((void **)&d->scales, sb));
    CUDA_OK(cudaMalloc((void **)&d->pts, sizeof(float)));
    d->codes = d->base_codes + shift;
    CUDA_OK(cudaMemcpy(d->codes, t->codes, cb, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d->scales, t->scales, sb, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d->pts, &t->per_tensor_scale, sizeof(float), cudaMemcpyHostToDevice));
    d->op = (nvfp4_cuda_operand){.codes = d->codes, .scales = d->scales, .per_tensor_scale = d->pts,
                                 .rows = rows, .cols = t->cols};
}

static void release(dev_op *d)
{
    cudaFree(d->base_codes);
    cudaFree(d->scales);
    cudaFree(d->pts);
}

/* The GPU GEMM of A (rows m of it) and B; raw / out on the host (poison
 * 0xFF where the kernel writes nothing).  Returns the status. */
static nvfp4_status gpu_gemm(const dev_op *a, int64_t m, const dev_op *b, const float *bias, int k_slices,
                             float *raw, uint16_t *out)
{
    const int64_t n = b->op.rows;
    float *d_raw = NULL, *d_bias = NULL;
    uint16_t *d_out = NULL;
    CUDA_OK(cudaMalloc((void **)&d_raw, (size_t)(m * n) * 4));
    CUDA_OK(cudaMalloc((void **)&d_out, (size_t)(m * n) * 2));
    CUDA_OK(cudaMemset(d_raw, 0xFF, (size_t)(m * n) * 4));
    CUDA_OK(cudaMemset(d_out, 0xFF, (size_t)(m * n) * 2));
    if (bias) {
        CUDA_OK(cudaMalloc((void **)&d_bias, (size_t)n * 4));
        CUDA_OK(cudaMemcpy(d_bias, bias, (size_t)n * 4, cudaMemcpyHostToDevice));
    }
    nvfp4_cuda_gemm_args g = {.a = a->op, .b = b->op, .bias = d_bias, .raw = raw ? d_raw : NULL,
                              .out = out ? d_out : NULL, .k_slices = k_slices};
    g.a.rows = m;
    nvfp4_status st = gemm_call(&g);
    if (st == NVFP4_OK) CUDA_OK(cudaDeviceSynchronize());
    if (raw) CUDA_OK(cudaMemcpy(raw, d_raw, (size_t)(m * n) * 4, cudaMemcpyDeviceToHost));
    if (out) CUDA_OK(cudaMemcpy(out, d_out, (size_t)(m * n) * 2, cudaMemcpyDeviceToHost));
    cudaFree(d_raw);
    cudaFree(d_out);
    cudaFree(d_bias);
    return st;
}

/* The CPU backend's raw and out of A (rows m) x B, model sm120. */
static void cpu_gemm(const nvfp4_tensor *a, int64_t m, const nvfp4_tensor *b, const float *bias, int k_slices,
                     float *raw, uint16_t *out)
{
    nvfp4_tensor av = *a;
    av.rows = m;
    nvfp4_gemm_args g = {.a = &av, .b = b, .bias = bias, .raw = raw, .out = out, .model = NVFP4_MODEL_SM120,
                         .k_slices = k_slices};
    if (nvfp4_gemm_cpu(&g) != NVFP4_OK) {
        fprintf(stderr, "nvfp4_gemm_cpu: %s\n", nvfp4_last_error());
        exit(2);
    }
}

/* One GEMM case: the GPU against the CPU backend on every output. */
static void gemm_case(const char *label, int64_t m, int64_t n, int64_t k, int k_slices, int kind, int with_bias,
                      int want_raw, int want_out, size_t shift, uint64_t seed)
{
    nvfp4_tensor a, b;
    sm120_data_operand(&a, m, k, seed, kind);
    sm120_data_operand(&b, n, k, seed + 1, kind);
    float *bias = with_bias ? make_bias(n, seed) : NULL;
    dev_op da, db;
    upload(&da, &a, m, shift);
    upload(&db, &b, n, 0);
    float *raw = malloc((size_t)(m * n) * 4), *want_r = malloc((size_t)(m * n) * 4);
    uint16_t *out = malloc((size_t)(m * n) * 2), *want_o = malloc((size_t)(m * n) * 2);
    nvfp4_status st = gpu_gemm(&da, m, &db, bias, k_slices, want_raw ? raw : NULL, want_out ? out : NULL);
    char what[160];
    snprintf(what, sizeof what, "%s: M=%lld N=%lld K=%lld S=%d data %d bias %d raw %d out %d shift %zu", label,
             (long long)m, (long long)n, (long long)k, k_slices, kind, with_bias, want_raw, want_out, shift);
    CHECKF(st == NVFP4_OK, "%s: %s", what, nvfp4_last_error());
    if (st == NVFP4_OK && (want_raw || want_out)) {
        cpu_gemm(&a, m, &b, bias, k_slices, want_r, want_o);
        if (want_raw && !test_equal_bits(what, raw, want_r, 4, m, n)) fprintf(stderr, "  (raw)\n");
        if (want_out && !test_equal_bits(what, out, want_o, 2, m, n)) fprintf(stderr, "  (out)\n");
    }
    free(raw), free(want_r), free(out), free(want_o), free(bias);
    release(&da);
    release(&db);
    nvfp4_tensor_free(&a);
    nvfp4_tensor_free(&b);
}

/*---------------------------------- the linears ----------------------------------*/

static void seed_linears(void)
{
    for (int li = 0; li < 4; li++) {
        const int64_t n = SEED_LINEARS[li].n, k = SEED_LINEARS[li].k, mmax = 128;
        double t0 = now_s();
        nvfp4_tensor a, b;
        sm120_data_operand(&a, mmax, k, 500 + (uint64_t)li, DATA_REAL);
        sm120_data_operand(&b, n, k, 600 + (uint64_t)li, DATA_REAL);
        float *bias = make_bias(n, 700 + (uint64_t)li);
        dev_op da, db;
        upload(&da, &a, mmax, 0);
        upload(&db, &b, n, 0);
        float *want_r = malloc((size_t)(mmax * n) * 4), *raw = malloc((size_t)(mmax * n) * 4);
        uint16_t *want_o = malloc((size_t)(mmax * n) * 2), *out = malloc((size_t)(mmax * n) * 2);
        cpu_gemm(&a, mmax, &b, bias, 1, want_r, want_o);
        const double t_cpu = now_s() - t0;
        static const int64_t ms[3] = {1, 16, 128};
        for (int mi = 0; mi < 3; mi++) {
            const int64_t m = ms[mi];
            char what[96];
            snprintf(what, sizeof what, "%s M=%lld (rows of the M=128 reference)", SEED_LINEARS[li].name, (long long)m);
            nvfp4_status st = gpu_gemm(&da, m, &db, bias, 1, raw, out);
            CHECKF(st == NVFP4_OK, "%s: %s", what, nvfp4_last_error());
            if (st != NVFP4_OK) continue;
            if (!test_equal_bits(what, raw, want_r, 4, m, n)) fprintf(stderr, "  (raw)\n");
            if (!test_equal_bits(what, out, want_o, 2, m, n)) fprintf(stderr, "  (out)\n");
            if (m == 128) { /* a second run gives the same bits */
                float *again = malloc((size_t)(m * n) * 4);
                gpu_gemm(&da, m, &db, bias, 1, again, NULL);
                CHECKF(memcmp(again, raw, (size_t)(m * n) * 4) == 0, "%s: a second run differs", what);
                free(again);
            }
        }
        /* K slices: the contract's split, against the CPU's */
        const int slices = li == 3 ? 2 : li == 0 ? 7 : 3;
        const int64_t ms_slices = li == 3 ? 16 : 1;
        float *sr = malloc((size_t)(ms_slices * n) * 4), *sw = malloc((size_t)(ms_slices * n) * 4);
        uint16_t *so = malloc((size_t)(ms_slices * n) * 2), *swo = malloc((size_t)(ms_slices * n) * 2);
        cpu_gemm(&a, ms_slices, &b, bias, slices, sw, swo);
        char what[96];
        snprintf(what, sizeof what, "%s M=%lld k_slices=%d", SEED_LINEARS[li].name, (long long)ms_slices, slices);
        nvfp4_status st = gpu_gemm(&da, ms_slices, &db, bias, slices, sr, so);
        CHECKF(st == NVFP4_OK, "%s: %s", what, nvfp4_last_error());
        if (st == NVFP4_OK) {
            if (!test_equal_bits(what, sr, sw, 4, ms_slices, n)) fprintf(stderr, "  (raw)\n");
            if (!test_equal_bits(what, so, swo, 2, ms_slices, n)) fprintf(stderr, "  (out)\n");
        }
        printf("  %-8s M = 1, 16, 128 and k_slices %d: done (%.1f s, CPU reference %.1f s)\n", SEED_LINEARS[li].name, slices,
               now_s() - t0, t_cpu);
        fflush(stdout);
        free(sr), free(sw), free(so), free(swo);
        free(want_r), free(raw), free(want_o), free(out), free(bias);
        release(&da);
        release(&db);
        nvfp4_tensor_free(&a);
        nvfp4_tensor_free(&b);
    }
}

/*------------------------------------ odd shapes ------------------------------------*/

static void odd_shapes(const char *label, uint64_t seed)
{
    static const struct { int64_t m, n, k; int slices; } S[] = {
        {1, 1, 16, 1},     {2, 8, 48, 1},      {3, 15, 80, 2},     {7, 16, 112, 1},   {8, 40, 208, 3},
        {9, 200, 1040, 1}, {15, 17, 64, 1},    {16, 48, 2064, 4},  {17, 33, 96, 1},   {31, 1000, 528, 2},
        {32, 64, 144, 1},  {33, 100, 1008, 5}, {63, 24, 272, 1},   {64, 65, 2048, 3}, {65, 128, 336, 1},
        {100, 80, 784, 2}, {130, 272, 1104, 1}, {257, 96, 400, 7}, {40, 5376, 224, 1}};
    for (size_t i = 0; i < sizeof S / sizeof S[0]; i++) {
        const int kind = i % 2 ? DATA_WIDE : DATA_REAL;
        /* codes 8 bytes off their 16-byte alignment now and then: the 8-byte copies */
        const size_t shift = i % 4 == 3 ? 8 : 0;
        gemm_case(label, S[i].m, S[i].n, S[i].k, S[i].slices, kind, (int)(i % 3 != 1), 1, 1, shift,
                  seed + 10 * (uint64_t)i);
    }
    gemm_case(label, 19, 48, 160, 1, DATA_WIDE, 1, 1, 0, 0, seed + 501); /* raw only */
    gemm_case(label, 19, 48, 160, 2, DATA_WIDE, 1, 0, 1, 0, seed + 502); /* out only */
}

/*------------------------------------ streaming A ------------------------------------*/

static uint16_t *bf16_acts(int64_t m, int64_t k, uint64_t seed, int specials)
{
    uint16_t *x = malloc((size_t)(m * k) * 2);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 3;
    for (int64_t i = 0; i < m * k; i++) {
        double g = test_normal(&s), h = test_normal(&s);
        x[i] = nvfp4_bf16_from_f32((float)(g * exp(1.5 * h)));
        if (specials && test_rand(&s) % 400 == 0) {
            static const uint16_t sp[6] = {0x7FC0, 0xFFC1, 0x7F80, 0xFF80, 0x0001, 0x8000};
            x[i] = sp[test_rand(&s) % 6];
        }
    }
    return x;
}

/* A linear's device buffers: x, raw and out (poisoned), the workspace
 * (stale bytes: the linear must not read what it did not write), the
 * quantized activations it hands back, the optional static scale. */
typedef struct dev_linear {
    uint16_t *x, *out;
    float *raw, *in, *xs;
    uint8_t *xc, *xsc;
    void *ws;
    size_t ws_bytes, xcb, xsb;
} dev_linear;

static void dev_linear_alloc(dev_linear *d, const uint16_t *x, int64_t m, int64_t k, int64_t n, int64_t kp,
                             const float *in_scale)
{
    const int64_t mp = (m + 15) / 16 * 16;
    memset(d, 0, sizeof *d);
    d->ws_bytes = nvfp4_linear_cuda_workspace(m, n, k);
    d->xcb = (size_t)(mp * kp / 2);
    d->xsb = nvfp4_scales_bytes(mp, kp, NVFP4_SCALES_TILED);
    CUDA_OK(cudaMalloc((void **)&d->x, (size_t)(m * k) * 2));
    CUDA_OK(cudaMemcpy(d->x, x, (size_t)(m * k) * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMalloc((void **)&d->raw, (size_t)(m * n) * 4));
    CUDA_OK(cudaMalloc((void **)&d->out, (size_t)(m * n) * 2));
    CUDA_OK(cudaMemset(d->raw, 0xFF, (size_t)(m * n) * 4));
    CUDA_OK(cudaMemset(d->out, 0xFF, (size_t)(m * n) * 2));
    CUDA_OK(cudaMalloc(&d->ws, d->ws_bytes));
    CUDA_OK(cudaMemset(d->ws, 0xA5, d->ws_bytes));
    CUDA_OK(cudaMalloc((void **)&d->xc, d->xcb));
    CUDA_OK(cudaMalloc((void **)&d->xsc, d->xsb));
    CUDA_OK(cudaMalloc((void **)&d->xs, sizeof(float)));
    if (in_scale) {
        CUDA_OK(cudaMalloc((void **)&d->in, sizeof(float)));
        CUDA_OK(cudaMemcpy(d->in, in_scale, sizeof(float), cudaMemcpyHostToDevice));
    }
}

static void dev_linear_free(dev_linear *d)
{
    cudaFree(d->x), cudaFree(d->raw), cudaFree(d->out), cudaFree(d->ws), cudaFree(d->xc), cudaFree(d->xsc);
    cudaFree(d->xs), cudaFree(d->in);
}

static nvfp4_cuda_linear_args dev_linear_args(const dev_linear *d, int64_t m, int64_t k, const dev_op *dw,
                                              int cuda_variant, const float *d_bias, int k_slices)
{
    nvfp4_cuda_linear_args g = {.x = d->x, .m = m, .k = k, .weight = &dw->op, .input_scale = d->in,
                                .variant = cuda_variant ? NVFP4_VARIANT_CUDA : NVFP4_VARIANT_EAGER, .bias = d_bias,
                                .raw = d->raw, .out = d->out, .x_codes = d->xc, .x_scales = d->xsc, .x_scale = d->xs,
                                .workspace = d->ws, .workspace_bytes = d->ws_bytes, .k_slices = k_slices};
    return g;
}

/* The linear on the GPU (m x k BF16 x, weight W) against nvfp4_linear_cpu:
 * raw, out, the quantized activations and the scale used. */
static void linear_case(const char *label, int64_t m, int64_t k, const nvfp4_tensor *w, const dev_op *dw,
                        int cuda_variant, int static_scale, int with_bias, int k_slices, uint64_t seed)
{
    const int64_t n = w->rows, kp = w->cols, mp = (m + 15) / 16 * 16;
    uint16_t *x = bf16_acts(m, k, seed, 0);
    float *bias = with_bias ? make_bias(n, seed) : NULL;
    const float in_scale = 0.05f + (float)(seed % 7) * 0.01f;
    const nvfp4_variant v = cuda_variant ? NVFP4_VARIANT_CUDA : NVFP4_VARIANT_EAGER;
    /* the CPU */
    float *want_r = malloc((size_t)(m * n) * 4);
    uint16_t *want_o = malloc((size_t)(m * n) * 2);
    nvfp4_tensor xq;
    memset(&xq, 0, sizeof xq);
    nvfp4_linear_args la = {.x = x, .x_dtype = NVFP4_DTYPE_BF16, .m = m, .k = k, .weight = w,
                            .input_scale = static_scale ? &in_scale : NULL, .variant = v, .bias = bias,
                            .raw = want_r, .out = want_o, .model = NVFP4_MODEL_SM120, .x_quantized = &xq,
                            .k_slices = k_slices};
    if (nvfp4_linear_cpu(&la) != NVFP4_OK) {
        fprintf(stderr, "nvfp4_linear_cpu: %s\n", nvfp4_last_error());
        exit(2);
    }
    /* the GPU */
    dev_linear d;
    dev_linear_alloc(&d, x, m, k, n, kp, static_scale ? &in_scale : NULL);
    float *d_bias = NULL;
    if (bias) {
        CUDA_OK(cudaMalloc((void **)&d_bias, (size_t)n * 4));
        CUDA_OK(cudaMemcpy(d_bias, bias, (size_t)n * 4, cudaMemcpyHostToDevice));
    }
    nvfp4_cuda_linear_args g = dev_linear_args(&d, m, k, dw, cuda_variant, d_bias, k_slices);
    char what[160];
    snprintf(what, sizeof what, "%s: linear M=%lld N=%lld k=%lld %s %s bias %d S=%d", label, (long long)m,
             (long long)n, (long long)k, cuda_variant ? "cuda" : "eager", static_scale ? "static" : "dynamic",
             with_bias, k_slices);
    nvfp4_status st = linear_call(&g);
    CHECKF(st == NVFP4_OK, "%s: %s", what, nvfp4_last_error());
    if (st == NVFP4_OK) {
        CUDA_OK(cudaDeviceSynchronize());
        float *raw = malloc((size_t)(m * n) * 4), xs = 0;
        uint16_t *out = malloc((size_t)(m * n) * 2);
        uint8_t *xc = malloc(d.xcb), *xsc = malloc(d.xsb);
        CUDA_OK(cudaMemcpy(raw, d.raw, (size_t)(m * n) * 4, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(out, d.out, (size_t)(m * n) * 2, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(xc, d.xc, d.xcb, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(xsc, d.xsc, d.xsb, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(&xs, d.xs, sizeof xs, cudaMemcpyDeviceToHost));
        if (!test_equal_bits(what, raw, want_r, 4, m, n)) fprintf(stderr, "  (raw)\n");
        if (!test_equal_bits(what, out, want_o, 2, m, n)) fprintf(stderr, "  (out)\n");
        if (!test_equal_bits(what, xc, xq.codes, 1, mp, kp / 2)) fprintf(stderr, "  (x codes)\n");
        if (!test_equal_bits(what, xsc, xq.scales, 1, 1, (int64_t)d.xsb)) fprintf(stderr, "  (x scales)\n");
        CHECKF(nvfp4_f32_bits(xs) == nvfp4_f32_bits(xq.per_tensor_scale), "%s: scale %08x, want %08x", what,
               nvfp4_f32_bits(xs), nvfp4_f32_bits(xq.per_tensor_scale));
        free(raw), free(out), free(xc), free(xsc);
    }
    dev_linear_free(&d);
    cudaFree(d_bias);
    nvfp4_tensor_free(&xq);
    free(x), free(bias), free(want_r), free(want_o);
}

/* NaN and Inf activations: the linear equals the GEMM on its own quantized
 * activations (its x_codes / x_scales / x_scale), all on the GPU. */
static void linear_specials(const char *label, int64_t m, int64_t k, const dev_op *dw, int cuda_variant,
                            int static_scale, uint64_t seed)
{
    const int64_t n = dw->op.rows, kp = dw->op.cols;
    uint16_t *x = bf16_acts(m, k, seed, 1);
    const float in_scale = 0.07f;
    dev_linear d;
    dev_linear_alloc(&d, x, m, k, n, kp, static_scale ? &in_scale : NULL);
    float *d_raw2;
    uint16_t *d_out2;
    CUDA_OK(cudaMalloc((void **)&d_raw2, (size_t)(m * n) * 4));
    CUDA_OK(cudaMalloc((void **)&d_out2, (size_t)(m * n) * 2));
    nvfp4_cuda_linear_args g = dev_linear_args(&d, m, k, dw, cuda_variant, NULL, 0);
    char what[128];
    snprintf(what, sizeof what, "%s: NaN/Inf linear M=%lld k=%lld %s %s", label, (long long)m, (long long)k,
             cuda_variant ? "cuda" : "eager", static_scale ? "static" : "dynamic");
    nvfp4_status st = linear_call(&g);
    CHECKF(st == NVFP4_OK, "%s: %s", what, nvfp4_last_error());
    nvfp4_cuda_gemm_args gg = {.a = {.codes = d.xc, .scales = d.xsc, .per_tensor_scale = d.xs, .rows = m, .cols = kp},
                               .b = dw->op, .raw = d_raw2, .out = d_out2};
    if (st == NVFP4_OK) st = gemm_call(&gg);
    CHECKF(st == NVFP4_OK, "%s: GEMM: %s", what, nvfp4_last_error());
    if (st == NVFP4_OK) {
        CUDA_OK(cudaDeviceSynchronize());
        float *r1 = malloc((size_t)(m * n) * 4), *r2 = malloc((size_t)(m * n) * 4);
        uint16_t *o1 = malloc((size_t)(m * n) * 2), *o2 = malloc((size_t)(m * n) * 2);
        CUDA_OK(cudaMemcpy(r1, d.raw, (size_t)(m * n) * 4, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(r2, d_raw2, (size_t)(m * n) * 4, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(o1, d.out, (size_t)(m * n) * 2, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(o2, d_out2, (size_t)(m * n) * 2, cudaMemcpyDeviceToHost));
        if (!test_equal_bits(what, r1, r2, 4, m, n)) fprintf(stderr, "  (raw vs quantize-then-GEMM)\n");
        if (!test_equal_bits(what, o1, o2, 2, m, n)) fprintf(stderr, "  (out vs quantize-then-GEMM)\n");
        free(r1), free(r2), free(o1), free(o2);
    }
    dev_linear_free(&d);
    cudaFree(d_raw2), cudaFree(d_out2);
    free(x);
}

static void streaming_a(void)
{
    /* the four linears at M = 1 and 16, a variant and scale each */
    for (int li = 0; li < 4; li++) {
        double t0 = now_s();
        nvfp4_tensor w;
        sm120_data_operand(&w, SEED_LINEARS[li].n, SEED_LINEARS[li].k, 800 + (uint64_t)li, DATA_REAL);
        dev_op dw;
        upload(&dw, &w, w.rows, 0);
        for (int mi = 0; mi < 2; mi++)
            linear_case(SEED_LINEARS[li].name, mi ? 16 : 1, SEED_LINEARS[li].k, &w, &dw, li & 1, (li >> 1) ^ mi, mi, 1,
                        900 + (uint64_t)(10 * li + mi));
        printf("  %-8s streaming A at M = 1, 16: done (%.1f s)\n", SEED_LINEARS[li].name, now_s() - t0);
        fflush(stdout);
        release(&dw);
        nvfp4_tensor_free(&w);
    }
    /* odd shapes, every variant and scale; k not a multiple of 16 (the
     * quantizer pads), K slices */
    static const struct { int64_t m, n, k; int slices; } S[] = {
        {1, 48, 64, 1}, {5, 40, 100, 1}, {16, 200, 528, 2}, {33, 64, 1040, 3}, {130, 96, 200, 1}, {9, 5376, 448, 1}};
    for (size_t i = 0; i < sizeof S / sizeof S[0]; i++) {
        const int64_t kp = (S[i].k + 15) / 16 * 16;
        nvfp4_tensor w;
        sm120_data_operand(&w, S[i].n, kp, 1000 + (uint64_t)i, i % 2 ? DATA_WIDE : DATA_REAL);
        for (int64_t r = 0; r < w.rows; r++) /* no NaN weight scales: the CPU's NaN bits are x86's */
            for (int64_t cb = 0; cb < kp / 16; cb++) {
                uint8_t *sc = &w.scales[nvfp4_tiled_scale_offset(r, cb, kp)];
                if ((*sc & 0x7f) == 0x7f) *sc = 0x38;
            }
        dev_op dw;
        upload(&dw, &w, w.rows, 0);
        for (int v = 0; v < 2; v++)
            for (int sc = 0; sc < 2; sc++) {
                linear_case("odd", S[i].m, S[i].k, &w, &dw, v, sc, (v + sc) % 2, S[i].slices,
                            1100 + (uint64_t)(100 * i + 10 * v + sc));
                linear_specials("odd", S[i].m, S[i].k, &dw, v, sc, 1200 + (uint64_t)(100 * i + 10 * v + sc));
            }
        release(&dw);
        nvfp4_tensor_free(&w);
    }
}

/*------------------------------------ errors ------------------------------------*/

static void argument_errors(void)
{
    nvfp4_tensor a, b;
    sm120_data_operand(&a, 4, 64, 1, DATA_REAL);
    sm120_data_operand(&b, 16, 64, 2, DATA_REAL);
    dev_op da, db;
    upload(&da, &a, 4, 0);
    upload(&db, &b, 16, 0);
    float *d_raw;
    CUDA_OK(cudaMalloc((void **)&d_raw, 4 * 16 * 4));
    nvfp4_cuda_gemm_args g = {.a = da.op, .b = db.op, .raw = d_raw};
    CHECK(gemm_call(NULL) == NVFP4_ERR_INVALID_ARGUMENT);
    nvfp4_cuda_gemm_args e = g;
    e.a.cols = 48;
    CHECK(gemm_call(&e) == NVFP4_ERR_INVALID_ARGUMENT); /* K differs */
    e = g;
    e.a.cols = e.b.cols = 40;
    CHECK(gemm_call(&e) == NVFP4_ERR_INVALID_ARGUMENT); /* K % 16 */
    e = g;
    e.k_slices = -1;
    CHECK(gemm_call(&e) == NVFP4_ERR_INVALID_ARGUMENT);
    e = g;
    e.b.scales = NULL;
    CHECK(gemm_call(&e) == NVFP4_ERR_INVALID_ARGUMENT);
    e = g;
    e.a.rows = 0;
    CHECK(gemm_call(&e) == NVFP4_ERR_INVALID_ARGUMENT);
    e = g;
    e.a.codes = da.codes + 4; /* codes 8-byte aligned at least */
    CHECK(gemm_call(&e) == NVFP4_ERR_INVALID_ARGUMENT);
    e = g;
    e.raw = NULL; /* nothing asked for: nothing done */
    CHECK(gemm_call(&e) == NVFP4_OK);
    nvfp4_cuda_linear_args l = {.x = (const uint16_t *)d_raw, .m = 4, .k = 64, .weight = &db.op};
    CHECK(linear_call(&l) == NVFP4_ERR_INVALID_ARGUMENT); /* no workspace */
    l.workspace = d_raw;
    l.workspace_bytes = 64;
    CHECK(linear_call(&l) == NVFP4_ERR_INVALID_ARGUMENT); /* too small */
    cudaFree(d_raw);
    release(&da);
    release(&db);
    nvfp4_tensor_free(&a);
    nvfp4_tensor_free(&b);
}

int main(void)
{
    int dev = 0, major = 0, minor = 0, n = 0;
    char name[256] = "";
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        fprintf(stderr, SUITE ": no CUDA device\n");
        return 2;
    }
    CUDA_OK(cudaGetDevice(&dev));
    CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CUDA_OK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    nvfp4_cuda_device_name(name, sizeof name, NULL, 0);
#ifdef NVFP4_SM120_EMULATE
    printf(SUITE ": the sm120 kernel with the emulated MMA on %s (sm_%d%d), against the CPU sm120 backend\n", name,
           major, minor);
    if (major != 9 || minor != 0) {
        fprintf(stderr, SUITE ": the emulated build runs on an sm_90 GPU (H100, H200)\n");
        return 2;
    }
#else
    printf(SUITE ": the sm120 kernel on %s (sm_%d%d), against the CPU sm120 backend\n", name, major, minor);
    nvfp4_model model;
    if (major != 12 || nvfp4_cuda_model(&model) != NVFP4_OK || model != NVFP4_MODEL_SM120) {
        fprintf(stderr, SUITE ": needs an sm_120 / sm_121 GPU (RTX 50x0, RTX PRO Blackwell, GB10) and a library "
                        "built with them\n");
        return 2;
    }
#endif
    const double t0 = now_s();
    TEST("the four linears at M = 1, 16, 128; K slices; repeatability")
    {
        seed_linears();
    }
    TEST("odd shapes, tails, adversarial scales, alignment")
    {
        odd_shapes("odd", 40);
        printf("  odd shapes: done (%.1f s)\n", now_s() - t0);
    }
#ifdef NVFP4_SM120_EMULATE
    TEST("plans for other devices: one CTA, deep rings, few warps")
    {
        static const struct { int sms; size_t smem; const char *what; } D[] = {
            {1, 101376, "one CTA"}, {132, 232448, "an H100's shared memory"}, {48, 30000, "30 KB: fewer warps"}};
        for (size_t i = 0; i < sizeof D / sizeof D[0]; i++) {
            nvfp4_sm120_emu_device(D[i].sms, D[i].smem);
            gemm_case(D[i].what, 130, 272, 1104, 1, DATA_WIDE, 1, 1, 1, 0, 3000 + i);
            gemm_case(D[i].what, 9, 1000, 528, 2, DATA_REAL, 0, 1, 1, 0, 3100 + i);
            gemm_case(D[i].what, 3, 200, 2064, 3, DATA_WIDE, 1, 1, 1, 8, 3200 + i);
        }
        nvfp4_sm120_emu_device(0, 0);
        printf("  other plans: done (%.1f s)\n", now_s() - t0);
    }
#endif
    TEST("streaming A: the linear against quantize-then-GEMM on the CPU")
    {
        streaming_a();
    }
    TEST("argument errors")
    {
        argument_errors();
    }
    printf(SUITE ": %.1f s\n", now_s() - t0);
    return test_summary(SUITE);
}
