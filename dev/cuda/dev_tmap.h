/* dev_tmap.h -- the dev/cuda programs' one lookup of the driver's
 * cuTensorMapEncodeTiled (the runtime has no wrapper for it): a program
 * that cannot get it prints who asked and exits 2, as dev_check.h's
 * failures do.  CUDA C++ (cuda.h, cuda_runtime.h). */
#ifndef NVFP4_DEV_TMAP_H
#define NVFP4_DEV_TMAP_H

#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                              const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static encode_fn dev_tensor_map_encoder(const char *who)
{
    void *fn = NULL;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
        fprintf(stderr, "%s: no cuTensorMapEncodeTiled\n", who);
        exit(2);
    }
    return (encode_fn)fn;
}

#endif
