/* device.cu -- what the current CUDA device is called (which kernels run
 * on it: dispatch.c). */
/* The library links with a C compiler (no libstdc++): keep nvcc's launch
 * stubs free of guarded statics and exception tables. */
#define __NV_LEGACY_LAUNCH 1
#include <cuda_runtime.h>
#include <stdio.h>

extern "C" {
#include "internal.h"
}

extern "C" nvfp4_status nvfp4_cuda_device_name(char *name, size_t name_len, char *cc, size_t cc_len)
{
    if (name && name_len) name[0] = '\0';
    if (cc && cc_len) cc[0] = '\0';
    int n = 0, dev = 0, driver = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n < 1) {
        cudaGetLastError();
        /* without a driver the runtime says "driver version is insufficient":
         * that is no device, not an old driver */
        if (cudaDriverGetVersion(&driver) == cudaSuccess && driver == 0)
            return nvfp4_fail(NVFP4_ERR_NO_DEVICE, "no CUDA device (no NVIDIA driver is loaded)");
        return nvfp4_fail(NVFP4_ERR_NO_DEVICE, "no CUDA device (%s)",
                          e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    }
    cudaDeviceProp prop;
    if ((e = cudaGetDevice(&dev)) != cudaSuccess || (e = cudaGetDeviceProperties(&prop, dev)) != cudaSuccess)
        return nvfp4_fail(NVFP4_ERR_NO_DEVICE, "CUDA device query failed: %s", cudaGetErrorString(e));
    if (name && name_len) snprintf(name, name_len, "%s", prop.name);
    if (cc && cc_len) snprintf(cc, cc_len, "SM%d%d", prop.major, prop.minor);
    return NVFP4_OK;
}
