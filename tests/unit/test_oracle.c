/* test_oracle.c -- the accumulation models (sm90, exact, sm120) and the GEMM
 * contract of nvfp4_gemm_ref, against hand-worked cases and against
 * independent formulations written here in double arithmetic. */
#include <float.h>
#include <math.h>

#include "nvfp4.h"
#include "oracle/oracle_internal.h"
#include "testlib.h"

/* ---- helpers written independently of src/oracle ---------------------- */

static uint32_t fbits(float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    return u;
}

static float ffrom(uint32_t u)
{
    float v;
    memcpy(&v, &u, 4);
    return v;
}

/* Encode a double that is exactly representable in a binary format with
 * ebits/mbits (finite); sets *ok = 0 when it is not. */
static uint32_t encode_exact(double v, int ebits, int mbits, int *ok)
{
    int bias = (1 << (ebits - 1)) - 1;
    uint32_t sign = signbit(v) ? 1u : 0u;
    double m = fabs(v);
    uint32_t out = sign << (ebits + mbits);
    if (m == 0) return out;
    int e;
    frexp(m, &e); /* m = f * 2^e, f in [0.5, 1): leading bit exponent e-1 */
    int lead = e - 1;
    if (lead > bias) {
        *ok = 0;
        return out;
    }
    int emin = 1 - bias;
    int lsb = (lead < emin ? emin : lead) - mbits;
    double units = ldexp(m, -lsb);
    if (units != floor(units)) {
        *ok = 0;
        return out;
    }
    uint32_t u = (uint32_t)units;
    if (lead < emin) return out | u; /* subnormal */
    return out | ((uint32_t)(lead + bias) << mbits) | (u & ((1u << mbits) - 1));
}

static uint16_t h(double v) /* FP16, must be exact */
{
    int ok = 1;
    uint16_t b = (uint16_t)encode_exact(v, 5, 10, &ok);
    if (!ok) {
        fprintf(stderr, "test bug: %g is not an FP16 value\n", v);
        abort();
    }
    return b;
}

static uint16_t bf(double v) /* BF16, must be exact */
{
    int ok = 1;
    uint16_t b = (uint16_t)encode_exact(v, 8, 7, &ok);
    if (!ok) {
        fprintf(stderr, "test bug: %g is not a BF16 value\n", v);
        abort();
    }
    return b;
}

/* Value and "model exponent" (format minimum for subnormals and zeros). */
static double decode_bits(uint32_t bits, int ebits, int mbits, int *exp_out)
{
    int bias = (1 << (ebits - 1)) - 1;
    uint32_t field = (bits >> mbits) & ((1u << ebits) - 1);
    uint32_t frac = bits & ((1u << mbits) - 1);
    double s = ((bits >> (ebits + mbits)) & 1) ? -1.0 : 1.0;
    if (field == 0) {
        *exp_out = 1 - bias;
        return s * ldexp((double)frac, 1 - bias - mbits);
    }
    *exp_out = (int)field - bias;
    return s * ldexp((double)((1u << mbits) | frac), (int)field - bias - mbits);
}

static double dec16(uint16_t b, int is_bf16, int *e)
{
    int dummy;
    return is_bf16 ? decode_bits(b, 8, 7, e ? e : &dummy) : decode_bits(b, 5, 10, e ? e : &dummy);
}

/* Truncate a double toward zero to FP32; |v| >= 2^128 gives Inf (the rule the
 * H200 shows, docs/ORACLE.md). */
static float trunc_f32(double v)
{
    if (fabs(v) >= ldexp(1.0, 128)) return v < 0 ? -INFINITY : INFINITY;
    float r = (float)v;
    if (fabs((double)r) > fabs(v)) r = nextafterf(r, 0.0f);
    return r;
}

/* The sm90 step in double arithmetic: finite inputs only.  Every truncated
 * term is a multiple of 2^(E-25) below 2^(E+2), so the double sum is exact. */
static float brute_sm90(float c, const uint16_t *a, const uint16_t *b, int is_bf16)
{
    double terms[17];
    int exps[17], nonzero[17];
    int all_neg_zero = 1;
    for (int i = 0; i < 16; i++) {
        int ea, eb;
        double va = dec16(a[i], is_bf16, &ea), vb = dec16(b[i], is_bf16, &eb);
        terms[i] = va * vb; /* at most 22 significant bits: exact */
        exps[i] = ea + eb;
        nonzero[i] = terms[i] != 0;
        if (nonzero[i] || !signbit(terms[i])) all_neg_zero = 0;
    }
    int ec;
    terms[16] = decode_bits(fbits(c), 8, 23, &ec);
    exps[16] = ec;
    nonzero[16] = c != 0;
    if (nonzero[16] || !signbit(c)) all_neg_zero = 0;
    int have = 0, E = 0;
    for (int i = 0; i < 17; i++)
        if (nonzero[i] && (!have || exps[i] > E)) E = exps[i], have = 1;
    (void)all_neg_zero; /* the H200 returns +0 for every zero result */
    if (!have) return 0.0f;
    if (E < -133) E = -133; /* the alignment unit 2^(E-25) is at least 2^-158 */
    double sum = 0;
    for (int i = 0; i < 17; i++) sum += ldexp(trunc(ldexp(terms[i], 25 - E)), E - 25);
    float r = trunc_f32(sum);
    return r == 0 ? 0.0f : r;
}

/* Random 16-bit operand: sign, exponent field in [emin_f, emax_f], random
 * fraction; field 0 gives subnormals (or zeros). */
static uint16_t rand16(uint64_t *s, int is_bf16, int emin_f, int emax_f)
{
    int mbits = is_bf16 ? 7 : 10;
    uint32_t field = (uint32_t)(emin_f + (int)(test_rand(s) % (uint64_t)(emax_f - emin_f + 1)));
    uint32_t frac = (uint32_t)(test_rand(s) & ((1u << mbits) - 1));
    uint32_t sign = (uint32_t)(test_rand(s) & 1);
    if (test_rand(s) % 16 == 0) frac = 0;
    return (uint16_t)(sign << 15 | field << mbits | frac);
}

static float randf32(uint64_t *s, int emin_f, int emax_f)
{
    uint32_t field = (uint32_t)(emin_f + (int)(test_rand(s) % (uint64_t)(emax_f - emin_f + 1)));
    uint32_t u = (uint32_t)(test_rand(s) & 1) << 31 | field << 23 | (uint32_t)(test_rand(s) & 0x7fffff);
    return ffrom(u);
}

#define SAME(got, want) \
    CHECKF(fbits(got) == fbits(want), "got 0x%08x (%a) want 0x%08x (%a)", fbits(got), (double)(got), fbits(want), (double)(want))

/* Fill a[0..15], b[0..15] with the given products (a = value, b = 1). */
static void products(uint16_t *a, uint16_t *b, const double *vals, int n, int is_bf16)
{
    for (int i = 0; i < 16; i++) {
        double v = i < n ? vals[i] : 0.0;
        a[i] = is_bf16 ? bf(v) : h(v);
        b[i] = is_bf16 ? bf(1.0) : h(1.0);
    }
}

static void test_sm90_hand(void)
{
    uint16_t a[16], b[16];
    TEST("sm90 hand-worked")
    {
        double ones[16];
        for (int i = 0; i < 16; i++) ones[i] = 1.0;
        products(a, b, ones, 16, 0);
        SAME(nvfp4_sm90_step(0.0f, a, b, NVFP4_OPERAND_F16), 16.0f);

        /* small terms vanish: 1 + 16 * 2^-26; each 2^-26 is below 2^(0-25) */
        for (int i = 0; i < 16; i++) a[i] = b[i] = h(ldexp(1, -13));
        SAME(nvfp4_sm90_step(1.0f, a, b, NVFP4_OPERAND_F16), 1.0f);
        SAME(nvfp4_exact_dot(1.0f, a, b, 16, NVFP4_OPERAND_F16), 1.0f + ldexpf(1, -22));

        /* result truncated, not rounded: 1 + 3 * 2^-25 */
        for (int i = 0; i < 16; i++) a[i] = b[i] = 0;
        a[0] = h(3 * ldexp(1, -13));
        b[0] = h(ldexp(1, -12));
        SAME(nvfp4_sm90_step(1.0f, a, b, NVFP4_OPERAND_F16), 1.0f);
        SAME(nvfp4_exact_dot(1.0f, a, b, 16, NVFP4_OPERAND_F16), 1.0f + ldexpf(1, -23));

        /* toward zero for negatives: -1 + 2^-25 -> -(1 - 2^-24) */
        a[0] = h(ldexp(1, -13));
        SAME(nvfp4_sm90_step(-1.0f, a, b, NVFP4_OPERAND_F16), -(1.0f - ldexpf(1, -24)));

        /* cancellation to +0; signed zeros: the H200 never returns -0, even
         * when c and every product are -0 */
        double m1[1] = {-1.0};
        products(a, b, m1, 1, 0);
        SAME(nvfp4_sm90_step(1.0f, a, b, NVFP4_OPERAND_F16), 0.0f);
        SAME(nvfp4_sm90_step(-1.0f, a, b, NVFP4_OPERAND_F16), -2.0f);
        for (int i = 0; i < 16; i++) a[i] = 0x8000, b[i] = 0x0000; /* -0 * +0 = -0 */
        SAME(nvfp4_sm90_step(-0.0f, a, b, NVFP4_OPERAND_F16), 0.0f);
        SAME(nvfp4_sm90_step(0.0f, a, b, NVFP4_OPERAND_F16), 0.0f);
        /* the IEEE rule, kept as an alternative for the probe, would give -0 */
        nvfp4_sm90_rules ieee = nvfp4_sm90_hw_rules;
        ieee.zero_sign_ieee = 1;
        SAME(nvfp4_sm90_step_rules(-0.0f, a, b, NVFP4_OPERAND_F16, &ieee), -0.0f);
        b[3] = 0x8000; /* one product +0 */
        SAME(nvfp4_sm90_step_rules(-0.0f, a, b, NVFP4_OPERAND_F16, &ieee), 0.0f);
        /* a negative sum below 2^-149 truncates to +0 (BF16: -2^-80 * 2^-80) */
        for (int i = 0; i < 16; i++) a[i] = b[i] = 0;
        a[0] = bf(-ldexp(1, -80));
        b[0] = bf(ldexp(1, -80));
        SAME(nvfp4_sm90_step(-0.0f, a, b, NVFP4_OPERAND_BF16), 0.0f);
        /* the alignment unit never drops below 2^-158 (measured): with c = 0,
         * 2^-140 - 2^-160 keeps 2^-140 (512 units of 2^-149) because -2^-160
         * truncates to 0; without the floor (unit 2^-165) it is 511.99.. -> 511 */
        a[0] = bf(ldexp(1, -70));
        b[0] = bf(ldexp(1, -70));
        a[1] = bf(-ldexp(1, -80));
        b[1] = bf(ldexp(1, -80));
        SAME(nvfp4_sm90_step(0.0f, a, b, NVFP4_OPERAND_BF16), ffrom(0x200));
        nvfp4_sm90_rules no_floor = nvfp4_sm90_hw_rules;
        no_floor.min_unit_exp = -1000;
        SAME(nvfp4_sm90_step_rules(0.0f, a, b, NVFP4_OPERAND_BF16, &no_floor), ffrom(0x1ff));

        /* carry into a new binade: (2^24 - 1) + 1 = 2^24 */
        double one[1] = {1.0};
        products(a, b, one, 1, 0);
        SAME(nvfp4_sm90_step(16777215.0f, a, b, NVFP4_OPERAND_F16), 16777216.0f);

        /* the product term is not renormalised: 1.5*1.5 = 2.25 keeps exponent 0,
         * so c = -2^-25 survives alignment (unit 2^-25) and pulls the truncated
         * result below 2.25; a renormalised term (E = 1) would give 2.25. */
        for (int i = 0; i < 16; i++) a[i] = b[i] = 0;
        a[0] = b[0] = h(1.5);
        SAME(nvfp4_sm90_step(-ldexpf(1, -25), a, b, NVFP4_OPERAND_F16), 2.25f - ldexpf(1, -22));

        /* a zero product takes no part in E: 0 * 2^15 would have exponent
         * -14 + 15 = 1 and wipe out 3 * 2^-27 (unit 2^-24); it does not */
        for (int i = 0; i < 16; i++) a[i] = b[i] = 0;
        b[0] = h(32768.0);
        a[1] = h(3 * ldexp(1, -14));
        b[1] = h(ldexp(1, -13));
        SAME(nvfp4_sm90_step(0.0f, a, b, NVFP4_OPERAND_F16), 3 * ldexpf(1, -27));
        nvfp4_sm90_rules zeros_in_e = nvfp4_sm90_hw_rules;
        zeros_in_e.zero_product = NVFP4_ZERO_MIN_EXP;
        SAME(nvfp4_sm90_step_rules(0.0f, a, b, NVFP4_OPERAND_F16, &zeros_in_e), 0.0f);

        /* FP16 subnormals: 2^-24 * 2^-24 = 2^-48, exponent -28 */
        for (int i = 0; i < 16; i++) a[i] = b[i] = 0;
        a[0] = b[0] = 0x0001;
        SAME(nvfp4_sm90_step(0.0f, a, b, NVFP4_OPERAND_F16), ldexpf(1, -48));
        /* c = 2^-20 dominates: the subnormal product (2^-48) is below 2^(-20-25) */
        SAME(nvfp4_sm90_step(ldexpf(1, -20), a, b, NVFP4_OPERAND_F16), ldexpf(1, -20));

        /* subnormal FP32 result: BF16 2^-126 * 2^-10 = 2^-136 */
        for (int i = 0; i < 16; i++) a[i] = b[i] = 0;
        a[0] = bf(ldexp(1, -126));
        b[0] = bf(ldexp(1, -10));
        SAME(nvfp4_sm90_step(0.0f, a, b, NVFP4_OPERAND_BF16), ldexpf(1, -136));

        /* the largest exponents: BF16 2^127 * 2 overflows to Inf; two such
         * terms that cancel leave E = 128, and c = 1 (below 2^103) is lost */
        for (int i = 0; i < 16; i++) a[i] = b[i] = 0;
        a[0] = bf(ldexp(1, 127));
        b[0] = bf(2.0);
        SAME(nvfp4_sm90_step(0.0f, a, b, NVFP4_OPERAND_BF16), INFINITY);
        a[1] = bf(-ldexp(1, 127));
        b[1] = bf(2.0);
        SAME(nvfp4_sm90_step(1.0f, a, b, NVFP4_OPERAND_BF16), 0.0f);
        SAME(nvfp4_exact_dot(1.0f, a, b, 16, NVFP4_OPERAND_BF16), 1.0f);
        /* FLT_MAX = 2^128 - 2^104: + 2^104 reaches 2^128 (overflow); + 2^103
         * stays below and truncates back to FLT_MAX */
        for (int i = 0; i < 16; i++) a[i] = b[i] = 0;
        a[0] = bf(ldexp(1, 104));
        b[0] = bf(1.0);
        SAME(nvfp4_sm90_step(FLT_MAX, a, b, NVFP4_OPERAND_BF16), INFINITY);
        a[0] = bf(ldexp(1, 103));
        SAME(nvfp4_sm90_step(FLT_MAX, a, b, NVFP4_OPERAND_BF16), FLT_MAX);

        /* NaN and Inf */
        for (int i = 0; i < 16; i++) a[i] = b[i] = h(1.0);
        a[5] = 0x7c00; /* +Inf */
        SAME(nvfp4_sm90_step(0.0f, a, b, NVFP4_OPERAND_F16), INFINITY);
        SAME(nvfp4_sm90_step(-INFINITY, a, b, NVFP4_OPERAND_F16), ffrom(nvfp4_sm90_hw_rules.nan_bits));
        b[5] = 0; /* Inf * 0 */
        SAME(nvfp4_sm90_step(0.0f, a, b, NVFP4_OPERAND_F16), ffrom(nvfp4_sm90_hw_rules.nan_bits));
        a[5] = 0x7e01;
        b[5] = h(1.0);
        SAME(nvfp4_sm90_step(0.0f, a, b, NVFP4_OPERAND_F16), ffrom(nvfp4_sm90_hw_rules.nan_bits));
        a[5] = h(1.0);
        SAME(nvfp4_sm90_step(ffrom(0x7fc00001u), a, b, NVFP4_OPERAND_F16), ffrom(nvfp4_sm90_hw_rules.nan_bits));

        /* dot: a chain of steps */
        uint16_t a32[32], b32[32];
        for (int i = 0; i < 32; i++) a32[i] = b32[i] = h(1.0);
        SAME(nvfp4_sm90_dot(0.5f, a32, b32, 32, NVFP4_OPERAND_F16), 32.5f);
    }
}

static void test_sm90_random(void)
{
    uint64_t s = 0x1234567;
    uint16_t a[16], b[16];
    TEST("sm90 == double brute force (random, wide and narrow exponents)")
    {
        int bad = 0;
        for (int iter = 0; iter < 60000; iter++) {
            int is_bf16 = iter & 1;
            int mode = (iter >> 1) % 4;
            int emax = is_bf16 ? 254 : 30;
            int lo = 0, hi = emax;
            if (mode == 1) { /* narrow window: heavy cancellation and alignment */
                lo = 1 + (int)(test_rand(&s) % (uint64_t)(emax - 4));
                hi = lo + 3;
            } else if (mode == 2) { /* near the bottom: subnormals */
                lo = 0;
                hi = 3;
            }
            for (int i = 0; i < 16; i++) {
                a[i] = rand16(&s, is_bf16, lo, hi);
                b[i] = rand16(&s, is_bf16, lo, hi);
            }
            if (mode == 3) /* pairs that cancel exactly */
                for (int i = 0; i < 16; i += 2) a[i + 1] = a[i] ^ 0x8000, b[i + 1] = b[i];
            float c;
            switch (test_rand(&s) % 4) {
            case 0: c = 0.0f; break;
            case 1: c = randf32(&s, 0, 254); break;
            case 2: c = randf32(&s, 0, 3); break;
            default: { /* c near the products' scale */
                int e;
                double v = dec16(a[0], is_bf16, &e) * dec16(b[0], is_bf16, NULL);
                c = (float)(v * (1 + (double)(test_rand(&s) % 1000) / 997.0));
                if (isinf(c)) c = FLT_MAX;
            }
            }
            float got = nvfp4_sm90_step(c, a, b, is_bf16 ? NVFP4_OPERAND_BF16 : NVFP4_OPERAND_F16);
            float want = brute_sm90(c, a, b, is_bf16);
            if (fbits(got) != fbits(want) && bad++ < 5)
                fprintf(stderr, "sm90 mismatch iter %d bf16=%d c=%a got 0x%08x want 0x%08x\n", iter,
                        is_bf16, (double)c, fbits(got), fbits(want));
        }
        CHECKF(bad == 0, "%d mismatches", bad);
    }
    TEST("sm90 == exact when all terms are exact in 24 bits in one window")
    {
        int bad = 0;
        for (int iter = 0; iter < 20000; iter++) {
            int is_bf16 = iter & 1;
            /* small integers: every sum is exact in FP32 */
            for (int i = 0; i < 16; i++) {
                double x = (double)((int)(test_rand(&s) % 65) - 32);
                double y = (double)((int)(test_rand(&s) % 17) - 8);
                a[i] = is_bf16 ? bf(x) : h(x);
                b[i] = is_bf16 ? bf(y) : h(y);
            }
            float c = (float)((int)(test_rand(&s) % 20001) - 10000);
            nvfp4_operand t = is_bf16 ? NVFP4_OPERAND_BF16 : NVFP4_OPERAND_F16;
            float x1 = nvfp4_sm90_step(c, a, b, t), x2 = nvfp4_exact_dot(c, a, b, 16, t);
            if (fbits(x1) != fbits(x2)) bad++;
        }
        CHECKF(bad == 0, "%d mismatches", bad);
    }
}

static void test_exact(void)
{
    uint16_t a[64], b[64];
    uint64_t s = 99;
    TEST("exact hand-worked")
    {
        for (int i = 0; i < 16; i++) a[i] = b[i] = 0;
        a[0] = h(ldexp(1, -12));
        b[0] = h(ldexp(1, -12)); /* 2^-24: a tie at 1, rounds to even */
        SAME(nvfp4_exact_dot(1.0f, a, b, 16, NVFP4_OPERAND_F16), 1.0f);
        SAME(nvfp4_exact_dot(ffrom(0x3f800001u), a, b, 16, NVFP4_OPERAND_F16), ffrom(0x3f800002u));
        for (int i = 0; i < 16; i++) a[i] = b[i] = 0;
        a[0] = bf(ldexp(1, -12));
        b[0] = bf(ldexp(1, -12));
        a[1] = bf(ldexp(1, -30));
        b[1] = bf(ldexp(1, -30)); /* sticky bit past the tie */
        SAME(nvfp4_exact_dot(1.0f, a, b, 16, NVFP4_OPERAND_BF16), ffrom(0x3f800001u));
        /* subnormal results: 2^-150 is a tie between 0 and 2^-149 -> 0;
         * 3 * 2^-151 rounds up to 2^-149 */
        for (int i = 0; i < 16; i++) a[i] = b[i] = 0;
        a[0] = bf(ldexp(1, -126));
        b[0] = bf(ldexp(1, -24));
        SAME(nvfp4_exact_dot(0.0f, a, b, 16, NVFP4_OPERAND_BF16), 0.0f);
        a[0] = bf(-ldexp(1, -126));
        SAME(nvfp4_exact_dot(0.0f, a, b, 16, NVFP4_OPERAND_BF16), -0.0f);
        a[0] = bf(ldexp(3, -127));
        SAME(nvfp4_exact_dot(0.0f, a, b, 16, NVFP4_OPERAND_BF16), ffrom(1));
        /* the smallest BF16 product, 2^-266, as a sticky bit */
        a[1] = b[1] = 0x0001;
        a[0] = bf(ldexp(1, -126));
        SAME(nvfp4_exact_dot(0.0f, a, b, 16, NVFP4_OPERAND_BF16), ffrom(1));
        /* overflow: BF16 max * 2 -> Inf; huge terms that cancel leave c */
        for (int i = 0; i < 16; i++) a[i] = b[i] = 0;
        a[0] = 0x7f7f;
        b[0] = bf(2.0);
        SAME(nvfp4_exact_dot(0.0f, a, b, 16, NVFP4_OPERAND_BF16), INFINITY);
        a[1] = 0xff7f;
        b[1] = bf(2.0);
        SAME(nvfp4_exact_dot(ldexpf(1, -149), a, b, 16, NVFP4_OPERAND_BF16), ldexpf(1, -149));
        /* FLT_MAX + half an ulp (2^103) is a tie that rounds to even: Inf */
        for (int i = 0; i < 16; i++) a[i] = b[i] = 0;
        a[0] = bf(ldexp(1, 103));
        b[0] = bf(1.0);
        SAME(nvfp4_exact_dot(FLT_MAX, a, b, 16, NVFP4_OPERAND_BF16), INFINITY);
        a[0] = bf(ldexp(1, 102));
        SAME(nvfp4_exact_dot(FLT_MAX, a, b, 16, NVFP4_OPERAND_BF16), FLT_MAX);
        /* signed zeros */
        for (int i = 0; i < 16; i++) a[i] = 0x8000, b[i] = 0;
        SAME(nvfp4_exact_dot(-0.0f, a, b, 16, NVFP4_OPERAND_F16), -0.0f);
        SAME(nvfp4_exact_dot(0.0f, a, b, 16, NVFP4_OPERAND_F16), 0.0f);
        SAME(nvfp4_exact_dot(-0.0f, a, b, 0, NVFP4_OPERAND_F16), -0.0f);
        a[0] = h(1.0);
        b[0] = h(-1.0);
        SAME(nvfp4_exact_dot(1.0f, a, b, 16, NVFP4_OPERAND_F16), 0.0f);
        /* NaN / Inf per IEEE */
        a[0] = 0x7c00;
        b[0] = h(1.0);
        SAME(nvfp4_exact_dot(1.0f, a, b, 16, NVFP4_OPERAND_F16), INFINITY);
        CHECK(isnan(nvfp4_exact_dot(-INFINITY, a, b, 16, NVFP4_OPERAND_F16)));
        b[0] = 0;
        CHECK(isnan(nvfp4_exact_dot(1.0f, a, b, 16, NVFP4_OPERAND_F16)));
        a[0] = 0x7e00;
        CHECK(isnan(nvfp4_exact_dot(1.0f, a, b, 16, NVFP4_OPERAND_F16)));
        CHECK(isnan(nvfp4_exact_dot(NAN, a + 1, b + 1, 15, NVFP4_OPERAND_F16)));
    }
    TEST("exact == double sum on small-range inputs")
    {
        int bad = 0;
        for (int iter = 0; iter < 20000; iter++) {
            int is_bf16 = iter & 1;
            int bias = is_bf16 ? 127 : 15;
            int k = 16 * (1 + (int)(test_rand(&s) % 4));
            double sum = 0;
            for (int i = 0; i < k; i++) {
                a[i] = rand16(&s, is_bf16, bias - 4, bias + 4);
                b[i] = rand16(&s, is_bf16, bias - 4, bias + 4);
                sum += dec16(a[i], is_bf16, NULL) * dec16(b[i], is_bf16, NULL);
            }
            float c = randf32(&s, 127 - 4, 127 + 4);
            sum += c; /* every term a multiple of 2^-28 below 2^16: exact */
            float want = (float)sum;
            if (sum == 0) want = 0.0f;
            float got = nvfp4_exact_dot(c, a, b, k, is_bf16 ? NVFP4_OPERAND_BF16 : NVFP4_OPERAND_F16);
            if (fbits(got) != fbits(want) && bad++ < 5)
                fprintf(stderr, "exact mismatch: got %a want %a\n", (double)got, (double)want);
        }
        CHECKF(bad == 0, "%d mismatches", bad);
    }
}

/* ---- sm120 ------------------------------------------------------------ */

static double e2m1_value(uint8_t code)
{
    static const double v[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    return (code & 8) ? -v[code & 7] : v[code & 7];
}

/* |e4m3| as significand and exponent, as MMA-Sim's
 * extract_significand_exponent reads it: subnormal exponent -6, and a zero
 * (significand 0) has exponent -126. */
static double ue4m3_sig(uint8_t s, int *e)
{
    s &= 0x7f;
    int field = s >> 3, m = s & 7;
    *e = field ? field - 7 : m ? -6 : -126;
    return field ? 1 + m / 8.0 : m / 8.0;
}

static float brute_sm120(float c, const uint8_t *ac, const uint8_t *as, const uint8_t *bc,
                         const uint8_t *bs)
{
    double terms[5];
    int exps[5];
    for (int j = 0; j < 4; j++) {
        double sum = 0;
        for (int i = 0; i < 16; i++) sum += e2m1_value(ac[16 * j + i]) * e2m1_value(bc[16 * j + i]);
        int ea, eb;
        double sa = ue4m3_sig(as[j], &ea), sb = ue4m3_sig(bs[j], &eb);
        terms[j] = sum * sa * sb * ldexp(1, ea + eb);
        exps[j] = ea + eb;
    }
    int ec;
    terms[4] = decode_bits(fbits(c), 8, 23, &ec);
    if (c == 0) ec = -126; /* MMA-Sim: a zero has exponent -126; c always takes part */
    exps[4] = ec;
    int E = exps[0];
    for (int j = 1; j < 5; j++)
        if (exps[j] > E) E = exps[j];
    double sum = 0;
    for (int j = 0; j < 5; j++) sum += ldexp(trunc(ldexp(terms[j], 35 - E)), E - 35);
    float r = trunc_f32(sum);
    return r == 0 ? 0.0f : r;
}

static void test_sm120(void)
{
    uint8_t ac[64], bc[64], as[4], bs[4];
    uint64_t s = 4242;
    TEST("sm120 hand-worked")
    {
        memset(ac, 2, 64); /* 1.0 */
        memset(bc, 2, 64);
        memset(as, 0x38, 4); /* 1.0 */
        memset(bs, 0x38, 4);
        SAME(nvfp4_sm120_step(0.0f, ac, as, bc, bs), 64.0f);
        as[1] = 0xb8; /* sign of a scale is ignored */
        SAME(nvfp4_sm120_step(0.5f, ac, as, bc, bs), 64.5f);
        as[2] = 0x7f; /* NaN scale */
        CHECK(isnan(nvfp4_sm120_step(0.0f, ac, as, bc, bs)));
        /* truncation at 2^(E-35): blocks 0 and 2 cancel at exponent 16
         * (scales 448 = 1.75 * 2^8); block 1 = 0.25 * 2^-18 = 2^-20 is below
         * 2^(16-35) and vanishes, so the result is 0 (exactly: 2^-20) */
        memset(ac, 0, 64);
        memset(bc, 0, 64);
        as[0] = bs[0] = as[2] = bs[2] = 0x7e;
        as[1] = bs[1] = 0x01; /* 2^-9 = (1/8) * 2^-6 */
        as[3] = bs[3] = 0x01;
        ac[0] = bc[0] = 1;  /* 0.5 * 0.5 */
        ac[16] = bc[16] = 1;
        ac[32] = 9;         /* -0.5 */
        bc[32] = 1;
        SAME(nvfp4_sm120_step(0.0f, ac, as, bc, bs), 0.0f);
        /* block 1 raised to scale 2^-6 (0x08): 0.25 * 2^-12 = 2^-14 >= 2^-19 stays */
        as[1] = bs[1] = 0x08;
        SAME(nvfp4_sm120_step(0.0f, ac, as, bc, bs), ldexpf(1, -14));
        /* zero results are +0 (the sm90 rule), even from -0 products and c = -0 */
        memset(ac, 8, 64);
        memset(bc, 0, 64);
        memset(as, 0x38, 4);
        memset(bs, 0x38, 4);
        SAME(nvfp4_sm120_step(-0.0f, ac, as, bc, bs), 0.0f);
        SAME(nvfp4_sm120_step(0.0f, ac, as, bc, bs), 0.0f);
        SAME(nvfp4_sm120_step(INFINITY, ac, as, bc, bs), INFINITY);
    }
    TEST("sm120 zero, subnormal, maximum and NaN scales (hand-derived)")
    {
        /* Zero scale.  Block 0: codes 6 x 6 everywhere, but A's scale is 0
         * and B's 448 (0x7e = 1.75 * 2^8); blocks 1..3: both scales 0.  c =
         * 2^-20 * (1 + 2^-23) (0x35800001, lowest bit 2^-43).  Every block
         * term is zero.  Published model: a zero scale has exponent -126, so
         * block 0 has exponent -118 and E = e_c = -20: c survives whole.
         * (Reading the zero scale as the subnormal exponent -6 instead gives
         * block 0 exponent 2, unit 2^-33, and c truncated to 0x35800000.) */
        memset(ac, 7, 64);
        memset(bc, 7, 64);
        memset(as, 0, 4);
        memset(bs, 0, 4);
        bs[0] = 0x7e;
        float c = ffrom(0x35800001u);
        CHECKF(fbits(nvfp4_sm120_step(c, ac, as, bc, bs)) == 0x35800001u, "zero scale: %08x",
               fbits(nvfp4_sm120_step(c, ac, as, bc, bs)));
        /* a zero scale also on the other side (both 0: exponent -252): same */
        bs[0] = 0;
        CHECK(fbits(nvfp4_sm120_step(c, ac, as, bc, bs)) == 0x35800001u);
        /* ... and with c = 0 the result is +0 */
        CHECK(fbits(nvfp4_sm120_step(0.0f, ac, as, bc, bs)) == 0u);

        /* Subnormal scale.  A's block 0 scale 0x01 = (1/8) * 2^-6 = 2^-9, B's
         * 0x38 = 1; one product 1.0 * 1.0 (codes 2): term 2^-9.  Blocks 1..3
         * zero-scaled.  c = 1 + 2^-23: E = 0, unit 2^-35, nothing truncated;
         * 1 + 2^-9 + 2^-23 fits 24 bits: 0x3f804001. */
        memset(ac, 0, 64);
        memset(bc, 0, 64);
        memset(as, 0, 4);
        memset(bs, 0, 4);
        as[0] = 0x01;
        bs[0] = 0x38;
        ac[0] = bc[0] = 2;
        CHECK(fbits(nvfp4_sm120_step(ffrom(0x3f800001u), ac, as, bc, bs)) == 0x3f804001u);
        CHECK(fbits(nvfp4_sm120_step(0.0f, ac, as, bc, bs)) == fbits(ldexpf(1, -9)));
        /* subnormal 0x07 = (7/8) * 2^-6 on both sides, codes 6 x 6 in all 16:
         * 576 * 49/64 * 2^-12 = 441 * 2^-12 (exact) */
        as[0] = bs[0] = 0x07;
        memset(ac, 7, 16);
        memset(bc, 7, 16);
        CHECK(nvfp4_sm120_step(0.0f, ac, as, bc, bs) == ldexpf(441, -12));

        /* Maximum scales.  All four blocks: codes 6 x 6, scales 448 x 448:
         * each block 576 * 200704 = 441 * 2^18, total 441 * 2^20 = 462422016
         * (exact).  With c = 1: E = 16, unit 2^-19 keeps c, but the sum
         * 462422017 truncates to 24 bits (ulp 32): 462422016 again. */
        memset(ac, 7, 64);
        memset(bc, 7, 64);
        memset(as, 0x7e, 4);
        memset(bs, 0x7e, 4);
        CHECK(nvfp4_sm120_step(0.0f, ac, as, bc, bs) == 462422016.0f);
        CHECK(nvfp4_sm120_step(1.0f, ac, as, bc, bs) == 462422016.0f);
        /* the same with negative B codes (14 = -6): -462422016; c = -1 likewise */
        memset(bc, 15, 64);
        CHECK(nvfp4_sm120_step(-1.0f, ac, as, bc, bs) == -462422016.0f);

        /* NaN scales (0x7f, 0xff), in any block and on either side, and a
         * NaN c: the step returns 0x7fffffff, as MMA-Sim does. */
        for (int j = 0; j < 4; j++) {
            memset(as, 0x38, 4);
            memset(bs, 0x38, 4);
            if (j % 2) as[j] = 0x7f; else bs[j] = 0xff;
            CHECK(fbits(nvfp4_sm120_step(0.0f, ac, as, bc, bs)) == 0x7fffffffu);
        }
        memset(as, 0x38, 4);
        memset(bs, 0x38, 4);
        CHECK(fbits(nvfp4_sm120_step(ffrom(0x7fc00000u), ac, as, bc, bs)) == 0x7fffffffu);
    }
    TEST("sm120 == published model, many zero scales (random)")
    {
        /* Scales drawn so that about a third are zero and a few subnormal:
         * the cases where the exponent of a zero scale decides E. */
        int bad = 0, zero_steps = 0;
        for (int iter = 0; iter < 50000; iter++) {
            int any_zero = 0;
            for (int i = 0; i < 64; i++) {
                ac[i] = (uint8_t)(test_rand(&s) & 15);
                bc[i] = (uint8_t)(test_rand(&s) & 15);
            }
            for (int j = 0; j < 4; j++) {
                uint64_t r = test_rand(&s) % 9;
                as[j] = r < 3 ? 0 : r == 3 ? (uint8_t)(test_rand(&s) % 8) : (uint8_t)(test_rand(&s) % 0x7f);
                r = test_rand(&s) % 9;
                bs[j] = r < 3 ? 0 : r == 3 ? (uint8_t)(test_rand(&s) % 8) : (uint8_t)(test_rand(&s) % 0x7f);
                if (test_rand(&s) % 2) as[j] |= 0x80; /* the sign bit is ignored */
                any_zero |= (as[j] & 0x7f) == 0 || (bs[j] & 0x7f) == 0;
            }
            zero_steps += any_zero;
            float c = (iter % 5 == 0) ? 0.0f : randf32(&s, 90 + (int)(test_rand(&s) % 50), 140);
            float got = nvfp4_sm120_step(c, ac, as, bc, bs);
            float want = brute_sm120(c, ac, as, bc, bs);
            if (fbits(got) != fbits(want) && bad++ < 5)
                fprintf(stderr, "sm120 mismatch iter %d: got %a want %a\n", iter, (double)got,
                        (double)want);
        }
        CHECKF(bad == 0, "%d mismatches", bad);
        CHECKF(zero_steps > 30000, "only %d steps with a zero scale", zero_steps);
    }
    TEST("sm120 == double brute force (random)")
    {
        int bad = 0;
        for (int iter = 0; iter < 20000; iter++) {
            for (int i = 0; i < 64; i++) {
                ac[i] = (uint8_t)(test_rand(&s) & 15);
                bc[i] = (uint8_t)(test_rand(&s) & 15);
            }
            for (int j = 0; j < 4; j++) {
                as[j] = (uint8_t)(test_rand(&s) % 0x7f); /* no NaN */
                bs[j] = (uint8_t)(test_rand(&s) % 0x7f);
                if (iter % 3 == 0) as[j] = (uint8_t)(0x30 + test_rand(&s) % 16), bs[j] = (uint8_t)(0x30 + test_rand(&s) % 16);
            }
            float c = (iter % 4 == 0) ? 0.0f : randf32(&s, 100 + (int)(test_rand(&s) % 40), 140);
            float got = nvfp4_sm120_step(c, ac, as, bc, bs);
            float want = brute_sm120(c, ac, as, bc, bs);
            if (fbits(got) != fbits(want) && bad++ < 5)
                fprintf(stderr, "sm120 mismatch iter %d: got %a want %a\n", iter, (double)got, (double)want);
        }
        CHECKF(bad == 0, "%d mismatches", bad);
    }
}

/* ---- gemm_ref --------------------------------------------------------- */

static double e4m3_abs(uint8_t s)
{
    int e;
    double sig = ue4m3_sig(s, &e);
    return ldexp(sig, e);
}

static uint16_t bf16_rne(float v) /* test's own RNE to BF16 (finite or Inf) */
{
    uint32_t u = fbits(v);
    uint32_t lower = u & 0xffff, keep = u >> 16;
    if (lower > 0x8000 || (lower == 0x8000 && (keep & 1))) keep++;
    return (uint16_t)keep;
}

typedef struct mat {
    int64_t rows, cols;
    uint8_t codes[8][128]; /* logical codes */
    uint8_t scales[8][8];
} mat;

/* Build an nvfp4_tensor holding m in the given order / layout. */
static void to_tensor(nvfp4_tensor *t, const mat *m, nvfp4_nibble_order order, nvfp4_scale_layout layout,
                      uint8_t *codes_buf, uint8_t *scales_buf, float pts)
{
    t->rows = m->rows;
    t->cols = m->cols;
    t->codes = codes_buf;
    t->scales = scales_buf;
    t->per_tensor_scale = pts;
    t->nibble_order = order;
    t->scale_layout = layout;
    for (int64_t r = 0; r < m->rows; r++)
        for (int64_t c = 0; c < m->cols; c += 2) {
            uint8_t e0 = m->codes[r][c], e1 = m->codes[r][c + 1];
            codes_buf[(r * m->cols + c) / 2] = order == NVFP4_HI_FIRST ? (uint8_t)(e0 << 4 | e1) : (uint8_t)(e1 << 4 | e0);
        }
    int64_t nb = m->cols / 16;
    if (layout == NVFP4_SCALES_ROW_MAJOR) {
        for (int64_t r = 0; r < m->rows; r++)
            for (int64_t cb = 0; cb < nb; cb++) scales_buf[r * nb + cb] = m->scales[r][cb];
    } else {
        int64_t ncb = ((nb + 3) / 4 * 4) / 4;
        memset(scales_buf, 0, (size_t)(((m->rows + 127) / 128) * 128 * ncb * 4));
        for (int64_t r = 0; r < m->rows; r++)
            for (int64_t cb = 0; cb < nb; cb++)
                scales_buf[((r / 128) * ncb + cb / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + cb % 4] =
                    m->scales[r][cb];
    }
}

static void test_gemm(void)
{
    static mat A, B;
    static uint8_t acodes[2][512], bcodes[2][512], ascales[2][1024], bscales[2][1024];
    uint64_t s = 777;
    TEST("nvfp4_oracle_f16_operand: every code x scale")
    {
        int bad = 0;
        for (int code = 0; code < 16; code++)
            for (int sc = 0; sc < 256; sc++) {
                uint16_t got = nvfp4_oracle_f16_operand((uint8_t)code, (uint8_t)sc);
                if ((sc & 0x7f) == 0x7f) {
                    if ((got & 0x7c00) != 0x7c00 || (got & 0x3ff) == 0) bad++;
                    continue;
                }
                double want = e2m1_value((uint8_t)code) * e4m3_abs((uint8_t)sc);
                if (want == 0 && (code & 8)) want = -0.0;
                if (got != h(want)) bad++;
            }
        CHECKF(bad == 0, "%d wrong", bad);
    }
    TEST("gemm_ref: small exact-range case, all models, all layouts")
    {
        A.rows = 3, A.cols = 96; /* 96: SM120 pads the second k64 group */
        B.rows = 5, B.cols = 96;
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 96; c++) A.codes[r][c] = (uint8_t)(test_rand(&s) & 15);
        for (int r = 0; r < 5; r++)
            for (int c = 0; c < 96; c++) B.codes[r][c] = (uint8_t)(test_rand(&s) & 15);
        /* scales 2^-1 .. 2^1 (fields 6..8): sums stay exact in FP32 */
        for (int r = 0; r < 3; r++)
            for (int cb = 0; cb < 6; cb++) A.scales[r][cb] = (uint8_t)(0x30 + test_rand(&s) % 24 + ((test_rand(&s) & 1) << 7));
        for (int r = 0; r < 5; r++)
            for (int cb = 0; cb < 6; cb++) B.scales[r][cb] = (uint8_t)(0x30 + test_rand(&s) % 24);
        float bias[5] = {0.25f, -3.0f, 1e-3f, 100.0f, -0.0f};
        float want_raw[15];
        uint16_t want_out[15];
        float alpha = 0.75f * 3.0f;
        for (int m = 0; m < 3; m++)
            for (int n = 0; n < 5; n++) {
                double sum = 0;
                for (int k = 0; k < 96; k++)
                    sum += e2m1_value(A.codes[m][k]) * e4m3_abs(A.scales[m][k / 16]) *
                           e2m1_value(B.codes[n][k]) * e4m3_abs(B.scales[n][k / 16]);
                want_raw[m * 5 + n] = (float)sum + 0.0f; /* exact; a zero sum is +0 */
                want_out[m * 5 + n] = bf16_rne(alpha * want_raw[m * 5 + n] + bias[n]);
            }
        for (int model = 0; model < 3; model++)
            for (int lay = 0; lay < 4; lay++) {
                nvfp4_tensor ta, tb;
                to_tensor(&ta, &A, (nvfp4_nibble_order)(lay & 1), (nvfp4_scale_layout)(lay >> 1), acodes[0], ascales[0], 0.75f);
                to_tensor(&tb, &B, (nvfp4_nibble_order)((lay >> 1) & 1), (nvfp4_scale_layout)(lay & 1), bcodes[0], bscales[0], 3.0f);
                float raw[15];
                uint16_t out[15];
                nvfp4_gemm_args args = {&ta, &tb, bias, raw, out, (nvfp4_model)model, 1, 1};
                CHECK(nvfp4_gemm_ref(&args) == NVFP4_OK);
                test_equal_bits("raw", raw, want_raw, 4, 3, 5);
                test_equal_bits("out", out, want_out, 2, 3, 5);
            }
    }
    TEST("gemm_ref: wide-range data goes through the model functions")
    {
        A.rows = 2, A.cols = 128;
        B.rows = 3, B.cols = 128;
        for (int r = 0; r < 2; r++) {
            for (int c = 0; c < 128; c++) A.codes[r][c] = (uint8_t)(test_rand(&s) & 15);
            for (int cb = 0; cb < 8; cb++) A.scales[r][cb] = (uint8_t)(test_rand(&s) % 0x7f);
        }
        for (int r = 0; r < 3; r++) {
            for (int c = 0; c < 128; c++) B.codes[r][c] = (uint8_t)(test_rand(&s) & 15);
            for (int cb = 0; cb < 8; cb++) B.scales[r][cb] = (uint8_t)(test_rand(&s) % 0x7f);
        }
        B.scales[2][3] = 0xff; /* NaN scale: row 2 of B gives NaN */
        nvfp4_tensor ta, tb;
        to_tensor(&ta, &A, NVFP4_HI_FIRST, NVFP4_SCALES_TILED, acodes[1], ascales[1], 1.0f);
        to_tensor(&tb, &B, NVFP4_LO_FIRST, NVFP4_SCALES_ROW_MAJOR, bcodes[1], bscales[1], 1.0f);
        for (int model = 0; model < 3; model++) {
            float raw[6], want[6];
            uint16_t out[6], want_out[6];
            nvfp4_gemm_args args = {&ta, &tb, NULL, raw, out, (nvfp4_model)model, 1, 1};
            CHECK(nvfp4_gemm_ref(&args) == NVFP4_OK);
            for (int m = 0; m < 2; m++)
                for (int n = 0; n < 3; n++) {
                    uint16_t a16[128], b16[128];
                    for (int k = 0; k < 128; k++) {
                        a16[k] = h(e2m1_value(A.codes[m][k]) * e4m3_abs(A.scales[m][k / 16]) + ((A.codes[m][k] & 8) ? -0.0 : 0.0));
                        double bv = (B.scales[n][k / 16] & 0x7f) == 0x7f ? 0.0 : e4m3_abs(B.scales[n][k / 16]);
                        b16[k] = h(e2m1_value(B.codes[n][k]) * bv + ((B.codes[n][k] & 8) ? -0.0 : 0.0));
                        if ((B.scales[n][k / 16] & 0x7f) == 0x7f) b16[k] = 0x7e00;
                    }
                    float acc = 0.0f;
                    if (model == NVFP4_MODEL_SM90) {
                        for (int k = 0; k < 128; k += 16) acc = nvfp4_sm90_step(acc, a16 + k, b16 + k, NVFP4_OPERAND_F16);
                    } else if (model == NVFP4_MODEL_EXACT) {
                        acc = nvfp4_exact_dot(0.0f, a16, b16, 128, NVFP4_OPERAND_F16);
                    } else {
                        for (int k = 0; k < 128; k += 64) {
                            uint8_t as[4], bs[4];
                            for (int j = 0; j < 4; j++) as[j] = A.scales[m][k / 16 + j], bs[j] = B.scales[n][k / 16 + j];
                            acc = nvfp4_sm120_step(acc, &A.codes[m][k], as, &B.codes[n][k], bs);
                        }
                    }
                    want[m * 3 + n] = acc;
                    want_out[m * 3 + n] = bf16_rne(acc);
                    if (isnan(acc)) want_out[m * 3 + n] = nvfp4_epilogue(acc, 1.0f, NULL);
                }
            test_equal_bits("raw", raw, want, 4, 2, 3);
            test_equal_bits("out", out, want_out, 2, 2, 3);
            CHECK(isnan(raw[2]) && isnan(raw[5]));
        }
    }
    TEST("gemm_ref: argument errors")
    {
        nvfp4_tensor ta, tb;
        A.rows = 2, A.cols = 32;
        B.rows = 2, B.cols = 32;
        to_tensor(&ta, &A, NVFP4_HI_FIRST, NVFP4_SCALES_ROW_MAJOR, acodes[0], ascales[0], 1.0f);
        to_tensor(&tb, &B, NVFP4_HI_FIRST, NVFP4_SCALES_ROW_MAJOR, bcodes[0], bscales[0], 1.0f);
        float raw[4];
        nvfp4_gemm_args args = {&ta, &tb, NULL, raw, NULL, NVFP4_MODEL_SM90, 1, 1};
        CHECK(nvfp4_gemm_ref(&args) == NVFP4_OK);
        CHECK(nvfp4_gemm_ref(NULL) == NVFP4_ERR_INVALID_ARGUMENT);
        tb.cols = 48;
        CHECK(nvfp4_gemm_ref(&args) == NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(strstr(nvfp4_last_error(), "K differs") != NULL);
        tb.cols = 32;
        ta.cols = 33;
        tb.cols = 33;
        CHECK(nvfp4_gemm_ref(&args) == NVFP4_ERR_INVALID_ARGUMENT);
        ta.cols = tb.cols = 32;
        args.b = NULL;
        CHECK(nvfp4_gemm_ref(&args) == NVFP4_ERR_INVALID_ARGUMENT);
        args.b = &tb;
        args.raw = NULL;
        CHECK(nvfp4_gemm_ref(&args) == NVFP4_ERR_INVALID_ARGUMENT);
        args.raw = raw;
        args.model = (nvfp4_model)7;
        CHECK(nvfp4_gemm_ref(&args) == NVFP4_ERR_INVALID_ARGUMENT);
    }
    TEST("alpha, epilogue, model names")
    {
        SAME(nvfp4_gemm_alpha(3.0f, 1.0f / 3.0f), 3.0f * (1.0f / 3.0f));
        CHECK(nvfp4_gemm_alpha(ldexpf(1, -100), ldexpf(1, -100)) == 0.0f);
        float bias = 1.0f;
        /* 1 + 2^-8 in BF16 is a tie: rounds to even (1.0); with 2^-8 + 2^-20 up */
        CHECK(nvfp4_epilogue(ldexpf(1, -8), 1.0f, &bias) == 0x3f80);
        CHECK(nvfp4_epilogue(ldexpf(1, -8) + ldexpf(1, -20), 1.0f, &bias) == 0x3f81);
        CHECK(nvfp4_epilogue(3.0f, 0.5f, NULL) == 0x3fc0);
        CHECK(nvfp4_epilogue(FLT_MAX, 2.0f, NULL) == 0x7f80);
        nvfp4_model mo;
        for (int i = 0; i < 3; i++) {
            CHECK(nvfp4_model_from_name(&mo, nvfp4_model_name((nvfp4_model)i)) == NVFP4_OK);
            CHECK(mo == (nvfp4_model)i);
        }
        CHECK(strcmp(nvfp4_model_name(NVFP4_MODEL_SM90), "sm90") == 0);
        CHECK(nvfp4_model_from_name(&mo, "sm91") == NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(nvfp4_model_from_name(&mo, NULL) == NVFP4_ERR_INVALID_ARGUMENT);
    }
}

int main(void)
{
    test_sm90_hand();
    test_sm90_random();
    test_exact();
    test_sm120();
    test_gemm();
    return test_summary("oracle");
}
