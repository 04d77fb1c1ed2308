#!/bin/sh
# The Slurm scripts (docs/cluster.md) with sbatch absent:
#  - scripts/slurm/tcbench-array.sbatch, its task body run directly: the
#    smoke suite (shard.sh's quickest settings) as 4 array tasks at once,
#    local processes with the array variables set, tcbench found on PATH,
#    --threads from SLURM_CPUS_PER_TASK and --device from TCBENCH_DEVICE;
#    without the array variables, or with options it sets itself, one line
#    and exit 2; a task resubmitted alone (--array=3: a count of 1,
#    TCBENCH_SHARDS=4) goes on from its journal with --resume;
#  - tcbench-merge.sbatch: the shards (one by its journal) merged into the
#    unsharded run's entry set, the report, the gate against a baseline and
#    its Markdown; a missing shard exit 2 unless TCBENCH_ALLOW_PARTIAL=1;
#  - submit.sh against a stand-in sbatch: the array with the requests of
#    TCBENCH_CPUS and TCBENCH_GPUS, then the merge with afterany on it.
# Needs TCBENCH_EXE and TCBENCH_SOURCE_DIR (tests/meson.build sets both), and bash.

EXE=${TCBENCH_EXE:?set TCBENCH_EXE to the tcbench binary}
SRC=${TCBENCH_SOURCE_DIR:?set TCBENCH_SOURCE_DIR to the source tree}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tcbench-slurm-XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
unset TCBENCH_TEST_FAULT TCBENCH_TEST_NOISE TCBENCH_SUITES_DIR TCBENCH_LOG TCBENCH_MODELS \
    TCBENCH TCBENCH_OUTDIR TCBENCH_SHARDS TCBENCH_DEVICE TCBENCH_BASELINE TCBENCH_ALLOW_PARTIAL \
    TCBENCH_COMPARE_ARGS TCBENCH_CPUS TCBENCH_GPUS TCBENCH_TIME TCBENCH_MEM TCBENCH_SBATCH_ARGS \
    SLURM_ARRAY_TASK_ID SLURM_ARRAY_TASK_COUNT SLURM_CPUS_PER_TASK
export XDG_CACHE_HOME="$TMP/cache" TMPDIR="$TMP" NO_COLOR=1
. "$SRC/tests/sh_lib.sh"

BASH=$(command -v bash) || {
    echo "slurm: no bash; skipped"
    exit 77
}
ARRAY=$SRC/scripts/slurm/tcbench-array.sbatch
MERGE=$SRC/scripts/slurm/tcbench-merge.sbatch
SMOKE=$SRC/suites/smoke.yaml
# tcbench on PATH; an sbatch that only notes its calls, so that the task
# body and the merge are seen to need none
mkdir "$TMP/bin"
printf '#!/bin/sh\nexec "%s" "$@"\n' "$EXE" >"$TMP/bin/tcbench"
cat >"$TMP/bin/sbatch" <<EOF
#!/bin/sh
echo "\$* | \$TCBENCH_DEVICE \$TCBENCH_SHARDS \$TCBENCH_OUTDIR \$TCBENCH" >>"$TMP/sbatch.log"
echo "\$((\$(wc -l <"$TMP/sbatch.log") + 100));cluster"
EOF
chmod +x "$TMP/bin/tcbench" "$TMP/bin/sbatch"
PATH=$TMP/bin:$PATH
# shard.sh's quickest honest run, less --threads and --device, which the script adds
set -- --mode eager --precision fp32 --workload infer --repeat 2 --warmup 1 --processes 1 \
    --min-time 0 --max-time 0.05 --no-accuracy --timeout 120
RUN=$TMP/run

# task K [VAR=VALUE...]: array task K of 4 in the background, as Slurm would
# start it; output in $TMP/taskK.out and .err, exit status in .rc
# shellcheck disable=SC2086 # OPTS: the options, split on spaces
task() {
    k=$1
    shift
    (env SLURM_ARRAY_TASK_ID="$k" SLURM_ARRAY_TASK_COUNT=4 SLURM_CPUS_PER_TASK=1 \
        TCBENCH_DEVICE=cpu TCBENCH_OUTDIR="$RUN" "$@" "$BASH" "$ARRAY" "$SMOKE" $OPTS \
        >"$TMP/task$k.out" 2>"$TMP/task$k.err"
    echo $? >"$TMP/task$k.rc") &
}
OPTS=$*
exited() { # exited K: task K exited 0
    rc=$(cat "$TMP/task$1.rc" 2>/dev/null)
    if [ "$rc" = 0 ]; then
        ok
    else
        bad "task $1: exit $rc, expected 0"
        sed 's/^/  | /' "$TMP/task$1.err" >&2
    fi
}

# --- refusals: one line, exit 2 ------------------------------------------------
expect 2 "no array variables" "$BASH" "$ARRAY" "$SMOKE" "$@"
one_line '^tcbench-array.sbatch: SLURM_ARRAY_TASK_ID is not set: submit with sbatch --array=1-N' \
    "no array variables: one line"
expect 2 "no task count" env SLURM_ARRAY_TASK_ID=1 "$BASH" "$ARRAY" "$SMOKE" "$@"
one_line '^tcbench-array.sbatch: SLURM_ARRAY_TASK_COUNT \(or TCBENCH_SHARDS\) is not set' \
    "no task count: one line"
expect 2 "a 0-based array" env SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_COUNT=4 "$BASH" "$ARRAY" \
    "$SMOKE" "$@"
one_line '^tcbench-array.sbatch: shard 0 of 4: the array.s indices must be 1 to N' \
    "a 0-based array: one line"
expect 2 "-o in the options" env SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=4 "$BASH" "$ARRAY" \
    "$SMOKE" "$@" -o "$TMP/x.json"
one_line '^tcbench-array.sbatch: -o: the script sets the output' "-o in the options: one line"
expect 2 "no tcbench" env PATH=/nonexistent SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=4 \
    "$BASH" "$ARRAY" "$SMOKE" "$@"
one_line '^tcbench-array.sbatch: no tcbench: set TCBENCH' "no tcbench: one line"
[ ! -e "$RUN" ] && [ ! -e "$TMP/x.json" ] && ok || bad "a refused task wrote results"
expect 2 "merge of no directory" env TCBENCH_OUTDIR="$RUN" "$BASH" "$MERGE"
one_line "^tcbench-merge.sbatch: $RUN: no such directory" "merge of no directory: one line"

# --- 4 array tasks at once, and one unsharded run ------------------------------
for k in 1 2 3 4; do task "$k"; done
("$EXE" run "$SMOKE" "$@" --threads 1 --device cpu -o "$TMP/whole.json" >"$TMP/whole.out" \
    2>"$TMP/whole.err"
echo $? >"$TMP/whole.rc") &
wait
[ "$(cat "$TMP/whole.rc")" = 0 ] && ok || bad "the unsharded run: exit $(cat "$TMP/whole.rc")"
for k in 1 2 3 4; do
    exited "$k"
    has "$TMP/task$k.err" "^tcbench-array.sbatch: shard $k/4 on .*: $TMP/bin/tcbench run $SMOKE \
.* --timeout 120 --threads 1 --device cpu --shard $k/4 -o $RUN/shard-$k.json\$" \
        "task $k says its command: --threads and --device from the environment, no --resume"
    has "$TMP/task$k.err" "^tcbench run: --shard $k/4: [0-9]+ of 8 entries" "task $k ran shard $k/4"
    has "$RUN/shard-$k.json" '^    "threads": 1,' "task $k: 1 thread (SLURM_CPUS_PER_TASK)"
done
[ ! -e "$TMP/sbatch.log" ] && ok || bad "a task called sbatch"

# --- the merge job: one shard by its journal, the gate against the unsharded run ----
mv "$RUN/shard-2.json" "$TMP/shard-2.json"
expect 0 "the merge job" env TCBENCH_OUTDIR="$RUN" TCBENCH_BASELINE="$TMP/whole.json" \
    "$BASH" "$MERGE"
has "$TMP/stdout" "^merged 8 entries of 4 shards into $RUN/all.json\$" "merge says what it wrote"
entries "$TMP/whole.json" >"$TMP/whole.entries"
entries "$RUN/all.json" >"$TMP/all.entries"
[ "$(wc -l <"$TMP/whole.entries")" -eq 8 ] && ok || bad "the unsharded run has 8 entries"
cmp -s "$TMP/all.entries" "$TMP/whole.entries" && ok ||
    bad "the merged entries are not the unsharded run's: $(diff "$TMP/all.entries" \
        "$TMP/whole.entries")"
has "$RUN/all.json" "\"path\": \"$RUN/shard-2.json.jsonl\"," "shard 2 merged from its journal"
[ -s "$RUN/report/summary.md" ] && ok || bad "no report/summary.md"
has "$TMP/stdout" ' 0 missing, 0 new ' "the gate's verdicts on the job's output"
has "$RUN/compare.md" '^### tcbench compare: PASS' "compare.md: the Markdown summary"
has "$TMP/stderr" "^tcbench-merge.sbatch: gate against $TMP/whole.json: exit 0; $RUN/compare.md\$" \
    "the merge job names the gate's result"
[ ! -e "$TMP/sbatch.log" ] && ok || bad "the merge job called sbatch"

# a shard missing: exit 2 naming it; TCBENCH_ALLOW_PARTIAL=1 merges the rest
mkdir "$TMP/part"
cp "$RUN/shard-1.json" "$RUN/shard-3.json" "$RUN/shard-4.json" "$TMP/part/"
expect 2 "the merge job without shard 2" env TCBENCH_OUTDIR="$TMP/part" "$BASH" "$MERGE"
has "$TMP/stderr" '^tcbench merge: [0-9]+ of 8 entries missing \(no input for shard 2 of 4\)' \
    "the missing shard named"
[ ! -e "$TMP/part/all.json" ] && ok || bad "a merge with a shard missing wrote all.json"
expect 0 "the merge job without shard 2, partial" env TCBENCH_OUTDIR="$TMP/part" \
    TCBENCH_ALLOW_PARTIAL=1 "$BASH" "$MERGE"
[ -s "$TMP/part/report/summary.md" ] && ok || bad "partial: no report"

# --- task 3 resubmitted alone (sbatch --array=3): it resumes from its journal ------
mv "$RUN/shard-3.json" "$TMP/shard-3.json"
task 3 SLURM_ARRAY_TASK_COUNT=1 TCBENCH_SHARDS=4
wait
exited 3
has "$TMP/task3.err" " --shard 3/4 -o $RUN/shard-3.json --resume $RUN/shard-3.json.jsonl\$" \
    "the resubmitted task passes --resume"
has "$TMP/task3.err" "^tcbench run: resumed: ([0-9]+) of \\1 entries from $RUN/shard-3.json.jsonl" \
    "the resubmitted task measures nothing again"
[ "$(entries "$RUN/shard-3.json")" = "$(entries "$TMP/shard-3.json")" ] && ok ||
    bad "the resumed shard 3 has other entries than before"

# --- submit.sh: the array with the requests, then the merge after it ----------------
expect 0 "submit.sh" env TCBENCH_SHARDS=4 TCBENCH_CPUS=16 TCBENCH_GPUS=1 TCBENCH_TIME=2:00:00 \
    TCBENCH_OUTDIR="$TMP/sub" "$BASH" "$SRC/scripts/slurm/submit.sh" "$SMOKE" --repeat 20
has "$TMP/stdout" "^array job 101 \(4 shards\), merge job 102; results in $TMP/sub\$" \
    "submit.sh names both jobs"
has "$TMP/sbatch.log" "^--parsable --array=1-4 --cpus-per-task=16 --gres=gpu:1 --time=2:00:00 \
$SRC/scripts/slurm/tcbench-array.sbatch $SMOKE --repeat 20 \| cuda 4 $TMP/sub $TMP/bin/tcbench\$" \
    "the array: 4 tasks, the requests, TCBENCH_DEVICE cuda for a GPU"
has "$TMP/sbatch.log" "^--parsable --dependency=afterany:101 $SRC/scripts/slurm/tcbench-merge.sbatch \
\| cuda 4 $TMP/sub $TMP/bin/tcbench\$" "the merge: after the array, whatever its end"
[ -d "$TMP/sub" ] && ok || bad "submit.sh made no results directory"

sh_lib_end slurm
