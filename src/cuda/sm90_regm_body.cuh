/* sm90_regm_body.cuh -- the register small-M kernel, included once per
 * variant by sm90_gemm.cu with these macros defined (design: sm90_regm.cuh):
 *   REGM_MT    activation rows per CTA: 8, 16 or 32 (M <= MT)
 *   REGM_TW    8-row weight chains per MMA warp (1, 2 or 4)
 *   REGM_NAME  the kernel's name
 *   REGM_BF16  1: the in-kernel A producer (BF16 activations in; MT = 8) */

#define REGM_NT (REGM_MT / 8)                /* n8 token tiles (activation warps) */
#define REGM_NM (REGM_MT <= 16 ? 1 : 2)      /* m16 token tiles of the mma */
#define REGM_AWN REGM_AW(REGM_MT, REGM_TW)
#define REGM_APS (REGM_AWN / REGM_NT) /* activation warps per n8 tile: block-pair stride */
#define REGM_THREADS (REGM_THREADS_MAX(REGM_MT, REGM_TW) + 32 * REGM_QWN)
#define REGM_FB REGM_FRAG_BLOCK_BYTES(REGM_MT) /* A-fragment bytes per block */
#ifndef REGM_BF16
#define REGM_BF16 0
#endif
/* the quantizer warps of the REGM_BF16 kernels (p.qwarps of them work) */
#define REGM_QWN (REGM_BF16 ? REGM_QW : 0)
#if REGM_BF16
/* the quantizer warp's blocks per lane and chunk */
#define REGM_QB (REGM_MT * 16 / 32)
static_assert(REGM_MT == 8, "the in-kernel A producer is built for MT = 8 (M <= 8)");
static_assert(2 * Q_TAB * 16 == REGM_QTAB_BYTES, "the threshold table's shared-memory reserve");
#endif

/* The activation A fragment {a0, a1, a2, a3} of block B, m16 token tile Q,
 * of the chunk in stage `st` (one 16-byte load straight into the mma's
 * register quad; with MT = 8, a1 and a3 -- token rows 8..15 -- are zeros
 * written once: zero registers instead cost the quad a move per block). */
#define REGM_AFRAG(B, Q, A)                                                                        \
    {                                                                                              \
        const uint4 v_ = *(const uint4 *)(st + act_ld + (B) * REGM_FB + (Q) * 512);               \
        A[0] = v_.x;                                                                               \
        A[1] = v_.y;                                                                               \
        A[2] = v_.z;                                                                               \
        A[3] = v_.w;                                                                               \
    }

/* The B fragments of blocks 2 BP, 2 BP + 1 of one chain from the lane's
 * code word X (its bytes 2t, 2t+1 of both blocks) and the blocks' FP16
 * scale pairs SC (.x = {s, s} * 64 of block 2 BP, .y of 2 BP + 1):
 * cvt e4m3x2 -> f16x2 (exact), times the scale (exact). */
#define REGM_BFRAGS(X, SC, B0, B1, B2, B3)                                                         \
    {                                                                                              \
        uint32_t ev_, od_;                                                                         \
        nvfp4_codes_to_e4m3((X), &ev_, &od_);                                                      \
        B0 = ptx_hmul2(ptx_e4m3x2_lo_to_f16x2(ev_), (SC).x);                                       \
        B1 = ptx_hmul2(ptx_e4m3x2_lo_to_f16x2(od_), (SC).x);                                       \
        B2 = ptx_hmul2(ptx_e4m3x2_hi_to_f16x2(ev_), (SC).y);                                       \
        B3 = ptx_hmul2(ptx_e4m3x2_hi_to_f16x2(od_), (SC).y);                                       \
    }

/* Blocks 2 BP and 2 BP + 1 (the 16-byte code chunk BP of each row) of every
 * chain of this MMA warp: per chain, one 32-bit code word per block (the
 * lane's bytes 2t, 2t+1 in half t & 1) and the blocks' FP16 scale pairs
 * (one 8-byte load) -> both blocks' B fragments in registers.  Then the
 * mma of both blocks; with FOLD, at the end of a 64-element group, the fold
 * of a finished K slice. */
#define REGM_PAIR(BP, FOLD)                                                                        \
    {                                                                                              \
        uint32_t a_[2][REGM_NM][4];                                                                \
        _Pragma("unroll") for (int q_ = 0; q_ < REGM_NM; q_++) {                                   \
            REGM_AFRAG(2 * (BP), q_, a_[0][q_]);                                                   \
            REGM_AFRAG(2 * (BP) + 1, q_, a_[1][q_]);                                               \
        }                                                                                          \
        _Pragma("unroll") for (int j_ = 0; j_ < REGM_TW; j_++) {                                   \
            const uint2 sc_ = *(const uint2 *)(st + sfo[j_] + (BP) * 64);                           \
            const int cw_ = crow[j_] + (((BP) << 4) ^ gx);                                         \
            const uint32_t x_ = ptx_prmt(*(const uint32_t *)(st + cw_), *(const uint32_t *)(st + cw_ + 8), xsel); \
            uint32_t b00_, b01_, b10_, b11_;                                                       \
            REGM_BFRAGS(x_, sc_, b00_, b01_, b10_, b11_);                                          \
            _Pragma("unroll") for (int q_ = 0; q_ < REGM_NM; q_++) ptx_mma_16816_regs(              \
                acc[j_][q_], a_[0][q_][0], a_[0][q_][1], a_[0][q_][2], a_[0][q_][3], b00_, b01_);  \
            _Pragma("unroll") for (int q_ = 0; q_ < REGM_NM; q_++) ptx_mma_16816_regs(              \
                acc[j_][q_], a_[1][q_][0], a_[1][q_][1], a_[1][q_][2], a_[1][q_][3], b10_, b11_);  \
        }                                                                                          \
        const int gidx_ = 4 * c + ((BP) >> 1);                                                     \
        if ((FOLD) && (((BP) & 1) == 1 || 2 * (BP) + 2 == nblk) &&                                 \
            (gidx_ + 1 == slice_end || gidx_ + 1 == ngroups64)) {                                  \
            _Pragma("unroll") for (int j_ = 0; j_ < REGM_TW; j_++)                                 \
                _Pragma("unroll") for (int q_ = 0; q_ < REGM_NM; q_++)                             \
                    _Pragma("unroll") for (int e_ = 0; e_ < 4; e_++) {                             \
                tot[j_][q_][e_] = first_slice ? acc[j_][q_][e_] : __fadd_rn(tot[j_][q_][e_], acc[j_][q_][e_]); \
                acc[j_][q_][e_] = 0.0f;                                                            \
            }                                                                                      \
            first_slice = 0;                                                                       \
            slice_end += p.chunks_per_slice;                                                       \
        }                                                                                          \
    }

/* The hot path (16 blocks, no fold) as a software pipeline over block
 * pairs: the shared-memory loads of pair BP + 2 and the dequantization of
 * pair BP + 1 are issued before the mma of pair BP, so one MMA warp per
 * scheduler keeps its dependent chain fed (docs/KERNEL.md: the unpipelined
 * order left each block ~60 cycles of fixed-latency waits).  Registers
 * rotate by pair: wq[BP % 3] code words, sq[BP % 3] scale pairs, aq[BP % 3]
 * A fragments, bq[BP % 2] B fragments. */
#define REGM_LD(BP)                                                                                \
    {                                                                                              \
        _Pragma("unroll") for (int q_ = 0; q_ < REGM_NM; q_++) {                                   \
            REGM_AFRAG(2 * (BP), q_, aq[(BP) % 3][0][q_]);                                         \
            REGM_AFRAG(2 * (BP) + 1, q_, aq[(BP) % 3][1][q_]);                                     \
        }                                                                                          \
        _Pragma("unroll") for (int j_ = 0; j_ < REGM_TW; j_++) {                                   \
            const int cw_ = crow[j_] + (((BP) << 4) ^ gx);                                         \
            wq[(BP) % 3][j_][0] = *(const uint32_t *)(st + cw_);                                   \
            wq[(BP) % 3][j_][1] = *(const uint32_t *)(st + cw_ + 8);                               \
            sq[(BP) % 3][j_] = *(const uint2 *)(st + sfo[j_] + (BP) * 64);                          \
        }                                                                                          \
    }
#define REGM_DQ(BP)                                                                                \
    {                                                                                              \
        _Pragma("unroll") for (int j_ = 0; j_ < REGM_TW; j_++) {                                   \
            const uint32_t x_ = ptx_prmt(wq[(BP) % 3][j_][0], wq[(BP) % 3][j_][1], xsel);          \
            REGM_BFRAGS(x_, sq[(BP) % 3][j_], bq[(BP) & 1][j_][0], bq[(BP) & 1][j_][1],           \
                        bq[(BP) & 1][j_][2], bq[(BP) & 1][j_][3]);                                 \
        }                                                                                          \
    }
#define REGM_MM(BP)                                                                                \
    {                                                                                              \
        _Pragma("unroll") for (int j_ = 0; j_ < REGM_TW; j_++)                                     \
            _Pragma("unroll") for (int h_ = 0; h_ < 2; h_++)                                       \
                _Pragma("unroll") for (int q_ = 0; q_ < REGM_NM; q_++) ptx_mma_16816_regs(          \
                    acc[j_][q_], aq[(BP) % 3][h_][q_][0], aq[(BP) % 3][h_][q_][1],                 \
                    aq[(BP) % 3][h_][q_][2], aq[(BP) % 3][h_][q_][3], bq[(BP) & 1][j_][2 * h_],    \
                    bq[(BP) & 1][j_][2 * h_ + 1]);                                                 \
    }
#define REGM_HOT()                                                                                 \
    {                                                                                              \
        uint32_t wq[3][REGM_TW][2], aq[3][2][REGM_NM][4], bq[2][REGM_TW][4];                       \
        uint2 sq[3][REGM_TW];                                                                      \
        REGM_LD(0);                                                                                \
        REGM_LD(1);                                                                                \
        REGM_DQ(0);                                                                                \
        REGM_LD(2);                                                                                \
        REGM_DQ(1);                                                                                \
        REGM_MM(0);                                                                                \
        REGM_LD(3);                                                                                \
        REGM_DQ(2);                                                                                \
        REGM_MM(1);                                                                                \
        REGM_LD(4);                                                                                \
        REGM_DQ(3);                                                                                \
        REGM_MM(2);                                                                                \
        REGM_LD(5);                                                                                \
        REGM_DQ(4);                                                                                \
        REGM_MM(3);                                                                                \
        REGM_LD(6);                                                                                \
        REGM_DQ(5);                                                                                \
        REGM_MM(4);                                                                                \
        REGM_LD(7);                                                                                \
        REGM_DQ(6);                                                                                \
        REGM_MM(5);                                                                                \
        REGM_DQ(7);                                                                                \
        REGM_MM(6);                                                                                \
        REGM_MM(7);                                                                                \
    }

/* The activation fragments of blocks 2 BP, 2 BP + 1 of n8 tile u (token
 * rows 8u .. 8u + 7; lane (g, t) does row 8u + g) of the chunk in stage
 * `st`, from the row's two code words W0, W1 and the 4-block scale word SW:
 * the values {elements 4t, 4t+2} and {4t+1, 4t+3} -- the a0 and a2 (even u)
 * or a1 and a3 (odd u) of m16 tile u / 2. */
#define REGM_ACT_LD(BP, W0, W1)                                                                    \
    {                                                                                              \
        const int cw_ = act_row + (((BP) << 4) ^ gx);                                              \
        W0 = *(const uint32_t *)(st + cw_);                                                        \
        W1 = *(const uint32_t *)(st + cw_ + 8);                                                    \
    }
#define REGM_ACT_UNIT(BP, W0, W1, SW)                                                              \
    {                                                                                              \
        const uint32_t x_ = ptx_prmt(W0, W1, xsel);                                                \
        uint32_t ev_, od_;                                                                         \
        nvfp4_codes_to_e4m3(x_, &ev_, &od_);                                                       \
        const uint32_t sp_ = regm_scale_pair((SW), (BP) & 1);                                      \
        const uint32_t s0_ = ptx_prmt(sp_, 0, 0x1010u), s1_ = ptx_prmt(sp_, 0, 0x3232u);           \
        uint32_t *dst_ = (uint32_t *)(st + act_dst + 2 * (BP) * REGM_FB);                          \
        dst_[0] = ptx_hmul2(ptx_e4m3x2_lo_to_f16x2(ev_), s0_);                                     \
        dst_[2] = ptx_hmul2(ptx_e4m3x2_lo_to_f16x2(od_), s0_);                                     \
        dst_[REGM_FB / 4] = ptx_hmul2(ptx_e4m3x2_hi_to_f16x2(ev_), s1_);                           \
        dst_[REGM_FB / 4 + 2] = ptx_hmul2(ptx_e4m3x2_hi_to_f16x2(od_), s1_);                       \
    }
/* The weight scales of CTA row I = 8 i + g (its 16 blocks: one word per
 * 64-element group q, four independent chains) of the chunk in stage `st`
 * -> the FP16 pairs {s, s} * 64 of block pair BP at wsf_off + ((i * 8 + BP)
 * * 8 + g) * 8 (the MMA lanes load their row's two in one 8-byte load). */
#define REGM_WSCALE_ROW(I)                                                                         \
    {                                                                                              \
        const int r_ = tile0 * 8 + (I);                                                            \
        const uint8_t *src_ = st + wsc_off + (r_ / 128 - group0) * 2048 + (r_ % 32) * 16 + ((r_ % 128) / 32) * 4; \
        uint32_t w_[4];                                                                            \
        _Pragma("unroll") for (int q_ = 0; q_ < 4; q_++) w_[q_] = *(const uint32_t *)(src_ + q_ * 512) & 0x7F7F7F7Fu; \
        uint2 *d_ = (uint2 *)(st + wsf_off + (((I) >> 3) * 64 + ((I) & 7)) * 8);                   \
        _Pragma("unroll") for (int q_ = 0; q_ < 4; q_++) {                                         \
            const uint32_t s01_ = ptx_hmul2(ptx_e4m3x2_lo_to_f16x2(w_[q_]), 0x54005400u);          \
            const uint32_t s23_ = ptx_hmul2(ptx_e4m3x2_hi_to_f16x2(w_[q_]), 0x54005400u);          \
            d_[16 * q_] = make_uint2(ptx_prmt(s01_, 0, 0x1010u), ptx_prmt(s01_, 0, 0x3232u));      \
            d_[16 * q_ + 8] = make_uint2(ptx_prmt(s23_, 0, 0x1010u), ptx_prmt(s23_, 0, 0x3232u));  \
        }                                                                                          \
    }
#define REGM_ACT_SW(BP) (*(const uint32_t *)(st + act_sc + ((BP) >> 1) * 256 * SPLIT_AH(REGM_MT)))

extern "C" __global__ void __launch_bounds__(REGM_THREADS, 1)
    REGM_NAME(const __grid_constant__ nvfp4_sm90_regm_params p)
{
    extern __shared__ __align__(1024) uint8_t smem_regm_raw[];
    /* 1024-byte alignment for the swizzled boxes, by an offset from the shared
     * array (no integer round trip, so loads and stores stay LDS / STS) */
    uint8_t *smem = smem_regm_raw + ((1024u - (ptx_smem_addr(smem_regm_raw) & 1023u)) & 1023u);
    uint64_t *full = (uint64_t *)smem;             /* the stage's TMA boxes landed */
    uint64_t *act_full = full + REGM_MAX_STAGES;   /* its activation fragments are written */
    uint64_t *empty = act_full + REGM_MAX_STAGES;  /* every reader is done with it */
    uint64_t *x_ready = empty + REGM_MAX_STAGES;          /* REGM_BF16: its activation codes are written */
    float *x_pts_sm = (float *)(x_ready + REGM_MAX_STAGES); /* REGM_BF16: the per-tensor scale used */
    uint8_t *ring = smem + REGM_BAR_BYTES;
    /* REGM_BF16: the stage ends with the chunk's BF16 activation box */
    const size_t stage_bytes = REGM_STAGE_BYTES(REGM_MT, p.tmax) + (REGM_BF16 ? REGM_XBOX_BYTES(REGM_MT) : 0);
    const int xbox_off = (int)REGM_STAGE_BYTES(REGM_MT, p.tmax);
    /* offsets inside a stage (sm90_heuristics.cuh) */
    const int act_codes_off = p.tmax * 1024;
    const int wsc_off = act_codes_off + REGM_MT * 128;
    const int asc_off = wsc_off + REGM_SGMAX(p.tmax) * 2048;
    const int frag_off = asc_off + SPLIT_AH(REGM_MT) * 1024;
    const int wsf_off = frag_off + 16 * REGM_FB;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    /* this CTA's 8-row chains: [tile0, tile0 + tcount), balanced over the grid */
    const int tile0 = (int)((int64_t)blockIdx.x * p.tiles / gridDim.x);
    const int tcount = (int)((int64_t)(blockIdx.x + 1) * p.tiles / gridDim.x) - tile0;
    const int group0 = tile0 * 8 / 128; /* the first 128-row scale group */
    const int nblocks = p.k / 16;
    const int nch = (p.k + REGM_KC - 1) / REGM_KC;
    /* MMA warps with a chain of their own (a CTA one chain short of tmax
     * leaves its last warp idle: it exits at once instead of repeating a
     * chain, so the issue slots go to the real ones) */
    const int mma_live = (tcount + REGM_TW - 1) / REGM_TW;

    if (threadIdx.x == 0) {
        for (int s = 0; s < p.stages; s++) {
            ptx_mbar_init(&full[s], 1);
            ptx_mbar_init(&act_full[s], 32 * REGM_AWN);
            /* every reader lane arrives (one quantizer warp per chunk) */
            ptx_mbar_init(&empty[s], 32 * (mma_live + REGM_BF16 + REGM_AWN));
            if (REGM_BF16) ptx_mbar_init(&x_ready[s], 32);
        }
        ptx_fence_mbar_init();
    }
    __syncthreads();

    if (warp < p.loaders) {
        /* ---------------- loaders: warp w issues chunks w, w + loaders, ... ---------------- */
        if (lane != 0) return;
        ptx_prefetch_tmap(&p.tm_b_codes);
        ptx_prefetch_tmap(&p.tm_b_scales);
        ptx_prefetch_tmap(&p.tm_a_codes);
        ptx_prefetch_tmap(&p.tm_a_scales);
        if (REGM_BF16) ptx_prefetch_tmap(&p.tm_x);
        const int dm = p.dev_mode;
        /* the activation boxes (none when the activation warps quantize BF16 themselves) */
        const int abox = !REGM_BF16 && !(dm & REGM_DEV_NO_ABOX);
        const uint32_t bytes = (dm & REGM_DEV_NO_WCODES ? 0u : (uint32_t)p.tmax * 1024u) +
                               (dm & REGM_DEV_NO_WSCALE ? 0u : (uint32_t)REGM_SGMAX(p.tmax) * 2048u) +
                               (abox ? (uint32_t)REGM_MT * 128u + 1024u * SPLIT_AH(REGM_MT) : 0u) +
                               (REGM_BF16 ? (uint32_t)REGM_XBOX_BYTES(REGM_MT) : 0u);
        /* Weights first: the first ring's worth does not depend on the
         * previous kernel (the fused linear's quantizer, our programmatic
         * prerequisite), so it streams while that kernel finishes. */
        const int pro = nch < p.stages ? nch : p.stages;
        for (int c = warp; c < pro; c += p.loaders) {
            uint8_t *st = ring + (size_t)c * stage_bytes;
            ptx_mbar_arrive_expect_tx(&full[c], bytes);
            if (!(dm & REGM_DEV_NO_WCODES)) ptx_tma_load_2d(st, &p.tm_b_codes, &full[c], c * 128, tile0 * 8);
            if (!(dm & REGM_DEV_NO_WSCALE))
                ptx_tma_load_4d(st + wsc_off, &p.tm_b_scales, &full[c], 0, 0, 4 * c, group0);
            /* BF16 x was written before the amax pass began: no wait */
            if (REGM_BF16) ptx_tma_load_2d(st + xbox_off, &p.tm_x, &full[c], c * REGM_KC, 0);
        }
        if (abox) {
            ptx_griddep_wait();
            for (int c = warp; c < pro; c += p.loaders) {
                uint8_t *st = ring + (size_t)c * stage_bytes;
                ptx_tma_load_2d(st + act_codes_off, &p.tm_a_codes, &full[c], c * 128, 0);
                ptx_tma_load_3d(st + asc_off, &p.tm_a_scales, &full[c], 0, 0, 4 * c);
            }
        }
        for (int c = pro + ((warp - pro) % p.loaders + p.loaders) % p.loaders; c < nch; c += p.loaders) {
            const int s = c % p.stages;
            ptx_mbar_wait(&empty[s], (uint32_t)((c / p.stages - 1) & 1)); /* the stage's last use is read */
            uint8_t *st = ring + (size_t)s * stage_bytes;
            ptx_mbar_arrive_expect_tx(&full[s], bytes);
            if (!(dm & REGM_DEV_NO_WCODES)) ptx_tma_load_2d(st, &p.tm_b_codes, &full[s], c * 128, tile0 * 8);
            if (!(dm & REGM_DEV_NO_WSCALE))
                ptx_tma_load_4d(st + wsc_off, &p.tm_b_scales, &full[s], 0, 0, 4 * c, group0);
            if (abox) {
                ptx_tma_load_2d(st + act_codes_off, &p.tm_a_codes, &full[s], c * 128, 0);
                ptx_tma_load_3d(st + asc_off, &p.tm_a_scales, &full[s], 0, 0, 4 * c);
            }
            if (REGM_BF16) ptx_tma_load_2d(st + xbox_off, &p.tm_x, &full[s], c * REGM_KC, 0);
        }
        return;
    }

    const int g = lane >> 2, t = lane & 3;
    const int gx = g << 4; /* the 128-byte swizzle of box rows g mod 8 */
    /* prmt selector: the 16-bit half t & 1 of two words -> {lo, hi} */
    const uint32_t xsel = (t & 1) ? 0x7632u : 0x5410u;

#if REGM_BF16
    if (warp < p.loaders + REGM_QWN) {
        /* ---------------- the quantizer warps (the in-kernel A producer) ----------------
         * the per-tensor scale, the CTA's threshold table and zero rows >= m
         * (nothing else writes them) once, together; then warp q takes
         * chunks q, q + QWN, ..., running ahead of the activation warps by
         * up to the ring's depth: the chunk's BF16 blocks
         * (box row r at r * 512, TMA's zeros past x's rows and columns) ->
         * codes and scale bytes where TMA would have put them: code row r
         * at r * 128, 16-byte chunk (block pair) jp at jp ^ (r & 7) (the
         * 128-byte swizzle), the scale byte of block j in group j / 4. */
        /* p.qwarps divides p.stages: chunk c - stages, the stage's previous
         * use, is then this warp's own, so its wait on full[] is never more
         * than one phase ahead (mbarrier parity), and chunk c + stages
         * cannot land before it released chunk c */
        const int qw = warp - p.loaders, nq = p.qwarps, qi = qw * 32 + lane;
        if (qw >= nq) return;
        uint4 *qtab = (uint4 *)(ring + (size_t)p.stages * stage_bytes);
        if (!p.x_pts) ptx_griddep_wait(); /* the amax pass has completed */
        const float pts = p.x_pts ? *p.x_pts : q_dynamic_pts(*p.x_amax);
        const float rcp_pts = q_sm90_rcp(pts);
        for (int e = qi; e < Q_TAB; e += 32 * nq) q_table_entry(qtab, (uint32_t)e, p.cuda_variant, pts);
        if (qi == 0) { /* warp 0 owns chunk 0: its x_ready arrival publishes the scale */
            *x_pts_sm = pts;
            if (blockIdx.x == 0 && p.x_pts_out) *p.x_pts_out = pts;
        }
        /* each warp zeroes the stages of its own chunks (z = qw mod nq), so its
         * own x_ready arrivals publish them */
        for (int z = qw; z < p.stages; z += nq) {
            uint32_t *zc = (uint32_t *)(ring + (size_t)z * stage_bytes + act_codes_off);
            uint32_t *zs = (uint32_t *)(ring + (size_t)z * stage_bytes + asc_off);
            for (int i = lane; i < REGM_MT * 32; i += 32) zc[i] = 0;
            for (int i = lane; i < SPLIT_AH(REGM_MT) * 256; i += 32) zs[i] = 0;
        }
        ptx_bar_sync(1, 32 * nq); /* the table, before any warp reads it */
        for (int c = qw; c < nch; c += nq) {
            const int s = c % p.stages;
            const uint32_t ph = (uint32_t)(c / p.stages) & 1u;
            ptx_mbar_wait(&full[s], ph);
            uint8_t *st = ring + (size_t)s * stage_bytes;
            /* lane l: blocks b = l, l + 32, ... of the chunk (row b / 16, block b % 16) */
#pragma unroll
            for (int i = 0; i < REGM_QB; i++) {
                const int bq = lane + 32 * i, r = bq >> 4, j = bq & 15;
                if (r < p.m && 16 * c + j < nblocks) {
                    const uint4 *src = (const uint4 *)(st + xbox_off + r * 512 + j * 32);
                    const uint4 v0 = src[0], v1 = src[1];
                    const uint32_t wv[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
                    uint32_t s8;
                    const uint2 cw = q_block_codes(wv, qtab, pts, rcp_pts, p.cuda_variant, &s8);
                    *(uint2 *)(st + act_codes_off + r * 128 + ((((j >> 1) ^ (r & 7)) << 4) | ((j & 1) << 3))) = cw;
                    st[asc_off + (j >> 2) * 256 * SPLIT_AH(REGM_MT) + r * 16 + (j & 3)] = (uint8_t)s8;
                }
            }
            if ((p.x_codes || p.x_scales) && blockIdx.x == 0) {
                /* the NVFP4 activations to memory on request: CTA 0 codes the
                 * chunk's blocks of all 16 padded rows again (rows >= m are
                 * zeros, as nvfp4_quantize pads) */
                for (int bq = lane; bq < 16 * 16; bq += 32) {
                    const int r = bq >> 4, cb = 16 * c + (bq & 15);
                    if (cb >= nblocks) continue;
                    uint32_t wv[8] = {0, 0, 0, 0, 0, 0, 0, 0}, s8;
                    if (r < REGM_MT) {
                        const uint4 *src = (const uint4 *)(st + xbox_off + r * 512 + (bq & 15) * 32);
                        const uint4 v0 = src[0], v1 = src[1];
                        wv[0] = v0.x, wv[1] = v0.y, wv[2] = v0.z, wv[3] = v0.w;
                        wv[4] = v1.x, wv[5] = v1.y, wv[6] = v1.z, wv[7] = v1.w;
                    }
                    const uint2 cw = q_block_codes(wv, qtab, pts, rcp_pts, p.cuda_variant, &s8);
                    if (p.x_codes) *(uint2 *)(p.x_codes + (size_t)r * (size_t)(nblocks * 8) + (size_t)cb * 8) = cw;
                    if (p.x_scales) p.x_scales[nvfp4_tiled_offset(r, cb, p.ncb)] = (uint8_t)s8;
                }
            }
            ptx_mbar_arrive(&x_ready[s]); /* releases this lane's codes (and, before, pts and zeros) */
            ptx_mbar_arrive(&empty[s]);   /* ... and its reads of the stage */
        }
        return;
    }
#endif

    if (warp < p.loaders + REGM_QWN + REGM_AWN) {
        /* ---------------- activation dequantizers ---------------- */
        /* warp aw: n8 tile u = aw % NT, block pairs aw / NT, + REGM_APS, ... */
        const int aw = warp - p.loaders - REGM_QWN, u = aw % REGM_NT, bp0 = aw / REGM_NT, r = 8 * u + g;
        /* the row's code words (block pair 0, before the swizzle) and scale
         * words (chunk 0) in a stage; its fragments' slot in block 0 */
        const int act_row = act_codes_off + r * 128 + (t >> 1) * 4;
        const int act_sc = asc_off + (r / 16) * 256 + (r % 16) * 16;
        const int act_dst = frag_off + ((u >> 1) * 32 + lane) * 16 + (u & 1) * 4;
        if (REGM_MT == 8 && aw == 0) /* token rows 8..15 of every fragment: zero, once */
            for (int z = 0; z < p.stages * 16; z++) {
                uint32_t *q = (uint32_t *)(ring + (size_t)(z / 16) * stage_bytes + frag_off + (z % 16) * REGM_FB + lane * 16);
                q[1] = 0;
                q[3] = 0;
            }
        const int wsc_rows = 8 * tcount; /* the CTA's weight rows */
        int s = 0;
        uint32_t ph = 0;
        for (int c = 0; c < nch; c++) {
            ptx_mbar_wait(&full[s], ph);
            if (REGM_BF16) ptx_mbar_wait(&x_ready[s], ph); /* the quantizer warp coded the chunk */
            uint8_t *st = ring + (size_t)s * stage_bytes;
            const int nbp = (nblocks - 16 * c < 16 ? nblocks - 16 * c : 16) / 2; /* block pairs */
            if (p.dev_mode & REGM_DEV_NO_ACT) {
            } else if (nbp == 8) { /* every load first, so the units overlap */
                uint32_t w_[8 / REGM_APS][2], sw_[8 / REGM_APS];
#pragma unroll
                for (int i = 0; i < 8 / REGM_APS; i++) {
                    const int bp = bp0 + REGM_APS * i;
                    REGM_ACT_LD(bp, w_[i][0], w_[i][1]);
                    sw_[i] = REGM_ACT_SW(bp);
                }
#pragma unroll
                for (int i = 0; i < 8 / REGM_APS; i++) REGM_ACT_UNIT(bp0 + REGM_APS * i, w_[i][0], w_[i][1], sw_[i]);
            } else {
#pragma unroll
                for (int i = 0; i < 8 / REGM_APS; i++) {
                    const int bp = bp0 + REGM_APS * i;
                    if (bp < nbp) {
                        uint32_t w0, w1;
                        REGM_ACT_LD(bp, w0, w1);
                        REGM_ACT_UNIT(bp, w0, w1, REGM_ACT_SW(bp));
                    }
                }
            }
            if (!(p.dev_mode & REGM_DEV_NO_ACT))
                for (int i = aw * 32 + lane; i < wsc_rows; i += 32 * REGM_AWN) REGM_WSCALE_ROW(i);
            ptx_mbar_arrive(&act_full[s]); /* releases this lane's fragment and scale stores */
            ptx_mbar_arrive(&empty[s]);    /* ... and its reads of the stage */
            if (++s == p.stages) {
                s = 0;
                ph ^= 1u;
            }
        }
        return;
    }

    /* ---------------- MMA warps ---------------- */
    const int mw = warp - p.loaders - REGM_QWN - REGM_AWN;
    if (mw >= mma_live) return;
    float acc[REGM_TW][REGM_NM][4], tot[REGM_TW][REGM_NM][4];
#pragma unroll
    for (int j = 0; j < REGM_TW; j++)
#pragma unroll
        for (int q = 0; q < REGM_NM; q++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                acc[j][q][e] = 0.0f;
                tot[j][q][e] = 0.0f;
            }
    const int ngroups64 = (p.k + 63) / 64;
    int first_slice = 1, slice_end = p.chunks_per_slice;
    /* this lane's activation fragment slot (block 0, n8 tile 0) */
    const int act_ld = frag_off + lane * 16;
    /* Per chain: the code word of its box row g (before the swizzle) and the
     * row's FP16 scale pairs (block 0).  Warps with fewer than REGM_TW chains
     * repeat the CTA's last one, so the loop has no predicates; the epilogue
     * stores only real chains. */
    int crow[REGM_TW], sfo[REGM_TW];
#pragma unroll
    for (int j = 0; j < REGM_TW; j++) {
        const int i0 = mw * REGM_TW + j, i = i0 < tcount ? i0 : tcount - 1;
        crow[j] = (8 * i + g) * 128 + (t >> 1) * 4;
        sfo[j] = wsf_off + (64 * i + g) * 8;
    }
    int s = 0;
    uint32_t ph = 0;
    for (int c = 0; c < nch; c++) {
        ptx_mbar_wait(&full[s], ph);
        ptx_mbar_wait(&act_full[s], ph);
        const uint8_t *st = ring + (size_t)s * stage_bytes;
        const int nblk = nblocks - 16 * c < 16 ? nblocks - 16 * c : 16;
        if (p.dev_mode & REGM_DEV_NO_MMA) {
        } else if (nblk == 16 && 4 * c + 4 < slice_end && 4 * c + 4 < ngroups64) {
            /* the hot path: 16 steps and no K-slice fold, one basic block */
            REGM_HOT();
        } else { /* the K tail (2 .. 14 blocks) or a chunk that ends a K slice */
#pragma unroll
            for (int bp = 0; bp < 8; bp++)
                if (2 * bp < nblk) REGM_PAIR(bp, 1);
        }
        ptx_mbar_arrive(&empty[s]); /* this lane's loads of the stage are done */
        if (++s == p.stages) {
            s = 0;
            ph ^= 1u;
        }
    }

    /* ---- epilogue: tot[j][q][e] = (m = 16q + g + 8 (e >> 1), n = row 2t + (e & 1) of chain j) ---- */
    /* (REGM_BF16: the quantizer warp stored the scale before its first
     * x_ready arrival, which the activation warps waited for before their
     * act_full arrivals, which every MMA warp has waited for) */
    const float alpha = __fmul_rn(REGM_BF16 ? *x_pts_sm : *p.a_scale2, *p.b_scale2);
#pragma unroll
    for (int j = 0; j < REGM_TW; j++) {
        const int i = mw * REGM_TW + j;
        if (i >= tcount) continue;
        const int n = (tile0 + i) * 8 + 2 * t;
        const float bias0 = p.bias ? p.bias[n] : 0.0f, bias1 = p.bias ? p.bias[n + 1] : 0.0f;
#pragma unroll
        for (int q = 0; q < REGM_NM; q++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int m = 16 * q + g + 8 * h;
                if (m >= p.m) continue;
                const size_t o = (size_t)m * (size_t)p.n + (size_t)n; /* even (N % 16 == 0) */
                const float v0 = tot[j][q][2 * h], v1 = tot[j][q][2 * h + 1];
                float y0 = __fmul_rn(alpha, v0), y1 = __fmul_rn(alpha, v1);
                if (p.bias) {
                    y0 = __fadd_rn(y0, bias0);
                    y1 = __fadd_rn(y1, bias1);
                }
                const uint16_t o0 = nvfp4_dev_bf16_rne(y0), o1 = nvfp4_dev_bf16_rne(y1);
                if (p.pair_stores) {
                    if (p.raw) *(float2 *)(p.raw + o) = make_float2(v0, v1);
                    if (p.out) *(uint32_t *)(p.out + o) = (uint32_t)o0 | ((uint32_t)o1 << 16);
                } else {
                    if (p.raw) {
                        p.raw[o] = v0;
                        p.raw[o + 1] = v1;
                    }
                    if (p.out) {
                        p.out[o] = o0;
                        p.out[o + 1] = o1;
                    }
                }
            }
    }
}

#undef REGM_PAIR
#undef REGM_AFRAG
#undef REGM_ACT_UNIT
#undef REGM_NT
#undef REGM_NM
#undef REGM_AWN
#undef REGM_APS
#undef REGM_LD
#undef REGM_DQ
#undef REGM_MM
#undef REGM_HOT
#undef REGM_ACT_LD
#undef REGM_ACT_SW
#undef REGM_FB
#undef REGM_BFRAGS
#undef REGM_WSCALE_ROW
#undef REGM_THREADS
#undef REGM_MT
#undef REGM_TW
#undef REGM_NAME
#undef REGM_BF16
#undef REGM_QWN
#ifdef REGM_QB
#undef REGM_QB
#endif
