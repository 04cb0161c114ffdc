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
    "  T          U8 [rows, cols/2]      E2M1 codes, element 2i in the high nibble\n"
    "  T_scale    F8_E4M3 [rows', c']    block scales, cuBLAS 128x4 tiled layout\n"
    "  T_scale_2  F32 []                 per-tensor scale\n"
    "and, when T is named LAYER.weight, LAYER.comfy_quant (U8, the JSON\n"
    "{\"format\": \"nvfp4\"}) marks the layer.  Rows and columns not multiples of 16\n"
    "are zero-padded to 16 first, as ComfyUI does.  Other tensors and the file's\n"
    "metadata are copied unchanged.  OUT is written to a temporary file and renamed.\n"
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
    "  --per-tensor-scale X   use X instead of amax|T| / (448 * 6) (compressed-tensors:\n"
    "                         X is the global scale, 2688 / amax)\n"
    "  --threads N            worker threads (default: all cores)\n"
    "  --force                write OUT even when it is IN\n";

#define MAX_ONLY 4096

static int is_float(nvfp4_dtype d)
{
    return d == NVFP4_DTYPE_BF16 || d == NVFP4_DTYPE_F16 || d == NVFP4_DTYPE_F32;
}

int cmd_quantize(int argc, char **argv)
{
    const char *C = "quantize";
    const char *in = NULL, *outp = NULL;
    const char *only[MAX_ONLY];
    int n_only = 0, have_pts = 0;
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
            if (++i >= argc || cli_parse_float(argv[i], &pts) || !(pts > 0) || !isfinite(pts))
                return cli_error(C, "--per-tensor-scale needs a positive finite number");
            have_pts = 1;
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
    if (cli_refuse_same_file(C, in, outp, force)) return 1;

    nvfp4_st_file *f = NULL;
    nvfp4_status st = nvfp4_st_open(&f, in);
    if (st != NVFP4_OK) return cli_lib_error(C, st, "cannot read input");

    size_t count = nvfp4_st_count(f);
    int rc = 1;
    char *selected = calloc(count ? count : 1, 1);
    nvfp4_ckpt_tensor *q = calloc(count ? count : 1, sizeof *q);
    nvfp4_st_writer *w = NULL;
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
        }
        selected[i] = (char)sel;
        n_sel += (size_t)sel;
    }
    if (n_sel == 0) {
        cli_error(C, "%s has no 2-D float tensor named *.weight; name tensors with --only", in);
        goto done;
    }

    double t0 = cli_now();
    size_t done_n = 0;
    for (size_t i = 0; i < count; i++) {
        if (!selected[i]) continue;
        const nvfp4_st_tensor *t = nvfp4_st_get(f, i);
        cli_progress("quantize: %s [%lld x %lld] (%zu/%zu)", t->name, (long long)t->shape[0],
                     (long long)t->shape[1], ++done_n, n_sel);
        if (tool == NVFP4_FORMAT_COMFYUI) {
            st = nvfp4_quantize(&q[i].t, t->data, t->dtype, t->shape[0], t->shape[1],
                                have_pts ? &pts : NULL, variant, (int)threads);
        } else {
            st = nvfp4_quantize_format(&q[i], t->data, t->dtype, t->shape[0], t->shape[1], tool,
                                       have_pts ? &pts : NULL, (int)threads);
        }
        if (st != NVFP4_OK) {
            char what[600];
            snprintf(what, sizeof what, "quantizing '%s'", t->name);
            cli_lib_error(C, st, what);
            goto done;
        }
    }
    double t_quant = cli_now() - t0;

    if ((st = nvfp4_st_writer_new(&w)) != NVFP4_OK) {
        cli_lib_error(C, st, "writer");
        goto done;
    }
    for (size_t i = 0; i < nvfp4_st_metadata_count(f); i++) {
        const char *k, *v;
        nvfp4_st_metadata(f, i, &k, &v);
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
        } else {
            st = nvfp4_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes);
        }
        if (st != NVFP4_OK) {
            cli_lib_error(C, st, "preparing output");
            goto done;
        }
    }
    st = nvfp4_st_writer_write(w, outp, cli_write_progress, (void *)outp);
    cli_progress_done();
    if (st != NVFP4_OK) {
        cli_lib_error(C, st, "cannot write output");
        goto done;
    }
    fprintf(stderr, "nvfp4 quantize: %zu tensor%s quantized in %.2f s -> %s\n", n_sel,
            n_sel == 1 ? "" : "s", t_quant, outp);
    rc = 0;
done:
    cli_progress_done();
    nvfp4_st_writer_free(w);
    if (q)
        for (size_t i = 0; i < count; i++) nvfp4_ckpt_tensor_free(&q[i]);
    free(q);
    free(selected);
    nvfp4_st_close(f);
    return rc;
}
