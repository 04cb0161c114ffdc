#!/bin/sh
# session19.sh -- the nineteenth session's REGR options (built without a
# device), attn-out and FC2 at M <= 16 on the H200, against the library:
#   il      interleaved rows where N % 128 == 0 (-DNVFP4_SM90_REGR_IL:
#           each CTA loads its own rows' scales only; smaller stages)
#   actrot  the activation warps take whole chunks in turn
#           (-DNVFP4_SM90_REGR_ACT_ROT)
#   ilrot   both
# Usage: OUT=DIR [PARTS="..."] [SETS="il actrot ilrot"] [S=ilrot] sh dev/cuda/session19.sh BUILD
#   layout    gemm_variants and gemm_variants_X for X in SETS: the planned
#             kernel and REGR at R = 2, 3, 4 (variants 35..37 at MT = 8 for
#             M = 1, 38..40 at MT = 16 for M = 16), each checked bit for
#             bit, then timed (the list twice)
#   sweep     gemm_variants_dev, _ildev and _ilrotdev: parts left out, each
#             mode leaving out one more (results wrong): 32 the weight
#             dequantization, 96 the hand-off (the eighteenth session's
#             skeleton), 98 the activation warps' work, 102 the weight-scale
#             box, 110 the activation boxes (codes alone), 126 the codes
#             (no box at all: barriers, steps and the launch)
#   quick     test_gemm_cuda_X --quick for X in SETS
#   suites    test_gemm_cuda_S in full, test_linear_cuda_S (S = ilrot by
#             default: both options' code, and the contiguous REGR where
#             interleaving does not apply; the fused linear's REGR twins at
#             M <= 2 run interleaved)
#   checks    nvfp4_S check and --streaming-a at 1 row (128 and 2048 run
#             kernels the sets leave unchanged: dev/cuda/flip_check.sh SET)
#   bench     nvfp4 bench --m 1,16, the library then nvfp4_S, each with
#             cuBLAS in its own run
#   sanitize  racecheck (attn-out M = 1, FC2 M = 16) and memcheck (attn-out
#             M = 1) on gemm_variants_S
# Two calls fit the device's 600 s: PARTS="layout sweep quick" (about 300
# s), then PARTS="suites checks bench sanitize" with S the winner (il or
# ilrot; gpu.mk's ALT_FULL builds nvfp4_ and test_linear_cuda_ for both).
# The carry (dev/cuda/pack_carry.sh; 53 MB with every program, 16 MB with
# this list):
#   ONLY="$(echo gemm_variants gemm_variants_il gemm_variants_actrot gemm_variants_ilrot \
#     gemm_variants_dev gemm_variants_ildev gemm_variants_ilrotdev test_gemm_cuda_il \
#     test_gemm_cuda_actrot test_gemm_cuda_ilrot test_linear_cuda_il test_linear_cuda_ilrot \
#     nvfp4_il nvfp4_ilrot)" sh dev/cuda/pack_carry.sh
# Offline,
# dev/cuda/il_layout_check.py checks the interleaved layout's maps and
# addressing against each other.
. "$(dirname "$0")/step.sh"
PARTS=${PARTS:-layout sweep quick}
SETS=${SETS:-il actrot ilrot}
S=${S:-ilrot}
SHAPES=${SHAPES:-"fc2:1 attn_out:1 fc2:16 attn_out:16"}
if has layout; then
    step_regr_vs layout "$SHAPES" gemm_variants $(for a in $SETS; do echo "gemm_variants_$a"; done)
fi
if has sweep; then
    step_regr_sweep "0:0,32:0,96:0,98:0,102:0,110:0,126:0,0:0" "${SWEEP_SHAPES:-fc2:1 attn_out:1 fc2:16}" \
        gemm_variants_dev gemm_variants_ildev gemm_variants_ilrotdev
fi
if has quick; then step_quick_sets "$SETS"; fi
if has suites; then step_suites_of "$S" 240; fi
if has checks; then step_checks_of "$S" 1 120; fi
if has bench; then step_bench_vs "$S" 1,16 150 10; fi
if has sanitize; then step_regr_sanitize "$S" "${SAN_SECS:-120}"; fi
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
