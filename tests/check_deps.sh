#!/usr/bin/env bash
# scripts/check-deps.sh on this build: it passes with scripts/deps.sh's
# list as it is, and fails, naming the file and its package, when a package
# the build needs is dropped from the list (ocl-icd-opencl-dev, whose
# libOpenCL.so oneDNN's CMake config links: the package a fresh machine once
# lacked). Skipped (77) off Debian.
set -uo pipefail
src=${TCBENCH_SOURCE_DIR:?}
build=${TCBENCH_BUILD_DIR:?}
for tool in dpkg apt-cache; do
  command -v "$tool" >/dev/null || { echo "skip: $tool not found"; exit 77; }
done
fail=0
out=$("$src/scripts/check-deps.sh" "$build" 2>&1); rc=$?
if [ $rc -ne 0 ]; then echo "FAIL: check-deps on the full list: exit $rc: $out"; fail=1; fi
out=$("$src/scripts/check-deps.sh" "$build" --without ocl-icd-opencl-dev 2>&1); rc=$?
if [ $rc -ne 1 ]; then echo "FAIL: without ocl-icd-opencl-dev: exit $rc, expected 1: $out"; fail=1; fi
if ! grep -q 'libOpenCL.so comes from ocl-icd-opencl-dev' <<<"$out"; then
  echo "FAIL: the message does not name libOpenCL.so and its package: $out"; fail=1
fi
out=$("$src/scripts/check-deps.sh" "$build" --without libyaml-dev 2>&1); rc=$?
if [ $rc -ne 1 ] || ! grep -q 'libyaml.so comes from libyaml-dev' <<<"$out"; then
  echo "FAIL: without libyaml-dev: exit $rc: $out"; fail=1
fi
out=$("$src/scripts/check-deps.sh" "$build" --without libsqlite3-dev 2>&1); rc=$?
if [ $rc -ne 1 ] || ! grep -q 'libsqlite3.so comes from libsqlite3-dev' <<<"$out"; then
  echo "FAIL: without libsqlite3-dev (tcbench history): exit $rc: $out"; fail=1
fi
out=$("$src/scripts/check-deps.sh" "$build" --bogus 2>&1); rc=$?
if [ $rc -ne 2 ]; then echo "FAIL: a bad option: exit $rc, expected 2"; fail=1; fi
[ $fail -eq 0 ] && echo "check_deps: 5 checks passed" || echo "check_deps: some checks failed"
exit $fail
