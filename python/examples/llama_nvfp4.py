#!/usr/bin/env python3
"""A Llama-3-8B-sized transformers model in NVFP4: latency and accuracy.

    python3 python/examples/llama_nvfp4.py [--layers 4] [--markdown FILE] [--json FILE]

Builds LlamaForCausalLM from Llama-3-8B's configuration (hidden 4096, MLP
14336, 32 heads, 8 KV heads, vocabulary 128256) with --layers decoder layers
and random BF16 weights (no download), then compares three versions of it:

  BF16     the model as built
  NVFP4    nvfp4.torch.quantize_model(model, exclude="lm_head"): every linear
           of the decoder layers an NVFP4Linear (weights and activations in
           NVFP4: ComfyUI's linear, the library's kernel)
  W4A16    the same NVFP4 weights, dequantized per call and multiplied in
           BF16 (NVFP4Linear mode="w4a16": dequantize-then-linear)

For each: milliseconds per forward pass of one sequence of M tokens (every
linear sees M rows: M = 1 as in a decode step, M = 16 a short chunk, M =
2048 a prefill), without a KV cache, logits of the last position only;
then the same under torch.compile(fullgraph=True, mode="reduce-overhead");
and the relative error of the logits against the BF16 model's, ||L -
L_bf16|| / ||L_bf16||, eager and compiled, over the last position of four
random sequences of the largest M (the timed call itself, so compiling
adds no graph for it).  Progress goes to stderr; the table (Markdown) to
stdout and --markdown.

--tiny builds a small model of the same architecture (CPU-sized: the
package's tests run it there); --no-compile skips torch.compile.
"""
import argparse
import copy
import json
import os
import statistics
import sys
import time

import torch

import nvfp4
import nvfp4.torch as nt

# Llama-3-8B's config.json (the published model's), layers aside
LLAMA3_8B = dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                 num_key_value_heads=8, vocab_size=128256, max_position_embeddings=8192,
                 rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False,
                 hidden_act="silu")
TINY = dict(LLAMA3_8B, hidden_size=256, intermediate_size=512, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=1000, max_position_embeddings=512)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def build(layers, tiny, device, seed=0):
    """The BF16 model, initialized as transformers does (normal, std 0.02)."""
    import transformers
    transformers.logging.set_verbosity_error()
    config = transformers.LlamaConfig(num_hidden_layers=layers, **(TINY if tiny else LLAMA3_8B))
    torch.manual_seed(seed)
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            model = transformers.LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(before)
    return model.eval()


def variants(model):
    """{name: model}: BF16, NVFP4 (W4A4) and W4A16 on the same NVFP4 weights."""
    q = copy.deepcopy(model)
    names = nt.quantize_model(q, exclude="lm_head")
    w4a16 = copy.deepcopy(q)
    for m in w4a16.modules():
        if isinstance(m, nt.NVFP4Linear):
            m.mode = "w4a16"
    return {"BF16": model, "NVFP4": q, "W4A16": w4a16}, names


def inputs(m, vocab, device, gen):
    """input_ids of one sequence of M tokens.  (One shape family: compiled,
    M = 1 is one graph and every M > 1 shares one dynamic-shape graph.)"""
    return torch.randint(0, vocab, (1, m), generator=gen).to(device)


def ms_per_call(fn, device, iters, warmup=3):
    """Milliseconds per call, `iters` calls back to back (CUDA events on a GPU),
    the median of three such runs."""
    for _ in range(warmup):
        fn()
    runs = []
    for _ in range(3):
        if device.type == "cuda":
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(iters):
                fn()
            e.record()
            e.synchronize()
            runs.append(s.elapsed_time(e) / iters)
        else:
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            runs.append((time.perf_counter() - t0) * 1e3 / iters)
    return statistics.median(runs)


def rel_error(logits, ref):
    d = (logits.float() - ref.float()).norm()
    return float(d / ref.float().norm())


def run(args, done=None):
    """The measurements; done(result) is called after each mode (eager, then
    compiled) with what is measured so far."""
    device = torch.device(args.device)
    ms = [int(v) for v in args.ms.split(",")]
    t0 = time.time()
    base = build(args.layers, args.tiny, device)
    models, names = variants(base)
    vocab = base.config.vocab_size
    log(f"built and quantized in {time.time() - t0:.1f} s: {len(names)} NVFP4Linear layers")
    gen = torch.Generator().manual_seed(1)
    ids = {m: inputs(m, vocab, device, gen) for m in ms}
    probes = [inputs(max(ms), vocab, device, gen) for _ in range(4)]  # for the accuracy
    result = {"config": {"layers": args.layers, "tiny": args.tiny,
                         **(TINY if args.tiny else LLAMA3_8B)},
              "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "torch": torch.__version__, "library": nvfp4.library_path(),
              "ms": ms, "rows": {}}
    try:
        import transformers
        result["transformers"] = transformers.__version__
    except ImportError:  # pragma: no cover - build() imported it
        pass
    modes = [("eager", None)]
    if args.compile:
        opts = dict(fullgraph=True, backend=args.compile_backend)
        if args.compile_backend == "inductor":  # modes are Inductor's
            opts["mode"] = args.compile_mode
        modes.append(("compiled", opts))
        result["compile"] = opts
    eager_logits = {}
    with torch.inference_mode():
        for mode, opts in modes:
            for name, model in models.items():
                row = result["rows"].setdefault(name, {})
                fn = model
                if opts is not None:
                    torch._dynamo.reset()
                    fn = torch.compile(model, **opts)
                for m in ms:
                    t1 = time.time()
                    x = ids[m]
                    row[f"{mode}_ms_{m}"] = ms_per_call(
                        lambda: fn(input_ids=x, use_cache=False, logits_to_keep=1).logits,
                        device, args.iters if m <= 16 else max(1, args.iters // 4))
                    log(f"{mode:8s} {name:5s} M={m}: {row[f'{mode}_ms_{m}']:.3f} ms per forward "
                        f"({time.time() - t1:.1f} s)")
                logits = torch.cat([fn(input_ids=p, use_cache=False, logits_to_keep=1).logits
                                    .clone() for p in probes])
                if mode == "eager":
                    eager_logits[name] = logits
                else:
                    row["compiled_vs_eager"] = rel_error(logits, eager_logits[name])
                row[f"{mode}_rel_err"] = rel_error(logits, eager_logits["BF16"])
                del fn
            if device.type == "cuda":
                torch.cuda.synchronize()
            if done is not None:
                done(result)
    return result


def markdown(result, command):
    ms = result["ms"]
    modes = [m for m in ("eager", "compiled") if f"{m}_ms_{ms[0]}" in result["rows"]["BF16"]]
    head = ["model"] + [f"{mode} M = {m}, ms" for mode in modes for m in ms] + \
        [f"logits rel. error, {mode}" for mode in modes]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, row in result["rows"].items():
        cells = [name] + [f"{row[f'{mode}_ms_{m}']:.3f}" for mode in modes for m in ms]
        cells += ["0 (reference)" if name == "BF16" and mode == "eager" else
                  f"{row[f'{mode}_rel_err']:.4f}" for mode in modes]
        lines.append("| " + " | ".join(cells) + " |")
    c = result["config"]
    notes = [f"{result['device']}, torch {result['torch']}, transformers "
             f"{result.get('transformers', '?')}; LlamaForCausalLM, {c['layers']} layers of "
             f"hidden {c['hidden_size']} / MLP {c['intermediate_size']}, vocabulary "
             f"{c['vocab_size']}, random BF16 weights; lm_head in BF16 in every model.",
             f"Made by: `{command}`"]
    if "compiled" in modes:
        notes.append("Compiled: torch.compile(model, " + ", ".join(
            f"{k}={v!r}" for k, v in result["compile"].items()) + ").")
        diffs = ", ".join(f"{n} {r['compiled_vs_eager']:.2e}" for n, r in result["rows"].items())
        notes.append(f"Compiled vs eager logits (rel.): {diffs}.")
    return "\n".join(lines) + "\n\n" + "\n\n".join(notes) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--layers", type=int, default=4, help="decoder layers (default 4)")
    ap.add_argument("--ms", default="1,16,2048", help="tokens per forward (default 1,16,2048)")
    ap.add_argument("--iters", type=int, default=20, help="forwards timed per run (default 20; "
                    "a quarter for M > 16)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tiny", action="store_true", help="a small model of the same kind")
    ap.add_argument("--no-compile", dest="compile", action="store_false",
                    help="skip torch.compile")
    ap.add_argument("--compile-mode", default="reduce-overhead",
                    help="torch.compile's mode (default reduce-overhead: CUDA graphs)")
    ap.add_argument("--compile-backend", default="inductor",
                    help="torch.compile's backend (default inductor; aot_eager runs the eager "
                         "kernels: a quick check of the tracing)")
    ap.add_argument("--json", help="write the results here too")
    ap.add_argument("--markdown", help="write the table here too")
    args = ap.parse_args()
    if args.layers < 1 or args.iters < 1:
        ap.error("--layers and --iters must be at least 1")
    try:
        import transformers  # noqa: F401
    except ImportError:
        ap.error("this example needs transformers (pip install transformers)")
    command = ("python3 python/examples/llama_nvfp4.py " + " ".join(sys.argv[1:])).strip()

    def write(result):
        """The files, after each mode: a run cut short keeps its eager table."""
        table = markdown(result, command)
        for path, text in ((args.markdown, table), (args.json, json.dumps(result, indent=1))):
            if path:
                tmp = path + ".tmp"
                with open(tmp, "w") as f:
                    f.write(text)
                os.replace(tmp, path)
        return table

    result = run(args, write)
    print(write(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
