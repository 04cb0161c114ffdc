#!/bin/sh
# final.sh -- every GPU check of the sm_90a backend, each step with a time
# limit, logs in $OUT (or BUILD/gpu-logs), a summary at the end.  Binaries
# must exist (make && make gpu-tests); the Python step needs a comfy-kitchen
# wheel in .whl/ (tools/slim_ck_wheel.py) and libjansson beside
# build/libnvfp4.so.
#   sh tests/gpu/final.sh [BUILD]                              every step
#   STEPS="quantize linear check bench" sh tests/gpu/final.sh  a subset
# Steps: quantize linear gemm check streaming inkernel sanitize explain
# python bench (and rates, profile only when named).
cd "$(dirname "$0")/../.." || exit 2
B=${1:-build}
LOG=${OUT:-$B/gpu-logs}
STEPS=${STEPS:-"quantize linear gemm check streaming inkernel sanitize explain python bench"}
mkdir -p "$LOG"
run() { # name, seconds, command...
    name=$1; secs=$2; shift 2
    case " $STEPS " in *" ${name%%[0-9]*} "*) ;; *) return 0 ;; esac
    t0=$(date +%s)
    timeout "$secs" "$@" >"$LOG/$name.log" 2>&1; rc=$?
    echo "$name: exit $rc ($(( $(date +%s) - t0 ))s)" | tee -a "$LOG/summary.txt"
    grep -E "FAIL|MISMATCH" "$LOG/$name.log" | head -n 3
    tail -n 2 "$LOG/$name.log"
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv >"$LOG/gpu.txt" 2>&1
run rates 120 "$B/gpu/probe_rates"
run quantize 90 "$B/gpu/test_quantize_cuda"
run linear 300 "$B/gpu/test_linear_cuda"
run gemm 300 "$B/gpu/test_gemm_cuda"
for m in 1 128 2048; do
    run check$m 120 "$B/nvfp4" check --rows $m --json "$LOG/check$m.json"
done
for m in 1 128; do # M = 1: the in-kernel A producer; 128: the quantizer kernel + GEMM
    run streaming$m 120 "$B/nvfp4" check --rows $m --streaming-a --json "$LOG/streaming$m.json"
done
# the fused linear at M <= 8 with and without the in-kernel A producer: checked, then timed
run inkernel 200 "$B/gpu/inkernel_a"
# compute-sanitizer: 1 memcheck on every kernel (forced) on small shapes; 2 racecheck on the
# register kernels, both A paths; 3 racecheck on a stream-K wgmma plan (0 errors, 0 hazards)
run sanitize1 200 compute-sanitizer --tool memcheck --error-exitcode 1 "$B/gpu/test_gemm_cuda" --quick
run sanitize2 200 compute-sanitizer --tool racecheck --error-exitcode 1 "$B/gpu/inkernel_a" fc1:1 attn_out:8 --iters 0
run sanitize3 200 compute-sanitizer --tool racecheck --error-exitcode 1 "$B/gpu/gemm_variants" qkv 256 -1 0
run explain 200 "$B/gpu/cublas_explain" "$LOG" ${EXPLAIN_ARGS:-}
WHL=$(ls .whl/comfy_kitchen-*.whl 2>/dev/null | head -n 1)
run python 150 env PYTHONPATH=python NVFP4_LIB="$B/libnvfp4.so" NVFP4_PRELOAD="$B/libjansson.so.4" NVFP4_CLI="$B/nvfp4" \
    NVFP4_CK_WHEEL="$WHL" NVFP4_QUICK=${NVFP4_QUICK:-} PYTHONUNBUFFERED=1 python3 tests/gpu/test_python_cuda.py
# hardware counters of chosen cases (LINEAR:M:KERNEL, -1 = planned)
run profile 400 sh tests/gpu/profile.sh "$B" "$LOG/profile" "${PROFILE_CASES:-fc2:1:-1 qkv:1:-1}"
run bench 300 "$B/nvfp4" bench --m ${BENCH_M:-1,16,128,512,2048,8192} --json "$LOG/bench.json"
[ -f "$LOG/bench.log" ] && tail -n 30 "$LOG/bench.log"
cat "$LOG/summary.txt"
