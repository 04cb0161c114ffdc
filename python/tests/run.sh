#!/bin/sh
# The Python package's tests (make test-python, make test-torch): pytest on
# this directory with any extra arguments given.  Ends with the summary line
# "SUITE: N passed, N failed" (SUITE: $NVFP4_SUITE, default python) that
# .ci/run adds up; exit status is pytest's.
out=$(mktemp)
trap 'rm -f "$out"' EXIT
python3 -m pytest -q -p no:cacheprovider -rs "$(dirname "$0")" "$@" >"$out" 2>&1
rc=$?
cat "$out"
last=$(grep -E '[0-9]+ (passed|failed|error)' "$out" | tail -n 1)
count() { echo "$last" | grep -Eo "[0-9]+ $1" | grep -Eo '[0-9]+' || echo 0; }
passed=$(count passed)
failed=$(( $(count failed) + $(count error) ))
[ "$rc" -ne 0 ] && [ "$failed" -eq 0 ] && failed=1  # collection or usage errors
echo "${NVFP4_SUITE:-python}: $passed passed, $failed failed"
exit $rc
