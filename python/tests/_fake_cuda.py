"""The package's CUDA paths run on a machine without a GPU: "CUDA" tensors that
live in host memory, and the CUDA entry points replaced by emulators that
read the argument structs exactly as C would and compute with the CPU
backend (the same bits by the library's contract).

What this checks is the Python side: every field of every argument struct,
the pointers (the right buffers, outputs large enough), the stream handed to
C, the device switch, the caches, and that nothing syncs the host (reading a
"CUDA" tensor back raises).  The H200 runs the real kernels
(tests/gpu/test_python_cuda.py).

    with emulation(monkeypatch) as fc:
        x = fc.tensor(cpu_tensor)      # a "cuda:0" tensor
        ...
"""
import contextlib
import ctypes

import numpy as np
import torch
from torch.utils._pytree import tree_leaves, tree_map

from nvfp4 import _api, _lib

POISON = 0xA5  # struct bytes between calls: a field a call forgot reads as this


_current = None  # the Emulation in force


class HostSync(AssertionError):
    """A "CUDA" tensor was read back to the host."""


class FakeCuda(torch.Tensor):
    """A tensor on "cuda:<index>" whose data is an ordinary CPU tensor."""

    @staticmethod
    def __new__(cls, inner, index=0):
        t = torch.Tensor._make_wrapper_subclass(
            cls, inner.shape, strides=inner.stride(), storage_offset=inner.storage_offset(),
            dtype=inner.dtype, device=torch.device("cuda", index), requires_grad=False)
        t.inner = inner
        return t

    def data_ptr(self):
        return self.inner.data_ptr()

    def __getitem__(self, index):
        """Basic indexing (slices, ints) through aten ops: torch's own
        __getitem__ sets a CUDA device guard first, which needs a driver."""
        t, dim = self, 0
        for i in index if isinstance(index, tuple) else (index,):
            if isinstance(i, slice):
                start, stop, step = i.indices(t.shape[dim])
                t = torch.ops.aten.slice.Tensor(t, dim, start, stop, step)
                dim += 1
            elif isinstance(i, int):
                t = torch.ops.aten.select.int(t, dim, i)
            else:
                raise TypeError(f"FakeCuda: index {i!r} is not a slice or an int")
        return t

    def contiguous(self, memory_format=torch.contiguous_format):
        """Through aten (torch's own method sets a device guard first too)."""
        if self.is_contiguous(memory_format=memory_format):
            return self
        return torch.ops.aten.clone.default(self, memory_format=memory_format)

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if any(t is not FakeCuda and issubclass(t, torch.Tensor) and t is not torch.Tensor
               for t in types):
            return NotImplemented  # another subclass (a QuantizedTensor) goes first
        if func is torch.ops.aten._local_scalar_dense.default:
            raise HostSync(f"{func}: a CUDA tensor read on the host")
        if func is torch.ops.aten._to_copy.default and kwargs.get("device") is not None and \
                torch.device(kwargs["device"]).type == "cpu":
            raise HostSync("a CUDA tensor copied to the host")
        index = next(a.get_device() for a in tree_leaves((args, kwargs))
                     if isinstance(a, FakeCuda))

        def unwrap(a):
            if isinstance(a, FakeCuda):
                return a.inner
            if isinstance(a, torch.device) and a.type == "cuda":
                return torch.device("cpu")
            return a
        out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs))

        def wrap(o):
            if not isinstance(o, torch.Tensor):
                return o
            if _current is not None:  # memory an op made on the "device"
                storage = o.untyped_storage()
                _current.allocs[storage.data_ptr()] = storage.nbytes()
            return FakeCuda(o, index)
        return tree_map(wrap, out)


def host(t):
    """The host data of a FakeCuda tensor (no dispatch: not a sync)."""
    return t.inner if isinstance(t, FakeCuda) else t


class Emulation:
    def __init__(self):
        self.stream = 0x5000       # the current stream's raw handle C must be given
        self.device = 0            # the CUDA runtime's current device
        self.calls = []            # (entry point, device it ran on)
        self.allocs = {}           # data_ptr -> bytes of every "CUDA" tensor made here
        self.guards = []           # devices torch.cuda.device() switched to
        self.capturing = False     # "the current stream is being captured into a CUDA graph"
        self.made = {}             # factory name -> "CUDA" tensors it made
        self.lib = _lib.lib()

    def tensor(self, t, index=0):
        """A "cuda:index" copy of a CPU tensor."""
        t = t.detach().clone().contiguous()
        self.allocs[t.data_ptr()] = t.numel() * t.element_size()
        return FakeCuda(t, index)

    # ---- torch's factories and CUDA state, as the package calls them ----
    def _factory(self, real):
        def make(*args, device=None, **kw):
            if device is None or torch.device(device).type != "cuda":
                return real(*args, device=device, **kw)
            t = real(*args, **kw)
            self.made[real.__name__] = self.made.get(real.__name__, 0) + 1
            if real is torch.empty and t.numel():  # fresh memory holds garbage, not zeros
                t.reshape(-1).view(torch.uint8).fill_(POISON)
            self.allocs[t.data_ptr()] = t.numel() * t.element_size()
            return FakeCuda(t, torch.device(device).index or 0)
        return make

    @contextlib.contextmanager
    def _device_guard(self, index):
        before = self.device
        self.guards.append(index)
        self.device = index
        try:
            yield
        finally:
            self.device = before

    # ---- the entry points ----
    def _check_buffer(self, ptr, nbytes, what):
        assert ptr, f"{what}: NULL"
        for base, size in self.allocs.items():
            if base <= ptr and ptr + nbytes <= base + size:
                return
        raise AssertionError(f"{what}: {nbytes} bytes at {ptr:#x} are not inside one "
                             "allocation made on the device")

    def _stream_ok(self, stream):
        assert (stream or 0) == self.stream, f"stream {stream} is not the current {self.stream}"

    @staticmethod
    def _f32(ptr):
        return ctypes.c_float.from_address(ptr).value

    @staticmethod
    def _poison(struct):
        ctypes.memset(ctypes.addressof(struct), POISON, ctypes.sizeof(struct))

    # the fields nvfp4.torch's cached arguments write on every call (the rest
    # are written once, when its plan is built)
    PER_CALL = ("x", "m", "out", "stream", "workspace", "workspace_bytes")

    def _poison_after(self, struct):
        """Poison what the caller must write again before its next call: all of
        _api's per-thread struct, or a cached plan's per-call fields."""
        if ctypes.addressof(struct) == ctypes.addressof(_api._structs.cuda_linear):
            self._poison(struct)
            return
        for name in self.PER_CALL:
            f = getattr(type(struct), name)
            ctypes.memset(ctypes.addressof(struct) + f.offset, POISON, f.size)

    def _operand(self, op, what):
        assert op.rows > 0 and op.cols > 0 and op.cols % 16 == 0, f"{what}: {op.rows}x{op.cols}"
        self._check_buffer(op.codes, op.rows * op.cols // 2, what + " codes")
        self._check_buffer(op.scales, self.lib.nvfp4_scales_bytes(op.rows, op.cols,
                                                                  _lib.SCALES_TILED),
                           what + " scales")
        self._check_buffer(op.per_tensor_scale, 4, what + " per_tensor_scale")
        t = _lib.Tensor(op.rows, op.cols, op.codes, op.scales, self._f32(op.per_tensor_scale),
                        _lib.HI_FIRST, _lib.SCALES_TILED)
        return t

    def linear_cuda(self, address):
        a = _lib.CudaLinearArgs.from_address(address)
        self.calls.append(("nvfp4_linear_cuda", self.device))
        self._stream_ok(a.stream)
        m, k = a.m, a.k
        w = a.weight.contents
        n = w.rows
        assert n % 16 == 0, f"N = {n}: the kernels need a multiple of 16"
        self._check_buffer(a.x, m * k * 2, "x")
        tw = self._operand(w, "weight")
        assert w.cols == (k + 15) // 16 * 16
        assert a.variant in (0, 1), a.variant
        assert a.x_codes is None and a.x_scales is None and a.x_scale is None
        assert 1 <= a.k_slices <= _lib.MAX_K_SLICES, a.k_slices
        need = self.lib.nvfp4_linear_cuda_workspace(m, n, k)
        assert a.workspace_bytes >= need, (a.workspace_bytes, need)
        self._check_buffer(a.workspace, a.workspace_bytes, "workspace")
        if a.input_scale:
            self._check_buffer(a.input_scale, 4, "input_scale")
        if a.bias:
            self._check_buffer(a.bias, n * 4, "bias")
        assert a.out or a.raw
        if a.out:
            self._check_buffer(a.out, m * n * 2, "out")
        if a.raw:
            self._check_buffer(a.raw, m * n * 4, "raw")
        host_args = _lib.LinearArgs(a.x, _lib.DTYPE_BF16, m, k, ctypes.pointer(tw), a.input_scale,
                                    a.variant, a.bias, a.raw, a.out, _lib.MODELS["sm90"], 1,
                                    None, a.k_slices)
        st = self.lib.nvfp4_linear_cpu(ctypes.byref(host_args))
        self._poison_after(a)
        return st

    def gemm_cuda(self, address):
        g = _lib.CudaGemmArgs.from_address(address)
        self.calls.append(("nvfp4_gemm_cuda", self.device))
        self._stream_ok(g.stream)
        ta, tb = self._operand(g.a, "a"), self._operand(g.b, "b")
        m, n, k = g.a.rows, g.b.rows, g.a.cols
        assert n % 16 == 0, f"N = {n}: the kernels need a multiple of 16"
        assert g.b.cols == k
        assert 1 <= g.k_slices <= _lib.MAX_K_SLICES, g.k_slices
        need = self.lib.nvfp4_cuda_gemm_workspace(m, n, k)
        assert g.workspace_bytes >= need, (g.workspace_bytes, need)
        self._check_buffer(g.workspace, g.workspace_bytes, "workspace")
        if g.bias:
            self._check_buffer(g.bias, n * 4, "bias")
        assert g.out or g.raw
        if g.out:
            self._check_buffer(g.out, m * n * 2, "out")
        if g.raw:
            self._check_buffer(g.raw, m * n * 4, "raw")
        host_args = _lib.GemmArgs(ctypes.pointer(ta), ctypes.pointer(tb), g.bias, g.raw, g.out,
                                  _lib.MODELS["sm90"], 1, g.k_slices)
        st = self.lib.nvfp4_gemm_cpu(ctypes.byref(host_args))
        self._poison(g)
        return st

    def quantize_cuda(self, address):
        q = _lib.CudaQuantizeArgs.from_address(address)
        self.calls.append(("nvfp4_quantize_cuda", self.device))
        self._stream_ok(q.stream)
        m, k = q.m, q.k
        pm, pk = (m + 15) // 16 * 16, (k + 15) // 16 * 16
        self._check_buffer(q.x, m * k * 2, "x")
        self._check_buffer(q.codes, pm * pk // 2, "codes")
        nsc = self.lib.nvfp4_scales_bytes(pm, pk, _lib.SCALES_TILED)
        self._check_buffer(q.scales, nsc, "scales")
        self._check_buffer(q.per_tensor_scale, 4, "per_tensor_scale")
        assert q.variant in (0, 1), q.variant
        pts = None
        if q.input_scale:
            self._check_buffer(q.input_scale, 4, "input_scale")
            pts = ctypes.c_float.from_address(q.input_scale)
        t = _lib.Tensor()
        st = self.lib.nvfp4_quantize(ctypes.byref(t), q.x, _lib.DTYPE_BF16, m, k,
                                     None if pts is None else ctypes.byref(pts), q.variant, 1)
        if st == 0:
            ctypes.memmove(q.codes, t.codes, pm * pk // 2)
            ctypes.memmove(q.scales, t.scales, nsc)
            ctypes.c_float.from_address(q.per_tensor_scale).value = t.per_tensor_scale
            self.lib.nvfp4_tensor_free(ctypes.byref(t))
        self._poison(q)
        return st


@contextlib.contextmanager
def emulation(monkeypatch):
    """Patch torch's CUDA factories and queries and the library's CUDA entry
    points for the duration; yields the Emulation."""
    global _current
    s = Emulation()
    monkeypatch.setattr(torch, "empty", s._factory(torch.empty))
    monkeypatch.setattr(torch, "full", s._factory(torch.full))
    monkeypatch.setattr(torch, "ones", s._factory(torch.ones))
    monkeypatch.setattr(torch.cuda, "device", s._device_guard)
    # torch initializes CUDA when an op names a CUDA device (comfy-kitchen's
    # scale.to(device=...)); there is none to initialize here
    monkeypatch.setattr(torch.cuda, "_lazy_init", lambda: None)
    monkeypatch.setattr(_api, "_raw_stream_fn", lambda index: s.stream)
    monkeypatch.setattr(_api, "_current_device_fn", lambda: s.device)
    monkeypatch.setattr(_api, "_capturing_fn", lambda: s.capturing)
    # a build without CUDA answers 0 ("out of range") to the workspace
    # queries; the emulators need no scratch, only a device buffer to check
    if s.lib.nvfp4_linear_cuda_workspace(16, 32, 64) == 0:
        monkeypatch.setattr(_api, "_ws_bytes", lambda cache, fn, m, n, k:
                            2 * m * ((k + 31) // 32 * 32) + 4 * m * n + 4096)
    fast = dict(_lib._fast)
    fast.update(nvfp4_linear_cuda=s.linear_cuda, nvfp4_gemm_cuda=s.gemm_cuda,
                nvfp4_quantize_cuda=s.quantize_cuda)
    monkeypatch.setattr(_lib, "_fast", fast)
    if s.lib.nvfp4_linear_cuda_workspace(16, 16, 16) == 0:
        # a library built without CUDA has no kernels to size a workspace for:
        # stand in a size (the emulators compute on the CPU and read none)
        monkeypatch.setattr(_api, "_ws_bytes", lambda cache, fn, m, n, k: 256 * (1 + m + n))
    # the per-thread structs start poisoned too
    st = _api._structs
    for name in ("cuda_linear", "cuda_gemm", "cuda_quantize"):
        Emulation._poison(getattr(st, name))
    _current = s
    try:
        yield s
    finally:
        _current = None


def bits(t):
    """Host bits of a (fake CUDA or CPU) tensor as a NumPy integer array."""
    t = host(t).detach().contiguous()
    if t.dtype in (torch.bfloat16, torch.float16):
        return t.view(torch.int16).numpy()
    if t.dtype == torch.float32:
        return t.view(torch.int32).numpy()
    if t.dtype == torch.float8_e4m3fn:
        return t.view(torch.uint8).numpy()
    return np.asarray(t.numpy())
