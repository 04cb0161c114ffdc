"""The README's install command: `pip install ./python` builds libnvfp4.so with
the repository's make and bundles it; the installed package loads its own copy.

Run without build isolation and into a temporary directory (no network, no
change to the environment); skipped where pip or setuptools is missing."""
import os
import subprocess
import sys

import pytest

from _helpers import REPO


def test_pip_install(tmp_path):
    pytest.importorskip("setuptools")
    if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode:
        pytest.skip("no pip")
    target = tmp_path / "site"
    env = {k: v for k, v in os.environ.items() if k not in ("NVFP4_LIB", "PYTHONPATH")}
    lib = os.environ.get("NVFP4_LIB")
    if lib and os.path.abspath(lib) != os.path.join(REPO, "build", "libnvfp4.so"):
        env["NVFP4_PREBUILT_LIB"] = os.path.abspath(lib)  # another BUILD dir: bundle it, not make
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation",
                        "--no-deps", "--target", str(target), os.path.join(REPO, "python")],
                       capture_output=True, text=True, env=env, cwd=REPO)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (target / "nvfp4" / "libnvfp4.so").exists()
    code = ("import numpy as np, nvfp4; "
            "q = nvfp4.quantize(np.ones((16, 32), np.float32)); "
            "print(nvfp4.library_path()); print(q.qdata.shape, nvfp4.__version__)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(env, PYTHONPATH=str(target)), cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == str(target / "nvfp4" / "libnvfp4.so")
    assert lines[1].startswith("(16, 16)")
