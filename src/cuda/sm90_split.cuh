/* sm90_split.cuh -- the split small-M kernel (M <= 32): shared parts.  The
 * body (sm90_split_body.cuh) is included once per variant by sm90_gemm.cu.
 *
 * Why: at small M every output is a chain of K/16 dependent k16 steps, and
 * the work per step is the dequantization of the weights, not the MMA.  The
 * earlier kernels ran both in the same warp, on 1-2 warps per scheduler, and
 * were bound by that one instruction stream (docs/KERNEL.md).  Here the two
 * are split across warps:
 *
 *  - warp 0, the loader: one thread issues, per 256-element chunk of K, one
 *    TMA box of codes (16 rows x 128 bytes, 128-byte swizzle) and one of
 *    scales per 16-row weight tile of the CTA, and the same for the
 *    activations, into a ring of raw stages (TMA's cost grows with the rows
 *    of a box: 64-byte rows delivered about 5 bytes per cycle per SM);
 *  - warps 1..4, the MMA warps (one per scheduler): tile i of the CTA belongs
 *    to MMA warp i % 4.  Per block it loads the FP16 A fragment of each of its
 *    tiles and the B fragments of the activations from shared memory and
 *    issues mma.sync m16n8k16: weights are the m16 side (16 rows per chain),
 *    activations the n8 side (MT / 8 chains per tile);
 *  - warps 5..5+SPLIT_DQ-1 (8 or 12), the dequantizers: each chunk's (row, block)
 *    units -- 16 code bytes -> 16 exact FP16 values -- are spread over all of
 *    them, written into a ring of fragment stages (128 K-elements each, two
 *    per raw chunk) in the mma's register order.
 *
 * NOTES (hardware and contract constraints):
 *  - mma.sync m16n8k16 .f32.f16.f16.f32 is one sm90 k16 step (docs/ORACLE.md):
 *    one call per NVFP4 block, accumulator from +0, k increasing.
 *  - The step adds its 16 products as a set (the sm90 model: largest
 *    exponent, every product truncated to the same grid, an exact sum), so
 *    the order of k inside a block is free as long as A and B use the same
 *    one.  Both sides use pi: fragment k = 2t, 2t+1, 2t+8, 2t+9 of lane
 *    (g, t) holds element 4t, 4t+2, 4t+1, 4t+3 of the block -- so the 4
 *    values of a lane are the 2 code bytes 2t, 2t+1, converted with no
 *    byte gathering.  The GPU suite checks every bit against the oracle.
 *  - TMA 128-byte swizzle: 16-byte chunk c of row r of a box sits at chunk
 *    c ^ (r & 7) (boxes 1024-byte aligned), which makes the dequantizers'
 *    8-byte loads of 8 rows x 4 blocks conflict-free.
 *  - K % 32 == 0 (16-byte code rows for TMA); N % 16 == 0; a K tail shorter
 *    than the chunk is zero-filled by TMA and its steps are not issued. */
#ifndef NVFP4_CUDA_SM90_SPLIT_CUH
#define NVFP4_CUDA_SM90_SPLIT_CUH

#include <cuda.h>

#include "cuda/ptx.cuh"
#include "cuda/sm90_heuristics.cuh"
#include "cuda/sm90_internal.cuh"

#define SPLIT_MMA_WARPS 4   /* one per scheduler */
/* Dequantizing warps per CTA: 12 where the MMA warps' registers leave room
 * (at most 120 per thread: MT = 8 up to 3 tiles per MMA warp, MT = 16 up to
 * 2), else 8. */
#define SPLIT_DQ_OF(mt, tw) (((mt) == 8 && (tw) <= 3) || ((mt) == 16 && (tw) <= 2) ? 12 : 8)
#define SPLIT_THREADS_OF(mt, tw) (32 * (1 + SPLIT_MMA_WARPS + SPLIT_DQ_OF(mt, tw)))
#define SPLIT_KC 256        /* K elements per raw chunk (16 blocks, 128 code bytes per row) */
#define SPLIT_KF 128        /* K elements per fragment stage (8 blocks) */

typedef struct nvfp4_sm90_split_params {
    CUtensorMap tm_b_codes;  /* weights [N][K/2] bytes, box {128, 16}, 128-byte swizzle */
    CUtensorMap tm_b_scales; /* weight scales as {256, 2, chunks}, box {256, 1, 4} */
    CUtensorMap tm_a_codes;  /* activations [M][K/2], box {128, MT}, 128-byte swizzle */
    CUtensorMap tm_a_scales; /* activation scales as {256, 2, chunks}, box {256, AH, 4} */
    const float *a_scale2;
    const float *b_scale2;
    const float *bias;
    float *raw;
    uint16_t *out;
    int m, n, k;
    int ncb;              /* 512-byte scale chunks per 128-row tile = roundup(K/16,4)/4 */
    int tiles;            /* 16-row weight tiles = N / 16 */
    int tmax;             /* tiles per CTA at most (the stage layout) */
    int raw_stages;       /* raw ring depth */
    int frag_stages;      /* fragment ring depth */
    int chunks_per_slice; /* K slices: 64-element groups per slice */
} nvfp4_sm90_split_params;

/* One (row, block) unit: the block's 8 code bytes {lo, hi} and its scale
 * byte -> the 4 register pairs of the 4 lanes t = 0..3 that hold this row:
 * pair t = {fragment k 2t,2t+1 ; k 2t+8,2t+9} = {elements 4t, 4t+2 ; 4t+1,
 * 4t+3} (pi, above) as exact FP16 e2m1 * |e4m3|.  A nibble s.e1e0.m placed in
 * an E4M3 byte as s.0e1e0.m00 is e2m1 * 2^-6 (subnormals included), which cvt
 * converts exactly; times 64 * scale (<= 28672) the FP16 product is exact. */
NVFP4_DEV void split_unit(uint32_t lo, uint32_t hi, uint32_t scale_byte, uint32_t out[8])
{
    const uint32_t s = scale_byte & 0x7Fu; /* the sign of a block scale is ignored */
    const uint32_t sc = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(s | (s << 8))), 0x54005400u);
    const uint32_t w[2] = {lo, hi};
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const uint32_t x = w[h];
        /* even elements (high nibbles) and odd elements (low nibbles) as E4M3 bytes */
        uint32_t ev, od;
        nvfp4_codes_to_e4m3(x, &ev, &od);
        out[4 * h + 0] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(ev & 0xFFFFu)), sc); /* t = 2h: 4t, 4t+2 */
        out[4 * h + 1] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(od & 0xFFFFu)), sc); /* 4t+1, 4t+3 */
        out[4 * h + 2] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(ev >> 16)), sc);     /* t = 2h+1 */
        out[4 * h + 3] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(od >> 16)), sc);
    }
}

/* Byte offset of (row, 8-byte block b = 0..15) in a 128-byte-swizzled code box. */
NVFP4_DEV int split_code_off(int row, int b)
{
    return row * 128 + (((b >> 1) ^ row) & 7) * 16 + (b & 1) * 8;
}

/* Weight fragment slot of lane (g, t) for block b inside the tile's 8 x
 * 512 bytes: 16 bytes {a0, a1, a2, a3} in the mma's register order.  The
 * rotation of t by (g / 2 + b) keeps both the dequantizers' stores (8 rows x 4
 * blocks per instruction) and the mma warps' loads at the minimum number of
 * shared-memory wavefronts.  Depends on b only through b % 4. */
NVFP4_DEV int split_wfrag_off(int g, int t, int b)
{
    return b * 512 + (g * 4 + (t ^ (((g >> 1) + b) & 3))) * 16;
}

/* Activation fragment slot (8 bytes {b0, b1}) of lane (g, t), block b,
 * inside the n8 tile's 8 x 256 bytes (rotation likewise; b % 4 only). */
NVFP4_DEV int split_afrag_off(int g, int t, int b)
{
    return b * 256 + (g * 4 + (t ^ ((g + b) & 3))) * 8;
}

#endif
