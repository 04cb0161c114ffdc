/* gemm_cpu_avx2.c -- the sm90 kernel with AVX2, 8 columns per vector.
 * Compiled with -mavx2 -mbmi2 and only called when the CPU has them
 * (gemm_cpu.c).  Same arithmetic as the AVX-512 kernel; AVX2 has no
 * per-instruction rounding, so RZ(c + s) is the nearest sum corrected by the
 * sign of its exact error (TwoSum). */
#include <string.h>

#include "cpu/cpu_internal.h"

#if defined(__AVX2__)
#include <immintrin.h>

/* RZ_FP32(c + s): h = RN(c + s) and e = (c + s) - h exactly; when e is
 * nonzero and of the other sign, h was rounded away from zero, and the
 * float one step toward zero (bit pattern minus one) is the answer. */
static inline __m256 add_toward_zero(__m256 c, __m256 s)
{
    __m256 h = _mm256_add_ps(c, s);
    __m256 sv = _mm256_sub_ps(h, c);
    __m256 cv = _mm256_sub_ps(h, sv);
    __m256 e = _mm256_add_ps(_mm256_sub_ps(c, cv), _mm256_sub_ps(s, sv));
    __m256i opposite = _mm256_srai_epi32(_mm256_castps_si256(_mm256_xor_ps(e, h)), 31);
    __m256i nonzero = _mm256_castps_si256(_mm256_cmp_ps(e, _mm256_setzero_ps(), _CMP_NEQ_OQ));
    __m256i minus_one = _mm256_and_si256(opposite, nonzero);
    return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(h), minus_one));
}

/* Per lane of half h (8 columns), the largest e_a,i + e_b,i over the
 * nonzero products (at most -89 when there is none: zeros carry -128 and the
 * byte adds saturate).  ae: the row's 16 exponents; be: [i][16 lanes];
 * ctl[p]: the low 16 bytes select element 2p, the high ones 2p + 1. */
static inline __m256i largest_product_exp(const int8_t *ae, const int8_t *be, const __m256i ctl[8],
                                          int h)
{
    __m256i a = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ae));
    __m256i m = _mm256_set1_epi8(-128);
    for (int p = 0; p < 8; p++) {
        __m256i sum = _mm256_adds_epi8(_mm256_shuffle_epi8(a, ctl[p]),
                                       _mm256_load_si256((const __m256i *)(be + 32 * p)));
        m = _mm256_max_epi8(m, sum);
    }
    __m128i x = _mm_max_epi8(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    if (h) x = _mm_srli_si128(x, 8);
    return _mm256_cvtepi8_epi32(x);
}

void nvfp4_cpu_sm90_kernel_avx2(const nvfp4_cpu_apack *a, const nvfp4_cpu_btile *b,
                                int64_t row_begin, int64_t row_end, float *acc)
{
    const int64_t K = a->k, nb = a->nblocks;
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i zero = _mm256_setzero_si256();
    const __m256i all_ones = _mm256_set1_epi32(-1);
    const __m256i bias_minus_2 = _mm256_set1_epi32(127 - 2);
    const __m256i c23 = _mm256_set1_epi32(23), c32 = _mm256_set1_epi32(32);
    __m256i ctl[8];
    for (int p = 0; p < 8; p++)
        ctl[p] = _mm256_setr_m128i(_mm_set1_epi8((char)(2 * p)), _mm_set1_epi8((char)(2 * p + 1)));
    for (int g = 0; g < NVFP4_CPU_GROUPS; g++) {
        for (int h = 0; h < 2; h++) { /* the two 8-column halves of a group */
            for (int64_t r = row_begin; r < row_end; r += NVFP4_CPU_MR) {
                __m256 c[NVFP4_CPU_MR];
                for (int rr = 0; rr < NVFP4_CPU_MR; rr++) c[rr] = _mm256_setzero_ps();
                for (int64_t j = 0; j < nb; j++) {
                    size_t blk = (size_t)(j * NVFP4_CPU_GROUPS + g);
                    const int8_t *bc = b->codes + blk * 256 + h * 32;
                    const __m256i b0 = _mm256_load_si256((const __m256i *)bc);
                    const __m256i b1 = _mm256_load_si256((const __m256i *)(bc + 64));
                    const __m256i b2 = _mm256_load_si256((const __m256i *)(bc + 128));
                    const __m256i b3 = _mm256_load_si256((const __m256i *)(bc + 192));
                    const size_t lane = blk * NVFP4_CPU_LANES + (size_t)h * 8;
                    const __m256i corr = _mm256_load_si256((const __m256i *)(b->corr + lane));
                    const __m256 scale4 = _mm256_load_ps(b->scale4 + lane);
                    const __m256i lim_low = _mm256_load_si256((const __m256i *)(b->lim_low + lane));
                    const __m256i lim_top = _mm256_load_si256((const __m256i *)(b->lim_top + lane));
                    for (int rr = 0; rr < NVFP4_CPU_MR; rr++) {
                        const int64_t row = r + rr;
                        int32_t w[4];
                        memcpy(w, a->codes + (size_t)(row * K + j * 16), sizeof w);
                        __m256i p01 = _mm256_add_epi16(
                            _mm256_maddubs_epi16(_mm256_set1_epi32(w[0]), b0),
                            _mm256_maddubs_epi16(_mm256_set1_epi32(w[1]), b1));
                        __m256i p23 = _mm256_add_epi16(
                            _mm256_maddubs_epi16(_mm256_set1_epi32(w[2]), b2),
                            _mm256_maddubs_epi16(_mm256_set1_epi32(w[3]), b3));
                        __m256i d = _mm256_sub_epi32(
                            _mm256_madd_epi16(_mm256_add_epi16(p01, p23), ones), corr);
                        const size_t ab = (size_t)(row * nb + j);
                        __m256 scale = _mm256_mul_ps(_mm256_set1_ps(a->scale[ab]), scale4);
                        __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(d), scale); /* exact */
                        /* guard (cpu_internal.h): f = c's exponent field */
                        __m256i cbits = _mm256_castps_si256(c[rr]);
                        __m256i f = _mm256_srli_epi32(_mm256_slli_epi32(cbits, 1), 24);
                        __m256i c_may_lose = _mm256_andnot_si256(
                            _mm256_cmpeq_epi32(f, zero),
                            _mm256_cmpgt_epi32(
                                _mm256_add_epi32(_mm256_set1_epi32(a->top[ab]), lim_top), f));
                        __m256 ct = c[rr];
                        if (!_mm256_testz_si256(c_may_lose, c_may_lose)) {
                            /* clear c's bits below 2^(max(e_c, P) - 25):
                             * shift = P - e_c - 2, none if <= 0, all if >= 24 */
                            __m256i pmax = largest_product_exp(
                                a->exps + (size_t)(row * K + j * 16), b->exps + blk * 256, ctl, h);
                            __m256i shift = _mm256_max_epi32(
                                _mm256_sub_epi32(_mm256_add_epi32(pmax, bias_minus_2), f), zero);
                            shift = _mm256_blendv_epi8(shift, c32, _mm256_cmpgt_epi32(shift, c23));
                            ct = _mm256_castsi256_ps(
                                _mm256_and_si256(cbits, _mm256_sllv_epi32(all_ones, shift)));
                        }
                        __m256 next = add_toward_zero(ct, s);
                        __m256i products_may_lose = _mm256_cmpgt_epi32(
                            f, _mm256_add_epi32(_mm256_set1_epi32(a->low[ab]), lim_low));
                        int bad = _mm256_movemask_ps(_mm256_castsi256_ps(products_may_lose));
                        if (bad) {
                            float cv[8], nv[8];
                            _mm256_storeu_ps(cv, c[rr]);
                            _mm256_storeu_ps(nv, next);
                            for (int l = 0; l < 8; l++)
                                if ((bad >> l) & 1)
                                    nv[l] = nvfp4_cpu_sm90_slow(
                                        cv[l], a, row, b, g * NVFP4_CPU_LANES + h * 8 + l, j);
                            next = _mm256_loadu_ps(nv);
                        }
                        c[rr] = next;
                    }
                }
                for (int rr = 0; rr < NVFP4_CPU_MR; rr++)
                    _mm256_storeu_ps(acc + (r - row_begin + rr) * NVFP4_CPU_TILE +
                                         g * NVFP4_CPU_LANES + h * 8,
                                     c[rr]);
            }
        }
    }
}

#else
/* Built without the flags: never chosen unless forced; same bits anyway. */
void nvfp4_cpu_sm90_kernel_avx2(const nvfp4_cpu_apack *a, const nvfp4_cpu_btile *b,
                                int64_t row_begin, int64_t row_end, float *acc)
{
    nvfp4_cpu_sm90_kernel_portable(a, b, row_begin, row_end, acc);
}
#endif
