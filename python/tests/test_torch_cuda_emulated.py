"""NVFP4Linear's CUDA path on a machine without a GPU (_fake_cuda.py: "CUDA"
tensors in host memory, nvfp4_linear_cuda replaced by an emulator that reads
its argument struct field by field and computes with the CPU backend; any
read back to the host raises).  What is checked is the Python side: the
bits, one C call per forward, the stream, the per-stream workspace shared
by layers and kept out of CUDA graph captures, the device switch, the
cached arguments, and the custom op's own CUDA path."""
import pytest

torch = pytest.importorskip("torch")

import nvfp4.torch as nt  # noqa: E402
from test_torch_module import linear, rand, reference  # noqa: E402

BF16 = torch.bfloat16


@pytest.fixture
def fc(monkeypatch):
    import _fake_cuda
    with _fake_cuda.emulation(monkeypatch) as s:
        # the eager path takes these "CUDA" tensors as plain ones
        monkeypatch.setattr(nt, "_PLAIN", nt._PLAIN | {_fake_cuda.FakeCuda})
        monkeypatch.setattr(nt, "_WORKSPACES", {})
        monkeypatch.setattr(nt, "_OP_PLANS", {})
        yield s


def on_fake_cuda(fc, m):
    """A "cuda:0" copy of a CPU NVFP4Linear."""
    tensors = {k: fc.tensor(v) for k, v in m.state_dict().items()}
    return nt.NVFP4Linear._from_tensors(m.in_features, m.out_features, tensors, m.variant,
                                        m.mode, 0, m.checkpoint_format)


def bits(t):
    from _fake_cuda import bits as b
    return b(t)


@pytest.mark.parametrize("scale,bias,variant", [(None, True, "eager"), (0.02, False, "cuda"),
                                                (0.05, True, "cuda")])
def test_forward_on_emulated_cuda(fc, scale, bias, variant):
    from _fake_cuda import HostSync
    cpu = nt.NVFP4Linear.from_linear(linear(224, 40, bias=bias), variant=variant,
                                     input_scale=scale)
    m = on_fake_cuda(fc, cpu)
    assert m.weight.is_cuda
    for shape in ((1, 224), (9, 224), (2, 3, 224)):
        xh = rand(shape, 2.0, seed=shape[0])
        x = fc.tensor(xh)
        want = reference(cpu, xh)
        for i in range(2):  # the second call on the cached arguments and workspace
            calls, made = len(fc.calls), dict(fc.made)
            with torch.no_grad():
                y = m(x)
            assert fc.calls[calls:] == [("nvfp4_linear_cuda", 0)]
            assert y.is_cuda and y.dtype == BF16 and tuple(y.shape) == shape[:-1] + (40,)
            assert (bits(y) == bits(want)).all(), (shape, scale, bias, variant)
            if i:  # nothing made but the output (new_empty: not a factory call)
                assert fc.made == made, fc.made
    with pytest.raises(HostSync):  # the harness does catch a read-back
        torch.ops.aten._local_scalar_dense.default(y[0, 0])


def test_workspace_per_stream_and_capture(fc):
    a_cpu = nt.NVFP4Linear.from_linear(linear(128, 64))
    b_cpu = nt.NVFP4Linear.from_linear(linear(64, 128), input_scale=0.1)
    a, b = on_fake_cuda(fc, a_cpu), on_fake_cuda(fc, b_cpu)
    x = fc.tensor(rand((4, 128), seed=1))
    with torch.no_grad():
        b(a(x))
    assert list(nt._WORKSPACES) == [(0, fc.stream)]  # one for both layers
    ws = nt._WORKSPACES[(0, fc.stream)]
    with torch.no_grad():
        b(a(x))
        assert nt._WORKSPACES[(0, fc.stream)] is ws
        b(a(fc.tensor(rand((300, 128), seed=2))))  # a larger M grows it
        grown = nt._WORKSPACES[(0, fc.stream)]
        assert grown.numel() > ws.numel()
        fc.stream = 0x7000  # another stream: its own
        b(a(x))
        assert set(nt._WORKSPACES) == {(0, 0x5000), (0, 0x7000)}
        fc.capturing = True  # in a graph capture: made in the graph, never kept
        before = dict(nt._WORKSPACES)
        empties = fc.made.get("empty", 0)
        y = b(a(x))
        assert nt._WORKSPACES == before and fc.made.get("empty", 0) == empties + 2
        fc.capturing = False
    want = reference(b_cpu, reference(a_cpu, rand((4, 128), seed=1)))
    assert (bits(y) == bits(want)).all()
    nt.release_workspaces()
    assert nt._WORKSPACES == {}


def test_bias_copy_and_device_switch(fc):
    cpu = nt.NVFP4Linear.from_linear(linear(96, 32))  # a BF16 bias: a float32 copy is made
    m = on_fake_cuda(fc, cpu)
    xh = rand((5, 96), seed=3)
    x = fc.tensor(xh)
    with torch.no_grad():
        assert (bits(m(x)) == bits(reference(cpu, xh))).all()
        plan = m._plan
        assert plan is not None and plan.keep.dtype == torch.float32
        m(x)
        assert m._plan is plan
        fc.device = 1  # another device is current: switched to x's around the call only
        assert (bits(m(x)) == bits(reference(cpu, xh))).all()
        assert fc.guards == [0] and fc.calls[-1] == ("nvfp4_linear_cuda", 0)
        fc.device = 0
        # in a graph capture the cached copy is not used (the graph would keep
        # its address after the plan drops it): a copy is made in the graph on
        # each call, and not kept
        made = []
        real = m._new_plan
        m._new_plan = lambda x: made.append(1) or real(x)
        fc.capturing = True
        assert (bits(m(x)) == bits(reference(cpu, xh))).all()
        m(x)
        fc.capturing = False
        assert len(made) == 2 and m._plan is plan
        m(x)
        assert len(made) == 2  # outside the capture: the cached plan again
        del m._new_plan
        m.bias.add_(1.0)
        cpu.bias.add_(1.0)
        assert (bits(m(x)) == bits(reference(cpu, xh))).all()


def test_refusals_on_emulated_cuda(fc):
    m = on_fake_cuda(fc, nt.NVFP4Linear.from_linear(linear(64, 32)))
    with torch.no_grad():
        with pytest.raises(TypeError, match="bfloat16 activations"):
            m(fc.tensor(rand((2, 64), dtype=torch.float32)))
        with pytest.raises(ValueError, match="x is on cpu"):
            m(rand((2, 64)))


def test_custom_op_cuda_path(fc):
    """The op's own implementation on "CUDA" tensors (what compiled graphs call):
    the same bits and one C call; its argument structs are cached by address."""
    cpu = nt.NVFP4Linear.from_linear(linear(128, 48), input_scale=0.03)
    m = on_fake_cuda(fc, cpu)
    xh = rand((6, 128), seed=4)
    b32 = fc.tensor(cpu.bias.detach().float())
    args = (m.weight, m.weight_scale, m.weight_scale_2, m.input_scale, b32, 0, 0)
    for _ in range(2):
        calls = len(fc.calls)
        y = nt._linear_impl(fc.tensor(xh), *args)
        assert fc.calls[calls:] == [("nvfp4_linear_cuda", 0)]
        assert (bits(y) == bits(reference(cpu, xh))).all()
    assert len(nt._OP_PLANS) == 1
