"""nvfp4.explain over the library's explain engine (nvfp4_explain).

The engine is merged from another branch; with a library built before it,
these tests skip (and test_errors checks the clear UnsupportedError)."""
import json

import numpy as np
import pytest

import nvfp4
from _helpers import random_bf16

pytestmark = pytest.mark.skipif(not nvfp4._lib.has("nvfp4_explain"),
                                reason="libnvfp4 without nvfp4_explain (explain engine not merged)")


def _operands():
    rng = np.random.default_rng(61)
    a = nvfp4.quantize(random_bf16(rng, 16, 256, 4.0))
    b = nvfp4.quantize(random_bf16(rng, 32, 256, 0.03))
    return a, b


def _operand16(t):
    """The exact 16-bit operands the tensor core multiplies: e2m1 * |e4m3|
    (the per-tensor scale left out), exact in float16."""
    unit = nvfp4.NVFP4Tensor(t.qdata, t.block_scale, 1.0).dequantize()
    h = unit.astype(np.float16)
    assert np.array_equal(h.astype(np.float32), unit), "not exact in float16"
    return h


def test_explain_raw_sm90():
    a, b = _operands()
    raw, _ = nvfp4.matmul(a, b, model="sm90")
    fractions = []
    report = nvfp4.explain(a, b, raw, progress=fractions.append)
    assert isinstance(report, dict) and report
    assert "sm90" in json.dumps(report), "the sm90 model explains sm90 bits"
    assert all(0.0 <= f <= 1.0 for f in fractions)


def test_explain_16bit_operands_and_bf16_outputs():
    a, b = _operands()
    raw, out = nvfp4.matmul(a, b, model="sm90")
    a16, b16 = _operand16(a), _operand16(b)
    r1 = nvfp4.explain(a16, b16, raw)
    assert "sm90" in json.dumps(r1)
    alpha = float(np.float32(a.scale_value()) * np.float32(b.scale_value()))
    r2 = nvfp4.explain(a, b, out)  # alpha from the operands' scales
    r3 = nvfp4.explain(a16, b16, out, alpha=alpha)
    assert isinstance(r2, dict) and isinstance(r3, dict)
    assert "sm90" in json.dumps(r2) and "sm90" in json.dumps(r3)
