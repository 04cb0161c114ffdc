# step.sh -- sourced by the dev/cuda session scripts: B (build folder) and L
# (log folder) set, L created, the GPU's clocks logged, and
#   has PART                       whether PARTS names PART, and
#   step NAME SECONDS COMMAND...   runs COMMAND into $L/NAME.log with a time
#                                  limit and prints its exit status and
#                                  failure / summary lines;
#   step_checks, step_bench        the P0 checks and the bench, and
#   step_suites, step_sanitize     the GPU suites and compute-sanitizer's
#                                  checks, and
#   step_quant                     the quantizer kernels (below), and
#   step_ab_fused                  two builds' quantizers and fused linear,
#   step_qmode, step_ncu_kernels   the fused linear's quantizer kernel
#                                  forced or planned, ncu's per-kernel
#                                  times, and
#   step_variant                   one gemm_variants program timed, and
#   step_bench_vs, step_suites_of  an alternative build's bench and suites,
#   step_quick_sets, step_checks_of  quick suites and the P0 checks, and
#   step_race, step_mem            a sanitizer on one gemm_variants program, and
#   step_regr_vs, step_regr_sweep  REGR (attn-out, FC2 at M <= 16) timed in
#   step_regr_sanitize             several builds, parts left out, racecheck
#                                  and memcheck.
B=${1:-build}
L=$OUT/logs
# has PART: whether PART is one of the words of $PARTS (read at the call,
# so a script sets PARTS after sourcing this)
has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
mkdir -p "$L"
step() {
    name=$1; secs=$2; shift 2
    t0=$(date +%s)
    timeout "$secs" "$@" >"$L/$name.log" 2>&1; rc=$?
    echo "== $name: exit $rc ($(( $(date +%s) - t0 ))s)"
    grep -E "FAIL|MISMATCH|SUMMARY|P0 |RESULT" "$L/$name.log" | head -n 5
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv >"$L/gpu.txt" 2>&1
# The P0 checks (nvfp4 check and --streaming-a at M = 1, 128, 2048) and
# one nvfp4 bench at M = 1, 16, 128, 2048, as every session's final run.
step_checks() {
    for m in 1 128 2048; do
        step check$m 240 "$B/nvfp4" check --rows $m --json "$L/check$m.json"
        step streaming$m 240 "$B/nvfp4" check --rows $m --streaming-a --json "$L/streaming$m.json"
    done
}
step_bench() {
    step bench 300 "$B/nvfp4" bench --m 1,16,128,2048 --json "$L/bench.json"
    tail -n 18 "$L/bench.log"
}
# One gemm_variants program (BUILD/gpu/PROG) on SHAPE (linear:M), its
# planned kernel checked then timed: step_variant PROG SHAPE SECS [TAG]
# (log PROG_linear_M[_TAG]); prints the OK / MISMATCH lines.
step_variant() {
    prog=$1; shape=$2; n="${1}_${2%%:*}_${2##*:}${4:+_$4}"
    step "$n" "$3" "$B/gpu/$prog" "${shape%%:*}" "${shape##*:}" -1 30
    grep -E "^(OK|MISMATCH)" "$L/$n.log" | sed "s/^/$prog /"
}
# nvfp4 bench --m MS of the library and of nvfp4_SET, each with cuBLAS in
# its own run (logs bench_lib, bench_SET): step_bench_vs SET MS SECS LINES
step_bench_vs() {
    for c in "$B/nvfp4:lib" "$B/gpu/nvfp4_$1:$1"; do
        step "bench_${c##*:}" "$3" "${c%:*}" bench --m "$2" --json "$L/bench_${c##*:}.json"
        tail -n "$4" "$L/bench_${c##*:}.log"
    done
}
# test_gemm_cuda_X --quick for each X in SETS: step_quick_sets "SETS"
step_quick_sets() {
    for a in $1; do step "quick_$a" 200 "$B/gpu/test_gemm_cuda_$a" --quick; done
}
# nvfp4_SET check and --streaming-a at M rows (logs SET_checkM,
# SET_streamingM): step_checks_of SET M SECS
step_checks_of() {
    step "${1}_check$2" "$3" "$B/gpu/nvfp4_$1" check --rows "$2" --json "$L/${1}_check$2.json"
    step "${1}_streaming$2" "$3" "$B/gpu/nvfp4_$1" check --rows "$2" --streaming-a --json "$L/${1}_streaming$2.json"
}
# test_gemm_cuda_SET in full and test_linear_cuda_SET: step_suites_of SET SECS
step_suites_of() {
    step "gemm_$1" "$2" "$B/gpu/test_gemm_cuda_$1"
    step "linear_$1" 200 "$B/gpu/test_linear_cuda_$1"
}
# compute-sanitizer's racecheck or memcheck on one gemm_variants program
# (BUILD/gpu/PROG, its planned kernel checked once, not timed):
#   step_race NAME SECS PROG LINEAR M,  step_mem NAME SECS PROG LINEAR M
step_race() {
    step "$1" "$2" compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 1 \
        "$B/gpu/$3" "$4" "$5" -1 0
}
step_mem() {
    step "$1" "$2" compute-sanitizer --tool memcheck --error-exitcode 1 "$B/gpu/$3" "$4" "$5" -1 0
}
# The three GPU suites (every output against the CPU oracle).
step_suites() {
    step gemm 300 "$B/gpu/test_gemm_cuda"
    step linear 300 "$B/gpu/test_linear_cuda"
    step quantize 120 "$B/gpu/test_quantize_cuda"
}
# racecheck (QKV M = 256: stream-K) and memcheck (attn-out M = 128) of the
# wgmma kernel, memcheck of the quantizer suite.
step_sanitize() {
    step_race race_qkv 200 gemm_variants qkv 256
    step_mem mem_attn 150 gemm_variants attn_out 128
    step mem_quant 200 compute-sanitizer --tool memcheck --error-exitcode 1 "$B/gpu/test_quantize_cuda" --quick
}
# The library's three quantizer kernels (dev/cuda/quantizer_coop: every
# byte against the C quantizer, then timed side by side), and the fused
# linear with each in turn (NVFP4_DEV_QUANTIZER in QMODES: -1 the rule, 0
# table, 1 one thread a block, 2 four lanes a block).
step_quant() {
    step coop 200 "$B/gpu/quantizer_coop" --iters 200
    grep -E "exact;|MISMATCH|RESULT" "$L/coop.log"
    for qm in ${QMODES:--1 0 1 2}; do
        NVFP4_DEV_QUANTIZER=$qm step "quant_$qm" 200 "$B/gpu/inkernel_a" qkv:1,16,128 attn_out:1,16,128 fc1:1,16,128 fc2:1,16,128 --iters 100
        grep -E "M=" "$L/quant_$qm.log" | sed "s/^/q$qm /"
    done
}
# The quantizer kernels alone (quantizer_coop) and the fused linear
# (inkernel_a on each LINEAR:MS, two passes) of the previous build (the
# *_old programs) and this one side by side, each checked first:
#   step_ab_fused SECS LINEAR:MS...
step_ab_fused() {
    asecs=$1; shift
    for v in _old ""; do
        step "quantizer_coop$v" 120 "$B/gpu/quantizer_coop$v" --iters 100
        grep -E "^kind 0|RESULT" "$L/quantizer_coop$v.log" | sed "s/^/q$v /"
    done
    for v in _old "" _old ""; do
        step "inkernel_a$v" "$asecs" "$B/gpu/inkernel_a$v" "$@" --iters 100
        grep -E "static" "$L/inkernel_a$v.log" | sed "s/^/a$v /" | cut -c1-120
    done
}
# The fused linear with the planned quantizer kernel (the rule) against
# the table kernel forced (NVFP4_DEV_QUANTIZER=0), eager and cuda, two
# passes (inkernel_a, each output checked first; logs qmode_VAR_Q_PASS):
#   step_qmode SECS LINEAR:MS...
step_qmode() {
    qsecs=$1; shift
    for pass in 1 2; do
        for var in eager cuda; do
            for q in rule 0; do
                qm=$q; [ "$q" = rule ] && qm=-1
                NVFP4_DEV_QUANTIZER=$qm NVFP4_DEV_VARIANT=$var step "qmode_${var}_${q}_$pass" "$qsecs" \
                    "$B/gpu/inkernel_a" "$@" --iters 100
                grep -E "static" "$L/qmode_${var}_${q}_$pass.log" | sed "s/^/$var q=$q: /" | cut -c1-118
            done
        done
    done
}
# Each kernel's duration (ncu, clocks free: launches serialised, so without
# the programmatic overlap) in inkernel_a on each LINEAR:M, the last LINES
# launches (logs ncu_LINEAR_M): step_ncu_kernels SECS LINES LINEAR:M...
step_ncu_kernels() {
    nsecs=$1; nlines=$2; shift 2
    for s in "$@"; do
        step "ncu_${s%%:*}_${s##*:}" "$nsecs" ncu --clock-control none --metrics gpu__time_duration.sum --csv \
            "$B/gpu/inkernel_a" "$s" --iters 3
        # kernel name and duration (ns), one line per launch
        grep -E '"gpu__time_duration.sum"' "$L/ncu_${s%%:*}_${s##*:}.log" | awk -F'","' '{print $5 " " $NF}' | \
            sed 's/(.*)//; s/"$//' | tail -n "$nlines"
    done
}
# REGR at R = 2, 3, 4 (variants 35..37 at MT = 8 for M = 1 and 2, 38..40
# at MT = 16 otherwise) after the planned kernel, each checked bit for bit, then
# timed (the list twice), on each linear:M of SHAPES for each gemm_variants
# program PROG (logs PROG_linear_M_TAG): step_regr_vs TAG "SHAPES" PROG...
step_regr_vs() {
    tag=$1; shapes=$2; shift 2
    for s in $shapes; do
        case "$s" in *:1 | *:2) vs="35,36,37" ;; *) vs="38,39,40" ;; esac
        for prog in "$@"; do
            n="${prog}_${s%%:*}_${s##*:}_$tag"
            step "$n" 90 env NVFP4_VARIANTS=$vs "$B/gpu/$prog" "${s%%:*}" "${s##*:}" -1 200
            grep -E "^(OK|MISMATCH|VARIANT)" "$L/$n.log" | sed "s/^/$prog /"
        done
    done
}
# Parts left out (NVFP4_DEV_SWEEP="MODE:LOADERS,...", dev builds) on each
# linear:M of SHAPES for each PROG (logs PROG_linear_M_sweep):
#   step_regr_sweep "MODES" "SHAPES" PROG...
step_regr_sweep() {
    modes=$1; shapes=$2; shift 2
    for s in $shapes; do
        for prog in "$@"; do
            n="${prog}_${s%%:*}_${s##*:}_sweep"
            step "$n" 90 env NVFP4_DEV_SWEEP="$modes" "$B/gpu/$prog" "${s%%:*}" "${s##*:}" -1 200
            grep -E "^(OK|MISMATCH|SWEEP)" "$L/$n.log" | sed "s/^/$prog /"
        done
    done
}
# racecheck on REGR (attn-out M = 1: R = 3, FC2 M = 16: R = 2) and memcheck
# (attn-out M = 1) on gemm_variants_SET: step_regr_sanitize SET SECS
step_regr_sanitize() {
    step_race race_attn1 "$2" "gemm_variants_$1" attn_out 1
    step_race race_fc2_16 "$2" "gemm_variants_$1" fc2 16
    step_mem mem_attn1 "$2" "gemm_variants_$1" attn_out 1
    grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|hazard" "$L"/race_*.log "$L"/mem_*.log | head -n 6
}
