"""NVFP4 checkpoints of every format: ComfyUI, NVIDIA ModelOpt, compressed-tensors
(llm-compressor) and llama.cpp's GGUF, through libnvfp4's one reader
(include/nvfp4.h, "Checkpoint formats"; docs/FORMATS.md has the conventions).

    import nvfp4
    nvfp4.detect_format("Llama-3.1-8B-Instruct-FP4")      # 'modelopt'
    layer = nvfp4.load_layer("Llama-3.1-8B-Instruct-FP4", "model.layers.0.mlp.down_proj")
    stored = nvfp4.read_tensor("model.gguf", "blk.0.ffn_down.weight")
    nvfp4.convert("ckpt-modelopt", "ckpt-ct", "compressed-tensors", allow_rescale=True)

A path is a .safetensors file, a checkpoint directory (model.safetensors, or
shards listed by model.safetensors.index.json, with config.json /
hf_quant_config.json beside them) or a .gguf file.
"""
import ctypes
import os

import numpy as np

from . import _arrays as A
from . import _lib
from ._api import Layer, NVFP4Tensor, _COwner, _roundup
from .errors import check

__all__ = ["FORMATS", "StoredTensor", "convert", "detect_format", "load_layer", "quantize_format",
           "read_tensor"]

FORMATS = tuple(_lib.FORMATS)


def _l():
    return _lib.lib()


def _path(path, what="path"):
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"{what} must be a path, not {type(path).__name__}")
    return os.fsencode(path)


def _format_code(name, what):
    if name not in _lib.FORMATS:
        raise ValueError(f"{what} must be one of {', '.join(repr(f) for f in FORMATS)}; got {name!r}")
    return _lib.FORMATS[name]


def detect_format(path, evidence=False):
    """The NVFP4 format of the checkpoint at path: 'comfyui', 'modelopt',
    'compressed-tensors', 'gguf', or None when it holds no NVFP4 tensors.
    With evidence=True, (format, why) where why says what decided it."""
    code = ctypes.c_int()
    why = ctypes.create_string_buffer(512)
    check(_l().nvfp4_detect_format(ctypes.byref(code), _path(path), why, len(why)),
          "nvfp4_detect_format")
    name = _lib.FORMAT_NAMES.get(code.value)
    return (name, why.value.decode("utf-8", "replace")) if evidence else name


def _tensor_from(t):
    """An NVFP4Tensor over the arrays of a hi-first, tiled nvfp4_tensor the
    library allocated (freed with the last view)."""
    owner = _COwner(t)
    rows, cols = t.rows, t.cols
    qdata = A.owned_bytes(t.codes, rows * cols // 2, owner).reshape(rows, cols // 2)
    nscale = _l().nvfp4_scales_bytes(rows, cols, _lib.SCALES_TILED)
    scales = A.owned_bytes(t.scales, nscale, owner).reshape(_roundup(rows, 128), _roundup(cols // 16, 4))
    return qdata, scales, np.float32(t.per_tensor_scale)


def load_layer(path, prefix, device=None):
    """Read one NVFP4 linear layer from a checkpoint of any format.

    The format is detected (detect_format); the layer is PREFIX.weight with its
    scales as the format stores them, the input scale and PREFIX.bias when
    present, through the library's validating reader (nvfp4_load_layer),
    with the rows the file records for a weight `nvfp4 quantize` padded
    (nvfp4_ckpt_rows); the weight's qdata holds its rows padded to 16.
    The weight comes back as the library computes with it: codes hi-first,
    block scales 128x4 tiled, the per-tensor scale a multiplier
    (compressed-tensors' global scale g gives FP32(1 / g)); the input scale
    likewise a multiplier.  read_tensor() gives the stored bytes instead.

    Args:
        path: a .safetensors file, a checkpoint directory or a .gguf file.
        prefix: the layer's name ("model.layers.0.mlp.down_proj"); a trailing
            ".weight" is accepted and dropped.
        device: None for NumPy arrays, else a torch device ("cpu", "cuda",
            "cuda:1") to put the tensors on.
    Returns:
        Layer.
    """
    if not isinstance(prefix, str) or not prefix:
        raise TypeError("load_layer: prefix must be a non-empty str (the layer name)")
    if prefix.endswith(".weight"):
        prefix = prefix[: -len(".weight")]
    layer = _lib.Layer()
    check(_l().nvfp4_load_layer(ctypes.byref(layer), _path(path), prefix.encode()), "nvfp4_load_layer")
    return _layer_from(layer, prefix, device)


def _layer_from(layer, prefix, device=None):
    """A Layer owning the arrays of the nvfp4_layer the library filled (the
    weight's freed with its last view, the bias copied and freed here)."""
    t = _lib.Tensor()
    ctypes.memmove(ctypes.byref(t), ctypes.byref(layer.weight), ctypes.sizeof(t))
    rows = t.rows
    bias = None
    if layer.bias:
        bias = np.ctypeslib.as_array(ctypes.cast(layer.bias, _lib.c_float_p), shape=(rows,)).copy()
        _l().nvfp4_free(layer.bias)
    qdata, scales, pts = _tensor_from(t)  # owns the weight's arrays from here
    if rows % 16:
        # qdata holds the rows padded to 16 (zero codes), as quantize()'s and
        # ComfyUI's files do: the GPU kernels take N in multiples of 16
        padded = np.zeros((_roundup(rows, 16), qdata.shape[1]), dtype=np.uint8)
        padded[:rows] = qdata
        qdata = padded
    input_scale = float(layer.input_scale) if layer.has_input_scale else None
    if device is None:
        weight = NVFP4Tensor(qdata, scales, pts, rows=rows)
    else:
        torch = A.torch_module()
        if torch is None:
            import torch  # noqa: F401  (device= asks for torch tensors)
            torch = A.torch_module()
        dev = torch.device(device)
        weight = NVFP4Tensor(torch.from_numpy(qdata).to(dev),
                             torch.from_numpy(scales).view(torch.float8_e4m3fn).to(dev),
                             torch.tensor(float(pts), dtype=torch.float32).to(dev), rows=rows)
        if bias is not None:
            bias = torch.from_numpy(bias).to(dev)
    return Layer(weight, input_scale, bias, prefix)


class StoredTensor:
    """An NVFP4 tensor as its format stores it (nvfp4_ckpt_tensor).

    Attributes:
        format: 'comfyui', 'modelopt', 'compressed-tensors' or 'gguf'.
        rows, cols: the shape; cols a multiple of 16 (stored_cols may be less:
            compressed-tensors keeps a K that is not).
        codes: uint8 [rows, cols/2], the stored bytes: ComfyUI's hi-first,
            ModelOpt's and compressed-tensors' lo-first; GGUF's blocks are
            unpacked to lo-first (each code is the stored nibble).
        scales: uint8, the stored block-scale bytes: ComfyUI's 128x4 tiles
            [roundup(rows,128), roundup(cols/16,4)], the others [rows, cols/16]
            (GGUF's UE4M3 bytes as they are).
        tensor_scale: the per-tensor scale's stored value (float32): a
            multiplier (weight_scale_2, GGUF's L.scale) or, for
            compressed-tensors, the divisor weight_global_scale; None when
            absent (GGUF without L.scale).
        input_scale: the layer's input scale as stored, or None.
        multiplier: what the GEMM multiplies by (FP32(1 / g) for a divisor).
    """

    __slots__ = ("format", "rows", "cols", "stored_cols", "codes", "scales", "tensor_scale",
                 "input_scale", "multiplier")

    def __init__(self, ct):
        t = ct.t
        owner = _CkptOwner(ct)
        self.format = _lib.FORMAT_NAMES[ct.format]
        self.rows, self.cols, self.stored_cols = int(t.rows), int(t.cols), int(ct.stored_cols)
        self.codes = A.owned_bytes(t.codes, self.rows * self.cols // 2, owner).reshape(self.rows, -1)
        nscale = _l().nvfp4_scales_bytes(t.rows, t.cols, t.scale_layout)
        shape = (_roundup(self.rows, 128), _roundup(self.cols // 16, 4)) \
            if t.scale_layout == _lib.SCALES_TILED else (self.rows, self.cols // 16)
        self.scales = A.owned_bytes(t.scales, nscale, owner).reshape(shape)
        self.tensor_scale = np.float32(ct.tensor_scale) if ct.has_tensor_scale else None
        self.input_scale = np.float32(ct.input_scale) if ct.has_input_scale else None
        self.multiplier = np.float32(t.per_tensor_scale)

    def __repr__(self):
        return (f"StoredTensor({self.format}, {self.rows} x {self.stored_cols}, "
                f"tensor_scale={self.tensor_scale!r}, input_scale={self.input_scale!r})")


class _CkptOwner:
    """Frees an nvfp4_ckpt_tensor the library allocated once no view uses it."""
    __slots__ = ("ct",)

    def __init__(self, ct):
        self.ct = ct

    def __del__(self):
        handle = _lib._lib
        if handle is not None:
            handle.nvfp4_ckpt_tensor_free(ctypes.byref(self.ct))


def read_tensor(path, name, format=None):
    """The NVFP4 tensor `name` (its weight name, "L.weight", whatever the
    format calls the stored pieces) exactly as the checkpoint stores it:
    a StoredTensor.  format: take the checkpoint as this format instead of
    detecting it."""
    handle = ctypes.c_void_p()
    code = 0 if format is None else _format_code(format, "format")
    check(_l().nvfp4_ckpt_open(ctypes.byref(handle), _path(path), code), "nvfp4_ckpt_open")
    try:
        ct = _lib.CkptTensor()
        check(_l().nvfp4_ckpt_read(ctypes.byref(ct), handle, str(name).encode()), "nvfp4_ckpt_read")
    finally:
        _l().nvfp4_ckpt_close(handle)
    return StoredTensor(ct)


def quantize_format(x, format, tensor_scale=None, threads=0):
    """Quantize a 2-D BF16/F16/F32 array the way `format`'s own tool does, bit
    for bit (nvfp4_quantize_format): 'modelopt' (NVFP4QTensor.quantize),
    'compressed-tensors' (llm-compressor's observer and compressor; its
    arithmetic in x's dtype) or 'comfyui' (comfy-kitchen's eager quantizer).
    tensor_scale: the per-tensor scale as the format stores it
    (weight_scale_2, or compressed-tensors' weight_global_scale); None
    computes it the tool's way.  Returns a StoredTensor."""
    fmt = _format_code(format, "format")
    A.check_array(x, "x", ndim=2)
    if A.is_torch(x):
        if x.device.type != "cpu":
            raise ValueError(f"x is on {x.device}; quantize_format runs on the CPU")
        x = x.detach().contiguous()
    else:
        x = np.ascontiguousarray(x)
    code = A.float_dtype_code(x)
    if code is None:
        raise TypeError(f"x must be bfloat16, float16 or float32, not {A.dtype_name(x)}")
    scale = None
    if tensor_scale is not None:
        scale = ctypes.c_float(np.float32(A.scalar_value(tensor_scale, "tensor_scale")))
    ct = _lib.CkptTensor()
    check(_l().nvfp4_quantize_format(ctypes.byref(ct), A.ptr(x), code, int(x.shape[0]), int(x.shape[1]),
                                     fmt, ctypes.byref(scale) if scale is not None else None,
                                     int(threads)), "nvfp4_quantize_format")
    return StoredTensor(ct)


def convert(src, dst, to, allow_rescale=False, from_format=None):
    """Convert the checkpoint at src to format `to` at dst (nvfp4_convert):
    exactly, or not at all (UnsupportedError says why) unless allow_rescale,
    which rounds what the target cannot hold and notes it.  dst: a *.gguf
    path, a *.safetensors path or a directory.  Returns the notes (what was
    rounded, padded or dropped), a list of str."""
    opts = _lib.ConvertOptions()
    opts.to = _format_code(to, "to")
    setattr(opts, "from", 0 if from_format is None else _format_code(from_format, "from_format"))
    opts.allow_rescale = int(bool(allow_rescale))
    notes = []

    def on_note(_ctx, line):
        notes.append(line.decode("utf-8", "replace"))

    keep = _lib.LINE_FN(on_note)
    opts.note = keep
    check(_l().nvfp4_convert(_path(src, "src"), _path(dst, "dst"), ctypes.byref(opts)), "nvfp4_convert")
    return notes
