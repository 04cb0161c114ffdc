#!/usr/bin/env python3
"""CLI tests of what a user's inputs and outputs go through: files a command
must never destroy (an output that is an input, two outputs that are one
file, a tensor that only bears the marker's name, signals during a write),
shapes (K and rows not multiples of 16, through quantize -> linear / matmul
/ explain / dequantize), NaN and Inf (where, and what became of them;
--strict), per-tensor scales, and the words of the messages.
Prints one closing line (clitest.summary)."""
import json
import os
import random
import resource
import shutil
import signal
import struct
import subprocess
import sys
import time

from clitest import NVFP4, bf16, check, f32, floats, read_st, run, run_cases, skip, write_st

RND = random.Random(44)


def rand_bf16(n, scale=1.0):
    return bf16([RND.gauss(0, scale) for _ in range(n)])


def cases(tmp):
    p = lambda name: os.path.join(tmp, name)
    rc, _, err = run("example", p("ex.st"))
    rc2, _, err2 = run("quantize", p("ex.st"), p("q.st"))
    if not check(rc == 0 and rc2 == 0, "example + quantize: " + err + err2):
        return
    outputs_never_replace_inputs(p)
    marker_names(p)
    signals_leave_nothing(p)
    shapes_through_the_chain(p)
    nan_and_inf(p)
    per_tensor_scales(p)
    words(p)


def unchanged(path, before):
    return open(path, "rb").read() == before


def outputs_never_replace_inputs(p):
    """explain --json and check --json onto an input; two outputs onto one file."""
    q = open(p("q.st"), "rb").read()
    layer = p("q.st") + ":blocks.0.attn.qkv"
    rc, _, err = run("linear", layer, p("ex.st") + ":x", "-o", p("ref.st"), "--backend", "cpu",
                     "--dump-quantized", p("xq.st"))
    check(rc == 0, "linear for explain's operands: " + err)
    spec = [p("xq.st") + ":x", p("q.st") + ":blocks.0.attn.qkv.weight", p("ref.st") + ":raw"]
    rc, _, err = run("explain", *spec, "--json", p("q.st"))
    check(rc == 1 and "is the input" in err and "--force" in err and unchanged(p("q.st"), q),
          "explain --json onto the B operand's file is refused: " + err)
    rc, _, err = run("explain", *spec, "--json", p("ref.st"))
    check(rc == 1 and "is the input" in err, "explain --json onto REF's file is refused: " + err)
    shutil.copy(p("q.st"), p("q2.st"))
    spec2 = [spec[0], p("q2.st") + ":blocks.0.attn.qkv.weight", spec[2]]
    rc, _, err = run("explain", *spec2, "--json", p("q2.st"), "--force")
    check(rc == 0 and json.load(open(p("q2.st"))).get("best") is not None,
          "explain --json onto an input with --force writes it: " + err)
    rc, _, err = run("check", "--backend", "cpu", "--rows", "1", "--checkpoint", p("q.st"),
                     "--layers", "blocks.0.attn.qkv", "--json", p("q.st"))
    check(rc == 2 and "is the input" in err and unchanged(p("q.st"), q),
          "check --json onto its --checkpoint is refused: " + err)
    # two outputs, one file: by the same name, by another spelling, by a link
    os.makedirs(p("sub"), exist_ok=True)
    for out, dump in ((p("y.st"), p("y.st")), (p("y.st"), os.path.join(p("sub"), "..", "y.st"))):
        rc, _, err = run("linear", layer, p("ex.st") + ":x", "-o", out, "--backend", "cpu",
                         "--dump-quantized", dump)
        check(rc == 1 and "two outputs are one file" in err and not os.path.exists(p("y.st")),
              f"linear -o {out} --dump-quantized {dump} is refused: " + err)
    open(p("z.st"), "wb").write(b"keep")
    os.symlink(p("z.st"), p("z-link.st"))
    rc, _, err = run("linear", layer, p("ex.st") + ":x", "-o", p("z.st"), "--backend", "cpu",
                     "--dump-quantized", p("z-link.st"))
    check(rc == 1 and "two outputs are one file" in err and open(p("z.st"), "rb").read() == b"keep",
          "an output and a link to it are one file: " + err)


def marker_names(p):
    """LAYER.comfy_quant that is user data is neither deleted nor shadowed."""
    w = rand_bf16(32 * 64, 0.02)
    user = f32([1.0, 2.0, 3.0])
    write_st(p("m.st"), [("L.weight", "BF16", [32, 64], w), ("L.comfy_quant", "F32", [3], user)])
    rc, _, err = run("quantize", p("m.st"), p("mq.st"))
    check(rc == 1 and "'L.comfy_quant' exists and is not ComfyUI's NVFP4 marker" in err
          and not os.path.exists(p("mq.st")), "quantize refuses to shadow a user's L.comfy_quant: " + err)
    # a quantized layer beside a user tensor of the marker's name: dequantize keeps it
    write_st(p("m2.st"), [("L.weight", "BF16", [32, 64], w)])
    rc, _, err = run("quantize", p("m2.st"), p("m2q.st"))
    t, meta = read_st(p("m2q.st"))
    check(rc == 0 and json.loads(t["L.comfy_quant"][2]) == {"format": "nvfp4"}, "marker written: " + err)
    t["L.comfy_quant"] = ("F32", [3], user)
    write_st(p("m3.st"), [(k,) + v for k, v in t.items()], meta)
    rc, _, err = run("dequantize", p("m3.st"), p("m3d.st"))
    d = read_st(p("m3d.st"))[0] if rc == 0 else {}
    check(rc == 0 and d.get("L.comfy_quant") == ("F32", [3], user) and "keeping 'L.comfy_quant'" in err
          and d.get("L.weight", ("",))[0] == "BF16", "dequantize keeps a user's L.comfy_quant: " + err)
    rc, _, err = run("dequantize", p("m2q.st"), p("m2d.st"))
    check(rc == 0 and "L.comfy_quant" not in read_st(p("m2d.st"))[0], "dequantize drops the real marker")


def signals_leave_nothing(p):
    """SIGINT, SIGTERM, SIGHUP and SIGQUIT during quantize: the process ends by
    the signal and leaves neither its output nor a temporary file."""
    rows, cols = 2048, 8192  # 32 MiB of BF16: the quantizer runs long enough to be caught
    chunk = rand_bf16(cols)
    big = p("big.st")
    h = json.dumps({"t.weight": {"dtype": "BF16", "shape": [rows, cols],
                                 "data_offsets": [0, rows * cols * 2]}}).encode()
    h += b" " * (-len(h) % 8)
    with open(big, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for _ in range(rows):
            f.write(chunk)
    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)

    def as_from_a_terminal():
        """The child starts with the default actions (a background job starts
        with SIGINT and SIGQUIT ignored, nohup with SIGHUP) and dumps no core."""
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        for s in stops:
            signal.signal(s, signal.SIG_DFL)

    for sig in stops:
        d = p(f"sig{int(sig)}")
        os.makedirs(d)
        out = os.path.join(d, "q.st")
        proc = subprocess.Popen([NVFP4, "quantize", big, out, "--threads", "1"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                preexec_fn=as_from_a_terminal,
                                env=dict(os.environ, NVFP4_NO_PROGRESS="1"))
        seen = False
        t0 = time.time()
        while proc.poll() is None and time.time() - t0 < 60:
            if any(".tmp-" in n for n in os.listdir(d)):
                seen = True
                proc.send_signal(sig)
                break
            time.sleep(0.0005)
        proc.communicate()
        if not seen:
            skip(f"{sig.name}: quantize finished before its temporary file was seen")
            continue
        check(proc.returncode == -sig and os.listdir(d) == [],
              f"{sig.name} during quantize: exit {proc.returncode}, left {os.listdir(d)}")
    os.unlink(big)


def nvfp4_layer(name, codes, scales, s2, rows, cols):
    return [(name, "U8", [rows, cols // 2], bytes(codes)),
            (name + "_scale", "F8_E4M3", [-(-rows // 128) * 128, -(-(cols // 16) // 4) * 4], bytes(scales)),
            (name + "_scale_2", "F32", [], struct.pack("<f", s2))]


def shapes_through_the_chain(p):
    """Rows and K not multiples of 16: quantize pads as ComfyUI does, every
    command sees the user's shapes."""
    # a 5 x 17 weight: stored 16 x 32 (ComfyUI's bytes), 5 rows recorded
    w = rand_bf16(5 * 17, 0.5)
    write_st(p("w17.st"), [("lin.weight", "BF16", [5, 17], w)])
    rc, _, err = run("quantize", p("w17.st"), p("w17q.st"))
    t, meta = read_st(p("w17q.st")) if rc == 0 else ({}, {})
    check(rc == 0 and t["lin.weight"][1] == [16, 16] and t["lin.weight_scale"][1] == [128, 4]
          and meta.get("nvfp4.rows.lin.weight") == "5", "quantize 5 x 17: ComfyUI's padded bytes, rows "
          f"recorded: {err} {meta}")
    # activations of K 17 go with the weight's K 32, as their zero-padding
    x = rand_bf16(3 * 17)
    write_st(p("x17.st"), [("x", "BF16", [3, 17], x)])
    xs = floats("BF16", x)
    pad = [v for r in range(3) for v in xs[17 * r:17 * r + 17] + [0.0] * 15]
    write_st(p("x32.st"), [("x", "BF16", [3, 32], bf16(pad))])
    rc, out, err = run("linear", p("w17q.st") + ":lin", p("x17.st") + ":x", "-o", p("y17.st"),
                       "--backend", "cpu")
    rc2, _, err2 = run("linear", p("w17q.st") + ":lin", p("x32.st") + ":x", "-o", p("y32.st"),
                       "--backend", "cpu")
    y17 = read_st(p("y17.st"))[0] if rc == 0 else {}
    check(rc == 0 and rc2 == 0 and y17 == read_st(p("y32.st"))[0] and y17["out"][1] == [3, 5],
          "linear: x of K 17 against the weight quantized from K 17 (N = 5): " + err + err2)
    # rows: quantize --only x of 4 x 64 stores 16 rows, records 4
    xa = rand_bf16(4 * 64, 2.0)
    write_st(p("x4.st"), [("x", "BF16", [4, 64], xa)])
    rc, _, err = run("quantize", p("x4.st"), p("x4q.st"), "--only", "x")
    t, meta = read_st(p("x4q.st")) if rc == 0 else ({}, {})
    check(rc == 0 and t["x"][1] == [16, 32] and meta.get("nvfp4.rows.x") == "4",
          f"quantize --only x of 4 x 64: {err} {meta}")
    wb = rand_bf16(128 * 64, 0.05)
    write_st(p("w128.st"), [("w", "BF16", [128, 64], wb)])
    rc, _, err = run("quantize", p("w128.st"), p("w128q.st"), "--only", "w")
    check(rc == 0 and "nvfp4.rows.w" not in read_st(p("w128q.st"))[1], "no record when nothing was padded")
    rc, _, err = run("matmul", p("x4q.st") + ":x", p("w128q.st") + ":w", "-o", p("mm4.st"), "--backend", "cpu")
    mm = read_st(p("mm4.st"))[0] if rc == 0 else {}
    check(rc == 0 and mm["raw"][1] == [4, 128] and mm["out"][1] == [4, 128], "matmul returns x's 4 rows: " + err)
    rc, out, err = run("explain", p("x4q.st") + ":x", p("w128q.st") + ":w", p("mm4.st") + ":raw")
    check(rc == 0 and "matched 1.000000 of 512" in out, "explain takes a real 4 x 128 reference:\n" + out + err)
    # linear --dump-quantized writes what quantize --only x writes
    write_st(p("l.st"), [("L.weight", "BF16", [128, 64], wb)])
    run("quantize", p("l.st"), p("lq.st"))
    rc, _, err = run("linear", p("lq.st") + ":L", p("x4.st") + ":x", "-o", p("ly.st"), "--backend", "cpu",
                     "--dump-quantized", p("ldump.st"))
    check(rc == 0 and read_st(p("ldump.st")) == read_st(p("x4q.st")),
          "linear --dump-quantized == quantize --only x (tensors and rows): " + err)
    rc, out, _ = run("inspect", p("x4q.st"))
    check(rc == 0 and "x: 4 x 64 (stored as 16 rows" in out, "inspect shows x's rows:\n" + out)
    rc, _, err = run("dequantize", p("x4q.st"), p("x4d.st"))
    d, meta = read_st(p("x4d.st")) if rc == 0 else ({}, {})
    check(rc == 0 and d["x"][1] == [4, 64] and "nvfp4.rows.x" not in meta,
          "dequantize writes x's 4 rows and drops the record: " + err)
    # a record that no padding can explain is a malformed file
    t, meta = read_st(p("x4q.st"))
    write_st(p("badrows.st"), [(k,) + v for k, v in t.items()], {"nvfp4.rows.x": "40"})
    rc, _, err = run("matmul", p("badrows.st") + ":x", p("w128q.st") + ":w", "-o", p("never.st"))
    check(rc == 1 and "nvfp4.rows.x" in err and "malformed" in err, "a bad rows record is refused: " + err)


def nan_and_inf(p):
    """Which tensor, which element, what became NaN; --strict refuses."""
    vals = [RND.gauss(0, 0.02) for _ in range(32 * 64)]
    vals[3 * 64 + 17] = float("nan")
    write_st(p("wn.st"), [("L.weight", "BF16", [32, 64], bf16(vals))])
    rc, _, err = run("quantize", p("wn.st"), p("wnq.st"))
    check(rc == 0 and "'L.weight' holds 1 NaN value (at row 3, col 17)" in err
          and "per-tensor scale (computed as amax/2688) is NaN" in err
          and "all 2048 of its 32 x 64 quantized values are NaN" in err,
          "quantize names the NaN and what it did: " + err)
    rc, _, err = run("quantize", p("wn.st"), p("never.st"), "--strict")
    check(rc == 1 and "--strict" in err and not os.path.exists(p("never.st")), "quantize --strict refuses: " + err)
    # with a given scale only the NaN's block is lost
    rc, _, err = run("quantize", p("wn.st"), p("wnq2.st"), "--per-tensor-scale", "0.001")
    check(rc == 0 and "16 of its 32 x 64 quantized values are NaN" in err and "row 3, col 16" in err,
          "a given scale: the NaN's block: " + err)
    write_st(p("wz.st"), [("L.weight", "BF16", [16, 32], bf16([0.0] * 512))])
    rc, _, err = run("quantize", p("wz.st"), p("wzq.st"))
    check(rc == 0 and "'L.weight' is all zeros" in err and "NaN scale" in err, "an all-zero weight is told: " + err)
    # the NaN layer in matmul and linear: named, and refused with --strict
    write_st(p("xf.st"), [("x", "BF16", [2, 64], rand_bf16(128))])
    rc, _, err = run("linear", p("wnq.st") + ":L", p("xf.st") + ":x", "-o", p("yn.st"), "--backend", "cpu")
    check(rc == 0 and "the weight 'L.weight' has 2048 NaN values" in err and "per-tensor scale is NaN" in err
          and "all 64 of the 2 x 32 outputs are NaN" in err, "linear names the NaN weight: " + err)
    rc, _, err = run("linear", p("wnq.st") + ":L", p("xf.st") + ":x", "-o", p("never.st"), "--backend", "cpu",
                     "--strict")
    check(rc == 1 and "--strict" in err and not os.path.exists(p("never.st")), "linear --strict refuses: " + err)
    run("quantize", p("xf.st"), p("xfq.st"), "--only", "x")
    rc, _, err = run("matmul", p("xfq.st") + ":x", p("wnq.st") + ":L.weight", "-o", p("mn.st"), "--backend", "cpu")
    check(rc == 0 and "B '" in err and "2048 NaN values" in err and "outputs are NaN" in err,
          "matmul names the NaN operand: " + err)
    rc, _, err = run("matmul", p("xfq.st") + ":x", p("wnq.st") + ":L.weight", "-o", p("never.st"),
                     "--backend", "cpu", "--strict")
    check(rc == 1 and not os.path.exists(p("never.st")), "matmul --strict refuses: " + err)
    # a NaN in x with a static scale: only its row's outputs
    t, meta = read_st(p("q.st"))
    t["blocks.0.attn.qkv.input_scale"] = ("F32", [], struct.pack("<f", 0.02))
    write_st(p("qs.st"), [(k,) + v for k, v in t.items()], meta)
    xv = [RND.gauss(0, 1) for _ in range(4 * 256)]
    xv[2 * 256 + 9] = float("nan")
    write_st(p("xn.st"), [("x", "BF16", [4, 256], bf16(xv))])
    rc, _, err = run("linear", p("qs.st") + ":blocks.0.attn.qkv", p("xn.st") + ":x", "-o", p("ys.st"),
                     "--backend", "cpu")
    check(rc == 0 and "'x' holds 1 NaN value (at row 2, col 9)" in err and "768 of the 4 x 768 outputs" in err
          and "at row 2, col 0" in err, "a static scale confines the NaN to its row: " + err)


def per_tensor_scales(p):
    """One rule: finite and > 0, subnormals included."""
    rc, _, err = run("quantize", p("ex.st"), p("sub.st"), "--per-tensor-scale", "1e-45")
    check(rc == 0 and os.path.exists(p("sub.st")), "--per-tensor-scale 1e-45 (subnormal) is taken: " + err)
    for bad in ("0", "-0", "-1", "nan", "inf", "1e-50", "1e39"):
        rc, _, err = run("quantize", p("ex.st"), p("never.st"), "--per-tensor-scale", bad)
        check(rc == 1 and "finite" in err and not os.path.exists(p("never.st")),
              f"--per-tensor-scale {bad} refused: {err}")
    rc, _, err = run("quantize", p("ex.st"), p("never.st"), "--per-tensor-scale", "-1")
    check("--per-tensor-scale = -1 is not a per-tensor scale" in err, "the library's words: " + err)
    t, meta = read_st(p("q.st"))
    t["blocks.0.attn.qkv.input_scale"] = ("F32", [], struct.pack("<f", -1.0))
    write_st(p("qneg.st"), [(k,) + v for k, v in t.items()], meta)
    rc, _, err = run("linear", p("qneg.st") + ":blocks.0.attn.qkv", p("ex.st") + ":x", "-o", p("never.st"),
                     "--backend", "cpu")
    check(rc == 1 and "input_scale = -1 is not a per-tensor scale" in err and "dynamic" in err,
          "a checkpoint's static scale of -1 is refused: " + err)


def words(p):
    """The messages say what is wrong and what to do."""
    write_st(p("f64.st"), [("w.weight", "F64", [4, 16], b"\0" * 512)])
    rc, _, err = run("quantize", p("f64.st"), p("never.st"))
    check(rc == 1 and "'w.weight' is F64" in err and "BF16, F16 and F32" in err, "an F64 weight: " + err)
    rc, _, err = run("linear", p("ex.st") + ":blocks.0.attn.qkv", p("ex.st") + ":x", "-o", p("never.st"))
    check(rc == 1 and "is BF16, not NVFP4: quantize it first (nvfp4 quantize" in err,
          "an unquantized layer says to quantize it: " + err)
    rc, _, err = run("matmul", p("ex.st") + ":x", p("q.st") + ":blocks.0.attn.qkv.weight", "-o", p("never.st"))
    check(rc == 1 and "quantize it first" in err, "an unquantized matmul operand: " + err)
    rc, _, err = run("check", "--backend", "cpu", "--checkpoint", p("ex.st"), "--layers", "blocks.0.attn.qkv",
                     "--rows", "1", "--json", "-")
    check(rc == 2 and "quantize it first" in err, "check --checkpoint of an unquantized file: " + err)
    rc, out, _ = run("check", "--backend", "cpu", "--rows", "1", "--oracle-rows", "1", "--json", "-",
                     "--checkpoint", p("q.st"), "--layers", "blocks.0.mlp.fc2")
    check("1 layer of " in out and "1 synthetic activation row\n" in out
          and "activation rows" not in out, "one row is a row, one layer a layer:\n" + out[:400])
    rc, _, err = run("bench")
    check(rc == 1 and "no CUDA device" in err and "insufficient" not in err, "bench without a GPU: " + err)
    # inspect of an all-NaN layer, explain of a NaN candidate: no inf..0, -nan or 0
    rc, out, _ = run("inspect", p("wnq.st"))
    check(rc == 0 and "inf.." not in out and "nan" not in out.replace(p("wnq.st"), "").replace("NaN", "")
          and "per-tensor scale NaN" in out and "2048 values NaN or Inf" in out,
          "inspect of an all-NaN layer:\n" + out)
    codes = bytes(RND.randrange(256) for _ in range(4 * 16))
    scales = bytearray(128 * 4)
    scales[0] = 0x7F  # row 0, block 0: NaN
    scales[16] = 0x38
    write_st(p("an.st"), nvfp4_layer("a", codes, scales, 1.0, 4, 32))
    write_st(p("bn.st"), nvfp4_layer("b", bytes(RND.randrange(256) for _ in range(32)), bytes([0x38] * 512), 1.0, 2, 32))
    write_st(p("rn.st"), [("ref", "F32", [4, 2], f32([0.0] * 8))])
    rc, out, err = run("explain", p("an.st") + ":a", p("bn.st") + ":b", p("rn.st") + ":ref")
    check(rc == 0 and "candidate NaN (0x" in out and "candidate 0 (" not in out,
          "explain shows a NaN candidate as NaN:\n" + out + err)


if __name__ == "__main__":
    sys.exit(run_cases("test_inputs.py", cases, "nvfp4-inputs-"))
