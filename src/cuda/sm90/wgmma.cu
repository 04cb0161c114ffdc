/* wgmma.cu -- the persistent wgmma kernels (wgmma_body.cuh, one per row of
 * kernels.def) and their launcher.  M > 32: 64 nc weight rows x bn
 * activation rows a tile, the FP16 activations written by the pre-pass or
 * the fused linear's quantizer, loaded by TMA. */
#define __NV_LEGACY_LAUNCH 1
#include <string.h>

#include "cuda/ptx.cuh"
#include "cuda/sm90/common.cuh"
#include "cuda/sm90/host.h"
#include "cuda/sm90/wgmma_ptx.cuh"

#define SM90_BN 64
#define SM90_NC 1
#define SM90_NAME nvfp4_sm90_gemm_bn64_nc1
#define SM90_WGMMA wgmma_m64n64k16_rs
#include "cuda/sm90/wgmma_body.cuh"

#define SM90_BN 64
#define SM90_NC 2
#define SM90_NAME nvfp4_sm90_gemm_bn64_nc2
#define SM90_WGMMA wgmma_m64n64k16_rs
#include "cuda/sm90/wgmma_body.cuh"

#define SM90_BN 128
#define SM90_NC 1
#define SM90_NAME nvfp4_sm90_gemm_bn128_nc1
#define SM90_WGMMA wgmma_m64n128k16_rs
#include "cuda/sm90/wgmma_body.cuh"

#define SM90_BN 128
#define SM90_NC 2
#define SM90_NAME nvfp4_sm90_gemm_bn128_nc2
#define SM90_WGMMA wgmma_m64n128k16_rs
#include "cuda/sm90/wgmma_body.cuh"

/* Narrower 128-row tiles for M > 128: fewer idle SMs in the last wave (the
 * planner's wave model). */
#define SM90_BN 176
#define SM90_NC 2
#define SM90_NAME nvfp4_sm90_gemm_bn176_nc2
#define SM90_WGMMA wgmma_m64n176k16_rs
#include "cuda/sm90/wgmma_body.cuh"

#define SM90_BN 192
#define SM90_NC 2
#define SM90_NAME nvfp4_sm90_gemm_bn192_nc2
#define SM90_WGMMA wgmma_m64n192k16_rs
#include "cuda/sm90/wgmma_body.cuh"

#define SM90_BN 232
#define SM90_NC 2
#define SM90_NAME nvfp4_sm90_gemm_bn232_nc2
#define SM90_WGMMA wgmma_m64n232k16_rs
#include "cuda/sm90/wgmma_body.cuh"

#define SM90_BN 256
#define SM90_NC 2
#define SM90_NAME nvfp4_sm90_gemm_bn256_nc2
#define SM90_WGMMA wgmma_m64n256k16_rs
#include "cuda/sm90/wgmma_body.cuh"

/* The bn = 64 tiles with the K-slice code the others leave out
 * (wgmma_body.cuh, SM90_SLICES): the GEMMs with K slices. */
#define SM90_SLICED 1
#define SM90_BN 64
#define SM90_NC 1
#define SM90_NAME nvfp4_sm90_gemm_bn64_nc1_sl
#define SM90_WGMMA wgmma_m64n64k16_rs
#include "cuda/sm90/wgmma_body.cuh"

#define SM90_SLICED 1
#define SM90_BN 64
#define SM90_NC 2
#define SM90_NAME nvfp4_sm90_gemm_bn64_nc2_sl
#define SM90_WGMMA wgmma_m64n64k16_rs
#include "cuda/sm90/wgmma_body.cuh"

/* kernels.def's wgmma rows, in its order (they come first there) */
static const void *const sm90_wgmma_kernels[] = {
#define NVFP4_SM90_WGMMA_KERNEL(name, bn, nc, sliced) (const void *)name,
#define NVFP4_SM90_REG_KERNEL(name, family, mt, r, bf16)
#include "cuda/sm90/kernels.def"
#undef NVFP4_SM90_WGMMA_KERNEL
#undef NVFP4_SM90_REG_KERNEL
};

#ifdef NVFP4_TESTING
/* nvfp4_testing.h: the BF16 epilogue staged through shared memory where out
 * is 16-byte aligned (-1, the rule), or one element at a time (0). */
static int sm90_epilogue = -1;
extern "C" void nvfp4_sm90_force_epilogue(int staged) { sm90_epilogue = staged == 0 ? 0 : -1; }
#define SM90_EPILOGUE_STAGED (sm90_epilogue != 0)
#else
#define SM90_EPILOGUE_STAGED 1
#endif

nvfp4_status nvfp4_sm90_launch_wgmma(const nvfp4_sm90_launch *l)
{
    const nvfp4_cuda_gemm_args *args = l->args;
    const nvfp4_sm90_plan *plan = l->plan;
    const nvfp4_sm90_kernel *kern = l->kern;
    const int ksub = NVFP4_SM90_KSUB(kern->mt, kern->nc);
    if (plan->kernel < 0 || plan->kernel >= (int)(sizeof sm90_wgmma_kernels / sizeof sm90_wgmma_kernels[0]))
        return nvfp4_fail(NVFP4_ERR_INTERNAL, "gemm (cuda): %s is not a wgmma kernel", kern->name);
    const void *fn = sm90_wgmma_kernels[plan->kernel];
    nvfp4_sm90_params p;
    memset(&p, 0, sizeof p);
    nvfp4_status st = nvfp4_sm90_f16_act_map(l, &p.tmap_act, kern->mt);
    if (st != NVFP4_OK) return st;
    p.act3d = plan->act3d;
    if (p.act3d) {
        /* the same bytes seen as [chunk][row][64]: the row stride (2K) above
         * the chunk stride (128 B), so one box holds ksub chunks in the
         * stage's chunk-major order; full chunks only (K / 64) */
        const cuuint64_t dims[3] = {64, (cuuint64_t)l->m, (cuuint64_t)(l->k / 64)};
        const cuuint64_t strides[2] = {(cuuint64_t)l->k * 2, 128};
        const cuuint32_t box[3] = {64, (cuuint32_t)kern->mt, (cuuint32_t)ksub};
        if (nvfp4_sm90_tensor_map(l, &p.tmap_act3, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, args->workspace, dims, strides,
                                  box, CU_TENSOR_MAP_SWIZZLE_128B, "activation (3-D)") != NVFP4_OK) {
            nvfp4_clear_error();
            p.act3d = 0; /* the 2-D boxes then */
        }
    }
    {
        const cuuint64_t dims[2] = {(cuuint64_t)(l->k / 2), (cuuint64_t)l->n};
        const cuuint64_t strides[1] = {(cuuint64_t)(l->k / 2)};
        const cuuint32_t box[2] = {(cuuint32_t)(32 * ksub), (cuuint32_t)(64 * kern->nc)};
        st = nvfp4_sm90_tensor_map(l, &p.tmap_codes, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, args->b.codes, dims, strides, box,
                                   CU_TENSOR_MAP_SWIZZLE_NONE, "weight");
        if (st != NVFP4_OK) return st;
    }
    {
        const int64_t rows256 = (l->n + 127) / 128 * (int64_t)l->ncb * 2; /* 128-row tiles x chunks x 2 */
        const cuuint64_t dims[2] = {256, (cuuint64_t)rows256};
        const cuuint64_t strides[1] = {256};
        const cuuint32_t box[2] = {256, (cuuint32_t)(2 * ksub)};
        st = nvfp4_sm90_tensor_map(l, &p.tmap_scales, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, args->b.scales, dims, strides,
                                   box, CU_TENSOR_MAP_SWIZZLE_NONE, "weight scale");
        if (st != NVFP4_OK) return st;
    }
    nvfp4_sm90_fill_io(&p.io, l);
    p.out_staged = SM90_EPILOGUE_STAGED && args->out && !nvfp4_sm90_misaligned(args->out, 16);
    p.num_at = (int)((l->m + kern->mt - 1) / kern->mt);
    p.num_tiles = plan->tiles;
    p.sk_tile0 = plan->sk_tile0;
    if (plan->sk_tile0 < plan->tiles) {
        /* the stream-K area of the workspace; its counters start at 0 */
        uint8_t *sk = nvfp4_sm90_sk_area(args->workspace, l->m, l->k);
        if (plan->grid > NVFP4_SM90_SK_MAX_CTAS || l->m <= NVFP4_SM90_SK_MIN_M ||
            (size_t)plan->grid * NVFP4_SM90_SK_SLOT_FLOATS * sizeof(float) + NVFP4_SM90_SK_FLAG_BYTES >
                nvfp4_sm90_sk_area_bytes(l->m, l->n))
            return nvfp4_fail(NVFP4_ERR_INTERNAL, "gemm (cuda): stream-K grid of %d CTAs exceeds its workspace",
                              plan->grid);
        p.sk_flags = (unsigned *)sk;
        p.sk_acc = (float *)(sk + NVFP4_SM90_SK_FLAG_BYTES);
    }
    if ((st = nvfp4_sm90_raise_smem(l, fn)) != NVFP4_OK) return st;
    if (plan->prepass && (st = nvfp4_sm90_launch_prepass(l)) != NVFP4_OK) return st;
    const cudaError_t e = nvfp4_sm90_launch_kernel(fn, plan->grid, plan->threads, plan->smem,
                                                   (cudaStream_t)args->stream, l->after_producer, &p);
    if (e != cudaSuccess)
        return nvfp4_fail(NVFP4_ERR_CUDA, "gemm (cuda): %s launch: %s", kern->name, cudaGetErrorString(e));
    return NVFP4_OK;
}
