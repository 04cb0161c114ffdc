#!/usr/bin/env python3
"""CLI tests for `nvfp4 explain` (standard library only).

Writes NVFP4 operands (ComfyUI layout) and their exact F16 values, makes
results under known contracts with `nvfp4 matmul --k-slices S` (and, for the
ambiguous case, exactly in Python), and checks what `explain` prints and
writes: the contract it names, unique / ambiguous, the first differing
output, the JSON keys, and clear errors.
Prints one closing line (clitest.summary)."""
import json
import os
import random
import struct
import sys

from clitest import check, run, run_cases, write_st

E2M1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6]


def e4m3(b):
    b &= 0x7F
    f, m = b >> 3, b & 7
    return (1 + m / 8) * 2.0 ** (f - 7) if f else m / 8 * 2.0 ** -6


def tiled_offset(r, cb, cols):
    tiles_per_row = -(-(cols // 16) // 4)
    return ((r // 128) * tiles_per_row + cb // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + cb % 4


def nvfp4_tensor(rng, rows, cols, big_channels):
    """Random codes and spread-out scales; returns (tensors, values[rows][cols])."""
    codes = [[rng.randrange(16) for _ in range(cols)] for _ in range(rows)]
    scales = [[rng.choice(range(0x20, 0x60)) for _ in range(cols // 16)] for _ in range(rows)]
    for r in range(rows):
        for cb in big_channels:
            scales[r][cb] = 0x7E  # 448: a few "massive" channels
    packed = bytearray()
    for r in range(rows):
        for c in range(0, cols, 2):
            packed.append(codes[r][c] << 4 | codes[r][c + 1])  # hi first
    srows, scols = -(-rows // 128) * 128, -(-(cols // 16) // 4) * 4
    tiled = bytearray(srows * scols)
    for r in range(rows):
        for cb in range(cols // 16):
            tiled[tiled_offset(r, cb, cols)] = scales[r][cb]
    vals = [[(-1 if codes[r][c] & 8 else 1) * E2M1[codes[r][c] & 7] * e4m3(scales[r][c // 16])
             for c in range(cols)] for r in range(rows)]
    return codes, scales, bytes(packed), bytes(tiled), vals


def cases(tmp):
    p = lambda name: os.path.join(tmp, name)
    rng = random.Random(12)
    M, N, K = 12, 72, 16 * 44  # 11 groups of 64

    rc, out, _ = run("explain", "--help")
    check(rc == 0 and "usage: nvfp4 explain" in out and "--json" in out, "explain --help")
    rc, out, _ = run("--help")
    check("explain" in out, "explain listed in nvfp4 --help")

    _, _, a_codes, a_scales, a_vals = nvfp4_tensor(rng, M, K, [5])
    _, _, b_codes, b_scales, b_vals = nvfp4_tensor(rng, N, K, [])
    def nv(name, rows, codes, scales, s2):
        return [(name, "U8", [rows, K // 2], codes),
                (name + "_scale", "F8_E4M3", [-(-rows // 128) * 128, -(-(K // 16) // 4) * 4], scales),
                (name + "_scale_2", "F32", [], struct.pack("<f", s2))]
    write_st(p("a.safetensors"), nv("a", M, a_codes, a_scales, 0.5))
    write_st(p("b.safetensors"), nv("w", N, b_codes, b_scales, 0.25))
    f16 = lambda vals: b"".join(struct.pack("<e", v) for row in vals for v in row)
    write_st(p("a16.safetensors"), [("a", "F16", [M, K], f16(a_vals))])
    write_st(p("b16.safetensors"), [("w", "F16", [N, K], f16(b_vals))])

    # REF under sm90 with 3 K slices (11 groups -> 4 per slice -> 3 slices)
    rc, out, err = run("matmul", p("a.safetensors") + ":a", p("b.safetensors") + ":w",
                       "-o", p("ref3.safetensors"), "--k-slices", "3", "--backend", "cpu")
    check(rc == 0, "matmul --k-slices 3: " + err)
    rc, out, err = run("explain", p("a.safetensors") + ":a", p("b.safetensors") + ":w",
                       p("ref3.safetensors") + ":raw", "--json", p("r3.json"), "--threads", "2")
    check(rc == 0, "explain NVFP4 operands: " + err)
    check("best: sm90, k_slices=3 (group64, 256 elements per slice), combine order: matched 1.000000 of 864"
          in out, "explain names sm90 with 3 slices:\n" + out)
    check("unique: true" in out and "verdict: unique: sm90, 3 K slices" in out, "unique verdict:\n" + out)
    r = json.load(open(p("r3.json")))
    check(r["outputs"] == M * N and r["unique"] is True and r["ambiguous"] is False,
          "JSON outputs / unique / ambiguous")
    check(r["best"]["model"] == "sm90" and r["best"]["k_slices"] == 3 and r["best"]["matched"] == 1.0
          and r["best"]["first_mismatch"] is None, "JSON best")
    keys = {"model", "k_slices", "slice_rule", "combine", "matched", "evaluated"}
    check(all(keys <= set(c) for c in r["candidates"]) and len(r["candidates"]) > 100,
          "JSON candidates carry their keys")
    check(any(c["model"] == "sm120" for c in r["candidates"]), "sm120 among NVFP4 candidates")

    # the same through the exact F16 values (sm120 is then not a candidate)
    rc, out, err = run("explain", p("a16.safetensors") + ":a", p("b16.safetensors") + ":w",
                       p("ref3.safetensors") + ":raw", "--json", p("r3f.json"))
    check(rc == 0 and "best: sm90, k_slices=3" in out and "unique: true" in out,
          "explain F16 operands:\n" + out + err)
    r = json.load(open(p("r3f.json")))
    check(r["operands"] == "f16" and not any(c["model"] == "sm120" for c in r["candidates"]),
          "F16 operands: no sm120 candidate")

    # BF16 out through the epilogue (alpha defaults to 0.5 * 0.25)
    rc, out, err = run("explain", p("a.safetensors") + ":a", p("b.safetensors") + ":w",
                       p("ref3.safetensors") + ":out")
    check(rc == 0 and "reference bf16" in out and "matched 1.000000" in out,
          "explain a BF16 out:\n" + out + err)

    # one output altered: no full match; the first difference is named
    ref = open(p("ref3.safetensors"), "rb").read()
    n = struct.unpack("<Q", ref[:8])[0]
    hdr = json.loads(ref[8:8 + n])
    raw_off = 8 + n + hdr["raw"]["data_offsets"][0]
    i = 5 * N + 40
    (v,) = struct.unpack_from("<I", ref, raw_off + 4 * i)
    ref = bytearray(ref)
    struct.pack_into("<I", ref, raw_off + 4 * i, v ^ 1)
    open(p("ref3x.safetensors"), "wb").write(ref)
    rc, out, err = run("explain", p("a.safetensors") + ":a", p("b.safetensors") + ":w",
                       p("ref3x.safetensors") + ":raw")
    check(rc == 0 and "first differing output: (row 5, col 40)" in out and "unique: false" in out
          and "verdict: no candidate reproduces every output" in out,
          "explain with one altered output:\n" + out + err)
    check(("(0x%08x)" % v) in out, "the first difference shows the candidate's bits")

    # small integers: every model sums exactly -> ambiguous
    ai = [[rng.randrange(-3, 4) for _ in range(64)] for _ in range(6)]
    bi = [[rng.randrange(-2, 3) for _ in range(64)] for _ in range(20)]
    write_st(p("ai.safetensors"), [("a", "F32", [6, 64], b"".join(struct.pack("<f", v) for r in ai for v in r))])
    bf16 = lambda v: struct.pack("<H", struct.unpack("<I", struct.pack("<f", v))[0] >> 16)  # exact here
    write_st(p("bi.safetensors"), [("b", "BF16", [20, 64], b"".join(bf16(v) for r in bi for v in r))])
    exact = [sum(x * y for x, y in zip(ra, rb)) for ra in ai for rb in bi]
    write_st(p("ri.safetensors"), [("ref", "F32", [6, 20], b"".join(struct.pack("<f", v) for v in exact))])
    rc, out, err = run("explain", p("ai.safetensors") + ":a", p("bi.safetensors") + ":b",
                       p("ri.safetensors") + ":ref", "--json", p("ri.json"))
    r = json.load(open(p("ri.json"))) if rc == 0 else {}
    check(rc == 0 and "unique: false" in out and "verdict: ambiguous" in out and r.get("ambiguous") is True
          and r.get("unique") is False and r["best"]["matched"] == 1.0,
          "small-integer data is ambiguous:\n" + out + err)

    # errors: an F32 operand value that is not exact in F16 or BF16, with its position
    bad = [[1.0] * 64 for _ in range(6)]
    bad[2][7] = 1.0 + 2 ** -20
    write_st(p("bad.safetensors"), [("a", "F32", [6, 64], b"".join(struct.pack("<f", v) for r in bad for v in r))])
    rc, out, err = run("explain", p("bad.safetensors") + ":a", p("bi.safetensors") + ":b",
                       p("ri.safetensors") + ":ref")
    check(rc == 1 and "(row 2, col 7)" in err and "not exact in F16 or BF16" in err,
          "inexact F32 operand named: " + err)
    rc, out, err = run("explain", p("ai.safetensors") + ":a", p("bi.safetensors") + ":b",
                       p("ai.safetensors") + ":a")
    check(rc == 1 and "REF must be" in err, "REF of the wrong shape: " + err)
    rc, out, err = run("explain", p("ai.safetensors") + ":a")
    check(rc == 1 and "needs A" in err, "too few arguments: " + err)
    rc, out, err = run("explain", p("ai.safetensors") + ":a", p("bi.safetensors") + ":b",
                       p("ri.safetensors") + ":ref", "--alpha", "2")
    check(rc == 1 and "BF16 REF only" in err, "--alpha with an F32 REF: " + err)
    check(not [f for f in os.listdir(tmp) if ".tmp" in f], "no temporary files left")


if __name__ == "__main__":
    sys.exit(run_cases("test_explain.py", cases, "nvfp4-explain-"))
