/* probe_sm120.cu -- the sm120 accumulation model against a GB10 / RTX
 * Blackwell tensor core.  Not run by us (we have no such GPU).
 *
 * Executes single block-scaled NVFP4 MMAs
 *   mma.sync.aligned.kind::mxf4nvf4.block_scale.scale_vec::4X.m16n8k64
 *       .row.col.f32.e2m1.e2m1.f32.ue4m3
 * one instruction per k64 step, on random and adversarial operands, and
 * compares every output bit with nvfp4_sm120_step() computed on the host
 * (the C model is linked in).  Categories are counted separately, so that a
 * mismatch points at a rule: steps whose block scales include a zero (the
 * zero-scale exponent, docs/ORACLE.md), subnormal scales, the largest
 * scales, NaN scales, a large c (truncation of the products), a tiny c.
 *
 * Operand layouts (PTX ISA, "Matrix fragments for mma.m16n8k64" with .e2m1
 * and the block-scaling section), per warp, lane = 4 * group + t:
 *   A 16 x 64: 4 x .b32, 8 codes each, lowest nibble first;
 *     reg 0: row group,     k = 8t .. 8t+7     reg 1: row group + 8, same k
 *     reg 2: row group,     k = 32 + 8t ..     reg 3: row group + 8, same k
 *   B 64 x 8 (.col): 2 x .b32: reg 0: k = 8t .. 8t+7, reg 1: k = 32 + 8t ..,
 *     column group;
 *   C, D 16 x 8 f32: d0, d1: row group, cols 2t, 2t+1; d2, d3: row group + 8;
 *   scale A (16 x 4 ue4m3, byte j = k-block j): with thread-id-a = s the lanes
 *     t = 2s hold row group, t = 2s + 1 row group + 8 (byte-id-a = 0);
 *   scale B (4 x 8): with thread-id-b = s the lanes t = s hold column group.
 * Before the arithmetic is judged, a layout pass puts single products at
 * every (row, col, k) position and checks that each lands where these
 * layouts say, with thread selectors 0 (the kernel's); if not, the probe
 * says so and stops (exit 3).  The other selectors are checked the same way
 * and reported (their mismatches count against the exit status).
 *
 * The instruction is src/cuda/sm120/mma.cuh's wrapper, the one the kernel
 * uses.  Built with NVFP4_SM120_EMULATE for sm_90a (tests/gpu/gpu.mk,
 * probe_sm120_emu) the same probe runs the emulated tensor core on an
 * H100 / H200 instead: its layout and its step against nvfp4_sm120_step.
 *
 * Build: sh tests/gpu/probe_sm120.sh --build-only  (sm_120a and sm_121a)
 * Run:   sh tests/gpu/probe_sm120.sh                (prints mismatch counts)
 * Usage: probe_sm120 [--steps N] [--seed S] | --check
 * Exit status 0 only if every category has zero mismatches. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "nvfp4.h"
}
#include "cuda/sm120/mma.cuh"

#ifdef NVFP4_SM120_EMULATE
#define PROBE_NAME "probe_sm120_emu"
#define PROBE_WHAT "the emulated MMA (src/cuda/sm120/mma.cuh)"
#else
#define PROBE_NAME "probe_sm120"
#define PROBE_WHAT "this GPU"
#endif

#define CUDA_CHECK(call)                                                                    \
    do {                                                                                    \
        cudaError_t err_ = (call);                                                          \
        if (err_ != cudaSuccess) {                                                          \
            fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(err_), __FILE__, \
                    __LINE__, cudaGetErrorString(err_));                                    \
            exit(2);                                                                        \
        }                                                                                   \
    } while (0)

/* One MMA case: A 16 x 64 codes, B 8 x 64 codes (one per byte on the host),
 * scales 16 x 4 and 8 x 4, C 16 x 8. */
struct mma_case {
    uint8_t a[16][64], b[8][64];
    uint8_t sa[16][4], sb[8][4];
    float c[16][8];
};

/* Device form: packed registers per lane, built on the host from the layout
 * above, and the thread selectors the case uses. */
struct mma_regs {
    uint32_t a[32][4], b[32][2], sfa[32], sfb[32];
    float c[32][4];
    uint16_t sel_a, sel_b;
};

static void pack_case(mma_regs *r, const mma_case *m, int sel_a, int sel_b)
{
    for (int lane = 0; lane < 32; lane++) {
        int g = lane >> 2, t = lane & 3;
        for (int reg = 0; reg < 4; reg++) {
            int row = g + (reg & 1) * 8, k0 = (reg >> 1) * 32 + 8 * t;
            uint32_t v = 0;
            for (int i = 0; i < 8; i++) v |= (uint32_t)(m->a[row][k0 + i] & 15) << (4 * i);
            r->a[lane][reg] = v;
        }
        for (int reg = 0; reg < 2; reg++) {
            int k0 = reg * 32 + 8 * t;
            uint32_t v = 0;
            for (int i = 0; i < 8; i++) v |= (uint32_t)(m->b[g][k0 + i] & 15) << (4 * i);
            r->b[lane][reg] = v;
        }
        /* thread-id-a = s: t = 2s -> row g, t = 2s + 1 -> row g + 8;
         * thread-id-b = s: t = s -> column g; the other lanes hold a decoy
         * (a wrong lane shows as a wrong scale) */
        int arow = t == 2 * sel_a + 1 ? g + 8 : g;
        r->sfa[lane] = 0x3e3e3e3eu;
        r->sfb[lane] = 0x3e3e3e3eu;
        if (t / 2 == sel_a) {
            r->sfa[lane] = 0;
            for (int j = 0; j < 4; j++) r->sfa[lane] |= (uint32_t)m->sa[arow][j] << (8 * j);
        }
        if (t == sel_b) {
            r->sfb[lane] = 0;
            for (int j = 0; j < 4; j++) r->sfb[lane] |= (uint32_t)m->sb[g][j] << (8 * j);
        }
        r->c[lane][0] = m->c[g][2 * t];
        r->c[lane][1] = m->c[g][2 * t + 1];
        r->c[lane][2] = m->c[g + 8][2 * t];
        r->c[lane][3] = m->c[g + 8][2 * t + 1];
    }
    r->sel_a = (uint16_t)sel_a;
    r->sel_b = (uint16_t)sel_b;
}

static void unpack_d(float d[16][8], const float dl[32][4])
{
    for (int lane = 0; lane < 32; lane++) {
        int g = lane >> 2, t = lane & 3;
        d[g][2 * t] = dl[lane][0];
        d[g][2 * t + 1] = dl[lane][1];
        d[g + 8][2 * t] = dl[lane][2];
        d[g + 8][2 * t + 1] = dl[lane][3];
    }
}

/* One warp per case. */
__global__ void mma_kernel(const mma_regs *in, float (*out)[32][4], int ncases)
{
    int w = (int)(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32), lane = (int)(threadIdx.x & 31);
    if (w >= ncases) return;
    const mma_regs *r = &in[w];
    float d[4] = {r->c[lane][0], r->c[lane][1], r->c[lane][2], r->c[lane][3]};
    nvfp4_sm120_mma(d, r->a[lane], r->b[lane][0], r->b[lane][1], r->sfa[lane], r->sfb[lane], r->sel_a, r->sel_b);
    out[w][lane][0] = d[0];
    out[w][lane][1] = d[1];
    out[w][lane][2] = d[2];
    out[w][lane][3] = d[3];
}

/* ---- host ---------------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

enum { CAT_PLAIN, CAT_ZERO_SCALE, CAT_SUBNORMAL, CAT_MAX, CAT_NAN, CAT_BIG_C, CAT_TINY_C,
       CAT_CANCEL, CAT_SELECTORS, NCAT };
static const char *cat_names[NCAT] = {
    "random (normal scales)", "a zero block scale",     "subnormal block scales",
    "largest scales (448)",   "a NaN block scale",      "large c (products truncated)",
    "tiny c (c truncated)",   "cancelling blocks",      "thread selectors 1..3"};

static uint8_t scale_for(int cat)
{
    switch (cat) {
    case CAT_ZERO_SCALE: return rnd() % 3 == 0 ? 0 : (uint8_t)(0x20 + rnd() % 0x40);
    case CAT_SUBNORMAL: return rnd() % 2 ? (uint8_t)(rnd() % 8) : (uint8_t)(0x08 + rnd() % 0x30);
    case CAT_MAX: return rnd() % 2 ? 0x7e : (uint8_t)(0x70 + rnd() % 14);
    case CAT_NAN: return rnd() % 17 == 0 ? (rnd() % 2 ? 0x7f : 0xff) : (uint8_t)(0x30 + rnd() % 16);
    default: return (uint8_t)((rnd() % 2 ? 0x80 : 0) | (0x08 + rnd() % 0x76)); /* sign ignored */
    }
}

static float c_for(int cat)
{
    uint32_t field;
    if (cat == CAT_BIG_C) field = 127 + 20 + (uint32_t)(rnd() % 20);
    else if (cat == CAT_TINY_C) field = (uint32_t)(rnd() % 100);
    else field = rnd() % 5 == 0 ? 0 : 100 + (uint32_t)(rnd() % 50);
    uint32_t bits = (uint32_t)(rnd() & 1) << 31 | field << 23 | (uint32_t)(rnd() & 0x7fffff);
    if (field == 0 && rnd() % 2) bits &= 0x80000000u; /* some zeros */
    return nvfp4_f32_from_bits(bits);
}

static void make_case(mma_case *m, int cat)
{
    for (int r = 0; r < 16; r++) {
        for (int k = 0; k < 64; k++) m->a[r][k] = (uint8_t)(rnd() & 15);
        for (int j = 0; j < 4; j++) m->sa[r][j] = scale_for(cat);
    }
    for (int n = 0; n < 8; n++) {
        for (int k = 0; k < 64; k++) m->b[n][k] = (uint8_t)(rnd() & 15);
        for (int j = 0; j < 4; j++) m->sb[n][j] = scale_for(cat);
    }
    if (cat == CAT_CANCEL) { /* block 2 = -block 0 on the same scales */
        for (int r = 0; r < 16; r++) {
            for (int i = 0; i < 16; i++) m->a[r][32 + i] = m->a[r][i] ^ 8;
            m->sa[r][2] = m->sa[r][0];
        }
        for (int n = 0; n < 8; n++) {
            for (int i = 0; i < 16; i++) m->b[n][32 + i] = m->b[n][i];
            m->sb[n][2] = m->sb[n][0];
        }
    }
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++) m->c[r][n] = c_for(cat);
}

static float model(const mma_case *m, int r, int n)
{
    return nvfp4_sm120_step(m->c[r][n], m->a[r], m->sa[r], m->b[n], m->sb[n]);
}

/* The selectors of case i: (0, 0) but in the selector category, where
 * they cycle through every other pair. */
static void selectors_of(int cat, long i, int *sel_a, int *sel_b)
{
    *sel_a = 0, *sel_b = 0;
    if (cat == CAT_SELECTORS) {
        int pair = 1 + (int)(i % 7); /* 1..7 of the 8 pairs (sel_a, sel_b) */
        *sel_a = pair / 4;
        *sel_b = pair % 4;
    }
}

static void run_cases(const mma_case *cases, const int (*sel)[2], int ncases, float (*d)[16][8])
{
    mma_regs *regs = (mma_regs *)malloc(sizeof(mma_regs) * (size_t)ncases);
    float(*dl)[32][4] = (float(*)[32][4])malloc(sizeof(float) * 128 * (size_t)ncases);
    for (int i = 0; i < ncases; i++) pack_case(&regs[i], &cases[i], sel[i][0], sel[i][1]);
    mma_regs *d_in;
    float(*d_out)[32][4];
    CUDA_CHECK(cudaMalloc(&d_in, sizeof(mma_regs) * (size_t)ncases));
    CUDA_CHECK(cudaMalloc(&d_out, sizeof(float) * 128 * (size_t)ncases));
    CUDA_CHECK(cudaMemcpy(d_in, regs, sizeof(mma_regs) * (size_t)ncases, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(d_out, 0xff, sizeof(float) * 128 * (size_t)ncases));
    int warps_per_block = 4;
    mma_kernel<<<(ncases + warps_per_block - 1) / warps_per_block, 32 * warps_per_block>>>(d_in, d_out,
                                                                                          ncases);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(dl, d_out, sizeof(float) * 128 * (size_t)ncases, cudaMemcpyDeviceToHost));
    for (int i = 0; i < ncases; i++) unpack_d(d[i], dl[i]);
    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_out));
    free(regs);
    free(dl);
}

/* Layout pass with thread selectors (sel_a, sel_b): for each (k, row, col)
 * one product 1 x 1 at (row, k) x (k, col), A's block scales 2^j, c = 0: D
 * must be 2^(k/16) at (row, col) and 0 elsewhere. */
static int layout_ok(int sel_a, int sel_b)
{
    const int ncases = 64 * 2; /* k = 0..63, twice: (row, col) = (k % 16, k % 8) and shifted */
    mma_case *cases = (mma_case *)calloc((size_t)ncases, sizeof(mma_case));
    int(*sel)[2] = (int(*)[2])malloc(sizeof(int) * 2 * (size_t)ncases);
    float(*d)[16][8] = (float(*)[16][8])malloc(sizeof(float) * 128 * (size_t)ncases);
    for (int i = 0; i < ncases; i++) {
        int k = i % 64, row = (k + 5 * (i / 64)) % 16, col = (k + 3 * (i / 64)) % 8;
        memset(cases[i].sa, 0x38, sizeof cases[i].sa);
        memset(cases[i].sb, 0x38, sizeof cases[i].sb);
        /* the scale of k-block j is 2^j on A, so a wrong block shows as a factor */
        for (int r = 0; r < 16; r++)
            for (int j = 0; j < 4; j++) cases[i].sa[r][j] = (uint8_t)(0x38 + 8 * j);
        cases[i].a[row][k] = 2; /* 1.0 */
        cases[i].b[col][k] = 2;
        sel[i][0] = sel_a, sel[i][1] = sel_b;
    }
    run_cases(cases, sel, ncases, d);
    int bad = 0;
    for (int i = 0; i < ncases; i++) {
        int k = i % 64, row = (k + 5 * (i / 64)) % 16, col = (k + 3 * (i / 64)) % 8;
        for (int r = 0; r < 16; r++)
            for (int n = 0; n < 8; n++) {
                float want = (r == row && n == col) ? (float)(1 << (k / 16)) : 0.0f;
                if (d[i][r][n] != want) {
                    if (bad++ < 5)
                        fprintf(stderr,
                                "layout (selectors %d, %d): product at A(%d, k=%d) x B(k=%d, %d): D(%d, %d) = %g, "
                                "want %g\n",
                                sel_a, sel_b, row, k, k, col, r, n, (double)d[i][r][n], (double)want);
                }
            }
    }
    free(cases);
    free(sel);
    free(d);
    return bad == 0;
}

int main(int argc, char **argv)
{
    long steps = 200000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--check")) return 0;
        if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atol(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) rng_state = strtoull(argv[++i], NULL, 0) | 1;
        else {
            fprintf(stderr, "usage: probe_sm120 [--steps N] [--seed S] | --check\n");
            return 2;
        }
    }
    int dev = 0;
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    printf("device: %s, compute capability %d.%d; judged: %s\n", prop.name, prop.major, prop.minor, PROBE_WHAT);
#ifdef NVFP4_SM120_EMULATE
    if (prop.major != 9 || prop.minor != 0) {
        fprintf(stderr, PROBE_NAME ": this build emulates the MMA on an sm_90 GPU (H100, H200)\n");
        return 2;
    }
#else
    if (prop.major != 12) {
        fprintf(stderr, PROBE_NAME ": needs an sm_120 / sm_121 GPU (RTX 50x0, RTX PRO Blackwell, GB10)\n");
        return 2;
    }
#endif
    if (!layout_ok(0, 0)) {
        printf("LAYOUT MISMATCH: the operand or scale layout assumed by this probe is wrong; the "
               "arithmetic was not judged (exit 3)\n");
        return 3;
    }
    printf("layout: every single product landed where the PTX layouts say (thread selectors 0)\n");
    long selector_bad = 0;
    for (int pair = 1; pair < 8; pair++)
        if (!layout_ok(pair / 4, pair % 4)) selector_bad++;
    printf("layout with thread selectors (1..3): %s\n",
           selector_bad ? "MISMATCH (the selector lanes assumed here are wrong; the kernel uses 0)"
                        : "every product where the PTX layouts say");

    const int batch = 4096; /* MMAs per launch; each gives 128 steps */
    long cases_total = (steps + 127) / 128;
    mma_case *cases = (mma_case *)malloc(sizeof(mma_case) * batch);
    int(*sel)[2] = (int(*)[2])malloc(sizeof(int) * 2 * batch);
    float(*d)[16][8] = (float(*)[16][8])malloc(sizeof(float) * 128 * batch);
    long count[NCAT] = {0}, bad[NCAT] = {0};
    for (long done = 0; done < cases_total; done += batch) {
        int n = (int)(cases_total - done < batch ? cases_total - done : batch);
        for (int i = 0; i < n; i++) {
            const int cat = (int)((done + i) % NCAT);
            make_case(&cases[i], cat);
            selectors_of(cat, (done + i) / NCAT, &sel[i][0], &sel[i][1]);
        }
        run_cases(cases, sel, n, d);
        for (int i = 0; i < n; i++) {
            int cat = (int)((done + i) % NCAT);
            for (int r = 0; r < 16; r++)
                for (int c = 0; c < 8; c++) {
                    float want = model(&cases[i], r, c);
                    count[cat]++;
                    if (nvfp4_f32_bits(d[i][r][c]) != nvfp4_f32_bits(want) && bad[cat]++ < 3) {
                        fprintf(stderr,
                                "mismatch [%s] case %ld D(%d, %d): gpu 0x%08x (%a), model 0x%08x (%a), "
                                "c 0x%08x, scales A %02x %02x %02x %02x B %02x %02x %02x %02x\n",
                                cat_names[cat], done + i, r, c, nvfp4_f32_bits(d[i][r][c]),
                                (double)d[i][r][c], nvfp4_f32_bits(want), (double)want,
                                nvfp4_f32_bits(cases[i].c[r][c]), cases[i].sa[r][0], cases[i].sa[r][1],
                                cases[i].sa[r][2], cases[i].sa[r][3], cases[i].sb[c][0], cases[i].sb[c][1],
                                cases[i].sb[c][2], cases[i].sb[c][3]);
                    }
                }
        }
    }
    long total_bad = 0, total = 0;
    printf("%-32s %12s %12s\n", "category", "steps", "mismatches");
    for (int c = 0; c < NCAT; c++) {
        printf("%-32s %12ld %12ld\n", cat_names[c], count[c], bad[c]);
        total += count[c];
        total_bad += bad[c];
    }
    printf("total: %ld steps, %ld mismatches: %s\n", total, total_bad,
           total_bad ? "the sm120 model differs from " PROBE_WHAT : "nvfp4_sm120_step matches " PROBE_WHAT);
    free(cases);
    free(sel);
    free(d);
    return total_bad || selector_bad ? 1 : 0;
}
