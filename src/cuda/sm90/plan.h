/* plan.h -- the sm_90a NVFP4 GEMM's kernels and its one planner (plain C,
 * shared by plan.c, the CUDA sources and tests/unit/test_sm90_plan.c).
 *
 * Every output is the same chain of one k16 tensor-core step per NVFP4 block
 * in increasing k (docs/CONTRACT.md), whatever the planner picks: the choice
 * only moves work between warps and CTAs, so results never depend on M, the
 * tile or the device (batch invariance).  docs/KERNEL.md says why each rule
 * is what it is, with the measurement behind it. */
#ifndef NVFP4_CUDA_SM90_PLAN_H
#define NVFP4_CUDA_SM90_PLAN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Kernel families.
 *   WGMMA  the persistent warp-specialised wgmma kernel (wgmma_body.cuh):
 *          64 nc weight rows (wgmma M, dequantized in registers) x bn
 *          activation rows (wgmma N: FP16 operands in shared memory by TMA);
 *          M > 32.
 *   REGM   the register kernel (regm_body.cuh), M <= mt: MMA warps
 *          dequantize their own 8-row weight chains in registers, r chains a
 *          warp, activations the m16 A operand of mma.sync m16n8k16;
 *   REGW   ... with 16-row chains as the A operand and the activations the
 *          n8 B operand (r chains a warp);
 *   REGR   ... REGW with r MMA warps per chain taking its 256-element chunks
 *          in turn, the accumulator handed on through shared memory. */
enum { NVFP4_SM90_WGMMA = 0, NVFP4_SM90_REGM = 1, NVFP4_SM90_REGW = 2, NVFP4_SM90_REGR = 3 };

typedef struct nvfp4_sm90_kernel {
    const char *name;
    int family; /* NVFP4_SM90_WGMMA .. NVFP4_SM90_REGR */
    int mt;     /* activation rows per tile: wgmma bn, register kernels M at most */
    int nc;     /* WGMMA: consumer warpgroups (1 or 2); 0 otherwise */
    int r;      /* REGM, REGW: chains per MMA warp; REGR: MMA warps per chain */
    int bf16;   /* 1: the in-kernel A producer (BF16 activations, quantized by the kernel) */
    int sliced; /* 1: the wgmma tile with the K-slice code (the others leave it out) */
} nvfp4_sm90_kernel;

/* Every kernel the library holds, one row each (kernels.def).  The planner
 * returns an index into this table; each family's source launches by it. */
extern const nvfp4_sm90_kernel nvfp4_sm90_kernels[];
extern const int nvfp4_sm90_num_kernels;
extern const int nvfp4_sm90_num_wgmma; /* rows [0, this) are the wgmma kernels */

#define NVFP4_SM90_IS_REG(kern) ((kern)->family != NVFP4_SM90_WGMMA)

/* ---- the wgmma kernel (wgmma_body.cuh) ---------------------------------- */
/* K chunks of 64 elements per pipeline stage, and CTAs per SM: small tiles
 * take longer code rows per TMA request and run two or three CTAs per SM. */
#define NVFP4_SM90_KSUB(bn, nc) ((nc) == 1 && (bn) <= 32 ? 4 : (bn) * (nc) <= 128 ? 2 : 1)
#define NVFP4_SM90_CTAS(bn, nc) ((nc) == 1 && (bn) <= 16 ? 3 : (nc) == 1 && (bn) <= 64 ? 2 : 1)
/* Stream-K tiles: two consumers (one CTA per SM) and one chunk per stage (a
 * piece may start on any chunk). */
#define NVFP4_SM90_SK_TILE(bn, nc) ((nc) == 2 && NVFP4_SM90_KSUB(bn, nc) == 1)
/* The staged BF16 epilogue: 256 bytes of shared memory per consumer warp. */
#define NVFP4_SM90_EPI_BYTES(nc) ((size_t)(nc) * 4 * 256)
/* Stream-K grids at most (the workspace holds one tile's FP32 accumulators,
 * at most 128 x 256, and a counter per CTA), and only for M above
 * NVFP4_SM90_SK_MIN_M (its tiles are 128 x >= 128). */
#define NVFP4_SM90_SK_MAX_CTAS 160
#define NVFP4_SM90_SK_MIN_M 64
#define NVFP4_SM90_SK_SLOT_FLOATS (128 * 256)
/* The chunk-pair step (wgmma_body.cuh) runs on the 64 x 128 and 128 x 128
 * tiles: a consumer holds three pairs of stages at once. */
#define NVFP4_SM90_PAIR_MAX_BN 128

/* ---- the register kernels (regm.cuh, regm_body.cuh) --------------------- */
/* A stage is one 256-element chunk of K.  REGM layout: codes [8 tmax][128] |
 * act codes [MT][128] | weight scales [SGMAX groups][4 chunks][512] | act
 * scales [4][AH][256] | act A fragments [16 blocks][FB] | the CTA's weight
 * scales as FP16 pairs [tmax chains][8 block pairs][8 rows][8 bytes]. */
#define REGM_MAX_STAGES 16
#define REGM_BAR_BYTES 1024 /* full, act_full, empty [REGM_MAX_STAGES], REGR's hand-off barriers */
#define REGM_TMAX(tw) ((tw) == 1 ? 16 : (tw) == 2 ? 24 : 32) /* 8-row chains per CTA at most (<= 256 box rows) */
/* activation warps: 2 with one chain per MMA warp (more would take the MMA
 * warps' issue slots), 4 with more, and at least one per n8 tile */
#define REGM_AW(mt, tw) ((mt) == 32 || (tw) > 1 ? 4 : 2)
#define REGM_LWMAX 2 /* loader warps at most */
#define REGM_SGMAX(tmax) (((tmax) * 8 + 127) / 128 + 1) /* 128-row scale groups a CTA spans */
#define REGM_ACT_HALVES(mt) ((mt) <= 16 ? 1 : 2) /* 256-byte halves of an activation scale chunk */
#define REGM_FRAG_BLOCK_BYTES(mt) (((mt) <= 16 ? 1 : 2) * 512) /* A fragments per block */
#define REGM_STAGE_BYTES(mt, tmax)                                                                 \
    (((size_t)(tmax) * 1024 + (size_t)(mt) * 128 + (size_t)REGM_SGMAX(tmax) * 2048 +              \
      (size_t)REGM_ACT_HALVES(mt) * 1024 + (size_t)16 * REGM_FRAG_BLOCK_BYTES(mt) +               \
      (size_t)(tmax) * 512 + 1023) / 1024 * 1024)
#define REGM_SMEM(mt, tmax, stages) (1024 + REGM_BAR_BYTES + (size_t)(stages) * REGM_STAGE_BYTES(mt, tmax))
/* The in-kernel A producer keeps its threshold table at the end (128
 * entries x 32 bytes, quantize_internal.h), and each stage ends with the
 * chunk's BF16 activation box (M rows x 512 bytes, 1024-byte aligned). */
#define REGM_QTAB_BYTES 4096
#define REGM_XBOX_BYTES(rows) (((size_t)(rows) * 512 + 1023) / 1024 * 1024)
#define REGM_WMAX(tw) ((REGM_TMAX(tw) + (tw) - 1) / (tw)) /* MMA warps at most */
#define REGM_THREADS_MAX(mt, tw) (32 * (REGM_LWMAX + REGM_AW(mt, tw) + REGM_WMAX(tw)))
/* REGW: 16-row chains (two 8-row units of the stage above), activation
 * fragments {b0, b1} per lane, block and n8 token tile, one 512-byte
 * scale-pair region per chain.  Per weight it moves 2.4x fewer shared-memory
 * bytes than the 8-row chains and issues half the mma. */
#define REGW_TMAX 32 /* 8-row units per CTA at most */
#define REGW_WMAX(tw) (REGW_TMAX / (2 * (tw)))
#define REGW_FRAG_BLOCK_BYTES(mt) ((mt) * 32)
#define REGW_THREADS_MAX(mt, tw) (32 * (REGM_LWMAX + REGM_AW(mt, tw) + REGW_WMAX(tw)))
#define REGW_STAGE_BYTES(mt, tmax)                                                                 \
    (((size_t)(tmax) * 1024 + (size_t)(mt) * 128 + (size_t)REGM_SGMAX(tmax) * 2048 +              \
      (size_t)REGM_ACT_HALVES(mt) * 1024 + (size_t)16 * REGW_FRAG_BLOCK_BYTES(mt) +               \
      (size_t)(tmax) * 256 + 1023) / 1024 * 1024)
#define REGW_SMEM(mt, tmax, stages) (1024 + REGM_BAR_BYTES + (size_t)(stages) * REGW_STAGE_BYTES(mt, tmax))
/* REGR: the REGW layout, R MMA warps per 16-row chain (for few chains per
 * SM: N = 5376 has 2.55 per SM on 132).  At most 9 MMA warps (12 warps in
 * all, three per scheduler: 168 registers a thread, REGR_NREG); the
 * hand-off barriers' offset in the barrier block; the accumulator slots
 * after the ring (per chain, one float4 per lane and n8 token tile).  The
 * ring depth is a multiple of R, so a warp's waits on the stage barriers
 * never run two phases ahead. */
#define REGR_WMAX 9
#define REGR_MIN_R 2
#define REGR_MAX_R 4
#define REGR_LOADERS 1
/* activation warps: four at MT = 8 (two set the pace), two at MT = 16,
 * where 12 warps need their 168 registers */
#define REGR_AW(mt) ((mt) == 8 ? 4 : 2)
#define REGR_THREADS_MAX(mt) (32 * (REGR_LOADERS + REGR_AW(mt) + REGR_WMAX))
#define REGR_NREG(mt) (16384 / (32 * ((REGR_THREADS_MAX(mt) / 32 + 3) / 4)) / 8 * 8)
#define REGR_ACC_BAR_OFF 528
#define REGR_SLOT_BYTES(mt, units) ((size_t)(units) / 2 * (size_t)(mt) / 8 * 512)

/* ---- the fused linear's in-kernel A producer ---------------------------- */
/* The register GEMM quantizes BF16 activations itself at M up to this, on
 * REGW and REGR only, and K up to NVFP4_SM90_INKERNEL_A_MAX_K; elsewhere the
 * quantizer kernel runs first and the GEMM is its programmatic dependent.
 * At M <= 2 a chunk's blocks are one per lane of the warp that codes it; at
 * M = 4 and 8 a lane codes 2 and 4 blocks in turn and the chunk's latency
 * paces the GEMM (1.2-2.1x slower).  The producer costs ~0.03-0.05 us a
 * 256-element chunk, the two-kernel path ~2 us once (docs/STREAMING_A.md). */
#define NVFP4_SM90_INKERNEL_A_MAX_M 2
#define NVFP4_SM90_INKERNEL_A_MAX_K 8192

/* ---- the planner -------------------------------------------------------- */
typedef struct nvfp4_sm90_device {
    int num_sms;
    size_t smem_optin;  /* opt-in shared memory per block */
    size_t smem_per_sm; /* shared memory per multiprocessor */
} nvfp4_sm90_device;

/* Where the GEMM's activations come from. */
enum {
    NVFP4_SM90_ACT_NVFP4 = 0, /* NVFP4 in memory: the register kernels read them, the wgmma
                                 kernel after the FP16 pre-pass (nvfp4_gemm_cuda) */
    NVFP4_SM90_ACT_QUANTIZED = 1, /* the fused linear's quantizer ran just before: NVFP4 codes
                                     for the register kernels, FP16 operands for the wgmma one */
    NVFP4_SM90_ACT_BF16 = 2 /* BF16 activations, quantized by the GEMM (the in-kernel producer) */
};

typedef struct nvfp4_sm90_plan {
    int kernel;  /* index into nvfp4_sm90_kernels */
    int act;     /* NVFP4_SM90_ACT_* */
    int grid;    /* CTAs */
    int threads; /* per CTA */
    size_t smem; /* dynamic shared memory bytes */
    int stages;  /* pipeline depth */
    int64_t tiles; /* wgmma: weight tiles x activation tiles; register kernels: 8-row units (N / 8) */
    int chunks_per_slice; /* 64-element groups per K slice (all of K: one chain) */
    /* wgmma kernel */
    int prepass;      /* the FP16 pre-pass runs first (ACT_NVFP4) */
    int64_t sk_tile0; /* the first stream-K tile (= tiles: none) */
    int act3d;        /* a stage's chunks of activations as one 3-D box (several chunks a stage, K >= 64) */
    /* register kernels */
    int tiles_per_cta; /* 8-row units per CTA at most (the stage layout) */
    int mma_warps;
    int loaders;
    int act_rot; /* activation warps taking whole chunks in turn (0: they split every chunk) */
} nvfp4_sm90_plan;

/* nvfp4_sm90_plan_gemm() :
 * The whole launch of an M x N x K GEMM with k_slices K slices (<= 1: one
 * chain) and activations from `act` on `dev`.  N % 16 == 0, K % 32 == 0.
 * @return 0, or -1 when no kernel takes the shape (planned with the testing
 * overrides of nvfp4_testing.h in test builds). */
int nvfp4_sm90_plan_gemm(const nvfp4_sm90_device *dev, int64_t m, int64_t n, int64_t k, int k_slices, int act,
                         nvfp4_sm90_plan *out);

/* nvfp4_sm90_plan_linear() :
 * The fused linear's GEMM: the in-kernel A producer (act NVFP4_SM90_ACT_BF16)
 * where the rules above allow it and bf16_ok (x's rows are 16-byte aligned
 * for TMA), else the GEMM after the quantizer (NVFP4_SM90_ACT_QUANTIZED).
 * @return 0 or -1 as nvfp4_sm90_plan_gemm(). */
int nvfp4_sm90_plan_linear(const nvfp4_sm90_device *dev, int64_t m, int64_t n, int64_t k, int k_slices,
                           int bf16_ok, nvfp4_sm90_plan *out);

/* Bytes of shared memory per wgmma pipeline stage. */
size_t nvfp4_sm90_stage_bytes(int bn, int nc);

#ifdef __cplusplus
}
#endif
#endif
