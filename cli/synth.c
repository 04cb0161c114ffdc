/* synth.c -- seeded synthetic BF16 data for `nvfp4 check` and `example`.
 *
 * `example` (synth_bf16): weights ~ N(0, 0.02) with a few outlier input
 * columns (x8); activations heavy-tailed (Student t, 3 degrees of freedom)
 * with a few outlier channels (x20).
 *
 * `check` (synth_layer_weight / synth_layer_input) needs data on which the
 * ways of accumulating disagree as they do on a real model's data: an FP32
 * sum loses low bits only when the running sum is far larger than some
 * products, and NVFP4 products carry at most 12 significant bits, so mildly
 * spread data sums exactly in FP32 whatever the order or rounding.  Trained
 * decoders are not mild:
 *   - per-block scale spread: channel magnitudes of a hidden state differ by
 *     orders of magnitude (the norm's learned gains; log-normal here, sigma 1
 *     in ln), tokens differ in scale, and weight rows and input columns each
 *     have their own magnitude;
 *   - outlier channels: a few hidden channels are ~20x larger in every token,
 *     and the first token of a sequence carries "massive activations": two
 *     channels near +-1000 while the median is below 1;
 *   - sign cancellation: zero-mean data, so the sum of a row's products is
 *     far smaller than the sum of their magnitudes and than the running sum
 *     on the way (the massive pair has opposite signs: where the weight reads
 *     both alike, their large products cancel), and a rounding error made
 *     while the running sum was large stays in the result;
 *   - the MLP down projection reads silu(a) * b: a product of two spread
 *     factors, heavy-tailed with many tiny values.
 * Every 4096-element chunk has its own generator seeded from (seed, chunk),
 * and per-row / per-column factors hash (seed, index), so the data never
 * depends on the thread count. */
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

/* What a job generates. */
enum { GEN_EXAMPLE_WEIGHTS, GEN_EXAMPLE_ACTIVATIONS, GEN_WEIGHT, GEN_HIDDEN, GEN_GATED };

typedef struct job {
    uint16_t *out;
    int64_t rows, cols, begin, end; /* chunk range */
    uint64_t seed;
    int gen;
    const float *col_gain, *col_gain2; /* per column (layer data) */
    int64_t massive[2];                /* row 0's massive channels, or -1 */
    pthread_t tid;
} job;

#define CHUNK 4096

/* Layer data (docs above; the numbers are the spreads, in ln, and the shares
 * of outlier channels and columns). */
#define WEIGHT_STD 0.02
#define WEIGHT_ROW_SIGMA 0.25
#define WEIGHT_COL_SIGMA 0.5
#define WEIGHT_OUTLIER_PER_MILLE 2
#define WEIGHT_OUTLIER_GAIN 8.0
#define CHANNEL_SIGMA 1.0
#define CHANNEL_OUTLIER_PER_MILLE 5
#define CHANNEL_OUTLIER_GAIN 20.0
#define TOKEN_SIGMA 0.3

static int outlier_col(uint64_t seed, int64_t c, int per_mille)
{
    uint64_t s = seed ^ (0xC0FFEEULL + (uint64_t)c * 0x100000001B3ULL);
    return (int)(splitmix(&s) % 1000) < per_mille;
}

/* A normal deviate that depends only on (seed, salt, index). */
static double hashed_normal(uint64_t seed, uint64_t salt, int64_t index)
{
    uint64_t s = seed * 0xD1B54A32D192ED03ULL ^ salt ^ ((uint64_t)index * 0x9E3779B97F4A7C15ULL);
    return normal(&s);
}

static double t3(uint64_t r)
{
    /* t(3) = z / sqrt(chi2(3) / 3) */
    double z = normal_table[r & 0xFFFF];
    double a = normal_table[(r >> 16) & 0xFFFF], b = normal_table[(r >> 32) & 0xFFFF],
           d = normal_table[(r >> 48) & 0xFFFF];
    return z / sqrt((a * a + b * b + d * d) / 3.0 + 1e-12);
}

static double silu(double v) { return v / (1.0 + exp(-v)); }

static void *run(void *p)
{
    job *j = p;
    int64_t n = j->rows * j->cols;
    for (int64_t ch = j->begin; ch < j->end; ch++) {
        uint64_t s = j->seed * 0x9E3779B97F4A7C15ULL + (uint64_t)ch;
        int64_t lo = ch * CHUNK, hi = lo + CHUNK < n ? lo + CHUNK : n;
        int64_t row = lo / j->cols, c = lo % j->cols;
        double row_gain = -1;
        for (int64_t i = lo; i < hi; i++, c++) {
            if (c == j->cols) c = 0, row++, row_gain = -1;
            uint64_t r = splitmix(&s);
            double v;
            switch (j->gen) {
            case GEN_EXAMPLE_WEIGHTS:
                v = 0.02 * normal_table[r & 0xFFFF];
                if (outlier_col(j->seed, c, 2)) v *= 8.0;
                break;
            case GEN_EXAMPLE_ACTIVATIONS:
                v = t3(r);
                if (outlier_col(j->seed, c, 3)) v *= 20.0;
                break;
            case GEN_WEIGHT:
                if (row_gain < 0) row_gain = exp(WEIGHT_ROW_SIGMA * hashed_normal(j->seed, 1, row));
                v = WEIGHT_STD * row_gain * j->col_gain[c] * normal_table[r & 0xFFFF];
                break;
            case GEN_HIDDEN:
            case GEN_GATED:
            default:
                if (row == 0 && (c == j->massive[0] || c == j->massive[1])) {
                    v = c == j->massive[0] ? SYNTH_MASSIVE_VALUE : -SYNTH_MASSIVE_VALUE;
                    break;
                }
                if (row_gain < 0) row_gain = exp(TOKEN_SIGMA * hashed_normal(j->seed, 2, row));
                if (j->gen == GEN_HIDDEN)
                    v = row_gain * j->col_gain[c] * t3(r);
                else
                    v = row_gain * silu(j->col_gain[c] * normal_table[r & 0xFFFF]) *
                        j->col_gain2[c] * normal_table[(r >> 16) & 0xFFFF];
                break;
            }
            j->out[i] = nvfp4_bf16_from_f32((float)v);
        }
    }
    return NULL;
}

/* Run the jobs for rows x cols over the cores (at most 64 threads). */
static void run_all(job proto, int64_t rows, int64_t cols)
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
        jobs[i] = proto;
        jobs[i].rows = rows, jobs[i].cols = cols;
        jobs[i].begin = chunks * i / t, jobs[i].end = chunks * (i + 1) / t;
        if (i > 0) started[i] = pthread_create(&jobs[i].tid, NULL, run, &jobs[i]) == 0;
    }
    run(&jobs[0]);
    for (int i = 1; i < t; i++) {
        if (started[i]) pthread_join(jobs[i].tid, NULL);
        else run(&jobs[i]);
    }
}

int synth_bf16(uint16_t *out, int64_t rows, int64_t cols, uint64_t seed, int kind)
{
    job proto = {.out = out, .seed = seed,
                 .gen = kind == SYNTH_WEIGHTS ? GEN_EXAMPLE_WEIGHTS : GEN_EXAMPLE_ACTIVATIONS,
                 .massive = {-1, -1}};
    run_all(proto, rows, cols);
    return 0;
}

/* Per-column gains exp(sigma * N(0, 1)), outliers times outlier_gain. */
static float *column_gains(uint64_t seed, uint64_t salt, int64_t k, double sigma, int per_mille,
                           double outlier_gain)
{
    float *g = malloc((size_t)k * sizeof *g);
    if (!g) return NULL;
    for (int64_t c = 0; c < k; c++) {
        double v = exp(sigma * hashed_normal(seed, salt, c));
        if (per_mille && outlier_col(seed ^ salt, c, per_mille)) v *= outlier_gain;
        g[c] = (float)v;
    }
    return g;
}

void synth_massive_channels(uint64_t seed, int64_t k, int64_t ch[2])
{
    ch[0] = ch[1] = -1;
    if (k < 2) return;
    uint64_t s = seed ^ 0x4D4153534956ULL;
    ch[0] = (int64_t)(splitmix(&s) % (uint64_t)k);
    ch[1] = (int64_t)(splitmix(&s) % (uint64_t)(k - 1));
    if (ch[1] >= ch[0]) ch[1]++;
}

int synth_layer_weight(uint16_t *w, int64_t n, int64_t k, uint64_t seed)
{
    float *g = column_gains(seed, 3, k, WEIGHT_COL_SIGMA, WEIGHT_OUTLIER_PER_MILLE, WEIGHT_OUTLIER_GAIN);
    if (!g) return -1;
    job proto = {.out = w, .seed = seed, .gen = GEN_WEIGHT, .col_gain = g, .massive = {-1, -1}};
    run_all(proto, n, k);
    free(g);
    return 0;
}

int synth_layer_input(uint16_t *x, int64_t m, int64_t k, uint64_t seed, synth_input input)
{
    float *g = column_gains(seed, 4, k, CHANNEL_SIGMA, CHANNEL_OUTLIER_PER_MILLE, CHANNEL_OUTLIER_GAIN);
    float *g2 = input == SYNTH_INPUT_GATED ? column_gains(seed, 5, k, CHANNEL_SIGMA, 0, 1) : NULL;
    if (!g || (input == SYNTH_INPUT_GATED && !g2)) {
        free(g), free(g2);
        return -1;
    }
    job proto = {.out = x, .seed = seed, .gen = input == SYNTH_INPUT_GATED ? GEN_GATED : GEN_HIDDEN,
                 .col_gain = g, .col_gain2 = g2};
    synth_massive_channels(seed, k, proto.massive);
    run_all(proto, m, k);
    free(g), free(g2);
    return 0;
}
