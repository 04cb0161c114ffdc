/* sm90_heuristics.c -- tile choice for the sm_90a NVFP4 GEMM.
 *
 * A small cost model: the weights stream from DRAM once (the activation
 * tiles of one weight tile are neighbours in the tile order, so re-reads hit
 * L2), activations (FP16) come from L2 once per weight tile, and the FP16
 * tensor-core work of a tile is 2*rows*bn*K.  A CTA's time is its number of
 * tiles times the slowest of those per-tile terms; the whole GEMM also
 * cannot beat the DRAM floor.  It only ranks the variants. */
#include "cuda/sm90_heuristics.cuh"

const nvfp4_sm90_variant nvfp4_sm90_variants[NVFP4_SM90_NUM_VARIANTS] = {
    {8, 1}, {16, 1}, {32, 1}, {64, 1}, {64, 2}, {128, 1}, {128, 2}, {256, 2},
};

#define SM90_STAGE_ALIGN 1024
#define SM90_BK 64 /* K elements per stage: 4 NVFP4 blocks, one 512-byte scale chunk */

size_t nvfp4_sm90_stage_bytes(int bn, int nc)
{
    size_t act = (size_t)bn * SM90_BK * 2;  /* FP16 activations */
    size_t codes = (size_t)64 * nc * SM90_BK / 2;
    size_t scales = 512;
    size_t b = act + codes + scales;
    return (b + SM90_STAGE_ALIGN - 1) / SM90_STAGE_ALIGN * SM90_STAGE_ALIGN;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int nvfp4_sm90_plan_gemm(int64_t m, int64_t n, int64_t k, int num_sms, size_t smem_optin,
                         int force_variant, nvfp4_sm90_plan *out)
{
    /* Rates (per SM) that only need to be right relative to each other. */
    const double dram_bw = 4.0e12, sm_dram_bw = 60e9, sm_l2_bw = 150e9;
    const double sm_flops = 600e12 / 132.0;
    double best = 0;
    int best_v = -1;
    if (num_sms < 1) num_sms = 1;
    for (int v = 0; v < NVFP4_SM90_NUM_VARIANTS; v++) {
        if (force_variant >= 0 && v != force_variant) continue;
        int bn = nvfp4_sm90_variants[v].bn, nc = nvfp4_sm90_variants[v].nc;
        int64_t wt = ceil_div(n, 64 * nc), at = ceil_div(m, bn);
        int64_t tiles = wt * at;
        int64_t per_cta = ceil_div(tiles, num_sms);
        double wbytes = 64.0 * nc * (double)k * (0.5 + 1.0 / 16);
        double abytes = (double)bn * (double)k * 2;
        double flops = 2.0 * 64 * nc * bn * (double)k;
        /* One consumer warpgroup cannot hide its own dequantization behind
         * its tensor-core work as well as two can. */
        double tensor = flops / sm_flops * (nc == 1 ? 1.35 : 1.0);
        double mem = wbytes / sm_dram_bw + abytes / sm_l2_bw;
        double tile_t = tensor > mem ? tensor : mem;
        double t = (double)per_cta * tile_t;
        double floor_t = (double)n * (double)k * 0.5625 / dram_bw;
        if (t < floor_t) t = floor_t;
        if (best_v < 0 || t < best * 0.98) {
            best = t;
            best_v = v;
        }
    }
    if (best_v < 0) return -1;
    int bn = nvfp4_sm90_variants[best_v].bn, nc = nvfp4_sm90_variants[best_v].nc;
    size_t stage = nvfp4_sm90_stage_bytes(bn, nc);
    size_t fixed = 1024 + 512; /* alignment slack, up to 32 x 2 barriers */
    if (smem_optin <= fixed + 2 * stage) return -1;
    int64_t stages = (int64_t)((smem_optin - fixed) / stage);
    if (stages > 32) stages = 32;
    int64_t kc = ceil_div(k, SM90_BK);
    (void)kc;
    int64_t tiles = ceil_div(n, 64 * nc) * ceil_div(m, bn);
    out->variant = best_v;
    out->stages = (int)stages;
    out->tiles = tiles;
    out->grid = (int)(tiles < num_sms ? tiles : num_sms);
    out->smem = fixed + (size_t)stages * stage;
    return 0;
}
