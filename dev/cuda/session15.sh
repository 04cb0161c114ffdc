#!/bin/sh
# session15.sh -- the fifteenth session's H200 runs in one script (OUT=DIR
# [PARTS="..."] [BASE=DIR] sh dev/cuda/session15.sh [BUILD]); PARTS
# (default: all, in this order) picks:
#   ab      fused linear against the prequantized GEMM (inkernel_a: static and
#           dynamic scale) at M = 1, 16, 128 on the four linears, and the
#           prequantized GEMM alone (gemm_variants; PRE_SHAPES, default the
#           four linears at M = 128), for
#           BASE's build (an earlier commit's binaries, if given) and BUILD's,
#           ROUNDS times (default 2), interleaved
#   quant   dev/cuda/quantizer_coop (the four-lane quantizer kernel: checked,
#           then timed beside the library's); the fused linear with each
#           library quantizer kernel in turn (inkernel_a, NVFP4_DEV_QUANTIZER
#           in QMODES), and each kernel's duration (ncu)
#   sass    cuobjdump -sass of the wgmma kernels (64x128, 128x128, 128x232)
#           into sass.txt.xz
#   prof    ncu per-SASS-line counters and parts left out (dev build, and the
#           compile-time builds gemm_variants_devN where built) of the
#           wgmma kernel at PROF_SHAPES (default QKV and attn-out at M = 128);
#           wgmma tiles 2..6 side by side at TILE_SHAPES
#   suites  test_gemm_cuda, test_linear_cuda, test_quantize_cuda
#   checks  nvfp4 check and --streaming-a at M = 1, 128, 2048
#   bench   nvfp4 bench at M = 1, 16, 128, 2048
#   sanitize racecheck (QKV M = 256, stream-K) and memcheck (attn-out M = 128)
#           of the wgmma kernel, memcheck of test_quantize_cuda --quick
. "$(dirname "$0")/step.sh"
PARTS=${PARTS:-ab quant sass prof suites checks bench sanitize}
if has ab; then
    for round in $(seq 1 "${ROUNDS:-2}"); do
        for b in ${BASE:+$BASE} $B; do
            tag=$(basename "$b")_$round
            step "fused_$tag" 200 "$b/gpu/inkernel_a" qkv:1,16,128 attn_out:1,16,128 fc1:1,16,128 fc2:1,16,128 --iters 100
            grep -E "M=" "$L/fused_$tag.log" | sed "s/^/$tag /"
            for s in ${PRE_SHAPES:-attn_out:128 fc2:128 qkv:128 fc1:128}; do
                step "pre_${tag}_${s%%:*}_${s##*:}" 120 "$b/gpu/gemm_variants" ${s%%:*} ${s##*:} -1 30
                grep -E "^(OK|MISMATCH)" "$L/pre_${tag}_${s%%:*}_${s##*:}.log" | sed "s/^/$tag ${s} /"
            done
        done
    done
fi
if has quant; then
    step_quant
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    for qm in 0 1; do
        NVFP4_DEV_QUANTIZER=$qm step "qkern_$qm" 200 $NCU --clock-control none -k regex:'nvfp4_q_blocks' -c 12 \
            --metrics gpu__time_duration.sum "$B/gpu/inkernel_a" fc2:16,128 attn_out:16,128 --iters 2
    done
fi
if has sass; then
    CUOBJDUMP=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
    for f in nvfp4_sm90_gemm_bn128_nc1 nvfp4_sm90_gemm_bn128_nc2 nvfp4_sm90_gemm_bn232_nc2; do
        echo "=== $f"
        $CUOBJDUMP -sass -fun "$f" "$B/gpu/gemm_variants" 2>&1
    done | xz -6 >"$OUT/sass.txt.xz"
    ls -la "$OUT/sass.txt.xz"
fi
if has prof; then
    # where the wgmma kernel's time goes at M = 128: per-SASS-line counters
    # (tests/gpu/profile_source.sh) and parts left out (dev build: dev_mode
    # 1 no dequantization, 2 no wgmma, 4 no copies, 8 no epilogue)
    for s in ${PROF_SHAPES:-qkv:128 attn_out:128}; do
        step "prof_${s%%:*}_${s##*:}" 200 sh tests/gpu/profile_source.sh "$B" "$L" ${s%%:*} ${s##*:} -1
        grep -E "Duration|Issued Warp|No Eligible|Active Warps Per|Eligible Warps" "$L/src-${s%%:*}-m${s##*:}-v-1.txt" | head -n 8
        NVFP4_DEV_SWEEP=0:0,1:0,2:0,3:0,4:0,7:0,0:0 step "parts_${s%%:*}_${s##*:}" 200 "$B/gpu/gemm_variants_dev" ${s%%:*} ${s##*:} -1 30
        grep -E "^SWEEP" "$L/parts_${s%%:*}_${s##*:}.log"
        # the same parts left out fixed at compile time (make -f
        # tests/gpu/gpu.mk dev-fixed: no injected warpgroup.arrive), beside
        # the library's kernel
        for n in 0 ${DEV_FIXED:-1 2 3 4 7}; do
            prog="$B/gpu/gemm_variants_dev$n"; [ "$n" = 0 ] && prog="$B/gpu/gemm_variants"
            [ -x "$prog" ] || continue
            NVFP4_DEV_MODE=$n step "fixed${n}_${s%%:*}_${s##*:}" 120 "$prog" ${s%%:*} ${s##*:} -1 30
            grep -E "^(OK|DEV)" "$L/fixed${n}_${s%%:*}_${s##*:}.log"
        done
    done
    # the fused linear's kernels one by one (durations): quantizer, pre-pass, GEMM
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    for s in ${KERN_SHAPES:-attn_out:128 fc2:16}; do
        step "kern_${s%%:*}_${s##*:}" 200 $NCU --clock-control none -k regex:'nvfp4_(q_|sm90)' -c 60 \
            --metrics gpu__time_duration.sum "$B/gpu/inkernel_a" "$s" --iters 2
        grep -cE "^ *nvfp4_" "$L/kern_${s%%:*}_${s##*:}.log"
    done
    # the wgmma tiles side by side where N = 5376 leaves SMs idle (64x32,
    # 64x64, 128x64, 64x128, 128x128)
    for s in ${TILE_SHAPES:-attn_out:64 attn_out:128 fc2:128}; do
        NVFP4_VARIANTS=2,3,4,5,6 step "tiles_${s%%:*}_${s##*:}" 200 "$B/gpu/gemm_variants" ${s%%:*} ${s##*:} -1 30
        grep -E "^(VARIANT|MISMATCH)" "$L/tiles_${s%%:*}_${s##*:}.log"
    done
fi
if has suites; then step_suites; fi
if has checks; then step_checks; fi
if has bench; then step_bench; fi
if has sanitize; then step_sanitize; fi
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
