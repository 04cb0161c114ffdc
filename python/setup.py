"""Builds libnvfp4.so with the repository's own Makefile and bundles it.

`pip install ./python` from the repository root runs this.  The repository
root is this file's parent directory (override: NVFP4_REPO=/path/to/repo).
The .so is built by `make lib` there (so it includes the CUDA backend when
nvcc is found, exactly as `make` decides); NVFP4_PREBUILT_LIB=/path/libnvfp4.so
bundles an existing build instead.  Everything else is in pyproject.toml.
"""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))


def repo_root():
    root = os.environ.get("NVFP4_REPO") or os.path.dirname(HERE)
    if not (os.path.isfile(os.path.join(root, "Makefile")) and
            os.path.isfile(os.path.join(root, "include", "nvfp4.h"))):
        raise SystemExit(f"nvfp4: {root} is not the nvfp4 repository (no Makefile and "
                         "include/nvfp4.h); run `pip install ./python` from the repository "
                         "root, or set NVFP4_REPO")
    return root


class BuildWithLibrary(build_py):
    """build_py, plus libnvfp4.so built by make and copied into the package."""

    def run(self):
        super().run()
        prebuilt = os.environ.get("NVFP4_PREBUILT_LIB")
        if prebuilt:
            lib = prebuilt
        else:
            root = repo_root()
            jobs = str(max(1, min(os.cpu_count() or 1, 8)))
            subprocess.check_call(["make", "-C", root, "-j" + jobs, "lib"])
            lib = os.path.join(root, "build", "libnvfp4.so")
        dest = os.path.join(self.build_lib, "nvfp4", "libnvfp4.so")
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(lib, dest)


class BinaryDistribution(Distribution):
    """The wheel carries a native library: tag it for this platform."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=BinaryDistribution)
