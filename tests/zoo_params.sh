#!/usr/bin/env bash
# The zoo's parameter rule (docs/zoo.md): every case of a zoo suite has a
# row in the table, its `params (tcbench)` equals what `tcbench list
# --exact` counts at the default size, and it is within 0.5% of `params
# (real)`, the real class's count. A case whose model uses a layer not
# built yet (`-` in the list) needs its row too, with `-` as its tcbench
# count.
#
#   tests/zoo_params.sh TABLE SUITE...   # 0 all match; 1 each mismatch named;
#                                        # 77 (a skip) when no SUITE exists yet
#   tests/zoo_params.sh --self-test      # the check on tests/fixtures/zoo:
#                                        # the table passes, wrong ones fail
#
# A table is any Markdown table of TABLE whose header has the columns
# `model`, `params (tcbench)` and `params (real)`; counts may hold commas.
# TCBENCH_EXE is the tcbench to list with.
set -uo pipefail

EXE=${TCBENCH_EXE:?TCBENCH_EXE must name the tcbench executable}
RULE=0.005 # the most tcbench and the real count may differ, relatively

# "name<TAB>tcbench<TAB>real" of every row of the zoo tables in $1.
table_rows() {
    awk -F'|' '
        function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
        !/^[ \t]*\|/ { in_table = 0; next }      # a line outside a table ends it
        !in_table {                               # its header: are the columns there?
            in_table = 1; cm = ct = cr = 0
            for (i = 2; i < NF; i++) {
                c = trim($i)
                if (c == "model") cm = i
                if (c == "params (tcbench)") ct = i
                if (c == "params (real)") cr = i
            }
            if (!(ct && cr)) cm = 0
            next
        }
        cm == 0 || /^[ \t]*\|[ \t|:-]*$/ { next } # another table, or the rule row
        {
            t = trim($ct); r = trim($cr)
            gsub(/,/, "", t); gsub(/,/, "", r)
            m = trim($cm); gsub(/`/, "", m)
            printf "%s\t%s\t%s\n", m, t, r
        }
    ' "$1"
}

# check TABLE SUITE...: the rule, one line per case that breaks it.
check() {
    local table=$1 tmp rows status=0 any=0
    shift
    tmp=$(mktemp -d) || return 2
    if [ ! -r "$table" ]; then
        echo "$table: cannot read the table" >&2
        rm -rf "$tmp"
        return 2
    fi
    table_rows "$table" >"$tmp/rows"
    dup=$(cut -f1 "$tmp/rows" | sort | uniq -d | head -n1)
    if [ -n "$dup" ]; then
        echo "$table: model '$dup' has two rows; a case's name is its row's key" >&2
        status=1
    fi
    for suite in "$@"; do
        if [ ! -e "$suite" ]; then
            echo "$suite: no such suite yet; skipped" >&2
            continue
        fi
        any=1
        if ! "$EXE" list --exact "$suite" >"$tmp/list" 2>"$tmp/err"; then
            echo "$suite: tcbench list failed: $(head -n1 "$tmp/err")" >&2
            status=1
            continue
        fi
        # case and count: the first field and the last but one (params may hold spaces)
        tail -n +2 "$tmp/list" | awk '{ print $1 "\t" $(NF - 1) }' >"$tmp/counts"
        while IFS=$'\t' read -r name count; do
            row=$(awk -F'\t' -v n="$name" '$1 == n { print; exit }' "$tmp/rows")
            if [ -z "$row" ]; then
                echo "$suite: case $name has no row in $table" >&2
                status=1
                continue
            fi
            t=$(printf '%s' "$row" | cut -f2)
            r=$(printf '%s' "$row" | cut -f3)
            if [ "$t" != "$count" ]; then
                echo "$suite: case $name: tcbench counts $count, $table says $t" >&2
                status=1
                continue
            fi
            [ "$count" = "-" ] && continue # not built yet: no count to hold to the rule
            if ! awk -v t="$t" -v r="$r" -v k="$RULE" \
                'BEGIN { exit !(r ~ /^[0-9]+$/ && r > 0 && (t - r) / r <= k && (r - t) / r <= k) }'; then
                echo "$suite: case $name: tcbench $t vs real '$r': more than 0.5% apart" >&2
                status=1
            fi
        done <"$tmp/counts"
    done
    rm -rf "$tmp"
    [ "$any" -eq 0 ] && return 77
    return "$status"
}

self_test() {
    local SRC fix tmp pass=0 fail=0
    SRC=${TCBENCH_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
    fix=$SRC/tests/fixtures/zoo
    tmp=$(mktemp -d) || exit 2
    trap 'rm -rf "$tmp"' EXIT
    # want CODE DESC TABLE SUITE...
    want() {
        local code=$1 desc=$2 got
        shift 2
        check "$@" 2>"$tmp/err"
        got=$?
        if [ "$got" -eq "$code" ]; then
            pass=$((pass + 1))
        else
            fail=$((fail + 1))
            echo "FAIL: $desc: exit $got, expected $code" >&2
            sed 's/^/  | /' "$tmp/err" >&2
        fi
    }
    said() { # said PATTERN DESC: the last check's messages hold PATTERN
        if grep -Eq -- "$1" "$tmp/err"; then pass=$((pass + 1)); else
            fail=$((fail + 1))
            echo "FAIL: $2: no '$1' in the messages" >&2
        fi
    }
    want 0 "the fixture table matches" "$fix/zoo.md" "$fix/suite.yaml"
    sed 's/| 745 | 744 |/| 746 | 744 |/' "$fix/zoo.md" >"$tmp/count.md"
    want 1 "a tcbench count that is not the listed one" "$tmp/count.md" "$fix/suite.yaml"
    said "case DeeperMLP: tcbench counts 745, .* says 746" "the wrong count named"
    sed 's/| 325 | 326 |/| 325 | 328 |/' "$fix/zoo.md" >"$tmp/real.md"
    want 1 "a real count 0.9% away" "$tmp/real.md" "$fix/suite.yaml"
    said "case TinyMLP: tcbench 325 vs real '328'" "the far real count named"
    grep -v '^| Hashing ' "$fix/zoo.md" >"$tmp/norow.md"
    want 1 "a case without a row" "$tmp/norow.md" "$fix/suite.yaml"
    said "case Hashing has no row" "the missing row named"
    sed 's/| Hashing | encoder | - |/| Hashing | encoder | 12345 |/' "$fix/zoo.md" >"$tmp/built.md"
    want 1 "a count for a model not built yet" "$tmp/built.md" "$fix/suite.yaml"
    sed 's/| 325 | 326 |/| 325 | |/' "$fix/zoo.md" >"$tmp/blank.md"
    want 1 "a blank real count" "$tmp/blank.md" "$fix/suite.yaml"
    want 77 "a suite not written yet skips" "$fix/zoo.md" "$tmp/no-such-suite.yaml"
    want 0 "a missing suite beside a present one is left out" "$fix/zoo.md" \
        "$tmp/no-such-suite.yaml" "$fix/suite.yaml"
    echo "zoo_params self-test: $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}

if [ "${1:-}" = "--self-test" ]; then
    self_test
    exit $?
fi
if [ $# -lt 2 ]; then
    echo "usage: tests/zoo_params.sh TABLE SUITE... | --self-test" >&2
    exit 2
fi
check "$@"
