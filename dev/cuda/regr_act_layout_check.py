#!/usr/bin/env python3
"""regr_act_layout_check.py -- the twenty-seventh session's REGR options
checked without a GPU: where each MMA lane's B fragment comes from.

  f16  (-DNVFP4_SM90_REGR_F16): the FP16 operands [M][K] in the operand
       order (formats/layout.h nvfp4_sm90_operand_elem), four {64, MT} TMA
       boxes a chunk with the 128-byte swizzle (16-byte chunk c of box row r
       at c ^ (r & 7)), read by ldmatrix.x4 at the lane addresses of
       sm90_regm_body.cuh (f16_lo, f16_hi, REGR_STEPS) -- PTX ISA: lane l
       gives row l % 8 of matrix l / 8, lane (g, t) receives elements 2t,
       2t + 1 of row g of matrix i in register i;
  res  (-DNVFP4_SM90_REGR_RES): the resident build's global reads (codes,
       tiled scales) and stores, and the MMA lanes' reads (REGR_ACT_AT).

Both are asserted against what the streaming REGR's lane (g, t) holds for
n8 tile u, block j: b0 = elements {4t, 4t + 2} and b1 = {4t + 1, 4t + 3} of
token row 8u + g, block j (REGM_ACT_UNIT: the values of code bytes 2t, 2t +
1, even elements first), zeros for rows >= M and blocks >= K / 16.  Values
are symbolic (row, element) pairs, so a wrong address shows as a wrong
pair.  The formulas restate the kernel's; a change there must be made here.
What it cannot see: whether the PTX does what the formulas say (the GPU
suites check every output bit).

    python3 dev/cuda/regr_act_layout_check.py
"""
import sys

KC = 256  # REGM_KC


def operand_elem(s):  # nvfp4_sm90_operand_elem: slot s of a block holds this element
    return 2 * s if s < 8 else 2 * (s - 8) + 1


def expected(m, k, row, j, t):
    """The streaming path's {b0, b1} of token row `row`, block j, lane t:
    (row, element) pairs, None for zeros."""
    if row >= m or j >= k // 16:
        return ((None, None), (None, None))
    e = 16 * j
    return (((row, e + 4 * t), (row, e + 4 * t + 2)), ((row, e + 4 * t + 1), (row, e + 4 * t + 3)))


def check_f16(m, mt, k):
    """Every chunk, block pair, n8 tile and lane of REGR_STEPS under REGM_F16."""
    fails = 0
    nch = (k + KC - 1) // KC
    # the FP16 matrix as TMA sees it: element (r, col) of the [M][K] operand
    # rows, col = 16 block + slot -> (r, operand_elem(slot) + 16 block)
    def f16(r, col):
        if r >= m or col >= k:
            return None  # out of bounds: zero fill
        return (r, 16 * (col // 16) + operand_elem(col % 16))
    for c in range(nch):
        # the stage: four boxes of mt rows x 64 halves (128 bytes) at
        # act_codes_off + q * mt * 128; a dict from byte offset (in halves) to value
        smem = {}
        for q in range(4):
            base = q * mt * 128
            for r in range(mt):
                for chunk in range(8):  # 16-byte chunks of the box row
                    dst = base + r * 128 + ((chunk ^ (r & 7)) << 4)
                    for h in range(8):
                        smem[dst + 2 * h] = f16(r, c * KC + 64 * q + 8 * chunk + h)
        for b in range(0, 16, 2):
            for u in range(mt // 8):
                # lane constants and the immediates of REGR_STEPS
                addr = {}
                for lane in range(32):
                    lrow, lmat = lane & 7, lane >> 3
                    f16_lo = lrow * 128 + ((lmat ^ lrow) << 4)
                    f16_hi = lrow * 128 + (((4 + lmat) ^ lrow) << 4)
                    addr[lane] = (f16_hi if b & 2 else f16_lo) + (b >> 2) * (mt * 128) + u * 1024
                    assert addr[lane] % 16 == 0
                for lane in range(32):
                    g, t = lane >> 2, lane & 3
                    regs = []
                    for i in range(4):  # matrix i: row g from lane 8i + g, halves 2t, 2t + 1
                        a = addr[8 * i + g] + 4 * t
                        regs.append((smem[a], smem[a + 2]))
                    for h in range(2):
                        got = (regs[2 * h], regs[2 * h + 1])
                        want = expected(m, k, 8 * u + g, 16 * c + b + h, t)
                        if got != want:
                            fails += 1
                            if fails <= 5:
                                print(f"f16 M={m} MT={mt} K={k}: chunk {c} block {16 * c + b + h} tile {u} "
                                      f"lane {lane}: {got} != {want}")
                # ldmatrix reads 8 rows of 16 bytes per matrix: conflict-free
                # when the 8 addresses fall in 8 different 16-byte bank groups
                for i in range(4):
                    groups = {(addr[8 * i + r] >> 4) & 7 for r in range(8)}
                    if len(groups) != 8:
                        fails += 1
                        print(f"f16 MT={mt}: matrix {i} of block pair {b}, tile {u}: bank groups {sorted(groups)}")
    return fails


def check_res(m, k):
    """The resident build (REGM_RES) and the MMA lanes' reads of it."""
    rows, block_bytes, awn, batch = 2, 64, 4, 16  # REGR_RES_ROWS, _BLOCK_BYTES, REGR_AW(8), REGR_RES_BATCH
    fails = 0
    nb = k // 16
    ncb = (nb + 3) // 4
    # global memory as the kernel reads it: code byte (r, byte) holds
    # elements 2 byte (low nibble) and 2 byte + 1; the tiled scale of (r, block)
    def code_byte(r, byte):
        return ((r, 2 * byte), (r, 2 * byte + 1))
    def tiled_offset(r, cb):
        return ((r // 128) * ncb + cb // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + cb % 4
    scale_at = {tiled_offset(r, cb): (r, cb) for r in range(m) for cb in range(nb)}
    res = {}
    per_row = nb // 2 * 4
    for tr in range(rows):
        for al in range(32 * awn):  # aw * 32 + lane
            for i0 in range(al, per_row, 32 * awn * batch):
                for jj in range(batch):
                    i = i0 + jj * 32 * awn
                    if i >= per_row:
                        break
                    bp, t = i >> 2, i & 3
                    lo = hi = ((None, None), (None, None))
                    if tr < m:
                        cw = bp * 16 + ((i & 3) >> 1) * 4  # byte offset in the row
                        w0 = [code_byte(tr, cw + x) for x in range(4)]
                        w1 = [code_byte(tr, cw + 8 + x) for x in range(4)]
                        s = tr * 16 + (bp >> 1) * 512 + (bp & 1) * 2  # the 16-bit scale load
                        s_lo, s_hi = scale_at[s], scale_at[s + 1]
                        if (s_lo, s_hi) != ((tr, 2 * bp), (tr, 2 * bp + 1)):
                            fails += 1
                            print(f"res M={m} K={k}: row {tr} pair {bp}: scales {s_lo}, {s_hi}")
                        # prmt(W0, W1, t & 1 ? 0x7632 : 0x5410): half t & 1 of each word
                        h0 = 2 * (t & 1)
                        x = [w0[h0], w0[h0 + 1], w1[h0], w1[h0 + 1]]  # bytes of blocks 2bp, 2bp + 1
                        # codes_to_e4m3: ev = low nibbles (even elements), od = high; lo/hi halves
                        ev_lo, ev_hi = (x[0][0], x[1][0]), (x[2][0], x[3][0])
                        od_lo, od_hi = (x[0][1], x[1][1]), (x[2][1], x[3][1])
                        lo, hi = (ev_lo, od_lo), (ev_hi, od_hi)
                    drow = tr * 32
                    res[drow + 2 * bp * block_bytes + t * 8] = lo
                    res[drow + (2 * bp + 1) * block_bytes + t * 8] = hi
    nch = (k + KC - 1) // KC
    for c in range(nch):
        nblk = min(16, nb - 16 * c)
        for b in range(nblk):
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                got = ((None, None), (None, None))
                if lane < 4 * rows:  # REGR_ACT_LIVE
                    got = res[c * 16 * block_bytes + lane * 8 + b * block_bytes]
                want = expected(m, k, g, 16 * c + b, t)
                if got != want:
                    fails += 1
                    if fails <= 5:
                        print(f"res M={m} K={k}: block {16 * c + b} lane {lane}: {got} != {want}")
    return fails


def main():
    fails = 0
    for m, mt, k in ((1, 8, 480), (2, 8, 7168), (5, 8, 32), (8, 8, 800), (13, 16, 14336), (16, 16, 96)):
        fails += check_f16(m, mt, k)
    for m, k in ((1, 480), (2, 480), (1, 32), (2, 7168), (1, 14336)):
        fails += check_res(m, k)
    print("regr_act_layout_check:", "every lane's fragments as the streaming path's" if not fails
          else f"{fails} mismatches")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
