#!/bin/sh
# final14d.sh -- the fourteenth session's last H200 run (OUT=DIR sh
# dev/cuda/final14d.sh [BUILD]): the fused linear's GEMM launched as the
# quantizer's programmatic dependent.  The GEMM, linear and quantizer
# suites, nvfp4 check (GEMM and --streaming-a) at M = 1, 128, 2048, and the
# bench at M = 1, 16, 128, 2048.
. "$(dirname "$0")/step.sh"
step gemm 300 "$B/gpu/test_gemm_cuda"
step linear 300 "$B/gpu/test_linear_cuda"
step quantize 120 "$B/gpu/test_quantize_cuda"
for m in 1 128 2048; do
    step check$m 240 "$B/nvfp4" check --rows $m --json "$L/check$m.json"
    step streaming$m 240 "$B/nvfp4" check --rows $m --streaming-a --json "$L/streaming$m.json"
done
step bench 300 "$B/nvfp4" bench --m ${BENCH_M:-1,16,128,2048} --json "$L/bench.json"
tail -n 18 "$L/bench.log"
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
