/* sm90_gemm.cu -- the H200 (sm_90a) NVFP4 GEMM, bit-exact to the sm90 model.
 *
 * On the caller's stream, by the plan (sm90_heuristics.c):
 *  - M <= 32: one launch of a register small-M kernel (sm90_regm*.cuh):
 *    TMA brings NVFP4 weights and activations, activation warps write FP16
 *    fragments once per CTA, MMA warps dequantize their own weights in
 *    registers and run mma.sync chains -- 8-row chains (REGM), 16-row chains
 *    (REGW), or 16-row chains whose chunks R warps take in turn, handing the
 *    accumulator on (REGR: attn-out and FC2 at M <= 16);
 *  - forced variants only: the split kernel (sm90_split*.cuh: dequantizing
 *    warps write FP16 fragments of both operands to shared memory), the
 *    first small-M kernel (sm90_small_m*.cuh) and the SS kernel;
 *  - otherwise two launches: nvfp4_sm90_dequant_act (A (M x K NVFP4) -> FP16
 *    [M][K] in the workspace, each block in the operand order of
 *    nvfp4_sm90_operand_elem; e2m1 * |e4m3| is exact in FP16), then the
 *    persistent warp-specialized kernel (sm90_gemm_body.cuh): weights are the
 *    wgmma A operand, dequantized in registers; the FP16 activations are the
 *    B operand, loaded by TMA.
 * docs/KERNEL.md explains the design and the numbers. */
/* Legacy launch stubs: no guarded statics or exception tables in the host
 * code nvcc generates for the launches. */
#define __NV_LEGACY_LAUNCH 1
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "internal.h"
}
#include "cuda/ptx.cuh"
#include "cuda/sm90_heuristics.cuh"
#include "cuda/sm90_internal.cuh"

/* Kernel options (sm90_gemm_body.cuh), the default since the H200 timed
 * them (docs/KERNEL.md, seventeenth session); -DNVFP4_SM90_X=0 builds the
 * kernels without one (tests/gpu/gpu.mk flag set `base`: none of them).
 * After them REGR's options (sm90_regm_body.cuh, eighteenth and
 * nineteenth sessions), none the default. */
#ifndef NVFP4_SM90_PAIR
#define NVFP4_SM90_PAIR 1 /* wgmma groups of two chunks (64x128, 128x128) */
#endif
#ifndef NVFP4_SM90_REGBAL
#define NVFP4_SM90_REGBAL 1 /* setmaxnreg on the single-consumer tiles */
#endif
#ifndef NVFP4_SM90_LEAN
#define NVFP4_SM90_LEAN 1 /* the bn <= 64 tiles without K-slice code; twins carry it */
#endif
/* Measured 2 % faster at M = 1 and exact in the whole GPU suite
 * (eighteenth session), but racecheck reports its hand-off as RAW hazards
 * (docs/KERNEL.md): an option until that is settled. */
#ifndef NVFP4_SM90_NBAR
#define NVFP4_SM90_NBAR 0 /* REGR's accumulator hand-off by named barriers, not mbarriers */
#endif
/* Measured slower, an option only (eighteenth session: 128 fragment
 * registers spill at MT = 8): */
#ifndef NVFP4_SM90_REGR_TURN
#define NVFP4_SM90_REGR_TURN 1 /* REGR: chunks a warp takes per turn (1 or 2) */
#endif
/* Nineteenth session (no device; to be measured): REGR with interleaved
 * rows where N % 128 == 0 (sm90_heuristics.cuh, REGR_IL_STAGE_BYTES): each
 * CTA's scale boxes hold its own rows' scales only and its stages shrink
 * (FC2 M = 1: 14 KB, 15 stages, where the contiguous rows take 17.5 KB and
 * 12).  Built beside the contiguous kernels, which run where it does not
 * apply. */
#ifndef NVFP4_SM90_REGR_IL
#define NVFP4_SM90_REGR_IL 0 /* REGR with interleaved rows where N % 128 == 0 */
#endif
/* Twenty-seventh session (no device; to be measured): REGR at M <= 2
 * with resident activations (sm90_heuristics.cuh, REGR_RES_STAGE_BYTES):
 * the activation warps make the B fragments of the whole activation once,
 * and the stages hold weights only.  Built beside the other REGR kernels
 * (MT = 8, R = 2, 3, 4), which run where it does not apply (M > 2, BF16
 * activations, a K whose fragments do not fit beside two turns of stages). */
#ifndef NVFP4_SM90_REGR_RES
#define NVFP4_SM90_REGR_RES 0 /* REGR at M <= 2 with resident activation fragments */
#endif
/* Twenty-seventh session too (no device; to be measured): REGR reading the
 * exact FP16 activations the fused linear's quantizer writes for the wgmma
 * kernels (sm90_heuristics.cuh, REGR_F16_STAGE_BYTES), so that no CTA
 * converts activations.  Bit 0: in the fused linear (its quantizer then
 * writes FP16 operands where REGR is planned); bit 1: in the prequantized
 * GEMM too, after the pre-pass (which it otherwise skips at M <= 16).
 * Where both options apply, resident activations (NVFP4 in) take M <= 2. */
#ifndef NVFP4_SM90_REGR_F16
#define NVFP4_SM90_REGR_F16 0 /* REGR on FP16 activations: 1 fused linear, 2 prequantized GEMM, 3 both */
#endif
/* Nineteenth session too: REGR's activation warps (NVFP4 activations) each
 * take whole chunks in turn, as the in-kernel A producer's do, instead of
 * all of them splitting every chunk's block pairs (sm90_regm_body.cuh).
 * The value is the smallest MT that does it (0: none, 1: all, flag sets
 * `actsplit` and `actrot`).  The default since the twenty-second session,
 * 16: at MT = 16 (two activation warps) attn-out and FC2 M = 16 ran 8-9 %
 * faster on the H200; at MT = 8 (four warps) 1 % slower (docs/KERNEL.md). */
#ifndef NVFP4_SM90_REGR_ACT_ROT
#define NVFP4_SM90_REGR_ACT_ROT 16 /* REGR at MT >= this: activation warps take whole chunks */
#endif
#define NVFP4_SM90_REGR_ACT_ROT_AT(MT) (NVFP4_SM90_REGR_ACT_ROT > 0 && (MT) >= NVFP4_SM90_REGR_ACT_ROT)
/* Twentieth session: the wgmma kernel's activation boxes multicast over
 * clusters of two CTAs where both run the same activation tile through the
 * same chunks (one data-parallel tile a CTA, one activation tile: attn-out
 * and FC2 at 32 < M <= 128), so each activation byte leaves L2 once for two
 * SMs (sm90_gemm_body.cuh).  Off: measured 2x slower (H100, twenty-first
 * session).  `probe_rates ring` (H200, twenty-second) traced that to the
 * remote arrival's `.release.cluster` (3x slower ring; relaxed arrivals
 * cost 13 %) and found multicast no faster than plain loads without it. */
#ifndef NVFP4_SM90_MCAST
#define NVFP4_SM90_MCAST 0 /* wgmma kernel: activation boxes multicast to a cluster of two */
#endif
/* The chunk-pair step's next codes and scales loaded before its wgmmas
 * are issued, not after (sm90_gemm_body.cuh SM90_PAIR_STEP; the 64x128 and
 * 128x128 tiles).  The default since the twenty-first session: attn-out
 * and FC2 at M = 128 2.4-2.8 % faster, QKV level (docs/KERNEL.md); 0 runs
 * the previous order (flag set `loadlast`). */
#ifndef NVFP4_SM90_LOAD_FIRST
#define NVFP4_SM90_LOAD_FIRST 1 /* wgmma pair step: next pair's loads before this pair's wgmmas */
#endif
#include "cuda/sm90_wgmma.cuh"
#include "formats/layout.h"
#include "cuda/sm90_small_m.cuh"
#include "cuda/sm90_split.cuh"
#include "cuda/sm90_regm.cuh"
#include "cuda/quantize_internal.h"

/* ------------------------------------------------------------------------ */
/* Kernel variants (one per nvfp4_sm90_variants entry, same order).         */
#define SM90_BN 8
#define SM90_NC 1
#define SM90_NAME nvfp4_sm90_gemm_bn8_nc1
#define SM90_WGMMA wgmma_m64n8k16_rs
#include "cuda/sm90_gemm_body.cuh"

#define SM90_BN 16
#define SM90_NC 1
#define SM90_NAME nvfp4_sm90_gemm_bn16_nc1
#define SM90_WGMMA wgmma_m64n16k16_rs
#include "cuda/sm90_gemm_body.cuh"

#define SM90_BN 32
#define SM90_NC 1
#define SM90_NAME nvfp4_sm90_gemm_bn32_nc1
#define SM90_WGMMA wgmma_m64n32k16_rs
#include "cuda/sm90_gemm_body.cuh"

#define SM90_BN 64
#define SM90_NC 1
#define SM90_NAME nvfp4_sm90_gemm_bn64_nc1
#define SM90_WGMMA wgmma_m64n64k16_rs
#include "cuda/sm90_gemm_body.cuh"

#define SM90_BN 64
#define SM90_NC 2
#define SM90_NAME nvfp4_sm90_gemm_bn64_nc2
#define SM90_WGMMA wgmma_m64n64k16_rs
#include "cuda/sm90_gemm_body.cuh"

#define SM90_BN 128
#define SM90_NC 1
#define SM90_NAME nvfp4_sm90_gemm_bn128_nc1
#define SM90_WGMMA wgmma_m64n128k16_rs
#include "cuda/sm90_gemm_body.cuh"

#define SM90_BN 128
#define SM90_NC 2
#define SM90_NAME nvfp4_sm90_gemm_bn128_nc2
#define SM90_WGMMA wgmma_m64n128k16_rs
#include "cuda/sm90_gemm_body.cuh"

#define SM90_BN 256
#define SM90_NC 2
#define SM90_NAME nvfp4_sm90_gemm_bn256_nc2
#define SM90_WGMMA wgmma_m64n256k16_rs
#include "cuda/sm90_gemm_body.cuh"

/* Narrower 128-row tiles for M > 128: fewer idle SMs in the last wave
 * (the planner's wave model, sm90_heuristics.c). */
#define SM90_BN 176
#define SM90_NC 2
#define SM90_NAME nvfp4_sm90_gemm_bn176_nc2
#define SM90_WGMMA wgmma_m64n176k16_rs
#include "cuda/sm90_gemm_body.cuh"

#define SM90_BN 192
#define SM90_NC 2
#define SM90_NAME nvfp4_sm90_gemm_bn192_nc2
#define SM90_WGMMA wgmma_m64n192k16_rs
#include "cuda/sm90_gemm_body.cuh"

#define SM90_BN 232
#define SM90_NC 2
#define SM90_NAME nvfp4_sm90_gemm_bn232_nc2
#define SM90_WGMMA wgmma_m64n232k16_rs
#include "cuda/sm90_gemm_body.cuh"

#if defined(NVFP4_SM90_LEAN) && NVFP4_SM90_LEAN
/* The lean build's twins of the bn <= 64 tiles, with the K-slice code the
 * planned kernels leave out (sm90_gemm_body.cuh, SM90_SLICES): run only
 * for GEMMs with K slices (sm90_sliced_kernels). */
#define SM90_SLICED 1
#define SM90_BN 8
#define SM90_NC 1
#define SM90_NAME nvfp4_sm90_gemm_bn8_nc1_sl
#define SM90_WGMMA wgmma_m64n8k16_rs
#include "cuda/sm90_gemm_body.cuh"

#define SM90_SLICED 1
#define SM90_BN 16
#define SM90_NC 1
#define SM90_NAME nvfp4_sm90_gemm_bn16_nc1_sl
#define SM90_WGMMA wgmma_m64n16k16_rs
#include "cuda/sm90_gemm_body.cuh"

#define SM90_SLICED 1
#define SM90_BN 32
#define SM90_NC 1
#define SM90_NAME nvfp4_sm90_gemm_bn32_nc1_sl
#define SM90_WGMMA wgmma_m64n32k16_rs
#include "cuda/sm90_gemm_body.cuh"

#define SM90_SLICED 1
#define SM90_BN 64
#define SM90_NC 1
#define SM90_NAME nvfp4_sm90_gemm_bn64_nc1_sl
#define SM90_WGMMA wgmma_m64n64k16_rs
#include "cuda/sm90_gemm_body.cuh"

#define SM90_SLICED 1
#define SM90_BN 64
#define SM90_NC 2
#define SM90_NAME nvfp4_sm90_gemm_bn64_nc2_sl
#define SM90_WGMMA wgmma_m64n64k16_rs
#include "cuda/sm90_gemm_body.cuh"
#endif

/* The SS kernel (sm90_ss_body.cuh): weights dequantized to shared memory by
 * their own warps, both wgmma operands from shared memory. */
#define SS_BN 64
#define SS_NC 1
#define SS_NAME nvfp4_sm90_ss_bn64_nc1
#define SS_WGMMA wgmma_m64n64k16_ss
#include "cuda/sm90_ss_body.cuh"

#define SS_BN 128
#define SS_NC 1
#define SS_NAME nvfp4_sm90_ss_bn128_nc1
#define SS_WGMMA wgmma_m64n128k16_ss
#include "cuda/sm90_ss_body.cuh"

/* The small-M kernel (sm90_small_m.cuh): MT activation rows x R n8 tiles. */
#define SMALLM_MT 8
#define SMALLM_R 1
#define SMALLM_WS NVFP4_SM90_SMALL_WS(1)
#define SMALLM_WMAX NVFP4_SM90_SMALL_WMAX(1)
#define SMALLM_NAME nvfp4_sm90_small_mt8_r1
#include "cuda/sm90_small_m_body.cuh"

#define SMALLM_MT 8
#define SMALLM_R 2
#define SMALLM_WS NVFP4_SM90_SMALL_WS(2)
#define SMALLM_WMAX NVFP4_SM90_SMALL_WMAX(2)
#define SMALLM_NAME nvfp4_sm90_small_mt8_r2
#include "cuda/sm90_small_m_body.cuh"

#define SMALLM_MT 8
#define SMALLM_R 4
#define SMALLM_WS NVFP4_SM90_SMALL_WS(4)
#define SMALLM_WMAX NVFP4_SM90_SMALL_WMAX(4)
#define SMALLM_NAME nvfp4_sm90_small_mt8_r4
#include "cuda/sm90_small_m_body.cuh"

#define SMALLM_MT 16
#define SMALLM_R 1
#define SMALLM_WS NVFP4_SM90_SMALL_WS(1)
#define SMALLM_WMAX NVFP4_SM90_SMALL_WMAX(1)
#define SMALLM_NAME nvfp4_sm90_small_mt16_r1
#include "cuda/sm90_small_m_body.cuh"

#define SMALLM_MT 16
#define SMALLM_R 2
#define SMALLM_WS NVFP4_SM90_SMALL_WS(2)
#define SMALLM_WMAX NVFP4_SM90_SMALL_WMAX(2)
#define SMALLM_NAME nvfp4_sm90_small_mt16_r2
#include "cuda/sm90_small_m_body.cuh"

#define SMALLM_MT 16
#define SMALLM_R 4
#define SMALLM_WS NVFP4_SM90_SMALL_WS(4)
#define SMALLM_WMAX NVFP4_SM90_SMALL_WMAX(4)
#define SMALLM_NAME nvfp4_sm90_small_mt16_r4
#include "cuda/sm90_small_m_body.cuh"

/* The split small-M kernel (sm90_split.cuh): MT activation rows x TW tiles per MMA warp. */
#define SPLIT_MT 8
#define SPLIT_TW 1
#define SPLIT_NAME nvfp4_sm90_split_mt8_tw1
#include "cuda/sm90_split_body.cuh"

#define SPLIT_MT 8
#define SPLIT_TW 2
#define SPLIT_NAME nvfp4_sm90_split_mt8_tw2
#include "cuda/sm90_split_body.cuh"

#define SPLIT_MT 8
#define SPLIT_TW 3
#define SPLIT_NAME nvfp4_sm90_split_mt8_tw3
#include "cuda/sm90_split_body.cuh"

#define SPLIT_MT 8
#define SPLIT_TW 4
#define SPLIT_NAME nvfp4_sm90_split_mt8_tw4
#include "cuda/sm90_split_body.cuh"

#define SPLIT_MT 16
#define SPLIT_TW 1
#define SPLIT_NAME nvfp4_sm90_split_mt16_tw1
#include "cuda/sm90_split_body.cuh"

#define SPLIT_MT 16
#define SPLIT_TW 2
#define SPLIT_NAME nvfp4_sm90_split_mt16_tw2
#include "cuda/sm90_split_body.cuh"

#define SPLIT_MT 16
#define SPLIT_TW 3
#define SPLIT_NAME nvfp4_sm90_split_mt16_tw3
#include "cuda/sm90_split_body.cuh"

#define SPLIT_MT 16
#define SPLIT_TW 4
#define SPLIT_NAME nvfp4_sm90_split_mt16_tw4
#include "cuda/sm90_split_body.cuh"

#define SPLIT_MT 32
#define SPLIT_TW 1
#define SPLIT_NAME nvfp4_sm90_split_mt32_tw1
#include "cuda/sm90_split_body.cuh"

#define SPLIT_MT 32
#define SPLIT_TW 2
#define SPLIT_NAME nvfp4_sm90_split_mt32_tw2
#include "cuda/sm90_split_body.cuh"

/* The register small-M kernel (sm90_regm.cuh): MT activation rows x TW 8-row chains per MMA warp. */
#define REGM_MT 8
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regm_mt8_tw1
#include "cuda/sm90_regm_body.cuh"

#define REGM_MT 8
#define REGM_TW 2
#define REGM_NAME nvfp4_sm90_regm_mt8_tw2
#include "cuda/sm90_regm_body.cuh"

#define REGM_MT 8
#define REGM_TW 4
#define REGM_NAME nvfp4_sm90_regm_mt8_tw4
#include "cuda/sm90_regm_body.cuh"

#define REGM_MT 16
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regm_mt16_tw1
#include "cuda/sm90_regm_body.cuh"

#define REGM_MT 16
#define REGM_TW 2
#define REGM_NAME nvfp4_sm90_regm_mt16_tw2
#include "cuda/sm90_regm_body.cuh"

#define REGM_MT 16
#define REGM_TW 4
#define REGM_NAME nvfp4_sm90_regm_mt16_tw4
#include "cuda/sm90_regm_body.cuh"

#define REGM_MT 32
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regm_mt32_tw1
#include "cuda/sm90_regm_body.cuh"

#define REGM_MT 32
#define REGM_TW 2
#define REGM_NAME nvfp4_sm90_regm_mt32_tw2
#include "cuda/sm90_regm_body.cuh"

#define REGM_MT 32
#define REGM_TW 4
#define REGM_NAME nvfp4_sm90_regm_mt32_tw4
#include "cuda/sm90_regm_body.cuh"

/* ... and with the in-kernel A producer (BF16 activations in; MT = 8, TW 1
 * and 2, the REGM kernels the planner takes at M <= 8). */
#define REGM_MT 8
#define REGM_TW 1
#define REGM_BF16 1
#define REGM_NAME nvfp4_sm90_regm_bf16_mt8_tw1
#include "cuda/sm90_regm_body.cuh"

#define REGM_MT 8
#define REGM_TW 2
#define REGM_BF16 1
#define REGM_NAME nvfp4_sm90_regm_bf16_mt8_tw2
#include "cuda/sm90_regm_body.cuh"

/* The register kernel with the weights as the A operand (kind REGW): 16-row
 * chains, MT = 8 or 16 activation rows x TW = 1 or 2 chains per MMA warp. */
#define REGM_WA 1
#define REGM_MT 8
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regw_mt8_tw1
#include "cuda/sm90_regm_body.cuh"

#define REGM_WA 1
#define REGM_MT 8
#define REGM_TW 2
#define REGM_NAME nvfp4_sm90_regw_mt8_tw2
#include "cuda/sm90_regm_body.cuh"

#define REGM_WA 1
#define REGM_MT 16
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regw_mt16_tw1
#include "cuda/sm90_regm_body.cuh"

#define REGM_WA 1
#define REGM_MT 16
#define REGM_TW 2
#define REGM_NAME nvfp4_sm90_regw_mt16_tw2
#include "cuda/sm90_regm_body.cuh"

/* The rotating register kernel (kind REGR): the REGW layout, R MMA warps per
 * 16-row chain taking its chunks in turn; MT = 8 or 16, R = 2, 3, 4. */
#define REGM_WA 1
#define REGM_ROT 2
#define REGM_MT 8
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_mt8_r2
#include "cuda/sm90_regm_body.cuh"

#define REGM_WA 1
#define REGM_ROT 3
#define REGM_MT 8
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_mt8_r3
#include "cuda/sm90_regm_body.cuh"

#define REGM_WA 1
#define REGM_ROT 4
#define REGM_MT 8
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_mt8_r4
#include "cuda/sm90_regm_body.cuh"

#define REGM_WA 1
#define REGM_ROT 2
#define REGM_MT 16
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_mt16_r2
#include "cuda/sm90_regm_body.cuh"

#define REGM_WA 1
#define REGM_ROT 3
#define REGM_MT 16
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_mt16_r3
#include "cuda/sm90_regm_body.cuh"

#define REGM_WA 1
#define REGM_ROT 4
#define REGM_MT 16
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_mt16_r4
#include "cuda/sm90_regm_body.cuh"

/* The in-kernel A producer's twins (REGM_BF16: BF16 activations in, the
 * activation warps quantize them) of the kernels the planner takes at M <= 8:
 * REGM TW 1, 2 (above), REGW TW 1, REGR R 2, 3, 4, all MT = 8.  (MT = 16
 * twins were built and exact, and 2-3.6x slower than the prequantized GEMM
 * at M = 16: docs/STREAMING_A.md.) */
#define REGM_WA 1
#define REGM_MT 8
#define REGM_TW 1
#define REGM_BF16 1
#define REGM_NAME nvfp4_sm90_regw_bf16_mt8_tw1
#include "cuda/sm90_regm_body.cuh"

#define REGM_WA 1
#define REGM_ROT 2
#define REGM_MT 8
#define REGM_TW 1
#define REGM_BF16 1
#define REGM_NAME nvfp4_sm90_regr_bf16_mt8_r2
#include "cuda/sm90_regm_body.cuh"

#define REGM_WA 1
#define REGM_ROT 3
#define REGM_MT 8
#define REGM_TW 1
#define REGM_BF16 1
#define REGM_NAME nvfp4_sm90_regr_bf16_mt8_r3
#include "cuda/sm90_regm_body.cuh"

#define REGM_WA 1
#define REGM_ROT 4
#define REGM_MT 8
#define REGM_TW 1
#define REGM_BF16 1
#define REGM_NAME nvfp4_sm90_regr_bf16_mt8_r4
#include "cuda/sm90_regm_body.cuh"

#if NVFP4_SM90_REGR_IL
/* REGR with interleaved rows (REGM_IL): the kernels above of kind REGR,
 * MT = 8 and 16, R = 2, 3, 4, and the in-kernel A producer's twins. */
#define REGM_IL 1
#define REGM_WA 1
#define REGM_ROT 2
#define REGM_MT 8
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_il_mt8_r2
#include "cuda/sm90_regm_body.cuh"

#define REGM_IL 1
#define REGM_WA 1
#define REGM_ROT 3
#define REGM_MT 8
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_il_mt8_r3
#include "cuda/sm90_regm_body.cuh"

#define REGM_IL 1
#define REGM_WA 1
#define REGM_ROT 4
#define REGM_MT 8
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_il_mt8_r4
#include "cuda/sm90_regm_body.cuh"

#define REGM_IL 1
#define REGM_WA 1
#define REGM_ROT 2
#define REGM_MT 16
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_il_mt16_r2
#include "cuda/sm90_regm_body.cuh"

#define REGM_IL 1
#define REGM_WA 1
#define REGM_ROT 3
#define REGM_MT 16
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_il_mt16_r3
#include "cuda/sm90_regm_body.cuh"

#define REGM_IL 1
#define REGM_WA 1
#define REGM_ROT 4
#define REGM_MT 16
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_il_mt16_r4
#include "cuda/sm90_regm_body.cuh"

#define REGM_IL 1
#define REGM_WA 1
#define REGM_ROT 2
#define REGM_MT 8
#define REGM_TW 1
#define REGM_BF16 1
#define REGM_NAME nvfp4_sm90_regr_bf16_il_mt8_r2
#include "cuda/sm90_regm_body.cuh"

#define REGM_IL 1
#define REGM_WA 1
#define REGM_ROT 3
#define REGM_MT 8
#define REGM_TW 1
#define REGM_BF16 1
#define REGM_NAME nvfp4_sm90_regr_bf16_il_mt8_r3
#include "cuda/sm90_regm_body.cuh"

#define REGM_IL 1
#define REGM_WA 1
#define REGM_ROT 4
#define REGM_MT 8
#define REGM_TW 1
#define REGM_BF16 1
#define REGM_NAME nvfp4_sm90_regr_bf16_il_mt8_r4
#include "cuda/sm90_regm_body.cuh"
#endif

#if NVFP4_SM90_REGR_F16
/* REGR on FP16 activations (REGM_F16): MT = 8 and 16, R = 2, 3, 4. */
#define REGM_F16 1
#define REGM_WA 1
#define REGM_ROT 2
#define REGM_MT 8
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_f16_mt8_r2
#include "cuda/sm90_regm_body.cuh"

#define REGM_F16 1
#define REGM_WA 1
#define REGM_ROT 3
#define REGM_MT 8
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_f16_mt8_r3
#include "cuda/sm90_regm_body.cuh"

#define REGM_F16 1
#define REGM_WA 1
#define REGM_ROT 4
#define REGM_MT 8
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_f16_mt8_r4
#include "cuda/sm90_regm_body.cuh"

#define REGM_F16 1
#define REGM_WA 1
#define REGM_ROT 2
#define REGM_MT 16
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_f16_mt16_r2
#include "cuda/sm90_regm_body.cuh"

#define REGM_F16 1
#define REGM_WA 1
#define REGM_ROT 3
#define REGM_MT 16
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_f16_mt16_r3
#include "cuda/sm90_regm_body.cuh"

#define REGM_F16 1
#define REGM_WA 1
#define REGM_ROT 4
#define REGM_MT 16
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_f16_mt16_r4
#include "cuda/sm90_regm_body.cuh"
#endif

#if NVFP4_SM90_REGR_RES
/* REGR with resident activations (REGM_RES): MT = 8, R = 2, 3, 4. */
#define REGM_RES 1
#define REGM_WA 1
#define REGM_ROT 2
#define REGM_MT 8
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_res_mt8_r2
#include "cuda/sm90_regm_body.cuh"

#define REGM_RES 1
#define REGM_WA 1
#define REGM_ROT 3
#define REGM_MT 8
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_res_mt8_r3
#include "cuda/sm90_regm_body.cuh"

#define REGM_RES 1
#define REGM_WA 1
#define REGM_ROT 4
#define REGM_MT 8
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_res_mt8_r4
#include "cuda/sm90_regm_body.cuh"
#endif

typedef void (*sm90_kernel_fn)(nvfp4_sm90_params);
typedef void (*sm90_split_fn)(nvfp4_sm90_split_params);
typedef void (*sm90_small_fn)(nvfp4_sm90_small_params);
typedef void (*sm90_regm_fn)(nvfp4_sm90_regm_params);
/* Indexed like nvfp4_sm90_variants: wgmma kernels, then the small-M ones. */
static const sm90_kernel_fn sm90_kernels[NVFP4_SM90_NUM_VARIANTS] = {
    nvfp4_sm90_gemm_bn8_nc1,  nvfp4_sm90_gemm_bn16_nc1,  nvfp4_sm90_gemm_bn32_nc1,
    nvfp4_sm90_gemm_bn64_nc1, nvfp4_sm90_gemm_bn64_nc2,  nvfp4_sm90_gemm_bn128_nc1,
    nvfp4_sm90_gemm_bn128_nc2, nvfp4_sm90_gemm_bn256_nc2,
    /* 8..25: the mma.sync kinds (tables below) */
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    nvfp4_sm90_gemm_bn176_nc2, nvfp4_sm90_gemm_bn192_nc2, nvfp4_sm90_gemm_bn232_nc2,
    nvfp4_sm90_ss_bn64_nc1, nvfp4_sm90_ss_bn128_nc1,
};
/* The kernel that runs a GEMM with K slices: the same, or in the lean build
 * the variant's twin with the slice code (indexed as sm90_kernels). */
#if defined(NVFP4_SM90_LEAN) && NVFP4_SM90_LEAN
static const sm90_kernel_fn sm90_sliced_kernels[NVFP4_SM90_NUM_VARIANTS] = {
    nvfp4_sm90_gemm_bn8_nc1_sl,  nvfp4_sm90_gemm_bn16_nc1_sl, nvfp4_sm90_gemm_bn32_nc1_sl,
    nvfp4_sm90_gemm_bn64_nc1_sl, nvfp4_sm90_gemm_bn64_nc2_sl,
};
#else
#define sm90_sliced_kernels sm90_kernels
#endif
static const sm90_small_fn sm90_small_kernels[NVFP4_SM90_NUM_VARIANTS] = {
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    nvfp4_sm90_small_mt8_r1,  nvfp4_sm90_small_mt8_r2,  nvfp4_sm90_small_mt8_r4,
    nvfp4_sm90_small_mt16_r1, nvfp4_sm90_small_mt16_r2, nvfp4_sm90_small_mt16_r4,
};
/* [MT 8, 16, 32][TW - 1] */
static const sm90_split_fn sm90_split_kernels[3][4] = {
    {nvfp4_sm90_split_mt8_tw1, nvfp4_sm90_split_mt8_tw2, nvfp4_sm90_split_mt8_tw3, nvfp4_sm90_split_mt8_tw4},
    {nvfp4_sm90_split_mt16_tw1, nvfp4_sm90_split_mt16_tw2, nvfp4_sm90_split_mt16_tw3,
     nvfp4_sm90_split_mt16_tw4},
    {nvfp4_sm90_split_mt32_tw1, nvfp4_sm90_split_mt32_tw2, NULL, NULL},
};
/* [MT 8, 16, 32][TW 1, 2, 4] */
static const sm90_regm_fn sm90_regm_kernels[3][3] = {
    {nvfp4_sm90_regm_mt8_tw1, nvfp4_sm90_regm_mt8_tw2, nvfp4_sm90_regm_mt8_tw4},
    {nvfp4_sm90_regm_mt16_tw1, nvfp4_sm90_regm_mt16_tw2, nvfp4_sm90_regm_mt16_tw4},
    {nvfp4_sm90_regm_mt32_tw1, nvfp4_sm90_regm_mt32_tw2, nvfp4_sm90_regm_mt32_tw4},
};
/* [MT 8, 16][TW 1, 2] */
static const sm90_regm_fn sm90_regw_kernels[2][2] = {
    {nvfp4_sm90_regw_mt8_tw1, nvfp4_sm90_regw_mt8_tw2},
    {nvfp4_sm90_regw_mt16_tw1, nvfp4_sm90_regw_mt16_tw2},
};
/* [MT 8, 16][R - 2] */
static const sm90_regm_fn sm90_regr_kernels[2][3] = {
    {nvfp4_sm90_regr_mt8_r2, nvfp4_sm90_regr_mt8_r3, nvfp4_sm90_regr_mt8_r4},
    {nvfp4_sm90_regr_mt16_r2, nvfp4_sm90_regr_mt16_r3, nvfp4_sm90_regr_mt16_r4},
};
/* the in-kernel A producer's twins, MT = 8: REGM [TW 1, 2], REGW (TW 1), REGR [R - 2] */
static const sm90_regm_fn sm90_regm_bf16_kernels[2] = {nvfp4_sm90_regm_bf16_mt8_tw1, nvfp4_sm90_regm_bf16_mt8_tw2};
static const sm90_regm_fn sm90_regw_bf16_kernel = nvfp4_sm90_regw_bf16_mt8_tw1;
static const sm90_regm_fn sm90_regr_bf16_kernels[3] = {nvfp4_sm90_regr_bf16_mt8_r2, nvfp4_sm90_regr_bf16_mt8_r3,
                                                      nvfp4_sm90_regr_bf16_mt8_r4};
#if NVFP4_SM90_REGR_IL
/* REGR with interleaved rows, indexed as the two tables above */
static const sm90_regm_fn sm90_regr_il_kernels[2][3] = {
    {nvfp4_sm90_regr_il_mt8_r2, nvfp4_sm90_regr_il_mt8_r3, nvfp4_sm90_regr_il_mt8_r4},
    {nvfp4_sm90_regr_il_mt16_r2, nvfp4_sm90_regr_il_mt16_r3, nvfp4_sm90_regr_il_mt16_r4},
};
static const sm90_regm_fn sm90_regr_bf16_il_kernels[3] = {
    nvfp4_sm90_regr_bf16_il_mt8_r2, nvfp4_sm90_regr_bf16_il_mt8_r3, nvfp4_sm90_regr_bf16_il_mt8_r4};
#endif
#if NVFP4_SM90_REGR_F16
/* REGR on FP16 activations [MT 8, 16][R - 2] */
static const sm90_regm_fn sm90_regr_f16_kernels[2][3] = {
    {nvfp4_sm90_regr_f16_mt8_r2, nvfp4_sm90_regr_f16_mt8_r3, nvfp4_sm90_regr_f16_mt8_r4},
    {nvfp4_sm90_regr_f16_mt16_r2, nvfp4_sm90_regr_f16_mt16_r3, nvfp4_sm90_regr_f16_mt16_r4},
};
#endif
#if NVFP4_SM90_REGR_RES
/* REGR with resident activations, MT = 8 [R - 2] */
static const sm90_regm_fn sm90_regr_res_kernels[3] = {nvfp4_sm90_regr_res_mt8_r2, nvfp4_sm90_regr_res_mt8_r3,
                                                     nvfp4_sm90_regr_res_mt8_r4};
#endif

/* ------------------------------------------------------------------------ */
/* Activation pre-pass: one thread per half block (8 elements), so that a
 * warp's 16-byte stores cover 512 contiguous bytes (one thread per block
 * with two 16-byte stores wrote each 32-byte sector in two halves: attn-out
 * at M = 2048 took 16.3 us, L2-bound at 76 %, for 37 MB of traffic).       */
extern "C" __global__ void __launch_bounds__(256)
    nvfp4_sm90_dequant_act(const uint8_t *__restrict__ codes, const uint8_t *__restrict__ scales,
                           uint16_t *__restrict__ act, int m, int k, unsigned *__restrict__ sk_counters,
                           int sk_count)
{
    const int nb = k / 16;
    /* the GEMM after it is its programmatic dependent: it may start its
     * prologue now and waits (griddepcontrol.wait) for these writes */
    ptx_griddep_launch_dependents();
    /* its stream-K counters start at 0 (no memset between the two launches,
     * which would serialise them) */
    if (blockIdx.x == 0)
        for (int i = threadIdx.x; i < sk_count; i += blockDim.x) sk_counters[i] = 0u;
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (int64_t)m * nb * 2) return;
    const int64_t blk = idx >> 1;
    const int h = (int)(idx & 1);
    const int row = (int)(blk / nb), kb = (int)(blk % nb);
    const int ncb = (nb + 3) / 4;
    /* slots 8h .. 8h+7 in the operand order: nibble h of all 8 code bytes */
    const uint2 w = *(const uint2 *)(codes + (size_t)row * (k / 2) + (size_t)kb * 8);
    uint32_t o[4];
    nvfp4_sm90_dequant_half(w, h, scales[nvfp4_tiled_offset(row, kb, ncb)], o);
    *(uint4 *)(act + (size_t)row * k + (size_t)kb * 16 + 8 * h) = make_uint4(o[0], o[1], o[2], o[3]);
}

/* ------------------------------------------------------------------------ */
/* Host side.                                                               */

typedef CUresult (*encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                    const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                    const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                    CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static encode_tiled_fn get_encode_tiled(void)
{
    static encode_tiled_fn fn = NULL;
    if (!fn) {
        void *p = NULL;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                             &q) == cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            fn = (encode_tiled_fn)p;
    }
    return fn;
}

typedef struct sm90_device_info {
    int ok;
    int num_sms;
    size_t smem_optin;
    size_t smem_per_sm;
    size_t smem_set[NVFP4_SM90_NUM_VARIANTS];
    size_t sliced_smem_set[NVFP4_SM90_NUM_VARIANTS]; /* sm90_sliced_kernels, where they differ */
    size_t split_smem_set[3][4]; /* the split kernels, [MT][TW - 1] */
    size_t regm_smem_set[3][3];  /* the register kernels, [MT][TW 1, 2, 4] */
    size_t regw_smem_set[2][2];   /* ... with the weights as the A operand, [MT][TW 1, 2] */
    size_t regr_smem_set[2][3];   /* ... and rotating MMA warps, [MT][R - 2] */
    size_t regm_bf16_smem_set[2]; /* the in-kernel A producer's twins (MT = 8): REGM [TW 1, 2], */
    size_t regw_bf16_smem_set;    /* REGW (TW 1), */
    size_t regr_bf16_smem_set[3]; /* REGR [R - 2] */
    size_t regr_il_smem_set[2][3];   /* REGR with interleaved rows (NVFP4_SM90_REGR_IL), [MT][R - 2], */
    size_t regr_bf16_il_smem_set[3]; /* and its twins [R - 2] */
    size_t regr_res_smem_set[3];     /* REGR with resident activations (NVFP4_SM90_REGR_RES), [R - 2] */
    size_t regr_f16_smem_set[2][3];  /* REGR on FP16 activations (NVFP4_SM90_REGR_F16), [MT][R - 2] */
} sm90_device_info;

#define SM90_MAX_DEVICES 16
static sm90_device_info sm90_devices[SM90_MAX_DEVICES];

static int sm90_forced_variant = -1;

extern "C" void nvfp4_sm90_force_variant(int v)
{
    sm90_forced_variant = (v >= 0 && v < NVFP4_SM90_NUM_VARIANTS) ? v : -1;
}

/* Testing hook: the wgmma kernel's BF16 epilogue staged where out is
 * 16-byte aligned (-1), or element by element (0). */
static int sm90_epilogue = -1;
extern "C" void nvfp4_sm90_force_epilogue(int staged) { sm90_epilogue = staged == 0 ? 0 : -1; }

/* The wgmma kernel's producer mode (SM90_PROD_* bits); -1: the default. */
static int sm90_producer = -1;
extern "C" void nvfp4_sm90_force_producer(int mode) { sm90_producer = mode < 0 ? -1 : mode & 7; }
/* 0: the default producer mode as it was before early weights (SM90_PROD_WAITING) */
static int sm90_early_w = 1;
extern "C" void nvfp4_sm90_dev_early_weights(int on) { sm90_early_w = on != 0; }

/* dev/cuda experiments: the register kernel's dev_mode (REGM_DEV_* bits). */
static int sm90_dev_mode = 0;
extern "C" void nvfp4_sm90_force_dev_mode(int mode) { sm90_dev_mode = mode; }

/* Tests and benchmarks: the in-kernel A producer always where the plan
 * allows it (1), never (0), or by the heuristic (-1). */
static int sm90_inkernel_a = -1;
extern "C" void nvfp4_sm90_force_inkernel_a(int mode) { sm90_inkernel_a = mode < 0 ? -1 : mode > 0; }

/* The register kernel of variant var (kind REGM, REGW or REGR) -- its
 * in-kernel A producer twin if bf16, REGR's interleaved-row kernel if il,
 * its resident-activation kernel if res, its FP16-activation kernel if f16
 * -- and where its raised shared-memory size is kept; NULL where none is
 * built. */
static sm90_regm_fn regm_kernel_of(const nvfp4_sm90_variant *var, int bf16, int il, int res, int f16,
                                   sm90_device_info *dev, size_t **smem_set)
{
    const int rot = var->kind == NVFP4_SM90_REGR, wa = var->kind == NVFP4_SM90_REGW;
    const int mi = var->bn == 8 ? 0 : var->bn == 16 ? 1 : var->bn == 32 ? 2 : -1;
    /* chains per MMA warp (REGR: one; var->r is its warps per chain) */
    const int tw = rot ? 1 : var->r, ti = tw == 1 ? 0 : tw == 2 ? 1 : tw == 4 ? 2 : -1;
    const int ri = rot ? var->r - 2 : -1;
    *smem_set = NULL;
    if (mi < 0 || ti < 0 || (rot && (ri < 0 || ri > 2)) || ((rot || wa) && mi > 1) || (bf16 && mi != 0))
        return NULL;
    if (f16) {
#if NVFP4_SM90_REGR_F16
        if (!rot || bf16 || il || res) return NULL;
        *smem_set = &dev->regr_f16_smem_set[mi][ri];
        return sm90_regr_f16_kernels[mi][ri];
#else
        return NULL;
#endif
    }
    if (res) {
#if NVFP4_SM90_REGR_RES
        if (!rot || bf16 || il || mi != 0) return NULL;
        *smem_set = &dev->regr_res_smem_set[ri];
        return sm90_regr_res_kernels[ri];
#else
        return NULL;
#endif
    }
    if (il) {
#if NVFP4_SM90_REGR_IL
        if (!rot) return NULL;
        *smem_set = bf16 ? &dev->regr_bf16_il_smem_set[ri] : &dev->regr_il_smem_set[mi][ri];
        return bf16 ? sm90_regr_bf16_il_kernels[ri] : sm90_regr_il_kernels[mi][ri];
#else
        return NULL;
#endif
    }
    if (rot) {
        *smem_set = bf16 ? &dev->regr_bf16_smem_set[ri] : &dev->regr_smem_set[mi][ri];
        return bf16 ? sm90_regr_bf16_kernels[ri] : sm90_regr_kernels[mi][ri];
    }
    if (wa) {
        if (ti > 1 || (bf16 && ti != 0)) return NULL;
        *smem_set = bf16 ? &dev->regw_bf16_smem_set : &dev->regw_smem_set[mi][ti];
        return bf16 ? sm90_regw_bf16_kernel : sm90_regw_kernels[mi][ti];
    }
    if (bf16 && ti > 1) return NULL;
    *smem_set = bf16 ? &dev->regm_bf16_smem_set[ti] : &dev->regm_smem_set[mi][ti];
    return bf16 ? sm90_regm_bf16_kernels[ti] : sm90_regm_kernels[mi][ti];
}

/* The in-kernel A producer's plan from the register kernel's: each stage
 * also holds the chunk's BF16 box and the threshold table comes last, so the
 * ring may be shallower (REGR: still a multiple of R).  0, or -1 if it does
 * not fit. */
/* A register kernel's ring in smem_optin bytes: `fixed` bytes and as many
 * stages of `stage` bytes as fit, at most cap, a multiple of `multiple`
 * (REGR: R x REGR_TURN) -- into plan's stages and smem.  0, or -1 (plan
 * unchanged) if fewer than two stages fit. */
static int regm_ring_fit(nvfp4_sm90_plan *plan, size_t fixed, size_t stage, size_t cap, size_t multiple,
                         size_t smem_optin)
{
    if (fixed + 2 * stage > smem_optin) return -1;
    size_t nst = (smem_optin - fixed) / stage;
    if (nst > cap) nst = cap;
    nst -= nst % multiple;
    if (nst < 2) return -1;
    plan->stages = (int)nst;
    plan->smem = fixed + nst * stage;
    return 0;
}

static int regm_bf16_plan(nvfp4_sm90_plan *plan, const nvfp4_sm90_variant *var, int64_t m, size_t smem_optin)
{
    const int rot = var->kind == NVFP4_SM90_REGR, wa = rot || var->kind == NVFP4_SM90_REGW;
    const size_t units = (size_t)plan->tiles_per_cta, mt = (size_t)var->bn;
    if (m < 1 || m > var->bn) return -1;
    /* the BF16 box holds M rows (a deeper ring at M = 1 than MT rows would leave) */
    const size_t stage = (wa ? REGW_STAGE_BYTES(mt, units) : REGM_STAGE_BYTES(mt, units)) + REGM_XBOX_BYTES(m);
    const size_t fixed = (wa ? REGW_SMEM(mt, units, 0) : REGM_SMEM(mt, units, 0)) +
                         (rot ? REGR_SLOT_BYTES(mt, units) : 0) + REGM_QTAB_BYTES;
    return regm_ring_fit(plan, fixed, stage, (size_t)plan->stages, rot ? (size_t)var->r * REGR_TURN : 1,
                         smem_optin);
}

/* REGR with interleaved rows (NVFP4_SM90_REGR_IL): 1 where it applies --
 * the plan runs REGR with REGR_IL_PER chains a CTA, N % 128 == 0, and a
 * grid of REGR_IL_CPG CTAs per 128-row group takes no more waves than the
 * plan's -- with the plan's grid, ring depth and shared memory made the
 * layout's (bf16: the in-kernel A producer's stage, with the BF16 box of M
 * rows and the table); else 0, the plan unchanged. */
static int regr_il_plan(nvfp4_sm90_plan *plan, const nvfp4_sm90_variant *var, int64_t m, int64_t n, int bf16,
                        int num_sms, size_t smem_optin)
{
    /* chains per CTA (two 8-row units each): the kernels are built for REGR_IL_PER */
    if (!NVFP4_SM90_REGR_IL || var->kind != NVFP4_SM90_REGR || n % 128 != 0 || num_sms < 1 ||
        plan->tiles_per_cta != 2 * REGR_IL_PER)
        return 0;
    const int64_t grid = n / 128 * REGR_IL_CPG;
    if (grid > INT32_MAX || (grid + num_sms - 1) / num_sms > ((int64_t)plan->grid + num_sms - 1) / num_sms)
        return 0;
    const size_t units = (size_t)plan->tiles_per_cta, mt = (size_t)var->bn;
    const size_t stage = REGR_IL_STAGE_BYTES(mt, units) + (bf16 ? REGM_XBOX_BYTES(m) : 0);
    const size_t fixed = REGR_IL_SMEM(mt, units, 0) + REGR_SLOT_BYTES(mt, units) + (bf16 ? REGM_QTAB_BYTES : 0);
    if (regm_ring_fit(plan, fixed, stage, REGM_MAX_STAGES, (size_t)var->r * REGR_TURN, smem_optin) != 0) return 0;
    plan->grid = (int)grid;
    return 1;
}

/* REGR with resident activations (NVFP4_SM90_REGR_RES): 1 where it applies
 * -- REGR at MT = 8, NVFP4 activations (not bf16), M <= REGR_RES_ROWS, and
 * the fragments of K fit beside a ring of at least R stages -- with the
 * plan's ring depth and shared memory made the layout's (a multiple of R,
 * REGM_MAX_STAGES at most); else 0, the plan unchanged. */
static int regr_res_plan(nvfp4_sm90_plan *plan, const nvfp4_sm90_variant *var, int64_t m, int64_t k, int bf16,
                         size_t smem_optin)
{
    if (!NVFP4_SM90_REGR_RES || bf16 || var->kind != NVFP4_SM90_REGR || var->bn != 8 || m < 1 ||
        m > REGR_RES_ROWS || k < 1)
        return 0;
    const size_t units = (size_t)plan->tiles_per_cta;
    const size_t stage = REGR_RES_STAGE_BYTES(units), fixed = REGR_RES_SMEM(units, 0, k);
    return regm_ring_fit(plan, fixed, stage, REGM_MAX_STAGES, (size_t)var->r * REGR_TURN, smem_optin) == 0;
}

/* Whether REGR reads FP16 activations (NVFP4_SM90_REGR_F16) in a GEMM of
 * variant var: with act_ready the fused linear's quantizer wrote them (bit
 * 0), else the pre-pass will (bit 1). */
static int regr_f16_takes(const nvfp4_sm90_variant *var, int act_ready)
{
    return var->kind == NVFP4_SM90_REGR && (NVFP4_SM90_REGR_F16 & (act_ready ? 1 : 2)) != 0;
}

/* Its ring (REGR_F16_STAGE_BYTES): the plan's depth and shared memory made
 * the layout's, a multiple of R.  0, or -1 if not even R stages fit. */
static int regr_f16_plan(nvfp4_sm90_plan *plan, const nvfp4_sm90_variant *var, size_t smem_optin)
{
    const size_t units = (size_t)plan->tiles_per_cta, mt = (size_t)var->bn;
    const size_t stage = REGR_F16_STAGE_BYTES(mt, units), fixed = REGR_F16_SMEM(mt, units, 0);
    return regm_ring_fit(plan, fixed, stage, REGM_MAX_STAGES, (size_t)var->r * REGR_TURN, smem_optin);
}

static nvfp4_status device_info(sm90_device_info **out)
{
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess)
        return nvfp4_fail(NVFP4_ERR_NO_DEVICE, "gemm (cuda): cudaGetDevice: %s", cudaGetErrorString(e));
    if (dev < 0 || dev >= SM90_MAX_DEVICES)
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "gemm (cuda): device index %d above %d", dev,
                          SM90_MAX_DEVICES - 1);
    sm90_device_info *d = &sm90_devices[dev];
    if (!d->ok) {
        int major = 0, minor = 0, sms = 0, optin = 0, per_sm = 0;
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
        cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev);
        if (major != 9 || minor != 0)
            return nvfp4_fail(NVFP4_ERR_UNSUPPORTED,
                              "gemm (cuda): device %d is sm_%d%d; this kernel needs sm_90 (H100/H200)",
                              dev, major, minor);
        d->num_sms = sms;
        d->smem_optin = (size_t)optin;
        d->smem_per_sm = (size_t)per_sm;
        d->ok = 1;
    }
    *out = d;
    return NVFP4_OK;
}

/* Workspace layout (256-byte aligned parts): the FP16 activations [M][K]
 * (each block in the operand order, nvfp4_sm90_operand_elem);
 * then, for M > NVFP4_SM90_SK_MIN_M, the wgmma kernel's stream-K area: a
 * counter per CTA, then one tile's FP32 accumulators per CTA (as many CTAs
 * as there can be tiles, at most NVFP4_SM90_SK_MAX_CTAS). */
static size_t ws_act_bytes(int64_t m, int64_t k) { return ((size_t)m * (size_t)k * 2 + 255) / 256 * 256; }
#define SK_FLAG_BYTES ((NVFP4_SM90_SK_MAX_CTAS * 4 + 255) / 256 * 256)

static size_t ws_sk_bytes(int64_t m, int64_t n)
{
    if (m <= NVFP4_SM90_SK_MIN_M) return 0;
    const int64_t tiles = ((n + 127) / 128) * ((m + 127) / 128); /* tiles of 128 x >= 128, at most */
    const int64_t ctas = tiles < NVFP4_SM90_SK_MAX_CTAS ? tiles : NVFP4_SM90_SK_MAX_CTAS;
    return SK_FLAG_BYTES + (size_t)ctas * NVFP4_SM90_SK_SLOT_FLOATS * sizeof(float);
}

extern "C" size_t nvfp4_cuda_gemm_workspace(int64_t m, int64_t n, int64_t k)
{
    if (m <= 0 || k <= 0) return 0;
    return ws_act_bytes(m, k) + (n > 0 && m <= INT32_MAX && n <= INT32_MAX ? ws_sk_bytes(m, n) : 0);
}

extern "C" int nvfp4_sm90_gemm_sk_counters(void *workspace, int64_t m, int64_t n, int64_t k, unsigned **counters)
{
    *counters = NULL;
    if (!workspace || m <= 0 || n <= 0 || k <= 0 || m > INT32_MAX || n > INT32_MAX || ws_sk_bytes(m, n) == 0)
        return 0;
    *counters = (unsigned *)((uint8_t *)workspace + ws_act_bytes(m, k));
    return NVFP4_SM90_SK_MAX_CTAS;
}

static int misaligned(const void *p, uintptr_t a) { return ((uintptr_t)p & (a - 1)) != 0; }

/* Raise a kernel's dynamic shared-memory limit to `smem`, once per device
 * and kernel (the attribute is sticky; *set caches it). */
static nvfp4_status raise_smem_to(size_t *set, size_t smem, const void *kern)
{
    if (*set >= smem) return NVFP4_OK;
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* reported here, not left for the next call */
        return nvfp4_fail(NVFP4_ERR_CUDA, "gemm (cuda): shared memory of %zu bytes: %s", smem,
                          cudaGetErrorString(e));
    }
    *set = smem;
    return NVFP4_OK;
}

static nvfp4_status raise_smem(sm90_device_info *dev, const nvfp4_sm90_plan *plan, const void *kern)
{
    return raise_smem_to(&dev->smem_set[plan->variant], plan->smem, kern);
}

static cudaError_t launch_dequant_act(const nvfp4_cuda_operand *a, void *workspace, int64_t m,
                                      int64_t k, unsigned *sk_counters, int sk_count, cudaStream_t stream)
{
    const int64_t halves = m * (k / 16) * 2; /* one thread each */
    nvfp4_sm90_dequant_act<<<(unsigned)((halves + 255) / 256), 256, 0, stream>>>(
        a->codes, a->scales, (uint16_t *)workspace, (int)m, (int)k, sk_counters, sk_count);
    return cudaGetLastError();
}

/* The small-M kernels' tensor maps: codes as [rows][K/2] bytes (box 128 x
 * rows-per-box, 128-byte swizzle) and, unless scales_map is NULL, the
 * 128x4-tiled scales as {256 bytes, 2 halves, 512-byte chunks} (box 256 x ah
 * x 4: one 256-element chunk of K). */
/* The codes map ({128, box_rows} boxes, 128-byte swizzle) and, if
 * scales_map, the scales map of an operand: the 128x4-tiled layout as {256
 * bytes, 2 halves, 512-byte chunks}, boxes {sbox bytes, ah halves, 4
 * chunks} (sbox 256, or fewer: the lines of the first sbox / 16 rows). */
static nvfp4_status split_map(encode_tiled_fn encode, CUtensorMap *codes_map, CUtensorMap *scales_map,
                              const nvfp4_cuda_operand *op, int64_t rows, int64_t k, int ncb,
                              int box_rows, int ah, int sbox, const char *what)
{
    {
        cuuint64_t dims[2] = {(cuuint64_t)(k / 2), (cuuint64_t)rows};
        cuuint64_t strides[1] = {(cuuint64_t)(k / 2)};
        cuuint32_t box[2] = {128, (cuuint32_t)box_rows};
        cuuint32_t estr[2] = {1, 1};
        CUresult r = encode(codes_map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)op->codes, dims, strides,
                            box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        if (r != CUDA_SUCCESS)
            return nvfp4_fail(NVFP4_ERR_CUDA, "gemm (cuda): %s code tensor map failed (CUresult %d)", what,
                              (int)r);
    }
    if (scales_map) {
        const int64_t chunks = (rows + 127) / 128 * ncb;
        cuuint64_t dims[3] = {256, 2, (cuuint64_t)chunks};
        cuuint64_t strides[2] = {256, 512};
        cuuint32_t box[3] = {(cuuint32_t)sbox, (cuuint32_t)ah, 4};
        cuuint32_t estr[3] = {1, 1, 1};
        CUresult r = encode(scales_map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, (void *)op->scales, dims,
                            strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        if (r != CUDA_SUCCESS)
            return nvfp4_fail(NVFP4_ERR_CUDA, "gemm (cuda): %s scale tensor map failed (CUresult %d)",
                              what, (int)r);
    }
    return NVFP4_OK;
}

/* The FP16 activations in the workspace ([m][k], the operand order) as
 * {64, box_rows} boxes, 128-byte swizzle: the wgmma kernels' A tiles and
 * REGR's B fragments (REGM_F16). */
static nvfp4_status f16_act_map(encode_tiled_fn encode, CUtensorMap *map, void *workspace, int64_t m, int64_t k,
                                int box_rows)
{
    cuuint64_t dims[2] = {(cuuint64_t)k, (cuuint64_t)m};
    cuuint64_t strides[1] = {(cuuint64_t)k * 2};
    cuuint32_t box[2] = {64, (cuuint32_t)box_rows};
    cuuint32_t estr[2] = {1, 1};
    CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, workspace, dims, strides, box, estr,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        return nvfp4_fail(NVFP4_ERR_CUDA, "gemm (cuda): activation tensor map failed (CUresult %d)", (int)r);
    return NVFP4_OK;
}

static nvfp4_status split_tensor_maps(encode_tiled_fn encode, const nvfp4_cuda_operand *a,
                                      const nvfp4_cuda_operand *b, int64_t m, int64_t n, int64_t k,
                                      int ncb, int mt, nvfp4_sm90_split_params *sp)
{
    nvfp4_status st = split_map(encode, &sp->tm_b_codes, &sp->tm_b_scales, b, n, k, ncb, 16, 1, 256, "weight");
    if (st != NVFP4_OK) return st;
    return split_map(encode, &sp->tm_a_codes, &sp->tm_a_scales, a, m, k, ncb, mt, SPLIT_AH(mt), 256,
                     "activation");
}

/* A 4-D byte tensor map (dims, byte strides of dims 1..3, box), or the
 * failure naming `what`. */
static nvfp4_status encode_u8_4d(encode_tiled_fn encode, CUtensorMap *map, const void *base, const cuuint64_t dims[4],
                                 const cuuint64_t strides[3], const cuuint32_t box[4], CUtensorMapSwizzle swizzle,
                                 const char *what)
{
    const cuuint32_t estr[4] = {1, 1, 1, 1};
    CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4, (void *)base, dims, strides, box, estr,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        return nvfp4_fail(NVFP4_ERR_CUDA, "gemm (cuda): %s tensor map failed (CUresult %d)", what, (int)r);
    return NVFP4_OK;
}

/* The register kernel's weight scales: the 128x4-tiled layout as {256
 * bytes, 2 halves, ncb chunks, 128-row groups}; one box {256, 2, 4, SGMAX}
 * holds the 4 chunks of a 256-element chunk of K for every group a CTA spans. */
static nvfp4_status regm_scale_map(encode_tiled_fn encode, CUtensorMap *map, const nvfp4_cuda_operand *op,
                                   int64_t rows, int ncb, int tmax)
{
    const cuuint64_t dims[4] = {256, 2, (cuuint64_t)ncb, (cuuint64_t)((rows + 127) / 128)};
    const cuuint64_t strides[3] = {256, 512, (cuuint64_t)ncb * 512};
    const cuuint32_t box[4] = {256, 2, 4, (cuuint32_t)REGM_SGMAX(tmax)};
    return encode_u8_4d(encode, map, op->scales, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_NONE, "weight scale");
}

/* REGR with interleaved rows (REGR_IL_STAGE_BYTES): the weights' codes as
 * {K/2 bytes, 32 lines, 4 subgroups, N/128 groups} (row 128 G + 32 s + l),
 * boxes {128, L, 4, 1} with 128-byte swizzle, and the tiled scales as {16
 * bytes, 32 lines, ncb chunks, groups}, boxes {16, L, 4, 1}: L =
 * REGR_IL_LINES lines of every subgroup, 4 chunks (a 256-element chunk of
 * K). */
static nvfp4_status regr_il_maps(encode_tiled_fn encode, CUtensorMap *codes, CUtensorMap *scales,
                                 const nvfp4_cuda_operand *op, int64_t n, int64_t k, int ncb)
{
    const cuuint64_t row = (cuuint64_t)(k / 2), groups = (cuuint64_t)(n / 128);
    const cuuint64_t cdims[4] = {row, 32, 4, groups}, cstrides[3] = {row, 32 * row, 128 * row};
    const cuuint32_t cbox[4] = {128, REGR_IL_LINES, 4, 1};
    nvfp4_status st = encode_u8_4d(encode, codes, op->codes, cdims, cstrides, cbox, CU_TENSOR_MAP_SWIZZLE_128B,
                                   "weight code (interleaved rows)");
    if (st != NVFP4_OK) return st;
    const cuuint64_t sdims[4] = {16, 32, (cuuint64_t)ncb, groups}, sstrides[3] = {16, 512, (cuuint64_t)ncb * 512};
    const cuuint32_t sbox[4] = {16, REGR_IL_LINES, 4, 1};
    return encode_u8_4d(encode, scales, op->scales, sdims, sstrides, sbox, CU_TENSOR_MAP_SWIZZLE_NONE,
                        "weight scale (interleaved rows)");
}

/* Launch a GEMM kernel (one parameter struct) on the stream; after_producer:
 * as the programmatic dependent of the kernel before it; cluster: CTAs per
 * cluster (1: no cluster). */
static cudaError_t launch_small(const void *kern, int grid, int threads, size_t smem, cudaStream_t stream,
                                int after_producer, int cluster, void *params)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)grid);
    cfg.blockDim = dim3((unsigned)threads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[2];
    unsigned n = 0;
    if (after_producer) {
        attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[n++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (cluster > 1) {
        attr[n].id = cudaLaunchAttributeClusterDimension;
        attr[n].val.clusterDim.x = (unsigned)cluster;
        attr[n].val.clusterDim.y = 1;
        attr[n++].val.clusterDim.z = 1;
    }
    cfg.attrs = attr;
    cfg.numAttrs = n;
    void *kargs[1] = {params};
    cudaError_t e = cudaLaunchKernelExC(&cfg, kern, kargs);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* reported through our status: not left for the next call to find */
        return e;
    }
    return cudaGetLastError();
}

/* act_ready: the caller (the fused linear's A producer) has already written
 * the exact FP16 activations into args->workspace; skip the pre-pass.
 * after_producer: the previous kernel on the stream is the fused linear's
 * quantizer, which wrote A; the GEMM is then launched as its programmatic
 * dependent (its launch and prologue, and the first weight boxes, overlap
 * the quantizer's tail).  The stream-K counters are zeroed by the kernel
 * before the GEMM: the pre-pass, or with act_ready the fused linear's
 * quantizer (nvfp4_sm90_gemm_sk_counters); src (the in-kernel A producer)
 * runs only register kernels, which have none. */
static nvfp4_status gemm_impl(const nvfp4_cuda_gemm_args *args, int act_ready, int after_producer,
                              const nvfp4_sm90_bf16_act *src)
{
    if (!args) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "gemm (cuda): args is NULL");
    const nvfp4_cuda_operand *a = &args->a, *b = &args->b;
    const int64_t m = a->rows, n = b->rows, k = a->cols;
    if (src) act_ready = 1; /* no NVFP4 activations: the kernel quantizes src->x */
    if (src && (!src->x || (!src->static_pts && (!src->amax_bits || src->amax_n < 1)) || src->cols < 1 ||
                src->cols > k || src->cols % 8 != 0 || misaligned(src->x, 16)))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "gemm (cuda): BF16 activations for TMA need 16-byte aligned rows (a multiple of 8 columns)");
    if ((!act_ready && (!a->codes || !a->scales)) || (!src && !a->per_tensor_scale))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "gemm (cuda): A (activations) needs codes, scales and per_tensor_scale");
    if (!b->codes || !b->scales || !b->per_tensor_scale)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "gemm (cuda): B (weights) needs codes, scales and per_tensor_scale");
    if (m < 1 || n < 1 || k < 1)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "gemm (cuda): empty shape (M=%lld, N=%lld, K=%lld)", (long long)m,
                          (long long)n, (long long)k);
    if (b->cols != k)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "gemm (cuda): A has K=%lld columns but B has %lld", (long long)k,
                          (long long)b->cols);
    if (k % 16 != 0 || n % 16 != 0)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "gemm (cuda): K=%lld and N=%lld must be multiples of 16", (long long)k,
                          (long long)n);
    if (k % 32 != 0)
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED,
                          "gemm (cuda): K=%lld is not a multiple of 32: the TMA loads need 16-byte "
                          "code rows (pad K to 32; zero blocks do not change the result)",
                          (long long)k);
    if (m > INT32_MAX / 2 || n > INT32_MAX / 2 || k > INT32_MAX / 2)
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "gemm (cuda): a dimension exceeds 2^30");
    if ((!act_ready && (misaligned(a->codes, 16) || misaligned(a->scales, 16))) || misaligned(b->codes, 16) ||
        misaligned(b->scales, 16))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "gemm (cuda): codes and scales must be 16-byte aligned device pointers");
    if (args->k_slices < 0 || args->k_slices > NVFP4_MAX_K_SLICES)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "gemm (cuda): k_slices = %d is outside 1..%d",
                          args->k_slices, NVFP4_MAX_K_SLICES);
    const int slices = args->k_slices < 1 ? 1 : args->k_slices;
    if (!args->raw && !args->out) return NVFP4_OK; /* nothing asked for */
    size_t need = nvfp4_cuda_gemm_workspace(m, n, k);
    if (!args->workspace || args->workspace_bytes < need)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "gemm (cuda): workspace of %zu bytes is too small (need %zu: "
                          "nvfp4_cuda_gemm_workspace)",
                          args->workspace_bytes, need);
    if (misaligned(args->workspace, 256))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "gemm (cuda): workspace must be 256-byte aligned (cudaMalloc'ed)");

    sm90_device_info *dev = NULL;
    nvfp4_status st = device_info(&dev);
    if (st != NVFP4_OK) return st;
    encode_tiled_fn encode = get_encode_tiled();
    if (!encode)
        return nvfp4_fail(NVFP4_ERR_CUDA, "gemm (cuda): cuTensorMapEncodeTiled not found in the driver");

    nvfp4_sm90_plan plan;
    const int forced = sm90_forced_variant;
    if (nvfp4_sm90_plan_gemm(m, n, k, slices, dev->num_sms, dev->smem_optin, dev->smem_per_sm, forced, &plan) != 0)
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED,
                          "gemm (cuda): no kernel variant for M=%lld (forced variant %d)", (long long)m, forced);
    const nvfp4_sm90_variant var = nvfp4_sm90_variants[plan.variant];
    if (var.kind == NVFP4_SM90_REGR && REGR_TURN > 1) { /* turns of REGR_TURN chunks: a multiple of R x TURN */
        plan.stages -= plan.stages % (REGR_TURN * var.r);
        if (plan.stages < 2)
            return nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "gemm (cuda): REGR ring too shallow for turns of %d chunks",
                              REGR_TURN);
    }

    cudaStream_t stream = (cudaStream_t)args->stream;
    /* 512-byte scale chunks per 128-row tile, and 64-element groups per K slice */
    const int ncb = (int)((k / 16 + 3) / 4);
    const int chunks_per_slice = (int)(nvfp4_k_slice_elems(k, slices) / 64);
    if (NVFP4_SM90_IS_SMALL(&var) && act_ready && !src && !regr_f16_takes(&var, 1))
        return nvfp4_fail(NVFP4_ERR_INTERNAL,
                          "gemm (cuda): the small-M kernels take NVFP4 activations, not FP16");
    size_t *smem_set = NULL;
    if (src && (!NVFP4_SM90_IS_REG(&var) || !regm_kernel_of(&var, 1, 0, 0, 0, dev, &smem_set) ||
                regm_bf16_plan(&plan, &var, m, dev->smem_optin) != 0))
        return nvfp4_fail(NVFP4_ERR_INTERNAL,
                          "gemm (cuda): no in-kernel A producer for variant %d (M=%lld)", plan.variant, (long long)m);
    if (var.kind == NVFP4_SM90_REGM || var.kind == NVFP4_SM90_REGW || var.kind == NVFP4_SM90_REGR) {
        /* the register small-M kernels: NVFP4 weights and activations by TMA */
        const int rot = var.kind == NVFP4_SM90_REGR, wa = var.kind == NVFP4_SM90_REGW || rot;
        /* REGR with resident activations where it applies (its ring), else
         * with interleaved rows where that applies (its grid and ring) */
        const int res = !act_ready && regr_res_plan(&plan, &var, m, k, src != NULL, dev->smem_optin);
        /* REGR on FP16 activations where that option applies (its ring) */
        const int f16 = !src && !res && regr_f16_takes(&var, act_ready);
        if (f16 && regr_f16_plan(&plan, &var, dev->smem_optin) != 0)
            return nvfp4_fail(NVFP4_ERR_INTERNAL, "gemm (cuda): no ring for REGR on FP16 activations (MT=%d)",
                              var.bn);
        const int il = res || f16 ? 0 : regr_il_plan(&plan, &var, m, n, src != NULL, dev->num_sms, dev->smem_optin);
        nvfp4_sm90_regm_params rp;
        memset(&rp, 0, sizeof rp);
        nvfp4_status mst = NVFP4_OK;
        if (il) {
            mst = regr_il_maps(encode, &rp.tm_b_codes, &rp.tm_b_scales, b, n, k, ncb);
        } else {
            mst = split_map(encode, &rp.tm_b_codes, NULL, b, n, k, ncb, 8 * plan.tiles_per_cta, 1, 256, "weight");
            if (mst == NVFP4_OK) mst = regm_scale_map(encode, &rp.tm_b_scales, b, n, ncb, plan.tiles_per_cta);
        }
        /* (interleaved: the activation scale boxes hold the lines of MT rows only) */
        if (mst == NVFP4_OK && f16)
            mst = f16_act_map(encode, &rp.tm_a_f16, args->workspace, m, k, var.bn);
        else if (mst == NVFP4_OK && !src)
            mst = split_map(encode, &rp.tm_a_codes, &rp.tm_a_scales, a, m, k, ncb, var.bn, SPLIT_AH(var.bn),
                            il ? 16 * var.bn : 256, "activation");
        if (mst != NVFP4_OK) return mst;
        if (src) { /* BF16 x by TMA (one box per stage; the plan has room for it and the table) */
            cuuint64_t dims[2] = {(cuuint64_t)src->cols, (cuuint64_t)m};
            cuuint64_t strides[1] = {(cuuint64_t)src->cols * 2};
            cuuint32_t box[2] = {REGM_KC, (cuuint32_t)m};
            cuuint32_t estr[2] = {1, 1};
            CUresult r = encode(&rp.tm_x, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)src->x, dims, strides, box,
                                estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
            if (r != CUDA_SUCCESS)
                return nvfp4_fail(NVFP4_ERR_CUDA, "gemm (cuda): BF16 activation tensor map failed (CUresult %d)",
                                  (int)r);
            rp.x_cols = (int)src->cols;
            rp.x_rows = (int)m;
            rp.x_pts = src->static_pts;
            rp.x_amax = src->amax_bits;
            rp.x_amax_n = src->amax_n;
            rp.x_pts_out = src->pts_out;
            rp.x_codes = src->codes;
            rp.x_scales = src->scales;
            rp.cuda_variant = src->cuda_variant;
            after_producer = !src->static_pts; /* the amax pass's programmatic dependent */
        }
        if (src || (rot && NVFP4_SM90_REGR_ACT_ROT_AT(var.bn))) {
            /* as many activation warps as divide the ring's depth take chunks in turn */
            const int aw = rot ? REGR_AW(var.bn) : REGM_AW(var.bn, var.r);
            rp.act_rot = aw;
            while (plan.stages % rp.act_rot != 0) rp.act_rot--;
        }
        rp.a_scale2 = a->per_tensor_scale;
        rp.b_scale2 = b->per_tensor_scale;
        if (!src && !act_ready) {
            rp.a_codes = a->codes;
            rp.a_scales = a->scales;
        }
        rp.bias = args->bias;
        rp.raw = args->raw;
        rp.out = args->out;
        rp.m = (int)m;
        rp.n = (int)n;
        rp.k = (int)k;
        rp.ncb = ncb;
        rp.tiles = (int)plan.tiles;
        rp.tmax = plan.tiles_per_cta;
        rp.stages = plan.stages;
        rp.mma_warps = plan.mma_warps;
        rp.loaders = plan.loaders;
        /* the epilogue stores pairs (raw 8 bytes, out 4) where the pointers allow */
        rp.pair_stores = !misaligned(args->raw, 8) && !misaligned(args->out, 4);
        rp.chunks_per_slice = chunks_per_slice;
        rp.dev_mode = sm90_dev_mode;
        /* chains per MMA warp (REGR: one; var.r is its warps per chain) */
        const int tw = rot ? 1 : var.r;
        sm90_regm_fn kern = regm_kernel_of(&var, src != NULL, il, res, f16, dev, &smem_set);
        const int threads = 32 * (plan.loaders + (rot ? REGR_AW(var.bn) : REGM_AW(var.bn, tw)) + plan.mma_warps);
        const int max_threads = rot  ? REGR_THREADS_MAX(var.bn)
                                : wa ? REGW_THREADS_MAX(var.bn, tw)
                                     : REGM_THREADS_MAX(var.bn, tw);
        if (!kern || threads > max_threads)
            return nvfp4_fail(NVFP4_ERR_INTERNAL, "gemm (cuda): no register kernel for MT=%d, %d tiles per CTA",
                              var.bn, plan.tiles_per_cta);
        nvfp4_status sst = raise_smem_to(smem_set, plan.smem, (const void *)kern);
        if (sst != NVFP4_OK) return sst;
        if (f16 && !act_ready) { /* the pre-pass writes them; the GEMM its programmatic dependent */
            cudaError_t pe = launch_dequant_act(a, args->workspace, m, k, NULL, 0, stream);
            if (pe != cudaSuccess)
                return nvfp4_fail(NVFP4_ERR_CUDA, "gemm (cuda): activation pre-pass launch: %s",
                                  cudaGetErrorString(pe));
            after_producer = 1;
        }
        cudaError_t e = launch_small((const void *)kern, plan.grid, threads, plan.smem, stream, after_producer, 1, &rp);
        if (e != cudaSuccess)
            return nvfp4_fail(NVFP4_ERR_CUDA, "gemm (cuda): register small-M kernel launch (mt=%d, tw=%d): %s",
                              var.bn, tw, cudaGetErrorString(e));
        return NVFP4_OK;
    }
    if (var.kind == NVFP4_SM90_SPLIT) { /* the split small-M kernel: NVFP4 activations by TMA */
        nvfp4_sm90_split_params sp;
        memset(&sp, 0, sizeof sp);
        nvfp4_status mst = split_tensor_maps(encode, a, b, m, n, k, ncb, var.bn, &sp);
        if (mst != NVFP4_OK) return mst;
        sp.a_scale2 = a->per_tensor_scale;
        sp.b_scale2 = b->per_tensor_scale;
        sp.bias = args->bias;
        sp.raw = args->raw;
        sp.out = args->out;
        sp.m = (int)m;
        sp.n = (int)n;
        sp.k = (int)k;
        sp.ncb = ncb;
        sp.tiles = (int)plan.tiles;
        sp.tmax = plan.tiles_per_cta;
        sp.raw_stages = plan.stages;
        sp.frag_stages = plan.frag_stages;
        sp.chunks_per_slice = chunks_per_slice;
        const int tw = (plan.tiles_per_cta + SPLIT_MMA_WARPS - 1) / SPLIT_MMA_WARPS;
        const int mi = var.bn == 8 ? 0 : var.bn == 16 ? 1 : 2;
        sm90_split_fn kern = tw >= 1 && tw <= 4 ? sm90_split_kernels[mi][tw - 1] : NULL;
        if (!kern)
            return nvfp4_fail(NVFP4_ERR_INTERNAL, "gemm (cuda): no split kernel for MT=%d, %d tiles per CTA",
                              var.bn, plan.tiles_per_cta);
        nvfp4_status sst = raise_smem_to(&dev->split_smem_set[mi][tw - 1], plan.smem, (const void *)kern);
        if (sst != NVFP4_OK) return sst;
        cudaError_t e = launch_small((const void *)kern, plan.grid, SPLIT_THREADS_OF(var.bn, tw), plan.smem,
                                     stream, after_producer, 1, &sp);
        if (e != cudaSuccess)
            return nvfp4_fail(NVFP4_ERR_CUDA, "gemm (cuda): split small-M kernel launch (mt=%d): %s",
                              var.bn, cudaGetErrorString(e));
        return NVFP4_OK;
    }
    if (var.kind == NVFP4_SM90_SMALLM) { /* the small-M kernel: reads the NVFP4 activations itself */
        if (misaligned(args->raw, 8) || misaligned(args->out, 4))
            return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                              "gemm (cuda): raw must be 8-byte and out 4-byte aligned");
        nvfp4_sm90_small_params sp;
        memset(&sp, 0, sizeof sp);
        sp.a_codes = a->codes;
        sp.a_scales = a->scales;
        sp.b_codes = b->codes;
        sp.b_scales = b->scales;
        sp.a_scale2 = a->per_tensor_scale;
        sp.b_scale2 = b->per_tensor_scale;
        sp.bias = args->bias;
        sp.raw = args->raw;
        sp.out = args->out;
        sp.m = (int)m;
        sp.n = (int)n;
        sp.k = (int)k;
        sp.ncb = ncb;
        sp.chunks_per_slice = chunks_per_slice;
        sp.items = (int)plan.tiles;
        sm90_small_fn kern = sm90_small_kernels[plan.variant];
        nvfp4_status sst = raise_smem(dev, &plan, (const void *)kern);
        if (sst != NVFP4_OK) return sst;
        cudaError_t e;
        kern<<<plan.grid, 32 * (plan.stages + 1), plan.smem, stream>>>(sp);
        e = cudaGetLastError();
        if (e != cudaSuccess)
            return nvfp4_fail(NVFP4_ERR_CUDA, "gemm (cuda): small-M kernel launch (mt=%d, r=%d): %s",
                              var.bn, var.r, cudaGetErrorString(e));
        return NVFP4_OK;
    }

    nvfp4_sm90_params p;
    memset(&p, 0, sizeof p);
    st = f16_act_map(encode, &p.tmap_act, args->workspace, m, k, var.bn);
    if (st != NVFP4_OK) return st;
    p.producer = sm90_producer >= 0 ? sm90_producer
                 : sm90_early_w     ? SM90_PROD_DEFAULT(NVFP4_SM90_KSUB(var.bn, var.nc))
                                    : SM90_PROD_WAITING(NVFP4_SM90_KSUB(var.bn, var.nc));
    p.dev_mode = sm90_dev_mode;
    if ((p.producer & SM90_PROD_ACT3D) && var.kind != NVFP4_SM90_SS && k >= 64) {
        /* the same bytes seen as [chunk][row][64]: the row stride (2K)
         * above the chunk stride (128 B), so one box holds ksub chunks in
         * the stage's chunk-major order; full chunks only (K / 64) */
        const int ksub = NVFP4_SM90_KSUB(var.bn, var.nc);
        cuuint64_t dims[3] = {64, (cuuint64_t)m, (cuuint64_t)(k / 64)};
        cuuint64_t strides[2] = {(cuuint64_t)k * 2, 128};
        cuuint32_t box[3] = {64, (cuuint32_t)var.bn, (cuuint32_t)ksub};
        cuuint32_t estr[3] = {1, 1, 1};
        CUresult r = encode(&p.tmap_act3, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, args->workspace, dims,
                            strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        if (r != CUDA_SUCCESS) p.producer &= ~SM90_PROD_ACT3D; /* the 2-D boxes then */
    } else {
        p.producer &= ~SM90_PROD_ACT3D;
    }
    {
        cuuint64_t dims[2] = {(cuuint64_t)(k / 2), (cuuint64_t)n};
        cuuint64_t strides[1] = {(cuuint64_t)(k / 2)};
        /* the SS kernel takes one 64-K chunk per stage */
        const int ksub = var.kind == NVFP4_SM90_SS ? 1 : NVFP4_SM90_KSUB(var.bn, var.nc);
        cuuint32_t box[2] = {(cuuint32_t)(32 * ksub), (cuuint32_t)(64 * var.nc)};
        cuuint32_t estr[2] = {1, 1};
        CUresult r = encode(&p.tmap_codes, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)b->codes, dims,
                            strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        if (r != CUDA_SUCCESS)
            return nvfp4_fail(NVFP4_ERR_CUDA, "gemm (cuda): weight tensor map failed (CUresult %d)",
                              (int)r);
    }
    if (var.kind != NVFP4_SM90_SS) {
        const int ksub = NVFP4_SM90_KSUB(var.bn, var.nc);
        const int64_t rows256 = (n + 127) / 128 * (int64_t)ncb * 2; /* 128-row tiles x chunks x 2 */
        cuuint64_t dims[2] = {256, (cuuint64_t)rows256};
        cuuint64_t strides[1] = {256};
        cuuint32_t box[2] = {256, (cuuint32_t)(2 * ksub)};
        cuuint32_t estr[2] = {1, 1};
        CUresult r = encode(&p.tmap_scales, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)b->scales, dims,
                            strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        if (r != CUDA_SUCCESS)
            return nvfp4_fail(NVFP4_ERR_CUDA, "gemm (cuda): weight scale tensor map (wgmma kernel) failed (CUresult %d)",
                              (int)r);
    }
    p.b_scales = b->scales;
    p.a_scale2 = a->per_tensor_scale;
    p.b_scale2 = b->per_tensor_scale;
    p.bias = args->bias;
    p.raw = args->raw;
    p.out = args->out;
    p.out_staged = sm90_epilogue != 0 && args->out && !misaligned(args->out, 16);
    p.m = (int)m;
    p.n = (int)n;
    p.k = (int)k;
    p.ncb = ncb;
    p.num_at = (int)((m + var.bn - 1) / var.bn);
    p.stages = plan.stages;
#if NVFP4_SM90_MCAST
    /* activation multicast over clusters of two (sm90_gemm_body.cuh) */
    p.mcast = nvfp4_sm90_plan_mcast(&plan, m);
    if (p.mcast) {
        cuuint64_t dims[2] = {(cuuint64_t)k, (cuuint64_t)m};
        cuuint64_t strides[1] = {(cuuint64_t)k * 2};
        cuuint32_t box[2] = {64, (cuuint32_t)(var.bn / 2)};
        cuuint32_t estr[2] = {1, 1};
        CUresult r = encode(&p.tmap_act_half, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, args->workspace, dims,
                            strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        if (r != CUDA_SUCCESS)
            return nvfp4_fail(NVFP4_ERR_CUDA, "gemm (cuda): half activation tensor map failed (CUresult %d)",
                              (int)r);
        p.producer &= ~SM90_PROD_ACT3D; /* half boxes of one chunk each */
    }
#endif
#if defined(NVFP4_SM90_PAIR) && NVFP4_SM90_PAIR
    /* NOTES: a consumer of the chunk-pair build holds three pairs at once
     * (the pair in flight, the one before it until wait_group retires it,
     * the next one waited for): six one-chunk stages with two consumers,
     * three two-chunk stages with one */
    const int pair_stages = 3 * (3 - NVFP4_SM90_KSUB(var.bn, var.nc)); /* three pairs of stages */
    if (var.kind == NVFP4_SM90_WGMMA && var.bn > 64 && var.bn <= NVFP4_SM90_PAIR_MAX_BN && plan.stages < pair_stages)
        return nvfp4_fail(NVFP4_ERR_INTERNAL, "gemm (cuda): chunk pairs need %d stages, the plan has %d", pair_stages,
                          plan.stages);
#endif
    p.chunks_per_slice = chunks_per_slice;
    p.num_tiles = plan.tiles;
    p.sk_tile0 = plan.sk_tile0;
    if (plan.sk_tile0 < plan.tiles) {
        /* the stream-K area (nvfp4_cuda_gemm_workspace); its counters start at 0 */
        uint8_t *sk = (uint8_t *)args->workspace + ws_act_bytes(m, k);
        if (plan.grid > NVFP4_SM90_SK_MAX_CTAS || m <= NVFP4_SM90_SK_MIN_M ||
            (size_t)plan.grid * NVFP4_SM90_SK_SLOT_FLOATS * sizeof(float) + SK_FLAG_BYTES > ws_sk_bytes(m, n))
            return nvfp4_fail(NVFP4_ERR_INTERNAL, "gemm (cuda): stream-K grid of %d CTAs exceeds its workspace",
                              plan.grid);
        p.sk_flags = (unsigned *)sk;
        p.sk_acc = (float *)(sk + SK_FLAG_BYTES);
    }

    /* the pre-pass zeroes the stream-K counters the GEMM after it uses */
    cudaError_t e = act_ready ? cudaSuccess
                              : launch_dequant_act(a, args->workspace, m, k, p.sk_flags,
                                                   p.sk_flags ? (int)plan.grid : 0, stream);
    if (e != cudaSuccess)
        return nvfp4_fail(NVFP4_ERR_CUDA, "gemm (cuda): activation pre-pass launch: %s",
                          cudaGetErrorString(e));

    /* with K slices, the kernel that carries their code (the kernel's own
     * test: chunks_per_slice < its chunk count) */
    const int sliced = chunks_per_slice < (int)((k + 63) / 64);
    sm90_kernel_fn kern = sliced ? sm90_sliced_kernels[plan.variant] : sm90_kernels[plan.variant];
    if (!kern)
        return nvfp4_fail(NVFP4_ERR_INTERNAL, "gemm (cuda): variant %d has no kernel for K slices", plan.variant);
    /* (the lean build's twins have their own shared-memory attribute) */
    st = kern == sm90_kernels[plan.variant] ? raise_smem(dev, &plan, (const void *)kern)
                                            : raise_smem_to(&dev->sliced_smem_set[plan.variant], plan.smem,
                                                            (const void *)kern);
    if (st != NVFP4_OK) return st;
    /* after the pre-pass (or the linear's quantizer), as its programmatic
     * dependent: the launch and prologue overlap its tail; every thread of
     * the register kernel waits (griddepcontrol.wait) before its first
     * global access */
    const int dependent = var.kind != NVFP4_SM90_SS && (!act_ready || after_producer);
    e = launch_small((const void *)kern, (int)plan.grid,
                     var.kind == NVFP4_SM90_SS ? SS_THREADS(var.nc) : 128 * (var.nc + 1), plan.smem, stream,
                     dependent, p.mcast ? 2 : 1, &p);
    if (e != cudaSuccess)
        return nvfp4_fail(NVFP4_ERR_CUDA, "gemm (cuda): kernel launch (bn=%d, nc=%d): %s", var.bn,
                          var.nc, cudaGetErrorString(e));
    return NVFP4_OK;
}

/* The variant the GEMM of this shape would run on this device, or NULL. */
static const nvfp4_sm90_variant *planned_variant(int64_t m, int64_t n, int64_t k, int k_slices)
{
    sm90_device_info *dev = NULL;
    nvfp4_sm90_plan plan;
    if (device_info(&dev) != NVFP4_OK) return NULL;
    if (nvfp4_sm90_plan_gemm(m, n, k, k_slices, dev->num_sms, dev->smem_optin, dev->smem_per_sm,
                             sm90_forced_variant, &plan) != 0)
        return NULL;
    return &nvfp4_sm90_variants[plan.variant];
}

extern "C" int nvfp4_sm90_gemm_takes_nvfp4_act(int64_t m, int64_t n, int64_t k, int k_slices)
{
    const nvfp4_sm90_variant *v = planned_variant(m, n, k, k_slices);
    return v && NVFP4_SM90_IS_SMALL(v) && !regr_f16_takes(v, 1);
}

extern "C" int nvfp4_sm90_gemm_plans_regr(int64_t m, int64_t n, int64_t k, int k_slices)
{
    const nvfp4_sm90_variant *v = planned_variant(m, n, k, k_slices);
    return v && v->kind == NVFP4_SM90_REGR;
}

extern "C" int nvfp4_sm90_gemm_quantizes_bf16(int64_t m, int64_t n, int64_t k, int k_slices)
{
    sm90_device_info *dev = NULL;
    nvfp4_sm90_plan plan;
    size_t *smem_set = NULL;
    if (sm90_inkernel_a == 0 || (sm90_inkernel_a < 0 && m > (int64_t)NVFP4_SM90_INKERNEL_A_MAX_M) ||
        device_info(&dev) != NVFP4_OK)
        return 0;
    if (nvfp4_sm90_plan_gemm(m, n, k, k_slices, dev->num_sms, dev->smem_optin, dev->smem_per_sm,
                             sm90_forced_variant, &plan) != 0)
        return 0;
    /* the planned kernel's twin, where one is built and its ring fits */
    const nvfp4_sm90_variant *v = &nvfp4_sm90_variants[plan.variant];
    if (!NVFP4_SM90_IS_REG(v) || !regm_kernel_of(v, 1, 0, 0, 0, dev, &smem_set) ||
        regm_bf16_plan(&plan, v, m, dev->smem_optin) != 0)
        return 0;
    /* where it measured faster than the quantizer kernel + GEMM (the
     * header), static and dynamic scale alike */
    return sm90_inkernel_a == 1 || (v->kind != NVFP4_SM90_REGM && k <= (int64_t)NVFP4_SM90_INKERNEL_A_STATIC_MAX_K);
}

extern "C" nvfp4_status nvfp4_gemm_cuda(const nvfp4_cuda_gemm_args *args)
{
    return gemm_impl(args, 0, 0, NULL);
}

extern "C" nvfp4_status nvfp4_sm90_gemm_from_f16(const nvfp4_cuda_gemm_args *args)
{
    /* the linear's quantizer wrote the FP16 operands just before, and
     * zeroed the stream-K counters: its programmatic dependent, as after the
     * pre-pass */
    return gemm_impl(args, 1, 1, NULL);
}

extern "C" nvfp4_status nvfp4_sm90_gemm_after_quantizer(const nvfp4_cuda_gemm_args *args)
{
    return gemm_impl(args, 0, 1, NULL);
}

extern "C" nvfp4_status nvfp4_sm90_gemm_quantizing(const nvfp4_cuda_gemm_args *args, const nvfp4_sm90_bf16_act *src)
{
    if (!src) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "gemm (cuda): no BF16 activation source");
    return gemm_impl(args, 1, 0, src);
}
