#!/bin/sh
# session25.sh -- the twenty-fifth session's calls: the quantizer's
# threshold table built before the call (is its per-CTA build what stands
# between the fused linear and 1.03x the prequantized GEMM?).
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
#   suites  test_quantize_cuda, test_linear_cuda, and memcheck on the
#           quantizer suite (--quick)
#   final   the P0 checks at 1, 128, 2048 rows (plain and --streaming-a)
#           and one nvfp4 bench with cuBLAS at M = 1, 16, 128, 2048
# Carry: nvfp4 and gpu/{inkernel_a,test_linear_cuda,test_quantize_cuda}.
# Calls: PARTS="pretab suites final" (H200), then "qwide".
. "$(dirname "$0")/step.sh"
PARTS=${PARTS:-pretab suites final}
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
if has suites; then
    step test_quantize_cuda 150 "$B/gpu/test_quantize_cuda"
    step test_linear_cuda 200 "$B/gpu/test_linear_cuda"
    step mem_quant 150 compute-sanitizer --tool memcheck --error-exitcode 1 "$B/gpu/test_quantize_cuda" --quick
fi
if has final; then
    step_checks
    step_bench
fi
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
