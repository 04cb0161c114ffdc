/* testlib.h -- a tiny test harness: CHECK counts, TEST groups, a summary.
 *
 * Each test program ends with `return test_summary();`, which prints
 * "RESULT <name> passed=N failed=M skipped=S" for tests/run_unit.sh to add
 * up.  A test that cannot run on this machine says why with TEST_SKIP; a
 * program whose checks all skipped, or that made none, fails.
 * On a mismatch, print the first differing element with test_fail_at(). */
#ifndef NVFP4_TESTLIB_H
#define NVFP4_TESTLIB_H

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_passed_, test_failed_, test_skipped_;
static const char *test_current_ = "";

#define TEST(name) for (int once_ = (test_current_ = (name), 1); once_; once_ = 0)

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (cond) {                                                                    \
            test_passed_++;                                                            \
        } else {                                                                       \
            test_failed_++;                                                            \
            fprintf(stderr, "FAIL %s:%d [%s]: %s\n", __FILE__, __LINE__, test_current_, \
                    #cond);                                                            \
        }                                                                              \
    } while (0)

#define CHECKF(cond, ...)                                                              \
    do {                                                                               \
        if (cond) {                                                                    \
            test_passed_++;                                                            \
        } else {                                                                       \
            test_failed_++;                                                            \
            fprintf(stderr, "FAIL %s:%d [%s]: %s: ", __FILE__, __LINE__, test_current_, \
                    #cond);                                                            \
            fprintf(stderr, __VA_ARGS__);                                              \
            fputc('\n', stderr);                                                       \
        }                                                                              \
    } while (0)

/* A part of the test this machine cannot run (no GPU, no compiler): counted
 * and printed with its reason, never silently passed. */
#define TEST_SKIP(...)                                                                 \
    do {                                                                               \
        test_skipped_++;                                                               \
        printf("SKIP [%s]: ", test_current_);                                          \
        printf(__VA_ARGS__);                                                           \
        putchar('\n');                                                                 \
    } while (0)

/* Compare two arrays of n elements of `size` bytes laid out as rows x cols;
 * report the first difference as (row, col, bits) and count one check. */
static inline int test_equal_bits(const char *what, const void *got, const void *want,
                                  size_t size, int64_t rows, int64_t cols)
{
    const uint8_t *g = got, *w = want;
    for (int64_t i = 0; i < rows * cols; i++) {
        if (memcmp(g + (size_t)i * size, w + (size_t)i * size, size) != 0) {
            uint64_t gb = 0, wb = 0;
            memcpy(&gb, g + (size_t)i * size, size < 8 ? size : 8);
            memcpy(&wb, w + (size_t)i * size, size < 8 ? size : 8);
            test_failed_++;
            fprintf(stderr,
                    "FAIL [%s] %s: first difference at (row %" PRId64 ", col %" PRId64
                    "): got 0x%0*" PRIx64 ", want 0x%0*" PRIx64 "\n",
                    test_current_, what, i / cols, i % cols, (int)size * 2, gb, (int)size * 2,
                    wb);
            return 0;
        }
    }
    test_passed_++;
    return 1;
}

/* xorshift64*: deterministic random numbers for tests. */
static inline uint64_t test_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

/* A standard normal deviate (Box-Muller), deterministic. */
static inline double test_normal(uint64_t *s)
{
    double u1 = ((double)(test_rand(s) >> 11) + 0.5) / 9007199254740992.0;
    double u2 = ((double)(test_rand(s) >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Read a whole file; NULL on failure (prints why). */
static inline void *test_read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(len > 0 ? (size_t)len : 1);
    if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) *n = (size_t)len;
    return buf;
}

/* comfy-kitchen's raw 256 x 1024 golden cases (tools/gen_comfy_golden.py --raw),
 * relative to the repository root the tests run from; NVFP4_GOLDEN overrides. */
static inline const char *test_golden_dir(void)
{
    const char *e = getenv("NVFP4_GOLDEN");
    return e ? e : "tests/golden/comfy-quantize";
}

static inline int test_summary(const char *name)
{
    if (test_passed_ == 0 && test_failed_ == 0) {
        fprintf(stderr, "FAIL %s: no check ran\n", name);
        test_failed_ = 1;
    }
    printf("RESULT %s passed=%d failed=%d skipped=%d\n", name, test_passed_, test_failed_,
           test_skipped_);
    return test_failed_ ? 1 : 0;
}

#endif
