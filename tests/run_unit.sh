#!/bin/sh
# Run every unit-test program in $1 and print one closing line
# "unit: N passed, N failed, N skipped" (checks summed over all programs;
# .ci/run adds up the first two).  Fails when a program fails, crashes or
# prints no RESULT line, and when no program or no check ran at all.
dir=${1:-build/tests}
pass=0; fail=0; skip=0; bad=0; programs=0
for t in "$dir"/test_*; do
    [ -x "$t" ] || continue
    programs=$((programs + 1))
    out=$("$t" 2>&1); rc=$?
    line=$(printf '%s\n' "$out" | grep '^RESULT ' | tail -n 1)
    if [ -z "$line" ]; then
        printf '%s\n' "$out"
        echo "CRASH $(basename "$t") (exit $rc, no RESULT line)"
        bad=$((bad + 1)); continue
    fi
    p=$(printf '%s' "$line" | sed 's/.*passed=\([0-9]*\).*/\1/')
    f=$(printf '%s' "$line" | sed 's/.*failed=\([0-9]*\).*/\1/')
    s=$(printf '%s' "$line" | sed -n 's/.*skipped=\([0-9]*\).*/\1/p')
    pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + ${s:-0}))
    if [ "$rc" -ne 0 ] || [ "$f" -ne 0 ]; then
        printf '%s\n' "$out" | grep -v '^RESULT ' | head -n 40
        [ "$f" -eq 0 ] && bad=$((bad + 1)) # a non-zero exit with no failed check
    fi
    printf '%s\n' "$out" | grep '^SKIP '
    echo "$line"
done
if [ "$programs" -eq 0 ] || [ "$pass" -eq 0 ]; then
    echo "FAIL: no unit test ran in $dir ($programs programs, $pass checks passed)"
    bad=$((bad + 1))
fi
fail=$((fail + bad))
echo "unit: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
