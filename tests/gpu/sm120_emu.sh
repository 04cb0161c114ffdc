#!/bin/sh
# sm120_emu.sh -- the GB10 / RTX Blackwell kernel proven on an H100 / H200:
# everything but the tensor-core instruction, which is emulated (the same
# kernel source built with NVFP4_SM120_EMULATE for sm_90a; tests/gpu/gpu.mk).
#
#   sh tests/gpu/sm120_emu.sh [BUILD]    build what is missing, run, print the verdict
#   SKIP_BUILD=1 sh tests/gpu/sm120_emu.sh [BUILD]   run binaries built elsewhere
#   STEPS=N                              steps for the step test (default 8000000)
#
# 1. probe_sm120_emu: the emulated MMA's operand layout (a single product at
#    every position, every thread selector), then N random and adversarial
#    k64 steps against nvfp4_sm120_step, every output bit, per category;
# 2. test_sm120_emu: the GEMM and the linear (streaming A: eager and cuda
#    variants, static and dynamic scale) on the four linears at M = 1, 16,
#    128, odd shapes, tails, K slices and other devices' plans, against the
#    CPU sm120 backend on every output.
# Logs go to $OUT when it is set, else BUILD/sm120-emu-logs.  Exit status 0
# only when both pass; 2 when they could not run (no sm_90 GPU, no build).
cd "$(dirname "$0")/../.." || exit 2
B=${1:-build}
LOG=${OUT:-$B/sm120-emu-logs}
STEPS=${STEPS:-8000000}
mkdir -p "$LOG" || exit 2
t_start=$(date +%s)
if [ -z "${SKIP_BUILD:-}" ]; then
    echo "building (make -f tests/gpu/gpu.mk sm120-emu) ..."
    if ! make -j"$(nproc 2>/dev/null || echo 4)" --no-print-directory -f tests/gpu/gpu.mk BUILD="$B" sm120-emu \
        >"$LOG/build.log" 2>&1; then
        tail -n 30 "$LOG/build.log"
        echo "sm120_emu: the build failed ($LOG/build.log)"
        exit 2
    fi
    echo "built in $(( $(date +%s) - t_start )) s"
fi
for b in probe_sm120_emu test_sm120_emu; do
    if [ ! -x "$B/gpu/$b" ]; then
        echo "sm120_emu: $B/gpu/$b is missing (build it with: make -f tests/gpu/gpu.mk sm120-emu)"
        exit 2
    fi
done
status=0
step() { # name, seconds, command...
    name=$1; secs=$2; shift 2
    t0=$(date +%s)
    timeout "$secs" "$@" >"$LOG/$name.log" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ]; then r=PASS; else r=FAIL; status=1; fi
    [ "$rc" -eq 2 ] && [ "$status" -ne 2 ] && status=2
    echo "$r $name (exit $rc, $(( $(date +%s) - t0 )) s)" | tee -a "$LOG/summary.txt"
    grep -E "^FAIL|MISMATCH|mismatch \[|needs|no CUDA" "$LOG/$name.log" | head -n 8
}
: >"$LOG/summary.txt"
step probe 150 "$B/gpu/probe_sm120_emu" --steps "$STEPS"
sed -n '/^category/,/^total/p' "$LOG/probe.log"
step suite 330 "$B/gpu/test_sm120_emu"
grep -E "^  |^RESULT|: [0-9.]+ s$" "$LOG/suite.log"
echo "sm120_emu: $(grep -c PASS "$LOG/summary.txt") of 2 steps passed in $(( $(date +%s) - t_start )) s" \
     "(logs: $LOG)"
exit $status
