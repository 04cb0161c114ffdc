#!/bin/sh
# regw12.sh -- the twelfth session's comparison of the register kernels at
# M = 1 and 16 on the four linears: the planned kernel, REGM (8-row chains),
# REGW (16-row chains, weights as the A operand: variants 31..34) and REGR
# (R MMA warps per 16-row chain: 35..40), each checked bit for bit against
# the CPU oracle, then timed back to back (one gemm_variants process per
# linear and M, the list twice); then the parts-left-out sweep of REGR on
# FC2 M = 1 and test_gemm_cuda --quick (every variant, bit for bit).
#   OUT=DIR sh dev/cuda/regw12.sh [BUILD]     (binaries from make gpu-tests)
B=${1:-build}
L=${OUT:-$B/gpu-logs}/logs
mkdir -p "$L"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv >"$L/gpu.txt" 2>&1
# LINEAR M VARIANTS (REGM tw1/tw2/tw4 are 17/18/19 at MT = 8, 20/21/22 at MT = 16)
for c in "qkv 1 -1,18,31,32" "attn_out 1 -1,17,31,35,36" "fc1 1 -1,19,31,32" "fc2 1 -1,17,31,35,36" \
         "qkv 16 -1,21,33,34" "attn_out 16 -1,20,33,38,39" "fc1 16 -1,22,33,34" "fc2 16 -1,20,33,38,39"; do
    set -- $c
    NVFP4_VARIANTS=$3 timeout 120 "$B/gpu/gemm_variants" $1 $2 -1 200 >"$L/v-$1-$2.log" 2>&1
    grep -hE "VARIANT.*pass 1|MISMATCH|rror" "$L/v-$1-$2.log"
done
# REGR R = 3, FC2 M = 1: all, no activation work (2), no weight dequantization (32), neither (34)
NVFP4_DEV_SWEEP="0:0,2:0,32:0,34:0" timeout 120 "$B/gpu/gemm_variants" fc2 1 36 200 >"$L/sweep.log" 2>&1
grep -E "SWEEP|MISMATCH" "$L/sweep.log"
t0=$(date +%s)
timeout 240 "$B/gpu/test_gemm_cuda" --quick >"$L/gemm.log" 2>&1
echo "test_gemm_cuda --quick: exit $? ($(( $(date +%s) - t0 )) s): $(tail -n 1 "$L/gemm.log")"
grep -E "FAIL|MISMATCH" "$L/gemm.log" | head -n 5
[ -n "${OUT:-}" ] && (cd "$OUT" && tar czf logs.tgz logs && rm -rf logs)
