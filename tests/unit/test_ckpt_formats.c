/* test_ckpt_formats.c -- reading, detecting and converting NVFP4 checkpoints
 * of every format against the tools' own files (tests/golden/modelopt/,
 * compressed-tensors/, gguf/; tools/gen_format_golden.py):
 *  - detection names each golden checkpoint's format;
 *  - reading gives every code byte, scale byte and per-tensor scale stored;
 *  - ModelOpt -> compressed-tensors equals compressed-tensors' own converter,
 *    ModelOpt -> GGUF equals llama.cpp's repack (gguf-py's file), tensor by
 *    tensor and byte for byte; round trips through every format give back
 *    every byte;
 *  - what a target cannot hold is refused before anything is written;
 *  - GGUF's UE4M3 scale bytes decode as gguf-py decodes them;
 *  - the GGUF reader rejects every prefix and survives every corrupted byte;
 *  - a weight's rows record (nvfp4 quantize's padding) is read by every
 *    format's loaders, carried by conversion, and refused when padding
 *    could not have made the stored rows. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/fmt_internal.h"
#include "nvfp4.h"
#include "testlib.h"

static char tmpdir[256];
static const char *MO = "tests/golden/modelopt/llama-nvfp4";
static const char *MO_MIXED = "tests/golden/modelopt/llama-mixed";
static const char *CT_CONV = "tests/golden/compressed-tensors/llama-from-modelopt";
static const char *CT = "tests/golden/compressed-tensors/llama-nvfp4";
static const char *GG = "tests/golden/gguf/llama-nvfp4.gguf";
static const char *GG_BYTES = "tests/golden/gguf/scale-bytes.gguf";

static const char *tmp(const char *name)
{
    static char buf[8][512];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

static int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/*---- detection ----*/

static void detection(void)
{
    struct {
        const char *path;
        nvfp4_format want;
        const char *evidence;
    } cases[] = {
        {MO, NVFP4_FORMAT_MODELOPT, "modelopt"},
        {"tests/golden/modelopt/llama-nvfp4/model-00001-of-00002.safetensors", NVFP4_FORMAT_MODELOPT, "config.json"},
        {MO_MIXED, NVFP4_FORMAT_MODELOPT, "quant_method modelopt"},
        {CT_CONV, NVFP4_FORMAT_COMPRESSED_TENSORS, "weight_packed"},
        {CT, NVFP4_FORMAT_COMPRESSED_TENSORS, "weight_packed"},
        {GG, NVFP4_FORMAT_GGUF, "GGUF file"},
        {"tests/golden/modelopt/quant/gauss.safetensors", NVFP4_FORMAT_MODELOPT, "row-major"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nvfp4_format f;
        char why[512];
        nvfp4_status s = nvfp4_detect_format(&f, cases[i].path, why, sizeof why);
        CHECKF(s == NVFP4_OK && f == cases[i].want && strstr(why, cases[i].evidence),
               "%s: format %d (%s), want %d: %s", cases[i].path, (int)f, why, (int)cases[i].want,
               s == NVFP4_OK ? "" : nvfp4_last_error());
    }
    /* ModelOpt's weight in a file of its own, 128 rows and 64 columns: the
     * tiled and the row-major scale shapes coincide; no marker -> modelopt,
     * with the marker -> comfyui; a bare name -> comfyui */
    uint16_t x[128 * 64];
    uint64_t rng = 5;
    for (int i = 0; i < 128 * 64; i++) x[i] = nvfp4_bf16_from_f32((float)test_normal(&rng));
    for (int variant = 0; variant < 3; variant++) {
        nvfp4_ckpt_tensor q;
        nvfp4_format fmt = variant == 1 ? NVFP4_FORMAT_COMFYUI : NVFP4_FORMAT_MODELOPT;
        CHECK(nvfp4_quantize_format(&q, x, NVFP4_DTYPE_BF16, 128, 64, fmt, NULL, 1) == NVFP4_OK);
        nvfp4_st_writer *w = NULL;
        nvfp4_st_writer_new(&w);
        CHECK(nvfp4_st_add_format(w, variant == 2 ? "x" : "l.weight", &q) == NVFP4_OK);
        CHECK(nvfp4_st_writer_write(w, tmp("amb.safetensors"), NULL, NULL) == NVFP4_OK);
        nvfp4_st_writer_free(w);
        nvfp4_format f;
        char why[512];
        CHECK(nvfp4_detect_format(&f, tmp("amb.safetensors"), why, sizeof why) == NVFP4_OK);
        nvfp4_format want = variant == 0 ? NVFP4_FORMAT_MODELOPT : NVFP4_FORMAT_COMFYUI;
        CHECKF(f == want, "variant %d: %d (%s)", variant, (int)f, why);
        /* and it reads back as written */
        nvfp4_ckpt *c = NULL;
        CHECK(nvfp4_ckpt_open(&c, tmp("amb.safetensors"), fmt) == NVFP4_OK);
        nvfp4_ckpt_tensor r;
        CHECK(c && nvfp4_ckpt_read(&r, c, variant == 2 ? "x" : "l.weight") == NVFP4_OK);
        if (c && r.t.codes) {
            test_equal_bits("codes read back", r.t.codes, q.t.codes, 1, 128, 32);
            test_equal_bits("scales read back", r.t.scales, q.t.scales, 1, 1,
                            (int64_t)nvfp4_scales_bytes(128, 64, q.t.scale_layout));
            CHECK(nvfp4_f32_bits(r.tensor_scale) == nvfp4_f32_bits(q.tensor_scale));
        }
        nvfp4_ckpt_tensor_free(&r);
        nvfp4_ckpt_close(c);
        nvfp4_ckpt_tensor_free(&q);
    }
}

/*---- a checkpoint's tensors, for byte comparisons ----*/

typedef struct named {
    char name[256];
    char type[16];
    size_t nbytes;
    uint8_t *bytes;
} named;

typedef struct tensors {
    named *t;
    size_t n;
} tensors;

static int load_all(tensors *out, const char *path)
{
    memset(out, 0, sizeof *out);
    nvfp4_ckpt *c = NULL;
    if (nvfp4_ckpt_open(&c, path, NVFP4_FORMAT_UNKNOWN) != NVFP4_OK) {
        fprintf(stderr, "load_all %s: %s\n", path, nvfp4_last_error());
        return 0;
    }
    out->n = nvfp4_ckpt_entries(c);
    out->t = calloc(out->n, sizeof *out->t);
    for (size_t i = 0; i < out->n; i++) {
        nvfp4_ckpt_entry e;
        nvfp4_ckpt_entry_at(c, i, &e);
        snprintf(out->t[i].name, sizeof out->t[i].name, "%s", e.name);
        snprintf(out->t[i].type, sizeof out->t[i].type, "%s", e.type);
        out->t[i].nbytes = e.nbytes;
        out->t[i].bytes = malloc(e.nbytes ? e.nbytes : 1);
        memcpy(out->t[i].bytes, e.data, e.nbytes);
    }
    nvfp4_ckpt_close(c);
    return 1;
}

static void free_all(tensors *t)
{
    for (size_t i = 0; i < t->n; i++) free(t->t[i].bytes);
    free(t->t);
}

static const named *by_name(const tensors *t, const char *name)
{
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->t[i].name, name)) return &t->t[i];
    return NULL;
}

/* Every tensor of a in b with the same type and bytes, and as many. */
static void same_tensors(const char *what, const char *a_path, const char *b_path)
{
    tensors a, b;
    if (!load_all(&a, a_path) || !load_all(&b, b_path)) {
        CHECKF(0, "%s: cannot load %s or %s", what, a_path, b_path);
        return;
    }
    CHECKF(a.n == b.n, "%s: %zu tensors, want %zu", what, a.n, b.n);
    size_t bad = 0;
    for (size_t i = 0; i < a.n; i++) {
        const named *x = &a.t[i], *y = by_name(&b, x->name);
        if (!y) {
            if (!bad++) fprintf(stderr, "%s: '%s' is missing from %s\n", what, x->name, b_path);
            continue;
        }
        if (strcmp(x->type, y->type) || x->nbytes != y->nbytes || memcmp(x->bytes, y->bytes, x->nbytes)) {
            if (!bad++) {
                size_t k = 0;
                while (k < x->nbytes && k < y->nbytes && x->bytes[k] == y->bytes[k]) k++;
                fprintf(stderr, "%s: '%s' differs: %s %zu bytes vs %s %zu bytes, first at byte %zu\n",
                        what, x->name, x->type, x->nbytes, y->type, y->nbytes, k);
            }
        }
    }
    CHECKF(bad == 0, "%s: %zu tensors differ", what, bad);
    free_all(&a);
    free_all(&b);
}

/*---- reading ----*/

static void reading(void)
{
    /* ModelOpt and compressed-tensors: the stored bytes, exactly */
    const char *dirs[2] = {MO, CT};
    for (int d = 0; d < 2; d++) {
        nvfp4_ckpt *c = NULL;
        CHECK(nvfp4_ckpt_open(&c, dirs[d], NVFP4_FORMAT_UNKNOWN) == NVFP4_OK);
        if (!c) continue;
        tensors all;
        load_all(&all, dirs[d]);
        CHECKF(nvfp4_ckpt_count(c) == 7, "%s: %zu NVFP4 tensors", dirs[d], nvfp4_ckpt_count(c));
        const nvfp4_format_traits *tr = nvfp4_format_traits_of(nvfp4_ckpt_format(c));
        for (size_t i = 0; i < nvfp4_ckpt_count(c); i++) {
            const char *w = nvfp4_ckpt_name(c, i);
            nvfp4_ckpt_tensor ct;
            CHECKF(nvfp4_ckpt_read(&ct, c, w) == NVFP4_OK, "%s", nvfp4_last_error());
            char name[300];
            snprintf(name, sizeof name, "%s%s", w, tr->codes_suffix);
            const named *codes = by_name(&all, name);
            snprintf(name, sizeof name, "%s%s", w, tr->scale_suffix);
            const named *scales = by_name(&all, name);
            snprintf(name, sizeof name, "%s%s", w, tr->tensor_scale_suffix);
            const named *ts = by_name(&all, name);
            CHECK(codes && scales && ts);
            if (codes && scales && ts && ct.t.codes) {
                CHECK(codes->nbytes == (size_t)(ct.t.rows * ct.t.cols / 2) &&
                      !memcmp(codes->bytes, ct.t.codes, codes->nbytes));
                CHECK(scales->nbytes == (size_t)(ct.t.rows * ct.t.cols / 16) &&
                      !memcmp(scales->bytes, ct.t.scales, scales->nbytes));
                CHECK(!memcmp(ts->bytes, &ct.tensor_scale, 4));
                CHECK(ct.has_input_scale && ct.t.nibble_order == NVFP4_LO_FIRST &&
                      ct.t.scale_layout == NVFP4_SCALES_ROW_MAJOR);
            }
            nvfp4_ckpt_tensor_free(&ct);
        }
        free_all(&all);
        nvfp4_ckpt_close(c);
    }
    /* GGUF, made from the ModelOpt export: the same codes, the scale bytes
     * with bit 7 cleared, weight_scale_2 in L.scale */
    nvfp4_ckpt *g = NULL, *m = NULL;
    CHECK(nvfp4_ckpt_open(&g, GG, NVFP4_FORMAT_UNKNOWN) == NVFP4_OK);
    CHECK(nvfp4_ckpt_open(&m, MO, NVFP4_FORMAT_UNKNOWN) == NVFP4_OK);
    for (size_t i = 0; g && m && i < nvfp4_ckpt_count(m); i++) {
        const char *w = nvfp4_ckpt_name(m, i);
        nvfp4_ckpt_tensor a, b;
        CHECK(nvfp4_ckpt_read(&a, m, w) == NVFP4_OK);
        CHECKF(nvfp4_ckpt_read(&b, g, w) == NVFP4_OK, "%s", nvfp4_last_error());
        if (a.t.codes && b.t.codes && a.t.rows == b.t.rows && a.t.cols == b.t.cols) {
            test_equal_bits(w, b.t.codes, a.t.codes, 1, a.t.rows, a.t.cols / 2);
            size_t ns = (size_t)(a.t.rows * a.t.cols / 16), bad = 0;
            for (size_t k = 0; k < ns; k++) bad += b.t.scales[k] != (a.t.scales[k] & 0x7F);
            CHECK(bad == 0);
            CHECK(b.has_tensor_scale && nvfp4_f32_bits(b.tensor_scale) == nvfp4_f32_bits(a.tensor_scale));
            CHECK(b.has_input_scale && nvfp4_f32_bits(b.input_scale) == nvfp4_f32_bits(a.input_scale));
        } else {
            CHECKF(0, "%s: shapes", w);
        }
        nvfp4_ckpt_tensor_free(&a);
        nvfp4_ckpt_tensor_free(&b);
    }
    nvfp4_ckpt_close(g);
    nvfp4_ckpt_close(m);
}

/*---- layers: the same numbers from every format ----*/

static void layers(void)
{
    const char *paths[3] = {MO, CT_CONV, GG};
    nvfp4_layer l[3];
    for (int i = 0; i < 3; i++) {
        CHECKF(nvfp4_load_layer(&l[i], paths[i], "model.layers.0.self_attn.q_proj") == NVFP4_OK,
               "%s: %s", paths[i], nvfp4_last_error());
    }
    for (int i = 1; i < 3; i++) {
        if (!l[0].weight.codes || !l[i].weight.codes) continue;
        CHECK(l[i].weight.nibble_order == NVFP4_HI_FIRST && l[i].weight.scale_layout == NVFP4_SCALES_TILED);
        test_equal_bits("layer codes", l[i].weight.codes, l[0].weight.codes, 1, 64, 32);
        test_equal_bits("layer scales", l[i].weight.scales, l[0].weight.scales, 1, 1,
                        (int64_t)nvfp4_scales_bytes(64, 64, NVFP4_SCALES_TILED));
        CHECK(l[i].has_input_scale && l[i].bias != NULL);
    }
    /* ModelOpt and GGUF store the same multiplier; compressed-tensors its
     * reciprocal, so the multiplier is FP32(1 / FP32(1 / s)) */
    CHECK(nvfp4_f32_bits(l[2].weight.per_tensor_scale) == nvfp4_f32_bits(l[0].weight.per_tensor_scale));
    CHECK(nvfp4_f32_bits(l[1].weight.per_tensor_scale) ==
          nvfp4_f32_bits(1.0f / (1.0f / l[0].weight.per_tensor_scale)));
    for (int i = 0; i < 3; i++) nvfp4_layer_free(&l[i]);
    nvfp4_layer none;
    CHECK(nvfp4_load_layer(&none, MO, "model.layers.0.nope") == NVFP4_ERR_NOT_FOUND);
    CHECK(strstr(nvfp4_last_error(), "model.layers.0.nope.weight") != NULL);
}

/*---- conversions ----*/

static nvfp4_status convert(const char *in, const char *out, nvfp4_format to, int allow)
{
    nvfp4_convert_options o;
    memset(&o, 0, sizeof o);
    o.to = to;
    o.allow_rescale = allow;
    return nvfp4_convert(in, out, &o);
}

static void against_the_tools(void)
{
    /* compressed-tensors' converter rounds 1/x: so must we, when allowed */
    CHECK(convert(MO, tmp("mo2ct"), NVFP4_FORMAT_COMPRESSED_TENSORS, 0) == NVFP4_ERR_UNSUPPORTED);
    CHECK(strstr(nvfp4_last_error(), "allow_rescale") != NULL);
    CHECK(!exists(tmp("mo2ct")));
    CHECK(convert(MO, tmp("mo2ct"), NVFP4_FORMAT_COMPRESSED_TENSORS, 1) == NVFP4_OK);
    same_tensors("modelopt -> compressed-tensors vs its converter", tmp("mo2ct"), CT_CONV);
    CHECK(exists(tmp("mo2ct/model.safetensors.index.json")) && exists(tmp("mo2ct/config.json")));
    /* llama.cpp's repack, gguf-py's file */
    CHECK(convert(MO, tmp("mo.gguf"), NVFP4_FORMAT_GGUF, 0) == NVFP4_OK);
    same_tensors("modelopt -> gguf vs llama.cpp's repack", tmp("mo.gguf"), GG);
}

static void round_trips(void)
{
    struct {
        const char *src;
        nvfp4_format via;
        const char *mid;
        nvfp4_format back;
    } trips[] = {
        {MO, NVFP4_FORMAT_COMPRESSED_TENSORS, "rt1", NVFP4_FORMAT_MODELOPT},
        {MO, NVFP4_FORMAT_GGUF, "rt2.gguf", NVFP4_FORMAT_MODELOPT},
        {MO, NVFP4_FORMAT_COMFYUI, "rt3.safetensors", NVFP4_FORMAT_MODELOPT},
        {CT, NVFP4_FORMAT_MODELOPT, "rt4", NVFP4_FORMAT_COMPRESSED_TENSORS},
        {CT, NVFP4_FORMAT_GGUF, "rt5.gguf", NVFP4_FORMAT_COMPRESSED_TENSORS},
        {CT, NVFP4_FORMAT_COMFYUI, "rt6", NVFP4_FORMAT_COMPRESSED_TENSORS},
        {GG, NVFP4_FORMAT_COMPRESSED_TENSORS, "rt7", NVFP4_FORMAT_GGUF},
        {GG, NVFP4_FORMAT_COMFYUI, "rt8.safetensors", NVFP4_FORMAT_GGUF},
    };
    for (size_t i = 0; i < sizeof trips / sizeof trips[0]; i++) {
        char back[64];
        snprintf(back, sizeof back, "%s.back%s", trips[i].mid,
                 trips[i].back == NVFP4_FORMAT_GGUF ? ".gguf" : "");
        nvfp4_status s = convert(trips[i].src, tmp(trips[i].mid), trips[i].via, 1);
        CHECKF(s == NVFP4_OK, "%s -> %s: %s", trips[i].src, trips[i].mid, nvfp4_last_error());
        s = convert(tmp(trips[i].mid), tmp(back), trips[i].back, 0); /* restored: nothing to allow */
        CHECKF(s == NVFP4_OK, "%s -> %s: %s", trips[i].mid, back, nvfp4_last_error());
        char what[128];
        snprintf(what, sizeof what, "round trip %s via %s", trips[i].src, trips[i].mid);
        if (s == NVFP4_OK) same_tensors(what, tmp(back), trips[i].src);
    }
}

static void refusals(void)
{
    /* FP8 layers have no GGUF type; ModelOpt's 96-column ... */
    CHECK(convert(MO_MIXED, tmp("mixed.gguf"), NVFP4_FORMAT_GGUF, 1) == NVFP4_ERR_UNSUPPORTED);
    CHECK(strstr(nvfp4_last_error(), "F8_E4M3") != NULL && !exists(tmp("mixed.gguf")));
    CHECK(convert(MO, tmp("x.gguf"), NVFP4_FORMAT_MODELOPT, 0) == NVFP4_ERR_INVALID_ARGUMENT);
    CHECK(convert(MO, tmp("x"), NVFP4_FORMAT_GGUF, 0) == NVFP4_ERR_INVALID_ARGUMENT);
    /* GGUF rows are whole 64-element blocks */
    uint16_t x[2 * 48];
    for (int i = 0; i < 96; i++) x[i] = nvfp4_bf16_from_f32((float)(i % 7) - 3.0f);
    nvfp4_ckpt_tensor q;
    CHECK(nvfp4_quantize_format(&q, x, NVFP4_DTYPE_BF16, 2, 48, NVFP4_FORMAT_MODELOPT, NULL, 1) == NVFP4_OK);
    nvfp4_st_writer *w = NULL;
    nvfp4_st_writer_new(&w);
    CHECK(nvfp4_st_add_format(w, "l.weight", &q) == NVFP4_OK);
    CHECK(nvfp4_st_writer_write(w, tmp("k48.safetensors"), NULL, NULL) == NVFP4_OK);
    nvfp4_st_writer_free(w);
    CHECK(convert(tmp("k48.safetensors"), tmp("k48.gguf"), NVFP4_FORMAT_GGUF, 1) == NVFP4_ERR_UNSUPPORTED);
    CHECK(strstr(nvfp4_last_error(), "64") != NULL && !exists(tmp("k48.gguf")));
    /* E4M3 NaN and negative scales have no UE4M3 byte; allowed, the sign
     * moves into the codes and the values stay */
    q.t.scales[0] = 0xFF;            /* NaN */
    q.t.scales[1] |= 0x80;           /* negative */
    nvfp4_ckpt_tensor q64;
    uint16_t y[2 * 64];
    for (int i = 0; i < 128; i++) y[i] = nvfp4_bf16_from_f32((float)(i % 11) - 5.0f);
    CHECK(nvfp4_quantize_format(&q64, y, NVFP4_DTYPE_BF16, 2, 64, NVFP4_FORMAT_MODELOPT, NULL, 1) == NVFP4_OK);
    q64.t.scales[0] = 0xFF;
    q64.t.scales[1] |= 0x80;
    nvfp4_st_writer_new(&w);
    CHECK(nvfp4_st_add_format(w, "l.weight", &q64) == NVFP4_OK);
    CHECK(nvfp4_st_writer_write(w, tmp("neg.safetensors"), NULL, NULL) == NVFP4_OK);
    nvfp4_st_writer_free(w);
    CHECK(convert(tmp("neg.safetensors"), tmp("neg.gguf"), NVFP4_FORMAT_GGUF, 0) == NVFP4_ERR_UNSUPPORTED);
    CHECK(strstr(nvfp4_last_error(), "1 NaN and 1 negative") != NULL);
    CHECK(convert(tmp("neg.safetensors"), tmp("neg.gguf"), NVFP4_FORMAT_GGUF, 1) == NVFP4_OK);
    nvfp4_tensor a, b;
    CHECK(nvfp4_load_tensor(&a, tmp("neg.safetensors"), "l.weight") == NVFP4_OK);
    CHECK(nvfp4_load_tensor(&b, tmp("neg.gguf"), "l.weight") == NVFP4_OK);
    if (a.codes && b.codes) {
        float va[128], vb[128];
        nvfp4_dequantize(va, &a, 1);
        nvfp4_dequantize(vb, &b, 1);
        int same = 1;
        for (int i = 16; i < 128; i++) same &= va[i] == vb[i]; /* block 0 was NaN, now zero */
        for (int i = 0; i < 16; i++) same &= vb[i] == 0.0f;
        CHECK(same);
    }
    nvfp4_tensor_free(&a);
    nvfp4_tensor_free(&b);
    nvfp4_ckpt_tensor_free(&q);
    nvfp4_ckpt_tensor_free(&q64);
    /* GGUF's 0xFF (480) has no E4M3 byte */
    CHECK(convert(GG_BYTES, tmp("bytes"), NVFP4_FORMAT_MODELOPT, 0) == NVFP4_ERR_UNSUPPORTED);
    CHECK(strstr(nvfp4_last_error(), "0xFF") != NULL && !exists(tmp("bytes")));
}

/*---- GGUF's UE4M3 bytes, as gguf-py decodes them ----*/

static void gguf_scale_bytes(void)
{
    nvfp4_st_file *f = NULL;
    CHECK(nvfp4_st_open(&f, "tests/golden/gguf/scale-bytes.expect.safetensors") == NVFP4_OK);
    const nvfp4_st_tensor *deq = f ? nvfp4_st_find(f, "dequantized") : NULL;
    const nvfp4_st_tensor *codes = f ? nvfp4_st_find(f, "codes") : NULL;
    nvfp4_ckpt *c = NULL;
    CHECK(nvfp4_ckpt_open(&c, GG_BYTES, NVFP4_FORMAT_UNKNOWN) == NVFP4_OK);
    nvfp4_ckpt_tensor ct;
    CHECK(c && nvfp4_ckpt_read(&ct, c, "t.weight") == NVFP4_OK);
    if (deq && codes && ct.t.codes && deq->nbytes == 32 * 128 * 4) {
        CHECK(!memcmp(ct.t.codes, codes->data, codes->nbytes)); /* the repack undone */
        const float *want = deq->data;
        size_t bad = 0, checked = 0;
        for (int64_t r = 0; r < 32; r++)
            for (int64_t k = 0; k < 128; k++) {
                uint8_t u = ct.t.scales[r * 8 + k / 16];
                int e4 = nvfp4_fmt_ue4m3_as_e4m3(u);
                uint8_t code = nvfp4_tensor_code(&ct.t, r, k);
                float got = e4 < 0 ? 480.0f * nvfp4_e2m1_to_f32(code) /* ggml's 0xFF */
                                   : nvfp4_e2m1_to_f32(code) * nvfp4_e4m3_to_f32((uint8_t)e4);
                if (memcmp(&got, &want[r * 128 + k], 4) && !(got == 0 && want[r * 128 + k] == 0)) {
                    if (!bad++)
                        fprintf(stderr, "scale byte 0x%02x code %u: %g, gguf-py %g\n", u, code,
                                (double)got, (double)want[r * 128 + k]);
                }
                checked++;
            }
        CHECKF(bad == 0 && checked == 4096, "%zu of %zu values differ from gguf-py's", bad, checked);
    }
    nvfp4_tensor v;
    CHECK(nvfp4_ckpt_tensor_values(&v, &ct) == NVFP4_ERR_UNSUPPORTED); /* the 0xFF byte */
    nvfp4_ckpt_tensor_free(&ct);
    nvfp4_ckpt_close(c);
    nvfp4_st_close(f);
}

/*---- the GGUF reader against damaged files ----*/

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*n);
    if (b && fread(b, 1, *n, f) != *n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

static void gguf_damage(void)
{
    size_t n = 0;
    uint8_t *b = slurp(GG_BYTES, &n);
    CHECK(b != NULL && n > 100);
    if (!b) return;
    nvfp4_gguf *g = NULL;
    CHECK(nvfp4_gguf_open_memory(&g, b, n, "whole") == NVFP4_OK);
    nvfp4_gguf_close(g);
    /* every prefix short of the last tensor's bytes is rejected, by name */
    size_t accepted = 0, messages = 0;
    for (size_t len = 0; len < n - 1; len++) {
        nvfp4_status s = nvfp4_gguf_open_memory(&g, b, len, "cut");
        accepted += s == NVFP4_OK;
        messages += s == NVFP4_ERR_MALFORMED && !strncmp(nvfp4_last_error(), "cut: ", 5);
        nvfp4_gguf_close(g);
        g = NULL;
    }
    CHECKF(accepted == 0 && messages == n - 1, "%zu prefixes accepted, %zu messages of %zu", accepted,
           messages, n - 1);
    /* every byte of the header replaced: accepted or rejected, never a crash */
    size_t head = 512 < n ? 512 : n;
    uint8_t *copy = malloc(n);
    for (size_t i = 0; i < head; i++) {
        for (int v = 0; v < 3; v++) {
            memcpy(copy, b, n);
            copy[i] = (uint8_t)(v == 0 ? 0xFF : v == 1 ? 0x00 : copy[i] ^ 0x80);
            if (nvfp4_gguf_open_memory(&g, copy, n, "hit") == NVFP4_OK) {
                for (size_t t = 0; t < nvfp4_gguf_count(g); t++) {
                    const gguf_tensor *gt = nvfp4_gguf_get(g, t);
                    CHECK(gt->data >= copy && gt->data + gt->nbytes <= copy + n);
                }
            }
            nvfp4_gguf_close(g);
            g = NULL;
        }
    }
    free(copy);
    free(b);
    /* a file that is not GGUF */
    CHECK(nvfp4_gguf_open_memory(&g, "GGUE....", 8, "bad") == NVFP4_ERR_MALFORMED);
    CHECK(strstr(nvfp4_last_error(), "not a GGUF file") != NULL);
}

static void write_read_round_trip(void)
{
    uint16_t x[17 * 64];
    uint64_t rng = 99;
    for (int i = 0; i < 17 * 64; i++) x[i] = nvfp4_bf16_from_f32((float)test_normal(&rng));
    for (int f = NVFP4_FORMAT_COMFYUI; f <= NVFP4_FORMAT_COMPRESSED_TENSORS; f++) {
        nvfp4_ckpt_tensor q, r;
        CHECK(nvfp4_quantize_format(&q, x, NVFP4_DTYPE_BF16, 17, 64, (nvfp4_format)f, NULL, 2) == NVFP4_OK);
        q.input_scale = 0.25f;
        q.has_input_scale = 1;
        nvfp4_st_writer *w = NULL;
        nvfp4_st_writer_new(&w);
        CHECK(nvfp4_st_add_format(w, "blk.weight", &q) == NVFP4_OK);
        CHECK(nvfp4_st_writer_write(w, tmp("wr.safetensors"), NULL, NULL) == NVFP4_OK);
        nvfp4_st_writer_free(w);
        nvfp4_ckpt *c = NULL;
        CHECK(nvfp4_ckpt_open(&c, tmp("wr.safetensors"), NVFP4_FORMAT_UNKNOWN) == NVFP4_OK);
        CHECKF(c && nvfp4_ckpt_format(c) == (nvfp4_format)f, "format %d: %s", f, c ? nvfp4_ckpt_evidence(c) : "");
        CHECK(c && nvfp4_ckpt_read(&r, c, "blk.weight") == NVFP4_OK);
        if (c && r.t.codes) {
            size_t ns = nvfp4_scales_bytes(q.t.rows, q.t.cols, q.t.scale_layout);
            CHECK(!memcmp(r.t.codes, q.t.codes, (size_t)(q.t.rows * q.t.cols / 2)));
            CHECK(!memcmp(r.t.scales, q.t.scales, ns));
            CHECK(r.tensor_scale == q.tensor_scale && r.has_input_scale && r.input_scale == 0.25f);
        }
        nvfp4_ckpt_tensor_free(&r);
        nvfp4_ckpt_tensor_free(&q);
        nvfp4_ckpt_close(c);
    }
}

/* ComfyUI: its own marker survives a ComfyUI -> ComfyUI conversion, tile
 * padding is noted when it is dropped, a round trip through ModelOpt gives
 * back every byte. */
typedef struct notes {
    int count;
    char first[512];
} notes;

static void on_note(void *ctx, const char *line)
{
    notes *n = ctx;
    if (!n->count++) snprintf(n->first, sizeof n->first, "%s", line);
}

static void comfyui(void)
{
    uint16_t x[130 * 48];
    uint64_t rng = 7;
    for (int i = 0; i < 130 * 48; i++) x[i] = nvfp4_bf16_from_f32((float)test_normal(&rng));
    nvfp4_ckpt_tensor q;
    CHECK(nvfp4_quantize_format(&q, x, NVFP4_DTYPE_BF16, 130, 48, NVFP4_FORMAT_COMFYUI, NULL, 1) == NVFP4_OK);
    static const char marker[] = "{\"format\": \"nvfp4\", \"note\": \"kept\"}";
    int64_t mlen = (int64_t)sizeof marker - 1;
    nvfp4_st_writer *w = NULL;
    nvfp4_st_writer_new(&w);
    CHECK(nvfp4_st_add_nvfp4(w, "blk.weight", &q.t) == NVFP4_OK);
    CHECK(nvfp4_st_writer_add(w, "blk.comfy_quant", NVFP4_DTYPE_U8, 1, &mlen, marker, (size_t)mlen) == NVFP4_OK);
    CHECK(nvfp4_st_writer_write(w, tmp("c.safetensors"), NULL, NULL) == NVFP4_OK);
    nvfp4_st_writer_free(w);
    CHECK(convert(tmp("c.safetensors"), tmp("c2.safetensors"), NVFP4_FORMAT_COMFYUI, 0) == NVFP4_OK);
    same_tensors("comfyui -> comfyui keeps the marker", tmp("c2.safetensors"), tmp("c.safetensors"));
    CHECK(convert(tmp("c.safetensors"), tmp("c.mo"), NVFP4_FORMAT_MODELOPT, 0) == NVFP4_OK);
    CHECK(convert(tmp("c.mo"), tmp("c3.safetensors"), NVFP4_FORMAT_COMFYUI, 0) == NVFP4_OK);
    tensors a, b;
    load_all(&a, tmp("c3.safetensors"));
    load_all(&b, tmp("c.safetensors"));
    const char *pieces[3] = {"blk.weight", "blk.weight_scale", "blk.weight_scale_2"};
    for (int k = 0; k < 3; k++) {
        const named *x1 = by_name(&a, pieces[k]), *x2 = by_name(&b, pieces[k]);
        CHECKF(x1 && x2 && x1->nbytes == x2->nbytes && !memcmp(x1->bytes, x2->bytes, x1->nbytes),
               "comfyui -> modelopt -> comfyui: %s", pieces[k]);
    }
    CHECK(by_name(&a, "blk.comfy_quant") != NULL); /* a ComfyUI layer again */
    free_all(&a);
    free_all(&b);
    /* nonzero tile padding (comfy-kitchen's CUDA kernel can write some) is
     * no block's: not carried, and said so */
    size_t ns = nvfp4_scales_bytes(130, 48, NVFP4_SCALES_TILED);
    q.t.scales[ns - 1] = 0x38;
    nvfp4_st_writer_new(&w);
    CHECK(nvfp4_st_add_nvfp4_layer(w, "blk", &q.t) == NVFP4_OK);
    CHECK(nvfp4_st_writer_write(w, tmp("pad.safetensors"), NULL, NULL) == NVFP4_OK);
    nvfp4_st_writer_free(w);
    notes n = {0, ""};
    nvfp4_convert_options o;
    memset(&o, 0, sizeof o);
    o.to = NVFP4_FORMAT_MODELOPT;
    o.note = on_note;
    o.ctx = &n;
    CHECK(nvfp4_convert(tmp("pad.safetensors"), tmp("pad.mo"), &o) == NVFP4_OK);
    CHECKF(n.count == 1 && strstr(n.first, "1 nonzero byte in the scale tiles' padding"), "%d: %s",
           n.count, n.first);
    nvfp4_ckpt_tensor_free(&q);
}

/* A ComfyUI layer of 37 rows (stored padded to 48) whose file records its
 * rows, or `record` in their place (NULL: none). */
static void write_rows_layer(const char *path, const nvfp4_tensor *t, const char *record)
{
    nvfp4_st_writer *w = NULL;
    nvfp4_st_writer_new(&w);
    float bias[37];
    for (int i = 0; i < 37; i++) bias[i] = (float)i;
    int64_t nb = 37;
    CHECK(nvfp4_st_add_nvfp4_layer(w, "blk", t) == NVFP4_OK);
    CHECK(nvfp4_st_writer_add(w, "blk.bias", NVFP4_DTYPE_F32, 1, &nb, bias, sizeof bias) == NVFP4_OK);
    if (record) CHECK(nvfp4_st_writer_set_metadata(w, NVFP4_ST_ROWS_KEY_PREFIX "blk.weight", record) == NVFP4_OK);
    CHECK(nvfp4_st_writer_write(w, path, NULL, NULL) == NVFP4_OK);
    nvfp4_st_writer_free(w);
}

/* The logical rows a rows record names, through every format's loaders. */
static void logical_rows(void)
{
    uint16_t x[37 * 48];
    uint64_t rng = 11;
    for (int i = 0; i < 37 * 48; i++) x[i] = nvfp4_bf16_from_f32((float)test_normal(&rng));
    nvfp4_tensor q; /* 48 stored rows */
    CHECK(nvfp4_quantize(&q, x, NVFP4_DTYPE_BF16, 37, 48, NULL, NVFP4_VARIANT_EAGER, 1) == NVFP4_OK);
    CHECK(q.rows == 48);
    write_rows_layer(tmp("rows.safetensors"), &q, "37");
    CHECK(convert(tmp("rows.safetensors"), tmp("rows-mo.safetensors"), NVFP4_FORMAT_MODELOPT, 0) == NVFP4_OK);
    const char *paths[2] = {tmp("rows.safetensors"), tmp("rows-mo.safetensors")};
    for (int f = 0; f < 2; f++) {
        nvfp4_ckpt *c = NULL;
        CHECKF(nvfp4_ckpt_open(&c, paths[f], NVFP4_FORMAT_UNKNOWN) == NVFP4_OK, "%s", nvfp4_last_error());
        int64_t rows = 0, stored = 0, cols = 0;
        CHECK(nvfp4_ckpt_dims(c, "blk.weight", &stored, &cols) == NVFP4_OK && stored == 48);
        CHECKF(nvfp4_ckpt_rows(c, "blk.weight", &rows) == NVFP4_OK && rows == 37, "%s: %lld rows",
               paths[f], (long long)rows);
        CHECK(nvfp4_ckpt_rows(c, "nope.weight", &rows) == NVFP4_ERR_NOT_FOUND);
        nvfp4_layer l;
        CHECKF(nvfp4_ckpt_load_layer(&l, c, "blk") == NVFP4_OK, "%s: %s", paths[f], nvfp4_last_error());
        CHECK(l.weight.rows == 37 && l.weight.cols == 48 && l.bias && l.bias[36] == 36.0f);
        for (int64_t r = 0; r < 37 && l.weight.codes; r++)
            for (int64_t cc = 0; cc < 48; cc++)
                if (nvfp4_tensor_code(&l.weight, r, cc) != nvfp4_tensor_code(&q, r, cc) ||
                    nvfp4_tensor_scale(&l.weight, r, cc / 16) != nvfp4_tensor_scale(&q, r, cc / 16)) {
                    CHECKF(0, "%s: (row %lld, col %lld) differs", paths[f], (long long)r, (long long)cc);
                    r = 37;
                    break;
                }
        nvfp4_layer_free(&l);
        nvfp4_ckpt_close(c);
        nvfp4_tensor t;
        CHECK(nvfp4_load_tensor(&t, paths[f], "blk.weight") == NVFP4_OK && t.rows == 37);
        nvfp4_tensor_free(&t);
    }
    /* records padding to 16 cannot have made 48 stored rows of: refused;
     * 33 rows pad to 48 as well */
    static const struct { const char *v; int64_t rows; } R[] = {
        {"33", 33}, {"48", 48}, {"32", -1}, {"49", -1}, {"0", -1}, {"-37", -1}, {"+37", -1},
        {" 37", -1}, {"37 ", -1}, {"0x25", -1}, {"", -1}, {"99999999999999999999", -1},
    };
    for (size_t i = 0; i < sizeof R / sizeof R[0]; i++) {
        write_rows_layer(tmp("rec.safetensors"), &q, R[i].v);
        CHECK(convert(tmp("rec.safetensors"), tmp("rec-mo.safetensors"), NVFP4_FORMAT_MODELOPT, 0) == NVFP4_OK);
        const char *both[2] = {tmp("rec.safetensors"), tmp("rec-mo.safetensors")};
        for (int f = 0; f < 2; f++) {
            nvfp4_ckpt *c = NULL;
            int64_t rows = 0;
            CHECK(nvfp4_ckpt_open(&c, both[f], NVFP4_FORMAT_UNKNOWN) == NVFP4_OK);
            nvfp4_status st = nvfp4_ckpt_rows(c, "blk.weight", &rows);
            CHECKF(R[i].rows < 0 ? st == NVFP4_ERR_MALFORMED && strstr(nvfp4_last_error(), "nvfp4.rows.blk.weight")
                                 : st == NVFP4_OK && rows == R[i].rows,
                   "%s: record '%s': %s", both[f], R[i].v, nvfp4_last_error());
            nvfp4_ckpt_close(c);
            nvfp4_tensor t;
            st = nvfp4_load_tensor(&t, both[f], "blk.weight");
            CHECKF(R[i].rows < 0 ? st == NVFP4_ERR_MALFORMED && !t.codes
                                 : st == NVFP4_OK && t.rows == R[i].rows,
                   "%s: the weight with record '%s'", both[f], R[i].v);
            nvfp4_tensor_free(&t);
        }
    }
    /* no record: the stored rows */
    write_rows_layer(tmp("none.safetensors"), &q, NULL);
    nvfp4_ckpt *c = NULL;
    int64_t rows = 0;
    CHECK(nvfp4_ckpt_open(&c, tmp("none.safetensors"), NVFP4_FORMAT_UNKNOWN) == NVFP4_OK);
    CHECK(nvfp4_ckpt_rows(c, "blk.weight", &rows) == NVFP4_OK && rows == 48);
    nvfp4_ckpt_close(c);
    nvfp4_tensor_free(&q);
}

static void cleanup(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) cleanup(p);
        else unlink(p);
    }
    if (d) closedir(d);
    rmdir(dir);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "%s/nvfp4-ckpt-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    TEST("detection") detection();
    TEST("reading") reading();
    TEST("layers") layers();
    TEST("against the tools") against_the_tools();
    TEST("round trips") round_trips();
    TEST("refusals") refusals();
    TEST("gguf scale bytes") gguf_scale_bytes();
    TEST("gguf damage") gguf_damage();
    TEST("write, read") write_read_round_trip();
    TEST("comfyui") comfyui();
    TEST("logical rows") logical_rows();
    cleanup(tmpdir);
    return test_summary("ckpt_formats");
}
