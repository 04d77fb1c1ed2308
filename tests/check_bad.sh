#!/bin/sh
# The bad-input corpus: every file in tests/bad/ (top level) is a malformed
# model or suite whose first line says where `tcbench check` must point and
# what it must say:
#   # expect: LINE:COL: a fragment of the message
# A few files made at run time follow (a directory, a FIFO, a device, a
# file over the size limit).
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
# check_one NAME FILE PREFIX FRAGMENT: `tcbench check FILE` exits 2 with one
# line on stderr that starts with PREFIX and holds FRAGMENT.
check_one() {
    timeout 60 "$TCBENCH_EXE" check "$2" >"$tmp/out" 2>"$tmp/err"
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
        "$3"*) ;;
        *) why="expected the line to start with '$3'" ;;
        esac
        if [ -z "$why" ] && ! printf '%s\n' "$err" | grep -qF -- "$4"; then
            why="message lacks '$4'"
        fi
    fi
    if [ -z "$why" ]; then
        echo "ok   $1"
        pass=$((pass + 1))
    else
        echo "FAIL $1: $why"
        echo "     got: $err"
        fail=$((fail + 1))
    fi
}

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
    check_one "$name" "$f" "$f:$where: " "$fragment"
done

# What cannot live in the corpus: not a regular file, or too big to commit.
# Each is refused by name before anything is read.
mkdir "$tmp/adir" && mkfifo "$tmp/fifo" && truncate -s 17M "$tmp/big.yaml" || exit 2
check_one "a directory" "$tmp/adir" "$tmp/adir: " "is a directory, not a model or suite file"
check_one "a FIFO" "$tmp/fifo" "$tmp/fifo: " "is a FIFO, not a model or suite file"
check_one "/dev/zero" /dev/zero "/dev/zero: " "is a character device, not a model or suite file"
check_one "17 MiB" "$tmp/big.yaml" "$tmp/big.yaml: " "17.0 MiB, above the 16 MiB limit"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
