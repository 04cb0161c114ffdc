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
 *   (same overflow, subnormal, signed-zero and NaN rules). */
#include <string.h>

#include "formats/layout.h"
#include "oracle/oracle_internal.h"

/* Twice the magnitude of an E2M1 code: 0 1 2 3 4 6 8 12. */
static int64_t e2m1_twice(uint8_t code)
{
    int64_t v = nvfp4_e2m1_twice(code);
    return (code & 8) ? -v : v;
}

/* Exponent of a UE4M3 scale magnitude s (0..0x7e) for the choice of E:
 * normal field - 7; subnormal -6 (significand below 1); and a zero scale
 * the exponent of a zero, -126, as MMA-Sim gives it (its
 * extract_significand_exponent: a zero significand has exponent -126).  A
 * zero-scale block's term is zero, so this only decides whether such a block
 * can raise E: with -126 it never does in practice. */
#define SM120_ZERO_SCALE_EXP (-126)
int nvfp4_sm120_scale_exp(uint8_t s)
{
    if (s == 0) return SM120_ZERO_SCALE_EXP;
    return (s >> 3) ? (int)(s >> 3) - 7 : -6;
}

/* The scale is sig/8 * 2^exp: sig = 8 + frac when normal, frac when not. */
int64_t nvfp4_sm120_scale_sig(uint8_t s) { return (s >> 3) ? 8 + (s & 7) : (s & 7); }

float nvfp4_sm120_step(float c, const uint8_t a_codes[64], const uint8_t a_scales[4],
                       const uint8_t b_codes[64], const uint8_t b_scales[4])
{
    int64_t block_mant[4];
    int block_exp[4];
    int blocks_negative_zero = 1;

    for (int j = 0; j < 4; j++) {
        uint8_t sa = a_scales[j] & 0x7f, sb = b_scales[j] & 0x7f; /* UE4M3: sign ignored */
        if (sa == 0x7f || sb == 0x7f) return nvfp4_f32_from_bits(nvfp4_sm90_hw_rules.nan_bits);
        int64_t sum4 = 0; /* sum of (2a)(2b): four times the block sum */
        for (int i = 0; i < 16; i++) {
            uint8_t ca = a_codes[16 * j + i] & 15, cb = b_codes[16 * j + i] & 15;
            int64_t p = e2m1_twice(ca) * e2m1_twice(cb);
            sum4 += p;
            if (p != 0 || !(((ca ^ cb) >> 3) & 1)) blocks_negative_zero = 0;
        }
        /* S * (ma/8) * (mb/8) * 2^(ea+eb) with S = sum4/4 */
        block_mant[j] = sum4 * nvfp4_sm120_scale_sig(sa) * nvfp4_sm120_scale_sig(sb);
        block_exp[j] = nvfp4_sm120_scale_exp(sa) + nvfp4_sm120_scale_exp(sb);
    }
    return nvfp4_sm120_from_blocks(c, block_mant, block_exp, blocks_negative_zero);
}

float nvfp4_sm120_from_blocks(float c, const int64_t block_mant[4], const int block_exp[4],
                              int blocks_negative_zero)
{
    const nvfp4_sm90_rules *rules = &nvfp4_sm90_hw_rules;
    uint32_t cbits;
    memcpy(&cbits, &c, sizeof cbits);
    uint32_t cfield = (cbits >> 23) & 0xff, cfrac = cbits & 0x7fffff;
    int c_negative = (int)(cbits >> 31);
    if (cfield == 0xff && cfrac) return nvfp4_f32_from_bits(rules->nan_bits);
    if (cfield == 0xff) return nvfp4_f32_from_bits(c_negative ? 0xff800000u : 0x7f800000u);

    uint64_t c_sig = cfield ? ((1u << 23) | cfrac) : cfrac;
    int c_exp = cfield ? (int)cfield - 127 : -126;
    if (rules->flush_c && cfield == 0) c_sig = 0;

    int e_max = block_exp[0];
    for (int j = 1; j < 4; j++)
        if (block_exp[j] > e_max) e_max = block_exp[j];
    if (c_sig != 0 || rules->zero_c != NVFP4_ZERO_EXCLUDED) {
        int ce = (c_sig == 0 && rules->zero_c == NVFP4_ZERO_FIELD_EXP) ? -127 : c_exp;
        if (ce > e_max) e_max = ce;
    }

    /* Truncate each term toward zero to a multiple of 2^(E-35) and add.  A
     * block term is below 2^19 * 2^(E-8), a c term below 2^(E+1): both fit an
     * int64 in units of 2^(E-35). */
    int unit_exp = e_max - NVFP4_SM120_FRAC_BITS;
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
        int shift = lsb_exp - unit_exp;
        uint64_t units = shift >= 0 ? mag << shift : (-shift >= 64 ? 0 : mag >> -shift);
        sum += negative ? -(int64_t)units : (int64_t)units;
    }

    if (sum == 0) {
        int all_negative_zero = c_sig == 0 && c_negative && blocks_negative_zero;
        int all_zero = c_sig == 0;
        for (int j = 0; j < 4; j++)
            if (block_mant[j] != 0) all_zero = 0;
        return nvfp4_f32_from_bits(all_zero && all_negative_zero && rules->zero_sign_ieee ? 0x80000000u
                                                                                    : 0);
    }
    uint32_t sign = sum < 0 ? 0x80000000u : 0;
    uint64_t mag = sum < 0 ? (uint64_t)(-sum) : (uint64_t)sum;
    int p = nvfp4_msb64(mag);
    int x = p + unit_exp;
    uint32_t bits;
    if (x > 127) {
        bits = rules->overflow_to_inf ? 0x7f800000u : 0x7f7fffffu;
    } else if (x >= -126) {
        uint64_t m = p >= 23 ? mag >> (p - 23) : mag << (23 - p);
        bits = ((uint32_t)(x + 127) << 23) | (uint32_t)(m & 0x7fffff);
    } else if (rules->flush_result) {
        bits = 0;
    } else {
        int shift = unit_exp + 149;
        bits = (uint32_t)(shift >= 0 ? mag << shift : (-shift >= 64 ? 0 : mag >> -shift));
    }
    if (bits == 0 && rules->underflow_positive) sign = 0;
    return nvfp4_f32_from_bits(sign | bits);
}
