#!/bin/sh
# session21.sh -- what the twenty-first session (an H100, ~8 minutes of
# device time) left for the next call:
# Usage: OUT=DIR [PARTS="..."] sh dev/cuda/session21.sh BUILD
#   ring    probe_rates ring: the activation ring in clusters of two, plain
#           and multicast, under five variants of its cross-CTA release
#           and waits, against the single-CTA ring (docs/KERNEL.md,
#           twenty-first session: any cluster launch of it ran 6-7x slower)
#   final   on an H200 (the issues' card): the GPU suites, the P0 checks
#           and one bench with cuBLAS (the library now loads the next pair
#           first; its last H200 bench is the eighteenth session's)
# then session19.sh's REGR options (M <= 16, never run): PARTS="layout
# sweep quick" sh dev/cuda/session19.sh BUILD, and for the winner S
# PARTS="suites checks bench sanitize" S=S.
# The carry (dev/cuda/pack_carry.sh), this list with session19.sh's:
#   ONLY="$(echo probe_rates test_gemm_cuda test_linear_cuda test_quantize_cuda \
#     gemm_variants gemm_variants_il gemm_variants_actrot gemm_variants_ilrot \
#     gemm_variants_dev gemm_variants_ildev gemm_variants_ilrotdev test_gemm_cuda_il \
#     test_gemm_cuda_actrot test_gemm_cuda_ilrot test_linear_cuda_il test_linear_cuda_ilrot \
#     nvfp4_il nvfp4_ilrot)" sh dev/cuda/pack_carry.sh
. "$(dirname "$0")/step.sh"
PARTS=${PARTS:-ring final}
if has ring; then
    step probe_ring 120 "$B/gpu/probe_rates" ring
    grep -E "CTAs" "$L/probe_ring.log"
fi
if has final; then
    step_suites
    step_checks
    step_bench
fi
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
