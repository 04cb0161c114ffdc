/* gemm_variants.c -- one kernel of the sm_90a GEMM on one shape: first
 * every output checked bit for bit against the CPU oracle, then timed.
 * (llm.c style: a validating main around each kernel version; the versions
 * are the library's kernels, forced by their index in
 * src/cuda/sm90/kernels.def through the testing library's hooks.)  Also
 * the program ncu profiles (one launch after the check).
 *
 *   gemm_variants LINEAR M [KERNEL] [ITERS] [K_SLICES] [LOADERS] [STREAM_K]
 *     LINEAR   qkv | attn_out | fc1 | fc2 (a Llama-3-8B-sized decoder's)
 *     KERNEL   index into nvfp4_sm90_kernels, -1 = planned (default);
 *              `gemm_variants list` prints them
 *     ITERS    timed launches (default 50; 0 = check only), back to back over
 *              copies of the weights that together exceed the L2
 *     LOADERS  TMA-issuing warps of the register kernel (0 = planned)
 *     STREAM_K the wgmma kernel's stream-K: 0 the cost model (default), -1
 *              off, C > 0 forced on C CTAs (as NVFP4_STREAM_K below)
 *   NVFP4_KERNELS=V,V,... (environment): after it, these kernels in the same
 *     process, each checked, then timed; the list twice
 *   NVFP4_STREAM_K=S,S,... (environment): the wgmma kernel's stream-K: -1
 *     off, 0 the cost model, C > 0 forced on C CTAs; each checked, then
 *     timed; the list twice
 *   NVFP4_EPILOGUES=E,E,... (environment): the wgmma kernel's BF16 epilogue
 *     staged (1) or element by element (0); each checked, then timed with
 *     out only (raw not written, as in the bench); the list twice
 *
 * Build: make gpu-tests (build/gpu/gemm_variants). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvfp4.h"
#include "cuda/sm90/plan.h"
#include "nvfp4_testing.h"

#include "dev_check.h"
#include "dev_rand.h"

static nvfp4_tensor make(int64_t rows, int64_t cols, uint64_t seed, double sigma)
{
    float *x = malloc((size_t)(rows * cols) * sizeof *x);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < rows * cols; i++) x[i] = (float)(sigma * gauss(&s) * exp(0.5 * gauss(&s)));
    nvfp4_tensor t;
    if (nvfp4_quantize(&t, x, NVFP4_DTYPE_F32, rows, cols, NULL, NVFP4_VARIANT_EAGER, 0) != NVFP4_OK) {
        fprintf(stderr, "quantize: %s\n", nvfp4_last_error());
        exit(2);
    }
    free(x);
    t.rows = rows;
    return t;
}

typedef struct dev_op {
    nvfp4_cuda_operand op;
} dev_op;

static nvfp4_cuda_operand upload(const nvfp4_tensor *t)
{
    nvfp4_cuda_operand o;
    void *c, *sc, *p;
    size_t cb = (size_t)(t->rows * t->cols / 2), sb = nvfp4_scales_bytes(t->rows, t->cols, NVFP4_SCALES_TILED);
    DEV_CUDA_OK(cudaMalloc(&c, cb));
    DEV_CUDA_OK(cudaMalloc(&sc, sb));
    DEV_CUDA_OK(cudaMalloc(&p, 4));
    DEV_CUDA_OK(cudaMemcpy(c, t->codes, cb, cudaMemcpyHostToDevice));
    DEV_CUDA_OK(cudaMemcpy(sc, t->scales, sb, cudaMemcpyHostToDevice));
    DEV_CUDA_OK(cudaMemcpy(p, &t->per_tensor_scale, 4, cudaMemcpyHostToDevice));
    o.codes = c;
    o.scales = sc;
    o.per_tensor_scale = p;
    o.rows = t->rows;
    o.cols = t->cols;
    return o;
}

/* The mean of `iters` back-to-back launches (us), the weights
 * rotated over `ncopy` copies, after 3 warm-up launches. */
static float time_launches(nvfp4_cuda_gemm_args *g, const nvfp4_cuda_operand *copies, int ncopy, int iters)
{
    const nvfp4_cuda_operand b0 = g->b;
    for (int i = 0; i < 3; i++) nvfp4_gemm_cuda(g); /* warm-up */
    cudaEvent_t e0, e1;
    DEV_CUDA_OK(cudaEventCreate(&e0));
    DEV_CUDA_OK(cudaEventCreate(&e1));
    DEV_CUDA_OK(cudaEventRecord(e0, 0));
    for (int i = 0; i < iters; i++) {
        g->b = copies[i % ncopy];
        nvfp4_gemm_cuda(g);
    }
    DEV_CUDA_OK(cudaEventRecord(e1, 0));
    DEV_CUDA_OK(cudaEventSynchronize(e1));
    DEV_CUDA_OK(cudaGetLastError());
    float ms = 0;
    DEV_CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
    DEV_CUDA_OK(cudaEventDestroy(e0));
    DEV_CUDA_OK(cudaEventDestroy(e1));
    g->b = b0;
    return ms * 1000.0f / (float)iters;
}

/* One launch; rows 0..rows-1 of the output compared with the CPU oracle,
 * every bit; the first difference printed.  0 when all are equal. */
static int check_rows(nvfp4_cuda_gemm_args *g, float *got, const float *want, int64_t rows, int64_t n,
                      const char *name, int64_t m, int kernel)
{
    const size_t mn = (size_t)(m * n);
    DEV_CUDA_OK(cudaMemset(g->raw, 0xFF, mn * 4));
    if (nvfp4_gemm_cuda(g) != NVFP4_OK) {
        fprintf(stderr, "nvfp4_gemm_cuda: %s\n", nvfp4_last_error());
        return 1;
    }
    DEV_CUDA_OK(cudaDeviceSynchronize());
    DEV_CUDA_OK(cudaMemcpy(got, g->raw, mn * 4, cudaMemcpyDeviceToHost));
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < rows * n; i++)
        if (memcmp(&got[i], &want[i], 4) != 0 && bad++ == 0) first = i;
    if (bad) {
        uint32_t x, y;
        memcpy(&x, &got[first], 4);
        memcpy(&y, &want[first], 4);
        printf("MISMATCH %s M=%lld kernel %d: %lld of %lld outputs; first (row %lld, col %lld) "
               "gpu 0x%08x cpu 0x%08x\n",
               name, (long long)m, kernel, (long long)bad, (long long)(rows * n), (long long)(first / n),
               (long long)(first % n), x, y);
        return 1;
    }
    return 0;
}

/* What a mode sweep checks and times. */
typedef struct sweep_run {
    nvfp4_cuda_gemm_args *g;
    float *got;
    const float *want;
    int64_t rows, n;
    const char *name;
    int64_t m;
    int kernel;
    const nvfp4_cuda_operand *copies;
    int ncopy, iters;
} sweep_run;

/* The modes listed in environment variable `env` ("A,B,..."), `passes`
 * times over: each set by `set`, checked against the oracle, then timed
 * (out_only: with raw not written, as in the bench) and printed under
 * `label`.  0, or 1 on a mismatch. */
static int sweep_modes(const sweep_run *r, const char *env, const char *label, void (*set)(int), int passes,
                       int out_only)
{
    const char *list = getenv(env);
    if (!list || r->iters <= 0) return 0;
    for (int rep = 0; rep < passes; rep++) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", list);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            const int mode = atoi(tok);
            set(mode);
            if (check_rows(r->g, r->got, r->want, r->rows, r->n, r->name, r->m, r->kernel) != 0) return 1;
            float *const raw = r->g->raw;
            if (out_only) r->g->raw = NULL;
            const float t = time_launches(r->g, r->copies, r->ncopy, r->iters);
            r->g->raw = raw;
            printf("%s %s M=%lld kernel %d mode %d (pass %d): exact, %s%.1f us\n", label, r->name, (long long)r->m,
                   r->kernel, mode, rep + 1, out_only ? "out only " : "", t);
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const struct { const char *name; int64_t n, k; } L[4] = {
        {"qkv", 21504, 5376}, {"attn_out", 5376, 7168}, {"fc1", 28672, 5376}, {"fc2", 5376, 14336}};
    if (argc == 2 && strcmp(argv[1], "list") == 0) {
        for (int i = 0; i < nvfp4_sm90_num_kernels; i++) printf("%2d %s\n", i, nvfp4_sm90_kernels[i].name);
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: gemm_variants qkv|attn_out|fc1|fc2 M [KERNEL] [ITERS] [K_SLICES] [LOADERS] [STREAM_K]\n"
                        "       gemm_variants list\n");
        return 2;
    }
    int li = -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(argv[1], L[i].name) == 0) li = i;
    const int64_t m = atoll(argv[2]);
    const int kernel = argc > 3 ? atoi(argv[3]) : -1, iters = argc > 4 ? atoi(argv[4]) : 50;
    const int slices = argc > 5 ? atoi(argv[5]) : 1;
    nvfp4_sm90_force_loaders(argc > 6 ? atoi(argv[6]) : 0);
    const int sk_mode = argc > 7 ? atoi(argv[7]) : 0;
    nvfp4_sm90_force_stream_k(sk_mode);
    if (li < 0 || m < 1 || kernel >= nvfp4_sm90_num_kernels) {
        fprintf(stderr, "gemm_variants: bad arguments\n");
        return 2;
    }
    const int64_t n = L[li].n, k = L[li].k;
    nvfp4_tensor a = make(m, k, 7, 1.0), b = make(n, k, 11, 0.02);
    nvfp4_cuda_gemm_args g;
    memset(&g, 0, sizeof g);
    g.a = upload(&a);
    g.b = upload(&b);
    g.k_slices = slices;
    size_t mn = (size_t)(m * n), wsb = nvfp4_cuda_gemm_workspace(m, n, k);
    DEV_CUDA_OK(cudaMalloc((void **)&g.raw, mn * 4));
    DEV_CUDA_OK(cudaMalloc((void **)&g.out, mn * 2));
    DEV_CUDA_OK(cudaMalloc(&g.workspace, wsb));
    g.workspace_bytes = wsb;
    nvfp4_sm90_force_kernel(kernel);

    /* check: rows 0..min(M,16)-1 (all of them at small M), every column */
    const int64_t rows = m < 16 ? m : 16;
    float *got = malloc(mn * 4), *want = malloc((size_t)(rows * n) * 4);
    nvfp4_tensor a_rows = a;
    a_rows.rows = rows;
    nvfp4_gemm_args ref = {&a_rows, &b, NULL, want, NULL, NVFP4_MODEL_SM90, 0, slices};
    if (nvfp4_gemm_cpu(&ref) != NVFP4_OK) {
        fprintf(stderr, "nvfp4_gemm_cpu: %s\n", nvfp4_last_error());
        return 1;
    }
    if (check_rows(&g, got, want, rows, n, L[li].name, m, kernel) != 0) return 1;
    /* time: back-to-back launches between two events, the weights rotated
     * over copies that together exceed the L2 (50 MB on the H200) */
    float med = 0;
    nvfp4_cuda_operand copies[16];
    int ncopy = 1;
    if (iters > 0) {
        const double wbytes = (double)n * (double)k * 0.5625;
        ncopy = (int)(200e6 / wbytes) + 1;
        if (ncopy > 16) ncopy = 16;
        copies[0] = g.b;
        for (int i = 1; i < ncopy; i++) copies[i] = upload(&b);
        med = time_launches(&g, copies, ncopy, iters);
    }
    const double bytes = (double)n * (double)k * 0.5625 + (double)m * (double)k * 0.5625 + (double)mn * 6;
    printf("OK %s M=%lld kernel %d k_slices %d loaders %s: %lld outputs exact; %.1f us (%.0f%% of a 4.0 TB/s "
           "byte floor)\n",
           L[li].name, (long long)m, kernel, slices, argc > 6 ? argv[6] : "planned", (long long)(rows * n), med,
           med > 0 ? 100.0 * bytes / 4.0e12 / (med * 1e-6) : 0.0);
    /* NVFP4_KERNELS="V,V,...": after the first, more kernels in this one
     * process (no data regenerated), each checked bit for bit, then timed;
     * the list runs twice, so each time is read against its own repeat */
    const char *vlist = getenv("NVFP4_KERNELS");
    if (vlist && iters > 0)
        for (int rep = 0; rep < 2; rep++) {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", vlist);
            for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
                const int v = atoi(tok);
                if (v < -1 || v >= nvfp4_sm90_num_kernels) continue;
                nvfp4_sm90_force_kernel(v);
                if (check_rows(&g, got, want, rows, n, L[li].name, m, v) != 0) return 1;
                const float t = time_launches(&g, copies, ncopy, iters);
                printf("KERNEL %s M=%lld kernel %2d (pass %d): exact, %.1f us (%.0f%% of a 4.0 TB/s byte floor)\n",
                       L[li].name, (long long)m, v, rep + 1, t, 100.0 * bytes / 4.0e12 / (t * 1e-6));
            }
            nvfp4_sm90_force_kernel(kernel);
        }
    /* NVFP4_STREAM_K, NVFP4_EPILOGUES: above */
    const sweep_run run = {&g, got, want, rows, n, L[li].name, m, kernel, copies, ncopy, iters};
    if (sweep_modes(&run, "NVFP4_STREAM_K", "STREAMK", nvfp4_sm90_force_stream_k, 2, 0) != 0) return 1;
    if (sweep_modes(&run, "NVFP4_EPILOGUES", "EPILOGUE", nvfp4_sm90_force_epilogue, 2, 1) != 0) return 1;
    nvfp4_sm90_force_epilogue(-1);
    nvfp4_sm90_force_stream_k(sk_mode);
    return 0;
}
