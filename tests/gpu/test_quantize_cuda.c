/* test_quantize_cuda.c -- the device quantizer against the C quantizer, every bit.
 *
 *   test_quantize_cuda [--quick]
 *
 * For each BF16 input (random with outlier channels; adversarial blocks:
 * zeros, huge outliers, equal values, E2M1 ties, subnormals, NaN / Inf
 * with several payloads, random bit patterns), each shape (odd M, k not a
 * multiple of 16 or of 8, a misaligned input pointer), both variants and
 * the dynamic scale plus a list of static scales (ordinary, tiny, huge,
 * zero, negative, NaN, Inf, subnormal):
 *   nvfp4_quantize_cuda()  ==  nvfp4_quantize()  ==  nvfp4_quantize_ref()
 * on codes (padded shape), tiled scales (padding included) and the
 * per-tensor scale; and the fused A producer's FP16 operands equal
 * e2m1(code) * |e4m3(scale)| of nvfp4_quantize()'s output (0x7FFF for a
 * NaN scale) in the GEMM's operand order (nvfp4_sm90_operand_elem), which
 * is the GEMM's workspace format.  Each of the three quantizer kernels
 * (table, one thread a block, four lanes a block) runs every case.
 * --quick: the small shapes only (compute-sanitizer). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvfp4.h"
#include "testlib.h"
#include "formats/layout.h"
#include "nvfp4_testing.h"

#define CUDA_OK(call)                                                                  \
    do {                                                                               \
        cudaError_t e_ = (call);                                                       \
        if (e_ != cudaSuccess) {                                                       \
            fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_),    \
                    __FILE__, __LINE__, #call);                                        \
            exit(2);                                                                   \
        }                                                                              \
    } while (0)

static int64_t stat_cases, stat_elements, stat_ref_cases;

/* ---- inputs -------------------------------------------------------------- */

static uint16_t bf16(float v) { return nvfp4_bf16_from_f32(v); }

/* Heavy-tailed activations with a few outlier channels. */
static uint16_t *random_bf16(int64_t m, int64_t k, uint64_t seed)
{
    uint16_t *x = malloc((size_t)(m * k) * sizeof *x);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 3;
    int64_t out_c[4];
    for (int j = 0; j < 4; j++) out_c[j] = (int64_t)(test_rand(&s) % (uint64_t)k);
    for (int64_t r = 0; r < m; r++)
        for (int64_t c = 0; c < k; c++) {
            double g = test_normal(&s);
            if (test_rand(&s) % 50 == 0) g *= 8;
            for (int j = 0; j < 4; j++)
                if (c == out_c[j]) g *= 40;
            x[r * k + c] = bf16((float)g);
        }
    return x;
}

static const uint16_t NAN_PATTERNS[] = {0x7FC0, 0xFFC0, 0x7F81, 0xFF81, 0x7FFF, 0xFFFF, 0x7FA5};
static const float TIES[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 0.5f, 1.0f, 3.0f};

/* Every 16-block gets one adversarial pattern.  with_inf = 0 keeps the
 * tensor finite apart from NaNs (so the dynamic scale is finite). */
static uint16_t *adversarial_bf16(int64_t m, int64_t k, uint64_t seed, int with_inf)
{
    uint16_t *x = malloc((size_t)(m * k) * sizeof *x);
    uint64_t s = seed * 0xD1B54A32D192ED03ull + 11;
    for (int64_t r = 0; r < m; r++)
        for (int64_t c0 = 0; c0 < k; c0 += 16) {
            int kind = (int)(test_rand(&s) % 11);
            if (!with_inf && kind == 6) kind = 1;
            float base = (float)ldexp(1.0, (int)(test_rand(&s) % 40) - 20);
            for (int64_t c = c0; c < c0 + 16 && c < k; c++) {
                uint64_t u = test_rand(&s);
                uint16_t b;
                switch (kind) {
                case 0: b = (u & 1) ? 0x8000 : 0x0000; break; /* zeros of both signs */
                case 1: /* one huge outlier, others ordinary */
                    b = (c == c0 + (int64_t)(seed % 16)) ? (uint16_t)((u & 0x8000) | 0x7F7F)
                                                         : bf16((float)test_normal(&s));
                    break;
                case 2: b = bf16(base * 1.37f); break; /* equal values */
                case 3: /* E2M1 ties for a block whose amax is 6 * base */
                    b = c == c0 ? bf16(6.0f * base)
                                : bf16(((u & 1) ? -1.0f : 1.0f) * TIES[(u >> 1) % 10] * base);
                    break;
                case 4: b = (uint16_t)((u & 0x8000) | (1 + (u >> 8) % 0x7F)); break; /* subnormal */
                case 5: /* NaNs among ordinary values */
                    b = (u % 5 == 0) ? NAN_PATTERNS[(u >> 8) % 7] : bf16((float)test_normal(&s));
                    break;
                case 6: /* infinities (and a NaN now and then) */
                    b = (u % 4 == 0) ? (uint16_t)((u & 0x8000) | 0x7F80)
                        : (u % 9 == 0) ? NAN_PATTERNS[(u >> 8) % 7]
                                       : bf16((float)test_normal(&s));
                    break;
                case 7: b = (uint16_t)(u >> 16); /* any pattern */
                    if (!with_inf && (b & 0x7FFF) == 0x7F80) b ^= 1;
                    break;
                case 8: b = bf16((float)(test_normal(&s) * 1e-38)); break; /* tiny normals */
                case 9: b = bf16((float)(test_normal(&s) * base)); break;  /* wide exponents */
                default: b = bf16((float)test_normal(&s) * 3e4f); break;  /* large */
                }
                x[r * k + c] = b;
            }
        }
    return x;
}

/* ---- one comparison ------------------------------------------------------ */

typedef struct gpu_result {
    uint8_t *codes, *scales;
    uint16_t *act;
    float pts, pts_prod;
} gpu_result;

/* x_dev points at the device copy of x (possibly misaligned on purpose). */
static void run_gpu(gpu_result *g, const uint16_t *x_dev, int64_t m, int64_t k,
                    const float *pts_host, nvfp4_variant v)
{
    int64_t prows = (m + 15) / 16 * 16, pcols = (k + 15) / 16 * 16;
    size_t cb = (size_t)(prows * pcols / 2), sb = nvfp4_scales_bytes(prows, pcols, NVFP4_SCALES_TILED);
    size_t ab = (size_t)(m * pcols) * 2;
    uint8_t *d_codes, *d_scales;
    uint16_t *d_act;
    float *d_in, *d_pts, *d_pts2, *d_scratch;
    CUDA_OK(cudaMalloc((void **)&d_codes, cb));
    CUDA_OK(cudaMalloc((void **)&d_scales, sb));
    CUDA_OK(cudaMalloc((void **)&d_act, ab));
    CUDA_OK(cudaMalloc((void **)&d_in, 4 * sizeof(float)));
    d_pts = d_in + 1, d_pts2 = d_in + 2, d_scratch = d_in + 3;
    /* Poison the outputs: the kernel must write every byte it owns. */
    CUDA_OK(cudaMemset(d_codes, 0xA5, cb));
    CUDA_OK(cudaMemset(d_scales, 0xA5, sb));
    CUDA_OK(cudaMemset(d_act, 0xA5, ab));
    CUDA_OK(cudaMemset(d_in, 0xA5, 4 * sizeof(float)));
    if (pts_host) CUDA_OK(cudaMemcpy(d_in, pts_host, sizeof(float), cudaMemcpyHostToDevice));

    nvfp4_cuda_quantize_args qa = {
        .x = x_dev, .m = m, .k = k, .input_scale = pts_host ? d_in : NULL, .variant = v,
        .codes = d_codes, .scales = d_scales, .per_tensor_scale = d_pts, .stream = NULL,
    };
    nvfp4_status st = nvfp4_quantize_cuda(&qa);
    CHECKF(st == NVFP4_OK, "nvfp4_quantize_cuda: %s", nvfp4_last_error());
    st = nvfp4_sm90_produce_operands(x_dev, m, k, pts_host ? d_in : NULL, d_scratch, v, d_act,
                                     pcols, d_pts2, NULL);
    CHECKF(st == NVFP4_OK, "nvfp4_sm90_produce_operands: %s", nvfp4_last_error());
    CUDA_OK(cudaDeviceSynchronize());
    g->codes = malloc(cb);
    g->scales = malloc(sb);
    g->act = malloc(ab);
    CUDA_OK(cudaMemcpy(g->codes, d_codes, cb, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(g->scales, d_scales, sb, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(g->act, d_act, ab, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&g->pts, d_pts, sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&g->pts_prod, d_pts2, sizeof(float), cudaMemcpyDeviceToHost));
    cudaFree(d_codes);
    cudaFree(d_scales);
    cudaFree(d_act);
    cudaFree(d_in);
}

/* e2m1(code) * |e4m3(scale)| as FP16 bits, the code's sign kept; 0x7FFF
 * for a NaN scale (the GEMM pre-pass's NaN). */
static uint16_t expected_operand(uint8_t code, uint8_t scale)
{
    if ((scale & 0x7F) == 0x7F) return 0x7FFF;
    float mag = nvfp4_e2m1_to_f32(code & 7) * nvfp4_e4m3_to_f32(scale & 0x7F);
    return (uint16_t)(nvfp4_f16_from_f32(mag) | ((code & 8) ? 0x8000 : 0));
}

/* The three quantizer kernels (nvfp4_q_force_launch: 0 the threshold-table
 * kernel, 1 one thread a block, 2 four lanes a block), each on every case. */
static const char *const KERNEL_NAMES[3] = {"table kernel", "exact kernel", "four-lane kernel"};

static void compare_case(const char *name, const uint16_t *x, const uint16_t *x_dev, int64_t m,
                         int64_t k, const float *pts_host, nvfp4_variant v, int with_ref)
{
    char what[200];
    int64_t prows = (m + 15) / 16 * 16, pcols = (k + 15) / 16 * 16;
    size_t sb = nvfp4_scales_bytes(prows, pcols, NVFP4_SCALES_TILED);
    nvfp4_tensor want = {0}, ref = {0};
    nvfp4_status st = nvfp4_quantize(&want, x, NVFP4_DTYPE_BF16, m, k, pts_host, v, 0);
    CHECKF(st == NVFP4_OK, "%s: nvfp4_quantize: %s", name, nvfp4_last_error());
    if (st != NVFP4_OK) return;
    stat_cases++;
    stat_elements += m * k;
    uint16_t *ops = malloc((size_t)(m * pcols) * 2);
    for (int64_t r = 0; r < m; r++)
        for (int64_t c = 0; c < pcols; c++)
            ops[r * pcols + c] =
                expected_operand(nvfp4_tensor_code(&want, r, c / 16 * 16 + nvfp4_sm90_operand_elem((int)(c % 16))),
                                 nvfp4_tensor_scale(&want, r, c / 16));
    for (int mode = 0; mode < 3; mode++) {
        nvfp4_q_force_launch(mode);
        gpu_result g;
        run_gpu(&g, x_dev, m, k, pts_host, v);
        const char *kn = KERNEL_NAMES[mode];
        snprintf(what, sizeof what, "%s, %s: codes vs nvfp4_quantize", name, kn);
        test_equal_bits(what, g.codes, want.codes, 1, prows, pcols / 2);
        snprintf(what, sizeof what, "%s, %s: tiled scales vs nvfp4_quantize", name, kn);
        test_equal_bits(what, g.scales, want.scales, 1, 1, (int64_t)sb);
        snprintf(what, sizeof what, "%s, %s: per-tensor scale vs nvfp4_quantize", name, kn);
        test_equal_bits(what, &g.pts, &want.per_tensor_scale, 4, 1, 1);
        snprintf(what, sizeof what, "%s, %s: producer's per-tensor scale", name, kn);
        test_equal_bits(what, &g.pts_prod, &want.per_tensor_scale, 4, 1, 1);
        snprintf(what, sizeof what, "%s, %s: producer FP16 operands", name, kn);
        test_equal_bits(what, g.act, ops, 2, m, pcols);
        if (with_ref && mode == 0) {
            st = nvfp4_quantize_ref(&ref, x, NVFP4_DTYPE_BF16, m, k, pts_host, v);
            CHECKF(st == NVFP4_OK, "%s: nvfp4_quantize_ref: %s", name, nvfp4_last_error());
            if (st == NVFP4_OK) {
                stat_ref_cases++;
                snprintf(what, sizeof what, "%s: codes vs nvfp4_quantize_ref", name);
                test_equal_bits(what, g.codes, ref.codes, 1, prows, pcols / 2);
                snprintf(what, sizeof what, "%s: scales vs nvfp4_quantize_ref", name);
                test_equal_bits(what, g.scales, ref.scales, 1, 1, (int64_t)sb);
                snprintf(what, sizeof what, "%s: per-tensor scale vs nvfp4_quantize_ref", name);
                test_equal_bits(what, &g.pts, &ref.per_tensor_scale, 4, 1, 1);
            }
            nvfp4_tensor_free(&ref);
        }
        free(g.codes);
        free(g.scales);
        free(g.act);
    }
    nvfp4_q_force_launch(-1);
    free(ops);
    nvfp4_tensor_free(&want);
}

/* Static scales: ordinary, exact powers of two (so E2M1 ties are ties),
 * tiny (block scales clamp at 448), huge (subnormal / zero block scales),
 * zero, negative, NaN, Inf, subnormal. */
static float static_scales[10];
static int n_static;

static void init_static_scales(void)
{
    float list[] = {1.0f, 0.5f, 0.0123f, 1e-30f, 1e30f, 0.0f, -0.01f,
                    nvfp4_f32_from_bits(0x7FC00000u), nvfp4_f32_from_bits(0x7F800000u),
                    nvfp4_f32_from_bits(0x00012345u)};
    n_static = (int)(sizeof list / sizeof list[0]);
    memcpy(static_scales, list, sizeof list);
}

/* Every scale mode and both variants on one input. */
static void all_modes(const char *label, const uint16_t *x, int64_t m, int64_t k, int misalign,
                      int with_ref, int statics)
{
    /* A copy at an offset of one element makes the loads take the
     * unaligned path. */
    uint16_t *d;
    CUDA_OK(cudaMalloc((void **)&d, (size_t)(m * k + 8) * 2));
    uint16_t *x_dev = d + (misalign ? 1 : 0);
    CUDA_OK(cudaMemcpy(x_dev, x, (size_t)(m * k) * 2, cudaMemcpyHostToDevice));
    for (int vi = 0; vi < 2; vi++) {
        nvfp4_variant v = vi ? NVFP4_VARIANT_CUDA : NVFP4_VARIANT_EAGER;
        for (int si = -1; si < (statics ? n_static : 1); si++) {
            char name[160];
            snprintf(name, sizeof name, "%s %lldx%lld%s %s scale=%s%.3g", label, (long long)m,
                     (long long)k, misalign ? " (misaligned)" : "", vi ? "cuda" : "eager",
                     si < 0 ? "dynamic" : "static ", si < 0 ? 0.0 : (double)static_scales[si]);
            compare_case(name, x, x_dev, m, k, si < 0 ? NULL : &static_scales[si], v, with_ref);
        }
    }
    cudaFree(d);
}

/* comfy-kitchen's own outputs (eager, dynamic scale) for 256 x 1024 BF16
 * inputs: tests/golden/comfy-quantize (NVFP4_GOLDEN names another dir). */
static void check_golden(const char *name)
{
    char path[512], what[200];
    const char *sfx[4] = {"x.bf16", "gs.f32", "eager.q.u8", "eager.s.u8"};
    const size_t want[4] = {256 * 1024 * 2, 4, 256 * 512, 16384};
    void *buf[4] = {0};
    size_t got[4] = {0};
    int ok = 1;
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s.%s", test_golden_dir(), name, sfx[i]);
        buf[i] = test_read_file(path, &got[i]);
        ok &= buf[i] != NULL && got[i] == want[i];
    }
    /* the files are part of the repository: missing ones are a failure */
    CHECKF(ok, "golden %s: files missing or of the wrong size under %s (NVFP4_GOLDEN names "
               "another directory)", name, test_golden_dir());
    if (ok) {
        gpu_result g;
        uint16_t *d;
        CUDA_OK(cudaMalloc((void **)&d, want[0]));
        CUDA_OK(cudaMemcpy(d, buf[0], want[0], cudaMemcpyHostToDevice));
        run_gpu(&g, d, 256, 1024, NULL, NVFP4_VARIANT_EAGER);
        snprintf(what, sizeof what, "golden %s: per-tensor scale", name);
        test_equal_bits(what, &g.pts, buf[1], 4, 1, 1);
        snprintf(what, sizeof what, "golden %s: codes", name);
        test_equal_bits(what, g.codes, buf[2], 1, 256, 512);
        snprintf(what, sizeof what, "golden %s: tiled scales", name);
        test_equal_bits(what, g.scales, buf[3], 1, 1, 16384);
        printf("golden %s: compared with comfy-kitchen's output\n", name);
        free(g.codes);
        free(g.scales);
        free(g.act);
        cudaFree(d);
    }
    for (int i = 0; i < 4; i++) free(buf[i]);
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    if (!nvfp4_cuda_available()) {
        fprintf(stderr, "test_quantize_cuda: no sm_90 device\n");
        return 1;
    }
    init_static_scales();

    TEST("comfy-kitchen golden vectors")
    {
        check_golden("gauss");
        check_golden("outliers");
        check_golden("ties");
    }

    TEST("shapes: random activations")
    {
        /* m odd / not a multiple of 16, k not a multiple of 16 or of 8,
         * row tiles of 128 crossed, a single row. */
        static const int64_t shapes[][2] = {{1, 16},  {37, 200}, {129, 64}, {16, 24},
                                            {3, 5},   {300, 1000}, {128, 5376}, {17, 7168}};
        int ns = quick ? 5 : (int)(sizeof shapes / sizeof shapes[0]);
        for (int i = 0; i < ns; i++) {
            int64_t m = shapes[i][0], k = shapes[i][1];
            uint16_t *x = random_bf16(m, k, (uint64_t)(i + 1));
            all_modes("random", x, m, k, 0, m * k <= 400000, 1);
            if (i == 1 || i == 5) all_modes("random", x, m, k, 1, m * k <= 400000, 0);
            free(x);
        }
    }

    TEST("adversarial blocks")
    {
        int64_t m = quick ? 33 : 97, k = quick ? 256 : 1040;
        for (int with_inf = 0; with_inf < 2; with_inf++) {
            uint16_t *x = adversarial_bf16(m, k, (uint64_t)(5 + with_inf), with_inf);
            all_modes(with_inf ? "adversarial+inf" : "adversarial", x, m, k, 0, 1, 1);
            free(x);
        }
        /* odd shape and misaligned input through the same patterns */
        uint16_t *x = adversarial_bf16(19, 77, 9, 1);
        all_modes("adversarial+inf", x, 19, 77, 1, 1, 1);
        free(x);
    }

    TEST("more blocks than the grid's threads (each thread loops over blocks)")
    {
        /* above 132 SMs x 3 CTAs x 256 threads = 101,376 blocks: random
         * (k odd: the unaligned loads and the edge) and adversarial (k = 1040:
         * the 16-byte loads) */
        if (!quick) {
            uint16_t *x = random_bf16(2048, 1037, 77);
            all_modes("random, grid-stride", x, 2048, 1037, 0, 0, 1);
            free(x);
            x = adversarial_bf16(2000, 1040, 78, 1);
            all_modes("adversarial+inf, grid-stride", x, 2000, 1040, 0, 0, 1);
            free(x);
        }
    }

    TEST("special tensors")
    {
        int64_t m = 20, k = 48;
        uint16_t *x = calloc((size_t)(m * k), 2);
        all_modes("all +0", x, m, k, 0, 1, 1); /* dynamic: scale 0 -> NaN block scales */
        for (int64_t i = 0; i < m * k; i++) x[i] = (uint16_t)(0x8000 | (1 + i % 0x7F));
        all_modes("all subnormal", x, m, k, 0, 1, 1); /* dynamic scale subnormal/2688 */
        for (int64_t i = 0; i < m * k; i++) x[i] = NAN_PATTERNS[i % 7];
        all_modes("all NaN", x, m, k, 0, 1, 1); /* dynamic: the scale is NaN 0x7FC00000 */
        for (int64_t i = 0; i < m * k; i++) x[i] = (i % 3) ? 0x7F80 : 0xFF80;
        all_modes("all Inf", x, m, k, 0, 1, 1);
        for (int64_t i = 0; i < m * k; i++) x[i] = 0x7F7F; /* BF16 max everywhere */
        all_modes("all max", x, m, k, 0, 1, 1);
        free(x);
    }

    TEST("argument errors")
    {
        nvfp4_cuda_quantize_args qa = {0};
        CHECK(nvfp4_quantize_cuda(NULL) == NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(nvfp4_quantize_cuda(&qa) == NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(strstr(nvfp4_last_error(), "required") != NULL);
        qa.x = (const uint16_t *)16, qa.codes = (uint8_t *)16, qa.scales = (uint8_t *)16;
        qa.per_tensor_scale = (float *)16, qa.m = 0, qa.k = 16;
        CHECK(nvfp4_quantize_cuda(&qa) == NVFP4_ERR_INVALID_ARGUMENT);
        qa.m = 1, qa.variant = (nvfp4_variant)7;
        CHECK(nvfp4_quantize_cuda(&qa) == NVFP4_ERR_INVALID_ARGUMENT);
    }

    printf("test_quantize_cuda: %lld cases (%lld also vs the plain reference), %lld input "
           "elements quantized\n",
           (long long)stat_cases, (long long)stat_ref_cases, (long long)stat_elements);
    return test_summary("quantize_cuda");
}
