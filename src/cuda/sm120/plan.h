/* plan.h -- the sm120 GEMM's launch, decided in plain C (plan.c) from the
 * device and the shape, so that the rules are unit-tested on any machine
 * (tests/unit/test_sm120_plan.c).  The kernel is src/cuda/sm120/gemm.cu;
 * docs/SM120.md explains the choices. */
#ifndef NVFP4_CUDA_SM120_PLAN_H
#define NVFP4_CUDA_SM120_PLAN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nvfp4_sm120_plan {
    int shape;             /* index in NVFP4_SM120_SHAPES (frag.h) */
    int fa, fb, kg;        /* the shape: weight / activation fragments per unit, groups per stage */
    int warps;             /* warps per CTA, each with its own pipeline */
    int block;             /* threads per CTA (32 warps) */
    int grid;              /* persistent CTAs */
    int stages;            /* pipeline stages per warp */
    size_t stage_bytes;    /* one stage of one warp */
    size_t smem;           /* dynamic shared memory per CTA: warps x stages x stage_bytes */
    int64_t n_tiles;       /* ceil(N / 16 fa) weight tiles */
    int64_t m_tiles;       /* ceil(M / 8 fb) activation tiles */
    int64_t units;         /* n_tiles x m_tiles warp units, the activation tile fastest */
    int64_t groups;        /* ceil(K / 64) k64 steps per output */
    int64_t steps;         /* ceil(groups / kg) pipeline stages per unit */
    int64_t group_slice;   /* k64 groups per K slice (nvfp4_k_slice_elems / 64) */
    int64_t slices;        /* non-empty K slices: ceil(groups / group_slice) */
} nvfp4_sm120_plan;

/* Limits the planner accepts (the kernel's int arithmetic stays in range). */
#define NVFP4_SM120_MAX_DIM ((int64_t)1 << 30)

/* The launch of an M x N x K GEMM with k_slices (0 or 1: one chain) on a
 * device with `sms` multiprocessors and `smem_per_block` bytes of opt-in
 * shared memory per block.  @return 0 with *plan set, or -1 when the
 * arguments are out of range (sizes, K % 16, k_slices) or no stage fits. */
int nvfp4_sm120_plan_gemm(int sms, size_t smem_per_block, int64_t m, int64_t n, int64_t k, int k_slices,
                          nvfp4_sm120_plan *plan);

#ifdef __cplusplus
}
#endif
#endif
