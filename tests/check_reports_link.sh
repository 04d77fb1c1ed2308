#!/usr/bin/env bash
# reports/ links only base and results (docs/architecture.md): its programs
# need none of the engine's libraries, and reports/meson.build names no
# dependency but results_dep and base_dep. The same holds for tcbench itself
# (report, compare, export), which execs tcbench-engine for the rest.
#
#   tests/check_reports_link.sh ENGINE_EXE LEAN_EXE...
#
# ENGINE_EXE (tcbench-engine, which links the engine) must show the engine's
# libraries, so the check is seen to fail where they are; each LEAN_EXE
# (tcbench, test_report, test_compare) must show none. The meson.build rule
# is checked on the file, and on a copy that adds engine_dep, which must fail.
set -uo pipefail
src=${TCBENCH_SOURCE_DIR:?}
[ $# -ge 2 ] || { echo "usage: check_reports_link.sh ENGINE_EXE LEAN_EXE..."; exit 2; }
command -v readelf >/dev/null || { echo "skip: readelf not found"; exit 77; }

# The engine's own libraries: BLAS, oneDNN, CUDA, OpenMP, YAML, xxHash.
engine_libs='lib(openblas|blas|dnnl|cudart|cublas|cublasLt|nvrtc|cudnn|cuda|gomp|yaml|xxhash)[.-]'

# needed= the engine libraries the program $1 needs (DT_NEEDED), one a line.
engine_needed() {
  local dyn
  dyn=$(readelf -d "$1" 2>&1) || { echo "FAIL: readelf -d $1: $dyn"; return 2; }
  needed=$(sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' <<<"$dyn" | grep -E "^$engine_libs" || true)
  return 0
}

# bad= the dependencies of a reports meson.build ($1) other than results
# and base, one a line.
meson_deps() {
  bad=$(grep -oE 'dependencies[[:space:]]*:[^)]*' "$1" | sed 's/dependencies[[:space:]]*://' |
          tr -c 'A-Za-z0-9_\n' '\n' | grep -vE '^(results_dep|base_dep)?$' | sort -u || true)
}

fail=0
engine_exe=$1
shift
engine_needed "$engine_exe" || exit 1
if [ -z "$needed" ]; then
  echo "FAIL: $engine_exe needs none of the engine's libraries: the check could not fail"; fail=1
fi
for exe in "$@"; do
  engine_needed "$exe" || exit 1
  if [ -n "$needed" ]; then
    echo "FAIL: $exe needs the engine's libraries:" $needed; fail=1
  fi
done
meson_deps "$src/reports/meson.build"
if [ -n "$bad" ]; then
  echo "FAIL: reports/meson.build depends on more than results and base:" $bad; fail=1
fi
tmp=$(mktemp) || exit 1
trap 'rm -f "$tmp"' EXIT
sed 's/dependencies : results_dep/dependencies : [results_dep, engine_dep]/' \
  "$src/reports/meson.build" >"$tmp"
meson_deps "$tmp"
if [ "$bad" != engine_dep ]; then
  echo "FAIL: a reports/meson.build with engine_dep passes the check (found: '$bad')"; fail=1
fi
[ $fail -eq 0 ] && echo "check_reports_link: $# programs without the engine and reports/meson.build checked" ||
  echo "check_reports_link: some checks failed"
exit $fail
