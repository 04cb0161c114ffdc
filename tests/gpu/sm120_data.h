/* sm120_data.h -- NVFP4 operands for the sm120 GPU programs
 * (test_sm120_emu.c, cublaslt_nvfp4_explain.c): hi-first codes and 128x4
 * tiled scales as a ComfyUI checkpoint stores them, made directly (no
 * quantizer), deterministic per seed. */
#ifndef NVFP4_TESTS_GPU_SM120_DATA_H
#define NVFP4_TESTS_GPU_SM120_DATA_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvfp4.h"
#include "testlib.h"

/* DATA_NARROW: block scales within a factor 2 (often exact sums);
 * DATA_REAL: blocks over 2^-6 .. 2^8, a few zero (the steps truncate);
 * DATA_WIDE: DATA_REAL plus subnormal, 448, NaN and sign-bit scale bytes
 * and -0 codes. */
enum { DATA_NARROW, DATA_REAL, DATA_WIDE };

static inline uint8_t sm120_data_scale(uint64_t *s, int kind)
{
    const uint64_t r = test_rand(s);
    if (kind == DATA_NARROW) return (uint8_t)(0x30 + (r >> 8) % 8);
    if (kind == DATA_WIDE) {
        switch (r % 10) {
        case 0: return (uint8_t)(r & 0x100 ? 0x80 : 0x00);
        case 1: return (uint8_t)((r >> 8) % 8);
        case 2: return (uint8_t)(0x7e | ((r >> 9) & 0x80));
        case 3: return (uint8_t)((r >> 8) % 64 == 0 ? ((r >> 20) & 1 ? 0xff : 0x7f) : 0x40);
        case 4: return (uint8_t)(0x80 | (0x08 + (r >> 8) % 0x70));
        default: break;
        }
    }
    if (r % 97 == 0) return 0;
    return (uint8_t)(0x08 + (r >> 8) % 0x70); /* 2^-6 .. 2^8, no NaN */
}

/* rows x cols (cols % 16 == 0), hi-first and tiled; the tiled layout's
 * padding holds NaN bytes (a kernel that reads them goes wrong). */
static inline void sm120_data_operand(nvfp4_tensor *t, int64_t rows, int64_t cols, uint64_t seed, int kind)
{
    if (nvfp4_tensor_alloc(t, rows, cols, NVFP4_HI_FIRST, NVFP4_SCALES_TILED) != NVFP4_OK) {
        fprintf(stderr, "nvfp4_tensor_alloc: %s\n", nvfp4_last_error());
        exit(2);
    }
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    memset(t->scales, 0x7f, nvfp4_scales_bytes(rows, cols, NVFP4_SCALES_TILED));
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *c = t->codes + r * (cols / 2);
        for (int64_t i = 0; i < cols / 2; i += 8) {
            const uint64_t v = test_rand(&s);
            memcpy(c + i, &v, cols / 2 - i < 8 ? (size_t)(cols / 2 - i) : 8);
        }
        if (kind == DATA_WIDE)
            for (int64_t i = 0; i < cols / 2; i++)
                if (test_rand(&s) % 7 == 0) c[i] = 0x88; /* -0, -0 */
        for (int64_t cb = 0; cb < cols / 16; cb++)
            t->scales[nvfp4_tiled_scale_offset(r, cb, cols)] = sm120_data_scale(&s, kind);
    }
    t->per_tensor_scale = (float)(0.01 + (double)(test_rand(&s) % 1000) / 500.0);
}

#endif
