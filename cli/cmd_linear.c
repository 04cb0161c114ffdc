/* cmd_linear.c -- `nvfp4 linear`: BF16 activations x a ComfyUI NVFP4 layer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char help[] =
    "usage: nvfp4 linear W:LAYER X.safetensors:NAME -o OUT.safetensors [options]\n"
    "\n"
    "ComfyUI's NVFP4 linear: the activations X [M, k] (BF16, F16 or F32) are quantized\n"
    "to NVFP4 with ComfyUI's quantizer and a per-tensor scale, then multiplied by the\n"
    "layer's weight under the GEMM contract (docs/CONTRACT.md).  W is a checkpoint of\n"
    "any NVFP4 format (a .safetensors file, a directory, a .gguf file; `nvfp4 inspect`\n"
    "names it); ComfyUI's layer is LAYER.weight, LAYER.weight_scale, LAYER.weight_scale_2,\n"
    "optional LAYER.input_scale and LAYER.bias.  OUT holds out (BF16 [M, N]) and raw (F32).\n"
    "\n"
    "Shapes: the weight is [N, K] with K a multiple of 16 (nvfp4 quantize pads a\n"
    "weight's columns to 16, as ComfyUI does), and X may keep its own k: any k with\n"
    "roundup(k, 16) = K (k = 17 with K = 32); X is zero-padded to K, as ComfyUI\n"
    "does.  M is X's rows, N the weight's rows (the rows nvfp4 quantize recorded).\n"
    "\n"
    "options:\n"
    "  --input-scale static|dynamic  static: LAYER.input_scale; dynamic: amax|X|/2688\n"
    "                                (default: static when the layer has one)\n"
    "  --variant eager|cuda          ComfyUI quantizer variant (default eager)\n"
    "  --backend cpu|cuda|auto       where it runs (default auto).  cuda: BF16 activations\n"
    "                                are quantized inside the GEMM (the fused A producer);\n"
    "                                F16/F32 ones on the CPU first\n"
    "  --model sm90|exact|sm120      accumulation model (default sm90; the cuda backend\n"
    "                                computes its GPU's: sm120 on GB10 / RTX Blackwell)\n"
    "  --dump-quantized FILE         also write the quantized activations to FILE as\n"
    "                                `nvfp4 quantize --only x` would (x, x_scale, x_scale_2)\n"
    "  --strict                      fail when X, the weight or the outputs hold NaN or Inf\n"
    "  --threads N                   CPU threads (default: all cores)\n"
    "  --k-slices S                  K slices (docs/CONTRACT.md; default 1: one chain)\n"
    "  --force                       write OUT even when it is one of the input files\n"
    "\n"
    "NaN and Inf are reported: which element of X or the weight, what the quantized\n"
    "activations became (with the dynamic scale one NaN makes every value NaN) and how\n"
    "many outputs are not finite.\n";

/* The quantized activations, as `nvfp4 quantize --only x` writes them: the
 * quantizer's padded tensor and, when rows were padded, X's own rows. */
static int write_dump(const char *C, nvfp4_atomic_file *f, const char *path, const nvfp4_tensor *xq,
                      int64_t m)
{
    nvfp4_st_writer *w = NULL;
    nvfp4_status st = nvfp4_st_writer_new(&w);
    if (st == NVFP4_OK) st = nvfp4_st_add_nvfp4(w, "x", xq);
    if (st == NVFP4_OK && xq->rows != m) st = nvfp4_st_writer_set_rows(w, "x", m);
    return cli_commit_prepared(C, st, w, f, path);
}

int cmd_linear(int argc, char **argv)
{
    const char *C = "linear";
    const char *sw = NULL, *sx = NULL, *outp = NULL, *backend = "auto", *dump = NULL;
    int scale_mode = -1; /* -1 default, 0 static, 1 dynamic */
    nvfp4_variant variant = NVFP4_VARIANT_EAGER;
    nvfp4_model model = NVFP4_MODEL_SM90;
    long long threads = 0, k_slices = 1;
    int force = 0, strict = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int shared = cli_shared_option(C, argc, argv, &i, &threads, &backend, &model);
        if (shared < 0) return 1;
        if (shared) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return 0;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (++i >= argc) return cli_error(C, "-o needs a file");
            outp = argv[i];
        } else if (!strcmp(a, "--input-scale")) {
            if (++i >= argc) return cli_error(C, "--input-scale needs static or dynamic");
            if (!strcmp(argv[i], "static")) scale_mode = 0;
            else if (!strcmp(argv[i], "dynamic")) scale_mode = 1;
            else return cli_error(C, "--input-scale: '%s' is not static or dynamic", argv[i]);
        } else if (!strcmp(a, "--variant")) {
            if (++i >= argc) return cli_error(C, "--variant needs eager or cuda");
            if (!strcmp(argv[i], "eager")) variant = NVFP4_VARIANT_EAGER;
            else if (!strcmp(argv[i], "cuda")) variant = NVFP4_VARIANT_CUDA;
            else return cli_error(C, "--variant: '%s' is not eager or cuda", argv[i]);
        } else if (!strcmp(a, "--force")) {
            force = 1;
        } else if (!strcmp(a, "--strict")) {
            strict = 1;
        } else if (!strcmp(a, "--dump-quantized")) {
            if (++i >= argc) return cli_error(C, "--dump-quantized needs a file");
            dump = argv[i];
        } else if (!strcmp(a, "--k-slices")) {
            if (++i >= argc || cli_parse_int(argv[i], &k_slices) || k_slices < 1 ||
                k_slices > NVFP4_MAX_K_SLICES)
                return cli_error(C, "--k-slices needs a count in 1..%d", NVFP4_MAX_K_SLICES);
        } else if (a[0] == '-' && a[1]) {
            return cli_error(C, "unknown option '%s' (try --help)", a);
        } else if (!sw) {
            sw = a;
        } else if (!sx) {
            sx = a;
        } else {
            return cli_error(C, "unexpected argument '%s' (try --help)", a);
        }
    }
    if (!sw || !sx || !outp)
        return cli_error(C, "needs W.safetensors:LAYER X.safetensors:NAME -o OUT (try --help)");
    nvfp4_model gpu_model = NVFP4_MODEL_SM90; /* the GPU's kernel's model (sm120 on GB10 / RTX Blackwell) */
    const int gpu = nvfp4_cuda_model(&gpu_model) == NVFP4_OK;
    int use_cuda = !strcmp(backend, "cuda") || (!strcmp(backend, "auto") && gpu && model == gpu_model);
    if (use_cuda && model != gpu_model)
        return cli_error(C, "--backend cuda computes the %s model here", nvfp4_model_name(gpu_model));

    char wpath[4096], xpath[4096], name[4200];
    const char *layer, *xname;
    if (cli_split_spec(sw, wpath, sizeof wpath, &layer)) return cli_error(C, "'%s' is not FILE:LAYER", sw);
    if (cli_split_spec(sx, xpath, sizeof xpath, &xname)) return cli_error(C, "'%s' is not FILE:NAME", sx);
    const char *inputs[2] = {wpath, xpath}, *outputs[2] = {outp, dump};
    if (cli_check_paths(C, inputs, 2, outputs, 2, force)) return 1;

    int rc = 1;
    nvfp4_st_file *xf = NULL;
    nvfp4_tensor W = {0}, XQ = {0};
    float *bias = NULL, *raw = NULL, input_scale = 0;
    uint16_t *out = NULL;
    nvfp4_atomic_file *fout = NULL, *fdump = NULL;
    nvfp4_layer L = {0};
    nvfp4_ckpt *wc = NULL;
    nvfp4_status st = nvfp4_ckpt_open(&wc, wpath, NVFP4_FORMAT_UNKNOWN); /* any checkpoint format */
    if (st != NVFP4_OK) {
        cli_lib_error(C, st, "cannot read weights");
        goto done;
    }
    int load_failed = cli_load_layer(C, wc, wpath, layer, &L);
    nvfp4_ckpt_close(wc); /* the layer is a copy */
    if (load_failed) goto done;
    W = L.weight; /* the layer's arrays now belong to W and bias */
    bias = L.bias;
    if (scale_mode == -1) scale_mode = L.has_input_scale ? 0 : 1;
    if (scale_mode == 0) {
        snprintf(name, sizeof name, "%s.input_scale", layer);
        if (!L.has_input_scale) {
            cli_error(C, "%s has no '%s'; use --input-scale dynamic", wpath, name);
            goto done;
        }
        if (nvfp4_check_per_tensor_scale(L.input_scale, name) != NVFP4_OK) {
            cli_error(C, "%s: %s; use --input-scale dynamic", wpath, nvfp4_last_error());
            goto done;
        }
        input_scale = L.input_scale;
    }
    if ((st = nvfp4_st_open(&xf, xpath)) != NVFP4_OK) {
        cli_lib_error(C, st, "cannot read activations");
        goto done;
    }
    const nvfp4_st_tensor *X = nvfp4_st_find(xf, xname);
    if (!X) {
        cli_error(C, "%s has no tensor '%s'", xpath, xname);
        goto done;
    }
    if (X->ndim != 2 || (X->dtype != NVFP4_DTYPE_BF16 && X->dtype != NVFP4_DTYPE_F16 &&
                         X->dtype != NVFP4_DTYPE_F32)) {
        cli_error(C, "'%s' must be a 2-D BF16/F16/F32 tensor [M, K]", xname);
        goto done;
    }
    int64_t m = X->shape[0], k = X->shape[1], n = W.rows;
    if ((k + NVFP4_BLOCK - 1) / NVFP4_BLOCK * NVFP4_BLOCK != W.cols || k < 1) {
        cli_error(C, "'%s' has K = %lld but the weight %s has K = %lld: the activations need "
                     "K columns, or fewer that pad to it (roundup(k, 16) = %lld: k in %lld..%lld)",
                  xname, (long long)k, layer, (long long)W.cols, (long long)W.cols,
                  (long long)(W.cols - NVFP4_BLOCK + 1), (long long)W.cols);
        goto done;
    }
    if (m < 1 || m > INT64_MAX / 4 / (n ? n : 1)) {
        cli_error(C, "'%s' has %lld rows: need 1 to %lld", xname, (long long)m,
                  (long long)(INT64_MAX / 4 / (n ? n : 1)));
        goto done;
    }
    nvfp4_nonfinite nfx, nfb;
    if (nvfp4_count_nonfinite(&nfx, X->data, X->dtype, m, k) != NVFP4_OK ||
        nvfp4_count_nonfinite(&nfb, bias, NVFP4_DTYPE_F32, bias ? 1 : 0, n) != NVFP4_OK) {
        cli_lib_error(C, NVFP4_ERR_INTERNAL, "counting NaN and Inf");
        goto done;
    }
    snprintf(name, sizeof name, "the weight '%s.weight'", layer);
    if (cli_report_operand(C, name, &W, strict)) goto done;
    if (nfb.nan + nfb.inf) {
        char held[160];
        snprintf(name, sizeof name, "the bias '%s.bias' has %s", layer,
                 cli_nonfinite_str(held, sizeof held, &nfb));
        if (cli_nonfinite_notice(C, strict, "%s", name)) goto done;
    }
    raw = malloc((size_t)(m * n) * 4);
    out = malloc((size_t)(m * n) * 2);
    if (!raw || !out) {
        cli_error(C, "out of memory");
        goto done;
    }
    if (cli_open_output(C, outp, &fout) || (dump && cli_open_output(C, dump, &fdump))) goto done;
    nvfp4_linear_args la = {
        .x = X->data, .x_dtype = X->dtype, .m = m, .k = k, .weight = &W,
        .input_scale = scale_mode == 0 ? &input_scale : NULL, .variant = variant, .bias = bias,
        .raw = raw, .out = out, .model = model, .nthreads = (int)threads, .x_quantized = &XQ,
        .k_slices = (int)k_slices,
    };
    double t0 = cli_now();
    if (!use_cuda) {
        st = nvfp4_linear_cpu(&la);
    } else if (X->dtype == NVFP4_DTYPE_BF16) {
        st = nvfp4_linear_cuda_host(&la);
    } else {
        st = nvfp4_quantize(&XQ, X->data, X->dtype, m, k, la.input_scale, variant, (int)threads);
        if (st == NVFP4_OK) {
            nvfp4_tensor view = XQ; /* the m real rows */
            view.rows = m;
            nvfp4_gemm_args g = {.a = &view, .b = &W, .bias = bias, .raw = raw, .out = out,
                                 .model = model, .k_slices = (int)k_slices};
            st = nvfp4_gemm_cuda_host(&g);
        }
    }
    if (st != NVFP4_OK) {
        cli_lib_error(C, st, "linear");
        goto done;
    }
    printf("linear: %s M=%lld N=%lld K=%lld input-scale=%s (%.9g) variant=%s backend=%s: %.3f s\n",
           layer, (long long)m, (long long)n, (long long)W.cols, scale_mode ? "dynamic" : "static",
           XQ.per_tensor_scale, variant ? "cuda" : "eager", use_cuda ? "cuda" : "cpu",
           cli_now() - t0);
    if (cli_report_quantized(C, xname, &nfx, &XQ, m, k, scale_mode == 1, "ComfyUI's", strict) ||
        cli_report_outputs(C, out, m, n, strict))
        goto done;
    if (dump) {
        int d = write_dump(C, fdump, dump, &XQ, m);
        fdump = NULL; /* committed or discarded */
        if (d) goto done;
    }
    rc = cli_write_result(C, fout, outp, raw, out, m, n);
    fout = NULL;
done:
    nvfp4_atomic_discard(fout);
    nvfp4_atomic_discard(fdump);
    nvfp4_tensor_free(&W);
    nvfp4_tensor_free(&XQ);
    free(bias);
    free(raw);
    free(out);
    nvfp4_st_close(xf);
    return rc;
}
