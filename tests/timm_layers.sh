#!/bin/sh
# timm's composite layers (std_conv2d, layer_norm2d, layer_scale, drop_path,
# sub) in the tiny model of tests/fixtures/timm/layers.yaml: its count, and
# eager and compiled, fp32 and AMP, inference and training, each compiled
# entry passing accuracy against the fp64 reference (drop path's training
# mask included: the reference draws the same one).
# Needs TCBENCH_EXE and TCBENCH_SOURCE_DIR (tests/meson.build sets both).

EXE=${TCBENCH_EXE:?set TCBENCH_EXE to the tcbench binary}
SRC=${TCBENCH_SOURCE_DIR:?set TCBENCH_SOURCE_DIR to the source tree}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tcbench-timm-layers-XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
unset TCBENCH_SUITES_DIR TCBENCH_MODELS TCBENCH_TEST_FAULT TCBENCH_TEST_NOISE
export XDG_CACHE_HOME="$TMP/cache" TMPDIR="$TMP"
. "$SRC/tests/sh_lib.sh"
SUITE="$SRC/tests/fixtures/timm/layers.yaml"

expect 0 "list the suite" "$EXE" list "$SUITE" --exact
# std_conv2d 3*8*9 + 8 + 8 (gain), grouped 8*4*9 + 8 + 8, layer_norm2d 16,
# layer_scale 8, linear 64 + 8, layer_scale 8, linear 8*5 + 5
has "$TMP/stdout" '^timm_layers .* 685 ' "the tiny model has 685 parameters"

expect 0 "run every mode" "$EXE" run "$SUITE" --device cpu \
    --mode eager,compiled --precision fp32,amp --workload infer,train --threads 1 \
    --processes 1 --repeat 3 --warmup 1 --min-time 0 --max-time 0.05 -o "$TMP/r.json"
every_mode "$TMP/r.json" 4 timm_layers

sh_lib_end timm_layers
