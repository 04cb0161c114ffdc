#!/bin/sh
# run.sh -- run the H200 tests: bit-exactness, compute-sanitizer, and the bench.
#   sh tests/gpu/run.sh [BUILD]      (BUILD defaults to build; binaries must exist:
#                                      `make gpu-tests BUILD=...` on a machine with nvcc)
# Logs go to $OUT when it is set, else to BUILD/gpu-logs.  Ends with
# "gpu: N passed, N failed, N skipped" (the test programs' checks summed; a
# step that cannot run here, such as compute-sanitizer missing, is a skip
# with its reason).  Exit status 0 only if every step passed and at least
# one test program ran.
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
programs=0; skipped=0
for t in "$B"/gpu/test_*; do
    [ -x "$t" ] || continue
    programs=$((programs + 1))
    step "$(basename "$t")" "$t"
done
if [ "$programs" -eq 0 ]; then
    echo "FAIL no test program in $B/gpu (build them: make gpu-tests BUILD=$B)" | tee -a "$LOG/summary.txt"
    status=1
fi
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$SAN" ]; then
    step memcheck "$SAN" --tool memcheck --error-exitcode 1 "$B/gpu/test_gemm_cuda" --quick
    step racecheck "$SAN" --tool racecheck --error-exitcode 1 "$B/gpu/test_gemm_cuda" --quick
else
    echo "SKIP sanitizer: compute-sanitizer not found" | tee -a "$LOG/summary.txt"
    skipped=$((skipped + 2))
fi
if [ -x "$B/nvfp4" ]; then
    step bench "$B/nvfp4" bench --json "$LOG/bench.json"
    cat "$LOG/bench.log"
fi
cat "$LOG/summary.txt"
# the checks of every test program (their RESULT lines)
cat "$LOG"/test_*.log 2>/dev/null | awk -v sk="$skipped" '
    /^RESULT / { for (i = 2; i <= NF; i++) { split($i, kv, "="); n[kv[1]] += kv[2] } }
    END { printf "gpu: %d passed, %d failed, %d skipped\n", n["passed"], n["failed"], n["skipped"] + sk }'
exit $status
