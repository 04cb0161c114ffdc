/* nvfp4_testing.h -- testing hooks of libnvfp4; not installed, not exported
 * from the shared library (tests and tools link the static archive).
 * They change process-wide state and are not thread-safe with running GEMMs. */
#ifndef NVFP4_TESTING_H
#define NVFP4_TESTING_H

#include "nvfp4.h"

/* Force the CPU GEMM's SIMD path by name ("portable", "avx2", "avx512") or
 * NULL for automatic.  @return NVFP4_ERR_UNSUPPORTED if the CPU lacks it,
 * NVFP4_ERR_INVALID_ARGUMENT for an unknown name. */
nvfp4_status nvfp4_cpu_force_simd(const char *name);

/* Allow (1, the default) or forbid (0) the VNNI variant of the AVX-512
 * kernel, so that tests can run both on a VNNI machine. */
void nvfp4_cpu_allow_vnni(int allow);

#endif
