/* thresholds.h -- the quantizer's per-element step as a table of thresholds,
 * exact (docs/STREAMING_A.md, "Threshold tables").  Plain C11 for the host and
 * CUDA C++ for host and device: the H200's block kernel
 * (src/cuda/sm90_quantize.cu) calls these very functions, and
 * tests/unit/test_thresholds.c checks them against quantize_ref.c.
 *
 * For one per-tensor scale pts and one scale byte s8, the reference codes
 * an element v as
 *   eager: e2m1(clamp6(RN(v / t))),      t   = RN(pts * e4m3(s8)), +0 if t == 0
 *   cuda:  e2m1(mul.ftz(v, enc)),        enc = min.ftz(rcp.approx.ftz(mul.ftz(pts, e4m3(s8))), FLT_MAX)
 * With t (enc) positive and finite, RN, the clamp, E2M1's rounding and
 * mul.ftz are monotone, the sign is kept (-v gives code | 8, -0 gives 8), so
 * the code's magnitude is #{i : |v| >= thr[i]}, thr[i] the smallest |v|
 * whose magnitude is at least i + 1.  Finding thr[i] exactly:
 *   E2M1 puts magnitude i + 1 above the midpoint theta_i (0.25 0.75 1.25
 *   1.75 2.5 3.5 5); its ties go to the even code, so the condition on the
 *   FP32 quotient / product q is q > theta_i for even i, q >= theta_i for
 *   odd i.  q is the RN of the exact x = v / t (v * enc); theta_i has an
 *   even significand, so RN(x) >= theta_i <=> x >= theta_i - ulp/2 and
 *   RN(x) > theta_i <=> x > theta_i + ulp/2: an exact real comparison with
 *   a 25-bit midpoint mid_i (the constants in thr_build).  Eager: v >= t *
 *   mid_i, a 24 x 25-bit product, exact in double; cuda: v * enc against
 *   mid_i, a 24 x 24-bit product, exact in double.  So a threshold is the
 *   smallest FP32 passing an exact double test: a candidate (rounded
 *   t * mid_i, or mid_i / enc) is checked and stepped by one ulp until it
 *   is the boundary.  The comparisons near theta_i >= 0.25 never see a
 *   subnormal q, so IEEE underflow and mul.ftz's flushed tiny products are
 *   outside them; mul.ftz's flushed subnormal INPUT is not: in the cuda
 *   variant every threshold is at least 2^-126.  Inf (pattern 0x7F800000)
 *   passes every test (Inf / t = Inf * enc = Inf -> code 7), so thresholds
 *   never exceed it; +0 passes none (code 0), so they are at least 1.
 * Not table-shaped (thr_build says THR_EXACT: the caller runs the exact
 * steps): the E4M3 NaN byte (0x7F, 0xFF); t or enc zero, negative, NaN or
 * Inf (eager t == 0 is THR_ZERO: comfy-kitchen's mask, every code +0);
 * and any NaN element (the caller checks the block). */
#ifndef NVFP4_QUANT_THRESHOLDS_H
#define NVFP4_QUANT_THRESHOLDS_H

#include <stdint.h>
#include <string.h>

#include "formats/layout.h" /* NVFP4_HOST_DEVICE */

#ifndef __CUDA_ARCH__
#ifdef __cplusplus
extern "C" {
#endif
#include "quant/quant_sm90.h" /* the H200 reciprocal table, for the host model */
#ifdef __cplusplus
}
#endif
#endif

enum { THR_EXACT = 0, THR_TABLE = 1, THR_ZERO = 2 };

/* Fixed-count loops over register arrays must unroll on the device. */
#ifdef __CUDA_ARCH__
#define THR_UNROLL _Pragma("unroll")
#else
#define THR_UNROLL
#endif

#define THR_INF_BITS 0x7F800000u
#define THR_FLT_MAX 3.40282347e+38f

NVFP4_HOST_DEVICE uint32_t thr_bits(float v)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(v);
#else
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
#endif
}

NVFP4_HOST_DEVICE float thr_float(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
#endif
}

/* The value of a non-NaN E4M3 byte, exact (as nvfp4_e4m3_to_f32). */
NVFP4_HOST_DEVICE float thr_e4m3(uint32_t s8)
{
    const uint32_t e = (s8 >> 3) & 15u, m = s8 & 7u;
    const float v = e == 0u ? (float)m * 0x1p-9f : thr_float(((e + 120u) << 23) | (m << 20));
    return thr_float(thr_bits(v) | ((s8 & 0x80u) << 24));
}

/*---- the FP32 steps of the two variants: the device's instructions, or the host's models ----*/

/* RN(a * b), subnormals kept (the eager t). */
NVFP4_HOST_DEVICE float thr_mul_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

#ifndef __CUDA_ARCH__
NVFP4_HOST_DEVICE float thr_ftz_in(float v) /* .ftz on an operand: subnormal -> signed zero */
{
    const uint32_t b = thr_bits(v);
    return (b & 0x7F800000u) ? v : thr_float(b & 0x80000000u);
}
#endif

/* mul.ftz.f32 (docs/FORMATS.md): flushed operands, one rounding, a result
 * whose rounding is below 2^-126 flushed; the host returns some NaN where
 * the device does (callers only test NaN-ness). */
NVFP4_HOST_DEVICE float thr_mul_ftz(float a, float b)
{
#ifdef __CUDA_ARCH__
    float r;
    asm("mul.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    const uint32_t neg = (thr_bits(a) ^ thr_bits(b)) & 0x80000000u;
    const double p = (double)thr_ftz_in(a) * (double)thr_ftz_in(b); /* exact */
    if (p != p) return thr_float(0x7FFFFFFFu);
    if ((p < 0 ? -p : p) < 0x1.ffffffp-127) return thr_float(neg); /* zeros keep the sign */
    return p >= 0x1p128 ? thr_float(THR_INF_BITS) : p <= -0x1p128 ? thr_float(0xFF800000u) : (float)p;
#endif
}

/* rcp.approx.ftz.f32: the H200's tabled reciprocal (quant_sm90.h). */
NVFP4_HOST_DEVICE float thr_rcp(float x)
{
#ifdef __CUDA_ARCH__
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
#else
    const uint32_t u = thr_bits(x), s = u & 0x80000000u, a = u & 0x7FFFFFFFu;
    if (a > THR_INF_BITS) return thr_float(0x7FFFFFFFu);
    if (a == THR_INF_BITS) return thr_float(s);
    if (a < 0x00800000u) return thr_float(s | THR_INF_BITS); /* +-0, flushed subnormals */
    const int32_t e = (int32_t)(a >> 23) - 127;
    const uint32_t m = a & 0x7FFFFFu;
    const int32_t y = (int32_t)thr_bits(1.0f / thr_float(0x3F800000u | m)) + nvfp4_sm90_rcp_diff(m);
    if ((y >> 23) - e <= 0) return thr_float(s);
    return thr_float(s | (uint32_t)(y - e * (1 << 23)));
#endif
}

/* min.ftz.f32(x, FLT_MAX): a NaN x loses. */
NVFP4_HOST_DEVICE float thr_min_fltmax(float x)
{
#ifdef __CUDA_ARCH__
    float r;
    asm("min.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(x), "f"(THR_FLT_MAX));
    return r;
#else
    x = thr_ftz_in(x);
    if (x != x) return THR_FLT_MAX;
    return x < THR_FLT_MAX ? x : THR_FLT_MAX;
#endif
}

/*----------------------------- building an entry -----------------------------*/

/* Does FP32 pattern c (non-negative, <= Inf) reach the bound? */
NVFP4_HOST_DEVICE int thr_pass(uint32_t c, double scale, double bound, int strict)
{
    const double x = (double)thr_float(c) * scale; /* exact: 24 x 24 bits */
    return strict ? x > bound : x >= bound;
}

/* A candidate double as an FP32 pattern to nearest (above FLT_MAX: Inf), at
 * least lo: where thr_search and thr_near start. */
NVFP4_HOST_DEVICE uint32_t thr_candidate(double cand, uint32_t lo)
{
    const uint32_t c = cand > 0x1.fffffep127 ? THR_INF_BITS : thr_bits((float)cand);
    return c < lo ? lo : c;
}

/* The smallest pattern c >= lo that passes, from a candidate within an ulp
 * or two: the test is monotone in c and Inf always passes. */
NVFP4_HOST_DEVICE uint32_t thr_search(double cand, uint32_t lo, double scale, double bound, int strict)
{
    uint32_t c = thr_candidate(cand, lo);
    if (thr_pass(c, scale, bound, strict)) {
        while (c > lo && thr_pass(c - 1u, scale, bound, strict)) c--;
    } else {
        do c++;
        while (!thr_pass(c, scale, bound, strict));
    }
    return c;
}

/* thr_search's answer where the candidate's neighbours bracket it, without
 * a branch: *bracketed = 0 where they do not (the caller walks then).  The
 * test is monotone, so the answer is the candidate c when c passes and c - 1
 * (if >= lo) does not, c + 1 when c fails and c + 1 passes.  Why: the walk's
 * loops kept an entry's seven searches one after another (about 2,200
 * cycles an entry on the device, dev/cuda/probe_table); these seven are
 * independent straight-line code. */
NVFP4_HOST_DEVICE uint32_t thr_near(double cand, uint32_t lo, double scale, double bound, int strict,
                                    int *bracketed)
{
    const uint32_t c = thr_candidate(cand, lo);
    const int above_lo = c > lo, below_inf = c < THR_INF_BITS;
    const int p0 = thr_pass(c, scale, bound, strict);
    const int pm = above_lo & thr_pass(c - (uint32_t)above_lo, scale, bound, strict);
    const int pp = below_inf ? thr_pass(c + (uint32_t)below_inf, scale, bound, strict) : 1;
    *bracketed = (p0 && !pm) || (!p0 && pp); /* ints: no branch is needed */
    return p0 ? c : c + 1u;
}

/* The smallest FP32 pattern at or above a positive double (above FLT_MAX:
 * Inf), i.e. the double rounded up to FP32: one instruction on the device. */
NVFP4_HOST_DEVICE uint32_t thr_f32_up(double x)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(__double2float_ru(x));
#else
    if (x > 0x1.fffffep127) return THR_INF_BITS; /* (float)x would be out of range */
    const float f = (float)x; /* to nearest: at most one pattern below */
    const uint32_t b = thr_bits(f);
    return (double)f < x ? b + 1u : b;
#endif
}

/* The kind of entry (pts, s8) of a variant and, for THR_TABLE, its seven
 * thresholds as FP32 patterns: code magnitude = #{i : |v| >= thr[i]}.
 * walk_only: every threshold by thr_search's walk (the reference form of
 * the same answer, tests/unit/test_thresholds.c). */
NVFP4_HOST_DEVICE int thr_build_x(int cuda_variant, float pts, uint32_t s8, uint32_t thr[7], int walk_only)
{
    /* mid_i: theta_i -+ half an ulp (odd i: the tie goes up, even i: down) */
    const double mid[7] = {0x1.000001p-2, 0x1.7fffffp-1, 0x1.400001p0, 0x1.bfffffp0,
                           0x1.400001p1,  0x1.bfffffp1,  0x1.400001p2};
    if ((s8 & 0x7Fu) == 0x7Fu) return THR_EXACT; /* NaN byte: its FP16 operand is NaN */
    const float s8f = thr_e4m3(s8);
    double scale, inv;
    uint32_t lo;
    if (cuda_variant) {
        const float enc = thr_min_fltmax(thr_rcp(thr_mul_ftz(pts, s8f)));
        const uint32_t eb = thr_bits(enc);
        /* zero, negative (-Inf too), NaN: not monotone / sign-kept; a
         * subnormal enc would be a flushed zero (rcp never returns one) */
        if (eb < 0x00800000u || eb >= THR_INF_BITS) return THR_EXACT;
        scale = (double)enc;
        inv = 1.0 / scale; /* once per entry: only the candidates use it */
        lo = 0x00800000u;  /* mul.ftz flushes subnormal v: code 0 */
    } else {
        const float t = thr_mul_rn(pts, s8f);
        const uint32_t tb = thr_bits(t);
        if ((tb & 0x7FFFFFFFu) == 0u) return THR_ZERO;
        if (tb >= THR_INF_BITS) return THR_EXACT; /* +Inf, NaN, negative */
        scale = 1.0;
        inv = (double)t; /* the bound t * mid_i is exact */
        lo = 1u;
    }
    uint32_t walk = walk_only ? 0x7Fu : 0u; /* bit i: threshold i needs the walk */
    if (cuda_variant) {
        THR_UNROLL
        for (int i = 0; i < 7; i++) {
            int bracketed;
            thr[i] = thr_near(mid[i] * inv, lo, scale, mid[i], (i & 1) == 0, &bracketed);
            walk |= (uint32_t)!bracketed << i;
        }
    } else {
        /* eager: c passes when c >= t * mid_i (exact in double), or > for
         * even i: the bound rounded up to FP32, one pattern up where a
         * strict test meets it exactly.  Never below lo = 1 (the bound is
         * positive); Inf where it passes FLT_MAX. */
        THR_UNROLL
        for (int i = 0; i < 7; i++) {
            const double bound = inv * mid[i];
            const uint32_t c = thr_f32_up(bound);
            thr[i] = c + (uint32_t)((i & 1) == 0 && c < THR_INF_BITS && (double)thr_float(c) == bound);
        }
    }
    if (walk) {
        THR_UNROLL /* constant indices keep thr[] in registers on the device */
        for (int i = 0; i < 7; i++)
            if ((walk >> i) & 1u) {
                const double bound = cuda_variant ? mid[i] : inv * mid[i];
                thr[i] = thr_search(mid[i] * inv, lo, scale, bound, (i & 1) == 0);
            }
    }
    return THR_TABLE;
}

NVFP4_HOST_DEVICE int thr_build(int cuda_variant, float pts, uint32_t s8, uint32_t thr[7])
{
    return thr_build_x(cuda_variant, pts, s8, thr, 0);
}

/* The smallest BF16 pattern at or above an FP32 threshold pattern. */
NVFP4_HOST_DEVICE uint32_t thr_bf16(uint32_t thr32) { return (thr32 + 0xFFFFu) >> 16; }

/*----------------------------- using an entry -----------------------------*/

/* The code of an FP32 element v (bits; not NaN) from an entry's thresholds. */
NVFP4_HOST_DEVICE uint32_t thr_code_f32(const uint32_t thr[7], uint32_t v)
{
    const uint32_t a = v & 0x7FFFFFFFu;
    uint32_t c = 0;
    THR_UNROLL
    for (int i = 0; i < 7; i++) c += a >= thr[i];
    return c | ((v >> 28) & 8u);
}

/* The same for a BF16 element and BF16 thresholds (thr_bf16). */
NVFP4_HOST_DEVICE uint32_t thr_code_bf16(const uint32_t thr16[7], uint32_t v)
{
    const uint32_t a = v & 0x7FFFu;
    uint32_t c = 0;
    THR_UNROLL
    for (int i = 0; i < 7; i++) c += a >= thr16[i];
    return c | ((v >> 12) & 8u);
}

/*------------------ two BF16 elements per 32-bit word (SWAR) ------------------*/

/* prmt.b32 (default mode): byte n of the result is byte sel[n] & 7 of
 * {b, a}, or, when sel[n] & 8, that byte's top bit copied into all 8. */
NVFP4_HOST_DEVICE uint32_t thr_prmt(uint32_t a, uint32_t b, uint32_t sel)
{
#ifdef __CUDA_ARCH__
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
#else
    const uint64_t ab = ((uint64_t)b << 32) | a;
    uint32_t d = 0;
    for (int n = 0; n < 4; n++) {
        const uint32_t ctl = (sel >> (4 * n)) & 15u;
        uint32_t byte = (uint32_t)(ab >> (8 * (ctl & 7u))) & 0xFFu;
        if (ctl & 8u) byte = (byte & 0x80u) ? 0xFFu : 0u;
        d |= byte << (8 * n);
    }
    return d;
#endif
}

/* A threshold in the form the SWAR step adds: 0x8000 - thr16 in both
 * halves.  A magnitude A < 0x8000 plus it sets bit 15 of its half iff
 * A >= thr16; thr16 is in [1, 0x7F80], so the sum stays below 0x10000 and
 * no carry crosses into the other half. */
NVFP4_HOST_DEVICE uint32_t thr_nt(uint32_t thr16)
{
    const uint32_t n = 0x8000u - thr16;
    return n | (n << 16);
}

/* (x & m) | (y & ~m): one LOP3 (written out on the device, so the PTX
 * counts what the SASS runs) */
NVFP4_HOST_DEVICE uint32_t thr_mux(uint32_t m, uint32_t x, uint32_t y)
{
#ifdef __CUDA_ARCH__
    uint32_t d;
    asm("lop3.b32 %0, %1, %2, %3, 0xE4;" : "=r"(d) : "r"(x), "r"(y), "r"(m));
    return d;
#else
    return (x & m) | (y & ~m);
#endif
}

/* The SWAR step shared by thr_codes8 and thr_f16x8: eight BF16 elements,
 * w[p] = element 2p (low half) | element 2p+1 (high half), none NaN, from
 * the entry's thr_nt words, to nib[h] (elements 4h..4h+3, one byte each,
 * the code's nibble in both halves of its byte) and sgn[h] (their sign
 * bits as byte masks).
 *
 * A binary search per half instead of 7 compares: c2 = A >= T3; c1 = A >=
 * (c2 ? T5 : T1); c0 = A >= T[4 c2 + 2 c1] (the thermometer code below the
 * chosen threshold fixes the rest).  A compare's result is bit 15 / 31;
 * prmt's sign mode turns it into a 0x0000 / 0xFFFF half mask that selects
 * the next threshold (LOP3), and, gathering two words, into byte masks
 * (one byte per element) from which three LOP3s with constants build each
 * element's nibble.  Instructions (SASS: LOP3, IADD3, PRMT), per word: 1
 * mask + 3 adds + 2 half masks + 4 selects = 10; per two words: 4 gathers
 * + 3 LOP3 = 7. */
NVFP4_HOST_DEVICE void thr_swar(const uint32_t w[4], const uint32_t nt[7], uint32_t nib[2], uint32_t sgn[2])
{
    THR_UNROLL
    for (int h = 0; h < 2; h++) {
        uint32_t s3[2], sa[2], sb[2];
        THR_UNROLL
        for (int j = 0; j < 2; j++) {
            const uint32_t a = w[2 * h + j] & 0x7FFF7FFFu;
            s3[j] = a + nt[3];
            const uint32_t m2 = thr_prmt(s3[j], 0u, 0xBB99u); /* bit 15 / 31 -> half masks */
            sa[j] = a + thr_mux(m2, nt[5], nt[1]);
            const uint32_t m1 = thr_prmt(sa[j], 0u, 0xBB99u);
            const uint32_t t = thr_mux(m2, nt[4], nt[0]), u = thr_mux(m2, nt[6], nt[2]);
            sb[j] = a + thr_mux(m1, u, t);
        }
        /* byte masks of elements [4h, 4h+1, 4h+2, 4h+3]: bytes 1, 3 of each word */
        sgn[h] = thr_prmt(w[2 * h], w[2 * h + 1], 0xFDB9u);
        const uint32_t g2 = thr_prmt(s3[0], s3[1], 0xFDB9u);
        const uint32_t g1 = thr_prmt(sa[0], sa[1], 0xFDB9u);
        const uint32_t g0 = thr_prmt(sb[0], sb[1], 0xFDB9u);
        uint32_t n = thr_mux(0x88888888u, sgn[h], g2);
        n = thr_mux(0xCCCCCCCCu, n, g1);
        nib[h] = thr_mux(0xEEEEEEEEu, n, g0);
    }
}

/* Their eight codes, hi-first (element 2p in the high nibble of byte p):
 * two prmt pair the even and odd elements' bytes, a LOP3 takes a nibble of
 * each.  Total 57 instructions per 8 elements, 14.25 per pair (the mask is
 * shared with the block's amax in the kernel). */
NVFP4_HOST_DEVICE uint32_t thr_codes8(const uint32_t w[4], const uint32_t nt[7])
{
    uint32_t nib[2], sgn[2];
    thr_swar(w, nt, nib, sgn);
    const uint32_t even = thr_prmt(nib[0], nib[1], 0x6420u), odd = thr_prmt(nib[0], nib[1], 0x7531u);
    return thr_mux(0xF0F0F0F0u, even, odd);
}

/* The high byte of the FP16 value of each E2M1 magnitude 0..7 (the low
 * byte is zero): 0, .5, 1, 1.5, 2, 3, 4, 6. */
#define THR_F16HI_0_3 0x3E3C3800u
#define THR_F16HI_4_7 0x46444240u

/* The codes and the FP16 values of their E2M1 values (the sign kept: code
 * 8 is -0): f16[p] = element 2p (low half) | element 2p+1 (high half).
 * Per pair: a prmt looks the two magnitudes up (selector: the nibbles at
 * bits 4..6 and 12..14, a LOP3, and a shift for the upper two elements of
 * a byte word), a prmt places the two sign masks, a LOP3 merges: 4.5. */
NVFP4_HOST_DEVICE uint32_t thr_f16x8(const uint32_t w[4], const uint32_t nt[7], uint32_t f16[4])
{
    uint32_t nib[2], sgn[2];
    thr_swar(w, nt, nib, sgn);
    THR_UNROLL
    for (int p = 0; p < 4; p++) {
        const uint32_t n = nib[p >> 1] >> (16 * (p & 1)), sg = sgn[p >> 1];
        const uint32_t mag = thr_prmt(THR_F16HI_0_3, THR_F16HI_4_7, n & 0x7070u);
        f16[p] = thr_mux(0x80008000u, thr_prmt(sg, 0u, (p & 1) ? 0x3020u : 0x1000u), mag);
    }
    const uint32_t even = thr_prmt(nib[0], nib[1], 0x6420u), odd = thr_prmt(nib[0], nib[1], 0x7531u);
    return thr_mux(0xF0F0F0F0u, even, odd);
}

#endif
