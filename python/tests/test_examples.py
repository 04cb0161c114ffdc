"""The examples run (on the CPU here) and say what they should."""
import os
import re
import subprocess
import sys

import pytest

from _helpers import REPO, cli

EXAMPLES = os.path.join(REPO, "python", "examples")


def run(*args):
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    r = subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_check_kernel_demo():
    out = run(os.path.join(EXAMPLES, "check_kernel.py"))
    lines = [l for l in out.splitlines() if "model sm90" in l]
    assert lines and "of 2048 accumulators equal" in lines[0]
    # the FP32 FMA loop is not what tensor cores compute: some outputs differ
    assert "2048 of 2048" not in lines[0], out


def test_comfyui_layer(tmp_path, torch):
    pytest.importorskip("safetensors")
    ex, q = tmp_path / "ex.safetensors", tmp_path / "q.safetensors"
    cli("example", ex)
    cli("quantize", ex, q)
    listing = run(os.path.join(EXAMPLES, "comfyui_layer.py"), q)
    assert "blocks.0.attn.qkv" in listing and "blocks.0.mlp.fc2" in listing
    out = run(os.path.join(EXAMPLES, "comfyui_layer.py"), q, "blocks.0.attn.qkv", "--rows", "16")
    assert "768 x 256 NVFP4" in out and "y [16, 768]" in out
    # timed on every device, the CPU included
    assert re.search(r"; [0-9.]+ us per call;", out) and "nan" not in out, out
