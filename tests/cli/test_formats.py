#!/usr/bin/env python3
"""CLI tests of the checkpoint formats (standard library only): `nvfp4 inspect`
names each golden checkpoint's format and conventions; `nvfp4 convert` refuses
what the target cannot hold, writes nothing then, and otherwise gives the tools'
own bytes (compressed-tensors' converter, llama.cpp's GGUF repack) and exact
round trips; `quantize --variant modelopt|compressed-tensors` gives the tools'
bytes; linear, matmul and check load layers of any format.
Prints one closing line (clitest.summary)."""
import os
import shutil
import struct
import subprocess
import sys

from clitest import NVFP4, check, read_st, run, run_cases, write_st

G = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden")
MO = os.path.join(G, "modelopt", "llama-nvfp4")
CT = os.path.join(G, "compressed-tensors", "llama-nvfp4")
CT_CONV = os.path.join(G, "compressed-tensors", "llama-from-modelopt")
GG = os.path.join(G, "gguf", "llama-nvfp4.gguf")


def tensors(path):
    """{name: bytes} of a safetensors file or directory."""
    files = [path] if path.endswith(".safetensors") else \
        [os.path.join(path, f) for f in sorted(os.listdir(path)) if f.endswith(".safetensors")]
    out = {}
    for f in files:
        out.update({k: v[2] for k, v in read_st(f)[0].items()})
    return out


def gguf_tensors(path):
    """{name: (type, ne, bytes)} of a GGUF file, parsed here (version 3, no arrays)."""
    b = open(path, "rb").read()
    pos = 4
    ver, n_t, n_kv = struct.unpack_from("<IQQ", b, pos)
    pos += 20

    def string(pos):
        (n,) = struct.unpack_from("<Q", b, pos)
        return b[pos + 8: pos + 8 + n].decode(), pos + 8 + n
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    for _ in range(n_kv):
        _, pos = string(pos)
        (t,) = struct.unpack_from("<I", b, pos)
        pos += 4
        if t == 8:
            _, pos = string(pos)
        else:
            pos += sizes[t]
    infos = []
    for _ in range(n_t):
        name, pos = string(pos)
        (nd,) = struct.unpack_from("<I", b, pos)
        ne = struct.unpack_from("<%dQ" % nd, b, pos + 4)
        t, off = struct.unpack_from("<IQ", b, pos + 4 + 8 * nd)
        pos += 4 + 8 * nd + 12
        infos.append((name, t, ne, off))
    base = (pos + 31) // 32 * 32
    out, offs = {}, sorted(off for *_, off in infos) + [len(b) - base]
    for name, t, ne, off in infos:
        end = min(o for o in offs if o > off)
        out[name] = (t, ne, b[base + off: base + end])  # with the padding to the next tensor
    return out


def cases(tmp):
    p = lambda name: os.path.join(tmp, name)  # noqa: E731
    rc, out, _ = run("convert", "--help")
    check(rc == 0 and "usage: nvfp4 convert" in out and "--allow-rescale" in out, "convert --help")

    # inspect names the format and its conventions
    for path, fmt, conv in ((MO, "modelopt", "lo-first"), (CT, "compressed-tensors", "divides"),
                            (GG, "gguf", "UE4M3"), (CT_CONV, "compressed-tensors", "weight_packed")):
        rc, out, err = run("inspect", path)
        check(rc == 0 and out.splitlines()[0].count("format " + fmt) == 1 and conv in out
              and "NVFP4 tensors:" in out and "model.layers.0.self_attn.q_proj.weight: 64 x 64" in out,
              f"inspect {path}: {err}{out[:300]}")

    # a per-tensor scale whose direction flips: refused, nothing written
    rc, _, err = run("convert", MO, p("ct"), "--to", "compressed-tensors")
    check(rc == 1 and err.count("\n") == 1 and "--allow-rescale" in err and not os.path.exists(p("ct")),
          "convert refuses an inexact reciprocal: " + err)
    rc, _, err = run("convert", MO, p("ct"), "--to", "compressed-tensors", "--allow-rescale")
    got, want = tensors(p("ct")), tensors(CT_CONV)
    check(rc == 0 and "note:" in err and got == want,
          "modelopt -> compressed-tensors equals compressed-tensors' converter: " + err[-300:])
    check(os.path.exists(p("ct/model.safetensors.index.json")) and os.path.exists(p("ct/config.json")),
          "sharded output: index and config")
    rc, _, err = run("convert", p("ct"), p("mo"), "--to", "modelopt")
    check(rc == 0 and "note:" not in err and tensors(p("mo")) == tensors(MO), "and back, exactly: " + err)
    check(os.path.exists(p("mo/hf_quant_config.json")), "modelopt output has hf_quant_config.json")

    # GGUF: llama.cpp's repack, and back
    rc, _, err = run("convert", MO, p("m.gguf"), "--to", "gguf")
    a, b = gguf_tensors(p("m.gguf")), gguf_tensors(GG)
    check(rc == 0 and a == b, "modelopt -> gguf equals llama.cpp's repack: " + err)
    rc, _, err = run("convert", p("m.gguf"), p("back.safetensors"), "--to", "modelopt")
    check(rc == 0 and tensors(p("back.safetensors")) == tensors(MO), "gguf -> modelopt gives back every byte: " + err)
    rc, out, _ = run("inspect", p("back.safetensors"))
    check(rc == 0 and "format modelopt" in out.splitlines()[0], "a converted single file is detected")

    # the output is never an input without --force; bad arguments answer in one line
    rc, _, err = run("convert", p("back.safetensors"), p("back.safetensors"), "--to", "comfyui")
    check(rc == 1 and "--force" in err, "convert refuses to overwrite its input: " + err)
    # ... nor one of a directory checkpoint's files, nor the input file as a
    # directory target's model.safetensors
    shutil.copytree(MO, p("mo2"))
    before = tensors(p("mo2"))
    shard = os.path.join(p("mo2"), "model-00001-of-00002.safetensors")
    for out in (p("mo2"), shard, os.path.join(p("mo2"), "..", "mo2", "config.json")):
        rc, _, err = run("convert", p("mo2"), out, "--to", "comfyui")
        check(rc == 1 and "is the input" in err and "--force" in err and tensors(p("mo2")) == before,
              f"convert {p('mo2')} {out}: refused, nothing replaced: {err}")
    os.makedirs(p("single"))
    shutil.copy(p("back.safetensors"), os.path.join(p("single"), "model.safetensors"))
    rc, _, err = run("convert", os.path.join(p("single"), "model.safetensors"), p("single"), "--to", "comfyui")
    check(rc == 1 and "is the input" in err and tensors(os.path.join(p("single"), "model.safetensors"))
          == tensors(MO), "convert FILE DIR where DIR/model.safetensors is FILE: refused: " + err)
    rc, _, err = run("convert", p("back.safetensors"), p("back.safetensors"), "--to", "modelopt", "--force")
    check(rc == 0 and tensors(p("back.safetensors")) == tensors(MO),
          "convert onto its input with --force: written whole, the same bytes: " + err)

    # a weight whose rows nvfp4 quantize padded keeps its own rows through a
    # conversion (the rows record travels in the metadata)
    w = struct.pack("<85e", *[((i * 29) % 23 - 11) / 16 for i in range(85)])
    write_st(p("w5.st"), [("lin.weight", "F16", [5, 17], w)])
    rc, _, err = run("quantize", p("w5.st"), p("q5.st"))
    check(rc == 0, "quantize a 5 x 17 weight: " + err)
    rc, _, err = run("convert", p("q5.st"), p("m5.safetensors"), "--to", "modelopt")
    check(rc == 0 and read_st(p("m5.safetensors"))[1].get("nvfp4.rows.lin.weight") == "5",
          "convert carries the rows record: " + err)
    rc, out, err = run("inspect", p("m5.safetensors"))
    check(rc == 0 and "format modelopt" in out.splitlines()[0]
          and "lin.weight: 5 x 32 (stored as 16 rows" in out, "inspect a converted padded weight:\n" + out + err)
    x17 = struct.pack("<51e", *[((i * 13) % 9 - 4) / 4 for i in range(51)])
    write_st(p("x17.st"), [("x", "F16", [3, 17], x17)])
    ys = []
    for wfile in (p("q5.st"), p("m5.safetensors")):
        rc, _, err = run("linear", wfile + ":lin", p("x17.st") + ":x", "-o", p("y5.st"), "--backend", "cpu")
        y = read_st(p("y5.st"))[0] if rc == 0 else {}
        check(rc == 0 and y.get("out", (0, [0]))[1] == [3, 5], f"linear on {wfile}: 3 x 5 out: {err}")
        ys.append(y.get("out"))
    check(ys[0] is not None and ys[0] == ys[1], "ComfyUI and its ModelOpt conversion: the same 3 x 5 bits")
    t, meta = read_st(p("m5.safetensors"))
    meta["nvfp4.rows.lin.weight"] = "17"  # more rows than stored: no padding made that
    write_st(p("bad5.safetensors"), [(k, v[0], v[1], v[2]) for k, v in t.items()], meta)
    rc, out, _ = run("inspect", p("bad5.safetensors"))
    check(rc == 0 and "lin.weight: NOT a valid NVFP4 tensor" in out and "nvfp4.rows.lin.weight" in out,
          "inspect: a rows record padding cannot explain:\n" + out)
    rc, _, err = run("linear", p("bad5.safetensors") + ":lin", p("x17.st") + ":x", "-o", p("never.st"),
                     "--backend", "cpu")
    check(rc == 1 and "not a row count" in err and not os.path.exists(p("never.st")),
          "linear refuses a bad rows record: " + err)

    # quantize --variant modelopt: NaN reported as for ComfyUI's, --strict refuses
    nan = bytearray(w)
    nan[2 * 7:2 * 8] = struct.pack("<e", float("nan"))
    write_st(p("wnan.st"), [("lin.weight", "F16", [5, 17], bytes(nan))])
    rc, _, err = run("quantize", p("wnan.st"), p("qnan.st"), "--variant", "modelopt")
    check(rc == 0 and "holds 1 NaN value (at row 0, col 7)" in err, "quantize --variant modelopt tells the NaN: " + err)
    rc, _, err = run("quantize", p("wnan.st"), p("never.st"), "--variant", "modelopt", "--strict")
    check(rc == 1 and "--strict" in err and not os.path.exists(p("never.st")),
          "quantize --variant modelopt --strict refuses it: " + err)
    write_st(p("wzero.st"), [("lin.weight", "F16", [5, 17], bytes(2 * 85))])
    rc, _, err = run("quantize", p("wzero.st"), p("qzero.st"), "--variant", "modelopt")
    check(rc == 0 and "is all zeros" in err and "ModelOpt's arithmetic (0/0)" in err and "ComfyUI" not in err,
          "an all-zero weight under ModelOpt's quantizer is told as ModelOpt's: " + err)
    for args, what in ((["convert", MO, p("x")], "needs --to"),
                       (["convert", MO, p("x"), "--to", "onnx"], "not a format"),
                       (["convert", MO, p("x.gguf"), "--to", "modelopt"], "gguf"),
                       (["convert", p("absent"), p("x.gguf"), "--to", "gguf"], "absent")):
        rc, _, err = run(*args)
        check(rc == 1 and err.count("\n") == 1 and what in err, f"{args}: {err}")

    # quantize --variant: the tools' bytes
    for tool, case, codes, s2 in (("modelopt", "gauss", "expect.weight", "expect.weight_scale_2"),
                                  ("modelopt", "cols-100-padded", "expect.weight", "expect.weight_scale_2"),
                                  ("compressed-tensors", "huge-tiny-rows", "expect.weight_packed",
                                   "expect.weight_global_scale")):
        src = os.path.join(G, tool, "quant", case + ".safetensors")
        rc, _, err = run("quantize", src, p("q.st"), "--only", "x", "--variant", tool)
        q, _ = read_st(p("q.st")) if rc == 0 else ({}, {})
        g, _ = read_st(src)
        xc = "x_packed" if tool == "compressed-tensors" else "x"
        ts = "x_global_scale" if tool == "compressed-tensors" else "x_scale_2"
        check(rc == 0 and q[xc][2] == g[codes][2] and q["x_scale"][2] == g["expect.weight_scale"][2]
              and q["x_scale"][0] == "F8_E4M3" and q[ts][2] == g[s2][2],
              f"quantize --variant {tool} {case}: {err}")

    # streamed: a 48 MiB checkpoint converts in a fraction of that (the peak of a
    # child process that converts and nothing else)
    n, k, layers = 2048, 2048, 24
    blob = bytes((i * 131 + 7) % 256 for i in range(n * k // 2))
    sc = bytes(0x30 + i % 16 for i in range(n * k // 16))
    write_st(p("big.safetensors"), [t for i in range(layers) for t in (
        (f"l{i}.weight", "U8", [n, k // 2], blob), (f"l{i}.weight_scale", "F8_E4M3", [n, k // 16], sc),
        (f"l{i}.weight_scale_2", "F32", [], struct.pack("<f", 0.5)))])
    size = os.path.getsize(p("big.safetensors"))
    probe = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True); "
             "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    sanitized = b"__asan_init" in open(NVFP4, "rb").read()  # shadow memory: RSS says nothing
    for to, out in (("gguf", "big.gguf"), ("compressed-tensors", "bigct"), ("comfyui", "bigc.safetensors")):
        r = subprocess.run([sys.executable, "-c", probe, NVFP4, "convert", p("big.safetensors"), p(out),
                            "--to", to, "--allow-rescale", "-q"], capture_output=True, text=True)
        rc, peak_kib = (int(v) for v in r.stdout.split())
        check(rc == 0 and (sanitized or peak_kib * 1024 < size / 2),
              f"convert to {to}: peak {peak_kib} KiB for a {size >> 10} KiB checkpoint")

    # linear, matmul and check take any format
    x = struct.pack("<64e", *[((i * 37) % 17 - 8) / 8 for i in range(64)])
    write_st(p("x.st"), [("x", "F16", [1, 64], x)])
    outs = []
    for w in (MO, GG):
        rc, _, err = run("linear", w + ":model.layers.0.self_attn.q_proj", p("x.st") + ":x",
                         "-o", p("y.st"), "--backend", "cpu", "--force")
        outs.append(read_st(p("y.st"))[0]["out"][2] if rc == 0 else None)
        check(rc == 0, f"linear from {w}: {err}")
    check(outs[0] is not None and outs[0] == outs[1], "linear: ModelOpt and GGUF weights give the same bits")
    rc, _, err = run("matmul", GG + ":model.layers.0.mlp.up_proj.weight", MO + ":model.layers.0.mlp.up_proj.weight",
                     "-o", p("mm.st"), "--backend", "cpu")
    check(rc == 0, "matmul of GGUF and ModelOpt operands: " + err)
    rc, _, err = run("check", "--checkpoint", CT, "--layers", "model.layers.0.mlp.down_proj", "--rows", "16",
                     "--json", p("check.json"))
    check(rc == 0, "check --checkpoint on compressed-tensors: " + err[-300:])


if __name__ == "__main__":
    sys.exit(run_cases("test_formats.py", cases, "nvfp4-formats-"))
