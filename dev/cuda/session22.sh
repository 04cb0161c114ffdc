#!/bin/sh
# session22.sh -- the twenty-second session's calls (H200): REGR's
# activation warps take whole chunks at MT = 16 (NVFP4_SM90_REGR_ACT_ROT=16,
# the new default), checked and timed against the previous split, and the
# wgmma kernel's 64x128 tile in parts on the H200 (the twenty-first
# session's parts table is an H100's).
# Usage: OUT=DIR [PARTS="..."] sh dev/cuda/session22.sh BUILD
#   ab        REGR at R = 2, 3, 4 after the planned kernel, gemm_variants
#             (the library) against gemm_variants_actsplit (the previous
#             split), attn-out and FC2 at M = 16 and 1, each checked bit for
#             bit, then timed
#   final     the GPU suites, the P0 checks and one bench with cuBLAS
#   parts     attn-out and FC2 at M = 128: the library's 64x128 tile and
#             gemm_variants_devN (1 no dequantization, 3 copies alone, 5 the
#             wgmma chain and its barriers alone, 7 neither); then
#             probe_rates ring again on a warm card (the first call ran it
#             first thing after the card started: 557 cycles a chunk for the
#             single-CTA ring where the H100 took 309; warm, it matched)
#   sanitize  racecheck on REGR at attn-out and FC2 M = 16 (the new MT = 16
#             kernels) and attn-out M = 1, memcheck at attn-out M = 16
# Default PARTS="final sanitize ab" (one call); then PARTS=parts.  BUDGET
# (seconds, default 560) and SAN_SECS (each sanitizer run, default 100) fit
# it to a shorter call.
# The carry:
#   JOBS=2 ONLY="test_gemm_cuda test_linear_cuda test_quantize_cuda gemm_variants \
#     gemm_variants_actsplit gemm_variants_dev1 gemm_variants_dev3 gemm_variants_dev5 \
#     gemm_variants_dev7 probe_rates" sh dev/cuda/pack_carry.sh
. "$(dirname "$0")/step.sh"
PARTS=${PARTS:-final sanitize ab}
# the parts run in the order final, sanitize, ab, parts; one that would
# start with less than 100 s left of BUDGET seconds (default 560) is skipped,
# so that the logs are always packed before the call's limit
T0=$(date +%s)
room() {
    if [ $(( $(date +%s) - T0 )) -gt $(( ${BUDGET:-560} - 100 )) ]; then
        echo "== $1: skipped (too little of the call left)"
        return 1
    fi
}
if has final; then
    step_suites
    step_checks
    step_bench
fi
if has sanitize && room sanitize; then
    step_race race_attn16 "${SAN_SECS:-100}" gemm_variants attn_out 16
    step_race race_fc2_16 "${SAN_SECS:-100}" gemm_variants fc2 16
    step_race race_attn1 "${SAN_SECS:-100}" gemm_variants attn_out 1
    step_mem mem_attn16 "${SAN_SECS:-100}" gemm_variants attn_out 16
    grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|hazard" "$L"/race_*.log "$L"/mem_*.log | head -n 8
fi
if has ab && room ab; then
    step_regr_vs ab "attn_out:16 fc2:16 attn_out:1 fc2:1" gemm_variants gemm_variants_actsplit
fi
if has parts && room parts; then
    for s in attn_out:128 fc2:128; do
        step_variant gemm_variants "$s" 120
        for n in 1 3 5 7; do
            NVFP4_DEV_MODE=$n step "gemm_variants_dev${n}_${s%%:*}_${s##*:}" 120 \
                "$B/gpu/gemm_variants_dev$n" "${s%%:*}" "${s##*:}" -1 30
            grep -E "^(OK|DEV|MISMATCH)" "$L/gemm_variants_dev${n}_${s%%:*}_${s##*:}.log" | sed "s/^/dev$n /"
        done
    done
    step probe_ring 120 "$B/gpu/probe_rates" ring
    grep -E "CTAs" "$L/probe_ring.log"
fi
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
