/* test_comfy_golden.c -- the quantizer against comfy-kitchen's own output on
 * many value distributions and shapes: the files in tests/golden/comfy-kitchen/,
 * made by tools/gen_comfy_golden.py (comfy-kitchen's eager quantize_nvfp4).
 *
 * Per case: nvfp4_quantize (threaded) and nvfp4_quantize_ref, per-tensor
 * scale computed, must give every byte of the codes (hi-first, padded shape),
 * every byte of the 128x4 tiled scales and the per-tensor scale's bits. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvfp4.h"
#include "testlib.h"

static const char *DIR_PATH = "tests/golden/comfy-kitchen";

static const nvfp4_st_tensor *need(nvfp4_st_file *f, const char *name, const char *file)
{
    const nvfp4_st_tensor *t = nvfp4_st_find(f, name);
    CHECKF(t != NULL, "%s: no tensor '%s'", file, name);
    return t;
}

/* Compare got (n bytes) with want; report the first difference as
 * (row, byte column, bits) of a rows x (n / rows) byte matrix. */
static void same_bytes(const char *file, const char *what, const uint8_t *got, size_t n_got,
                       const uint8_t *want, size_t n_want, int64_t rows)
{
    CHECKF(n_got == n_want, "%s: %s: %zu bytes, comfy-kitchen wrote %zu", file, what, n_got, n_want);
    if (n_got != n_want) return;
    char label[512];
    snprintf(label, sizeof label, "%s: %s", file, what);
    test_equal_bits(label, got, want, 1, rows, (int64_t)(n_got / (size_t)rows));
}

static void check_case(const char *file)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", DIR_PATH, file);
    nvfp4_st_file *f = NULL;
    nvfp4_status st = nvfp4_st_open(&f, path);
    CHECKF(st == NVFP4_OK, "%s", nvfp4_last_error());
    if (st != NVFP4_OK) return;
    const nvfp4_st_tensor *x = need(f, "x", file), *c = need(f, "expect.codes", file),
                          *s = need(f, "expect.scales", file), *s2 = need(f, "expect.scale_2", file);
    if (x && c && s && s2 && x->ndim == 2 && s2->nbytes == 4 && c->ndim == 2) {
        for (int ref = 0; ref < 2; ref++) {
            nvfp4_tensor q = {0};
            st = ref ? nvfp4_quantize_ref(&q, x->data, x->dtype, x->shape[0], x->shape[1], NULL,
                                          NVFP4_VARIANT_EAGER)
                     : nvfp4_quantize(&q, x->data, x->dtype, x->shape[0], x->shape[1], NULL,
                                      NVFP4_VARIANT_EAGER, 0);
            CHECKF(st == NVFP4_OK, "%s: quantize%s: %s", file, ref ? "_ref" : "", nvfp4_last_error());
            if (st != NVFP4_OK) continue;
            char what[64];
            uint32_t want_s2, got_s2 = nvfp4_f32_bits(q.per_tensor_scale);
            memcpy(&want_s2, s2->data, 4);
            CHECKF(got_s2 == want_s2, "%s: per-tensor scale 0x%08x, comfy-kitchen 0x%08x", file,
                   got_s2, want_s2);
            CHECKF(q.rows == c->shape[0] && q.cols / 2 == c->shape[1],
                   "%s: padded shape %lld x %lld, comfy-kitchen %lld x %lld", file, (long long)q.rows,
                   (long long)q.cols, (long long)c->shape[0], (long long)c->shape[1] * 2);
            snprintf(what, sizeof what, "codes (%s)", ref ? "ref" : "fast");
            same_bytes(file, what, q.codes, (size_t)(q.rows * q.cols / 2), c->data, c->nbytes, q.rows);
            snprintf(what, sizeof what, "tiled scales (%s)", ref ? "ref" : "fast");
            same_bytes(file, what, q.scales, nvfp4_scales_bytes(q.rows, q.cols, NVFP4_SCALES_TILED),
                       s->data, s->nbytes, s->shape[0]);
            nvfp4_tensor_free(&q);
        }
    } else {
        CHECKF(0, "%s: unexpected layout of the golden file", file);
    }
    nvfp4_st_close(f);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void)
{
    TEST("comfy-kitchen golden quantizations")
    {
        DIR *d = opendir(DIR_PATH);
        CHECKF(d != NULL, "cannot open %s (run from the repository root)", DIR_PATH);
        char *names[256];
        int n = 0;
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL && n < 256) {
            size_t L = strlen(e->d_name);
            if (L > 12 && strcmp(e->d_name + L - 12, ".safetensors") == 0) names[n++] = strdup(e->d_name);
        }
        if (d) closedir(d);
        qsort(names, (size_t)n, sizeof names[0], by_name);
        CHECKF(n >= 38, "only %d golden files in %s", n, DIR_PATH);
        for (int i = 0; i < n; i++) {
            check_case(names[i]);
            free(names[i]);
        }
        printf("comfy-kitchen golden: %d cases\n", n);
    }
    return test_summary("comfy_golden");
}
