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

/* The first n of each of m rows of np device outputs, raw (F32) and out
 * (BF16), to the host (either may be NULL): the columns of a weight whose
 * rows were padded for the kernels. */
static inline nvfp4_status nvfp4_outputs_to_host(float *raw, uint16_t *out, const void *d_raw,
                                                 const void *d_out, int64_t m, int64_t n,
                                                 int64_t np)
{
    cudaError_t e = cudaSuccess;
    if (raw)
        e = cudaMemcpy2D(raw, (size_t)n * 4, d_raw, (size_t)np * 4, (size_t)n * 4, (size_t)m,
                         cudaMemcpyDeviceToHost);
    if (e == cudaSuccess && out)
        e = cudaMemcpy2D(out, (size_t)n * 2, d_out, (size_t)np * 2, (size_t)n * 2, (size_t)m,
                         cudaMemcpyDeviceToHost);
    return e == cudaSuccess ? NVFP4_OK
                            : nvfp4_fail(NVFP4_ERR_CUDA, "copy the outputs back: %s",
                                         cudaGetErrorString(e));
}

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
