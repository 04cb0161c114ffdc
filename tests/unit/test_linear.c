/* test_linear.c -- nvfp4_linear_cpu: ComfyUI's linear = quantize, then GEMM. */
#include "nvfp4.h"
#include "testlib.h"

static int k_slices = 0; /* passed through to the GEMM */

/* x (m x k BF16, k maybe not a multiple of 16), weight n x roundup(k,16). */
static void one_case(uint64_t seed, int64_t m, int64_t k, int64_t n, int with_bias, int stat,
                     nvfp4_variant variant)
{
    int64_t kp = (k + 15) / 16 * 16;
    uint16_t *x = malloc((size_t)(m * k) * 2), *w = malloc((size_t)(n * kp) * 2);
    float *bias = malloc((size_t)n * 4), *raw = malloc((size_t)(m * n) * 4),
          *raw2 = malloc((size_t)(m * n) * 4);
    uint16_t *out = malloc((size_t)(m * n) * 2), *out2 = malloc((size_t)(m * n) * 2);
    uint64_t s = seed;
    for (int64_t i = 0; i < m * k; i++) x[i] = nvfp4_bf16_from_f32((float)(test_normal(&s) * (i % 97 == 0 ? 50 : 1)));
    for (int64_t i = 0; i < n * kp; i++) w[i] = nvfp4_bf16_from_f32((float)(0.02 * test_normal(&s)));
    for (int64_t i = 0; i < n; i++) bias[i] = (float)test_normal(&s);
    nvfp4_tensor W = {0}, XQ = {0}, XQ2 = {0};
    CHECK(nvfp4_quantize(&W, w, NVFP4_DTYPE_BF16, n, kp, NULL, NVFP4_VARIANT_EAGER, 2) == NVFP4_OK);
    float in_scale = 0.0123f;
    nvfp4_linear_args la = {.x = x, .x_dtype = NVFP4_DTYPE_BF16, .m = m, .k = k, .weight = &W,
                            .input_scale = stat ? &in_scale : NULL, .variant = variant,
                            .bias = with_bias ? bias : NULL, .raw = raw, .out = out,
                            .model = NVFP4_MODEL_SM90, .nthreads = 2, .x_quantized = &XQ,
                            .k_slices = k_slices};
    CHECK(nvfp4_linear_cpu(&la) == NVFP4_OK);
    /* By hand: the reference quantizer, then the reference GEMM on the first m rows. */
    CHECK(nvfp4_quantize_ref(&XQ2, x, NVFP4_DTYPE_BF16, m, k, stat ? &in_scale : NULL, variant) ==
          NVFP4_OK);
    CHECK(XQ.per_tensor_scale == XQ2.per_tensor_scale);
    CHECK(XQ.rows == XQ2.rows && XQ.cols == XQ2.cols);
    test_equal_bits("quantized activations", XQ.codes, XQ2.codes, 1, XQ.rows, XQ.cols / 2);
    nvfp4_tensor view = XQ2;
    view.rows = m;
    nvfp4_gemm_args g = {.a = &view, .b = &W, .bias = with_bias ? bias : NULL, .raw = raw2,
                         .out = out2, .model = NVFP4_MODEL_SM90, .k_slices = k_slices};
    CHECK(nvfp4_gemm_ref(&g) == NVFP4_OK);
    test_equal_bits("raw", raw, raw2, 4, m, n);
    test_equal_bits("out", out, out2, 2, m, n);
    nvfp4_tensor_free(&W);
    nvfp4_tensor_free(&XQ);
    nvfp4_tensor_free(&XQ2);
    free(x), free(w), free(bias), free(raw), free(raw2), free(out), free(out2);
}

int main(void)
{
    TEST("linear == quantize_ref + gemm_ref")
    {
        one_case(1, 3, 64, 48, 0, 0, NVFP4_VARIANT_EAGER); /* n: the quantizer pads weight rows to 16 */
        one_case(2, 17, 100, 32, 1, 0, NVFP4_VARIANT_EAGER); /* k padded 100 -> 112, m padded */
        one_case(3, 1, 256, 48, 1, 1, NVFP4_VARIANT_CUDA);
        one_case(4, 33, 48, 16, 0, 1, NVFP4_VARIANT_CUDA);
    }
    TEST("linear passes k_slices to the GEMM")
    {
        k_slices = 3;
        one_case(5, 9, 1000, 64, 1, 0, NVFP4_VARIANT_EAGER);
        k_slices = 40; /* more slices than 64-groups */
        one_case(6, 4, 700, 32, 0, 1, NVFP4_VARIANT_CUDA);
        k_slices = 0;
    }
    TEST("linear argument errors")
    {
        uint16_t x[32] = {0};
        nvfp4_tensor W = {0};
        CHECK(nvfp4_tensor_alloc(&W, 16, 32, NVFP4_HI_FIRST, NVFP4_SCALES_TILED) == NVFP4_OK);
        nvfp4_linear_args la = {.x = x, .x_dtype = NVFP4_DTYPE_BF16, .m = 1, .k = 48, .weight = &W};
        CHECK(nvfp4_linear_cpu(&la) == NVFP4_ERR_INVALID_ARGUMENT); /* K mismatch */
        CHECK(strstr(nvfp4_last_error(), "K = 32") != NULL);
        la.weight = NULL;
        CHECK(nvfp4_linear_cpu(&la) == NVFP4_ERR_INVALID_ARGUMENT);
        nvfp4_tensor_free(&W);
    }
    return test_summary("linear");
}
