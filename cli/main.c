/* main.c -- the nvfp4 command: dispatch and top-level help. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char usage[] =
    "usage: nvfp4 <command> [options]\n"
    "\n"
    "NVFP4 linear layers, bit-exact: ComfyUI's bytes, ComfyUI's quantizer, tensor-core\n"
    "accumulation models (the oracle), a CPU backend and an H200 (sm_90a) backend.\n"
    "\n"
    "commands:\n"
    "  check       is the GEMM bit-exact against its hardware's accumulation model? (JSON)\n"
    "  bench       H200 kernel vs cuBLAS BF16 and FP8, side by side (CUDA builds)\n"
    "  quantize    BF16/F16/F32 tensors of a safetensors file -> ComfyUI NVFP4\n"
    "  dequantize  NVFP4 tensors -> BF16 or F32\n"
    "  inspect     the checkpoint's format and conventions, its tensors and simple stats\n"
    "  convert     an NVFP4 checkpoint between comfyui, modelopt, compressed-tensors, gguf\n"
    "  matmul      NVFP4 x NVFP4 GEMM under an accumulation model (raw FP32 + BF16 out)\n"
    "  linear      BF16 activations x NVFP4 layer (quantize, then GEMM)\n"
    "  explain     which contract (model, K slices) reproduces another GEMM's outputs\n"
    "  example     write a small example checkpoint to quantize and inspect\n"
    "\n"
    "`nvfp4 <command> --help` describes each.  Exit status 0 only on success.\n"
    "Docs: README.md, docs/CONTRACT.md (the GEMM contract), docs/FORMATS.md.\n";

/* Input files are memory-mapped: if another process truncates one while it
 * is read, the access raises SIGBUS.  Answer it as an error, not a crash:
 * remove the temporary files of writes in progress, say what happened, exit 1. */
static void on_sigbus(int sig)
{
    (void)sig;
    static const char msg[] =
        "nvfp4: an input file changed size while it was being read (truncated by another "
        "process?); no output was left half-written\n";
    nvfp4_remove_temp_files();
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

int main(int argc, char **argv)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);

    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("nvfp4 %d.%d.%d\n", NVFP4_VERSION_MAJOR, NVFP4_VERSION_MINOR,
               NVFP4_VERSION_PATCH);
        return 0;
    }
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {
        {"check", cmd_check},       {"bench", cmd_bench},         {"quantize", cmd_quantize},
        {"dequantize", cmd_dequantize}, {"inspect", cmd_inspect}, {"matmul", cmd_matmul},
        {"linear", cmd_linear},     {"example", cmd_example},     {"explain", cmd_explain},
        {"convert", cmd_convert},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(cmd, cmds[i].name)) return cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "nvfp4: unknown command '%s' (try `nvfp4 --help`)\n", cmd);
    return 2;
}
