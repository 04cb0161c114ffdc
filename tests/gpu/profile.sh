#!/bin/sh
# profile.sh -- hardware counters of the GEMM kernels (ncu, clocks left as
# they are) for the shapes docs/KERNEL.md discusses.
#   sh tests/gpu/profile.sh BUILD OUTDIR "LINEAR:M:KERNEL ..."
# Each case runs dev/cuda/gemm_variants (check against the CPU oracle, then
# two timed launches) and profiles its second launch.  One text report per
# case in OUTDIR, and OUTDIR/profile-summary.txt with the headline metrics.
B=${1:-build}
O=${2:-$B/profile}
CASES=${3:-"attn_out:1:-1 attn_out:16:-1 attn_out:128:-1 fc2:1:-1 fc2:16:-1 fc2:128:-1"}
mkdir -p "$O"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
M="gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active"
for c in $CASES; do
    L=${c%%:*}; r=${c#*:}; MM=${r%%:*}; V=${r#*:}
    f="$O/ncu-$L-m$MM-k$V.txt"
    "$NCU" --clock-control none -k regex:'nvfp4_sm90_(gemm|reg)' --launch-skip 1 --launch-count 1 \
        --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
        --section LaunchStats --metrics "$M" "$B/gpu/gemm_variants" "$L" "$MM" "$V" 2 >"$f" 2>&1
    echo "== $L M=$MM kernel $V" >>"$O/profile-summary.txt"
    grep -E "^ +(Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Stall|gpu__time|dram__|sm__pipe_tensor|sm__inst|smsp__issue|sm__warps|Block Size|Grid Size)|^OK|^MISMATCH|Stall [A-Z]" "$f" >>"$O/profile-summary.txt"
    grep -iE "stalled|stall reason|the warps spend|on average, each warp" "$f" | head -8 >>"$O/profile-summary.txt"
done
cat "$O/profile-summary.txt"
