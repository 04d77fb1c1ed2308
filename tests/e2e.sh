#!/bin/sh
# End-to-end tests of the tcbench command line: the smoke suite runs clean,
# the results JSON has the documented fields (docs/results-schema.md), bad
# usage exits 2 with one line, every model and suite in the tree checks.
# Needs TCBENCH_EXE (the binary) and TCBENCH_SOURCE_DIR (the source tree);
# tests/meson.build sets both. POSIX sh and grep only.

EXE=${TCBENCH_EXE:?set TCBENCH_EXE to the tcbench binary}
SRC=${TCBENCH_SOURCE_DIR:?set TCBENCH_SOURCE_DIR to the source tree}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tcbench-e2e-XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
unset TCBENCH_TEST_FAULT TCBENCH_MODELS TCBENCH_SUITES_DIR NO_COLOR

pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() {
    fail=$((fail + 1))
    echo "FAIL: $*" >&2
}

# expect CODE DESC CMD...: run CMD, keep its output in $TMP/stdout and $TMP/stderr
expect() {
    want=$1
    desc=$2
    shift 2
    "$@" >"$TMP/stdout" 2>"$TMP/stderr"
    got=$?
    if [ "$got" -eq "$want" ]; then
        ok
    else
        bad "$desc: exit $got, expected $want"
        sed 's/^/  | /' "$TMP/stderr" >&2
    fi
}

# usage_error DESC PATTERN CMD...: exit 2, exactly one line on stderr matching PATTERN
usage_error() {
    desc=$1
    pattern=$2
    shift 2
    expect 2 "$desc" "$@"
    lines=$(wc -l <"$TMP/stderr")
    if [ "$lines" -eq 1 ] && grep -Eq -- "$pattern" "$TMP/stderr"; then
        ok
    else
        bad "$desc: wanted one line matching '$pattern' on stderr, got:"
        sed 's/^/  | /' "$TMP/stderr" >&2
    fi
}

has() { # has FILE PATTERN DESC
    if grep -Eq -- "$2" "$1"; then ok; else bad "$3: no '$2' in $1"; fi
}

# --- version and help -------------------------------------------------------
expect 0 "--version" "$EXE" --version
has "$TMP/stdout" '^tcbench [0-9]+\.[0-9]+\.[0-9]+ \(git ' "--version"
expect 0 "--help" "$EXE" --help
has "$TMP/stdout" '^usage: tcbench' "--help"
for cmd in run list check; do
    expect 0 "$cmd --help" "$EXE" "$cmd" --help
    has "$TMP/stdout" "^usage: tcbench $cmd" "$cmd --help"
done
expect 0 "run --help" "$EXE" run --help
for opt in --only --filter --exclude --size --batch-size --threads --repeat --timeout --seed \
    --output --mode --precision --workload --device --no-accuracy --quiet --help; do
    has "$TMP/stdout" "$opt" "run --help lists $opt"
done

# --- bad usage: exit 2, one line naming the problem ---------------------------
usage_error "unknown command" "unknown command 'frobnicate'" "$EXE" frobnicate
expect 2 "no command" "$EXE"
usage_error "--repeat 0" "--repeat 0" "$EXE" run --repeat 0
usage_error "--threads abc" "--threads abc" "$EXE" run --threads abc
usage_error "--timeout -1" "--timeout -1" "$EXE" run --timeout -1
usage_error "--seed x" "--seed x" "$EXE" run --seed x
usage_error "--batch-size 0" "--batch-size 0" "$EXE" run --batch-size 0
usage_error "missing value" "'--repeat' needs a value" "$EXE" run --repeat
usage_error "unknown option" "unknown option '--frobnicate'" "$EXE" run --frobnicate
usage_error "unknown short option" "unknown option '-z'" "$EXE" run -z
usage_error "value for a flag" "option '--quiet' takes no value" "$EXE" run --quiet=3
usage_error "bad --filter" "--filter '\(': bad regular expression" "$EXE" run --filter '('
usage_error "bad --exclude" "--exclude '\[': bad regular expression" "$EXE" run --exclude '['
usage_error "--mode compiled" "^tcbench run: --mode compiled: not available in this build yet$" \
    "$EXE" run --mode compiled
usage_error "--mode bogus" "--mode bogus: unknown mode" "$EXE" run --mode eager,bogus
usage_error "--precision amp" "--precision amp: not available" "$EXE" run --precision amp
usage_error "--workload train" "--workload train: not available" "$EXE" run --workload train
usage_error "--device cuda" "--device cuda: not available" "$EXE" run --device cuda
usage_error "--only nosuch" "--only nosuch" "$EXE" run "$SRC/suites/smoke.yaml" --only nosuch
usage_error "missing suite" "nosuch\.yaml" "$EXE" run "$TMP/nosuch.yaml"
usage_error "list without suite" "no SUITE" "$EXE" list
usage_error "list bad option" "unknown option '--bogus'" "$EXE" list --bogus
usage_error "check without file" "no FILE" "$EXE" check
usage_error "check bad option" "unknown option '--bogus'" "$EXE" check --bogus

# --- check: every model and suite in the tree, silently -----------------------
for f in "$SRC"/models/*.yaml "$SRC"/suites/*.yaml; do
    expect 0 "check $f" "$EXE" check "$f"
    if [ -s "$TMP/stdout" ] || [ -s "$TMP/stderr" ]; then
        bad "check $f was not silent"
    else
        ok
    fi
done
cat >"$TMP/bad.yaml" <<'EOF'
name: bad
inputs:
  x: {shape: [$batch, 16]}
body:
  - linaer: {out: 4}
EOF
usage_error "check bad model" "bad\.yaml:5:[0-9]+: " "$EXE" check "$TMP/bad.yaml"

# --- list ------------------------------------------------------------------
expect 0 "list smoke" "$EXE" list "$SRC/suites/smoke.yaml"
has "$TMP/stdout" '^case +model +batch +params +param count +GFLOPs/step' "list header"
has "$TMP/stdout" '^mlp +mlp +16 ' "list mlp row"
smoke_cases=$(($(wc -l <"$TMP/stdout") - 1))
expect 0 "list --size small" "$EXE" list "$SRC/suites/smoke.yaml" --size small
usage_error "list --size nosuch" "nosuch" "$EXE" list "$SRC/suites/smoke.yaml" --size nosuch

# --- run the smoke suite ------------------------------------------------------
OUT="$TMP/res/out.json"
expect 0 "run smoke" "$EXE" run "$SRC/suites/smoke.yaml" --repeat 3 -o "$OUT"
has "$TMP/stdout" '^case +batch +status +median ms +IQR ms +cv % +kernels +peak MiB +GFLOP/s +rel-err' \
    "run table header"
has "$TMP/stdout" "results: $OUT\$" "run names the results"
has "$TMP/stdout" '^total wall time' "run total time"
has "$TMP/stderr" '^\[1/[0-9]+\] mlp: ok' "plain progress line when not a terminal"
if [ -f "$OUT" ]; then
    ok
    n=$(grep -c '"status":' "$OUT")
    nok=$(grep -c '"status": "ok"' "$OUT")
    if [ "$n" -eq "$smoke_cases" ] && [ "$nok" -eq "$n" ]; then
        ok
    else
        bad "smoke: $nok of $n cases ok, $smoke_cases expected"
        grep -E '"(name|status|message)":' "$OUT" | sed 's/^/  | /' >&2
    fi
    for key in schema_version tool name version git_commit timestamp command_line host hostname \
        os cpu_model cores threads_used blas config onednn cpu_flags avx2 avx512f f16c fma \
        suites size seed repeat threads timeout_s modes precisions workloads device cases \
        median_s q1_s q3_s min_s max_s mean_s stddev_s cv mad_s outliers n checked rel_l2 \
        max_abs rmse wall_s; do
        has "$OUT" "\"$key\":" "results field $key"
    done
    # keys only a case object has: one per case
    for key in suite model family mode precision workload batch params status message samples_s \
        stats iterations_per_sample param_count flops peak_bytes kernels accuracy; do
        c=$(grep -c "\"$key\":" "$OUT")
        if [ "$c" -eq "$n" ]; then ok; else bad "results field $key: $c times, $n cases"; fi
    done
    has "$OUT" '"schema_version": 1,' "schema version 1"
    has "$OUT" '"mode": "eager",' "mode eager"
    has "$OUT" '"device": "cpu",' "device cpu"
    has "$OUT" '"repeat": 3,' "repeat recorded"
    has "$OUT" '"timestamp": "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z"' "timestamp"
    lines=$(wc -l <"$OUT.jsonl")
    if [ "$lines" -eq "$n" ]; then ok; else bad "journal has $lines lines, $n cases"; fi
    if ls "$OUT".tmp.* >/dev/null 2>&1; then bad "temporary results file left"; else ok; fi
else
    bad "run smoke wrote no $OUT"
fi

# --- the default suite, a crash, -q ------------------------------------------
mkdir -p "$TMP/suites"
cat >"$TMP/suites/tiny.yaml" <<'EOF'
name: tiny
inputs:
  x: {shape: [$batch, 16]}
body:
  - linear: {out: 32}
  - relu: {}
  - linear: {out: 8}
EOF
cat >"$TMP/suites/smoke.yaml" <<'EOF'
name: e2e
defaults: {modes: [eager]}
cases:
  - {name: first, model: tiny.yaml, batch: 2}
  - {name: second, model: tiny.yaml, batch: 3}
EOF
expect 0 "run default suite" env TCBENCH_SUITES_DIR="$TMP/suites" "$EXE" run --repeat 1 -q \
    -o "$TMP/default.json"
has "$TMP/default.json" "\"$TMP/suites/smoke.yaml\"" "default suite from TCBENCH_SUITES_DIR"
if [ -s "$TMP/stderr" ]; then bad "-q still wrote to stderr"; else ok; fi

expect 1 "run with a crash" env TCBENCH_TEST_FAULT=crash:second "$EXE" run \
    "$TMP/suites/smoke.yaml" --repeat 1 -o "$TMP/crash.json"
has "$TMP/crash.json" '"status": "crash",' "crash recorded"
has "$TMP/crash.json" '"message": "killed by SIGSEGV",' "crash signal named"
has "$TMP/crash.json" '"status": "ok",' "the other case still ran"
has "$TMP/stdout" '^second: crash: killed by SIGSEGV' "crash explained under the table"
expect 1 "run with a hang" env TCBENCH_TEST_FAULT=hang:first "$EXE" run \
    "$TMP/suites/smoke.yaml" --only first --repeat 1 --timeout 1 -o "$TMP/hang.json"
has "$TMP/hang.json" '"status": "timeout",' "timeout recorded"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
