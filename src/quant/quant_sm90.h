/* quant_sm90.h -- what the `cuda` quantizer variant needs from the H200's
 * fast-math instructions (docs/FORMATS.md, "The compiled CUDA kernel").
 *
 * rcp.approx.ftz.f32 (SASS MUFU.RCP) is not correctly rounded; its result
 * for x = (1 + m/2^23) * 2^e is the tabled reciprocal of 1 + m/2^23 shifted
 * by -e (then flushed to zero below 2^-126).  The table was measured on
 * the H200 by tests/gpu/probe_fastmath.cu and is committed compressed as
 * rcp_sm90_table.bin.xz (tools/gen_rcp_table.py writes it); the build
 * decompresses it into a C array (tools/rcp_table_c.c), so nothing is read
 * at run time.  rcp_sm90_table.c looks entries up; quantize.c and
 * quantize_ref.c each build the full instruction from it in their own way. */
#ifndef NVFP4_QUANT_SM90_H
#define NVFP4_QUANT_SM90_H

#include <stdint.h>

/* bits(rcp.approx.ftz(1 + m/2^23)) - bits(correctly rounded 1/(1 + m/2^23)),
 * for a 23-bit mantissa m. */
int nvfp4_sm90_rcp_diff(uint32_t m);

/* The table: 2 bits per mantissa m, word m / 32, bits 2 * (m % 32) upward;
 * 0 -> 0, 1 -> +1 ulp, 2 -> -1 ulp (3 never occurs on the H200). */
#define NVFP4_SM90_RCP_WORDS ((1u << 23) / 32u)
extern const uint64_t nvfp4_sm90_rcp_packed[NVFP4_SM90_RCP_WORDS];

/* FP32(1/6) as nvcc folds `x / 6.0f` under --use_fast_math: 0x3E2AAAAB. */
#define NVFP4_SM90_ONE_SIXTH 0x1.555556p-3f

#endif
