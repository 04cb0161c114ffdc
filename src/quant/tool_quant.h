/* tool_quant.h -- the constants of the checkpoint tools' NVFP4 quantizers
 * (quantize_tools.c, quantize_tools_ref.c); one definition each. */
#ifndef NVFP4_TOOL_QUANT_H
#define NVFP4_TOOL_QUANT_H

#include "nvfp4.h"

#define TQ_E2M1_MAX 6.0f    /* the largest E2M1 magnitude */
#define TQ_RANGE 2688.0f    /* E4M3 max 448 times E2M1 max 6 */
#define TQ_E4M3_MAX 448.0f
#define TQ_MO_SCALE_MIN 0x1p-9f /* ModelOpt clamps block scales to [2^-9, 448] */
#define TQ_MO_ZERO_SCALE 1.0f   /* ModelOpt's scale for an all-zero block */
#define TQ_CT_ZERO_SCALE 0.125f /* compressed-tensors' "eps" of FP8 scales */

/* Where the NaN of a block holding one gets its sign: PyTorch's vectorized
 * CPU loops (AVX-512: 16 FP32 or 32 BF16/F16 lanes) return an all-ones NaN
 * (negative: scale byte 0xFF), their scalar tail -- the last (count mod
 * lanes) of the rows x blocks scales, row-major -- the input's NaN
 * (positive: 0x7F).  1 when block p of n is in that tail for dtype d. */
static inline int tq_scalar_tail(nvfp4_dtype d, int64_t p, int64_t n)
{
    int64_t lanes = d == NVFP4_DTYPE_F32 ? 16 : 32;
    return p >= n - n % lanes;
}

/* Arguments both forms check the same way (quantize_tools.c). */
nvfp4_status nvfp4_tq_check(const void *x, nvfp4_dtype dtype, int64_t rows, int64_t cols,
                            nvfp4_format format, const char *fn);

#endif
