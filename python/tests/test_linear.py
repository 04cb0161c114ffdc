"""nvfp4.load_layer + nvfp4.linear against `nvfp4 linear` on ComfyUI checkpoints."""
import numpy as np
import pytest

import nvfp4
from _helpers import BF16, assert_bits_equal, cli, random_bf16, st_read, st_write


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A ComfyUI NVFP4 checkpoint made by the CLI (`nvfp4 example` + `nvfp4
    quantize`), plus a layer with a static input_scale, a weight whose rows
    ComfyUI padded to 16 and a shorter bias, and activations."""
    d = tmp_path_factory.mktemp("ckpt")
    ex, q = d / "ex.safetensors", d / "q.safetensors"
    cli("example", ex)
    cli("quantize", ex, q)
    t = st_read(q)
    rng = np.random.default_rng(31)
    w = nvfp4.quantize(random_bf16(rng, 40, 200, 0.05))  # -> 48 x 208
    t["odd.weight"] = w.qdata
    t["odd.weight_scale"] = w.block_scale.view(np.dtype("uint8"))
    t["odd.weight_scale_2"] = np.float32(w.per_tensor_scale).reshape(())
    t["odd.input_scale"] = np.float32(0.0071).reshape(())
    t["odd.bias"] = random_bf16(rng, 1, 40)[0]
    t["blocks.0.attn.qkv.input_scale"] = np.float32(0.021).reshape(())
    ck = d / "ck.safetensors"
    st_write(ck, t)
    x_odd = random_bf16(rng, 5, 200, 3.0)
    # The CLI takes only activations of the weight's stored K; the library
    # (and nvfp4.linear) zero-pads K to 16 as ComfyUI's quantizer does, so the
    # CLI gets the same activations padded explicitly.
    x_odd_padded = np.zeros((5, 208), dtype=x_odd.dtype)
    x_odd_padded[:, :200] = x_odd
    xs = {"x": st_read(ex)["x"], "x_odd": x_odd, "x_odd_padded": x_odd_padded,
          "x_f32": rng.standard_normal((3, 256)).astype(np.float32),
          "x_f16": rng.standard_normal((9, 1024)).astype(np.float16)}
    xf = d / "x.safetensors"
    st_write(xf, xs)
    return {"ck": ck, "xf": xf, "x": xs, "dir": d}


CASES = [("blocks.0.attn.qkv", "x"), ("blocks.0.attn.qkv", "x_f32"), ("odd", "x_odd"),
         ("blocks.0.mlp.fc2", "x_f16")]


@pytest.mark.parametrize("layer,xname", CASES)
@pytest.mark.parametrize("variant", ["eager", "cuda"])
def test_against_cli(checkpoint, layer, xname, variant):
    ck, xf, d = checkpoint["ck"], checkpoint["xf"], checkpoint["dir"]
    L = nvfp4.load_layer(ck, layer)
    x = checkpoint["x"][xname]
    modes = ["dynamic"] + (["static"] if L.input_scale is not None else [])
    for mode in modes:
        out_f = d / f"y-{layer}-{xname}-{variant}-{mode}.safetensors"
        cli_x = "x_odd_padded" if xname == "x_odd" else xname
        cli("linear", f"{ck}:{layer}", f"{xf}:{cli_x}", "-o", out_f, "--input-scale", mode,
            "--variant", variant, "--backend", "cpu")
        want = st_read(out_f)
        raw, out = nvfp4.linear(x, L, input_scale=mode, variant=variant, return_raw=True)
        what = f"{layer} x {xname} {variant} {mode}"
        assert out.dtype == BF16 and out.shape == (x.shape[0], L.weight.rows)
        assert_bits_equal(raw, want["raw"], what + ": raw")
        assert_bits_equal(out, want["out"], what + ": out")
        # the reference backend (quantize, then the plain oracle) agrees
        r_raw, r_out = nvfp4.linear(x, L, input_scale=mode, variant=variant, backend="ref",
                                    return_raw=True)
        assert_bits_equal(r_raw, raw, what + ": ref raw")
        assert_bits_equal(r_out, out, what + ": ref out")


def test_load_layer_contents(checkpoint):
    t = st_read(checkpoint["ck"])
    L = nvfp4.load_layer(checkpoint["ck"], "odd.weight")  # a trailing .weight is accepted
    assert L.name == "odd"
    assert_bits_equal(L.weight.qdata, t["odd.weight"], "codes")
    assert_bits_equal(L.weight.block_scale, t["odd.weight_scale"].view(np.uint8), "scales")
    assert L.input_scale == float(np.float32(0.0071))
    assert L.bias.dtype == np.float32 and L.bias.shape == (48,)
    assert_bits_equal(L.bias[:40], t["odd.bias"].astype(np.float32), "bias")
    assert not L.bias[40:].any(), "bias zero-extended to the padded rows"
    # default input_scale: static when the layer has one
    x = checkpoint["x"]["x_odd"]
    assert_bits_equal(nvfp4.linear(x, L), nvfp4.linear(x, L, input_scale="static"), "default")
    assert_bits_equal(nvfp4.linear(x, L, input_scale=0.0071),
                      nvfp4.linear(x, L, input_scale="static"), "number")
    M = nvfp4.load_layer(checkpoint["ck"], "blocks.0.mlp.fc2")
    assert M.input_scale is None and M.bias is None


def test_batched_and_torch(checkpoint, torch):
    L = nvfp4.load_layer(checkpoint["ck"], "blocks.0.attn.qkv")
    x = checkpoint["x"]["x"]
    want = nvfp4.linear(x, L)
    # leading dims are flattened
    got = nvfp4.linear(x.reshape(2, 4, 256), L)
    assert got.shape == (2, 4, 768)
    assert_bits_equal(got.reshape(8, 768), want, "batched")
    # torch CPU tensors, layer loaded onto the torch CPU device
    Lt = nvfp4.load_layer(checkpoint["ck"], "blocks.0.attn.qkv", device="cpu")
    assert isinstance(Lt.weight.qdata, torch.Tensor)
    assert Lt.weight.block_scale.dtype == torch.float8_e4m3fn
    xt = torch.from_numpy(x.view(np.int16)).view(torch.bfloat16)
    out = nvfp4.linear(xt, Lt)
    assert out.dtype == torch.bfloat16
    assert_bits_equal(out, want, "torch CPU")
