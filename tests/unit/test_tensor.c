/* test_tensor.c -- NVFP4 tensor layouts: the 128x4 tiled scale layout
 * against a step-by-step replay of the view/permute/reshape that produces it
 * (comfy-kitchen's to_blocked), nibble order, conversions, padding. */
#include "nvfp4.h"
#include "testlib.h"

static const int64_t test_rows[] = {1, 7, 129, 300};
static const int64_t test_cols[] = {16, 48, 80, 272};

/* Replay to_blocked on a rows x nb scale matrix, literally: pad to
 * (R, W) = (roundup(rows,128), roundup(nb,4)); view (R/128, 128, W/4, 4) and
 * permute to (R/128, W/4, 128, 4); reshape (-1, 4, 32, 4); transpose the
 * middle axes; flatten.  Each step materialises a contiguous array. */
static uint8_t *naive_tiled(const uint8_t *rm, int64_t rows, int64_t nb, size_t *len)
{
    int64_t R = (rows + 127) / 128 * 128, W = (nb + 3) / 4 * 4;
    size_t n = (size_t)(R * W);
    uint8_t *pad = calloc(n, 1), *perm = malloc(n), *out = malloc(n);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < nb; c++) pad[r * W + c] = rm[r * nb + c];
    /* permute(0, 2, 1, 3) of the (R/128, 128, W/4, 4) view */
    size_t k = 0;
    for (int64_t i = 0; i < R / 128; i++)
        for (int64_t j = 0; j < W / 4; j++)
            for (int64_t rr = 0; rr < 128; rr++)
                for (int64_t cc = 0; cc < 4; cc++) perm[k++] = pad[(i * 128 + rr) * W + j * 4 + cc];
    /* (-1, 4, 32, 4) -> transpose(1, 2) -> (-1, 32, 4, 4), flattened */
    k = 0;
    for (size_t t = 0; t < n / 512; t++)
        for (int b = 0; b < 32; b++)
            for (int a = 0; a < 4; a++)
                for (int cc = 0; cc < 4; cc++) out[k++] = perm[t * 512 + (size_t)(a * 128 + b * 4 + cc)];
    free(pad);
    free(perm);
    *len = n;
    return out;
}

static void test_tiled_layout(void)
{
    uint64_t rng = 17;
    for (int ri = 0; ri < 4; ri++)
        for (int ci = 0; ci < 4; ci++) {
            int64_t rows = test_rows[ri], cols = test_cols[ci], nb = cols / 16;
            size_t tb = nvfp4_scales_bytes(rows, cols, NVFP4_SCALES_TILED);
            CHECK(tb == (size_t)((rows + 127) / 128 * 128 * ((nb + 3) / 4 * 4)));
            CHECK(nvfp4_scales_bytes(rows, cols, NVFP4_SCALES_ROW_MAJOR) == (size_t)(rows * nb));
            uint8_t *rm = malloc((size_t)(rows * nb)), *back = malloc((size_t)(rows * nb));
            for (int64_t i = 0; i < rows * nb; i++) rm[i] = (uint8_t)(1 + test_rand(&rng) % 255);
            size_t nlen;
            uint8_t *want = naive_tiled(rm, rows, nb, &nlen);
            CHECK(nlen == tb);
            uint8_t *tiled = malloc(tb);
            memset(tiled, 0xEE, tb); /* tiling must zero the padding */
            nvfp4_scales_tile(tiled, rm, rows, cols);
            CHECKF(test_equal_bits("tile vs naive", tiled, want, 1, 1, (int64_t)tb), "%lldx%lld",
                   (long long)rows, (long long)cols);
            /* The offset formula, and the CUDA kernel's way of writing it. */
            int bad = 0;
            int64_t cbg_cnt = (nb + 3) / 4;
            for (int64_t r = 0; r < rows; r++)
                for (int64_t cb = 0; cb < nb; cb++) {
                    size_t off = nvfp4_tiled_scale_offset(r, cb, cols);
                    size_t k = (size_t)((((r / 128) * cbg_cnt + cb / 4) * 32 + r % 32) * 16 +
                                        ((r % 128) / 32) * 4 + cb % 4);
                    if (off != k || want[off] != rm[r * nb + cb]) bad++;
                }
            CHECKF(bad == 0, "%d offsets wrong for %lldx%lld", bad, (long long)rows, (long long)cols);
            /* Untile inverts. */
            memset(back, 0, (size_t)(rows * nb));
            nvfp4_scales_untile(back, tiled, rows, cols);
            CHECK(test_equal_bits("untile(tile)", back, rm, 1, rows, nb));
            free(rm);
            free(back);
            free(want);
            free(tiled);
        }
}

static void test_nibbles(void)
{
    uint8_t a[256], b[256];
    for (int i = 0; i < 256; i++) a[i] = (uint8_t)i;
    nvfp4_swap_nibbles(b, a, 256);
    int bad = 0;
    for (int i = 0; i < 256; i++) bad += b[i] != (uint8_t)(((i & 15) << 4) | (i >> 4));
    CHECK(bad == 0 && b[0xAB] == 0xBA);
    nvfp4_swap_nibbles(b, b, 256); /* in place */
    CHECK(memcmp(a, b, 256) == 0);
}

/* A random tensor in (order, layout), tiled padding filled with junk. */
static void random_tensor(nvfp4_tensor *t, int64_t rows, int64_t cols, nvfp4_nibble_order o,
                          nvfp4_scale_layout l, uint64_t *rng)
{
    CHECK(nvfp4_tensor_alloc(t, rows, cols, o, l) == NVFP4_OK);
    for (int64_t i = 0; i < rows * cols / 2; i++) t->codes[i] = (uint8_t)test_rand(rng);
    size_t sb = nvfp4_scales_bytes(rows, cols, l);
    for (size_t i = 0; i < sb; i++) t->scales[i] = (uint8_t)test_rand(rng);
    t->per_tensor_scale = 0.125f;
}

static void test_convert(void)
{
    uint64_t rng = 23;
    for (int ri = 0; ri < 4; ri++)
        for (int ci = 0; ci < 4; ci++) {
            int64_t rows = test_rows[ri], cols = test_cols[ci];
            nvfp4_tensor src;
            random_tensor(&src, rows, cols, NVFP4_HI_FIRST, NVFP4_SCALES_TILED, &rng);
            /* Element readers vs the definition: hi first = element 2i in
             * the high nibble; tiled offset. */
            int bad = 0;
            for (int64_t r = 0; r < rows; r++)
                for (int64_t c = 0; c < cols; c++) {
                    uint8_t byte = src.codes[r * cols / 2 + c / 2];
                    if (nvfp4_tensor_code(&src, r, c) != ((c % 2) ? (byte & 15) : (byte >> 4))) bad++;
                    if (c % 16 == 0 &&
                        nvfp4_tensor_scale(&src, r, c / 16) !=
                            src.scales[nvfp4_tiled_scale_offset(r, c / 16, cols)])
                        bad++;
                }
            CHECK(bad == 0);
            for (int o = 0; o < 2; o++)
                for (int l = 0; l < 2; l++) {
                    nvfp4_tensor mid, back;
                    CHECK(nvfp4_tensor_convert(&mid, &src, (nvfp4_nibble_order)o,
                                               (nvfp4_scale_layout)l) == NVFP4_OK);
                    CHECK(mid.nibble_order == (nvfp4_nibble_order)o &&
                          mid.scale_layout == (nvfp4_scale_layout)l && mid.per_tensor_scale == 0.125f);
                    bad = 0;
                    for (int64_t r = 0; r < rows; r++)
                        for (int64_t c = 0; c < cols; c++) {
                            if (nvfp4_tensor_code(&mid, r, c) != nvfp4_tensor_code(&src, r, c)) bad++;
                            if (c % 16 == 0 &&
                                nvfp4_tensor_scale(&mid, r, c / 16) != nvfp4_tensor_scale(&src, r, c / 16))
                                bad++;
                        }
                    CHECKF(bad == 0, "convert to order %d layout %d of %lldx%lld", o, l,
                           (long long)rows, (long long)cols);
                    if (o == NVFP4_LO_FIRST) /* LO first: element 2i in the low nibble */
                        CHECK((mid.codes[0] & 15) == nvfp4_tensor_code(&src, 0, 0));
                    CHECK(nvfp4_tensor_convert(&back, &mid, NVFP4_HI_FIRST, NVFP4_SCALES_TILED) ==
                          NVFP4_OK);
                    CHECK(test_equal_bits("codes round trip", back.codes, src.codes, 1, rows, cols / 2));
                    /* Scales equal where they live, zero in the padding
                     * (src's padding held junk). */
                    size_t tb = nvfp4_scales_bytes(rows, cols, NVFP4_SCALES_TILED);
                    uint8_t *want = calloc(tb, 1);
                    for (int64_t r = 0; r < rows; r++)
                        for (int64_t cb = 0; cb < cols / 16; cb++) {
                            size_t off = nvfp4_tiled_scale_offset(r, cb, cols);
                            want[off] = src.scales[off];
                        }
                    CHECK(test_equal_bits("scales round trip, zero padding", back.scales, want, 1, 1,
                                          (int64_t)tb));
                    free(want);
                    nvfp4_tensor_free(&mid);
                    nvfp4_tensor_free(&back);
                }
            nvfp4_tensor_free(&src);
        }
}

static void test_alloc(void)
{
    nvfp4_tensor t;
    CHECK(nvfp4_tensor_alloc(&t, 7, 48, NVFP4_LO_FIRST, NVFP4_SCALES_ROW_MAJOR) == NVFP4_OK);
    CHECK(t.rows == 7 && t.cols == 48 && t.per_tensor_scale == 1.0f);
    int nz = 0;
    for (int i = 0; i < 7 * 24; i++) nz += t.codes[i] != 0;
    for (int i = 0; i < 7 * 3; i++) nz += t.scales[i] != 0;
    CHECK(nz == 0);
    nvfp4_tensor_free(&t);
    CHECK(t.codes == NULL && t.scales == NULL && t.rows == 0);
    nvfp4_tensor_free(NULL);
    CHECK(nvfp4_tensor_alloc(&t, 7, 24, NVFP4_HI_FIRST, NVFP4_SCALES_TILED) ==
          NVFP4_ERR_INVALID_ARGUMENT);
    CHECK(strstr(nvfp4_last_error(), "24") != NULL);
    CHECK(nvfp4_tensor_alloc(&t, 0, 16, NVFP4_HI_FIRST, NVFP4_SCALES_TILED) ==
          NVFP4_ERR_INVALID_ARGUMENT);
    CHECK(nvfp4_tensor_alloc(&t, INT64_MAX / 4, 1LL << 40, NVFP4_HI_FIRST, NVFP4_SCALES_TILED) ==
          NVFP4_ERR_INVALID_ARGUMENT);
    CHECK(nvfp4_tensor_convert(&t, NULL, NVFP4_HI_FIRST, NVFP4_SCALES_TILED) ==
          NVFP4_ERR_INVALID_ARGUMENT);
    CHECK(nvfp4_scales_bytes(300, 272, NVFP4_SCALES_TILED) == 384 * 20);
    CHECK(nvfp4_scales_bytes(300, 272, NVFP4_SCALES_ROW_MAJOR) == 300 * 17);
}

int main(void)
{
    TEST("tiled layout") test_tiled_layout();
    TEST("nibbles") test_nibbles();
    TEST("convert") test_convert();
    TEST("alloc") test_alloc();
    return test_summary("tensor");
}
