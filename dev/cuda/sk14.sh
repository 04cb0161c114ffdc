#!/bin/sh
# sk14.sh -- the fourteenth session's first H200 run (OUT=DIR sh
# dev/cuda/sk14.sh [BUILD]): stream-K in the wgmma kernel (docs/KERNEL.md,
# design item 11).  The GEMM suite (forced stream-K grids on small shapes,
# the four linears, M = 2048 data-parallel against stream-K bit for bit),
# memcheck and racecheck on a stream-K launch (QKV M = 256: 168 tiles on 132
# CTAs), then each shape timed data-parallel (-1) beside the cost model's
# plan (0) in one process, checked before each timing.
. "$(dirname "$0")/step.sh"
step gemm 300 "$B/gpu/test_gemm_cuda"
step mem 120 compute-sanitizer --tool memcheck --error-exitcode 1 "$B/gpu/gemm_variants" qkv 256 -1 0
step race 150 compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 1 "$B/gpu/gemm_variants" qkv 256 -1 0
for s in attn_out:2048 fc2:2048 qkv:2048 fc1:2048 qkv:128 fc1:128 qkv:512 attn_out:4096; do
    NVFP4_STREAM_K=-1,0 step "sk_${s%%:*}_${s##*:}" 120 "$B/gpu/gemm_variants" "${s%%:*}" "${s##*:}" -1 30
    grep -E "^(OK|STREAMK)" "$L/sk_${s%%:*}_${s##*:}.log"
done
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
