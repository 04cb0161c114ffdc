#!/usr/bin/env python3
"""Golden NVFP4 checkpoints and quantizations made by the real tools, for the format tests.

Pinned (checked at start; the run stops on any other version):
    nvidia-modelopt 0.47.0, compressed-tensors 0.20.0, gguf 0.19.0, torch 2.11.0 (CPU)

Written under tests/golden/ (small: a few hundred KB in all):

  modelopt/quant/CASE.safetensors
      x                        the input (BF16, F16 or F32, 2-D)
      given.weight_scale_2     F32 [] when the case passes a per-tensor scale (a fused layer's)
      expect.weight            U8 [rows, ceil(cols/16)*8]  NVFP4QTensor.quantize's packed codes
      expect.weight_scale      U8 [rows, ceil(cols/16)]     its E4M3 block scales (bytes)
      expect.weight_scale_2    F32 []                       its per-tensor scale
  compressed-tensors/quant/CASE.safetensors
      x, given.weight_global_scale (F32 [1], optional),
      expect.weight_packed, expect.weight_scale (U8 bytes of the F8 scales), expect.weight_global_scale
      made as llm-compressor makes them, with compressed-tensors' own functions: the min-max
      observer's statistics in x's dtype, generate_gparam, calculate_qparams, the scale kept in
      the weight's dtype, NVFP4PackedCompressor.compress (the CPU path).
  modelopt/llama-nvfp4/        export_hf_checkpoint of a tiny Llama (NVFP4_DEFAULT_CFG, attention
                               bias), sharded (model.safetensors.index.json)
  modelopt/llama-mixed/        the same model, MIXED_PRECISION: attention NVFP4 weight-only (no
                               input_scale), down_proj FP8, o_proj excluded; one file
  compressed-tensors/llama-from-modelopt/  compressed-tensors' own ModelOptNvfp4Converter run on
                               modelopt/llama-nvfp4 (convert_checkpoint)
  compressed-tensors/llama-nvfp4/  the tiny Llama quantized the llm-compressor way (above):
                               apply_quantization_config, the observers' parameters,
                               ModelCompressor.compress_model, save_pretrained
  gguf/llama-nvfp4.gguf        modelopt/llama-nvfp4 repacked the way llama.cpp's converter does
                               (block_nvfp4 super-blocks, sign-stripped scale bytes, F32 ".scale"
                               and ".input_scale" tensors beside each weight), written by gguf-py
  gguf/scale-bytes.gguf + gguf/scale-bytes.expect.safetensors
                               one NVFP4 tensor whose scale bytes are every byte value and whose
                               codes are every code, and gguf-py's dequantization of it (F32)

Not run by the tests (needs the packages above: pip install nvidia-modelopt==0.47.0
compressed-tensors==0.20.0 gguf==0.19.0 transformers):
    python3 tools/gen_format_golden.py [tests/golden]
"""
import importlib.metadata
import os
import shutil
import sys

PINS = {"nvidia-modelopt": "0.47.0", "compressed-tensors": "0.20.0", "gguf": "0.19.0", "safetensors": "0.8.0"}
for pkg, want in PINS.items():
    have = importlib.metadata.version(pkg)
    if have != want:
        sys.exit(f"gen_format_golden: {pkg} {have} is installed; the golden data is pinned to {want}")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

import gguf  # noqa: E402
import modelopt.torch.quantization as mtq  # noqa: E402
from modelopt.torch.export import export_hf_checkpoint  # noqa: E402
from modelopt.torch.quantization.qtensor.nvfp4_tensor import NVFP4QTensor  # noqa: E402
from compressed_tensors.compressors.nvfp4.base import NVFP4PackedCompressor  # noqa: E402
from compressed_tensors.entrypoints.convert.convert_checkpoint import convert_checkpoint  # noqa: E402
from compressed_tensors.entrypoints.convert.converters.modelopt_nvfp4 import ModelOptNvfp4Converter  # noqa: E402
from compressed_tensors.compressors import ModelCompressor  # noqa: E402
from compressed_tensors.quantization import (  # noqa: E402
    QuantizationConfig,
    QuantizationScheme,
    apply_quantization_config,
)
from compressed_tensors.quantization.quant_scheme import NVFP4  # noqa: E402
from compressed_tensors.quantization.utils import calculate_qparams, generate_gparam  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

VERSIONS = (f"nvidia-modelopt {PINS['nvidia-modelopt']}, compressed-tensors {PINS['compressed-tensors']}, "
            f"gguf {PINS['gguf']}, torch {torch.__version__} on the CPU; tools/gen_format_golden.py")


def save(path, tensors, metadata):
    """safetensors' own writer, through a temporary file."""
    save_file({k: v.contiguous().clone() for k, v in tensors.items()}, path + ".tmp", metadata=metadata)
    os.replace(path + ".tmp", path)


# ----------------------------------------------------------------------------- inputs

def cases():
    g = torch.Generator().manual_seed(20261206)
    torch.manual_seed(20261206)  # torch.distributions draws from the global generator

    def randn(r, c, s=1.0, dtype=torch.bfloat16):
        return (torch.randn(r, c, generator=g) * s).to(dtype)

    def rand(r, c):
        return torch.rand(r, c, generator=g)

    def bf16_bits(bits):
        return torch.tensor(bits, dtype=torch.int16).view(torch.bfloat16)

    c = {}
    c["gauss"] = randn(16, 64)
    c["weights-0.02"] = randn(16, 128, 0.02)
    c["student-t3"] = torch.distributions.StudentT(3.0).sample((16, 64)).to(torch.bfloat16)
    c["cauchy"] = torch.distributions.Cauchy(0.0, 1.0).sample((16, 64)).clamp(-1e30, 1e30).to(torch.bfloat16)
    c["uniform"] = (rand(16, 64) * 2 - 1).to(torch.bfloat16)
    x = randn(16, 64); x[rand(16, 64) < 0.9] = 0; c["sparse-90pct"] = x
    x = randn(16, 64); x[:, 16:48] = 0; x[5, :] = 0; c["zero-blocks-and-row"] = x
    x = randn(16, 64); x[x.abs() < 0.5] = -0.0; c["negative-zeros"] = x
    c["subnormal-bf16"] = (torch.randn(16, 64, generator=g) * 1e-38).to(torch.bfloat16)
    x = randn(16, 64); x[::3, ::7] *= 1e-36; c["mixed-subnormal"] = x
    c["near-bf16-max"] = randn(16, 64, 1e37)
    x = randn(16, 64) * torch.logspace(-30, 30, 16).unsqueeze(1).to(torch.bfloat16); c["huge-tiny-rows"] = x.to(torch.bfloat16)
    x = randn(16, 64); x[:, 3] *= 1e6; c["block-outliers"] = x
    c["e2m1-grid"] = torch.tensor([0, .25, .5, .75, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, -6]).repeat(16, 4).to(torch.bfloat16)
    c["e2m1-grid-ties"] = (torch.tensor([0, .25, .75, 1.25, 1.75, 2.5, 3.5, 5, -.25, -.75, -1.25, -1.75, -2.5, -3.5, -5, 6])
                           .repeat(16, 4) * torch.tensor([1, 3, 5, 7]).repeat_interleave(16)).to(torch.bfloat16)
    c["constant"] = torch.full((16, 64), 0.3).to(torch.bfloat16)
    c["all-zero"] = torch.zeros(16, 64, dtype=torch.bfloat16)
    x = randn(16, 64); x[3, 5] = float("inf"); x[9, 9] = float("-inf"); c["inf"] = x
    x = randn(16, 64); x[3, 5] = float("nan"); c["one-nan"] = x
    x = randn(16, 64); x[3, 5] = bf16_bits([-0x40])[0]; x[12, 60] = bf16_bits([0x7F81])[0]; c["nan-signs-payloads"] = x
    x = randn(16, 64); x[3, 5] = float("nan"); x[9, 9] = float("inf"); c["nan-and-inf"] = x
    x = randn(16, 64); x[2, 16:32] = float("nan"); c["nan-block"] = x
    c["all-nan"] = torch.full((16, 32), float("nan"), dtype=torch.bfloat16)
    c["rows-1"] = randn(1, 64)
    c["rows-17-cols-48"] = randn(17, 48)
    c["rows-130-cols-16"] = randn(130, 16, 0.05)
    c["f32-gauss"] = torch.randn(16, 64, generator=g)
    c["f16-gauss"] = torch.randn(16, 64, generator=g).half()
    x = torch.randn(16, 64, generator=g); x[1, 2] = float("nan"); c["f32-one-nan"] = x
    x = torch.randn(16, 64, generator=g).half(); x[1, 2] = float("nan"); c["f16-one-nan"] = x
    c["f32-subnormal"] = torch.randn(16, 64, generator=g) * 1e-40
    c["f16-subnormal"] = (torch.randn(16, 64, generator=g) * 1e-6).half()
    c["f32-huge"] = torch.randn(16, 64, generator=g) * 1e36
    # NaN blocks where PyTorch's vectorized loops end: the last (blocks mod
    # vector width) blocks go through its scalar tail
    for dt, name in ((torch.bfloat16, "bf16"), (torch.float16, "f16"), (torch.float32, "f32")):
        x = torch.randn(2, 25 * 16, generator=g).to(dt)
        for r, b in ((0, 0), (0, 15), (0, 16), (1, 6), (1, 24)):
            x[r, b * 16 + 5] = float("nan")
        c["nan-tail-" + name] = x
    return c


def modelopt_only_cases():
    """Columns that are not a multiple of 16: ModelOpt pads them, compressed-tensors refuses."""
    g = torch.Generator().manual_seed(7)
    return {"cols-40-padded": (torch.randn(16, 40, generator=g)).to(torch.bfloat16),
            "cols-100-padded": (torch.randn(9, 100, generator=g) * 3).to(torch.bfloat16)}


def given_scale_cases():
    """(name, x, factor): the per-tensor scale passed in, factor x the tensor's own."""
    g = torch.Generator().manual_seed(11)
    x = torch.randn(16, 64, generator=g).to(torch.bfloat16)
    return [("given-fused", x, 1.7), ("given-too-small", x, 0.01), ("given-power-of-two", x, None)]


# ----------------------------------------------------------------------------- ModelOpt

def modelopt_quantize(x, wsf2=None):
    q, scale, s2 = NVFP4QTensor.quantize(x, 16, None, wsf2)
    return q._quantized_data, scale.view(torch.uint8), s2.float().reshape(())


def gen_modelopt_quant(root):
    out = os.path.join(root, "modelopt", "quant")
    os.makedirs(out, exist_ok=True)
    meta = {"generator": f"NVFP4QTensor.quantize(x, 16); {VERSIONS}"}
    for name, x in {**cases(), **modelopt_only_cases()}.items():
        codes, scales, s2 = modelopt_quantize(x)
        save(os.path.join(out, name + ".safetensors"),
             {"x": x, "expect.weight": codes, "expect.weight_scale": scales, "expect.weight_scale_2": s2}, meta)
    for name, x, factor in given_scale_cases():
        own = x.abs().max().float() / 2688.0
        given = (own * factor) if factor is not None else torch.tensor(2.0 ** -9)
        given = given.float().reshape(())
        codes, scales, s2 = modelopt_quantize(x, given)
        assert s2.view(torch.int32).item() == given.view(torch.int32).item()
        save(os.path.join(out, name + ".safetensors"),
             {"x": x, "given.weight_scale_2": given, "expect.weight": codes, "expect.weight_scale": scales,
              "expect.weight_scale_2": s2}, meta)
    print("modelopt/quant:", len(os.listdir(out)), "cases")


# ----------------------------------------------------------------------------- compressed-tensors

CT_SCHEME = QuantizationScheme(targets=["Linear"], **NVFP4)


def ct_min_max(x):
    """The min-max observer's statistics: (1, rows, groups, 16) reduced over dims (0, -1)."""
    xv = x.unflatten(-1, (-1, 16)).unsqueeze(0)
    return torch.amin(xv, dim=(0, -1)), torch.amax(xv, dim=(0, -1))


def ct_global_scale(mn, mx):
    """Observer.get_global_scale: the tensor's absmax in the statistics' dtype, generate_gparam."""
    a = torch.max(mx.max(), -mn.min())
    return generate_gparam(-a.reshape(1), a.reshape(1))


def ct_quantize(x, gs=None):
    mn, mx = ct_min_max(x)
    if gs is None:
        gs = ct_global_scale(mn, mx)
    scale, _ = calculate_qparams(mn, mx, CT_SCHEME.weights, global_scale=gs)
    # initialize_qparams registers weight_scale in the weight's dtype
    sd = NVFP4PackedCompressor.compress({"weight": x, "weight_scale": scale.to(x.dtype),
                                         "weight_global_scale": gs}, CT_SCHEME)
    return sd["weight_packed"], sd["weight_scale"].view(torch.uint8), gs


def gen_ct_quant(root):
    out = os.path.join(root, "compressed-tensors", "quant")
    os.makedirs(out, exist_ok=True)
    meta = {"generator": "min-max statistics in x's dtype, generate_gparam, calculate_qparams, "
                         f"NVFP4PackedCompressor.compress; {VERSIONS}"}
    for name, x in cases().items():
        packed, scales, gs = ct_quantize(x)
        save(os.path.join(out, name + ".safetensors"),
             {"x": x, "expect.weight_packed": packed, "expect.weight_scale": scales,
              "expect.weight_global_scale": gs}, meta)
    for name, x, factor in given_scale_cases():
        mn, mx = ct_min_max(x)
        own = ct_global_scale(mn, mx)
        given = (own / factor) if factor is not None else torch.tensor([512.0])
        given = given.float().reshape(1)
        packed, scales, gs = ct_quantize(x, given)
        save(os.path.join(out, name + ".safetensors"),
             {"x": x, "given.weight_global_scale": given, "expect.weight_packed": packed,
              "expect.weight_scale": scales, "expect.weight_global_scale": gs}, meta)
    print("compressed-tensors/quant:", len(os.listdir(out)), "cases")


# ----------------------------------------------------------------------------- checkpoints

def tiny_llama(seed):
    torch.manual_seed(seed)
    cfg = LlamaConfig(architectures=["LlamaForCausalLM"], vocab_size=32, hidden_size=64, intermediate_size=128,
                      num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=64, attention_bias=True, tie_word_embeddings=False)
    return LlamaForCausalLM(cfg).to(torch.bfloat16)


def calib(model):
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for _ in range(2):
            model(torch.randint(0, 32, (1, 16), generator=g))


def tidy_dir(d):
    """Keep what a loader reads: weights, index and the two configs."""
    for f in os.listdir(d):
        if not (f.endswith(".safetensors") or f.endswith(".json")) or f == "generation_config.json":
            os.remove(os.path.join(d, f))


def gen_modelopt_ckpts(root):
    d = os.path.join(root, "modelopt", "llama-nvfp4")
    shutil.rmtree(d, ignore_errors=True)
    model = mtq.quantize(tiny_llama(1), mtq.NVFP4_DEFAULT_CFG, calib)
    export_hf_checkpoint(model, export_dir=d, max_shard_size="24KB")
    tidy_dir(d)
    print("modelopt/llama-nvfp4:", sorted(os.listdir(d)))

    d = os.path.join(root, "modelopt", "llama-mixed")
    shutil.rmtree(d, ignore_errors=True)
    cfg = {"quant_cfg": list(mtq.W4A16_NVFP4_CFG["quant_cfg"]) + [
        {"quantizer_name": "*mlp.down_proj.weight_quantizer", "cfg": {"num_bits": [4, 3], "axis": None}},
        {"quantizer_name": "*mlp.down_proj.input_quantizer", "cfg": {"num_bits": [4, 3], "axis": None}},
        {"quantizer_name": "*self_attn.o_proj*", "enable": False}],
        "algorithm": mtq.W4A16_NVFP4_CFG.get("algorithm", "max")}
    model = mtq.quantize(tiny_llama(2), cfg, calib)
    export_hf_checkpoint(model, export_dir=d)
    tidy_dir(d)
    print("modelopt/llama-mixed:", sorted(os.listdir(d)))


def gen_ct_ckpts(root):
    src = os.path.join(root, "modelopt", "llama-nvfp4")
    d = os.path.join(root, "compressed-tensors", "llama-from-modelopt")
    shutil.rmtree(d, ignore_errors=True)
    convert_checkpoint(src, d, ModelOptNvfp4Converter(ignore=["lm_head", "re:.*embed_tokens"], targets=["Linear"]),
                       max_workers=1, device="cpu")
    tidy_dir(d)
    print("compressed-tensors/llama-from-modelopt:", sorted(os.listdir(d)))

    # native: the llm-compressor recipe's arithmetic on the BF16 model
    d = os.path.join(root, "compressed-tensors", "llama-nvfp4")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    model = tiny_llama(1)
    acts = {}

    def hook(name):
        def f(mod, inp):
            a = inp[0].reshape(-1, inp[0].shape[-1])
            mn, mx = ct_min_max(a)
            prev = acts.get(name)
            acts[name] = (mn.min(), mx.max()) if prev is None else (torch.min(prev[0], mn.min()), torch.max(prev[1], mx.max()))
        return f
    hooks = [m.register_forward_pre_hook(hook(n)) for n, m in model.named_modules()
             if isinstance(m, torch.nn.Linear) and n != "lm_head"]
    calib(model)
    for h in hooks:
        h.remove()
    # compressed-tensors' own model path: its parameters, set as the observers
    # would, then ModelCompressor.compress_model and save_pretrained
    apply_quantization_config(model, QuantizationConfig(config_groups={"group_0": CT_SCHEME}, ignore=["lm_head"],
                                                        format="nvfp4-pack-quantized"))
    for name, m in model.named_modules():
        if name not in acts:
            continue
        mn, mx = ct_min_max(m.weight.data)
        gs = ct_global_scale(mn, mx)
        scale, _ = calculate_qparams(mn, mx, CT_SCHEME.weights, global_scale=gs)
        m.weight_global_scale.data.copy_(gs)
        m.weight_scale.data.copy_(scale.to(m.weight_scale.dtype))
        amin, amax = acts[name]
        m.input_global_scale.data.copy_(generate_gparam(amin.reshape(1), amax.reshape(1)))
    compressor = ModelCompressor.from_pretrained_model(model, quantization_format="nvfp4-pack-quantized")
    compressor.compress_model(model)
    shutil.rmtree(d)
    model.save_pretrained(d)
    compressor.update_config(d)
    tidy_dir(d)
    print("compressed-tensors/llama-nvfp4:", sorted(os.listdir(d)))


# ----------------------------------------------------------------------------- GGUF

def ggml_nvfp4_blocks(weight_u8, scale_u8):
    """llama.cpp's NVFP4 repack: 16 lo-first codes -> byte j holds elements j and j + 8;
    four sign-stripped scale bytes then 32 code bytes per 64 elements."""
    rows, nblk = scale_u8.shape
    assert nblk % 4 == 0
    w = weight_u8.reshape(rows, nblk, 8)
    codes = np.stack([w & 0x0F, w >> 4], axis=-1).reshape(rows, nblk, 16)
    qs = (codes[:, :, :8] | (codes[:, :, 8:] << 4)).astype(np.uint8)
    d = (scale_u8 & 0x7F).reshape(rows, nblk // 4, 4)
    qs = qs.reshape(rows, nblk // 4, 32)
    return np.concatenate([d, qs], axis=-1).reshape(rows, nblk // 4 * 36)


def gen_gguf(root):
    out = os.path.join(root, "gguf")
    os.makedirs(out, exist_ok=True)
    src = os.path.join(root, "modelopt", "llama-nvfp4")
    tensors = {}
    for f in sorted(os.listdir(src)):
        if f.endswith(".safetensors"):
            for name, t in load_file(os.path.join(src, f)).items():
                tensors[name] = (t.dtype, list(t.shape), t)
    w = gguf.GGUFWriter(os.path.join(out, "llama-nvfp4.gguf"), "llama")
    w.add_string("general.name", "tiny-llama-nvfp4")
    for name in sorted(tensors):
        dtype, shape, t = tensors[name]
        if name.endswith((".weight_scale", ".weight_scale_2", ".input_scale")):
            continue
        base = name[:-len(".weight")] if name.endswith(".weight") else None
        if base and base + ".weight_scale" in tensors and dtype == torch.uint8:
            sc = tensors[base + ".weight_scale"][2].view(torch.uint8).numpy()
            w.add_tensor(name, ggml_nvfp4_blocks(t.numpy(), sc), raw_dtype=gguf.GGMLQuantizationType.NVFP4)
            for suffix, key in ((".scale", ".weight_scale_2"), (".input_scale", ".input_scale")):
                if base + key in tensors:
                    w.add_tensor(base + suffix, tensors[base + key][2].float().numpy().reshape(1).copy())
            continue
        if dtype == torch.bfloat16:
            w.add_tensor(name, t.view(torch.int16).numpy().view(np.uint16), raw_dtype=gguf.GGMLQuantizationType.BF16)
        else:
            assert dtype == torch.float32, (name, dtype)
            w.add_tensor(name, t.numpy())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    # every scale byte and every code, and gguf-py's decoding of them
    rows, cols = 32, 128
    allb = np.arange(256, dtype=np.uint8).reshape(rows, cols // 16)
    codes = ((np.arange(rows * cols) * 7) % 16).astype(np.uint8).reshape(rows, cols)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    blocks = np.zeros((rows, cols // 64 * 36), np.uint8)
    for r in range(rows):
        for b in range(cols // 64):
            blocks[r, b * 36: b * 36 + 4] = allb[r, b * 4: b * 4 + 4]
            sub = codes[r, b * 64:(b + 1) * 64].reshape(4, 16)
            blocks[r, b * 36 + 4: b * 36 + 36] = (sub[:, :8] | (sub[:, 8:] << 4)).reshape(32)
    path = os.path.join(out, "scale-bytes.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_tensor("t.weight", blocks, raw_dtype=gguf.GGMLQuantizationType.NVFP4)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    deq = gguf.quants.dequantize(blocks, gguf.GGMLQuantizationType.NVFP4).astype(np.float32)
    save(os.path.join(out, "scale-bytes.expect.safetensors"),
         {"codes": torch.from_numpy(packed), "scales": torch.from_numpy(allb.copy()),
          "dequantized": torch.from_numpy(np.ascontiguousarray(deq))},
         {"generator": f"gguf.quants.dequantize (NVFP4); {VERSIONS}"})
    print("gguf:", sorted(os.listdir(out)))


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "tests/golden"
    torch.set_num_threads(1)
    gen_modelopt_quant(root)
    gen_ct_quant(root)
    gen_modelopt_ckpts(root)
    gen_ct_ckpts(root)
    gen_gguf(root)


if __name__ == "__main__":
    main()
