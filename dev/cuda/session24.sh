#!/bin/sh
# session24.sh -- the twenty-fourth session's calls (H100: no H200 could be
# had): the quantizer's threshold table, against the previous library (the
# *_old programs, built from the commit before the change).
#   first and second calls: the table's entries as BF16 thresholds in FP32
#     arithmetic (thr_build16, dropped: git 48169c7, aa72bd2) and 32-bit
#     block indices in the quantizer kernels (dropped: 9e4dfb9);
#   third call: two threads an entry (q_table_part, dropped: git 93f8a5f),
#     old = 642f86f;
#   fourth call: the library as it stands (the twenty-third session's
#     quantizer: every experiment above dropped), its fused linear, suites,
#     P0 checks and bench; fifth: ncu on the table build (prof), and the
#     P0 checks and bench again.
# Usage: OUT=DIR [PARTS="..."] sh dev/cuda/session24.sh BUILD
#   ab      probe_table (build cycles, each table checked against the
#           host's first), quantizer_coop_old and new (the kernels alone,
#           every byte checked) and inkernel_a_old and new (the fused linear
#           against the prequantized GEMM, checked against the CPU linear):
#           eager twice, cuda once
#   fused   the library's fused linear against its prequantized GEMM
#           (inkernel_a: eager twice, cuda once) and its quantizer kernels
#           alone (quantizer_coop), each checked first
#   qmode   the fused linear with the planned quantizer kernel against the
#           table kernel forced (NVFP4_DEV_QUANTIZER=0), eager and cuda, two
#           passes
#   suites  test_quantize_cuda, test_linear_cuda, and memcheck on the
#           quantizer suite (--quick)
#   ncu     the kernels' durations (ncu, clocks free, serialised) of the
#           fused linear at attn-out M = 16, 128 and FC2 M = 128
#   prof    ncu on probe_table's table build (one CTA, eager and cuda):
#           warp states and stall samples per SASS line
#   final   the P0 checks at 1, 128, 2048 rows (plain and --streaming-a)
#           and one nvfp4 bench with cuBLAS at M = 1, 16, 128, 2048
# Calls: PARTS="ab qmode suites", then "ab qmode suites ncu final", then
# "ab suites final", then "fused suites final", then "prof final".  The
# carry: the new build's nvfp4 and gpu/{probe_table,quantizer_coop,
# inkernel_a,test_linear_cuda,test_quantize_cuda}, and for ab the old
# commit's quantizer_coop and inkernel_a (in the first two calls
# probe_table too) as gpu/*_old.
. "$(dirname "$0")/step.sh"
PARTS=${PARTS:-ab qmode suites}
SHAPES=${CASES:-attn_out:1,16,128 fc2:1,16,128 qkv:1,16,128 fc1:1,16}
if has ab; then
    for v in _old ""; do
        [ -x "$B/gpu/probe_table$v" ] || continue
        step "probe_table$v" 60 "$B/gpu/probe_table$v"
        grep -E "^variant|mismatch" "$L/probe_table$v.log" | sed "s/^/probe_table$v /" | cut -c1-160
    done
    step_ab_fused 100 $SHAPES
    for v in _old ""; do
        NVFP4_DEV_VARIANT=cuda step "inkernel_a_cuda$v" 100 "$B/gpu/inkernel_a$v" $SHAPES --iters 100
        grep -E "static" "$L/inkernel_a_cuda$v.log" | sed "s/^/cuda$v /" | cut -c1-120
    done
fi
if has fused; then
    step quantizer_coop 100 "$B/gpu/quantizer_coop" --iters 100
    grep -E "^kind 0 M=(1|16|128) |RESULT" "$L/quantizer_coop.log"
    for n in eager_1 eager_2 cuda_1; do
        NVFP4_DEV_VARIANT=${n%_*} step "fused_$n" 100 "$B/gpu/inkernel_a" $SHAPES --iters 100
        grep -E "static" "$L/fused_$n.log" | sed "s/^/$n /" | cut -c1-110
    done
fi
if has qmode; then
    step_qmode 60 attn_out:1,16 fc2:1,16 qkv:1,16 fc1:16
fi
if has suites; then
    step test_quantize_cuda 150 "$B/gpu/test_quantize_cuda"
    step test_linear_cuda 200 "$B/gpu/test_linear_cuda"
    step mem_quant 150 compute-sanitizer --tool memcheck --error-exitcode 1 "$B/gpu/test_quantize_cuda" --quick
fi
if has ncu; then
    step_ncu_kernels 90 24 attn_out:16 attn_out:128 fc2:128
fi
if has prof; then
    # one k_build launch of probe_table (second repetition of pts 0.0037:
    # eager launch 3, cuda launch 11): warp states and per-SASS-line stall
    # samples (ncu --page source, every 32 cycles)
    for v in eager:3 cuda:11; do
        R="$L/prof_${v%%:*}"
        ncu --clock-control none -k regex:k_build --launch-skip "${v##*:}" --launch-count 1 --warp-sampling-interval 0 \
            --section WarpStateStats --section SourceCounters --section SchedulerStats --import-source no -f -o "$R" \
            "$B/gpu/probe_table" >"$R.txt" 2>&1
        ncu --import "$R.ncu-rep" --page source --csv --print-source sass >"$R.csv" 2>>"$R.txt"
        ncu --import "$R.ncu-rep" >>"$R.txt" 2>&1
        rm -f "$R.ncu-rep"
        grep -iE "stall|issued|elapsed|warp cycles" "$R.txt" | head -n 24
    done
fi
if has final; then
    step_checks
    step_bench
fi
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
