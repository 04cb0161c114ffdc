"""nvfp4.comfy on the CPU: the registry, comfy-kitchen's argument conventions,
and comfy-kitchen's own quantizer and NVFP4 linear giving our bits.

register(cpu=True) lets the backend take CPU tensors, so comfy-kitchen's
dispatch runs end to end here; on an H200 the same functions run the CUDA
kernel (tests/gpu/test_python_cuda.py)."""
import numpy as np
import pytest

import nvfp4
from _helpers import assert_bits_equal, random_bf16


@pytest.fixture
def ck(comfy_kitchen, torch):
    import nvfp4.comfy as nc
    from comfy_kitchen.registry import registry
    before = list(registry._priority)
    info = nc.register(cpu=True)
    assert info["registered"]
    yield comfy_kitchen
    nc.unregister()
    registry.set_priority(before)
    assert "nvfp4" not in registry._priority


def _bf16(torch, rng, r, c, s=1.0):
    return torch.from_numpy(random_bf16(rng, r, c, s).view(np.int16)).view(torch.bfloat16)


def _kwargs_quantize(x, s, pad):
    return {"x": x, "per_tensor_scale": s, "epsilon": 0.0, "pad_16x": pad, "hi_first": True}


def test_registry(ck, torch):
    from comfy_kitchen.registry import registry
    info = ck.list_backends()["nvfp4"]
    assert info["available"] and not info["disabled"]
    assert info["capabilities"] == ["quantize_nvfp4", "scaled_mm_nvfp4"]
    assert registry._priority[0] == "nvfp4"
    x = torch.zeros(16, 32, dtype=torch.bfloat16)
    s = torch.tensor(1.0)
    impl = registry.get_implementation("quantize_nvfp4", kwargs=_kwargs_quantize(x, s, False))
    assert impl.__module__ == "nvfp4.comfy"
    # cols not a multiple of 16 without pad_16x: our constraint declines, eager takes it
    odd = torch.zeros(16, 24, dtype=torch.bfloat16)
    name = registry.get_capable_backend("quantize_nvfp4", _kwargs_quantize(odd, s, False))
    assert name != "nvfp4"


def test_cuda_only_registration_leaves_cpu_alone(comfy_kitchen, torch):
    import nvfp4.comfy as nc
    from comfy_kitchen.registry import registry
    before = list(registry._priority)
    try:
        nc.register(cpu=False)
        x = torch.zeros(16, 32, dtype=torch.bfloat16)
        name = registry.get_capable_backend("quantize_nvfp4",
                                            _kwargs_quantize(x, torch.tensor(1.0), False))
        assert name != "nvfp4"
    finally:
        nc.unregister()
        registry.set_priority(before)


@pytest.mark.parametrize("shape,pad", [((32, 64), False), ((40, 96), True), ((33, 100), True),
                                       ((20, 48), False)])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_quantize_nvfp4_equals_eager(ck, torch, shape, pad, dtype):
    """ck.quantize_nvfp4 through the registry (ours) == comfy-kitchen's eager
    implementation, every byte, for both nibble orders."""
    from comfy_kitchen.backends.eager import quantization as eager
    rng = np.random.default_rng(51)
    x = (torch.from_numpy(rng.standard_t(3.0, shape).astype(np.float32)) * 4).to(getattr(torch, dtype))
    s = torch.amax(x.abs()).float() / 2688.0
    for hi_first in (True, False):
        q, bs = ck.quantize_nvfp4(x, s, pad_16x=pad, hi_first=hi_first)
        q0, bs0 = eager.quantize_nvfp4(x, s, 0.0, pad, hi_first)
        assert q.shape == q0.shape and bs.shape == bs0.shape
        assert bs.dtype == torch.float8_e4m3fn and q.dtype == torch.uint8
        assert_bits_equal(q, q0, f"{shape} {dtype} pad={pad} hi_first={hi_first}: codes")
        assert_bits_equal(bs, bs0, f"{shape} {dtype} pad={pad}: scales")


def test_scaled_mm_nvfp4_conventions(ck, torch):
    """ck.scaled_mm_nvfp4's arguments (tensor scales, alpha, bias, out_dtype)
    map onto our GEMM: out = BF16(FP32(alpha * raw) + bias)."""
    rng = np.random.default_rng(52)
    x, w = _bf16(torch, rng, 32, 128, 2.0), _bf16(torch, rng, 48, 128, 0.05)
    sx, sw = torch.amax(x.abs()).float() / 2688, torch.amax(w.abs()).float() / 2688
    qx, bx = ck.quantize_nvfp4(x, sx)
    qw, bw = ck.quantize_nvfp4(w, sw)
    bias = _bf16(torch, rng, 1, 48)[0]
    A, B = nvfp4.NVFP4Tensor(qx, bx, sx), nvfp4.NVFP4Tensor(qw, bw, sw)
    raw, out = nvfp4.matmul(A, B, bias=bias)
    y = ck.scaled_mm_nvfp4(qx, qw, sx, sw, bx, bw, bias=bias)
    assert y.dtype == torch.bfloat16 and y.shape == (32, 48)
    assert_bits_equal(y, out, "scaled_mm bf16 + bias")
    _, out_nb = nvfp4.matmul(A, B)
    assert_bits_equal(ck.scaled_mm_nvfp4(qx, qw, sx, sw, bx, bw), out_nb, "no bias")
    alpha = (sx * sw).reshape(1)
    assert_bits_equal(ck.scaled_mm_nvfp4(qx, qw, sx, sw, bx, bw, alpha=alpha), out_nb, "alpha")
    # float32 / float16 outputs: FP32(alpha * raw) + bias, rounded once
    y32 = ck.scaled_mm_nvfp4(qx, qw, sx, sw, bx, bw, bias=bias, out_dtype=torch.float32)
    want32 = raw * (sx * sw) + bias.float()
    assert y32.dtype == torch.float32
    assert_bits_equal(y32, want32, "float32 out")
    y16 = ck.scaled_mm_nvfp4(qx, qw, sx, sw, bx, bw, out_dtype=torch.float16)
    assert_bits_equal(y16, (raw * (sx * sw)).half(), "float16 out")


@pytest.mark.parametrize("m,n,k", [(40, 64, 96), (7, 40, 32), (128, 48, 80), (1, 16, 16)])
def test_quantized_tensor_linear(ck, torch, m, n, k):
    """ComfyUI's NVFP4 linear, F.linear on TensorCoreNVFP4Layout QuantizedTensors
    (with a bias: aten.addmm, which comfy-kitchen 0.2.40 leaves to
    dequantization; register() adds the handler) == nvfp4.linear."""
    from comfy_kitchen.tensor import QuantizedTensor
    rng = np.random.default_rng(53 + m)
    x, w, b = _bf16(torch, rng, m, k, 3.0), _bf16(torch, rng, n, k, 0.05), _bf16(torch, rng, 1, n)[0]
    wq = QuantizedTensor.from_float(w, "TensorCoreNVFP4Layout")
    xq = QuantizedTensor.from_float(x, "TensorCoreNVFP4Layout")
    W = nvfp4.NVFP4Tensor(wq._qdata, wq._params.block_scale, wq._params.scale)
    scale = float(xq._params.scale)  # the layout's own scale (BF16-rounded amax / 2688)
    for bias in (None, b):
        y = torch.nn.functional.linear(xq, wq, bias)
        full = None if bias is None else torch.nn.functional.pad(bias.float(), (0, W.rows - n))
        want = nvfp4.linear(x, nvfp4.Layer(W, bias=full), input_scale=scale)[:, :n]
        assert y.shape == (m, n) and y.dtype == torch.bfloat16
        assert_bits_equal(y, want, f"QuantizedTensor linear {m}x{n}x{k} bias={bias is not None}")


def test_patch_comfyui_gate(ck, torch, monkeypatch):
    """supports_nvfp4_compute is wrapped, not replaced: the original answer
    stands, and here (no sm_90 GPU) the wrapper adds nothing."""
    import sys
    import types
    import nvfp4.comfy as nc
    mm = types.ModuleType("comfy.model_management")
    calls = []
    mm.supports_nvfp4_compute = lambda device=None: calls.append(device) or False
    monkeypatch.setitem(sys.modules, "comfy.model_management", mm)
    assert nc.patch_comfyui()
    assert mm.supports_nvfp4_compute._nvfp4_wrapped
    if not torch.cuda.is_available():
        assert mm.supports_nvfp4_compute("cpu") is False
        assert calls == ["cpu"]
    assert nc.patch_comfyui()  # idempotent
    assert mm.supports_nvfp4_compute.__wrapped__.__name__ == "<lambda>"
