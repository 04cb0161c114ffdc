/* sm90_ss_body.cuh -- the SS kernel (kind NVFP4_SM90_SS): dequantizing warps
 * write the weights as FP16 tiles to shared memory and one wgmma warpgroup per
 * 64 weight rows multiplies them with both operands from shared memory.
 * Included once per variant by sm90_gemm.cu with these macros defined:
 *   SS_BN     activation rows per tile = wgmma N (64 or 128)
 *   SS_NC     MMA warpgroups, 64 weight rows each (1; 2 gave wrong bits in
 *             the per-warp-chunk version and is not instantiated)
 *   SS_NAME   the kernel's name
 *   SS_WGMMA  the wgmma wrapper (_ss) for N = SS_BN
 *
 * Why: in the register-A kernel (sm90_gemm_body.cuh) each consumer warp
 * dequantizes its 16 rows itself, about 220 instructions per 64-K chunk
 * issued by one warp per scheduler at ~4 cycles each -- the tensor pipe waits
 * (docs/KERNEL.md).  Here SS_DW warps share that work, each dequantizing
 * whole chunks (chunk q by warp q % SS_DW into its own A slot), so SS_DW
 * chunks are in flight ahead of the MMA warpgroups.
 *
 * Warps: [0, 4 NC) the MMA warpgroups (wgmma needs whole aligned
 * warpgroups), then SS_DW dequantizing warps, then the producer warp.
 * Chunk q (64 K-elements, counted over the CTA's tiles) lives in raw stage
 * q % stages and A slot q % SS_A_SLOTS.  Barriers:
 *   full[s]   TMA bytes of stage s (activations, codes, scales);
 *   empty[s]  the chunk's dequantizing warp (codes and scales read) + 4 NC
 *             MMA warps (its activations' wgmmas retired);
 *   afull[j]  dequantizing warp j (FP16 tile written, proxy-fenced);
 *   aempty[j] 4 NC MMA warps (the tile's wgmmas retired).
 * The arithmetic is the register kernel's: one wgmma k16 step per NVFP4
 * block in increasing k into zeroed FP32 accumulators; A's FP16 values are
 * the same exact products e2m1 * scale * 2^-6 * 64 (nvfp4_sm90_dequant_block). */

#define SS_T_THREADS SS_THREADS(SS_NC)
#define SS_T_STAGE SS_STAGE_BYTES(SS_BN, SS_NC)
#define SS_T_ACT (SS_BN * 128)    /* activation box: bn rows x 64 FP16 */
#define SS_T_CODES (SS_NC * 2048) /* 64 nc rows x 32 code bytes */
#define SS_T_A SS_A_BYTES(SS_NC)

/* One chunk q of an MMA warpgroup: wait for its activations and A tile,
 * issue NB wgmma k16 steps, then retire chunk q - 1 (wait_group 1) and free
 * its stage and A slot (both only read). */
#define SS_MMA_CHUNK(NB)                                                                           \
    {                                                                                              \
        const int s = (int)(q % (uint32_t)stages), j = (int)(q % SS_A_SLOTS);                      \
        ptx_mbar_wait(&full[s], (q / (uint32_t)stages) & 1u);                                      \
        ptx_mbar_wait(&afull[j], (q / SS_A_SLOTS) & 1u);                                           \
        const uint32_t act_addr = ptx_smem_addr(raw + (size_t)s * SS_T_STAGE);                     \
        const uint32_t a_addr = ptx_smem_addr(aring + (size_t)j * SS_T_A + c * 8192);              \
        ptx_wgmma_fence();                                                                         \
        _Pragma("unroll") for (int kb = 0; kb < (NB); kb++)                                        \
            SS_WGMMA(acc, ptx_desc_sw128(a_addr + 32 * kb), ptx_desc_sw128(act_addr + 32 * kb));   \
        ptx_wgmma_commit();                                                                        \
        ptx_wgmma_wait1();                                                                         \
        if (prev_s >= 0) {                                                                         \
            __syncwarp();                                                                          \
            if (lane == 0) {                                                                       \
                ptx_mbar_arrive(&empty[prev_s]);                                                   \
                ptx_mbar_arrive(&aempty[prev_j]);                                                  \
            }                                                                                      \
        }                                                                                          \
        prev_s = s;                                                                                \
        prev_j = j;                                                                                \
    }

extern "C" __global__ void __launch_bounds__(SS_T_THREADS, 1) SS_NAME(const __grid_constant__ nvfp4_sm90_params p)
{
    extern __shared__ __align__(1024) uint8_t smem_dyn[];
    uint8_t *const smem = smem_dyn + ((1024u - (ptx_smem_addr(smem_dyn) & 1023u)) & 1023u);
    const int stages = p.stages;
    uint8_t *const aring = smem;                                  /* SS_A_SLOTS x SS_T_A */
    uint8_t *const raw = smem + (size_t)SS_A_SLOTS * SS_T_A;     /* stages x SS_T_STAGE */
    uint64_t *full = (uint64_t *)(raw + (size_t)stages * SS_T_STAGE);
    uint64_t *empty = full + stages;
    uint64_t *afull = empty + stages;
    uint64_t *aempty = afull + SS_A_SLOTS;

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int num_kc = (p.k + 63) / 64; /* a last chunk of 2 blocks when K % 64 == 32 */
    const int num_full = p.k / 64;

    if (tid == 0) {
        for (int s = 0; s < stages; s++) {
            ptx_mbar_init(&full[s], 1);
            ptx_mbar_init(&empty[s], 1 + 4 * SS_NC); /* its dequantizing warp, the MMA warps */
        }
        for (int j = 0; j < SS_A_SLOTS; j++) {
            ptx_mbar_init(&afull[j], 1);
            ptx_mbar_init(&aempty[j], 4 * SS_NC);
        }
        ptx_fence_mbar_init();
    }
    __syncthreads();

    /* role branches on the warpgroup index first: wgmma in a path ptxas
     * cannot prove warpgroup-uniform gets serialized (C7520) */
    if (tid / 128 < SS_NC) {
        /* ---------------- MMA warpgroups ---------------- */
        const int c = warp / 4, wq = warp % 4;
        const int g = lane >> 2, t = lane & 3;
        const int r0 = c * 64 + wq * 16 + g; /* tile-local weight row; r0 + 8 is the other */
        const float alpha = __fmul_rn(*p.a_scale2, *p.b_scale2);
        float acc[SS_BN / 2];
        uint32_t q = 0;
        for (int64_t tile = blockIdx.x; tile < p.num_tiles; tile += gridDim.x) {
            const int wt = (int)(tile / p.num_at), at = (int)(tile % p.num_at);
            const int n0 = wt * 64 * SS_NC, m0 = at * SS_BN;
#pragma unroll
            for (int i = 0; i < SS_BN / 2; i++) {
                acc[i] = 0.0f;
                ptx_fence_reg(acc[i]);
            }
            int prev_s = -1, prev_j = 0;
            /* full chunks (4 blocks) in the loop, a 2-block K tail after it:
             * wgmmas under a data-dependent branch inside the loop made
             * ptxas serialize every wgmma (C7520, a wait after each) */
            for (int kc = 0; kc < num_full; kc++, q++) SS_MMA_CHUNK(4);
            if (num_kc > num_full) {
                SS_MMA_CHUNK(2);
                q++;
            }
            ptx_wgmma_wait0();
#pragma unroll
            for (int i = 0; i < SS_BN / 2; i++) ptx_fence_reg(acc[i]);
            if (prev_s >= 0) {
                __syncwarp();
                if (lane == 0) {
                    ptx_mbar_arrive(&empty[prev_s]);
                    ptx_mbar_arrive(&aempty[prev_j]);
                }
            }
            NVFP4_SM90_EPILOGUE(p, acc, SS_BN, n0, m0, r0, t, alpha);
        }
        } else if (warp == 4 * SS_NC + SS_DW) {
        /* ---------------- producer: one thread issues the TMA ---------------- */
        if (lane == 0) {
            ptx_prefetch_tmap(&p.tmap_act);
            ptx_prefetch_tmap(&p.tmap_codes);
            uint32_t q = 0;
            for (int64_t tile = blockIdx.x; tile < p.num_tiles; tile += gridDim.x) {
                const int wt = (int)(tile / p.num_at), at = (int)(tile % p.num_at);
                const int n0 = wt * 64 * SS_NC, m0 = at * SS_BN;
                const uint8_t *sc = p.b_scales + (size_t)(n0 / 128) * p.ncb * 512;
                for (int kc = 0; kc < num_kc; kc++, q++) {
                    const int s = (int)(q % (uint32_t)stages);
                    ptx_mbar_wait(&empty[s], ((q / (uint32_t)stages) & 1u) ^ 1u);
                    uint8_t *st = raw + (size_t)s * SS_T_STAGE;
                    ptx_mbar_arrive_expect_tx(&full[s], SS_T_ACT + SS_T_CODES + 512);
                    ptx_tma_load_2d(st, &p.tmap_act, &full[s], kc * 64, m0);
                    ptx_tma_load_2d(st + SS_T_ACT, &p.tmap_codes, &full[s], kc * 32, n0);
                    ptx_bulk_load(st + SS_T_ACT + SS_T_CODES, sc + (size_t)kc * 512, 512, &full[s]);
                }
            }
        }
    } else {
        /* ---------------- dequantizing warps ---------------- */
        /* Warp dw dequantizes whole chunks q = dw, dw + SS_DW, ... into its own
         * A slot (slot q % SS_A_SLOTS = dw): SS_DW chunks in flight.  Splitting
         * every chunk over all the warps (first version) was limited by one
         * warp's latency per chunk (load, convert, store, proxy fence): ~940
         * cycles a chunk at M = 128, slower than the register kernel.  Lane
         * task i: row 8 i + lane / 4 of each 64-row group, block lane % 4
         * (8-byte code loads and 16-byte stores conflict-free). */
        const int dw = warp - 4 * SS_NC;
        const int blk = lane % 4;
        uint8_t *const a = aring + (size_t)dw * SS_T_A;
        uint32_t q = 0;
        for (int64_t tile = blockIdx.x; tile < p.num_tiles; tile += gridDim.x) {
            const int wt = (int)(tile / p.num_at);
            const int n0 = wt * 64 * SS_NC;
            for (int kc = 0; kc < num_kc; kc++, q++) {
                if ((int)(q % SS_DW) != dw) continue;
                const int s = (int)(q % (uint32_t)stages);
                ptx_mbar_wait(&full[s], (q / (uint32_t)stages) & 1u);
                const uint8_t *st = raw + (size_t)s * SS_T_STAGE;
                uint2 w[8 * SS_NC];
                uint32_t sb[8 * SS_NC];
#pragma unroll
                for (int i = 0; i < 8 * SS_NC; i++) {
                    const int r = 8 * i + lane / 4;
                    w[i] = *(const uint2 *)(st + SS_T_ACT + r * 32 + blk * 8);
                    sb[i] = st[SS_T_ACT + SS_T_CODES + nvfp4_tiled_offset((n0 + r) % 128, blk, 1)];
                }
                /* the stage's codes and scales are in registers: release our part of it */
                __syncwarp();
                if (lane == 0) ptx_mbar_arrive(&empty[s]);
                ptx_mbar_wait(&aempty[dw], ((q / SS_A_SLOTS) & 1u) ^ 1u);
#pragma unroll
                for (int i = 0; i < 8 * SS_NC; i++) {
                    uint32_t o[8];
                    nvfp4_sm90_dequant_block(w[i], sb[i], o);
                    /* K-major, 128-byte swizzle (as TMA would write it): 16-byte
                     * unit u of row r at u ^ (r % 8); the block's units are 2 blk, 2 blk + 1 */
                    const int r = 8 * i + lane / 4;
                    uint8_t *line = a + r * 128;
                    *(uint4 *)(line + (((2 * blk) ^ (r & 7)) * 16)) = make_uint4(o[0], o[1], o[2], o[3]);
                    *(uint4 *)(line + (((2 * blk + 1) ^ (r & 7)) * 16)) = make_uint4(o[4], o[5], o[6], o[7]);
                }
                /* generic-proxy writes, read by wgmma (async proxy) */
                ptx_fence_proxy_async();
                __syncwarp();
                if (lane == 0) ptx_mbar_arrive(&afull[dw]);
            }
        }
    }
}

#undef SS_MMA_CHUNK
#undef SS_T_THREADS
#undef SS_T_STAGE
#undef SS_T_ACT
#undef SS_T_CODES
#undef SS_T_A
#undef SS_BN
#undef SS_NC
#undef SS_NAME
#undef SS_WGMMA
