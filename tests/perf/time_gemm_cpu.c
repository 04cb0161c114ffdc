/* time_gemm_cpu.c -- wall time of nvfp4_gemm_cpu() on a real layer shape.
 * Built by `make perf` (CI builds it and runs it once on a small shape):
 *   build/perf/time_gemm_cpu [M N K [threads [model [reps [check_rows [path]]]]]]
 * Defaults: FC1 (M=128, N=28672, K=5376), 2 threads, sm90, 3 reps; model is
 * sm90, sm120 or exact.  The operands are nvfp4_quantize() of normal data
 * (activations N(0,1), weights N(0,0.02)), so the fast path sees what it
 * sees in practice.  Prints the best and median wall time for every SIMD path
 * the CPU has, and the best wall and best CPU time (all threads together) as
 * nanoseconds per output step (M * N * ceil(K/64) k64 steps, whatever the
 * model's own step); on a shared machine the CPU time is the steadier
 * measure of the work.  Checks that all paths agree bit for bit, and
 * (check_rows > 0) compares that many rows against nvfp4_gemm_ref().  path (portable, avx2, avx512, avx512-novnni)
 * times that path only (avx512-novnni: the AVX-512 kernel without VNNI). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <math.h>

#include "nvfp4.h"
#include "nvfp4_testing.h" /* nvfp4_cpu_force_simd */
#include "cpu/cpu_internal.h" /* nvfp4_cpu_allow_vnni() */

static uint64_t rng_state = 88172645463325252ULL;
static double normal(void)
{
    uint64_t a, b;
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17; a = rng_state;
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17; b = rng_state;
    double u1 = ((double)(a >> 11) + 0.5) / 9007199254740992.0;
    double u2 = ((double)(b >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* rows x cols NVFP4 tensor quantized from N(0, sigma^2), in row chunks. */
static int make_operand(nvfp4_tensor *t, int64_t rows, int64_t cols, double sigma, float pts)
{
    if (nvfp4_tensor_alloc(t, rows, cols, NVFP4_HI_FIRST, NVFP4_SCALES_TILED) != NVFP4_OK) return 0;
    t->per_tensor_scale = pts;
    const int64_t chunk = 256;
    float *x = malloc((size_t)(chunk * cols) * sizeof(float));
    if (!x) return 0;
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        int64_t n = rows - r0 < chunk ? rows - r0 : chunk;
        for (int64_t i = 0; i < n * cols; i++) x[i] = (float)(sigma * normal());
        nvfp4_tensor q;
        if (nvfp4_quantize(&q, x, NVFP4_DTYPE_F32, n, cols, &pts, NVFP4_VARIANT_EAGER, 0) != NVFP4_OK) {
            free(x);
            return 0;
        }
        memcpy(t->codes + (size_t)(r0 * cols / 2), q.codes, (size_t)(n * cols / 2));
        for (int64_t r = 0; r < n; r++)
            for (int64_t cb = 0; cb < cols / 16; cb++)
                t->scales[nvfp4_tiled_scale_offset(r0 + r, cb, cols)] = nvfp4_tensor_scale(&q, r, cb);
        nvfp4_tensor_free(&q);
    }
    free(x);
    return 1;
}

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now(void) { return clock_s(CLOCK_MONOTONIC); }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int64_t M = argc > 3 ? atoll(argv[1]) : 128, N = argc > 3 ? atoll(argv[2]) : 28672,
            K = argc > 3 ? atoll(argv[3]) : 5376;
    int threads = argc > 4 ? atoi(argv[4]) : 2;
    nvfp4_model model = NVFP4_MODEL_SM90;
    if (argc > 5 && nvfp4_model_from_name(&model, argv[5]) != NVFP4_OK) {
        fprintf(stderr, "%s\n", nvfp4_last_error());
        return 2;
    }
    int reps = argc > 6 ? atoi(argv[6]) : 3;
    int64_t check_rows = argc > 7 ? atoll(argv[7]) : 0;
    if (reps < 1 || reps > 50) reps = 3;
    const char *only = argc > 8 ? argv[8] : NULL;

    nvfp4_tensor a, b;
    if (!make_operand(&a, M, K, 1.0, 1.0f / 448.0f) || !make_operand(&b, N, K, 0.02, 0.02f / 448.0f)) {
        fprintf(stderr, "could not build the operands: %s\n", nvfp4_last_error());
        return 1;
    }
    float *raw = malloc((size_t)(M * N) * sizeof(float)), *first = malloc((size_t)(M * N) * sizeof(float));
    uint16_t *out = malloc((size_t)(M * N) * 2);
    printf("M=%lld N=%lld K=%lld threads=%d model=%s (auto path: %s)\n", (long long)M, (long long)N,
           (long long)K, threads, nvfp4_model_name(model), nvfp4_cpu_simd_name());
    static const char *const paths[] = {"avx512", "avx512-novnni", "avx2", "portable"};
    int have_first = 0, agree = 1;
    for (int p = 0; p < 4; p++) {
        if (only && strcmp(only, paths[p]) != 0) continue;
        if (nvfp4_cpu_force_simd(p == 1 ? "avx512" : paths[p]) != NVFP4_OK) continue;
        nvfp4_cpu_allow_vnni(p != 1);
        int preps = p == 3 ? 1 : reps;
        double times[50], cpu_best = 0;
        for (int i = 0; i < preps; i++) {
            nvfp4_gemm_args args = {&a, &b, NULL, raw, out, model, threads, 1};
            double t0 = now(), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
            nvfp4_status st = nvfp4_gemm_cpu(&args);
            times[i] = now() - t0;
            double cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
            if (i == 0 || cpu < cpu_best) cpu_best = cpu;
            if (st != NVFP4_OK) {
                fprintf(stderr, "nvfp4_gemm_cpu: %s\n", nvfp4_last_error());
                return 1;
            }
        }
        qsort(times, (size_t)preps, sizeof(double), cmp_double);
        double ns = 1e9 / ((double)M * (double)N * (double)((K + 63) / 64));
        printf("  %-13s best %.3f s  median %.3f s  (%d runs)  ns per output k64 step: "
               "%.2f wall, %.2f cpu\n",
               paths[p], times[0], times[preps / 2], preps, ns * times[0], ns * cpu_best);
        if (!have_first) {
            memcpy(first, raw, (size_t)(M * N) * sizeof(float));
            have_first = 1;
        } else if (memcmp(first, raw, (size_t)(M * N) * sizeof(float)) != 0) {
            agree = 0;
            printf("  MISMATCH between SIMD paths (%s)\n", paths[p]);
        }
    }
    nvfp4_cpu_force_simd(NULL);
    nvfp4_cpu_allow_vnni(1);
    if (check_rows > 0) {
        if (check_rows > M) check_rows = M;
        nvfp4_tensor a_sub = a;
        a_sub.rows = check_rows;
        a_sub.scale_layout = NVFP4_SCALES_TILED; /* the first rows of a tiled layout read the same */
        float *ref = malloc((size_t)(check_rows * N) * sizeof(float));
        nvfp4_gemm_args rargs = {&a_sub, &b, NULL, ref, NULL, model, 1, 1};
        double t0 = now();
        if (nvfp4_gemm_ref(&rargs) != NVFP4_OK) {
            fprintf(stderr, "nvfp4_gemm_ref: %s\n", nvfp4_last_error());
            return 1;
        }
        int same = memcmp(ref, first, (size_t)(check_rows * N) * sizeof(float)) == 0;
        printf("  oracle on the first %lld rows (%.1f s): %s\n", (long long)check_rows, now() - t0,
               same ? "bit-identical" : "DIFFERENT");
        if (!same) agree = 0;
        free(ref);
    }
    printf("paths agree: %s\n", agree ? "yes" : "NO");
    free(raw);
    free(first);
    free(out);
    nvfp4_tensor_free(&a);
    nvfp4_tensor_free(&b);
    return agree ? 0 : 1;
}
