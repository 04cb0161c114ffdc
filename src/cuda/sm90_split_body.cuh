/* sm90_split_body.cuh -- the split small-M kernel, included once per variant
 * by sm90_gemm.cu with these macros defined (design: sm90_split.cuh):
 *   SPLIT_MT    activation rows per CTA: 8, 16 or 32 (M <= MT)
 *   SPLIT_TW    tiles per MMA warp (the host picks the kernel with
 *               4 * (SPLIT_TW - 1) < tiles per CTA <= 4 * SPLIT_TW)
 *   SPLIT_NAME  the kernel's name */

#define SPLIT_NT (SPLIT_MT / 8)
#define SPLIT_DQ SPLIT_DQ_OF(SPLIT_MT, SPLIT_TW)
#define SPLIT_THREADS SPLIT_THREADS_OF(SPLIT_MT, SPLIT_TW)

/* Dequantize group Q (32 units, lane = 8 rows x 4 blocks) of half HALF
 * (blocks 8 HALF .. 8 HALF + 7) of raw stage `st` into fragment stage `fr`.
 * Groups 0 .. 2*tcount-1: weight tile Q/2, unit = rows lr and lr+8 of block
 * lb + 4 (Q & 1) of the half, written as each lane t's whole 16-byte A
 * fragment; then the activations' n8 tiles (Q - 2*tcount = 2 nt + bh; unit =
 * one token row).  Offsets that depend on the lane only are set up once
 * (co_HALF_BH_H, wst_off, ast_off).  A token row r = lr + 8 nt of the
 * activation box sits at co + 1024 nt: the swizzle repeats every 8 rows.
 * Scale chunk cc = 2 HALF + bh holds the unit's block. */
#define SPLIT_UNIT(Q, HALF)                                                                        \
    {                                                                                              \
        const int bh_ = (Q) & 1, cc_ = 2 * (HALF) + bh_;                                           \
        const int co0_ = bh_ ? co_##HALF##_1_0 : co_##HALF##_0_0;                                  \
        if ((Q) < 2 * tcount) {                                                                    \
            const int i_ = (Q) >> 1;                                                               \
            const uint8_t *cs_ = st + i_ * 2048;                                                   \
            const uint2 w0_ = *(const uint2 *)(cs_ + co0_);                                        \
            const uint2 w1_ = *(const uint2 *)(cs_ + (bh_ ? co_##HALF##_1_1 : co_##HALF##_0_1));  \
            /* word (row % 128) / 32 of the row's 16-byte scale group */                          \
            const uint8_t *ss_ = st + scales_off + i_ * 1024 + cc_ * 256 + (((tile0 + i_) >> 1) & 3) * 4 + lr * 16 + lb; \
            uint32_t o0_[8], o1_[8];                                                               \
            split_unit(w0_.x, w0_.y, ss_[0], o0_);                                                 \
            split_unit(w1_.x, w1_.y, ss_[8 * 16], o1_);                                            \
            uint8_t *dst_ = fr + i_ * 4096 + bh_ * 2048;                                           \
            _Pragma("unroll") for (int tt_ = 0; tt_ < 4; tt_++)                                    \
                *(uint4 *)(dst_ + wst_off[tt_]) =                                                  \
                    make_uint4(o0_[2 * tt_], o1_[2 * tt_], o0_[2 * tt_ + 1], o1_[2 * tt_ + 1]);    \
        } else {                                                                                   \
            const int nt_ = ((Q) - 2 * tcount) >> 1;                                               \
            const int row_ = lr + 8 * nt_;                                                         \
            const uint2 w_ = *(const uint2 *)(st + act_codes_off + nt_ * 1024 + co0_);             \
            const uint32_t sb_ = st[act_scales_off + cc_ * 256 * SPLIT_AH(SPLIT_MT) + (row_ % 32) * 16 + \
                                    (row_ / 32) * 4 + lb];                                         \
            uint32_t o_[8];                                                                        \
            split_unit(w_.x, w_.y, sb_, o_);                                                       \
            uint8_t *dst_ = fr + act_frag_off + nt_ * 2048 + bh_ * 1024;                           \
            _Pragma("unroll") for (int tt_ = 0; tt_ < 4; tt_++)                                    \
                *(uint2 *)(dst_ + ast_off[tt_]) = make_uint2(o_[2 * tt_], o_[2 * tt_ + 1]);        \
        }                                                                                          \
    }

/* One fragment stage of the dequantizers: half HALF of the raw chunk in `st`
 * (when that half exists), into the next fragment slot. */
#define SPLIT_HALF(HALF)                                                                           \
    if (2 * c + (HALF) < nsub) {                                                                   \
        ptx_mbar_wait(&frag_empty[f], fph ^ 1u);                                                   \
        uint8_t *fr = frag_ring + (size_t)f * frag_bytes;                                          \
        for (int q = dw; q < groups; q += SPLIT_DQ) SPLIT_UNIT(q, HALF);                           \
        ptx_mbar_arrive(&frag_full[f]); /* releases this lane's fragment stores */                 \
        if (++f == p.frag_stages) {                                                                \
            f = 0;                                                                                 \
            fph ^= 1u;                                                                             \
        }                                                                                          \
    }

/* The k16 steps of block B of the chunk in fragment stage `fr`: every chain
 * of this warp (SPLIT_TW tiles x MT/8 token tiles), then, at the end of a
 * 64-element group, the fold of a finished K slice (FP32 RNE, slice order). */
#define SPLIT_BLOCK(B)                                                                             \
    {                                                                                              \
        uint2 bf_[SPLIT_NT];                                                                       \
        _Pragma("unroll") for (int u_ = 0; u_ < SPLIT_NT; u_++) bf_[u_] =                          \
            *(const uint2 *)(fr + act_frag_off + u_ * 2048 + ((B) >> 2) * 1024 + aoff[(B) & 3]);   \
        _Pragma("unroll") for (int j_ = 0; j_ < SPLIT_TW; j_++) {                                  \
            const uint4 q_ = *(const uint4 *)(fr + slot[j_] + ((B) >> 2) * 2048 + woff[(B) & 3]);  \
            _Pragma("unroll") for (int u_ = 0; u_ < SPLIT_NT; u_++)                                \
                ptx_mma_16816_regs(acc[j_][u_], q_.x, q_.y, q_.z, q_.w, bf_[u_].x, bf_[u_].y);    \
        }                                                                                          \
        const int gidx_ = 2 * c + ((B) >> 2);                                                      \
        if ((((B) & 3) == 3 || (B) == nblk - 1) &&                                                 \
            (gidx_ + 1 == slice_end || gidx_ + 1 == ngroups)) {                                    \
            _Pragma("unroll") for (int j_ = 0; j_ < SPLIT_TW; j_++)                                \
                _Pragma("unroll") for (int u_ = 0; u_ < SPLIT_NT; u_++)                            \
                    _Pragma("unroll") for (int e_ = 0; e_ < 4; e_++) {                             \
                tot[j_][u_][e_] = first_slice ? acc[j_][u_][e_] : __fadd_rn(tot[j_][u_][e_], acc[j_][u_][e_]); \
                acc[j_][u_][e_] = 0.0f;                                                            \
            }                                                                                      \
            first_slice = 0;                                                                       \
            slice_end += p.chunks_per_slice;                                                       \
        }                                                                                          \
    }

/* The loader's TMA boxes of raw chunk C into stage ST on barrier BAR: the
 * weight tiles' codes and scales, and the activations' (split_body: tile0,
 * tcount, offsets). */
#define SPLIT_LOAD_WEIGHTS(ST, BAR, C)                                                             \
    for (int i_ = 0; i_ < tcount; i_++) {                                                          \
        const int r0_ = (tile0 + i_) * 16;                                                         \
        ptx_tma_load_2d((ST) + i_ * 2048, &p.tm_b_codes, (BAR), (C) * 128, r0_);                   \
        /* the 256-byte halves of scale chunks 4C .. 4C+3 of row tile r0/128 that hold    */      \
        /* rows r0 % 32 .. +15 (with rows +-32, +-64: word (r0 % 128) / 32)               */      \
        ptx_tma_load_3d((ST) + scales_off + i_ * 1024, &p.tm_b_scales, (BAR), 0, (r0_ % 32) / 16,  \
                        (r0_ / 128) * p.ncb + 4 * (C));                                            \
    }
#define SPLIT_LOAD_ACT(ST, BAR, C)                                                                 \
    {                                                                                              \
        ptx_tma_load_2d((ST) + act_codes_off, &p.tm_a_codes, (BAR), (C) * 128, 0);                 \
        ptx_tma_load_3d((ST) + act_scales_off, &p.tm_a_scales, (BAR), 0, 0, 4 * (C));              \
    }

extern "C" __global__ void __launch_bounds__(SPLIT_THREADS, 1)
    SPLIT_NAME(const __grid_constant__ nvfp4_sm90_split_params p)
{
    extern __shared__ __align__(1024) uint8_t smem_split_raw[];
    /* 1024-byte alignment for the swizzled boxes, by an offset from the shared
     * array (no integer round trip, so loads and stores stay LDS / STS) */
    uint8_t *smem = smem_split_raw + ((1024u - (ptx_smem_addr(smem_split_raw) & 1023u)) & 1023u);
    uint64_t *raw_full = (uint64_t *)smem;
    uint64_t *raw_empty = raw_full + SPLIT_MAX_RAW;
    uint64_t *frag_full = raw_empty + SPLIT_MAX_RAW;
    uint64_t *frag_empty = frag_full + SPLIT_MAX_FRAG;
    const size_t raw_bytes = SPLIT_RAW_BYTES(SPLIT_MT, p.tmax);
    const size_t frag_bytes = SPLIT_FRAG_BYTES(SPLIT_MT, p.tmax);
    uint8_t *raw_ring = smem + SPLIT_BAR_BYTES;
    uint8_t *frag_ring = raw_ring + (size_t)p.raw_stages * raw_bytes;
    /* offsets inside a raw stage */
    const int act_codes_off = p.tmax * 2048;
    const int scales_off = act_codes_off + SPLIT_MT * 128;
    const int act_scales_off = scales_off + p.tmax * 1024;
    /* offset of the activation fragments inside a fragment stage */
    const int act_frag_off = p.tmax * 4096;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    /* this CTA's tiles: [tile0, tile0 + tcount), balanced over the grid */
    const int tile0 = (int)((int64_t)blockIdx.x * p.tiles / gridDim.x);
    const int tcount = (int)((int64_t)(blockIdx.x + 1) * p.tiles / gridDim.x) - tile0;
    const int nblocks = p.k / 16;
    const int nch = (p.k + SPLIT_KC - 1) / SPLIT_KC;  /* raw chunks (256 K) */
    const int nsub = (p.k + SPLIT_KF - 1) / SPLIT_KF; /* fragment stages (128 K) */

    if (threadIdx.x == 0) {
        for (int s = 0; s < p.raw_stages; s++) {
            ptx_mbar_init(&raw_full[s], 1);
            ptx_mbar_init(&raw_empty[s], 32 * SPLIT_DQ);
        }
        for (int s = 0; s < p.frag_stages; s++) {
            ptx_mbar_init(&frag_full[s], 32 * SPLIT_DQ);
            ptx_mbar_init(&frag_empty[s], 32 * SPLIT_MMA_WARPS);
        }
        ptx_fence_mbar_init();
    }
    __syncthreads();

    if (warp == 0) {
        /* ---------------- loader ---------------- */
        if (lane != 0) return;
        ptx_prefetch_tmap(&p.tm_b_codes);
        ptx_prefetch_tmap(&p.tm_b_scales);
        ptx_prefetch_tmap(&p.tm_a_codes);
        ptx_prefetch_tmap(&p.tm_a_scales);
        const uint32_t bytes =
            (uint32_t)tcount * 3072u + (uint32_t)SPLIT_MT * 128u + 1024u * SPLIT_AH(SPLIT_MT);
        /* Weights first: the first ring's worth of weight boxes does not
         * depend on the previous kernel (in the fused linear, the quantizer
         * that writes the activations, launched as our programmatic
         * prerequisite), so it streams while that kernel finishes. */
        const int pro = nch < p.raw_stages ? nch : p.raw_stages;
        for (int c = 0; c < pro; c++) {
            uint8_t *st = raw_ring + (size_t)c * raw_bytes;
            ptx_mbar_arrive_expect_tx(&raw_full[c], bytes);
            SPLIT_LOAD_WEIGHTS(st, &raw_full[c], c);
        }
        ptx_griddep_wait();
        for (int c = 0; c < pro; c++) SPLIT_LOAD_ACT(raw_ring + (size_t)c * raw_bytes, &raw_full[c], c);
        int s = pro == p.raw_stages ? 0 : pro;
        uint32_t phase = pro == p.raw_stages ? 1u : 0u;
        for (int c = pro; c < nch; c++) {
            ptx_mbar_wait(&raw_empty[s], phase ^ 1u);
            uint8_t *st = raw_ring + (size_t)s * raw_bytes;
            ptx_mbar_arrive_expect_tx(&raw_full[s], bytes);
            SPLIT_LOAD_WEIGHTS(st, &raw_full[s], c);
            SPLIT_LOAD_ACT(st, &raw_full[s], c);
            if (++s == p.raw_stages) {
                s = 0;
                phase ^= 1u;
            }
        }
        return;
    }

    const int g = lane >> 2, t = lane & 3;

    if (warp > SPLIT_MMA_WARPS) {
        /* ---------------- dequantizers ---------------- */
        const int dw = warp - 1 - SPLIT_MMA_WARPS;
        const int groups = 2 * tcount + 2 * SPLIT_NT; /* units of 32 lanes */
        const int lr = lane & 7, lb = lane >> 3;       /* 8 rows x 4 blocks per group */
        /* co_HALF_BH_H: rows lr + 8h, block 8 HALF + lb + 4 bh (selected, never
         * indexed, so they stay in registers) */
        const int co_0_0_0 = split_code_off(lr, lb), co_0_0_1 = split_code_off(lr + 8, lb);
        const int co_0_1_0 = split_code_off(lr, lb + 4), co_0_1_1 = split_code_off(lr + 8, lb + 4);
        const int co_1_0_0 = split_code_off(lr, lb + 8), co_1_0_1 = split_code_off(lr + 8, lb + 8);
        const int co_1_1_0 = split_code_off(lr, lb + 12), co_1_1_1 = split_code_off(lr + 8, lb + 12);
        int wst_off[4], ast_off[4];
#pragma unroll
        for (int tt = 0; tt < 4; tt++) {
            wst_off[tt] = split_wfrag_off(lr, tt, lb);
            ast_off[tt] = split_afrag_off(lr, tt, lb);
        }
        int s = 0, f = 0;
        uint32_t sph = 0, fph = 0;
        for (int c = 0; c < nch; c++) {
            ptx_mbar_wait(&raw_full[s], sph);
            const uint8_t *st = raw_ring + (size_t)s * raw_bytes;
            SPLIT_HALF(0);
            SPLIT_HALF(1);
            ptx_mbar_arrive(&raw_empty[s]); /* this lane is done reading the raw stage */
            if (++s == p.raw_stages) {
                s = 0;
                sph ^= 1u;
            }
        }
        return;
    }

    /* ---------------- MMA warps ---------------- */
    const int mw = warp - 1;
    float acc[SPLIT_TW][SPLIT_NT][4], tot[SPLIT_TW][SPLIT_NT][4];
#pragma unroll
    for (int j = 0; j < SPLIT_TW; j++)
#pragma unroll
        for (int u = 0; u < SPLIT_NT; u++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                acc[j][u][e] = 0.0f;
                tot[j][u][e] = 0.0f;
            }
    const int ngroups = (p.k + 63) / 64;
    int first_slice = 1, slice_end = p.chunks_per_slice;
    /* this lane's fragment offsets for b % 4 (the rotations of split_*frag_off) */
    int woff[4], aoff[4];
#pragma unroll
    for (int r = 0; r < 4; r++) {
        woff[r] = split_wfrag_off(g, t, r);
        aoff[r] = split_afrag_off(g, t, r);
    }
    /* Tile slot of each chain: warps with fewer than SPLIT_TW tiles repeat
     * their last one (or the CTA's last), so the loop has no predicates; the
     * epilogue stores only real tiles. */
    int slot[SPLIT_TW];
#pragma unroll
    for (int j = 0; j < SPLIT_TW; j++) {
        const int i = mw + SPLIT_MMA_WARPS * j;
        slot[j] = (i < tcount ? i : tcount - 1) * 4096;
    }
    int f = 0;
    uint32_t fph = 0;
    for (int c = 0; c < nsub; c++) { /* fragment stage c: blocks 8c .. 8c + 7 */
        ptx_mbar_wait(&frag_full[f], fph);
        const uint8_t *fr = frag_ring + (size_t)f * frag_bytes;
        const int nblk = nblocks - 8 * c < 8 ? nblocks - 8 * c : 8;
        if (nblk == 8) {
#pragma unroll
            for (int b = 0; b < 8; b++) SPLIT_BLOCK(b);
        } else { /* the K tail: 2, 4 or 6 blocks */
#pragma unroll
            for (int b = 0; b < 6; b++)
                if (b < nblk) SPLIT_BLOCK(b);
        }
        ptx_mbar_arrive(&frag_empty[f]); /* release: this lane's loads of the stage are done */
        if (++f == p.frag_stages) {
            f = 0;
            fph ^= 1u;
        }
    }

    /* ---- epilogue: tot[j][u][0..1] = (n = row g, m = 8u + 2t + {0,1}); [2..3]: n = row g + 8 ---- */
    const float alpha = __fmul_rn(*p.a_scale2, *p.b_scale2);
#pragma unroll
    for (int j = 0; j < SPLIT_TW; j++) {
        const int i = mw + SPLIT_MMA_WARPS * j;
        if (i >= tcount) continue;
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const int n = (tile0 + i) * 16 + g + 8 * hh;
            const float bias = p.bias ? p.bias[n] : 0.0f;
#pragma unroll
            for (int u = 0; u < SPLIT_NT; u++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int m = 8 * u + 2 * t + e;
                    if (m >= p.m) continue;
                    const size_t o = (size_t)m * (size_t)p.n + (size_t)n;
                    const float v = tot[j][u][2 * hh + e];
                    if (p.raw) p.raw[o] = v;
                    if (p.out) {
                        float y = __fmul_rn(alpha, v);
                        if (p.bias) y = __fadd_rn(y, bias);
                        p.out[o] = nvfp4_dev_bf16_rne(y);
                    }
                }
        }
    }
}

#undef SPLIT_UNIT
#undef SPLIT_LOAD_WEIGHTS
#undef SPLIT_LOAD_ACT
#undef SPLIT_HALF
#undef SPLIT_BLOCK
#undef SPLIT_NT
#undef SPLIT_DQ
#undef SPLIT_THREADS
#undef SPLIT_MT
#undef SPLIT_TW
#undef SPLIT_NAME
