/* regm.cu -- the register kernels (regm_body.cuh, one per row of
 * kernels.def) and their launcher.  M <= 32: TMA brings NVFP4 weights and
 * activations (or BF16 activations, which the in-kernel A producer's twins
 * quantize themselves), MMA warps dequantize their own weight chains in
 * registers and run mma.sync chains (design: regm.cuh). */
#define __NV_LEGACY_LAUNCH 1
#include <string.h>

#include "cuda/ptx.cuh"
#include "cuda/sm90/common.cuh"
#include "cuda/sm90/host.h"
#include "cuda/sm90/regm.cuh"
#include "formats/layout.h"

/* REGM: 8-row chains, MT activation rows x TW chains per MMA warp. */
#define REGM_MT 8
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regm_mt8_tw1
#include "cuda/sm90/regm_body.cuh"

#define REGM_MT 8
#define REGM_TW 2
#define REGM_NAME nvfp4_sm90_regm_mt8_tw2
#include "cuda/sm90/regm_body.cuh"

#define REGM_MT 8
#define REGM_TW 4
#define REGM_NAME nvfp4_sm90_regm_mt8_tw4
#include "cuda/sm90/regm_body.cuh"

#define REGM_MT 16
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regm_mt16_tw1
#include "cuda/sm90/regm_body.cuh"

#define REGM_MT 16
#define REGM_TW 2
#define REGM_NAME nvfp4_sm90_regm_mt16_tw2
#include "cuda/sm90/regm_body.cuh"

#define REGM_MT 16
#define REGM_TW 4
#define REGM_NAME nvfp4_sm90_regm_mt16_tw4
#include "cuda/sm90/regm_body.cuh"

#define REGM_MT 32
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regm_mt32_tw1
#include "cuda/sm90/regm_body.cuh"

#define REGM_MT 32
#define REGM_TW 2
#define REGM_NAME nvfp4_sm90_regm_mt32_tw2
#include "cuda/sm90/regm_body.cuh"

#define REGM_MT 32
#define REGM_TW 4
#define REGM_NAME nvfp4_sm90_regm_mt32_tw4
#include "cuda/sm90/regm_body.cuh"

/* REGW: 16-row chains (the weights the mma's A operand), one a warp. */
#define REGM_WA 1
#define REGM_MT 8
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regw_mt8_tw1
#include "cuda/sm90/regm_body.cuh"

#define REGM_WA 1
#define REGM_MT 16
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regw_mt16_tw1
#include "cuda/sm90/regm_body.cuh"

/* REGR: the REGW layout, R MMA warps per chain taking its chunks in turn. */
#define REGM_WA 1
#define REGM_ROT 2
#define REGM_MT 8
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_mt8_r2
#include "cuda/sm90/regm_body.cuh"

#define REGM_WA 1
#define REGM_ROT 3
#define REGM_MT 8
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_mt8_r3
#include "cuda/sm90/regm_body.cuh"

#define REGM_WA 1
#define REGM_ROT 4
#define REGM_MT 8
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_mt8_r4
#include "cuda/sm90/regm_body.cuh"

#define REGM_WA 1
#define REGM_ROT 2
#define REGM_MT 16
#define REGM_TW 1
#define REGM_NAME nvfp4_sm90_regr_mt16_r2
#include "cuda/sm90/regm_body.cuh"

/* The in-kernel A producer's twins (REGM_BF16: BF16 activations in, the
 * activation warps quantize them) of REGW and REGR at MT = 8: the kernels
 * the planner takes at M <= 2 (MT = 16 twins were exact and 2-3.6x slower
 * than the prequantized GEMM at M = 16: docs/STREAMING_A.md). */
#define REGM_WA 1
#define REGM_MT 8
#define REGM_TW 1
#define REGM_BF16 1
#define REGM_NAME nvfp4_sm90_regw_bf16_mt8_tw1
#include "cuda/sm90/regm_body.cuh"

#define REGM_WA 1
#define REGM_ROT 2
#define REGM_MT 8
#define REGM_TW 1
#define REGM_BF16 1
#define REGM_NAME nvfp4_sm90_regr_bf16_mt8_r2
#include "cuda/sm90/regm_body.cuh"

#define REGM_WA 1
#define REGM_ROT 3
#define REGM_MT 8
#define REGM_TW 1
#define REGM_BF16 1
#define REGM_NAME nvfp4_sm90_regr_bf16_mt8_r3
#include "cuda/sm90/regm_body.cuh"

#define REGM_WA 1
#define REGM_ROT 4
#define REGM_MT 8
#define REGM_TW 1
#define REGM_BF16 1
#define REGM_NAME nvfp4_sm90_regr_bf16_mt8_r4
#include "cuda/sm90/regm_body.cuh"

/* kernels.def's register rows, in its order (after the wgmma rows) */
static const void *const sm90_reg_kernels[] = {
#define NVFP4_SM90_WGMMA_KERNEL(name, bn, nc, sliced)
#define NVFP4_SM90_REG_KERNEL(name, family, mt, r, bf16) (const void *)name,
#include "cuda/sm90/kernels.def"
#undef NVFP4_SM90_WGMMA_KERNEL
#undef NVFP4_SM90_REG_KERNEL
};

/* An operand's codes as {128, box_rows} boxes (128-byte swizzle) and, if
 * scales_map, its 128x4-tiled scales as {256 bytes, 2 halves, 512-byte
 * chunks}, boxes {256, halves, 4}: one 256-element chunk of K. */
static nvfp4_status code_and_scale_maps(const nvfp4_sm90_launch *l, CUtensorMap *codes_map, CUtensorMap *scales_map,
                                        const nvfp4_cuda_operand *op, int64_t rows, int box_rows, int halves,
                                        const char *what)
{
    {
        const cuuint64_t dims[2] = {(cuuint64_t)(l->k / 2), (cuuint64_t)rows};
        const cuuint64_t strides[1] = {(cuuint64_t)(l->k / 2)};
        const cuuint32_t box[2] = {128, (cuuint32_t)box_rows};
        nvfp4_status st = nvfp4_sm90_tensor_map(l, codes_map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, op->codes, dims,
                                                strides, box, CU_TENSOR_MAP_SWIZZLE_128B, what);
        if (st != NVFP4_OK || !scales_map) return st;
    }
    const int64_t chunks = (rows + 127) / 128 * l->ncb;
    const cuuint64_t dims[3] = {256, 2, (cuuint64_t)chunks};
    const cuuint64_t strides[2] = {256, 512};
    const cuuint32_t box[3] = {256, (cuuint32_t)halves, 4};
    return nvfp4_sm90_tensor_map(l, scales_map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, op->scales, dims, strides, box,
                                 CU_TENSOR_MAP_SWIZZLE_NONE, what);
}

nvfp4_status nvfp4_sm90_launch_regm(const nvfp4_sm90_launch *l)
{
    const nvfp4_cuda_gemm_args *args = l->args;
    const nvfp4_sm90_plan *plan = l->plan;
    const nvfp4_sm90_kernel *kern = l->kern;
    const nvfp4_sm90_bf16_act *src = l->src;
    const int slot = plan->kernel - nvfp4_sm90_num_wgmma;
    if (slot < 0 || slot >= (int)(sizeof sm90_reg_kernels / sizeof sm90_reg_kernels[0]) ||
        (plan->act == NVFP4_SM90_ACT_BF16) != (src != NULL))
        return nvfp4_fail(NVFP4_ERR_INTERNAL, "gemm (cuda): %s is not a register kernel for these activations",
                          kern->name);
    const void *fn = sm90_reg_kernels[slot];
    nvfp4_sm90_regm_params rp;
    memset(&rp, 0, sizeof rp);
    /* the weights: codes as one box of the CTA's rows, the scales as a 4-D box
     * {256, 2, 4 chunks, SGMAX groups}: every group the CTA spans */
    nvfp4_status st = code_and_scale_maps(l, &rp.tm_b_codes, NULL, &args->b, l->n, 8 * plan->tiles_per_cta, 1, "weight");
    if (st != NVFP4_OK) return st;
    {
        const cuuint64_t dims[4] = {256, 2, (cuuint64_t)l->ncb, (cuuint64_t)((l->n + 127) / 128)};
        const cuuint64_t strides[3] = {256, 512, (cuuint64_t)l->ncb * 512};
        const cuuint32_t box[4] = {256, 2, 4, (cuuint32_t)REGM_SGMAX(plan->tiles_per_cta)};
        st = nvfp4_sm90_tensor_map(l, &rp.tm_b_scales, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4, args->b.scales, dims,
                                   strides, box, CU_TENSOR_MAP_SWIZZLE_NONE, "weight scale");
        if (st != NVFP4_OK) return st;
    }
    if (src) { /* BF16 x by TMA: one box {256, M} a stage */
        const cuuint64_t dims[2] = {(cuuint64_t)src->cols, (cuuint64_t)l->m};
        const cuuint64_t strides[1] = {(cuuint64_t)src->cols * 2};
        const cuuint32_t box[2] = {REGM_KC, (cuuint32_t)l->m};
        st = nvfp4_sm90_tensor_map(l, &rp.tm_x, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, src->x, dims, strides, box,
                                   CU_TENSOR_MAP_SWIZZLE_NONE, "BF16 activation");
        if (st != NVFP4_OK) return st;
        rp.x_cols = (int)src->cols;
        rp.x_rows = (int)l->m;
        rp.x_pts = src->static_pts;
        rp.x_amax = src->amax_bits;
        rp.x_amax_n = src->amax_n;
        rp.x_pts_out = src->pts_out;
        rp.x_codes = src->codes;
        rp.x_scales = src->scales;
        rp.cuda_variant = src->cuda_variant;
    } else {
        st = code_and_scale_maps(l, &rp.tm_a_codes, &rp.tm_a_scales, &args->a, l->m, kern->mt,
                                 REGM_ACT_HALVES(kern->mt), "activation");
        if (st != NVFP4_OK) return st;
    }
    rp.act_rot = plan->act_rot;
    nvfp4_sm90_fill_io(&rp.io, l);
    rp.tiles = (int)plan->tiles;
    rp.tmax = plan->tiles_per_cta;
    rp.mma_warps = plan->mma_warps;
    rp.loaders = plan->loaders;
    /* the epilogue stores pairs (raw 8 bytes, out 4) where the pointers allow */
    rp.pair_stores = !nvfp4_sm90_misaligned(args->raw, 8) && !nvfp4_sm90_misaligned(args->out, 4);
    if ((st = nvfp4_sm90_raise_smem(l, fn)) != NVFP4_OK) return st;
    /* with a dynamic scale, the in-kernel producer is the amax pass's
     * programmatic dependent */
    const int dependent = src ? !src->static_pts : l->after_producer;
    const cudaError_t e = nvfp4_sm90_launch_kernel(fn, plan->grid, plan->threads, plan->smem,
                                                   (cudaStream_t)args->stream, dependent, &rp);
    if (e != cudaSuccess)
        return nvfp4_fail(NVFP4_ERR_CUDA, "gemm (cuda): %s launch: %s", kern->name, cudaGetErrorString(e));
    return NVFP4_OK;
}
