/* device_operand.c -- an NVFP4 operand as the sm_90 kernels read it.
 * Plain C, in every build, so that the CPU tests cover it too. */
#include "backend/device_operand.h"
#include "internal.h"

nvfp4_status nvfp4_device_operand(const nvfp4_tensor *t, int pad_rows, nvfp4_tensor *tmp,
                                  const nvfp4_tensor **out)
{
    *out = t;
    nvfp4_status st = nvfp4_check_gemm_operand(t, "cuda host", pad_rows ? "B" : "A");
    if (st != NVFP4_OK) return st;
    if (t->rows > INT64_MAX - NVFP4_BLOCK)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "cuda host: %lld rows", (long long)t->rows);
    int64_t rows = pad_rows ? (t->rows + NVFP4_BLOCK - 1) / NVFP4_BLOCK * NVFP4_BLOCK : t->rows;
    if (t->nibble_order == NVFP4_HI_FIRST && t->scale_layout == NVFP4_SCALES_TILED &&
        rows == t->rows)
        return NVFP4_OK;
    nvfp4_tensor conv = {0};
    const nvfp4_tensor *src = t;
    if (t->nibble_order != NVFP4_HI_FIRST || t->scale_layout != NVFP4_SCALES_TILED) {
        st = nvfp4_tensor_convert(&conv, t, NVFP4_HI_FIRST, NVFP4_SCALES_TILED);
        src = &conv;
    }
    if (st == NVFP4_OK && rows != t->rows) {
        /* the tiles span roundup(rows, 128) rows for both row counts: the
         * scales keep their offsets; the new rows' codes are zero */
        st = nvfp4_tensor_alloc(tmp, rows, t->cols, NVFP4_HI_FIRST, NVFP4_SCALES_TILED);
        if (st == NVFP4_OK) {
            memcpy(tmp->codes, src->codes, (size_t)t->rows * (size_t)(t->cols / 2));
            for (int64_t r = 0; r < t->rows; r++)
                for (int64_t cb = 0; cb < t->cols / NVFP4_BLOCK; cb++) {
                    size_t off = nvfp4_tiled_scale_offset(r, cb, t->cols);
                    tmp->scales[off] = src->scales[off];
                }
            tmp->per_tensor_scale = t->per_tensor_scale;
            *out = tmp;
        }
        nvfp4_tensor_free(&conv);
        return st;
    }
    if (st == NVFP4_OK) {
        *tmp = conv;
        *out = tmp;
    }
    return st;
}
