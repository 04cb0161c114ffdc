/* plan.c -- the sm120 GEMM's planner (plan.h).  The rules, each tested in
 * tests/unit/test_sm120_plan.c:
 *  1. the shape by M alone (the weights are the m16 side): M <= 8 one
 *     activation fragment per unit, M <= 16 two, M <= 32 units of 32 x 32,
 *     larger M units of 64 weight rows x 32 activation rows;
 *  2. warps per CTA NVFP4_SM120_WARPS, fewer only when even two stages of
 *     that many warps do not fit the shared memory;
 *  3. stages: as many as fit, at most NVFP4_SM120_MAX_STAGES and no more
 *     than the unit's K needs (at least NVFP4_SM120_MIN_STAGES);
 *  4. one CTA per multiprocessor (they use most of its shared memory),
 *     persistent: grid = min(SMs, the CTAs the units fill);
 *  5. K slices by the contract's rule, nvfp4_k_slice_elems (never by M). */
#include "cuda/sm120/plan.h"

#include <string.h>

#include "cuda/sm120/frag.h"
#include "nvfp4.h"

typedef struct shape_def {
    int fa, fb, kg;
} shape_def;

static const shape_def shapes[NVFP4_SM120_NUM_SHAPES] = {
#define NVFP4_SM120_SHAPE_ROW(I, FA, FB, KG) {FA, FB, KG},
    NVFP4_SM120_SHAPES(NVFP4_SM120_SHAPE_ROW)
#undef NVFP4_SM120_SHAPE_ROW
};

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static int shape_for_m(int64_t m) { return m <= 8 ? 0 : m <= 16 ? 1 : m <= 32 ? 2 : 3; }

int nvfp4_sm120_plan_gemm(int sms, size_t smem_per_block, int64_t m, int64_t n, int64_t k, int k_slices,
                          nvfp4_sm120_plan *plan)
{
    if (!plan || sms < 1 || m < 1 || n < 1 || k < 16 || k % 16 != 0 || m > NVFP4_SM120_MAX_DIM ||
        n > NVFP4_SM120_MAX_DIM || k > NVFP4_SM120_MAX_DIM || k_slices < 0 || k_slices > NVFP4_MAX_K_SLICES)
        return -1;
    nvfp4_sm120_plan p;
    memset(&p, 0, sizeof p);
    p.shape = shape_for_m(m);
    p.fa = shapes[p.shape].fa;
    p.fb = shapes[p.shape].fb;
    p.kg = shapes[p.shape].kg;
    p.stage_bytes = nvfp4_sm120_stage_bytes(p.fa, p.fb, p.kg);
    p.groups = cdiv(k, 64);
    p.steps = cdiv(p.groups, p.kg);
    p.group_slice = nvfp4_k_slice_elems(k, k_slices) / 64;
    p.slices = cdiv(p.groups, p.group_slice);
    p.n_tiles = cdiv(n, 16 * p.fa);
    p.m_tiles = cdiv(m, 8 * p.fb);
    p.units = p.n_tiles * p.m_tiles;

    p.warps = NVFP4_SM120_WARPS;
    while (p.warps > 1 && (size_t)p.warps * NVFP4_SM120_MIN_STAGES * p.stage_bytes > smem_per_block) p.warps--;
    const size_t fit = smem_per_block / ((size_t)p.warps * p.stage_bytes);
    if (fit < NVFP4_SM120_MIN_STAGES) return -1;
    const int64_t want = p.steps < NVFP4_SM120_MIN_STAGES ? NVFP4_SM120_MIN_STAGES : p.steps;
    int64_t stages = (int64_t)(fit < NVFP4_SM120_MAX_STAGES ? fit : NVFP4_SM120_MAX_STAGES);
    if (stages > want) stages = want;
    p.stages = (int)stages;
    p.smem = (size_t)p.warps * (size_t)p.stages * p.stage_bytes;
    p.block = 32 * p.warps;

    const int64_t ctas = cdiv(p.units, p.warps);
    p.grid = (int)(ctas < sms ? ctas : sms);
    *plan = p;
    return 0;
}
