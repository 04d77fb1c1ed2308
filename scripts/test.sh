#!/usr/bin/env bash
# Quick start, part two: install dependencies, build, run every test.
# With --sanitize, also build under AddressSanitizer + UBSan (build-asan)
# and run the unit tests there, then fuzz the loaders briefly (scripts/fuzz.sh).
# With --torch, also check every smoke model against PyTorch
# (scripts/torch_side_by_side.py, docs/torch.md): it needs a Python with
# torch ($TCBENCH_TORCH_PYTHON, else venv-torch/bin/python, else python3).
# TCBENCH_BUILD=DIR scripts/test.sh --torch runs that check alone, with
# DIR/cli/tcbench (no deps, build or meson test). Not in CI.
set -euo pipefail
cd "$(dirname "$0")/.."

# The Python that has torch, or a one-line way to get one.
torch_python() {
  local py=${TCBENCH_TORCH_PYTHON:-}
  if [ -z "$py" ]; then
    if [ -x venv-torch/bin/python ]; then py=venv-torch/bin/python; else py=python3; fi
  fi
  if ! "$py" -c 'import torch, safetensors, yaml, numpy' 2>/dev/null; then
    echo "test.sh --torch: no PyTorch in $py; install it: python3 -m venv venv-torch && venv-torch/bin/pip install -r requirements-torch.txt (or set TCBENCH_TORCH_PYTHON)" >&2
    return 1
  fi
  echo "$py"
}

# Every smoke model, PyTorch eager against tcbench's eager: fails unless
# every case is PASS or PASS*.
torch_check() {
  local build=$1 py
  py=$(torch_python)
  torch_weights=$(mktemp -d "${TMPDIR:-/tmp}/tcbench-torch.XXXXXX")  # global: the trap's
  trap 'rm -rf "$torch_weights"' EXIT
  "$build/cli/tcbench" weights suites/smoke.yaml -o "$torch_weights" >/dev/null
  "$py" scripts/torch_side_by_side.py suites/smoke.yaml "$torch_weights" --strict
}

if [ "${1:-}" = "--torch" ] && [ -n "${TCBENCH_BUILD:-}" ]; then
  torch_check "$TCBENCH_BUILD"
  exit
fi
scripts/deps.sh
scripts/build.sh
# test_compile's models build into one kernel cache (keyed by the generated
# source, tests/test_compile.c cache_of): the sanitized run below loads
# what the plain run compiled instead of compiling the same C again
export TCBENCH_TEST_KCACHE="$PWD/build/test-kcache"
meson test -C build --print-errorlogs
if [ "${1:-}" = "--sanitize" ]; then
  [ -f build-asan/build.ninja ] ||
    meson setup build-asan -Db_sanitize=address,undefined -Dbuildtype=debugoptimized
  ninja -C build-asan
  # OpenBLAS and oneDNN keep process-lifetime allocations (thread pools,
  # primitive caches) that LeakSanitizer reports at exit; everything else
  # ASan and UBSan check stays on, and UBSan findings abort the test.
  ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C build-asan --suite unit --print-errorlogs --timeout-multiplier 4
  # the loaders under libFuzzer, 15 s each (tests/fuzz/, scripts/fuzz.sh)
  scripts/fuzz.sh 15
fi
if [ "${1:-}" = "--torch" ]; then
  torch_check build
fi
