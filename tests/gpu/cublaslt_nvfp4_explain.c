/* cublaslt_nvfp4_explain.c -- which contract does cuBLASLt's own NVFP4 GEMM
 * follow on this GPU?  The GB10 question: what K split does it use for FC2?
 *
 * For the model's four linears (QKV 21504 x 5376, attn-out 5376 x 7168, FC1
 * 28672 x 5376, FC2 5376 x 14336) at M = 1, 16, 128, 2048, with two kinds of
 * data (narrow block scales, and scales spread over 2^-6 .. 2^8;
 * tests/gpu/sm120_data.h):
 *   1. cublasLtMatmul with E2M1 operands (codes low nibble first, as cuBLAS
 *      reads them) and UE4M3 block scales in the 128x4 tiled layout (VEC16,
 *      ComfyUI's bytes as stored), alpha = 1, beta = 0, FP32 output when
 *      cuBLASLt offers it (else BF16): D = the raw accumulators;
 *   2. nvfp4_explain on the NVFP4 operands and D (every model: sm120, sm90,
 *      exact, fma, pairwise; K slices 1..32 under every slice rule and
 *      combination order), rows up to --explain-rows (128);
 *   3. when the contract found is one our kernel computes (model sm120,
 *      slices by the contract's rule, added in order), nvfp4_gemm_cuda with
 *      k_slices = that S on the same operands (hi-first, as stored), and the
 *      count of outputs (all M x N) whose bits differ from cuBLASLt's.
 * Writes OUTDIR/cublaslt_nvfp4_explain.txt (the table) and .json (per case).
 *
 * Usage: cublaslt_nvfp4_explain [OUTDIR] [--explain-rows R] [--linears LIST]
 *        [--m LIST] [--data narrow,spread] [--threads N] [--selftest]
 * --selftest (no GPU): the "other implementation" is nvfp4_gemm_cpu (sm120)
 * with k_slices 1, 2, 3 by M (N cut to N/16), so everything but cuBLASLt and
 * the kernel can be checked anywhere; explain must find those.
 * Exit status 0 when every case ran and our kernel reproduced cuBLASLt
 * wherever its contract is one we compute; 2 when it cannot run here. */
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "explain_common.h"
#include "nvfp4.h"
#include "sm120_data.h"
#include "seed_linears.h"

#define CUDA_OK(call)                                                                                     \
    do {                                                                                                  \
        cudaError_t e_ = (call);                                                                          \
        if (e_ != cudaSuccess) {                                                                          \
            fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_), __FILE__, __LINE__, #call); \
            exit(2);                                                                                      \
        }                                                                                                 \
    } while (0)

static const int64_t M_VALUES[4] = {1, 16, 128, 2048};
static const char *DATA_NAMES[2] = {"narrow", "spread"};
static const int DATA_KINDS[2] = {DATA_NARROW, DATA_REAL};

/*------------------------------- cuBLASLt -------------------------------*/

typedef struct lt_gemm {
    cublasLtHandle_t h;
    void *ws;
    size_t ws_bytes;
    int d_bf16; /* 1 when cuBLASLt offered BF16 output only */
} lt_gemm;

/* D (M x N row-major: column-major N x M) = W (N x K) X (M x K)^T on
 * cuBLAS's operands (codes low nibble first, tiled scales).  0 on success. */
static int lt_run(lt_gemm *L, const void *w, const void *w_sc, const void *x, const void *x_sc, int64_t m,
                  int64_t n, int64_t k, void *d, char *why, size_t why_len)
{
    static const struct { cudaDataType_t c, d; } TYPES[3] = {
        {CUDA_R_32F, CUDA_R_32F}, {CUDA_R_16BF, CUDA_R_32F}, {CUDA_R_16BF, CUDA_R_16BF}};
    const float one = 1.0f, zero = 0.0f;
    for (int ti = 0; ti < 3; ti++) {
        cublasLtMatmulDesc_t op = NULL;
        cublasLtMatrixLayout_t lw = NULL, lx = NULL, lc = NULL, ld = NULL;
        cublasLtMatmulPreference_t pref = NULL;
        cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
        cublasLtMatmulMatrixScale_t vec16 = CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3;
        cublasStatus_t st = cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
        if (!st) st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
        if (!st) st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
        if (!st) st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &vec16, sizeof vec16);
        if (!st) st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &vec16, sizeof vec16);
        if (!st) st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_sc, sizeof w_sc);
        if (!st) st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_sc, sizeof x_sc);
        if (!st) st = cublasLtMatrixLayoutCreate(&lw, CUDA_R_4F_E2M1, (uint64_t)k, (uint64_t)n, k);
        if (!st) st = cublasLtMatrixLayoutCreate(&lx, CUDA_R_4F_E2M1, (uint64_t)k, (uint64_t)m, k);
        if (!st) st = cublasLtMatrixLayoutCreate(&lc, TYPES[ti].c, (uint64_t)n, (uint64_t)m, n);
        if (!st) st = cublasLtMatrixLayoutCreate(&ld, TYPES[ti].d, (uint64_t)n, (uint64_t)m, n);
        if (!st) st = cublasLtMatmulPreferenceCreate(&pref);
        if (!st)
            st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &L->ws_bytes,
                                                      sizeof L->ws_bytes);
        cublasLtMatmulHeuristicResult_t hr[8];
        int found = 0, ran = 0;
        if (!st) st = cublasLtMatmulAlgoGetHeuristic(L->h, op, lw, lx, lc, ld, pref, 8, hr, &found);
        /* the first candidate is not always runnable: the first that is */
        for (int i = 0; !st && !ran && i < found; i++) {
            if (hr[i].state != CUBLAS_STATUS_SUCCESS) continue;
            /* C is never read (beta = 0): D doubles as C where the types agree */
            ran = cublasLtMatmul(L->h, op, &one, w, lw, x, lx, &zero, d, lc, d, ld, &hr[i].algo, L->ws, L->ws_bytes,
                                 0) == CUBLAS_STATUS_SUCCESS;
        }
        snprintf(why, why_len, "C %s, D %s: status %d, %d candidates", ti == 0 ? "FP32" : "BF16",
                 TYPES[ti].d == CUDA_R_32F ? "FP32" : "BF16", (int)st, found);
        if (pref) cublasLtMatmulPreferenceDestroy(pref);
        if (ld) cublasLtMatrixLayoutDestroy(ld);
        if (lc) cublasLtMatrixLayoutDestroy(lc);
        if (lx) cublasLtMatrixLayoutDestroy(lx);
        if (lw) cublasLtMatrixLayoutDestroy(lw);
        if (op) cublasLtMatmulDescDestroy(op);
        if (ran) {
            L->d_bf16 = TYPES[ti].d == CUDA_R_16BF;
            return 0;
        }
    }
    return 1;
}

/*------------------------------- operands -------------------------------*/

/* Device copies of an operand: as stored (hi-first) for our kernel, low
 * nibble first for cuBLASLt; one set of tiled scales. */
typedef struct dev_op {
    void *codes, *codes_lo, *scales;
    float *pts;
} dev_op;

static void upload(dev_op *d, const nvfp4_tensor *t)
{
    const size_t cb = (size_t)(t->rows * t->cols / 2), sb = nvfp4_scales_bytes(t->rows, t->cols, NVFP4_SCALES_TILED);
    uint8_t *lo = malloc(cb);
    nvfp4_swap_nibbles(lo, t->codes, cb);
    const float one = 1.0f;
    CUDA_OK(cudaMalloc(&d->codes, cb));
    CUDA_OK(cudaMalloc(&d->codes_lo, cb));
    CUDA_OK(cudaMalloc(&d->scales, sb));
    CUDA_OK(cudaMalloc((void **)&d->pts, sizeof(float)));
    CUDA_OK(cudaMemcpy(d->codes, t->codes, cb, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d->codes_lo, lo, cb, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d->scales, t->scales, sb, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d->pts, &one, sizeof one, cudaMemcpyHostToDevice)); /* raw, and out = BF16(raw) */
    free(lo);
}

static void release(dev_op *d)
{
    cudaFree(d->codes);
    cudaFree(d->codes_lo);
    cudaFree(d->scales);
    cudaFree(d->pts);
}

int main(int argc, char **argv)
{
    const char *outdir = ".", *lin_list = NULL, *m_list = NULL, *data_list = NULL;
    int64_t explain_rows = 128;
    int threads = 0, selftest = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--selftest")) selftest = 1;
        else if (!strcmp(argv[i], "--explain-rows") && i + 1 < argc) explain_rows = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--linears") && i + 1 < argc) lin_list = argv[++i];
        else if (!strcmp(argv[i], "--m") && i + 1 < argc) m_list = argv[++i];
        else if (!strcmp(argv[i], "--data") && i + 1 < argc) data_list = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (argv[i][0] != '-') outdir = argv[i];
        else {
            fprintf(stderr, "usage: cublaslt_nvfp4_explain [OUTDIR] [--explain-rows R] [--linears LIST] [--m LIST] "
                            "[--data narrow,spread] [--threads N] [--selftest]\n");
            return 2;
        }
    }
    if (explain_rows < 1) explain_rows = 1;
    char dev[256] = "", cc[16] = "";
    int lt_version = 0;
    lt_gemm L;
    memset(&L, 0, sizeof L);
    if (!selftest) {
        nvfp4_model model;
        if (nvfp4_cuda_device_name(dev, sizeof dev, cc, sizeof cc) != NVFP4_OK || nvfp4_cuda_model(&model) != NVFP4_OK ||
            model != NVFP4_MODEL_SM120) {
            fprintf(stderr, "cublaslt_nvfp4_explain: needs an sm_120 / sm_121 GPU (GB10, RTX Blackwell) and a library "
                            "built for it (%s)\n", dev[0] ? dev : nvfp4_last_error());
            return 2;
        }
        if (cublasLtCreate(&L.h) != CUBLAS_STATUS_SUCCESS) {
            fprintf(stderr, "cublaslt_nvfp4_explain: cublasLtCreate failed\n");
            return 2;
        }
        lt_version = (int)cublasLtGetVersion();
        L.ws_bytes = (size_t)64 << 20;
        CUDA_OK(cudaMalloc(&L.ws, L.ws_bytes));
    } else {
        snprintf(dev, sizeof dev, "selftest: nvfp4_gemm_cpu (sm120) with k_slices 1, 2, 3 instead of cuBLASLt");
    }
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/cublaslt_nvfp4_explain.txt", outdir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *txt = fopen(tmp, "w");
    if (!txt) {
        fprintf(stderr, "cannot write %s\n", tmp);
        return 2;
    }
    char head[512];
    snprintf(head, sizeof head,
             "cuBLASLt %d NVFP4 GEMM (E2M1 x E2M1, VEC16 UE4M3 scales, alpha 1) on %s (%s): the contract "
             "nvfp4_explain finds, and our kernel with that S\nexplained rows: all of M <= %lld, the first %lld "
             "otherwise; kernel: mismatching outputs of all M x N\n",
             lt_version, dev, cc, (long long)explain_rows, (long long)explain_rows);
    fputs(head, stdout);
    fputs(head, txt);
    const char *fmt = "%-9s %5s %-7s %-5s %-40s %-24s %-7s %s\n";
    printf(fmt, "linear", "M", "data", "D", "contract found (model, S, rule, combine)", "matched", "unique",
           "our kernel vs cuBLASLt");
    fprintf(txt, fmt, "linear", "M", "data", "D", "contract found (model, S, rule, combine)", "matched", "unique",
            "our kernel vs cuBLASLt");
    fflush(stdout);
    json_t *cases = json_array();
    int failures = 0;
    const double t_start = now_s();
    for (int li = 0; li < 4; li++) {
        if (!explain_in_list(lin_list, SEED_LINEARS[li].name)) continue;
        const int64_t N = SEED_LINEARS[li].n / (selftest ? 16 : 1), K = SEED_LINEARS[li].k;
        int64_t mmax = 0;
        for (int mi = 0; mi < 4; mi++) {
            char b[24];
            snprintf(b, sizeof b, "%lld", (long long)M_VALUES[mi]);
            if (explain_in_list(m_list, b) && M_VALUES[mi] > mmax) mmax = M_VALUES[mi];
        }
        if (!mmax) continue;
        for (int di = 0; di < 2; di++) {
            if (!explain_in_list(data_list, DATA_NAMES[di])) continue;
            nvfp4_tensor A, B;
            sm120_data_operand(&A, mmax, K, 4000 + 10 * (uint64_t)li + (uint64_t)di, DATA_KINDS[di]);
            sm120_data_operand(&B, N, K, 5000 + 10 * (uint64_t)li + (uint64_t)di, DATA_KINDS[di]);
            A.per_tensor_scale = B.per_tensor_scale = 1.0f;
            dev_op da, db;
            void *d_d = NULL, *d_raw = NULL, *d_out = NULL;
            if (!selftest) {
                upload(&da, &A);
                upload(&db, &B);
                CUDA_OK(cudaMalloc(&d_d, (size_t)(mmax * N) * 4));
                CUDA_OK(cudaMalloc(&d_raw, (size_t)(mmax * N) * 4));
                CUDA_OK(cudaMalloc(&d_out, (size_t)(mmax * N) * 2));
            }
            float *d32 = malloc((size_t)(mmax * N) * 4), *raw = malloc((size_t)(mmax * N) * 4);
            uint16_t *d16 = malloc((size_t)(mmax * N) * 2), *out = malloc((size_t)(mmax * N) * 2);
            for (int mi = 0; mi < 4; mi++) {
                const int64_t M = M_VALUES[mi];
                char mbuf[24], why[160] = "";
                snprintf(mbuf, sizeof mbuf, "%lld", (long long)M);
                if (!explain_in_list(m_list, mbuf)) continue;
                nvfp4_tensor Av = A;
                Av.rows = M;
                if (selftest) {
                    nvfp4_gemm_args g = {.a = &Av, .b = &B, .raw = d32, .model = NVFP4_MODEL_SM120,
                                         .nthreads = threads, .k_slices = 1 + mi % 3};
                    if (nvfp4_gemm_cpu(&g) != NVFP4_OK) return 2;
                } else {
                    CUDA_OK(cudaMemset(d_d, 0xff, (size_t)(M * N) * 4));
                    if (lt_run(&L, db.codes_lo, db.scales, da.codes_lo, da.scales, M, N, K, d_d, why, sizeof why)) {
                        printf(fmt, SEED_LINEARS[li].name, mbuf, DATA_NAMES[di], "-", "cuBLASLt refused", why, "", "");
                        fprintf(txt, fmt, SEED_LINEARS[li].name, mbuf, DATA_NAMES[di], "-", "cuBLASLt refused", why, "", "");
                        failures++;
                        continue;
                    }
                    CUDA_OK(cudaDeviceSynchronize());
                    if (L.d_bf16) CUDA_OK(cudaMemcpy(d16, d_d, (size_t)(M * N) * 2, cudaMemcpyDeviceToHost));
                    else CUDA_OK(cudaMemcpy(d32, d_d, (size_t)(M * N) * 4, cudaMemcpyDeviceToHost));
                }
                const int bf16 = !selftest && L.d_bf16;
                const int64_t R = M < explain_rows ? M : explain_rows;
                nvfp4_tensor Ar = A;
                Ar.rows = R;
                nvfp4_explain_args ea = {.a = &Ar, .b = &B, .ref = bf16 ? NULL : d32, .ref_bf16 = bf16 ? d16 : NULL,
                                         .alpha = 1.0f, .nthreads = threads};
                char *json = NULL;
                const double t0 = now_s();
                explain_found f;
                memset(&f, 0, sizeof f);
                if (nvfp4_explain(&ea, &json) != NVFP4_OK || !explain_parse(json, &f)) {
                    fprintf(stderr, "explain: %s\n", nvfp4_last_error());
                    failures++;
                    nvfp4_free(json);
                    continue;
                }
                const double t_explain = now_s() - t0;
                char kern[96] = "n/a";
                long long bad = -1;
                const int ours = !strcmp(f.model, "sm120") && !strcmp(f.combine, "order") &&
                                 (f.k_slices == 1 || !strcmp(f.rule, "group64")) && f.matched == f.evaluated;
                if (selftest) {
                    snprintf(kern, sizeof kern, "n/a (selftest: made with S=%d)", 1 + mi % 3);
                    if (!f.ambiguous && (!ours || f.k_slices != 1 + mi % 3)) failures++;
                } else if (ours) {
                    nvfp4_cuda_gemm_args g = {
                        .a = {.codes = da.codes, .scales = da.scales, .per_tensor_scale = da.pts, .rows = M, .cols = K},
                        .b = {.codes = db.codes, .scales = db.scales, .per_tensor_scale = db.pts, .rows = N, .cols = K},
                        .raw = d_raw, .out = d_out, .k_slices = f.k_slices};
                    if (nvfp4_gemm_cuda(&g) != NVFP4_OK) {
                        snprintf(kern, sizeof kern, "error: %.80s", nvfp4_last_error());
                        failures++;
                    } else {
                        CUDA_OK(cudaMemcpy(raw, d_raw, (size_t)(M * N) * 4, cudaMemcpyDeviceToHost));
                        CUDA_OK(cudaMemcpy(out, d_out, (size_t)(M * N) * 2, cudaMemcpyDeviceToHost));
                        bad = 0;
                        for (int64_t i = 0; i < M * N; i++)
                            bad += bf16 ? out[i] != d16[i] : nvfp4_f32_bits(raw[i]) != nvfp4_f32_bits(d32[i]);
                        snprintf(kern, sizeof kern, "S=%d: %lld of %lld differ", f.k_slices, bad, (long long)(M * N));
                        if (bad) failures++;
                    }
                }
                char contract[64], matched[40];
                snprintf(contract, sizeof contract, "%s, S=%d, %s, %s", f.model, f.k_slices, f.rule, f.combine);
                snprintf(matched, sizeof matched, "%.6f of %lld",
                         f.evaluated ? (double)f.matched / (double)f.evaluated : 0.0, f.evaluated);
                const char *uniq = f.unique ? "yes" : f.ambiguous ? "ambig." : "no";
                printf(fmt, SEED_LINEARS[li].name, mbuf, DATA_NAMES[di], bf16 ? "bf16" : "fp32", contract, matched, uniq, kern);
                fprintf(txt, fmt, SEED_LINEARS[li].name, mbuf, DATA_NAMES[di], bf16 ? "bf16" : "fp32", contract, matched, uniq,
                        kern);
                fflush(stdout);
                json_t *o = json_object();
                json_object_set_new(o, "linear", json_string(SEED_LINEARS[li].name));
                json_object_set_new(o, "m", json_integer(M));
                json_object_set_new(o, "n", json_integer(N));
                json_object_set_new(o, "k", json_integer(K));
                json_object_set_new(o, "data", json_string(DATA_NAMES[di]));
                json_object_set_new(o, "cublaslt_output", json_string(bf16 ? "bf16" : "fp32"));
                json_object_set_new(o, "explained_rows", json_integer(R));
                json_object_set_new(o, "explain_seconds", json_real(t_explain));
                json_t *ex = json_loads(json, 0, NULL); /* the top 12 candidates suffice here */
                json_t *cl = ex ? json_object_get(ex, "candidates") : NULL;
                while (cl && json_array_size(cl) > 12) json_array_remove(cl, json_array_size(cl) - 1);
                json_object_set_new(o, "explain", ex ? ex : json_null());
                json_object_set_new(o, "kernel_mismatches", bad >= 0 ? json_integer(bad) : json_null());
                json_array_append_new(cases, o);
                nvfp4_free(json);
            }
            if (!selftest) {
                release(&da);
                release(&db);
                cudaFree(d_d);
                cudaFree(d_raw);
                cudaFree(d_out);
            }
            free(d32), free(raw), free(d16), free(out);
            nvfp4_tensor_free(&A);
            nvfp4_tensor_free(&B);
        }
    }
    const double total = now_s() - t_start;
    printf("total %.1f s; %d failure(s)\n", total, failures);
    fprintf(txt, "total %.1f s; %d failure(s)\n", total, failures);
    int written = fclose(txt) == 0 && rename(tmp, path) == 0;
    json_t *root = json_object();
    json_object_set_new(root, "device", json_string(dev));
    json_object_set_new(root, "compute_capability", json_string(cc));
    json_object_set_new(root, "cublaslt_version", json_integer(lt_version));
    json_object_set_new(root, "cases", cases);
    json_object_set_new(root, "failures", json_integer(failures));
    snprintf(path, sizeof path, "%s/cublaslt_nvfp4_explain.json", outdir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    written = written && json_dump_file(root, tmp, JSON_INDENT(1)) == 0 && rename(tmp, path) == 0;
    json_decref(root);
    if (!written) {
        fprintf(stderr, "cannot write the reports in %s\n", outdir);
        failures++;
    }
    if (L.ws) cudaFree(L.ws);
    if (L.h) cublasLtDestroy(L.h);
    return failures ? 1 : 0;
}
