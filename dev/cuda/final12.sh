#!/bin/sh
# final12.sh -- the twelfth session's final H200 run (OUT=DIR sh dev/cuda/final12.sh [BUILD]):
# racecheck and memcheck on the new register kernels (REGR: attn-out M = 1
# planned; REGW forced as variant 31 on attn-out M = 1; REGR MT = 16 on
# FC2 M = 16), then the suites, nvfp4 check and the bench (tests/gpu/final.sh
# steps "linear gemm check bench" at M = 1, 16, 128, 2048).
B=${1:-build}
L=$OUT/logs
mkdir -p "$L"
san() { # name, tool, gemm_variants args...
    name=$1; tool=$2; shift 2
    timeout 150 compute-sanitizer --tool "$tool" --racecheck-report all "$B/gpu/gemm_variants" "$@" 0 >"$L/$name.log" 2>&1
    echo "$name rc $?: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|^OK|MISMATCH' "$L/$name.log" | tr '\n' ' ')"
}
san race-regr racecheck attn_out 1 -1
san race-regw racecheck attn_out 1 31
san mem-regr16 memcheck fc2 16 -1
OUT=$L STEPS="linear gemm check bench" BENCH_M=1,16,128,2048 sh tests/gpu/final.sh "$B" >"$L/final.txt" 2>&1
tail -n 45 "$L/final.txt"
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
