/* sm90_quantize.cu -- comfy-kitchen's NVFP4 quantizer on the device, bit for
 * bit nvfp4_quantize(): the amax pass of the dynamic per-tensor scale, the
 * block kernel (also the fused A producer of nvfp4_linear_cuda, which asks
 * it for the GEMM's FP16 operands instead of, or besides, codes and scales)
 * and nvfp4_quantize_cuda().  The arithmetic lives in quantize_internal.h;
 * docs/STREAMING_A.md has the design. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "cuda/ptx.cuh"
#include "cuda/quantize_internal.h"

#define Q_THREADS 256

static int q_misaligned(const void *p, uintptr_t a) { return ((uintptr_t)p & (a - 1)) != 0; }

/*------------------------------ amax pass ------------------------------*/

/* FP32(amax / 2688); a NaN amax (0x7FC00000) is the scale as it is, as on
 * the CPU (the device's division would return 0x7FFFFFFF). */
static __device__ __forceinline__ float q_dynamic_pts(uint32_t amax_bits)
{
    return amax_bits > 0x7F800000u ? __uint_as_float(amax_bits)
                                   : __fdiv_rn(__uint_as_float(amax_bits), 2688.0f);
}

/* Largest BF16 magnitude pattern of a 32-bit word's two halves; any NaN
 * (a pattern above 0x7F80) counts as 0x7FC0, above Inf, as torch.amax
 * returns the canonical NaN (nvfp4_amax_nan_bits). */
static __device__ __forceinline__ uint32_t amax_word(uint32_t w, uint32_t best)
{
    uint32_t lo = w & 0x7FFFu, hi = (w >> 16) & 0x7FFFu;
    lo = lo > 0x7F80u ? 0x7FC0u : lo; /* any NaN: the canonical one, above Inf */
    hi = hi > 0x7F80u ? 0x7FC0u : hi;
    best = lo > best ? lo : best;
    return hi > best ? hi : best;
}

extern "C" __global__ void __launch_bounds__(Q_THREADS)
    nvfp4_q_amax_kernel(const uint16_t *__restrict__ x, int64_t n, int vec, uint32_t *amax_bits)
{
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    uint32_t best = 0;
    int64_t done = 0;
    if (vec) { /* 8 elements per 16-byte load */
        const int64_t n8 = n / 8;
        const uint4 *x8 = (const uint4 *)x;
        for (int64_t i = tid; i < n8; i += stride) {
            uint4 w = __ldg(x8 + i);
            best = amax_word(w.x, best);
            best = amax_word(w.y, best);
            best = amax_word(w.z, best);
            best = amax_word(w.w, best);
        }
        done = n8 * 8;
    }
    for (int64_t i = done + tid; i < n; i += stride) best = amax_word(__ldg(x + i), best);
    best = __reduce_max_sync(0xFFFFFFFFu, best);
    if ((threadIdx.x & 31) == 0 && best != 0) atomicMax(amax_bits, best << 16);
}

nvfp4_status nvfp4_q_amax_launch(const uint16_t *x, int64_t m, int64_t k, uint32_t *amax_bits,
                                 cudaStream_t stream, const char *fn)
{
    cudaError_t e = cudaMemsetAsync(amax_bits, 0, sizeof *amax_bits, stream);
    if (e != cudaSuccess)
        return nvfp4_fail(NVFP4_ERR_CUDA, "%s: clearing the amax slot: %s", fn, cudaGetErrorString(e));
    const int64_t n = m * k;
    const int vec = !q_misaligned(x, 16);
    /* Enough CTAs to fill an H200 a few times over; each loops. */
    int64_t want = ((vec ? n / 8 : n) + Q_THREADS - 1) / Q_THREADS;
    unsigned grid = (unsigned)(want < 1 ? 1 : (want > 132 * 8 ? 132 * 8 : want));
    nvfp4_q_amax_kernel<<<grid, Q_THREADS, 0, stream>>>(x, n, vec, amax_bits);
    e = cudaGetLastError();
    if (e != cudaSuccess)
        return nvfp4_fail(NVFP4_ERR_CUDA, "%s: amax kernel launch: %s", fn, cudaGetErrorString(e));
    return NVFP4_OK;
}

/* FP32(amax / 2688) in place: the slot holds the amax's bit pattern on entry
 * and the per-tensor scale on exit (nvfp4_quantize_cuda's dynamic mode). */
extern "C" __global__ void nvfp4_q_finalize_kernel(float *slot)
{
    *slot = q_dynamic_pts(*(const uint32_t *)slot);
}

/*----------------------------- block kernel -----------------------------*/

/* One thread per 16-element block (row r, block column cb) of the padded
 * matrix; adjacent threads take adjacent blocks of a row, so the loads of
 * a warp cover 1 KiB of contiguous BF16. */
extern "C" __global__ void __launch_bounds__(Q_THREADS)
    nvfp4_q_blocks_kernel(const uint16_t *__restrict__ x, int m, int k, int prows, int nb, int vec,
                          const float *__restrict__ static_pts, const uint32_t *amax_bits,
                          int cuda_variant, uint8_t *__restrict__ codes,
                          uint8_t *__restrict__ scales, uint16_t *__restrict__ act, int64_t act_ld,
                          float *pts_out, float *pts_out2)
{
    /* the split GEMM that follows in the fused linear may start its weight
     * loads now (it waits for this grid before reading activations) */
    ptx_griddep_launch_dependents();
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const float pts = static_pts ? *static_pts : q_dynamic_pts(*amax_bits);
    if (idx == 0) {
        if (pts_out) *pts_out = pts;
        if (pts_out2) *pts_out2 = pts;
    }
    if (idx >= (int64_t)prows * nb) return;
    const int r = (int)(idx / nb), cb = (int)(idx % nb);

    float v[16];
    uint32_t amax_bits_blk = 0;
    if (r < m && cb * 16 + 16 <= k) {
        const uint16_t *src = x + (size_t)r * (size_t)k + (size_t)cb * 16;
        uint32_t w[8];
        if (vec) {
            const uint4 a = __ldg((const uint4 *)src), b = __ldg((const uint4 *)src + 1);
            w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w;
            w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
        } else {
#pragma unroll
            for (int i = 0; i < 8; i++) w[i] = (uint32_t)__ldg(src + 2 * i) | ((uint32_t)__ldg(src + 2 * i + 1) << 16);
        }
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const uint32_t b0 = w[i] << 16, b1 = w[i] & 0xFFFF0000u; /* element 2i, 2i+1 */
            v[2 * i] = __uint_as_float(b0);
            v[2 * i + 1] = __uint_as_float(b1);
            const uint32_t m0 = b0 & 0x7FFFFFFFu, m1 = b1 & 0x7FFFFFFFu;
            amax_bits_blk = m0 > amax_bits_blk ? m0 : amax_bits_blk;
            amax_bits_blk = m1 > amax_bits_blk ? m1 : amax_bits_blk;
        }
    } else { /* the edge: zeros past the input, as the C quantizer pads */
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const int c = cb * 16 + i;
            const uint32_t b = (r < m && c < k) ? (uint32_t)__ldg(x + (size_t)r * (size_t)k + c) << 16 : 0u;
            v[i] = __uint_as_float(b);
            const uint32_t mg = b & 0x7FFFFFFFu;
            amax_bits_blk = mg > amax_bits_blk ? mg : amax_bits_blk;
        }
    }

    uint32_t s8, code[16];
    q_block(v, amax_bits_blk, pts, cuda_variant, &s8, code);

    if (codes) { /* hi-first: element 2i in the high nibble */
        uint32_t lo = 0, hi = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            lo |= ((code[2 * i] << 4) | code[2 * i + 1]) << (8 * i);
            hi |= ((code[8 + 2 * i] << 4) | code[8 + 2 * i + 1]) << (8 * i);
        }
        *(uint2 *)(codes + (size_t)r * (size_t)(nb * 8) + (size_t)cb * 8) = make_uint2(lo, hi);
    }
    if (scales) {
        const int ncb = (nb + 3) / 4;
        scales[nvfp4_tiled_offset(r, cb, ncb)] = (uint8_t)s8;
    }
    if (act && r < m) {
        uint32_t h[8];
#pragma unroll
        for (int i = 0; i < 8; i++)
            h[i] = q_f16_operand(code[2 * i], s8) | (q_f16_operand(code[2 * i + 1], s8) << 16);
        uint4 *dst = (uint4 *)(act + (size_t)r * (size_t)act_ld + (size_t)cb * 16);
        dst[0] = make_uint4(h[0], h[1], h[2], h[3]);
        dst[1] = make_uint4(h[4], h[5], h[6], h[7]);
    }
}

nvfp4_status nvfp4_q_blocks_launch(const nvfp4_q_launch *q, const char *fn)
{
    const int64_t prows = (q->m + 15) / 16 * 16, nb = (q->k + 15) / 16;
    if (prows > INT32_MAX || q->k > INT32_MAX - 16 || prows * nb > INT64_MAX / 2)
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "%s: shape %lld x %lld is too large", fn,
                          (long long)q->m, (long long)q->k);
    if ((q->codes && q_misaligned(q->codes, 8)) || (q->act && q_misaligned(q->act, 16)) ||
        (q->act && q->act_ld % 8 != 0))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "%s: codes must be 8-byte and the FP16 operands 16-byte aligned", fn);
    const int vec = !q_misaligned(q->x, 16) && q->k % 8 == 0;
    const int64_t threads = prows * nb;
    nvfp4_q_blocks_kernel<<<(unsigned)((threads + Q_THREADS - 1) / Q_THREADS), Q_THREADS, 0,
                            q->stream>>>(q->x, (int)q->m, (int)q->k, (int)prows, (int)nb, vec,
                                         q->static_pts, q->amax_bits, q->cuda_variant, q->codes,
                                         q->scales, q->act, q->act_ld, q->pts_out, q->pts_out2);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return nvfp4_fail(NVFP4_ERR_CUDA, "%s: quantizer kernel launch: %s", fn, cudaGetErrorString(e));
    return NVFP4_OK;
}

/*--------------------------- public entry point ---------------------------*/

extern "C" nvfp4_status nvfp4_quantize_cuda(const nvfp4_cuda_quantize_args *args)
{
    static const char fn[] = "nvfp4_quantize_cuda";
    if (!args) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: args is NULL", fn);
    if (!args->x || !args->codes || !args->scales || !args->per_tensor_scale)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "%s: x, codes, scales and per_tensor_scale are required device pointers",
                          fn);
    if (args->m < 1 || args->k < 1)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: empty shape %lld x %lld", fn,
                          (long long)args->m, (long long)args->k);
    if (args->variant != NVFP4_VARIANT_EAGER && args->variant != NVFP4_VARIANT_CUDA)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: unknown variant %d", fn,
                          (int)args->variant);
    if (args->m > INT32_MAX / 2 || args->k > INT32_MAX / 2)
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "%s: a dimension exceeds 2^30", fn);
    cudaStream_t stream = (cudaStream_t)args->stream;
    const int64_t prows = (args->m + 15) / 16 * 16, pcols = (args->k + 15) / 16 * 16;

    /* The tile padding of the scales is zero, as nvfp4_tensor_alloc leaves it. */
    cudaError_t e = cudaMemsetAsync(args->scales, 0,
                                    nvfp4_scales_bytes(prows, pcols, NVFP4_SCALES_TILED), stream);
    if (e != cudaSuccess)
        return nvfp4_fail(NVFP4_ERR_CUDA, "%s: clearing the scales: %s", fn, cudaGetErrorString(e));

    nvfp4_q_launch q;
    memset(&q, 0, sizeof q);
    q.x = args->x;
    q.m = args->m;
    q.k = args->k;
    q.cuda_variant = args->variant == NVFP4_VARIANT_CUDA;
    q.codes = args->codes;
    q.scales = args->scales;
    q.stream = stream;
    nvfp4_status st;
    if (args->input_scale) {
        q.static_pts = args->input_scale;
        q.pts_out = args->per_tensor_scale; /* one thread copies it */
    } else {
        /* The output slot doubles as the amax scratch; a one-thread kernel
         * turns it into the scale before any block reads it. */
        st = nvfp4_q_amax_launch(args->x, args->m, args->k, (uint32_t *)args->per_tensor_scale,
                                 stream, fn);
        if (st != NVFP4_OK) return st;
        nvfp4_q_finalize_kernel<<<1, 1, 0, stream>>>(args->per_tensor_scale);
        e = cudaGetLastError();
        if (e != cudaSuccess)
            return nvfp4_fail(NVFP4_ERR_CUDA, "%s: scale kernel launch: %s", fn, cudaGetErrorString(e));
        q.static_pts = args->per_tensor_scale;
    }
    return nvfp4_q_blocks_launch(&q, fn);
}

extern "C" nvfp4_status nvfp4_sm90_produce_operands(const uint16_t *x, int64_t m, int64_t k,
                                                    const float *per_tensor_scale,
                                                    void *amax_scratch, nvfp4_variant variant,
                                                    uint16_t *act, int64_t act_ld, float *pts_out,
                                                    void *stream)
{
    static const char fn[] = "nvfp4_sm90_produce_operands";
    if (!x || !act || (!per_tensor_scale && !amax_scratch) || m < 1 || k < 1 ||
        act_ld < (k + 15) / 16 * 16 || m > INT32_MAX / 2 || k > INT32_MAX / 2)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "%s: bad arguments", fn);
    nvfp4_q_launch q;
    memset(&q, 0, sizeof q);
    q.x = x;
    q.m = m;
    q.k = k;
    q.static_pts = per_tensor_scale;
    q.amax_bits = (const uint32_t *)amax_scratch;
    q.cuda_variant = variant == NVFP4_VARIANT_CUDA;
    q.act = act;
    q.act_ld = act_ld;
    q.pts_out = pts_out;
    q.stream = (cudaStream_t)stream;
    if (!per_tensor_scale) {
        nvfp4_status st = nvfp4_q_amax_launch(x, m, k, (uint32_t *)amax_scratch, q.stream, fn);
        if (st != NVFP4_OK) return st;
    }
    return nvfp4_q_blocks_launch(&q, fn);
}
