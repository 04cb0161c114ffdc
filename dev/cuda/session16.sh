#!/bin/sh
# session16.sh -- the H200 runs the sixteenth session prepared (it had no
# device): OUT=DIR [PARTS="..."] sh dev/cuda/session16.sh [BUILD].  BUILD
# holds `make gpu-tests`, `make -f tests/gpu/gpu.mk alts dev-fixed` and the
# nvfp4 command: dev/cuda/pack_carry.sh builds them all into
# .carry/carry.tar.xz (~36 MB), which the call unpacks first (BUILD
# .carry/t/build).  PARTS (default: all, in this order) picks:
#   alts    the GEMM kernels built with the sixteenth and seventeenth
#           sessions' options (tests/gpu/gpu.mk `alts`): pair (wgmma groups
#           of two chunks), regbal (setmaxnreg on the single-consumer wgmma
#           tiles), regstatic (the register kernels' dev_mode folded away),
#           lean (the bn <= 64 tiles without the K-slice code, which twins
#           carry for GEMMs with slices), all (the four, and the four-lane
#           quantizer's launch rule).
#           Their GEMM suites first (test_gemm_cuda_all in full, the others
#           --quick: every output against the CPU oracle), then the
#           library's planned kernel and each option's, checked and timed
#           side by side, ROUNDS times (default 1; ALT_SHAPES: the four
#           linears at M = 128; SMALL_SHAPES, the library against regstatic
#           and all: the four at M = 1 and 16; LEAN_SHAPES, the library
#           against regbal, lean and all: attn-out and FC2 at M = 64, the
#           64x64 tile, QKV and FC1 at 64 and QKV at 48, the 128x64 tile),
#           and the 64x128 tile forced on QKV M = 128 (four tiles a CTA)
#   parts   parts left out, fixed at compile time (gemm_variants_devN and
#           gemm_variants_all_devN; N: 1 no dequantization, 2 no wgmma, 4
#           no copies, 3/5/6/7 their sums -- 5 is the wgmma chain and its
#           barriers alone), at PARTS_SHAPES (attn-out and QKV at M = 128)
#   prof    ncu source counters of the library's and the `all` build's
#           64x128 kernel at attn-out M = 128 (tests/gpu/profile_source.sh)
#   quant   the library's three quantizer kernels checked, then timed side
#           by side (dev/cuda/quantizer_coop; the four-lane one is forced
#           only), and the fused linear with each of them (QMODES -1 0 1 2)
#   altbench  nvfp4 bench --m 1,16,128 with the library, then with every
#           option (BUILD/gpu/nvfp4_all: the four GEMM options and the
#           four-lane quantizer wherever a thread has at most two blocks),
#           each with cuBLAS in the same run; then nvfp4_all's P0 checks
#           (check and --streaming-a at 1, 128, 2048 rows) and its fused
#           linear suite (test_linear_cuda_all).  If every option wins, the
#           flipped defaults compile to these kernels byte for byte
#           (dev/cuda/flip_check.sh) and these runs are the library's.
#   suites, checks, bench, sanitize   as in session15.sh
# Each step's log is in OUT/logs.tgz; the summary lines go to stdout.
# In device calls of under 10 minutes: PARTS="alts quant"; then
# PARTS="altbench sanitize" (with the library's suites, PARTS="suites", if
# some option lost and the winners must be rebuilt as the default: then
# "suites checks bench sanitize" on that build instead); PARTS="parts prof"
# where time is left (they explain, they do not decide).
. "$(dirname "$0")/step.sh"
PARTS=${PARTS:-alts quant altbench parts prof suites checks bench sanitize}
ALTS=${ALTS:-regbal pair all}
if has alts; then
    step gemm_all 300 "$B/gpu/test_gemm_cuda_all"
    for a in pair regbal regstatic lean; do step "gemm_$a" 200 "$B/gpu/test_gemm_cuda_$a" --quick; done
    for round in $(seq 1 "${ROUNDS:-1}"); do
        for s in ${ALT_SHAPES:-attn_out:128 fc2:128 qkv:128 fc1:128} \
            ${SMALL_SHAPES:-attn_out:1 fc2:1 qkv:1 fc1:1 attn_out:16 fc2:16 qkv:16 fc1:16} \
            ${LEAN_SHAPES:-attn_out:64 fc2:64 qkv:64 fc1:64 qkv:48}; do
            case "$s" in
            *:1 | *:16) progs="gemm_variants gemm_variants_regstatic gemm_variants_all" ;;
            *:64 | *:48) progs="gemm_variants gemm_variants_regbal gemm_variants_lean gemm_variants_all" ;;
            *) progs="gemm_variants $(for a in $ALTS; do echo gemm_variants_$a; done)" ;;
            esac
            for prog in $progs; do step_variant "$prog" "$s" 120 "$round"; done
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
if has altbench; then
    step bench_lib 300 "$B/nvfp4" bench --m 1,16,128 --json "$L/bench_lib.json"
    tail -n 13 "$L/bench_lib.log"
    step bench_all 300 "$B/gpu/nvfp4_all" bench --m 1,16,128 --json "$L/bench_all.json"
    tail -n 13 "$L/bench_all.log"
    for m in 1 128 2048; do
        step all_check$m 240 "$B/gpu/nvfp4_all" check --rows $m --json "$L/all_check$m.json"
        step all_streaming$m 240 "$B/gpu/nvfp4_all" check --rows $m --streaming-a --json "$L/all_streaming$m.json"
    done
    step linear_all 300 "$B/gpu/test_linear_cuda_all"
fi
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
