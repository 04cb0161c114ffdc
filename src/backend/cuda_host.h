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

/* The device's kernels compute `asked` (nvfp4_cuda_model): NVFP4_OK, or
 * NO_DEVICE / UNSUPPORTED with "what: why". */
static inline nvfp4_status nvfp4_cuda_host_model(nvfp4_model asked, const char *what)
{
    nvfp4_model device_model;
    if (nvfp4_cuda_model(&device_model) != NVFP4_OK)
        return nvfp4_fail(NVFP4_ERR_NO_DEVICE, "%s: %s", what, nvfp4_last_error());
    if (asked != device_model)
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "%s: this device's kernel computes the %s model (asked: %s)", what,
                          nvfp4_model_name(device_model), nvfp4_model_name(asked));
    return NVFP4_OK;
}

#endif
