/* test_quant.c -- the quantizer: golden vectors from comfy-kitchen bit for
 * bit, the fast quantizer against the plain reference on random and
 * adversarial inputs, the dequantizer, argument errors.
 *
 * NVFP4_QUANT_BENCH=1 also times nvfp4_quantize on a 28672 x 5376 BF16
 * weight (prints, asserts nothing about time). */
#include <float.h>
#include <time.h>

#include "nvfp4.h"
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

/* BF16 of a float by truncation is enough for making test data. */
static uint16_t bf16_trunc(float v) { return (uint16_t)(bits(v) >> 16); }

/*----------------------------- golden data -----------------------------*/

static void *golden(const char *name, const char *suffix, size_t want)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.%s", test_golden_dir(), name, suffix);
    size_t n = 0;
    void *p = test_read_file(path, &n);
    CHECKF(p && n == want, "%s: read %zu bytes, want %zu", path, n, want);
    if (p && n != want) {
        free(p);
        return NULL;
    }
    return p;
}

static void check_golden_case(const char *name)
{
    enum { R = 256, C = 1024 };
    uint16_t *x = golden(name, "x.bf16", R * C * 2);
    float *gs = golden(name, "gs.f32", 4);
    uint8_t *q = golden(name, "eager.q.u8", R * C / 2);
    uint8_t *s = golden(name, "eager.s.u8", R * C / 16);
    float *dq = golden(name, "eager.dq.f32", (size_t)R * C * 4);
    if (!x || !gs || !q || !s || !dq) goto done;

    for (int which = 0; which < 2; which++) {
        nvfp4_tensor t;
        nvfp4_status st = which == 0 ? nvfp4_quantize(&t, x, NVFP4_DTYPE_BF16, R, C, NULL,
                                                      NVFP4_VARIANT_EAGER, 2)
                                     : nvfp4_quantize_ref(&t, x, NVFP4_DTYPE_BF16, R, C, NULL,
                                                          NVFP4_VARIANT_EAGER);
        const char *who = which == 0 ? "fast" : "ref";
        CHECKF(st == NVFP4_OK, "%s %s: %s", name, who, nvfp4_last_error());
        if (st != NVFP4_OK) continue;
        CHECK(t.rows == R && t.cols == C);
        CHECKF(bits(t.per_tensor_scale) == bits(*gs), "%s %s: per-tensor scale %08x want %08x",
               name, who, bits(t.per_tensor_scale), bits(*gs));
        CHECKF(test_equal_bits("codes", t.codes, q, 1, R, C / 2), "%s %s", name, who);
        CHECKF(test_equal_bits("tiled scales", t.scales, s, 1, R, C / 16), "%s %s", name, who);

        /* dq: comfy-kitchen computes FP32(code * FP32(pts * scale)); the
         * library's dequantizer computes FP32(FP32(code * scale) * pts)
         * (header contract).  So: (1) the golden dq equals comfy's formula
         * evaluated on our codes and scales, every element, every bit;
         * (2) nvfp4_dequantize equals its own contract, every bit; (3) the
         * two agree exactly wherever the code magnitude is 0 or a power of
         * two (a power-of-two factor commutes with rounding). */
        float *ours = malloc((size_t)R * C * 4), *comfy = malloc((size_t)R * C * 4),
              *contract = malloc((size_t)R * C * 4), *pow2_ours = malloc((size_t)R * C * 4),
              *pow2_gold = malloc((size_t)R * C * 4);
        CHECK(nvfp4_dequantize(ours, &t, 2) == NVFP4_OK);
        int64_t npow2 = 0;
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++) {
                uint8_t code = nvfp4_tensor_code(&t, r, c);
                float e = nvfp4_e2m1_to_f32(code);
                float sc = nvfp4_e4m3_to_f32(nvfp4_tensor_scale(&t, r, c / 16));
                float total = t.per_tensor_scale * sc;
                comfy[r * C + c] = e * total;
                float prod = e * sc;
                contract[r * C + c] = prod * t.per_tensor_scale;
                uint8_t m = code & 7;
                if (m != 3 && m != 5 && m != 7) {
                    pow2_ours[npow2] = ours[r * C + c];
                    pow2_gold[npow2] = dq[r * C + c];
                    npow2++;
                }
            }
        CHECKF(test_equal_bits("dq vs comfy formula", comfy, dq, 4, R, C), "%s %s", name, who);
        CHECKF(test_equal_bits("dequantize vs contract", ours, contract, 4, R, C), "%s %s", name,
               who);
        CHECKF(test_equal_bits("dequantize vs dq, power-of-two codes", pow2_ours, pow2_gold, 4, 1,
                               npow2),
               "%s %s", name, who);
        CHECK(npow2 > R * C / 4); /* the comparison above covered a real share */
        free(ours);
        free(comfy);
        free(contract);
        free(pow2_ours);
        free(pow2_gold);
        nvfp4_tensor_free(&t);
    }
    float pts = 0;
    CHECK(nvfp4_per_tensor_scale(&pts, x, NVFP4_DTYPE_BF16, R, C) == NVFP4_OK);
    CHECKF(bits(pts) == bits(*gs), "%s: nvfp4_per_tensor_scale %08x want %08x", name, bits(pts),
           bits(*gs));
done:
    free(x);
    free(gs);
    free(q);
    free(s);
    free(dq);
}

/*------------------------- a block worked by hand -------------------------*/

static void check_hand_example(void)
{
    /* pts = 1, block max 6 -> s = 1 exactly, t = 1, so codes are e2m1(x)
     * directly; values chosen on every tie and both signs. */
    const float x[16] = {6.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f,
                         -0.25f, -0.75f, -5.0f, 0.3f, -0.0f, 100.0f * 0.0f, 4.9f, -6.0f};
    const uint8_t want[16] = {7, 0, 2, 2, 4, 4, 6, 6, 8, 10, 14, 1, 8, 0, 6, 15};
    float one = 1.0f;
    for (int v = 0; v < 2; v++) {
        nvfp4_tensor t;
        CHECK(nvfp4_quantize(&t, x, NVFP4_DTYPE_F32, 1, 16, &one, (nvfp4_variant)v, 1) ==
              NVFP4_OK);
        CHECK(t.rows == 16 && t.cols == 16); /* one row padded to 16 */
        CHECK(t.scales[0] == 0x38);          /* 1.0 in E4M3 */
        for (int i = 0; i < 16; i++)
            CHECKF(nvfp4_tensor_code(&t, 0, i) == want[i], "variant %d element %d: code %u want %u",
                   v, i, nvfp4_tensor_code(&t, 0, i), want[i]);
        CHECK(t.codes[0] == 0x70); /* hi first: element 0 in the high nibble */
        for (int r = 1; r < 16; r++) CHECK(nvfp4_tensor_code(&t, r, 5) == 0);
        nvfp4_tensor_free(&t);
    }
    /* A block whose scale rounds to zero: EAGER writes +0 codes, CUDA
     * multiplies by FLT_MAX and saturates. */
    float tiny[16] = {1e-6f, -1e-6f};
    nvfp4_tensor t;
    CHECK(nvfp4_quantize(&t, tiny, NVFP4_DTYPE_F32, 1, 16, &one, NVFP4_VARIANT_EAGER, 1) == NVFP4_OK);
    CHECK(t.scales[0] == 0 && t.codes[0] == 0x00);
    nvfp4_tensor_free(&t);
    CHECK(nvfp4_quantize(&t, tiny, NVFP4_DTYPE_F32, 1, 16, &one, NVFP4_VARIANT_CUDA, 1) == NVFP4_OK);
    CHECK(t.scales[0] == 0 && t.codes[0] == 0x7F && t.codes[1] == 0x00);
    nvfp4_tensor_free(&t);
}

/*--------------------------- fast vs reference ---------------------------*/

/* Fill rows x cols floats, block by block, from a mix of hard cases. */
static void make_values(float *v, int64_t rows, int64_t cols, uint64_t *rng, int allow_special)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c0 = 0; c0 < cols; c0 += 16) {
            int mode = (int)(test_rand(rng) % (allow_special ? 10 : 8));
            int e = (int)(test_rand(rng) % 40) - 20;
            float k = ldexpf(1.0f, e);
            float same = (float)test_normal(rng) * k;
            for (int64_t c = c0; c < c0 + 16 && c < cols; c++) {
                float y;
                uint64_t u = test_rand(rng);
                switch (mode) {
                case 0: y = (u & 1) ? -0.0f : 0.0f; break;                /* zeros */
                case 1: y = same; break;                                  /* all equal */
                case 2: y = (float)test_normal(rng) * ((u % 16 == 0) ? 1e4f : 1.0f); break;
                case 3: y = from_bits((uint32_t)(u & 0x807Fu) << 16); break; /* BF16 subnormals */
                case 4: { /* exact E2M1 ties / grid points under a power-of-two scale */
                    static const float grid[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f,
                                                 6.0f, 0.5f, 1.0f, 3.0f, 4.0f, 0.0f};
                    y = grid[u % 13] * k * ((u >> 8) & 1 ? -1.0f : 1.0f);
                    if (c == c0) y = 6.0f * k;
                    break;
                }
                case 5: y = (float)test_normal(rng) * 1e-30f; break; /* scale rounds to 0 */
                case 6: y = (float)test_normal(rng) * k; break;
                case 7: y = (float)(u % 7) * 0.5f * k; break;
                case 8: { /* NaN / Inf sprinkled */
                    static const uint32_t special[] = {0x7FC00000u, 0xFFC00000u, 0x7F800000u,
                                                       0xFF800000u, 0x7F810000u, 0x7FFF0000u};
                    y = (u % 4 == 0) ? from_bits(special[(u >> 4) % 6]) : (float)test_normal(rng);
                    break;
                }
                default: y = from_bits((uint32_t)u & 0xFFFF0000u); break; /* any BF16 pattern */
                }
                v[r * cols + c] = y;
            }
        }
}

static int same_tensor(const nvfp4_tensor *a, const nvfp4_tensor *b, const char *what)
{
    if (a->rows != b->rows || a->cols != b->cols) {
        CHECKF(0, "%s: shapes %lldx%lld vs %lldx%lld", what, (long long)a->rows,
               (long long)a->cols, (long long)b->rows, (long long)b->cols);
        return 0;
    }
    CHECKF(bits(a->per_tensor_scale) == bits(b->per_tensor_scale), "%s: pts %08x vs %08x", what,
           bits(a->per_tensor_scale), bits(b->per_tensor_scale));
    int ok = test_equal_bits("codes", a->codes, b->codes, 1, a->rows, a->cols / 2);
    ok &= test_equal_bits("scales (tiled, with padding)", a->scales, b->scales, 1, 1,
                          (int64_t)nvfp4_scales_bytes(a->rows, a->cols, NVFP4_SCALES_TILED));
    if (!ok) fprintf(stderr, "  in %s\n", what);
    return ok;
}

static void check_fast_vs_ref(void)
{
    static const int64_t shapes[][2] = {{1, 16}, {7, 48}, {16, 16}, {33, 80}, {129, 272},
                                        {300, 16}, {5, 13}, {17, 100}, {130, 1}, {64, 512}};
    uint64_t rng = 0x1234567ULL;
    int cases = 0, mismatches = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t rows = shapes[si][0], cols = shapes[si][1];
        size_t n = (size_t)(rows * cols);
        float *f = malloc(n * 4);
        uint16_t *h = malloc(n * 2);
        for (int trial = 0; trial < 4; trial++) {
            make_values(f, rows, cols, &rng, trial != 0);
            for (int dt = 0; dt < 3; dt++) {
                nvfp4_dtype dtype = dt == 0 ? NVFP4_DTYPE_BF16 : dt == 1 ? NVFP4_DTYPE_F16
                                                                         : NVFP4_DTYPE_F32;
                const void *x = f;
                if (dt == 0)
                    for (size_t i = 0; i < n; i++) h[i] = bf16_trunc(f[i]);
                if (dt == 1)
                    for (size_t i = 0; i < n; i++) h[i] = nvfp4_f16_from_f32(f[i]);
                if (dt != 2) x = h;
                static const float fixed[] = {1.0f, 0.0f, -0.5f, 1e-40f, 3e38f};
                for (int ps = -1; ps < 6; ps++) {
                    float pts_val = ps < 5 ? (ps < 0 ? 0 : fixed[ps]) : from_bits(0x7FC00000u);
                    const float *pts = ps < 0 ? NULL : &pts_val;
                    for (int v = 0; v < 2; v++) {
                        nvfp4_tensor ref, fast;
                        CHECK(nvfp4_quantize_ref(&ref, x, dtype, rows, cols, pts,
                                                 (nvfp4_variant)v) == NVFP4_OK);
                        int threads = 1 + (int)((si + (size_t)trial + (size_t)ps) % 4);
                        CHECK(nvfp4_quantize(&fast, x, dtype, rows, cols, pts, (nvfp4_variant)v,
                                             threads) == NVFP4_OK);
                        char what[160];
                        snprintf(what, sizeof what,
                                 "shape %lldx%lld trial %d dtype %d pts#%d variant %d threads %d",
                                 (long long)rows, (long long)cols, trial, dt, ps, v, threads);
                        if (!same_tensor(&fast, &ref, what)) mismatches++;
                        cases++;
                        nvfp4_tensor_free(&ref);
                        nvfp4_tensor_free(&fast);
                    }
                }
            }
        }
        free(f);
        free(h);
    }
    printf("fast vs ref: %d cases, %d mismatches\n", cases, mismatches);
}

/* Every BF16 and every F16 bit pattern once (4096 x 16, shuffled so blocks
 * mix magnitudes), both variants, scale given and computed. */
static void check_all_patterns(void)
{
    uint16_t *x = malloc(65536 * 2);
    uint64_t rng = 4242;
    for (uint32_t i = 0; i < 65536; i++) x[i] = (uint16_t)i;
    for (uint32_t i = 65535; i > 0; i--) {
        uint32_t k = (uint32_t)(test_rand(&rng) % (i + 1));
        uint16_t tmp = x[i];
        x[i] = x[k];
        x[k] = tmp;
    }
    float one = 1.0f;
    for (int dt = 0; dt < 2; dt++)
        for (int v = 0; v < 2; v++)
            for (int given = 0; given < 2; given++) {
                nvfp4_dtype dtype = dt ? NVFP4_DTYPE_F16 : NVFP4_DTYPE_BF16;
                nvfp4_tensor ref, fast;
                CHECK(nvfp4_quantize_ref(&ref, x, dtype, 4096, 16, given ? &one : NULL,
                                         (nvfp4_variant)v) == NVFP4_OK);
                CHECK(nvfp4_quantize(&fast, x, dtype, 4096, 16, given ? &one : NULL,
                                     (nvfp4_variant)v, 2) == NVFP4_OK);
                char what[128];
                snprintf(what, sizeof what, "all patterns dtype %d variant %d given %d", dt, v, given);
                same_tensor(&fast, &ref, what);
                nvfp4_tensor_free(&ref);
                nvfp4_tensor_free(&fast);
            }
    free(x);
}

/* A big random BF16 matrix with several thread counts, whole-tensor bits. */
static void check_threads(void)
{
    const int64_t rows = 515, cols = 1040;
    uint64_t rng = 99;
    uint16_t *x = malloc((size_t)(rows * cols) * 2);
    for (int64_t i = 0; i < rows * cols; i++)
        x[i] = bf16_trunc((float)test_normal(&rng) * ((i % 997 == 0) ? 300.0f : 1.0f));
    nvfp4_tensor ref;
    CHECK(nvfp4_quantize_ref(&ref, x, NVFP4_DTYPE_BF16, rows, cols, NULL, NVFP4_VARIANT_CUDA) ==
          NVFP4_OK);
    static const int counts[] = {0, 1, 2, 3, 8};
    for (int k = 0; k < 5; k++) {
        nvfp4_tensor fast;
        CHECK(nvfp4_quantize(&fast, x, NVFP4_DTYPE_BF16, rows, cols, NULL, NVFP4_VARIANT_CUDA,
                             counts[k]) == NVFP4_OK);
        char what[128];
        snprintf(what, sizeof what, "515x1040 threads=%d", counts[k]);
        same_tensor(&fast, &ref, what);
        nvfp4_tensor_free(&fast);
    }
    /* The padded shape and zeroed padding: rows 515 -> 528, cols 1040 stays. */
    CHECK(ref.rows == 528 && ref.cols == 1040);
    nvfp4_tensor_free(&ref);
    free(x);
}

/* Values on which the two variants are known to differ: x / t and x * (1/t)
 * round differently for some x.  Checks both are implemented as written. */
static void check_variants_differ(void)
{
    /* Search the E4M3 scales t (pts = 1) for an x near an E2M1 tie where
     * e2m1(x / t) != e2m1(x * RN(1/t)), then quantize it both ways. */
    float pts = 1.0f, found = 0.0f, t = 0.0f;
    static const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    for (int s8 = 0x20; s8 < 0x60 && found == 0.0f; s8++) {
        t = nvfp4_e4m3_to_f32((uint8_t)s8);
        for (int k = 0; k < 7 && found == 0.0f; k++)
            for (int d = -64; d <= 64 && found == 0.0f; d++) {
                float xv = from_bits(bits(ties[k] * t) + (uint32_t)d);
                if (nvfp4_e2m1_from_f32(xv / t) != nvfp4_e2m1_from_f32(xv * (1.0f / t)))
                    found = xv;
            }
    }
    CHECK(found != 0.0f);
    float x[16] = {6.0f * t, found};
    nvfp4_tensor e, c;
    CHECK(nvfp4_quantize(&e, x, NVFP4_DTYPE_F32, 1, 16, &pts, NVFP4_VARIANT_EAGER, 1) == NVFP4_OK);
    CHECK(nvfp4_quantize(&c, x, NVFP4_DTYPE_F32, 1, 16, &pts, NVFP4_VARIANT_CUDA, 1) == NVFP4_OK);
    CHECK(e.scales[0] == nvfp4_e4m3_from_f32(t) && c.scales[0] == e.scales[0]);
    CHECK(nvfp4_tensor_code(&e, 0, 1) == nvfp4_e2m1_from_f32(found / t));
    CHECK(nvfp4_tensor_code(&c, 0, 1) == nvfp4_e2m1_from_f32(found * (1.0f / t)));
    CHECK(nvfp4_tensor_code(&e, 0, 1) != nvfp4_tensor_code(&c, 0, 1));
    nvfp4_tensor_free(&e);
    nvfp4_tensor_free(&c);
}

static void check_nan_rules(void)
{
    /* A NaN in a block makes its amax NaN: scale byte 0x7F; a non-NaN element
     * divides by the decoded NaN (0x7FF00000) -> code 4; the NaN element
     * keeps its own bits (0x7FC00000 -> code 3, sign kept). */
    float x[16] = {1.0f, from_bits(0x7FC00000u), from_bits(0xFFC00000u), 2.0f};
    float one = 1.0f;
    {
        nvfp4_tensor t;
        CHECK(nvfp4_quantize(&t, x, NVFP4_DTYPE_F32, 1, 16, &one, NVFP4_VARIANT_EAGER, 1) == NVFP4_OK);
        CHECK(t.scales[0] == 0x7F);
        CHECK(t.codes[0] == 0x43 && t.codes[1] == 0xB4);
        nvfp4_tensor_free(&t);
    }
    /* The compiled CUDA kernel's __hmax skips NaNs: amax 2, d = 2 * FP32(1/6)
     * = 0.33333334 -> E4M3 0.34375 (0x2B); 1 * rcp(0.34375) -> 3 (code 5),
     * 2 * rcp -> 5.8 -> 6 (7); both NaNs -> +6 (7), sign dropped. */
    {
        nvfp4_tensor t;
        CHECK(nvfp4_quantize(&t, x, NVFP4_DTYPE_F32, 1, 16, &one, NVFP4_VARIANT_CUDA, 1) == NVFP4_OK);
        CHECKF(t.scales[0] == 0x2B, "scale 0x%02x", t.scales[0]);
        CHECKF(t.codes[0] == 0x57 && t.codes[1] == 0x77, "codes 0x%02x 0x%02x", t.codes[0], t.codes[1]);
        nvfp4_tensor_free(&t);
    }
    /* ... and a block of 16 NaNs: amax NaN, min(NaN, 448) = 448 -> 0x7E. */
    {
        float n16[16];
        for (int i = 0; i < 16; i++) n16[i] = from_bits(i % 2 ? 0xFFC00000u : 0x7FC00001u);
        nvfp4_tensor t;
        CHECK(nvfp4_quantize(&t, n16, NVFP4_DTYPE_F32, 1, 16, &one, NVFP4_VARIANT_CUDA, 1) == NVFP4_OK);
        CHECKF(t.scales[0] == 0x7E && t.codes[0] == 0x77, "scale 0x%02x codes 0x%02x", t.scales[0],
               t.codes[0]);
        nvfp4_tensor_free(&t);
    }
    /* An all-zero tensor: pts = 0, every block 0/0 -> default NaN (negative)
     * -> scale 0xFF, codes from the NaN 0xFFF00000 -> 0xC. */
    float z[16] = {0};
    nvfp4_tensor t;
    CHECK(nvfp4_quantize(&t, z, NVFP4_DTYPE_F32, 1, 16, NULL, NVFP4_VARIANT_EAGER, 1) == NVFP4_OK);
    CHECK(t.per_tensor_scale == 0.0f && t.scales[0] == 0xFF && t.codes[0] == 0xCC);
    nvfp4_tensor_free(&t);
    /* Inf with a finite per-tensor scale: s = 448 (0x7E), Inf -> +6, 1/448 -> 0.
     * With the computed scale (Inf): Inf/Inf -> default NaN 0xFFC00000 ->
     * scale 0xFF, t = Inf * NaN(0xFFF00000) -> every code 0xC. */
    float w[16] = {INFINITY, 1.0f};
    CHECK(nvfp4_quantize(&t, w, NVFP4_DTYPE_F32, 1, 16, &one, NVFP4_VARIANT_EAGER, 1) == NVFP4_OK);
    CHECK(t.scales[0] == 0x7E && t.codes[0] == 0x70);
    nvfp4_tensor_free(&t);
    CHECK(nvfp4_quantize(&t, w, NVFP4_DTYPE_F32, 1, 16, NULL, NVFP4_VARIANT_EAGER, 1) == NVFP4_OK);
    CHECK(isinf(t.per_tensor_scale) && t.scales[0] == 0xFF && t.codes[0] == 0xCC &&
          t.codes[7] == 0xCC);
    nvfp4_tensor_free(&t);
    /* Inf makes the per-tensor scale Inf; a NaN of any sign or payload makes
     * it torch.amax's NaN (0x7FC00000; 0x7FFFFFFF for F16 input), Inf or not. */
    float y[4] = {2.0f, -2688.0f, 1.0f, 0.0f};
    float pts = 0;
    CHECK(nvfp4_per_tensor_scale(&pts, y, NVFP4_DTYPE_F32, 1, 4) == NVFP4_OK && pts == 1.0f);
    y[3] = -INFINITY;
    CHECK(nvfp4_per_tensor_scale(&pts, y, NVFP4_DTYPE_F32, 1, 4) == NVFP4_OK && isinf(pts));
    static const uint32_t nans[3] = {0x7FC00000u, 0xFFC00001u, 0x7F800001u};
    for (int i = 0; i < 3; i++) {
        y[0] = from_bits(nans[i]);
        for (int with_inf = 0; with_inf < 2; with_inf++) {
            y[3] = with_inf ? -INFINITY : 0.0f;
            CHECK(nvfp4_per_tensor_scale(&pts, y, NVFP4_DTYPE_F32, 1, 4) == NVFP4_OK &&
                  nvfp4_f32_bits(pts) == 0x7FC00000u);
        }
    }
    uint16_t yb[4] = {0x3F80, 0xFF81, 0x4000, 0x7F80}, yh[4] = {0x3C00, 0xFE01, 0x4000, 0x7C00};
    CHECK(nvfp4_per_tensor_scale(&pts, yb, NVFP4_DTYPE_BF16, 1, 4) == NVFP4_OK &&
          nvfp4_f32_bits(pts) == 0x7FC00000u);
    CHECK(nvfp4_per_tensor_scale(&pts, yh, NVFP4_DTYPE_F16, 1, 4) == NVFP4_OK &&
          nvfp4_f32_bits(pts) == 0x7FFFFFFFu);
    /* the reference quantizer computes the same scale */
    nvfp4_tensor tr = {0};
    CHECK(nvfp4_quantize_ref(&tr, yh, NVFP4_DTYPE_F16, 1, 4, NULL, NVFP4_VARIANT_EAGER) == NVFP4_OK &&
          nvfp4_f32_bits(tr.per_tensor_scale) == 0x7FFFFFFFu);
    nvfp4_tensor_free(&tr);
}

static void check_errors(void)
{
    float x[32] = {0};
    nvfp4_tensor t;
    memset(&t, 0xAB, sizeof t);
    CHECK(nvfp4_quantize(&t, x, NVFP4_DTYPE_I8, 2, 16, NULL, NVFP4_VARIANT_EAGER, 1) ==
          NVFP4_ERR_UNSUPPORTED);
    CHECK(t.codes == NULL && t.scales == NULL && t.rows == 0);
    CHECK(strlen(nvfp4_last_error()) > 0);
    CHECK(nvfp4_quantize(&t, NULL, NVFP4_DTYPE_F32, 2, 16, NULL, NVFP4_VARIANT_EAGER, 1) ==
          NVFP4_ERR_INVALID_ARGUMENT);
    CHECK(nvfp4_quantize(&t, x, NVFP4_DTYPE_F32, 0, 16, NULL, NVFP4_VARIANT_EAGER, 1) ==
          NVFP4_ERR_INVALID_ARGUMENT);
    CHECK(nvfp4_quantize(&t, x, NVFP4_DTYPE_F32, 2, 16, NULL, (nvfp4_variant)7, 1) ==
          NVFP4_ERR_INVALID_ARGUMENT);
    CHECK(nvfp4_quantize(NULL, x, NVFP4_DTYPE_F32, 2, 16, NULL, NVFP4_VARIANT_EAGER, 1) ==
          NVFP4_ERR_INVALID_ARGUMENT);
    CHECK(nvfp4_quantize_ref(&t, x, NVFP4_DTYPE_U8, 2, 16, NULL, NVFP4_VARIANT_EAGER) ==
          NVFP4_ERR_UNSUPPORTED);
    CHECK(nvfp4_quantize_ref(&t, x, NVFP4_DTYPE_F32, 2, -1, NULL, NVFP4_VARIANT_EAGER) ==
          NVFP4_ERR_INVALID_ARGUMENT);
    float pts;
    CHECK(nvfp4_per_tensor_scale(&pts, x, NVFP4_DTYPE_F64, 2, 16) == NVFP4_ERR_UNSUPPORTED);
    CHECK(nvfp4_per_tensor_scale(NULL, x, NVFP4_DTYPE_F32, 2, 16) == NVFP4_ERR_INVALID_ARGUMENT);
    float out[32];
    nvfp4_tensor bad = {0};
    CHECK(nvfp4_dequantize(out, &bad, 1) == NVFP4_ERR_INVALID_ARGUMENT);
}

/* Dequantize of a hand-built tensor in every layout (sign bit of the scale
 * used as stored). */
static void check_dequantize_layouts(void)
{
    nvfp4_tensor t;
    CHECK(nvfp4_tensor_alloc(&t, 3, 32, NVFP4_HI_FIRST, NVFP4_SCALES_TILED) == NVFP4_OK);
    t.per_tensor_scale = 0.5f;
    t.codes[0] = 0x7A;                                /* (0,0)=6, (0,1)=-1 */
    t.scales[nvfp4_tiled_scale_offset(0, 0, 32)] = 0x40; /* 2.0 */
    t.codes[2 * 16 + 15] = 0x0D;                      /* (2,30)=0, (2,31)=-3 */
    t.scales[nvfp4_tiled_scale_offset(2, 1, 32)] = 0xB8; /* -1.0 */
    for (int o = 0; o < 2; o++)
        for (int l = 0; l < 2; l++) {
            nvfp4_tensor u;
            CHECK(nvfp4_tensor_convert(&u, &t, (nvfp4_nibble_order)o, (nvfp4_scale_layout)l) ==
                  NVFP4_OK);
            float out[96];
            CHECK(nvfp4_dequantize(out, &u, 2) == NVFP4_OK);
            CHECK(out[0] == 6.0f && out[1] == -1.0f && out[2] == 0.0f);
            CHECK(out[2 * 32 + 31] == 1.5f && bits(out[2 * 32 + 30]) == 0x80000000u);
            nvfp4_tensor_free(&u);
        }
    nvfp4_tensor_free(&t);
}

static void bench(void)
{
    const int64_t rows = 28672, cols = 5376;
    uint16_t *x = malloc((size_t)(rows * cols) * 2);
    uint64_t rng = 5;
    for (int64_t i = 0; i < rows * cols; i++) x[i] = bf16_trunc((float)test_normal(&rng) * 0.02f);
    for (int rep = 0; rep < 4; rep++) {
        struct timespec a, b;
        nvfp4_tensor t;
        int threads = rep < 3 ? 0 : 1;
        clock_gettime(CLOCK_MONOTONIC, &a);
        nvfp4_status st = nvfp4_quantize(&t, x, NVFP4_DTYPE_BF16, rows, cols, NULL,
                                         NVFP4_VARIANT_EAGER, threads);
        clock_gettime(CLOCK_MONOTONIC, &b);
        printf("bench: quantize 28672x5376 BF16 (scale computed), %d thread(s): %.3f s (%s)\n",
               threads ? threads : nvfp4_default_threads(),
               (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec),
               nvfp4_status_str(st));
        nvfp4_tensor_free(&t);
    }
    free(x);
}

int main(void)
{
    TEST("golden gauss") check_golden_case("gauss");
    TEST("golden outliers") check_golden_case("outliers");
    TEST("golden ties") check_golden_case("ties");
    TEST("hand example") check_hand_example();
    TEST("fast vs ref") check_fast_vs_ref();
    TEST("all 16-bit patterns") check_all_patterns();
    TEST("thread counts") check_threads();
    TEST("variants differ") check_variants_differ();
    TEST("NaN rules") check_nan_rules();
    TEST("errors") check_errors();
    TEST("dequantize layouts") check_dequantize_layouts();
    if (getenv("NVFP4_QUANT_BENCH")) bench();
    return test_summary("quant");
}
