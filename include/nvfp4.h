/*
 * nvfp4.h -- the one public header of libnvfp4.
 *
 * NVFP4 linear layers that are fast and bit-exact: ComfyUI's bytes (packing,
 * tiled scales, safetensors checkpoints), ComfyUI's quantizer reproduced bit
 * for bit, C models of how tensor cores add (the accumulation oracle), a
 * multi-threaded CPU backend and an H200 (sm_90a) backend that implement the
 * same contract (docs/CONTRACT.md).
 *
 * Conventions
 *  - Every function that can fail returns an nvfp4_status.  On failure a
 *    one-line message is kept per thread: nvfp4_last_error().  Control
 *    bytes quoted from a file (a tensor name, a JSON excerpt) appear as \xNN,
 *    so the message is always one printable line.
 *  - Library code never prints, exits or aborts.
 *  - Sizes and indices are int64_t; byte counts are size_t.
 *  - "nthreads" arguments: 0 means one thread per online core.
 */
#ifndef NVFP4_H
#define NVFP4_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every public function carries NVFP4_API; the library is built with
 * -fvisibility=hidden, so the shared library exports these and nothing else. */
#if defined(__GNUC__) || defined(__clang__)
#define NVFP4_API __attribute__((visibility("default")))
#else
#define NVFP4_API
#endif

#define NVFP4_VERSION_MAJOR 0
#define NVFP4_VERSION_MINOR 1
#define NVFP4_VERSION_PATCH 0
#define NVFP4_BLOCK 16 /* elements per E4M3 block scale */

/*-**************************************************************************
 *  Status codes
 ****************************************************************************/
typedef enum nvfp4_status {
    NVFP4_OK = 0,
    NVFP4_ERR_INVALID_ARGUMENT = 1, /* a caller's argument is out of contract */
    NVFP4_ERR_OUT_OF_MEMORY = 2,
    NVFP4_ERR_IO = 3,               /* open/read/write/rename failed */
    NVFP4_ERR_MALFORMED = 4,        /* a file's bytes break its format */
    NVFP4_ERR_NOT_FOUND = 5,        /* a named tensor or layer is absent */
    NVFP4_ERR_UNSUPPORTED = 6,      /* valid, but not handled (dtype, rank) */
    NVFP4_ERR_NO_DEVICE = 7,        /* no usable CUDA device, or built without CUDA */
    NVFP4_ERR_CUDA = 8,             /* a CUDA runtime call failed */
    NVFP4_ERR_INTERNAL = 9
} nvfp4_status;

/*! nvfp4_status_str() :
 *  @return a static, human-readable name for a status code. */
NVFP4_API const char *nvfp4_status_str(nvfp4_status status);

/*! nvfp4_last_error() :
 *  @return the message of the last failure on the calling thread ("" if none).
 *  Valid until the next failing call on the same thread. */
NVFP4_API const char *nvfp4_last_error(void);

/*! nvfp4_clear_error() : forget the calling thread's last message. */
NVFP4_API void nvfp4_clear_error(void);

/*! nvfp4_default_threads() : @return the number of online cores (>= 1). */
NVFP4_API int nvfp4_default_threads(void);

/*-**************************************************************************
 *  Scalar formats (src/formats)
 *  E2M1: 4-bit code s.e1e0.m, values 0 .5 1 1.5 2 3 4 6 and negatives
 *        (code 8 is -0).  No Inf, no NaN.
 *  E4M3 ("fn"): bias 7, max 448, S.1111.111 is NaN, no Inf.
 ****************************************************************************/

/*! nvfp4_e2m1_to_f32() : @return the value of the low 4 bits of code. */
NVFP4_API float nvfp4_e2m1_to_f32(uint8_t code);

/*! nvfp4_e2m1_from_f32() :
 *  Round to nearest, ties to even mantissa, saturating to +-6; the sign is
 *  kept (so -0.1 -> code 8, "-0").  NaN: comfy-kitchen's integer rounding
 *  applied to the NaN's bits gives 2, 3 or 4 by payload (quiet NaN
 *  0x7FC00000 -> 3) with the NaN's sign; reproduced exactly (docs/FORMATS.md).
 *  @return a code in 0..15. */
NVFP4_API uint8_t nvfp4_e2m1_from_f32(float v);

/*! nvfp4_e4m3_to_f32() : @return the value of an E4M3 byte (NaN for 0x7F/0xFF). */
NVFP4_API float nvfp4_e4m3_to_f32(uint8_t byte);

/*! nvfp4_e4m3_from_f32() :
 *  PyTorch's float -> float8_e4m3fn cast: round to nearest even, tiny values
 *  to subnormals or zero (sign kept), |v| >= 480 and NaN -> NaN (0x7F with
 *  the sign); no saturation (callers clamp to 448 first, as ComfyUI does).
 *  @return the E4M3 byte. */
NVFP4_API uint8_t nvfp4_e4m3_from_f32(float v);

/*! 16-bit float conversions.  *_from_f32 round to nearest even; NaN stays a
 *  quiet NaN of the same sign. */
NVFP4_API float    nvfp4_bf16_to_f32(uint16_t bits);
NVFP4_API uint16_t nvfp4_bf16_from_f32(float v);
NVFP4_API float    nvfp4_f16_to_f32(uint16_t bits);
NVFP4_API uint16_t nvfp4_f16_from_f32(float v);

/*! Bit casts (no rounding). */
NVFP4_API uint32_t nvfp4_f32_bits(float v);
NVFP4_API float    nvfp4_f32_from_bits(uint32_t bits);

/*-**************************************************************************
 *  Element types (shared by the quantizer and the safetensors I/O)
 ****************************************************************************/
typedef enum nvfp4_dtype {
    NVFP4_DTYPE_INVALID = 0,
    NVFP4_DTYPE_BOOL,
    NVFP4_DTYPE_U8,
    NVFP4_DTYPE_I8,
    NVFP4_DTYPE_U16,
    NVFP4_DTYPE_I16,
    NVFP4_DTYPE_U32,
    NVFP4_DTYPE_I32,
    NVFP4_DTYPE_U64,
    NVFP4_DTYPE_I64,
    NVFP4_DTYPE_F8_E4M3,
    NVFP4_DTYPE_F8_E5M2,
    NVFP4_DTYPE_BF16,
    NVFP4_DTYPE_F16,
    NVFP4_DTYPE_F32,
    NVFP4_DTYPE_F64,
    NVFP4_DTYPE_COUNT_
} nvfp4_dtype;

/*! nvfp4_dtype_size() : @return bytes per element (0 for INVALID). */
NVFP4_API size_t nvfp4_dtype_size(nvfp4_dtype dtype);
/*! nvfp4_dtype_name() : @return the safetensors spelling ("BF16", "F8_E4M3", ...). */
NVFP4_API const char *nvfp4_dtype_name(nvfp4_dtype dtype);
/*! nvfp4_dtype_from_name() : @return the dtype, or NVFP4_DTYPE_INVALID. */
NVFP4_API nvfp4_dtype nvfp4_dtype_from_name(const char *name);

/*-**************************************************************************
 *  NVFP4 tensors (src/formats/tensor.c)
 *
 *  rows x cols logical elements, cols % 16 == 0.  value(r, c) =
 *  e2m1(code(r,c)) * e4m3(scale(r, c/16)) * per_tensor_scale.
 *  Packing: two codes per byte.  ComfyUI writes element 2i in the HIGH
 *  nibble ("hi first"); PTX/CUTLASS read element 2i from the LOW nibble.
 *  Scales: either the cuBLAS 128x4 tiled layout (ComfyUI's; rows padded to
 *  128, block columns to 4, padding zero) or plain row-major rows x cols/16.
 ****************************************************************************/
typedef enum nvfp4_nibble_order {
    NVFP4_HI_FIRST = 0, /* ComfyUI checkpoints */
    NVFP4_LO_FIRST = 1  /* PTX / CUTLASS / cuBLAS */
} nvfp4_nibble_order;

typedef enum nvfp4_scale_layout {
    NVFP4_SCALES_TILED = 0,    /* cuBLAS 128x4 tiles, ComfyUI checkpoints */
    NVFP4_SCALES_ROW_MAJOR = 1 /* rows x cols/16, no padding */
} nvfp4_scale_layout;

typedef struct nvfp4_tensor {
    int64_t rows;
    int64_t cols;              /* multiple of 16 */
    uint8_t *codes;            /* rows * cols / 2 bytes */
    uint8_t *scales;           /* nvfp4_scales_bytes(rows, cols, scale_layout) bytes */
    float per_tensor_scale;    /* ComfyUI's "scale_2" */
    nvfp4_nibble_order nibble_order;
    nvfp4_scale_layout scale_layout;
} nvfp4_tensor;

/*! nvfp4_scales_bytes() : @return bytes of the scale array in that layout. */
NVFP4_API size_t nvfp4_scales_bytes(int64_t rows, int64_t cols, nvfp4_scale_layout layout);

/*! nvfp4_tiled_scale_offset() :
 *  @return the byte offset of the scale of row r, block column cb in the
 *  128x4 tiled layout of a tensor with `cols` columns. */
NVFP4_API size_t nvfp4_tiled_scale_offset(int64_t r, int64_t cb, int64_t cols);

/*! nvfp4_tensor_alloc() :
 *  Allocate zeroed codes and scales for rows x cols (cols % 16 == 0),
 *  per_tensor_scale = 1.  Free with nvfp4_tensor_free(). */
NVFP4_API nvfp4_status nvfp4_tensor_alloc(nvfp4_tensor *t, int64_t rows, int64_t cols,
                                nvfp4_nibble_order order, nvfp4_scale_layout layout);

/*! nvfp4_tensor_free() : release codes and scales; t is zeroed.  NULL-safe. */
NVFP4_API void nvfp4_tensor_free(nvfp4_tensor *t);

/*! nvfp4_tensor_code() : @return the E2M1 code (0..15) of element (r, c). */
NVFP4_API uint8_t nvfp4_tensor_code(const nvfp4_tensor *t, int64_t r, int64_t c);

/*! nvfp4_tensor_scale() : @return the E4M3 byte of row r, block column cb. */
NVFP4_API uint8_t nvfp4_tensor_scale(const nvfp4_tensor *t, int64_t r, int64_t cb);

/*! nvfp4_tensor_convert() :
 *  Allocate *dst as a copy of src in another nibble order and/or scale
 *  layout (padding written as zero).  @return NVFP4_OK or an error. */
NVFP4_API nvfp4_status nvfp4_tensor_convert(nvfp4_tensor *dst, const nvfp4_tensor *src,
                                  nvfp4_nibble_order order, nvfp4_scale_layout layout);

/*! nvfp4_swap_nibbles() : swap the two nibbles of every byte (dst may equal src). */
NVFP4_API void nvfp4_swap_nibbles(uint8_t *dst, const uint8_t *src, size_t nbytes);

/*! nvfp4_scales_tile() / nvfp4_scales_untile() :
 *  Row-major (rows x cols/16) <-> 128x4 tiled.  The tiled buffer holds
 *  nvfp4_scales_bytes(rows, cols, NVFP4_SCALES_TILED) bytes; tiling zeroes
 *  its padding. */
NVFP4_API void nvfp4_scales_tile(uint8_t *tiled, const uint8_t *row_major, int64_t rows, int64_t cols);
NVFP4_API void nvfp4_scales_untile(uint8_t *row_major, const uint8_t *tiled, int64_t rows, int64_t cols);

/*-**************************************************************************
 *  Quantizer (src/quant): comfy-kitchen's quantize_nvfp4, bit for bit.
 *
 *  Per block of 16 (all FP32, round to nearest even):
 *    amax = max |x| (in x's dtype, widened)
 *    s    = min((amax / 6) / per_tensor_scale, 448);  s8 = e4m3(s)  (stored)
 *    t    = per_tensor_scale * float(s8); t == 0 -> the block's codes are +0
 *    code = e2m1(clamp(x / t, -6, 6))                      (variant EAGER)
 *  Variant CUDA is comfy-kitchen's compiled kernel instruction for instruction
 *  (FTZ multiplies, the H200's approximate reciprocal, NaN-skipping amax):
 *    s8   = e4m3_satfinite(min((amax * FP32(1/6)) * rcp(pts), 448))
 *    code = e2m1(x * min(rcp(pts * float(s8)), FLT_MAX))   (NaN -> +6)
 *  NaN/Inf rules (x86 SSE NaN propagation, made explicit): docs/FORMATS.md.
 *  per_tensor_scale, when computed: FP32(amax(|x|) / 2688) over the tensor.
 *  cols not a multiple of 16 (and rows not a multiple of 16): the input is
 *  zero-padded to multiples of 16 first, as ComfyUI's layout does
 *  (TensorCoreNVFP4Layout.get_padded_shape); the result has the padded shape.
 ****************************************************************************/
typedef enum nvfp4_variant {
    NVFP4_VARIANT_EAGER = 0, /* comfy-kitchen eager: divide by the block's scale */
    NVFP4_VARIANT_CUDA = 1   /* comfy-kitchen CUDA: multiply by its reciprocal */
} nvfp4_variant;

/*! nvfp4_per_tensor_scale() :
 *  ComfyUI's per-tensor scale of rows x cols elements of dtype (BF16, F16
 *  or F32): FP32(amax|x| / (448 * 6)).  A NaN anywhere makes it the NaN
 *  torch.amax gives: 0x7FC00000 (BF16, F32 input) or 0x7FFFFFFF (F16).
 *  @return NVFP4_OK with *out set, or an error. */
NVFP4_API nvfp4_status nvfp4_per_tensor_scale(float *out, const void *x, nvfp4_dtype dtype,
                                    int64_t rows, int64_t cols);

/*! nvfp4_quantize() :
 *  Quantize a row-major rows x cols matrix of dtype (BF16, F16 or F32) into
 *  *out (allocated here, hi-first, tiled scales, padded shape).
 *  per_tensor_scale: NULL to compute it as nvfp4_per_tensor_scale() does.
 *  Multi-threaded over rows (nthreads, 0 = all cores).
 *  @return NVFP4_OK or an error (out is left zeroed on error). */
NVFP4_API nvfp4_status nvfp4_quantize(nvfp4_tensor *out, const void *x, nvfp4_dtype dtype,
                            int64_t rows, int64_t cols, const float *per_tensor_scale,
                            nvfp4_variant variant, int nthreads);

/*! nvfp4_quantize_ref() : the same contract, written plainly, one thread.
 *  Reference for tests; slow. */
NVFP4_API nvfp4_status nvfp4_quantize_ref(nvfp4_tensor *out, const void *x, nvfp4_dtype dtype,
                                int64_t rows, int64_t cols, const float *per_tensor_scale,
                                nvfp4_variant variant);

/*! nvfp4_dequantize() :
 *  out[r * cols + c] = FP32(FP32(e2m1 * e4m3) * per_tensor_scale), the exact
 *  product of code and block scale, then one rounding for the per-tensor
 *  scale.  out holds t->rows * t->cols floats.  @return NVFP4_OK or error. */
NVFP4_API nvfp4_status nvfp4_dequantize(float *out, const nvfp4_tensor *t, int nthreads);

/*! nvfp4_check_per_tensor_scale() :
 *  The rule for a per-tensor scale a user gives (a static input scale, a
 *  quantizer's scale): finite and greater than 0.  Subnormal values (down to
 *  2^-149) are positive and finite, so they pass; the quantizer's arithmetic
 *  handles them like any other.  nvfp4_quantize() and the linear layers take
 *  any scale (ComfyUI's arithmetic: a computed scale is 0 for an all-zero
 *  input and NaN for an input holding a NaN); the nvfp4 command and the
 *  Python package check the scales users pass with this function.  `what`
 *  names the scale in the message.  @return NVFP4_OK or
 *  NVFP4_ERR_INVALID_ARGUMENT. */
NVFP4_API nvfp4_status nvfp4_check_per_tensor_scale(float scale, const char *what);

/*! Where an input's or a quantized tensor's values are not finite. */
typedef struct nvfp4_nonfinite {
    int64_t nan;        /* how many values are NaN */
    int64_t inf;        /* how many are +-Inf */
    int64_t first_row;  /* the first non-finite value in row-major order, */
    int64_t first_col;  /*   or -1, -1 when every value is finite */
    float first_value;  /* that value (NaN or +-Inf) */
} nvfp4_nonfinite;

/*! nvfp4_count_nonfinite() :
 *  Count the NaN and Inf values of a row-major rows x cols matrix of dtype
 *  (BF16, F16 or F32) into *out.  @return NVFP4_OK or an error. */
NVFP4_API nvfp4_status nvfp4_count_nonfinite(nvfp4_nonfinite *out, const void *x,
                                             nvfp4_dtype dtype, int64_t rows, int64_t cols);

/*! nvfp4_tensor_count_nonfinite() :
 *  Count, among the first rows x cols values of t, those nvfp4_dequantize()
 *  makes NaN or Inf: a block whose E4M3 scale is NaN, a per-tensor scale
 *  that is NaN or infinite (then every value: 0 * Inf is NaN), or a product
 *  too large for FP32.  What a quantizer's NaN/Inf input became.
 *  @return NVFP4_OK or an error. */
NVFP4_API nvfp4_status nvfp4_tensor_count_nonfinite(nvfp4_nonfinite *out, const nvfp4_tensor *t,
                                                    int64_t rows, int64_t cols);

/*-**************************************************************************
 *  Accumulation models (src/oracle): how the hardware adds.  docs/CONTRACT.md
 *
 *  SM90  : Hopper wgmma / mma.sync k16 step, FP16|BF16 operands, FP32 acc:
 *          16 exact products + acc aligned to the largest term exponent E,
 *          each truncated to a multiple of 2^(E-25), summed exactly, the sum
 *          truncated to FP32.  Measured on the H200 (tests/gpu/).
 *  EXACT : the exact dot product rounded once to FP32 (RNE).
 *  SM120 : RTX Blackwell / GB10 block-scaled k64 step (4 NVFP4 blocks),
 *          as published (MMA-Sim, arXiv 2511.10909); modelled, not measured.
 ****************************************************************************/
typedef enum nvfp4_model {
    NVFP4_MODEL_SM90 = 0,
    NVFP4_MODEL_EXACT = 1,
    NVFP4_MODEL_SM120 = 2
} nvfp4_model;

/*! nvfp4_model_name() : "sm90", "exact", "sm120".
 *  nvfp4_model_from_name() : @return NVFP4_OK and *out, or INVALID_ARGUMENT. */
NVFP4_API const char *nvfp4_model_name(nvfp4_model model);
NVFP4_API nvfp4_status nvfp4_model_from_name(nvfp4_model *out, const char *name);

typedef enum nvfp4_operand {
    NVFP4_OPERAND_F16 = 0,
    NVFP4_OPERAND_BF16 = 1
} nvfp4_operand;

/*! nvfp4_sm90_step() :
 *  One Hopper k16 tensor-core step d = c + sum_i a[i] * b[i] with 16-bit
 *  operands of type `type` (bit patterns) and an FP32 accumulator c.
 *  @return d, bit for bit what wgmma / mma.sync m16n8k16 return. */
NVFP4_API float nvfp4_sm90_step(float c, const uint16_t a[16], const uint16_t b[16], nvfp4_operand type);

/*! nvfp4_sm90_dot() :
 *  Chain of sm90 steps over k (k % 16 == 0), acc starting at `c`, in
 *  increasing k.  @return the final accumulator. */
NVFP4_API float nvfp4_sm90_dot(float c, const uint16_t *a, const uint16_t *b, int64_t k, nvfp4_operand type);

/*! nvfp4_exact_dot() :
 *  c + sum a[i] * b[i] computed exactly (integer arithmetic), rounded once
 *  to FP32 (RNE).  NaN/Inf follow IEEE.  @return the rounded sum. */
NVFP4_API float nvfp4_exact_dot(float c, const uint16_t *a, const uint16_t *b, int64_t k, nvfp4_operand type);

/*! nvfp4_sm120_step() :
 *  One GB10 block-scaled k64 step on four NVFP4 blocks of each operand:
 *  a_codes / b_codes hold 64 E2M1 codes (one per byte, 0..15), a_scales /
 *  b_scales the 4 E4M3 block scales.  @return the new FP32 accumulator. */
NVFP4_API float nvfp4_sm120_step(float c, const uint8_t a_codes[64], const uint8_t a_scales[4],
                       const uint8_t b_codes[64], const uint8_t b_scales[4]);

/*-**************************************************************************
 *  NVFP4 GEMM (the contract of docs/CONTRACT.md)
 *
 *  A: M x K activations, B: N x K weights, both NVFP4 (any nibble order and
 *  scale layout).  a'(m,k) = e2m1 * |e4m3| (exact in 16 bits; per-tensor
 *  scales left out); acc = 0; one model step per 16-block (SM90, EXACT over
 *  the whole row) or per 64-block group (SM120) in increasing k.
 *    raw[m*N+n] = acc                                   (FP32)
 *    alpha      = FP32_RNE(A.per_tensor_scale * B.per_tensor_scale)
 *    out[m*N+n] = BF16_RNE(FP32_RNE(alpha * acc) [+ bias[n] in FP32 RNE])
 *  K slices (k_slices > 1, below): partial chains from +0 added in order.
 *  A row's result never depends on M or on the other rows.
 ****************************************************************************/
typedef struct nvfp4_gemm_args {
    const nvfp4_tensor *a;  /* M x K */
    const nvfp4_tensor *b;  /* N x K */
    const float *bias;      /* optional: N values (BF16 biases widened exactly) */
    float *raw;             /* optional: M x N FP32 accumulators */
    uint16_t *out;          /* optional: M x N BF16 epilogue outputs */
    nvfp4_model model;
    int nthreads;           /* CPU backend: 0 = all cores */
    int k_slices;           /* K slices S (nvfp4_k_slice_elems); 0 or 1 = one chain, the default */
} nvfp4_gemm_args;

/*! K slices (docs/CONTRACT.md).  With S = k_slices > 1, K is cut into
 *  consecutive slices of whole 64-element groups: G = ceil(K/64) groups,
 *  ceil(G/S) groups per slice, the last slice shorter (trailing slices may
 *  be empty and are then absent).  Each slice is one chain of model steps
 *  from +0 in increasing k; the slice partials are added in slice order
 *  with FP32 RNE (p = p0; p = p + p1; ...); raw is that sum.  S never
 *  depends on M, so batch invariance holds for every S. */
#define NVFP4_MAX_K_SLICES 4096

/*! nvfp4_k_slice_elems() :
 *  @return the elements per K slice, 64 * ceil(ceil(K/64) / S), for K >= 0
 *  and 1 <= S <= NVFP4_MAX_K_SLICES (S <= 1 gives K rounded up to 64:
 *  one slice); slice s covers [s * len, min((s + 1) * len, K)). */
NVFP4_API int64_t nvfp4_k_slice_elems(int64_t k, int k_slices);

/*! nvfp4_gemm_alpha() : @return FP32_RNE(scale_2_a * scale_2_b). */
NVFP4_API float nvfp4_gemm_alpha(float scale_2_a, float scale_2_b);

/*! nvfp4_epilogue() : @return BF16_RNE(FP32_RNE(alpha * acc) [+ *bias]). bias may be NULL. */
NVFP4_API uint16_t nvfp4_epilogue(float acc, float alpha, const float *bias);

/*! nvfp4_gemm_ref() : the contract written plainly, one thread, through the
 *  model functions above.  The oracle.  @return NVFP4_OK or an error. */
NVFP4_API nvfp4_status nvfp4_gemm_ref(const nvfp4_gemm_args *args);

/*! nvfp4_gemm_cpu() : the fast CPU backend: pthreads, AVX-512 / AVX2 paths
 *  chosen at run time, portable C otherwise; bit-identical to
 *  nvfp4_gemm_ref() for every model.  @return NVFP4_OK or an error. */
NVFP4_API nvfp4_status nvfp4_gemm_cpu(const nvfp4_gemm_args *args);

/*! nvfp4_cpu_simd_name() : @return the SIMD path nvfp4_gemm_cpu() uses here
 *  ("avx512", "avx2" or "portable"). */
NVFP4_API const char *nvfp4_cpu_simd_name(void);


/*-**************************************************************************
 *  explain (src/explain): which contract produced another GEMM's outputs?
 *
 *  Given the operands and another implementation's results, evaluate a
 *  family of candidate contracts and report how many outputs each
 *  reproduces bit for bit (docs/EXPLAIN.md):
 *    models   sm90, sm120 (NVFP4 operands only), exact, fma (the plain FP32
 *             loop acc = fmaf(a, b, acc)), pairwise (FP32 products summed in
 *             a pairwise tree: left half = first floor(n/2));
 *    K slices 1 .. max_k_slices under the slice rules "group64" (the
 *             contract's, nvfp4_k_slice_elems), "equal" (16 * ceil(ceil(K/16)/S)),
 *             "tile128", "tile256" (that many elements per unit); each slice
 *             a chain from +0;
 *    combine  the slice partials in FP32: "order", "reversed", "pairwise".
 *  Candidates that compute the same thing are evaluated once (k_slices is
 *  then the number of non-empty slices).  Every candidate is first run on a
 *  sample of outputs; only those matching all of it are run on everything.
 ****************************************************************************/
typedef struct nvfp4_explain_args {
    const nvfp4_tensor *a, *b;      /* NVFP4 operands (every model, sm120 included), or NULL ... */
    const uint16_t *a16, *b16;      /* ... exact 16-bit operand values, row-major M x K, N x K */
    nvfp4_operand type16;           /* F16 or BF16, for a16/b16 */
    int64_t m, n, k;                /* the shape when a16/b16 are given */
    const float *ref;               /* M x N F32 results of the other implementation, or NULL and: */
    const uint16_t *ref_bf16;       /* M x N BF16 outputs, compared through the epilogue with */
    float alpha;                    /*   this alpha and */
    const float *bias;              /*   this optional bias (N) */
    int nthreads;                   /* 0 = all cores */
    int max_k_slices;               /* 0 = 32 */
    void (*progress)(void *ctx, double fraction);   /* optional */
    void *progress_ctx;
} nvfp4_explain_args;

/*! nvfp4_explain() :
 *  Evaluate the candidate family on args and write a JSON report: "outputs",
 *  "candidates" (each: "model", "k_slices", "slice_rule", "slice_elems",
 *  "combine", "matched" (a fraction), "matched_count", "evaluated",
 *  "aliases"), "best" (one candidate, with "first_mismatch" {row, col, ref,
 *  got, ref_bits, got_bits} or null), "unique" (true only when the best
 *  matches every output and no candidate with another k_slices or model
 *  does too), "ambiguous", "full_matches" and "sample_only_candidates"
 *  (candidates that matched the whole sample but were not run on every
 *  output because two kinds already matched everything).  NVFP4 operands are compared
 *  through raw (per-tensor scales left out) when ref is given.
 *  @return NVFP4_OK with *json set (NUL-terminated UTF-8; free with
 *  nvfp4_free()), or an error (*json NULL). */
NVFP4_API nvfp4_status nvfp4_explain(const nvfp4_explain_args *args, char **json);

/*! nvfp4_free() : free memory the library returned (NULL-safe). */
NVFP4_API void nvfp4_free(void *p);

/*-**************************************************************************
 *  Linear layer (src/linear): BF16 activations x NVFP4 weight -> BF16.
 *  ComfyUI's path: quantize the activations to NVFP4 with a per-tensor scale
 *  (the layer's static input_scale, or amax|x|/2688 computed: "dynamic"),
 *  then the NVFP4 GEMM above.  Rows and cols of x are padded to 16 by the
 *  quantizer; the outputs hold the first m rows.
 ****************************************************************************/
typedef struct nvfp4_linear_args {
    const void *x;             /* m x k row-major activations */
    nvfp4_dtype x_dtype;       /* BF16, F16 or F32 */
    int64_t m, k;
    const nvfp4_tensor *weight; /* N x K, K == roundup(k, 16) */
    const float *input_scale;  /* static per-tensor scale; NULL = dynamic */
    nvfp4_variant variant;     /* which ComfyUI quantizer variant */
    const float *bias;         /* optional, N */
    float *raw;                /* optional m x N */
    uint16_t *out;             /* optional m x N BF16 */
    nvfp4_model model;
    int nthreads;
    nvfp4_tensor *x_quantized; /* optional: receives the quantized activations
                                  (caller frees with nvfp4_tensor_free) */
    int k_slices;              /* as in nvfp4_gemm_args; 0 or 1 = one chain */
} nvfp4_linear_args;

/*! nvfp4_linear_cpu() : quantize x, then nvfp4_gemm_cpu.  @return status. */
NVFP4_API nvfp4_status nvfp4_linear_cpu(const nvfp4_linear_args *args);

/*-**************************************************************************
 *  Quantizer and linear layer on the H200 (src/cuda/sm90_quantize.cu,
 *  src/cuda/sm90_linear.cu).  BF16 activations only; every pointer in the
 *  argument structs is a device pointer; work is queued on `stream` (a
 *  cudaStream_t, NULL = default stream) with no host synchronisation, the
 *  dynamic per-tensor scale included.  Results are bit-identical to
 *  nvfp4_quantize() / nvfp4_linear_cpu() (model SM90).  In builds without
 *  CUDA these return NVFP4_ERR_NO_DEVICE.  docs/STREAMING_A.md.
 ****************************************************************************/
typedef struct nvfp4_cuda_quantize_args {
    const uint16_t *x;        /* m x k BF16, row-major */
    int64_t m, k;
    const float *input_scale; /* static per-tensor scale (1 float); NULL = dynamic */
    nvfp4_variant variant;
    uint8_t *codes;           /* roundup(m,16) x roundup(k,16)/2 bytes, hi-first */
    uint8_t *scales;          /* nvfp4_scales_bytes(roundup(m,16), roundup(k,16),
                                 NVFP4_SCALES_TILED) bytes, padding zeroed */
    float *per_tensor_scale;  /* receives the scale used (1 float) */
    void *stream;
} nvfp4_cuda_quantize_args;

/*! nvfp4_quantize_cuda() :
 *  nvfp4_quantize() of a device BF16 matrix, on the device: the same codes
 *  (padded shape, hi-first), tiled scales and per-tensor scale, bit for bit,
 *  both variants.  Dynamic scale: an amax pass (atomicMax on |x|'s bits,
 *  a NaN giving 0x7FC00000 as on the CPU) then FP32(amax / 2688), all on
 *  the device.
 *  @return NVFP4_OK or an error (launch errors are reported). */
NVFP4_API nvfp4_status nvfp4_quantize_cuda(const nvfp4_cuda_quantize_args *args);

typedef struct nvfp4_cuda_linear_args {
    const uint16_t *x;                        /* m x k BF16 activations, row-major */
    int64_t m, k;
    const struct nvfp4_cuda_operand *weight;  /* host struct of device pointers:
                                                 N x K, K == roundup(k, 16) */
    const float *input_scale;                 /* static per-tensor scale; NULL = dynamic */
    nvfp4_variant variant;
    const float *bias;                        /* optional, N floats */
    float *raw;                               /* optional m x N FP32 accumulators */
    uint16_t *out;                            /* optional m x N BF16 */
    uint8_t *x_codes;                         /* optional: the quantized activations, */
    uint8_t *x_scales;                        /*   as nvfp4_quantize_cuda() writes them */
    float *x_scale;                           /* optional: the per-tensor scale used */
    void *stream;
    void *workspace;                          /* nvfp4_linear_cuda_workspace() bytes, */
    size_t workspace_bytes;                   /*   256-byte aligned (cudaMalloc'ed) */
    int k_slices;                             /* as in nvfp4_gemm_args; 0 or 1 = one chain */
} nvfp4_cuda_linear_args;

/*! nvfp4_linear_cuda_workspace() :
 *  @return the device scratch bytes nvfp4_linear_cuda() needs for m rows of
 *  k activation columns against an n x roundup(k,16) weight (0 if invalid). */
NVFP4_API size_t nvfp4_linear_cuda_workspace(int64_t m, int64_t n, int64_t k);

/*! nvfp4_linear_cuda() :
 *  ComfyUI's NVFP4 linear on the H200, nvfp4_linear_cpu() bit for bit (raw
 *  and out; model SM90).  A producer kernel ahead of the GEMM (no separate
 *  quantize pass and no GEMM pre-pass) reads BF16 blocks of 16, rounds the
 *  E4M3 block scale and the E2M1 codes exactly as nvfp4_quantize() does and
 *  writes the exact 16-bit operands e2m1 * |e4m3| into the GEMM's activation
 *  workspace, which the tensor-core kernel then consumes; the NVFP4
 *  activations go to memory only when x_codes / x_scales ask for them.
 *  On an sm_120 / sm_121 GPU (model SM120): the same quantizer kernels
 *  write NVFP4 codes and tiled scales into the workspace, and the GEMM,
 *  launched as their programmatic dependent, reads them as it reads stored
 *  activations (docs/SM120.md).
 *  @return NVFP4_OK or an error. */
NVFP4_API nvfp4_status nvfp4_linear_cuda(const nvfp4_cuda_linear_args *args);

/*! nvfp4_linear_cuda_host() :
 *  Convenience for host data, taking the same arguments as
 *  nvfp4_linear_cpu() (x_dtype must be BF16, the model the device's, as
 *  nvfp4_cuda_model() names it): copies
 *  x, the weight (converted to hi-first + tiled if needed), scales and bias
 *  to the device, runs nvfp4_linear_cuda(), copies raw/out (and, when
 *  args->x_quantized is set, the quantized activations exactly as
 *  nvfp4_quantize() returns them) back and frees everything.  One launch;
 *  `nvfp4 bench` times the kernels.
 *  Synchronous.  @return NVFP4_OK, NVFP4_ERR_NO_DEVICE, or an error. */
NVFP4_API nvfp4_status nvfp4_linear_cuda_host(const nvfp4_linear_args *args);

/*-**************************************************************************
 *  CUDA backend (src/cuda).  Device pointers, caller's stream.  Two kernel
 *  families, chosen by the current device: sm_90a (H100, H200; model SM90)
 *  and sm_120a / sm_121a (RTX Blackwell, GB10; model SM120, docs/SM120.md).
 *  Built only when nvcc is found; otherwise these return NVFP4_ERR_NO_DEVICE.
 ****************************************************************************/

/*! nvfp4_cuda_available() : @return 1 if the current CUDA device is one this
 *  build has kernels for (compute capability 9.0, or 12.x when built with
 *  sm_120a / sm_121a), else 0 (never fails). */
NVFP4_API int nvfp4_cuda_available(void);

/*! nvfp4_cuda_model() :
 *  The accumulation model the CUDA backend computes on the current device:
 *  NVFP4_MODEL_SM90 on sm_90, NVFP4_MODEL_SM120 on sm_120 / sm_121.
 *  @return NVFP4_OK with *out set, or NVFP4_ERR_NO_DEVICE. */
NVFP4_API nvfp4_status nvfp4_cuda_model(nvfp4_model *out);

/*! nvfp4_cuda_device_name() : writes the device name and "SMxy" into the
 *  buffers (may be NULL).  @return NVFP4_OK or NVFP4_ERR_NO_DEVICE. */
NVFP4_API nvfp4_status nvfp4_cuda_device_name(char *name, size_t name_len, char *cc, size_t cc_len);

/*! An NVFP4 operand in device memory, as a ComfyUI checkpoint stores it:
 *  codes hi-first (rows x cols/2 bytes), scales in the 128x4 tiled layout,
 *  per_tensor_scale a pointer to one device float (read on the device). */
typedef struct nvfp4_cuda_operand {
    const uint8_t *codes;
    const uint8_t *scales;
    const float *per_tensor_scale;
    int64_t rows;
    int64_t cols;
} nvfp4_cuda_operand;

typedef struct nvfp4_cuda_gemm_args {
    nvfp4_cuda_operand a; /* M x K activations */
    nvfp4_cuda_operand b; /* N x K weights */
    const float *bias;    /* optional device pointer, N floats */
    float *raw;           /* optional device M x N FP32 */
    uint16_t *out;        /* optional device M x N BF16 */
    void *stream;         /* cudaStream_t; NULL = default stream */
    void *workspace;      /* device scratch, nvfp4_cuda_gemm_workspace() bytes */
    size_t workspace_bytes;
    int k_slices;         /* as in nvfp4_gemm_args; 0 or 1 = one chain */
} nvfp4_cuda_gemm_args;

/*! nvfp4_cuda_gemm_workspace() : @return device scratch bytes a GEMM of this
 *  shape needs: the dequantized 16-bit activations and, for M > 64, the
 *  stream-K hand-off (a tile's FP32 accumulators and a counter per CTA).
 *  One GEMM at a time per workspace (stream-ordered reuse is fine).  (The
 *  sm_120 kernel needs none: any workspace, NULL included, is accepted.) */
NVFP4_API size_t nvfp4_cuda_gemm_workspace(int64_t m, int64_t n, int64_t k);

/*! nvfp4_gemm_cuda() : the current device's kernel.  Same results as
 *  nvfp4_gemm_ref() with the model nvfp4_cuda_model() names (SM90 on an
 *  H100 / H200, SM120 on an sm_120 / sm_121 GPU), bit for bit.
 *  Asynchronous on args->stream.  On sm_120 / sm_121, K needs only be a
 *  multiple of 16 and N any size.
 *  @return NVFP4_OK or an error (launch errors are reported). */
NVFP4_API nvfp4_status nvfp4_gemm_cuda(const nvfp4_cuda_gemm_args *args);

/*! nvfp4_gemm_cuda_host() :
 *  Convenience for host data: copies A, B (converted to hi-first + tiled if
 *  needed), the per-tensor scales and bias to the device, runs
 *  nvfp4_gemm_cuda() (args->model must be the device's, nvfp4_cuda_model()),
 *  copies raw/out back, frees everything.  One launch; `nvfp4 bench` times
 *  the kernels.  Synchronous.
 *  @return NVFP4_OK, NVFP4_ERR_NO_DEVICE, or an error. */
NVFP4_API nvfp4_status nvfp4_gemm_cuda_host(const nvfp4_gemm_args *args);

/*-**************************************************************************
 *  safetensors (src/io): mmap'ed reader, atomic writer.
 ****************************************************************************/
#define NVFP4_ST_MAX_DIMS 8

typedef struct nvfp4_st_tensor {
    const char *name;
    nvfp4_dtype dtype;
    int ndim;
    int64_t shape[NVFP4_ST_MAX_DIMS];
    const void *data; /* points into the mapping; valid until close */
    size_t nbytes;
} nvfp4_st_tensor;

typedef struct nvfp4_st_file nvfp4_st_file;

/*! nvfp4_st_open() :
 *  Map and validate a safetensors file: header length, JSON, dtypes,
 *  shapes x dtype == byte ranges, ranges inside the data and not
 *  overlapping, unique names, sane sizes.  Errors name the file and tensor.
 *  @return NVFP4_OK with *out set, or an error (*out NULL). */
NVFP4_API nvfp4_status nvfp4_st_open(nvfp4_st_file **out, const char *path);

/*! nvfp4_st_open_memory() : the same over a caller's buffer (kept, not
 *  copied; it must outlive the handle).  `label` names it in errors. */
NVFP4_API nvfp4_status nvfp4_st_open_memory(nvfp4_st_file **out, const void *bytes, size_t nbytes,
                                  const char *label);

/*! nvfp4_st_close() : unmap and free.  NULL-safe. */
NVFP4_API void nvfp4_st_close(nvfp4_st_file *f);

/*! nvfp4_st_count() : @return number of tensors (in file order of offsets). */
NVFP4_API size_t nvfp4_st_count(const nvfp4_st_file *f);

/*! nvfp4_st_get() : @return the i-th tensor (i < count). */
NVFP4_API const nvfp4_st_tensor *nvfp4_st_get(const nvfp4_st_file *f, size_t i);

/*! nvfp4_st_find() : @return the tensor named `name`, or NULL. */
NVFP4_API const nvfp4_st_tensor *nvfp4_st_find(const nvfp4_st_file *f, const char *name);

/*! nvfp4_st_metadata_count() / nvfp4_st_metadata() :
 *  the "__metadata__" string map, in file order. */
NVFP4_API size_t nvfp4_st_metadata_count(const nvfp4_st_file *f);
NVFP4_API void nvfp4_st_metadata(const nvfp4_st_file *f, size_t i, const char **key, const char **value);

/*! nvfp4_st_path() : @return the path or label the file was opened with. */
NVFP4_API const char *nvfp4_st_path(const nvfp4_st_file *f);

typedef struct nvfp4_st_writer nvfp4_st_writer;

/*! nvfp4_st_writer_new() : @return NVFP4_OK with an empty writer. */
NVFP4_API nvfp4_status nvfp4_st_writer_new(nvfp4_st_writer **out);

/*! nvfp4_st_writer_add() :
 *  Queue a tensor.  `data` is borrowed (not copied) and must stay valid
 *  until nvfp4_st_writer_write() returns.  Names must be unique.
 *  @return NVFP4_OK or an error. */
NVFP4_API nvfp4_status nvfp4_st_writer_add(nvfp4_st_writer *w, const char *name, nvfp4_dtype dtype,
                                 int ndim, const int64_t *shape, const void *data, size_t nbytes);

/*! nvfp4_st_writer_add_copy() : as _add, but copies the bytes. */
NVFP4_API nvfp4_status nvfp4_st_writer_add_copy(nvfp4_st_writer *w, const char *name, nvfp4_dtype dtype,
                                      int ndim, const int64_t *shape, const void *data,
                                      size_t nbytes);

/*! nvfp4_st_writer_set_metadata() : one "__metadata__" entry (copied). */
NVFP4_API nvfp4_status nvfp4_st_writer_set_metadata(nvfp4_st_writer *w, const char *key, const char *value);

/*! nvfp4_st_writer_write() :
 *  Write everything to `path` through a temporary file in the same
 *  directory, fsync'ed and renamed into place: `path` never holds a partial
 *  file.  The library installs no signal handler: a process killed during
 *  the write leaves the temporary file ".NAME.tmp-XXXXXX" beside `path`
 *  (the nvfp4 command removes it on SIGINT, SIGTERM, SIGHUP and SIGQUIT).
 *  progress (optional) is called with bytes written so far and the total.
 *  @return NVFP4_OK or an error. */
NVFP4_API nvfp4_status nvfp4_st_writer_write(nvfp4_st_writer *w, const char *path,
                                   void (*progress)(void *ctx, uint64_t done, uint64_t total),
                                   void *progress_ctx);

/*! nvfp4_st_writer_free() : NULL-safe. */
NVFP4_API void nvfp4_st_writer_free(nvfp4_st_writer *w);

/*-**************************************************************************
 *  ComfyUI NVFP4 layers in safetensors (src/io/layer.c)
 *  NAME (U8 [rows, cols/2], hi-first), NAME_scale (F8_E4M3, tiled,
 *  [roundup(rows,128), roundup(cols/16,4)]), NAME_scale_2 (F32 scalar).
 ****************************************************************************/

/*! nvfp4_st_load_nvfp4() :
 *  Copy the NVFP4 tensor stored under NAME into *out (hi-first, tiled), with
 *  the logical rows the file records (NVFP4_ST_ROWS_KEY_PREFIX, below), else
 *  the stored rows.
 *  @return NVFP4_OK, NVFP4_ERR_NOT_FOUND, or NVFP4_ERR_MALFORMED when the
 *  three tensors disagree in shape or dtype. */
NVFP4_API nvfp4_status nvfp4_st_load_nvfp4(nvfp4_tensor *out, const nvfp4_st_file *f, const char *name);

/*! Logical rows.  nvfp4_quantize() pads rows to a multiple of 16, as
 *  ComfyUI's layout does, and ComfyUI checkpoints store those padded rows.
 *  A file can record the rows a tensor had before padding in its metadata,
 *  "nvfp4.rows.NAME": "<rows in decimal>" (ComfyUI ignores the entry; the
 *  tensors' bytes stay ComfyUI's).  nvfp4_st_load_nvfp4() and the
 *  checkpoint loaders (nvfp4_ckpt_rows) then return a tensor of that many
 *  rows -- the rule everywhere: the tiled scale layout
 *  pads, a tensor's rows do not.  Columns stay padded to 16: they are the
 *  GEMM's K, and activations of k columns go with a weight of K ==
 *  roundup(k, 16) (nvfp4_linear_args). */
#define NVFP4_ST_ROWS_KEY_PREFIX "nvfp4.rows."

/*! nvfp4_st_writer_set_rows() :
 *  Record that the NVFP4 tensor NAME (stored with rows padded to a multiple
 *  of 16) holds `rows` logical rows.  @return NVFP4_OK or an error. */
NVFP4_API nvfp4_status nvfp4_st_writer_set_rows(nvfp4_st_writer *w, const char *name, int64_t rows);

/*! nvfp4_st_add_nvfp4() :
 *  Queue NAME, NAME_scale, NAME_scale_2 for t (must be hi-first, tiled; its
 *  arrays are borrowed until the write).  The tensor only: for a layer that
 *  ComfyUI loads, nvfp4_st_add_nvfp4_layer() adds its marker too.
 *  @return NVFP4_OK or an error. */
NVFP4_API nvfp4_status nvfp4_st_add_nvfp4(nvfp4_st_writer *w, const char *name, const nvfp4_tensor *t);

/*! nvfp4_st_is_nvfp4() :
 *  @return 1 if NAME is stored as an NVFP4 tensor (NAME is U8 and
 *  NAME_scale_2 exists; nvfp4_st_load_nvfp4() checks the rest), else 0. */
NVFP4_API int nvfp4_st_is_nvfp4(const nvfp4_st_file *f, const char *name);

/*! nvfp4_st_marker_name() :
 *  For "LAYER.weight", writes ComfyUI's layer marker name "LAYER.comfy_quant"
 *  into buf.  @return 1, or 0 when the name does not end in ".weight" or
 *  buf is too short. */
NVFP4_API int nvfp4_st_marker_name(char *buf, size_t len, const char *weight_name);

/*! nvfp4_st_is_nvfp4_marker() :
 *  @return 1 if NAME is ComfyUI's NVFP4 layer marker (a U8 1-D tensor whose
 *  bytes are a JSON object with "format": "nvfp4"), else 0 -- a tensor that
 *  only bears the name is user data. */
NVFP4_API int nvfp4_st_is_nvfp4_marker(const nvfp4_st_file *f, const char *name);

/*! nvfp4_st_add_nvfp4_layer() :
 *  Queue a whole ComfyUI NVFP4 layer: LAYER.weight, LAYER.weight_scale,
 *  LAYER.weight_scale_2 (as nvfp4_st_add_nvfp4) and the marker
 *  LAYER.comfy_quant (U8, the JSON {"format": "nvfp4"}) ComfyUI looks for.
 *  All or nothing.  @return NVFP4_OK or an error. */
NVFP4_API nvfp4_status nvfp4_st_add_nvfp4_layer(nvfp4_st_writer *w, const char *layer,
                                                const nvfp4_tensor *t);

/*! A ComfyUI NVFP4 linear layer as loaded from a checkpoint. */
typedef struct nvfp4_layer {
    nvfp4_tensor weight;  /* LAYER.weight: N x K, hi-first, tiled */
    float input_scale;    /* LAYER.input_scale, when has_input_scale */
    int has_input_scale;
    float *bias;          /* LAYER.bias widened to FP32 and zero-padded to N, or NULL */
} nvfp4_layer;

/*! nvfp4_st_load_layer() :
 *  Load LAYER.weight (nvfp4_st_load_nvfp4), the optional LAYER.input_scale
 *  (one F32) and the optional LAYER.bias (1-D F32/F16/BF16 of at most N
 *  values; ComfyUI pads N to 16, so shorter biases are zero-extended).
 *  Free with nvfp4_layer_free().  @return NVFP4_OK, NVFP4_ERR_NOT_FOUND, or
 *  NVFP4_ERR_MALFORMED (the message names the tensor); *out zeroed on error. */
NVFP4_API nvfp4_status nvfp4_st_load_layer(nvfp4_layer *out, const nvfp4_st_file *f,
                                           const char *layer);

/*! nvfp4_layer_free() : release the weight and bias; l is zeroed.  NULL-safe. */
NVFP4_API void nvfp4_layer_free(nvfp4_layer *l);

/*-**************************************************************************
 *  Checkpoint formats (src/io/formats.c, ckpt.c, gguf.c, convert.c;
 *  src/quant/quantize_tools*.c).  docs/FORMATS.md, "Checkpoint formats".
 *
 *  The same NVFP4 numbers are stored four ways: ComfyUI, NVIDIA ModelOpt
 *  (hf_quant_config.json, what vLLM / SGLang / TensorRT-LLM load as
 *  modelopt_fp4), compressed-tensors (llm-compressor's nvfp4-pack-quantized)
 *  and llama.cpp's GGUF type NVFP4 (40).  They differ in nibble order, scale
 *  layout, scale encoding, the direction of the per-tensor scale and the
 *  names of the tensors; nvfp4_format_traits() is the one table of those
 *  conventions that the readers, writers and `nvfp4 inspect` use.
 *
 *  Names.  An NVFP4 tensor is named by its weight name W ("L.weight", or a
 *  bare "x") whatever the format; the format's traits give the names of
 *  the stored pieces: codes W + codes_suffix, block scales W + scale_suffix,
 *  the per-tensor scale W + tensor_scale_suffix (GGUF: L + ".scale"), the
 *  layer's input scale L + input_scale_suffix.
 ****************************************************************************/
typedef enum nvfp4_format {
    NVFP4_FORMAT_UNKNOWN = 0,
    NVFP4_FORMAT_COMFYUI = 1,            /* comfy_quant layers, comfy-kitchen */
    NVFP4_FORMAT_MODELOPT = 2,           /* NVIDIA ModelOpt export */
    NVFP4_FORMAT_COMPRESSED_TENSORS = 3, /* compressed-tensors nvfp4-pack-quantized */
    NVFP4_FORMAT_GGUF = 4,               /* llama.cpp GGUF, ggml type NVFP4 */
    NVFP4_FORMAT_COUNT_
} nvfp4_format;

typedef enum nvfp4_code_packing {
    NVFP4_PACK_HI_FIRST = 0,    /* byte i: element 2i in the high nibble */
    NVFP4_PACK_LO_FIRST = 1,    /* byte i: element 2i in the low nibble */
    NVFP4_PACK_GGML_HALVES = 2  /* per 16 elements, byte j: element j low, j + 8 high */
} nvfp4_code_packing;

typedef enum nvfp4_scale_store {
    NVFP4_STORE_TILED = 0,       /* cuBLAS 128x4 tiles, zero-padded (nvfp4_tiled_scale_offset) */
    NVFP4_STORE_ROW_MAJOR = 1,   /* [rows, ceil(cols/16)] */
    NVFP4_STORE_GGML_BLOCKS = 2  /* 36-byte blocks of 64 elements: 4 scale bytes, 32 code bytes */
} nvfp4_scale_store;

typedef enum nvfp4_scale_code {
    NVFP4_SCALE_E4M3 = 0,  /* float8_e4m3fn: a sign bit; 0x7F and 0xFF are NaN */
    NVFP4_SCALE_UE4M3 = 1  /* ggml: bit 7 ignored, 0x00 and 0x7F mean 0, 0xFF means 480 */
} nvfp4_scale_code;

typedef enum nvfp4_scale_direction {
    NVFP4_SCALE_MULTIPLIES = 0, /* value = e2m1 * scale * s   (weight_scale_2, input_scale) */
    NVFP4_SCALE_DIVIDES = 1     /* value = e2m1 * scale / g   (weight_global_scale) */
} nvfp4_scale_direction;

typedef struct nvfp4_format_traits {
    nvfp4_format format;
    const char *name;                /* "comfyui", "modelopt", "compressed-tensors", "gguf" */
    const char *container;           /* "safetensors" or "gguf" */
    const char *codes_suffix;        /* after W: "" or "_packed" */
    const char *scale_suffix;        /* after W: "_scale"; NULL (GGUF: inside the blocks) */
    const char *tensor_scale_suffix; /* after W: "_scale_2", "_global_scale"; GGUF: NULL (L.scale) */
    const char *input_scale_suffix;  /* after L: ".input_scale", ".input_global_scale" */
    nvfp4_code_packing packing;
    nvfp4_scale_store scale_store;
    nvfp4_scale_code scale_code;
    nvfp4_scale_direction tensor_scale_direction; /* and the input scale's */
    int tensor_scale_optional;       /* 1: absent means 1 (GGUF) */
    int tensor_scale_ndim;           /* the shape its tool writes: 0 ([]) or 1 ([1]) */
    int64_t col_multiple;            /* columns the format stores a multiple of */
    const char *zero_nan;            /* what its quantizer does with zero and NaN blocks */
    const char *padding;             /* what it pads, and with what */
    const char *rounding;            /* its quantizer's arithmetic */
} nvfp4_format_traits;

/*! nvfp4_format_traits_of() : @return the conventions of a format (NULL for
 *  UNKNOWN or out of range). */
NVFP4_API const nvfp4_format_traits *nvfp4_format_traits_of(nvfp4_format format);

/*! nvfp4_format_from_name() : "comfyui", "modelopt", "compressed-tensors",
 *  "gguf".  @return NVFP4_OK and *out, or NVFP4_ERR_INVALID_ARGUMENT. */
NVFP4_API nvfp4_status nvfp4_format_from_name(nvfp4_format *out, const char *name);

/*! An NVFP4 tensor as one format stores it.  t holds the codes and block
 *  scales byte for byte where nvfp4_tensor can (ComfyUI: hi-first + tiled,
 *  tile padding included; ModelOpt and compressed-tensors: lo-first +
 *  row-major; GGUF: the codes repacked lo-first, the UE4M3 scale bytes
 *  row-major as stored), and t.per_tensor_scale the multiplier the GEMM
 *  uses (compressed-tensors: FP32(1 / g), rounded).  tensor_scale is the
 *  per-tensor scale exactly as stored, in the format's direction. */
typedef struct nvfp4_ckpt_tensor {
    nvfp4_tensor t;
    nvfp4_format format;
    int64_t stored_cols;       /* the columns the file holds (compressed-tensors
                                  may hold fewer than t.cols, a multiple of 16) */
    float tensor_scale;        /* as stored (see has_tensor_scale) */
    int has_tensor_scale;      /* 0: absent (GGUF without L.scale: 1) */
    int tensor_scale_ndim;     /* 0: shape [], 1: [1] */
    float input_scale;         /* the layer's input scale as stored, when has_input_scale */
    int has_input_scale;
    int input_scale_ndim;
} nvfp4_ckpt_tensor;

/*! nvfp4_ckpt_tensor_free() : release t's arrays; zeroes the struct.  NULL-safe. */
NVFP4_API void nvfp4_ckpt_tensor_free(nvfp4_ckpt_tensor *ct);

/*! nvfp4_ckpt_tensor_values() :
 *  The numbers ct stores, as the library computes with them: *out gets
 *  hi-first codes, tiled E4M3 scales (GGUF's UE4M3 bytes made E4M3: 0x7F
 *  becomes 0x00, bit 7 is dropped) and the per-tensor multiplier.
 *  @return NVFP4_OK, or NVFP4_ERR_UNSUPPORTED for a GGUF scale byte 0xFF
 *  (480: no E4M3 value). */
NVFP4_API nvfp4_status nvfp4_ckpt_tensor_values(nvfp4_tensor *out, const nvfp4_ckpt_tensor *ct);

/*! A checkpoint: one safetensors file, a directory (model.safetensors, or
 *  shards listed by model.safetensors.index.json, with config.json /
 *  hf_quant_config.json beside them), or a GGUF file.  Files are mapped,
 *  not read: tensors are read one at a time. */
typedef struct nvfp4_ckpt nvfp4_ckpt;

/*! nvfp4_ckpt_open() :
 *  Open and detect the format (assume: NVFP4_FORMAT_UNKNOWN to detect it,
 *  else that format is taken as given).  Detection: a GGUF file is GGUF;
 *  tensors named *_packed with *_global_scale are compressed-tensors;
 *  config.json's quantization_config.quant_method or hf_quant_config.json
 *  beside the file name the producer; a ComfyUI comfy_quant marker, or a
 *  scale tensor in the tiled shape that the row-major shape cannot be,
 *  makes ComfyUI; a W.weight without a marker makes ModelOpt.
 *  @return NVFP4_OK with *out, or an error (the message names the path). */
NVFP4_API nvfp4_status nvfp4_ckpt_open(nvfp4_ckpt **out, const char *path, nvfp4_format assume);

/*! nvfp4_ckpt_close() : NULL-safe. */
NVFP4_API void nvfp4_ckpt_close(nvfp4_ckpt *c);

/*! nvfp4_ckpt_format() / nvfp4_ckpt_evidence() : the format and a one-line
 *  account of what decided it ("hf_quant_config.json: producer modelopt,
 *  quant_algo NVFP4", ...). */
NVFP4_API nvfp4_format nvfp4_ckpt_format(const nvfp4_ckpt *c);
NVFP4_API const char *nvfp4_ckpt_evidence(const nvfp4_ckpt *c);

/*! nvfp4_ckpt_count() / nvfp4_ckpt_name() : the NVFP4 tensors found, by
 *  weight name W, in file order (shards in index order). */
NVFP4_API size_t nvfp4_ckpt_count(const nvfp4_ckpt *c);
NVFP4_API const char *nvfp4_ckpt_name(const nvfp4_ckpt *c, size_t i);

/*! Every tensor of a checkpoint (NVFP4 pieces and all), in file order. */
typedef struct nvfp4_ckpt_entry {
    const char *name;
    const char *file;     /* the shard's file name (GGUF: the file) */
    const char *type;     /* "BF16", "U8", ... or a ggml type name ("NVFP4", "Q4_K") */
    nvfp4_dtype dtype;    /* NVFP4_DTYPE_INVALID for ggml types safetensors lacks */
    int ndim;
    int64_t shape[NVFP4_ST_MAX_DIMS]; /* outermost first (GGUF's ne reversed) */
    const void *data;     /* in the mapping; valid until close */
    size_t nbytes;
} nvfp4_ckpt_entry;

/*! nvfp4_ckpt_entries() / nvfp4_ckpt_entry_at() : the tensors; _at fills
 *  *out for i < entries.  @return NVFP4_OK or NVFP4_ERR_INVALID_ARGUMENT. */
NVFP4_API size_t nvfp4_ckpt_entries(const nvfp4_ckpt *c);
NVFP4_API nvfp4_status nvfp4_ckpt_entry_at(const nvfp4_ckpt *c, size_t i, nvfp4_ckpt_entry *out);

/*! nvfp4_ckpt_metadata_count() / nvfp4_ckpt_metadata() : the string
 *  metadata (safetensors __metadata__ of every shard, GGUF's string
 *  key-value pairs), in file order. */
NVFP4_API size_t nvfp4_ckpt_metadata_count(const nvfp4_ckpt *c);
NVFP4_API void nvfp4_ckpt_metadata(const nvfp4_ckpt *c, size_t i, const char **key, const char **value);

/*! nvfp4_ckpt_dims() : the rows and the stored columns of NVFP4 tensor W,
 *  from the headers alone (nothing is read).  @return NVFP4_OK or
 *  NVFP4_ERR_NOT_FOUND. */
NVFP4_API nvfp4_status nvfp4_ckpt_dims(const nvfp4_ckpt *c, const char *w, int64_t *rows,
                                       int64_t *cols);

/*! nvfp4_ckpt_rows() : the logical rows of NVFP4 tensor W: those the
 *  checkpoint's metadata records (NVFP4_ST_ROWS_KEY_PREFIX W, written for
 *  a tensor whose rows were padded to 16; carried by nvfp4_convert()), else
 *  the stored rows.  @return NVFP4_OK, NVFP4_ERR_NOT_FOUND, or
 *  NVFP4_ERR_MALFORMED for a record that padding could not have come from. */
NVFP4_API nvfp4_status nvfp4_ckpt_rows(const nvfp4_ckpt *c, const char *w, int64_t *rows);

/*! nvfp4_ckpt_read() :
 *  Read the NVFP4 tensor W exactly as stored (nvfp4_ckpt_tensor), with
 *  every shape, dtype and size checked.  @return NVFP4_OK,
 *  NVFP4_ERR_NOT_FOUND (the message names the missing piece) or
 *  NVFP4_ERR_MALFORMED.  *out is zeroed on error. */
NVFP4_API nvfp4_status nvfp4_ckpt_read(nvfp4_ckpt_tensor *out, const nvfp4_ckpt *c, const char *w);

/*! nvfp4_ckpt_load_layer() :
 *  The linear layer L of any format as nvfp4_st_load_layer() returns a
 *  ComfyUI one: weight L.weight's values hi-first + tiled with its
 *  per-tensor multiplier and logical rows (nvfp4_ckpt_rows), the input scale as a multiplier (compressed-
 *  tensors: FP32(1 / input_global_scale)), the bias widened to FP32 and
 *  zero-padded to N.  Free with nvfp4_layer_free(). */
NVFP4_API nvfp4_status nvfp4_ckpt_load_layer(nvfp4_layer *out, const nvfp4_ckpt *c, const char *layer);

/*! nvfp4_load_layer() : open path, load layer L, close.  The one loader the
 *  CLI and the Python package use for every format. */
NVFP4_API nvfp4_status nvfp4_load_layer(nvfp4_layer *out, const char *path, const char *layer);

/*! nvfp4_load_tensor() : open path, read the NVFP4 tensor W and return its
 *  values (nvfp4_ckpt_tensor_values) with its logical rows
 *  (nvfp4_ckpt_rows), close. */
NVFP4_API nvfp4_status nvfp4_load_tensor(nvfp4_tensor *out, const char *path, const char *w);

/*! nvfp4_detect_format() : open path, report the format and its evidence
 *  (copied into why, may be NULL), close.  @return NVFP4_OK or an error. */
NVFP4_API nvfp4_status nvfp4_detect_format(nvfp4_format *out, const char *path, char *why,
                                           size_t why_len);

/*! Conversion between formats (nvfp4_convert).  Exact, or refused: codes
 *  and scale bytes are moved, never requantized, and every per-tensor and
 *  input scale keeps its FP32 bits.  Where the target cannot hold a value
 *  exactly (a multiplier whose reciprocal is not an FP32 number, for a
 *  format that divides; a GGUF scale byte 0xFF; E4M3 NaN or negative
 *  scales for GGUF; columns GGUF's 64-element blocks cannot hold) the
 *  conversion stops before writing anything and says why, unless
 *  allow_rescale is set: then the value is rounded (the reciprocal to
 *  nearest FP32, as compressed-tensors' own ModelOpt converter does; the
 *  scale byte to the nearest one the target has) and a note says what
 *  changed.  A rounded per-tensor scale records the source's bits in the
 *  output's metadata ("nvfp4.source_scale.NAME"), and converting back
 *  restores them, so round trips are exact. */
typedef struct nvfp4_convert_options {
    nvfp4_format to;
    nvfp4_format from;       /* NVFP4_FORMAT_UNKNOWN: detect */
    int allow_rescale;
    /* one line per tensor as it is written ("[3/40] L.weight ..."), and the
     * notes: what was rounded, padded or dropped.  Both optional. */
    void (*progress)(void *ctx, const char *line);
    void (*note)(void *ctx, const char *line);
    void *ctx;
} nvfp4_convert_options;

/*! nvfp4_convert() :
 *  Convert the checkpoint at in to format opt->to at out: a *.gguf path is
 *  one GGUF file, a *.safetensors path one safetensors file, anything else
 *  a directory (created; one shard per input shard, with
 *  model.safetensors.index.json, config.json's quantization_config and,
 *  for ModelOpt, hf_quant_config.json rewritten for the target; other small
 *  files copied).  Tensors are streamed one at a time (never the whole
 *  model in memory); each file is written atomically.  NVFP4 tensors are
 *  converted, ComfyUI markers added or dropped, every other tensor copied.
 *  @return NVFP4_OK, NVFP4_ERR_UNSUPPORTED (the first value the target
 *  cannot hold, and why), or another error. */
NVFP4_API nvfp4_status nvfp4_convert(const char *in, const char *out,
                                     const nvfp4_convert_options *opt);

/*! nvfp4_st_add_format() :
 *  Queue ct in its format's tensors on a safetensors writer (codes, block
 *  scales, per-tensor scale, the input scale when ct has one; ComfyUI: the
 *  marker too when W ends in ".weight").  ct's arrays are borrowed until
 *  the write.  GGUF tensors go through nvfp4_convert().  All or nothing.
 *  @return NVFP4_OK or an error. */
NVFP4_API nvfp4_status nvfp4_st_add_format(nvfp4_st_writer *w, const char *weight_name,
                                           const nvfp4_ckpt_tensor *ct);

/*! nvfp4_quantize_format() / nvfp4_quantize_format_ref() :
 *  The quantizer of a format's own tool, bit for bit (docs/FORMATS.md):
 *    MODELOPT            NVFP4QTensor.quantize (nvidia-modelopt 0.47)
 *    COMPRESSED_TENSORS  llm-compressor's min-max observer + calculate_qparams
 *                        + NVFP4PackedCompressor (compressed-tensors 0.20, CPU)
 *    COMFYUI             nvfp4_quantize(), variant EAGER
 *  x: rows x cols row-major BF16, F16 or F32; the arithmetic follows x's
 *  dtype as torch does.  tensor_scale: the per-tensor scale as the format
 *  stores it (weight_scale_2, weight_global_scale), NULL to compute it the
 *  tool's way.  The result is in the format's layout (ModelOpt pads cols
 *  to 16; compressed-tensors needs cols % 16 == 0).  GGUF has no quantizer
 *  here (NVFP4_ERR_UNSUPPORTED).  The _ref form is the plain one the fast,
 *  threaded one is tested against.  @return NVFP4_OK or an error. */
NVFP4_API nvfp4_status nvfp4_quantize_format(nvfp4_ckpt_tensor *out, const void *x,
                                             nvfp4_dtype dtype, int64_t rows, int64_t cols,
                                             nvfp4_format format, const float *tensor_scale,
                                             int nthreads);
NVFP4_API nvfp4_status nvfp4_quantize_format_ref(nvfp4_ckpt_tensor *out, const void *x,
                                                 nvfp4_dtype dtype, int64_t rows, int64_t cols,
                                                 nvfp4_format format, const float *tensor_scale);

#ifdef __cplusplus
}
#endif
#endif /* NVFP4_H */
