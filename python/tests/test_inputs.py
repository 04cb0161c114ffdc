"""What users pass: shapes that are not multiples of 16 (the same rule as the
nvfp4 command: ComfyUI's padded bytes, the user's rows), NaN and Inf (told
with a NonFiniteWarning naming the element, refused with strict=True), and
per-tensor scales (one rule, the library's: finite and > 0)."""
import warnings

import numpy as np
import pytest

import nvfp4
from _helpers import BF16, assert_bits_equal, cli, random_bf16, st_read, st_write


def _no_warning(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", nvfp4.NonFiniteWarning)
        return fn(*args, **kw)


# ---- rows and K ---------------------------------------------------------------
def test_quantize_keeps_the_rows_and_comfyui_bytes():
    rng = np.random.default_rng(1)
    x = random_bf16(rng, 4, 64, 2.0)
    q = nvfp4.quantize(x)
    assert q.shape == (4, 64) and q.qdata.shape == (16, 32) and q.block_scale.shape == (128, 4)
    assert q.dequantize().shape == (4, 64)
    w = nvfp4.quantize(random_bf16(rng, 128, 64, 0.05))
    raw, out = nvfp4.matmul(q, w)
    assert raw.shape == (4, 128) and out.shape == (4, 128)
    # the same bits as the stored padded tensor's first 4 rows
    padded = nvfp4.NVFP4Tensor(q.qdata, q.block_scale, q.per_tensor_scale)
    assert padded.rows == 16
    assert_bits_equal(raw, nvfp4.matmul(padded, w)[0][:4], "4 rows of 16")
    report = nvfp4.explain(q, w, raw)
    assert report["outputs"] == 4 * 128 and report["best"]["matched"] == 1.0


def test_rows_argument_rules():
    rng = np.random.default_rng(2)
    q = nvfp4.quantize(random_bf16(rng, 33, 32))  # stored 48 rows
    assert q.rows == 33 and q.qdata.shape[0] == 48
    for rows in (33, 40, 47, 48):
        assert nvfp4.NVFP4Tensor(q.qdata, q.block_scale, q.per_tensor_scale, rows=rows).rows == rows
    for rows in (32, 49, -1):  # more padding than ComfyUI's, or more rows than stored
        with pytest.raises(ValueError):
            nvfp4.NVFP4Tensor(q.qdata, q.block_scale, q.per_tensor_scale, rows=rows)


def test_cli_quantized_rows_load_as_the_users(tmp_path):
    """A layer `nvfp4 quantize` padded loads with its own rows (the file's
    record), so Python and the command agree on N."""
    rng = np.random.default_rng(3)
    w = random_bf16(rng, 5, 17, 0.5)
    st_write(tmp_path / "w.st", {"lin.weight": w})
    cli("quantize", tmp_path / "w.st", tmp_path / "q.st")
    layer = nvfp4.load_layer(tmp_path / "q.st", "lin")
    assert layer.weight.shape == (5, 32)
    assert layer.weight.qdata.shape == (16, 16)  # ComfyUI's padding kept for the kernels
    # activations of K 17 against K 32: their zero-padding, as the command does
    x = random_bf16(rng, 3, 17)
    xp = np.zeros((3, 32), dtype=BF16)
    xp[:, :17] = x
    y = nvfp4.linear(x, layer, backend="cpu")
    assert y.shape == (3, 5)
    assert_bits_equal(y, nvfp4.linear(xp, layer, backend="cpu"), "K 17 == K 32 zero-padded")
    st_write(tmp_path / "x.st", {"x": x})
    cli("linear", f"{tmp_path / 'q.st'}:lin", f"{tmp_path / 'x.st'}:x", "-o", tmp_path / "y.st",
        "--backend", "cpu")
    assert_bits_equal(y, st_read(tmp_path / "y.st")["out"], "python == nvfp4 linear")
    # converted to ModelOpt's layout, the record travels: the same rows and bits
    nvfp4.convert(tmp_path / "q.st", tmp_path / "m.safetensors", "modelopt")
    assert nvfp4.detect_format(tmp_path / "m.safetensors") == "modelopt"
    mo = nvfp4.load_layer(tmp_path / "m.safetensors", "lin")
    assert mo.weight.shape == (5, 32) and mo.weight.qdata.shape == (16, 16)
    assert_bits_equal(nvfp4.linear(x, mo, backend="cpu"), y, "ModelOpt conversion == ComfyUI")
    # ModelOpt's own quantizer stores 5 rows: qdata still holds 16 (the kernels' N)
    cli("quantize", tmp_path / "w.st", tmp_path / "qm.st", "--variant", "modelopt")
    own = nvfp4.load_layer(tmp_path / "qm.st", "lin")
    assert own.weight.shape == (5, 32) and own.weight.qdata.shape == (16, 16)
    assert not own.weight.qdata[5:].any()
    assert nvfp4.linear(x, own, backend="cpu").shape == (3, 5)


# ---- NaN and Inf ----------------------------------------------------------------
def test_quantize_tells_where_the_nan_is_and_what_it_did():
    rng = np.random.default_rng(4)
    x = random_bf16(rng, 32, 64, 0.02)
    x[3, 17] = np.nan
    with pytest.warns(nvfp4.NonFiniteWarning) as w:
        q = nvfp4.quantize(x)
    msg = str(w[0].message)
    assert "holds 1 NaN value (at row 3, col 17)" in msg and "per-tensor scale" in msg
    assert "all 2048 of its 32 x 64 quantized values are NaN" in msg
    assert np.isnan(q.dequantize()).all()
    with pytest.raises(ValueError, match="strict=True"):
        nvfp4.quantize(x, strict=True)
    with pytest.warns(nvfp4.NonFiniteWarning, match="all zeros"):
        nvfp4.quantize(np.zeros((16, 32), np.float32))
    _no_warning(nvfp4.quantize, random_bf16(rng, 16, 32), strict=True)


def test_linear_and_matmul_name_the_nan():
    rng = np.random.default_rng(5)
    wv = random_bf16(rng, 32, 64, 0.02)
    wv[1, 2] = np.nan
    with pytest.warns(nvfp4.NonFiniteWarning):
        w = nvfp4.quantize(wv)
    x = random_bf16(rng, 2, 64)
    with pytest.warns(nvfp4.NonFiniteWarning) as rec:
        nvfp4.linear(x, nvfp4.Layer(w), backend="cpu")
    msg = str(rec[0].message)
    assert "all 64 of the 2 x 32 outputs are NaN" in msg and "the weight has 2048 NaN values" in msg
    with pytest.raises(ValueError, match="the weight has"):
        nvfp4.linear(x, nvfp4.Layer(w), backend="cpu", strict=True)
    a = nvfp4.quantize(x)
    with pytest.warns(nvfp4.NonFiniteWarning, match="b has 2048 NaN"):
        nvfp4.matmul(a, w)
    with pytest.raises(ValueError, match="strict"):
        nvfp4.matmul(a, w, strict=True)
    # one NaN in x with the dynamic scale: every output, and why
    good = _no_warning(nvfp4.quantize, random_bf16(rng, 32, 64, 0.02))
    x[1, 5] = np.nan
    with pytest.warns(nvfp4.NonFiniteWarning) as rec:
        nvfp4.linear(x, nvfp4.Layer(good), input_scale="dynamic", backend="cpu")
    msg = str(rec[0].message)
    assert "all 64 of the 2 x 32 outputs" in msg and "dynamic input scale" in msg
    assert "x (the dynamic input scale amax/2688 is NaN) has 1 NaN value (at row 1, col 5)" in msg


# ---- per-tensor scales ------------------------------------------------------------
@pytest.mark.parametrize("bad", [-1.0, 0.0, -0.0, float("nan"), float("inf"), float("-inf")])
def test_one_rule_for_scales(bad):
    rng = np.random.default_rng(6)
    x = random_bf16(rng, 16, 32)
    with pytest.raises(nvfp4.InvalidArgumentError, match="is not a per-tensor scale"):
        nvfp4.quantize(x, per_tensor_scale=bad)
    w = nvfp4.quantize(random_bf16(rng, 16, 32, 0.05))
    with pytest.raises(nvfp4.InvalidArgumentError, match="input_scale"):
        nvfp4.linear(x, nvfp4.Layer(w), input_scale=bad, backend="cpu")
    with pytest.raises(nvfp4.InvalidArgumentError, match="input_scale"):
        nvfp4.linear(x, nvfp4.Layer(w, input_scale=bad), input_scale="static", backend="cpu")


def test_subnormal_scales_are_scales():
    """2^-149 is positive and finite: taken by Python and by the command alike."""
    rng = np.random.default_rng(7)
    x = random_bf16(rng, 16, 32)
    tiny = float(np.float32(1e-45))
    assert tiny > 0
    q = nvfp4.quantize(x, per_tensor_scale=tiny)
    assert q.scale_value() == tiny
    w = nvfp4.quantize(random_bf16(rng, 16, 32, 0.05))
    nvfp4.linear(x, nvfp4.Layer(w), input_scale=tiny, backend="cpu")
