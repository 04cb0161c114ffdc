/* sm90_gemm_body.cuh -- the main GEMM kernel, included once per variant by
 * sm90_gemm.cu with these macros defined (C has no templates):
 *   SM90_BN     activation rows per tile = wgmma N (8..256)
 *   SM90_NC     consumer warpgroups (1 or 2), 64 weight rows each
 *   SM90_NAME   the kernel's name
 *   SM90_WGMMA  the wgmma wrapper for N = SM90_BN
 *
 * Roles: warpgroup 0 is the producer (one thread issues TMA into a ring of
 * stages); warpgroups 1..NC are consumers.  Consumer c owns weight rows
 * [64c, 64c+64) of the tile: it dequantizes them from the 4-bit codes in
 * shared memory straight into wgmma A fragments (FP16, exact) and runs one
 * wgmma k16 step per NVFP4 block, in increasing k, into zeroed FP32
 * accumulators.  The FP16 activations are the wgmma B operand (K-major,
 * 128-byte swizzle, written by TMA).  Output element (n, m) of the tile is
 * raw/out[m * N + n]. */

#define SM90_THREADS (128 * (SM90_NC + 1))
/* K slices (docs/CONTRACT.md) need a second accumulator set: only the
 * bn = 64 tiles built with SM90_SLICED (names ending _sl) carry it, and the
 * planner takes them when a slice ends before K.  Why the others leave it
 * out (SASS): the slice code doubled
 * the loops of the tiles that carried it -- 64x64 555 -> 279 instructions
 * per 8 HGMMA, 128x64 533 -> 273 -- and made ptxas serialize the 128x64
 * tile's wgmmas (C7511: an arrive and a wait around each). */
#if defined(SM90_SLICED)
#define SM90_SLICES 1
#else
#define SM90_SLICES 0
#endif
/* A stage holds KSUB chunks of 64 K-elements (4 NVFP4 blocks each): wider
 * code rows per TMA request where tiles are small (TMA cost is per row). */
#define SM90_KSUB NVFP4_SM90_KSUB(SM90_BN, SM90_NC)
/* the producer's issuers: one per kind of request where a stage holds
 * several chunks (below) */
#define SM90_PARALLEL (SM90_KSUB > 1)
#define SM90_ACT_BOX (SM90_BN * 128)             /* one 64-element activation box */
#define SM90_ACT_BYTES (SM90_ACT_BOX * SM90_KSUB)
#define SM90_CODE_ROW (32 * SM90_KSUB)            /* code bytes per weight row per stage */
#define SM90_CODE_BYTES (SM90_NC * 64 * SM90_CODE_ROW)
#define SM90_STAGE_BYTES \
    (((SM90_ACT_BYTES + SM90_CODE_BYTES + 512 * SM90_KSUB) + 1023) / 1024 * 1024)

/* A consumer frees a ring slot. */
#define SM90_RELEASE(SLOT) ptx_mbar_arrive(&empty[SLOT])

/* Consumer helpers.  Chunk kc (64 K-elements) lives in ring slot s at
 * sub-chunk `sub` of its stage. */
#define SM90_STAGE(S) (smem + (size_t)(S) * SM90_STAGE_BYTES)
#define SM90_LOAD()                                                                                \
    nvfp4_sm90_load_chunk(SM90_STAGE(s) + SM90_ACT_BYTES + sub * 32, SM90_CODE_ROW, word_off,      \
                          SM90_STAGE(s) + SM90_ACT_BYTES + SM90_CODE_BYTES + sub * 512, r0, sc_off0, \
                          sc_off1)
#define SM90_DEQUANT(DST) nvfp4_sm90_convert_chunk(SM90_LOAD(), xsel, DST)
#define SM90_NEXT_CHUNK()                                                                          \
    {                                                                                              \
        kc++;                                                                                      \
        if (++sub == SM90_KSUB) {                                                                  \
            sub = 0;                                                                               \
            if (++s == stages) {                                                                   \
                s = 0;                                                                             \
                phase ^= 1;                                                                        \
            }                                                                                      \
        }                                                                                          \
    }

/* End of a K slice: retire every wgmma, add the slice's accumulators to the
 * running FP32 sums in slice order (RNE), restart the chain from +0. */
#define SM90_FOLD()                                                                                \
    {                                                                                              \
        ptx_wgmma_wait0();                                                                         \
        _Pragma("unroll") for (int i_ = 0; i_ < SM90_BN / 2; i_++) {                               \
            ptx_fence_reg(acc[i_]);                                                                \
            tot[i_] = first_slice ? acc[i_] : __fadd_rn(tot[i_], acc[i_]);                         \
            acc[i_] = 0.0f;                                                                        \
            ptx_fence_reg(acc[i_]);                                                                \
        }                                                                                          \
        first_slice = 0;                                                                           \
    }

/* Stream-K: only the tiles NVFP4_SM90_SK_TILE names are built with it. */
#define SM90_SK NVFP4_SM90_SK_TILE(SM90_BN, SM90_NC)
/* Stream-K hand-off of a split tile's chain (docs/KERNEL.md, design item
 * 11).  Slot h of p.sk_acc holds CTA h's head-piece accumulators, each
 * consumer thread's as float4s at [c][j][thread] (coalesced); p.sk_flags[h]
 * counts the consumer warps that have stored theirs.  The tail piece's CTA
 * waits for all 4 NC of them, then continues the chain from the same FP32
 * values: the same k16 steps in the same order as one CTA would run. */
#define SM90_SK_SLOT(H) (p.sk_acc + (size_t)(H) * (SM90_NC * 64 * SM90_BN) + (size_t)c * (64 * SM90_BN))
#define SM90_SK_STORE(H)                                                                           \
    {                                                                                              \
        float4 *slot_ = (float4 *)SM90_SK_SLOT(H);                                                 \
        _Pragma("unroll") for (int j_ = 0; j_ < SM90_BN / 8; j_++)                                 \
            __stcg(slot_ + j_ * 128 + (tid - 128 * wg),                                            \
                   make_float4(acc[4 * j_], acc[4 * j_ + 1], acc[4 * j_ + 2], acc[4 * j_ + 3]));   \
        __threadfence();                                                                           \
        __syncwarp();                                                                              \
        if (lane == 0) ptx_red_release_gpu_add(p.sk_flags + (H), 1u);                              \
    }
#define SM90_SK_LOAD(H)                                                                            \
    {                                                                                              \
        while (ptx_ld_acquire_gpu(p.sk_flags + (H)) != 4u * SM90_NC) {                             \
        }                                                                                          \
        const float4 *slot_ = (const float4 *)SM90_SK_SLOT(H);                                     \
        _Pragma("unroll") for (int j_ = 0; j_ < SM90_BN / 8; j_++) {                               \
            const float4 v_ = __ldcg(slot_ + j_ * 128 + (tid - 128 * wg));                         \
            acc[4 * j_] = v_.x;                                                                    \
            acc[4 * j_ + 1] = v_.y;                                                                \
            acc[4 * j_ + 2] = v_.z;                                                                \
            acc[4 * j_ + 3] = v_.w;                                                                \
        }                                                                                          \
    }

/* The BF16 output, staged: per block of 8 activation rows (m), each
 * consumer warp's two 8x8 fragments (its 16 weight rows n x 8 m) go through
 * its own 256 bytes of shared memory transposed (stmatrix), and come back as
 * 16-byte rows of 8 n, stored whole: 16 lanes x 16 bytes, 8 full sectors
 * per store, instead of one 2-byte store per output (4 half sectors per
 * warp store).  The same values as NVFP4_SM90_EPILOGUE (nvfp4_dev_out_bf16). */
#define SM90_EPI_OUT()                                                                             \
    {                                                                                              \
        const int nw_ = n0 + c * 64 + warp * 16;         /* the warp's first weight row */       \
        const float b0_ = p.io.bias && nw_ + g < p.io.n ? p.io.bias[nw_ + g] : 0.0f;                         \
        const float b1_ = p.io.bias && nw_ + 8 + g < p.io.n ? p.io.bias[nw_ + 8 + g] : 0.0f;                 \
        const uint32_t st_ = ptx_smem_addr(epi) + (uint32_t)lane * 16u; /* lanes 0..15: rows */    \
        const int h_ = (lane >> 3) & 1, r_ = lane & 7; /* read back: half h_, m offset r_ */       \
        const int n_ = nw_ + 8 * h_;                                                               \
        _Pragma("unroll") for (int j_ = 0; j_ < SM90_BN / 8; j_++) {                               \
            uint32_t f_[2];                                                                        \
            _Pragma("unroll") for (int q_ = 0; q_ < 2; q_++) {                                     \
                const float bq_ = q_ ? b1_ : b0_;                                                  \
                f_[q_] = (uint32_t)nvfp4_dev_out_bf16(acc[4 * j_ + 2 * q_], alpha, p.io.bias, bq_) |     \
                         (uint32_t)nvfp4_dev_out_bf16(acc[4 * j_ + 2 * q_ + 1], alpha, p.io.bias, bq_) << 16; \
            }                                                                                      \
            ptx_stmatrix_x2_trans(st_, f_[0], f_[1]);                                              \
            __syncwarp();                                                                          \
            const int m_ = m0 + 8 * j_ + r_;                                                       \
            if (lane < 16 && m_ < p.io.m && n_ < p.io.n)                                                 \
                *(uint4 *)(p.io.out + (size_t)m_ * (size_t)p.io.n + (size_t)n_) = *(const uint4 *)(epi + lane * 16); \
            __syncwarp();                                                                          \
        }                                                                                          \
    }

/* The 4 wgmma k16 steps of one chunk from fragments F[0..3] (blocks in
 * order), B at descriptor D: + 32 bytes a step (>> 4 = 2). */
#define SM90_WGMMA_CHUNK(F, D)                                                                     \
    {                                                                                              \
        SM90_WGMMA(acc, (F)[0][0], (F)[0][1], (F)[0][2], (F)[0][3], (D));                          \
        SM90_WGMMA(acc, (F)[1][0], (F)[1][1], (F)[1][2], (F)[1][3], (D) + 2);                      \
        SM90_WGMMA(acc, (F)[2][0], (F)[2][1], (F)[2][2], (F)[2][3], (D) + 4);                      \
        SM90_WGMMA(acc, (F)[3][0], (F)[3][1], (F)[3][2], (F)[3][3], (D) + 6);                      \
    }
/* Keep fragment registers F[0..NB-1] in place across a wgmma boundary. */
#define SM90_FENCE_FRAGS(F, NB)                                                                    \
    _Pragma("unroll") for (int kb_ = 0; kb_ < (NB); kb_++)                                         \
        _Pragma("unroll") for (int j_ = 0; j_ < 4; j_++) ptx_fence_reg_u32((F)[kb_][j_]);

/* One step of the consumer's software pipeline: issue the 4 wgmmas of chunk
 * kc from fragments CUR; load chunk kc+1's codes and scales; retire chunk
 * kc-1 (wait_group 1) and free its stage if it was the stage's last chunk;
 * then dequantize chunk kc+1 into NXT (whose wgmmas just retired).  The
 * descriptors of the 4 k16 steps are one base + 32 bytes each (>> 4 = 2):
 * shared addresses are below 2^18, so the start field never carries. */
#define SM90_CHUNK(CUR, NXT)                                                                       \
    {                                                                                              \
        SM90_FENCE_FRAGS(CUR, 4)                                                                   \
        ptx_wgmma_fence();                                                                         \
        const uint64_t desc_ = ptx_desc_sw128(ptx_smem_addr(SM90_STAGE(s) + sub * SM90_ACT_BOX));  \
        SM90_WGMMA_CHUNK(CUR, desc_)                                                                \
        ptx_wgmma_commit();                                                                        \
        if (SM90_SLICES && sliced && kc + 1 == slice_end) {                                        \
            SM90_FOLD();                                                                           \
            slice_end += p.io.chunks_per_slice;                                                       \
        }                                                                                          \
        SM90_RETIRE_BOOKKEEPING();                                                                 \
        prev_slot = s;                                                                             \
        prev_last = sub == SM90_KSUB - 1 || kc == kend - 1;                                        \
        SM90_NEXT_CHUNK();                                                                         \
        const int more_ = kc != kstop;                                                             \
        nvfp4_sm90_chunk_raw raw_;                                                                 \
        if (more_) {                                                                               \
            if (sub == 0) ptx_mbar_wait(&full[s], phase);                                          \
            if (SM90_LOAD_AHEAD) raw_ = SM90_LOAD();                            \
        }                                                                                          \
        SM90_WAIT_GROUP();                                                                         \
        SM90_FENCE_FRAGS(NXT, 4)                                                                   \
        if (rel_) {                                                                                \
            /* the stage was only read (LDS, wgmma): no proxy fence */                             \
            __syncwarp();                                                                          \
            if (lane == 0) SM90_RELEASE(rel_slot_);                                                \
        }                                                                                          \
        if (!more_) break;                                                                         \
        if (!SM90_LOAD_AHEAD) raw_ = SM90_LOAD();                               \
        nvfp4_sm90_convert_chunk(raw_, xsel, NXT);                                                \
    }

/* Pipeline depth: two fragment sets in rotation (wait_group 1: while the
 * next chunk is dequantized, one group of this warpgroup is in flight;
 * three sets with two consumers measured 8 % slower at M = 2048, ptxas
 * spilling at 168 registers).  The stage of the chunk that wait_group
 * retires is released: kc-1 (rel_slot_ / rel_: that chunk's slot, and
 * whether it ended its stage). */
/* The next chunk's codes and scales are loaded before the wgmma wait where
 * the registers allow it (at 128 registers per thread, 2 CTAs per SM, the
 * early load spills: loaded after the wait there). */
#define SM90_LOAD_AHEAD (SM90_MINB == 1)
#define SM90_WAIT_GROUP() ptx_wgmma_wait1()
#define SM90_RETIRE_BOOKKEEPING() const int rel_slot_ = prev_slot, rel_ = kc > kbeg && prev_last;

/* Chunk pairs: a wgmma group is two chunks' 8 k16
 * steps, and the next two chunks are dequantized together -- twice the
 * independent instructions between two waits, and one fence, commit and
 * wait_group per 8 steps instead of per 4.  Why: the 64x128 tile (attn-out
 * and FC2 at M = 128, one consumer warp per scheduler) runs ~650 cycles a
 * chunk against 4 x ~67 for its wgmma chain and ~250 cycles of issue for
 * its dequantization, and its barriers and waits alone took about half
 * the kernel's time (13-15 % faster in pairs: docs/KERNEL.md).  For the 128-row
 * tiles (wgmma N <= NVFP4_SM90_PAIR_MAX_BN) with two chunks a stage and
 * one consumer, or one chunk a stage (two stages a pair) and two; the
 * same k16 steps in the same order into the same accumulators. */
#define SM90_PAIR                                                                                  \
    (SM90_BN > 64 && SM90_BN <= NVFP4_SM90_PAIR_MAX_BN &&                                           \
     ((SM90_NC == 1 && SM90_KSUB == 2 && !SM90_SK) || (SM90_NC == 2 && SM90_KSUB == 1)))
#if SM90_PAIR
/* the chunk at sub-chunk SUB of stage ST, loaded */
#define SM90_LOAD_AT(ST, SUB)                                                                      \
    nvfp4_sm90_load_chunk(SM90_STAGE(ST) + SM90_ACT_BYTES + (SUB) * 32, SM90_CODE_ROW, word_off,   \
                          SM90_STAGE(ST) + SM90_ACT_BYTES + SM90_CODE_BYTES + (SUB) * 512, r0, sc_off0, \
                          sc_off1)
/* A pair starts at (s, phase, sub 0): its second chunk is sub-chunk 1 of
 * stage s (KSUB 2) or the first of the next stage (KSUB 1; its phase
 * flips where the ring wraps). */
#define SM90_PAIR_S2(S) (SM90_KSUB == 2 ? (S) : (S) + 1 == stages ? 0 : (S) + 1)
#define SM90_PAIR_PH2(S, PH) (SM90_KSUB == 1 && (S) + 1 == stages ? (PH) ^ 1u : (PH))
#define SM90_PAIR_WAIT_LOAD(RA, RB)                                                                \
    {                                                                                              \
        ptx_mbar_wait(&full[s], phase);                                                            \
        if (SM90_KSUB == 1) ptx_mbar_wait(&full[SM90_PAIR_S2(s)], SM90_PAIR_PH2(s, phase));        \
        RA = SM90_LOAD_AT(s, 0);                                                                   \
        RB = SM90_LOAD_AT(SM90_PAIR_S2(s), SM90_KSUB - 1);                                         \
    }
/* The middle of a pair step (the pair at s is the one whose wgmmas this
 * step issues; s2_ its second chunk's stage): note its stages for release,
 * move s to the next pair, and wait for and load that pair (ra_, rb_). */
#define SM90_PAIR_ADVANCE()                                                                        \
        const int rel_ = kc > kbeg, rel0_ = prev_slot, rel1_ = prev_slot2;                         \
        prev_slot = s;                                                                             \
        prev_slot2 = s2_;                                                                          \
        kc += 2;                                                                                   \
        _Pragma("unroll") for (int a_ = 0; a_ < 3 - SM90_KSUB; a_++) if (++s == stages) {          \
            s = 0;                                                                                 \
            phase ^= 1;                                                                            \
        }                                                                                          \
        const int more_ = kc < kpair_end;                                                          \
        nvfp4_sm90_chunk_raw ra_, rb_;                                                             \
        if (more_) SM90_PAIR_WAIT_LOAD(ra_, rb_);

/* The end of a pair step: retire the previous pair (wait_group 1), free
 * its stages, dequantize the next pair (ra_, rb_) into NXT. */
#define SM90_PAIR_RETIRE(NXT)                                                                      \
        ptx_wgmma_wait1();                                                                         \
        SM90_FENCE_FRAGS(NXT, 8)                                                                   \
        if (rel_) {                                                                                \
            /* the stages were only read (LDS, wgmma): no proxy fence */                           \
            __syncwarp();                                                                          \
            if (lane == 0) {                                                                       \
                SM90_RELEASE(rel0_);                                                               \
                if (SM90_KSUB == 1) SM90_RELEASE(rel1_);                                           \
            }                                                                                      \
        }                                                                                          \
        if (!more_) break;                                                                         \
        nvfp4_sm90_convert_chunk(ra_, xsel, NXT);                                                  \
        nvfp4_sm90_convert_chunk(rb_, xsel, NXT + 4);
/* The pair step: the next pair's `full` wait and its code and scale loads
 * come *before* this pair's wgmmas are issued.  In the other order the
 * loads follow 8 dependent wgmmas and the wait's branch keeps ptxas from
 * moving them up.  Measured: 2.4-2.8 % off attn-out and FC2 at M = 128
 * (H100), QKV level; the
 * overlap of dequantization and chain itself is unchanged (probe_chain
 * "loads first" 96.8 cycles a wgmma against "both" 96.2). */
#define SM90_PAIR_STEP(CUR, NXT)                                                                   \
    {                                                                                              \
        const int s2_ = SM90_PAIR_S2(s);                                                           \
        const uint64_t d0_ = ptx_desc_sw128(ptx_smem_addr(SM90_STAGE(s)));                         \
        const uint64_t d1_ = ptx_desc_sw128(ptx_smem_addr(SM90_STAGE(s2_) + (SM90_KSUB - 1) * SM90_ACT_BOX)); \
        SM90_PAIR_ADVANCE()                                                                        \
        SM90_FENCE_FRAGS(CUR, 8)                                                                   \
        ptx_wgmma_fence();                                                                         \
        SM90_WGMMA_CHUNK(CUR, d0_)                                                                 \
        SM90_WGMMA_CHUNK(CUR + 4, d1_)                                                             \
        ptx_wgmma_commit();                                                                        \
        SM90_PAIR_RETIRE(NXT)                                                                      \
    }
#endif


/* Small single-consumer variants run two CTAs per SM: twice the
 * independent load -> dequant -> wgmma chains where M is small. */
#define SM90_MINB NVFP4_SM90_CTAS(SM90_BN, SM90_NC)

/* The register split of the single-consumer tiles: the producer warpgroup gives its registers back (setmaxnreg.dec to 40) and the
 * consumer takes what its CTA's share allows -- as the two-consumer tiles
 * always did.  Why (SASS, read without a GPU): ptxas then keeps the stage
 * index and the wgmma descriptors in uniform registers (no R2UR per wgmma;
 * the 64x128 loop 287 -> 271 instructions a chunk pair, 20 % fewer on the
 * vector pipes), and the 64x16 and 64x64 tiles stop spilling.
 * NOTES: ptxas launches the kernel with its cap, L = 65536 / (threads x
 * CTAs per SM) rounded down to 8 (or the largest count asked for, if less):
 * the consumer may then take 2 L - 40 (the producer's 88 at L = 128),
 * at most 240 (one CTA per SM: the launch count becomes 240 and the
 * increase is to the same count); two CTAs 128 -> 216, three 80 -> 120.
 * A larger request would block forever. */
#if SM90_NC == 1
#define SM90_REG_CAP ((65536 / (SM90_THREADS * SM90_MINB)) / 8 * 8)
#define SM90_CONSUMER_REGS (2 * SM90_REG_CAP - 40 < 240 ? 2 * SM90_REG_CAP - 40 : 240)
#endif

extern "C" __global__ void __launch_bounds__(SM90_THREADS, SM90_MINB)
    SM90_NAME(const __grid_constant__ nvfp4_sm90_params p)
{
    extern __shared__ __align__(1024) uint8_t smem_dyn[];
    /* 1024-byte alignment by an offset from the shared array: through an
     * integer round trip the pointer became generic and every code load a
     * 64-bit LD instead of LDS (seen in the SASS) */
    uint8_t *const smem = smem_dyn + ((1024u - (ptx_smem_addr(smem_dyn) & 1023u)) & 1023u);
    const int stages = p.io.stages;
    uint64_t *full = (uint64_t *)(smem + (size_t)stages * SM90_STAGE_BYTES);
    uint64_t *empty = full + stages;
    /* after the 512-byte barrier block: 256 bytes per consumer warp for the
     * staged epilogue (NVFP4_SM90_EPI_BYTES) */
    uint8_t *const epi_base = (uint8_t *)full + 512;

    const int tid = threadIdx.x;
    const int wg = tid / 128;
    const int num_kc = (p.io.k + 63) / 64;
    /* Chunks of 64 K-elements; K % 32 == 0, so a partial last chunk holds
     * exactly 2 blocks (the host rejects other K). */
    const int num_full = p.io.k / 64;
    /* this CTA's tiles and pieces of tiles, in order (both roles walk it) */
    const nvfp4_sm90_work work = nvfp4_sm90_work_of(p, num_kc, SM90_SK);

    if (tid == 0) {
        for (int s = 0; s < stages; s++) {
            ptx_mbar_init(&full[s], 1);
            ptx_mbar_init(&empty[s], 4 * SM90_NC);
        }
        ptx_fence_mbar_init();
    }
        __syncthreads();
    /* launched as the programmatic dependent of the kernel that wrote the
     * activations (and maybe the per-tensor scale) and zeroed the stream-K
     * counters: nothing global is read or written before it has completed
     * (a no-op otherwise) -- but where a stage holds several chunks, the
     * weight issuers (producer warps 1 and 2) do not wait: the weights are
     * not that kernel's output, and the ring's first stages of them stream
     * while it finishes (0.3-0.9 us at the 64 x 128 tile). */
    const int early_w = SM90_PARALLEL && wg == 0 && (tid / 32 == 1 || tid / 32 == 2);
    if (!early_w) ptx_griddep_wait();

    if (wg == 0) {
        /* ---------------- producer ---------------- */
#if SM90_NC == 2 || defined(SM90_CONSUMER_REGS)
        ptx_setmaxnreg_dec_40();
#endif
        /* One issuing thread (lane 0 of warp 0) where a stage holds one
         * chunk (more measured no faster), else (SM90_PARALLEL) one per kind
         * of request (warp 0: the activation boxes and the
         * expect_tx of the whole stage, warp 1: the code box, warp 2: the
         * scale chunk, warp 3: every other activation box): each request
         * then waits on its own issuer only.  A copy may complete on full[s]
         * before warp 0's expect_tx: the tx-count goes below zero while the
         * arrival is pending, so the phase still cannot complete early.
         * p.act3d: a stage's KSUB activation chunks as one 3-D box (tmap_act3:
         * {64 elements, M rows, chunks}) instead of KSUB boxes (1-2 % faster
         * at M <= 128). */
        const int pwarp = tid / 32;
        const int parallel = SM90_PARALLEL;
        const int act3d = p.act3d && SM90_KSUB > 1;
        if (tid % 32 == 0 && (parallel || pwarp == 0)) {
            if (pwarp == 0) {
                ptx_prefetch_tmap(&p.tmap_act);
                if (act3d) ptx_prefetch_tmap(&p.tmap_act3);
            }
            if (pwarp == 0 || pwarp == 1) ptx_prefetch_tmap(&p.tmap_codes);
            if (pwarp == 0 || pwarp == 2) ptx_prefetch_tmap(&p.tmap_scales);
            const int do_act0 = pwarp == 0, do_codes = !parallel || pwarp == 1;
            const int do_scales = !parallel || pwarp == 2, do_act1 = !parallel ? 1 : pwarp == 3;
            int s = 0;
            uint32_t phase = 0;
            for (int64_t item = 0; item < work.items; item++) {
                int kbeg, kend;
                const int64_t tile = nvfp4_sm90_item(work, item, num_kc, &kbeg, &kend);
                const int wt = (int)(tile / p.num_at), at = (int)(tile % p.num_at);
                const int n0 = wt * 64 * SM90_NC, m0 = at * SM90_BN;
                const int sc_chunk0 = (n0 / 128) * p.io.ncb; /* the tile's first 512-byte scale chunk */
                for (int kc0 = kbeg; kc0 < kend; kc0 += SM90_KSUB) {
                    const int nsub = kend - kc0 < SM90_KSUB ? kend - kc0 : SM90_KSUB;
                    ptx_mbar_wait(&empty[s], phase ^ 1);
                    uint8_t *st = SM90_STAGE(s);
                    if (pwarp == 0) /* the scale box is KSUB chunks even in a short last stage */
                        ptx_mbar_arrive_expect_tx(&full[s], nsub * SM90_ACT_BOX + SM90_CODE_BYTES + SM90_KSUB * 512);
                    if (act3d && kc0 + SM90_KSUB <= num_full) {
                        if (do_act0) ptx_tma_load_3d(st, &p.tmap_act3, &full[s], 0, m0, kc0);
                    } else {
                        for (int j = 0; j < nsub; j++) {
                            if (!((j % 2 == 0) ? do_act0 : do_act1)) continue;
                            ptx_tma_load_2d(st + j * SM90_ACT_BOX, &p.tmap_act, &full[s], (kc0 + j) * 64, m0);
                        }
                    }
                    if (do_codes) ptx_tma_load_2d(st + SM90_ACT_BYTES, &p.tmap_codes, &full[s], kc0 * 32, n0);
                    /* a tensor copy, not a 1-D bulk copy of the same bytes: racecheck
                     * takes the mbarrier as ordering the tensor copy's writes after the
                     * consumers' reads, not the bulk copy's (docs/KERNEL.md, racecheck) */
                    if (do_scales)
                        ptx_tma_load_2d(st + SM90_ACT_BYTES + SM90_CODE_BYTES, &p.tmap_scales, &full[s], 0,
                                        (sc_chunk0 + kc0) * 2);
                    if (++s == stages) {
                        s = 0;
                        phase ^= 1;
                    }
                }
            }
        }
    } else {
        /* ---------------- consumers ---------------- */
#if SM90_NC == 2
        ptx_setmaxnreg_inc_232();
#elif defined(SM90_CONSUMER_REGS)
        ptx_setmaxnreg_inc<SM90_CONSUMER_REGS>();
#endif
        const int c = wg - 1;
        const int warp = (tid / 32) % 4, lane = tid % 32;
        const int g = lane >> 2, t = lane & 3;
        const int r0 = c * 64 + warp * 16 + g; /* tile-local weight row; r0 + 8 is the other */
        uint8_t *const epi = epi_base + (c * 4 + warp) * 256;
        /* the lane's code bytes 2t, 2t+1 of a block (the operand order):
         * word t / 2 of the block, half t % 2 (the prmt selector) */
        const int word_off = 4 * (t >> 1);
        const uint32_t xsel = (t & 1) ? 0x7632u : 0x5410u;
        const float alpha = __fmul_rn(*p.io.a_scale2, *p.io.b_scale2);
        float acc[SM90_BN / 2];
        /* K slices: running sums (only where SM90_SLICES; else unused) */
        float tot[SM90_BN / 2];
        const int sliced = SM90_SLICES && p.io.chunks_per_slice < num_kc;
        int s = 0;
        uint32_t phase = 0;
        for (int64_t item = 0; item < work.items; item++) {
            /* chunks [kbeg, kend) of the tile; the full ones end at kstop */
            int kbeg, kend;
            const int64_t tile = nvfp4_sm90_item(work, item, num_kc, &kbeg, &kend);
            const int kstop = kend < num_full ? kend : num_full;
            const int wt = (int)(tile / p.num_at), at = (int)(tile % p.num_at);
            const int n0 = wt * 64 * SM90_NC, m0 = at * SM90_BN;
            /* the rows' 4-byte groups in the 512-byte tile of their 128 rows */
            const int rr0 = (n0 + r0) % 128, rr1 = (n0 + r0 + 8) % 128;
            const int sc_off0 = (int)nvfp4_tiled_offset(rr0, 0, 1);
            const int sc_off1 = (int)nvfp4_tiled_offset(rr1, 0, 1);
            if (SM90_SK && kbeg > 0) {
                /* a tail piece: the chain so far, from the CTA that ran the
                 * tile's first chunks (the previous one), bit for bit */
                SM90_SK_LOAD(blockIdx.x - 1);
            } else {
#pragma unroll
                for (int i = 0; i < SM90_BN / 2; i++) acc[i] = 0.0f;
            }
#pragma unroll
            for (int i = 0; i < SM90_BN / 2; i++) ptx_fence_reg(acc[i]);
            int first_slice = 1;
            /* Software pipeline, two chunks deep: while the wgmmas of chunk kc
             * run, the next chunk is dequantized into the other fragment set;
             * wait_group 1 then retires chunk kc-1 and frees its stage. */
            uint32_t fa[4][4];
            int kc = kbeg, sub = 0, prev_slot = 0;
#if !SM90_PAIR
            int slice_end = p.io.chunks_per_slice;
            uint32_t fb[4][4];
            int prev_last = 0;
#endif
#if SM90_PAIR
            /* the full chunks in pairs from kbeg (one consumer: kbeg = 0 and
             * a pair is a stage; two: a pair is two stages, and a stream-K
             * piece may start on any chunk) */
            const int kpair_end = kbeg + ((kstop - kbeg) & ~1);
            if (kpair_end > kbeg) {
                uint32_t pa[8][4], pb[8][4];
                int prev_slot2 = 0;
                {
                    nvfp4_sm90_chunk_raw ra_, rb_;
                    SM90_PAIR_WAIT_LOAD(ra_, rb_);
                    nvfp4_sm90_convert_chunk(ra_, xsel, pa);
                    nvfp4_sm90_convert_chunk(rb_, xsel, pa + 4);
                }
                for (;;) {
                    SM90_PAIR_STEP(pa, pb)
                    SM90_PAIR_STEP(pb, pa)
                }
                ptx_wgmma_wait0();
#pragma unroll
                for (int i = 0; i < SM90_BN / 2; i++) ptx_fence_reg(acc[i]);
                SM90_FENCE_FRAGS(pa, 8)
                SM90_FENCE_FRAGS(pb, 8)
                /* the last pair's stages (reads only: no proxy fence) */
                __syncwarp();
                if (lane == 0) {
                    SM90_RELEASE(prev_slot);
                    if (SM90_KSUB == 1) SM90_RELEASE(prev_slot2);
                }
            }
            if (kstop > kpair_end) {
                /* one full chunk left, the first of stage s; with two chunks
                 * a stage, a 2-block chunk after it (below) shares the stage
                 * and frees it */
                ptx_mbar_wait(&full[s], phase);
                SM90_DEQUANT(fa);
                SM90_FENCE_FRAGS(fa, 4)
                ptx_wgmma_fence();
                const uint64_t d_ = ptx_desc_sw128(ptx_smem_addr(SM90_STAGE(s) + sub * SM90_ACT_BOX));
                SM90_WGMMA_CHUNK(fa, d_)
                ptx_wgmma_commit();
                ptx_wgmma_wait0();
#pragma unroll
                for (int i = 0; i < SM90_BN / 2; i++) ptx_fence_reg(acc[i]);
                SM90_FENCE_FRAGS(fa, 4)
                if (SM90_KSUB == 1 || kend == kstop) {
                    __syncwarp();
                    if (lane == 0) SM90_RELEASE(s);
                }
                SM90_NEXT_CHUNK();
            }
#else
            if (kstop > kbeg) {
                ptx_mbar_wait(&full[s], phase);
                SM90_DEQUANT(fa);
                for (;;) {
                    SM90_CHUNK(fa, fb)
                    SM90_CHUNK(fb, fa)
                }
                ptx_wgmma_wait0();
#pragma unroll
                for (int i = 0; i < SM90_BN / 2; i++) ptx_fence_reg(acc[i]);
#pragma unroll
                for (int kb = 0; kb < 4; kb++)
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        ptx_fence_reg_u32(fa[kb][j]);
                        ptx_fence_reg_u32(fb[kb][j]);
                    }
                if (prev_last) {
                    /* (reads only: no proxy fence) */
                    __syncwarp();
                    if (lane == 0) SM90_RELEASE(prev_slot);
                }
            }
#endif
            if (kend > num_full) { /* K % 64 == 32: a last chunk of 2 blocks */
                if (sub == 0) ptx_mbar_wait(&full[s], phase);
                SM90_DEQUANT(fa);
#pragma unroll
                for (int kb = 0; kb < 2; kb++)
#pragma unroll
                    for (int j = 0; j < 4; j++) ptx_fence_reg_u32(fa[kb][j]);
                ptx_wgmma_fence();
                const uint32_t act_addr = ptx_smem_addr(SM90_STAGE(s) + sub * SM90_ACT_BOX);
                SM90_WGMMA(acc, fa[0][0], fa[0][1], fa[0][2], fa[0][3], ptx_desc_sw128(act_addr));
                SM90_WGMMA(acc, fa[1][0], fa[1][1], fa[1][2], fa[1][3], ptx_desc_sw128(act_addr + 32));
                ptx_wgmma_commit();
                ptx_wgmma_wait0();
#pragma unroll
                for (int i = 0; i < SM90_BN / 2; i++) ptx_fence_reg(acc[i]);
#pragma unroll
                for (int kb = 0; kb < 2; kb++)
#pragma unroll
                    for (int j = 0; j < 4; j++) ptx_fence_reg_u32(fa[kb][j]);
                /* (reads only: no proxy fence) */
                __syncwarp();
                if (lane == 0) SM90_RELEASE(s);
                SM90_NEXT_CHUNK();
            }
            if (sub != 0) { /* the tile's last stage held fewer than KSUB chunks */
                sub = 0;
                if (++s == stages) {
                    s = 0;
                    phase ^= 1;
                }
            }
            if (SM90_SK && kend < num_kc) { /* a head piece: hand the chain on, no epilogue */
                SM90_SK_STORE(blockIdx.x);
                continue;
            }
            if (SM90_SLICES && sliced) SM90_FOLD(); /* the last slice */
#if SM90_SLICES
            if (sliced) {
#pragma unroll
                for (int i = 0; i < SM90_BN / 2; i++) acc[i] = tot[i];
            }
#endif
            if (p.out_staged) {
                SM90_EPI_OUT();
                if (p.io.raw) NVFP4_SM90_EPILOGUE_X(p, acc, SM90_BN, n0, m0, r0, t, alpha, 0);
            } else {
                NVFP4_SM90_EPILOGUE(p, acc, SM90_BN, n0, m0, r0, t, alpha);
            }
        }
    }
}

#undef SM90_CHUNK
#undef SM90_PARALLEL
#undef SM90_RELEASE
#undef SM90_WGMMA_CHUNK
#undef SM90_FENCE_FRAGS
#undef SM90_PAIR
#undef SM90_CONSUMER_REGS
#undef SM90_REG_CAP
#undef SM90_PAIR_STEP
#undef SM90_PAIR_RETIRE
#undef SM90_PAIR_ADVANCE
#undef SM90_PAIR_WAIT_LOAD
#undef SM90_PAIR_S2
#undef SM90_PAIR_PH2
#undef SM90_LOAD_AT
#undef SM90_EPI_OUT
#undef SM90_SK
#undef SM90_SK_SLOT
#undef SM90_SK_STORE
#undef SM90_SK_LOAD
#undef SM90_FOLD
#undef SM90_SLICES
#undef SM90_SLICED
#undef SM90_NEXT_CHUNK
#undef SM90_DEQUANT
#undef SM90_LOAD
#undef SM90_LOAD_AHEAD
#undef SM90_WAIT_GROUP
#undef SM90_RETIRE_BOOKKEEPING
#undef SM90_STAGE
#undef SM90_KSUB
#undef SM90_ACT_BOX
#undef SM90_CODE_ROW
#undef SM90_THREADS
#undef SM90_MINB
#undef SM90_ACT_BYTES
#undef SM90_CODE_BYTES
#undef SM90_STAGE_BYTES
#undef SM90_BN
#undef SM90_NC
#undef SM90_NAME
#undef SM90_WGMMA
