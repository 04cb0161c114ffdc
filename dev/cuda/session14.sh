#!/bin/sh
# session14.sh -- the fourteenth session's H200 runs in one script (OUT=DIR
# [PARTS="..."] sh dev/cuda/session14.sh [BUILD]); PARTS (default: all, in
# this order) picks:
#   suites  test_gemm_cuda (forced stream-K grids, unaligned out, the four
#           linears, M = 2048 data-parallel against stream-K), test_linear_cuda,
#           test_quantize_cuda
#   sanitize racecheck on attn-out M = 256 and QKV M = 256 (stream-K),
#           memcheck on QKV M = 256
#   ncu     counters of the activation pre-pass and the wgmma kernel at M =
#           2048 (attn-out, FC2), data-parallel (-1) and stream-K (0)
#   parts   the wgmma kernel with its epilogue left out (dev build, dev_mode 8)
#   ab      A/B in one process each, checked before each timing: the staged
#           epilogue (1) against element by element (0), out only; stream-K
#           off (-1) against the cost model (0)
#   checks  nvfp4 check and --streaming-a at M = 1, 128, 2048
#   bench   nvfp4 bench at M = 1, 16, 128, 2048
. "$(dirname "$0")/step.sh"
PARTS=${PARTS:-suites sanitize ncu parts ab checks bench}
if has suites; then
    step gemm 300 "$B/gpu/test_gemm_cuda"
    step linear 300 "$B/gpu/test_linear_cuda"
    step quantize 120 "$B/gpu/test_quantize_cuda"
fi
if has sanitize; then
    for s in attn_out:256 qkv:256; do
        step "race_${s%%:*}" 150 compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 1 \
            "$B/gpu/gemm_variants" "${s%%:*}" "${s##*:}" -1 0
    done
    step mem 120 compute-sanitizer --tool memcheck --error-exitcode 1 "$B/gpu/gemm_variants" qkv 256 -1 0
fi
if has ncu; then
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    MET="gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,smsp__issue_active.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed"
    for lin in attn_out fc2; do
        for sk in -1 0; do
            step "ncu_${lin}_$sk" 120 $NCU --clock-control none --cache-control none -k regex:nvfp4_sm90 \
                --metrics "$MET" "$B/gpu/gemm_variants" $lin 2048 -1 0 1 0 $sk
            grep -E "nvfp4_sm90|gpu__|sm__|lts__|dram__|smsp__" "$L/ncu_${lin}_$sk.log" | sed 's/  */ /g'
        done
    done
fi
if has parts; then
    for lin in attn_out fc2; do
        NVFP4_DEV_SWEEP=0:0,8:0,0:0,8:0 step "epi_$lin" 120 "$B/gpu/gemm_variants_dev" $lin 2048 -1 30
        grep -E "^SWEEP" "$L/epi_$lin.log"
    done
fi
if has ab; then
    for s in attn_out:2048 fc2:2048 qkv:2048 fc1:2048 attn_out:128 fc2:128 qkv:128 fc1:128; do
        lin=${s%%:*}; m=${s##*:}
        NVFP4_EPILOGUES=1,0 NVFP4_STREAM_K=-1,0 step "ab_${lin}_$m" 150 "$B/gpu/gemm_variants" $lin $m -1 30
        grep -E "^(EPILOGUE|STREAMK|MISMATCH)" "$L/ab_${lin}_$m.log"
    done
fi
if has checks; then step_checks; fi
if has bench; then step_bench; fi
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
