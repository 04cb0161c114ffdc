#!/bin/sh
# Run a libFuzzer binary for SECONDS over a scratch copy of tests/fuzz/CORPUS
# (default corpus; the committed seeds are never modified), then print the
# number of executions and whether a crash was found.  Exit status: 0 if none.
#   sh tests/fuzz/run.sh BINARY [SECONDS] [CORPUS]
bin=${1:?usage: run.sh BINARY [SECONDS] [CORPUS]}
secs=${2:-60}
corpus=${3:-corpus}
here=$(dirname "$0")
work=$(mktemp -d "${TMPDIR:-/tmp}/nvfp4-fuzz.XXXXXX") || exit 1
mkdir -p "$work/corpus" "$work/artifacts"
cp "$here/$corpus"/* "$work/corpus/" 2>/dev/null
dict=""
[ "$corpus" = corpus ] && [ -f "$here/safetensors.dict" ] && dict="-dict=$here/safetensors.dict"
# undefined behaviour counts as a crash, not just a message
UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1} \
"$bin" -max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$work/artifacts/" $dict "$work/corpus" >"$work/log" 2>&1
rc=$?
execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log" | grep -o '[0-9]*$' | tail -n 1)
crashes=$(ls "$work/artifacts" 2>/dev/null | wc -l)
echo "fuzz: ${execs:-?} executions (limit ${secs} s), corpus $(ls "$work/corpus" | wc -l) inputs"
if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ] || grep -q 'runtime error:' "$work/log"; then
    tail -n 40 "$work/log"
    echo "fuzz: CRASH found (exit $rc); inputs kept in $work/artifacts"
    exit 1
fi
echo "fuzz: no crash"
rm -rf "$work"
