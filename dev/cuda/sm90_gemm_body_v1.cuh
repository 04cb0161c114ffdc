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
#define SM90_ACT_BYTES (SM90_BN * 128)
#define SM90_CODE_BYTES (SM90_NC * 64 * 32)
#define SM90_STAGE_BYTES (((SM90_ACT_BYTES + SM90_CODE_BYTES + 512) + 1023) / 1024 * 1024)

extern "C" __global__ void __launch_bounds__(SM90_THREADS, 1)
    SM90_NAME(const __grid_constant__ nvfp4_sm90_params p)
{
    extern __shared__ uint8_t smem_dyn[];
    uint8_t *smem = (uint8_t *)(((uintptr_t)smem_dyn + 1023) & ~(uintptr_t)1023);
    const int stages = p.stages;
    uint64_t *full = (uint64_t *)(smem + (size_t)stages * SM90_STAGE_BYTES);
    uint64_t *empty = full + stages;

    const int tid = threadIdx.x;
    const int wg = tid / 128;
    const int num_kc = (p.k + 63) / 64;
    /* Chunks of 64 K-elements; K % 32 == 0, so a partial last chunk holds
     * exactly 2 blocks (the host rejects other K). */
    const int num_full = p.k / 64;

    if (tid == 0) {
        for (int s = 0; s < stages; s++) {
            ptx_mbar_init(&full[s], 1);
            ptx_mbar_init(&empty[s], 4 * SM90_NC);
        }
        ptx_fence_mbar_init();
    }
    __syncthreads();

    if (wg == 0) {
        /* ---------------- producer ---------------- */
#if SM90_NC == 2
        ptx_setmaxnreg_dec_40();
#endif
        if (tid == 0) {
            ptx_prefetch_tmap(&p.tmap_act);
            ptx_prefetch_tmap(&p.tmap_codes);
            int s = 0;
            uint32_t phase = 0;
            for (int64_t tile = blockIdx.x; tile < p.num_tiles; tile += gridDim.x) {
                const int wt = (int)(tile / p.num_at), at = (int)(tile % p.num_at);
                const int n0 = wt * 64 * SM90_NC, m0 = at * SM90_BN;
                const uint8_t *sc = p.b_scales + (size_t)(n0 / 128) * p.ncb * 512;
                for (int kc = 0; kc < num_kc; kc++) {
                    ptx_mbar_wait(&empty[s], phase ^ 1);
                    uint8_t *st = smem + (size_t)s * SM90_STAGE_BYTES;
                    ptx_mbar_arrive_expect_tx(&full[s], SM90_ACT_BYTES + SM90_CODE_BYTES + 512);
                    ptx_tma_load_2d(st, &p.tmap_act, &full[s], kc * 64, m0);
                    ptx_tma_load_2d(st + SM90_ACT_BYTES, &p.tmap_codes, &full[s], kc * 32, n0);
                    ptx_bulk_load(st + SM90_ACT_BYTES + SM90_CODE_BYTES, sc + (size_t)kc * 512, 512,
                                  &full[s]);
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
#endif
        const int c = wg - 1;
        const int warp = (tid / 32) % 4, lane = tid % 32;
        const int g = lane >> 2, t = lane & 3;
        const int r0 = c * 64 + warp * 16 + g; /* tile-local weight row; r0 + 8 is the other */
        /* prmt selector for bytes t and t+4 of an 8-byte block (two words). */
        const uint32_t sel_block = (uint32_t)t | ((uint32_t)(t + 4) << 4);
        const float alpha = __fmul_rn(*p.a_scale2, *p.b_scale2);
        const uint32_t sixty_four = 0x54005400u; /* FP16 {64, 64} */
        float acc[SM90_BN / 2];
        int s = 0;
        uint32_t phase = 0;
        for (int64_t tile = blockIdx.x; tile < p.num_tiles; tile += gridDim.x) {
            const int wt = (int)(tile / p.num_at), at = (int)(tile % p.num_at);
            const int n0 = wt * 64 * SM90_NC, m0 = at * SM90_BN;
            const int rr0 = (n0 + r0) % 128, rr1 = (n0 + r0 + 8) % 128;
            const int sc_off0 = (rr0 % 32) * 16 + (rr0 / 32) * 4;
            const int sc_off1 = (rr1 % 32) * 16 + (rr1 / 32) * 4;
#pragma unroll
            for (int i = 0; i < SM90_BN / 2; i++) {
                acc[i] = 0.0f;
                ptx_fence_reg(acc[i]);
            }
            for (int kc = 0; kc < num_full; kc++) {
                ptx_mbar_wait(&full[s], phase);
                const uint8_t *st = smem + (size_t)s * SM90_STAGE_BYTES;
                const uint8_t *codes = st + SM90_ACT_BYTES;
                const uint8_t *scales = codes + SM90_CODE_BYTES;
                const uint4 c0a = *(const uint4 *)(codes + r0 * 32);
                const uint4 c0b = *(const uint4 *)(codes + r0 * 32 + 16);
                const uint4 c1a = *(const uint4 *)(codes + (r0 + 8) * 32);
                const uint4 c1b = *(const uint4 *)(codes + (r0 + 8) * 32 + 16);
                const uint32_t s0 = *(const uint32_t *)(scales + sc_off0);
                const uint32_t s1 = *(const uint32_t *)(scales + sc_off1);
                /* words of block kb: row0 {lo, hi}, row1 {lo, hi} */
                const uint32_t w0lo[4] = {c0a.x, c0a.z, c0b.x, c0b.z};
                const uint32_t w0hi[4] = {c0a.y, c0a.w, c0b.y, c0b.w};
                const uint32_t w1lo[4] = {c1a.x, c1a.z, c1b.x, c1b.z};
                const uint32_t w1hi[4] = {c1a.y, c1a.w, c1b.y, c1b.w};
                /* FP16 pairs {scale0, scale1} * 64 for blocks 0..3 (sign bits cleared) */
                const uint32_t s01_lo = ptx_prmt(s0, s1, 0x5140u) & 0x7F7F7F7Fu; /* s0b0 s1b0 s0b1 s1b1 */
                const uint32_t s01_hi = ptx_prmt(s0, s1, 0x7362u) & 0x7F7F7F7Fu; /* s0b2 s1b2 s0b3 s1b3 */
                uint32_t sf[4];
                sf[0] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(s01_lo & 0xFFFFu)), sixty_four);
                sf[1] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(s01_lo >> 16)), sixty_four);
                sf[2] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(s01_hi & 0xFFFFu)), sixty_four);
                sf[3] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(s01_hi >> 16)), sixty_four);
                uint32_t afrag[4][4];
#pragma unroll
                for (int kb = 0; kb < 4; kb++) {
                    /* X = {row0 byte t, row0 byte t+4, row1 byte t, row1 byte t+4} */
                    const uint32_t x0 = ptx_prmt(w0lo[kb], w0hi[kb], sel_block);
                    const uint32_t x1 = ptx_prmt(w1lo[kb], w1hi[kb], sel_block);
                    const uint32_t x = ptx_prmt(x0, x1, 0x5410u);
                    /* Each nibble s.e1e0.m as an E4M3 byte s.0e1e0.m00 = e2m1 * 2^-6:
                     * high nibbles (elements 2i) and low nibbles (2i+1). */
                    const uint32_t hi = (x & 0x80808080u) | ((x >> 2) & 0x1C1C1C1Cu);
                    const uint32_t lo = ((x << 4) & 0x80808080u) | ((x << 2) & 0x1C1C1C1Cu);
                    const uint32_t p01 = ptx_prmt(hi, lo, 0x5140u); /* row0: {2t,2t+1}, {2t+8,2t+9} */
                    const uint32_t p23 = ptx_prmt(hi, lo, 0x7362u); /* row1: the same */
                    const uint32_t sc0 = ptx_prmt(sf[kb], 0, 0x1010u); /* {s0, s0} */
                    const uint32_t sc1 = ptx_prmt(sf[kb], 0, 0x3232u); /* {s1, s1} */
                    afrag[kb][0] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(p01 & 0xFFFFu)), sc0);
                    afrag[kb][1] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(p23 & 0xFFFFu)), sc1);
                    afrag[kb][2] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(p01 >> 16)), sc0);
                    afrag[kb][3] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(p23 >> 16)), sc1);
                }
#pragma unroll
                for (int kb = 0; kb < 4; kb++)
#pragma unroll
                    for (int j = 0; j < 4; j++) ptx_fence_reg_u32(afrag[kb][j]);
                ptx_wgmma_fence();
                const uint32_t act_addr = ptx_smem_addr(st);
#pragma unroll
                for (int kb = 0; kb < 4; kb++)
                    SM90_WGMMA(acc, afrag[kb][0], afrag[kb][1], afrag[kb][2], afrag[kb][3],
                               ptx_desc_sw128(act_addr + kb * 32));
                ptx_wgmma_commit();
                ptx_wgmma_wait0();
#pragma unroll
                for (int i = 0; i < SM90_BN / 2; i++) ptx_fence_reg(acc[i]);
                if (lane == 0) ptx_mbar_arrive(&empty[s]);
                if (++s == stages) {
                    s = 0;
                    phase ^= 1;
                }
            }
            for (int kc = num_full; kc < num_kc; kc++) { /* K % 64 != 0: the last chunk holds 2 blocks */
                ptx_mbar_wait(&full[s], phase);
                const uint8_t *st = smem + (size_t)s * SM90_STAGE_BYTES;
                const uint8_t *codes = st + SM90_ACT_BYTES;
                const uint8_t *scales = codes + SM90_CODE_BYTES;
                const uint4 c0a = *(const uint4 *)(codes + r0 * 32);
                const uint4 c0b = *(const uint4 *)(codes + r0 * 32 + 16);
                const uint4 c1a = *(const uint4 *)(codes + (r0 + 8) * 32);
                const uint4 c1b = *(const uint4 *)(codes + (r0 + 8) * 32 + 16);
                const uint32_t s0 = *(const uint32_t *)(scales + sc_off0);
                const uint32_t s1 = *(const uint32_t *)(scales + sc_off1);
                /* words of block kb: row0 {lo, hi}, row1 {lo, hi} */
                const uint32_t w0lo[4] = {c0a.x, c0a.z, c0b.x, c0b.z};
                const uint32_t w0hi[4] = {c0a.y, c0a.w, c0b.y, c0b.w};
                const uint32_t w1lo[4] = {c1a.x, c1a.z, c1b.x, c1b.z};
                const uint32_t w1hi[4] = {c1a.y, c1a.w, c1b.y, c1b.w};
                /* FP16 pairs {scale0, scale1} * 64 for blocks 0..3 (sign bits cleared) */
                const uint32_t s01_lo = ptx_prmt(s0, s1, 0x5140u) & 0x7F7F7F7Fu; /* s0b0 s1b0 s0b1 s1b1 */
                const uint32_t s01_hi = ptx_prmt(s0, s1, 0x7362u) & 0x7F7F7F7Fu; /* s0b2 s1b2 s0b3 s1b3 */
                uint32_t sf[4];
                sf[0] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(s01_lo & 0xFFFFu)), sixty_four);
                sf[1] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(s01_lo >> 16)), sixty_four);
                sf[2] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(s01_hi & 0xFFFFu)), sixty_four);
                sf[3] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(s01_hi >> 16)), sixty_four);
                uint32_t afrag[4][4];
#pragma unroll
                for (int kb = 0; kb < 4; kb++) {
                    /* X = {row0 byte t, row0 byte t+4, row1 byte t, row1 byte t+4} */
                    const uint32_t x0 = ptx_prmt(w0lo[kb], w0hi[kb], sel_block);
                    const uint32_t x1 = ptx_prmt(w1lo[kb], w1hi[kb], sel_block);
                    const uint32_t x = ptx_prmt(x0, x1, 0x5410u);
                    /* Each nibble s.e1e0.m as an E4M3 byte s.0e1e0.m00 = e2m1 * 2^-6:
                     * high nibbles (elements 2i) and low nibbles (2i+1). */
                    const uint32_t hi = (x & 0x80808080u) | ((x >> 2) & 0x1C1C1C1Cu);
                    const uint32_t lo = ((x << 4) & 0x80808080u) | ((x << 2) & 0x1C1C1C1Cu);
                    const uint32_t p01 = ptx_prmt(hi, lo, 0x5140u); /* row0: {2t,2t+1}, {2t+8,2t+9} */
                    const uint32_t p23 = ptx_prmt(hi, lo, 0x7362u); /* row1: the same */
                    const uint32_t sc0 = ptx_prmt(sf[kb], 0, 0x1010u); /* {s0, s0} */
                    const uint32_t sc1 = ptx_prmt(sf[kb], 0, 0x3232u); /* {s1, s1} */
                    afrag[kb][0] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(p01 & 0xFFFFu)), sc0);
                    afrag[kb][1] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(p23 & 0xFFFFu)), sc1);
                    afrag[kb][2] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(p01 >> 16)), sc0);
                    afrag[kb][3] = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(p23 >> 16)), sc1);
                }
#pragma unroll
                for (int kb = 0; kb < 4; kb++)
#pragma unroll
                    for (int j = 0; j < 4; j++) ptx_fence_reg_u32(afrag[kb][j]);
                ptx_wgmma_fence();
                const uint32_t act_addr = ptx_smem_addr(st);
#pragma unroll
                for (int kb = 0; kb < 2; kb++)
                    SM90_WGMMA(acc, afrag[kb][0], afrag[kb][1], afrag[kb][2], afrag[kb][3],
                               ptx_desc_sw128(act_addr + kb * 32));
                ptx_wgmma_commit();
                ptx_wgmma_wait0();
#pragma unroll
                for (int i = 0; i < SM90_BN / 2; i++) ptx_fence_reg(acc[i]);
                if (lane == 0) ptx_mbar_arrive(&empty[s]);
                if (++s == stages) {
                    s = 0;
                    phase ^= 1;
                }
            }
            /* ---- epilogue: acc[i] is (row n, column m) of the tile ---- */
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int n = n0 + r0 + 8 * half;
                if (n >= p.n) continue;
                const float bias = p.bias ? p.bias[n] : 0.0f;
#pragma unroll
                for (int i = 0; i < SM90_BN / 2; i++) {
                    if (((i >> 1) & 1) != half) continue;
                    const int m = m0 + 8 * (i >> 2) + 2 * t + (i & 1);
                    if (m >= p.m) continue;
                    const size_t o = (size_t)m * (size_t)p.n + (size_t)n;
                    if (p.raw) p.raw[o] = acc[i];
                    if (p.out) {
                        float y = __fmul_rn(alpha, acc[i]);
                        if (p.bias) y = __fadd_rn(y, bias);
                        p.out[o] = nvfp4_dev_bf16_rne(y);
                    }
                }
            }
        }
    }
}

#undef SM90_THREADS
#undef SM90_ACT_BYTES
#undef SM90_CODE_BYTES
#undef SM90_STAGE_BYTES
#undef SM90_BN
#undef SM90_NC
#undef SM90_NAME
#undef SM90_WGMMA
