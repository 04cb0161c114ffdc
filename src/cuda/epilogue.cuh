/* epilogue.cuh -- the contract's epilogue on the device, one definition for
 * every kernel family: out = BF16_RNE(FP32_RNE(alpha * acc) [+ bias]). */
#ifndef NVFP4_CUDA_EPILOGUE_CUH
#define NVFP4_CUDA_EPILOGUE_CUH

#include <stdint.h>

/* BF16 round to nearest even, NaN kept quiet with its sign (the same bits as
 * nvfp4_bf16_from_f32). */
static __device__ __forceinline__ uint16_t nvfp4_dev_bf16_rne(float v)
{
    uint32_t b = __float_as_uint(v);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((b >> 16) | 0x0040u);
    b += 0x7FFFu + ((b >> 16) & 1u);
    return (uint16_t)(b >> 16);
}

/* An output's BF16 value: alpha * acc (+ bias), each step RNE, then BF16
 * RNE (docs/CONTRACT.md). */
static __device__ __forceinline__ uint16_t nvfp4_dev_out_bf16(float acc, float alpha, const float *bias, float b)
{
    float y = __fmul_rn(alpha, acc);
    if (bias) y = __fadd_rn(y, b);
    return nvfp4_dev_bf16_rne(y);
}

#endif
