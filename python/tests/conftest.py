"""Fixtures: `torch` skips a test cleanly where PyTorch is not installed (the
NumPy tests never depend on it); `comfy` likewise for comfy-kitchen.
NVFP4_REQUIRE_TORCH=1 (make test-torch) makes a missing torch (or
transformers, for the example) an error instead, so that no torch test is
skipped for want of it."""
import os

import pytest

if os.environ.get("NVFP4_REQUIRE_TORCH"):
    # fail the run here when they are absent (scripts/install-torch.sh installs both)
    import torch  # noqa: F401
    import transformers  # noqa: F401


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.fixture
def comfy_kitchen(torch):
    return pytest.importorskip("comfy_kitchen")
