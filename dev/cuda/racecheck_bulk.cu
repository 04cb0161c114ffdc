/* racecheck_bulk.cu -- the smallest program with the wgmma kernel's stage
 * hand-off, to ask whether compute-sanitizer's racecheck hazards on the 1-D
 * bulk copy of scales (docs/KERNEL.md, "racecheck") are real.
 *
 * One CTA: a producer thread fills a two-stage ring from global memory, one
 * 512-byte copy per stage, completing on full[s] (mbarrier, expect_tx);
 * four consumer warps wait on full[s], read the stage, and each warp's lane
 * 0 arrives on empty[s] after __syncwarp; the producer waits on empty[s]
 * before it copies into the stage again -- the hand-off the GEMM uses.  The
 * copy is either the 1-D bulk copy (cp.async.bulk, as the GEMM's scales) or
 * a 2-D tensor copy (cp.async.bulk.tensor, as its codes and activations),
 * with the same barriers.  The host checks every word a consumer read, so a
 * real race shows as a wrong word; racecheck's report is the other half:
 *
 *   racecheck_bulk [bulk|tensor] [CHUNKS]
 *   compute-sanitizer --tool racecheck --racecheck-report all racecheck_bulk bulk
 *
 * Exit 0 when every word is right. */
#define __NV_LEGACY_LAUNCH 1
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/ptx.cuh"

#include "dev_check.h"
#include "dev_tmap.h"

#define STAGES 2
#define STAGE_BYTES 512
#define CONSUMER_WARPS 4

__global__ void __launch_bounds__(32 * (1 + CONSUMER_WARPS), 1)
    handoff_kernel(const __grid_constant__ CUtensorMap tm, const uint8_t *src, int chunks, int tensor,
                   uint32_t *seen)
{
    __shared__ __align__(1024) uint8_t ring[STAGES][STAGE_BYTES];
    __shared__ uint64_t full[STAGES], empty[STAGES];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            ptx_mbar_init(&full[s], 1);
            ptx_mbar_init(&empty[s], CONSUMER_WARPS);
        }
        ptx_fence_mbar_init();
    }
    __syncthreads();
    if (warp == 0) { /* producer */
        if (lane != 0) return;
        for (int c = 0; c < chunks; c++) {
            const int s = c % STAGES;
            if (c >= STAGES) ptx_mbar_wait(&empty[s], (uint32_t)((c / STAGES - 1) & 1));
            ptx_mbar_arrive_expect_tx(&full[s], STAGE_BYTES);
            if (tensor) /* rows of 128 bytes: chunk c is rows 4c .. 4c + 3 */
                ptx_tma_load_2d(ring[s], &tm, &full[s], 0, 4 * c);
            else
                ptx_bulk_load(ring[s], src + (size_t)c * STAGE_BYTES, STAGE_BYTES, &full[s]);
        }
        return;
    }
    /* consumers: warp w reads the 32-bit words w*32 + lane of each stage */
    const int cw = warp - 1;
    for (int c = 0; c < chunks; c++) {
        const int s = c % STAGES;
        ptx_mbar_wait(&full[s], (uint32_t)((c / STAGES) & 1));
        const uint32_t v = ((const uint32_t *)ring[s])[cw * 32 + lane];
        seen[(size_t)c * 128 + cw * 32 + lane] = v;
        __syncwarp(); /* every lane's read of the stage is done */
        if (lane == 0) ptx_mbar_arrive(&empty[s]);
    }
}

int main(int argc, char **argv)
{
    const int tensor = argc > 1 && strcmp(argv[1], "tensor") == 0;
    const int chunks = argc > 2 ? atoi(argv[2]) : 64;
    if (chunks < 1 || chunks > 1 << 16) {
        fprintf(stderr, "racecheck_bulk: CHUNKS must be 1..65536\n");
        return 2;
    }
    const size_t bytes = (size_t)chunks * STAGE_BYTES;
    uint8_t *host = (uint8_t *)malloc(bytes), *src;
    uint32_t *got = (uint32_t *)malloc(bytes), *seen;
    for (size_t i = 0; i < bytes; i++) host[i] = (uint8_t)(i * 2654435761u >> 13);
    DEV_CUDA_OK(cudaMalloc(&src, bytes));
    DEV_CUDA_OK(cudaMalloc(&seen, bytes));
    DEV_CUDA_OK(cudaMemcpy(src, host, bytes, cudaMemcpyHostToDevice));
    DEV_CUDA_OK(cudaMemset(seen, 0xFF, bytes));
    CUtensorMap tm;
    memset(&tm, 0, sizeof tm);
    if (tensor) {
        const encode_fn encode = dev_tensor_map_encoder("racecheck_bulk");
        cuuint64_t dims[2] = {128, (cuuint64_t)chunks * 4}, strides[1] = {128};
        cuuint32_t box[2] = {128, 4}, estr[2] = {1, 1};
        if (encode(&tm, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, src, dims, strides, box, estr,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                            CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
            fprintf(stderr, "racecheck_bulk: tensor map encode failed\n");
            return 2;
        }
    }
    handoff_kernel<<<1, 32 * (1 + CONSUMER_WARPS)>>>(tm, src, chunks, tensor, seen);
    DEV_CUDA_OK(cudaGetLastError());
    DEV_CUDA_OK(cudaDeviceSynchronize());
    DEV_CUDA_OK(cudaMemcpy(got, seen, bytes, cudaMemcpyDeviceToHost));
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < bytes / 4; i++) {
        uint32_t want;
        memcpy(&want, host + 4 * i, 4);
        if (got[i] != want && bad++ == 0) first = i;
    }
    if (bad) {
        uint32_t want;
        memcpy(&want, host + 4 * first, 4);
        printf("racecheck_bulk %s: %zu of %zu words wrong; first: chunk %zu word %zu got 0x%08x want 0x%08x\n",
               tensor ? "tensor" : "bulk", bad, bytes / 4, first / 128, first % 128, got[first], want);
        return 1;
    }
    printf("racecheck_bulk %s: %d chunks through a %d-stage ring, every word right\n", tensor ? "tensor" : "bulk",
           chunks, STAGES);
    return 0;
}
