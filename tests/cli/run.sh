#!/bin/sh
# CLI tests: every tests/cli/test_*.py (or those of $NVFP4_CLI_TESTS, a
# directory) run against the nvfp4 command, each ending with a closing line
# "cli...: N passed, N failed[, N skipped]".  Ends with the sum,
# "cli: N passed, N failed, N skipped" (.ci/run adds up the first two).
# Fails when a script fails or prints no closing line, when no check ran,
# and when a script leaves files in its temporary directory.
# Usage: tests/cli/run.sh path/to/nvfp4
nvfp4=${1:-build/nvfp4}
dir=${NVFP4_CLI_TESTS:-$(dirname "$0")}
pass=0; fail=0; skip=0; scripts=0
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for t in "$dir"/test_*.py; do
    [ -f "$t" ] || continue
    scripts=$((scripts + 1))
    # each script gets an empty TMPDIR of its own: whatever it leaves is a failure
    tmp="$scratch/$(basename "$t" .py)"
    mkdir -p "$tmp"
    out=$(TMPDIR="$tmp" python3 "$t" "$nvfp4" 2>&1); rc=$?
    closing='^cli[^:]*: [0-9]* passed, [0-9]* failed'
    printf '%s\n' "$out" | grep -v "$closing"
    line=$(printf '%s\n' "$out" | grep "$closing" | tail -n 1)
    if [ -z "$line" ]; then
        echo "FAIL: $(basename "$t") exited $rc without its closing line"
        fail=$((fail + 1)); continue
    fi
    # shown under the script's name: only the sum below starts with "cli:"
    echo "cli $(basename "$t"):${line#*:}"
    p=$(printf '%s' "$line" | sed 's/.*: \([0-9]*\) passed.*/\1/')
    f=$(printf '%s' "$line" | sed 's/.* \([0-9]*\) failed.*/\1/')
    s=$(printf '%s' "$line" | sed -n 's/.* \([0-9]*\) skipped.*/\1/p')
    pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + ${s:-0}))
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && fail=$((fail + 1))
    left=$(ls -A "$tmp")
    if [ -n "$left" ]; then
        echo "FAIL: $(basename "$t") left files in its temporary directory: $left"
        fail=$((fail + 1))
    fi
done
if [ "$scripts" -eq 0 ] || [ "$pass" -eq 0 ]; then
    echo "FAIL: no CLI test ran from $dir ($scripts scripts, $pass checks passed)"
    fail=$((fail + 1))
fi
echo "cli: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
