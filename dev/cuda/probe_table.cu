/* probe_table.cu -- what the quantizer's threshold table costs a CTA on the
 * device, in cycles (clock64 inside one CTA, nothing else running):
 *   build  : every entry s8 = 0..127 by one thread each (q_table_entry, as
 *            the table kernel and the in-kernel A producer build it); the
 *            slowest thread's cycles and the mean;
 *   load   : the same 4 KiB table copied from global memory (L2-warm and
 *            after an L2 flush) into shared memory by 256 threads;
 *   block  : one block's codes from the table (q_block_codes), the exact
 *            steps (q_exact_codes), each one thread's dependent chain.
 * First each built entry is checked word for word against the host's
 * thr_build (the same header compiled for the CPU), both variants.
 *
 *   probe_table [PTS ...]     (default: 1/2688, 0.0037, 0.25, 3.0)
 *
 * Build: make gpu-tests (build/gpu/probe_table). */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvfp4.h"
#include "cuda/quantize_internal.h"

#include "dev_check.h"

#define TAB_WORDS (2 * Q_TAB * 4)

/* cyc[0..127]: each entry's build cycles; tab_out: the table */
__global__ void k_build(int cuda_variant, float pts, long long *cyc, uint4 *tab_out)
{
    __shared__ uint4 tab[2 * Q_TAB];
    const int t = threadIdx.x;
    __syncthreads();
    const long long t0 = clock64();
    if (t < Q_TAB) q_table_entry(tab, (uint32_t)t, cuda_variant, pts);
    __syncwarp();
    const long long t1 = clock64();
    __syncthreads();
    const long long t2 = clock64();
    if (t < Q_TAB) cyc[t] = t1 - t0;
    if (t == 0) cyc[Q_TAB] = t2 - t0; /* the CTA's: build and barrier */
    for (int i = t; i < 2 * Q_TAB; i += blockDim.x) tab_out[i] = tab[i];
}

/* the table from global memory into shared memory, one 16-byte load a thread */
__global__ void k_load(const uint4 *tab_in, long long *cyc)
{
    __shared__ uint4 tab[2 * Q_TAB];
    __syncthreads();
    const long long t0 = clock64();
    tab[threadIdx.x] = tab_in[threadIdx.x];
    __syncthreads();
    const long long t1 = clock64();
    if (threadIdx.x == 0) cyc[0] = t1 - t0;
    if (tab[(threadIdx.x * 7) % (2 * Q_TAB)].x == 0xDEADBEEFu) cyc[1] = 1; /* keep the loads */
}

/* one thread: a block's codes through the table, then by the exact steps */
__global__ void k_block(const uint4 *tab_in, int cuda_variant, float pts, const uint32_t *w_in, long long *cyc,
                        uint2 *codes)
{
    __shared__ uint4 tab[2 * Q_TAB];
    tab[threadIdx.x] = tab_in[threadIdx.x];
    __syncthreads();
    if (threadIdx.x != 0) return;
    uint32_t w[8];
    for (int i = 0; i < 8; i++) w[i] = w_in[i];
    const float rcp_pts = q_sm90_rcp(pts);
    uint32_t s8a, s8b;
    long long t0 = clock64();
    const uint2 a = q_block_codes(w, tab, pts, rcp_pts, cuda_variant, &s8a);
    long long t1 = clock64();
    const uint32_t amax16 = q_block_amax16(w);
    const uint2 b = q_exact_codes(make_uint4(w[0], w[1], w[2], w[3]), make_uint4(w[4], w[5], w[6], w[7]),
                                  amax16 << 16, pts, cuda_variant, &s8b);
    long long t2 = clock64();
    cyc[0] = t1 - t0;
    cyc[1] = t2 - t1;
    codes[0] = a;
    codes[1] = b;
    codes[2] = make_uint2(s8a, s8b);
}

__global__ void k_flush(uint4 *junk, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        junk[i].x += 1u;
}

/* the host's entry, built by the same header (quantize_internal.h's layout) */
static void host_entry(int cuda_variant, float pts, uint32_t s8, uint32_t out[8])
{
    uint32_t thr[7], nt[7] = {0, 0, 0, 0, 0, 0, 0};
    const int kind = thr_build(cuda_variant, pts, s8, thr);
    if (kind == THR_TABLE)
        for (int i = 0; i < 7; i++) nt[i] = thr_nt(thr_bf16(thr[i]));
    memcpy(out, nt, 7 * sizeof(uint32_t));
    out[7] = (uint32_t)kind << 16; /* the FP16 scale half is checked apart */
}

int main(int argc, char **argv)
{
    float pts_list[16] = {1.0f / 2688.0f, 0.0037f, 0.25f, 3.0f};
    int npts = 4;
    if (argc > 1) {
        npts = 0;
        for (int i = 1; i < argc && npts < 16; i++) pts_list[npts++] = strtof(argv[i], NULL);
    }
    long long *d_cyc;
    uint4 *d_tab;
    uint32_t *d_w;
    uint2 *d_codes;
    uint4 *d_junk;
    const size_t junk_n = (size_t)256 << 20 >> 4; /* 256 MiB: past the L2 */
    DEV_CUDA_OK(cudaMalloc(&d_cyc, 256 * sizeof(long long)));
    DEV_CUDA_OK(cudaMalloc(&d_tab, 2 * Q_TAB * sizeof(uint4)));
    DEV_CUDA_OK(cudaMalloc(&d_w, 8 * sizeof(uint32_t)));
    DEV_CUDA_OK(cudaMalloc(&d_codes, 3 * sizeof(uint2)));
    DEV_CUDA_OK(cudaMalloc(&d_junk, junk_n * sizeof(uint4)));
    DEV_CUDA_OK(cudaMemset(d_junk, 0, junk_n * sizeof(uint4)));
    /* a block of moderate values: amax 3.5 (BF16 0x4060), mixed signs */
    const uint32_t w[8] = {0x3F80BF00u, 0x40603E80u, 0xBFC03D00u, 0x3FA0C020u,
                           0x3E00BE00u, 0x40004040u, 0xC0403F40u, 0x3C003B80u};
    DEV_CUDA_OK(cudaMemcpy(d_w, w, sizeof w, cudaMemcpyHostToDevice));
    int bad = 0;
    for (int v = 0; v < 2; v++)
        for (int p = 0; p < npts; p++) {
            const float pts = pts_list[p];
            long long cyc[Q_TAB + 1];
            uint32_t tab[TAB_WORDS];
            for (int rep = 0; rep < 2; rep++) /* the second: instruction cache warm */
                k_build<<<1, 256>>>(v, pts, d_cyc, d_tab);
            DEV_CUDA_OK(cudaDeviceSynchronize());
            DEV_CUDA_OK(cudaMemcpy(cyc, d_cyc, sizeof cyc, cudaMemcpyDeviceToHost));
            DEV_CUDA_OK(cudaMemcpy(tab, d_tab, sizeof tab, cudaMemcpyDeviceToHost));
            for (uint32_t s8 = 0; s8 < Q_TAB; s8++) {
                uint32_t want[8];
                host_entry(v, pts, s8, want);
                const uint32_t *got = tab + 8 * s8;
                for (int i = 0; i < 8; i++) {
                    const uint32_t g = i == 7 ? got[7] & 0xFFFF0000u : got[i];
                    if (g != want[i] && bad++ < 5)
                        fprintf(stderr, "MISMATCH variant %d pts %g entry %u word %d: device 0x%08x host 0x%08x\n",
                                v, pts, s8, i, g, want[i]);
                }
            }
            long long mx = 0, sum = 0;
            for (int i = 0; i < Q_TAB; i++) {
                mx = cyc[i] > mx ? cyc[i] : mx;
                sum += cyc[i];
            }
            long long lc[2], lw, bc[2];
            k_load<<<1, 256>>>(d_tab, d_cyc);
            k_load<<<1, 256>>>(d_tab, d_cyc);
            DEV_CUDA_OK(cudaMemcpy(lc, d_cyc, sizeof lc, cudaMemcpyDeviceToHost));
            lw = lc[0];
            k_flush<<<264, 256>>>(d_junk, junk_n);
            k_load<<<1, 256>>>(d_tab, d_cyc);
            DEV_CUDA_OK(cudaMemcpy(lc, d_cyc, sizeof lc, cudaMemcpyDeviceToHost));
            k_block<<<1, 256>>>(d_tab, v, pts, d_w, d_cyc, d_codes);
            k_block<<<1, 256>>>(d_tab, v, pts, d_w, d_cyc, d_codes);
            uint2 codes[3];
            DEV_CUDA_OK(cudaMemcpy(bc, d_cyc, sizeof bc, cudaMemcpyDeviceToHost));
            DEV_CUDA_OK(cudaMemcpy(codes, d_codes, sizeof codes, cudaMemcpyDeviceToHost));
            if (codes[0].x != codes[1].x || codes[0].y != codes[1].y || codes[2].x != codes[2].y) {
                if (bad++ < 5)
                    fprintf(stderr, "MISMATCH variant %d pts %g: table codes %08x%08x s8 %u, exact %08x%08x s8 %u\n", v,
                            pts, codes[0].y, codes[0].x, codes[2].x, codes[1].y, codes[1].x, codes[2].y);
            }
            printf("variant %-5s pts %-10g build: slowest entry %6lld cycles, mean %6lld, CTA (with barrier) %6lld | "
                   "table load: L2-warm %5lld, after flush %5lld | one block: table %5lld, exact %5lld\n",
                   v ? "cuda" : "eager", pts, mx, sum / Q_TAB, cyc[Q_TAB], lw, lc[0], bc[0], bc[1]);
        }
    printf("%s: %d mismatches\n", bad ? "FAILED" : "checked", bad);
    return bad ? 1 : 0;
}
