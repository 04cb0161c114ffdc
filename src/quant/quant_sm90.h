/* quant_sm90.h -- what the `cuda` quantizer variant needs from the H200's
 * fast-math instructions (docs/FORMATS.md, "The compiled CUDA kernel").
 *
 * rcp.approx.ftz.f32 (SASS MUFU.RCP) is not correctly rounded; its result
 * for x = (1 + m/2^23) * 2^e is the tabled reciprocal of 1 + m/2^23 shifted
 * by -e (then flushed to zero below 2^-126).  The table, measured on the
 * H200 by tests/gpu/probe_fastmath.cu, lives in rcp_sm90_table.c, generated
 * by tools/gen_rcp_table.py.  quantize.c and quantize_ref.c each build the
 * full instruction from it in their own way. */
#ifndef NVFP4_QUANT_SM90_H
#define NVFP4_QUANT_SM90_H

#include <stdint.h>

/* bits(rcp.approx.ftz(1 + m/2^23)) - bits(correctly rounded 1/(1 + m/2^23)),
 * for a 23-bit mantissa m. */
int nvfp4_sm90_rcp_diff(uint32_t m);

/* 1 once rcp_sm90_table.c holds the H200's measurement; 0 for the
 * placeholder (every difference 0: the correctly rounded reciprocal). */
extern const int nvfp4_sm90_rcp_measured;

/* FP32(1/6) as nvcc folds `x / 6.0f` under --use_fast_math: 0x3E2AAAAB. */
#define NVFP4_SM90_ONE_SIXTH 0x1.555556p-3f

#endif
