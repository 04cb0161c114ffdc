#!/bin/sh
# final.sh -- one H200 session: the streaming-A and GEMM bit-exactness tests,
# `nvfp4 check` at M=128 (prequantized and --streaming-a), the CLI's CUDA
# paths against its CPU ones (cli_cuda.sh), and `nvfp4 bench`.  Binaries must exist
# (make && make gpu-tests).  Logs and JSON go to $OUT (or build/gpu-logs).
cd "$(dirname "$0")/../.."
B=${1:-build}
LOG=${OUT:-$B/gpu-logs}
mkdir -p "$LOG"
run() { # name, seconds, command...
    name=$1; secs=$2; shift 2
    t0=$(date +%s)
    timeout "$secs" "$@" >"$LOG/$name.log" 2>&1; rc=$?
    echo "$name: exit $rc ($(( $(date +%s) - t0 ))s)" | tee -a "$LOG/summary.txt"
    tail -n 4 "$LOG/$name.log"
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv >"$LOG/gpu.txt" 2>&1
run test_linear_cuda 150 "$B/gpu/test_linear_cuda"
run test_quantize_cuda 60 "$B/gpu/test_quantize_cuda"
run test_gemm_cuda 60 "$B/gpu/test_gemm_cuda" --quick
run check128 90 "$B/nvfp4" check --json "$LOG/check128.json"
run check128_streaming 90 "$B/nvfp4" check --streaming-a --json "$LOG/check128_streaming.json"
run cli_cuda 60 sh tests/gpu/cli_cuda.sh "$B"
run bench 200 "$B/nvfp4" bench --json "$LOG/bench.json"
cat "$LOG/check128.log" "$LOG/check128_streaming.log" "$LOG/cli_cuda.log"
cat "$LOG/bench.log" | tail -n 40
cat "$LOG/summary.txt"
