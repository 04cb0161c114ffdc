/* quantize.c -- comfy-kitchen's NVFP4 quantizer, fast and multi-threaded,
 * plus the per-tensor scale and the dequantizer.
 *
 * Bit-identical to quantize_ref.c (tests/unit/test_quant.c checks it).  The
 * common case -- a block without NaN whose scale byte has a threshold table
 * (thresholds.h) -- counts thresholds, no division; the next one (finite
 * block, finite nonzero scale) a branch-free loop; anything else (NaN, Inf,
 * zero or non-finite scales) goes through the same careful IEEE steps the
 * reference uses.
 * docs/FORMATS.md describes the steps and the NaN rules. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "formats/layout.h"
#include "quant/quant_sm90.h"
#include "quant/thresholds.h"

/* x86 SSE's NaN rules, made explicit so results do not depend on the CPU:
 * a NaN operand propagates quieted (the first one if both are NaN); an
 * invalid operation (0/0, Inf/Inf, 0*Inf) gives the default NaN 0xFFC00000. */
#define DEFAULT_NAN_BITS 0xFFC00000u

/* Bit casts per element: the inline ones of internal.h. */
#define bits_of nvfp4_bits_of_f32
#define float_of nvfp4_f32_of_bits

static int is_nan(float v) { return (bits_of(v) & 0x7FFFFFFFu) > 0x7F800000u; }
static float quieted(float v) { return float_of(bits_of(v) | 0x00400000u); }

static float sse_div(float a, float b)
{
    if (is_nan(a)) return quieted(a);
    if (is_nan(b)) return quieted(b);
    float r = a / b;
    return is_nan(r) ? float_of(DEFAULT_NAN_BITS) : r;
}

static float sse_mul(float a, float b)
{
    if (is_nan(a)) return quieted(a);
    if (is_nan(b)) return quieted(b);
    float r = a * b;
    return is_nan(r) ? float_of(DEFAULT_NAN_BITS) : r;
}

/*------------------------- reading the input -------------------------*/

/* F16 -> F32 without branches on the common path: the 15 magnitude bits
 * shifted into an FP32 pattern and scaled by 2^112 are exact for normals
 * and subnormals; Inf/NaN are patched. */
static inline float f16_widen(uint16_t h)
{
    uint32_t mag = h & 0x7FFFu;
    uint32_t bits = bits_of(float_of(mag << 13) * 0x1p112f);
    if (mag >= 0x7C00u) bits = 0x7F800000u | ((mag & 0x3FFu) << 13);
    return float_of(bits | ((uint32_t)(h & 0x8000u) << 16));
}

/* Load 16 elements of row r from column c0 (zeros past the input's edge)
 * and return the largest |x| bit pattern (NaNs compare above Inf). */
static uint32_t load_block(float v[16], const void *x, nvfp4_dtype dtype, int64_t rows,
                           int64_t cols, int64_t r, int64_t c0)
{
    int64_t n = r < rows ? (cols - c0 < 16 ? cols - c0 : 16) : 0;
    if (n < 0) n = 0;
    size_t base = (size_t)r * (size_t)cols + (size_t)c0;
    uint32_t amax = 0;
    if (n == 16) {
        if (dtype == NVFP4_DTYPE_BF16) {
            const uint16_t *p = (const uint16_t *)x + base;
            for (int i = 0; i < 16; i++) {
                uint32_t b = (uint32_t)p[i] << 16;
                v[i] = float_of(b);
                uint32_t m = b & 0x7FFFFFFFu;
                amax = m > amax ? m : amax;
            }
        } else if (dtype == NVFP4_DTYPE_F16) {
            const uint16_t *p = (const uint16_t *)x + base;
            for (int i = 0; i < 16; i++) {
                v[i] = f16_widen(p[i]);
                uint32_t m = bits_of(v[i]) & 0x7FFFFFFFu;
                amax = m > amax ? m : amax;
            }
        } else {
            const float *p = (const float *)x + base;
            for (int i = 0; i < 16; i++) {
                v[i] = p[i];
                uint32_t m = bits_of(v[i]) & 0x7FFFFFFFu;
                amax = m > amax ? m : amax;
            }
        }
        return amax;
    }
    for (int i = 0; i < 16; i++) {
        float e = 0.0f;
        if (i < n) {
            if (dtype == NVFP4_DTYPE_BF16)
                e = nvfp4_bf16_to_f32(((const uint16_t *)x)[base + (size_t)i]);
            else if (dtype == NVFP4_DTYPE_F16)
                e = f16_widen(((const uint16_t *)x)[base + (size_t)i]);
            else
                e = ((const float *)x)[base + (size_t)i];
        }
        v[i] = e;
        uint32_t m = bits_of(e) & 0x7FFFFFFFu;
        amax = m > amax ? m : amax;
    }
    return amax;
}

/*-------------------------- per-tensor scale --------------------------*/

typedef struct amax_job {
    const void *x;
    nvfp4_dtype dtype;
    size_t n, chunk;
    uint32_t *partial; /* one |x| bit pattern per chunk */
} amax_job;

static void amax_range(void *ctx, int64_t begin, int64_t end)
{
    amax_job *j = ctx;
    for (int64_t k = begin; k < end; k++) {
        size_t lo = (size_t)k * j->chunk, hi = lo + j->chunk < j->n ? lo + j->chunk : j->n;
        uint32_t best = 0;
        int nan = 0;
        if (j->dtype == NVFP4_DTYPE_BF16 || j->dtype == NVFP4_DTYPE_F16) {
            /* Magnitude bit patterns order like the values; a NaN (above the
             * Inf pattern) is noted and stands above everything. */
            const uint16_t *p = j->x;
            uint16_t inf = j->dtype == NVFP4_DTYPE_BF16 ? 0x7F80u : 0x7C00u, b16 = 0;
            for (size_t i = lo; i < hi; i++) {
                uint16_t m = (uint16_t)(p[i] & 0x7FFFu);
                nan |= m > inf;
                b16 = m > b16 ? m : b16;
            }
            best = j->dtype == NVFP4_DTYPE_BF16 ? (uint32_t)b16 << 16
                                                : bits_of(f16_widen(b16));
        } else {
            const float *p = j->x;
            for (size_t i = lo; i < hi; i++) {
                uint32_t m = bits_of(p[i]) & 0x7FFFFFFFu;
                nan |= m > 0x7F800000u;
                best = m > best ? m : best;
            }
        }
        j->partial[k] = nan ? nvfp4_amax_nan_bits(j->dtype) : best;
    }
}

static nvfp4_status check_input(const void *x, nvfp4_dtype dtype, int64_t rows, int64_t cols,
                                const char *fn)
{
    if (!x) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: input pointer is NULL", fn);
    if (dtype != NVFP4_DTYPE_BF16 && dtype != NVFP4_DTYPE_F16 && dtype != NVFP4_DTYPE_F32)
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED,
                          "%s: input dtype %s is not supported (BF16, F16 or F32)", fn,
                          nvfp4_dtype_name(dtype) ? nvfp4_dtype_name(dtype) : "?");
    size_t n;
    if (rows < 1 || cols < 1 || !nvfp4_mul_size((size_t)rows, (size_t)cols, &n) ||
        !nvfp4_mul_size(n, 4, &n) || rows > INT64_MAX / 4 || cols > INT64_MAX / 4)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "%s: shape %lld x %lld is empty or too large", fn, (long long)rows,
                          (long long)cols);
    return NVFP4_OK;
}

static nvfp4_status tensor_scale(float *out, const void *x, nvfp4_dtype dtype, int64_t rows,
                                 int64_t cols, int nthreads)
{
    enum { CHUNKS = 64 };
    uint32_t partial[CHUNKS];
    size_t n = (size_t)rows * (size_t)cols;
    amax_job j = {x, dtype, n, (n + CHUNKS - 1) / CHUNKS, partial};
    int64_t nchunks = (int64_t)((n + j.chunk - 1) / j.chunk);
    nvfp4_status st = nvfp4_parallel_for(nchunks, 1, nthreads, amax_range, &j);
    if (st != NVFP4_OK) return st;
    uint32_t best = 0;
    for (int64_t k = 0; k < nchunks; k++) best = partial[k] > best ? partial[k] : best;
    /* 448 * 6, in FP32; a NaN amax is the scale as it is (x86 division
     * returns a quiet NaN operand unchanged) */
    *out = best > 0x7F800000u ? float_of(best) : float_of(best) / 2688.0f;
    return NVFP4_OK;
}

nvfp4_status nvfp4_per_tensor_scale(float *out, const void *x, nvfp4_dtype dtype, int64_t rows,
                                    int64_t cols)
{
    if (!out)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_per_tensor_scale: out is NULL");
    nvfp4_status st = check_input(x, dtype, rows, cols, "nvfp4_per_tensor_scale");
    if (st != NVFP4_OK) return st;
    return tensor_scale(out, x, dtype, rows, cols, 0);
}

/*------------- the cuda variant: the H200's fast-math instructions -------------*/

/* comfy-kitchen's compiled kernel (docs/FORMATS.md, "The compiled CUDA
 * kernel") in the instructions ptxas emitted.  NaN results are the GPU's
 * canonical 0x7FFFFFFF; they never reach a stored byte with their bits. */
#define SM90_NAN_BITS 0x7FFFFFFFu

static inline float ftz_in(float v) /* .ftz on an input: subnormals -> signed zero */
{
    uint32_t b = bits_of(v);
    return (b & 0x7F800000u) ? v : float_of(b & 0x80000000u);
}

/* mul.ftz.f32 (FMUL.FTZ): inputs flushed, one rounding, and a result whose
 * 24-bit rounding (unbounded exponent) lies below 2^-126 flushed to a signed
 * zero -- i.e. exact products below 2^-126 * (1 - 2^-25). */
static float sm90_mul(float a, float b)
{
    a = ftz_in(a);
    b = ftz_in(b);
    double p = (double)a * (double)b; /* exact: 24 x 24 bits */
    if (p != p) return float_of(SM90_NAN_BITS);
    if (fabs(p) < 0x1.ffffffp-127) return float_of(signbit(p) ? 0x80000000u : 0u);
    return (float)p;
}

/* rcp.approx.ftz.f32 (MUFU.RCP): the measured table for the mantissa, the
 * exponent subtracted, a result below 2^-126 flushed (quant_sm90.h). */
static float sm90_rcp(float x)
{
    uint32_t u = bits_of(x), s = u & 0x80000000u, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return float_of(SM90_NAN_BITS);
    if (a == 0x7F800000u) return float_of(s);
    if (a < 0x00800000u) return float_of(s | 0x7F800000u); /* +-0 and flushed subnormals */
    int32_t e = (int32_t)(a >> 23) - 127;
    uint32_t m = a & 0x7FFFFFu;
    int32_t y = (int32_t)bits_of(1.0f / float_of(0x3F800000u | m)) + nvfp4_sm90_rcp_diff(m);
    if ((y >> 23) - e <= 0) return float_of(s);
    return float_of(s | (uint32_t)(y - e * (1 << 23)));
}

/* min.ftz.f32 (FMNMX.FTZ): a NaN operand loses to the other one. */
static float sm90_min(float a, float b)
{
    a = ftz_in(a);
    b = ftz_in(b);
    if (is_nan(a)) return is_nan(b) ? float_of(SM90_NAN_BITS) : b;
    if (is_nan(b)) return a;
    return b < a ? b : a;
}

/* cvt.rn.satfinite.e4m3x2.f32 (F2FP.SATFINITE.E4M3): NaN -> 0x7F, beyond
 * +-448 -> +-448, otherwise the RNE encoder. */
static uint8_t sm90_e4m3(float v)
{
    if (is_nan(v)) return 0x7Fu;
    v = v > 448.0f ? 448.0f : (v < -448.0f ? -448.0f : v);
    return nvfp4_e4m3_from_f32(v);
}

/* The kernel's E2M1 on sm_90 (cuda_fp4.hpp's emulation in double): RNE,
 * |v| <= 0.25 -> signed 0, beyond 6 and +-Inf -> +-6, NaN -> +6 (code 7). */
static uint8_t sm90_e2m1(float v)
{
    return is_nan(v) ? 7u : nvfp4_e2m1_from_f32(v);
}

/*----------------------------- quantizer -----------------------------*/

typedef struct quant_job {
    const void *x;
    nvfp4_dtype dtype;
    int64_t rows, cols;   /* input */
    int64_t prows, pcols; /* padded to 16 */
    float pts;
    nvfp4_variant variant;
    nvfp4_tensor *out;
    /* cuda variant: rcp(pts) and, per E4M3 byte, min(rcp(pts * e4m3), FLT_MAX) */
    float rcp_pts;
    float enc_of[256];
    /* per E4M3 byte: the threshold table's kind (thresholds.h) and, for
     * THR_TABLE, its 7 FP32 thresholds (non-negative, so signed compares) */
    uint8_t thr_kind[256];
    int32_t thr[256][7];
} quant_job;

/* A block's codes from its byte's thresholds (no NaN element): the count
 * of those each |v| reaches, thr_code_f32 written so that the compiler
 * vectorizes it across the 16 elements. */
static void table_codes(const int32_t thr[7], const float v[16], uint8_t code[16])
{
    int32_t a[16], c[16];
    uint32_t sign[16];
    for (int i = 0; i < 16; i++) {
        uint32_t b = bits_of(v[i]);
        a[i] = (int32_t)(b & 0x7FFFFFFFu);
        sign[i] = (b >> 28) & 8u;
        c[i] = 0;
    }
    for (int k = 0; k < 7; k++) {
        const int32_t t = thr[k];
        for (int i = 0; i < 16; i++) c[i] += a[i] >= t;
    }
    for (int i = 0; i < 16; i++) code[i] = (uint8_t)((uint32_t)c[i] | sign[i]);
}

/* Round a finite or infinite |v| (not NaN) to an E2M1 magnitude code by
 * counting the midpoints it passes; ties go to the even code. */
static inline uint8_t e2m1_code_fast(float v)
{
    float a = fabsf(v);
    uint8_t c = (uint8_t)((a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) +
                          (a > 2.5f) + (a >= 3.5f) + (a > 5.0f));
    return (uint8_t)(c | ((bits_of(v) >> 31) << 3));
}

static inline float clamp6(float v) /* torch.clamp(v, -6, 6): NaN passes */
{
    return v < -6.0f ? -6.0f : (v > 6.0f ? 6.0f : v);
}

/* The block scale of the cuda variant: (amax * FP32(1/6)) * rcp(pts) with
 * FTZ, min'd with 448 (a NaN gives 448), cast with satfinite.  The kernel's
 * __hmax ignores NaN elements: amax is NaN only when all 16 are. */
static uint8_t sm90_block_scale(const quant_job *j, const float v[16], uint32_t amax_bits)
{
    float amax = float_of(amax_bits);
    if (amax_bits > 0x7F800000u) {
        uint32_t best = 0;
        int all_nan = 1;
        for (int i = 0; i < 16; i++) {
            uint32_t m = bits_of(v[i]) & 0x7FFFFFFFu;
            if (m > 0x7F800000u) continue;
            all_nan = 0;
            best = m > best ? m : best;
        }
        amax = all_nan ? float_of(SM90_NAN_BITS) : float_of(best);
    }
    float d = sm90_mul(sm90_mul(amax, NVFP4_SM90_ONE_SIXTH), j->rcp_pts);
    return sm90_e4m3(sm90_min(d, 448.0f));
}

static void quantize_block(const quant_job *j, int64_t r, int64_t cb, uint8_t *codes_row)
{
    float v[16];
    uint8_t code[16];
    uint32_t amax_bits = load_block(v, j->x, j->dtype, j->rows, j->cols, r, cb * 16);
    int finite_block = amax_bits < 0x7F800000u;
    float pts = j->pts;
    uint8_t s8;

    if (j->variant == NVFP4_VARIANT_EAGER) {
        float amax = float_of(amax_bits);
        if (amax_bits > 0x7F800000u) amax = quieted(amax); /* NaN in the block: amax is NaN */
        /* Block scale: min((amax / 6) / pts, 448) rounded to E4M3 (stored). */
        float s = sse_div(sse_div(amax, 6.0f), pts);
        s = s > 448.0f ? 448.0f : s;
        s8 = nvfp4_e4m3_from_f32(s);
        float t = sse_mul(pts, nvfp4_e4m3_to_f32(s8));
        if (amax_bits <= 0x7F800000u && j->thr_kind[s8] == THR_TABLE) {
            /* no NaN element: the byte's thresholds, no division */
            table_codes(j->thr[s8], v, code);
        } else if (t == 0.0f) {
            memset(code, 0, sizeof code);
        } else if (finite_block && isfinite(t)) {
            for (int i = 0; i < 16; i++) code[i] = e2m1_code_fast(v[i] / t);
        } else {
            for (int i = 0; i < 16; i++) code[i] = nvfp4_e2m1_from_f32(clamp6(sse_div(v[i], t)));
        }
    } else {
        s8 = sm90_block_scale(j, v, amax_bits);
        float enc = j->enc_of[s8];
        if (amax_bits <= 0x7F800000u && j->thr_kind[s8] == THR_TABLE) {
            /* no NaN element: the byte's thresholds (mul.ftz's input flush included) */
            table_codes(j->thr[s8], v, code);
        } else if (finite_block && isfinite(enc)) {
            /* FTZ on the product's output cannot change a code (a tiny
             * product is code 0 with its sign either way); on the input it
             * can, so subnormal elements are flushed first. */
            for (int i = 0; i < 16; i++) code[i] = e2m1_code_fast(ftz_in(v[i]) * enc);
        } else {
            for (int i = 0; i < 16; i++) code[i] = sm90_e2m1(sm90_mul(v[i], enc));
        }
    }
    j->out->scales[nvfp4_tiled_scale_offset(r, cb, j->pcols)] = s8;
    uint8_t *dst = codes_row + cb * 8;
    for (int i = 0; i < 8; i++) dst[i] = (uint8_t)((code[2 * i] << 4) | code[2 * i + 1]);
}

/* One unit = 128 padded rows, so threads never share a tile of scales. */
static void quantize_units(void *ctx, int64_t begin, int64_t end)
{
    const quant_job *j = ctx;
    int64_t nb = j->pcols / 16;
    for (int64_t u = begin; u < end; u++) {
        int64_t r_end = (u + 1) * 128 < j->prows ? (u + 1) * 128 : j->prows;
        for (int64_t r = u * 128; r < r_end; r++) {
            uint8_t *codes_row = j->out->codes + (size_t)r * (size_t)(j->pcols / 2);
            for (int64_t cb = 0; cb < nb; cb++) quantize_block(j, r, cb, codes_row);
        }
    }
}

nvfp4_status nvfp4_quantize(nvfp4_tensor *out, const void *x, nvfp4_dtype dtype, int64_t rows,
                            int64_t cols, const float *per_tensor_scale, nvfp4_variant variant,
                            int nthreads)
{
    if (!out) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_quantize: out is NULL");
    memset(out, 0, sizeof *out);
    nvfp4_status st = check_input(x, dtype, rows, cols, "nvfp4_quantize");
    if (st != NVFP4_OK) return st;
    if (variant != NVFP4_VARIANT_EAGER && variant != NVFP4_VARIANT_CUDA)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_quantize: unknown variant %d",
                          (int)variant);
    static const quant_job zero_job;
    quant_job j = zero_job;
    j.x = x;
    j.dtype = dtype;
    j.rows = rows;
    j.cols = cols;
    j.prows = (rows + 15) / 16 * 16;
    j.pcols = (cols + 15) / 16 * 16;
    j.variant = variant;
    j.out = out;
    if (per_tensor_scale) {
        j.pts = *per_tensor_scale;
    } else {
        st = tensor_scale(&j.pts, x, dtype, rows, cols, nthreads);
        if (st != NVFP4_OK) return st;
    }
    if (variant == NVFP4_VARIANT_CUDA) {
        /* per call, not per block: rcp(pts) and the encode scale of each byte */
        j.rcp_pts = sm90_rcp(j.pts);
        for (int b = 0; b < 256; b++)
            j.enc_of[b] = sm90_min(sm90_rcp(sm90_mul(j.pts, nvfp4_e4m3_to_f32((uint8_t)b))), FLT_MAX);
    }
    /* the threshold table of every byte (a few microseconds) */
    for (int b = 0; b < 256; b++) {
        uint32_t thr[7];
        j.thr_kind[b] = (uint8_t)thr_build(variant == NVFP4_VARIANT_CUDA, j.pts, (uint32_t)b, thr);
        for (int k = 0; k < 7; k++) j.thr[b][k] = (int32_t)thr[k]; /* <= 0x7F800000 */
    }
    st = nvfp4_tensor_alloc(out, j.prows, j.pcols, NVFP4_HI_FIRST, NVFP4_SCALES_TILED);
    if (st != NVFP4_OK) return st;
    out->per_tensor_scale = j.pts;
    st = nvfp4_parallel_for((j.prows + 127) / 128, 1, nthreads, quantize_units, &j);
    if (st != NVFP4_OK) nvfp4_tensor_free(out);
    return st;
}

/*---------------------------- dequantizer ----------------------------*/


typedef struct dequant_job {
    float *out;
    const nvfp4_tensor *t;
} dequant_job;

static void dequantize_rows(void *ctx, int64_t begin, int64_t end)
{
    const dequant_job *j = ctx;
    const nvfp4_tensor *t = j->t;
    float pts = t->per_tensor_scale;
    for (int64_t r = begin; r < end; r++) {
        float *o = j->out + (size_t)r * (size_t)t->cols;
        const uint8_t *row = t->codes + (size_t)r * (size_t)(t->cols / 2);
        int hi_first = t->nibble_order == NVFP4_HI_FIRST;
        for (int64_t cb = 0; cb < t->cols / 16; cb++) {
            float s = nvfp4_e4m3_to_f32(nvfp4_tensor_scale(t, r, cb));
            for (int64_t c = cb * 16; c < cb * 16 + 16; c += 2) {
                uint8_t byte = row[c / 2];
                uint8_t first = hi_first ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 15);
                uint8_t second = hi_first ? (uint8_t)(byte & 15) : (uint8_t)(byte >> 4);
                o[c] = nvfp4_dequant_value(first, s, pts);
                o[c + 1] = nvfp4_dequant_value(second, s, pts);
            }
        }
    }
}

nvfp4_status nvfp4_dequantize(float *out, const nvfp4_tensor *t, int nthreads)
{
    if (!out || !t || !t->codes || !t->scales)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_dequantize: out, tensor or its arrays are NULL");
    if (t->rows < 1 || t->cols < 1 || t->cols % 16 != 0)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_dequantize: shape %lld x %lld (cols must be a multiple of 16)",
                          (long long)t->rows, (long long)t->cols);
    dequant_job j = {out, t};
    return nvfp4_parallel_for(t->rows, 64, nthreads, dequantize_rows, &j);
}
