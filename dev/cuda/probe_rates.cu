/* probe_rates.cu -- the H200 rates the small-M kernel's design rests on
 * (docs/KERNEL.md, "Rates"), measured rather than assumed:
 *
 *   tma      bytes per cycle per SM that TMA delivers, by box shape (rows x
 *            row bytes, swizzle) and by the number of issuing warps: is the
 *            cost per box, per box row, or per byte?  (From DRAM.)
 *   tma-l2   the same from an L2-resident tensor, each GEMM box shape also as
 *            one 1-D bulk copy of its bytes.
 *   bcast    the wgmma tile's activation feed at M = 128: every CTA (84, as
 *            attn-out's and FC2's 64x128 tiles) reads the same 2 MiB of
 *            L2-resident boxes (128 rows x 128 bytes, 16 KiB a chunk) in
 *            the same order, optionally with 2 KiB of its own DRAM bytes a
 *            chunk (the weight codes); plain, or in clusters of 2 or 4
 *            whose CTAs each load 1/c of the box and multicast it to the
 *            cluster (the ring's stages freed by every CTA of the cluster:
 *            the pipeline a multicast GEMM needs).  Does the L2 limit the
 *            broadcast feed, and does multicast lift it?
 *   ops      warp instructions per cycle per SM of the dequantization's
 *            instructions: F2FP (cvt.rn.f16x2.e4m3x2), PRMT, LOP3, HMUL2, IMAD,
 *            and F2FP mixed with LOP3 (do they issue in parallel?);
 *   mma      dependent-step latency and peak rate of mma.sync m16n8k16
 *            (1, 2, 4, 8 independent chains per warp);
 *   subnorm  whether mma.sync m16n8k16 .f32.f16 with A scaled by 2^-14
 *            (FP16 subnormals) gives exactly 2^-14 times the unscaled chain,
 *            bit for bit, on NVFP4-like operands (every step a set of exact
 *            products: the condition for an FP16-subnormal dequantization).
 *
 *   ring     the bcast ring in clusters of 2 (plain and multicast) under
 *            five variants of its cross-CTA release and waits (bc_release,
 *            bc_wait): which one makes a cluster launch 6-7x slower?
 *            (H200: the `.release.cluster` arrivals; relaxed ones
 *            cost 13 % over single CTAs)
 *
 *   probe_rates [tma|tma-l2|bcast|ring|ops|mma|subnorm|all]
 *   probe_rates subnorm-model [SMS]   host only: the C oracle on the subnorm
 *                                     operands (SMS: the GPU's count, 132)
 * Build: make gpu-tests (build/gpu/probe_rates).  Exit 1 if subnorm differs. */
#define __NV_LEGACY_LAUNCH 1
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/ptx.cuh"

extern "C" {
#include "nvfp4.h"
}

#include "dev_check.h"
#include "dev_tmap.h"

static int g_sms = 132;

/* The largest of the per-CTA cycle counts a probe kernel wrote (one CTA per SM). */
static unsigned long long max_clock(const unsigned long long *dclk)
{
    unsigned long long clk[1024], cmax = 0;
    DEV_CUDA_OK(cudaMemcpy(clk, dclk, sizeof(unsigned long long) * (size_t)g_sms, cudaMemcpyDeviceToHost));
    for (int i = 0; i < g_sms; i++) cmax = clk[i] > cmax ? clk[i] : cmax;
    return cmax;
}

/* ------------------------------------------------------------------------ */
/* TMA                                                                       */

#define TMA_ROWBYTES 4096 /* the global tensor: [rows][4096] bytes */
#define TMA_MAX_RING (192 * 1024)

/* Each issuing warp (lane 0) runs its own ring of `stages` boxes; box j of the
 * CTA's sequence covers (x, y) = ((j % bpr) * bw, (j / bpr) * bh) of a
 * disjoint part of the tensor.  clocks[blockIdx] = cycles of the whole loop. */
__global__ void tma_kernel(const __grid_constant__ CUtensorMap tm, const uint8_t *src, int bw, int bh,
                           int boxes_per_warp, int stages, int rows, int prefetch, unsigned long long *clocks)
{
    extern __shared__ __align__(1024) uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024u - (ptx_smem_addr(smem_raw) & 1023u)) & 1023u);
    __shared__ uint64_t full[64];
    const int warp = threadIdx.x / 32, nw = blockDim.x / 32;
    const int box_bytes = bw * bh;
    const int per_warp_stages = stages / nw;
    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; s++) ptx_mbar_init(&full[s], 1);
        ptx_fence_mbar_init();
    }
    __syncthreads();
    const long long t0 = clock64();
    if (threadIdx.x % 32 == 0) {
        if (prefetch) ptx_prefetch_tmap(&tm);
        const int bpr = TMA_ROWBYTES / bw;
        const long long total_boxes = (long long)rows / bh * bpr;
        long long j = ((long long)blockIdx.x * nw + warp) * boxes_per_warp;
        for (int i = 0; i < boxes_per_warp; i++, j++) {
            const int s = warp * per_warp_stages + i % per_warp_stages;
            if (i >= per_warp_stages) ptx_mbar_wait(&full[s], (uint32_t)((i / per_warp_stages - 1) & 1));
            const long long jj = j % total_boxes;
            ptx_mbar_arrive_expect_tx(&full[s], (uint32_t)box_bytes);
            if (src) /* 1-D bulk copy of the same bytes, contiguous */
                ptx_bulk_load(smem + (size_t)s * box_bytes, src + (size_t)jj * box_bytes, (uint32_t)box_bytes, &full[s]);
            else
                ptx_tma_load_2d(smem + (size_t)s * box_bytes, &tm, &full[s], (int)(jj % bpr) * bw, (int)(jj / bpr) * bh);
        }
        for (int i = boxes_per_warp - per_warp_stages; i < boxes_per_warp; i++) {
            if (i < 0) continue;
            const int s = warp * per_warp_stages + i % per_warp_stages;
            ptx_mbar_wait(&full[s], (uint32_t)((i / per_warp_stages) & 1));
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) clocks[blockIdx.x] = (unsigned long long)(clock64() - t0);
}

/* l2: a 16 MiB tensor (L2-resident: the GEMM's activations are) instead of
 * 1 GiB from DRAM, and each box shape also as one 1-D bulk copy (bulk = 1):
 * is the cost per box row, or per byte? */
static void probe_tma(int l2)
{
    encode_fn encode = dev_tensor_map_encoder("tma");
    const int rows = l2 ? 1 << 12 : 1 << 18; /* 16 MiB or 1 GiB */
    uint8_t *buf;
    DEV_CUDA_OK(cudaMalloc(&buf, (size_t)rows * TMA_ROWBYTES));
    DEV_CUDA_OK(cudaMemset(buf, 0x5A, (size_t)rows * TMA_ROWBYTES));
    unsigned long long *dclk;
    DEV_CUDA_OK(cudaMalloc(&dclk, sizeof(unsigned long long) * 1024));
    DEV_CUDA_OK(cudaFuncSetAttribute(tma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, TMA_MAX_RING + 1024));
    struct tma_cfg {
        int bw, bh, swz, warps, prefetch, bulk;
    };
    static const struct tma_cfg dram_cfg[] = {
        {64, 16, 64, 1, 0, 0},   {128, 16, 128, 1, 0, 0},  {128, 16, 128, 1, 1, 0}, {128, 16, 128, 2, 1, 0},
        {128, 16, 128, 4, 1, 0}, {128, 16, 128, 8, 1, 0},  {128, 64, 128, 1, 1, 0}, {128, 64, 128, 4, 1, 0},
        {128, 176, 128, 1, 1, 0}, {128, 176, 128, 4, 1, 0}, {128, 256, 128, 1, 1, 0}, {256, 64, 0, 1, 1, 0},
        {128, 4, 0, 1, 1, 0},    {128, 4, 0, 4, 1, 0}};
    /* the GEMM's boxes: activations 128 B x bn rows (swizzled), codes 64 B x 64/128 rows */
    static const struct tma_cfg l2_cfg[] = {
        {128, 64, 128, 1, 1, 0},  {128, 64, 128, 1, 1, 1},  {128, 128, 128, 1, 1, 0}, {128, 128, 128, 1, 1, 1},
        {128, 256, 128, 1, 1, 0}, {128, 256, 128, 1, 1, 1}, {128, 256, 128, 2, 1, 0}, {128, 256, 128, 2, 1, 1},
        {128, 256, 0, 1, 1, 0},   {64, 128, 64, 1, 1, 0},   {32, 128, 32, 1, 1, 0},   {128, 16, 128, 4, 1, 0},
        {128, 16, 128, 4, 1, 1}};
    const struct tma_cfg *cfg = l2 ? l2_cfg : dram_cfg;
    const size_t ncfg = l2 ? sizeof l2_cfg / sizeof l2_cfg[0] : sizeof dram_cfg / sizeof dram_cfg[0];
    printf("tma%s: box (row bytes x rows, swizzle), issuing warps, 2-D tensor or 1-D bulk -> bytes/cycle/SM, GB/s "
           "(132 CTAs, %s)\n", l2 ? "-l2" : "", l2 ? "16 MiB L2-resident, read 64 times" : "1 GiB read twice");
    for (size_t c = 0; c < ncfg; c++) {
        const int bw = cfg[c].bw, bh = cfg[c].bh, nw = cfg[c].warps;
        CUtensorMap tm;
        cuuint64_t dims[2] = {TMA_ROWBYTES, (cuuint64_t)rows};
        cuuint64_t strides[1] = {TMA_ROWBYTES};
        cuuint32_t box[2] = {(cuuint32_t)bw, (cuuint32_t)bh};
        cuuint32_t estr[2] = {1, 1};
        CUtensorMapSwizzle sw = cfg[c].swz == 128 ? CU_TENSOR_MAP_SWIZZLE_128B
                                : cfg[c].swz == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                   : CU_TENSOR_MAP_SWIZZLE_NONE;
        CUresult r = encode(&tm, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, buf, dims, strides, box, estr,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        if (r != CUDA_SUCCESS) {
            printf("  %4d x %3d sw%-3d w%d pf%d: encode failed (%d)\n", bw, bh, cfg[c].swz, nw, cfg[c].prefetch,
                   (int)r);
            continue;
        }
        const int box_bytes = bw * bh;
        int stages = TMA_MAX_RING / box_bytes;
        if (stages > 32) stages = 32;
        stages = stages / nw * nw;
        const long long total = (l2 ? 64LL : 2LL) * rows * TMA_ROWBYTES;
        const uint8_t *src = cfg[c].bulk ? buf : NULL;
        const int boxes_per_warp = (int)(total / box_bytes / (g_sms * nw));
        cudaEvent_t e0, e1;
        DEV_CUDA_OK(cudaEventCreate(&e0));
        DEV_CUDA_OK(cudaEventCreate(&e1));
        tma_kernel<<<g_sms, 32 * nw, TMA_MAX_RING + 1024>>>(tm, src, bw, bh, stages < boxes_per_warp ? stages : 1, stages,
                                                             rows, cfg[c].prefetch, dclk); /* warm-up */
        DEV_CUDA_OK(cudaGetLastError());
        DEV_CUDA_OK(cudaEventRecord(e0));
        tma_kernel<<<g_sms, 32 * nw, TMA_MAX_RING + 1024>>>(tm, src, bw, bh, boxes_per_warp, stages, rows,
                                                             cfg[c].prefetch, dclk);
        DEV_CUDA_OK(cudaEventRecord(e1));
        DEV_CUDA_OK(cudaGetLastError());
        DEV_CUDA_OK(cudaEventSynchronize(e1));
        float ms = 0;
        DEV_CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
        unsigned long long clk[1024];
        DEV_CUDA_OK(cudaMemcpy(clk, dclk, sizeof(unsigned long long) * g_sms, cudaMemcpyDeviceToHost));
        unsigned long long cmax = 0;
        for (int i = 0; i < g_sms; i++) cmax = clk[i] > cmax ? clk[i] : cmax;
        const double bytes = (double)boxes_per_warp * nw * g_sms * box_bytes;
        printf("  %4d x %3d sw%-3d w%d pf%d %s: %6.2f B/clk/SM  %7.1f GB/s  (%d-deep ring, %.1f cycles per box row)\n",
               bw, bh, cfg[c].swz, nw, cfg[c].prefetch, cfg[c].bulk ? "bulk" : "2-D ", bytes / g_sms / (double)cmax, bytes / (ms * 1e6), stages,
               (double)cmax / ((double)boxes_per_warp * nw * bh));
        DEV_CUDA_OK(cudaEventDestroy(e0));
        DEV_CUDA_OK(cudaEventDestroy(e1));
    }
    DEV_CUDA_OK(cudaFree(buf));
    DEV_CUDA_OK(cudaFree(dclk));
}

/* ------------------------------------------------------------------------ */
/* The broadcast feed, with and without cluster multicast                     */

#define BC_ACT_BYTES 16384 /* one chunk: 128 rows x 128 bytes (64 K x 128 tokens, FP16) */
#define BC_WT_BYTES 2048   /* a CTA's own bytes a chunk: 16 rows x 128 bytes */
#define BC_STAGES 10
#define BC_ACT_CHUNKS 128  /* distinct chunks: 2 MiB, read again and again (L2-resident) */

/* The ring protocol's variants (`probe_rates ring`): any cluster launch
 * of this ring measured 6-7x slower than the same ring in single CTAs, multicast or not; the only difference is the
 * cross-CTA release.  Each variant changes one thing:
 *   BC_RELEASE   `bcast`'s: every release `mbarrier.arrive.release.cluster`
 *                through `mapa` (its own CTA's too), waits `try_wait.parity`
 *   BC_RELAXED   the arrivals `.relaxed.cluster` (no release ordering)
 *   BC_OWN_LOCAL its own CTA's arrival a plain local arrive, only the other
 *                CTAs' through `mapa` (the GEMM's SM90_RELEASE)
 *   BC_TEST_WAIT every wait a `test_wait.parity` spin (never suspends)
 *   BC_ACQ_CLUSTER every wait `try_wait.parity.acquire.cluster` */
enum { BC_RELEASE, BC_RELAXED, BC_OWN_LOCAL, BC_TEST_WAIT, BC_ACQ_CLUSTER, BC_NPROTO };
static const char *bc_proto_names[BC_NPROTO] = {"release.cluster arrive, try_wait", "relaxed.cluster arrive",
                                                "own CTA arrives locally", "test_wait spins",
                                                "try_wait.acquire.cluster"};

__device__ __forceinline__ void bc_wait(uint64_t *bar, uint32_t parity, int proto)
{
    if (proto == BC_TEST_WAIT) {
        uint32_t done = 0;
        while (!done)
            asm volatile("{\n.reg .pred p;\n"
                         "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                         "selp.u32 %0, 1, 0, p;\n}\n"
                         : "=r"(done)
                         : "r"(ptx_smem_addr(bar)), "r"(parity)
                         : "memory");
    } else if (proto == BC_ACQ_CLUSTER) {
        asm volatile("{\n.reg .pred done;\n"
                     "WAITC_%=:\n"
                     "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
                     "@!done bra WAITC_%=;\n}\n" ::"r"(ptx_smem_addr(bar)),
                     "r"(parity)
                     : "memory");
    } else {
        ptx_mbar_wait(bar, parity);
    }
}

/* Free stage `bar` in every CTA of a cluster of csize (this one is rank). */
__device__ __forceinline__ void bc_release(uint64_t *bar, int csize, uint32_t rank, int proto)
{
    for (int r = 0; r < csize; r++) {
        if (proto == BC_OWN_LOCAL && (uint32_t)r == rank) {
            ptx_mbar_arrive(bar);
        } else if (proto == BC_RELAXED) {
            asm volatile("{\n.reg .b32 remote;\n"
                         "mapa.shared::cluster.u32 remote, %0, %1;\n"
                         "mbarrier.arrive.relaxed.cluster.shared::cluster.b64 _, [remote];\n}\n" ::"r"(
                             ptx_smem_addr(bar)),
                         "r"((uint32_t)r)
                         : "memory");
        } else {
            ptx_mbar_arrive_cluster(bar, (uint32_t)r);
        }
    }
}

/* Warp 0 lane 0 issues, warp 1 lane 0 consumes (waits for each stage and
 * frees it in every CTA of the cluster).  The stage a producer fills in
 * multicast is in every CTA of its cluster, so it waits on its own `empty`,
 * which counts one arrival per CTA of the cluster. */
__global__ void bcast_kernel(const __grid_constant__ CUtensorMap act, const __grid_constant__ CUtensorMap wts,
                             int chunks, int csize, int multicast, int weights, int disjoint, int proto,
                             unsigned long long *clocks)
{
    extern __shared__ __align__(1024) uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024u - (ptx_smem_addr(smem_raw) & 1023u)) & 1023u);
    __shared__ uint64_t full[BC_STAGES], empty[BC_STAGES];
    const uint32_t rank = csize > 1 ? ptx_cluster_rank() : 0;
    const uint32_t stage_bytes = BC_ACT_BYTES + (weights ? BC_WT_BYTES : 0);
    if (threadIdx.x == 0) {
        for (int s = 0; s < BC_STAGES; s++) {
            ptx_mbar_init(&full[s], 1);
            ptx_mbar_init(&empty[s], (uint32_t)csize);
        }
        ptx_fence_mbar_init();
    }
    if (csize > 1)
        ptx_cluster_sync();
    else
        __syncthreads();
    const long long t0 = clock64();
    if (threadIdx.x == 0) {
        const int slice_rows = 128 / csize;
        for (int i = 0; i < chunks; i++) {
            const int s = i % BC_STAGES;
            if (i >= BC_STAGES) bc_wait(&empty[s], (uint32_t)((i / BC_STAGES - 1) & 1), proto);
            ptx_mbar_arrive_expect_tx(&full[s], stage_bytes);
            const int c = (disjoint ? i + (int)blockIdx.x * 7 : i) % BC_ACT_CHUNKS;
            const int x = (c % 32) * 128, y = (c / 32) * 128;
            uint8_t *dst = smem + (size_t)s * stage_bytes;
            if (multicast)
                ptx_tma_load_2d_multicast(dst + (size_t)rank * slice_rows * 128, &act, &full[s], x,
                                          y + (int)rank * slice_rows, (uint16_t)((1u << csize) - 1));
            else
                ptx_tma_load_2d(dst, &act, &full[s], x, y);
            if (weights) {
                const long long j = (long long)blockIdx.x * chunks + i;
                ptx_tma_load_2d(dst + BC_ACT_BYTES, &wts, &full[s], (int)(j % 32) * 128, (int)(j / 32) * 16);
            }
        }
    } else if (threadIdx.x == 32) {
        for (int i = 0; i < chunks; i++) {
            const int s = i % BC_STAGES;
            bc_wait(&full[s], (uint32_t)((i / BC_STAGES) & 1), proto);
            if (csize > 1)
                bc_release(&empty[s], csize, rank, proto);
            else
                ptx_mbar_arrive(&empty[s]);
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) clocks[blockIdx.x] = (unsigned long long)(clock64() - t0);
    /* no CTA leaves while another may still arrive on its barriers */
    if (csize > 1) ptx_cluster_sync();
}

static void probe_bcast(int ring)
{
    encode_fn encode = dev_tensor_map_encoder("bcast");
    const int act_rows = BC_ACT_CHUNKS / 32 * 128;  /* [512][4096] bytes: 2 MiB */
    const int wt_rows = 1 << 18;                    /* [262144][4096] bytes: 1 GiB */
    uint8_t *act_buf, *wt_buf;
    DEV_CUDA_OK(cudaMalloc(&act_buf, (size_t)act_rows * TMA_ROWBYTES));
    DEV_CUDA_OK(cudaMalloc(&wt_buf, (size_t)wt_rows * TMA_ROWBYTES));
    DEV_CUDA_OK(cudaMemset(act_buf, 0x3C, (size_t)act_rows * TMA_ROWBYTES));
    DEV_CUDA_OK(cudaMemset(wt_buf, 0x5A, (size_t)wt_rows * TMA_ROWBYTES));
    unsigned long long *dclk;
    DEV_CUDA_OK(cudaMalloc(&dclk, sizeof(unsigned long long) * 1024));
    const int smem = BC_STAGES * (BC_ACT_BYTES + BC_WT_BYTES) + 1024;
    DEV_CUDA_OK(cudaFuncSetAttribute(bcast_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    DEV_CUDA_OK(cudaFuncSetAttribute(bcast_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    struct bc_cfg {
        int ctas, csize, multicast, weights, disjoint, proto;
    };
    static const struct bc_cfg feed_cfg[] = {
        {84, 1, 0, 0, 1, 0}, {84, 1, 0, 0, 0, 0}, {84, 2, 0, 0, 0, 0}, {84, 2, 1, 0, 0, 0}, {84, 4, 1, 0, 0, 0},
        {84, 1, 0, 1, 0, 0}, {84, 2, 1, 1, 0, 0}, {84, 4, 1, 1, 0, 0}, {132, 1, 0, 1, 0, 0}, {132, 2, 1, 1, 0, 0},
        {132, 4, 1, 1, 0, 0}};
    /* `ring`: the attn-out M = 128 feed (84 CTAs + their own 2 KiB) in
     * single CTAs, then in clusters of 2, plain and multicast, under each
     * protocol variant */
    static const struct bc_cfg ring_cfg[] = {
        {84, 1, 0, 1, 0, 0},
        {84, 2, 0, 1, 0, BC_RELEASE}, {84, 2, 0, 1, 0, BC_RELAXED}, {84, 2, 0, 1, 0, BC_OWN_LOCAL},
        {84, 2, 0, 1, 0, BC_TEST_WAIT}, {84, 2, 0, 1, 0, BC_ACQ_CLUSTER},
        {84, 2, 1, 1, 0, BC_RELEASE}, {84, 2, 1, 1, 0, BC_RELAXED}, {84, 2, 1, 1, 0, BC_OWN_LOCAL},
        {84, 2, 1, 1, 0, BC_TEST_WAIT}, {84, 2, 1, 1, 0, BC_ACQ_CLUSTER}};
    const struct bc_cfg *cfg = ring ? ring_cfg : feed_cfg;
    const size_t ncfg = ring ? sizeof ring_cfg / sizeof ring_cfg[0] : sizeof feed_cfg / sizeof feed_cfg[0];
    const int chunks = 112 * 8;
    printf("bcast: %d chunks a CTA of 16 KiB activation boxes (2 MiB, L2-resident, %s), ring %d deep\n", chunks,
           "every CTA the same sequence unless disjoint", BC_STAGES);
    for (size_t c = 0; c < ncfg; c++) {
        const int csize = cfg[c].csize;
        CUtensorMap tm_act, tm_wt;
        cuuint64_t adims[2] = {TMA_ROWBYTES, (cuuint64_t)act_rows}, wdims[2] = {TMA_ROWBYTES, (cuuint64_t)wt_rows};
        cuuint64_t strides[1] = {TMA_ROWBYTES};
        cuuint32_t abox[2] = {128, (cuuint32_t)(cfg[c].multicast ? 128 / csize : 128)}, wbox[2] = {128, 16};
        cuuint32_t estr[2] = {1, 1};
        if (encode(&tm_act, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, act_buf, adims, strides, abox, estr,
                   CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS ||
            encode(&tm_wt, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, wt_buf, wdims, strides, wbox, estr,
                   CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
            printf("  config %zu: encode failed\n", c);
            continue;
        }
        cudaLaunchConfig_t lc = {};
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = (unsigned)csize;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = 1;
        lc.gridDim = dim3((unsigned)cfg[c].ctas);
        lc.blockDim = dim3(64);
        lc.dynamicSmemBytes = (size_t)smem;
        lc.attrs = attr;
        lc.numAttrs = 1;
        int clusters = 0;
        DEV_CUDA_OK(cudaOccupancyMaxActiveClusters(&clusters, bcast_kernel, &lc));
        cudaEvent_t e0, e1;
        DEV_CUDA_OK(cudaEventCreate(&e0));
        DEV_CUDA_OK(cudaEventCreate(&e1));
        DEV_CUDA_OK(cudaLaunchKernelEx(&lc, bcast_kernel, tm_act, tm_wt, BC_STAGES * 2, csize, cfg[c].multicast,
                                       cfg[c].weights, cfg[c].disjoint, cfg[c].proto, dclk)); /* warm-up */
        DEV_CUDA_OK(cudaEventRecord(e0));
        DEV_CUDA_OK(cudaLaunchKernelEx(&lc, bcast_kernel, tm_act, tm_wt, chunks, csize, cfg[c].multicast,
                                       cfg[c].weights, cfg[c].disjoint, cfg[c].proto, dclk));
        DEV_CUDA_OK(cudaEventRecord(e1));
        DEV_CUDA_OK(cudaEventSynchronize(e1));
        float ms = 0;
        DEV_CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
        unsigned long long clk[1024], cmax = 0;
        DEV_CUDA_OK(cudaMemcpy(clk, dclk, sizeof(unsigned long long) * (size_t)cfg[c].ctas, cudaMemcpyDeviceToHost));
        for (int i = 0; i < cfg[c].ctas; i++) cmax = clk[i] > cmax ? clk[i] : cmax;
        const double act = (double)cfg[c].ctas * chunks * BC_ACT_BYTES; /* into shared memory, all CTAs */
        const double l2_act = cfg[c].multicast ? act / csize : act;      /* read from L2 */
        printf("  %3d CTAs, cluster %d%s%s%s%s%s: %6.1f cycles a chunk, %5.1f B/clk/SM into shared memory, "
               "activations %6.0f GB/s delivered, %6.0f GB/s read from L2, %.1f us (%d clusters fit)\n",
               cfg[c].ctas, csize, cfg[c].multicast ? " multicast" : "", cfg[c].weights ? " + 2 KiB own" : "",
               cfg[c].disjoint ? " disjoint" : "", ring && csize > 1 ? ", " : "",
               ring && csize > 1 ? bc_proto_names[cfg[c].proto] : "", (double)cmax / chunks,
               (double)chunks * (BC_ACT_BYTES + (cfg[c].weights ? BC_WT_BYTES : 0)) / (double)cmax,
               act / (ms * 1e6), l2_act / (ms * 1e6), ms * 1e3, clusters);
        DEV_CUDA_OK(cudaEventDestroy(e0));
        DEV_CUDA_OK(cudaEventDestroy(e1));
    }
    DEV_CUDA_OK(cudaFree(act_buf));
    DEV_CUDA_OK(cudaFree(wt_buf));
    DEV_CUDA_OK(cudaFree(dclk));
}

/* ------------------------------------------------------------------------ */
/* Instruction rates                                                         */

enum { OP_F2FP, OP_PRMT, OP_LOP3, OP_HMUL2, OP_IMAD, OP_F2FP_LOP3, OP_SHF, NOPS };
static const char *op_names[NOPS] = {"F2FP cvt.rn.f16x2.e4m3x2", "PRMT", "LOP3", "HMUL2 mul.rn.f16x2",
                                     "IMAD", "F2FP + LOP3 (1:1)", "SHF (funnel rotate)"};
#define OPS_ITER 4096

template <int OP>
__global__ void ops_kernel(uint32_t seed, uint32_t *sink, unsigned long long *clocks)
{
    uint32_t x[8];
#pragma unroll
    for (int i = 0; i < 8; i++) x[i] = seed * (threadIdx.x + 1) + 0x01010101u * i;
    __syncthreads();
    const long long t0 = clock64();
    for (int it = 0; it < OPS_ITER; it++) {
#pragma unroll
        for (int i = 0; i < 8; i++) {
            if (OP == OP_F2FP) {
                x[i] = ptx_e4m3x2_to_f16x2((uint16_t)(x[i] >> 8)) ^ (uint32_t)i;
            } else if (OP == OP_PRMT) {
                x[i] = ptx_prmt(x[i], seed, 0x3571u + i);
            } else if (OP == OP_LOP3) {
                asm volatile("lop3.b32 %0, %0, %1, %2, 0x96;" : "+r"(x[i]) : "r"(seed), "r"(0x1C1C1C1Cu));
            } else if (OP == OP_HMUL2) {
                x[i] = ptx_hmul2(x[i], 0x3C013C01u);
            } else if (OP == OP_IMAD) {
                asm volatile("mad.lo.u32 %0, %0, %1, %2;" : "+r"(x[i]) : "r"(seed | 1u), "r"(0x1234u));
            } else if (OP == OP_F2FP_LOP3) {
                if (i & 1)
                    asm volatile("lop3.b32 %0, %0, %1, %2, 0x96;" : "+r"(x[i]) : "r"(seed), "r"(0x1C1C1C1Cu));
                else
                    x[i] = ptx_e4m3x2_to_f16x2((uint16_t)(x[i] >> 8)) ^ (uint32_t)i;
            } else {
                asm volatile("shf.l.wrap.b32 %0, %0, %0, 3;" : "+r"(x[i]));
            }
        }
    }
    const long long t1 = clock64();
    uint32_t acc = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) acc ^= x[i];
    sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
    if (threadIdx.x == 0) clocks[blockIdx.x] = (unsigned long long)(t1 - t0);
}

template <int OP>
static void run_op(uint32_t *sink, unsigned long long *dclk)
{
    const int threads = 1024; /* 8 warps per scheduler */
    ops_kernel<OP><<<g_sms, threads>>>(12345u, sink, dclk);
    DEV_CUDA_OK(cudaGetLastError());
    ops_kernel<OP><<<g_sms, threads>>>(54321u, sink, dclk);
    DEV_CUDA_OK(cudaGetLastError());
    DEV_CUDA_OK(cudaDeviceSynchronize());
    const unsigned long long cmax = max_clock(dclk);
    const double warp_instr = (double)(threads / 32) * OPS_ITER * 8;
    printf("  %-28s %6.3f warp instructions per cycle per SM (%5.1f lanes/clk)\n", op_names[OP],
           warp_instr / (double)cmax, 32.0 * warp_instr / (double)cmax);
}

static void probe_ops(void)
{
    uint32_t *sink;
    unsigned long long *dclk;
    DEV_CUDA_OK(cudaMalloc(&sink, (size_t)g_sms * 1024 * 4));
    DEV_CUDA_OK(cudaMalloc(&dclk, sizeof(unsigned long long) * 1024));
    printf("ops: 32 warps per SM, 8 independent chains each (the loop's own branch included)\n");
    run_op<OP_F2FP>(sink, dclk);
    run_op<OP_PRMT>(sink, dclk);
    run_op<OP_LOP3>(sink, dclk);
    run_op<OP_HMUL2>(sink, dclk);
    run_op<OP_IMAD>(sink, dclk);
    run_op<OP_F2FP_LOP3>(sink, dclk);
    run_op<OP_SHF>(sink, dclk);
    DEV_CUDA_OK(cudaFree(sink));
    DEV_CUDA_OK(cudaFree(dclk));
}

/* ------------------------------------------------------------------------ */
/* mma.sync m16n8k16: latency and rate                                       */

#define MMA_ITER 2048
template <int CH>
__global__ void mma_kernel(uint32_t seed, float *sink, unsigned long long *clocks)
{
    float d[CH][4];
#pragma unroll
    for (int c = 0; c < CH; c++)
#pragma unroll
        for (int e = 0; e < 4; e++) d[c][e] = 0.0f;
    const uint32_t a = 0x3C003C00u ^ (seed & 0x00FF00FFu), b = 0x38003800u;
    __syncthreads();
    const long long t0 = clock64();
    for (int it = 0; it < MMA_ITER; it++) {
#pragma unroll
        for (int c = 0; c < CH; c++) ptx_mma_16816_regs(d[c], a, a ^ (uint32_t)c, a, a, b, b);
    }
    const long long t1 = clock64();
    float s = 0;
#pragma unroll
    for (int c = 0; c < CH; c++) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
    sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
    if (threadIdx.x == 0) clocks[blockIdx.x] = (unsigned long long)(t1 - t0);
}

template <int CH>
static void run_mma(int warps, float *sink, unsigned long long *dclk)
{
    mma_kernel<CH><<<g_sms, 32 * warps>>>(7u, sink, dclk);
    DEV_CUDA_OK(cudaGetLastError());
    DEV_CUDA_OK(cudaDeviceSynchronize());
    const unsigned long long cmax = max_clock(dclk);
    const double per_step = (double)cmax / MMA_ITER;
    printf("  %2d warps x %d chains: %6.1f cycles per step, %6.3f mma per cycle per SM\n", warps, CH, per_step,
           (double)warps * CH / per_step);
}

static void probe_mma_rate(void)
{
    float *sink;
    unsigned long long *dclk;
    DEV_CUDA_OK(cudaMalloc(&sink, (size_t)g_sms * 1024 * 4));
    DEV_CUDA_OK(cudaMalloc(&dclk, sizeof(unsigned long long) * 1024));
    printf("mma: mma.sync m16n8k16 f32.f16 (dependent chains per warp)\n");
    run_mma<1>(1, sink, dclk);
    run_mma<2>(1, sink, dclk);
    run_mma<4>(1, sink, dclk);
    run_mma<8>(1, sink, dclk);
    run_mma<1>(4, sink, dclk);
    run_mma<2>(4, sink, dclk);
    run_mma<4>(4, sink, dclk);
    run_mma<2>(8, sink, dclk);
    run_mma<4>(8, sink, dclk);
    DEV_CUDA_OK(cudaFree(sink));
    DEV_CUDA_OK(cudaFree(dclk));
}

/* ------------------------------------------------------------------------ */
/* FP16-subnormal A operands                                                 */

#define SUB_STEPS 48
/* a[step][lane][4], b[step][lane][2] per warp; d[lane][4] per warp and version */
__global__ void subnorm_kernel(const uint32_t *a, const uint32_t *as, const uint32_t *b, float *d, float *ds)
{
    const int w = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    float acc[4] = {0, 0, 0, 0}, accs[4] = {0, 0, 0, 0};
    for (int s = 0; s < SUB_STEPS; s++) {
        const size_t ao = (((size_t)w * SUB_STEPS + s) * 32 + lane) * 4, bo = (((size_t)w * SUB_STEPS + s) * 32 + lane) * 2;
        ptx_mma_16816_regs(acc, a[ao], a[ao + 1], a[ao + 2], a[ao + 3], b[bo], b[bo + 1]);
        ptx_mma_16816_regs(accs, as[ao], as[ao + 1], as[ao + 2], as[ao + 3], b[bo], b[bo + 1]);
    }
    for (int e = 0; e < 4; e++) {
        d[((size_t)w * 32 + lane) * 4 + e] = acc[e];
        ds[((size_t)w * 32 + lane) * 4 + e] = accs[e];
    }
}

static uint64_t sub_rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* An NVFP4-like operand value e2m1 * |e4m3| (signed by the code), with block
 * scales drawn per (warp, step, lane-row) from a mix of tiny, subnormal and
 * large E4M3 values. */
static float sub_value(uint64_t *s, uint8_t scale)
{
    const uint8_t code = (uint8_t)(sub_rng(s) & 15);
    return nvfp4_e2m1_to_f32(code) * nvfp4_e4m3_to_f32(scale);
}

static uint8_t sub_scale(uint64_t *s)
{
    const uint64_t r = sub_rng(s);
    switch (r % 4) {
    case 0: return (uint8_t)(1 + (r >> 8) % 7);          /* subnormal E4M3 */
    case 1: return (uint8_t)(8 + (r >> 8) % 40);         /* small normals */
    case 2: return (uint8_t)(0x40 + (r >> 8) % 0x3E);    /* large */
    default: return (uint8_t)(1 + (r >> 8) % 0x7D);      /* anywhere */
    }
}

/* The operands of the subnorm probe: per warp, step and lane, the A registers
 * (a[4]), the same scaled by 2^-14 (as[4]) and the B registers (b[2]). */
static void subnorm_operands(int warps, uint32_t **pa, uint32_t **pas, uint32_t **pb)
{
    const size_t na = (size_t)warps * SUB_STEPS * 32 * 4, nb = (size_t)warps * SUB_STEPS * 32 * 2;
    uint32_t *ha = (uint32_t *)malloc(na * 4), *has = (uint32_t *)malloc(na * 4), *hb = (uint32_t *)malloc(nb * 4);
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < na; i++) {
        const uint8_t sc = sub_scale(&s);
        const float v0 = sub_value(&s, sc), v1 = sub_value(&s, sc);
        /* 2^-14 times an exact a' = e2m1 * e4m3 is a multiple of 2^-24: exact in FP16 */
        ha[i] = nvfp4_f16_from_f32(v0) | ((uint32_t)nvfp4_f16_from_f32(v1) << 16);
        has[i] = nvfp4_f16_from_f32(v0 * 0x1p-14f) | ((uint32_t)nvfp4_f16_from_f32(v1 * 0x1p-14f) << 16);
        if (nvfp4_f16_to_f32((uint16_t)(has[i] & 0xFFFF)) != v0 * 0x1p-14f ||
            nvfp4_f16_to_f32((uint16_t)(has[i] >> 16)) != v1 * 0x1p-14f) {
            fprintf(stderr, "subnorm: host value not exact in FP16\n");
            exit(2);
        }
    }
    for (size_t i = 0; i < nb; i++) {
        const uint8_t sc = sub_scale(&s);
        hb[i] = nvfp4_f16_from_f32(sub_value(&s, sc)) | ((uint32_t)nvfp4_f16_from_f32(sub_value(&s, sc)) << 16);
    }
    *pa = ha;
    *pas = has;
    *pb = hb;
}

/* Host only: the C oracle's sm90 chains on the same operands (the mma's
 * fragment layout: a0/a2 = row g, k 2t..2t+1 / 2t+8..2t+9, a1/a3 = row g+8;
 * b0/b1 = column g, the same k; d0..d3 = (g, 2t), (g, 2t+1), (g+8, 2t),
 * (g+8, 2t+1)), and how many outputs the model says differ between the
 * unscaled chain and 2^14 times the scaled one. */
static int subnorm_model(void)
{
    const int warps = g_sms * 8 * 4;
    uint32_t *ha, *has, *hb;
    subnorm_operands(warps, &ha, &has, &hb);
    size_t bad = 0, n = 0;
    for (int w = 0; w < warps; w++)
        for (int lane = 0; lane < 32; lane++)
            for (int e = 0; e < 4; e++) {
                const int g = lane / 4, t = lane % 4;
                const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
                float acc = 0.0f, accs = 0.0f;
                for (int st = 0; st < SUB_STEPS; st++) {
                    uint16_t a[16], as[16], b[16];
                    for (int tt = 0; tt < 4; tt++) {
                        const size_t ao = (((size_t)w * SUB_STEPS + st) * 32 + (row % 8) * 4 + tt) * 4;
                        const size_t bo = (((size_t)w * SUB_STEPS + st) * 32 + col * 4 + tt) * 2;
                        const int lo = row < 8 ? 0 : 1; /* a0/a2 or a1/a3 */
                        for (int h = 0; h < 2; h++) {
                            a[2 * tt + h] = (uint16_t)(ha[ao + lo] >> (16 * h));
                            a[2 * tt + 8 + h] = (uint16_t)(ha[ao + 2 + lo] >> (16 * h));
                            as[2 * tt + h] = (uint16_t)(has[ao + lo] >> (16 * h));
                            as[2 * tt + 8 + h] = (uint16_t)(has[ao + 2 + lo] >> (16 * h));
                            b[2 * tt + h] = (uint16_t)(hb[bo] >> (16 * h));
                            b[2 * tt + 8 + h] = (uint16_t)(hb[bo + 1] >> (16 * h));
                        }
                    }
                    acc = nvfp4_sm90_step(acc, a, b, NVFP4_OPERAND_F16);
                    accs = nvfp4_sm90_step(accs, as, b, NVFP4_OPERAND_F16);
                }
                const float back = accs * 0x1p14f;
                uint32_t x, y;
                memcpy(&x, &acc, 4);
                memcpy(&y, &back, 4);
                if (x != y) {
                    const size_t idx = ((size_t)w * 32 + lane) * 4 + e;
                    if (bad < 5) printf("subnorm model: output %zu: unscaled %08x, scaled*2^14 %08x\n", idx, x, y);
                    bad++;
                }
                n++;
            }
    printf("subnorm model (C oracle, host): %zu outputs, %zu differ\n", n, bad);
    free(ha);
    free(has);
    free(hb);
    return 0;
}

static int probe_subnorm(void)
{
    const int warps = g_sms * 8 * 4;
    const size_t na = (size_t)warps * SUB_STEPS * 32 * 4, nb = (size_t)warps * SUB_STEPS * 32 * 2;
    uint32_t *ha, *has, *hb;
    subnorm_operands(warps, &ha, &has, &hb);
    uint32_t *da, *das, *db;
    float *dd, *dds;
    const size_t nd = (size_t)warps * 32 * 4;
    DEV_CUDA_OK(cudaMalloc(&da, na * 4));
    DEV_CUDA_OK(cudaMalloc(&das, na * 4));
    DEV_CUDA_OK(cudaMalloc(&db, nb * 4));
    DEV_CUDA_OK(cudaMalloc(&dd, nd * 4));
    DEV_CUDA_OK(cudaMalloc(&dds, nd * 4));
    DEV_CUDA_OK(cudaMemcpy(da, ha, na * 4, cudaMemcpyHostToDevice));
    DEV_CUDA_OK(cudaMemcpy(das, has, na * 4, cudaMemcpyHostToDevice));
    DEV_CUDA_OK(cudaMemcpy(db, hb, nb * 4, cudaMemcpyHostToDevice));
    subnorm_kernel<<<warps / 8, 256>>>(da, das, db, dd, dds);
    DEV_CUDA_OK(cudaGetLastError());
    DEV_CUDA_OK(cudaDeviceSynchronize());
    float *hd = (float *)malloc(nd * 4), *hds = (float *)malloc(nd * 4);
    DEV_CUDA_OK(cudaMemcpy(hd, dd, nd * 4, cudaMemcpyDeviceToHost));
    DEV_CUDA_OK(cudaMemcpy(hds, dds, nd * 4, cudaMemcpyDeviceToHost));
    size_t bad = 0, nonzero = 0;
    for (size_t i = 0; i < nd; i++) {
        const float back = hds[i] * 0x1p14f;
        uint32_t x, y;
        memcpy(&x, &hd[i], 4);
        memcpy(&y, &back, 4);
        nonzero += hd[i] != 0.0f;
        if (x != y) {
            if (bad < 5)
                fprintf(stderr, "subnorm: output %zu: unscaled %08x, scaled*2^14 %08x\n", i, (unsigned)x, (unsigned)y);
            bad++;
        }
    }
    printf("subnorm: %zu chains of %d steps (%zu outputs, %zu nonzero): %zu differ\n", nd, SUB_STEPS, nd, nonzero, bad);
    free(ha);
    free(has);
    free(hb);
    free(hd);
    free(hds);
    DEV_CUDA_OK(cudaFree(da));
    DEV_CUDA_OK(cudaFree(das));
    DEV_CUDA_OK(cudaFree(db));
    DEV_CUDA_OK(cudaFree(dd));
    DEV_CUDA_OK(cudaFree(dds));
    return bad == 0 && nonzero > nd / 2 ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "all";
    if (!strcmp(what, "subnorm-model")) {
        g_sms = argc > 2 ? atoi(argv[2]) : 132;
        return subnorm_model();
    }
    DEV_CUDA_OK(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, 0));
    int clk = 0;
    DEV_CUDA_OK(cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0));
    printf("device: %d SMs, max clock %.2f GHz\n", g_sms, clk / 1e6);
    int rc = 0;
    const int all = strcmp(what, "all") == 0;
    if (all || !strcmp(what, "tma")) probe_tma(0);
    if (all || !strcmp(what, "tma-l2")) probe_tma(1);
    if (all || !strcmp(what, "bcast")) probe_bcast(0);
    if (all || !strcmp(what, "ring")) probe_bcast(1);
    if (all || !strcmp(what, "ops")) probe_ops();
    if (all || !strcmp(what, "mma")) probe_mma_rate();
    if (all || !strcmp(what, "subnorm")) rc |= probe_subnorm();
    return rc;
}
