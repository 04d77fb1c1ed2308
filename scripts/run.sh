#!/usr/bin/env bash
# Quick start, part one: install dependencies, build, and run the smoke suite.
# Arguments go to `tcbench run` (e.g. scripts/run.sh --size small).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
exec build/cli/tcbench run "$@"
