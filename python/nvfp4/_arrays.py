"""Arrays in and out: NumPy (BF16 through ml_dtypes) and PyTorch (CPU, CUDA).

Inputs are passed to C by pointer, never copied; anything not already in the
layout C expects (dtype, rank, C-contiguity, device) is refused with a
TypeError or ValueError before any C call.
"""
import ctypes
import sys

import numpy as np

from . import _lib

try:  # optional: NumPy has no BF16 / E4M3 dtypes of its own
    import ml_dtypes as _ml
except ImportError:  # pragma: no cover - exercised where ml_dtypes is absent
    _ml = None


_torch = None
_Tensor = ()  # isinstance(x, ()) is False until torch is seen
TORCH_FLOAT_CODES = {}  # torch dtype -> C dtype, filled when torch is seen
NP_FLOAT_CODES = {np.dtype(np.float16): _lib.DTYPE_F16, np.dtype(np.float32): _lib.DTYPE_F32}
if _ml is not None:
    NP_FLOAT_CODES[np.dtype(_ml.bfloat16)] = _lib.DTYPE_BF16


def torch_module():
    """torch, if the caller has imported it (nvfp4 never imports it itself)."""
    global _torch, _Tensor
    if _torch is None:
        _torch = sys.modules.get("torch")
        if _torch is not None:
            _Tensor = _torch.Tensor
            TORCH_FLOAT_CODES.update({_torch.bfloat16: _lib.DTYPE_BF16,
                                      _torch.float16: _lib.DTYPE_F16,
                                      _torch.float32: _lib.DTYPE_F32})
    return _torch


def is_torch(x):
    if _torch is None:
        torch_module()
    return isinstance(x, _Tensor)


def kind(x):
    """'numpy', 'torch' or None."""
    if isinstance(x, np.ndarray):
        return "numpy"
    if is_torch(x):
        return "torch"
    return None


def np_bf16():
    if _ml is None:
        raise ImportError("nvfp4: BF16 NumPy arrays need ml_dtypes (pip install ml_dtypes)")
    return np.dtype(_ml.bfloat16)


def np_e4m3():
    return None if _ml is None else np.dtype(_ml.float8_e4m3fn)


def float_dtype_code(x):
    """C dtype of a BF16 / F16 / F32 array or tensor, or None."""
    if is_torch(x):
        return TORCH_FLOAT_CODES.get(x.dtype)
    return NP_FLOAT_CODES.get(x.dtype)


def dtype_name(x):
    return str(x.dtype)


def contiguous(x):
    return x.is_contiguous() if is_torch(x) else bool(x.flags.c_contiguous)


def device_of(x):
    """'cpu' for NumPy arrays; the torch.device of a tensor."""
    return x.device if is_torch(x) else "cpu"


def is_cuda(x):
    return is_torch(x) and x.device.type == "cuda"


def ptr(x):
    """Address of the first element (None for None)."""
    if x is None:
        return None
    if is_torch(x):
        return x.data_ptr() or None
    return x.ctypes.data or None


def check_array(x, what, ndim=2):
    """Common checks: a NumPy array or torch tensor of `ndim` dims, C-contiguous,
    on the CPU or a CUDA device, not empty."""
    k = kind(x)
    if k is None:
        raise TypeError(f"{what} must be a NumPy array or a torch tensor, not {type(x).__name__}")
    if x.ndim != ndim:
        raise ValueError(f"{what} must have {ndim} dimension{'s' if ndim != 1 else ''}, "
                         f"got shape {tuple(x.shape)}")
    if k == "torch" and x.device.type not in ("cpu", "cuda"):
        raise ValueError(f"{what} is on {x.device}; nvfp4 handles CPU and CUDA tensors")
    if not contiguous(x):
        raise ValueError(f"{what} must be C-contiguous (row-major); call "
                         f"{'.contiguous()' if k == 'torch' else 'numpy.ascontiguousarray()'} "
                         "first -- nvfp4 never copies inputs behind your back")
    if k == "numpy" and not x.flags.aligned:
        raise ValueError(f"{what} is not aligned to its element size; copy it "
                         "(numpy.array(x)) first")
    if any(int(d) == 0 for d in x.shape):
        raise ValueError(f"{what} is empty (shape {tuple(x.shape)})")
    return k


def same_place(arrays, names):
    """All arrays of one kind and on one device; returns (kind, device)."""
    kinds = {kind(a) for a in arrays}
    devices = {str(device_of(a)) for a in arrays}
    if len(kinds) > 1 or len(devices) > 1:
        desc = ", ".join(f"{n} {kind(a)} on {device_of(a)}" for a, n in zip(arrays, names))
        raise ValueError(f"operands must be all NumPy or all torch tensors on one device ({desc})")
    return kinds.pop(), device_of(arrays[0])


def scalar_value(v, what):
    """A host float from a Python number, NumPy scalar / 1-element array or a
    1-element tensor (a CUDA tensor is read back: that synchronizes)."""
    if isinstance(v, bool):
        raise TypeError(f"{what} must be a number, not bool")
    if isinstance(v, (int, float, np.floating, np.integer)):
        return float(v)
    if isinstance(v, np.ndarray):
        if v.size != 1:
            raise ValueError(f"{what} must hold one value, got shape {v.shape}")
        return float(v.reshape(-1)[0])
    if is_torch(v):
        if v.numel() != 1:
            raise ValueError(f"{what} must hold one value, got shape {tuple(v.shape)}")
        return float(v.item())
    raise TypeError(f"{what} must be a number or a one-element array, not {type(v).__name__}")


def owned_bytes(address, nbytes, owner):
    """A NumPy uint8 view of C memory that `owner` frees when the last view dies."""
    buf = (ctypes.c_uint8 * nbytes).from_address(address)
    buf._nvfp4_owner = owner  # ties the C allocation's lifetime to the view
    return np.frombuffer(buf, dtype=np.uint8)


def host_bias(bias, n, what="bias"):
    """bias as a contiguous float32 NumPy array of n values (BF16/F16 widened
    exactly), or None."""
    if bias is None:
        return None
    k = check_array(bias, what, ndim=1)
    if bias.shape[0] != n:
        raise ValueError(f"{what} has {bias.shape[0]} values; the output has N = {n} columns")
    if float_dtype_code(bias) is None:
        raise TypeError(f"{what} must be float32, float16 or bfloat16, not {dtype_name(bias)}")
    if k == "torch":
        if bias.device.type != "cpu":
            raise ValueError(f"{what} is on {bias.device}; the operands are on the CPU")
        return bias.detach().to(dtype=torch_module().float32).contiguous().numpy()
    return np.ascontiguousarray(bias, dtype=np.float32)


def device_bias(bias, n, device, what="bias"):
    """bias as a contiguous float32 tensor of n values on `device`, or None."""
    if bias is None:
        return None
    check_array(bias, what, ndim=1)
    if not is_torch(bias) or bias.device != device:
        raise ValueError(f"{what} must be a torch tensor on {device}, like the operands")
    if bias.shape[0] != n:
        raise ValueError(f"{what} has {bias.shape[0]} values; the output has N = {n} columns")
    if float_dtype_code(bias) is None:
        raise TypeError(f"{what} must be float32, float16 or bfloat16, not {dtype_name(bias)}")
    return bias.detach().to(dtype=torch_module().float32).contiguous()
