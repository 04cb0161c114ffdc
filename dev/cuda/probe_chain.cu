/* probe_chain.cu -- does the 64x128 wgmma tile's dequantization overlap its
 * wgmma chain?  (The tile's measured time per wgmma was the consumer's
 * instruction stream plus ~67 cycles, as if the two ran one after the
 * other.)  The consumer loop of the library's
 * kernel, cut into parts, on data that stays in shared memory, in one
 * warpgroup per CTA and one CTA per SM:
 *
 *   chain      fence, 8 dependent wgmma m64n128k16 (A in registers, B in
 *              shared memory, 128-byte swizzle), commit, wait_group 1: the
 *              chunk-pair loop with nothing else
 *   dequant    the same loop's code and scale loads (nvfp4_sm90_load_chunk)
 *              and conversion (nvfp4_sm90_convert_chunk) of a chunk pair,
 *              no wgmma (and 16 XORs a pair that read the fragments, which
 *              ptxas would otherwise drop)
 *   both       the library's pair step: the 8 wgmmas of pair p, the stage
 *              wait and loads of pair p + 1, wait_group 1, its conversion
 *   loads first  both, with the next pair's loads issued before this pair's
 *              wgmmas (the library issues them after): if `both` is slow
 *              because a warp's shared loads wait behind its wgmmas, this is
 *              not
 *   chain+tma, dequant+tma, both+tma, loads 1st+tma
 *              each while a producer warp streams 16 KiB TMA boxes from an
 *              L2-resident tensor into a ring of its own, as fast as they
 *              land, until the consumer is done (shared-memory writes as the
 *              kernel's feed makes them; nobody reads them)
 *
 * Each prints cycles per wgmma (or per pair of chunks without wgmma, as 8
 * "steps") on the slowest CTA; if `both` is about `chain` + `dequant`, the
 * overlap fails inside one warpgroup, and if `chain+tma` is well above
 * `chain`, the feed's shared-memory writes slow the chain.
 *
 *   probe_chain [PAIRS] [CTAS]   (defaults 2000, the SM count)
 * Build: make gpu-tests (build/gpu/probe_chain).  No results are checked:
 * the operands are arbitrary; a checksum keeps the work from being removed. */
#define __NV_LEGACY_LAUNCH 1
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/ptx.cuh"
#include "cuda/sm90/common.cuh"
#include "cuda/sm90/wgmma_ptx.cuh"

#include "dev_check.h"
#include "dev_tmap.h"

/* LOADFIRST: the next pair's code and scale loads issued before this
 * pair's wgmmas, not after (is a warp's shared-memory load served only once
 * the wgmmas issued before it have started?  sass_sched.py --mio) */
enum { MODE_CHAIN = 1, MODE_DEQUANT = 2, MODE_TMA = 4, MODE_LOADFIRST = 8 };
#define PC_B_BYTES (2 * 16384)  /* a chunk pair's activation tiles: 2 x 128 rows x 128 bytes */
#define PC_CODE_ROW 64          /* code bytes per weight row and stage (two chunks) */
#define PC_CODE_BYTES (64 * PC_CODE_ROW)
#define PC_SCALE_BYTES 1024     /* two 512-byte scale chunks */
#define PC_RING 4               /* the producer's ring of 16 KiB boxes */
#define PC_BOX 16384
#define PC_SMEM_USED (PC_B_BYTES + PC_CODE_BYTES + PC_SCALE_BYTES + PC_RING * PC_BOX + 1024)
/* asked for: more than half an SM's shared memory, so one CTA an SM */
#define PC_SMEM (120 * 1024)
static_assert(PC_SMEM >= PC_SMEM_USED, "probe_chain: the shared-memory layout outgrew the request");

#define PC_FENCE_FRAGS(F)                                                                          \
    _Pragma("unroll") for (int kb_ = 0; kb_ < 8; kb_++)                                            \
        _Pragma("unroll") for (int j_ = 0; j_ < 4; j_++) ptx_fence_reg_u32((F)[kb_][j_]);

/* The 8 wgmmas of a chunk pair from fragments F: chunk 0 at d0, chunk 1 at
 * d0 + 16 KiB (>> 4 = 1024), each + 32 bytes a step, as the library's. */
#define PC_WGMMA_PAIR(F, D0)                                                                       \
    _Pragma("unroll") for (int j_ = 0; j_ < 8; j_++)                                               \
        wgmma_m64n128k16_rs(acc, (F)[j_][0], (F)[j_][1], (F)[j_][2], (F)[j_][3],                   \
                            (D0) + (uint64_t)((j_ >> 2) * 1024 + (j_ & 3) * 2));

/* MODE is a template argument: a wgmma under a run-time branch inside the
 * loop makes ptxas serialize every wgmma (docs/KERNEL.md, the SS kernel). */
template <int MODE>
__global__ void __launch_bounds__(160, 1)
    chain_kernel(const __grid_constant__ CUtensorMap tm, int pairs, unsigned long long *clocks,
                 unsigned long long *boxes_done, float *sink)
{
    extern __shared__ __align__(1024) uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024u - (ptx_smem_addr(smem_raw) & 1023u)) & 1023u);
    uint8_t *b_tile = smem, *codes = smem + PC_B_BYTES, *scales = codes + PC_CODE_BYTES;
    uint8_t *ring = scales + PC_SCALE_BYTES;
    __shared__ uint64_t full[PC_RING];
    __shared__ uint64_t ready; /* a stage's `full`, already complete */
    __shared__ volatile int done;
    const int tid = threadIdx.x;
    for (int i = tid; i < (PC_B_BYTES + PC_CODE_BYTES + PC_SCALE_BYTES) / 4; i += blockDim.x)
        ((uint32_t *)smem)[i] = 0x3C003C00u ^ (uint32_t)(i * 0x9E3779B9u & 0x03FF03FFu);
    if (tid == 0) {
        for (int s = 0; s < PC_RING; s++) ptx_mbar_init(&full[s], 1);
        ptx_mbar_init(&ready, 1);
        ptx_fence_mbar_init();
        ptx_mbar_arrive(&ready); /* phase 0 complete */
        done = 0;
    }
    __syncthreads();
    if (tid >= 128) {
        /* the producer warp: 16 KiB boxes into its ring, as fast as they
         * land, until the consumers are done (then the boxes in flight) */
        if ((MODE & MODE_TMA) && tid == 128) {
            long long i = 0;
            for (; !done; i++) {
                const int s = (int)(i % PC_RING);
                if (i >= PC_RING) ptx_mbar_wait(&full[s], (uint32_t)((i / PC_RING - 1) & 1));
                ptx_mbar_arrive_expect_tx(&full[s], PC_BOX);
                const int c = (int)((i + blockIdx.x * 5) % 128);
                ptx_tma_load_2d(ring + (size_t)s * PC_BOX, &tm, &full[s], (c % 32) * 128, (c / 32) * 128);
            }
            for (long long j = i - PC_RING; j < i; j++)
                if (j >= 0) ptx_mbar_wait(&full[j % PC_RING], (uint32_t)((j / PC_RING) & 1));
            boxes_done[blockIdx.x] = (unsigned long long)i;
        }
        return;
    }
    const int warp = tid / 32, lane = tid % 32, g = lane >> 2, t = lane & 3;
    const int r0 = warp * 16 + g;
    const int word_off = 4 * (t >> 1);
    const uint32_t xsel = (t & 1) ? 0x7632u : 0x5410u;
    const int sc_off0 = (int)((r0 % 32) * 16 + (r0 / 32) * 4), sc_off1 = (int)(((r0 + 8) % 32) * 16 + ((r0 + 8) / 32) * 4);
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; i++) acc[i] = 0.0f;
    uint32_t pa[8][4], pb[8][4];
    {
        nvfp4_sm90_chunk_raw ra = nvfp4_sm90_load_chunk(codes, PC_CODE_ROW, word_off, scales, r0, sc_off0, sc_off1);
        nvfp4_sm90_chunk_raw rb = nvfp4_sm90_load_chunk(codes + 32, PC_CODE_ROW, word_off, scales + 512, r0, sc_off0,
                                                        sc_off1);
        nvfp4_sm90_convert_chunk(ra, xsel, pa);
        nvfp4_sm90_convert_chunk(rb, xsel, pa + 4);
    }
    const uint64_t d0 = ptx_desc_sw128(ptx_smem_addr(b_tile));
    const int chain = (MODE & MODE_CHAIN) != 0, dequant = (MODE & MODE_DEQUANT) != 0;
    const int load_first = (MODE & MODE_LOADFIRST) != 0;
    uint32_t fold = 0;
    const long long t0 = clock64();
    /* the pair step of sm90_gemm_body.cuh (SM90_PAIR_STEP), parts on or off */
/* as the library: the stage's `full` wait (here a barrier whose phase 0
 * completed at the start: it returns at once), then the loads -- the wait's
 * loop is a branch, so ptxas cannot move the loads above it */
#define PC_LOAD_PAIR(RA, RB)                                                                       \
    {                                                                                              \
        ptx_mbar_wait(&ready, 0);                                                                  \
        RA = nvfp4_sm90_load_chunk(codes, PC_CODE_ROW, word_off, scales, r0, sc_off0, sc_off1);    \
        RB = nvfp4_sm90_load_chunk(codes + 32, PC_CODE_ROW, word_off, scales + 512, r0, sc_off0, sc_off1); \
    }
#define PC_STEP(CUR, NXT)                                                                          \
    {                                                                                              \
        nvfp4_sm90_chunk_raw ra_, rb_;                                                             \
        if (dequant && load_first) PC_LOAD_PAIR(ra_, rb_)                                          \
        PC_FENCE_FRAGS(CUR)                                                                        \
        ptx_wgmma_fence();                                                                         \
        if (chain) PC_WGMMA_PAIR(CUR, d0)                                                          \
        ptx_wgmma_commit();                                                                        \
        if (dequant && !load_first) PC_LOAD_PAIR(ra_, rb_)                                         \
        ptx_wgmma_wait1();                                                                         \
        PC_FENCE_FRAGS(NXT)                                                                        \
        if (dequant) {                                                                             \
            nvfp4_sm90_convert_chunk(ra_, xsel, NXT);                                              \
            nvfp4_sm90_convert_chunk(rb_, xsel, NXT + 4);                                          \
            /* without wgmmas to read them, ptxas drops fragments nothing    \
             * reads (the fences are empty asm): fold them into a checksum,  \
             * 16 three-input XORs a pair */                                   \
            if (!chain)                                                                            \
                _Pragma("unroll") for (int kb_ = 0; kb_ < 8; kb_++) {                              \
                    asm volatile("lop3.b32 %0, %0, %1, %2, 0x96;" : "+r"(fold) : "r"((NXT)[kb_][0]), "r"((NXT)[kb_][1])); \
                    asm volatile("lop3.b32 %0, %0, %1, %2, 0x96;" : "+r"(fold) : "r"((NXT)[kb_][2]), "r"((NXT)[kb_][3])); \
                }                                                                                  \
        }                                                                                          \
    }
    for (int p = 0; p < pairs; p += 2) {
        PC_STEP(pa, pb)
        PC_STEP(pb, pa)
    }
#undef PC_STEP
#undef PC_LOAD_PAIR
    ptx_wgmma_wait0();
#pragma unroll
    for (int i = 0; i < 64; i++) ptx_fence_reg(acc[i]);
    const long long t1 = clock64();
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 64; i++) s += acc[i];
#pragma unroll
    for (int kb = 0; kb < 8; kb++)
#pragma unroll
        for (int j = 0; j < 4; j++) s += __uint_as_float(pa[kb][j] & 0x3FFFFFFFu);
    s += (float)(fold & 0xFFu);
    sink[blockIdx.x * 128 + tid] = s;
    if (tid == 0) {
        clocks[blockIdx.x] = (unsigned long long)(t1 - t0);
        done = 1;
    }
}

template <int MODE>
static void run_mode(const char *name, const CUtensorMap &tm, int pairs, int ctas, unsigned long long *dclk,
                     unsigned long long *dboxes, float *sink)
{
    DEV_CUDA_OK(cudaFuncSetAttribute(chain_kernel<MODE>, cudaFuncAttributeMaxDynamicSharedMemorySize, PC_SMEM));
    DEV_CUDA_OK(cudaMemset(dboxes, 0, sizeof(unsigned long long) * (size_t)ctas));
    chain_kernel<MODE><<<ctas, 160, PC_SMEM>>>(tm, 4, dclk, dboxes, sink); /* warm-up */
    DEV_CUDA_OK(cudaGetLastError());
    cudaEvent_t e0, e1;
    DEV_CUDA_OK(cudaEventCreate(&e0));
    DEV_CUDA_OK(cudaEventCreate(&e1));
    DEV_CUDA_OK(cudaEventRecord(e0));
    chain_kernel<MODE><<<ctas, 160, PC_SMEM>>>(tm, pairs, dclk, dboxes, sink);
    DEV_CUDA_OK(cudaEventRecord(e1));
    DEV_CUDA_OK(cudaGetLastError());
    DEV_CUDA_OK(cudaEventSynchronize(e1));
    float ms = 0;
    DEV_CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
    unsigned long long clk[1024], boxes[1024], cmax = 0, bmin = ~0ull;
    DEV_CUDA_OK(cudaMemcpy(clk, dclk, sizeof(unsigned long long) * (size_t)ctas, cudaMemcpyDeviceToHost));
    DEV_CUDA_OK(cudaMemcpy(boxes, dboxes, sizeof(unsigned long long) * (size_t)ctas, cudaMemcpyDeviceToHost));
    for (int c = 0; c < ctas; c++) {
        cmax = clk[c] > cmax ? clk[c] : cmax;
        bmin = boxes[c] < bmin ? boxes[c] : bmin;
    }
    printf("  %-12s %7.1f cycles a step (8 a pair), %.1f us", name, (double)cmax / (8.0 * pairs), ms * 1e3);
    if (MODE & MODE_TMA)
        printf(", the stream %.1f B/cycle/SM (slowest CTA's boxes over its consumer's cycles)",
               (double)bmin * PC_BOX / (double)cmax);
    printf("\n");
    DEV_CUDA_OK(cudaEventDestroy(e0));
    DEV_CUDA_OK(cudaEventDestroy(e1));
}

int main(int argc, char **argv)
{
    const int pairs = argc > 1 ? atoi(argv[1]) & ~1 : 2000;
    int sms = 0;
    DEV_CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int ctas = argc > 2 ? atoi(argv[2]) : sms;
    if (pairs < 2 || ctas < 1 || ctas > 1024) {
        fprintf(stderr, "usage: probe_chain [PAIRS >= 2] [CTAS 1..1024]\n");
        return 2;
    }
    encode_fn encode = dev_tensor_map_encoder("probe_chain");
    uint8_t *buf; /* 2 MiB, L2-resident: [512][4096] bytes */
    DEV_CUDA_OK(cudaMalloc(&buf, (size_t)512 * 4096));
    DEV_CUDA_OK(cudaMemset(buf, 0x3C, (size_t)512 * 4096));
    CUtensorMap tm;
    cuuint64_t dims[2] = {4096, 512}, strides[1] = {4096};
    cuuint32_t box[2] = {128, 128}, estr[2] = {1, 1};
    if (encode(&tm, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, buf, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
        fprintf(stderr, "probe_chain: tensor map failed\n");
        return 2;
    }
    unsigned long long *dclk, *dboxes;
    float *sink;
    DEV_CUDA_OK(cudaMalloc(&dclk, sizeof(unsigned long long) * (size_t)ctas));
    DEV_CUDA_OK(cudaMalloc(&dboxes, sizeof(unsigned long long) * (size_t)ctas));
    DEV_CUDA_OK(cudaMalloc(&sink, sizeof(float) * 128 * (size_t)ctas));
    printf("probe_chain: %d CTAs of one warpgroup (+ a producer warp), %d chunk pairs each (8 wgmma "
           "m64n128k16 a pair, the 64x128 tile's pair step)\n", ctas, pairs);
    run_mode<MODE_CHAIN>("chain", tm, pairs, ctas, dclk, dboxes, sink);
    run_mode<MODE_DEQUANT>("dequant", tm, pairs, ctas, dclk, dboxes, sink);
    run_mode<MODE_CHAIN | MODE_DEQUANT>("both", tm, pairs, ctas, dclk, dboxes, sink);
    run_mode<MODE_CHAIN | MODE_TMA>("chain+tma", tm, pairs, ctas, dclk, dboxes, sink);
    run_mode<MODE_DEQUANT | MODE_TMA>("dequant+tma", tm, pairs, ctas, dclk, dboxes, sink);
    run_mode<MODE_CHAIN | MODE_DEQUANT | MODE_TMA>("both+tma", tm, pairs, ctas, dclk, dboxes, sink);
    run_mode<MODE_CHAIN | MODE_DEQUANT | MODE_LOADFIRST>("loads first", tm, pairs, ctas, dclk, dboxes, sink);
    run_mode<MODE_CHAIN | MODE_DEQUANT | MODE_LOADFIRST | MODE_TMA>("loads 1st+tma", tm, pairs, ctas, dclk, dboxes,
                                                                    sink);
    DEV_CUDA_OK(cudaFree(buf));
    DEV_CUDA_OK(cudaFree(dclk));
    DEV_CUDA_OK(cudaFree(dboxes));
    DEV_CUDA_OK(cudaFree(sink));
    return 0;
}
