#!/bin/sh
# The Python package's tests (make test-python, make test-torch): pytest over
# python/tests (or $NVFP4_PYTHON_TESTS, a directory) with any extra arguments
# given.  Skipped tests are listed with their reason (no torch, no GPU, no
# comfy-kitchen).  Ends with the summary line "SUITE: N passed, N failed,
# N skipped" (SUITE: $NVFP4_SUITE, default python) that .ci/run adds up.
# Fails when pytest fails, and when no test passed (nothing collected, or
# everything skipped) or the test run left files in its temporary directory.
suite=${NVFP4_SUITE:-python}
dir=${NVFP4_PYTHON_TESTS:-$(dirname "$0")}
out=$(mktemp)
tmp=$(mktemp -d)
trap 'rm -f "$out"; rm -rf "$tmp"' EXIT
TMPDIR="$tmp" python3 -m pytest -q -p no:cacheprovider -rs --basetemp="$tmp/pytest" "$dir" "$@" >"$out" 2>&1
rc=$?
rm -rf "$tmp/pytest" # pytest's own per-test directories, kept for failures
cat "$out"
last=$(grep -E '[0-9]+ (passed|failed|error|skipped|deselected)|no tests ran' "$out" | tail -n 1)
count() { echo "$last" | grep -Eo "[0-9]+ $1" | grep -Eo '[0-9]+' || echo 0; }
passed=$(count passed)
skipped=$(count skipped)
failed=$(( $(count failed) + $(count error) ))
[ "$rc" -ne 0 ] && [ "$failed" -eq 0 ] && failed=1  # collection or usage errors
if [ "$passed" -eq 0 ]; then
    echo "FAIL: no Python test passed in $dir"
    [ "$failed" -eq 0 ] && failed=1
fi
# (torchinductor_USER: torch.compile's own cache, not a file a test left)
left=$(ls -A "$tmp" | grep -v -e '^pytest$' -e '^torchinductor_')
if [ -n "$left" ]; then
    echo "FAIL: the tests left files in their temporary directory: $left"
    failed=$((failed + 1))
fi
echo "$suite: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
