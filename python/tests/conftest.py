"""Fixtures: `torch` skips a test cleanly where PyTorch is not installed (the
NumPy tests never depend on it); `comfy` likewise for comfy-kitchen."""
import pytest


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.fixture
def comfy_kitchen(torch):
    return pytest.importorskip("comfy_kitchen")
