/* synth.c -- seeded, realistic synthetic layers for `nvfp4 check` and `example`.
 *
 * Weights ~ N(0, 0.02) with a few outlier input columns (x8); activations
 * heavy-tailed (Student t, 3 degrees of freedom) with a few outlier channels
 * (x20).  Values are BF16.  Every 4096-element chunk has its own generator
 * seeded from (seed, chunk), so the data never depends on the thread count. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "synth.h"

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *s) { return ((double)(splitmix(s) >> 11) + 0.5) / 9007199254740992.0; }

static double normal(uint64_t *s)
{
    return sqrt(-2.0 * log(uniform01(s))) * cos(6.283185307179586 * uniform01(s));
}

/* Sorted normal samples: table[rand16] is a cheap normal deviate. */
static float normal_table[65536];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static void build_table(void)
{
    uint64_t s = 0x5EEDBA5Eu;
    for (int i = 0; i < 65536; i++) normal_table[i] = (float)normal(&s);
    qsort(normal_table, 65536, sizeof(float), cmp_float);
}

typedef struct job {
    uint16_t *out;
    int64_t rows, cols, begin, end; /* chunk range */
    uint64_t seed;
    int kind;
    pthread_t tid;
} job;

#define CHUNK 4096

static int outlier_col(uint64_t seed, int64_t c, int per_mille)
{
    uint64_t s = seed ^ (0xC0FFEEULL + (uint64_t)c * 0x100000001B3ULL);
    return (int)(splitmix(&s) % 1000) < per_mille;
}

static void *run(void *p)
{
    job *j = p;
    int64_t n = j->rows * j->cols;
    for (int64_t ch = j->begin; ch < j->end; ch++) {
        uint64_t s = j->seed * 0x9E3779B97F4A7C15ULL + (uint64_t)ch;
        int64_t lo = ch * CHUNK, hi = lo + CHUNK < n ? lo + CHUNK : n;
        for (int64_t i = lo; i < hi; i++) {
            int64_t c = i % j->cols;
            uint64_t r = splitmix(&s);
            double v;
            if (j->kind == SYNTH_WEIGHTS) {
                v = 0.02 * normal_table[r & 0xFFFF];
                if (outlier_col(j->seed, c, 2)) v *= 8.0;
            } else {
                /* t(3) = z / sqrt(chi2(3) / 3) */
                double z = normal_table[r & 0xFFFF];
                double a = normal_table[(r >> 16) & 0xFFFF], b = normal_table[(r >> 32) & 0xFFFF],
                       d = normal_table[(r >> 48) & 0xFFFF];
                v = z / sqrt((a * a + b * b + d * d) / 3.0 + 1e-12);
                if (outlier_col(j->seed, c, 3)) v *= 20.0;
            }
            j->out[i] = nvfp4_bf16_from_f32((float)v);
        }
    }
    return NULL;
}

int synth_bf16(uint16_t *out, int64_t rows, int64_t cols, uint64_t seed, int kind)
{
    pthread_once(&table_once, build_table);
    int64_t chunks = (rows * cols + CHUNK - 1) / CHUNK;
    int t = nvfp4_default_threads();
    if (t > 64) t = 64;
    if (t > chunks) t = (int)chunks;
    if (t < 1) t = 1;
    job jobs[64];
    int started[64] = {0};
    for (int i = 0; i < t; i++) {
        jobs[i] = (job){.out = out, .rows = rows, .cols = cols, .begin = chunks * i / t,
                        .end = chunks * (i + 1) / t, .seed = seed, .kind = kind};
        if (i > 0) started[i] = pthread_create(&jobs[i].tid, NULL, run, &jobs[i]) == 0;
    }
    run(&jobs[0]);
    for (int i = 1; i < t; i++) {
        if (started[i]) pthread_join(jobs[i].tid, NULL);
        else run(&jobs[i]);
    }
    return 0;
}
