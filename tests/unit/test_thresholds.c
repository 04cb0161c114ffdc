/* test_thresholds.c -- the threshold tables of src/quant/thresholds.h (the
 * H200 block kernel's per-element fast path) against the reference
 * quantizer's per-element step (quantize_ref.c, quant_ref.h):
 *   - for both variants, a set of per-tensor scales, EVERY scale byte and
 *     EVERY BF16 pattern: a THR_TABLE entry's code equals the reference's
 *     (NaN elements excluded: the caller takes the exact path for them), a
 *     THR_ZERO entry's codes are all +0, and every THR_EXACT entry is either
 *     the NaN byte or has a witness that no threshold table could give its
 *     codes; FP32 elements around each threshold and at random too;
 *   - how many entries of each kind a scale gets, where that is known;
 *   - the SWAR forms (thr_codes8, thr_f16x8 with its FP16 e2m1 values)
 *     against the scalar form on all pairs of a sampled set of patterns, and
 *     on blocks quantized by nvfp4_quantize_ref.
 * NVFP4_THR_PTS=N adds N random per-tensor scales to the full sweep. */
#include "quant/quant_ref.h"
#include "quant/thresholds.h"
#include "testlib.h"

/* FP32 <-> bits: the library's one definition (nvfp4.h) */
#define f2b nvfp4_f32_bits
#define b2f nvfp4_f32_from_bits

static const char *vname(int cv) { return cv ? "cuda" : "eager"; }

static nvfp4_variant variant_of(int cv) { return cv ? NVFP4_VARIANT_CUDA : NVFP4_VARIANT_EAGER; }

/* First mismatch of the whole run, printed once; all are counted. */
static long n_mismatch;

static void mismatch(const char *what, int cv, float pts, uint32_t s8, uint32_t v, uint32_t got,
                     uint32_t want)
{
    if (n_mismatch++ == 0)
        fprintf(stderr,
                "FAIL [%s] %s: variant %s pts 0x%08x s8 0x%02x v 0x%08x: got 0x%x, want 0x%x\n",
                test_current_, what, vname(cv), f2b(pts), s8, v, got, want);
}

typedef struct kinds {
    int table, zero, exact, nan_byte, witnessed;
} kinds;

/* Is the reference's code function of an entry (BF16 elements) impossible
 * for a threshold table?  A table gives +0 -> 0, -v -> code(v) | 8 and a
 * magnitude non-decreasing in |v|. */
static int has_witness(nvfp4_variant var, float f)
{
    uint32_t prev = 0;
    for (uint32_t p = 0; p <= 0x7F80u; p++) {
        uint32_t c = nvfp4_ref_element_code(var, f, nvfp4_bf16_to_f32((uint16_t)p));
        uint32_t n = nvfp4_ref_element_code(var, f, nvfp4_bf16_to_f32((uint16_t)(p | 0x8000u)));
        if (c > 7 || n != (c | 8u) || (p == 0 && c != 0) || c < prev) return 1;
        prev = c;
    }
    return 0;
}

/* One entry: its kind, and the check of every BF16 element (and FP32 ones
 * near its thresholds) against the reference. */
static void check_entry(int cv, float pts, uint32_t s8, kinds *k, uint64_t *rng)
{
    const nvfp4_variant var = variant_of(cv);
    const float f = nvfp4_ref_block_factor(var, pts, (uint8_t)s8);
    uint32_t thr[7];
    const int kind = thr_build(cv, pts, s8, thr);
    const long before = n_mismatch;

    if (kind == THR_ZERO) {
        k->zero++;
        for (uint32_t v = 0; v <= 0xFFFFu; v++) {
            uint32_t want = nvfp4_ref_element_code(var, f, nvfp4_bf16_to_f32((uint16_t)v));
            if (want != 0) mismatch("zero entry", cv, pts, s8, v << 16, 0, want);
        }
        CHECK(n_mismatch == before);
        return;
    }
    if (kind == THR_EXACT) {
        k->exact++;
        if ((s8 & 0x7Fu) == 0x7Fu) {
            k->nan_byte++; /* the special case: excluded whatever its codes */
            CHECK(1);
            return;
        }
        const int w = has_witness(var, f);
        k->witnessed += w;
        CHECKF(w, "variant %s pts 0x%08x s8 0x%02x: exact path, but the codes fit a table",
               vname(cv), f2b(pts), s8);
        return;
    }
    k->table++;

    /* the thresholds' own shape */
    const uint32_t lo = cv ? 0x00800000u : 1u;
    int shape = thr[0] >= lo && thr[6] <= THR_INF_BITS;
    for (int i = 0; i < 6; i++) shape &= thr[i] <= thr[i + 1];
    CHECKF(shape, "variant %s pts 0x%08x s8 0x%02x: thresholds out of order", vname(cv), f2b(pts),
           s8);

    uint32_t thr16[7];
    for (int i = 0; i < 7; i++) thr16[i] = thr_bf16(thr[i]);
    for (uint32_t v = 0; v <= 0xFFFFu; v++) {
        if ((v & 0x7FFFu) > 0x7F80u) continue; /* NaN: the exact path's */
        const uint32_t want = nvfp4_ref_element_code(var, f, nvfp4_bf16_to_f32((uint16_t)v));
        const uint32_t got = thr_code_bf16(thr16, v), got32 = thr_code_f32(thr, v << 16);
        if (got != want) mismatch("BF16 table", cv, pts, s8, v << 16, got, want);
        else if (got32 != want) mismatch("FP32 table, BF16 element", cv, pts, s8, v << 16, got32, want);
    }
    /* FP32 elements: each threshold and its neighbours, and random ones */
    uint32_t probe[7 * 5 + 16];
    int np = 0;
    for (int i = 0; i < 7; i++)
        for (int d = -2; d <= 2; d++) {
            int64_t c = (int64_t)thr[i] + d;
            if (c >= 0 && c <= (int64_t)THR_INF_BITS) probe[np++] = (uint32_t)c;
        }
    for (int i = 0; i < 16; i++) {
        uint32_t r = (uint32_t)test_rand(rng) & 0x7FFFFFFFu;
        probe[np++] = r > THR_INF_BITS ? r - 0x00800000u : r;
    }
    for (int i = 0; i < np; i++)
        for (int neg = 0; neg < 2; neg++) {
            const uint32_t v = probe[i] | (neg ? 0x80000000u : 0u);
            const uint32_t want = nvfp4_ref_element_code(var, f, b2f(v));
            const uint32_t got = thr_code_f32(thr, v);
            if (got != want) mismatch("FP32 table", cv, pts, s8, v, got, want);
        }
    CHECK(n_mismatch == before);
}

/* Every scale byte of one per-tensor scale; returns the kind counts. */
static kinds sweep(int cv, float pts, uint64_t *rng)
{
    kinds k = {0, 0, 0, 0, 0};
    for (uint32_t s8 = 0; s8 < 256; s8++) check_entry(cv, pts, s8, &k, rng);
    printf("  %-5s pts 0x%08x (%-13.6g): table %3d  zero %3d  exact %3d (NaN byte %d, witnessed %d)\n",
           vname(cv), f2b(pts), (double)pts, k.table, k.zero, k.exact, k.nan_byte, k.witnessed);
    return k;
}

/*------------------------------- SWAR form -------------------------------*/

/* Eight codes of four words by the scalar form, hi-first. */
static uint32_t scalar_codes8(const uint32_t w[4], const uint32_t thr16[7])
{
    uint32_t out = 0;
    for (int p = 0; p < 4; p++) {
        uint32_t c0 = thr_code_bf16(thr16, w[p] & 0xFFFFu), c1 = thr_code_bf16(thr16, w[p] >> 16);
        out |= ((c0 << 4) | c1) << (8 * p);
    }
    return out;
}

/* All ordered pairs of a sampled set (each entry's thresholds and their
 * neighbours, zeros, Inf, random patterns, both signs) in each of the four
 * word positions, the other words random from the set. */
static void check_swar_entry(int cv, float pts, uint32_t s8, uint64_t *rng)
{
    uint32_t thr[7], thr16[7], nt[7];
    if (thr_build(cv, pts, s8, thr) != THR_TABLE) return;
    for (int i = 0; i < 7; i++) {
        thr16[i] = thr_bf16(thr[i]);
        nt[i] = thr_nt(thr16[i]);
    }
    uint32_t set[64];
    int n = 0;
    set[n++] = 0;
    set[n++] = 0x7F80u;
    set[n++] = 0x7F7Fu;
    set[n++] = 1;
    for (int i = 0; i < 7; i++)
        for (int d = -1; d <= 1; d++) {
            int32_t c = (int32_t)thr16[i] + d;
            if (c >= 0 && c <= 0x7F80) set[n++] = (uint32_t)c;
        }
    while (n < 32) set[n++] = (uint32_t)(test_rand(rng) % 0x7F81u);
    for (int i = 0; i < 32; i++) set[n++] = set[i] | 0x8000u;

    const long before = n_mismatch;
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            uint32_t w[4];
            for (int p = 0; p < 4; p++)
                w[p] = set[test_rand(rng) % (uint64_t)n] | (set[test_rand(rng) % (uint64_t)n] << 16);
            w[(a + b) & 3] = set[a] | (set[b] << 16);
            uint32_t f16[4];
            const uint32_t got = thr_codes8(w, nt), want = scalar_codes8(w, thr16);
            const uint32_t got2 = thr_f16x8(w, nt, f16);
            if (got2 != want) mismatch("thr_f16x8 codes", cv, pts, s8, w[0], got2, want);
            for (int p = 0; p < 4; p++) { /* FP16 of the signed E2M1 value of each code */
                uint32_t c0 = (want >> (8 * p + 4)) & 15u, c1 = (want >> (8 * p)) & 15u;
                uint32_t h = nvfp4_f16_from_f32(nvfp4_e2m1_to_f32((uint8_t)c0)) |
                             ((uint32_t)nvfp4_f16_from_f32(nvfp4_e2m1_to_f32((uint8_t)c1)) << 16);
                if (f16[p] != h) mismatch("thr_f16x8 FP16", cv, pts, s8, w[p], f16[p], h);
            }
            if (got != want && n_mismatch++ == 0)
                fprintf(stderr,
                        "FAIL [%s] variant %s pts 0x%08x s8 0x%02x words %08x %08x %08x %08x: "
                        "got 0x%08x, want 0x%08x\n",
                        test_current_, vname(cv), f2b(pts), s8, w[0], w[1], w[2], w[3], got, want);
        }
    CHECK(n_mismatch == before);
}

/* Blocks as nvfp4_quantize_ref makes them (random data with outliers, zero
 * rows and blocks, subnormals, Inf, NaN): where the block's entry is a table
 * and it holds no NaN, thr_codes8 gives its code bytes; a zero entry, +0s. */
static void check_blocks(int cv, const float *pts, uint64_t *rng)
{
    enum { R = 48, C = 256 };
    static uint16_t x[R * C];
    for (int i = 0; i < R * C; i++) {
        double g = test_normal(rng) * (i % 97 == 0 ? 300.0 : 1.0);
        x[i] = (uint16_t)(f2b((float)g) >> 16);
        uint64_t u = test_rand(rng) % 1000;
        /* NaN, -Inf; with the dynamic scale (which they would make NaN or Inf) +-1000 */
        if (u == 0) x[i] = pts ? 0x7FC0u : 0x447Au;
        else if (u == 1) x[i] = pts ? 0xFF80u : 0xC47Au;
        else if (u < 20) x[i] = (uint16_t)(u & 0x807Fu);   /* subnormal / zero */
        if (i / C == 5 || (i % C) / 16 == 3) x[i] = 0;     /* zero row, zero blocks */
    }
    nvfp4_tensor t;
    if (nvfp4_quantize_ref(&t, x, NVFP4_DTYPE_BF16, R, C, pts, variant_of(cv)) != NVFP4_OK) {
        CHECK(0);
        return;
    }
    int fast = 0;
    const long before = n_mismatch;
    for (int r = 0; r < R; r++)
        for (int cb = 0; cb < C / 16; cb++) {
            uint32_t w[8], amax = 0;
            for (int i = 0; i < 8; i++) {
                w[i] = x[r * C + cb * 16 + 2 * i] | ((uint32_t)x[r * C + cb * 16 + 2 * i + 1] << 16);
                uint32_t a0 = w[i] & 0x7FFFu, a1 = (w[i] >> 16) & 0x7FFFu;
                amax = a0 > amax ? a0 : amax;
                amax = a1 > amax ? a1 : amax;
            }
            if (amax > 0x7F80u) continue; /* NaN in the block: the exact path */
            const uint32_t s8 = nvfp4_tensor_scale(&t, r, cb);
            uint32_t thr[7], nt[7], code[2] = {0, 0};
            const int kind = thr_build(cv, t.per_tensor_scale, s8, thr);
            if (kind == THR_EXACT) continue;
            uint32_t f16[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            if (kind == THR_TABLE) {
                for (int i = 0; i < 7; i++) nt[i] = thr_nt(thr_bf16(thr[i]));
                code[0] = thr_codes8(w, nt);
                code[1] = thr_codes8(w + 4, nt);
                if (thr_f16x8(w, nt, f16) != code[0] || thr_f16x8(w + 4, nt, f16 + 4) != code[1])
                    mismatch("block, thr_f16x8 codes", cv, t.per_tensor_scale, s8, w[0], 0, 0);
            }
            uint8_t want[8], got[8];
            memcpy(want, t.codes + (size_t)r * (C / 2) + (size_t)cb * 8, 8);
            for (int i = 0; i < 8; i++) { /* the FP16 e2m1 values of the reference's codes */
                uint32_t h = nvfp4_f16_from_f32(nvfp4_e2m1_to_f32((uint8_t)(want[i] >> 4))) |
                             ((uint32_t)nvfp4_f16_from_f32(nvfp4_e2m1_to_f32((uint8_t)(want[i] & 15u))) << 16);
                if (f16[i] != h) {
                    mismatch("block, thr_f16x8 FP16", cv, t.per_tensor_scale, s8, w[i], f16[i], h);
                    break;
                }
            }
            memcpy(got, code, 8); /* little-endian: byte i of the words = code byte i */
            fast++;
            for (int i = 0; i < 8; i++)
                if (got[i] != want[i]) {
                    mismatch("block", cv, t.per_tensor_scale, s8,
                             x[r * C + cb * 16 + 2 * i] | ((uint32_t)x[r * C + cb * 16 + 2 * i + 1] << 16),
                             got[i], want[i]);
                    break;
                }
        }
    CHECK(n_mismatch == before);
    CHECKF(fast > R * C / 16 / 2, "variant %s: only %d blocks took the table", vname(cv), fast);
    nvfp4_tensor_free(&t);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* the sweep lines in order with failures */
    uint64_t rng = 0x5EEDF00DULL;
    TEST("thr_prmt: the PTX rules on fixed words")
    {
        CHECK(thr_prmt(0x33221100u, 0x77665544u, 0x3210u) == 0x33221100u);
        CHECK(thr_prmt(0x33221100u, 0x77665544u, 0x7654u) == 0x77665544u);
        CHECK(thr_prmt(0x80008000u, 0u, 0xBB99u) == 0xFFFFFFFFu);
        CHECK(thr_prmt(0x7FFF8000u, 0u, 0xBB99u) == 0x0000FFFFu);
        CHECK(thr_prmt(0x80FF7F00u, 0x00008000u, 0xFDB9u) == 0x00FFFF00u);
    }

    /* The scales of the full sweep: comfy-style amax / 2688, powers of two,
     * random, tiny and subnormal, huge, and the invalid ones. */
    float pts_set[64];
    int npts = 0;
    pts_set[npts++] = 1.0f / 2688.0f;
    pts_set[npts++] = 7.25f / 2688.0f;
    pts_set[npts++] = 0.0173f / 2688.0f;
    pts_set[npts++] = 1.0f;
    pts_set[npts++] = 0.5f;
    pts_set[npts++] = 0x1p-20f;
    pts_set[npts++] = 0x1p40f;
    for (int i = 0; i < 3; i++) {
        uint32_t e = 127u - 40u + (uint32_t)(test_rand(&rng) % 81u);
        pts_set[npts++] = b2f((e << 23) | ((uint32_t)test_rand(&rng) & 0x7FFFFFu));
    }
    pts_set[npts++] = 0x1p-126f;            /* smallest normal */
    pts_set[npts++] = b2f(0x00600001u);     /* subnormal */
    pts_set[npts++] = b2f(1u);              /* 2^-149 */
    pts_set[npts++] = 1e30f;
    pts_set[npts++] = b2f(0x7F7FFFFFu);     /* FLT_MAX */
    pts_set[npts++] = 0.0f;
    pts_set[npts++] = b2f(0x80000000u);     /* -0 */
    pts_set[npts++] = -1.0f / 2688.0f;
    pts_set[npts++] = b2f(0x7FC00000u);     /* NaN */
    pts_set[npts++] = b2f(0xFFC00000u);     /* the default NaN */
    pts_set[npts++] = b2f(0x7F800000u);     /* +Inf */
    pts_set[npts++] = b2f(0xFF800000u);     /* -Inf */
    const char *extra = getenv("NVFP4_THR_PTS");
    for (int i = extra ? atoi(extra) : 0; i > 0 && npts < 64; i--) {
        uint32_t e = 1u + (uint32_t)(test_rand(&rng) % 254u);
        pts_set[npts++] = b2f((e << 23) | ((uint32_t)test_rand(&rng) & 0x7FFFFFu));
    }

    TEST("every scale byte, every BF16 pattern: the table equals the reference")
    {
        for (int cv = 0; cv < 2; cv++)
            for (int i = 0; i < npts; i++) {
                const float pts = pts_set[i];
                const kinds k = sweep(cv, pts, &rng);
                const uint32_t pb = f2b(pts);
                CHECK(k.table + k.zero + k.exact == 256 && k.nan_byte == 2);
                if (pb >= 0x1A800000u && pb <= 0x5A800000u) { /* 2^-42 .. 2^54: nothing overflows or flushes */
                    CHECKF(cv ? k.table == 127 : k.table == 126 && k.zero == 2,
                           "%s pts %g: table %d zero %d", vname(cv), (double)pts, k.table, k.zero);
                }
                if (pb == 0u) /* eager: t == 0 everywhere; cuda: rcp(+0) = Inf -> FLT_MAX for s8 >= 0 */
                    CHECK(cv ? k.table == 127 : k.zero == 254);
                if (pb == 0x7FC00000u) /* eager: NaN t; cuda: a NaN enc is FLT_MAX */
                    CHECK(cv ? k.table == 254 : k.table == 0 && k.zero == 0);
                if (pb == 0x7F800000u) /* eager: Inf or NaN t; cuda: only s8 = +-0 (Inf * 0 = NaN) */
                    CHECK(cv ? k.table == 2 : k.table == 0);
            }
        CHECKF(n_mismatch == 0, "%ld mismatching elements in all", n_mismatch);
    }

    /* thr_build takes the eager thresholds in closed form (the bound
     * rounded up) and the cuda ones from their candidate's neighbours
     * (walking only where these do not bracket them); thr_build_x(..., 1)
     * walks from the candidate one ulp at a time (the reference).  Kinds
     * and thresholds must be equal: the sweep's scales and 20000 random
     * ones (every exponent, both signs, subnormals, the specials), every
     * scale byte. */
    TEST("thresholds in closed form or from neighbours equal the walk's")
    {
        long compared = 0, differ = 0;
        for (int cv = 0; cv < 2; cv++)
            for (int i = 0; i < npts + 20000; i++) {
                const float pts = i < npts ? pts_set[i] : b2f((uint32_t)test_rand(&rng));
                for (uint32_t s8 = 0; s8 < 256; s8++) {
                    uint32_t fast[7] = {0, 0, 0, 0, 0, 0, 0}, walk[7] = {0, 0, 0, 0, 0, 0, 0};
                    const int kf = thr_build(cv, pts, s8, fast), kw = thr_build_x(cv, pts, s8, walk, 1);
                    int same = kf == kw;
                    for (int t = 0; same && kf == THR_TABLE && t < 7; t++) same = fast[t] == walk[t];
                    compared++;
                    if (!same && differ++ == 0)
                        fprintf(stderr, "FAIL variant %s pts 0x%08x s8 0x%02x: kind %d / %d, first thresholds 0x%08x / 0x%08x\n",
                                vname(cv), f2b(pts), s8, kf, kw, fast[0], walk[0]);
                }
            }
        CHECKF(differ == 0 && compared == 2L * (npts + 20000) * 256, "%ld of %ld entries differ", differ, compared);
    }

    TEST("the SWAR form against the scalar form")
    {
        const float some[] = {1.0f / 2688.0f, 0.0173f / 2688.0f, 0x1p-126f, 0.0f, 1e30f,
                              -1.0f / 2688.0f, b2f(0x7FC00000u)};
        for (int cv = 0; cv < 2; cv++)
            for (size_t i = 0; i < sizeof some / sizeof some[0]; i++)
                for (uint32_t s8 = 0; s8 < 256; s8++) check_swar_entry(cv, some[i], s8, &rng);
    }

    TEST("the SWAR form on blocks from nvfp4_quantize_ref")
    {
        const float one = 1.0f, small = 0.0173f / 2688.0f, tiny = 0x1p-126f;
        for (int cv = 0; cv < 2; cv++) {
            check_blocks(cv, NULL, &rng); /* the dynamic scale */
            check_blocks(cv, &one, &rng);
            check_blocks(cv, &small, &rng);
            check_blocks(cv, &tiny, &rng);
        }
    }
    return test_summary("thresholds");
}
