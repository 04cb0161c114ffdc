#!/bin/sh
# session26.sh -- the twenty-sixth session's calls: the weight's first K
# columns brought into L2 by the kernel before the GEMM (the fused linear's
# quantizer, the prequantized GEMM's activation pre-pass), while DRAM idles
# and the GEMM's CTAs cannot start beside that kernel -- slower at every
# depth, dropped (git 1692274 has it: sm90_weight_prefetch.cuh and the
# NVFP4_DEV_PREFETCH hooks) -- and the race it exposed: REGR's MMA warps
# read the activation scale before the quantizer had stored it (fixed).
# Usage: OUT=DIR [PARTS="..."] sh dev/cuda/session26.sh BUILD
#   pf      inkernel_a (every output checked against the CPU linear first)
#           at attn-out and FC2 M = 1, 16, 128, QKV and FC1 M = 16, 128
#           with NVFP4_DEV_PREFETCH=Q,P: Q columns prefetched by the
#           quantizer, P by the pre-pass -- 0,0 (none), 1024,1024,
#           4096,4096, all -- two passes, the order reversed in the second
#   late    test_linear_cuda_racy: the suite built on the REGR kernel as
#           it was (its MMA warps read the activation scale at their start):
#           its late-scale test (the quantizer's store delayed by a hook)
#           should fail, and test_linear_cuda's pass
#   pfl     as pf with NVFP4_DEV_PREFETCH_LINES=1 (one prefetch.global.L2
#           a line instead of a bulk prefetch a row): 0,0, 1024,0, 1024,1024,
#           4096,0, two passes, the order reversed in the second
#   dyn     the dynamic-scale fused linear before (gpu/inkernel_old: git
#           c1d221d, a memset, one atomicMax a warp, the quantizer launched
#           after the pass completes) and after (the amax pass's words, one
#           a CTA, no memset, the quantizer its programmatic dependent):
#           inkernel_a at every linear, M = 1, 16, 128, two passes, the
#           order reversed in the second
#   nowait  test_linear_cuda_nowait: the suite on a library whose quantizer
#           reads the amax words without griddepcontrol.wait: its
#           late-stores test should fail (dynamic scale), test_linear_cuda's
#           pass
#   quick   test_linear_cuda and test_quantize_cuda
#   suites  test_gemm_cuda, test_quantize_cuda, test_linear_cuda, racecheck
#           (QKV M = 256, stream-K) and memcheck (attn-out M = 128) of the
#           wgmma kernel, racecheck of REGR (attn-out M = 16), memcheck of
#           the fused linear (FC2 M = 16 and 128, inkernel_a, one untimed
#           call each) and of the quantizer suite
#   final   the P0 checks at 1, 128, 2048 rows (plain and --streaming-a)
#           and one nvfp4 bench with cuBLAS at M = 1, 16, 128, 2048
# pf and pfl need git 1692274's build (their hooks were dropped after
# these calls).
# Calls: PARTS="pf quick final" (H200; quick then failed: the race),
# "late pfl quick final" (an H100; the fix), "suites final" (H100, the
# fix without the prefetch), "dyn nowait suites final" (the amax pass's
# words; H100), then "dyn suites final" (its grid and the readers' loads
# mended; H100).  dyn also needs gpu/inkernel_old (inkernel_a of git
# c1d221d), nowait gpu/test_linear_cuda_nowait (this tree with the
# quantizer's griddepcontrol.wait before the amax words removed).
# Carry: nvfp4 and gpu/{inkernel_a,gemm_variants,test_gemm_cuda,
# test_linear_cuda,test_quantize_cuda}, and for late test_linear_cuda_racy
# (tests/gpu/test_linear_cuda.c linked against a library whose
# sm90_regm_body.cuh is git ad0ff02's).
. "$(dirname "$0")/step.sh"
PARTS=${PARTS:-suites final}
PFSHAPES=${CASES:-attn_out:1,16,128 fc2:1,16,128 qkv:16,128 fc1:16,128}
# pf_sweep TAG LINES "Q,P ...": inkernel_a on PFSHAPES under each
# NVFP4_DEV_PREFETCH=Q,P (NVFP4_DEV_PREFETCH_LINES=LINES), two passes, the
# second in reverse order; prints the static lines
pf_sweep() {
    rev=""
    for c in $3; do rev="$c $rev"; done
    for pass in 1 2; do
        cfgs=$3
        [ $pass = 2 ] && cfgs=$rev
        for c in $cfgs; do
            tag="${1}_$(echo "$c" | tr , _)_$pass"
            NVFP4_DEV_PREFETCH_LINES=$2 NVFP4_DEV_PREFETCH=$c step "$tag" 200 "$B/gpu/inkernel_a" $PFSHAPES --iters 100
            grep -E "static" "$L/$tag.log" | sed -E "s/^/$1 $c: /; s/, in-kernel [^|]*//; s/ +/ /g"
        done
    done
}
if has pf; then
    pf_sweep pf 0 "0,0 1024,1024 4096,4096 1048576,1048576"
fi
if has late; then
    step test_linear_cuda_racy 200 "$B/gpu/test_linear_cuda_racy"
    grep -E "^FAIL" "$L/test_linear_cuda_racy.log" | cut -c1-200 | head -n 12
    grep -E "late (scale|stores)" "$L/test_linear_cuda_racy.log" | head -n 12
fi
if has pfl; then
    pf_sweep pfl 1 "0,0 1024,0 1024,1024 4096,0"
fi
if has dyn; then
    for pass in 1 2; do
        progs="inkernel_old inkernel_a"
        [ $pass = 2 ] && progs="inkernel_a inkernel_old"
        for pr in $progs; do
            step "dyn_${pr}_$pass" 200 "$B/gpu/$pr" ${DCASES:-attn_out:1,16,128 fc2:1,16,128 qkv:1,16,128 fc1:1,16,128} \
                --iters 100
            grep -E "static" "$L/dyn_${pr}_$pass.log" | sed -E "s/^/$pr: /; s/ +/ /g"
        done
    done
fi
if has nowait; then
    step test_linear_cuda_nowait 200 "$B/gpu/test_linear_cuda_nowait"
    grep -E "^FAIL" "$L/test_linear_cuda_nowait.log" | cut -c1-180 | head -n 8
    grep -cE "^FAIL" "$L/test_linear_cuda_nowait.log"
fi
if has quick; then
    step test_linear_cuda 200 "$B/gpu/test_linear_cuda"
    step test_quantize_cuda 150 "$B/gpu/test_quantize_cuda"
fi
if has suites; then
    step test_gemm_cuda 400 "$B/gpu/test_gemm_cuda"
    step_race race_qkv 200 gemm_variants qkv 256
    step_mem mem_attn 150 gemm_variants attn_out 128
    step_race race_attn16 200 gemm_variants attn_out 16
    step test_quantize_cuda 150 "$B/gpu/test_quantize_cuda"
    step test_linear_cuda 200 "$B/gpu/test_linear_cuda"
    step mem_fused 200 compute-sanitizer --tool memcheck --error-exitcode 1 "$B/gpu/inkernel_a" fc2:16,128 --iters 0
    step mem_quant 150 compute-sanitizer --tool memcheck --error-exitcode 1 "$B/gpu/test_quantize_cuda" --quick
fi
if has final; then
    step_checks
    step_bench
fi
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
