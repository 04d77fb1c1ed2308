#!/bin/sh
# End-to-end tests of tcbench report, compare and export on real runs of the
# smoke suite (--only mlp,gpt2 --repeat 10, to stay fast): the report's
# files and charts, the report without gnuplot on PATH (exit 0, exactly one
# warning line, tables and scripts kept), compare's exit codes (the same
# run twice passes; a different machine exits 2 unless --force; corrupt
# JSON exits 2 with FILE:LINE:COL; pass -> fail_accuracy exits 1; an entry
# made noisy passes, and exits 1 under --fail-on-noisy), and the
# Google Benchmark export; then the report of the hand-made fixture
# (tests/fixtures/report_fixture.json: a failed entry, an unstable one, a
# sweep, a precision that never passes and a kill switch) with every chart
# drawn, its export, and calibrate's one calibration per thread count. The
# reader's refusals: a directory or FIFO by name, and compare of a file with
# a sample that is no plausible time (report marks it invalid); and a run's
# journal (tests/gen_results.c --journal) with a cut line as input. A
# hand-written plan file (the memory-budget study): its report, and its
# refusals at FILE:LINE:COL. tcbench's results beside PyTorch's
# (tests/fixtures/side_tcbench.json, side_torch.json): the summary's
# section, the CSV column and the charts; compare of PyTorch's entries, a
# slower torch-compile a regression; run refuses the torch modes. Two
# separate runs are compared too, but only
# printed: on a shared machine load can move a median between runs by more
# than any threshold, and that is what the gate is for, not a test failure.
# Needs TCBENCH_EXE, TCBENCH_SOURCE_DIR and GEN_RESULTS (tests/meson.build
# sets them).
# POSIX sh, grep, sed, awk.

EXE=${TCBENCH_EXE:?set TCBENCH_EXE to the tcbench binary}
SRC=${TCBENCH_SOURCE_DIR:?set TCBENCH_SOURCE_DIR to the source tree}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tcbench-report-XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
unset TCBENCH_TEST_FAULT TCBENCH_MODELS TCBENCH_SUITES_DIR NO_COLOR TCBENCH_CC \
    TCBENCH_DISABLE_FUSION TCBENCH_DISABLE_CAPTURE TCBENCH_LOG
export XDG_CACHE_HOME="$TMP/cache" TMPDIR="$TMP"

# counters, expect, has, one_line
. "$SRC/tests/sh_lib.sh"

exists() { # exists PATH DESC
    if [ -e "$1" ]; then ok; else bad "$2: $1 is missing"; fi
}

# --- help -------------------------------------------------------------------
for cmd in report compare export; do
    expect 0 "$cmd --help" "$EXE" "$cmd" --help
    has "$TMP/stdout" "^usage: tcbench $cmd" "$cmd --help"
done
expect 0 "--help" "$EXE" --help
for cmd in report compare export; do has "$TMP/stdout" "^  $cmd " "tcbench --help lists $cmd"; done

# --- two real runs ------------------------------------------------------------
expect 0 "run a" "$EXE" run --only mlp,gpt2 --repeat 10 -q -o "$TMP/a.json"
expect 0 "run b" "$EXE" run --only mlp,gpt2 --repeat 10 -q -o "$TMP/b.json"

# --- report -------------------------------------------------------------------
expect 0 "report" "$EXE" report "$TMP/a.json" -o "$TMP/rep"
for f in summary.md results.csv index.html charts/geomean.gp charts/geomean.dat; do
    exists "$TMP/rep/$f" "report"
done
has "$TMP/rep/summary.md" '^\| Pass rate \| 100%, 2/2 \|$' "summary pass rate"
# blank when a loaded machine made the entry unstable: then it is named instead
if grep -Eq '^\| Geomean speedup \| [0-9]+\.[0-9][0-9]x \|$' "$TMP/rep/summary.md" ||
    grep -q 'Not in the geomean: .*(unstable' "$TMP/rep/summary.md"; then
    ok
else
    bad "summary geomean: neither a figure nor an unstable entry named"
fi
has "$TMP/rep/summary.md" '^Kill switches in effect' "summary names the kill switches (or none)"
# (and fp32 too, when a loaded machine left no stable fp32 entry)
has "$TMP/rep/summary.md" 'needs both: (no fp32, )?no AMP' "headline says AMP is missing"
has "$TMP/rep/results.csv" '^dev,name,batch_size,speedup,abs_latency,compilation_latency,' "csv"
has "$TMP/rep/results.csv" '^cpu,gpt2,2,[0-9.]+,[0-9.]+,[0-9.]+,' "csv compiled row"
if command -v gnuplot >/dev/null 2>&1; then
    for c in geomean speedup-compiled-fp32-infer-cpu compile-compiled-fp32-infer-cpu \
        memory-compiled-fp32-infer-cpu; do
        exists "$TMP/rep/charts/$c.png" "gnuplot drew"
        exists "$TMP/rep/charts/$c.svg" "gnuplot drew"
        size=$(wc -c <"$TMP/rep/charts/$c.png" 2>/dev/null || echo 0)
        if [ "$size" -gt 0 ] && [ "$size" -lt 204800 ]; then ok; else bad "$c.png: $size bytes"; fi
    done
    has "$TMP/rep/index.html" 'src="data:image/svg\+xml;base64,' "charts inline in index.html"
    if [ -s "$TMP/stderr" ]; then bad "report with gnuplot printed: $(cat "$TMP/stderr")"; else ok; fi
else
    echo "report_cli: gnuplot not on PATH here; the drawn charts are not checked"
fi

# --- report without gnuplot on PATH: exit 0, one warning, tables and scripts ---
mkdir "$TMP/nobin"
expect 0 "report without gnuplot" env PATH="$TMP/nobin" "$EXE" report "$TMP/a.json" -o "$TMP/rep2"
one_line 'warning: gnuplot not found on PATH' "report without gnuplot"
for f in summary.md results.csv index.html charts/geomean.gp charts/geomean.dat \
    charts/speedup-compiled-fp32-infer-cpu.gp charts/speedup-compiled-fp32-infer-cpu.dat; do
    exists "$TMP/rep2/$f" "report without gnuplot"
done
if ls "$TMP/rep2/charts/"*.png >/dev/null 2>&1; then bad "PNG files without gnuplot"; else ok; fi
has "$TMP/rep2/summary.md" 'not drawn \(no gnuplot\)' "summary says the charts are not drawn"

# --- bad input ----------------------------------------------------------------
expect 2 "report of nothing" "$EXE" report -o "$TMP/rep3"
one_line 'no results file' "report of nothing"
printf '{\n  "schema_version": 1,\n  "cases": [,]\n}\n' >"$TMP/corrupt.json"
expect 2 "report of corrupt JSON" "$EXE" report "$TMP/corrupt.json" -o "$TMP/rep3"
one_line "^$TMP/corrupt.json:3:[0-9]+: " "report of corrupt JSON"
expect 2 "compare of corrupt JSON" "$EXE" compare "$TMP/a.json" "$TMP/corrupt.json"
one_line "^$TMP/corrupt.json:3:[0-9]+: " "compare of corrupt JSON"
expect 2 "report of the same run twice" "$EXE" report "$TMP/a.json" "$TMP/a.json" -o "$TMP/rep3"
one_line 'is also in' "report of the same run twice"

# not a results file: refused by name before reading, exit 2
for cmd in report compare export; do
    case $cmd in
    report) args="$TMP/nobin -o $TMP/rep3" ;;
    compare) args="$TMP/a.json $TMP/nobin" ;;
    export) args="--format gbench $TMP/nobin -o $TMP/x.json" ;;
    esac
    # shellcheck disable=SC2086 # the paths have no spaces (mktemp)
    expect 2 "$cmd of a directory" "$EXE" $cmd $args
    one_line "^$TMP/nobin: is a directory, not a results file$" "$cmd of a directory"
done
if mkfifo "$TMP/fifo" 2>/dev/null; then
    expect 2 "report of a FIFO" "$EXE" report "$TMP/fifo" -o "$TMP/rep3"
    one_line "^$TMP/fifo: is a FIFO, not a results file$" "report of a FIFO"
fi

# a sample that is no plausible time: the entry is invalid; compare refuses
# the file (every sample at 1e200 s was `same`, at 1e308 s `ambiguous`)
for v in 1e200 1e308 -1 0; do
    awk -v v="$v" '!done && /"samples_s": \[/ { inside = 1; print
            for (k = 1; k <= 10; k++) printf "%s%s\n", v, k < 10 ? "," : ""
            next }
        inside && /\]/ { inside = 0; done = 1 }
        inside { next }
        { print }' "$TMP/a.json" >"$TMP/absurd.json"
    expect 2 "compare with samples at $v s" "$EXE" compare "$TMP/a.json" "$TMP/absurd.json"
    one_line "^tcbench compare: $TMP/absurd.json: cases\[0\] \(smoke/[a-z0-9]+ .*\) is invalid: samples_s\[0\] = .* s: not a plausible time" \
        "compare with samples at $v s"
    expect 2 "compare with samples at $v s, as the baseline" "$EXE" compare "$TMP/absurd.json" "$TMP/a.json"
    expect 0 "report with samples at $v s" "$EXE" report "$TMP/absurd.json" -o "$TMP/rep4"
    has "$TMP/rep4/results.csv" ',invalid' "report marks samples at $v s invalid"
    has "$TMP/rep4/summary.md" 'invalid, not passing: samples_s\[0\] = .* not a plausible time' \
        "the report says why the entry is invalid"
done

# a run's journal, its last line cut and its first case measured again
# (fail_accuracy): read as results, the later line kept, one warning
GEN=${GEN_RESULTS:?set GEN_RESULTS to the gen_results binary}
"$GEN" "$TMP/gen.json" 40 && "$GEN" "$TMP/gen.jsonl" 40 --journal || bad "gen_results"
expect 0 "report of a journal" "$EXE" report "$TMP/gen.jsonl" -o "$TMP/rep5"
one_line "^$TMP/gen.jsonl:43: warning: a cut line" "report of a journal warns of its cut line"
has "$TMP/rep5/results.csv" 'fail_accuracy' "report of a journal keeps the later line"
expect 1 "compare with a journal" "$EXE" compare "$TMP/gen.json" "$TMP/gen.jsonl"
has "$TMP/stderr" "^$TMP/gen.jsonl:43: warning: a cut line" "compare of a journal warns"
has "$TMP/stdout" '^regression +s0/m0 eager .*status ok -> fail_accuracy' "compare reads the later line"
has "$TMP/stdout" '^FAIL: 1 regression, ' "compare of a journal: one regression"
expect 0 "export of a journal" "$EXE" export --format gbench "$TMP/gen.jsonl" -o "$TMP/gen.gbench.json"

# --- a plan file: its report, and what its reader refuses ---------------------
cat >"$TMP/plan.json" <<'JSON'
{
  "kind": "plan",
  "schema_version": 1,
  "tool": {"name": "tcbench", "version": "0.1.0", "git_commit": "unknown"},
  "timestamp": "2026-12-02T12:00:00Z",
  "host": {"cpu_model": "Test CPU"},
  "config": {"weights": "int4", "weight_group": 32, "weight_scales": "f32",
             "precision": "fp32", "attention": "math"},
  "rows": [
    {"suite": "s", "name": "mha", "mode": "eager", "batch": 1, "prompt_len": 8,
     "budget_bytes": 1073741824, "max_tokens": 0, "capped": false,
     "weights_exceed_budget": true, "weights_bytes": 2000000000,
     "kv_bytes_per_token": 1000, "fixed_bytes": null},
    {"suite": "s", "name": "mha", "mode": "eager", "batch": 1, "prompt_len": 8,
     "budget_bytes": 2147483648, "max_tokens": 100, "capped": false,
     "weights_exceed_budget": false, "weights_bytes": 2000000000,
     "kv_bytes_per_token": 1000, "fixed_bytes": 5000},
    {"suite": "s", "name": "mqa", "mode": "compiled", "batch": 1, "prompt_len": 8,
     "budget_bytes": 2147483648, "max_tokens": 8192, "capped": true,
     "weights_exceed_budget": false, "weights_bytes": 900000000,
     "kv_bytes_per_token": 100, "fixed_bytes": 5000},
    {"suite": "s", "name": "mqa", "mode": "compiled", "batch": 1, "prompt_len": 8,
     "budget_bytes": 1073741824, "max_tokens": 4000, "capped": false,
     "weights_exceed_budget": false, "weights_bytes": 900000000,
     "kv_bytes_per_token": 100, "fixed_bytes": 5000}
  ]
}
JSON
expect 0 "report of a plan" "$EXE" report "$TMP/plan.json" -o "$TMP/prep"
has "$TMP/stdout" "^report: $TMP/prep/summary.md, $TMP/prep/plan.csv," "report of a plan: its files"
has "$TMP/prep/summary.md" '^\| 1 \| weights exceed it \| 4000 \|$' "plan: a budget below the weights"
has "$TMP/prep/summary.md" '^\| 2 \| 100 \| 8192 \(positions\) \|$' "plan: the positions marked"
# a line's budgets in order, whatever the file's
has "$TMP/prep/plan.csv" '^s,mqa,compiled,1,8,1073741824,1,4000,false,false,900000000,100,5000' \
    "plan.csv: the rows"
if [ "$(grep -n '^s,mqa' "$TMP/prep/plan.csv" | head -1 | cut -d: -f2 | cut -d, -f6)" = 1073741824 ]; then
    ok
else
    bad "plan.csv: mqa's budgets out of order: $(cat "$TMP/prep/plan.csv")"
fi
has "$TMP/prep/charts/plan-tokens.dat" '^2 8192 8192$' "plan chart: the capped point"
has "$TMP/prep/charts/plan-tokens.dat" '^1 \? \?$' "plan chart: no point where the weights exceed"
if command -v gnuplot >/dev/null 2>&1; then
    size=$(wc -c <"$TMP/prep/charts/plan-tokens.png" 2>/dev/null || echo 0)
    if [ "$size" -gt 1000 ]; then ok; else bad "plan-tokens.png: $size bytes"; fi
    has "$TMP/prep/index.html" 'src="data:image/svg\+xml;base64,' "plan chart inline in index.html"
fi
expect 0 "report of a plan without gnuplot" env PATH="$TMP/nobin" "$EXE" report "$TMP/plan.json" \
    -o "$TMP/prep2"
one_line 'warning: gnuplot not found on PATH' "report of a plan without gnuplot"
exists "$TMP/prep2/charts/plan-tokens.gp" "report of a plan without gnuplot"

# each a one-line refusal at the value's line and column, exit 2
bad_plan() { # bad_plan DESC SED PATTERN
    sed "$2" "$TMP/plan.json" >"$TMP/badplan.json"
    expect 2 "$1" "$EXE" report "$TMP/badplan.json" -o "$TMP/prep3"
    one_line "^$TMP/badplan.json:$3" "$1"
}
bad_plan "a plan with tokens as a string" '15s/"max_tokens": 100/"max_tokens": "100"/' \
    '15:48: rows\[1\] \(s/mha eager\): "max_tokens" must be an integer of at least 0$'
bad_plan "a plan with a negative count" '17s/"fixed_bytes": 5000/"fixed_bytes": -1/' \
    '17:49: rows\[1\] \(s/mha eager\): "fixed_bytes" must be an integer of at least 0, or null$'
bad_plan "a plan row without its mode" '18s/"mode": "compiled", //' \
    '18:5: rows\[2\]: "mode" must be a string$'
bad_plan "a plan of a newer schema" 's/"schema_version": 1/"schema_version": 2/' \
    '3:21: plan schema_version 2 is newer than this build reads'
bad_plan "a plan row twice" '23s/1073741824/2147483648/' \
    '22:5: rows\[3\]: s/mqa compiled at 2147483648 bytes is also rows\[2\]$'
bad_plan "tokens beyond the weights" '11s/"max_tokens": 0/"max_tokens": 5/' \
    '11:48: rows\[0\] \(s/mha eager\): 5 tokens where the weights alone exceed the budget$'
bad_plan "a plan cut short" '20,$d' '20: .*not valid JSON'
expect 2 "two plans" "$EXE" report "$TMP/plan.json" "$TMP/plan.json" -o "$TMP/prep3"
one_line "plan.json is a plan file, reported alone: not with " "two plans"
expect 2 "results beside a plan" "$EXE" report "$TMP/a.json" "$TMP/plan.json" -o "$TMP/prep3"
one_line "plan.json is a plan file, reported alone: not with $TMP/a.json" "results beside a plan"

# --- compare ------------------------------------------------------------------
expect 0 "compare a run with itself" "$EXE" compare "$TMP/a.json" "$TMP/a.json"
has "$TMP/stdout" '^PASS: 0 regressions' "compare a a"
"$EXE" compare "$TMP/a.json" "$TMP/b.json" >"$TMP/ab.txt" 2>&1
echo "report_cli: two separate runs compare with exit $? (informational): $(tail -n 1 "$TMP/ab.txt")"
expect 0 "compare --format md" "$EXE" compare --format md "$TMP/a.json" "$TMP/a.json"
has "$TMP/stdout" '^### tcbench compare: PASS' "compare --format md"
expect 0 "compare --format json" "$EXE" compare --format json "$TMP/a.json" "$TMP/a.json"
has "$TMP/stdout" '"result": "pass"' "compare --format json"
expect 0 "compare --format junit" "$EXE" compare --format junit "$TMP/a.json" "$TMP/a.json"
has "$TMP/stdout" '<testsuites name="tcbench compare" tests="4" failures="0"' "junit"
if command -v xmllint >/dev/null 2>&1; then
    if xmllint --noout "$TMP/stdout" 2>"$TMP/xmllint"; then ok; else bad "junit: $(cat "$TMP/xmllint")"; fi
fi
expect 2 "compare --format bad" "$EXE" compare --format xml "$TMP/a.json" "$TMP/a.json"
one_line '--format xml: expected text, md, json or junit' "compare --format bad"
expect 2 "compare --threshold bad" "$EXE" compare --threshold 5 "$TMP/a.json" "$TMP/a.json"
one_line '--threshold 5: expected a number between 0 and 1' "compare --threshold bad"
expect 2 "compare --alpha bad" "$EXE" compare --alpha 0 "$TMP/a.json" "$TMP/a.json"
one_line '--alpha 0: expected a number between 0 and 1' "compare --alpha bad"
expect 0 "compare --alpha --threshold" "$EXE" compare --alpha 0.05 --threshold 0.1 "$TMP/a.json" "$TMP/a.json"
has "$TMP/stdout" '\(threshold 10\.0%, alpha 0\.05, noise cap 10\.0%;' "compare --alpha --threshold"
expect 2 "compare --noise-cap bad" "$EXE" compare --noise-cap 0 "$TMP/a.json" "$TMP/a.json"
one_line '--noise-cap 0: expected a positive number' "compare --noise-cap bad"
expect 2 "compare --noise-cap not a number" "$EXE" compare --noise-cap 10% "$TMP/a.json" "$TMP/a.json"
one_line '--noise-cap 10%: expected a positive number' "compare --noise-cap not a number"
expect 2 "compare of one file" "$EXE" compare "$TMP/a.json"
one_line 'expected two results files' "compare of one file"

# a different machine: refused, unless --force
sed 's/"cpu_model": "[^"]*"/"cpu_model": "Some Other CPU"/' "$TMP/a.json" >"$TMP/other.json"
expect 2 "compare across machines" "$EXE" compare "$TMP/a.json" "$TMP/other.json"
one_line "different machines \(cpu_model '.*' vs 'Some Other CPU'\).*--force" "compare across machines"
expect 0 "compare across machines --force" "$EXE" compare --force "$TMP/a.json" "$TMP/other.json"

# an entry that passed and now fails accuracy is a regression
awk '!done && /"status": "pass"/ { sub(/"pass"/, "\"fail_accuracy\""); done = 1 } { print }' \
    "$TMP/a.json" >"$TMP/acc.json"
expect 1 "compare pass -> fail_accuracy" "$EXE" compare "$TMP/a.json" "$TMP/acc.json"
has "$TMP/stdout" '^regression +smoke/[a-z0-9]+ compiled .*status pass -> fail_accuracy' \
    "compare names the status regression"

# one entry's samples replaced by 1 ms and 3 ms in turn: its noise, 1.4826
# MAD / median, is 74.1% whatever the machine did, far above the 10% cap.
# Noisy, listed apart, exit 0; exit 1 with --fail-on-noisy; a cap above
# its noise calls it again (where the run marked no entry unstable, so the
# copy marks none: the cap alone decides)
# (exactly ten of them: the run takes as many rounds as it needs, and an
# odd count of two values alternating would have a MAD of 0)
awk '!done && /"samples_s": \[/ { inside = 1; print
        for (k = 1; k <= 10; k++) printf "%s%s\n", k % 2 ? "1e-3" : "3e-3", k < 10 ? "," : ""
        next }
    inside && /\]/ { inside = 0; done = 1 }
    inside { next }
    { sub(/"unstable": true/, "\"unstable\": false"); print }' "$TMP/a.json" >"$TMP/noisy.json"
expect 0 "compare with a noisy entry" "$EXE" compare "$TMP/a.json" "$TMP/noisy.json"
has "$TMP/stdout" '^noisy: [0-9]+ entr(y|ies) too noisy to call' "compare lists noisy entries apart"
has "$TMP/stdout" '^noisy +smoke/mlp eager .* 74\.1% > cap 10\.0%' "compare names the noisy entry"
has "$TMP/stdout" '^PASS: 0 regressions, .*, [1-9][0-9]* noisy, ' "compare counts noisy entries"
expect 1 "compare --fail-on-noisy" "$EXE" compare --fail-on-noisy "$TMP/a.json" "$TMP/noisy.json"
has "$TMP/stdout" '^FAIL: 0 regressions, .*, [1-9][0-9]* noisy, .*--fail-on-noisy' "compare --fail-on-noisy"
expect 1 "compare --fail-on-noisy --format junit" "$EXE" compare --fail-on-noisy --format junit \
    "$TMP/a.json" "$TMP/noisy.json"
has "$TMP/stdout" '<failure type="noisy" message="[^"]*74\.1%' "junit --fail-on-noisy"
expect 0 "compare --format junit, noisy" "$EXE" compare --format junit "$TMP/a.json" "$TMP/noisy.json"
has "$TMP/stdout" '<skipped message="noisy: [^"]*74\.1%' "junit skips a noisy entry"
expect 0 "compare --noise-cap" "$EXE" compare --noise-cap 0.8 "$TMP/noisy.json" "$TMP/noisy.json"
has "$TMP/stdout" '^same +smoke/mlp eager .*74\.1/74\.1%' "compare --noise-cap calls it again"
has "$TMP/stdout" 'noise cap 80\.0%;' "compare --noise-cap in the summary"
expect 0 "compare --noise-cap above 1" "$EXE" compare --noise-cap 2 "$TMP/noisy.json" "$TMP/noisy.json"
has "$TMP/stdout" 'noise cap 200\.0%;' "compare --noise-cap above 1"

# --- export -------------------------------------------------------------------
expect 0 "export gbench" "$EXE" export --format gbench "$TMP/a.json" -o "$TMP/gbench.json"
for p in '"context": \{' '"num_cpus": [0-9]+' '"library_build_type": "' \
    '"name": "smoke/mlp/eager/fp32/infer/batch:16"' '"run_type": "iteration"' \
    '"aggregate_name": "median"' '"time_unit": "ms"' '"real_time": [0-9]'; do
    has "$TMP/gbench.json" "$p" "export gbench"
done
expect 2 "export without --format" "$EXE" export "$TMP/a.json"
one_line '--format is required' "export without --format"

# --- the fixture: failed, unstable, a sweep, 0% AMP, a kill switch ----------
FIX="$SRC/tests/fixtures/report_fixture.json"
expect 0 "report of the fixture" "$EXE" report "$FIX" -o "$TMP/fx"
md="$TMP/fx/summary.md"
has "$md" '^Kill switches in effect in .*: TCBENCH\\?_DISABLE\\?_LAYOUTS=1\.' "fixture: kill switch under the title"
has "$TMP/fx/index.html" 'Kill switches in effect in .*TCBENCH_DISABLE_LAYOUTS=1' "fixture: kill switch in index.html"
has "$md" 'timm/resnet50 \(compiled, amp, infer, cpu, batch 1\): unstable \(95% interval' "fixture: unstable under Warnings"
has "$md" 'Not in the geomean: timm/resnet50 \(unstable: ' "fixture: unstable left out of the geomean"
has "$md" '\| resnet50 \| 1 \| compiled \| pass \| \\~8\.14x \[0\.99, 97\.55\] \|' "fixture: unstable marked in its row"
has "$md" 'Not in the geomean: timm/vit_base \(fail_to_run\)' "fixture: failed entry named"
has "$md" 'Not in the geomean: huggingface/bert b=16 \(batch 16 of a sweep: the case counts at batch 4\)' \
    "fixture: the sweep counts once"
has "$md" '^\| Pass rate \| 100%, 4/4 \| 100%, 2/2 \| 0%, 0/1 \|$' "fixture: a precision at 0%"
has "$md" '\| never \|' "fixture: break-even never"
has "$TMP/fx/results.csv" ',noise,unstable,unstable_reasons,breakeven_steps,in_geomean' "fixture: csv columns"
has "$TMP/fx/results.csv" '^cpu,vit_base,1,,,,,' "fixture: csv blanks for a failed entry"
if command -v gnuplot >/dev/null 2>&1; then
    for c in passrate geomean speedup-compiled-amp-infer-cpu speedup-compiled-fp32-train-cpu \
        compile-compiled-fp32-infer-cpu breakeven-compiled-fp32-infer-cpu \
        memory-compiled-fp32-infer-cpu sweep-compiled-fp32-infer-cpu roofline; do
        for ext in png svg; do
            size=$(wc -c <"$TMP/fx/charts/$c.$ext" 2>/dev/null || echo 0)
            if [ "$size" -gt 1000 ]; then ok; else bad "fixture chart $c.$ext: $size bytes"; fi
        done
    done
    if ls "$TMP/fx/charts/"*.log >/dev/null 2>&1; then
        bad "gnuplot complained: $(cat "$TMP/fx/charts/"*.log | head -5)"
    else
        ok
    fi
    if [ -s "$TMP/stderr" ]; then bad "fixture report printed: $(cat "$TMP/stderr")"; else ok; fi
fi
expect 0 "export of the fixture" "$EXE" export --format gbench "$FIX" -o "$TMP/fx.gbench.json"
has "$TMP/fx.gbench.json" '"error_message": "fail_to_run: the C compiler' "export: a failed entry is an error"
has "$TMP/fx.gbench.json" '"error_occurred": true' "export: error_occurred"
has "$TMP/fx.gbench.json" '"label": "unstable: ' "export: the unstable entry's label"
if tr -d ' \n' <"$TMP/fx.gbench.json" | grep -q '"load_avg":\[0\.42\]'; then ok; else bad "export: load_avg"; fi

# --- side by side with PyTorch: tcbench's file and the script's, together ----
SIDE="$SRC/tests/fixtures/side_tcbench.json" TORCH="$SRC/tests/fixtures/side_torch.json"
expect 0 "report beside PyTorch" "$EXE" report "$SIDE" "$TORCH" -o "$TMP/side"
has "$TMP/side/summary.md" '^## Side by side with PyTorch$' "side by side: the section"
has "$TMP/side/summary.md" '^\| smoke: fp32, inference, cpu \| 4\.00x \(4 models\) \| 2\.00x \(3 models\) \| 0\.50x \(3 models\) \| 0\.25x \(3 models\) \|' \
    "side by side: speedups and time ratios"
has "$TMP/side/results.csv" ',study,time_vs_torch' "side by side: the csv column"
for f in torch-speedup-smoke-fp32-infer-cpu torch-time-smoke-fp32-infer-cpu; do
    exists "$TMP/side/charts/$f.gp" "side by side"
    exists "$TMP/side/charts/$f.dat" "side by side"
    if command -v gnuplot >/dev/null 2>&1; then exists "$TMP/side/charts/$f.png" "side by side drawn"; fi
done
if ls "$TMP/side/charts/"*.log >/dev/null 2>&1; then
    bad "side by side: gnuplot complained: $(cat "$TMP/side/charts/"*.log | head -5)"
else
    ok
fi
if grep -q 'time_vs_torch\|Side by side' "$TMP/fx/results.csv" "$TMP/fx/summary.md"; then
    bad "tcbench's file alone: a side-by-side column or section"
else
    ok
fi
# the gate takes PyTorch's entries as any other: torch-compile made slower is a regression
expect 0 "compare of PyTorch's entries" "$EXE" compare "$TORCH" "$TORCH"
has "$TMP/stdout" '^same +smoke/mlp torch-compile fp32 infer cpu batch 2 ' "compare: torch-compile"
sed '/"mode": "torch-compile"/s/"samples_s": \[[^]]*\]/"samples_s": [0.03, 0.0301, 0.0302, 0.0303, 0.0304, 0.0305, 0.0306, 0.0307, 0.0308, 0.0309]/' \
    "$TORCH" >"$TMP/torch-slow.json"
expect 1 "compare of a slower torch-compile" "$EXE" compare "$TORCH" "$TMP/torch-slow.json"
has "$TMP/stdout" '^regression +smoke/mlp torch-compile ' "compare: the slower torch-compile"
# read, never run
expect 2 "run --mode torch-eager" "$EXE" run --mode torch-eager --only mlp -q -o "$TMP/never.json"
one_line 'unknown mode; expected one of eager, compiled, fused, captured' "run --mode torch-eager"

# --- calibrate keeps one calibration per thread count ---------------------------
expect 0 "calibrate --threads 1" "$EXE" calibrate --threads 1
expect 0 "calibrate --threads 2" "$EXE" calibrate --threads 2
has "$TMP/stdout" '^kept +threads 1 2 ' "calibrate keeps threads 1 and 2"
if [ "$(grep -c '"threads"' "$TMP/cache/tcbench/calibration.json")" -eq 2 ]; then
    ok
else
    bad "calibration.json: $(cat "$TMP/cache/tcbench/calibration.json")"
fi
expect 2 "calibrate --threads 0" "$EXE" calibrate --threads 0

echo "report_cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
