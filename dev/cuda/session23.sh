#!/bin/sh
# session23.sh -- the twenty-third session's calls (H200): where the fused
# linear's time over the prequantized GEMM goes (issue 13's <= 1.03x at M
# <= 128 fails on attn-out and FC2 by 4-6 %).
# Usage: OUT=DIR [PARTS="..."] sh dev/cuda/session23.sh BUILD
#   table     probe_table: the threshold table's build cycles per entry
#             (checked against the host's thr_build first), its load from
#             global memory, one block's codes by the table and by the exact
#             steps
#   quant     quantizer_coop: the three quantizer kernels checked byte for
#             byte, then timed alone at the seed's shapes
#   fused     inkernel_a: the fused linear (static and dynamic scale) and the
#             prequantized GEMM, checked against the CPU linear, then timed
#   ncu       per-kernel durations (ncu, clocks free) of the fused linear and
#             the prequantized GEMM at attn-out M = 16, 128 and FC2 M = 1,
#             16, 128 -- ncu serialises the launches, so each kernel's own
#             time, without the programmatic overlap
#   ab        the threshold table built from its candidates' neighbours
#             (thr_near, the second call's library) against the previous
#             walk (the *_old programs, packed from the first call's carry):
#             probe_table, quantizer_coop and inkernel_a side by side, then
#             the quantizer and linear suites and the P0 checks at 1 and 128
#             rows (--streaming-a too) of the new library
#   qmode     probe_table (now closed form for cuda too) against *_old, and
#             the fused linear with the planned quantizer kernel against the
#             table kernel forced (NVFP4_DEV_QUANTIZER=0), eager and cuda
#             (NVFP4_DEV_VARIANT), two passes; then the quantizer and
#             linear suites and the P0 checks at 1 and 128 rows
#   rule      the new quantizer rule (eager before REGR: the table kernel),
#             short: inkernel_a at attn-out M = 16, FC2 M = 1 and 16, then
#             test_linear_cuda and the --streaming-a checks at 1 and 128 rows
#   final     one nvfp4 bench with cuBLAS (M = 1, 16, 128, 2048) and the P0
#             checks at 2048 rows (plain and --streaming-a)
# Default PARTS="table quant fused ncu" (first call); then PARTS="ab final", with the
# first call's three programs renamed *_old in the carry.  The carry:
#   JOBS=2 ONLY="probe_table quantizer_coop inkernel_a test_linear_cuda \
#     test_quantize_cuda" sh dev/cuda/pack_carry.sh
. "$(dirname "$0")/step.sh"
PARTS=${PARTS:-table quant fused ncu}
# probe_table of the first call's build (probe_table_old), then this one's
probe_table_ab() {
    for v in _old ""; do
        step "probe_table$v" 60 "$B/gpu/probe_table$v"
        grep -E "^variant|mismatch" "$L/probe_table$v.log" | sed "s/^/probe_table$v /" | cut -c1-150
    done
}
# the quantizer and linear suites, the P0 checks at 1 and 128 rows
suites_and_checks() {
    step test_quantize_cuda 200 "$B/gpu/test_quantize_cuda"
    step test_linear_cuda 300 "$B/gpu/test_linear_cuda"
    for m in 1 128; do
        step check$m 240 "$B/nvfp4" check --rows $m --json "$L/check$m.json"
        step streaming$m 240 "$B/nvfp4" check --rows $m --streaming-a --json "$L/streaming$m.json"
    done
}
if has table; then
    step probe_table 60 "$B/gpu/probe_table"
    cat "$L/probe_table.log"
fi
if has quant; then
    step quantizer_coop 120 "$B/gpu/quantizer_coop" --iters 100
    tail -n 30 "$L/quantizer_coop.log"
fi
if has fused; then
    step inkernel_a 240 "$B/gpu/inkernel_a" ${CASES:-attn_out:1,16,128 fc2:1,16,128 qkv:1,16,128 fc1:1,16} --iters 100
    grep -vE "^\s*$" "$L/inkernel_a.log" | tail -n 40
fi
if has ncu; then
    step_ncu_kernels 150 12 attn_out:16 attn_out:128 fc2:1 fc2:16 fc2:128
fi
if has ab; then
    probe_table_ab
    step_ab_fused 240 ${CASES:-attn_out:1,16,128 fc2:1,16,128 qkv:1,128 fc1:1}
    suites_and_checks
fi
if has qmode; then
    probe_table_ab
    step_qmode 120 ${CASES:-attn_out:1,16,128 fc2:1,16,128 qkv:1,16 fc1:16}
    suites_and_checks
fi
if has rule; then
    step rule_inkernel_a 60 "$B/gpu/inkernel_a" attn_out:16 fc2:1,16 --iters 100
    grep -E "static|MISMATCH" "$L/rule_inkernel_a.log" | cut -c1-118
    step test_linear_cuda 120 "$B/gpu/test_linear_cuda"
    for m in 1 128; do
        step streaming$m 120 "$B/nvfp4" check --rows $m --streaming-a --json "$L/streaming$m.json"
    done
fi
if has final; then
    step_bench
    step check2048 240 "$B/nvfp4" check --rows 2048 --json "$L/check2048.json"
    step streaming2048 240 "$B/nvfp4" check --rows 2048 --streaming-a --json "$L/streaming2048.json"
fi
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
