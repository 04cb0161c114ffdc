/* quantize_tools_ref.c -- the ModelOpt and compressed-tensors quantizers
 * written as their Python reads, one torch operation at a time, one element
 * at a time.  The reference quantize_tools.c is tested against.
 *
 * ModelOpt 0.47, NVFP4QTensor.quantize(x, 16) (and get_weights_scaling_
 * factor[_2], _cast_fp4):
 *   x padded with zeros to a multiple of 16 columns (reduce_block_padding)
 *   s2 = FP32(max(|max x|, |min x|)) / 2688
 *   s  = amax_block / (6 * s2); s == 0 -> 1; clamp(s, 2^-9, 448); E4M3
 *   q  = x / (float(s8) * s2)                    (FP32, x widened)
 *   code = (q < 0) << 3 | searchsorted([.25 .75 1.25 1.75 2.5 3.5 5], |q|)
 *          + (|q| in {.75, 1.75, 3.5});  NaN -> 7
 *   packed: element 2i in the low nibble.
 *
 * compressed-tensors 0.20 with llm-compressor's min-max observer, for input
 * dtype D (BF16, F16, F32; "in D" = computed in FP32, rounded to D, as
 * torch does for D tensors):
 *   per block: mn, mx = amin, amax (in D)
 *   g  = (reciprocal(clamp(max(mx_t, -mn_t), tiny_D)) in D) * 2688 in D,
 *        NaN or infinite -> 1 (generate_gparam; scalar / tensor is
 *        reciprocal-then-multiply in torch)
 *   s  = E4M3(clamp(g * (max(|min(mn,0)|, |max(mx,0)|) / 6 in D), +-448)), 0 -> 0.125
 *   q  = clamp(x / (s / g), -6, 6)               (FP32)
 *   code: the E2M1 magnitude nearest |q| (ties to even), the sign of q
 *         (q < 0; -0 gives +0); a NaN q gives 8 for BF16 input (torch's
 *         vectorized FP32 -> BF16 conversion turns every NaN into 0xFFFF on
 *         the way back to x's dtype) and 0 for F16 and F32 (positive NaNs)
 *   packed: element 2i in the low nibble.
 * NaN bits that reach a stored byte follow PyTorch's CPU kernels on an
 * AVX-512 machine (docs/FORMATS.md): a block holding a NaN gets scale byte
 * 0xFF, or 0x7F in the scalar tail of the loop (tq_scalar_tail); for
 * compressed-tensors with BF16 input always 0xFF. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "quant/tool_quant.h"

static float elem(const void *x, nvfp4_dtype d, size_t i)
{
    const uint8_t *p = x;
    uint16_t h;
    float f;
    switch (d) {
    case NVFP4_DTYPE_BF16: memcpy(&h, p + 2 * i, 2); return nvfp4_bf16_to_f32(h);
    case NVFP4_DTYPE_F16: memcpy(&h, p + 2 * i, 2); return nvfp4_f16_to_f32(h);
    default: memcpy(&f, p + 4 * i, 4); return f;
    }
}

/* An FP32 result of a torch operation on D tensors: rounded to D. */
static float in_dtype(nvfp4_dtype d, float v)
{
    if (d == NVFP4_DTYPE_BF16) return nvfp4_bf16_to_f32(nvfp4_bf16_from_f32(v));
    if (d == NVFP4_DTYPE_F16) return nvfp4_f16_to_f32(nvfp4_f16_from_f32(v));
    return v;
}

static float tiny_of(nvfp4_dtype d) /* torch.finfo(d).tiny */
{
    return d == NVFP4_DTYPE_F16 ? 0x1p-14f : 0x1p-126f;
}

/* torch.searchsorted(bounds, v) for v >= 0: how many bounds are below v. */
static int searchsorted(float v)
{
    static const float bounds[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    int i = 0;
    while (i < 7 && bounds[i] < v) i++;
    return i;
}

static uint8_t modelopt_code(float q)
{
    if (isnan(q)) return 7; /* searchsorted places NaN last; NaN < 0 is false */
    uint8_t sign = q < 0 ? 8 : 0;
    float a = fabsf(q);
    int ord = searchsorted(a);
    int odd = a == 0.75f || a == 1.75f || a == 3.5f;
    return (uint8_t)(sign + ord + odd);
}

/* cast_to_fp4's masked assignments on |q| (q already clamped to +-6). */
static float ct_magnitude(float a)
{
    if (a <= 0.25f) return 0.0f;
    if (a < 0.75f) return 0.5f;
    if (a <= 1.25f) return 1.0f;
    if (a < 1.75f) return 1.5f;
    if (a <= 2.5f) return 2.0f;
    if (a < 3.5f) return 3.0f;
    if (a <= 5.0f) return 4.0f;
    return 6.0f;
}

static uint8_t ct_code(float q, nvfp4_dtype d)
{
    if (isnan(q)) return d == NVFP4_DTYPE_BF16 ? 8 : 0;
    if (q < -TQ_E2M1_MAX) q = -TQ_E2M1_MAX;
    if (q > TQ_E2M1_MAX) q = TQ_E2M1_MAX;
    float m = ct_magnitude(fabsf(q));
    /* pack_fp4_to_uint8: the index of 2 * m among 0 1 2 3 4 6 8 12 */
    static const int twice[8] = {0, 1, 2, 3, 4, 6, 8, 12};
    int idx = 0;
    while (twice[idx] != (int)(2.0f * m)) idx++;
    return (uint8_t)((q < 0 ? 8 : 0) | idx);
}

static nvfp4_status ref_modelopt(nvfp4_ckpt_tensor *out, const void *x, nvfp4_dtype d,
                                 int64_t rows, int64_t cols, const float *given)
{
    int64_t cp = (cols + 15) / 16 * 16;
    nvfp4_status s = nvfp4_tensor_alloc(&out->t, rows, cp, NVFP4_LO_FIRST, NVFP4_SCALES_ROW_MAJOR);
    if (s != NVFP4_OK) return s;
    float s2;
    if (given) {
        s2 = *given;
    } else {
        float amax = 0.0f;
        int nan = 0;
        for (int64_t i = 0; i < rows * cols; i++) {
            float v = elem(x, d, (size_t)i);
            if (isnan(v)) nan = 1;
            else if (fabsf(v) > amax) amax = fabsf(v);
        }
        s2 = nan ? nvfp4_f32_from_bits(nvfp4_amax_nan_bits(d)) : amax / TQ_RANGE;
    }
    float m = TQ_E2M1_MAX * s2;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t b = 0; b < cp / 16; b++) {
            float v[16], amax = 0.0f;
            int nan = 0;
            for (int j = 0; j < 16; j++) {
                int64_t c = b * 16 + j;
                v[j] = c < cols ? elem(x, d, (size_t)(r * cols + c)) : 0.0f;
                if (isnan(v[j])) nan = 1;
                else if (fabsf(v[j]) > amax) amax = fabsf(v[j]);
            }
            uint8_t s8;
            if (nan) { /* the vectorized maximum's NaN is all ones, the scalar tail's positive */
                s8 = tq_scalar_tail(d, r * (cp / 16) + b, rows * (cp / 16)) ? 0x7F : 0xFF;
            } else if (isnan(m)) {
                s8 = signbit(m) ? 0xFF : 0x7F;
            } else {
                float sc = amax / m;
                if (isnan(sc)) {
                    s8 = 0xFF; /* 0/0, Inf/Inf: x86's default NaN is negative */
                } else {
                    if (sc == 0.0f) sc = TQ_MO_ZERO_SCALE;
                    if (sc < TQ_MO_SCALE_MIN) sc = TQ_MO_SCALE_MIN;
                    if (sc > TQ_E4M3_MAX) sc = TQ_E4M3_MAX;
                    s8 = nvfp4_e4m3_from_f32(sc);
                }
            }
            out->t.scales[r * (cp / 16) + b] = s8;
            float den = nvfp4_e4m3_to_f32(s8) * s2;
            for (int j = 0; j < 16; j++) {
                uint8_t code = modelopt_code(v[j] / den);
                uint8_t *byte = &out->t.codes[r * (cp / 2) + b * 8 + j / 2];
                *byte = (uint8_t)(j % 2 ? (*byte & 0x0F) | code << 4 : code);
            }
        }
    }
    out->stored_cols = cp;
    out->tensor_scale = s2;
    out->has_tensor_scale = 1;
    out->tensor_scale_ndim = 0;
    out->t.per_tensor_scale = s2;
    return NVFP4_OK;
}

static nvfp4_status ref_compressed_tensors(nvfp4_ckpt_tensor *out, const void *x, nvfp4_dtype d,
                                           int64_t rows, int64_t cols, const float *given)
{
    nvfp4_status s = nvfp4_tensor_alloc(&out->t, rows, cols, NVFP4_LO_FIRST, NVFP4_SCALES_ROW_MAJOR);
    if (s != NVFP4_OK) return s;
    int64_t nb = cols / 16;
    float *mn = malloc((size_t)(rows * nb) * sizeof *mn), *mx = malloc((size_t)(rows * nb) * sizeof *mx);
    if (!mn || !mx) {
        free(mn);
        free(mx);
        return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "nvfp4_quantize_format_ref: no memory");
    }
    /* the observer's statistics: amin / amax of each block, NaN if any */
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < nb; b++) {
            float lo = INFINITY, hi = -INFINITY;
            for (int j = 0; j < 16; j++) {
                float v = elem(x, d, (size_t)(r * cols + b * 16 + j));
                if (isnan(v) || isnan(lo)) {
                    lo = hi = NAN;
                    continue;
                }
                if (v < lo) lo = v;
                if (v > hi) hi = v;
            }
            mn[r * nb + b] = lo;
            mx[r * nb + b] = hi;
        }
    float g;
    if (given) {
        g = *given;
    } else {
        float lo = INFINITY, hi = -INFINITY;
        for (int64_t i = 0; i < rows * nb; i++) {
            if (isnan(mn[i]) || isnan(lo)) {
                lo = hi = NAN;
                continue;
            }
            if (mn[i] < lo) lo = mn[i];
            if (mx[i] > hi) hi = mx[i];
        }
        float a = isnan(lo) ? NAN : (hi > -lo ? hi : -lo);
        if (!isnan(a)) a = fabsf(a); /* generate_gparam's min/max with 0, abs */
        if (a < tiny_of(d)) a = tiny_of(d); /* clamp: NaN passes */
        float rcp = in_dtype(d, 1.0f / a);
        g = in_dtype(d, rcp * TQ_RANGE);
        if (!isfinite(g)) g = 1.0f; /* nan_to_num(nan=1, posinf=1, neginf=1) */
    }
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t b = 0; b < nb; b++) {
            float lo = mn[r * nb + b], hi = mx[r * nb + b];
            float pos = NAN;
            if (!isnan(lo)) {
                lo = lo < 0.0f ? lo : 0.0f;
                hi = hi > 0.0f ? hi : 0.0f;
                pos = fabsf(lo) > fabsf(hi) ? fabsf(lo) : fabsf(hi);
            }
            float local = in_dtype(d, pos / TQ_E2M1_MAX);
            float sc = g * local;
            uint8_t s8;
            if (isnan(sc)) { /* NaN statistics (in the vectorized part) and 0 * Inf are negative */
                int tail = !isnan(pos) ? 0
                                       : d != NVFP4_DTYPE_BF16 && tq_scalar_tail(d, r * nb + b, rows * nb);
                s8 = tail ? 0x7F : 0xFF;
            } else {
                if (sc > TQ_E4M3_MAX) sc = TQ_E4M3_MAX;
                s8 = nvfp4_e4m3_from_f32(sc);
                if (nvfp4_e4m3_to_f32(s8) == 0.0f) s8 = nvfp4_e4m3_from_f32(TQ_CT_ZERO_SCALE);
            }
            out->t.scales[r * nb + b] = s8;
            float den = nvfp4_e4m3_to_f32(s8) / g;
            for (int j = 0; j < 16; j++) {
                float v = elem(x, d, (size_t)(r * cols + b * 16 + j));
                uint8_t code = ct_code(v / den, d);
                uint8_t *byte = &out->t.codes[r * (cols / 2) + b * 8 + j / 2];
                *byte = (uint8_t)(j % 2 ? (*byte & 0x0F) | code << 4 : code);
            }
        }
    }
    free(mn);
    free(mx);
    out->stored_cols = cols;
    out->tensor_scale = g;
    out->has_tensor_scale = 1;
    out->tensor_scale_ndim = 1;
    out->t.per_tensor_scale = 1.0f / g;
    return NVFP4_OK;
}

nvfp4_status nvfp4_quantize_format_ref(nvfp4_ckpt_tensor *out, const void *x, nvfp4_dtype dtype,
                                       int64_t rows, int64_t cols, nvfp4_format format,
                                       const float *tensor_scale)
{
    if (!out) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_quantize_format_ref: out is NULL");
    memset(out, 0, sizeof *out);
    nvfp4_status s = nvfp4_tq_check(x, dtype, rows, cols, format, "nvfp4_quantize_format_ref");
    if (s != NVFP4_OK) return s;
    out->format = format;
    if (format == NVFP4_FORMAT_COMFYUI) {
        s = nvfp4_quantize_ref(&out->t, x, dtype, rows, cols, tensor_scale, NVFP4_VARIANT_EAGER);
        out->stored_cols = out->t.cols;
        out->tensor_scale = out->t.per_tensor_scale;
        out->has_tensor_scale = 1;
    } else if (format == NVFP4_FORMAT_MODELOPT) {
        s = ref_modelopt(out, x, dtype, rows, cols, tensor_scale);
    } else {
        s = ref_compressed_tensors(out, x, dtype, rows, cols, tensor_scale);
    }
    if (s != NVFP4_OK) nvfp4_ckpt_tensor_free(out);
    return s;
}
