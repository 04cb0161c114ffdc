/* sm90_small_m.cuh -- the small-M kernel (M <= 16), included by sm90_gemm.cu.
 *
 * Why a second kernel: with one k16 step per NVFP4 block, every output is a
 * chain of K/16 dependent tensor-core steps.  In the wgmma kernel one chain
 * covers 64 weight rows, so at small M a linear has only N/64 chains (84
 * for N = 5376) and their step latency, not memory, sets the time.  Here
 * each warp runs mma.sync m16n8k16 (the same sm90 k16 step, measured bit
 * for bit like wgmma) on 8-row weight tiles: N/8 chains, two per warp,
 * interleaved.
 *
 * Per warp: 16 weight rows (two n8 tiles), all M <= 16 activation rows (the
 * m16 A operand, FP16 from the pre-pass, read through L1).  The 4-bit codes
 * and their scales stream through a per-warp ring in shared memory filled
 * by cp.async, many chunks ahead.  B fragments are dequantized from the ring
 * exactly as the wgmma kernel's A fragments (nvfp4_sm90_dequant_chunk). */

#define SMALLM_WARPS 2  /* small blocks: spread few warps over many SMs */
#define SMALLM_SLOTS 32 /* ring depth per warp: 31 chunks in flight */
#define SMALLM_SLOT 576 /* 16 rows x 32 code bytes + 16 rows x 4 scale bytes */

NVFP4_DEV void ptx_cp_async16(void *dst, const void *src, uint32_t src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(ptx_smem_addr(dst)), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}

NVFP4_DEV void ptx_cp_async4(void *dst, const void *src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(ptx_smem_addr(dst)), "l"(src) : "memory");
}

NVFP4_DEV void ptx_cp_async_commit(void) { asm volatile("cp.async.commit_group;" ::: "memory"); }

/* Wait until at most `n` of this thread's cp.async groups are pending. */
#define PTX_CP_ASYNC_WAIT(n) asm volatile("cp.async.wait_group %0;" ::"n"(n) : "memory")

NVFP4_DEV void ptx_mma_16816(float *d, const uint32_t *a, uint32_t b0, uint32_t b1)
{
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

typedef struct nvfp4_sm90_small_params {
    const uint8_t *b_codes;
    const uint8_t *b_scales;
    const uint16_t *act; /* FP16 [M][K] */
    const float *a_scale2;
    const float *b_scale2;
    const float *bias;
    float *raw;
    uint16_t *out;
    int m, n, k;
    int ncb;
} nvfp4_sm90_small_params;

/* Copy chunk kc (64 K-elements) of the warp's 16 rows into a ring slot:
 * lane L copies 16 code bytes of row L/2; lanes 0..15 one scale word each.
 * The second half of a row is zero-filled past K (K % 64 == 32). */
NVFP4_DEV void smallm_issue(const nvfp4_sm90_small_params *p, uint8_t *slot, int n0, int kc, int lane)
{
    const int row = lane >> 1, half = lane & 1;
    const size_t row_bytes = (size_t)p->k / 2;
    const int col = kc * 32 + half * 16;
    const uint8_t *src = p->b_codes + (size_t)(n0 + row) * row_bytes + (col < (int)row_bytes ? col : 0);
    ptx_cp_async16(slot + row * 32 + half * 16, src, col < (int)row_bytes ? 16u : 0u);
    if (lane < 16) {
        const int rr = (n0 + lane) % 128;
        const uint8_t *s = p->b_scales + ((size_t)((n0 + lane) / 128) * p->ncb + kc) * 512 +
                           (rr % 32) * 16 + (rr / 32) * 4;
        ptx_cp_async4(slot + 512 + lane * 4, s);
    }
}

/* A fragment (m16k16, rows g / g+8, columns 2t.. / 2t+8..) of block k0
 * from the FP16 activations; rows at or past M are zero. */
#define SMALLM_LOAD_A(A, K0)                                                                  \
    {                                                                                         \
        A[0] = row_lo ? __ldg((const unsigned int *)(act_lo + (K0))) : 0u;                    \
        A[1] = row_hi ? __ldg((const unsigned int *)(act_hi + (K0))) : 0u;                    \
        A[2] = row_lo ? __ldg((const unsigned int *)(act_lo + (K0) + 8)) : 0u;                \
        A[3] = row_hi ? __ldg((const unsigned int *)(act_hi + (K0) + 8)) : 0u;                \
    }

extern "C" __global__ void __launch_bounds__(SMALLM_WARPS * 32)
    nvfp4_sm90_small_m(const __grid_constant__ nvfp4_sm90_small_params p)
{
    extern __shared__ __align__(16) uint8_t smem_small[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane >> 2, t = lane & 3;
    uint8_t *ring = smem_small + (size_t)warp * SMALLM_SLOTS * SMALLM_SLOT;
    const uint32_t sel_block = (uint32_t)t | ((uint32_t)(t + 4) << 4);
    const int num_kc = (p.k + 63) / 64, num_full = p.k / 64;
    const int groups = p.n / 16;
    const float alpha = __fmul_rn(*p.a_scale2, *p.b_scale2);
    const bool row_lo = g < p.m, row_hi = g + 8 < p.m;
    const uint16_t *act_lo = p.act + (size_t)(row_lo ? g : 0) * p.k + 2 * t;
    const uint16_t *act_hi = p.act + (size_t)(row_hi ? g + 8 : 0) * p.k + 2 * t;

    for (int grp = blockIdx.x * SMALLM_WARPS + warp; grp < groups; grp += gridDim.x * SMALLM_WARPS) {
        const int n0 = grp * 16;
        float acc0[4] = {0.0f, 0.0f, 0.0f, 0.0f}, acc1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        /* prologue: SLOTS-1 chunks in flight, one commit group per chunk
         * (empty groups past K keep the count uniform) */
        for (int i = 0; i < SMALLM_SLOTS - 1; i++) {
            if (i < num_kc) smallm_issue(&p, ring + (size_t)i * SMALLM_SLOT, n0, i, lane);
            ptx_cp_async_commit();
        }
        for (int kc = 0; kc < num_kc; kc++) {
            const int ahead = kc + SMALLM_SLOTS - 1;
            if (ahead < num_kc)
                smallm_issue(&p, ring + (size_t)(ahead % SMALLM_SLOTS) * SMALLM_SLOT, n0, ahead, lane);
            ptx_cp_async_commit();
            PTX_CP_ASYNC_WAIT(SMALLM_SLOTS - 1); /* chunk kc has landed (this thread's copies) */
            __syncwarp();                        /* ... and every lane's */
            const uint8_t *slot = ring + (size_t)(kc % SMALLM_SLOTS) * SMALLM_SLOT;
            uint32_t bf[4][4];
            /* rows g (tile 0) and g + 8 (tile 1); scale words at row * 4 */
            nvfp4_sm90_dequant_chunk(slot, 32, slot + 512, g, g * 4, (g + 8) * 4, sel_block, bf);
            const int k0 = kc * 64;
            if (kc < num_full) {
#pragma unroll
                for (int kb = 0; kb < 4; kb++) {
                    uint32_t a[4];
                    SMALLM_LOAD_A(a, k0 + kb * 16);
                    ptx_mma_16816(acc0, a, bf[kb][0], bf[kb][2]);
                    ptx_mma_16816(acc1, a, bf[kb][1], bf[kb][3]);
                }
            } else { /* K % 64 == 32: two blocks */
#pragma unroll
                for (int kb = 0; kb < 2; kb++) {
                    uint32_t a[4];
                    SMALLM_LOAD_A(a, k0 + kb * 16);
                    ptx_mma_16816(acc0, a, bf[kb][0], bf[kb][2]);
                    ptx_mma_16816(acc1, a, bf[kb][1], bf[kb][3]);
                }
            }
            __syncwarp(); /* every lane is done with the slot before it is refilled */
        }
        PTX_CP_ASYNC_WAIT(0);
        /* epilogue: acc[j][0..1] = (m = g, n = n0 + 8j + 2t + {0,1}); [2..3]: m = g + 8 */
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const float *acc = j ? acc1 : acc0;
            const int n = n0 + 8 * j + 2 * t;
            const float b0 = p.bias ? p.bias[n] : 0.0f, b1 = p.bias ? p.bias[n + 1] : 0.0f;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int m = g + 8 * h;
                if (m >= p.m) continue;
                const size_t o = (size_t)m * (size_t)p.n + (size_t)n;
                const float v0 = acc[2 * h], v1 = acc[2 * h + 1];
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
}

#undef SMALLM_LOAD_A
