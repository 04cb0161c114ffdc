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

/* Messages quote file contents (tensor names, JSON parser excerpts), which may
 * hold any byte.  Control bytes are written as \xNN, as tensor names are
 * (nvfp4_io_printable), so that a message is always one printable line;
 * UTF-8 stays as it is. */
static void copy_one_line(char *dst, size_t cap, const char *src)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)src; *p; p++) {
        char esc[5];
        size_t n = 0;
        if (*p < 0x20 || *p == 0x7f) {
            esc[0] = '\\'; esc[1] = 'x'; esc[2] = hex[*p >> 4]; esc[3] = hex[*p & 15]; n = 4;
        } else { esc[0] = (char)*p; n = 1; }
        if (o + n >= cap) break;
        for (size_t i = 0; i < n; i++) dst[o++] = esc[i];
    }
    dst[o] = '\0';
}

nvfp4_status nvfp4_fail(nvfp4_status status, const char *fmt, ...)
{
    char raw[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    copy_one_line(last_error, sizeof last_error, raw);
    return status;
}

int nvfp4_mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > (size_t)-1 / a) return 0;
    *out = a * b;
    return 1;
}
