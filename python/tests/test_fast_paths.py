"""The per-call fast paths: argument structs reused per thread, the C views and
device copies cached on NVFP4Tensor / Layer, out-only GEMMs, and the comfy-
kitchen direct dispatch -- each against the plain reference path, bit for
bit, with the reused structs poisoned between calls (a field a call forgets
to write reads as garbage), the caches' invalidation rules, and the CUDA
paths on emulated CUDA tensors (_fake_cuda.py: the structs C would read,
checked field by field; any host sync raises)."""
import ctypes
import itertools

import numpy as np
import pytest

import nvfp4
from nvfp4 import _api
from _helpers import BF16, assert_bits_equal, random_bf16

RNG = np.random.default_rng(77)


def poison_host_structs():
    st = _api._structs
    for name in ("linear", "gemm", "ta", "tb", "scale"):
        s = getattr(st, name)
        ctypes.memset(ctypes.addressof(s), 0xFF, ctypes.sizeof(s))


def as_torch(torch, a):
    if a.dtype == BF16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def torch_tensor(torch, t):
    return nvfp4.NVFP4Tensor(torch.from_numpy(t.qdata), torch.from_numpy(t.block_scale),
                             float(t.per_tensor_scale), rows=t.rows)


# ---- the host paths ------------------------------------------------------------
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_host_linear_every_field_written(kind, request):
    x = random_bf16(RNG, 7, 96, 2.0)
    w = nvfp4.quantize(random_bf16(RNG, 40, 96, 0.05))
    bias = RNG.standard_normal(40).astype(np.float32)
    if kind == "torch":
        torch = request.getfixturevalue("torch")
        x, w, bias = as_torch(torch, x), torch_tensor(torch, w), torch.from_numpy(bias)
    for mode, slices, b, ret_raw, var in itertools.product(
            ("static", "dynamic"), (1, 3), (None, bias), (False, True), ("eager", "cuda")):
        layer = nvfp4.Layer(w, input_scale=0.013, bias=b)
        what = f"{kind} {mode} S={slices} bias={b is not None} raw={ret_raw} {var}"
        want_raw, want_out = nvfp4.linear(x, layer, input_scale=mode, k_slices=slices,
                                          variant=var, backend="ref", return_raw=True)
        for _ in range(2):  # the second call runs on the layer's caches
            poison_host_structs()
            got = nvfp4.linear(x, layer, input_scale=mode, k_slices=slices, variant=var,
                               return_raw=ret_raw, threads=1)
            if ret_raw:
                assert_bits_equal(got[0], want_raw, what + ": raw")
                got = got[1]
            assert_bits_equal(got, want_out, what + ": out")


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_host_matmul_every_field_written(kind, request):
    a = nvfp4.quantize(random_bf16(RNG, 20, 128, 3.0))
    b = nvfp4.quantize(random_bf16(RNG, 32, 128, 0.05))
    bias = RNG.standard_normal(32).astype(np.float32)
    if kind == "torch":
        torch = request.getfixturevalue("torch")
        a, b, bias = torch_tensor(torch, a), torch_tensor(torch, b), torch.from_numpy(bias)
    for slices, bb, model in itertools.product((1, 2), (None, bias), ("sm90", "exact", "sm120")):
        want = nvfp4.matmul(a, b, model=model, k_slices=slices, bias=bb, backend="ref")
        poison_host_structs()
        got = nvfp4.matmul(a, b, model=model, k_slices=slices, bias=bb, threads=1)
        for g, w_, part in zip(got, want, ("raw", "out")):
            assert_bits_equal(g, w_, f"{kind} S={slices} {model} bias={bb is not None}: {part}")


def test_layer_bias_and_scale_follow_changes(torch):
    """A cached bias copy is dropped when the bias changes in place, when it
    is replaced, and never kept for tensors without a version counter; a new
    input_scale and a new per-tensor scale value are seen at once."""
    x = as_torch(torch, random_bf16(RNG, 5, 64, 2.0))
    w = torch_tensor(torch, nvfp4.quantize(random_bf16(RNG, 32, 64, 0.05)))
    b16 = as_torch(torch, random_bf16(RNG, 1, 32)[0]).clone()
    layer = nvfp4.Layer(w, input_scale=0.02, bias=b16)

    def want():
        ref = nvfp4.Layer(w, input_scale=layer.input_scale,
                          bias=None if layer.bias is None else layer.bias.float())
        return nvfp4.linear(x, ref, backend="ref")

    assert_bits_equal(nvfp4.linear(x, layer), want(), "bf16 bias")
    b16.add_(3.0)  # in place: the version counter moves
    assert_bits_equal(nvfp4.linear(x, layer), want(), "bias changed in place")
    layer.bias = as_torch(torch, random_bf16(RNG, 1, 32)[0])
    assert_bits_equal(nvfp4.linear(x, layer), want(), "bias replaced")
    layer.bias = None
    assert_bits_equal(nvfp4.linear(x, layer), want(), "bias dropped")
    layer.input_scale = 0.1
    assert layer.input_scale == float(np.float32(0.1))
    assert_bits_equal(nvfp4.linear(x, layer), want(), "input_scale replaced")
    w.per_tensor_scale.fill_(0.5)  # the weight's scale tensor, in place
    assert_bits_equal(nvfp4.linear(x, layer), want(), "per-tensor scale changed in place")
    with torch.inference_mode():  # inference tensors keep no version counter
        bi = as_torch(torch, random_bf16(RNG, 1, 32)[0]).clone()
        layer.bias = bi
        assert_bits_equal(nvfp4.linear(x, layer), want(), "inference-mode bias")
        bi.add_(1.0)
        assert_bits_equal(nvfp4.linear(x, layer), want(), "inference-mode bias changed")
    with pytest.raises(TypeError, match="NVFP4Tensor"):
        layer.weight = x


def test_numpy_bias_in_place():
    x = random_bf16(RNG, 3, 64)
    w = nvfp4.quantize(random_bf16(RNG, 16, 64, 0.05))
    for dtype in (np.float32, BF16):  # used in place / converted on every call
        bias = RNG.standard_normal(16).astype(np.float32).astype(dtype)
        layer = nvfp4.Layer(w, bias=bias)
        nvfp4.linear(x, layer)
        bias[:] = (bias.astype(np.float32) + 1).astype(dtype)
        want = nvfp4.linear(x, nvfp4.Layer(w, bias=bias.astype(np.float32)), backend="ref")
        assert_bits_equal(nvfp4.linear(x, layer), want, f"{dtype} bias changed in place")


# ---- the CUDA paths, emulated ----------------------------------------------------
@pytest.fixture
def fake_cuda(torch, monkeypatch):
    import _fake_cuda
    with _fake_cuda.emulation(monkeypatch) as s:
        yield s


def test_cuda_linear_emulated(torch, fake_cuda):
    from _fake_cuda import bits, HostSync
    fc = fake_cuda
    xh = as_torch(torch, random_bf16(RNG, 9, 224, 2.0))
    wh = nvfp4.quantize(random_bf16(RNG, 48, 224, 0.05))
    bias32 = torch.from_numpy(RNG.standard_normal(48).astype(np.float32))
    bias16 = as_torch(torch, random_bf16(RNG, 1, 48)[0])
    wt = torch_tensor(torch, wh)
    w = nvfp4.NVFP4Tensor(fc.tensor(wt.qdata), fc.tensor(wt.block_scale),
                          fc.tensor(wt.per_tensor_scale))
    assert w.is_cuda
    x = fc.tensor(xh)
    dscale = fc.tensor(torch.tensor(0.017))
    cases = itertools.product(("static", "dynamic", 0.011, "tensor"), (None, bias32, bias16),
                              (1, 2), (False, True), ("eager", "cuda"))
    for scale, bias, slices, ret_raw, var in cases:
        layer = nvfp4.Layer(w, input_scale=0.021, bias=None if bias is None else fc.tensor(bias))
        ref = nvfp4.Layer(wt, input_scale=0.021, bias=None if bias is None else bias.float())
        s_arg = dscale if scale == "tensor" else scale
        s_ref = 0.017 if scale == "tensor" else scale
        want_raw, want_out = nvfp4.linear(xh, ref, input_scale=s_ref, k_slices=slices,
                                          variant=var, backend="ref", return_raw=True)
        what = f"{scale} bias={None if bias is None else bias.dtype} S={slices} {var}"
        for _ in range(2):
            n_calls = len(fc.calls)
            got = nvfp4.linear(x, layer, input_scale=s_arg, k_slices=slices, variant=var,
                               return_raw=ret_raw)
            assert fc.calls[n_calls:] == [("nvfp4_linear_cuda", 0)]
            if ret_raw:
                assert (bits(got[0]) == bits(want_raw)).all(), what + ": raw"
                got = got[1]
            assert got.is_cuda and got.dtype == torch.bfloat16
            assert (bits(got) == bits(want_out)).all(), what + ": out"
    # [B, T, K] activations
    out3 = nvfp4.linear(x.reshape(3, 3, 224), nvfp4.Layer(w, 0.02))
    assert out3.shape == (3, 3, 48)
    want3 = nvfp4.linear(xh, nvfp4.Layer(wt, 0.02), backend="ref")
    assert (bits(out3).reshape(9, 48) == bits(want3)).all()
    assert fc.guards == []  # the current device was x's: no device switch
    with pytest.raises(HostSync):  # the harness does catch a read-back
        torch.ops.aten._local_scalar_dense.default(dscale)
    with pytest.raises(HostSync):
        torch.ops.aten._to_copy.default(dscale, device=torch.device("cpu"))


def test_cuda_weight_rows_not_multiple_of_16(torch, fake_cuda):
    """A weight of 40 rows (quantize keeps them; qdata holds ComfyUI's padding
    to 48) runs on the kernels with N = 48, and the results are its 40
    columns: the host backend's bits."""
    from _fake_cuda import bits
    fc = fake_cuda
    wt = torch_tensor(torch, nvfp4.quantize(random_bf16(RNG, 40, 96, 0.05)))
    assert wt.rows == 40 and wt.qdata.shape[0] == 48
    w = nvfp4.NVFP4Tensor(fc.tensor(wt.qdata), fc.tensor(wt.block_scale),
                          fc.tensor(wt.per_tensor_scale), rows=40)
    bias = as_torch(torch, random_bf16(RNG, 1, 40)[0]).float()
    xh = as_torch(torch, random_bf16(RNG, 3, 96))
    want = nvfp4.linear(xh, nvfp4.Layer(wt, 0.02, bias), backend="ref")
    got = nvfp4.linear(fc.tensor(xh), nvfp4.Layer(w, 0.02, fc.tensor(bias)))
    assert got.shape == (3, 40) and (bits(got) == bits(want)).all()
    a = nvfp4.quantize(xh)
    ad = nvfp4.NVFP4Tensor(fc.tensor(a.qdata), fc.tensor(a.block_scale),
                           fc.tensor(a.per_tensor_scale), rows=3)
    raw, out = nvfp4.matmul(ad, w, bias=fc.tensor(bias))
    wraw, wout = nvfp4.matmul(a, wt, bias=bias, backend="ref")
    assert raw.shape == (3, 40) and (bits(raw) == bits(wraw)).all() and (bits(out) == bits(wout)).all()


def test_cuda_caches_follow_stream_and_device(torch, fake_cuda):
    """The static scale and a converted bias are made again on another stream
    (their fill is queued on the stream they were made on); a call for a
    device that is not current switches to it around the launch only."""
    from _fake_cuda import bits
    fc = fake_cuda
    wt = torch_tensor(torch, nvfp4.quantize(random_bf16(RNG, 32, 64, 0.05)))
    w = nvfp4.NVFP4Tensor(fc.tensor(wt.qdata), fc.tensor(wt.block_scale),
                          fc.tensor(wt.per_tensor_scale))
    b16 = as_torch(torch, random_bf16(RNG, 1, 32)[0])
    layer = nvfp4.Layer(w, input_scale=0.03, bias=fc.tensor(b16))
    xh = as_torch(torch, random_bf16(RNG, 4, 64))
    x = fc.tensor(xh)
    want = nvfp4.linear(xh, nvfp4.Layer(wt, 0.03, b16.float()), backend="ref")
    assert (bits(nvfp4.linear(x, layer)) == bits(want)).all()
    scale1, bias1 = layer._scale_cache[1], layer._bias_cache[2]
    assert (bits(nvfp4.linear(x, layer)) == bits(want)).all()
    assert layer._scale_cache[1] is scale1 and layer._bias_cache[2] is bias1  # reused
    fc.stream = 0x6000
    assert (bits(nvfp4.linear(x, layer)) == bits(want)).all()
    assert layer._scale_cache[1] is not scale1 and layer._bias_cache[2] is not bias1
    fc.device = 1  # another device is current: switch to x's around the call
    assert (bits(nvfp4.linear(x, layer)) == bits(want)).all()
    assert fc.guards == [0] and fc.calls[-1] == ("nvfp4_linear_cuda", 0) and fc.device == 1
    fc.device = 0
    # inside a CUDA graph capture the caches are neither used nor updated: the
    # scale and the bias copy are made again, in the graph, on every call
    scale2, bias2 = layer._scale_cache, layer._bias_cache
    fills = fc.made.get("full", 0)
    fc.capturing = True
    for i in range(2):
        assert (bits(nvfp4.linear(x, layer)) == bits(want)).all()
        assert fc.made.get("full", 0) == fills + 1 + i
    assert layer._scale_cache is scale2 and layer._bias_cache is bias2
    fc.capturing = False
    assert (bits(nvfp4.linear(x, layer)) == bits(want)).all()
    assert fc.made.get("full", 0) == fills + 2 and layer._scale_cache is scale2


def test_cuda_matmul_and_quantize_emulated(torch, fake_cuda):
    from _fake_cuda import bits
    fc = fake_cuda
    for m, k, scale, var in itertools.product((1, 30), (64, 96), (None, 0.02, "tensor"),
                                              ("eager", "cuda")):
        xh = as_torch(torch, random_bf16(RNG, m, k, 3.0))
        s = fc.tensor(torch.tensor(0.02)) if scale == "tensor" else scale
        q = nvfp4.quantize(fc.tensor(xh), per_tensor_scale=s, variant=var)
        r = nvfp4.quantize(xh, per_tensor_scale=None if scale is None else 0.02, variant=var)
        assert q.is_cuda and q.block_scale.dtype == torch.float8_e4m3fn
        for part in ("qdata", "block_scale", "per_tensor_scale"):
            assert (bits(getattr(q, part)) == bits(getattr(r, part))).all(), (m, k, scale, var)
        bh = nvfp4.quantize(as_torch(torch, random_bf16(RNG, 48, k, 0.05)))
        b = nvfp4.NVFP4Tensor(fc.tensor(bh.qdata), fc.tensor(bh.block_scale),
                              fc.tensor(bh.per_tensor_scale))
        for bias in (None, torch.from_numpy(RNG.standard_normal(48).astype(np.float32))):
            raw, out = nvfp4.matmul(q, b, bias=None if bias is None else fc.tensor(bias))
            rr, ro = nvfp4.matmul(r, bh, bias=bias, backend="ref")
            assert (bits(raw) == bits(rr)).all() and (bits(out) == bits(ro)).all()


# ---- comfy-kitchen: the direct dispatch ------------------------------------------
@pytest.fixture
def ck(comfy_kitchen, torch):
    import nvfp4.comfy as nc
    from comfy_kitchen.registry import registry
    before = list(registry._priority)
    originals = (comfy_kitchen.quantize_nvfp4, comfy_kitchen.scaled_mm_nvfp4)
    info = nc.register(cpu=True, threads=1)
    assert info["direct"]
    yield comfy_kitchen
    nc.unregister()
    registry.set_priority(before)
    assert (comfy_kitchen.quantize_nvfp4, comfy_kitchen.scaled_mm_nvfp4) == originals


def _mm_args(torch, ck, m=8, n=40, k=96):
    x = as_torch(torch, random_bf16(RNG, m, k, 2.0))
    w = as_torch(torch, random_bf16(RNG, n, k, 0.05))
    sx = torch.amax(x.abs()).float() / 2688
    sw = torch.amax(w.abs()).float() / 2688
    qx, bx = ck.quantize_nvfp4(x, sx, pad_16x=True)
    qw, bw = ck.quantize_nvfp4(w, sw, pad_16x=True)
    return qx, qw, sx, sw, bx, bw


def test_direct_dispatch_same_bits_without_the_registry(ck, torch, monkeypatch):
    import nvfp4.comfy as nc
    from comfy_kitchen.registry import registry
    qx, qw, sx, sw, bx, bw = _mm_args(torch, ck)
    bias = as_torch(torch, random_bf16(RNG, 1, 40)[0])
    x = as_torch(torch, random_bf16(RNG, 30, 96, 2.0))
    s = torch.amax(x.abs()).float() / 2688
    calls = []
    real = registry.get_implementation
    monkeypatch.setattr(registry, "get_implementation",
                        lambda *a, **kw: calls.append(a[0]) or real(*a, **kw))
    for pad in (False, True):
        q, bs = ck.quantize_nvfp4(x, s, pad_16x=pad)
        q0, bs0 = nc._originals["quantize_nvfp4"](x, s, pad_16x=pad)
        assert_bits_equal(q, q0, f"quantize pad={pad}: codes")
        assert_bits_equal(bs, bs0, f"quantize pad={pad}: scales")
    A_ = nvfp4.NVFP4Tensor(qx, bx, sx)
    B_ = nvfp4.NVFP4Tensor(qw, bw, sw)
    for b, dtype in itertools.product((None, bias, bias.float()),
                                      (None, torch.bfloat16, torch.float32, torch.float16)):
        y = ck.scaled_mm_nvfp4(qx, qw, sx, sw, bx, bw, bias=b, out_dtype=dtype)
        y0 = nc._originals["scaled_mm_nvfp4"](qx, qw, sx, sw, bx, bw, bias=b, out_dtype=dtype)
        assert y.dtype == y0.dtype
        what = f"scaled_mm bias={b is not None} {dtype}"
        assert_bits_equal(y, y0, what)
        # the contract, from matmul: BF16 is its epilogue; F32 / F16 round
        # FP32(FP32(sa * sb) * raw) + bias
        b48 = None if b is None else torch.nn.functional.pad(b.float(), (0, 8))
        raw, out = nvfp4.matmul(A_, B_, bias=b48, backend="ref")
        if dtype in (None, torch.bfloat16):
            want = out
        else:
            want = raw * (sx * sw)
            want = (want if b48 is None else want + b48).to(dtype)
        assert_bits_equal(y, want, what + " vs matmul")
    direct_calls = calls.count("quantize_nvfp4") + calls.count("scaled_mm_nvfp4")
    assert direct_calls == 2 + 12, calls  # only the originals' calls asked the registry
    # another backend asked for: the original decides (the registry, then eager)
    calls.clear()
    with registry.use_backend("eager"):
        q, bs = ck.quantize_nvfp4(x, s, pad_16x=True)
    assert calls == ["quantize_nvfp4"]
    from comfy_kitchen.backends.eager import quantization as eager
    q0, bs0 = eager.quantize_nvfp4(x, s, 0.0, True, True)
    assert_bits_equal(q, q0, "use_backend(eager): codes")
    # not first in the priority: the registry decides (eager, here)
    calls.clear()
    registry.set_priority([p for p in registry._priority if p != "nvfp4"] + ["nvfp4"])
    q, bs = ck.quantize_nvfp4(x, s, pad_16x=True)
    assert calls == ["quantize_nvfp4"]
    assert_bits_equal(q, q0, "nvfp4 last: codes")


def test_direct_off(comfy_kitchen, torch):
    import nvfp4.comfy as nc
    from comfy_kitchen.registry import registry
    before = list(registry._priority)
    original = comfy_kitchen.scaled_mm_nvfp4
    try:
        assert not nc.register(cpu=True, direct=False)["direct"]
        assert comfy_kitchen.scaled_mm_nvfp4 is original
        assert nc.register(cpu=True)["direct"] and comfy_kitchen.scaled_mm_nvfp4 is not original
        nc.register(cpu=True, direct=False)
        assert comfy_kitchen.scaled_mm_nvfp4 is original
    finally:
        nc.unregister()
        registry.set_priority(before)
    assert comfy_kitchen.scaled_mm_nvfp4 is original


def test_direct_acceptance_is_the_registrys(ck, torch):
    """For every call of a corpus (valid, and each way of being invalid), the
    direct dispatch's own checks accept it exactly when the registry's
    validation of our backend does."""
    import nvfp4.comfy as nc
    from comfy_kitchen.registry import registry
    qx, qw, sx, sw, bx, bw = _mm_args(torch, ck, 16, 48, 128)
    bias = torch.zeros(48, dtype=torch.bfloat16)
    base = {"a": qx, "b": qw, "tensor_scale_a": sx, "tensor_scale_b": sw, "block_scale_a": bx,
            "block_scale_b": bw, "bias": bias, "out_dtype": torch.bfloat16, "alpha": None}
    variants = [{}, {"bias": None}, {"bias": bias.float()}, {"bias": bias.to(torch.int32)},
                {"out_dtype": torch.float32}, {"out_dtype": torch.int8},
                {"alpha": torch.tensor(0.5)}, {"alpha": torch.tensor(0.5, dtype=torch.float16)},
                {"a": qx.view(torch.int8)}, {"a": qx.reshape(-1)}, {"b": qw[:, :32].contiguous()},
                {"b": qw.t().contiguous().t()}, {"block_scale_a": bx[:64].contiguous()},
                {"block_scale_b": bw.view(torch.uint8)}, {"block_scale_a": bx.reshape(-1)},
                {"tensor_scale_a": sx.double()}, {"a": qx.t()},
                {"a": qx[:, :56].contiguous(), "b": qw[:, :56].contiguous()}]
    for v in variants:
        kw = dict(base, **v)
        want = registry.validate_backend_for_call("nvfp4", "scaled_mm_nvfp4", kw).success
        names = [p[0] for p in nc._GEMM_PARAMS]
        got = (nc._params_accept(nc._GEMM_PARAMS, [kw[n] for n in names]) and
               nc._device_reason(kw["a"]) is None and
               nc._gemm_reason(kw["a"], kw["b"], kw["block_scale_a"], kw["block_scale_b"]) is None)
        assert got == want, (sorted(v), want)
    x = as_torch(torch, random_bf16(RNG, 16, 64))
    qbase = {"x": x, "per_tensor_scale": sx, "epsilon": 0.0, "pad_16x": False, "hi_first": True}
    for v in [{}, {"x": x.float()}, {"x": x.to(torch.int16)}, {"x": x.reshape(-1)},
              {"x": x[:, :24].contiguous()}, {"x": x[:, :24].contiguous(), "pad_16x": True},
              {"x": x.t()}, {"per_tensor_scale": sx.half()}]:
        kw = dict(qbase, **v)
        want = registry.validate_backend_for_call("nvfp4", "quantize_nvfp4", kw).success
        got = (nc._params_accept(nc._QUANTIZE_PARAMS, (kw["x"], kw["per_tensor_scale"])) and
               nc._device_reason(kw["x"]) is None and
               nc._quantize_reason(kw["x"], kw["pad_16x"]) is None)
        assert got == want, (sorted(v), want)


def test_layout_linear_emulated_cuda(comfy_kitchen, torch, monkeypatch, fake_cuda):
    """comfy-kitchen's NVFP4 QuantizedTensor linear on "CUDA" tensors through
    the direct dispatch: nvfp4 linear's bits with the layout's scale, the
    BF16 bias widened once and reused while unchanged, no host sync."""
    import nvfp4.comfy as nc
    from comfy_kitchen.registry import registry
    from comfy_kitchen.tensor import QuantizedTensor
    from _fake_cuda import bits
    fc = fake_cuda
    monkeypatch.setitem(nc._cap_cache, 0, True)  # "an sm_90 device with our kernel"
    before = list(registry._priority)
    try:
        assert nc.register(comfyui=False)["direct"]
        # its data is its own (host) storage, as a plain CUDA tensor's is
        monkeypatch.setitem(nc._ck, "plain", nc._ck["plain"] | {type(fc.tensor(torch.ones(1)))})
        m, n, k = 5, 40, 96
        xh = as_torch(torch, random_bf16(RNG, m, k, 2.0))
        wh = as_torch(torch, random_bf16(RNG, n, k, 0.05))
        bh = as_torch(torch, random_bf16(RNG, 1, n)[0])
        x, bias = fc.tensor(xh), fc.tensor(bh)
        wq = QuantizedTensor.from_float(fc.tensor(wh), "TensorCoreNVFP4Layout")
        s = fc.tensor(torch.amax(xh.abs()).float() / 2688)
        W = nvfp4.NVFP4Tensor(wq._qdata.inner, wq._params.block_scale.inner,
                              float(wq._params.scale.inner))
        b48 = torch.zeros(W.rows)
        b48[:n] = bh.float()
        for b in (None, bias):
            ref = nvfp4.Layer(W, input_scale=float(s.inner), bias=None if b is None else b48)
            want = nvfp4.linear(xh, ref, variant="cuda", backend="ref")[:, :n]
            for _ in range(2):
                n_calls = len(fc.calls)
                xq = QuantizedTensor.from_float(x, "TensorCoreNVFP4Layout", scale=s)
                y = torch.nn.functional.linear(xq, wq, b)
                assert [c for c, _ in fc.calls[n_calls:]] == ["nvfp4_quantize_cuda",
                                                               "nvfp4_gemm_cuda"]
                assert tuple(y.shape) == (m, n) and y.dtype == torch.bfloat16
                assert (bits(y) == bits(want)).all(), f"bias={b is not None}"
        # scaled_mm_nvfp4 itself, each output dtype, against the same call on the host
        xq = QuantizedTensor.from_float(x, "TensorCoreNVFP4Layout", scale=s)
        args = (xq._qdata, wq._qdata, s, wq._params.scale, xq._params.block_scale,
                wq._params.block_scale)
        for dtype in (torch.bfloat16, torch.float32, torch.float16):
            for b in (None, bias):
                n_calls = len(fc.calls)
                y = comfy_kitchen.scaled_mm_nvfp4(*args, bias=b, out_dtype=dtype)
                assert [c for c, _ in fc.calls[n_calls:]] == ["nvfp4_gemm_cuda"]
                want = nc.scaled_mm_nvfp4(*(t.inner for t in args),
                                          bias=None if b is None else b.inner, out_dtype=dtype)
                assert y.dtype == dtype and (bits(y) == bits(want)).all(), (dtype, b is None)
        copy = nc._BIAS_COPIES[id(bias)][4]
        torch.nn.functional.linear(QuantizedTensor.from_float(x, "TensorCoreNVFP4Layout",
                                                              scale=s), wq, bias)
        assert nc._BIAS_COPIES[id(bias)][4] is copy  # reused
        fc.capturing = True  # in a graph capture: a new copy, the cached one left alone
        y = torch.nn.functional.linear(QuantizedTensor.from_float(x, "TensorCoreNVFP4Layout",
                                                                  scale=s), wq, bias)
        want = nvfp4.linear(xh, nvfp4.Layer(W, float(s.inner), b48), variant="cuda",
                            backend="ref")[:, :n]
        assert nc._BIAS_COPIES[id(bias)][4] is copy and (bits(y) == bits(want)).all()
        fc.capturing = False
        bias.add_(1.0)
        y = torch.nn.functional.linear(QuantizedTensor.from_float(x, "TensorCoreNVFP4Layout",
                                                                  scale=s), wq, bias)
        assert nc._BIAS_COPIES[id(bias)][4] is not copy
        b48[:n] = bias.inner.float()  # the BF16 sum, widened
        want = nvfp4.linear(xh, nvfp4.Layer(W, float(s.inner), b48), variant="cuda",
                            backend="ref")[:, :n]
        assert (bits(y) == bits(want)).all(), "bias changed in place"
        key = id(bias)
        del bias, b, y, copy
        assert key not in nc._BIAS_COPIES  # dropped with its bias
    finally:
        nc.unregister()
        registry.set_priority(before)
