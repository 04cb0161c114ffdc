"""nvfp4 as a comfy-kitchen backend: NVFP4 GEMMs on Hopper (sm_90).

comfy-kitchen's own NVFP4 GEMM (backend "cuda") is cuBLASLt FP4 and needs
sm >= 10.0, so on an H100/H200 comfy-kitchen and ComfyUI dequantize NVFP4
weights to BF16 instead.  register() adds a backend named "nvfp4" to
comfy-kitchen's registry that provides

  quantize_nvfp4(x, per_tensor_scale, epsilon=0.0, pad_16x=False, hi_first=True)
  scaled_mm_nvfp4(a, b, tensor_scale_a, tensor_scale_b, block_scale_a,
                  block_scale_b, bias=None, out_dtype=None, alpha=None)

with comfy-kitchen's signatures and conventions (read from its eager
implementations, comfy_kitchen/backends/eager/quantization.py), running our
H200 kernel on CUDA tensors of an sm_90 device, and puts it first in the
priority list.  Calls it cannot take (another GPU, shapes the kernel does not
handle) fail its constraints, and the registry moves on to the next backend
exactly as before.  See docs/PYTHON.md for the SM gates and how they are
opened.

Per call, comfy-kitchen's public quantize_nvfp4 / scaled_mm_nvfp4 go through
a torch custom op and the registry's generic validation of every backend
(tens of microseconds each, more than our kernels take at small M).  With
register(direct=True), the default, those two module functions are replaced
by ones that check, in a few microseconds, that the registry would pick
"nvfp4" for the call (the same order and the same constraints) and then call
our implementation directly; any other call goes to the original.  The
implementations themselves pass the tensors' device pointers straight to C
(no NVFP4Tensor to build and check) and keep float32 copies of BF16 biases
while those are unchanged.
"""
import sys
import weakref

from . import _api
from . import _arrays as A
from . import _lib

BACKEND = "nvfp4"

_state = {"registered": False, "cpu": False, "variant": None, "threads": 0}
_cap_cache = {}
# comfy-kitchen's public functions that register(direct=True) replaced, by name
_originals = {}
# comfy-kitchen objects the per-call code uses, looked up once by register()
_ck = {}


def _roundup(v, m):
    return (v + m - 1) // m * m


def _sm90_ok(device):
    """Our kernel runs on this CUDA device: compute capability 9.0 and a CUDA
    build of libnvfp4."""
    torch = A.torch_module()
    index = device.index if device.index is not None else torch.cuda.current_device()
    hit = _cap_cache.get(index)
    if hit is None:
        hit = (torch.cuda.get_device_capability(index) == (9, 0) and
               bool(_lib.lib().nvfp4_cuda_available()))
        _cap_cache[index] = hit
    return hit


# --------------------------------------------------------------------------
# what the backend takes: parameter tables and call rules, shared by the
# registry's constraints and the direct dispatch (register(direct=True))
# --------------------------------------------------------------------------
# (parameter, dtype set, exact number of dimensions or None), in the
# functions' argument order
_QUANTIZE_PARAMS = (("x", "floats", 2), ("per_tensor_scale", "f32", None))
_GEMM_PARAMS = (("a", "u8", 2), ("b", "u8", 2), ("tensor_scale_a", "f32", None),
                ("tensor_scale_b", "f32", None), ("block_scale_a", "e4m3", 2),
                ("block_scale_b", "e4m3", 2), ("bias", "floats", None),
                ("out_dtype", "floats", None), ("alpha", "f32", None))
_dtype_sets = {}


def _dtypes():
    if not _dtype_sets:
        torch = A.torch_module()
        _dtype_sets.update(floats=frozenset({torch.float32, torch.float16, torch.bfloat16}),
                           f32=frozenset({torch.float32}), u8=frozenset({torch.uint8}),
                           e4m3=frozenset({torch.float8_e4m3fn}))
    return _dtype_sets


def _device_reason(t):
    """None when a tensor's device is one the backend takes, else (param, reason)."""
    if t.is_cuda:
        if not _sm90_ok(t.device):
            return "__hardware__", ("nvfp4 backend: the kernel runs on sm_90 (H100/H200) with a "
                                    "CUDA build of libnvfp4")
    elif not (_state["cpu"] and t.is_cpu):
        return "__device__", f"nvfp4 backend: not registered for {t.device.type}"
    return None


def _quantize_reason(x, pad_16x):
    if x.is_cuda and x.dtype != A.torch_module().bfloat16:
        return "x", "nvfp4 backend: the CUDA quantizer takes bfloat16"
    if not x.is_contiguous():
        return "x", "nvfp4 backend: x must be contiguous"
    if x.dim() == 2 and not pad_16x and x.shape[1] % 16:
        return "x", "cols must be a multiple of 16 without pad_16x"
    return None


def _gemm_reason(a, b, block_scale_a, block_scale_b):
    if a.dim() != 2 or b.dim() != 2:
        return None  # the parameter constraints report these
    k, n = 2 * a.shape[1], b.shape[0]
    if a.shape[1] != b.shape[1]:
        return "b", f"K differs: a {list(a.shape)}, b {list(b.shape)}"
    if a.is_cuda and (k % 32 or n % 16):
        return "b", f"nvfp4 backend (cuda): K = {k} must be a multiple of 32 and N = {n} of 16"
    for t, rows, name in ((block_scale_a, a.shape[0], "block_scale_a"),
                          (block_scale_b, n, "block_scale_b")):
        if A.is_torch(t) and tuple(t.shape) != (_roundup(rows, 128), _roundup(k // 16, 4)):
            return name, (f"shape {list(t.shape)}, want "
                          f"{[_roundup(rows, 128), _roundup(k // 16, 4)]} (128x4 tiled)")
    for t, name in ((a, "a"), (b, "b"), (block_scale_a, "block_scale_a"),
                    (block_scale_b, "block_scale_b")):
        if A.is_torch(t) and not t.is_contiguous():
            return name, "nvfp4 backend: must be contiguous"
    return None


def _params_accept(table, values):
    """comfy-kitchen's parameter validation (constraints.validate_param) of
    `values` against one of the tables above, as a bool: a tensor's dtype,
    device type (our default devices) and dimensions; another value's type."""
    sets = _dtypes()
    cpu = _state["cpu"]
    Tensor = A.torch_module().Tensor
    for (name, dtypes, ndim), v in zip(table, values):
        if v is None:
            continue
        allowed = sets[dtypes]
        if isinstance(v, Tensor):
            if v.dtype not in allowed or not (v.is_cuda or (cpu and v.is_cpu)) or \
                    (ndim is not None and v.dim() != ndim):
                return False
        elif not (v in allowed or type(v) in allowed):
            return False
    return True


def _result(reason):
    from comfy_kitchen.constraints import ValidationResult
    return ValidationResult.ok() if reason is None else ValidationResult.fail(*reason)


def _device_rule(names):
    def rule(kwargs):
        t = next((kwargs[n] for n in names if A.is_torch(kwargs.get(n))), None)
        return _result(None if t is None else _device_reason(t))
    return rule


def _quantize_rule(kwargs):
    x = kwargs.get("x")
    return _result(_quantize_reason(x, kwargs.get("pad_16x", False)) if A.is_torch(x) else None)


def _gemm_rule(kwargs):
    a, b = kwargs.get("a"), kwargs.get("b")
    if not (A.is_torch(a) and A.is_torch(b)):
        return _result(None)  # the parameter constraints report these
    return _result(_gemm_reason(a, b, kwargs.get("block_scale_a"), kwargs.get("block_scale_b")))


def _capabilities(cpu):
    from comfy_kitchen.constraints import ExactDims, FunctionConstraints, ParamConstraint
    devices = frozenset({"cuda", "cpu"} if cpu else {"cuda"})
    sets = _dtypes()

    def params(table):
        return {name: ParamConstraint(dtypes=sets[dt],
                                      shape_rules=(ExactDims(nd),) if nd is not None else ())
                for name, dt, nd in table}
    return {
        "quantize_nvfp4": FunctionConstraints(
            params=params(_QUANTIZE_PARAMS), default_devices=devices,
            call_rules=(_device_rule(("x",)), _quantize_rule)),
        "scaled_mm_nvfp4": FunctionConstraints(
            params=params(_GEMM_PARAMS), default_devices=devices,
            call_rules=(_device_rule(("a",)), _gemm_rule)),
    }


# --------------------------------------------------------------------------
# the backend's functions (comfy-kitchen's signatures)
# --------------------------------------------------------------------------
def quantize_nvfp4(x, per_tensor_scale, epsilon=0.0, pad_16x=False, hi_first=True):
    """comfy-kitchen's quantize_nvfp4 on our quantizer.

    x [rows, cols] (2-D float; bfloat16 on CUDA), per_tensor_scale a float32
    tensor, epsilon ignored (as comfy-kitchen's eager backend ignores it),
    pad_16x: zero-pad rows and cols to 16 (without it cols must be a multiple
    of 16 and the result keeps x's rows), hi_first: nibble order.  Returns
    (qdata uint8 [rows', cols'/2], block_scales float8_e4m3fn
    [roundup(rows',128), roundup(cols'/16,4)], 128x4 tiled).  The variant
    follows the device: "cuda" on CUDA tensors (the bytes of comfy-kitchen's
    CUDA kernel, which this backend replaces there), "eager" on the CPU;
    register(variant=...) fixes one.
    """
    torch = A.torch_module()
    rows, cols = int(x.shape[0]), int(x.shape[1])
    if not pad_16x and cols % 16:
        raise ValueError(f"quantize_nvfp4: {cols} columns is not a multiple of 16 "
                         "(pass pad_16x=True)")
    variant = _state["variant"] or ("cuda" if x.is_cuda else "eager")
    if x.is_cuda and x.dtype == torch.bfloat16 and x.dim() == 2 and x.numel():
        # straight to the device quantizer: no NVFP4Tensor to build and check
        qdata, scales, _ = _api._quantize_cuda(x if x.is_contiguous() else x.contiguous(),
                                               _lib.DTYPE_BF16, rows, cols, per_tensor_scale,
                                               _lib.VARIANTS[variant])
    else:
        xc = x.contiguous()
        q = _api._quantize(xc, _api._float_input(xc, "x"), rows, cols, per_tensor_scale,
                           _lib.VARIANTS[variant])
        qdata, scales = q.qdata, q.block_scale
    if not pad_16x and qdata.shape[0] != rows:
        # The library pads rows to 16; comfy-kitchen keeps x's rows.  The rows
        # dropped are zero padding, and the tiled scales' shape is unchanged
        # (roundup(roundup(rows,16),128) == roundup(rows,128)); their scale
        # bytes are zero either way.
        qdata = qdata.narrow(0, 0, rows)  # leading rows of a contiguous tensor: contiguous
    if not hi_first:
        qdata = ((qdata & 0x0F) << 4) | (qdata >> 4)
    if scales.dtype != torch.float8_e4m3fn:
        scales = scales.view(torch.float8_e4m3fn)
    return qdata, scales


def scaled_mm_nvfp4(a, b, tensor_scale_a, tensor_scale_b, block_scale_a, block_scale_b,
                    bias=None, out_dtype=None, alpha=None):
    """comfy-kitchen's scaled_mm_nvfp4 on our GEMM: y = (a @ b.T) * alpha + bias.

    a [M, K/2] and b [N, K/2] uint8 codes (hi-first), block scales
    float8_e4m3fn 128x4 tiled, tensor scales float32 (one value each),
    alpha (optional) replaces tensor_scale_a * tensor_scale_b, bias [N]
    (any float dtype, widened to FP32 exactly), out_dtype (default bfloat16).
    bfloat16 output is our epilogue BF16(FP32(alpha * raw) + bias); float16
    and float32 outputs round FP32(alpha * raw) + bias to that type.
    """
    torch = A.torch_module()
    out_dtype = torch.bfloat16 if out_dtype is None else out_dtype
    if alpha is None:
        y = _scaled_mm_plain(a, b, tensor_scale_a, tensor_scale_b, block_scale_a, block_scale_b,
                             bias, out_dtype)
        if y is not None:
            return y
    dev = a.device
    if alpha is not None:
        # FP32(alpha * 1) == alpha: the kernel's product of the two scales is alpha.
        sa = alpha.reshape(-1)[:1].to(torch.float32)
        sb = torch.ones((), dtype=torch.float32, device=dev)
    else:
        sa, sb = tensor_scale_a, tensor_scale_b
    sa = sa.detach().reshape(()).to(torch.float32)
    sb = sb.detach().reshape(()).to(torch.float32)
    ta = _api.NVFP4Tensor(a.detach(), block_scale_a.detach(), sa)
    tb = _api.NVFP4Tensor(b.detach(), block_scale_b.detach(), sb)
    threads = _state["threads"]
    if bias is not None:
        bias = bias.detach().reshape(-1)
        if bias.shape[0] < tb.rows:  # ComfyUI pads the weight's rows to 16, not the bias
            bias = torch.nn.functional.pad(bias, (0, tb.rows - bias.shape[0]))
    if out_dtype == torch.bfloat16:
        bias32 = None if bias is None else bias.to(torch.float32).contiguous()
        _, out = _api.matmul(ta, tb, model="sm90", bias=bias32, threads=threads)
        return out
    raw, _ = _api.matmul(ta, tb, model="sm90", threads=threads)
    y = raw * (sa * sb)  # FP32(alpha * raw), alpha = FP32(sa * sb) as in the kernel
    if bias is not None:
        y = y + bias.to(torch.float32)
    return y.to(out_dtype)


def _plain_operand(codes, scales, pts, rows, half, index, torch):
    """An NVFP4 operand already as the kernel reads it, on device `index`
    (-1: the CPU): uint8 codes [rows, half] and float8/uint8 128x4-tiled
    scales, both contiguous, and a one-element float32 per-tensor scale."""
    Tensor = torch.Tensor
    return (isinstance(codes, Tensor) and isinstance(scales, Tensor) and isinstance(pts, Tensor)
            and codes.dtype == torch.uint8 and codes.dim() == 2 and codes.shape[1] == half and
            codes.is_contiguous() and codes.get_device() == index and
            (scales.dtype == torch.float8_e4m3fn or scales.dtype == torch.uint8) and
            scales.is_contiguous() and scales.get_device() == index and
            tuple(scales.shape) == (_roundup(rows, 128), _roundup(half // 8, 4)) and
            pts.dtype == torch.float32 and pts.numel() == 1 and pts.get_device() == index)


def _scaled_mm_plain(a, b, tensor_scale_a, tensor_scale_b, block_scale_a, block_scale_b, bias,
                     out_dtype):
    """scaled_mm_nvfp4 on operands that are already what C reads (what comfy-
    kitchen's layout passes), no NVFP4Tensor built and checked: BF16 out is
    the kernel's own epilogue (no raw accumulators written); float16 /
    float32 out are the general path's FP32(alpha * raw) + bias from the raw
    accumulators alone.  None when anything is otherwise: the general path
    then converts or explains."""
    torch = A.torch_module()
    bf16 = out_dtype == torch.bfloat16
    if not (bf16 or out_dtype == torch.float32 or out_dtype == torch.float16) or \
            not isinstance(a, torch.Tensor) or a.dim() != 2 or \
            not isinstance(b, torch.Tensor) or b.dim() != 2:
        return None
    (m, half), n = a.shape, b.shape[0]
    index = a.get_device()
    if half % 8 or not _plain_operand(a, block_scale_a, tensor_scale_a, m, half, index, torch) \
            or not _plain_operand(b, block_scale_b, tensor_scale_b, n, half, index, torch):
        return None
    k = 2 * half
    on_cuda = index >= 0
    stream = _api._raw_stream(index) if on_cuda else None
    bias_keep, bias_p = _bias_f32(bias, n, index, stream, torch)
    if bias_keep is False:
        return None
    dev = a.device
    out = torch.empty((m, n), dtype=torch.bfloat16, device=dev) if bf16 else None
    raw = None if bf16 else torch.empty((m, n), dtype=torch.float32, device=dev)
    if on_cuda:
        _api._gemm_cuda(dev, (a.data_ptr(), block_scale_a.data_ptr(), tensor_scale_a.data_ptr()),
                        m, (b.data_ptr(), block_scale_b.data_ptr(), tensor_scale_b.data_ptr()),
                        n, k, bias_p if bf16 else None, raw, out, 1)
    else:
        st = _api._structs
        ta, tb = st.ta, st.tb
        ta.rows, ta.cols, ta.codes, ta.scales = m, k, a.data_ptr(), block_scale_a.data_ptr()
        ta.per_tensor_scale = float(tensor_scale_a)
        tb.rows, tb.cols, tb.codes, tb.scales = n, k, b.data_ptr(), block_scale_b.data_ptr()
        tb.per_tensor_scale = float(tensor_scale_b)
        ta.nibble_order = tb.nibble_order = _lib.HI_FIRST
        ta.scale_layout = tb.scale_layout = _lib.SCALES_TILED
        _api._gemm_cpu(st.ta_p, st.tb_p, bias_p if bf16 else None, A.ptr(raw),
                       A.ptr(out), _lib.MODELS["sm90"], _state["threads"], 1)
    if bf16:
        return out
    # FP32(alpha * raw) [+ bias], alpha = FP32(sa * sb) as in the kernel
    y = raw * (tensor_scale_a.reshape(()) * tensor_scale_b.reshape(()))
    if bias_keep is not None:
        y = y + bias_keep
    return y.to(out_dtype)


# Float32 copies of the biases the layout passes (BF16 module parameters, as
# a rule), zero-extended to the weight's padded rows: id(bias) -> (weak
# reference, version, n, stream, copy).  An entry is used only while its bias
# is alive and unchanged (same version counter) and the stream is the same;
# dead biases drop out by their weak references' callbacks.
_BIAS_COPIES = {}


def _bias_f32(bias, n, index, stream, torch):
    """(what the GEMM reads, its address) for bias: None, a float32 [n]
    contiguous tensor as is, else a cached float32 copy; (False, None) when
    the bias is not a 1-D float tensor of at most n values on `index`."""
    if bias is None:
        return None, None
    if not isinstance(bias, torch.Tensor) or bias.dim() != 1 or bias.get_device() != index or \
            bias.shape[0] > n or bias.dtype not in _dtypes()["floats"]:
        return False, None
    if bias.dtype == torch.float32 and bias.shape[0] == n and bias.is_contiguous():
        return bias, bias.data_ptr()
    version = _api._version(bias)
    # in a CUDA graph capture nothing is reused or kept (see _api._capturing)
    cache = version is not None and not (index >= 0 and _api._capturing())
    key = id(bias)
    e = _BIAS_COPIES.get(key) if cache else None
    if e is not None and e[0]() is bias and e[1] == version and e[2] == n and e[3] == stream:
        return e[4], e[4].data_ptr()
    copy = bias.detach().to(torch.float32)
    if copy.shape[0] < n:  # ComfyUI pads the weight's rows to 16, not the bias
        copy = torch.nn.functional.pad(copy, (0, n - copy.shape[0]))
    copy = copy.contiguous()
    if cache:
        if len(_BIAS_COPIES) >= 8192:
            _BIAS_COPIES.clear()
        _BIAS_COPIES[key] = (weakref.ref(bias, _bias_dropper(key)), version, n, stream, copy)
    return copy, copy.data_ptr()


def _bias_dropper(key):
    def drop(ref):
        e = _BIAS_COPIES.get(key)
        if e is not None and e[0] is ref:
            del _BIAS_COPIES[key]
    return drop


# --------------------------------------------------------------------------
# the direct dispatch: comfy-kitchen's quantize_nvfp4 / scaled_mm_nvfp4 that
# skip the torch custom op and the registry's generic validation when the
# registry would hand the call to us anyway
# --------------------------------------------------------------------------
def _registry_picks_us(func):
    """registry.get_capable_backend's choice before validation is "nvfp4":
    a use_backend("nvfp4") override, or no override and "nvfp4" the first
    available backend with `func` in the priority order.  (Otherwise the
    original call decides, validating every backend.)"""
    reg = _ck["registry"]
    override = getattr(reg._thread_local, "backend_override", None)
    if override:
        return override == BACKEND and BACKEND in reg._backends and BACKEND not in reg._disabled
    for name in reg._priority:
        if name in reg._backends and name not in reg._disabled and \
                func in reg._capabilities.get(name, ()):
            return name == BACKEND
    return False


def _eager_call():
    """Not under torch.compile or a torch dispatch mode, which must see the
    custom op (and may hand us fake tensors)."""
    return not _ck["is_compiling"]() and _ck["dispatch_depth"]() == 0


def _direct_quantize_nvfp4(x, per_tensor_scale, epsilon=0.0, pad_16x=False, hi_first=True):
    """comfy_kitchen.quantize_nvfp4 while register(direct=True) is in force."""
    torch = A.torch_module()
    if type(x) in _ck["plain"] and isinstance(per_tensor_scale, torch.Tensor) and \
            type(pad_16x) is bool and type(hi_first) is bool and \
            type(epsilon) in (float, int) and _eager_call() and \
            _registry_picks_us("quantize_nvfp4") and \
            _params_accept(_QUANTIZE_PARAMS, (x, per_tensor_scale)) and \
            _device_reason(x) is None and _quantize_reason(x, pad_16x) is None:
        return quantize_nvfp4(x, per_tensor_scale, epsilon, pad_16x, hi_first)
    return _originals["quantize_nvfp4"](x, per_tensor_scale, epsilon, pad_16x, hi_first)


def _direct_scaled_mm_nvfp4(a, b, tensor_scale_a, tensor_scale_b, block_scale_a, block_scale_b,
                            bias=None, out_dtype=None, alpha=None):
    """comfy_kitchen.scaled_mm_nvfp4 while register(direct=True) is in force."""
    torch = A.torch_module()
    dtype = torch.bfloat16 if out_dtype is None else out_dtype  # as the original does
    if type(a) in _ck["plain"] and type(b) in _ck["plain"] and _eager_call() and \
            _registry_picks_us("scaled_mm_nvfp4") and \
            _params_accept(_GEMM_PARAMS, (a, b, tensor_scale_a, tensor_scale_b, block_scale_a,
                                          block_scale_b, bias, dtype, alpha)) and \
            _device_reason(a) is None and \
            _gemm_reason(a, b, block_scale_a, block_scale_b) is None:
        return scaled_mm_nvfp4(a, b, tensor_scale_a, tensor_scale_b, block_scale_a,
                               block_scale_b, bias, dtype, alpha)
    return _originals["scaled_mm_nvfp4"](a, b, tensor_scale_a, tensor_scale_b, block_scale_a,
                                         block_scale_b, bias=bias, out_dtype=out_dtype,
                                         alpha=alpha)


_DIRECT = {"quantize_nvfp4": _direct_quantize_nvfp4, "scaled_mm_nvfp4": _direct_scaled_mm_nvfp4}


def _install_direct(ck, registry):
    """Put the direct functions in place of comfy_kitchen's own (kept in
    _originals and put back by unregister()).  Only when the registry has
    the internals _registry_picks_us reads; returns whether it did."""
    torch = A.torch_module()
    if not all(hasattr(registry, n) for n in ("_thread_local", "_priority", "_backends",
                                             "_disabled", "_capabilities")):
        return False
    # tensors whose data is their own storage; a subclass (fake tensors, say)
    # keeps the custom op, whose dispatch it may take part in
    _ck["plain"] = frozenset({torch.Tensor, torch.nn.Parameter})
    compiler = getattr(torch, "compiler", None)
    _ck["is_compiling"] = getattr(compiler, "is_compiling", None) or (lambda: False)
    _ck["dispatch_depth"] = getattr(torch._C, "_len_torch_dispatch_stack", None) or (lambda: 0)
    for name, fn in _DIRECT.items():
        current = getattr(ck, name)
        if current is not fn:
            _originals[name] = current
            setattr(ck, name, fn)
    return True


def _remove_direct(ck):
    for name, fn in _DIRECT.items():
        if getattr(ck, name, None) is fn and name in _originals:
            setattr(ck, name, _originals.pop(name))


# --------------------------------------------------------------------------
# the biased linear: aten.addmm on NVFP4 QuantizedTensors
# --------------------------------------------------------------------------
def _addmm_nvfp4(qt, args, kwargs):
    """addmm(bias, x, w.t()) with both operands NVFP4 QuantizedTensors -> one
    ck.scaled_mm_nvfp4 with the bias.

    F.linear(x, w, bias) on a 2-D x reaches __torch_dispatch__ as aten.addmm
    (aten.linear is decomposed first), and comfy-kitchen 0.2.40 registers
    NVFP4 handlers for aten.linear, aten.mm and aten.t only, so every biased
    NVFP4 linear dequantized.  Anything but the plain form (beta = alpha = 1,
    x not transposed, w transposed) dequantizes as before, and so does a
    failing kernel call, as comfy-kitchen's own handlers do.
    """
    ck, QuantizedTensor = _ck["ck"], _ck["QuantizedTensor"]
    bias, x, w = args[0], args[1], args[2]
    plain = (isinstance(x, QuantizedTensor) and isinstance(w, QuantizedTensor) and
             x._qdata.dim() == 2 and not getattr(x._params, "transposed", False) and
             getattr(w._params, "transposed", False) and
             kwargs.get("beta", 1) == 1 and kwargs.get("alpha", 1) == 1 and
             not isinstance(bias, QuantizedTensor) and
             (bias is None or (bias.dim() == 1 and bias.shape[0] == w._params.orig_shape[1])))
    if plain:
        layout = _ck["TensorCoreNVFP4Layout"]
        xq, sx, bx = layout.get_plain_tensors(x)
        wq, sw, bw = layout.get_plain_tensors(w)
        try:
            y = ck.scaled_mm_nvfp4(xq, wq, tensor_scale_a=sx, tensor_scale_b=sw,
                                   block_scale_a=bx, block_scale_b=bw, bias=bias,
                                   out_dtype=x._params.orig_dtype)
            m, n = x._params.orig_shape[0], w._params.orig_shape[1]
            return y[:m, :n] if y.shape[0] != m or y.shape[1] != n else y
        except (RuntimeError, TypeError):
            pass
    return A.torch_module().addmm(*_ck["dequantize_args"]((bias, x, w)), **kwargs)


def _register_addmm():
    """Add _addmm_nvfp4 unless comfy-kitchen already has an NVFP4 addmm."""
    import torch
    from comfy_kitchen.tensor import TensorCoreNVFP4Layout, register_layout_op
    from comfy_kitchen.tensor import base
    table = getattr(base, "_LAYOUT_DISPATCH_TABLE", {})
    if TensorCoreNVFP4Layout in table.get(torch.ops.aten.addmm.default, {}):
        return False
    register_layout_op(torch.ops.aten.addmm.default, TensorCoreNVFP4Layout)(_addmm_nvfp4)
    return True


# --------------------------------------------------------------------------
# registration and the SM gates
# --------------------------------------------------------------------------
def _patch_layout_gate():
    """TensorCoreNVFP4Layout.MIN_SM_VERSION (10, 0) feeds its
    supports_fast_matmul(); on an sm_90 device our backend makes the fast
    path real, so lower it to (9, 0) there (and only there)."""
    torch = A.torch_module()
    from comfy_kitchen.tensor import TensorCoreNVFP4Layout
    if torch.cuda.is_available() and _sm90_ok(torch.device("cuda", torch.cuda.current_device())):
        if TensorCoreNVFP4Layout.MIN_SM_VERSION > (9, 0):
            TensorCoreNVFP4Layout._nvfp4_min_sm_before = TensorCoreNVFP4Layout.MIN_SM_VERSION
            TensorCoreNVFP4Layout.MIN_SM_VERSION = (9, 0)
        return True
    return False


def patch_comfyui():
    """Open ComfyUI's NVFP4 gate on sm_90 devices.

    ComfyUI decides per model whether NVFP4 layers quantize their input and
    call comfy-kitchen (comfy.ops.pick_operations / mixed_precision_ops) with
    comfy.model_management.supports_nvfp4_compute(device), which is
    `major >= 10`.  This wraps that one function: it also answers True for a
    CUDA device of compute capability 9.0 when our kernel runs there.  It
    must run before the model is loaded (from a custom node's import, for
    instance).  Returns True when comfy.model_management was found and
    patched.
    """
    mm = sys.modules.get("comfy.model_management")
    if mm is None or not hasattr(mm, "supports_nvfp4_compute"):
        return False
    original = mm.supports_nvfp4_compute
    if getattr(original, "_nvfp4_wrapped", False):
        return True

    def supports_nvfp4_compute(device=None):
        if original(device):
            return True
        torch = A.torch_module()
        try:
            dev = torch.device(device) if device is not None else \
                torch.device("cuda", torch.cuda.current_device())
            return dev.type == "cuda" and _sm90_ok(dev)
        except Exception:  # noqa: BLE001 -- a gate question never raises
            return False

    supports_nvfp4_compute._nvfp4_wrapped = True
    supports_nvfp4_compute.__wrapped__ = original
    supports_nvfp4_compute.__doc__ = original.__doc__
    mm.supports_nvfp4_compute = supports_nvfp4_compute
    return True


def register(first=True, cpu=False, variant=None, comfyui=True, direct=True, threads=0):
    """Register the "nvfp4" backend in comfy-kitchen's registry.

    Args:
        first: put "nvfp4" first in comfy-kitchen's backend priority (else
            last; select it with comfy_kitchen.use_backend("nvfp4")).
        cpu: also take CPU tensors (our multi-threaded CPU GEMM and
            quantizer); by default the backend claims sm_90 CUDA tensors only.
        variant: force the quantizer variant ("eager" / "cuda"); None: "cuda"
            on CUDA tensors, "eager" on CPU ones.
        comfyui: also open ComfyUI's gate (patch_comfyui) and the layout's
            MIN_SM_VERSION on sm_90 devices.
        direct: replace comfy_kitchen.quantize_nvfp4 / scaled_mm_nvfp4 with
            functions that call our backend straight away when the registry
            would pick it (no use_backend() of another backend, "nvfp4" first
            in the priority order, the call within our constraints, eager
            mode) and otherwise call the originals: the same backend and the
            same bits, without the torch custom op and the registry's generic
            validation on every call (tens of microseconds each).
        threads: CPU threads of the backend's CPU GEMM (0 = all cores).
    Returns:
        dict: {"registered": True, "sm90": whether the current CUDA device
        runs our kernel, "comfyui_patched": bool, "direct": bool}.
    Raises:
        ImportError when comfy-kitchen (or torch) is not installed.
    """
    try:
        import torch  # noqa: F401
        import comfy_kitchen
        from comfy_kitchen.registry import registry
        from comfy_kitchen.tensor import QuantizedTensor, TensorCoreNVFP4Layout, dequantize_args
    except ImportError as e:
        raise ImportError(f"nvfp4.comfy.register() needs torch and comfy-kitchen: {e}") from None
    if variant is not None:
        _api._choice(variant, tuple(_lib.VARIANTS), "variant")
    threads = _api._int_arg(threads, "threads", 0, 1 << 16)
    A.torch_module()
    _ck.update(ck=comfy_kitchen, registry=registry, QuantizedTensor=QuantizedTensor,
               TensorCoreNVFP4Layout=TensorCoreNVFP4Layout, dequantize_args=dequantize_args)
    _state.update(cpu=bool(cpu), variant=variant, threads=threads)
    registry.register(name=BACKEND, module=sys.modules[__name__], capabilities=_capabilities(cpu))
    registry.enable(BACKEND)  # after an unregister()
    order = [p for p in getattr(registry, "_priority", ["cuda", "triton", "eager"]) if p != BACKEND]
    registry.set_priority([BACKEND] + order if first else order + [BACKEND])
    _state["registered"] = True
    _register_addmm()
    direct_on = _install_direct(comfy_kitchen, registry) if direct else False
    if not direct:
        _remove_direct(comfy_kitchen)
    sm90 = False
    patched = False
    if comfyui:
        sm90 = _patch_layout_gate()
        patched = patch_comfyui()
    else:
        torch = A.torch_module()
        sm90 = torch.cuda.is_available() and _sm90_ok(torch.device("cuda",
                                                                   torch.cuda.current_device()))
    return {"registered": True, "sm90": bool(sm90), "comfyui_patched": patched,
            "direct": direct_on}


def unregister():
    """Take "nvfp4" out of the priority list (comfy-kitchen has no removal;
    the module stays registered but is never picked), put comfy-kitchen's
    own quantize_nvfp4 / scaled_mm_nvfp4 back and restore the layout gate."""
    import comfy_kitchen
    from comfy_kitchen.registry import registry
    from comfy_kitchen.tensor import TensorCoreNVFP4Layout
    registry.set_priority([p for p in getattr(registry, "_priority", []) if p != BACKEND])
    registry.disable(BACKEND)
    _remove_direct(comfy_kitchen)
    before = getattr(TensorCoreNVFP4Layout, "_nvfp4_min_sm_before", None)
    if before is not None:
        TensorCoreNVFP4Layout.MIN_SM_VERSION = before
    _state["registered"] = False
