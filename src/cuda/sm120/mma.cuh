/* mma.cuh -- the sm120 block-scaled MMA, as one call:
 *   mma.sync.aligned.kind::mxf4nvf4.block_scale.scale_vec::4X.m16n8k64
 *       .row.col.f32.e2m1.e2m1.f32.ue4m3
 * D = (A x scale_A) (B x scale_B) + C, A 16 x 64 and B 64 x 8 E2M1 codes
 * in the PTX fragment layouts (frag.h), one UE4M3 scale per 16 elements.
 *
 * NOTES: sm_120a / sm_121a only (the "a" targets: the block-scaled MMA is
 * not in the family-portable ISA); byte selectors must be 0 with
 * scale_vec::4X (all four bytes of a scale word are used), thread
 * selectors pick the lanes of each quad that hold the scale words.
 *
 * With NVFP4_SM120_EMULATE (a test build for sm_90a, never the library's)
 * the instruction is replaced by a device implementation acting on the
 * same registers: the lanes gather the A / B / scale fragments they need
 * by shuffles, as the PTX layouts place them (selectors included), compute
 * the sm120 step's rule (src/oracle/sm120_rule.h, the code of the C
 * oracle) for their four outputs and keep them as D. */
#ifndef NVFP4_CUDA_SM120_MMA_CUH
#define NVFP4_CUDA_SM120_MMA_CUH

#include <stdint.h>

#include "cuda/sm120/frag.h"

#ifdef NVFP4_SM120_EMULATE
#include "oracle/sm120_rule.h"

/* One output's step from the gathered fragments: A row words ar[0..7]
 * (word w = elements 8w .. 8w+7, lowest nibble first), B column words
 * bc[0..7], the row's and column's scale words. */
static __device__ __forceinline__ float nvfp4_sm120_emu_step(float c, const uint32_t ar[8], const uint32_t bc[8],
                                                             uint32_t sa, uint32_t sb)
{
    const nvfp4_sm90_rules rules = NVFP4_SM90_HW_RULES;
    int32_t sum4[4];
    uint32_t negzero = 0;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        int32_t s = 0;
        int all_neg_zero = 1;
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const int w = 2 * j + i / 8;
            const uint32_t ca = (ar[w] >> (4 * (i % 8))) & 15u, cb = (bc[w] >> (4 * (i % 8))) & 15u;
            s += nvfp4_sm120_prod4(ca, cb);
            if (!nvfp4_sm120_prod_neg_zero(ca, cb)) all_neg_zero = 0;
        }
        sum4[j] = s;
        negzero |= (uint32_t)all_neg_zero << j;
    }
    return __uint_as_float(nvfp4_sm120_step_bits(__float_as_uint(c), sum4, negzero, sa, sb, &rules));
}

/* The emulated instruction; every lane of the warp calls it together. */
static __device__ __noinline__ void nvfp4_sm120_emu_mma(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1,
                                                        uint32_t sfa, uint32_t sfb, int tid_a, int tid_b)
{
    const unsigned all = 0xFFFFFFFFu;
    const int lane = (int)(threadIdx.x & 31u);
    uint32_t ar[2][8], bc[2][8], sa[2], sb[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        /* this lane's rows d_row(lane, 2h) and columns d_col(lane, h) */
        const int row = nvfp4_sm120_d_row(lane, 2 * h), col = nvfp4_sm120_d_col(lane, h);
#pragma unroll
        for (int w = 0; w < 8; w++) {
            /* the register index is the same in every lane (h, w fixed): shuffle it */
            const uint32_t av = a[nvfp4_sm120_a_reg(8 * h, 8 * w)];
            ar[h][w] = __shfl_sync(all, av, nvfp4_sm120_a_lane(row, 8 * w));
            const uint32_t bv = nvfp4_sm120_b_reg(8 * w) ? b1 : b0;
            bc[h][w] = __shfl_sync(all, bv, nvfp4_sm120_b_lane(col, 8 * w));
        }
        sa[h] = __shfl_sync(all, sfa, nvfp4_sm120_sfa_lane(row, tid_a));
        sb[h] = __shfl_sync(all, sfb, nvfp4_sm120_sfb_lane(col, tid_b));
    }
#pragma unroll
    for (int i = 0; i < 4; i++) d[i] = nvfp4_sm120_emu_step(d[i], ar[i >> 1], bc[i & 1], sa[i >> 1], sb[i & 1]);
}
#endif

/* d = A B + d with the warp's fragments a[4] (weights, 16 rows), b0 b1
 * (activations, 8 rows) and scale words; thread selectors tid_a (0, 1)
 * and tid_b (0 .. 3). */
static __device__ __forceinline__ void nvfp4_sm120_mma(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1,
                                                       uint32_t sfa, uint32_t sfb, uint16_t tid_a = 0,
                                                       uint16_t tid_b = 0)
{
#ifdef NVFP4_SM120_EMULATE
    nvfp4_sm120_emu_mma(d, a, b0, b1, sfa, sfb, tid_a, tid_b);
#else
    const uint16_t byte_id = 0;
    asm volatile(
        "mma.sync.aligned.kind::mxf4nvf4.block_scale.scale_vec::4X.m16n8k64.row.col.f32.e2m1.e2m1.f32.ue4m3 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3}, {%10}, {%11, %12}, {%13}, {%14, %15};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(sfa), "h"(byte_id), "h"(tid_a),
          "r"(sfb), "h"(byte_id), "h"(tid_b));
#endif
}

#endif
