#!/bin/sh
# profile_source.sh -- per-SASS-line instruction counts and stall samples of
# one GEMM launch (ncu, clocks left as they are), for docs/KERNEL.md's
# "where the time goes" tables.
#   sh tests/gpu/profile_source.sh BUILD OUTDIR LINEAR M KERNEL [LOADERS]
# Writes OUTDIR/src-LINEAR-mM-kKERNEL.csv (ncu --page source) and .txt
# (the warp-state summary).  PROG (environment) names another program of
# BUILD/gpu than gemm_variants; TAG is added to
# the file names.
B=${1:-build}; O=$2; L=$3; MM=$4; V=$5; LW=${6:-0}
mkdir -p "$O"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
P=${PROG:-gemm_variants}
R="$O/src-$L-m$MM-v$V${TAG:-}"
"$NCU" --clock-control none -k regex:'nvfp4_sm90_(gemm|reg)' --launch-skip 3 --launch-count 1 \
    --section WarpStateStats --section SourceCounters --section SpeedOfLight --section SchedulerStats \
    --import-source no -f -o "$R" "$B/gpu/$P" "$L" "$MM" "$V" 5 1 "$LW" >"$R.txt" 2>&1
"$NCU" --import "$R.ncu-rep" --page source --csv --print-source sass >"$R.csv" 2>>"$R.txt"
"$NCU" --import "$R.ncu-rep" >>"$R.txt" 2>&1
rm -f "$R.ncu-rep"
