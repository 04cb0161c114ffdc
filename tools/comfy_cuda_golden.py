#!/usr/bin/env python3
"""Golden NVFP4 quantizations made by comfy-kitchen's COMPILED CUDA quantize_nvfp4 on a GPU.

The `cuda` variant of nvfp4_quantize is checked against these (tests/golden/comfy-kitchen-cuda/);
tools/gen_comfy_golden.py makes the eager-quantizer files.  One safetensors file per case:
  x               the input (BF16 or F16, 2-D, unpadded)
  expect.codes    U8 [roundup(rows,16), roundup(cols,16)/2]  comfy-kitchen CUDA kernel, hi-first
  expect.scales   U8 [roundup(rows,128), roundup(cols/16,4)] its E4M3 block scales, 128x4 tiled
  expect.scale_2  F32 []  the per-tensor scale the kernel was given
  eager.codes     the same input and scale through comfy-kitchen's eager quantize_nvfp4 (CPU)
  eager.scales
metadata: generator (versions, GPU), scale_mode ("float": amax(|x|).float() / 2688, as
tools/gen_comfy_golden.py; "layout": TensorCoreNVFP4Layout.quantize's own amax(|x|) / 2688 in the
input dtype, what ComfyUI computes with scale=None; "static": a given FP32), aligned ("1" when no
padding was needed: the kernel's unchecked vector-load path), overrun ("1" when the padded element
count is not a multiple of 512: the last CTA of the aligned path then reads past the input and may
write scale bytes into the tile padding), pad_nonzero ("1" when the kernel left nonzero bytes in
the scale tile padding).

Run on a machine with an NVIDIA GPU, torch with CUDA and comfy-kitchen (tests/gpu/comfy_cuda.sh
installs the wheel into a private directory):
    python3 tools/comfy_cuda_golden.py OUTDIR
"""
import importlib.metadata
import json
import math
import os
import struct
import sys
import types

import torch


def _packaging_shim():
    """comfy-kitchen imports packaging.version (scaled_mm_v2); a bare machine may lack it."""
    try:
        import packaging.version  # noqa: F401
        return
    except ImportError:
        pass

    class _V(tuple):
        def __new__(cls, s):
            parts = []
            for p in str(s).split("+")[0].split("."):
                digits = "".join(ch for ch in p if ch.isdigit())
                parts.append(int(digits) if digits else 0)
            return super().__new__(cls, parts)

    pkg, ver = types.ModuleType("packaging"), types.ModuleType("packaging.version")
    ver.parse, ver.Version = _V, _V
    pkg.version = ver
    sys.modules["packaging"], sys.modules["packaging.version"] = pkg, ver


_packaging_shim()
import comfy_kitchen.backends.cuda as ck_cuda  # noqa: E402
from comfy_kitchen.backends.eager import quantization as ck_eager  # noqa: E402

ST_DTYPE = {torch.bfloat16: ("BF16", torch.int16), torch.float16: ("F16", torch.int16),
            torch.float32: ("F32", torch.int32), torch.uint8: ("U8", torch.uint8)}


def save(path, tensors, metadata):
    header, blobs, off = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        st_name, view = ST_DTYPE[t.dtype]
        raw = t.detach().cpu().contiguous().view(view).numpy().tobytes()
        header[name] = {"dtype": st_name, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    os.replace(tmp, path)


def roundup(a, b):
    return (a + b - 1) // b * b


def used_scale_bytes(prow, pcol):
    """Mask of the tiled scale buffer's bytes that hold a block of the prow x pcol matrix
    (docs/FORMATS.md: offset(r, c) in 128x4 tiles)."""
    ncb = roundup(pcol // 16, 4) // 4
    mask = torch.zeros(roundup(prow, 128) * ncb * 4, dtype=torch.bool)
    r = torch.arange(prow).unsqueeze(1)
    c = torch.arange(pcol // 16).unsqueeze(0)
    off = ((r // 128) * ncb + c // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4
    mask[off.flatten()] = True
    return mask


def ties_input(rows, cols, pts, dtype, g):
    """Blocks whose elements sit on E2M1 midpoints after scaling: each block holds its amax
    6 * s * pts (pinning the E4M3 scale s) and the rest tie * s * pts."""
    ties = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.5, 1.5, 3.0])
    x = torch.empty(rows, cols, dtype=torch.float64)
    for r in range(rows):
        for cb in range(cols // 16):
            e = int(torch.randint(-6, 4, (1,), generator=g))
            mant = int(torch.randint(8, 16, (1,), generator=g))
            s = mant / 8.0 * 2.0 ** e
            pick = ties[torch.randint(0, len(ties), (16,), generator=g)]
            sign = torch.where(torch.rand(16, generator=g) < 0.5, -1.0, 1.0)
            blk = pick.double() * sign * s * pts
            blk[int(torch.randint(0, 16, (1,), generator=g))] = 6.0 * s * pts
            x[r, cb * 16:(cb + 1) * 16] = blk
    return x.to(dtype)


def cases():
    """name -> (x, scale_mode, static_pts or None).  Generated on the CPU, deterministic."""
    g = torch.Generator().manual_seed(20261213)
    out = {}

    def randn(r, c, s=1.0):
        return torch.randn(r, c, generator=g, dtype=torch.float64) * s

    for dt, tag in ((torch.bfloat16, "bf16"), (torch.float16, "f16")):
        big = 6e4 if dt == torch.float16 else 1e30
        out[f"{tag}-gauss"] = (randn(64, 256).to(dt), "float", None)
        out[f"{tag}-gauss-layout"] = (randn(64, 256).to(dt), "layout", None)
        out[f"{tag}-weights-0.02"] = (randn(64, 256, 0.02).to(dt), "float", None)
        out[f"{tag}-student-t2"] = (torch.distributions.StudentT(2.0).sample((64, 256)).double()
                                    .clamp(-big, big).to(dt), "float", None)
        out[f"{tag}-cauchy"] = (torch.distributions.Cauchy(0.0, 1.0).sample((64, 256)).double()
                                .clamp(-big, big).to(dt), "float", None)
        out[f"{tag}-uniform"] = ((torch.rand(64, 256, generator=g, dtype=torch.float64) * 2 - 1).to(dt),
                                 "float", None)
        # E2M1 ties after scaling, with power-of-two and other static scales, and computed
        out[f"{tag}-ties-pts1"] = (ties_input(32, 256, 1.0, dt, g), "static", 1.0)
        out[f"{tag}-ties-pts2m7"] = (ties_input(32, 256, 2.0 ** -7, dt, g), "static", 2.0 ** -7)
        out[f"{tag}-ties-pts0.37"] = (ties_input(32, 256, 0.37, dt, g), "static", 0.37)
        out[f"{tag}-ties-computed"] = (ties_input(32, 256, 0.01, dt, g), "float", None)
        # massive-activation channels: a few columns 100-1000x larger
        x = randn(32, 1024)
        for col, f in ((7, 100.0), (300, -300.0), (301, 1000.0), (777, 550.0)):
            x[:, col] *= f
        out[f"{tag}-massive"] = (x.to(dt), "float", None)
        out[f"{tag}-massive-layout"] = (x.to(dt), "layout", None)
        out[f"{tag}-massive-static"] = (x.to(dt), "static", 0.05)
        # near zero and subnormal
        tiny = 1e-38 if dt == torch.bfloat16 else 3e-6
        x = randn(32, 256, tiny)
        x[torch.rand(32, 256, generator=g) < 0.3] = 0.0
        out[f"{tag}-subnormal"] = (x.to(dt), "float", None)
        x = randn(32, 256)
        x[::3, ::5] *= (1e-36 if dt == torch.bfloat16 else 1e-5)
        out[f"{tag}-mixed-tiny"] = (x.to(dt), "float", None)
        # shapes: rows not a multiple of 128 (and of 16: the padded, bounds-checked path)
        out[f"{tag}-rows-200"] = (randn(200, 128).to(dt), "float", None)
        out[f"{tag}-rows-17"] = (randn(17, 128).to(dt), "float", None)
        out[f"{tag}-rows-33-cols-100"] = (randn(33, 100).to(dt), "float", None)
        # static scales: small (blocks clamp at 448), large, tiny
        x = randn(64, 256)
        out[f"{tag}-static-small"] = (x.to(dt), "static", 1e-4)
        out[f"{tag}-static-large"] = (x.to(dt), "static", 3.7)
        # NaN / Inf (the kernel has no checks)
        x = randn(32, 64)
        x[3, 5] = float("nan")
        x[9, 9] = float("inf")
        x[20, 32:48] = float("nan")  # a whole block of NaN
        out[f"{tag}-nan-inf-static"] = (x.to(dt), "static", 0.002)
        x = randn(32, 64)
        x[3, 5] = float("-inf")
        out[f"{tag}-inf-computed"] = (x.to(dt), "float", None)
        out[f"{tag}-all-zero"] = (torch.zeros(32, 64, dtype=dt), "float", None)
    # the aligned path's overrun (16 x 48: 768 elements, half a CTA past the end)
    out["bf16-overrun-16x48"] = (randn(16, 48).to(torch.bfloat16), "float", None)
    return out


def main():
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        print(__doc__)
        return 0 if len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help") else 2
    out = sys.argv[1]
    if not torch.cuda.is_available():
        print("comfy_cuda_golden: no CUDA device", file=sys.stderr)
        return 2
    if not getattr(ck_cuda, "_EXT_AVAILABLE", False):
        print(f"comfy_cuda_golden: comfy-kitchen's CUDA extension did not load: {ck_cuda._EXT_ERROR}",
              file=sys.stderr)
        return 2
    os.makedirs(out, exist_ok=True)
    dev = torch.device("cuda")
    gpu = torch.cuda.get_device_name(0)
    meta0 = {"generator": f"comfy-kitchen {importlib.metadata.version('comfy-kitchen')} CUDA quantize_nvfp4 "
                          f"(compiled) on {gpu}, torch {torch.__version__}; eager quantize_nvfp4 on the CPU; "
                          "tools/comfy_cuda_golden.py"}
    n_diff, total = 0, 0
    for name, (x, mode, static) in cases().items():
        rows, cols = x.shape
        pad = rows % 16 != 0 or cols % 16 != 0
        xg = x.to(dev)
        if mode == "static":
            pts = torch.tensor(static, dtype=torch.float32)
        elif mode == "layout":  # TensorCoreNVFP4Layout.quantize, scale=None
            pts = (torch.amax(xg.abs()) / (448.0 * 6.0)).to(torch.float32).cpu()
        else:
            pts = (torch.amax(x.abs().float()) / (448.0 * 6.0)).reshape(())
        codes, scales = ck_cuda.quantize_nvfp4(xg, pts.to(dev), 0.0, pad, True)
        torch.cuda.synchronize()
        codes, scales = codes.cpu(), scales.contiguous().view(torch.uint8).cpu()
        e_codes, e_scales = ck_eager.quantize_nvfp4(x, pts.clone(), 0.0, pad, True)
        e_scales = e_scales.contiguous().view(torch.uint8)
        prow, pcol = roundup(rows, 16), roundup(cols, 16)
        pad_nonzero = bool(scales.flatten()[~used_scale_bytes(prow, pcol)].any())
        meta = dict(meta0, scale_mode=mode, aligned=str(int(not pad)),
                    overrun=str(int((prow * pcol) % 512 != 0)), pad_nonzero=str(int(pad_nonzero)))
        save(os.path.join(out, name + ".safetensors"),
             {"x": x, "expect.codes": codes, "expect.scales": scales, "expect.scale_2": pts.reshape(()),
              "eager.codes": e_codes, "eager.scales": e_scales}, meta)
        dc = int((codes != e_codes).sum())
        ds = int((scales != e_scales).sum())
        total += 1
        n_diff += (dc + ds) > 0
        print(f"{name}: {tuple(x.shape)} {str(x.dtype)[6:]} scale={mode} pts=0x{struct.unpack('<I', struct.pack('<f', float(pts)))[0]:08x}"
              f" cuda-vs-eager: {dc} code bytes, {ds} scale bytes differ"
              f"{' (scale padding nonzero)' if pad_nonzero else ''}")
    print(f"comfy_cuda_golden: {total} cases in {out}; the compiled kernel differs from eager on {n_diff}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
