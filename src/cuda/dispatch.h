/* dispatch.h -- the CUDA backend's entry points per device family, for
 * dispatch.c, which defines the public names and picks a family by the
 * device's compute capability. */
#ifndef NVFP4_CUDA_DISPATCH_H
#define NVFP4_CUDA_DISPATCH_H

#include "nvfp4.h"

#ifdef __cplusplus
extern "C" {
#endif

/* H100 / H200 (sm_90a): model NVFP4_MODEL_SM90. */
nvfp4_status nvfp4_sm90_gemm_cuda(const nvfp4_cuda_gemm_args *args);
nvfp4_status nvfp4_sm90_linear_cuda(const nvfp4_cuda_linear_args *args);

#ifdef __cplusplus
}
#endif

#endif
