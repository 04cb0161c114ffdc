/* gemm_cpu.c -- the multi-threaded CPU NVFP4 GEMM (docs/CPU_BACKEND.md):
 * argument checks, operand packing, the SIMD dispatch, the portable sm90
 * and sm120 kernels, the exact steps the kernels fall back to, and the
 * EXACT model.  Bit-identical to nvfp4_gemm_ref() (tests/unit/test_gemm_cpu.c).
 *
 * Why a fast path exists (sm90 model).  Within one 16-block every product is
 * p_i = q_a,i q_b,i * S_a S_b / 4 (cpu_internal.h), so the block's products
 * span at most 14 binades and, aligned to their own largest exponent, none is
 * ever truncated.  Truncation in the step can then only touch
 *   (1) the products, when c is much larger than them (E = e_c), or
 *   (2) c, when the products are larger than c (E > e_c + 2).
 * When neither can happen the step is exactly RZ_FP32(c + s) with
 * s = D * S_a S_b / 4 and D = sum q_a q_b: s is exact in FP32 (a 12-bit
 * integer times an 8-bit scale product) and c + s, both multiples of
 * 2^(E-25) and below 2^(E+7), is exact in 32 bits, so one add rounded toward
 * zero is the whole step.  The guard tests (1) and (2) from per-block bounds
 * (top/low) and c's exponent; a lane that fails it takes
 * nvfp4_cpu_sm90_slow(), the full integer step.  Zero products and a zero c
 * do not take part in E (the oracle's rule), which the bounds respect.
 *
 * Signed zeros: the chain starts at c = +0 and the step returns -0 only when
 * every term (c included) is a negative zero, so no accumulator is ever -0;
 * every zero result here is +0.  NaN: a NaN block scale makes all 16
 * operands NaN, the step returns NaN (0x7fffffff) and it stays so; the
 * packing zeroes NaN scales and the output is overridden per row/column. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_internal.h"
#include "oracle/sm120_rule.h"

#define SM90_NAN_BITS 0x7fffffffu  /* what the sm90 step returns for NaN */
#define EXACT_NAN_BITS 0x7fc00000u /* what the exact dot returns for NaN */

/*-------------------------------------------------------------------------
 *  Tables: per E2M1 code and 7-bit scale magnitude
 *-------------------------------------------------------------------------*/
nvfp4_cpu_tables nvfp4_cpu_tab;
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static int msb32(uint32_t x) { return 31 - __builtin_clz(x); }

static void fill_tables(void)
{
    static const int8_t twice[8] = {0, 1, 2, 3, 4, 6, 8, 12};
    nvfp4_cpu_tables *t = &nvfp4_cpu_tab;
    for (int code = 0; code < 16; code++)
        t->q[code] = (int8_t)((code & 8) ? -twice[code & 7] : twice[code & 7]);
    for (int s = 0; s < 128; s++) {
        int field = s >> 3, frac = s & 7;
        t->is[s] = s == 0x7f ? 0 : field ? (8 + frac) << (field - 1) : frac;
        t->scale4[s] = ldexpf((float)t->is[s], -11);
        t->sm120_exp[s] = (int8_t)nvfp4_sm120_scale_exp((uint8_t)s);
        for (int code = 0; code < 16; code++) {
            uint32_t n = (uint32_t)twice[code & 7] * (uint32_t)t->is[s]; /* a' = n * 2^-10 */
            t->exp[s][code] = n ? (int8_t)(msb32(n) - 10) : NVFP4_CPU_EXP_ZERO;
            t->lsb[s][code] = n ? (int8_t)(__builtin_ctz(n) - 10) : NVFP4_CPU_LSB_ZERO;
        }
    }
}

void nvfp4_cpu_tables_init(void) { pthread_once(&tables_once, fill_tables); }

/*-------------------------------------------------------------------------
 *  SIMD dispatch
 *-------------------------------------------------------------------------*/
enum simd { SIMD_PORTABLE = 0, SIMD_AVX2 = 1, SIMD_AVX512 = 2 };
static const char *const simd_names[] = {"portable", "avx2", "avx512"};
#ifdef NVFP4_TESTING
static atomic_int forced_simd = -1; /* nvfp4_cpu_force_simd */
#endif

static int simd_supported(int s)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (s == SIMD_AVX2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2");
    if (s == SIMD_AVX512)
        return __builtin_cpu_supports("avx2") && /* its B packing is the AVX2 one */
               __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("bmi2");
#endif
    return s == SIMD_PORTABLE;
}

static int simd_current(void)
{
#ifdef NVFP4_TESTING
    int f = atomic_load(&forced_simd);
    if (f >= 0) return f;
#endif
    if (simd_supported(SIMD_AVX512)) return SIMD_AVX512;
    if (simd_supported(SIMD_AVX2)) return SIMD_AVX2;
    return SIMD_PORTABLE;
}

const char *nvfp4_cpu_simd_name(void) { return simd_names[simd_current()]; }

#ifdef NVFP4_TESTING
nvfp4_status nvfp4_cpu_force_simd(const char *name)
{
    if (!name) {
        atomic_store(&forced_simd, -1);
        return NVFP4_OK;
    }
    for (int s = 0; s < 3; s++) {
        if (strcmp(name, simd_names[s]) != 0) continue;
        if (!simd_supported(s))
            return nvfp4_fail(NVFP4_ERR_UNSUPPORTED,
                              "nvfp4_cpu_force_simd: this CPU cannot run the \"%s\" path", name);
        atomic_store(&forced_simd, s);
        return NVFP4_OK;
    }
    return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                      "nvfp4_cpu_force_simd: unknown path \"%s\" (expected portable, avx2, "
                      "avx512 or NULL)",
                      name);
}

static atomic_int vnni_allowed = 1;

void nvfp4_cpu_allow_vnni(int allow) { atomic_store(&vnni_allowed, allow != 0); }
#endif

static int vnni_usable(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
#ifdef NVFP4_TESTING
    if (!atomic_load(&vnni_allowed)) return 0;
#endif
    return __builtin_cpu_supports("avx512vnni");
#else
    return 0;
#endif
}

static nvfp4_cpu_kernel *kernel_for(int s, nvfp4_model model)
{
    if (model == NVFP4_MODEL_SM120) {
        if (s == SIMD_AVX512)
            return vnni_usable() ? nvfp4_cpu_sm120_kernel_avx512vnni : nvfp4_cpu_sm120_kernel_avx512;
        if (s == SIMD_AVX2) return nvfp4_cpu_sm120_kernel_avx2;
        return nvfp4_cpu_sm120_kernel_portable;
    }
    if (s == SIMD_AVX512)
        return vnni_usable() ? nvfp4_cpu_sm90_kernel_avx512vnni : nvfp4_cpu_sm90_kernel_avx512;
    if (s == SIMD_AVX2) return nvfp4_cpu_sm90_kernel_avx2;
    return nvfp4_cpu_sm90_kernel_portable;
}

/*-------------------------------------------------------------------------
 *  Packing
 *-------------------------------------------------------------------------*/
typedef struct block_info {
    int8_t q[16];
    int8_t e[16];
    int32_t is;  /* S * 2^9, 0 for NaN */
    int32_t top, low;
    int nan;
    uint8_t s;   /* scale & 0x7f, 0 for NaN */
} block_info;

/* hi / lo of one sm120 step (cpu_internal.h): the largest and smallest
 * exponent over the nonzero scales s[0 .. n). */
static void step_bounds(const uint8_t *s, int64_t n, int32_t *hi, int32_t *lo)
{
    int32_t h = NVFP4_CPU_TOP_NONE, l = NVFP4_CPU_LOW_NONE;
    for (int64_t i = 0; i < n; i++) {
        if (!s[i]) continue;
        int32_t e = nvfp4_cpu_tab.sm120_exp[s[i]];
        if (e > h) h = e;
        if (e < l) l = e;
    }
    *hi = h;
    *lo = l;
}

static void decode_block(block_info *bi, const nvfp4_tensor *t, int64_t r, int64_t j)
{
    const nvfp4_cpu_tables *tab = &nvfp4_cpu_tab;
    unsigned s = t->scales[nvfp4_cpu_scale_offset(t, r, j)] & 0x7fu; /* UE4M3: sign ignored */
    bi->nan = s == 0x7f;
    if (bi->nan) s = 0; /* computed as zeros; the output is NaN anyway */
    bi->s = (uint8_t)s;
    bi->is = tab->is[s];
    const uint8_t *bytes = t->codes + (size_t)r * (size_t)(t->cols / 2) + (size_t)j * 8;
    int hi_first = t->nibble_order == NVFP4_HI_FIRST;
    int top = NVFP4_CPU_TOP_NONE, low = NVFP4_CPU_LOW_NONE;
    for (int i = 0; i < 8; i++) {
        unsigned c0 = hi_first ? bytes[i] >> 4 : bytes[i] & 15u;
        unsigned c1 = hi_first ? bytes[i] & 15u : bytes[i] >> 4;
        unsigned codes[2] = {c0, c1};
        for (int h = 0; h < 2; h++) {
            unsigned code = codes[h];
            bi->q[2 * i + h] = tab->q[code];
            int8_t e = tab->exp[s][code];
            bi->e[2 * i + h] = e;
            if (e != NVFP4_CPU_EXP_ZERO) {
                if (e > top) top = e;
                if (tab->lsb[s][code] < low) low = tab->lsb[s][code];
            }
        }
    }
    bi->top = top;
    bi->low = low;
}

typedef struct pack_a_ctx {
    nvfp4_cpu_apack *ap;
    const nvfp4_tensor *a;
} pack_a_ctx;

static void pack_a_rows(void *p, int64_t begin, int64_t end)
{
    pack_a_ctx *ctx = p;
    nvfp4_cpu_apack *ap = ctx->ap;
    int64_t K = ap->k, nb = ap->nblocks;
    for (int64_t r = begin; r < end; r++) {
        int any_nan = 0;
        for (int64_t j = 0; j < nb; j++) {
            block_info bi;
            size_t o = (size_t)(r * nb + j);
            if (r < ap->rows) {
                decode_block(&bi, ctx->a, r, j);
            } else {
                memset(&bi, 0, sizeof bi);
                memset(bi.e, NVFP4_CPU_EXP_ZERO, sizeof bi.e);
                bi.top = NVFP4_CPU_TOP_NONE;
                bi.low = NVFP4_CPU_LOW_NONE;
            }
            any_nan |= bi.nan;
            uint8_t *codes = ap->codes + (size_t)(r * K + j * 16);
            for (int i = 0; i < 16; i++) codes[i] = (uint8_t)(bi.q[i] + NVFP4_CPU_Q_BIAS);
            memcpy(ap->exps + (size_t)(r * K + j * 16), bi.e, 16);
            ap->iscale[o] = bi.is;
            ap->scale[o] = ldexpf((float)bi.is, -9); /* exact */
            ap->top[o] = bi.top;
            ap->low[o] = bi.low;
            if (ap->sbyte) ap->sbyte[o] = bi.s;
        }
        if (r < ap->rows) ap->has_nan[r] = (uint8_t)any_nan;
        for (int64_t t = 0; ap->sbyte && t < ap->nsteps; t++) {
            int64_t j0 = t * NVFP4_CPU_STEP_BLOCKS;
            int64_t n = nb - j0 < NVFP4_CPU_STEP_BLOCKS ? nb - j0 : NVFP4_CPU_STEP_BLOCKS;
            size_t o = (size_t)(r * ap->nsteps + t);
            step_bounds(ap->sbyte + (size_t)(r * nb + j0), n, &ap->step_hi[o], &ap->step_lo[o]);
        }
    }
}

static void apack_free(nvfp4_cpu_apack *ap)
{
    free(ap->codes);
    free(ap->exps);
    free(ap->scale);
    free(ap->iscale);
    free(ap->top);
    free(ap->low);
    free(ap->has_nan);
    free(ap->sbyte);
    free(ap->step_hi);
    free(ap->step_lo);
    memset(ap, 0, sizeof *ap);
}

/* sm120: also the scale bytes and the per-step bounds. */
static nvfp4_status apack_build(nvfp4_cpu_apack *ap, const nvfp4_tensor *a, int nthreads,
                                int sm120)
{
    memset(ap, 0, sizeof *ap);
    ap->rows = a->rows;
    ap->rows_padded = (a->rows + NVFP4_CPU_MR - 1) / NVFP4_CPU_MR * NVFP4_CPU_MR;
    ap->k = a->cols;
    ap->nblocks = a->cols / NVFP4_BLOCK;
    size_t elems, blocks;
    if (!nvfp4_mul_size((size_t)ap->rows_padded, (size_t)ap->k, &elems) ||
        !nvfp4_mul_size((size_t)ap->rows_padded, (size_t)ap->nblocks, &blocks) ||
        elems > SIZE_MAX / 8)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_gemm_cpu: operand A (%lld x %lld) is too large",
                          (long long)a->rows, (long long)a->cols);
    ap->codes = malloc(elems ? elems : 1);
    ap->exps = malloc(elems ? elems : 1);
    ap->scale = malloc(blocks ? blocks * sizeof(float) : 1);
    ap->iscale = malloc(blocks ? blocks * sizeof(int32_t) : 1);
    ap->top = malloc(blocks ? blocks * sizeof(int32_t) : 1);
    ap->low = malloc(blocks ? blocks * sizeof(int32_t) : 1);
    ap->has_nan = calloc((size_t)(ap->rows ? ap->rows : 1), 1);
    int sm120_ok = 1;
    if (sm120) {
        /* nsteps <= nblocks: the sizes were checked above */
        ap->nsteps = (ap->nblocks + NVFP4_CPU_STEP_BLOCKS - 1) / NVFP4_CPU_STEP_BLOCKS;
        size_t steps = (size_t)ap->rows_padded * (size_t)ap->nsteps;
        ap->sbyte = malloc(blocks ? blocks : 1);
        ap->step_hi = malloc(steps ? steps * sizeof(int32_t) : 1);
        ap->step_lo = malloc(steps ? steps * sizeof(int32_t) : 1);
        sm120_ok = ap->sbyte && ap->step_hi && ap->step_lo;
    }
    if (!ap->codes || !ap->exps || !ap->scale || !ap->iscale || !ap->top || !ap->low ||
        !ap->has_nan || !sm120_ok) {
        apack_free(ap);
        return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY,
                          "nvfp4_gemm_cpu: out of memory packing operand A (%zu elements)",
                          elems);
    }
    pack_a_ctx ctx = {ap, a};
    return nvfp4_parallel_for(ap->rows_padded, 16, nthreads, pack_a_rows, &ctx);
}

/* Storage of one B tile (per worker). */
typedef struct btile_store {
    nvfp4_cpu_btile t;
    uint8_t has_nan[NVFP4_CPU_TILE];
} btile_store;

static void btile_free(btile_store *bs)
{
    free(bs->t.codes);
    free(bs->t.corr);
    free(bs->t.scale4);
    free(bs->t.lim_low);
    free(bs->t.lim_top);
    free(bs->t.exps);
    free(bs->t.iscale);
    free(bs->t.sbyte);
    free(bs->t.s120_lim_low);
    free(bs->t.s120_lim_top);
    free(bs->t.s120_spread);
    memset(bs, 0, sizeof *bs);
}

/* sm120: also the scale bytes and the per-step guard limits. */
static int btile_alloc(btile_store *bs, int64_t k, int sm120)
{
    memset(bs, 0, sizeof *bs);
    int64_t nb = k / NVFP4_BLOCK;
    size_t elems = (size_t)NVFP4_CPU_TILE * (size_t)(k ? k : 1);
    size_t lanes = (size_t)NVFP4_CPU_TILE * (size_t)(nb ? nb : 1);
    bs->t.k = k;
    bs->t.nblocks = nb;
    bs->t.codes = aligned_alloc(64, elems);
    bs->t.corr = aligned_alloc(64, lanes * sizeof(int32_t));
    bs->t.scale4 = aligned_alloc(64, lanes * sizeof(float));
    bs->t.lim_low = aligned_alloc(64, lanes * sizeof(int32_t));
    bs->t.lim_top = aligned_alloc(64, lanes * sizeof(int32_t));
    bs->t.exps = aligned_alloc(64, elems);
    bs->t.iscale = malloc(lanes * sizeof(int32_t));
    if (!bs->t.codes || !bs->t.corr || !bs->t.scale4 || !bs->t.lim_low || !bs->t.lim_top ||
        !bs->t.exps || !bs->t.iscale) {
        btile_free(bs);
        return 0;
    }
    if (sm120) {
        int64_t nsteps = (nb + NVFP4_CPU_STEP_BLOCKS - 1) / NVFP4_CPU_STEP_BLOCKS;
        size_t step_lanes = (size_t)NVFP4_CPU_TILE * (size_t)(nsteps ? nsteps : 1);
        bs->t.sbyte = malloc(lanes);
        bs->t.s120_lim_low = aligned_alloc(64, step_lanes * sizeof(int32_t));
        bs->t.s120_lim_top = aligned_alloc(64, step_lanes * sizeof(int32_t));
        bs->t.s120_spread = aligned_alloc(64, step_lanes * sizeof(int32_t));
        if (!bs->t.sbyte || !bs->t.s120_lim_low || !bs->t.s120_lim_top || !bs->t.s120_spread) {
            btile_free(bs);
            return 0;
        }
    }
    return 1;
}

/* The sm120 part of a B tile, after the packing (which fills sbyte when
 * the tile has one): the per-step guard limits. */
static void pack_btile_sm120(nvfp4_cpu_btile *t)
{
    int64_t nb = t->nblocks, nsteps = (nb + NVFP4_CPU_STEP_BLOCKS - 1) / NVFP4_CPU_STEP_BLOCKS;
    for (int col = 0; col < NVFP4_CPU_TILE; col++) {
        const uint8_t *sbyte = t->sbyte + (size_t)col * (size_t)nb;
        for (int64_t st = 0; st < nsteps; st++) {
            int64_t j0 = st * NVFP4_CPU_STEP_BLOCKS;
            int32_t hi, lo;
            step_bounds(sbyte + j0, nb - j0 < NVFP4_CPU_STEP_BLOCKS ? nb - j0 : NVFP4_CPU_STEP_BLOCKS,
                        &hi, &lo);
            size_t lane = (size_t)(st * NVFP4_CPU_GROUPS + col / NVFP4_CPU_LANES) * NVFP4_CPU_LANES +
                          (size_t)(col % NVFP4_CPU_LANES);
            t->s120_lim_low[lane] = lo + NVFP4_CPU_SM120_LIM_LOW;
            t->s120_lim_top[lane] = hi + NVFP4_CPU_SM120_LIM_TOP;
            t->s120_spread[lane] = hi - lo;
        }
    }
}

void nvfp4_cpu_pack_btile_portable(nvfp4_cpu_btile *t, uint8_t *has_nan, const nvfp4_tensor *b,
                                   int64_t n0)
{
    int64_t nb = t->nblocks;
    for (int col = 0; col < NVFP4_CPU_TILE; col++) {
        int64_t n = n0 + col;
        int g = col / NVFP4_CPU_LANES, l = col % NVFP4_CPU_LANES;
        int any_nan = 0;
        for (int64_t j = 0; j < nb; j++) {
            block_info bi;
            if (n < b->rows) {
                decode_block(&bi, b, n, j);
            } else {
                memset(&bi, 0, sizeof bi);
                memset(bi.e, NVFP4_CPU_EXP_ZERO, sizeof bi.e);
                bi.top = NVFP4_CPU_TOP_NONE;
                bi.low = NVFP4_CPU_LOW_NONE;
            }
            any_nan |= bi.nan;
            size_t blk = (size_t)(j * NVFP4_CPU_GROUPS + g);
            int8_t *codes = t->codes + blk * 256 + (size_t)l * 4;
            int8_t *exps = t->exps + blk * 256 + (size_t)l * 4;
            int32_t sum = 0;
            for (int i = 0; i < 16; i++) {
                codes[(i / 4) * 64 + i % 4] = bi.q[i];
                exps[(i / 4) * 64 + i % 4] = bi.e[i];
                sum += bi.q[i];
            }
            size_t lane = blk * NVFP4_CPU_LANES + (size_t)l;
            t->corr[lane] = NVFP4_CPU_Q_BIAS * sum;
            t->scale4[lane] = ldexpf((float)bi.is, -11); /* exact */
            t->lim_low[lane] = bi.low + NVFP4_CPU_LIM_LOW;
            t->lim_top[lane] = bi.top + NVFP4_CPU_LIM_TOP;
            t->iscale[(size_t)(col * nb + j)] = bi.is;
            if (t->sbyte) t->sbyte[(size_t)(col * nb + j)] = bi.s;
        }
        has_nan[col] = (uint8_t)any_nan;
    }
}

/*-------------------------------------------------------------------------
 *  The exact steps (slow paths)
 *-------------------------------------------------------------------------*/
/* FP32 bit casts: nvfp4_bits_of_f32 / nvfp4_f32_of_bits (core/internal.h) */
#define f32_bits nvfp4_bits_of_f32
#define f32_from_bits nvfp4_f32_of_bits

/* D = sum q_a q_b over block j of (row, col): the packed codes read plainly. */
static int32_t block_dot(const nvfp4_cpu_apack *a, int64_t row, const nvfp4_cpu_btile *b, int col,
                         int64_t j)
{
    const uint8_t *ac = a->codes + (size_t)(row * a->k + j * 16);
    const int8_t *bc = b->codes + (size_t)(j * NVFP4_CPU_GROUPS + col / NVFP4_CPU_LANES) * 256 +
                       (size_t)(col % NVFP4_CPU_LANES) * 4; /* element i at (i/4)*64 + i%4 */
    int32_t d = 0;
    for (int i = 0; i < 16; i++) d += ((int32_t)ac[i] - NVFP4_CPU_Q_BIAS) * bc[(i / 4) * 64 + i % 4];
    return d;
}

float nvfp4_cpu_sm120_slow(float c, const nvfp4_cpu_apack *a, int64_t row,
                           const nvfp4_cpu_btile *b, int col, int64_t block, int64_t block_end)
{
    int32_t sum4[NVFP4_CPU_STEP_BLOCKS];
    uint32_t sa = 0, sb = 0; /* padding: zero scales, zero codes */
    for (int q = 0; q < NVFP4_CPU_STEP_BLOCKS; q++) {
        const int64_t j = block + q;
        sum4[q] = 0;
        if (j < block_end) {
            sa |= (uint32_t)a->sbyte[(size_t)(row * a->nblocks + j)] << (8 * q);
            sb |= (uint32_t)b->sbyte[(size_t)((int64_t)col * b->nblocks + j)] << (8 * q);
            sum4[q] = block_dot(a, row, b, col, j);
        }
    }
    /* "every product -0" only matters for c = -0, which a chain from +0 never holds */
    return nvfp4_f32_from_bits(nvfp4_sm120_step_bits(nvfp4_f32_bits(c), sum4, 0, sa, sb, &nvfp4_sm90_hw_rules));
}

float nvfp4_cpu_sm90_slow(float c, const nvfp4_cpu_apack *a, int64_t row,
                          const nvfp4_cpu_btile *b, int col, int64_t block)
{
    const uint8_t *ac = a->codes + (size_t)(row * a->k + block * 16);
    const int8_t *ae = a->exps + (size_t)(row * a->k + block * 16);
    size_t blk = (size_t)(block * NVFP4_CPU_GROUPS + col / NVFP4_CPU_LANES);
    int lane = col % NVFP4_CPU_LANES;
    const int8_t *bc = b->codes + blk * 256 + lane * 4; /* element i at (i/4)*64 + i%4 */
    const int8_t *be = b->exps + blk * 256 + lane * 4;  /* the same */
    int64_t scale_product = (int64_t)a->iscale[(size_t)(row * a->nblocks + block)] *
                            b->iscale[(size_t)((int64_t)col * b->nblocks + block)];

    /* c = cmant * 2^c_lsb; a product = qq * scale_product * 2^-20. */
    uint32_t cbits = f32_bits(c);
    int cfield = (int)((cbits >> 23) & 0xffu);
    int64_t cmant = cfield ? (int64_t)((cbits & 0x7fffffu) | 0x800000u) : (int64_t)(cbits & 0x7fffffu);
    int c_lsb = (cfield ? cfield : 1) - 127 - 23;

    /* E over the nonzero terms only. */
    int have_e = cmant != 0;
    int e_max = cmant ? c_lsb + 23 : 0;
    int32_t qq[16];
    for (int i = 0; i < 16; i++) {
        qq[i] = ((int32_t)ac[i] - NVFP4_CPU_Q_BIAS) * bc[(i / 4) * 64 + i % 4];
        if (qq[i] == 0 || scale_product == 0) continue;
        int e = ae[i] + be[(i / 4) * 64 + i % 4];
        if (!have_e || e > e_max) e_max = e;
        have_e = 1;
    }
    if (!have_e) return 0.0f; /* every term zero: +0 (c is never -0, see top) */

    /* Count in units of 2^unit.  Every term is a multiple of 2^-20, so
     * aligning to 2^-20 when E - 25 is finer drops no bit. */
    int unit = e_max - 25 > -20 ? e_max - 25 : -20;
    int64_t sum = 0;
    for (int i = 0; i < 16; i++) {
        int64_t p = (int64_t)qq[i] * scale_product; /* |p| < 2^43 */
        uint64_t mag = (uint64_t)(p < 0 ? -p : p) >> (unit + 20);
        sum += p < 0 ? -(int64_t)mag : (int64_t)mag;
    }
    if (cmant) {
        int shift = unit - c_lsb; /* >= -2 since c_lsb + 23 <= E */
        uint64_t mag = shift >= 0 ? (shift >= 40 ? 0 : (uint64_t)cmant >> shift)
                                  : (uint64_t)cmant << -shift;
        sum += (cbits >> 31) ? -(int64_t)mag : (int64_t)mag;
    }
    if (sum == 0) return 0.0f;
    uint64_t mag = (uint64_t)(sum < 0 ? -sum : sum); /* < 2^32 */
    int p = 63 - __builtin_clzll(mag);
    if (p > 23) mag = (mag >> (p - 23)) << (p - 23); /* truncate to 24 bits */
    float r = ldexpf((float)mag, unit); /* exact; |r| >= 2^128 gives Inf, as the step does */
    return sum < 0 ? -r : r;
}

/*-------------------------------------------------------------------------
 *  Portable sm90 kernel
 *-------------------------------------------------------------------------*/

/* The FP32 nearest to x toward zero, for an x within FP32's normal range
 * (or zero): x's significand cut to 24 bits is a float, converted exactly. */
static float f32_toward_zero(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    u &= ~(uint64_t)0x1fffffff;
    memcpy(&x, &u, sizeof x);
    return (float)x;
}

/* RZ_FP32(c + s) for an exact c + s: the double sum is exact. */
static float add_toward_zero(float c, float s) { return f32_toward_zero((double)c + (double)s); }

/* c (exponent field f != 0) with its bits below 2^(max(e_c, pmax) - 25)
 * cleared: the step's truncation of the c term when the largest product
 * exponent is pmax. */
static float truncate_c(float c, int32_t f, int pmax)
{
    int shift = pmax - (f - 127) - 2; /* (E - 25) - (e_c - 23) with E = pmax */
    if (shift <= 0) return c;
    if (shift >= 24) return 0.0f;
    return f32_from_bits(f32_bits(c) & (0xffffffffu << shift));
}

void nvfp4_cpu_sm90_kernel_portable(const nvfp4_cpu_apack *a, const nvfp4_cpu_btile *b,
                                    int64_t row_begin, int64_t row_end, int64_t block_begin,
                                    int64_t block_end, float *acc)
{
    int64_t K = a->k, nb = a->nblocks;
    for (int g = 0; g < NVFP4_CPU_GROUPS; g++) {
        for (int64_t r = row_begin; r < row_end; r++) {
            float c[NVFP4_CPU_LANES] = {0};
            for (int64_t j = block_begin; j < block_end; j++) {
                size_t blk = (size_t)(j * NVFP4_CPU_GROUPS + g);
                const int8_t *bc = b->codes + blk * 256;
                const int32_t *corr = b->corr + blk * NVFP4_CPU_LANES;
                const float *scale4 = b->scale4 + blk * NVFP4_CPU_LANES;
                const int32_t *lim_low = b->lim_low + blk * NVFP4_CPU_LANES;
                const int32_t *lim_top = b->lim_top + blk * NVFP4_CPU_LANES;
                const uint8_t *ac = a->codes + (size_t)(r * K + j * 16);
                size_t ab = (size_t)(r * nb + j);
                float sa = a->scale[ab];
                int32_t alow = a->low[ab], atop = a->top[ab];
                for (int l = 0; l < NVFP4_CPU_LANES; l++) {
                    int32_t d = -corr[l];
                    for (int kq = 0; kq < 4; kq++)
                        for (int t = 0; t < 4; t++)
                            d += (int32_t)ac[4 * kq + t] * bc[kq * 64 + l * 4 + t];
                    float s = (float)d * (sa * scale4[l]); /* exact */
                    int32_t f = (int32_t)((f32_bits(c[l]) >> 23) & 0xffu);
                    if (f > alow + lim_low[l]) {
                        c[l] = nvfp4_cpu_sm90_slow(c[l], a, r, b, g * NVFP4_CPU_LANES + l, j);
                        continue;
                    }
                    float ct = c[l];
                    if (f != 0 && f < atop + lim_top[l]) {
                        /* exact largest product exponent; zeros carry EXP_ZERO */
                        const int8_t *ae = a->exps + (size_t)(r * K + j * 16);
                        const int8_t *be = b->exps + blk * 256 + (size_t)l * 4;
                        int pmax = -128;
                        for (int i = 0; i < 16; i++) {
                            int eb = be[(i / 4) * 64 + i % 4];
                            if (ae[i] != NVFP4_CPU_EXP_ZERO && eb != NVFP4_CPU_EXP_ZERO &&
                                ae[i] + eb > pmax)
                                pmax = ae[i] + eb;
                        }
                        ct = truncate_c(ct, f, pmax);
                    }
                    c[l] = add_toward_zero(ct, s);
                }
            }
            for (int l = 0; l < NVFP4_CPU_LANES; l++)
                acc[(r - row_begin) * NVFP4_CPU_TILE + g * NVFP4_CPU_LANES + l] = c[l];
        }
    }
}

/*-------------------------------------------------------------------------
 *  Portable sm120 kernel
 *-------------------------------------------------------------------------*/

void nvfp4_cpu_sm120_kernel_portable(const nvfp4_cpu_apack *a, const nvfp4_cpu_btile *b,
                                     int64_t row_begin, int64_t row_end, int64_t block_begin,
                                     int64_t block_end, float *acc)
{
    int64_t nb = a->nblocks;
    for (int g = 0; g < NVFP4_CPU_GROUPS; g++) {
        for (int64_t r = row_begin; r < row_end; r++) {
            float c[NVFP4_CPU_LANES] = {0};
            for (int64_t j0 = block_begin; j0 < block_end; j0 += NVFP4_CPU_STEP_BLOCKS) {
                int64_t nq = block_end - j0 < NVFP4_CPU_STEP_BLOCKS ? block_end - j0
                                                                    : NVFP4_CPU_STEP_BLOCKS;
                int64_t st = j0 / NVFP4_CPU_STEP_BLOCKS;
                int32_t ahi = a->step_hi[(size_t)(r * a->nsteps + st)];
                int32_t alo = a->step_lo[(size_t)(r * a->nsteps + st)];
                size_t lane0 = (size_t)(st * NVFP4_CPU_GROUPS + g) * NVFP4_CPU_LANES;
                for (int l = 0; l < NVFP4_CPU_LANES; l++) {
                    int col = g * NVFP4_CPU_LANES + l;
                    /* guard (cpu_internal.h): f = c's exponent field */
                    int32_t f = (int32_t)((f32_bits(c[l]) >> 23) & 0xffu);
                    if (f > alo + b->s120_lim_low[lane0 + l] ||
                        (ahi - alo) + b->s120_spread[lane0 + l] > NVFP4_CPU_SM120_BLOCK_SLACK ||
                        (f != 0 && f < ahi + b->s120_lim_top[lane0 + l])) {
                        c[l] = nvfp4_cpu_sm120_slow(c[l], a, r, b, col, j0, block_end);
                        continue;
                    }
                    double x = c[l]; /* every partial sum exact */
                    for (int64_t j = j0; j < j0 + nq; j++) {
                        size_t blane = (size_t)(j * NVFP4_CPU_GROUPS + g) * NVFP4_CPU_LANES + (size_t)l;
                        float scale = a->scale[(size_t)(r * nb + j)] * b->scale4[blane]; /* exact */
                        x += (double)((float)block_dot(a, r, b, col, j) * scale);     /* exact */
                    }
                    c[l] = f32_toward_zero(x);
                }
            }
            for (int l = 0; l < NVFP4_CPU_LANES; l++)
                acc[(r - row_begin) * NVFP4_CPU_TILE + g * NVFP4_CPU_LANES + l] = c[l];
        }
    }
}

/*-------------------------------------------------------------------------
 *  EXACT model: the exact dot is sum_j D_j * is_a * is_b * 2^-20, an
 *  integer count of 2^-20; one RNE conversion gives the result.
 *-------------------------------------------------------------------------*/
#define EXACT_MAX_BLOCKS 65536 /* |D is_a is_b| < 2^47: 2^16 blocks fit an int64 */

static void exact_tile(const nvfp4_cpu_apack *a, const nvfp4_cpu_btile *b, int64_t row_begin,
                       int64_t row_end, int64_t block_begin, int64_t block_end, float *acc)
{
    int64_t nb = a->nblocks;
    for (int64_t r = row_begin; r < row_end; r++) {
        for (int col = 0; col < NVFP4_CPU_TILE; col++) {
            int64_t sum = 0;
            for (int64_t j = block_begin; j < block_end; j++)
                sum += (int64_t)block_dot(a, r, b, col, j) * a->iscale[(size_t)(r * nb + j)] *
                       b->iscale[(size_t)((int64_t)col * nb + j)];
            /* int64 -> float rounds to nearest even; the scaling is exact */
            acc[(r - row_begin) * NVFP4_CPU_TILE + col] = ldexpf((float)sum, -20);
        }
    }
}

/*-------------------------------------------------------------------------
 *  Driver: work items are (B tile, row chunk) pairs
 *-------------------------------------------------------------------------*/
typedef struct gemm_ctx {
    const nvfp4_gemm_args *args;
    const nvfp4_cpu_apack *ap;
    nvfp4_cpu_kernel *kernel;
    void (*pack_b)(nvfp4_cpu_btile *t, uint8_t *has_nan, const nvfp4_tensor *b, int64_t n0);
    int64_t n_cols;
    int64_t row_chunk; /* rows per work item, a multiple of MR */
    int64_t row_chunks;
    int64_t block_lo, block_hi; /* the 16-blocks computed (all of K, or one slice) */
    int64_t slice_blocks;       /* 16-blocks per K slice (nvfp4_k_slice_elems / 16) */
    float alpha;
    atomic_int failed;
} gemm_ctx;

static void write_outputs(const nvfp4_gemm_args *args, int64_t m, int64_t n, int64_t N, float acc,
                          float alpha)
{
    if (args->raw) args->raw[m * N + n] = acc;
    if (args->out) {
        float y = alpha * acc;
        if (args->bias) y = y + args->bias[n];
        args->out[m * N + n] = nvfp4_bf16_from_f32(y);
    }
}

static void gemm_items(void *p, int64_t begin, int64_t end)
{
    gemm_ctx *ctx = p;
    const nvfp4_cpu_apack *ap = ctx->ap;
    const nvfp4_gemm_args *args = ctx->args;
    btile_store bs;
    size_t acc_bytes = (size_t)ctx->row_chunk * NVFP4_CPU_TILE * sizeof(float);
    float *acc = aligned_alloc(64, acc_bytes), *part = aligned_alloc(64, acc_bytes);
    int sm120 = args->model == NVFP4_MODEL_SM120;
    if (!acc || !part || !btile_alloc(&bs, ap->k, sm120)) {
        free(acc);
        free(part);
        atomic_store(&ctx->failed, 1);
        return;
    }
    int64_t lo = ctx->block_lo, hi = ctx->block_hi, len = ctx->slice_blocks;
    int64_t packed_tile = -1;
    /* sm120 returns the sm90 step's NaN */
    uint32_t nan_bits = args->model == NVFP4_MODEL_EXACT ? EXACT_NAN_BITS : SM90_NAN_BITS;
    for (int64_t item = begin; item < end; item++) {
        int64_t tile = item / ctx->row_chunks;
        int64_t r0 = (item % ctx->row_chunks) * ctx->row_chunk;
        int64_t r1 = r0 + ctx->row_chunk < ap->rows_padded ? r0 + ctx->row_chunk : ap->rows_padded;
        int64_t n0 = tile * NVFP4_CPU_TILE;
        if (tile != packed_tile) {
            ctx->pack_b(&bs.t, bs.has_nan, args->b, n0);
            if (sm120) pack_btile_sm120(&bs.t);
            packed_tile = tile;
        }
        /* K slices: each a chain from +0; partials added in slice order (FP32 RNE) */
        for (int64_t j0 = lo; j0 < hi || j0 == lo; j0 += len) {
            int64_t j1 = j0 + len < hi ? j0 + len : hi;
            float *dst = j0 == lo ? acc : part;
            ctx->kernel(ap, &bs.t, r0, r1, j0, j1, dst);
            if (j0 > lo)
                for (size_t i = 0; i < (size_t)(r1 - r0) * NVFP4_CPU_TILE; i++) acc[i] += part[i];
        }
        int64_t rmax = r1 < ap->rows ? r1 : ap->rows;
        for (int64_t m = r0; m < rmax; m++) {
            for (int col = 0; col < NVFP4_CPU_TILE && n0 + col < ctx->n_cols; col++) {
                float v = acc[(m - r0) * NVFP4_CPU_TILE + col];
                if (ap->has_nan[m] || bs.has_nan[col]) v = f32_from_bits(nan_bits);
                write_outputs(args, m, n0 + col, ctx->n_cols, v, ctx->alpha);
            }
        }
    }
    btile_free(&bs);
    free(acc);
    free(part);
}

/*-------------------------------------------------------------------------
 *  Entry point
 *-------------------------------------------------------------------------*/
/* EXACT with more blocks than an int64 count holds: the model function over
 * FP16 operands built here (a' = q * is * 2^-10, exact in FP16). */
typedef struct exact_plain_ctx {
    const nvfp4_gemm_args *args;
    float alpha;
    atomic_int failed;
} exact_plain_ctx;

static void f16_operands(uint16_t *dst, const nvfp4_tensor *t, int64_t r)
{
    for (int64_t k = 0; k < t->cols; k++) {
        unsigned s = nvfp4_tensor_scale(t, r, k / NVFP4_BLOCK) & 0x7fu;
        uint8_t code = nvfp4_tensor_code(t, r, k);
        float v = s == 0x7f ? NAN
                            : ldexpf((float)nvfp4_cpu_tab.q[code] * (float)nvfp4_cpu_tab.is[s], -10);
        dst[k] = nvfp4_f16_from_f32(v);
    }
}

static void exact_plain_rows(void *p, int64_t begin, int64_t end)
{
    exact_plain_ctx *ctx = p;
    const nvfp4_tensor *a = ctx->args->a, *b = ctx->args->b;
    int64_t N = b->rows, K = a->cols;
    uint16_t *ar = malloc((size_t)K * 2), *br = malloc((size_t)K * 2);
    if (!ar || !br) {
        free(ar);
        free(br);
        atomic_store(&ctx->failed, 1);
        return;
    }
    for (int64_t m = begin; m < end; m++) {
        f16_operands(ar, a, m);
        int64_t len = nvfp4_k_slice_elems(K, ctx->args->k_slices);
        for (int64_t n = 0; n < N; n++) {
            f16_operands(br, b, n);
            float acc = 0.0f;
            for (int64_t k0 = 0; k0 < K || k0 == 0; k0 += len) {
                int64_t k1 = k0 + len < K ? k0 + len : K;
                float partial = nvfp4_exact_dot(0.0f, ar + k0, br + k0, k1 - k0, NVFP4_OPERAND_F16);
                acc = k0 == 0 ? partial : acc + partial;
            }
            write_outputs(ctx->args, m, n, N, acc, ctx->alpha);
        }
    }
    free(ar);
    free(br);
}

/* The driver over blocks [block_lo, block_hi) in slices of slice_blocks
 * blocks (sm120: block_lo and slice_blocks multiples of 4). */
static nvfp4_status gemm_packed(const nvfp4_gemm_args *args, float alpha, int nthreads,
                                int64_t block_lo, int64_t block_hi, int64_t slice_blocks)
{
    const nvfp4_tensor *a = args->a, *b = args->b;
    int64_t N = b->rows;
    nvfp4_cpu_apack ap;
    nvfp4_status st = apack_build(&ap, a, nthreads, args->model == NVFP4_MODEL_SM120);
    if (st != NVFP4_OK) return st;
    gemm_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.args = args;
    ctx.ap = &ap;
    int simd = simd_current();
    ctx.kernel = args->model == NVFP4_MODEL_EXACT ? exact_tile : kernel_for(simd, args->model);
    ctx.pack_b = simd == SIMD_PORTABLE ? nvfp4_cpu_pack_btile_portable : nvfp4_cpu_pack_btile_avx2;
    ctx.n_cols = N;
    ctx.block_lo = block_lo;
    ctx.block_hi = block_hi;
    ctx.slice_blocks = slice_blocks;
    ctx.alpha = alpha;
    atomic_init(&ctx.failed, 0);
    /* Few column tiles: split rows too, so that every thread has work. */
    int64_t tiles = (N + NVFP4_CPU_TILE - 1) / NVFP4_CPU_TILE;
    int64_t row_groups = ap.rows_padded / NVFP4_CPU_MR;
    int64_t want = 4 * (int64_t)nthreads;
    int64_t chunks = tiles >= want ? 1 : (want + tiles - 1) / tiles;
    if (chunks > row_groups) chunks = row_groups;
    ctx.row_chunk = (row_groups + chunks - 1) / chunks * NVFP4_CPU_MR;
    ctx.row_chunks = (ap.rows_padded + ctx.row_chunk - 1) / ctx.row_chunk;
    st = nvfp4_parallel_for(tiles * ctx.row_chunks, 1, nthreads, gemm_items, &ctx);
    apack_free(&ap);
    if (st != NVFP4_OK) return st;
    if (atomic_load(&ctx.failed))
        return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY,
                          "nvfp4_gemm_cpu: out of memory for a worker's B tile (K = %lld)",
                          (long long)a->cols);
    return NVFP4_OK;
}

nvfp4_status nvfp4_gemm_cpu(const nvfp4_gemm_args *args)
{
    nvfp4_status st = nvfp4_check_gemm_args(args, "nvfp4_gemm_cpu");
    if (st != NVFP4_OK) return st;
    const nvfp4_tensor *a = args->a, *b = args->b;
    if (args->nthreads < 0)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_gemm_cpu: nthreads is %d (use 0 for all cores)", args->nthreads);
    int64_t M = a->rows, N = b->rows;
    if (M == 0 || N == 0) return NVFP4_OK;
    nvfp4_cpu_tables_init();
    float alpha = a->per_tensor_scale * b->per_tensor_scale; /* FP32 RNE */
    int nthreads = args->nthreads > 0 ? args->nthreads : nvfp4_default_threads();

    if (args->model == NVFP4_MODEL_EXACT && a->cols / NVFP4_BLOCK > EXACT_MAX_BLOCKS) {
        exact_plain_ctx ctx = {args, alpha, 0};
        st = nvfp4_parallel_for(M, 1, nthreads, exact_plain_rows, &ctx);
        if (st == NVFP4_OK && atomic_load(&ctx.failed))
            st = nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "nvfp4_gemm_cpu: out of memory in a worker");
        return st;
    }
    return gemm_packed(args, alpha, nthreads, 0, a->cols / NVFP4_BLOCK,
                       nvfp4_k_slice_elems(a->cols, args->k_slices) / NVFP4_BLOCK);
}

nvfp4_status nvfp4_cpu_gemm_slice(const nvfp4_tensor *a, const nvfp4_tensor *b, nvfp4_model model,
                                  int64_t k_begin, int64_t k_end, float *raw, int nthreads)
{
    nvfp4_gemm_args args = {.a = a, .b = b, .raw = raw, .model = model, .nthreads = nthreads};
    nvfp4_status st = nvfp4_check_gemm_args(&args, "nvfp4_cpu_gemm_slice");
    if (st != NVFP4_OK) return st;
    if (k_begin < 0 || k_end < k_begin || k_end > a->cols || k_begin % NVFP4_BLOCK ||
        k_end % NVFP4_BLOCK || (model == NVFP4_MODEL_SM120 && k_begin % 64) ||
        (model == NVFP4_MODEL_EXACT && (k_end - k_begin) / NVFP4_BLOCK > EXACT_MAX_BLOCKS))
        return nvfp4_fail(NVFP4_ERR_UNSUPPORTED,
                          "nvfp4_cpu_gemm_slice: model %s over [%lld, %lld) of K = %lld",
                          nvfp4_model_name(model), (long long)k_begin, (long long)k_end,
                          (long long)a->cols);
    if (a->rows == 0 || b->rows == 0) return NVFP4_OK;
    nvfp4_cpu_tables_init();
    int64_t lo = k_begin / NVFP4_BLOCK, hi = k_end / NVFP4_BLOCK;
    return gemm_packed(&args, 1.0f, nthreads > 0 ? nthreads : nvfp4_default_threads(), lo, hi,
                       hi - lo > 0 ? hi - lo : 1);
}
