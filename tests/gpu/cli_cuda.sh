#!/bin/sh
# cli_cuda.sh -- the command line on a GPU: every CUDA path against the CPU,
# bit for bit, through the files the commands write.
#   sh tests/gpu/cli_cuda.sh [BUILD]        (needs an sm_90 GPU; make first)
# Checked: `nvfp4 linear --backend cuda` (BF16 x: the fused A producer) ==
# `--backend cpu`, both quantizer variants, the quantized activations it dumps
# included; `nvfp4 matmul --backend cuda` == `--backend cpu`.  Exit 0 only if
# all hold.
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

echo "cli_cuda: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
