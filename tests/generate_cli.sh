#!/bin/sh
# The generate workload and the memory-budget study from the command line:
# a tiny generation suite run eager and compiled (statuses, the figures in
# the results), its bad inputs (a context past the model's positions, no
# new tokens) refused before anything runs, the same in AMP (f16 caches),
# --device cuda (without a GPU the driver's reason; with one the suite runs there),
# and `tcbench plan` on the generation suite: the claim's ChatGLM2 reaching
# 8192 tokens within 6 GiB with int4 weights, the claim's fp16 cache bytes a
# token under --precision amp, a budget below the weights refused; the plan written as
# JSON over a range of budgets (ChatGLM2 compiled past ChatGLM eager at every
# budget, read from the file) and drawn by `tcbench report`.
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

none_failed() { # none_failed RESULTS DESC: no entry failed, else the first messages
    if grep -Eq '"status": "(fail_accuracy|error|fail_to_run)"' "$1"; then
        bad "$2: an entry failed: $(grep -E '"message"' "$1" | head -3)"
    else
        ok
    fi
}

# --- a run: every entry checked against the fp64 decode, the figures recorded
expect 0 "generate run" "$EXE" run "$TMP/gen.yaml" --device cpu --threads 1 --repeat 3 \
    --processes 1 --min-time 0 --max-time 0.05 -o "$TMP/r.json"
for st in ok pass; do
    has "$TMP/r.json" "\"status\": \"$st\"" "an entry ends $st"
done
none_failed "$TMP/r.json" "generate"
has "$TMP/r.json" '"tokens_per_s": [0-9]' "tokens per second recorded"
has "$TMP/r.json" '"ttft_s": [0-9]' "time to first token recorded"
# a token's keys and values: 2 layers x (k, v) x kv heads x 8 dims x 4 bytes
has "$TMP/r.json" '"kv_bytes_per_token": 512' "gpt2's cache a token (4 kv heads)"
has "$TMP/r.json" '"kv_bytes_per_token": 128' "llama's cache a token (1 kv head)"
has "$TMP/r.json" '"workload": "generate"' "the workload recorded"

# --- AMP: every step model autocast to f16, the caches f16 in both modes
expect 0 "generate run, amp" "$EXE" run "$TMP/gen.yaml" --device cpu --precision amp \
    --threads 1 --repeat 3 --processes 1 --min-time 0 --max-time 0.05 -o "$TMP/a.json"
has "$TMP/a.json" '"status": "pass"' "amp: compiled passes"
none_failed "$TMP/a.json" "amp"
has "$TMP/a.json" '"rule": "greedy tokens"' "amp: checked against the fp64 decode"
# half the fp32 figures above: f16 keys and values
has "$TMP/a.json" '"kv_bytes_per_token": 256' "amp: gpt2's cache a token in f16"
has "$TMP/a.json" '"kv_bytes_per_token": 64' "amp: llama's cache a token in f16"

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
expect 0 "chat run, amp" "$EXE" run "$TMP/chat.yaml" --device cpu --precision amp --threads 1 \
    --repeat 3 --processes 1 --min-time 0 --max-time 0.05 -o "$TMP/ca.json"
has "$TMP/ca.json" '"status": "pass"' "chat amp: compiled passes"
has "$TMP/ca.json" "eager's tokens, cache kept and anew" "chat amp: every way gives eager's tokens"
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
# under amp the caches are f16: the claim's bytes a token, ChatGLM-6B's 32
# key/value heads against ChatGLM2-6B's 2 (28 layers x k, v x heads x 128 x 2)
# (8 GiB: ChatGLM-6B's weights and the f16 copy autocast caches of its
# tied embedding and output layer pass 6 GiB, docs/generation.md)
expect 0 "plan amp" "$EXE" plan "$GEN" --only chatglm --only chatglm2 --memory 8GiB \
    --weights int4 --precision amp
has "$TMP/stdout" "; amp, caches f16" "plan amp: the precision in the header"
kv=$(awk '$1 == "chatglm" && $2 == "eager" { print $5 }' "$TMP/stdout")
kv2=$(awk '$1 == "chatglm2" && $2 == "compiled" { print $5 }' "$TMP/stdout")
if [ "$kv" = 458752 ] && [ "$kv2" = 28672 ]; then ok; else
    bad "plan amp: kv bytes a token $kv and $kv2, the claim's fp16 caches hold 458752 and 28672"
fi
expect 2 "plan bf16" "$EXE" plan "$GEN" --precision bf16
one_line "--precision bf16: fp32 or amp" "plan bf16"
expect 2 "a budget below the weights" "$EXE" plan "$GEN" --only chatglm --memory 1GiB
one_line "chatglm: its weights alone need .* more than the largest budget" \
    "a budget below the weights"
expect 2 "a budget that is no size" "$EXE" plan "$GEN" --memory 6GB6
one_line "--memory" "a budget that is no size"
expect 2 "plan int3" "$EXE" plan "$GEN" --weights int3
one_line "--weights int3" "plan int3"

# the plan file: budgets 6, 9 and 12 GiB, a short prompt so that ChatGLM's
# eager prefill fits; each row's figures read from the JSON
expect 0 "plan -o" "$EXE" plan "$GEN" --only chatglm,chatglm2 --weights int4 --prompt-len 64 \
    --memory 6GiB..12GiB:3GiB -o "$TMP/plan.json"
has "$TMP/stdout" "^plan: $TMP/plan.json\$" "plan -o names its file"
has "$TMP/plan.json" '^  "kind": "plan",$' "the plan file's kind"
has "$TMP/plan.json" '"weights": "int4"' "the plan file's weights"
has "$TMP/plan.json" '"precision": "fp32"' "the plan file's precision"
has "$TMP/plan.json" '"cpu_model": ' "the plan file's host"
# name mode budget tokens weights_exceed, one line a row (the writer's order)
awk '/"name":/ { n = $2 } /"mode":/ { m = $2 } /"budget_bytes":/ { b = $2 }
    /"max_tokens":/ { t = $2 } /"weights_exceed_budget":/ { gsub(/[",]/, ""); print n, m, b, t, $2 }' \
    "$TMP/plan.json" | tr -d '",' >"$TMP/plan.rows"
if [ "$(wc -l <"$TMP/plan.rows")" -eq 12 ]; then ok; else
    bad "plan -o: 2 cases x 2 modes x 3 budgets are 12 rows, got: $(cat "$TMP/plan.rows")"
fi
for budget in 6442450944 9663676416 12884901888; do
    glm=$(awk -v b="$budget" '$1 == "chatglm" && $2 == "eager" && $3 == b { print $4 }' "$TMP/plan.rows")
    glm2=$(awk -v b="$budget" '$1 == "chatglm2" && $2 == "compiled" && $3 == b { print $4 }' "$TMP/plan.rows")
    if [ -n "$glm" ] && [ "$glm" -gt 0 ] && [ -n "$glm2" ] && [ "$glm2" -gt "$glm" ]; then ok; else
        bad "at $budget bytes chatglm2 compiled reaches '$glm2' tokens, chatglm eager '$glm'"
    fi
done
if awk '$5 != "false" { exit 1 }' "$TMP/plan.rows"; then ok; else
    bad "a budget of 6 GiB or more below int4 weights: $(cat "$TMP/plan.rows")"
fi
expect 0 "report of the plan" "$EXE" report "$TMP/plan.json" -o "$TMP/planrep"
has "$TMP/planrep/plan.csv" '^generate,chatglm2,compiled,1,64,6442450944,6,[0-9]+,' "plan.csv rows"
has "$TMP/planrep/summary.md" '^\| budget \(GiB\) \| chatglm eager \| chatglm compiled \|' \
    "the longest context per budget"
has "$TMP/planrep/charts/plan-tokens.gp" "index 3 using 1:2 with linespoints" "one line a case and mode"
if command -v gnuplot >/dev/null 2>&1; then
    for ext in png svg; do
        size=$(wc -c <"$TMP/planrep/charts/plan-tokens.$ext" 2>/dev/null || echo 0)
        if [ "$size" -gt 1000 ]; then ok; else bad "plan-tokens.$ext: $size bytes"; fi
    done
    if [ -s "$TMP/stderr" ]; then bad "report of the plan printed: $(cat "$TMP/stderr")"; else ok; fi
else
    echo "generate_cli: gnuplot not on PATH here; the plan chart is not checked drawn"
fi
expect 2 "a range off its steps" "$EXE" plan "$GEN" --memory 2GiB..5GiB
one_line "--memory 2GiB..5GiB: the range must end" "a range off its steps"
expect 2 "a plan beside results" "$EXE" report "$TMP/plan.json" "$TMP/r.json" -o "$TMP/mixed"
one_line "plan.json is a plan file, reported alone: not with .*r.json" "a plan beside results"

sh_lib_end generate_cli
