/* quantize.cu -- comfy-kitchen's NVFP4 quantizer on the device, bit for
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
#include "quant/thresholds.h"
#ifdef NVFP4_TESTING
#include "nvfp4_testing.h"
#endif

#define Q_THREADS 256
/* Grid: at most this many CTAs per SM (what fits: 80 registers a
 * thread), each looping over blocks, so the table is built a few times per
 * SM rather than once per 256 blocks. */
#define Q_CTAS_PER_SM 3
static int q_misaligned(const void *p, uintptr_t a) { return ((uintptr_t)p & (a - 1)) != 0; }

#ifdef NVFP4_TESTING
/* nvfp4_testing.h: the block kernel by the rule or forced; the threads that
 * store the quantizer's per-tensor scale and the amax pass's words spin
 * first (the amax pass takes the delay as an argument: a read of the device
 * copy would sit between each CTA's reduction and its store). */
static int q_forced_launch = -1;
extern "C" void nvfp4_q_force_launch(int mode) { q_forced_launch = mode >= 0 && mode <= 2 ? mode : -1; }
static __device__ long long q_dev_store_delay;
static long long q_store_delay_host;
extern "C" int nvfp4_q_delay_stores(long long cycles)
{
    q_store_delay_host = cycles;
    return cudaMemcpyToSymbol(q_dev_store_delay, &cycles, sizeof cycles) == cudaSuccess ? 0 : -1;
}
static __device__ __forceinline__ void q_dev_spin(long long delay)
{
    if (delay > 0)
        for (const long long t0 = clock64(); clock64() - t0 < delay;) {
        }
}
#define Q_DELAY_PARAM , long long delay
#define Q_DELAY_ARG , q_store_delay_host
#define Q_SPIN(delay) q_dev_spin(delay)
#else
#define Q_DELAY_PARAM
#define Q_DELAY_ARG
#define Q_SPIN(delay)
#endif

/* thread 0's per-tensor scale stores */
static __device__ __forceinline__ void q_store_pts(float pts, float *pts_out, float *pts_out2)
{
    Q_SPIN(q_dev_store_delay);
    if (pts_out) *pts_out = pts;
    if (pts_out2) *pts_out2 = pts;
}

/*------------------------------ amax pass ------------------------------*/


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

/* Each CTA reduces its share of x (grid-stride, 16-byte loads where
 * aligned, up to four in flight a thread) to one word: with parts, CTA i stores
 * it to out[i] (no memset before the pass, no atomics); else one atomicMax
 * a CTA into *out, zeroed before the launch. */
extern "C" __global__ void __launch_bounds__(Q_THREADS)
    nvfp4_q_amax_kernel(const uint16_t *__restrict__ x, int64_t n, int vec, uint32_t *out, int parts Q_DELAY_PARAM)
{
    __shared__ uint32_t warp_best[Q_THREADS / 32];
    /* the kernel after it (the quantizer, or the register GEMM with the
     * in-kernel A producer) may start now: it waits for this grid before
     * reading the words */
    ptx_griddep_launch_dependents();
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    uint32_t best = 0;
    int64_t done = 0;
    if (vec) { /* 8 elements per 16-byte load */
        const int64_t n8 = n / 8;
        const uint4 *x8 = (const uint4 *)x;
        for (int64_t i = tid; i < n8; i += 4 * stride) {
            uint4 w[4]; /* up to four loads in flight; zeros past the end add nothing */
#pragma unroll
            for (int j = 0; j < 4; j++)
                w[j] = i + j * stride < n8 ? __ldg(x8 + i + j * stride) : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                best = amax_word(w[j].x, best);
                best = amax_word(w[j].y, best);
                best = amax_word(w[j].z, best);
                best = amax_word(w[j].w, best);
            }
        }
        done = n8 * 8;
    }
    for (int64_t i = done + tid; i < n; i += stride) best = amax_word(__ldg(x + i), best);
    best = __reduce_max_sync(0xFFFFFFFFu, best);
    if ((threadIdx.x & 31) == 0) warp_best[threadIdx.x / 32] = best;
    __syncthreads();
    if (threadIdx.x < 32) {
        best = threadIdx.x < Q_THREADS / 32 ? warp_best[threadIdx.x] : 0u;
        best = __reduce_max_sync(0xFFFFFFFFu, best);
        if (threadIdx.x == 0) {
            Q_SPIN(delay);
            if (parts)
                out[blockIdx.x] = best << 16;
            else if (best != 0)
                atomicMax(out, best << 16);
        }
    }
}

/* CTAs of the amax pass: one 16-byte load a thread where at most cap CTAs
 * cover x (small M: the pass is one load's latency), else cap CTAs whose
 * threads loop, four loads in flight */
static unsigned q_amax_grid(int64_t n, int vec, int64_t cap)
{
    const int64_t want = ((vec ? n / 8 : n) + Q_THREADS - 1) / Q_THREADS;
    return (unsigned)(want < 1 ? 1 : want > cap ? cap : want);
}

nvfp4_status nvfp4_q_amax_launch(const uint16_t *x, int64_t m, int64_t k, uint32_t *amax_bits,
                                 cudaStream_t stream, const char *fn)
{
    cudaError_t e = cudaMemsetAsync(amax_bits, 0, sizeof *amax_bits, stream);
    if (e != cudaSuccess)
        return nvfp4_fail(NVFP4_ERR_CUDA, "%s: clearing the amax slot: %s", fn, cudaGetErrorString(e));
    const int64_t n = m * k;
    const int vec = !q_misaligned(x, 16);
    nvfp4_q_amax_kernel<<<q_amax_grid(n, vec, 132 * 8), Q_THREADS, 0, stream>>>(x, n, vec, amax_bits, 0 Q_DELAY_ARG);
    e = cudaGetLastError();
    if (e != cudaSuccess)
        return nvfp4_fail(NVFP4_ERR_CUDA, "%s: amax kernel launch: %s", fn, cudaGetErrorString(e));
    return NVFP4_OK;
}

nvfp4_status nvfp4_q_amax_parts_launch(const uint16_t *x, int64_t m, int64_t k, uint32_t *parts, int max_parts,
                                       int *n_parts, cudaStream_t stream, const char *fn)
{
    if (max_parts < 1) return nvfp4_fail(NVFP4_ERR_INTERNAL, "%s: no room for the amax words", fn);
    const int64_t n = m * k;
    const int vec = !q_misaligned(x, 16);
    const unsigned grid = q_amax_grid(n, vec, max_parts);
    nvfp4_q_amax_kernel<<<grid, Q_THREADS, 0, stream>>>(x, n, vec, parts, 1 Q_DELAY_ARG);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return nvfp4_fail(NVFP4_ERR_CUDA, "%s: amax kernel launch: %s", fn, cudaGetErrorString(e));
    *n_parts = (int)grid;
    return NVFP4_OK;
}

/* FP32(amax / 2688) in place: the slot holds the amax's bit pattern on entry
 * and the per-tensor scale on exit (nvfp4_quantize_cuda's dynamic mode). */
extern "C" __global__ void nvfp4_q_finalize_kernel(float *slot)
{
    *slot = q_dynamic_pts(*(const uint32_t *)slot);
}

/*----------------------------- block kernel -----------------------------*/

/* words[0 .. count) = 0, by the threads of one CTA */
static __device__ __forceinline__ void q_zero_words(unsigned *words, int count)
{
    for (int i = threadIdx.x; i < count; i += blockDim.x) words[i] = 0u;
}

/* The start of the quantizer kernels: the GEMM that follows in the fused
 * linear may start its weight loads now (it waits for this grid before
 * reading activations); CTA 0 zeroes its stream-K counters; IDX, this
 * thread's index in the grid.  A macro over the kernels' parameters: as a
 * function it changed the tested kernels' register allocation. */
#define Q_EXACT_KERNEL_START(IDX)                                                                  \
    ptx_griddep_launch_dependents();                                                               \
    if (blockIdx.x == 0) q_zero_words(zero_words, zero_count);                                     \
    const int64_t IDX = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

/* pts, the per-tensor scale -- static, or from the amax pass's words once
 * that grid has completed (this one is its programmatic dependent; the wait
 * returns at once where there is none) -- which thread 0 publishes.  After
 * the thread's first loads of x, which do not depend on it; by every lane
 * of the warp (q_amax_of_parts). */
#define Q_KERNEL_PTS(IDX)                                                                          \
    float pts;                                                                                     \
    if (static_pts)                                                                                \
        pts = *static_pts;                                                                         \
    else {                                                                                         \
        ptx_griddep_wait();                                                                        \
        pts = q_dynamic_pts(q_amax_of_parts(amax_bits, amax_n));                                   \
    }                                                                                              \
    if (IDX == 0) q_store_pts(pts, pts_out, pts_out2);

/* Block (r, cb) by the exact steps (q_block, q_f16_operand), for blocks the
 * table does not cover; not inlined, so that the table path's loop does not
 * carry its registers.  w: the block's words (q_load_block). */
static __device__ __noinline__ void q_exact_block(uint4 wa, uint4 wb, uint32_t amax_bits, float pts, int cuda_variant,
                                                  int r, int cb, int m, int nb, uint8_t *__restrict__ codes,
                                                  uint8_t *__restrict__ scales, uint16_t *__restrict__ act,
                                                  int64_t act_ld)
{
    float v[16];
    q_widen_block(wa, wb, v);
    uint32_t s8, code[16];
    q_block(v, amax_bits, pts, cuda_variant, &s8, code);
    if (codes) *(uint2 *)(codes + (size_t)r * (size_t)(nb * 8) + (size_t)cb * 8) = q_pack_codes(code);
    if (scales) scales[nvfp4_tiled_offset(r, cb, (nb + 3) / 4)] = (uint8_t)s8;
    if (act && r < m) {
        uint32_t h[8], o[8];
#pragma unroll
        for (int i = 0; i < 8; i++)
            h[i] = q_f16_operand(code[2 * i], s8) | (q_f16_operand(code[2 * i + 1], s8) << 16);
        nvfp4_pairs_to_operand_order(h, o); /* the GEMM's operand order */
        uint4 *dst = (uint4 *)(act + (size_t)r * (size_t)act_ld + (size_t)cb * 16);
        dst[0] = make_uint4(o[0], o[1], o[2], o[3]);
        dst[1] = make_uint4(o[4], o[5], o[6], o[7]);
    }
}

/* Each thread takes blocks (row r, block column cb) of the padded matrix
 * idx, idx + stride, ...; adjacent threads take adjacent blocks of a row,
 * so the loads of a warp cover 1 KiB of contiguous BF16.  Per block: the
 * amax and the scale byte exactly as the C quantizer, then the codes from
 * the CTA's threshold table when the byte's entry is a table (or the zero
 * mask) and the block holds no NaN, else the exact q_block. */
extern "C" __global__ void __launch_bounds__(Q_THREADS, Q_CTAS_PER_SM)
    nvfp4_q_blocks_kernel(const uint16_t *__restrict__ x, int m, int k, int prows, int nb, int vec,
                          const float *__restrict__ static_pts, const uint32_t *amax_bits, int amax_n,
                          int cuda_variant, uint8_t *__restrict__ codes,
                          uint8_t *__restrict__ scales, uint16_t *__restrict__ act, int64_t act_ld,
                          float *pts_out, float *pts_out2, unsigned *__restrict__ zero_words, int zero_count)
{
    __shared__ uint4 tab[2 * Q_TAB];
    /* the GEMM that follows in the fused linear may start its weight loads
     * now (it waits for this grid before reading activations) */
    ptx_griddep_launch_dependents();
    if (blockIdx.x == 0) q_zero_words(zero_words, zero_count);
    const int64_t nblk = (int64_t)prows * nb, stride = (int64_t)gridDim.x * blockDim.x;
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    /* (r, cb) of block idx, and the step of one stride (no division per block) */
    int64_t r_next = idx / nb;
    int cb_next = (int)(idx % nb);
    const int64_t stride_r = stride / nb;
    const int stride_cb = (int)(stride % nb);
    /* the first block's loads are in flight while the scale is read and the
     * table is built */
    uint32_t w[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (idx < nblk) q_load_block(x, m, k, vec, (int)r_next, cb_next, w);
    Q_KERNEL_PTS(idx)
    if (threadIdx.x < Q_TAB) q_table_entry(tab, threadIdx.x, cuda_variant, pts);
    __syncthreads();
    const float rcp_pts = q_sm90_rcp(pts);
    const int ncb = (nb + 3) / 4;

    for (; idx < nblk; idx += stride) {
        const int r = (int)r_next, cb = cb_next;
        r_next += stride_r;
        cb_next += stride_cb;
        if (cb_next >= nb) cb_next -= nb, r_next++;
        uint32_t cur[8];
#pragma unroll
        for (int i = 0; i < 8; i++) cur[i] = w[i];
        if (idx + stride < nblk) /* the next block's loads, before this one's work */
            q_load_block(x, m, k, vec, (int)r_next, cb_next, w);

        const uint32_t amax16 = q_block_amax16(cur);
        uint32_t s8, lo = 0, hi = 0;
        uint4 e1;
        const uint32_t kind = q_block_kind(amax16, tab, pts, rcp_pts, cuda_variant, &s8, &e1);
        const uint32_t info = e1.w;
        if (kind == THR_EXACT) {
            q_exact_block(make_uint4(cur[0], cur[1], cur[2], cur[3]), make_uint4(cur[4], cur[5], cur[6], cur[7]),
                          amax16 << 16, pts, cuda_variant, r, cb, m, nb, codes, scales, act, act_ld);
            continue;
        }
        uint32_t f16[8] = {0, 0, 0, 0, 0, 0, 0, 0}; /* signed e2m1 values, FP16 pairs */
        if (kind == THR_TABLE) {
            const uint4 e0 = tab[2 * s8];
            const uint32_t nt[7] = {e0.x, e0.y, e0.z, e0.w, e1.x, e1.y, e1.z};
            if (act) {
                lo = thr_f16x8(cur, nt, f16);
                hi = thr_f16x8(cur + 4, nt, f16 + 4);
            } else {
                lo = thr_codes8(cur, nt);
                hi = thr_codes8(cur + 4, nt);
            }
        } /* THR_ZERO: comfy-kitchen's zero-scale mask, every code +0 */

        if (codes) *(uint2 *)(codes + (size_t)r * (size_t)(nb * 8) + (size_t)cb * 8) = make_uint2(lo, hi);
        if (scales) scales[nvfp4_tiled_offset(r, cb, ncb)] = (uint8_t)s8;
        if (act && r < m) {
            /* e2m1 * |e4m3| is exact in FP16 (at most 6 significant bits, in
             * [2^-10, 2688]) and keeps the code's sign (-0 for code 8), as
             * q_f16_operand: one HMUL2 per pair */
            const uint32_t scale2 = ptx_prmt(info, 0u, 0x1010u);
            uint32_t h[8];
            nvfp4_pairs_to_operand_order(f16, h); /* the GEMM's operand order */
#pragma unroll
            for (int i = 0; i < 8; i++) h[i] = ptx_hmul2(h[i], scale2);
            uint4 *dst = (uint4 *)(act + (size_t)r * (size_t)act_ld + (size_t)cb * 16);
            dst[0] = make_uint4(h[0], h[1], h[2], h[3]);
            dst[1] = make_uint4(h[4], h[5], h[6], h[7]);
        }
    }
}

/* One thread per block, exact steps only, no shared memory: for launches
 * of at most one block per thread, where building the threshold table
 * would cost about as much as the blocks it serves, and where the fused
 * linear's GEMM (launched as this grid's programmatic dependent) needs
 * every byte of an SM's shared memory to become resident beside it. */
extern "C" __global__ void __launch_bounds__(Q_THREADS)
    nvfp4_q_blocks_exact_kernel(const uint16_t *__restrict__ x, int m, int k, int prows, int nb, int vec,
                                const float *__restrict__ static_pts, const uint32_t *amax_bits, int amax_n,
                                int cuda_variant, uint8_t *__restrict__ codes, uint8_t *__restrict__ scales,
                                uint16_t *__restrict__ act, int64_t act_ld, float *pts_out, float *pts_out2,
                                unsigned *__restrict__ zero_words, int zero_count)
{
    Q_EXACT_KERNEL_START(idx)
    const int live = idx < (int64_t)prows * nb;
    const int r = live ? (int)(idx / nb) : m, cb = live ? (int)(idx % nb) : 0; /* row m: no loads */
    uint32_t w[8];
    q_load_block(x, m, k, vec, r, cb, w);
    Q_KERNEL_PTS(idx)
    if (!live) return; /* (after the warp's scale) */
    const uint32_t amax16 = q_block_amax16(w);
    q_exact_block(make_uint4(w[0], w[1], w[2], w[3]), make_uint4(w[4], w[5], w[6], w[7]), amax16 << 16, pts,
                  cuda_variant, r, cb, m, nb, codes, scales, act, act_ld);
}

/* Four lanes per block, four elements each (the cooperative kernel): the
 * block's amax (max over the quad, shuffles) and scale byte in every lane,
 * then each lane codes its own four elements by the exact steps
 * (Q_CODE_EAGER_NZ / Q_CODE_SM90, as q_block) -- a quarter of the one-thread
 * kernel's dependent chain, for launches whose time is that chain's
 * latency (small M).  Lane q holds elements 4q..4q+3: code bytes 2q, 2q+1,
 * and in the GEMM's operand order FP16 slots {2q, 2q+1} (elements 4q,
 * 4q+2) and {8+2q, 9+2q} (4q+1, 4q+3). */
#define Q_COOP_LANES 4
extern "C" __global__ void __launch_bounds__(Q_THREADS)
    nvfp4_q_blocks_coop_kernel(const uint16_t *__restrict__ x, int m, int k, int prows, int nb, int vec,
                               const float *__restrict__ static_pts, const uint32_t *amax_bits, int amax_n, int cuda_variant,
                               uint8_t *__restrict__ codes, uint8_t *__restrict__ scales, uint16_t *__restrict__ act,
                               int64_t act_ld, float *pts_out, float *pts_out2, unsigned *__restrict__ zero_words,
                               int zero_count)
{
    Q_EXACT_KERNEL_START(tid)
    /* whole quads: a quad is in or out as a whole (its shuffles); a quad
     * past the blocks reads row m (no loads) until it leaves */
    const int live = tid / Q_COOP_LANES < (int64_t)prows * nb;
    const int64_t blk = tid / Q_COOP_LANES;
    const int q = (int)(tid % Q_COOP_LANES);
    const int r = live ? (int)(blk / nb) : m, cb = live ? (int)(blk % nb) : 0, c0 = cb * 16 + 4 * q;
    /* elements c0 .. c0+3: w[0] = {c0, c0+1}, w[1] = {c0+2, c0+3} (low half first); zeros past the input */
    uint32_t w[2];
    if (r < m && c0 + 4 <= k && vec) {
        const uint2 a = __ldg((const uint2 *)(x + (size_t)r * (size_t)k + c0));
        w[0] = a.x, w[1] = a.y;
    } else {
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int c = c0 + 2 * i;
            const uint32_t lo = (r < m && c < k) ? __ldg(x + (size_t)r * (size_t)k + c) : 0u;
            const uint32_t hi = (r < m && c + 1 < k) ? __ldg(x + (size_t)r * (size_t)k + c + 1) : 0u;
            w[i] = lo | (hi << 16);
        }
    }
    Q_KERNEL_PTS(tid)
    if (!live) return; /* (after the warp's scale) */
    float v[4];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        v[2 * i] = __uint_as_float(w[i] << 16);
        v[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
    }
    const unsigned quad = 0xFu << (threadIdx.x & 28u); /* this quad's lanes */
    uint32_t s8, code[4];
    if (cuda_variant) { /* as q_block_sm90: NaN elements skipped, NaN only when all 16 are */
        uint32_t best = 0u, n_nan = 0u;
        Q_AMAX_SM90_ACC(v, 4, best, n_nan)
#pragma unroll
        for (int d = 1; d < Q_COOP_LANES; d <<= 1) {
            best = max(best, __shfl_xor_sync(quad, best, d));
            n_nan += __shfl_xor_sync(quad, n_nan, d);
        }
        const float amax = n_nan == 16u ? __uint_as_float(0x7FFFFFFFu) : __uint_as_float(best);
        s8 = q_scale_sm90(amax, q_sm90_rcp(pts));
        const float enc = Q_ENC_SM90(s8, pts);
#pragma unroll
        for (int i = 0; i < 4; i++) code[i] = Q_CODE_SM90(v[i], enc);
    } else { /* as q_block: the largest |x| pattern, NaN patterns above Inf (q_block_amax16) */
        uint32_t amax2 = __vmaxu2(w[0] & 0x7FFF7FFFu, w[1] & 0x7FFF7FFFu);
        uint32_t amax16 = max(amax2 & 0xFFFFu, amax2 >> 16);
#pragma unroll
        for (int d = 1; d < Q_COOP_LANES; d <<= 1) amax16 = max(amax16, __shfl_xor_sync(quad, amax16, d));
        s8 = q_scale_eager(amax16 << 16, pts);
        const float t = Q_STEP_EAGER(q_e4m3_to_f32(s8), pts);
#pragma unroll
        for (int i = 0; i < 4; i++) code[i] = t == 0.0f ? 0u : Q_CODE_EAGER_NZ(v[i], t);
    }
    /* code bytes 2q, 2q+1 (hi-first), the block's two words in lanes 0 and 2 */
    uint32_t half = ((code[0] << 4) | code[1]) | (((code[2] << 4) | code[3]) << 8);
    half <<= 16 * (q & 1);
    half |= __shfl_xor_sync(quad, half, 1);
    const uint32_t other = __shfl_xor_sync(quad, half, 2);
    if (q == 0) {
        if (codes) *(uint2 *)(codes + (size_t)r * (size_t)(nb * 8) + (size_t)cb * 8) = make_uint2(half, other);
        if (scales) scales[nvfp4_tiled_offset(r, cb, (nb + 3) / 4)] = (uint8_t)s8;
    }
    if (act && r < m) {
        uint32_t *dst = (uint32_t *)(act + (size_t)r * (size_t)act_ld + (size_t)cb * 16);
        dst[q] = q_f16_operand(code[0], s8) | (q_f16_operand(code[2], s8) << 16);
        dst[4 + q] = q_f16_operand(code[1], s8) | (q_f16_operand(code[3], s8) << 16);
    }
}

/* The three quantizer kernels' common signature */
typedef void (*q_kernel_fn)(const uint16_t *, int, int, int, int, int, const float *, const uint32_t *, int, int,
                            uint8_t *, uint8_t *, uint16_t *, int64_t, float *, float *, unsigned *, int);

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
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms < 1)
        sms = 132; /* an H200's; a real failure shows at the launch */
    const int64_t want = (prows * nb + Q_THREADS - 1) / Q_THREADS, cap = (int64_t)sms * Q_CTAS_PER_SM;
    /* one block per thread fits one CTA per SM: exact steps, no table, four
     * lanes a block (2; measured faster there; CTAs of 64 threads, to fit
     * beside a register GEMM CTA, measured slower); elsewhere the table
     * kernel (four lanes a block measured slower at M = 128).  table_first
     * (the fused linear, eager before a REGR GEMM): the table kernel all
     * the same (measured faster there: docs/STREAMING_A.md). */
    int mode = want <= sms ? 2 : 0;
    if (q->table_first && mode == 2) mode = 0;
#ifdef NVFP4_TESTING
    if (q_forced_launch >= 0) mode = q_forced_launch;
#endif
    unsigned grid;
    q_kernel_fn kernel;
    if (mode == 2) {
        const int64_t threads = prows * nb * Q_COOP_LANES;
        if (threads / Q_THREADS + 1 > INT32_MAX)
            return nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "%s: %lld blocks are too many for one grid", fn,
                              (long long)(prows * nb));
        grid = (unsigned)((threads + Q_THREADS - 1) / Q_THREADS);
        kernel = nvfp4_q_blocks_coop_kernel;
    } else if (mode == 1) {
        if (want > INT32_MAX)
            return nvfp4_fail(NVFP4_ERR_UNSUPPORTED, "%s: %lld blocks are too many for one grid", fn,
                              (long long)(prows * nb));
        grid = (unsigned)want;
        kernel = nvfp4_q_blocks_exact_kernel;
    } else {
        grid = (unsigned)(want < cap ? want : cap);
        kernel = nvfp4_q_blocks_kernel;
    }
    if (q->static_pts == NULL && (q->amax_bits == NULL || q->amax_n < 1))
        return nvfp4_fail(NVFP4_ERR_INTERNAL, "%s: a dynamic scale without the amax pass's words", fn);
    /* after the amax pass, as its programmatic dependent: this grid's
     * launch and first loads of x overlap that pass (Q_KERNEL_PTS waits) */
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(Q_THREADS);
    cfg.stream = q->stream;
    cudaLaunchAttribute attr = {};
    if (q->after_amax) {
        attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr.val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
    }
    cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, q->x, (int)q->m, (int)q->k, (int)prows, (int)nb, vec,
                                       q->static_pts, q->amax_bits, q->amax_n, q->cuda_variant, q->codes, q->scales,
                                       q->act, q->act_ld, q->pts_out, q->pts_out2, q->zero_words, q->zero_count);
    if (e == cudaSuccess) e = cudaGetLastError();
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

#ifdef NVFP4_TESTING
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
    q.amax_bits = (const uint32_t *)amax_scratch; /* one word: the atomic amax pass's */
    q.amax_n = 1;
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
#endif
