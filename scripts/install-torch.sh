#!/bin/sh
# What the PyTorch tests (make test-torch) need beyond `make deps`, installed
# only where missing: torch from PyPI (its Linux wheels bring NVIDIA's CUDA
# libraries: about 4.6 GB installed, 75 s on a 2-core machine with a fast
# link; the tests run on the CPU), a C++ compiler (torch.compile's CPU
# backend compiles C++), and transformers for the end-to-end example.
set -e
TORCH_VERSION=${TORCH_VERSION:-2.11.0}
TRANSFORMERS_VERSION=${TRANSFORMERS_VERSION:-5.23.0}
if ! command -v g++ >/dev/null 2>&1; then
    echo "installing: g++ (apt)" >&2
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq g++ >/dev/null
fi
# A distribution's own Python refuses plain pip installs (PEP 668).
pip_install() {
    python3 -m pip install -q --disable-pip-version-check "$@" 2>/dev/null ||
        python3 -m pip install -q --disable-pip-version-check --break-system-packages "$@"
}
if ! python3 -c "import torch" >/dev/null 2>&1; then
    echo "installing: torch==$TORCH_VERSION (pip)" >&2
    pip_install "torch==$TORCH_VERSION"
fi
if ! python3 -c "import transformers" >/dev/null 2>&1; then
    echo "installing: transformers==$TRANSFORMERS_VERSION (pip)" >&2
    pip_install "transformers==$TRANSFORMERS_VERSION"
fi
python3 -c "import torch, transformers; print('torch', torch.__version__, '/ transformers', transformers.__version__)" >&2
