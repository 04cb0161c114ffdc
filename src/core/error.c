/* error.c -- status names and the per-thread last-error message. */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

static _Thread_local char last_error[512];

const char *nvfp4_status_str(nvfp4_status status)
{
    switch (status) {
    case NVFP4_OK: return "ok";
    case NVFP4_ERR_INVALID_ARGUMENT: return "invalid argument";
    case NVFP4_ERR_OUT_OF_MEMORY: return "out of memory";
    case NVFP4_ERR_IO: return "I/O error";
    case NVFP4_ERR_MALFORMED: return "malformed file";
    case NVFP4_ERR_NOT_FOUND: return "not found";
    case NVFP4_ERR_UNSUPPORTED: return "unsupported";
    case NVFP4_ERR_NO_DEVICE: return "no CUDA device";
    case NVFP4_ERR_CUDA: return "CUDA error";
    case NVFP4_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

const char *nvfp4_last_error(void) { return last_error; }

void nvfp4_clear_error(void) { last_error[0] = '\0'; }

nvfp4_status nvfp4_fail(nvfp4_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

int nvfp4_mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > (size_t)-1 / a) return 0;
    *out = a * b;
    return 1;
}
