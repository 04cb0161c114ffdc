#!/usr/bin/env python3
"""CLI tests of the checkpoint formats (standard library only): `nvfp4 inspect`
names each golden checkpoint's format and conventions; `nvfp4 convert` refuses
what the target cannot hold, writes nothing then, and otherwise gives the tools'
own bytes (compressed-tensors' converter, llama.cpp's GGUF repack) and exact
round trips; `quantize --variant modelopt|compressed-tensors` gives the tools'
bytes; linear, matmul and check load layers of any format.
Prints one closing line: "cli: N passed, N failed (formats)"."""
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_cli as T  # noqa: E402  (its runner, counters, safetensors reader and writer)
from test_cli import NVFP4, check, read_st, run, write_st  # noqa: E402

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


def main():
    tmp = tempfile.mkdtemp(prefix="nvfp4-formats-")
    try:
        cases(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"cli: {T.passed} passed, {T.failed} failed (formats)")
    return 1 if T.failed else 0


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
    sys.exit(main())
