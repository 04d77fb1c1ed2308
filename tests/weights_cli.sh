#!/bin/sh
# tcbench weights (docs/torch.md): each case's seeded values and eager's
# answers as safetensors. Checks that:
#   - files appear for the selected cases, with the inputs, outputs, the
#     training step's loss and one gradient per parameter;
#   - the C reader (tests/st_dump.c) and the standard-library Python reader
#     (scripts/safetensors_read.py) list the same names, dtypes, shapes and
#     bytes (FNV-1a of each tensor), and the Python reader accepts the layout;
#   - the same seed gives the same bytes, another seed other ones;
#   - bad input is one line and exit 2.
# Needs TCBENCH_EXE, ST_DUMP and TCBENCH_SOURCE_DIR (tests/meson.build). The
# Python comparison is skipped (exit 77 at the end) without python3.
EXE=${TCBENCH_EXE:?}
DUMP=${ST_DUMP:?}
SRC=${TCBENCH_SOURCE_DIR:?}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tcbench-weights-XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
. "$SRC/tests/sh_lib.sh"

W=$TMP/w
expect 0 "weights of mlp and resnet" "$EXE" weights "$SRC/suites/smoke.yaml" --only mlp,resnet -o "$W"
has "$TMP/stdout" "^$W/mlp.safetensors: [0-9]+ tensors\$" "mlp written"
has "$TMP/stdout" "^$W/resnet.safetensors: [0-9]+ tensors\$" "resnet written"
[ ! -e "$W/gpt2.safetensors" ] && ok || bad "--only: gpt2 written"
expect 0 "C reader" "$DUMP" "$W/mlp.safetensors" "$W/resnet.safetensors"
cp "$TMP/stdout" "$TMP/c.txt"
has "$TMP/c.txt" '^input\.images F32 \[4,3,64,64\] 196608 ' "resnet's images, batch 4 at 64x64"
has "$TMP/c.txt" '^input\.labels I32 \[4\] 16 ' "resnet's labels, i32"
has "$TMP/c.txt" '^output\.0 F32 \[4,10\] 160 ' "resnet's logits"
has "$TMP/c.txt" '^train\.loss F32 \[\] 4 ' "the training step's loss, a scalar"
has "$TMP/c.txt" '^# case=resnet$' "metadata: the case"
has "$TMP/c.txt" '^# format=tcbench-weights-1$' "metadata: the format"
# one gradient per parameter, of its shape: every train.grad.P has a P line
# of the same dtype and shape
awk '/^train\.grad\./ { sub(/^train\.grad\./, ""); print $1, $2, $3, $4 }' "$TMP/c.txt" \
    | LC_ALL=C sort >"$TMP/grads"
awk '$1 !~ /^(#|train\.|input\.|output\.)/ { print $1, $2, $3, $4 }' "$TMP/c.txt" \
    | LC_ALL=C sort >"$TMP/params"
[ -s "$TMP/grads" ] && ok || bad "no train.grad.* tensors"
LC_ALL=C comm -23 "$TMP/grads" "$TMP/params" >"$TMP/nomatch"
[ ! -s "$TMP/nomatch" ] && ok || bad "gradients with no parameter of their name, dtype and shape: $(head -3 "$TMP/nomatch")"

# the same seed, the same bytes; another seed, other ones
expect 0 "again" "$EXE" weights "$SRC/suites/smoke.yaml" --only mlp -o "$TMP/w2"
cmp -s "$W/mlp.safetensors" "$TMP/w2/mlp.safetensors" && ok || bad "the same seed gave other bytes"
expect 0 "seed 7" "$EXE" weights "$SRC/suites/smoke.yaml" --only mlp --seed 7 -o "$TMP/w3"
cmp -s "$W/mlp.safetensors" "$TMP/w3/mlp.safetensors" && bad "seed 7 gave seed 0's bytes" || ok

# bad input: one line, exit 2
expect 2 "no -o" "$EXE" weights "$SRC/suites/smoke.yaml"
one_line "^tcbench weights: no -o DIR given" "no -o"
expect 2 "no suite" "$EXE" weights -o "$TMP/x"
one_line "^tcbench weights: no SUITE given" "no suite"
expect 2 "unknown case" "$EXE" weights "$SRC/suites/smoke.yaml" --only nosuch -o "$TMP/x"
one_line "nosuch" "unknown case"
printf 'name: s\ncases:\n  - {model: mlp, batch: 0}\n' >"$TMP/bad.yaml"
expect 2 "bad suite" "$EXE" weights "$TMP/bad.yaml" -o "$TMP/x"
one_line "^$TMP/bad.yaml:3:[0-9]+: " "bad suite located"
expect 2 "bad seed" "$EXE" weights "$SRC/suites/smoke.yaml" --seed -1 -o "$TMP/x"
one_line "--seed" "bad seed"
: >"$TMP/x.safetensors"
expect 2 "C reader on an empty file" "$DUMP" "$TMP/x.safetensors"
one_line "x.safetensors: 0 bytes" "empty file named"

if ! command -v python3 >/dev/null 2>&1; then
    sh_lib_end weights_cli || exit 1
    echo "python3 not found: the Python reader's comparison is skipped"
    exit 77
fi
expect 0 "Python reader" python3 "$SRC/scripts/safetensors_read.py" "$W/mlp.safetensors" \
    "$W/resnet.safetensors"
if cmp -s "$TMP/stdout" "$TMP/c.txt"; then ok; else
    bad "the C and Python readers list the files differently:"
    diff "$TMP/c.txt" "$TMP/stdout" | head -10 >&2
fi
head -c 100 "$W/mlp.safetensors" >"$TMP/cut.safetensors"
expect 2 "Python reader on a cut file" python3 "$SRC/scripts/safetensors_read.py" \
    "$TMP/cut.safetensors"
one_line "cut.safetensors: " "cut file named"
sh_lib_end weights_cli
