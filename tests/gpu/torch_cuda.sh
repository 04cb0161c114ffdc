#!/bin/sh
# torch_cuda.sh -- nvfp4.torch on an H100/H200 in one command:
#   OUT=DIR sh tests/gpu/torch_cuda.sh [BUILD]
# 1. transformers and what it needs, from the wheels in .whl/, when it does
#    not import (the device reaches no registry)
# 2. the library with its CUDA backend and the CLI (make lib cli) unless
#    BUILD has both
# 3. tests/gpu/test_torch_cuda.py: bits against the CPU backend, checkpoints,
#    torch.compile (Inductor, CUDA graphs), a torch.cuda.graph replay, the
#    host cost per call beside F.linear
# 4. python/examples/llama_nvfp4.py: the end-to-end table of docs/PYTHON.md
# In $OUT (default BUILD/gpu-logs): a log per step, torch_cuda.json,
# e2e.md, e2e.json (written after the eager pass, then again with the
# compiled one), summary.txt.  STEPS="tests e2e" (default) picks steps 3
# and 4 (the time limits of each fit one 600 s call); E2E_ARGS adds options
# to step 4 (e.g. "--layers 2" or "--no-compile" when time is short).
cd "$(dirname "$0")/../.." || exit 2
B=${1:-build}
OUT=${OUT:-$B/gpu-logs}
mkdir -p "$OUT"
: >"$OUT/summary.txt"
run() { # name, seconds, command...
    name=$1; secs=$2; shift 2
    t0=$(date +%s)
    timeout "$secs" "$@" >"$OUT/$name.log" 2>&1; rc=$?
    echo "$name: exit $rc ($(( $(date +%s) - t0 ))s)" | tee -a "$OUT/summary.txt"
    tail -n 3 "$OUT/$name.log"
}
if ! python3 -c "import transformers" >/dev/null 2>&1 && ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/nvfp4-site .whl/*.whl
    PYTHONPATH=/tmp/nvfp4-site${PYTHONPATH:+:$PYTHONPATH}
fi
PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH NVFP4_LIB="$B/libnvfp4.so" NVFP4_CLI="$B/nvfp4" PYTHONUNBUFFERED=1
[ -f "$B/libjansson.so.4" ] && export NVFP4_PRELOAD="$B/libjansson.so.4"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >"$OUT/gpu.txt" 2>&1
if [ ! -x "$B/nvfp4" ] ||
    ! python3 -c "import nvfp4, sys; sys.exit(not nvfp4.cuda_available())" >/dev/null 2>&1; then
    run build 400 make -j"$(nproc)" BUILD="$B" lib cli
fi
STEPS=${STEPS:-tests e2e}
case " $STEPS " in *" tests "*)
    run torch_tests 240 env OUT="$OUT" python3 tests/gpu/test_torch_cuda.py
    grep -E "^(PASSED|FAILED|SKIPPED)|torch_cuda:|^    " "$OUT/torch_tests.log" ;;
esac
case " $STEPS " in *" e2e "*)
    # shellcheck disable=SC2086 # E2E_ARGS splits on purpose
    run e2e 300 python3 python/examples/llama_nvfp4.py --markdown "$OUT/e2e.md" \
        --json "$OUT/e2e.json" ${E2E_ARGS:-}
    [ -f "$OUT/e2e.md" ] && cat "$OUT/e2e.md" ;;
esac
cat "$OUT/summary.txt"
! grep -v "exit 0 " "$OUT/summary.txt" >/dev/null
