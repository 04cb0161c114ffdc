/* gemm.cu -- the GB10 / RTX Blackwell (sm_120a, sm_121a) NVFP4 GEMM, bit-exact
 * to the sm120 model (docs/CONTRACT.md), and the linear that feeds it.
 *
 * One kernel design (docs/SM120.md):
 *  - every warp is its own pipeline: it takes work units (16 FA weight rows
 *    x 8 FB activation rows over all of K) in turn from a persistent grid,
 *    and streams each unit's codes and scale words through a ring of
 *    shared-memory stages with cp.async (no CTA-wide barrier);
 *  - the weights are the MMA's m16 side, so at M = 1 .. 8 a unit is one
 *    fragment of each and no MMA row is wasted on absent activations;
 *  - codes go to the fragments by ldmatrix as stored (hi first: the nibble
 *    swap inside every byte of both operands leaves every block sum, and so
 *    every bit, unchanged -- frag.h) and scale words straight from the
 *    128x4 tiled layout, masked in registers (the sign bits; blocks past
 *    K) -- no re-encoding pass;
 *  - one chain of k64 steps per output in increasing k, each K slice from
 *    +0 and the partials added in slice order, then raw and / or
 *    BF16(alpha raw [+ bias]) -- nothing depends on M or on the unit, so a
 *    row's bits are the same alone or in a batch.
 * The planner is plan.c, the data paths frag.h, the instruction mma.cuh.
 *
 * NOTES: sm_120 has ~99 KB of shared memory per block, no wgmma and no
 * tensor memory; mma.sync with kind::mxf4nvf4 needs the sm_120a / sm_121a
 * targets.  cp.async of 16 bytes needs 16-byte aligned rows (K a multiple
 * of 32); otherwise the copies are 8 bytes (K a multiple of 16).
 *
 * Built with NVFP4_SM120_EMULATE for sm_90a (tests/gpu/gpu.mk, a test build
 * only), the same source runs on an H100 / H200 with the MMA emulated
 * (mma.cuh): everything but the tensor core is then proven there. */
#define __NV_LEGACY_LAUNCH 1
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "cuda/ptx.cuh"
#include "cuda/quantize_internal.h"
#include "cuda/sm120/frag.h"
#include "cuda/sm120/mma.cuh"
#include "cuda/sm120/plan.h"
#include "cuda/sm120/sm120.h"
#include "cuda/epilogue.cuh"

/*----------------------------- PTX wrappers -----------------------------*/

/* cp.async of `bytes` (4, 8: .ca; 16: .cg, no L1) reading the first
 * `valid` and zero-filling the rest. */
NVFP4_DEV void sm120_cp_async16(uint32_t dst, const void *src, int valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid) : "memory");
}
NVFP4_DEV void sm120_cp_async8(uint32_t dst, const void *src, int valid)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(dst), "l"(src), "r"(valid) : "memory");
}
NVFP4_DEV void sm120_cp_async4(uint32_t dst, const void *src, int valid)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(valid) : "memory");
}
NVFP4_DEV void sm120_cp_commit(void) { asm volatile("cp.async.commit_group;" ::: "memory"); }

/* Wait until at most n (0 .. NVFP4_SM120_MAX_STAGES - 2) of this thread's
 * copy groups are pending (the count is an immediate). */
NVFP4_DEV void sm120_cp_wait(int n)
{
    switch (n) {
    case 0: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
    case 3: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
    case 4: asm volatile("cp.async.wait_group 4;" ::: "memory"); break;
    case 5: asm volatile("cp.async.wait_group 5;" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 6;" ::: "memory"); break;
    }
}
static_assert(NVFP4_SM120_MAX_STAGES - 2 <= 6, "sm120_cp_wait covers the deepest ring");

/* ldmatrix of two 8x8 b16 matrices (lanes 0-15 give the row addresses). */
NVFP4_DEV void sm120_ldsm_x2(uint32_t addr, uint32_t &r0, uint32_t &r1)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
                 : "=r"(r0), "=r"(r1)
                 : "r"(addr)
                 : "memory");
}

/*------------------------------- the kernel -------------------------------*/

typedef struct sm120_params {
    const uint8_t *a_codes, *a_scales; /* activations, M x K (hi-first, tiled) */
    const uint8_t *b_codes, *b_scales; /* weights, N x K */
    const float *a_pts, *b_pts;        /* per-tensor scales (device) */
    const float *bias;
    float *raw;
    uint16_t *out;
    int64_t m, n, k, groups, group_slice, units, m_tiles;
    int stages;
    int vec16; /* 16-byte code copies (K % 32 == 0, 16-byte aligned codes) */
} sm120_params;

/* Issue the copies of pipeline stage s of unit u into `stage` (one commit
 * group per stage, by the caller). */
template <int FA, int FB, int KG>
static __device__ __forceinline__ void sm120_load_stage(const sm120_params &p, const nvfp4_sm120_unit &u,
                                                        int64_t s, uint32_t stage, int lane)
{
    constexpr int NC = 2 * KG * (16 * FA + 8 * FB), NS = KG * (16 * FA + 8 * FB);
#pragma unroll
    for (int c = 0; c < (NC + 31) / 32; c++) {
        const int t = lane + 32 * c;
        if (NC % 32 != 0 && t >= NC) break;
        const nvfp4_sm120_copy cp = nvfp4_sm120_code_copy(&u, FA, KG, s, t);
        const uint8_t *src = (cp.weight ? p.b_codes : p.a_codes) + cp.src;
        if (p.vec16) {
            sm120_cp_async16(stage + cp.dst, src, cp.valid);
        } else { /* 8-byte rows: two halves, each whole or absent */
            sm120_cp_async8(stage + cp.dst, src, cp.valid >= 8 ? 8 : 0);
            sm120_cp_async8(stage + cp.dst + 8, cp.valid > 8 ? src + 8 : src, cp.valid > 8 ? 8 : 0);
        }
    }
#pragma unroll
    for (int c = 0; c < (NS + 31) / 32; c++) {
        const int t = lane + 32 * c;
        if (NS % 32 != 0 && t >= NS) break;
        const nvfp4_sm120_copy cp = nvfp4_sm120_scale_copy(&u, FA, FB, KG, s, t);
        sm120_cp_async4(stage + cp.dst, (cp.weight ? p.b_scales : p.a_scales) + cp.src, cp.valid);
    }
}

/* SLICED: K slices (p.group_slice < p.groups): a partial per slice, folded
 * into the total in slice order; otherwise one chain, no second set of
 * accumulators. */
template <int FA, int FB, int KG, bool SLICED>
static __global__ void __launch_bounds__(32 * NVFP4_SM120_WARPS) sm120_gemm_kernel(const sm120_params p)
{
    static_assert(FB == 1 || FB % 2 == 0, "activation fragments come in pairs (ldmatrix .x4) or alone");
    extern __shared__ __align__(128) uint8_t smem[];
    constexpr uint32_t STAGE = (uint32_t)((16 * FA + 8 * FB) * 36 * KG);
    const int lane = (int)(threadIdx.x & 31u), warp = (int)(threadIdx.x >> 5), warps = (int)(blockDim.x >> 5);
    const uint8_t *ring = smem + (size_t)warp * (size_t)p.stages * STAGE;
    const uint32_t ring_s = ptx_smem_addr(ring);
    /* After the fused linear's quantizer (launched as its programmatic
     * dependent): A and its per-tensor scale are complete and visible past
     * this point.  Returns at once after any other launch. */
    ptx_griddep_wait();
    const float alpha = __fmul_rn(*p.a_pts, *p.b_pts);
    const int64_t steps = (p.groups + KG - 1) / KG;
    const int64_t stride = (int64_t)gridDim.x * warps;

    /* units in turn, the activation tile fastest: the grid's warps run
     * consecutive units at once, so a weight tile's activation tiles share
     * its loads in L2 */
    for (int64_t unit = (int64_t)warp * gridDim.x + blockIdx.x; unit < p.units; unit += stride) {
        nvfp4_sm120_unit u;
        u.n0 = (unit / p.m_tiles) * 16 * FA;
        u.m0 = (unit % p.m_tiles) * 8 * FB;
        u.n = p.n;
        u.m = p.m;
        u.k = p.k;
        u.groups = p.groups;
        float acc[FA][FB][4], tot[SLICED ? FA : 1][SLICED ? FB : 1][4];
#pragma unroll
        for (int i = 0; i < FA; i++)
#pragma unroll
            for (int j = 0; j < FB; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

        __syncwarp(); /* every lane is done reading the ring's last unit */
        for (int s = 0; s < p.stages - 1; s++) {
            if (s < steps) sm120_load_stage<FA, FB, KG>(p, u, s, ring_s + (uint32_t)s * STAGE, lane);
            sm120_cp_commit();
        }
        for (int64_t s = 0; s < steps; s++) {
            sm120_cp_wait(p.stages - 2); /* stage s has landed (this lane's copies) */
            __syncwarp();                /* ... and every lane's; and the slot below is free */
            const int64_t next = s + p.stages - 1;
            if (next < steps)
                sm120_load_stage<FA, FB, KG>(p, u, next, ring_s + (uint32_t)(next % p.stages) * STAGE, lane);
            sm120_cp_commit();
            const uint32_t st = ring_s + (uint32_t)(s % p.stages) * STAGE;
            const uint8_t *stp = ring + (size_t)(s % p.stages) * STAGE;
#pragma unroll
            for (int g = 0; g < KG; g++) {
                const int64_t q = s * KG + g;
                if (q >= p.groups) break;
                const uint32_t mask = nvfp4_sm120_scale_mask(q, p.k);
                uint32_t afr[FA][4], bfr[FB][2], sfa[FA], sfb[FB];
#pragma unroll
                for (int i = 0; i < FA; i++) {
                    ptx_ldsm_x4(st + nvfp4_sm120_ldsm_a(lane, i, g, KG), afr[i]);
                    sfa[i] = *(const uint32_t *)(stp + nvfp4_sm120_scale_off(nvfp4_sm120_sfa_row(lane, i), g, FA,
                                                                             FB, KG)) & mask;
                }
                if (FB == 1) {
                    sm120_ldsm_x2(st + nvfp4_sm120_ldsm_b(lane, FA, 0, g, KG, 0), bfr[0][0], bfr[0][1]);
                } else { /* two fragments an ldmatrix */
#pragma unroll
                    for (int j = 0; j + 1 < FB; j += 2) {
                        uint32_t r[4];
                        ptx_ldsm_x4(st + nvfp4_sm120_ldsm_b(lane, FA, j, g, KG, 1), r);
                        bfr[j][0] = r[0], bfr[j][1] = r[1], bfr[j + 1][0] = r[2], bfr[j + 1][1] = r[3];
                    }
                }
#pragma unroll
                for (int j = 0; j < FB; j++)
                    sfb[j] = *(const uint32_t *)(stp + nvfp4_sm120_scale_off(nvfp4_sm120_sfb_row(lane, FA, j), g,
                                                                             FA, FB, KG)) & mask;
#pragma unroll
                for (int i = 0; i < FA; i++)
#pragma unroll
                    for (int j = 0; j < FB; j++) nvfp4_sm120_mma(acc[i][j], afr[i], bfr[j][0], bfr[j][1], sfa[i], sfb[j]);
                if (SLICED && ((q + 1) % p.group_slice == 0 || q + 1 == p.groups)) {
                    const bool first = q < p.group_slice;
#pragma unroll
                    for (int i = 0; i < FA; i++)
#pragma unroll
                        for (int j = 0; j < FB; j++)
#pragma unroll
                            for (int e = 0; e < 4; e++) {
                                tot[SLICED ? i : 0][SLICED ? j : 0][e] =
                                    first ? acc[i][j][e] : __fadd_rn(tot[SLICED ? i : 0][SLICED ? j : 0][e], acc[i][j][e]);
                                acc[i][j][e] = 0.0f;
                            }
                }
            }
        }

        /* the epilogue: raw, and BF16(alpha raw [+ bias]) */
#pragma unroll
        for (int i = 0; i < FA; i++)
#pragma unroll
            for (int j = 0; j < FB; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int64_t n = u.n0 + nvfp4_sm120_acc_n(lane, i, e), m = u.m0 + nvfp4_sm120_acc_m(lane, j, e);
                    if (n >= p.n || m >= p.m) continue;
                    const float v = SLICED ? tot[SLICED ? i : 0][SLICED ? j : 0][e] : acc[i][j][e];
                    const size_t o = (size_t)m * (size_t)p.n + (size_t)n;
                    if (p.raw) p.raw[o] = v;
                    if (p.out) p.out[o] = nvfp4_dev_out_bf16(v, alpha, p.bias, p.bias ? p.bias[n] : 0.0f);
                }
    }
}

typedef void (*sm120_kernel_fn)(const sm120_params);
/* [shape][sliced] */
static const sm120_kernel_fn sm120_kernels[NVFP4_SM120_NUM_SHAPES][2] = {
#define NVFP4_SM120_KERNEL_ROW(I, FA, FB, KG) {sm120_gemm_kernel<FA, FB, KG, false>, sm120_gemm_kernel<FA, FB, KG, true>},
    NVFP4_SM120_SHAPES(NVFP4_SM120_KERNEL_ROW)
#undef NVFP4_SM120_KERNEL_ROW
};

/*-------------------------------- the device --------------------------------*/

#define SM120_MAX_DEVICES 64

typedef struct sm120_device {
    int ok, sms;
    size_t smem_optin;
    size_t smem_set[NVFP4_SM120_NUM_SHAPES][2]; /* the kernels' dynamic shared-memory limits set so far */
} sm120_device;

static sm120_device sm120_devices[SM120_MAX_DEVICES];

#ifdef NVFP4_SM120_EMULATE
/* a GB10 unless the test says otherwise */
static int sm120_emu_sms = 48;
static size_t sm120_emu_smem = 101376;
extern "C" void nvfp4_sm120_emu_device(int sms, size_t smem_per_block)
{
    sm120_emu_sms = sms > 0 ? sms : 48;
    sm120_emu_smem = sms > 0 ? smem_per_block : 101376;
}
#define SM120_TARGET "sm_90 (the emulated test build)"
#define SM120_TARGET_OK(major, minor) ((major) == 9 && (minor) == 0)
#else
#define SM120_TARGET "sm_120 / sm_121 (RTX Blackwell, GB10)"
#define SM120_TARGET_OK(major, minor) ((major) == 12)
#endif

static nvfp4_status sm120_device_info(sm120_device **out, const char *fn)
{
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return nvfp4_fail(NVFP4_ERR_NO_DEVICE, "%s: cudaGetDevice: %s", fn, cudaGetErrorString(e));
    if (dev < 0 || dev >= SM120_MAX_DEVICES)
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "%s: device index %d above %d", fn, dev, SM120_MAX_DEVICES - 1);
    sm120_device *d = &sm120_devices[dev];
    if (!d->ok) {
        int major = 0, minor = 0, sms = 0, optin = 0;
        if ((e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev)) != cudaSuccess ||
            (e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev)) != cudaSuccess ||
            (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess ||
            (e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev)) != cudaSuccess)
            return nvfp4_fail(NVFP4_ERR_CUDA, "%s: device query: %s", fn, cudaGetErrorString(e));
        if (!SM120_TARGET_OK(major, minor))
            return nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "%s: device %d is sm_%d%d; this kernel needs %s", fn, dev, major,
                              minor, SM120_TARGET);
        d->sms = sms;
        d->smem_optin = (size_t)optin;
        d->ok = 1;
    }
    *out = d;
    return NVFP4_OK;
}

static int sm120_misaligned(const void *p, uintptr_t a) { return ((uintptr_t)p & (a - 1)) != 0; }

/* The GEMM on A's codes and scales; after_producer: launched as the
 * programmatic dependent of the kernel before it on the stream. */
static nvfp4_status sm120_gemm_launch(const nvfp4_cuda_gemm_args *args, int after_producer, const char *fn)
{
    if (!args) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: args is NULL", fn);
    const nvfp4_cuda_operand *a = &args->a, *b = &args->b;
    const int64_t m = a->rows, n = b->rows, k = a->cols;
    if (!a->codes || !a->scales || !a->per_tensor_scale)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: A (activations) needs codes, scales and per_tensor_scale",
                          fn);
    if (!b->codes || !b->scales || !b->per_tensor_scale)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: B (weights) needs codes, scales and per_tensor_scale", fn);
    if (m < 1 || n < 1 || k < 1)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: empty shape (M=%lld, N=%lld, K=%lld)", fn, (long long)m,
                          (long long)n, (long long)k);
    if (b->cols != k)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: A has K=%lld columns but B has %lld", fn, (long long)k,
                          (long long)b->cols);
    if (k % 16 != 0)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: K=%lld must be a multiple of 16", fn, (long long)k);
    if (m > NVFP4_SM120_MAX_DIM || n > NVFP4_SM120_MAX_DIM || k > NVFP4_SM120_MAX_DIM)
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "%s: a dimension exceeds 2^30", fn);
    if (sm120_misaligned(a->codes, 8) || sm120_misaligned(b->codes, 8) || sm120_misaligned(a->scales, 4) ||
        sm120_misaligned(b->scales, 4))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "%s: codes must be 8-byte and scales 4-byte aligned device pointers", fn);
    if (args->k_slices < 0 || args->k_slices > NVFP4_MAX_K_SLICES)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: k_slices = %d is outside 1..%d", fn, args->k_slices,
                          NVFP4_MAX_K_SLICES);
    if (!args->raw && !args->out) return NVFP4_OK; /* nothing asked for */

    sm120_device *dev = NULL;
    nvfp4_status st = sm120_device_info(&dev, fn);
    if (st != NVFP4_OK) return st;
    int sms = dev->sms;
    size_t smem = dev->smem_optin;
#ifdef NVFP4_SM120_EMULATE
    sms = sm120_emu_sms;
    smem = sm120_emu_smem < smem ? sm120_emu_smem : smem;
#endif
    nvfp4_sm120_plan plan;
    if (nvfp4_sm120_plan_gemm(sms, smem, m, n, k, args->k_slices, &plan) != 0)
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "%s: no launch for M=%lld N=%lld K=%lld in %zu bytes of shared memory",
                          fn, (long long)m, (long long)n, (long long)k, smem);
    const int sliced = plan.slices > 1;
    const sm120_kernel_fn kern = sm120_kernels[plan.shape][sliced];
    size_t *set = &dev->smem_set[plan.shape][sliced];
    if (*set < plan.smem) {
        cudaError_t e = cudaFuncSetAttribute((const void *)kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)plan.smem);
        if (e != cudaSuccess) {
            cudaGetLastError();
            return nvfp4_fail(NVFP4_ERR_CUDA, "%s: shared memory of %zu bytes: %s", fn, plan.smem,
                              cudaGetErrorString(e));
        }
        *set = plan.smem;
    }

    sm120_params p;
    memset(&p, 0, sizeof p);
    p.a_codes = a->codes;
    p.a_scales = a->scales;
    p.b_codes = b->codes;
    p.b_scales = b->scales;
    p.a_pts = a->per_tensor_scale;
    p.b_pts = b->per_tensor_scale;
    p.bias = args->bias;
    p.raw = args->raw;
    p.out = args->out;
    p.m = m;
    p.n = n;
    p.k = k;
    p.groups = plan.groups;
    p.group_slice = plan.group_slice;
    p.units = plan.units;
    p.m_tiles = plan.m_tiles;
    p.stages = plan.stages;
    p.vec16 = k % 32 == 0 && !sm120_misaligned(a->codes, 16) && !sm120_misaligned(b->codes, 16);

    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)plan.grid);
    cfg.blockDim = dim3((unsigned)plan.block);
    cfg.dynamicSmemBytes = plan.smem;
    cfg.stream = (cudaStream_t)args->stream;
    cudaLaunchAttribute attr = {};
    if (after_producer) {
        attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr.val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
    }
    void *kargs[1] = {&p};
    cudaError_t e = cudaLaunchKernelExC(&cfg, (const void *)kern, kargs);
    if (e == cudaSuccess) e = cudaGetLastError();
    else cudaGetLastError();
    if (e != cudaSuccess)
        return nvfp4_fail(NVFP4_ERR_CUDA, "%s: kernel launch (shape %d, grid %d): %s", fn, plan.shape, plan.grid,
                          cudaGetErrorString(e));
    return NVFP4_OK;
}

extern "C" nvfp4_status nvfp4_sm120_gemm(const nvfp4_cuda_gemm_args *args)
{
    return sm120_gemm_launch(args, 0, "gemm (cuda, sm120)");
}

/*-------------------------------- the linear --------------------------------*/

/* Workspace (256-byte aligned parts):
 *   [0, 1024)     the amax pass's words, one per CTA (at most SM120_AMAX_PARTS)
 *   [1024, 1280)  the per-tensor scale used (float)
 *   codes         the NVFP4 activations, roundup(m,16) x roundup(k,16) / 2
 *   scales        their tiled scales
 * nvfp4_linear_cuda_workspace() (the sm90 family's layout: the same parts
 * and the GEMM's own) is never smaller. */
#define SM120_AMAX_PARTS 256
#define SM120_PTS_OFF (SM120_AMAX_PARTS * 4)
#define SM120_LIN_HEADER (SM120_PTS_OFF + 256)

static size_t sm120_round256(size_t b) { return (b + 255) / 256 * 256; }

extern "C" size_t nvfp4_sm120_linear_workspace(int64_t m, int64_t k)
{
    if (m < 1 || k < 1 || m > NVFP4_SM120_MAX_DIM || k > NVFP4_SM120_MAX_DIM) return 0;
    const int64_t kp = (k + 15) / 16 * 16, mp = (m + 15) / 16 * 16;
    return SM120_LIN_HEADER + sm120_round256((size_t)mp * (size_t)kp / 2) +
           sm120_round256(nvfp4_scales_bytes(mp, kp, NVFP4_SCALES_TILED));
}

extern "C" nvfp4_status nvfp4_sm120_linear(const nvfp4_cuda_linear_args *args)
{
    static const char fn[] = "linear (cuda, sm120)";
    if (!args) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: args is NULL", fn);
    const nvfp4_cuda_operand *w = args->weight;
    if (!args->x || !w) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: x and weight are required", fn);
    if (!w->codes || !w->scales || !w->per_tensor_scale)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: the weight needs codes, scales and per_tensor_scale", fn);
    if (args->m < 1 || args->k < 1)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: empty activations (%lld x %lld)", fn, (long long)args->m,
                          (long long)args->k);
    if (args->variant != NVFP4_VARIANT_EAGER && args->variant != NVFP4_VARIANT_CUDA)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: unknown variant %d", fn, (int)args->variant);
    const int64_t m = args->m, k = args->k, kp = (k + 15) / 16 * 16, mp = (m + 15) / 16 * 16;
    if (w->cols != kp)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "%s: activations have %lld columns (%lld padded) but the weight has K = %lld", fn,
                          (long long)k, (long long)kp, (long long)w->cols);
    const size_t need = nvfp4_sm120_linear_workspace(m, k);
    if (need == 0 || w->rows < 1 || w->rows > NVFP4_SM120_MAX_DIM)
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "%s: shape M=%lld N=%lld K=%lld is out of range", fn, (long long)m,
                          (long long)w->rows, (long long)kp);
    if (!args->workspace || args->workspace_bytes < need)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "%s: workspace of %zu bytes is too small (need %zu: nvfp4_linear_cuda_workspace)", fn,
                          args->workspace_bytes, need);
    if (sm120_misaligned(args->workspace, 256))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: workspace must be 256-byte aligned (cudaMalloc'ed)", fn);
    if ((args->x_codes && sm120_misaligned(args->x_codes, 16)) ||
        (args->x_scales && sm120_misaligned(args->x_scales, 16)))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: x_codes and x_scales must be 16-byte aligned", fn);
    if (args->k_slices < 0 || args->k_slices > NVFP4_MAX_K_SLICES)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: k_slices = %d is outside 1..%d", fn, args->k_slices,
                          NVFP4_MAX_K_SLICES);
    sm120_device *dev = NULL;
    nvfp4_status st = sm120_device_info(&dev, fn);
    if (st != NVFP4_OK) return st;

    cudaStream_t stream = (cudaStream_t)args->stream;
    uint8_t *ws = (uint8_t *)args->workspace;
    float *pts_slot = (float *)(ws + SM120_PTS_OFF);
    uint8_t *codes = args->x_codes ? args->x_codes : ws + SM120_LIN_HEADER;
    uint8_t *scales = args->x_scales ? args->x_scales
                                     : ws + SM120_LIN_HEADER + sm120_round256((size_t)mp * (size_t)kp / 2);
    if (args->x_scales) { /* the caller's copy gets zero tile padding, as nvfp4_quantize */
        cudaError_t e = cudaMemsetAsync(args->x_scales, 0, nvfp4_scales_bytes(mp, kp, NVFP4_SCALES_TILED), stream);
        if (e != cudaSuccess)
            return nvfp4_fail(NVFP4_ERR_CUDA, "%s: clearing x_scales: %s", fn, cudaGetErrorString(e));
    }
    int amax_n = 0;
    if (!args->input_scale) { /* the dynamic scale: each CTA of the amax pass stores its word */
        st = nvfp4_q_amax_parts_launch(args->x, m, k, (uint32_t *)ws, SM120_AMAX_PARTS, &amax_n, stream, fn);
        if (st != NVFP4_OK) return st;
    }
    /* The A producer: the block quantizer (the same kernels and rounding
     * as nvfp4_quantize_cuda) writes codes and tiled scales, which the GEMM
     * reads as it reads any stored NVFP4 activations. */
    nvfp4_q_launch q;
    memset(&q, 0, sizeof q);
    q.x = args->x;
    q.m = m;
    q.k = k;
    q.static_pts = args->input_scale;
    q.amax_bits = (const uint32_t *)ws;
    q.amax_n = amax_n;
    q.after_amax = !args->input_scale;
    q.cuda_variant = args->variant == NVFP4_VARIANT_CUDA;
    q.codes = codes;
    q.scales = scales;
    q.pts_out = pts_slot;
    q.pts_out2 = args->x_scale;
    q.stream = stream;
    st = nvfp4_q_blocks_launch(&q, fn);
    if (st != NVFP4_OK || (!args->raw && !args->out)) return st;

    nvfp4_cuda_gemm_args g;
    memset(&g, 0, sizeof g);
    g.a.codes = codes;
    g.a.scales = scales;
    g.a.per_tensor_scale = pts_slot;
    g.a.rows = m;
    g.a.cols = kp;
    g.b = *w;
    g.bias = args->bias;
    g.raw = args->raw;
    g.out = args->out;
    g.stream = args->stream;
    g.k_slices = args->k_slices;
    return sm120_gemm_launch(&g, 1, fn);
}
