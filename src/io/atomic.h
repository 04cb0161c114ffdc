/* atomic.h -- files that appear whole or not at all (src/io/atomic.c).
 *
 * Internal to libnvfp4 and the programs built from this tree with its static
 * archive (the nvfp4 command, its bench, the tests); not installed, not
 * exported from libnvfp4.so.  The library writes every file through these
 * (nvfp4_st_writer_write) and installs no signal handler: a program that
 * wants interrupted writes cleaned up calls nvfp4_atomic_unlink_temps() from
 * its own handlers, as the nvfp4 command does.
 *
 * Bytes go to a temporary file ".NAME.tmp-XXXXXX" beside the target, then
 * fsync, rename over the target: a reader sees the old file or the whole new
 * one.  SIGKILL cannot be caught: a killed writer leaves its temporary file.
 */
#ifndef NVFP4_IO_ATOMIC_H
#define NVFP4_IO_ATOMIC_H

#include <stddef.h>
#include <stdint.h>

#include "nvfp4.h"

typedef struct nvfp4_atomic_file nvfp4_atomic_file;

/* Create the temporary file for `path` now (so an unwritable directory fails
 * before any work; the message says why).  NVFP4_OK with *out set, or an
 * error (*out NULL). */
nvfp4_status nvfp4_atomic_open(nvfp4_atomic_file **out, const char *path);

/* Append n bytes.  NVFP4_OK or NVFP4_ERR_IO. */
nvfp4_status nvfp4_atomic_write(nvfp4_atomic_file *f, const void *data, size_t n);

/* fsync, rename onto the path (keeping the replaced file's mode, else 0644)
 * and free f; on failure the temporary file is removed and the target left
 * as it was.  NVFP4_OK or NVFP4_ERR_IO. */
nvfp4_status nvfp4_atomic_commit(nvfp4_atomic_file *f);

/* Remove the temporary file, free f.  NULL-safe. */
void nvfp4_atomic_discard(nvfp4_atomic_file *f);

/* Open, write n bytes, commit. */
nvfp4_status nvfp4_write_file_atomic(const char *path, const void *data, size_t n);

/* Unlink the temporary file of every write in progress, for signal handlers
 * (async-signal-safe); those writes then fail at their rename. */
void nvfp4_atomic_unlink_temps(void);

/* The temporary file's descriptor, for writers that stream their bytes, and
 * the target's path as messages show it (control bytes escaped). */
int nvfp4_atomic_fd(const nvfp4_atomic_file *f);
const char *nvfp4_atomic_shown(const nvfp4_atomic_file *f);

/* nvfp4_atomic_commit, or, when write_error (an errno from writing to the
 * descriptor) is set, the discard with the message "cannot write it: ...".
 * f is freed either way. */
nvfp4_status nvfp4_atomic_commit_after(nvfp4_atomic_file *f, int write_error);

/* nvfp4_st_writer_write() into a file opened with nvfp4_atomic_open(), then
 * commit it; f is freed either way (for a program that opens its outputs
 * before the work that fills them). */
nvfp4_status nvfp4_st_writer_commit(nvfp4_st_writer *w, nvfp4_atomic_file *f,
                                    void (*progress)(void *ctx, uint64_t done, uint64_t total),
                                    void *progress_ctx);

#endif
