/* gemm_cpu_avx2.c -- the sm90 and sm120 kernels with AVX2, 8 columns per
 * vector.  Compiled with -mavx2 -mbmi2 and only called when the CPU has them
 * (gemm_cpu.c).  Same arithmetic as the AVX-512 kernels; AVX2 has no
 * per-instruction rounding, so for sm90 RZ(c + s) is the nearest sum
 * corrected by the sign of its exact error (TwoSum), and for sm120 the exact
 * double sum is cut to 24 significant bits before its (then exact)
 * conversion to FP32. */
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
 * byte adds saturate).  ae: the row's 16 exponents; be: [kq][16 lanes][4]
 * as the codes. */
static inline __m256i largest_product_exp(const int8_t *ae, const int8_t *be, int h)
{
    int32_t w[4];
    memcpy(w, ae, sizeof w);
    __m256i m = _mm256_set1_epi8(-128);
    for (int k = 0; k < 4; k++)
        m = _mm256_max_epi8(m, _mm256_adds_epi8(_mm256_set1_epi32(w[k]),
                                                _mm256_load_si256((const __m256i *)(be + 64 * k + 32 * h))));
    /* the largest of each lane's 4 bytes into its low byte, sign-extended */
    m = _mm256_max_epi8(m, _mm256_srli_epi32(m, 16));
    m = _mm256_max_epi8(m, _mm256_srli_epi32(m, 8));
    return _mm256_srai_epi32(_mm256_slli_epi32(m, 24), 24);
}

/* 4x4 transpose of 32-bit elements: rows r[i] -> columns. */
static inline void transpose4(__m128i r[4])
{
    __m128i t0 = _mm_unpacklo_epi32(r[0], r[1]), t1 = _mm_unpackhi_epi32(r[0], r[1]);
    __m128i t2 = _mm_unpacklo_epi32(r[2], r[3]), t3 = _mm_unpackhi_epi32(r[2], r[3]);
    r[0] = _mm_unpacklo_epi64(t0, t2);
    r[1] = _mm_unpackhi_epi64(t0, t2);
    r[2] = _mm_unpacklo_epi64(t1, t3);
    r[3] = _mm_unpackhi_epi64(t1, t3);
}

/* Each 32-bit lane's 4 bytes reduced (max or min) into all its bytes, then
 * the low byte sign-extended to 32 bits. */
static inline __m128i lane_max8(__m128i x)
{
    x = _mm_max_epi8(x, _mm_shuffle_epi8(x, _mm_setr_epi8(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13)));
    x = _mm_max_epi8(x, _mm_shuffle_epi8(x, _mm_setr_epi8(1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14)));
    return _mm_srai_epi32(_mm_slli_epi32(x, 24), 24);
}

static inline __m128i lane_min8(__m128i x)
{
    x = _mm_min_epi8(x, _mm_shuffle_epi8(x, _mm_setr_epi8(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13)));
    x = _mm_min_epi8(x, _mm_shuffle_epi8(x, _mm_setr_epi8(1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14)));
    return _mm_srai_epi32(_mm_slli_epi32(x, 24), 24);
}

void nvfp4_cpu_pack_btile_avx2(nvfp4_cpu_btile *t, uint8_t *has_nan, const nvfp4_tensor *b,
                               int64_t n0)
{
    static const uint8_t zero_codes[8] = {0};
    const nvfp4_cpu_tables *tab = &nvfp4_cpu_tab;
    const int64_t nb = t->nblocks, row_bytes = b->cols / 2;
    const int hi_first = b->nibble_order == NVFP4_HI_FIRST;
    const __m128i qtab = _mm_load_si128((const __m128i *)tab->q);
    const __m128i low4 = _mm_set1_epi8(0x0f);
    const __m128i ones8 = _mm_set1_epi8(1), ones16 = _mm_set1_epi16(1);
    for (int col0 = 0; col0 < NVFP4_CPU_TILE; col0 += 4) {
        const uint8_t *rows[4];
        int64_t n[4];
        int nan[4] = {0, 0, 0, 0};
        for (int c = 0; c < 4; c++) {
            n[c] = n0 + col0 + c;
            rows[c] = n[c] < b->rows ? b->codes + (size_t)(n[c] * row_bytes) : NULL;
        }
        const int g = col0 / NVFP4_CPU_LANES, l0 = col0 % NVFP4_CPU_LANES;
        for (int64_t j = 0; j < nb; j++) {
            __m128i q[4], e[4], lsb[4];
            int32_t is[4];
            float scale4[4];
            uint8_t sbyte[4];
            for (int c = 0; c < 4; c++) {
                unsigned s = 0;
                const uint8_t *src = zero_codes;
                if (rows[c]) {
                    s = b->scales[nvfp4_cpu_scale_offset(b, n[c], j)] & 0x7fu; /* sign ignored */
                    if (s == 0x7f) { /* NaN: packed as zeros, the output is NaN */
                        nan[c] = 1;
                        s = 0;
                    }
                    src = rows[c] + j * 8;
                }
                is[c] = tab->is[s];
                scale4[c] = tab->scale4[s];
                sbyte[c] = (uint8_t)s;
                __m128i x = _mm_loadl_epi64((const __m128i *)src);
                __m128i hi = _mm_and_si128(_mm_srli_epi16(x, 4), low4), lo = _mm_and_si128(x, low4);
                __m128i codes = hi_first ? _mm_unpacklo_epi8(hi, lo) : _mm_unpacklo_epi8(lo, hi);
                q[c] = _mm_shuffle_epi8(qtab, codes);
                e[c] = _mm_shuffle_epi8(_mm_load_si128((const __m128i *)tab->exp[s]), codes);
                lsb[c] = _mm_shuffle_epi8(_mm_load_si128((const __m128i *)tab->lsb[s]), codes);
            }
            /* rows of 4 columns -> [kq][lane][4] */
            transpose4(q);
            transpose4(e);
            transpose4(lsb);
            const size_t blk = (size_t)(j * NVFP4_CPU_GROUPS + g);
            int8_t *codes_out = t->codes + blk * 256 + (size_t)l0 * 4;
            int8_t *exps_out = t->exps + blk * 256 + (size_t)l0 * 4;
            __m128i sum = _mm_setzero_si128();
            for (int kq = 0; kq < 4; kq++) {
                _mm_storeu_si128((__m128i *)(codes_out + kq * 64), q[kq]);
                _mm_storeu_si128((__m128i *)(exps_out + kq * 64), e[kq]);
                sum = _mm_add_epi32(sum, _mm_madd_epi16(_mm_maddubs_epi16(ones8, q[kq]), ones16));
            }
            __m128i top = lane_max8(_mm_max_epi8(_mm_max_epi8(e[0], e[1]), _mm_max_epi8(e[2], e[3])));
            __m128i low = lane_min8(_mm_min_epi8(_mm_min_epi8(lsb[0], lsb[1]), _mm_min_epi8(lsb[2], lsb[3])));
            const size_t lane = blk * NVFP4_CPU_LANES + (size_t)l0;
            _mm_storeu_si128((__m128i *)(t->corr + lane), _mm_mullo_epi32(sum, _mm_set1_epi32(NVFP4_CPU_Q_BIAS)));
            _mm_storeu_si128((__m128i *)(t->lim_top + lane), _mm_add_epi32(top, _mm_set1_epi32(NVFP4_CPU_LIM_TOP)));
            _mm_storeu_si128((__m128i *)(t->lim_low + lane), _mm_add_epi32(low, _mm_set1_epi32(NVFP4_CPU_LIM_LOW)));
            _mm_storeu_ps(t->scale4 + lane, _mm_loadu_ps(scale4));
            for (int c = 0; c < 4; c++) t->iscale[(size_t)((col0 + c) * nb + j)] = is[c];
            if (t->sbyte)
                for (int c = 0; c < 4; c++) t->sbyte[(size_t)((col0 + c) * nb + j)] = sbyte[c];
        }
        for (int c = 0; c < 4; c++) has_nan[col0 + c] = (uint8_t)nan[c];
    }
}

/* What the kernels read of B for one block and 8 lanes (half h of group g):
 * the codes for k = 4kq .. 4kq + 3 (b[kq]), 12 * sum q_b and S_b / 4. */
typedef struct bblock {
    __m256i b[4], corr;
    __m256 scale4;
} bblock;

static inline bblock load_bblock(const nvfp4_cpu_btile *t, size_t blk, int h)
{
    bblock bb;
    const int8_t *bc = t->codes + blk * 256 + h * 32;
    bb.b[0] = _mm256_load_si256((const __m256i *)bc);
    bb.b[1] = _mm256_load_si256((const __m256i *)(bc + 64));
    bb.b[2] = _mm256_load_si256((const __m256i *)(bc + 128));
    bb.b[3] = _mm256_load_si256((const __m256i *)(bc + 192));
    const size_t lane = blk * NVFP4_CPU_LANES + (size_t)h * 8;
    bb.corr = _mm256_load_si256((const __m256i *)(t->corr + lane));
    bb.scale4 = _mm256_load_ps(t->scale4 + lane);
    return bb;
}

/* D = sum (q_a + 12) q_b - 12 sum q_b of one block, per lane; ac: the row's
 * 16 codes. */
static inline __m256i block_dot(const uint8_t *ac, const bblock *bb)
{
    int32_t w[4];
    memcpy(w, ac, sizeof w);
    /* pairs of products in 16 bits (|sum| <= 2304), then 32 */
    __m256i p01 = _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_set1_epi32(w[0]), bb->b[0]),
                                   _mm256_maddubs_epi16(_mm256_set1_epi32(w[1]), bb->b[1]));
    __m256i p23 = _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_set1_epi32(w[2]), bb->b[2]),
                                   _mm256_maddubs_epi16(_mm256_set1_epi32(w[3]), bb->b[3]));
    return _mm256_sub_epi32(_mm256_madd_epi16(_mm256_add_epi16(p01, p23), _mm256_set1_epi16(1)),
                            bb->corr);
}

void nvfp4_cpu_sm90_kernel_avx2(const nvfp4_cpu_apack *a, const nvfp4_cpu_btile *b,
                                int64_t row_begin, int64_t row_end, int64_t block_begin,
                                    int64_t block_end, float *acc)
{
    const int64_t K = a->k, nb = a->nblocks;
    const __m256i zero = _mm256_setzero_si256();
    const __m256i all_ones = _mm256_set1_epi32(-1);
    const __m256i bias_minus_2 = _mm256_set1_epi32(127 - 2);
    const __m256i c23 = _mm256_set1_epi32(23), c32 = _mm256_set1_epi32(32);
    for (int g = 0; g < NVFP4_CPU_GROUPS; g++) {
        for (int h = 0; h < 2; h++) { /* the two 8-column halves of a group */
            for (int64_t r = row_begin; r < row_end; r += NVFP4_CPU_MR) {
                __m256 c[NVFP4_CPU_MR];
                for (int rr = 0; rr < NVFP4_CPU_MR; rr++) c[rr] = _mm256_setzero_ps();
                for (int64_t j = block_begin; j < block_end; j++) {
                    size_t blk = (size_t)(j * NVFP4_CPU_GROUPS + g);
                    const bblock bb = load_bblock(b, blk, h);
                    const size_t lane = blk * NVFP4_CPU_LANES + (size_t)h * 8;
                    const __m256i lim_low = _mm256_load_si256((const __m256i *)(b->lim_low + lane));
                    const __m256i lim_top = _mm256_load_si256((const __m256i *)(b->lim_top + lane));
                    for (int rr = 0; rr < NVFP4_CPU_MR; rr++) {
                        const int64_t row = r + rr;
                        __m256i d = block_dot(a->codes + (size_t)(row * K + j * 16), &bb);
                        const size_t ab = (size_t)(row * nb + j);
                        __m256 scale = _mm256_mul_ps(_mm256_set1_ps(a->scale[ab]), bb.scale4);
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
                                a->exps + (size_t)(row * K + j * 16), b->exps + blk * 256, h);
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

/* The 8 columns' double halves: [0, 4) and [4, 8). */
static inline __m256d low_pd(__m256 x) { return _mm256_cvtps_pd(_mm256_castps256_ps128(x)); }
static inline __m256d high_pd(__m256 x) { return _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)); }

/* The FP32 nearest toward zero of doubles within FP32's normal range (or
 * zero): significands cut to 24 bits, then converted exactly. */
static inline __m128 f32_toward_zero(__m256d x)
{
    const __m256d keep = _mm256_castsi256_pd(_mm256_set1_epi64x((long long)~(uint64_t)0x1fffffff));
    return _mm256_cvtpd_ps(_mm256_and_pd(x, keep));
}

/* One sm120 step (blocks j0 .. j0 + nq - 1) of rows r .. r + MR - 1, the 8
 * columns of half h of group g: c[] in, the next accumulators out.  Inlined
 * with nq = 4 (every step but a short last one) and with nq < 4. */
static inline __attribute__((always_inline)) void sm120_step(const nvfp4_cpu_apack *a,
                                                             const nvfp4_cpu_btile *b, int g, int h,
                                                             int64_t r, int64_t j0, int nq,
                                                             int64_t block_end,
                                                             __m256 c[NVFP4_CPU_MR])
{
    const int64_t K = a->k, nb = a->nblocks;
    __m256d lo[NVFP4_CPU_MR], hi[NVFP4_CPU_MR]; /* c + s_0 + ..: every partial sum exact */
    for (int rr = 0; rr < NVFP4_CPU_MR; rr++) {
        lo[rr] = low_pd(c[rr]);
        hi[rr] = high_pd(c[rr]);
    }
    for (int q = 0; q < nq; q++) {
        const int64_t j = j0 + q;
        const bblock bb = load_bblock(b, (size_t)(j * NVFP4_CPU_GROUPS + g), h);
        for (int rr = 0; rr < NVFP4_CPU_MR; rr++) {
            const int64_t row = r + rr;
            __m256i d = block_dot(a->codes + (size_t)(row * K + j * 16), &bb);
            __m256 scale = _mm256_mul_ps(_mm256_set1_ps(a->scale[row * nb + j]), bb.scale4);
            __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(d), scale); /* exact */
            lo[rr] = _mm256_add_pd(lo[rr], low_pd(s));
            hi[rr] = _mm256_add_pd(hi[rr], high_pd(s));
        }
    }
    /* guard (cpu_internal.h), per lane: f = c's exponent field */
    const int64_t st = j0 / NVFP4_CPU_STEP_BLOCKS;
    const size_t lane = (size_t)(st * NVFP4_CPU_GROUPS + g) * NVFP4_CPU_LANES + (size_t)h * 8;
    const __m256i lim_low = _mm256_load_si256((const __m256i *)(b->s120_lim_low + lane));
    const __m256i lim_top = _mm256_load_si256((const __m256i *)(b->s120_lim_top + lane));
    const __m256i spread = _mm256_load_si256((const __m256i *)(b->s120_spread + lane));
    for (int rr = 0; rr < NVFP4_CPU_MR; rr++) {
        const int64_t row = r + rr;
        const int32_t ahi = a->step_hi[row * a->nsteps + st], alo = a->step_lo[row * a->nsteps + st];
        __m256 next = _mm256_set_m128(f32_toward_zero(hi[rr]), f32_toward_zero(lo[rr]));
        __m256i f = _mm256_srli_epi32(_mm256_slli_epi32(_mm256_castps_si256(c[rr]), 1), 24);
        __m256i blocks_cut = _mm256_or_si256(
            _mm256_cmpgt_epi32(f, _mm256_add_epi32(_mm256_set1_epi32(alo), lim_low)),
            _mm256_cmpgt_epi32(spread, _mm256_set1_epi32(NVFP4_CPU_SM120_BLOCK_SLACK - (ahi - alo))));
        __m256i c_cut = _mm256_andnot_si256(
            _mm256_cmpeq_epi32(f, _mm256_setzero_si256()),
            _mm256_cmpgt_epi32(_mm256_add_epi32(_mm256_set1_epi32(ahi), lim_top), f));
        int slow = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_or_si256(blocks_cut, c_cut)));
        if (slow) {
            float cv[8], nv[8];
            _mm256_storeu_ps(cv, c[rr]);
            _mm256_storeu_ps(nv, next);
            for (int l = 0; l < 8; l++)
                if ((slow >> l) & 1)
                    nv[l] = nvfp4_cpu_sm120_slow(cv[l], a, row, b, g * NVFP4_CPU_LANES + h * 8 + l,
                                                 j0, block_end);
            next = _mm256_loadu_ps(nv);
        }
        c[rr] = next;
    }
}

void nvfp4_cpu_sm120_kernel_avx2(const nvfp4_cpu_apack *a, const nvfp4_cpu_btile *b,
                                 int64_t row_begin, int64_t row_end, int64_t block_begin,
                                 int64_t block_end, float *acc)
{
    for (int g = 0; g < NVFP4_CPU_GROUPS; g++) {
        for (int h = 0; h < 2; h++) { /* the two 8-column halves of a group */
            for (int64_t r = row_begin; r < row_end; r += NVFP4_CPU_MR) {
                __m256 c[NVFP4_CPU_MR];
                for (int rr = 0; rr < NVFP4_CPU_MR; rr++) c[rr] = _mm256_setzero_ps();
                int64_t j0 = block_begin;
                for (; j0 + NVFP4_CPU_STEP_BLOCKS <= block_end; j0 += NVFP4_CPU_STEP_BLOCKS)
                    sm120_step(a, b, g, h, r, j0, NVFP4_CPU_STEP_BLOCKS, block_end, c);
                if (j0 < block_end) sm120_step(a, b, g, h, r, j0, (int)(block_end - j0), block_end, c);
                for (int rr = 0; rr < NVFP4_CPU_MR; rr++)
                    _mm256_storeu_ps(acc + (r - row_begin + rr) * NVFP4_CPU_TILE +
                                         g * NVFP4_CPU_LANES + h * 8,
                                     c[rr]);
            }
        }
    }
}

#else
/* Built without the flags: still chosen on an AVX2 CPU (dispatch asks the CPU); same bits. */
void nvfp4_cpu_pack_btile_avx2(nvfp4_cpu_btile *t, uint8_t *has_nan, const nvfp4_tensor *b,
                               int64_t n0)
{
    nvfp4_cpu_pack_btile_portable(t, has_nan, b, n0);
}

void nvfp4_cpu_sm90_kernel_avx2(const nvfp4_cpu_apack *a, const nvfp4_cpu_btile *b,
                                int64_t row_begin, int64_t row_end, int64_t block_begin,
                                    int64_t block_end, float *acc)
{
    nvfp4_cpu_sm90_kernel_portable(a, b, row_begin, row_end, block_begin, block_end, acc);
}

void nvfp4_cpu_sm120_kernel_avx2(const nvfp4_cpu_apack *a, const nvfp4_cpu_btile *b,
                                 int64_t row_begin, int64_t row_end, int64_t block_begin,
                                 int64_t block_end, float *acc)
{
    nvfp4_cpu_sm120_kernel_portable(a, b, row_begin, row_end, block_begin, block_end, acc);
}
#endif
