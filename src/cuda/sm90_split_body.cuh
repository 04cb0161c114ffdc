/* sm90_split_body.cuh -- the split small-M kernel, included once per variant
 * by sm90_gemm.cu with these macros defined (design: sm90_split.cuh):
 *   SPLIT_MT    activation rows per CTA: 8, 16 or 32 (M <= MT)
 *   SPLIT_TW    tiles per MMA warp at most (tmax <= 4 * SPLIT_TW)
 *   SPLIT_NAME  the kernel's name */

#define SPLIT_NT (SPLIT_MT / 8)

/* Dequantize group Q (32 (row, block) units: lane = 8 rows x 4 blocks) of
 * raw stage `st` into fragment stage `fr`.  Groups 0 .. 4*tcount-1: weight
 * tile Q/4 (rows lr + 8h, blocks lb + 4bh); then the activations' n8 tiles. */
#define SPLIT_UNIT(Q)                                                                              \
    {                                                                                              \
        uint32_t o_[8];                                                                            \
        if ((Q) < 4 * tcount) {                                                                    \
            const int i_ = (Q) >> 2, h_ = (Q) & 1, bh_ = ((Q) >> 1) & 1;                           \
            const int row_ = lr + 8 * h_, b_ = lb + 4 * bh_;                                       \
            const uint2 w_ = *(const uint2 *)(st + i_ * 1024 + split_code_off(row_, b_));          \
            const int j_ = ((tile0 + i_) * 16 % 128) / 32;                                         \
            const uint32_t sb_ =                                                                   \
                st[scales_off + i_ * 512 + (b_ >> 2) * 256 + row_ * 16 + j_ * 4 + (b_ & 3)];       \
            split_unit(w_.x, w_.y, sb_, o_);                                                       \
            uint8_t *dst_ = fr + i_ * 4096 + ((h_ ^ ((b_ >> 1) & 1)) * 8);                         \
            _Pragma("unroll") for (int tt_ = 0; tt_ < 4; tt_++)                                    \
                *(uint2 *)(dst_ + split_wfrag_off(lr, tt_, b_)) =                                  \
                    make_uint2(o_[2 * tt_], o_[2 * tt_ + 1]);                                      \
        } else {                                                                                   \
            const int qa_ = (Q) - 4 * tcount, nt_ = qa_ % SPLIT_NT, bh_ = qa_ / SPLIT_NT;          \
            const int row_ = lr + 8 * nt_, b_ = lb + 4 * bh_;                                      \
            const uint2 w_ = *(const uint2 *)(st + act_codes_off + split_code_off(row_, b_));      \
            const uint32_t sb_ = st[act_scales_off + (b_ >> 2) * 256 * SPLIT_AH(SPLIT_MT) +        \
                                    (row_ % 32) * 16 + (row_ / 32) * 4 + (b_ & 3)];                \
            split_unit(w_.x, w_.y, sb_, o_);                                                       \
            uint8_t *dst_ = fr + act_frag_off + nt_ * 2048;                                        \
            _Pragma("unroll") for (int tt_ = 0; tt_ < 4; tt_++)                                    \
                *(uint2 *)(dst_ + split_afrag_off(lr, tt_, b_)) =                                  \
                    make_uint2(o_[2 * tt_], o_[2 * tt_ + 1]);                                      \
        }                                                                                          \
    }

extern "C" __global__ void __launch_bounds__(SPLIT_THREADS, 1)
    SPLIT_NAME(const __grid_constant__ nvfp4_sm90_split_params p)
{
    extern __shared__ uint8_t smem_split_raw[];
    uint8_t *smem = (uint8_t *)(((uintptr_t)smem_split_raw + 1023) & ~(uintptr_t)1023);
    uint64_t *raw_full = (uint64_t *)smem;
    uint64_t *raw_empty = raw_full + SPLIT_MAX_RAW;
    uint64_t *frag_full = raw_empty + SPLIT_MAX_RAW;
    uint64_t *frag_empty = frag_full + SPLIT_MAX_FRAG;
    const size_t raw_bytes = SPLIT_RAW_BYTES(SPLIT_MT, p.tmax);
    const size_t frag_bytes = SPLIT_FRAG_BYTES(SPLIT_MT, p.tmax);
    uint8_t *raw_ring = smem + SPLIT_BAR_BYTES;
    uint8_t *frag_ring = raw_ring + (size_t)p.raw_stages * raw_bytes;
    /* offsets inside a raw stage */
    const int act_codes_off = p.tmax * 1024;
    const int scales_off = act_codes_off + SPLIT_MT * 64;
    const int act_scales_off = scales_off + p.tmax * 512;
    /* offset of the activation fragments inside a fragment stage */
    const int act_frag_off = p.tmax * 4096;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    /* this CTA's tiles: [tile0, tile0 + tcount), balanced over the grid */
    const int tile0 = (int)((int64_t)blockIdx.x * p.tiles / gridDim.x);
    const int tcount = (int)((int64_t)(blockIdx.x + 1) * p.tiles / gridDim.x) - tile0;
    const int nblocks = p.k / 16;
    const int nch = (p.k + SPLIT_KC - 1) / SPLIT_KC;

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
            (uint32_t)tcount * 1536u + (uint32_t)SPLIT_MT * 64u + 512u * SPLIT_AH(SPLIT_MT);
        for (int c = 0; c < nch; c++) {
            const int s = c % p.raw_stages;
            ptx_mbar_wait(&raw_empty[s], (uint32_t)(((c / p.raw_stages) & 1) ^ 1));
            uint8_t *st = raw_ring + (size_t)s * raw_bytes;
            ptx_mbar_arrive_expect_tx(&raw_full[s], bytes);
            for (int i = 0; i < tcount; i++) {
                const int r0 = (tile0 + i) * 16;
                ptx_tma_load_2d(st + i * 1024, &p.tm_b_codes, &raw_full[s], c * 64, r0);
                /* the 256-byte halves of scale chunks 2c, 2c+1 of row tile r0/128 that
                 * hold rows r0 % 32 .. +15 (with rows +-32, +-64: word (r0 % 128) / 32) */
                ptx_tma_load_3d(st + scales_off + i * 512, &p.tm_b_scales, &raw_full[s], 0,
                                (r0 % 32) / 16, (r0 / 128) * p.ncb + 2 * c);
            }
            ptx_tma_load_2d(st + act_codes_off, &p.tm_a_codes, &raw_full[s], c * 64, 0);
            ptx_tma_load_3d(st + act_scales_off, &p.tm_a_scales, &raw_full[s], 0, 0, 2 * c);
        }
        return;
    }

    const int g = lane >> 2, t = lane & 3;

    if (warp > SPLIT_MMA_WARPS) {
        /* ---------------- dequantizers ---------------- */
        const int dw = warp - 1 - SPLIT_MMA_WARPS;
        const int groups = 4 * tcount + 2 * SPLIT_NT; /* units of 32 (row, block) pairs */
        const int lr = lane & 7, lb = lane >> 3;       /* 8 rows x 4 blocks per group */
        for (int c = 0; c < nch; c++) {
            const int s = c % p.raw_stages, f = c % p.frag_stages;
            ptx_mbar_wait(&raw_full[s], (uint32_t)((c / p.raw_stages) & 1));
            ptx_mbar_wait(&frag_empty[f], (uint32_t)(((c / p.frag_stages) & 1) ^ 1));
            const uint8_t *st = raw_ring + (size_t)s * raw_bytes;
            uint8_t *fr = frag_ring + (size_t)f * frag_bytes;
            /* two units per pass, so each lane has two independent chains of
             * loads and conversions in flight; past the end the second one
             * repeats the first (the same bytes to the same place) */
            for (int q = dw; q < groups; q += 2 * SPLIT_DQ) {
                const int q2 = q + SPLIT_DQ < groups ? q + SPLIT_DQ : q;
                SPLIT_UNIT(q);
                SPLIT_UNIT(q2);
            }
            ptx_mbar_arrive(&frag_full[f]);  /* releases this lane's fragment stores */
            ptx_mbar_arrive(&raw_empty[s]);  /* this lane is done reading the raw stage */
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
    for (int c = 0; c < nch; c++) {
        const int f = c % p.frag_stages;
        ptx_mbar_wait(&frag_full[f], (uint32_t)((c / p.frag_stages) & 1));
        const uint8_t *fr = frag_ring + (size_t)f * frag_bytes;
        const int nblk = nblocks - 8 * c < 8 ? nblocks - 8 * c : 8;
#pragma unroll
        for (int b = 0; b < 8; b++) {
            if (b < nblk) {
                uint2 bf[SPLIT_NT];
#pragma unroll
                for (int u = 0; u < SPLIT_NT; u++)
                    bf[u] = *(const uint2 *)(fr + act_frag_off + u * 2048 + split_afrag_off(g, t, b));
#pragma unroll
                for (int j = 0; j < SPLIT_TW; j++) {
                    const int i = mw + SPLIT_MMA_WARPS * j;
                    if (i < tcount) {
                        const uint4 q = *(const uint4 *)(fr + i * 4096 + split_wfrag_off(g, t, b));
                        /* halves swapped when (b >> 1) & 1 (split_wfrag_off) */
                        const uint32_t a0 = (b & 2) ? q.z : q.x, a2 = (b & 2) ? q.w : q.y;
                        const uint32_t a1 = (b & 2) ? q.x : q.z, a3 = (b & 2) ? q.y : q.w;
#pragma unroll
                        for (int u = 0; u < SPLIT_NT; u++)
                            ptx_mma_16816_split(acc[j][u], a0, a1, a2, a3, bf[u].x, bf[u].y);
                    }
                }
                /* end of a 64-element group: fold a finished K slice (FP32 RNE, slice order) */
                const int gidx = 2 * c + (b >> 2);
                if (((b & 3) == 3 || b == nblk - 1) && (gidx + 1 == slice_end || gidx + 1 == ngroups)) {
#pragma unroll
                    for (int j = 0; j < SPLIT_TW; j++)
#pragma unroll
                        for (int u = 0; u < SPLIT_NT; u++)
#pragma unroll
                            for (int e = 0; e < 4; e++) {
                                tot[j][u][e] = first_slice ? acc[j][u][e] : __fadd_rn(tot[j][u][e], acc[j][u][e]);
                                acc[j][u][e] = 0.0f;
                            }
                    first_slice = 0;
                    slice_end += p.chunks_per_slice;
                }
            }
        }
        ptx_mbar_arrive(&frag_empty[f]); /* every lane's loads have returned (their values were used) */
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
#undef SPLIT_NT
#undef SPLIT_MT
#undef SPLIT_TW
#undef SPLIT_NAME
