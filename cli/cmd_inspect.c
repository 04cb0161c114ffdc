/* cmd_inspect.c -- `nvfp4 inspect`: what a checkpoint holds, in which format,
 * with which conventions. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char help[] =
    "usage: nvfp4 inspect PATH [--no-stats] [--from FORMAT]\n"
    "\n"
    "PATH is a .safetensors file, a checkpoint directory (model.safetensors or shards\n"
    "listed by model.safetensors.index.json, with config.json / hf_quant_config.json)\n"
    "or a .gguf file.  Prints:\n"
    "  format       comfyui, modelopt, compressed-tensors, gguf (or none), and what\n"
    "               decided it (a config file, tensor names, scale shapes)\n"
    "  conventions  the format's nibble order, block-scale layout and encoding, the\n"
    "               per-tensor scale's name and direction, zero / NaN scales, padding and\n"
    "               its quantizer's rounding (docs/FORMATS.md)\n"
    "  tensors      every tensor (name, dtype or ggml type, shape, bytes), the metadata,\n"
    "               and min / max / mean / NaN count of float tensors\n"
    "  NVFP4        each NVFP4 tensor: shape (its own rows where the metadata records\n"
    "               them, \"nvfp4.rows.NAME\", and the padded rows stored), the per-tensor\n"
    "               and input scale as stored, the block-scale range, zero / NaN blocks\n"
    "               and how many values are NaN or Inf\n"
    "  found        what the tensors show of the conventions: input scales, how the\n"
    "               per-tensor scales are stored, the scale byte of all-zero blocks (each\n"
    "               tool its own: ComfyUI 0x00, ModelOpt 0x38 = 1.0, compressed-tensors\n"
    "               0x20 = 0.125), NaN and negative block scales\n"
    "\n"
    "options:\n"
    "  --no-stats       skip the statistics\n"
    "  --from FORMAT    take PATH as this format instead of detecting it\n";

static void shape_str(int ndim, const int64_t *shape, char *buf, size_t n)
{
    size_t o = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
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

static const char *packing_str(nvfp4_code_packing p)
{
    switch (p) {
    case NVFP4_PACK_HI_FIRST: return "element 2i in the high nibble of byte i (hi-first)";
    case NVFP4_PACK_LO_FIRST: return "element 2i in the low nibble of byte i (lo-first)";
    default: return "per 16 elements, byte j holds element j (low) and j + 8 (high) (ggml)";
    }
}

static const char *store_str(nvfp4_scale_store s)
{
    switch (s) {
    case NVFP4_STORE_TILED: return "cuBLAS 128x4 tiles [roundup(rows,128), roundup(cols/16,4)]";
    case NVFP4_STORE_ROW_MAJOR: return "row-major [rows, cols/16]";
    default: return "inside ggml blocks: 4 scale bytes, then 32 code bytes, per 64 elements";
    }
}

static void print_conventions(const nvfp4_format_traits *tr)
{
    printf("conventions (%s):\n", tr->name);
    printf("  codes            %s\n", packing_str(tr->packing));
    printf("  block scales     %s, %s\n", store_str(tr->scale_store),
           tr->scale_code == NVFP4_SCALE_E4M3 ? "E4M3 (float8_e4m3fn: signed, 0x7F/0xFF NaN)"
                                              : "UE4M3 (ggml: bit 7 ignored, 0x00 and 0x7F mean 0)");
    if (tr->format == NVFP4_FORMAT_GGUF)
        printf("  per-tensor scale L.scale (F32, optional: absent means 1), multiplies\n");
    else
        printf("  per-tensor scale W%s (F32 %s), %s the block scales\n", tr->tensor_scale_suffix,
               tr->tensor_scale_ndim ? "[1]" : "[]",
               tr->tensor_scale_direction == NVFP4_SCALE_DIVIDES ? "divides" : "multiplies");
    printf("  input scale      L%s, %s\n", tr->input_scale_suffix,
           tr->tensor_scale_direction == NVFP4_SCALE_DIVIDES ? "divides" : "multiplies");
    printf("  zero/NaN scale   %s\n", tr->zero_nan);
    printf("  padding          %s\n", tr->padding);
    printf("  rounding         %s\n", tr->rounding);
}

static void list_tensors(const nvfp4_ckpt *c, int stats)
{
    char shown[4096], shown_v[1024];
    for (size_t i = 0; i < nvfp4_ckpt_metadata_count(c); i++) {
        const char *k, *v;
        nvfp4_ckpt_metadata(c, i, &k, &v);
        printf("  metadata %s = %s\n", cli_printable(shown, sizeof shown, k),
               cli_printable(shown_v, 204, v));
    }
    const char *file = NULL;
    size_t n = nvfp4_ckpt_entries(c);
    for (size_t i = 0; i < n; i++) {
        nvfp4_ckpt_entry e;
        if (nvfp4_ckpt_entry_at(c, i, &e) != NVFP4_OK) continue;
        if (!file || strcmp(file, e.file)) {
            printf("  -- %s\n", cli_printable(shown, sizeof shown, e.file));
            file = e.file;
        }
        char shape[256];
        shape_str(e.ndim, e.shape, shape, sizeof shape);
        printf("  %-48s %-8s %-20s %zu bytes\n", cli_printable(shown, sizeof shown, e.name), e.type,
               shape, e.nbytes);
        if (stats && (e.dtype == NVFP4_DTYPE_F32 || e.dtype == NVFP4_DTYPE_F16 ||
                      e.dtype == NVFP4_DTYPE_BF16)) {
            nvfp4_st_tensor t = {e.name, e.dtype, e.ndim, {0}, e.data, e.nbytes};
            memcpy(t.shape, e.shape, sizeof t.shape);
            float_stats(&t);
        }
    }
}

/* What the NVFP4 tensors show of their format's conventions, summed. */
typedef struct found {
    size_t tensors, bad, input_scales, scalar_rank[2], no_tensor_scale, padded_cols;
    int64_t zero_code_blocks, zero_scale_bytes[256], nan_scales, negative_scales;
} found;

static void nvfp4_stats(const nvfp4_ckpt *c, const char *w, int stats, found *fd)
{
    char shown[4096];
    cli_printable(shown, sizeof shown, w);
    nvfp4_ckpt_tensor ct;
    if (nvfp4_ckpt_read(&ct, c, w) != NVFP4_OK) {
        printf("  %s: NOT a valid NVFP4 tensor: %s\n", shown, nvfp4_last_error());
        fd->bad++;
        return;
    }
    int64_t rows; /* the logical rows: past them, ComfyUI's padding */
    if (nvfp4_ckpt_rows(c, w, &rows) != NVFP4_OK) {
        printf("  %s: NOT a valid NVFP4 tensor: %s\n", shown, nvfp4_last_error());
        fd->bad++;
        nvfp4_ckpt_tensor_free(&ct);
        return;
    }
    fd->tensors++;
    fd->input_scales += ct.has_input_scale != 0;
    fd->no_tensor_scale += !ct.has_tensor_scale;
    if (ct.has_tensor_scale) fd->scalar_rank[ct.tensor_scale_ndim ? 1 : 0]++;
    fd->padded_cols += ct.stored_cols != ct.t.cols;
    const nvfp4_format_traits *tr = nvfp4_format_traits_of(ct.format);
    char num[32];
    printf("  %s: %lld x %lld", shown, (long long)rows, (long long)ct.stored_cols);
    if (rows != ct.t.rows)
        printf(" (stored as %lld rows: ComfyUI's padding to 16)", (long long)ct.t.rows);
    if (ct.stored_cols != ct.t.cols) printf(" (blocks of %lld)", (long long)ct.t.cols);
    if (ct.has_tensor_scale)
        printf(", %s %s (0x%08x)",
               tr->tensor_scale_direction == NVFP4_SCALE_DIVIDES ? "global scale (divides)"
                                                                 : "per-tensor scale",
               float_str(num, sizeof num, ct.tensor_scale), nvfp4_f32_bits(ct.tensor_scale));
    else
        printf(", no per-tensor scale (1)");
    if (ct.has_input_scale) printf(", input scale %s", float_str(num, sizeof num, ct.input_scale));
    if (stats) /* the stored scale byte of blocks whose codes are all zero */
        for (int64_t r = 0; r < rows; r++)
            for (int64_t b = 0; b < ct.t.cols / 16; b++) {
                int zero = 1;
                for (int64_t k = 0; k < 16 && zero; k++) zero = !(nvfp4_tensor_code(&ct.t, r, 16 * b + k) & 7);
                if (!zero) continue;
                fd->zero_code_blocks++;
                fd->zero_scale_bytes[nvfp4_tensor_scale(&ct.t, r, b)]++;
            }
    nvfp4_tensor v;
    if (stats && nvfp4_ckpt_tensor_values(&v, &ct) == NVFP4_OK) {
        float smin = INFINITY, smax = 0;
        int64_t zero_blocks = 0, nan_scales = 0, neg = 0;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t b = 0; b < v.cols / 16; b++) {
                uint8_t byte = nvfp4_tensor_scale(&v, r, b);
                float s = nvfp4_e4m3_to_f32(byte);
                neg += (byte & 0x80) && !isnan(s) && s != 0;
                if (isnan(s)) nan_scales++;
                else if (s == 0) zero_blocks++;
                else {
                    s = fabsf(s);
                    if (s < smin) smin = s;
                    if (s > smax) smax = s;
                }
            }
        if (smax > 0)
            printf(", block scales %.6g..%.6g", smin, smax);
        else
            printf(", no nonzero finite block scale");
        printf(", %lld zero blocks", (long long)zero_blocks);
        fd->nan_scales += nan_scales;
        fd->negative_scales += neg;
        if (nan_scales) printf(", %lld NaN scales", (long long)nan_scales);
        if (neg) printf(", %lld negative scales", (long long)neg);
        nvfp4_nonfinite nf = {0};
        if (nvfp4_tensor_count_nonfinite(&nf, &v, rows, ct.stored_cols) == NVFP4_OK && nf.nan + nf.inf)
            printf(", %lld values NaN or Inf", (long long)(nf.nan + nf.inf));
        double bound = (double)smax * 6.0 * fabs((double)v.per_tensor_scale);
        if (nf.nan + nf.inf < rows * ct.stored_cols && isfinite(bound))
            printf(", %s <= %.6g", nf.nan + nf.inf ? "finite |value|" : "|value|", bound);
        nvfp4_tensor_free(&v);
    }
    printf("\n");
    nvfp4_ckpt_tensor_free(&ct);
}

static void print_found(const found *fd, const nvfp4_format_traits *tr, int stats)
{
    printf("found: %zu NVFP4 tensor%s", fd->tensors, fd->tensors == 1 ? "" : "s");
    if (fd->bad) printf(" (%zu more unreadable)", fd->bad);
    printf(", %zu with an input scale", fd->input_scales);
    if (fd->scalar_rank[0] || fd->scalar_rank[1])
        printf(", per-tensor scales stored as %s%s%s", fd->scalar_rank[0] ? "[]" : "",
               fd->scalar_rank[0] && fd->scalar_rank[1] ? " and " : "", fd->scalar_rank[1] ? "[1]" : "");
    if (fd->no_tensor_scale) printf(", %zu without one (1)", fd->no_tensor_scale);
    if (fd->padded_cols) printf(", %zu with a K that is not a multiple of 16", fd->padded_cols);
    if (stats) {
        printf("; %lld all-zero-code blocks", (long long)fd->zero_code_blocks);
        int shown = 0;
        for (int b = 0; b < 256 && fd->zero_code_blocks; b++) {
            if (!fd->zero_scale_bytes[b] || shown >= 3) continue;
            float v = tr->scale_code == NVFP4_SCALE_E4M3 ? nvfp4_e4m3_to_f32((uint8_t)b) : NAN;
            printf("%s scale 0x%02X%s%.6g%s x%lld", shown++ ? "," : " with", b, isnan(v) ? "" : " (",
                   isnan(v) ? 0.0 : (double)v, isnan(v) ? "" : ")", (long long)fd->zero_scale_bytes[b]);
        }
        if (fd->nan_scales) printf("; %lld NaN block scales", (long long)fd->nan_scales);
        if (fd->negative_scales) printf("; %lld negative block scales", (long long)fd->negative_scales);
    }
    printf("\n");
}

int cmd_inspect(int argc, char **argv)
{
    const char *C = "inspect";
    const char *path = NULL;
    nvfp4_format from = NVFP4_FORMAT_UNKNOWN;
    int stats = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(help, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--no-stats")) {
            stats = 0;
        } else if (!strcmp(argv[i], "--from")) {
            if (++i >= argc || nvfp4_format_from_name(&from, argv[i]) != NVFP4_OK)
                return cli_error(C, "--from needs comfyui, modelopt, compressed-tensors or gguf");
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_error(C, "unknown option '%s' (try --help)", argv[i]);
        } else if (!path) {
            path = argv[i];
        } else {
            return cli_error(C, "unexpected argument '%s' (try --help)", argv[i]);
        }
    }
    if (!path) return cli_error(C, "needs a checkpoint: FILE.safetensors, a directory or FILE.gguf (try --help)");
    nvfp4_ckpt *c = NULL;
    nvfp4_status st = nvfp4_ckpt_open(&c, path, from);
    if (st != NVFP4_OK) return cli_lib_error(C, st, "cannot read");

    char shown[4096];
    const nvfp4_format_traits *tr = nvfp4_format_traits_of(nvfp4_ckpt_format(c));
    cli_printable(shown, sizeof shown, path);
    printf("%s: format %s (%s)\n", shown, tr ? tr->name : "none", nvfp4_ckpt_evidence(c));
    if (tr) print_conventions(tr);
    uint64_t total = 0;
    for (size_t i = 0; i < nvfp4_ckpt_entries(c); i++) {
        nvfp4_ckpt_entry e;
        if (nvfp4_ckpt_entry_at(c, i, &e) == NVFP4_OK) total += e.nbytes;
    }
    printf("%zu tensors, %.2f MiB of data\n", nvfp4_ckpt_entries(c), total / 1048576.0);
    list_tensors(c, stats);
    size_t n = nvfp4_ckpt_count(c);
    found fd;
    memset(&fd, 0, sizeof fd);
    if (n) printf("NVFP4 tensors:\n");
    for (size_t i = 0; i < n; i++) nvfp4_stats(c, nvfp4_ckpt_name(c, i), stats, &fd);
    if (n) print_found(&fd, tr, stats);
    nvfp4_ckpt_close(c);
    return 0;
}
