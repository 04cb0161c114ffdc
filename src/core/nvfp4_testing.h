/* nvfp4_testing.h -- the testing hooks of libnvfp4, all of them.  They exist
 * only in test builds (compiled with -DNVFP4_TESTING: `make` builds that
 * library as $(BUILD)/testing/libnvfp4.a for the test programs); the shipped
 * library plans and runs by its rules alone.  Each hook changes process-wide
 * state and is not thread-safe with running calls.  Every hook but the
 * quantizer's store delay leaves the results' bits as they are. */
#ifndef NVFP4_TESTING_H
#define NVFP4_TESTING_H

#include "nvfp4.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- CPU backend (src/cpu) ---- */

/* Force the CPU GEMM's SIMD path by name ("portable", "avx2", "avx512") or
 * NULL for automatic.  @return NVFP4_ERR_UNSUPPORTED if the CPU lacks it,
 * NVFP4_ERR_INVALID_ARGUMENT for an unknown name. */
nvfp4_status nvfp4_cpu_force_simd(const char *name);

/* Allow (1, the default) or forbid (0) the VNNI variant of the AVX-512
 * kernel, so that tests can run both on a VNNI machine. */
void nvfp4_cpu_allow_vnni(int allow);

/* ---- sm_90a GEMM planner (src/cuda/sm90/plan.c) ---- */

/* Run kernel `index` of nvfp4_sm90_kernels (its twin for the other kind of
 * activations where the call needs one) wherever it takes the shape, or
 * plan by the rules again (index < 0). */
void nvfp4_sm90_force_kernel(int index);

/* Stream-K where the cost model picks it (0), never (-1), or forced on a
 * grid of `ctas` CTAs (> 0; planning then fails where it cannot apply). */
void nvfp4_sm90_force_stream_k(int ctas);

/* The fused linear's in-kernel A producer wherever a twin is built and its
 * ring fits (1), never (0), or by the rules (-1). */
void nvfp4_sm90_force_inkernel_a(int mode);

/* Loader warps of the register kernels REGM and REGW (1..REGM_LWMAX), or the
 * planned number again (lw <= 0). */
void nvfp4_sm90_force_loaders(int lw);

/* ---- sm_90a kernels (src/cuda/sm90) ---- */

/* Whether nvfp4_linear_cuda() of this shape (x's rows 16-byte aligned) on the
 * current device runs the in-kernel A producer, as the planner and the
 * overrides above stand. */
int nvfp4_sm90_linear_inkernel(int64_t m, int64_t n, int64_t k, int k_slices);

/* The wgmma kernel's BF16 output staged through shared memory where out is
 * 16-byte aligned (staged != 0, the rule), or stored element by element (0). */
void nvfp4_sm90_force_epilogue(int staged);

/* Which kernel the block quantizer runs: -1 its rule, 0 the threshold-table
 * kernel, 1 the one-thread exact kernel, 2 the four-lane exact kernel. */
void nvfp4_q_force_launch(int mode);

/* The quantizer kernels' thread 0 waits this many cycles before it stores
 * the per-tensor scale, and each CTA of the amax pass before it stores its
 * word (0: none), so that a kernel reading them before waiting for their
 * grid reads stale ones.  @return 0, or -1 if the device symbol could not be
 * set. */
int nvfp4_q_delay_stores(long long cycles);

/* The fused linear's A producer alone: device BF16 x (m x k) -> the GEMM's
 * FP16 operands act[r * act_ld + c] (r < m, c < roundup(k,16)), each
 * block's 16 values in the operand order (slot c % 16 holds element
 * nvfp4_sm90_operand_elem(c % 16)).  per_tensor_scale: device static scale,
 * or NULL for the dynamic one, computed with the 4-byte device scratch
 * `amax_scratch`; the scale used goes to *pts_out (device, optional). */
nvfp4_status nvfp4_sm90_produce_operands(const uint16_t *x, int64_t m, int64_t k, const float *per_tensor_scale,
                                         void *amax_scratch, nvfp4_variant variant, uint16_t *act, int64_t act_ld,
                                         float *pts_out, void *stream);

#ifdef __cplusplus
}
#endif
#endif
