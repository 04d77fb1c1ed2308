#!/usr/bin/env bash
# Installs the Debian packages tcbench needs to build, test and draw charts
# (and clang with its libFuzzer runtime, libclang-rt-dev, for scripts/fuzz.sh;
# ccache, which meson puts before the C compiler: a rebuild in a fresh clone
# compiles only what changed).
# Safe to run again: apt-get skips what is already there. `--list` prints
# the packages, one a line, and installs nothing (scripts/check-deps.sh
# proves the list complete).
set -euo pipefail
pkgs=(build-essential meson ninja-build pkg-config cmake
      libyaml-dev libjansson-dev libopenblas-openmp-dev libdnnl-dev
      libxxhash-dev libcmocka-dev gnuplot-nox
      libfftw3-dev
      libsqlite3-dev
      ocl-icd-opencl-dev
      clang libclang-rt-dev
      ccache)
if [ "${1:-}" = --list ]; then
  printf '%s\n' "${pkgs[@]}"
  exit 0
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
