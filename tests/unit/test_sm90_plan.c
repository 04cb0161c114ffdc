/* test_sm90_plan.c -- the H200 GEMM's planner (src/cuda/sm90_heuristics.c,
 * plain C: compiled into this test, so it runs in CPU-only builds too).
 *
 * What a plan must satisfy whatever the shape: a variant that takes M (the
 * small-M kernel only up to its MT rows), enough CTAs x warps for every work
 * item, shared memory within the device's opt-in limit, and tiles with the
 * second accumulator set when k_slices > 1.  And the choices read off the
 * H200 bench (docs/KERNEL.md) for the seed's linears. */
#include "testlib.h"

#include "cuda/sm90_heuristics.c"

#define SMS 132
#define OPTIN 232448u  /* H200: opt-in shared memory per block */
#define PER_SM 233472u /* H200: shared memory per multiprocessor */

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static const struct { const char *name; int64_t n, k; } LIN[4] = {
    {"qkv", 21504, 5376}, {"attn_out", 5376, 7168}, {"fc1", 28672, 5376}, {"fc2", 5376, 14336}};

static void check_plan(const char *what, int64_t m, int64_t n, int slices, const nvfp4_sm90_plan *p)
{
    const nvfp4_sm90_variant *v = &nvfp4_sm90_variants[p->variant];
    CHECKF(p->variant >= 0 && p->variant < NVFP4_SM90_NUM_VARIANTS, "%s: variant %d", what, p->variant);
    CHECKF(p->smem <= OPTIN, "%s: %zu bytes of shared memory", what, p->smem);
    CHECKF(p->grid >= 1, "%s: grid %d", what, p->grid);
    if (v->kind == NVFP4_SM90_SPLIT || v->kind == NVFP4_SM90_REGM || v->kind == NVFP4_SM90_REGW ||
        v->kind == NVFP4_SM90_REGR) {
        /* weight tiles (split: 16 rows; register kernels: chains of 8 or 16
         * rows), balanced over the CTAs; the register kernels count 8-row
         * units in tiles and tiles_per_cta */
        const int regm = v->kind != NVFP4_SM90_SPLIT, rot = v->kind == NVFP4_SM90_REGR;
        const int u = v->kind == NVFP4_SM90_REGW || rot ? 2 : 1;
        const int64_t tmax = v->kind == NVFP4_SM90_SPLIT ? SPLIT_TMAX(v->bn)
                             : v->kind == NVFP4_SM90_REGM ? REGM_TMAX(v->r)
                             : rot                        ? 2 * (REGR_WMAX / v->r)
                                                          : REGW_TMAX(v->r);
        const int64_t tiles = n / (v->kind == NVFP4_SM90_SPLIT ? 16 : 8);
        CHECKF(m <= v->bn, "%s: kind %d with MT=%d for M=%lld", what, v->kind, v->bn, (long long)m);
        CHECKF(p->tiles == tiles && p->grid <= tiles / u && u * cdiv(tiles / u, p->grid) == p->tiles_per_cta,
               "%s: %d CTAs, %d tiles each, for %lld tiles", what, p->grid, p->tiles_per_cta,
               (long long)tiles);
        CHECKF(p->tiles_per_cta >= u && p->tiles_per_cta <= tmax && p->tiles_per_cta % u == 0, "%s: %d tiles per CTA",
               what, p->tiles_per_cta);
        CHECKF(p->grid <= SMS || p->tiles_per_cta == tmax, "%s: %d CTAs", what, p->grid);
        if (regm) {
            const int threads_max = v->kind == NVFP4_SM90_REGM ? REGM_THREADS_MAX(v->bn, v->r)
                                    : rot                        ? REGR_THREADS_MAX(v->bn)
                                                                 : REGW_THREADS_MAX(v->bn, v->r);
            const int tw = rot ? 1 : v->r; /* chains per MMA warp */
            const int64_t warps = rot ? (int64_t)(p->tiles_per_cta / u) * v->r : cdiv(p->tiles_per_cta / u, tw);
            CHECKF(p->stages >= 2 && p->stages <= REGM_MAX_STAGES && (!rot || p->stages % v->r == 0),
                   "%s: %d stages", what, p->stages);
            CHECKF(p->mma_warps == warps && p->loaders >= 1 && p->loaders <= REGM_LWMAX &&
                       32 * (p->loaders + (rot ? REGR_AW(v->bn) : REGM_AW(v->bn, tw)) + p->mma_warps) <= threads_max,
                   "%s: %d MMA warps for %d tiles", what, p->mma_warps, p->tiles_per_cta);
            CHECKF(p->smem == (u == 1 ? REGM_SMEM((size_t)v->bn, (size_t)p->tiles_per_cta, (size_t)p->stages)
                                      : REGW_SMEM((size_t)v->bn, (size_t)p->tiles_per_cta, (size_t)p->stages)) +
                                  (rot ? REGR_SLOT_BYTES((size_t)v->bn, (size_t)p->tiles_per_cta) : 0),
                   "%s: smem formula", what);
            return;
        }
        CHECKF(p->stages >= 2 && p->stages <= SPLIT_MAX_RAW && p->frag_stages >= 2 &&
                   p->frag_stages <= SPLIT_MAX_FRAG,
               "%s: %d raw, %d fragment stages", what, p->stages, p->frag_stages);
        CHECKF(p->smem == SPLIT_SMEM((size_t)v->bn, (size_t)p->tiles_per_cta, (size_t)p->stages,
                                     (size_t)p->frag_stages),
               "%s: smem formula", what);
    } else if (v->kind == NVFP4_SM90_SMALLM) {
        const int64_t items = cdiv(n, 8 * (int64_t)v->r);
        CHECKF(m <= v->bn, "%s: small-M kernel with MT=%d for M=%lld", what, v->bn, (long long)m);
        CHECKF(p->tiles == items && (int64_t)p->grid * p->stages >= items &&
                   (int64_t)(p->grid - 1) * p->stages < items,
               "%s: %d CTAs x %d warps for %lld items", what, p->grid, p->stages, (long long)items);
        CHECKF(p->stages >= 1 && p->stages <= NVFP4_SM90_SMALL_WMAX(v->r), "%s: %d warps", what,
               p->stages);
        CHECKF(p->smem == NVFP4_SM90_SMALL_SMEM((size_t)v->bn, (size_t)v->r, (size_t)p->stages),
               "%s: smem formula", what);
    } else {
        CHECKF(p->tiles == cdiv(n, 64 * (int64_t)v->nc) * cdiv(m, v->bn), "%s: %lld tiles", what,
               (long long)p->tiles);
        CHECKF(p->grid <= p->tiles && p->stages >= 2, "%s: grid %d, %d stages", what, p->grid,
               p->stages);
        CHECKF(slices <= 1 || NVFP4_SM90_TAKES_SLICES(v), "%s: k_slices %d on kind %d bn=%d", what, slices,
               v->kind, v->bn);
        if (v->kind == NVFP4_SM90_SS)
            CHECKF(p->grid <= SMS && p->stages <= SS_MAX_STAGES &&
                       p->smem == SS_SMEM((size_t)v->bn, (size_t)v->nc, (size_t)p->stages),
                   "%s: SS grid %d, %d stages, %zu bytes", what, p->grid, p->stages, p->smem);
        CHECKF(p->sk_tile0 >= 0 && p->sk_tile0 <= p->tiles, "%s: stream-K from tile %lld of %lld", what,
               (long long)p->sk_tile0, (long long)p->tiles);
        if (p->sk_tile0 < p->tiles) {
            /* stream-K: whole data-parallel waves, then between one and two
             * grids of tiles (each split at most once), on a capable tile,
             * within the workspace's slots */
            const int64_t rest = p->tiles - p->sk_tile0;
            CHECKF(v->kind == NVFP4_SM90_WGMMA && NVFP4_SM90_SK_TILE(v->bn, v->nc) && slices <= 1 &&
                       m > NVFP4_SM90_SK_MIN_M && p->grid <= NVFP4_SM90_SK_MAX_CTAS,
                   "%s: stream-K on bn=%d nc=%d, S=%d, %d CTAs", what, v->bn, v->nc, slices, p->grid);
            CHECKF(p->sk_tile0 % p->grid == 0 && rest >= p->grid && rest < 2 * p->grid,
                   "%s: stream-K tiles [%lld, %lld) on %d CTAs", what, (long long)p->sk_tile0,
                   (long long)p->tiles, p->grid);
        }
    }
}

int main(void)
{
    static const int64_t ms[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 100, 128, 129, 512, 2048, 8192};
    TEST("every plan is sound") {
        for (int li = 0; li < 4; li++)
            for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
                for (int slices = 1; slices <= 3; slices += 2) {
                    nvfp4_sm90_plan p;
                    char what[96];
                    snprintf(what, sizeof what, "%s M=%lld S=%d", LIN[li].name, (long long)ms[mi], slices);
                    int rc = nvfp4_sm90_plan_gemm(ms[mi], LIN[li].n, LIN[li].k, slices, SMS, OPTIN,
                                                  PER_SM, -1, &p);
                    CHECKF(rc == 0, "%s: no plan", what);
                    if (rc == 0) check_plan(what, ms[mi], LIN[li].n, slices, &p);
                }
        /* odd shapes: N not a multiple of a warp's rows, tiny N, M past 2^20 */
        static const int64_t odd[][2] = {{1, 16}, {5, 48}, {13, 2064}, {16, 16400}, {1, 65536}, {3, 1 << 20}};
        for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
            nvfp4_sm90_plan p;
            char what[96];
            snprintf(what, sizeof what, "M=%lld N=%lld", (long long)odd[i][0], (long long)odd[i][1]);
            int rc = nvfp4_sm90_plan_gemm(odd[i][0], odd[i][1], 1024, 1, SMS, OPTIN, PER_SM, -1, &p);
            CHECKF(rc == 0, "%s: no plan", what);
            if (rc == 0) check_plan(what, odd[i][0], odd[i][1], 1, &p);
        }
    }
    TEST("forced variants: sound, or refused when they cannot take the shape") {
        for (int v = 0; v < NVFP4_SM90_NUM_VARIANTS; v++)
            for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
                for (int slices = 1; slices <= 2; slices++) {
                    const nvfp4_sm90_variant *x = &nvfp4_sm90_variants[v];
                    nvfp4_sm90_plan p;
                    int rc = nvfp4_sm90_plan_gemm(ms[mi], 5376, 7168, slices, SMS, OPTIN, PER_SM, v, &p);
                    const int refuse = (NVFP4_SM90_IS_SMALL(x) && ms[mi] > x->bn) || (slices > 1 && !NVFP4_SM90_TAKES_SLICES(x));
                    char what[96];
                    snprintf(what, sizeof what, "variant %d M=%lld S=%d", v, (long long)ms[mi], slices);
                    CHECKF(refuse ? rc == -1 : rc == 0 && p.variant == v, "%s: rc %d", what, rc);
                    if (rc == 0) check_plan(what, ms[mi], 5376, slices, &p);
                }
    }
    TEST("the choices read off the H200 bench") {
#define RG NVFP4_SM90_REGM
#define RW NVFP4_SM90_REGW
#define RR NVFP4_SM90_REGR
#define WG NVFP4_SM90_WGMMA
        /* M <= 16 (twelfth session, gemm_variants): REGR with 3 (M <= 8) or 2
         * warps a chain for attn-out and FC2 (2.55 16-row chains per SM),
         * REGW for FC1 (14 MMA warps against REGM's 7), REGM for QKV */
        static const struct { int lin; int64_t m; int kind, bn, nc, r; } want[] = {
            {0, 1, RG, 8, 0, 2},      {0, 16, RG, 16, 0, 2},    {1, 1, RR, 8, 0, 3},    {1, 16, RR, 16, 0, 2},
            {2, 1, RW, 8, 0, 1},      {2, 16, RW, 16, 0, 1},    {3, 1, RR, 8, 0, 3},    {3, 32, RG, 32, 0, 1},
            {3, 8, RR, 8, 0, 3},      {0, 8, RG, 8, 0, 2},      {2, 8, RW, 8, 0, 1},      {3, 16, RR, 16, 0, 2},
            {0, 128, WG, 128, 2, 0},  {1, 128, WG, 128, 1, 0},  {2, 128, WG, 128, 2, 0}, {1, 64, WG, 64, 1, 0},
            /* the last wave: 42 x 8 tiles of 128 x 256 by stream-K (2.55 waves
             * and a split per CTA) rather than 42 x 9 of 128 x 232 (3 waves),
             * but for FC2, whose stream-K operands (85 MB) overflow L2 */
            {3, 2048, WG, 232, 2, 0}, {1, 2048, WG, 256, 2, 0}, {2, 2048, WG, 256, 2, 0}, {0, 2048, WG, 256, 2, 0},
        };
#undef RG
#undef RW
#undef RR
#undef WG
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            nvfp4_sm90_plan p;
            int rc = nvfp4_sm90_plan_gemm(want[i].m, LIN[want[i].lin].n, LIN[want[i].lin].k, 1, SMS,
                                          OPTIN, PER_SM, -1, &p);
            const nvfp4_sm90_variant *x = rc == 0 ? &nvfp4_sm90_variants[p.variant] : NULL;
            CHECKF(x && x->kind == want[i].kind && x->bn == want[i].bn && x->nc == want[i].nc && x->r == want[i].r,
                   "%s M=%lld: got kind %d bn=%d nc=%d r=%d", LIN[want[i].lin].name, (long long)want[i].m,
                   x ? x->kind : -1, x ? x->bn : -1, x ? x->nc : -1, x ? x->r : -1);
        }
        /* one wave: fc1 at M = 1 (1792 16-row chains) on 132 CTAs of 14 (28 units), one per MMA warp */
        nvfp4_sm90_plan p;
        CHECK(nvfp4_sm90_plan_gemm(1, 28672, 5376, 1, SMS, OPTIN, PER_SM, -1, &p) == 0 && p.grid == SMS &&
              p.tiles_per_cta == 28 && p.mma_warps == 14 && nvfp4_sm90_variants[p.variant].kind == NVFP4_SM90_REGW);
        /* stream-K where the last wave is partial: attn-out at M = 2048 (336
         * tiles: 132 data-parallel, 204 shared out), QKV at M = 128 (168)
         * and 2048 (1344: 1188 data-parallel); none where tiles are fewer
         * than SMs (attn-out at M = 128), where its operands overflow L2
         * (FC2 at M = 2048) or when switched off */
        CHECK(nvfp4_sm90_plan_gemm(2048, 5376, 7168, 1, SMS, OPTIN, PER_SM, -1, &p) == 0 && p.grid == SMS &&
              p.tiles == 336 && p.sk_tile0 == 132);
        CHECK(nvfp4_sm90_plan_gemm(128, 21504, 5376, 1, SMS, OPTIN, PER_SM, -1, &p) == 0 && p.grid == SMS &&
              p.tiles == 168 && p.sk_tile0 == 0);
        CHECK(nvfp4_sm90_plan_gemm(128, 28672, 5376, 1, SMS, OPTIN, PER_SM, -1, &p) == 0 && p.grid == SMS &&
              p.tiles == 224 && p.sk_tile0 == 0); /* FC1: each weight read once, not bounded by L2 */
        CHECK(nvfp4_sm90_plan_gemm(128, 5376, 7168, 1, SMS, OPTIN, PER_SM, -1, &p) == 0 && p.sk_tile0 == p.tiles);
        CHECK(nvfp4_sm90_plan_gemm(2048, 5376, 14336, 1, SMS, OPTIN, PER_SM, -1, &p) == 0 && p.sk_tile0 == p.tiles);
        CHECK(nvfp4_sm90_plan_gemm(2048, 21504, 5376, 1, SMS, OPTIN, PER_SM, -1, &p) == 0 && p.tiles == 1344 &&
              p.sk_tile0 == 1188);
        nvfp4_sm90_force_stream_k(-1);
        CHECK(nvfp4_sm90_plan_gemm(2048, 5376, 7168, 1, SMS, OPTIN, PER_SM, -1, &p) == 0 && p.sk_tile0 == p.tiles &&
              nvfp4_sm90_variants[p.variant].bn == 232);
        /* forced on a grid: taken where it can apply, refused elsewhere */
        nvfp4_sm90_force_stream_k(5);
        CHECK(nvfp4_sm90_plan_gemm(300, 464, 448, 1, SMS, OPTIN, PER_SM, 6, &p) == 0 && p.grid == 5 && p.tiles == 12 &&
              p.sk_tile0 == 5);
        CHECK(nvfp4_sm90_plan_gemm(300, 464, 448, 1, SMS, OPTIN, PER_SM, 5, &p) == -1); /* 128 x 128, one consumer */
        CHECK(nvfp4_sm90_plan_gemm(64, 464, 448, 1, SMS, OPTIN, PER_SM, 6, &p) == -1);  /* M <= 64 */
        CHECK(nvfp4_sm90_plan_gemm(129, 208, 96, 1, SMS, OPTIN, PER_SM, 7, &p) == -1);  /* 2 tiles < 5 CTAs */
        CHECK(nvfp4_sm90_plan_gemm(300, 464, 448, 2, SMS, OPTIN, PER_SM, 6, &p) == -1); /* K slices */
        nvfp4_sm90_force_stream_k(0);
        /* k_slices > 1 never plans the REGR kernel (it has no slice fold) */
        CHECK(nvfp4_sm90_plan_gemm(1, 5376, 14336, 2, SMS, OPTIN, PER_SM, -1, &p) == 0 &&
              nvfp4_sm90_variants[p.variant].kind != NVFP4_SM90_REGR);
    }
    TEST("activation multicast only where a cluster's two CTAs share every activation box") {
        /* attn-out and FC2 at M = 64 and 128: 84 CTAs of one 64 x bn tile,
         * one activation tile: yes; QKV and FC1 at M = 128 (stream-K), M =
         * 2048 (several activation tiles), M <= 32 (register kernels), an
         * odd grid (85 tiles), bn = 8 (a half box of 4 rows is not 1024
         * bytes) and bn = 232 (116 rows): no */
        static const struct { int64_t m, n, k; int variant, want; } cases[] = {
            {128, 5376, 7168, -1, 1}, {128, 5376, 14336, -1, 1}, {64, 5376, 7168, -1, 1}, {100, 5376, 7168, -1, 1},
            {128, 21504, 5376, -1, 0}, {128, 28672, 5376, -1, 0}, {2048, 5376, 7168, -1, 0}, {1, 5376, 7168, -1, 0},
            {16, 5376, 14336, -1, 0}, {128, 5440, 7168, -1, 0}, {5, 464, 448, 0, 0}, {5, 464, 448, 1, 1},
            {200, 464, 448, 28, 0}, {129, 208, 96, 7, 1}};
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            nvfp4_sm90_plan p;
            const int rc = nvfp4_sm90_plan_gemm(cases[i].m, cases[i].n, cases[i].k, 1, SMS, OPTIN, PER_SM,
                                                cases[i].variant, &p);
            CHECKF(rc == 0 && nvfp4_sm90_plan_mcast(&p, cases[i].m) == cases[i].want,
                   "M=%lld N=%lld K=%lld variant %d: rc %d, multicast %d (want %d), tiles %lld, grid %d",
                   (long long)cases[i].m, (long long)cases[i].n, (long long)cases[i].k, cases[i].variant, rc,
                   rc == 0 ? nvfp4_sm90_plan_mcast(&p, cases[i].m) : -1, cases[i].want,
                   rc == 0 ? (long long)p.tiles : -1LL, rc == 0 ? p.grid : -1);
        }
    }
    return test_summary("sm90_plan");
}
