#!/bin/sh
# gb10.sh -- one command for a GB10 (DGX Spark) or RTX Blackwell owner
# (compute capability 12.x): does nvfp4's sm120 kernel give the bits of the
# sm120 model on this GPU, and what does cuBLASLt's own NVFP4 GEMM do?
#
#   sh tests/gpu/gb10.sh [OUTDIR]          (default: gb10-report)
#
# From the repository root, with the CUDA toolkit (12.9 or newer: nvcc with
# sm_121a for a GB10, sm_120a for the RTX cards) and the Debian packages of
# `make deps`.  Each step has a time limit and a log in OUTDIR:
#   build     the library and nvfp4 (make), the probe, the GPU suite, the
#             quantizer test, the cuBLASLt program
#   probe     the block-scaled MMA: operand layout first, then the step
#             model on every category (tests/gpu/probe_sm120.cu)
#   suite     the sm120 kernel and linear against the CPU backend, every
#             output (tests/gpu/test_sm120_emu.c on the library itself)
#   quantize  the GPU quantizer against the C one, both variants
#   check     nvfp4 check --backend cuda --model sm120 at M = 1, 128, 2048
#             (raw and alpha), and --streaming-a at M = 1, 128
#   explain   cuBLASLt's NVFP4 GEMM on the four linears explained by
#             nvfp4 explain: the model and K split it uses (FC2's above all)
#   bench     nvfp4 bench against cuBLASLt NVFP4 and cuBLAS BF16, each time
#             read against the GB10's byte floor (273 GB/s; BYTE_FLOOR_GBS=G
#             to change it, the measured copy bandwidth on other cards)
# Then one summary to paste into a bug report, and OUTDIR/gb10-report.json.
# Exit status 0 when every step passed, 1 when one failed, 2 when this
# machine cannot run the kit (no sm_120 / sm_121 GPU, no such nvcc).
cd "$(dirname "$0")/../.." || exit 2
OUTDIR=${1:-gb10-report}
B=${BUILD:-build}

# ---- the GPU and the toolkit --------------------------------------------------
GPU=$(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
CC_GPU=$(echo "$GPU" | awk -F', ' '{print $2}')
case "$CC_GPU" in
12.*) ;;
*)
    echo "gb10.sh needs an NVIDIA GPU of compute capability 12.x (GB10 / DGX Spark, RTX 50x0, RTX PRO"
    echo "Blackwell) and its driver.  Found: ${GPU:-no NVIDIA GPU (nvidia-smi did not answer)}."
    echo "On an H100 / H200 the same kernel runs with an emulated tensor core: sh tests/gpu/sm120_emu.sh"
    exit 2 ;;
esac
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
ARCH=sm_$(echo "$CC_GPU" | tr -d .)
if ! "$NVCC" --list-gpu-arch 2>/dev/null | grep -q "compute_$(echo "$CC_GPU" | tr -d .)"; then
    echo "gb10.sh: $NVCC cannot build for $ARCH (CUDA 12.9 or newer has sm_120a and sm_121a)"
    exit 2
fi
CUDA_VER=$("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
mkdir -p "$OUTDIR" || exit 2
SUMMARY="$OUTDIR/summary.txt"
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
say "nvfp4 GB10 kit: $GPU, CUDA $CUDA_VER, $(uname -m), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"

status=0
RESULTS=""
step() { # name, seconds, command...: run with a time limit, log, one summary line
    name=$1; secs=$2; shift 2
    t0=$(date +%s)
    timeout "$secs" "$@" >"$OUTDIR/$name.log" 2>&1
    rc=$?
    t=$(( $(date +%s) - t0 ))
    if [ "$rc" -eq 0 ]; then r=PASS; else r=FAIL; status=1; fi
    [ "$rc" -eq 124 ] && r="FAIL (time limit $secs s)"
    say "$r $name ($t s)"
    RESULTS="$RESULTS{\"step\": \"$name\", \"pass\": $([ "$rc" -eq 0 ] && echo true || echo false), \"exit\": $rc, \"seconds\": $t, \"log\": \"$name.log\"},"
    return $rc
}

JOBS=$(nproc 2>/dev/null || echo 8)
if ! step build 1800 sh -c "make -j$JOBS BUILD='$B' NVFP4_CUDA=1 lib cli &&
        make -j$JOBS -f tests/gpu/gpu.mk BUILD='$B' '$B/gpu/sm120_suite' '$B/gpu/test_quantize_cuda' \
            '$B/gpu/cublaslt_nvfp4_explain' &&
        BUILD='$B' sh tests/gpu/probe_sm120.sh --build-only"; then
    tail -n 20 "$OUTDIR/build.log"
    say "the build failed: $OUTDIR/build.log"
    exit 1
fi

# ---- the instruction, the kernel, the quantizer ------------------------------------
step probe 600 "$B/probe120/probe_sm120" --steps "${PROBE_STEPS:-2000000}"
grep -E "^layout|LAYOUT|^total" "$OUTDIR/probe.log" | tee -a "$SUMMARY"
sed -n '/^category/,/^total/p' "$OUTDIR/probe.log" | grep -v "^total" >>"$SUMMARY"
step suite 1800 "$B/gpu/sm120_suite"
grep -E "^RESULT|^FAIL" "$OUTDIR/suite.log" | head -n 6 | tee -a "$SUMMARY"
step quantize 900 "$B/gpu/test_quantize_cuda"
grep -E "^RESULT|^FAIL" "$OUTDIR/quantize.log" | head -n 6 | tee -a "$SUMMARY"

# ---- nvfp4 check on this GPU with the sm120 oracle ---------------------------------
for m in 1 128 2048; do
    step check$m 1800 "$B/nvfp4" check --backend cuda --model sm120 --rows $m --json "$OUTDIR/check$m.json"
    grep -E "status|P0|bit-exact|differ" "$OUTDIR/check$m.log" | tail -n 3 | tee -a "$SUMMARY"
done
for m in 1 128; do
    step streaming$m 1800 "$B/nvfp4" check --backend cuda --model sm120 --rows $m --streaming-a \
        --json "$OUTDIR/streaming$m.json"
    grep -E "status|P0|bit-exact|differ" "$OUTDIR/streaming$m.log" | tail -n 3 | tee -a "$SUMMARY"
done

# ---- cuBLASLt's NVFP4 GEMM: which contract, which K split ---------------------------
step explain 3600 "$B/gpu/cublaslt_nvfp4_explain" "$OUTDIR" --explain-rows "${EXPLAIN_ROWS:-32}" --data spread
sed -n '/^linear/,$p' "$OUTDIR/explain.log" | tee -a "$SUMMARY"

# ---- speed: against cuBLASLt NVFP4 and BF16, the byte floor --------------------------
FLOOR=${BYTE_FLOOR_GBS:-}
case "$GPU" in *GB10*) FLOOR=${FLOOR:-273} ;; esac
step bench 3600 "$B/nvfp4" bench --m "${BENCH_M:-1,16,128,2048}" ${FLOOR:+--byte-floor-gbs $FLOOR} \
    --json "$OUTDIR/bench.json"
sed -n '/^linear/,$p' "$OUTDIR/bench.log" | tee -a "$SUMMARY"

# ---- the report -------------------------------------------------------------------
embed() { # a JSON file's contents, or null
    if [ -s "$1" ]; then cat "$1"; else echo null; fi
}
json_str() { printf '%s' "$1" | tr -d '"\\' ; }
tmp="$OUTDIR/.gb10-report.json.tmp"
{
    echo "{"
    echo "\"gpu\": \"$(json_str "$GPU")\", \"cuda\": \"$(json_str "$CUDA_VER")\", \"machine\": \"$(uname -m)\","
    echo "\"commit\": \"$(git rev-parse HEAD 2>/dev/null || echo unknown)\","
    echo "\"passed\": $([ "$status" -eq 0 ] && echo true || echo false),"
    echo "\"steps\": [${RESULTS%,}],"
    for m in 1 128 2048; do echo "\"check_m$m\": $(embed "$OUTDIR/check$m.json"),"; done
    for m in 1 128; do echo "\"streaming_m$m\": $(embed "$OUTDIR/streaming$m.json"),"; done
    echo "\"cublaslt_explain\": $(embed "$OUTDIR/cublaslt_nvfp4_explain.json"),"
    echo "\"bench\": $(embed "$OUTDIR/bench.json")"
    echo "}"
} >"$tmp" && mv "$tmp" "$OUTDIR/gb10-report.json"
echo
echo "==== paste from here ===="
cat "$SUMMARY"
echo "verdict: $([ "$status" -eq 0 ] && echo "every step passed" || echo "some steps FAILED (logs in $OUTDIR)")"
echo "report: $OUTDIR/gb10-report.json"
echo "==== to here ===="
exit $status
