/* internal.h -- helpers shared by the library's sources; not installed. */
#ifndef NVFP4_INTERNAL_H
#define NVFP4_INTERNAL_H

#include <string.h>

#include "nvfp4.h"

#if defined(__GNUC__)
#define NVFP4_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define NVFP4_PRINTF(f, a)
#endif

/* Record a failure message (printf-style) for nvfp4_last_error() and return
 * `status`, so call sites read: return nvfp4_fail(NVFP4_ERR_IO, "...", ...). */
nvfp4_status nvfp4_fail(nvfp4_status status, const char *fmt, ...) NVFP4_PRINTF(2, 3);

/* Run fn(ctx, begin, end) over [0, n) split into contiguous chunks across up
 * to nthreads threads (0 = all cores).  Chunks are at least `grain` items.
 * Returns NVFP4_OK, or an error if a thread could not be started (then the
 * remaining work is done on the calling thread, so the result is complete). */
typedef void (*nvfp4_range_fn)(void *ctx, int64_t begin, int64_t end);
nvfp4_status nvfp4_parallel_for(int64_t n, int64_t grain, int nthreads, nvfp4_range_fn fn,
                                void *ctx);

/* Validate a GEMM operand (shape, cols % 16, pointers, enums); the message
 * starts with `fn` and names the operand `which`.  Shared by every backend. */
nvfp4_status nvfp4_check_gemm_operand(const nvfp4_tensor *t, const char *fn, const char *which);

/* Every argument check nvfp4_gemm_cpu and nvfp4_gemm_ref share: args, both
 * operands, equal K, a known model, raw or out given.  fn names the caller. */
nvfp4_status nvfp4_check_gemm_args(const nvfp4_gemm_args *args, const char *fn);

/* FP32 <-> bits without rounding: the one definition, inline for hot loops
 * (nvfp4_f32_bits / nvfp4_f32_from_bits are these, exported). */
static inline uint32_t nvfp4_bits_of_f32(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

static inline float nvfp4_f32_of_bits(uint32_t u)
{
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* Overflow-checked size arithmetic: return 0 on overflow, else 1. */
int nvfp4_mul_size(size_t a, size_t b, size_t *out);

/* The per-tensor scale of an input holding a NaN: ComfyUI computes
 * torch.amax(torch.abs(x)).float() / 2688, and torch (2.15, x86 CPU) returns
 * the canonical NaN 0x7FC00000 from that amax for BF16 and F32 inputs (abs
 * already canonicalizes BF16 NaNs) and 0x7FFFFFFF for F16 ones, whatever the
 * NaNs' signs and payloads; dividing it by 2688 leaves it as it is. */
static inline uint32_t nvfp4_amax_nan_bits(nvfp4_dtype dtype)
{
    return dtype == NVFP4_DTYPE_F16 ? 0x7FFFFFFFu : 0x7FC00000u;
}

#endif
