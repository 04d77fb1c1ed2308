#!/bin/sh
# End-to-end tests of the tcbench command line: the smoke suite runs clean
# in eager and compiled mode, the results JSON has the documented fields
# (docs/results-schema.md), a failing compiler ends compiled entries
# fail_to_run, bad usage exits 2 with one line, every model and suite in the
# tree checks.
# Needs TCBENCH_EXE (the binary) and TCBENCH_SOURCE_DIR (the source tree);
# tests/meson.build sets both. POSIX sh and grep only.

EXE=${TCBENCH_EXE:?set TCBENCH_EXE to the tcbench binary}
SRC=${TCBENCH_SOURCE_DIR:?set TCBENCH_SOURCE_DIR to the source tree}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tcbench-e2e-XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
unset TCBENCH_TEST_FAULT TCBENCH_TEST_NOISE TCBENCH_TEST_POISON TCBENCH_MODELS TCBENCH_SUITES_DIR NO_COLOR TCBENCH_CC \
    TCBENCH_LOG
# every kill switch off: the results record those in effect (config.disabled)
for v in $(env | sed -n 's/^\(TCBENCH_DISABLE_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
# the kernel cache, the calibration and the runner's temporary caches stay in here
export XDG_CACHE_HOME="$TMP/cache" TMPDIR="$TMP"

# counters, expect, has, one_line
. "$SRC/tests/sh_lib.sh"

# usage_error DESC PATTERN CMD...: exit 2, exactly one line on stderr matching PATTERN
usage_error() {
    desc=$1
    pattern=$2
    shift 2
    expect 2 "$desc" "$@"
    one_line "$pattern" "$desc"
}

# --- version and help -------------------------------------------------------
expect 0 "--version" "$EXE" --version
has "$TMP/stdout" '^tcbench [0-9]+\.[0-9]+\.[0-9]+ \(git ' "--version"
expect 0 "--help" "$EXE" --help
has "$TMP/stdout" '^usage: tcbench' "--help"
for cmd in run list check calibrate; do
    expect 0 "$cmd --help" "$EXE" "$cmd" --help
    has "$TMP/stdout" "^usage: tcbench $cmd" "$cmd --help"
done
expect 0 "run --help" "$EXE" run --help
for opt in --only --filter --exclude --size --batch-size --threads --repeat --timeout --seed \
    --output --mode --precision --workload --device --no-accuracy --dump --quiet --help \
    --grad-scaler --amp-dtype --attention --tf32 --flush-l2 --warmup --min-time --max-time --pin; do
    has "$TMP/stdout" "$opt" "run --help lists $opt"
done
has "$TMP/stdout" "captured" "run --help names the modes"
expect 0 "calibrate --help" "$EXE" calibrate --help
has "$TMP/stdout" "--threads" "calibrate --help lists --threads"

# --- bad usage: exit 2, one line naming the problem ---------------------------
usage_error "unknown command" "unknown command 'frobnicate'" "$EXE" frobnicate
expect 2 "no command" "$EXE"
usage_error "--repeat 0" "--repeat 0" "$EXE" run --repeat 0
usage_error "--threads abc" "--threads abc" "$EXE" run --threads abc
usage_error "--timeout -1" "--timeout -1" "$EXE" run --timeout -1
usage_error "--seed x" "--seed x" "$EXE" run --seed x
usage_error "--batch-size 0" "--batch-size 0" "$EXE" run --batch-size 0
usage_error "--warmup 0" "--warmup 0: must be between 1 and" "$EXE" run --warmup 0
usage_error "--min-time -1" "--min-time -1: expected seconds" "$EXE" run --min-time -1
usage_error "--max-time 0" "--max-time 0: expected seconds" "$EXE" run --max-time 0
usage_error "--min-time above --max-time" "--min-time 2: above --max-time 1" "$EXE" run \
    --min-time 2 --max-time 1
usage_error "missing value" "'--repeat' needs a value" "$EXE" run --repeat
usage_error "unknown option" "unknown option '--frobnicate'" "$EXE" run --frobnicate
usage_error "unknown short option" "unknown option '-z'" "$EXE" run -z
usage_error "value for a flag" "option '--quiet' takes no value" "$EXE" run --quiet=3
usage_error "bad --filter" "--filter '\(': bad regular expression" "$EXE" run --filter '('
usage_error "bad --exclude" "--exclude '\[': bad regular expression" "$EXE" run --exclude '['
usage_error "--mode bogus" "--mode bogus: unknown mode" "$EXE" run --mode eager,bogus
usage_error "--workload bogus" "--workload bogus" "$EXE" run --workload bogus
usage_error "--only nosuch" "--only nosuch" "$EXE" run "$SRC/suites/smoke.yaml" --only nosuch
usage_error "missing suite" "nosuch\.yaml" "$EXE" run "$TMP/nosuch.yaml"
usage_error "list without suite" "no SUITE" "$EXE" list
usage_error "list bad option" "unknown option '--bogus'" "$EXE" list --bogus
usage_error "check without file" "no FILE" "$EXE" check
usage_error "check bad option" "unknown option '--bogus'" "$EXE" check --bogus
usage_error "calibrate bad option" "unknown option '--bogus'" "$EXE" calibrate --bogus
usage_error "calibrate --threads 0" "--threads 0" "$EXE" calibrate --threads 0

# --- check: every model and suite in the tree, silently -----------------------
# (but for the one line a case with a layer not built yet gets: the zoo's
# Reformer and BigBird, model_fail_to_load as the study left them out)
for f in "$SRC"/models/*.yaml "$SRC"/suites/*.yaml; do
    expect 0 "check $f" "$EXE" check "$f"
    if grep -v "^$f: case '[A-Za-z0-9_]*': model_fail_to_load: .* is not built yet (" \
        "$TMP/stdout" | grep -q . || [ -s "$TMP/stderr" ]; then
        bad "check $f was not silent"
    else
        ok
    fi
done
expect 0 "check the Hugging Face suite" "$EXE" check "$SRC/suites/huggingface.yaml"
has "$TMP/stdout" "case 'Reformer': model_fail_to_load: .*'lsh_attention' is not built yet" \
    "Reformer's unbuilt layer named"
[ "$(wc -l <"$TMP/stdout")" -eq 2 ] && ok || bad "two cases of the Hugging Face suite do not build"
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

# --- run the smoke suite: its defaults, eager and compiled ---------------------
OUT="$TMP/res/out.json"
expect 0 "run smoke" "$EXE" run --device cpu "$SRC/suites/smoke.yaml" --repeat 3 --max-time 0.3 \
    -o "$OUT"
has "$TMP/stdout" \
    '^case +mode +status +median ms +noise +speedup \[95% CI\] +compile s +kernels +peak MiB +compression +rel-err' \
    "run table header"
has "$TMP/stdout" '^mlp +eager +ok ' "eager row"
has "$TMP/stdout" '^mlp +compiled +pass +[0-9.]+ +~?[0-9.]+% +[0-9.]+x \[[0-9.]+, [0-9.]+\] +[0-9.]+/[0-9.]+ ' \
    "compiled row with noise, speedup and compile times"
# one line per mode x precision x workload; on a busy machine every entry
# may be unstable and left out
has "$TMP/stdout" \
    "^compiled fp32 infer: pass rate $smoke_cases/$smoke_cases \(100%\), geomean speedup ([0-9.]+x|- \(every passing case unstable\))" \
    "summary line"
has "$TMP/stdout" "results: $OUT\$" "run names the results"
has "$TMP/stdout" '^total wall time' "run total time"
has "$TMP/stderr" '^\[1/[0-9]+\] mlp \[eager\]: ok' "plain progress line when not a terminal"
has "$TMP/stderr" '^\[2/[0-9]+\] mlp \[compiled\]: pass .*speedup' "compiled progress line"
if [ -f "$OUT" ]; then
    ok
    n=$(grep -c '"status":' "$OUT")
    nok=$(grep -c '"status": "ok"' "$OUT")
    npass=$(grep -c '"status": "pass"' "$OUT")
    if [ "$n" -eq $((2 * smoke_cases)) ] && [ "$nok" -eq "$smoke_cases" ] &&
        [ "$npass" -eq "$smoke_cases" ]; then
        ok
    else
        bad "smoke: $nok ok and $npass pass of $n entries, $smoke_cases of each expected"
        grep -E '"(name|mode|status|message)":' "$OUT" | sed 's/^/  | /' >&2
    fi
    for key in schema_version tool name version git_commit timestamp command_line host hostname \
        os cpu_model cores threads_used blas config onednn cpu_flags avx2 avx512f f16c fma \
        suites size seed repeat threads timeout_s modes precisions workloads device cases \
        median_s q1_s q3_s min_s max_s mean_s stddev_s cv mad_s outliers n checked rel_l2 \
        max_abs rmse wall_s tolerance calibration dump_dir grad_scaler attention vs_eager_max_abs \
        gpus tf32 flush_l2 device_auto warmup min_time_s max_time_s pin order disabled \
        vs_eager_rel_l2 rmse_vs_fp64 eager_rmse_vs_fp64 rule cold_s warm_s cache_hit median \
        ci95_lo ci95_hi \
        intensity achieved_GFLOPs achieved_GBps; do
        has "$OUT" "\"$key\":" "results field $key"
    done
    # keys only a case object has: one per case
    for key in suite model family mode precision workload batch params status message samples_s \
        stats iterations_per_sample param_count peak_bytes kernels accuracy compile \
        arena_bytes speedup compression_ratio roofline clock host_samples_s stability noise \
        ci_rel_width rounds timed_s nivcsw run_delay_s steal_s load_start load_end one_thread_s \
        unstable reasons; do
        c=$(grep -c "\"$key\":" "$OUT")
        if [ "$c" -eq "$n" ]; then ok; else bad "results field $key: $c times, $n cases"; fi
    done
    # once in the case, once in its roofline
    for key in flops min_bytes; do
        c=$(grep -c "\"$key\":" "$OUT")
        if [ "$c" -eq $((2 * n)) ]; then ok; else bad "results field $key: $c times, $n cases"; fi
    done
    # with more than one thread, eager is also timed on one (the stall check)
    if grep -q '"threads": 1,' "$OUT"; then ok; else
        has "$OUT" '"one_thread_s": [0-9]' "eager's one-thread median recorded"
    fi
    has "$OUT" '"schema_version": 1,' "schema version 1"
    has "$OUT" '"mode": "eager",' "mode eager"
    has "$OUT" '"mode": "compiled",' "mode compiled"
    has "$OUT" '"cache_hit": true' "warm compile hit the cache"
    has "$OUT" '"rule": "(allclose|rmse)"' "accuracy rule recorded"
    if grep -q '"cache_hit": false' "$OUT"; then bad "a warm compile missed the cache"; else ok; fi
    has "$OUT" '"device": "cpu",' "device cpu"
    has "$OUT" '"repeat": 3,' "repeat recorded"
    has "$OUT" '"warmup": null,' "warm-up until settled by default"
    has "$OUT" '"max_time_s": 0.3,' "--max-time recorded"
    has "$OUT" '"pin": false,' "no pinning by default"
    has "$OUT" '"order": "rotate",' "the rotating order recorded"
    has "$OUT" '"disabled": \[\]' "no kill switch in effect"
    has "$OUT" '"timestamp": "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z"' "timestamp"
    lines=$(wc -l <"$OUT.jsonl") # the header, then one line per case
    if [ "$lines" -eq $((n + 1)) ]; then ok; else bad "journal has $lines lines, $n cases"; fi
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
has "$TMP/default.json" '"min_time_s": 0.1,' "--min-time's default recorded"
has "$TMP/default.json" '"max_time_s": 1(\.0)?,' "--max-time's default recorded"
# -q: no progress; the busy-machine warning alone may remain
if grep -v '^tcbench run: warning: load average' "$TMP/stderr" | grep -q .; then
    bad "-q still wrote progress to stderr"
    sed 's/^/  | /' "$TMP/stderr" >&2
else
    ok
fi
# the busy-machine warning under -q: a machine made busy for it (one
# spinning process per core) pushes the load average up only slowly, so
# what is checked is that -q keeps the warning whenever the load calls for it
load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null)
cores=$(getconf _NPROCESSORS_ONLN)
if [ -n "$load" ] && awk "BEGIN { exit !($load > $cores - 1 + 0.75 + 0.2) }"; then
    expect 0 "run -q on a busy machine" env TCBENCH_SUITES_DIR="$TMP/suites" "$EXE" run \
        --repeat 1 --threads 1 -q -o "$TMP/busy.json"
    has "$TMP/stderr" '^tcbench run: warning: load average' "-q keeps the busy-machine warning"
fi

# --warmup, --min-time, --max-time, --pin and the kill switches: recorded
expect 0 "run with the budget's options" env TCBENCH_DISABLE_LAYOUTS=1 TCBENCH_DISABLE_REMAT=0 \
    "$EXE" run "$TMP/suites/smoke.yaml" --only first --warmup 5 --min-time 0 --max-time 0.5 \
    --pin --repeat 2 -q -o "$TMP/budget.json"
has "$TMP/budget.json" '"warmup": 5,' "--warmup recorded"
has "$TMP/budget.json" '"min_time_s": 0(\.0)?,' "--min-time recorded"
has "$TMP/budget.json" '"max_time_s": 0.5,' "--max-time recorded"
has "$TMP/budget.json" '"pin": true,' "--pin recorded"
if tr -d ' \n' <"$TMP/budget.json" |
    grep -q '"disabled":\["TCBENCH_DISABLE_LAYOUTS=1","TCBENCH_DISABLE_REMAT=0"\]'; then
    ok
else
    bad "config.disabled does not list the two kill switches, sorted"
fi
if grep -q 'pthread_setaffinity_np\|sched_getaffinity' "$TMP/stderr"; then
    bad "--pin failed: $(cat "$TMP/stderr")"
else
    ok
fi

# TCBENCH_TEST_NOISE: the stretched entry is unstable, marked in the table,
# left out of the geomean and named under it; the results say why
expect 0 "run with injected noise" env TCBENCH_TEST_NOISE=first:compiled "$EXE" run \
    "$TMP/suites/smoke.yaml" --device cpu --mode eager,compiled --max-time 0.3 -o "$TMP/noise.json"
has "$TMP/stdout" '^first +compiled +pass +[0-9.]+ +~[0-9.]+% ' "the unstable row marked ~"
has "$TMP/stdout" '^\(~: unstable, left out of the geomeans' "the marker explained"
has "$TMP/stdout" \
    '^compiled fp32 infer: pass rate 2/2 \(100%\), geomean speedup ([0-9.]+x over 1 passing case \(1 unstable left out\)|- \(every passing case unstable\) \(2 unstable left out\))' \
    "the unstable entry left out of the geomean"
has "$TMP/stdout" '^warning: first \[compiled\]: unstable, left out of the geomean: noise [0-9.]+% > 10%' \
    "the unstable entry named with its reason"
has "$TMP/stderr" '\] first \[compiled\]: pass .*, unstable$' "the progress line says unstable"
has "$TMP/noise.json" '"unstable": true,' "unstable recorded"
has "$TMP/noise.json" '"noise [0-9.]+% > 10%"' "the reason recorded"

# TCBENCH_TEST_POISON: with every intermediate NaN before each step (the
# arena, the fused mode's buffers), a kernel that reads memory it did not
# write turns the step NaN; AMP training of a convnet and a transformer passes
expect 0 "run with poisoned memory" env TCBENCH_TEST_POISON=1 "$EXE" run "$SRC/suites/smoke.yaml" \
    --only resnet,gpt2 --mode fused,compiled --precision amp --workload train --repeat 2 \
    --processes 1 --min-time 0 --max-time 0.01 -o "$TMP/poison.json"
has "$TMP/stdout" '^fused amp train: pass rate 2/2 ' "fused passes on poisoned memory"
has "$TMP/stdout" '^compiled amp train: pass rate 2/2 ' "compiled passes on poisoned memory"

# --device: cuda asks the driver first, auto (the default) takes cuda when a
# usable GPU is there and cpu otherwise. Whether this machine has one: with
# a GPU, the unknown case is the error; without, the driver's reason.
expect 2 "--device cuda --only nosuch" "$EXE" run --device cuda --only nosuch
if grep -q -- "--only nosuch" "$TMP/stderr"; then dev=cuda; else dev=cpu; fi
if [ "$dev" = cpu ]; then # no GPU (CI): one line with the reason, exit 2
    usage_error "--device cuda" "^tcbench run: --device cuda: " "$EXE" run --device cuda
else # the CUDA backend refuses bf16: at once, before anything runs
    usage_error "--device cuda --amp-dtype bf16" "^tcbench run: --amp-dtype bf16: .*--device cpu" \
        "$EXE" run --device cuda --amp-dtype bf16
fi
expect 0 "run --device auto" "$EXE" run "$TMP/suites/smoke.yaml" --only first --device auto \
    --repeat 1 -q -o "$TMP/auto.json"
has "$TMP/auto.json" "\"device\": \"$dev\"," "--device auto ran on $dev"
has "$TMP/auto.json" "\"chose\": \"$dev\"," "--device auto's choice recorded"
has "$TMP/auto.json" '"tf32": false,' "tf32 off by default"
has "$TMP/auto.json" '"flush_l2": false,' "no L2 flush by default"
has "$TMP/auto.json" "\"clock\": \"$([ $dev = cuda ] && echo cuda_events || echo host)\"," \
    "the clock named"
usage_error "--device tpu" "--device tpu: unknown device; expected one of cpu, cuda, auto" \
    "$EXE" run --device tpu
# the GPU's settings on the CPU: refused, naming the option and the device
usage_error "--tf32 on the cpu" "^tcbench run: --tf32: .*this run is on the cpu" \
    "$EXE" run --device cpu --tf32
usage_error "--flush-l2 on the cpu" "^tcbench run: --flush-l2: .*this run is on the cpu" \
    "$EXE" run --device cpu --flush-l2
if [ "$dev" = cpu ]; then # auto chose the cpu: the message says why
    usage_error "--flush-l2 with --device auto" "--flush-l2: .*--device auto chose cpu: " \
        "$EXE" run --flush-l2
fi

# --no-accuracy: compiled entries say their speedup is not validated
expect 0 "run --no-accuracy" "$EXE" run "$TMP/suites/smoke.yaml" --only first --mode eager,compiled \
    --device cpu --no-accuracy --repeat 1 -o "$TMP/na.json"
has "$TMP/na.json" 'accuracy not checked \(--no-accuracy\)' "unvalidated speedup said so"

# --batch-sizes: one entry per case and batch size
expect 0 "run --batch-sizes" "$EXE" run "$TMP/suites/smoke.yaml" --only first --batch-sizes 1,4 \
    --device cpu --repeat 1 -o "$TMP/sweep.json"
has "$TMP/sweep.json" '"batch": 1,' "sweep batch 1"
has "$TMP/sweep.json" '"batch": 4,' "sweep batch 4"
usage_error "--batch-sizes with a word" "batch-sizes" "$EXE" run --batch-sizes 1,x

expect 1 "run with a crash" env TCBENCH_TEST_FAULT=crash:second "$EXE" run --device cpu \
    "$TMP/suites/smoke.yaml" --repeat 1 -o "$TMP/crash.json"
has "$TMP/crash.json" '"status": "crash",' "crash recorded"
has "$TMP/crash.json" '"message": "killed by SIGSEGV",' "crash signal named"
has "$TMP/crash.json" '"status": "ok",' "the other case still ran"
has "$TMP/stdout" '^second: crash: killed by SIGSEGV' "crash explained under the table"
# --processes: the samples of every process pooled, their medians recorded;
# a crash in a later process fails the entry and keeps what was measured
expect 0 "run --processes 2" "$EXE" run "$TMP/suites/smoke.yaml" --only first --device cpu \
    --mode eager,compiled --repeat 10 --max-time 0.3 --processes 2 -q -o "$TMP/procs.json"
has "$TMP/procs.json" '"processes": 2,' "processes recorded"
n=$(tr -d ' \n' <"$TMP/procs.json" | grep -o '"process_medians_s":\[[0-9.e+-]*,[0-9.e+-]*\]' | wc -l)
if [ "$n" = 2 ]; then ok; else bad "two process medians per entry: got $n entries with two"; fi
expect 1 "run with a crash in a later process" env TCBENCH_TEST_FAULT=crash-later:first "$EXE" \
    run "$TMP/suites/smoke.yaml" --only first --device cpu --mode eager,compiled --repeat 10 \
    --max-time 0.3 --processes 2 -q -o "$TMP/later.json"
has "$TMP/later.json" '"message": "process 2: killed by SIGSEGV",' "the later crash named by process"
has "$TMP/later.json" '"status": "crash",' "the later crash is the entry's status"
n=$(tr -d ' \n' <"$TMP/later.json" | grep -o '"samples_s":\[[0-9]' | wc -l)
if [ "$n" = 2 ]; then ok; else bad "the first process's samples kept: $n entries with samples"; fi
usage_error "--processes 0" "--processes 0: must be between 1 and" "$EXE" run --processes 0
expect 1 "run with a hang" env TCBENCH_TEST_FAULT=hang:first "$EXE" run --device cpu \
    "$TMP/suites/smoke.yaml" --only first --repeat 1 --timeout 1 -o "$TMP/hang.json"
has "$TMP/hang.json" '"status": "timeout",' "timeout recorded"

# --- compiled modes on the tiny suite: a failing compiler, --dump -------------
expect 1 "run with a failing compiler" env TCBENCH_CC=false "$EXE" run "$TMP/suites/smoke.yaml" \
    --device cpu --only first --mode compiled,fused --repeat 1 -o "$TMP/cc.json"
has "$TMP/cc.json" '"status": "fail_to_run",' "fail_to_run recorded"
has "$TMP/cc.json" "the C compiler 'false' failed" "the compiler named"
has "$TMP/cc.json" '"status": "ok",' "eager still ran"
has "$TMP/stdout" "^first \[compiled\]: fail_to_run: the C compiler 'false' failed" \
    "fail_to_run explained under the table"
has "$TMP/stdout" '^fused fp32 infer: pass rate 0/1 \(0%\)' "pass rate counts the failure"
expect 0 "run --dump" "$EXE" run "$TMP/suites/smoke.yaml" --only first --mode captured \
    --device cpu --repeat 1 --dump "$TMP/dump" -q -o "$TMP/dump.json"
if [ -s "$TMP/dump/first/captured/tiny.c" ] && [ -s "$TMP/dump/first/captured/tiny.graph.txt" ]; then
    ok
else
    bad "--dump wrote no source under $TMP/dump/first/captured"
fi
if ls "$TMP"/tcbench-kcache-* >/dev/null 2>&1; then bad "temporary kernel cache left"; else ok; fi

# --- training: the whole step, checked over two steps, both modes ------------
expect 0 "run --workload train" "$EXE" run "$SRC/suites/smoke.yaml" --only mlp --workload train \
    --device cpu --mode eager,compiled,captured --repeat 2 -o "$TMP/train.json"
has "$TMP/train.json" '"workload": "train",' "training recorded"
has "$TMP/train.json" '"grad_scaler": false,' "no grad scaler by default"
has "$TMP/train.json" '"status": "pass",' "compiled training passes"
has "$TMP/stdout" '^mlp +captured +pass' "captured training passes"
# dynamic loss scaling in AMP training (docs/amp.md): runs, and the results say so
expect 0 "run --precision amp --workload train --grad-scaler" "$EXE" run "$SRC/suites/smoke.yaml" \
    --device cpu --only mlp --precision amp --workload train --grad-scaler --mode eager,compiled \
    --repeat 1 --no-accuracy -o "$TMP/scaler.json"
has "$TMP/scaler.json" '"grad_scaler": true,' "--grad-scaler recorded"
has "$TMP/scaler.json" '"precision": "amp",' "amp training ran"
has "$TMP/stdout" '^mlp +compiled +pass' "compiled amp training with the scaler passes"
has "$TMP/scaler.json" '"amp_dtype": "fp16",' "fp16 is amp's default dtype"
# --amp-dtype bf16 (docs/amp.md): amp in bfloat16, checked and recorded
expect 0 "run --precision amp --amp-dtype bf16" "$EXE" run "$SRC/suites/smoke.yaml" --only mlp \
    --device cpu --precision amp --amp-dtype bf16 --mode eager,compiled --repeat 1 \
    -o "$TMP/bf16.json"
has "$TMP/bf16.json" '"amp_dtype": "bf16",' "--amp-dtype bf16 recorded"
has "$TMP/bf16.json" '"precision": "amp",' "bf16 amp ran"
has "$TMP/stdout" '^mlp +compiled +pass' "compiled bf16 amp passes"
usage_error "--amp-dtype int8" "--amp-dtype int8: expected fp16 or bf16" "$EXE" run \
    --amp-dtype int8
# --attention sdpa (docs/cli.md): one fused attention op a layer, checked and recorded
expect 0 "run --attention sdpa" "$EXE" run "$SRC/suites/smoke.yaml" --only gpt2 --device cpu \
    --attention sdpa --mode eager,compiled --repeat 1 -o "$TMP/sdpa.json"
has "$TMP/sdpa.json" '"attention": "sdpa",' "--attention sdpa recorded"
has "$TMP/stdout" '^gpt2 +compiled +pass' "compiled gpt2 under --attention sdpa passes"
usage_error "--attention flash" "--attention flash: expected math or sdpa" "$EXE" run \
    --attention flash
cat >"$TMP/suites/sgd.yaml" <<EOF
name: sgd
defaults: {optimizer: {sgd: {lr: 0.05, momentum: 0.9, nesterov: true}}}
cases:
  - {name: mlp, model: $SRC/models/mlp.yaml, batch: 4, params: {features: 8, hidden: 16, classes: 4}}
EOF
expect 0 "run --workload train with sgd" "$EXE" run "$TMP/suites/sgd.yaml" --workload train \
    --device cpu --repeat 1 -o "$TMP/sgd.json"
has "$TMP/sgd.json" '"status": "pass",' "sgd training passes"
expect 1 "train a model without a loss" "$EXE" run "$TMP/suites/smoke.yaml" --only first \
    --device cpu --workload train --repeat 1 -o "$TMP/noloss.json"
has "$TMP/noloss.json" 'the model has no loss to train' "no loss said so"

# --- mixed precision: every smoke model, inference and training, eager and
# compiled, each check passing (exit 0); amp rows count their cast kernels.
# Not mobilenet_v2's amp training: its eager step is above the rounded-values
# baseline against fp64 (docs/amp.md, "Known failures")
# (these check amp, not timing: the shortest measurement that still runs every step)
expect 0 "run --precision amp (smoke suite)" "$EXE" run "$SRC/suites/smoke.yaml" --precision amp \
    --device cpu --workload infer --mode eager,compiled --repeat 1 --warmup 1 --min-time 0 \
    -o "$TMP/amp.json"
has "$TMP/amp.json" '"cast_kernels": [1-9]' "cast kernels counted"
has "$TMP/stdout" '^mobilenet_v2 +compiled +pass' "compiled amp inference passes"
has "$TMP/stdout" 'amp rows: kernels/casts' "the table says what amp's kernels column holds"
expect 0 "run --precision amp --workload train (smoke suite)" "$EXE" run --device cpu \
    "$SRC/suites/smoke.yaml" --precision amp --workload train --mode eager,compiled --repeat 1 \
    --warmup 1 --min-time 0 --only mlp,gpt2,bert,t5,llama,resnet,vit -o "$TMP/amp_train.json"
has "$TMP/stdout" '^resnet +compiled +pass' "compiled amp training passes on resnet"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
