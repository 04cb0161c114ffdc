"""nvfp4.matmul: the CPU backend, the reference oracle and the CLI, bit for bit."""
import numpy as np
import pytest

import nvfp4
from _helpers import (BF16, assert_bits_equal, cli, random_bf16, st_read, st_write,
                      tile_scales, to_numpy)

MODELS = ["sm90", "exact", "sm120"]


def _random_nvfp4(rng, rows, cols, nan_scales=False):
    """Adversarial operands straight from random bytes: every E2M1 code, E4M3
    scales across the whole range (subnormals, 448; NaN 0x7F when asked),
    a per-tensor scale far from 1."""
    qdata = rng.integers(0, 256, (rows, cols // 2), dtype=np.uint8)
    scales = rng.integers(0, 0x7F, (rows, cols // 16), dtype=np.uint8)  # 0x7F is NaN
    if nan_scales:
        scales[rng.integers(0, rows), rng.integers(0, cols // 16)] = 0x7F
        scales[rng.integers(0, rows), rng.integers(0, cols // 16)] = 0xFF
    return nvfp4.NVFP4Tensor(qdata, tile_scales(scales, rows, cols),
                             np.float32(10.0 ** rng.uniform(-4, 4)))


def _quantized(rng, rows, cols, scale=1.0):
    return nvfp4.quantize(random_bf16(rng, rows, cols, scale))


@pytest.mark.parametrize("model", MODELS)
def test_cpu_equals_reference(model):
    rng = np.random.default_rng(21)
    for m, n, k in [(1, 16, 16), (16, 32, 64), (33, 48, 128), (7, 24, 320)]:
        for adversarial in (False, True):
            a = _random_nvfp4(rng, m, k) if adversarial else _quantized(rng, m, k, 3.0)
            b = _random_nvfp4(rng, n, k) if adversarial else _quantized(rng, n, k, 0.02)
            bias = rng.standard_normal(b.rows).astype(np.float32)
            for with_bias in (None, bias):
                raw_c, out_c = nvfp4.matmul(a, b, model=model, bias=with_bias, backend="cpu")
                raw_r, out_r = nvfp4.matmul(a, b, model=model, bias=with_bias, backend="ref")
                what = f"{model} {m}x{n}x{k} adversarial={adversarial} bias={with_bias is not None}"
                assert raw_c.dtype == np.float32 and out_c.dtype == BF16
                assert raw_c.shape == (a.rows, b.rows)
                assert_bits_equal(raw_c, raw_r, what + ": raw")
                assert_bits_equal(out_c, out_r, what + ": out")
                auto = nvfp4.matmul(a, b, model=model, bias=with_bias)
                assert_bits_equal(auto[0], raw_c, what + ": auto = cpu")


def test_nan_scales_follow_the_reference():
    rng = np.random.default_rng(22)
    a, b = _random_nvfp4(rng, 16, 64, nan_scales=True), _random_nvfp4(rng, 16, 64, nan_scales=True)
    raw_c, out_c = nvfp4.matmul(a, b, backend="cpu")
    raw_r, out_r = nvfp4.matmul(a, b, backend="ref")
    assert np.isnan(raw_r).any()
    assert_bits_equal(raw_c, raw_r, "NaN scales: raw")
    assert_bits_equal(out_c, out_r, "NaN scales: out")


@pytest.mark.parametrize("model", MODELS)
def test_against_cli(tmp_path, model):
    """The same raw and out as `nvfp4 matmul` on the same operands and bias."""
    rng = np.random.default_rng(23)
    a, b = _random_nvfp4(rng, 20, 96), _quantized(rng, 48, 96, 0.05)
    bias = rng.standard_normal(48).astype(np.float32).astype(BF16)
    tensors = {}
    for name, t in (("a", a), ("b", b)):
        tensors[name] = t.qdata
        tensors[name + "_scale"] = t.block_scale
        tensors[name + "_scale_2"] = np.float32(t.per_tensor_scale).reshape(())
    tensors["bias"] = bias
    f, out = tmp_path / "ops.safetensors", tmp_path / "out.safetensors"
    st_write(f, tensors)
    cli("matmul", f"{f}:a", f"{f}:b", "-o", out, "--model", model, "--backend", "cpu",
        "--bias", f"{f}:bias")
    want = st_read(out)
    raw, res = nvfp4.matmul(a, b, model=model, bias=bias)
    assert_bits_equal(raw, want["raw"], f"{model}: raw vs CLI")
    assert_bits_equal(res, want["out"], f"{model}: out vs CLI")


def test_torch_cpu_operands(torch):
    """torch CPU tensors give the NumPy results, as torch tensors."""
    rng = np.random.default_rng(24)
    a, b = _quantized(rng, 24, 64, 2.0), _random_nvfp4(rng, 32, 64)
    bias = rng.standard_normal(32).astype(np.float32)
    raw, out = nvfp4.matmul(a, b, bias=bias)
    ta = nvfp4.NVFP4Tensor(torch.from_numpy(a.qdata),
                           torch.from_numpy(a.block_scale).view(torch.float8_e4m3fn),
                           torch.tensor(float(a.per_tensor_scale)), rows=a.rows)
    tb = nvfp4.NVFP4Tensor(torch.from_numpy(b.qdata), torch.from_numpy(b.block_scale),
                           float(b.per_tensor_scale))
    for backend in ("auto", "cpu", "ref"):
        traw, tout = nvfp4.matmul(ta, tb, bias=torch.from_numpy(bias), backend=backend)
        assert traw.dtype == torch.float32 and tout.dtype == torch.bfloat16
        assert_bits_equal(traw, raw, f"torch {backend}: raw")
        assert_bits_equal(tout, out, f"torch {backend}: out")
    # a BF16 bias is widened exactly: the same bits as its float32 value
    b16 = torch.from_numpy(bias).to(torch.bfloat16)
    assert_bits_equal(nvfp4.matmul(ta, tb, bias=b16)[1],
                      nvfp4.matmul(ta, tb, bias=b16.float())[1], "BF16 bias")


def test_k_slices_cpu_equals_reference():
    """K slices > 1 (the contract's slice rule): CPU backend vs the oracle,
    and a sliced result differs from the single chain somewhere (the slices
    are really taken)."""
    rng = np.random.default_rng(25)
    a, b = _random_nvfp4(rng, 9, 512), _random_nvfp4(rng, 16, 512)
    one = nvfp4.matmul(a, b, k_slices=1, backend="cpu")
    differs = False
    for s in (2, 3, 8):
        raw_c, out_c = nvfp4.matmul(a, b, k_slices=s, backend="cpu")
        raw_r, out_r = nvfp4.matmul(a, b, k_slices=s, backend="ref")
        assert_bits_equal(raw_c, raw_r, f"k_slices={s}: raw")
        assert_bits_equal(out_c, out_r, f"k_slices={s}: out")
        differs |= not np.array_equal(raw_c.view(np.uint32), one[0].view(np.uint32))
    assert differs, "k_slices 2, 3 and 8 gave the single chain's bits everywhere"
    # one slice of the whole K is the single chain
    assert_bits_equal(nvfp4.matmul(a, b, k_slices=1, backend="ref")[0], one[0], "k_slices=1")


def test_cuda_backend_without_device():
    """Here (no GPU) backend='cuda' on host data reports the library's NoDevice."""
    if nvfp4.cuda_available():
        pytest.skip("a usable sm_90 GPU is present")
    rng = np.random.default_rng(26)
    a, b = _quantized(rng, 16, 32), _quantized(rng, 16, 32)
    with pytest.raises(nvfp4.NoDeviceError) as e:
        nvfp4.matmul(a, b, backend="cuda")
    assert e.value.message and "nvfp4_gemm_cuda_host" in str(e.value)


def test_outputs_are_fresh_arrays():
    rng = np.random.default_rng(27)
    a, b = _quantized(rng, 16, 32), _quantized(rng, 16, 32)
    r1, _ = nvfp4.matmul(a, b)
    r2, _ = nvfp4.matmul(a, b)
    assert r1.ctypes.data != r2.ctypes.data
    assert_bits_equal(r1, r2, "repeat")
    assert np.isfinite(to_numpy(r1)).all()
