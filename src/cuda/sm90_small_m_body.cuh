/* sm90_small_m_body.cuh -- the small-M kernel, included once per variant by
 * sm90_gemm.cu with these macros defined (design: sm90_small_m.cuh):
 *   SMALLM_MT    activation rows per tile: 8 (M <= 8) or 16 (M <= 16)
 *   SMALLM_R     n8 weight tiles (independent chains) per consumer warp
 *   SMALLM_WS    weight ring depth per consumer (chunks of 64 K-elements)
 *   SMALLM_WMAX  consumer warps per CTA at most (launch bound)
 *   SMALLM_NAME  the kernel's name
 *
 * Shared memory (dynamic, 16-byte aligned):
 *   [0, 256)  mbarriers full[SMALLM_ACT_STAGES], empty[SMALLM_ACT_STAGES]
 *   act ring  SMALLM_ACT_STAGES x SMALLM_ACT_SLOT: FP16 A fragments of one chunk,
 *             the 4 registers {a0, a1, a2, a3} of lane (g, t) for block kb at
 *             ((kb * 8 + g) * 4 + t) * 16 (rows g+8 zero when MT = 8): one
 *             16-byte load gives the mma its register quad, and a warp's loads
 *             are contiguous
 *   staging   SMALLM_STG_STAGES x SMALLM_STG_SLOT: NVFP4 activation chunks
 *             (MT rows x 32 code bytes, then MT x 16 bytes of scale groups)
 *   weights   per consumer: SMALLM_WS x SMALLM_W_SLOT (8R rows x 32 code
 *             bytes, then 8R x 16 bytes of scale groups) */

#define SMALLM_ACT_SLOT 2048 /* 4 blocks x 8 g x 4 t x one 16-byte A fragment */
#define SMALLM_STG_SLOT (SMALLM_MT * 48)
#define SMALLM_W_SLOT (SMALLM_R * 8 * 48)

/* cp.async work of one lane, set up once: every copy is 16 bytes -- a half
 * code row of the chunk (32 bytes per row), or the 16-byte group of the
 * 128x4 tiled scales that holds the row's 4 block scales (with those of
 * rows r+-32, r+-64: the reader picks its word).  Chunk c adds 32c to a code
 * source and 512c to a scale source. */
#define SMALLM_NP(rows) ((3 * (rows) + 31) / 32) /* copies per lane */
#define SMALLM_SETUP(ROWS, R0, NROWS, CODES, SCALES)                                               \
    _Pragma("unroll") for (int j_ = 0; j_ < SMALLM_NP(ROWS); j_++) {                               \
        const int p_ = lane + 32 * j_;                                                             \
        const bool code_ = p_ < 2 * (ROWS);                                                        \
        const int row_ = code_ ? p_ >> 1 : p_ - 2 * (ROWS);                                        \
        cp_act[j_] = p_ < 3 * (ROWS);                                                              \
        cp_ok[j_] = cp_act[j_] && (R0) + row_ < (NROWS);                                           \
        cp_hi[j_] = code_ && (p_ & 1);                                                             \
        cp_dst[j_] = code_ ? row_ * 32 + (p_ & 1) * 16 : (ROWS) * 32 + row_ * 16;                  \
        cp_step[j_] = code_ ? 32 : 512;                                                            \
        cp_src[j_] = !cp_ok[j_] ? (CODES)                                                          \
                     : code_    ? (CODES) + (size_t)((R0) + row_) * kbytes + (p_ & 1) * 16         \
                                : (SCALES) + smallm_scale_off((R0) + row_, 0, p.ncb) / 16 * 16;    \
    }

/* Copy chunk C of the set-up rows into SLOT; past K (the second half of a
 * K % 64 == 32 tail) and past the last row the copies zero-fill. */
#define SMALLM_STAGE(ROWS, SLOT, C)                                                                \
    {                                                                                              \
        const bool tail_ = (C) >= num_full;                                                        \
        _Pragma("unroll") for (int j_ = 0; j_ < SMALLM_NP(ROWS); j_++) {                           \
            if (cp_act[j_]) {                                                                      \
                const bool ok_ = cp_ok[j_] && !(tail_ && cp_hi[j_]);                               \
                ptx_cp_async16((SLOT) + cp_dst[j_], ok_ ? cp_src[j_] + (size_t)(C) * cp_step[j_] : cp_src[j_], \
                               ok_ ? 16u : 0u);                                                    \
            }                                                                                      \
        }                                                                                          \
    }
#define SMALLM_STAGE_A(C) \
    SMALLM_STAGE(SMALLM_MT, stg + (size_t)((C) % SMALLM_STG_STAGES) * SMALLM_STG_SLOT, C)
#define SMALLM_STAGE_W(C) \
    SMALLM_STAGE(8 * SMALLM_R, ring + (size_t)((C) & (SMALLM_WS - 1)) * SMALLM_W_SLOT, C)

/* The scale word of row R (0..ROWS-1 of the set-up rows starting at R0) in
 * a staged slot: its 16-byte group, word (row % 128) / 32. */
#define SMALLM_SCALE_WORD(SLOT, ROWS, R0, R) \
    (*(const uint32_t *)((SLOT) + (ROWS) * 32 + (R) * 16 + (((R0) + (R)) % 128 / 32) * 4))

/* Wait for chunk C: this lane's and every lane's weight copies (cp.async
 * groups), and the producer's A fragments (the `full` barrier). */
#define SMALLM_WAIT(C)                                                                             \
    {                                                                                              \
        PTX_CP_ASYNC_WAIT(SMALLM_WS - 2);                                                          \
        __syncwarp();                                                                              \
        ptx_mbar_wait(&full[(C) % SMALLM_ACT_STAGES], (uint32_t)(((C) / SMALLM_ACT_STAGES) & 1));  \
    }

/* Shared-memory loads of chunk C: its A fragments into AF (already FP16) and
 * this warp's raw code words and scale words into WR / SW. */
#define SMALLM_READ(AF, C)                                                                         \
    {                                                                                              \
        const uint8_t *as_ = act + (size_t)((C) % SMALLM_ACT_STAGES) * SMALLM_ACT_SLOT;            \
        _Pragma("unroll") for (int kb_ = 0; kb_ < 4; kb_++) {                                      \
            const uint4 q_ = *(const uint4 *)(as_ + ((kb_ * 8 + g) * 4 + t) * 16);                 \
            AF[kb_][0] = q_.x;                                                                     \
            AF[kb_][1] = q_.y;                                                                     \
            AF[kb_][2] = q_.z;                                                                     \
            AF[kb_][3] = q_.w;                                                                     \
        }                                                                                          \
        const uint8_t *ws_ = ring + (size_t)((C) & (SMALLM_WS - 1)) * SMALLM_W_SLOT;                     \
        _Pragma("unroll") for (int i_ = 0; i_ < SMALLM_R; i_++) {                                  \
            const uint4 w0_ = *(const uint4 *)(ws_ + (8 * i_ + g) * 32);                           \
            const uint4 w1_ = *(const uint4 *)(ws_ + (8 * i_ + g) * 32 + 16);                      \
            wr[i_][0] = w0_.x;                                                                     \
            wr[i_][1] = w0_.y;                                                                     \
            wr[i_][2] = w0_.z;                                                                     \
            wr[i_][3] = w0_.w;                                                                     \
            wr[i_][4] = w1_.x;                                                                     \
            wr[i_][5] = w1_.y;                                                                     \
            wr[i_][6] = w1_.z;                                                                     \
            wr[i_][7] = w1_.w;                                                                     \
            sw[i_] = SMALLM_SCALE_WORD(ws_, 8 * SMALLM_R, n0, 8 * i_ + g);              \
        }                                                                                          \
    }

/* Dequantize the raw words WR / SW into B fragments BF (exact FP16). */
#define SMALLM_DEQUANT(BF)                                                                         \
    {                                                                                              \
        _Pragma("unroll") for (int i_ = 0; i_ < SMALLM_R; i_++) {                                  \
            uint32_t sc_[4];                                                                       \
            smallm_scales(sw[i_], sc_);                                                            \
            _Pragma("unroll") for (int kb_ = 0; kb_ < 4; kb_++)                                    \
                smallm_frag(wr[i_][2 * kb_], wr[i_][2 * kb_ + 1], sel, sc_[kb_], &BF[i_][kb_][0],  \
                            &BF[i_][kb_][1]);                                                      \
        }                                                                                          \
    }

/* The k16 steps of chunk C from fragments AF / BF: 4 blocks, 2 in a K % 64
 * == 32 tail (predicated, no branch: the block stays one basic block). */
#define SMALLM_MMA(AF, BF, C)                                                                      \
    {                                                                                              \
        const int nblk_ = (C) < num_full ? 4 : 2;                                                  \
        _Pragma("unroll") for (int kb_ = 0; kb_ < 4; kb_++) {                                      \
            if (kb_ < nblk_) {                                                                     \
                _Pragma("unroll") for (int i_ = 0; i_ < SMALLM_R; i_++)                            \
                    ptx_mma_16816(acc[i_], AF[kb_], BF[i_][kb_][0], BF[i_][kb_][1]);               \
            }                                                                                      \
        }                                                                                          \
    }

/* When chunk C ends a K slice: add the slice's accumulators to the running
 * sums in slice order (FP32 RNE) and restart the chain from +0. */
#define SMALLM_FOLD(C)                                                                             \
    {                                                                                              \
        if ((C) + 1 == slice_end || (C) + 1 == num_kc) {                                           \
            _Pragma("unroll") for (int i_ = 0; i_ < SMALLM_R; i_++)                                \
                _Pragma("unroll") for (int j_ = 0; j_ < 4; j_++) {                                 \
                    tot[i_][j_] = first_slice ? acc[i_][j_] : __fadd_rn(tot[i_][j_], acc[i_][j_]); \
                    acc[i_][j_] = 0.0f;                                                            \
                }                                                                                  \
            first_slice = 0;                                                                       \
            slice_end += p.chunks_per_slice;                                                       \
        }                                                                                          \
    }

/* One pipeline step: prefetch weights; wait for chunk C+1 and read it; then
 * the steps of chunk C (from CA / CB) and the dequantization of chunk C+1
 * (into NB) in one basic block, so the scheduler fills the latency of each
 * dependent mma with the next chunk's arithmetic; release chunk C+1's act
 * slot and weight slot. */
#define SMALLM_STEP(CA, CB, NA, NB, C)                                                             \
    {                                                                                              \
        if ((C) + SMALLM_WS - 1 < num_kc) SMALLM_STAGE_W((C) + SMALLM_WS - 1);                     \
        ptx_cp_async_commit();                                                                     \
        if ((C) + 1 < num_kc) {                                                                    \
            SMALLM_WAIT((C) + 1);                                                                  \
            SMALLM_READ(NA, (C) + 1);                                                              \
            SMALLM_MMA(CA, CB, C);                                                                 \
            SMALLM_DEQUANT(NB);                                                                    \
            __syncwarp(); /* every lane has read both slots before they are refilled */            \
            if (lane == 0) ptx_mbar_arrive(&empty[((C) + 1) % SMALLM_ACT_STAGES]);                 \
        } else {                                                                                   \
            SMALLM_MMA(CA, CB, C);                                                                 \
        }                                                                                          \
        SMALLM_FOLD(C);                                                                            \
    }

extern "C" __global__ void __launch_bounds__(32 * (SMALLM_WMAX + 1), 1)
    SMALLM_NAME(const __grid_constant__ nvfp4_sm90_small_params p)
{
    extern __shared__ __align__(16) uint8_t smem_small[];
    uint64_t *full = (uint64_t *)smem_small;
    uint64_t *empty = full + SMALLM_ACT_STAGES;
    uint8_t *act = smem_small + 256;
    uint8_t *stg = act + SMALLM_ACT_STAGES * SMALLM_ACT_SLOT;
    uint8_t *wrings = stg + SMALLM_STG_STAGES * SMALLM_STG_SLOT;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int consumers = (int)(blockDim.x / 32) - 1;
    const int first_item = (int)blockIdx.x * consumers;
    const int active = p.items - first_item < consumers ? p.items - first_item : consumers;
    const int kbytes = p.k / 2;
    const int num_kc = (p.k + 63) / 64, num_full = p.k / 64;

    if (threadIdx.x == 0) {
        for (int s = 0; s < SMALLM_ACT_STAGES; s++) {
            ptx_mbar_init(&full[s], 32);          /* every producer lane arrives */
            ptx_mbar_init(&empty[s], (uint32_t)active); /* one arrival per working consumer */
        }
        ptx_fence_mbar_init();
    }
    __syncthreads();

    if (warp == 0) {
        /* ---------------- activation producer ---------------- */
        const uint8_t *cp_src[SMALLM_NP(SMALLM_MT)];
        int cp_dst[SMALLM_NP(SMALLM_MT)], cp_step[SMALLM_NP(SMALLM_MT)];
        bool cp_act[SMALLM_NP(SMALLM_MT)], cp_ok[SMALLM_NP(SMALLM_MT)], cp_hi[SMALLM_NP(SMALLM_MT)];
        SMALLM_SETUP(SMALLM_MT, 0, p.m, p.a_codes, p.a_scales);
        for (int c = 0; c < SMALLM_STG_STAGES - 1; c++) {
            if (c < num_kc) SMALLM_STAGE_A(c);
            ptx_cp_async_commit();
        }
        for (int c = 0; c < num_kc; c++) {
            if (c + SMALLM_STG_STAGES - 1 < num_kc) SMALLM_STAGE_A(c + SMALLM_STG_STAGES - 1);
            ptx_cp_async_commit();
            PTX_CP_ASYNC_WAIT(SMALLM_STG_STAGES - 1); /* chunk c has landed (this lane's copies) */
            __syncwarp();                             /* ... and every lane's */
            const int s = c % SMALLM_ACT_STAGES;
            ptx_mbar_wait(&empty[s], (uint32_t)(((c / SMALLM_ACT_STAGES) & 1) ^ 1));
            const uint8_t *src = stg + (size_t)(c % SMALLM_STG_STAGES) * SMALLM_STG_SLOT;
            uint8_t *dst = act + (size_t)s * SMALLM_ACT_SLOT;
#pragma unroll
            for (int j = 0; j < SMALLM_MT / 2; j++) {
                /* entry e = (kb, row, t): consecutive lanes write consecutive entries */
                const int e = lane + 32 * j;
                const int t = e & 3, row = (e >> 2) % SMALLM_MT, kb = e / (4 * SMALLM_MT);
                const uint2 w = *(const uint2 *)(src + row * 32 + kb * 8);
                const uint32_t sb = (SMALLM_SCALE_WORD(src, SMALLM_MT, 0, row) >> (8 * kb)) & 0x7Fu;
                const uint32_t sc =
                    ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(sb | (sb << 8))), 0x54005400u);
                uint32_t f0, f1;
                smallm_frag(w.x, w.y, (uint32_t)t | ((uint32_t)(t + 4) << 4), sc, &f0, &f1);
                /* a0 / a2 for rows 0..7, a1 / a3 for rows 8..15 of the m16 tile */
                uint8_t *q = dst + (((kb * 8 + row % 8) * 4 + t) * 16);
                if (SMALLM_MT == 8) {
                    *(uint4 *)q = make_uint4(f0, 0u, f1, 0u);
                } else {
                    *(uint32_t *)(q + (row / 8) * 4) = f0;
                    *(uint32_t *)(q + 8 + (row / 8) * 4) = f1;
                }
            }
            ptx_mbar_arrive(&full[s]); /* releases this lane's fragment stores */
            __syncwarp();              /* the staging slot is refilled next iteration */
        }
        PTX_CP_ASYNC_WAIT(0);
        return;
    }

    /* ---------------- consumers ---------------- */
    const int cw = warp - 1;
    if (cw >= active) return;
    const int n0 = (first_item + cw) * 8 * SMALLM_R;
    const int g = lane >> 2, t = lane & 3;
    const uint32_t sel = (uint32_t)t | ((uint32_t)(t + 4) << 4);
    uint8_t *ring = wrings + (size_t)cw * SMALLM_WS * SMALLM_W_SLOT;
    const float alpha = __fmul_rn(*p.a_scale2, *p.b_scale2);
    const uint8_t *cp_src[SMALLM_NP(8 * SMALLM_R)];
    int cp_dst[SMALLM_NP(8 * SMALLM_R)], cp_step[SMALLM_NP(8 * SMALLM_R)];
    bool cp_act[SMALLM_NP(8 * SMALLM_R)], cp_ok[SMALLM_NP(8 * SMALLM_R)], cp_hi[SMALLM_NP(8 * SMALLM_R)];
    SMALLM_SETUP(8 * SMALLM_R, n0, p.n, p.b_codes, p.b_scales);

    for (int c = 0; c < SMALLM_WS - 1; c++) {
        if (c < num_kc) SMALLM_STAGE_W(c);
        ptx_cp_async_commit();
    }
    float acc[SMALLM_R][4], tot[SMALLM_R][4];
#pragma unroll
    for (int i = 0; i < SMALLM_R; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            acc[i][j] = 0.0f;
            tot[i][j] = 0.0f;
        }
    int first_slice = 1, slice_end = p.chunks_per_slice;
    uint32_t fa[4][4], fb[4][4];                   /* A fragments, two chunks */
    uint32_t ga[SMALLM_R][4][2], gb[SMALLM_R][4][2]; /* B fragments, two chunks */
    uint32_t wr[SMALLM_R][8], sw[SMALLM_R];          /* raw code / scale words of one chunk */
    SMALLM_WAIT(0);
    SMALLM_READ(fa, 0);
    SMALLM_DEQUANT(ga);
    __syncwarp();
    if (lane == 0) ptx_mbar_arrive(&empty[0]);
    for (int c = 0; c < num_kc; c += 2) {
        SMALLM_STEP(fa, ga, fb, gb, c);
        if (c + 1 >= num_kc) break;
        SMALLM_STEP(fb, gb, fa, ga, c + 1);
    }
    PTX_CP_ASYNC_WAIT(0);

    /* ---- epilogue: tot[i][0..1] = (m = g, n = n0 + 8i + 2t + {0,1}); [2..3]: m = g + 8 ---- */
#pragma unroll
    for (int i = 0; i < SMALLM_R; i++) {
        const int n = n0 + 8 * i + 2 * t;
        if (n0 + 8 * i >= p.n) continue;
        const float b0 = p.bias ? p.bias[n] : 0.0f, b1 = p.bias ? p.bias[n + 1] : 0.0f;
#pragma unroll
        for (int h = 0; h < SMALLM_MT / 8; h++) {
            const int m = g + 8 * h;
            if (m >= p.m) continue;
            const size_t o = (size_t)m * (size_t)p.n + (size_t)n;
            const float v0 = tot[i][2 * h], v1 = tot[i][2 * h + 1];
            if (p.raw) *(float2 *)(p.raw + o) = make_float2(v0, v1);
            if (p.out) {
                float y0 = __fmul_rn(alpha, v0), y1 = __fmul_rn(alpha, v1);
                if (p.bias) {
                    y0 = __fadd_rn(y0, b0);
                    y1 = __fadd_rn(y1, b1);
                }
                *(uint32_t *)(p.out + o) =
                    (uint32_t)nvfp4_dev_bf16_rne(y0) | ((uint32_t)nvfp4_dev_bf16_rne(y1) << 16);
            }
        }
    }
}

#undef SMALLM_STEP
#undef SMALLM_MMA
#undef SMALLM_WAIT
#undef SMALLM_READ
#undef SMALLM_DEQUANT
#undef SMALLM_FOLD
#undef SMALLM_STAGE_W
#undef SMALLM_STAGE_A
#undef SMALLM_STAGE
#undef SMALLM_SETUP
#undef SMALLM_NP
#undef SMALLM_SCALE_WORD
#undef SMALLM_ACT_SLOT
#undef SMALLM_STG_SLOT
#undef SMALLM_W_SLOT
#undef SMALLM_MT
#undef SMALLM_R
#undef SMALLM_WS
#undef SMALLM_WMAX
#undef SMALLM_NAME
