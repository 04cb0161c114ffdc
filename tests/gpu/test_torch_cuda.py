#!/usr/bin/env python3
"""nvfp4.torch on an H100/H200: NVFP4Linear on CUDA tensors against the CPU
backend bit for bit (eager and the custom op; quantized on the GPU and on
the CPU), checkpoints against the CLI, torch.compile(fullgraph=True) with
Inductor and with CUDA graphs, a torch.cuda.graph capture replayed, no host
synchronization, autograd refused, W4A16, a transformers Llama quantized
with quantize_model, and each linear's host cost side by side with
F.linear.

Standalone (no pytest), from the repository root after `make` (a CUDA build):

    NVFP4_LIB=build/libnvfp4.so PYTHONPATH=python python3 tests/gpu/test_torch_cuda.py

Environment: as tests/gpu/test_python_cuda.py (NVFP4_LIB, NVFP4_PRELOAD,
NVFP4_CLI, NVFP4_TESTS=name,..., NVFP4_TEST_DEVICE=cpu for a dry run of the
logic on the CPU, OUT: results in $OUT/torch_cuda.json), and
NVFP4_HOST_COST_M (default 1,16): the M values of the host-cost table.
Prints one line per test and "torch_cuda: N passed, N failed, N skipped".
"""
import ctypes
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path[:0] = [os.path.join(REPO, "python"), os.path.join(REPO, "python", "examples"), HERE]

import torch  # noqa: E402

import nvfp4  # noqa: E402
import nvfp4.torch as nt  # noqa: E402
from nvfp4 import _lib  # noqa: E402
from test_python_cuda import (DEV, ON_GPU, SEED_LINEARS, Skip, _median_us, _per_call_us,  # noqa: E402
                              cli, no_host_sync, rand_bf16, same_bits, st_read)
from test_python_cuda import main as run_tests  # noqa: E402

F = torch.nn.functional
BF16 = torch.bfloat16
RESULTS = {"tests": {}, "host_cost": []}


def linear(k, n, bias=True, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    lin = torch.nn.Linear(k, n, bias=bias)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(n, k, generator=g) * 0.05)
        if bias:
            lin.bias.copy_(torch.randn(n, generator=g) * 0.5)
    return lin.to(BF16).to(device)


class ExactBlock(torch.nn.Module):
    """NVFP4Linear layers of each kind between ops Inductor computes exactly as
    eager does (ReLU, one BF16 add): compiled, it must give the eager bits."""

    def __init__(self):
        super().__init__()
        self.a = nt.NVFP4Linear.from_linear(linear(256, 512, seed=1), input_scale=0.02)
        self.b = nt.NVFP4Linear.from_linear(linear(512, 256, bias=False, seed=2),
                                            variant="cuda")
        self.c = nt.NVFP4Linear.from_linear(linear(256, 256, seed=3))

    def forward(self, x):
        return self.c(torch.relu(self.b(self.a(x)))) + x


# ---------------------------------------------------------------------------
def test_device():
    assert nvfp4.cuda_available(), f"{nvfp4.library_path()}: no CUDA backend or no sm_90 GPU"
    RESULTS["device"] = {"name": torch.cuda.get_device_name(),
                         "capability": list(torch.cuda.get_device_capability()),
                         "torch": torch.__version__, "library": nvfp4.library_path()}


def test_module_vs_cpu():
    """Quantized on the GPU == on the CPU; forward on CUDA (eager, and the
    custom op) == the CPU backend, every bit, without host syncs."""
    n = 0
    configs = [((512, 256), True, None, "eager"), ((224, 40), True, 0.02, "cuda"),
               ((1024, 1040), False, 0.05, "eager"), ((256, 768), True, None, "cuda")]
    for (k, nn_), bias, scale, variant in configs:
        lin = linear(k, nn_, bias, seed=k + nn_)
        cpu = nt.NVFP4Linear.from_linear(lin, variant=variant, input_scale=scale)
        gpu = nt.NVFP4Linear.from_linear(lin.to(DEV), variant=variant, input_scale=scale)
        for name in ("weight", "weight_scale", "weight_scale_2"):
            n += same_bits(getattr(gpu, name), getattr(cpu, name), f"{k}x{nn_}: {name}")
        for shape in ((1, k), (16, k), (300, k), (2, 5, k)):
            x = (torch.randn(shape, generator=torch.Generator().manual_seed(sum(shape))) *
                 2).to(BF16)
            with torch.no_grad():
                want = cpu(x)
                xd = x.to(DEV)
                with no_host_sync():
                    got = gpu(xd)
                    got2 = gpu(xd)
                    op = gpu._forward_op(xd)
            what = f"{k}->{nn_} {shape} scale={scale} {variant}"
            n += same_bits(got, want, what + ": eager")
            n += same_bits(got2, want, what + ": eager, cached arguments")
            n += same_bits(op, want, what + ": custom op")
    return f"{n} values"


def test_checkpoint_vs_cli():
    d = tempfile.mkdtemp(prefix="nvfp4-torch-")
    ex, q, y = (os.path.join(d, f) for f in ("ex.safetensors", "q.safetensors", "y.safetensors"))
    cli("example", ex)
    cli("quantize", ex, q)
    cli("linear", f"{q}:blocks.0.attn.qkv", f"{ex}:x", "-o", y, "--backend", "cpu")
    m = nt.NVFP4Linear.from_checkpoint(q, "blocks.0.attn.qkv", device=DEV)
    x = st_read(ex)["x"].to(DEV)
    with torch.no_grad(), no_host_sync():
        got = m(x)
    n = same_bits(got, st_read(y)["out"], "from_checkpoint(device) vs nvfp4 linear")
    # `nvfp4 quantize` copies the bias as it was: the state dict gives it back
    n += same_bits(m.state_dict()["bias"], st_read(ex)["blocks.0.attn.qkv.bias"],
                   "state_dict bias")
    return f"{n} values"


def test_compile_fullgraph():
    """Inductor, fullgraph: no graph break, one nvfp4::linear per layer, the
    eager bits at several M (and under dynamic shapes)."""
    model = ExactBlock().to(DEV)
    ex = torch._dynamo.explain(model)(rand_bf16(3, 256).to(DEV))
    assert ex.graph_break_count == 0 and ex.graph_count == 1, ex
    torch._dynamo.reset()
    cm = torch.compile(model, fullgraph=True)
    n = 0
    with torch.inference_mode():
        for m in (1, 7, 64, 64, 300):
            x = rand_bf16(m, 256, 2.0).to(DEV)
            n += same_bits(cm(x), model(x), f"inductor M={m}")
    return f"{n} values"


def test_compile_cuda_graphs():
    """mode='reduce-overhead' (CUDA graph trees): replays give the eager bits."""
    if not ON_GPU:
        raise Skip("CUDA graphs")
    from torch._dynamo.utils import counters
    model = ExactBlock().to(DEV)
    torch._dynamo.reset()
    counters.clear()
    cm = torch.compile(model, fullgraph=True, mode="reduce-overhead")
    n = 0
    with torch.inference_mode():
        for i in range(6):
            x = rand_bf16(16, 256, 1.0 + i).to(DEV)
            n += same_bits(cm(x).clone(), model(x), f"reduce-overhead call {i}")
    # Inductor did run the graph as a CUDA graph (it skips them on what it
    # cannot capture, counting why)
    assert counters["inductor"]["cudagraph_skips"] == 0, dict(counters["inductor"])
    return f"{n} values"


def test_cuda_graph_capture():
    """Eager NVFP4Linear layers captured in a torch.cuda.graph (static and
    dynamic scales, a BF16 bias widened inside the capture), replayed on new
    inputs: the eager bits; eager calls after the capture still right."""
    if not ON_GPU:
        raise Skip("CUDA graphs")
    model = ExactBlock().to(DEV)
    static_x = rand_bf16(16, 256).to(DEV)
    with torch.inference_mode():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):  # warm-up off the default stream, as torch advises
                model(static_x)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_y = model(static_x)
        n = 0
        for i in range(4):
            x = rand_bf16(16, 256, 1.0 + i).to(DEV)
            static_x.copy_(x)
            g.replay()
            n += same_bits(static_y, model(x), f"graph replay {i}")
        x = rand_bf16(16, 256, 3.0).to(DEV)
        n += same_bits(model(x), model(x.clone()), "eager after the capture")
    return f"{n} values"


def test_streams_and_devices():
    """A side stream: the same bits, a workspace of its own; x on the CPU
    with the layer on the GPU: a clear error."""
    if not ON_GPU:
        raise Skip("streams")
    m = nt.NVFP4Linear.from_linear(linear(512, 256).to(DEV))
    x = rand_bf16(8, 512).to(DEV)
    with torch.no_grad():
        want = m(x)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), no_host_sync():
            got = m(x)
        torch.cuda.current_stream().wait_stream(s)
        n = same_bits(got, want, "side stream")
        assert (torch.cuda.current_device(), s.cuda_stream) in nt._WORKSPACES
        try:
            m(x.cpu())
            raise AssertionError("x on the CPU was not refused")
        except ValueError as e:
            assert "x is on cpu" in str(e), e
    return f"{n} values"


def test_autograd_refused():
    m = nt.NVFP4Linear.from_linear(linear(256, 256).to(DEV))
    x = rand_bf16(2, 256).to(DEV).requires_grad_()
    for fn in (m, m._forward_op):
        try:
            fn(x)
            raise AssertionError("no error with x requiring grad")
        except RuntimeError as e:
            assert "requires grad" in str(e), e
    return "refused"


def test_w4a16():
    lin = linear(512, 256)
    cpu = nt.NVFP4Linear.from_linear(lin)
    gpu = nt.NVFP4Linear.from_linear(lin.to(DEV))
    n = same_bits(gpu.dequantize(), cpu.dequantize(), "dequantize on the GPU vs the CPU")
    gpu.mode = "w4a16"
    x = rand_bf16(16, 512).to(DEV)
    with torch.no_grad():
        n += same_bits(gpu(x), F.linear(x, gpu.dequantize(BF16), gpu.bias), "w4a16 forward")
    return f"{n} values"


def test_transformers_llama():
    """A small transformers Llama quantized with quantize_model: runs eager and
    under torch.compile(fullgraph=True); the logits' error is that of NVFP4."""
    try:
        import llama_nvfp4 as ex
    except ImportError as e:
        raise Skip(f"transformers: {e}")
    try:
        base = ex.build(2, True, DEV)
    except ImportError as e:
        raise Skip(f"transformers: {e}")
    models, names = ex.variants(base)
    assert len(names) == 14, names
    ids = ex.inputs(64, base.config.vocab_size, DEV, torch.Generator().manual_seed(2))
    out = {}
    with torch.inference_mode():
        ref = base(input_ids=ids, use_cache=False).logits
        for name in ("NVFP4", "W4A16"):
            eager = models[name](input_ids=ids, use_cache=False).logits
            torch._dynamo.reset()
            cm = torch.compile(models[name], fullgraph=True)
            compiled = cm(input_ids=ids, use_cache=False).logits
            out[name] = {"eager": ex.rel_error(eager, ref), "compiled": ex.rel_error(compiled, ref),
                         "compiled_vs_eager": ex.rel_error(compiled, eager)}
            assert 0.02 < out[name]["eager"] < 0.5, (name, out[name])
            # Inductor rounds the ops around the layers its own way; quantized
            # activations turn those last-bit differences into whole E2M1 steps,
            # so compiled W4A4 logits differ from eager ones by a share of the
            # quantization error -- but are no worse against BF16
            assert out[name]["compiled"] < 1.25 * out[name]["eager"], (name, out[name])
            if name == "W4A16":
                assert out[name]["compiled_vs_eager"] < 0.05, (name, out[name])
    RESULTS["llama_small"] = out
    return json.dumps(out)


# ---------------------------------------------------------------------------
# host cost per call, side by side with F.linear
# ---------------------------------------------------------------------------
def _graph_replay(fn, reps=20):
    """A CUDA graph of `reps` calls of fn; returns replay() (time / reps =
    the kernels' time without any host work)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    return g.replay


def test_host_cost():
    """Per seed linear and M: host microseconds per call (perf_counter around
    back-to-back calls), microseconds per call back to back (CUDA events) and
    the latency of one call on an idle GPU, for F.linear (BF16), nn.Linear,
    NVFP4Linear (dynamic and static scale), nvfp4.linear, and the C call
    alone (nvfp4_linear_cuda with the module's arguments, one ctypes call);
    and the kernels' time per call under a CUDA graph (NVFP4Linear and
    F.linear captured 20 times, replayed)."""
    ms = [int(v) for v in os.environ.get("NVFP4_HOST_COST_M", "1,16").split(",")]
    shapes = SEED_LINEARS if ON_GPU else [("QKV", 768, 256), ("FC2", 256, 512)]
    rows = []
    with torch.inference_mode():
        for name, n, k in shapes:
            lin = linear(k, n, bias=False, seed=n).to(DEV)
            dyn = nt.NVFP4Linear.from_linear(lin)
            static = nt.NVFP4Linear.from_linear(lin, input_scale=0.01)
            layer = nvfp4.Layer(nvfp4.NVFP4Tensor(dyn.weight, dyn.weight_scale, dyn.weight_scale_2))
            w = lin.weight
            for m in ms:
                x = rand_bf16(m, k).to(DEV)
                # the C call alone: a copy of the module's struct as its last
                # call filled it, with that call's output and workspace kept
                y_keep = static(x)
                plan = static._plan
                args = type(plan.args).from_buffer_copy(plan.args)
                assert args.out == y_keep.data_ptr() and args.x == x.data_ptr()
                ws_keep = dict(nt._WORKSPACES)
                fast = _lib.fast("nvfp4_linear_cuda" if ON_GPU else "nvfp4_linear_cpu")

                def c_call(at=ctypes.addressof(args), fast=fast, keep=(args, y_keep, ws_keep)):
                    return fast(at)
                calls = [("F.linear", lambda: F.linear(x, w)), ("nn.Linear", lambda: lin(x)),
                         ("NVFP4Linear", lambda: dyn(x)),
                         ("NVFP4Linear static", lambda: static(x)),
                         ("nvfp4.linear", lambda: nvfp4.linear(x, layer)),
                         ("C call static", c_call)]
                row = {"linear": name, "m": m, "n": n, "k": k}
                for label, fn in calls:
                    per, host = _per_call_us(fn, 200 if m <= 16 else 50)
                    row[label] = {"us": round(per, 2), "host_us": round(host, 2)}
                    if ON_GPU:
                        row[label]["latency_us"] = round(_median_us(fn), 2)
                if ON_GPU:
                    for label, fn in (("F.linear", lambda: F.linear(x, w)),
                                      ("NVFP4Linear static", lambda: static(x)),
                                      ("NVFP4Linear", lambda: dyn(x))):
                        replay = _graph_replay(fn)
                        per, _ = _per_call_us(replay, 10)
                        row[label]["graph_us"] = round(per / 20, 2)
                row["host_over_F.linear"] = round(row["NVFP4Linear"]["host_us"] -
                                                  row["F.linear"]["host_us"], 2)
                row["host_over_F.linear_static"] = round(row["NVFP4Linear static"]["host_us"] -
                                                         row["F.linear"]["host_us"], 2)
                rows.append(row)
            del lin, dyn, static, layer, w
            if ON_GPU:
                torch.cuda.empty_cache()
    RESULTS["host_cost"] = rows
    labels = ["F.linear", "nn.Linear", "NVFP4Linear", "NVFP4Linear static", "nvfp4.linear",
              "C call static"]
    print("    host us per call (us per call back to back; latency of one call; kernels "
          "under a CUDA graph)")
    for r in rows:
        cells = []
        for lb in labels:
            c = r[lb]
            extra = (f"; {c['latency_us']:.1f}" if "latency_us" in c else "") + \
                (f"; graph {c['graph_us']:.1f}" if "graph_us" in c else "")
            cells.append(f"{lb} {c['host_us']:.1f} ({c['us']:.1f}{extra})")
        print(f"    {r['linear']:8s} M={r['m']:<4d} " + " | ".join(cells) +
              f" | NVFP4Linear - F.linear host: {r['host_over_F.linear']:+.1f} dynamic, "
              f"{r['host_over_F.linear_static']:+.1f} static")
    return f"{len(rows)} rows"


if __name__ == "__main__":
    sys.exit(run_tests(globals(), "torch_cuda", RESULTS))
