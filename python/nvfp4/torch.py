"""NVFP4 linear layers that drop into PyTorch models.

    import torch, nvfp4.torch as nt
    nt.quantize_model(model, exclude="lm_head")     # nn.Linear -> NVFP4Linear, in place
    nt.load_quantized(model, "model-nvfp4")         # or: a checkpoint's NVFP4 layers
    with torch.inference_mode():
        logits = model(ids)                         # eager, torch.compile, CUDA graphs

NVFP4Linear holds a layer in the kernel's layout, ComfyUI's -- E2M1 codes,
E4M3 block scales in the 128x4 tiled layout, an FP32 per-tensor scale, an
optional static input scale and bias -- and runs ComfyUI's NVFP4 linear
(activations quantized, then the GEMM contract of docs/CONTRACT.md) through
libnvfp4: nvfp4_linear_cuda on the current CUDA stream, nvfp4_linear_cpu on
the CPU; both give the same bits.  Checkpoints of every format the library
reads (ComfyUI, ModelOpt, compressed-tensors, GGUF) load through its reader,
and a layer's state_dict() is in the format it came from (CheckpointFormat).

Eager calls go straight to the library (argument structs built once per
module, a workspace per device and stream); everything else -- torch.compile,
FakeTensor tracing, torch function and dispatch modes, tensor subclasses --
goes through the custom op torch.ops.nvfp4.linear, which has a fake (meta)
implementation, so `torch.compile(fullgraph=True)` traces it without graph
breaks.  Neither has a backward: where autograd would record the call they
raise instead of returning an output cut off from the graph.

docs/PYTHON.md ("PyTorch") describes it all.
"""
import collections
import ctypes
import fnmatch
import math
import os
import threading
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from . import _api
from . import _arrays as A
from . import _lib
from . import formats as _formats
from .errors import check

__all__ = ["NVFP4Linear", "quantize_model", "load_quantized", "CheckpointFormat",
           "ComfyUIFormat", "ModelOptFormat", "CompressedTensorsFormat", "register_format",
           "release_workspaces"]

A.torch_module()  # the array helpers learn torch's dtypes
_BF16 = torch.bfloat16
_E4M3 = torch.float8_e4m3fn
_VARIANTS = _lib.VARIANTS
_MODES = ("w4a4", "w4a16")
_SM90 = _lib.MODELS["sm90"]


_roundup = _api._roundup


def _scale_shape(rows, cols):
    """The tiled block-scale array's shape for rows x cols elements."""
    return (_roundup(rows, 128), _roundup(cols // 16, 4))


def _autograd_error(what):
    return RuntimeError(
        f"NVFP4Linear: {what} requires grad, but NVFP4 linear layers have no backward (the "
        "output would not be connected to the graph); run the model under torch.no_grad() or "
        "torch.inference_mode(), or use mode='w4a16' (dequantized weights, F.linear) to train "
        "through it")


# --------------------------------------------------------------------------
# device scratch: one workspace per device and stream
# --------------------------------------------------------------------------
# The kernels on one stream run in order, so every layer can share that
# stream's workspace; it grows to the largest call seen.
_WORKSPACES = {}


def _workspace(device, index, stream, need):
    """A uint8 device tensor of at least `need` bytes for a call on `stream`.
    During a CUDA graph capture a fresh one is made in the graph's memory and
    not kept (a graph keeps the addresses it was captured with; the shared one
    may grow and move later)."""
    if _api._capturing():
        return torch.empty((need,), dtype=torch.uint8, device=device)
    key = (index, stream)
    ws = _WORKSPACES.get(key)
    if ws is None or ws.numel() < need:
        ws = torch.empty((need,), dtype=torch.uint8, device=device)
        _WORKSPACES[key] = ws
    return ws


def release_workspaces():
    """Drop the cached per-stream workspaces (the caching allocator reuses their
    memory once queued kernels are done); later calls make new ones."""
    _WORKSPACES.clear()


# --------------------------------------------------------------------------
# plans: a layer's C arguments, built once
# --------------------------------------------------------------------------
def _check_layer_tensors(device, weight, weight_scale, weight_scale_2, input_scale, bias, k):
    """Validate a layer's kernel tensors for activations of k columns on
    `device`; returns (codes, scales, per_tensor_scale) addresses, rows, cols."""
    def where(t, what):
        if t.device != device:
            raise ValueError(f"NVFP4Linear: {what} is on {t.device} but x is on {device}; move "
                             "the module or the input (module.to(x.device))")
        if not t.is_contiguous():
            raise ValueError(f"NVFP4Linear: {what} must be contiguous")

    if weight.dtype != torch.uint8 or weight.dim() != 2 or weight.shape[1] % 8:
        raise TypeError(f"NVFP4Linear: weight must be uint8 [rows, cols/2] E2M1 codes with cols "
                        f"a multiple of 16, not {weight.dtype} {list(weight.shape)}")
    rows, cols = int(weight.shape[0]), 2 * int(weight.shape[1])
    where(weight, "weight")
    if weight_scale.dtype not in (torch.uint8, _E4M3) or \
            tuple(weight_scale.shape) != _scale_shape(rows, cols):
        raise TypeError(f"NVFP4Linear: weight_scale must be float8_e4m3fn (or uint8) "
                        f"{list(_scale_shape(rows, cols))} (128x4 tiled) for a {rows} x {cols} "
                        f"weight, not {weight_scale.dtype} {list(weight_scale.shape)}")
    where(weight_scale, "weight_scale")
    for t, what in ((weight_scale_2, "weight_scale_2"), (input_scale, "input_scale")):
        if t is not None:
            if t.dtype != torch.float32 or t.numel() != 1:
                raise TypeError(f"NVFP4Linear: {what} must be one float32 value, not "
                                f"{t.dtype} {list(t.shape)}")
            where(t, what)
    if bias is not None:
        if bias.dtype != torch.float32 or tuple(bias.shape) != (rows,):
            raise TypeError(f"NVFP4Linear: the kernel's bias must be float32 [{rows}], not "
                            f"{bias.dtype} {list(bias.shape)}")
        where(bias, "bias")
    if _roundup(k, 16) != cols:
        raise ValueError(f"NVFP4Linear: x has {k} features but the weight has {cols} columns "
                         f"(in_features padded to 16 must equal it)")
    return (weight.data_ptr(), weight_scale.data_ptr(), weight_scale_2.data_ptr()), rows, cols


class _CudaPlan:
    """nvfp4_linear_cuda's arguments for one layer on one device: built once,
    per call only x, m, out, the stream and the workspace are written."""
    __slots__ = ("index", "device", "n", "k", "out_features", "op", "args", "at", "owner",
                 "ws_for", "keep", "bias_src", "bias_version")

    def __init__(self, device, ptrs, rows, cols, k, iscale, bias, variant, out_features):
        self.index, self.device = device.index, device
        self.n, self.k, self.out_features = rows, k, out_features
        self.op = _lib.CudaOperand(ptrs[0], ptrs[1], ptrs[2], rows, cols)
        a = self.args = _lib.CudaLinearArgs()
        a.k = k
        a.weight = ctypes.pointer(self.op)
        a.input_scale = iscale
        a.variant = variant
        a.bias = bias
        a.raw = a.x_codes = a.x_scales = a.x_scale = None
        a.k_slices = 1
        self.at = ctypes.addressof(a)
        self.owner = threading.get_ident()
        self.ws_for = (-1, 0)  # (m, workspace bytes), one tuple: read whole by any thread
        self.keep = self.bias_src = self.bias_version = None

    def run(self, x):
        if x.dtype is not _BF16:
            raise TypeError(f"NVFP4Linear: x is {x.dtype} on {x.device}; the CUDA kernel takes "
                            "bfloat16 activations (model.to(torch.bfloat16))")
        if not x.is_contiguous():
            x = x.contiguous()
        shape = x.shape
        k = self.k
        if shape[-1] != k:
            raise ValueError(f"NVFP4Linear: x has {shape[-1]} features, the layer takes {k}")
        m = x.numel() // k
        size = list(shape)  # cheaper than slicing a torch.Size
        size[-1] = self.n
        out = x.new_empty(size)
        if m:
            index = self.index
            stream = _api._raw_stream(index)
            ws_m, need = self.ws_for
            if ws_m != m:
                need = _api._ws_bytes(_api._WS_LINEAR, "nvfp4_linear_cuda_workspace", m, self.n, k)
                if need == 0:
                    raise ValueError(f"NVFP4Linear: M={m} N={self.n} K={k} is out of the CUDA "
                                     "kernel's range")
                self.ws_for = (m, need)
            ws = _workspace(self.device, index, stream, need)
            if threading.get_ident() == self.owner:
                a, at = self.args, self.at
            else:  # another thread: its own copy (the C call releases the GIL)
                a = _lib.CudaLinearArgs.from_buffer_copy(self.args)
                at = ctypes.addressof(a)
            a.x = x.data_ptr()
            a.m = m
            a.out = out.data_ptr()
            a.stream = stream or None
            a.workspace = ws.data_ptr()
            a.workspace_bytes = need
            _api._cuda_call("nvfp4_linear_cuda", index, at)
        if self.out_features != self.n:
            out = out.narrow(-1, 0, self.out_features).contiguous()
        return out


class _CpuPlan:
    """nvfp4_linear_cpu's arguments for one layer: built once; per call x, its
    dtype, m, out and the per-tensor scale (passed by value, read from its
    tensor each call) are written."""
    __slots__ = ("n", "k", "out_features", "tw", "pts_at", "args", "at", "owner", "keep",
                 "bias_src", "bias_version")
    index = -1  # x.get_device() of CPU tensors

    def __init__(self, ptrs, rows, cols, k, iscale, bias, variant, out_features, threads):
        self.n, self.k, self.out_features = rows, k, out_features
        self.tw = _lib.Tensor(rows, cols, ptrs[0], ptrs[1], 0.0, _lib.HI_FIRST, _lib.SCALES_TILED)
        self.pts_at = ptrs[2]
        a = self.args = _lib.LinearArgs()
        a.k = k
        a.weight = ctypes.pointer(self.tw)
        a.input_scale = iscale
        a.variant = variant
        a.bias = bias
        a.raw = None
        a.model = _SM90
        a.nthreads = threads
        a.x_quantized = None
        a.k_slices = 1
        self.at = ctypes.addressof(a)
        self.owner = threading.get_ident()
        self.keep = self.bias_src = self.bias_version = None

    def run(self, x):
        code = A.TORCH_FLOAT_CODES.get(x.dtype)
        if code is None:
            raise TypeError(f"NVFP4Linear: x must be bfloat16, float16 or float32, not {x.dtype}")
        if not x.is_contiguous():
            x = x.contiguous()
        shape = x.shape
        k = self.k
        if shape[-1] != k:
            raise ValueError(f"NVFP4Linear: x has {shape[-1]} features, the layer takes {k}")
        m = x.numel() // k
        size = list(shape)
        size[-1] = self.n
        out = torch.empty(size, dtype=_BF16)
        if m:
            self.tw.per_tensor_scale = ctypes.c_float.from_address(self.pts_at).value
            if threading.get_ident() == self.owner:
                a, at = self.args, self.at
            else:
                a = _lib.LinearArgs.from_buffer_copy(self.args)
                at = ctypes.addressof(a)
            a.x = x.data_ptr()
            a.x_dtype = code
            a.m = m
            a.out = out.data_ptr()
            status = _lib.fast("nvfp4_linear_cpu")(at)
            if status:
                check(status, "nvfp4_linear_cpu")
        if self.out_features != self.n:
            out = out.narrow(-1, 0, self.out_features).contiguous()
        return out


def _make_plan(device, ptrs, rows, cols, k, iscale, bias, variant, out_features, threads):
    if device.type == "cuda":
        return _CudaPlan(device, ptrs, rows, cols, k, iscale, bias, variant, out_features)
    if device.type == "cpu":
        return _CpuPlan(ptrs, rows, cols, k, iscale, bias, variant, out_features, threads)
    raise ValueError(f"NVFP4Linear: {device.type} tensors are not supported (CPU and CUDA are)")


# --------------------------------------------------------------------------
# the custom op
# --------------------------------------------------------------------------
_OP_PLANS = {}


def _linear_impl(x: torch.Tensor, weight: torch.Tensor, weight_scale: torch.Tensor,
               weight_scale_2: torch.Tensor, input_scale: Optional[torch.Tensor],
               bias: Optional[torch.Tensor], variant: int, threads: int) -> torch.Tensor:
    """ComfyUI's NVFP4 linear: bfloat16 [..., rows] from x [..., K] and the
    layer's tensors as NVFP4Linear holds them (weight uint8 [rows, cols/2]
    hi-first, weight_scale E4M3 tiled, weight_scale_2 and input_scale one
    float32 each -- input_scale None: the dynamic scale --, bias float32
    [rows] or None); variant: nvfp4_variant; threads: CPU threads."""
    if variant not in _VARIANTS.values():
        raise ValueError(f"nvfp4::linear: variant must be one of {sorted(_VARIANTS.values())}")
    k = int(x.shape[-1])
    dev = x.device
    ptrs, rows, cols = _check_layer_tensors(dev, weight, weight_scale, weight_scale_2,
                                            input_scale, bias, k)
    iscale = None if input_scale is None else input_scale.data_ptr()
    bptr = None if bias is None else bias.data_ptr()
    # the plan holds addresses and sizes only: the same key is the same struct
    key = (dev.index, dev.type, ptrs, rows, k, iscale, bptr, variant, threads)
    plan = _OP_PLANS.get(key)
    if plan is None:
        plan = _make_plan(dev, ptrs, rows, cols, k, iscale, bptr, variant, rows, threads)
        if len(_OP_PLANS) >= 1024:
            _OP_PLANS.clear()
        _OP_PLANS[key] = plan
    return plan.run(x)


_linear_op = torch.library.custom_op("nvfp4::linear", mutates_args=())(_linear_impl)


@_linear_op.register_fake
def _linear_fake(x, weight, weight_scale, weight_scale_2, input_scale, bias, variant, threads):
    torch._check(_roundup(x.shape[-1], 16) == 2 * weight.shape[1],
                 lambda: "nvfp4::linear: x's features, padded to 16, must equal the weight's "
                         "columns")
    return x.new_empty(x.shape[:-1] + (weight.shape[0],), dtype=_BF16)


def _refuse_backward(ctx, inputs, output):
    """Called by autograd as the op runs with grad enabled and an input that
    requires grad: there is no backward, so the call fails here."""
    what = "x" if inputs[0].requires_grad else "the bias"
    raise _autograd_error(what)


def _no_backward(ctx, grad):  # never reached: _refuse_backward raised first
    raise _autograd_error("x")


_linear_op.register_autograd(_no_backward, setup_context=_refuse_backward)


# --------------------------------------------------------------------------
# checkpoints: the library's reader (nvfp4_ckpt_open), every format
# --------------------------------------------------------------------------
_TORCH_BY_NAME = {"BOOL": torch.bool, "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16,
                  "U16": torch.uint16, "I32": torch.int32, "U32": torch.uint32,
                  "I64": torch.int64, "U64": torch.uint64, "F8_E4M3": _E4M3,
                  "F8_E5M2": torch.float8_e5m2, "BF16": torch.bfloat16, "F16": torch.float16,
                  "F32": torch.float32, "F64": torch.float64}
_TORCH_DTYPES = {}


def _torch_dtype(code):
    """torch's dtype for an nvfp4_dtype, or None."""
    if not _TORCH_DTYPES:
        lib = _lib.lib()
        for st_name, dt in _TORCH_BY_NAME.items():
            _TORCH_DTYPES[lib.nvfp4_dtype_from_name(st_name.encode())] = dt
    return _TORCH_DTYPES.get(code)


def _text(b):
    return None if b is None else b.decode()


class _Checkpoint:
    """A checkpoint opened by the library (nvfp4_ckpt_open): a .safetensors
    file, a checkpoint directory (shards and index) or a .gguf file, its
    format detected there (None when it holds no NVFP4 tensor)."""

    def __init__(self, path):
        if not isinstance(path, (str, bytes, os.PathLike)):
            raise TypeError(f"a checkpoint path, not {type(path).__name__}")
        self.path = os.fsdecode(path)
        self._lib = _lib.lib()
        h = ctypes.c_void_p()
        check(self._lib.nvfp4_ckpt_open(ctypes.byref(h), os.fsencode(path), 0), "nvfp4_ckpt_open")
        self._h = h
        self.format = _lib.FORMAT_NAMES.get(self._lib.nvfp4_ckpt_format(h))
        self._entries = None

    def close(self):
        if self._h is not None:
            self._lib.nvfp4_ckpt_close(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def entries(self):
        """{name: nvfp4_ckpt_entry} of every tensor, in file order."""
        if self._entries is None:
            out = {}
            for i in range(self._lib.nvfp4_ckpt_entries(self._h)):
                e = _lib.CkptEntry()
                check(self._lib.nvfp4_ckpt_entry_at(self._h, i, ctypes.byref(e)),
                      "nvfp4_ckpt_entry_at")
                out[e.name.decode()] = e
            self._entries = out
        return self._entries

    def nvfp4_weights(self):
        """The NVFP4 tensors' weight names ("L.weight"), in file order."""
        return [self._lib.nvfp4_ckpt_name(self._h, i).decode()
                for i in range(self._lib.nvfp4_ckpt_count(self._h))]

    def dims(self, weight):
        """(rows, stored columns) of an NVFP4 tensor, from the headers."""
        rows, cols = ctypes.c_int64(), ctypes.c_int64()
        check(self._lib.nvfp4_ckpt_dims(self._h, weight.encode(), ctypes.byref(rows),
                                        ctypes.byref(cols)), "nvfp4_ckpt_dims")
        return rows.value, cols.value

    def tensor(self, name):
        """A CPU copy of the tensor `name` as stored (dtype and shape), or None
        when there is none; ValueError for a type torch lacks (ggml's
        quantized types)."""
        e = self.entries().get(name)
        if e is None:
            return None
        dtype = _torch_dtype(e.dtype)
        if dtype is None:
            raise ValueError(f"{self.path}: '{name}' is {e.type.decode()}, a type torch has no "
                             "dtype for")
        shape = tuple(e.shape[i] for i in range(e.ndim))
        if e.nbytes == 0:
            return torch.empty(shape, dtype=dtype)
        buf = (ctypes.c_uint8 * e.nbytes).from_address(e.data)
        # a copy: the mapping goes with close()
        return torch.frombuffer(buf, dtype=torch.uint8).clone().view(dtype).reshape(shape)

    def load_layer(self, prefix):
        """nvfp4.Layer of layer `prefix` in the kernel's layout (nvfp4_ckpt_load_layer)."""
        layer = _lib.Layer()
        check(self._lib.nvfp4_ckpt_load_layer(ctypes.byref(layer), self._h, prefix.encode()),
              "nvfp4_ckpt_load_layer")
        return _formats._layer_from(layer, prefix)

    def claims(self, prefix):
        """True when pieces of an NVFP4 layer `prefix` are here though the
        library does not list its weight as NVFP4 (one is missing): its U8
        codes, or its per-tensor scale."""
        if self.format is None:
            return False
        pieces, entries = self.layer_pieces(prefix), self.entries()
        codes = entries.get(pieces["codes"])
        return (codes is not None and codes.dtype == _lib.DTYPE_U8) or \
            pieces["tensor_scale"] in entries

    def layer_pieces(self, prefix):
        """{role: name} of what this format stores layer `prefix` under
        (present or not): codes, scales (not GGUF: in the codes' blocks),
        tensor_scale, input_scale, bias, and ComfyUI's marker."""
        tr = _traits(self.format)
        w = prefix + ".weight"
        pieces = {"codes": w + _text(tr.codes_suffix),
                  # no suffix: GGUF's optional L.scale (include/nvfp4.h, "Names")
                  "tensor_scale": w + _text(tr.tensor_scale_suffix)
                  if tr.tensor_scale_suffix is not None else prefix + ".scale",
                  "input_scale": prefix + _text(tr.input_scale_suffix), "bias": prefix + ".bias"}
        if tr.scale_suffix is not None:
            pieces["scales"] = w + _text(tr.scale_suffix)
        marker = ctypes.create_string_buffer(len(w.encode()) + 32)
        if self.format == ComfyUIFormat.name and \
                self._lib.nvfp4_st_marker_name(marker, len(marker), w.encode()):
            pieces["marker"] = marker.value.decode()
        return pieces


def _traits(name):
    """The library's conventions of format `name` (nvfp4_format_traits)."""
    return _lib.lib().nvfp4_format_traits_of(_lib.FORMATS[name]).contents


def _relayout(codes, scales, rows, cols, src, dst):
    """NVFP4 codes and block-scale bytes (uint8 NumPy arrays, rows x cols
    elements) from layout src to layout dst -- each (nibble order, scale
    layout) -- by nvfp4_tensor_convert.  Returns NumPy copies."""
    lib = _lib.lib()
    codes, scales = np.ascontiguousarray(codes), np.ascontiguousarray(scales)
    t = _lib.Tensor(rows, cols, A.ptr(codes), A.ptr(scales), 1.0, src[0], src[1])
    out = _lib.Tensor()
    check(lib.nvfp4_tensor_convert(ctypes.byref(out), ctypes.byref(t), dst[0], dst[1]),
          "nvfp4_tensor_convert")
    try:
        nscale = lib.nvfp4_scales_bytes(rows, cols, dst[1])
        c = np.frombuffer(ctypes.string_at(out.codes, rows * cols // 2), dtype=np.uint8)
        s = np.frombuffer(ctypes.string_at(out.scales, nscale), dtype=np.uint8)
    finally:
        lib.nvfp4_tensor_free(ctypes.byref(out))
    shape = _scale_shape(rows, cols) if dst[1] == _lib.SCALES_TILED else (rows, cols // 16)
    return c.reshape(rows, cols // 2).copy(), s.reshape(shape).copy()


_KERNEL_LAYOUT = (_lib.HI_FIRST, _lib.SCALES_TILED)


def _host_bytes(t):
    """A uint8 NumPy copy of a tensor's bytes (E4M3 scales as their bytes)."""
    return t.detach().view(torch.uint8).cpu().numpy() if t.dtype != torch.uint8 else \
        t.detach().cpu().numpy()


def _f32(t):
    """The float32 value of a one-element tensor (NumPy scalar: its bits kept)."""
    return np.float32(t.detach().reshape(()).item())


def _reciprocal(v):
    """FP32(1 / v), the multiplier of a divisor: the rounding the library's
    reader does (compressed-tensors' g gives FP32(1 / g))."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        return np.float32(1) / np.float32(v)


def _same_bits(a, b):
    return np.float32(a).view(np.uint32) == np.float32(b).view(np.uint32)


def _exact_divisor(m):
    """g with 1/g exactly m (m a power of two), or None: the only multipliers
    a divisor format stores without changing the numbers."""
    g = _reciprocal(m)
    # the product of two FP32 numbers is exact in FP64
    if not (math.isfinite(float(g)) and g != 0 and float(g) * float(m) == 1.0):
        return None
    return g


class CheckpointFormat:
    """How a checkpoint format stores one NVFP4 linear layer.

    NVFP4Linear always holds the kernel's layout, the one nvfp4.load_layer
    returns (which is ComfyUI's): `weight` (uint8 E2M1 codes, element 2i in
    the high nibble), `weight_scale` (E4M3 block scales, 128x4 tiled),
    `weight_scale_2` (float32 multiplier), optional `input_scale` (float32
    multiplier) and `bias`.  A format says which tensors a file keeps for a
    layer and converts between them; NVFP4Linear's state_dict() and
    load_state_dict() use the format a layer came from (its
    checkpoint_format).  ComfyUIFormat, ModelOptFormat and
    CompressedTensorsFormat are registered; subclass this and
    register_format() it for another format the library reads (the name is
    nvfp4.detect_format's).

    name: the format's name.
    native: True when the file's tensors are the module's buffers as they
        are (ComfyUI); then the default state_dict machinery is used.
    extras: names of the buffers the format keeps besides the kernel's
        tensors (ComfyUI's marker, compressed-tensors' divisors); a layer
        that changes format drops them.
    read(f, prefix, layer) -> dict: the module's tensors for the layer from
        the library's Layer (kernel layout) and the open checkpoint `f` (for
        what the Layer does not keep: stored dtypes, shapes, markers,
        divisors); names as NVFP4Linear's buffers plus the extras.
    adopt(module): make a layer this format's (called when checkpoint_format
        is set): add the extras it lacks, or raise when the format cannot
        hold the layer's numbers.
    stored_cols(module) -> int: the weight columns the format stores.
    state_names(module) -> list: the names to_state() gives.
    to_state(module) -> dict: the layer's tensors as the file stores them,
        by name relative to the module.
    from_state(module, tensors) -> dict: the inverse, the module's tensors
        from such a dict (every name of state_names present).
    """
    name = None
    native = False
    extras = ()

    def read(self, f, prefix, layer):
        return _layer_tensors(layer)

    def adopt(self, module):
        pass

    def stored_cols(self, module):
        return 2 * module.weight.shape[1]

    def state_names(self, module):
        raise NotImplementedError

    def to_state(self, module):
        raise NotImplementedError

    def from_state(self, module, tensors):
        raise NotImplementedError


_FORMATS = {}


def register_format(fmt):
    """Make a CheckpointFormat known by its name (replacing one of that name)."""
    if not isinstance(fmt, CheckpointFormat) or not isinstance(fmt.name, str) or not fmt.name:
        raise TypeError("register_format: a CheckpointFormat instance with a name")
    _FORMATS[fmt.name] = fmt
    return fmt


def _layer_tensors(layer):
    """The module's tensors from an nvfp4.load_layer Layer (NumPy arrays, kernel
    layout): what any format gives."""
    w = layer.weight
    out = {"weight": torch.from_numpy(w.qdata),
           "weight_scale": torch.from_numpy(w.block_scale).view(_E4M3),
           "weight_scale_2": torch.tensor(float(w.per_tensor_scale), dtype=torch.float32)}
    if layer.input_scale is not None:
        out["input_scale"] = torch.tensor(layer.input_scale, dtype=torch.float32)
    if layer.bias is not None:
        out["bias"] = torch.from_numpy(np.asarray(layer.bias, dtype=np.float32))
    return out


def _stored_bias(f, prefix, out):
    """The bias as the file stores it (dtype, length) in place of the Layer's
    float32 one padded to the rows."""
    if "bias" in out:
        stored = f.tensor(prefix + ".bias")
        if stored is not None:
            out["bias"] = stored


_COMFY_MARKER = b'{"format": "nvfp4"}'


class ComfyUIFormat(CheckpointFormat):
    """ComfyUI's NVFP4 layer (what `nvfp4 quantize` writes): LAYER.weight,
    .weight_scale, .weight_scale_2, optional .input_scale and .bias, and the
    marker LAYER.comfy_quant -- the kernel's layout itself, so the module's
    buffers are the file's tensors, stored dtypes and shapes kept.  Also the
    state of layers read from GGUF, which is no torch state-dict format: the
    same numbers (GGUF's UE4M3 scale bytes made E4M3 by the library), as
    `nvfp4 convert --to comfyui` writes them."""
    name = "comfyui"
    native = True
    extras = ("comfy_quant",)

    def read(self, f, prefix, layer):
        out = _layer_tensors(layer)
        _stored_bias(f, prefix, out)
        if f.format != self.name:  # a GGUF layer: the Layer's tensors are ComfyUI's
            return out
        # as stored: the scale's dtype (F8_E4M3 or U8), the scalars' shapes,
        # the marker (the bias above: ComfyUI pads N; the bias may not be)
        scale = f.entries().get(prefix + ".weight_scale")
        if scale is not None and scale.dtype == _lib.DTYPE_U8:
            out["weight_scale"] = out["weight_scale"].view(torch.uint8)
        for name in ("weight_scale_2", "input_scale", "comfy_quant"):
            t = f.tensor(f"{prefix}.{name}")
            if t is not None:
                out[name] = t
        return out

    def adopt(self, module):
        # ComfyUI loads a layer as NVFP4 only with its marker
        if module._buffers.get("comfy_quant") is None:
            module.register_buffer("comfy_quant", torch.frombuffer(
                bytearray(_COMFY_MARKER), dtype=torch.uint8).to(module.weight.device))


_Conventions = collections.namedtuple(
    "_Conventions", "layout divides scalar_ndim codes scales scalars")


class _LayoutFormat(CheckpointFormat):
    """A safetensors format that stores a layer in another layout than the
    kernel's.  Its names, nibble order, scale layout and scale direction
    come from the library's conventions table (nvfp4_format_traits_of), the
    conversions from nvfp4_tensor_convert: codes and scale bytes are moved,
    never recomputed.  A format whose per-tensor and input scales divide
    keeps the stored divisors as buffers (extras) beside the multipliers the
    kernel reads."""
    pads_columns = True  # the weight's columns stored padded to 16

    def __init__(self):
        self._conv = None

    def conventions(self):
        """The format's row of the library's table, as this class uses it:
        layout (nibble order, scale layout), divides, scalar_ndim (the rank
        its tool writes), the names codes and scales, and scalars: (kernel
        buffer, stored name) of the per-tensor and the input scale."""
        if self._conv is None:
            tr = _traits(self.name)
            order = {_lib.PACK_HI_FIRST: _lib.HI_FIRST, _lib.PACK_LO_FIRST: _lib.LO_FIRST}
            store = {_lib.STORE_TILED: _lib.SCALES_TILED,
                     _lib.STORE_ROW_MAJOR: _lib.SCALES_ROW_MAJOR}
            self._conv = _Conventions(
                layout=(order[tr.packing], store[tr.scale_store]),
                divides=tr.tensor_scale_direction == _lib.SCALE_DIVIDES,
                scalar_ndim=tr.tensor_scale_ndim,
                codes="weight" + _text(tr.codes_suffix), scales="weight" + _text(tr.scale_suffix),
                scalars=(("weight_scale_2", "weight" + _text(tr.tensor_scale_suffix)),
                         ("input_scale", _text(tr.input_scale_suffix).lstrip("."))))
        return self._conv

    @property
    def extras(self):
        c = self.conventions()
        return tuple(stored for _, stored in c.scalars) if c.divides else ()

    def _scale_shape(self, rows, cols):
        tiled = self.conventions().layout[1] == _lib.SCALES_TILED
        return _scale_shape(rows, cols) if tiled else (rows, cols // 16)

    def stored_cols(self, module):
        cols = 2 * module.weight.shape[1]
        return cols if self.pads_columns else min(cols, _roundup(module.in_features, 2))

    def stored_rows(self, module):
        """The weight rows the file stores: as many as the checkpoint the layer
        came from held (padded ones included: `nvfp4 convert` keeps them), else
        the layer's own out_features (these formats do not pad N)."""
        return module.__dict__.get("_ckpt_rows") or module.out_features

    def read(self, f, prefix, layer):
        c = self.conventions()
        out = _layer_tensors(layer)
        stored = f.entries().get(f"{prefix}.{c.scales}")
        if stored is not None and stored.dtype == _lib.DTYPE_U8:
            out["weight_scale"] = out["weight_scale"].view(torch.uint8)
        for kernel, name in c.scalars:
            t = f.tensor(f"{prefix}.{name}") if kernel in out else None
            if t is None:
                continue
            if c.divides:  # the divisor as stored; the Layer has its multiplier
                out[name] = t
                out[kernel] = out[kernel].reshape(t.shape)
            else:
                out[kernel] = t
        _stored_bias(f, prefix, out)
        return out

    def _divisor(self, module, kernel, name):
        """The stored divisor for multiplier buffer `kernel`: the one on record
        when the multiplier is still its reciprocal, else the exact one."""
        ndim = self.conventions().scalar_ndim
        m, g = module._buffers[kernel], module._buffers.get(name)
        if m.device.type == "meta":
            return g if g is not None else torch.empty((1,) * ndim, device="meta")
        mv = _f32(m)
        if g is not None and _same_bits(_reciprocal(_f32(g)), mv):
            return g
        exact = _exact_divisor(mv)
        if exact is None:
            raise ValueError(
                f"NVFP4Linear: {kernel} = {float(mv)!r} has no {self.name} {name}: the format "
                f"stores a divisor g (the multiplier is FP32(1 / g)) and 1 / {float(mv)!r} is no "
                f"FP32 number{'' if g is None else f', and {name} on record no longer gives it'}"
                f"; write the layer as a format that multiplies (checkpoint_format 'comfyui' or "
                f"'modelopt'), or convert such a file with nvfp4.convert(..., allow_rescale=True)")
        shape = tuple(g.shape) if g is not None else (1,) * ndim
        return torch.tensor(float(exact), dtype=torch.float32).reshape(shape).to(m.device)

    def adopt(self, module):
        c = self.conventions()
        if not c.divides:
            return
        made = {}
        for kernel, name in c.scalars:  # checked before anything changes
            if module._buffers.get(kernel) is not None and module._buffers.get(name) is None:
                made[name] = self._divisor(module, kernel, name)
        for name, g in made.items():
            module.register_buffer(name, g)
        for kernel, name in c.scalars:
            if module._buffers.get(kernel) is None:
                module._buffers.pop(name, None)

    def state_names(self, module):
        c = self.conventions()
        names = [c.codes, c.scales]
        names += [name for kernel, name in c.scalars if module._buffers.get(kernel) is not None]
        if module._parameters.get("bias") is not None:
            names.append("bias")
        return names

    def to_state(self, module):
        c = self.conventions()
        w, s = module._buffers["weight"], module._buffers["weight_scale"]
        rows, cols = w.shape[0], 2 * w.shape[1]
        width, srows = self.stored_cols(module), self.stored_rows(module)
        scale_shape = self._scale_shape(srows, cols)
        if w.device.type == "meta":
            codes = torch.empty((srows, width // 2), dtype=torch.uint8, device="meta")
            scales = torch.empty(scale_shape, dtype=s.dtype, device="meta")
        else:
            kc, ks = _relayout(_host_bytes(w), _host_bytes(s), rows, cols, _KERNEL_LAYOUT,
                               c.layout)
            codes = torch.from_numpy(np.ascontiguousarray(kc[:srows, :width // 2])).to(w.device)
            ks = np.ascontiguousarray(ks[:scale_shape[0]])  # row-major: the stored rows
            scales = torch.from_numpy(ks).view(s.dtype).to(s.device)
        out = {c.codes: codes, c.scales: scales}
        for kernel, name in c.scalars:
            if module._buffers.get(kernel) is not None:
                out[name] = self._divisor(module, kernel, name) if c.divides else \
                    module._buffers[kernel]
        if module._parameters.get("bias") is not None:
            out["bias"] = module._parameters["bias"]
        return out

    def from_state(self, module, tensors):
        c = self.conventions()
        rows, cols = module.weight.shape[0], 2 * module.weight.shape[1]
        width, srows = self.stored_cols(module), self.stored_rows(module)
        codes, scales = tensors[c.codes], tensors[c.scales]
        if codes.dtype != torch.uint8 or tuple(codes.shape) != (srows, width // 2):
            raise ValueError(f"{c.codes} must be uint8 [{srows}, {width // 2}] for this "
                             f"{module.out_features} x {module.in_features} layer, not "
                             f"{codes.dtype} {list(codes.shape)}")
        scale_shape = self._scale_shape(srows, cols)
        if scales.dtype not in (torch.uint8, _E4M3) or tuple(scales.shape) != scale_shape:
            raise ValueError(f"{c.scales} must be float8_e4m3fn (or uint8) "
                             f"{list(scale_shape)}, not {scales.dtype} {list(scales.shape)}")
        # the rows and columns the format does not store are zero codes and scales
        stored = np.zeros((rows, cols // 2), np.uint8)
        stored[:srows, :width // 2] = _host_bytes(codes)
        kernel_scales = np.zeros(self._scale_shape(rows, cols), np.uint8)
        kernel_scales[:scale_shape[0]] = _host_bytes(scales)
        kc, ks = _relayout(stored, kernel_scales, rows, cols, c.layout, _KERNEL_LAYOUT)
        dev = codes.device  # the state's (load_state_dict(assign=True) keeps it)
        out = {"weight": torch.from_numpy(kc).to(dev), "weight_scale": torch.from_numpy(ks).to(dev)}
        for kernel, name in c.scalars:
            if name not in tensors:
                continue
            t = tensors[name]
            if t.dtype != torch.float32 or t.numel() != 1:
                raise ValueError(f"{name} must be one float32 value, not {t.dtype} "
                                 f"{list(t.shape)}")
            if c.divides:
                out[name] = t
                out[kernel] = torch.tensor(float(_reciprocal(_f32(t))), dtype=torch.float32,
                                           device=t.device)
            else:
                out[kernel] = t
        if "bias" in tensors:
            out["bias"] = tensors["bias"]
        return out


class ModelOptFormat(_LayoutFormat):
    """NVIDIA ModelOpt's NVFP4 layer (hf_quant_config.json checkpoints):
    LAYER.weight (uint8, element 2i in the low nibble, columns padded to
    16), .weight_scale (E4M3 row-major [rows, cols/16]), .weight_scale_2
    (float32, multiplies), optional .input_scale and .bias."""
    name = "modelopt"


class CompressedTensorsFormat(_LayoutFormat):
    """compressed-tensors' nvfp4-pack-quantized layer (llm-compressor):
    LAYER.weight_packed (uint8, lo-first, the columns as stored: K need not
    be a multiple of 16), .weight_scale (E4M3 row-major), .weight_global_scale
    (float32, divides: the kernel's weight_scale_2 is FP32(1 / g)),
    optional .input_global_scale (likewise for input_scale) and .bias.  The
    stored divisors are kept, so state_dict() gives their bits back."""
    name = "compressed-tensors"
    pads_columns = False


for _fmt in (ComfyUIFormat(), ModelOptFormat(), CompressedTensorsFormat()):
    register_format(_fmt)
del _fmt


def _format(name):
    fmt = _FORMATS.get(name)
    if fmt is None:
        raise NotImplementedError(
            f"NVFP4Linear: no CheckpointFormat named {name!r} is registered, so this layer cannot "
            f"be written in or read from its checkpoint's format (known: "
            f"{', '.join(sorted(_FORMATS))}); see nvfp4.torch.register_format")
    return fmt


def _state_format(ck):
    """The CheckpointFormat name a layer read from checkpoint ck keeps: the
    file's, or ComfyUI's for GGUF (no torch state-dict format) unless a
    format named 'gguf' is registered."""
    if ck.format == "gguf" and "gguf" not in _FORMATS:
        return ComfyUIFormat.name
    return ck.format


# --------------------------------------------------------------------------
# NVFP4Linear
# --------------------------------------------------------------------------
# Tensors the eager path takes as they are; any other type goes through the
# custom op, where torch's dispatch handles it.
_PLAIN = {torch.Tensor, nn.Parameter}
_is_compiling = torch.compiler.is_compiling
_function_mode_on = torch._C._is_torch_function_mode_enabled
_dispatch_depth = torch._C._len_torch_dispatch_stack
_grad_enabled = torch.is_grad_enabled
# assigning one of these drops the cached plan
_PLANNED = frozenset(("weight", "weight_scale", "weight_scale_2", "input_scale", "bias"))


def _static_scale(input_scale):
    """None for the dynamic scale, else the static scale as a float32 value."""
    if input_scale is None or (isinstance(input_scale, str) and input_scale == "dynamic"):
        return None
    if isinstance(input_scale, str):
        raise ValueError(f"input_scale must be None, 'dynamic' or a number; got {input_scale!r}")
    v = float(np.float32(A.scalar_value(input_scale, "input_scale")))
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"input_scale must be a positive finite float32 value; got {v}")
    return v


class NVFP4Linear(nn.Module):
    """An NVFP4 linear layer: y = x W^T + b with W in NVFP4 and, by default,
    x quantized to NVFP4 per call (ComfyUI's linear, the GEMM contract).

    Make one with NVFP4Linear.from_linear(linear), .from_checkpoint(path,
    prefix), or NVFP4Linear(in_features, out_features, ...) (zeros, to be
    filled by load_state_dict).

    Buffers (the kernel's layout, ComfyUI's names): weight uint8 [rows,
    cols/2] (rows = out_features and cols = in_features rounded up to 16),
    weight_scale float8_e4m3fn tiled, weight_scale_2 float32, input_scale
    float32 (absent: the dynamic scale, FP32(amax|x| / 2688) per call),
    and what the checkpoint format keeps besides (CheckpointFormat.extras:
    ComfyUI's marker comfy_quant, compressed-tensors' weight_global_scale
    and input_global_scale); bias: a Parameter that does not require grad
    (the kernel adds it in float32).

    Attributes:
        in_features, out_features: as nn.Linear's.
        variant: the activation quantizer's rounding, "eager" or "cuda"
            (see nvfp4.quantize).
        mode: "w4a4" (default: activations quantized, the NVFP4 kernel) or
            "w4a16" (the weight dequantized per call, then F.linear in x's
            dtype: no activation error, differentiable in x).
        threads: CPU threads for the CPU backend (0 = all cores).
        checkpoint_format: the name of the CheckpointFormat that state_dict()
            writes and load_state_dict() reads: the checkpoint's for a layer
            read from one ('comfyui' for GGUF), else 'comfyui'.  Setting it
            converts the layer's state (ValueError when that format cannot
            hold its numbers exactly).

    Inputs: CUDA tensors must be bfloat16 (the kernel's activations); CPU
    tensors bfloat16, float16 or float32.  The output has x's dtype (the
    bfloat16 result, widened for float32 x).  Eager CUDA calls run on
    torch.cuda.current_stream() with no host synchronization.
    """

    def __init__(self, in_features, out_features, bias=True, *, static_input_scale=False,
                 variant="eager", mode="w4a4", threads=0, device=None,
                 bias_dtype=torch.bfloat16, checkpoint_format="comfyui"):
        super().__init__()
        rows, cols = _roundup(out_features, 16), _roundup(in_features, 16)
        tensors = {
            "weight": torch.zeros((rows, cols // 2), dtype=torch.uint8, device=device),
            "weight_scale": torch.zeros(_scale_shape(rows, cols), dtype=_E4M3, device=device),
            "weight_scale_2": torch.ones((), dtype=torch.float32, device=device)}
        if static_input_scale:
            tensors["input_scale"] = torch.ones((), dtype=torch.float32, device=device)
        if bias:
            tensors["bias"] = torch.zeros(out_features, dtype=bias_dtype, device=device)
        self._setup(in_features, out_features, tensors, variant, mode, threads, checkpoint_format)

    def _setup(self, in_features, out_features, tensors, variant, mode, threads, fmt):
        """Register the layer's tensors (names as in the class doc) and settings."""
        self.__dict__["_plan"] = None
        self.in_features, self.out_features = int(in_features), int(out_features)
        tensors = dict(tensors)
        bias = tensors.pop("bias", None)
        for name in ("weight", "weight_scale", "weight_scale_2"):
            self.register_buffer(name, tensors.pop(name))
        self.register_buffer("input_scale", tensors.pop("input_scale", None))
        for name, t in tensors.items():  # what the format keeps besides (its extras)
            self.register_buffer(name, t)
        if bias is not None:
            bias = nn.Parameter(bias, requires_grad=False)
        self.register_parameter("bias", bias)
        rows, cols = self.weight.shape[0], 2 * self.weight.shape[1]
        if _roundup(self.in_features, 16) != cols or not 0 < self.out_features <= rows:
            raise ValueError(f"NVFP4Linear: a {rows} x {cols} NVFP4 weight cannot be a "
                             f"{self.in_features} -> {self.out_features} linear layer")
        if bias is not None and (bias.dim() != 1 or
                                 not self.out_features <= bias.shape[0] <= rows):
            raise ValueError(f"NVFP4Linear: the bias is {list(bias.shape)}; the layer has "
                             f"{self.out_features} outputs ({rows} rows)")
        self.register_buffer("_w4a16_scales", None, persistent=False)
        self.register_buffer("_w4a16_lut", None, persistent=False)
        self.checkpoint_format = fmt
        self.threads = threads
        self.variant = variant
        self.mode = mode

    # ---- construction ----------------------------------------------------
    @classmethod
    def _from_tensors(cls, in_features, out_features, tensors, variant, mode, threads, fmt,
                      device=None):
        m = cls.__new__(cls)
        nn.Module.__init__(m)
        if device is not None:
            tensors = {k: v.to(device) for k, v in tensors.items()}
        m._setup(in_features, out_features, tensors, variant, mode, threads, fmt)
        return m

    @classmethod
    def from_linear(cls, linear, variant="eager", input_scale=None, *, mode="w4a4", threads=0):
        """An NVFP4Linear from an nn.Linear: its weight quantized as ComfyUI does
        (nvfp4.quantize: on the GPU for a BF16 CUDA weight on an sm_90 device,
        else on the CPU, then moved back), its bias kept.

        Args:
            linear: the nn.Linear (left unchanged).
            variant: "eager" or "cuda": the quantizer's rounding for the weight
                and, per call, for the activations.
            input_scale: None or "dynamic" (amax|x| / 2688 per call, on the
                device), or a number: a static activation scale (a calibrated
                FP32(amax / 2688)).
            mode, threads: see the class.
        """
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"from_linear: an nn.Linear, not {type(linear).__name__}")
        _api._variant(variant)
        scale = _static_scale(input_scale)
        w = linear.weight.detach()
        dev = w.device
        if dev.type == "meta":
            raise ValueError("from_linear: the weight is on the meta device (no values to "
                             "quantize); load the weights first, or use load_quantized")
        if dev.type == "cuda" and w.dtype == _BF16 and _api.cuda_available():
            q = _api.quantize(w.contiguous(), variant=variant)
        else:
            q = _api.quantize(w.cpu().contiguous(), variant=variant)
        tensors = {"weight": q.qdata, "weight_scale": q.block_scale,
                   "weight_scale_2": q.per_tensor_scale.reshape(())}
        if scale is not None:
            tensors["input_scale"] = torch.tensor(scale, dtype=torch.float32)
        if linear.bias is not None:
            tensors["bias"] = linear.bias.detach().clone()
        return cls._from_tensors(linear.in_features, linear.out_features, tensors, variant, mode,
                                 threads, "comfyui", device=dev)

    @classmethod
    def from_checkpoint(cls, path, prefix, *, in_features=None, out_features=None,
                        variant="eager", mode="w4a4", threads=0, device=None):
        """An NVFP4Linear from one layer of a checkpoint of any format the
        library reads (nvfp4_ckpt_open detects it; nvfp4_ckpt_load_layer
        validates and reads the layer), kept in that format for state_dict()
        (see checkpoint_format).

        Args:
            path: a .safetensors file, a checkpoint directory (model.safetensors,
                or shards and their index) or a .gguf file.
            prefix: the layer's name ("model.layers.0.mlp.down_proj"; a
                trailing ".weight" is dropped).
            in_features, out_features: the layer's true sizes when the file
                pads them to 16 (default: the stored weight's).
            variant, mode, threads: see the class.
            device: where the tensors go (default: the CPU).
        """
        if not isinstance(prefix, str) or not prefix:
            raise TypeError("from_checkpoint: prefix must be a non-empty str (the layer name)")
        if prefix.endswith(".weight"):
            prefix = prefix[: -len(".weight")]
        with _Checkpoint(path) as ck:
            return cls._from_open(ck, prefix, in_features, out_features, variant, mode, threads,
                                  device)

    @classmethod
    def _from_open(cls, ck, prefix, in_features, out_features, variant, mode, threads, device):
        """from_checkpoint on an open _Checkpoint."""
        layer = ck.load_layer(prefix)
        fmt_name = _state_format(ck)
        fmt = _FORMATS.get(fmt_name)
        # an unregistered format still loads and runs; state_dict() says what is missing
        tensors = _layer_tensors(layer) if fmt is None else fmt.read(ck, prefix, layer)
        stored_rows, stored = ck.dims(prefix + ".weight")
        rows = layer.weight.rows  # the layer's own N (a rows record may say fewer than stored)
        m = cls._from_tensors(stored if in_features is None else in_features,
                              rows if out_features is None else out_features, tensors,
                              variant, mode, threads, fmt_name, device=device)
        m._ckpt_rows = int(stored_rows)
        if fmt is not None and fmt.stored_cols(m) != stored:
            raise ValueError(f"from_checkpoint: {ck.path}: {prefix}.weight has {stored} columns "
                             f"as stored; a {fmt_name} layer of in_features={m.in_features} "
                             f"stores {fmt.stored_cols(m)}")
        return m

    # ---- settings ----------------------------------------------------------
    @property
    def variant(self):
        return self._variant

    @variant.setter
    def variant(self, value):
        self.__dict__["_variant_code"] = _api._variant(value)
        self.__dict__["_variant"] = value
        self._invalidate()

    @property
    def threads(self):
        return self._threads

    @threads.setter
    def threads(self, value):
        self.__dict__["_threads"] = _api._int_arg(value, "threads", 0, 1 << 16)
        self._invalidate()

    @property
    def mode(self):
        return self._mode

    @mode.setter
    def mode(self, value):
        _api._choice(value, _MODES, "mode")
        self.__dict__["_mode"] = value
        self.__dict__["_w4a16"] = value == "w4a16"
        self._invalidate()

    @property
    def checkpoint_format(self):
        return self.__dict__["_checkpoint_format"]

    @checkpoint_format.setter
    def checkpoint_format(self, name):
        if not isinstance(name, str) or not name:
            raise TypeError(f"checkpoint_format must be a format name, not {name!r}")
        old = _FORMATS.get(self.__dict__.get("_checkpoint_format"))
        new = _FORMATS.get(name)
        if new is not None:
            new.adopt(self)  # raises before anything changed when it cannot hold the layer
        if old is not None and old is not new:
            for extra in set(old.extras) - set(() if new is None else new.extras):
                self._buffers.pop(extra, None)
        self.__dict__["_checkpoint_format"] = name

    @property
    def static_input_scale(self):
        """True when the layer quantizes activations with its input_scale."""
        return self.input_scale is not None

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, input_scale="
                f"{'static' if self.static_input_scale else 'dynamic'}, variant={self.variant!r}, "
                f"mode={self.mode!r}, format={self.checkpoint_format!r}")

    # ---- keeping the plan current --------------------------------------------
    def _invalidate(self):
        """Drop the cached C arguments; rebuild the w4a16 tables when in that mode."""
        d = self.__dict__
        d["_plan"] = None
        if "_mode" not in d or "_buffers" not in d or "weight_scale" not in self._buffers:
            return
        if d["_w4a16"] and self._buffers["weight_scale"].device.type != "meta":
            self._buffers["_w4a16_scales"] = self._row_major_scales()
            self._buffers["_w4a16_lut"] = torch.from_numpy(_api.e2m1_table()).to(
                self.weight_scale.device)
        else:
            self._buffers["_w4a16_scales"] = self._buffers["_w4a16_lut"] = None

    def __getstate__(self):
        """For copy.deepcopy and pickle: the C argument structs hold addresses
        (and ctypes pointers do not pickle); the copy builds its own."""
        state = self.__dict__.copy()
        state["_plan"] = None
        return state

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if name in _PLANNED:
            self._invalidate()

    def register_buffer(self, name, tensor, persistent=True):
        super().register_buffer(name, tensor, persistent)
        if name in _PLANNED:
            self.__dict__["_plan"] = None

    def _apply(self, fn, recurse=True):
        """Module.to / .cuda / .half ...: the quantized tensors move with the
        model but keep their dtypes (a .to(torch.bfloat16) of the model must
        not turn E4M3 scales or FP32 scales into BF16 numbers)."""
        # every buffer's dtype is the format's (the bias is a Parameter)
        before = {n: b for n, b in self._buffers.items() if b is not None}
        super()._apply(fn, recurse)
        for n, old in before.items():
            new = self._buffers[n]
            if new.dtype != old.dtype:
                self._buffers[n] = old.to(new.device)
        self._invalidate()
        return self

    # ---- state dict --------------------------------------------------------
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        fmt = _format(self.checkpoint_format)
        if fmt.native:
            return super()._save_to_state_dict(destination, prefix, keep_vars)
        for name, t in fmt.to_state(self).items():
            destination[prefix + name] = t if keep_vars else t.detach()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        fmt = _format(self.checkpoint_format)
        if fmt.native:
            # stored dtypes and scalar shapes differ harmlessly: E4M3 scales as
            # U8 bytes (a bit copy, not a numeric conversion), [] or [1] scalars
            for name in ("weight_scale", "weight_scale_2", "input_scale"):
                mine, theirs = self._buffers.get(name), state_dict.get(prefix + name)
                if mine is None or not isinstance(theirs, torch.Tensor):
                    continue
                if {mine.dtype, theirs.dtype} == {torch.uint8, _E4M3}:
                    theirs = theirs.view(mine.dtype)
                if mine.numel() == 1 and theirs.numel() == 1:
                    theirs = theirs.reshape(mine.shape)
                state_dict[prefix + name] = theirs
            super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                          missing_keys, unexpected_keys, error_msgs)
        else:
            names = fmt.state_names(self)
            present = {n: state_dict[prefix + n] for n in names if prefix + n in state_dict}
            missing_keys.extend(prefix + n for n in names if n not in present)
            if strict:
                mine = set(names)
                unexpected_keys.extend(
                    k for k in state_dict if k.startswith(prefix) and
                    "." not in k[len(prefix):] and k[len(prefix):] not in mine)
            if len(present) == len(names):
                try:
                    tensors = fmt.from_state(self, present)
                except (ValueError, TypeError, KeyError) as e:
                    error_msgs.append(f"{prefix}: {fmt.name} layer: {e}")
                else:
                    self._copy_in(tensors, prefix, error_msgs,
                                  local_metadata.get("assign_to_params_buffers", False))
        self._invalidate()

    def _copy_in(self, tensors, prefix, error_msgs, assign):
        """Copy a format's from_state() result into the layer's tensors, in
        place (assign: in their stead, as load_state_dict(assign=True) does),
        all of them or (on a mismatch, reported) none: E4M3 scales and their
        U8 bytes are bit copies, one-element scalars take the layer's shape
        ([] or [1])."""
        pairs = []
        for name, t in tensors.items():
            target = getattr(self, name, None)
            if isinstance(target, torch.Tensor) and t.dtype in (torch.uint8, _E4M3) and \
                    target.dtype in (torch.uint8, _E4M3):
                t = t.view(target.dtype)
            if isinstance(target, torch.Tensor) and target.numel() == 1 and t.numel() == 1:
                t = t.reshape(target.shape)
            if not isinstance(target, torch.Tensor) or tuple(target.shape) != tuple(t.shape):
                error_msgs.append(f"{prefix}{name}: {list(t.shape)} does not fit this layer")
                return
            pairs.append((target, t))
        if assign:
            for name, (_, t) in zip(tensors, pairs):
                if name in self._parameters:
                    self._parameters[name] = nn.Parameter(t, requires_grad=False)
                else:
                    self._buffers[name] = t
            return
        with torch.no_grad():
            for target, t in pairs:
                target.copy_(t)

    # ---- forward -----------------------------------------------------------
    def forward(self, x):
        if self._w4a16:
            return self._forward_w4a16(x)
        if not _is_compiling() and type(x) in _PLAIN and not _function_mode_on() and \
                not _dispatch_depth():
            if _grad_enabled():
                self._refuse_autograd(x)
            plan = self._plan
            if plan is None or plan.index != x.get_device() or (
                    plan.bias_src is not None and self._stale_bias(plan)):
                plan = self._new_plan(x)
            out = plan.run(x)
            return out if out.dtype is x.dtype else out.to(x.dtype)
        return self._forward_op(x)

    def _refuse_autograd(self, x):
        if x.requires_grad:
            raise _autograd_error("x")
        b = self._parameters.get("bias")
        if b is not None and b.requires_grad:
            raise _autograd_error("the bias")

    @staticmethod
    def _stale_bias(plan):
        """The plan's float32 bias copy cannot serve this call: the bias changed
        since, or a CUDA graph is being captured (the graph would keep the
        copy's address, which the plan may drop later)."""
        return plan.bias_src._version != plan.bias_version or \
            (plan.index >= 0 and _api._capturing())

    def _kernel_bias(self):
        """(the float32 [rows] bias the kernel reads, the Parameter it was
        converted from or None when it is read in place)."""
        b = self._parameters.get("bias")
        if b is None:
            return None, None
        rows = self.weight.shape[0]
        b = b.detach()
        if b.dtype == torch.float32 and b.shape[0] == rows and b.is_contiguous():
            return b, None
        return F.pad(b.to(torch.float32), (0, rows - b.shape[0])), self._parameters["bias"]

    def _new_plan(self, x):
        dev = x.device
        b = self._buffers
        bias, src = self._kernel_bias()
        ptrs, rows, cols = _check_layer_tensors(dev, b["weight"], b["weight_scale"],
                                                b["weight_scale_2"], b["input_scale"], bias,
                                                self.in_features)
        iscale = None if b["input_scale"] is None else b["input_scale"].data_ptr()
        plan = _make_plan(dev, ptrs, rows, cols, self.in_features, iscale,
                          None if bias is None else bias.data_ptr(), self._variant_code,
                          self.out_features, self._threads)
        plan.keep = bias
        keep_plan = True
        if src is not None:
            if src.is_inference():  # no version counter: convert on every call
                keep_plan = False
            else:
                plan.bias_src, plan.bias_version = src, src._version
            # a copy made inside a graph capture is filled only by the replay
            keep_plan = keep_plan and not (dev.type == "cuda" and _api._capturing())
        if keep_plan:
            self.__dict__["_plan"] = plan
        return plan

    def _forward_op(self, x):
        """The call as torch.compile and other tracers see it: the custom op."""
        b = self.bias
        if b is not None:
            rows = self.weight.shape[0]
            if b.dtype != torch.float32:
                b = b.to(torch.float32)
            if b.shape[0] != rows:
                b = F.pad(b, (0, rows - b.shape[0]))
        out = torch.ops.nvfp4.linear(x, self.weight, self.weight_scale, self.weight_scale_2,
                                     self.input_scale, b, self._variant_code, self._threads)
        if self.out_features != out.shape[-1]:
            out = out.narrow(-1, 0, self.out_features).contiguous()
        return out if out.dtype == x.dtype else out.to(x.dtype)

    # ---- W4A16 -------------------------------------------------------------
    def _row_major_scales(self):
        """The block scales untiled to row-major [rows, cols/16] bytes (the
        library's nvfp4_scales_untile, on a host copy), on the weight's device."""
        ws = self.weight_scale
        rows, cols = self.weight.shape[0], 2 * self.weight.shape[1]
        src = np.ascontiguousarray(ws.detach().view(torch.uint8).cpu().numpy())
        dst = np.empty((rows, cols // 16), dtype=np.uint8)
        _lib.lib().nvfp4_scales_untile(A.ptr(dst), A.ptr(src), rows, cols)
        return torch.from_numpy(dst).to(ws.device)

    def dequantize(self, dtype=torch.float32):
        """The weight's values [out_features, in_features] in `dtype`:
        FP32(e2m1 * e4m3) * weight_scale_2 in FP32, then rounded to dtype
        (nvfp4_dequantize's formula, in torch ops on the weight's device)."""
        scales, lut = self._w4a16_scales, self._w4a16_lut
        if scales is None:
            scales = self._row_major_scales()
            lut = torch.from_numpy(_api.e2m1_table()).to(scales.device)
        w = _api.dequantize_rows(self.weight, scales, self.weight_scale_2, lut)
        return w[:self.out_features, :self.in_features].to(dtype)

    def _forward_w4a16(self, x):
        w = self.dequantize(x.dtype)
        b = self.bias
        if b is not None:  # a checkpoint's bias may cover the padding rows
            b = b[:self.out_features].to(x.dtype)
        return F.linear(x, w, b)


# --------------------------------------------------------------------------
# whole models
# --------------------------------------------------------------------------
def _matcher(spec, what):
    """A predicate (name, module) -> bool from None, a glob or a list of globs
    (fnmatch on the module's qualified name), or a callable."""
    if spec is None:
        return None
    if callable(spec):
        return spec
    if isinstance(spec, str):
        spec = [spec]
    try:
        globs = list(spec)
    except TypeError:
        raise TypeError(f"{what}: a glob, a list of globs or a callable(name, module), not "
                        f"{type(spec).__name__}") from None
    if not all(isinstance(g, str) for g in globs):
        raise TypeError(f"{what}: every pattern must be a str")
    return lambda name, module: any(fnmatch.fnmatchcase(name, g) for g in globs)


def _replace(model, name, new):
    parent, _, leaf = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, leaf, new)


def quantize_model(model, include=None, exclude=None, *, variant="eager", input_scale=None,
                   mode="w4a4", threads=0):
    """Replace nn.Linear modules of `model` by NVFP4Linear.from_linear, in place.

    Args:
        model: an nn.Module (its Linear children anywhere below it).
        include: which Linears (default: all): a glob on the qualified name
            ("model.layers.*"), a list of globs, or callable(name, module).
        exclude: which to leave alone, same forms ("lm_head").
        variant, mode, threads: see NVFP4Linear.
        input_scale: None / "dynamic", a number for every layer, or a dict
            {name: scale} (layers absent from it: dynamic).
    Returns:
        the names of the replaced modules, in order.
    A Linear reachable under several names becomes one NVFP4Linear.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"quantize_model: an nn.Module, not {type(model).__name__}")
    inc, exc = _matcher(include, "include"), _matcher(exclude, "exclude")
    if isinstance(model, nn.Linear):
        raise TypeError("quantize_model: the model itself is an nn.Linear; use "
                        "NVFP4Linear.from_linear")
    made, names = {}, []
    for name, mod in list(model.named_modules(remove_duplicate=False)):
        if not isinstance(mod, nn.Linear):
            continue
        if (inc is not None and not inc(name, mod)) or (exc is not None and exc(name, mod)):
            continue
        new = made.get(id(mod))
        if new is None:
            scale = input_scale.get(name) if isinstance(input_scale, dict) else input_scale
            new = made[id(mod)] = NVFP4Linear.from_linear(mod, variant=variant,
                                                          input_scale=scale, mode=mode,
                                                          threads=threads)
        _replace(model, name, new)
        names.append(name)
    return names


def _open_checkpoints(checkpoint):
    """_Checkpoints for a path or a list of paths (each opened on its own)."""
    paths = [checkpoint] if isinstance(checkpoint, (str, bytes, os.PathLike)) else \
        list(checkpoint)
    if not paths:
        raise ValueError("load_quantized: no checkpoint given")
    opened = []
    try:
        for p in paths:
            opened.append(_Checkpoint(p))
    except BaseException:
        for ck in opened:
            ck.close()
        raise
    return opened


def _set_tensor(model, key, value):
    """Put `value` where the state-dict entry `key` lives (replacing a meta
    tensor): a Parameter keeps its class and requires_grad."""
    owner_name, _, leaf = key.rpartition(".")
    owner = model.get_submodule(owner_name) if owner_name else model
    old = owner._parameters.get(leaf)
    if old is not None:
        owner._parameters[leaf] = nn.Parameter(value, requires_grad=old.requires_grad)
    else:
        owner._buffers[leaf] = value


def _plain_value(ck, name, want):
    """(the checkpoint's tensor `name` for a model entry of dtype `want`, None)
    or (None, why it cannot be loaded): a type torch lacks, or FP8 values
    whose scale a plain copy would drop."""
    try:
        value = ck.tensor(name)
    except ValueError as e:
        return None, str(e)
    if value.dtype.is_floating_point and value.dtype.itemsize == 1 and want != value.dtype:
        return None, (f"{ck.path}: '{name}' is {value.dtype}, an FP8 layer's weight whose values "
                      f"need its scale; copied into the model's {want} it would be wrong "
                      "(load_quantized loads NVFP4 layers and plain tensors)")
    return value, None


def load_quantized(model, checkpoint, *, prefix="", strict=True, device=None, variant="eager",
                   mode="w4a4", threads=0):
    """Load a checkpoint into `model`: every nn.Linear (or NVFP4Linear) whose
    weight the checkpoint stores as NVFP4 becomes NVFP4Linear.from_checkpoint
    (kept in the checkpoint's format for state_dict()), and every other
    state-dict entry found in the checkpoint is copied in (converted to the
    entry's dtype).

    Args:
        model: an nn.Module; its tensors may be on the meta device (then
            `device` says where the loaded ones go).
        checkpoint: a path nvfp4_ckpt_open takes -- a .safetensors file, a
            checkpoint directory (model.safetensors, or shards and their
            index) or a .gguf file; the format is detected there -- or a
            list of such paths (each opened on its own; the first that has a
            name wins).
        prefix: prepended to the model's names to find them in the file.
        strict: raise when a model entry is not in the checkpoint, cannot be
            loaded (FP8 weights, ggml quantized types), or a checkpoint
            tensor (under prefix) is not used.
        device: where new tensors go (default: each module's own device).
        variant, mode, threads: see NVFP4Linear.
    Returns:
        {"quantized": [module names], "loaded": [state-dict keys],
         "missing": [keys not loaded], "unused": [checkpoint names]}.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"load_quantized: an nn.Module, not {type(model).__name__}")
    cks = _open_checkpoints(checkpoint)
    try:
        where, nvfp4_at = {}, {}
        for ck in cks:
            for n in ck.entries():
                where.setdefault(n, ck)
            for w in ck.nvfp4_weights():
                nvfp4_at.setdefault(w, ck)
        report = {"quantized": [], "loaded": [], "missing": [], "unused": []}
        used = set()
        # the entries before any layer is replaced: the others are the same
        # tensors, and no layer's state is converted only to be skipped
        entries = model.state_dict(keep_vars=True)
        for name, mod in list(model.named_modules()):
            if not name or not isinstance(mod, (nn.Linear, NVFP4Linear)):
                continue
            key = prefix + name
            ck = nvfp4_at.get(key + ".weight")
            if ck is None:
                ck = next((c for c in cks if c.claims(key)), None)
                if ck is None:
                    continue
                ck.load_layer(key)  # an incomplete layer: the library's error names the piece
            dev = device
            if dev is None:
                dev = mod.weight.device
                if dev.type == "meta":
                    raise ValueError(f"load_quantized: {name} is on the meta device; pass device=")
            new = NVFP4Linear._from_open(ck, key, mod.in_features, mod.out_features, variant,
                                         mode, threads, dev)
            _replace(model, name, new)
            used.update(n for n in ck.layer_pieces(key).values() if where.get(n) is ck)
            report["quantized"].append(name)
        quantized = tuple(n + "." for n in report["quantized"])
        loaded_ids, refused = set(), []
        for k, t in entries.items():
            if k.startswith(quantized):
                continue
            ck = where.get(prefix + k)
            if ck is None:
                continue
            value, why = _plain_value(ck, prefix + k, t.dtype)
            if value is None:
                refused.append(why)
                continue
            if tuple(value.shape) != tuple(t.shape):
                raise ValueError(f"load_quantized: {prefix + k} is {list(value.shape)} in "
                                 f"{ck.path}; the model's {k} is {list(t.shape)}")
            if t.device.type == "meta":
                if device is None:
                    raise ValueError(f"load_quantized: {k} is on the meta device; pass device=")
                _set_tensor(model, k, value.to(device=device, dtype=t.dtype))
            else:
                with torch.no_grad():
                    t.copy_(value)
            loaded_ids.add(id(t))
            used.add(prefix + k)
            report["loaded"].append(k)
        # an entry that shares its tensor with a loaded one (tied weights) is loaded
        report["missing"] = [k for k, t in entries.items()
                             if not k.startswith(quantized) and prefix + k not in used and
                             id(t) not in loaded_ids]
        report["unused"] = sorted(n for n in where if n.startswith(prefix) and n not in used)
        if strict and (report["missing"] or report["unused"]):
            parts = []
            for what in ("missing", "unused"):
                names = report[what]
                if names:
                    parts.append(f"{len(names)} {what} ({', '.join(names[:5])}"
                                 f"{', ...' if len(names) > 5 else ''})")
            raise RuntimeError("load_quantized: " + "; ".join(parts + refused[:3]) +
                               " -- pass strict=False to load what matches")
        return report
    finally:
        for ck in cks:
            ck.close()
