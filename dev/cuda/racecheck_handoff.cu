/* racecheck_handoff.cu -- the smallest program with REGR's accumulator
 * hand-off (docs/KERNEL.md, design item 9 and the eighteenth session), to
 * ask whether compute-sanitizer's racecheck reports on the named-barrier
 * hand-off (-DNVFP4_SM90_NBAR) are real.
 *
 * One CTA of three warps passes an accumulator around: the warp of chunk c
 * (c % 3) waits for the hand-off, loads the slot (one float per lane), adds
 * c + 1, stores the slot and signals the warp of chunk c + 1 -- the kernel's
 * pattern without the rest of the kernel.  The hand-off is
 *   mbar  the library's: mbarrier arrive (count 32) and try-wait by parity;
 *   nbar  named barrier per receiving warp: bar.arrive by the sender after
 *         its store, bar.sync by the receiver before its load (PTX: an
 *         arrive synchronizes with a sync on the same barrier);
 *   none  no hand-off at all -- a real race, the negative control.
 * The host checks the last warp's sum (every lane: rounds (rounds + 1) / 2),
 * so a race that bites shows as a wrong sum; racecheck's report is the
 * other half:
 *
 *   racecheck_handoff [mbar|nbar|none] [ROUNDS]
 *   compute-sanitizer --tool racecheck --racecheck-report all racecheck_handoff nbar
 *
 * Exit 0 when every lane's sum is right. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/ptx.cuh"

#include "dev_check.h"

#define WARPS 3
#define BAR0 2 /* the kernel's REGR_HAND_BAR0 */

__global__ void __launch_bounds__(32 * WARPS, 1) handoff_kernel(int mode, int rounds, float *out)
{
    __shared__ float slot[32];
    __shared__ uint64_t ready[WARPS];
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (threadIdx.x == 0) {
        for (int i = 0; i < WARPS; i++) ptx_mbar_init(&ready[i], 32);
        ptx_fence_mbar_init();
    }
    __syncthreads();
    float acc = 0.0f;
    for (int c = w; c < rounds; c += WARPS) {
        if (c > 0) {
            if (mode == 0) ptx_mbar_wait(&ready[w], (uint32_t)((c - 1) / WARPS) & 1u);
            if (mode == 1) ptx_bar_sync(BAR0 + w, 64);
            acc = slot[lane];
        }
        acc = __fadd_rn(acc, (float)(c + 1));
        if (c + 1 < rounds) {
            slot[lane] = acc;
            const int to = (c + 1) % WARPS;
            if (mode == 0) ptx_mbar_arrive(&ready[to]);
            if (mode == 1) ptx_bar_arrive(BAR0 + to, 64);
        } else {
            out[lane] = acc;
        }
    }
}

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "nbar";
    const int mode = strcmp(name, "mbar") == 0 ? 0 : strcmp(name, "nbar") == 0 ? 1 : strcmp(name, "none") == 0 ? 2 : -1;
    const int rounds = argc > 2 ? atoi(argv[2]) : 300;
    if (mode < 0 || rounds < 1 || rounds > 4000) { /* sums stay exact in FP32 */
        fprintf(stderr, "usage: racecheck_handoff [mbar|nbar|none] [ROUNDS <= 4000]\n");
        return 2;
    }
    float *d = NULL, h[32];
    DEV_CUDA_OK(cudaMalloc((void **)&d, sizeof h));
    DEV_CUDA_OK(cudaMemset(d, 0, sizeof h));
    handoff_kernel<<<1, 32 * WARPS>>>(mode, rounds, d);
    DEV_CUDA_OK(cudaGetLastError());
    DEV_CUDA_OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    const float want = (float)rounds * (float)(rounds + 1) / 2.0f;
    int bad = 0;
    for (int i = 0; i < 32; i++)
        if (h[i] != want) {
            if (!bad) printf("MISMATCH %s: lane %d sum %.1f, want %.1f\n", name, i, h[i], want);
            bad++;
        }
    if (!bad) printf("OK %s: %d rounds, every lane's sum %.1f\n", name, rounds, want);
    cudaFree(d);
    return bad ? 1 : 0;
}
