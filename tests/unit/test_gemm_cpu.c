/* test_gemm_cpu.c -- nvfp4_gemm_cpu() against the oracle nvfp4_gemm_ref(),
 * bit for bit (raw accumulators and BF16 outputs), for every SIMD path this
 * CPU has (AVX-512 with and without VNNI) and the portable one, 0 (all
 * cores) / 1 / 2 / 3 threads, the three models, random shapes and
 * adversarial data: scales over the whole E4M3 range (subnormal, zero, NaN,
 * sign bit set), zero blocks, a huge block followed by tiny ones (products
 * truncated: the kernels' slow path), tiny accumulators hit by huge blocks
 * (c truncated), exact cancellation to zero, and for sm120 k64 steps whose
 * four blocks span every scale class (zero-sum blocks with huge scales
 * included), plus hand-derived steps for each of the sm120 guard's three
 * conditions. */
#include "nvfp4.h"
#include "testlib.h"
#include "cpu/cpu_internal.h" /* nvfp4_cpu_allow_vnni(): both AVX-512 kernels */

enum data_kind {
    DATA_TYPICAL,   /* random codes, scales in a few binades */
    DATA_WIDE,      /* random codes, any finite scale byte (sign bit too) */
    DATA_NAN,       /* typical, with a few NaN scales */
    DATA_ZEROS,     /* many zero codes, zero scales, zero blocks */
    DATA_HUGE_TINY, /* huge first blocks, tiny later ones, and the reverse */
    DATA_CANCEL,    /* B's blocks cancel in pairs: exact zeros */
    DATA_STEP_MIX,  /* every block a random scale class: zero, subnormal, tiny, mid, huge;
                       some blocks all-zero codes (their scales still count) */
    DATA_KINDS
};
static const char *const kind_names[] = {"typical", "wide", "nan",   "zeros",
                                         "huge-tiny", "cancel", "step-mix"};

static void set_code(nvfp4_tensor *t, int64_t r, int64_t c, uint8_t code)
{
    uint8_t *byte = &t->codes[(size_t)r * (size_t)(t->cols / 2) + (size_t)(c / 2)];
    int high = (c % 2 == 0) == (t->nibble_order == NVFP4_HI_FIRST);
    *byte = high ? (uint8_t)((*byte & 0x0f) | (code << 4)) : (uint8_t)((*byte & 0xf0) | code);
}

static void set_scale(nvfp4_tensor *t, int64_t r, int64_t cb, uint8_t s)
{
    if (t->scale_layout == NVFP4_SCALES_TILED)
        t->scales[nvfp4_tiled_scale_offset(r, cb, t->cols)] = s;
    else
        t->scales[(size_t)r * (size_t)(t->cols / 16) + (size_t)cb] = s;
}

static uint8_t random_scale(enum data_kind kind, int64_t cb, uint64_t *rng)
{
    uint64_t x = test_rand(rng);
    switch (kind) {
    case DATA_WIDE: {
        uint8_t s = (uint8_t)(x % 0x7f); /* 0x00 .. 0x7e: zero, subnormal .. 448 */
        return (x >> 20) & 1 ? (uint8_t)(s | 0x80) : s;
    }
    case DATA_NAN:
        if (x % 97 == 0) return (x >> 20) & 1 ? 0xff : 0x7f;
        return (uint8_t)(0x30 + (x >> 8) % 24);
    case DATA_ZEROS:
        if (x % 5 == 0) return 0;
        return (uint8_t)(0x28 + (x >> 8) % 40);
    case DATA_HUGE_TINY:
        /* Alternate huge and tiny stretches of blocks. */
        if ((cb / 3) % 2 == 0) return (uint8_t)(0x70 + (x >> 8) % 15);
        return (uint8_t)(0x01 + (x >> 8) % 12);
    case DATA_STEP_MIX: {
        static const uint8_t lo[6] = {0x00, 0x01, 0x08, 0x30, 0x68, 0x38};
        static const uint8_t span[6] = {1, 7, 24, 24, 23, 8};
        int cls = (int)(x % 6);
        uint8_t s = (uint8_t)(lo[cls] + (x >> 8) % span[cls]);
        return (x >> 20) & 1 ? (uint8_t)(s | 0x80) : s;
    }
    default:
        return (uint8_t)(0x30 + (x >> 8) % 24);
    }
}

static uint8_t random_code(enum data_kind kind, uint64_t *rng)
{
    uint64_t x = test_rand(rng);
    if (kind == DATA_ZEROS && x % 3 == 0) return (x >> 8) & 1 ? 8 : 0;
    return (uint8_t)((x >> 16) & 15);
}

/* rows x cols tensor of the given kind; order and layout vary with seed. */
static void make_tensor(nvfp4_tensor *t, int64_t rows, int64_t cols, enum data_kind kind,
                        uint64_t seed, int is_b)
{
    uint64_t rng = seed * 0x9E3779B97F4A7C15ULL + 12345;
    nvfp4_nibble_order order = (seed & 1) ? NVFP4_LO_FIRST : NVFP4_HI_FIRST;
    nvfp4_scale_layout layout = (seed & 2) ? NVFP4_SCALES_ROW_MAJOR : NVFP4_SCALES_TILED;
    if (is_b) {
        order = (seed & 4) ? NVFP4_LO_FIRST : NVFP4_HI_FIRST;
        layout = (seed & 8) ? NVFP4_SCALES_ROW_MAJOR : NVFP4_SCALES_TILED;
    }
    nvfp4_status st = nvfp4_tensor_alloc(t, rows, cols, order, layout);
    CHECKF(st == NVFP4_OK, "tensor_alloc %lld x %lld: %s", (long long)rows, (long long)cols,
           nvfp4_last_error());
    if (st != NVFP4_OK) return;
    int64_t nb = cols / 16;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t cb = 0; cb < nb; cb++) {
            set_scale(t, r, cb, random_scale(kind, cb, &rng));
            uint64_t z = test_rand(&rng);
            int zero_block = (kind == DATA_ZEROS && z % 7 == 0) || (kind == DATA_STEP_MIX && z % 4 == 0);
            for (int64_t i = 0; i < 16; i++)
                set_code(t, r, cb * 16 + i, zero_block ? 0 : random_code(kind, &rng));
        }
        if (kind == DATA_HUGE_TINY && r % 2 == 1 && nb > 1) {
            /* the reverse: tiny blocks first, then one huge block */
            for (int64_t cb = 0; cb < nb; cb++)
                set_scale(t, r, cb, cb == nb - 1 ? 0x7e : (uint8_t)(0x01 + cb % 9));
            /* and in some rows the huge block's largest elements only at its
             * end: per-block maxima must cover all 16 elements */
            int64_t zeros = r % 4 == 1 ? 8 : 12;
            for (int64_t i = 0; i < zeros; i++) set_code(t, r, (nb - 1) * 16 + i, 0);
        }
        if (kind == DATA_CANCEL && nb >= 2) {
            /* pairs of blocks (2i, 2i+1): A repeats the block, B negates it,
             * so the second step returns c to (nearly) where it was; where
             * the first step left c exact, the pair sums to zero. */
            for (int64_t cb = 0; cb + 1 < nb; cb += 2) {
                uint8_t s = random_scale(DATA_TYPICAL, cb, &rng);
                set_scale(t, r, cb, s);
                set_scale(t, r, cb + 1, s);
                for (int64_t i = 0; i < 16; i++) {
                    uint8_t code = nvfp4_tensor_code(t, r, cb * 16 + i);
                    set_code(t, r, (cb + 1) * 16 + i, is_b ? (uint8_t)(code ^ 8) : code);
                }
            }
        }
    }
    t->per_tensor_scale = (float)(0.001 + (double)(test_rand(&rng) % 1000) / 3000.0);
}

/* The SIMD paths; the last runs AVX-512 with VNNI forbidden (the kernel a
 * CPU without VNNI uses). */
static const char *const paths[] = {"portable", "avx2", "avx512", "avx512"};
static const char *const path_labels[] = {"portable", "avx2", "avx512", "avx512-novnni"};
static const nvfp4_model models[] = {NVFP4_MODEL_SM90, NVFP4_MODEL_EXACT, NVFP4_MODEL_SM120};

/* Oracle once, then every path and thread count against it. */
static int k_slices_under_test = 1; /* the K slices compare_all() runs with */

static void compare_all(const char *label, const nvfp4_tensor *a, const nvfp4_tensor *b,
                        nvfp4_model model, const float *bias)
{
    int S = k_slices_under_test;
    int64_t M = a->rows, N = b->rows;
    size_t n = M > 0 && N > 0 ? (size_t)(M * N) : 1;
    float *raw_ref = malloc(n * sizeof(float)), *raw = malloc(n * sizeof(float));
    uint16_t *out_ref = malloc(n * 2), *out = malloc(n * 2);
    nvfp4_gemm_args args = {a, b, bias, raw_ref, out_ref, model, 1, S};
    nvfp4_status st = nvfp4_gemm_ref(&args);
    CHECKF(st == NVFP4_OK, "%s: gemm_ref: %s", label, nvfp4_last_error());
    int simd_runs = 0;
    for (int p = 0; p < 4; p++) {
        /* EXACT differs only by the B packing (portable or SIMD): fewer runs
         * keep ASan fast. */
        if (model == NVFP4_MODEL_EXACT && simd_runs > 1) break;
        if (nvfp4_cpu_force_simd(paths[p]) != NVFP4_OK) continue; /* CPU lacks it */
        simd_runs++;
        nvfp4_cpu_allow_vnni(p != 3);
        for (int threads = 0; threads <= 3; threads++) {
            memset(raw, 0xA5, n * sizeof(float));
            memset(out, 0xA5, n * 2);
            nvfp4_gemm_args cargs = {a, b, bias, raw, out, model, threads, S};
            st = nvfp4_gemm_cpu(&cargs);
            char what[200];
            snprintf(what, sizeof what, "%s %s %s threads=%d S=%d raw", label,
                     nvfp4_model_name(model), path_labels[p], threads, S);
            CHECKF(st == NVFP4_OK, "%s: %s", what, nvfp4_last_error());
            test_equal_bits(what, raw, raw_ref, sizeof(float), M, N);
            snprintf(what, sizeof what, "%s %s %s threads=%d S=%d out", label,
                     nvfp4_model_name(model), path_labels[p], threads, S);
            test_equal_bits(what, out, out_ref, 2, M, N);
        }
    }
    nvfp4_cpu_force_simd(NULL);
    nvfp4_cpu_allow_vnni(1);
    free(raw_ref);
    free(raw);
    free(out_ref);
    free(out);
}

static float *make_bias(int64_t n, uint64_t seed)
{
    float *bias = malloc((size_t)(n ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        bias[i] = nvfp4_bf16_to_f32(nvfp4_bf16_from_f32((float)test_normal(&seed)));
    return bias;
}

static void run_case(enum data_kind kind, int64_t M, int64_t N, int64_t K, uint64_t seed,
                     const nvfp4_model *which, int nmodels)
{
    nvfp4_tensor a, b;
    make_tensor(&a, M, K, kind, seed, 0);
    make_tensor(&b, N, K, kind, seed * 7 + 3, 1);
    float *bias = (seed % 2) ? make_bias(N, seed) : NULL;
    char label[120];
    snprintf(label, sizeof label, "%s M=%lld N=%lld K=%lld bias=%d", kind_names[kind],
             (long long)M, (long long)N, (long long)K, bias != NULL);
    for (int i = 0; i < nmodels; i++) compare_all(label, &a, &b, which[i], bias);
    free(bias);
    nvfp4_tensor_free(&a);
    nvfp4_tensor_free(&b);
}

/* Columns [k0, k1) of src as a tensor of their own (same order, layout and
 * per-tensor scale). */
static void copy_cols(nvfp4_tensor *dst, const nvfp4_tensor *src, int64_t k0, int64_t k1)
{
    nvfp4_status st = nvfp4_tensor_alloc(dst, src->rows, k1 - k0, src->nibble_order,
                                         src->scale_layout);
    CHECKF(st == NVFP4_OK, "tensor_alloc: %s", nvfp4_last_error());
    if (st != NVFP4_OK) return;
    for (int64_t r = 0; r < src->rows; r++) {
        for (int64_t k = k0; k < k1; k++) set_code(dst, r, k - k0, nvfp4_tensor_code(src, r, k));
        for (int64_t cb = k0 / 16; cb < k1 / 16; cb++)
            set_scale(dst, r, cb - k0 / 16, nvfp4_tensor_scale(src, r, cb));
    }
    dst->per_tensor_scale = src->per_tensor_scale;
}

/* One output, sm120, from hand-set 1 x K operands: element k[i] gets codes
 * ac[i] / bc[i] (every other code 0), block j scales as[j] / bs[j].  The
 * oracle and every path must give `want` (hand-derived, see the callers);
 * `naive` is RZ of the untruncated sum, which a wrong guard would give. */
static void sm120_hand_case(const char *what, int64_t K, int n, const int *k, const uint8_t *ac,
                            const uint8_t *bc, const uint8_t *as, const uint8_t *bs, float want,
                            float naive)
{
    nvfp4_tensor a, b;
    CHECK(nvfp4_tensor_alloc(&a, 1, K, NVFP4_HI_FIRST, NVFP4_SCALES_TILED) == NVFP4_OK);
    CHECK(nvfp4_tensor_alloc(&b, 1, K, NVFP4_LO_FIRST, NVFP4_SCALES_ROW_MAJOR) == NVFP4_OK);
    for (int i = 0; i < n; i++) {
        set_code(&a, 0, k[i], ac[i]);
        set_code(&b, 0, k[i], bc[i]);
    }
    for (int64_t j = 0; j < K / 16; j++) {
        set_scale(&a, 0, j, as[j]);
        set_scale(&b, 0, j, bs[j]);
    }
    CHECKF(want != naive, "%s: the case does not tell the guard's answer apart", what);
    float got = -1.0f;
    nvfp4_gemm_args g = {&a, &b, NULL, &got, NULL, NVFP4_MODEL_SM120, 1, 1};
    CHECK(nvfp4_gemm_ref(&g) == NVFP4_OK);
    CHECKF(got == want, "%s: oracle %.9g, want %.9g", what, got, want);
    for (int p = 0; p < 4; p++) {
        if (nvfp4_cpu_force_simd(paths[p]) != NVFP4_OK) continue;
        nvfp4_cpu_allow_vnni(p != 3);
        got = -1.0f;
        CHECK(nvfp4_gemm_cpu(&g) == NVFP4_OK);
        CHECKF(got == want, "%s %s: got %.9g, want %.9g (untruncated: %.9g)", what,
               path_labels[p], got, want, naive);
    }
    nvfp4_cpu_force_simd(NULL);
    nvfp4_cpu_allow_vnni(1);
    nvfp4_tensor_free(&a);
    nvfp4_tensor_free(&b);
}

int main(void)
{
    TEST("simd selection")
    {
        const char *name = nvfp4_cpu_simd_name();
        CHECK(strcmp(name, "portable") == 0 || strcmp(name, "avx2") == 0 ||
              strcmp(name, "avx512") == 0);
        CHECK(nvfp4_cpu_force_simd("portable") == NVFP4_OK);
        CHECK(strcmp(nvfp4_cpu_simd_name(), "portable") == 0);
        CHECK(nvfp4_cpu_force_simd("sse9") == NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(strstr(nvfp4_last_error(), "sse9") != NULL);
        CHECK(nvfp4_cpu_force_simd(NULL) == NVFP4_OK);
        CHECK(strcmp(nvfp4_cpu_simd_name(), name) == 0);
        printf("simd path here: %s\n", name);
    }

    TEST("argument errors")
    {
        nvfp4_tensor a, b;
        make_tensor(&a, 3, 32, DATA_TYPICAL, 1, 0);
        make_tensor(&b, 5, 48, DATA_TYPICAL, 2, 1);
        float raw[15];
        nvfp4_gemm_args args = {&a, &b, NULL, raw, NULL, NVFP4_MODEL_SM90, 1, 1};
        CHECK(nvfp4_gemm_cpu(&args) == NVFP4_ERR_INVALID_ARGUMENT); /* K differs */
        CHECK(strstr(nvfp4_last_error(), "K differs") != NULL);
        args.b = &a;
        args.raw = NULL;
        CHECK(nvfp4_gemm_cpu(&args) == NVFP4_ERR_INVALID_ARGUMENT); /* nothing to compute */
        args.raw = raw;
        args.model = (nvfp4_model)7;
        CHECK(nvfp4_gemm_cpu(&args) == NVFP4_ERR_INVALID_ARGUMENT);
        args.model = NVFP4_MODEL_SM90;
        args.a = NULL;
        CHECK(nvfp4_gemm_cpu(&args) == NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(nvfp4_gemm_cpu(NULL) == NVFP4_ERR_INVALID_ARGUMENT);
        nvfp4_tensor_free(&a);
        nvfp4_tensor_free(&b);
    }

    TEST("empty shapes")
    {
        /* K = 0: every accumulator is +0; M or N = 0: nothing written. */
        /* nvfp4_tensor_alloc refuses 0 columns; such a tensor has no arrays */
        nvfp4_tensor a = {3, 0, NULL, NULL, 1.5f, NVFP4_HI_FIRST, NVFP4_SCALES_TILED};
        nvfp4_tensor b = {5, 0, NULL, NULL, 0.25f, NVFP4_LO_FIRST, NVFP4_SCALES_ROW_MAJOR};
        float *bias = make_bias(5, 9);
        for (int i = 0; i < 3; i++) compare_all("K=0", &a, &b, models[i], bias);
        nvfp4_tensor a0 = {0, 32, NULL, NULL, 1.0f, NVFP4_HI_FIRST, NVFP4_SCALES_TILED};
        nvfp4_tensor b0 = {0, 32, NULL, NULL, 1.0f, NVFP4_HI_FIRST, NVFP4_SCALES_TILED};
        float raw[1] = {42.0f};
        nvfp4_gemm_args args = {&a0, &b0, NULL, raw, NULL, NVFP4_MODEL_SM90, 2, 1};
        CHECK(nvfp4_gemm_cpu(&args) == NVFP4_OK && raw[0] == 42.0f);
        free(bias);
    }

    TEST("random shapes, all models")
    {
        uint64_t rng = 2024;
        for (int iter = 0; iter < 8; iter++) {
            int64_t M = 1 + (int64_t)(test_rand(&rng) % 40);
            int64_t N = 1 + (int64_t)(test_rand(&rng) % 70);
            int64_t K = 16 * (1 + (int64_t)(test_rand(&rng) % 24)); /* often not a multiple of 64 */
            run_case((enum data_kind)(iter % DATA_KINDS), M, N, K, 100 + (uint64_t)iter, models, 3);
        }
    }

    TEST("adversarial data, sm90")
    {
        uint64_t rng = 77;
        for (int kind = 0; kind < DATA_KINDS; kind++) {
            for (int rep = 0; rep < 2; rep++) {
                int64_t M = 1 + (int64_t)(test_rand(&rng) % 40);
                int64_t N = 1 + (int64_t)(test_rand(&rng) % 70);
                int64_t K = 16 * (1 + (int64_t)(test_rand(&rng) % 48));
                run_case((enum data_kind)kind, M, N, K, 500 + (uint64_t)(kind * 10 + rep),
                         models, 1);
            }
        }
    }

    TEST("adversarial data, sm120")
    {
        uint64_t rng = 91;
        for (int kind = 0; kind < DATA_KINDS; kind++) {
            for (int rep = 0; rep < 3; rep++) {
                int64_t M = 1 + (int64_t)(test_rand(&rng) % 24);
                int64_t N = 1 + (int64_t)(test_rand(&rng) % 140);
                int64_t K = 16 * (1 + (int64_t)(test_rand(&rng) % 64));
                run_case((enum data_kind)kind, M, N, K, 700 + (uint64_t)(kind * 10 + rep),
                         models + 2, 1);
            }
        }
    }

    TEST("sm120 guard: each condition at its edge, hand-derived")
    {
        /* Codes: 1 = 0.5, 2 = 1, 7 = 6, 9 = -0.5.  Scales: 0x01 = 2^-9
         * (subnormal, exponent -6), 0x38 = 1, 0x50 = 8, 0x78 = 256,
         * 0x7e = 448 (exponent 8).  A block pair's exponent is the sum of
         * its scales' exponents; the unit is 2^(E-35). */
        {
            /* c cuts a block: step 0 gives c = 256 * 256 = 2^16; step 1
             * adds -0.5 * 2^-9 * 0.5 * 2^-9 = -2^-20 (pair exponent -12).
             * E = 16 and the unit 2^-19 drop it (E - (-12) = 28, one past
             * what a block keeps): 65536.  Untruncated: 65536 - 2^-20, cut
             * to FP32 toward zero: 65536 - 2^-8. */
            int k[2] = {0, 64};
            uint8_t ac[2] = {2, 1}, bc[2] = {2, 9};
            uint8_t as[8] = {0x78, 0, 0, 0, 0x01}, bs[8] = {0x78, 0, 0, 0, 0x01};
            sm120_hand_case("c cuts a block", 128, 2, k, ac, bc, as, bs, 65536.0f,
                            65536.0f - ldexpf(1, -8));
        }
        {
            /* Blocks cut c: step 0 gives c = 8 + 2^-20 (8 * 1, and
             * 2^-20 from two subnormal scales; E = 3, exact).  Step 1: a
             * block of zero codes with scales 448 and 448 (exponent 16):
             * E - e_c = 13, one past what c keeps, so the unit 2^-19 drops
             * c's last bit: 8.  Untruncated: 8 + 2^-20. */
            int k[2] = {0, 16};
            uint8_t ac[2] = {2, 1}, bc[2] = {2, 1};
            uint8_t as[8] = {0x50, 0x01, 0, 0, 0x7e}, bs[8] = {0x38, 0x01, 0, 0, 0x7e};
            sm120_hand_case("blocks cut c", 128, 2, k, ac, bc, as, bs, 8.0f,
                            8.0f + ldexpf(1, -20));
        }
        {
            /* A block cuts another in the same step: 2688 * 2688 = 7225344
             * (pair exponent 16) and -2^-20 (pair exponent -12): 28 apart,
             * the unit 2^-19 drops the small one: 7225344.  Untruncated:
             * 7225344 - 2^-20, toward zero 7225343.5. */
            int k[2] = {0, 16};
            uint8_t ac[2] = {7, 9}, bc[2] = {7, 1};
            uint8_t as[4] = {0x7e, 0x01, 0, 0}, bs[4] = {0x7e, 0x01, 0, 0};
            sm120_hand_case("a block cuts a block", 64, 2, k, ac, bc, as, bs, 7225344.0f,
                            7225343.5f);
        }
    }

    TEST("sm120: one K slice through nvfp4_cpu_gemm_slice")
    {
        /* slices start on a k64 step; the last one may end anywhere (padded) */
        nvfp4_tensor a, b;
        int64_t M = 9, N = 70, K = 16 * 29;
        make_tensor(&a, M, K, DATA_STEP_MIX, 61, 0);
        make_tensor(&b, N, K, DATA_STEP_MIX, 62, 1);
        static const int64_t cuts[][2] = {{0, 16 * 29}, {128, 16 * 29}, {64, 16 * 13}, {192, 192}};
        float raw[9 * 70], want[9 * 70];
        for (int c = 0; c < 4; c++) {
            int64_t k0 = cuts[c][0], k1 = cuts[c][1];
            nvfp4_tensor as = {0}, bs = {0};
            if (k1 == k0) { /* no columns: every accumulator is +0 */
                memset(want, 0, sizeof want);
            } else {
                copy_cols(&as, &a, k0, k1);
                copy_cols(&bs, &b, k0, k1);
                nvfp4_gemm_args g = {&as, &bs, NULL, want, NULL, NVFP4_MODEL_SM120, 1, 1};
                CHECK(nvfp4_gemm_ref(&g) == NVFP4_OK);
            }
            for (int p = 0; p < 4; p++) {
                if (nvfp4_cpu_force_simd(paths[p]) != NVFP4_OK) continue;
                nvfp4_cpu_allow_vnni(p != 3);
                memset(raw, 0xA5, sizeof raw);
                CHECK(nvfp4_cpu_gemm_slice(&a, &b, NVFP4_MODEL_SM120, k0, k1, raw, 2) == NVFP4_OK);
                char what[120];
                snprintf(what, sizeof what, "slice [%lld, %lld) %s", (long long)k0, (long long)k1,
                         path_labels[p]);
                test_equal_bits(what, raw, want, 4, M, N);
            }
            nvfp4_cpu_force_simd(NULL);
            nvfp4_cpu_allow_vnni(1);
            nvfp4_tensor_free(&as);
            nvfp4_tensor_free(&bs);
        }
        /* a slice that starts inside a k64 step is refused */
        CHECK(nvfp4_cpu_gemm_slice(&a, &b, NVFP4_MODEL_SM120, 16, 128, raw, 1) ==
              NVFP4_ERR_UNSUPPORTED);
        nvfp4_tensor_free(&a);
        nvfp4_tensor_free(&b);
    }

    TEST("long K, sm120")
    {
        run_case(DATA_TYPICAL, 9, 37, 2048 + 16, 911, models + 2, 1);
        run_case(DATA_STEP_MIX, 5, 83, 2048 + 48, 912, models + 2, 1);
        run_case(DATA_HUGE_TINY, 6, 19, 1536, 913, models + 2, 1);
    }

    TEST("long K, sm90 and exact")
    {
        run_case(DATA_TYPICAL, 9, 37, 2048, 901, models, 2);
        run_case(DATA_WIDE, 5, 21, 2048, 902, models, 2);
        run_case(DATA_HUGE_TINY, 6, 19, 1536, 903, models, 2);
    }

    TEST("quantized data")
    {
        /* What the library sees in practice: nvfp4_quantize of normal data. */
        int64_t M = 17, N = 67, K = 1024;
        uint64_t seed = 4242;
        float *x = malloc((size_t)(M * K) * sizeof(float));
        float *w = malloc((size_t)(N * K) * sizeof(float));
        for (int64_t i = 0; i < M * K; i++) x[i] = (float)test_normal(&seed);
        for (int64_t i = 0; i < N * K; i++) w[i] = (float)(0.02 * test_normal(&seed));
        nvfp4_tensor a, b;
        nvfp4_status sa = nvfp4_quantize(&a, x, NVFP4_DTYPE_F32, M, K, NULL, NVFP4_VARIANT_EAGER, 2);
        nvfp4_status sb = nvfp4_quantize(&b, w, NVFP4_DTYPE_F32, N, K, NULL, NVFP4_VARIANT_EAGER, 2);
        CHECKF(sa == NVFP4_OK && sb == NVFP4_OK, "quantize: %s", nvfp4_last_error());
        if (sa == NVFP4_OK && sb == NVFP4_OK) {
            /* the quantizer pads rows to 16; keep the logical shapes */
            float *bias = make_bias(b.rows, 5);
            for (int i = 0; i < 3; i++) compare_all("quantized", &a, &b, models[i], bias);
            free(bias);
        }
        nvfp4_tensor_free(&a);
        nvfp4_tensor_free(&b);
        free(x);
        free(w);
    }

    TEST("K slices: CPU == ref, every path, model and thread count")
    {
        /* K = 16 * odd numbers: never a multiple of 64, so the last slice is
         * short; S = 1 (today's contract), small S, S = 32 and S above the
         * number of 64-groups (slices of one group each). */
        static const int64_t ks[] = {16 * 37, 16 * 9, 16 * 130};
        for (int ki = 0; ki < 3; ki++) {
            int64_t K = ks[ki], groups = (K + 63) / 64;
            int s_list[] = {1, 2, 3, 5, 7, 32, (int)groups + 3};
            for (int si = 0; si < 7; si++) {
                k_slices_under_test = s_list[si];
                run_case((enum data_kind)((ki + si) % DATA_KINDS), 6 + si, 70 + 3 * ki, K,
                         3000 + (uint64_t)(ki * 10 + si), models, 3);
            }
        }
        k_slices_under_test = 1;
    }

    TEST("K slices: S = 0 and S = 1 are today's single chain")
    {
        nvfp4_tensor a, b;
        make_tensor(&a, 7, 16 * 45, DATA_WIDE, 71, 0);
        make_tensor(&b, 33, 16 * 45, DATA_WIDE, 72, 1);
        float r0[7 * 33], r1[7 * 33], r2[7 * 33];
        for (int m = 0; m < 3; m++) {
            nvfp4_gemm_args g0 = {&a, &b, NULL, r0, NULL, models[m], 2, 0};
            nvfp4_gemm_args g1 = {&a, &b, NULL, r1, NULL, models[m], 2, 1};
            nvfp4_gemm_args g2 = {&a, &b, NULL, r2, NULL, models[m], 1, 0};
            CHECK(nvfp4_gemm_cpu(&g0) == NVFP4_OK && nvfp4_gemm_cpu(&g1) == NVFP4_OK &&
                  nvfp4_gemm_ref(&g2) == NVFP4_OK);
            test_equal_bits("S=0 vs S=1", r0, r1, 4, 7, 33);
            test_equal_bits("S=0 cpu vs ref", r0, r2, 4, 7, 33);
        }
        /* and S outside 0..NVFP4_MAX_K_SLICES is refused */
        nvfp4_gemm_args bad = {&a, &b, NULL, r0, NULL, NVFP4_MODEL_SM90, 1, -1};
        CHECK(nvfp4_gemm_cpu(&bad) == NVFP4_ERR_INVALID_ARGUMENT);
        bad.k_slices = NVFP4_MAX_K_SLICES + 1;
        CHECK(nvfp4_gemm_ref(&bad) == NVFP4_ERR_INVALID_ARGUMENT);
        nvfp4_tensor_free(&a);
        nvfp4_tensor_free(&b);
    }

    TEST("K slices: a hand-checked case")
    {
        /* K = 128, one output.  k = 0: a' = b' = 6 * 256 = 1536, product
         * p0 = 2359296 = 1.125 * 2^21 (FP32 ulp there: 2^-2).  k = 64:
         * a' = 1.5 (code 1.5, scale 1), b' = 0.125 (code 0.5, scale 0.25),
         * product p1 = 0.1875 = 3 * 2^-4.  Everything else is zero.
         *  one chain (sm90): the second step aligns to E = 21, unit 2^-4,
         *    keeps 0.1875 and truncates p0 + 0.1875 to 24 bits: 2359296.
         *  one chain (sm120): the same with unit 2^(21-35): 2359296.
         *  exact: RNE(2359296.1875) = 2359296.25 (0.1875 > half an ulp).
         *  S = 2 (slices [0,64), [64,128)), every model: p0 and p1 exactly,
         *    then FP32 RNE p0 + p1 = 2359296.25.
         *  S = 3 has only 2 groups: the same two slices. */
        nvfp4_tensor a, b;
        CHECK(nvfp4_tensor_alloc(&a, 1, 128, NVFP4_HI_FIRST, NVFP4_SCALES_TILED) == NVFP4_OK);
        CHECK(nvfp4_tensor_alloc(&b, 1, 128, NVFP4_LO_FIRST, NVFP4_SCALES_ROW_MAJOR) == NVFP4_OK);
        for (int cb = 0; cb < 8; cb++) {
            set_scale(&a, 0, cb, 0x38); /* 1.0 */
            set_scale(&b, 0, cb, 0x38);
        }
        set_code(&a, 0, 0, 0x7);    /* 6 */
        set_scale(&a, 0, 0, 0x78);  /* 256 */
        set_code(&b, 0, 0, 0x7);
        set_scale(&b, 0, 0, 0x78);
        set_code(&a, 0, 64, 0x3);   /* 1.5, scale 1 */
        set_code(&b, 0, 64, 0x1);   /* 0.5 */
        set_scale(&b, 0, 4, 0x28);  /* 0.25 */
        const float one_chain = 2359296.0f, rounded = 2359296.25f;
        for (int m = 0; m < 3; m++) {
            for (int S = 1; S <= 3; S++) {
                float want = (S == 1 && models[m] != NVFP4_MODEL_EXACT) ? one_chain : rounded;
                float got_ref = -1, got_cpu = -1;
                nvfp4_gemm_args g = {&a, &b, NULL, &got_ref, NULL, models[m], 1, S};
                CHECK(nvfp4_gemm_ref(&g) == NVFP4_OK);
                g.raw = &got_cpu;
                CHECK(nvfp4_gemm_cpu(&g) == NVFP4_OK);
                CHECKF(got_ref == want && got_cpu == want, "%s S=%d: ref %.4f cpu %.4f want %.4f",
                       nvfp4_model_name(models[m]), S, got_ref, got_cpu, want);
            }
        }
        nvfp4_tensor_free(&a);
        nvfp4_tensor_free(&b);
    }

    return test_summary("gemm_cpu");
}
