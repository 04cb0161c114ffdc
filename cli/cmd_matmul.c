/* cmd_matmul.c -- `nvfp4 matmul`: NVFP4 x NVFP4 under an accumulation model. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char help[] =
    "usage: nvfp4 matmul A.safetensors:NAME B.safetensors:NAME -o OUT.safetensors [options]\n"
    "\n"
    "raw = A x B^T accumulated as the chosen tensor-core model adds (docs/CONTRACT.md);\n"
    "out = BF16(FP32(alpha * raw) [+ bias]), alpha = FP32(scale_2(A) * scale_2(B)).\n"
    "A is [M, K] activations, B is [N, K] weights, each an NVFP4 tensor stored\n"
    "ComfyUI-style (NAME, NAME_scale, NAME_scale_2), with the rows the file records\n"
    "for it (nvfp4 quantize records them when it pads rows to 16).  OUT holds raw\n"
    "(F32 [M, N]) and out (BF16 [M, N]).  NaN and Inf among the operands' values and\n"
    "the outputs are reported.\n"
    "\n"
    "options:\n"
    "  --model sm90|exact|sm120   accumulation model (default sm90: Hopper, measured)\n"
    "  --backend cpu|cuda|auto    auto: the GPU's kernel when usable and the model is\n"
    "                             its (sm90 on H100 / H200, sm120 on GB10 / RTX\n"
    "                             Blackwell), else the CPU (default auto)\n"
    "  --bias FILE:NAME           a 1-D float tensor of N values added in FP32\n"
    "  --compare-exact            also report the ULP distance of raw and out from the\n"
    "                             exact (correctly rounded) oracle\n"
    "  --threads N                CPU threads (default: all cores)\n"
    "  --k-slices S               K slices (docs/CONTRACT.md; default 1: one chain)\n"
    "  --strict                   fail when an operand, the bias or the outputs hold NaN\n"
    "                             or Inf\n"
    "  --force                    write OUT even when it is one of the input files\n";

int cmd_matmul(int argc, char **argv)
{
    const char *C = "matmul";
    const char *sa = NULL, *sb = NULL, *outp = NULL, *sbias = NULL, *backend = "auto";
    nvfp4_model model = NVFP4_MODEL_SM90;
    int cmp_exact = 0, force = 0, strict = 0;
    long long threads = 0, k_slices = 1;
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
        } else if (!strcmp(a, "--bias")) {
            if (++i >= argc) return cli_error(C, "--bias needs FILE:NAME");
            sbias = argv[i];
        } else if (!strcmp(a, "--compare-exact")) {
            cmp_exact = 1;
        } else if (!strcmp(a, "--k-slices")) {
            if (++i >= argc || cli_parse_int(argv[i], &k_slices) || k_slices < 1 ||
                k_slices > NVFP4_MAX_K_SLICES)
                return cli_error(C, "--k-slices needs a count in 1..%d", NVFP4_MAX_K_SLICES);
        } else if (!strcmp(a, "--force")) {
            force = 1;
        } else if (!strcmp(a, "--strict")) {
            strict = 1;
        } else if (a[0] == '-' && a[1]) {
            return cli_error(C, "unknown option '%s' (try --help)", a);
        } else if (!sa) {
            sa = a;
        } else if (!sb) {
            sb = a;
        } else {
            return cli_error(C, "unexpected argument '%s' (try --help)", a);
        }
    }
    if (!sa || !sb || !outp)
        return cli_error(C, "needs A.safetensors:NAME B.safetensors:NAME -o OUT (try --help)");
    nvfp4_model gpu_model = NVFP4_MODEL_SM90; /* the GPU's kernel's model (sm120 on GB10 / RTX Blackwell) */
    const int gpu = nvfp4_cuda_model(&gpu_model) == NVFP4_OK;
    int use_cuda = !strcmp(backend, "cuda") || (!strcmp(backend, "auto") && gpu && model == gpu_model);
    if (use_cuda && model != gpu_model)
        return cli_error(C, "--backend cuda computes the %s model here; use --backend cpu "
                            "for --model %s", nvfp4_model_name(gpu_model), nvfp4_model_name(model));
    const char *specs[3] = {sa, sb, sbias}, *inputs[3] = {NULL, NULL, NULL};
    char paths[3][4096];
    for (int i = 0; i < 3; i++) {
        const char *name;
        if (specs[i] && !cli_split_spec(specs[i], paths[i], sizeof paths[i], &name))
            inputs[i] = paths[i];
    }
    if (cli_check_paths(C, inputs, 3, &outp, 1, force)) return 1;

    nvfp4_tensor A = {0}, B = {0};
    float *bias = NULL, *raw = NULL;
    uint16_t *out = NULL;
    nvfp4_atomic_file *fout = NULL;
    int rc = 1;
    if (cli_load_nvfp4_spec(C, sa, &A) || cli_load_nvfp4_spec(C, sb, &B)) goto done;
    if (A.cols != B.cols) {
        cli_error(C, "K differs: A is %lld x %lld, B is %lld x %lld", (long long)A.rows,
                  (long long)A.cols, (long long)B.rows, (long long)B.cols);
        goto done;
    }
    if (sbias && cli_load_vector_spec(C, sbias, B.rows, &bias)) goto done;
    char what[4200];
    snprintf(what, sizeof what, "A '%s'", sa);
    if (cli_report_operand(C, what, &A, strict)) goto done;
    snprintf(what, sizeof what, "B '%s'", sb);
    if (cli_report_operand(C, what, &B, strict)) goto done;
    nvfp4_nonfinite nfb;
    if (bias && nvfp4_count_nonfinite(&nfb, bias, NVFP4_DTYPE_F32, 1, B.rows) == NVFP4_OK &&
        nfb.nan + nfb.inf) {
        char held[160];
        if (cli_nonfinite_notice(C, strict, "the bias '%s' has %s", sbias,
                                 cli_nonfinite_str(held, sizeof held, &nfb)))
            goto done;
    }
    if (A.rows > INT64_MAX / 4 / (B.rows ? B.rows : 1)) {
        cli_error(C, "a %lld x %lld result is too large", (long long)A.rows, (long long)B.rows);
        goto done;
    }
    size_t mn = (size_t)(A.rows * B.rows);
    raw = malloc(mn * 4);
    out = malloc(mn * 2);
    if (!raw || !out) {
        cli_error(C, "out of memory for a %lld x %lld result", (long long)A.rows, (long long)B.rows);
        goto done;
    }
    if (cli_open_output(C, outp, &fout)) goto done;
    nvfp4_gemm_args g = {.a = &A, .b = &B, .bias = bias, .raw = raw, .out = out,
                         .model = model, .nthreads = (int)threads, .k_slices = (int)k_slices};
    double t0 = cli_now();
    nvfp4_status st = use_cuda ? nvfp4_gemm_cuda_host(&g) : nvfp4_gemm_cpu(&g);
    double dt = cli_now() - t0;
    if (st != NVFP4_OK) {
        cli_lib_error(C, st, use_cuda ? "cuda backend" : "cpu backend");
        goto done;
    }
    printf("matmul: M=%lld N=%lld K=%lld model=%s backend=%s: %.3f s", (long long)A.rows,
           (long long)B.rows, (long long)A.cols, nvfp4_model_name(model),
           use_cuda ? "cuda" : "cpu", dt);
    if (use_cuda) printf(" (copies included; nvfp4 bench times the kernels)");
    else printf(" (%s, %d threads)", nvfp4_cpu_simd_name(),
                threads ? (int)threads : nvfp4_default_threads());
    printf("\n");
    if (cli_report_outputs(C, out, A.rows, B.rows, strict)) goto done;
    if (cmp_exact) cli_report_exact(&g, raw, out);
    rc = cli_write_result(C, fout, outp, raw, out, A.rows, B.rows);
    fout = NULL;
done:
    nvfp4_atomic_discard(fout);
    nvfp4_tensor_free(&A);
    nvfp4_tensor_free(&B);
    free(bias);
    free(raw);
    free(out);
    return rc;
}
