#!/bin/sh
# sweep.sh -- dev/cuda/gemm_variants over a list of cases, one line each
# (check against the CPU oracle, then back-to-back timing):
#   sh dev/cuda/sweep.sh BUILD "LINEAR:M:KERNEL:LOADERS ..." [ITERS]
B=${1:-build}
ITERS=${3:-200}
for c in $2; do
    L=${c%%:*}; r=${c#*:}; M=${r%%:*}; r=${r#*:}; V=${r%%:*}; LW=${r#*:}
    "$B/gpu/gemm_variants" "$L" "$M" "$V" "$ITERS" 1 "$LW" 2>&1 | tail -n 1
done
