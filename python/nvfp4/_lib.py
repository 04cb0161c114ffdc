"""Loading libnvfp4.so and declaring its C API (include/nvfp4.h) for ctypes.

Why ctypes: the package then needs no compiler and no Python headers at
install or import time, works unchanged on every CPython 3.x (one .so, no ABI
tag to match) and talks to the very library the CLI and the C tests use, so
there is one implementation of every formula.  The calls are few and coarse
(one per quantization or GEMM) and ctypes releases the GIL during each; the
hot paths keep ctypes' own cost near a microsecond (fast() below, argument
structs reused per thread in _api.py).

Where the library comes from, first match wins:
  NVFP4_LIB       path of libnvfp4.so (or a directory holding it)
  the package     libnvfp4.so bundled by `pip install ./python`
  the source tree ../../build/libnvfp4.so relative to this file (PYTHONPATH=python)
NVFP4_PRELOAD: os.pathsep-separated libraries (or directories, whose lib*.so*
files are all taken) loaded first with RTLD_GLOBAL, for dependencies the
machine lacks, e.g. NVFP4_PRELOAD=build/libjansson.so.4 where libjansson is
not installed.
"""
import ctypes
import os
import threading

_HERE = os.path.dirname(os.path.abspath(__file__))
LIB_NAME = "libnvfp4.so"

# --------------------------------------------------------------------------
# enums (values from include/nvfp4.h)
# --------------------------------------------------------------------------
OK = 0
STATUS_NAMES = {
    0: "ok", 1: "invalid argument", 2: "out of memory", 3: "I/O error",
    4: "malformed file", 5: "not found", 6: "unsupported", 7: "no device",
    8: "CUDA error", 9: "internal error",
}
DTYPE_U8, DTYPE_F8_E4M3, DTYPE_BF16, DTYPE_F16, DTYPE_F32 = 2, 10, 12, 13, 14
HI_FIRST, LO_FIRST = 0, 1
SCALES_TILED, SCALES_ROW_MAJOR = 0, 1
VARIANTS = {"eager": 0, "cuda": 1}
MODELS = {"sm90": 0, "exact": 1, "sm120": 2}
OPERAND_F16, OPERAND_BF16 = 0, 1
MAX_K_SLICES = 4096
ST_MAX_DIMS = 8
FORMATS = {"comfyui": 1, "modelopt": 2, "compressed-tensors": 3, "gguf": 4}
FORMAT_NAMES = {v: k for k, v in FORMATS.items()}
PACK_HI_FIRST, PACK_LO_FIRST, PACK_GGML_HALVES = 0, 1, 2       # nvfp4_code_packing
STORE_TILED, STORE_ROW_MAJOR, STORE_GGML_BLOCKS = 0, 1, 2      # nvfp4_scale_store
SCALE_MULTIPLIES, SCALE_DIVIDES = 0, 1                         # nvfp4_scale_direction

c_int64_p = ctypes.POINTER(ctypes.c_int64)
c_float_p = ctypes.POINTER(ctypes.c_float)
c_uint16_p = ctypes.POINTER(ctypes.c_uint16)
c_uint8_p = ctypes.POINTER(ctypes.c_uint8)


class Tensor(ctypes.Structure):
    """nvfp4_tensor"""
    _fields_ = [
        ("rows", ctypes.c_int64),
        ("cols", ctypes.c_int64),
        ("codes", ctypes.c_void_p),
        ("scales", ctypes.c_void_p),
        ("per_tensor_scale", ctypes.c_float),
        ("nibble_order", ctypes.c_int),
        ("scale_layout", ctypes.c_int),
    ]


class GemmArgs(ctypes.Structure):
    """nvfp4_gemm_args"""
    _fields_ = [
        ("a", ctypes.POINTER(Tensor)),
        ("b", ctypes.POINTER(Tensor)),
        ("bias", ctypes.c_void_p),
        ("raw", ctypes.c_void_p),
        ("out", ctypes.c_void_p),
        ("model", ctypes.c_int),
        ("nthreads", ctypes.c_int),
        ("k_slices", ctypes.c_int),
    ]


class LinearArgs(ctypes.Structure):
    """nvfp4_linear_args"""
    _fields_ = [
        ("x", ctypes.c_void_p),
        ("x_dtype", ctypes.c_int),
        ("m", ctypes.c_int64),
        ("k", ctypes.c_int64),
        ("weight", ctypes.POINTER(Tensor)),
        ("input_scale", ctypes.c_void_p),
        ("variant", ctypes.c_int),
        ("bias", ctypes.c_void_p),
        ("raw", ctypes.c_void_p),
        ("out", ctypes.c_void_p),
        ("model", ctypes.c_int),
        ("nthreads", ctypes.c_int),
        ("x_quantized", ctypes.POINTER(Tensor)),
        ("k_slices", ctypes.c_int),
    ]


class CudaQuantizeArgs(ctypes.Structure):
    """nvfp4_cuda_quantize_args (device pointers)"""
    _fields_ = [
        ("x", ctypes.c_void_p),
        ("m", ctypes.c_int64),
        ("k", ctypes.c_int64),
        ("input_scale", ctypes.c_void_p),
        ("variant", ctypes.c_int),
        ("codes", ctypes.c_void_p),
        ("scales", ctypes.c_void_p),
        ("per_tensor_scale", ctypes.c_void_p),
        ("stream", ctypes.c_void_p),
    ]


class CudaOperand(ctypes.Structure):
    """nvfp4_cuda_operand (device pointers)"""
    _fields_ = [
        ("codes", ctypes.c_void_p),
        ("scales", ctypes.c_void_p),
        ("per_tensor_scale", ctypes.c_void_p),
        ("rows", ctypes.c_int64),
        ("cols", ctypes.c_int64),
    ]


class CudaLinearArgs(ctypes.Structure):
    """nvfp4_cuda_linear_args (device pointers)"""
    _fields_ = [
        ("x", ctypes.c_void_p),
        ("m", ctypes.c_int64),
        ("k", ctypes.c_int64),
        ("weight", ctypes.POINTER(CudaOperand)),
        ("input_scale", ctypes.c_void_p),
        ("variant", ctypes.c_int),
        ("bias", ctypes.c_void_p),
        ("raw", ctypes.c_void_p),
        ("out", ctypes.c_void_p),
        ("x_codes", ctypes.c_void_p),
        ("x_scales", ctypes.c_void_p),
        ("x_scale", ctypes.c_void_p),
        ("stream", ctypes.c_void_p),
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_size_t),
        ("k_slices", ctypes.c_int),
    ]


class CudaGemmArgs(ctypes.Structure):
    """nvfp4_cuda_gemm_args (device pointers)"""
    _fields_ = [
        ("a", CudaOperand),
        ("b", CudaOperand),
        ("bias", ctypes.c_void_p),
        ("raw", ctypes.c_void_p),
        ("out", ctypes.c_void_p),
        ("stream", ctypes.c_void_p),
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_size_t),
        ("k_slices", ctypes.c_int),
    ]


class StTensor(ctypes.Structure):
    """nvfp4_st_tensor"""
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("shape", ctypes.c_int64 * ST_MAX_DIMS),
        ("data", ctypes.c_void_p),
        ("nbytes", ctypes.c_size_t),
    ]


class Layer(ctypes.Structure):
    """nvfp4_layer"""
    _fields_ = [
        ("weight", Tensor),
        ("input_scale", ctypes.c_float),
        ("has_input_scale", ctypes.c_int),
        ("bias", ctypes.c_void_p),
    ]


class CkptTensor(ctypes.Structure):
    """nvfp4_ckpt_tensor"""
    _fields_ = [
        ("t", Tensor),
        ("format", ctypes.c_int),
        ("stored_cols", ctypes.c_int64),
        ("tensor_scale", ctypes.c_float),
        ("has_tensor_scale", ctypes.c_int),
        ("tensor_scale_ndim", ctypes.c_int),
        ("input_scale", ctypes.c_float),
        ("has_input_scale", ctypes.c_int),
        ("input_scale_ndim", ctypes.c_int),
    ]


class CkptEntry(ctypes.Structure):
    """nvfp4_ckpt_entry"""
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("file", ctypes.c_char_p),
        ("type", ctypes.c_char_p),
        ("dtype", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("shape", ctypes.c_int64 * ST_MAX_DIMS),
        ("data", ctypes.c_void_p),
        ("nbytes", ctypes.c_size_t),
    ]


class FormatTraits(ctypes.Structure):
    """nvfp4_format_traits"""
    _fields_ = [
        ("format", ctypes.c_int),
        ("name", ctypes.c_char_p),
        ("container", ctypes.c_char_p),
        ("codes_suffix", ctypes.c_char_p),
        ("scale_suffix", ctypes.c_char_p),
        ("tensor_scale_suffix", ctypes.c_char_p),
        ("input_scale_suffix", ctypes.c_char_p),
        ("packing", ctypes.c_int),
        ("scale_store", ctypes.c_int),
        ("scale_code", ctypes.c_int),
        ("tensor_scale_direction", ctypes.c_int),
        ("tensor_scale_optional", ctypes.c_int),
        ("tensor_scale_ndim", ctypes.c_int),
        ("col_multiple", ctypes.c_int64),
        ("zero_nan", ctypes.c_char_p),
        ("padding", ctypes.c_char_p),
        ("rounding", ctypes.c_char_p),
    ]


LINE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)


class ConvertOptions(ctypes.Structure):
    """nvfp4_convert_options"""
    _fields_ = [
        ("to", ctypes.c_int),
        ("from", ctypes.c_int),
        ("allow_rescale", ctypes.c_int),
        ("progress", LINE_FN),
        ("note", LINE_FN),
        ("ctx", ctypes.c_void_p),
    ]


PROGRESS_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_double)


class ExplainArgs(ctypes.Structure):
    """nvfp4_explain_args"""
    _fields_ = [
        ("a", ctypes.POINTER(Tensor)),
        ("b", ctypes.POINTER(Tensor)),
        ("a16", ctypes.c_void_p),
        ("b16", ctypes.c_void_p),
        ("type16", ctypes.c_int),
        ("m", ctypes.c_int64),
        ("n", ctypes.c_int64),
        ("k", ctypes.c_int64),
        ("ref", ctypes.c_void_p),
        ("ref_bf16", ctypes.c_void_p),
        ("alpha", ctypes.c_float),
        ("bias", ctypes.c_void_p),
        ("nthreads", ctypes.c_int),
        ("max_k_slices", ctypes.c_int),
        ("progress", PROGRESS_FN),
        ("progress_ctx", ctypes.c_void_p),
    ]


class Nonfinite(ctypes.Structure):
    """nvfp4_nonfinite"""
    _fields_ = [
        ("nan", ctypes.c_int64),
        ("inf", ctypes.c_int64),
        ("first_row", ctypes.c_int64),
        ("first_col", ctypes.c_int64),
        ("first_value", ctypes.c_float),
    ]


# The structs above, by their C name: the ABI test compares them with the
# compiler's sizeof/offsetof.
STRUCTS = {
    "nvfp4_tensor": Tensor, "nvfp4_gemm_args": GemmArgs, "nvfp4_linear_args": LinearArgs,
    "nvfp4_cuda_quantize_args": CudaQuantizeArgs, "nvfp4_cuda_operand": CudaOperand,
    "nvfp4_cuda_linear_args": CudaLinearArgs, "nvfp4_cuda_gemm_args": CudaGemmArgs,
    "nvfp4_st_tensor": StTensor, "nvfp4_explain_args": ExplainArgs, "nvfp4_layer": Layer,
    "nvfp4_ckpt_tensor": CkptTensor, "nvfp4_convert_options": ConvertOptions,
    "nvfp4_ckpt_entry": CkptEntry, "nvfp4_format_traits": FormatTraits,
    "nvfp4_nonfinite": Nonfinite,
}

_S = ctypes.c_int  # nvfp4_status
P = ctypes.c_void_p
_SIGNATURES = {
    "nvfp4_status_str": (ctypes.c_char_p, [ctypes.c_int]),
    "nvfp4_last_error": (ctypes.c_char_p, []),
    "nvfp4_clear_error": (None, []),
    "nvfp4_default_threads": (ctypes.c_int, []),
    "nvfp4_dtype_from_name": (ctypes.c_int, [ctypes.c_char_p]),
    "nvfp4_e2m1_to_f32": (ctypes.c_float, [ctypes.c_uint8]),
    "nvfp4_scales_bytes": (ctypes.c_size_t, [ctypes.c_int64, ctypes.c_int64, ctypes.c_int]),
    "nvfp4_tensor_free": (None, [ctypes.POINTER(Tensor)]),
    "nvfp4_scales_untile": (None, [P, P, ctypes.c_int64, ctypes.c_int64]),
    "nvfp4_scales_tile": (None, [P, P, ctypes.c_int64, ctypes.c_int64]),
    "nvfp4_per_tensor_scale": (_S, [c_float_p, P, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]),
    "nvfp4_quantize": (_S, [ctypes.POINTER(Tensor), P, ctypes.c_int, ctypes.c_int64,
                            ctypes.c_int64, c_float_p, ctypes.c_int, ctypes.c_int]),
    "nvfp4_dequantize": (_S, [c_float_p, ctypes.POINTER(Tensor), ctypes.c_int]),
    "nvfp4_gemm_alpha": (ctypes.c_float, [ctypes.c_float, ctypes.c_float]),
    "nvfp4_gemm_ref": (_S, [ctypes.POINTER(GemmArgs)]),
    "nvfp4_gemm_cpu": (_S, [ctypes.POINTER(GemmArgs)]),
    "nvfp4_linear_cpu": (_S, [ctypes.POINTER(LinearArgs)]),
    "nvfp4_quantize_cuda": (_S, [ctypes.POINTER(CudaQuantizeArgs)]),
    "nvfp4_linear_cuda_workspace": (ctypes.c_size_t, [ctypes.c_int64] * 3),
    "nvfp4_linear_cuda": (_S, [ctypes.POINTER(CudaLinearArgs)]),
    "nvfp4_linear_cuda_host": (_S, [ctypes.POINTER(LinearArgs)]),
    "nvfp4_cuda_available": (ctypes.c_int, []),
    "nvfp4_cuda_gemm_workspace": (ctypes.c_size_t, [ctypes.c_int64] * 3),
    "nvfp4_gemm_cuda": (_S, [ctypes.POINTER(CudaGemmArgs)]),
    "nvfp4_gemm_cuda_host": (_S, [ctypes.POINTER(GemmArgs)]),
    "nvfp4_st_open": (_S, [ctypes.POINTER(P), ctypes.c_char_p]),
    "nvfp4_st_close": (None, [P]),
    "nvfp4_st_find": (ctypes.POINTER(StTensor), [P, ctypes.c_char_p]),
    "nvfp4_load_layer": (_S, [ctypes.POINTER(Layer), ctypes.c_char_p, ctypes.c_char_p]),
    "nvfp4_detect_format": (_S, [ctypes.POINTER(ctypes.c_int), ctypes.c_char_p, ctypes.c_char_p,
                                 ctypes.c_size_t]),
    "nvfp4_ckpt_open": (_S, [ctypes.POINTER(P), ctypes.c_char_p, ctypes.c_int]),
    "nvfp4_ckpt_close": (None, [P]),
    "nvfp4_ckpt_format": (ctypes.c_int, [P]),
    "nvfp4_ckpt_evidence": (ctypes.c_char_p, [P]),
    "nvfp4_ckpt_count": (ctypes.c_size_t, [P]),
    "nvfp4_ckpt_name": (ctypes.c_char_p, [P, ctypes.c_size_t]),
    "nvfp4_ckpt_read": (_S, [ctypes.POINTER(CkptTensor), P, ctypes.c_char_p]),
    "nvfp4_ckpt_tensor_free": (None, [ctypes.POINTER(CkptTensor)]),
    "nvfp4_ckpt_entries": (ctypes.c_size_t, [P]),
    "nvfp4_ckpt_entry_at": (_S, [P, ctypes.c_size_t, ctypes.POINTER(CkptEntry)]),
    "nvfp4_ckpt_dims": (_S, [P, ctypes.c_char_p, c_int64_p, c_int64_p]),
    "nvfp4_ckpt_load_layer": (_S, [ctypes.POINTER(Layer), P, ctypes.c_char_p]),
    "nvfp4_format_traits_of": (ctypes.POINTER(FormatTraits), [ctypes.c_int]),
    "nvfp4_tensor_convert": (_S, [ctypes.POINTER(Tensor), ctypes.POINTER(Tensor), ctypes.c_int,
                                  ctypes.c_int]),
    "nvfp4_st_marker_name": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p]),
    "nvfp4_convert": (_S, [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ConvertOptions)]),
    "nvfp4_quantize_format": (_S, [ctypes.POINTER(CkptTensor), P, ctypes.c_int, ctypes.c_int64,
                                   ctypes.c_int64, ctypes.c_int, c_float_p, ctypes.c_int]),
    "nvfp4_st_count": (ctypes.c_size_t, [P]),
    "nvfp4_st_get": (ctypes.POINTER(StTensor), [P, ctypes.c_size_t]),
    "nvfp4_st_is_nvfp4": (ctypes.c_int, [P, ctypes.c_char_p]),
    "nvfp4_st_load_nvfp4": (_S, [ctypes.POINTER(Tensor), P, ctypes.c_char_p]),
    "nvfp4_explain": (_S, [ctypes.POINTER(ExplainArgs), ctypes.POINTER(ctypes.c_void_p)]),
    "nvfp4_free": (None, [P]),
    "nvfp4_check_per_tensor_scale": (_S, [ctypes.c_float, ctypes.c_char_p]),
    "nvfp4_count_nonfinite": (_S, [ctypes.POINTER(Nonfinite), P, ctypes.c_int, ctypes.c_int64,
                                   ctypes.c_int64]),
    "nvfp4_tensor_count_nonfinite": (_S, [ctypes.POINTER(Nonfinite), ctypes.POINTER(Tensor),
                                          ctypes.c_int64, ctypes.c_int64]),
}

_lock = threading.Lock()
_lib = None
_loaded_from = None


def _preload():
    spec = os.environ.get("NVFP4_PRELOAD", "")
    for entry in filter(None, spec.split(os.pathsep)):
        if os.path.isdir(entry):
            files = sorted(os.path.join(entry, f) for f in os.listdir(entry)
                           if f.startswith("lib") and ".so" in f)
        else:
            files = [entry]
        for f in files:
            try:
                ctypes.CDLL(f, mode=ctypes.RTLD_GLOBAL)
            except OSError as e:
                raise ImportError(f"nvfp4: NVFP4_PRELOAD: cannot load {f}: {e}") from None


def _candidates():
    env = os.environ.get("NVFP4_LIB")
    if env:
        return [os.path.join(env, LIB_NAME) if os.path.isdir(env) else env]
    return [os.path.join(_HERE, LIB_NAME),
            os.path.normpath(os.path.join(_HERE, "..", "..", "build", LIB_NAME))]


def lib():
    """The loaded library (loaded on first use), with every signature declared."""
    global _lib, _loaded_from
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        _preload()
        tried = []
        handle = None
        for path in _candidates():
            if not os.path.exists(path):
                tried.append(f"{path} (absent)")
                continue
            try:
                handle = ctypes.CDLL(path)
            except OSError as e:
                hint = ""
                if "libjansson" in str(e):
                    hint = (" -- libjansson is missing here: install it (make deps) or name a copy "
                            "with NVFP4_PRELOAD=/path/to/libjansson.so.4")
                raise ImportError(f"nvfp4: cannot load {path}: {e}{hint}") from None
            _loaded_from = path
            break
        if handle is None:
            raise ImportError("nvfp4: libnvfp4.so not found; tried " + "; ".join(tried) +
                              ". Install with `pip install ./python` from the repository root, "
                              "or build it (make) and set NVFP4_LIB=build/libnvfp4.so")
        for name, (res, argtypes) in _SIGNATURES.items():
            fn = getattr(handle, name)
            fn.restype, fn.argtypes = res, argtypes
        _lib = handle
        return _lib


def loaded_from():
    """Path of the libnvfp4.so in use (loads it)."""
    lib()
    return _loaded_from


# The entry points taking one argument struct, bound a second time with a
# void * parameter: the hot paths pass the struct's address as an int, which
# ctypes converts in a fraction of the time it spends checking a byref()
# against POINTER(struct) (the struct layouts are the ABI-tested ones above).
FAST = ("nvfp4_linear_cuda", "nvfp4_gemm_cuda", "nvfp4_quantize_cuda", "nvfp4_linear_cpu",
        "nvfp4_gemm_cpu")
_fast = {}


def fast(name):
    """`name` (one of FAST) as int(struct address) -> int(nvfp4_status)."""
    fn = _fast.get(name)
    if fn is None:
        if name not in FAST:
            raise KeyError(f"{name} is not a one-struct entry point")
        fn = lib()[name]  # item access makes a new function object: its own argtypes
        fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_void_p]
        _fast[name] = fn
    return fn
