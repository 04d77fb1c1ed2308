#!/bin/sh
# shellcheck disable=SC2086 # $FAST is a list of options
# What a run leaves behind and what it says about its children: a child
# killed from outside is a crash named by its signal, oom only on evidence
# (an allocation failure; the oom_kill counter of a stand-in cgroup rising);
# a timeout or a kill ends the child's whole process group; no temporary
# kernel cache or OUTPUT.tmp.PID is left, whatever became of the children;
# an output that cannot be written, or that another run is writing, is
# refused before anything is measured; an unusable calibration is said.
# Needs TCBENCH_EXE and TCBENCH_SOURCE_DIR (tests/meson.build sets both).
# POSIX sh, grep, pgrep and ps.

EXE=${TCBENCH_EXE:?set TCBENCH_EXE to the tcbench binary}
SRC=${TCBENCH_SOURCE_DIR:?set TCBENCH_SOURCE_DIR to the source tree}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tcbench-litter-XXXXXX") || exit 1
BG=
trap 'if [ -n "$BG" ]; then kill -9 "$BG" 2>/dev/null; fi; rm -rf "$TMP"' EXIT
unset TCBENCH_TEST_FAULT TCBENCH_TEST_NOISE TCBENCH_MODELS TCBENCH_SUITES_DIR TCBENCH_CC TCBENCH_LOG
# every temporary directory of the runs lands in $TMP/t, which must stay empty
mkdir "$TMP/t" "$TMP/out" || exit 1
export XDG_CACHE_HOME="$TMP/cache" TMPDIR="$TMP/t"

. "$SRC/tests/sh_lib.sh"
# refused DESC PATTERN CMD...: exit 2 with one line matching PATTERN (the
# busy-machine warning, which a loaded machine adds to any run, aside)
refused() {
    desc=$1
    pattern=$2
    shift 2
    expect 2 "$desc" "$@"
    grep -v '^tcbench run: warning: load average' "$TMP/stderr" >"$TMP/stderr.less"
    mv "$TMP/stderr.less" "$TMP/stderr"
    one_line "$pattern" "$desc"
}
# no_litter DESC: nothing left in TMPDIR, no OUTPUT.tmp.PID beside the results
no_litter() {
    left=$(ls -A "$TMP/t")
    for f in "$TMP"/out/*.tmp.*; do
        if [ -e "$f" ]; then left="$left $f"; fi
    done
    if [ -z "$left" ]; then ok; else bad "$1: left behind: $left"; fi
}
# child_of PID: the pid of PID's child, once it has one (30 s at most: a
# loaded machine)
child_of() {
    i=0
    while [ $i -lt 300 ]; do
        c=$(pgrep -P "$1" | head -n 1)
        if [ -n "$c" ]; then
            echo "$c"
            return 0
        fi
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}

cat >"$TMP/tiny.yaml" <<'EOF'
name: tiny
inputs:
  x: {shape: [$batch, 8]}
body:
  - linear: {out: 4}
EOF
cat >"$TMP/suite.yaml" <<'EOF'
name: litter
defaults: {modes: [eager, compiled]}
cases:
  - {name: first, model: tiny.yaml, batch: 2}
EOF
# the fastest honest run of the one case (a simple command: started with &,
# $! is tcbench itself)
FAST="--device cpu --only first --repeat 1 --warmup 1 --min-time 0 --max-time 0.01 --processes 1 -q"
run() {
    "$EXE" run "$TMP/suite.yaml" $FAST "$@"
}

# --- statuses of killed children ----------------------------------------------
# a compiler that never ends: the child is killed while it waits on it
cat >"$TMP/hangcc" <<'EOF'
#!/bin/sh
if [ "$1" = --version ]; then echo "hangcc 1.0"; exit 0; fi
exec sleep 300
EOF
chmod +x "$TMP/hangcc"
OUT="$TMP/out/killed.json"
TCBENCH_CC="$TMP/hangcc" "$EXE" run "$TMP/suite.yaml" $FAST --timeout 60 -o "$OUT" \
    >"$TMP/stdout" 2>"$TMP/stderr" &
BG=$!
if child=$(child_of "$BG") && cc=$(child_of "$child"); then
    kill -9 "$child"
    wait "$BG"
    got=$?
    BG=
    if [ "$got" -eq 1 ]; then ok; else bad "a killed child: exit $got, expected 1"; fi
    has "$OUT" '"status": "crash",' "a child killed by SIGKILL is a crash"
    has "$OUT" '"message": "killed by SIGKILL",' "the signal named"
    if grep -q '"status": "oom"' "$OUT"; then bad "SIGKILL without evidence called oom"; else ok; fi
    sleep 0.2 # SIGKILL delivered; a zombie waiting for init is dead enough
    if ps -o stat= -p "$cc" | grep -qv Z; then bad "the killed child's compiler survived it"; else ok; fi
else
    bad "the run started no child with a compiler"
fi
no_litter "a killed child"

expect 1 "an allocation failure" env TCBENCH_TEST_FAULT=oom:first "$EXE" run "$TMP/suite.yaml" \
    $FAST -o "$TMP/out/oom.json"
has "$TMP/out/oom.json" '"status": "oom",' "an allocation failure is oom"
no_litter "an allocation failure"

# --- oom on evidence: a SIGKILL while the cgroup's oom_kill counter rose ---------
# a stand-in cgroup file system with this cgroup's counter files (v2's
# memory.events where /proc/self/cgroup has a "0::PATH" line, v1's root
# memory.oom_control, which a "memory" line falls back to)
CG="$TMP/cg"
counters="$CG/memory/memory.oom_control"
v2=$(sed -n 's/^0:://p' /proc/self/cgroup)
if [ -n "$v2" ] && [ "$v2" != / ]; then counters="$counters $CG$v2/memory.events"; fi
for f in $counters; do
    mkdir -p "$(dirname "$f")" && printf 'oom_kill_disable 0\noom_kill 3\n' >"$f"
done
OUT="$TMP/out/oomkill.json"
TCBENCH_CGROUP_ROOT="$CG" TCBENCH_CC="$TMP/hangcc" "$EXE" run "$TMP/suite.yaml" $FAST \
    --timeout 60 -o "$OUT" >"$TMP/stdout" 2>"$TMP/stderr" &
BG=$!
if child=$(child_of "$BG") && child_of "$child" >/dev/null; then
    for f in $counters; do printf 'oom_kill_disable 0\noom_kill 4\n' >"$f"; done
    kill -9 "$child"
    wait "$BG"
    BG=
    has "$OUT" '"status": "oom",' "a SIGKILL while the counter rose is oom"
    has "$OUT" "\"message\": \"killed by the kernel's OOM killer \\(cgroup oom_kill 3 -> 4\\)\"," \
        "the evidence named"
else
    bad "the run started no child with a compiler"
fi
no_litter "a child the OOM killer killed"

# --- a timeout kills the child's process group ----------------------------------
OUT="$TMP/out/hang.json"
TCBENCH_TEST_FAULT=hang-child:first "$EXE" run "$TMP/suite.yaml" $FAST --timeout 1 -o "$OUT" \
    >"$TMP/stdout" 2>"$TMP/stderr" &
BG=$!
child=$(child_of "$BG")
wait "$BG"
got=$?
BG=
if [ "$got" -eq 1 ]; then ok; else bad "a timeout: exit $got, expected 1"; fi
has "$OUT" '"status": "timeout",' "timeout recorded"
if [ -z "$child" ]; then
    bad "the hanging run started no child"
else
    sleep 0.2 # SIGKILL is delivered, the orphan reaped by init
    if pgrep -g "$child" -f "sleep 300" >/dev/null; then
        bad "the timed-out child's sleep 300 survived it"
    else
        ok
    fi
fi
no_litter "a timeout"

# --- a parent killed while writing: its OUTPUT.tmp.PID goes with the next run ---
OUT="$TMP/out/again.json"
sh -c 'exit 0' &
dead=$!
wait "$dead"
: >"$OUT.tmp.$dead"
: >"$OUT.tmp.x$dead"
expect 0 "the run after a killed one" run -o "$OUT"
if [ -e "$OUT.tmp.$dead" ]; then bad "the dead writer's $OUT.tmp.$dead stayed"; else ok; fi
if [ -e "$OUT.tmp.x$dead" ]; then ok; else bad "a file not named OUTPUT.tmp.<digits> removed"; fi
rm -f "$OUT.tmp.x$dead"
if [ -e "$OUT.lock" ]; then bad "the lock file stayed after the run"; else ok; fi
no_litter "a run after a killed one"

# --- outputs refused before anything is measured ------------------------------
refused "-o a directory" "^tcbench run: $TMP/out: is a directory" run -o "$TMP/out"
if [ "$(id -u)" -eq 0 ]; then
    echo "litter: skipping the read-only cases: root writes through permissions" >&2
else
    mkdir "$TMP/ro" && chmod 555 "$TMP/ro"
    refused "-o in a read-only directory" "^tcbench run: $TMP/ro/x.json: cannot write beside it: .*Permission denied" \
        run -o "$TMP/ro/x.json"
    refused "-o under a read-only directory" "^tcbench run: mkdir $TMP/ro/sub: Permission denied" \
        run -o "$TMP/ro/sub/x.json"
    : >"$TMP/out/ro.json" && chmod 444 "$TMP/out/ro.json"
    refused "-o a read-only file" "^tcbench run: $TMP/out/ro.json: cannot replace it: Permission denied" \
        run -o "$TMP/out/ro.json"
    rm -f "$TMP/out/ro.json"
fi
# a second run on the same output while the first measures
OUT="$TMP/out/twice.json"
TCBENCH_TEST_FAULT=hang:first "$EXE" run "$TMP/suite.yaml" $FAST --timeout 60 -o "$OUT" \
    >/dev/null 2>&1 &
BG=$!
if child_of "$BG" >/dev/null; then
    refused "a second run on the same -o" \
        "^tcbench run: $OUT is being written by another tcbench run \(pid $BG; lock $OUT.lock\)$" \
        run -o "$OUT"
else
    bad "the first run started no child"
fi
kill -9 "$BG"
wait "$BG"
BG=
# its lock outlives it (killed), with no holder: the next run takes it
expect 0 "a run after a killed holder of the lock" run -o "$OUT"
rm -rf "$TMP/t"/* # what the killed parent left: only SIGKILL can

# --- an unusable calibration is said, in calibrate's words --------------------
mkdir -p "$XDG_CACHE_HOME/tcbench"
echo '{"calibrations": [' >"$XDG_CACHE_HOME/tcbench/calibration.json"
expect 0 "a run with a corrupted calibration" run -o "$TMP/out/calib.json"
has "$TMP/stderr" "^tcbench run: warning: $XDG_CACHE_HOME/tcbench/calibration.json:[0-9]+:[0-9]+: calibration file unreadable: .*; host.calibration is null$" \
    "the corrupted calibration said"
has "$TMP/out/calib.json" '"calibration": null' "host.calibration null"
rm "$XDG_CACHE_HOME/tcbench/calibration.json"
expect 0 "a run without a calibration" run -o "$TMP/out/calib.json"
if grep -v '^tcbench run: warning: load average' "$TMP/stderr" | grep -q .; then
    bad "a missing calibration is normal, yet: $(cat "$TMP/stderr")"
else
    ok
fi
chmod 777 "$XDG_CACHE_HOME/tcbench"
expect 0 "a run with an unsafe cache directory" run -o "$TMP/out/calib.json"
has "$TMP/stderr" '^tcbench run: warning: kernel cache .* is writable by other users' \
    "the unsafe directory said"
said=$(sed -n 's/^tcbench run: warning: \(.*\); host.calibration is null$/\1/p' "$TMP/stderr")
expect 2 "calibrate with an unsafe cache directory" "$EXE" calibrate --threads 1
if [ -n "$said" ] && [ "$(cat "$TMP/stderr")" = "tcbench calibrate: $said" ]; then
    ok
else
    bad "calibrate's words differ from run's: '$(cat "$TMP/stderr")' and '$said'"
fi
chmod 700 "$XDG_CACHE_HOME/tcbench"
no_litter "the calibration runs"

sh_lib_end litter
