/* common.cuh -- what the sm90 kernels and their launchers share: the
 * kernel parameters, the stream-K work list, the weight dequantization. */
#ifndef NVFP4_CUDA_SM90_COMMON_CUH
#define NVFP4_CUDA_SM90_COMMON_CUH

#include <cuda.h>
#include <stdint.h>

#include "cuda/epilogue.cuh"
#include "cuda/ptx.cuh"

/* What every GEMM kernel takes, first in its parameters: the operands'
 * per-tensor scales (device pointers), the outputs and the shape. */
typedef struct nvfp4_sm90_gemm_io {
    const float *a_scale2; /* device per-tensor scales */
    const float *b_scale2;
    const float *bias;     /* optional, N floats */
    float *raw;            /* optional M x N FP32 accumulators */
    uint16_t *out;         /* optional M x N BF16 */
    int m, n, k;
    int ncb;               /* 512-byte scale chunks per 128-row group = roundup(K/16,4)/4 */
    int stages;            /* pipeline depth */
    int chunks_per_slice;  /* K slices: 64-element groups per slice (>= all of them: one chain) */
} nvfp4_sm90_gemm_io;

/* The wgmma kernel's parameters (passed by value; the tensor maps must
 * live in parameter space, hence __grid_constant__). */
typedef struct nvfp4_sm90_params {
    nvfp4_sm90_gemm_io io;
    CUtensorMap tmap_act;   /* FP16 activations [M][K] (operand order), box {64, bn}, 128B swizzle */
    CUtensorMap tmap_codes; /* weight codes [N][K/2] bytes, box {32, 64*nc} */
    CUtensorMap tmap_scales; /* weight scales as rows of 256 bytes, box {256, 2 ksub}: the
                                512-byte chunks of a stage */
    CUtensorMap tmap_act3;  /* the activations as {64, M, K/64} (strides 2K, 128 bytes),
                               box {64, bn, ksub}: a stage's chunks in one copy */
    int num_at;    /* activation tiles */
    int64_t num_tiles;
    /* Stream-K (docs/KERNEL.md, design item 11): tiles [sk_tile0, num_tiles)
     * are shared out by K chunks, evenly over the grid (= num_tiles: none).
     * A tile split between two CTAs is one chain: the CTA with its first
     * chunks stores the FP32 accumulators in its slot of sk_acc and counts
     * its consumer warps into sk_flags (zeroed before the launch); the
     * other continues the chain from them. */
    int64_t sk_tile0;
    float *sk_acc;
    unsigned *sk_flags;
    int out_staged; /* out is 16-byte aligned: the wgmma kernel stores it staged (SM90_EPI_OUT) */
    int act3d;     /* a stage's chunks of activations as one 3-D box (tmap_act3) */
} nvfp4_sm90_params;

/* One CTA's work list in the persistent wgmma kernel, in order: its
 * data-parallel tiles (blockIdx.x + j * gridDim.x below sk_tile0), then of
 * its even share [u0, u1) of the stream-K region's (tile, chunk) units: the
 * first chunks of the tile its share ends in (the head piece: first, so
 * that it is ready early), its whole tiles, and last the remaining chunks
 * of the tile its share starts in (the tail piece, continuing the previous
 * CTA's head piece).  With at least as many stream-K tiles as CTAs every
 * share holds a whole tile's chunks, so a tile is split at most once and
 * the tail never starts before the head it continues has had its time. */
typedef struct nvfp4_sm90_work {
    int64_t dp;                   /* data-parallel tiles */
    int64_t head, whole0, whole1, tail; /* tiles (head, tail: -1 if none) */
    int head_end, tail_begin;     /* the head piece is chunks [0, head_end), the tail [tail_begin, KC) */
    int64_t items;
} nvfp4_sm90_work;

static __device__ __forceinline__ nvfp4_sm90_work nvfp4_sm90_work_of(const nvfp4_sm90_params &p, int num_kc,
                                                                     int sk_capable)
{
    nvfp4_sm90_work w;
    /* (a compile-time 0 folds the list to the data-parallel tiles) */
    const int64_t g = blockIdx.x, G = gridDim.x, t0 = sk_capable ? p.sk_tile0 : p.num_tiles;
    w.dp = t0 > g ? (t0 - g + G - 1) / G : 0;
    w.head = w.tail = -1;
    w.whole0 = w.whole1 = 0;
    w.head_end = w.tail_begin = 0;
    if (t0 < p.num_tiles) {
        /* fewer than 2 G tiles of K / 64 chunks each: units * G fits easily */
        const int64_t units = (p.num_tiles - t0) * num_kc;
        const int64_t u0 = units * g / G, u1 = units * (g + 1) / G;
        const int64_t a = u0 / num_kc, b = u1 / num_kc;
        const int oa = (int)(u0 % num_kc), ob = (int)(u1 % num_kc);
        if (oa > 0) {
            w.tail = t0 + a;
            w.tail_begin = oa;
        }
        w.whole0 = t0 + a + (oa > 0);
        w.whole1 = t0 + b;
        if (ob > 0) {
            w.head = t0 + b;
            w.head_end = ob;
        }
    }
    w.items = w.dp + (w.head >= 0) + (w.whole1 - w.whole0) + (w.tail >= 0);
    return w;
}

/* Item i of the list: its tile and K chunks [*kb, *ke). */
static __device__ __forceinline__ int64_t nvfp4_sm90_item(const nvfp4_sm90_work &w, int64_t i, int num_kc,
                                                          int *kb, int *ke)
{
    *kb = 0;
    *ke = num_kc;
    if (i < w.dp) return blockIdx.x + i * (int64_t)gridDim.x;
    i -= w.dp;
    if (w.head >= 0) {
        if (i == 0) {
            *ke = w.head_end;
            return w.head;
        }
        i--;
    }
    if (i < w.whole1 - w.whole0) return w.whole0 + i;
    *kb = w.tail_begin;
    return w.tail;
}


/* One 64-element chunk (4 NVFP4 blocks) of weight rows r0 and r0 + 8 as
 * loaded from a pipeline stage, before dequantization: per row and block
 * the code word that holds the lane's two bytes 2t, 2t+1 (the operand
 * order: its fragment's elements 4t..4t+3), and the rows' four scale
 * bytes.  Loaded one chunk ahead of its conversion, so the shared-memory
 * latency hides behind the wgmma wait. */
typedef struct nvfp4_sm90_chunk_raw {
    uint32_t w0[4], w1[4]; /* rows r0 and r0 + 8: block kb's word 2 kb + t / 2 */
    uint32_t s0, s1;       /* the rows' scale bytes of blocks 0..3 */
} nvfp4_sm90_chunk_raw;

/* codes: the chunk's first code byte of tile row 0 (rows row_bytes apart);
 * word_off: the lane's word in a block, 4 * (t / 2); scales: the chunk's
 * 512-byte scale tile; sc_off0/1: the rows' offsets in it. */
static __device__ __forceinline__ nvfp4_sm90_chunk_raw nvfp4_sm90_load_chunk(const uint8_t *codes, int row_bytes,
                                                                              int word_off, const uint8_t *scales,
                                                                              int r0, int sc_off0, int sc_off1)
{
    nvfp4_sm90_chunk_raw r;
    const uint8_t *c0 = codes + r0 * row_bytes + word_off, *c1 = c0 + 8 * row_bytes;
#pragma unroll
    for (int kb = 0; kb < 4; kb++) {
        r.w0[kb] = *(const uint32_t *)(c0 + 8 * kb);
        r.w1[kb] = *(const uint32_t *)(c1 + 8 * kb);
    }
    r.s0 = *(const uint32_t *)(scales + sc_off0);
    r.s1 = *(const uint32_t *)(scales + sc_off1);
    return r;
}

/* Dequantize a loaded chunk into m64k16 A fragments in the operand order
 * (nvfp4_sm90_operand_elem): afrag[kb] are the four f16x2 registers of
 * block kb -- rows r0 / r0+8 x slots {2t, 2t+1} = elements {4t, 4t+2} (the
 * high nibbles of bytes 2t, 2t+1), then slots {2t+8, 2t+9} = {4t+1, 4t+3}
 * (their low nibbles).  xsel picks the lane's half of each word (t odd:
 * bytes 2, 3).  Exact: e2m1 code as E4M3 (= e2m1 * 2^-6) times the block
 * scale * 64, both exact in FP16, product exact.  The upper halves go to
 * cvt in place (F2FP ... R.H1: no shift). */
static __device__ __forceinline__ void nvfp4_sm90_convert_chunk(const nvfp4_sm90_chunk_raw &r, uint32_t xsel,
                                                                uint32_t (*afrag)[4])
{
    /* FP16 pairs {scale0, scale1} * 64 for blocks 0..3 (sign bits cleared) */
    const uint32_t sixty_four = 0x54005400u; /* FP16 {64, 64} */
    const uint32_t s01_lo = ptx_prmt(r.s0, r.s1, 0x5140u) & 0x7F7F7F7Fu; /* s0b0 s1b0 s0b1 s1b1 */
    const uint32_t s01_hi = ptx_prmt(r.s0, r.s1, 0x7362u) & 0x7F7F7F7Fu; /* s0b2 s1b2 s0b3 s1b3 */
    uint32_t sf[4];
    sf[0] = ptx_hmul2(ptx_e4m3x2_lo_to_f16x2(s01_lo), sixty_four);
    sf[1] = ptx_hmul2(ptx_e4m3x2_hi_to_f16x2(s01_lo), sixty_four);
    sf[2] = ptx_hmul2(ptx_e4m3x2_lo_to_f16x2(s01_hi), sixty_four);
    sf[3] = ptx_hmul2(ptx_e4m3x2_hi_to_f16x2(s01_hi), sixty_four);
#pragma unroll
    for (int kb = 0; kb < 4; kb++) {
        /* x = {row0 byte 2t, row0 byte 2t+1, row1 byte 2t, row1 byte 2t+1} */
        const uint32_t x = ptx_prmt(r.w0[kb], r.w1[kb], xsel);
        /* Each nibble s.e1e0.m as an E4M3 byte s.0e1e0.m00 = e2m1 * 2^-6:
         * high nibbles (elements 4t, 4t+2) and low nibbles (4t+1, 4t+3). */
        uint32_t hi, lo;
        nvfp4_codes_to_e4m3(x, &hi, &lo);
        /* row 0 times {s0, s0}, row 1 times {s1, s1} */
        afrag[kb][0] = ptx_hmul2_by_lo(ptx_e4m3x2_lo_to_f16x2(hi), sf[kb]);
        afrag[kb][1] = ptx_hmul2_by_hi(ptx_e4m3x2_hi_to_f16x2(hi), sf[kb]);
        afrag[kb][2] = ptx_hmul2_by_lo(ptx_e4m3x2_lo_to_f16x2(lo), sf[kb]);
        afrag[kb][3] = ptx_hmul2_by_hi(ptx_e4m3x2_hi_to_f16x2(lo), sf[kb]);
    }
}

/* Half h of an NVFP4 block's operand slots (8h .. 8h+7; its 8 code bytes,
 * its E4M3 scale byte) as 8 FP16 values, o[j] = slots {8h+2j, 8h+2j+1} =
 * elements {4j+h, 4j+2+h}: nibble h of code bytes 2j, 2j+1 (h = 0 the high
 * nibbles).  (e2m1 * 2^-6) * (|scale| * 64), exact (at most 6 * 448). */
static __device__ __forceinline__ void nvfp4_sm90_dequant_half(uint2 w, int h, uint32_t scale_byte, uint32_t o[4])
{
    const uint32_t sb = scale_byte & 0x7Fu;
    /* {scale, scale} * 64 in FP16: exact (at most 448 * 64). */
    const uint32_t sc = ptx_hmul2(ptx_e4m3x2_to_f16x2((uint16_t)(sb | (sb << 8))), 0x54005400u);
    uint32_t e0, e1, unused;
    /* the low nibbles moved up are the high nibbles' E4M3 form */
    nvfp4_codes_to_e4m3(h ? w.x << 4 : w.x, &e0, &unused);
    nvfp4_codes_to_e4m3(h ? w.y << 4 : w.y, &e1, &unused);
    o[0] = ptx_hmul2(ptx_e4m3x2_lo_to_f16x2(e0), sc);
    o[1] = ptx_hmul2(ptx_e4m3x2_hi_to_f16x2(e0), sc);
    o[2] = ptx_hmul2(ptx_e4m3x2_lo_to_f16x2(e1), sc);
    o[3] = ptx_hmul2(ptx_e4m3x2_hi_to_f16x2(e1), sc);
}

/* One NVFP4 block (8 code bytes, its E4M3 scale byte) as its 16 FP16
 * operand slots (two halves above).  The shared-memory weight
 * dequantization of the SS kernel uses it. */
static __device__ __forceinline__ void nvfp4_sm90_dequant_block(uint2 w, uint32_t scale_byte, uint32_t o[8])
{
    nvfp4_sm90_dequant_half(w, 0, scale_byte, o);
    nvfp4_sm90_dequant_half(w, 1, scale_byte, o + 4);
}

/* The wgmma kernels' epilogue: acc[i] of a consumer thread (lane 4 g + t,
 * tile-local weight row R0 = its warp's 16 rows + g) is output (n, m) with
 * n = N0 + R0 + 8 ((i >> 1) & 1), m = M0 + 8 (i >> 2) + 2 t + (i & 1);
 * raw gets the accumulator, out BF16(alpha * acc (+ bias)), both RNE.  A
 * macro so the accumulator array stays in registers (BN is a constant). */
#define NVFP4_SM90_EPILOGUE(P, ACC, BN, N0, M0, R0, T, ALPHA) NVFP4_SM90_EPILOGUE_X(P, ACC, BN, N0, M0, R0, T, ALPHA, 1)
/* ... with DO_OUT 0: raw only (the wgmma kernel stores out staged). */
#define NVFP4_SM90_EPILOGUE_X(P, ACC, BN, N0, M0, R0, T, ALPHA, DO_OUT)                             \
    _Pragma("unroll") for (int half_ = 0; half_ < 2; half_++) {                                    \
        const int n_ = (N0) + (R0) + 8 * half_;                                                    \
        if (n_ >= (P).io.n) continue;                                                                 \
        const float bias_ = (P).io.bias ? (P).io.bias[n_] : 0.0f;                                        \
        _Pragma("unroll") for (int i_ = 0; i_ < (BN) / 2; i_++) {                                  \
            if (((i_ >> 1) & 1) != half_) continue;                                                \
            const int m_ = (M0) + 8 * (i_ >> 2) + 2 * (T) + (i_ & 1);                              \
            if (m_ >= (P).io.m) continue;                                                             \
            const size_t o_ = (size_t)m_ * (size_t)(P).io.n + (size_t)n_;                             \
            if ((P).io.raw) (P).io.raw[o_] = (ACC)[i_];                                                  \
            if ((DO_OUT) && (P).io.out) (P).io.out[o_] = nvfp4_dev_out_bf16((ACC)[i_], (ALPHA), (P).io.bias, bias_); \
        }                                                                                          \
    }

#endif
