"""NaN and Inf: where they are in an input and what they became, told as the
nvfp4 command tells it (a NonFiniteWarning), or refused (strict=True).

The counts come from the library (nvfp4_count_nonfinite,
nvfp4_tensor_count_nonfinite) for host data; CUDA tensors are looked at only
with strict=True, with torch ops (they synchronize the host).  By default
the results are checked (cheap: a quantized tensor's block scales, a GEMM's
outputs) and the inputs are scanned only to say where a NaN came from.
"""
import ctypes
import warnings

import numpy as np

from . import _arrays as A
from . import _lib
from .errors import NonFiniteWarning, check


def _l():
    return _lib.lib()


def host_array(x, code, rows, cols):
    """nvfp4_count_nonfinite of a host BF16/F16/F32 [rows, cols] array."""
    nf = _lib.Nonfinite()
    check(_l().nvfp4_count_nonfinite(ctypes.byref(nf), A.ptr(x), code, rows, cols),
          "nvfp4_count_nonfinite")
    return nf


def host_tensor(t, rows=None, cols=None):
    """nvfp4_tensor_count_nonfinite of a host NVFP4Tensor's first rows x cols values."""
    nf = _lib.Nonfinite()
    view = t._host_view()[1]
    check(_l().nvfp4_tensor_count_nonfinite(ctypes.byref(nf), view,
                                            t.rows if rows is None else rows,
                                            t.cols if cols is None else cols),
          "nvfp4_tensor_count_nonfinite")
    return nf


def torch_array(x):
    """The same counts for a (CUDA) torch tensor, with torch ops (synchronizes)."""
    torch = A.torch_module()
    x2 = x.reshape(x.shape[0], -1) if x.dim() != 2 else x
    bad = ~torch.isfinite(x2)
    nf = _lib.Nonfinite()
    nf.nan = int(torch.isnan(x2).sum())
    nf.inf = int(bad.sum()) - nf.nan
    nf.first_row = nf.first_col = -1
    if nf.nan + nf.inf:
        r, c = (int(v) for v in torch.nonzero(bad)[0])
        nf.first_row, nf.first_col = r, c
        nf.first_value = float(x2[r, c])
    return nf


def total(nf):
    return nf.nan + nf.inf


def held(nf):
    """'1 NaN and 2 Inf values (the first, NaN, at row 0, col 5)', as the command says it."""
    v = nf.first_value
    first = "NaN" if np.isnan(v) else ("+Inf" if v > 0 else "-Inf")
    where = f"row {nf.first_row}, col {nf.first_col}"
    if nf.nan and nf.inf:
        return f"{nf.nan} NaN and {nf.inf} Inf values (the first, {first}, at {where})"
    n = total(nf)
    kind = "NaN" if nf.nan else "Inf"
    return f"{n} {kind} value{'' if n == 1 else 's'} ({'' if n == 1 else 'the first '}at {where})"


def quantized(what, nin, nout, rows, cols, pts, computed):
    """What a quantizer's input held and what its result became: the
    nvfp4 command's words (cli_report_quantized)."""
    bad_in, bad_out = total(nin) if nin is not None else 0, total(nout)
    if not bad_out:
        became = "every quantized value is finite (ComfyUI's quantizer clamped or replaced them)"
    elif not np.isfinite(pts):
        kind = "computed as amax/2688" if computed else "given"
        became = (f"its per-tensor scale ({kind}) is {'NaN' if np.isnan(pts) else 'Inf'}, so "
                  f"{'all ' if bad_out == rows * cols else ''}{bad_out} of its {rows} x {cols} "
                  "quantized values are NaN or Inf")
    else:
        became = (f"{bad_out} of its {rows} x {cols} quantized values are NaN or Inf (the first "
                  f"at row {nout.first_row}, col {nout.first_col}: its block scale is NaN)")
    if bad_in:
        return f"'{what}' holds {held(nin)}; {became}"
    if computed and pts == 0:
        return (f"'{what}' is all zeros: its per-tensor scale amax/2688 is 0 and ComfyUI's "
                f"arithmetic (0/0) gives every block a NaN scale, so {became}")
    return f"'{what}' is finite, but with the per-tensor scale {float(pts):.9g} {became}"


def outputs(nout, m, n):
    return (f"{'all ' if total(nout) == m * n else ''}{total(nout)} of the {m} x {n} outputs "
            f"are NaN or Inf ({nout.nan} NaN; the first at row {nout.first_row}, "
            f"col {nout.first_col})")


def tell(message, strict, fn, depth=1):
    """A NonFiniteWarning pointing at the user's call (`depth` frames of
    nvfp4 between it and this function's caller), or with strict a ValueError."""
    if strict:
        raise ValueError(f"{fn}: {message} (strict=True refuses NaN and Inf)")
    warnings.warn(f"{fn}: {message}", NonFiniteWarning, stacklevel=2 + depth)
