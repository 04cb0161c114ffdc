#!/usr/bin/env python3
"""Run one NVFP4 linear of a ComfyUI checkpoint with torch on the GPU.

    python3 comfyui_layer.py MODEL.safetensors [LAYER] [--rows M]

The checkpoint is read with the `safetensors` package straight onto the GPU
(LAYER.weight, .weight_scale, .weight_scale_2, optional .input_scale and
.bias); nvfp4.NVFP4Tensor wraps those tensors without copying and
nvfp4.linear runs ComfyUI's linear on them (activations quantized inside the
H200 kernel).  Without LAYER it lists the NVFP4 layers.  Without an sm_90 GPU
it runs on the CPU backend instead.  Try it on `nvfp4 example` + `nvfp4
quantize` output:

    build/nvfp4 example ex.safetensors && build/nvfp4 quantize ex.safetensors q.safetensors
    python3 python/examples/comfyui_layer.py q.safetensors blocks.0.attn.qkv
"""
import argparse
import time

import torch
from safetensors import safe_open

import nvfp4


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("checkpoint")
    ap.add_argument("layer", nargs="?")
    ap.add_argument("--rows", type=int, default=128, help="activation rows M (default 128)")
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() and nvfp4.cuda_available() else "cpu"

    with safe_open(args.checkpoint, framework="pt", device=device) as f:
        names = set(f.keys())
        layers = sorted(n[: -len(".weight_scale_2")] for n in names if n.endswith(".weight_scale_2"))
        if not args.layer:
            print("NVFP4 layers:", *layers, sep="\n  ")
            return
        p = args.layer
        if p not in layers:
            raise SystemExit(f"{p!r} is not an NVFP4 layer of {args.checkpoint}")
        # `nvfp4 quantize` records the rows a weight had before ComfyUI's
        # padding to 16 in the file's metadata
        rows = (f.metadata() or {}).get("nvfp4.rows." + p + ".weight")
        weight = nvfp4.NVFP4Tensor(f.get_tensor(p + ".weight"), f.get_tensor(p + ".weight_scale"),
                                   f.get_tensor(p + ".weight_scale_2"),
                                   rows=None if rows is None else int(rows))
        input_scale = f.get_tensor(p + ".input_scale") if p + ".input_scale" in names else None
        bias = f.get_tensor(p + ".bias").float() if p + ".bias" in names else None

    n, k = weight.shape
    if bias is not None and bias.shape[0] < n:  # ComfyUI pads N to 16
        bias = torch.nn.functional.pad(bias, (0, n - bias.shape[0]))
    layer = nvfp4.Layer(weight, input_scale=input_scale, bias=bias, name=p)
    x = torch.randn(args.rows, k, device=device).to(torch.bfloat16)

    y = nvfp4.linear(x, layer)  # static input scale when the layer has one, else dynamic
    calls = 20 if device == "cuda" else 3  # the CPU backend takes milliseconds a call
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        y = nvfp4.linear(x, layer)
    if device == "cuda":
        torch.cuda.synchronize()
    per_call = (time.perf_counter() - t0) / calls * 1e6

    # what ComfyUI's fallback computes: BF16 x against the dequantized weight
    ref = torch.nn.functional.linear(x.float(), weight.dequantize(), bias)
    rel = float((y.float() - ref).norm() / ref.norm())
    print(f"{p}: {n} x {k} NVFP4 on {device}, x [{args.rows}, {k}] -> y {list(y.shape)} "
          f"{y.dtype}; {per_call:.1f} us per call; relative difference to the BF16 "
          f"dequantized product {rel:.3e} (NVFP4 activations)")


if __name__ == "__main__":
    main()
