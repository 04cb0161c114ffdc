/* seed_linears.h -- the four linear layers of the seed report's decoder block
 * (hidden size 5376, attention width 7168, MLP width 14336) as weights of
 * N x K, for the tests that plan, check or time them. */
#ifndef NVFP4_TESTS_SEED_LINEARS_H
#define NVFP4_TESTS_SEED_LINEARS_H

#include <stdint.h>

typedef struct seed_linear {
    const char *name;
    int64_t n, k;
} seed_linear;

static const seed_linear SEED_LINEARS[4] = {
    {"qkv", 21504, 5376}, {"attn_out", 5376, 7168}, {"fc1", 28672, 5376}, {"fc2", 5376, 14336}};

#endif
