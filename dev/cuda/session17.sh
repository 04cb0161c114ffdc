#!/bin/sh
# session17.sh -- the seventeenth session's second H200 call: the candidate
# default `pick` (tests/gpu/gpu.mk: pair, regbal and lean, the four-lane
# quantizer where the one-thread kernel ran) against the library, and each
# option alone.  OUT=DIR [PARTS="..."] [SET=pick] sh dev/cuda/session17.sh BUILD
# (BUILD from dev/cuda/pack_carry.sh, or the programs named below).
#   bench     nvfp4 bench --m 1,16,64,128,2048, the library then SET, each
#             with cuBLAS in its own run
#   suites    test_gemm_cuda_SET (in full) and test_linear_cuda_SET
#   checks    nvfp4_SET check and --streaming-a at 1, 128 and 2048 rows
#   alts      gemm_variants: the library, pair, regbal and SET at M = 128
#             (the four linears); the library, lean and SET at M = 64 and 48
#   quant     the three quantizer kernels alone (dev/cuda/quantizer_coop)
#   sanitize  racecheck (attn-out M = 128, QKV M = 256: stream-K) and
#             memcheck (attn-out M = 96) on gemm_variants_SET
. "$(dirname "$0")/step.sh"
PARTS=${PARTS:-bench suites checks alts quant sanitize}
S=${SET:-pick}
if has bench; then step_bench_vs "$S" 1,16,64,128,2048 200 21; fi
if has suites; then step_suites_of "$S" 200; fi
if has checks; then
    for m in 1 128 2048; do
        step "${S}_check$m" 120 "$B/gpu/nvfp4_$S" check --rows $m --json "$L/${S}_check$m.json"
        step "${S}_streaming$m" 120 "$B/gpu/nvfp4_$S" check --rows $m --streaming-a --json "$L/${S}_streaming$m.json"
    done
fi
if has alts; then
    for s in attn_out:128 fc2:128 qkv:128 fc1:128 attn_out:64 fc2:64 qkv:64 fc1:64 qkv:48; do
        case "$s" in
        *:128) progs="gemm_variants gemm_variants_pair gemm_variants_regbal gemm_variants_$S" ;;
        *) progs="gemm_variants gemm_variants_lean gemm_variants_$S" ;;
        esac
        for prog in $progs; do step_variant "$prog" "$s" 60; done
    done
fi
if has quant; then
    step coop 100 "$B/gpu/quantizer_coop" --iters 200
    grep -E "exact;|MISMATCH|RESULT|us" "$L/coop.log" | head -n 20
fi
if has sanitize; then
    step_race race_attn "${SAN_SECS:-150}" "gemm_variants_$S" attn_out 128
    step_race race_qkv "${SAN_SECS:-150}" "gemm_variants_$S" qkv 256
    step_mem mem_attn "${SAN_SECS:-120}" "gemm_variants_$S" attn_out 96
    grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|hazard" "$L"/race_*.log "$L"/mem_*.log | head -n 6
fi
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
