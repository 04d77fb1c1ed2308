#!/usr/bin/env bash
# Builds the CUDA backend here and packs it for a GPU machine that cannot
# build it (no network for the Debian packages, another distribution):
#
#   scripts/gpu-bundle.sh [OUT.tar.xz]     # default build-gpu/bundle.tar.xz
#
# 1. meson setup build-gpu -Dcuda=enabled -Dnative=false (no instructions
#    the GPU machine's CPU may lack) and a build;
# 2. the binaries scripts/gpu-check.sh runs in its prebuilt mode (tcbench,
#    tcbench-engine, the unit tests that reach the GPU), and the shared
#    libraries they need that are neither the C library nor the CUDA
#    toolkit's (the GPU machine brings its own CUDA 12/13 and cuDNN 9):
#    build-gpu/bundle-libs, except libstdc++, libgcc_s, libgomp and
#    libOpenCL, which go to build-gpu/bundle-fallback (the machine's own,
#    newer ones first), with cuDNN's small loader library;
# 3. one xz archive of them (its large dictionary shares the CUDA kernels
#    every binary embeds: about 20 MB).
#
# On the GPU machine, unpack it in a checkout at the same absolute path as
# here (the build records the source directory; a symbolic link will do),
# then:
#
#   export LD_LIBRARY_PATH=$PWD/build-gpu/bundle-libs:/usr/local/cuda/lib64:$PWD/build-gpu/bundle-fallback
#   TCBENCH_GPU_CHECK_PREBUILT=1 scripts/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-gpu/bundle.tar.xz}
build="build-gpu"
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" -Dcuda=enabled -Dnative=false -Dbuildtype=release
fi
ninja -C "$build"
tests=$(scripts/gpu-check.sh --tests)
bins="$build/cli/tcbench $build/cli/tcbench-engine"
for t in $tests; do bins="$bins $build/tests/$t"; done
rm -rf "$build/bundle-libs" "$build/bundle-fallback"
mkdir -p "$build/bundle-libs" "$build/bundle-fallback"
# shellcheck disable=SC2086
ldd $bins | awk '/=>/ && $3 ~ /^\// {print $3}' | sort -u | while read -r so; do
  case "$so" in
    */cuda*/*) ;; # the toolkit's: the GPU machine has its own
    */libc.so.* | */libm.so.* | */libdl.so.* | */libpthread.so.* | */librt.so.*) ;;
    */libstdc++.so.* | */libgcc_s.so.* | */libgomp.so.* | */libOpenCL.so.*)
      cp -L "$so" "$build/bundle-fallback/" ;;
    *) cp -L "$so" "$build/bundle-libs/" ;;
  esac
done
# shellcheck disable=SC2086
cudnn=$(ldd $bins | awk '/libcudnn\.so/ && $3 ~ /^\// && !f {print $3; f = 1}')
[ -n "$cudnn" ] && cp -L "$cudnn" "$build/bundle-fallback/"
# shellcheck disable=SC2086
XZ_OPT=-9 tar cJf "$out" $bins "$build/bundle-libs" "$build/bundle-fallback"
nlib=$(find "$build/bundle-libs" -type f | wc -l)
nfall=$(find "$build/bundle-fallback" -type f | wc -l)
echo "gpu-bundle: $out ($(du -h "$out" | cut -f1)); $nlib libraries, $nfall fallbacks"
