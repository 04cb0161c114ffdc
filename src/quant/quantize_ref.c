/* quantize_ref.c -- comfy-kitchen's quantize_nvfp4 written as plainly as
 * possible, one element at a time, one thread.  The reference the fast
 * quantizer (quantize.c) is tested against; it shares no code with it
 * beyond the scalar format functions.
 *
 * Every step is one FP32 IEEE operation.  NaN results follow x86 SSE: a NaN
 * operand propagates (quieted, the first one if both are NaN) and an
 * invalid operation yields the default NaN 0xFFC00000.  Spelled out here so
 * the result does not depend on the machine. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "quant/quant_ref.h"
#include "quant/quant_sm90.h"

static int ref_isnan(float v) { return v != v; }

static float ref_quiet(float v)
{
    return nvfp4_f32_from_bits(nvfp4_f32_bits(v) | 0x00400000u);
}

static float ref_div(float a, float b)
{
    if (ref_isnan(a)) return ref_quiet(a);
    if (ref_isnan(b)) return ref_quiet(b);
    float q = a / b;
    if (ref_isnan(q)) return nvfp4_f32_from_bits(0xFFC00000u);
    return q;
}

static float ref_mul(float a, float b)
{
    if (ref_isnan(a)) return ref_quiet(a);
    if (ref_isnan(b)) return ref_quiet(b);
    float p = a * b;
    if (ref_isnan(p)) return nvfp4_f32_from_bits(0xFFC00000u);
    return p;
}

/*---- the cuda variant: the H200 instructions comfy-kitchen's kernel runs ----*/
/* Written apart from quantize.c's versions (docs/FORMATS.md has the rules). */

static float ref_flush(float v) /* .ftz: a subnormal operand is a zero of its sign */
{
    return fpclassify(v) == FP_SUBNORMAL ? copysignf(0.0f, v) : v;
}

static float ref_nan_gpu(void) { return nvfp4_f32_from_bits(0x7FFFFFFFu); }

/* mul.ftz.f32: IEEE product of flushed operands; zero when its rounding to
 * 24 bits (exponent unbounded) is below 2^-126. */
static float ref_mul_ftz(float a, float b)
{
    a = ref_flush(a);
    b = ref_flush(b);
    if (ref_isnan(a) || ref_isnan(b)) return ref_nan_gpu();
    if ((isinf(a) && b == 0.0f) || (isinf(b) && a == 0.0f)) return ref_nan_gpu();
    int neg = signbit(a) != signbit(b);
    double p = fabs((double)a * (double)b);
    if (p == 0.0) return neg ? -0.0f : 0.0f;
    /* the 24-bit rounding of p: a binade's ulp is 2^(exponent - 23) */
    int e;
    frexp(p, &e); /* p = f * 2^e, f in [0.5, 1) */
    double ulp = ldexp(1.0, e - 24);
    double q = floor(p / ulp);
    double rem = p - q * ulp;
    if (rem > ulp / 2 || (rem == ulp / 2 && fmod(q, 2.0) == 1.0)) q += 1.0;
    double rounded = q * ulp;
    if (rounded < 0x1p-126) return neg ? -0.0f : 0.0f;
    float f = rounded >= 0x1p128 ? INFINITY : (float)rounded;
    return neg ? -f : f;
}

/* rcp.approx.ftz.f32: the H200's reciprocal of the significand (table),
 * scaled by the exponent; specials as the instruction gives them. */
static float ref_rcp_approx(float x)
{
    if (ref_isnan(x)) return ref_nan_gpu();
    if (isinf(x)) return copysignf(0.0f, x);
    x = ref_flush(x);
    if (x == 0.0f) return copysignf(INFINITY, x);
    int e;
    float f = frexpf(fabsf(x), &e); /* |x| = (2f) * 2^(e-1), 2f in [1, 2) */
    float sig = 2.0f * f;
    uint32_t m = nvfp4_f32_bits(sig) & 0x7FFFFFu;
    float r = 1.0f / sig;
    int steps = nvfp4_sm90_rcp_diff(m);
    for (; steps > 0; steps--) r = nextafterf(r, 2.0f);
    for (; steps < 0; steps++) r = nextafterf(r, 0.0f);
    double v = ldexp((double)r, -(e - 1));
    if (v < 0x1p-126) return copysignf(0.0f, x);
    return copysignf((float)v, x);
}

/* min.ftz.f32: the non-NaN operand wins over a NaN. */
static float ref_min_ftz(float a, float b)
{
    a = ref_flush(a);
    b = ref_flush(b);
    if (ref_isnan(a) && ref_isnan(b)) return ref_nan_gpu();
    if (ref_isnan(a)) return b;
    if (ref_isnan(b)) return a;
    return a <= b ? a : b;
}

/*---- the per-element step of both variants (quant_ref.h) ----*/

float nvfp4_ref_block_factor(nvfp4_variant variant, float pts, uint8_t s8)
{
    float s8f = nvfp4_e4m3_to_f32(s8);
    if (variant == NVFP4_VARIANT_EAGER) return ref_mul(pts, s8f);
    return ref_min_ftz(ref_rcp_approx(ref_mul_ftz(pts, s8f)), FLT_MAX);
}

uint8_t nvfp4_ref_element_code(nvfp4_variant variant, float factor, float x)
{
    if (variant == NVFP4_VARIANT_EAGER) {
        float v;
        if (factor == 0.0f)
            v = 0.0f; /* comfy-kitchen's zero-scale mask: +0 codes */
        else
            v = ref_div(x, factor);
        if (v < -6.0f) v = -6.0f;
        if (v > 6.0f) v = 6.0f;
        return nvfp4_e2m1_from_f32(v);
    }
    /* no clamp: the sm_90 E2M1 emulation saturates, NaN -> +6 */
    float v = ref_mul_ftz(x, factor);
    return ref_isnan(v) ? 7 : nvfp4_e2m1_from_f32(v);
}

/* Element (r, c) of the input widened to FP32; zero outside it (padding). */
static float ref_element(const void *x, nvfp4_dtype dtype, int64_t rows, int64_t cols,
                         int64_t r, int64_t c)
{
    if (r >= rows || c >= cols) return 0.0f;
    size_t i = (size_t)r * (size_t)cols + (size_t)c;
    if (dtype == NVFP4_DTYPE_BF16) return nvfp4_bf16_to_f32(((const uint16_t *)x)[i]);
    if (dtype == NVFP4_DTYPE_F16) return nvfp4_f16_to_f32(((const uint16_t *)x)[i]);
    return ((const float *)x)[i];
}

nvfp4_status nvfp4_quantize_ref(nvfp4_tensor *out, const void *x, nvfp4_dtype dtype,
                                int64_t rows, int64_t cols, const float *per_tensor_scale,
                                nvfp4_variant variant)
{
    if (!out) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_quantize_ref: out is NULL");
    memset(out, 0, sizeof *out);
    if (!x) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_quantize_ref: input is NULL");
    if (dtype != NVFP4_DTYPE_BF16 && dtype != NVFP4_DTYPE_F16 && dtype != NVFP4_DTYPE_F32)
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED,
                          "nvfp4_quantize_ref: input dtype %d is not BF16, F16 or F32",
                          (int)dtype);
    if (rows < 1 || cols < 1 || rows > INT32_MAX || cols > INT32_MAX)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_quantize_ref: shape %lld x %lld is empty or too large",
                          (long long)rows, (long long)cols);
    if (variant != NVFP4_VARIANT_EAGER && variant != NVFP4_VARIANT_CUDA)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_quantize_ref: unknown variant %d",
                          (int)variant);

    /* Per-tensor scale: the largest |x| / 2688 in FP32; any NaN makes it the
     * NaN torch.amax returns (nvfp4_amax_nan_bits). */
    float pts;
    if (per_tensor_scale) {
        pts = *per_tensor_scale;
    } else {
        float amax = 0.0f;
        int nan = 0;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) {
                float a = fabsf(ref_element(x, dtype, rows, cols, r, c));
                if (ref_isnan(a)) nan = 1;
                else if (a > amax) amax = a;
            }
        if (nan) {
            uint32_t b = nvfp4_amax_nan_bits(dtype);
            memcpy(&pts, &b, 4);
        } else {
            pts = amax / 2688.0f;
        }
    }

    /* comfy-kitchen pads both dimensions to multiples of 16 with zeros. */
    int64_t prows = (rows + 15) / 16 * 16, pcols = (cols + 15) / 16 * 16;
    nvfp4_status st = nvfp4_tensor_alloc(out, prows, pcols, NVFP4_HI_FIRST, NVFP4_SCALES_TILED);
    if (st != NVFP4_OK) return st;
    out->per_tensor_scale = pts;

    for (int64_t r = 0; r < prows; r++) {
        for (int64_t cb = 0; cb < pcols / 16; cb++) {
            /* amax of the block; torch.amax lets a NaN win. */
            float amax = 0.0f;
            int has_nan = 0;
            float first_nan = 0.0f;
            for (int64_t c = cb * 16; c < cb * 16 + 16; c++) {
                float a = fabsf(ref_element(x, dtype, rows, cols, r, c));
                if (ref_isnan(a)) {
                    if (!has_nan) first_nan = a;
                    has_nan = 1;
                } else if (a > amax) {
                    amax = a;
                }
            }
            if (has_nan) amax = ref_quiet(first_nan);

            uint8_t s8;
            if (variant == NVFP4_VARIANT_EAGER) {
                float s = ref_div(ref_div(amax, 6.0f), pts);
                if (s > 448.0f) s = 448.0f; /* torch.clamp(max=448): NaN stays NaN */
                s8 = nvfp4_e4m3_from_f32(s);
            } else {
                /* __hmax skips NaNs: the block's amax is NaN only if all 16 are */
                float amax_gpu = 0.0f;
                int n_nan = 0;
                for (int64_t c = cb * 16; c < cb * 16 + 16; c++) {
                    float a = fabsf(ref_element(x, dtype, rows, cols, r, c));
                    if (ref_isnan(a)) n_nan++;
                    else if (a > amax_gpu) amax_gpu = a;
                }
                if (n_nan == 16) amax_gpu = ref_nan_gpu();
                float d = ref_mul_ftz(ref_mul_ftz(amax_gpu, NVFP4_SM90_ONE_SIXTH),
                                      ref_rcp_approx(pts));
                d = ref_min_ftz(d, 448.0f);
                /* cvt.rn.satfinite.e4m3: NaN -> 0x7F, saturate at +-448 */
                if (ref_isnan(d)) s8 = 0x7F;
                else s8 = nvfp4_e4m3_from_f32(fmaxf(-448.0f, fminf(d, 448.0f)));
            }
            out->scales[nvfp4_tiled_scale_offset(r, cb, pcols)] = s8;
            /* eager: x / (pts * s8); cuda: x * min(rcp(pts * s8), FLT_MAX) */
            float factor = nvfp4_ref_block_factor(variant, pts, s8);

            for (int64_t c = cb * 16; c < cb * 16 + 16; c++) {
                float xv = ref_element(x, dtype, rows, cols, r, c);
                uint8_t code = nvfp4_ref_element_code(variant, factor, xv);
                uint8_t *byte = &out->codes[(size_t)r * (size_t)(pcols / 2) + (size_t)(c / 2)];
                if (c % 2 == 0)
                    *byte = (uint8_t)((*byte & 0x0F) | (code << 4)); /* element 2i: high nibble */
                else
                    *byte = (uint8_t)((*byte & 0xF0) | code);
            }
        }
    }
    return NVFP4_OK;
}
