"""Every bad argument raises a clear exception (TypeError / ValueError, or the
library's error class with its message) -- never a crash, never garbage."""
import numpy as np
import pytest

import nvfp4
from _helpers import BF16, E4M3, random_bf16, st_write

RNG = np.random.default_rng(41)
X = random_bf16(RNG, 32, 64)
A = nvfp4.quantize(X)
B = nvfp4.quantize(random_bf16(RNG, 48, 64))


def raises(exc, fn, *args, match=None, **kw):
    with pytest.raises(exc, match=match) as e:
        fn(*args, **kw)
    assert str(e.value), "the message is not empty"
    return e.value


# ---- quantize ----------------------------------------------------------------
@pytest.mark.parametrize("bad", [X.astype(np.int32), X.astype(np.float64), X.view(np.uint16),
                                 X.astype(np.int8)])
def test_quantize_wrong_dtype(bad):
    raises(TypeError, nvfp4.quantize, bad, match="bfloat16, float16 or float32")


@pytest.mark.parametrize("bad", [X.reshape(-1), X.reshape(2, 16, 64), np.float32(1.0)])
def test_quantize_wrong_rank(bad):
    raises((ValueError, TypeError), nvfp4.quantize, bad)


@pytest.mark.parametrize("bad", [X[:, ::2], X.T, np.asfortranarray(X)])
def test_quantize_non_contiguous(bad):
    raises(ValueError, nvfp4.quantize, bad, match="contiguous")


def test_quantize_misaligned():
    buf = np.zeros(32 * 64 * 4 + 1, np.uint8)
    x = np.frombuffer(buf.data, dtype=np.float32, count=32 * 64, offset=1).reshape(32, 64)
    raises(ValueError, nvfp4.quantize, x, match="aligned")


def test_quantize_bad_values():
    raises(ValueError, nvfp4.quantize, X[:0], match="empty")
    raises(TypeError, nvfp4.quantize, X.tolist(), match="NumPy array or a torch tensor")
    raises(ValueError, nvfp4.quantize, X, variant="fast", match="variant")
    raises(TypeError, nvfp4.quantize, X, per_tensor_scale="1", match="per_tensor_scale")
    raises(TypeError, nvfp4.quantize, X, per_tensor_scale=True)
    raises(ValueError, nvfp4.quantize, X, per_tensor_scale=np.ones(2, np.float32),
           match="one value")


# ---- NVFP4Tensor -------------------------------------------------------------
def test_wrap_errors():
    q, s, p = A.qdata, A.block_scale, A.per_tensor_scale
    raises(ValueError, nvfp4.NVFP4Tensor, q[:, :4].copy(), s, p, match="not a multiple of 16")
    raises(ValueError, nvfp4.NVFP4Tensor, q[:, 1:].copy(), s, p, match="multiple of 16")
    raises(TypeError, nvfp4.NVFP4Tensor, q.astype(np.int16), s, p, match="uint8")
    raises(TypeError, nvfp4.NVFP4Tensor, q, s.astype(np.float32), p, match="E4M3")
    raises(ValueError, nvfp4.NVFP4Tensor, q, s[:64].copy(), p, match="128x4 tiled")
    raises(ValueError, nvfp4.NVFP4Tensor, q, s.reshape(-1), p)
    raises(ValueError, nvfp4.NVFP4Tensor, q[:, ::2], s, p, match="contiguous")
    raises(TypeError, nvfp4.NVFP4Tensor, q, s, "x")
    raises(ValueError, nvfp4.NVFP4Tensor, q.reshape(-1), s, p, match="2 dimensions")
    t = nvfp4.NVFP4Tensor(q, s.view(E4M3), p)
    raises(TypeError, t.dequantize, np.int32)


# ---- matmul ------------------------------------------------------------------
def test_matmul_errors():
    raises(TypeError, nvfp4.matmul, X, B, match="NVFP4Tensor")
    raises(TypeError, nvfp4.matmul, A, B.qdata, match="NVFP4Tensor")
    C = nvfp4.quantize(random_bf16(RNG, 16, 32))
    raises(ValueError, nvfp4.matmul, A, C, match="K differs")
    raises(ValueError, nvfp4.matmul, A, B, model="sm100", match="model")
    raises(ValueError, nvfp4.matmul, A, B, backend="gpu", match="backend")
    raises(ValueError, nvfp4.matmul, A, B, model="exact", backend="cuda", match="sm90")
    for bad in (0, -1, 4097):
        raises(ValueError, nvfp4.matmul, A, B, k_slices=bad, match="k_slices")
    for bad in (1.0, True, "2"):
        raises(TypeError, nvfp4.matmul, A, B, k_slices=bad, match="k_slices")
    raises(ValueError, nvfp4.matmul, A, B, bias=np.zeros(47, np.float32), match="N = 48")
    raises(TypeError, nvfp4.matmul, A, B, bias=np.zeros(48, np.int32), match="float32")
    raises(ValueError, nvfp4.matmul, A, B, bias=np.zeros((48, 1), np.float32), match="1 dimension")
    raises(ValueError, nvfp4.matmul, A, B, bias=np.zeros(96, np.float32)[::2], match="contiguous")
    raises(ValueError, nvfp4.matmul, A, B, threads=-1, match="threads")


def test_mixed_containers(torch):
    tB = nvfp4.NVFP4Tensor(torch.from_numpy(B.qdata), torch.from_numpy(B.block_scale),
                           float(B.per_tensor_scale))
    raises(ValueError, nvfp4.matmul, A, tB, match="all NumPy or all torch")
    raises(ValueError, nvfp4.NVFP4Tensor, A.qdata, torch.from_numpy(A.block_scale), 1.0,
           match="all NumPy or all torch")
    raises(TypeError, nvfp4.quantize, torch.zeros(16, 16, dtype=torch.int32))
    raises(ValueError, nvfp4.quantize, torch.zeros(16, 32, dtype=torch.bfloat16)[:, ::2],
           match="contiguous")
    raises(TypeError, nvfp4.NVFP4Tensor, torch.from_numpy(A.qdata),
           torch.from_numpy(A.block_scale).float(), 1.0, match="E4M3")


# ---- linear / load_layer ------------------------------------------------------
def test_linear_errors(tmp_path):
    layer = nvfp4.Layer(B)
    raises(ValueError, nvfp4.linear, random_bf16(RNG, 4, 80), layer, input_scale="dynamic",
           match="K = 80")
    raises(ValueError, nvfp4.linear, X, layer, input_scale="static", match="no input_scale")
    raises(ValueError, nvfp4.linear, X, layer, input_scale="auto", match="input_scale")
    raises(TypeError, nvfp4.linear, X, B.qdata, match="Layer or NVFP4Tensor")
    raises(ValueError, nvfp4.linear, X.T, layer, match="contiguous")
    raises(TypeError, nvfp4.linear, X.astype(np.int16), layer)
    raises(ValueError, nvfp4.linear, X[0], layer, match=r"\[M, K\]")
    raises(ValueError, nvfp4.linear, X, layer, variant="x", match="variant")
    raises(TypeError, nvfp4.Layer, B.qdata)


def test_load_layer_errors(tmp_path):
    e = raises(nvfp4.FileIOError, nvfp4.load_layer, tmp_path / "absent.safetensors", "l")
    assert "absent.safetensors" in e.message and e.status == 3 and isinstance(e, OSError)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{notjson")
    e = raises(nvfp4.MalformedError, nvfp4.load_layer, bad, "l")
    assert isinstance(e, nvfp4.Error) and isinstance(e, ValueError)
    f = tmp_path / "ok.safetensors"
    st_write(f, {"l.weight": A.qdata, "l.weight_scale": A.block_scale.view(E4M3),
                 "l.weight_scale_2": np.float32(A.per_tensor_scale).reshape(())})
    e = raises(nvfp4.NotFoundError, nvfp4.load_layer, f, "m")
    assert "m.weight" in e.message
    # a scale of the wrong shape: the library's reader names it
    st_write(f, {"l.weight": A.qdata, "l.weight_scale": A.block_scale[:64].view(E4M3),
                 "l.weight_scale_2": np.float32(1).reshape(())})
    e = raises(nvfp4.MalformedError, nvfp4.load_layer, f, "l", match="weight_scale")
    raises(TypeError, nvfp4.load_layer, f, 3)


def test_library_error_class_and_message():
    """A status from C becomes its class, carrying nvfp4_last_error()."""
    from nvfp4 import errors
    with pytest.raises(nvfp4.InvalidArgumentError) as e:
        errors.check(1, "nvfp4_test")
    assert isinstance(e.value, ValueError) and isinstance(e.value, RuntimeError)
    assert e.value.function == "nvfp4_test" and e.value.status_name == "invalid argument"


# ---- explain --------------------------------------------------------------------
def test_explain_argument_errors():
    raw, out = nvfp4.matmul(A, B)
    raises(TypeError, nvfp4.explain, A, X, raw)
    a16 = np.zeros((4, 24), np.float16)
    raises(ValueError, nvfp4.explain, a16, np.zeros((8, 24), np.float16), np.zeros((4, 8), np.float32),
           match="not a multiple of 16")
    raises(TypeError, nvfp4.explain, a16.astype(np.float32), a16.astype(np.float32),
           np.zeros((4, 4), np.float32), match="float16 or bfloat16")
    raises(ValueError, nvfp4.explain, A, B, raw[:5], match="ref")
    raises(TypeError, nvfp4.explain, A, B, np.zeros(raw.shape, np.float16), match="float32")
    raises(ValueError, nvfp4.explain, a16[:, :16].copy(), a16[:, :16].copy(),
           np.zeros((4, 4), BF16), match="alpha")
