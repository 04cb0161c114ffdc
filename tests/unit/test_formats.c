/* test_formats.c -- the scalar formats, exhaustively where the format is
 * small, against slow references written here from the format definitions
 * (nearest grid point by search, ties to the even pattern). */
#include "nvfp4.h"
#include "formats/layout.h"
#include "testlib.h"

static uint32_t bits(float v)
{
    uint32_t b;
    memcpy(&b, &v, 4);
    return b;
}

static float from_bits(uint32_t b)
{
    float v;
    memcpy(&v, &b, 4);
    return v;
}

/*----------------- values of patterns, from the definitions -----------------*/

/* A sign-exponent-mantissa pattern's value: ebits/mbits/bias, subnormals
 * when the exponent field is 0.  No special values (callers handle them). */
static double field_value(uint32_t mag, int mbits, int bias)
{
    uint32_t e = mag >> mbits, m = mag & ((1u << mbits) - 1);
    if (e == 0) return ldexp((double)m, 1 - bias - mbits);
    return ldexp(1.0 + ldexp((double)m, -mbits), (int)e - bias);
}

/* Round |a| to the pattern grid 0..top by binary search (grid(top) is the
 * overflow value), ties to the even pattern. */
static uint32_t slow_round(double a, uint32_t top, double (*grid)(uint32_t))
{
    if (a >= grid(top)) return top;
    uint32_t lo = 0, hi = top; /* grid(lo) <= a < grid(hi) */
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (grid(mid) <= a) lo = mid; else hi = mid;
    }
    double dl = a - grid(lo), dh = grid(hi) - a;
    if (dl < dh) return lo;
    if (dh < dl) return hi;
    return (lo % 2 == 0) ? lo : hi;
}

static double e2m1_grid(uint32_t p) { return field_value(p, 1, 1); }
static double e4m3_grid(uint32_t p) { return p == 0x7F ? 480.0 : field_value(p, 3, 7); }
static double bf16_grid(uint32_t p) { return p == 0x7F80 ? ldexp(1.0, 128) : field_value(p, 7, 127); }
static double f16_grid(uint32_t p) { return p == 0x7C00 ? 65536.0 : field_value(p, 10, 15); }

static uint8_t e2m1_slow(float v)
{
    uint8_t s = (uint8_t)((bits(v) >> 31) << 3);
    return (uint8_t)(s | slow_round(fabs((double)v), 7, e2m1_grid));
}

static uint8_t e4m3_slow(float v)
{
    uint8_t s = (uint8_t)((bits(v) >> 24) & 0x80);
    if (isnan(v)) return (uint8_t)(s | 0x7F);
    return (uint8_t)(s | slow_round(fabs((double)v), 0x7F, e4m3_grid)); /* 0x7F: >= 480 or carry */
}

static uint16_t bf16_slow(float v)
{
    uint16_t s = (uint16_t)((bits(v) >> 16) & 0x8000);
    return (uint16_t)(s | slow_round(fabs((double)v), 0x7F80, bf16_grid));
}

static uint16_t f16_slow(float v)
{
    uint16_t s = (uint16_t)((bits(v) >> 16) & 0x8000);
    return (uint16_t)(s | slow_round(fabs((double)v), 0x7C00, f16_grid));
}

/*-------------------------------- E2M1 --------------------------------*/

static void test_e2m1(void)
{
    for (int c = 0; c < 16; c++) {
        double want = ((c & 8) ? -1 : 1) * e2m1_grid((uint32_t)c & 7);
        float got = nvfp4_e2m1_to_f32((uint8_t)c);
        CHECKF(got == want && (bits(got) >> 31) == (uint32_t)(c >> 3), "code %d -> %g", c, got);
        CHECKF(nvfp4_e2m1_from_f32(got) == c, "round trip of code %d", c);
    }
    /* The ties named in the spec, and their neighbours. */
    static const float tie[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    static const uint8_t tie_code[] = {0, 2, 2, 4, 4, 6, 6};
    for (int i = 0; i < 7; i++) {
        CHECKF(nvfp4_e2m1_from_f32(tie[i]) == tie_code[i], "tie %g", tie[i]);
        CHECKF(nvfp4_e2m1_from_f32(-tie[i]) == (tie_code[i] | 8), "tie -%g", tie[i]);
    }
    /* Every grid point, every midpoint, and 64 FP32 ulps either side of
     * each, both signs, against the slow reference. */
    int bad = 0;
    for (uint32_t p = 0; p < 7; p++) {
        float pts[2] = {(float)e2m1_grid(p), (float)((e2m1_grid(p) + e2m1_grid(p + 1)) / 2)};
        for (int k = 0; k < 2; k++)
            for (int d = -64; d <= 64; d++)
                for (int sgn = 0; sgn < 2; sgn++) {
                    uint32_t b = bits(pts[k]);
                    if (d < 0 && b < (uint32_t)-d) continue;
                    float v = from_bits((b + (uint32_t)d) | ((uint32_t)sgn << 31));
                    if (nvfp4_e2m1_from_f32(v) != e2m1_slow(v)) bad++;
                }
    }
    CHECKF(bad == 0, "%d grid/midpoint neighbours differ from the slow reference", bad);
    /* Random magnitudes in [0, 16) and tiny/huge ones. */
    uint64_t rng = 7;
    bad = 0;
    for (int i = 0; i < 200000; i++) {
        uint32_t b = (uint32_t)test_rand(&rng);
        float v = from_bits(b);
        if (isnan(v)) continue;
        if (i % 2) v = ldexpf((float)(b & 0xFFFFFF), -20) * ((b >> 31) ? -1.0f : 1.0f);
        if (nvfp4_e2m1_from_f32(v) != e2m1_slow(v)) bad++;
    }
    CHECKF(bad == 0, "%d random values differ from the slow reference", bad);
    /* Saturation, signed zero, Inf. */
    CHECK(nvfp4_e2m1_from_f32(6.0f) == 7 && nvfp4_e2m1_from_f32(1e30f) == 7);
    CHECK(nvfp4_e2m1_from_f32(INFINITY) == 7 && nvfp4_e2m1_from_f32(-INFINITY) == 15);
    CHECK(nvfp4_e2m1_from_f32(-0.0f) == 8 && nvfp4_e2m1_from_f32(-0.1f) == 8);
    CHECK(nvfp4_e2m1_from_f32(-1e-45f) == 8 && nvfp4_e2m1_from_f32(1e-45f) == 0);
    /* NaN: comfy-kitchen's integer rounding applied to the NaN's bits
     * (worked by hand: (mag - 0x3F000000 + 0x1FFFFF + bit22) >> 22, low 8
     * bits): 0x7FC00000 -> 0x103 -> 3; 0x7FF00000 and 0x7FFFFFFF -> 4;
     * 0x7F800001 -> 0x102 -> 2; the sign goes to bit 3. */
    CHECK(nvfp4_e2m1_from_f32(from_bits(0x7FC00000u)) == 3);
    CHECK(nvfp4_e2m1_from_f32(from_bits(0xFFC00000u)) == 11);
    CHECK(nvfp4_e2m1_from_f32(from_bits(0x7FF00000u)) == 4);
    CHECK(nvfp4_e2m1_from_f32(from_bits(0x7FFFFFFFu)) == 4);
    CHECK(nvfp4_e2m1_from_f32(from_bits(0xFF800001u)) == 10);
}

/*-------------------------------- E4M3 --------------------------------*/

static void test_e4m3(void)
{
    /* Decode all 256 bytes against (-1)^s (1 + m/8) 2^(e-7), subnormals
     * (m/8) 2^-6, NaN at S.1111.111 (bits sign|0x7FF00000, PyTorch's). */
    for (int b = 0; b < 256; b++) {
        float got = nvfp4_e4m3_to_f32((uint8_t)b);
        int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
        if (e == 15 && m == 7) {
            CHECKF(bits(got) == ((uint32_t)s << 31 | 0x7FF00000u), "byte %02x -> %08x", b, bits(got));
            continue;
        }
        double want = (e == 0 ? (m / 8.0) * pow(2, -6) : (1 + m / 8.0) * pow(2, e - 7)) * (s ? -1 : 1);
        CHECKF(got == want && (bits(got) >> 31) == (uint32_t)s, "byte %02x -> %g want %g", b, got, want);
        CHECKF(nvfp4_e4m3_from_f32(got) == b, "round trip of byte %02x", b);
    }
    CHECK(nvfp4_e4m3_to_f32(0x7E) == 448.0f && nvfp4_e4m3_to_f32(0x01) == 0x1p-9f);

    /* Encode: every grid point, every midpoint (a tie: RNE, not ties-away),
     * 64 ulps either side of each, both signs, against the slow reference. */
    int bad = 0, checked = 0;
    for (uint32_t p = 0; p < 0x7F; p++) {
        double lo = e4m3_grid(p), hi = e4m3_grid(p + 1);
        float pts[3] = {(float)lo, (float)((lo + hi) / 2), (float)(lo + (hi - lo) * 0.3)};
        for (int k = 0; k < 3; k++)
            for (int d = -64; d <= 64; d++)
                for (int sgn = 0; sgn < 2; sgn++) {
                    uint32_t b = bits(pts[k]);
                    if (d < 0 && b < (uint32_t)-d) continue;
                    float v = from_bits((b + (uint32_t)d) | ((uint32_t)sgn << 31));
                    checked++;
                    if (nvfp4_e4m3_from_f32(v) != e4m3_slow(v)) {
                        if (bad++ < 5) fprintf(stderr, "e4m3(%a) = %02x, want %02x\n", v,
                                               nvfp4_e4m3_from_f32(v), e4m3_slow(v));
                    }
                }
    }
    CHECKF(bad == 0, "%d of %d grid/midpoint neighbours differ", bad, checked);
    /* Named ties (ggml rounds these away from zero). */
    CHECK(nvfp4_e4m3_from_f32(1.0625f) == 0x38);   /* 1 | 1.125 -> 1 */
    CHECK(nvfp4_e4m3_from_f32(1.1875f) == 0x3A);   /* 1.125 | 1.25 -> 1.25 */
    CHECK(nvfp4_e4m3_from_f32(0x1p-10f) == 0x00);  /* half the smallest subnormal */
    CHECK(nvfp4_e4m3_from_f32(0x3p-10f) == 0x02);  /* 1.5 | 2 subnormal steps -> 2 */
    CHECK(nvfp4_e4m3_from_f32(-0x1p-10f) == 0x80);
    /* 448..480: 464 is the tie (448 even), above it carries into NaN. */
    CHECK(nvfp4_e4m3_from_f32(448.0f) == 0x7E && nvfp4_e4m3_from_f32(464.0f) == 0x7E);
    CHECK(nvfp4_e4m3_from_f32(nextafterf(464.0f, 0)) == 0x7E);
    CHECK(nvfp4_e4m3_from_f32(nextafterf(464.0f, 1000)) == 0x7F);
    CHECK(nvfp4_e4m3_from_f32(479.99997f) == 0x7F && nvfp4_e4m3_from_f32(480.0f) == 0x7F);
    CHECK(nvfp4_e4m3_from_f32(-1e6f) == 0xFF && nvfp4_e4m3_from_f32(INFINITY) == 0x7F);
    CHECK(nvfp4_e4m3_from_f32(from_bits(0x7FC00000u)) == 0x7F);
    CHECK(nvfp4_e4m3_from_f32(from_bits(0xFF800001u)) == 0xFF);
    CHECK(nvfp4_e4m3_from_f32(-0.0f) == 0x80 && nvfp4_e4m3_from_f32(1e-30f) == 0x00);
    /* Random FP32 values across the E4M3 range and beyond. */
    uint64_t rng = 11;
    bad = 0;
    for (int i = 0; i < 300000; i++) {
        uint32_t b = (uint32_t)test_rand(&rng);
        b = (b & 0x807FFFFFu) | ((uint32_t)(100 + (b >> 23) % 40) << 23); /* 2^-27 .. 2^12 */
        float v = from_bits(b);
        if (nvfp4_e4m3_from_f32(v) != e4m3_slow(v)) bad++;
    }
    CHECKF(bad == 0, "%d random values differ", bad);
}

/*---------------------------- BF16 and F16 ----------------------------*/

static void test_16bit(void)
{
    int bad_val = 0, bad_trip = 0, bad_nan = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t mag = h & 0x7FFF, s = h >> 15;
        /* BF16 */
        float v = nvfp4_bf16_to_f32((uint16_t)h);
        if (mag > 0x7F80) {
            uint16_t back = nvfp4_bf16_from_f32(v);
            if (!isnan(v) || (bits(v) >> 31) != s || back != (h | 0x40)) bad_nan++;
        } else {
            double want = (mag == 0x7F80 ? INFINITY : field_value(mag, 7, 127)) * (s ? -1 : 1);
            if (v != want || (bits(v) >> 31) != s) bad_val++;
            if (nvfp4_bf16_from_f32(v) != h) bad_trip++;
        }
        /* F16 */
        v = nvfp4_f16_to_f32((uint16_t)h);
        if (mag > 0x7C00) {
            uint16_t back = nvfp4_f16_from_f32(v);
            if (!isnan(v) || (bits(v) >> 31) != s || back != (h | 0x200)) bad_nan++;
        } else {
            double want = (mag == 0x7C00 ? INFINITY : field_value(mag, 10, 15)) * (s ? -1 : 1);
            if (v != want || (bits(v) >> 31) != s) bad_val++;
            if (nvfp4_f16_from_f32(v) != h) bad_trip++;
        }
    }
    CHECKF(bad_val == 0, "%d 16-bit patterns decode wrong", bad_val);
    CHECKF(bad_trip == 0, "%d 16-bit patterns do not round-trip", bad_trip);
    CHECKF(bad_nan == 0, "%d 16-bit NaNs not kept quiet with their sign", bad_nan);

    /* FP32 -> 16 bits: every 64th pattern's midpoint to the next one (a
     * tie) and 3 ulps around it, plus random FP32 values, against the slow
     * reference. */
    int bad = 0;
    for (uint32_t p = 0; p < 0x7F80; p += 7) {
        double mid = (bf16_grid(p) + bf16_grid(p + 1)) / 2;
        if (mid > 3.4e38) break;
        for (int d = -3; d <= 3; d++)
            for (int sgn = 0; sgn < 2; sgn++) {
                float v = from_bits((bits((float)mid) + (uint32_t)d) | ((uint32_t)sgn << 31));
                if (nvfp4_bf16_from_f32(v) != bf16_slow(v)) bad++;
            }
    }
    for (uint32_t p = 0; p < 0x7C00; p++) {
        double mid = (f16_grid(p) + f16_grid(p + 1)) / 2;
        for (int d = -3; d <= 3; d++)
            for (int sgn = 0; sgn < 2; sgn++) {
                float v = from_bits((bits((float)mid) + (uint32_t)d) | ((uint32_t)sgn << 31));
                if (nvfp4_f16_from_f32(v) != f16_slow(v)) bad++;
            }
    }
    CHECKF(bad == 0, "%d ties/neighbours differ from the slow reference", bad);
    CHECK(nvfp4_bf16_from_f32(1.00390625f) == 0x3F80);  /* tie -> even */
    CHECK(nvfp4_bf16_from_f32(1.01171875f) == 0x3F82);  /* tie -> even (up) */
    CHECK(nvfp4_f16_from_f32(65520.0f) == 0x7C00 && nvfp4_f16_from_f32(65519.0f) == 0x7BFF);
    CHECK(nvfp4_f16_from_f32(0x1p-25f) == 0x0000 && nvfp4_f16_from_f32(0x3p-25f) == 0x0002);
    CHECK(nvfp4_bf16_from_f32(3.4028235e38f) == 0x7F80); /* FLT_MAX rounds up to Inf */
    uint64_t rng = 3;
    bad = 0;
    for (int i = 0; i < 200000; i++) {
        float v = from_bits((uint32_t)test_rand(&rng));
        if (isnan(v)) continue;
        if (nvfp4_bf16_from_f32(v) != bf16_slow(v)) bad++;
        if (nvfp4_f16_from_f32(v) != f16_slow(v)) bad++;
        float w = ldexpf(v / (1.0f + fabsf(v)), (int)(i % 40) - 28); /* F16 range and below */
        if (!isnan(w) && nvfp4_f16_from_f32(w) != f16_slow(w)) bad++;
    }
    CHECKF(bad == 0, "%d random values differ from the slow reference", bad);
    CHECK(nvfp4_f32_bits(-2.0f) == 0xC0000000u && nvfp4_f32_from_bits(0x3F800000u) == 1.0f);
}

/* The H200 GEMM's FP16 operand order (layout.h): a permutation of each
 * block's 16 elements whose wgmma fragment slots 2t, 2t+1, 2t+8, 2t+9 are
 * the four elements 4t..4t+3 of code bytes 2t, 2t+1 (high nibbles first,
 * elements 4t and 4t+2), the even elements in slots 0..7. */
static void test_operand_order(void)
{
    int seen[16] = {0};
    for (int s = 0; s < 16; s++) {
        const int e = nvfp4_sm90_operand_elem(s);
        CHECKF(e >= 0 && e < 16, "slot %d -> element %d", s, e);
        if (e >= 0 && e < 16) seen[e]++;
        CHECKF((e % 2 == 0) == (s < 8), "slot %d holds element %d: evens in slots 0..7", s, e);
    }
    for (int e = 0; e < 16; e++) CHECKF(seen[e] == 1, "element %d is in %d slots", e, seen[e]);
    for (int t = 0; t < 4; t++) {
        CHECK(nvfp4_sm90_operand_elem(2 * t) == 4 * t && nvfp4_sm90_operand_elem(2 * t + 1) == 4 * t + 2);
        CHECK(nvfp4_sm90_operand_elem(2 * t + 8) == 4 * t + 1 && nvfp4_sm90_operand_elem(2 * t + 9) == 4 * t + 3);
    }
}

int main(void)
{
    TEST("e2m1") test_e2m1();
    TEST("operand order") test_operand_order();
    TEST("e4m3") test_e4m3();
    TEST("bf16 f16") test_16bit();
    return test_summary("formats");
}
