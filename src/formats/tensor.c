/* tensor.c -- NVFP4 tensors: code packing (hi/lo first) and the two scale
 * layouts (cuBLAS 128x4 tiles, plain row-major).  docs/FORMATS.md. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "formats/layout.h"

/* Scale matrix geometry: block columns, and the tiled (padded) extents. */
static int64_t block_cols(int64_t cols) { return (cols + NVFP4_BLOCK - 1) / NVFP4_BLOCK; }
static int64_t padded_rows(int64_t rows) { return (rows + 127) / 128 * 128; }
static int64_t padded_block_cols(int64_t cols) { return (block_cols(cols) + 3) / 4 * 4; }

size_t nvfp4_scales_bytes(int64_t rows, int64_t cols, nvfp4_scale_layout layout)
{
    if (rows < 0 || cols < 0 || rows > INT64_MAX / 2 || cols > INT64_MAX / 2) return 0;
    size_t n;
    int64_t r = layout == NVFP4_SCALES_TILED ? padded_rows(rows) : rows;
    int64_t c = layout == NVFP4_SCALES_TILED ? padded_block_cols(cols) : block_cols(cols);
    if (!nvfp4_mul_size((size_t)r, (size_t)c, &n)) return 0;
    return n;
}

size_t nvfp4_tiled_scale_offset(int64_t r, int64_t cb, int64_t cols)
{
    return nvfp4_tiled_offset(r, cb, padded_block_cols(cols) / 4);
}

void nvfp4_tensor_free(nvfp4_tensor *t)
{
    if (!t) return;
    free(t->codes);
    free(t->scales);
    memset(t, 0, sizeof *t);
}

nvfp4_status nvfp4_tensor_alloc(nvfp4_tensor *t, int64_t rows, int64_t cols,
                                nvfp4_nibble_order order, nvfp4_scale_layout layout)
{
    if (!t) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_tensor_alloc: tensor is NULL");
    memset(t, 0, sizeof *t);
    if (rows < 1 || cols < 1 || cols % NVFP4_BLOCK != 0)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_tensor_alloc: shape %lld x %lld: rows and cols must be "
                          "positive and cols a multiple of 16",
                          (long long)rows, (long long)cols);
    if (order != NVFP4_HI_FIRST && order != NVFP4_LO_FIRST)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_tensor_alloc: bad nibble order %d",
                          (int)order);
    if (layout != NVFP4_SCALES_TILED && layout != NVFP4_SCALES_ROW_MAJOR)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_tensor_alloc: bad scale layout %d",
                          (int)layout);
    size_t ncode, nscale = nvfp4_scales_bytes(rows, cols, layout);
    if (!nvfp4_mul_size((size_t)rows, (size_t)cols / 2, &ncode) || nscale == 0)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_tensor_alloc: shape %lld x %lld is too large",
                          (long long)rows, (long long)cols);
    t->codes = calloc(ncode, 1);
    t->scales = calloc(nscale, 1);
    if (!t->codes || !t->scales) {
        nvfp4_tensor_free(t);
        return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY,
                          "nvfp4_tensor_alloc: %zu + %zu bytes for a %lld x %lld tensor",
                          ncode, nscale, (long long)rows, (long long)cols);
    }
    t->rows = rows;
    t->cols = cols;
    t->per_tensor_scale = 1.0f;
    t->nibble_order = order;
    t->scale_layout = layout;
    return NVFP4_OK;
}

uint8_t nvfp4_tensor_code(const nvfp4_tensor *t, int64_t r, int64_t c)
{
    uint8_t byte = t->codes[(size_t)r * (size_t)(t->cols / 2) + (size_t)(c / 2)];
    int high = (c % 2 == 0) == (t->nibble_order == NVFP4_HI_FIRST);
    return high ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 15);
}

uint8_t nvfp4_tensor_scale(const nvfp4_tensor *t, int64_t r, int64_t cb)
{
    if (t->scale_layout == NVFP4_SCALES_TILED)
        return t->scales[nvfp4_tiled_scale_offset(r, cb, t->cols)];
    return t->scales[(size_t)r * (size_t)(t->cols / NVFP4_BLOCK) + (size_t)cb];
}

void nvfp4_swap_nibbles(uint8_t *dst, const uint8_t *src, size_t nbytes)
{
    for (size_t i = 0; i < nbytes; i++) dst[i] = (uint8_t)((src[i] << 4) | (src[i] >> 4));
}

void nvfp4_scales_tile(uint8_t *tiled, const uint8_t *row_major, int64_t rows, int64_t cols)
{
    int64_t nb = block_cols(cols);
    memset(tiled, 0, nvfp4_scales_bytes(rows, cols, NVFP4_SCALES_TILED));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t cb = 0; cb < nb; cb++)
            tiled[nvfp4_tiled_scale_offset(r, cb, cols)] = row_major[r * nb + cb];
}

void nvfp4_scales_untile(uint8_t *row_major, const uint8_t *tiled, int64_t rows, int64_t cols)
{
    int64_t nb = block_cols(cols);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t cb = 0; cb < nb; cb++)
            row_major[r * nb + cb] = tiled[nvfp4_tiled_scale_offset(r, cb, cols)];
}

nvfp4_status nvfp4_tensor_convert(nvfp4_tensor *dst, const nvfp4_tensor *src,
                                  nvfp4_nibble_order order, nvfp4_scale_layout layout)
{
    if (!dst || !src || !src->codes || !src->scales)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_tensor_convert: dst, src or src's arrays are NULL");
    if (dst == src)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_tensor_convert: dst and src are the same tensor");
    if (src->nibble_order != NVFP4_HI_FIRST && src->nibble_order != NVFP4_LO_FIRST)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_tensor_convert: src has bad nibble order %d",
                          (int)src->nibble_order);
    if (src->scale_layout != NVFP4_SCALES_TILED && src->scale_layout != NVFP4_SCALES_ROW_MAJOR)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_tensor_convert: src has bad scale layout %d",
                          (int)src->scale_layout);
    nvfp4_status st = nvfp4_tensor_alloc(dst, src->rows, src->cols, order, layout);
    if (st != NVFP4_OK) return st;
    dst->per_tensor_scale = src->per_tensor_scale;

    size_t ncode = (size_t)src->rows * (size_t)(src->cols / 2);
    if (order == src->nibble_order)
        memcpy(dst->codes, src->codes, ncode);
    else
        nvfp4_swap_nibbles(dst->codes, src->codes, ncode);

    /* Scales one by one through the readers: the destination's padding
     * stays as calloc left it (zero) whatever the source's padding holds. */
    int64_t nb = src->cols / NVFP4_BLOCK;
    for (int64_t r = 0; r < src->rows; r++)
        for (int64_t cb = 0; cb < nb; cb++) {
            size_t off = layout == NVFP4_SCALES_TILED ? nvfp4_tiled_scale_offset(r, cb, src->cols)
                                                      : (size_t)(r * nb + cb);
            dst->scales[off] = nvfp4_tensor_scale(src, r, cb);
        }
    return NVFP4_OK;
}
