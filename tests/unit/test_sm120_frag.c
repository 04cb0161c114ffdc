/* test_sm120_frag.c -- the sm120 GEMM's data paths, simulated on the host.
 *
 * src/cuda/sm120/frag.h says where every byte goes: global memory (ComfyUI's
 * hi-first codes, 128x4 tiled scales) -> a warp's pipeline stage (the
 * cp.async copies, swizzled) -> the lanes' registers (ldmatrix, scale
 * words) -> mma.sync m16n8k64 -> the outputs.  This test runs a warp's units
 * through exactly those functions, with ldmatrix and the MMA written here
 * from the PTX ISA's text (not from frag.h), the step by nvfp4_sm120_step,
 * and compares every output with nvfp4_gemm_ref (model sm120):
 *  - every shape of the kernel on tails (M, N not multiples of the unit; K
 *    not a multiple of the stage or of 64), K slices, bias;
 *  - scale bytes with sign bits, zero, subnormal, maximum and NaN scales,
 *    -0 codes; NaN bytes in the tiled layout's padding (never read);
 *  - the ring of stages in the kernel's order (2 .. 8 slots, reused from
 *    unit to unit), the copies landing at once: no slot overwritten early;
 *  - the copies: every stage byte written once, within the stage, reading
 *    inside the operand's arrays only, the zero fill where the contract pads;
 *  - the swizzle: each ldmatrix matrix's 8 rows in 8 different 16-byte
 *    slots of a 128-byte line (no bank conflict);
 *  - the emulated MMA's gather functions (frag.h) against the ISA's
 *    fragment formulas, for every element. */
#include "testlib.h"

#include "cuda/sm120/frag.h"
#include "cuda/sm120/plan.h"
#include "nvfp4.h"

typedef struct shape {
    int fa, fb, kg;
} shape;
static const shape SHAPES[NVFP4_SM120_NUM_SHAPES] = {
#define ROW(I, FA, FB, KG) {FA, FB, KG},
    NVFP4_SM120_SHAPES(ROW)
#undef ROW
};

/*------------------------- the PTX ISA, restated -------------------------*/

/* ldmatrix.sync.aligned.m8n8.x{nmat}.shared.b16: lane l supplies the
 * address of row l % 8 of matrix l / 8 (lanes 0 .. 8 nmat - 1 count);
 * lane 4 g + t receives elements 2t, 2t+1 (bytes 4t .. 4t+3) of row g of
 * matrix j in register j. */
static void ldsm(const uint8_t *stage, const uint32_t addr[32], int nmat, uint32_t reg[32][4])
{
    for (int lane = 0; lane < 32; lane++) {
        const int g = lane >> 2, t = lane & 3;
        for (int j = 0; j < nmat; j++) {
            const uint8_t *row = stage + addr[8 * j + g];
            reg[lane][j] = (uint32_t)row[4 * t] | (uint32_t)row[4 * t + 1] << 8 | (uint32_t)row[4 * t + 2] << 16 |
                           (uint32_t)row[4 * t + 3] << 24;
        }
    }
}

/* The matrices of one ldmatrix: 16-byte aligned rows, and the 8 rows of a
 * matrix in 8 distinct 16-byte slots modulo 128 bytes (conflict-free). */
static int ldsm_conflict_free(const uint32_t addr[32], int nmat)
{
    for (int j = 0; j < nmat; j++) {
        int seen = 0;
        for (int r = 0; r < 8; r++) {
            const uint32_t a = addr[8 * j + r];
            if (a % 16) return 0;
            seen |= 1 << ((a / 16) % 8);
        }
        if (seen != 0xFF) return 0;
    }
    return 1;
}

/* mma.m16n8k64 .e2m1 fragments, from the ISA's formulas: A element a_i
 * (register i / 8, nibble i % 8 from the low end) of lane (g, t) is row
 * g + 8 for i in [8, 16) and [24, 32) (g otherwise), column 8t + i % 8
 * (+32 for i >= 16); B element b_i is row 8t + i % 8 (+32 for i >= 8),
 * column g; C/D c_i is row g (+8 for i >= 2), column 2t + i % 2.  Scale
 * vectors (scale_vec::4X, selectors 0): A's row g from lane t = 0, row
 * g + 8 from lane t = 1; B's column g from lane t = 0; byte j = k block j.
 * d = D of the instruction, every output through nvfp4_sm120_step. */
static void mma_isa(float d[32][4], const uint32_t a[32][4], const uint32_t b[32][2], const uint32_t sfa[32],
                    const uint32_t sfb[32])
{
    uint8_t A[16][64], B[8][64], SA[16][4], SB[8][4];
    for (int lane = 0; lane < 32; lane++) {
        const int g = lane >> 2, t = lane & 3;
        for (int i = 0; i < 32; i++) {
            const int row = ((i >= 8 && i < 16) || i >= 24) ? g + 8 : g;
            const int col = 8 * t + i % 8 + (i >= 16 ? 32 : 0);
            A[row][col] = (uint8_t)((a[lane][i / 8] >> (4 * (i % 8))) & 15u);
        }
        for (int i = 0; i < 16; i++) {
            const int row = 8 * t + i % 8 + (i >= 8 ? 32 : 0);
            B[g][row] = (uint8_t)((b[lane][i / 8] >> (4 * (i % 8))) & 15u);
        }
        for (int j = 0; j < 4; j++) {
            if (t == 0) SA[g][j] = (uint8_t)(sfa[lane] >> (8 * j));
            if (t == 1) SA[g + 8][j] = (uint8_t)(sfa[lane] >> (8 * j));
            if (t == 0) SB[g][j] = (uint8_t)(sfb[lane] >> (8 * j));
        }
    }
    for (int lane = 0; lane < 32; lane++) {
        const int g = lane >> 2, t = lane & 3;
        for (int i = 0; i < 4; i++) {
            const int row = g + (i >= 2 ? 8 : 0), col = 2 * t + i % 2;
            d[lane][i] = nvfp4_sm120_step(d[lane][i], A[row], SA[row], B[col], SB[col]);
        }
    }
}

/*------------------------- a warp's units, simulated -------------------------*/

typedef struct sim {
    const nvfp4_tensor *a, *b; /* activations M x K, weights N x K: hi-first, tiled */
    int64_t m, n, k, groups, group_slice;
    shape sh;
    int stages;    /* the warp's ring: slots reused in the kernel's order */
    uint8_t *ring; /* stages slots, kept from unit to unit as the kernel's */
    float alpha;
    const float *bias;
    float *raw;
    uint16_t *out;
    int *written;
    long stage_bytes_ok, zero_fill_ok, conflict_free, copies_bad;
} sim;

/* One stage of a unit as the lanes' copies leave it; checks that each byte
 * is written by exactly one copy and that the copy stays inside the stage. */
static void fill_stage(sim *S, const nvfp4_sm120_unit *u, int64_t s, uint8_t *stage, size_t bytes)
{
    uint8_t *hits = calloc(bytes, 1);
    const int fa = S->sh.fa, fb = S->sh.fb, kg = S->sh.kg;
    memset(stage, 0xA5, bytes); /* what a previous stage left */
    const int nc = nvfp4_sm120_code_copies(fa, fb, kg), ns = nvfp4_sm120_scale_copies(fa, fb, kg);
    for (int t = 0; t < nc + ns; t++) {
        const nvfp4_sm120_copy cp = t < nc ? nvfp4_sm120_code_copy(u, fa, kg, s, t)
                                           : nvfp4_sm120_scale_copy(u, fa, fb, kg, s, t - nc);
        const uint8_t *src = t < nc ? (cp.weight ? S->b->codes : S->a->codes)
                                    : (cp.weight ? S->b->scales : S->a->scales);
        const nvfp4_tensor *op = cp.weight ? S->b : S->a;
        const int64_t size = t < nc ? op->rows * op->cols / 2
                                    : (int64_t)nvfp4_scales_bytes(op->rows, op->cols, NVFP4_SCALES_TILED);
        if (cp.dst + (uint32_t)cp.bytes > bytes || cp.valid < 0 || cp.valid > cp.bytes || cp.src < 0 ||
            cp.src + cp.valid > size) { /* outside the stage, or reading outside the operand */
            S->copies_bad++;
            continue;
        }
        for (int i = 0; i < cp.bytes; i++) {
            hits[cp.dst + (uint32_t)i]++;
            stage[cp.dst + (uint32_t)i] = i < cp.valid ? src[cp.src + i] : 0;
        }
    }
    for (size_t i = 0; i < bytes; i++)
        if (hits[i] != 1) {
            S->copies_bad++;
            break;
        }
    free(hits);
}

static void sim_unit(sim *S, int64_t n0, int64_t m0)
{
    const int fa = S->sh.fa, fb = S->sh.fb, kg = S->sh.kg;
    const size_t bytes = nvfp4_sm120_stage_bytes(fa, fb, kg);
    nvfp4_sm120_unit u = {.n0 = n0, .m0 = m0, .n = S->n, .m = S->m, .k = S->k, .groups = S->groups};
    float acc[4][4][32][4], tot[4][4][32][4];
    memset(acc, 0, sizeof acc);
    memset(tot, 0, sizeof tot);
    const int64_t steps = (S->groups + kg - 1) / kg;
    /* the kernel's ring: stages 0 .. S-2 first; before computing stage s,
     * stage s + S - 1 into the slot stage s - 1 used (copies land at once
     * here: a slot still to be read would be overwritten) */
    for (int s = 0; s < S->stages - 1; s++)
        if (s < steps) fill_stage(S, &u, s, S->ring + (size_t)s * bytes, bytes);
    for (int64_t s = 0; s < steps; s++) {
        const int64_t next = s + S->stages - 1;
        if (next < steps) fill_stage(S, &u, next, S->ring + (size_t)(next % S->stages) * bytes, bytes);
        const uint8_t *stage = S->ring + (size_t)(s % S->stages) * bytes;
        for (int g = 0; g < kg; g++) {
            const int64_t q = s * kg + g;
            if (q >= S->groups) break;
            uint32_t addr[32], afr[4][32][4], bfr[4][32][4], sfa[4][32], sfb[4][32];
            const uint32_t mask = nvfp4_sm120_scale_mask(q, S->k);
            for (int f = 0; f < fa; f++) {
                for (int l = 0; l < 32; l++) addr[l] = nvfp4_sm120_ldsm_a(l, f, g, kg);
                S->conflict_free += ldsm_conflict_free(addr, 4) ? 0 : 1;
                ldsm(stage, addr, 4, afr[f]);
                for (int l = 0; l < 32; l++) {
                    const uint8_t *w = stage + nvfp4_sm120_scale_off(nvfp4_sm120_sfa_row(l, f), g, fa, fb, kg);
                    sfa[f][l] = ((uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 |
                                 (uint32_t)w[3] << 24) & mask;
                }
            }
            for (int f = 0; f < fb; f += 2) {
                const int pair = fb > 1;
                uint32_t r[32][4];
                for (int l = 0; l < 32; l++) addr[l] = nvfp4_sm120_ldsm_b(l, fa, f, g, kg, pair);
                S->conflict_free += ldsm_conflict_free(addr, pair ? 4 : 2) ? 0 : 1;
                ldsm(stage, addr, pair ? 4 : 2, r);
                for (int l = 0; l < 32; l++) {
                    bfr[f][l][0] = r[l][0], bfr[f][l][1] = r[l][1];
                    if (pair) bfr[f + 1][l][0] = r[l][2], bfr[f + 1][l][1] = r[l][3];
                }
            }
            for (int f = 0; f < fb; f++)
                for (int l = 0; l < 32; l++) {
                    const uint8_t *w = stage + nvfp4_sm120_scale_off(nvfp4_sm120_sfb_row(l, fa, f), g, fa, fb, kg);
                    sfb[f][l] = ((uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 |
                                 (uint32_t)w[3] << 24) & mask;
                }
            for (int i = 0; i < fa; i++)
                for (int j = 0; j < fb; j++) {
                    uint32_t b2[32][2];
                    for (int l = 0; l < 32; l++) b2[l][0] = bfr[j][l][0], b2[l][1] = bfr[j][l][1];
                    mma_isa(acc[i][j], afr[i], b2, sfa[i], sfb[j]);
                }
            /* the K-slice fold, as the kernel: after a slice's last group */
            if ((q + 1) % S->group_slice == 0 || q + 1 == S->groups) {
                const int first = q < S->group_slice;
                for (int i = 0; i < fa; i++)
                    for (int j = 0; j < fb; j++)
                        for (int l = 0; l < 32; l++)
                            for (int e = 0; e < 4; e++) {
                                tot[i][j][l][e] = first ? acc[i][j][l][e] : tot[i][j][l][e] + acc[i][j][l][e];
                                acc[i][j][l][e] = 0.0f;
                            }
            }
        }
    }
    for (int i = 0; i < fa; i++)
        for (int j = 0; j < fb; j++)
            for (int l = 0; l < 32; l++)
                for (int e = 0; e < 4; e++) {
                    const int64_t n = n0 + nvfp4_sm120_acc_n(l, i, e), m = m0 + nvfp4_sm120_acc_m(l, j, e);
                    if (n >= S->n || m >= S->m) continue;
                    const float v = tot[i][j][l][e];
                    S->raw[m * S->n + n] = v;
                    S->out[m * S->n + n] = nvfp4_epilogue(v, S->alpha, S->bias ? &S->bias[n] : NULL);
                    S->written[m * S->n + n]++;
                }
}

/*------------------------------- data -------------------------------*/

static uint8_t scale_byte(uint64_t *rs, int kind)
{
    const uint64_t r = test_rand(rs);
    switch (kind) {
    case 1: /* wide: zero, subnormal, maximum, NaN, sign bits */
        switch (r % 8) {
        case 0: return (uint8_t)(r % 3 ? 0x00 : 0x80);
        case 1: return (uint8_t)((r >> 8) % 8);
        case 2: return (uint8_t)(0x7e | ((r >> 9) & 0x80));
        case 3: return (uint8_t)((r >> 8) % 40 == 0 ? 0x7f : 0x38);
        default: return (uint8_t)((r >> 8) & 0xff) == 0x7f ? 0x7e : (uint8_t)((r >> 8) & 0xff) == 0xff ? 0xfe
                                                                                             : (uint8_t)(r >> 8);
        }
    default: return (uint8_t)(0x28 + (r >> 8) % 32);
    }
}

/* A hi-first, tiled operand; kind 1 adds wide scales and -0 codes; the
 * tiled layout's padding holds NaN bytes (the kernel must not read them). */
static void make_operand(nvfp4_tensor *t, int64_t rows, int64_t cols, uint64_t seed, int kind)
{
    nvfp4_tensor_alloc(t, rows, cols, NVFP4_HI_FIRST, NVFP4_SCALES_TILED);
    uint64_t rs = seed;
    memset(t->scales, 0x7f, nvfp4_scales_bytes(rows, cols, NVFP4_SCALES_TILED));
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < cols / 2; c++) {
            uint8_t v = (uint8_t)test_rand(&rs);
            if (kind == 1 && test_rand(&rs) % 5 == 0) v = 0x88;
            t->codes[r * (cols / 2) + c] = v;
        }
        for (int64_t cb = 0; cb < cols / 16; cb++)
            t->scales[nvfp4_tiled_scale_offset(r, cb, cols)] = scale_byte(&rs, kind);
    }
    t->per_tensor_scale = 0.5f + (float)(test_rand(&rs) % 100) / 64.0f;
}

static void run_case(int si, int64_t m, int64_t n, int64_t k, int slices, int kind, int with_bias, int stages)
{
    const shape sh = SHAPES[si];
    nvfp4_tensor a, b;
    make_operand(&a, m, k, 1000 + (uint64_t)(si * 7919 + m * 31 + n * 17 + k + slices), kind);
    make_operand(&b, n, k, 2000 + (uint64_t)(si * 7919 + m * 31 + n * 17 + k + slices), kind);
    float *bias = NULL;
    if (with_bias) {
        bias = malloc((size_t)n * 4);
        uint64_t rs = 55 + (uint64_t)n;
        for (int64_t i = 0; i < n; i++) bias[i] = (float)test_normal(&rs);
    }
    float *raw = malloc((size_t)(m * n) * 4), *want_raw = malloc((size_t)(m * n) * 4);
    uint16_t *out = malloc((size_t)(m * n) * 2), *want_out = malloc((size_t)(m * n) * 2);
    int *written = calloc((size_t)(m * n), sizeof(int));
    nvfp4_gemm_args g = {.a = &a, .b = &b, .bias = bias, .raw = want_raw, .out = want_out,
                         .model = NVFP4_MODEL_SM120, .k_slices = slices};
    CHECK(nvfp4_gemm_ref(&g) == NVFP4_OK);

    sim S = {.a = &a, .b = &b, .m = m, .n = n, .k = k, .groups = (k + 63) / 64,
             .group_slice = nvfp4_k_slice_elems(k, slices) / 64, .sh = sh, .stages = stages,
             .alpha = nvfp4_gemm_alpha(a.per_tensor_scale, b.per_tensor_scale), .bias = bias, .raw = raw,
             .out = out, .written = written};
    S.ring = malloc((size_t)stages * nvfp4_sm120_stage_bytes(sh.fa, sh.fb, sh.kg));
    const int64_t n_tiles = (n + 16 * sh.fa - 1) / (16 * sh.fa), m_tiles = (m + 8 * sh.fb - 1) / (8 * sh.fb);
    for (int64_t u = 0; u < n_tiles * m_tiles; u++) /* the kernel's unit order: activation tile fastest */
        sim_unit(&S, (u / m_tiles) * 16 * sh.fa, (u % m_tiles) * 8 * sh.fb);

    char what[128];
    snprintf(what, sizeof what, "shape %d (%dx%d, kg %d, %d stages) M=%lld N=%lld K=%lld S=%d data %d bias %d", si,
             sh.fa, sh.fb, sh.kg, stages, (long long)m, (long long)n, (long long)k, slices, kind, with_bias);
    int once = 1;
    for (int64_t i = 0; i < m * n; i++) once &= written[i] == 1;
    CHECKF(once, "%s: an output not written exactly once", what);
    CHECKF(S.copies_bad == 0, "%s: %ld stage copies out of place or bytes not written once", what, S.copies_bad);
    CHECKF(S.conflict_free == 0, "%s: %ld ldmatrix with bank conflicts", what, S.conflict_free);
    if (!test_equal_bits(what, raw, want_raw, 4, m, n)) fprintf(stderr, "  (raw)\n");
    if (!test_equal_bits(what, out, want_out, 2, m, n)) fprintf(stderr, "  (out)\n");
    free(raw), free(want_raw), free(out), free(want_out), free(written), free(bias), free(S.ring);
    nvfp4_tensor_free(&a);
    nvfp4_tensor_free(&b);
}

int main(void)
{
    TEST("the emulated MMA's gather: frag.h against the ISA's fragment formulas")
    {
        int bad = 0;
        for (int lane = 0; lane < 32; lane++) {
            const int g = lane >> 2, t = lane & 3;
            for (int i = 0; i < 32; i++) { /* A element a_i */
                const int row = ((i >= 8 && i < 16) || i >= 24) ? g + 8 : g;
                const int col = 8 * t + i % 8 + (i >= 16 ? 32 : 0);
                bad += nvfp4_sm120_a_lane(row, col) != lane || nvfp4_sm120_a_reg(row, col) != i / 8 ||
                       (col & 7) != i % 8;
            }
            for (int i = 0; i < 16; i++) { /* B element b_i */
                const int k = 8 * t + i % 8 + (i >= 8 ? 32 : 0);
                bad += nvfp4_sm120_b_lane(g, k) != lane || nvfp4_sm120_b_reg(k) != i / 8 || (k & 7) != i % 8;
            }
            for (int i = 0; i < 4; i++)
                bad += nvfp4_sm120_d_row(lane, i) != g + (i >= 2 ? 8 : 0) || nvfp4_sm120_d_col(lane, i) != 2 * t + i % 2;
        }
        for (int row = 0; row < 16; row++) /* scale selector 0: the CUTLASS SM120 layout's lanes */
            bad += nvfp4_sm120_sfa_lane(row, 0) != 4 * (row & 7) + (row >= 8);
        for (int col = 0; col < 8; col++)
            for (int sel = 0; sel < 4; sel++) bad += nvfp4_sm120_sfb_lane(col, sel) != 4 * col + sel;
        /* the kernel's lanes pass the words the selectors read */
        for (int lane = 0; lane < 32; lane++) {
            if ((lane & 3) < 2) bad += nvfp4_sm120_sfa_lane(nvfp4_sm120_sfa_row(lane, 0), 0) != lane;
            bad += nvfp4_sm120_sfb_row(lane, 1, 0) - 16 != lane / 4;
            for (int i = 0; i < 4; i++)
                bad += nvfp4_sm120_acc_n(lane, 0, i) != nvfp4_sm120_d_row(lane, i) ||
                       nvfp4_sm120_acc_m(lane, 0, i) != nvfp4_sm120_d_col(lane, i);
        }
        CHECKF(bad == 0, "%d fragment positions differ from the ISA's formulas", bad);
    }

    TEST("scale mask: sign bits off, the missing blocks of the last group zero")
    {
        CHECK(nvfp4_sm120_scale_mask(0, 64) == 0x7F7F7F7Fu);
        CHECK(nvfp4_sm120_scale_mask(0, 16) == 0x0000007Fu);
        CHECK(nvfp4_sm120_scale_mask(1, 96) == 0x00007F7Fu);
        CHECK(nvfp4_sm120_scale_mask(2, 176) == 0x007F7F7Fu);
        CHECK(nvfp4_sm120_scale_mask(2, 192) == 0x7F7F7F7Fu);
        CHECK(nvfp4_sm120_scale_mask(0, 14336) == 0x7F7F7F7Fu);
    }

    TEST("swizzle: a permutation of each row's chunks")
    {
        int bad = 0;
        for (int chunks = 2; chunks <= 16; chunks *= 2)
            for (int i = 0; i < 64; i++) {
                int seen = 0;
                for (int c = 0; c < chunks; c++) seen |= 1 << nvfp4_sm120_swizzle(i, c, chunks);
                bad += seen != (1 << chunks) - 1;
            }
        CHECK(bad == 0);
    }

    TEST("every shape: tails, K slices, bias, wide scales, NaN padding -- against nvfp4_gemm_ref")
    {
        static const int64_t KS[] = {16, 48, 64, 80, 208, 272, 528};
        for (int si = 0; si < NVFP4_SM120_NUM_SHAPES; si++) {
            for (size_t ki = 0; ki < sizeof KS / sizeof KS[0]; ki++)
                run_case(si, 1 + (int64_t)(ki * 5) % 23, 16 + 24 * (int64_t)(ki % 3), KS[ki], 1 + (int)(ki % 3),
                         (int)(ki % 2), (int)(ki % 2 == 0), 2 + (int)(ki % 3));
            run_case(si, 40, 72, 528, 0, 1, 1, 7);
            run_case(si, 9, 17, 1040, 3, 0, 0, 3);
            run_case(si, 65, 33, 144, 2, 1, 1, NVFP4_SM120_MAX_STAGES);
        }
    }
    return test_summary("sm120_frag");
}
