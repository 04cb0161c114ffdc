/* oracle_internal.h -- knobs of the accumulation models, shared by the
 * oracle sources, its unit test and the H200 probe (tests/gpu/probe_mma.cu).
 *
 * nvfp4_sm90_step() is nvfp4_sm90_step_rules() with nvfp4_sm90_hw_rules, the
 * rules measured on the H200 (docs/ORACLE.md).  The other settings exist so
 * that the probe can show which alternative the hardware rejects. */
#ifndef NVFP4_ORACLE_INTERNAL_H
#define NVFP4_ORACLE_INTERNAL_H

#include <stdint.h>

#include "formats/layout.h"
#include "nvfp4.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Index of the highest set bit of x (x > 0), counted plainly: the models
 * favour the obvious over the fast.  (Host and device: the sm120 rule,
 * sm120_rule.h, runs in the sm120 kernel's emulated tensor core too.) */
NVFP4_HOST_DEVICE int nvfp4_msb64(uint64_t x)
{
    int p = -1;
    while (x) {
        p++;
        x >>= 1;
    }
    return p;
}

/* How a zero term (a product with a zero operand, or c == 0) enters the
 * choice of the alignment exponent E. */
typedef enum nvfp4_zero_exp {
    NVFP4_ZERO_EXCLUDED = 0, /* zero terms do not take part in E */
    NVFP4_ZERO_MIN_EXP = 1,  /* a zero has its format's minimum exponent (as a subnormal) */
    NVFP4_ZERO_FIELD_EXP = 2 /* a zero has exponent field 0 read as 0 - bias */
} nvfp4_zero_exp;

typedef struct nvfp4_sm90_rules {
    nvfp4_zero_exp zero_product; /* zero products in E */
    nvfp4_zero_exp zero_c;       /* c == 0 in E */
    int overflow_to_inf;         /* |sum| >= 2^128: 1 = Inf, 0 = FLT_MAX (round-toward-zero) */
    int flush_result;            /* 1: a result below 2^-126 becomes a zero of its sign */
    int flush_c;                 /* 1: a subnormal c is read as a zero of its sign */
    int flush_operands;          /* 1: subnormal 16-bit operands are read as zeros */
    int zero_sign_ieee;          /* exact zero sum: 1 = -0 only if every term is -0; 0 = +0 */
    int underflow_positive;      /* a nonzero sum that truncates (or flushes) to zero: 1 = +0,
                                    0 = a zero with the sum's sign */
    int subnormal_rounding;      /* results below 2^-126: 0 = toward zero, 1 = nearest even,
                                    2 = nearest away, 3 = toward -Inf */
    int min_unit_exp;            /* the alignment unit is 2^max(E-25, min_unit_exp);
                                    -1000 = no floor */
    uint32_t nan_bits;           /* the FP32 NaN the step returns */
} nvfp4_sm90_rules;

/* The rules nvfp4_sm90_step() uses (measured, docs/ORACLE.md), as an
 * initializer (in field order) that device code can use too. */
#define NVFP4_SM90_HW_RULES                                                         \
    {NVFP4_ZERO_EXCLUDED, /* zero_product */                                        \
     NVFP4_ZERO_EXCLUDED, /* zero_c */                                              \
     1,                   /* overflow_to_inf */                                     \
     0,                   /* flush_result */                                        \
     0,                   /* flush_c */                                             \
     0,                   /* flush_operands */                                      \
     0,                   /* zero_sign_ieee */                                      \
     1,                   /* underflow_positive */                                  \
     0,                   /* subnormal_rounding */                                  \
     -158,                /* min_unit_exp */                                        \
     0x7fffffffu}         /* nan_bits */
extern const nvfp4_sm90_rules nvfp4_sm90_hw_rules;

/* The sm90 step under explicit rules. */
float nvfp4_sm90_step_rules(float c, const uint16_t a[16], const uint16_t b[16],
                            nvfp4_operand type, const nvfp4_sm90_rules *rules);

/* The sm120 step's fixed point (src/oracle/sm120_rule.h): block j's term is
 * (sum of the 16 products of twice the E2M1 values) * sig_a * sig_b *
 * 2^(exp_a + exp_b + NVFP4_SM120_MANT_EXP), every term truncated toward zero
 * to a multiple of 2^(E - NVFP4_SM120_FRAC_BITS). */
#define NVFP4_SM120_FRAC_BITS 35
#define NVFP4_SM120_MANT_EXP (-8) /* (2a)(2b) is 4ab; sig/8 twice */

/* FP16 bit pattern of e2m1(code) * |e4m3(scale)| (exact; NaN scale -> FP16 NaN
 * 0x7e00 with the code's sign; a zero keeps the code's sign). */
uint16_t nvfp4_oracle_f16_operand(uint8_t code, uint8_t scale);

#ifdef __cplusplus
}
#endif
#endif
