/* cuda_host.h -- shared by the host-memory conveniences (gemm_cuda_host.c,
 * linear_cuda_host.c): CUDA runtime calls whose failure becomes a status. */
#ifndef NVFP4_CUDA_HOST_H
#define NVFP4_CUDA_HOST_H

#include <cuda_runtime_api.h>

#include "internal.h"

/* Run a CUDA runtime call; on failure set `st` to NVFP4_ERR_CUDA with "what:
 * reason" and jump to the caller's `done:` cleanup. */
#define CU(call, what)                                                                  \
    do {                                                                                \
        cudaError_t e_ = (call);                                                        \
        if (e_ != cudaSuccess) {                                                        \
            st = nvfp4_fail(NVFP4_ERR_CUDA, "%s: %s", what, cudaGetErrorString(e_));    \
            goto done;                                                                  \
        }                                                                               \
    } while (0)

#endif
