/* test_device_operand.c -- the operand the host conveniences hand the sm_90
 * kernels (nvfp4_device_operand): hi-first codes, tiled scales and, for a
 * weight, rows padded to 16 with zero codes and scales.  Checked element by
 * element against the input, and through the CPU GEMM: the first N columns
 * of A x padded(B) are A x B, bit for bit, so that a weight of any N runs on
 * the GPU as it runs on the CPU. */
#include "backend/device_operand.h"
#include "nvfp4.h"
#include "testlib.h"

static void random_tensor(nvfp4_tensor *t, int64_t rows, int64_t cols, uint64_t *s,
                          nvfp4_nibble_order order, nvfp4_scale_layout layout)
{
    CHECK(nvfp4_tensor_alloc(t, rows, cols, order, layout) == NVFP4_OK);
    for (int64_t i = 0; i < rows * cols / 2; i++) t->codes[i] = (uint8_t)test_rand(s);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t cb = 0; cb < cols / 16; cb++) {
            size_t off = layout == NVFP4_SCALES_TILED ? nvfp4_tiled_scale_offset(r, cb, cols)
                                                      : (size_t)(r * (cols / 16) + cb);
            t->scales[off] = (uint8_t)(0x20 + test_rand(s) % 0x40);
        }
    t->per_tensor_scale = 0.5f;
}

int main(void)
{
    TEST("element by element, every layout, rows 1..40")
    {
        uint64_t s = 5;
        for (int64_t rows = 1; rows <= 40; rows++)
            for (int lay = 0; lay < 4; lay++)
                for (int pad = 0; pad < 2; pad++) {
                    nvfp4_tensor t, tmp = {0};
                    const nvfp4_tensor *d = NULL;
                    int64_t cols = 48;
                    random_tensor(&t, rows, cols, &s, lay & 1 ? NVFP4_LO_FIRST : NVFP4_HI_FIRST,
                                  lay & 2 ? NVFP4_SCALES_ROW_MAJOR : NVFP4_SCALES_TILED);
                    CHECK(nvfp4_device_operand(&t, pad, &tmp, &d) == NVFP4_OK && d);
                    int64_t want_rows = pad ? (rows + 15) / 16 * 16 : rows;
                    CHECKF(d->rows == want_rows && d->cols == cols && d->nibble_order == NVFP4_HI_FIRST &&
                               d->scale_layout == NVFP4_SCALES_TILED &&
                               nvfp4_f32_bits(d->per_tensor_scale) == nvfp4_f32_bits(t.per_tensor_scale),
                           "rows %lld layout %d pad %d: %lld x %lld", (long long)rows, lay, pad,
                           (long long)d->rows, (long long)d->cols);
                    /* no copy when nothing needs changing */
                    CHECK((d == &t) == (lay == 0 && want_rows == rows));
                    int bad = 0;
                    for (int64_t r = 0; r < d->rows; r++)
                        for (int64_t c = 0; c < cols; c++) {
                            uint8_t want_code = r < rows ? nvfp4_tensor_code(&t, r, c) : 0;
                            uint8_t want_scale = r < rows ? nvfp4_tensor_scale(&t, r, c / 16) : 0;
                            if (nvfp4_tensor_code(d, r, c) != want_code ||
                                nvfp4_tensor_scale(d, r, c / 16) != want_scale) {
                                if (!bad++)
                                    fprintf(stderr, "rows %lld layout %d pad %d: (%lld, %lld) differs\n",
                                            (long long)rows, lay, pad, (long long)r, (long long)c);
                            }
                        }
                    CHECK(bad == 0);
                    nvfp4_tensor_free(&tmp);
                    nvfp4_tensor_free(&t);
                }
    }

    TEST("A x padded(B): the first N columns are A x B, bit for bit")
    {
        uint64_t s = 6;
        const int64_t ns[] = {1, 5, 15, 17, 33};
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
            int64_t m = 7, n = ns[i], k = 96;
            nvfp4_tensor a, b, tmp = {0};
            random_tensor(&a, m, k, &s, NVFP4_HI_FIRST, NVFP4_SCALES_TILED);
            random_tensor(&b, n, k, &s, NVFP4_LO_FIRST, NVFP4_SCALES_ROW_MAJOR);
            const nvfp4_tensor *bp = NULL;
            CHECK(nvfp4_device_operand(&b, 1, &tmp, &bp) == NVFP4_OK);
            int64_t np = bp->rows;
            float bias[48];
            for (int j = 0; j < 48; j++) bias[j] = (float)test_normal(&s);
            float *r1 = malloc((size_t)(m * n) * 4), *r2 = malloc((size_t)(m * np) * 4);
            uint16_t *o1 = malloc((size_t)(m * n) * 2), *o2 = malloc((size_t)(m * np) * 2);
            nvfp4_gemm_args g1 = {.a = &a, .b = &b, .bias = bias, .raw = r1, .out = o1,
                                  .model = NVFP4_MODEL_SM90, .nthreads = 1};
            nvfp4_gemm_args g2 = g1;
            g2.b = bp, g2.raw = r2, g2.out = o2;
            CHECK(nvfp4_gemm_cpu(&g1) == NVFP4_OK && nvfp4_gemm_cpu(&g2) == NVFP4_OK);
            for (int64_t r = 0; r < m; r++) {
                char what[64];
                snprintf(what, sizeof what, "N=%lld row %lld: raw", (long long)n, (long long)r);
                test_equal_bits(what, r2 + r * np, r1 + r * n, 4, 1, n);
                snprintf(what, sizeof what, "N=%lld row %lld: out", (long long)n, (long long)r);
                test_equal_bits(what, o2 + r * np, o1 + r * n, 2, 1, n);
            }
            free(r1), free(r2), free(o1), free(o2);
            nvfp4_tensor_free(&tmp);
            nvfp4_tensor_free(&a);
            nvfp4_tensor_free(&b);
        }
    }
    return test_summary("device_operand");
}
