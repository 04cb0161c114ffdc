"""nvfp4: bit-exact NVFP4 quantization and GEMMs from NumPy and PyTorch.

    import nvfp4
    q = nvfp4.quantize(x)                       # ComfyUI's bytes, bit for bit
    raw, out = nvfp4.matmul(q, w, model="sm90")  # the H200's tensor-core bits
    layer = nvfp4.load_layer("model.safetensors", "blocks.0.attn.qkv")
    y = nvfp4.linear(x, layer)
    nvfp4.detect_format("Llama-FP4")            # comfyui, modelopt, compressed-tensors, gguf

NumPy arrays (BF16 as ml_dtypes.bfloat16) and torch tensors (CPU and CUDA)
are passed to libnvfp4 by pointer (ctypes; see nvfp4/_lib.py for why).
docs/PYTHON.md in the repository describes everything; nvfp4.comfy registers
the library as a comfy-kitchen backend.
"""
from ._api import (
    Layer,
    NVFP4Tensor,
    cuda_available,
    explain,
    library_path,
    linear,
    matmul,
    per_tensor_scale,
    quantize,
)
from .formats import (
    StoredTensor,
    convert,
    detect_format,
    load_layer,
    quantize_format,
    read_tensor,
)
from .errors import (
    CudaError,
    Error,
    FileIOError,
    InternalError,
    InvalidArgumentError,
    MalformedError,
    NoDeviceError,
    NonFiniteWarning,
    NotFoundError,
    OutOfMemoryError,
    UnsupportedError,
)

__version__ = "0.1.0"

__all__ = [
    "Layer", "NVFP4Tensor", "cuda_available", "explain", "library_path", "linear", "load_layer",
    "matmul", "per_tensor_scale", "quantize",
    "StoredTensor", "convert", "detect_format", "quantize_format", "read_tensor",
    "Error", "CudaError", "FileIOError", "InternalError", "InvalidArgumentError", "MalformedError",
    "NoDeviceError", "NonFiniteWarning", "NotFoundError", "OutOfMemoryError", "UnsupportedError",
]
