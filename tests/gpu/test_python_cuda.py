#!/usr/bin/env python3
"""The Python package on the H200: torch CUDA tensors through every entry point,
bit for bit against the CPU backend / C library / CLI; comfy-kitchen's calls
through the "nvfp4" backend; comfy-kitchen's NVFP4 QuantizedTensor linear (as
ComfyUI runs it) timed against its dequantize fallback.

Standalone (no pytest needed), from the repository root after `make`:

    NVFP4_LIB=build/libnvfp4.so PYTHONPATH=python python3 tests/gpu/test_python_cuda.py

Environment:
  NVFP4_LIB       the libnvfp4.so to load (a CUDA build)
  NVFP4_PRELOAD   libraries to load first, e.g. build/libjansson.so.4 where the
                  machine has no libjansson (os.pathsep-separated; directories ok)
  NVFP4_CLI       the nvfp4 binary (default build/nvfp4)
  NVFP4_CK_WHEEL  a comfy-kitchen wheel to import from when comfy_kitchen is
                  not installed (unpacked into a temporary directory; no pip);
                  default: build/wheels/comfy_kitchen-*.whl, e.g. made by
                  tools/slim_ck_wheel.py (the wheel without its ROCm extension)
  NVFP4_QUICK=1   time only M = 128
  NVFP4_TIMING_M  the M values timed (default 1,16,128; e.g. 1,16,128,2048)
  NVFP4_TESTS     comma-separated test names to run (default: all), e.g.
                  NVFP4_TESTS=test_ck_linear_speedup for the timing table alone
  NVFP4_TEST_DEVICE=cpu  a dry run of the script's logic on CPU tensors (no GPU)
  OUT             results go to $OUT/python_cuda.json when set
Prints one line per test and "python_cuda: N passed, N failed, N skipped";
exit status 0 only when nothing failed.
"""
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import zipfile

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import nvfp4  # noqa: E402

CLI = os.environ.get("NVFP4_CLI", os.path.join(REPO, "build", "nvfp4"))
# NVFP4_TEST_DEVICE=cpu: a dry run of this script's own logic on the CPU
# backend (no GPU; test_device fails, everything else runs on CPU tensors)
DEV = torch.device(os.environ.get("NVFP4_TEST_DEVICE", "cuda"))
ON_GPU = DEV.type == "cuda"
VARIANT = "cuda" if ON_GPU else "eager"  # what the comfy-kitchen backend quantizes with
RESULTS = {"tests": {}, "timings": []}


class Skip(Exception):
    pass


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------
def int_view(t):
    t = t.detach().contiguous()
    if t.dtype in (torch.float32,):
        return t.view(torch.int32)
    if t.dtype in (torch.bfloat16, torch.float16):
        return t.view(torch.int16)
    if t.dtype == torch.float8_e4m3fn:
        return t.view(torch.uint8)
    return t


def same_bits(got, want, what):
    """Every bit equal (CPU or CUDA tensors); names the first differing element."""
    g, w = int_view(got).cpu(), int_view(want).cpu()
    if g.dim() == 0 and w.dim() == 0:  # nonzero() of a 0-d tensor has no index columns
        g, w = g.reshape(1), w.reshape(1)
    assert tuple(g.shape) == tuple(w.shape), f"{what}: shape {tuple(g.shape)}, want {tuple(w.shape)}"
    diff = (g != w).nonzero()
    if diff.numel():
        idx = tuple(diff[0].tolist())
        raise AssertionError(f"{what}: {diff.shape[0]} of {g.numel()} differ; first at {idx}: "
                             f"got 0x{int(g[idx]) & 0xFFFFFFFF:x}, want 0x{int(w[idx]) & 0xFFFFFFFF:x}")
    return g.numel()


def rand_bf16(m, k, scale=1.0, gen=None):
    return (torch.randn(m, k, generator=gen) * scale).to(torch.bfloat16)


def cpu_tensor(t):
    """An NVFP4Tensor's host copy (torch CPU tensors)."""
    return nvfp4.NVFP4Tensor(t.qdata.cpu(), t.block_scale.cpu(), t.per_tensor_scale.cpu(),
                             rows=t.rows)


class no_host_sync:
    """torch raises on any synchronizing torch call inside (our wrappers must not sync)."""

    def __enter__(self):
        if ON_GPU:
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")

    def __exit__(self, *exc):
        if ON_GPU:
            torch.cuda.set_sync_debug_mode("default")
        return False


def st_write(path, tensors):
    """A plain safetensors writer over torch CPU tensors."""
    names = {torch.bfloat16: "BF16", torch.float32: "F32", torch.uint8: "U8",
             torch.float8_e4m3fn: "F8_E4M3", torch.float16: "F16"}
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().cpu().contiguous()
        raw = int_view(t).numpy().tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def st_read(path):
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    out = {}
    np_types = {"BF16": np.int16, "F32": np.float32, "U8": np.uint8, "F16": np.float16}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        lo, hi = e["data_offsets"]
        arr = np.frombuffer(data[8 + n + lo:8 + n + hi], dtype=np_types[e["dtype"]]).copy()
        t = torch.from_numpy(arr.reshape(e["shape"]))
        out[name] = t.view(torch.bfloat16) if e["dtype"] == "BF16" else t
    return out


def cli(*args):
    r = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, f"nvfp4 {' '.join(map(str, args))}: {r.stderr.strip()}"
    return r.stdout


def import_comfy_kitchen():
    try:
        import comfy_kitchen  # noqa: F401
        return sys.modules["comfy_kitchen"]
    except ImportError:
        pass
    wheel = os.environ.get("NVFP4_CK_WHEEL")
    if not wheel:
        found = sorted(glob.glob(os.path.join(REPO, "build", "wheels", "comfy_kitchen-*.whl")))
        wheel = found[-1] if found else None
    if not wheel:
        raise Skip("comfy_kitchen not importable and no NVFP4_CK_WHEEL")
    d = tempfile.mkdtemp(prefix="ck-wheel-")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(d)
    sys.path.insert(0, d)
    import comfy_kitchen  # noqa: F401
    return sys.modules["comfy_kitchen"]


# ---------------------------------------------------------------------------
# tests: the package's entry points on CUDA tensors
# ---------------------------------------------------------------------------
def test_device():
    assert nvfp4.cuda_available(), f"{nvfp4.library_path()}: no CUDA backend or no sm_90 GPU"
    cap = torch.cuda.get_device_capability()
    RESULTS["device"] = {"name": torch.cuda.get_device_name(), "capability": list(cap),
                         "torch": torch.__version__, "library": nvfp4.library_path()}
    assert cap == (9, 0), cap


QSHAPES = [(1, 16), (7, 40), (128, 256), (129, 5376), (300, 100), (2048, 512)]


def test_quantize_cuda():
    g = torch.Generator().manual_seed(1)
    n = 0
    for m, k in QSHAPES:
        x = rand_bf16(m, k, 10.0 ** float(torch.empty(1).uniform_(-3, 3, generator=g)), g)
        xd = x.to(DEV)
        for variant in ("eager", "cuda"):
            for scale in (None, 0.0123, torch.tensor(0.0071, device=DEV)):
                with no_host_sync():
                    q = nvfp4.quantize(xd, per_tensor_scale=scale, variant=variant)
                assert q.is_cuda == ON_GPU and q.block_scale.dtype == torch.float8_e4m3fn
                ref_scale = scale if not torch.is_tensor(scale) else scale.cpu()
                r = nvfp4.quantize(x, per_tensor_scale=ref_scale, variant=variant)
                what = f"quantize {m}x{k} {variant} scale={'dyn' if scale is None else 'given'}"
                n += same_bits(q.qdata, r.qdata, what + ": codes")
                n += same_bits(q.block_scale, r.block_scale, what + ": scales")
                n += same_bits(q.per_tensor_scale, r.per_tensor_scale, what + ": scale_2")
    return f"{n} values"


def test_dequantize_cuda():
    x = rand_bf16(200, 96, 4.0).to(DEV)
    q = nvfp4.quantize(x)
    n = same_bits(q.dequantize(), cpu_tensor(q).dequantize(), "dequantize f32")
    n += same_bits(q.dequantize(torch.bfloat16), cpu_tensor(q).dequantize(torch.bfloat16), "bf16")
    return f"{n} values"


GSHAPES = [(1, 256, 512), (7, 512, 256), (16, 1024, 1024), (100, 256, 2048), (128, 5376, 1024),
           (129, 768, 768), (512, 1024, 512)]


def test_matmul_cuda():
    g = torch.Generator().manual_seed(2)
    n = 0
    for m, nn, k in GSHAPES:
        a = nvfp4.quantize(rand_bf16(m, k, 3.0, g).to(DEV))
        b = nvfp4.quantize(rand_bf16(nn, k, 0.05, g).to(DEV))
        bias = rand_bf16(1, b.rows, 1.0, g)[0]
        for bb in (None, bias):
            bb_dev = None if bb is None else bb.to(DEV)
            with no_host_sync():
                raw, out = nvfp4.matmul(a, b, bias=bb_dev)
            ca, cb = cpu_tensor(a), cpu_tensor(b)
            r_raw, r_out = nvfp4.matmul(ca, cb, bias=bb, backend="cpu")
            what = f"matmul {a.rows}x{b.rows}x{k} bias={bb is not None}"
            n += same_bits(raw, r_raw, what + ": raw")
            n += same_bits(out, r_out, what + ": out")
            if m <= 16:  # the plain oracle too, and the host convenience path
                f_raw, f_out = nvfp4.matmul(ca, cb, bias=bb, backend="ref")
                n += same_bits(raw, f_raw, what + ": raw vs ref")
                if ON_GPU:
                    h_raw, h_out = nvfp4.matmul(ca, cb, bias=bb, backend="cuda")
                    n += same_bits(out, h_out, what + ": out vs cuda_host")
    return f"{n} values"


def test_linear_cuda():
    g = torch.Generator().manual_seed(3)
    n = 0
    # the H200 kernel takes K % 32 == 0 (16-byte code rows for its loads): K = 224
    # exercises its 2-block tail chunk; K = 200 (208 padded) must be refused clearly
    w_odd = nvfp4.quantize(rand_bf16(64, 200, 0.05, g).to(DEV))
    if ON_GPU:  # (the CPU backend of a dry run takes any K)
        try:
            nvfp4.linear(rand_bf16(3, 200, 1.0, g).to(DEV), nvfp4.Layer(w_odd, 0.02))
            raise AssertionError("K = 208 on the H200 kernel was not refused")
        except nvfp4.UnsupportedError as e:
            assert "multiple of 32" in str(e), str(e)
    for m, nn, k in [(1, 256, 512), (13, 512, 224), (128, 1024, 1024), (300, 768, 256)]:
        w = nvfp4.quantize(rand_bf16(nn, k, 0.05, g).to(DEV))
        layer = nvfp4.Layer(w, input_scale=0.021, bias=rand_bf16(1, w.rows, 1.0, g)[0].float().to(DEV))
        x = rand_bf16(m, k, 2.0, g)
        cpu_layer = nvfp4.Layer(cpu_tensor(w), 0.021, layer.bias.cpu())
        xd = x.to(DEV)
        for mode in ("static", "dynamic"):
            for variant in ("eager", "cuda"):
                with no_host_sync():
                    raw, out = nvfp4.linear(xd, layer, input_scale=mode, variant=variant,
                                            return_raw=True)
                r_raw, r_out = nvfp4.linear(x, cpu_layer, input_scale=mode, variant=variant,
                                            backend="cpu", return_raw=True)
                what = f"linear {m}x{w.rows}x{k} {mode} {variant}"
                n += same_bits(raw, r_raw, what + ": raw")
                n += same_bits(out, r_out, what + ": out")
                # out only (no raw accumulators written), twice: the second call
                # runs on the layer's cached device scale
                for _ in range(2):
                    with no_host_sync():
                        out_only = nvfp4.linear(xd, layer, input_scale=mode, variant=variant)
                    n += same_bits(out_only, r_out, what + ": out only")
        # a BF16 bias: widened on the device once, the copy reused while unchanged
        layer16 = nvfp4.Layer(w, input_scale=0.021, bias=layer.bias.bfloat16())
        want16 = nvfp4.linear(x, nvfp4.Layer(cpu_tensor(w), 0.021, layer16.bias.float().cpu()),
                              backend="cpu")
        for _ in range(2):
            with no_host_sync():
                out16 = nvfp4.linear(xd, layer16)
            n += same_bits(out16, want16, f"linear {m}x{w.rows}x{k}: BF16 bias")
    # [B, T, K] activations
    x3 = rand_bf16(24, w.cols, 1.0, g).reshape(2, 12, w.cols)
    out3 = nvfp4.linear(x3.to(DEV), nvfp4.Layer(w, 0.02))
    assert out3.shape == (2, 12, w.rows)
    n += same_bits(out3, nvfp4.linear(x3, nvfp4.Layer(cpu_tensor(w), 0.02)), "linear 3-D")
    return f"{n} values"


def test_checkpoint_vs_cli():
    """load_layer(device='cuda') + linear on the GPU == `nvfp4 linear --backend cpu`."""
    d = tempfile.mkdtemp(prefix="nvfp4-py-")
    ex, q, y = (os.path.join(d, f) for f in ("ex.safetensors", "q.safetensors", "y.safetensors"))
    cli("example", ex)
    cli("quantize", ex, q)
    n = 0
    for layer in ("blocks.0.attn.qkv", "blocks.0.mlp.fc2"):
        L = nvfp4.load_layer(q, layer, device=DEV)
        assert L.weight.is_cuda == ON_GPU
        x = st_read(ex)["x"]
        if layer.endswith("fc2"):
            x = rand_bf16(8, 1024, 1.0)
            st_write(os.path.join(d, "x2.safetensors"), {"x": x})
            xfile = os.path.join(d, "x2.safetensors")
        else:
            xfile = ex
        for variant in ("eager", "cuda"):
            cli("linear", f"{q}:{layer}", f"{xfile}:x", "-o", y, "--backend", "cpu",
                "--input-scale", "dynamic", "--variant", variant)
            want = st_read(y)
            raw, out = nvfp4.linear(x.to(DEV), L, input_scale="dynamic", variant=variant,
                                    return_raw=True)
            n += same_bits(raw, want["raw"], f"{layer} {variant}: raw vs CLI")
            n += same_bits(out, want["out"], f"{layer} {variant}: out vs CLI")
    return f"{n} values"


def test_cuda_argument_errors():
    if not ON_GPU:
        raise Skip("CUDA-only argument rules")
    x = torch.zeros(16, 32, dtype=torch.float16, device=DEV)
    for fn, exc in ((lambda: nvfp4.quantize(x), TypeError),
                    (lambda: nvfp4.quantize(x.to(torch.bfloat16)[:, ::2]), ValueError)):
        try:
            fn()
        except exc:
            pass
        else:
            raise AssertionError(f"expected {exc.__name__}")
    a = nvfp4.quantize(torch.zeros(16, 64, dtype=torch.bfloat16, device=DEV))
    for kw in ({"model": "exact"}, {"backend": "cpu"}):
        try:
            nvfp4.matmul(a, a, **kw)
        except ValueError:
            pass
        else:
            raise AssertionError(f"matmul(**{kw}) on CUDA tensors must raise")
    # K = 16 is valid NVFP4 but not for the kernel (TMA rows of 16 bytes): the
    # library's own message comes back as an exception
    s = nvfp4.quantize(torch.ones(16, 16, dtype=torch.bfloat16, device=DEV))
    try:
        nvfp4.matmul(s, s)
    except nvfp4.UnsupportedError as e:
        assert "multiple of 32" in e.message, e.message
    else:
        raise AssertionError("K = 16 on the kernel must raise UnsupportedError")


def test_explain_cuda_tensors():
    a = nvfp4.quantize(rand_bf16(16, 256, 2.0).to(DEV))
    b = nvfp4.quantize(rand_bf16(32, 256, 0.05).to(DEV))
    raw, _ = nvfp4.matmul(a, b)
    report = nvfp4.explain(a, b, raw)
    assert report["best"]["model"] == "sm90" and report["best"]["matched"] == 1.0, report["best"]
    return "report ok"


def test_rows_and_strict_cuda():
    """CUDA tensors keep x's rows (qdata holds ComfyUI's padding), and
    strict=True refuses NaN in x and NaN outputs (the check synchronizes, so
    it runs outside no_host_sync); without strict nothing is checked."""
    x = rand_bf16(5, 64, 2.0).to(DEV)
    q = nvfp4.quantize(x)
    assert q.rows == 5 and q.qdata.shape[0] == 16
    w = nvfp4.quantize(rand_bf16(32, 64, 0.05).to(DEV))
    raw, out = nvfp4.matmul(q, w)
    assert raw.shape == (5, 32) and out.shape == (5, 32)
    n = same_bits(out, nvfp4.matmul(cpu_tensor(q), cpu_tensor(w), backend="cpu")[1], "5 rows")
    xn = x.clone()
    xn[2, 7] = float("nan")
    with no_host_sync():
        nvfp4.quantize(xn)
        y = nvfp4.linear(xn, nvfp4.Layer(w), input_scale="dynamic")
    assert torch.isnan(y.float()).all()
    for fn in (lambda: nvfp4.quantize(xn, strict=True),
               lambda: nvfp4.linear(xn, nvfp4.Layer(w), strict=True)):
        try:
            fn()
        except ValueError as e:
            assert "row 2, col 7" in str(e) and "strict=True" in str(e), str(e)
        else:
            raise AssertionError("strict=True must refuse a NaN in x")
    nvfp4.linear(x, nvfp4.Layer(w), strict=True)  # finite: no complaint
    return f"{n} values"


# ---------------------------------------------------------------------------
# comfy-kitchen
# ---------------------------------------------------------------------------
def _ck():
    ck = import_comfy_kitchen()
    import nvfp4.comfy as nc
    info = nc.register(cpu=not ON_GPU)
    assert info["sm90"] or not ON_GPU, info
    RESULTS["comfy_kitchen"] = {"version": getattr(ck, "__version__", "?"), "register": info}
    return ck


def test_ck_registry_quantize():
    ck = _ck()
    from comfy_kitchen.registry import registry
    n = 0
    own_cuda = registry.is_available("cuda")
    g = torch.Generator().manual_seed(4)
    for m, k in [(16, 64), (40, 96), (128, 5376), (33, 100)]:
        x = rand_bf16(m, k, 3.0, g).to(DEV)
        s = (torch.amax(x.abs()).float() / 2688.0)
        pad = m % 16 != 0 or k % 16 != 0
        kwargs = {"x": x, "per_tensor_scale": s, "epsilon": 0.0, "pad_16x": pad, "hi_first": True}
        assert registry.get_capable_backend("quantize_nvfp4", kwargs) == "nvfp4"
        q, bs = ck.quantize_nvfp4(x, s, pad_16x=pad)
        # on CUDA tensors the backend uses the "cuda" variant (comfy-kitchen's CUDA kernel)
        r = nvfp4.quantize(x.cpu(), per_tensor_scale=s.cpu(), variant=VARIANT)
        n += same_bits(q, r.qdata, f"ck.quantize_nvfp4 {m}x{k}: codes")
        n += same_bits(bs, r.block_scale, f"ck.quantize_nvfp4 {m}x{k}: scales")
        if own_cuda and ON_GPU:  # comfy-kitchen's own CUDA kernel: the same bytes
            with registry.use_backend("cuda"):
                q0, bs0 = ck.quantize_nvfp4(x, s, pad_16x=pad)
            n += same_bits(q, q0, f"{m}x{k}: ours vs comfy-kitchen's CUDA quantizer, codes")
            n += same_bits(bs, bs0, f"{m}x{k}: ours vs comfy-kitchen's CUDA quantizer, scales")
    return f"{n} values" + ("" if own_cuda else " (comfy-kitchen's cuda backend unavailable: "
                                                 "not compared with its quantizer)")


def test_ck_scaled_mm():
    ck = _ck()
    from comfy_kitchen.registry import registry
    n = 0
    g = torch.Generator().manual_seed(5)
    for m, nn, k in [(1, 256, 512), (128, 5376, 1024), (48, 768, 2048)]:
        x, w = rand_bf16(m, k, 2.0, g).to(DEV), rand_bf16(nn, k, 0.05, g).to(DEV)
        sx, sw = torch.amax(x.abs()).float() / 2688, torch.amax(w.abs()).float() / 2688
        qx, bx = ck.quantize_nvfp4(x, sx, pad_16x=True)
        qw, bw = ck.quantize_nvfp4(w, sw, pad_16x=True)
        bias = rand_bf16(1, qw.shape[0], 1.0, g)[0].to(DEV)
        kwargs = {"a": qx, "b": qw, "tensor_scale_a": sx, "tensor_scale_b": sw,
                  "block_scale_a": bx, "block_scale_b": bw, "bias": bias,
                  "out_dtype": torch.bfloat16, "alpha": None}
        assert registry.get_capable_backend("scaled_mm_nvfp4", kwargs) == "nvfp4"
        y = ck.scaled_mm_nvfp4(qx, qw, sx, sw, bx, bw, bias=bias)
        A = nvfp4.NVFP4Tensor(qx.cpu(), bx.cpu(), sx.cpu())
        B = nvfp4.NVFP4Tensor(qw.cpu(), bw.cpu(), sw.cpu())
        raw, out = nvfp4.matmul(A, B, bias=bias.cpu(), backend="cpu")
        n += same_bits(y, out, f"ck.scaled_mm_nvfp4 {m}x{nn}x{k} + bias")
        y32 = ck.scaled_mm_nvfp4(qx, qw, sx, sw, bx, bw, out_dtype=torch.float32)
        n += same_bits(y32, raw * (sx.cpu() * sw.cpu()), f"{m}x{nn}x{k}: float32 out")
    return f"{n} values"


def _layout_linear(x, wq, bias, input_scale):
    """ComfyUI's NVFP4 linear with the format enabled: quantize the activations
    to a QuantizedTensor (the layer's input_scale), then F.linear."""
    from comfy_kitchen.tensor import QuantizedTensor
    xq = QuantizedTensor.from_float(x, "TensorCoreNVFP4Layout", scale=input_scale)
    return torch.nn.functional.linear(xq, wq, bias)


def test_ck_quantized_tensor_linear_vs_cli():
    """comfy-kitchen's NVFP4 QuantizedTensor linear through our backend, on the
    H200, equals `nvfp4 linear --backend cpu` on the same weight and scale."""
    _ck()
    from comfy_kitchen.tensor import QuantizedTensor
    d = tempfile.mkdtemp(prefix="nvfp4-ck-")
    g = torch.Generator().manual_seed(6)
    n = 0
    for m, nn, k in [(8, 768, 256), (128, 1024, 2048), (77, 600, 320)]:
        w = rand_bf16(nn, k, 0.05, g).to(DEV)
        bias = rand_bf16(1, nn, 1.0, g)[0].to(DEV)
        x = rand_bf16(m, k, 2.0, g).to(DEV)
        wq = QuantizedTensor.from_float(w, "TensorCoreNVFP4Layout")
        input_scale = (torch.amax(x.abs()).float() / 2688.0)
        for b in (None, bias):
            y = _layout_linear(x, wq, b, input_scale)
            assert y.shape == (m, nn)
            tensors = {"l.weight": wq._qdata, "l.weight_scale": wq._params.block_scale,
                       "l.weight_scale_2": wq._params.scale.reshape(()),
                       "l.input_scale": input_scale.reshape(())}
            if b is not None:
                tensors["l.bias"] = b
            st_write(os.path.join(d, "w.safetensors"), tensors)
            st_write(os.path.join(d, "x.safetensors"), {"x": x})
            # comfy-kitchen's quantizer on CUDA is the "cuda" variant
            cli("linear", os.path.join(d, "w.safetensors") + ":l",
                os.path.join(d, "x.safetensors") + ":x", "-o", os.path.join(d, "y.safetensors"),
                "--backend", "cpu", "--input-scale", "static", "--variant", VARIANT)
            want = st_read(os.path.join(d, "y.safetensors"))["out"][:, :nn]
            n += same_bits(y, want, f"QuantizedTensor linear {m}x{nn}x{k} bias={b is not None} vs CLI")
    return f"{n} values"


SEED_LINEARS = [("QKV", 21504, 5376), ("attn-out", 5376, 7168), ("FC1", 28672, 5376),
                ("FC2", 5376, 14336)]
# NVFP4_TEST_DEVICE=cpu: the same logic on shapes the CPU backend runs quickly
DRY_LINEARS = [("QKV", 768, 256), ("FC2", 256, 512)]


def _median_us(fn, iters=30, warmup=5):
    """Latency of one call on an idle GPU: CUDA events around it, the host
    waiting for it each time (its host work and its kernels, end to end)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1000.0)
    return statistics.median(times)


def _per_call_us(fn, iters, reps=5, warmup=10):
    """(us per call, host us per call): `iters` calls back to back between two
    CUDA events, as a model issues them -- the first number is the larger of
    the host's and the GPU's time per call, the second the host's alone
    (perf_counter around the same loop; the queue never fills at these
    counts).  Medians over `reps` loops, after a warm-up.  On the CPU (dry
    run) both are perf_counter times."""
    for _ in range(warmup):
        fn()
    per, host = [], []
    for _ in range(reps):
        if ON_GPU:
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        t1 = time.perf_counter()
        if ON_GPU:
            e.record()
            e.synchronize()
            per.append(s.elapsed_time(e) * 1000.0 / iters)
        else:
            per.append((t1 - t0) * 1e6 / iters)
        host.append((t1 - t0) * 1e6 / iters)
    return statistics.median(per), statistics.median(host)


def _c_linear_call(x, W, scale_d, bias32, out):
    """The C entry point alone, its arguments built once: nvfp4_linear_cuda
    (on the CPU: nvfp4_linear_cpu) on the same buffers, through ctypes."""
    import ctypes
    from nvfp4 import _lib
    from nvfp4.errors import check
    lib = _lib.lib()
    m, k = int(x.shape[0]), int(x.shape[1])
    keep = [x, W, scale_d, bias32, out]
    if ON_GPU:
        op = _lib.CudaOperand(W.qdata.data_ptr(), W.block_scale.data_ptr(),
                              W.per_tensor_scale.data_ptr(), W.rows, W.cols)
        ws = torch.empty((lib.nvfp4_linear_cuda_workspace(m, W.rows, k),), dtype=torch.uint8,
                         device=DEV)
        args = _lib.CudaLinearArgs(x.data_ptr(), m, k, ctypes.pointer(op), scale_d.data_ptr(),
                                   _lib.VARIANTS[VARIANT], bias32.data_ptr(), None,
                                   out.data_ptr(), None, None, None,
                                   torch.cuda.current_stream().cuda_stream or None,
                                   ws.data_ptr(), ws.numel(), 1)
        fn, fname = lib.nvfp4_linear_cuda, "nvfp4_linear_cuda"
        keep += [op, ws, args]
    else:
        tw = _lib.Tensor(W.rows, W.cols, W.qdata.data_ptr(), W.block_scale.data_ptr(),
                         float(W.per_tensor_scale), _lib.HI_FIRST, _lib.SCALES_TILED)
        args = _lib.LinearArgs(x.data_ptr(), _lib.DTYPE_BF16, m, k, ctypes.pointer(tw),
                               scale_d.data_ptr(), _lib.VARIANTS[VARIANT], bias32.data_ptr(),
                               None, out.data_ptr(), _lib.MODELS["sm90"], 0, None, 1)
        fn, fname = lib.nvfp4_linear_cpu, "nvfp4_linear_cpu"
        keep += [tw, args]
    ref = ctypes.byref(args)

    def call():
        check(fn(ref), fname)
    call.keep = keep
    return call


def test_ck_linear_speedup():
    """Per seed linear and M: the C call alone, nvfp4.linear (a Layer built
    once, the layer's static scale), ComfyUI's NVFP4 linear through our
    backend (QuantizedTensor.from_float + F.linear, BF16 bias) and comfy-
    kitchen's dequantize fallback (what ComfyUI does on sm_90 without us:
    F.linear(x, w) on the BF16 input, the weight dequantized per call).
    Back to back (CUDA events around many calls) and per call on an idle
    GPU; the host's own time per call too.  All three of ours give the same
    bits (checked); no call syncs the host.

    NVFP4_TIMING_M=1,16,128 (default) picks the M values, NVFP4_QUICK=1 only
    M = 128; NVFP4_TEST_DEVICE=cpu runs the same logic on small shapes."""
    ck = _ck()
    from comfy_kitchen.tensor import QuantizedTensor
    if os.environ.get("NVFP4_QUICK"):
        ms = [128]
    else:
        ms = [int(v) for v in os.environ.get("NVFP4_TIMING_M", "1,16,128").split(",")]
    g = torch.Generator().manual_seed(7)
    rows = []
    for name, nn, k in (SEED_LINEARS if ON_GPU else DRY_LINEARS):
        w = rand_bf16(nn, k, 0.02, g).to(DEV)
        bias = rand_bf16(1, nn, 0.1, g)[0].to(DEV)
        wq = QuantizedTensor.from_float(w, "TensorCoreNVFP4Layout")
        del w
        W = nvfp4.NVFP4Tensor(wq._qdata, wq._params.block_scale, wq._params.scale)
        bias32 = bias.float()
        for m in ms:
            x = rand_bf16(m, k, 1.0, g).to(DEV)
            scale = torch.amax(x.abs()).float() / 2688.0
            layer = nvfp4.Layer(W, input_scale=float(scale), bias=bias32)  # (reads it back)
            out_c = torch.empty((m, W.rows), dtype=torch.bfloat16, device=DEV)
            c_call = _c_linear_call(x, W, scale.reshape(1), bias32, out_c)

            def linear():
                return nvfp4.linear(x, layer, variant=VARIANT)

            def ck_linear(wq=wq):
                xq = QuantizedTensor.from_float(x, "TensorCoreNVFP4Layout", scale=scale)
                return torch.nn.functional.linear(xq, wq, bias)

            def fallback(wq=wq):
                return torch.nn.functional.linear(x, wq, bias)

            # the same bits from all three, and none of them syncs the host
            c_call()
            with no_host_sync():
                y_lin = linear()
                y_ck = ck_linear()
            same_bits(y_lin, out_c, f"{name} M={m}: nvfp4.linear vs the C call")
            same_bits(y_ck, out_c[:, :nn], f"{name} M={m}: comfy-kitchen via nvfp4 vs the C call")
            y_fb = fallback().float()
            rel = float((y_ck.float() - y_fb).norm() / y_fb.norm())
            iters = 100 if m <= 128 else 20
            row = {"linear": name, "m": m, "n": nn, "k": k}
            for key, fn in (("c", c_call), ("nvfp4_linear", linear), ("ck_nvfp4", ck_linear),
                            ("ck_fallback", fallback)):
                row[key + "_us"], row[key + "_host_us"] = (round(v, 1) for v in
                                                           _per_call_us(fn, iters))
                if ON_GPU:
                    row[key + "_latency_us"] = round(_median_us(fn), 1)
            row["linear_overhead_us"] = round(row["nvfp4_linear_us"] - row["c_us"], 1)
            row["speedup"] = round(row["ck_fallback_us"] / row["ck_nvfp4_us"], 2)
            row["rel_diff_vs_fallback"] = rel
            rows.append(row)
            RESULTS["timings"].append(row)
        del wq, W
        if ON_GPU:
            torch.cuda.empty_cache()
    cols = [("C call", "c"), ("nvfp4.linear", "nvfp4_linear"), ("ck via nvfp4", "ck_nvfp4"),
            ("ck fallback", "ck_fallback")]
    print("    us per call, back to back (host us in brackets); latency = one call on an idle "
          "GPU" if ON_GPU else "    us per call (CPU dry run)")
    print("    " + f"{'linear':9s}{'M':>5s}" + "".join(f"{c:>22s}" for c, _ in cols) +
          f"{'overhead':>10s}{'speed-up':>10s}")
    for r in rows:
        cells = "".join(f"{r[k + '_us']:>11.1f} ({r[k + '_host_us']:>7.1f})" for _, k in cols)
        print(f"    {r['linear']:9s}{r['m']:>5d}{cells}{r['linear_overhead_us']:>10.1f}"
              f"{'x%.2f' % r['speedup']:>10s}")
    if ON_GPU:
        print("    latency: " + "; ".join(
            f"{r['linear']} M={r['m']}: " + ", ".join(f"{k} {r[k + '_latency_us']:.1f}"
                                                       for _, k in cols) for r in rows))
    del ck
    return f"{len(rows)} timings"


# ---------------------------------------------------------------------------
def main(namespace=None, label="python_cuda", results=None):
    """Run the test_* functions of `namespace` (default: this file's), one line
    each, then "LABEL: N passed, N failed, N skipped"; results (RESULTS by
    default) go to $OUT/LABEL.json when OUT is set."""
    namespace = globals() if namespace is None else namespace
    results = RESULTS if results is None else results
    tests = [(k, v) for k, v in namespace.items() if k.startswith("test_") and callable(v)]
    only = [t for t in os.environ.get("NVFP4_TESTS", "").split(",") if t]
    if only:
        unknown = set(only) - {k for k, _ in tests}
        if unknown:
            print(f"NVFP4_TESTS: no test named {', '.join(sorted(unknown))}")
            return 2
        tests = [(k, v) for k, v in tests if k in only]
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for name, fn in tests:
        t0 = time.time()
        try:
            note = fn() or ""
            status = "passed"
        except Skip as e:
            status, note = "skipped", str(e)
        except Exception as e:  # noqa: BLE001 -- report and go on
            status, note = "failed", f"{type(e).__name__}: {e}"
            traceback.print_exc()
        counts[status] += 1
        dt = time.time() - t0
        results["tests"][name] = {"status": status, "note": note, "seconds": round(dt, 2)}
        print(f"{status.upper():7s} {name} ({dt:.1f}s) {note}", flush=True)
    summary = (f"{label}: {counts['passed']} passed, {counts['failed']} failed, "
               f"{counts['skipped']} skipped")
    results["summary"] = summary
    print(summary)
    out = os.environ.get("OUT")
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, f"{label}.json"), "w") as f:
            json.dump(results, f, indent=1)
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
