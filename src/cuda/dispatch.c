/* dispatch.c -- the CUDA backend's public entry points, by the current
 * device's family: sm_90 (H100, H200; the sm90_* sources, model sm90) or,
 * when the library was built with it, sm_120 / sm_121 (RTX Blackwell, GB10;
 * src/cuda/sm120, model sm120).  Any other device goes to the sm90 family,
 * whose entry points say what they need. */
#include <cuda_runtime_api.h>
#include <stdatomic.h>

#include "cuda/dispatch.h"
#include "internal.h"
#if defined(NVFP4_WITH_SM120)
#include "cuda/sm120/sm120.h"
#endif

enum { FAMILY_NONE = 0, FAMILY_SM90 = 1, FAMILY_SM120 = 2 };

#define MAX_DEVICES 64
/* each device's family + 1, once known (0: not asked yet) */
static _Atomic int families[MAX_DEVICES];

/* The current device's family (FAMILY_NONE without a device, or for a
 * device no kernel of this build runs on). */
static int device_family(void)
{
    int n = 0, dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) == cudaSuccess && dev >= 0 && dev < MAX_DEVICES && families[dev])
        return families[dev] - 1;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        cudaGetLastError(); /* clear the sticky "no device" error */
        return FAMILY_NONE;
    }
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
        cudaGetLastError();
        return FAMILY_NONE;
    }
    int family = FAMILY_NONE;
    if (major == 9 && minor == 0) family = FAMILY_SM90;
#if defined(NVFP4_WITH_SM120)
    if (major == 12) family = FAMILY_SM120;
#endif
    if (dev >= 0 && dev < MAX_DEVICES) families[dev] = family + 1;
    return family;
}

int nvfp4_cuda_available(void) { return device_family() != FAMILY_NONE; }

nvfp4_status nvfp4_cuda_model(nvfp4_model *out)
{
    if (!out) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_cuda_model: out is NULL");
    switch (device_family()) {
    case FAMILY_SM90: *out = NVFP4_MODEL_SM90; return NVFP4_OK;
    case FAMILY_SM120: *out = NVFP4_MODEL_SM120; return NVFP4_OK;
    default:
        return nvfp4_fail(NVFP4_ERR_NO_DEVICE,
                          "no CUDA device this build has kernels for (sm_90%s)",
#if defined(NVFP4_WITH_SM120)
                          ", sm_120, sm_121"
#else
                          "; built without sm_120 / sm_121"
#endif
        );
    }
}

nvfp4_status nvfp4_gemm_cuda(const nvfp4_cuda_gemm_args *args)
{
#if defined(NVFP4_WITH_SM120)
    if (device_family() == FAMILY_SM120) return nvfp4_sm120_gemm(args);
#endif
    return nvfp4_sm90_gemm_cuda(args);
}

nvfp4_status nvfp4_linear_cuda(const nvfp4_cuda_linear_args *args)
{
#if defined(NVFP4_WITH_SM120)
    if (device_family() == FAMILY_SM120) return nvfp4_sm120_linear(args);
#endif
    return nvfp4_sm90_linear_cuda(args);
}
