/* gemm_cuda_host.c -- host-memory convenience around nvfp4_gemm_cuda(). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#if defined(NVFP4_WITH_CUDA)
#include "backend/device_operand.h"
#include "cuda_host.h"

nvfp4_status nvfp4_gemm_cuda_host(const nvfp4_gemm_args *args)
{
    if (!args || !args->a || !args->b)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "gemm (cuda): A and B are required");
    nvfp4_status model_st = nvfp4_cuda_host_model(args->model, "gemm (cuda)");
    if (model_st != NVFP4_OK) return model_st;
    const nvfp4_tensor *a = NULL, *b = NULL;
    nvfp4_tensor ta = {0}, tb = {0};
    /* the weights' rows padded to 16 as the kernels need N; the outputs of
     * the padding rows are computed and dropped */
    nvfp4_status st = nvfp4_device_operand(args->a, 0, &ta, &a);
    if (st == NVFP4_OK) st = nvfp4_device_operand(args->b, 1, &tb, &b);
    if (st != NVFP4_OK) {
        nvfp4_tensor_free(&ta);
        nvfp4_tensor_free(&tb);
        return st;
    }
    int64_t m = a->rows, n = args->b->rows, np = b->rows, k = a->cols;
    size_t a_codes = (size_t)(m * k / 2), b_codes = (size_t)(np * k / 2);
    size_t a_sc = nvfp4_scales_bytes(m, k, NVFP4_SCALES_TILED);
    size_t b_sc = nvfp4_scales_bytes(np, k, NVFP4_SCALES_TILED);
    size_t mn = (size_t)(m * np);
    size_t ws = nvfp4_cuda_gemm_workspace(m, np, k);
    void *d_a = NULL, *d_b = NULL, *d_as = NULL, *d_bs = NULL, *d_sc = NULL, *d_bias = NULL;
    void *d_raw = NULL, *d_out = NULL, *d_ws = NULL;
    float scales2[2] = {a->per_tensor_scale, b->per_tensor_scale};
    CU(cudaMalloc(&d_a, a_codes), "cudaMalloc A");
    CU(cudaMalloc(&d_b, b_codes), "cudaMalloc B");
    CU(cudaMalloc(&d_as, a_sc), "cudaMalloc A scales");
    CU(cudaMalloc(&d_bs, b_sc), "cudaMalloc B scales");
    CU(cudaMalloc(&d_sc, sizeof scales2), "cudaMalloc scales");
    CU(cudaMalloc(&d_raw, mn * 4), "cudaMalloc raw");
    CU(cudaMalloc(&d_out, mn * 2), "cudaMalloc out");
    if (ws) CU(cudaMalloc(&d_ws, ws), "cudaMalloc workspace");
    if (args->bias) {
        CU(cudaMalloc(&d_bias, (size_t)np * 4), "cudaMalloc bias");
        CU(cudaMemset(d_bias, 0, (size_t)np * 4), "memset bias");
        CU(cudaMemcpy(d_bias, args->bias, (size_t)n * 4, cudaMemcpyHostToDevice), "copy bias");
    }
    CU(cudaMemcpy(d_a, a->codes, a_codes, cudaMemcpyHostToDevice), "copy A");
    CU(cudaMemcpy(d_b, b->codes, b_codes, cudaMemcpyHostToDevice), "copy B");
    CU(cudaMemcpy(d_as, a->scales, a_sc, cudaMemcpyHostToDevice), "copy A scales");
    CU(cudaMemcpy(d_bs, b->scales, b_sc, cudaMemcpyHostToDevice), "copy B scales");
    CU(cudaMemcpy(d_sc, scales2, sizeof scales2, cudaMemcpyHostToDevice), "copy scales");
    /* Poison the outputs so an element the kernel never writes cannot pass. */
    CU(cudaMemset(d_raw, 0xFF, mn * 4), "memset raw");
    CU(cudaMemset(d_out, 0xFF, mn * 2), "memset out");
    nvfp4_cuda_gemm_args g = {
        .a = {.codes = d_a, .scales = d_as, .per_tensor_scale = (const float *)d_sc, .rows = m, .cols = k},
        .b = {.codes = d_b, .scales = d_bs, .per_tensor_scale = (const float *)d_sc + 1, .rows = np, .cols = k},
        .bias = d_bias, .raw = d_raw, .out = d_out, .stream = NULL,
        .workspace = d_ws, .workspace_bytes = ws, .k_slices = args->k_slices,
    };
    if ((st = nvfp4_gemm_cuda(&g)) != NVFP4_OK) goto done;
    CU(cudaDeviceSynchronize(), "gemm kernel");
    if ((st = nvfp4_outputs_to_host(args->raw, args->out, d_raw, d_out, m, n, np)) != NVFP4_OK)
        goto done;
done:
    cudaFree(d_a);
    cudaFree(d_b);
    cudaFree(d_as);
    cudaFree(d_bs);
    cudaFree(d_sc);
    cudaFree(d_bias);
    cudaFree(d_raw);
    cudaFree(d_out);
    cudaFree(d_ws);
    nvfp4_tensor_free(&ta);
    nvfp4_tensor_free(&tb);
    return st;
}

#else

nvfp4_status nvfp4_gemm_cuda_host(const nvfp4_gemm_args *args)
{
    (void)args;
    return nvfp4_fail(NVFP4_ERR_NO_DEVICE, "this nvfp4 was built without CUDA (nvcc not found)");
}

#endif
