#!/bin/sh
# Shards and merge (docs/cli.md, "--shard" and "tcbench merge"):
#  - bad --shard values: one line naming the option, exit 2;
#  - the smoke suite (eager, fp32 inference, the quickest settings) split
#    in 4, the shards run at once as local processes: every entry in
#    exactly one shard, the shard plan's estimated costs within 20%, and
#    merged (one shard given by its journal) the same entries as one
#    unsharded run; report and compare take the merged file;
#  - merge refuses another tcbench version, another suite, a file that is
#    no shard, and names the missing and duplicate entries (exit 2, or the
#    rest written under --allow-partial); more shards than groups leave
#    empty shards that merge all the same.
# Needs TCBENCH_EXE and TCBENCH_SOURCE_DIR (tests/meson.build sets both). POSIX sh.

EXE=${TCBENCH_EXE:?set TCBENCH_EXE to the tcbench binary}
SRC=${TCBENCH_SOURCE_DIR:?set TCBENCH_SOURCE_DIR to the source tree}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tcbench-shard-XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
unset TCBENCH_TEST_FAULT TCBENCH_TEST_NOISE TCBENCH_SUITES_DIR TCBENCH_LOG TCBENCH_MODELS
export XDG_CACHE_HOME="$TMP/cache" TMPDIR="$TMP" NO_COLOR=1
. "$SRC/tests/sh_lib.sh"

SMOKE=$SRC/suites/smoke.yaml
# the quickest honest run: eager, a few samples, one process, one thread
set -- --device cpu --mode eager --precision fp32 --workload infer --repeat 2 --warmup 1 \
    --processes 1 --min-time 0 --max-time 0.05 --no-accuracy --threads 1 --timeout 120

# bg NAME ARGS...: `tcbench run ARGS` in the background, its output in
# $TMP/NAME.out and .err and its exit status in .rc
bg() {
    name=$1
    shift
    ("$EXE" run "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"; echo $? >"$TMP/$name.rc") &
}
# exited NAME: the background run NAME exited 0
exited() {
    rc=$(cat "$TMP/$1.rc" 2>/dev/null)
    if [ "$rc" = 0 ]; then
        ok
    else
        bad "run $1: exit $rc, expected 0"
        sed 's/^/  | /' "$TMP/$1.err" >&2
    fi
}

# --- bad values -----------------------------------------------------------------
for bad in 5/4 0/0 a/b 1/0 0/4 1/ /4 1/4/2 -1/4; do
    expect 2 "--shard $bad" "$EXE" run "$SMOKE" "$@" --shard "$bad" -o "$TMP/bad.json"
    one_line "^tcbench run: --shard $bad: " "--shard $bad: one line naming the option"
done
[ ! -e "$TMP/bad.json" ] && ok || bad "a bad --shard wrote results"
"$EXE" run --help >"$TMP/help"
has "$TMP/help" '--shard K/N' "run --help names --shard"
expect 0 "merge --help" "$EXE" merge --help
has "$TMP/stdout" '^usage: tcbench merge SHARD.json... -o ALL.json' "merge --help"
expect 2 "merge without -o" "$EXE" merge "$TMP/none.json"
one_line '^tcbench merge: -o ALL.json is required' "merge without -o: one line"

# --- the smoke suite in 4 shards, at once ---------------------------------------
for k in 1 2 3 4; do
    bg "s$k" "$SMOKE" "$@" --shard "$k/4" -o "$TMP/s$k.json"
done
bg whole "$SMOKE" "$@" -o "$TMP/whole.json"
wait
exited whole
for k in 1 2 3 4; do
    exited "s$k"
    has "$TMP/s$k.err" "^tcbench run: --shard $k/4: [0-9]+ of 8 entries \([0-9]+ of 8 groups\)" \
        "shard $k/4 says its share"
    entries "$TMP/s$k.json" >"$TMP/s$k.entries"
done
entries "$TMP/whole.json" >"$TMP/whole.entries"
[ "$(wc -l <"$TMP/whole.entries")" -eq 8 ] && ok || bad "the unsharded run has 8 entries"
sort "$TMP"/s[1-4].entries >"$TMP/shards.entries"
[ -z "$(uniq -d "$TMP/shards.entries")" ] && ok || bad "an entry in two shards"
cmp -s "$TMP/shards.entries" "$TMP/whole.entries" && ok ||
    bad "the shards' entries are not the unsharded run's: $(diff "$TMP"/shards.entries \
        "$TMP/whole.entries")"
# the estimated cost of each shard, from the plan every shard records
awk '/"cost_s": /{c = $2 + 0} /"shard": [0-9]/{s[$2 + 0] += c}
    END {
        lo = s[1]; hi = s[1]
        for (k = 2; k <= 4; k++) {if (s[k] < lo) lo = s[k]; if (s[k] > hi) hi = s[k]}
        printf "%g %g\n", lo, hi
    }' "$TMP/s1.json" >"$TMP/cost"
read -r lo hi <"$TMP/cost"
awk -v lo="$lo" -v hi="$hi" 'BEGIN {exit !(lo > 0 && hi <= 1.2 * lo)}' && ok ||
    bad "the shards' estimated costs are more than 20% apart: $lo .. $hi s"
for k in 2 3 4; do
    a=$(sed -n '/"shard_plan"/,/^    \]/p' "$TMP/s1.json" | md5sum)
    b=$(sed -n '/"shard_plan"/,/^    \]/p' "$TMP/s$k.json" | md5sum)
    [ "$a" = "$b" ] && ok || bad "shard $k/4 records another shard plan than shard 1/4"
done

# merged, one shard by its journal: the unsharded run's entries, and every reader takes it
expect 0 "merge of the 4 shards" "$EXE" merge "$TMP/s1.json" "$TMP/s2.json" "$TMP/s3.json.jsonl" \
    "$TMP/s4.json" -o "$TMP/all.json"
has "$TMP/stdout" "^merged 8 entries of 4 shards into $TMP/all.json\$" "merge says what it wrote"
entries "$TMP/all.json" >"$TMP/all.entries"
cmp -s "$TMP/all.entries" "$TMP/whole.entries" && ok ||
    bad "the merged entries are not the unsharded run's: $(diff "$TMP"/all.entries \
        "$TMP/whole.entries")"
[ "$(grep -c '^      "input": [0-3],\?$' "$TMP/all.json")" -eq 8 ] && ok ||
    bad "each entry names its input"
[ "$(grep -c '^        "hostname": ' "$TMP/all.json")" -eq 4 ] && ok ||
    bad "each input keeps its host"
has "$TMP/all.json" '^    "shard": null,' "the merged config is no shard's"
expect 0 "report of the merged file" "$EXE" report "$TMP/all.json" -o "$TMP/report"
expect 0 "compare of the unsharded run and the merged file" "$EXE" compare "$TMP/whole.json" \
    "$TMP/all.json"
has "$TMP/stdout" ' 0 missing, 0 new ' "compare: the same entries on both sides"

# --- merge refuses ----------------------------------------------------------------
sed 's/^\(    "version": "\)[^"]*"/\1v0-other"/' "$TMP/s2.json" >"$TMP/v2.json"
expect 2 "merge of another tcbench version" "$EXE" merge "$TMP/s1.json" "$TMP/v2.json" \
    -o "$TMP/x.json"
one_line "^tcbench merge: $TMP/s1.json and $TMP/v2.json differ in the tcbench version: .* vs \
v0-other " "another version: one line naming both files"
mkdir -p "$TMP/suites"
cat >"$TMP/suites/other.yaml" <<'EOF'
name: other
cases:
  - {name: first, model: mlp, batch: 2, params: {features: 8, hidden: 8, layers: 1, classes: 4}}
EOF
TCBENCH_MODELS="$SRC/models" "$EXE" run "$TMP/suites/other.yaml" "$@" --shard 2/4 -q \
    -o "$TMP/other.json" >/dev/null 2>&1
expect 2 "merge of another suite" "$EXE" merge "$TMP/s1.json" "$TMP/other.json" -o "$TMP/x.json"
one_line "^tcbench merge: $TMP/s1.json and $TMP/other.json differ in the suites: $SMOKE vs \
$TMP/suites/other.yaml\$" "another suite: one line naming both files"
expect 2 "merge of an unsharded run" "$EXE" merge "$TMP/whole.json" -o "$TMP/x.json"
one_line "^$TMP/whole.json: not a shard.s results" "an unsharded run: one line"
[ ! -e "$TMP/x.json" ] && ok || bad "a refused merge wrote a file"

# a shard missing: its entries named, nothing written; --allow-partial writes the rest
expect 2 "merge without shard 3" "$EXE" merge "$TMP/s1.json" "$TMP/s2.json" "$TMP/s4.json" \
    -o "$TMP/part.json"
n3=$(wc -l <"$TMP/s3.entries")
has "$TMP/stderr" "^tcbench merge: $n3 of 8 entries missing \(no input for shard 3 of 4\):\$" \
    "the missing entries counted, and the shard named"
while read -r suite name mode prec wl dev batch; do
    has "$TMP/stderr" "^  $suite/$name $mode $prec $wl $dev batch $batch \(shard 3/4\)\$" \
        "the missing $name named"
done <"$TMP/s3.entries"
has "$TMP/stderr" '^tcbench merge: nothing written; --allow-partial' "nothing written"
[ ! -e "$TMP/part.json" ] && ok || bad "a merge with missing entries wrote a file"
expect 0 "merge --allow-partial without shard 3" "$EXE" merge --allow-partial "$TMP/s1.json" \
    "$TMP/s2.json" "$TMP/s4.json" -o "$TMP/part.json"
[ "$(entries "$TMP/part.json" | wc -l)" -eq $((8 - n3)) ] && ok ||
    bad "--allow-partial: the rest written"
# a shard twice (its results and its journal): duplicates named
expect 2 "merge with a shard twice" "$EXE" merge "$TMP/s1.json" "$TMP/s2.json" "$TMP/s3.json" \
    "$TMP/s4.json" "$TMP/s4.json.jsonl" -o "$TMP/dup.json"
n4=$(wc -l <"$TMP/s4.entries")
has "$TMP/stderr" "^tcbench merge: $n4 entr(y|ies) in more than one input" "the duplicates counted"
has "$TMP/stderr" ": in $TMP/s4.json and $TMP/s4.json.jsonl\$" "a duplicate named with both files"

# --- more shards than groups: the empty shard merges too ---------------------------
for k in 1 2 3; do
    bg "t$k" "$SMOKE" "$@" --only mlp,gpt2 --shard "$k/3" -o "$TMP/t$k.json"
done
wait
for k in 1 2 3; do exited "t$k"; done
has "$TMP/t3.err" '^tcbench run: --shard 3/3: no entries \(the selection has 2 groups' \
    "an empty shard says so"
[ "$(entries "$TMP/t3.json" | wc -l)" -eq 0 ] && ok || bad "the empty shard's results hold no entry"
expect 0 "merge with an empty shard" "$EXE" merge "$TMP/t1.json" "$TMP/t2.json" "$TMP/t3.json" \
    -o "$TMP/t.json"
[ "$(entries "$TMP/t.json" | wc -l)" -eq 2 ] && ok ||
    bad "the merge of 3 shards of 2 groups holds 2 entries"

# --- a shard's journal resumes as that shard only ----------------------------------
expect 2 "--resume of shard 1 as shard 2" "$EXE" run "$SMOKE" "$@" --shard 2/4 -o "$TMP/s1.json" \
    --resume "$TMP/s1.json.jsonl"
one_line "the journal's run had --shard 1/4, this one 2/4\$" "--resume names the shard"

sh_lib_end shard
