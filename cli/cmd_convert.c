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
    "  --force            write OUT even when it is IN\n"
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

static int same_path(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
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
    char a[512], b[512];
    if (!force && same_path(in, out))
        return cli_error(C, "the output %s is the input %s: it would be replaced (use another name, "
                            "or --force)", cli_printable(a, sizeof a, out), cli_printable(b, sizeof b, in));
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
