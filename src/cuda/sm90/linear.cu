/* linear.cu -- nvfp4_linear_cuda(): ComfyUI's NVFP4 linear on the H100/H200,
 * bit for bit nvfp4_linear_cpu() (model SM90).
 *
 * Queue on the caller's stream, no host synchronisation:
 *   1. dynamic scale only: the amax pass (a word per CTA: the largest of
 *      |x|'s bits; the next kernel, its programmatic dependent, reduces
 *      them);
 *   2. where nvfp4_sm90_plan_linear takes the in-kernel A producer (M <= 2,
 *      REGW / REGR, K <= 8192: plan.h): the register GEMM quantizes the
 *      BF16 activations itself (its CTA 0 also writes the optional codes
 *      and scales), and that is all; else
 *   2. the A producer (quantize.cu's block kernel): BF16 blocks of 16 ->
 *      E4M3 scale and E2M1 codes exactly as nvfp4_quantize() -> what the
 *      GEMM consumes, plus the optional debug copies of codes and scales;
 *   3. the GEMM (gemm.cu), the quantizer's programmatic dependent.
 * docs/STREAMING_A.md has the design and the state of the fusion. */
#define __NV_LEGACY_LAUNCH 1
#include <string.h>

#include "cuda/dispatch.h"
#include "cuda/sm90/host.h"
#ifdef NVFP4_TESTING
#include "nvfp4_testing.h"
#endif

/* Workspace layout (every part 256-byte aligned):
 *   [0, 1024)         the amax pass's words, one per CTA (at most LIN_AMAX_PARTS)
 *   [1024, 1280)      the per-tensor scale (float) at 1024
 *   act               the GEMM's workspace: nvfp4_cuda_gemm_workspace(m, n, K)
 *   codes, scales     the quantized activations handed to the GEMM */
#define LIN_AMAX_PARTS 256
#define LIN_PTS_OFF (LIN_AMAX_PARTS * 4)
#define LIN_HEADER (LIN_PTS_OFF + 256)

static size_t round256(size_t b) { return (b + 255) / 256 * 256; }

typedef struct lin_layout {
    size_t act, codes, scales, total; /* offsets and the total size */
    size_t act_bytes;
} lin_layout;

static int lin_layout_of(int64_t m, int64_t n, int64_t k, lin_layout *l)
{
    if (m < 1 || n < 1 || k < 1 || m > INT32_MAX / 2 || n > INT32_MAX / 2 || k > INT32_MAX / 2)
        return 0;
    const int64_t kp = (k + 15) / 16 * 16, prows = (m + 15) / 16 * 16;
    l->act_bytes = round256(nvfp4_cuda_gemm_workspace(m, n, kp));
    l->act = LIN_HEADER;
    l->codes = l->act + l->act_bytes;
    l->scales = l->codes + round256((size_t)prows * (size_t)kp / 2);
    l->total = l->scales + round256(nvfp4_scales_bytes(prows, kp, NVFP4_SCALES_TILED));
    return 1;
}

extern "C" size_t nvfp4_linear_cuda_workspace(int64_t m, int64_t n, int64_t k)
{
    lin_layout l;
    return lin_layout_of(m, n, k, &l) ? l.total : 0;
}

static int lin_misaligned(const void *p, uintptr_t a) { return ((uintptr_t)p & (a - 1)) != 0; }

extern "C" nvfp4_status nvfp4_sm90_linear_cuda(const nvfp4_cuda_linear_args *args)
{
    static const char fn[] = "linear (cuda)";
    if (!args) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: args is NULL", fn);
    const nvfp4_cuda_operand *w = args->weight;
    if (!args->x || !w)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: x and weight are required", fn);
    if (!w->codes || !w->scales || !w->per_tensor_scale)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "%s: the weight needs codes, scales and per_tensor_scale", fn);
    if (args->m < 1 || args->k < 1)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: empty activations (%lld x %lld)", fn,
                          (long long)args->m, (long long)args->k);
    if (args->variant != NVFP4_VARIANT_EAGER && args->variant != NVFP4_VARIANT_CUDA)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: unknown variant %d", fn,
                          (int)args->variant);
    const int64_t m = args->m, k = args->k, kp = (k + 15) / 16 * 16, n = w->rows;
    if (w->cols != kp)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "%s: activations have %lld columns (%lld padded) but the weight has "
                          "K = %lld",
                          fn, (long long)k, (long long)kp, (long long)w->cols);
    lin_layout lay;
    if (!lin_layout_of(m, n, k, &lay))
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "%s: shape M=%lld N=%lld K=%lld is out of range",
                          fn, (long long)m, (long long)n, (long long)kp);
    if (!args->workspace || args->workspace_bytes < lay.total)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "%s: workspace of %zu bytes is too small (need %zu: "
                          "nvfp4_linear_cuda_workspace)",
                          fn, args->workspace_bytes, lay.total);
    if (lin_misaligned(args->workspace, 256))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "%s: workspace must be 256-byte aligned (cudaMalloc'ed)", fn);
    if ((args->x_codes && lin_misaligned(args->x_codes, 16)) ||
        (args->x_scales && lin_misaligned(args->x_scales, 16)))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "%s: x_codes and x_scales must be 16-byte aligned", fn);

    cudaStream_t stream = (cudaStream_t)args->stream;
    uint8_t *ws = (uint8_t *)args->workspace;
    uint32_t *amax_parts = (uint32_t *)ws;
    int amax_n = 0; /* how many the amax pass wrote */
    float *pts_slot = (float *)(ws + LIN_PTS_OFF);
    /* Fused: the NVFP4 activations reach memory only when the caller asks. */
    uint8_t *codes = args->x_codes;
    uint8_t *scales = args->x_scales;
    const int64_t prows = (m + 15) / 16 * 16;
    nvfp4_status st;

    if (args->x_scales) { /* the caller's copy gets zero tile padding, as nvfp4_quantize */
        cudaError_t e = cudaMemsetAsync(args->x_scales, 0,
                                        nvfp4_scales_bytes(prows, kp, NVFP4_SCALES_TILED), stream);
        if (e != cudaSuccess)
            return nvfp4_fail(NVFP4_ERR_CUDA, "%s: clearing x_scales: %s", fn, cudaGetErrorString(e));
    }
    /* The GEMM's plan: with small M and x in 16-byte rows (its TMA box), the
     * GEMM quantizes the BF16 blocks itself (one launch with a static scale;
     * the amax pass and then the GEMM as its programmatic dependent with the
     * dynamic one), its CTA 0 the debug copies too; else after the quantizer. */
    const int gemm = args->raw || args->out;
    nvfp4_sm90_plan plan;
    memset(&plan, 0, sizeof plan);
    if (gemm) {
        nvfp4_sm90_device_info *dev = NULL;
        if ((st = nvfp4_sm90_device_of(&dev)) != NVFP4_OK) return st;
        if (nvfp4_sm90_plan_linear(&dev->dev, m, n, kp, args->k_slices, k % 8 == 0 && !lin_misaligned(args->x, 16),
                                   &plan) != 0)
            return nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "%s: no kernel for M=%lld N=%lld K=%lld with %d K slices", fn,
                              (long long)m, (long long)n, (long long)kp, args->k_slices);
    }
    const int inkernel = gemm && plan.act == NVFP4_SM90_ACT_BF16;
    if (!args->input_scale) { /* no memset: each CTA stores its own word */
        st = nvfp4_q_amax_parts_launch(args->x, m, k, amax_parts, LIN_AMAX_PARTS, &amax_n, stream, fn);
        if (st != NVFP4_OK) return st;
    }
    nvfp4_cuda_gemm_args g; /* the GEMM's arguments but for A's data */
    memset(&g, 0, sizeof g);
    g.a.rows = m;
    g.a.cols = kp;
    g.b = *w;
    g.bias = args->bias;
    g.raw = args->raw;
    g.out = args->out;
    g.stream = args->stream;
    g.workspace = ws + lay.act;
    g.workspace_bytes = lay.act_bytes;
    g.k_slices = args->k_slices;
    if (inkernel) {
        nvfp4_sm90_bf16_act src;
        memset(&src, 0, sizeof src);
        src.x = args->x;
        src.cols = k;
        src.static_pts = args->input_scale;
        src.amax_bits = amax_parts;
        src.amax_n = amax_n;
        src.pts_out = args->x_scale;
        src.codes = args->x_codes;
        src.scales = args->x_scales;
        src.cuda_variant = args->variant == NVFP4_VARIANT_CUDA;
        return nvfp4_sm90_gemm_planned(&g, &plan, &src);
    }

    /* Register kernels: their own warps dequantize NVFP4 activations, so the
     * quantizer writes codes and scales (into the workspace unless the caller
     * asked for them) instead of FP16 operands. */
    const int nvfp4_act = gemm && NVFP4_SM90_IS_REG(&nvfp4_sm90_kernels[plan.kernel]);
    if (nvfp4_act) {
        if (!codes) codes = ws + lay.codes;
        if (!scales) scales = ws + lay.scales;
    }
    nvfp4_q_launch q;
    memset(&q, 0, sizeof q);
    q.x = args->x;
    q.m = m;
    q.k = k;
    q.static_pts = args->input_scale;
    q.amax_bits = amax_parts;
    q.amax_n = amax_n;
    q.after_amax = !args->input_scale; /* its programmatic dependent */
    q.cuda_variant = args->variant == NVFP4_VARIANT_CUDA;
    /* eager before REGR (attn-out, FC2 at M <= 16): the table kernel, where
     * four lanes a block measured 0.7-1.6 us slower in the fused linear
     * (docs/STREAMING_A.md; QKV and FC1, on REGM and REGW, the other way
     * round) */
    q.table_first = !q.cuda_variant && gemm && nvfp4_sm90_kernels[plan.kernel].family == NVFP4_SM90_REGR;
    q.codes = codes;
    q.scales = scales;
    /* The producer writes the exact FP16 operands straight into the GEMM's
     * activation workspace: quantize and dequantize in one pass. */
    q.act = nvfp4_act ? NULL : (uint16_t *)(ws + lay.act);
    q.act_ld = kp;
    q.pts_out = pts_slot;
    q.pts_out2 = args->x_scale;
    if (!nvfp4_act) q.zero_count = nvfp4_sm90_gemm_sk_counters(ws + lay.act, m, n, kp, &q.zero_words);
    q.stream = stream;
    st = nvfp4_q_blocks_launch(&q, fn);
    if (st != NVFP4_OK) return st;
    if (!gemm) return NVFP4_OK;

    /* The GEMM as the quantizer's programmatic dependent: from its NVFP4
     * codes, or from the FP16 operands it wrote into `act` (no pre-pass). */
    g.a.per_tensor_scale = pts_slot;
    if (nvfp4_act) {
        g.a.codes = codes;
        g.a.scales = scales;
    }
    return nvfp4_sm90_gemm_planned(&g, &plan, NULL);
}

#ifdef NVFP4_TESTING
extern "C" int nvfp4_sm90_linear_inkernel(int64_t m, int64_t n, int64_t k, int k_slices)
{
    nvfp4_sm90_device_info *dev = NULL;
    nvfp4_sm90_plan plan;
    return nvfp4_sm90_device_of(&dev) == NVFP4_OK &&
           nvfp4_sm90_plan_linear(&dev->dev, m, n, (k + 15) / 16 * 16, k_slices, k % 8 == 0, &plan) == 0 &&
           plan.act == NVFP4_SM90_ACT_BF16;
}
#endif
