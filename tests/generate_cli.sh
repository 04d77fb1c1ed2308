#!/bin/sh
# The generate workload and the memory-budget study from the command line:
# a tiny generation suite run eager and compiled (statuses, the figures in
# the results), its bad inputs (a context past the model's positions, no
# new tokens) refused before anything runs, --device cuda (without a GPU
# the driver's reason; with one the suite runs there), and `tcbench plan` on the
# generation suite: the claim's ChatGLM2 reaching 8192 tokens within 6 GiB
# with int4 weights, a budget below the weights refused.
# Needs TCBENCH_EXE and TCBENCH_SOURCE_DIR (tests/meson.build sets both).

EXE=${TCBENCH_EXE:?set TCBENCH_EXE to the tcbench binary}
SRC=${TCBENCH_SOURCE_DIR:?set TCBENCH_SOURCE_DIR to the source tree}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tcbench-generate-XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
unset TCBENCH_SUITES_DIR
export TCBENCH_MODELS="$SRC/models"
. "$SRC/tests/sh_lib.sh"

cat >"$TMP/gen.yaml" <<'YAML'
name: gentiny
defaults: {modes: [eager, compiled], precisions: [fp32], workloads: [generate]}
cases:
  - name: gpt2
    model: gpt2
    batch: 1
    prompt_len: 12
    new_tokens: 6
    params: {vocab: 256, seq: 32, d_model: 32, layers: 2, heads: 4}
  - name: llama
    model: llama
    batch: 2
    prompt_len: 12
    new_tokens: 6
    params: {vocab: 256, seq: 32, d_model: 32, layers: 2, heads: 4, kv_heads: 1, ffn: 64}
YAML

# --- a run: every entry checked against the fp64 decode, the figures recorded
expect 0 "generate run" "$EXE" run "$TMP/gen.yaml" --device cpu --threads 1 --repeat 3 \
    --processes 1 --min-time 0 --max-time 0.05 -o "$TMP/r.json"
for st in ok pass; do
    has "$TMP/r.json" "\"status\": \"$st\"" "an entry ends $st"
done
if grep -Eq '"status": "(fail_accuracy|error|fail_to_run)"' "$TMP/r.json"; then
    bad "an entry failed: $(grep -E '"message"' "$TMP/r.json" | head -3)"
else
    ok
fi
has "$TMP/r.json" '"tokens_per_s": [0-9]' "tokens per second recorded"
has "$TMP/r.json" '"ttft_s": [0-9]' "time to first token recorded"
# a token's keys and values: 2 layers x (k, v) x kv heads x 8 dims x 4 bytes
has "$TMP/r.json" '"kv_bytes_per_token": 512' "gpt2's cache a token (4 kv heads)"
has "$TMP/r.json" '"kv_bytes_per_token": 128' "llama's cache a token (1 kv head)"
has "$TMP/r.json" '"workload": "generate"' "the workload recorded"

# --- chat: the rounds' first tokens both ways, every way eager's tokens
cat >"$TMP/chat.yaml" <<'YAML'
name: chattiny
defaults: {modes: [eager, compiled], precisions: [fp32], workloads: [chat]}
cases:
  - {name: llama, model: llama, batch: 1, prompt_len: 8, new_tokens: 4, rounds: 3,
     params: {vocab: 256, seq: 64, d_model: 32, layers: 2, heads: 4, kv_heads: 1, ffn: 64}}
YAML
expect 0 "chat run" "$EXE" run "$TMP/chat.yaml" --device cpu --threads 1 --repeat 3 \
    --processes 1 --min-time 0 --max-time 0.05 -o "$TMP/c.json"
has "$TMP/c.json" '"status": "pass"' "chat: compiled passes"
has "$TMP/c.json" "eager's tokens, cache kept and anew" "chat: every way gives eager's tokens"
has "$TMP/c.json" '"ttft_anew_s": \[' "chat: each round's first token, prefilled anew"
has "$TMP/c.json" '"rounds": 3' "chat: the rounds recorded"
expect 2 "chat past the positions" "$EXE" run "$TMP/chat.yaml" --device cpu --rounds 8
one_line "case 'llama', chat: a context of 95 tokens" "chat past the positions"
expect 2 "too many rounds" "$EXE" run "$TMP/chat.yaml" --device cpu --rounds 17
one_line "--rounds 17" "too many rounds"

# --- bad input, before anything runs
expect 2 "context past the positions" "$EXE" run "$TMP/gen.yaml" --device cpu --prompt-len 30
one_line "gpt2.yaml:[0-9]+:[0-9]+: case 'gpt2', generate: a context of 35 tokens .* exceeds the model's 32 positions" \
    "context past the positions"
expect 2 "no new tokens" "$EXE" run "$TMP/gen.yaml" --device cpu --new-tokens 0
one_line "--new-tokens 0" "no new tokens"
expect 2 "a prompt that is no number" "$EXE" run "$TMP/gen.yaml" --device cpu --prompt-len x
one_line "--prompt-len" "a prompt that is no number"

# --- the GPU. Without one (CI), --device cuda gets the driver's reason on
# one line, exit 2, as run does for every workload; with one, the tiny suite
# runs there, every entry checked against the fp64 decode, and chat is
# refused per entry with its reason.
expect 2 "generate --device cuda --only nosuch" "$EXE" run "$TMP/gen.yaml" --device cuda \
    --only nosuch
if grep -q -- "--only nosuch" "$TMP/stderr"; then
    expect 0 "generate on cuda" "$EXE" run "$TMP/gen.yaml" --device cuda --repeat 3 \
        --processes 1 --min-time 0 --max-time 0.05 -o "$TMP/g.json"
    has "$TMP/g.json" '"status": "pass"' "cuda: compiled passes"
    has "$TMP/g.json" '"tokens_per_s": [0-9]' "cuda: tokens per second recorded"
    if grep -Eq '"status": "(fail_accuracy|error|fail_to_run)"' "$TMP/g.json"; then
        bad "cuda: an entry failed: $(grep -E '"message"' "$TMP/g.json" | head -3)"
    else
        ok
    fi
    "$EXE" run "$TMP/chat.yaml" --device cuda --repeat 1 --processes 1 -o "$TMP/gc.json" \
        >/dev/null 2>&1
    has "$TMP/gc.json" 'chat: not built for --device cuda yet' "cuda: chat refused, saying why"
else
    expect 2 "generate --device cuda, no GPU" "$EXE" run "$TMP/gen.yaml" --device cuda
    one_line "^tcbench run: --device cuda: " "generate --device cuda, no GPU"
    expect 2 "generate int4 --device cuda, no GPU" "$EXE" run "$TMP/gen.yaml" --device cuda \
        --weights int4
    one_line "^tcbench run: --device cuda: " "generate int4 --device cuda, no GPU"
    expect 2 "chat --device cuda, no GPU" "$EXE" run "$TMP/chat.yaml" --device cuda
    one_line "^tcbench run: --device cuda: " "chat --device cuda, no GPU"
fi

# --- the memory-budget study, planned from the graphs alone
GEN="$SRC/suites/generate.yaml"
expect 0 "plan chatglm2" "$EXE" plan "$GEN" --only chatglm2 --memory 6GiB --weights int4
tokens=$(awk '$1 == "chatglm2" && $2 == "compiled" { print $10 }' "$TMP/stdout")
if [ -n "$tokens" ] && [ "$tokens" -ge 8192 ]; then ok; else
    bad "chatglm2 compiled within 6 GiB, int4: $tokens tokens, the claim says at least 8192"
fi
expect 2 "a budget below the weights" "$EXE" plan "$GEN" --only chatglm --memory 1GiB
one_line "chatglm: its weights alone need .* more than the largest budget" \
    "a budget below the weights"
expect 2 "a budget that is no size" "$EXE" plan "$GEN" --memory 6GB6
one_line "--memory" "a budget that is no size"
expect 2 "plan int3" "$EXE" plan "$GEN" --weights int3
one_line "--weights int3" "plan int3"

sh_lib_end generate_cli
