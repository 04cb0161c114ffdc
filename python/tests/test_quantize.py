"""nvfp4.quantize: comfy-kitchen's golden bytes, the CLI's bytes, dequantize."""
import os

import numpy as np
import pytest

import nvfp4
from _helpers import (BF16, E4M3, GOLDEN, assert_bits_equal, bits, cli, random_bf16, st_read,
                      st_write, tiled_offsets, to_numpy)

GOLDEN_CASES = sorted(f for f in os.listdir(GOLDEN) if f.endswith(".safetensors"))


def test_golden_cases_present():
    assert len(GOLDEN_CASES) >= 38, GOLDEN


@pytest.mark.parametrize("case", GOLDEN_CASES)
def test_comfy_kitchen_golden(case):
    """Every byte comfy-kitchen's eager quantize_nvfp4 wrote (tools/gen_comfy_golden.py)."""
    t = st_read(os.path.join(GOLDEN, case))
    q = nvfp4.quantize(t["x"])
    assert_bits_equal(q.qdata, t["expect.codes"], f"{case}: codes")
    assert_bits_equal(q.block_scale, t["expect.scales"], f"{case}: tiled scales")
    assert_bits_equal(np.float32(q.per_tensor_scale), t["expect.scale_2"].astype(np.float32),
                      f"{case}: per-tensor scale")
    assert q.qdata.dtype == np.uint8 and q.block_scale.dtype == np.uint8
    assert q.block_scale.shape == t["expect.scales"].shape
    # the scale computed separately is the same one
    assert bits(nvfp4.per_tensor_scale(t["x"])) == bits(t["expect.scale_2"].astype(np.float32))


@pytest.mark.parametrize("case", GOLDEN_CASES[:: 5])
def test_comfy_kitchen_golden_torch(case, torch):
    t = st_read(os.path.join(GOLDEN, case))
    x = t["x"]
    xt = torch.from_numpy(x.view(np.int16)).view(torch.bfloat16) if x.dtype == BF16 \
        else torch.from_numpy(x)
    q = nvfp4.quantize(xt)
    assert isinstance(q.qdata, torch.Tensor) and q.qdata.dtype == torch.uint8
    assert q.block_scale.dtype == torch.float8_e4m3fn
    assert q.per_tensor_scale.dtype == torch.float32 and q.per_tensor_scale.dim() == 0
    assert_bits_equal(q.qdata, t["expect.codes"], f"{case}: codes (torch)")
    assert_bits_equal(q.block_scale, t["expect.scales"], f"{case}: scales (torch)")
    assert_bits_equal(q.per_tensor_scale.reshape(1),
                      t["expect.scale_2"].astype(np.float32).reshape(1), f"{case}: scale_2 (torch)")


SHAPES = [(1, 16), (16, 64), (33, 100), (130, 48), (7, 8), (256, 272)]


@pytest.mark.parametrize("dtype", [BF16, np.dtype(np.float16), np.dtype(np.float32)])
@pytest.mark.parametrize("variant", ["eager", "cuda"])
def test_against_cli(tmp_path, dtype, variant):
    """The same bytes as `nvfp4 quantize` on random, heavy-tailed and odd-shaped
    inputs, computed and given per-tensor scales."""
    rng = np.random.default_rng(1234)
    tensors = {}
    for i, (r, c) in enumerate(SHAPES):
        x = rng.standard_t(2.0, (r, c)) * 10.0 ** rng.uniform(-3, 3)
        tensors[f"t{i}.weight"] = x.astype(np.float32).astype(dtype)
    src, dst = tmp_path / "in.safetensors", tmp_path / "out.safetensors"
    st_write(src, tensors)
    cli("quantize", src, dst, "--variant", variant)
    got = st_read(dst)
    for name, x in tensors.items():
        q = nvfp4.quantize(x, variant=variant)
        assert_bits_equal(q.qdata, got[name], f"{name}: codes")
        assert_bits_equal(q.block_scale, got[name + "_scale"].view(np.uint8), f"{name}: scales")
        assert_bits_equal(np.float32(q.per_tensor_scale), got[name + "_scale_2"], f"{name}: scale_2")
    # a given per-tensor scale
    fixed = np.float32(0.0123)
    cli("quantize", src, dst, "--variant", variant, "--per-tensor-scale", f"{float(fixed):.9g}")
    got = st_read(dst)
    for name, x in tensors.items():
        q = nvfp4.quantize(x, per_tensor_scale=fixed, variant=variant)
        assert bits(np.float32(q.per_tensor_scale)) == bits(fixed)
        assert_bits_equal(q.qdata, got[name], f"{name}: codes, fixed scale")
        assert_bits_equal(q.block_scale, got[name + "_scale"].view(np.uint8),
                          f"{name}: scales, fixed scale")


def test_scale_argument_forms():
    rng = np.random.default_rng(5)
    x = random_bf16(rng, 32, 64)
    ref = nvfp4.quantize(x, per_tensor_scale=np.float32(0.01))
    for form in (0.01, np.float32(0.01), np.array([0.01], dtype=np.float32),
                 np.array(0.01, dtype=np.float32)):
        q = nvfp4.quantize(x, per_tensor_scale=form)
        assert_bits_equal(q.qdata, ref.qdata, f"scale as {type(form).__name__}")


def _dequantize_numpy(q):
    """An independent dequantizer: E2M1 table x E4M3 (ml_dtypes), then one FP32
    multiply by the per-tensor scale."""
    e2m1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], np.float32)
    qd = to_numpy(q.qdata)[: q.rows]  # qdata holds ComfyUI's padding rows too
    codes = np.stack([qd >> 4, qd & 0xF], axis=-1).reshape(q.rows, q.cols)
    off = tiled_offsets(q.rows, q.cols)
    scales = to_numpy(q.block_scale).reshape(-1)[off].view(E4M3).astype(np.float32)
    prod = e2m1[codes].reshape(q.rows, q.cols // 16, 16) * scales[:, :, None]
    return (prod * np.float32(q.scale_value())).reshape(q.rows, q.cols).astype(np.float32)


@pytest.mark.parametrize("shape", [(16, 32), (200, 64), (33, 100)])
def test_dequantize(shape):
    rng = np.random.default_rng(9)
    x = random_bf16(rng, *shape, scale=30.0)
    x[0, :16] = 0  # a zero block
    q = nvfp4.quantize(x)
    d = q.dequantize()
    # x's rows (ComfyUI's padding rows stay in qdata), columns padded to 16
    assert q.rows == shape[0] and q.cols == -(-shape[1] // 16) * 16
    assert q.qdata.shape[0] == -(-shape[0] // 16) * 16
    assert d.dtype == np.float32 and d.shape == (q.rows, q.cols)
    assert_bits_equal(d, _dequantize_numpy(q), "dequantize vs independent numpy")
    assert_bits_equal(q.dequantize(BF16), d.astype(BF16), "dequantize(bfloat16)")
    assert_bits_equal(q.dequantize(np.float16), d.astype(np.float16), "dequantize(float16)")


def test_dequantize_torch_formula(torch):
    """The torch-ops dequantizer CUDA tensors use, run on the CPU against the C one."""
    from nvfp4._api import _dequantize_torch
    rng = np.random.default_rng(10)
    for shape in [(16, 32), (130, 96), (1, 16)]:
        x = torch.from_numpy(random_bf16(rng, *shape, scale=5.0).view(np.int16)).view(torch.bfloat16)
        q = nvfp4.quantize(x)
        assert_bits_equal(_dequantize_torch(q), q.dequantize(), f"{shape}: torch formula vs C")
        assert q.dequantize(torch.bfloat16).dtype == torch.bfloat16


def test_wrap_roundtrip():
    """NVFP4Tensor(qdata, block_scale, scale) wraps a quantization's arrays
    without copying; E4M3-typed scales are accepted too."""
    rng = np.random.default_rng(11)
    q = nvfp4.quantize(random_bf16(rng, 48, 96))
    w = nvfp4.NVFP4Tensor(q.qdata, q.block_scale.view(E4M3), q.per_tensor_scale)
    assert w.shape == q.shape
    assert w.qdata.ctypes.data == q.qdata.ctypes.data
    assert_bits_equal(w.dequantize(), q.dequantize(), "wrapped")
