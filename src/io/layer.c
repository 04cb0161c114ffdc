/* layer.c -- ComfyUI's NVFP4 weight as three safetensors entries:
 *   NAME          U8      [rows, cols/2]                          codes, hi first
 *   NAME_scale    F8_E4M3 [roundup(rows,128), roundup(cols/16,4)] block scales, 128x4 tiled
 *                 (U8 accepted too: some exporters store the raw bytes)
 *   NAME_scale_2  F32     [] (or [1])                             per-tensor scale
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* NAME + suffix, malloc'ed. */
static char *suffixed(const char *name, const char *suffix)
{
    size_t a = strlen(name), b = strlen(suffix);
    char *s = malloc(a + b + 1);
    if (s) {
        memcpy(s, name, a);
        memcpy(s + a, suffix, b + 1);
    }
    return s;
}

static void shape_str(char *buf, size_t len, const nvfp4_st_tensor *t)
{
    size_t o = 0;
    o += (size_t)snprintf(buf, len, "%s [", nvfp4_dtype_name(t->dtype));
    for (int d = 0; d < t->ndim && o < len; d++)
        o += (size_t)snprintf(buf + o, len - o, d ? ", %lld" : "%lld", (long long)t->shape[d]);
    if (o < len) snprintf(buf + o, len - o, "]");
}

nvfp4_status nvfp4_st_load_nvfp4(nvfp4_tensor *out, const nvfp4_st_file *f, const char *name)
{
    if (!out || !f || !name)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_st_load_nvfp4: NULL argument");
    memset(out, 0, sizeof *out);
    char file[128], shown[128], got[128];
    nvfp4_io_printable(file, sizeof file, nvfp4_st_path(f));
    nvfp4_io_printable(shown, sizeof shown, name);

    char *scale_name = suffixed(name, "_scale");
    char *scale2_name = suffixed(name, "_scale_2");
    nvfp4_status s = NVFP4_OK;
    if (!scale_name || !scale2_name) {
        s = nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "nvfp4_st_load_nvfp4: no memory");
        goto done;
    }
    const nvfp4_st_tensor *codes = nvfp4_st_find(f, name);
    const nvfp4_st_tensor *scales = nvfp4_st_find(f, scale_name);
    const nvfp4_st_tensor *scale2 = nvfp4_st_find(f, scale2_name);
    if (!codes || !scales || !scale2) {
        s = nvfp4_fail(NVFP4_ERR_NOT_FOUND, "%s: NVFP4 tensor '%s': no tensor '%s%s' in the file",
                       file, shown, shown,
                       !codes ? "" : !scales ? "_scale" : "_scale_2");
        goto done;
    }

    shape_str(got, sizeof got, codes);
    if (codes->dtype != NVFP4_DTYPE_U8 || codes->ndim != 2 || codes->shape[0] < 1 ||
        codes->shape[1] < 8 || codes->shape[1] % 8 != 0) {
        s = nvfp4_fail(NVFP4_ERR_MALFORMED,
                       "%s: NVFP4 tensor '%s': codes are %s; want U8 [rows, cols/2] with rows >= 1 "
                       "and cols a positive multiple of 16",
                       file, shown, got);
        goto done;
    }
    int64_t rows = codes->shape[0], cols = codes->shape[1] * 2;
    int64_t want_r = round_up(rows, 128), want_c = round_up(cols / NVFP4_BLOCK, 4);
    shape_str(got, sizeof got, scales);
    if ((scales->dtype != NVFP4_DTYPE_F8_E4M3 && scales->dtype != NVFP4_DTYPE_U8) ||
        scales->ndim != 2 || scales->shape[0] != want_r || scales->shape[1] != want_c ||
        scales->nbytes != nvfp4_scales_bytes(rows, cols, NVFP4_SCALES_TILED)) {
        s = nvfp4_fail(NVFP4_ERR_MALFORMED,
                       "%s: NVFP4 tensor '%s': '%s_scale' is %s; codes of %lld x %lld need "
                       "F8_E4M3 [%lld, %lld] (128x4 tiled block scales)",
                       file, shown, shown, got, (long long)rows, (long long)cols,
                       (long long)want_r, (long long)want_c);
        goto done;
    }
    shape_str(got, sizeof got, scale2);
    if (scale2->dtype != NVFP4_DTYPE_F32 || scale2->nbytes != 4 || scale2->ndim > 1) {
        s = nvfp4_fail(NVFP4_ERR_MALFORMED,
                       "%s: NVFP4 tensor '%s': '%s_scale_2' is %s; want an F32 scalar ([] or [1])",
                       file, shown, shown, got);
        goto done;
    }
    s = nvfp4_tensor_alloc(out, rows, cols, NVFP4_HI_FIRST, NVFP4_SCALES_TILED);
    if (s != NVFP4_OK) goto done;
    memcpy(out->codes, codes->data, codes->nbytes);
    memcpy(out->scales, scales->data, scales->nbytes);
    /* safetensors is little-endian, as is every host this library targets */
    memcpy(&out->per_tensor_scale, scale2->data, 4);
done:
    free(scale_name);
    free(scale2_name);
    return s;
}

nvfp4_status nvfp4_st_add_nvfp4(nvfp4_st_writer *w, const char *name, const nvfp4_tensor *t)
{
    if (!w || !name || !t)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_st_add_nvfp4: NULL argument");
    char shown[128];
    nvfp4_io_printable(shown, sizeof shown, name);
    if (t->nibble_order != NVFP4_HI_FIRST || t->scale_layout != NVFP4_SCALES_TILED)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_st_add_nvfp4: '%s': ComfyUI checkpoints hold hi-first codes and "
                          "tiled scales; convert with nvfp4_tensor_convert() first",
                          shown);
    if (t->rows < 1 || t->cols < NVFP4_BLOCK || t->cols % NVFP4_BLOCK != 0 || !t->codes ||
        !t->scales)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_st_add_nvfp4: '%s': %lld x %lld is not a valid NVFP4 tensor "
                          "(rows >= 1, cols a positive multiple of 16, arrays set)",
                          shown, (long long)t->rows, (long long)t->cols);
    size_t code_bytes;
    if (!nvfp4_mul_size((size_t)t->rows, (size_t)t->cols / 2, &code_bytes))
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_st_add_nvfp4: '%s': too large",
                          shown);
    int64_t code_shape[2] = {t->rows, t->cols / 2};
    int64_t scale_shape[2] = {round_up(t->rows, 128), round_up(t->cols / NVFP4_BLOCK, 4)};
    char *scale_name = suffixed(name, "_scale");
    char *scale2_name = suffixed(name, "_scale_2");
    if (!scale_name || !scale2_name) {
        free(scale_name);
        free(scale2_name);
        return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "nvfp4_st_add_nvfp4: no memory");
    }
    /* all three or none */
    size_t before = nvfp4_st_writer_size(w);
    nvfp4_status s =
        nvfp4_st_writer_add(w, name, NVFP4_DTYPE_U8, 2, code_shape, t->codes, code_bytes);
    if (s == NVFP4_OK)
        s = nvfp4_st_writer_add(w, scale_name, NVFP4_DTYPE_F8_E4M3, 2, scale_shape, t->scales,
                                nvfp4_scales_bytes(t->rows, t->cols, NVFP4_SCALES_TILED));
    /* copied: the scale lives in the struct, which may not outlive the write */
    if (s == NVFP4_OK)
        s = nvfp4_st_writer_add_copy(w, scale2_name, NVFP4_DTYPE_F32, 0, NULL,
                                     &t->per_tensor_scale, sizeof t->per_tensor_scale);
    if (s != NVFP4_OK) nvfp4_st_writer_truncate(w, before);
    free(scale_name);
    free(scale2_name);
    return s;
}
