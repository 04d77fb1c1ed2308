#!/usr/bin/env bash
# The layering of docs/architecture.md, checked on the #include lines:
#
#   - nothing under engine/ includes from cli/, reports/ or dev/;
#   - nothing under engine/backend/ includes from engine/compile/,
#     engine/bench/ or the executors (engine/eager/);
#   - engine/ref/, the reference, includes nothing from engine/backend/;
#   - engine/core/ includes only from engine/core/ and engine/base/;
#   - engine/base/ includes nothing from outside engine/base/;
#   - engine/results/, the results schema, includes only from
#     engine/results/ and engine/base/;
#   - reports/ includes only from reports/, engine/results/ and engine/base/
#     (it links only those two: tests/check_reports_link.sh checks the link).
#
# An include is resolved as the compilers resolve it: next to the including
# file, then from the source root, then from engine/ (the build's include
# directories); one that resolves to no file here (<...>, a generated
# header) is not checked. A breach names the file, the line and the include.
#
#   tests/check_layers.sh              # the test: the tree passes, and a copy
#                                      # with a forbidden include fails
#   tests/check_layers.sh --tree DIR   # check DIR only: 0 clean, 1 breaches
#
# ALLOWED lists the breaches the code still has, each with the issue that
# removes it. An entry that no longer matches anything fails the check too,
# so the list only shrinks.
set -uo pipefail

# "file include": exact pairs, the include as written. Empty: the tree has
# no breach left.
ALLOWED=()

# norm=$1 with a/b/../c made a/c and ./ dropped (no subshells: this runs
# for every include).
normalize() {
  local IFS=/ part parts=()
  for part in $1; do
    case $part in
      '' | .) ;;
      ..) [ ${#parts[@]} -gt 0 ] && unset 'parts[${#parts[@]}-1]' ;;
      *) parts+=("$part") ;;
    esac
  done
  norm="${parts[*]}"
}

# why= the rule file (relative to the root) breaks by including target
# (resolved, relative), or empty.
rule_broken() {
  local file=$1 target=$2
  why=
  case $file in
    reports/*)
      case $target in
        reports/* | engine/results/* | engine/base/*) ;;
        *) why="reports/ includes only from reports/, engine/results/ and engine/base/" ;;
      esac
      return ;;
  esac
  case $target in
    cli/* | reports/* | dev/*)
      why="engine/ includes nothing from cli/, reports/ or dev/"; return ;;
  esac
  case $file in
    engine/backend/*)
      case $target in
        engine/compile/* | engine/bench/* | engine/eager/*)
          why="engine/backend/ includes nothing from engine/compile/, engine/bench/ or engine/eager/"
          return ;;
      esac ;;
  esac
  case $file in
    engine/base/*)
      case $target in
        engine/base/*) ;;
        *) why="engine/base/ includes nothing from outside engine/base/"; return ;;
      esac ;;
  esac
  case $file in
    engine/ref/*)
      case $target in
        engine/backend/*) why="the reference (engine/ref/) includes nothing from engine/backend/" ;;
      esac ;;
    engine/core/*)
      case $target in
        engine/core/* | engine/base/*) ;;
        *) why="engine/core/ includes only from engine/core/ and engine/base/" ;;
      esac ;;
    engine/results/*)
      case $target in
        engine/results/* | engine/base/*) ;;
        *) why="engine/results/ includes only from engine/results/ and engine/base/" ;;
      esac ;;
  esac
}

# Prints each breach of the tree at $1; returns 1 when there is one (or a
# stale ALLOWED entry), else 0.
check_tree() {
  local root=$1 fail=0 file line inc cand target why norm entry allowed a
  local -A used=()
  [ -d "$root/engine" ] || { echo "check_layers: no engine/ under $root"; return 2; }
  while IFS= read -r hit; do
    file=${hit%%:*}
    file=${file#"$root"/}
    hit=${hit#*:}
    line=${hit%%:*}
    inc=${hit#*:}
    inc=${inc#*\"}
    inc=${inc%%\"*}
    target=
    for cand in "${file%/*}/$inc" "$inc" "engine/$inc"; do
      normalize "$cand"
      if [ -f "$root/$norm" ]; then target=$norm; break; fi
    done
    [ -n "$target" ] || continue
    rule_broken "$file" "$target"
    [ -n "$why" ] || continue
    entry="$file $inc"
    allowed=
    for a in "${ALLOWED[@]}"; do [ "$a" = "$entry" ] && allowed=1; done
    if [ -n "$allowed" ]; then
      used[$entry]=1
      continue
    fi
    echo "$file:$line: #include \"$inc\" ($target): $why"
    fail=1
  done < <(grep -rnE --include='*.c' --include='*.h' --include='*.cu' --include='*.cuh' \
             --include='*.def' '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$root/engine" \
             $( [ -d "$root/reports" ] && echo "$root/reports") | sort)
  for entry in "${ALLOWED[@]}"; do
    if [ -z "${used[$entry]:-}" ]; then
      echo "allowed but no longer found: '$entry': remove it from ALLOWED in tests/check_layers.sh"
      fail=1
    fi
  done
  return $fail
}

if [ "${1:-}" = --tree ]; then
  check_tree "${2:?usage: check_layers.sh --tree DIR}"
  exit $?
fi

src=${TCBENCH_SOURCE_DIR:?}
fail=0
out=$(check_tree "$src"); rc=$?
if [ $rc -ne 0 ]; then echo "FAIL: the source tree breaks the layering:"; echo "$out"; fail=1; fi

# The check must fail on a forbidden include: a copy of the tree with one
# added, per rule, each on a fresh copy of the file.
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
cp -R "$src/engine" "$src/cli" "$src/reports" "$tmp/" || { echo "FAIL: copying the tree"; exit 1; }
expect_breach() { # file include
  local file=$1 inc=$2
  cp "$tmp/$file" "$tmp/keep" || { echo "FAIL: no $file"; fail=1; return; }
  printf '#include "%s"\n' "$inc" >>"$tmp/$file"
  out=$(check_tree "$tmp"); rc=$?
  if [ $rc -ne 1 ]; then
    echo "FAIL: $file including $inc: exit $rc, expected 1: $out"; fail=1
  elif ! grep -qF "$file:" <<<"$out" || ! grep -qF "#include \"$inc\"" <<<"$out"; then
    echo "FAIL: $file including $inc: the message does not name both: $out"; fail=1
  fi
  mv "$tmp/keep" "$tmp/$file"
}
expect_breach engine/core/graph.c cli/cli.h
expect_breach engine/bench/runner.c ../../cli/cli.h
expect_breach engine/backend/cpu/cpu_iter.c compile/compile.h
expect_breach engine/backend/cuda/cuda_alloc.c eager/eager.h
expect_breach engine/backend/cuda/cuda_rt.c bench/exec.h
expect_breach engine/ref/ref.c backend/cpu/cpu_kernels.h
expect_breach engine/base/sbuf.c core/tensor.h
expect_breach engine/core/tensor.c model/model.h
expect_breach engine/results/results.c bench/plan.h
expect_breach engine/results/stats.c core/tensor.h
expect_breach reports/resfile.c bench/runner.h
expect_breach reports/report.c engine/core/graph.h
# an allowed pair passes while it is there, and fails once it is gone
ALLOWED=('engine/core/graph.c cli/cli.h')
cp "$tmp/engine/core/graph.c" "$tmp/keep"
printf '#include "cli/cli.h"\n' >>"$tmp/engine/core/graph.c"
out=$(check_tree "$tmp"); rc=$?
if [ $rc -ne 0 ]; then echo "FAIL: an allowed breach: exit $rc: $out"; fail=1; fi
mv "$tmp/keep" "$tmp/engine/core/graph.c"
out=$(check_tree "$tmp"); rc=$?
if [ $rc -ne 1 ] || ! grep -qF "no longer found: 'engine/core/graph.c cli/cli.h'" <<<"$out"; then
  echo "FAIL: a stale allowed entry: exit $rc: $out"; fail=1
fi
[ $fail -eq 0 ] && echo "check_layers: the tree, 13 breaches, an allowed one and a stale entry checked" || echo "check_layers: some checks failed"
exit $fail
