#!/bin/sh
# DeBERTa's disentangled attention (the disentangled_attention layer with a
# rel_table, models/hf/deberta_lm.yaml's `relative` switch): the four tiny
# cases of tests/fixtures/deberta/relative.yaml (version 1 with its span the
# whole sequence and clamped, version 2 plain and with log buckets) list
# with the classes' counts; the clamped and the bucketed ones run
# eager and compiled, fp32 and AMP, inference and training, each compiled
# entry passing accuracy against the fp64 reference. The relative table is
# one parameter shared by every layer.
# Needs TCBENCH_EXE and TCBENCH_SOURCE_DIR (tests/meson.build sets both).

EXE=${TCBENCH_EXE:?set TCBENCH_EXE to the tcbench binary}
SRC=${TCBENCH_SOURCE_DIR:?set TCBENCH_SOURCE_DIR to the source tree}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tcbench-deberta-XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
unset TCBENCH_SUITES_DIR TCBENCH_MODELS TCBENCH_TEST_FAULT TCBENCH_TEST_NOISE
export XDG_CACHE_HOME="$TMP/cache" TMPDIR="$TMP"
. "$SRC/tests/sh_lib.sh"
SUITE="$SRC/tests/fixtures/deberta/relative.yaml"
# every mode for the two that exercise the most (the clamp, the log buckets);
# the other two are held to the formulas by test_zoo_deberta
CASES="deberta_v1_rel_clamped deberta_v2_rel_buckets"

expect 0 "check the suite" "$EXE" check "$SUITE"
expect 0 "list the suite" "$EXE" list "$SUITE" --exact
# the counts of the Hugging Face classes at these configurations
# (relative_attention, pos_att_type c2p|p2c), the table counted once
for cn in deberta_v1_rel:50656 deberta_v1_rel_clamped:47426 deberta_v2_rel:51808 \
    deberta_v2_rel_buckets:47682; do
    has "$TMP/stdout" "^${cn%%:*} .* ${cn#*:} " "${cn%%:*} has ${cn#*:} parameters"
done

expect 0 "run every mode" "$EXE" run "$SUITE" --only deberta_v1_rel_clamped,deberta_v2_rel_buckets --device cpu \
    --mode eager,compiled --precision fp32,amp --workload infer,train --threads 1 \
    --processes 1 --repeat 3 --warmup 1 --min-time 0 --max-time 0.05 -o "$TMP/r.json"
# shellcheck disable=SC2086 # the case names split on purpose
every_mode "$TMP/r.json" 8 $CASES

sh_lib_end deberta_rel
