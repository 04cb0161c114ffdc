#!/bin/sh
# session25.sh -- the twenty-fifth session's calls: what stands between
# the fused linear and 1.03x the prequantized GEMM -- the quantizer's
# threshold table built before the call, the quantizer on fewer SMs, the
# wgmma GEMM's weight issuers ahead of the previous grid (early weights,
# kept) -- and the fused linear at M = 2048.
# Usage: OUT=DIR [PARTS="..."] sh dev/cuda/session25.sh BUILD
#   pretab  inkernel_a with NVFP4_DEV_PRETAB=1: the fused linear (static
#           scale) with the table kernel building its table, and the same
#           with the table built beforehand (nvfp4_q_dev_pretab), each
#           checked against the CPU linear, beside the prequantized GEMM:
#           eager twice with the planned quantizer kernel, then eager and
#           cuda with the table kernel forced (NVFP4_DEV_QUANTIZER=0)
#   qwide   the fused linear at M = 128 (inkernel_a; static scale, eager,
#           each output checked first) with the table kernel on at most N
#           SMs (NVFP4_DEV_QWIDE=N: CTAs of 768 threads, one an SM) and/or
#           the wgmma GEMM's weight issuers starting before the quantizer
#           (or the prequantized path's pre-pass) completes
#           (NVFP4_DEV_EARLYW=1), two passes
#   prod    the wgmma GEMM's producer modes (SM90_PROD_* bits: 0 one
#           issuer, 1 parallel, 3 parallel + 3-D activation box, 5 and 7 the
#           same with early weights) on the prequantized GEMM (gemm_variants,
#           planned kernel, each mode's output checked first) at M = 128 and
#           2048, two passes
#   early   the fused linear at M = 128 with the producer before early
#           weights (NVFP4_DEV_EARLYW=0) and the default, two passes; then
#           with each quantizer kernel (NVFP4_DEV_QUANTIZER=1, 2; -1 the
#           rule)
#   ncu2048 each kernel's duration (ncu, clocks free, launches serialised)
#           in inkernel_a at QKV and attn-out M = 2048: why is the fused
#           linear 1.10x the prequantized GEMM at QKV (+59 us on the H200)
#           and 1.02x at attn-out (+5), whose activations are larger?
#   fused2048  the fused linear against the prequantized GEMM at M = 2048
#           in inkernel_a (each series of 100 calls after the other, checked
#           first), twice, and nvfp4 bench --m 2048 twice, the SM clock
#           logged between: is the bench's 1.10x at QKV an order effect?
#   race128 racecheck and memcheck of the 64 x 128 tile with early weights
#           (attn-out M = 128, gemm_variants), and one nvfp4 bench
#   suites  test_gemm_cuda, test_quantize_cuda, test_linear_cuda, racecheck
#           (QKV M = 256, stream-K) and memcheck (attn-out M = 128) of the
#           wgmma kernel, and memcheck on the quantizer suite (--quick)
#   final   the P0 checks at 1, 128, 2048 rows (plain and --streaming-a)
#           and one nvfp4 bench with cuBLAS at M = 1, 16, 128, 2048
# Carry: nvfp4 and gpu/{inkernel_a,gemm_variants,test_gemm_cuda,
# test_linear_cuda,test_quantize_cuda}.  pretab and qwide need git
# bb9a17d's build (their hooks were dropped after these calls).
# Calls: PARTS="pretab suites final" (H200), "qwide" (H200), "prod early
# suites final" (an H100; early weights the default for every wgmma tile),
# then "early suites final" (early weights the default where a stage holds
# several chunks), "ncu2048" and "fused2048" (H100 too), then "race128".
. "$(dirname "$0")/step.sh"
PARTS=${PARTS:-early suites final}
SHAPES=${CASES:-attn_out:1,16,128 fc2:1,16,128 qkv:1,16,128 fc1:1,16,128}
if has pretab; then
    for n in eager:rule:1 eager:rule:2 eager:0:1 cuda:0:1; do
        var=${n%%:*}; q=${n#*:}; q=${q%:*}; pass=${n##*:}
        qm=$q; [ "$q" = rule ] && qm=-1
        tag="pretab_${var}_${q}_$pass"
        NVFP4_DEV_PRETAB=1 NVFP4_DEV_QUANTIZER=$qm NVFP4_DEV_VARIANT=$var step "$tag" 150 \
            "$B/gpu/inkernel_a" $SHAPES --iters 100
        grep -E "static|beforehand" "$L/$tag.log" | sed "s/^/$var q=$q: /" | cut -c1-118
    done
fi
if has qwide; then
    for pass in 1 2; do
        for c in base:0:0 earlyw:0:1 qwide48:48:0 qwide48e:48:1 qwide32e:32:1 qwide66e:66:1; do
            tag=${c%%:*}; qw=${c#*:}; qw=${qw%:*}; ew=${c##*:}
            NVFP4_DEV_QWIDE=$qw NVFP4_DEV_EARLYW=$ew step "qwide_${tag}_$pass" 100 \
                "$B/gpu/inkernel_a" ${QCASES:-attn_out:128 fc2:128 qkv:128 fc1:128} --iters 100
            grep -E "static" "$L/qwide_${tag}_$pass.log" | sed -E "s/^/$tag: /; s/, in-kernel.*//"
        done
    done
fi
if has prod; then
    for sh in attn_out:128 fc2:128 qkv:128 fc1:128 attn_out:2048 fc2:2048 qkv:2048 fc1:2048; do
        NVFP4_PRODUCERS=0,1,3,5,7,0,1,3,5,7 step "prod_${sh%%:*}_${sh##*:}" 120 \
            "$B/gpu/gemm_variants" "${sh%%:*}" "${sh##*:}" -1 100
        grep -E "^PRODUCER|MISMATCH" "$L/prod_${sh%%:*}_${sh##*:}.log"
    done
fi
if has early; then
    for pass in 1 2; do
        for ew in 0 1; do
            NVFP4_DEV_EARLYW=$ew step "fused_early${ew}_$pass" 100 "$B/gpu/inkernel_a" \
                attn_out:128 fc2:128 qkv:128 fc1:128 --iters 100
            grep -E "static" "$L/fused_early${ew}_$pass.log" | sed -E "s/^/earlyw=$ew: /; s/, in-kernel.*//"
        done
    done
    for qm in 1 2 -1; do
        NVFP4_DEV_QUANTIZER=$qm step "fused_q$qm" 100 "$B/gpu/inkernel_a" attn_out:128 fc2:128 qkv:128 fc1:128 \
            --iters 100
        grep -E "static" "$L/fused_q$qm.log" | sed -E "s/^/q=$qm: /; s/, in-kernel.*//"
    done
fi
if has ncu2048; then
    step_ncu_kernels 240 60 qkv:2048 attn_out:2048
fi
if has fused2048; then
    for pass in 1 2; do
        step "f2048_$pass" 200 "$B/gpu/inkernel_a" qkv:2048 attn_out:2048 fc2:2048 --iters 100
        grep -E "static" "$L/f2048_$pass.log" | cut -c1-150
        nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader
    done
    for pass in 1 2; do
        step "bench2048_$pass" 200 "$B/nvfp4" bench --m 2048
        grep -E "^(qkv|attn_out|fc1|fc2) " "$L/bench2048_$pass.log"
        nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader
    done
fi
if has race128; then
    step_race race_attn128 200 gemm_variants attn_out 128
    step_mem mem_fc2_128 150 gemm_variants fc2 128
    step_bench
fi
if has suites; then
    step test_gemm_cuda 400 "$B/gpu/test_gemm_cuda"
    step_race race_qkv 200 gemm_variants qkv 256
    step_mem mem_attn 150 gemm_variants attn_out 128
    step test_quantize_cuda 150 "$B/gpu/test_quantize_cuda"
    step test_linear_cuda 200 "$B/gpu/test_linear_cuda"
    step mem_quant 150 compute-sanitizer --tool memcheck --error-exitcode 1 "$B/gpu/test_quantize_cuda" --quick
fi
if has final; then
    step_checks
    step_bench
fi
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
