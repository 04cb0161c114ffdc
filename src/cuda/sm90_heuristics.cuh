/* sm90_heuristics.cuh -- tile choice for the sm_90a NVFP4 GEMM (plain C,
 * shared by sm90_heuristics.c and sm90_gemm.cu).
 *
 * A tile is (64 * nc weight rows) x (bn activation rows).  The choice only
 * moves work between CTAs: every output is always the same chain of one
 * wgmma k16 step per NVFP4 block in increasing k, so results never depend
 * on the tile (batch invariance). */
#ifndef NVFP4_CUDA_SM90_HEURISTICS_CUH
#define NVFP4_CUDA_SM90_HEURISTICS_CUH

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The compiled kernel variants.  Order matches the kernel tables in
 * sm90_gemm.cu.  Kinds:
 *   WGMMA  the persistent wgmma kernel (sm90_gemm_body.cuh): bn activation
 *          rows (wgmma N) x 64 nc weight rows per tile;
 *   SMALLM the first small-M mma.sync kernel (sm90_small_m.cuh): r n8 weight
 *          tiles per consumer warp, M <= bn;
 *   SPLIT  dequantizing warps feed MMA-only warps (sm90_split.cuh), M <= bn;
 *   REGM   MMA warps dequantize their own 8-row weight chains in
 *          registers (sm90_regm.cuh): r chains per MMA warp, M <= bn;
 *   SS     dequantizing warps write FP16 weight tiles to shared memory for
 *          one wgmma warpgroup (sm90_ss_body.cuh): bn x 64 per tile, any M;
 *          forced only (slower than WGMMA at M = 64..128, docs/KERNEL.md). */
#define NVFP4_SM90_NUM_VARIANTS 41
enum {
    NVFP4_SM90_WGMMA = 0,
    NVFP4_SM90_SMALLM = 1,
    NVFP4_SM90_SPLIT = 2,
    NVFP4_SM90_REGM = 3,
    NVFP4_SM90_SS = 4,
    NVFP4_SM90_REGW = 5,
    NVFP4_SM90_REGR = 6
};
typedef struct nvfp4_sm90_variant {
    int kind; /* NVFP4_SM90_WGMMA .. NVFP4_SM90_REGR */
    int bn;   /* activation rows per tile: 8..256 (mma.sync kinds: MT = 8, 16 or 32, and M <= bn) */
    int nc;   /* WGMMA: consumer warpgroups (1 or 2); 0 for the mma.sync kinds */
    int r;    /* SMALLM: n8 chains per consumer warp; REGM: 8-row chains, REGW: 16-row chains per MMA warp;
               * REGR: MMA warps per 16-row chain */
} nvfp4_sm90_variant;
/* Whether a variant is one of the mma.sync kernels that take M <= bn only. */
#define NVFP4_SM90_IS_SMALL(v) ((v)->kind != NVFP4_SM90_WGMMA && (v)->kind != NVFP4_SM90_SS)
/* Whether a variant is one of the register kernels (REGM, REGW, REGR). */
#define NVFP4_SM90_IS_REG(v) \
    ((v)->kind == NVFP4_SM90_REGM || (v)->kind == NVFP4_SM90_REGW || (v)->kind == NVFP4_SM90_REGR)
/* Whether a variant folds K slices (k_slices > 1): the wgmma tiles with the
 * second accumulator set (bn <= 64) and the mma.sync kinds; not SS. */
#define NVFP4_SM90_TAKES_SLICES(v) \
    ((v)->kind == NVFP4_SM90_WGMMA ? (v)->bn <= 64 : (v)->kind != NVFP4_SM90_SS && (v)->kind != NVFP4_SM90_REGR)
/* The SS kernel: SS_DW dequantizing warps, an A ring of SS_A_SLOTS FP16
 * weight tiles (64 nc rows x 64 K, 128-byte swizzle), and raw stages of one
 * 64-K chunk each: activations (bn x 128 bytes) | codes (64 nc rows x 32
 * bytes) | the 512-byte scale chunk.  Threads: 4 nc MMA warps, SS_DW, one
 * producer warp. */
#define SS_DW 8
#define SS_A_SLOTS SS_DW /* one per dequantizing warp: warp dw fills slot dw */
#define SS_MAX_STAGES 16
#define SS_THREADS(nc) (32 * (4 * (nc) + SS_DW + 1))
#define SS_A_BYTES(nc) ((size_t)(nc) * 8192)
#define SS_STAGE_BYTES(bn, nc) (((size_t)(bn) * 128 + (size_t)(nc) * 2048 + 512 + 1023) / 1024 * 1024)
#define SS_BAR_BYTES 1024 /* 2 x stages + 2 x SS_A_SLOTS barriers */
#define SS_SMEM(bn, nc, stages) \
    (1024 + SS_BAR_BYTES + SS_A_SLOTS * SS_A_BYTES(nc) + (size_t)(stages) * SS_STAGE_BYTES(bn, nc))
/* Small-M kernel: weight ring depth (64-K chunks) per consumer, and the most
 * consumer warps per CTA (its launch bound), by r.  The ring holds about 9 KB
 * per warp whatever r; more chains per warp need more registers. */
#define NVFP4_SM90_SMALL_WS(r) (32 / (r))
#define NVFP4_SM90_SMALL_WMAX(r) ((r) == 1 ? 15 : (r) == 2 ? 11 : 7)
/* Dynamic shared memory of the small-M kernel with w consumer warps:
 * barriers, the A-fragment and staging rings (8 chunks each), the weight rings. */
#define NVFP4_SM90_SMALL_SMEM(mt, r, w) \
    (256 + 8 * 2048 + 8 * (mt) * 48 + (w) * NVFP4_SM90_SMALL_WS(r) * (r) * 384)
/* The split small-M kernel (sm90_split.cuh; kind NVFP4_SM90_SPLIT):
 * ring depths and shared memory.  Raw stage (256 K-elements): codes
 * [tmax][16][128] | act codes [MT][128] | scales [tmax][4][256] | act scales
 * [4][AH][256].
 * Fragment stage: weights [tmax][8 blocks][512] | activations [MT/8][8][256]. */
#define SPLIT_MAX_RAW 16 /* raw ring depth at most */
#define SPLIT_MAX_FRAG 4 /* fragment ring depth at most */
#define SPLIT_BAR_BYTES 1024
/* tiles per CTA at most (4 MMA warps x SPLIT_TW): 14 is the most whose two raw and
 * two fragment stages fit 227 KB at MT = 16 (fc1: 1792 tiles on 132 SMs) */
#define SPLIT_TMAX(mt) ((mt) <= 16 ? 14 : 8)
#define SPLIT_AH(mt) ((mt) <= 16 ? 1 : 2)
#define SPLIT_RAW_BYTES(mt, tmax) ((size_t)(tmax) * 3072 + (size_t)(mt) * 128 + 1024 * SPLIT_AH(mt))
#define SPLIT_FRAG_BYTES(mt, tmax) ((size_t)(tmax) * 4096 + (size_t)((mt) / 8) * 2048)
#define SPLIT_SMEM(mt, tmax, nraw, nfrag) \
    (1024 + SPLIT_BAR_BYTES + (nraw) * SPLIT_RAW_BYTES(mt, tmax) + (nfrag) * SPLIT_FRAG_BYTES(mt, tmax))
/* The register small-M kernel (sm90_regm.cuh; kind NVFP4_SM90_REGM): 8-row
 * weight chains, r per MMA warp; one ring of stages, each (256
 * K-elements): codes [8 tmax][128] | act codes [MT][128] | weight scales
 * [SGMAX groups][4 chunks][512] | act scales [4][AH][256] | act A fragments
 * [16 blocks][FB] | the CTA's weight scales as FP16 pairs [tmax chains][8
 * block pairs][8 rows][8 bytes] (a warp's 8-byte loads of one block pair
 * cover 64 contiguous bytes: conflict-free). */
#define REGM_MAX_STAGES 16
#define REGM_BAR_BYTES 1024 /* full, act_full, empty [REGM_MAX_STAGES], a float, REGR's hand-off barriers */
#define REGM_TMAX(tw) ((tw) == 1 ? 16 : (tw) == 2 ? 24 : 32) /* chains per CTA at most (<= 256 box rows) */
/* activation warps (they also turn the CTA's weight scales into FP16 pairs
 * each chunk), splitting each n8 token tile's block pairs: 2 with one chain
 * per MMA warp (up to 16 chains: more would take the MMA warps' issue
 * slots, measured), 4 with more, and at least one per n8 tile */
#define REGM_AW(mt, tw) ((mt) == 32 || (tw) > 1 ? 4 : 2)
#define REGM_LWMAX 2                           /* loader warps at most */
#define REGM_SGMAX(tmax) (((tmax) * 8 + 127) / 128 + 1) /* 128-row scale groups a CTA spans */
/* A-fragment bytes per block: {a0..a3} per lane and m16 token tile */
#define REGM_FRAG_BLOCK_BYTES(mt) (((mt) <= 16 ? 1 : 2) * 512)
#define REGM_STAGE_BYTES(mt, tmax)                                                                 \
    (((size_t)(tmax) * 1024 + (size_t)(mt) * 128 + (size_t)REGM_SGMAX(tmax) * 2048 +              \
      (size_t)SPLIT_AH(mt) * 1024 + (size_t)16 * REGM_FRAG_BLOCK_BYTES(mt) +                      \
      (size_t)(tmax) * 512 + 1023) / 1024 * 1024)
#define REGM_SMEM(mt, tmax, stages) (1024 + REGM_BAR_BYTES + (size_t)(stages) * REGM_STAGE_BYTES(mt, tmax))
/* The REGM_BF16 kernels (the in-kernel A producer) keep their threshold
 * table at the end (after the ring, and REGR's accumulator slots): 128
 * entries x 32 bytes (quantize_internal.h) ... */
#define REGM_QTAB_BYTES 4096
/* ... and each stage ends with the chunk's BF16 activation box: M rows x 256 x
 * 2 bytes, rounded up to the stages' 1024-byte alignment (the swizzled boxes) */
#define REGM_XBOX_BYTES(rows) (((size_t)(rows) * 512 + 1023) / 1024 * 1024)
/* MMA warps at most, and the block size the kernel is built for */
#define REGM_WMAX(tw) ((REGM_TMAX(tw) + (tw) - 1) / (tw))
#define REGM_THREADS_MAX(mt, tw) (32 * (REGM_LWMAX + REGM_AW(mt, tw) + REGM_WMAX(tw)))
/* The register kernel with the weights as the mma's A operand (kind REGW,
 * REGM_WA in the body; MT = 8 or 16, TW = 1 or 2): a chain is 16 weight rows
 * (two 8-row units of the stage layout above, which it shares), the
 * activations are the n8 B operand, {b0, b1} per lane, block and n8 token
 * tile.  Why: per weight it moves 2.4x fewer shared-memory bytes than the
 * 8-row chains (one 8-byte activation load per block and MMA warp instead of
 * 16 bytes per 8 weight rows) and issues half the mma.  Units per CTA at most,
 * MMA warps at most, activation-fragment bytes per block. */
#define REGW_TMAX(tw) 32
#define REGW_WMAX(tw) (REGW_TMAX(tw) / (2 * (tw)))
#define REGW_FRAG_BLOCK_BYTES(mt) ((mt) * 32)
#define REGW_THREADS_MAX(mt, tw) (32 * (REGM_LWMAX + REGM_AW(mt, tw) + REGW_WMAX(tw)))
/* Its stage: the REGM layout with MT * 32-byte activation fragments per
 * block and one 512-byte scale-pair region per 16-row chain (12 stages
 * instead of 9 at FC2's 6 units). */
#define REGW_STAGE_BYTES(mt, tmax)                                                                 \
    (((size_t)(tmax) * 1024 + (size_t)(mt) * 128 + (size_t)REGM_SGMAX(tmax) * 2048 +              \
      (size_t)SPLIT_AH(mt) * 1024 + (size_t)16 * REGW_FRAG_BLOCK_BYTES(mt) + (size_t)(tmax) * 256 + 1023) / 1024 * 1024)
#define REGW_SMEM(mt, tmax, stages) (1024 + REGM_BAR_BYTES + (size_t)(stages) * REGW_STAGE_BYTES(mt, tmax))
/* The rotating register kernel (kind REGR, REGM_ROT in the body; MT = 8 or
 * 16): the REGW layout with R MMA warps per 16-row chain, each taking every
 * R-th chunk of K and handing the accumulator on through shared memory, so
 * that R - 1 chunks are dequantized while one is multiplied (for few chains
 * per SM: N = 5376 has 2.55 per SM).  One loader warp; MMA warps at most (9:
 * three chains of three warps, 12 warps in all, three per scheduler, whose
 * 16384-register files then allow 168 registers a thread: REGR_NREG); the
 * hand-off barriers' offset in the barrier block (after
 * full/act_full/empty and a float), and the accumulator slots after the
 * ring (per chain, one float4 per lane and n8 token tile).  No K
 * slices; the ring depth is a multiple of R (a turn's waits on the stage
 * barriers then never run two phases ahead). */
#define REGR_WMAX 9
#define REGR_MIN_R 2 /* the compiled R: 2 .. 4 */
#define REGR_MAX_R 4
#define REGR_LOADERS 1
/* activation warps: four at MT = 8 (they set the pace with two: FC2 M = 1
 * 38.5 -> 31.8 us without their work, dev_mode 2), two at MT = 16, where
 * the 168 registers of 12 warps are needed */
#define REGR_AW(mt) ((mt) == 8 ? 4 : 2)
#define REGR_THREADS_MAX(mt) (32 * (REGR_LOADERS + REGR_AW(mt) + REGR_WMAX))
#define REGR_NREG(mt) (16384 / (32 * ((REGR_THREADS_MAX(mt) / 32 + 3) / 4)) / 8 * 8)
#define REGR_ACC_BAR_OFF 528
#define REGR_SLOT_BYTES(mt, units) ((size_t)(units) / 2 * (size_t)(mt) / 8 * 512)
/* REGR with interleaved rows (REGM_IL in the body, -DNVFP4_SM90_REGR_IL;
 * nineteenth session, an option until measured), for N % 128 == 0.  Row
 * 128 G + 32 s + l of the 128x4-tiled scale layout has its four block
 * scales of a 512-byte chunk in 16-byte line l, beside those of the rows
 * of the three other 32-row subgroups s.  A chain here is 4 lines x 4
 * subgroups of one 128-row group G (lines 4 q .. 4 q + 3: 16 rows), and a
 * CTA takes consecutive chains of one group (REGR_IL_CPG CTAs a group), so
 * every scale line it loads is its own rows' and nothing else: 128 bytes a
 * stage per 8-row unit, where the contiguous layout loads the whole chunks
 * of every group a CTA spans (FC2 M = 1, 48 rows: 768 bytes instead of
 * 4096).  Its stage: codes [4 subgroups][L lines][128] (one 4-D box) | act
 * codes [MT][128] | weight scales [4 chunks][L][16] (one 4-D box) | act
 * scales [4 chunks][MT][16] | act fragments [16][MT * 32] | scale pairs
 * [tmax / 2 chains][8][8][8].
 * Built for three chains a CTA (FC2 and attn-out at M <= 16: 336 chains on
 * 132 SMs), so that the box's L = REGR_IL_LINES = 12 lines are a constant
 * (immediate offsets in the MMA warps' loads) and L % 8 == 4 (rows g =
 * 0..7 of a chain then fall in 8 swizzle phases: conflict-free); three
 * CTAs a group, the last with two chains (its box's lines 32..35 are
 * zeros, not loaded). */
#define REGR_IL_PER 3
#define REGR_IL_LINES (4 * REGR_IL_PER)
#define REGR_IL_CPG ((8 + REGR_IL_PER - 1) / REGR_IL_PER) /* CTAs per 128-row group */
#define REGR_IL_STAGE_BYTES(mt, tmax)                                                              \
    (((size_t)(tmax) * 1024 + (size_t)(mt) * 128 + (size_t)(tmax) * 128 + (size_t)(mt) * 64 +     \
      (size_t)16 * REGW_FRAG_BLOCK_BYTES(mt) + (size_t)(tmax) * 256 + 1023) / 1024 * 1024)
#define REGR_IL_SMEM(mt, tmax, stages) (1024 + REGM_BAR_BYTES + (size_t)(stages) * REGR_IL_STAGE_BYTES(mt, tmax))

/* REGR with resident activations (REGM_RES in the body, -DNVFP4_SM90_REGR_RES;
 * twenty-seventh session, no device: an option until measured), MT = 8, M
 * <= REGR_RES_ROWS, NVFP4 activations.  The activation warps turn the whole
 * activation (M rows x K) into n8 B fragments once, at the kernel's start,
 * into a resident region after the ring: per block the fragments of token
 * rows 0 and 1 only (lanes 0..7 of the MMA warps; the others take zero
 * registers), 64 bytes.  Why: at M = 1 the stage's activation boxes and
 * fragments are 7/8 zero rows and their conversion, every chunk, was 2.8
 * us of attn-out's skeleton and 4.6 of FC2's (twenty-second session, dev
 * modes 96 -> 98).  The stage keeps the weight codes, scales and scale
 * pairs only: codes [8 tmax][128] | weight scales [SGMAX][4][512] | scale
 * pairs [tmax / 2 chains][8][8][8]. */
#define REGR_RES_ROWS 2
#define REGR_RES_BATCH 16 /* items a lane has in flight while it makes them */
#define REGR_RES_BLOCK_BYTES (REGR_RES_ROWS * 32)
#define REGR_RES_BYTES(k) (((size_t)(k) / 16 * REGR_RES_BLOCK_BYTES + 1023) / 1024 * 1024)
#define REGR_RES_STAGE_BYTES(tmax)                                                                 \
    (((size_t)(tmax) * 1024 + (size_t)REGM_SGMAX(tmax) * 2048 + (size_t)(tmax) * 256 + 1023) / 1024 * 1024)
#define REGR_RES_SMEM(tmax, stages, k)                                                             \
    (1024 + REGM_BAR_BYTES + (size_t)(stages) * REGR_RES_STAGE_BYTES(tmax) + REGR_SLOT_BYTES(8, tmax) + \
     REGR_RES_BYTES(k))

/* REGR on FP16 activations (REGM_F16 in the body, -DNVFP4_SM90_REGR_F16;
 * twenty-seventh session, no device: an option until measured), MT = 8 or
 * 16.  The fused linear's quantizer already writes the exact FP16 operands
 * the wgmma kernels read ([M][K], the operand order of
 * nvfp4_sm90_operand_elem); REGR's loader brings them in four {64, MT}
 * boxes a chunk (128-byte swizzle) and the MMA warps ldmatrix them straight
 * into B fragments (the order's slots 2t, 2t + 1 and 2t + 8, 2t + 9 are
 * the m16n8k16 B fragment's b0 and b1).  Why: the activation warps'
 * conversion of every chunk, in every CTA, was FC2 M = 16's largest part
 * (twenty-second session: 38.4 -> 26.0 us without it in the
 * dequantization-free skeleton).  Stage: codes [8 tmax][128] | FP16 boxes
 * [4][MT][128] | weight scales [SGMAX][4][512] | scale pairs [tmax / 2][8][8][8]. */
#define REGR_F16_STAGE_BYTES(mt, tmax)                                                             \
    (((size_t)(tmax) * 1024 + (size_t)(mt) * 512 + (size_t)REGM_SGMAX(tmax) * 2048 + (size_t)(tmax) * 256 + 1023) / \
     1024 * 1024)
#define REGR_F16_SMEM(mt, tmax, stages)                                                            \
    (1024 + REGM_BAR_BYTES + (size_t)(stages) * REGR_F16_STAGE_BYTES(mt, tmax) + REGR_SLOT_BYTES(mt, tmax))

extern const nvfp4_sm90_variant nvfp4_sm90_variants[NVFP4_SM90_NUM_VARIANTS];

/* K chunks of 64 elements per pipeline stage, and CTAs per SM, of a
 * variant (used by the kernels' preprocessor and by the host).  Small tiles
 * take longer code rows per TMA request and run two CTAs per SM. */
#define NVFP4_SM90_KSUB(bn, nc) ((nc) == 1 && (bn) <= 32 ? 4 : (bn) * (nc) <= 128 ? 2 : 1)
#define NVFP4_SM90_CTAS(bn, nc) ((nc) == 1 && (bn) <= 16 ? 3 : (nc) == 1 && (bn) <= 64 ? 2 : 1)
/* Whether a wgmma tile is built with stream-K (docs/KERNEL.md design item
 * 11): two consumers (one CTA per SM) and one chunk per stage (a piece may
 * start on any chunk). */
#define NVFP4_SM90_SK_TILE(bn, nc) ((nc) == 2 && NVFP4_SM90_KSUB(bn, nc) == 1)

/* The wgmma kernel's staged BF16 epilogue: 256 bytes of shared memory per
 * consumer warp (two 8x8 fragments transposed, SM90_EPI_OUT). */
#define NVFP4_SM90_EPI_BYTES(nc) ((size_t)(nc) * 4 * 256)

/* Bytes of shared memory per pipeline stage. */
size_t nvfp4_sm90_stage_bytes(int bn, int nc);

/* CTAs per SM a variant is built for (__launch_bounds__ in the kernel):
 * 2 for the small single-consumer tiles, else 1. */
int nvfp4_sm90_ctas_per_sm(int bn, int nc);

typedef struct nvfp4_sm90_plan {
    int variant;   /* index into nvfp4_sm90_variants */
    int stages;    /* pipeline depth (small-M kernel: consumer warps per CTA) */
    int grid;      /* persistent CTAs (small-M kernel: CTAs, one work item per warp) */
    int64_t tiles; /* weight tiles x activation tiles */
    size_t smem;   /* dynamic shared memory bytes */
    int frag_stages;   /* split kernel: fragment ring depth (stages = raw ring depth) */
    int tiles_per_cta; /* split kernel: 16-row weight tiles per CTA at most; register kernels: 8-row units */
    int mma_warps;     /* register kernel: MMA warps per CTA */
    int loaders;       /* register kernel: TMA-issuing warps per CTA */
    int64_t sk_tile0;  /* wgmma kernel: the first stream-K tile (= tiles: none; design item 11) */
} nvfp4_sm90_plan;

/* Stream-K grids at most: the workspace holds one tile's FP32 accumulators
 * (at most 128 x 256) and a counter per CTA (nvfp4_cuda_gemm_workspace).
 * Devices with more SMs run data-parallel. */
#define NVFP4_SM90_SK_MAX_CTAS 160
/* ... and only for M above this (its tiles are 128 x >= 128: smaller M
 * takes the bn <= 64 tiles, and its workspace has no stream-K area) */
#define NVFP4_SM90_SK_MIN_M 64
#define NVFP4_SM90_SK_SLOT_FLOATS (128 * 256)
/* Testing hook (sm90_heuristics.c): stream-K where the cost model picks it
 * (0), never (-1), or forced on a grid of `ctas` CTAs (planning then fails
 * where it cannot apply).  Every mode gives the same bits.  Not thread-safe. */
void nvfp4_sm90_force_stream_k(int ctas);

/* Activation multicast (the NVFP4_SM90_MCAST build; sm90_gemm_body.cuh):
 * the tiles whose half activation box (bn / 2 rows of 128 bytes) starts on
 * a 1024-byte boundary of the stage, where the 128-byte swizzle pattern
 * repeats, so that two halves land as one box would. */
#define NVFP4_SM90_MCAST_TILE(bn) ((bn) % 16 == 0)

/* Whether a planned GEMM of M rows can multicast its activation boxes over
 * clusters of two CTAs: both CTAs of a cluster must run the same activation
 * tile through the same chunks -- a wgmma tile of NVFP4_SM90_MCAST_TILE,
 * one activation tile (M <= bn), one data-parallel tile a CTA (no
 * stream-K) and an even grid.  At 32 < M <= 128 that is attn-out's and
 * FC2's 84 CTAs of 64 x bn; QKV and FC1 run stream-K there. */
int nvfp4_sm90_plan_mcast(const nvfp4_sm90_plan *plan, int64_t m);

/* Pick a variant, depth and grid for M x N x K (k_slices K slices, <= 1:
 * one chain; wgmma tiles with bn > 64 carry no second accumulator set, so
 * k_slices > 1 takes bn <= 64) on a device with num_sms
 * multiprocessors, smem_optin bytes of opt-in shared memory per block and
 * smem_per_sm per multiprocessor.
 * force_variant >= 0 overrides the choice (benchmarks, tests).
 * Returns 0 on success, -1 if nothing fits. */
int nvfp4_sm90_plan_gemm(int64_t m, int64_t n, int64_t k, int k_slices, int num_sms, size_t smem_optin,
                         size_t smem_per_sm, int force_variant, nvfp4_sm90_plan *out);

/* Testing hook (sm90_gemm.cu): make nvfp4_gemm_cuda use variant v
 * (0..NVFP4_SM90_NUM_VARIANTS-1), or the heuristic again for v < 0.
 * Not thread-safe; for tests and benchmarks. */
void nvfp4_sm90_force_variant(int v);

/* Testing hook (sm90_heuristics.c): loader warps of the register small-M
 * kernel (1..REGM_LWMAX), or the planned number again for lw <= 0.  Not
 * thread-safe; for dev/cuda/gemm_variants. */
void nvfp4_sm90_force_loaders(int lw);

/* The fused linear's in-kernel A producer (the register kernel quantizing
 * BF16 itself: one launch with a static scale, the amax pass + GEMM with the
 * dynamic one) at M up to this; above it, the quantizer kernel + GEMM as its
 * programmatic dependent.  Measured on the H200 (dev/cuda/inkernel_a, back
 * to back, thirteenth session; docs/STREAMING_A.md): at M <= 2 a chunk's
 * blocks are one per lane of the activation warp that takes it, and the
 * producer beat the two kernels with the dynamic scale on all four
 * linears (by 1.2-2.7 us); at M = 4 and 8 a lane codes 2 and 4 blocks one
 * after another and the chunk's latency paces the GEMM (1.2-2.1x slower). */
#define NVFP4_SM90_INKERNEL_A_MAX_M 2
/* ... and only where the plan is REGW or REGR and K is at most this: the
 * producer costs ~0.03-0.05 us a 256-element chunk beyond the prequantized
 * GEMM, the two kernels ~2 us once (static scale: attn-out, K = 7168: 23.6
 * against 23.9 us; FC1 39.0 against 39.8; FC2, K = 14336: 38.3 against
 * 37.5; QKV on REGM: 38.4 against 38.0).  With the dynamic scale too since
 * the two kernels follow the amax pass as programmatic dependents (H100,
 * twenty-sixth session, M = 1, in-kernel against two kernels: attn-out
 * 24.4 against 24.8, FC1 43.0-43.5 against 43.6-43.7, FC2 40.1-40.4
 * against 38.8-39.2, QKV 42.5-42.6 against 41.0-41.2). */
#define NVFP4_SM90_INKERNEL_A_STATIC_MAX_K 8192

/* Testing hook (sm90_gemm.cu): the fused linear's in-kernel A producer
 * wherever the plan allows it (1), never (0), or up to
 * NVFP4_SM90_INKERNEL_A_MAX_M (-1).  Not thread-safe. */
void nvfp4_sm90_force_inkernel_a(int mode);

/* sm90_gemm.cu: whether the fused linear's GEMM of this shape takes BF16
 * activations and quantizes them itself, with the caller's per-tensor
 * scale or the amax pass's alike: the planned register kernel has an
 * in-kernel twin whose ring fits, and the bounds above allow it, or the
 * hook forces it. */
int nvfp4_sm90_gemm_quantizes_bf16(int64_t m, int64_t n, int64_t k, int k_slices);

/* Testing hook (sm90_gemm.cu): how the wgmma kernel's producer issues a
 * stage (SM90_PROD_* bits of sm90_internal.cuh; -1 = the default).  Every
 * mode gives the same bits.  Not thread-safe. */
void nvfp4_sm90_force_producer(int mode);
/* Testing hook (dev/cuda/inkernel_a, NVFP4_DEV_EARLYW=0): 0 gives the
 * wgmma kernel the producer mode it had before its weight issuers started
 * ahead of the previous grid (SM90_PROD_WAITING), 1 the default.  Every
 * mode gives the same bits.  Not thread-safe. */
void nvfp4_sm90_dev_early_weights(int on);

/* Testing hook (sm90_gemm.cu): the wgmma kernel's BF16 output stored
 * staged through shared memory where out is 16-byte aligned (staged != 0,
 * the default), or one element at a time (0).  Every mode gives the same
 * bits.  Not thread-safe. */
void nvfp4_sm90_force_epilogue(int staged);

/* Testing hook (sm90_gemm.cu): the register kernel's dev_mode, the parts
 * of the kernel left out for dev/cuda timing experiments (REGM_DEV_* in
 * sm90_regm.cuh; 0 = the kernel as it is).  Results are wrong when set. */
void nvfp4_sm90_force_dev_mode(int mode);

#ifdef __cplusplus
}
#endif
#endif
