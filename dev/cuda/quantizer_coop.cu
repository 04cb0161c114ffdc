/* quantizer_coop.cu -- the fused linear's three quantizer kernels at a
 * Llama-3-8B-sized decoder's shapes, llm.c style: each first checked byte
 * for byte against the C quantizer (nvfp4_quantize: codes, tiled scales, and
 * the GEMM's FP16 operands in its operand order), then timed side by side on
 * the same input -- nvfp4_q_force_launch: 0 the threshold-table kernel, 1
 * one thread a block, 2 four lanes a block (nvfp4_q_blocks_coop_kernel).
 *
 * Why: at M <= 16 the fused linear's GEMM waits for the quantizer grid,
 * whose time is one thread's dependent chain through a block's 16 exact
 * divisions (ncu: 5.1 us at FC2 M = 16 against 3.0 us for the GEMM's
 * activation pre-pass); four lanes cut the chain to four elements.  Its
 * timings set the quantizer's launch rule (src/cuda/sm90/quantize.cu).
 *
 *   quantizer_coop [--iters N]
 *
 * Build: make gpu-tests (build/gpu/quantizer_coop). */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvfp4.h"
#include "cuda/quantize_internal.h"
#include "nvfp4_testing.h"

#include "dev_check.h"
#include "dev_rand.h"

static const char *const KERNEL_NAMES[3] = {"table", "one-thread", "four-lane"};

/* e2m1(code) * |e4m3(scale)| as FP16 bits, the code's sign kept; 0x7FFF
 * for a NaN scale (as tests/gpu/test_quantize_cuda.c). */
static uint16_t expected_operand(uint8_t code, uint8_t scale)
{
    if ((scale & 0x7F) == 0x7F) return 0x7FFF;
    const float mag = nvfp4_e2m1_to_f32(code & 7) * nvfp4_e4m3_to_f32(scale & 0x7F);
    return (uint16_t)(nvfp4_f16_from_f32(mag) | ((code & 8) ? 0x8000 : 0));
}

/* inputs: 0 heavy-tailed with outlier channels, 1 random bit patterns (NaN,
 * Inf, subnormals, zeros of both signs), 2 multiples of 1/8 (E2M1 ties
 * under power-of-two scales) */
static uint16_t *make_input(int kind, int64_t m, int64_t k, uint64_t seed)
{
    uint16_t *x = (uint16_t *)malloc((size_t)(m * k) * 2);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
    for (int64_t i = 0; i < m * k; i++) {
        if (kind == 0) {
            double g = gauss(&s);
            if (rng(&s) % 50 == 0) g *= 8;
            if (i % k == 17 % k) g *= 40;
            x[i] = nvfp4_bf16_from_f32((float)g);
        } else if (kind == 1) {
            x[i] = (uint16_t)rng(&s);
        } else {
            x[i] = nvfp4_bf16_from_f32((float)((int)(rng(&s) % 97) - 48) * 0.125f);
        }
    }
    return x;
}

static int check_case(int kind, int64_t m, int64_t k, float pts, nvfp4_variant v, int iters)
{
    const int64_t kp = (k + 15) / 16 * 16, prows = (m + 15) / 16 * 16;
    const size_t cb = (size_t)(prows * kp / 2), sb = nvfp4_scales_bytes(prows, kp, NVFP4_SCALES_TILED);
    uint16_t *x = make_input(kind, m, k, (uint64_t)(m * 131 + k + kind));
    nvfp4_tensor want;
    if (nvfp4_quantize(&want, x, NVFP4_DTYPE_BF16, m, k, &pts, v, 0) != NVFP4_OK) {
        fprintf(stderr, "nvfp4_quantize: %s\n", nvfp4_last_error());
        exit(2);
    }
    uint16_t *d_x, *d_act;
    uint8_t *d_codes, *d_scales;
    float *d_pts;
    DEV_CUDA_OK(cudaMalloc((void **)&d_x, (size_t)(m * k) * 2 + 16));
    DEV_CUDA_OK(cudaMalloc((void **)&d_act, (size_t)(m * kp) * 2));
    DEV_CUDA_OK(cudaMalloc((void **)&d_codes, cb));
    DEV_CUDA_OK(cudaMalloc((void **)&d_scales, sb));
    DEV_CUDA_OK(cudaMalloc((void **)&d_pts, 8));
    DEV_CUDA_OK(cudaMemcpy(d_x, x, (size_t)(m * k) * 2, cudaMemcpyHostToDevice));
    DEV_CUDA_OK(cudaMemcpy(d_pts, &pts, 4, cudaMemcpyHostToDevice));
    uint8_t *codes = (uint8_t *)malloc(cb), *scales = (uint8_t *)malloc(sb);
    uint16_t *act = (uint16_t *)malloc((size_t)(m * kp) * 2);
    int bad = 0;
    for (int mode = 0; mode < 3 && !bad; mode++) {
        nvfp4_q_force_launch(mode);
        DEV_CUDA_OK(cudaMemset(d_codes, 0xA5, cb));
        DEV_CUDA_OK(cudaMemset(d_scales, 0, sb)); /* the tile padding, as nvfp4_quantize_cuda */
        DEV_CUDA_OK(cudaMemset(d_act, 0xA5, (size_t)(m * kp) * 2));
        nvfp4_cuda_quantize_args qa;
        memset(&qa, 0, sizeof qa);
        qa.x = d_x, qa.m = m, qa.k = k, qa.input_scale = d_pts, qa.variant = v;
        qa.codes = d_codes, qa.scales = d_scales, qa.per_tensor_scale = d_pts + 1;
        if (nvfp4_quantize_cuda(&qa) != NVFP4_OK ||
            nvfp4_sm90_produce_operands(d_x, m, k, d_pts, NULL, v, d_act, kp, NULL, NULL) != NVFP4_OK) {
            fprintf(stderr, "%s kernel: %s\n", KERNEL_NAMES[mode], nvfp4_last_error());
            exit(2);
        }
        DEV_CUDA_OK(cudaDeviceSynchronize());
        DEV_CUDA_OK(cudaMemcpy(codes, d_codes, cb, cudaMemcpyDeviceToHost));
        DEV_CUDA_OK(cudaMemcpy(scales, d_scales, sb, cudaMemcpyDeviceToHost));
        DEV_CUDA_OK(cudaMemcpy(act, d_act, (size_t)(m * kp) * 2, cudaMemcpyDeviceToHost));
        const char *kn = KERNEL_NAMES[mode];
        for (int64_t i = 0; i < (int64_t)cb && !bad; i++)
            if (codes[i] != want.codes[i]) {
                printf("MISMATCH %s codes kind %d M=%lld K=%lld %s pts %g: first at (row %lld, byte %lld): gpu %02x cpu %02x\n",
                       kn, kind, (long long)m, (long long)k, v == NVFP4_VARIANT_CUDA ? "cuda" : "eager", pts,
                       (long long)(i / (kp / 2)), (long long)(i % (kp / 2)), codes[i], want.codes[i]);
                bad = 1;
            }
        for (size_t i = 0; i < sb && !bad; i++)
            if (scales[i] != want.scales[i]) {
                printf("MISMATCH %s scales kind %d M=%lld K=%lld: first at tiled byte %zu: gpu %02x cpu %02x\n", kn,
                       kind, (long long)m, (long long)k, i, scales[i], want.scales[i]);
                bad = 1;
            }
        for (int64_t r = 0; r < m && !bad; r++)
            for (int64_t c = 0; c < kp && !bad; c++) {
                const int64_t e = c / 16 * 16 + nvfp4_sm90_operand_elem((int)(c % 16));
                const uint16_t h = expected_operand(nvfp4_tensor_code(&want, r, e), nvfp4_tensor_scale(&want, r, c / 16));
                if (act[r * kp + c] != h) {
                    printf("MISMATCH %s operands kind %d M=%lld K=%lld: first at (row %lld, slot %lld): gpu %04x cpu %04x\n",
                           kn, kind, (long long)m, (long long)k, (long long)r, (long long)c, act[r * kp + c], h);
                    bad = 1;
                }
            }
    }
    nvfp4_q_force_launch(-1);
    if (!bad && iters > 0) {
        /* back to back, each between two events; median (us) of the
         * fused linear's quantizer launch (FP16 operands) by each kernel */
        float med[3];
        float *t = (float *)malloc((size_t)iters * sizeof *t);
        cudaEvent_t e0, e1;
        DEV_CUDA_OK(cudaEventCreate(&e0));
        DEV_CUDA_OK(cudaEventCreate(&e1));
        for (int mode = 0; mode < 3; mode++) {
            nvfp4_q_force_launch(mode);
            for (int i = -3; i < iters; i++) {
                DEV_CUDA_OK(cudaEventRecord(e0, NULL));
                if (nvfp4_sm90_produce_operands(d_x, m, k, d_pts, NULL, v, d_act, kp, NULL, NULL) != NVFP4_OK) {
                    fprintf(stderr, "nvfp4_sm90_produce_operands: %s\n", nvfp4_last_error());
                    exit(2);
                }
                DEV_CUDA_OK(cudaEventRecord(e1, NULL));
                DEV_CUDA_OK(cudaEventSynchronize(e1));
                if (i >= 0) DEV_CUDA_OK(cudaEventElapsedTime(&t[i], e0, e1));
            }
            for (int a = 1; a < iters; a++) /* insertion sort: iters is small */
                for (int b = a; b > 0 && t[b] < t[b - 1]; b--) {
                    const float tmp = t[b];
                    t[b] = t[b - 1];
                    t[b - 1] = tmp;
                }
            med[mode] = t[iters / 2] * 1000.0f;
        }
        nvfp4_q_force_launch(-1);
        printf("kind %d M=%-4lld K=%-6lld %-5s exact; table %6.2f us, one-thread %6.2f us, four-lane %6.2f us\n", kind,
               (long long)m, (long long)k, v == NVFP4_VARIANT_CUDA ? "cuda" : "eager", med[0], med[1], med[2]);
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        free(t);
    } else if (!bad) {
        printf("kind %d M=%-4lld K=%-6lld %-5s pts %g exact\n", kind, (long long)m, (long long)k,
               v == NVFP4_VARIANT_CUDA ? "cuda" : "eager", pts);
    }
    fflush(stdout);
    free(codes), free(scales), free(act), free(x);
    nvfp4_tensor_free(&want);
    cudaFree(d_x), cudaFree(d_act), cudaFree(d_codes), cudaFree(d_scales), cudaFree(d_pts);
    return bad;
}

int main(int argc, char **argv)
{
    int iters = 200, bad = 0;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
    /* every byte, edge shapes and adversarial inputs, both variants */
    static const int64_t edge[][2] = {{1, 16}, {3, 1000}, {5, 1004}, {17, 48}, {33, 4096}};
    static const float scales_list[] = {1.0f, 0.5f, 0.0157f, 1e-30f, 1e30f, 3.0e-3f};
    for (int vi = 0; vi < 2; vi++)
        for (int kind = 0; kind < 3; kind++)
            for (size_t e = 0; e < sizeof edge / sizeof edge[0]; e++)
                for (size_t p = 0; p < sizeof scales_list / sizeof scales_list[0]; p++)
                    bad |= check_case(kind, edge[e][0], edge[e][1], scales_list[p],
                                      vi ? NVFP4_VARIANT_CUDA : NVFP4_VARIANT_EAGER, 0);
    /* the seed's linears' K at M = 1, 16, 128: checked, then timed */
    static const int64_t ks[] = {5376, 7168, 14336};
    static const int64_t ms[] = {1, 16, 128};
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 3; b++)
            bad |= check_case(0, ms[a], ks[b], 0.0157f, NVFP4_VARIANT_EAGER, iters);
    printf("RESULT quantizer_coop %s\n", bad ? "MISMATCH" : "exact");
    return bad;
}
