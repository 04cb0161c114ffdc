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
"""
import sys

from . import _api
from . import _arrays as A
from . import _lib

BACKEND = "nvfp4"

_state = {"registered": False, "cpu": False, "variant": None}
_cap_cache = {}


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


def _first_tensor(kwargs, names):
    for n in names:
        v = kwargs.get(n)
        if A.is_torch(v):
            return v
    return None


def _fail(param, reason):
    from comfy_kitchen.constraints import ValidationResult
    return ValidationResult.fail(param, reason)


def _ok():
    from comfy_kitchen.constraints import ValidationResult
    return ValidationResult.ok()


def _device_rule(names):
    def rule(kwargs):
        t = _first_tensor(kwargs, names)
        if t is None:
            return _ok()
        if t.device.type == "cuda":
            if not _sm90_ok(t.device):
                return _fail("__hardware__", "nvfp4 backend: the kernel runs on sm_90 "
                             "(H100/H200) with a CUDA build of libnvfp4")
        elif t.device.type != "cpu" or not _state["cpu"]:
            return _fail("__device__", f"nvfp4 backend: not registered for {t.device.type}")
        return _ok()
    return rule


def _quantize_rule(kwargs):
    x = kwargs.get("x")
    torch = A.torch_module()
    if A.is_cuda(x) and x.dtype != torch.bfloat16:
        return _fail("x", "nvfp4 backend: the CUDA quantizer takes bfloat16")
    if A.is_torch(x) and not x.is_contiguous():
        return _fail("x", "nvfp4 backend: x must be contiguous")
    if A.is_torch(x) and x.dim() == 2 and not kwargs.get("pad_16x", False) and x.shape[1] % 16:
        return _fail("x", "cols must be a multiple of 16 without pad_16x")
    return _ok()


def _gemm_rule(kwargs):
    a, b = kwargs.get("a"), kwargs.get("b")
    if not (A.is_torch(a) and A.is_torch(b)) or a.dim() != 2 or b.dim() != 2:
        return _ok()  # the parameter constraints report these
    k, n = 2 * a.shape[1], b.shape[0]
    if a.shape[1] != b.shape[1]:
        return _fail("b", f"K differs: a {list(a.shape)}, b {list(b.shape)}")
    if a.is_cuda and (k % 32 or n % 16):
        return _fail("b", f"nvfp4 backend (cuda): K = {k} must be a multiple of 32 and "
                     f"N = {n} of 16")
    for t, rows, name in ((kwargs.get("block_scale_a"), a.shape[0], "block_scale_a"),
                          (kwargs.get("block_scale_b"), n, "block_scale_b")):
        want = (_roundup(rows, 128), _roundup(k // 16, 4))
        if A.is_torch(t) and tuple(t.shape) != want:
            return _fail(name, f"shape {list(t.shape)}, want {list(want)} (128x4 tiled)")
    for name in ("a", "b", "block_scale_a", "block_scale_b"):
        t = kwargs.get(name)
        if A.is_torch(t) and not t.is_contiguous():
            return _fail(name, "nvfp4 backend: must be contiguous")
    return _ok()


def _capabilities(cpu):
    import torch
    from comfy_kitchen.constraints import ExactDims, FunctionConstraints, ParamConstraint
    devices = frozenset({"cuda", "cpu"} if cpu else {"cuda"})
    floats = frozenset({torch.float32, torch.float16, torch.bfloat16})
    f32 = frozenset({torch.float32})
    return {
        "quantize_nvfp4": FunctionConstraints(
            params={
                "x": ParamConstraint(dtypes=floats, shape_rules=(ExactDims(2),)),
                "per_tensor_scale": ParamConstraint(dtypes=f32),
            },
            default_devices=devices,
            call_rules=(_device_rule(("x",)), _quantize_rule),
        ),
        "scaled_mm_nvfp4": FunctionConstraints(
            params={
                "a": ParamConstraint(dtypes=frozenset({torch.uint8}), shape_rules=(ExactDims(2),)),
                "b": ParamConstraint(dtypes=frozenset({torch.uint8}), shape_rules=(ExactDims(2),)),
                "tensor_scale_a": ParamConstraint(dtypes=f32),
                "tensor_scale_b": ParamConstraint(dtypes=f32),
                "block_scale_a": ParamConstraint(dtypes=frozenset({torch.float8_e4m3fn}),
                                                 shape_rules=(ExactDims(2),)),
                "block_scale_b": ParamConstraint(dtypes=frozenset({torch.float8_e4m3fn}),
                                                 shape_rules=(ExactDims(2),)),
                "bias": ParamConstraint(dtypes=floats),
                "out_dtype": ParamConstraint(dtypes=floats),
                "alpha": ParamConstraint(dtypes=f32),
            },
            default_devices=devices,
            call_rules=(_device_rule(("a",)), _gemm_rule),
        ),
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
    q = _api.quantize(x.contiguous(), per_tensor_scale, variant)
    qdata, scales = q.qdata, q.block_scale
    if not pad_16x and qdata.shape[0] != rows:
        # The library pads rows to 16; comfy-kitchen keeps x's rows.  The rows
        # dropped are zero padding, and the tiled scales' shape is unchanged
        # (roundup(roundup(rows,16),128) == roundup(rows,128)); their scale
        # bytes are zero either way.
        qdata = qdata[:rows].contiguous()
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
    if bias is not None:
        bias = bias.detach().reshape(-1)
        if bias.shape[0] < tb.rows:  # ComfyUI pads the weight's rows to 16, not the bias
            bias = torch.nn.functional.pad(bias, (0, tb.rows - bias.shape[0]))
    if out_dtype == torch.bfloat16:
        bias32 = None if bias is None else bias.to(torch.float32).contiguous()
        _, out = _api.matmul(ta, tb, model="sm90", bias=bias32)
        return out
    raw, _ = _api.matmul(ta, tb, model="sm90")
    y = raw * (sa * sb)  # FP32(alpha * raw), alpha = FP32(sa * sb) as in the kernel
    if bias is not None:
        y = y + bias.to(torch.float32)
    return y.to(out_dtype)


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
    import comfy_kitchen as ck
    import torch
    from comfy_kitchen.tensor import QuantizedTensor, TensorCoreNVFP4Layout, dequantize_args

    bias, x, w = args[0], args[1], args[2]
    plain = (isinstance(x, QuantizedTensor) and isinstance(w, QuantizedTensor) and
             x._qdata.dim() == 2 and not getattr(x._params, "transposed", False) and
             getattr(w._params, "transposed", False) and
             kwargs.get("beta", 1) == 1 and kwargs.get("alpha", 1) == 1 and
             not isinstance(bias, QuantizedTensor) and
             (bias is None or (bias.dim() == 1 and bias.shape[0] == w._params.orig_shape[1])))
    if plain:
        xq, sx, bx = TensorCoreNVFP4Layout.get_plain_tensors(x)
        wq, sw, bw = TensorCoreNVFP4Layout.get_plain_tensors(w)
        try:
            y = ck.scaled_mm_nvfp4(xq, wq, tensor_scale_a=sx, tensor_scale_b=sw,
                                   block_scale_a=bx, block_scale_b=bw, bias=bias,
                                   out_dtype=x._params.orig_dtype)
            m, n = x._params.orig_shape[0], w._params.orig_shape[1]
            return y[:m, :n] if tuple(y.shape) != (m, n) else y
        except (RuntimeError, TypeError):
            pass
    return torch.addmm(*dequantize_args((bias, x, w)), **kwargs)


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


def register(first=True, cpu=False, variant=None, comfyui=True):
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
    Returns:
        dict: {"registered": True, "sm90": whether the current CUDA device
        runs our kernel, "comfyui_patched": bool}.
    Raises:
        ImportError when comfy-kitchen (or torch) is not installed.
    """
    try:
        import torch  # noqa: F401
        import comfy_kitchen
        from comfy_kitchen.registry import registry
    except ImportError as e:
        raise ImportError(f"nvfp4.comfy.register() needs torch and comfy-kitchen: {e}") from None
    if variant is not None:
        _api._choice(variant, tuple(_lib.VARIANTS), "variant")
    _state.update(cpu=bool(cpu), variant=variant)
    registry.register(name=BACKEND, module=sys.modules[__name__], capabilities=_capabilities(cpu))
    registry.enable(BACKEND)  # after an unregister()
    order = [p for p in getattr(registry, "_priority", ["cuda", "triton", "eager"]) if p != BACKEND]
    registry.set_priority([BACKEND] + order if first else order + [BACKEND])
    _state["registered"] = True
    _register_addmm()
    sm90 = False
    patched = False
    if comfyui:
        sm90 = _patch_layout_gate()
        patched = patch_comfyui()
    else:
        torch = A.torch_module()
        sm90 = torch.cuda.is_available() and _sm90_ok(torch.device("cuda",
                                                                   torch.cuda.current_device()))
    del comfy_kitchen
    return {"registered": True, "sm90": bool(sm90), "comfyui_patched": patched}


def unregister():
    """Take "nvfp4" out of the priority list (comfy-kitchen has no removal;
    the module stays registered but is never picked) and restore the layout gate."""
    from comfy_kitchen.registry import registry
    from comfy_kitchen.tensor import TensorCoreNVFP4Layout
    registry.set_priority([p for p in getattr(registry, "_priority", []) if p != BACKEND])
    registry.disable(BACKEND)
    before = getattr(TensorCoreNVFP4Layout, "_nvfp4_min_sm_before", None)
    if before is not None:
        TensorCoreNVFP4Layout.MIN_SM_VERSION = before
    _state["registered"] = False
