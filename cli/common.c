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
    /* ERANGE also flags a subnormal result, which is a value like any other;
     * only an overflow to Inf or an underflow to 0 is out of range */
    if ((errno && !(errno == ERANGE && v != 0 && isfinite(v))) || end == s || *end) return -1;
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

/* The directory part of path, resolved (malloc'ed), or NULL. */
static char *resolved_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    char *real = dir ? realpath(dir, NULL) : NULL;
    free(dir);
    return real;
}

int cli_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    int ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ea || eb) return 0;
    /* neither exists yet: the same name in the same directory */
    const char *ba = strrchr(a, '/'), *bb = strrchr(b, '/');
    ba = ba ? ba + 1 : a;
    bb = bb ? bb + 1 : b;
    if (strcmp(ba, bb)) return 0;
    char *da = resolved_dir(a), *db = resolved_dir(b);
    int same = da && db && !strcmp(da, db);
    free(da);
    free(db);
    return same;
}

int cli_check_paths(const char *cmd, const char *const *inputs, int n_in,
                    const char *const *outputs, int n_out, int force)
{
    char a[512], b[512];
    for (int o = 0; o < n_out; o++) {
        if (!outputs[o]) continue;
        struct stat st;
        for (int i = 0; i < n_in && !force; i++) /* an input that is not there is not replaced */
            if (inputs[i] && stat(inputs[i], &st) == 0 && cli_same_file(inputs[i], outputs[o]))
                return cli_error(cmd, "the output %s is the input %s: it would be replaced (use "
                                      "another name, or --force)",
                                 cli_printable(a, sizeof a, outputs[o]),
                                 cli_printable(b, sizeof b, inputs[i]));
        for (int p = 0; p < o; p++)
            if (outputs[p] && cli_same_file(outputs[p], outputs[o]))
                return cli_error(cmd, "two outputs are one file (%s and %s): the second would "
                                      "replace the first; give them different names",
                                 cli_printable(a, sizeof a, outputs[p]),
                                 cli_printable(b, sizeof b, outputs[o]));
    }
    return 0;
}

int cli_open_output(const char *cmd, const char *path, nvfp4_atomic_file **f)
{
    nvfp4_status st = nvfp4_atomic_open(f, path);
    return st == NVFP4_OK ? 0 : cli_lib_error(cmd, st, "cannot write the output");
}

int cli_commit_safetensors(const char *cmd, nvfp4_st_writer *w, nvfp4_atomic_file *f,
                           const char *path)
{
    nvfp4_status st = nvfp4_st_writer_commit(w, f, cli_write_progress, (void *)path);
    cli_progress_done();
    return st == NVFP4_OK ? 0 : cli_lib_error(cmd, st, "cannot write the output");
}

int cli_commit_prepared(const char *C, nvfp4_status st, nvfp4_st_writer *w, nvfp4_atomic_file *f,
                        const char *path)
{
    int rc;
    if (st != NVFP4_OK) {
        nvfp4_atomic_discard(f);
        char what[600];
        snprintf(what, sizeof what, "preparing %s", path);
        rc = cli_lib_error(C, st, what);
    } else {
        rc = cli_commit_safetensors(C, w, f, path);
    }
    nvfp4_st_writer_free(w);
    return rc;
}

int cli_commit_text(const char *cmd, nvfp4_atomic_file *f, const char *text)
{
    nvfp4_status st = nvfp4_atomic_write(f, text, strlen(text));
    if (st == NVFP4_OK) st = nvfp4_atomic_commit(f);
    else nvfp4_atomic_discard(f);
    return st == NVFP4_OK ? 0 : cli_lib_error(cmd, st, "cannot write the report");
}

const char *cli_nonfinite_str(char *buf, size_t len, const nvfp4_nonfinite *nf)
{
    char first[64];
    snprintf(first, sizeof first, "%s", isnan(nf->first_value) ? "NaN"
                                        : nf->first_value > 0 ? "+Inf" : "-Inf");
    if (nf->nan && nf->inf)
        snprintf(buf, len, "%lld NaN and %lld Inf values (the first, %s, at row %lld, col %lld)",
                 (long long)nf->nan, (long long)nf->inf, first, (long long)nf->first_row,
                 (long long)nf->first_col);
    else
        snprintf(buf, len, "%lld %s value%s (%sat row %lld, col %lld)",
                 (long long)(nf->nan + nf->inf), nf->nan ? "NaN" : "Inf",
                 nf->nan + nf->inf == 1 ? "" : "s", nf->nan + nf->inf == 1 ? "" : "the first ",
                 (long long)nf->first_row, (long long)nf->first_col);
    return buf;
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

int cli_nonfinite_notice(const char *cmd, int strict, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (strict) return cli_error(cmd, "%s (--strict refuses NaN and Inf)", msg);
    cli_progress_done();
    fprintf(stderr, "nvfp4 %s: warning: %s\n", cmd, msg);
    return 0;
}

int cli_report_quantized(const char *C, const char *what, const nvfp4_nonfinite *in,
                         const nvfp4_tensor *q, int64_t rows, int64_t cols, int computed_scale,
                         const char *quantizer, int strict)
{
    nvfp4_nonfinite out;
    if (nvfp4_tensor_count_nonfinite(&out, q, rows, cols) != NVFP4_OK) return 0;
    int64_t bad_in = in->nan + in->inf, bad_out = out.nan + out.inf;
    if (!bad_in && !bad_out) return 0;
    char shown[256], held[160], became[256];
    cli_printable(shown, sizeof shown, what);
    float pts = q->per_tensor_scale;
    const char *scale_kind = computed_scale ? "computed as amax/2688" : "given";
    if (!bad_out)
        snprintf(became, sizeof became, "every quantized value is finite (%s quantizer "
                                        "clamped or replaced them)", quantizer);
    else if (!isfinite(pts))
        snprintf(became, sizeof became, "its per-tensor scale (%s) is %s, so %s%lld of its %lld "
                                        "x %lld quantized values are NaN or Inf",
                 scale_kind, isnan(pts) ? "NaN" : "Inf", bad_out == rows * cols ? "all " : "",
                 (long long)bad_out, (long long)rows, (long long)cols);
    else
        snprintf(became, sizeof became, "%lld of its %lld x %lld quantized values are NaN or Inf "
                                        "(the first at row %lld, col %lld: its block scale is "
                                        "NaN)",
                 (long long)bad_out, (long long)rows, (long long)cols,
                 (long long)out.first_row, (long long)out.first_col);
    if (bad_in)
        return cli_nonfinite_notice(C, strict, "'%s' holds %s; %s", shown,
                                    cli_nonfinite_str(held, sizeof held, in), became);
    if (computed_scale && pts == 0)
        return cli_nonfinite_notice(C, strict, "'%s' is all zeros: its per-tensor scale "
                                               "amax/2688 is 0 and %s arithmetic (0/0) "
                                               "gives every block a NaN scale, so %s",
                                    shown, quantizer, became);
    return cli_nonfinite_notice(C, strict, "'%s' is finite, but with the per-tensor scale %.9g %s",
                                shown, (double)pts, became);
}

int cli_report_operand(const char *C, const char *what, const nvfp4_tensor *t, int strict)
{
    nvfp4_nonfinite nf;
    if (nvfp4_tensor_count_nonfinite(&nf, t, t->rows, t->cols) != NVFP4_OK || !(nf.nan + nf.inf))
        return 0;
    char held[160], why[96] = "";
    if (!isfinite(t->per_tensor_scale))
        snprintf(why, sizeof why, "; its per-tensor scale is %s",
                 isnan(t->per_tensor_scale) ? "NaN" : "Inf");
    return cli_nonfinite_notice(C, strict, "%s has %s%s", what,
                                cli_nonfinite_str(held, sizeof held, &nf), why);
}

int cli_report_outputs(const char *C, const uint16_t *out, int64_t m, int64_t n, int strict)
{
    nvfp4_nonfinite nf;
    if (nvfp4_count_nonfinite(&nf, out, NVFP4_DTYPE_BF16, m, n) != NVFP4_OK || !(nf.nan + nf.inf))
        return 0;
    int64_t bad = nf.nan + nf.inf;
    return cli_nonfinite_notice(C, strict, "%s%lld of the %lld x %lld outputs are NaN or Inf "
                                           "(%lld NaN; the first at row %lld, col %lld)",
                                bad == m * n ? "all " : "", (long long)bad, (long long)m,
                                (long long)n, (long long)nf.nan, (long long)nf.first_row,
                                (long long)nf.first_col);
}

/*------------------- shared by matmul, linear and check -------------------*/

int cli_not_quantized(const char *C, const nvfp4_ckpt *c, const char *path, const char *name)
{
    for (size_t i = 0; i < nvfp4_ckpt_entries(c); i++) {
        nvfp4_ckpt_entry e;
        if (nvfp4_ckpt_entry_at(c, i, &e) != NVFP4_OK || strcmp(e.name, name)) continue;
        if (e.dtype != NVFP4_DTYPE_BF16 && e.dtype != NVFP4_DTYPE_F16 && e.dtype != NVFP4_DTYPE_F32)
            return 0;
        char shown[256], file[512];
        return cli_error(C, "%s: '%s' is %s, not NVFP4: quantize it first (nvfp4 quantize %s "
                            "OUT.safetensors), then use OUT.safetensors",
                         cli_printable(file, sizeof file, path), cli_printable(shown, sizeof shown, name),
                         nvfp4_dtype_name(e.dtype), file);
    }
    return 0;
}

/* cli_not_quantized() for the checkpoint at path (0 when it cannot be opened:
 * the loader's message stands). */
static int not_quantized_at(const char *C, const char *path, const char *name)
{
    nvfp4_ckpt *c = NULL;
    if (nvfp4_ckpt_open(&c, path, NVFP4_FORMAT_UNKNOWN) != NVFP4_OK) return 0;
    int rc = cli_not_quantized(C, c, path, name);
    nvfp4_ckpt_close(c);
    return rc;
}

int cli_load_nvfp4_spec(const char *C, const char *spec, nvfp4_tensor *t)
{
    char path[4096];
    const char *name;
    if (cli_split_spec(spec, path, sizeof path, &name))
        return cli_error(C, "'%s' is not FILE:NAME", spec);
    nvfp4_status st = nvfp4_load_tensor(t, path, name); /* any checkpoint format */
    if (st == NVFP4_OK) return 0;
    if (not_quantized_at(C, path, name)) return 1;
    return cli_lib_error(C, st, spec);
}

int cli_load_layer(const char *C, const nvfp4_ckpt *c, const char *path, const char *layer,
                   nvfp4_layer *l)
{
    nvfp4_status st = nvfp4_ckpt_load_layer(l, c, layer); /* any checkpoint format */
    if (st == NVFP4_OK) return 0;
    char weight[4200];
    snprintf(weight, sizeof weight, "%s.weight", layer);
    if (cli_not_quantized(C, c, path, weight)) return 1;
    return cli_lib_error(C, st, layer); /* the message names the file or tensor */
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

int cli_write_result(const char *C, nvfp4_atomic_file *f, const char *path, const float *raw,
                     const uint16_t *out, int64_t m, int64_t n)
{
    nvfp4_st_writer *w = NULL;
    int64_t shape[2] = {m, n};
    nvfp4_status st = nvfp4_st_writer_new(&w);
    if (st == NVFP4_OK)
        st = nvfp4_st_writer_add(w, "raw", NVFP4_DTYPE_F32, 2, shape, raw, (size_t)(m * n) * 4);
    if (st == NVFP4_OK)
        st = nvfp4_st_writer_add(w, "out", NVFP4_DTYPE_BF16, 2, shape, out, (size_t)(m * n) * 2);
    return cli_commit_prepared(C, st, w, f, path);
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
