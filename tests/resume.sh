#!/bin/sh
# Nothing lost, nothing misreported (docs/cli.md, "Stopped runs"):
#  - a run killed (kill -9) halfway goes on with --resume: the final
#    results hold every entry once, and what was measured is not measured
#    again; a cut last line of the journal is cut off first;
#  - --resume with options that do not match the journal's run: exit 2;
#  - Ctrl-C (SIGINT): exit 130, one line saying what the journal keeps,
#    no child left running, no results file;
#  - a full disk (a small tmpfs where one can be mounted, else a file size
#    limit): exit 3, the lines say which entries are safe and where, and
#    neither a `results:` line nor a stale results file is named.
# Needs TCBENCH_EXE and TCBENCH_SOURCE_DIR; tests/meson.build sets both. POSIX sh.

EXE=${TCBENCH_EXE:?set TCBENCH_EXE to the tcbench binary}
SRC=${TCBENCH_SOURCE_DIR:?set TCBENCH_SOURCE_DIR to the source tree}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tcbench-resume-XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
unset TCBENCH_TEST_FAULT TCBENCH_TEST_NOISE TCBENCH_SUITES_DIR TCBENCH_LOG
export XDG_CACHE_HOME="$TMP/cache" TMPDIR="$TMP" NO_COLOR=1 TCBENCH_MODELS="$SRC/models"

failures=0
# check DESC TEST...: TEST is a command that succeeds when all is well
check() {
    desc=$1
    shift
    if ! "$@"; then
        echo "FAIL: $desc" >&2
        failures=$((failures + 1))
    fi
}
# count PATTERN FILE: lines of FILE matching the extended regex
count() { grep -Ec -- "$1" "$2"; }
show() { sed 's/^/  | /' "$1" >&2; }

mkdir -p "$TMP/suites"
# the tree's mlp ($TCBENCH_MODELS), as small as it goes
cat >"$TMP/suites/three.yaml" <<'EOF'
name: three
defaults: {modes: [eager]}
cases:
  - {name: first, model: mlp, batch: 2, params: {features: 8, hidden: 8, layers: 1, classes: 4}}
  - {name: second, model: mlp, batch: 3, params: {features: 8, hidden: 8, layers: 1, classes: 4}}
  - {name: third, model: mlp, batch: 4, params: {features: 8, hidden: 8, layers: 1, classes: 4}}
EOF
SUITE="$TMP/suites/three.yaml"
# the fastest honest settings: a few samples each, one process, one thread
set -- "$SUITE" --device cpu --repeat 2 --warmup 1 --processes 1 --min-time 0 --max-time 0.05 \
    --no-accuracy --threads 1 --timeout 120

"$EXE" run --help >"$TMP/help.out"
check "run --help names --resume" grep -q -- '--resume FILE.jsonl' "$TMP/help.out"
check "run --help names exit 3" grep -q ', 3 the results or the$' "$TMP/help.out"
check "run --help names exit 130" grep -q '^130 interrupted' "$TMP/help.out"

# wait_run PID JOURNAL LINES: until JOURNAL has LINES lines and PID a child
# (the hanging third case's), at most 120 s; prints the child's pid
wait_run() {
    i=0
    while [ "$i" -lt 1200 ]; do
        kids=$(cat /proc/"$1"/task/*/children 2>/dev/null)
        if [ -n "$kids" ] && [ -f "$2" ] && [ "$(wc -l <"$2")" -ge "$3" ]; then
            echo "$kids"
            return 0
        fi
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}

# --- kill -9 halfway, then --resume -----------------------------------------
J="$TMP/kill/r.json.jsonl"
TCBENCH_TEST_FAULT=hang:third "$EXE" run "$@" -o "$TMP/kill/r.json" >/dev/null 2>"$TMP/kill.err" &
pid=$!
if kids=$(wait_run "$pid" "$J" 3); then
    kill -9 "$pid"
    wait "$pid"
    for k in $kids; do kill -9 "$k" 2>/dev/null; done
    cp "$J" "$TMP/before.jsonl"
    check "the killed run's journal: a header and 2 entries" [ "$(wc -l <"$J")" -eq 3 ]
    printf '{"suite": "three", "name": "thi' >>"$J" # a line the kill cut
    "$EXE" run --resume "$J" >"$TMP/resume.out" 2>"$TMP/resume.err"
    rc=$?
    check "--resume: exit $rc, expected 0" [ "$rc" -eq 0 ]
    check "--resume says what it took" \
        grep -qx "tcbench run: resumed: 2 of 3 entries from $J" "$TMP/resume.err"
    check "--resume warns of the cut line" grep -q "^$J:4: warning: a cut line" "$TMP/resume.err"
    check "--resume measured the third case alone" \
        [ "$(count '^\[[0-9]+/3\] ' "$TMP/resume.err")" -eq 1 ]
    check "--resume measured the third case" grep -q '^\[3/3\] third: ok ' "$TMP/resume.err"
    check "--resume names the results" \
        grep -q "results: $TMP/kill/r.json\$" "$TMP/resume.out"
    for name in first second third; do
        check "the results hold $name once" \
            [ "$(count "\"name\": \"$name\"," "$TMP/kill/r.json")" -eq 1 ]
        check "the journal holds $name once" [ "$(count "\"name\":\"$name\"," "$J")" -eq 1 ]
    done
    check "the journal: whole lines, the cut one gone" [ "$(count '^\{.*\}$' "$J")" -eq 4 ]
    check "the journal has 4 lines" [ "$(wc -l <"$J")" -eq 4 ]
    check "what was measured before the kill is kept as it was" \
        sh -c 'head -n 3 "$1" | cmp -s - "$2"' sh "$J" "$TMP/before.jsonl"
    check "the results keep the run's command line" grep -q '"--timeout",' "$TMP/kill/r.json"
    # nothing left to measure: the results are written again from the journal
    "$EXE" run "$@" --resume "$J" >"$TMP/again.out" 2>"$TMP/again.err"
    rc=$?
    check "--resume with the run's options: exit $rc, expected 0" [ "$rc" -eq 0 ]
    check "... takes all 3" grep -qx "tcbench run: resumed: 3 of 3 entries from $J" \
        "$TMP/again.err"
    check "... measures nothing" [ "$(count '^\[[0-9]+/3\] ' "$TMP/again.err")" -eq 0 ]
    # another run's options are refused, naming the first that differs
    "$EXE" run "$@" --repeat 3 --resume "$J" >"$TMP/other.out" 2>"$TMP/other.err"
    rc=$?
    check "--resume with --repeat 3: exit $rc, expected 2" [ "$rc" -eq 2 ]
    check "... one line naming --repeat" sh -c '[ "$(wc -l <"$1")" -eq 1 ] &&
        grep -qx "tcbench run: --resume $2: the journal.s run had --repeat 2, this one 3" "$1"' \
        sh "$TMP/other.err" "$J"
    "$EXE" run --resume "$TMP/kill/r.json" >"$TMP/bad.out" 2>"$TMP/bad.err"
    check "--resume of a results file: exit 2" [ $? -eq 2 ]
    [ "$failures" -eq 0 ] || show "$TMP/resume.err"
else
    check "the killed run journaled 2 entries and started the third" false
    kill -9 "$pid"
    show "$TMP/kill.err"
fi

# --- Ctrl-C -----------------------------------------------------------------
J="$TMP/int/r.json.jsonl"
TCBENCH_TEST_FAULT=hang:third "$EXE" run "$@" -o "$TMP/int/r.json" >"$TMP/int.out" \
    2>"$TMP/int.err" &
pid=$!
if kids=$(wait_run "$pid" "$J" 3); then
    kill -INT "$pid"
    wait "$pid"
    rc=$?
    check "SIGINT: exit $rc, expected 130" [ "$rc" -eq 130 ]
    check "SIGINT: the line" grep -qx "tcbench run: interrupted; 2 of 3 entries are in $J (go on \
with: tcbench run --resume $J)" "$TMP/int.err"
    check "SIGINT: the journal keeps the 2 finished entries" [ "$(wc -l <"$J")" -eq 3 ]
    check "SIGINT: no results file" [ ! -e "$TMP/int/r.json" ]
    check "SIGINT: no results line" [ "$(count 'results:' "$TMP/int.out")" -eq 0 ]
    for k in $kids; do
        check "SIGINT: the child $k was killed" sh -c '! kill -0 "$1" 2>/dev/null' sh "$k"
    done
    [ "$failures" -eq 0 ] || show "$TMP/int.err"
else
    check "the interrupted run journaled 2 entries and started the third" false
    kill -9 "$pid"
    show "$TMP/int.err"
fi

# --- a full disk --------------------------------------------------------------
# A run that had written its results once (a stale file it must not name)
# runs again with room for the journal's header and first entry (and a
# little more): on a tmpfs where `unshare -m` can mount one (root), filled
# to leave that room; else under a file size limit that size (ulimit -f,
# SIGXFSZ ignored so that writes past it fail with EFBIG).
D="$TMP/full"
mkdir -p "$D"
cat >"$TMP/full.sh" <<'EOF'
how=$1 D=$2 EXE=$3
shift 3
if [ "$how" = tmpfs ]; then mount -t tmpfs -o size=256k tmpfs "$D" || exit 1; fi
"$EXE" run "$@" --only first -o "$D/r.json" >/dev/null 2>&1 || exit 1
cp "$D/r.json" "$D/../stale.json"
room=$(($(wc -c <"$D/r.json.jsonl") + 256))
rm "$D/r.json.jsonl"
if [ "$how" = tmpfs ]; then
    # pages, and one more for the lock file (it holds the pid)
    room=$(((room + 4095) / 4096 * 4096 + 4096))
    avail=$(df -B1 --output=avail "$D" | tail -n 1)
    head -c $((avail - room)) /dev/zero >"$D/filler"
    "$EXE" run "$@" -o "$D/r.json" >"$D/../full.out" 2>"$D/../full.err"
else
    (
        ulimit -f $(((room + 511) / 512)) # blocks of 512 bytes
        trap '' XFSZ
        exec "$EXE" run "$@" -o "$D/r.json" >"$D/../full.out" 2>"$D/../full.err"
    )
fi
echo $? >"$D/../full.rc"
cp "$D/r.json.jsonl" "$D/../full.jsonl"
if cmp -s "$D/r.json" "$D/../stale.json"; then echo same >"$D/../stale.cmp"; fi
EOF
J="$D/r.json.jsonl"
if unshare -m sh -c 'mount -t tmpfs tmpfs "$1"' sh "$D" 2>/dev/null; then
    how=tmpfs
    err="No space left on device"
    unshare -m sh "$TMP/full.sh" tmpfs "$D" "$EXE" "$@"
else
    how=ulimit
    err="File too large"
    sh "$TMP/full.sh" ulimit "$D" "$EXE" "$@"
fi
rc=$(cat "$TMP/full.rc" 2>/dev/null || echo "(none)")
check "full disk ($how): exit $rc, expected 3" [ "$rc" = 3 ]
# how many lines fit: 1 (ulimit: exactly the room) or 2 (tmpfs: pages)
k=$(sed -n "s|^tcbench run: write $J: $err; the journal holds \([12]\) of 3 entries, the rest are \
measured for the results file alone\$|\1|p" "$TMP/full.err")
check "full disk ($how): the journal's failure, once" \
    sh -c 'case "$1" in 1 | 2) true ;; *) false ;; esac' sh "$k"
[ "$how" = tmpfs ] || check "full disk ($how): the second line failed" [ "$k" = 1 ]
nth=$([ "$k" = 1 ] && echo 2nd || echo 3rd)
check "full disk ($how): which entries are safe, and where" grep -Eq "^tcbench run: the results \
file was not written \([a-z_]+ $D/r\.json\.tmp\.[0-9]+: $err\); $k of 3 entries are in $J \(writing \
the $nth failed: $err\)" "$TMP/full.err"
check "full disk ($how): the journal holds the header and $k whole lines" \
    [ "$(wc -l <"$TMP/full.jsonl")" -eq $((k + 1)) ]
check "full disk ($how): no results line" [ "$(count 'results:' "$TMP/full.out")" -eq 0 ]
check "full disk ($how): the stale results file is not named" \
    [ "$(cat "$TMP/full.out" "$TMP/full.err" | count "$D/r\.json([^.]|\$)" -)" -eq 0 ]
check "full disk ($how): the stale results file is left alone" [ -f "$TMP/stale.cmp" ]
if [ "$failures" -ne 0 ]; then show "$TMP/full.err"; fi

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
fi
echo "resume: all checks passed"
