/* sm120.c -- the RTX Blackwell / GB10 block-scaled k64 step
 * (mma.sync ... kind::mxf4nvf4.block_scale.scale_vec::4X) as published by
 * MMA-Sim (arXiv 2511.10909).  Modelled, not measured: we have no such GPU.
 *
 * Our reading (docs/ORACLE.md):
 *   block j (16 elements): S_j = exact sum of the 16 E2M1 products;
 *   the two UE4M3 scales are sig * 2^e (subnormal: e = -6, sig < 1; a zero
 *   scale: sig = 0, e = -126, MMA-Sim's exponent of a zero);
 *   term j = S_j * sig_sa * sig_sb carrying exponent e_sa + e_sb (the block
 *   sum's own magnitude does not enter the exponent; every block takes part
 *   in E, even one whose sum is zero, since its exponent comes from the
 *   scales alone);
 *   c = sig_c * 2^e_c takes part as in the sm90 step (a zero c does not);
 *   E = largest exponent; each term truncated toward zero to a multiple of
 *   2^(E-35); added exactly; the sum truncated to FP32 as the sm90 step does
 *   (same overflow, subnormal, signed-zero and NaN rules).
 * The arithmetic is in sm120_rule.h, shared with the sm120 kernel's emulated
 * tensor core; this file gathers a step's block sums and scale words. */
#include "oracle/sm120_rule.h"

float nvfp4_sm120_step(float c, const uint8_t a_codes[64], const uint8_t a_scales[4],
                       const uint8_t b_codes[64], const uint8_t b_scales[4])
{
    int32_t sum4[4];
    uint32_t negzero = 0, sa = 0, sb = 0;
    for (int j = 0; j < 4; j++) {
        int32_t s = 0;
        int all_neg_zero = 1;
        for (int i = 0; i < 16; i++) {
            const uint32_t ca = a_codes[16 * j + i] & 15u, cb = b_codes[16 * j + i] & 15u;
            s += nvfp4_sm120_prod4(ca, cb);
            if (!nvfp4_sm120_prod_neg_zero(ca, cb)) all_neg_zero = 0;
        }
        sum4[j] = s;
        negzero |= (uint32_t)all_neg_zero << j;
        sa |= (uint32_t)a_scales[j] << (8 * j);
        sb |= (uint32_t)b_scales[j] << (8 * j);
    }
    return nvfp4_f32_from_bits(nvfp4_sm120_step_bits(nvfp4_f32_bits(c), sum4, negzero, sa, sb,
                                                     &nvfp4_sm90_hw_rules));
}
