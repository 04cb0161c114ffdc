/* gemm_cpu_avx512.c -- the sm90 and sm120 kernels with AVX-512 (F, BW, DQ;
 * VNNI where the CPU has it), 16 columns per vector.  Compiled with
 * -mavx512f -mavx512bw -mavx512vl -mavx512dq and only called when the CPU
 * has them (gemm_cpu.c).  Same arithmetic as the portable kernels: D by byte
 * dot products, s = D * S_a * S_b / 4 exact in FP32.  sm90: the step as one
 * FMA rounded toward zero (RZ of the exact c + s); where the guard says c
 * may be truncated, c's low bits are cleared first (exact largest product
 * exponent by byte SIMD); lanes whose products may be truncated take
 * nvfp4_cpu_sm90_slow().  sm120: c + s_0 + .. + s_3 in doubles (exact), one
 * conversion to FP32 rounded toward zero; lanes the guard flags take
 * nvfp4_cpu_sm120_slow(). */
#ifndef AVX512_SUFFIX /* first pass: helpers, then the kernels twice */
#include <string.h>

#include "cpu/cpu_internal.h"

#if defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>

/* Per lane, the largest e_a,i + e_b,i over the nonzero products (at most
 * -89 when there is none: zeros carry -128 and the byte adds saturate).
 * ae: the row's 16 exponents; be: [kq][16 lanes][4] as the codes. */
static inline __m512i largest_product_exp(const int8_t *ae, const int8_t *be)
{
    int32_t w[4];
    memcpy(w, ae, sizeof w);
    __m512i m = _mm512_set1_epi8(-128);
    for (int k = 0; k < 4; k++)
        m = _mm512_max_epi8(m, _mm512_adds_epi8(_mm512_set1_epi32(w[k]),
                                                _mm512_load_si512((const void *)(be + 64 * k))));
    /* the largest of each lane's 4 bytes into its low byte, sign-extended */
    m = _mm512_max_epi8(m, _mm512_srli_epi32(m, 16));
    m = _mm512_max_epi8(m, _mm512_srli_epi32(m, 8));
    return _mm512_srai_epi32(_mm512_slli_epi32(m, 24), 24);
}

/* What the kernels read of B for one block and the 16 lanes of a group: the
 * codes for k = 4kq .. 4kq + 3 (b[kq]), 12 * sum q_b and S_b / 4. */
typedef struct bblock {
    __m512i b[4], corr;
    __m512 scale4;
} bblock;

static inline bblock load_bblock(const nvfp4_cpu_btile *t, size_t blk)
{
    bblock bb;
    const int8_t *bc = t->codes + blk * 256;
    bb.b[0] = _mm512_load_si512((const void *)bc);
    bb.b[1] = _mm512_load_si512((const void *)(bc + 64));
    bb.b[2] = _mm512_load_si512((const void *)(bc + 128));
    bb.b[3] = _mm512_load_si512((const void *)(bc + 192));
    bb.corr = _mm512_load_si512((const void *)(t->corr + blk * NVFP4_CPU_LANES));
    bb.scale4 = _mm512_load_ps(t->scale4 + blk * NVFP4_CPU_LANES);
    return bb;
}

/* The 16 columns' double halves: [0, 8) and [8, 16). */
static inline __m512d low_pd(__m512 x) { return _mm512_cvtps_pd(_mm512_castps512_ps256(x)); }
static inline __m512d high_pd(__m512 x)
{
    return _mm512_cvtps_pd(_mm512_extractf32x8_ps(x, 1));
}

/* The kernel bodies are written once, below, and compiled twice by
 * including this file into itself: with AVX-512 BW byte dot products, and
 * with VNNI (vpdpbusd: 4 instructions instead of 9) under a target pragma,
 * since the Makefile gives this file no VNNI flag.  AVX512_FN(name) is name
 * with the pass's suffix. */
#define AVX512_CAT2(a, b) a##b
#define AVX512_CAT(a, b) AVX512_CAT2(a, b)
#define AVX512_FN(name) AVX512_CAT(name, AVX512_SUFFIX)

#define AVX512_SUFFIX _avx512
#include "cpu/gemm_cpu_avx512.c"
#undef AVX512_SUFFIX

#pragma GCC push_options
#pragma GCC target("avx512vnni")
#define AVX512_SUFFIX _avx512vnni
#define AVX512_VNNI 1
#include "cpu/gemm_cpu_avx512.c"
#undef AVX512_VNNI
#undef AVX512_SUFFIX
#pragma GCC pop_options

#else
/* Built without the flags (another compiler or a hand build): still chosen
 * on a CPU with AVX-512 (dispatch asks the CPU), and the portable kernel gives the same bits. */
void nvfp4_cpu_sm90_kernel_avx512(const nvfp4_cpu_apack *a, const nvfp4_cpu_btile *b,
                                  int64_t row_begin, int64_t row_end, int64_t block_begin,
                                    int64_t block_end, float *acc)
{
    nvfp4_cpu_sm90_kernel_portable(a, b, row_begin, row_end, block_begin, block_end, acc);
}

void nvfp4_cpu_sm90_kernel_avx512vnni(const nvfp4_cpu_apack *a, const nvfp4_cpu_btile *b,
                                      int64_t row_begin, int64_t row_end, int64_t block_begin,
                                    int64_t block_end, float *acc)
{
    nvfp4_cpu_sm90_kernel_portable(a, b, row_begin, row_end, block_begin, block_end, acc);
}

void nvfp4_cpu_sm120_kernel_avx512(const nvfp4_cpu_apack *a, const nvfp4_cpu_btile *b,
                                   int64_t row_begin, int64_t row_end, int64_t block_begin,
                                   int64_t block_end, float *acc)
{
    nvfp4_cpu_sm120_kernel_portable(a, b, row_begin, row_end, block_begin, block_end, acc);
}

void nvfp4_cpu_sm120_kernel_avx512vnni(const nvfp4_cpu_apack *a, const nvfp4_cpu_btile *b,
                                       int64_t row_begin, int64_t row_end, int64_t block_begin,
                                       int64_t block_end, float *acc)
{
    nvfp4_cpu_sm120_kernel_portable(a, b, row_begin, row_end, block_begin, block_end, acc);
}
#endif

#else /* second pass: one instance of each kernel, names ending in AVX512_SUFFIX */

/* D = sum (q_a + 12) q_b - 12 sum q_b of one block, per lane; ac: the row's
 * 16 codes. */
static inline __m512i AVX512_FN(block_dot)(const uint8_t *ac, const bblock *bb)
{
    int32_t w[4];
    memcpy(w, ac, sizeof w);
#ifdef AVX512_VNNI
    __m512i d = _mm512_sub_epi32(_mm512_setzero_si512(), bb->corr);
    d = _mm512_dpbusd_epi32(d, _mm512_set1_epi32(w[0]), bb->b[0]);
    d = _mm512_dpbusd_epi32(d, _mm512_set1_epi32(w[1]), bb->b[1]);
    d = _mm512_dpbusd_epi32(d, _mm512_set1_epi32(w[2]), bb->b[2]);
    return _mm512_dpbusd_epi32(d, _mm512_set1_epi32(w[3]), bb->b[3]);
#else
    /* pairs of products in 16 bits (|sum| <= 2304), then 32 */
    __m512i p01 = _mm512_add_epi16(_mm512_maddubs_epi16(_mm512_set1_epi32(w[0]), bb->b[0]),
                                   _mm512_maddubs_epi16(_mm512_set1_epi32(w[1]), bb->b[1]));
    __m512i p23 = _mm512_add_epi16(_mm512_maddubs_epi16(_mm512_set1_epi32(w[2]), bb->b[2]),
                                   _mm512_maddubs_epi16(_mm512_set1_epi32(w[3]), bb->b[3]));
    return _mm512_sub_epi32(_mm512_madd_epi16(_mm512_add_epi16(p01, p23), _mm512_set1_epi16(1)),
                            bb->corr);
#endif
}

void AVX512_FN(nvfp4_cpu_sm90_kernel)(const nvfp4_cpu_apack *a, const nvfp4_cpu_btile *b,
                                      int64_t row_begin, int64_t row_end, int64_t block_begin,
                                      int64_t block_end, float *acc)
{
    const int64_t K = a->k, nb = a->nblocks;
    const __m512i zero = _mm512_setzero_si512();
    const __m512i all_ones = _mm512_set1_epi32(-1);
    const __m512i bias_minus_2 = _mm512_set1_epi32(127 - 2);
    const __m512i c24 = _mm512_set1_epi32(24), c32 = _mm512_set1_epi32(32);
    for (int g = 0; g < NVFP4_CPU_GROUPS; g++) {
        for (int64_t r = row_begin; r < row_end; r += NVFP4_CPU_MR) {
            __m512 c[NVFP4_CPU_MR];
            for (int rr = 0; rr < NVFP4_CPU_MR; rr++) c[rr] = _mm512_setzero_ps();
            for (int64_t j = block_begin; j < block_end; j++) {
                size_t blk = (size_t)(j * NVFP4_CPU_GROUPS + g);
                const bblock bb = load_bblock(b, blk);
                const size_t lane = blk * NVFP4_CPU_LANES;
                const __m512i lim_low = _mm512_load_si512((const void *)(b->lim_low + lane));
                const __m512i lim_top = _mm512_load_si512((const void *)(b->lim_top + lane));
                for (int rr = 0; rr < NVFP4_CPU_MR; rr++) {
                    const int64_t row = r + rr;
                    __m512i d = AVX512_FN(block_dot)(a->codes + (size_t)(row * K + j * 16), &bb);
                    const size_t ab = (size_t)(row * nb + j);
                    __m512 scale = _mm512_mul_ps(_mm512_set1_ps(a->scale[ab]), bb.scale4);
                    /* guard (cpu_internal.h): f = c's exponent field */
                    __m512i cbits = _mm512_castps_si512(c[rr]);
                    __m512i f = _mm512_srli_epi32(_mm512_slli_epi32(cbits, 1), 24);
                    __mmask16 c_may_lose = _mm512_mask_cmplt_epi32_mask(
                        _mm512_cmpneq_epi32_mask(f, zero), f,
                        _mm512_add_epi32(_mm512_set1_epi32(a->top[ab]), lim_top));
                    __m512 ct = c[rr];
                    if (c_may_lose) {
                        /* clear c's bits below 2^(max(e_c, P) - 25):
                         * shift = P - e_c - 2, none if <= 0, all if >= 24 */
                        __m512i pmax = largest_product_exp(a->exps + (size_t)(row * K + j * 16),
                                                           b->exps + blk * 256);
                        __m512i shift = _mm512_max_epi32(
                            _mm512_sub_epi32(_mm512_add_epi32(pmax, bias_minus_2), f), zero);
                        shift = _mm512_mask_mov_epi32(shift, _mm512_cmpge_epi32_mask(shift, c24), c32);
                        ct = _mm512_castsi512_ps(
                            _mm512_and_si512(cbits, _mm512_sllv_epi32(all_ones, shift)));
                    }
                    __m512 next = _mm512_fmadd_round_ps(_mm512_cvtepi32_ps(d), scale, ct,
                                                        _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
                    __mmask16 products_may_lose = _mm512_cmpgt_epi32_mask(
                        f, _mm512_add_epi32(_mm512_set1_epi32(a->low[ab]), lim_low));
                    if (products_may_lose) {
                        float cv[16], nv[16];
                        _mm512_storeu_ps(cv, c[rr]);
                        _mm512_storeu_ps(nv, next);
                        for (int l = 0; l < 16; l++)
                            if ((products_may_lose >> l) & 1)
                                nv[l] = nvfp4_cpu_sm90_slow(cv[l], a, row, b,
                                                            g * NVFP4_CPU_LANES + l, j);
                        next = _mm512_loadu_ps(nv);
                    }
                    c[rr] = next;
                }
            }
            for (int rr = 0; rr < NVFP4_CPU_MR; rr++)
                _mm512_storeu_ps(acc + (r - row_begin + rr) * NVFP4_CPU_TILE + g * NVFP4_CPU_LANES,
                                 c[rr]);
        }
    }
}

/* One sm120 step (blocks j0 .. j0 + nq - 1) of rows r .. r + MR - 1, the 16
 * columns of group g: c[] in, the next accumulators out.  Inlined with
 * nq = 4 (every step but a short last one) and with nq < 4. */
static inline __attribute__((always_inline)) void
AVX512_FN(sm120_step)(const nvfp4_cpu_apack *a, const nvfp4_cpu_btile *b, int g, int64_t r,
                      int64_t j0, int nq, int64_t block_end, __m512 c[NVFP4_CPU_MR])
{
    const int64_t K = a->k, nb = a->nblocks;
    __m512d lo[NVFP4_CPU_MR], hi[NVFP4_CPU_MR]; /* c + s_0 + ..: every partial sum exact */
    for (int rr = 0; rr < NVFP4_CPU_MR; rr++) {
        lo[rr] = low_pd(c[rr]);
        hi[rr] = high_pd(c[rr]);
    }
    for (int q = 0; q < nq; q++) {
        const int64_t j = j0 + q;
        const bblock bb = load_bblock(b, (size_t)(j * NVFP4_CPU_GROUPS + g));
        for (int rr = 0; rr < NVFP4_CPU_MR; rr++) {
            const int64_t row = r + rr;
            __m512i d = AVX512_FN(block_dot)(a->codes + (size_t)(row * K + j * 16), &bb);
            __m512 scale = _mm512_mul_ps(_mm512_set1_ps(a->scale[row * nb + j]), bb.scale4);
            __m512 s = _mm512_mul_ps(_mm512_cvtepi32_ps(d), scale); /* exact */
            lo[rr] = _mm512_add_pd(lo[rr], low_pd(s));
            hi[rr] = _mm512_add_pd(hi[rr], high_pd(s));
        }
    }
    /* guard (cpu_internal.h), per lane: f = c's exponent field */
    const int64_t st = j0 / NVFP4_CPU_STEP_BLOCKS;
    const size_t lane = (size_t)(st * NVFP4_CPU_GROUPS + g) * NVFP4_CPU_LANES;
    const __m512i lim_low = _mm512_load_si512((const void *)(b->s120_lim_low + lane));
    const __m512i lim_top = _mm512_load_si512((const void *)(b->s120_lim_top + lane));
    const __m512i spread = _mm512_load_si512((const void *)(b->s120_spread + lane));
    for (int rr = 0; rr < NVFP4_CPU_MR; rr++) {
        const int64_t row = r + rr;
        const int32_t ahi = a->step_hi[row * a->nsteps + st], alo = a->step_lo[row * a->nsteps + st];
        __m512 next = _mm512_insertf32x8(
            _mm512_castps256_ps512(_mm512_cvt_roundpd_ps(lo[rr], _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)),
            _mm512_cvt_roundpd_ps(hi[rr], _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), 1);
        __m512i f = _mm512_srli_epi32(_mm512_slli_epi32(_mm512_castps_si512(c[rr]), 1), 24);
        __mmask16 slow =
            _mm512_cmpgt_epi32_mask(f, _mm512_add_epi32(_mm512_set1_epi32(alo), lim_low)) |
            _mm512_cmpgt_epi32_mask(spread,
                                    _mm512_set1_epi32(NVFP4_CPU_SM120_BLOCK_SLACK - (ahi - alo))) |
            _mm512_mask_cmplt_epi32_mask(_mm512_test_epi32_mask(f, f), f,
                                         _mm512_add_epi32(_mm512_set1_epi32(ahi), lim_top));
        if (slow) {
            float cv[16], nv[16];
            _mm512_storeu_ps(cv, c[rr]);
            _mm512_storeu_ps(nv, next);
            for (int l = 0; l < 16; l++)
                if ((slow >> l) & 1)
                    nv[l] = nvfp4_cpu_sm120_slow(cv[l], a, row, b, g * NVFP4_CPU_LANES + l, j0,
                                                 block_end);
            next = _mm512_loadu_ps(nv);
        }
        c[rr] = next;
    }
}

void AVX512_FN(nvfp4_cpu_sm120_kernel)(const nvfp4_cpu_apack *a, const nvfp4_cpu_btile *b,
                                       int64_t row_begin, int64_t row_end, int64_t block_begin,
                                       int64_t block_end, float *acc)
{
    for (int g = 0; g < NVFP4_CPU_GROUPS; g++) {
        for (int64_t r = row_begin; r < row_end; r += NVFP4_CPU_MR) {
            __m512 c[NVFP4_CPU_MR];
            for (int rr = 0; rr < NVFP4_CPU_MR; rr++) c[rr] = _mm512_setzero_ps();
            int64_t j0 = block_begin;
            for (; j0 + NVFP4_CPU_STEP_BLOCKS <= block_end; j0 += NVFP4_CPU_STEP_BLOCKS)
                AVX512_FN(sm120_step)(a, b, g, r, j0, NVFP4_CPU_STEP_BLOCKS, block_end, c);
            if (j0 < block_end) AVX512_FN(sm120_step)(a, b, g, r, j0, (int)(block_end - j0), block_end, c);
            for (int rr = 0; rr < NVFP4_CPU_MR; rr++)
                _mm512_storeu_ps(acc + (r - row_begin + rr) * NVFP4_CPU_TILE + g * NVFP4_CPU_LANES,
                                 c[rr]);
        }
    }
}

#endif
