/* synth.h -- seeded synthetic BF16 data (see synth.c). */
#ifndef NVFP4_SYNTH_H
#define NVFP4_SYNTH_H
#include <stdint.h>

enum { SYNTH_WEIGHTS = 0, SYNTH_ACTIVATIONS = 1 };

/* Fill rows x cols BF16 values of the given kind; deterministic in seed. */
int synth_bf16(uint16_t *out, int64_t rows, int64_t cols, uint64_t seed, int kind);

#endif
