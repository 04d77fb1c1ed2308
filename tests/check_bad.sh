#!/bin/sh
# The bad-input corpus: every file in tests/bad/ (top level) is a malformed
# model or suite whose first line says where `tcbench check` must point and
# what it must say:
#   # expect: LINE:COL: a fragment of the message
# Each check must exit with status 2 and print exactly one line on stderr,
#   FILE:LINE:COL: message
# Usage: TCBENCH_EXE=build/tcbench TCBENCH_SOURCE_DIR=. tests/check_bad.sh
set -u

if [ -z "${TCBENCH_EXE:-}" ]; then
    echo "check_bad.sh: set TCBENCH_EXE to the tcbench binary" >&2
    exit 2
fi
src=${TCBENCH_SOURCE_DIR:-$(dirname "$0")/..}
dir=$src/tests/bad
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT

pass=0
fail=0
for f in "$dir"/*.yaml; do
    [ -f "$f" ] || continue
    name=$(basename "$f")
    first=$(head -n 1 "$f")
    expect=${first#\# expect: }
    if [ "$expect" = "$first" ]; then
        echo "FAIL $name: first line is not '# expect: LINE:COL: message'"
        fail=$((fail + 1))
        continue
    fi
    where=${expect%%: *}     # LINE:COL
    fragment=${expect#*: }   # a piece of the message
    timeout 60 "$TCBENCH_EXE" check "$f" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    nlines=$(wc -l <"$tmp/err" | tr -d ' ')
    err=$(cat "$tmp/err")
    why=""
    if [ "$rc" -ne 2 ]; then
        why="exit status $rc, expected 2"
    elif [ "$nlines" -ne 1 ]; then
        why="$nlines lines on stderr, expected 1"
    else
        case "$err" in
        "$f:$where: "*) ;;
        *) why="expected the line to start with '$f:$where: '" ;;
        esac
        if [ -z "$why" ] && ! printf '%s\n' "$err" | grep -qF -- "$fragment"; then
            why="message lacks '$fragment'"
        fi
    fi
    if [ -z "$why" ]; then
        echo "ok   $name"
        pass=$((pass + 1))
    else
        echo "FAIL $name: $why"
        echo "     got: $err"
        fail=$((fail + 1))
    fi
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
