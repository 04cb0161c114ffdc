/* quantize_tools.c -- the ModelOpt and compressed-tensors quantizers, fast:
 * rows in parallel, each row widened to FP32 once, the per-tensor scale
 * from per-row partial statistics, codes by counting passed midpoints
 * without branches.  Same results as quantize_tools_ref.c (the statement of
 * the arithmetic, and the reference this is tested against), bit for bit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "quant/tool_quant.h"

nvfp4_status nvfp4_tq_check(const void *x, nvfp4_dtype dtype, int64_t rows, int64_t cols,
                            nvfp4_format format, const char *fn)
{
    if (!x) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: x is NULL", fn);
    if (dtype != NVFP4_DTYPE_BF16 && dtype != NVFP4_DTYPE_F16 && dtype != NVFP4_DTYPE_F32)
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "%s: x must be BF16, F16 or F32, not %s", fn,
                          nvfp4_dtype_name(dtype));
    if (rows < 1 || cols < 1 || rows > ((int64_t)1 << 40) / cols)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: %lld x %lld is not a valid shape", fn,
                          (long long)rows, (long long)cols);
    switch (format) {
    case NVFP4_FORMAT_COMFYUI:
    case NVFP4_FORMAT_MODELOPT: return NVFP4_OK;
    case NVFP4_FORMAT_COMPRESSED_TENSORS:
        if (cols % NVFP4_BLOCK)
            return nvfp4_fail(NVFP4_ERR_UNSUPPORTED,
                              "%s: compressed-tensors quantizes %lld columns only when they are "
                              "a multiple of 16 (its group quantizer raises otherwise)",
                              fn, (long long)cols);
        return NVFP4_OK;
    case NVFP4_FORMAT_GGUF:
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED,
                          "%s: GGUF NVFP4 is read and written here, not quantized (gguf-py has "
                          "no NVFP4 quantizer to match)", fn);
    default: return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: unknown format %d", fn, (int)format);
    }
}

/* Row r of x (cols elements) widened to FP32, zero-padded to width. */
static void widen_row(float *dst, const void *x, nvfp4_dtype d, int64_t r, int64_t cols, int64_t width)
{
    if (d == NVFP4_DTYPE_F32) {
        memcpy(dst, (const float *)x + r * cols, (size_t)cols * sizeof *dst);
    } else {
        const uint16_t *h = (const uint16_t *)x + r * cols;
        if (d == NVFP4_DTYPE_BF16)
            for (int64_t c = 0; c < cols; c++) dst[c] = nvfp4_f32_of_bits((uint32_t)h[c] << 16);
        else
            for (int64_t c = 0; c < cols; c++) dst[c] = nvfp4_f16_to_f32(h[c]);
    }
    for (int64_t c = cols; c < width; c++) dst[c] = 0.0f;
}

static float round_like(nvfp4_dtype d, float v)
{
    switch (d) {
    case NVFP4_DTYPE_BF16: return nvfp4_bf16_to_f32(nvfp4_bf16_from_f32(v));
    case NVFP4_DTYPE_F16: return nvfp4_f16_to_f32(nvfp4_f16_from_f32(v));
    default: return v;
    }
}

/* The E2M1 magnitude index (0..7) nearest a >= 0, ties to even: one
 * comparison per midpoint, the even neighbours' midpoints inclusive. */
static inline int mag_index(float a)
{
    return (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) +
           (a > 5.0f);
}

typedef struct tq_job {
    const void *x;
    nvfp4_dtype d;
    int64_t rows, cols, width; /* width: padded columns */
    nvfp4_format format;
    float s2, g;               /* ModelOpt multiplier / compressed-tensors divisor */
    float *row_stat;           /* pass 1: per row: amax (MO) or min, max (CT); NaN flag */
    uint8_t *row_nan;
    nvfp4_ckpt_tensor *out;
    int failed;
} tq_job;

static void stats_rows(void *ctx, int64_t begin, int64_t end)
{
    tq_job *j = ctx;
    float *buf = malloc((size_t)j->width * sizeof *buf);
    if (!buf) {
        j->failed = 1;
        return;
    }
    for (int64_t r = begin; r < end; r++) {
        widen_row(buf, j->x, j->d, r, j->cols, j->cols);
        float lo = INFINITY, hi = -INFINITY, amax = 0.0f;
        int nan = 0;
        for (int64_t c = 0; c < j->cols; c++) {
            float v = buf[c];
            nan |= v != v;
            amax = fabsf(v) > amax ? fabsf(v) : amax;
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        j->row_nan[r] = (uint8_t)nan;
        if (j->format == NVFP4_FORMAT_MODELOPT) {
            j->row_stat[r] = amax;
        } else {
            j->row_stat[2 * r] = lo;
            j->row_stat[2 * r + 1] = hi;
        }
    }
    free(buf);
}

static void modelopt_rows(void *ctx, int64_t begin, int64_t end)
{
    tq_job *j = ctx;
    float *buf = malloc((size_t)j->width * sizeof *buf);
    if (!buf) {
        j->failed = 1;
        return;
    }
    const float m = TQ_E2M1_MAX * j->s2;
    const int64_t nb = j->width / 16;
    for (int64_t r = begin; r < end; r++) {
        widen_row(buf, j->x, j->d, r, j->cols, j->width);
        uint8_t *codes = j->out->t.codes + r * (j->width / 2), *scales = j->out->t.scales + r * nb;
        for (int64_t b = 0; b < nb; b++) {
            const float *v = buf + 16 * b;
            float amax = 0.0f;
            int nan = 0;
            for (int k = 0; k < 16; k++) {
                nan |= v[k] != v[k];
                amax = fabsf(v[k]) > amax ? fabsf(v[k]) : amax;
            }
            float sc = amax / m;
            uint8_t s8;
            if (nan) {
                s8 = tq_scalar_tail(j->d, r * nb + b, j->rows * nb) ? 0x7F : 0xFF;
            } else if (sc != sc && !(m != m && !signbit(m))) {
                s8 = 0xFF; /* 0/0, Inf/Inf, a negative NaN s2 */
            } else if (sc != sc) {
                s8 = 0x7F;
            } else {
                sc = sc == 0.0f ? TQ_MO_ZERO_SCALE : sc;
                sc = sc < TQ_MO_SCALE_MIN ? TQ_MO_SCALE_MIN : sc > TQ_E4M3_MAX ? TQ_E4M3_MAX : sc;
                s8 = nvfp4_e4m3_from_f32(sc);
            }
            scales[b] = s8;
            const float den = nvfp4_e4m3_to_f32(s8) * j->s2;
            for (int k = 0; k < 16; k += 2) {
                uint8_t c2[2];
                for (int h = 0; h < 2; h++) {
                    float q = v[k + h] / den;
                    int isnan_q = q != q;
                    c2[h] = (uint8_t)(isnan_q ? 7 : ((q < 0.0f) << 3) + mag_index(fabsf(q)));
                }
                codes[b * 8 + k / 2] = (uint8_t)(c2[0] | c2[1] << 4);
            }
        }
    }
    free(buf);
}

static void ct_rows(void *ctx, int64_t begin, int64_t end)
{
    tq_job *j = ctx;
    float *buf = malloc((size_t)j->width * sizeof *buf);
    if (!buf) {
        j->failed = 1;
        return;
    }
    const int64_t nb = j->width / 16;
    const uint8_t nan_code = j->d == NVFP4_DTYPE_BF16 ? 8 : 0; /* torch's NaN to BF16: 0xFFFF */
    const uint8_t zero_scale = nvfp4_e4m3_from_f32(TQ_CT_ZERO_SCALE);
    for (int64_t r = begin; r < end; r++) {
        widen_row(buf, j->x, j->d, r, j->cols, j->width);
        uint8_t *codes = j->out->t.codes + r * (j->width / 2), *scales = j->out->t.scales + r * nb;
        for (int64_t b = 0; b < nb; b++) {
            const float *v = buf + 16 * b;
            float pos = 0.0f;
            int nan = 0;
            for (int k = 0; k < 16; k++) {
                nan |= v[k] != v[k];
                pos = fabsf(v[k]) > pos ? fabsf(v[k]) : pos; /* max(|min|, |max|) with 0 */
            }
            float sc = j->g * round_like(j->d, pos / TQ_E2M1_MAX);
            uint8_t s8 = nan && j->d != NVFP4_DTYPE_BF16 && tq_scalar_tail(j->d, r * nb + b, j->rows * nb)
                             ? 0x7F : 0xFF; /* NaN statistics, 0 * Inf */
            if (!nan && sc == sc) {
                s8 = nvfp4_e4m3_from_f32(sc > TQ_E4M3_MAX ? TQ_E4M3_MAX : sc);
                s8 = (s8 & 0x7F) == 0 ? zero_scale : s8;
            }
            scales[b] = s8;
            const float den = nvfp4_e4m3_to_f32(s8) / j->g;
            for (int k = 0; k < 16; k += 2) {
                uint8_t c2[2];
                for (int h = 0; h < 2; h++) {
                    float q = v[k + h] / den;
                    c2[h] = q != q ? nan_code
                                   : (uint8_t)(((q < 0.0f) << 3) | mag_index(fabsf(q)));
                }
                codes[b * 8 + k / 2] = (uint8_t)(c2[0] | c2[1] << 4);
            }
        }
    }
    free(buf);
}

nvfp4_status nvfp4_quantize_format(nvfp4_ckpt_tensor *out, const void *x, nvfp4_dtype dtype,
                                   int64_t rows, int64_t cols, nvfp4_format format,
                                   const float *tensor_scale, int nthreads)
{
    const char *fn = "nvfp4_quantize_format";
    if (!out) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    memset(out, 0, sizeof *out);
    nvfp4_status s = nvfp4_tq_check(x, dtype, rows, cols, format, fn);
    if (s != NVFP4_OK) return s;
    out->format = format;
    out->has_tensor_scale = 1;
    if (format == NVFP4_FORMAT_COMFYUI) {
        s = nvfp4_quantize(&out->t, x, dtype, rows, cols, tensor_scale, NVFP4_VARIANT_EAGER, nthreads);
        out->stored_cols = out->t.cols;
        out->tensor_scale = out->t.per_tensor_scale;
        if (s != NVFP4_OK) nvfp4_ckpt_tensor_free(out);
        return s;
    }
    tq_job j = {x, dtype, rows, cols, (cols + 15) / 16 * 16, format, 0, 0, NULL, NULL, out, 0};
    s = nvfp4_tensor_alloc(&out->t, rows, j.width, NVFP4_LO_FIRST, NVFP4_SCALES_ROW_MAJOR);
    if (s != NVFP4_OK) return s;
    const int64_t grain = 1 + 65536 / j.width;
    if (!tensor_scale) {
        j.row_stat = malloc((size_t)rows * 2 * sizeof *j.row_stat);
        j.row_nan = malloc((size_t)rows);
        if (!j.row_stat || !j.row_nan) j.failed = 1;
        else s = nvfp4_parallel_for(rows, grain, nthreads, stats_rows, &j);
        int nan = 0;
        float amax = 0.0f, lo = INFINITY, hi = -INFINITY;
        for (int64_t r = 0; !j.failed && r < rows; r++) {
            nan |= j.row_nan[r];
            if (format == NVFP4_FORMAT_MODELOPT) {
                amax = j.row_stat[r] > amax ? j.row_stat[r] : amax;
            } else {
                lo = j.row_stat[2 * r] < lo ? j.row_stat[2 * r] : lo;
                hi = j.row_stat[2 * r + 1] > hi ? j.row_stat[2 * r + 1] : hi;
            }
        }
        free(j.row_stat);
        free(j.row_nan);
        if (format == NVFP4_FORMAT_MODELOPT) {
            j.s2 = nan ? nvfp4_f32_of_bits(nvfp4_amax_nan_bits(dtype)) : amax / TQ_RANGE;
        } else {
            float a = hi > -lo ? hi : -lo; /* both >= 0 when finite: hi >= lo */
            float tiny = dtype == NVFP4_DTYPE_F16 ? 0x1p-14f : 0x1p-126f;
            a = a < tiny ? tiny : a;
            j.g = nan ? 1.0f : round_like(dtype, round_like(dtype, 1.0f / a) * TQ_RANGE);
            j.g = isfinite(j.g) ? j.g : 1.0f;
        }
    } else if (format == NVFP4_FORMAT_MODELOPT) {
        j.s2 = *tensor_scale;
    } else {
        j.g = *tensor_scale;
    }
    if (!j.failed && s == NVFP4_OK)
        s = nvfp4_parallel_for(rows, grain, nthreads,
                               format == NVFP4_FORMAT_MODELOPT ? modelopt_rows : ct_rows, &j);
    if (j.failed && s == NVFP4_OK) s = nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "%s: no memory", fn);
    if (s != NVFP4_OK) {
        nvfp4_ckpt_tensor_free(out);
        return s;
    }
    out->stored_cols = j.width;
    if (format == NVFP4_FORMAT_MODELOPT) {
        out->tensor_scale = out->t.per_tensor_scale = j.s2;
    } else {
        out->tensor_scale = j.g;
        out->tensor_scale_ndim = 1;
        out->t.per_tensor_scale = 1.0f / j.g;
    }
    return NVFP4_OK;
}
