#!/bin/sh
# measure14.sh -- the fourteenth session's changes timed against their
# predecessors in one process each (OUT=DIR sh dev/cuda/measure14.sh
# [BUILD]): the BF16 epilogue staged (1) against element by element (0),
# out only as in the bench; stream-K off (-1) against the cost model (0).
# Each configuration is checked against the CPU oracle before it is timed.
. "$(dirname "$0")/step.sh"
for s in attn_out:2048 fc2:2048 qkv:2048 fc1:2048 attn_out:128 fc2:128 qkv:128 fc1:128; do
    lin=${s%%:*}; m=${s##*:}
    NVFP4_EPILOGUES=1,0 NVFP4_STREAM_K=-1,0 step "m_${lin}_$m" 150 "$B/gpu/gemm_variants" $lin $m -1 30
    grep -E "^(EPILOGUE|STREAMK|MISMATCH)" "$L/m_${lin}_$m.log"
done
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
