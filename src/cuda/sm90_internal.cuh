/* sm90_internal.cuh -- declarations shared by the CUDA sources. */
#ifndef NVFP4_CUDA_SM90_INTERNAL_CUH
#define NVFP4_CUDA_SM90_INTERNAL_CUH

#include <cuda.h>
#include <stdint.h>

/* Kernel parameters (passed by value; the tensor maps must live in
 * parameter space, hence __grid_constant__). */
typedef struct nvfp4_sm90_params {
    CUtensorMap tmap_act;   /* FP16 activations [M][K], box {64, bn}, 128B swizzle */
    CUtensorMap tmap_codes; /* weight codes [N][K/2] bytes, box {32, 64*nc} */
    const uint8_t *b_scales;  /* weight scales, 128x4 tiled */
    const float *a_scale2;    /* device per-tensor scales */
    const float *b_scale2;
    const float *bias;
    float *raw;
    uint16_t *out;
    int m, n, k;
    int ncb;       /* 512-byte scale chunks per 128-row tile = roundup(K/16,4)/4 */
    int num_at;    /* activation tiles */
    int stages;
    int64_t num_tiles;
} nvfp4_sm90_params;

/* BF16 round to nearest even, NaN kept quiet with its sign (the same bits as
 * nvfp4_bf16_from_f32). */
static __device__ __forceinline__ uint16_t nvfp4_dev_bf16_rne(float v)
{
    uint32_t b = __float_as_uint(v);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((b >> 16) | 0x0040u);
    b += 0x7FFFu + ((b >> 16) & 1u);
    return (uint16_t)(b >> 16);
}

#endif
