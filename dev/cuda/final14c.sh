#!/bin/sh
# final14c.sh -- the fourteenth session's fourth H200 run (OUT=DIR sh
# dev/cuda/final14c.sh [BUILD]): after the staged BF16 epilogue (stmatrix
# through 256 bytes per consumer warp, 16-byte stores): the GEMM and linear
# suites, racecheck and memcheck on the wgmma kernel (attn-out M = 256, QKV
# M = 256: stream-K), the epilogue left out (dev build) at M = 2048, nvfp4
# check at M = 1, 128, 2048, and the bench at M = 1, 16, 128, 2048.
. "$(dirname "$0")/step.sh"
step gemm 300 "$B/gpu/test_gemm_cuda"
step linear 300 "$B/gpu/test_linear_cuda"
step race 150 compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 1 "$B/gpu/gemm_variants" attn_out 256 -1 0
step race_sk 150 compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 1 "$B/gpu/gemm_variants" qkv 256 -1 0
step mem 120 compute-sanitizer --tool memcheck --error-exitcode 1 "$B/gpu/gemm_variants" qkv 256 -1 0
for lin in attn_out fc2; do
    NVFP4_DEV_SWEEP=0:0,8:0,0:0,8:0 step "epi_$lin" 120 "$B/gpu/gemm_variants_dev" $lin 2048 -1 30
    grep -E "^SWEEP" "$L/epi_$lin.log"
done
for m in 1 128 2048; do
    step check$m 240 "$B/nvfp4" check --rows $m --json "$L/check$m.json"
done
step bench 300 "$B/nvfp4" bench --m ${BENCH_M:-1,16,128,2048} --json "$L/bench.json"
tail -n 18 "$L/bench.log"
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
