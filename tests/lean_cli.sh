#!/usr/bin/env bash
# tcbench is two programs (docs/architecture.md): tcbench, which links no
# BLAS, oneDNN or CUDA, and tcbench-engine, which it execs for run, list,
# check and calibrate. This checks that:
#   - a report of a small results file peaks under 50 MB resident (tests/
#     maxrss.c measures; the same measure of `tcbench list`, which loads the
#     engine, is printed beside it);
#   - --help and --version answer from tcbench alone, and list works through
#     the exec;
#   - a missing or unusable tcbench-engine is one line naming execv and the
#     path, exit 2;
#   - `meson install` into a DESTDIR puts both where tcbench finds the engine.
# Needs TCBENCH_EXE, MAXRSS_EXE, TCBENCH_SOURCE_DIR and TCBENCH_BUILD_DIR
# (tests/meson.build sets them).
set -uo pipefail
exe=${TCBENCH_EXE:?}
maxrss=${MAXRSS_EXE:?}
src=${TCBENCH_SOURCE_DIR:?}
build=${TCBENCH_BUILD_DIR:?}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tcbench-lean-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
limit_kb=51200
fail=0
bad() {
  echo "FAIL: $*" >&2
  fail=1
}

# expect CODE DESC CMD...: output in $tmp/out, $tmp/err
expect() {
  local want=$1 desc=$2
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ $rc -eq "$want" ] || { bad "$desc: exit $rc, expected $want; stderr:"; cat "$tmp/err" >&2; return 1; }
  return 0
}

# Without gnuplot on PATH, so the figure is tcbench's own (gnuplot is a child).
expect 0 "report under maxrss" env PATH=/nonexistent "$maxrss" "$tmp/rss" "$exe" report \
  "$src/tests/fixtures/report_fixture.json" -o "$tmp/report" &&
  [ -f "$tmp/report/summary.md" ] || bad "report wrote no summary.md"
report_kb=$(cat "$tmp/rss" 2>/dev/null)
expect 0 "list through the exec" "$maxrss" "$tmp/rss" "$exe" list "$src/suites/smoke.yaml" &&
  grep -q mlp "$tmp/out" || bad "tcbench list printed no mlp case"
engine_kb=$(cat "$tmp/rss" 2>/dev/null)
echo "peak resident: tcbench report ${report_kb:-?} kB (limit $limit_kb), tcbench list ${engine_kb:-?} kB"
[ -n "$report_kb" ] && [ "$report_kb" -gt 0 ] || bad "no peak figure for report"
[ -n "$report_kb" ] && [ "$report_kb" -lt $limit_kb ] ||
  bad "tcbench report peaked at ${report_kb:-?} kB, over $limit_kb kB"

expect 0 "--version" "$exe" --version && grep -q '^tcbench ' "$tmp/out" || bad "--version: $(cat "$tmp/out")"
expect 0 "--help" "$exe" --help && grep -q 'tcbench-engine' "$tmp/out" || bad "--help names no tcbench-engine"
expect 2 "unknown command" "$exe" frobnicate

# tcbench alone in a folder: no engine beside it, nor under ../libexec.
mkdir -p "$tmp/alone/bin" && cp "$exe" "$tmp/alone/bin/tcbench" || exit 1
libexec=$("$exe" --help | sed -n 's/.* or in \(.*\);$/\1/p')
if [ -x "$libexec/tcbench-engine" ]; then
  echo "skip: the missing-engine check ($libexec/tcbench-engine is installed)"
else
  if expect 2 "missing engine" "$tmp/alone/bin/tcbench" run --help; then
    grep -qx "tcbench run: execv $tmp/alone/bin/tcbench-engine: No such file or directory (nor .*)" \
      "$tmp/err" && [ "$(wc -l <"$tmp/err")" -eq 1 ] || bad "missing engine: $(cat "$tmp/err")"
  fi
fi
touch "$tmp/alone/bin/tcbench-engine" && chmod 644 "$tmp/alone/bin/tcbench-engine" || exit 1
if expect 2 "engine not executable" "$tmp/alone/bin/tcbench" list "$src/suites/smoke.yaml"; then
  grep -qx "tcbench list: execv $tmp/alone/bin/tcbench-engine: Permission denied" "$tmp/err" ||
    bad "engine not executable: $(cat "$tmp/err")"
fi

if command -v meson >/dev/null; then
  if expect 0 "meson install" meson install -C "$build" --no-rebuild --destdir "$tmp/dest"; then
    bin=$(find "$tmp/dest" -type f -name tcbench | head -n 1)
    eng=$(find "$tmp/dest" -type f -name tcbench-engine | head -n 1)
    [ -n "$bin" ] && [ -n "$eng" ] || bad "install: tcbench '$bin', tcbench-engine '$eng'"
    [ -n "$bin" ] && expect 0 "installed list" "$bin" list "$src/suites/smoke.yaml" &&
      grep -q mlp "$tmp/out" || bad "the installed tcbench did not run tcbench-engine"
  fi
else
  echo "skip: the install check (no meson on PATH)"
fi
[ $fail -eq 0 ] && echo "lean_cli: all checks passed"
exit $fail
