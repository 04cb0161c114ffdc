/* dispatch.h -- the CUDA backend's entry points per device family, for
 * dispatch.c, which picks one by the device's compute capability.
 *
 * The sm90 family's sources define nvfp4_gemm_cuda / nvfp4_linear_cuda
 * themselves; the Makefile force-includes this header into them with
 * NVFP4_SM90_ENTRIES defined, so that their definitions become the family's
 * entry points below (hidden, not exported) and dispatch.c defines the
 * public names. */
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

#ifdef NVFP4_SM90_ENTRIES
#define nvfp4_gemm_cuda nvfp4_sm90_gemm_cuda
#define nvfp4_linear_cuda nvfp4_sm90_linear_cuda
#endif

#endif
