/* dev_rand.h -- the dev/cuda programs' test data: xorshift64 and a
 * Box-Muller normal (deterministic by seed).  C and CUDA C++. */
#ifndef NVFP4_DEV_RAND_H
#define NVFP4_DEV_RAND_H

#include <math.h>
#include <stdint.h>

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static double gauss(uint64_t *s)
{
    double u = ((double)(rng(s) >> 11) + 0.5) / 9007199254740992.0;
    double v = ((double)(rng(s) >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

#endif
