/* sm90.c -- the Hopper k16 tensor-core step (wgmma / mma.sync m16n8k16),
 * FP16 or BF16 operands, FP32 accumulator.  Written for clarity: this is the
 * oracle every fast path is checked against.
 *
 * The model (docs/ORACLE.md):
 *   each operand = sig * 2^e (subnormals: the format's minimum exponent);
 *   product i = (sig_a * sig_b) * 2^(e_a + e_b), not renormalised;
 *   c = sig_c * 2^e_c;
 *   E = largest exponent of the nonzero terms, at least -133;
 *   every term truncated toward zero to a multiple of 2^(E-25);
 *   the truncated terms added exactly; the sum truncated to FP32 (also in
 *   the subnormal range; >= 2^128 -> Inf); every zero result is +0; NaN
 *   results are 0x7fffffff.  The corner rules were measured on the H200
 *   (tests/gpu/probe_mma.cu); nvfp4_sm90_hw_rules holds them. */
#include <string.h>

#include "oracle/oracle_internal.h"

const nvfp4_sm90_rules nvfp4_sm90_hw_rules = NVFP4_SM90_HW_RULES;

/* One finite term: value = mant * 2^lsb_exp, exponent `exp` for the choice of
 * E.  Zeros keep their sign and an exponent (used only if the rules say so). */
typedef struct term {
    int negative;
    int is_zero;
    uint64_t mant;
    int lsb_exp;
    int exp;
} term;

typedef enum kind { FINITE, POS_INF, NEG_INF, NOT_A_NUMBER } kind;

typedef struct operand {
    kind kind;
    int negative;
    uint64_t sig;  /* integer significand, hidden bit included for normals */
    int exp;       /* e in sig * 2^e with sig read as 1.x (or 0.x) */
    int frac_bits; /* bits after the binary point of sig */
    int field_zero_exp; /* exponent a zero would have if its field 0 meant 0 - bias */
} operand;

/* Decode a binary floating-point pattern with `ebits` exponent bits and
 * `mbits` fraction bits. */
static operand decode(uint32_t bits, int ebits, int mbits, int flush_subnormal)
{
    operand o;
    int bias = (1 << (ebits - 1)) - 1;
    uint32_t emax_field = (1u << ebits) - 1;
    uint32_t field = (bits >> mbits) & emax_field;
    uint32_t frac = bits & ((1u << mbits) - 1);
    o.negative = (int)((bits >> (ebits + mbits)) & 1);
    o.frac_bits = mbits;
    o.field_zero_exp = -bias;
    if (field == emax_field) {
        o.kind = frac ? NOT_A_NUMBER : (o.negative ? NEG_INF : POS_INF);
        o.sig = 0;
        o.exp = 0;
        return o;
    }
    o.kind = FINITE;
    if (field == 0) {
        o.sig = flush_subnormal ? 0 : frac;
        o.exp = 1 - bias;
    } else {
        o.sig = (1u << mbits) | frac;
        o.exp = (int)field - bias;
    }
    return o;
}

static operand decode16(uint16_t bits, nvfp4_operand type, int flush_subnormal)
{
    return type == NVFP4_OPERAND_BF16 ? decode(bits, 8, 7, flush_subnormal)
                                      : decode(bits, 5, 10, flush_subnormal);
}

/* Convert |S| * 2^unit_exp (S != 0, sign apart) to FP32 bits: truncated
 * toward zero in the normal range; below it as rules->subnormal_rounding says. */
static uint32_t truncate_to_f32(uint64_t mag, int negative, int unit_exp, const nvfp4_sm90_rules *rules)
{
    int p = nvfp4_msb64(mag);
    int x = p + unit_exp; /* exponent of the leading bit */
    if (x > 127) return rules->overflow_to_inf ? 0x7f800000u : 0x7f7fffffu;
    if (x >= -126) {
        uint64_t m = p >= 23 ? mag >> (p - 23) : mag << (23 - p);
        return ((uint32_t)(x + 127) << 23) | (uint32_t)(m & 0x7fffffu);
    }
    if (rules->flush_result) return 0;
    /* Subnormal: count units of 2^-149. */
    int shift = unit_exp + 149;
    if (shift >= 0) return (uint32_t)(mag << shift);
    int s = -shift;
    uint64_t units = s >= 64 ? 0 : mag >> s;
    uint64_t rem = s >= 64 ? mag : mag & ((1ull << s) - 1);
    uint64_t half = s > 64 ? ~0ull : 1ull << (s - 1);
    int up = 0;
    switch (rules->subnormal_rounding) {
    case 1: up = rem > half || (rem == half && (units & 1)); break;
    case 2: up = rem >= half; break;
    case 3: up = negative && rem != 0; break;
    default: break;
    }
    return (uint32_t)(units + (uint64_t)up);
}

float nvfp4_sm90_step_rules(float c, const uint16_t a[16], const uint16_t b[16],
                            nvfp4_operand type, const nvfp4_sm90_rules *rules)
{
    term terms[17];
    int nterms = 0;
    int any_nan = 0, pos_inf = 0, neg_inf = 0;

    for (int i = 0; i < 16; i++) {
        operand x = decode16(a[i], type, rules->flush_operands);
        operand y = decode16(b[i], type, rules->flush_operands);
        int neg = x.negative ^ y.negative;
        if (x.kind == NOT_A_NUMBER || y.kind == NOT_A_NUMBER) {
            any_nan = 1;
            continue;
        }
        if (x.kind != FINITE || y.kind != FINITE) {
            /* Inf times zero is NaN; otherwise an infinity of the product's sign. */
            if ((x.kind == FINITE && x.sig == 0) || (y.kind == FINITE && y.sig == 0)) {
                any_nan = 1;
            } else if (neg) {
                neg_inf = 1;
            } else {
                pos_inf = 1;
            }
            continue;
        }
        term t;
        t.negative = neg;
        t.mant = x.sig * y.sig;
        t.is_zero = t.mant == 0;
        t.lsb_exp = x.exp + y.exp - x.frac_bits - y.frac_bits;
        t.exp = x.exp + y.exp;
        if (t.is_zero && rules->zero_product == NVFP4_ZERO_FIELD_EXP) {
            int ex = x.sig == 0 ? x.field_zero_exp : x.exp;
            int ey = y.sig == 0 ? y.field_zero_exp : y.exp;
            t.exp = ex + ey;
        }
        terms[nterms++] = t;
    }

    operand oc = decode(nvfp4_f32_bits(c), 8, 23, rules->flush_c);
    if (oc.kind == NOT_A_NUMBER) any_nan = 1;
    if (oc.kind == POS_INF) pos_inf = 1;
    if (oc.kind == NEG_INF) neg_inf = 1;
    if (any_nan || (pos_inf && neg_inf)) return nvfp4_f32_from_bits(rules->nan_bits);
    if (pos_inf) return nvfp4_f32_from_bits(0x7f800000u);
    if (neg_inf) return nvfp4_f32_from_bits(0xff800000u);

    term tc;
    tc.negative = oc.negative;
    tc.mant = oc.sig;
    tc.is_zero = oc.sig == 0;
    tc.lsb_exp = oc.exp - 23;
    tc.exp = (tc.is_zero && rules->zero_c == NVFP4_ZERO_FIELD_EXP) ? oc.field_zero_exp : oc.exp;
    terms[nterms++] = tc;

    /* E: the largest exponent among the terms that take part. */
    int have_e = 0, e_max = 0;
    for (int i = 0; i < nterms; i++) {
        const term *t = &terms[i];
        if (t->is_zero) {
            nvfp4_zero_exp rule = (i == nterms - 1) ? rules->zero_c : rules->zero_product;
            if (rule == NVFP4_ZERO_EXCLUDED) continue;
        }
        if (!have_e || t->exp > e_max) e_max = t->exp;
        have_e = 1;
    }

    /* Align, truncate toward zero, add exactly.  A truncated term is below
     * 2^27 units of 2^(E-25), so 17 of them fit an int64 with room. */
    int64_t sum = 0;
    int unit_exp = e_max - 25;
    if (unit_exp < rules->min_unit_exp) unit_exp = rules->min_unit_exp;
    int all_zero = 1, all_negative_zero = 1;
    for (int i = 0; i < nterms; i++) {
        const term *t = &terms[i];
        if (!t->is_zero) all_zero = 0;
        if (!t->is_zero || !t->negative) all_negative_zero = 0;
        if (t->is_zero || !have_e) continue;
        int shift = t->lsb_exp - unit_exp;
        uint64_t units;
        if (shift >= 0) {
            units = t->mant << shift;
        } else {
            units = -shift >= 64 ? 0 : t->mant >> -shift;
        }
        sum += t->negative ? -(int64_t)units : (int64_t)units;
    }

    if (sum == 0) {
        uint32_t sign = (all_zero && all_negative_zero && rules->zero_sign_ieee) ? 0x80000000u : 0;
        return nvfp4_f32_from_bits(sign);
    }
    uint32_t sign = sum < 0 ? 0x80000000u : 0;
    uint64_t mag = sum < 0 ? (uint64_t)(-sum) : (uint64_t)sum;
    uint32_t bits = truncate_to_f32(mag, sum < 0, unit_exp, rules);
    if (bits == 0 && rules->underflow_positive) sign = 0;
    return nvfp4_f32_from_bits(sign | bits);
}

float nvfp4_sm90_step(float c, const uint16_t a[16], const uint16_t b[16], nvfp4_operand type)
{
    return nvfp4_sm90_step_rules(c, a, b, type, &nvfp4_sm90_hw_rules);
}

float nvfp4_sm90_dot(float c, const uint16_t *a, const uint16_t *b, int64_t k, nvfp4_operand type)
{
    float acc = c;
    for (int64_t i = 0; i + 16 <= k; i += 16) acc = nvfp4_sm90_step(acc, a + i, b + i, type);
    return acc;
}
