#!/bin/sh
# final14.sh -- the fourteenth session's second H200 run (OUT=DIR sh
# dev/cuda/final14.sh [BUILD]): ncu counters of the activation pre-pass and
# the wgmma kernel at M = 2048 (attn-out, FC2), data-parallel (-1) and
# stream-K (0); the linear suite; nvfp4 check at M = 1, 128, 2048; the bench
# at M = 1, 16, 128, 2048.
. "$(dirname "$0")/step.sh"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
MET="gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,smsp__issue_active.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed"
for lin in ${NCU_LINEARS:-attn_out fc2}; do
    for sk in -1 0; do
        step "ncu_${lin}_$sk" 120 $NCU --clock-control none --cache-control none -k regex:nvfp4_sm90 --metrics "$MET" \
            "$B/gpu/gemm_variants" $lin 2048 -1 0 1 0 $sk
        grep -E "nvfp4_sm90|gpu__|sm__|lts__|dram__|smsp__|^OK" "$L/ncu_${lin}_$sk.log" | sed 's/  */ /g'
    done
done
[ -z "${NO_LINEAR:-}" ] && step linear 300 "$B/gpu/test_linear_cuda"
for m in 1 128 2048; do
    step check$m 240 "$B/nvfp4" check --rows $m --json "$L/check$m.json"
done
step bench 300 "$B/nvfp4" bench --m ${BENCH_M:-1,16,128,2048} --json "$L/bench.json"
tail -n 20 "$L/bench.log"
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
