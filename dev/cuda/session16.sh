#!/bin/sh
# session16.sh -- the H200 runs the sixteenth session prepared (it had no
# device): OUT=DIR [PARTS="..."] sh dev/cuda/session16.sh [BUILD].  BUILD
# holds `make gpu-tests`, `make -f tests/gpu/gpu.mk alts dev-fixed` and the
# nvfp4 command: dev/cuda/pack_carry.sh builds them all into
# .carry/carry.tar.xz (~32 MB), which the call unpacks first (BUILD
# .carry/t/build).  PARTS (default: all, in this order) picks:
#   alts    the GEMM kernels built with the sixteenth session's options
#           (tests/gpu/gpu.mk `alts`): pair (wgmma groups of two chunks),
#           regbal (setmaxnreg on the single-consumer wgmma tiles),
#           regstatic (the register kernels' dev_mode folded away), all.
#           Their GEMM suites first (test_gemm_cuda_all in full, the others
#           --quick: every output against the CPU oracle), then the
#           library's planned kernel and each option's, checked and timed
#           side by side, ROUNDS times (default 1; ALT_SHAPES: the four
#           linears at M = 128, attn-out at 64; SMALL_SHAPES, library
#           against regstatic and all: the four at M = 1 and 16), and the
#           64x128 tile forced on QKV M = 128 (four tiles a CTA)
#   parts   parts left out, fixed at compile time (gemm_variants_devN and
#           gemm_variants_all_devN; N: 1 no dequantization, 2 no wgmma, 4
#           no copies, 3/5/6/7 their sums -- 5 is the wgmma chain and its
#           barriers alone), at PARTS_SHAPES (attn-out and QKV at M = 128)
#   prof    ncu source counters of the library's and the `all` build's
#           64x128 kernel at attn-out M = 128 (tests/gpu/profile_source.sh)
#   quant   the library's three quantizer kernels checked, then timed side
#           by side (dev/cuda/quantizer_coop; the four-lane one is forced
#           only), and the fused linear with each of them (QMODES -1 0 1 2)
#   suites, checks, bench, sanitize   as in session15.sh
# Each step's log is in OUT/logs.tgz; the summary lines go to stdout.
# In device calls of under 10 minutes: PARTS="alts quant"; then, with the
# winners made the default and rebuilt, PARTS="suites checks bench
# sanitize"; PARTS="parts prof" where time is left (they explain, they do
# not decide).
. "$(dirname "$0")/step.sh"
PARTS=${PARTS:-alts parts prof quant suites checks bench sanitize}
ALTS=${ALTS:-regbal pair all}
has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
if has alts; then
    step gemm_all 300 "$B/gpu/test_gemm_cuda_all"
    for a in pair regbal regstatic; do step "gemm_$a" 200 "$B/gpu/test_gemm_cuda_$a" --quick; done
    for round in $(seq 1 "${ROUNDS:-1}"); do
        for s in ${ALT_SHAPES:-attn_out:128 fc2:128 qkv:128 fc1:128 attn_out:64} \
            ${SMALL_SHAPES:-attn_out:1 fc2:1 qkv:1 fc1:1 attn_out:16 fc2:16 qkv:16 fc1:16}; do
            case "${s##*:}" in
            1 | 16) progs="gemm_variants gemm_variants_regstatic gemm_variants_all" ;;
            *) progs="gemm_variants $(for a in $ALTS; do echo gemm_variants_$a; done)" ;;
            esac
            for prog in $progs; do
                n="${prog}_${s%%:*}_${s##*:}_$round"
                step "$n" 120 "$B/gpu/$prog" ${s%%:*} ${s##*:} -1 30
                grep -E "^(OK|MISMATCH)" "$L/$n.log" | sed "s/^/$prog /"
            done
        done
    done
    for prog in gemm_variants $(for a in $ALTS; do echo gemm_variants_$a; done); do
        step "${prog}_qkv_forced" 120 "$B/gpu/$prog" qkv 128 5 30
        grep -E "^(OK|MISMATCH)" "$L/${prog}_qkv_forced.log" | sed "s/^/$prog /"
    done
fi
if has parts; then
    for s in ${PARTS_SHAPES:-attn_out:128 qkv:128}; do
        for prog in gemm_variants $(for n in 1 2 3 4 5 6 7; do echo gemm_variants_dev$n; done) \
            gemm_variants_all $(for n in 1 4 5 6; do echo gemm_variants_all_dev$n; done); do
            [ -x "$B/gpu/$prog" ] || continue
            n=${prog##*_dev}; case "$prog" in *_dev*) ;; *) n=0 ;; esac
            NVFP4_DEV_MODE=$n step "${prog}_${s%%:*}_${s##*:}" 120 "$B/gpu/$prog" ${s%%:*} ${s##*:} -1 30
            grep -E "^(OK|DEV|MISMATCH)" "$L/${prog}_${s%%:*}_${s##*:}.log" | sed "s/^/$prog /"
        done
    done
fi
if has prof; then
    for prog in gemm_variants gemm_variants_all; do
        PROG=$prog TAG=_$prog step "prof_$prog" 200 sh tests/gpu/profile_source.sh "$B" "$L" attn_out 128 -1
        grep -E "Duration|Issued Warp|No Eligible|Eligible Warps" "$L/src-attn_out-m128-v-1_$prog.txt" | head -n 6
    done
fi
if has quant; then step_quant; fi
if has suites; then step_suites; fi
if has checks; then step_checks; fi
if has bench; then step_bench; fi
if has sanitize; then
    step_sanitize
    if [ -x "$B/gpu/gemm_variants_all" ]; then
        step race_all 200 compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 1 \
            "$B/gpu/gemm_variants_all" attn_out 128 -1 0
        step race_all_qkv 200 compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 1 \
            "$B/gpu/gemm_variants_all" qkv 256 -1 0
        step mem_all 150 compute-sanitizer --tool memcheck --error-exitcode 1 "$B/gpu/gemm_variants_all" attn_out 96 -1 0
    fi
fi
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
