#!/bin/sh
# probe_rows.sh -- is the wgmma kernel fed at a per-TMA-row rate?  The L2-resident
# TMA probe (2-D boxes against 1-D bulk copies of the same bytes) and ncu
# memory counters of the planned tiles.  sh dev/cuda/probe_rows.sh [OUTDIR]
OUT=${1:-${OUT:-build/probe_rows}}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
build/gpu/probe_rates tma-l2 > "$OUT"/tma_l2.txt 2>&1
cat "$OUT"/tma_l2.txt
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
MET="gpu__time_duration.sum,lts__t_bytes.sum.per_second,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_tex_op_read.sum,l1tex__m_xbar2l1tex_read_bytes.sum.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sector_hit_rate.pct,dram__bytes_read.sum"
for c in "attn_out 128 5" "attn_out 2048 28" "fc2 2048 28"; do
  set -- $c
  timeout 120 $NCU --clock-control none -k regex:'nvfp4_sm90_gemm' --launch-skip 1 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Chart --section WarpStateStats --metrics "$MET" build/gpu/gemm_variants $1 $2 $3 2 > "$OUT"/ncu-$1-$2-$3.txt 2>&1
  grep -E "Duration|Throughput|lts__|l1tex__|sm__pipe|dram__|Hit|Busy|Bandwidth|Stall|OK|MISMATCH" "$OUT"/ncu-$1-$2-$3.txt | head -60
done
