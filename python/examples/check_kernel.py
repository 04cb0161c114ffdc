#!/usr/bin/env python3
"""Check another NVFP4 GEMM's outputs against the tensor-core models.

    python3 check_kernel.py                 # a demo "kernel": FP32 loop over dequantized values
    python3 check_kernel.py OPS.safetensors RESULT.safetensors:NAME

OPS holds the operands ComfyUI-style (a, a_scale, a_scale_2, b, b_scale,
b_scale_2; a is [M, K] activations, b [N, K] weights); NAME is the kernel's
result, F32 accumulators (raw) or BF16 outputs.  nvfp4.matmul computes the
contract's bits under each accumulation model ("sm90" is what an H100/H200's
tensor cores return, bit for bit) and the script reports how many outputs
each model reproduces; nvfp4.explain (when the library has the explain
engine) searches accumulation orders and K splits for the one that does.
"""
import sys

import ml_dtypes
import numpy as np

import nvfp4


def load(spec):
    """safetensors through torch (NumPy has no BF16 / E4M3 dtypes)."""
    from safetensors.torch import load_file
    path, _, name = spec.partition(":")
    return load_file(path), name


def bits_of(x):
    """The raw bits of a NumPy array or a torch CPU tensor, as NumPy."""
    if isinstance(x, np.ndarray):
        x = np.ascontiguousarray(x)
        return x.view({2: np.uint16, 4: np.uint32}[x.itemsize])
    import torch
    as_int = {torch.float32: torch.int32, torch.bfloat16: torch.int16}[x.dtype]
    return x.contiguous().view(as_int).numpy().view(np.uint32 if x.dtype == torch.float32
                                                   else np.uint16)


def demo_operands():
    rng = np.random.default_rng(0)
    # heavy tails: block scales spread over many octaves, as in real activations
    a = nvfp4.quantize(rng.standard_t(1.0, (32, 4096)).astype(ml_dtypes.bfloat16))
    b = nvfp4.quantize((rng.standard_t(1.0, (64, 4096)) * 0.02).astype(ml_dtypes.bfloat16))
    # the "third-party kernel": an FP32 multiply-add loop over the exact operand
    # values, one rounding per step -- the stock check that tensor cores fail
    au = nvfp4.NVFP4Tensor(a.qdata, a.block_scale, 1.0).dequantize()
    bu = nvfp4.NVFP4Tensor(b.qdata, b.block_scale, 1.0).dequantize()
    acc = np.zeros((a.rows, b.rows), np.float32)
    for kk in range(a.cols):
        acc = (acc + np.outer(au[:, kk], bu[:, kk])).astype(np.float32)
    return a, b, acc


def main():
    if len(sys.argv) == 3:
        ops, _ = load(sys.argv[1] + ":")
        res, name = load(sys.argv[2])
        a = nvfp4.NVFP4Tensor(ops["a"], ops["a_scale"], ops["a_scale_2"])
        b = nvfp4.NVFP4Tensor(ops["b"], ops["b_scale"], ops["b_scale_2"])
        result = res[name]
    else:
        print("demo: an FP32 FMA-loop 'kernel' over 32 x 64 x 4096 NVFP4 operands")
        a, b, result = demo_operands()
    is_raw = bits_of(result).dtype == np.uint32
    for model in ("sm90", "exact", "sm120"):
        raw, out = nvfp4.matmul(a, b, model=model)
        want = raw if is_raw else out
        w, g = bits_of(want), bits_of(result)
        bad = np.argwhere(w != g)
        where = ""
        if bad.size:
            first = tuple(int(i) for i in bad[0])
            where = f"; first at {first}: 0x{int(g[first]):x}, the model 0x{int(w[first]):x}"
        print(f"  model {model:5s}: {w.size - len(bad)} of {w.size} "
              f"{'accumulators' if is_raw else 'outputs'} equal{where}")
    try:
        report = nvfp4.explain(a, b, result)
    except nvfp4.UnsupportedError as e:
        print(f"  (explain: {e.message})")
        return
    import json
    print(json.dumps(report, indent=1)[:4000])


if __name__ == "__main__":
    main()
