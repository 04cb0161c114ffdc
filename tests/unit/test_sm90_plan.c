/* test_sm90_plan.c -- the sm_90a GEMM's planner (src/cuda/sm90/plan.c, plain
 * C: compiled into this test, so it runs in CPU-only builds too).
 *
 * What a plan must satisfy whatever the shape: a kernel that takes M (the
 * register kernels only up to their MT rows), enough CTAs x warps for every
 * weight row, shared memory and threads within the kernel's and the device's
 * limits, the ring depth each kernel's barriers need, the K-slice code where
 * a slice ends before K; every kernel of the table reachable; and the
 * choices read off the H200 bench (docs/KERNEL.md) for the four linears. */
#include "testlib.h"
#include "seed_linears.h"

#include "cuda/sm90/plan.c"

#define SMS 132
#define OPTIN 232448u  /* H100/H200: opt-in shared memory per block */
#define PER_SM 233472u /* H100/H200: shared memory per multiprocessor */

static const nvfp4_sm90_device H200 = {SMS, OPTIN, PER_SM};

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static int forced_kernel; /* check_plan: the plan is of a forced kernel */

static const nvfp4_sm90_kernel *kern_of(const nvfp4_sm90_plan *p) { return &nvfp4_sm90_kernels[p->kernel]; }

static void check_plan(const char *what, const nvfp4_sm90_device *dev, int64_t m, int64_t n, int64_t k, int slices,
                       int act, const nvfp4_sm90_plan *p)
{
    CHECKF(p->kernel >= 0 && p->kernel < nvfp4_sm90_num_kernels, "%s: kernel %d", what, p->kernel);
    if (p->kernel < 0 || p->kernel >= nvfp4_sm90_num_kernels) return;
    const nvfp4_sm90_kernel *v = kern_of(p);
    const int64_t groups = (k + 63) / 64, cps = cdiv(groups, slices < 1 ? 1 : slices);
    CHECKF(p->act == act && v->bf16 == (act == NVFP4_SM90_ACT_BF16), "%s: %s for activations %d", what, v->name, act);
    CHECKF(p->chunks_per_slice == cps, "%s: %d groups a slice, want %lld", what, p->chunks_per_slice, (long long)cps);
    CHECKF(p->smem <= dev->smem_optin, "%s: %zu bytes of shared memory", what, p->smem);
    CHECKF(p->grid >= 1, "%s: grid %d", what, p->grid);
    if (NVFP4_SM90_IS_REG(v)) {
        /* 8-row units (chains of 8 or 16 rows) balanced over the CTAs */
        const int rot = v->family == NVFP4_SM90_REGR, wa = v->family != NVFP4_SM90_REGM;
        const int u = wa ? 2 : 1, tw = rot ? 1 : v->r;
        const int64_t umax = v->family == NVFP4_SM90_REGM ? REGM_TMAX(v->r) : rot ? 2 * (REGR_WMAX / v->r) : REGW_TMAX;
        const int64_t units = n / 8;
        CHECKF(m <= v->mt, "%s: %s for M=%lld", what, v->name, (long long)m);
        CHECKF(cps >= groups || !rot, "%s: K slices on %s", what, v->name);
        CHECKF(p->tiles == units / u * u && p->grid <= units / u && u * cdiv(units / u, p->grid) == p->tiles_per_cta,
               "%s: %d CTAs, %d units each, for %lld units", what, p->grid, p->tiles_per_cta, (long long)units);
        CHECKF(p->tiles_per_cta >= u && p->tiles_per_cta <= umax && p->tiles_per_cta % u == 0, "%s: %d units per CTA",
               what, p->tiles_per_cta);
        CHECKF(p->grid <= dev->num_sms || p->tiles_per_cta == umax, "%s: %d CTAs", what, p->grid);
        const int threads_max = rot ? REGR_THREADS_MAX(v->mt) : wa ? REGW_THREADS_MAX(v->mt, tw) : REGM_THREADS_MAX(v->mt, tw);
        const int aw = rot ? REGR_AW(v->mt) : REGM_AW(v->mt, tw);
        const int64_t warps = rot ? (int64_t)(p->tiles_per_cta / u) * v->r : cdiv(p->tiles_per_cta / u, tw);
        CHECKF(p->stages >= 2 && p->stages <= REGM_MAX_STAGES && (!rot || p->stages % v->r == 0), "%s: %d stages",
               what, p->stages);
        CHECKF(p->mma_warps == warps && p->loaders >= 1 && p->loaders <= REGM_LWMAX &&
                   p->threads == 32 * (p->loaders + aw + p->mma_warps) && p->threads <= threads_max,
               "%s: %d MMA warps, %d threads for %d units", what, p->mma_warps, p->threads, p->tiles_per_cta);
        const size_t us = (size_t)p->tiles_per_cta, mt = (size_t)v->mt;
        const size_t stage = (wa ? REGW_STAGE_BYTES(mt, us) : REGM_STAGE_BYTES(mt, us)) +
                             (v->bf16 ? REGM_XBOX_BYTES((size_t)m) : 0);
        const size_t fixed = (wa ? REGW_SMEM(mt, us, 0) : REGM_SMEM(mt, us, 0)) + (rot ? REGR_SLOT_BYTES(mt, us) : 0) +
                             (v->bf16 ? REGM_QTAB_BYTES : 0);
        CHECKF(p->smem == fixed + (size_t)p->stages * stage, "%s: smem formula", what);
        /* activation warps taking whole chunks: a divisor of the ring's depth */
        if (v->bf16 || (rot && v->mt >= 16))
            CHECKF(p->act_rot >= 1 && p->act_rot <= aw && p->stages % p->act_rot == 0, "%s: act_rot %d of %d stages",
                   what, p->act_rot, p->stages);
        else
            CHECKF(p->act_rot == 0, "%s: act_rot %d", what, p->act_rot);
        CHECKF(!p->prepass, "%s: a pre-pass before a register kernel", what);
        return;
    }
    const int ksub = NVFP4_SM90_KSUB(v->mt, v->nc);
    /* the slice code where a slice ends before K (a forced kernel may carry it anyway) */
    CHECKF(cps < groups ? v->sliced : !v->sliced || forced_kernel, "%s: %s with %lld of %lld groups a slice", what,
           v->name, (long long)cps, (long long)groups);
    CHECKF(p->tiles == cdiv(n, 64 * (int64_t)v->nc) * cdiv(m, v->mt), "%s: %lld tiles", what, (long long)p->tiles);
    CHECKF(p->grid <= p->tiles && p->stages >= 2 && p->threads == 128 * (v->nc + 1), "%s: grid %d, %d stages", what,
           p->grid, p->stages);
    CHECKF(!(v->mt > 64 && v->mt <= NVFP4_SM90_PAIR_MAX_BN) || p->stages >= 3 * (3 - ksub),
           "%s: %d stages for the chunk pairs", what, p->stages);
    CHECKF(p->prepass == (act == NVFP4_SM90_ACT_NVFP4), "%s: pre-pass %d for activations %d", what, p->prepass, act);
    CHECKF(p->act3d == (ksub > 1 && k >= 64), "%s: act3d %d", what, p->act3d);
    CHECKF(p->sk_tile0 >= 0 && p->sk_tile0 <= p->tiles, "%s: stream-K from tile %lld of %lld", what,
           (long long)p->sk_tile0, (long long)p->tiles);
    if (p->sk_tile0 < p->tiles) {
        /* stream-K: whole data-parallel waves, then between one and two
         * grids of tiles (each split at most once), on a capable tile,
         * within the workspace's slots */
        const int64_t rest = p->tiles - p->sk_tile0;
        CHECKF(NVFP4_SM90_SK_TILE(v->mt, v->nc) && slices <= 1 && m > NVFP4_SM90_SK_MIN_M &&
                   p->grid <= NVFP4_SM90_SK_MAX_CTAS,
               "%s: stream-K on %s, S=%d, %d CTAs", what, v->name, slices, p->grid);
        CHECKF(p->sk_tile0 % p->grid == 0 && rest >= p->grid && rest < 2 * p->grid,
               "%s: stream-K tiles [%lld, %lld) on %d CTAs", what, (long long)p->sk_tile0, (long long)p->tiles,
               p->grid);
    }
}

static const int64_t MS[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 100, 128, 129, 512, 1409, 2048, 8192};
#define NMS ((int)(sizeof MS / sizeof MS[0]))

int main(void)
{
    nvfp4_sm90_plan p;
    char what[128];
    TEST("the kernel table: wgmma rows first, unique rows, every row reachable") {
        int seen_reg = 0;
        for (int i = 0; i < nvfp4_sm90_num_kernels; i++) {
            const nvfp4_sm90_kernel *x = &nvfp4_sm90_kernels[i];
            if (x->family != NVFP4_SM90_WGMMA) seen_reg = 1;
            CHECKF(seen_reg == (i >= nvfp4_sm90_num_wgmma), "row %d (%s) out of order", i, x->name);
            for (int j = 0; j < i; j++) {
                const nvfp4_sm90_kernel *y = &nvfp4_sm90_kernels[j];
                CHECKF(x->family != y->family || x->mt != y->mt || x->nc != y->nc || x->r != y->r ||
                           x->bf16 != y->bf16 || x->sliced != y->sliced,
                       "rows %d and %d (%s, %s) are the same kernel", j, i, y->name, x->name);
            }
        }
        /* every row is the plan of some shape on some device the rules know */
        static const int sms_list[] = {132, 114, 78, 66, 16};
        static const int64_t ns[] = {2048, 4096, 5376, 7168, 8192, 14336, 21504, 28672, 57344};
        static const int64_t ks[] = {5376, 7168, 14336};
        int reached[64] = {0};
        CHECK(nvfp4_sm90_num_kernels <= 64);
        for (int si = 0; si < 5; si++)
            for (int ni = 0; ni < 9; ni++)
                for (int mi = 0; mi < NMS; mi++)
                    for (int slices = 1; slices <= 2; slices++)
                        for (int ki = 0; ki < 3; ki++) {
                            const nvfp4_sm90_device d = {sms_list[si], OPTIN, PER_SM};
                            if (nvfp4_sm90_plan_gemm(&d, MS[mi], ns[ni], ks[ki], slices, NVFP4_SM90_ACT_NVFP4, &p) == 0)
                                reached[p.kernel] = 1;
                            if (nvfp4_sm90_plan_linear(&d, MS[mi], ns[ni], ks[ki], slices, 1, &p) == 0)
                                reached[p.kernel] = 1;
                        }
        for (int i = 0; i < nvfp4_sm90_num_kernels; i++)
            CHECKF(reached[i], "%s: no shape plans it", nvfp4_sm90_kernels[i].name);
    }
    TEST("every plan is sound") {
        static const int acts[] = {NVFP4_SM90_ACT_NVFP4, NVFP4_SM90_ACT_QUANTIZED};
        for (int li = 0; li < 4; li++)
            for (int mi = 0; mi < NMS; mi++)
                for (int slices = 0; slices <= 4; slices++)
                    for (int ai = 0; ai < 2; ai++) {
                        snprintf(what, sizeof what, "%s M=%lld S=%d act %d", SEED_LINEARS[li].name, (long long)MS[mi], slices,
                                 acts[ai]);
                        const int rc = nvfp4_sm90_plan_gemm(&H200, MS[mi], SEED_LINEARS[li].n, SEED_LINEARS[li].k, slices, acts[ai], &p);
                        CHECKF(rc == 0, "%s: no plan", what);
                        if (rc == 0) check_plan(what, &H200, MS[mi], SEED_LINEARS[li].n, SEED_LINEARS[li].k, slices, acts[ai], &p);
                    }
        /* odd shapes: N not a multiple of a warp's rows, tiny N and K, M past
         * 2^20, K shorter than a chunk */
        static const int64_t odd[][3] = {{1, 16, 1024},     {5, 48, 1024},   {13, 2064, 1024}, {16, 16400, 1024},
                                         {1, 65536, 1024},  {3, 1 << 20, 64}, {40, 16, 32},     {300, 464, 448},
                                         {1 << 20, 16, 32}, {129, 208, 96}};
        for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
            for (int slices = 1; slices <= 3; slices++) {
                snprintf(what, sizeof what, "M=%lld N=%lld K=%lld S=%d", (long long)odd[i][0], (long long)odd[i][1],
                         (long long)odd[i][2], slices);
                const int rc = nvfp4_sm90_plan_gemm(&H200, odd[i][0], odd[i][1], odd[i][2], slices, NVFP4_SM90_ACT_NVFP4, &p);
                CHECKF(rc == 0, "%s: no plan", what);
                if (rc == 0) check_plan(what, &H200, odd[i][0], odd[i][1], odd[i][2], slices, NVFP4_SM90_ACT_NVFP4, &p);
            }
        /* a device with less shared memory and fewer SMs still gets sound plans or none */
        const nvfp4_sm90_device small = {16, 101376, 102400};
        for (int li = 0; li < 4; li++)
            for (int mi = 0; mi < NMS; mi++) {
                snprintf(what, sizeof what, "small device %s M=%lld", SEED_LINEARS[li].name, (long long)MS[mi]);
                if (nvfp4_sm90_plan_gemm(&small, MS[mi], SEED_LINEARS[li].n, SEED_LINEARS[li].k, 1, NVFP4_SM90_ACT_NVFP4, &p) == 0)
                    check_plan(what, &small, MS[mi], SEED_LINEARS[li].n, SEED_LINEARS[li].k, 1, NVFP4_SM90_ACT_NVFP4, &p);
            }
        CHECK(nvfp4_sm90_plan_gemm(&H200, 0, 5376, 7168, 1, NVFP4_SM90_ACT_NVFP4, &p) == -1);
        CHECK(nvfp4_sm90_plan_gemm(&H200, 1, 0, 7168, 1, NVFP4_SM90_ACT_NVFP4, &p) == -1);
    }
    TEST("forced kernels: sound, or refused when they cannot take the shape") {
        for (int v = 0; v < nvfp4_sm90_num_kernels; v++)
            for (int mi = 0; mi < NMS; mi++)
                for (int slices = 1; slices <= 2; slices++) {
                    const nvfp4_sm90_kernel *x = &nvfp4_sm90_kernels[v];
                    nvfp4_sm90_force_kernel(v);
                    const int rc = nvfp4_sm90_plan_gemm(&H200, MS[mi], 5376, 7168, slices, NVFP4_SM90_ACT_NVFP4, &p);
                    nvfp4_sm90_force_kernel(-1);
                    /* the twin of a BF16 kernel for NVFP4 activations; K
                     * slices: not on REGR, the wgmma tiles with bn = 64 only */
                    const int refuse = (NVFP4_SM90_IS_REG(x) && MS[mi] > x->mt) ||
                                       (slices > 1 && (x->family == NVFP4_SM90_REGR ||
                                                       (x->family == NVFP4_SM90_WGMMA && x->mt > 64)));
                    snprintf(what, sizeof what, "%s M=%lld S=%d", x->name, (long long)MS[mi], slices);
                    CHECKF(refuse ? rc == -1 : rc == 0, "%s: rc %d", what, rc);
                    if (rc != 0) continue;
                    const nvfp4_sm90_kernel *y = kern_of(&p);
                    CHECKF(y->family == x->family && y->mt == x->mt && y->nc == x->nc && y->r == x->r && y->bf16 == 0,
                           "%s: planned %s", what, y->name);
                    forced_kernel = 1;
                    check_plan(what, &H200, MS[mi], 5376, 7168, slices, NVFP4_SM90_ACT_NVFP4, &p);
                    forced_kernel = 0;
                }
        nvfp4_sm90_force_kernel(1000); /* out of range: the rules again */
        CHECK(nvfp4_sm90_plan_gemm(&H200, 1, 5376, 7168, 1, NVFP4_SM90_ACT_NVFP4, &p) == 0 &&
              kern_of(&p)->family == NVFP4_SM90_REGR);
        nvfp4_sm90_force_kernel(-1);
    }
    TEST("the choices read off the H200 bench") {
#define RG NVFP4_SM90_REGM
#define RW NVFP4_SM90_REGW
#define RR NVFP4_SM90_REGR
#define WG NVFP4_SM90_WGMMA
        /* M <= 16: REGR with 3 (M <= 8) or 2 warps a chain for attn-out and
         * FC2 (2.55 16-row chains per SM), REGW for FC1 (14 MMA warps against
         * REGM's 7), REGM for QKV */
        static const struct { int lin; int64_t m; int family, mt, nc, r; } want[] = {
            {0, 1, RG, 8, 0, 2},      {0, 16, RG, 16, 0, 2},    {1, 1, RR, 8, 0, 3},     {1, 16, RR, 16, 0, 2},
            {2, 1, RW, 8, 0, 1},      {2, 16, RW, 16, 0, 1},    {3, 1, RR, 8, 0, 3},     {3, 32, RG, 32, 0, 1},
            {3, 8, RR, 8, 0, 3},      {0, 8, RG, 8, 0, 2},      {2, 8, RW, 8, 0, 1},     {3, 16, RR, 16, 0, 2},
            {0, 128, WG, 128, 2, 0},  {1, 128, WG, 128, 1, 0},  {2, 128, WG, 128, 2, 0}, {1, 64, WG, 64, 1, 0},
            /* the last wave: 42 x 8 tiles of 128 x 256 by stream-K (2.55 waves
             * and a split per CTA) rather than 42 x 9 of 128 x 232 (3 waves),
             * but for FC2, whose stream-K operands (85 MB) overflow L2 */
            {3, 2048, WG, 232, 2, 0}, {1, 2048, WG, 256, 2, 0}, {2, 2048, WG, 256, 2, 0}, {0, 2048, WG, 256, 2, 0},
        };
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            const int rc = nvfp4_sm90_plan_gemm(&H200, want[i].m, SEED_LINEARS[want[i].lin].n, SEED_LINEARS[want[i].lin].k, 1,
                                                NVFP4_SM90_ACT_NVFP4, &p);
            const nvfp4_sm90_kernel *x = rc == 0 ? kern_of(&p) : NULL;
            CHECKF(x && x->family == want[i].family && x->mt == want[i].mt && x->nc == want[i].nc && x->r == want[i].r,
                   "%s M=%lld: got %s", SEED_LINEARS[want[i].lin].name, (long long)want[i].m, x ? x->name : "none");
        }
        /* K slices: REGR never (no slice fold: its chunks go round its warps),
         * the wgmma kernel at bn = 64 with the slice code */
        CHECK(nvfp4_sm90_plan_gemm(&H200, 1, 5376, 14336, 2, NVFP4_SM90_ACT_NVFP4, &p) == 0 &&
              kern_of(&p)->family != NVFP4_SM90_REGR);
        CHECK(nvfp4_sm90_plan_gemm(&H200, 2048, 5376, 14336, 3, NVFP4_SM90_ACT_NVFP4, &p) == 0 && kern_of(&p)->mt == 64 &&
              kern_of(&p)->nc == 1 && kern_of(&p)->sliced && p.chunks_per_slice == 75);
        /* ... but one slice covering K is one chain: the kernel without it */
        CHECK(nvfp4_sm90_plan_gemm(&H200, 2048, 5376, 64, 3, NVFP4_SM90_ACT_NVFP4, &p) == 0 && !kern_of(&p)->sliced);
#undef RG
#undef RW
#undef RR
#undef WG
        /* one wave: fc1 at M = 1 (1792 16-row chains) on 132 CTAs of 14 (28 units), one per MMA warp */
        CHECK(nvfp4_sm90_plan_gemm(&H200, 1, 28672, 5376, 1, NVFP4_SM90_ACT_NVFP4, &p) == 0 && p.grid == SMS &&
              p.tiles_per_cta == 28 && p.mma_warps == 14 && kern_of(&p)->family == NVFP4_SM90_REGW);
        /* stream-K where the last wave is partial: attn-out at M = 2048 (336
         * tiles: 132 data-parallel, 204 shared out), QKV at M = 128 (168)
         * and 2048 (1344: 1188 data-parallel); none where tiles are fewer
         * than SMs (attn-out at M = 128), where its operands overflow L2
         * (FC2 at M = 2048) or when switched off */
        CHECK(nvfp4_sm90_plan_gemm(&H200, 2048, 5376, 7168, 1, NVFP4_SM90_ACT_NVFP4, &p) == 0 && p.grid == SMS &&
              p.tiles == 336 && p.sk_tile0 == 132);
        CHECK(nvfp4_sm90_plan_gemm(&H200, 128, 21504, 5376, 1, NVFP4_SM90_ACT_NVFP4, &p) == 0 && p.grid == SMS &&
              p.tiles == 168 && p.sk_tile0 == 0);
        CHECK(nvfp4_sm90_plan_gemm(&H200, 128, 28672, 5376, 1, NVFP4_SM90_ACT_NVFP4, &p) == 0 && p.grid == SMS &&
              p.tiles == 224 && p.sk_tile0 == 0); /* FC1: each weight read once, not bounded by L2 */
        CHECK(nvfp4_sm90_plan_gemm(&H200, 128, 5376, 7168, 1, NVFP4_SM90_ACT_NVFP4, &p) == 0 && p.sk_tile0 == p.tiles);
        CHECK(nvfp4_sm90_plan_gemm(&H200, 2048, 5376, 14336, 1, NVFP4_SM90_ACT_NVFP4, &p) == 0 && p.sk_tile0 == p.tiles);
        CHECK(nvfp4_sm90_plan_gemm(&H200, 2048, 21504, 5376, 1, NVFP4_SM90_ACT_NVFP4, &p) == 0 && p.tiles == 1344 &&
              p.sk_tile0 == 1188);
        /* no stream-K on devices past the workspace's CTAs */
        const nvfp4_sm90_device big = {200, OPTIN, PER_SM};
        CHECK(nvfp4_sm90_plan_gemm(&big, 2048, 5376, 7168, 1, NVFP4_SM90_ACT_NVFP4, &p) == 0 && p.sk_tile0 == p.tiles);
        nvfp4_sm90_force_stream_k(-1);
        CHECK(nvfp4_sm90_plan_gemm(&H200, 2048, 5376, 7168, 1, NVFP4_SM90_ACT_NVFP4, &p) == 0 && p.sk_tile0 == p.tiles &&
              kern_of(&p)->mt == 232);
        /* forced on a grid: taken where it can apply, refused elsewhere */
        nvfp4_sm90_force_stream_k(5);
        nvfp4_sm90_force_kernel(find_kernel(NVFP4_SM90_WGMMA, 128, 2, 0, 0, 0));
        CHECK(nvfp4_sm90_plan_gemm(&H200, 300, 464, 448, 1, NVFP4_SM90_ACT_NVFP4, &p) == 0 && p.grid == 5 &&
              p.tiles == 12 && p.sk_tile0 == 5);
        CHECK(nvfp4_sm90_plan_gemm(&H200, 64, 464, 448, 1, NVFP4_SM90_ACT_NVFP4, &p) == -1); /* M <= 64 */
        CHECK(nvfp4_sm90_plan_gemm(&H200, 300, 464, 448, 2, NVFP4_SM90_ACT_NVFP4, &p) == -1); /* K slices */
        nvfp4_sm90_force_kernel(find_kernel(NVFP4_SM90_WGMMA, 128, 1, 0, 0, 0));
        CHECK(nvfp4_sm90_plan_gemm(&H200, 300, 464, 448, 1, NVFP4_SM90_ACT_NVFP4, &p) == -1); /* one consumer */
        nvfp4_sm90_force_kernel(find_kernel(NVFP4_SM90_WGMMA, 256, 2, 0, 0, 0));
        CHECK(nvfp4_sm90_plan_gemm(&H200, 129, 208, 96, 1, NVFP4_SM90_ACT_NVFP4, &p) == -1); /* 2 tiles < 5 CTAs */
        nvfp4_sm90_force_kernel(-1);
        CHECK(nvfp4_sm90_plan_gemm(&H200, 1, 5376, 7168, 1, NVFP4_SM90_ACT_NVFP4, &p) == -1); /* a register kernel */
        nvfp4_sm90_force_stream_k(0);
    }
    TEST("the fused linear: the in-kernel A producer where it measured faster") {
        /* M <= 2 on REGW and REGR with K <= 8192: attn-out (REGR) and FC1
         * (REGW); not FC2 (K = 14336), not QKV (REGM), not M = 3 */
        static const struct { int lin; int64_t m; int want; } cases[] = {
            {1, 1, 1}, {1, 2, 1}, {2, 1, 1}, {2, 2, 1}, {3, 1, 0}, {0, 1, 0}, {1, 3, 0}, {2, 16, 0}, {1, 128, 0}};
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            const int64_t m = cases[i].m, n = SEED_LINEARS[cases[i].lin].n, k = SEED_LINEARS[cases[i].lin].k;
            snprintf(what, sizeof what, "linear %s M=%lld", SEED_LINEARS[cases[i].lin].name, (long long)m);
            const int rc = nvfp4_sm90_plan_linear(&H200, m, n, k, 1, 1, &p);
            const int act = cases[i].want ? NVFP4_SM90_ACT_BF16 : NVFP4_SM90_ACT_QUANTIZED;
            CHECKF(rc == 0 && p.act == act, "%s: rc %d, activations %d", what, rc, p.act);
            if (rc == 0) check_plan(what, &H200, m, n, k, 1, act, &p);
            /* the same kernel family as the prequantized GEMM's */
            nvfp4_sm90_plan q;
            CHECKF(nvfp4_sm90_plan_gemm(&H200, m, n, k, 1, NVFP4_SM90_ACT_NVFP4, &q) == 0 &&
                       kern_of(&q)->family == kern_of(&p)->family && kern_of(&q)->r == kern_of(&p)->r,
                   "%s: %s against %s", what, kern_of(&p)->name, kern_of(&q)->name);
        }
        /* x's rows not 16-byte aligned: the quantizer first */
        CHECK(nvfp4_sm90_plan_linear(&H200, 1, 5376, 7168, 1, 0, &p) == 0 && p.act == NVFP4_SM90_ACT_QUANTIZED);
        /* forced: wherever a twin is built and fits (REGR at M = 8, FC2's K),
         * never on the REGM kernels (none is built); off: never */
        nvfp4_sm90_force_inkernel_a(1);
        CHECK(nvfp4_sm90_plan_linear(&H200, 8, 5376, 14336, 1, 1, &p) == 0 && p.act == NVFP4_SM90_ACT_BF16);
        CHECK(nvfp4_sm90_plan_linear(&H200, 1, 21504, 5376, 1, 1, &p) == 0 && p.act == NVFP4_SM90_ACT_QUANTIZED);
        CHECK(nvfp4_sm90_plan_linear(&H200, 9, 5376, 7168, 1, 1, &p) == 0 && p.act == NVFP4_SM90_ACT_QUANTIZED);
        nvfp4_sm90_force_inkernel_a(0);
        CHECK(nvfp4_sm90_plan_linear(&H200, 1, 5376, 7168, 1, 1, &p) == 0 && p.act == NVFP4_SM90_ACT_QUANTIZED);
        nvfp4_sm90_force_inkernel_a(-1);
    }
    TEST("loader warps: planned one, forced one or two on REGM and REGW, never on REGR") {
        nvfp4_sm90_force_loaders(2);
        CHECK(nvfp4_sm90_plan_gemm(&H200, 1, 21504, 5376, 1, NVFP4_SM90_ACT_NVFP4, &p) == 0 && p.loaders == 2);
        CHECK(nvfp4_sm90_plan_gemm(&H200, 1, 5376, 7168, 1, NVFP4_SM90_ACT_NVFP4, &p) == 0 && p.loaders == REGR_LOADERS);
        nvfp4_sm90_force_loaders(0);
        CHECK(nvfp4_sm90_plan_gemm(&H200, 1, 21504, 5376, 1, NVFP4_SM90_ACT_NVFP4, &p) == 0 && p.loaders == 1);
    }
    return test_summary("sm90_plan");
}
