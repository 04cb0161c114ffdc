/* host.h -- the sm_90a GEMM's host side, shared by gemm.cu (validation,
 * planning, the FP16 pre-pass, the workspace) and the family launchers
 * (wgmma.cu, regm.cu) and linear.cu.  CUDA C++ host code only. */
#ifndef NVFP4_CUDA_SM90_HOST_H
#define NVFP4_CUDA_SM90_HOST_H

#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "internal.h"
}
#include "cuda/quantize_internal.h"
#include "cuda/sm90/common.cuh"
#include "cuda/sm90/plan.h"

#define NVFP4_SM90_MAX_KERNELS 64

/* A device's planning facts and, per kernel, the dynamic shared memory its
 * attribute has been raised to (the attribute is sticky: raised once). */
typedef struct nvfp4_sm90_device_info {
    int ok;
    nvfp4_sm90_device dev;
    size_t smem_set[NVFP4_SM90_MAX_KERNELS];
} nvfp4_sm90_device_info;

/* The current device's info (an sm_90 device), or an error. */
nvfp4_status nvfp4_sm90_device_of(nvfp4_sm90_device_info **out);

typedef CUresult (*nvfp4_sm90_encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                         const cuuint64_t *, const cuuint32_t *, const cuuint32_t *,
                                         CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                         CUtensorMapFloatOOBfill);

/* One planned GEMM, as the family launchers take it. */
typedef struct nvfp4_sm90_launch {
    const nvfp4_cuda_gemm_args *args;
    const nvfp4_sm90_plan *plan;
    const nvfp4_sm90_kernel *kern;
    nvfp4_sm90_device_info *dev;
    nvfp4_sm90_encode_fn encode;
    int64_t m, n, k;
    int ncb;            /* 512-byte scale chunks per 128-row group: roundup(K/16, 4) / 4 */
    int after_producer; /* launch as the programmatic dependent of the kernel before it */
    const nvfp4_sm90_bf16_act *src; /* plan->act == NVFP4_SM90_ACT_BF16: the activations */
} nvfp4_sm90_launch;

nvfp4_status nvfp4_sm90_launch_wgmma(const nvfp4_sm90_launch *l);
/* The FP16 pre-pass of a plan that has one (gemm.cu). */
nvfp4_status nvfp4_sm90_launch_prepass(const nvfp4_sm90_launch *l);
nvfp4_status nvfp4_sm90_launch_regm(const nvfp4_sm90_launch *l);

/* Helpers for the launchers (gemm.cu). */
/* The parameters every kernel takes (common.cuh), from the launch. */
void nvfp4_sm90_fill_io(nvfp4_sm90_gemm_io *io, const nvfp4_sm90_launch *l);
int nvfp4_sm90_misaligned(const void *p, uintptr_t a);
/* Raise kern's dynamic shared-memory limit to the plan's, once per device. */
nvfp4_status nvfp4_sm90_raise_smem(const nvfp4_sm90_launch *l, const void *kern);
/* Launch kern (one parameter struct) on the stream; after_producer: as the
 * programmatic dependent of the kernel before it. */
cudaError_t nvfp4_sm90_launch_kernel(const void *kern, int grid, int threads, size_t smem, cudaStream_t stream,
                                     int after_producer, void *params);
/* A 2-D, 3-D or 4-D tensor map of `rank` dims, or the failure naming `what`. */
nvfp4_status nvfp4_sm90_tensor_map(const nvfp4_sm90_launch *l, CUtensorMap *map, CUtensorMapDataType type, int rank,
                                   const void *base, const cuuint64_t *dims, const cuuint64_t *strides,
                                   const cuuint32_t *box, CUtensorMapSwizzle swizzle, const char *what);
/* The FP16 activations in the workspace ([m][k], the operand order) as
 * {64, box_rows} boxes, 128-byte swizzle. */
nvfp4_status nvfp4_sm90_f16_act_map(const nvfp4_sm90_launch *l, CUtensorMap *map, int box_rows);
/* The workspace's stream-K area (M > NVFP4_SM90_SK_MIN_M): its counters,
 * then one tile's accumulators per CTA. */
uint8_t *nvfp4_sm90_sk_area(void *workspace, int64_t m, int64_t k);
size_t nvfp4_sm90_sk_area_bytes(int64_t m, int64_t n);
#define NVFP4_SM90_SK_FLAG_BYTES ((NVFP4_SM90_SK_MAX_CTAS * 4 + 255) / 256 * 256)

/* The GEMM of a plan made by nvfp4_sm90_plan_linear (linear.cu): after the
 * quantizer (its programmatic dependent), or from src (ACT_BF16). */
nvfp4_status nvfp4_sm90_gemm_planned(const nvfp4_cuda_gemm_args *args, const nvfp4_sm90_plan *plan,
                                     const nvfp4_sm90_bf16_act *src);
/* Where the GEMM's workspace keeps the wgmma kernel's stream-K counters, and
 * their number (0 where it has none): the quantizer zeroes them. */
int nvfp4_sm90_gemm_sk_counters(void *workspace, int64_t m, int64_t n, int64_t k, unsigned **counters);

#endif
