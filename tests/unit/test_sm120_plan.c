/* test_sm120_plan.c -- the sm120 GEMM's planner (src/cuda/sm120/plan.c,
 * plain C: compiled into this test, so it runs in CPU-only builds too).
 *
 * Every rule of plan.c: the shape by M alone, the warps and stages that fit
 * the shared memory (never above it, never fewer than two stages), stages
 * capped by K, the persistent grid, the K slices of the contract; the
 * arguments it refuses; and what any plan must satisfy whatever the shape
 * (sweeps over devices, M, N, K and slices). */
#include "testlib.h"
#include "seed_linears.h"

#include "cuda/sm120/plan.c"

#define GB10_SMS 48
#define SM120_SMEM 101376u /* sm_120 / sm_121: opt-in shared memory per block (99 KB) */

/* What every plan must satisfy. */
static void check_invariants(const char *what, int sms, size_t smem, int64_t m, int64_t n, int64_t k, int slices,
                             const nvfp4_sm120_plan *p)
{
    CHECKF(p->shape >= 0 && p->shape < NVFP4_SM120_NUM_SHAPES, "%s: shape %d", what, p->shape);
    CHECKF(p->fa == shapes[p->shape].fa && p->fb == shapes[p->shape].fb && p->kg == shapes[p->shape].kg,
           "%s: fa %d fb %d kg %d", what, p->fa, p->fb, p->kg);
    CHECKF(p->stage_bytes == (size_t)(16 * p->fa + 8 * p->fb) * (size_t)(36 * p->kg), "%s: stage %zu", what,
           p->stage_bytes);
    CHECKF(p->smem == (size_t)p->warps * (size_t)p->stages * p->stage_bytes && p->smem <= smem,
           "%s: %zu bytes of shared memory (limit %zu)", what, p->smem, smem);
    CHECKF(p->stages >= NVFP4_SM120_MIN_STAGES && p->stages <= NVFP4_SM120_MAX_STAGES, "%s: %d stages", what,
           p->stages);
    CHECKF(p->warps >= 1 && p->warps <= NVFP4_SM120_WARPS && p->block == 32 * p->warps, "%s: %d warps", what,
           p->warps);
    CHECKF(p->grid >= 1 && p->grid <= sms, "%s: grid %d for %d SMs", what, p->grid, sms);
    CHECKF(p->n_tiles == cdiv(n, 16 * p->fa) && p->m_tiles == cdiv(m, 8 * p->fb) &&
               p->units == p->n_tiles * p->m_tiles,
           "%s: tiles %lld x %lld", what, (long long)p->n_tiles, (long long)p->m_tiles);
    /* no CTA without a unit; all CTAs busy when there are enough units */
    CHECKF((int64_t)(p->grid - 1) * p->warps < p->units, "%s: grid %d x %d warps for %lld units", what, p->grid,
           p->warps, (long long)p->units);
    CHECKF(p->groups == cdiv(k, 64) && p->steps == cdiv(p->groups, p->kg), "%s: groups", what);
    CHECKF(p->group_slice == nvfp4_k_slice_elems(k, slices) / 64 && p->group_slice >= 1, "%s: group_slice %lld",
           what, (long long)p->group_slice);
    CHECKF(p->slices == cdiv(p->groups, p->group_slice) && (p->slices - 1) * p->group_slice < p->groups,
           "%s: %lld slices", what, (long long)p->slices);
}

int main(void)
{
    nvfp4_sm120_plan p;

    TEST("rule 1: the shape by M (the weights the m16 side)")
    {
        static const struct { int64_t m; int shape, fa, fb; } S[] = {
            {1, 0, 1, 1},  {7, 0, 1, 1},   {8, 0, 1, 1},   {9, 1, 1, 2},    {16, 1, 1, 2},  {17, 2, 2, 4},
            {32, 2, 2, 4}, {33, 3, 4, 4},  {128, 3, 4, 4}, {2048, 3, 4, 4}, {65536, 3, 4, 4}};
        for (size_t i = 0; i < sizeof S / sizeof S[0]; i++) {
            CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, SM120_SMEM, S[i].m, 5376, 14336, 1, &p) == 0);
            CHECKF(p.shape == S[i].shape && p.fa == S[i].fa && p.fb == S[i].fb, "M=%lld: shape %d (%d x %d)",
                   (long long)S[i].m, p.shape, p.fa, p.fb);
        }
        /* N, K, the device and the slices never change the shape */
        for (int64_t m = 1; m <= 64; m++) {
            nvfp4_sm120_plan q;
            CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, SM120_SMEM, m, 16, 16, 0, &p) == 0);
            CHECK(nvfp4_sm120_plan_gemm(188, 232448, m, 28672, 14336, 7, &q) == 0);
            CHECKF(p.shape == q.shape && p.shape == shape_for_m(m), "M=%lld", (long long)m);
        }
    }

    TEST("rules 2 and 3: warps and stages fit the shared memory")
    {
        /* GB10's 99 KB: four warps; stages as many as fit, at most 8 */
        for (int s = 0; s < NVFP4_SM120_NUM_SHAPES; s++) {
            const int64_t m = s == 0 ? 1 : s == 1 ? 16 : s == 2 ? 32 : 128;
            CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, SM120_SMEM, m, 5376, 14336, 1, &p) == 0);
            const size_t fit = SM120_SMEM / (NVFP4_SM120_WARPS * p.stage_bytes);
            CHECKF(p.warps == NVFP4_SM120_WARPS, "shape %d: %d warps", s, p.warps);
            CHECKF((size_t)p.stages == (fit < NVFP4_SM120_MAX_STAGES ? fit : NVFP4_SM120_MAX_STAGES),
                   "shape %d: %d stages, %zu fit", s, p.stages, fit);
        }
        /* the GB10 numbers docs/SM120.md quotes */
        CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, SM120_SMEM, 1, 5376, 14336, 1, &p) == 0);
        CHECKF(p.stage_bytes == 3456 && p.stages == 7 && p.smem == 96768, "M=1: %zu x %d = %zu", p.stage_bytes,
               p.stages, p.smem);
        CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, SM120_SMEM, 128, 5376, 14336, 1, &p) == 0);
        CHECKF(p.stage_bytes == 6912 && p.stages == 3 && p.smem == 82944, "M=128: %zu x %d = %zu", p.stage_bytes,
               p.stages, p.smem);
        /* a large shared memory: the cap */
        CHECK(nvfp4_sm120_plan_gemm(132, 232448, 1, 5376, 14336, 1, &p) == 0);
        CHECK(p.stages == NVFP4_SM120_MAX_STAGES);
        /* fewer warps when two stages of four do not fit (shape 3: 6912-byte stages) */
        CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, 4 * 2 * 6912 - 1, 128, 5376, 14336, 1, &p) == 0);
        CHECKF(p.warps == 3 && p.stages == 2, "%d warps, %d stages", p.warps, p.stages);
        CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, 2 * 6912, 128, 5376, 14336, 1, &p) == 0);
        CHECKF(p.warps == 1 && p.stages == 2, "%d warps, %d stages", p.warps, p.stages);
        /* not even two stages of one warp: no plan */
        CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, 2 * 6912 - 1, 128, 5376, 14336, 1, &p) == -1);
        CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, 0, 1, 16, 64, 1, &p) == -1);
        /* stages capped by what K needs: K = 64 is one stage, still two */
        CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, SM120_SMEM, 1, 5376, 64, 1, &p) == 0);
        CHECKF(p.steps == 1 && p.stages == NVFP4_SM120_MIN_STAGES, "K=64: %lld steps, %d stages",
               (long long)p.steps, p.stages);
        CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, SM120_SMEM, 1, 5376, 3 * 256, 1, &p) == 0);
        CHECKF(p.steps == 3 && p.stages == 3, "K=768: %lld steps, %d stages", (long long)p.steps, p.stages);
    }

    TEST("rule 4: one persistent CTA per SM at most")
    {
        for (int li = 0; li < 4; li++)
            for (int64_t m = 1; m <= 2048; m *= 2) {
                CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, SM120_SMEM, m, SEED_LINEARS[li].n, SEED_LINEARS[li].k, 1, &p) == 0);
                const int64_t want = cdiv(p.units, p.warps);
                CHECKF(p.grid == (want < GB10_SMS ? want : GB10_SMS), "%s M=%lld: grid %d", SEED_LINEARS[li].name,
                       (long long)m, p.grid);
            }
        /* the four linears at M = 1 fill all 48 SMs of a GB10 with 16-row units */
        CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, SM120_SMEM, 1, 5376, 14336, 1, &p) == 0);
        CHECKF(p.units == 336 && p.grid == 48, "fc2 M=1: %lld units, grid %d", (long long)p.units, p.grid);
        /* a few units: fewer CTAs */
        CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, SM120_SMEM, 1, 48, 64, 1, &p) == 0);
        CHECKF(p.units == 3 && p.grid == 1, "N=48: %lld units, grid %d", (long long)p.units, p.grid);
        CHECK(nvfp4_sm120_plan_gemm(1, SM120_SMEM, 128, 28672, 5376, 1, &p) == 0);
        CHECK(p.grid == 1);
    }

    TEST("rule 5: K slices by nvfp4_k_slice_elems, whatever M")
    {
        static const struct { int64_t k; int s; int64_t gs, slices; } S[] = {
            {14336, 0, 224, 1}, {14336, 1, 224, 1}, {14336, 2, 112, 2}, {14336, 3, 75, 3},
            {14336, 7, 32, 7},  {64, 4, 1, 1},      {128, 3, 1, 2},     {208, 2, 2, 2},
            {4096 * 64, NVFP4_MAX_K_SLICES, 1, 4096}};
        for (size_t i = 0; i < sizeof S / sizeof S[0]; i++)
            for (int64_t m = 1; m <= 256; m *= 16) {
                CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, SM120_SMEM, m, 64, S[i].k, S[i].s, &p) == 0);
                CHECKF(p.group_slice == S[i].gs && p.slices == S[i].slices, "K=%lld S=%d M=%lld: %lld x %lld",
                       (long long)S[i].k, S[i].s, (long long)m, (long long)p.group_slice, (long long)p.slices);
            }
    }

    TEST("arguments out of range")
    {
        CHECK(nvfp4_sm120_plan_gemm(0, SM120_SMEM, 1, 16, 64, 1, &p) == -1);
        CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, SM120_SMEM, 0, 16, 64, 1, &p) == -1);
        CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, SM120_SMEM, 1, 0, 64, 1, &p) == -1);
        CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, SM120_SMEM, 1, 16, 0, 1, &p) == -1);
        CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, SM120_SMEM, 1, 16, 40, 1, &p) == -1);
        CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, SM120_SMEM, 1, 16, 64, -1, &p) == -1);
        CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, SM120_SMEM, 1, 16, 64, NVFP4_MAX_K_SLICES + 1, &p) == -1);
        CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, SM120_SMEM, NVFP4_SM120_MAX_DIM + 1, 16, 64, 1, &p) == -1);
        CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, SM120_SMEM, 1, NVFP4_SM120_MAX_DIM + 1, 64, 1, &p) == -1);
        CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, SM120_SMEM, 1, 16, NVFP4_SM120_MAX_DIM + 16, 1, &p) == -1);
        CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, SM120_SMEM, 1, 16, 64, 1, NULL) == -1);
        CHECK(nvfp4_sm120_plan_gemm(GB10_SMS, SM120_SMEM, NVFP4_SM120_MAX_DIM, NVFP4_SM120_MAX_DIM,
                                    NVFP4_SM120_MAX_DIM, NVFP4_MAX_K_SLICES, &p) == 0);
    }

    TEST("every plan satisfies the invariants (devices x M x N x K x slices)")
    {
        static const struct { int sms; size_t smem; } D[] = {
            {GB10_SMS, SM120_SMEM}, {188, SM120_SMEM}, {1, SM120_SMEM}, {84, 48 * 1024}, {132, 232448}};
        static const int64_t MS[] = {1, 2, 5, 8, 9, 15, 16, 17, 31, 32, 33, 100, 128, 129, 1000, 2048};
        static const int64_t NS[] = {1, 15, 16, 17, 48, 200, 5376, 21504, 28672};
        static const int64_t KS[] = {16, 48, 64, 80, 256, 1040, 5376, 7168, 14336};
        static const int SL[] = {0, 1, 2, 3, 32};
        char what[128];
        for (size_t d = 0; d < sizeof D / sizeof D[0]; d++)
            for (size_t a = 0; a < sizeof MS / sizeof MS[0]; a++)
                for (size_t b = 0; b < sizeof NS / sizeof NS[0]; b++)
                    for (size_t c = 0; c < sizeof KS / sizeof KS[0]; c++)
                        for (size_t s = 0; s < sizeof SL / sizeof SL[0]; s++) {
                            snprintf(what, sizeof what, "sms %d smem %zu M %lld N %lld K %lld S %d", D[d].sms,
                                     D[d].smem, (long long)MS[a], (long long)NS[b], (long long)KS[c], SL[s]);
                            if (nvfp4_sm120_plan_gemm(D[d].sms, D[d].smem, MS[a], NS[b], KS[c], SL[s], &p) != 0) {
                                CHECKF(0, "%s: no plan", what);
                                continue;
                            }
                            check_invariants(what, D[d].sms, D[d].smem, MS[a], NS[b], KS[c], SL[s], &p);
                        }
    }
    return test_summary("sm120_plan");
}
