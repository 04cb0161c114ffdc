/* sm120_rule.h -- the arithmetic of the sm120 block-scaled k64 step
 * (docs/ORACLE.md), one source for the C oracle (nvfp4_sm120_step,
 * src/oracle/sm120.c) and the emulated tensor core of the sm120 kernel's
 * test build (src/cuda/sm120/mma.cuh), so that both compute the same rule.
 * Usable from host C and from device code; written for clarity, not speed.
 *
 * A step is given as four block sums and the two operands' scale words:
 *   sum4[j]      the exact sum over block j's 16 elements of (2a)(2b), four
 *                times the block's sum of E2M1 products (nvfp4_sm120_prod4);
 *   negzero      bit j set when every product of block j is -0 (only the
 *                IEEE zero-sign rule, which the hardware rules leave off,
 *                reads it);
 *   sa, sb       byte j = block j's UE4M3 scale (sign bits ignored). */
#ifndef NVFP4_ORACLE_SM120_RULE_H
#define NVFP4_ORACLE_SM120_RULE_H

#include <stdint.h>

#include "formats/layout.h"
#include "oracle/oracle_internal.h"

/* (2a)(2b) of two E2M1 codes with the product's sign: 4 x the product, an
 * integer in [-144, 144]. */
NVFP4_HOST_DEVICE int32_t nvfp4_sm120_prod4(uint32_t ca, uint32_t cb)
{
    const int32_t p = (int32_t)(nvfp4_e2m1_twice(ca) * nvfp4_e2m1_twice(cb));
    return ((ca ^ cb) & 8u) ? -p : p;
}

/* Whether the product of two codes is -0 (a zero product of opposite signs). */
NVFP4_HOST_DEVICE int nvfp4_sm120_prod_neg_zero(uint32_t ca, uint32_t cb)
{
    return nvfp4_sm120_prod4(ca, cb) == 0 && ((ca ^ cb) & 8u) != 0;
}

/* Exponent of a UE4M3 scale magnitude s (0..0x7e) for the choice of E:
 * normal field - 7; subnormal -6 (significand below 1); and a zero scale
 * the exponent of a zero, -126, as MMA-Sim gives it (its
 * extract_significand_exponent: a zero significand has exponent -126).  A
 * zero-scale block's term is zero, so this only decides whether such a block
 * can raise E: with -126 it never does in practice. */
#define NVFP4_SM120_ZERO_SCALE_EXP (-126)
NVFP4_HOST_DEVICE int nvfp4_sm120_scale_exp(uint32_t s)
{
    if (s == 0) return NVFP4_SM120_ZERO_SCALE_EXP;
    return (s >> 3) ? (int)(s >> 3) - 7 : -6;
}

/* The step d = c + sum_j term_j under `rules` (nvfp4_sm90_hw_rules for the
 * model): c and d as FP32 bit patterns.
 *   term j = S_j * sig_sa * sig_sb carrying exponent e_sa + e_sb (the block
 *   sum's own magnitude does not enter the exponent; every block takes part
 *   in E, even one whose sum is zero);
 *   c = sig_c * 2^e_c takes part as in the sm90 step (a zero c does not);
 *   E = largest exponent; each term truncated toward zero to a multiple of
 *   2^(E-35); added exactly; the sum truncated to FP32 as the sm90 step does
 *   (same overflow, subnormal, signed-zero and NaN rules). */
NVFP4_HOST_DEVICE uint32_t nvfp4_sm120_step_bits(uint32_t cbits, const int32_t sum4[4], uint32_t negzero,
                                                 uint32_t sa, uint32_t sb, const nvfp4_sm90_rules *rules)
{
    int64_t block_mant[4]; /* term j = block_mant[j] * 2^(block_exp[j] + NVFP4_SM120_MANT_EXP) */
    int block_exp[4];
    const uint32_t cfield = (cbits >> 23) & 0xffu, cfrac = cbits & 0x7fffffu;
    const int c_negative = (int)(cbits >> 31);
    if (cfield == 0xffu && cfrac) return rules->nan_bits;

    for (int j = 0; j < 4; j++) {
        const uint32_t a = (sa >> (8 * j)) & 0x7fu, b = (sb >> (8 * j)) & 0x7fu; /* UE4M3: sign ignored */
        if (a == 0x7fu || b == 0x7fu) return rules->nan_bits;
        const int64_t ma = (a >> 3) ? 8 + (a & 7u) : (a & 7u);
        const int64_t mb = (b >> 3) ? 8 + (b & 7u) : (b & 7u);
        /* S * (ma/8) * (mb/8) * 2^(ea+eb) with S = sum4/4 */
        block_mant[j] = (int64_t)sum4[j] * ma * mb;
        block_exp[j] = nvfp4_sm120_scale_exp(a) + nvfp4_sm120_scale_exp(b);
    }

    if (cfield == 0xffu) return c_negative ? 0xff800000u : 0x7f800000u;

    uint64_t c_sig = cfield ? ((1u << 23) | cfrac) : cfrac;
    const int c_exp = cfield ? (int)cfield - 127 : -126;
    if (rules->flush_c && cfield == 0) c_sig = 0;

    int e_max = block_exp[0];
    for (int j = 1; j < 4; j++)
        if (block_exp[j] > e_max) e_max = block_exp[j];
    if (c_sig != 0 || rules->zero_c != NVFP4_ZERO_EXCLUDED) {
        const int ce = (c_sig == 0 && rules->zero_c == NVFP4_ZERO_FIELD_EXP) ? -127 : c_exp;
        if (ce > e_max) e_max = ce;
    }

    /* Truncate each term toward zero to a multiple of 2^(E-35) and add.  A
     * block term is below 2^19 * 2^(E-8), a c term below 2^(E+1): both fit an
     * int64 in units of 2^(E-35). */
    const int unit_exp = e_max - NVFP4_SM120_FRAC_BITS;
    int64_t sum = 0;
    for (int j = 0; j < 5; j++) {
        uint64_t mag;
        int lsb_exp, negative;
        if (j < 4) {
            negative = block_mant[j] < 0;
            mag = (uint64_t)(negative ? -block_mant[j] : block_mant[j]);
            lsb_exp = block_exp[j] + NVFP4_SM120_MANT_EXP;
        } else {
            negative = c_negative;
            mag = c_sig;
            lsb_exp = c_exp - 23;
        }
        if (mag == 0) continue; /* a zero c is not in E, so its shift can be anything */
        const int shift = lsb_exp - unit_exp;
        const uint64_t units = shift >= 0 ? mag << shift : (-shift >= 64 ? 0 : mag >> -shift);
        sum += negative ? -(int64_t)units : (int64_t)units;
    }

    if (sum == 0) {
        int all_negative_zero = c_sig == 0 && c_negative && negzero == 15u;
        for (int j = 0; j < 4; j++)
            if (block_mant[j] != 0) all_negative_zero = 0;
        return all_negative_zero && rules->zero_sign_ieee ? 0x80000000u : 0u;
    }
    uint32_t sign = sum < 0 ? 0x80000000u : 0;
    const uint64_t mag = sum < 0 ? (uint64_t)(-sum) : (uint64_t)sum;
    const int p = nvfp4_msb64(mag);
    const int x = p + unit_exp;
    uint32_t bits;
    if (x > 127) {
        bits = rules->overflow_to_inf ? 0x7f800000u : 0x7f7fffffu;
    } else if (x >= -126) {
        const uint64_t m = p >= 23 ? mag >> (p - 23) : mag << (23 - p);
        bits = ((uint32_t)(x + 127) << 23) | (uint32_t)(m & 0x7fffffu);
    } else if (rules->flush_result) {
        bits = 0;
    } else {
        const int shift = unit_exp + 149;
        bits = (uint32_t)(shift >= 0 ? mag << shift : (-shift >= 64 ? 0 : mag >> -shift));
    }
    if (bits == 0 && rules->underflow_positive) sign = 0;
    return sign | bits;
}

#endif
