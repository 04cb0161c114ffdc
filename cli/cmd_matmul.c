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
    "ComfyUI-style (NAME, NAME_scale, NAME_scale_2).  OUT holds raw (F32 [M, N]) and\n"
    "out (BF16 [M, N]).\n"
    "\n"
    "options:\n"
    "  --model sm90|exact|sm120   accumulation model (default sm90: Hopper, measured)\n"
    "  --backend cpu|cuda|auto    auto: the H200 kernel when usable and the model is\n"
    "                             sm90, else the CPU (default auto)\n"
    "  --bias FILE:NAME           a 1-D float tensor of N values added in FP32\n"
    "  --compare-exact            also report the ULP distance of raw and out from the\n"
    "                             exact (correctly rounded) oracle\n"
    "  --threads N                CPU threads (default: all cores)\n"
    "  --force                    write OUT even when it is one of the input files\n";

int cli_load_nvfp4_spec(const char *C, const char *spec, nvfp4_tensor *t)
{
    char path[4096];
    const char *name;
    if (cli_split_spec(spec, path, sizeof path, &name))
        return cli_error(C, "'%s' is not FILE:NAME", spec);
    nvfp4_st_file *f = NULL;
    nvfp4_status st = nvfp4_st_open(&f, path);
    if (st != NVFP4_OK) return cli_lib_error(C, st, "cannot read");
    st = nvfp4_st_load_nvfp4(t, f, name);
    nvfp4_st_close(f);
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

int cmd_matmul(int argc, char **argv)
{
    const char *C = "matmul";
    const char *sa = NULL, *sb = NULL, *outp = NULL, *sbias = NULL, *backend = "auto";
    nvfp4_model model = NVFP4_MODEL_SM90;
    int cmp_exact = 0, force = 0;
    long long threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return 0;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (++i >= argc) return cli_error(C, "-o needs a file");
            outp = argv[i];
        } else if (!strcmp(a, "--model")) {
            if (++i >= argc || nvfp4_model_from_name(&model, argv[i]) != NVFP4_OK)
                return cli_error(C, "--model needs sm90, exact or sm120");
        } else if (!strcmp(a, "--backend")) {
            if (++i >= argc || (strcmp(argv[i], "cpu") && strcmp(argv[i], "cuda") &&
                                strcmp(argv[i], "auto")))
                return cli_error(C, "--backend needs cpu, cuda or auto");
            backend = argv[i];
        } else if (!strcmp(a, "--bias")) {
            if (++i >= argc) return cli_error(C, "--bias needs FILE:NAME");
            sbias = argv[i];
        } else if (!strcmp(a, "--compare-exact")) {
            cmp_exact = 1;
        } else if (!strcmp(a, "--force")) {
            force = 1;
        } else if (!strcmp(a, "--threads")) {
            if (++i >= argc || cli_parse_int(argv[i], &threads) || threads < 0 || threads > 1024)
                return cli_error(C, "--threads needs a count (0 = all cores)");
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
    int use_cuda = !strcmp(backend, "cuda") ||
                   (!strcmp(backend, "auto") && model == NVFP4_MODEL_SM90 && nvfp4_cuda_available());
    if (use_cuda && model != NVFP4_MODEL_SM90)
        return cli_error(C, "--backend cuda computes the sm90 model only; use --backend cpu "
                            "for --model %s", nvfp4_model_name(model));
    const char *inputs[3] = {sa, sb, sbias};
    for (int i = 0; i < 3; i++) {
        char path[4096];
        const char *name;
        if (inputs[i] && !cli_split_spec(inputs[i], path, sizeof path, &name) &&
            cli_refuse_same_file(C, path, outp, force))
            return 1;
    }

    nvfp4_tensor A = {0}, B = {0};
    float *bias = NULL, *raw = NULL;
    uint16_t *out = NULL;
    int rc = 1;
    if (cli_load_nvfp4_spec(C, sa, &A) || cli_load_nvfp4_spec(C, sb, &B)) goto done;
    if (A.cols != B.cols) {
        cli_error(C, "K differs: A is %lld x %lld, B is %lld x %lld", (long long)A.rows,
                  (long long)A.cols, (long long)B.rows, (long long)B.cols);
        goto done;
    }
    if (sbias && cli_load_vector_spec(C, sbias, B.rows, &bias)) goto done;
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
    nvfp4_gemm_args g = {.a = &A, .b = &B, .bias = bias, .raw = raw, .out = out,
                         .model = model, .nthreads = (int)threads};
    double t0 = cli_now();
    float kms = 0;
    nvfp4_status st = use_cuda ? nvfp4_gemm_cuda_host(&g, &kms) : nvfp4_gemm_cpu(&g);
    double dt = cli_now() - t0;
    if (st != NVFP4_OK) {
        cli_lib_error(C, st, use_cuda ? "cuda backend" : "cpu backend");
        goto done;
    }
    printf("matmul: M=%lld N=%lld K=%lld model=%s backend=%s%s: %.3f s", (long long)A.rows,
           (long long)B.rows, (long long)A.cols, nvfp4_model_name(model),
           use_cuda ? "cuda" : "cpu", use_cuda ? "" : "", dt);
    if (use_cuda) printf(" (kernel %.3f ms)", kms);
    else printf(" (%s, %d threads)", nvfp4_cpu_simd_name(),
                threads ? (int)threads : nvfp4_default_threads());
    printf("\n");
    if (cmp_exact) cli_report_exact(&g, raw, out);
    if (cli_write_result(C, outp, raw, out, A.rows, B.rows)) goto done;
    rc = 0;
done:
    nvfp4_tensor_free(&A);
    nvfp4_tensor_free(&B);
    free(bias);
    free(raw);
    free(out);
    return rc;
}
