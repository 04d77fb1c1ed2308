#!/bin/sh
# The zoo's infrastructure from the command line, on tests/fixtures/zoo:
# `check` says model_fail_to_load for a case whose model uses a layer not
# built yet and exits 0, a misspelled layer is still exit 2 with one located
# line; `list --exact` prints whole counts and `-` for that case; `run`
# ends that case's entries model_fail_to_load while the others pass, and
# records `study`; the report gives the study's subset beside all rows; a
# run whose estimate is over ten minutes says so first, suggesting
# --size cpu.
# Needs TCBENCH_EXE and TCBENCH_SOURCE_DIR (tests/meson.build sets both).

EXE=${TCBENCH_EXE:?set TCBENCH_EXE to the tcbench binary}
SRC=${TCBENCH_SOURCE_DIR:?set TCBENCH_SOURCE_DIR to the source tree}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tcbench-zoo-XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
export XDG_CACHE_HOME="$TMP/cache"
unset TCBENCH_MODELS
. "$SRC/tests/sh_lib.sh"
FIX=$SRC/tests/fixtures/zoo

expect 0 "check: a layer not built yet is no error" "$EXE" check "$FIX/suite.yaml"
has "$TMP/stdout" "suite.yaml: case 'Hashing': model_fail_to_load: .*unbuilt.yaml:13:9: layer 'lsh_attention' is not built yet \(Reformer's" \
    "check names the case, the status and the layer"
[ "$(wc -l <"$TMP/stdout")" -eq 1 ] && ok || bad "check: one line for the one case"
[ -s "$TMP/stderr" ] && bad "check: nothing on stderr" || ok
expect 0 "check of the model file alone" "$EXE" check "$FIX/unbuilt.yaml"
has "$TMP/stdout" "^model_fail_to_load: .*unbuilt.yaml:13:9: layer 'lsh_attention'" "the model's line"

sed 's/lsh_attention/lsh_atention/' "$FIX/unbuilt.yaml" >"$TMP/typo.yaml"
expect 2 "check: a misspelled layer is bad input" "$EXE" check "$TMP/typo.yaml"
one_line "typo.yaml:13:9: unknown layer 'lsh_atention'; did you mean 'lsh_attention'\?" \
    "the misspelling located, with the suggestion"

expect 0 "list --exact" "$EXE" list --exact "$FIX/suite.yaml"
has "$TMP/stdout" '^TinyMLP +mlp +2 .* 325 +1\.29e-06$' "the whole count"
has "$TMP/stdout" '^Hashing +unbuilt +1 +- +- +-$' "dashes for the case not built"
expect 0 "list" "$EXE" list "$FIX/suite.yaml"
has "$TMP/stdout" '^Hashing +unbuilt +1 +- +- +-$' "dashes without --exact too"

# a calibration a billion times too slow: the estimate is long
"$EXE" calibrate --threads 1 >/dev/null 2>&1 || bad "calibrate"
cal=$(find "$XDG_CACHE_HOME" -name calibration.json | head -n1)
if [ -n "$cal" ]; then
    sed 's/"gemm_GFLOPs": [0-9.e+-]*/"gemm_GFLOPs": 1e-09/; s/"bandwidth_GBps": [0-9.e+-]*/"bandwidth_GBps": 1e-09/' \
        "$cal" >"$TMP/cal" && cp "$TMP/cal" "$cal"
else
    bad "calibrate wrote no calibration.json"
fi
expect 1 "run: the case not built fails, the others run" \
    "$EXE" run "$FIX/suite.yaml" --threads 1 --repeat 3 --max-time 0.3 -o "$TMP/r.json"
has "$TMP/stderr" "^tcbench run: estimate: at least [0-9]+ min for 4 entries \(.*calibrated 1e-09 GFLOP/s and 1e-09 GB/s\); --size cpu runs the same architectures, smaller$" \
    "the long estimate said first, with --size cpu"
[ "$(grep -c 'estimate:' "$TMP/stderr")" -eq 1 ] && ok || bad "one estimate line"
has "$TMP/stdout" '^Hashing +compiled +model_fail_to_load +-' "the table's status column"
has "$TMP/stdout" "^Hashing \[eager\]: model_fail_to_load: .*layer 'lsh_attention' is not built yet" \
    "the reason under the table"
has "$TMP/stdout" '^TinyMLP +compiled +pass ' "the other cases pass"
[ "$(grep -c '"status": "model_fail_to_load"' "$TMP/r.json")" -eq 2 ] && ok ||
    bad "model_fail_to_load recorded for both of the case's entries"
[ "$(grep -c '"study": true' "$TMP/r.json")" -eq 4 ] && ok || bad "study recorded per entry"

expect 0 "report" "$EXE" report "$TMP/r.json" -o "$TMP/rep"
has "$TMP/rep/summary.md" '^\| Pass rate \| 100%, 2/2 \(study\) · 67%, 2/3 \(all\) \|$' \
    "the study's subset beside all rows, the failure counted"
has "$TMP/rep/summary.md" '^- Not in the geomean: Hashing \(model_fail_to_load\)$' \
    "the failed case named"

# without a calibration: no estimate (with that one, TinyMLP alone would say so)
rm -f "$cal"
expect 0 "run without a calibration" \
    "$EXE" run "$FIX/suite.yaml" --threads 1 --repeat 3 --max-time 0.3 --only TinyMLP -o "$TMP/r2.json"
grep -q 'estimate:' "$TMP/stderr" && bad "no estimate without a calibration" || ok

sh_lib_end zoo_cli
