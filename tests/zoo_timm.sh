#!/bin/sh
# The TIMM suite (suites/timm.yaml, docs/zoo.md): every case checks and
# lists at the study's size and at `--size cpu`, and at `cpu` four of its
# families run eager and compiled, fp32 and AMP, inference and training,
# every compiled entry passing accuracy against the fp64 reference: a
# ResNet-like convnet (dpn107's dual paths, grouped convolutions), an
# EfficientNet-like one (tf_efficientnet_b0: depthwise blocks, squeeze-
# excitation, TF "same" padding), Swin (shifted windows: roll, the relative
# position bias table, the shift mask) and an MLP-Mixer.
# Needs TCBENCH_EXE and TCBENCH_SOURCE_DIR (tests/meson.build sets both).

EXE=${TCBENCH_EXE:?set TCBENCH_EXE to the tcbench binary}
SRC=${TCBENCH_SOURCE_DIR:?set TCBENCH_SOURCE_DIR to the source tree}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tcbench-zoo-timm-XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
unset TCBENCH_SUITES_DIR TCBENCH_MODELS TCBENCH_TEST_FAULT TCBENCH_TEST_NOISE
export XDG_CACHE_HOME="$TMP/cache" TMPDIR="$TMP"
. "$SRC/tests/sh_lib.sh"
SUITE="$SRC/suites/timm.yaml"

expect 0 "check the suite" "$EXE" check "$SUITE"
expect 0 "list at the study's size" "$EXE" list "$SUITE"
has "$TMP/stdout" '^vit_base_patch16_224 +vit +128 .* 86\.6M ' "vit_base_patch16_224's 86.6M parameters"
has "$TMP/stdout" '^swin_base_patch4_window7_224 +swin +128 .* 87\.8M ' \
    "swin_base_patch4_window7_224's 87.8M parameters"
expect 0 "list --size cpu" "$EXE" list "$SUITE" --size cpu

CASES=dpn107,tf_efficientnet_b0,swin_base_patch4_window7_224,mixer_b16_224
expect 0 "run at cpu size" "$EXE" run "$SUITE" --size cpu --only "$CASES" --device cpu \
    --mode eager,compiled --precision fp32,amp --workload infer,train --threads 1 \
    --processes 1 --repeat 3 --warmup 1 --min-time 0 --max-time 0.05 -o "$TMP/r.json"
every_mode "$TMP/r.json" 16 dpn107 tf_efficientnet_b0 swin_base_patch4_window7_224 mixer_b16_224

sh_lib_end zoo_timm
