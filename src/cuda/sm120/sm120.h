/* sm120.h -- the sm120 family's entry points (src/cuda/sm120/gemm.cu):
 * the GEMM and the linear on GB10 / RTX Blackwell (sm_120a, sm_121a), which
 * nvfp4_gemm_cuda() and nvfp4_linear_cuda() call on such a device
 * (src/cuda/dispatch.c).  Model NVFP4_MODEL_SM120; docs/SM120.md. */
#ifndef NVFP4_CUDA_SM120_H
#define NVFP4_CUDA_SM120_H

#include <stddef.h>

#include "nvfp4.h"

#ifdef __cplusplus
extern "C" {
#endif

/* nvfp4_gemm_cuda()'s contract with the sm120 model: same arguments (the
 * workspace is not used; K slices, bias, raw and out as documented). */
nvfp4_status nvfp4_sm120_gemm(const nvfp4_cuda_gemm_args *args);

/* nvfp4_linear_cuda()'s contract with the sm120 model: the quantizer
 * kernels (the amax pass for the dynamic scale, then the block kernel)
 * write the NVFP4 activations, the GEMM reads them as its programmatic
 * dependent.  Needs at most nvfp4_linear_cuda_workspace() bytes. */
nvfp4_status nvfp4_sm120_linear(const nvfp4_cuda_linear_args *args);

/* The workspace bytes nvfp4_sm120_linear() uses (0 if the shape is out of
 * range); never more than nvfp4_linear_cuda_workspace(). */
size_t nvfp4_sm120_linear_workspace(int64_t m, int64_t k);

#ifdef NVFP4_SM120_EMULATE
/* The emulated test build plans for this device instead of the one it runs
 * on (default: a GB10, 48 SMs and 99 KB of shared memory per block);
 * sms 0 restores the default. */
void nvfp4_sm120_emu_device(int sms, size_t smem_per_block);
#endif

#ifdef __cplusplus
}
#endif
#endif
