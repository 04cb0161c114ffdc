"""Checkpoints of every format through the package: detect_format, load_layer,
read_tensor, quantize_format, convert -- against the tools' own files in
tests/golden/{modelopt,compressed-tensors,gguf}/ (tools/gen_format_golden.py),
read here with a plain safetensors reader, not the library."""
import os

import numpy as np
import pytest

import nvfp4
from _helpers import REPO, st_read

G = os.path.join(REPO, "tests", "golden")
MO = os.path.join(G, "modelopt", "llama-nvfp4")
MO_MIXED = os.path.join(G, "modelopt", "llama-mixed")
CT = os.path.join(G, "compressed-tensors", "llama-nvfp4")
CT_CONV = os.path.join(G, "compressed-tensors", "llama-from-modelopt")
GG = os.path.join(G, "gguf", "llama-nvfp4.gguf")
Q = "model.layers.0.self_attn.q_proj"


def st_dir(path):
    """Every tensor of a safetensors file or directory, read without the library."""
    files = [path] if path.endswith(".safetensors") else \
        [os.path.join(path, f) for f in sorted(os.listdir(path)) if f.endswith(".safetensors")]
    out = {}
    for f in files:
        out.update(st_read(f))
    return out


@pytest.mark.parametrize("path,want", [(MO, "modelopt"), (MO_MIXED, "modelopt"),
                                       (CT, "compressed-tensors"), (CT_CONV, "compressed-tensors"),
                                       (GG, "gguf")])
def test_detect_format(path, want):
    assert nvfp4.detect_format(path) == want
    name, why = nvfp4.detect_format(path, evidence=True)
    assert name == want and why


def test_read_tensor_is_the_stored_bytes():
    for path, codes, scale2 in ((MO, ".weight", ".weight_scale_2"),
                                (CT, ".weight_packed", ".weight_global_scale")):
        raw = st_dir(path)
        t = nvfp4.read_tensor(path, Q + ".weight")
        assert np.array_equal(t.codes, raw[Q + codes])
        assert np.array_equal(t.scales, raw[Q + ".weight_scale"].view(np.uint8))
        assert t.tensor_scale.view(np.uint32) == raw[Q + scale2].reshape(()).view(np.uint32)
    # GGUF (made from the ModelOpt export): the same codes, sign-stripped scale bytes
    g = nvfp4.read_tensor(GG, Q + ".weight")
    raw = st_dir(MO)
    assert g.format == "gguf" and np.array_equal(g.codes, raw[Q + ".weight"])
    assert np.array_equal(g.scales, raw[Q + ".weight_scale"].view(np.uint8) & 0x7F)
    assert g.tensor_scale == raw[Q + ".weight_scale_2"].reshape(())


def test_load_layer_every_format_same_numbers():
    layers = [nvfp4.load_layer(p, Q) for p in (MO, CT_CONV, GG)]
    for other in layers[1:]:
        assert np.array_equal(other.weight.qdata, layers[0].weight.qdata)
        assert np.array_equal(other.weight.block_scale, layers[0].weight.block_scale)
        assert other.bias is not None and np.array_equal(other.bias, layers[0].bias)
        assert other.input_scale is not None
    mo_s2 = np.float32(layers[0].weight.per_tensor_scale)
    assert np.float32(layers[2].weight.per_tensor_scale) == mo_s2
    assert np.float32(layers[1].weight.per_tensor_scale) == np.float32(1) / (np.float32(1) / mo_s2)
    # a layer of a compressed-tensors checkpoint computes like any other
    x = np.random.default_rng(0).standard_normal((3, 64)).astype(np.float32)
    y = nvfp4.linear(x, layers[1], backend="cpu")
    assert y.shape == (3, 64)
    with pytest.raises(nvfp4.NotFoundError):
        nvfp4.load_layer(MO, "model.layers.0.nope")


@pytest.mark.parametrize("tool,case", [("modelopt", "gauss"), ("modelopt", "e2m1-grid-ties"),
                                       ("modelopt", "cols-40-padded"), ("modelopt", "one-nan"),
                                       ("compressed-tensors", "gauss"),
                                       ("compressed-tensors", "zero-blocks-and-row"),
                                       ("compressed-tensors", "f16-one-nan"),
                                       ("compressed-tensors", "given-fused")])
def test_quantize_format_matches_the_tool(tool, case):
    d = st_read(os.path.join(G, tool, "quant", case + ".safetensors"))
    codes = "expect.weight" if tool == "modelopt" else "expect.weight_packed"
    ts = "expect.weight_scale_2" if tool == "modelopt" else "expect.weight_global_scale"
    given = [v for k, v in d.items() if k.startswith("given.")]
    q = nvfp4.quantize_format(d["x"], tool, tensor_scale=given[0] if given else None)
    assert np.array_equal(q.codes, d[codes])
    assert np.array_equal(q.scales, d["expect.weight_scale"].view(np.uint8))
    assert q.tensor_scale.view(np.uint32) == d[ts].reshape(-1)[0].view(np.uint32)


def test_convert_round_trip_and_refusal(tmp_path):
    with pytest.raises(nvfp4.UnsupportedError, match="allow_rescale"):
        nvfp4.convert(MO, tmp_path / "ct", "compressed-tensors")
    assert not (tmp_path / "ct").exists()
    notes = nvfp4.convert(MO, tmp_path / "ct", "compressed-tensors", allow_rescale=True)
    assert any("FP32(1/x)" in n for n in notes)
    got, want = st_dir(str(tmp_path / "ct")), st_dir(CT_CONV)
    assert set(got) == set(want)
    for name in want:  # compressed-tensors' own converter, byte for byte
        assert got[name].tobytes() == want[name].tobytes(), name
    assert nvfp4.convert(tmp_path / "ct", tmp_path / "back.safetensors", "modelopt") == []
    back, orig = st_dir(str(tmp_path / "back.safetensors")), st_dir(MO)
    assert {k: v.tobytes() for k, v in back.items()} == {k: v.tobytes() for k, v in orig.items()}
    nvfp4.convert(MO, tmp_path / "m.gguf", "gguf")
    assert nvfp4.detect_format(tmp_path / "m.gguf") == "gguf"
    with pytest.raises(ValueError):
        nvfp4.convert(MO, tmp_path / "x", "safetensors")
