#!/usr/bin/env python3
"""CLI tests for nvfp4 (standard library only).

Runs the built command the way a user does and checks exit statuses, the
files it writes (read back with a small independent safetensors parser), the
golden ComfyUI quantizer cases through `nvfp4 quantize --only`, error messages
for malformed files, and the `check` report's JSON keys.
Prints one closing line (clitest.summary)."""
import json
import os
import re
import shutil
import struct
import subprocess
import sys

from clitest import HERE, NVFP4, bf16, check, read_st, run, run_cases, skip, write_st

GOLDEN = os.environ.get("NVFP4_GOLDEN", os.path.join(HERE, "..", "golden", "comfy-quantize"))


def cases(tmp):
    p = lambda name: os.path.join(tmp, name)

    # --help everywhere, exit codes
    rc, out, _ = run("--help")
    check(rc == 0 and "commands:" in out, "nvfp4 --help")
    for cmd in ["check", "bench", "quantize", "dequantize", "inspect", "matmul", "linear", "example"]:
        rc, out, err = run(cmd, "--help")
        check(rc == 0 and "usage: nvfp4 " + cmd in out, f"nvfp4 {cmd} --help")
    rc, _, err = run("frobnicate")
    check(rc == 2 and "unknown command" in err, "unknown command exits 2")
    rc, _, err = run("quantize", "--bogus")
    check(rc == 1 and err.count("\n") == 1 and "unknown option" in err, "unknown option: one line, exit 1")

    # example -> quantize -> inspect -> dequantize -> linear == matmul
    rc, _, err = run("example", p("ex.st"))
    check(rc == 0, "example: " + err)
    rc, _, err = run("quantize", p("ex.st"), p("q.st"))
    check(rc == 0, "quantize example: " + err)
    q, meta = read_st(p("q.st"))
    check(meta.get("source") == "nvfp4 example", "metadata copied")
    for layer, (n, k) in {"blocks.0.attn.qkv": (768, 256), "blocks.0.mlp.fc2": (256, 1024)}.items():
        w = q.get(layer + ".weight")
        check(w is not None and w[0] == "U8" and w[1] == [n, k // 2], f"{layer}.weight U8 [{n}, {k//2}]")
        s = q.get(layer + ".weight_scale")
        check(s is not None and s[0] == "F8_E4M3" and s[1] == [-(-n // 128) * 128, -(-(k // 16) // 4) * 4],
              f"{layer}.weight_scale tiled shape")
        s2 = q.get(layer + ".weight_scale_2")
        check(s2 is not None and s2[0] == "F32" and s2[1] == [], f"{layer}.weight_scale_2 F32 scalar")
        mk = q.get(layer + ".comfy_quant")
        check(mk is not None and mk[0] == "U8" and json.loads(mk[2]) == {"format": "nvfp4"},
              f"{layer}.comfy_quant marker")
    check(q["x"][0] == "BF16" and q["blocks.0.attn.qkv.bias"][0] == "BF16", "other tensors copied")
    rc, out, err = run("inspect", p("q.st"))
    check(rc == 0 and "NVFP4 tensors:" in out and "blocks.0.mlp.fc2.weight: 256 x 1024" in out,
          "inspect recognises NVFP4 layers")
    rc, _, err = run("dequantize", p("q.st"), p("dq.st"))
    dq, _ = read_st(p("dq.st")) if rc == 0 else ({}, {})
    check(rc == 0 and dq.get("blocks.0.attn.qkv.weight", ("",))[0] == "BF16"
          and "blocks.0.attn.qkv.weight_scale" not in dq and "blocks.0.attn.qkv.comfy_quant" not in dq,
          "dequantize: " + err)

    # linear (CPU: quantize x, GEMM) == quantize x by hand + matmul, bit for bit
    rc, _, err = run("linear", p("q.st") + ":blocks.0.attn.qkv", p("ex.st") + ":x", "-o", p("lin.st"),
                     "--backend", "cpu", "--input-scale", "dynamic", "--dump-quantized", p("xq.st"))
    check(rc == 0, "linear: " + err)
    rc, _, err = run("matmul", p("xq.st") + ":x", p("q.st") + ":blocks.0.attn.qkv.weight", "-o", p("mm.st"),
                     "--backend", "cpu", "--bias", p("ex.st") + ":blocks.0.attn.qkv.bias", "--compare-exact")
    check(rc == 0, "matmul: " + err)
    if rc == 0:
        lin, _ = read_st(p("lin.st"))
        mm, _ = read_st(p("mm.st"))
        check(lin["raw"] == mm["raw"] and lin["out"] == mm["out"], "linear == quantize + matmul (bits)")
        check(mm["raw"][1] == [8, 768] and mm["out"][0] == "BF16", "matmul output shapes")

    # golden ComfyUI cases through the command line, scale computed
    cases = [c for c in ("gauss", "outliers", "ties") if os.path.exists(os.path.join(GOLDEN, c + ".x.bf16"))]
    check(len(cases) == 3, "golden cases present in " + GOLDEN)
    for c in cases:
        x = open(os.path.join(GOLDEN, c + ".x.bf16"), "rb").read()
        write_st(p("g.st"), [("layer.weight", "BF16", [256, 1024], x), ("other", "F32", [2], b"\0" * 8)])
        for variant_args in ([], ["--variant", "eager"]):
            rc, _, err = run("quantize", p("g.st"), p("gq.st"), "--only", "layer.weight", *variant_args)
            check(rc == 0, f"quantize golden {c}: {err}")
            if rc:
                continue
            gq, _ = read_st(p("gq.st"))
            check(gq["layer.weight"][2] == open(os.path.join(GOLDEN, c + ".eager.q.u8"), "rb").read(),
                  f"golden {c}: codes")
            check(gq["layer.weight_scale"][2] == open(os.path.join(GOLDEN, c + ".eager.s.u8"), "rb").read(),
                  f"golden {c}: scales")
            check(gq["layer.weight_scale_2"][2] == open(os.path.join(GOLDEN, c + ".gs.f32"), "rb").read(),
                  f"golden {c}: per-tensor scale")
            check(gq["other"][2] == b"\0" * 8, f"golden {c}: untouched tensor copied")

    # comfy-kitchen's own quantizations of many distributions and shapes
    # (tests/golden/comfy-kitchen, tools/gen_comfy_golden.py), as the judge runs them
    ck_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "comfy-kitchen")
    ck = sorted(f for f in os.listdir(ck_dir) if f.endswith(".safetensors")) if os.path.isdir(ck_dir) else []
    check(len(ck) >= 38, f"comfy-kitchen golden files in {ck_dir}")
    ck_bad = []
    for f in ck:
        rc, _, err = run("quantize", os.path.join(ck_dir, f), p("ck.st"), "--only", "x")
        if rc:
            ck_bad.append(f"{f}: {err.strip()}")
            continue
        want, _ = read_st(os.path.join(ck_dir, f))
        got, _ = read_st(p("ck.st"))
        for g, w in (("x", "expect.codes"), ("x_scale", "expect.scales"), ("x_scale_2", "expect.scale_2")):
            if got[g][2] != want[w][2] or got[g][1] != want[w][1]:
                ck_bad.append(f"{f}: {g} differs from {w}")
    check(not ck_bad, f"nvfp4 quantize == comfy-kitchen on {len(ck)} golden files: " + "; ".join(ck_bad[:3]))

    # comfy-kitchen's COMPILED CUDA kernel on the H200 (tests/golden/comfy-kitchen-cuda,
    # tools/comfy_cuda_golden.py): --variant cuda gives its bytes, --variant eager the eager
    # quantizer's; the scale is computed ("float") or the one the kernel was given
    cu_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "comfy-kitchen-cuda")
    cu = sorted(f for f in os.listdir(cu_dir) if f.endswith(".safetensors")) if os.path.isdir(cu_dir) else []
    check(len(cu) >= 47, f"comfy-kitchen-cuda golden files in {cu_dir}")
    cu_bad = []
    for f in cu:
        want, meta = read_st(os.path.join(cu_dir, f))
        rows, cols = want["x"][1]
        pts = struct.unpack("<f", want["expect.scale_2"][2])[0]
        scale_args = [] if meta.get("scale_mode") == "float" else ["--per-tensor-scale", pts.hex()]
        # blocks only where the kernel's last CTA wrote into the tile padding
        keep = None
        if meta.get("pad_nonzero") == "1":
            pr, pc = -(-rows // 16) * 16, -(-cols // 16) * 16
            tiles_per_row = -(-(pc // 16) // 4)
            keep = {(r // 128 * tiles_per_row + cb // 4) * 512 + (r % 32) * 16 + (r % 128) // 32 * 4 + cb % 4
                    for r in range(pr) for cb in range(pc // 16)}
        for variant, pre in (("cuda", "expect"), ("eager", "eager")):
            rc, _, err = run("quantize", os.path.join(cu_dir, f), p("cu.st"), "--only", "x",
                             "--variant", variant, *scale_args)
            if rc:
                cu_bad.append(f"{f} {variant}: {err.strip()}")
                continue
            got, _ = read_st(p("cu.st"))
            gs, ws = got["x_scale"][2], want[pre + ".scales"][2]
            if keep is not None and variant == "cuda" and len(gs) == len(ws):
                gs = bytes(b for i, b in enumerate(gs) if i in keep)
                ws = bytes(b for i, b in enumerate(ws) if i in keep)
            for what, g, w in (("codes", got["x"][2], want[pre + ".codes"][2]), ("scales", gs, ws),
                               ("per-tensor scale", got["x_scale_2"][2], want["expect.scale_2"][2])):
                if g != w:
                    i = next((k for k in range(min(len(g), len(w))) if g[k] != w[k]), min(len(g), len(w)))
                    cu_bad.append(f"{f} {variant}: {what} differ first at byte {i}")
    check(not cu_bad, f"nvfp4 quantize --variant cuda|eager == comfy-kitchen compiled/eager on {len(cu)} "
          "golden files: " + "; ".join(cu_bad[:3]))

    # malformed inputs: an error line and exit 1, never a signal
    good = open(p("ex.st"), "rb").read()
    bad = {
        "empty": b"",
        "short": b"\x08\0\0",
        "hugeheader": struct.pack("<Q", 1 << 60) + b"{}",
        "notjson": struct.pack("<Q", 4) + b"{abc",
        "truncated": good[: len(good) // 2],
        "baddtype": None,
    }
    h = json.dumps({"t": {"dtype": "Q7", "shape": [1], "data_offsets": [0, 1]}}).encode()
    bad["baddtype"] = struct.pack("<Q", len(h)) + h + b"\0"
    for name, data in bad.items():
        with open(p(name + ".st"), "wb") as f:
            f.write(data)
        for cmd in (["inspect", p(name + ".st")], ["quantize", p(name + ".st"), p("never.st")]):
            rc, _, err = run(*cmd)
            check(rc == 1 and err.startswith("nvfp4 ") and err.count("\n") == 1,
                  f"malformed {name} via {cmd[0]}: rc={rc} err={err!r}")
    check(not os.path.exists(p("never.st")), "no output file after a failed quantize")
    rc, _, err = run("quantize", p("ex.st"), os.path.join(tmp, "nodir", "q.st"))
    check(rc == 1 and not os.path.exists(os.path.join(tmp, "nodir")), "write into a missing directory fails")
    rc, _, err = run("quantize", p("ex.st"), p("q2.st"), "--only", "nope")
    check(rc == 1 and "nope" in err, "--only names a missing tensor")

    # check: a tiny run on the CPU; the JSON has the keys GB10 check reports use
    rc, out, err = run("check", "--backend", "cpu", "--rows", "2", "--oracle-rows", "1",
                       "--json", p("report.json"))
    check(rc == 0, "check --rows 2: rc=%d %s" % (rc, err))
    try:
        rep = json.load(open(p("report.json")))
    except Exception as e:  # noqa: BLE001
        rep = {}
        check(False, f"report.json parses: {e}")
    for key in ("device", "compute_capability", "rows", "kernel", "results", "findings", "status"):
        check(key in rep, f"report has {key}")
    res = rep.get("results", [])
    check([r.get("linear") for r in res] == ["attn_qkv_proj", "attn_out_proj", "mlp_fc1", "mlp_fc2"],
          "report lists the 4 built-in layers")
    for r in res:
        for key in ("mnk", "raw_blockscaled_equal", "raw_max_abs", "fused_alpha_equal", "fused_alpha_max_abs"):
            check(key in r, f"{r.get('linear')} has {key}")
        check(r.get("raw_blockscaled_equal") is True and r.get("fused_alpha_equal") is True,
              f"{r.get('linear')} bit-exact")
    check_data_cases(out, rep)

    # --streaming-a: BF16 activations through the backend's linear, compared with
    # quantize-then-GEMM and the C quantizer's bytes
    rc, out, err = run("check", "--backend", "cpu", "--rows", "2", "--oracle-rows", "1", "--streaming-a",
                       "--json", p("stream.json"))
    check(rc == 0 and "linear path" in out, "check --streaming-a: rc=%d %s" % (rc, err))
    try:
        rep = json.load(open(p("stream.json")))
    except Exception as e:  # noqa: BLE001
        rep = {}
        check(False, f"stream.json parses: {e}")
    check(rep.get("streaming_a") is True, "report says streaming_a")
    for r in rep.get("results", []):
        check(r.get("streaming_quantized_equal") is True and r.get("raw_blockscaled_equal") is True
              and r.get("fused_alpha_equal") is True and r.get("streaming_outputs_equal") is True
              and r.get("streaming_rows_compared_with_quantize_then_gemm") == 2,
              f"{r.get('linear')} streaming bit-exact, every row compared with quantize-then-GEMM")
    streaming_words_cases(out, rep)

    # --k-slices: the sliced contract in the backend and the oracles
    rc, out, err = run("check", "--backend", "cpu", "--rows", "2", "--oracle-rows", "1", "--k-slices", "3",
                       "--checkpoint", p("q.st"), "--layers", "blocks.0.attn.qkv", "--json", p("ks.json"))
    try:
        rep = json.load(open(p("ks.json")))
    except Exception as e:  # noqa: BLE001
        rep = {}
        check(False, f"ks.json parses: {e}")
    check(rc == 0 and rep.get("k_slices") == 3 and rep.get("status") and
          all(r.get("raw_blockscaled_equal") is True for r in rep.get("results", [])) and rep.get("results"),
          "check --k-slices 3: rc=%d %s" % (rc, err))
    for bad in ("0", "4097", "x"):
        rc, out, err = run("check", "--backend", "cpu", "--rows", "2", "--k-slices", bad, "--json", "-")
        check(rc == 2 and "--k-slices" in err, f"check --k-slices {bad} refused")

    check_gate_cases(tmp, p)
    robustness_cases(tmp, p)


# Words a report must not use: an outsider cannot know what they refer to.
PRIVATE_WORDS = ("P0", "the seed", "seed's", "seed team", "stock check", "alpha", "Alpha")
TESTING_CLI = os.environ.get("NVFP4_TESTING_CLI") or os.path.join(os.path.dirname(NVFP4), "tests", "nvfp4-testing")
LAYER_ROW = re.compile(r"^(\S+)\s+\d+x\d+x\d+\s+(EXACT|DIFF)\s+(EXACT|DIFF)\s+\S+\s+\S+\s+([\d.]+)%\s+([\d.]+)%",
                       re.M)


def private_words(text):
    return [w for w in PRIVATE_WORDS if w in text]


def check_data_cases(out, rep):
    """The built-in data makes the model, the exact sum and an FMA loop disagree, and the report says so."""
    for r in rep.get("results", []):
        fma, ex = r.get("fp32_fma_loop_mismatch_fraction", 0), r.get("exact_sum_mismatch_fraction", 0)
        check(fma >= 0.01 and ex >= 0.01 and r.get("outputs_compared_with_exact_sum_and_fma_loop") == 1024,
              f"{r.get('linear')}: the FMA loop ({fma}) and the exact sum ({ex}) differ from sm90 on >= 1%")
    rows = {m.group(1): (float(m.group(4)), float(m.group(5))) for m in LAYER_ROW.finditer(out)}
    check(len(rows) == 4 and all(ex >= 1 and fma >= 1 for ex, fma in rows.values())
          and "Over all layers: the exact sum differs on" in out, "the table shows the shares: " + out)
    # words an outsider understands, in the table, the findings and the status
    texts = [out, rep.get("status", "")] + list(rep.get("findings", []))
    check(not any(private_words(t) for t in texts), f"check's report in plain words: {[private_words(t) for t in texts]}")
    check("FP32 accumulators" in out and "BF16 outputs after the per-tensor" in out
          and "transformer decoder block" in out, "check names what it compared: " + out)
    rc, hout, _ = run("check", "--help")
    check(rc == 0 and not private_words(hout) and "Exit status" in hout and "--model" in hout
          and "5376" in hout, "check --help in plain words: " + hout)
    rc, hout, _ = run("--help")
    line = [ln for ln in hout.splitlines() if ln.strip().startswith("check ")]
    check(rc == 0 and len(line) == 1 and not private_words(line[0]), f"nvfp4 --help's check line: {line}")


def streaming_words_cases(out, rep):
    """--streaming-a on the CPU: only the reference model is independent, and the report says so."""
    check(rep.get("every_output_compared") is False and "every output compared" not in out,
          "CPU streaming: not every output was compared with an independent oracle")
    for r in rep.get("results", []):
        check(r.get("streaming_comparison_independent") is False and r.get("rows_compared_with_cpu_oracle") == 0
              and r.get("outputs_compared") == r.get("outputs_compared_with_reference_model") == 1024,
              f"{r.get('linear')}: CPU streaming counts only the reference model's 1 x 1024 outputs: {r}")
    check("Linear path on the CPU" in out and "not that the" in out
          and any("Linear path on the CPU" in f for f in rep.get("findings", [])),
          "CPU streaming says the all-rows comparison is the same code: " + out)


def check_gate_cases(tmp, p):
    """check fails a wrong backend, takes the model, and tells errors from differences."""
    # a substitute backend (test build only) computing the wrong sum must fail
    have = os.access(TESTING_CLI, os.X_OK)
    check(have, f"{TESTING_CLI} built (make test-cli builds it)")
    small = ["check", "--backend", "cpu", "--layers", "attn_out_proj", "--rows", "1", "--oracle-cols", "256"]
    tiny = ["check", "--backend", "cpu", "--checkpoint", p("q.st"), "--layers", "blocks.0.mlp.fc2,blocks.0.attn.qkv",
            "--rows", "4", "--oracle-rows", "all"]

    def run_sub(sub, *args):
        e = dict(os.environ, NVFP4_NO_PROGRESS="1", NVFP4_CHECK_SUBSTITUTE=sub)
        proc = subprocess.run([TESTING_CLI, *args], capture_output=True, text=True, env=e)
        return proc.returncode, proc.stdout, proc.stderr

    if have:
        rc, out, err = run_sub("fma-loop", "check", "--backend", "cpu", "--layers", "attn_out_proj,mlp_fc2",
                               "--rows", "1", "--json", p("fma.json"))
        rep = json.load(open(p("fma.json"))) if os.path.exists(p("fma.json")) else {}
        res = rep.get("results", [])
        check(rc == 1 and "FAILED: 2 of 2 layers are not bit-exact against the sm90 model" in out
              and "FP32 accumulators vs the model:" in out and "the first at (row 0, col " in out
              and rep.get("exit_status") == 1 and rep.get("status", "").startswith("FAILED")
              and "test substitute: fma-loop" in rep.get("kernel", ""),
              f"check fails a plain FP32 FMA loop backend: rc={rc} {out} {err}")
        check(len(res) == 2 and all(r.get("raw_blockscaled_equal") is False and
                                    set(r.get("raw_first_difference", {})) == {"row", "col", "got", "want"}
                                    for r in res), f"the FMA loop's mismatch report: {res}")
        rc, out, err = run_sub("exact", *small, "--json", "-")
        check(rc == 1 and "FAILED" in out, f"check fails a backend computing the exact sum: rc={rc} {out} {err}")
        # every model against every other backend (small layers, every output compared)
        for model in ("sm90", "exact", "sm120"):
            for sub in ("fma-loop", "sm90", "exact", "sm120"):
                rc, out, err = run_sub(sub, *tiny, "--model", model, "--json", "-")
                want = 0 if sub == model else 1
                check(rc == want and ("PASSED" if want == 0 else "FAILED") in out,
                      f"check --model {model} with a {sub} backend: rc {rc}, want {want}: {out} {err}")
    # the shipped command has no such hook
    rc, out, err = run(*small, "--model", "exact", "--json", p("exact.json"),
                       env={"NVFP4_CHECK_SUBSTITUTE": "fma-loop"})
    rep = json.load(open(p("exact.json"))) if rc == 0 else {}
    check(rc == 0 and rep.get("oracle_model") == "exact" and "model:  exact" in out and "substitute" not in out,
          "check --model exact on the shipped command, which ignores the test hook: " + out + err)
    for binary in (NVFP4, os.path.join(os.path.dirname(NVFP4), "libnvfp4.so")):
        if os.path.exists(binary):
            check(b"NVFP4_CHECK_SUBSTITUTE" not in open(binary, "rb").read(), f"no test hook in {binary}")
    rc, out, err = run("check", "--backend", "cuda", "--model", "sm120", "--json", "-")
    check(rc == 2 and "sm90 model only" in err and err.count("\n") == 1, "check --backend cuda --model sm120: " + err)

    # a layer that does not load is an error (exit 2), not a difference
    rc, out, err = run("check", "--backend", "cpu", "--checkpoint", p("q.st"), "--layers", "nope", "--json", "-")
    check(rc == 2 and "no NVFP4 layer 'nope'" in err and "not bit-exact" not in out + err and "FAILED" not in out,
          f"check --layers nope: rc {rc}: {out} {err}")
    # an NVFP4 layer whose block scales have the wrong shape
    write_st(p("bad.st"), [("bad.weight", "U8", [16, 8], bytes(128)),
                           ("bad.weight_scale", "F8_E4M3", [16, 3], bytes(48)),
                           ("bad.weight_scale_2", "F32", [], struct.pack("<f", 1.0))])
    rc, out, err = run("check", "--backend", "cpu", "--checkpoint", p("bad.st"), "--layers", "bad", "--rows", "1",
                       "--json", p("bad.json"))
    rep = json.load(open(p("bad.json"))) if os.path.exists(p("bad.json")) else {}
    check(rc == 2 and "cannot load the layer" in err and "ERROR: 1 of 1 layer could not be checked" in out
          and "not bit-exact" not in out + err and rep.get("exit_status") == 2
          and "error" in rep.get("results", [{}])[0] and rep.get("every_output_compared") is False,
          f"a layer that fails to load: rc {rc}: {out} {err}")
    rc, out, err = run("check", "--backend", "cpu", "--layers", "attn_out_proj,nope", "--json", "-")
    check(rc == 2 and "no built-in layer 'nope'" in err, "check --layers with an unknown built-in name: " + err)

    # progress: a line per stage on stderr, also when it is not a terminal
    e = {k: v for k, v in os.environ.items() if k != "NVFP4_NO_PROGRESS"}
    proc = subprocess.run([NVFP4, *small, "--json", "-"], capture_output=True, text=True, env=e)
    lines = proc.stderr.splitlines()
    check(proc.returncode == 0 and len(lines) >= 3 and all(ln.startswith("nvfp4 check: [1/1] attn_out_proj: ") for ln in lines)
          and any("synthesizing" in ln for ln in lines) and any("reference model" in ln for ln in lines)
          and "\r" not in proc.stderr and "\x1b" not in proc.stderr, "piped check prints a line per stage: " + proc.stderr)


def robustness_cases(tmp, p):
    """A check that cannot pass on nothing, inputs never replaced, clear errors, no signals."""
    # --oracle-rows: no int truncation to 0, no silent default, 'all' compares every output
    for bad in ("4294967296", "4294967295", "0", "-1", "17"):
        rc, out, err = run("check", "--backend", "cpu", "--rows", "16", "--oracle-rows", bad, "--json", "-")
        check(rc == 2 and "--oracle-rows" in err and "PASSED" not in out, f"check --oracle-rows {bad} refused")
    ck = ["check", "--backend", "cpu", "--checkpoint", p("q.st"), "--layers", "blocks.0.attn.qkv", "--rows", "3"]
    rc, out, err = run(*ck, "--oracle-rows", "all", "--json", p("all.json"))
    rep = json.load(open(p("all.json"))) if rc == 0 else {}
    res = rep.get("results", [{}])[0]
    check(rc == 0 and rep.get("every_output_compared") is True and res.get("outputs_compared") == 3 * 768
          and res.get("rows_compared_with_reference_model") == 3 and "sampled" not in out
          and "every output compared" in out, "check --oracle-rows all compares every output: " + err)
    rc, out, err = run(*ck, "--json", p("sampled.json"))
    rep = json.load(open(p("sampled.json"))) if rc == 0 else {}
    check(rc == 0 and rep.get("every_output_compared") is False and "PASSED on sampled outputs" in out
          and "2x768 of 3x768 (reference model)" in out, "a sampled check says so: " + out)
    check("(none)" not in out and " backend " in out and "0 rows all cols" not in out, "check table wording")
    # --layers: a 65th name is checked, not dropped
    rc, out, err = run("check", "--backend", "cpu", "--checkpoint", p("q.st"), "--rows", "1",
                       "--layers", ",".join(["blocks.0.mlp.fc2"] * 65), "--json", p("l65.json"))
    rep = json.load(open(p("l65.json"))) if rc == 0 else {}
    check(rc == 0 and len(rep.get("results", [])) == 65, "check --layers with 65 names checks 65: " + err)
    # --rows beyond the machine's memory: refused at once with the estimate
    rc, out, err = run("check", "--backend", "cpu", "--rows", "1048576", "--json", "-", timeout=30)
    check(rc == 2 and "GiB" in err and "EXACT" not in out, "check --rows 1048576 refused: " + err)
    # --json to an unwritable place: fails first, with the reason
    rc, out, err = run("check", "--backend", "cpu", "--rows", "1", "--json", p("nodir/r.json"), timeout=60)
    check(rc == 2 and "No such file or directory" in err and "EXACT" not in out, "check --json checked first: " + err)

    # non-finite per-tensor scales
    for bad in ("inf", "-inf", "nan", "1e39"):
        rc, _, err = run("quantize", p("ex.st"), p("never.st"), "--per-tensor-scale", bad)
        check(rc == 1 and "finite" in err and not os.path.exists(p("never.st")), f"--per-tensor-scale {bad} refused")

    # linear: K must pad to the weight's (roundup(k, 16) = K); sizes validated
    # before arithmetic; NaN/Inf reported
    import random
    rnd = random.Random(15)
    x241 = [rnd.uniform(-1, 1) for _ in range(4 * 241)]
    write_st(p("x241.st"), [("x", "BF16", [4, 241], bf16(x241))])
    x256 = [v for r in range(4) for v in x241[241 * r:241 * r + 241] + [0.0] * 15]
    write_st(p("x256.st"), [("x", "BF16", [4, 256], bf16(x256))])
    rc, _, err = run("linear", p("q.st") + ":blocks.0.attn.qkv", p("x241.st") + ":x", "-o", p("y241.st"), "--backend", "cpu")
    rc2, _, err2 = run("linear", p("q.st") + ":blocks.0.attn.qkv", p("x256.st") + ":x", "-o", p("y256.st"), "--backend", "cpu")
    check(rc == 0 and rc2 == 0 and read_st(p("y241.st"))[0] == read_st(p("y256.st"))[0],
          "linear takes K = 241 against K = 256 as its zero-padding: " + err + err2)
    for k in (240, 257):
        write_st(p("xk.st"), [("x", "BF16", [4, k], bf16([0.5] * (4 * k)))])
        rc, _, err = run("linear", p("q.st") + ":blocks.0.attn.qkv", p("xk.st") + ":x", "-o", p("never.st"), "--backend", "cpu")
        check(rc == 1 and f"K = {k}" in err and "K = 256" in err and "241..256" in err
              and not os.path.exists(p("never.st")), f"linear refuses K = {k} against K = 256: " + err)
    write_st(p("xhuge.st"), [("x", "BF16", [2 ** 62, 0], b"")])
    rc, _, err = run("linear", p("q.st") + ":blocks.0.attn.qkv", p("xhuge.st") + ":x", "-o", p("never.st"), "--backend", "cpu")
    check(rc == 1 and err.count("\n") == 1, "linear with x [2^62, 0]: a clear error: " + err)
    write_st(p("xhuge2.st"), [("x", "BF16", [2 ** 62, 256], b"")])
    rc, _, err = run("inspect", p("xhuge2.st"))
    check(rc == 1, "a [2^62, 256] tensor without its bytes is malformed")
    vals = [rnd.uniform(-1, 1) for _ in range(4 * 256)]
    vals[5], vals[300], vals[301] = float("nan"), float("inf"), float("-inf")
    write_st(p("xnan.st"), [("x", "BF16", [4, 256], bf16(vals))])
    rc, _, err = run("linear", p("q.st") + ":blocks.0.attn.qkv", p("xnan.st") + ":x", "-o", p("ynan.st"), "--backend", "cpu")
    check(rc == 0 and "'x' holds 1 NaN and 2 Inf values (the first, NaN, at row 0, col 5)" in err
          and "per-tensor scale (computed as amax/2688) is NaN" in err
          and "all 3072 of the 4 x 768 outputs are NaN or Inf" in err,
          "linear says which element of x is NaN and what became NaN: " + err)

    # an output that is an input is refused (unless --force): nothing replaced
    import shutil
    shutil.copy(p("ex.st"), p("same.st"))
    before = open(p("same.st"), "rb").read()
    rc, _, err = run("quantize", p("same.st"), p("same.st"))
    check(rc == 1 and "--force" in err and open(p("same.st"), "rb").read() == before, "quantize f f refused")
    os.link(p("same.st"), p("same-link.st"))
    rc, _, err = run("quantize", p("same.st"), p("same-link.st"))
    check(rc == 1 and open(p("same.st"), "rb").read() == before, "quantize f hardlink-of-f refused")
    shutil.copy(p("q.st"), p("qsame.st"))
    qbefore = open(p("qsame.st"), "rb").read()
    rc, _, err = run("dequantize", p("qsame.st"), p("qsame.st"))
    check(rc == 1 and open(p("qsame.st"), "rb").read() == qbefore, "dequantize f f refused")
    rc, _, err = run("linear", p("qsame.st") + ":blocks.0.attn.qkv", p("ex.st") + ":x", "-o", p("qsame.st"), "--backend", "cpu")
    check(rc == 1 and open(p("qsame.st"), "rb").read() == qbefore, "linear -o WEIGHTS refused")
    rc, _, err = run("linear", p("qsame.st") + ":blocks.0.attn.qkv", p("ex.st") + ":x", "-o", p("y.st"),
                     "--backend", "cpu", "--dump-quantized", p("qsame.st"))
    check(rc == 1 and open(p("qsame.st"), "rb").read() == qbefore, "linear --dump-quantized WEIGHTS refused")
    rc, _, err = run("matmul", p("xq.st") + ":x", p("qsame.st") + ":blocks.0.attn.qkv.weight", "-o", p("qsame.st"), "--backend", "cpu")
    check(rc == 1 and open(p("qsame.st"), "rb").read() == qbefore, "matmul -o B refused")
    rc, _, err = run("quantize", p("same.st"), p("same.st"), "--force")
    check(rc == 0 and read_st(p("same.st"))[0]["blocks.0.attn.qkv.weight"][0] == "U8", "quantize f f --force")

    # the shared options: one parser, one message each
    for cmd in ("check", "quantize", "dequantize", "linear", "matmul"):
        rc, _, err = run(cmd, "--threads", "-1")
        check(rc == (2 if cmd == "check" else 1) and err == f"nvfp4 {cmd}: --threads needs a count (0 = all cores)\n",
              f"{cmd} --threads -1: {err}")
    for cmd in ("check", "linear", "matmul"):
        rc, _, err = run(cmd, "--backend", "gpu")
        check(rc == (2 if cmd == "check" else 1) and "--backend needs cpu, cuda or auto" in err, f"{cmd} --backend gpu: {err}")
    for cmd in ("check", "linear", "matmul"):
        rc, _, err = run(cmd, "--model", "sm80")
        check(rc == (2 if cmd == "check" else 1) and "--model needs sm90, exact or sm120" in err,
              f"{cmd} --model sm80: {err}")
    rc, _, err = run("quantize", "--model", "sm90")
    check(rc == 1 and "unknown option '--model'" in err, "quantize has no --model")

    # inspect: control bytes in names are escaped
    write_st(p("ctl.st"), [("evil\x1b[31m\x07name", "F32", [1], b"\0" * 4)], {"k\x1b": "v\nw"})
    rc, out, _ = run("inspect", p("ctl.st"))
    check(rc == 0 and "\x1b" not in out and "\x07" not in out and "evil\\x1B[31m\\x07name" in out
          and "k\\x1B = v\\x0Aw" in out, "inspect escapes control bytes: " + repr(out))

    # cuBLAS is loaded by bench only: no other command maps it
    rc, _, err = run("--version", env={"LD_DEBUG": "libs"})
    check(rc == 0 and "libc.so" in err and "cublas" not in err.lower(), "--version loads no cuBLAS")

    # the shared library exports the public API (NVFP4_API in nvfp4.h) and nothing else
    so = os.path.join(os.path.dirname(NVFP4), "libnvfp4.so")
    if os.path.exists(so) and shutil.which("nm"):
        import re
        hdr = open(os.path.join(HERE, "..", "..", "include", "nvfp4.h")).read()
        public = set(re.findall(r"^NVFP4_API [^(]*?\b(nvfp4_\w+)\(", hdr, re.M))
        bare = re.findall(r"^(?!NVFP4_API|#|typedef| |\/)[^(;\n]*?\b(nvfp4_\w+)\(", hdr, re.M)
        check(not bare, f"every function nvfp4.h declares carries NVFP4_API: missing on {bare[:5]}")
        nm = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True).stdout
        exported = {line.split()[-1] for line in nm.splitlines() if line.strip()}
        check(len(public) > 50 and exported == public,
              f"libnvfp4.so exports exactly the public API: extra {sorted(exported - public)[:5]}, "
              f"missing {sorted(public - exported)[:5]}")
    else:
        skip(f"{so} not built or nm missing: the export check did not run")

    # an input truncated while mapped: an error, not SIGBUS; no temporary file left
    big = p("big.st")
    rows, cols = 8192, 8192
    with open(big, "wb") as f:
        h = json.dumps({"t.weight": {"dtype": "BF16", "shape": [rows, cols], "data_offsets": [0, rows * cols * 2]}}).encode()
        h += b" " * (-len(h) % 8)
        f.write(struct.pack("<Q", len(h)) + h)
        chunk = bf16([rnd.uniform(-1, 1) for _ in range(cols)])
        for _ in range(rows):
            f.write(chunk)
    e = dict(os.environ, NVFP4_NO_PROGRESS="1")
    proc = subprocess.Popen([NVFP4, "quantize", big, p("bigq.st"), "--threads", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
    mapped = False
    for _ in range(20000):
        try:
            if big in open(f"/proc/{proc.pid}/maps").read():
                mapped = True
                break
        except OSError:
            break
    if mapped:
        os.truncate(big, 4096)
    out, err = proc.communicate()
    check(mapped and proc.returncode == 1 and "changed size" in err, f"truncated input: rc {proc.returncode}: {err}")
    check(not any(".tmp-" in f for f in os.listdir(tmp)) and not os.path.exists(p("bigq.st")),
          "truncated input: no output or temporary file left")
    os.unlink(big)


if __name__ == "__main__":
    sys.exit(run_cases("test_cli.py", cases, "nvfp4-cli-"))
