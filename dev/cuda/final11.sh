#!/bin/sh
# final11.sh -- the eleventh session's final H200 run (sh dev/cuda/final11.sh with $OUT set): racecheck on the M = 128 tile (producer
# mode 3 now the default there), the suites, nvfp4 check, the bench
L=$OUT/logs; mkdir -p $L
timeout 120 compute-sanitizer --tool racecheck --racecheck-report all build/gpu/gemm_variants attn_out 128 5 0 > $L/racecheck-attn_out-128.log 2>&1
echo "racecheck rc $?: $(grep -E 'RACECHECK SUMMARY|^OK|MISMATCH' $L/racecheck-attn_out-128.log | tr '\n' ' ')"
OUT=$L STEPS="linear gemm check bench" BENCH_M=1,16,128,2048 sh tests/gpu/final.sh build > $L/final.txt 2>&1
tail -28 $L/final.txt
cd $OUT && tar czf logs.tgz logs && rm -rf logs
