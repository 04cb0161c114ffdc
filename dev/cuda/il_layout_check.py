#!/usr/bin/env python3
"""il_layout_check.py -- REGR's interleaved rows (-DNVFP4_SM90_REGR_IL)
checked without a GPU: the host's 4-D tensor maps (sm90_gemm.cu,
regr_il_maps) simulated as TMA fills them -- per-dimension bounds with zero
fill, the 128-byte swizzle of 1024-byte aligned boxes -- and the kernel's
shared-memory addressing (sm90_regm_body.cuh under REGM_IL: the loader's
coordinates, the MMA lanes' code words, the activation warps' scale words,
the epilogue's rows) read back from them.

For every CTA, chain, lane (g, t), chunk and block pair it asserts that the
code words a lane loads are bytes 16 bp + 4 (t >> 1) (+ 8) of the 128-byte
chunk row of the weight row the epilogue stores for the mma's A rows g and
g + 8, that those loads are free of bank conflicts, that the scale words
are those rows' tiled scales, and that the epilogue's rows cover [0, N)
once.  What it cannot see: whether the PTX
does what the formulas say (the H200 run checks every output bit).

    python3 dev/cuda/il_layout_check.py [N K]     (default 5376 14336 and a few more)

The formulas below restate the kernel's and the host's; a change to one
must be made here too (they are short, and named as in the sources).
"""
import sys

PER = 3                # REGR_IL_PER
LINES = 4 * PER        # REGR_IL_LINES
CPG = (8 + PER - 1) // PER  # REGR_IL_CPG
KC = 256               # REGM_KC


def tiled_offset(r, cb, ncb):  # formats/layout.h nvfp4_tiled_offset
    return ((r // 128) * ncb + cb // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + cb % 4


def tma_box(mem, dims, strides, box, coords, swizzle128):
    """The bytes TMA writes for a box (dims/strides/box/coords inner first,
    strides of dims 1.. in bytes): rows of box[0] bytes, zeros out of bounds,
    16-byte chunk c of box row r at c ^ (r & 7) with the 128-byte swizzle."""
    out = bytearray()
    import itertools
    outer = [range(b) for b in box[1:]]
    for idx in itertools.product(*reversed(outer)):
        idx = tuple(reversed(idx))  # idx[0] is dim 1
        row = bytearray(box[0])
        inb = all(0 <= coords[d + 1] + idx[d] < dims[d + 1] for d in range(len(idx)))
        if inb:
            base = sum((coords[d + 1] + idx[d]) * strides[d] for d in range(len(idx)))
            for x in range(box[0]):
                if 0 <= coords[0] + x < dims[0]:
                    row[x] = mem[base + coords[0] + x]
        if swizzle128:
            r = len(out) // 128
            sw = bytearray(128)
            for c in range(8):
                sw[(c ^ (r & 7)) * 16:(c ^ (r & 7)) * 16 + 16] = row[c * 16:c * 16 + 16]
            row = sw
        out += row
    return out


def check(n, k, verbose=True):
    assert n % 128 == 0 and k % 32 == 0
    groups, row_bytes, ncb = n // 128, k // 2, (k // 16 + 3) // 4
    nch = (k + KC - 1) // KC
    # weights: every code byte and scale byte a function of its place
    codes = bytes(((r * 131 + b * 7 + (r >> 5) * 29) & 0xFF) for r in range(n) for b in range(row_bytes))
    scales = bytearray(groups * ncb * 512)
    for r in range(n):
        for cb in range(k // 16):
            scales[tiled_offset(r, cb, ncb)] = (r * 37 + cb * 11 + 1) & 0x7F
    # host maps (regr_il_maps)
    cdims, cstr, cbox = [row_bytes, 32, 4, groups], [row_bytes, 32 * row_bytes, 128 * row_bytes], [128, LINES, 4, 1]
    sdims, sstr, sbox = [16, 32, ncb, groups], [16, 512, ncb * 512], [16, LINES, 4, 1]
    seen = {}
    errors = 0
    for cta in range(groups * CPG):
        grp, q0 = cta // CPG, cta % CPG * PER          # il_grp, il_q0
        l0 = 4 * q0                                    # il_l0
        chains = min(8 - q0, PER)
        for c in range(nch):
            st_codes = tma_box(codes, cdims, cstr, cbox, [c * 128, l0, 0, grp], True)
            st_scales = tma_box(scales, sdims, sstr, sbox, [0, l0, 4 * c, grp], False)
            assert len(st_codes) == 1024 * 2 * PER and len(st_scales) == 128 * 2 * PER
            for jr in range(chains):
                for lane in range(32):
                    g, t = lane >> 2, lane & 3
                    wrow = (g >> 2) * LINES + 4 * jr + (g & 3)
                    crow_hi, gxw = 2 * LINES * 128, (wrow & 7) << 4
                    crow0 = wrow * 128 + (t >> 1) * 4
                    rows = [grp * 128 + 32 * ((g >> 2) + 2 * h) + l0 + 4 * jr + (g & 3) for h in (0, 1)]  # REGW_ROW_N
                    if c == 0:
                        for h in (0, 1):
                            seen.setdefault(rows[h], set()).add((cta, jr, h))
                    for bp in range(8):
                        cw = crow0 + ((bp << 4) ^ gxw)
                        got = [st_codes[cw:cw + 4], st_codes[cw + 8:cw + 12],
                               st_codes[cw + crow_hi:cw + crow_hi + 4], st_codes[cw + crow_hi + 8:cw + crow_hi + 12]]
                        for i, (h, off) in enumerate([(0, 0), (0, 8), (1, 0), (1, 8)]):
                            b0 = c * 128 + bp * 16 + (t >> 1) * 4 + off
                            want = bytes(codes[rows[h] * row_bytes + b0 + x] if b0 + x < row_bytes else 0
                                         for x in range(4))
                            if bytes(got[i]) != want:
                                errors += 1
                                if errors <= 5:
                                    print(f"code word: cta {cta} chain {jr} lane {lane} chunk {c} bp {bp} "
                                          f"row {rows[h]}: {bytes(got[i]).hex()} != {want.hex()}")
                # the activation warps' scale words (REGM_WSCALE_WORD, R = 16 jr + a)
                for a in range(16):
                    R = 16 * jr + a
                    row = grp * 128 + 32 * (a >> 2) + l0 + 4 * jr + (a & 3)
                    for q in range(4):
                        off = q * 16 * LINES + (4 * (R >> 4) + (R & 3)) * 16 + ((R & 15) >> 2) * 4
                        for b in range(4):
                            cb = 16 * c + 4 * q + b
                            want = scales[tiled_offset(row, cb, ncb)] if cb < 4 * ncb else 0
                            if st_scales[off + b] != want:
                                errors += 1
                                if errors <= 5:
                                    print(f"scale: cta {cta} chain {jr} row {row} block {cb}: "
                                          f"{st_scales[off + b]} != {want}")
    # the MMA lanes' 32-bit code loads (one instruction: 32 lanes, same bp
    # and word) hit 32 different banks or the same word
    for jr in range(PER):
        for bp in range(8):
            for i, off in enumerate([0, 8, 2 * LINES * 128, 2 * LINES * 128 + 8]):
                words = {}
                for lane in range(32):
                    g, t = lane >> 2, lane & 3
                    wrow = (g >> 2) * LINES + 4 * jr + (g & 3)
                    addr = wrow * 128 + (t >> 1) * 4 + ((bp << 4) ^ ((wrow & 7) << 4)) + off
                    words.setdefault((addr // 4) % 32, set()).add(addr // 4)
                if any(len(w) > 1 for w in words.values()):
                    errors += 1
                    print(f"bank conflict: chain {jr} bp {bp} load {i}")
    bad_rows = [r for r in range(n) if len(seen.get(r, ())) != 1] + [r for r in seen if not 0 <= r < n]
    if bad_rows:
        errors += 1
        print(f"rows stored other than once: {bad_rows[:8]}")
    if verbose:
        print(f"N={n} K={k}: {groups * CPG} CTAs, {nch} chunks: "
              f"{'ok' if errors == 0 else f'{errors} errors'}")
    return errors


def main(argv):
    shapes = [(int(argv[1]), int(argv[2]))] if len(argv) == 3 else [(256, 480), (4352, 32), (1024, 800), (640, 544)]
    errs = sum(check(n, k) for n, k in shapes)
    sys.exit(1 if errs else 0)


if __name__ == "__main__":
    main(sys.argv)
