#!/bin/sh
# session27.sh -- the twenty-seventh session's options (built without a
# device, to be measured; docs/KERNEL.md "Twenty-seventh session"), REGR
# without its activation work, against the library:
#   res     REGR at M <= 2 with resident activations (-DNVFP4_SM90_REGR_RES):
#           the B fragments of token rows 0 and 1 made once per CTA, the
#           stages weights only
#   f16pre  REGR on the exact FP16 operands (-DNVFP4_SM90_REGR_F16=3): in
#           the fused linear the quantizer writes them (as for the wgmma
#           kernels), in the prequantized GEMM the pre-pass does; the MMA
#           warps ldmatrix them, the activation warps convert nothing
#           (`f16`, =1, is the fused linear's half alone)
# and the amax pass's testing-hook read made a kernel argument
# (docs/STREAMING_A.md "Twenty-seventh session").  Offline, before a call:
# python3 dev/cuda/regr_act_layout_check.py (the options' fragment
# addressing against the streaming path's).
# Usage: OUT=DIR [PARTS="..."] [SETS="res f16pre"] sh dev/cuda/session27.sh BUILD
#   layout    gemm_variants and gemm_variants_X (X in SETS) at attn-out and
#             FC2, M = 1, 2, 16: the planned kernel and REGR at R = 2, 3, 4
#             (variants 35..37 at MT = 8 for M <= 2, 38..40 at MT = 16),
#             each checked bit for bit, then timed (the list twice)
#   fused     the fused linear (inkernel_a: every output checked against the
#             CPU linear first, then the prequantized GEMM, the in-kernel
#             path and the two-kernel path timed) on the library and on each
#             X (inkernel_a_X), attn-out and FC2 at M = 1, 2, 16, two passes,
#             the order reversed in the second
#   dyn       inkernel_old (git b235098's inkernel_a) against inkernel_a at
#             every linear, M = 1 and 16, two passes: the amax pass's hook
#             read
#   quick     test_gemm_cuda_X --quick and test_linear_cuda_X for X in SETS
#   sweep     gemm_variants_dev, _resdev and _f16dev: parts left out as in
#             the twenty-second session (32 no weight dequantization, 96 and
#             no hand-off, 98 and no activation work -- with res the
#             resident fragments are not made, with f16 the scale pairs --
#             102 no weight-scale box, 110 no activation boxes, 126 no
#             boxes), FC2 M = 1, attn-out M = 1, FC2 M = 16
#   suites    test_gemm_cuda_X in full and test_linear_cuda_X
#   checks    nvfp4_X check and --streaming-a at 1 and 16 rows
#   bench     nvfp4 bench --m 1,16, the library then each nvfp4_X, each with
#             cuBLAS in its own run
#   sanitize  racecheck (attn-out M = 1, FC2 M = 16) and memcheck (attn-out
#             M = 1, FC2 M = 16) on gemm_variants_X
#   final     the library's P0 checks at 1, 128, 2048 rows and one nvfp4
#             bench at M = 1, 16, 128, 2048 (the twenty-sixth session's
#             code never had an H200 bench: its dynamic-scale rule)
# First call: PARTS="layout quick fused final" (an H200 if one comes:
# final's bench is #11's table; the twenty-sixth session's "dyn suites
# final" took ~200 s, so this should fit 600 s -- if not, "quick final"
# then "layout fused"); then PARTS="dyn sweep suites checks bench
# sanitize" with SETS the options that were exact and faster.
# Carry (dev/cuda/pack_carry.sh): nvfp4 and gpu/{gemm_variants,
# gemm_variants_res, gemm_variants_f16pre, gemm_variants_dev,
# gemm_variants_resdev, gemm_variants_f16dev, test_gemm_cuda_res,
# test_gemm_cuda_f16pre, test_linear_cuda_res, test_linear_cuda_f16pre,
# nvfp4_res, nvfp4_f16pre, inkernel_a, inkernel_a_res, inkernel_a_f16pre,
# inkernel_old} (make -f tests/gpu/gpu.mk build/gpu/PROG; inkernel_old:
# make gpu-tests in a worktree of git b235098, its build/gpu/inkernel_a
# renamed).
. "$(dirname "$0")/step.sh"
PARTS=${PARTS:-layout quick fused final}
SETS=${SETS:-res f16pre}
SHAPES=${SHAPES:-"attn_out:1 fc2:1 attn_out:2 fc2:2 attn_out:16 fc2:16"}
# ab_fused TAG "PROG..." "LINEAR:MS ...": inkernel_a-style programs on the
# shapes, two passes, the order reversed in the second; prints the timing
# lines and any mismatch
ab_fused() {
    for pass in 1 2; do
        progs=$2
        [ $pass = 2 ] && progs=$(for p in $2; do echo "$p"; done | sed -n '1!G;h;$p' | tr '\n' ' ')
        for pr in $progs; do
            # shellcheck disable=SC2086 # the shapes split on purpose
            step "${1}_${pr}_$pass" 240 "$B/gpu/$pr" $3 --iters 100
            grep -E "static|dynamic|MISMATCH|FAIL" "$L/${1}_${pr}_$pass.log" | sed -E "s/^/$pr: /; s/ +/ /g"
        done
    done
}
if has layout; then
    # shellcheck disable=SC2046 # one program a set
    step_regr_vs layout "$SHAPES" gemm_variants $(for a in $SETS; do echo "gemm_variants_$a"; done)
fi
if has fused; then
    ab_fused fused "inkernel_a $(for a in $SETS; do echo "inkernel_a_$a"; done | tr '\n' ' ')" \
        "${FCASES:-attn_out:1,2,16 fc2:1,2,16}"
fi
if has dyn; then
    ab_fused dyn "inkernel_old inkernel_a" "${DCASES:-attn_out:1,16 fc2:1,16 qkv:1,16 fc1:1,16}"
fi
if has quick; then
    step_quick_sets "$SETS"
    for a in $SETS; do step "linear_$a" 200 "$B/gpu/test_linear_cuda_$a"; done
fi
if has sweep; then
    # shellcheck disable=SC2046 # one program a set
    step_regr_sweep "0:0,32:0,96:0,98:0,102:0,110:0,126:0,0:0" "${SWEEP_SHAPES:-fc2:1 attn_out:1 fc2:16}" \
        gemm_variants_dev $(for a in $SETS; do echo "gemm_variants_${a%pre}dev"; done)
fi
if has suites; then for a in $SETS; do step_suites_of "$a" 400; done; fi
if has checks; then for a in $SETS; do step_checks_of "$a" 1 120; step_checks_of "$a" 16 120; done; fi
if has bench; then
    step bench_lib 150 "$B/nvfp4" bench --m 1,16 --json "$L/bench_lib.json"
    tail -n 10 "$L/bench_lib.log"
    for a in $SETS; do
        step "bench_$a" 150 "$B/gpu/nvfp4_$a" bench --m 1,16 --json "$L/bench_$a.json"
        tail -n 10 "$L/bench_$a.log"
    done
fi
if has sanitize; then
    for a in $SETS; do
        step_race "race_${a}_attn1" "${SAN_SECS:-120}" "gemm_variants_$a" attn_out 1
        step_race "race_${a}_fc2_16" "${SAN_SECS:-120}" "gemm_variants_$a" fc2 16
        step_mem "mem_${a}_attn1" "${SAN_SECS:-120}" "gemm_variants_$a" attn_out 1
        step_mem "mem_${a}_fc2_16" "${SAN_SECS:-120}" "gemm_variants_$a" fc2 16
    done
    grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|hazard" "$L"/race_*.log "$L"/mem_*.log | head -n 12
fi
if has final; then
    step_checks
    step_bench
fi
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
