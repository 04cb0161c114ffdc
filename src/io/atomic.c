/* atomic.c -- files that appear whole or not at all (atomic.h).
 *
 * A file is written to ".<name>.tmp-XXXXXX" in the target's directory, then
 * fsync'ed and renamed over the target.  While it is open its temporary path
 * sits in a small table that nvfp4_atomic_unlink_temps() empties with
 * async-signal-safe calls only, so a program's signal handler can remove the
 * temporary files of the writes it interrupts.  The library installs no
 * handler itself: what a signal does is the program's choice.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io_internal.h"

/* Temporary files open at once that a signal handler can remove; more are
 * still written correctly, only not cleaned up on a signal. */
#define TEMP_SLOTS 64

static _Atomic(char *) temp_slots[TEMP_SLOTS];

void nvfp4_atomic_unlink_temps(void)
{
    for (int i = 0; i < TEMP_SLOTS; i++) {
        char *p = atomic_load(&temp_slots[i]);
        if (p) unlink(p); /* async-signal-safe */
    }
}

static int register_temp(char *path)
{
    for (int i = 0; i < TEMP_SLOTS; i++) {
        char *expected = NULL;
        if (atomic_compare_exchange_strong(&temp_slots[i], &expected, path)) return i;
    }
    return -1;
}

static void unregister_temp(int slot)
{
    if (slot >= 0) atomic_store(&temp_slots[slot], NULL);
}

struct nvfp4_atomic_file {
    int fd;
    int slot;
    char *path, *tmp;
    char shown[256]; /* the path for messages, control bytes escaped */
};

/* "<dir>/.<base>.tmp-XXXXXX" beside path, or NULL (bad path / no memory). */
static char *temp_template(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
    const char *base = path + dirlen;
    if (!base[0]) return NULL;
    size_t n = dirlen + 1 + strlen(base) + sizeof ".tmp-XXXXXX";
    char *t = malloc(n);
    if (t) snprintf(t, n, "%.*s.%s.tmp-XXXXXX", (int)dirlen, path, base);
    return t;
}

static void sync_directory(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd); /* best effort: the rename is already visible */
        close(fd);
    }
    free(dir);
}

static void free_file(nvfp4_atomic_file *f)
{
    free(f->path);
    free(f->tmp);
    free(f);
}

nvfp4_status nvfp4_atomic_open(nvfp4_atomic_file **out, const char *path)
{
    if (!out || !path || !path[0]) {
        if (out) *out = NULL;
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_atomic_open: output or path is NULL or empty");
    }
    *out = NULL;
    nvfp4_atomic_file *f = calloc(1, sizeof *f);
    if (!f) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "nvfp4_atomic_open: no memory");
    nvfp4_io_printable(f->shown, sizeof f->shown, path);
    f->fd = -1;
    f->slot = -1;
    f->path = strdup(path);
    f->tmp = temp_template(path);
    if (!f->path || !f->tmp) {
        nvfp4_status st = nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                                     "%s: not a file path (ends in '/'), or no memory", f->shown);
        free_file(f);
        return st;
    }
    /* Registered before it exists, so no moment holds an unlisted temporary
     * file; a signal before mkostemp fills in the name unlinks "...XXXXXX",
     * which does not exist. */
    f->slot = register_temp(f->tmp);
    f->fd = mkostemp(f->tmp, O_CLOEXEC);
    if (f->fd < 0) {
        int e = errno;
        unregister_temp(f->slot);
        nvfp4_status st = nvfp4_fail(NVFP4_ERR_IO,
                                     "%s: cannot create a temporary file beside it: %s",
                                     f->shown, strerror(e));
        free_file(f);
        return st;
    }
    *out = f;
    return NVFP4_OK;
}

int nvfp4_atomic_fd(const nvfp4_atomic_file *f) { return f ? f->fd : -1; }

const char *nvfp4_atomic_shown(const nvfp4_atomic_file *f) { return f ? f->shown : ""; }

int nvfp4_write_all(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (k == 0) return EIO;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

nvfp4_status nvfp4_atomic_write(nvfp4_atomic_file *f, const void *data, size_t n)
{
    if (!f || (!data && n))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_atomic_write: file or data is NULL");
    int e = nvfp4_write_all(f->fd, data, n);
    if (e)
        return nvfp4_fail(NVFP4_ERR_IO, "%s: cannot write it: %s (the file was left unchanged)",
                          f->shown, strerror(e));
    return NVFP4_OK;
}

void nvfp4_atomic_discard(nvfp4_atomic_file *f)
{
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    unlink(f->tmp);
    unregister_temp(f->slot);
    free_file(f);
}

nvfp4_status nvfp4_atomic_commit_after(nvfp4_atomic_file *f, int write_error)
{
    if (!f) return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_atomic_commit: file is NULL");
    /* mkstemp makes the file 0600; keep the mode of the file being replaced,
     * else give it the usual 0644. */
    struct stat st;
    mode_t mode = stat(f->path, &st) == 0 && S_ISREG(st.st_mode) ? (st.st_mode & 07777) : 0644;
    const char *step = "write";
    int e = write_error;
    if (!e && fchmod(f->fd, mode) != 0) e = errno;
    if (!e && fsync(f->fd) != 0) {
        e = errno;
        step = "fsync";
    }
    if (close(f->fd) != 0 && !e) {
        e = errno;
        step = "close";
    }
    f->fd = -1;
    if (!e && rename(f->tmp, f->path) != 0) {
        e = errno;
        step = "rename the temporary file onto";
    }
    if (e) {
        nvfp4_status s = nvfp4_fail(NVFP4_ERR_IO, "%s: cannot %s it: %s (the file was left unchanged)",
                                    f->shown, step, strerror(e));
        nvfp4_atomic_discard(f);
        return s;
    }
    /* After the rename: a signal in between unlinks a name that is gone. */
    unregister_temp(f->slot);
    sync_directory(f->path);
    free_file(f);
    return NVFP4_OK;
}

nvfp4_status nvfp4_atomic_commit(nvfp4_atomic_file *f) { return nvfp4_atomic_commit_after(f, 0); }

nvfp4_status nvfp4_write_file_atomic(const char *path, const void *data, size_t n)
{
    if (!data && n)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_write_file_atomic: data is NULL");
    nvfp4_atomic_file *f = NULL;
    nvfp4_status st = nvfp4_atomic_open(&f, path);
    if (st != NVFP4_OK) return st;
    return nvfp4_atomic_commit_after(f, nvfp4_write_all(f->fd, data, n));
}
