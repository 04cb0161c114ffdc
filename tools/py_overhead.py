#!/usr/bin/env python3
"""Per-call host overhead of the Python package, measured on the CPU (no GPU).

Each entry point runs on tiny shapes with one CPU thread, so the C work is a
few microseconds; the same C call made straight through ctypes with
arguments built once (the floor) is timed too, and "overhead" is the
difference: what nvfp4's Python layer (and comfy-kitchen's dispatch, for the
ck rows) adds to every call.  The CUDA path's Python runs the same checks,
caches and argument structs as the CPU path (nvfp4/_api.py), so these numbers
track its host overhead; tests/gpu/test_python_cuda.py times the H200.

    NVFP4_LIB=build/libnvfp4.so PYTHONPATH=python python3 tools/py_overhead.py [--json FILE]

Timing: each call and its floor run in alternating batches of about 10 ms, 15
rounds, after a warm-up; each reports its lowest batch mean
(time.perf_counter_ns), as the machine's noise only ever adds time.  torch and comfy-kitchen rows appear
when those import.
"""
import argparse
import ctypes
import inspect
import json
import time

import ml_dtypes
import numpy as np

try:
    import torch
except ImportError:
    torch = None

import nvfp4
from nvfp4 import _lib

SHAPES = [(1, 64, 128), (16, 64, 128)]  # (M, N, K): C work of a few microseconds


def per_call_us(fns, rounds=15, target_s=0.01):
    """Microseconds per call of each function: batches of each run in turn
    (so slow phases of the machine hit all of them alike), and each gets its
    lowest batch mean -- noise (other tenants, frequency changes) only ever
    adds time."""
    sizes = []
    for fn in fns:
        for _ in range(50):
            fn()
        t0 = time.perf_counter()
        n = 0
        while time.perf_counter() - t0 < target_s:
            fn()
            n += 1
        sizes.append(max(10, n))
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter_ns()
            for _ in range(sizes[i]):
                fn()
            best[i] = min(best[i], (time.perf_counter_ns() - t0) / sizes[i] / 1000.0)
    return best


def c_floor_linear(x, w, bias, scale):
    """nvfp4_linear_cpu with its arguments built once (out only, one thread)."""
    lib = _lib.lib()
    out = np.empty((x.shape[0], w.rows), dtype=ml_dtypes.bfloat16)
    tw = _lib.Tensor(w.rows, w.cols, w.qdata.ctypes.data, w.block_scale.ctypes.data,
                     float(w.per_tensor_scale), _lib.HI_FIRST, _lib.SCALES_TILED)
    sc = ctypes.c_float(scale)
    args = _lib.LinearArgs(x.ctypes.data, _lib.DTYPE_BF16, x.shape[0], x.shape[1],
                           ctypes.pointer(tw), ctypes.addressof(sc), 0, bias.ctypes.data, None,
                           out.ctypes.data, _lib.MODELS["sm90"], 1, None, 1)
    ref = ctypes.byref(args)
    fn = lib.nvfp4_linear_cpu
    keep = (out, tw, sc, args)

    def call():
        assert fn(ref) == 0
    call.keep = keep
    return call


def c_floor_gemm(a, w, nthreads=1, bias=None):
    lib = _lib.lib()
    raw = np.empty((a.rows, w.rows), dtype=np.float32)
    out = np.empty((a.rows, w.rows), dtype=ml_dtypes.bfloat16)
    ta = _lib.Tensor(a.rows, a.cols, a.qdata.ctypes.data, a.block_scale.ctypes.data,
                     float(a.per_tensor_scale), _lib.HI_FIRST, _lib.SCALES_TILED)
    tw = _lib.Tensor(w.rows, w.cols, w.qdata.ctypes.data, w.block_scale.ctypes.data,
                     float(w.per_tensor_scale), _lib.HI_FIRST, _lib.SCALES_TILED)
    args = _lib.GemmArgs(ctypes.pointer(ta), ctypes.pointer(tw),
                         None if bias is None else bias.ctypes.data, raw.ctypes.data,
                         out.ctypes.data, _lib.MODELS["sm90"], nthreads, 1)
    ref = ctypes.byref(args)
    fn = lib.nvfp4_gemm_cpu

    def call():
        assert fn(ref) == 0
    call.keep = (raw, out, ta, tw, args)
    return call


def c_floor_quantize(x, scale):
    lib = _lib.lib()
    sc = ctypes.c_float(scale)
    t = _lib.Tensor()
    ref, sref, p = ctypes.byref(t), ctypes.byref(sc), x.ctypes.data
    q, free = lib.nvfp4_quantize, lib.nvfp4_tensor_free
    m, k = x.shape

    def call():
        assert q(ref, p, _lib.DTYPE_BF16, m, k, sref, 0, 1) == 0
        free(ref)
    call.keep = (t, sc)
    return call


def rows_for(m, n, k, rng):
    x = (rng.standard_normal((m, k)) * 2).astype(np.float32).astype(ml_dtypes.bfloat16)
    wf = (rng.standard_normal((n, k)) * 0.05).astype(np.float32).astype(ml_dtypes.bfloat16)
    bias = rng.standard_normal(n).astype(np.float32)
    w = nvfp4.quantize(wf)
    a = nvfp4.quantize(x, per_tensor_scale=0.01)
    scale = 0.01
    layer = nvfp4.Layer(w, input_scale=scale, bias=bias)
    out = []

    def pair(name, fn, floor_name, floor):
        """Time fn against its floor (the same C work called directly)."""
        f_us, us = per_call_us([floor, fn])
        out.append({"shape": f"{m}x{n}x{k}", "call": floor_name, "us": f_us, "floor": None})
        out.append({"shape": f"{m}x{n}x{k}", "call": name, "us": us, "floor": f_us})

    lin = c_floor_linear(x, w, bias, scale)
    gemm = c_floor_gemm(a, w)
    pair("nvfp4.linear numpy", lambda: nvfp4.linear(x, layer, threads=1),
         "C nvfp4_linear_cpu (floor)", lin)
    pair("nvfp4.matmul numpy", lambda: nvfp4.matmul(a, w, threads=1),
         "C nvfp4_gemm_cpu (floor)", gemm)
    if torch is not None:
        xt = torch.from_numpy(x.view(np.int16)).view(torch.bfloat16)
        wt = nvfp4.NVFP4Tensor(torch.from_numpy(w.qdata), torch.from_numpy(w.block_scale),
                               float(w.per_tensor_scale))
        at = nvfp4.NVFP4Tensor(torch.from_numpy(a.qdata), torch.from_numpy(a.block_scale),
                               float(a.per_tensor_scale))
        lt = nvfp4.Layer(wt, input_scale=scale, bias=torch.from_numpy(bias))
        pair("nvfp4.linear torch", lambda: nvfp4.linear(xt, lt, threads=1),
             "C nvfp4_linear_cpu (floor)", lin)
        pair("nvfp4.matmul torch", lambda: nvfp4.matmul(at, wt, threads=1),
             "C nvfp4_gemm_cpu (floor)", gemm)
        st = torch.tensor(scale)
        pair("nvfp4.quantize torch", lambda: nvfp4.quantize(xt, per_tensor_scale=st),
             "C nvfp4_quantize (floor)", c_floor_quantize(x, scale))
        module_rows(x, wf, bias, scale, lin, pair, out)
        ck_rows(n, x, wf, bias, scale, pair, out)
    return out


def module_rows(x, wf, bias, scale, floor, pair, out):
    """nvfp4.torch.NVFP4Linear (the same weight, static scale, float32 bias, one
    thread) called as a model calls it, under inference mode, against the C
    linear; and a BF16 nn.Linear of the same shape for scale."""
    import nvfp4.torch as nt
    n, k = wf.shape
    lin = torch.nn.Linear(k, n)
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(wf.astype(np.float32)))
        lin.bias.copy_(torch.from_numpy(bias))
    mod = nt.NVFP4Linear.from_linear(lin, input_scale=scale, threads=1)
    xt = torch.from_numpy(x.view(np.int16)).view(torch.bfloat16)
    dense = lin.to(torch.bfloat16)
    with torch.inference_mode():
        pair("NVFP4Linear (nvfp4.torch)", lambda: mod(xt), "C nvfp4_linear_cpu (floor)", floor)
        us, = per_call_us([lambda: dense(xt)])
    out.append({"shape": out[-1]["shape"], "call": "nn.Linear BF16 (torch's CPU GEMM)", "us": us,
                "floor": None})


def ck_rows(n, x, wf, bias, scale, pair, out):
    """comfy-kitchen through our backend (register(cpu=True)) and its fallback.
    The backend's CPU GEMM runs on one thread where register() takes threads=."""
    try:
        import comfy_kitchen as ck
        from comfy_kitchen.tensor import QuantizedTensor
    except ImportError:
        return
    import nvfp4.comfy as nc
    threads = 1 if "threads" in inspect.signature(nc.register).parameters else 0
    nc.register(cpu=True, **({"threads": 1} if threads else {}))
    try:
        xt = torch.from_numpy(x.view(np.int16)).view(torch.bfloat16)
        wt = torch.from_numpy(wf.view(np.int16)).view(torch.bfloat16)
        wq = QuantizedTensor.from_float(wt, "TensorCoreNVFP4Layout")
        bb = torch.from_numpy(bias).to(torch.bfloat16)
        s = torch.tensor(scale, dtype=torch.float32)
        xq = QuantizedTensor.from_float(xt, "TensorCoreNVFP4Layout", scale=s)
        qa = nvfp4.NVFP4Tensor(xq._qdata.numpy(), xq._params.block_scale.view(torch.uint8).numpy(),
                               scale)
        qw = nvfp4.NVFP4Tensor(wq._qdata.numpy(), wq._params.block_scale.view(torch.uint8).numpy(),
                               float(wq._params.scale))
        b32 = np.zeros(qw.rows, np.float32)
        b32[:n] = bias
        f_q = c_floor_quantize(x, scale)
        f_mm = c_floor_gemm(qa, qw, threads, b32)
        pair("ck.quantize_nvfp4 via nvfp4", lambda: ck.quantize_nvfp4(xt, s, pad_16x=True),
             "C nvfp4_quantize (floor)", f_q)
        args = (xq._qdata, wq._qdata, s, wq._params.scale, xq._params.block_scale,
                wq._params.block_scale)
        pair("ck.scaled_mm_nvfp4 via nvfp4", lambda: ck.scaled_mm_nvfp4(*args, bias=bb),
             f"C nvfp4_gemm_cpu, {threads or 'all'} thread(s) (floor)", f_mm)

        def layout_linear():
            q = QuantizedTensor.from_float(xt, "TensorCoreNVFP4Layout", scale=s)
            return torch.nn.functional.linear(q, wq, bb)

        def both():
            f_q()
            f_mm()
        pair("ck QuantizedTensor linear via nvfp4", layout_linear, "C quantize + gemm (floor)", both)
        fb, = per_call_us([lambda: torch.nn.functional.linear(xt, wq, bb)])
        out.append({"shape": out[-1]["shape"], "call": "ck fallback (dequantize + F.linear)",
                    "us": fb, "floor": None})
    finally:
        nc.unregister()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()
    if torch is not None:
        torch.set_num_threads(1)
    rng = np.random.default_rng(5)
    rows = []
    for m, n, k in SHAPES:
        rows += rows_for(m, n, k, rng)
    print(f"nvfp4 per-call host overhead on the CPU ({nvfp4.library_path()})")
    print(f"{'shape':>10s}  {'call':40s} {'us/call':>9s} {'overhead':>9s}")
    for r in rows:
        over = "" if r["floor"] is None else f"{r['us'] - r['floor']:9.1f}"
        print(f"{r['shape']:>10s}  {r['call']:40s} {r['us']:9.1f} {over:>9s}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
