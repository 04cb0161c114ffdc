/* layer.c -- ComfyUI's NVFP4 weight as three safetensors entries:
 *   NAME          U8      [rows, cols/2]                          codes, hi first
 *   NAME_scale    F8_E4M3 [roundup(rows,128), roundup(cols/16,4)] block scales, 128x4 tiled
 *                 (U8 accepted too: some exporters store the raw bytes)
 *   NAME_scale_2  F32     [] (or [1])                             per-tensor scale
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fmt_internal.h"

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* The logical rows recorded for NAME (metadata NVFP4_ST_ROWS_KEY_PREFIX NAME):
 * 1 and *rows set, 0 when none is recorded, -1 when the record is not a row
 * count that ComfyUI's padding of `stored` rows could have come from. */
static int recorded_rows(const nvfp4_st_file *f, const char *name, int64_t stored, int64_t *rows)
{
    size_t plen = sizeof NVFP4_ST_ROWS_KEY_PREFIX - 1;
    for (size_t i = 0; i < nvfp4_st_metadata_count(f); i++) {
        const char *k, *v;
        nvfp4_st_metadata(f, i, &k, &v);
        if (strncmp(k, NVFP4_ST_ROWS_KEY_PREFIX, plen) || strcmp(k + plen, name)) continue;
        return nvfp4_fmt_rows_record(v, stored, rows) ? 1 : -1;
    }
    return 0;
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

    char *scale_name = nvfp4_fmt_cat(name, "_scale");
    char *scale2_name = nvfp4_fmt_cat(name, "_scale_2");
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
    int64_t logical = rows;
    if (recorded_rows(f, name, rows, &logical) < 0) {
        s = nvfp4_fail(NVFP4_ERR_MALFORMED,
                       "%s: NVFP4 tensor '%s': the metadata '%s%s' is not a row count of %lld "
                       "stored rows (ComfyUI pads rows to a multiple of 16)",
                       file, shown, NVFP4_ST_ROWS_KEY_PREFIX, shown, (long long)rows);
        goto done;
    }
    s = nvfp4_tensor_alloc(out, logical, cols, NVFP4_HI_FIRST, NVFP4_SCALES_TILED);
    if (s != NVFP4_OK) goto done;
    /* the first `logical` rows of codes; the scales as stored, the padding
     * rows' bytes included (the tiles span roundup(rows, 128) rows either way,
     * and no result reads the tile padding) */
    memcpy(out->codes, codes->data, (size_t)logical * (size_t)(cols / 2));
    memcpy(out->scales, scales->data, scales->nbytes);
    /* safetensors is little-endian, as is every host this library targets */
    memcpy(&out->per_tensor_scale, scale2->data, 4);
done:
    free(scale_name);
    free(scale2_name);
    return s;
}

nvfp4_status nvfp4_st_writer_set_rows(nvfp4_st_writer *w, const char *name, int64_t rows)
{
    if (!w || !name || rows < 1)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT,
                          "nvfp4_st_writer_set_rows: NULL argument or rows < 1");
    char *key = nvfp4_fmt_cat(NVFP4_ST_ROWS_KEY_PREFIX, name);
    if (!key) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "nvfp4_st_writer_set_rows: no memory");
    char value[24];
    snprintf(value, sizeof value, "%lld", (long long)rows);
    nvfp4_status s = nvfp4_st_writer_set_metadata(w, key, value);
    free(key);
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
    char *scale_name = nvfp4_fmt_cat(name, "_scale");
    char *scale2_name = nvfp4_fmt_cat(name, "_scale_2");
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

/*-------------------------------------------------------------------------
 *  ComfyUI layers: LAYER.weight (NVFP4), LAYER.input_scale, LAYER.bias and
 *  the LAYER.comfy_quant marker.
 *-------------------------------------------------------------------------*/
static const char comfy_marker_json[] = "{\"format\": \"nvfp4\"}";
static const char weight_suffix[] = ".weight";

int nvfp4_st_is_nvfp4(const nvfp4_st_file *f, const char *name)
{
    if (!f || !name) return 0;
    const nvfp4_st_tensor *t = nvfp4_st_find(f, name);
    if (!t || t->dtype != NVFP4_DTYPE_U8) return 0;
    char *s2 = nvfp4_fmt_cat(name, "_scale_2");
    int found = s2 && nvfp4_st_find(f, s2) != NULL;
    free(s2);
    return found;
}

int nvfp4_st_is_nvfp4_marker(const nvfp4_st_file *f, const char *name)
{
    const nvfp4_st_tensor *t = f && name ? nvfp4_st_find(f, name) : NULL;
    if (!t || t->dtype != NVFP4_DTYPE_U8 || t->ndim != 1) return 0;
    json_t *j = json_loadb(t->data, t->nbytes, 0, NULL);
    const char *format = json_string_value(json_object_get(j, "format"));
    int is_marker = format && strcmp(format, "nvfp4") == 0;
    json_decref(j);
    return is_marker;
}

int nvfp4_st_marker_name(char *buf, size_t len, const char *weight_name)
{
    size_t n = weight_name ? strlen(weight_name) : 0, s = sizeof weight_suffix - 1;
    if (n < s || strcmp(weight_name + n - s, weight_suffix)) return 0;
    int w = snprintf(buf, len, "%.*s.comfy_quant", (int)(n - s), weight_name);
    return w >= 0 && (size_t)w < len;
}

nvfp4_status nvfp4_st_add_nvfp4_layer(nvfp4_st_writer *w, const char *layer, const nvfp4_tensor *t)
{
    if (!w || !layer || !t)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_st_add_nvfp4_layer: NULL argument");
    char *weight = nvfp4_fmt_cat(layer, weight_suffix), *marker = nvfp4_fmt_cat(layer, ".comfy_quant");
    nvfp4_status s = NVFP4_OK;
    if (!weight || !marker) s = nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "nvfp4_st_add_nvfp4_layer: no memory");
    size_t before = nvfp4_st_writer_size(w);
    int64_t marker_shape[1] = {(int64_t)(sizeof comfy_marker_json - 1)};
    if (s == NVFP4_OK) s = nvfp4_st_add_nvfp4(w, weight, t);
    if (s == NVFP4_OK)
        s = nvfp4_st_writer_add(w, marker, NVFP4_DTYPE_U8, 1, marker_shape, comfy_marker_json,
                                sizeof comfy_marker_json - 1);
    if (s != NVFP4_OK) nvfp4_st_writer_truncate(w, before);
    free(weight);
    free(marker);
    return s;
}

nvfp4_status nvfp4_st_load_layer(nvfp4_layer *out, const nvfp4_st_file *f, const char *layer)
{
    if (!out || !f || !layer)
        return nvfp4_fail(NVFP4_ERR_INVALID_ARGUMENT, "nvfp4_st_load_layer: NULL argument");
    memset(out, 0, sizeof *out);
    char *name = malloc(strlen(layer) + sizeof ".input_scale");
    if (!name) return nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "nvfp4_st_load_layer: no memory");
    char shown[300];
    sprintf(name, "%s.weight", layer);
    nvfp4_status st = nvfp4_st_load_nvfp4(&out->weight, f, name);
    if (st != NVFP4_OK) goto fail;
    sprintf(name, "%s.input_scale", layer);
    const nvfp4_st_tensor *t = nvfp4_st_find(f, name);
    if (t) {
        if (t->dtype != NVFP4_DTYPE_F32 || t->nbytes != 4) {
            st = nvfp4_fail(NVFP4_ERR_MALFORMED, "'%s' must be one F32 value",
                            nvfp4_io_printable(shown, sizeof shown, name));
            goto fail;
        }
        memcpy(&out->input_scale, t->data, 4);
        out->has_input_scale = 1;
    }
    sprintf(name, "%s.bias", layer);
    t = nvfp4_st_find(f, name);
    if (t) {
        int64_t rows = out->weight.rows;
        int is_float = t->dtype == NVFP4_DTYPE_F32 || t->dtype == NVFP4_DTYPE_F16 ||
                       t->dtype == NVFP4_DTYPE_BF16;
        if (t->ndim != 1 || t->shape[0] > rows || !is_float) {
            st = nvfp4_fail(NVFP4_ERR_MALFORMED, "'%s' must be a 1-D float tensor of at most %lld values",
                            nvfp4_io_printable(shown, sizeof shown, name), (long long)rows);
            goto fail;
        }
        /* ComfyUI pads N to 16 and zero-extends the bias */
        out->bias = calloc((size_t)rows, sizeof *out->bias);
        if (!out->bias) {
            st = nvfp4_fail(NVFP4_ERR_OUT_OF_MEMORY, "nvfp4_st_load_layer: no memory for the bias");
            goto fail;
        }
        const uint8_t *p = t->data;
        for (int64_t i = 0; i < t->shape[0]; i++) {
            uint16_t h;
            if (t->dtype == NVFP4_DTYPE_F32) {
                memcpy(&out->bias[i], p + 4 * i, 4);
            } else {
                memcpy(&h, p + 2 * i, 2);
                out->bias[i] = t->dtype == NVFP4_DTYPE_F16 ? nvfp4_f16_to_f32(h) : nvfp4_bf16_to_f32(h);
            }
        }
    }
    free(name);
    return NVFP4_OK;
fail:
    free(name);
    nvfp4_layer_free(out);
    return st;
}

void nvfp4_layer_free(nvfp4_layer *l)
{
    if (!l) return;
    nvfp4_tensor_free(&l->weight);
    free(l->bias);
    memset(l, 0, sizeof *l);
}
