#!/bin/sh
# tcbench history (docs/history.md) on synthetic results files: add, list
# and show give the entries back; the same run twice, a file the reader
# refuses, random bytes and another program's SQLite file are refused
# (exit 2, one line naming the file); two adds from two processes at once
# both land; an add killed (kill -9) inside its transaction leaves the
# database as it was, integrity_check ok; report finds the one 15% step at
# its commit (and none in a flat noisy series); compare history:main passes
# a run like the baseline's and catches a slowed one.
# Needs TCBENCH_EXE and TCBENCH_SOURCE_DIR (tests/meson.build); sqlite3
# (the command line tool) for the checks on the file, skipped without it.
# POSIX sh, grep, awk.

EXE=${TCBENCH_EXE:?set TCBENCH_EXE to the tcbench binary}
SRC=${TCBENCH_SOURCE_DIR:?set TCBENCH_SOURCE_DIR to the source tree}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tcbench-history-XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
unset TCBENCH_HISTORY TCBENCH_HISTORY_TEST_STALL
export TMPDIR="$TMP"

. "$SRC/tests/sh_lib.sh"

# mkrun OUT TIMESTAMP COMMIT SCALE SEED: a results file of smoke/mlp eager
# and compiled, 15 samples each (3 processes of 5) about 1 ms x SCALE and
# 0.8 ms x SCALE, +-1% of seeded noise
mkrun() {
    awk -v ts="$2" -v commit="$3" -v scale="$4" -v seed="$5" 'function samples(base,   s, k) {
        s = ""
        for (k = 0; k < 15; k++) s = s (k ? ", " : "") sprintf("%.6g", base * (1 + 0.02 * (rand() - 0.5)))
        return s
    }
    BEGIN {
        srand(seed)
        printf "{\"schema_version\": 1, \"tool\": {\"name\": \"tcbench\", \"version\": \"t\", \"git_commit\": \"%s\"},\n", commit
        printf "\"timestamp\": \"%s\", \"command_line\": [\"tcbench\"],\n", ts
        printf "\"host\": {\"hostname\": \"h1\", \"os\": \"Linux\", \"cpu_model\": \"Test CPU\", \"cores\": 8, \"threads_used\": 2},\n"
        printf "\"config\": {\"threads\": 2, \"repeat\": 15},\n\"cases\": [\n"
        split("eager compiled", modes, " ")
        for (m = 1; m <= 2; m++) {
            printf "%s{\"suite\": \"smoke\", \"name\": \"mlp\", \"mode\": \"%s\", \"precision\": \"fp32\", \"workload\": \"infer\", \"device\": \"cpu\", \"batch\": 2, \"status\": \"%s\", ", (m > 1 ? ",\n" : ""), modes[m], (m > 1 ? "pass" : "ok")
            printf "\"samples_s\": [%s], \"stability\": {\"processes\": 3, \"process_samples\": [5, 5, 5], \"unstable\": false, \"reasons\": []}", samples((m > 1 ? 0.8e-3 : 1e-3) * scale)
            if (m > 1) printf ", \"speedup\": {\"median\": 1.25, \"ci95_lo\": 1.2, \"ci95_hi\": 1.3}"
            printf "}"
        }
        printf "\n], \"wall_s\": 1}\n"
    }' >"$1"
}

DB="$TMP/h.sqlite"
have_sqlite=0
command -v sqlite3 >/dev/null && have_sqlite=1
integrity() { # integrity DB DESC
    [ $have_sqlite -eq 1 ] || return 0
    if [ "$(sqlite3 "$1" 'PRAGMA integrity_check')" = ok ]; then ok; else bad "$2: integrity_check"; fi
}
count_runs() { # the runs in $DB, by the tool itself
    "$EXE" history list --db "$DB" | tail -n +2 | wc -l | tr -d ' '
}

# --- round trip ---------------------------------------------------------------
mkrun "$TMP/r1.json" 2026-01-01T00:00:00Z c0000001 1 1
expect 0 "add" "$EXE" history add "$TMP/r1.json" --db "$DB" --branch main
has "$TMP/stdout" "^added run 1: 2 entries of .*r1.json \(commit c0000001, branch main, h1\)$" "add says what"
expect 0 "list" "$EXE" history list --db "$DB"
has "$TMP/stdout" "^1 +c0000001 +main +2026-01-01T00:00:00Z +h1 \([0-9a-f]{8}\) +2$" "list row"
expect 0 "show" "$EXE" history show "smoke/mlp compiled" --db "$DB"
has "$TMP/stdout" "^# smoke/mlp compiled fp32 infer cpu 2 on Test CPU; 8 cores" "show names the entry and machine"
has "$TMP/stdout" "^c0000001 +main +2026-01-01T00:00:00Z +0\.[78][0-9]* +[0-9.]+% +15 pass +1\.250x$" "show row"
expect 0 "show by hostname" "$EXE" history show "smoke/mlp eager fp32 infer cpu 2" --db "$DB" --host h1
has "$TMP/stdout" "^c0000001 .* 15 ok " "show eager"
expect 2 "show ambiguous" "$EXE" history show "smoke/mlp" --db "$DB"
one_line "names several entries" "show ambiguous"
expect 2 "show unknown" "$EXE" history show "smoke/nope" --db "$DB"
one_line "no entry 'smoke/nope'" "show unknown"
[ $have_sqlite -eq 1 ] && { [ "$(sqlite3 "$DB" 'PRAGMA journal_mode')" = wal ] && ok || bad "not in WAL mode"; }
[ $have_sqlite -eq 1 ] && { [ "$(sqlite3 "$DB" 'SELECT version FROM schema_version')" = 1 ] && ok || bad "schema_version"; }

# --- refusals -----------------------------------------------------------------
expect 2 "same run twice" "$EXE" history add "$TMP/r1.json" --db "$DB" --branch main
one_line "r1.json: this run .* is already in .* as run 1; a run is added once" "same run twice"
[ "$(count_runs)" = 1 ] && ok || bad "the refused add added a run"
printf '{"schema_version": 1, "cases": [' >"$TMP/cut.json"
expect 2 "a cut results file" "$EXE" history add "$TMP/cut.json" --db "$DB" --branch main
one_line "cut.json" "a cut results file"
head -c 2048 /dev/urandom >"$TMP/random.json"
expect 2 "random bytes as results" "$EXE" history add "$TMP/random.json" --db "$DB" --branch main
one_line "random.json" "random bytes as results"
sed 's/"git_commit": "c0000001"/"git_commit": "unknown"/' "$TMP/r1.json" >"$TMP/nocommit.json"
expect 2 "no commit" "$EXE" history add "$TMP/nocommit.json" --db "$DB" --branch main
one_line "nocommit.json: the results record no git commit; pass --commit SHA" "no commit"
expect 2 "no branch" "$EXE" history add "$TMP/r1.json" --db "$DB"
one_line "add needs --branch NAME" "no branch"
head -c 4096 /dev/urandom >"$TMP/random.sqlite"
expect 2 "random bytes" "$EXE" history list --db "$TMP/random.sqlite"
one_line "random.sqlite: .*not a (database|tcbench history)" "random bytes"
if [ $have_sqlite -eq 1 ]; then
    sqlite3 "$TMP/foreign.sqlite" 'CREATE TABLE t (x); INSERT INTO t VALUES (1);'
    expect 2 "foreign database" "$EXE" history add "$TMP/r1.json" --db "$TMP/foreign.sqlite" --branch main
    one_line "foreign.sqlite: not a tcbench history database: it has 1 table and no schema_version" "foreign database"
    [ "$(sqlite3 "$TMP/foreign.sqlite" 'SELECT count(*) FROM sqlite_master')" = 1 ] && ok || bad "the foreign file was changed"
fi
expect 2 "no database" "$EXE" history list --db "$TMP/none.sqlite"
one_line "none.sqlite: stat: No such file or directory \(tcbench history add creates it\)" "no database"
sed 's/"samples_s": \[[0-9.e-]*,/"samples_s": [1e200,/' "$TMP/r1.json" >"$TMP/absurd.json"
expect 2 "an invalid entry" "$EXE" history add "$TMP/absurd.json" --db "$DB" --branch main
one_line "absurd.json: cases\[0\] .* is invalid: samples_s\[0\] = 1e\+200 s" "an invalid entry"
expect 2 "unknown action" "$EXE" history drop --db "$DB"
one_line "unknown action 'drop'" "unknown action"
expect 0 "tcbench --help" "$EXE" --help
has "$TMP/stdout" "^  history " "tcbench --help lists history"
expect 0 "history --help" "$EXE" history --help
has "$TMP/stdout" "^usage: tcbench history add" "history --help"
expect 2 "option of another action" "$EXE" history list --db "$DB" --branch main
one_line "--branch does not apply to history list" "option of another action"

# --- two processes at once ------------------------------------------------------
mkrun "$TMP/p1.json" 2026-01-02T00:00:00Z c0000002 1 2
mkrun "$TMP/p2.json" 2026-01-02T00:00:01Z c0000002 1 3
rm -f "$TMP/c.sqlite"
"$EXE" history add "$TMP/p1.json" --db "$TMP/c.sqlite" --branch main >"$TMP/c1.out" 2>&1 &
pid1=$!
"$EXE" history add "$TMP/p2.json" --db "$TMP/c.sqlite" --branch main >"$TMP/c2.out" 2>&1 &
pid2=$!
wait $pid1 && ok || { bad "concurrent add 1"; cat "$TMP/c1.out" >&2; }
wait $pid2 && ok || { bad "concurrent add 2"; cat "$TMP/c2.out" >&2; }
expect 0 "list after concurrent adds" "$EXE" history list --db "$TMP/c.sqlite"
[ "$(tail -n +2 "$TMP/stdout" | wc -l | tr -d ' ')" = 2 ] && ok || bad "concurrent adds: not both runs"
integrity "$TMP/c.sqlite" "concurrent adds"

# --- kill -9 inside the transaction ----------------------------------------------
mkrun "$TMP/k.json" 2026-01-03T00:00:00Z c0000003 1 4
before=$("$EXE" history list --db "$DB")
TCBENCH_HISTORY_TEST_STALL=30 "$EXE" history add "$TMP/k.json" --db "$DB" --branch main \
    >"$TMP/k.out" 2>"$TMP/k.err" &
kpid=$!
i=0
while ! grep -q "sleeping" "$TMP/k.err" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
grep -q "sleeping 30 s before COMMIT" "$TMP/k.err" && ok || bad "the add did not reach its stall"
kill -9 $kpid
wait $kpid 2>/dev/null
after=$("$EXE" history list --db "$DB")
[ "$before" = "$after" ] && ok || bad "kill -9 mid-add changed the database"
integrity "$DB" "after kill -9"
expect 0 "add after the kill" "$EXE" history add "$TMP/k.json" --db "$DB" --branch main
[ "$(count_runs)" = 2 ] && ok || bad "the add after the kill did not land"

# --- steps: a 15% step at the 7th of 12 commits ------------------------------------
S="$TMP/steps.sqlite"
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
    scale=1
    [ $i -ge 7 ] && scale=1.15
    mkrun "$TMP/s$i.json" "2026-02-$(printf %02d $i)T00:00:00Z" "step$(printf %02d $i)" $scale $((100 + i))
    "$EXE" history add "$TMP/s$i.json" --db "$S" --branch main >/dev/null || bad "add s$i"
done
expect 0 "report" "$EXE" history report --db "$S" -o "$TMP/rep"
has "$TMP/rep/history.md" "^\| smoke/mlp compiled fp32 infer cpu 2 \| [0-9a-f]{8} \| step06 \| step07 \| \+1[45]\.[0-9]%" "the step at step07"
[ "$(grep -c '| step06 | step07 |' "$TMP/rep/history.md")" = 2 ] && ok || bad "one step per entry"
[ -f "$TMP/rep/charts/history-smoke_mlp_compiled_fp32_infer_cpu_2-$(grep -o '| [0-9a-f]\{8\} |' "$TMP/rep/history.md" | head -1 | tr -d '| ').gp" ] && ok || bad "the chart's script"
F="$TMP/flat.sqlite"
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
    awk -v i=$i 'BEGIN { srand(i); printf "%.4f\n", 1 + 0.04 * (rand() - 0.5) }' >"$TMP/scale"
    mkrun "$TMP/f$i.json" "2026-03-$(printf %02d $i)T00:00:00Z" "flat$(printf %02d $i)" "$(cat "$TMP/scale")" $((200 + i))
    "$EXE" history add "$TMP/f$i.json" --db "$F" --branch main >/dev/null || bad "add f$i"
done
expect 0 "report flat" "$EXE" history report --db "$F" -o "$TMP/flat"
has "$TMP/flat/history.md" "^No steps found\.$" "a flat series has no step"

# --- compare against history:main -------------------------------------------------
mkrun "$TMP/same.json" 2026-04-01T00:00:00Z c0000009 1.15 300
expect 0 "compare history:main, the same speed" "$EXE" compare history:main "$TMP/same.json" --db "$S"
has "$TMP/stdout" "same" "compare: same"
mkrun "$TMP/slow.json" 2026-04-01T00:00:00Z c0000009 1.5 301
expect 1 "compare history:main, slowed" "$EXE" compare --baseline history:main "$TMP/slow.json" --db "$S" --history-runs 3
has "$TMP/stdout" "regression" "compare: the slowed run is a regression"
# The same machine with fewer threads: compared, with a warning, and caught
sed 's/"threads_used": 2/"threads_used": 1/; s/"threads": 2/"threads": 1/' "$TMP/slow.json" >"$TMP/slow1.json"
expect 1 "compare history:main, one thread" "$EXE" compare history:main "$TMP/slow1.json" --db "$S" --history-runs 3
has "$TMP/stderr" "warning: run with other settings \(threads_used 2 vs 1\)" "compare: the thread count is named"
has "$TMP/stdout" "regression" "compare: the one-thread run is a regression"
# ... unless the branch has runs with that thread count: those are the baseline
cp "$S" "$TMP/s1.sqlite"
mkrun "$TMP/t1.json" 2026-03-31T00:00:00Z c0000008 1.5 302
sed -i 's/"threads_used": 2/"threads_used": 1/; s/"threads": 2/"threads": 1/' "$TMP/t1.json"
"$EXE" history add "$TMP/t1.json" --db "$TMP/s1.sqlite" --branch main >/dev/null || bad "add t1"
expect 0 "compare history:main, one thread, one-thread history" "$EXE" compare history:main "$TMP/slow1.json" --db "$TMP/s1.sqlite"
has "$TMP/stdout" "same" "compare: one thread against one thread"
if grep -q "other settings" "$TMP/stderr"; then bad "one thread against one thread warns"; else ok; fi
expect 2 "compare history:nope" "$EXE" compare history:nope "$TMP/same.json" --db "$S"
one_line "no run of branch 'nope' on this machine" "compare history:nope"
expect 2 "compare --history-runs 0" "$EXE" compare history:main "$TMP/same.json" --db "$S" --history-runs 0
one_line "--history-runs 0: expected a whole number from 1 to 64" "compare --history-runs 0"

expect 2 "compare --db with a file baseline" "$EXE" compare "$TMP/same.json" "$TMP/slow.json" --db "$S"
one_line "--db applies to a history:BRANCH baseline only" "compare --db with a file baseline"

sh_lib_end history
