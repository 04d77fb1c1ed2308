#!/bin/sh
# The readers at scale: `tcbench report` and `compare` on generated results
# files of 10^5 and 10^6 entries (tests/gen_results.c) finish inside a time
# and a memory bound, and say how long they took and how much memory they
# held (one "scale:" line each, for the notes). They were quadratic in
# entries (100,000 took minutes) and kept every case's JSON tree (a
# million took gigabytes). The bounds: CPU seconds (ulimit -t, so a loaded
# shared machine does not fail it on wall time; a wall-clock timeout beside
# it catches a hang) and peak resident memory, 1 GB (tests/maxrss.c, else
# /usr/bin/time's %M; where both are missing, ulimit -v of SCALE_VMEM KB,
# default 4 GB). The million's CPU bound is 120 s, twice the target of 60 s
# (50.7 s and 30.1 s measured on a quiet 2-core VM), so that a loaded CI
# machine fails it only on a real regression; the "scale:" lines give the
# figures. Needs TCBENCH_EXE and GEN_RESULTS (the generator).
# SCALE_MAX=100000 leaves the million out (its files are 200 MB each, and
# it takes a minute and a half). POSIX sh.

EXE=${TCBENCH_EXE:?set TCBENCH_EXE to the tcbench binary}
GEN=${GEN_RESULTS:?set GEN_RESULTS to the gen_results binary}
MAX=${SCALE_MAX:-1000000}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tcbench-scale-XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
mkdir "$TMP/nobin" || exit 1
fail=0

# bounded CPU_S CMD...: CMD under the bounds; its exit status, and its
# wall seconds and peak resident KB in $wall and $rss
bounded() {
    cpu=$1
    shift
    start=$(date +%s.%N)
    if [ -x "${MAXRSS_EXE:-}" ]; then
        (ulimit -t "$cpu" && exec timeout $((cpu * 8)) "$MAXRSS_EXE" "$TMP/rss" "$@") \
            >"$TMP/out" 2>"$TMP/err"
    elif [ -x /usr/bin/time ]; then
        (ulimit -t "$cpu" && exec timeout $((cpu * 8)) /usr/bin/time -f '%M' -o "$TMP/rss" "$@") \
            >"$TMP/out" 2>"$TMP/err"
    else
        (ulimit -t "$cpu" && ulimit -v "${SCALE_VMEM:-4194304}" && exec timeout $((cpu * 8)) "$@") \
            >"$TMP/out" 2>"$TMP/err"
    fi
    rc=$?
    wall=$(echo "$start $(date +%s.%N)" | awk '{ printf "%.1f", $2 - $1 }')
    rss=$(tail -n 1 "$TMP/rss" 2>/dev/null || echo "?")
    return $rc
}

# check WHAT WANT_RC CPU_S CMD...
check() {
    what=$1
    want=$2
    shift 2
    bounded "$@"
    got=$?
    echo "scale: $what: exit $got, ${wall} s wall, peak RSS ${rss} KB"
    if [ "$got" -ne "$want" ]; then
        echo "FAIL: $what: exit $got, expected $want (a bound hit, or a wrong answer)" >&2
        sed 's/^/  | /' "$TMP/err" | head -5 >&2
        fail=$((fail + 1))
    elif [ "$rss" != "?" ] && [ "$rss" -gt "$MEM_KB" ]; then
        echo "FAIL: $what: peak RSS $rss KB > $MEM_KB KB" >&2
        fail=$((fail + 1))
    fi
}

MEM_KB=1048576
for n in 100000 1000000; do
    [ "$n" -le "$MAX" ] || continue
    "$GEN" "$TMP/base.json" "$n" || exit 1
    "$GEN" "$TMP/slow.json" "$n" 1.3 || exit 1
    # 10^5: 10 s of CPU (the target); 10^6: 120 s (twice the target)
    cpu=$((n / 10000))
    [ "$cpu" -ge 100 ] && cpu=120
    # the tables only: gnuplot drawing a chart of 500,000 models is not the reader
    check "report of $n entries" 0 "$cpu" env PATH="$TMP/nobin" "$EXE" report "$TMP/base.json" \
        -o "$TMP/rep"
    if ! grep -q '^| Pass rate | 100%, ' "$TMP/rep/summary.md"; then
        echo "FAIL: report of $n entries: no pass rate of 100%" >&2
        fail=$((fail + 1))
    fi
    # every compiled entry 30% slower: the ones with enough samples regress
    check "compare of $n entries" 1 "$cpu" "$EXE" compare "$TMP/base.json" "$TMP/slow.json"
    if ! grep -Eq "^FAIL: $((n / 2000)) regressions?, " "$TMP/out"; then
        echo "FAIL: compare of $n entries: $(tail -n 1 "$TMP/out")" >&2
        fail=$((fail + 1))
    fi
    rm -rf "$TMP/rep" "$TMP/base.json" "$TMP/slow.json"
done
[ "$fail" -eq 0 ]
