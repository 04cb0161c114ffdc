#!/bin/sh
# Install the Debian packages nvfp4 builds with (compiler, make, jansson for
# safetensors headers, clang for the fuzzer) and the Python test packages.
# Does nothing if all are present.
set -e
need=""
for p in gcc make libjansson-dev clang xz-utils; do
    dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
# libFuzzer's runtime ships in clang's runtime package on Debian 12.
if ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
    need="$need libclang-rt-14-dev"
fi
# The Python package's tests (make test-python) need numpy, ml_dtypes and pytest,
# and wheel (test_install builds the package without build isolation).
py_missing=0
python3 -c "import numpy, ml_dtypes, pytest, wheel" >/dev/null 2>&1 || py_missing=1
if [ "$py_missing" = 1 ] && ! python3 -m pip --version >/dev/null 2>&1; then
    need="$need python3-pip"
fi
if [ -n "$need" ]; then
    echo "installing:$need" >&2
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq $need >/dev/null
fi
if [ "$py_missing" = 1 ]; then
    echo "installing: numpy ml_dtypes pytest wheel (pip)" >&2
    # A distribution's own Python refuses plain pip installs (PEP 668).
    python3 -m pip install -q numpy ml_dtypes pytest wheel 2>/dev/null ||
        python3 -m pip install -q --break-system-packages numpy ml_dtypes pytest wheel
fi
