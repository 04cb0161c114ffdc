/* sm90_small_m.cuh -- the small-M kernel (M <= 16): shared parts.  The body
 * (sm90_small_m_body.cuh) is included once per variant by sm90_gemm.cu.
 *
 * Why a second kernel: each output is a chain of K/16 dependent k16 steps
 * (the contract forbids a K split), so at small M the work splits no finer
 * than the chains.  The wgmma kernel has one chain per 64 weight rows (84
 * CTAs for N = 5376, 48 SMs idle).  Here every warp runs mma.sync m16n8k16
 * (the same sm90 k16 step, measured bit for bit like wgmma: docs/ORACLE.md)
 * on n8 tiles of 8 weight rows: N/8 chains, R of them interleaved per warp.
 * Measured (docs/KERNEL.md): at small M both kernels are bound by the
 * dequantization's instruction stream on 1-2 warps per scheduler, not by
 * the step latency; this one wins where N is large (fc1).
 *
 * Roles in a CTA of 1 + W warps:
 *  - warp 0, the activation producer: streams the NVFP4 activations (M <= 16
 *    rows) through a cp.async staging ring, dequantizes each 64-element chunk
 *    exactly (e2m1 * |e4m3| in FP16) into m16k16 A fragments in a shared ring,
 *    and signals `full`.  No separate dequantization launch: the activation
 *    work is done once per CTA, not once per warp.
 *  - warps 1..W, the consumers: each owns 8R weight rows for the whole K,
 *    streams their codes and scales through a private cp.async ring (many
 *    chunks ahead, no CTA-wide barrier), dequantizes B fragments in
 *    registers and runs R mma.sync per block, in increasing k.
 *
 * NOTES (hardware and contract constraints):
 *  - mma.sync m16n8k16 .f32.f16.f16.f32 is one sm90 k16 step per call: one
 *    call per NVFP4 block, accumulator from +0, k increasing.
 *  - cp.async needs 16-byte aligned sources: K % 32 == 0 (16-byte code rows).
 *  - A fragments: thread (g, t) holds rows g / g+8, k = 2t, 2t+1, 2t+8, 2t+9;
 *    B fragments: weight row g of the tile, the same k.  Both come from code
 *    bytes t and t+4 of the row's 8-byte block (hi-first: byte j holds
 *    elements 2j (high nibble) and 2j+1 (low nibble)). */
#ifndef NVFP4_CUDA_SM90_SMALL_M_CUH
#define NVFP4_CUDA_SM90_SMALL_M_CUH

#include "cuda/ptx.cuh"
#include "cuda/sm90_internal.cuh"
#include "formats/layout.h"

#define SMALLM_ACT_STAGES 8   /* FP16 A-fragment ring depth (chunks) */
#define SMALLM_STG_STAGES 8   /* NVFP4 activation staging ring depth (chunks) */
#define SMALLM_MAX_WARPS 16   /* 1 producer + up to 15 consumers */

typedef struct nvfp4_sm90_small_params {
    const uint8_t *a_codes;  /* M x K/2, hi-first */
    const uint8_t *a_scales; /* 128x4 tiled */
    const uint8_t *b_codes;  /* N x K/2, hi-first */
    const uint8_t *b_scales; /* 128x4 tiled */
    const float *a_scale2;
    const float *b_scale2;
    const float *bias;
    float *raw;
    uint16_t *out;
    int m, n, k;
    int ncb;              /* 512-byte scale chunks per 128-row tile = roundup(K/16,4)/4 */
    int w_stages;         /* per-consumer weight ring depth */
    int chunks_per_slice; /* K slices: 64-element chunks per slice */
    int items;            /* consumer work items: ceil(N / (8R)) */
} nvfp4_sm90_small_params;

NVFP4_DEV void ptx_cp_async16(void *dst, const void *src, uint32_t src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(ptx_smem_addr(dst)), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}

NVFP4_DEV void ptx_cp_async4(void *dst, const void *src, uint32_t src_bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(ptx_smem_addr(dst)), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}

NVFP4_DEV void ptx_cp_async_commit(void) { asm volatile("cp.async.commit_group;" ::: "memory"); }

/* Wait until at most `n` of this thread's cp.async groups are pending. */
#define PTX_CP_ASYNC_WAIT(n) asm volatile("cp.async.wait_group %0;" ::"n"(n) : "memory")

NVFP4_DEV void ptx_mma_16816(float *d, const uint32_t *a, uint32_t b0, uint32_t b1)
{
    ptx_mma_16816_regs(d, a[0], a[1], a[2], a[3], b0, b1);
}

/* The FP16 pairs {s, s} * 64 of the 4 block scales in one scale word (bytes =
 * blocks 0..3; sign bits ignored).  Exact: at most 448 * 64. */
NVFP4_DEV void smallm_scales(uint32_t word, uint32_t sc[4])
{
    const uint32_t sixty_four = 0x54005400u; /* FP16 {64, 64} */
    const uint32_t w = word & 0x7F7F7F7Fu;
    const uint32_t s01 = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(w & 0xFFFFu)), sixty_four);
    const uint32_t s23 = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(w >> 16)), sixty_four);
    sc[0] = ptx_prmt(s01, 0, 0x1010u);
    sc[1] = ptx_prmt(s01, 0, 0x3232u);
    sc[2] = ptx_prmt(s23, 0, 0x1010u);
    sc[3] = ptx_prmt(s23, 0, 0x3232u);
}

/* The two fragment registers of one row and one block: {k=2t, 2t+1} and
 * {k=2t+8, 2t+9} as exact FP16 e2m1 * |e4m3|.  lo / hi: the block's two code
 * words (bytes 0..3 and 4..7 of its 8 bytes); sel = t | (t + 4) << 4 picks
 * byte t of each; sc: {s, s} * 64 of the block.  A nibble s.e1e0.m placed in
 * an E4M3 byte as s.0e1e0.m00 is e2m1 * 2^-6 (subnormals included), which
 * cvt converts exactly; times 64 * scale, the FP16 product is exact. */
NVFP4_DEV void smallm_frag(uint32_t lo, uint32_t hi, uint32_t sel, uint32_t sc, uint32_t *f0,
                           uint32_t *f1)
{
    const uint32_t x = ptx_prmt(lo, hi, sel); /* {byte t (k 2t,2t+1), byte t+4 (k 2t+8,2t+9)} */
    const uint32_t eh = (x & 0x8080u) | ((x >> 2) & 0x1C1Cu); /* high nibbles: k 2t, 2t+8 */
    const uint32_t el = ((x << 4) & 0x8080u) | ((x << 2) & 0x1C1Cu); /* low: k 2t+1, 2t+9 */
    const uint32_t p = ptx_prmt(eh, el, 0x5140u); /* {2t, 2t+1, 2t+8, 2t+9} as E4M3 bytes */
    *f0 = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(p & 0xFFFFu)), sc);
    *f1 = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(p >> 16)), sc);
}

/* Offset of the 4 scale bytes of row r, chunk c (blocks 4c..4c+3) in the
 * 128x4 tiled layout (ncb chunks per 128-row tile). */
NVFP4_DEV size_t smallm_scale_off(int r, int c, int ncb)
{
    return nvfp4_tiled_offset(r, 4 * (int64_t)c, ncb);
}

#endif
