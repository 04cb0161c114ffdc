/* frag.h -- where every byte of the sm120 GEMM goes: global memory (as a
 * ComfyUI checkpoint stores it) -> a warp's pipeline stage in shared memory
 * -> the lanes' registers of mma.sync m16n8k64 (kind::mxf4nvf4,
 * scale_vec::4X) -> the outputs.  One definition, used by the kernel
 * (gemm.cu), its emulated tensor core (mma.cuh) and the host simulation
 * that checks them against the PTX ISA's fragment layouts and the oracle
 * (tests/unit/test_sm120_frag.c).  Plain C, host and device.
 *
 * Roles: the weights (N x K) are the MMA's A operand (16 rows a fragment),
 * the activations (M x K) its B operand (8 rows a fragment); a warp's work
 * unit is FA x 16 weight rows by FB x 8 activation rows over all of K, the
 * accumulator is D^T (weight row, activation row).
 *
 * Codes are read as stored, two per byte with element 2i in the high
 * nibble ("hi first"), though the instruction takes element 2i from the
 * low nibble: both operands then carry the same swap of elements 2i and
 * 2i + 1 inside every byte, which keeps each element in its 16-element
 * block and pairs it with the same element of the other operand.  The
 * step adds each block's 16 products exactly (docs/ORACLE.md, sm120), so
 * the sums, and every result bit, are those of k order.
 *
 * Scales are read as stored too: in the 128x4 tiled layout the four scale
 * bytes of row r for k64 group q (block columns 4q .. 4q+3) are one
 * aligned 32-bit word, byte j the scale of block j of the group -- the
 * scale_vec::4X operand as the instruction wants it. */
#ifndef NVFP4_CUDA_SM120_FRAG_H
#define NVFP4_CUDA_SM120_FRAG_H

#include <stddef.h>
#include <stdint.h>

#include "formats/layout.h"

/* A kernel shape: FA weight fragments (16 rows each) and FB activation
 * fragments (8 rows each) per warp unit, KG k64 groups per pipeline stage.
 * X(index, FA, FB, KG) for each shape the library builds; plan.c picks one. */
#define NVFP4_SM120_SHAPES(X) X(0, 1, 1, 4) X(1, 1, 2, 4) X(2, 2, 4, 2) X(3, 4, 4, 2)
#define NVFP4_SM120_NUM_SHAPES 4

/* Warps per CTA; every warp runs its own pipeline (no CTA barrier). */
#define NVFP4_SM120_WARPS 4
/* Pipeline stages a warp may have (the planner fits them to shared memory). */
#define NVFP4_SM120_MIN_STAGES 2
#define NVFP4_SM120_MAX_STAGES 8

/*------------------------------ stage layout ------------------------------*/
/* A stage holds KG k64 groups of the unit's R = 16 FA + 8 FB rows: rows
 * 0 .. 16 FA - 1 the weight rows, then the activation rows.
 *   codes : R rows of 32 KG bytes (2 KG chunks of 16 bytes, swizzled);
 *   scales: R rows of KG words, at R * 32 KG. */
NVFP4_HOST_DEVICE int nvfp4_sm120_rows(int fa, int fb) { return 16 * fa + 8 * fb; }
NVFP4_HOST_DEVICE int nvfp4_sm120_row_bytes(int kg) { return 32 * kg; }
NVFP4_HOST_DEVICE size_t nvfp4_sm120_stage_bytes(int fa, int fb, int kg)
{
    return (size_t)nvfp4_sm120_rows(fa, fb) * (size_t)(36 * kg);
}

/* The 16-byte chunk slot of chunk c of stage row i, for `chunks` chunks a
 * row: an XOR swizzle that puts the same chunk of 8 consecutive rows into
 * 8 different 16-byte slots of a 128-byte line, so that an ldmatrix
 * (8 rows x 16 bytes per matrix) meets no bank conflict. */
NVFP4_HOST_DEVICE int nvfp4_sm120_swizzle(int i, int c, int chunks)
{
    const int period = chunks >= 8 ? 1 : 8 / chunks; /* rows that share one 128-byte line */
    const int span = chunks >= 8 ? 8 : chunks;
    return c ^ ((i / period) % span);
}

/* Byte offset in a stage of chunk c of row i. */
NVFP4_HOST_DEVICE uint32_t nvfp4_sm120_code_off(int i, int c, int kg)
{
    return (uint32_t)(i * nvfp4_sm120_row_bytes(kg) + 16 * nvfp4_sm120_swizzle(i, c, 2 * kg));
}

/* Byte offset in a stage of the scale word of row i, group g of the stage. */
NVFP4_HOST_DEVICE uint32_t nvfp4_sm120_scale_off(int i, int g, int fa, int fb, int kg)
{
    return (uint32_t)(nvfp4_sm120_rows(fa, fb) * nvfp4_sm120_row_bytes(kg) + 4 * (i * kg + g));
}

/*--------------------------- global -> stage copies ---------------------------*/
/* One copy of a stage, as a lane issues it (cp.async): `bytes` bytes from
 * global offset `src` (in the operand's codes or scales) to stage offset
 * `dst`, of which the first `valid` are read and the rest zero-filled.
 * Rows past the operand and bytes past K are zero, as the contract pads. */
typedef struct nvfp4_sm120_copy {
    uint32_t dst;
    int64_t src;
    int weight; /* 1: the weights' arrays, 0: the activations' */
    int bytes, valid;
} nvfp4_sm120_copy;

/* The unit's place and the operands' sizes, as the copies need them. */
typedef struct nvfp4_sm120_unit {
    int64_t n0, m0;  /* first weight row, first activation row */
    int64_t n, m, k; /* weight rows, activation rows, K (a multiple of 16) */
    int64_t groups;  /* ceil(K / 64): also the tiled layouts' 512-byte tiles per 128 rows */
} nvfp4_sm120_unit;

/* Code copies per stage: one per 16-byte chunk of each row. */
NVFP4_HOST_DEVICE int nvfp4_sm120_code_copies(int fa, int fb, int kg) { return nvfp4_sm120_rows(fa, fb) * 2 * kg; }
/* Scale copies per stage: one word per row and group. */
NVFP4_HOST_DEVICE int nvfp4_sm120_scale_copies(int fa, int fb, int kg) { return nvfp4_sm120_rows(fa, fb) * kg; }

/* Code copy t of stage s (groups s KG ..): chunk c = t % (2 KG) of row
 * i = t / (2 KG), 16 bytes from the row's byte 32 s KG + 16 c. */
NVFP4_HOST_DEVICE nvfp4_sm120_copy nvfp4_sm120_code_copy(const nvfp4_sm120_unit *u, int fa, int kg, int64_t s,
                                                         int t)
{
    nvfp4_sm120_copy cp;
    const int chunks = 2 * kg, i = t / chunks, c = t % chunks, rw = 16 * fa;
    const int64_t row_bytes = u->k / 2, at = 32 * (int64_t)kg * s + 16 * (int64_t)c;
    const int64_t row = i < rw ? u->n0 + i : u->m0 + (i - rw);
    const int64_t rows = i < rw ? u->n : u->m;
    const int64_t left = row < rows ? row_bytes - at : 0;
    cp.dst = nvfp4_sm120_code_off(i, c, kg);
    cp.src = left > 0 ? row * row_bytes + at : 0; /* nothing read: a valid address all the same */
    cp.weight = i < rw;
    cp.bytes = 16;
    cp.valid = left <= 0 ? 0 : left >= 16 ? 16 : (int)left;
    return cp;
}

/* Scale copy t of stage s: the word of row i = t / KG for group
 * q = s KG + t % KG, read from the tiled layout where both exist. */
NVFP4_HOST_DEVICE nvfp4_sm120_copy nvfp4_sm120_scale_copy(const nvfp4_sm120_unit *u, int fa, int fb, int kg,
                                                          int64_t s, int t)
{
    nvfp4_sm120_copy cp;
    const int i = t / kg, g = t % kg, rw = 16 * fa;
    const int64_t q = (int64_t)kg * s + g;
    const int64_t row = i < rw ? u->n0 + i : u->m0 + (i - rw);
    const int64_t rows = i < rw ? u->n : u->m;
    const int ok = row < rows && q < u->groups;
    cp.dst = nvfp4_sm120_scale_off(i, g, fa, fb, kg);
    cp.src = ok ? (int64_t)nvfp4_tiled_offset(row, 4 * q, u->groups) : 0;
    cp.weight = i < rw;
    cp.bytes = 4;
    cp.valid = ok ? 4 : 0;
    return cp;
}

/* The mask a scale word of group q gets before the MMA: the sign bits off
 * (UE4M3 reads none) and, in the last group when K is not a multiple of
 * 64, the bytes of the missing blocks zero (whatever the tiled layout's
 * padding holds: a missing block is a zero block, codes and scales). */
NVFP4_HOST_DEVICE uint32_t nvfp4_sm120_scale_mask(int64_t q, int64_t k)
{
    const int64_t left = k - 64 * q; /* elements of K from this group on */
    if (left >= 64) return 0x7F7F7F7Fu;
    return 0x7F7F7F7Fu & ((1u << (8 * (uint32_t)(left / 16))) - 1u);
}

/*------------------------- stage -> fragments -------------------------*/
/* ldmatrix .x4 of weight fragment fa, group g of the stage: lane l gives
 * row (l & 7) of matrix l >> 3, where matrices 0..3 are rows 0-7 / 8-15 of
 * the group's first 16 bytes, then of its last 16 bytes.  Lane (gid, t)
 * then holds bytes 4t .. 4t+3 of row gid (+8) of each: the A fragment's
 * registers a0 .. a3 (row gid, gid + 8; k 8t .., 32 + 8t ..). */
NVFP4_HOST_DEVICE uint32_t nvfp4_sm120_ldsm_a(int lane, int fa, int g, int kg)
{
    const int i = 16 * fa + (lane & 7) + 8 * ((lane >> 3) & 1), c = 2 * g + (lane >> 4);
    return nvfp4_sm120_code_off(i, c, kg);
}

/* ldmatrix .x4 of activation fragments fb and fb + 1 (fb even), group g:
 * matrices 0, 1 the first and last 16 bytes of fragment fb's 8 rows, 2, 3
 * those of fragment fb + 1: registers b0, b1 of each.  With one fragment
 * (.x2) only lanes 0-15 count; the others repeat their addresses. */
NVFP4_HOST_DEVICE uint32_t nvfp4_sm120_ldsm_b(int lane, int fa, int fb, int g, int kg, int pair)
{
    const int j = pair ? lane >> 3 : (lane >> 3) & 1;
    const int i = 16 * fa + 8 * (fb + (j >> 1)) + (lane & 7), c = 2 * g + (j & 1);
    return nvfp4_sm120_code_off(i, c, kg);
}

/* The scale words a lane passes, thread selectors 0: weight fragment fa --
 * lanes t = 0 and 1 of each quad give rows gid and gid + 8 (the others
 * repeat them); activation fragment fb -- lane t = 0 gives row gid (every
 * lane loads it). */
NVFP4_HOST_DEVICE int nvfp4_sm120_sfa_row(int lane, int fa) { return 16 * fa + (lane >> 2) + 8 * (lane & 1); }
NVFP4_HOST_DEVICE int nvfp4_sm120_sfb_row(int lane, int fa, int fb) { return 16 * fa + 8 * fb + (lane >> 2); }

/* Accumulator i (0..3) of fragment pair (fa, fb) at lane (gid, t): weight
 * row (output column) and activation row (output row) in the unit. */
NVFP4_HOST_DEVICE int nvfp4_sm120_acc_n(int lane, int fa, int i) { return 16 * fa + (lane >> 2) + 8 * (i >> 1); }
NVFP4_HOST_DEVICE int nvfp4_sm120_acc_m(int lane, int fb, int i) { return 8 * fb + 2 * (lane & 3) + (i & 1); }

/*------------------- the PTX ISA's fragment layouts -------------------*/
/* mma.m16n8k64 with .e2m1 (PTX ISA, "Matrix fragments for mma.m16n8k64"),
 * lane = 4 gid + t: element (row, k) of A is nibble k & 7 (lowest first) of
 * register 2 (k >= 32) + (row >= 8) of lane 4 (row & 7) + (k & 31) / 8;
 * element (k, col) of B is nibble k & 7 of register k >= 32 of lane
 * 4 col + (k & 31) / 8.  Block scaling (scale_vec::4X): byte j of a scale
 * word is k-block j; with thread selector s, A's rows gid and gid + 8 come
 * from lanes 4 gid + 2 s and 4 gid + 2 s + 1, B's column gid from lane
 * 4 gid + s.  The emulated MMA gathers by these; the host simulation and
 * tests/gpu/probe_sm120.cu check them. */
NVFP4_HOST_DEVICE int nvfp4_sm120_a_lane(int row, int k) { return 4 * (row & 7) + (k & 31) / 8; }
NVFP4_HOST_DEVICE int nvfp4_sm120_a_reg(int row, int k) { return 2 * (k >= 32) + (row >= 8); }
NVFP4_HOST_DEVICE int nvfp4_sm120_b_lane(int col, int k) { return 4 * col + (k & 31) / 8; }
NVFP4_HOST_DEVICE int nvfp4_sm120_b_reg(int k) { return k >= 32; }
NVFP4_HOST_DEVICE int nvfp4_sm120_sfa_lane(int row, int sel) { return 4 * (row & 7) + 2 * sel + (row >= 8); }
NVFP4_HOST_DEVICE int nvfp4_sm120_sfb_lane(int col, int sel) { return 4 * col + sel; }
/* D (and C): register i of lane (gid, t) is row gid + 8 (i >> 1), column 2 t + (i & 1). */
NVFP4_HOST_DEVICE int nvfp4_sm120_d_row(int lane, int i) { return (lane >> 2) + 8 * (i >> 1); }
NVFP4_HOST_DEVICE int nvfp4_sm120_d_col(int lane, int i) { return 2 * (lane & 3) + (i & 1); }

#endif
