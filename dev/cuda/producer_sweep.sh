#!/bin/sh
# producer_sweep.sh -- does the wgmma kernel wait on how its producer issues a
# stage?  Each planned shape under the producer modes (SM90_PROD_* bits:
# 0 one issuing thread, 1 one issuer per request, 2 a stage's activation
# chunks as one 3-D box, 3 both), each mode checked bit for bit against the
# CPU oracle (first 16 rows) before it is timed.
#   sh dev/cuda/producer_sweep.sh [OUTDIR] ["linear:M ..."]
OUT=${1:-${OUT:-build/producer_sweep}}; mkdir -p "$OUT"
SHAPES=${2:-"attn_out:128 fc2:128 qkv:128 fc1:128 attn_out:2048 fc2:2048 qkv:2048 fc1:2048"}
for c in $SHAPES; do
  l=${c%%:*}; m=${c##*:}
  NVFP4_PRODUCERS=0,1,2,3,0 build/gpu/gemm_variants "$l" "$m" -1 30 2>&1 | tee -a "$OUT"/producer_sweep.txt
done
