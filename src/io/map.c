/* map.c -- map a whole regular file read-only (the safetensors and GGUF
 * readers both read through a mapping). */
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io_internal.h"

nvfp4_status nvfp4_io_map(const char *path, size_t min_len, void **map, size_t *len)
{
    char shown[256];
    nvfp4_io_printable(shown, sizeof shown, path);
    *map = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block us */
    if (fd < 0) return nvfp4_fail(NVFP4_ERR_IO, "%s: cannot open: %s", shown, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return nvfp4_fail(NVFP4_ERR_IO, "%s: cannot stat: %s", shown, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return nvfp4_fail(NVFP4_ERR_IO, "%s: not a regular file", shown);
    }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return nvfp4_fail(NVFP4_ERR_IO, "%s: too large to map", shown);
    }
    size_t size = (size_t)st.st_size;
    *len = size;
    if (size >= min_len && size > 0) { /* shorter files are the parser's to report */
        void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            *len = 0;
            return nvfp4_fail(NVFP4_ERR_IO, "%s: cannot map %zu bytes: %s", shown, size,
                              strerror(e));
        }
        *map = m;
    }
    close(fd);
    return NVFP4_OK;
}

void nvfp4_io_release(const uint8_t *base, size_t len, const void *p, size_t n)
{
    const uintptr_t window = (uintptr_t)2 << 20;
    long page = sysconf(_SC_PAGESIZE);
    if (!base || !p || page <= 0 || (const uint8_t *)p < base || n > len ||
        (const uint8_t *)p - base > (ptrdiff_t)(len - n))
        return;
    uintptr_t lo = (uintptr_t)base, hi = ((uintptr_t)base + len) & ~((uintptr_t)page - 1);
    uintptr_t a = (uintptr_t)p & ~(window - 1), b = ((uintptr_t)p + n + window - 1) & ~(window - 1);
    a = a < lo ? lo : a; /* the mapping starts page-aligned */
    b = b > hi ? hi : b; /* the last partial page stays */
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}
