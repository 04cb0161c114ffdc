#!/bin/sh
# quantizer13.sh -- the fused linear's two-kernel path with each quantizer
# kernel (nvfp4_q_force_launch: -1 the rule, 0 the threshold-table kernel, 1
# the exact kernel; the thirteenth session also had 2, the exact kernel in
# CTAs of 64 threads, measured slower and removed), checked and timed beside
# the prequantized GEMM by inkernel_a; first the quantizer and linear suites
# (OUT=DIR sh dev/cuda/quantizer13.sh [BUILD]).
B=${1:-build}
L=$OUT/logs
mkdir -p "$L"
timeout 120 "$B/gpu/test_quantize_cuda" >"$L/quantize.log" 2>&1; echo "quantize rc $?: $(tail -n 1 "$L/quantize.log")"
timeout 200 "$B/gpu/test_linear_cuda" >"$L/linear.log" 2>&1; echo "linear rc $?: $(tail -n 1 "$L/linear.log")"
for mode in ${MODES:--1 0 1}; do
    echo "== quantizer launch $mode"
    NVFP4_DEV_QUANTIZER=$mode timeout 150 "$B/gpu/inkernel_a" ${CASES:-qkv:1,16,128 attn_out:1,16,128 fc1:16,128 fc2:1,16,128} \
        --iters 100 >"$L/q$mode.log" 2>&1
    echo "rc $?"; cat "$L/q$mode.log"
done
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
