#!/bin/sh
# The Hugging Face suite (suites/huggingface.yaml, docs/zoo.md): every case
# checks and lists at the study's size and at `--size cpu`, and at `cpu` an
# encoder with the question-answering head (the mean of two cross-entropies),
# GPT2ForSequenceClassification (last-token pooling) and an encoder-decoder,
# BartForConditionalGeneration (shared embedding, cross-attention, the logits'
# bias buffer), run eager and compiled, fp32 and AMP, inference and
# training, every compiled entry passing accuracy against the fp64 reference.
# Needs TCBENCH_EXE and TCBENCH_SOURCE_DIR (tests/meson.build sets both).

EXE=${TCBENCH_EXE:?set TCBENCH_EXE to the tcbench binary}
SRC=${TCBENCH_SOURCE_DIR:?set TCBENCH_SOURCE_DIR to the source tree}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tcbench-zoo-hf-XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
unset TCBENCH_SUITES_DIR TCBENCH_MODELS TCBENCH_TEST_FAULT TCBENCH_TEST_NOISE
export XDG_CACHE_HOME="$TMP/cache" TMPDIR="$TMP"
. "$SRC/tests/sh_lib.sh"
SUITE="$SRC/suites/huggingface.yaml"

expect 0 "check the suite" "$EXE" check "$SUITE"
expect 0 "list at the study's size" "$EXE" list "$SUITE"
has "$TMP/stdout" '^BertForMaskedLM +bert_lm +128 .* 109\.5M ' "BertForMaskedLM's 109.5M parameters"
has "$TMP/stdout" '^GPT2ForSequenceClassification +gpt2_cls +8 .* 124\.4M ' \
    "GPT2ForSequenceClassification's 124.4M parameters"
expect 0 "list --size cpu" "$EXE" list "$SUITE" --size cpu

CASES=BertForQuestionAnswering,GPT2ForSequenceClassification,BartForConditionalGeneration
expect 0 "run at cpu size" "$EXE" run "$SUITE" --size cpu --only "$CASES" --device cpu \
    --mode eager,compiled --precision fp32,amp --workload infer,train --threads 1 \
    --processes 1 --repeat 3 --warmup 1 --min-time 0 --max-time 0.05 -o "$TMP/r.json"
every_mode "$TMP/r.json" 12 BertForQuestionAnswering GPT2ForSequenceClassification \
    BartForConditionalGeneration

sh_lib_end zoo_hf
