/* sm90_regm_body.cuh -- the register small-M kernel, included once per
 * variant by sm90_gemm.cu with these macros defined (design: sm90_regm.cuh):
 *   REGM_MT    activation rows per CTA: 8, 16 or 32 (M <= MT)
 *   REGM_TW    weight chains per MMA warp (1, 2 or 4)
 *   REGM_NAME  the kernel's name
 *   REGM_BF16  1: the in-kernel A producer (BF16 activations in): the
 *              activation warps quantize each chunk's BF16 blocks
 *              themselves (below, "activation warps")
 *   REGM_WA    1: the weights are the mma's A operand (16-row chains, the
 *              activations the n8 B operand; kind REGW), 0: the B operand
 *              (8-row chains, the activations the m16 A operand; kind REGM)
 *   REGM_ROT   R > 1 (with REGM_WA, TW = 1; kind REGR): R MMA warps per
 *              chain take its chunks in turn, handing the accumulator on
 *              through shared memory (below, "MMA warps") */

#ifndef REGM_WA
#define REGM_WA 0
#endif
#ifndef REGM_ROT
#define REGM_ROT 0
#endif
/* REGR at MT = 16 (two activation warps): each activation warp takes whole
 * chunks in turn, so two chunks are in flight, where splitting every chunk's
 * block pairs over both warps kept them on one chunk at a time (attn-out and
 * FC2 at M = 16 8-9 % faster on the H200; at MT = 8, four warps, 1 % slower:
 * docs/KERNEL.md).  The REGM_BF16 kernels always take whole chunks. */
#define REGM_ACT_ROT (REGM_MT >= 16 && REGM_ROT && !REGM_BF16)
static_assert(!REGM_ROT || (REGM_WA && REGM_TW == 1 && REGM_ROT > 1), "the rotating warps are built on REGM_WA, TW = 1");
#define REGM_U (REGM_WA ? 2 : 1)             /* 8-row units (box rows / 8) per chain */
#define REGM_STAGE(mt, tmax) (REGM_WA ? REGW_STAGE_BYTES(mt, tmax) : REGM_STAGE_BYTES(mt, tmax))
#define REGM_NT (REGM_MT / 8)                /* n8 token tiles (activation warps) */
#define REGM_NM (REGM_MT <= 16 ? 1 : 2)      /* m16 token tiles of the mma */
#define REGM_NQ (REGM_WA ? REGM_NT : REGM_NM) /* token tiles per chain and block: mma per block */
#define REGM_AWN (REGM_ROT ? REGR_AW(REGM_MT) : REGM_AW(REGM_MT, REGM_TW))
#define REGM_APS (REGM_AWN / REGM_NT) /* activation warps per n8 tile: block-pair stride */
#if REGM_ROT
#define REGM_THREADS (REGR_THREADS_MAX(REGM_MT))
/* every register the block size allows (__launch_bounds__ gave 128 and
 * spills of the chunk's fragments) */
#define REGM_BOUNDS __maxnreg__(REGR_NREG(REGM_MT))
#define REGM_FB REGW_FRAG_BLOCK_BYTES(REGM_MT)
#define REGM_AH 1
#elif REGM_WA
#define REGM_BOUNDS __launch_bounds__(REGM_THREADS, 1)
#define REGM_THREADS (REGW_THREADS_MAX(REGM_MT, REGM_TW))
#define REGM_FB REGW_FRAG_BLOCK_BYTES(REGM_MT) /* activation-fragment bytes per block */
#define REGM_AH 1 /* word offset of a lane's second value ({4t+1, 4t+3}) in its fragment */
#else
#define REGM_BOUNDS __launch_bounds__(REGM_THREADS, 1)
#define REGM_THREADS (REGM_THREADS_MAX(REGM_MT, REGM_TW))
#define REGM_FB REGM_FRAG_BLOCK_BYTES(REGM_MT)
#define REGM_AH 2
#endif
#ifndef REGM_BF16
#define REGM_BF16 0
#endif
static_assert(!REGM_WA || REGM_MT <= 16, "the weights-as-A kernel is built for MT = 8 and 16");
static_assert(!REGM_BF16 || REGM_MT <= 16, "the in-kernel A producer is written for MT = 8 and 16");
static_assert(2 * Q_TAB * 16 == REGM_QTAB_BYTES, "the threshold table's shared-memory reserve");

/* The weight fragments of blocks 2 BP, 2 BP + 1 of one chain from the
 * lane's code word X -- its bytes 2t, 2t+1 of both blocks (REGM_WA = 0: one
 * 8-row chain, block 2 BP in the low half) or of block 2 BP of rows g
 * (low half) and g + 8 (REGM_WA = 1, called once per block) -- and the FP16
 * scale pairs: cvt e4m3x2 -> f16x2 (exact), times the scale (exact).
 *   REGM_WA = 0: SC.x = {s, s} * 64 of block 2 BP, SC.y of 2 BP + 1; B0, B1
 *   the B fragment {b0, b1} of block 2 BP, B2, B3 of 2 BP + 1.
 *   REGM_WA = 1: SP = {s(row g), s(row g + 8)} * 64 of the block; A0..A3
 *   its A fragment (a0, a2 row g; a1, a3 row g + 8; the scale broadcast is
 *   the HMUL2 operand's .H0_H0 / .H1_H1). */
#define REGM_BFRAGS(X, SC, B0, B1, B2, B3)                                                         \
    {                                                                                              \
        uint32_t ev_, od_;                                                                         \
        nvfp4_codes_to_e4m3((X), &ev_, &od_);                                                      \
        B0 = ptx_hmul2(ptx_e4m3x2_lo_to_f16x2(ev_), (SC).x);                                       \
        B1 = ptx_hmul2(ptx_e4m3x2_lo_to_f16x2(od_), (SC).x);                                       \
        B2 = ptx_hmul2(ptx_e4m3x2_hi_to_f16x2(ev_), (SC).y);                                       \
        B3 = ptx_hmul2(ptx_e4m3x2_hi_to_f16x2(od_), (SC).y);                                       \
    }
#define REGW_AFRAG(X, SP, A0, A1, A2, A3)                                                          \
    {                                                                                              \
        uint32_t ev_, od_;                                                                         \
        nvfp4_codes_to_e4m3((X), &ev_, &od_);                                                      \
        A0 = ptx_hmul2_by_lo(ptx_e4m3x2_lo_to_f16x2(ev_), (SP));                                   \
        A1 = ptx_hmul2_by_hi(ptx_e4m3x2_hi_to_f16x2(ev_), (SP));                                   \
        A2 = ptx_hmul2_by_lo(ptx_e4m3x2_lo_to_f16x2(od_), (SP));                                   \
        A3 = ptx_hmul2_by_hi(ptx_e4m3x2_hi_to_f16x2(od_), (SP));                                   \
    }

/* The MMA warps' work on block pair BP (blocks 2 BP, 2 BP + 1: the 16-byte
 * code chunk BP of each row) of the chunk in stage `st`, in three steps
 * over registers that rotate by pair: aq[BP % 3] activation fragments,
 * wq[BP % 3] code words, sq[BP % 3] scale pairs (REGM_LD, shared-memory
 * loads), bq[BP % 2] weight fragments (REGM_DQ, the dequantization),
 * then the mma of both blocks, each chain's accumulators in k order
 * (REGM_MM).
 *   REGM_WA = 0: activations the m16 A operand, one 16-byte load per block
 *   and m16 token tile straight into the mma's register quad (MT = 8: a1,
 *   a3 -- token rows 8..15 -- are zeros written once; zero registers cost
 *   the quad a move per block); per chain one 32-bit code word per block
 *   (the lane's bytes 2t, 2t+1 in half t & 1) and one 8-byte scale load.
 *   REGM_WA = 1: activations the n8 B operand, one 8-byte load per block and
 *   n8 token tile; per chain the code words of rows g and g + 8 (box rows
 *   16 i + g and + 8: the same 128-byte swizzle) and one 8-byte load of the
 *   two blocks' {s(g), s(g + 8)} pairs. */
#if REGM_WA
#define REGM_REGS                                                                                  \
    uint32_t wq[3][REGM_TW][4], aq[3][2][REGM_NT][2], bq[2][REGM_TW][2][4];                        \
    uint2 sq[3][REGM_TW];
#define REGM_LD(BP)                                                                                \
    {                                                                                              \
        _Pragma("unroll") for (int h_ = 0; h_ < 2; h_++)                                           \
            _Pragma("unroll") for (int u_ = 0; u_ < REGM_NT; u_++) {                               \
            const uint2 v_ = *(const uint2 *)(st + act_ld + (2 * (BP) + h_) * REGM_FB + u_ * 256);  \
            aq[(BP) % 3][h_][u_][0] = v_.x;                                                        \
            aq[(BP) % 3][h_][u_][1] = v_.y;                                                        \
        }                                                                                          \
        _Pragma("unroll") for (int j_ = 0; j_ < REGM_TW; j_++) {                                   \
            const int cw_ = crow[j_] + (((BP) << 4) ^ gx);                                         \
            wq[(BP) % 3][j_][0] = *(const uint32_t *)(st + cw_);                                   \
            wq[(BP) % 3][j_][1] = *(const uint32_t *)(st + cw_ + 8);                               \
            wq[(BP) % 3][j_][2] = *(const uint32_t *)(st + cw_ + 1024);                            \
            wq[(BP) % 3][j_][3] = *(const uint32_t *)(st + cw_ + 1032);                            \
            sq[(BP) % 3][j_] = *(const uint2 *)(st + sfo[j_] + (BP) * 64);                          \
        }                                                                                          \
    }
#define REGM_DQ(BP)                                                                                \
    {                                                                                              \
        _Pragma("unroll") for (int j_ = 0; j_ < REGM_TW; j_++) {                                   \
            const uint32_t xa_ = ptx_prmt(wq[(BP) % 3][j_][0], wq[(BP) % 3][j_][2], xsel);         \
            const uint32_t xb_ = ptx_prmt(wq[(BP) % 3][j_][1], wq[(BP) % 3][j_][3], xsel);         \
            REGW_AFRAG(xa_, sq[(BP) % 3][j_].x, bq[(BP) & 1][j_][0][0], bq[(BP) & 1][j_][0][1],   \
                       bq[(BP) & 1][j_][0][2], bq[(BP) & 1][j_][0][3]);                            \
            REGW_AFRAG(xb_, sq[(BP) % 3][j_].y, bq[(BP) & 1][j_][1][0], bq[(BP) & 1][j_][1][1],   \
                       bq[(BP) & 1][j_][1][2], bq[(BP) & 1][j_][1][3]);                            \
        }                                                                                          \
    }
#define REGM_MM(BP)                                                                                \
    {                                                                                              \
        _Pragma("unroll") for (int j_ = 0; j_ < REGM_TW; j_++)                                     \
            _Pragma("unroll") for (int h_ = 0; h_ < 2; h_++)                                       \
                _Pragma("unroll") for (int u_ = 0; u_ < REGM_NT; u_++) ptx_mma_16816_regs(          \
                    acc[j_][u_], bq[(BP) & 1][j_][h_][0], bq[(BP) & 1][j_][h_][1],                 \
                    bq[(BP) & 1][j_][h_][2], bq[(BP) & 1][j_][h_][3], aq[(BP) % 3][h_][u_][0],     \
                    aq[(BP) % 3][h_][u_][1]);                                                      \
    }
#else
#define REGM_REGS                                                                                  \
    uint32_t wq[3][REGM_TW][2], aq[3][2][REGM_NM][4], bq[2][REGM_TW][4];                           \
    uint2 sq[3][REGM_TW];
#define REGM_LD(BP)                                                                                \
    {                                                                                              \
        _Pragma("unroll") for (int q_ = 0; q_ < REGM_NM; q_++)                                     \
            _Pragma("unroll") for (int h_ = 0; h_ < 2; h_++) {                                     \
            const uint4 v_ = *(const uint4 *)(st + act_ld + (2 * (BP) + h_) * REGM_FB + q_ * 512); \
            aq[(BP) % 3][h_][q_][0] = v_.x;                                                        \
            aq[(BP) % 3][h_][q_][1] = v_.y;                                                        \
            aq[(BP) % 3][h_][q_][2] = v_.z;                                                        \
            aq[(BP) % 3][h_][q_][3] = v_.w;                                                        \
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
#endif

/* After block pair BP of a guarded chunk: at the end of a 64-element group
 * that ends a K slice (or K), the slice's partial is added to the total in
 * FP32 (slice order) and the accumulators restart from +0. */
#define REGM_FOLD(BP)                                                                              \
    {                                                                                              \
        const int gidx_ = 4 * c + ((BP) >> 1);                                                     \
        if ((((BP) & 1) == 1 || 2 * (BP) + 2 == nblk) &&                                           \
            (gidx_ + 1 == slice_end || gidx_ + 1 == ngroups64)) {                                  \
            _Pragma("unroll") for (int j_ = 0; j_ < REGM_TW; j_++)                                 \
                _Pragma("unroll") for (int q_ = 0; q_ < REGM_NQ; q_++)                             \
                    _Pragma("unroll") for (int e_ = 0; e_ < 4; e_++) {                             \
                tot[j_][q_][e_] = first_slice ? acc[j_][q_][e_] : __fadd_rn(tot[j_][q_][e_], acc[j_][q_][e_]); \
                acc[j_][q_][e_] = 0.0f;                                                            \
            }                                                                                      \
            first_slice = 0;                                                                       \
            slice_end += p.io.chunks_per_slice;                                                       \
        }                                                                                          \
    }

/* The guarded path (the K tail: 2 .. 14 blocks; a chunk that ends a K
 * slice): block pair BP alone, then the fold. */
#define REGM_PAIR(BP)                                                                              \
    {                                                                                              \
        REGM_REGS                                                                                  \
        REGM_LD(BP);                                                                               \
        REGM_DQ(BP);                                                                               \
        REGM_MM(BP);                                                                               \
        REGM_FOLD(BP);                                                                             \
    }

/* The hot path (16 blocks, no fold) as a software pipeline over block
 * pairs: the shared-memory loads of pair BP + 2 and the dequantization of
 * pair BP + 1 are issued before the mma of pair BP, so one MMA warp per
 * scheduler keeps its dependent chain fed (docs/KERNEL.md: the unpipelined
 * order left each block ~60 cycles of fixed-latency waits). */
#define REGM_HOT()                                                                                 \
    {                                                                                              \
        REGM_REGS                                                                                  \
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

/* REGM_ROT: one chunk of NB blocks (16 on the hot path) of chain jr in
 * stage `st`.  Blocks past NB (the K tail; NB is even) take zero scales and
 * zero activations, so their steps add nothing: a step whose 16 products
 * are +0 returns its accumulator unchanged (the products take no part in
 * E, an FP32 accumulator is a multiple of 2^(E - 25), and a zero
 * accumulator is +0: docs/ORACLE.md) -- and the tail chunk has the hot
 * path's code, without predicates or spills.  Every block's A fragment
 * into FA first (REGR_DQ); then the accumulator from the previous turn's
 * warp (REGR_ACC_IN: +0 for chunk 0) and the NB steps (REGR_STEPS), each
 * with its activation fragment (ptxas sinks part of the dequantization
 * math into the steps, where it fills their latency); the stage is
 * released after them.  (Tried and measured slower: every activation
 * fragment loaded up front and the stage released before the accumulator
 * wait, FC2 M = 1 38.7 us against 34.6.) */
#define REGR_DQ(FA, ST, NB)                                                                        \
        _Pragma("unroll") for (int bp = 0; bp < 8; bp++) {                                         \
            const int cw = crow0 + ((bp << 4) ^ gxw);                                              \
            const uint32_t w0 = *(const uint32_t *)((ST) + cw), w1 = *(const uint32_t *)((ST) + cw + 8); \
            const uint32_t w2 = *(const uint32_t *)((ST) + cw + crow_hi);                          \
            const uint32_t w3 = *(const uint32_t *)((ST) + cw + crow_hi + 8);                      \
            uint2 sp = *(const uint2 *)((ST) + sfo0 + bp * 64);                                    \
            if (2 * bp >= (NB)) sp = make_uint2(0u, 0u);                                           \
            REGW_AFRAG(ptx_prmt(w0, w2, xsel), sp.x, FA[2 * bp][0], FA[2 * bp][1], FA[2 * bp][2],  \
                       FA[2 * bp][3]);                                                             \
            REGW_AFRAG(ptx_prmt(w1, w3, xsel), sp.y, FA[2 * bp + 1][0], FA[2 * bp + 1][1],          \
                       FA[2 * bp + 1][2], FA[2 * bp + 1][3]);                                      \
        }
/* the chain's accumulator into the turn of chunk C (U = C) */
#define REGR_ACC_IN(C, U)                                                                          \
    if ((C) == 0) {                                                                                \
        _Pragma("unroll") for (int u = 0; u < REGM_NT; u++)                                        \
            _Pragma("unroll") for (int e = 0; e < 4; e++) acc[u][e] = 0.0f;                        \
    } else {                                                                                       \
        REGR_HAND_WAIT(U);                                                                         \
        _Pragma("unroll") for (int u = 0; u < REGM_NT; u++) {                                      \
            const float4 v = slot[u * 32];                                                         \
            acc[u][0] = v.x;                                                                       \
            acc[u][1] = v.y;                                                                       \
            acc[u][2] = v.z;                                                                       \
            acc[u][3] = v.w;                                                                       \
        }                                                                                          \
    }
/* The NB steps of the chunk whose activation fragments of block 0 (this
 * lane's) are at AP: blocks past NB take zero activations. */
#define REGR_STEPS(FA, AP, NB)                                                                     \
    _Pragma("unroll") for (int b = 0; b < 16; b++)                                                 \
        _Pragma("unroll") for (int u = 0; u < REGM_NT; u++) {                                      \
        uint32_t x0 = 0, x1 = 0;                                                                   \
        if (b < (NB)) {                                                                            \
            const uint2 x = *(const uint2 *)((AP) + b * REGM_FB + u * 256);                        \
            x0 = x.x;                                                                              \
            x1 = x.y;                                                                              \
        }                                                                                          \
        ptx_mma_16816_regs(acc[u], FA[b][0], FA[b][1], FA[b][2], FA[b][3], x0, x1);                \
    }
/* The end of a turn: with MORE chunks to go, the accumulator into the
 * chain's slot and on to the warp of turn NEXT (REGR_HAND_SIGNAL: it
 * releases the slot's stores); else this warp took the last chunk and
 * stores the outputs. */
#if REGM_BF16
/* the activation scale as the activation warps took it (the dynamic one after the chunks) */
#define REGR_LAST_ALPHA const float alpha = __fmul_rn(regm_x_pts(&p, x_static), b_scale);
#else
/* NOTES: the activation scale is the previous kernel's output in the fused
 * linear (the quantizer writes it; we are its programmatic dependent), so
 * it is read only here, after this warp's last stage: that stage's
 * activation boxes were issued after the loader's griddepcontrol.wait.
 * Read at the kernel's start it raced the quantizer's store (found when a
 * slower quantizer start made it lose: stale scales, wrong outputs). */
#define REGR_LAST_ALPHA const float alpha = __fmul_rn(*p.io.a_scale2, b_scale);
#endif
#define REGR_TURN_END(MORE, NEXT)                                                                  \
    if (MORE) {                                                                                    \
        _Pragma("unroll") for (int u = 0; u < REGM_NT; u++) slot[u * 32] =                         \
            make_float4(acc[u][0], acc[u][1], acc[u][2], acc[u][3]);                               \
        REGR_HAND_SIGNAL(NEXT);                                                                    \
        continue;                                                                                  \
    }                                                                                              \
    REGR_LAST_ALPHA                                                                                \
    REGW_EPILOGUE(jr, acc);
#define REGR_CHUNK(NB)                                                                             \
    {                                                                                              \
        uint32_t fa[16][4];                                                                        \
        REGR_DQ(fa, st, NB)                                                                        \
        REGR_ACC_IN(c, c)                                                                          \
        REGR_STEPS(fa, st + act_ld, NB)                                                            \
        ptx_mbar_arrive(&empty[s]); /* this lane's loads of the stage are done */                 \
    }

/* The weight row of the mma's A row g + 8 H of the CTA's chain I (the
 * chain's 16 consecutive rows). */
#define REGW_ROW_N(I, H) (tile0 * 8 + 16 * (I) + g + 8 * (H))
/* The REGW / REGR epilogue of chain I (16 rows): ACC[u][e] is output (m =
 * 8u + 2t + (e & 1), n = the chain's row g + 8 (e >> 1)): raw, and out =
 * BF16(FP32(alpha * raw) [+ bias]). */
#define REGW_EPILOGUE(I, ACC)                                                                      \
    {                                                                                              \
        _Pragma("unroll") for (int h_ = 0; h_ < 2; h_++) {                                         \
            const int n_ = REGW_ROW_N(I, h_);                                                      \
            const float bias_n_ = p.io.bias ? p.io.bias[n_] : 0.0f;                                      \
            _Pragma("unroll") for (int u_ = 0; u_ < REGM_NT; u_++)                                 \
                _Pragma("unroll") for (int e_ = 0; e_ < 2; e_++) {                                 \
                const int m_ = 8 * u_ + 2 * t + e_;                                                \
                if (m_ >= p.io.m) continue;                                                           \
                const size_t o_ = (size_t)m_ * (size_t)p.io.n + (size_t)n_;                           \
                const float v_ = (ACC)[u_][2 * h_ + e_];                                           \
                float y_ = __fmul_rn(alpha, v_);                                                   \
                if (p.io.bias) y_ = __fadd_rn(y_, bias_n_);                                           \
                if (p.io.raw) p.io.raw[o_] = v_;                                                         \
                if (p.io.out) p.io.out[o_] = nvfp4_dev_bf16_rne(y_);                                     \
            }                                                                                      \
        }                                                                                          \
    }

/* The activation fragments of blocks 2 BP, 2 BP + 1 of n8 tile u (token
 * rows 8u .. 8u + 7; lane (g, t) does row 8u + g) of the chunk in stage
 * `st`, from the row's two code words W0, W1 and the 4-block scale word SW:
 * the values {elements 4t, 4t+2} and {4t+1, 4t+3} -- the a0 and a2 (even u)
 * or a1 and a3 (odd u) of m16 tile u / 2 (REGM_WA = 0), the b0 and b1 of n8
 * tile u (REGM_WA = 1): words 0 and REGM_AH of the lane's fragment. */
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
        dst_[REGM_AH] = ptx_hmul2(ptx_e4m3x2_lo_to_f16x2(od_), s0_);                               \
        dst_[REGM_FB / 4] = ptx_hmul2(ptx_e4m3x2_hi_to_f16x2(ev_), s1_);                           \
        dst_[REGM_FB / 4 + REGM_AH] = ptx_hmul2(ptx_e4m3x2_hi_to_f16x2(od_), s1_);                 \
    }
#if REGM_BF16
/* The in-kernel A producer: the activation fragments of token row R, block
 * J of the chunk in stage `st`, from the block's code words CW
 * (nvfp4_quantize's bytes; lane t's elements are bytes 2t, 2t + 1: half t &
 * 1 of word t >> 1) and scale byte S8 -- REGM_ACT_UNIT's very instructions
 * on the same bytes, so the operands are the two-kernel path's bits -- for
 * the row's four lanes t, written by the lane that coded the block. */
#define REGM_XFRAG(R, J, CW, S8)                                                                   \
    {                                                                                              \
        const uint32_t sp_ = regm_scale_pair((S8) * 0x0101u, 0); /* {s, s} * 64 */                 \
        _Pragma("unroll") for (int h_ = 0; h_ < 2; h_++) {                                         \
            uint32_t ev_, od_;                                                                     \
            nvfp4_codes_to_e4m3(h_ ? (CW).y : (CW).x, &ev_, &od_);                                 \
            _Pragma("unroll") for (int e_ = 0; e_ < 2; e_++) {                                     \
                uint32_t *dst_ = (uint32_t *)(st + frag_off + (J) * REGM_FB + REGM_XFRAG_OFF(R, 2 * h_ + e_)); \
                dst_[0] = ptx_hmul2(e_ ? ptx_e4m3x2_hi_to_f16x2(ev_) : ptx_e4m3x2_lo_to_f16x2(ev_), sp_); \
                dst_[REGM_AH] = ptx_hmul2(e_ ? ptx_e4m3x2_hi_to_f16x2(od_) : ptx_e4m3x2_lo_to_f16x2(od_), sp_); \
            }                                                                                      \
        }                                                                                          \
    }
/* where lane (g, t) of the MMA warps reads token row R's values {4t, 4t + 2}
 * (+ 4 REGM_AH bytes: {4t + 1, 4t + 3}) in a block's fragments: REGM_ACT_UNIT's
 * act_dst for row R */
#define REGM_XFRAG_OFF(R, T)                                                                       \
    (REGM_WA ? ((R) >> 3) * 256 + (4 * ((R) & 7) + (T)) * 8                                        \
             : ((((R) >> 3) >> 1) * 32 + 4 * ((R) & 7) + (T)) * 16 + (((R) >> 3) & 1) * 4)
/* the token rows of the fragments (non-WA MT = 8: the m16 tile's 16) */
#define REGM_XROWS (REGM_WA || REGM_MT == 16 ? REGM_MT : 16)
#endif
/* Scale word q (blocks 4q .. 4q + 3 of the chunk, sign bits cleared) of CTA
 * row R of the chunk in stage `st` (the 128x4-tiled layout: row r of a
 * 128-row group at (r % 32) * 16 + ((r % 128) / 32) * 4 of each 512-byte
 * chunk q). */
#define REGM_WSCALE_WORD(R, Q)                                                                     \
    (*(const uint32_t *)(st + wsc_off + ((tile0 * 8 + (R)) / 128 - group0) * 2048 +                \
                         ((tile0 * 8 + (R)) % 32) * 16 + (((tile0 * 8 + (R)) % 128) / 32) * 4 + (Q) * 512) & \
     0x7F7F7F7Fu)
#if REGM_WA
/* The scale words q of rows g and g + 8 of chain i (CTA rows 16 i + g,
 * + 8) -> for blocks 4q .. 4q + 3 the FP16 pairs {s(g), s(g + 8)} * 64,
 * block pair BP's two at wsf_off + ((i * 8 + BP) * 8 + g) * 8 (the MMA lanes
 * load them in one 8-byte load). */
#define REGW_WSCALE_Q(I_, G_, Q_)                                                                   \
    {                                                                                              \
        const uint32_t w0_ = REGM_WSCALE_WORD(16 * (I_) + (G_), Q_);                               \
        const uint32_t w1_ = REGM_WSCALE_WORD(16 * (I_) + (G_) + 8, Q_);                           \
        uint2 *d_ = (uint2 *)(st + wsf_off + ((I_) * 64 + (G_)) * 8);                              \
        const uint32_t a01_ = ptx_hmul2(ptx_e4m3x2_lo_to_f16x2(w0_), 0x54005400u);                 \
        const uint32_t a23_ = ptx_hmul2(ptx_e4m3x2_hi_to_f16x2(w0_), 0x54005400u);                 \
        const uint32_t b01_ = ptx_hmul2(ptx_e4m3x2_lo_to_f16x2(w1_), 0x54005400u);                 \
        const uint32_t b23_ = ptx_hmul2(ptx_e4m3x2_hi_to_f16x2(w1_), 0x54005400u);                 \
        d_[16 * (Q_)] = make_uint2(ptx_prmt(a01_, b01_, 0x5410u), ptx_prmt(a01_, b01_, 0x7632u));  \
        d_[16 * (Q_) + 8] = make_uint2(ptx_prmt(a23_, b23_, 0x5410u), ptx_prmt(a23_, b23_, 0x7632u)); \
    }
#if REGM_ROT
/* REGR (two or three chains a CTA): item I = 32 i + 8 q + g, one word a
 * lane, so the chunk's items spread over all the activation warps */
#define REGM_WSCALE_PER_CHAIN 32
#define REGM_WSCALE_ITEM(I) REGW_WSCALE_Q((I) >> 5, (I) & 7, ((I) >> 3) & 3)
#else
/* REGW (many chains): item I = 8 i + g, its four words in turn (one word
 * an item measured slower: QKV M = 1 33.4 -> 39.4 us, the per-item row
 * arithmetic repeated four times) */
#define REGM_WSCALE_PER_CHAIN 8
#define REGM_WSCALE_ITEM(I)                                                                        \
    {                                                                                              \
        _Pragma("unroll") for (int q_ = 0; q_ < 4; q_++) REGW_WSCALE_Q((I) >> 3, (I) & 7, q_);     \
    }
#endif
#else
/* The weight scales of CTA row I = 8 i + g (its 16 blocks: one word per
 * 64-element group q, four independent chains) of the chunk in stage `st`
 * -> the FP16 pairs {s, s} * 64 of block pair BP at wsf_off + ((i * 8 + BP)
 * * 8 + g) * 8 (the MMA lanes load their row's two in one 8-byte load). */
#define REGM_WSCALE_PER_CHAIN 8
#define REGM_WSCALE_ITEM(I)                                                                        \
    {                                                                                              \
        uint32_t w_[4];                                                                            \
        _Pragma("unroll") for (int q_ = 0; q_ < 4; q_++) w_[q_] = REGM_WSCALE_WORD(I, q_);         \
        uint2 *d_ = (uint2 *)(st + wsf_off + (((I) >> 3) * 64 + ((I) & 7)) * 8);                   \
        _Pragma("unroll") for (int q_ = 0; q_ < 4; q_++) {                                         \
            const uint32_t s01_ = ptx_hmul2(ptx_e4m3x2_lo_to_f16x2(w_[q_]), 0x54005400u);          \
            const uint32_t s23_ = ptx_hmul2(ptx_e4m3x2_hi_to_f16x2(w_[q_]), 0x54005400u);          \
            d_[16 * q_] = make_uint2(ptx_prmt(s01_, 0, 0x1010u), ptx_prmt(s01_, 0, 0x3232u));      \
            d_[16 * q_ + 8] = make_uint2(ptx_prmt(s23_, 0, 0x1010u), ptx_prmt(s23_, 0, 0x3232u));  \
        }                                                                                          \
    }
#endif
/* The loader's weight boxes of chunk C into stage ST: codes, then scales. */
#define REGM_WEIGHT_BOXES(ST, BAR, C)                                                              \
    {                                                                                              \
        ptx_tma_load_2d(ST, &p.tm_b_codes, BAR, (C) * 128, tile0 * 8);                             \
        ptx_tma_load_4d((ST) + wsc_off, &p.tm_b_scales, BAR, 0, 0, 4 * (C), group0);               \
    }
/* The loader's activation boxes of chunk C into stage ST: codes and scales. */
#define REGM_ACT_BOXES(ST, BAR, C)                                                                 \
    {                                                                                              \
        ptx_tma_load_2d((ST) + act_codes_off, &p.tm_a_codes, BAR, (C) * 128, 0);                   \
        ptx_tma_load_3d((ST) + asc_off, &p.tm_a_scales, BAR, 0, 0, 4 * (C));                       \
    }
/* the activation scale box's 512-byte chunk stride in the stage */
#define REGM_ASC_Q (256 * REGM_ACT_HALVES(REGM_MT))
#define REGM_ACT_SW(BP) (*(const uint32_t *)(st + act_sc + ((BP) >> 1) * REGM_ASC_Q))

extern "C" __global__ void REGM_BOUNDS
    REGM_NAME(const __grid_constant__ nvfp4_sm90_regm_params p)
{
    extern __shared__ __align__(1024) uint8_t smem_regm_raw[];
    /* 1024-byte alignment for the swizzled boxes, by an offset from the shared
     * array (no integer round trip, so loads and stores stay LDS / STS) */
    uint8_t *smem = smem_regm_raw + ((1024u - (ptx_smem_addr(smem_regm_raw) & 1023u)) & 1023u);
    uint64_t *full = (uint64_t *)smem;             /* the stage's TMA boxes landed */
    uint64_t *act_full = full + REGM_MAX_STAGES;   /* its activation fragments are written */
    uint64_t *empty = act_full + REGM_MAX_STAGES;  /* every reader is done with it */
    uint8_t *ring = smem + REGM_BAR_BYTES;
    /* REGM_BF16: the stage ends with the chunk's BF16 activation box (x_rows rows) */
    const size_t stage_bytes = REGM_STAGE(REGM_MT, p.tmax) + (REGM_BF16 ? REGM_XBOX_BYTES(p.x_rows) : 0);
    const int xbox_off = (int)REGM_STAGE(REGM_MT, p.tmax);
    /* offsets inside a stage (sm90_heuristics.cuh) */
    const int act_codes_off = p.tmax * 1024;
    const int wsc_off = act_codes_off + REGM_MT * 128;
    const int asc_off = wsc_off + REGM_SGMAX(p.tmax) * 2048;
    const int frag_off = asc_off + REGM_ACT_HALVES(REGM_MT) * 1024;
    const int wsf_off = frag_off + 16 * REGM_FB;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    /* this CTA's 8-row units (box rows / 8): [tile0, tile0 + tcount), whole
     * chains of REGM_U units balanced over the grid */
    const int tile0 = REGM_U * (int)((int64_t)blockIdx.x * (p.tiles / REGM_U) / gridDim.x);
    const int tcount = REGM_U * (int)((int64_t)(blockIdx.x + 1) * (p.tiles / REGM_U) / gridDim.x) - tile0;
    const int chains = tcount / REGM_U;
    const int group0 = tile0 * 8 / 128; /* the first 128-row scale group */
    const int nblocks = p.io.k / 16;
    const int nch = (p.io.k + REGM_KC - 1) / REGM_KC;
    /* MMA warps with a chain of their own (a CTA one chain short of tmax
     * leaves its last warp idle: it exits at once instead of repeating a
     * chain, so the issue slots go to the real ones) */
    const int mma_live = REGM_ROT ? chains * REGM_ROT : (chains + REGM_TW - 1) / REGM_TW;
    /* REGM_ROT: the accumulator hand-off (REGR_HAND_WAIT), barrier j * R + r
     * (count 32) for the chunks turn r of chain j takes, after the other
     * barriers */
    uint64_t *acc_ready = (uint64_t *)(smem + REGR_ACC_BAR_OFF);
    (void)acc_ready;

    if (threadIdx.x == 0) {
        for (int s = 0; s < p.io.stages; s++) {
            ptx_mbar_init(&full[s], 1);
            /* REGM_BF16, REGM_ACT_ROT: one activation warp per chunk (below) */
            ptx_mbar_init(&act_full[s], 32 * (REGM_BF16 || REGM_ACT_ROT ? 1 : REGM_AWN));
            /* every reader lane arrives */
            ptx_mbar_init(&empty[s], 32 * ((REGM_ROT ? chains : mma_live) + (REGM_BF16 || REGM_ACT_ROT ? 1 : REGM_AWN)));
        }
        if (REGM_ROT)
            for (int i = 0; i < mma_live; i++) ptx_mbar_init(&acc_ready[i], 32);
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
        /* the activation boxes (none when the activation warps quantize BF16 themselves) */
        const int abox = !REGM_BF16;
        const uint32_t bytes =
            (uint32_t)p.tmax * 1024u + (uint32_t)REGM_SGMAX(p.tmax) * 2048u +
            (abox ? (uint32_t)REGM_MT * 128u + 4u * REGM_ASC_Q : 0u) +
            (REGM_BF16 ? (uint32_t)p.x_rows * 512u : 0u);
        /* Weights first: the first ring's worth does not depend on the
         * previous kernel (the fused linear's quantizer, our programmatic
         * prerequisite), so it streams while that kernel finishes. */
        const int pro = nch < p.io.stages ? nch : p.io.stages;
        for (int c = warp; c < pro; c += p.loaders) {
            uint8_t *st = ring + (size_t)c * stage_bytes;
            ptx_mbar_arrive_expect_tx(&full[c], bytes);
            REGM_WEIGHT_BOXES(st, &full[c], c)
            /* BF16 x was written before the amax pass began: no wait */
            if (REGM_BF16) ptx_tma_load_2d(st + xbox_off, &p.tm_x, &full[c], c * REGM_KC, 0);
        }
        if (abox) {
            ptx_griddep_wait();
            for (int c = warp; c < pro; c += p.loaders) {
                uint8_t *st = ring + (size_t)c * stage_bytes;
                REGM_ACT_BOXES(st, &full[c], c)
            }
        }
        for (int c = pro + ((warp - pro) % p.loaders + p.loaders) % p.loaders; c < nch; c += p.loaders) {
            const int s = c % p.io.stages;
            ptx_mbar_wait(&empty[s], (uint32_t)((c / p.io.stages - 1) & 1)); /* the stage's last use is read */
            uint8_t *st = ring + (size_t)s * stage_bytes;
            ptx_mbar_arrive_expect_tx(&full[s], bytes);
            REGM_WEIGHT_BOXES(st, &full[s], c)
            if (abox) {
                REGM_ACT_BOXES(st, &full[s], c)
            }
            if (REGM_BF16) ptx_tma_load_2d(st + xbox_off, &p.tm_x, &full[s], c * REGM_KC, 0);
        }
        return;
    }

    const int g = lane >> 2, t = lane & 3;
    const int gx = g << 4; /* the 128-byte swizzle of box rows g mod 8 */
    /* prmt selector: the 16-bit half t & 1 of two words -> {lo, hi} */
    const uint32_t xsel = (t & 1) ? 0x7632u : 0x5410u;

    if (warp < p.loaders + REGM_AWN) {
        /* ---------------- activation dequantizers ---------------- */
        const int aw = warp - p.loaders;
#if REGM_BF16
        /* The in-kernel A producer (docs/STREAMING_A.md): the activation
         * warps quantize the stage's BF16 box themselves -- block (row, j) of
         * the chunk by one lane, with the block kernel's very functions (the
         * CTA's threshold table, the exact steps where it does not cover the
         * block) -- and write its fragments with REGM_ACT_UNIT's
         * instructions.  First, together: the per-tensor scale and the
         * table. */
        uint4 *qtab = (uint4 *)(ring + (size_t)p.io.stages * stage_bytes +
                                (REGM_ROT ? REGR_SLOT_BYTES(REGM_MT, p.tmax) : 0));
        if (!p.x_pts) ptx_griddep_wait(); /* the amax pass has completed */
        const float pts = p.x_pts ? *p.x_pts : q_dynamic_pts(q_amax_of_parts(p.x_amax, p.x_amax_n));
        const float rcp_pts = q_sm90_rcp(pts);
        const int al = aw * 32 + lane; /* this lane among the activation warps */
        for (int e = al; e < Q_TAB; e += 32 * REGM_AWN) q_table_entry(qtab, (uint32_t)e, p.cuda_variant, pts);
        if (al == 0 && blockIdx.x == 0 && p.x_pts_out) *p.x_pts_out = pts;
        ptx_bar_sync(1, 32 * REGM_AWN); /* the table, before any lane uses it */
        /* the debug copies' padding rows (m .. 15): the code words and scale
         * byte of a block of zeros, as nvfp4_quantize pads */
        uint32_t zs8 = 0;
        uint2 zcw = make_uint2(0, 0);
        const int copies = blockIdx.x == 0 && (p.x_codes || p.x_scales);
        if (copies) {
            const uint32_t zw[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            zcw = q_block_codes(zw, qtab, pts, rcp_pts, p.cuda_variant, &zs8);
        }
#elif !REGM_ACT_ROT
        /* warp aw: n8 tile u = aw % NT, block pairs aw / NT, + REGM_APS, ... */
        const int u = aw % REGM_NT, bp0 = aw / REGM_NT, r = 8 * u + g;
        /* the row's code words (block pair 0, before the swizzle) and scale
         * words (chunk 0) in a stage; its fragments' slot in block 0 */
        const int act_row = act_codes_off + r * 128 + (t >> 1) * 4;
        const int act_sc = asc_off + (r / 16) * 256 + (r % 16) * 16;
        const int act_dst = REGM_WA ? frag_off + u * 256 + lane * 8 : frag_off + ((u >> 1) * 32 + lane) * 16 + (u & 1) * 4;
        if (!REGM_WA && REGM_MT == 8 && aw == 0) /* token rows 8..15 of every fragment: zero, once */
            for (int z = 0; z < p.io.stages * 16; z++) {
                uint32_t *q = (uint32_t *)(ring + (size_t)(z / 16) * stage_bytes + frag_off + (z % 16) * REGM_FB + lane * 16);
                q[1] = 0;
                q[3] = 0;
            }
#endif
        const int wsc_items = REGM_WSCALE_PER_CHAIN * chains; /* REGM_WSCALE_ITEM's */
#if REGM_BF16
        /* Warp aw takes chunks aw, aw + act_rot, ...: a chunk's blocks are
         * one latency-bound chain of work per lane (one block each at M = 1),
         * so act_rot warps keep that many chunks in flight.  act_rot divides
         * the ring's depth: chunk c - stages, the stage's previous use, is
         * then this warp's own, so its wait on full[] is never more than one
         * phase ahead (mbarrier parity), and chunk c + stages cannot land
         * before it released chunk c. */
        if (aw >= p.act_rot) return;
        /* the fragments of token rows m .. XROWS - 1, never written by the
         * chunks, zeroed once in this warp's stages (its act_full arrivals
         * publish them) */
        for (int z = aw; z < p.io.stages; z += p.act_rot)
            for (int e = lane; e < (REGM_XROWS - p.io.m) * 64; e += 32) {
                uint32_t *dst = (uint32_t *)(ring + (size_t)z * stage_bytes + frag_off + ((e >> 2) & 15) * REGM_FB +
                                             REGM_XFRAG_OFF(p.io.m + (e >> 6), e & 3));
                dst[0] = 0;
                dst[REGM_AH] = 0;
            }
        for (int c = aw; c < nch; c += p.act_rot) {
            const int s = c % p.io.stages;
            ptx_mbar_wait(&full[s], (uint32_t)(c / p.io.stages) & 1u);
            uint8_t *st = ring + (size_t)s * stage_bytes;
            /* block (r, j) = I / 16, I % 16 by lane I % 32 (several blocks a
             * lane interleaved measured slower at M = 1: attn-out 23.3 ->
             * 47.4 us, docs/STREAMING_A.md) */
            for (int I = lane; I < 16 * p.io.m; I += 32) {
                const int xr = I >> 4, j = I & 15, cb = 16 * c + j;
                uint32_t s8 = 0;
                uint2 cw = make_uint2(0, 0); /* past K: +0 operands (REGR's tail steps add nothing) */
                if (cb < nblocks) {
                    const uint4 *src = (const uint4 *)(st + xbox_off + xr * 512 + j * 32);
                    const uint4 v0 = src[0], v1 = src[1];
                    const uint32_t wv[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
                    cw = q_block_codes(wv, qtab, pts, rcp_pts, p.cuda_variant, &s8);
                    if (copies) {
                        if (p.x_codes) *(uint2 *)(p.x_codes + (size_t)xr * (size_t)(nblocks * 8) + (size_t)cb * 8) = cw;
                        if (p.x_scales) p.x_scales[nvfp4_tiled_offset(xr, cb, p.io.ncb)] = (uint8_t)s8;
                    }
                }
                REGM_XFRAG(xr, j, cw, s8);
            }
            if (copies) /* rows m .. 15 of the 16 padded rows */
                for (int I = 16 * p.io.m + lane; I < 256; I += 32) {
                    const int xr = I >> 4, cb = 16 * c + (I & 15);
                    if (cb >= nblocks) continue;
                    if (p.x_codes) *(uint2 *)(p.x_codes + (size_t)xr * (size_t)(nblocks * 8) + (size_t)cb * 8) = zcw;
                    if (p.x_scales) p.x_scales[nvfp4_tiled_offset(xr, cb, p.io.ncb)] = (uint8_t)zs8;
                }
            for (int i = lane; i < wsc_items; i += 32) REGM_WSCALE_ITEM(i);
            ptx_mbar_arrive(&act_full[s]); /* releases this lane's fragment and scale stores */
            ptx_mbar_arrive(&empty[s]);    /* ... and its reads of the stage */
        }
#elif REGM_ACT_ROT
        /* Warp aw takes whole chunks aw, aw + act_rot, ... (as the REGM_BF16
         * twins do): every n8 tile's 8 block pairs (lane (g, t): token row 8 u
         * + g) and the chunk's weight-scale items, so act_rot chunks are in
         * flight where the split over block pairs had every warp on every
         * chunk in turn.  act_rot divides the ring's depth (the launcher):
         * the stage's previous use was this warp's, so its full[] parity is
         * never a phase ahead. */
        if (aw >= p.act_rot) return;
        for (int c = aw; c < nch; c += p.act_rot) {
            const int s = c % p.io.stages;
            ptx_mbar_wait(&full[s], (uint32_t)(c / p.io.stages) & 1u);
            uint8_t *st = ring + (size_t)s * stage_bytes;
            const int nbp = (nblocks - 16 * c < 16 ? nblocks - 16 * c : 16) / 2; /* block pairs */
#pragma unroll
            for (int u = 0; u < REGM_NT; u++) {
                const int r = 8 * u + g;
                const int act_row = act_codes_off + r * 128 + (t >> 1) * 4;
                const int act_sc = asc_off + (r / 16) * 256 + (r % 16) * 16;
                const int act_dst = frag_off + u * 256 + lane * 8;
                if (nbp == 8) { /* every load first, so the units overlap */
                    uint32_t w_[8][2], sw_[8];
#pragma unroll
                    for (int bp = 0; bp < 8; bp++) {
                        REGM_ACT_LD(bp, w_[bp][0], w_[bp][1]);
                        sw_[bp] = REGM_ACT_SW(bp);
                    }
#pragma unroll
                    for (int bp = 0; bp < 8; bp++) REGM_ACT_UNIT(bp, w_[bp][0], w_[bp][1], sw_[bp]);
                } else {
#pragma unroll
                    for (int bp = 0; bp < 8; bp++)
                        if (bp < nbp) {
                            uint32_t w0, w1;
                            REGM_ACT_LD(bp, w0, w1);
                            REGM_ACT_UNIT(bp, w0, w1, REGM_ACT_SW(bp));
                        }
                }
            }
            for (int i = lane; i < wsc_items; i += 32) REGM_WSCALE_ITEM(i);
            ptx_mbar_arrive(&act_full[s]); /* releases this lane's fragment and scale stores */
            ptx_mbar_arrive(&empty[s]);    /* ... and its reads of the stage */
        }
#else
        int s = 0;
        uint32_t ph = 0;
        for (int c = 0; c < nch; c++) {
            ptx_mbar_wait(&full[s], ph);
            uint8_t *st = ring + (size_t)s * stage_bytes;
            const int nbp = (nblocks - 16 * c < 16 ? nblocks - 16 * c : 16) / 2; /* block pairs */
            if (nbp == 8) { /* every load first, so the units overlap */
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
            for (int i = aw * 32 + lane; i < wsc_items; i += 32 * REGM_AWN) REGM_WSCALE_ITEM(i);
            ptx_mbar_arrive(&act_full[s]); /* releases this lane's fragment and scale stores */
            ptx_mbar_arrive(&empty[s]);    /* ... and its reads of the stage */
            if (++s == p.io.stages) {
                s = 0;
                ph ^= 1u;
            }
        }
#endif
        return;
    }

#if REGM_ROT
    /* ---------------- MMA warps, REGM_ROT per chain ----------------
     * Warp mw = R j + r takes chunks r, r + R, ... of chain j.  Per chunk:
     * every block's A fragment into registers first (16 independent blocks:
     * the dequantization has all the ILP a warp can issue), the stage's
     * activation fragments with the mma; then the chain's accumulator --
     * from the warp of chunk c - 1 through the chain's shared-memory slot and
     * REGR_HAND_WAIT (regm.cuh: the mbarrier acc_ready[R j + r]) -- takes the chunk's 16 steps in k
     * order, and goes on to the warp of chunk c + 1 (REGR_HAND_SIGNAL).  The
     * chain is the one sequence of steps of the contract; only the warp that
     * issues it changes between chunks, so R - 1 chunks are dequantized
     * while one is multiplied.  With mbarriers, completion i of acc_ready[R j
     * + r] is the hand-off into chunk r + R i (r > 0) or R (i + 1) (r = 0):
     * the waiter's parity is ((c - 1) / R) & 1, and it never runs two phases
     * ahead (its previous chunk needed completion i - 1).  (Removing the
     * hand-off altogether saved at most 0.5 us while the dequantization is
     * there.) */
    const int mw = warp - p.loaders - REGM_AWN;
    if (mw >= mma_live) return;
    const int jr = mw / REGM_ROT, rr = mw % REGM_ROT;
    /* the lane's code words: box row wrow for the mma's A row g, + crow_hi
     * bytes for A row g + 8 */
    const int wrow = 16 * jr + g, crow_hi = 1024, gxw = gx;
    const int crow0 = wrow * 128 + (t >> 1) * 4, sfo0 = wsf_off + (64 * jr + g) * 8;
    const int act_ld = frag_off + lane * 8;
    float4 *slot = (float4 *)(ring + (size_t)p.io.stages * stage_bytes) + jr * REGM_NT * 32 + lane;
    const float b_scale = *p.io.b_scale2; /* the weight's: no previous kernel writes it */
#if REGM_BF16
    /* the activation scale as the activation warps take it (the dynamic one after the chunks) */
    const float x_static = p.x_pts ? *p.x_pts : 0.0f;
#endif
    for (int c = rr; c < nch; c += REGM_ROT) {
        const int s = c % p.io.stages;
        const uint32_t ph = (uint32_t)(c / p.io.stages) & 1u;
        ptx_mbar_wait(&full[s], ph);
        ptx_mbar_wait(&act_full[s], ph);
        const uint8_t *st = ring + (size_t)s * stage_bytes;
        const int nblk = nblocks - 16 * c < 16 ? nblocks - 16 * c : 16;
        float acc[REGM_NT][4];
        if (nblk == 16) {
            REGR_CHUNK(16)
        } else {
            REGR_CHUNK(nblk)
        }
        REGR_TURN_END(c + 1 < nch, c + 1)
    }
#else
    /* ---------------- MMA warps ---------------- */
    const int mw = warp - p.loaders - REGM_AWN;
    if (mw >= mma_live) return;
    float acc[REGM_TW][REGM_NQ][4], tot[REGM_TW][REGM_NQ][4];
#pragma unroll
    for (int j = 0; j < REGM_TW; j++)
#pragma unroll
        for (int q = 0; q < REGM_NQ; q++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                acc[j][q][e] = 0.0f;
                tot[j][q][e] = 0.0f;
            }
    const int ngroups64 = (p.io.k + 63) / 64;
    int first_slice = 1, slice_end = p.io.chunks_per_slice;
    /* this lane's activation fragment slot (block 0, token tile 0) */
    const int act_ld = frag_off + lane * (REGM_WA ? 8 : 16);
    /* Per chain: the code word of its box row g (before the swizzle; with
     * REGM_WA row 16 i + g, and 16 i + g + 8 at + 1024) and its FP16 scale
     * pairs (block 0).  Warps with fewer than REGM_TW chains repeat the CTA's
     * last one, so the loop has no predicates; the epilogue stores only real
     * chains. */
    int crow[REGM_TW], sfo[REGM_TW];
#pragma unroll
    for (int j = 0; j < REGM_TW; j++) {
        const int i0 = mw * REGM_TW + j, i = i0 < chains ? i0 : chains - 1;
        crow[j] = (8 * REGM_U * i + g) * 128 + (t >> 1) * 4;
        sfo[j] = wsf_off + (64 * i + g) * 8;
    }
    int s = 0;
    uint32_t ph = 0;
    for (int c = 0; c < nch; c++) {
        ptx_mbar_wait(&full[s], ph);
        ptx_mbar_wait(&act_full[s], ph);
        const uint8_t *st = ring + (size_t)s * stage_bytes;
        const int nblk = nblocks - 16 * c < 16 ? nblocks - 16 * c : 16;
        if (nblk == 16 && 4 * c + 4 < slice_end && 4 * c + 4 < ngroups64) {
            /* the hot path: 16 steps and no K-slice fold, one basic block */
            REGM_HOT();
        } else { /* the K tail (2 .. 14 blocks) or a chunk that ends a K slice */
#pragma unroll
            for (int bp = 0; bp < 8; bp++)
                if (2 * bp < nblk) REGM_PAIR(bp);
        }
        ptx_mbar_arrive(&empty[s]); /* this lane's loads of the stage are done */
        if (++s == p.io.stages) {
            s = 0;
            ph ^= 1u;
        }
    }

#if REGM_BF16
    /* the activation scale as the activation warps took it (regm_x_pts) */
    const float alpha = __fmul_rn(regm_x_pts(&p, p.x_pts ? *p.x_pts : 0.0f), *p.io.b_scale2);
#else
    /* after this warp's stages, as REGR_LAST_ALPHA says why */
    const float alpha = __fmul_rn(*p.io.a_scale2, *p.io.b_scale2);
#endif
#if REGM_WA
#pragma unroll
    for (int j = 0; j < REGM_TW; j++) {
        const int i = mw * REGM_TW + j;
        if (i >= chains) continue;
        REGW_EPILOGUE(i, tot[j]);
    }
#else
    /* ---- epilogue: tot[j][q][e] = (m = 16q + g + 8 (e >> 1), n = row 2t + (e & 1) of chain j) ---- */
#pragma unroll
    for (int j = 0; j < REGM_TW; j++) {
        const int i = mw * REGM_TW + j;
        if (i >= chains) continue;
        const int n = (tile0 + i) * 8 + 2 * t;
        const float bias0 = p.io.bias ? p.io.bias[n] : 0.0f, bias1 = p.io.bias ? p.io.bias[n + 1] : 0.0f;
#pragma unroll
        for (int q = 0; q < REGM_NM; q++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int m = 16 * q + g + 8 * h;
                if (m >= p.io.m) continue;
                const size_t o = (size_t)m * (size_t)p.io.n + (size_t)n; /* even (N % 16 == 0) */
                const float v0 = tot[j][q][2 * h], v1 = tot[j][q][2 * h + 1];
                float y0 = __fmul_rn(alpha, v0), y1 = __fmul_rn(alpha, v1);
                if (p.io.bias) {
                    y0 = __fadd_rn(y0, bias0);
                    y1 = __fadd_rn(y1, bias1);
                }
                const uint16_t o0 = nvfp4_dev_bf16_rne(y0), o1 = nvfp4_dev_bf16_rne(y1);
                if (p.pair_stores) {
                    if (p.io.raw) *(float2 *)(p.io.raw + o) = make_float2(v0, v1);
                    if (p.io.out) *(uint32_t *)(p.io.out + o) = (uint32_t)o0 | ((uint32_t)o1 << 16);
                } else {
                    if (p.io.raw) {
                        p.io.raw[o] = v0;
                        p.io.raw[o + 1] = v1;
                    }
                    if (p.io.out) {
                        p.io.out[o] = o0;
                        p.io.out[o + 1] = o1;
                    }
                }
            }
    }
#endif
#endif
}

#undef REGM_PAIR
#undef REGM_FOLD
#undef REGM_REGS
#undef REGW_AFRAG
#undef REGM_ACT_UNIT
#undef REGM_NT
#undef REGM_NM
#undef REGM_NQ
#undef REGM_U
#undef REGM_STAGE
#undef REGM_AH
#undef REGM_AWN
#undef REGM_APS
#undef REGM_LD
#undef REGM_DQ
#undef REGM_MM
#undef REGM_HOT
#undef REGR_CHUNK
#undef REGR_DQ
#undef REGR_ACC_IN
#undef REGR_STEPS
#undef REGM_ACT_BOXES
#undef REGR_TURN_END
#undef REGR_LAST_ALPHA
#undef REGW_EPILOGUE
#undef REGM_ACT_LD
#undef REGM_ACT_SW
#undef REGM_FB
#undef REGM_BFRAGS
#undef REGM_WSCALE_WORD
#undef REGM_WSCALE_PER_CHAIN
#undef REGW_WSCALE_Q
#undef REGM_WSCALE_ITEM
#undef REGM_THREADS
#undef REGM_BOUNDS
#undef REGM_MT
#undef REGM_TW
#undef REGM_NAME
#undef REGM_BF16
#undef REGM_WA
#undef REGM_ROT
#undef REGM_ACT_ROT
#undef REGW_ROW_N
#undef REGM_ASC_Q
#undef REGM_WEIGHT_BOXES
#ifdef REGM_XFRAG
#undef REGM_XFRAG
#undef REGM_XFRAG_OFF
#undef REGM_XROWS
#endif
