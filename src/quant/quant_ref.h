/* quant_ref.h -- the reference quantizer's per-element step (quantize_ref.c),
 * exposed for tests that check other forms of it element by element
 * (tests/unit/test_thresholds.c).  Internal: not exported from the shared
 * library. */
#ifndef NVFP4_QUANT_REF_H
#define NVFP4_QUANT_REF_H

#include <stdint.h>

#include "nvfp4.h"

/* What a block with scale byte s8 multiplies or divides its elements by:
 * eager t = pts * e4m3(s8) (x86 NaN rules), cuda enc = min.ftz(rcp.approx.ftz(
 * mul.ftz(pts, e4m3(s8))), FLT_MAX). */
float nvfp4_ref_block_factor(nvfp4_variant variant, float pts, uint8_t s8);

/* The E2M1 code (0..15) of element x of a block with that factor. */
uint8_t nvfp4_ref_element_code(nvfp4_variant variant, float factor, float x);

#endif
