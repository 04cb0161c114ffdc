#!/bin/sh
# session18.sh -- the eighteenth session's H200 calls: REGR's accumulator
# hand-off (attn-out and FC2 at M <= 16) by named barriers (flag set `nbar`,
# -DNVFP4_SM90_NBAR) and in turns of two chunks (`turn2`, `nbarturn2`:
# -DNVFP4_SM90_REGR_TURN=2) against the library's one-chunk mbarrier turns.
#   OUT=DIR [PARTS="..."] [SET=nbar] sh dev/cuda/session18.sh BUILD
#   handoff   gemm_variants and gemm_variants_X for X in ALTS18 (default
#             nbar turn2 nbarturn2): the planned kernel and REGR at R = 2,
#             3, 4 (variants 35..37 at MT = 8, 38..40 at MT = 16), each
#             checked bit for bit, then timed (the list twice)
#   sweep     gemm_variants_dev (mbarriers) and _nbardev: parts left out
#             (dev_mode 2 no activation work, 32 no weight dequantization,
#             64 no hand-off wait or signal -- the chain's warps run
#             unchained, results wrong)
#   quick     test_gemm_cuda_X --quick for X in ALTS18 (K tails, odd chunk
#             counts, every variant)
#   bench     nvfp4 bench --m 1,16, the library then nvfp4_SET, each with
#             cuBLAS in its own run
#   suites    test_gemm_cuda_SET (in full), test_linear_cuda_SET
#   checks    nvfp4_SET check and --streaming-a at 1 row (the sizes that
#             run REGR; 128 and 2048 run kernels the set leaves unchanged:
#             dev/cuda/flip_check.sh SET)
#   sanitize  racecheck on REGR (attn-out M = 1: R = 3, FC2 M = 16: R = 2)
#             and memcheck (attn-out M = 1) on gemm_variants_SET
#   final     BUILD's own programs, built with the set as the library's
#             default (their kernels the set's: flip_check.sh SET after
#             such a flip; this session, -DNVFP4_SM90_NBAR=1):
#             test_gemm_cuda and test_linear_cuda in full, nvfp4 check and
#             --streaming-a at 1, 128, 2048 rows, racecheck on REGR
#             (attn-out M = 1, FC2 M = 16), nvfp4 bench --m 1,16,128,2048
#             with cuBLAS, memcheck (attn-out M = 1)
. "$(dirname "$0")/step.sh"
PARTS=${PARTS:-handoff sweep quick}
ALTS18=${ALTS18:-nbar turn2 nbarturn2}
S=${SET:-nbar}
SHAPES=${SHAPES:-"fc2:1 attn_out:1 fc2:16 attn_out:16"}
if has handoff; then
    step_regr_vs r "$SHAPES" gemm_variants $(for a in $ALTS18; do echo "gemm_variants_$a"; done)
fi
if has sweep; then
    step_regr_sweep "0:0,64:0,32:0,96:0,2:0,66:0,0:0" "${SWEEP_SHAPES:-fc2:1 attn_out:1 fc2:16}" gemm_variants_dev \
        "gemm_variants_${S}dev"
fi
if has quick; then
    for a in $ALTS18; do step "quick_$a" 200 "$B/gpu/test_gemm_cuda_$a" --quick; done
fi
if has bench; then step_bench_vs "$S" 1,16 150 10; fi
if has suites; then step_suites_of "$S" 240; fi
if has checks; then
    step "${S}_check1" 120 "$B/gpu/nvfp4_$S" check --rows 1 --json "$L/${S}_check1.json"
    step "${S}_streaming1" 120 "$B/gpu/nvfp4_$S" check --rows 1 --streaming-a --json "$L/${S}_streaming1.json"
fi
if has sanitize; then step_regr_sanitize "$S" "${SAN_SECS:-120}"; fi
if has final; then
    step gemm 240 "$B/gpu/test_gemm_cuda"
    step linear 200 "$B/gpu/test_linear_cuda"
    step_checks
    step_race race_attn1 "${SAN_SECS:-90}" gemm_variants attn_out 1
    step_race race_fc2_16 "${SAN_SECS:-90}" gemm_variants fc2 16
    grep -hE "RACECHECK SUMMARY|hazard" "$L"/race_*.log | head -n 4
    step_bench
    step_mem mem_attn1 "${SAN_SECS:-90}" gemm_variants attn_out 1
    grep -hE "ERROR SUMMARY" "$L"/mem_*.log | head -n 2
fi
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
