/* test_format_quant.c -- the ModelOpt and compressed-tensors quantizers
 * against the tools' own output: the cases in tests/golden/modelopt/quant/
 * and tests/golden/compressed-tensors/quant/ (tools/gen_format_golden.py ran
 * NVFP4QTensor.quantize and compressed-tensors' observer arithmetic +
 * NVFP4PackedCompressor on them).
 *
 * Per case, nvfp4_quantize_format (threaded, 1 and 3 threads) and
 * nvfp4_quantize_format_ref must give every code byte, every scale byte
 * and the per-tensor scale's bits, with the scale computed and, where the
 * case gives one, passed in.  Then the two forms against each other on
 * random and adversarial inputs the golden files do not hold. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvfp4.h"
#include "testlib.h"

typedef struct tool {
    nvfp4_format format;
    const char *dir, *codes, *scales, *tensor_scale, *given;
} tool;

static const tool tools[] = {
    {NVFP4_FORMAT_MODELOPT, "tests/golden/modelopt/quant", "expect.weight", "expect.weight_scale",
     "expect.weight_scale_2", "given.weight_scale_2"},
    {NVFP4_FORMAT_COMPRESSED_TENSORS, "tests/golden/compressed-tensors/quant",
     "expect.weight_packed", "expect.weight_scale", "expect.weight_global_scale",
     "given.weight_global_scale"},
};

static int cases_run[2];

static void same_bytes(const char *label, const uint8_t *got, size_t n_got, const uint8_t *want,
                       size_t n_want, int64_t rows)
{
    CHECKF(n_got == n_want, "%s: %zu bytes, the tool wrote %zu", label, n_got, n_want);
    if (n_got == n_want) test_equal_bits(label, got, want, 1, rows, (int64_t)(n_got / (size_t)rows));
}

static void check_case(const tool *tl, const char *file)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", tl->dir, file);
    nvfp4_st_file *f = NULL;
    nvfp4_status st = nvfp4_st_open(&f, path);
    CHECKF(st == NVFP4_OK, "%s", nvfp4_last_error());
    if (st != NVFP4_OK) return;
    const nvfp4_st_tensor *x = nvfp4_st_find(f, "x"), *c = nvfp4_st_find(f, tl->codes),
                          *s = nvfp4_st_find(f, tl->scales), *ts = nvfp4_st_find(f, tl->tensor_scale),
                          *given = nvfp4_st_find(f, tl->given);
    CHECKF(x && c && s && ts && x->ndim == 2 && ts->nbytes == 4, "%s: the case's tensors", file);
    if (!(x && c && s && ts && x->ndim == 2 && ts->nbytes == 4)) {
        nvfp4_st_close(f);
        return;
    }
    float g;
    if (given) memcpy(&g, given->data, 4);
    for (int form = 0; form < 3; form++) {
        nvfp4_ckpt_tensor q;
        st = form == 2 ? nvfp4_quantize_format_ref(&q, x->data, x->dtype, x->shape[0], x->shape[1],
                                                   tl->format, given ? &g : NULL)
                       : nvfp4_quantize_format(&q, x->data, x->dtype, x->shape[0], x->shape[1],
                                               tl->format, given ? &g : NULL, form ? 3 : 1);
        CHECKF(st == NVFP4_OK, "%s: %s", file, nvfp4_last_error());
        if (st != NVFP4_OK) continue;
        const char *how = form == 2 ? "_ref" : form ? " (3 threads)" : " (1 thread)";
        char label[512];
        snprintf(label, sizeof label, "%s%s: codes", file, how);
        same_bytes(label, q.t.codes, (size_t)(q.t.rows * q.t.cols / 2), c->data, c->nbytes, x->shape[0]);
        snprintf(label, sizeof label, "%s%s: scale bytes", file, how);
        same_bytes(label, q.t.scales, nvfp4_scales_bytes(q.t.rows, q.t.cols, q.t.scale_layout),
                   s->data, s->nbytes, x->shape[0]);
        uint32_t want, got = nvfp4_f32_bits(q.tensor_scale);
        memcpy(&want, ts->data, 4);
        CHECKF(got == want, "%s%s: per-tensor scale 0x%08x, the tool 0x%08x", file, how, got, want);
        CHECK(q.format == tl->format && q.t.nibble_order == NVFP4_LO_FIRST &&
              q.t.scale_layout == NVFP4_SCALES_ROW_MAJOR);
        nvfp4_ckpt_tensor_free(&q);
    }
    cases_run[tl - tools]++;
    nvfp4_st_close(f);
}

static void golden(void)
{
    for (size_t t = 0; t < sizeof tools / sizeof tools[0]; t++) {
        DIR *d = opendir(tools[t].dir);
        CHECKF(d != NULL, "cannot open %s", tools[t].dir);
        if (!d) continue;
        struct dirent *e;
        while ((e = readdir(d)))
            if (strstr(e->d_name, ".safetensors")) check_case(&tools[t], e->d_name);
        closedir(d);
    }
    /* the generator writes 41 ModelOpt and 39 compressed-tensors cases */
    CHECKF(cases_run[0] >= 41 && cases_run[1] >= 39, "cases run: %d, %d", cases_run[0], cases_run[1]);
}

/* Random and adversarial inputs: fast == ref, byte for byte. */
static uint16_t pick_bf16(uint64_t *rng, int kind)
{
    uint64_t r = test_rand(rng);
    switch (kind % 6) {
    case 0: return nvfp4_bf16_from_f32((float)test_normal(rng));
    case 1: return (uint16_t)r; /* any pattern: NaNs, Infs, subnormals */
    case 2: return (r & 7) ? 0 : (uint16_t)(r >> 8); /* mostly zero blocks */
    case 3: return nvfp4_bf16_from_f32((float)((int)(r % 13) - 6) * 0.25f); /* E2M1 midpoints */
    case 4: return (uint16_t)((r & 0x8000) | (r >> 20 & 0x7F)); /* subnormals and zeros */
    default: return nvfp4_bf16_from_f32((float)test_normal(rng) * (r & 1 ? 1e30f : 1e-30f));
    }
}

static void fast_vs_ref(void)
{
    uint64_t rng = 0x9E3779B97F4A7C15ULL;
    static const nvfp4_dtype dtypes[3] = {NVFP4_DTYPE_BF16, NVFP4_DTYPE_F16, NVFP4_DTYPE_F32};
    static const int64_t shapes[][2] = {{1, 16}, {3, 48}, {17, 64}, {130, 32}, {5, 80}, {2, 40}};
    int compared = 0;
    for (int kind = 0; kind < 6; kind++)
        for (int di = 0; di < 3; di++)
            for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
                for (int fi = 0; fi < 2; fi++) {
                    int64_t rows = shapes[si][0], cols = shapes[si][1];
                    if (fi == 1 && cols % 16) continue; /* compressed-tensors refuses */
                    size_t es = nvfp4_dtype_size(dtypes[di]);
                    uint8_t *x = malloc((size_t)(rows * cols) * es);
                    for (int64_t i = 0; i < rows * cols; i++) {
                        uint16_t b = pick_bf16(&rng, kind + (int)i);
                        if (dtypes[di] == NVFP4_DTYPE_BF16) {
                            memcpy(x + 2 * i, &b, 2);
                        } else if (dtypes[di] == NVFP4_DTYPE_F16) {
                            uint16_t h = nvfp4_f16_from_f32(nvfp4_bf16_to_f32(b));
                            memcpy(x + 2 * i, &h, 2);
                        } else {
                            float v = nvfp4_bf16_to_f32(b) * (1.0f + (float)(i % 7) * 0x1p-20f);
                            memcpy(x + 4 * i, &v, 4);
                        }
                    }
                    nvfp4_format fmt = fi ? NVFP4_FORMAT_COMPRESSED_TENSORS : NVFP4_FORMAT_MODELOPT;
                    float given = kind == 5 ? 0x1p-7f : 0.37f;
                    for (int g = 0; g < 2; g++) {
                        nvfp4_ckpt_tensor a, b;
                        nvfp4_status sa = nvfp4_quantize_format(&a, x, dtypes[di], rows, cols, fmt,
                                                                g ? &given : NULL, 2);
                        nvfp4_status sb = nvfp4_quantize_format_ref(&b, x, dtypes[di], rows, cols,
                                                                    fmt, g ? &given : NULL);
                        CHECKF(sa == NVFP4_OK && sb == NVFP4_OK, "%s", nvfp4_last_error());
                        if (sa == NVFP4_OK && sb == NVFP4_OK) {
                            char label[160];
                            snprintf(label, sizeof label, "%s kind %d dtype %s %lldx%lld given %d codes",
                                     fmt == NVFP4_FORMAT_MODELOPT ? "modelopt" : "compressed-tensors",
                                     kind, nvfp4_dtype_name(dtypes[di]), (long long)rows,
                                     (long long)cols, g);
                            test_equal_bits(label, a.t.codes, b.t.codes, 1, rows, a.t.cols / 2);
                            test_equal_bits(label, a.t.scales, b.t.scales, 1, rows, a.t.cols / 16);
                            CHECK(nvfp4_f32_bits(a.tensor_scale) == nvfp4_f32_bits(b.tensor_scale));
                            compared++;
                        }
                        nvfp4_ckpt_tensor_free(&a);
                        nvfp4_ckpt_tensor_free(&b);
                    }
                    free(x);
                }
    CHECKF(compared > 300, "compared %d", compared);
}

static void refusals(void)
{
    uint16_t x[40] = {0};
    nvfp4_ckpt_tensor q;
    CHECK(nvfp4_quantize_format(&q, x, NVFP4_DTYPE_BF16, 1, 40, NVFP4_FORMAT_COMPRESSED_TENSORS,
                                NULL, 1) == NVFP4_ERR_UNSUPPORTED);
    CHECK(strstr(nvfp4_last_error(), "multiple of 16") != NULL);
    CHECK(nvfp4_quantize_format(&q, x, NVFP4_DTYPE_BF16, 1, 32, NVFP4_FORMAT_GGUF, NULL, 1) ==
          NVFP4_ERR_UNSUPPORTED);
    CHECK(nvfp4_quantize_format_ref(&q, x, NVFP4_DTYPE_U8, 1, 32, NVFP4_FORMAT_MODELOPT, NULL) ==
          NVFP4_ERR_UNSUPPORTED);
    CHECK(nvfp4_quantize_format(&q, NULL, NVFP4_DTYPE_BF16, 1, 32, NVFP4_FORMAT_MODELOPT, NULL, 1) ==
          NVFP4_ERR_INVALID_ARGUMENT);
    /* ModelOpt pads 40 columns to 48 */
    CHECK(nvfp4_quantize_format(&q, x, NVFP4_DTYPE_BF16, 1, 40, NVFP4_FORMAT_MODELOPT, NULL, 1) ==
          NVFP4_OK);
    CHECK(q.t.cols == 48 && q.stored_cols == 48);
    nvfp4_ckpt_tensor_free(&q);
}

int main(void)
{
    TEST("golden") golden();
    TEST("fast vs ref") fast_vs_ref();
    TEST("refusals") refusals();
    return test_summary("format_quant");
}
