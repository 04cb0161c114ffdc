/* ptx.cuh -- thin wrappers over the sm_90a PTX the GEMM uses: mbarriers,
 * TMA (cp.async.bulk[.tensor]), wgmma fences, setmaxnreg, e4m3 conversion.
 * Each wrapper is one or two instructions; the PTX ISA is the documentation. */
#ifndef NVFP4_CUDA_PTX_CUH
#define NVFP4_CUDA_PTX_CUH

#include <stdint.h>

#define NVFP4_DEV static __device__ __forceinline__

NVFP4_DEV uint32_t ptx_smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* ---- mbarrier ---------------------------------------------------------- */
NVFP4_DEV void ptx_mbar_init(uint64_t *bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(ptx_smem_addr(bar)), "r"(count)
                 : "memory");
}

/* Make mbarrier.init visible to the async proxy (TMA completes on it). */
NVFP4_DEV void ptx_fence_mbar_init(void)
{
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

NVFP4_DEV void ptx_mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(ptx_smem_addr(bar)),
                 "r"(bytes)
                 : "memory");
}

NVFP4_DEV void ptx_mbar_arrive(uint64_t *bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(ptx_smem_addr(bar)) : "memory");
}

/* Spin until the phase with parity `parity` of the barrier has completed. */
NVFP4_DEV void ptx_mbar_wait(uint64_t *bar, uint32_t parity)
{
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT_%=;\n"
        "}\n" ::"r"(ptx_smem_addr(bar)),
        "r"(parity)
        : "memory");
}

/* Order this thread's generic-proxy shared-memory accesses before later
 * async-proxy (TMA) accesses that another thread issues after a barrier. */
NVFP4_DEV void ptx_fence_proxy_async(void) { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

/* ---- TMA --------------------------------------------------------------- */
/* 2D tiled tensor copy global -> shared, completion counted on `bar`. */
NVFP4_DEV void ptx_tma_load_2d(void *dst, const void *tmap, uint64_t *bar, int32_t x, int32_t y)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4}], [%2];" ::"r"(ptx_smem_addr(dst)),
        "l"(tmap), "r"(ptx_smem_addr(bar)), "r"(x), "r"(y)
        : "memory");
}

/* 3D tiled tensor copy global -> shared, completion counted on `bar`. */
NVFP4_DEV void ptx_tma_load_3d(void *dst, const void *tmap, uint64_t *bar, int32_t x, int32_t y, int32_t z)
{
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(ptx_smem_addr(dst)),
        "l"(tmap), "r"(ptx_smem_addr(bar)), "r"(x), "r"(y), "r"(z)
        : "memory");
}

/* 4D tiled tensor copy global -> shared, completion counted on `bar`. */
NVFP4_DEV void ptx_tma_load_4d(void *dst, const void *tmap, uint64_t *bar, int32_t x, int32_t y, int32_t z,
                               int32_t w)
{
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4, %5, %6}], [%2];" ::"r"(ptx_smem_addr(dst)),
        "l"(tmap), "r"(ptx_smem_addr(bar)), "r"(x), "r"(y), "r"(z), "r"(w)
        : "memory");
}

/* ldmatrix: four 8x8 matrices of 16-bit elements from shared memory (lane l
 * gives the 16-byte aligned address of row l % 8 of matrix l / 8); lane (g,
 * t) receives elements 2t, 2t + 1 of row g of matrix i in r[i]. */
NVFP4_DEV void ptx_ldsm_x4(uint32_t addr, uint32_t r[4])
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

/* 1D bulk copy of `bytes` (multiple of 16, 16-byte aligned ends). */
NVFP4_DEV void ptx_bulk_load(void *dst, const void *src, uint32_t bytes, uint64_t *bar)
{
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
            ptx_smem_addr(dst)),
        "l"(src), "r"(bytes), "r"(ptx_smem_addr(bar))
        : "memory");
}

/* ---- cluster ------------------------------------------------------------- */
NVFP4_DEV uint32_t ptx_cluster_rank(void)
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

/* Every thread of every CTA of the cluster meets (release / acquire): after
 * it, the cluster's mbarriers are initialised and may be arrived on remotely.
 * Not .aligned: the threads of a warp may arrive apart (a producer warp's
 * issuing lane after the others). */
NVFP4_DEV void ptx_cluster_sync(void)
{
    asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
}

/* Arrive on the mbarrier at the same shared offset as `bar` in cluster CTA
 * `rank` (release at cluster scope: this thread's earlier shared reads of
 * the stage are done before that CTA's producer overwrites it).
 * NOTES: a TMA ring freed this way runs ~3x slower than with
 * `.relaxed.cluster` arrivals (dev/cuda/probe_rates ring, H200). */
NVFP4_DEV void ptx_mbar_arrive_cluster(uint64_t *bar, uint32_t rank)
{
    asm volatile(
        "{\n"
        ".reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n"
        "}\n" ::"r"(ptx_smem_addr(bar)),
        "r"(rank)
        : "memory");
}

/* ptx_tma_load_2d, written to the same shared offset of every CTA of the
 * cluster in `mask` and counted on each one's barrier at `bar`'s offset. */
NVFP4_DEV void ptx_tma_load_2d_multicast(void *dst, const void *tmap, uint64_t *bar, int32_t x, int32_t y,
                                         uint16_t mask)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(ptx_smem_addr(dst)),
        "l"(tmap), "r"(ptx_smem_addr(bar)), "r"(x), "r"(y), "h"(mask)
        : "memory");
}

NVFP4_DEV void ptx_prefetch_tmap(const void *tmap)
{
    asm volatile("prefetch.tensormap [%0];" ::"l"(tmap) : "memory");
}

/* ---- named barrier ------------------------------------------------------- */
/* Barrier `id` (1..15; 0 is __syncthreads') over `threads` threads, a
 * multiple of 32: a subset of the CTA's warps meets without the others. */
NVFP4_DEV void ptx_bar_sync(uint32_t id, uint32_t threads)
{
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
/* Arrive at barrier `id` without waiting: the producer's half of a
 * producer / consumer pair whose consumer runs ptx_bar_sync on the same id
 * and count.  When the barrier completes, this thread's earlier memory
 * accesses are performed for every participant (the PTX barrier's
 * guarantee), so a shared-memory store before the arrive is seen by a load
 * after the consumer's sync. */
NVFP4_DEV void ptx_bar_arrive(uint32_t id, uint32_t threads)
{
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

/* ---- mma.sync ------------------------------------------------------------ */
/* One m16n8k16 step, FP16 operands, FP32 accumulator d (in and out): one
 * sm90 k16 step (docs/ORACLE.md). */
NVFP4_DEV void ptx_mma_16816_regs(float *d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                   uint32_t b0, uint32_t b1)
{
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* ---- programmatic dependent launch --------------------------------------- */
/* Let the next kernel on the stream (launched with the programmatic stream
 * serialization attribute) start now; it still waits in griddep_wait(). */
NVFP4_DEV void ptx_griddep_launch_dependents(void) { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
/* Wait until the previous kernel on the stream has completed and its writes
 * are visible (returns at once when this launch depends on nothing). */
NVFP4_DEV void ptx_griddep_wait(void) { asm volatile("griddepcontrol.wait;" ::: "memory"); }

/* ---- epilogue ------------------------------------------------------------ */
/* Two 8x8 b16 matrices from mma accumulator fragments (lane 4 g + t holds
 * row g, columns 2t and 2t + 1 of each) stored transposed: lanes 0-7 give
 * the shared addresses of matrix 0's stored rows (its columns), lanes 8-15
 * matrix 1's, 16 bytes each. */
NVFP4_DEV void ptx_stmatrix_x2_trans(uint32_t smem_addr, uint32_t f0, uint32_t f1)
{
    asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};" ::"r"(smem_addr), "r"(f0), "r"(f1)
                 : "memory");
}

/* ---- inter-CTA hand-off (stream-K) ---------------------------------------- */
/* A counter other CTAs of the grid wait on: release add (after a
 * __threadfence() by every writer), acquire load. */
NVFP4_DEV void ptx_red_release_gpu_add(unsigned *p, unsigned v)
{
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
NVFP4_DEV unsigned ptx_ld_acquire_gpu(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* ---- warpgroup ---------------------------------------------------------- */
NVFP4_DEV void ptx_wgmma_fence(void) { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
NVFP4_DEV void ptx_wgmma_commit(void) { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
NVFP4_DEV void ptx_wgmma_wait0(void) { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }
NVFP4_DEV void ptx_wgmma_wait1(void) { asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory"); }
NVFP4_DEV void ptx_wgmma_wait2(void) { asm volatile("wgmma.wait_group.sync.aligned 2;" ::: "memory"); }

/* Keep the compiler from moving accumulator reads/writes across a wgmma
 * boundary (the registers are in flight until wgmma.wait_group). */
NVFP4_DEV void ptx_fence_reg(float &r) { asm volatile("" : "+f"(r)::"memory"); }
NVFP4_DEV void ptx_fence_reg_u32(uint32_t &r) { asm volatile("" : "+r"(r)::"memory"); }

NVFP4_DEV void ptx_setmaxnreg_dec_40(void) { asm volatile("setmaxnreg.dec.sync.aligned.u32 40;"); }
NVFP4_DEV void ptx_setmaxnreg_inc_232(void) { asm volatile("setmaxnreg.inc.sync.aligned.u32 232;"); }
/* ... to N registers a thread (a multiple of 8 in [24, 256]) */
template <int N> NVFP4_DEV void ptx_setmaxnreg_inc(void)
{
    static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg: a multiple of 8 in [24, 256]");
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}

/* Shared-memory matrix descriptor for wgmma: K-major tile written by TMA
 * with the 128-byte swizzle (rows of 128 bytes, 8-row groups 1024 bytes
 * apart).  Bits: start>>4 [0,14), LBO>>4 [16,30) (unused here), SBO>>4
 * [32,46), layout 1 = 128B swizzle [62,64). */
NVFP4_DEV uint64_t ptx_desc_sw128(uint32_t smem_addr)
{
    uint64_t d = (uint64_t)((smem_addr & 0x3FFFF) >> 4);
    d |= (uint64_t)1 << 16;
    d |= (uint64_t)(1024 >> 4) << 32;
    d |= (uint64_t)1 << 62;
    return d;
}

/* ---- conversions -------------------------------------------------------- */
/* Two E4M3 bytes (low byte -> low half) to two FP16, exact. */
NVFP4_DEV uint32_t ptx_e4m3x2_to_f16x2(uint16_t two)
{
    uint32_t out;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(out) : "h"(two));
    return out;
}

/* Bytes 0, 1 (_lo) or 2, 3 (_hi) of a word, two E4M3 values, to two FP16,
 * exact: one F2FP each (the _hi form reads the upper half in place, no
 * shift: F2FP.F16.E4M3.UNPACK_B R, R.H1). */
NVFP4_DEV uint32_t ptx_e4m3x2_lo_to_f16x2(uint32_t four)
{
    uint32_t out;
    asm("{.reg .b16 l, h;\n mov.b32 {l, h}, %1;\n cvt.rn.f16x2.e4m3x2 %0, l;\n}" : "=r"(out) : "r"(four));
    return out;
}
NVFP4_DEV uint32_t ptx_e4m3x2_hi_to_f16x2(uint32_t four)
{
    uint32_t out;
    asm("{.reg .b16 l, h;\n mov.b32 {l, h}, %1;\n cvt.rn.f16x2.e4m3x2 %0, h;\n}" : "=r"(out) : "r"(four));
    return out;
}

/* Four hi-first code bytes x -> the E4M3 bytes s.0e1e0.m00 = e2m1 * 2^-6
 * (subnormals included) of their nibbles: *hi the high nibbles (elements
 * 2i, in byte i), *lo the low nibbles (elements 2i+1).  cvt e4m3x2 converts
 * a pair of them exactly; times 64 * |scale| the FP16 product is exact. */
NVFP4_DEV void nvfp4_codes_to_e4m3(uint32_t x, uint32_t *hi, uint32_t *lo)
{
    *hi = (x & 0x80808080u) | ((x >> 2) & 0x1C1C1C1Cu);
    *lo = ((x << 4) & 0x80808080u) | ((x << 2) & 0x1C1C1C1Cu);
}

NVFP4_DEV uint32_t ptx_hmul2(uint32_t a, uint32_t b)
{
    uint32_t d;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}

/* a * {b.lo, b.lo} and a * {b.hi, b.hi}: ptxas folds the broadcast into
 * the HMUL2 operand (R.H0_H0 / R.H1_H1 in SASS), so no prmt is issued. */
NVFP4_DEV uint32_t ptx_hmul2_by_lo(uint32_t a, uint32_t b)
{
    uint32_t d;
    asm("{.reg .b16 l, h;\n .reg .b32 t;\n mov.b32 {l, h}, %2;\n mov.b32 t, {l, l};\n mul.rn.f16x2 %0, %1, t;\n}"
        : "=r"(d)
        : "r"(a), "r"(b));
    return d;
}
NVFP4_DEV uint32_t ptx_hmul2_by_hi(uint32_t a, uint32_t b)
{
    uint32_t d;
    asm("{.reg .b16 l, h;\n .reg .b32 t;\n mov.b32 {l, h}, %2;\n mov.b32 t, {h, h};\n mul.rn.f16x2 %0, %1, t;\n}"
        : "=r"(d)
        : "r"(a), "r"(b));
    return d;
}

NVFP4_DEV uint32_t ptx_prmt(uint32_t a, uint32_t b, uint32_t sel)
{
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
}

/* A block's eight FP16 pairs in k order (h[i] = elements 2i, 2i+1) to the
 * GEMM's operand order (nvfp4_sm90_operand_elem): o[i] = elements 4i, 4i+2
 * and o[4 + i] = 4i+1, 4i+3. */
NVFP4_DEV void nvfp4_pairs_to_operand_order(const uint32_t h[8], uint32_t o[8])
{
#pragma unroll
    for (int i = 0; i < 4; i++) {
        o[i] = ptx_prmt(h[2 * i], h[2 * i + 1], 0x5410u);
        o[4 + i] = ptx_prmt(h[2 * i], h[2 * i + 1], 0x7632u);
    }
}

/* The high byte of the FP16 value of each E2M1 magnitude 0..7 (the low
 * byte is always zero): 0, .5, 1, 1.5, 2, 3, 4, 6. */
#define NVFP4_E2M1_F16HI_0_3 0x3E3C3800u
#define NVFP4_E2M1_F16HI_4_7 0x46444240u

/* One hi-first code byte (element 2i in bits 7..4, 2i+1 in bits 3..0) to an
 * FP16 pair: element 2i in the low half, 2i+1 in the high half. */
NVFP4_DEV uint32_t nvfp4_codebyte_to_f16x2(uint32_t b)
{
    uint32_t sel = (b & 0x70u) | ((b & 0x7u) << 12);
    uint32_t mag = ptx_prmt(NVFP4_E2M1_F16HI_0_3, NVFP4_E2M1_F16HI_4_7, sel);
    return mag | ((b & 0x80u) << 8) | ((b & 0x8u) << 28);
}

/* FP16 pair {s, s} of an E4M3 block scale with its sign bit ignored. */
NVFP4_DEV uint32_t nvfp4_scale_to_f16x2(uint32_t byte)
{
    uint32_t m = byte & 0x7Fu;
    return ptx_e4m3x2_to_f16x2((uint16_t)(m | (m << 8)));
}

#endif
