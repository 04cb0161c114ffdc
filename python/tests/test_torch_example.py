"""python/examples/llama_nvfp4.py on the CPU: a small Llama of the same
architecture, BF16 / NVFP4 / W4A16, eager and under torch.compile(fullgraph=
True) with the AOT-eager backend (the eager kernels, so the compiled logits
must equal the eager ones exactly); the table and the JSON it writes."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from _helpers import REPO  # noqa: E402


def test_llama_example_tiny(tmp_path):
    js, md = tmp_path / "r.json", tmp_path / "r.md"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(REPO, "python")] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    r = subprocess.run([sys.executable, os.path.join(REPO, "python", "examples", "llama_nvfp4.py"),
                        "--tiny", "--layers", "1", "--ms", "1,32", "--iters", "1",
                        "--device", "cpu", "--compile-backend", "aot_eager",
                        "--json", str(js), "--markdown", str(md)],
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr
    result = json.loads(js.read_text())
    rows = result["rows"]
    assert list(rows) == ["BF16", "NVFP4", "W4A16"]
    for name, row in rows.items():
        for mode in ("eager", "compiled"):
            for m in (1, 32):
                assert row[f"{mode}_ms_{m}"] > 0, (name, mode, m)
        assert row["compiled_vs_eager"] == 0.0, (name, row)  # AOT-eager: the same kernels
    assert rows["BF16"]["eager_rel_err"] == 0.0
    # quantized activations cost accuracy on top of quantized weights
    assert 0.01 < rows["W4A16"]["eager_rel_err"] < rows["NVFP4"]["eager_rel_err"] < 0.6, rows
    table = md.read_text()
    assert table.strip() == r.stdout.strip()
    assert "| NVFP4 |" in table and "logits rel. error, compiled" in table
    assert "llama_nvfp4.py --tiny" in table
