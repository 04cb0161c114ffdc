/* sm90_regm.cuh -- the register small-M kernel (M <= 32): shared parts.  The
 * body (sm90_regm_body.cuh) is included once per variant by sm90_gemm.cu.
 *
 * Why: the split kernel (sm90_split.cuh) moved the dequantization out of the
 * MMA warps and paid for it with a shared-memory round trip of FP16
 * fragments (QKV and FC1 were bound by that bandwidth) and a hand-off per
 * 8-step stage (FC2 and attn-out were bound by its latency).  Here each MMA
 * warp dequantizes its own weight rows in registers, straight from the 4-bit
 * codes TMA brought, and runs the chain; only the activations -- shared by
 * every chain of the CTA -- go through shared memory as FP16 fragments.
 *
 *  - the loader (warp 0; the planner takes one, the hook more): per
 *    256-element chunk of K, one box of codes for all of the CTA's weight
 *    rows (8 * chains rows x 128 bytes, 128-byte swizzle), one 4-D box of
 *    the whole 512-byte tiled scale chunks of the 128-row groups the CTA
 *    spans, and the activations' codes and scales, into a ring of stages;
 *  - the activation warps (one per n8 token tile, two for MT = 8): each
 *    chunk's activation blocks -> exact FP16 m16n8k16 A fragments, stored in
 *    the mma's register-quad order, in the same stage;
 *  - in the REGM_BF16 kernels (the in-kernel A producer of
 *    docs/STREAMING_A.md; built for MT = 8 into REGM, REGW and REGR),
 *    the loader brings the chunk's BF16 activations (one box) instead of
 *    the NVFP4 ones, and the activation warps quantize them -- one lane per
 *    16-element block, the CTA's threshold table, the block kernel's very
 *    functions -- and turn the codes and scale byte into the fragments with
 *    the same instructions as the NVFP4 path: no codes in shared memory, no
 *    extra warps or barriers;
 *  - the MMA warps: warp w owns REGM_TW chains of 8 weight rows (the n8
 *    side of the mma) for the whole K: per block it loads one 32-bit code
 *    word per chain and lane, builds the B fragment in registers (cvt
 *    e4m3x2 -> f16x2, times the block scale from an FP16 pair the
 *    activation warps wrote), loads the activation A fragment and issues
 *    mma.sync m16n8k16;
 *  - REGM_WA (kind REGW): the same loader and stage, but a chain is 16
 *    weight rows, the m16 (A) side of the mma, built from the code words of
 *    rows g and g + 8; the activation warps write n8 B fragments (8 bytes a
 *    lane and block) and the weight scales as {s(g), s(g + 8)} pairs;
 *  - REGM_ROT = R (kind REGR, on REGM_WA): R MMA warps per chain take its
 *    chunks in turn and hand the accumulator on through a shared-memory
 *    slot and an mbarrier per (chain, turn): the chain stays one sequence
 *    of steps in k order while R - 1 chunks are dequantized;

 * NOTES (hardware and contract constraints):
 *  - mma.sync m16n8k16 .f32.f16.f16.f32 is one sm90 k16 step (docs/ORACLE.md):
 *    one call per NVFP4 block, accumulator from +0, k increasing.
 *  - The step adds its 16 products as a set, so the order of k inside a block
 *    is free when A and B use the same one: fragment k 2t, 2t+1, 2t+8, 2t+9 of
 *    lane (g, t) holds elements 4t, 4t+2, 4t+1, 4t+3 (the split kernel's pi):
 *    a lane's four values are the code bytes 2t and 2t+1 of the block, one
 *    16-bit half of one 32-bit shared-memory word.
 *  - TMA 128-byte swizzle: 16-byte chunk c of box row r sits at c ^ (r & 7)
 *    (boxes 1024-byte aligned): the 32-bit code loads of rows g = 0..7 fall in
 *    8 different 16-byte bank groups (conflict-free).
 *  - K % 32 == 0 (16-byte code rows for TMA); N % 16 == 0; a K tail shorter
 *    than the chunk is zero-filled by TMA and its steps are not issued. */
#ifndef NVFP4_CUDA_SM90_REGM_CUH
#define NVFP4_CUDA_SM90_REGM_CUH

#include <cuda.h>

#include "cuda/ptx.cuh"
#include "cuda/quantize_internal.h"
#include "cuda/sm90/plan.h"
#include "cuda/sm90/common.cuh"

#define REGM_KC 256 /* K elements per stage (16 blocks, 128 code bytes per row) */

typedef struct nvfp4_sm90_regm_params {
    nvfp4_sm90_gemm_io io;
    CUtensorMap tm_b_codes;  /* weights [N][K/2] bytes, box {128, 8 * tmax}, 128-byte swizzle */
    CUtensorMap tm_b_scales; /* weight scales as {256, 2, ncb, 128-row groups}, box {256, 2, 4, SGMAX} */
    CUtensorMap tm_a_codes;  /* activations [M][K/2], box {128, MT}, 128-byte swizzle */
    CUtensorMap tm_a_scales; /* activation scales as {256, 2, chunks}, box {256, AH, 4} */
    int tiles;            /* 8-row weight units = N / 8 */
    int tmax;             /* units per CTA at most (the stage layout) */
    int mma_warps;        /* MMA warps per CTA = ceil(tmax / TW) */
    int loaders;          /* TMA-issuing warps per CTA (1..REGM_LWMAX) */
    int pair_stores;      /* raw is 8-byte and out 4-byte aligned: the epilogue stores pairs */
    /* The in-kernel A producer (the REGM_BF16 kernels only; tm_a_* and
     * io.a_scale2 unused): the activation warps code BF16 x [m][x_cols]
     * exactly as nvfp4_quantize() and build the fragments from the codes. */
    CUtensorMap tm_x;         /* x [m][x_cols] BF16, box {256, x_rows}: one chunk (zeros past x's columns) */
    int x_cols;               /* x's columns (<= k) */
    int x_rows;               /* the box's rows: M (a stage holds no rows past it) */
    const float *x_pts;       /* static per-tensor scale, or NULL: FP32(amax / 2688), amax the largest ... */
    const uint32_t *x_amax;   /* ... of the x_amax_n words the amax pass (our programmatic */
    int x_amax_n;             /*     prerequisite) wrote */
    float *x_pts_out;         /* optional: the scale used (CTA 0 writes it) */
    uint8_t *x_codes;         /* optional: nvfp4_quantize()'s codes [16][k/2] of x (CTA 0 writes them) */
    uint8_t *x_scales;        /* optional: its tiled scales (tile padding cleared by the caller) */
    int cuda_variant;         /* the quantizer variant */
    int act_rot;              /* activation warps at work (a divisor of stages): warp w codes chunks
                               * w, w + act_rot, ..., so that many chunks are in flight (also
                               * REGR's NVFP4 path at MT = 16: whole chunks) */
} nvfp4_sm90_regm_params;

/* REGR's accumulator hand-off, in the MMA warp mw = R jr + rr that takes
 * chunk U of chain jr (rr = U % R): REGR_HAND_WAIT(U) before it loads the
 * slot (U > 0), REGR_HAND_SIGNAL(U + 1) to the warp of chunk U + 1 after it
 * stored the slot.  An mbarrier per receiving warp (acc_ready[mw], count 32:
 * the waiter's parity is ((U - 1) / R) & 1).  A barrier never has two
 * rounds in flight: the sender's next hand-off to the same warp follows
 * chunks the receiver's turn comes before. */
#define REGR_HAND_WAIT(U) ptx_mbar_wait(&acc_ready[mw], (uint32_t)(((U) - 1) / REGM_ROT) & 1u)
#define REGR_HAND_SIGNAL(U) ptx_mbar_arrive(&acc_ready[jr * REGM_ROT + (U) % REGM_ROT])

/* The FP16 pair {s_a * 64, s_b * 64} of the two block-scale bytes in the
 * low (hi = 0) or high half of a word (signs cleared: the contract uses
 * |e4m3|). */
NVFP4_DEV uint32_t regm_scale_pair(uint32_t four_bytes, int hi)
{
    const uint32_t m = four_bytes & 0x7F7F7F7Fu;
    return ptx_hmul2(hi ? ptx_e4m3x2_hi_to_f16x2(m) : ptx_e4m3x2_lo_to_f16x2(m), 0x54005400u);
}

/* The in-kernel A producer's per-tensor scale, read by the MMA warps at the
 * end: the static one (X_STATIC, loaded early), or FP32(amax / 2688) from
 * the amax pass, which has completed (the activation warps waited for it).
 * By whole warps (q_amax_of_parts). */
NVFP4_DEV float regm_x_pts(const nvfp4_sm90_regm_params *p, float x_static)
{
    if (p->x_pts) return x_static;
    ptx_griddep_wait();
    return q_dynamic_pts(q_amax_of_parts(p->x_amax, p->x_amax_n));
}

#endif
