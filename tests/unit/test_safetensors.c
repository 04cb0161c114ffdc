/* test_safetensors.c -- the safetensors reader/writer and the NVFP4 layer glue.
 *
 * Round trips of every dtype, a file built byte by byte here that the writer
 * must reproduce exactly, every malformed-header case the reader promises to
 * reject (status and message), the atomic write, the ComfyUI NVFP4 layer
 * convention, and sweeps over truncated and corrupted files.
 *
 * NVFP4_WRITE_FUZZ_CORPUS=DIR also writes the small valid files used here as
 * seeds for tests/fuzz/corpus.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/atomic.h" /* internal: the atomic files the writer uses */
#include "nvfp4.h"
#include "testlib.h"

static char tmpdir[64];

static const char *tmp_path(const char *name)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

/* Entries of dir other than "." and ".." (so leftover temp files show). */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static int msg_has(const char *needle) { return strstr(nvfp4_last_error(), needle) != NULL; }

/* one printable line: no control byte at all (messages quote file contents) */
static int one_line(void)
{
    for (const unsigned char *p = (const unsigned char *)nvfp4_last_error(); *p; p++)
        if (*p < 0x20 || *p == 0x7f) return 0;
    return 1;
}

/* A file in memory: 8-byte little-endian length, header (padded with
 * `pad` spaces), data. */
static uint8_t *make_file(const char *header, size_t pad, const void *data, size_t dlen,
                          size_t *n)
{
    size_t hlen = strlen(header) + pad;
    *n = 8 + hlen + dlen;
    uint8_t *b = malloc(*n ? *n : 1);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    memcpy(b + 8, header, strlen(header));
    memset(b + 8 + strlen(header), ' ', pad);
    if (dlen) memcpy(b + 8 + hlen, data, dlen);
    return b;
}

static const char *LABEL = "case.safetensors";

/* Open header+data from memory; expect MALFORMED naming the label and, when
 * given, the tensor. */
static void expect_bad(const char *what, const char *header, size_t dlen, const char *tensor)
{
    uint8_t data[64] = {0};
    size_t n;
    uint8_t *b = make_file(header, 0, data, dlen, &n);
    nvfp4_st_file *f = (nvfp4_st_file *)1;
    nvfp4_status s = nvfp4_st_open_memory(&f, b, n, LABEL);
    CHECKF(s == NVFP4_ERR_MALFORMED && f == NULL, "%s: status %d (%s)", what, (int)s,
           nvfp4_last_error());
    CHECKF(msg_has(LABEL) && one_line(), "%s: message '%s'", what, nvfp4_last_error());
    if (tensor)
        CHECKF(msg_has(tensor), "%s: message '%s' lacks '%s'", what, nvfp4_last_error(), tensor);
    if (getenv("NVFP4_TEST_VERBOSE")) printf("%-40s %s\n", what, nvfp4_last_error());
    if (s == NVFP4_OK) nvfp4_st_close(f);
    free(b);
}

/* Open header+data from memory, expecting success.  The handle borrows the
 * buffer, returned in *keep for the caller to free after closing. */
static nvfp4_st_file *expect_ok(const char *what, const char *header, size_t pad, size_t dlen,
                                uint8_t **keep)
{
    uint8_t data[64];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)i;
    size_t n;
    *keep = make_file(header, pad, data, dlen, &n);
    nvfp4_st_file *f = NULL;
    nvfp4_status s = nvfp4_st_open_memory(&f, *keep, n, LABEL);
    CHECKF(s == NVFP4_OK && f, "%s: status %d (%s)", what, (int)s, nvfp4_last_error());
    return f;
}

static void write_corpus(const char *dir, const char *name, const char *src)
{
    size_t n;
    void *b = test_read_file(src, &n);
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *o = fopen(path, "wb");
    if (o && b) fwrite(b, 1, n, o);
    if (o) fclose(o);
    free(b);
}

static void record_progress(void *ctx, uint64_t done, uint64_t total)
{
    uint64_t *log = ctx; /* [calls, last done, total, monotonic] */
    if (log[0] && done < log[1]) log[3] = 0;
    log[0]++;
    log[1] = done;
    log[2] = total;
}

/* progress callback that interrupts the write before its rename: raises *ctx once */
static void raise_on_progress(void *ctx, uint64_t done, uint64_t total)
{
    (void)done, (void)total;
    int *sig = ctx;
    if (*sig) {
        int s = *sig;
        *sig = 0;
        raise(s);
    }
}

static volatile sig_atomic_t app_handler_ran;
static void app_handler(int sig)
{
    (void)sig;
    app_handler_ran = 1;
    nvfp4_atomic_unlink_temps();
}

/* The library installs no signal handler: after a write, SIGINT, SIGTERM,
 * SIGHUP and SIGQUIT keep their default action, and a writer killed by one
 * of them dies of it (leaving its temporary file: cleaning up is the
 * program's choice).  A program's own handler calling
 * nvfp4_atomic_unlink_temps() removes the temporary file and the write then
 * fails, leaving nothing. */
static void test_interrupted_writes(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    size_t big = 1 << 20;
    uint8_t *payload = calloc(big, 1);
    int64_t shape[1] = {(int64_t)big};
    struct sigaction before[4]; /* a background job may start with some ignored */
    for (int i = 0; i < 4; i++) sigaction(sigs[i], NULL, &before[i]);
    for (int i = 0; i < 4; i++) {
        char dir[128];
        snprintf(dir, sizeof dir, "%s/sig%d", tmpdir, sigs[i]);
        mkdir(dir, 0755);
        char target[200];
        snprintf(target, sizeof target, "%s/out.safetensors", dir);
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            struct rlimit no_core = {0, 0};
            setrlimit(RLIMIT_CORE, &no_core); /* SIGQUIT's default action dumps core */
            signal(sigs[i], SIG_DFL);
            nvfp4_st_writer *w = NULL;
            int sig = sigs[i];
            if (nvfp4_st_writer_new(&w) != NVFP4_OK ||
                nvfp4_st_writer_add(w, "payload", NVFP4_DTYPE_U8, 1, shape, payload, big) != NVFP4_OK)
                _exit(3);
            nvfp4_st_writer_write(w, target, raise_on_progress, &sig);
            _exit(4); /* not reached when the signal ends the process */
        }
        int status = 0;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
        CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == sigs[i], "signal %d: status 0x%x",
               sigs[i], status);
        CHECKF(access(target, F_OK) != 0 && count_entries(dir) == 1,
               "signal %d: want only the temporary file in %s, found %d entries", sigs[i], dir,
               count_entries(dir));
        DIR *d = opendir(dir);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            char p[400];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlink(p);
        }
        if (d) closedir(d);
        rmdir(dir);
    }
    /* the writes in this process changed no disposition */
    nvfp4_st_writer *w0 = NULL;
    CHECK(nvfp4_st_writer_new(&w0) == NVFP4_OK &&
          nvfp4_st_writer_add(w0, "payload", NVFP4_DTYPE_U8, 1, shape, payload, big) == NVFP4_OK &&
          nvfp4_st_writer_write(w0, tmp_path("plain.safetensors"), NULL, NULL) == NVFP4_OK);
    nvfp4_st_writer_free(w0);
    unlink(tmp_path("plain.safetensors"));
    for (int i = 0; i < 4; i++) {
        struct sigaction now;
        CHECKF(sigaction(sigs[i], NULL, &now) == 0 && now.sa_handler == before[i].sa_handler,
               "signal %d: the library changed its handler", sigs[i]);
    }
    /* the application's handler */
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = app_handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &old);
    nvfp4_st_writer *w = NULL;
    CHECK(nvfp4_st_writer_new(&w) == NVFP4_OK &&
          nvfp4_st_writer_add(w, "payload", NVFP4_DTYPE_U8, 1, shape, payload, big) == NVFP4_OK);
    int sig = SIGTERM;
    const char *target = tmp_path("handled.safetensors");
    nvfp4_status st = nvfp4_st_writer_write(w, target, raise_on_progress, &sig);
    sigaction(SIGTERM, &old, NULL);
    CHECKF(app_handler_ran && st == NVFP4_ERR_IO && count_entries(tmpdir) == 0,
           "handled SIGTERM: ran %d, status %d, %d files", (int)app_handler_ran, (int)st,
           count_entries(tmpdir));
    nvfp4_st_writer_free(w);
    free(payload);
}

/* nvfp4_atomic_*: bytes appear at commit, never before; discard leaves nothing. */
static void test_atomic_file(void)
{
    const char *target = tmp_path("atomic.txt");
    nvfp4_atomic_file *f = NULL;
    CHECK(nvfp4_atomic_open(&f, target) == NVFP4_OK && f);
    CHECK(nvfp4_atomic_write(f, "hello ", 6) == NVFP4_OK && nvfp4_atomic_write(f, "world", 5) == NVFP4_OK);
    CHECK(access(target, F_OK) != 0 && count_entries(tmpdir) == 1); /* only the temporary */
    CHECK(nvfp4_atomic_commit(f) == NVFP4_OK);
    size_t n = 0;
    char *got = test_read_file(target, &n);
    CHECK(got && n == 11 && !memcmp(got, "hello world", 11));
    free(got);
    CHECK(nvfp4_atomic_open(&f, target) == NVFP4_OK && nvfp4_atomic_write(f, "x", 1) == NVFP4_OK);
    nvfp4_atomic_discard(f);
    got = test_read_file(target, &n);
    CHECK(got && n == 11 && count_entries(tmpdir) == 1); /* unchanged, no temporary */
    free(got);
    CHECK(nvfp4_write_file_atomic(target, "abc", 3) == NVFP4_OK);
    got = test_read_file(target, &n);
    CHECK(got && n == 3 && !memcmp(got, "abc", 3));
    free(got);
    const char *nodir = tmp_path("no-such-dir/r.json");
    f = (nvfp4_atomic_file *)1;
    CHECK(nvfp4_atomic_open(&f, nodir) == NVFP4_ERR_IO && !f && msg_has("No such file") &&
          msg_has(nodir));
    nvfp4_atomic_discard(NULL);
    unlink(target);
}

/* Write x (a quantized rows0 x 32 tensor) with the rows record `record`
 * (NULL: none), a real layer marker M and a user tensor U.comfy_quant; open it. */
static nvfp4_st_file *rows_file(const char *path, const nvfp4_tensor *q, const char *record)
{
    nvfp4_st_writer *w = NULL;
    float user[3] = {1, 2, 3};
    int64_t shape[1] = {3};
    CHECK(nvfp4_st_writer_new(&w) == NVFP4_OK && nvfp4_st_add_nvfp4(w, "x", q) == NVFP4_OK &&
          nvfp4_st_add_nvfp4_layer(w, "M", q) == NVFP4_OK &&
          nvfp4_st_writer_add(w, "U.comfy_quant", NVFP4_DTYPE_F32, 1, shape, user, sizeof user) ==
              NVFP4_OK);
    if (record) CHECK(nvfp4_st_writer_set_metadata(w, NVFP4_ST_ROWS_KEY_PREFIX "x", record) == NVFP4_OK);
    CHECK(nvfp4_st_writer_write(w, path, NULL, NULL) == NVFP4_OK);
    nvfp4_st_writer_free(w);
    nvfp4_st_file *f = NULL;
    CHECK(nvfp4_st_open(&f, path) == NVFP4_OK);
    return f;
}

/* Logical rows: the record sets the rows the loader returns (the stored
 * padding rows dropped, the scales kept as stored); a record ComfyUI's
 * padding cannot explain is malformed.  And the marker is told from a user
 * tensor of its name. */
static void test_rows_and_marker(void)
{
    uint64_t s = 31;
    uint16_t x[20 * 32];
    for (size_t i = 0; i < 20 * 32; i++) x[i] = nvfp4_bf16_from_f32((float)test_normal(&s));
    for (int rows0 = 4; rows0 <= 20; rows0 += 16) { /* stored 16 and 32 rows */
        nvfp4_tensor q;
        CHECK(nvfp4_quantize(&q, x, NVFP4_DTYPE_BF16, rows0, 32, NULL, NVFP4_VARIANT_EAGER, 1) == NVFP4_OK);
        const char *path = tmp_path("rows.safetensors");
        nvfp4_st_writer *w = NULL;
        CHECK(nvfp4_st_writer_new(&w) == NVFP4_OK && nvfp4_st_add_nvfp4(w, "x", &q) == NVFP4_OK &&
              nvfp4_st_writer_set_rows(w, "x", rows0) == NVFP4_OK &&
              nvfp4_st_writer_set_rows(w, "x", 0) == NVFP4_ERR_INVALID_ARGUMENT &&
              nvfp4_st_writer_write(w, path, NULL, NULL) == NVFP4_OK);
        nvfp4_st_writer_free(w);
        nvfp4_st_file *f = NULL;
        nvfp4_tensor t;
        CHECK(nvfp4_st_open(&f, path) == NVFP4_OK && nvfp4_st_load_nvfp4(&t, f, "x") == NVFP4_OK);
        CHECKF(t.rows == rows0 && t.cols == 32 && q.rows == (rows0 + 15) / 16 * 16,
               "rows %lld (stored %lld), want %d", (long long)t.rows, (long long)q.rows, rows0);
        test_equal_bits("recorded rows: codes", t.codes, q.codes, 1, rows0, 16);
        test_equal_bits("recorded rows: scales as stored", t.scales, q.scales, 1, 1,
                        (int64_t)nvfp4_scales_bytes(q.rows, 32, NVFP4_SCALES_TILED));
        nvfp4_tensor_free(&t);
        nvfp4_st_close(f);
        /* records: which ones ComfyUI's padding of q.rows rows explains */
        char bad1[24], bad2[24], good[24];
        snprintf(bad1, sizeof bad1, "%lld", (long long)q.rows + 1);
        snprintf(bad2, sizeof bad2, "%lld", (long long)q.rows - 16);
        snprintf(good, sizeof good, "%lld", (long long)q.rows - 15);
        const char *bad[] = {bad1, bad2, "0", "-3", "4x", "", " 4"};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            f = rows_file(path, &q, bad[i]);
            CHECKF(nvfp4_st_load_nvfp4(&t, f, "x") == NVFP4_ERR_MALFORMED &&
                       msg_has("nvfp4.rows.x") && msg_has("is not a row count"),
                   "record '%s' with %lld stored rows: %s", bad[i], (long long)q.rows, nvfp4_last_error());
            nvfp4_st_close(f);
        }
        f = rows_file(path, &q, good);
        const char *corpus = getenv("NVFP4_WRITE_FUZZ_CORPUS");
        if (corpus && rows0 == 4) write_corpus(corpus, "rows-record.safetensors", path);
        CHECK(nvfp4_st_load_nvfp4(&t, f, "x") == NVFP4_OK && t.rows == q.rows - 15);
        nvfp4_tensor_free(&t);
        /* without a record: the stored rows, for "M.weight" too */
        CHECK(nvfp4_st_load_nvfp4(&t, f, "M.weight") == NVFP4_OK && t.rows == q.rows);
        nvfp4_tensor_free(&t);
        CHECK(nvfp4_st_is_nvfp4_marker(f, "M.comfy_quant") == 1);
        CHECK(nvfp4_st_is_nvfp4_marker(f, "U.comfy_quant") == 0);
        CHECK(nvfp4_st_is_nvfp4_marker(f, "x") == 0 && nvfp4_st_is_nvfp4_marker(f, "nope") == 0);
        CHECK(nvfp4_st_is_nvfp4_marker(NULL, "M.comfy_quant") == 0);
        nvfp4_st_close(f);
        unlink(path);
        nvfp4_tensor_free(&q);
    }
}

/* ComfyUI layers: writer adds the marker, loader pads the bias, checks dtypes. */
static void test_layer_api(void)
{
    nvfp4_tensor t;
    CHECK(nvfp4_tensor_alloc(&t, 20, 32, NVFP4_HI_FIRST, NVFP4_SCALES_TILED) == NVFP4_OK);
    for (size_t i = 0; i < 20 * 16; i++) t.codes[i] = (uint8_t)(i * 37);
    t.scales[0] = 0x38;
    t.per_tensor_scale = 0.5f;
    float bias[18], in_scale = 0.25f, bad_scale[2] = {1, 2};
    for (int i = 0; i < 18; i++) bias[i] = (float)i - 3.5f;
    int64_t bshape[1] = {18}, s2[1] = {2};
    nvfp4_st_writer *w = NULL;
    CHECK(nvfp4_st_writer_new(&w) == NVFP4_OK);
    CHECK(nvfp4_st_add_nvfp4_layer(w, "blk.lin", &t) == NVFP4_OK);
    CHECK(nvfp4_st_writer_add(w, "blk.lin.bias", NVFP4_DTYPE_F32, 1, bshape, bias, sizeof bias) == NVFP4_OK);
    CHECK(nvfp4_st_writer_add(w, "blk.lin.input_scale", NVFP4_DTYPE_F32, 0, NULL, &in_scale, 4) == NVFP4_OK);
    CHECK(nvfp4_st_add_nvfp4_layer(w, "bad", &t) == NVFP4_OK);
    CHECK(nvfp4_st_writer_add(w, "bad.input_scale", NVFP4_DTYPE_F32, 1, s2, bad_scale, 8) == NVFP4_OK);
    CHECK(nvfp4_st_add_nvfp4_layer(w, "blk.lin", &t) != NVFP4_OK); /* duplicate: nothing queued */
    const char *path = tmp_path("layer-api.safetensors");
    CHECK(nvfp4_st_writer_write(w, path, NULL, NULL) == NVFP4_OK);
    nvfp4_st_writer_free(w);
    nvfp4_st_file *f = NULL;
    CHECK(nvfp4_st_open(&f, path) == NVFP4_OK);
    if (f) {
        CHECK(nvfp4_st_count(f) == 11);
        const nvfp4_st_tensor *mk = nvfp4_st_find(f, "blk.lin.comfy_quant");
        CHECK(mk && mk->dtype == NVFP4_DTYPE_U8 && mk->nbytes == 19 &&
              !memcmp(mk->data, "{\"format\": \"nvfp4\"}", 19));
        CHECK(nvfp4_st_is_nvfp4(f, "blk.lin.weight") && !nvfp4_st_is_nvfp4(f, "blk.lin.bias") &&
              !nvfp4_st_is_nvfp4(f, "blk.lin.weight_scale") && !nvfp4_st_is_nvfp4(f, "nope"));
        nvfp4_layer L;
        CHECKF(nvfp4_st_load_layer(&L, f, "blk.lin") == NVFP4_OK, "%s", nvfp4_last_error());
        CHECK(L.weight.rows == 20 && L.weight.cols == 32 && L.has_input_scale && L.input_scale == 0.25f &&
              !memcmp(L.weight.codes, t.codes, 20 * 16) && L.weight.per_tensor_scale == 0.5f);
        int bias_ok = L.bias != NULL;
        for (int i = 0; bias_ok && i < 20; i++) bias_ok = L.bias[i] == (i < 18 ? bias[i] : 0.0f);
        CHECK(bias_ok); /* zero-extended to N */
        nvfp4_layer_free(&L);
        CHECK(L.bias == NULL && L.weight.codes == NULL);
        CHECK(nvfp4_st_load_layer(&L, f, "bad") == NVFP4_ERR_MALFORMED && msg_has("bad.input_scale") &&
              L.weight.codes == NULL);
        CHECK(nvfp4_st_load_layer(&L, f, "absent") == NVFP4_ERR_NOT_FOUND);
        nvfp4_st_close(f);
    }
    char buf[64];
    CHECK(nvfp4_st_marker_name(buf, sizeof buf, "a.b.weight") && !strcmp(buf, "a.b.comfy_quant"));
    CHECK(!nvfp4_st_marker_name(buf, sizeof buf, "a.b.bias") && !nvfp4_st_marker_name(buf, 8, "a.b.weight"));
    nvfp4_tensor_free(&t);
    unlink(path);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/nvfp4_st_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    const char *corpus = getenv("NVFP4_WRITE_FUZZ_CORPUS");
    uint64_t seed = 0x5AFE7E25ULL;

    TEST("dtype names and sizes") {
        static const struct { nvfp4_dtype d; const char *name; size_t size; } want[] = {
            {NVFP4_DTYPE_BOOL, "BOOL", 1}, {NVFP4_DTYPE_U8, "U8", 1},
            {NVFP4_DTYPE_I8, "I8", 1},     {NVFP4_DTYPE_U16, "U16", 2},
            {NVFP4_DTYPE_I16, "I16", 2},   {NVFP4_DTYPE_U32, "U32", 4},
            {NVFP4_DTYPE_I32, "I32", 4},   {NVFP4_DTYPE_U64, "U64", 8},
            {NVFP4_DTYPE_I64, "I64", 8},   {NVFP4_DTYPE_F8_E4M3, "F8_E4M3", 1},
            {NVFP4_DTYPE_F8_E5M2, "F8_E5M2", 1}, {NVFP4_DTYPE_BF16, "BF16", 2},
            {NVFP4_DTYPE_F16, "F16", 2},   {NVFP4_DTYPE_F32, "F32", 4},
            {NVFP4_DTYPE_F64, "F64", 8},
        };
        CHECK(sizeof want / sizeof want[0] == NVFP4_DTYPE_COUNT_ - 1);
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            CHECK(nvfp4_dtype_size(want[i].d) == want[i].size);
            CHECK(strcmp(nvfp4_dtype_name(want[i].d), want[i].name) == 0);
            CHECK(nvfp4_dtype_from_name(want[i].name) == want[i].d);
        }
        CHECK(nvfp4_dtype_size(NVFP4_DTYPE_INVALID) == 0);
        CHECK(nvfp4_dtype_size(NVFP4_DTYPE_COUNT_) == 0);
        CHECK(nvfp4_dtype_from_name("f32") == NVFP4_DTYPE_INVALID);
        CHECK(nvfp4_dtype_from_name("F32 ") == NVFP4_DTYPE_INVALID);
        CHECK(nvfp4_dtype_from_name("") == NVFP4_DTYPE_INVALID);
        CHECK(nvfp4_dtype_from_name("INVALID") == NVFP4_DTYPE_INVALID);
        CHECK(nvfp4_dtype_from_name(NULL) == NVFP4_DTYPE_INVALID);
    }

    TEST("round trip: every dtype, scalars, zero-size, rank 8, metadata") {
        enum { NT = NVFP4_DTYPE_COUNT_ - 1 + 4 };
        char names[NT][32];
        nvfp4_dtype dt[NT];
        int ndim[NT];
        int64_t shape[NT][NVFP4_ST_MAX_DIMS];
        uint8_t *data[NT];
        size_t nbytes[NT];
        int k = 0;
        for (int d = 1; d < NVFP4_DTYPE_COUNT_; d++, k++) { /* one tensor per dtype, [3, 5] */
            snprintf(names[k], sizeof names[k], "t.%s", nvfp4_dtype_name((nvfp4_dtype)d));
            dt[k] = (nvfp4_dtype)d;
            ndim[k] = 2;
            shape[k][0] = 3;
            shape[k][1] = 5;
        }
        snprintf(names[k], 32, "scalar.f32"); dt[k] = NVFP4_DTYPE_F32; ndim[k] = 0; k++;
        snprintf(names[k], 32, "empty.bf16"); dt[k] = NVFP4_DTYPE_BF16; ndim[k] = 2;
        shape[k][0] = 0; shape[k][1] = 7; k++;
        snprintf(names[k], 32, "rank8.i16"); dt[k] = NVFP4_DTYPE_I16; ndim[k] = 8;
        for (int d = 0; d < 8; d++) shape[k][d] = 1 + (d % 3 == 0);
        k++;
        snprintf(names[k], 32, "\xc3\xa9t\xc3\xa9/\"q\"\\x"); dt[k] = NVFP4_DTYPE_U8; ndim[k] = 1;
        shape[k][0] = 9; k++;
        nvfp4_st_writer *w = NULL;
        CHECK(nvfp4_st_writer_new(&w) == NVFP4_OK);
        for (int i = 0; i < NT; i++) {
            size_t elems = 1;
            for (int d = 0; d < ndim[i]; d++) elems *= (size_t)shape[i][d];
            nbytes[i] = elems * nvfp4_dtype_size(dt[i]);
            data[i] = malloc(nbytes[i] + 1);
            for (size_t b = 0; b < nbytes[i]; b++) data[i][b] = (uint8_t)test_rand(&seed);
            nvfp4_status s = (i % 2 ? nvfp4_st_writer_add : nvfp4_st_writer_add_copy)(
                w, names[i], dt[i], ndim[i], shape[i], data[i], nbytes[i]);
            CHECKF(s == NVFP4_OK, "add %s: %s", names[i], nvfp4_last_error());
        }
        CHECK(nvfp4_st_writer_set_metadata(w, "format", "pt") == NVFP4_OK);
        CHECK(nvfp4_st_writer_set_metadata(w, "note", "h\xc3\xa9llo \"world\"\n") == NVFP4_OK);
        CHECK(nvfp4_st_writer_set_metadata(w, "format", "nvfp4") == NVFP4_OK); /* replaces */
        /* add_copy really copies: scribbling on the source afterwards is harmless */
        uint8_t saved0 = nbytes[0] ? data[0][0] : 0;
        if (nbytes[0]) data[0][0] ^= 0xFF;
        uint64_t log[4] = {0, 0, 0, 1};
        const char *path = tmp_path("all.safetensors");
        CHECKF(nvfp4_st_writer_write(w, path, record_progress, log) == NVFP4_OK, "%s",
               nvfp4_last_error());
        if (nbytes[0]) data[0][0] = saved0;
        nvfp4_st_writer_free(w);

        struct stat st;
        CHECK(stat(path, &st) == 0);
        CHECK(log[0] >= 1 && log[3] == 1 && log[1] == (uint64_t)st.st_size &&
              log[2] == (uint64_t)st.st_size);
        CHECK((st.st_mode & 0777) == 0644);
        CHECK(count_entries(tmpdir) == 1); /* no temp file left */

        nvfp4_st_file *f = NULL;
        CHECKF(nvfp4_st_open(&f, path) == NVFP4_OK, "%s", nvfp4_last_error());
        if (f) {
            CHECK(strcmp(nvfp4_st_path(f), path) == 0);
            CHECK(nvfp4_st_count(f) == NT);
            for (int i = 0; i < NT && i < (int)nvfp4_st_count(f); i++) {
                const nvfp4_st_tensor *t = nvfp4_st_get(f, (size_t)i);
                CHECKF(strcmp(t->name, names[i]) == 0, "tensor %d is '%s', want '%s'", i,
                       t->name, names[i]);
                CHECK(nvfp4_st_find(f, names[i]) == t);
                CHECK(t->dtype == dt[i] && t->ndim == ndim[i] && t->nbytes == nbytes[i]);
                for (int d = 0; d < ndim[i]; d++) CHECK(t->shape[d] == shape[i][d]);
                CHECK(nbytes[i] == 0 || memcmp(t->data, data[i], nbytes[i]) == 0);
            }
            CHECK(nvfp4_st_get(f, NT) == NULL);
            CHECK(nvfp4_st_find(f, "t.F3") == NULL && nvfp4_st_find(f, "") == NULL);
            CHECK(nvfp4_st_find(f, "__metadata__") == NULL);
            CHECK(nvfp4_st_metadata_count(f) == 2);
            const char *key, *value;
            nvfp4_st_metadata(f, 0, &key, &value);
            CHECK(strcmp(key, "format") == 0 && strcmp(value, "nvfp4") == 0);
            nvfp4_st_metadata(f, 1, &key, &value);
            CHECK(strcmp(key, "note") == 0 && strcmp(value, "h\xc3\xa9llo \"world\"\n") == 0);
            nvfp4_st_metadata(f, 2, &key, &value);
            CHECK(key == NULL && value == NULL);
            /* data starts 8-aligned: the header is padded */
            const nvfp4_st_tensor *first = nvfp4_st_get(f, 0);
            size_t n;
            uint8_t *raw = test_read_file(path, &n);
            uint64_t hlen = 0;
            for (int i = 7; i >= 0; i--) hlen = hlen << 8 | raw[i];
            CHECK(hlen % 8 == 0);
            CHECK(raw[8 + hlen - 1] == ' ' || raw[8 + hlen - 1] == '}');
            CHECK(first->nbytes == 0 || memcmp(raw + 8 + hlen, first->data, first->nbytes) == 0);
            free(raw);
            nvfp4_st_close(f);
        }
        for (int i = 0; i < NT; i++) free(data[i]);
        unlink(path);
    }

    TEST("writer layout is pinned byte for byte") {
        /* Built by hand: metadata first, tensors in the order added, data
         * contiguous in that order, header padded with spaces to 8. */
        const char *json =
            "{\"__metadata__\":{\"format\":\"pt\"},"
            "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
            "\"a\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[8,9]},"
            "\"z\":{\"dtype\":\"BF16\",\"shape\":[0,4],\"data_offsets\":[9,9]},"
            "\"c\":{\"dtype\":\"I16\",\"shape\":[1,1],\"data_offsets\":[9,11]}}";
        float bvals[2] = {1.0f, -2.5f};
        uint8_t avals[1] = {0xA5};
        int16_t cvals[1] = {-3};
        uint8_t expect_data[11];
        memcpy(expect_data, bvals, 8);
        expect_data[8] = 0xA5;
        memcpy(expect_data + 9, cvals, 2);
        size_t pad = (8 - strlen(json) % 8) % 8;
        size_t want_n;
        uint8_t *want = make_file(json, pad, expect_data, sizeof expect_data, &want_n);

        nvfp4_st_writer *w = NULL;
        CHECK(nvfp4_st_writer_new(&w) == NVFP4_OK);
        int64_t s_b[1] = {2}, s_z[2] = {0, 4}, s_c[2] = {1, 1};
        CHECK(nvfp4_st_writer_add(w, "b", NVFP4_DTYPE_F32, 1, s_b, bvals, 8) == NVFP4_OK);
        CHECK(nvfp4_st_writer_add(w, "a", NVFP4_DTYPE_U8, 0, NULL, avals, 1) == NVFP4_OK);
        CHECK(nvfp4_st_writer_add(w, "z", NVFP4_DTYPE_BF16, 2, s_z, NULL, 0) == NVFP4_OK);
        CHECK(nvfp4_st_writer_add(w, "c", NVFP4_DTYPE_I16, 2, s_c, cvals, 2) == NVFP4_OK);
        CHECK(nvfp4_st_writer_set_metadata(w, "format", "pt") == NVFP4_OK);
        const char *path = tmp_path("pinned.safetensors");
        CHECKF(nvfp4_st_writer_write(w, path, NULL, NULL) == NVFP4_OK, "%s", nvfp4_last_error());
        /* writing twice gives the same bytes (the writer is not consumed) */
        const char *path2 = tmp_path("pinned2.safetensors");
        CHECK(nvfp4_st_writer_write(w, path2, NULL, NULL) == NVFP4_OK);
        nvfp4_st_writer_free(w);
        size_t n = 0, n2 = 0;
        uint8_t *got = test_read_file(path, &n);
        uint8_t *got2 = test_read_file(path2, &n2);
        CHECKF(got && n == want_n, "size %zu, want %zu", n, want_n);
        if (got && n == want_n) test_equal_bits("file bytes", got, want, 1, 1, (int64_t)n);
        CHECK(got2 && n2 == n && memcmp(got, got2, n) == 0);
        if (corpus) write_corpus(corpus, "pinned.safetensors", path);
        free(got);
        free(got2);
        free(want);
        unlink(path2);
        unlink(path);

        /* an empty writer makes a valid empty file: "{}" and six spaces */
        CHECK(nvfp4_st_writer_new(&w) == NVFP4_OK);
        CHECK(nvfp4_st_writer_write(w, path, NULL, NULL) == NVFP4_OK);
        nvfp4_st_writer_free(w);
        got = test_read_file(path, &n);
        CHECK(got && n == 16 && memcmp(got, "\x08\0\0\0\0\0\0\0{}      ", 16) == 0);
        nvfp4_st_file *f = NULL;
        CHECK(nvfp4_st_open(&f, path) == NVFP4_OK && nvfp4_st_count(f) == 0 &&
              nvfp4_st_metadata_count(f) == 0);
        nvfp4_st_close(f);
        free(got);
        unlink(path);
    }

    TEST("reader accepts the valid corner cases") {
        nvfp4_st_file *f;
        uint8_t *keep;
        f = expect_ok("empty header", "{}", 0, 0, &keep);
        CHECK(nvfp4_st_count(f) == 0);
        nvfp4_st_close(f);
        free(keep);
        f = expect_ok("padding",
                      "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 13, 2, &keep);
        CHECK(nvfp4_st_count(f) == 1 && nvfp4_st_get(f, 0)->nbytes == 2);
        nvfp4_st_close(f);
        free(keep);
        /* out-of-order offsets come back sorted by offset; zero-size tensors
         * anywhere on the boundaries; unknown fields ignored; shape [] */
        f = expect_ok("order",
                      "{\"hi\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
                      "\"e2\":{\"dtype\":\"F64\",\"shape\":[0],\"data_offsets\":[8,8]},"
                      "\"e1\":{\"dtype\":\"F64\",\"shape\":[3,0],\"data_offsets\":[4,4],\"x\":1},"
                      "\"lo\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[0,4]}}",
                      0, 8, &keep);
        CHECK(nvfp4_st_count(f) == 4);
        if (nvfp4_st_count(f) == 4) {
            CHECK(strcmp(nvfp4_st_get(f, 0)->name, "lo") == 0);
            CHECK(strcmp(nvfp4_st_get(f, 1)->name, "e1") == 0);
            CHECK(strcmp(nvfp4_st_get(f, 2)->name, "hi") == 0);
            CHECK(strcmp(nvfp4_st_get(f, 3)->name, "e2") == 0);
            const nvfp4_st_tensor *hi = nvfp4_st_find(f, "hi");
            CHECK(hi && ((const uint8_t *)hi->data)[0] == 4 && hi->ndim == 1);
            CHECK(nvfp4_st_find(f, "lo")->ndim == 0 && nvfp4_st_find(f, "lo")->nbytes == 4);
        }
        nvfp4_st_close(f);
        free(keep);
        /* a zero dim with huge other dims: 0 elements, fine */
        f = expect_ok("zero with big dims",
                      "{\"z\":{\"dtype\":\"U8\",\"shape\":[4611686018427387904,0],"
                      "\"data_offsets\":[0,0]}}",
                      0, 0, &keep);
        nvfp4_st_close(f);
        free(keep);
        f = expect_ok("empty metadata", "{\"__metadata__\":{}}", 0, 0, &keep);
        CHECK(nvfp4_st_metadata_count(f) == 0);
        nvfp4_st_close(f);
        free(keep);
    }

    TEST("malformed: file framing") {
        uint8_t b[8] = {0};
        for (size_t n = 0; n < 8; n++) {
            nvfp4_st_file *f = (nvfp4_st_file *)1;
            nvfp4_status s = nvfp4_st_open_memory(&f, n ? b : NULL, n, LABEL);
            CHECKF(s == NVFP4_ERR_MALFORMED && !f && msg_has(LABEL) && msg_has("shorter"),
                   "%zu bytes: %s", n, nvfp4_last_error());
        }
        /* header length past the end; absurd header length */
        size_t n;
        uint8_t *f8 = make_file("{}", 0, NULL, 0, &n);
        f8[0] = 3; /* claims 3 bytes but "{}" is 2: the "}" is data, then no JSON end */
        nvfp4_st_file *f = NULL;
        CHECK(nvfp4_st_open_memory(&f, f8, n, LABEL) == NVFP4_ERR_MALFORMED && msg_has(LABEL));
        f8[0] = 100;
        CHECK(nvfp4_st_open_memory(&f, f8, n, LABEL) == NVFP4_ERR_MALFORMED &&
              msg_has("past the end") && msg_has(LABEL));
        f8[0] = 0;
        f8[5] = 1; /* 2^40 */
        CHECK(nvfp4_st_open_memory(&f, f8, n, LABEL) == NVFP4_ERR_MALFORMED && msg_has("absurd"));
        memset(f8, 0xFF, 8); /* 2^64 - 1: no overflow in "8 + N" */
        CHECK(nvfp4_st_open_memory(&f, f8, n, LABEL) == NVFP4_ERR_MALFORMED && msg_has("absurd"));
        memset(f8, 0, 8); /* N = 0 */
        CHECK(nvfp4_st_open_memory(&f, f8, n, LABEL) == NVFP4_ERR_MALFORMED && msg_has(LABEL));
        free(f8);
        /* 100 MiB + 1 is refused even when the file is long enough (no allocation needed
         * to tell: the check precedes the parse) */
        uint8_t big[8];
        uint64_t hl = ((uint64_t)100 << 20) + 1;
        for (int i = 0; i < 8; i++) big[i] = (uint8_t)(hl >> (8 * i));
        CHECK(nvfp4_st_open_memory(&f, big, 8, LABEL) == NVFP4_ERR_MALFORMED && msg_has("absurd"));
        /* a raw NUL byte inside the header */
        uint8_t nul[16] = {8, 0, 0, 0, 0, 0, 0, 0, '{', '"', 'a', '"', ':', 0, '}', ' '};
        CHECK(nvfp4_st_open_memory(&f, nul, 16, LABEL) == NVFP4_ERR_MALFORMED && msg_has(LABEL));
        CHECK(nvfp4_st_open_memory(NULL, big, 8, LABEL) == NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(nvfp4_st_open_memory(&f, NULL, 9, LABEL) == NVFP4_ERR_INVALID_ARGUMENT);
    }

    TEST("malformed: header JSON") {
        expect_bad("not JSON", "{abc", 0, NULL);
        expect_bad("truncated JSON", "{\"a\":{\"dtype\":\"U8\"", 0, NULL);
        expect_bad("array, not object", "[1,2,3]", 0, NULL);
        expect_bad("string, not object", "\"abc\"", 0, NULL);
        expect_bad("leading space", " {}", 0, NULL);
        expect_bad("garbage after the object", "{} x", 0, NULL);
        expect_bad("two objects", "{}{}", 0, NULL);
        expect_bad("not UTF-8 in a name", "{\"a\xff\":{}}", 0, NULL);
        expect_bad("overlong UTF-8", "{\"a\xc0\xaf\":{}}", 0, NULL);
        expect_bad("lone surrogate", "{\"a\\ud800\":{}}", 0, NULL);
        expect_bad("NUL in a name", "{\"a\\u0000b\":{}}", 0, NULL);
        /* deep nesting: jansson's depth limit answers, not the stack */
        size_t depth = 100000;
        char *deep = malloc(depth * 2 + 16);
        strcpy(deep, "{\"a\":");
        memset(deep + 5, '[', depth);
        memset(deep + 5 + depth, ']', depth);
        strcpy(deep + 5 + 2 * depth, "}");
        expect_bad("deep nesting", deep, 0, NULL);
        free(deep);
    }

    TEST("malformed: entries") {
        expect_bad("entry not an object", "{\"w\":3}", 0, "'w'");
        expect_bad("entry is an array", "{\"w\":[\"U8\",[1],[0,1]]}", 1, "'w'");
        expect_bad("missing dtype", "{\"w\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "'w'");
        expect_bad("dtype not a string",
                   "{\"w\":{\"dtype\":5,\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "'w'");
        expect_bad("dtype null",
                   "{\"w\":{\"dtype\":null,\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "'w'");
        expect_bad("unknown dtype",
                   "{\"w\":{\"dtype\":\"F4\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "F4");
        expect_bad("lower-case dtype",
                   "{\"w\":{\"dtype\":\"u8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "'w'");
        expect_bad("missing shape", "{\"w\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 1, "'w'");
        expect_bad("shape not an array",
                   "{\"w\":{\"dtype\":\"U8\",\"shape\":1,\"data_offsets\":[0,1]}}", 1, "'w'");
        expect_bad("shape an object",
                   "{\"w\":{\"dtype\":\"U8\",\"shape\":{},\"data_offsets\":[0,1]}}", 1, "'w'");
        expect_bad("negative dim",
                   "{\"w\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", 1, "'w'");
        expect_bad("real dim",
                   "{\"w\":{\"dtype\":\"U8\",\"shape\":[1.0],\"data_offsets\":[0,1]}}", 1, "'w'");
        expect_bad("string dim",
                   "{\"w\":{\"dtype\":\"U8\",\"shape\":[\"1\"],\"data_offsets\":[0,1]}}", 1, "'w'");
        expect_bad("dim too big for JSON integers",
                   "{\"w\":{\"dtype\":\"U8\",\"shape\":[18446744073709551616],"
                   "\"data_offsets\":[0,1]}}",
                   1, NULL);
        expect_bad("rank 9",
                   "{\"w\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],"
                   "\"data_offsets\":[0,1]}}",
                   1, "'w'");
        expect_bad("shape product overflow",
                   "{\"w\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],"
                   "\"data_offsets\":[0,0]}}",
                   0, "'w'");
        expect_bad("shape x dtype size overflow",
                   "{\"w\":{\"dtype\":\"F64\",\"shape\":[2305843009213693952],"
                   "\"data_offsets\":[0,0]}}",
                   0, "'w'");
        expect_bad("shape x dtype disagrees with the range",
                   "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, "'w'");
        expect_bad("missing data_offsets", "{\"w\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1, "'w'");
        expect_bad("data_offsets not an array",
                   "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":1}}", 1, "'w'");
        expect_bad("data_offsets of length 3",
                   "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,1]}}", 1, "'w'");
        expect_bad("data_offsets of length 1",
                   "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1]}}", 1, "'w'");
        expect_bad("negative offset",
                   "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[-1,0]}}", 1, "'w'");
        expect_bad("real offset",
                   "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1.0]}}", 1, "'w'");
        expect_bad("begin > end",
                   "{\"w\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[1,0]}}", 1, "'w'");
        expect_bad("end past the data",
                   "{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 3, "'w'");
        expect_bad("range far past the data",
                   "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],"
                   "\"data_offsets\":[9223372036854775806,9223372036854775807]}}",
                   1, "'w'");
        expect_bad("overlap",
                   "{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
                   "\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[4,12]}}",
                   12, "'b'");
        expect_bad("overlap, listed in the other order",
                   "{\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[4,12]},"
                   "\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]}}",
                   12, "'a'");
        expect_bad("same range twice",
                   "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                   "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
                   4, "'b'");
        expect_bad("zero-size inside another",
                   "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                   "\"z\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[2,2]}}",
                   4, "'a'");
        expect_bad("hole between tensors",
                   "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                   "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,12]}}",
                   12, "'b'");
        expect_bad("trailing bytes", "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
                   5, NULL);
        expect_bad("data but no tensors", "{}", 1, NULL);
        expect_bad("duplicate name", "{\"w\":{},\"w\":{}}", 0, "'w'");
        expect_bad("duplicate long name",
                   "{\"model.diffusion_model.blocks.0.attn.qkv.weight\":"
                   "{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}, "
                   "\"model.diffusion_model.blocks.0.attn.qkv.weight\" :"
                   "{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
                   2, "'model.diffusion_model.blocks.0.attn.qkv.weight'");
        expect_bad("duplicate name with escapes",
                   "{\"a,\\\"b\\\\\":{},\"a,\\\"b\\\\\":{}}", 0, "'a,\"b\\'");
        expect_bad("metadata not an object", "{\"__metadata__\":[\"a\",\"b\"]}", 0, "__metadata__");
        expect_bad("metadata null", "{\"__metadata__\":null}", 0, "__metadata__");
        expect_bad("metadata value not a string", "{\"__metadata__\":{\"epoch\":3}}", 0, "epoch");
        expect_bad("duplicate metadata", "{\"__metadata__\":{},\"__metadata__\":{}}", 0, NULL);
        expect_bad("duplicate metadata key", "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, "k");
        /* a name full of control bytes is still reported on one line */
        expect_bad("control bytes in the name", "{\"x\\ny\\u0001\":3}", 0, "x\\x0ay\\x01");
        /* the JSON parser's own message quotes raw header bytes (found by the
         * fuzzer: a bad escape followed by raw newlines and a tab) */
        expect_bad("raw newlines after a bad escape", "{\"__metad\\\n\n\t\x01\x7f", 0, NULL);
        expect_bad("raw newline inside a string", "{\"a\nb\":{}}", 0, NULL);
    }

    TEST("open: files on disk") {
        nvfp4_st_file *f = (nvfp4_st_file *)1;
        const char *missing = tmp_path("does-not-exist.safetensors");
        CHECK(nvfp4_st_open(&f, missing) == NVFP4_ERR_IO && f == NULL && msg_has(missing));
        CHECK(nvfp4_st_open(&f, tmpdir) == NVFP4_ERR_IO && msg_has(tmpdir));
        const char *shortf = tmp_path("short.safetensors");
        FILE *o = fopen(shortf, "wb");
        fwrite("\x02\0\0", 1, 3, o);
        fclose(o);
        CHECK(nvfp4_st_open(&f, shortf) == NVFP4_ERR_MALFORMED && msg_has(shortf));
        o = fopen(shortf, "wb");
        fclose(o);
        CHECK(nvfp4_st_open(&f, shortf) == NVFP4_ERR_MALFORMED && msg_has(shortf));
        o = fopen(shortf, "wb");
        fwrite("\x10\0\0\0\0\0\0\0{\"x\":{}}        ", 1, 24, o);
        fclose(o);
        CHECK(nvfp4_st_open(&f, shortf) == NVFP4_ERR_MALFORMED && msg_has(shortf) &&
              msg_has("'x'"));
        unlink(shortf);
        CHECK(nvfp4_st_open(&f, NULL) == NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(nvfp4_st_open(NULL, missing) == NVFP4_ERR_INVALID_ARGUMENT);
        nvfp4_st_close(NULL);
        CHECK(nvfp4_st_count(NULL) == 0 && nvfp4_st_find(NULL, "x") == NULL);
    }

    TEST("writer rejects bad tensors and leaves the queue intact") {
        nvfp4_st_writer *w = NULL;
        CHECK(nvfp4_st_writer_new(&w) == NVFP4_OK);
        uint8_t buf[64] = {1, 2, 3};
        int64_t s4[1] = {4}, sneg[1] = {-1}, s2[2] = {4, 4};
        CHECK(nvfp4_st_writer_add(w, "ok", NVFP4_DTYPE_U8, 1, s4, buf, 4) == NVFP4_OK);
        CHECK(nvfp4_st_writer_add(w, "ok", NVFP4_DTYPE_U8, 1, s4, buf, 4) ==
                  NVFP4_ERR_INVALID_ARGUMENT && msg_has("'ok'"));
        CHECK(nvfp4_st_writer_add(w, "size", NVFP4_DTYPE_F32, 1, s4, buf, 4) ==
                  NVFP4_ERR_INVALID_ARGUMENT && msg_has("'size'"));
        CHECK(nvfp4_st_writer_add_copy(w, "size", NVFP4_DTYPE_F32, 2, s2, buf, 63) ==
              NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(nvfp4_st_writer_add(w, "neg", NVFP4_DTYPE_U8, 1, sneg, buf, 0) ==
                  NVFP4_ERR_INVALID_ARGUMENT && msg_has("'neg'"));
        CHECK(nvfp4_st_writer_add(w, "rank", NVFP4_DTYPE_U8, 9, s4, buf, 4) ==
              NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(nvfp4_st_writer_add(w, "rank", NVFP4_DTYPE_U8, -1, s4, buf, 4) ==
              NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(nvfp4_st_writer_add(w, "dt", NVFP4_DTYPE_INVALID, 1, s4, buf, 4) ==
              NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(nvfp4_st_writer_add(w, "dt", NVFP4_DTYPE_COUNT_, 1, s4, buf, 4) ==
              NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(nvfp4_st_writer_add(w, "null", NVFP4_DTYPE_U8, 1, s4, NULL, 4) ==
              NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(nvfp4_st_writer_add(w, "__metadata__", NVFP4_DTYPE_U8, 1, s4, buf, 4) ==
              NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(nvfp4_st_writer_add(w, "", NVFP4_DTYPE_U8, 1, s4, buf, 4) ==
              NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(nvfp4_st_writer_add(w, "bad\xff", NVFP4_DTYPE_U8, 1, s4, buf, 4) ==
              NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(nvfp4_st_writer_set_metadata(w, "k", "\xc3") == NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(nvfp4_st_writer_set_metadata(w, NULL, "v") == NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(nvfp4_st_writer_add(w, "ok2", NVFP4_DTYPE_U16, 1, s4, buf, 8) == NVFP4_OK);
        const char *path = tmp_path("rejects.safetensors");
        CHECK(nvfp4_st_writer_write(w, path, NULL, NULL) == NVFP4_OK);
        nvfp4_st_file *f = NULL;
        CHECK(nvfp4_st_open(&f, path) == NVFP4_OK);
        CHECK(nvfp4_st_count(f) == 2 && nvfp4_st_find(f, "ok") && nvfp4_st_find(f, "ok2") &&
              nvfp4_st_metadata_count(f) == 0);
        nvfp4_st_close(f);
        unlink(path);
        nvfp4_st_writer_free(w);
        nvfp4_st_writer_free(NULL);
    }

    TEST("atomic write") {
        nvfp4_st_writer *w = NULL;
        CHECK(nvfp4_st_writer_new(&w) == NVFP4_OK);
        size_t big = 1 << 20;
        uint8_t *payload = malloc(big);
        for (size_t i = 0; i < big; i++) payload[i] = (uint8_t)(i * 7);
        int64_t shape[1] = {(int64_t)big};
        CHECK(nvfp4_st_writer_add(w, "payload", NVFP4_DTYPE_U8, 1, shape, payload, big) ==
              NVFP4_OK);

        /* into a missing directory: an I/O error naming the path, nothing created */
        const char *nodir = tmp_path("missing-dir/x.safetensors");
        CHECK(nvfp4_st_writer_write(w, nodir, NULL, NULL) == NVFP4_ERR_IO && msg_has(nodir) &&
              one_line());
        CHECK(count_entries(tmpdir) == 0);

        /* the target exists; the write dies half way (file size limit): the old
         * bytes stay, the temporary file is removed */
        const char *target = tmp_path("target.safetensors");
        FILE *o = fopen(target, "wb");
        fputs("old contents", o);
        fclose(o);
        chmod(target, 0640);
        struct rlimit old_lim, lim;
        getrlimit(RLIMIT_FSIZE, &old_lim);
        lim = old_lim;
        lim.rlim_cur = 64 << 10;
        void (*old_sig)(int) = signal(SIGXFSZ, SIG_IGN);
        int limited = setrlimit(RLIMIT_FSIZE, &lim) == 0;
        nvfp4_status s = nvfp4_st_writer_write(w, target, NULL, NULL);
        setrlimit(RLIMIT_FSIZE, &old_lim);
        signal(SIGXFSZ, old_sig);
        CHECKF(!limited || (s == NVFP4_ERR_IO && msg_has(target)), "status %d: %s", (int)s,
               nvfp4_last_error());
        size_t n;
        char *now = test_read_file(target, &n);
        CHECK(now && n == 12 && memcmp(now, "old contents", 12) == 0);
        free(now);
        CHECK(count_entries(tmpdir) == 1);

        /* the target is a directory: rename fails, nothing is left behind */
        const char *dirtarget = tmp_path("a-directory");
        mkdir(dirtarget, 0755);
        CHECK(nvfp4_st_writer_write(w, dirtarget, NULL, NULL) == NVFP4_ERR_IO &&
              msg_has(dirtarget));
        CHECK(count_entries(tmpdir) == 2 && count_entries(dirtarget) == 0);
        rmdir(dirtarget);

        /* a path ending in '/' is no file name */
        char slash[300];
        snprintf(slash, sizeof slash, "%s/", tmpdir);
        CHECK(nvfp4_st_writer_write(w, slash, NULL, NULL) == NVFP4_ERR_INVALID_ARGUMENT);

        /* a successful overwrite replaces the bytes and keeps the old mode */
        uint64_t log[4] = {0, 0, 0, 1};
        CHECK(nvfp4_st_writer_write(w, target, record_progress, log) == NVFP4_OK);
        struct stat st;
        CHECK(stat(target, &st) == 0 && (st.st_mode & 0777) == 0640);
        CHECK(log[0] >= 1 && log[3] == 1 && log[1] == (uint64_t)st.st_size &&
              log[2] == log[1]);
        nvfp4_st_file *f = NULL;
        CHECK(nvfp4_st_open(&f, target) == NVFP4_OK && nvfp4_st_count(f) == 1 &&
              nvfp4_st_get(f, 0)->nbytes == big &&
              memcmp(nvfp4_st_get(f, 0)->data, payload, big) == 0);
        nvfp4_st_close(f);
        CHECK(count_entries(tmpdir) == 1);
        unlink(target);
        nvfp4_st_writer_free(w);
        free(payload);
    }

    TEST("signals: no handler in the library; a program's handler removes the temporary file") {
        test_interrupted_writes();
    }

    TEST("ComfyUI layer API") {
        test_layer_api();
    }

    TEST("logical rows recorded in the metadata; the marker and a user tensor of its name") {
        test_rows_and_marker();
    }

    TEST("atomic files") {
        test_atomic_file();
    }

    TEST("NVFP4 layer round trip and checks") {
        const int64_t shapes[][2] = {{130, 48}, {1, 16}, {128, 64}, {257, 80}};
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int64_t rows = shapes[si][0], cols = shapes[si][1];
            nvfp4_tensor t;
            CHECK(nvfp4_tensor_alloc(&t, rows, cols, NVFP4_HI_FIRST, NVFP4_SCALES_TILED) ==
                  NVFP4_OK);
            size_t ncodes = (size_t)(rows * cols / 2);
            size_t nscales = nvfp4_scales_bytes(rows, cols, NVFP4_SCALES_TILED);
            CHECK(nscales == (size_t)(((rows + 127) / 128 * 128) * ((cols / 16 + 3) / 4 * 4)));
            for (size_t i = 0; i < ncodes; i++) t.codes[i] = (uint8_t)test_rand(&seed);
            for (size_t i = 0; i < nscales; i++) t.scales[i] = (uint8_t)test_rand(&seed);
            t.per_tensor_scale = 0.0123f * (float)(si + 1);
            nvfp4_st_writer *w = NULL;
            CHECK(nvfp4_st_writer_new(&w) == NVFP4_OK);
            CHECK(nvfp4_st_add_nvfp4(w, "blk.qkv.weight", &t) == NVFP4_OK);
            /* a second add of the same name fails and queues none of the three */
            CHECK(nvfp4_st_add_nvfp4(w, "blk.qkv.weight", &t) == NVFP4_ERR_INVALID_ARGUMENT);
            nvfp4_tensor lo = t;
            lo.nibble_order = NVFP4_LO_FIRST;
            CHECK(nvfp4_st_add_nvfp4(w, "lo", &lo) == NVFP4_ERR_INVALID_ARGUMENT);
            nvfp4_tensor rm = t;
            rm.scale_layout = NVFP4_SCALES_ROW_MAJOR;
            CHECK(nvfp4_st_add_nvfp4(w, "rm", &rm) == NVFP4_ERR_INVALID_ARGUMENT);
            /* "x_scale" is taken: adding layer "x" fails on its second piece and
             * takes back the first, so "x" is free again afterwards */
            uint8_t one_byte = 7;
            CHECK(nvfp4_st_writer_add(w, "x_scale", NVFP4_DTYPE_U8, 0, NULL, &one_byte, 1) ==
                  NVFP4_OK);
            CHECK(nvfp4_st_add_nvfp4(w, "x", &t) == NVFP4_ERR_INVALID_ARGUMENT &&
                  msg_has("'x_scale'"));
            CHECK(nvfp4_st_writer_add(w, "x", NVFP4_DTYPE_U8, 0, NULL, &one_byte, 1) == NVFP4_OK);
            const char *path = tmp_path("layer.safetensors");
            {
                /* the scale_2 entry is copied: the struct may go away before the write */
                nvfp4_tensor copy = t;
                CHECK(nvfp4_st_add_nvfp4(w, "other", &copy) == NVFP4_OK);
                copy.per_tensor_scale = -1.0f;
            }
            CHECK(nvfp4_st_writer_write(w, path, NULL, NULL) == NVFP4_OK);
            nvfp4_st_writer_free(w);
            if (corpus && si == 1) write_corpus(corpus, "layer.safetensors", path);

            nvfp4_st_file *f = NULL;
            CHECK(nvfp4_st_open(&f, path) == NVFP4_OK);
            CHECK(nvfp4_st_count(f) == 8);
            CHECK(nvfp4_st_find(f, "x") && !nvfp4_st_find(f, "x_scale_2"));
            nvfp4_tensor none;
            CHECK(nvfp4_st_load_nvfp4(&none, f, "x") == NVFP4_ERR_NOT_FOUND &&
                  msg_has("'x_scale_2'"));
            const nvfp4_st_tensor *c = nvfp4_st_find(f, "blk.qkv.weight");
            const nvfp4_st_tensor *sc = nvfp4_st_find(f, "blk.qkv.weight_scale");
            const nvfp4_st_tensor *s2 = nvfp4_st_find(f, "blk.qkv.weight_scale_2");
            CHECK(c && c->dtype == NVFP4_DTYPE_U8 && c->ndim == 2 && c->shape[0] == rows &&
                  c->shape[1] == cols / 2);
            CHECK(sc && sc->dtype == NVFP4_DTYPE_F8_E4M3 && sc->ndim == 2 &&
                  sc->shape[0] == (rows + 127) / 128 * 128 &&
                  sc->shape[1] == (cols / 16 + 3) / 4 * 4);
            CHECK(s2 && s2->dtype == NVFP4_DTYPE_F32 && s2->ndim == 0);
            for (int which = 0; which < 2; which++) {
                nvfp4_tensor back;
                nvfp4_status s =
                    nvfp4_st_load_nvfp4(&back, f, which ? "other" : "blk.qkv.weight");
                CHECKF(s == NVFP4_OK, "%s", nvfp4_last_error());
                if (s != NVFP4_OK) continue;
                CHECK(back.rows == rows && back.cols == cols &&
                      back.nibble_order == NVFP4_HI_FIRST &&
                      back.scale_layout == NVFP4_SCALES_TILED);
                test_equal_bits("codes", back.codes, t.codes, 1, rows, cols / 2);
                test_equal_bits("scales", back.scales, t.scales, 1, 1, (int64_t)nscales);
                CHECK(nvfp4_f32_bits(back.per_tensor_scale) == nvfp4_f32_bits(t.per_tensor_scale));
                nvfp4_tensor_free(&back);
            }
            nvfp4_st_close(f);
            nvfp4_tensor_free(&t);
            unlink(path);
        }
    }

    TEST("NVFP4 layer: variants accepted, disagreements rejected") {
        int64_t rows = 3, cols = 32;
        uint8_t codes[3 * 16], scales[128 * 4], wide[256 * 4];
        float pts = 0.5f, two[2] = {1, 2};
        uint16_t half = 0x3C00;
        for (size_t i = 0; i < sizeof codes; i++) codes[i] = (uint8_t)test_rand(&seed);
        for (size_t i = 0; i < sizeof scales; i++) scales[i] = (uint8_t)test_rand(&seed);
        memset(wide, 0, sizeof wide);
        int64_t cshape[2] = {rows, cols / 2}, sshape[2] = {128, 4}, one[1] = {1};
        int64_t odd[2] = {rows, 5}, tall[2] = {256, 4}, flat[1] = {512}, s2x[1] = {2};
        int64_t i8shape[2] = {rows, cols / 2}, bf[2] = {128, 2};
        struct {
            const char *name;
            int ok;              /* expected: OK, else the status below */
            nvfp4_status status;
            const char *in_msg;
        } cases[] = {
            {"u8scale", 1, NVFP4_OK, NULL},    {"s2vec", 1, NVFP4_OK, NULL},
            {"nocodes", 0, NVFP4_ERR_NOT_FOUND, "'nocodes'"},
            {"noscale", 0, NVFP4_ERR_NOT_FOUND, "'noscale_scale'"},
            {"nos2", 0, NVFP4_ERR_NOT_FOUND, "'nos2_scale_2'"},
            {"i8codes", 0, NVFP4_ERR_MALFORMED, "'i8codes'"},
            {"oddcols", 0, NVFP4_ERR_MALFORMED, "'oddcols'"},
            {"tallscale", 0, NVFP4_ERR_MALFORMED, "'tallscale_scale'"},
            {"flatscale", 0, NVFP4_ERR_MALFORMED, "'flatscale_scale'"},
            {"f16s2", 0, NVFP4_ERR_MALFORMED, "'f16s2_scale_2'"},
            {"vec2s2", 0, NVFP4_ERR_MALFORMED, "'vec2s2_scale_2'"},
            {"bf16scale", 0, NVFP4_ERR_MALFORMED, "'bf16scale_scale'"},
        };
        nvfp4_st_writer *w = NULL;
        CHECK(nvfp4_st_writer_new(&w) == NVFP4_OK);
        char nm[64];
#define ADD(suffix, dt, nd, shp, ptr, nb)                                                  \
    do {                                                                                 \
        snprintf(nm, sizeof nm, "%s%s", cases[i].name, suffix);                          \
        CHECKF(nvfp4_st_writer_add_copy(w, nm, dt, nd, shp, ptr, nb) == NVFP4_OK, "%s: %s", \
               nm, nvfp4_last_error());                                                  \
    } while (0)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            const char *n = cases[i].name;
            if (strcmp(n, "nocodes") != 0) {
                if (!strcmp(n, "i8codes"))
                    ADD("", NVFP4_DTYPE_I8, 2, i8shape, codes, sizeof codes);
                else if (!strcmp(n, "oddcols"))
                    ADD("", NVFP4_DTYPE_U8, 2, odd, codes, 15);
                else
                    ADD("", NVFP4_DTYPE_U8, 2, cshape, codes, sizeof codes);
            }
            if (strcmp(n, "noscale") != 0) {
                if (!strcmp(n, "u8scale"))
                    ADD("_scale", NVFP4_DTYPE_U8, 2, sshape, scales, sizeof scales);
                else if (!strcmp(n, "tallscale"))
                    ADD("_scale", NVFP4_DTYPE_F8_E4M3, 2, tall, wide, sizeof wide);
                else if (!strcmp(n, "flatscale"))
                    ADD("_scale", NVFP4_DTYPE_F8_E4M3, 1, flat, scales, sizeof scales);
                else if (!strcmp(n, "bf16scale"))
                    ADD("_scale", NVFP4_DTYPE_BF16, 2, bf, scales, sizeof scales);
                else
                    ADD("_scale", NVFP4_DTYPE_F8_E4M3, 2, sshape, scales, sizeof scales);
            }
            if (strcmp(n, "nos2") != 0) {
                if (!strcmp(n, "s2vec"))
                    ADD("_scale_2", NVFP4_DTYPE_F32, 1, one, &pts, 4);
                else if (!strcmp(n, "f16s2"))
                    ADD("_scale_2", NVFP4_DTYPE_F16, 0, NULL, &half, 2);
                else if (!strcmp(n, "vec2s2"))
                    ADD("_scale_2", NVFP4_DTYPE_F32, 1, s2x, two, 8);
                else
                    ADD("_scale_2", NVFP4_DTYPE_F32, 0, NULL, &pts, 4);
            }
        }
#undef ADD
        const char *path = tmp_path("variants.safetensors");
        CHECK(nvfp4_st_writer_write(w, path, NULL, NULL) == NVFP4_OK);
        nvfp4_st_writer_free(w);
        nvfp4_st_file *f = NULL;
        CHECKF(nvfp4_st_open(&f, path) == NVFP4_OK, "%s", nvfp4_last_error());
        for (size_t i = 0; f && i < sizeof cases / sizeof cases[0]; i++) {
            nvfp4_tensor t;
            memset(&t, 0xAB, sizeof t);
            nvfp4_status s = nvfp4_st_load_nvfp4(&t, f, cases[i].name);
            if (cases[i].ok) {
                CHECKF(s == NVFP4_OK, "%s: %s", cases[i].name, nvfp4_last_error());
                if (s != NVFP4_OK) continue;
                CHECK(t.rows == rows && t.cols == cols && t.per_tensor_scale == 0.5f);
                test_equal_bits("codes", t.codes, codes, 1, 1, (int64_t)sizeof codes);
                test_equal_bits("scales", t.scales, scales, 1, 1, (int64_t)sizeof scales);
                nvfp4_tensor_free(&t);
            } else {
                CHECKF(s == cases[i].status && msg_has(path) && msg_has(cases[i].in_msg) &&
                           one_line(),
                       "%s: status %d, message '%s'", cases[i].name, (int)s, nvfp4_last_error());
                CHECK(t.codes == NULL && t.scales == NULL); /* left zeroed */
            }
        }
        CHECK(nvfp4_st_load_nvfp4(NULL, f, "x") == NVFP4_ERR_INVALID_ARGUMENT);
        nvfp4_st_close(f);
        unlink(path);
    }

    TEST("truncated-file sweep and corrupted-byte sweep") {
        /* a small valid file with metadata, several dtypes, a zero-size tensor */
        nvfp4_st_writer *w = NULL;
        CHECK(nvfp4_st_writer_new(&w) == NVFP4_OK);
        uint8_t buf[48];
        for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)(i * 13 + 1);
        int64_t s3[1] = {3}, s22[2] = {2, 2}, s0[1] = {0};
        CHECK(nvfp4_st_writer_add(w, "w", NVFP4_DTYPE_BF16, 2, s22, buf, 8) == NVFP4_OK);
        CHECK(nvfp4_st_writer_add(w, "e", NVFP4_DTYPE_F32, 1, s0, NULL, 0) == NVFP4_OK);
        CHECK(nvfp4_st_writer_add(w, "s", NVFP4_DTYPE_F32, 0, NULL, buf + 8, 4) == NVFP4_OK);
        CHECK(nvfp4_st_writer_add(w, "b", NVFP4_DTYPE_U8, 1, s3, buf + 12, 3) == NVFP4_OK);
        CHECK(nvfp4_st_writer_set_metadata(w, "format", "pt") == NVFP4_OK);
        const char *path = tmp_path("small.safetensors");
        CHECK(nvfp4_st_writer_write(w, path, NULL, NULL) == NVFP4_OK);
        nvfp4_st_writer_free(w);
        if (corpus) write_corpus(corpus, "small.safetensors", path);
        size_t n = 0;
        uint8_t *full = test_read_file(path, &n);
        CHECK(full && n > 100);
        int clean = 1;
        for (size_t len = 0; full && len <= n; len++) {
            uint8_t *prefix = malloc(len ? len : 1); /* exact size: ASan sees overreads */
            memcpy(prefix, full, len);
            nvfp4_st_file *f = NULL;
            nvfp4_status s = nvfp4_st_open_memory(&f, prefix, len, LABEL);
            int ok = len == n ? (s == NVFP4_OK && nvfp4_st_count(f) == 4)
                              : (s == NVFP4_ERR_MALFORMED && f == NULL && msg_has(LABEL));
            if (!ok) {
                clean = 0;
                fprintf(stderr, "prefix %zu of %zu: status %d: %s\n", len, n, (int)s,
                        nvfp4_last_error());
            }
            nvfp4_st_close(f);
            free(prefix);
        }
        CHECK(clean);
        /* the same prefixes through the file path (mmap) */
        int clean_disk = 1;
        const char *cut = tmp_path("cut.safetensors");
        for (size_t len = 0; full && len < n; len += 7) {
            FILE *o = fopen(cut, "wb");
            fwrite(full, 1, len, o);
            fclose(o);
            nvfp4_st_file *f = NULL;
            if (nvfp4_st_open(&f, cut) != NVFP4_ERR_MALFORMED || !msg_has(cut)) clean_disk = 0;
            nvfp4_st_close(f);
        }
        unlink(cut);
        CHECK(clean_disk);
        /* every byte set to a few values: never a crash; whatever opens is
         * self-consistent (every tensor inside the buffer, sizes agree) */
        int consistent = 1, opened = 0;
        const uint8_t values[] = {0x00, 0x20, 0x22, 0x2C, 0x30, 0x39, 0x5B, 0x7B, 0x7D, 0xFF};
        for (size_t pos = 0; full && pos < n; pos++) {
            for (size_t v = 0; v < sizeof values; v++) {
                uint8_t *copy = malloc(n);
                memcpy(copy, full, n);
                copy[pos] = values[v];
                nvfp4_st_file *f = NULL;
                if (nvfp4_st_open_memory(&f, copy, n, LABEL) == NVFP4_OK) {
                    opened++;
                    size_t total = 0;
                    for (size_t i = 0; i < nvfp4_st_count(f); i++) {
                        const nvfp4_st_tensor *t = nvfp4_st_get(f, i);
                        size_t elems = 1;
                        for (int d = 0; d < t->ndim; d++) elems *= (size_t)t->shape[d];
                        if (elems * nvfp4_dtype_size(t->dtype) != t->nbytes ||
                            (const uint8_t *)t->data < copy ||
                            (const uint8_t *)t->data + t->nbytes > copy + n ||
                            nvfp4_st_find(f, t->name) != t)
                            consistent = 0;
                        total += t->nbytes;
                    }
                    if (total > n) consistent = 0;
                } else if (!msg_has(LABEL) || !one_line()) {
                    consistent = 0;
                }
                nvfp4_st_close(f);
                free(copy);
            }
        }
        CHECK(consistent);
        CHECK(opened > 0); /* e.g. data bytes and metadata letters can change freely */
        free(full);
        unlink(path);
    }

    rmdir(tmpdir);
    return test_summary("safetensors");
}
