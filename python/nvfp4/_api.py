"""nvfp4's Python API over libnvfp4 (include/nvfp4.h).  See docs/PYTHON.md.

Per-call host work is kept small on the paths a model calls every step
(linear, matmul and quantize on CUDA tensors, and the CPU backend): the C
views of an NVFP4Tensor and a Layer's device bias and static scale are built
once and checked against the tensors on each call, the argument structs are
reused per thread and passed by address, workspaces come from torch's caching
allocator on the current stream, and nothing synchronizes the host.
tools/py_overhead.py measures what is left.
"""
import ctypes
import json
import threading

import numpy as np

from . import _arrays as A
from . import _lib
from . import _nonfinite as _nf
from .errors import check

_BACKENDS = ("auto", "cpu", "ref", "cuda")
_BACKEND_SET = frozenset(_BACKENDS)


def _l():
    return _lib.lib()


def _roundup(v, m):
    return (v + m - 1) // m * m


def _choice(value, allowed, what):
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{what} must be one of {', '.join(repr(a) for a in allowed)}; "
                         f"got {value!r}")
    return value


def _int_arg(value, what, lo, hi):
    if type(value) is int and lo <= value <= hi:  # the common case, checked first
        return value
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be an integer, not {type(value).__name__}")
    if not lo <= int(value) <= hi:
        raise ValueError(f"{what} must be in {lo}..{hi}; got {value}")
    return int(value)


class _Structs(threading.local):
    """This thread's argument structs, filled in and passed by address on every
    hot call (building a ctypes struct costs more than the call it feeds).
    Each call writes every field the C function reads before calling it."""

    def __init__(self):
        self.cuda_linear = _lib.CudaLinearArgs()
        self.cuda_gemm = _lib.CudaGemmArgs()
        self.cuda_quantize = _lib.CudaQuantizeArgs()
        self.linear = _lib.LinearArgs()
        self.gemm = _lib.GemmArgs()
        self.scale = ctypes.c_float()
        self.ta, self.tb = _lib.Tensor(), _lib.Tensor()  # host operand views
        self.ta_p, self.tb_p = ctypes.pointer(self.ta), ctypes.pointer(self.tb)
        self.cuda_linear_at = ctypes.addressof(self.cuda_linear)
        self.cuda_gemm_at = ctypes.addressof(self.cuda_gemm)
        self.cuda_quantize_at = ctypes.addressof(self.cuda_quantize)
        self.linear_at = ctypes.addressof(self.linear)
        self.gemm_at = ctypes.addressof(self.gemm)
        self.scale_at = ctypes.addressof(self.scale)


_structs = _Structs()

# Workspace bytes by (m, n, k): the C queries are pure functions of the shape.
_WS_LINEAR = {}
_WS_GEMM = {}


def _ws_bytes(cache, fn, m, n, k):
    key = (m, n, k)
    need = cache.get(key)
    if need is None:
        need = int(getattr(_l(), fn)(m, n, k))
        if len(cache) >= 4096:
            cache.clear()
        cache[key] = need
    return need


_raw_stream_fn = None


def _raw_stream(index):
    """The current CUDA stream of device `index` as an int (0 = the legacy
    default stream, passed to C as NULL)."""
    global _raw_stream_fn
    fn = _raw_stream_fn
    if fn is None:
        torch = A.torch_module()
        # torch's own raw-handle query skips building a torch.cuda.Stream
        fn = getattr(torch._C, "_cuda_getCurrentRawStream", None) or \
            (lambda i: torch.cuda.current_stream(i).cuda_stream)
        _raw_stream_fn = fn
    return fn(index)


_capturing_fn = None


def _capturing():
    """True while the current CUDA stream is being captured into a CUDA graph.
    The caches below are bypassed then: a graph keeps the addresses it was
    captured with, and a cached copy may be dropped (and its memory reused)
    after the capture; made inside the capture, a copy lives in the graph's
    memory and is filled by the graph's own replay."""
    global _capturing_fn
    if _capturing_fn is None:
        torch = A.torch_module()
        _capturing_fn = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None) or \
            torch.cuda.is_current_stream_capturing
    return _capturing_fn()


_current_device_fn = None


def _current_device():
    global _current_device_fn
    if _current_device_fn is None:
        torch = A.torch_module()
        _current_device_fn = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
    return _current_device_fn()


def _cuda_call(name, index, address):
    """Call a CUDA entry point with the struct at `address` on device `index`:
    the kernels launch on the CUDA runtime's current device, so switch to
    `index` only when it is not already current (a device guard costs more
    than the launch)."""
    torch = A.torch_module()
    fn = _lib.fast(name)
    if _current_device() == index:
        status = fn(address)
    else:
        with torch.cuda.device(index):
            status = fn(address)
    if status:
        check(status, name)


def _device_scalar(value, device, what):
    """A one-float float32 tensor on `device` holding a per-tensor scale:
    a tensor already there is used as is (no host round trip, no sync)."""
    torch = A.torch_module()
    if A.is_torch(value) and value.device == device:
        if value.numel() != 1:
            raise ValueError(f"{what} must hold one value, got shape {tuple(value.shape)}")
        if value.dtype == torch.float32:
            return value  # one element: data_ptr() is that float, whatever the strides
        return value.detach().reshape(1).to(torch.float32).contiguous()
    return torch.full((1,), A.scalar_value(value, what), dtype=torch.float32, device=device)


def _version(t):
    """t's in-place version counter, or None for tensors that keep none
    (inference-mode tensors): a cached conversion of those is never reused."""
    if t.is_inference():
        return None
    return t._version


def cuda_available():
    """True when this libnvfp4 has the CUDA backend and an sm_90 GPU is usable."""
    return bool(_l().nvfp4_cuda_available())


def library_path():
    """Path of the libnvfp4.so this package loaded."""
    return _lib.loaded_from()


# --------------------------------------------------------------------------
# NVFP4Tensor
# --------------------------------------------------------------------------
class _COwner:
    """Frees an nvfp4_tensor the library allocated once no view uses it."""
    __slots__ = ("t",)

    def __init__(self, t):
        self.t = t

    def __del__(self):
        handle = _lib._lib
        if handle is not None:
            handle.nvfp4_tensor_free(ctypes.byref(self.t))


class NVFP4Tensor:
    """An NVFP4 matrix of rows x cols elements as ComfyUI stores it.

    NVFP4Tensor(qdata, block_scale, per_tensor_scale) wraps existing arrays
    (a ComfyUI checkpoint's NAME, NAME_scale and NAME_scale_2) without copying:

    Args:
        qdata: uint8 [stored rows, cols/2], two E2M1 codes per byte, element
            2i in the HIGH nibble (ComfyUI's order).  cols must be a multiple
            of 16.  A NumPy array or a torch tensor (CPU or CUDA),
            C-contiguous.
        block_scale: the E4M3 block scales, [roundup(stored rows,128),
            roundup(cols/16,4)], cuBLAS 128x4 tiled; uint8,
            torch.float8_e4m3fn or ml_dtypes.float8_e4m3fn, same kind and
            device as qdata, C-contiguous.
        per_tensor_scale: ComfyUI's "scale_2": a number, or a one-element
            float32 array / tensor (on the same device for CUDA tensors).
        rows: the matrix's own rows, when qdata holds more: ComfyUI pads
            rows to a multiple of 16 (quantize() returns such a tensor, with
            rows = x's rows); default qdata's rows.  Every result (matmul,
            dequantize, explain) has `rows` rows.

    value(r, c) = e2m1(code(r, c)) * e4m3(scale(r, c // 16)) * per_tensor_scale.
    """

    def __init__(self, qdata, block_scale, per_tensor_scale, rows=None):
        k = A.check_array(qdata, "qdata")
        if (k == "torch" and qdata.dtype != A.torch_module().uint8) or \
                (k == "numpy" and qdata.dtype != np.uint8):
            raise TypeError(f"qdata must be uint8 (two E2M1 codes per byte), not {qdata.dtype}")
        stored, half = int(qdata.shape[0]), int(qdata.shape[1])
        cols = 2 * half
        if cols % 16:
            raise ValueError(f"qdata is [{stored}, {half}]: K = {cols} elements per row is not a "
                             "multiple of 16 (one E4M3 scale per 16 elements)")
        if rows is None:
            rows = stored
        else:  # the loader's rule (nvfp4_st_load_nvfp4): at most ComfyUI's padding
            rows = _int_arg(rows, "rows", 0, stored)
            if stored > _roundup(rows, 16):
                raise ValueError(f"rows = {rows} with qdata of {stored} rows: qdata holds the "
                                 "rows, or the rows padded to a multiple of 16")
        A.check_array(block_scale, "block_scale")
        A.same_place([qdata, block_scale], ["qdata", "block_scale"])
        if k == "torch":
            torch = A.torch_module()
            ok = block_scale.dtype in (torch.uint8, torch.float8_e4m3fn)
        else:
            ok = block_scale.dtype == np.uint8 or block_scale.dtype == A.np_e4m3()
        if not ok:
            raise TypeError("block_scale must be uint8 or float8_e4m3fn (E4M3 bytes), not "
                            f"{block_scale.dtype}")
        want = (_roundup(stored, 128), _roundup(cols // 16, 4))
        if tuple(int(d) for d in block_scale.shape) != want:
            raise ValueError(f"block_scale is {list(block_scale.shape)}; qdata of {stored} x {cols} "
                             f"elements needs {list(want)} (128x4 tiled)")
        if A.is_torch(per_tensor_scale) and A.is_cuda(qdata) and \
                per_tensor_scale.device == qdata.device:
            if per_tensor_scale.numel() != 1:
                raise ValueError("per_tensor_scale must hold one value, got shape "
                                 f"{tuple(per_tensor_scale.shape)}")
            if per_tensor_scale.dtype != A.torch_module().float32:
                raise TypeError(f"per_tensor_scale must be float32, not {per_tensor_scale.dtype}")
            pts = per_tensor_scale.reshape(())
        else:
            value = np.float32(A.scalar_value(per_tensor_scale, "per_tensor_scale"))
            if k == "torch":
                torch = A.torch_module()
                pts = torch.tensor(float(value), dtype=torch.float32, device=qdata.device) \
                    if not A.is_cuda(qdata) else \
                    torch.full((), float(value), dtype=torch.float32, device=qdata.device)
            else:
                pts = value
        self._init(qdata, block_scale, pts, rows, cols, k)

    def _init(self, qdata, block_scale, pts, rows, cols, kind):
        self._qdata, self._block_scale, self._pts = qdata, block_scale, pts
        self._rows, self._cols = rows, cols
        self._kind = kind
        self._on_cuda = kind == "torch" and qdata.is_cuda
        self._view = None  # the C view (_host_view / _cuda_view), built on first use

    @classmethod
    def _wrap(cls, qdata, block_scale, pts, rows, cols, kind):
        """An NVFP4Tensor around arrays this package just made with the right
        dtypes and shapes (the quantizers' results): no checks to repeat."""
        t = cls.__new__(cls)
        t._init(qdata, block_scale, pts, rows, cols, kind)
        return t

    # ---- properties --------------------------------------------------------
    @property
    def qdata(self):
        """uint8 [rows, cols/2] E2M1 codes, hi-first (ComfyUI)."""
        return self._qdata

    @property
    def block_scale(self):
        """E4M3 block scales [roundup(rows,128), roundup(cols/16,4)], 128x4 tiled."""
        return self._block_scale

    @property
    def per_tensor_scale(self):
        """The float32 per-tensor scale (np.float32, or a 0-d float32 tensor)."""
        return self._pts

    @property
    def shape(self):
        """(rows, cols) in elements: the matrix's own rows (qdata may hold
        ComfyUI's padding rows beyond them)."""
        return (self._rows, self._cols)

    @property
    def rows(self):
        return self._rows

    @property
    def cols(self):
        return self._cols

    @property
    def device(self):
        """'cpu' for NumPy arrays, else the torch.device."""
        return A.device_of(self._qdata)

    @property
    def is_cuda(self):
        return self._on_cuda

    def __repr__(self):
        kind = "numpy" if A.kind(self._qdata) == "numpy" else f"torch, {self.device}"
        return f"NVFP4Tensor({self._rows} x {self._cols}, {kind}, per_tensor_scale={self.scale_value()!r})"

    def scale_value(self):
        """The per-tensor scale as a Python float (reads a CUDA scalar back: syncs)."""
        return float(self._pts)

    def to(self, device):
        """A copy on another torch device (torch tensors only)."""
        if A.kind(self._qdata) != "torch":
            raise TypeError("to(): NumPy-backed NVFP4Tensor; wrap torch tensors instead")
        return NVFP4Tensor(self._qdata.to(device), self._block_scale.to(device),
                           self._pts.to(device), rows=self._rows)

    # ---- C views -----------------------------------------------------------
    def _host(self):
        """An nvfp4_tensor pointing at this host memory (no copy)."""
        return self._host_view()[0]

    def _host_view(self):
        """(nvfp4_tensor, a pointer to it) over this host memory, no copy.
        Built once; for torch tensors rebuilt when a storage moved or the
        scale tensor's value changed (NumPy arrays never move)."""
        if self._on_cuda:
            raise ValueError("this NVFP4Tensor is on a CUDA device; use backend='cuda' "
                             "(or 'auto'), or .to('cpu') first")
        v = self._view
        if self._kind == "numpy":
            if v is None:
                v = self._view = self._make_host_view(
                    None, self._qdata.ctypes.data, self._block_scale.ctypes.data, float(self._pts))
            return v[1], v[2]
        key = (self._qdata.data_ptr(), self._block_scale.data_ptr(), float(self._pts))
        if v is None or v[0] != key:
            v = self._view = self._make_host_view(key, *key)
        return v[1], v[2]

    def _make_host_view(self, key, codes, scales, pts):
        t = _lib.Tensor(self._rows, self._cols, codes, scales, pts, _lib.HI_FIRST,
                        _lib.SCALES_TILED)
        return key, t, ctypes.pointer(t)

    def _cuda_view(self):
        """(nvfp4_cuda_operand, a pointer to it) of device pointers.  The
        per-tensor scale of a CUDA NVFP4Tensor is always a float32 tensor on
        its device (see __init__), read there by the kernel.  Built once,
        rebuilt when a storage moved."""
        key = (self._qdata.data_ptr(), self._block_scale.data_ptr(), self._pts.data_ptr())
        v = self._view
        if v is None or v[0] != key:
            op = _lib.CudaOperand(key[0], key[1], key[2], self._rows, self._cols)
            v = self._view = (key, op, ctypes.pointer(op))
        return v[1], v[2]

    # ---- dequantize ----------------------------------------------------------
    def dequantize(self, dtype=None):
        """The matrix's values, [rows, cols].

        Args:
            dtype: float32 (default), bfloat16 or float16 -- a torch dtype for
                torch tensors, a NumPy / ml_dtypes dtype for NumPy arrays.  The
                values are FP32(FP32(e2m1 * e4m3) * per_tensor_scale) (exact
                product, one rounding: nvfp4_dequantize), then rounded to
                nearest even into dtype.  (comfy-kitchen's dequantize multiplies
                in the output dtype instead, so its BF16 results can differ.)
        Returns:
            a NumPy array or a torch tensor on this tensor's device.
        """
        k = A.kind(self._qdata)
        if k == "torch":
            torch = A.torch_module()
            dtype = torch.float32 if dtype is None else dtype
            if dtype not in (torch.float32, torch.bfloat16, torch.float16):
                raise TypeError(f"dequantize: dtype must be float32, bfloat16 or float16, not {dtype}")
            if self.is_cuda:
                return _dequantize_torch(self).to(dtype)
            out = torch.empty((self._rows, self._cols), dtype=torch.float32)
        else:
            want = np.dtype(np.float32) if dtype is None else np.dtype(dtype)
            allowed = [np.dtype(np.float32), np.dtype(np.float16)]
            if A._ml is not None:
                allowed.append(A.np_bf16())
            if want not in allowed:
                raise TypeError(f"dequantize: dtype must be float32, bfloat16 or float16, not {want}")
            out = np.empty((self._rows, self._cols), dtype=np.float32)
        t = self._host()
        check(_l().nvfp4_dequantize(ctypes.cast(A.ptr(out), _lib.c_float_p), ctypes.byref(t), 0),
              "nvfp4_dequantize")
        return out.to(dtype) if k == "torch" else out.astype(want)


_E2M1 = None
_UNTILE_CACHE = {}
_DEVICE_TABLES = {}


def _untile_index(rows, cols):
    """For every (r, cb): the byte offset of its scale in the tiled layout, as an
    int64 array [rows, cols/16] -- computed by the library's own
    nvfp4_scales_untile applied to the byte planes of an identity permutation."""
    key = (rows, cols)
    hit = _UNTILE_CACHE.get(key)
    if hit is not None:
        return hit
    nbytes = _l().nvfp4_scales_bytes(rows, cols, _lib.SCALES_TILED)
    ident = np.arange(nbytes, dtype=np.uint32)
    index = np.zeros(rows * (cols // 16), dtype=np.uint32)
    for plane in range(4):
        tiled = ((ident >> (8 * plane)) & 0xFF).astype(np.uint8)
        flat = np.empty(rows * (cols // 16), dtype=np.uint8)
        _l().nvfp4_scales_untile(A.ptr(flat), A.ptr(tiled), rows, cols)
        index |= flat.astype(np.uint32) << (8 * plane)
    index = index.astype(np.int64).reshape(rows, cols // 16)
    if len(_UNTILE_CACHE) > 64:
        _UNTILE_CACHE.clear()
    _UNTILE_CACHE[key] = index
    return index


def _dequantize_torch(t):
    """nvfp4_dequantize's formula in torch ops on the tensor's own device (for
    CUDA tensors; tested against the C function on the CPU): the E2M1 x E4M3
    product is exact in FP32, then one FP32 multiply by the per-tensor scale."""
    torch = A.torch_module()
    dev = t.qdata.device
    # the tables go to the device once per shape (an upload from pageable
    # memory waits for the host), then stay cached
    key = (str(dev), t.rows, t.cols)
    tables = _DEVICE_TABLES.get(key)
    if tables is None:
        if len(_DEVICE_TABLES) > 64:
            _DEVICE_TABLES.clear()
        tables = (torch.from_numpy(e2m1_table()).to(dev),
                  torch.from_numpy(_untile_index(t.rows, t.cols)).to(dev))
        _DEVICE_TABLES[key] = tables
    lut, index = tables
    scales = t.block_scale.reshape(-1).view(torch.uint8)[index]
    pts = _device_scalar(t.per_tensor_scale, dev, "per_tensor_scale")
    return dequantize_rows(t.qdata[: t.rows], scales, pts, lut)  # qdata may hold padded rows


def e2m1_table():
    """The 16 E2M1 values by code, float32 (from the library)."""
    global _E2M1
    if _E2M1 is None:
        _E2M1 = np.array([_l().nvfp4_e2m1_to_f32(c) for c in range(16)], dtype=np.float32)
    return _E2M1


def dequantize_rows(codes, scales, pts, lut):
    """nvfp4_dequantize's formula in torch ops: codes uint8 [rows, cols/2]
    (hi-first), scales the E4M3 bytes [rows, cols/16] row-major (uint8), pts
    a one-element float32 tensor, lut e2m1_table() as a tensor, all on one
    device.  Returns float32 [rows, cols]: FP32(e2m1 * e4m3) (exact), times
    pts in FP32.  Pure torch ops, so torch.compile traces it."""
    torch = A.torch_module()
    rows, half = codes.shape
    c = torch.stack([codes >> 4, codes & 0xF], dim=-1).reshape(rows, 2 * half).long()
    s = scales.view(torch.float8_e4m3fn).to(torch.float32)
    blocks = lut[c].reshape(rows, half // 8, 16) * s.unsqueeze(-1)
    return (blocks * pts.reshape(())).reshape(rows, 2 * half)


# --------------------------------------------------------------------------
# quantize
# --------------------------------------------------------------------------
def _variant(variant):
    return _lib.VARIANTS[_choice(variant, tuple(_lib.VARIANTS), "variant")]


def _float_input(x, what):
    """Check a BF16/F16/F32 2-D input; returns its C dtype."""
    A.check_array(x, what)
    code = A.float_dtype_code(x)
    if code is None:
        raise TypeError(f"{what} must be bfloat16, float16 or float32, not {A.dtype_name(x)}"
                        + (" (NumPy BF16 is ml_dtypes.bfloat16)" if A.kind(x) == "numpy" else ""))
    return code


def per_tensor_scale(x):
    """ComfyUI's per-tensor scale of x: FP32(amax|x| / (448 * 6)), NaN as torch.amax.

    Args:
        x: 2-D bfloat16 / float16 / float32 array or CPU tensor, C-contiguous.
    Returns:
        np.float32.
    """
    code = _float_input(x, "x")
    if A.is_cuda(x):
        raise ValueError("per_tensor_scale(): x is on a CUDA device; quantize() computes the "
                         "scale on the device")
    out = ctypes.c_float()
    check(_l().nvfp4_per_tensor_scale(ctypes.byref(out), A.ptr(x), code, int(x.shape[0]),
                                      int(x.shape[1])), "nvfp4_per_tensor_scale")
    return np.float32(out.value)


_SCALES_OK = set()  # values that passed: a model passes the same few on every call


def _check_scale(value, what):
    """The library's rule for a scale a user gives (nvfp4_check_per_tensor_scale):
    finite and > 0.  A scale already on a CUDA device is read there, unchecked
    (checking it would synchronize the host).  Returns the host value or None."""
    if A.is_torch(value) and value.is_cuda:
        return None
    v = float(np.float32(A.scalar_value(value, what)))
    if v not in _SCALES_OK:  # NaN is never in it: NaN != NaN
        check(_l().nvfp4_check_per_tensor_scale(v, what.encode()), what)
        if len(_SCALES_OK) >= 4096:
            _SCALES_OK.clear()
        _SCALES_OK.add(v)
    return v


def quantize(x, per_tensor_scale=None, variant="eager", *, strict=False):
    """Quantize a matrix to NVFP4 exactly as ComfyUI / comfy-kitchen do.

    Args:
        x: [rows, cols] bfloat16, float16 or float32: a NumPy array (BF16 as
            ml_dtypes.bfloat16) or a torch tensor, C-contiguous.  CUDA tensors
            (BF16 only) are quantized on the device (nvfp4_quantize_cuda) on
            torch.cuda.current_stream(), without synchronizing the host.  Rows
            and columns that are not multiples of 16 are zero-padded to 16
            first, as ComfyUI's TensorCoreNVFP4Layout does: qdata and
            block_scale hold that padded layout (ComfyUI's bytes), the
            result's rows are x's (cols stay padded: they are the GEMM's K).
        per_tensor_scale: None to compute ComfyUI's FP32(amax|x| / 2688)
            (on the device for CUDA tensors), else the scale to use: a number
            or a one-element float32 array / tensor, finite and > 0
            (subnormals included; nvfp4_check_per_tensor_scale); a CUDA
            tensor is read on the device, unchecked.
        variant: "eager" -- comfy-kitchen's eager quantizer (divides by the
            block scale; what ComfyUI runs on the CPU and what checkpoints are
            made with) -- or "cuda" -- comfy-kitchen's CUDA kernel (multiplies
            by the reciprocal).  See include/nvfp4.h.
        strict: raise ValueError when x holds NaN or Inf or a quantized value
            is NaN or Inf.  Without it, host inputs whose quantized values
            came out NaN or Inf (one NaN with a computed scale makes every
            value NaN; so does an all-zero x) give a NonFiniteWarning naming
            the element.  CUDA tensors are checked only with strict=True
            (that synchronizes the host).
    Returns:
        NVFP4Tensor of x's rows and roundup(cols, 16) columns: qdata uint8
        [prows, pcols/2] (hi-first, prows = roundup(rows, 16)), block_scale
        [roundup(prows,128), roundup(pcols/16,4)] (uint8 for NumPy input,
        torch.float8_e4m3fn for torch input), per_tensor_scale float32.
    """
    code = _float_input(x, "x")
    var = _variant(variant)
    rows, cols = int(x.shape[0]), int(x.shape[1])
    if per_tensor_scale is not None:
        _check_scale(per_tensor_scale, "per_tensor_scale")
    q = _quantize(x, code, rows, cols, per_tensor_scale, var)
    if A.is_cuda(x):
        if strict:
            nin = _nf.torch_array(x)
            nout = _nf.torch_array(_dequantize_torch(q)[:, :cols])
            if _nf.total(nin) or _nf.total(nout):
                _nf.tell(_nf.quantized("x", nin, nout, rows, cols, q.scale_value(),
                                       per_tensor_scale is None), True, "quantize")
        return q
    nout = _nf.host_tensor(q, rows, cols)
    if strict or _nf.total(nout):
        nin = _nf.host_array(x, code, rows, cols)
        if _nf.total(nin) or _nf.total(nout):
            _nf.tell(_nf.quantized("x", nin, nout, rows, cols, q.scale_value(),
                                   per_tensor_scale is None), strict, "quantize")
    return q


def _quantize(x, code, rows, cols, per_tensor_scale, var):
    """quantize() without its checks: comfy-kitchen's arithmetic for any scale
    (a computed one is 0 for an all-zero x, NaN for an x holding a NaN), as
    the comfy-kitchen backend (nvfp4.comfy) needs it."""
    if A.is_cuda(x):
        codes, scales, pts = _quantize_cuda(x, code, rows, cols, per_tensor_scale, var)
        return NVFP4Tensor._wrap(codes, scales, pts, rows, 2 * codes.shape[1], "torch")
    pts_arg = None
    if per_tensor_scale is not None:
        pts_arg = ctypes.byref(ctypes.c_float(A.scalar_value(per_tensor_scale,
                                                             "per_tensor_scale")))
    t = _lib.Tensor()
    check(_l().nvfp4_quantize(ctypes.byref(t), A.ptr(x), code, rows, cols, pts_arg, var, 0),
          "nvfp4_quantize")
    owner = _COwner(t)
    nscale = _l().nvfp4_scales_bytes(t.rows, t.cols, _lib.SCALES_TILED)
    qdata = A.owned_bytes(t.codes, t.rows * t.cols // 2, owner).reshape(t.rows, t.cols // 2)
    scales = A.owned_bytes(t.scales, nscale, owner).reshape(_roundup(t.rows, 128),
                                                            _roundup(t.cols // 16, 4))
    if A.is_torch(x):
        torch = A.torch_module()
        return NVFP4Tensor._wrap(torch.from_numpy(qdata),
                                 torch.from_numpy(scales).view(torch.float8_e4m3fn),
                                 torch.tensor(t.per_tensor_scale, dtype=torch.float32),
                                 rows, t.cols, "torch")
    return NVFP4Tensor._wrap(qdata, scales, np.float32(t.per_tensor_scale), rows, t.cols,
                             "numpy")


def _quantize_cuda(x, code, rows, cols, per_tensor_scale, var):
    """nvfp4_quantize_cuda on a checked 2-D CUDA tensor: (codes uint8
    [prows, pcols/2], scales float8_e4m3fn tiled, the scale used as a 0-d
    float32 tensor), all new on x's device, queued on its current stream."""
    torch = A.torch_module()
    if code != _lib.DTYPE_BF16:
        raise TypeError(f"x is {x.dtype} on {x.device}: the CUDA quantizer takes bfloat16 "
                        "(x.to(torch.bfloat16)), or quantize a CPU copy")
    dev = x.device
    index = x.get_device()
    prows, pcols = _roundup(rows, 16), _roundup(cols, 16)
    codes = torch.empty((prows, pcols // 2), dtype=torch.uint8, device=dev)
    scales = torch.empty((_roundup(prows, 128), _roundup(pcols // 16, 4)),
                         dtype=torch.float8_e4m3fn, device=dev)
    pts_out = torch.empty((), dtype=torch.float32, device=dev)
    if per_tensor_scale is None:
        pts_in = None
    elif A.is_torch(per_tensor_scale) and per_tensor_scale.dtype == torch.float32 and \
            per_tensor_scale.get_device() == index and per_tensor_scale.numel() == 1:
        pts_in = per_tensor_scale  # the common case: no conversion, read on the device
    else:
        pts_in = _device_scalar(per_tensor_scale, dev, "per_tensor_scale")
    a = _structs.cuda_quantize
    a.x = x.data_ptr()
    a.m = rows
    a.k = cols
    a.input_scale = None if pts_in is None else pts_in.data_ptr()
    a.variant = var
    a.codes = codes.data_ptr()
    a.scales = scales.data_ptr()
    a.per_tensor_scale = pts_out.data_ptr()
    a.stream = _raw_stream(index) or None
    _cuda_call("nvfp4_quantize_cuda", index, _structs.cuda_quantize_at)
    return codes, scales, pts_out


# --------------------------------------------------------------------------
# matmul
# --------------------------------------------------------------------------
def _code(value, table, what):
    """table[value] for a str value, else the _choice error."""
    c = table.get(value) if type(value) is str else None
    if c is None:
        _choice(value, tuple(table), what)
    return c


def _model(model):
    return _code(model, _lib.MODELS, "model")


def _pick_backend(backend, on_cuda, model_name):
    if type(backend) is not str or backend not in _BACKEND_SET:
        _choice(backend, _BACKENDS, "backend")
    if backend == "auto":
        backend = "cuda" if on_cuda else "cpu"
    if on_cuda and backend != "cuda":
        raise ValueError(f"backend={backend!r} runs on the host but the operands are CUDA "
                         "tensors; use backend='cuda' (or 'auto'), or move them with .to('cpu')")
    if backend == "cuda" and model_name != "sm90":
        raise ValueError(f"backend='cuda' computes model 'sm90' only (the H200's tensor cores); "
                         f"model={model_name!r} runs on backend='cpu' or 'ref'")
    return backend


def _host_outputs(kind, m, n, raw=True, out=True):
    """raw float32 and out BF16 [m, n] host buffers of the operands' kind
    (None for one not asked for)."""
    if kind == "torch":
        torch = A.torch_module()
        return (torch.empty((m, n), dtype=torch.float32) if raw else None,
                torch.empty((m, n), dtype=torch.bfloat16) if out else None)
    return (np.empty((m, n), dtype=np.float32) if raw else None,
            np.empty((m, n), dtype=A.np_bf16()) if out else None)


def _same_operands(a, b):
    """(kind, device) of two NVFP4Tensors, which must be of one kind and on one
    device (A.same_place's rule and message, without its sets)."""
    if a._kind != b._kind or (a._kind == "torch" and a._qdata.get_device() != b._qdata.get_device()):
        A.same_place([a.qdata, b.qdata], ["a", "b"])  # raises, naming both
    return a._kind, A.device_of(a._qdata)


def _host_bias(bias, n):
    """(the bias array C reads, its address) for the host backends: a float32
    C-contiguous NumPy array of n values as is, anything else through
    A.host_bias's checks and conversion."""
    if bias is None:
        return None, None
    if type(bias) is np.ndarray and bias.dtype == np.float32 and bias.ndim == 1 and \
            bias.shape[0] == n and bias.flags.c_contiguous and bias.flags.aligned:
        return bias, A.ptr(bias)
    b = A.host_bias(bias, n)
    return b, A.ptr(b)


def _device_bias(bias, n, dev):
    """(the bias tensor the kernel reads, its address): a float32 contiguous
    [n] tensor on x's device as is, anything else through A.device_bias."""
    if bias is None:
        return None, None
    torch = A.torch_module()
    if A.is_torch(bias) and bias.dtype == torch.float32 and bias.dim() == 1 and \
            bias.shape[0] == n and bias.get_device() == dev.index and bias.is_contiguous():
        return bias, bias.data_ptr()
    b = A.device_bias(bias, n, dev)
    return b, b.data_ptr()


def _causes(parts):
    """'; '-joined descriptions of the inputs holding NaN or Inf: parts is a
    list of (label, Nonfinite or None)."""
    return "; ".join(f"{label} has {_nf.held(nf)}" for label, nf in parts
                     if nf is not None and _nf.total(nf))


def _host_bias_counts(bias_h, n):
    if bias_h is None:
        return None
    return _nf.host_array(bias_h, _lib.DTYPE_F32, 1, n)


def _gemm_outputs(fn, out, m, n, strict, causes, depth):
    """Tell (or with strict refuse) NaN / Inf among the m x n outputs, with
    their causes (a callable returning [(label, Nonfinite)], called only then);
    depth: the frames between the user's call and this one."""
    nout = _nf.torch_array(out) if A.is_cuda(out) else _nf.host_array(out, _lib.DTYPE_BF16, m, n)
    if not _nf.total(nout):
        return
    why = _causes(causes())
    _nf.tell(_nf.outputs(nout, m, n) + (f": {why}" if why else ""), strict, fn, depth + 1)


def matmul(a, b, model="sm90", k_slices=1, bias=None, backend="auto", *, threads=0,
           strict=False):
    """raw = A x B^T as the chosen tensor-core model adds, and its BF16 epilogue.

    The GEMM contract of docs/CONTRACT.md: a'(m,k) = e2m1 * |e4m3| exactly,
    accumulator from zero, one model step per 16-element block in increasing
    k (per K slice), raw = that FP32 accumulator, out = BF16(FP32(alpha * raw)
    [+ bias]) with alpha = FP32(A.per_tensor_scale * B.per_tensor_scale).

    Args:
        a: NVFP4Tensor [M, K], the activations.
        b: NVFP4Tensor [N, K], the weights (a Linear's [out, in]).
        model: "sm90" (Hopper, measured on the H200), "exact" (correctly
            rounded sum) or "sm120" (RTX Blackwell / GB10, as published).
        k_slices: K slices S >= 1 (split-K under the contract's slice rule,
            nvfp4_k_slice_elems); 1 = one chain.
        bias: optional N values (float32, or bfloat16 / float16 widened
            exactly), same kind and device as the operands.
        backend: "auto" (CUDA tensors -> the H200 kernel, host data -> the
            CPU backend), "cpu" (nvfp4_gemm_cpu), "ref" (nvfp4_gemm_ref, the
            plain oracle, slow) or "cuda" (the H200 kernel; host data is
            copied to the GPU and back, synchronously).  "cuda" computes
            model "sm90" only.  CUDA tensors run on
            torch.cuda.current_stream() without synchronizing the host.
        threads: CPU threads (0 = all cores).
        strict: raise ValueError when an operand, the bias or an output holds
            NaN or Inf.  Without it, host outputs that are NaN or Inf give a
            NonFiniteWarning naming the operands' non-finite values; CUDA
            tensors are checked only with strict=True (it synchronizes).
    Returns:
        (raw, out): float32 [M, N] and bfloat16 [M, N], NumPy arrays (BF16
        as ml_dtypes.bfloat16) or torch tensors on the operands' device.
    """
    if not isinstance(a, NVFP4Tensor) or not isinstance(b, NVFP4Tensor):
        raise TypeError("matmul: a and b must be NVFP4Tensor (nvfp4.quantize(x) or "
                        f"nvfp4.NVFP4Tensor(qdata, block_scale, scale)); got "
                        f"{type(a).__name__} and {type(b).__name__}")
    kind, dev = _same_operands(a, b)
    if a._cols != b._cols:
        raise ValueError(f"matmul: K differs: a is {a.rows} x {a.cols}, b is {b.rows} x {b.cols} "
                         "(b is [N, K], like a Linear's weight)")
    model_code = _model(model)
    slices = _int_arg(k_slices, "k_slices", 1, _lib.MAX_K_SLICES)
    nthreads = _int_arg(threads, "threads", 0, 1 << 16)
    on_cuda = a._on_cuda
    backend = _pick_backend(backend, on_cuda, model)
    m, n = a._rows, b._rows
    if on_cuda:
        if strict:
            parts = [("a", _nf.torch_array(_dequantize_torch(a))),
                     ("b", _nf.torch_array(_dequantize_torch(b)))]
            if any(_nf.total(nf) for _, nf in parts):
                _nf.tell(_causes(parts), True, "matmul")
        raw, out = _matmul_cuda(a, b, bias, slices, dev)
        if strict:
            _gemm_outputs("matmul", out, m, n, True, lambda: [], 1)
        return raw, out
    bias_h, bias_p = _host_bias(bias, n)
    causes = lambda: [("a", _nf.host_tensor(a)), ("b", _nf.host_tensor(b)),
                      ("the bias", _host_bias_counts(bias_h, n))]
    if strict:
        why = _causes(causes())
        if why:
            _nf.tell(why, True, "matmul")
    raw, out = _host_outputs(kind, m, n)
    if backend == "cpu":
        _gemm_cpu(a._host_view()[1], b._host_view()[1], bias_p, A.ptr(raw), A.ptr(out),
                  model_code, nthreads, slices)
    else:
        args = _lib.GemmArgs(a._host_view()[1], b._host_view()[1], bias_p, A.ptr(raw),
                             A.ptr(out), model_code, nthreads, slices)
        if backend == "cuda":
            check(_l().nvfp4_gemm_cuda_host(ctypes.byref(args)), "nvfp4_gemm_cuda_host")
        else:
            check(_l().nvfp4_gemm_ref(ctypes.byref(args)), "nvfp4_gemm_ref")
    _gemm_outputs("matmul", out, m, n, strict, causes, 1)
    return raw, out


def _gemm_cpu(pa, pb, bias_p, raw_p, out_p, model_code, nthreads, slices):
    """nvfp4_gemm_cpu through this thread's struct; pa, pb: nvfp4_tensor pointers."""
    g = _structs.gemm
    g.a = pa
    g.b = pb
    g.bias = bias_p
    g.raw = raw_p
    g.out = out_p
    g.model = model_code
    g.nthreads = nthreads
    g.k_slices = slices
    status = _lib.fast("nvfp4_gemm_cpu")(_structs.gemm_at)
    if status:
        check(status, "nvfp4_gemm_cpu")


def _kernel_rows(w):
    """The N the kernels run a weight with: they need a multiple of 16, which
    a weight whose qdata holds ComfyUI's padding rows has; the padding rows'
    outputs are computed and dropped (_kernel_outputs)."""
    n = w._rows
    if n % 16 and int(w._qdata.shape[0]) >= _roundup(n, 16):
        return _roundup(n, 16)
    return n


def _padded_bias(bias_d, n, np_):
    """A device bias of n values as np_ (zeros after them), or as it is."""
    if bias_d is None or np_ == n:
        return bias_d
    return A.torch_module().nn.functional.pad(bias_d, (0, np_ - n))


def _kernel_outputs(t, n):
    """The first n columns of a kernel output computed with padded N, as a
    contiguous tensor (a copy queued on the current stream)."""
    if t is None or t.shape[1] == n:
        return t
    aten = A.torch_module().ops.aten
    return aten.clone.default(aten.slice.Tensor(t, 1, 0, n),
                              memory_format=A.torch_module().contiguous_format)


def _matmul_cuda(a, b, bias, slices, dev):
    torch = A.torch_module()
    m, n, k = a._rows, b._rows, a._cols
    np_ = _kernel_rows(b)
    bias_d, _ = _device_bias(bias, n, dev)
    bias_d = _padded_bias(bias_d, n, np_)
    raw = torch.empty((m, np_), dtype=torch.float32, device=dev)
    out = torch.empty((m, np_), dtype=torch.bfloat16, device=dev)
    oa, ob = a._cuda_view()[0], b._cuda_view()[0]
    _gemm_cuda(dev, (oa.codes, oa.scales, oa.per_tensor_scale), m,
               (ob.codes, ob.scales, ob.per_tensor_scale), np_, k,
               None if bias_d is None else bias_d.data_ptr(), raw, out, slices)
    return _kernel_outputs(raw, n), _kernel_outputs(out, n)


def _gemm_cuda(dev, pa, m, pb, n, k, bias_p, raw, out, slices):
    """nvfp4_gemm_cuda on the current stream of `dev` through this thread's
    struct.  pa, pb: (codes, scales, per_tensor_scale) device addresses of the
    M x K and N x K operands, checked by the caller; raw / out: the output
    tensors (either may be None).  The workspace is a torch tensor: freed
    when this returns, it stays reserved to the stream's queued kernels by
    the caching allocator."""
    torch = A.torch_module()
    index = dev.index
    need = max(_ws_bytes(_WS_GEMM, "nvfp4_cuda_gemm_workspace", m, n, k), 256)
    ws = torch.empty((need,), dtype=torch.uint8, device=dev)
    g = _structs.cuda_gemm
    ga, gb = g.a, g.b
    ga.codes, ga.scales, ga.per_tensor_scale = pa
    ga.rows = m
    ga.cols = k
    gb.codes, gb.scales, gb.per_tensor_scale = pb
    gb.rows = n
    gb.cols = k
    g.bias = bias_p
    g.raw = None if raw is None else raw.data_ptr()
    g.out = None if out is None else out.data_ptr()
    g.stream = _raw_stream(index) or None
    g.workspace = ws.data_ptr()
    g.workspace_bytes = need
    g.k_slices = slices
    _cuda_call("nvfp4_gemm_cuda", index, _structs.cuda_gemm_at)


# --------------------------------------------------------------------------
# layers: Layer, linear (load_layer: formats.py)
# --------------------------------------------------------------------------
class Layer:
    """A ComfyUI NVFP4 linear layer.

    Attributes:
        weight: NVFP4Tensor [N, K] (LAYER.weight, _scale, _scale_2).
        input_scale: the static activation scale (LAYER.input_scale) as a
            float, or None when the checkpoint has none.
        bias: float32 [N] (LAYER.bias widened exactly; zero-extended to N
            when ComfyUI padded the weight's rows), or None.
        name: the layer prefix.
    """

    def __init__(self, weight, input_scale=None, bias=None, name=""):
        self.weight = weight
        self.input_scale = input_scale
        self.bias = bias
        self.name = name

    # The attributes are properties so that assigning one drops what linear()
    # cached from it: the bias as C reads it, the static scale on the device.
    @property
    def weight(self):
        return self._weight

    @weight.setter
    def weight(self, weight):
        if not isinstance(weight, NVFP4Tensor):
            raise TypeError(f"Layer: weight must be an NVFP4Tensor, not {type(weight).__name__}")
        self._weight = weight
        self._bias_cache = None

    @property
    def input_scale(self):
        return self._input_scale

    @input_scale.setter
    def input_scale(self, value):
        self._input_scale = None if value is None else \
            float(np.float32(A.scalar_value(value, "input_scale")))
        self._scale_checked = False  # checked when linear() first uses it as the static scale
        self._scale_cache = None

    @property
    def bias(self):
        return self._bias

    @bias.setter
    def bias(self, bias):
        self._bias = bias
        self._bias_cache = None

    def __repr__(self):
        return (f"Layer({self.name!r}, weight {self.weight.rows} x {self.weight.cols}, "
                f"input_scale={self.input_scale!r}, bias={'yes' if self.bias is not None else 'no'})")

    def _bias_for(self, n, dev, stream):
        """(what C reads, its address) for this layer's bias: float32 [n] on the
        weight's device (dev None: the host).  Kept from the last call while
        the bias is the same object: used in place it is always current; a
        converted copy is reused only while the bias's version counter and the
        stream are unchanged (a NumPy array, or a tensor without a version
        counter, is converted again on every call)."""
        b = self._bias
        if b is None:
            return None, None
        c = self._bias_cache
        if c is not None and c[0] is b:
            if c[2] is b:  # read in place
                return b, (b.data_ptr() if A.is_torch(b) else c[4])
            if c[1] is not None and c[3] == stream and c[1] == _version(b) and \
                    (dev is None or not _capturing()):
                return c[2], c[4]
        keep, address = _host_bias(b, n) if dev is None else _device_bias(b, n, dev)
        if dev is not None and keep is not b and _capturing():
            return keep, address  # a copy inside a graph capture: not kept (see _capturing)
        version = _version(b) if A.is_torch(b) else None
        self._bias_cache = (b, version, keep, stream, address)
        return keep, address

    def _scale_on(self, dev, stream):
        """The static input scale as a float32 tensor on `dev`, filled once per
        device and stream (torch.full queues the fill on that stream, so the
        kernels that read it later on the same stream find it written)."""
        torch = A.torch_module()
        if _capturing():  # see _capturing: made in the graph, not kept
            return torch.full((1,), self._input_scale, dtype=torch.float32, device=dev)
        c = self._scale_cache
        key = (self._input_scale, dev.index, stream)
        if c is not None and c[0] == key:
            return c[1]
        t = torch.full((1,), self._input_scale, dtype=torch.float32, device=dev)
        self._scale_cache = (key, t)
        return t


def linear(x, layer, input_scale=None, variant="eager", backend="auto", *, model="sm90",
           k_slices=1, bias="layer", threads=0, return_raw=False, strict=False):
    """ComfyUI's NVFP4 linear: quantize x to NVFP4, then the GEMM contract.

    Args:
        x: activations [..., K] (leading dims are flattened), bfloat16 /
            float16 / float32, C-contiguous; CUDA tensors must be bfloat16 and
            run fused on the H200 (nvfp4_linear_cuda: the quantizer inside the
            GEMM's A producer) on torch.cuda.current_stream().
        layer: a Layer (load_layer) or an NVFP4Tensor weight [N, K'] with
            K' = roundup(K, 16).
        input_scale: "static" (the layer's input_scale), "dynamic"
            (FP32(amax|x| / 2688) computed from x), a number, or None (the
            default: static when the layer has one, else dynamic -- what
            ComfyUI and `nvfp4 linear` do).  A static scale, the layer's or
            a number, is finite and > 0 (nvfp4_check_per_tensor_scale); a
            CUDA tensor is read on the device, unchecked.
        variant: the quantizer variant for x, "eager" or "cuda" (see quantize).
        backend: "auto", "cpu", "ref" (quantize, then nvfp4_gemm_ref) or
            "cuda" (host data: copied to the GPU and back).
        model: accumulation model (see matmul); "cuda" runs "sm90" only.
        k_slices: K slices (see matmul).
        bias: "layer" (the layer's bias, if any), None, or N values.
        threads: CPU threads (0 = all cores).
        return_raw: also return the FP32 accumulators.
        strict: raise ValueError when x, the weight, the bias or an output
            holds NaN or Inf.  Without it, host outputs that are NaN or Inf
            give a NonFiniteWarning naming where the NaN came from (with the
            dynamic scale one NaN in x makes every output NaN); CUDA tensors
            are checked only with strict=True (it synchronizes).
    Returns:
        out bfloat16 [..., N]; (raw, out) when return_raw.
    """
    if not isinstance(layer, Layer):
        if not isinstance(layer, NVFP4Tensor):
            raise TypeError(f"linear: layer must be an nvfp4.Layer or NVFP4Tensor, not "
                            f"{type(layer).__name__}")
        layer = Layer(layer)
    w = layer._weight
    kind = A.kind(x)
    if kind is None:
        raise TypeError(f"x must be a NumPy array or a torch tensor, not {type(x).__name__}")
    ndim = x.ndim
    if ndim < 2:
        raise ValueError(f"x must be [M, K] (or [..., K]); got shape {tuple(x.shape)}")
    if not A.contiguous(x):
        raise ValueError("x must be C-contiguous (row-major); call .contiguous() / "
                         "numpy.ascontiguousarray() first")
    if ndim == 2:
        lead, x2 = None, x
    else:
        lead = tuple(int(d) for d in x.shape[:-1])
        x2 = x.reshape(-1, x.shape[-1])
    on_cuda = False
    if kind == "torch":
        _refuse_autograd(x, bias if A.is_torch(bias) else layer._bias)
        code = A.TORCH_FLOAT_CODES.get(x2.dtype)
        on_cuda = x2.is_cuda
        if code is None or not (on_cuda or x2.is_cpu) or x2.numel() == 0:
            code = _float_input(x2, "x")  # raises the precise error
    else:
        code = _float_input(x2, "x")
    m, k = int(x2.shape[0]), int(x2.shape[1])
    if _roundup(k, 16) != w._cols:
        raise ValueError(f"x has K = {k} columns ({_roundup(k, 16)} padded to 16) but the "
                         f"weight is {w.rows} x {w.cols}")
    if w._kind != kind or (kind == "torch" and x2.get_device() != w._qdata.get_device()):
        A.same_place([x2, w.qdata], ["x", "weight"])  # raises, naming both
    var = _code(variant, _lib.VARIANTS, "variant")
    model_code = _model(model)
    slices = _int_arg(k_slices, "k_slices", 1, _lib.MAX_K_SLICES)
    nthreads = _int_arg(threads, "threads", 0, 1 << 16)
    if input_scale is None:
        input_scale = "static" if layer._input_scale is not None else "dynamic"
    if isinstance(input_scale, str):
        _choice(input_scale, ("static", "dynamic"), "input_scale")
        if input_scale == "static":
            if layer._input_scale is None:
                raise ValueError(f"layer {layer.name!r} has no input_scale; use "
                                 "input_scale='dynamic' or give a number")
            if not layer._scale_checked:  # once per value: not on every call
                _check_scale(layer._input_scale, f"layer {layer.name!r} input_scale")
                layer._scale_checked = True
            scale = layer  # the layer's own: its cached device copy on CUDA
        else:
            scale = None
    elif on_cuda and A.is_torch(input_scale) and input_scale.is_cuda and \
            input_scale.get_device() == x2.get_device():
        scale = input_scale  # stays on the device: no read-back
    else:
        scale = _check_scale(input_scale, "input_scale")
    bias_from_layer = isinstance(bias, str) and bias == "layer"
    backend = _pick_backend(backend, on_cuda, model)
    if on_cuda:
        if strict:
            nx = _nf.torch_array(x2)
            if _nf.total(nx):
                _nf.tell(f"x has {_nf.held(nx)}", True, "linear")
        raw, out = _linear_cuda(x2, code, m, k, layer, scale, var, bias_from_layer, bias, slices,
                                return_raw)
        if strict:
            _gemm_outputs("linear", out, m, w._rows, True, lambda: [], 1)
    else:
        raw, out = _linear_host(x2, kind, code, m, k, layer, scale, var, bias_from_layer, bias,
                                model_code, slices, nthreads, backend, return_raw, strict)
    if lead is not None:
        shape = lead + (w._rows,)
        out = out.reshape(shape)
        if return_raw:
            raw = raw.reshape(shape)
    return (raw, out) if return_raw else out


def _linear_causes(x, code, m, k, w, scale, bias_h, n):
    """[(label, Nonfinite)] of a host linear's inputs, and the dynamic scale."""
    nx = _nf.host_array(x, code, m, k)
    label = "x"
    if scale is None and _nf.total(nx):
        s = float(per_tensor_scale(x))
        label = f"x (the dynamic input scale amax/2688 is {'NaN' if np.isnan(s) else repr(s)})"
    return [(label, nx), ("the weight", _nf.host_tensor(w)),
            ("the bias", _host_bias_counts(bias_h, n))]


def _refuse_autograd(x, bias):
    """linear() has no backward: raise where autograd would record it rather
    than return an output that silently dropped the graph."""
    if (x.requires_grad or (A.is_torch(bias) and bias.requires_grad)) and \
            A.torch_module().is_grad_enabled():
        what = "x" if x.requires_grad else "the bias"
        raise RuntimeError(f"linear: {what} requires grad, but nvfp4's linear has no backward "
                           "(its output would not be connected to the graph); run it under "
                           "torch.no_grad() or torch.inference_mode(), or detach() the tensor")


def _linear_host(x, kind, code, m, k, layer, scale, var, bias_from_layer, bias, model_code,
                 slices, nthreads, backend, want_raw, strict):
    w = layer._weight
    n = w._rows
    if bias_from_layer:
        bias_h, bias_p = layer._bias_for(n, None, None)
    else:
        bias_h, bias_p = _host_bias(bias, n)
    if scale is layer:
        scale = layer._input_scale
    causes = lambda: _linear_causes(x, code, m, k, w, scale, bias_h, n)
    if strict:
        why = _causes(causes())
        if why:
            _nf.tell(why, True, "linear")
    raw, out = _linear_host_run(x, kind, code, m, k, w, n, scale, var, bias_p, model_code,
                                slices, nthreads, backend, want_raw)
    _gemm_outputs("linear", out, m, n, strict, causes, 2)
    return raw, out


def _linear_host_run(x, kind, code, m, k, w, n, scale, var, bias_p, model_code, slices,
                     nthreads, backend, want_raw):
    raw, out = _host_outputs(kind, m, n, raw=want_raw)
    tw, tw_p = w._host_view()
    if backend == "cpu":
        st = _structs
        if scale is not None:
            st.scale.value = scale
        a = st.linear
        a.x = A.ptr(x)
        a.x_dtype = code
        a.m = m
        a.k = k
        a.weight = tw_p
        a.input_scale = None if scale is None else st.scale_at
        a.variant = var
        a.bias = bias_p
        a.raw = A.ptr(raw)
        a.out = A.ptr(out)
        a.model = model_code
        a.nthreads = nthreads
        a.x_quantized = None
        a.k_slices = slices
        status = _lib.fast("nvfp4_linear_cpu")(st.linear_at)
        if status:
            check(status, "nvfp4_linear_cpu")
        return raw, out
    scale_c = None if scale is None else ctypes.c_float(scale)
    if backend == "cuda" and code == _lib.DTYPE_BF16:
        args = _lib.LinearArgs(A.ptr(x), code, m, k, tw_p,
                               None if scale_c is None else ctypes.addressof(scale_c), var,
                               bias_p, A.ptr(raw), A.ptr(out), model_code, nthreads, None,
                               slices)
        check(_l().nvfp4_linear_cuda_host(ctypes.byref(args)), "nvfp4_linear_cuda_host")
        return raw, out
    # ref, or cuda with F16/F32 activations: quantize on the CPU, then the GEMM
    q = _lib.Tensor()
    check(_l().nvfp4_quantize(ctypes.byref(q), A.ptr(x), code, m, k,
                              None if scale_c is None else ctypes.byref(scale_c), var, nthreads),
          "nvfp4_quantize")
    owner = _COwner(q)
    view = _lib.Tensor(m, q.cols, q.codes, q.scales, q.per_tensor_scale, q.nibble_order,
                       q.scale_layout)  # the m real rows; the quantizer's padding rows are zero
    args = _lib.GemmArgs(ctypes.pointer(view), tw_p, bias_p, A.ptr(raw),
                         A.ptr(out), model_code, nthreads, slices)
    if backend == "ref":
        check(_l().nvfp4_gemm_ref(ctypes.byref(args)), "nvfp4_gemm_ref")
    else:
        check(_l().nvfp4_gemm_cuda_host(ctypes.byref(args)), "nvfp4_gemm_cuda_host")
    del owner, tw
    return raw, out


def _linear_cuda(x, code, m, k, layer, scale, var, bias_from_layer, bias, slices, want_raw):
    torch = A.torch_module()
    if code != _lib.DTYPE_BF16:
        raise TypeError(f"x is {x.dtype} on {x.device}: the CUDA linear takes bfloat16 "
                        "activations (x.to(torch.bfloat16))")
    w = layer._weight
    dev = x.device
    index = dev.index
    stream = _raw_stream(index)
    n = w._rows
    np_ = _kernel_rows(w)
    if bias_from_layer:
        bias_d, bias_p = layer._bias_for(n, dev, stream)
    else:
        bias_d, bias_p = _device_bias(bias, n, dev)
    if np_ != n and bias_d is not None:
        bias_d = _padded_bias(bias_d, n, np_)
        bias_p = bias_d.data_ptr()
    if scale is None:
        scale_d = None
    elif scale is layer:
        scale_d = layer._scale_on(dev, stream)
    else:
        scale_d = _device_scalar(scale, dev, "input_scale")
    need = _ws_bytes(_WS_LINEAR, "nvfp4_linear_cuda_workspace", m, np_, k)
    if need == 0:
        raise ValueError(f"linear: shape M={m} N={n} K={k} is out of the CUDA kernel's range")
    out = torch.empty((m, np_), dtype=torch.bfloat16, device=dev)
    raw = torch.empty((m, np_), dtype=torch.float32, device=dev) if want_raw else None
    ws = torch.empty((need,), dtype=torch.uint8, device=dev)
    op, op_p = w._cuda_view()
    if np_ != n:  # the padding rows too (the view keeps w's own rows)
        op = _lib.CudaOperand(op.codes, op.scales, op.per_tensor_scale, np_, op.cols)
        op_p = ctypes.pointer(op)
    a = _structs.cuda_linear
    a.x = x.data_ptr()
    a.m = m
    a.k = k
    a.weight = op_p
    a.input_scale = None if scale_d is None else scale_d.data_ptr()
    a.variant = var
    a.bias = bias_p
    a.raw = None if raw is None else raw.data_ptr()
    a.out = out.data_ptr()
    a.x_codes = None
    a.x_scales = None
    a.x_scale = None
    a.stream = stream or None
    a.workspace = ws.data_ptr()
    a.workspace_bytes = need
    a.k_slices = slices
    _cuda_call("nvfp4_linear_cuda", index, _structs.cuda_linear_at)
    del bias_d, ws, op  # queued on the current stream: the caching allocator keeps them safe
    return _kernel_outputs(raw, n), _kernel_outputs(out, n)


# --------------------------------------------------------------------------
# explain
# --------------------------------------------------------------------------
def _host_copy(x):
    """Analysis runs on the host: CUDA tensors are copied back (synchronizes)."""
    return x.detach().cpu() if A.is_cuda(x) else x


def explain(a, b, ref, *, alpha=None, bias=None, threads=0, max_k_slices=0, progress=None):
    """Which accumulation order and model explain a kernel's outputs?

    Runs the library's explain engine (nvfp4_explain) over a third-party
    GEMM's results and returns its JSON report as a dict (the same document
    as the CLI's).

    Args:
        a, b: the operands: NVFP4Tensor [M, K] and [N, K], or the exact
            16-bit operand values the kernel multiplied (float16 or bfloat16
            arrays / tensors, [M, K] and [N, K], K a multiple of 16).
        ref: the kernel's results, [M, N]: float32 accumulators (compared
            with raw), or bfloat16 outputs (compared after the epilogue with
            alpha and bias).
        alpha: the epilogue's scale for bfloat16 ref; default for NVFP4
            operands: FP32(a.per_tensor_scale * b.per_tensor_scale); required
            for 16-bit operands.
        bias: optional N float values of the epilogue (bfloat16 ref only).
        threads: CPU threads (0 = all cores).
        max_k_slices: the largest K-slice count tried (0 = the library's 32).
        progress: optional callable(fraction) called as the search advances.
    Returns:
        dict, the parsed JSON report.
    CUDA tensors are copied to the host first (the analysis runs there).
    """
    nthreads = _int_arg(threads, "threads", 0, 1 << 16)
    max_slices = _int_arg(max_k_slices, "max_k_slices", 0, _lib.MAX_K_SLICES)
    args = _lib.ExplainArgs()
    keep = []
    if isinstance(a, NVFP4Tensor) and isinstance(b, NVFP4Tensor):
        if a.cols != b.cols:
            raise ValueError(f"explain: K differs: a is {a.rows} x {a.cols}, b is {b.rows} x {b.cols}")
        if a.is_cuda:
            a = NVFP4Tensor(_host_copy(a.qdata), _host_copy(a.block_scale), a.scale_value(),
                            rows=a.rows)
        if b.is_cuda:
            b = NVFP4Tensor(_host_copy(b.qdata), _host_copy(b.block_scale), b.scale_value(),
                            rows=b.rows)
        ta, tb = a._host(), b._host()
        keep += [ta, tb]
        args.a, args.b = ctypes.pointer(ta), ctypes.pointer(tb)
        m, n, k = a.rows, b.rows, a.cols
        default_alpha = _l().nvfp4_gemm_alpha(a.scale_value(), b.scale_value())
    elif isinstance(a, NVFP4Tensor) or isinstance(b, NVFP4Tensor):
        raise TypeError("explain: a and b must both be NVFP4Tensor or both 16-bit arrays")
    else:
        a, b = _host_copy(a), _host_copy(b)
        codes = []
        for x, what in ((a, "a"), (b, "b")):
            A.check_array(x, what)
            c = A.float_dtype_code(x)
            if c not in (_lib.DTYPE_BF16, _lib.DTYPE_F16):
                raise TypeError(f"explain: {what} must be float16 or bfloat16 (the exact 16-bit "
                                f"operands), or an NVFP4Tensor; got {A.dtype_name(x)}")
            codes.append(c)
        if codes[0] != codes[1]:
            raise TypeError(f"explain: a is {a.dtype} but b is {b.dtype}; both must be one type")
        if a.shape[1] != b.shape[1]:
            raise ValueError(f"explain: K differs: a is {list(a.shape)}, b is {list(b.shape)}")
        m, k, n = int(a.shape[0]), int(a.shape[1]), int(b.shape[0])
        if k % 16:
            raise ValueError(f"explain: K = {k} is not a multiple of 16 (one tensor-core step "
                             "per 16 elements)")
        args.a16, args.b16 = A.ptr(a), A.ptr(b)
        args.type16 = _lib.OPERAND_BF16 if codes[0] == _lib.DTYPE_BF16 else _lib.OPERAND_F16
        keep += [a, b]
        default_alpha = None
    args.m, args.n, args.k = m, n, k
    ref = _host_copy(ref)
    A.check_array(ref, "ref")
    if tuple(int(d) for d in ref.shape) != (m, n):
        raise ValueError(f"explain: ref is {list(ref.shape)}; the product is [{m}, {n}]")
    rcode = A.float_dtype_code(ref)
    if rcode == _lib.DTYPE_F32:
        if bias is not None:
            raise ValueError("explain: bias applies to bfloat16 outputs; float32 ref are raw "
                             "accumulators")
        args.ref = A.ptr(ref)
    elif rcode == _lib.DTYPE_BF16:
        if alpha is None and default_alpha is None:
            raise ValueError("explain: bfloat16 ref with 16-bit operands needs alpha (the "
                             "epilogue's scale)")
        args.ref_bf16 = A.ptr(ref)
        args.alpha = float(default_alpha if alpha is None else A.scalar_value(alpha, "alpha"))
        if bias is not None:
            bias_h = A.host_bias(_host_copy(bias), n)
            keep.append(bias_h)
            args.bias = A.ptr(bias_h)
    else:
        raise TypeError(f"explain: ref must be float32 (raw) or bfloat16 (outputs), not "
                        f"{A.dtype_name(ref)}")
    keep.append(ref)
    args.nthreads, args.max_k_slices = nthreads, max_slices
    if progress is not None:
        if not callable(progress):
            raise TypeError("explain: progress must be callable(fraction)")

        def _cb(_ctx, fraction):
            try:
                progress(float(fraction))
            except Exception:  # noqa: BLE001 -- never unwind through C
                pass
        cb = _lib.PROGRESS_FN(_cb)
        keep.append(cb)
        args.progress = cb
    out = ctypes.c_void_p()
    check(_l().nvfp4_explain(ctypes.byref(args), ctypes.byref(out)), "nvfp4_explain")
    try:
        text = ctypes.string_at(out.value).decode("utf-8")
    finally:
        _l().nvfp4_free(out)
    del keep
    return json.loads(text)
