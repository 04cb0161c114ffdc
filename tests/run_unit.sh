#!/bin/sh
# Run every unit-test program in $1 and print one closing line
# "N passed, N failed" (checks summed over all programs).
dir=${1:-build/tests}
pass=0; fail=0; bad=0
for t in "$dir"/test_*; do
    [ -x "$t" ] || continue
    out=$("$t" 2>&1); rc=$?
    line=$(printf '%s\n' "$out" | grep '^RESULT ' | tail -n 1)
    if [ -z "$line" ]; then
        printf '%s\n' "$out"
        echo "CRASH $(basename "$t") (exit $rc, no RESULT line)"
        bad=$((bad + 1)); continue
    fi
    p=$(printf '%s' "$line" | sed 's/.*passed=\([0-9]*\).*/\1/')
    f=$(printf '%s' "$line" | sed 's/.*failed=\([0-9]*\).*/\1/')
    pass=$((pass + p)); fail=$((fail + f))
    if [ "$rc" -ne 0 ] || [ "$f" -ne 0 ]; then
        printf '%s\n' "$out" | grep -v '^RESULT ' | head -n 40
    fi
    echo "$line"
done
fail=$((fail + bad))
echo "unit: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
