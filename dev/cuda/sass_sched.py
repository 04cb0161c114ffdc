#!/usr/bin/env python3
"""sass_sched.py -- the schedule ptxas wrote into a kernel's loop: each SASS
instruction's control bits (stall cycles, scoreboards set and waited on),
summed per basic block, and a one-warp timeline of a path through the loop.
For judging a kernel change without a GPU: whether the instruction stream of
one warp fits under the MMA chain it feeds.

    python3 dev/cuda/sass_sched.py FILE KERNEL [--mma HGMMA] [--blocks]
        [--list] [--path A,B,...] [--chain CYCLES] [--mio] [--lat OP=CYCLES ...]
    python3 dev/cuda/sass_sched.py FILE KERNEL --loops

The loop is sass_loop.py's (the backward branch densest in --mma), or
--range START:END (hex addresses).  Reported:
  * per basic block of the loop: instructions, MMA, static cycles (the sum
    of the stall counts: the cycles a warp spends issuing the block when no
    scoreboard holds it), and the block's last branch;
  * for the path (default: the blocks a warp runs when every conditional
    branch inside the loop falls through and every unconditional one inside
    it is taken; --path lists block numbers), its
    static cycles, and a timeline of one warp over 16 passes in which
    each scoreboard wait lasts until its producer's latency (--lat; the
    defaults below are assumptions, not measurements) has passed, and,
    with --chain C, each MMA of a dependent chain starts no earlier than C
    cycles after the one before it (WARPGROUP.DEPBAR.LE gsb0, N waits for
    the chain to have no more than N groups outstanding); then again with
    each pipe's issue interval (PIPES: the rates measured on the H200).  The
    steady pass is the mean of passes 9 to 16.  --mio adds a third timeline
    for a hypothesis: that a warp's
    shared-memory instructions issued after an MMA are served only once
    that MMA has started.

Control bits (Volta and later, the upper 64-bit word of each 128-bit
instruction; cuobjdump prints that word on the line after the
instruction): bits 41-44 stall cycles, 45 yield, 46-48 the scoreboard set
on write (7 none), 49-51 on read (7 none), 52-57 the scoreboards waited on,
58-61 operand reuse.  They are ptxas's static schedule: the stall count is
how long the warp waits after issuing the instruction before it may issue
the next; a variable-latency instruction (shared and global loads,
MUFU, SYNCS, ...) sets a scoreboard that later instructions wait on.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sass_loop  # noqa: E402  (its cuobjdump lookup, opcode(), hottest_loop(), loop_args())

INSN = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;\s*/\*\s*0x([0-9a-f]{16})\s*\*/")
UPPER = re.compile(r"^\s+/\*\s*0x([0-9a-f]{16})\s*\*/\s*$")
BRANCH = re.compile(r"\bBRA\s+(?:`\(\.L_x_\d+\)|0x([0-9a-f]+))")
GSB_WAIT = re.compile(r"WARPGROUP\.DEPBAR\.LE\s+gsb0,\s*0x([0-9a-f]+)")

# Assumed latencies (cycles from issue to the scoreboard's release) of the
# variable-latency instructions a loop waits on; the H200's shared-memory
# load latency is about 30 cycles unloaded.  Override with --lat OP=N.
LATENCY = {"LDS": 30, "LDSM": 30, "LDC": 20, "S2R": 20, "S2UR": 20, "MUFU": 20,
           "SYNCS": 30, "BAR": 30, "LDG": 600, "LD": 600, "LDGSTS": 600, "ATOMS": 40,
           "I2F": 12, "F2I": 12, "SHFL": 25, "VOTE": 4, "REDUX": 30, "CS2R": 4,
           "R2UR": 10, "POPC": 12, "FLO": 12, "BREV": 12}
DEFAULT_LATENCY = 30
PASSES = 16   # the steady pass is the mean of the last half
# shared-memory instructions, for --mio
MIO_OPS = {"LDS", "LDSM", "STS", "SYNCS", "ATOMS", "STSM"}

# Issue intervals per scheduler (cycles between two warp instructions of one
# pipe), from docs/KERNEL.md's rates measured on the H200 (probe_rates, per
# SM / 4): F2FP 0.89 a cycle, PRMT / LOP3 / IMAD / SHF 2.0, HMUL2 3.9.  The
# pipe each opcode shares is an assumption (integer ALU ops together, IMAD
# and the FP16 / FP32 arithmetic on the FMA pipe).
PIPES = {"F2FP": ("cvt", 4.5), "F2F": ("cvt", 4.5), "I2F": ("cvt", 4.5), "F2I": ("cvt", 4.5),
         "MUFU": ("cvt", 4.5),
         "LOP3": ("alu", 2), "SHF": ("alu", 2), "PRMT": ("alu", 2), "SEL": ("alu", 2),
         "ISETP": ("alu", 2), "IADD3": ("alu", 2), "LEA": ("alu", 2), "VIADD": ("alu", 2),
         "IABS": ("alu", 2), "LOP": ("alu", 2), "FSEL": ("alu", 2),
         "IMAD": ("fma", 2), "HMUL2": ("fma", 1), "HFMA2": ("fma", 1), "HADD2": ("fma", 1),
         "FFMA": ("fma", 1), "FMUL": ("fma", 1), "FADD": ("fma", 1)}


class Insn:
    __slots__ = ("addr", "text", "op", "stall", "wb", "rb", "wait")

    def __init__(self, addr, text, upper):
        self.addr = addr
        self.text = text
        self.op = sass_loop.opcode(text)
        self.stall = (upper >> 41) & 0xF
        self.wb = (upper >> 46) & 0x7
        self.rb = (upper >> 49) & 0x7
        self.wait = (upper >> 52) & 0x3F

    def control(self):
        waits = "".join(str(i) for i in range(6) if self.wait >> i & 1) or "-"
        wb = "-" if self.wb == 7 else str(self.wb)
        rb = "-" if self.rb == 7 else str(self.rb)
        return f"S{self.stall:02d} W{wb} R{rb} B{waits:<6}"


def sass_with_control(path, kernel):
    out = subprocess.run([sass_loop.cuobjdump(), "-sass", "-fun", kernel, path],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"sass_sched: cuobjdump failed: {out.stderr.strip()}")
    code, pending = [], None
    for line in out.stdout.splitlines():
        m = INSN.match(line)
        if m:
            pending = (int(m.group(1), 16), m.group(2).strip())
            continue
        m = UPPER.match(line)
        if m and pending:
            code.append(Insn(pending[0], pending[1], int(m.group(1), 16)))
            pending = None
    if not code:
        sys.exit(f"sass_sched: no SASS with control words for {kernel} in {path}")
    return code


def branch_target(insn):
    m = BRANCH.search(insn.text)
    return int(m.group(1), 16) if m and m.group(1) else None


def basic_blocks(body):
    """Split a loop body (a list of Insn in address order) at branch targets
    inside it and after branches."""
    lo, hi = body[0].addr, body[-1].addr
    leaders = {lo}
    for i, insn in enumerate(body):
        if insn.op == "BRA":
            t = branch_target(insn)
            if t is not None and lo <= t <= hi:
                leaders.add(t)
            if i + 1 < len(body):
                leaders.add(body[i + 1].addr)
    blocks, cur = [], []
    for insn in body:
        if insn.addr in leaders and cur:
            blocks.append(cur)
            cur = []
        cur.append(insn)
    blocks.append(cur)
    return blocks


def timeline(path, passes, chain, mma, latency, pipes, mio=False):
    """Issue times of one warp running `path` `passes` times: stall counts,
    scoreboard waits released `latency` cycles after their producer issued,
    pipe issue intervals (PIPES) where `pipes`, and optionally a dependent
    MMA chain (`chain` cycles a step) with WARPGROUP.DEPBAR waits; `mio`:
    the hypothesis that a shared-memory instruction (MIO_OPS) issued after an
    MMA is served only once that MMA has started.  Returns the issue cycle
    at the start of each pass and at the end."""
    t = 0
    pipe_free = {}           # cycle each pipe takes its next instruction
    ready = [0] * 6          # cycle each scoreboard is released
    mma_done = 0             # completion of the last MMA issued
    mma_start = 0            # start of the last MMA issued
    groups = []              # completion cycle of each committed group
    group_end = 0
    starts = []
    for _ in range(passes):
        starts.append(t)
        for insn in path:
            for b in range(6):
                if insn.wait >> b & 1:
                    t = max(t, ready[b])
            if chain:
                m = GSB_WAIT.match(insn.text)
                if m:
                    allowed = int(m.group(1), 16)
                    pending = sorted(g for g in groups if g > t)
                    if len(pending) > allowed:
                        t = max(t, pending[len(pending) - allowed - 1])
                if insn.op.startswith(mma):
                    mma_start = max(t, mma_done)
                    mma_done = mma_start + chain
                    group_end = mma_done
                    if "gsb0" in insn.text:
                        groups.append(group_end)
            if pipes and insn.op in PIPES:
                pipe, interval = PIPES[insn.op]
                t = max(t, pipe_free.get(pipe, 0))
                pipe_free[pipe] = t + interval
            lat = latency.get(insn.op, DEFAULT_LATENCY)
            served = max(t, mma_start) if mio and chain and insn.op in MIO_OPS else t
            if insn.wb != 7:
                ready[insn.wb] = served + lat
            if insn.rb != 7:
                ready[insn.rb] = served + min(lat, 8)   # sources read early
            t += max(insn.stall, 1)
    starts.append(t)
    return starts, mma_done


def main(argv):
    ap = sass_loop.loop_args(__doc__)
    ap.add_argument("--range", help="START:END hex addresses of the loop instead")
    ap.add_argument("--path", help="comma-separated block numbers of the path (default: fall-through)")
    ap.add_argument("--chain", type=int, default=0,
                    help="cycles per dependent MMA step (dev/cuda/probe_chain measures it: 67 for m64n128k16)")
    ap.add_argument("--lat", action="append", default=[], help="OP=CYCLES latency override")
    ap.add_argument("--mio", action="store_true",
                    help="with --chain, also the timeline in which shared-memory instructions issued "
                         "after an MMA are served once it has started (a hypothesis)")
    ap.add_argument("--blocks", action="store_true", help="print the loop's basic blocks")
    ap.add_argument("--loops", action="store_true",
                    help="list every loop (backward branch) of the kernel instead: size, static cycles, key opcodes")
    ap.add_argument("--list", action="store_true", help="print the path's instructions with control bits")
    args = ap.parse_args(argv[1:])

    latency = dict(LATENCY)
    for item in args.lat:
        op, _, n = item.partition("=")
        latency[op] = int(n)

    code = sass_with_control(args.file, args.kernel)
    if args.loops:
        # every backward branch: its body's size, static cycles and what it does
        for insn in code:
            t = branch_target(insn) if insn.op == "BRA" else None
            if t is None or t >= insn.addr:
                continue
            body = [i for i in code if t <= i.addr <= insn.addr]
            ops = {}
            for i in body:
                ops[i.op] = ops.get(i.op, 0) + 1
            keys = [k for k in ("HGMMA", "HMMA", "UTMALDG", "LDS", "STS", "F2FP", "SYNCS", "BAR") if k in ops]
            print(f"  loop 0x{t:05x}..0x{insn.addr:05x}: {len(body):5d} insns, static {sum(i.stall for i in body):6d}  "
                  + ", ".join(f"{k} {ops[k]}" for k in keys))
        return
    if args.range:
        a, _, b = args.range.partition(":")
        lo, hi = int(a, 16), int(b, 16)
    else:
        best = sass_loop.hottest_loop([(i.addr, i.text) for i in code], args.mma)
        if best is None:
            sys.exit(f"sass_sched: no loop with {args.mma} in {args.kernel}")
        _, lo, hi, _ = best
    body = [i for i in code if lo <= i.addr <= hi]
    blocks = basic_blocks(body)
    n_mma = sum(1 for i in body if i.op.startswith(args.mma))
    print(f"{args.kernel}: loop 0x{lo:x}..0x{hi:x}, {len(body)} instructions, "
          f"{n_mma} {args.mma}, {len(blocks)} basic blocks, static cycles {sum(i.stall for i in body)}")
    if args.blocks:
        for k, blk in enumerate(blocks):
            last = blk[-1]
            br = last.text if last.op == "BRA" else "(falls through)"
            print(f"  block {k:2d} 0x{blk[0].addr:05x}: {len(blk):4d} insns, "
                  f"{sum(1 for i in blk if i.op.startswith(args.mma)):2d} {args.mma}, "
                  f"static {sum(i.stall for i in blk):5d}  {br}")

    if args.path:
        order = [int(k) for k in args.path.split(",")]
    else:
        # Fall-through path: from the loop's head, conditional branches not
        # taken, unconditional ones inside the loop followed, to the back edge.
        start_of = {blk[0].addr: k for k, blk in enumerate(blocks)}
        order, k = [], 0
        while k < len(blocks) and k not in order:
            order.append(k)
            last = blocks[k][-1]
            if last is body[-1]:
                break
            t = branch_target(last) if last.op == "BRA" and not last.text.startswith("@") else None
            k = start_of.get(t, len(blocks)) if t is not None else k + 1
    print("path: blocks " + ",".join(str(k) for k in order))
    path = [i for k in order for i in blocks[k]]
    p_mma = sum(1 for i in path if i.op.startswith(args.mma))
    static = sum(i.stall for i in path)
    print(f"path: {len(path)} instructions, {p_mma} {args.mma}, static cycles {static}"
          + (f" ({static / p_mma:.1f} per {args.mma})" if p_mma else ""))
    by_op = {}
    for i in path:
        by_op[i.op] = by_op.get(i.op, 0) + i.stall
    top = sorted(by_op.items(), key=lambda kv: -kv[1])[:10]
    print("  static cycles after each opcode: " + ", ".join(f"{op} {n}" for op, n in top))
    for pipes, mio in ((False, False), (True, False)) + (((True, True),) if args.mio and args.chain else ()):
        starts, _ = timeline(path, PASSES, args.chain, args.mma, latency, pipes, mio)
        steady = (starts[PASSES] - starts[PASSES // 2]) / (PASSES - PASSES // 2)
        what = "scoreboard latencies" + (", pipe rates" if pipes else "")
        if args.chain:
            what += f", chain {args.chain} a step"
        if mio:
            what += ", shared loads behind the MMA"
        print(f"  one-warp timeline ({what}): pass 1 {starts[1] - starts[0]}, steady pass {steady:.0f} cycles"
              + (f" ({steady / p_mma:.1f} per {args.mma})" if p_mma else ""))
    if args.list:
        for i in path:
            print(f"  {i.addr:05x} {i.control()} {i.text}")


if __name__ == "__main__":
    main(sys.argv)
