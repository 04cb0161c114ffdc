#!/bin/sh
# cli_cuda.sh -- the command line on a GPU: every CUDA path against the CPU,
# bit for bit, through the files the commands write.
#   sh tests/gpu/cli_cuda.sh [BUILD]        (needs an sm_90 GPU; make first)
# Checked: `nvfp4 linear --backend cuda` (BF16 x: the fused A producer) ==
# `--backend cpu`, both quantizer variants, the quantized activations it dumps
# included; `nvfp4 matmul --backend cuda` == `--backend cpu`; a layer of
# N = 5, K = 17 (quantize pads both, records the 5 rows; the GPU runs N padded
# to 16) with activations of K = 17, on both backends, and that layer converted
# to ModelOpt's layout on the GPU.  Exit 0 only if all hold.
cd "$(dirname "$0")/../.."
B=${1:-build}
N=$B/nvfp4
T=$(mktemp -d "${TMPDIR:-/tmp}/nvfp4-gpu-cli.XXXXXX") || exit 2
trap 'rm -rf "$T"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
same() { # what, file1, file2
    if cmp -s "$2" "$3"; then ok; else bad "$1: $2 and $3 differ"; fi
}

"$N" example "$T/ex.st" >/dev/null || { echo "example failed"; exit 2; }
"$N" quantize "$T/ex.st" "$T/q.st" >/dev/null || { echo "quantize failed"; exit 2; }

# The example layer has no input_scale, so static mode is refused by both
# backends alike (tests/gpu/test_linear_cuda.c covers static scales).
L=blocks.0.attn.qkv
for variant in eager cuda; do
    tag=$variant
    if ! "$N" linear "$T/q.st:$L" "$T/ex.st:x" -o "$T/$tag.cpu" --variant $variant \
            --input-scale dynamic --backend cpu --dump-quantized "$T/$tag.xq.cpu" >"$T/log" 2>&1; then
        bad "linear cpu $tag: $(cat "$T/log")"
        continue
    fi
    if "$N" linear "$T/q.st:$L" "$T/ex.st:x" -o "$T/$tag.gpu" --variant $variant \
            --input-scale dynamic --backend cuda --dump-quantized "$T/$tag.xq.gpu" >"$T/log" 2>&1; then
        same "linear $tag (raw, out)" "$T/$tag.cpu" "$T/$tag.gpu"
        same "linear $tag (quantized activations)" "$T/$tag.xq.cpu" "$T/$tag.xq.gpu"
    else
        bad "linear cuda $tag: $(cat "$T/log")"
    fi
    if "$N" linear "$T/q.st:$L" "$T/ex.st:x" -o "$T/$tag.st" --input-scale static \
            --backend cuda >"$T/log" 2>&1; then
        bad "linear cuda static without input_scale should fail"
    elif grep -q "input_scale" "$T/log"; then ok; else bad "static refusal: $(cat "$T/log")"; fi
done

"$N" linear "$T/q.st:blocks.0.attn.qkv" "$T/ex.st:x" -o "$T/l.st" --backend cpu \
    --input-scale dynamic --dump-quantized "$T/xq.st" >/dev/null 2>&1 || bad "linear for matmul"
for be in cpu cuda; do
    "$N" matmul "$T/xq.st:x" "$T/q.st:blocks.0.attn.qkv.weight" -o "$T/mm.$be" --backend $be \
        --bias "$T/ex.st:blocks.0.attn.qkv.bias" >/dev/null 2>&1 || bad "matmul $be"
done
same "matmul cuda == cpu" "$T/mm.cpu" "$T/mm.cuda"

# shapes that are not multiples of 16: a 5 x 17 weight, 3 x 17 activations
python3 - "$T/w17.st" <<'PY' || bad "writing the 5 x 17 layer"
import json, random, struct, sys
rnd = random.Random(17)
bf16 = lambda n, s: b"".join(struct.pack("<f", rnd.gauss(0, s))[2:] for _ in range(n))
tensors = [("lin.weight", [5, 17], bf16(85, 0.5)), ("x", [3, 17], bf16(51, 1.0))]
header, off, blobs = {}, 0, []
for name, shape, data in tensors:
    header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + len(data)]}
    off += len(data)
    blobs.append(data)
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
PY
"$N" quantize "$T/w17.st" "$T/w17q.st" >/dev/null 2>&1 || bad "quantize 5 x 17"
for be in cpu cuda; do
    "$N" linear "$T/w17q.st:lin" "$T/w17.st:x" -o "$T/l17.$be" --backend $be \
        --dump-quantized "$T/x17.$be" >"$T/log" 2>&1 || bad "linear N=5 K=17 $be: $(cat "$T/log")"
    "$N" matmul "$T/x17.cpu:x" "$T/w17q.st:lin.weight" -o "$T/m17.$be" --backend $be \
        >"$T/log" 2>&1 || bad "matmul N=5 $be: $(cat "$T/log")"
done
same "linear N=5 K=17 cuda == cpu" "$T/l17.cpu" "$T/l17.cuda"
same "linear N=5 K=17 quantized activations" "$T/x17.cpu" "$T/x17.cuda"
same "matmul N=5 cuda == cpu" "$T/m17.cpu" "$T/m17.cuda"
# the same layer converted to ModelOpt's layout: its rows record travels
"$N" convert "$T/w17q.st" "$T/w17m.safetensors" --to modelopt -q >"$T/log" 2>&1 ||
    bad "convert 5 x 17 to modelopt: $(cat "$T/log")"
"$N" linear "$T/w17m.safetensors:lin" "$T/w17.st:x" -o "$T/l17m.cuda" --backend cuda >"$T/log" 2>&1 ||
    bad "linear N=5 K=17 from ModelOpt, cuda: $(cat "$T/log")"
same "linear N=5 K=17: ModelOpt's layout on cuda == ComfyUI's on cpu" "$T/l17.cpu" "$T/l17m.cuda"

echo "cli_cuda: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
