#!/usr/bin/env bash
# Fuzzes the loaders that read what users write or hand over: the model
# loader, the suite loader and the results reader (tests/fuzz/). Builds the
# libFuzzer harnesses into build-fuzz/ (clang, ASan + UBSan) and runs each
# for SECONDS (default 60) on a copy of its seed corpus,
# tests/fuzz/corpus/NAME/. Fails on any crash, leak, UB report, timeout
# (1 s on one input) or out-of-memory (512 MB); libFuzzer writes the input
# that did it into build-fuzz/findings/NAME/.
#
#   scripts/fuzz.sh [SECONDS] [NAME...]     NAME: model, suite, results
#
# New inputs that reach new code land in build-fuzz/corpus/NAME/, which the
# next run starts from; add the good ones to tests/fuzz/corpus/ by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
case "$secs" in '' | *[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, not '$secs'" >&2; exit 2 ;; esac
shift || true
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(model suite results)
for n in "${names[@]}"; do
  case "$n" in model | suite | results) ;; *) echo "fuzz.sh: no harness '$n' (model, suite, results)" >&2; exit 2 ;; esac
done
command -v clang >/dev/null || { echo "fuzz.sh: clang not found (scripts/deps.sh installs it)" >&2; exit 2; }

build=build-fuzz
if [ ! -f "$build/build.ninja" ]; then
  mkdir -p "$build"
  CC=clang meson setup "$build" -Dfuzz=enabled -Dcuda=disabled -Dnative=false \
    -Dbuildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false \
    -Dc_args=-fsanitize=fuzzer-no-link >"$build/setup.log" 2>&1 ||
    { cat "$build/setup.log" >&2; echo "fuzz.sh: meson setup $build failed" >&2; exit 2; }
fi
targets=()
for n in "${names[@]}"; do targets+=("tests/fuzz/fuzz_$n"); done
ninja -C "$build" "${targets[@]}" >/dev/null || { echo "fuzz.sh: building the harnesses failed" >&2; exit 2; }

# UB aborts like a crash; leaks are checked (the loaders free everything).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
fail=0
for n in "${names[@]}"; do
  corpus=$build/corpus/$n
  findings=$build/findings/$n
  mkdir -p "$corpus" "$findings"
  log=$build/fuzz-$n.log
  echo "fuzz.sh: $n for ${secs}s ($log)"
  if ! "$build/tests/fuzz/fuzz_$n" -max_total_time="$secs" -timeout=1 -rss_limit_mb=512 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="$findings/" \
      "$corpus" "tests/fuzz/corpus/$n" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "fuzz.sh: $n: a finding (input in $findings/; whole log $log)" >&2
    fail=1
    continue
  fi
  # the last status line: executions, coverage, corpus
  grep -E '^#[0-9]+' "$log" | tail -n 1 | sed "s/^/fuzz.sh: $n: /"
  grep -E '^stat::number_of_executed_units' "$log" | sed "s/^/fuzz.sh: $n: /"
done
exit $fail
