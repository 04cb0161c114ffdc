/* test_validate.c -- the checks front ends apply to what users pass:
 * nvfp4_check_per_tensor_scale (every class of float), nvfp4_count_nonfinite
 * (every BF16 / F16 bit pattern, and random F32 against a plain reference)
 * and nvfp4_tensor_count_nonfinite against its reference, counting what
 * nvfp4_dequantize() returns, on random and adversarial tensors (NaN block
 * scales, NaN / Inf / 0 / huge per-tensor scales, partial regions, both
 * layouts and nibble orders). */
#include <float.h>

#include "nvfp4.h"
#include "testlib.h"

static int msg_has(const char *s) { return strstr(nvfp4_last_error(), s) != NULL; }

/* The reference: dequantize everything, count the region's non-finite values. */
static nvfp4_nonfinite count_ref(const nvfp4_tensor *t, int64_t rows, int64_t cols)
{
    nvfp4_nonfinite r = {0, 0, -1, -1, 0.0f};
    float *v = malloc((size_t)(t->rows * t->cols) * sizeof *v);
    if (!v || nvfp4_dequantize(v, t, 1) != NVFP4_OK) {
        free(v);
        r.nan = -1;
        return r;
    }
    for (int64_t i = 0; i < rows; i++)
        for (int64_t c = 0; c < cols; c++) {
            float x = v[i * t->cols + c];
            if (isfinite(x)) continue;
            if (isnan(x)) r.nan++;
            else r.inf++;
            if (r.first_row < 0) r.first_row = i, r.first_col = c, r.first_value = x;
        }
    free(v);
    return r;
}

static int same(const nvfp4_nonfinite *a, const nvfp4_nonfinite *b)
{
    return a->nan == b->nan && a->inf == b->inf && a->first_row == b->first_row &&
           a->first_col == b->first_col &&
           (a->first_row < 0 || nvfp4_f32_bits(a->first_value) == nvfp4_f32_bits(b->first_value));
}

static void random_tensor(nvfp4_tensor *t, int64_t rows, int64_t cols, uint64_t *s, int nan_scales,
                          float pts, nvfp4_nibble_order order, nvfp4_scale_layout layout)
{
    CHECK(nvfp4_tensor_alloc(t, rows, cols, order, layout) == NVFP4_OK);
    for (int64_t i = 0; i < rows * cols / 2; i++) t->codes[i] = (uint8_t)test_rand(s);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t cb = 0; cb < cols / 16; cb++) {
            uint8_t b = (uint8_t)(test_rand(s) % 0x7F); /* finite scales */
            if (nan_scales && test_rand(s) % 8 == 0) b = test_rand(s) & 1 ? 0x7F : 0xFF;
            size_t off = layout == NVFP4_SCALES_TILED ? nvfp4_tiled_scale_offset(r, cb, cols)
                                                      : (size_t)(r * (cols / 16) + cb);
            t->scales[off] = b;
        }
    t->per_tensor_scale = pts;
}

int main(void)
{
    TEST("per-tensor scales: finite and > 0, subnormals included")
    {
        const float ok[] = {1.0f, 0.5f, FLT_MIN, FLT_MAX, nvfp4_f32_from_bits(1), /* 2^-149 */
                            nvfp4_f32_from_bits(0x007FFFFF), 1e-45f, 3.4e38f};
        for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
            CHECKF(nvfp4_check_per_tensor_scale(ok[i], "s") == NVFP4_OK, "%g refused", (double)ok[i]);
        const float bad[] = {0.0f, -0.0f, -1.0f, -FLT_MIN, -nvfp4_f32_from_bits(1), NAN, -NAN,
                             INFINITY, -INFINITY};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
            CHECKF(nvfp4_check_per_tensor_scale(bad[i], "--per-tensor-scale") ==
                           NVFP4_ERR_INVALID_ARGUMENT &&
                       msg_has("--per-tensor-scale = ") && msg_has("finite and greater than 0"),
                   "%g: %s", (double)bad[i], nvfp4_last_error());
        nvfp4_check_per_tensor_scale(-0.0f, "x");
        CHECK(msg_has("x = -0 is not"));
        nvfp4_check_per_tensor_scale(NAN, NULL);
        CHECK(msg_has("per_tensor_scale = NaN is not"));
    }

    TEST("count_nonfinite: every BF16 and F16 bit pattern")
    {
        uint16_t all[65536];
        for (int i = 0; i < 65536; i++) all[i] = (uint16_t)i;
        for (int d = 0; d < 2; d++) {
            nvfp4_dtype dt = d ? NVFP4_DTYPE_F16 : NVFP4_DTYPE_BF16;
            nvfp4_nonfinite nf, want = {0, 0, -1, -1, 0.0f};
            for (int i = 0; i < 65536; i++) {
                float v = d ? nvfp4_f16_to_f32(all[i]) : nvfp4_bf16_to_f32(all[i]);
                if (isfinite(v)) continue;
                if (isnan(v)) want.nan++;
                else want.inf++;
                if (want.first_row < 0) want.first_row = i / 256, want.first_col = i % 256, want.first_value = v;
            }
            CHECK(nvfp4_count_nonfinite(&nf, all, dt, 256, 256) == NVFP4_OK);
            CHECKF(same(&nf, &want), "%s: nan %lld inf %lld first (%lld, %lld); want %lld %lld (%lld, %lld)",
                   nvfp4_dtype_name(dt), (long long)nf.nan, (long long)nf.inf, (long long)nf.first_row,
                   (long long)nf.first_col, (long long)want.nan, (long long)want.inf,
                   (long long)want.first_row, (long long)want.first_col);
            CHECK(want.inf == 2 && want.nan == (d ? 2046 : 254));
        }
    }

    TEST("count_nonfinite: F32 against the plain loop; shapes and arguments")
    {
        uint64_t s = 11;
        for (int rep = 0; rep < 50; rep++) {
            int64_t rows = 1 + (int64_t)(test_rand(&s) % 9), cols = 1 + (int64_t)(test_rand(&s) % 70);
            float *x = malloc((size_t)(rows * cols) * sizeof *x);
            nvfp4_nonfinite want = {0, 0, -1, -1, 0.0f}, nf;
            for (int64_t i = 0; i < rows * cols; i++) {
                uint64_t k = test_rand(&s) % 40;
                x[i] = k == 0 ? NAN : k == 1 ? -INFINITY : k == 2 ? INFINITY : k == 3
                       ? nvfp4_f32_from_bits(0xFF800001u | (uint32_t)test_rand(&s)) /* NaN payloads */
                       : (float)test_normal(&s);
                if (isfinite(x[i])) continue;
                if (isnan(x[i])) want.nan++;
                else want.inf++;
                if (want.first_row < 0) want.first_row = i / cols, want.first_col = i % cols, want.first_value = x[i];
            }
            CHECK(nvfp4_count_nonfinite(&nf, x, NVFP4_DTYPE_F32, rows, cols) == NVFP4_OK);
            CHECKF(same(&nf, &want), "F32 %lld x %lld rep %d", (long long)rows, (long long)cols, rep);
            free(x);
        }
        nvfp4_nonfinite nf;
        CHECK(nvfp4_count_nonfinite(&nf, NULL, NVFP4_DTYPE_F32, 0, 5) == NVFP4_OK && nf.nan == 0 &&
              nf.first_row == -1);
        CHECK(nvfp4_count_nonfinite(&nf, NULL, NVFP4_DTYPE_F32, 2, 5) == NVFP4_ERR_INVALID_ARGUMENT);
        uint8_t u = 0;
        CHECK(nvfp4_count_nonfinite(&nf, &u, NVFP4_DTYPE_U8, 1, 1) == NVFP4_ERR_UNSUPPORTED);
        CHECK(nvfp4_count_nonfinite(&nf, &u, NVFP4_DTYPE_F32, -1, 1) == NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(nvfp4_count_nonfinite(NULL, &u, NVFP4_DTYPE_F32, 1, 1) == NVFP4_ERR_INVALID_ARGUMENT);
    }

    TEST("tensor_count_nonfinite == the count of nvfp4_dequantize's NaN and Inf")
    {
        uint64_t s = 12;
        const float pts[] = {1.0f, 0.25f, -0.5f, 0.0f, NAN, INFINITY, -INFINITY, 1e35f, 3e38f,
                             nvfp4_f32_from_bits(1)};
        int cases = 0;
        for (size_t p = 0; p < sizeof pts / sizeof pts[0]; p++)
            for (int nan_scales = 0; nan_scales < 2; nan_scales++)
                for (int lay = 0; lay < 2; lay++) {
                    int64_t rows = 1 + (int64_t)(test_rand(&s) % 140), cols = 16 * (1 + (int64_t)(test_rand(&s) % 9));
                    nvfp4_tensor t;
                    random_tensor(&t, rows, cols, &s, nan_scales, pts[p],
                                  lay ? NVFP4_LO_FIRST : NVFP4_HI_FIRST,
                                  lay ? NVFP4_SCALES_ROW_MAJOR : NVFP4_SCALES_TILED);
                    /* the whole tensor, and a region with a partial last block */
                    int64_t regions[2][2] = {{rows, cols}, {(rows + 1) / 2, cols - 1 - (int64_t)(test_rand(&s) % 15)}};
                    for (int g = 0; g < 2; g++) {
                        nvfp4_nonfinite nf, want = count_ref(&t, regions[g][0], regions[g][1]);
                        CHECK(nvfp4_tensor_count_nonfinite(&nf, &t, regions[g][0], regions[g][1]) == NVFP4_OK);
                        CHECKF(same(&nf, &want),
                               "pts %g, NaN scales %d, layout %d, region %lld x %lld: nan %lld inf %lld first "
                               "(%lld, %lld); want nan %lld inf %lld (%lld, %lld)",
                               (double)pts[p], nan_scales, lay, (long long)regions[g][0],
                               (long long)regions[g][1], (long long)nf.nan, (long long)nf.inf,
                               (long long)nf.first_row, (long long)nf.first_col, (long long)want.nan,
                               (long long)want.inf, (long long)want.first_row, (long long)want.first_col);
                        cases++;
                    }
                    nvfp4_tensor_free(&t);
                }
        CHECK(cases == 80);
        /* huge scales overflow only the large codes: the fast path must look inside */
        nvfp4_tensor t;
        CHECK(nvfp4_tensor_alloc(&t, 1, 16, NVFP4_HI_FIRST, NVFP4_SCALES_TILED) == NVFP4_OK);
        t.codes[0] = 0x71; /* 6 and 0.5 */
        t.scales[0] = 0x7E; /* 448 */
        t.per_tensor_scale = 2e35f;
        nvfp4_nonfinite nf;
        CHECK(nvfp4_tensor_count_nonfinite(&nf, &t, 1, 16) == NVFP4_OK && nf.inf == 1 && nf.nan == 0 &&
              nf.first_col == 0);
        CHECK(nvfp4_tensor_count_nonfinite(&nf, &t, 2, 16) == NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(nvfp4_tensor_count_nonfinite(&nf, &t, 1, 17) == NVFP4_ERR_INVALID_ARGUMENT);
        nvfp4_tensor_free(&t);
    }

    return test_summary("validate");
}
