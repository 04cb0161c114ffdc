/* stub_nocuda.c -- the CUDA entry points in a build without nvcc. */
#include "internal.h"

int nvfp4_cuda_available(void) { return 0; }

nvfp4_status nvfp4_cuda_model(nvfp4_model *out)
{
    (void)out;
    return nvfp4_fail(NVFP4_ERR_NO_DEVICE, "this nvfp4 was built without CUDA (nvcc not found)");
}

nvfp4_status nvfp4_cuda_device_name(char *name, size_t name_len, char *cc, size_t cc_len)
{
    if (name && name_len) name[0] = '\0';
    if (cc && cc_len) cc[0] = '\0';
    return nvfp4_fail(NVFP4_ERR_NO_DEVICE,
                      "no CUDA device (this nvfp4 was built without CUDA: nvcc not found)");
}

size_t nvfp4_cuda_gemm_workspace(int64_t m, int64_t n, int64_t k)
{
    (void)m, (void)n, (void)k;
    return 0;
}

nvfp4_status nvfp4_gemm_cuda(const nvfp4_cuda_gemm_args *args)
{
    (void)args;
    return nvfp4_fail(NVFP4_ERR_NO_DEVICE, "this nvfp4 was built without CUDA (nvcc not found)");
}

nvfp4_status nvfp4_quantize_cuda(const nvfp4_cuda_quantize_args *args)
{
    (void)args;
    return nvfp4_fail(NVFP4_ERR_NO_DEVICE, "this nvfp4 was built without CUDA (nvcc not found)");
}

size_t nvfp4_linear_cuda_workspace(int64_t m, int64_t n, int64_t k)
{
    (void)m, (void)n, (void)k;
    return 0;
}

nvfp4_status nvfp4_linear_cuda(const nvfp4_cuda_linear_args *args)
{
    (void)args;
    return nvfp4_fail(NVFP4_ERR_NO_DEVICE, "this nvfp4 was built without CUDA (nvcc not found)");
}
