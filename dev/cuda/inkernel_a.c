/* inkernel_a.c -- the fused linear at small M with and without the register
 * GEMM's in-kernel A producer (docs/STREAMING_A.md): first the outputs of
 * both paths checked bit for bit against the CPU linear (nvfp4_linear_cpu,
 * model SM90), then each timed with the static and the dynamic scale,
 * beside the prequantized GEMM (nvfp4_gemm_cuda on the same activations'
 * NVFP4 bytes).  Timing as `nvfp4 bench` does it: back-to-back calls, each
 * between two events, the weights rotated over copies that do not fit in
 * L2; the median.  (llm.c style: a validating main around each version; the
 * two versions are the library's, picked by nvfp4_sm90_force_inkernel_a.)
 * What it prints set NVFP4_SM90_INKERNEL_A_MAX_M (src/cuda/sm90/plan.h).
 *
 *   inkernel_a [LINEAR[:M,...] ...] [--iters N]
 *     LINEAR  qkv | attn_out | fc1 | fc2 (default: all four at M = 1, 2, 4, 8, 16)
 *   NVFP4_DEV_VARIANT=cuda  the quantizer's cuda variant (default eager)
 *   NVFP4_DEV_QUANTIZER=MODE  the two-kernel path's quantizer kernel
 *     (nvfp4_q_force_launch: 0 the threshold-table kernel, 1 the exact one
 *     with a thread a block, 2 the exact one with four lanes a block)
 *
 * Build: make gpu-tests (build/gpu/inkernel_a). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvfp4.h"
#include "nvfp4_testing.h"

#include "dev_check.h"
#include "dev_rand.h"

static const struct { const char *name; int64_t n, k; } LINEARS[4] = {
    {"qkv", 21504, 5376}, {"attn_out", 5376, 7168}, {"fc1", 28672, 5376}, {"fc2", 5376, 14336}};

/* NVFP4_DEV_VARIANT=cuda: the cuda variant, else eager */
static nvfp4_variant dev_variant(void)
{
    const char *v = getenv("NVFP4_DEV_VARIANT");
    return v && !strcmp(v, "cuda") ? NVFP4_VARIANT_CUDA : NVFP4_VARIANT_EAGER;
}

static int cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Median device time of `iters` back-to-back calls (one event pair each, no
 * host synchronization between them, as nvfp4 bench); call i takes weight
 * copy i % nrot.  lin != NULL: nvfp4_linear_cuda, else nvfp4_gemm_cuda. */
static float time_calls(nvfp4_cuda_linear_args *lin, nvfp4_cuda_gemm_args *gemm, const nvfp4_cuda_operand *wops,
                        int nrot, int iters)
{
    float *t = malloc((size_t)iters * sizeof *t);
    cudaEvent_t *ev = malloc((size_t)(2 * iters) * sizeof *ev);
    for (int i = 0; i < 2 * iters; i++) DEV_CUDA_OK(cudaEventCreate(&ev[i]));
    for (int i = -5; i < iters; i++) {
        if (i >= 0) DEV_CUDA_OK(cudaEventRecord(ev[2 * i], NULL));
        const int w = (i + 5) % nrot;
        nvfp4_status st;
        if (lin) {
            lin->weight = &wops[w];
            st = nvfp4_linear_cuda(lin);
        } else {
            gemm->b = wops[w];
            st = nvfp4_gemm_cuda(gemm);
        }
        if (st != NVFP4_OK) {
            fprintf(stderr, "%s: %s\n", lin ? "nvfp4_linear_cuda" : "nvfp4_gemm_cuda", nvfp4_last_error());
            exit(2);
        }
        if (i >= 0) DEV_CUDA_OK(cudaEventRecord(ev[2 * i + 1], NULL));
    }
    DEV_CUDA_OK(cudaDeviceSynchronize());
    for (int i = 0; i < iters; i++) DEV_CUDA_OK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
    qsort(t, (size_t)iters, sizeof *t, cmp_float);
    const float med = t[iters / 2] * 1000.0f;
    for (int i = 0; i < 2 * iters; i++) cudaEventDestroy(ev[i]);
    free(ev);
    free(t);
    return med;
}

static int run_case(int li, int64_t m, int iters)
{
    const int64_t n = LINEARS[li].n, k = LINEARS[li].k;
    uint64_t s = 0x1234567ull + (uint64_t)(li * 100 + m);
    /* weights: random codes and E4M3 scales in a normal range */
    nvfp4_tensor w;
    if (nvfp4_tensor_alloc(&w, n, k, NVFP4_HI_FIRST, NVFP4_SCALES_TILED) != NVFP4_OK) return 2;
    for (int64_t i = 0; i < n * k / 2; i++) w.codes[i] = (uint8_t)rng(&s);
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < k / 16; c++) w.scales[nvfp4_tiled_scale_offset(r, c, k)] = (uint8_t)(0x30 + rng(&s) % 16);
    w.per_tensor_scale = 0.001f;
    uint16_t *x = malloc((size_t)(m * k) * 2);
    for (int64_t i = 0; i < m * k; i++) x[i] = nvfp4_bf16_from_f32((float)gauss(&s));
    const float static_scale = 0.0157f;

    /* weight copies: more bytes than two L2s, so every call streams its weights */
    const size_t wbytes = (size_t)(n * k / 2) + nvfp4_scales_bytes(n, k, NVFP4_SCALES_TILED);
    const int nrot = (int)(1 + (size_t)(128u << 20) / wbytes);
    nvfp4_cuda_operand wop = {.rows = n, .cols = k}, *wops = malloc((size_t)nrot * sizeof *wops);
    uint8_t *d_wc, *d_ws, *d_xc, *d_xs;
    float *d_f, *d_raw;
    uint16_t *d_x, *d_out;
    void *d_work, *d_gwork;
    const int64_t prows = (m + 15) / 16 * 16;
    const size_t ws = nvfp4_linear_cuda_workspace(m, n, k), gws = nvfp4_cuda_gemm_workspace(m, n, k);
    DEV_CUDA_OK(cudaMalloc((void **)&d_wc, (size_t)(n * k / 2) * (size_t)nrot));
    DEV_CUDA_OK(cudaMalloc((void **)&d_ws, nvfp4_scales_bytes(n, k, NVFP4_SCALES_TILED) * (size_t)nrot));
    DEV_CUDA_OK(cudaMalloc((void **)&d_xc, (size_t)(prows * k / 2)));
    DEV_CUDA_OK(cudaMalloc((void **)&d_xs, nvfp4_scales_bytes(prows, k, NVFP4_SCALES_TILED)));
    DEV_CUDA_OK(cudaMalloc(&d_gwork, gws));
    DEV_CUDA_OK(cudaMalloc((void **)&d_f, 12));
    DEV_CUDA_OK(cudaMalloc((void **)&d_x, (size_t)(m * k) * 2));
    DEV_CUDA_OK(cudaMalloc((void **)&d_raw, (size_t)(m * n) * 4));
    DEV_CUDA_OK(cudaMalloc((void **)&d_out, (size_t)(m * n) * 2));
    DEV_CUDA_OK(cudaMalloc(&d_work, ws));
    for (int i = 0; i < nrot; i++) {
        const size_t sb = nvfp4_scales_bytes(n, k, NVFP4_SCALES_TILED);
        DEV_CUDA_OK(cudaMemcpy(d_wc + (size_t)i * (size_t)(n * k / 2), w.codes, (size_t)(n * k / 2),
                               cudaMemcpyHostToDevice));
        DEV_CUDA_OK(cudaMemcpy(d_ws + (size_t)i * sb, w.scales, sb, cudaMemcpyHostToDevice));
        wops[i] = (nvfp4_cuda_operand){.rows = n, .cols = k, .codes = d_wc + (size_t)i * (size_t)(n * k / 2),
                                       .scales = d_ws + (size_t)i * sb, .per_tensor_scale = d_f};
    }
    const float f[2] = {w.per_tensor_scale, static_scale};
    DEV_CUDA_OK(cudaMemcpy(d_f, f, 8, cudaMemcpyHostToDevice));
    DEV_CUDA_OK(cudaMemcpy(d_x, x, (size_t)(m * k) * 2, cudaMemcpyHostToDevice));
    wop.codes = d_wc, wop.scales = d_ws, wop.per_tensor_scale = d_f;

    float *raw_cpu = malloc((size_t)(m * n) * 4), *raw_gpu = malloc((size_t)(m * n) * 4);
    int bad = 0;
    float us[2][2], pre[2]; /* [in-kernel][dynamic], the prequantized GEMM [dynamic] */
    for (int dyn = 0; dyn < 2; dyn++) {
        nvfp4_linear_args la = {.x = x, .x_dtype = NVFP4_DTYPE_BF16, .m = m, .k = k, .weight = &w,
                                .input_scale = dyn ? NULL : &static_scale, .variant = dev_variant(),
                                .raw = raw_cpu, .model = NVFP4_MODEL_SM90};
        if (nvfp4_linear_cpu(&la) != NVFP4_OK) {
            fprintf(stderr, "nvfp4_linear_cpu: %s\n", nvfp4_last_error());
            return 2;
        }
        for (int ik = 0; ik < 2; ik++) {
            nvfp4_cuda_linear_args a = {.x = d_x, .m = m, .k = k, .weight = &wop,
                                        .input_scale = dyn ? NULL : d_f + 1, .variant = dev_variant(),
                                        .raw = d_raw, .out = d_out, .workspace = d_work, .workspace_bytes = ws};
            if (ik == 0) a.x_codes = d_xc, a.x_scales = d_xs, a.x_scale = d_f + 2; /* for the GEMM below */
            nvfp4_sm90_force_inkernel_a(ik);
            DEV_CUDA_OK(cudaMemset(d_raw, 0xA5, (size_t)(m * n) * 4));
            if (nvfp4_linear_cuda(&a) != NVFP4_OK) {
                fprintf(stderr, "nvfp4_linear_cuda: %s\n", nvfp4_last_error());
                return 2;
            }
            DEV_CUDA_OK(cudaMemcpy(raw_gpu, d_raw, (size_t)(m * n) * 4, cudaMemcpyDeviceToHost));
            for (int64_t i = 0; i < m * n; i++)
                if (memcmp(&raw_gpu[i], &raw_cpu[i], 4) != 0) {
                    uint32_t g, c;
                    memcpy(&g, &raw_gpu[i], 4);
                    memcpy(&c, &raw_cpu[i], 4);
                    printf("MISMATCH %s M=%lld %s in-kernel=%d: first at (row %lld, col %lld): gpu %08x cpu %08x\n",
                           LINEARS[li].name, (long long)m, dyn ? "dynamic" : "static", ik, (long long)(i / n),
                           (long long)(i % n), g, c);
                    bad = 1;
                    break;
                }
            a.x_codes = NULL, a.x_scales = NULL, a.x_scale = NULL;
            us[ik][dyn] = iters > 0 ? time_calls(&a, NULL, wops, nrot, iters) : 0.0f;
        }
        /* the prequantized GEMM on the activations' NVFP4 bytes of run 0 */
        nvfp4_cuda_gemm_args g = {.a = {.rows = m, .cols = k, .codes = d_xc, .scales = d_xs, .per_tensor_scale = d_f + 2},
                                  .b = wop, .raw = d_raw, .out = d_out, .workspace = d_gwork, .workspace_bytes = gws};
        DEV_CUDA_OK(cudaMemset(d_raw, 0xA5, (size_t)(m * n) * 4));
        if (nvfp4_gemm_cuda(&g) != NVFP4_OK) {
            fprintf(stderr, "nvfp4_gemm_cuda: %s\n", nvfp4_last_error());
            return 2;
        }
        DEV_CUDA_OK(cudaMemcpy(raw_gpu, d_raw, (size_t)(m * n) * 4, cudaMemcpyDeviceToHost));
        if (memcmp(raw_gpu, raw_cpu, (size_t)(m * n) * 4) != 0) {
            printf("MISMATCH %s M=%lld %s: the prequantized GEMM differs from the CPU linear\n", LINEARS[li].name,
                   (long long)m, dyn ? "dynamic" : "static");
            bad = 1;
        }
        pre[dyn] = iters > 0 ? time_calls(NULL, &g, wops, nrot, iters) : 0.0f;
    }
    nvfp4_sm90_force_inkernel_a(-1);
    printf("%-9s M=%-3lld %s  static: pre %6.1f, two kernels %6.1f (x%.3f), in-kernel %6.1f (x%.3f)  |  dynamic: "
           "pre %6.1f, %6.1f (x%.3f), %6.1f (x%.3f) us\n",
           LINEARS[li].name, (long long)m, bad ? "MISMATCH" : "exact   ", pre[0], us[0][0],
           pre[0] > 0 ? us[0][0] / pre[0] : 0.0, us[1][0], pre[0] > 0 ? us[1][0] / pre[0] : 0.0, pre[1], us[0][1],
           pre[1] > 0 ? us[0][1] / pre[1] : 0.0, us[1][1], pre[1] > 0 ? us[1][1] / pre[1] : 0.0);
    fflush(stdout);
    free(raw_cpu), free(raw_gpu), free(x);
    nvfp4_tensor_free(&w);
    cudaFree(d_wc), cudaFree(d_ws), cudaFree(d_f), cudaFree(d_x), cudaFree(d_raw), cudaFree(d_out), cudaFree(d_work);
    cudaFree(d_xc), cudaFree(d_xs), cudaFree(d_gwork);
    free(wops);
    return bad;
}

int main(int argc, char **argv)
{
    int iters = 200, rc = 0, any = 0;
    const char *qmode = getenv("NVFP4_DEV_QUANTIZER");
    if (qmode) nvfp4_q_force_launch(atoi(qmode));
    static const int64_t default_m[] = {1, 2, 4, 8, 16};
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters")) {
            i++;
            continue;
        }
        char name[32];
        const char *colon = strchr(argv[i], ':');
        size_t len = colon ? (size_t)(colon - argv[i]) : strlen(argv[i]);
        if (len >= sizeof name) len = sizeof name - 1;
        memcpy(name, argv[i], len);
        name[len] = 0;
        int li = -1;
        for (int j = 0; j < 4; j++)
            if (!strcmp(name, LINEARS[j].name)) li = j;
        if (li < 0) {
            fprintf(stderr, "usage: inkernel_a [qkv|attn_out|fc1|fc2[:M,...] ...] [--iters N]\n");
            return 2;
        }
        any = 1;
        if (!colon) {
            for (int j = 0; j < 5; j++) rc |= run_case(li, default_m[j], iters);
        } else
            for (const char *p = colon + 1; *p;) {
                rc |= run_case(li, strtoll(p, NULL, 10), iters);
                p = strchr(p, ',');
                if (!p) break;
                p++;
            }
    }
    if (!any)
        for (int li = 0; li < 4; li++)
            for (int j = 0; j < 5; j++) rc |= run_case(li, default_m[j], iters);
    return rc;
}
