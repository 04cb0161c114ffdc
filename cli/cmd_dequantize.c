/* cmd_dequantize.c -- `nvfp4 dequantize`: ComfyUI NVFP4 layers -> BF16 / F32. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char help[] =
    "usage: nvfp4 dequantize IN.safetensors OUT.safetensors [options]\n"
    "\n"
    "Every NVFP4 tensor T (T + T_scale + T_scale_2) becomes T in BF16 or F32:\n"
    "e2m1 * e4m3 (exact), times the per-tensor scale (one FP32 rounding), then\n"
    "rounded to BF16 (round to nearest even) unless --f32.  T has the rows the\n"
    "file records for it (\"nvfp4.rows.T\", written by nvfp4 quantize), else its\n"
    "stored rows; columns stay padded to 16.  ComfyUI's LAYER.comfy_quant markers\n"
    "of those layers are dropped (a tensor of that name that is not the NVFP4\n"
    "marker is user data, and is kept); other tensors and the metadata are copied.\n"
    "\n"
    "options:\n"
    "  --only NAME   dequantize NAME only (repeatable); other NVFP4 tensors are copied\n"
    "  --f32         write F32 instead of BF16\n"
    "  --threads N   worker threads (default: all cores)\n"
    "  --force       write OUT even when it is IN\n";

#define MAX_ONLY 4096

int cmd_dequantize(int argc, char **argv)
{
    const char *C = "dequantize";
    const char *in = NULL, *outp = NULL, *only[MAX_ONLY];
    int n_only = 0, f32 = 0, force = 0;
    long long threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int shared = cli_shared_option(C, argc, argv, &i, &threads, NULL, NULL);
        if (shared < 0) return 1;
        if (shared) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return 0;
        } else if (!strcmp(a, "--only")) {
            if (++i >= argc) return cli_error(C, "--only needs a tensor name");
            if (n_only == MAX_ONLY) return cli_error(C, "too many --only names");
            only[n_only++] = argv[i];
        } else if (!strcmp(a, "--f32")) {
            f32 = 1;
        } else if (!strcmp(a, "--force")) {
            force = 1;
        } else if (a[0] == '-' && a[1]) {
            return cli_error(C, "unknown option '%s' (try --help)", a);
        } else if (!in) {
            in = a;
        } else if (!outp) {
            outp = a;
        } else {
            return cli_error(C, "unexpected argument '%s' (try --help)", a);
        }
    }
    if (!in || !outp) return cli_error(C, "needs IN.safetensors and OUT.safetensors (try --help)");
    if (cli_check_paths(C, &in, 1, &outp, 1, force)) return 1;
    nvfp4_st_file *f = NULL;
    nvfp4_status st = nvfp4_st_open(&f, in);
    if (st != NVFP4_OK) return cli_lib_error(C, st, "cannot read input");

    int rc = 1;
    size_t count = nvfp4_st_count(f);
    /* role: 0 copy, 1 NVFP4 codes to dequantize, 2 its scale/scale_2/marker (dropped) */
    char *role = calloc(count ? count : 1, 1);
    void **bufs = calloc(count ? count : 1, sizeof *bufs);
    nvfp4_st_writer *w = NULL;
    nvfp4_atomic_file *out = NULL;
    if (!role || !bufs) {
        cli_error(C, "out of memory");
        goto done;
    }
    for (int j = 0; j < n_only; j++) {
        char nm[4096];
        snprintf(nm, sizeof nm, "%s_scale_2", only[j]);
        if (!nvfp4_st_find(f, only[j]) || !nvfp4_st_find(f, nm)) {
            cli_error(C, "%s has no NVFP4 tensor '%s' (needs %s, %s_scale, %s_scale_2)", in,
                      only[j], only[j], only[j], only[j]);
            goto done;
        }
    }
    size_t n_deq = 0;
    for (size_t i = 0; i < count; i++) {
        const nvfp4_st_tensor *t = nvfp4_st_get(f, i);
        char nm[4096];
        if (!nvfp4_st_is_nvfp4(f, t->name)) continue;
        int sel = !n_only;
        for (int j = 0; j < n_only; j++) sel |= !strcmp(only[j], t->name);
        if (!sel) continue;
        role[i] = 1;
        n_deq++;
        for (size_t k = 0; k < count; k++) {
            const char *o = nvfp4_st_get(f, k)->name;
            size_t L = strlen(t->name);
            if (!strncmp(o, t->name, L) && (!strcmp(o + L, "_scale") || !strcmp(o + L, "_scale_2")))
                role[k] = 2;
        }
        if (nvfp4_st_marker_name(nm, sizeof nm, t->name) && nvfp4_st_find(f, nm)) {
            char shown[256];
            if (nvfp4_st_is_nvfp4_marker(f, nm)) {
                for (size_t k = 0; k < count; k++)
                    if (!strcmp(nvfp4_st_get(f, k)->name, nm)) role[k] = 2;
            } else {
                fprintf(stderr, "nvfp4 dequantize: keeping '%s': it is not ComfyUI's NVFP4 "
                                "marker, so it is a tensor of the file's own\n",
                        cli_printable(shown, sizeof shown, nm));
            }
        }
    }
    if (!n_deq) {
        cli_error(C, "%s has no NVFP4 tensors (T + T_scale + T_scale_2)", in);
        goto done;
    }
    if (cli_open_output(C, outp, &out)) goto done;
    if ((st = nvfp4_st_writer_new(&w)) != NVFP4_OK) {
        cli_lib_error(C, st, "writer");
        goto done;
    }
    for (size_t i = 0; i < nvfp4_st_metadata_count(f); i++) {
        const char *k, *v;
        nvfp4_st_metadata(f, i, &k, &v);
        /* the rows recorded for a tensor written here in full are its shape now */
        size_t plen = sizeof NVFP4_ST_ROWS_KEY_PREFIX - 1, j = count;
        if (!strncmp(k, NVFP4_ST_ROWS_KEY_PREFIX, plen))
            for (j = 0; j < count && strcmp(nvfp4_st_get(f, j)->name, k + plen); j++) continue;
        if (j < count && role[j] == 1) continue;
        if ((st = nvfp4_st_writer_set_metadata(w, k, v)) != NVFP4_OK) {
            cli_lib_error(C, st, "metadata");
            goto done;
        }
    }
    size_t done_n = 0;
    for (size_t i = 0; i < count; i++) {
        const nvfp4_st_tensor *t = nvfp4_st_get(f, i);
        if (role[i] == 2) continue;
        if (role[i] == 0) {
            st = nvfp4_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes);
        } else {
            cli_progress("dequantize: %s (%zu/%zu)", t->name, ++done_n, n_deq);
            nvfp4_tensor q = {0};
            st = nvfp4_st_load_nvfp4(&q, f, t->name);
            if (st != NVFP4_OK) {
                char what[600];
                snprintf(what, sizeof what, "reading '%s'", t->name);
                cli_lib_error(C, st, what);
                goto done;
            }
            size_t n = (size_t)q.rows * (size_t)q.cols;
            float *v = malloc(n * sizeof *v);
            if (!v) {
                nvfp4_tensor_free(&q);
                cli_error(C, "out of memory for '%s'", t->name);
                goto done;
            }
            st = nvfp4_dequantize(v, &q, (int)threads);
            int64_t shape[2] = {q.rows, q.cols};
            nvfp4_tensor_free(&q);
            if (st == NVFP4_OK && !f32) {
                uint16_t *b = (uint16_t *)v; /* in place: each 2-byte write trails its read */
                for (size_t k = 0; k < n; k++) b[k] = nvfp4_bf16_from_f32(v[k]);
            }
            bufs[i] = v;
            if (st == NVFP4_OK)
                st = nvfp4_st_writer_add(w, t->name, f32 ? NVFP4_DTYPE_F32 : NVFP4_DTYPE_BF16,
                                         2, shape, v, n * (f32 ? 4 : 2));
        }
        if (st != NVFP4_OK) {
            cli_lib_error(C, st, "preparing output");
            goto done;
        }
    }
    rc = cli_commit_safetensors(C, w, out, outp);
    out = NULL; /* committed or discarded */
    if (rc) goto done;
    fprintf(stderr, "nvfp4 dequantize: %zu tensor%s -> %s (%s)\n", n_deq, n_deq == 1 ? "" : "s",
            outp, f32 ? "F32" : "BF16");
done:
    cli_progress_done();
    nvfp4_atomic_discard(out);
    nvfp4_st_writer_free(w);
    if (bufs)
        for (size_t i = 0; i < count; i++) free(bufs[i]);
    free(bufs);
    free(role);
    nvfp4_st_close(f);
    return rc;
}
