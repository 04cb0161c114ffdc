/* quantize_internal.h -- the device quantizer shared by quantize.cu
 * (nvfp4_quantize_cuda) and the fused linears (the A producer of
 * nvfp4_linear_cuda).  CUDA C++ only; not part of the C build.
 *
 * Every function here is a transcription of the C quantizer
 * (src/quant/quantize_ref.c, src/formats/scalars.c) onto the device: the
 * same integer code for the E4M3 / E2M1 roundings, one correctly rounded
 * FP32 intrinsic (__fdiv_rn, __fmul_rn, __fadd_rn) wherever the C code has
 * one FP32 operation, and the C code's x86 NaN rules spelled out, because
 * the GPU's own NaN results (the canonical 0x7FFFFFFF) differ from SSE's.
 * docs/STREAMING_A.md explains why each step is equal to its C twin. */
#ifndef NVFP4_CUDA_QUANTIZE_INTERNAL_H
#define NVFP4_CUDA_QUANTIZE_INTERNAL_H

#include <stdint.h>

#include "formats/layout.h"
#include "quant/thresholds.h"

/* internal.h declares nvfp4_fail() without C linkage guards. */
#ifdef __cplusplus
extern "C" {
#include "internal.h"
}
#else
#include "internal.h"
#endif

#ifdef __CUDACC__
#include <cuda_runtime.h>

#include "cuda/ptx.cuh"

#define NVFP4_Q_DEV static __device__ __forceinline__

/*------------------------- IEEE helpers (SSE rules) -------------------------*/

#define NVFP4_Q_DEFAULT_NAN 0xFFC00000u /* SSE's result of an invalid operation */

NVFP4_Q_DEV int q_isnan(float v) { return (__float_as_uint(v) & 0x7FFFFFFFu) > 0x7F800000u; }
NVFP4_Q_DEV float q_quiet(float v) { return __uint_as_float(__float_as_uint(v) | 0x00400000u); }

/* a / b as the C code's x86 build computes it: a NaN operand comes out
 * quieted (the first one), an invalid operation gives the default NaN. */
NVFP4_Q_DEV float q_div(float a, float b)
{
    if (q_isnan(a)) return q_quiet(a);
    if (q_isnan(b)) return q_quiet(b);
    float r = __fdiv_rn(a, b);
    return q_isnan(r) ? __uint_as_float(NVFP4_Q_DEFAULT_NAN) : r;
}

NVFP4_Q_DEV float q_mul(float a, float b)
{
    if (q_isnan(a)) return q_quiet(a);
    if (q_isnan(b)) return q_quiet(b);
    float r = __fmul_rn(a, b);
    return q_isnan(r) ? __uint_as_float(NVFP4_Q_DEFAULT_NAN) : r;
}

/*----------------------------- scalar formats -----------------------------*/

/* nvfp4_e4m3_from_f32: PyTorch's float8_e4m3fn cast, line for line. */
NVFP4_Q_DEV uint32_t q_e4m3_from_f32(float v)
{
    uint32_t bits = __float_as_uint(v);
    uint32_t sign = (bits >> 24) & 0x80u;
    uint32_t mag = bits & 0x7FFFFFFFu;
    uint32_t byte;
    if (mag >= 0x43F00000u) { /* |v| >= 480, Inf, NaN */
        byte = 0x7Fu;
    } else if (mag < 0x3C800000u) { /* subnormal or zero: RNE onto the 2^-9 grid */
        byte = (__float_as_uint(__fadd_rn(__uint_as_float(mag), 16384.0f)) - 0x46800000u) & 0xFFu;
    } else {
        uint32_t odd = (mag >> 20) & 1u;
        byte = ((mag - 0x3C000000u + 0x0007FFFFu + odd) >> 20) & 0xFFu;
    }
    return (byte | sign) & 0xFFu;
}

/* nvfp4_e4m3_to_f32: the NaN byte decodes to PyTorch's 0x7FF00000. */
NVFP4_Q_DEV float q_e4m3_to_f32(uint32_t byte)
{
    uint32_t sign = (byte & 0x80u) << 24;
    uint32_t exp = (byte >> 3) & 15u, man = byte & 7u;
    if (exp == 15u && man == 7u) return __uint_as_float(sign | 0x7FF00000u);
    /* man * 2^-9 (exact) or (1 + man/8) * 2^(exp-7) built from its bits. */
    float m = exp == 0u ? __fmul_rn((float)man, 0x1p-9f)
                        : __uint_as_float(((exp + 120u) << 23) | (man << 20));
    return __uint_as_float(__float_as_uint(m) | sign);
}

/* nvfp4_e2m1_from_f32: RNE, saturating, sign kept; NaN codes by payload
 * exactly as the C integer arithmetic gives them (low 8 bits kept). */
NVFP4_Q_DEV uint32_t q_e2m1_from_f32(float v)
{
    uint32_t bits = __float_as_uint(v);
    uint32_t sign = (bits >> 31) << 3;
    uint32_t mag = bits & 0x7FFFFFFFu;
    float a = __uint_as_float(mag);
    uint32_t code;
    if (a >= 6.0f) {
        code = 7u;
    } else if (a < 1.0f) {
        code = (__float_as_uint(__fadd_rn(a, 4194304.0f)) - 0x4A800000u) & 0xFFu;
    } else {
        uint32_t odd = (mag >> 22) & 1u;
        code = ((mag - 0x3F000000u + 0x001FFFFFu + odd) >> 22) & 0xFFu;
    }
    return (code | sign) & 0xFFu;
}

/* Clamps are written on the bit patterns: the compiler turns a float
 * compare-and-select clamp into min/max instructions, which return the
 * canonical NaN 0x7FFFFFFF instead of the NaN operand itself (its sign and
 * payload decide the E4M3 / E2M1 codes of NaN blocks). */

/* torch.clamp(v, -6, 6): NaN passes unchanged. */
NVFP4_Q_DEV float q_clamp6(float v)
{
    const uint32_t bits = __float_as_uint(v), mag = bits & 0x7FFFFFFFu;
    /* |v| > 6 (0x40C00000), Inf included, NaN excluded: +-6 with v's sign */
    return mag > 0x40C00000u && mag <= 0x7F800000u ? __uint_as_float((bits & 0x80000000u) | 0x40C00000u)
                                                   : v;
}

/* torch.clamp(s, max=448): NaN and negative values pass unchanged. */
NVFP4_Q_DEV float q_min448(float s)
{
    const uint32_t bits = __float_as_uint(s);
    return bits > 0x43E00000u && bits <= 0x7F800000u ? __uint_as_float(0x43E00000u) : s;
}

/*------------- the cuda variant: comfy-kitchen's compiled kernel -------------*/

/* The very PTX instructions the compiled kernel's SASS holds (FMUL.FTZ,
 * MUFU.RCP, FMNMX.FTZ, F2FP.SATFINITE.E4M3), so this quantizer gives its
 * bytes by construction; src/quant/quantize.c models them in C
 * (docs/FORMATS.md, "The compiled CUDA kernel"). */
NVFP4_Q_DEV float q_sm90_mul(float a, float b)
{
    float r;
    asm("mul.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

NVFP4_Q_DEV float q_sm90_rcp(float a)
{
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(a));
    return r;
}

NVFP4_Q_DEV float q_sm90_min(float a, float b) /* a NaN operand loses */
{
    float r;
    asm("min.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

NVFP4_Q_DEV uint32_t q_sm90_e4m3(float v) /* NaN -> 0x7F, saturates at +-448 */
{
    uint16_t h;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(h) : "f"(0.0f), "f"(v));
    return h & 0xFFu;
}

/* cuda_fp4.hpp's sm_90 E2M1 emulation: RNE, saturating, sign kept; NaN -> +6. */
NVFP4_Q_DEV uint32_t q_sm90_e2m1(float v)
{
    return q_isnan(v) ? 7u : q_e2m1_from_f32(v);
}

/* The kernel's block scale: d = (amax * FP32(1/6)) * rcp(pts), min(d, 448)
 * (a NaN d gives 448), E4M3 with satfinite. */
NVFP4_Q_DEV uint32_t q_scale_sm90(float amax, float rcp_pts)
{
    const float d = q_sm90_mul(q_sm90_mul(amax, 0x1.555556p-3f), rcp_pts);
    return q_sm90_e4m3(q_sm90_min(d, 448.0f));
}

/* The kernel's steps, shared by the block (q_block_sm90) and the four-lane
 * kernel (a lane's four elements).  Macros, not functions: as functions
 * they changed the register allocation of kernels the H200 has tested.
 *   Q_AMAX_SM90_ACC: over N elements of v, the largest |x| bit pattern of
 *     the ones that are not NaN into BEST, the NaNs counted into N_NAN
 *     (the block's amax is NaN only when all 16 are);
 *   Q_ENC_SM90: enc = min(rcp(pts * e4m3(s8)), FLT_MAX);
 *   Q_CODE_SM90: code = e2m1(x * enc). */
#define Q_AMAX_SM90_ACC(V, N, BEST, N_NAN)                                                         \
    _Pragma("unroll") for (int i_ = 0; i_ < (N); i_++) {                                           \
        const uint32_t m_ = __float_as_uint((V)[i_]) & 0x7FFFFFFFu;                                \
        const int nan_ = m_ > 0x7F800000u;                                                         \
        (N_NAN) += (uint32_t)nan_;                                                                 \
        (BEST) = !nan_ && m_ > (BEST) ? m_ : (BEST);                                               \
    }
#define Q_ENC_SM90(S8, PTS) q_sm90_min(q_sm90_rcp(q_sm90_mul((PTS), q_e4m3_to_f32(S8))), 3.40282347e+38f)
#define Q_CODE_SM90(X, ENC) q_sm90_e2m1(q_sm90_mul((X), (ENC)))

/* The kernel's block: amax by __hmax (NaN elements skipped; NaN only when
 * all 16 are), the block scale (q_scale_sm90), then the codes. */
NVFP4_Q_DEV void q_block_sm90(const float v[16], float pts, uint32_t *s8_out, uint32_t code[16])
{
    uint32_t best = 0u, n_nan = 0u;
    Q_AMAX_SM90_ACC(v, 16, best, n_nan)
    const float amax = n_nan == 16u ? __uint_as_float(0x7FFFFFFFu) : __uint_as_float(best);
    const uint32_t s8 = q_scale_sm90(amax, q_sm90_rcp(pts));
    *s8_out = s8;
    const float enc = Q_ENC_SM90(s8, pts);
#pragma unroll
    for (int i = 0; i < 16; i++) code[i] = Q_CODE_SM90(v[i], enc);
}

/*------------------------------- one block -------------------------------*/

/* The eager block scale byte: e4m3(min((amax / 6) / pts, 448)); amax_bits
 * is the block's largest |x| pattern (NaN patterns above Inf: amax NaN). */
NVFP4_Q_DEV uint32_t q_scale_eager(uint32_t amax_bits, float pts)
{
    /* A NaN's payload does not matter below: it only travels into s, whose
     * E4M3 cast maps every positive NaN to 0x7F. */
    float amax = __uint_as_float(amax_bits);
    if (amax_bits > 0x7F800000u) amax = q_quiet(amax);
    const float s = q_div(q_div(amax, 6.0f), pts);
    return q_e4m3_from_f32(q_min448(s));
}

/* The eager steps, shared by q_block and the four-lane kernel (macros, as
 * the sm90 ones): t = pts * e4m3(s8) (S8F: the scale byte's value); code =
 * e2m1(clamp(x / t, -6, 6)) for t != 0, +0 when t is 0 (comfy-kitchen's
 * zero-scale mask). */
#define Q_STEP_EAGER(S8F, PTS) q_mul((PTS), (S8F))
#define Q_CODE_EAGER_NZ(X, T) q_e2m1_from_f32(q_clamp6(q_div((X), (T))))

/* Quantize 16 widened elements whose largest |x| bit pattern is amax_bits
 * (NaN patterns compare above Inf) with per-tensor scale pts.  Writes the
 * block's E4M3 byte and its 16 E2M1 codes (one per byte, 0..15). */
NVFP4_Q_DEV void q_block(const float v[16], uint32_t amax_bits, float pts, int cuda_variant,
                         uint32_t *s8_out, uint32_t code[16])
{
    if (cuda_variant) {
        q_block_sm90(v, pts, s8_out, code);
        return;
    }
    const uint32_t s8 = q_scale_eager(amax_bits, pts);
    float s8f = q_e4m3_to_f32(s8);
    *s8_out = s8;
    float t = Q_STEP_EAGER(s8f, pts);
    if (t == 0.0f) { /* comfy-kitchen's zero-scale mask: +0 codes */
#pragma unroll
        for (int i = 0; i < 16; i++) code[i] = 0u;
    } else {
#pragma unroll
        for (int i = 0; i < 16; i++) code[i] = Q_CODE_EAGER_NZ(v[i], t);
    }
}

/* The GEMM's FP16 operand a' = e2m1(code) * |e4m3(s8)|: exact (at most 6
 * significant bits, in [2^-10, 2688]); the code's sign is kept (code 8 gives
 * -0); a NaN scale byte gives the FP16 NaN 0x7FFF, as the GEMM's own
 * dequantizing pre-pass (cvt e4m3x2 -> f16x2, then HMUL2) produces. */
NVFP4_Q_DEV uint32_t q_f16_operand(uint32_t code, uint32_t s8)
{
    if ((s8 & 0x7Fu) == 0x7Fu) return 0x7FFFu;
    const uint32_t twice = nvfp4_e2m1_twice(code); /* 2 * |e2m1|, an integer */
    const uint32_t f = __float_as_uint(__fmul_rn(__fmul_rn((float)twice, 0.5f),
                                                 q_e4m3_to_f32(s8 & 0x7Fu)));
    /* A positive normal FP32 with at most 6 significant bits and an exponent
     * in [-10, 11]: rebias 127 -> 15 and drop 13 zero mantissa bits. */
    const uint32_t h = f == 0u ? 0u : (((f >> 23) - 112u) << 10) | ((f >> 13) & 0x3FFu);
    return h | ((code & 8u) << 12);
}

/*------------------------ the threshold-table quantizer ------------------------*/

/* FP32(amax / 2688); a NaN amax (0x7FC00000) is the scale as it is, as on
 * the CPU (the device's division would return 0x7FFFFFFF). */
NVFP4_Q_DEV float q_dynamic_pts(uint32_t amax_bits)
{
    return amax_bits > 0x7F800000u ? __uint_as_float(amax_bits)
                                   : __fdiv_rn(__uint_as_float(amax_bits), 2688.0f);
}

/* The amax pass's result, the largest of its n per-CTA words (|x| maxima
 * as FP32 bit patterns, NaN above Inf: integer order is value order), by a
 * whole warp: every lane calls it (warp-uniform code) and gets the result.
 * Plain loads: the words are the previous grid's output (read after
 * griddepcontrol.wait), not read-only data. */
NVFP4_Q_DEV uint32_t q_amax_of_parts(const uint32_t *parts, int n)
{
    const int lane = (int)(threadIdx.x & 31u);
    uint32_t best = 0;
#pragma unroll
    for (int j = 0; j < 8; j++) /* the first 256 words: eight loads in flight a lane */
        if (lane + 32 * j < n) best = max(best, parts[lane + 32 * j]);
    for (int i = lane + 256; i < n; i += 32) best = max(best, parts[i]);
    return __reduce_max_sync(0xFFFFFFFFu, best);
}

/* A CTA's threshold table (src/quant/thresholds.h, docs/STREAMING_A.md
 * "Threshold tables"): one entry per scale byte 0..127 -- the bytes a
 * positive per-tensor scale gives; other bytes take the exact path -- as
 * two uint4: the seven thr_nt words, then (kind << 16) | FP16 |e4m3(s8)|. */
#define Q_TAB 128 /* entries; the register GEMM's producer reserves REGM_QTAB_BYTES for them */
NVFP4_Q_DEV void q_table_entry(uint4 *tab, uint32_t s8, int cuda_variant, float pts)
{
    uint32_t thr[7], nt[7] = {0, 0, 0, 0, 0, 0, 0};
    const int kind = thr_build(cuda_variant, pts, s8, thr);
    if (kind == THR_TABLE) {
#pragma unroll
        for (int i = 0; i < 7; i++) nt[i] = thr_nt(thr_bf16(thr[i]));
    }
    /* a table or zero entry never has the NaN byte: the FP16 scale is finite */
    const uint32_t info = ((uint32_t)kind << 16) | (nvfp4_scale_to_f16x2(s8) & 0xFFFFu);
    tab[2 * s8] = make_uint4(nt[0], nt[1], nt[2], nt[3]);
    tab[2 * s8 + 1] = make_uint4(nt[4], nt[5], nt[6], info);
}

/* Block (r, cb)'s 16 BF16 elements as 8 words, element 2i in the low half
 * of word i; zeros past the input, as the C quantizer pads. */
NVFP4_Q_DEV void q_load_block(const uint16_t *__restrict__ x, int m, int k, int vec, int r,
                                   int cb, uint32_t w[8])
{
    if (r < m && cb * 16 + 16 <= k) {
        const uint16_t *src = x + (size_t)r * (size_t)k + (size_t)cb * 16;
        if (vec) {
            const uint4 a = __ldg((const uint4 *)src), b = __ldg((const uint4 *)src + 1);
            w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w;
            w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
        } else {
#pragma unroll
            for (int i = 0; i < 8; i++) w[i] = (uint32_t)__ldg(src + 2 * i) | ((uint32_t)__ldg(src + 2 * i + 1) << 16);
        }
    } else { /* the edge */
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int c = cb * 16 + 2 * i;
            const uint32_t lo = (r < m && c < k) ? __ldg(x + (size_t)r * (size_t)k + c) : 0u;
            const uint32_t hi = (r < m && c + 1 < k) ? __ldg(x + (size_t)r * (size_t)k + c + 1) : 0u;
            w[i] = lo | (hi << 16);
        }
    }
}

/* The largest |x| BF16 pattern of a block's 8 words (NaN patterns above Inf). */
NVFP4_Q_DEV uint32_t q_block_amax16(const uint32_t w[8])
{
    uint32_t amax2 = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) amax2 = __vmaxu2(amax2, w[i] & 0x7FFF7FFFu);
    return max(amax2 & 0xFFFFu, amax2 >> 16);
}

/* A block's scale byte *s8 (both variants, exactly as the C quantizer) and
 * the kind of its table entry, whose second half goes to *e1: THR_EXACT
 * when the table does not cover the block (a NaN element, or a byte beyond
 * the table), else the entry's kind (THR_TABLE or THR_ZERO). */
NVFP4_Q_DEV uint32_t q_block_kind(uint32_t amax16, const uint4 *tab, float pts, float rcp_pts, int cuda_variant,
                                  uint32_t *s8, uint4 *e1)
{
    *s8 = 0;
    *e1 = make_uint4(0, 0, 0, 0);
    if (amax16 > 0x7F80u) return THR_EXACT; /* a NaN element */
    *s8 = cuda_variant ? q_scale_sm90(__uint_as_float(amax16 << 16), rcp_pts) : q_scale_eager(amax16 << 16, pts);
    if (*s8 >= Q_TAB) return THR_EXACT;
    *e1 = tab[2 * *s8 + 1];
    return e1->w >> 16;
}

/* nvfp4_quantize()'s 8 code bytes of a block (hi-first: element 2i in the
 * high nibble of byte i), as two words. */
NVFP4_Q_DEV uint2 q_pack_codes(const uint32_t code[16])
{
    uint32_t lo = 0, hi = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        lo |= ((code[2 * i] << 4) | code[2 * i + 1]) << (8 * i);
        hi |= ((code[8 + 2 * i] << 4) | code[8 + 2 * i + 1]) << (8 * i);
    }
    return make_uint2(lo, hi);
}

/* A block's 8 words (q_load_block) as its 16 BF16 values widened to FP32. */
NVFP4_Q_DEV void q_widen_block(uint4 wa, uint4 wb, float v[16])
{
    const uint32_t w[8] = {wa.x, wa.y, wa.z, wa.w, wb.x, wb.y, wb.z, wb.w};
#pragma unroll
    for (int i = 0; i < 8; i++) {
        v[2 * i] = __uint_as_float(w[i] << 16);
        v[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
    }
}

/* A block's codes by the exact steps (q_block), for what the table does not
 * cover; not inlined, so that the table path does not carry its registers. */
static __device__ __noinline__ uint2 q_exact_codes(uint4 wa, uint4 wb, uint32_t amax_bits, float pts,
                                                   int cuda_variant, uint32_t *s8)
{
    float v[16];
    q_widen_block(wa, wb, v);
    uint32_t code[16];
    q_block(v, amax_bits, pts, cuda_variant, s8, code);
    return q_pack_codes(code);
}

/* One block -> its scale byte and code bytes, through the CTA's table
 * where it covers the block, else the exact steps: the codes path of the
 * block kernel and of the register GEMM's in-kernel A producer. */
NVFP4_Q_DEV uint2 q_block_codes(const uint32_t w[8], const uint4 *tab, float pts, float rcp_pts, int cuda_variant,
                                uint32_t *s8)
{
    const uint32_t amax16 = q_block_amax16(w);
    uint4 e1;
    const uint32_t kind = q_block_kind(amax16, tab, pts, rcp_pts, cuda_variant, s8, &e1);
    if (kind == THR_EXACT)
        return q_exact_codes(make_uint4(w[0], w[1], w[2], w[3]), make_uint4(w[4], w[5], w[6], w[7]), amax16 << 16,
                             pts, cuda_variant, s8);
    if (kind != THR_TABLE) return make_uint2(0, 0); /* THR_ZERO: comfy-kitchen's zero-scale mask */
    const uint4 e0 = tab[2 * *s8];
    const uint32_t nt[7] = {e0.x, e0.y, e0.z, e0.w, e1.x, e1.y, e1.z};
    return make_uint2(thr_codes8(w, nt), thr_codes8(w + 4, nt));
}

/*------------- the register GEMM's in-kernel A producer (sm90/regm.cu) -------------*/

/* BF16 activations x [rows][cols] that the GEMM quantizes itself (the
 * REGM_BF16 kernels, M <= 8): per-tensor scale *static_pts, or else
 * FP32(amax / 2688), amax the largest of the amax_n words at amax_bits that
 * the amax pass launched just before wrote. */
typedef struct nvfp4_sm90_bf16_act {
    const uint16_t *x;
    int64_t cols;
    const float *static_pts;
    const uint32_t *amax_bits;
    int amax_n;
    float *pts_out; /* optional: the scale used */
    uint8_t *codes;  /* optional: nvfp4_quantize()'s codes of x (16 padded rows) */
    uint8_t *scales; /* optional: its tiled scales, tile padding already zero */
    int cuda_variant;
} nvfp4_sm90_bf16_act;

/*------------------------- host side (quantize.cu) -------------------------*/

/* One launch of the block quantizer.  Rows r < roundup(m,16) and block
 * columns cb < roundup(k,16)/16 are quantized (elements outside m x k read
 * as zero, as the C quantizer pads).  Outputs, each optional:
 *   codes/scales : nvfp4_quantize()'s layout (scales' tile padding is not
 *                  written: the caller zeroes it first);
 *   act          : the GEMM workspace, FP16 [m][act_ld] (rows < m only);
 *   pts_out      : the per-tensor scale used, written by one thread.
 * The per-tensor scale is *static_pts, or else FP32(amax / 2688) (a NaN
 * amax: that NaN), amax the largest of the amax_n words at amax_bits. */
typedef struct nvfp4_q_launch {
    const uint16_t *x;
    int64_t m, k;
    const float *static_pts;
    const uint32_t *amax_bits;
    int amax_n;
    /* launched as the amax pass's programmatic dependent (the amax words
     * are read after griddepcontrol.wait; its loads of x start before) */
    int after_amax;
    int cuda_variant;
    /* the table kernel even where the rule would take four lanes a block
     * (the fused linear: eager before a REGR GEMM) */
    int table_first;
    uint8_t *codes;
    uint8_t *scales;
    uint16_t *act;
    int64_t act_ld;
    float *pts_out;
    float *pts_out2;
    /* words the kernel zeroes (the fused GEMM's stream-K counters, so that
     * no memset sits between the two launches), or NULL */
    unsigned *zero_words;
    int zero_count;
    cudaStream_t stream;
} nvfp4_q_launch;

nvfp4_status nvfp4_q_blocks_launch(const nvfp4_q_launch *q, const char *fn);

/* The amax pass without a memset before it: CTA i of the pass stores the
 * largest |x| FP32 bit pattern (NaN as 0x7FC00000) of its share of the
 * m x k BF16 elements into parts[i], for at most max_parts CTAs; *n gets
 * their number (what the readers reduce, q_amax_of_parts). */
nvfp4_status nvfp4_q_amax_parts_launch(const uint16_t *x, int64_t m, int64_t k, uint32_t *parts, int max_parts,
                                       int *n, cudaStream_t stream, const char *fn);

/* Zero *amax_bits, then atomicMax |x|'s FP32 bit patterns of the m x k BF16
 * elements into it (any NaN as 0x7FC00000, above Inf), on `stream`. */
nvfp4_status nvfp4_q_amax_launch(const uint16_t *x, int64_t m, int64_t k, uint32_t *amax_bits,
                                 cudaStream_t stream, const char *fn);

#endif /* __CUDACC__ */
#endif
