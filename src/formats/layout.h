/* layout.h -- the NVFP4 facts C and CUDA code share: the E2M1 value table
 * and the byte offset of a block scale in the cuBLAS 128x4 tiled layout.
 * One definition each, usable from host C and from device code. */
#ifndef NVFP4_FORMATS_LAYOUT_H
#define NVFP4_FORMATS_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define NVFP4_HOST_DEVICE static __host__ __device__ __forceinline__
#else
#define NVFP4_HOST_DEVICE static inline
#endif

/* Twice the magnitude of E2M1 code & 7, an integer: 0 1 2 3 4 6 8 12 (one
 * nibble each of 0xC8643210).  The value is sign(code & 8) * twice / 2. */
NVFP4_HOST_DEVICE uint32_t nvfp4_e2m1_twice(uint32_t code)
{
    return (0xC8643210u >> (4u * (code & 7u))) & 15u;
}

/* The value of an E2M1 code (exact in FP32; code 8 is -0). */
NVFP4_HOST_DEVICE float nvfp4_e2m1_value(uint32_t code)
{
    float m = (float)nvfp4_e2m1_twice(code) * 0.5f;
    return (code & 8u) ? -m : m;
}

/* A dequantized value, as nvfp4_dequantize() defines it: e2m1 * e4m3 is
 * exact in FP32, then one rounding for the per-tensor scale. */
NVFP4_HOST_DEVICE float nvfp4_dequant_value(uint32_t code, float block_scale, float per_tensor_scale)
{
    return (nvfp4_e2m1_value(code) * block_scale) * per_tensor_scale;
}

/* The H200 GEMM's FP16 operand order (docs/KERNEL.md, design item 13):
 * in each 16-element block, operand slot s holds element
 * nvfp4_sm90_operand_elem(s) -- the even elements (the code bytes' high
 * nibbles) in slots 0..7, the odd ones (low nibbles) in 8..15 -- so that the
 * four slots of a row in a wgmma A fragment (2t, 2t+1, 2t+8, 2t+9) are
 * elements 4t..4t+3: two whole code bytes.  A k16 step adds its 16 products
 * as a set (docs/ORACLE.md, sm90), so both operands in this order give the
 * bits of k order. */
NVFP4_HOST_DEVICE int nvfp4_sm90_operand_elem(int s) { return s < 8 ? 2 * s : 2 * (s - 8) + 1; }

/* Byte offset of the scale of row r, block column cb in the 128x4 tiled
 * layout whose rows hold `tiles_per_row` tiles (= roundup(cols/16, 4) / 4).
 * A tile is 512 bytes: row r%32 picks a 16-byte line, the row's quarter
 * (r%128)/32 a 4-byte group in it, cb%4 the byte; tiles run along block
 * columns first. */
NVFP4_HOST_DEVICE size_t nvfp4_tiled_offset(int64_t r, int64_t cb, int64_t tiles_per_row)
{
    return ((size_t)(r / 128) * (size_t)tiles_per_row + (size_t)(cb / 4)) * 512 +
           (size_t)(r % 32) * 16 + (size_t)((r % 128) / 32) * 4 + (size_t)(cb % 4);
}

#endif
