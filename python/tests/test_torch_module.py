"""nvfp4.torch on the CPU: NVFP4Linear against the library's reference linear
bit for bit (both call paths: the eager one and the custom op), autograd
refused, state dicts and checkpoints in ComfyUI's format (against files the
CLI writes and reads), quantize_model / load_quantized on small models,
dtype and device moves, the cached arguments following every change, and
the checkpoint-format seam."""
import itertools
import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nvfp4  # noqa: E402
import nvfp4.torch as nt  # noqa: E402
from _helpers import E4M3, assert_bits_equal, cli, st_read, st_write, to_numpy  # noqa: E402

nn = torch.nn
BF16 = torch.bfloat16


def gen(seed):
    return torch.Generator().manual_seed(seed)


def rand(shape, scale=1.0, dtype=BF16, seed=0):
    return (torch.randn(shape, generator=gen(seed)) * scale).to(dtype)


def linear(k, n, bias=True, dtype=BF16, seed=1):
    lin = nn.Linear(k, n, bias=bias)
    with torch.no_grad():
        lin.weight.copy_(rand((n, k), 0.05, torch.float32, seed))
        if bias:
            lin.bias.copy_(rand((n,), 0.5, torch.float32, seed + 1))
    return lin.to(dtype)


def as_stored(t):
    """A tensor as NumPy for the test's safetensors writer, E4M3 kept as E4M3."""
    a = to_numpy(t)
    return a.view(E4M3) if t.dtype == torch.float8_e4m3fn else a


def reference(m, x, variant=None):
    """The library's plain reference linear (nvfp4.linear, backend='ref') on
    the module's tensors, narrowed and cast as the module does."""
    w = nvfp4.NVFP4Tensor(m.weight, m.weight_scale, m.weight_scale_2)
    bias = None
    if m.bias is not None:
        bias = torch.zeros(m.weight.shape[0])
        bias[:m.bias.shape[0]] = m.bias.detach().float()
    scale = None if m.input_scale is None else float(m.input_scale)
    layer = nvfp4.Layer(w, input_scale=scale, bias=bias)
    y = nvfp4.linear(x.contiguous(), layer, variant=variant or m.variant, backend="ref")
    return y[..., :m.out_features].to(x.dtype)


# ---- forward --------------------------------------------------------------------
CASES = list(itertools.product(
    [(256, 96), (200, 40), (64, 16)],        # (in, out): 200 -> K 208, 40 -> rows 48
    [None, BF16, torch.float32],             # bias dtype
    [None, 0.02],                            # input_scale: dynamic, static
    ["eager", "cuda"]))


@pytest.mark.parametrize("shape,bias,scale,variant", CASES)
def test_forward_matches_reference(shape, bias, scale, variant):
    k, n = shape
    lin = linear(k, n, bias=bias is not None)
    if bias is not None:
        lin.bias.data = lin.bias.data.to(bias)
    m = nt.NVFP4Linear.from_linear(lin, variant=variant, input_scale=scale)
    q = nvfp4.quantize(lin.weight.detach(), variant=variant)
    assert_bits_equal(m.weight, q.qdata, "codes")
    assert_bits_equal(m.weight_scale, q.block_scale, "scales")
    assert m.static_input_scale == (scale is not None)
    for rows, dtype in ((1, BF16), (5, BF16), (33, torch.float32), (3, torch.float16)):
        x = rand((rows, k), 2.0, dtype, seed=rows)
        want = reference(m, x)
        with torch.no_grad():
            got = m(x)
            op = m._forward_op(x)
        assert got.dtype == dtype and tuple(got.shape) == (rows, n)
        what = f"{k}->{n} bias={bias} scale={scale} {variant} M={rows} {dtype}"
        assert_bits_equal(got, want, what + ": eager")
        assert_bits_equal(op, want, what + ": custom op")


def test_leading_dims_and_empty():
    m = nt.NVFP4Linear.from_linear(linear(128, 64))
    x = rand((2, 3, 128), 1.0, seed=3)
    with torch.inference_mode():
        y = m(x)
        assert tuple(y.shape) == (2, 3, 64)
        assert_bits_equal(y.reshape(6, 64), m(x.reshape(6, 128)), "3-D vs 2-D")
        assert tuple(m(x[:, :0]).shape) == (2, 0, 64)
        # a non-contiguous input is copied, as F.linear would accept it
        xt = rand((128, 4), 1.0, seed=4).t()
        assert_bits_equal(m(xt), m(xt.contiguous()), "transposed input")


def test_op_direct_and_its_checks():
    m = nt.NVFP4Linear.from_linear(linear(96, 32), input_scale=0.01)
    x = rand((4, 96), 1.0, seed=5)
    b32 = m.bias.detach().float()
    args = (m.weight, m.weight_scale, m.weight_scale_2, m.input_scale, b32, 0, 1)
    with torch.no_grad():
        y = torch.ops.nvfp4.linear(x, *args)
        assert_bits_equal(y, m(x), "torch.ops.nvfp4.linear")
        bad = [((m.weight.float(),) + args[1:], TypeError, "uint8"),
               ((m.weight, m.weight_scale[:64]) + args[2:], TypeError, "tiled"),
               (args[:2] + (m.weight_scale_2.double(),) + args[3:], TypeError, "float32"),
               (args[:4] + (m.bias.detach(),) + args[5:], TypeError, "float32"),
               (args[:5] + (7,) + args[6:], ValueError, "variant")]
        for a, exc, words in bad:
            with pytest.raises(exc, match=words):
                torch.ops.nvfp4.linear(x, *a)
        with pytest.raises(ValueError, match="features"):
            torch.ops.nvfp4.linear(rand((4, 64)), *args)


def test_bad_inputs():
    m = nt.NVFP4Linear.from_linear(linear(64, 32))
    with torch.no_grad():
        with pytest.raises(ValueError, match="x has 48 features, the layer takes 64"):
            m(rand((2, 48)))
        with pytest.raises(TypeError, match="bfloat16, float16 or float32"):
            m(torch.zeros(2, 64, dtype=torch.int32))
    for bad in (0.0, -1.0, float("nan"), float("inf"), "static"):
        with pytest.raises(ValueError, match="input_scale"):
            nt.NVFP4Linear.from_linear(linear(64, 32), input_scale=bad)
    with pytest.raises(ValueError, match="variant"):
        nt.NVFP4Linear.from_linear(linear(64, 32), variant="fast")
    with pytest.raises(ValueError, match="mode"):
        m.mode = "w8a8"
    with pytest.raises(TypeError, match="nn.Linear"):
        nt.NVFP4Linear.from_linear(m)
    with pytest.raises(ValueError, match="cannot be a"):
        nt.NVFP4Linear._from_tensors(100, 32, dict(m.state_dict()), "eager", "w4a4", 0,
                                     "comfyui")


# ---- autograd ---------------------------------------------------------------------
def test_autograd_is_refused_not_dropped():
    m = nt.NVFP4Linear.from_linear(linear(64, 32))
    x = rand((3, 64), seed=6).requires_grad_()
    with pytest.raises(RuntimeError, match="x requires grad.*no backward"):
        m(x)
    with pytest.raises(RuntimeError, match="x requires grad.*no backward"):
        m._forward_op(x)  # the custom op's autograd kernel refuses too
    with pytest.raises(RuntimeError, match="x requires grad.*no backward"):
        nvfp4.linear(x, nvfp4.Layer(nvfp4.quantize(rand((32, 64), 0.05).float())))
    with torch.no_grad():
        y = m(x)
    assert not y.requires_grad
    with torch.inference_mode():
        assert_bits_equal(m(x), y, "inference_mode")
    m.bias.requires_grad_(True)
    with pytest.raises(RuntimeError, match="the bias requires grad"):
        m(x.detach())
    with pytest.raises(RuntimeError, match="the bias requires grad"):
        m._forward_op(x.detach())
    bias = rand((32,), seed=7).float().requires_grad_()
    with pytest.raises(RuntimeError, match="the bias requires grad"):
        nvfp4.linear(x.detach(), nvfp4.Layer(nvfp4.quantize(rand((32, 64), 0.05).float())),
                     bias=bias)
    m.bias.requires_grad_(False)
    # W4A16 is torch ops end to end: it trains through x
    m.mode = "w4a16"
    y = m(x.float())
    y.sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0


# ---- W4A16 ------------------------------------------------------------------------
def test_w4a16_is_the_dequantized_weight():
    lin = linear(200, 40)
    m = nt.NVFP4Linear.from_linear(lin)
    t = nvfp4.NVFP4Tensor(m.weight, m.weight_scale, m.weight_scale_2)
    want = t.dequantize()[:40, :200]  # the C function (nvfp4_dequantize)
    assert_bits_equal(m.dequantize(), want, "dequantize() vs nvfp4_dequantize")
    m.mode = "w4a16"
    assert_bits_equal(m.dequantize(BF16), want.to(BF16), "with the w4a16 tables")
    x = rand((6, 200), seed=8)
    with torch.no_grad():
        want_y = torch.nn.functional.linear(x, want.to(BF16), m.bias)
        assert_bits_equal(m(x), want_y, "w4a16 forward")
        m.mode = "w4a4"
        assert_bits_equal(m(x), reference(m, x), "back to w4a4")


# ---- state dicts and checkpoints ----------------------------------------------------
def test_state_dict_is_comfyui(tmp_path):
    """state_dict() is ComfyUI's layer; the CLI reads the file it makes and
    computes the module's bits; from_checkpoint reads it back unchanged."""
    m = nt.NVFP4Linear.from_linear(linear(256, 96), input_scale=0.03)
    sd = m.state_dict()
    assert {k: (v.dtype, tuple(v.shape)) for k, v in sd.items()} == {
        "weight": (torch.uint8, (96, 128)), "weight_scale": (torch.float8_e4m3fn, (128, 16)),
        "weight_scale_2": (torch.float32, ()), "input_scale": (torch.float32, ()),
        "bias": (BF16, (96,)), "comfy_quant": (torch.uint8, (19,))}
    assert bytes(sd["comfy_quant"].numpy()) == b'{"format": "nvfp4"}'
    f = tmp_path / "layer.safetensors"
    st_write(f, {"l." + k: as_stored(v) for k, v in sd.items()})
    x = rand((8, 256), 2.0, seed=9)
    st_write(tmp_path / "x.safetensors", {"x": as_stored(x)})
    cli("linear", f"{f}:l", f"{tmp_path / 'x.safetensors'}:x", "-o", tmp_path / "y.safetensors",
        "--backend", "cpu")
    with torch.no_grad():
        assert_bits_equal(m(x), st_read(tmp_path / "y.safetensors")["out"], "module vs CLI")
    r = nt.NVFP4Linear.from_checkpoint(f, "l")
    for k, v in sd.items():
        assert r.state_dict()[k].dtype == v.dtype
        assert_bits_equal(r.state_dict()[k], v, f"from_checkpoint: {k}")
    fresh = nt.NVFP4Linear(256, 96, static_input_scale=True)
    fresh.load_state_dict(sd)
    with torch.no_grad():
        assert_bits_equal(fresh(x), m(x), "load_state_dict into NVFP4Linear(256, 96)")
    with pytest.raises(RuntimeError, match="input_scale"):
        nt.NVFP4Linear(256, 96).load_state_dict(sd)  # a dynamic layer has none


def test_checkpoint_as_stored(tmp_path):
    """A file of `nvfp4 quantize`: forward equals `nvfp4 linear`; the state dict
    is the file's tensors, byte for byte.  A file with U8 scales and [1]
    scalars keeps those too."""
    ex, q = tmp_path / "ex.safetensors", tmp_path / "q.safetensors"
    cli("example", ex)
    cli("quantize", ex, q)
    stored = st_read(q)
    m = nt.NVFP4Linear.from_checkpoint(q, "blocks.0.attn.qkv.weight")
    assert (m.in_features, m.out_features) == (256, 768) and m.bias.dtype == BF16
    for k, v in m.state_dict().items():
        assert_bits_equal(v, stored["blocks.0.attn.qkv." + k], f"state_dict {k} vs the file")
    for variant in ("eager", "cuda"):
        m.variant = variant
        cli("linear", f"{q}:blocks.0.attn.qkv", f"{ex}:x", "-o", tmp_path / "y.safetensors",
            "--backend", "cpu", "--variant", variant)
        x = torch.from_numpy(stored["x"].view(np.int16)).view(BF16)
        with torch.no_grad():
            assert_bits_equal(m(x), st_read(tmp_path / "y.safetensors")["out"], variant)
    # U8 scales, [1] scalars, a static scale (the marker kept: without it the
    # same names are ModelOpt's, nvfp4_detect_format's rule)
    p = "blocks.0.mlp.fc2"
    other = {f"l.{k}": stored[f"{p}.{k}"] for k in ("weight", "weight_scale", "weight_scale_2", "comfy_quant")}
    other["l.weight_scale"] = other["l.weight_scale"].view(np.uint8)
    other["l.weight_scale_2"] = other["l.weight_scale_2"].reshape(1)
    other["l.input_scale"] = np.array([0.05], dtype=np.float32)
    st_write(tmp_path / "u8.safetensors", other)
    u = nt.NVFP4Linear.from_checkpoint(tmp_path / "u8.safetensors", "l")
    sd = u.state_dict()
    assert sorted(sd) == ["comfy_quant", "input_scale", "weight", "weight_scale", "weight_scale_2"]
    assert sd["weight_scale"].dtype == torch.uint8 and tuple(sd["weight_scale_2"].shape) == (1,)
    m2 = nt.NVFP4Linear.from_checkpoint(q, p)  # the same weight as F8_E4M3, scale_2 []
    m2.register_buffer("input_scale", torch.tensor(0.05))
    with torch.no_grad():
        x = rand((5, 1024), seed=10)
        assert_bits_equal(u(x), m2(x), "U8 scales and [1] scalars")
        u.load_state_dict(m2.state_dict() | {"input_scale": torch.tensor([0.05])},
                          strict=False)  # F8 into U8 and [] into [1]: bit copies
        assert_bits_equal(u.weight_scale, m2.weight_scale.view(torch.uint8), "F8 -> U8 load")


class RowMajorLoFirst(nt.CheckpointFormat):
    """A format unlike ComfyUI's: codes lo-first, scales row-major, other names."""
    name = "test-rowmajor"

    def read(self, f, prefix, layer):
        return nt.CheckpointFormat.read(self, f, prefix, layer)

    def state_names(self, module):
        return ["packed", "scales", "global_scale"]

    def to_state(self, module):
        w = module.weight
        return {"packed": ((w >> 4) | (w << 4)).contiguous(),
                "scales": module._row_major_scales(),
                "global_scale": module.weight_scale_2.reshape(1)}

    def from_state(self, module, tensors):
        rows, cols = module.weight.shape[0], 2 * module.weight.shape[1]
        p = tensors["packed"]
        tiled = np.zeros(tuple(module.weight_scale.shape), dtype=np.uint8)
        rm = np.ascontiguousarray(tensors["scales"].numpy())
        nvfp4._lib.lib().nvfp4_scales_tile(tiled.ctypes.data, rm.ctypes.data, rows, cols)
        return {"weight": (p >> 4) | (p << 4), "weight_scale": torch.from_numpy(tiled),
                "weight_scale_2": tensors["global_scale"].reshape(())}


def test_checkpoint_format_seam():
    """A layer in a registered non-native format writes and reads its own
    names and layouts; an unregistered one still runs but refuses state_dict."""
    nt.register_format(RowMajorLoFirst())
    try:
        src = nt.NVFP4Linear.from_linear(linear(96, 48, bias=False))
        sd = {k: v for k, v in src.state_dict().items() if k != "comfy_quant"}
        m = nt.NVFP4Linear._from_tensors(96, 48, sd, "eager", "w4a4", 0, "test-rowmajor")
        out = m.state_dict()
        assert sorted(out) == ["global_scale", "packed", "scales"]
        assert_bits_equal(out["packed"] & 0xF, src.weight >> 4, "lo-first")
        fresh = nt.NVFP4Linear(96, 48, bias=False, checkpoint_format="test-rowmajor")
        fresh.load_state_dict(out)
        for k in ("weight", "weight_scale", "weight_scale_2"):
            assert_bits_equal(getattr(fresh, k), getattr(src, k), f"round trip {k}")
        with pytest.raises(RuntimeError, match="Missing key.*global_scale"):
            nt.NVFP4Linear(96, 48, bias=False, checkpoint_format="test-rowmajor").load_state_dict(
                {k: v for k, v in out.items() if k != "global_scale"})
        x = rand((3, 96), seed=11)
        with torch.no_grad():
            assert_bits_equal(fresh(x), src(x), "forward after the round trip")
        m.checkpoint_format = "someone-elses"
        with torch.no_grad():
            assert_bits_equal(m(x), src(x), "forward in an unregistered format")
        with pytest.raises(NotImplementedError, match="'someone-elses'.*register_format"):
            m.state_dict()
    finally:
        nt._FORMATS.pop("test-rowmajor", None)


# ---- models ----------------------------------------------------------------------------
class Tiny(nn.Module):
    def __init__(self, dim=64, hidden=96, vocab=50, seed=20):
        super().__init__()
        torch.manual_seed(seed)
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(nn.ModuleDict({
            "up": nn.Linear(dim, hidden), "down": nn.Linear(hidden, dim, bias=False),
            "norm": nn.LayerNorm(dim)}) for _ in range(2))
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        h = self.embed(ids)
        for block in self.layers:
            h = h + block["down"](torch.nn.functional.gelu(block["up"](block["norm"](h))))
        return self.head(h)


def test_quantize_model_selection():
    model = Tiny().to(BF16)
    assert nt.quantize_model(model, exclude="head") == ["layers.0.up", "layers.0.down",
                                                         "layers.1.up", "layers.1.down"]
    assert isinstance(model.head, nn.Linear) and isinstance(model.layers[1]["down"], nt.NVFP4Linear)
    model = Tiny().to(BF16)
    assert nt.quantize_model(model, include=["*.up"]) == ["layers.0.up", "layers.1.up"]
    model = Tiny().to(BF16)
    assert nt.quantize_model(model, include=lambda name, mod: mod.out_features == 50) == ["head"]
    model = Tiny().to(BF16)
    names = nt.quantize_model(model, input_scale={"layers.0.up": 0.05})
    assert model.layers[0]["up"].static_input_scale and not model.layers[1]["up"].static_input_scale
    assert len(names) == 5
    shared = nn.Sequential(nn.Linear(32, 32), nn.ReLU())
    shared.append(shared[0])  # one Linear under two names
    assert nt.quantize_model(shared) == ["0", "2"] and shared[0] is shared[2]
    with pytest.raises(TypeError, match="glob"):
        nt.quantize_model(Tiny(), include=3)


def test_quantized_model_runs_each_layer_as_the_library():
    model = Tiny().to(BF16)
    ids = torch.randint(0, 50, (2, 7), generator=gen(21))
    nt.quantize_model(model, exclude="head")
    with torch.inference_mode():
        got = model(ids)
        h = model.embed(ids)
        for block in model.layers:
            up = reference(block["up"], block["norm"](h))
            h = h + reference(block["down"], torch.nn.functional.gelu(up))
        assert_bits_equal(got, model.head(h), "the model vs layer by layer")


def test_load_quantized(tmp_path):
    """A model's state written out, quantized by the CLI, loaded into a fresh
    (and a meta-device) model: the same bits as quantize_model on the
    original; strict reports what does not match."""
    src = Tiny().to(BF16)
    dense = tmp_path / "dense.safetensors"
    st_write(dense, {k: as_stored(v) for k, v in src.state_dict().items()})
    q = tmp_path / "q.safetensors"
    cli("quantize", dense, q, "--only", "layers.0.up.weight", "--only", "layers.0.down.weight",
        "--only", "layers.1.up.weight", "--only", "layers.1.down.weight")
    ids = torch.randint(0, 50, (3, 5), generator=gen(22))
    nt.quantize_model(src, exclude="head")
    with torch.inference_mode():
        want = src(ids)
    fresh = Tiny(seed=99).to(BF16)
    report = nt.load_quantized(fresh, q)
    assert report["quantized"] == ["layers.0.up", "layers.0.down", "layers.1.up", "layers.1.down"]
    assert not report["missing"] and not report["unused"] and "embed.weight" in report["loaded"]
    with torch.inference_mode():
        assert_bits_equal(fresh(ids), want, "load_quantized")
    with torch.device("meta"):
        meta = Tiny().to(BF16)
    with pytest.raises(ValueError, match="meta device; pass device="):
        nt.load_quantized(meta, q)
    with torch.device("meta"):
        meta = Tiny().to(BF16)
    nt.load_quantized(meta, [q], device="cpu")
    with torch.inference_mode():
        assert_bits_equal(meta(ids), want, "load_quantized into a meta-device model")
    # a checkpoint that lacks the head and has an extra tensor
    t = st_read(q)
    del t["head.weight"]
    t["extra.weight"] = np.zeros((2, 2), np.float32)
    st_write(tmp_path / "partial.safetensors", t)
    with pytest.raises(RuntimeError, match=r"1 missing \(head.weight\); 1 unused \(extra.weight\)"):
        nt.load_quantized(Tiny().to(BF16), tmp_path / "partial.safetensors")
    shards = tmp_path / "shards"  # a directory of shards: the head in the second one
    shards.mkdir()
    st_write(shards / "model-00001-of-00002.safetensors", t)
    st_write(shards / "model-00002-of-00002.safetensors",
             {"head.weight": st_read(q)["head.weight"]})
    r = nt.load_quantized(Tiny().to(BF16), shards, strict=False)
    assert r["missing"] == [] and r["unused"] == ["extra.weight"]


# ---- moves and changes --------------------------------------------------------------------
def test_model_dtype_moves_keep_quantized_tensors():
    model = Tiny().to(BF16)
    nt.quantize_model(model, exclude="head", input_scale=0.05)
    before = {k: v.clone() for k, v in model.layers[0]["up"].state_dict().items()}
    model.to(torch.float16)
    up = model.layers[0]["up"]
    for k in ("weight", "weight_scale", "weight_scale_2", "input_scale", "comfy_quant"):
        assert up.state_dict()[k].dtype == before[k].dtype, k
        assert_bits_equal(up.state_dict()[k], before[k], k)
    assert up.bias.dtype == torch.float16  # the bias follows the model, like nn.Linear's
    x = rand((4, 64), dtype=torch.float16, seed=23)
    with torch.no_grad():
        y = up(x)
    assert y.dtype == torch.float16
    assert_bits_equal(y, reference(up, x), "float16 model")
    model.half().float().to(BF16)
    assert up.weight_scale.dtype == torch.float8_e4m3fn and up.weight_scale_2.dtype == torch.float32


def test_cached_arguments_follow_changes():
    lin = linear(128, 64)
    m = nt.NVFP4Linear.from_linear(lin, input_scale=0.02)
    x = rand((5, 128), 2.0, seed=24)

    def same(what):
        with torch.no_grad():
            assert_bits_equal(m(x), reference(m, x), what)

    same("first call")
    plan = m._plan
    same("second call")
    assert m._plan is plan  # reused
    other = nt.NVFP4Linear.from_linear(linear(128, 64, seed=5), input_scale=0.02)
    m.weight = other.weight.clone()
    m.weight_scale = other.weight_scale.clone()
    assert m._plan is None
    same("weight and scales assigned")
    m.load_state_dict(nt.NVFP4Linear.from_linear(linear(128, 64, seed=7),
                                                 input_scale=0.04).state_dict())
    same("load_state_dict")
    with torch.no_grad():
        m.weight_scale_2.mul_(2)  # in place: read where it lies
        m.input_scale.fill_(0.01)
    same("scales changed in place")
    with torch.no_grad():
        m.bias.add_(1.0)  # a BF16 bias: the kernel's float32 copy is made again
    same("BF16 bias changed in place")
    m.bias = nn.Parameter(rand((64,), seed=25).float(), requires_grad=False)
    same("float32 bias assigned (read in place)")
    with torch.no_grad():
        m.bias.mul_(3)
    same("float32 bias changed in place")
    m.variant = "cuda"
    same("variant changed")
    with torch.inference_mode():
        m.bias = nn.Parameter(rand((64,), seed=26), requires_grad=False)
    same("inference-mode BF16 bias")
    with torch.no_grad():
        with torch.inference_mode():
            m.bias.add_(1)
        same("inference-mode bias changed")


def test_threads_share_a_module():
    m = nt.NVFP4Linear.from_linear(linear(128, 64))
    xs = [rand((3, 128), seed=30 + i) for i in range(4)]
    with torch.no_grad():
        want = [reference(m, x) for x in xs]
    errors = []

    def work(i):
        try:
            with torch.no_grad():
                for _ in range(30):
                    assert_bits_equal(m(xs[i]), want[i], f"thread {i}")
        except BaseException as e:  # noqa: BLE001 -- reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_padded_rows_from_checkpoint(tmp_path):
    """A checkpoint whose rows (and bias) are padded to 16 past the layer's true
    out_features: both modes give out_features columns, the padding dropped."""
    src = nt.NVFP4Linear.from_linear(linear(96, 40))  # rows padded to 48
    sd = dict(src.state_dict())
    sd["bias"] = torch.cat([src.bias.detach(), torch.zeros(8, dtype=BF16)])  # stored padded
    st_write(tmp_path / "p.safetensors", {"l." + k: as_stored(v) for k, v in sd.items()})
    m = nt.NVFP4Linear.from_checkpoint(tmp_path / "p.safetensors", "l", out_features=40)
    assert (m.out_features, tuple(m.bias.shape)) == (40, (48,))
    x = rand((5, 96), seed=40)
    with torch.no_grad():
        assert_bits_equal(m(x), src(x), "w4a4, padded bias")
        m.mode = src.mode = "w4a16"
        assert_bits_equal(m(x), src(x), "w4a16, padded bias")
    with pytest.raises(ValueError, match="the bias is"):
        nt.NVFP4Linear._from_tensors(96, 40, dict(sd, bias=torch.zeros(50)), "eager", "w4a4", 0,
                                     "comfyui")


def test_unpadded_rows_from_checkpoint(tmp_path):
    """Weights whose N is not a multiple of 16 -- ModelOpt's own layout (rows
    not padded), a ComfyUI file whose rows record says fewer rows than it
    stores -- load with the kernels' N (rows padded to 16) and the layer's
    own out_features, and compute nvfp4.linear's bits; state_dict() gives
    the rows the file stores (ModelOpt's own, or the padded ones `nvfp4
    convert` keeps from a ComfyUI file) and loads back."""
    w = to_numpy(linear(64, 40).weight.detach())
    st_write(tmp_path / "w.st", {"a.weight": w, "b.weight": w[:5]})
    cli("quantize", tmp_path / "w.st", tmp_path / "mo.st", "--variant", "modelopt")
    cli("quantize", tmp_path / "w.st", tmp_path / "cf.st")
    cli("convert", tmp_path / "cf.st", tmp_path / "cmo", "--to", "modelopt")  # a directory
    x = rand((3, 64), seed=42)
    for f, layer, n in (("mo.st", "a", 40), ("mo.st", "b", 5), ("cf.st", "b", 5), ("cmo", "b", 5)):
        m = nt.NVFP4Linear.from_checkpoint(tmp_path / f, layer)
        assert (m.out_features, m.in_features, m.weight.shape[0]) == (n, 64, 16 * ((n + 15) // 16))
        with torch.no_grad():
            want = nvfp4.linear(x, nvfp4.load_layer(tmp_path / f, layer, device="cpu"), backend="cpu")
            assert_bits_equal(m(x), want, f"{f}:{layer}")
        stored = st_read(tmp_path / f if f != "cmo" else tmp_path / f / "model.safetensors")
        sd = m.state_dict()
        for name in ("weight", "weight_scale"):
            assert_bits_equal(sd[name], stored[f"{layer}.{name}"], f"{f}:{layer} state_dict {name}")
        z = nt.NVFP4Linear.from_checkpoint(tmp_path / f, layer)
        z.weight.zero_()
        z.load_state_dict(sd)
        assert_bits_equal(z.weight, m.weight, f"{f}:{layer} load_state_dict")


def test_deepcopy_and_pickle_after_calls(tmp_path):
    import copy
    m = nt.NVFP4Linear.from_linear(linear(64, 32))
    x = rand((2, 64), seed=41)
    with torch.no_grad():
        y = m(x)
        assert m._plan is not None
        c = copy.deepcopy(m)
        assert c._plan is None and c.weight.data_ptr() != m.weight.data_ptr()
        assert_bits_equal(c(x), y, "deepcopy")
        torch.save(m, tmp_path / "m.pt")
        r = torch.load(tmp_path / "m.pt", weights_only=False)
        assert_bits_equal(r(x), y, "pickled")
