#!/bin/sh
# run.sh -- run the H200 tests: bit-exactness, compute-sanitizer, and the bench.
#   sh tests/gpu/run.sh [BUILD]      (BUILD defaults to build; binaries must exist:
#                                      `make gpu-tests BUILD=...` on a machine with nvcc)
# Logs go to $OUT when it is set (the device tool), else to BUILD/gpu-logs.
# Exit status 0 only if every step passed.
cd "$(dirname "$0")/../.."
B=${1:-build}
LOG=${OUT:-$B/gpu-logs}
mkdir -p "$LOG"
status=0
step() { # name, command...
    name=$1; shift
    t0=$(date +%s)
    if "$@" >"$LOG/$name.log" 2>&1; then r=PASS; else r=FAIL; status=1; fi
    echo "$r $name ($(( $(date +%s) - t0 ))s)" | tee -a "$LOG/summary.txt"
    tail -n 5 "$LOG/$name.log"
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv >"$LOG/gpu.txt" 2>&1
for t in "$B"/gpu/test_*; do
    [ -x "$t" ] && step "$(basename "$t")" "$t"
done
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$SAN" ]; then
    step memcheck "$SAN" --tool memcheck --error-exitcode 1 "$B/gpu/test_gemm_cuda" --quick
    step racecheck "$SAN" --tool racecheck --error-exitcode 1 "$B/gpu/test_gemm_cuda" --quick
else
    echo "SKIP sanitizer: compute-sanitizer not found" | tee -a "$LOG/summary.txt"
fi
if [ -x "$B/nvfp4" ]; then
    step bench "$B/nvfp4" bench --json "$LOG/bench.json"
    cat "$LOG/bench.log"
fi
cat "$LOG/summary.txt"
exit $status
