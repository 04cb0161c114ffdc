#!/usr/bin/env python3
"""Turn the H200's rcp.approx.ftz.f32 measurement into src/quant/rcp_sm90_table.bin.xz.

Input: the OUTDIR of tests/gpu/probe_fastmath (rcp_table.bin: "NVFP4RCP", u32 count = 2^23, then
2 bits per mantissa m, m = 4*byte + slot, low bits first: 0 -> diff 0, 1 -> +1 ulp, 2 -> -1 ulp,
3 -> listed in rcp_exceptions.txt as "m diff").  The file is checked (header, size, no exception:
the build's generator tools/rcp_table_c.c and nvfp4_sm90_rcp_diff know diffs -1, 0, +1 only),
its counts printed, and it is written xz-compressed (preset 9, the same bytes as `xz -9`).  The
build decompresses it into a C array; nothing is read at run time (src/quant/quant_sm90.h).

    python3 tools/gen_rcp_table.py PROBE_OUTDIR src/quant/rcp_sm90_table.bin.xz
"""
import lzma
import os
import struct
import sys

N = 1 << 23


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    dirname, out = sys.argv[1], sys.argv[2]
    raw = open(os.path.join(dirname, "rcp_table.bin"), "rb").read()
    if raw[:8] != b"NVFP4RCP" or struct.unpack("<I", raw[8:12])[0] != N or len(raw) != 12 + N // 4:
        sys.exit("gen_rcp_table: rcp_table.bin has the wrong header or size")
    exc_path = os.path.join(dirname, "rcp_exceptions.txt")
    if os.path.exists(exc_path) and open(exc_path).read().strip():
        sys.exit("gen_rcp_table: rcp_exceptions.txt lists diffs beyond +-1 ulp; extend the model first")
    counts = [0, 0, 0, 0]
    for byte in raw[12:]:
        for slot in range(4):
            counts[(byte >> (2 * slot)) & 3] += 1
    if counts[3]:
        sys.exit(f"gen_rcp_table: {counts[3]} mantissas marked as exceptions (code 3)")
    print(f"gen_rcp_table: diff 0: {counts[0]}, +1 ulp: {counts[1]}, -1 ulp: {counts[2]}", file=sys.stderr)
    data = lzma.compress(raw, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=9)
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, out)
    print(f"gen_rcp_table: wrote {out} ({len(data)} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
