/* operand_check.c -- argument checks shared by the GEMM backends. */
#include "internal.h"

nvfp4_status nvfp4_check_gemm_operand(const nvfp4_tensor *t, const char *fn, const char *which)
{
    if (!t) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: operand %s is NULL", fn, which);
    if (t->rows < 0 || t->cols < 0)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: operand %s has negative shape %lld x %lld",
                          fn, which, (long long)t->rows, (long long)t->cols);
    if (t->cols % NVFP4_BLOCK != 0)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "%s: operand %s has %lld columns, not a multiple of 16", fn, which,
                          (long long)t->cols);
    if (t->rows > 0 && t->cols > 0 && (!t->codes || !t->scales))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: operand %s has NULL codes or scales", fn,
                          which);
    if (t->nibble_order != NVFP4_HI_FIRST && t->nibble_order != NVFP4_LO_FIRST)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: operand %s has an unknown nibble order %d",
                          fn, which, (int)t->nibble_order);
    if (t->scale_layout != NVFP4_SCALES_TILED && t->scale_layout != NVFP4_SCALES_ROW_MAJOR)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: operand %s has an unknown scale layout %d",
                          fn, which, (int)t->scale_layout);
    return NVFP4_OK;
}

nvfp4_status nvfp4_check_gemm_args(const nvfp4_gemm_args *args, const char *fn)
{
    if (!args) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: args is NULL", fn);
    nvfp4_status st = nvfp4_check_gemm_operand(args->a, fn, "A");
    if (st != NVFP4_OK) return st;
    st = nvfp4_check_gemm_operand(args->b, fn, "B");
    if (st != NVFP4_OK) return st;
    const nvfp4_tensor *a = args->a, *b = args->b;
    if (a->cols != b->cols)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "%s: K differs: A is %lld x %lld, B is %lld x %lld "
                          "(both must have K columns)",
                          fn, (long long)a->rows, (long long)a->cols, (long long)b->rows,
                          (long long)b->cols);
    if (args->model != NVFP4_MODEL_SM90 && args->model != NVFP4_MODEL_EXACT &&
        args->model != NVFP4_MODEL_SM120)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: unknown model %d", fn, (int)args->model);
    if (args->k_slices < 0 || args->k_slices > NVFP4_MAX_K_SLICES)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: k_slices = %d is outside 1..%d", fn,
                          args->k_slices, NVFP4_MAX_K_SLICES);
    if (!args->raw && !args->out)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "%s: neither raw nor out is given; nothing to compute", fn);
    return NVFP4_OK;
}
