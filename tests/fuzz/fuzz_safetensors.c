/* fuzz_safetensors.c -- libFuzzer target for the safetensors reader.
 *
 * Any input must either be rejected with a one-line message or open into a
 * handle whose every tensor lies inside the input and agrees with its shape;
 * ASan/UBSan (make fuzz) catch any read outside the buffer.  Opened files also
 * go through the NVFP4 layer loader, which cross-checks three tensors.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nvfp4.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nvfp4_st_file *f = NULL;
    nvfp4_status s = nvfp4_st_open_memory(&f, data, size, "fuzz-input");
    if (s != NVFP4_OK) {
        const char *msg = nvfp4_last_error();
        if (f != NULL || !msg[0] || strncmp(msg, "fuzz-input", 10) != 0)
            abort(); /* a failure must be reported, naming the input, */
        for (const unsigned char *c = (const unsigned char *)msg; *c; c++)
            if (*c < 0x20 || *c == 0x7f) abort(); /* on one printable line */
        return 0;
    }
    volatile uint8_t sink = 0;
    uint64_t covered = 0;
    for (size_t i = 0; i < nvfp4_st_count(f); i++) {
        const nvfp4_st_tensor *t = nvfp4_st_get(f, i);
        const uint8_t *p = t->data;
        if (p < data || p + t->nbytes > data + size) abort();
        uint64_t elems = 1;
        for (int d = 0; d < t->ndim; d++) elems *= (uint64_t)t->shape[d];
        if (t->ndim < 0 || t->ndim > NVFP4_ST_MAX_DIMS ||
            elems * nvfp4_dtype_size(t->dtype) != t->nbytes || nvfp4_st_find(f, t->name) != t)
            abort();
        for (size_t b = 0; b < t->nbytes; b++) sink ^= p[b]; /* touch every byte */
        covered += t->nbytes;

        nvfp4_tensor layer;
        if (nvfp4_st_load_nvfp4(&layer, f, t->name) == NVFP4_OK) {
            /* the stored codes' shape, or fewer rows a metadata record names
             * (at most ComfyUI's padding of 15 rows fewer) */
            if (layer.cols / 2 != t->shape[1] || layer.rows > t->shape[0] || layer.rows < 1 ||
                t->shape[0] - layer.rows > 15)
                abort();
            sink ^= layer.codes[0] ^ layer.scales[0];
            nvfp4_tensor_free(&layer);
        }
        sink ^= (uint8_t)nvfp4_st_is_nvfp4_marker(f, t->name);
    }
    if (covered > size) abort();
    for (size_t i = 0; i < nvfp4_st_metadata_count(f); i++) {
        const char *k, *v;
        nvfp4_st_metadata(f, i, &k, &v);
        sink ^= (uint8_t)(strlen(k) + strlen(v));
    }
    (void)sink;
    nvfp4_st_close(f);
    return 0;
}
