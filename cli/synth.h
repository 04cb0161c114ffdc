/* synth.h -- seeded synthetic BF16 data (see synth.c). */
#ifndef NVFP4_SYNTH_H
#define NVFP4_SYNTH_H
#include <stdint.h>

enum { SYNTH_WEIGHTS = 0, SYNTH_ACTIVATIONS = 1 };

/* Fill rows x cols BF16 values of the given kind; deterministic in seed.
 * Small, mildly heavy-tailed data (`nvfp4 example`). */
int synth_bf16(uint16_t *out, int64_t rows, int64_t cols, uint64_t seed, int kind);

/* What feeds a layer: a normalized hidden state (attention projections, MLP
 * up/gate) or a gated MLP product (MLP down projection). */
typedef enum synth_input { SYNTH_INPUT_HIDDEN = 0, SYNTH_INPUT_GATED = 1 } synth_input;

/* The features a layer's weight and activations have in a trained decoder, as
 * far as accumulation is concerned (synth.c says which and why): an n x k
 * weight or m x k activations, BF16, deterministic in seed whatever the
 * thread count.  @return 0, or -1 when out of memory. */
int synth_layer_weight(uint16_t *w, int64_t n, int64_t k, uint64_t seed);
int synth_layer_input(uint16_t *x, int64_t m, int64_t k, uint64_t seed, synth_input input);

/* The two channels of row 0 that carry the massive activations
 * (SYNTH_MASSIVE_VALUE, opposite signs), for k >= 2. */
#define SYNTH_MASSIVE_VALUE 4096.0f
void synth_massive_channels(uint64_t seed, int64_t k, int64_t ch[2]);

#endif
