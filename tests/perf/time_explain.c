/* time_explain.c -- wall time of nvfp4_explain() on a seed linear.
 * Built by `make perf` (CI builds it and runs it once on a small shape):
 *   build/perf/time_explain [M N K [threads [S [f16]]]]
 * Defaults: FC2 (M=128, N=5376, K=14336), 2 threads, REF = nvfp4_gemm_cpu
 * sm90 with K slices S = 1.  The data is realistic: activations with a heavy
 * per-block scale spread and a few channels 1000x larger, weights N(0, 0.02)
 * with a spread too.  f16 = 1: explain gets the exact F16 operand values
 * instead of the NVFP4 tensors (cuBLAS's view).  Prints the time and the
 * verdict. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nvfp4.h"

static uint64_t rng = 88172645463325252ULL;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static double normal(void)
{
    double u1 = ((double)(next() >> 11) + 0.5) / 9007199254740992.0;
    double u2 = ((double)(next() >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static int make(nvfp4_tensor *t, int64_t rows, int64_t cols, double sigma, int activations)
{
    float *x = malloc((size_t)(rows * cols) * sizeof(float));
    if (!x) return 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            double v = sigma * normal() * exp2((double)((c / 16 + r) % 9) - 4.0);
            if (activations && c % 997 == 3) v *= 1000;
            x[r * cols + c] = (float)v;
        }
    nvfp4_status st = nvfp4_quantize(t, x, NVFP4_DTYPE_F32, rows, cols, NULL, NVFP4_VARIANT_EAGER, 0);
    free(x);
    t->rows = rows;
    return st == NVFP4_OK;
}

static uint16_t *values16(const nvfp4_tensor *t)
{
    uint16_t *v = malloc((size_t)(t->rows * t->cols) * 2);
    for (int64_t r = 0; r < t->rows; r++)
        for (int64_t c = 0; c < t->cols; c++)
            v[r * t->cols + c] = nvfp4_f16_from_f32(
                nvfp4_e2m1_to_f32(nvfp4_tensor_code(t, r, c)) *
                fabsf(nvfp4_e4m3_to_f32(nvfp4_tensor_scale(t, r, c / 16))));
    return v;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int64_t M = argc > 1 ? atoll(argv[1]) : 128, N = argc > 2 ? atoll(argv[2]) : 5376,
            K = argc > 3 ? atoll(argv[3]) : 14336;
    int threads = argc > 4 ? atoi(argv[4]) : 2, S = argc > 5 ? atoi(argv[5]) : 1,
        f16 = argc > 6 ? atoi(argv[6]) : 0;
    nvfp4_tensor A, B;
    if (!make(&A, M, K, 1.0, 1) || !make(&B, N, K, 0.02, 0)) {
        fprintf(stderr, "data: %s\n", nvfp4_last_error());
        return 1;
    }
    float *ref = malloc((size_t)(M * N) * sizeof(float));
    nvfp4_gemm_args g = {.a = &A, .b = &B, .raw = ref, .model = NVFP4_MODEL_SM90,
                         .nthreads = threads, .k_slices = S};
    if (nvfp4_gemm_cpu(&g) != NVFP4_OK) {
        fprintf(stderr, "gemm: %s\n", nvfp4_last_error());
        return 1;
    }
    uint16_t *a16 = f16 ? values16(&A) : NULL, *b16 = f16 ? values16(&B) : NULL;
    nvfp4_explain_args ea = {.ref = ref, .nthreads = threads};
    if (f16) {
        ea.a16 = a16;
        ea.b16 = b16;
        ea.type16 = NVFP4_OPERAND_F16;
        ea.m = M;
        ea.n = N;
        ea.k = K;
    } else {
        ea.a = &A;
        ea.b = &B;
    }
    char *json = NULL;
    double t0 = now();
    nvfp4_status st = nvfp4_explain(&ea, &json);
    double dt = now() - t0;
    if (st != NVFP4_OK) {
        fprintf(stderr, "explain: %s\n", nvfp4_last_error());
        return 1;
    }
    const char *v = strstr(json, "\"verdict\"");
    printf("explain M=%lld N=%lld K=%lld (%lld outputs), REF sm90 S=%d, operands %s, %d threads: "
           "%.2f s\n%s\n",
           (long long)M, (long long)N, (long long)K, (long long)(M * N), S, f16 ? "f16" : "nvfp4",
           threads, dt, v ? v : json);
    nvfp4_free(json);
    free(ref);
    free(a16);
    free(b16);
    nvfp4_tensor_free(&A);
    nvfp4_tensor_free(&B);
    return 0;
}
