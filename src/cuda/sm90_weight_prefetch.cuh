/* sm90_weight_prefetch.cuh -- the L2 prefetch of a weight's first K columns,
 * issued by the kernel that runs just before a GEMM on the stream (the fused
 * linear's quantizer; the GEMM's activation pre-pass).
 *
 * Why: that kernel reads and writes little, so DRAM idles while it runs, and
 * the GEMM's CTAs cannot start beside it (the register kernels take 57-64 K
 * of an SM's registers, the 64 x 128 wgmma tile 225 KB of its shared
 * memory).  The GEMM's first weight stages then cost a DRAM round trip after
 * the previous kernel ends; prefetched, they are L2 hits.  A hint only: no
 * byte the GEMM reads changes, so no output bit does.
 *
 * Which bytes: every GEMM kernel starts each weight row at K = 0 (stream-K
 * CTAs excepted), so the first `cols` K columns of every row -- cols / 2 code
 * bytes from each row's start ([N][K/2], K = roundup(k, 16)) and, of the
 * 128x4-tiled scales, the first cols / 64 tiles of each 128-row group (512
 * bytes a tile, (K / 64) tiles a group). */
#ifndef NVFP4_CUDA_SM90_WEIGHT_PREFETCH_CUH
#define NVFP4_CUDA_SM90_WEIGHT_PREFETCH_CUH

#include <stdint.h>

#include "nvfp4.h"

typedef struct nvfp4_w_prefetch {
    const uint8_t *codes;  /* NULL: nothing to prefetch */
    const uint8_t *scales; /* 128x4-tiled */
    int64_t rows;          /* weight rows N */
    int64_t row_bytes;     /* K / 2 */
    int64_t groups;        /* ceil(N / 128) */
    int64_t group_bytes;   /* K / 64 tiles of 512 bytes */
    uint32_t code_bytes;   /* from each row's start; a multiple of 16, at most row_bytes */
    uint32_t scale_bytes;  /* from each group's start; a multiple of 512, at most group_bytes */
    int lines;             /* 1: one prefetch.global.L2 per 128-byte line (the LSU) instead of
                            * one bulk prefetch per row (the TMA unit) */
} nvfp4_w_prefetch;

/* The prefetch of weight w's first `cols` K columns (rounded down to 64; 0 or
 * less, or no weight: none). */
static inline nvfp4_w_prefetch nvfp4_w_prefetch_of(const nvfp4_cuda_operand *w, int64_t cols)
{
    nvfp4_w_prefetch pf;
    pf.codes = pf.scales = 0;
    pf.rows = pf.row_bytes = pf.groups = pf.group_bytes = 0;
    pf.code_bytes = pf.scale_bytes = 0;
    pf.lines = 0;
    if (!w || !w->codes || !w->scales || w->rows < 1 || w->cols < 64 || w->cols % 16 != 0) return pf;
    if (cols > w->cols) cols = w->cols;
    cols = cols / 64 * 64;
    if (cols < 64 || cols > INT32_MAX / 16) return pf;
    pf.codes = w->codes;
    pf.scales = w->scales;
    pf.rows = w->rows;
    pf.row_bytes = w->cols / 2;
    pf.groups = (w->rows + 127) / 128;
    pf.group_bytes = (w->cols + 63) / 64 * 512;
    /* a row starts 16-byte aligned or 8 past (K / 2 is a multiple of 8; the
     * GEMM's tensor maps need a 16-byte aligned base): the device aligns the
     * start down, so the range stays inside the rows */
    pf.code_bytes = (uint32_t)(cols / 2 / 16 * 16);
    pf.scale_bytes = (uint32_t)(cols / 64 * 512);
    if (pf.code_bytes == 0) pf.codes = 0;
    return pf;
}

#ifdef __CUDACC__
#include "cuda/ptx.cuh"

/* Thread t of n issues its share: one bulk prefetch a code row or scale
 * group, rows first; or with pf.lines, one line prefetch per 128 bytes
 * (whole lines inside each range). */
static __device__ __forceinline__ void nvfp4_w_prefetch_issue(const nvfp4_w_prefetch &pf, int64_t t, int64_t n)
{
    if (!pf.codes) return;
    if (pf.lines) {
        const int64_t per_row = pf.code_bytes / 128, per_group = pf.scale_bytes / 128;
        const int64_t n_code = pf.rows * per_row, total = n_code + pf.groups * per_group;
        for (int64_t i = t; i < total; i += n) {
            const uint8_t *a = i < n_code ? pf.codes + (i / per_row) * pf.row_bytes + (i % per_row) * 128
                                          : pf.scales + ((i - n_code) / per_group) * pf.group_bytes +
                                                ((i - n_code) % per_group) * 128;
            ptx_prefetch_l2_line(a);
        }
        return;
    }
    for (int64_t i = t; i < pf.rows + pf.groups; i += n) {
        if (i < pf.rows) {
            const uintptr_t a = (uintptr_t)(pf.codes + i * pf.row_bytes) & ~(uintptr_t)15;
            ptx_prefetch_l2_bulk((const void *)a, pf.code_bytes);
        } else
            ptx_prefetch_l2_bulk(pf.scales + (i - pf.rows) * pf.group_bytes, pf.scale_bytes);
    }
}
#endif
#endif
