/* linear_cpu.c -- ComfyUI's NVFP4 linear on the CPU: quantize, then GEMM. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

nvfp4_status nvfp4_linear_cpu(const nvfp4_linear_args *args)
{
    if (!args || !args->x || !args->weight)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "linear: x and weight are required");
    if (args->m < 1 || args->k < 1)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "linear: empty activations (%lld x %lld)",
                          (long long)args->m, (long long)args->k);
    int64_t kp = (args->k + 15) / 16 * 16;
    if (args->weight->cols != kp)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "linear: activations have %lld columns (%lld padded) but the weight "
                          "has K = %lld",
                          (long long)args->k, (long long)kp, (long long)args->weight->cols);
    nvfp4_tensor xq = {0};
    nvfp4_status st = nvfp4_quantize(&xq, args->x, args->x_dtype, args->m, args->k,
                                     args->input_scale, args->variant, args->nthreads);
    if (st != NVFP4_OK) return st;
    /* The quantizer pads rows to 16; the GEMM only needs the first m.  The
     * tiled scale offsets do not depend on the row count, so a view works. */
    nvfp4_tensor view = xq;
    view.rows = args->m;
    nvfp4_gemm_args g = {
        .a = &view, .b = args->weight, .bias = args->bias, .raw = args->raw, .out = args->out,
        .model = args->model, .nthreads = args->nthreads, .k_slices = args->k_slices,
    };
    st = nvfp4_gemm_cpu(&g);
    if (st == NVFP4_OK && args->x_quantized)
        *args->x_quantized = xq;
    else
        nvfp4_tensor_free(&xq);
    return st;
}
