/* cmd_convert.c -- `nvfp4 convert`: an NVFP4 checkpoint from one format to
 * another, exactly or not at all. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static const char help[] =
    "usage: nvfp4 convert IN OUT --to comfyui|modelopt|compressed-tensors|gguf [options]\n"
    "\n"
    "Convert an NVFP4 checkpoint between the formats that store the same numbers\n"
    "differently (docs/FORMATS.md has the table): ComfyUI, NVIDIA ModelOpt\n"
    "(hf_quant_config.json), compressed-tensors (llm-compressor's nvfp4-pack-quantized)\n"
    "and llama.cpp's GGUF (type NVFP4).  IN is a .safetensors file, a checkpoint\n"
    "directory (sharded through model.safetensors.index.json or not) or a .gguf file;\n"
    "its format is detected (`nvfp4 inspect IN` shows how) unless --from names it.\n"
    "\n"
    "OUT: a *.gguf path is one GGUF file, a *.safetensors path one safetensors file,\n"
    "anything else a directory: one shard per input shard, the index, config.json's\n"
    "quantization_config (and hf_quant_config.json for modelopt) rewritten for the\n"
    "target, the checkpoint's other files copied.\n"
    "\n"
    "Codes and block-scale bytes are moved, never requantized; per-tensor and input\n"
    "scales keep their bits.  What the target cannot hold exactly stops the\n"
    "conversion before anything is written, with the reason: a scale whose direction\n"
    "flips (ModelOpt's weight_scale_2 multiplies, compressed-tensors'\n"
    "weight_global_scale divides) and whose reciprocal is no FP32 number; GGUF's 0xFF\n"
    "scale byte (480); E4M3 NaN or negative scales for GGUF; rows GGUF's 64-element\n"
    "blocks cannot hold.  --allow-rescale rounds those instead (the reciprocal to the\n"
    "nearest FP32, as compressed-tensors' own converter does) and says what changed;\n"
    "a rounded scale's original bits are kept in the output's metadata, so converting\n"
    "back restores them.\n"
    "\n"
    "Tensors are streamed one at a time (progress on stderr); each file is written to\n"
    "a temporary file and renamed.\n"
    "\n"
    "options:\n"
    "  --to FORMAT        the target format (required)\n"
    "  --from FORMAT      take IN as this format instead of detecting it\n"
    "  --allow-rescale    round what the target cannot hold exactly, and say so\n"
    "  --force            write OUT even when it is IN or one of IN's files\n"
    "  -q, --quiet        no notes, no progress\n";

typedef struct progress_ctx {
    int quiet;
} progress_ctx;

static void on_progress(void *ctx, const char *line)
{
    if (!((progress_ctx *)ctx)->quiet) cli_progress("convert: %s", line);
}

static void on_note(void *ctx, const char *line)
{
    if (((progress_ctx *)ctx)->quiet) return;
    cli_progress_done();
    char shown[1200];
    fprintf(stderr, "nvfp4 convert: note: %s\n", cli_printable(shown, sizeof shown, line));
}

/* A checkpoint directory's files other than its shards (read as input,
 * written for the target). */
static const char *const dir_files[] = {"model.safetensors", "model.safetensors.index.json",
                                        "config.json", "hf_quant_config.json"};
#define N_DIR_FILES (sizeof dir_files / sizeof dir_files[0])
#define MAX_PATHS 256 /* shards beyond these are listed by the index anyway */

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* dir/name into paths[*n] (malloc'ed), unless the list is full. */
static void add_path(char **paths, int *n, const char *dir, const char *name)
{
    if (*n >= MAX_PATHS) return;
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return;
    snprintf(p, a + b + 2, "%s/%s", dir, name);
    for (int i = 0; i < *n; i++)
        if (!strcmp(paths[i], p)) { /* listed already */
            free(p);
            return;
        }
    paths[(*n)++] = p;
}

/* The files convert reads (IN, and a directory's shards and configs) and
 * writes (OUT, or a directory's shards and configs): an error when one it
 * writes is one it reads, unless force.  The shards written are named as
 * the input's (or model.safetensors). */
static int check_convert_paths(const char *C, const char *in, const char *out, int force)
{
    char *ins[MAX_PATHS + 1], *outs[MAX_PATHS + 1];
    int n_in = 0, n_out = 0;
    ins[n_in++] = strdup(in);
    outs[n_out++] = strdup(out);
    int out_dir = !cli_ends_with(out, ".gguf") && !cli_ends_with(out, ".safetensors");
    nvfp4_ckpt *c = NULL;
    if (is_dir(in) && nvfp4_ckpt_open(&c, in, NVFP4_FORMAT_UNKNOWN) == NVFP4_OK) {
        for (size_t i = 0; i < nvfp4_ckpt_entries(c); i++) {
            nvfp4_ckpt_entry e;
            if (nvfp4_ckpt_entry_at(c, i, &e) != NVFP4_OK) continue;
            add_path(ins, &n_in, in, e.file);
            if (out_dir) add_path(outs, &n_out, out, e.file);
        }
    }
    nvfp4_ckpt_close(c);
    for (size_t i = 0; i < N_DIR_FILES; i++) {
        if (is_dir(in)) add_path(ins, &n_in, in, dir_files[i]);
        if (out_dir) add_path(outs, &n_out, out, dir_files[i]);
    }
    int rc = !ins[0] || !outs[0] ? cli_error(C, "out of memory")
                                 : cli_check_paths(C, (const char *const *)ins, n_in,
                                                   (const char *const *)outs, n_out, force);
    for (int i = 0; i < n_in; i++) free(ins[i]);
    for (int i = 0; i < n_out; i++) free(outs[i]);
    return rc;
}

int cmd_convert(int argc, char **argv)
{
    const char *C = "convert";
    const char *in = NULL, *out = NULL, *to = NULL, *from = NULL;
    int force = 0;
    progress_ctx pc = {0};
    nvfp4_convert_options opt;
    memset(&opt, 0, sizeof opt);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return 0;
        } else if (!strcmp(a, "--to") || !strcmp(a, "--from")) {
            if (++i >= argc)
                return cli_error(C, "%s needs comfyui, modelopt, compressed-tensors or gguf", a);
            *(a[2] == 't' ? &to : &from) = argv[i];
        } else if (!strcmp(a, "--allow-rescale")) {
            opt.allow_rescale = 1;
        } else if (!strcmp(a, "--force")) {
            force = 1;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            pc.quiet = 1;
        } else if (a[0] == '-' && a[1]) {
            return cli_error(C, "unknown option '%s' (try --help)", a);
        } else if (!in) {
            in = a;
        } else if (!out) {
            out = a;
        } else {
            return cli_error(C, "unexpected argument '%s' (try --help)", a);
        }
    }
    if (!in || !out) return cli_error(C, "needs IN and OUT (try --help)");
    if (!to) return cli_error(C, "needs --to comfyui|modelopt|compressed-tensors|gguf (try --help)");
    if (nvfp4_format_from_name(&opt.to, to) != NVFP4_OK) return cli_error(C, "--to: %s", nvfp4_last_error());
    if (from && nvfp4_format_from_name(&opt.from, from) != NVFP4_OK)
        return cli_error(C, "--from: %s", nvfp4_last_error());
    if (check_convert_paths(C, in, out, force)) return 1;
    char a[512], b[512];
    opt.progress = on_progress;
    opt.note = on_note;
    opt.ctx = &pc;
    double t0 = cli_now();
    nvfp4_status st = nvfp4_convert(in, out, &opt);
    cli_progress_done();
    if (st != NVFP4_OK) return cli_lib_error(C, st, "cannot convert");
    if (!pc.quiet)
        fprintf(stderr, "nvfp4 convert: %s -> %s (%s) in %.2f s\n", cli_printable(a, sizeof a, in),
                cli_printable(b, sizeof b, out), to, cli_now() - t0);
    return 0;
}
