/* test_explain.c -- nvfp4_explain names the contract that produced a result.
 *
 * REF is made under a known contract, by our backends (sm90 / exact / sm120
 * with K slices) or by plain C code written here (the FMA loop, the pairwise
 * tree, other slice rules and combination orders), and explain must name
 * it, say unique only when it is, and say ambiguous when the data cannot
 * tell (small-integer data that every model sums exactly). */
#include <jansson.h>

#include "nvfp4.h"
#include "testlib.h"

/* ---- data ---------------------------------------------------------------- */

/* Realistic NVFP4 operands: quantized normal data with heavy per-block scale
 * spread and a few activation channels 1000x larger. */
static void make_nvfp4(nvfp4_tensor *t, int64_t rows, int64_t cols, uint64_t seed, int activations)
{
    float *x = malloc((size_t)(rows * cols) * sizeof(float));
    uint64_t s = seed;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            double v = test_normal(&s) * exp2((double)(test_rand(&s) % 7) - 3.0);
            if (activations && c % 101 == 7) v *= 1000;
            x[r * cols + c] = (float)v;
        }
    nvfp4_status st = nvfp4_quantize(t, x, NVFP4_DTYPE_F32, rows, cols, NULL, NVFP4_VARIANT_EAGER, 2);
    CHECKF(st == NVFP4_OK, "quantize: %s", nvfp4_last_error());
    t->rows = rows; /* the quantizer pads rows to 16; tiled offsets do not depend on it */
    free(x);
}

/* The exact 16-bit values e2m1 * |e4m3| of an NVFP4 tensor, as F16. */
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

/* ---- plain reference code for contracts our backends do not compute ----- */

enum { FMA, PAIRWISE, SM90 };
enum { ORDER, REVERSED, TREE };

static float tree_sum(const float *p, int n)
{
    if (n == 1) return p[0];
    return tree_sum(p, n / 2) + tree_sum(p + n / 2, n - n / 2);
}

static float pairwise_products(const float *a, const float *b, int64_t n)
{
    if (n == 1) return a[0] * b[0];
    return pairwise_products(a, b, n / 2) + pairwise_products(a + n / 2, b + n / 2, n - n / 2);
}

/* One output under (model, slice length, combination), written plainly. */
static float plain_output(int model, const uint16_t *a16, const uint16_t *b16, int64_t k,
                          int64_t len, int how, int bf16)
{
    float parts[256];
    int n = 0;
    for (int64_t k0 = 0; k0 < k; k0 += len) {
        int64_t k1 = k0 + len < k ? k0 + len : k;
        float acc = 0.0f;
        if (model == SM90) {
            acc = nvfp4_sm90_dot(0.0f, a16 + k0, b16 + k0, k1 - k0,
                                 bf16 ? NVFP4_OPERAND_BF16 : NVFP4_OPERAND_F16);
        } else {
            float fa[4096], fb[4096];
            for (int64_t i = k0; i < k1; i++) {
                fa[i - k0] = bf16 ? nvfp4_bf16_to_f32(a16[i]) : nvfp4_f16_to_f32(a16[i]);
                fb[i - k0] = bf16 ? nvfp4_bf16_to_f32(b16[i]) : nvfp4_f16_to_f32(b16[i]);
            }
            if (model == FMA)
                for (int64_t i = 0; i < k1 - k0; i++) acc = fmaf(fa[i], fb[i], acc);
            else
                acc = pairwise_products(fa, fb, k1 - k0);
        }
        parts[n++] = acc;
    }
    if (how == TREE) return tree_sum(parts, n);
    float acc = how == ORDER ? parts[0] : parts[n - 1];
    if (how == ORDER)
        for (int i = 1; i < n; i++) acc = acc + parts[i];
    else
        for (int i = n - 2; i >= 0; i--) acc = acc + parts[i];
    return acc;
}

static float *plain_gemm(int model, const uint16_t *a16, const uint16_t *b16, int64_t m, int64_t n,
                         int64_t k, int64_t len, int how, int bf16)
{
    float *r = malloc((size_t)(m * n) * sizeof(float));
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
            r[i * n + j] = plain_output(model, a16 + i * k, b16 + j * k, k, len, how, bf16);
    return r;
}

/* ---- running explain -------------------------------------------------------- */

typedef struct verdict {
    char model[16], rule[16], combine[16];
    long long k_slices, evaluated, matched_count, outputs, first_row, first_col;
    double matched;
    int unique, ambiguous, has_first;
} verdict;

static int run_explain(nvfp4_explain_args *ea, verdict *v)
{
    char *json = NULL;
    memset(v, 0, sizeof *v);
    nvfp4_status st = nvfp4_explain(ea, &json);
    CHECKF(st == NVFP4_OK, "explain: %s", nvfp4_last_error());
    if (st != NVFP4_OK) return 0;
    json_error_t err;
    json_t *r = json_loads(json, 0, &err);
    CHECKF(r != NULL, "JSON: %s", err.text);
    nvfp4_free(json);
    if (!r) return 0;
    json_t *b = json_object_get(r, "best");
    snprintf(v->model, sizeof v->model, "%s", json_string_value(json_object_get(b, "model")));
    snprintf(v->rule, sizeof v->rule, "%s", json_string_value(json_object_get(b, "slice_rule")));
    snprintf(v->combine, sizeof v->combine, "%s", json_string_value(json_object_get(b, "combine")));
    v->k_slices = json_integer_value(json_object_get(b, "k_slices"));
    v->matched = json_real_value(json_object_get(b, "matched"));
    v->evaluated = json_integer_value(json_object_get(b, "evaluated"));
    v->matched_count = json_integer_value(json_object_get(b, "matched_count"));
    v->outputs = json_integer_value(json_object_get(r, "outputs"));
    v->unique = json_is_true(json_object_get(r, "unique"));
    v->ambiguous = json_is_true(json_object_get(r, "ambiguous"));
    json_t *fm = json_object_get(b, "first_mismatch");
    v->has_first = json_is_object(fm);
    if (v->has_first) {
        v->first_row = json_integer_value(json_object_get(fm, "row"));
        v->first_col = json_integer_value(json_object_get(fm, "col"));
    }
    /* every candidate object carries the fields the brief names */
    json_t *cl = json_object_get(r, "candidates");
    CHECK(json_array_size(cl) > 20);
    json_t *c0 = json_array_get(cl, 0);
    CHECK(json_is_string(json_object_get(c0, "model")) &&
          json_is_integer(json_object_get(c0, "k_slices")) &&
          json_is_string(json_object_get(c0, "slice_rule")) &&
          json_is_string(json_object_get(c0, "combine")) &&
          json_is_real(json_object_get(c0, "matched")) &&
          json_is_integer(json_object_get(c0, "evaluated")));
    json_decref(r);
    return 1;
}

static int same_or_any(const char *got, const char *want) { return !want || !strcmp(got, want); }

#define EXPECT(v, mdl, S, rl, cmb, uniq)                                                        \
    CHECKF(!strcmp((v).model, mdl) && (v).k_slices == (S) && same_or_any((v).rule, rl) &&       \
               same_or_any((v).combine, cmb) && (v).matched == 1.0 &&                            \
               (v).evaluated == (v).outputs && (v).unique == (uniq),                             \
           "got %s S=%lld %s %s matched %.6f of %lld unique %d ambiguous %d", (v).model,          \
           (v).k_slices, (v).rule, (v).combine, (v).matched, (v).evaluated, (v).unique,          \
           (v).ambiguous)

int main(void)
{
    const int64_t M = 24, N = 80, K = 16 * 60; /* 15 groups of 64: K slices end short */
    nvfp4_tensor A, B;
    make_nvfp4(&A, M, K, 11, 1);
    make_nvfp4(&B, N, K, 12, 0);
    float *raw = malloc((size_t)(M * N) * sizeof(float));
    verdict v;

    TEST("our backends' contracts, NVFP4 operands")
    {
        static const struct { nvfp4_model model; int S; const char *name; } cases[] = {
            {NVFP4_MODEL_SM90, 1, "sm90"}, {NVFP4_MODEL_SM90, 4, "sm90"},
            {NVFP4_MODEL_SM90, 7, "sm90"}, {NVFP4_MODEL_EXACT, 3, "exact"},
            {NVFP4_MODEL_SM120, 1, "sm120"}, {NVFP4_MODEL_SM120, 5, "sm120"},
        };
        for (int i = 0; i < 6; i++) {
            nvfp4_gemm_args g = {.a = &A, .b = &B, .raw = raw, .model = cases[i].model,
                                 .nthreads = 2, .k_slices = cases[i].S};
            CHECK(nvfp4_gemm_cpu(&g) == NVFP4_OK);
            nvfp4_explain_args ea = {.a = &A, .b = &B, .ref = raw, .nthreads = 2};
            if (!run_explain(&ea, &v)) continue;
            /* S slices of 15 groups: ceil(15/S) groups each, so 7 -> 8 slices of 2 groups
             * is not what S = 7 gives: 15/7 -> 3 groups per slice -> 5 slices */
            int64_t len = nvfp4_k_slice_elems(K, cases[i].S);
            int count = (int)((K + len - 1) / len);
            EXPECT(v, cases[i].name, count, NULL, NULL, 1);
        }
    }

    TEST("16-bit operands: other rules, combinations and models (plain C)")
    {
        uint16_t *a16 = values16(&A), *b16 = values16(&B);
        static const struct { int model; int64_t len; int how; const char *name, *rule, *comb; int S; } cases[] = {
            {FMA, 16 * 60, ORDER, "fma", NULL, NULL, 1},
            {FMA, 256, REVERSED, "fma", NULL, "reversed", 4}, /* = group64 S=4, tile256 S=4 */
            {PAIRWISE, 128, TREE, "pairwise", NULL, "pairwise", 8},
            {SM90, 144, REVERSED, "sm90", "equal", "reversed", 7}, /* only "equal" cuts at 144 */
            {SM90, 128, TREE, "sm90", NULL, "pairwise", 8}, /* = group64 S=8 */
        };
        for (int i = 0; i < 5; i++) {
            float *ref = plain_gemm(cases[i].model, a16, b16, M, N, K, cases[i].len, cases[i].how, 0);
            nvfp4_explain_args ea = {.a16 = a16, .b16 = b16, .type16 = NVFP4_OPERAND_F16,
                                     .m = M, .n = N, .k = K, .ref = ref, .nthreads = 2};
            if (run_explain(&ea, &v))
                EXPECT(v, cases[i].name, cases[i].S, cases[i].rule, cases[i].comb, 1);
            free(ref);
        }
        /* The pairwise tree over K = 960 splits at 480: exactly "equal" S = 2
         * combined in order.  Both compute the same thing, so explain must
         * say ambiguous (and list the fewest slices first). */
        float *ref = plain_gemm(PAIRWISE, a16, b16, M, N, K, K, ORDER, 0);
        nvfp4_explain_args ea = {.a16 = a16, .b16 = b16, .type16 = NVFP4_OPERAND_F16,
                                 .m = M, .n = N, .k = K, .ref = ref, .nthreads = 2};
        if (run_explain(&ea, &v)) {
            CHECKF(!strcmp(v.model, "pairwise") && v.k_slices == 1 && v.matched == 1.0 &&
                       !v.unique && v.ambiguous,
                   "got %s S=%lld unique %d ambiguous %d", v.model, v.k_slices, v.unique,
                   v.ambiguous);
        }
        free(ref);
        free(a16);
        free(b16);
    }

    TEST("16-bit values that are not NVFP4 (generic sm90 path), K not a multiple of 16")
    {
        int64_t m = 9, n = 40, k = 300;
        uint16_t *a16 = malloc((size_t)(m * k) * 2), *b16 = malloc((size_t)(n * k) * 2);
        uint64_t s = 99;
        for (int64_t i = 0; i < m * k; i++) a16[i] = nvfp4_bf16_from_f32((float)test_normal(&s));
        for (int64_t i = 0; i < n * k; i++) b16[i] = nvfp4_bf16_from_f32((float)(0.03 * test_normal(&s)));
        /* sm90 in k16 steps, the last one padded: group64 S = 2 -> slices of 192;
         * the plain code gets the zero padding written out */
        uint16_t *ap = calloc((size_t)(m * 304), 2), *bp = calloc((size_t)(n * 304), 2);
        for (int64_t r = 0; r < m; r++) memcpy(ap + r * 304, a16 + r * k, (size_t)k * 2);
        for (int64_t r = 0; r < n; r++) memcpy(bp + r * 304, b16 + r * k, (size_t)k * 2);
        float *ref = plain_gemm(SM90, ap, bp, m, n, 304, 192, ORDER, 1);
        nvfp4_explain_args ea = {.a16 = a16, .b16 = b16, .type16 = NVFP4_OPERAND_BF16,
                                 .m = m, .n = n, .k = k, .ref = ref, .nthreads = 2};
        if (run_explain(&ea, &v)) EXPECT(v, "sm90", 2, NULL, "order", 1);
        /* and the plain FMA loop over all of K (no padding involved) */
        free(ref);
        ref = plain_gemm(FMA, a16, b16, m, n, k, k, ORDER, 1);
        ea.ref = ref;
        if (run_explain(&ea, &v)) EXPECT(v, "fma", 1, NULL, NULL, 1);
        free(ref);
        free(a16), free(b16), free(ap), free(bp);
    }

    TEST("small-integer data: every model is exact, explain says ambiguous")
    {
        int64_t m = 10, n = 50, k = 256;
        uint16_t *a16 = malloc((size_t)(m * k) * 2), *b16 = malloc((size_t)(n * k) * 2);
        uint64_t s = 5;
        for (int64_t i = 0; i < m * k; i++) a16[i] = nvfp4_f16_from_f32((float)((int)(test_rand(&s) % 7) - 3));
        for (int64_t i = 0; i < n * k; i++) b16[i] = nvfp4_f16_from_f32((float)((int)(test_rand(&s) % 5) - 2));
        float *ref = plain_gemm(FMA, a16, b16, m, n, k, k, ORDER, 0);
        nvfp4_explain_args ea = {.a16 = a16, .b16 = b16, .type16 = NVFP4_OPERAND_F16,
                                 .m = m, .n = n, .k = k, .ref = ref, .nthreads = 2};
        if (run_explain(&ea, &v)) {
            CHECK(v.matched == 1.0 && v.evaluated == m * n);
            CHECKF(!v.unique && v.ambiguous, "unique %d ambiguous %d", v.unique, v.ambiguous);
        }
        free(ref), free(a16), free(b16);
    }

    TEST("a BF16 reference through the epilogue (alpha, bias)")
    {
        uint16_t *out = malloc((size_t)(M * N) * 2);
        float *bias = malloc((size_t)N * sizeof(float));
        uint64_t s = 8;
        for (int64_t i = 0; i < N; i++) bias[i] = nvfp4_bf16_to_f32(nvfp4_bf16_from_f32((float)test_normal(&s)));
        nvfp4_gemm_args g = {.a = &A, .b = &B, .bias = bias, .out = out, .model = NVFP4_MODEL_SM90,
                             .nthreads = 2, .k_slices = 3};
        CHECK(nvfp4_gemm_cpu(&g) == NVFP4_OK);
        nvfp4_explain_args ea = {.a = &A, .b = &B, .ref_bf16 = out, .bias = bias, .nthreads = 2,
                                 .alpha = nvfp4_gemm_alpha(A.per_tensor_scale, B.per_tensor_scale)};
        /* BF16 rounding hides many differences: the best matches all, and
         * explain says unique only if nothing else with another S does */
        if (run_explain(&ea, &v)) {
            CHECK(v.matched == 1.0 && v.evaluated == M * N);
            CHECK(!strcmp(v.model, "sm90") || v.ambiguous);
        }
        free(out), free(bias);
    }

    TEST("one altered output: no full match, the first difference named")
    {
        nvfp4_gemm_args g = {.a = &A, .b = &B, .raw = raw, .model = NVFP4_MODEL_SM90, .nthreads = 2,
                             .k_slices = 2};
        CHECK(nvfp4_gemm_cpu(&g) == NVFP4_OK);
        int64_t r = 17, c = 61; /* outside the sample grid's rows */
        raw[r * N + c] = nvfp4_f32_from_bits(nvfp4_f32_bits(raw[r * N + c]) ^ 1u);
        nvfp4_explain_args ea = {.a = &A, .b = &B, .ref = raw, .nthreads = 1};
        if (run_explain(&ea, &v)) {
            CHECKF(!strcmp(v.model, "sm90") && v.k_slices == 2 && !v.unique && !v.ambiguous &&
                       v.has_first && v.first_row == r && v.first_col == c &&
                       v.matched_count == M * N - 1 && v.evaluated == M * N,
                   "got %s S=%lld matched %.9f first (%lld, %lld)", v.model, v.k_slices, v.matched,
                   v.first_row, v.first_col);
        }
    }

    TEST("argument errors")
    {
        char *json = (char *)1;
        nvfp4_explain_args ea = {.a = &A, .b = NULL, .ref = raw};
        CHECK(nvfp4_explain(&ea, &json) == NVFP4_ERR_INVALID_ARGUMENT && json == NULL);
        ea.b = &B;
        ea.ref = NULL;
        CHECK(nvfp4_explain(&ea, &json) == NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(strstr(nvfp4_last_error(), "reference") != NULL);
        ea.ref = raw;
        ea.max_k_slices = 1000;
        CHECK(nvfp4_explain(&ea, &json) == NVFP4_ERR_INVALID_ARGUMENT);
        CHECK(nvfp4_explain(NULL, &json) == NVFP4_ERR_INVALID_ARGUMENT);
        nvfp4_free(NULL);
    }

    free(raw);
    nvfp4_tensor_free(&A);
    nvfp4_tensor_free(&B);
    return test_summary("explain");
}
