/* sm90_heuristics.c -- tile choice for the sm_90a NVFP4 GEMM: which
 * compiled variant, how deep the pipeline, how many persistent CTAs.  The
 * choice moves work between CTAs only; the arithmetic of every output is
 * the same chain of k16 steps whatever is chosen. */
#include "cuda/sm90_heuristics.cuh"

#include <string.h>

#define W NVFP4_SM90_WGMMA
#define S NVFP4_SM90_SMALLM
#define R NVFP4_SM90_REGM
const nvfp4_sm90_variant nvfp4_sm90_variants[NVFP4_SM90_NUM_VARIANTS] = {
    {W, 8, 1, 0},  {W, 16, 1, 0}, {W, 32, 1, 0}, {W, 64, 1, 0}, {W, 64, 2, 0}, {W, 128, 1, 0},
    {W, 128, 2, 0}, {W, 256, 2, 0}, {S, 8, 0, 1},  {S, 8, 0, 2},  {S, 8, 0, 4},  {S, 16, 0, 1},
    {S, 16, 0, 2}, {S, 16, 0, 4}, {NVFP4_SM90_SPLIT, 8, 0, 0}, {NVFP4_SM90_SPLIT, 16, 0, 0},
    {NVFP4_SM90_SPLIT, 32, 0, 0}, {R, 8, 0, 1}, {R, 8, 0, 2}, {R, 8, 0, 4}, {R, 16, 0, 1}, {R, 16, 0, 2},
    {R, 16, 0, 4}, {R, 32, 0, 1}, {R, 32, 0, 2}, {R, 32, 0, 4},
    {W, 176, 2, 0}, {W, 192, 2, 0}, {W, 232, 2, 0}, /* later additions keep the indices above */
    {NVFP4_SM90_SS, 64, 1, 0}, {NVFP4_SM90_SS, 128, 1, 0},
    {NVFP4_SM90_REGW, 8, 0, 1}, {NVFP4_SM90_REGW, 8, 0, 2}, {NVFP4_SM90_REGW, 16, 0, 1},
    {NVFP4_SM90_REGW, 16, 0, 2},
    {NVFP4_SM90_REGR, 8, 0, 2}, {NVFP4_SM90_REGR, 8, 0, 3}, {NVFP4_SM90_REGR, 8, 0, 4},
    {NVFP4_SM90_REGR, 16, 0, 2}, {NVFP4_SM90_REGR, 16, 0, 3}, {NVFP4_SM90_REGR, 16, 0, 4},
};
#undef W
#undef S
#undef R

#define SM90_STAGE_ALIGN 1024
#define SM90_BK 64 /* K elements per stage: 4 NVFP4 blocks, one 512-byte scale chunk */

size_t nvfp4_sm90_stage_bytes(int bn, int nc)
{
    size_t ksub = (size_t)NVFP4_SM90_KSUB(bn, nc);
    size_t act = (size_t)bn * SM90_BK * 2 * ksub; /* FP16 activations */
    size_t codes = (size_t)64 * nc * SM90_BK / 2 * ksub;
    size_t scales = 512 * ksub;
    size_t b = act + codes + scales;
    return (b + SM90_STAGE_ALIGN - 1) / SM90_STAGE_ALIGN * SM90_STAGE_ALIGN;
}

int nvfp4_sm90_ctas_per_sm(int bn, int nc) { return NVFP4_SM90_CTAS(bn, nc); }

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Per-tile cost of a 128-row wgmma tile beyond its bn activation rows, in
 * activation rows (the consumers' own weight dequantization, fill and
 * epilogue).  Fitted to `nvfp4 bench --all-tiles` at M = 2048 on the H200
 * (docs/KERNEL.md): 128 fits the four linears' times for bn = 128..256 best
 * and picks the fastest tile on each (16 picked 128x192 for QKV: 6 % slower
 * than 128x256). */
#define SM90_TILE_OVERHEAD_ROWS 128

/* Stream-K (docs/KERNEL.md, design item 11): the cost of one split tile
 * (its 128 x bn FP32 accumulators stored and loaded through L2, one more
 * pipeline drain), in the activation rows of the tile model above. */
#define SM90_SK_SPLIT_ROWS 16

/* Testing hook: stream-K by the cost model (0), never (-1), or forced on
 * a grid of that many CTAs (> 0; planning fails where it cannot apply). */
static int sm90_sk_mode = 0;
void nvfp4_sm90_force_stream_k(int ctas) { sm90_sk_mode = ctas; }

/* Whether a variant can run stream-K: a wgmma tile built with it, one chain. */
static int sm90_sk_capable(const nvfp4_sm90_variant *x, int k_slices)
{
    return x->kind == NVFP4_SM90_WGMMA && NVFP4_SM90_SK_TILE(x->bn, x->nc) && k_slices <= 1;
}

/* Stream-K desynchronises the CTAs' K positions (a piece starts
 * anywhere), so the stream-K tiles' operands that are read more than once
 * (activation rows by several weight tiles, weight rows by several
 * activation tiles) are live in L2 at once, where the data-parallel waves
 * walk K together.  Measured on the H200 (fourteenth session,
 * docs/KERNEL.md): FC2 at M = 2048 (85 MB of such operands) lost 1-2 % with
 * stream-K (L2 hit rate 83 -> 66 %, DRAM reads 228 -> 479 MB); attn-out at
 * M = 4096 (63 MB) gained 4 %, QKV, FC1 and attn-out at M = 2048 (30-43 MB)
 * and QKV and FC1 at M = 128 (1.4 MB: one activation tile, each weight
 * read once) gained.  The bound sits between them: 1.5 x the 50 MB L2 of
 * the sm_90 parts. */
#define SM90_SK_MAX_OPERAND_BYTES (75LL << 20)

/* The first stream-K tile of `tiles` on `ctas` CTAs: whole waves but the
 * last run data-parallel, the rest (between one and two grids of tiles) is
 * shared out. */
static int64_t sm90_sk_first_tile(int64_t tiles, int64_t ctas) { return (tiles / ctas - 1) * ctas; }

/* Cost of the tiles of an M x N x K GEMM in 128 x bn tiles on `ctas` CTAs,
 * times ctas: whole waves, each paid in full (data-parallel), or with *sk
 * set, the tiles from the last whole wave on shared out evenly by K chunks
 * plus one split per CTA.  Stream-K needs at least as many tiles as CTAs (a
 * tile is then split at most once), pays only where the last wave is
 * partial, and is kept to operands that stay in L2 (above). */
static int64_t sm90_tile_cost(int64_t m, int64_t n, int64_t k, int bn, int64_t ctas, int sk_allowed, int *sk)
{
    const int64_t num_at = ceil_div(m, bn), tiles = ceil_div(n, 128) * num_at;
    const int64_t per = bn + SM90_TILE_OVERHEAD_ROWS;
    const int64_t dp = ceil_div(tiles, ctas) * per * ctas;
    const int64_t skc = tiles * per + SM90_SK_SPLIT_ROWS * ctas;
    *sk = sk_allowed && tiles >= ctas && tiles % ctas != 0 && skc < dp;
    if (*sk) {
        const int64_t t0 = sm90_sk_first_tile(tiles, ctas);
        const int64_t w_tiles = (tiles - 1) / num_at - t0 / num_at + 1;
        const int64_t w_rows = num_at > 1 ? w_tiles * 128 : 0; /* re-read by several activation tiles */
        const int64_t a_rows = w_tiles < 2 ? 0 : tiles - t0 >= num_at ? m : (tiles - t0) * bn;
        *sk = (double)a_rows * (double)k * 2.0 + (double)w_rows * (double)k * 0.5625 <=
              (double)SM90_SK_MAX_OPERAND_BYTES;
    }
    return *sk ? skc : dp;
}

/* M > 128: the activation rows per 128-row tile among the compiled
 * two-consumer variants (bn >= 128) whose waves cost least.  A tile takes
 * time ~ bn + SM90_TILE_OVERHEAD_ROWS and, data-parallel, the last wave is
 * paid in full however few tiles it has, so 42 x 8 tiles of 128 x 256 on
 * 132 SMs (2.55 waves, 3 paid) lose to 42 x 9 of 128 x 232 (2.86); with
 * stream-K, 128 x 256 costs 2.55 waves and a split per CTA.  Ties go to the
 * wider tile (each weight dequantized fewer times). */
static int sm90_wave_bn(int64_t m, int64_t n, int64_t k, int num_sms, int sk_allowed)
{
    int best_bn = 256;
    int64_t best_cost = -1;
    for (int v = 0; v < NVFP4_SM90_NUM_VARIANTS; v++) {
        const nvfp4_sm90_variant *x = &nvfp4_sm90_variants[v];
        if (x->kind != NVFP4_SM90_WGMMA || x->nc != 2 || x->bn < 128) continue;
        int sk;
        const int64_t cost = sm90_tile_cost(m, n, k, x->bn, num_sms,
                                            sk_allowed && sm90_sk_capable(x, 1), &sk);
        if (best_cost < 0 || cost < best_cost || (cost == best_cost && x->bn > best_bn)) {
            best_cost = cost;
            best_bn = x->bn;
        }
    }
    return best_bn;
}

int nvfp4_sm90_plan_mcast(const nvfp4_sm90_plan *plan, int64_t m)
{
    const nvfp4_sm90_variant *v = &nvfp4_sm90_variants[plan->variant];
    return v->kind == NVFP4_SM90_WGMMA && NVFP4_SM90_MCAST_TILE(v->bn) && m <= v->bn &&
           plan->sk_tile0 >= plan->tiles && plan->tiles == plan->grid && plan->grid % 2 == 0;
}

/* Testing hook (nvfp4_sm90_force_loaders): loader warps of the register kernel, 0 = planned. */
static int sm90_regm_loaders = 0;
void nvfp4_sm90_force_loaders(int lw) { sm90_regm_loaders = lw; }

int nvfp4_sm90_plan_gemm(int64_t m, int64_t n, int64_t k, int k_slices, int num_sms, size_t smem_optin,
                         size_t smem_per_sm, int force_variant, nvfp4_sm90_plan *out)
{
    /* Rules read off `nvfp4 bench` on the H200 (docs/KERNEL.md):
     *  - M <= 32: the register small-M kernel (N/8 chains over every SM,
     *    dequantized in the MMA warps' registers; docs/KERNEL.md);
     *  - one activation tile whenever M <= 128 (activations are re-read from
     *    L2 once per weight tile, and a second tile doubles the dequant);
     *  - 32 < M <= 128: two consumers sharing the activation tile when there
     *    are at least as many 128-row weight tiles as SMs, else one (the SS
     *    kernel, forced only, measured slower: docs/KERNEL.md);
     *  - M > 128: 128-row tiles, bn by the wave model (sm90_wave_bn). */
    int want_kind, want_bn, want_nc, want_r = 0;
    /* K only bounds stream-K (its operands in L2: sm90_tile_cost) */
    if (num_sms < 1) num_sms = 1;
    if (m <= 32) { /* the register kernels, smallest MT >= M */
        const int64_t per = ceil_div(n / 8 > 0 ? n / 8 : 1, num_sms);        /* 8-row chains per CTA */
        const int64_t per16 = ceil_div(n / 16 > 0 ? n / 16 : 1, num_sms);    /* 16-row chains per CTA */
        want_bn = m <= 8 ? 8 : m <= 16 ? 16 : 32;
        want_nc = 0;
        /* REGM: the fewest 8-row chains per MMA warp that fit one wave */
        want_kind = NVFP4_SM90_REGM;
        want_r = per <= REGM_TMAX(1) ? 1 : per <= REGM_TMAX(2) ? 2 : 4;
        const int64_t regm_warps = ceil_div(per, want_r);
        if (m <= 16 && k_slices <= 1 && per16 * REGR_MIN_R <= REGR_WMAX) {
            /* few chains per SM (N = 5376: 2.55): REGR, as many warps per chain as fit */
            want_kind = NVFP4_SM90_REGR;
            const int64_t rmax = m <= 8 ? REGR_MAX_R : 2; /* MT = 16: R = 3 measured slower than 2 */
            want_r = (int)(REGR_WMAX / per16 < rmax ? REGR_WMAX / per16 : rmax);
        } else if (m <= 16 && 2 * per16 <= REGW_TMAX(1) && per16 > regm_warps) {
            /* REGW, one 16-row chain per MMA warp, where that is more MMA
             * warps than REGM's plan (FC1: 14 against 7; at QKV's 11 against
             * 11 it measured no faster: docs/KERNEL.md) */
            want_kind = NVFP4_SM90_REGW;
            want_r = 1;
        }
    } else if (m <= 128) {
        want_kind = NVFP4_SM90_WGMMA;
        want_bn = m <= 64 ? 64 : 128;
        want_nc = ceil_div(n, 128) >= num_sms ? 2 : 1;
    } else {
        want_kind = NVFP4_SM90_WGMMA;
        want_bn = sm90_wave_bn(m, n, k, num_sms, sm90_sk_mode == 0 && num_sms <= NVFP4_SM90_SK_MAX_CTAS);
        want_nc = 2;
    }
    if (k_slices > 1 && want_kind == NVFP4_SM90_WGMMA && want_bn > 64) {
        want_bn = 64; /* the tile with the second accumulator set (the header) */
        want_nc = 1;
    }
    int best_v = -1;
    for (int v = 0; v < NVFP4_SM90_NUM_VARIANTS; v++) {
        const nvfp4_sm90_variant *x = &nvfp4_sm90_variants[v];
        if (force_variant >= 0 ? v == force_variant
                               : x->kind == want_kind && x->bn == want_bn && x->nc == want_nc && x->r == want_r)
            best_v = v;
    }
    if (best_v < 0) return -1;
    memset(out, 0, sizeof *out);
    const nvfp4_sm90_variant *var = &nvfp4_sm90_variants[best_v];
    int bn = var->bn, nc = var->nc;
    if (k_slices > 1 && !NVFP4_SM90_TAKES_SLICES(var)) return -1;
    if (sm90_sk_mode > 0 && !sm90_sk_capable(var, k_slices)) return -1; /* stream-K forced where it cannot run */
    if (NVFP4_SM90_IS_SMALL(var) && m > bn) return -1;
    if (var->kind == NVFP4_SM90_SPLIT || var->kind == NVFP4_SM90_REGM || var->kind == NVFP4_SM90_REGW ||
        var->kind == NVFP4_SM90_REGR) {
        /* weight tiles (split: 16 rows; register kernels: chains of 8 or,
         * REGW, 16 rows), balanced over at most one CTA per SM (more CTAs
         * only where a CTA would take more than its maximum) */
        const int regm = var->kind != NVFP4_SM90_SPLIT, rot = var->kind == NVFP4_SM90_REGR;
        const int64_t rows = var->kind == NVFP4_SM90_REGM ? 8 : 16; /* per chain (tile) */
        const int64_t tiles = n / rows;
        if (tiles < 1) return -1;
        const int64_t tmax = var->kind == NVFP4_SM90_SPLIT ? SPLIT_TMAX(bn)
                             : var->kind == NVFP4_SM90_REGM ? REGM_TMAX(var->r)
                             : rot                          ? REGR_WMAX / var->r
                                                            : REGW_TMAX(var->r) / 2;
        int64_t per = ceil_div(tiles, num_sms);
        int64_t grid = tiles < num_sms ? tiles : num_sms;
        if (per > tmax) {
            per = tmax;
            grid = ceil_div(tiles, tmax);
        }
        per = ceil_div(tiles, grid);
        if (grid > INT32_MAX) return -1;
        out->variant = best_v;
        out->grid = (int)grid;
        if (regm) { /* the stage layout counts 8-row units */
            const int64_t u = rows / 8;
            out->tiles_per_cta = (int)(u * per);
            out->tiles = u * tiles;
            const size_t units = (size_t)(u * per);
            const size_t stage = u == 1 ? REGM_STAGE_BYTES((size_t)bn, units) : REGW_STAGE_BYTES((size_t)bn, units);
            const size_t fixed = (u == 1 ? REGM_SMEM((size_t)bn, units, 0) : REGW_SMEM((size_t)bn, units, 0)) +
                                 (rot ? REGR_SLOT_BYTES((size_t)bn, units) : 0);
            if (fixed + 2 * stage > smem_optin) return -1;
            size_t nst = (smem_optin - fixed) / stage;
            if (nst > REGM_MAX_STAGES) nst = REGM_MAX_STAGES;
            if (rot) nst -= nst % (size_t)var->r; /* a multiple of R (the header) */
            if (nst < 2) return -1;
            out->stages = (int)nst;
            out->mma_warps = (int)(rot ? per * var->r : ceil_div(per, var->r));
            /* One TMA-issuing thread is enough here: two and four measured
             * the same (docs/KERNEL.md); the hook tries others. */
            out->loaders = rot ? REGR_LOADERS
                               : sm90_regm_loaders >= 1 && sm90_regm_loaders <= REGM_LWMAX ? sm90_regm_loaders : 1;
            out->smem = fixed + nst * stage;
            return 0;
        }
        out->tiles_per_cta = (int)per;
        out->tiles = tiles;
        /* the deepest fragment ring (4, 3, then 2) that leaves at least 4 raw stages (2 for the last) */
        int nfrag = 4;
        size_t fixed = SPLIT_SMEM((size_t)bn, (size_t)per, 0, (size_t)nfrag);
        while (nfrag > 2 && fixed + 4 * SPLIT_RAW_BYTES(bn, per) > smem_optin) {
            nfrag--;
            fixed = SPLIT_SMEM((size_t)bn, (size_t)per, 0, (size_t)nfrag);
        }
        if (fixed + 2 * SPLIT_RAW_BYTES(bn, per) > smem_optin) return -1;
        size_t nraw = (smem_optin - fixed) / SPLIT_RAW_BYTES(bn, per);
        if (nraw > SPLIT_MAX_RAW) nraw = SPLIT_MAX_RAW;
        out->stages = (int)nraw;
        out->frag_stages = nfrag;
        out->smem = SPLIT_SMEM((size_t)bn, (size_t)per, nraw, (size_t)nfrag);
        return 0;
    }
    if (var->kind == NVFP4_SM90_SMALLM) { /* one item of 8r weight rows per consumer warp */
        const int r = var->r;
        int64_t items = ceil_div(n, 8 * (int64_t)r);
        int64_t w = ceil_div(items, num_sms);
        if (w > NVFP4_SM90_SMALL_WMAX(r)) w = NVFP4_SM90_SMALL_WMAX(r);
        size_t smem = NVFP4_SM90_SMALL_SMEM((size_t)bn, (size_t)r, (size_t)w);
        if (smem > smem_optin) return -1;
        out->variant = best_v;
        out->stages = (int)w;
        out->tiles = items;
        out->grid = (int)ceil_div(items, w);
        out->smem = smem;
        return 0;
    }
    if (var->kind == NVFP4_SM90_SS) { /* one CTA per SM, the deepest raw ring that fits */
        const size_t stage = SS_STAGE_BYTES((size_t)bn, (size_t)nc), fixed = SS_SMEM((size_t)bn, (size_t)nc, 0);
        if (fixed + 2 * stage > smem_optin) return -1;
        size_t nst = (smem_optin - fixed) / stage;
        if (nst > SS_MAX_STAGES) nst = SS_MAX_STAGES;
        const int64_t tiles = ceil_div(n, 64 * nc) * ceil_div(m, bn);
        out->variant = best_v;
        out->stages = (int)nst;
        out->tiles = tiles;
        out->grid = (int)(tiles < num_sms ? tiles : num_sms);
        out->smem = SS_SMEM((size_t)bn, (size_t)nc, nst);
        out->sk_tile0 = tiles; /* data-parallel only */
        return 0;
    }
    int ctas = nvfp4_sm90_ctas_per_sm(bn, nc);
    size_t stage = nvfp4_sm90_stage_bytes(bn, nc);
    /* alignment slack, up to 32 x 2 barriers, the staged epilogue */
    size_t fixed = 1024 + 512 + NVFP4_SM90_EPI_BYTES(nc);
    size_t budget = smem_optin;
    if (ctas > 1 && smem_per_sm / ctas < budget + 1024) budget = smem_per_sm / ctas - 1024;
    if (budget <= fixed + 2 * stage) return -1;
    int64_t stages = (int64_t)((budget - fixed) / stage);
    if (stages > 32) stages = 32;
    int64_t tiles = ceil_div(n, 64 * nc) * ceil_div(m, bn);
    int64_t slots = (int64_t)num_sms * ctas;
    out->variant = best_v;
    out->stages = (int)stages;
    out->tiles = tiles;
    out->grid = (int)(tiles < slots ? tiles : slots);
    out->smem = fixed + (size_t)stages * stage;
    out->sk_tile0 = tiles;
    /* stream-K: by the cost model on one CTA per SM, or forced on a grid */
    const int capable = sm90_sk_capable(var, k_slices) && m > NVFP4_SM90_SK_MIN_M;
    int sk = 0;
    int64_t sk_ctas = num_sms;
    if (sm90_sk_mode > 0) {
        sk_ctas = sm90_sk_mode;
        if (!capable || sk_ctas > NVFP4_SM90_SK_MAX_CTAS || sk_ctas > slots || tiles < sk_ctas) return -1;
        sk = 1;
    } else if (sm90_sk_mode == 0 && capable && num_sms <= NVFP4_SM90_SK_MAX_CTAS) {
        (void)sm90_tile_cost(m, n, k, bn, num_sms, 1, &sk);
    }
    if (sk) {
        out->grid = (int)sk_ctas;
        out->sk_tile0 = sm90_sk_first_tile(tiles, sk_ctas);
    }
    return 0;
}
