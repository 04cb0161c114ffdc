"""nvfp4.torch on checkpoints of every format the library reads: ModelOpt,
compressed-tensors and GGUF files made by the tools themselves
(tests/golden/, tools/gen_format_golden.py).  For each: a layer's forward
equals nvfp4.linear on nvfp4.load_layer's Layer bit for bit; state_dict() is
the file's tensors for the layer (names, dtypes, shapes, bytes; read here with
a plain safetensors reader, not the library), or for GGUF what
`nvfp4 convert --to comfyui` writes; load_state_dict(state_dict()) gives
every bit back; load_quantized fills a module tree with the checkpoint's
names; a missing piece is a clear error."""
import copy
import json
import os
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nvfp4  # noqa: E402
import nvfp4.torch as nt  # noqa: E402
from _helpers import (E4M3, REPO, ST_NAMES, assert_bits_equal, cli, st_read,  # noqa: E402
                      st_write, to_numpy)

nn = torch.nn
BF16 = torch.bfloat16
G = os.path.join(REPO, "tests", "golden")
MO = os.path.join(G, "modelopt", "llama-nvfp4")            # sharded, with an index
MO_MIXED = os.path.join(G, "modelopt", "llama-mixed")      # NVFP4, FP8 and BF16 layers
CT = os.path.join(G, "compressed-tensors", "llama-nvfp4")  # llm-compressor's own export
CT_CONV = os.path.join(G, "compressed-tensors", "llama-from-modelopt")  # its converter: [] scales
GG = os.path.join(G, "gguf", "llama-nvfp4.gguf")
LAYERS = [f"model.layers.0.self_attn.{p}_proj" for p in "qkvo"] + \
         [f"model.layers.0.mlp.{p}_proj" for p in ("gate", "up", "down")]
MIXED_NVFP4 = [n for n in LAYERS if n.split(".")[-1] in ("q_proj", "k_proj", "v_proj",
                                                         "gate_proj", "up_proj")]
SAFETENSORS = {"modelopt": MO, "compressed-tensors": CT, "ct-converted": CT_CONV,
               "modelopt-mixed": MO_MIXED}
FORMAT_OF = {MO: "modelopt", MO_MIXED: "modelopt", CT: "compressed-tensors",
             CT_CONV: "compressed-tensors", GG: "comfyui"}
TORCH_ST = {torch.uint8: "U8", torch.float8_e4m3fn: "F8_E4M3", BF16: "BF16",
            torch.float16: "F16", torch.float32: "F32"}


def st_dir(path):
    """Every tensor of a safetensors file or a directory's shards, read without the library."""
    if path.endswith(".safetensors"):
        return st_read(path)
    out = {}
    for f in sorted(os.listdir(path)):
        if f.endswith(".safetensors"):
            out.update(st_read(os.path.join(path, f)))
    return out


def layer_tensors(tensors, prefix):
    """The file's tensors of layer `prefix`, by name relative to it."""
    return {k[len(prefix) + 1:]: v for k, v in tensors.items()
            if k.startswith(prefix + ".") and "." not in k[len(prefix) + 1:]}


def assert_same_tensors(got, want, what):
    """Torch tensors vs the file's arrays: the same names, dtypes, shapes, bytes."""
    assert sorted(got) == sorted(want), f"{what}: names {sorted(got)}, want {sorted(want)}"
    for k, v in want.items():
        assert TORCH_ST[got[k].dtype] == ST_NAMES[v.dtype], \
            f"{what}: {k} is {got[k].dtype}, the file's {ST_NAMES[v.dtype]}"
        assert tuple(got[k].shape) == v.shape, f"{what}: {k} {tuple(got[k].shape)} vs {v.shape}"
        assert_bits_equal(got[k], v, f"{what}: {k}")


def as_stored(t):
    """A tensor as the NumPy array a safetensors reader gives (E4M3 kept)."""
    a = to_numpy(t)
    return a.view(E4M3) if t.dtype == torch.float8_e4m3fn else a


def rand(shape, seed, scale=1.0):
    return (torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * scale).to(BF16)


def library_forward(path, prefix, x, variant="eager"):
    """nvfp4.linear (its plain reference backend) on formats.load_layer's Layer."""
    layer = nvfp4.load_layer(path, prefix, device="cpu")
    return nvfp4.linear(x, layer, variant=variant, backend="ref")


def as_comfyui(path, tmp_path):
    """The checkpoint as `nvfp4 convert --to comfyui` writes it (one file)."""
    out = tmp_path / (os.path.basename(path).replace(".", "-") + "-comfyui.safetensors")
    cli("convert", path, out, "--to", "comfyui")
    return st_read(out)


# ---- one layer -----------------------------------------------------------------------
def short(path):
    return os.path.relpath(path, G)


@pytest.mark.parametrize("path", [MO, MO_MIXED, CT, CT_CONV, GG], ids=short)
def test_forward_is_the_library_layer(path):
    """Every NVFP4 layer: from_checkpoint's forward, eager and through the
    custom op, equals nvfp4.linear on nvfp4.load_layer's Layer, both variants."""
    for i, prefix in enumerate(MIXED_NVFP4 if path == MO_MIXED else LAYERS):
        m = nt.NVFP4Linear.from_checkpoint(path, prefix)
        assert m.checkpoint_format == FORMAT_OF[path]
        x = rand((5, m.in_features), seed=i, scale=0.5)
        for variant in ("eager", "cuda"):
            m.variant = variant
            want = library_forward(path, prefix, x, variant)
            with torch.no_grad():
                assert_bits_equal(m(x), want, f"{prefix} {variant}")
                assert_bits_equal(m._forward_op(x), want, f"{prefix} {variant} (op)")


@pytest.mark.parametrize("name", sorted(SAFETENSORS))
def test_state_dict_is_the_file(name):
    """state_dict() of every NVFP4 layer is the file's tensors for it: the
    format's names, the stored dtypes and scalar shapes, every byte --
    compressed-tensors' divisors included, though the layer computes with
    their reciprocals."""
    path = SAFETENSORS[name]
    stored = st_dir(path)
    for prefix in MIXED_NVFP4 if path == MO_MIXED else LAYERS:
        m = nt.NVFP4Linear.from_checkpoint(path, prefix)
        assert_same_tensors(m.state_dict(), layer_tensors(stored, prefix), prefix)
    if "compressed" in name:
        g = stored[LAYERS[0] + ".weight_global_scale"].reshape(())
        m = nt.NVFP4Linear.from_checkpoint(path, LAYERS[0])
        assert float(m.weight_scale_2) == float(np.float32(1) / g)  # the multiplier
        assert float(m.weight_global_scale) == float(g)


def test_gguf_state_dict_is_comfyuis(tmp_path):
    """GGUF is no torch state-dict format: a layer read from GGUF gives the
    tensors `nvfp4 convert --to comfyui` writes for it, byte for byte."""
    want = as_comfyui(GG, tmp_path)
    for prefix in LAYERS:
        m = nt.NVFP4Linear.from_checkpoint(GG, prefix)
        assert_same_tensors(m.state_dict(), layer_tensors(want, prefix), prefix)


def zeroed(m):
    """A deep copy of m with every tensor blanked: only load_state_dict can fill it."""
    z = copy.deepcopy(m)
    with torch.no_grad():
        for t in list(z.buffers()) + list(z.parameters()):
            t.fill_(1.0 if t.dtype == torch.float32 and t.numel() == 1 else 0)
    return z


@pytest.mark.parametrize("path", [MO, CT, CT_CONV, GG], ids=short)
def test_load_state_dict_round_trip(path):
    """load_state_dict(state_dict()) into a blanked copy gives every state
    bit back and the kernel's tensors the loader made (compressed-tensors:
    the multipliers recomputed from the stored divisors, as the library's
    reader does)."""
    for i, prefix in enumerate(LAYERS):
        m = nt.NVFP4Linear.from_checkpoint(path, prefix)
        sd = m.state_dict()
        z = zeroed(m)
        z.load_state_dict(sd)
        assert_same_tensors(z.state_dict(), {k: as_stored(v) for k, v in sd.items()}, prefix)
        for k in ("weight", "weight_scale", "weight_scale_2", "input_scale"):
            assert_bits_equal(getattr(z, k), getattr(m, k), f"{prefix}: kernel {k}")
        x = rand((3, m.in_features), seed=50 + i)
        with torch.no_grad():
            assert_bits_equal(z(x), m(x), f"{prefix}: forward after the round trip")


def test_load_state_dict_assign_into_a_meta_layer():
    """A layer made on the meta device has the format's names and shapes and
    takes the tensors of a state dict with load_state_dict(assign=True)."""
    m = nt.NVFP4Linear.from_checkpoint(CT, LAYERS[4])
    meta = nt.NVFP4Linear(64, 128, bias=False, static_input_scale=True, device="meta",
                          checkpoint_format="compressed-tensors")
    shapes = {k: (v.dtype, tuple(v.shape)) for k, v in meta.state_dict().items()}
    assert shapes == {k: (v.dtype, tuple(v.shape)) for k, v in m.state_dict().items()}
    meta.load_state_dict(m.state_dict(), assign=True)
    assert meta.weight.device.type == "cpu"
    assert_same_tensors(meta.state_dict(), {k: as_stored(v) for k, v in m.state_dict().items()},
                        "assigned")
    x = rand((2, 64), seed=90)
    with torch.no_grad():
        assert_bits_equal(meta(x), m(x), "forward after assign")


@pytest.mark.parametrize("fmt,static", [("modelopt", False), ("modelopt", True),
                                        ("compressed-tensors", False),
                                        ("compressed-tensors", True)])
def test_fresh_layer_in_a_format(fmt, static):
    """NVFP4Linear(..., checkpoint_format=fmt) has that format's names (a
    divisor format: divisors of 1) and takes a state dict of it."""
    path = MO if fmt == "modelopt" else CT
    src = nt.NVFP4Linear.from_checkpoint(path, LAYERS[0])
    fresh = nt.NVFP4Linear(64, 64, static_input_scale=static, checkpoint_format=fmt)
    if fmt == "modelopt":
        names = ["weight", "weight_scale", "weight_scale_2"] + (["input_scale"] if static else [])
    else:
        names = ["weight_packed", "weight_scale", "weight_global_scale"] + \
            (["input_global_scale"] if static else [])
    names.append("bias")
    sd = fresh.state_dict()
    assert list(sd) == names
    if fmt != "modelopt":
        assert float(sd["weight_global_scale"]) == 1.0
    want = {k: v for k, v in src.state_dict().items() if k in names}
    fresh.load_state_dict(want)
    x = rand((4, 64), seed=60)
    with torch.no_grad():
        if static:
            assert_bits_equal(fresh(x), src(x), "loaded into a fresh layer")
        else:  # no input scale: the dynamic one
            src.input_scale = None
            assert_bits_equal(fresh(x), src(x), "loaded into a fresh dynamic layer")


def test_compressed_tensors_k_not_a_multiple_of_16(tmp_path):
    """compressed-tensors stores K as it is (here 40 = 2.5 blocks): the layer
    pads to 48 for the kernel and its state_dict() gives the 40 stored columns
    back; an in_features the file does not store is refused."""
    x = rand((24, 48), seed=70, scale=0.1)
    q = nvfp4.quantize_format(x, "compressed-tensors")
    tensors = {"l.weight_packed": q.codes[:, :20].copy(), "l.weight_scale": q.scales[:, :3].copy(),
               "l.weight_global_scale": np.array([q.tensor_scale], np.float32),
               "l.bias": to_numpy(rand((24,), seed=71))}
    f = tmp_path / "k40.safetensors"
    st_write(f, tensors)
    m = nt.NVFP4Linear.from_checkpoint(f, "l")
    assert (m.in_features, m.out_features, tuple(m.weight.shape)) == (40, 24, (32, 24))  # rows padded to 16 for the kernel
    assert_same_tensors(m.state_dict(), layer_tensors(st_read(f), "l"), "K = 40")
    a = rand((3, 40), seed=72)
    with torch.no_grad():
        assert_bits_equal(m(a), library_forward(f, "l", a), "K = 40 forward")
    z = zeroed(m)
    z.load_state_dict(m.state_dict())
    assert_bits_equal(z.weight, m.weight, "K = 40 round trip")
    with pytest.raises(ValueError, match="40 columns as stored.*stores 36"):
        nt.NVFP4Linear.from_checkpoint(f, "l", in_features=36)


# ---- changing a layer's format ----------------------------------------------------------
def test_switching_formats(tmp_path):
    """checkpoint_format converts the state: a ModelOpt layer as ComfyUI is what
    `nvfp4 convert --to comfyui` writes; a compressed-tensors layer as ModelOpt
    stores the multiplier it computes with; a multiplier with no exact divisor
    is refused rather than rounded."""
    m = nt.NVFP4Linear.from_checkpoint(MO, LAYERS[0])
    m.checkpoint_format = "comfyui"
    assert_same_tensors(m.state_dict(), layer_tensors(as_comfyui(MO, tmp_path), LAYERS[0]),
                        "modelopt as comfyui")
    m.checkpoint_format = "modelopt"
    assert_same_tensors(m.state_dict(), layer_tensors(st_dir(MO), LAYERS[0]), "and back")
    assert "comfy_quant" not in dict(m.named_buffers())
    with pytest.raises(ValueError, match="1 / .* is no FP32 number"):
        m.checkpoint_format = "compressed-tensors"
    assert m.checkpoint_format == "modelopt" and "weight_global_scale" not in m._buffers

    c = nt.NVFP4Linear.from_checkpoint(CT, LAYERS[0])
    c.checkpoint_format = "modelopt"
    sd, ct = c.state_dict(), layer_tensors(st_dir(CT), LAYERS[0])
    assert_bits_equal(sd["weight"], ct["weight_packed"], "the same lo-first codes")
    assert_bits_equal(sd["weight_scale_2"], np.float32(1) / ct["weight_global_scale"].reshape(()),
                      "FP32(1 / g)")
    assert sorted(c._buffers) == sorted(["weight", "weight_scale", "weight_scale_2",
                                         "input_scale", "_w4a16_scales", "_w4a16_lut"])
    # an exact power of two has its divisor
    with torch.no_grad():
        c.weight_scale_2.fill_(2.0 ** -15)
        c.input_scale.fill_(0.25)
    c.checkpoint_format = "compressed-tensors"
    sd = c.state_dict()
    assert float(sd["weight_global_scale"]) == 32768.0 and float(sd["input_global_scale"]) == 4.0


def test_changed_multiplier_of_a_divisor_format():
    """A compressed-tensors layer whose multiplier was changed in place writes
    the divisor of the new value when one exists exactly, else refuses."""
    m = nt.NVFP4Linear.from_checkpoint(CT, LAYERS[1])
    with torch.no_grad():
        m.weight_scale_2.fill_(2.0 ** -14)
    assert float(m.state_dict()["weight_global_scale"]) == 16384.0
    with torch.no_grad():
        m.weight_scale_2.fill_(3e-5)
    with pytest.raises(ValueError, match="no longer gives it"):
        m.state_dict()


# ---- what is missing ---------------------------------------------------------------------
def copy_without(src, dst, drop):
    """A one-file copy of checkpoint directory src (configs kept) without `drop`."""
    os.makedirs(dst)
    for f in os.listdir(src):
        if f.endswith(".json") and "index" not in f:
            shutil.copy(os.path.join(src, f), dst)
    st_write(os.path.join(dst, "model.safetensors"),
             {k: v for k, v in st_dir(src).items() if k != drop})
    return dst


@pytest.mark.parametrize("path,piece", [(MO, ".weight_scale_2"), (MO, ".weight_scale"),
                                        (CT, ".weight_global_scale"), (CT, ".weight_scale")],
                         ids=lambda v: short(v) if os.path.isabs(v) else v)
def test_missing_piece_is_a_clear_error(tmp_path, path, piece):
    name = LAYERS[2] + piece
    bad = copy_without(path, str(tmp_path / "bad"), name)
    with pytest.raises(nvfp4.NotFoundError, match=name.replace(".", r"\.") + "'"):
        nt.NVFP4Linear.from_checkpoint(bad, LAYERS[2])
    model = llama_tree()
    with pytest.raises(nvfp4.NotFoundError, match=name.replace(".", r"\.") + "'"):
        nt.load_quantized(model, bad)


def test_load_state_dict_names_what_is_missing_or_wrong():
    m = nt.NVFP4Linear.from_checkpoint(CT, LAYERS[0])
    sd = m.state_dict()
    with pytest.raises(RuntimeError, match=r"Missing key.*weight_global_scale"):
        zeroed(m).load_state_dict({k: v for k, v in sd.items() if k != "weight_global_scale"})
    with pytest.raises(RuntimeError, match=r"Unexpected key.*weight_scale_2"):
        zeroed(m).load_state_dict(dict(sd, weight_scale_2=torch.tensor(1.0)))
    with pytest.raises(RuntimeError, match=r"weight_packed must be uint8 \[64, 32\]"):
        zeroed(m).load_state_dict(dict(sd, weight_packed=sd["weight_packed"][:, :16]))
    z = zeroed(m)
    with pytest.raises(RuntimeError, match=r"weight_scale must be float8_e4m3fn"):
        z.load_state_dict(dict(sd, weight_scale=torch.zeros(128, 4, dtype=torch.float8_e4m3fn)))
    assert not z.weight.any()  # nothing was copied


# ---- whole models ------------------------------------------------------------------------
class Norm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))


def llama_tree():
    """Modules under the tiny golden Llama's names (config.json: hidden 64,
    intermediate 128, 4 heads of 16, 2 KV heads, vocabulary 32), BF16."""
    attn = nn.Module()
    for p, n in (("q", 64), ("k", 32), ("v", 32), ("o", 64)):
        setattr(attn, f"{p}_proj", nn.Linear(64, n, bias=True))
    mlp = nn.Module()
    mlp.gate_proj, mlp.up_proj = nn.Linear(64, 128, bias=False), nn.Linear(64, 128, bias=False)
    mlp.down_proj = nn.Linear(128, 64, bias=False)
    block = nn.Module()
    block.self_attn, block.mlp = attn, mlp
    block.input_layernorm, block.post_attention_layernorm = Norm(64), Norm(64)
    model = nn.Module()
    model.embed_tokens, model.layers, model.norm = nn.Embedding(32, 64), nn.ModuleList([block]), \
        Norm(64)
    root = nn.Module()
    root.model, root.lm_head = model, nn.Linear(64, 32, bias=False)
    return root.to(BF16)


@pytest.mark.parametrize("path", [MO, CT, CT_CONV, GG], ids=short)
def test_load_quantized_every_format(path, tmp_path):
    """load_quantized fills the tree: every layer NVFP4Linear in the file's
    format computing as the library's layer, every other tensor the file's,
    nothing missing or unused; the model's state_dict() is the checkpoint
    again (GGUF: as ComfyUI's)."""
    model = llama_tree()
    report = nt.load_quantized(model, path)
    assert report["quantized"] == [n for n in (m for m, _ in model.named_modules()) if n in LAYERS]
    assert sorted(report["quantized"]) == sorted(LAYERS)
    assert not report["missing"] and not report["unused"]
    want = as_comfyui(path, tmp_path) if path == GG else st_dir(path)
    assert_same_tensors(model.state_dict(), want, "the model's state_dict")
    for i, prefix in enumerate(LAYERS):
        layer = model.get_submodule(prefix)
        assert layer.checkpoint_format == FORMAT_OF[path]
        x = rand((2, 3, layer.in_features), seed=80 + i)
        with torch.no_grad():
            assert_bits_equal(layer(x), library_forward(path, prefix, x), prefix)


def test_load_quantized_into_meta_with_a_prefix(tmp_path):
    """A meta-device tree under another root name, filled on the CPU."""
    with torch.device("meta"):
        inner = llama_tree()
    outer = nn.Module()
    outer.net = inner
    report = nt.load_quantized(outer.net, CT, device="cpu")
    assert len(report["quantized"]) == 7
    wrapped = nn.Module()
    wrapped.model = llama_tree().model  # no lm_head: the file's is unused
    r = nt.load_quantized(wrapped, CT, strict=False)
    assert r["unused"] == ["lm_head.weight"]
    with pytest.raises(RuntimeError, match=r"1 unused \(lm_head.weight\)"):
        nt.load_quantized(copy.deepcopy(wrapped), CT)
    shifted = nn.Module()
    shifted.layers = llama_tree().model.layers
    r = nt.load_quantized(shifted, CT, prefix="model.", strict=False)
    assert len(r["quantized"]) == 7  # only names under the prefix count as unused
    assert r["unused"] == ["model.embed_tokens.weight", "model.norm.weight"]
    for name, m in outer.net.named_buffers():
        assert m.device.type == "cpu", name


def test_load_quantized_mixed_precision_refuses_fp8():
    """ModelOpt's MIXED_PRECISION export: the NVFP4 layers load, the BF16 ones
    are copied, and the FP8 layer is refused (its values need its scale), not
    copied into a BF16 weight; strict=False leaves it out and says so."""
    with pytest.raises(RuntimeError, match=r"down_proj.weight' is torch.float8_e4m3fn, an FP8"):
        nt.load_quantized(llama_tree(), MO_MIXED)
    model = llama_tree()
    before = model.model.layers[0].mlp.down_proj.weight.detach().clone()
    r = nt.load_quantized(model, MO_MIXED, strict=False)
    assert sorted(r["quantized"]) == sorted(MIXED_NVFP4)
    assert r["missing"] == ["model.layers.0.mlp.down_proj.weight"]
    assert r["unused"] == ["model.layers.0.mlp.down_proj." + p
                           for p in ("input_scale", "weight", "weight_scale")]
    assert torch.equal(model.model.layers[0].mlp.down_proj.weight, before)
    stored = st_dir(MO_MIXED)
    assert_bits_equal(model.model.layers[0].self_attn.o_proj.weight,
                      stored["model.layers.0.self_attn.o_proj.weight"], "a BF16 layer copied")


def test_load_quantized_takes_a_list_and_refuses_bad_paths(tmp_path):
    """A list of checkpoints (each detected on its own, the first with a name
    wins); a path the library cannot open is its error."""
    cfg = json.load(open(os.path.join(CT, "config.json")))
    assert cfg["quantization_config"]["quant_method"] == "compressed-tensors"
    everything = st_dir(CT)
    plain = {k: v for k, v in everything.items() if "self_attn" not in k and "mlp" not in k}
    st_write(tmp_path / "plain.safetensors", plain)
    model = llama_tree()
    r = nt.load_quantized(model, [tmp_path / "plain.safetensors", CT])
    assert len(r["quantized"]) == 7 and not r["missing"] and not r["unused"]
    with pytest.raises(nvfp4.Error):
        nt.load_quantized(llama_tree(), tmp_path / "absent.safetensors")
    with pytest.raises(ValueError, match="no checkpoint"):
        nt.load_quantized(llama_tree(), [])


def test_load_quantized_refuses_ggml_quantized_types(tmp_path):
    """A GGUF tensor of a ggml quantized type (here lm_head.weight made Q8_0,
    type 8, by patching its tensor info) has no torch dtype: refused by name,
    left out under strict=False."""
    import struct
    data = bytearray(open(GG, "rb").read())
    name = b"lm_head.weight"
    at = data.find(struct.pack("<Q", len(name)) + name) + 8 + len(name)
    ndim, = struct.unpack_from("<I", data, at)
    type_at = at + 4 + 8 * ndim
    assert struct.unpack_from("<I", data, type_at) == (30,)  # BF16
    struct.pack_into("<I", data, type_at, 8)  # Q8_0: 64 x 32 fits in the BF16 bytes
    patched = tmp_path / "q8.gguf"
    patched.write_bytes(bytes(data))
    with pytest.raises(RuntimeError, match="'lm_head.weight' is Q8_0, a type torch has no dtype"):
        nt.load_quantized(llama_tree(), patched)
    r = nt.load_quantized(llama_tree(), patched, strict=False)
    assert r["missing"] == ["lm_head.weight"] and r["unused"] == ["lm_head.weight"]
    assert len(r["quantized"]) == 7
