/* gemm.cu -- nvfp4_gemm_cuda(): the H100/H200 (sm_90a) NVFP4 GEMM, bit-exact
 * to the sm90 model.  Validation, the plan (plan.c), the workspace, the FP16
 * pre-pass, and the host helpers the family launchers share.
 *
 * On the caller's stream, by the plan:
 *  - M <= 32: one launch of a register kernel (regm.cu): TMA brings NVFP4
 *    weights and activations, MMA warps dequantize their own weights in
 *    registers and run mma.sync chains;
 *  - otherwise the pre-pass nvfp4_sm90_dequant_act (A, M x K NVFP4 -> FP16
 *    [M][K] in the workspace, each block in the operand order of
 *    nvfp4_sm90_operand_elem; e2m1 * |e4m3| is exact in FP16), then the
 *    persistent wgmma kernel (wgmma.cu) as its programmatic dependent.
 * docs/KERNEL.md explains the design and the numbers. */
/* Legacy launch stubs: no guarded statics or exception tables in the host
 * code nvcc generates for the launches. */
#define __NV_LEGACY_LAUNCH 1
#include <string.h>

#include "cuda/ptx.cuh"
#include "cuda/sm90/common.cuh"
#include "cuda/dispatch.h"
#include "cuda/sm90/host.h"
#include "formats/layout.h"

/* Activation pre-pass: one thread per half block (8 elements), so that a
 * warp's 16-byte stores cover 512 contiguous bytes (one thread per block
 * with two 16-byte stores wrote each 32-byte sector in two halves: attn-out
 * at M = 2048 took 16.3 us, L2-bound at 76 %, for 37 MB of traffic). */
extern "C" __global__ void __launch_bounds__(256)
    nvfp4_sm90_dequant_act(const uint8_t *__restrict__ codes, const uint8_t *__restrict__ scales,
                           uint16_t *__restrict__ act, int m, int k, unsigned *__restrict__ sk_counters,
                           int sk_count)
{
    const int nb = k / 16;
    /* the GEMM after it is its programmatic dependent: it may start its
     * prologue now and waits (griddepcontrol.wait) for these writes */
    ptx_griddep_launch_dependents();
    /* its stream-K counters start at 0 (no memset between the two launches,
     * which would serialise them) */
    if (blockIdx.x == 0)
        for (int i = threadIdx.x; i < sk_count; i += blockDim.x) sk_counters[i] = 0u;
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (int64_t)m * nb * 2) return;
    const int64_t blk = idx >> 1;
    const int h = (int)(idx & 1);
    const int row = (int)(blk / nb), kb = (int)(blk % nb);
    const int ncb = (nb + 3) / 4;
    /* slots 8h .. 8h+7 in the operand order: nibble h of all 8 code bytes */
    const uint2 w = *(const uint2 *)(codes + (size_t)row * (k / 2) + (size_t)kb * 8);
    uint32_t o[4];
    nvfp4_sm90_dequant_half(w, h, scales[nvfp4_tiled_offset(row, kb, ncb)], o);
    *(uint4 *)(act + (size_t)row * k + (size_t)kb * 16 + 8 * h) = make_uint4(o[0], o[1], o[2], o[3]);
}

/* ------------------------------------------------------------------------ */
/* Host helpers.                                                            */

static nvfp4_sm90_encode_fn get_encode_tiled(void)
{
    static nvfp4_sm90_encode_fn fn = NULL;
    if (!fn) {
        void *p = NULL;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) ==
                cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            fn = (nvfp4_sm90_encode_fn)p;
    }
    return fn;
}

#define SM90_MAX_DEVICES 16
static nvfp4_sm90_device_info sm90_devices[SM90_MAX_DEVICES];

nvfp4_status nvfp4_sm90_device_of(nvfp4_sm90_device_info **out)
{
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess)
        return nvfp4_fail(NVFP4_ERR_NO_DEVICE, "gemm (cuda): cudaGetDevice: %s", cudaGetErrorString(e));
    if (dev < 0 || dev >= SM90_MAX_DEVICES)
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "gemm (cuda): device index %d above %d", dev, SM90_MAX_DEVICES - 1);
    nvfp4_sm90_device_info *d = &sm90_devices[dev];
    if (!d->ok) {
        int major = 0, minor = 0, sms = 0, optin = 0, per_sm = 0;
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
        cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev);
        if (major != 9 || minor != 0)
            return nvfp4_fail(NVFP4_ERR_UNSUPPORTED,
                              "gemm (cuda): device %d is sm_%d%d; this kernel needs sm_90 (H100/H200)", dev, major,
                              minor);
        d->dev.num_sms = sms;
        d->dev.smem_optin = (size_t)optin;
        d->dev.smem_per_sm = (size_t)per_sm;
        d->ok = 1;
    }
    *out = d;
    return NVFP4_OK;
}

int nvfp4_sm90_misaligned(const void *p, uintptr_t a) { return ((uintptr_t)p & (a - 1)) != 0; }

void nvfp4_sm90_fill_io(nvfp4_sm90_gemm_io *io, const nvfp4_sm90_launch *l)
{
    io->a_scale2 = l->args->a.per_tensor_scale;
    io->b_scale2 = l->args->b.per_tensor_scale;
    io->bias = l->args->bias;
    io->raw = l->args->raw;
    io->out = l->args->out;
    io->m = (int)l->m;
    io->n = (int)l->n;
    io->k = (int)l->k;
    io->ncb = l->ncb;
    io->stages = l->plan->stages;
    io->chunks_per_slice = l->plan->chunks_per_slice;
}

nvfp4_status nvfp4_sm90_raise_smem(const nvfp4_sm90_launch *l, const void *kern)
{
    size_t *set = &l->dev->smem_set[l->plan->kernel];
    if (*set >= l->plan->smem) return NVFP4_OK;
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)l->plan->smem);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* reported here, not left for the next call */
        return nvfp4_fail(NVFP4_ERR_CUDA, "gemm (cuda): shared memory of %zu bytes for %s: %s", l->plan->smem,
                          l->kern->name, cudaGetErrorString(e));
    }
    *set = l->plan->smem;
    return NVFP4_OK;
}

cudaError_t nvfp4_sm90_launch_kernel(const void *kern, int grid, int threads, size_t smem, cudaStream_t stream,
                                     int after_producer, void *params)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)grid);
    cfg.blockDim = dim3((unsigned)threads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    if (after_producer) {
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
    }
    cfg.attrs = attr;
    cfg.numAttrs = after_producer ? 1 : 0;
    void *kargs[1] = {params};
    cudaError_t e = cudaLaunchKernelExC(&cfg, kern, kargs);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* reported through our status: not left for the next call to find */
        return e;
    }
    return cudaGetLastError();
}

nvfp4_status nvfp4_sm90_tensor_map(const nvfp4_sm90_launch *l, CUtensorMap *map, CUtensorMapDataType type, int rank,
                                   const void *base, const cuuint64_t *dims, const cuuint64_t *strides,
                                   const cuuint32_t *box, CUtensorMapSwizzle swizzle, const char *what)
{
    const cuuint32_t estr[4] = {1, 1, 1, 1};
    CUresult r = l->encode(map, type, (cuuint32_t)rank, (void *)base, dims, strides, box, estr,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        return nvfp4_fail(NVFP4_ERR_CUDA, "gemm (cuda): %s tensor map failed (CUresult %d)", what, (int)r);
    return NVFP4_OK;
}

nvfp4_status nvfp4_sm90_f16_act_map(const nvfp4_sm90_launch *l, CUtensorMap *map, int box_rows)
{
    const cuuint64_t dims[2] = {(cuuint64_t)l->k, (cuuint64_t)l->m};
    const cuuint64_t strides[1] = {(cuuint64_t)l->k * 2};
    const cuuint32_t box[2] = {64, (cuuint32_t)box_rows};
    return nvfp4_sm90_tensor_map(l, map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, l->args->workspace, dims, strides, box,
                                 CU_TENSOR_MAP_SWIZZLE_128B, "activation");
}

/* ------------------------------------------------------------------------ */
/* Workspace: the FP16 activations [M][K] (each block in the operand order,
 * nvfp4_sm90_operand_elem), 256-byte aligned; then, for M >
 * NVFP4_SM90_SK_MIN_M, the wgmma kernel's stream-K area: a counter per CTA,
 * then one tile's FP32 accumulators per CTA (as many CTAs as there can be
 * tiles, at most NVFP4_SM90_SK_MAX_CTAS). */
static size_t ws_act_bytes(int64_t m, int64_t k) { return ((size_t)m * (size_t)k * 2 + 255) / 256 * 256; }

size_t nvfp4_sm90_sk_area_bytes(int64_t m, int64_t n)
{
    if (m <= NVFP4_SM90_SK_MIN_M) return 0;
    const int64_t tiles = ((n + 127) / 128) * ((m + 127) / 128); /* tiles of 128 x >= 128, at most */
    const int64_t ctas = tiles < NVFP4_SM90_SK_MAX_CTAS ? tiles : NVFP4_SM90_SK_MAX_CTAS;
    return NVFP4_SM90_SK_FLAG_BYTES + (size_t)ctas * NVFP4_SM90_SK_SLOT_FLOATS * sizeof(float);
}

uint8_t *nvfp4_sm90_sk_area(void *workspace, int64_t m, int64_t k) { return (uint8_t *)workspace + ws_act_bytes(m, k); }

extern "C" size_t nvfp4_cuda_gemm_workspace(int64_t m, int64_t n, int64_t k)
{
    if (m <= 0 || k <= 0 || m > INT32_MAX || k > INT32_MAX) return 0;
    return ws_act_bytes(m, k) + (n > 0 && n <= INT32_MAX ? nvfp4_sm90_sk_area_bytes(m, n) : 0);
}

int nvfp4_sm90_gemm_sk_counters(void *workspace, int64_t m, int64_t n, int64_t k, unsigned **counters)
{
    *counters = NULL;
    if (!workspace || m <= 0 || n <= 0 || k <= 0 || m > INT32_MAX || n > INT32_MAX ||
        nvfp4_sm90_sk_area_bytes(m, n) == 0)
        return 0;
    *counters = (unsigned *)nvfp4_sm90_sk_area(workspace, m, k);
    return NVFP4_SM90_SK_MAX_CTAS;
}

/* ------------------------------------------------------------------------ */
/* The GEMM.                                                                */

/* The operands and shape of args; nvfp4_a: the GEMM reads A's NVFP4 codes
 * and scales (else args->a gives the shape, and the scale unless the GEMM
 * quantizes BF16 activations itself). */
static nvfp4_status check_args(const nvfp4_cuda_gemm_args *args, int nvfp4_a)
{
    if (!args) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "gemm (cuda): args is NULL");
    const nvfp4_cuda_operand *a = &args->a, *b = &args->b;
    const int64_t m = a->rows, n = b->rows, k = a->cols;
    if (nvfp4_a && (!a->codes || !a->scales || !a->per_tensor_scale))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "gemm (cuda): A (activations) needs codes, scales and per_tensor_scale");
    if (!b->codes || !b->scales || !b->per_tensor_scale)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "gemm (cuda): B (weights) needs codes, scales and per_tensor_scale");
    if (m < 1 || n < 1 || k < 1)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "gemm (cuda): empty shape (M=%lld, N=%lld, K=%lld)",
                          (long long)m, (long long)n, (long long)k);
    if (b->cols != k)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "gemm (cuda): A has K=%lld columns but B has %lld",
                          (long long)k, (long long)b->cols);
    if (k % 16 != 0 || n % 16 != 0)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "gemm (cuda): K=%lld and N=%lld must be multiples of 16",
                          (long long)k, (long long)n);
    if (k % 32 != 0)
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED,
                          "gemm (cuda): K=%lld is not a multiple of 32: the TMA loads need 16-byte "
                          "code rows (pad K to 32; zero blocks do not change the result)",
                          (long long)k);
    if (m > INT32_MAX / 2 || n > INT32_MAX / 2 || k > INT32_MAX / 2)
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "gemm (cuda): a dimension exceeds 2^30");
    if ((nvfp4_a && (nvfp4_sm90_misaligned(a->codes, 16) || nvfp4_sm90_misaligned(a->scales, 16))) ||
        nvfp4_sm90_misaligned(b->codes, 16) || nvfp4_sm90_misaligned(b->scales, 16))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "gemm (cuda): codes and scales must be 16-byte aligned device pointers");
    if (args->k_slices < 0 || args->k_slices > NVFP4_MAX_K_SLICES)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "gemm (cuda): k_slices = %d is outside 1..%d", args->k_slices,
                          NVFP4_MAX_K_SLICES);
    return NVFP4_OK;
}

/* The workspace, once there is something to compute, and the device. */
static nvfp4_status check_workspace(const nvfp4_cuda_gemm_args *args, nvfp4_sm90_device_info **dev)
{
    const size_t need = nvfp4_cuda_gemm_workspace(args->a.rows, args->b.rows, args->a.cols);
    if (!args->workspace || args->workspace_bytes < need)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "gemm (cuda): workspace of %zu bytes is too small (need %zu: nvfp4_cuda_gemm_workspace)",
                          args->workspace_bytes, need);
    if (nvfp4_sm90_misaligned(args->workspace, 256))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "gemm (cuda): workspace must be 256-byte aligned (cudaMalloc'ed)");
    return nvfp4_sm90_device_of(dev);
}

nvfp4_status nvfp4_sm90_launch_prepass(const nvfp4_sm90_launch *l)
{
    const nvfp4_cuda_gemm_args *args = l->args;
    /* it also zeroes the stream-K counters the GEMM after it uses */
    unsigned *sk = l->plan->sk_tile0 < l->plan->tiles ? (unsigned *)nvfp4_sm90_sk_area(args->workspace, l->m, l->k)
                                                      : NULL;
    const int64_t halves = l->m * (l->k / 16) * 2; /* one thread each */
    nvfp4_sm90_dequant_act<<<(unsigned)((halves + 255) / 256), 256, 0, (cudaStream_t)args->stream>>>(
        args->a.codes, args->a.scales, (uint16_t *)args->workspace, (int)l->m, (int)l->k, sk, sk ? l->plan->grid : 0);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return nvfp4_fail(NVFP4_ERR_CUDA, "gemm (cuda): activation pre-pass launch: %s", cudaGetErrorString(e));
    return NVFP4_OK;
}

/* Run a plan: its family's launcher (the wgmma one runs the pre-pass first
 * where the plan has one, after every check that can refuse the launch). */
static nvfp4_status run_plan(const nvfp4_cuda_gemm_args *args, const nvfp4_sm90_plan *plan,
                             nvfp4_sm90_device_info *dev, const nvfp4_sm90_bf16_act *src)
{
    nvfp4_sm90_launch l;
    memset(&l, 0, sizeof l);
    l.args = args;
    l.plan = plan;
    l.kern = &nvfp4_sm90_kernels[plan->kernel];
    l.dev = dev;
    l.encode = get_encode_tiled();
    l.m = args->a.rows;
    l.n = args->b.rows;
    l.k = args->a.cols;
    l.ncb = (int)((l.k / 16 + 3) / 4);
    l.src = src;
    /* after the quantizer or the pre-pass: their programmatic dependent (its
     * launch and prologue, and the first weight boxes, overlap their tail) */
    l.after_producer = plan->act == NVFP4_SM90_ACT_QUANTIZED || plan->prepass;
    if (!l.encode) return nvfp4_fail(NVFP4_ERR_CUDA, "gemm (cuda): cuTensorMapEncodeTiled not found in the driver");
    return NVFP4_SM90_IS_REG(l.kern) ? nvfp4_sm90_launch_regm(&l) : nvfp4_sm90_launch_wgmma(&l);
}

extern "C" nvfp4_status nvfp4_sm90_gemm_cuda(const nvfp4_cuda_gemm_args *args)
{
    nvfp4_status st = check_args(args, 1);
    if (st != NVFP4_OK) return st;
    if (!args->raw && !args->out) return NVFP4_OK; /* nothing asked for */
    nvfp4_sm90_device_info *dev = NULL;
    if ((st = check_workspace(args, &dev)) != NVFP4_OK) return st;
    nvfp4_sm90_plan plan;
    if (nvfp4_sm90_plan_gemm(&dev->dev, args->a.rows, args->b.rows, args->a.cols, args->k_slices,
                             NVFP4_SM90_ACT_NVFP4, &plan) != 0)
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "gemm (cuda): no kernel for M=%lld N=%lld K=%lld with %d K slices",
                          (long long)args->a.rows, (long long)args->b.rows, (long long)args->a.cols, args->k_slices);
    return run_plan(args, &plan, dev, NULL);
}

nvfp4_status nvfp4_sm90_gemm_planned(const nvfp4_cuda_gemm_args *args, const nvfp4_sm90_plan *plan,
                                     const nvfp4_sm90_bf16_act *src)
{
    if (!args || !plan || plan->kernel < 0 || plan->kernel >= nvfp4_sm90_num_kernels)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "gemm (cuda): no plan");
    /* after the quantizer, the register kernels read its NVFP4 codes, the
     * wgmma kernel its FP16 operands in the workspace */
    const int nvfp4_a = plan->act == NVFP4_SM90_ACT_QUANTIZED && NVFP4_SM90_IS_REG(&nvfp4_sm90_kernels[plan->kernel]);
    nvfp4_status st = check_args(args, nvfp4_a);
    if (st != NVFP4_OK) return st;
    if (plan->act != NVFP4_SM90_ACT_BF16 && !args->a.per_tensor_scale)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "gemm (cuda): A (activations) needs per_tensor_scale");
    if (plan->act == NVFP4_SM90_ACT_BF16 &&
        (!src || !src->x || (!src->static_pts && (!src->amax_bits || src->amax_n < 1)) || src->cols < 1 ||
         src->cols > args->a.cols || src->cols % 8 != 0 || nvfp4_sm90_misaligned(src->x, 16)))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "gemm (cuda): BF16 activations for TMA need 16-byte aligned rows (a multiple of 8 columns)");
    if (!args->raw && !args->out) return NVFP4_OK;
    nvfp4_sm90_device_info *dev = NULL;
    if ((st = check_workspace(args, &dev)) != NVFP4_OK) return st;
    return run_plan(args, plan, dev, src);
}
