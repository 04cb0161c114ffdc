/* fuzz_gguf.c -- libFuzzer target for the GGUF reader.
 *
 * Any input must either be rejected with a one-line message naming it, or
 * open into a handle whose every tensor lies inside the input with the size
 * its type and shape give, and whose key-value pairs lie inside it too;
 * ASan/UBSan (make fuzz) catch any read outside the buffer.  NVFP4 tensors
 * are unpacked row by row, as the checkpoint reader does. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/fmt_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nvfp4_gguf *g = NULL;
    nvfp4_status s = nvfp4_gguf_open_memory(&g, data, size, "fuzz-input");
    if (s != NVFP4_OK) {
        const char *msg = nvfp4_last_error();
        if (g != NULL || !msg[0] || strncmp(msg, "fuzz-input", 10) != 0) abort();
        for (const unsigned char *c = (const unsigned char *)msg; *c; c++)
            if (*c < 0x20 || *c == 0x7f) abort();
        return 0;
    }
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < nvfp4_gguf_kv_count(g); i++) {
        const gguf_kv *kv = nvfp4_gguf_kv(g, i);
        if (kv->value < data || kv->value + kv->value_len > data + size) abort();
        for (uint64_t b = 0; b < kv->value_len; b++) sink ^= kv->value[b];
    }
    for (size_t i = 0; i < nvfp4_gguf_count(g); i++) {
        const gguf_tensor *t = nvfp4_gguf_get(g, i);
        uint64_t n = 0;
        if (!nvfp4_ggml_size(t->type, t->ndim, t->ne, &n) || n != t->nbytes) abort();
        if (t->data < data || t->data + t->nbytes > data + size) abort();
        if (nvfp4_gguf_find(g, t->name) != t) abort();
        for (uint64_t b = 0; b < t->nbytes; b++) sink ^= t->data[b];
        if (t->type == GGML_NVFP4 && t->ne[0] >= FMT_GGML_BLOCK && t->ne[0] <= 4096 && t->ne[1] >= 1) {
            uint8_t codes[2048], scales[256];
            size_t row = (size_t)(t->ne[0] / FMT_GGML_BLOCK) * FMT_GGML_BLOCK_BYTES;
            nvfp4_fmt_ggml_unpack_row(codes, scales, t->data, t->ne[0]);
            uint8_t again[4096 / FMT_GGML_BLOCK * FMT_GGML_BLOCK_BYTES];
            nvfp4_fmt_ggml_pack_row(again, codes, scales, t->ne[0]);
            if (memcmp(again, t->data, row)) abort(); /* the repack is a bijection */
        }
    }
    (void)sink;
    nvfp4_gguf_close(g);
    return 0;
}
