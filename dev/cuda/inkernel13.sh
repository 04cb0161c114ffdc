#!/bin/sh
# inkernel13.sh -- the thirteenth session's H200 run for the in-kernel A
# producer built into every register kernel (OUT=DIR sh dev/cuda/inkernel13.sh
# [BUILD]): test_linear_cuda (the producer forced on against the quantizer
# kernel + GEMM and the CPU linear), inkernel_a (both paths checked, then
# timed beside the prequantized GEMM), racecheck and memcheck on the new
# twins, and nvfp4 bench at M = 1, 16, 128 (BENCH_M=none: no bench).
. "$(dirname "$0")/step.sh"
step linear 200 "$B/gpu/test_linear_cuda"
tail -n 1 "$L/linear.log"
step inkernel 240 "$B/gpu/inkernel_a"
cat "$L/inkernel.log"
step race 200 compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 1 "$B/gpu/inkernel_a" attn_out:1 --iters 0
step mem 150 compute-sanitizer --tool memcheck --error-exitcode 1 "$B/gpu/inkernel_a" fc1:16 qkv:8 --iters 0
if [ "${BENCH_M:-1,16,128}" != none ]; then
    step bench 240 "$B/nvfp4" bench --m ${BENCH_M:-1,16,128} --json "$L/bench.json"
    tail -n 14 "$L/bench.log"
fi
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
