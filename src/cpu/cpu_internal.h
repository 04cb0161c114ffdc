/* cpu_internal.h -- the packed operands shared by the portable, AVX2 and
 * AVX-512 kernels of the CPU GEMM (src/cpu/gemm_cpu*.c), sm90 and sm120.
 * Not installed.
 *
 * Every NVFP4 operand element is a' = (q/2) * S with q = twice the E2M1 value
 * (an integer in [-12, 12]) and S = |e4m3| = is * 2^-9 (is an integer below
 * 2^18).  So a' = q * is * 2^-10 and one product a'b' = q_a q_b is_a is_b
 * 2^-20: every quantity in the sm90 step is an integer multiple of 2^-20.
 *
 * Per 16-block the kernels need, besides the codes:
 *   top = largest exponent (floor log2) of a nonzero element,
 *   low = smallest exponent of the lowest set bit of a nonzero element,
 * (TOP_NONE / LOW_NONE when the block is all zero).  A product's exponent is
 * at most top_a + top_b and its lowest set bit at or above low_a + low_b;
 * top - low <= 7 for every block (|q| <= 12 and is = sig * 2^k, sig <= 15:
 * 12 * 15 < 2^8), so a block's products span at most 14 binades. */
#ifndef NVFP4_CPU_INTERNAL_H
#define NVFP4_CPU_INTERNAL_H

#include <stdint.h>

#include "internal.h"
#include "formats/layout.h"
#include "oracle/oracle_internal.h"

#define NVFP4_CPU_LANES 16  /* columns per packed column group */
#define NVFP4_CPU_GROUPS 4  /* column groups per B tile */
#define NVFP4_CPU_TILE (NVFP4_CPU_LANES * NVFP4_CPU_GROUPS) /* columns per B tile */
#define NVFP4_CPU_MR 4      /* rows per register tile (A rows are padded to it) */
#define NVFP4_CPU_Q_BIAS 12 /* A codes are stored as q + 12 (unsigned bytes) */
#define NVFP4_CPU_TOP_NONE (-1000)
#define NVFP4_CPU_LOW_NONE 1000
#define NVFP4_CPU_EXP_ZERO (-128) /* per-element exponent of a zero */
#define NVFP4_CPU_LSB_ZERO 127    /* per-element lowest-bit exponent of a zero */

/* Lookup tables (filled once by nvfp4_cpu_tables_init()). */
typedef struct nvfp4_cpu_tables {
    _Alignas(16) int8_t q[16];          /* code -> q, twice the E2M1 value */
    _Alignas(16) int8_t exp[128][16];   /* [scale & 0x7f][code] -> floor log2 |a'| */
    _Alignas(16) int8_t lsb[128][16];   /* [scale & 0x7f][code] -> lowest set bit of a' */
    int32_t is[128];                    /* scale & 0x7f -> S * 2^9 (0 for NaN) */
    float scale4[128];                  /* scale & 0x7f -> S / 4 (0 for NaN) */
    int8_t sm120_exp[128];              /* scale & 0x7f -> nvfp4_sm120_scale_exp() */
} nvfp4_cpu_tables;
extern nvfp4_cpu_tables nvfp4_cpu_tab;
void nvfp4_cpu_tables_init(void);

/* Byte offset of the scale of (row r, block cb) in t->scales. */
static inline size_t nvfp4_cpu_scale_offset(const nvfp4_tensor *t, int64_t r, int64_t cb)
{
    if (t->scale_layout == NVFP4_SCALES_ROW_MAJOR)
        return (size_t)r * (size_t)(t->cols / NVFP4_BLOCK) + (size_t)cb;
    return nvfp4_tiled_offset(r, cb, (t->cols / NVFP4_BLOCK + 3) / 4); /* 128x4 tiles */
}

/* The guard, per lane, f = biased exponent field of c (f == 0: c == 0):
 *   f > low_a + low_b + NVFP4_CPU_LIM_LOW: c is so large that E - 25 could
 *       exceed the products' lowest bits: they may be truncated -> the lane
 *       takes nvfp4_cpu_sm90_slow() (rare: c > 2^11 * the block's largest
 *       product at least).
 *   f != 0 and f < top_a + top_b + NVFP4_CPU_LIM_TOP: the products' E may
 *       exceed e_c + 2, so c may lose low bits: the kernel computes the exact
 *       largest product exponent P (max over nonzero products of e_a + e_b,
 *       byte SIMD on the exps arrays) and clears c's bits below
 *       2^(max(e_c, P) - 25) before the add.
 *   Otherwise no term is truncated and the step is RZ(c + s). */
#define NVFP4_CPU_LIM_LOW (127 + 25)
#define NVFP4_CPU_LIM_TOP (127 - 2)

/* The sm120 k64 step (docs/CPU_BACKEND.md).  Per step of 4 blocks and per
 * operand row, over the step's nonzero scales (NaN packed as zero): hi and
 * lo = the largest and smallest nvfp4_sm120_scale_exp() (TOP_NONE /
 * LOW_NONE when there is none).  A block term keeps every bit while
 * E - block_exp <= NVFP4_CPU_SM120_BLOCK_SLACK, c while E - e_c <=
 * NVFP4_CPU_SM120_C_SLACK.  The guard, per lane, f = c's exponent field:
 *   f > lo_a + lo_b + 127 + BLOCK_SLACK: c may cut the blocks' low bits;
 *   (hi_a - lo_a) + (hi_b - lo_b) > BLOCK_SLACK: the largest block may cut
 *       a small one's;
 *   f != 0 and f < hi_a + hi_b + 127 - C_SLACK: the blocks may cut c's;
 * any of them: the lane takes nvfp4_cpu_sm120_slow().  Otherwise the step is
 * RZ_FP32 of the exact c + sum of s_j (s_j = D_j * S_a S_b / 4, exact in
 * FP32), and that sum is exact in a double: every term is a multiple of
 * 2^(E-35) below 2^(E+14) in magnitude. */
#define NVFP4_CPU_SM120_BLOCK_SLACK (NVFP4_SM120_FRAC_BITS + NVFP4_SM120_MANT_EXP) /* 27 */
#define NVFP4_CPU_SM120_C_SLACK (NVFP4_SM120_FRAC_BITS - 23)                      /* 12 */
#define NVFP4_CPU_SM120_LIM_LOW (127 + NVFP4_CPU_SM120_BLOCK_SLACK)
#define NVFP4_CPU_SM120_LIM_TOP (127 - NVFP4_CPU_SM120_C_SLACK)
#define NVFP4_CPU_STEP_BLOCKS 4 /* 16-blocks per sm120 k64 step */

/* A (M x K), packed once per call; rows padded to NVFP4_CPU_MR with zeros. */
typedef struct nvfp4_cpu_apack {
    int64_t rows, rows_padded, k, nblocks;
    uint8_t *codes;  /* [rows_padded][k]: q + 12 */
    int8_t *exps;    /* [rows_padded][k]: exponent of a', NVFP4_CPU_EXP_ZERO for 0 */
    float *scale;    /* [rows_padded][nblocks]: S (0 for a NaN scale) */
    int32_t *iscale; /* [rows_padded][nblocks]: S * 2^9 */
    int32_t *top;    /* [rows_padded][nblocks] */
    int32_t *low;    /* [rows_padded][nblocks] */
    uint8_t *has_nan; /* [rows]: some block scale of the row is NaN */
    /* sm120 only (NULL otherwise): */
    int64_t nsteps;   /* k64 steps: ceil(nblocks / 4) */
    uint8_t *sbyte;   /* [rows_padded][nblocks]: scale & 0x7f, 0 for NaN */
    int32_t *step_hi; /* [rows_padded][nsteps] */
    int32_t *step_lo; /* [rows_padded][nsteps] */
} nvfp4_cpu_apack;

/* NVFP4_CPU_TILE consecutive B rows (output columns), packed per thread.
 * Per (block j, group g) the kernels read, lane l = column g*16 + l:
 *   codes  [j][g][kq 0..3][l][4]: q of elements 4kq..4kq+3 (signed bytes)
 *   corr   [j][g][l]: 12 * sum q (undoes the +12 of A's codes)
 *   scale4 [j][g][l]: S / 4
 *   lim_low[j][g][l]: low + NVFP4_CPU_LIM_LOW
 *   lim_top[j][g][l]: top + NVFP4_CPU_LIM_TOP
 *   exps   [j][g][kq][l][4]: exponents of b' as codes (EXP_ZERO for 0)
 * and the slow path also reads iscale [col][nblocks].  (B's top/low
 * "none" may also be EXP_ZERO / NVFP4_CPU_LSB_ZERO: any value is safe
 * for a block without nonzero products.)
 * The sm120 kernels read codes, corr and scale4, and per (step t, group g,
 * lane l), [t][g][l]:
 *   s120_lim_low: lo + NVFP4_CPU_SM120_LIM_LOW
 *   s120_lim_top: hi + NVFP4_CPU_SM120_LIM_TOP
 *   s120_spread:  hi - lo
 * and their slow path sbyte [col][nblocks] (scale & 0x7f, 0 for NaN). */
typedef struct nvfp4_cpu_btile {
    int64_t k, nblocks;
    int8_t *codes;
    int32_t *corr;
    float *scale4;
    int32_t *lim_low;
    int32_t *lim_top;
    int8_t *exps;
    int32_t *iscale;
    /* sm120 only (NULL otherwise): */
    uint8_t *sbyte;
    int32_t *s120_lim_low;
    int32_t *s120_lim_top;
    int32_t *s120_spread;
} nvfp4_cpu_btile;

/* The exact sm90 step for one (row, column, block), for the lanes the guard
 * sends here (products possibly truncated).  Integer arithmetic; the
 * oracle's rules (zero terms excluded from E). */
float nvfp4_cpu_sm90_slow(float c, const nvfp4_cpu_apack *a, int64_t row,
                          const nvfp4_cpu_btile *b, int col, int64_t block);

/* The exact sm120 step of one (row, column) over blocks block ..
 * block + 3 (those at or past block_end are the contract's zero padding),
 * for the lanes the guard sends here: the model's own rule
 * (nvfp4_sm120_step_bits, src/oracle/sm120_rule.h). */
float nvfp4_cpu_sm120_slow(float c, const nvfp4_cpu_apack *a, int64_t row,
                           const nvfp4_cpu_btile *b, int col, int64_t block, int64_t block_end);

/* Pack B rows n0 .. n0 + NVFP4_CPU_TILE - 1 (rows >= b->rows as zeros) into
 * t (and t->sbyte, for sm120, when not NULL); has_nan[col]: some block scale
 * of that row is NaN (it is packed as 0). */
void nvfp4_cpu_pack_btile_portable(nvfp4_cpu_btile *t, uint8_t *has_nan, const nvfp4_tensor *b,
                                   int64_t n0);
void nvfp4_cpu_pack_btile_avx2(nvfp4_cpu_btile *t, uint8_t *has_nan, const nvfp4_tensor *b,
                               int64_t n0);

/* A kernel: for rows [row_begin, row_end) (multiples of NVFP4_CPU_MR) and
 * all NVFP4_CPU_TILE columns of the tile, run the chain over blocks
 * [block_begin, block_end) (one K slice) from acc = 0;
 * acc[(row - row_begin) * NVFP4_CPU_TILE + col] receives it.  sm120:
 * block_begin is a multiple of 4 (steps of 4 blocks; the last one short
 * when block_end is not, padded with zero blocks). */
typedef void nvfp4_cpu_kernel(const nvfp4_cpu_apack *a, const nvfp4_cpu_btile *b,
                              int64_t row_begin, int64_t row_end, int64_t block_begin,
                              int64_t block_end, float *acc);

nvfp4_cpu_kernel nvfp4_cpu_sm90_kernel_portable, nvfp4_cpu_sm90_kernel_avx2,
    nvfp4_cpu_sm90_kernel_avx512, nvfp4_cpu_sm90_kernel_avx512vnni;
nvfp4_cpu_kernel nvfp4_cpu_sm120_kernel_portable, nvfp4_cpu_sm120_kernel_avx2,
    nvfp4_cpu_sm120_kernel_avx512, nvfp4_cpu_sm120_kernel_avx512vnni;

/* One K slice [k_begin, k_end) (multiples of 16; for SM120 k_begin a
 * multiple of 64, the last step padded with zero blocks) of the GEMM, a
 * chain from +0, for every output: raw[m * N + n] (no epilogue).  A NaN
 * block scale anywhere in a row makes the row NaN, as in nvfp4_gemm_cpu.
 * For nvfp4_explain (src/explain), which adds the slices itself. */
nvfp4_status nvfp4_cpu_gemm_slice(const nvfp4_tensor *a, const nvfp4_tensor *b, nvfp4_model model,
                                  int64_t k_begin, int64_t k_end, float *raw, int nthreads);

/* nvfp4_cpu_allow_vnni, nvfp4_cpu_force_simd: the testing hooks. */
#include "nvfp4_testing.h"

#endif
