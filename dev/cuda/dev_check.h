/* dev_check.h -- the dev/cuda programs' one CUDA-error check: a failed
 * runtime call prints where and exits 2 (these are programs, not library
 * code).  C and CUDA C++. */
#ifndef NVFP4_DEV_CHECK_H
#define NVFP4_DEV_CHECK_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#define DEV_CUDA_OK(call)                                                                          \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

#endif
