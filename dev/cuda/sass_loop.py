#!/usr/bin/env python3
"""sass_loop.py -- a kernel's innermost MMA loop in SASS, counted: the
backward branch whose body is densest in MMA instructions, its length per
MMA and by opcode.  For reading a kernel change without a GPU (how many
instructions a 64-K chunk costs, whether wgmma groups grew, what a change
added to the loop).

    python3 dev/cuda/sass_loop.py FILE KERNEL [--mma HGMMA] [--list]

FILE is a cubin or an executable with sm_90a code (cuobjdump -sass reads
both).  The CUDA toolkit's cuobjdump is used ($CUOBJDUMP, then PATH, then
/usr/local/cuda/bin); a machine without one can get NVIDIA's from PyPI
(pip install nvidia-cuda-cuobjdump: .../site-packages/nvidia/cu13/bin).
--mma names the opcode prefix a loop is chosen by (HGMMA for the wgmma
kernels, HMMA for mma.sync ones); --list prints the loop's instructions.
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys

LINE = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def cuobjdump():
    env = os.environ.get("CUOBJDUMP")
    if env:
        return env
    return shutil.which("cuobjdump") or "/usr/local/cuda/bin/cuobjdump"


def sass_of(path, kernel):
    """(address, instruction text) of one function's SASS, in order."""
    out = subprocess.run([cuobjdump(), "-sass", "-fun", kernel, path], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"sass_loop: cuobjdump failed: {out.stderr.strip()}")
    code = []
    for line in out.stdout.splitlines():
        m = LINE.match(line)
        if m:
            code.append((int(m.group(1), 16), m.group(2).strip()))
    if not code:
        sys.exit(f"sass_loop: no SASS for {kernel} in {path}")
    return code


def opcode(text):
    """The opcode without predicate and modifiers: '@!P0 BRA 0x10' -> 'BRA'."""
    words = text.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def hottest_loop(code, mma):
    """The backward branch [target, branch] whose body is densest in `mma`
    instructions (the innermost MMA loop, not the tile loop around it;
    ties: the one with more of them)."""
    best = None
    for addr, text in code:
        if opcode(text) != "BRA":
            continue
        m = re.search(r"BRA\s+(?:`\(\.L_x_\d+\)|0x([0-9a-f]+))", text)
        if not m or m.group(1) is None:
            continue
        target = int(m.group(1), 16)
        if target >= addr:
            continue
        body = [(a, t) for a, t in code if target <= a <= addr]
        n_mma = sum(1 for _, t in body if opcode(t).startswith(mma))
        key = (n_mma / len(body), n_mma)
        if n_mma and (best is None or key > best[0]):
            best = (key, target, addr, body)
    return best


def loop_args(doc):
    """The arguments every loop reader takes (a script's first doc paragraph
    as its description): FILE, KERNEL, --mma."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", help="a cubin or an executable with sm_90a code")
    ap.add_argument("kernel", help="the function's name as cuobjdump prints it")
    ap.add_argument("--mma", default="HGMMA", help="opcode prefix that picks the loop (HGMMA, HMMA)")
    return ap


def main(argv):
    ap = loop_args(__doc__)
    ap.add_argument("--list", action="store_true", help="print the loop's instructions")
    args = ap.parse_args(argv[1:])
    code = sass_of(args.file, args.kernel)
    best = hottest_loop(code, args.mma)
    if best is None:
        sys.exit(f"sass_loop: no loop with {args.mma} in {args.kernel}")
    _, start, end, body = best
    n_mma = sum(1 for _, t in body if opcode(t).startswith(args.mma))
    ops = collections.Counter(opcode(t) for _, t in body)
    print(f"{args.kernel}: {len(code)} instructions; innermost MMA loop 0x{start:x}..0x{end:x}: "
          f"{len(body)} instructions, {n_mma} {args.mma} ({len(body) / n_mma:.1f} per {args.mma})")
    print("  " + ", ".join(f"{op} {n}" for op, n in ops.most_common()))
    if args.list:
        for a, t in body:
            print(f"  /*{a:04x}*/ {t}")


if __name__ == "__main__":
    main(sys.argv)
