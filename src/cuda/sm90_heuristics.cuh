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

/* The compiled kernel variants: activation tile rows (wgmma N) and
 * consumer warpgroups (64 weight rows each).  Order matches the kernel
 * table in sm90_gemm.cu. */
#define NVFP4_SM90_NUM_VARIANTS 17
typedef struct nvfp4_sm90_variant {
    int bn; /* activation rows per tile: 8..256 (small-M kernel: 8 or 16, and M <= bn) */
    int nc; /* consumer warpgroups: 1 or 2; 0 = a small-M mma.sync kernel */
    int r;  /* small-M kernel: n8 weight tiles (chains) per consumer warp; 0 with nc = 0:
             * the split small-M kernel (sm90_split.cuh) */
} nvfp4_sm90_variant;
/* Small-M kernel: weight ring depth (64-K chunks) per consumer, and the most
 * consumer warps per CTA (its launch bound), by r.  The ring holds about 9 KB
 * per warp whatever r; more chains per warp need more registers. */
#define NVFP4_SM90_SMALL_WS(r) (32 / (r))
#define NVFP4_SM90_SMALL_WMAX(r) ((r) == 1 ? 15 : (r) == 2 ? 11 : 7)
/* Dynamic shared memory of the small-M kernel with w consumer warps:
 * barriers, the A-fragment and staging rings (8 chunks each), the weight rings. */
#define NVFP4_SM90_SMALL_SMEM(mt, r, w) \
    (256 + 8 * 2048 + 8 * (mt) * 48 + (w) * NVFP4_SM90_SMALL_WS(r) * (r) * 384)
/* The split small-M kernel (sm90_split.cuh; variants with nc = 0 and r = 0):
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

extern const nvfp4_sm90_variant nvfp4_sm90_variants[NVFP4_SM90_NUM_VARIANTS];

/* K chunks of 64 elements per pipeline stage, and CTAs per SM, of a
 * variant (used by the kernels' preprocessor and by the host).  Small tiles
 * take longer code rows per TMA request and run two CTAs per SM. */
#define NVFP4_SM90_KSUB(bn, nc) ((nc) == 1 && (bn) <= 32 ? 4 : (bn) * (nc) <= 128 ? 2 : 1)
#define NVFP4_SM90_CTAS(bn, nc) ((nc) == 1 && (bn) <= 16 ? 3 : (nc) == 1 && (bn) <= 64 ? 2 : 1)

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
    int tiles_per_cta; /* split kernel: 16-row weight tiles per CTA at most */
} nvfp4_sm90_plan;

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

#ifdef __cplusplus
}
#endif
#endif
