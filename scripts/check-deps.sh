#!/usr/bin/env bash
# Proves scripts/deps.sh complete: every system file that the configured
# build links or includes (`meson introspect --dependencies`) must belong to
# a package deps.sh installs, or to one those depend on (Depends and
# Pre-Depends, recursively; Recommends don't count, since deps.sh installs
# with --no-install-recommends). Files under /usr/local (the CUDA toolkit)
# come from no Debian package and are not checked.
# The dependencies are the project's, so both programs (tcbench and
# tcbench-engine, cli/meson.build) and the tests are covered.
#
#   scripts/check-deps.sh [BUILD_DIR] [--without PKG]...
#
# --without drops a package from the list first, to see what would break
# (the test of this script uses it). Exit 0 when complete; 1 naming each
# file and its package otherwise; 2 on bad usage or a build not configured.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
without=()
while [ $# -gt 0 ]; do
  case "$1" in
    --without) [ $# -ge 2 ] || { echo "check-deps: --without needs a package" >&2; exit 2; }
               without+=("$2"); shift 2 ;;
    -*) echo "check-deps: unknown option $1" >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
[ -f "$build/build.ninja" ] || { echo "check-deps: $build is not a configured build (run scripts/build.sh)" >&2; exit 2; }
for tool in dpkg apt-cache meson; do
  command -v "$tool" >/dev/null || { echo "check-deps: $tool not found (a Debian machine is needed)" >&2; exit 2; }
done

listed=()
while read -r p; do
  skip=0
  for w in "${without[@]+"${without[@]}"}"; do [ "$p" = "$w" ] && skip=1; done
  [ $skip -eq 1 ] || listed+=("$p")
done < <(scripts/deps.sh --list)

# The closure: every package apt-cache reaches from the list through
# Depends and Pre-Depends (virtual names, <...>, kept as they are: a real
# package providing one is listed beside it).
declare -A have=()
for p in "${listed[@]}"; do have[$p]=1; done
while IFS= read -r line; do
  case "$line" in
    " "*Depends:*|" |"*Depends:*) name=${line#*: } ;;
    " "*) continue ;;
    *) name=$line ;;
  esac
  name=${name#<}; name=${name%>}; name=${name%%:*}
  [ -n "$name" ] && have[$name]=1
done < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
           --no-replaces --no-enhances "${listed[@]}" 2>/dev/null)

# Every /usr path the build's dependencies name: files, include and library
# directories, and -lNAME resolved in the -L directories and the system's.
deps=$(meson introspect "$build" --dependencies)
mapfile -t paths < <(printf '%s\n' "$deps" | grep -oE '"(-I|-L)?/usr/[^"]*"' | tr -d '"' |
                     sed -E 's/^-[IL]//' | sort -u)
libdirs=(/usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib /lib)
while read -r lib; do
  for d in "${libdirs[@]}" $(printf '%s\n' "$deps" | grep -oE '"-L[^"]*"' | tr -d '"' | sed 's/^-L//'); do
    if [ -e "$d/lib$lib.so" ]; then paths+=("$d/lib$lib.so"); break; fi
  done
done < <(printf '%s\n' "$deps" | grep -oE '"-l[^"]*"' | tr -d '"' | sed 's/^-l//' | sort -u)

bad=0
checked=0
for f in "${paths[@]}"; do
  case "$f" in /usr/local/*) continue ;; esac
  f=${f%/}
  [ -e "$f" ] || continue
  checked=$((checked + 1))
  owners=$(dpkg -S "$f" 2>/dev/null | grep -v '^diversion by' | sed 's/: .*//' | tr ',' '\n' |
           sed 's/^ *//; s/:.*//' | sort -u || true)
  if [ -z "$owners" ]; then
    real=$(readlink -f "$f")
    owners=$(dpkg -S "$real" 2>/dev/null | grep -v '^diversion by' | sed 's/: .*//' | tr ',' '\n' |
             sed 's/^ *//; s/:.*//' | sort -u || true)
  fi
  if [ -z "$owners" ]; then
    echo "check-deps: $f belongs to no installed Debian package" >&2
    bad=1
    continue
  fi
  ok=0
  for o in $owners; do [ -n "${have[$o]+x}" ] && ok=1; done
  if [ $ok -eq 0 ]; then
    echo "check-deps: $f comes from $(echo $owners | tr ' ' '/'), which scripts/deps.sh does not install (nor any package it depends on)" >&2
    bad=1
  fi
done
if [ $bad -ne 0 ]; then
  exit 1
fi
echo "check-deps: ${#listed[@]} packages in scripts/deps.sh (${#have[@]} with their dependencies) cover the $checked system paths the build uses"
