/* plan.c -- the sm_90a NVFP4 GEMM's planner: which kernel, how deep its
 * pipeline, how many CTAs and threads, how much shared memory.  Plain C, so
 * that tests/unit/test_sm90_plan.c covers every rule on the CPU.  The rules
 * were read off `nvfp4 bench` on the H200; docs/KERNEL.md gives the
 * measurement behind each. */
#include "cuda/sm90/plan.h"

#include <string.h>

#ifdef NVFP4_TESTING
#include "nvfp4_testing.h"
#endif

const nvfp4_sm90_kernel nvfp4_sm90_kernels[] = {
#define NVFP4_SM90_WGMMA_KERNEL(name, bn, nc, sliced) {#name, NVFP4_SM90_WGMMA, bn, nc, 0, 0, sliced},
#define NVFP4_SM90_REG_KERNEL(name, family, mt, r, bf16) {#name, family, mt, 0, r, bf16, 0},
#include "cuda/sm90/kernels.def"
#undef NVFP4_SM90_WGMMA_KERNEL
#undef NVFP4_SM90_REG_KERNEL
};
const int nvfp4_sm90_num_kernels = (int)(sizeof nvfp4_sm90_kernels / sizeof nvfp4_sm90_kernels[0]);
/* (the wgmma rows come first: a register kernel's place among its own is
 * its index less this) */
static const char wgmma_rows[] = {
#define NVFP4_SM90_WGMMA_KERNEL(name, bn, nc, sliced) 0,
#define NVFP4_SM90_REG_KERNEL(name, family, mt, r, bf16)
#include "cuda/sm90/kernels.def"
#undef NVFP4_SM90_WGMMA_KERNEL
#undef NVFP4_SM90_REG_KERNEL
};
const int nvfp4_sm90_num_wgmma = (int)sizeof wgmma_rows;

#define SM90_STAGE_ALIGN 1024
#define SM90_BK 64 /* K elements per wgmma chunk: 4 NVFP4 blocks, one 512-byte scale chunk */

size_t nvfp4_sm90_stage_bytes(int bn, int nc)
{
    size_t ksub = (size_t)NVFP4_SM90_KSUB(bn, nc);
    size_t act = (size_t)bn * SM90_BK * 2 * ksub; /* FP16 activations */
    size_t codes = (size_t)64 * nc * SM90_BK / 2 * ksub;
    size_t scales = 512 * ksub;
    size_t b = act + codes + scales;
    return (b + SM90_STAGE_ALIGN - 1) / SM90_STAGE_ALIGN * SM90_STAGE_ALIGN;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Testing overrides (nvfp4_testing.h); the shipped library plans by the rules alone. */
#ifdef NVFP4_TESTING
static int test_kernel = -1;  /* a kernel index, or -1 */
static int test_sk = 0;       /* stream-K: 0 by the cost model, -1 never, > 0 forced on that many CTAs */
static int test_inkernel = -1; /* the in-kernel A producer: -1 by the rules, 0 never, 1 wherever it fits */
static int test_loaders = 0;  /* register kernels' loader warps, 0 = planned */
void nvfp4_sm90_force_kernel(int index) { test_kernel = index >= 0 && index < nvfp4_sm90_num_kernels ? index : -1; }
void nvfp4_sm90_force_stream_k(int ctas) { test_sk = ctas; }
void nvfp4_sm90_force_inkernel_a(int mode) { test_inkernel = mode < 0 ? -1 : mode > 0; }
void nvfp4_sm90_force_loaders(int lw) { test_loaders = lw; }
#define SM90_FORCED_KERNEL test_kernel
#define SM90_SK_MODE test_sk
#define SM90_INKERNEL_MODE test_inkernel
#define SM90_LOADERS (test_loaders >= 1 && test_loaders <= REGM_LWMAX ? test_loaders : 1)
#else
#define SM90_FORCED_KERNEL (-1)
#define SM90_SK_MODE 0
#define SM90_INKERNEL_MODE (-1)
#define SM90_LOADERS 1 /* one TMA-issuing warp: two and four measured the same */
#endif

/* Per-tile cost of a 128-row wgmma tile beyond its bn activation rows, in
 * activation rows (the consumers' own weight dequantization, fill and
 * epilogue), fitted to every tile's time at M = 2048 on the H200: 128 fits
 * the four linears' times for bn = 128..256 best and picks the fastest tile
 * on each. */
#define SM90_TILE_OVERHEAD_ROWS 128

/* The cost of one stream-K split tile (its 128 x bn FP32 accumulators stored
 * and loaded through L2, one more pipeline drain), in the same rows. */
#define SM90_SK_SPLIT_ROWS 16

/* Stream-K desynchronises the CTAs' K positions, so the operands read more
 * than once are live in L2 at once, where data-parallel waves walk K
 * together: FC2 at M = 2048 (85 MB of such operands) lost 1-2 % with it (L2
 * hit rate 83 -> 66 %), attn-out at M = 4096 (63 MB) gained 4 %, the
 * 30-43 MB shapes gained.  The bound: 1.5 x the 50 MB L2 of the sm_90 parts. */
#define SM90_SK_MAX_OPERAND_BYTES (75LL << 20)

/* The first stream-K tile of `tiles` on `ctas` CTAs: whole waves but the
 * last run data-parallel, the rest (between one and two grids of tiles) is
 * shared out. */
static int64_t sk_first_tile(int64_t tiles, int64_t ctas) { return (tiles / ctas - 1) * ctas; }

/* Cost of the tiles of an M x N x K GEMM in 128 x bn tiles on `ctas` CTAs,
 * times ctas: whole waves, each paid in full (data-parallel), or with *sk
 * set, the tiles from the last whole wave on shared out evenly by K chunks
 * plus one split per CTA.  Stream-K needs at least as many tiles as CTAs (a
 * tile is then split at most once), pays only where the last wave is
 * partial, and is kept to operands that stay in L2. */
static int64_t tile_cost(int64_t m, int64_t n, int64_t k, int bn, int64_t ctas, int sk_allowed, int *sk)
{
    const int64_t num_at = ceil_div(m, bn), tiles = ceil_div(n, 128) * num_at;
    const int64_t per = bn + SM90_TILE_OVERHEAD_ROWS;
    const int64_t dp = ceil_div(tiles, ctas) * per * ctas;
    const int64_t skc = tiles * per + SM90_SK_SPLIT_ROWS * ctas;
    *sk = sk_allowed && tiles >= ctas && tiles % ctas != 0 && skc < dp;
    if (*sk) {
        const int64_t t0 = sk_first_tile(tiles, ctas);
        const int64_t w_tiles = (tiles - 1) / num_at - t0 / num_at + 1;
        const int64_t w_rows = num_at > 1 ? w_tiles * 128 : 0; /* re-read by several activation tiles */
        const int64_t a_rows = w_tiles < 2 ? 0 : tiles - t0 >= num_at ? m : (tiles - t0) * bn;
        *sk = (double)a_rows * (double)k * 2.0 + (double)w_rows * (double)k * 0.5625 <=
              (double)SM90_SK_MAX_OPERAND_BYTES;
    }
    return *sk ? skc : dp;
}

/* M > 128: the two-consumer tile (bn >= 128) whose waves cost least.  A tile
 * takes time ~ bn + SM90_TILE_OVERHEAD_ROWS and, data-parallel, the last
 * wave is paid in full however few tiles it has, so 42 x 8 tiles of 128 x
 * 256 on 132 SMs (2.55 waves, 3 paid) lose to 42 x 9 of 128 x 232 (2.86);
 * with stream-K, 128 x 256 costs 2.55 waves and a split per CTA.  Ties go to
 * the wider tile (each weight dequantized fewer times). */
static int wave_bn(int64_t m, int64_t n, int64_t k, int num_sms, int sk_allowed)
{
    int best_bn = 256;
    int64_t best_cost = -1;
    for (int i = 0; i < nvfp4_sm90_num_kernels; i++) {
        const nvfp4_sm90_kernel *x = &nvfp4_sm90_kernels[i];
        if (x->family != NVFP4_SM90_WGMMA || x->nc != 2 || x->mt < 128 || x->sliced) continue;
        int sk;
        const int64_t cost = tile_cost(m, n, k, x->mt, num_sms, sk_allowed && NVFP4_SM90_SK_TILE(x->mt, x->nc), &sk);
        if (best_cost < 0 || cost < best_cost || (cost == best_cost && x->mt > best_bn)) {
            best_cost = cost;
            best_bn = x->mt;
        }
    }
    return best_bn;
}

static int find_kernel(int family, int mt, int nc, int r, int bf16, int sliced)
{
    for (int i = 0; i < nvfp4_sm90_num_kernels; i++) {
        const nvfp4_sm90_kernel *x = &nvfp4_sm90_kernels[i];
        if (x->family == family && x->mt == mt && x->nc == nc && x->r == r && x->bf16 == bf16 && x->sliced == sliced)
            return i;
    }
    return -1;
}

/* The rules: the kernel (NVFP4 activations; the in-kernel producer's twin is
 * looked up after) for M x N x K with `slices` K slices on num_sms SMs.
 *  - M <= 32: a register kernel, the smallest MT >= M: REGR where N leaves
 *    few 16-row chains per SM (M <= 16, one chain: as many warps a chain as
 *    fit, R <= 2 at MT = 16 where R = 3 measured slower), else REGW where its
 *    one 16-row chain a warp gives more MMA warps than REGM's plan (FC1: 14
 *    against 7; at QKV's 11 against 11 it measured no faster), else REGM
 *    with the fewest 8-row chains a warp that fit one wave;
 *  - 32 < M <= 128: one activation tile (the activations are re-read from L2
 *    once per weight tile, and a second tile doubles the dequantization),
 *    two consumers sharing it when there are at least as many 128-row weight
 *    tiles as SMs;
 *  - M > 128: 128-row tiles, bn by the wave model;
 *  - K slices on a wgmma tile: bn = 64, the tiles built with the slice code. */
static int choose_kernel(int64_t m, int64_t n, int64_t k, int slices, int num_sms, int sk_allowed)
{
    if (m <= 32) {
        const int mt = m <= 8 ? 8 : m <= 16 ? 16 : 32;
        const int64_t per = ceil_div(n / 8 > 0 ? n / 8 : 1, num_sms);     /* 8-row chains per CTA */
        const int64_t per16 = ceil_div(n / 16 > 0 ? n / 16 : 1, num_sms); /* 16-row chains per CTA */
        const int tw = per <= REGM_TMAX(1) ? 1 : per <= REGM_TMAX(2) ? 2 : 4;
        if (m <= 16 && slices <= 1 && per16 * REGR_MIN_R <= REGR_WMAX) {
            const int64_t rmax = m <= 8 ? REGR_MAX_R : 2;
            return find_kernel(NVFP4_SM90_REGR, mt, 0, (int)(REGR_WMAX / per16 < rmax ? REGR_WMAX / per16 : rmax), 0, 0);
        }
        if (m <= 16 && 2 * per16 <= REGW_TMAX && per16 > ceil_div(per, tw))
            return find_kernel(NVFP4_SM90_REGW, mt, 0, 1, 0, 0);
        return find_kernel(NVFP4_SM90_REGM, mt, 0, tw, 0, 0);
    }
    int bn, nc;
    if (m <= 128) {
        bn = m <= 64 ? 64 : 128;
        nc = ceil_div(n, 128) >= num_sms ? 2 : 1;
    } else {
        bn = wave_bn(m, n, k, num_sms, sk_allowed);
        nc = 2;
    }
    if (slices > 1 && bn > 64) {
        bn = 64;
        nc = 1;
    }
    return find_kernel(NVFP4_SM90_WGMMA, bn, nc, 0, 0, 0);
}

/* A register kernel's ring: `fixed` bytes and as many stages of `stage`
 * bytes as fit, at most cap, a multiple of `multiple`.  0, or -1 if fewer
 * than two stages fit. */
static int ring_fit(nvfp4_sm90_plan *out, size_t fixed, size_t stage, size_t cap, size_t multiple, size_t smem_optin)
{
    if (fixed + 2 * stage > smem_optin) return -1;
    size_t nst = (smem_optin - fixed) / stage;
    if (nst > cap) nst = cap;
    nst -= nst % multiple;
    if (nst < 2) return -1;
    out->stages = (int)nst;
    out->smem = fixed + nst * stage;
    return 0;
}

/* The register kernels: 8-row units balanced over at most one CTA per SM
 * (more CTAs only where a CTA would take more than its maximum), the deepest
 * ring that fits, and the warps. */
static int plan_register(const nvfp4_sm90_device *dev, const nvfp4_sm90_kernel *kern, int64_t m, int64_t n,
                         nvfp4_sm90_plan *out)
{
    const int rot = kern->family == NVFP4_SM90_REGR, wa = kern->family != NVFP4_SM90_REGM;
    const int64_t rows = wa ? 16 : 8; /* per chain */
    const int64_t chains = n / rows, u = rows / 8;
    if (m > kern->mt || chains < 1) return -1;
    const int64_t cmax = kern->family == NVFP4_SM90_REGM ? REGM_TMAX(kern->r)
                         : rot                           ? REGR_WMAX / kern->r
                                                         : REGW_TMAX / 2;
    int64_t per = ceil_div(chains, dev->num_sms);
    int64_t grid = chains < dev->num_sms ? chains : dev->num_sms;
    if (per > cmax) grid = ceil_div(chains, cmax);
    per = ceil_div(chains, grid);
    if (grid > INT32_MAX) return -1;
    out->grid = (int)grid;
    out->tiles = u * chains;
    out->tiles_per_cta = (int)(u * per);
    const size_t units = (size_t)out->tiles_per_cta, mt = (size_t)kern->mt;
    size_t stage = wa ? REGW_STAGE_BYTES(mt, units) : REGM_STAGE_BYTES(mt, units);
    size_t fixed = (wa ? REGW_SMEM(mt, units, 0) : REGM_SMEM(mt, units, 0)) + (rot ? REGR_SLOT_BYTES(mt, units) : 0);
    const size_t multiple = rot ? (size_t)kern->r : 1;
    if (ring_fit(out, fixed, stage, REGM_MAX_STAGES, multiple, dev->smem_optin) != 0) return -1;
    if (kern->bf16) {
        /* the NVFP4 ring's depth at most, each stage with the chunk's BF16
         * box of M rows, the threshold table last */
        stage += REGM_XBOX_BYTES((size_t)m);
        fixed += REGM_QTAB_BYTES;
        if (ring_fit(out, fixed, stage, (size_t)out->stages, multiple, dev->smem_optin) != 0) return -1;
    }
    const int tw = rot ? 1 : kern->r; /* chains per MMA warp */
    const int aw = rot ? REGR_AW(kern->mt) : REGM_AW(kern->mt, tw);
    out->mma_warps = (int)(rot ? per * kern->r : ceil_div(per, tw));
    out->loaders = rot ? REGR_LOADERS : SM90_LOADERS;
    out->threads = 32 * (out->loaders + aw + out->mma_warps);
    const int max_threads = rot ? REGR_THREADS_MAX(kern->mt)
                            : wa ? REGW_THREADS_MAX(kern->mt, tw)
                                 : REGM_THREADS_MAX(kern->mt, tw);
    if (out->threads > max_threads) return -1;
    /* activation warps taking whole chunks in turn (the in-kernel producer,
     * and REGR at MT = 16): as many as divide the ring's depth */
    out->act_rot = 0;
    if (kern->bf16 || (rot && kern->mt >= 16)) {
        out->act_rot = aw;
        while (out->stages % out->act_rot != 0) out->act_rot--;
    }
    return 0;
}

/* The wgmma kernel: persistent CTAs, the deepest ring that fits its CTAs per
 * SM, stream-K by the cost model on one CTA per SM. */
static int plan_wgmma(const nvfp4_sm90_device *dev, const nvfp4_sm90_kernel *kern, int64_t m, int64_t n, int64_t k,
                      int slices, nvfp4_sm90_plan *out)
{
    const int bn = kern->mt, nc = kern->nc, ksub = NVFP4_SM90_KSUB(bn, nc);
    const int ctas = NVFP4_SM90_CTAS(bn, nc);
    const size_t stage = nvfp4_sm90_stage_bytes(bn, nc);
    /* alignment slack, up to 32 x 2 barriers, the staged epilogue */
    const size_t fixed = 1024 + 512 + NVFP4_SM90_EPI_BYTES(nc);
    size_t budget = dev->smem_optin;
    if (ctas > 1 && dev->smem_per_sm / ctas < budget + 1024) budget = dev->smem_per_sm / ctas - 1024;
    if (budget <= fixed + 2 * stage) return -1;
    int64_t stages = (int64_t)((budget - fixed) / stage);
    if (stages > 32) stages = 32;
    /* NOTES: a consumer of the chunk-pair step holds three pairs at once
     * (the pair in flight, the one before it until wait_group retires it,
     * the next one waited for) */
    if (bn > 64 && bn <= NVFP4_SM90_PAIR_MAX_BN && stages < 3 * (3 - ksub)) return -1;
    const int64_t tiles = ceil_div(n, 64 * nc) * ceil_div(m, bn);
    const int64_t slots = (int64_t)dev->num_sms * ctas;
    out->stages = (int)stages;
    out->tiles = tiles;
    out->grid = (int)(tiles < slots ? tiles : slots);
    out->smem = fixed + (size_t)stages * stage;
    out->threads = 128 * (nc + 1);
    out->sk_tile0 = tiles;
    out->act3d = ksub > 1 && k >= 64;
    /* stream-K: by the cost model on one CTA per SM, or forced on a grid */
    const int capable = NVFP4_SM90_SK_TILE(bn, nc) && slices <= 1 && m > NVFP4_SM90_SK_MIN_M;
    int sk = 0;
    int64_t sk_ctas = dev->num_sms;
    if (SM90_SK_MODE > 0) {
        sk_ctas = SM90_SK_MODE;
        if (!capable || sk_ctas > NVFP4_SM90_SK_MAX_CTAS || sk_ctas > slots || tiles < sk_ctas) return -1;
        sk = 1;
    } else if (SM90_SK_MODE == 0 && capable && dev->num_sms <= NVFP4_SM90_SK_MAX_CTAS) {
        (void)tile_cost(m, n, k, bn, dev->num_sms, 1, &sk);
    }
    if (sk) {
        out->grid = (int)sk_ctas;
        out->sk_tile0 = sk_first_tile(tiles, sk_ctas);
    }
    return 0;
}

int nvfp4_sm90_plan_gemm(const nvfp4_sm90_device *dev, int64_t m, int64_t n, int64_t k, int k_slices, int act,
                         nvfp4_sm90_plan *out)
{
    memset(out, 0, sizeof *out);
    if (m < 1 || n < 1 || k < 1 || dev->num_sms < 1) return -1;
    const int slices = k_slices < 1 ? 1 : k_slices;
    const int sk_allowed = SM90_SK_MODE == 0 && dev->num_sms <= NVFP4_SM90_SK_MAX_CTAS;
    int index = SM90_FORCED_KERNEL >= 0 ? SM90_FORCED_KERNEL : choose_kernel(m, n, k, slices, dev->num_sms, sk_allowed);
    if (index < 0) return -1;
    const nvfp4_sm90_kernel *kern = &nvfp4_sm90_kernels[index];
    /* 64-element groups per slice (nvfp4_k_slice_elems), and the slices' total */
    const int64_t groups = (k + 63) / 64, cps = ceil_div(groups, slices);
    out->chunks_per_slice = (int)cps;
    if (kern->bf16 != (act == NVFP4_SM90_ACT_BF16)) {
        /* the twin that takes the other activations (a forced kernel's too) */
        index = find_kernel(kern->family, kern->mt, kern->nc, kern->r, act == NVFP4_SM90_ACT_BF16, kern->sliced);
        if (index < 0) return -1;
        kern = &nvfp4_sm90_kernels[index];
    }
    /* K slices: not in REGR (one chain's chunks go round its warps); in the
     * wgmma kernel, the tiles built with the slice code where a slice ends
     * before K does */
    if (cps < groups) {
        if (kern->family == NVFP4_SM90_REGR || (kern->family == NVFP4_SM90_WGMMA && kern->mt > 64)) return -1;
        if (kern->family == NVFP4_SM90_WGMMA && !kern->sliced) {
            index = find_kernel(kern->family, kern->mt, kern->nc, kern->r, 0, 1);
            if (index < 0) return -1;
            kern = &nvfp4_sm90_kernels[index];
        }
    }
    if (SM90_SK_MODE > 0 && kern->family != NVFP4_SM90_WGMMA) return -1; /* stream-K forced where it cannot run */
    const int saved_cps = out->chunks_per_slice;
    const int rc = NVFP4_SM90_IS_REG(kern) ? plan_register(dev, kern, m, n, out)
                                           : plan_wgmma(dev, kern, m, n, k, slices, out);
    if (rc != 0) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    out->kernel = index;
    out->act = act;
    out->chunks_per_slice = saved_cps;
    out->prepass = kern->family == NVFP4_SM90_WGMMA && act == NVFP4_SM90_ACT_NVFP4;
    return 0;
}

int nvfp4_sm90_plan_linear(const nvfp4_sm90_device *dev, int64_t m, int64_t n, int64_t k, int k_slices,
                           int bf16_ok, nvfp4_sm90_plan *out)
{
    const int mode = SM90_INKERNEL_MODE;
    if (bf16_ok && mode != 0 && (mode > 0 || m <= NVFP4_SM90_INKERNEL_A_MAX_M)) {
        nvfp4_sm90_plan p;
        if (nvfp4_sm90_plan_gemm(dev, m, n, k, k_slices, NVFP4_SM90_ACT_NVFP4, &p) == 0) {
            const nvfp4_sm90_kernel *kern = &nvfp4_sm90_kernels[p.kernel];
            /* where it measured faster than the quantizer kernel + GEMM, or
             * wherever a twin is built and fits when forced */
            const int wanted = mode > 0 || (kern->family != NVFP4_SM90_REGM && k <= NVFP4_SM90_INKERNEL_A_MAX_K);
            if (NVFP4_SM90_IS_REG(kern) && wanted &&
                nvfp4_sm90_plan_gemm(dev, m, n, k, k_slices, NVFP4_SM90_ACT_BF16, out) == 0)
                return 0;
        }
    }
    return nvfp4_sm90_plan_gemm(dev, m, n, k, k_slices, NVFP4_SM90_ACT_QUANTIZED, out);
}
