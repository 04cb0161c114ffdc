#!/bin/sh
# wgmma_parts.sh -- what sets the wgmma kernel's pace: each planned shape
# timed with parts left out (SM90_DEV_* bits: 1 no dequantization, 2 no
# wgmma, 4 no copies; results wrong, so only mode 0 is checked).  Needs
# build/gpu/gemm_variants_dev (make gpu-tests).
#   sh dev/cuda/wgmma_parts.sh [OUTDIR] ["linear:M ..."]
OUT=${1:-${OUT:-build/wgmma_parts}}; mkdir -p "$OUT"
SHAPES=${2:-"attn_out:128 fc2:128 qkv:128 attn_out:2048 fc2:2048"}
for c in $SHAPES; do
  l=${c%%:*}; m=${c##*:}
  NVFP4_DEV_SWEEP="0:0,1:0,2:0,3:0,4:0,5:0,6:0,7:0,0:0" build/gpu/gemm_variants_dev "$l" "$m" -1 30 2>&1 | tee -a "$OUT"/wgmma_parts.txt
done
