/* common.c -- what the nvfp4 commands share: errors, progress, parsing, file
 * checks, and loading / writing / comparing GEMM operands and results. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

int cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    cli_progress_done();
    fprintf(stderr, "nvfp4 %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

int cli_lib_error(const char *cmd, nvfp4_status st, const char *what)
{
    const char *msg = nvfp4_last_error();
    return cli_error(cmd, "%s: %s%s%s", what, nvfp4_status_str(st), *msg ? ": " : "", msg);
}

int cli_is_tty(void)
{
    static int cached = -1;
    if (cached < 0) cached = isatty(2) && !getenv("NVFP4_NO_PROGRESS");
    return cached;
}

static int progress_open;

void cli_progress(const char *fmt, ...)
{
    if (!cli_is_tty()) return;
    va_list ap;
    fputs("\r\033[K", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fflush(stderr);
    progress_open = 1;
}

void cli_progress_done(void)
{
    if (progress_open) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        progress_open = 0;
    }
}

void cli_write_progress(void *ctx, uint64_t done, uint64_t total)
{
    cli_progress("%s: writing %.1f / %.1f MiB", ctx ? (const char *)ctx : "",
                 done / 1048576.0, total / 1048576.0);
}

int cli_parse_int(const char *s, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end) return -1;
    *out = v;
    return 0;
}

int cli_parse_float(const char *s, float *out)
{
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end) return -1;
    *out = v;
    return 0;
}

int cli_shared_option(const char *C, int argc, char **argv, int *i, long long *threads,
                      const char **backend, nvfp4_model *model)
{
    const char *a = argv[*i];
    if (threads && !strcmp(a, "--threads")) {
        if (++*i >= argc || cli_parse_int(argv[*i], threads) || *threads < 0 || *threads > 1024)
            return cli_error(C, "--threads needs a count (0 = all cores)"), -1;
        return 1;
    }
    if (backend && !strcmp(a, "--backend")) {
        if (++*i >= argc || (strcmp(argv[*i], "cpu") && strcmp(argv[*i], "cuda") &&
                             strcmp(argv[*i], "auto")))
            return cli_error(C, "--backend needs cpu, cuda or auto"), -1;
        *backend = argv[*i];
        return 1;
    }
    if (model && !strcmp(a, "--model")) {
        if (++*i >= argc || nvfp4_model_from_name(model, argv[*i]) != NVFP4_OK)
            return cli_error(C, "--model needs sm90, exact or sm120"), -1;
        return 1;
    }
    return 0;
}

int cli_split_spec(const char *spec, char *path, size_t path_len, const char **name)
{
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec || !colon[1]) return -1;
    size_t n = (size_t)(colon - spec);
    if (n + 1 > path_len) return -1;
    memcpy(path, spec, n);
    path[n] = '\0';
    *name = colon + 1;
    return 0;
}

nvfp4_status cli_tensor_to_f32(const nvfp4_st_tensor *t, float **out)
{
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
    float *f = malloc(n ? n * sizeof *f : 1);
    if (!f) return NVFP4_ERR_OUT_OF_MEMORY;
    const uint8_t *p = t->data;
    for (size_t i = 0; i < n; i++) {
        switch (t->dtype) {
        case NVFP4_DTYPE_F32: memcpy(&f[i], p + 4 * i, 4); break;
        case NVFP4_DTYPE_F16: {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            f[i] = nvfp4_f16_to_f32(h);
            break;
        }
        case NVFP4_DTYPE_BF16: {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            f[i] = nvfp4_bf16_to_f32(h);
            break;
        }
        default: free(f); return NVFP4_ERR_UNSUPPORTED;
        }
    }
    *out = f;
    return NVFP4_OK;
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int64_t ordered(float f)
{
    int32_t i;
    memcpy(&i, &f, 4);
    return i < 0 ? (int64_t)INT32_MIN - i : i; /* -0 and +0 both map to 0 */
}

uint64_t cli_ulp_distance(float a, float b)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? 0 : UINT64_MAX;
    int64_t d = ordered(a) - ordered(b);
    return (uint64_t)(d < 0 ? -d : d);
}

int cli_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

int cli_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

int cli_refuse_same_file(const char *cmd, const char *in, const char *out, int force)
{
    if (force || !cli_same_file(in, out)) return 0;
    char a[512], b[512];
    return cli_error(cmd, "the output %s is the input %s: it would be replaced (use another "
                          "name, or --force)", cli_printable(a, sizeof a, out),
                     cli_printable(b, sizeof b, in));
}

const char *cli_printable(char *buf, size_t len, const char *s)
{
    size_t o = 0;
    for (; *s && o + 5 < len; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f) o += (size_t)snprintf(buf + o, len - o, "\\x%02X", c);
        else buf[o++] = (char)c;
    }
    if (*s && o + 4 <= len) o += (size_t)snprintf(buf + o, len - o, "...");
    buf[o < len ? o : len - 1] = '\0';
    return buf;
}

int64_t cli_count_nonfinite(const void *data, nvfp4_dtype dtype, int64_t n)
{
    const uint8_t *p = data;
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t b;
        if (dtype == NVFP4_DTYPE_F32) {
            memcpy(&b, p + 4 * i, 4);
            bad += (b & 0x7F800000u) == 0x7F800000u;
        } else {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            bad += dtype == NVFP4_DTYPE_F16 ? (h & 0x7C00u) == 0x7C00u : (h & 0x7F80u) == 0x7F80u;
        }
    }
    return bad;
}

/*------------------- shared by matmul, linear and check -------------------*/

int cli_load_nvfp4_spec(const char *C, const char *spec, nvfp4_tensor *t)
{
    char path[4096];
    const char *name;
    if (cli_split_spec(spec, path, sizeof path, &name))
        return cli_error(C, "'%s' is not FILE:NAME", spec);
    nvfp4_status st = nvfp4_load_tensor(t, path, name); /* any checkpoint format */
    if (st != NVFP4_OK) return cli_lib_error(C, st, spec);
    return 0;
}

int cli_load_vector_spec(const char *C, const char *spec, int64_t n, float **out)
{
    char path[4096];
    const char *name;
    if (cli_split_spec(spec, path, sizeof path, &name))
        return cli_error(C, "'%s' is not FILE:NAME", spec);
    nvfp4_st_file *f = NULL;
    nvfp4_status st = nvfp4_st_open(&f, path);
    if (st != NVFP4_OK) return cli_lib_error(C, st, "cannot read");
    const nvfp4_st_tensor *t = nvfp4_st_find(f, name);
    int rc = 0;
    if (!t) rc = cli_error(C, "%s has no tensor '%s'", path, name);
    else if (t->ndim != 1 || t->shape[0] != n)
        rc = cli_error(C, "'%s' must be 1-D with %lld values", spec, (long long)n);
    else if (cli_tensor_to_f32(t, out) != NVFP4_OK)
        rc = cli_error(C, "'%s' is %s; a bias must be F32, F16 or BF16", spec,
                       nvfp4_dtype_name(t->dtype));
    nvfp4_st_close(f);
    return rc;
}

int cli_write_result(const char *C, const char *path, const float *raw, const uint16_t *out,
                     int64_t m, int64_t n)
{
    nvfp4_st_writer *w = NULL;
    int64_t shape[2] = {m, n};
    nvfp4_status st = nvfp4_st_writer_new(&w);
    if (st == NVFP4_OK)
        st = nvfp4_st_writer_add(w, "raw", NVFP4_DTYPE_F32, 2, shape, raw, (size_t)(m * n) * 4);
    if (st == NVFP4_OK)
        st = nvfp4_st_writer_add(w, "out", NVFP4_DTYPE_BF16, 2, shape, out, (size_t)(m * n) * 2);
    if (st == NVFP4_OK) st = nvfp4_st_writer_write(w, path, NULL, NULL);
    nvfp4_st_writer_free(w);
    return st == NVFP4_OK ? 0 : cli_lib_error(C, st, "cannot write output");
}

/* Print max / mean ULP distance of (raw, out) from the exact oracle's. */
void cli_report_exact(const nvfp4_gemm_args *g, const float *raw, const uint16_t *out)
{
    size_t mn = (size_t)(g->a->rows * g->b->rows);
    float *xr = malloc(mn * 4);
    uint16_t *xo = malloc(mn * 2);
    if (!xr || !xo) {
        free(xr);
        free(xo);
        return;
    }
    nvfp4_gemm_args e = *g;
    e.raw = xr;
    e.out = xo;
    e.model = NVFP4_MODEL_EXACT;
    if (nvfp4_gemm_cpu(&e) == NVFP4_OK) {
        uint64_t rmax = 0, omax = 0;
        double rsum = 0, osum = 0;
        size_t rdiff = 0, odiff = 0;
        for (size_t i = 0; i < mn; i++) {
            uint64_t d = cli_ulp_distance(raw[i], xr[i]);
            uint64_t o = cli_ulp_distance(nvfp4_bf16_to_f32(out[i]), nvfp4_bf16_to_f32(xo[i]));
            o = o == UINT64_MAX ? o : o >> 16; /* BF16 ULPs */
            rmax = d > rmax ? d : rmax;
            omax = o > omax ? o : omax;
            rsum += (double)d;
            osum += (double)o;
            rdiff += d != 0;
            odiff += o != 0;
        }
        printf("vs exact oracle: raw max %llu ULP, mean %.4f ULP, %.2f%% differ; "
               "out max %llu BF16 ULP, mean %.4f, %.2f%% differ\n",
               (unsigned long long)rmax, rsum / (double)mn, 100.0 * (double)rdiff / (double)mn,
               (unsigned long long)omax, osum / (double)mn, 100.0 * (double)odiff / (double)mn);
    }
    free(xr);
    free(xo);
}
