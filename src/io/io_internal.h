/* io_internal.h -- helpers shared by the safetensors sources; not installed. */
#ifndef NVFP4_IO_INTERNAL_H
#define NVFP4_IO_INTERNAL_H

#include <stddef.h>

#include "atomic.h"
#include "internal.h"

/* The safetensors header-length limit: a larger header is rejected as
 * malformed rather than handed to the JSON parser. */
#define NVFP4_ST_MAX_HEADER ((uint64_t)100 << 20)

/* Copy s into buf (len > 4) for an error message: control and non-ASCII bytes
 * become \xNN so the message stays on one line, and long strings are cut
 * with "...".  Returns buf.  s may be NULL ("(null)"). */
const char *nvfp4_io_printable(char *buf, size_t len, const char *s);

/* Number of tensors queued in a writer, and dropping the ones queued after
 * the first `count` (so a multi-tensor add can be undone as a whole). */
size_t nvfp4_st_writer_size(const nvfp4_st_writer *w);
void nvfp4_st_writer_truncate(nvfp4_st_writer *w, size_t count);

/* write(2) all n bytes (EINTR retried): 0 or an errno. */
int nvfp4_write_all(int fd, const void *buf, size_t n);

#endif
