# step.sh -- sourced by the dev/cuda session scripts: B (build folder) and L
# (log folder) set, L created, the GPU's clocks logged, and
#   step NAME SECONDS COMMAND...   runs COMMAND into $L/NAME.log with a time
#                                  limit and prints its exit status and
#                                  failure / summary lines;
#   step_checks, step_bench        the P0 checks and the bench (below).
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
# The P0 checks (nvfp4 check and --streaming-a at M = 1, 128, 2048) and
# one nvfp4 bench at M = 1, 16, 128, 2048, as every session's final run.
step_checks() {
    for m in 1 128 2048; do
        step check$m 240 "$B/nvfp4" check --rows $m --json "$L/check$m.json"
        step streaming$m 240 "$B/nvfp4" check --rows $m --streaming-a --json "$L/streaming$m.json"
    done
}
step_bench() {
    step bench 300 "$B/nvfp4" bench --m 1,16,128,2048 --json "$L/bench.json"
    tail -n 18 "$L/bench.log"
}
