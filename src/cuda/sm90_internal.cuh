/* sm90_internal.cuh -- declarations shared by the CUDA sources. */
#ifndef NVFP4_CUDA_SM90_INTERNAL_CUH
#define NVFP4_CUDA_SM90_INTERNAL_CUH

#include <cuda.h>
#include <stdint.h>

#include "cuda/ptx.cuh"

/* Kernel parameters (passed by value; the tensor maps must live in
 * parameter space, hence __grid_constant__). */
typedef struct nvfp4_sm90_params {
    CUtensorMap tmap_act;   /* FP16 activations [M][K], box {64, bn}, 128B swizzle */
    CUtensorMap tmap_codes; /* weight codes [N][K/2] bytes, box {32, 64*nc} */
    const uint8_t *b_scales;  /* weight scales, 128x4 tiled */
    const float *a_scale2;    /* device per-tensor scales */
    const float *b_scale2;
    const float *bias;
    float *raw;
    uint16_t *out;
    int m, n, k;
    int ncb;       /* 512-byte scale chunks per 128-row tile = roundup(K/16,4)/4 */
    int num_at;    /* activation tiles */
    int stages;
    int chunks_per_slice; /* K slices: 64-element chunks per slice (>= num chunks: one chain) */
    int64_t num_tiles;
} nvfp4_sm90_params;

/* BF16 round to nearest even, NaN kept quiet with its sign (the same bits as
 * nvfp4_bf16_from_f32). */
static __device__ __forceinline__ uint16_t nvfp4_dev_bf16_rne(float v)
{
    uint32_t b = __float_as_uint(v);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((b >> 16) | 0x0040u);
    b += 0x7FFFu + ((b >> 16) & 1u);
    return (uint16_t)(b >> 16);
}

/* Dequantize one 64-element chunk (4 NVFP4 blocks) of weight rows r0 and
 * r0 + 8 from a pipeline stage into m64k16 A fragments: afrag[kb] are the
 * four f16x2 registers of block kb (rows r0/r0+8, columns 2t,2t+1 and
 * 2t+8,2t+9, t = lane % 4).  codes: the chunk's first code byte of tile row
 * 0 (rows row_bytes apart); scales: the chunk's 512-byte scale tile;
 * sc_off0/1: the rows' offsets in it.  Exact: e2m1 code as E4M3 (= e2m1 * 2^-6) times
 * the block scale * 64, both exact in FP16, product exact. */
static __device__ __forceinline__ void nvfp4_sm90_dequant_chunk(const uint8_t *codes, int row_bytes,
                                                                const uint8_t *scales, int r0,
                                                                int sc_off0, int sc_off1,
                                                                uint32_t sel_block, uint32_t (*afrag)[4])
{
    const uint4 c0a = *(const uint4 *)(codes + r0 * row_bytes);
    const uint4 c0b = *(const uint4 *)(codes + r0 * row_bytes + 16);
    const uint4 c1a = *(const uint4 *)(codes + (r0 + 8) * row_bytes);
    const uint4 c1b = *(const uint4 *)(codes + (r0 + 8) * row_bytes + 16);
    const uint32_t s0 = *(const uint32_t *)(scales + sc_off0);
    const uint32_t s1 = *(const uint32_t *)(scales + sc_off1);
    /* words of block kb: row0 {lo, hi}, row1 {lo, hi} */
    const uint32_t w0lo[4] = {c0a.x, c0a.z, c0b.x, c0b.z};
    const uint32_t w0hi[4] = {c0a.y, c0a.w, c0b.y, c0b.w};
    const uint32_t w1lo[4] = {c1a.x, c1a.z, c1b.x, c1b.z};
    const uint32_t w1hi[4] = {c1a.y, c1a.w, c1b.y, c1b.w};
    /* FP16 pairs {scale0, scale1} * 64 for blocks 0..3 (sign bits cleared) */
    const uint32_t sixty_four = 0x54005400u; /* FP16 {64, 64} */
    const uint32_t s01_lo = ptx_prmt(s0, s1, 0x5140u) & 0x7F7F7F7Fu; /* s0b0 s1b0 s0b1 s1b1 */
    const uint32_t s01_hi = ptx_prmt(s0, s1, 0x7362u) & 0x7F7F7F7Fu; /* s0b2 s1b2 s0b3 s1b3 */
    uint32_t sf[4];
    sf[0] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(s01_lo & 0xFFFFu)), sixty_four);
    sf[1] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(s01_lo >> 16)), sixty_four);
    sf[2] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(s01_hi & 0xFFFFu)), sixty_four);
    sf[3] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(s01_hi >> 16)), sixty_four);
#pragma unroll
    for (int kb = 0; kb < 4; kb++) {
        /* x = {row0 byte t, row0 byte t+4, row1 byte t, row1 byte t+4} */
        const uint32_t x0 = ptx_prmt(w0lo[kb], w0hi[kb], sel_block);
        const uint32_t x1 = ptx_prmt(w1lo[kb], w1hi[kb], sel_block);
        const uint32_t x = ptx_prmt(x0, x1, 0x5410u);
        /* Each nibble s.e1e0.m as an E4M3 byte s.0e1e0.m00 = e2m1 * 2^-6:
         * high nibbles (elements 2i) and low nibbles (2i+1). */
        uint32_t hi, lo;
        nvfp4_codes_to_e4m3(x, &hi, &lo);
        const uint32_t p01 = ptx_prmt(hi, lo, 0x5140u); /* row0: {2t,2t+1}, {2t+8,2t+9} */
        const uint32_t p23 = ptx_prmt(hi, lo, 0x7362u); /* row1: the same */
        const uint32_t sc0 = ptx_prmt(sf[kb], 0, 0x1010u); /* {s0, s0} */
        const uint32_t sc1 = ptx_prmt(sf[kb], 0, 0x3232u); /* {s1, s1} */
        afrag[kb][0] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(p01 & 0xFFFFu)), sc0);
        afrag[kb][1] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(p23 & 0xFFFFu)), sc1);
        afrag[kb][2] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(p01 >> 16)), sc0);
        afrag[kb][3] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(p23 >> 16)), sc1);
    }
}

/* One NVFP4 block (8 code bytes, its E4M3 scale byte) as 16 FP16 values in
 * k order, o[j] = elements {2j, 2j+1}: (e2m1 * 2^-6) * (|scale| * 64),
 * exact (at most 6 * 448).  The activation pre-pass and the shared-memory
 * weight dequantization of the SS kernel both use it. */
static __device__ __forceinline__ void nvfp4_sm90_dequant_block(uint2 w, uint32_t scale_byte, uint32_t o[8])
{
    const uint32_t sb = scale_byte & 0x7Fu;
    /* {scale, scale} * 64 in FP16: exact (at most 448 * 64). */
    const uint32_t sc = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(sb | (sb << 8))), 0x54005400u);
    const uint32_t words[2] = {w.x, w.y};
#pragma unroll
    for (int h = 0; h < 2; h++) {
        uint32_t hi, lo;
        nvfp4_codes_to_e4m3(words[h], &hi, &lo);
        const uint32_t p01 = ptx_prmt(hi, lo, 0x5140u);
        const uint32_t p23 = ptx_prmt(hi, lo, 0x7362u);
        o[4 * h + 0] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(p01 & 0xFFFFu)), sc);
        o[4 * h + 1] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(p01 >> 16)), sc);
        o[4 * h + 2] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(p23 & 0xFFFFu)), sc);
        o[4 * h + 3] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(p23 >> 16)), sc);
    }
}

/* The wgmma kernels' epilogue: acc[i] of a consumer thread (lane 4 g + t,
 * tile-local weight row R0 = its warp's 16 rows + g) is output (n, m) with
 * n = N0 + R0 + 8 ((i >> 1) & 1), m = M0 + 8 (i >> 2) + 2 t + (i & 1);
 * raw gets the accumulator, out BF16(alpha * acc (+ bias)), both RNE.  A
 * macro so the accumulator array stays in registers (BN is a constant). */
#define NVFP4_SM90_EPILOGUE(P, ACC, BN, N0, M0, R0, T, ALPHA)                                       \
    _Pragma("unroll") for (int half_ = 0; half_ < 2; half_++) {                                    \
        const int n_ = (N0) + (R0) + 8 * half_;                                                    \
        if (n_ >= (P).n) continue;                                                                 \
        const float bias_ = (P).bias ? (P).bias[n_] : 0.0f;                                        \
        _Pragma("unroll") for (int i_ = 0; i_ < (BN) / 2; i_++) {                                  \
            if (((i_ >> 1) & 1) != half_) continue;                                                \
            const int m_ = (M0) + 8 * (i_ >> 2) + 2 * (T) + (i_ & 1);                              \
            if (m_ >= (P).m) continue;                                                             \
            const size_t o_ = (size_t)m_ * (size_t)(P).n + (size_t)n_;                             \
            if ((P).raw) (P).raw[o_] = (ACC)[i_];                                                  \
            if ((P).out) {                                                                         \
                float y_ = __fmul_rn((ALPHA), (ACC)[i_]);                                          \
                if ((P).bias) y_ = __fadd_rn(y_, bias_);                                           \
                (P).out[o_] = nvfp4_dev_bf16_rne(y_);                                              \
            }                                                                                      \
        }                                                                                          \
    }

#endif
