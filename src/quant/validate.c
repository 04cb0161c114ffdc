/* validate.c -- the checks every front end applies to what a user gives:
 * per-tensor scales, and where NaN and Inf are in an input or a quantized
 * tensor (so that a command can say which element and what it became).
 * The quantizer itself takes any scale and any value, as ComfyUI's does. */
#include <math.h>
#include <stdio.h>

#include "formats/layout.h"
#include "internal.h"

nvfp4_status nvfp4_check_per_tensor_scale(float scale, const char *what)
{
    if (isfinite(scale) && scale > 0.0f) return NVFP4_OK; /* subnormals are > 0 */
    char shown[32];
    if (isnan(scale)) snprintf(shown, sizeof shown, "NaN");
    else if (scale == 0.0f) snprintf(shown, sizeof shown, "%s0", signbit(scale) ? "-" : "");
    else snprintf(shown, sizeof shown, "%.9g", (double)scale);
    return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                      "%s = %s is not a per-tensor scale: it must be finite and greater than 0 "
                      "(the smallest is 2^-149, about 1.4e-45)",
                      what ? what : "per_tensor_scale", shown);
}

static void note(nvfp4_nonfinite *o, int is_nan, int64_t r, int64_t c, float v)
{
    if (is_nan) o->nan++;
    else o->inf++;
    if (o->first_row < 0) {
        o->first_row = r;
        o->first_col = c;
        o->first_value = v;
    }
}

static void reset(nvfp4_nonfinite *o)
{
    o->nan = o->inf = 0;
    o->first_row = o->first_col = -1;
    o->first_value = 0.0f;
}

nvfp4_status nvfp4_count_nonfinite(nvfp4_nonfinite *out, const void *x, nvfp4_dtype dtype,
                                   int64_t rows, int64_t cols)
{
    if (!out) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_count_nonfinite: out is NULL");
    reset(out);
    if (dtype != NVFP4_DTYPE_BF16 && dtype != NVFP4_DTYPE_F16 && dtype != NVFP4_DTYPE_F32)
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED,
                          "nvfp4_count_nonfinite: %s is not BF16, F16 or F32",
                          nvfp4_dtype_name(dtype));
    if (rows < 0 || cols < 0 || (rows && cols > INT64_MAX / rows))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_count_nonfinite: shape %lld x %lld", (long long)rows,
                          (long long)cols);
    if (rows > 0 && cols > 0 && !x)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_count_nonfinite: x is NULL");
    /* bit tests (exponent all ones) rather than conversions: this runs over
     * every input a command quantizes */
    const uint8_t *p = x;
    size_t n = (size_t)(rows * cols);
    for (size_t i = 0; i < n; i++) {
        float v;
        if (dtype == NVFP4_DTYPE_F32) {
            uint32_t b;
            memcpy(&b, p + 4 * i, 4);
            if ((b & 0x7F800000u) != 0x7F800000u) continue;
            v = nvfp4_f32_of_bits(b);
        } else {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            if (dtype == NVFP4_DTYPE_F16 ? (h & 0x7C00u) != 0x7C00u : (h & 0x7F80u) != 0x7F80u)
                continue;
            v = dtype == NVFP4_DTYPE_F16 ? nvfp4_f16_to_f32(h) : nvfp4_bf16_to_f32(h);
        }
        note(out, isnan(v), (int64_t)i / cols, (int64_t)i % cols, v);
    }
    return NVFP4_OK;
}

nvfp4_status nvfp4_tensor_count_nonfinite(nvfp4_nonfinite *out, const nvfp4_tensor *t,
                                          int64_t rows, int64_t cols)
{
    if (!out) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_tensor_count_nonfinite: out is NULL");
    reset(out);
    nvfp4_status st = nvfp4_check_gemm_operand(t, "nvfp4_tensor_count_nonfinite", "t");
    if (st != NVFP4_OK) return st;
    if (rows < 0 || cols < 0 || rows > t->rows || cols > t->cols)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_tensor_count_nonfinite: region %lld x %lld is outside the "
                          "%lld x %lld tensor",
                          (long long)rows, (long long)cols, (long long)t->rows, (long long)t->cols);
    const float pts = t->per_tensor_scale;
    const float largest_code = nvfp4_e2m1_value(7); /* 6 */
    for (int64_t r = 0; r < rows; r++)
        for (int64_t cb = 0; cb * NVFP4_BLOCK < cols; cb++) {
            float s = nvfp4_e4m3_to_f32(nvfp4_tensor_scale(t, r, cb));
            /* The dequantized values are (e2m1 * s) * pts, monotone in |e2m1|:
             * when the largest one is finite (and no factor is NaN or
             * infinite, where 0 * Inf gives NaN), so are all 16. */
            if (isfinite(s) && isfinite(pts) && isfinite((largest_code * fabsf(s)) * fabsf(pts)))
                continue;
            int64_t end = cb * NVFP4_BLOCK + NVFP4_BLOCK < cols ? cb * NVFP4_BLOCK + NVFP4_BLOCK : cols;
            for (int64_t c = cb * NVFP4_BLOCK; c < end; c++) {
                float v = nvfp4_dequant_value(nvfp4_tensor_code(t, r, c), s, pts);
                if (!isfinite(v)) note(out, isnan(v), r, c, v);
            }
        }
    return NVFP4_OK;
}
