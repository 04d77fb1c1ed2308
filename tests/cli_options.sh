#!/bin/sh
# `tcbench run` options refused, or warned about, before anything is
# measured: --batch-sizes with a repeated or empty item, --batch-size with
# --batch-sizes, --threads above the online cores (one warning line), and a
# case selection (--only, --filter, --exclude) that names or leaves no case,
# and a --memory-limit that is no byte count.
# Every run here stops at exit 2, so the test takes seconds.
# Needs TCBENCH_EXE and TCBENCH_SOURCE_DIR (tests/meson.build sets both).

EXE=${TCBENCH_EXE:?set TCBENCH_EXE to the tcbench binary}
SRC=${TCBENCH_SOURCE_DIR:?set TCBENCH_SOURCE_DIR to the source tree}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tcbench-options-XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
unset TCBENCH_MODELS TCBENCH_SUITES_DIR
SMOKE=$SRC/suites/smoke.yaml

pass=0
fail=0

# verdict DESC WHY: a pass when WHY is empty, else a failure with the stderr.
verdict() {
    if [ -z "$2" ]; then
        echo "ok   $1"
        pass=$((pass + 1))
        return
    fi
    echo "FAIL $1: $2"
    sed 's/^/     | /' "$TMP/err"
    fail=$((fail + 1))
}

# refused DESC LINES FRAGMENT ARGS...: `tcbench run ARGS` exits 2 with LINES
# lines on stderr, the last one holding FRAGMENT.
refused() {
    desc=$1
    want=$2
    fragment=$3
    shift 3
    timeout 60 "$EXE" run --device cpu "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    lines=$(wc -l <"$TMP/err" | tr -d ' ')
    if [ "$rc" -ne 2 ]; then
        verdict "$desc" "exit $rc, expected 2"
    elif [ "$lines" -ne "$want" ]; then
        verdict "$desc" "$lines lines on stderr, expected $want"
    elif ! tail -n 1 "$TMP/err" | grep -qF -- "$fragment"; then
        verdict "$desc" "no '$fragment' in the last line"
    else
        verdict "$desc" ""
    fi
}

# has DESC FRAGMENT: the stderr of the last run holds FRAGMENT.
has() {
    if grep -qF -- "$2" "$TMP/err"; then verdict "$1" ""; else verdict "$1" "no '$2' on stderr"; fi
}

# --- batch sizes --------------------------------------------------------------
refused "--batch-sizes 4,4" 1 "--batch-sizes 4,4: 4 is given twice" --batch-sizes 4,4
refused "--batch-sizes 1,,4" 1 "--batch-sizes 1,,4: an empty item" --batch-sizes 1,,4
refused "--batch-sizes 1,4," 1 "--batch-sizes 1,4,: an empty item" --batch-sizes 1,4,
refused "--batch-sizes ,1" 1 "--batch-sizes ,1: an empty item" --batch-sizes ,1
refused "--batch-sizes 1,x" 1 "--batch-sizes x: expected a whole number" --batch-sizes 1,x
refused "--batch-size with --batch-sizes" 1 "--batch-size and --batch-sizes together" \
    --batch-size 2 --batch-sizes 1,4
refused "--batch-sizes before --batch-size" 1 "--batch-size and --batch-sizes together" \
    --batch-sizes 1,4 --batch-size 2

# --- threads above the cores: one warning, then the run goes on (here to a
# selection error, so nothing is measured) -------------------------------------
cores=$(getconf _NPROCESSORS_ONLN)
if [ "$cores" -lt 4096 ]; then
    more=$((cores + 1))
    refused "--threads above the cores" 2 "--only nosuch" --threads "$more" "$SMOKE" --only nosuch
    has "--threads warning" "warning: --threads $more is above the $cores online cores"
fi
refused "--threads within the cores" 1 "--only nosuch" --threads 1 "$SMOKE" --only nosuch

# --- case selection -------------------------------------------------------------
refused "--only a typo" 1 "--only gtp2: no case gtp2 in the suite; did you mean gpt2?" \
    "$SMOKE" --only gtp2
refused "--only a typo in a list" 1 "no case brt in the suite; did you mean bert?" \
    "$SMOKE" --only gpt2,brt
refused "--only far from every case" 1 "no case zzzzzz in the suite; the cases: mlp, gpt2, bert" \
    "$SMOKE" --only zzzzzz
refused "--filter matching nothing" 1 "--filter '^nomatch\$': no case matches; the cases: mlp, gpt2" \
    "$SMOKE" --filter '^nomatch$'
refused "--filter and --exclude leave nothing" 1 \
    "--filter 'gpt' --exclude '2': no case matches; the cases: mlp" "$SMOKE" --filter gpt --exclude 2
refused "--only and --exclude leave nothing" 1 "--only gpt2 --exclude 'gpt': no case matches" \
    "$SMOKE" --only gpt2 --exclude gpt

# --- weight-only quantization --------------------------------------------------
refused "--weights int3" 1 "tcbench run: --weights int3: expected f32, int8 or int4" --weights int3
refused "--weight-group 48" 1 "--weight-group 48: expected 32, 64 or 128" --weight-group 48
refused "--weight-scales bf16" 1 "--weight-scales bf16: expected f32 or f16" --weight-scales bf16
refused "--weights with training" 1 "--weights int4: weight-only quantization is for inference" \
    --weights int4 --workload train "$SMOKE" --only mlp

# a huge suite: the list of cases is cut, and says how many it leaves out
{
    echo "name: huge"
    echo "cases:"
    i=0
    while [ $i -lt 500 ]; do
        echo "  - {name: case_number_$i, model: $SRC/tests/bad/models/tiny.yaml, batch: 2}"
        i=$((i + 1))
    done
} >"$TMP/huge.yaml"
refused "--filter on a huge suite" 1 "more)" "$TMP/huge.yaml" --filter nomatch
has "the cut list starts with the first case" "the cases: case_number_0, case_number_1,"
size=$(wc -c <"$TMP/err")
verdict "the cut list is short" "$([ "$size" -lt 600 ] || echo "$size bytes")"

# --- a model larger than this machine: run refuses it before anything runs
printf 'name: big\ncases:\n  - {model: %s, batch: 2}\n' "$SRC/tests/fixtures/model_too_big.yaml" \
    >"$TMP/big.yaml"
refused "a model larger than this machine" 1 "GiB of parameters, this machine has" "$TMP/big.yaml"
has "the refusal points at the layer" "model_too_big.yaml:11:9:"

# --- --memory-limit: bytes with an optional unit -------------------------------
for bad in 0 -1 6XB 6gib 1e-3 inf nan 0x10 '' 6GiBx 2e19; do
    refused "--memory-limit '$bad'" 1 "--memory-limit $bad: expected bytes" --memory-limit "$bad"
done
# good values get past the option: the run stops at the next error
for good in 6GiB 512MiB 1e9 1.5GB 4096; do
    refused "--memory-limit $good accepted" 1 "--batch-size and --batch-sizes together" \
        --memory-limit "$good" --batch-size 2 --batch-sizes 4
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
