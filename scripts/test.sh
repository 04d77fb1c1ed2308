#!/usr/bin/env bash
# Quick start, part two: install dependencies, build, run every test.
# With --sanitize, also build under AddressSanitizer + UBSan (build-asan)
# and run the unit tests there, then fuzz the loaders briefly (scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
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
