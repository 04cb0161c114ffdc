"""nvfp4.torch under tracing: torch.compile(fullgraph=True) with no graph
break and the eager bits (AOT-eager for the many configurations, Inductor's
C++ backend once -- it needs a C++ compiler), FakeTensor tracing through the
fake implementation without calling the library, dispatch modes seeing the
custom op, and autograd refused when compiled too."""
import pytest

torch = pytest.importorskip("torch")

import nvfp4.torch as nt  # noqa: E402
from _helpers import assert_bits_equal  # noqa: E402
from test_torch_module import linear, rand  # noqa: E402

BF16 = torch.bfloat16


class Block(torch.nn.Module):
    """Layers of every kind NVFP4Linear has: static and dynamic scales, a BF16
    and a float32 bias, none, padded rows (40 -> 48), both variants."""

    def __init__(self):
        super().__init__()
        self.a = nt.NVFP4Linear.from_linear(linear(128, 96), input_scale=0.02)
        self.b = nt.NVFP4Linear.from_linear(linear(96, 40, bias=False), variant="cuda")
        up = linear(40, 128)
        up.bias.data = up.bias.data.float()
        self.c = nt.NVFP4Linear.from_linear(up)

    def forward(self, x):
        return self.c(torch.nn.functional.silu(self.b(self.a(x)))) + x


class ExactBlock(Block):
    def forward(self, x):
        return self.c(torch.relu(self.b(self.a(x)))) + x


def compiled(model, backend, **kw):
    torch._dynamo.reset()
    return torch.compile(model, fullgraph=True, backend=backend, **kw)


def test_compile_fullgraph_gives_the_eager_bits():
    model = Block()
    cm = compiled(model, "aot_eager", dynamic=True)
    with torch.inference_mode():
        for shape in ((1, 128), (7, 128), (2, 5, 128)):
            x = rand(shape, 2.0, seed=sum(shape))
            assert_bits_equal(cm(x), model(x), f"aot_eager {shape}")
    explained = torch._dynamo.explain(model)(rand((3, 128)))
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    ops = [str(n.target) for g in explained.graphs for n in g.graph.nodes]
    assert sum("nvfp4.linear" in o for o in ops) == 3, ops


def test_compile_float32_input_and_w4a16():
    model = Block()
    cm = compiled(model, "aot_eager")
    x = rand((4, 128), 1.0, torch.float32, seed=3)
    with torch.no_grad():
        assert_bits_equal(cm(x), model(x), "float32 input")
    for m in (model.a, model.b, model.c):
        m.mode = "w4a16"
    cm = compiled(model, "aot_eager")
    with torch.no_grad():
        assert_bits_equal(cm(x), model(x), "w4a16")


def test_compile_inductor_cpu():
    """Inductor's CPU backend (generated C++), fullgraph: the eager bits.  The
    ops around the layers are ones Inductor computes exactly as eager does
    (ReLU, one BF16 add); others (LayerNorm, GELU) it may round differently."""
    model = ExactBlock()
    cm = compiled(model, "inductor")
    with torch.inference_mode():
        for rows in (3, 3, 17):
            x = rand((rows, 128), 2.0, seed=rows)
            assert_bits_equal(cm(x), model(x), f"inductor M={rows}")


def test_fake_tensors_never_reach_the_library(monkeypatch):
    from torch._subclasses.fake_tensor import FakeTensorMode
    from nvfp4 import _lib

    def refuse(name):
        raise AssertionError(f"{name} called while tracing with fake tensors")
    monkeypatch.setattr(_lib, "fast", refuse)
    model = Block()
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        x = mode.from_tensor(rand((9, 128)))
        with torch.no_grad():
            y = model(x)
    assert tuple(y.shape) == (9, 128) and y.dtype == BF16


def test_dispatch_modes_see_the_op():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Record(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    model = Block()
    x = rand((3, 128), seed=5)
    with torch.no_grad():
        want = model(x)
        with Record() as rec:
            got = model(x)
    assert rec.ops.count("nvfp4.linear.default") == 3, rec.ops
    assert_bits_equal(got, want, "through the op under a dispatch mode")


def test_compiled_autograd_is_refused():
    model = Block()
    cm = compiled(model, "aot_eager")
    x = rand((2, 128), seed=6).requires_grad_()
    with pytest.raises(Exception, match="requires grad"):
        cm(x)


@pytest.mark.parametrize("strict", [False, True])
def test_torch_export(strict):
    model = Block()
    x = rand((3, 128), seed=7)
    ep = torch.export.export(model, (x,), strict=strict)
    ops = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]
    assert ops.count("nvfp4.linear.default") == 3, ops
    with torch.no_grad():
        assert_bits_equal(ep.module()(x), model(x), f"torch.export strict={strict}")
