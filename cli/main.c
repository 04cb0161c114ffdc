/* main.c -- the nvfp4 command: dispatch and top-level help. */
#include <errno.h>
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

/* The signals that end a process by default and that a user sends to stop
 * a command (Ctrl-C, Ctrl-\, kill, a closed terminal). */
static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

/* Remove the temporary files of the outputs being written, then let the
 * signal act: SA_RESETHAND restored its default action, SA_NODEFER lets the
 * raise take effect here, so the process ends as the signal says. */
static void on_stop_signal(int sig)
{
    int saved = errno;
    nvfp4_atomic_unlink_temps();
    raise(sig);
    errno = saved;
}

/* Input files are memory-mapped: if another process truncates one while it
 * is read, the access raises SIGBUS.  Answer it as an error, not a crash:
 * remove the temporary files of writes in progress, say what happened, exit 1. */
static void on_sigbus(int sig)
{
    (void)sig;
    static const char msg[] =
        "nvfp4: an input file changed size while it was being read (truncated by another "
        "process?); no output was left half-written\n";
    nvfp4_atomic_unlink_temps();
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

void cli_install_signal_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_sigbus;
    sigaction(SIGBUS, &sa, NULL);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    for (size_t i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++) {
        struct sigaction old;
        /* a signal the parent set to be ignored (nohup) stays ignored */
        if (sigaction(stop_signals[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL &&
            !(old.sa_flags & SA_SIGINFO))
            sigaction(stop_signals[i], &sa, NULL);
    }
}

int main(int argc, char **argv)
{
    cli_install_signal_handlers();

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
