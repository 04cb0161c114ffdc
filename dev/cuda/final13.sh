#!/bin/sh
# final13.sh -- the thirteenth session's final H200 run (OUT=DIR sh
# dev/cuda/final13.sh [BUILD]): the GEMM (NO_GEMM=1: skipped), quantizer and
# linear suites, inkernel_a at
# M = 1 and 2 (both fused paths checked, then timed beside the prequantized
# GEMM), racecheck and memcheck on the in-kernel twins (REGR attn-out, REGW
# FC1, REGM QKV), nvfp4 check (GEMM and --streaming-a) at M = 1 and 128, and
# the bench at M = 1, 16, 128.
. "$(dirname "$0")/step.sh"
[ -z "${NO_GEMM:-}" ] && step gemm 200 "$B/gpu/test_gemm_cuda"
step quantize 120 "$B/gpu/test_quantize_cuda"
step linear 200 "$B/gpu/test_linear_cuda"
step inkernel 120 "$B/gpu/inkernel_a" qkv:1,2 attn_out:1,2 fc1:1,2 fc2:1,2
cat "$L/inkernel.log"
step race 200 compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 1 "$B/gpu/inkernel_a" attn_out:1 --iters 0
step mem 150 compute-sanitizer --tool memcheck --error-exitcode 1 "$B/gpu/inkernel_a" fc1:1 qkv:2 --iters 0
for m in 1 128; do
    step check$m 90 "$B/nvfp4" check --rows $m --json "$L/check$m.json"
    step streaming$m 90 "$B/nvfp4" check --rows $m --streaming-a --json "$L/streaming$m.json"
done
step bench 240 "$B/nvfp4" bench --m ${BENCH_M:-1,16,128} --json "$L/bench.json"
tail -n 14 "$L/bench.log"
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
