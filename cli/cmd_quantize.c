/* cmd_quantize.c -- `nvfp4 quantize`: float tensors -> ComfyUI NVFP4 layers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char help[] =
    "usage: nvfp4 quantize IN.safetensors OUT.safetensors [options]\n"
    "\n"
    "Quantize 2-D floating tensors (BF16, F16, F32) to NVFP4 exactly as ComfyUI's\n"
    "quantizer (comfy-kitchen quantize_nvfp4) does.  Each selected tensor T becomes\n"
    "  T          U8 [rows', cols'/2]    E2M1 codes, element 2i in the high nibble\n"
    "  T_scale    F8_E4M3 [r128, c4]     block scales, cuBLAS 128x4 tiled layout\n"
    "  T_scale_2  F32 []                 per-tensor scale\n"
    "and, when T is named LAYER.weight, LAYER.comfy_quant (U8, the JSON\n"
    "{\"format\": \"nvfp4\"}) marks the layer.  Rows and columns not multiples of 16\n"
    "are zero-padded to 16 first, as ComfyUI does (rows', cols'); the file's metadata\n"
    "then records T's own rows (\"nvfp4.rows.T\"), so that matmul, linear, explain,\n"
    "inspect and dequantize see the rows T had.  Other tensors and the metadata are\n"
    "copied unchanged.  OUT is written to a temporary file and renamed.\n"
    "\n"
    "NaN and Inf in T are reported (which element, and what the quantized tensor\n"
    "became: with a computed scale one NaN makes every value NaN); --strict refuses\n"
    "them.\n"
    "\n"
    "options:\n"
    "  --only NAME            quantize NAME (repeatable); default: every 2-D float\n"
    "                         tensor whose name ends in .weight\n"
    "  --variant eager|cuda   comfy-kitchen's eager (divide, default) or CUDA\n"
    "                         (multiply by the reciprocal) rounding path\n"
    "  --variant modelopt     NVIDIA ModelOpt's quantizer (NVFP4QTensor.quantize), written\n"
    "                         as ModelOpt stores it: T (codes, element 2i low), T_scale\n"
    "                         [rows, cols/16] row-major, T_scale_2 (docs/FORMATS.md)\n"
    "  --variant compressed-tensors\n"
    "                         compressed-tensors' (llm-compressor's min-max observer, its\n"
    "                         arithmetic in T's dtype), written as T_packed, T_scale,\n"
    "                         T_global_scale (the per-tensor scale's reciprocal)\n"
    "  --per-tensor-scale X   use X (finite, > 0) instead of amax|T| / (448 * 6)\n"
    "                         (compressed-tensors: X is the global scale, 2688 / amax)\n"
    "  --strict               fail when a tensor holds NaN or Inf, or quantizes to them\n"
    "  --threads N            worker threads (default: all cores)\n"
    "  --force                write OUT even when it is IN\n";

#define MAX_ONLY 4096

static int is_float(nvfp4_dtype d)
{
    return d == NVFP4_DTYPE_BF16 || d == NVFP4_DTYPE_F16 || d == NVFP4_DTYPE_F32;
}

/* Why no tensor was selected, when a *.weight tensor exists but is not a 2-D
 * float one: 1 with the message printed, else 0. */
static int explain_unselected(const char *C, const nvfp4_st_file *f, const char *in)
{
    for (size_t i = 0; i < nvfp4_st_count(f); i++) {
        const nvfp4_st_tensor *t = nvfp4_st_get(f, i);
        if (!cli_ends_with(t->name, ".weight") || (t->ndim == 2 && is_float(t->dtype))) continue;
        char shown[256];
        return cli_error(C, "%s: '%s' is %s with %d dimension%s; nvfp4 quantizes 2-D BF16, F16 "
                            "and F32 tensors (convert it first, or name others with --only)",
                         in, cli_printable(shown, sizeof shown, t->name),
                         nvfp4_dtype_name(t->dtype), t->ndim, t->ndim == 1 ? "" : "s");
    }
    return 0;
}

/* A LAYER.weight being quantized whose LAYER.comfy_quant exists but is not
 * ComfyUI's NVFP4 marker: ComfyUI would read that tensor as the layer's
 * marker.  1 with the message printed, else 0. */
static int marker_clash(const char *C, const nvfp4_st_file *f, const char *weight)
{
    char marker[4096], shown[256];
    if (!nvfp4_st_marker_name(marker, sizeof marker, weight) || !nvfp4_st_find(f, marker) ||
        nvfp4_st_is_nvfp4_marker(f, marker))
        return 0;
    return cli_error(C, "'%s' exists and is not ComfyUI's NVFP4 marker ({\"format\": \"nvfp4\"}), "
                        "but ComfyUI reads that name as the marker of the quantized layer; "
                        "rename the tensor first",
                     cli_printable(shown, sizeof shown, marker));
}

/* Does metadata key k record the logical rows of a tensor being quantized
 * (it is written afresh for the result)? */
static int is_stale_rows_key(const char *k, const nvfp4_st_file *f, const char *selected)
{
    size_t plen = sizeof NVFP4_ST_ROWS_KEY_PREFIX - 1;
    if (strncmp(k, NVFP4_ST_ROWS_KEY_PREFIX, plen)) return 0;
    for (size_t i = 0; i < nvfp4_st_count(f); i++)
        if (selected[i] && !strcmp(nvfp4_st_get(f, i)->name, k + plen)) return 1;
    return 0;
}

int cmd_quantize(int argc, char **argv)
{
    const char *C = "quantize";
    const char *in = NULL, *outp = NULL;
    const char *only[MAX_ONLY];
    int n_only = 0, have_pts = 0, strict = 0;
    long long threads = 0;
    float pts = 0;
    int force = 0;
    nvfp4_variant variant = NVFP4_VARIANT_EAGER;
    nvfp4_format tool = NVFP4_FORMAT_COMFYUI; /* a checkpoint tool's quantizer and layout */

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int shared = cli_shared_option(C, argc, argv, &i, &threads, NULL, NULL);
        if (shared < 0) return 1;
        if (shared) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return 0;
        } else if (!strcmp(a, "--only")) {
            if (++i >= argc) return cli_error(C, "--only needs a tensor name");
            if (n_only == MAX_ONLY) return cli_error(C, "too many --only names");
            only[n_only++] = argv[i];
        } else if (!strcmp(a, "--variant")) {
            if (++i >= argc)
                return cli_error(C, "--variant needs eager, cuda, modelopt or compressed-tensors");
            if (!strcmp(argv[i], "eager")) variant = NVFP4_VARIANT_EAGER;
            else if (!strcmp(argv[i], "cuda")) variant = NVFP4_VARIANT_CUDA;
            else if (!strcmp(argv[i], "modelopt")) tool = NVFP4_FORMAT_MODELOPT;
            else if (!strcmp(argv[i], "compressed-tensors")) tool = NVFP4_FORMAT_COMPRESSED_TENSORS;
            else
                return cli_error(C, "--variant: '%s' is not eager, cuda, modelopt or "
                                    "compressed-tensors", argv[i]);
        } else if (!strcmp(a, "--per-tensor-scale")) {
            if (++i >= argc || cli_parse_float(argv[i], &pts))
                return cli_error(C, "--per-tensor-scale needs a number (finite, > 0)");
            nvfp4_status st = nvfp4_check_per_tensor_scale(pts, "--per-tensor-scale");
            if (st != NVFP4_OK) return cli_error(C, "%s", nvfp4_last_error());
            have_pts = 1;
        } else if (!strcmp(a, "--strict")) {
            strict = 1;
        } else if (!strcmp(a, "--force")) {
            force = 1;
        } else if (a[0] == '-' && a[1]) {
            return cli_error(C, "unknown option '%s' (try --help)", a);
        } else if (!in) {
            in = a;
        } else if (!outp) {
            outp = a;
        } else {
            return cli_error(C, "unexpected argument '%s' (try --help)", a);
        }
    }
    if (!in || !outp) return cli_error(C, "needs IN.safetensors and OUT.safetensors (try --help)");
    if (cli_check_paths(C, &in, 1, &outp, 1, force)) return 1;

    nvfp4_st_file *f = NULL;
    nvfp4_status st = nvfp4_st_open(&f, in);
    if (st != NVFP4_OK) return cli_lib_error(C, st, "cannot read input");

    size_t count = nvfp4_st_count(f);
    int rc = 1;
    char *selected = calloc(count ? count : 1, 1);
    nvfp4_ckpt_tensor *q = calloc(count ? count : 1, sizeof *q);
    nvfp4_st_writer *w = NULL;
    nvfp4_atomic_file *out = NULL;
    if (!selected || !q) {
        cli_error(C, "out of memory");
        goto done;
    }
    for (int j = 0; j < n_only; j++) {
        const nvfp4_st_tensor *t = nvfp4_st_find(f, only[j]);
        if (!t) {
            cli_error(C, "%s has no tensor named '%s'", in, only[j]);
            goto done;
        }
        if (t->ndim != 2 || !is_float(t->dtype)) {
            cli_error(C, "'%s' is %s with %d dimensions; only 2-D BF16/F16/F32 tensors can be "
                         "quantized", only[j], nvfp4_dtype_name(t->dtype), t->ndim);
            goto done;
        }
    }
    size_t n_sel = 0;
    for (size_t i = 0; i < count; i++) {
        const nvfp4_st_tensor *t = nvfp4_st_get(f, i);
        int sel = 0;
        if (n_only) {
            for (int j = 0; j < n_only; j++) sel |= !strcmp(only[j], t->name);
        } else {
            sel = t->ndim == 2 && is_float(t->dtype) && cli_ends_with(t->name, ".weight");
        }
        if (sel && t->shape[0] * t->shape[1] == 0) {
            cli_error(C, "'%s' is empty (%lld x %lld); nothing to quantize", t->name,
                      (long long)t->shape[0], (long long)t->shape[1]);
            goto done;
        }
        if (sel) {
            char buf[4096];
            for (int s = 0; s < 2; s++) {
                snprintf(buf, sizeof buf, "%s%s", t->name, s ? "_scale_2" : "_scale");
                if (nvfp4_st_find(f, buf)) {
                    cli_error(C, "%s already has '%s'; is '%s' already quantized?", in, buf,
                              t->name);
                    goto done;
                }
            }
            if (tool == NVFP4_FORMAT_COMFYUI && marker_clash(C, f, t->name)) goto done;
        }
        selected[i] = (char)sel;
        n_sel += (size_t)sel;
    }
    if (n_sel == 0) {
        if (!explain_unselected(C, f, in))
            cli_error(C, "%s has no 2-D float tensor named *.weight; name tensors with --only", in);
        goto done;
    }
    if (cli_open_output(C, outp, &out)) goto done;
    const char *tool_words = tool == NVFP4_FORMAT_MODELOPT             ? "ModelOpt's"
                             : tool == NVFP4_FORMAT_COMPRESSED_TENSORS ? "compressed-tensors'"
                                                                       : "ComfyUI's";

    double t0 = cli_now();
    size_t done_n = 0;
    for (size_t i = 0; i < count; i++) {
        if (!selected[i]) continue;
        const nvfp4_st_tensor *t = nvfp4_st_get(f, i);
        cli_progress("quantize: %s [%lld x %lld] (%zu/%zu)", t->name, (long long)t->shape[0],
                     (long long)t->shape[1], ++done_n, n_sel);
        nvfp4_nonfinite nf;
        st = nvfp4_count_nonfinite(&nf, t->data, t->dtype, t->shape[0], t->shape[1]);
        if (st == NVFP4_OK && tool == NVFP4_FORMAT_COMFYUI)
            st = nvfp4_quantize(&q[i].t, t->data, t->dtype, t->shape[0], t->shape[1],
                                have_pts ? &pts : NULL, variant, (int)threads);
        else if (st == NVFP4_OK)
            st = nvfp4_quantize_format(&q[i], t->data, t->dtype, t->shape[0], t->shape[1], tool,
                                       have_pts ? &pts : NULL, (int)threads);
        if (st != NVFP4_OK) {
            char what[600];
            snprintf(what, sizeof what, "quantizing '%s'", t->name);
            cli_lib_error(C, st, what);
            goto done;
        }
        if (cli_report_quantized(C, t->name, &nf, &q[i].t, t->shape[0], t->shape[1], !have_pts,
                                 tool_words, strict))
            goto done;
    }
    double t_quant = cli_now() - t0;

    if ((st = nvfp4_st_writer_new(&w)) != NVFP4_OK) {
        cli_lib_error(C, st, "writer");
        goto done;
    }
    for (size_t i = 0; i < nvfp4_st_metadata_count(f); i++) {
        const char *k, *v;
        nvfp4_st_metadata(f, i, &k, &v);
        if (is_stale_rows_key(k, f, selected)) continue;
        if ((st = nvfp4_st_writer_set_metadata(w, k, v)) != NVFP4_OK) {
            cli_lib_error(C, st, "metadata");
            goto done;
        }
    }
    for (size_t i = 0; i < count; i++) {
        const nvfp4_st_tensor *t = nvfp4_st_get(f, i);
        if (selected[i] && tool != NVFP4_FORMAT_COMFYUI) {
            st = nvfp4_st_add_format(w, t->name, &q[i]);
        } else if (selected[i]) {
            /* a LAYER.weight becomes a whole ComfyUI layer, marker included
             * (unless the input already has the marker, which is copied) */
            char marker[4096];
            if (nvfp4_st_marker_name(marker, sizeof marker, t->name) && !nvfp4_st_find(f, marker)) {
                char layer[4096];
                snprintf(layer, sizeof layer, "%.*s", (int)(strlen(t->name) - strlen(".weight")),
                         t->name);
                st = nvfp4_st_add_nvfp4_layer(w, layer, &q[i].t);
            } else {
                st = nvfp4_st_add_nvfp4(w, t->name, &q[i].t);
            }
            /* ComfyUI's bytes keep the padded rows; the metadata keeps T's own */
            if (st == NVFP4_OK && q[i].t.rows != t->shape[0])
                st = nvfp4_st_writer_set_rows(w, t->name, t->shape[0]);
        } else {
            st = nvfp4_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes);
        }
        if (st != NVFP4_OK) {
            cli_lib_error(C, st, "preparing output");
            goto done;
        }
    }
    rc = cli_commit_safetensors(C, w, out, outp);
    out = NULL; /* committed or discarded */
    if (rc) goto done;
    fprintf(stderr, "nvfp4 quantize: %zu tensor%s quantized in %.2f s -> %s\n", n_sel,
            n_sel == 1 ? "" : "s", t_quant, outp);
done:
    cli_progress_done();
    nvfp4_atomic_discard(out);
    nvfp4_st_writer_free(w);
    if (q)
        for (size_t i = 0; i < count; i++) nvfp4_ckpt_tensor_free(&q[i]);
    free(q);
    free(selected);
    nvfp4_st_close(f);
    return rc;
}
