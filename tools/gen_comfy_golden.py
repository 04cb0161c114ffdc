#!/usr/bin/env python3
"""Golden NVFP4 quantizations made by comfy-kitchen itself, for tests/unit/test_comfy_golden.c.

Each case is one safetensors file in tests/golden/comfy-kitchen/:
  x              the input (BF16, F16 or F32, 2-D)
  expect.codes   U8 [roundup(rows,16), roundup(cols,16)/2], E2M1 codes, element 2i in the high nibble
  expect.scales  U8 [roundup(rows,128), roundup(cols/16,4)], E4M3 block scales, cuBLAS 128x4 tiled
  expect.scale_2 F32 [], the per-tensor scale: torch.amax(torch.abs(x)).float() / (448 * 6)
made by comfy-kitchen's eager quantize_nvfp4 (the code ComfyUI runs), with pad_16x when a
dimension is not a multiple of 16.  The generator and torch versions go in the metadata.

With --raw DIR it also (re)makes the expected outputs of the raw 256 x 1024 cases in DIR
(tests/golden/comfy-quantize/, read by tests/unit/test_quant.c and tests/cli/test_cli.py): the
inputs CASE.x.bf16 (BF16 bits) and CASE.gs.f32 (the per-tensor scale, checked to be
torch.amax(|x|) / 2688) are data; written are CASE.eager.q.u8 (codes, high nibble first),
CASE.eager.s.u8 (tiled E4M3 scales) and CASE.eager.dq.f32 (comfy-kitchen's dequantize_nvfp4 to FP32).

Needs torch and comfy-kitchen (pip install torch comfy-kitchen packaging); not run by the tests:
    python3 tools/gen_comfy_golden.py tests/golden/comfy-kitchen --raw tests/golden/comfy-quantize
"""
import importlib.metadata
import json
import os
import struct
import sys

import torch
from comfy_kitchen.backends.eager import quantization as ck_eager

ST_DTYPE = {torch.bfloat16: ("BF16", torch.int16), torch.float16: ("F16", torch.int16),
            torch.float32: ("F32", torch.int32), torch.uint8: ("U8", torch.uint8)}


def save(path, tensors, metadata):
    header, blobs, off = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        st_name, view = ST_DTYPE[t.dtype]
        raw = t.contiguous().view(view).numpy().tobytes()
        header[name] = {"dtype": st_name, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    os.replace(tmp, path)


def quantize(x):
    pts = torch.amax(torch.abs(x)).float() / (448.0 * 6.0)
    pad = x.shape[0] % 16 != 0 or x.shape[1] % 16 != 0
    codes, scales = ck_eager.quantize_nvfp4(x, pts, 0.0, pad, True)
    return codes, scales.contiguous().view(torch.uint8), pts.reshape(())


def cases():
    g = torch.Generator().manual_seed(20261201)

    def randn(r, c, s=1.0, dtype=torch.bfloat16):
        return (torch.randn(r, c, generator=g) * s).to(dtype)

    def rand(r, c):
        return torch.rand(r, c, generator=g)

    def bf16_bits(bits):
        return torch.tensor(bits, dtype=torch.int16).view(torch.bfloat16)

    c = {}
    c["gauss-tiny"] = randn(64, 256, 1e-3)
    c["gauss-huge"] = randn(64, 256, 1e4)
    c["weights-0.02"] = randn(128, 512, 0.02)
    c["student-t3"] = torch.distributions.StudentT(3.0).sample((64, 256)).to(torch.bfloat16)
    c["cauchy"] = torch.distributions.Cauchy(0.0, 1.0).sample((64, 256)).clamp(-1e30, 1e30).to(torch.bfloat16)
    c["uniform"] = (rand(64, 256) * 2 - 1).to(torch.bfloat16)
    c["positive-uniform"] = rand(64, 256).to(torch.bfloat16)
    x = randn(64, 256); x[rand(64, 256) < 0.9] = 0; c["sparse-90pct"] = x
    x = randn(64, 256); x[:, 32:96] = 0; x[7, :] = 0; c["zero-blocks-and-row"] = x
    x = randn(64, 256); x[x.abs() < 0.5] = -0.0; c["negative-zeros"] = x
    c["subnormal-bf16"] = (torch.randn(64, 256, generator=g) * 1e-38).to(torch.bfloat16)
    x = randn(64, 256); x[::3, ::7] *= 1e-36; c["mixed-subnormal"] = x
    c["near-bf16-max"] = randn(64, 256, 1e37)
    x = randn(64, 256); x[rand(64, 256) < 0.002] *= 1e4; c["rare-huge-outliers"] = x
    x = randn(64, 256); x[:, [5, 77, 200]] *= 300; c["outlier-columns"] = x
    x = randn(64, 256) * torch.logspace(-6, 3, 64).unsqueeze(1).to(torch.bfloat16); c["row-scales"] = x.to(torch.bfloat16)
    c["constant"] = torch.full((64, 256), 0.3).to(torch.bfloat16)
    c["e2m1-grid"] = torch.tensor([0, .25, .5, .75, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, -6]).repeat(64, 16).to(torch.bfloat16)
    c["small-integers"] = torch.randint(-8, 9, (64, 256), generator=g).to(torch.bfloat16)
    c["rows-200"] = randn(200, 64)
    c["rows-1"] = randn(1, 256)
    c["rows-17"] = randn(17, 128)
    c["cols-80"] = randn(64, 80)
    c["rows-130-cols-48"] = randn(130, 48)
    c["cols-72-padded"] = randn(64, 72)
    c["rows-33-cols-100-padded"] = randn(33, 100)
    c["all-zero"] = torch.zeros(32, 64, dtype=torch.bfloat16)
    x = randn(32, 64); x[3, 5] = float("inf"); x[9, 9] = float("-inf"); c["inf"] = x
    x = randn(32, 64); x[3, 5] = float("nan"); c["one-nan"] = x
    x = randn(32, 64); x[3, 5] = bf16_bits([-0x40])[0]; x[20, 60] = bf16_bits([0x7F81])[0]; c["nan-signs-payloads"] = x
    x = randn(32, 64); x[3, 5] = float("nan"); x[9, 9] = float("inf"); c["nan-and-inf"] = x
    c["all-nan"] = torch.full((16, 32), float("nan"), dtype=torch.bfloat16)
    c["f32-gauss"] = torch.randn(64, 128, generator=g)
    c["f16-gauss"] = torch.randn(64, 128, generator=g).half()
    x = torch.randn(32, 64, generator=g); x[1, 2] = float("nan"); c["f32-one-nan"] = x
    x = torch.randn(32, 64, generator=g).half(); x[1, 2] = float("nan"); c["f16-one-nan"] = x
    c["f32-subnormal"] = torch.randn(32, 64, generator=g) * 1e-40
    c["f16-subnormal"] = (torch.randn(32, 64, generator=g) * 1e-6).half()
    return c


RAW_CASES = ("gauss", "outliers", "ties")
RAW_ROWS, RAW_COLS = 256, 1024


def write_bytes(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def make_raw(d):
    for name in RAW_CASES:
        xb = open(os.path.join(d, name + ".x.bf16"), "rb").read()
        assert len(xb) == RAW_ROWS * RAW_COLS * 2, name
        x = torch.frombuffer(bytearray(xb), dtype=torch.int16).view(torch.bfloat16).reshape(RAW_ROWS, RAW_COLS)
        gs = torch.frombuffer(bytearray(open(os.path.join(d, name + ".gs.f32"), "rb").read()), dtype=torch.float32)
        pts = torch.amax(torch.abs(x)).float() / (448.0 * 6.0)
        assert gs.shape == (1,) and gs.view(torch.int32).item() == pts.reshape(1).view(torch.int32).item(), name
        codes, scales = ck_eager.quantize_nvfp4(x, pts, 0.0, False, True)
        dq = ck_eager.dequantize_nvfp4(codes, pts, scales, torch.float32, True)
        write_bytes(os.path.join(d, name + ".eager.q.u8"), codes.contiguous().numpy().tobytes())
        write_bytes(os.path.join(d, name + ".eager.s.u8"), scales.contiguous().view(torch.uint8).numpy().tobytes())
        write_bytes(os.path.join(d, name + ".eager.dq.f32"), dq.contiguous().numpy().tobytes())
        print(f"{name}: raw {RAW_ROWS}x{RAW_COLS} bf16")


def main():
    args = sys.argv[1:]
    if "--raw" in args:
        i = args.index("--raw")
        make_raw(args[i + 1])
        del args[i:i + 2]
        if not args:
            return
    out = args[0] if args else "tests/golden/comfy-kitchen"
    os.makedirs(out, exist_ok=True)
    meta = {"generator": f"comfy-kitchen {importlib.metadata.version('comfy-kitchen')} eager quantize_nvfp4, "
                         f"torch {torch.__version__} on the CPU; tools/gen_comfy_golden.py"}
    for name, x in cases().items():
        codes, scales, pts = quantize(x)
        save(os.path.join(out, name + ".safetensors"),
             {"x": x, "expect.codes": codes, "expect.scales": scales, "expect.scale_2": pts}, meta)
        print(f"{name}: {tuple(x.shape)} {x.dtype}")


if __name__ == "__main__":
    main()
