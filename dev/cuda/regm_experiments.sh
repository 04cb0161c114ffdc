#!/bin/sh
# regm_experiments.sh -- what sets the register small-M kernel's pace: each
# case is checked against the CPU oracle, then timed as it is and with parts
# left out (NVFP4_DEV_SWEEP, REGM_DEV_* bits of src/cuda/sm90_regm.cuh):
#   MODE:LOADERS   1 no MMA work, 2 no activation work, 3 loader only,
#                  +4 no weight-scale box, +8 no activation boxes,
#                  +16 no weight-code box; LOADERS 1 or 2 TMA-issuing warps.
#   sh dev/cuda/regm_experiments.sh BUILD OUTDIR ["LINEAR:M ..."]
B=${1:-build}; O=${2:-$B/regm-exp}
CASES=${3:-"fc2:1 attn_out:1 qkv:1 fc1:1 fc2:16 qkv:16 fc2:32"}
SWEEP=${SWEEP:-"0:1,0:2,1:1,2:1,3:1,3:2,7:1,11:1,15:1,23:1,27:1,4:1,1:2"}
mkdir -p "$O"
for c in $CASES; do
    L=${c%%:*}; M=${c#*:}
    NVFP4_DEV_SWEEP="$SWEEP" "$B/gpu/gemm_variants" "$L" "$M" -1 200 1 0 2>&1 | tee -a "$O/regm-exp.txt"
done
