/* gemm_ref.c -- the NVFP4 GEMM contract written plainly (docs/CONTRACT.md),
 * one thread, through the model functions.  The oracle for the CPU and CUDA
 * backends. */
#include <stdlib.h>

#include "internal.h"
#include "oracle/oracle_internal.h"

uint16_t nvfp4_oracle_f16_operand(uint8_t code, uint8_t scale)
{
    /* twice the E2M1 magnitude, so every value is an integer */
    static const unsigned twice[8] = {0, 1, 2, 3, 4, 6, 8, 12};
    uint16_t sign = (uint16_t)((code & 8) ? 0x8000u : 0);
    unsigned s = scale & 0x7fu; /* UE4M3: the sign bit is ignored */
    if (s == 0x7f) return sign | 0x7e00u;
    unsigned field = s >> 3, frac = s & 7;
    unsigned sig = field ? 8 + frac : frac;   /* scale = sig/8 * 2^exp */
    int exp = field ? (int)field - 7 : -6;
    unsigned n = twice[code & 7] * sig;       /* value = n * 2^(exp-4), n <= 168 */
    if (n == 0) return sign;
    int p = 0;
    while ((n >> (p + 1)) != 0) p++;
    int x = p + exp - 4; /* exponent of the leading bit: -10..11, FP16-normal */
    unsigned frac16 = (n << (10 - p)) & 0x3ffu;
    return (uint16_t)(sign | (unsigned)(x + 15) << 10 | frac16);
}

float nvfp4_gemm_alpha(float scale_2_a, float scale_2_b)
{
    return scale_2_a * scale_2_b; /* one FP32 RNE product (no contraction: -ffp-contract=off) */
}

uint16_t nvfp4_epilogue(float acc, float alpha, const float *bias)
{
    float y = alpha * acc;
    if (bias) y = y + *bias;
    return nvfp4_bf16_from_f32(y);
}

/* One row of an operand as exact FP16 bit patterns a' = e2m1 * |e4m3|. */
static void row_f16(uint16_t *dst, const nvfp4_tensor *t, int64_t r)
{
    for (int64_t k = 0; k < t->cols; k++)
        dst[k] = nvfp4_oracle_f16_operand(nvfp4_tensor_code(t, r, k),
                                          nvfp4_tensor_scale(t, r, k / NVFP4_BLOCK));
}

/* One slice [k_begin, k_end) of an output with the SM120 model, from +0: one
 * k64 step per 4 blocks, the last group of K padded with zero blocks (codes
 * 0, scales 0).  k_begin is a multiple of 64. */
static float dot_sm120(const nvfp4_tensor *a, int64_t m, const nvfp4_tensor *b, int64_t n,
                       int64_t k_begin, int64_t k_end)
{
    float acc = 0.0f;
    int64_t k_total = k_end;
    for (int64_t k0 = k_begin; k0 < k_total; k0 += 64) {
        uint8_t ac[64] = {0}, bc[64] = {0}, as[4] = {0}, bs[4] = {0};
        for (int j = 0; j < 4; j++) {
            int64_t kb = k0 + 16 * j;
            if (kb >= k_total) break;
            as[j] = nvfp4_tensor_scale(a, m, kb / NVFP4_BLOCK);
            bs[j] = nvfp4_tensor_scale(b, n, kb / NVFP4_BLOCK);
            for (int i = 0; i < 16; i++) {
                ac[16 * j + i] = nvfp4_tensor_code(a, m, kb + i);
                bc[16 * j + i] = nvfp4_tensor_code(b, n, kb + i);
            }
        }
        acc = nvfp4_sm120_step(acc, ac, as, bc, bs);
    }
    return acc;
}

nvfp4_status nvfp4_gemm_ref(const nvfp4_gemm_args *args)
{
    nvfp4_status st = nvfp4_check_gemm_args(args, "nvfp4_gemm_ref");
    if (st != NVFP4_OK) return st;
    const nvfp4_tensor *a = args->a, *b = args->b;

    int64_t M = a->rows, N = b->rows, K = a->cols;
    size_t k_bytes;
    if (!nvfp4_mul_size((size_t)(K > 0 ? K : 1), sizeof(uint16_t), &k_bytes))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_gemm_ref: K = %lld is too large",
                          (long long)K);
    uint16_t *arow = malloc(k_bytes), *brow = malloc(k_bytes);
    if (!arow || !brow) {
        free(arow);
        free(brow);
        return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "nvfp4_gemm_ref: %zu bytes for a row", k_bytes);
    }
    float alpha = nvfp4_gemm_alpha(a->per_tensor_scale, b->per_tensor_scale);
    int64_t slice = nvfp4_k_slice_elems(K, args->k_slices);

    for (int64_t m = 0; m < M; m++) {
        if (args->model != NVFP4_MODEL_SM120) row_f16(arow, a, m);
        for (int64_t n = 0; n < N; n++) {
            if (args->model != NVFP4_MODEL_SM120) row_f16(brow, b, n);
            /* K slices: each one chain from +0, partials added in slice order */
            float acc = 0.0f;
            for (int64_t k0 = 0; k0 < K || k0 == 0; k0 += slice) {
                int64_t k1 = k0 + slice < K ? k0 + slice : K;
                float partial;
                if (args->model == NVFP4_MODEL_SM120)
                    partial = dot_sm120(a, m, b, n, k0, k1);
                else if (args->model == NVFP4_MODEL_SM90)
                    partial = nvfp4_sm90_dot(0.0f, arow + k0, brow + k0, k1 - k0, NVFP4_OPERAND_F16);
                else
                    partial = nvfp4_exact_dot(0.0f, arow + k0, brow + k0, k1 - k0, NVFP4_OPERAND_F16);
                acc = k0 == 0 ? partial : acc + partial;
            }
            if (args->raw) args->raw[m * N + n] = acc;
            if (args->out) args->out[m * N + n] = nvfp4_epilogue(acc, alpha, args->bias ? &args->bias[n] : NULL);
        }
    }
    free(arow);
    free(brow);
    return NVFP4_OK;
}
