/* gemm_cpu_avx2.c -- the sm90 kernel with AVX2, 8 columns per vector.
 * Compiled with -mavx2 -mbmi2 and only called when the CPU has them
 * (gemm_cpu.c).  Same arithmetic as the portable kernel; AVX2 has no
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

void nvfp4_cpu_sm90_kernel_avx2(const nvfp4_cpu_apack *a, const nvfp4_cpu_btile *b,
                                int64_t row_begin, int64_t row_end, float *acc)
{
    const int64_t K = a->k, nb = a->nblocks;
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i zero = _mm256_setzero_si256();
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
                        __m256 next = add_toward_zero(c[rr], s);
                        /* guard (cpu_internal.h): f = c's exponent field */
                        __m256i f = _mm256_srli_epi32(
                            _mm256_slli_epi32(_mm256_castps_si256(c[rr]), 1), 24);
                        __m256i too_big = _mm256_cmpgt_epi32(
                            f, _mm256_add_epi32(_mm256_set1_epi32(a->low[ab]), lim_low));
                        __m256i too_small = _mm256_andnot_si256(
                            _mm256_cmpeq_epi32(f, zero),
                            _mm256_cmpgt_epi32(
                                _mm256_add_epi32(_mm256_set1_epi32(a->top[ab]), lim_top), f));
                        int bad = _mm256_movemask_ps(
                            _mm256_castsi256_ps(_mm256_or_si256(too_big, too_small)));
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
