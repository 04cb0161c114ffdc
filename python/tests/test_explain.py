"""nvfp4.explain over the library's explain engine (nvfp4_explain): the
report names the contract that made the outputs, from NVFP4 operands and from
their exact 16-bit values, raw accumulators and BF16 outputs."""
import json

import numpy as np

import nvfp4
from _helpers import random_bf16


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
    assert report["best"]["model"] == "sm90" and report["best"]["k_slices"] == 1
    assert report["best"]["matched"] == 1.0 and report["best"]["first_mismatch"] is None
    assert report["outputs"] == 16 * 32
    assert fractions and all(0.0 <= f <= 1.0 for f in fractions)


def test_explain_16bit_operands_and_bf16_outputs():
    a, b = _operands()
    raw, out = nvfp4.matmul(a, b, model="sm90")
    a16, b16 = _operand16(a), _operand16(b)
    r1 = nvfp4.explain(a16, b16, raw)
    assert r1["operands"] == "f16" and r1["best"]["matched"] == 1.0
    assert r1["best"]["model"] == "sm90" or r1["ambiguous"], json.dumps(r1["best"])
    alpha = float(np.float32(a.scale_value()) * np.float32(b.scale_value()))
    r2 = nvfp4.explain(a, b, out)  # alpha from the operands' scales
    r3 = nvfp4.explain(a16, b16, out, alpha=alpha)
    for r in (r2, r3):
        assert r["reference"] == "bf16" and r["best"]["matched"] == 1.0, json.dumps(r["best"])
    # one output changed: no candidate reproduces all of them, and it is named
    bad = np.array(raw, copy=True)
    bad[3, 7] = np.nextafter(bad[3, 7], np.float32(np.inf))
    r4 = nvfp4.explain(a, b, bad)
    assert r4["best"]["matched"] < 1.0 and not r4["unique"]
    assert (r4["best"]["first_mismatch"]["row"], r4["best"]["first_mismatch"]["col"]) == (3, 7)
