/* cmd_example.c -- `nvfp4 example`: a small checkpoint to try the tools on. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "synth.h"

static const char help[] =
    "usage: nvfp4 example OUT.safetensors [--seed S]\n"
    "\n"
    "Writes a small BF16 checkpoint shaped like a transformer block's linears\n"
    "(blocks.0.attn.qkv.weight 768x256, blocks.0.attn.qkv.bias, blocks.0.mlp.fc2.weight\n"
    "256x1024) and an activation tensor x [8, 256], seeded.  Then try:\n"
    "  nvfp4 quantize OUT.safetensors q.safetensors && nvfp4 inspect q.safetensors\n"
    "  nvfp4 linear q.safetensors:blocks.0.attn.qkv OUT.safetensors:x -o y.safetensors\n";

int cmd_example(int argc, char **argv)
{
    const char *C = "example", *path = NULL;
    long long seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(help, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--seed")) {
            if (++i >= argc || cli_parse_int(argv[i], &seed)) return cli_error(C, "--seed needs an integer");
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_error(C, "unknown option '%s' (try --help)", argv[i]);
        } else if (!path) {
            path = argv[i];
        } else {
            return cli_error(C, "unexpected argument '%s'", argv[i]);
        }
    }
    if (!path) return cli_error(C, "needs OUT.safetensors (try --help)");
    static uint16_t qkv[768 * 256], fc2[256 * 1024], x[8 * 256], bias[768];
    synth_bf16(qkv, 768, 256, (uint64_t)seed, SYNTH_WEIGHTS);
    synth_bf16(fc2, 256, 1024, (uint64_t)seed + 1, SYNTH_WEIGHTS);
    synth_bf16(x, 8, 256, (uint64_t)seed + 2, SYNTH_ACTIVATIONS);
    synth_bf16(bias, 1, 768, (uint64_t)seed + 3, SYNTH_WEIGHTS);
    nvfp4_st_writer *w = NULL;
    int64_t s_qkv[2] = {768, 256}, s_fc2[2] = {256, 1024}, s_x[2] = {8, 256}, s_b[1] = {768};
    nvfp4_status st = nvfp4_st_writer_new(&w);
    if (st == NVFP4_OK) st = nvfp4_st_writer_set_metadata(w, "source", "nvfp4 example");
    if (st == NVFP4_OK)
        st = nvfp4_st_writer_add(w, "blocks.0.attn.qkv.weight", NVFP4_DTYPE_BF16, 2, s_qkv, qkv, sizeof qkv);
    if (st == NVFP4_OK)
        st = nvfp4_st_writer_add(w, "blocks.0.attn.qkv.bias", NVFP4_DTYPE_BF16, 1, s_b, bias, sizeof bias);
    if (st == NVFP4_OK)
        st = nvfp4_st_writer_add(w, "blocks.0.mlp.fc2.weight", NVFP4_DTYPE_BF16, 2, s_fc2, fc2, sizeof fc2);
    if (st == NVFP4_OK) st = nvfp4_st_writer_add(w, "x", NVFP4_DTYPE_BF16, 2, s_x, x, sizeof x);
    if (st == NVFP4_OK) st = nvfp4_st_writer_write(w, path, NULL, NULL);
    nvfp4_st_writer_free(w);
    if (st != NVFP4_OK) return cli_lib_error(C, st, "cannot write");
    printf("wrote %s\n", path);
    return 0;
}
