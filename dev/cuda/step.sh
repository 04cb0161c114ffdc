# step.sh -- sourced by the dev/cuda session scripts: B (build folder) and L
# (log folder) set, L created, the GPU's clocks logged, and
#   step NAME SECONDS COMMAND...   runs COMMAND into $L/NAME.log with a time
#                                  limit and prints its exit status and
#                                  failure / summary lines.
B=${1:-build}
L=$OUT/logs
mkdir -p "$L"
step() {
    name=$1; secs=$2; shift 2
    t0=$(date +%s)
    timeout "$secs" "$@" >"$L/$name.log" 2>&1; rc=$?
    echo "== $name: exit $rc ($(( $(date +%s) - t0 ))s)"
    grep -E "FAIL|MISMATCH|SUMMARY|P0 |RESULT" "$L/$name.log" | head -n 5
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv >"$L/gpu.txt" 2>&1
