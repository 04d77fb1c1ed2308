#!/usr/bin/env bash
# Configures (once) and builds tcbench into ./build. Extra arguments go to
# `meson setup`, e.g. scripts/build.sh -Dnative=false.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  meson setup build "$@"
fi
ninja -C build
