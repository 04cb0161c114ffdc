/* linear_cuda_host.c -- host-memory convenience around nvfp4_linear_cuda(). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#if defined(NVFP4_WITH_CUDA)
#include "backend/device_operand.h"
#include "cuda_host.h"

nvfp4_status nvfp4_linear_cuda_host(const nvfp4_linear_args *args)
{
    if (!args || !args->x || !args->weight)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "linear (cuda): x and weight are required");
    if (args->x_dtype != NVFP4_DTYPE_BF16)
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED,
                          "linear (cuda): the GPU quantizer reads BF16 activations (got %s)",
                          nvfp4_dtype_name(args->x_dtype));
    if (args->m < 1 || args->k < 1)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "linear (cuda): empty activations (%lld x %lld)",
                          (long long)args->m, (long long)args->k);
    nvfp4_status model_st = nvfp4_cuda_host_model(args->model, "linear (cuda)");
    if (model_st != NVFP4_OK) return model_st;
    int64_t m = args->m, k = args->k, kp = (k + 15) / 16 * 16, mp = (m + 15) / 16 * 16;
    if (args->weight->cols != kp)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "linear (cuda): activations have %lld columns (%lld padded) but the "
                          "weight has K = %lld",
                          (long long)k, (long long)kp, (long long)args->weight->cols);
    /* The device reads the weight as ComfyUI stores it, rows padded to 16 as
     * the kernels need N; the padding rows' outputs are computed and dropped. */
    const nvfp4_tensor *w = NULL;
    nvfp4_tensor tw = {0}, xq = {0};
    nvfp4_status st = nvfp4_device_operand(args->weight, 1, &tw, &w);
    if (st != NVFP4_OK) return st;
    int64_t n = args->weight->rows, np = w->rows;
    size_t x_bytes = (size_t)(m * k) * 2, w_codes = (size_t)(np * kp / 2);
    size_t w_sc = nvfp4_scales_bytes(np, kp, NVFP4_SCALES_TILED);
    size_t xq_codes = (size_t)(mp * kp / 2), xq_sc = nvfp4_scales_bytes(mp, kp, NVFP4_SCALES_TILED);
    size_t mn = (size_t)(m * np);
    size_t ws = nvfp4_linear_cuda_workspace(m, np, k);
    void *d_x = NULL, *d_wc = NULL, *d_ws_sc = NULL, *d_f = NULL, *d_bias = NULL;
    void *d_raw = NULL, *d_out = NULL, *d_ws = NULL, *d_xc = NULL, *d_xs = NULL;
    /* d_f: [0] the weight's per-tensor scale, [1] the static input scale,
     * [2] the activation scale the call used */
    float f[3] = {w->per_tensor_scale, args->input_scale ? *args->input_scale : 0.0f, 0.0f};
    CU(cudaMalloc(&d_x, x_bytes), "cudaMalloc x");
    CU(cudaMalloc(&d_wc, w_codes), "cudaMalloc weight");
    CU(cudaMalloc(&d_ws_sc, w_sc), "cudaMalloc weight scales");
    CU(cudaMalloc(&d_f, sizeof f), "cudaMalloc scales");
    CU(cudaMalloc(&d_raw, mn * 4), "cudaMalloc raw");
    CU(cudaMalloc(&d_out, mn * 2), "cudaMalloc out");
    if (ws) CU(cudaMalloc(&d_ws, ws), "cudaMalloc workspace");
    if (args->x_quantized) {
        CU(cudaMalloc(&d_xc, xq_codes), "cudaMalloc x codes");
        CU(cudaMalloc(&d_xs, xq_sc), "cudaMalloc x scales");
    }
    if (args->bias) {
        CU(cudaMalloc(&d_bias, (size_t)np * 4), "cudaMalloc bias");
        CU(cudaMemset(d_bias, 0, (size_t)np * 4), "memset bias");
        CU(cudaMemcpy(d_bias, args->bias, (size_t)n * 4, cudaMemcpyHostToDevice), "copy bias");
    }
    CU(cudaMemcpy(d_x, args->x, x_bytes, cudaMemcpyHostToDevice), "copy x");
    CU(cudaMemcpy(d_wc, w->codes, w_codes, cudaMemcpyHostToDevice), "copy weight");
    CU(cudaMemcpy(d_ws_sc, w->scales, w_sc, cudaMemcpyHostToDevice), "copy weight scales");
    CU(cudaMemcpy(d_f, f, sizeof f, cudaMemcpyHostToDevice), "copy scales");
    /* Poison the outputs so an element the kernel never writes cannot pass. */
    CU(cudaMemset(d_raw, 0xFF, mn * 4), "memset raw");
    CU(cudaMemset(d_out, 0xFF, mn * 2), "memset out");
    nvfp4_cuda_operand wop = {.codes = d_wc, .scales = d_ws_sc, .per_tensor_scale = (const float *)d_f,
                              .rows = np, .cols = kp};
    nvfp4_cuda_linear_args la = {
        .x = d_x, .m = m, .k = k, .weight = &wop,
        .input_scale = args->input_scale ? (const float *)d_f + 1 : NULL, .variant = args->variant,
        .bias = d_bias, .raw = d_raw, .out = d_out, .x_codes = d_xc, .x_scales = d_xs,
        .x_scale = (float *)d_f + 2, .stream = NULL, .workspace = d_ws, .workspace_bytes = ws,
        .k_slices = args->k_slices,
    };
    if ((st = nvfp4_linear_cuda(&la)) != NVFP4_OK) goto done;
    CU(cudaDeviceSynchronize(), "linear kernels");
    if ((st = nvfp4_outputs_to_host(args->raw, args->out, d_raw, d_out, m, n, np)) != NVFP4_OK)
        goto done;
    if (args->x_quantized) {
        /* the same tensor nvfp4_quantize() returns: padded shape, hi-first, tiled */
        if ((st = nvfp4_tensor_alloc(&xq, mp, kp, NVFP4_HI_FIRST, NVFP4_SCALES_TILED)) != NVFP4_OK)
            goto done;
        CU(cudaMemcpy(xq.codes, d_xc, xq_codes, cudaMemcpyDeviceToHost), "copy x codes back");
        CU(cudaMemcpy(xq.scales, d_xs, xq_sc, cudaMemcpyDeviceToHost), "copy x scales back");
        CU(cudaMemcpy(&xq.per_tensor_scale, (float *)d_f + 2, 4, cudaMemcpyDeviceToHost),
           "copy x scale back");
        *args->x_quantized = xq;
        xq = (nvfp4_tensor){0};
    }
done:
    cudaFree(d_x);
    cudaFree(d_wc);
    cudaFree(d_ws_sc);
    cudaFree(d_f);
    cudaFree(d_bias);
    cudaFree(d_raw);
    cudaFree(d_out);
    cudaFree(d_ws);
    cudaFree(d_xc);
    cudaFree(d_xs);
    nvfp4_tensor_free(&tw);
    nvfp4_tensor_free(&xq);
    return st;
}

#else

nvfp4_status nvfp4_linear_cuda_host(const nvfp4_linear_args *args)
{
    (void)args;
    return nvfp4_fail(NVFP4_ERR_NO_DEVICE, "this nvfp4 was built without CUDA (nvcc not found)");
}

#endif
