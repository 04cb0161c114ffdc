#!/bin/sh
# final14b.sh -- the fourteenth session's third H200 run (OUT=DIR sh
# dev/cuda/final14b.sh [BUILD]): after the activation pre-pass's store
# change (one thread per half block) and stream-K's L2 bound: the GEMM and
# linear suites, memcheck on a stream-K launch, ncu durations of the
# pre-pass and the GEMM at M = 2048, the wgmma kernel timed with its
# epilogue left out (dev build, dev_mode 8), nvfp4 check at M = 1, 128,
# 2048, and the bench at M = 1, 16, 128, 2048.
. "$(dirname "$0")/step.sh"
step gemm 300 "$B/gpu/test_gemm_cuda"
step linear 300 "$B/gpu/test_linear_cuda"
step mem 120 compute-sanitizer --tool memcheck --error-exitcode 1 "$B/gpu/gemm_variants" qkv 256 -1 0
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
MET="gpu__time_duration.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_write.sum"
for lin in attn_out fc2; do
    step "ncu_$lin" 120 $NCU --clock-control none --cache-control none -k regex:nvfp4_sm90 --metrics "$MET" \
        "$B/gpu/gemm_variants" $lin 2048 -1 0
    grep -E "nvfp4_sm90|gpu__|lts__|dram__" "$L/ncu_$lin.log" | sed 's/  */ /g'
    NVFP4_DEV_SWEEP=0:0,8:0,0:0,8:0 step "epi_$lin" 120 "$B/gpu/gemm_variants_dev" $lin 2048 -1 30
    grep -E "^SWEEP" "$L/epi_$lin.log"
done
for m in 1 128 2048; do
    step check$m 240 "$B/nvfp4" check --rows $m --json "$L/check$m.json"
done
step bench 300 "$B/nvfp4" bench --m ${BENCH_M:-1,16,128,2048} --json "$L/bench.json"
tail -n 18 "$L/bench.log"
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
