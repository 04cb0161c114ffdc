/* cmd_inspect.c -- `nvfp4 inspect`: what a safetensors file holds. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char help[] =
    "usage: nvfp4 inspect FILE.safetensors [--no-stats]\n"
    "\n"
    "Lists every tensor (name, dtype, shape, bytes), the file's metadata, and the\n"
    "ComfyUI NVFP4 layers it recognises (T + T_scale + T_scale_2), with simple\n"
    "statistics: min / max / mean / NaN count of float tensors, and for NVFP4 layers\n"
    "the per-tensor scale, the block-scale range and the dequantized |max|.\n";

static void shape_str(const nvfp4_st_tensor *t, char *buf, size_t n)
{
    size_t o = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < t->ndim && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (o < n) snprintf(buf + o, n - o, "]");
}

/* "NaN", "Inf" or the value: the same words on every C library */
static const char *float_str(char *buf, size_t len, float v)
{
    if (isnan(v)) snprintf(buf, len, "NaN");
    else if (isinf(v)) snprintf(buf, len, "%sInf", v < 0 ? "-" : "");
    else snprintf(buf, len, "%.9g", (double)v);
    return buf;
}

static void float_stats(const nvfp4_st_tensor *t)
{
    float *v = NULL;
    if (cli_tensor_to_f32(t, &v) != NVFP4_OK) return;
    size_t n = t->nbytes / nvfp4_dtype_size(t->dtype), nan = 0, used = 0;
    double sum = 0, mn = INFINITY, mx = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (isnan(v[i])) {
            nan++;
            continue;
        }
        used++;
        sum += v[i];
        if (v[i] < mn) mn = v[i];
        if (v[i] > mx) mx = v[i];
    }
    if (used)
        printf("      min %.6g  max %.6g  mean %.6g", mn, mx, sum / (double)used);
    if (nan) printf("  NaN %zu", nan);
    if (used || nan) printf("\n");
    free(v);
}

int cmd_inspect(int argc, char **argv)
{
    const char *C = "inspect";
    const char *path = NULL;
    int stats = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(help, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--no-stats")) {
            stats = 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_error(C, "unknown option '%s' (try --help)", argv[i]);
        } else if (!path) {
            path = argv[i];
        } else {
            return cli_error(C, "unexpected argument '%s' (try --help)", argv[i]);
        }
    }
    if (!path) return cli_error(C, "needs FILE.safetensors (try --help)");
    nvfp4_st_file *f = NULL;
    nvfp4_status st = nvfp4_st_open(&f, path);
    if (st != NVFP4_OK) return cli_lib_error(C, st, "cannot read");

    size_t count = nvfp4_st_count(f);
    uint64_t total = 0;
    for (size_t i = 0; i < count; i++) total += nvfp4_st_get(f, i)->nbytes;
    /* names, keys and values come from the file: control bytes are shown as \xNN */
    char shown[4096], shown_v[1024];
    printf("%s: %zu tensors, %.2f MiB of data\n", cli_printable(shown, sizeof shown, path), count,
           total / 1048576.0);
    for (size_t i = 0; i < nvfp4_st_metadata_count(f); i++) {
        const char *k, *v;
        nvfp4_st_metadata(f, i, &k, &v);
        printf("  metadata %s = %s\n", cli_printable(shown, sizeof shown, k),
               cli_printable(shown_v, 204, v));
    }
    for (size_t i = 0; i < count; i++) {
        const nvfp4_st_tensor *t = nvfp4_st_get(f, i);
        char shape[256];
        shape_str(t, shape, sizeof shape);
        printf("  %-48s %-8s %-20s %zu bytes\n", cli_printable(shown, sizeof shown, t->name),
               nvfp4_dtype_name(t->dtype), shape,
               t->nbytes);
        if (stats && (t->dtype == NVFP4_DTYPE_F32 || t->dtype == NVFP4_DTYPE_F16 ||
                      t->dtype == NVFP4_DTYPE_BF16))
            float_stats(t);
    }
    int layers = 0;
    for (size_t i = 0; i < count; i++) {
        const nvfp4_st_tensor *t = nvfp4_st_get(f, i);
        if (!nvfp4_st_is_nvfp4(f, t->name)) continue;
        if (!layers++) printf("NVFP4 tensors:\n");
        nvfp4_tensor q = {0};
        st = nvfp4_st_load_nvfp4(&q, f, t->name);
        if (st != NVFP4_OK) {
            printf("  %s: NOT a valid NVFP4 tensor: %s\n", cli_printable(shown, sizeof shown, t->name),
                   nvfp4_last_error());
            continue;
        }
        char pts[32];
        printf("  %s: %lld x %lld", cli_printable(shown, sizeof shown, t->name), (long long)q.rows,
               (long long)q.cols);
        if (q.rows != t->shape[0])
            printf(" (stored as %lld rows: ComfyUI's padding to 16)", (long long)t->shape[0]);
        printf(", per-tensor scale %s", float_str(pts, sizeof pts, q.per_tensor_scale));
        if (stats) {
            float smin = INFINITY, smax = 0;
            int64_t zero_blocks = 0, nan_scales = 0;
            for (int64_t r = 0; r < q.rows; r++)
                for (int64_t b = 0; b < q.cols / 16; b++) {
                    float s = nvfp4_e4m3_to_f32(nvfp4_tensor_scale(&q, r, b));
                    if (isnan(s)) nan_scales++;
                    else if (s == 0) zero_blocks++;
                    else {
                        if (s < smin) smin = s;
                        if (s > smax) smax = s;
                    }
                }
            if (smax > 0)
                printf(", block scales %.6g..%.6g", smin, smax);
            else
                printf(", no nonzero finite block scale");
            printf(", %lld zero blocks", (long long)zero_blocks);
            if (nan_scales) printf(", %lld NaN scales", (long long)nan_scales);
            nvfp4_nonfinite nf;
            if (nvfp4_tensor_count_nonfinite(&nf, &q, q.rows, q.cols) == NVFP4_OK && nf.nan + nf.inf)
                printf(", %lld values NaN or Inf", (long long)(nf.nan + nf.inf));
            double bound = (double)smax * 6.0 * fabs((double)q.per_tensor_scale);
            if (nf.nan + nf.inf < q.rows * q.cols && isfinite(bound))
                printf(", %s <= %.6g", nf.nan + nf.inf ? "finite |value|" : "|value|", bound);
        }
        printf("\n");
        nvfp4_tensor_free(&q);
    }
    nvfp4_st_close(f);
    return 0;
}
