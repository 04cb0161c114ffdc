/* cmd_explain.c -- `nvfp4 explain`: which contract produced another GEMM's
 * outputs?  The engine is the library's nvfp4_explain(); this reads the
 * operands and results, prints a table and writes the JSON report. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"

static const char help[] =
    "usage: nvfp4 explain A.safetensors:NAME B.safetensors:NAME REF.safetensors:NAME [options]\n"
    "\n"
    "Find the contract another GEMM used: REF = A x B^T (A: M x K, B: N x K) is compared\n"
    "bit for bit with every candidate of a family -- accumulation models sm90, sm120\n"
    "(NVFP4 operands only), exact, fma (the plain FP32 loop) and pairwise (an FP32 tree);\n"
    "K slices 1..32 under the slice rules group64 (the contract's), equal, tile128 and\n"
    "tile256; slice partials combined in order, reversed or pairwise (docs/EXPLAIN.md).\n"
    "\n"
    "A and B: NVFP4 tensors stored ComfyUI-style (NAME, NAME_scale, NAME_scale_2; with\n"
    "the rows the file records for them, as nvfp4 quantize writes them), or\n"
    "F16 / BF16 / F32 matrices taken as the exact operand values (F32 values must be\n"
    "exact in F16 or BF16).  REF: an F32 M x N result (compared with raw: for NVFP4\n"
    "operands the per-tensor scales are left out), or a BF16 M x N output compared\n"
    "through the epilogue BF16(alpha * raw [+ bias]).\n"
    "\n"
    "Prints the best candidates, the best one's first differing output, and a verdict:\n"
    "unique (only one model and K-slice count reproduces every output), ambiguous\n"
    "(several do: the data cannot tell them apart), or no match.\n"
    "\n"
    "options:\n"
    "  --json FILE          write the full report (every candidate) as JSON\n"
    "  --alpha A            epilogue alpha for a BF16 REF (default: the product of the\n"
    "                       NVFP4 operands' per-tensor scales, else 1)\n"
    "  --bias FILE:NAME     epilogue bias for a BF16 REF (N values)\n"
    "  --max-k-slices S     largest K-slice count tried (default 32, at most 256)\n"
    "  --top N              table rows (default 12)\n"
    "  --threads N          CPU threads (default: all cores)\n"
    "  --force              write the --json report even over one of the input files\n"
    "exit status: 0 when the report was made (whatever it says), 1 on errors.\n";

/* An operand as read: NVFP4, or values. */
typedef struct operand {
    int is_nvfp4;
    nvfp4_tensor t;
    nvfp4_dtype dtype; /* F16, BF16 or F32 (values) */
    int64_t rows, cols;
    void *data; /* copy of the values */
} operand;

static void operand_free(operand *o)
{
    nvfp4_tensor_free(&o->t);
    free(o->data);
    memset(o, 0, sizeof *o);
}

static int load_operand(const char *C, const char *which, const char *spec, operand *o)
{
    memset(o, 0, sizeof *o);
    char path[4096];
    const char *name;
    if (cli_split_spec(spec, path, sizeof path, &name))
        return cli_error(C, "%s: '%s' is not FILE:NAME", which, spec);
    nvfp4_st_file *f = NULL;
    nvfp4_status st = nvfp4_st_open(&f, path);
    if (st != NVFP4_OK) return cli_lib_error(C, st, "cannot read");
    const nvfp4_st_tensor *t = nvfp4_st_find(f, name);
    char scale_name[1100];
    snprintf(scale_name, sizeof scale_name, "%s_scale", name);
    int rc = 0;
    if (!t) {
        rc = cli_error(C, "%s: %s has no tensor '%s'", which, path, name);
    } else if (t->dtype == NVFP4_DTYPE_U8 && nvfp4_st_find(f, scale_name)) {
        st = nvfp4_st_load_nvfp4(&o->t, f, name);
        if (st != NVFP4_OK) rc = cli_lib_error(C, st, spec);
        o->is_nvfp4 = 1;
        o->rows = o->t.rows;
        o->cols = o->t.cols;
    } else if ((t->dtype == NVFP4_DTYPE_F16 || t->dtype == NVFP4_DTYPE_BF16 ||
                t->dtype == NVFP4_DTYPE_F32) && t->ndim == 2) {
        o->dtype = t->dtype;
        o->rows = t->shape[0];
        o->cols = t->shape[1];
        o->data = malloc(t->nbytes ? t->nbytes : 1);
        if (!o->data) rc = cli_error(C, "%s: out of memory (%zu bytes)", which, t->nbytes);
        else memcpy(o->data, t->data, t->nbytes);
    } else {
        rc = cli_error(C, "%s: '%s' is %s with %d dims; expected an NVFP4 tensor (U8 with %s) "
                          "or a 2-D F16, BF16 or F32 matrix",
                       which, spec, nvfp4_dtype_name(t->dtype), t->ndim, scale_name);
    }
    nvfp4_st_close(f);
    if (rc) operand_free(o);
    return rc;
}

/* Value i of a values operand as float. */
static float value_at(const operand *o, int64_t i)
{
    if (o->dtype == NVFP4_DTYPE_F32) return ((const float *)o->data)[i];
    uint16_t v = ((const uint16_t *)o->data)[i];
    return o->dtype == NVFP4_DTYPE_F16 ? nvfp4_f16_to_f32(v) : nvfp4_bf16_to_f32(v);
}

static int exact_in(float v, nvfp4_operand type)
{
    float back = type == NVFP4_OPERAND_F16 ? nvfp4_f16_to_f32(nvfp4_f16_from_f32(v))
                                           : nvfp4_bf16_to_f32(nvfp4_bf16_from_f32(v));
    return isnan(v) ? isnan(back) : nvfp4_f32_bits(back) == nvfp4_f32_bits(v);
}

/* First element (index) not exact in type, or -1. */
static int64_t first_inexact(const operand *o, nvfp4_operand type)
{
    if (o->is_nvfp4) return -1; /* e2m1 * e4m3 is exact in both */
    if ((o->dtype == NVFP4_DTYPE_F16 && type == NVFP4_OPERAND_F16) ||
        (o->dtype == NVFP4_DTYPE_BF16 && type == NVFP4_OPERAND_BF16))
        return -1;
    for (int64_t i = 0; i < o->rows * o->cols; i++)
        if (!exact_in(value_at(o, i), type)) return i;
    return -1;
}

/* 16-bit values of type for the operand (exactness checked before). */
static uint16_t *to16(const operand *o, nvfp4_operand type)
{
    int64_t n = o->rows * o->cols;
    uint16_t *v = malloc((size_t)(n ? n : 1) * 2);
    if (!v) return NULL;
    for (int64_t r = 0; r < o->rows; r++) {
        for (int64_t c = 0; c < o->cols; c++) {
            float x;
            if (o->is_nvfp4)
                x = nvfp4_e2m1_to_f32(nvfp4_tensor_code(&o->t, r, c)) *
                    fabsf(nvfp4_e4m3_to_f32(nvfp4_tensor_scale(&o->t, r, c / 16)));
            else
                x = value_at(o, r * o->cols + c);
            v[r * o->cols + c] = type == NVFP4_OPERAND_F16 ? nvfp4_f16_from_f32(x) : nvfp4_bf16_from_f32(x);
        }
    }
    return v;
}

/* "1.5", "NaN", "-Inf": an output value from its bits as the report gives
 * them ("0x%04x" for BF16, "0x%08x" for F32; JSON has no NaN or Inf). */
static const char *value_str(char *buf, size_t len, const char *bits)
{
    unsigned long v = bits ? strtoul(bits, NULL, 16) : 0;
    float f = bits && strlen(bits) <= 6 ? nvfp4_bf16_to_f32((uint16_t)v)
                                        : nvfp4_f32_from_bits((uint32_t)v);
    if (isnan(f)) snprintf(buf, len, "NaN");
    else if (isinf(f)) snprintf(buf, len, "%sInf", f < 0 ? "-" : "");
    else snprintf(buf, len, "%.9g", (double)f);
    return buf;
}

static void progress(void *ctx, double f)
{
    (void)ctx;
    cli_progress("explain: %3.0f%%", 100.0 * f);
}

static void print_report(const char *text, int top)
{
    json_error_t err;
    json_t *r = json_loads(text, 0, &err);
    if (!r) return;
    json_t *cands = json_object_get(r, "candidates");
    printf("explain: M=%lld N=%lld K=%lld, %lld outputs, operands %s, reference %s; "
           "%lld candidates, sample of %lld outputs\n",
           (long long)json_integer_value(json_object_get(r, "m")),
           (long long)json_integer_value(json_object_get(r, "n")),
           (long long)json_integer_value(json_object_get(r, "k")),
           (long long)json_integer_value(json_object_get(r, "outputs")),
           json_string_value(json_object_get(r, "operands")),
           json_string_value(json_object_get(r, "reference")),
           (long long)json_integer_value(json_object_get(r, "candidates_evaluated")),
           (long long)json_integer_value(json_object_get(r, "sample_outputs")));
    printf("  %-9s %8s %-8s %11s %-9s %12s %12s\n", "model", "k_slices", "rule", "slice_elems",
           "combine", "matched", "evaluated");
    for (size_t i = 0; i < json_array_size(cands) && (int)i < top; i++) {
        json_t *c = json_array_get(cands, i);
        printf("  %-9s %8lld %-8s %11lld %-9s %12.6f %12lld\n",
               json_string_value(json_object_get(c, "model")),
               (long long)json_integer_value(json_object_get(c, "k_slices")),
               json_string_value(json_object_get(c, "slice_rule")),
               (long long)json_integer_value(json_object_get(c, "slice_elems")),
               json_string_value(json_object_get(c, "combine")),
               json_real_value(json_object_get(c, "matched")),
               (long long)json_integer_value(json_object_get(c, "evaluated")));
    }
    json_t *best = json_object_get(r, "best");
    json_t *fm = json_object_get(best, "first_mismatch");
    printf("best: %s, k_slices=%lld (%s, %lld elements per slice), combine %s: matched %.6f of "
           "%lld\n",
           json_string_value(json_object_get(best, "model")),
           (long long)json_integer_value(json_object_get(best, "k_slices")),
           json_string_value(json_object_get(best, "slice_rule")),
           (long long)json_integer_value(json_object_get(best, "slice_elems")),
           json_string_value(json_object_get(best, "combine")),
           json_real_value(json_object_get(best, "matched")),
           (long long)json_integer_value(json_object_get(best, "evaluated")));
    if (json_is_object(fm)) {
        const char *rb = json_string_value(json_object_get(fm, "ref_bits"));
        const char *gb = json_string_value(json_object_get(fm, "got_bits"));
        char rv[32], gv[32];
        printf("  first differing output: (row %lld, col %lld): ref %s (%s), candidate %s (%s)\n",
               (long long)json_integer_value(json_object_get(fm, "row")),
               (long long)json_integer_value(json_object_get(fm, "col")),
               value_str(rv, sizeof rv, rb), rb ? rb : "?", value_str(gv, sizeof gv, gb),
               gb ? gb : "?");
    }
    printf("unique: %s\n", json_is_true(json_object_get(r, "unique")) ? "true" : "false");
    printf("verdict: %s\n", json_string_value(json_object_get(r, "verdict")));
    json_decref(r);
}

int cmd_explain(int argc, char **argv)
{
    const char *C = "explain";
    const char *specs[3] = {NULL, NULL, NULL}, *json_path = NULL, *sbias = NULL;
    long long threads = 0, max_s = 32, top = 12;
    float alpha = 0;
    int have_alpha = 0, nspecs = 0, force = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            if (++i >= argc) return cli_error(C, "--json needs a file");
            json_path = argv[i];
        } else if (!strcmp(a, "--alpha")) {
            if (++i >= argc || cli_parse_float(argv[i], &alpha))
                return cli_error(C, "--alpha needs a number");
            have_alpha = 1;
        } else if (!strcmp(a, "--bias")) {
            if (++i >= argc) return cli_error(C, "--bias needs FILE:NAME");
            sbias = argv[i];
        } else if (!strcmp(a, "--max-k-slices")) {
            if (++i >= argc || cli_parse_int(argv[i], &max_s) || max_s < 1 || max_s > 256)
                return cli_error(C, "--max-k-slices needs a count in 1..256");
        } else if (!strcmp(a, "--top")) {
            if (++i >= argc || cli_parse_int(argv[i], &top) || top < 0 || top > 100000)
                return cli_error(C, "--top needs a count");
        } else if (!strcmp(a, "--threads")) {
            if (++i >= argc || cli_parse_int(argv[i], &threads) || threads < 0 || threads > 1024)
                return cli_error(C, "--threads needs a count (0 = all cores)");
        } else if (!strcmp(a, "--force")) {
            force = 1;
        } else if (a[0] == '-' && a[1]) {
            return cli_error(C, "unknown option '%s' (try --help)", a);
        } else if (nspecs < 3) {
            specs[nspecs++] = a;
        } else {
            return cli_error(C, "unexpected argument '%s' (try --help)", a);
        }
    }
    if (nspecs < 3)
        return cli_error(C, "needs A.safetensors:NAME B.safetensors:NAME REF.safetensors:NAME "
                            "(try --help)");

    const char *inputs[4] = {NULL, NULL, NULL, NULL};
    char paths[4][4096];
    const char *specs4[4] = {specs[0], specs[1], specs[2], sbias};
    for (int i = 0; i < 4; i++) {
        const char *name;
        if (specs4[i] && !cli_split_spec(specs4[i], paths[i], sizeof paths[i], &name))
            inputs[i] = paths[i];
    }
    if (cli_check_paths(C, inputs, 4, &json_path, 1, force)) return 1;

    operand A, B, R;
    memset(&A, 0, sizeof A);
    memset(&B, 0, sizeof B);
    memset(&R, 0, sizeof R);
    uint16_t *a16 = NULL, *b16 = NULL;
    float *bias = NULL;
    char *json = NULL;
    nvfp4_atomic_file *report = NULL;
    int rc = 1;
    if (load_operand(C, "A", specs[0], &A) || load_operand(C, "B", specs[1], &B) ||
        load_operand(C, "REF", specs[2], &R))
        goto done;
    if (A.cols != B.cols) {
        cli_error(C, "K differs: A is %lld x %lld, B is %lld x %lld", (long long)A.rows,
                  (long long)A.cols, (long long)B.rows, (long long)B.cols);
        goto done;
    }
    if (R.is_nvfp4 || R.dtype == NVFP4_DTYPE_F16 || R.rows != A.rows || R.cols != B.rows) {
        cli_error(C, "REF must be an F32 or BF16 %lld x %lld matrix (is %s %lld x %lld)",
                  (long long)A.rows, (long long)B.rows,
                  R.is_nvfp4 ? "NVFP4" : nvfp4_dtype_name(R.dtype), (long long)R.rows,
                  (long long)R.cols);
        goto done;
    }
    if (sbias && cli_load_vector_spec(C, sbias, B.rows, &bias)) goto done;
    if ((sbias || have_alpha) && R.dtype != NVFP4_DTYPE_BF16) {
        cli_error(C, "--alpha and --bias apply to a BF16 REF only (this one is F32: raw)");
        goto done;
    }

    nvfp4_explain_args ea;
    memset(&ea, 0, sizeof ea);
    if (A.is_nvfp4 && B.is_nvfp4) {
        ea.a = &A.t;
        ea.b = &B.t;
    } else {
        /* one 16-bit type for both: F16 when every value is exact there, else BF16 */
        nvfp4_operand type = NVFP4_OPERAND_F16;
        int64_t ia = first_inexact(&A, type), ib = first_inexact(&B, type);
        if (ia >= 0 || ib >= 0) {
            type = NVFP4_OPERAND_BF16;
            ia = first_inexact(&A, type);
            ib = first_inexact(&B, type);
        }
        if (ia >= 0 || ib >= 0) {
            const operand *o = ia >= 0 ? &A : &B;
            int64_t i = ia >= 0 ? ia : ib;
            cli_error(C, "%s (%s) value %.9g at (row %lld, col %lld) is not exact in F16 or BF16 "
                         "(nor are both operands exact in one of them); explain needs the "
                         "operand values the other GEMM multiplied",
                      ia >= 0 ? "A" : "B", nvfp4_dtype_name(o->dtype), (double)value_at(o, i),
                      (long long)(i / o->cols), (long long)(i % o->cols));
            goto done;
        }
        a16 = to16(&A, type);
        b16 = to16(&B, type);
        if (!a16 || !b16) {
            cli_error(C, "out of memory for the operands");
            goto done;
        }
        ea.a16 = a16;
        ea.b16 = b16;
        ea.type16 = type;
        ea.m = A.rows;
        ea.n = B.rows;
        ea.k = A.cols;
    }
    if (R.dtype == NVFP4_DTYPE_F32) {
        ea.ref = (const float *)R.data;
    } else {
        ea.ref_bf16 = (const uint16_t *)R.data;
        ea.alpha = have_alpha ? alpha
                   : (A.is_nvfp4 && B.is_nvfp4)
                       ? nvfp4_gemm_alpha(A.t.per_tensor_scale, B.t.per_tensor_scale)
                       : 1.0f;
        ea.bias = bias;
    }
    if (json_path && cli_open_output(C, json_path, &report)) goto done;
    ea.nthreads = (int)threads;
    ea.max_k_slices = (int)max_s;
    ea.progress = progress;
    double t0 = cli_now();
    nvfp4_status st = nvfp4_explain(&ea, &json);
    cli_progress_done();
    if (st != NVFP4_OK) {
        cli_lib_error(C, st, "explain");
        goto done;
    }
    print_report(json, (int)top);
    printf("time: %.2f s (%d threads)\n", cli_now() - t0,
           threads ? (int)threads : nvfp4_default_threads());
    rc = report ? cli_commit_text(C, report, json) : 0;
    report = NULL;
done:
    nvfp4_atomic_discard(report);
    operand_free(&A);
    operand_free(&B);
    operand_free(&R);
    free(a16);
    free(b16);
    free(bias);
    nvfp4_free(json);
    return rc;
}
