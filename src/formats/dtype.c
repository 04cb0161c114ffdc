/* dtype.c -- element types: sizes and their safetensors spellings. */
#include <string.h>

#include "internal.h"

static const struct {
    const char *name;
    size_t size;
} dtype_table[NVFP4_DTYPE_COUNT_] = {
    [NVFP4_DTYPE_INVALID] = {"INVALID", 0},
    [NVFP4_DTYPE_BOOL] = {"BOOL", 1},
    [NVFP4_DTYPE_U8] = {"U8", 1},
    [NVFP4_DTYPE_I8] = {"I8", 1},
    [NVFP4_DTYPE_U16] = {"U16", 2},
    [NVFP4_DTYPE_I16] = {"I16", 2},
    [NVFP4_DTYPE_U32] = {"U32", 4},
    [NVFP4_DTYPE_I32] = {"I32", 4},
    [NVFP4_DTYPE_U64] = {"U64", 8},
    [NVFP4_DTYPE_I64] = {"I64", 8},
    [NVFP4_DTYPE_F8_E4M3] = {"F8_E4M3", 1},
    [NVFP4_DTYPE_F8_E5M2] = {"F8_E5M2", 1},
    [NVFP4_DTYPE_BF16] = {"BF16", 2},
    [NVFP4_DTYPE_F16] = {"F16", 2},
    [NVFP4_DTYPE_F32] = {"F32", 4},
    [NVFP4_DTYPE_F64] = {"F64", 8},
};

static int dtype_valid(nvfp4_dtype dtype)
{
    return (int)dtype > (int)NVFP4_DTYPE_INVALID && (int)dtype < (int)NVFP4_DTYPE_COUNT_;
}

size_t nvfp4_dtype_size(nvfp4_dtype dtype)
{
    return dtype_valid(dtype) ? dtype_table[dtype].size : 0;
}

const char *nvfp4_dtype_name(nvfp4_dtype dtype)
{
    return dtype_valid(dtype) ? dtype_table[dtype].name : "INVALID";
}

nvfp4_dtype nvfp4_dtype_from_name(const char *name)
{
    if (!name) return NVFP4_DTYPE_INVALID;
    for (int d = NVFP4_DTYPE_INVALID + 1; d < NVFP4_DTYPE_COUNT_; d++)
        if (strcmp(name, dtype_table[d].name) == 0) return (nvfp4_dtype)d;
    return NVFP4_DTYPE_INVALID;
}
