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

/* Map the regular file at path read-only: *map (NULL when the file is
 * shorter than min_len or empty, for the parser to report) and *len, its
 * size.  Errors (NVFP4_ERR_IO) name the path. */
nvfp4_status nvfp4_io_map(const char *path, size_t min_len, void **map, size_t *len);

/* Give back the resident pages around [p, p + n), a range of the mapping
 * [base, base + len) that has been read and is not in use: outward to 2 MiB
 * (a file's page cache may be mapped in 2 MiB folios: one byte read maps
 * them all), within the mapping.  A file converted tensor by tensor then
 * holds about one tensor, not every page it has read.  Only for mappings
 * nvfp4_io_map made (private, read-only: a page dropped is read again if
 * touched again). */
void nvfp4_io_release(const uint8_t *base, size_t len, const void *p, size_t n);

/* The mapping of a safetensors file opened with nvfp4_st_open (base NULL
 * for nvfp4_st_open_memory's caller-owned bytes). */
void nvfp4_st_map_range(const nvfp4_st_file *f, const uint8_t **base, size_t *len);

#endif
