#!/usr/bin/env bash
# The GPU check: everything that needs an NVIDIA GPU, in one call of under
# 8 minutes on a Debian machine with the CUDA toolkit (docs/cuda.md).
#
#   scripts/gpu-check.sh        # builds in build-gpu/, logs and results in build-gpu/gpu-check/
#
# 1. the Debian build packages (scripts/deps.sh; offline, .deb files in
#    $TCBENCH_DEBS are installed first), 2. the GPU line of nvidia-smi,
# 3. meson with -Dcuda=enabled into build-gpu and a build, 4. the unit tests
# with the CUDA ones (test_op_table runs every op case on the CUDA
# executors against the fp64 reference), 5. the smoke suite on the GPU (tcbench run --device cuda),
# eager against compiled, in fp32 and AMP inference, once more with
# --flush-l2 --tf32 on two models, then fp32 and AMP training, 6. the
# generate workload on the GPU (suites/generate.yaml at --size cpu, eager
# against compiled, fp32 and AMP, then int4 weights on two models: tokens a
# second and the check against the fp64 decode; a four-round chat with the
# cache kept and not, every way giving eager's tokens), a probe of where eager's
# time goes (TCBENCH_PROFILE=eager; cuBLASLt off), and last the tables.
# The steps run in the order of what they tell: inference, the probe,
# generation and chat, then training. Exit status: 0 when every step that
# exists passed, 1 when one failed, 2 when the machine cannot run the check.
# TCBENCH_GPU_CHECK_BUDGET (seconds, default 450) bounds the whole run;
# TCBENCH_GPU_CHECK_ARGS adds options to every tcbench run;
# TCBENCH_GPU_CHECK_STEPS (names, space-separated: fp32-infer amp-infer probe
# generate-fp32 generate-amp generate-int4 chat amp-train fp32-train flush-tf32)
# runs only those of steps 5 and 6, and TCBENCH_GPU_CHECK_TESTS="" no unit
# tests (prebuilt mode), to rerun what failed.
#
# A GPU machine without the build packages (no network, another
# distribution) takes a build made elsewhere (scripts/gpu-bundle.sh: built
# with -Dcuda=enabled -Dnative=false, its shared libraries beside it,
# unpacked at the same absolute path) and TCBENCH_GPU_CHECK_PREBUILT=1. Steps 1 and 3 are then skipped and step 4
# runs the unit tests that reach the GPU (TCBENCH_GPU_CHECK_TESTS, default
# below) directly, in parallel, without meson.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# the unit tests that reach the GPU (prebuilt mode; scripts/gpu-bundle.sh
# packs them): `scripts/gpu-check.sh --tests` prints them
gpu_tests="test_op_table test_scaler test_runner test_nvrtc test_cuda_build test_attention test_quant"
if [ "${1:-}" = --tests ]; then
  echo "$gpu_tests"
  exit 0
fi
root=$(pwd)
build=${TCBENCH_GPU_CHECK_BUILD:-$root/build-gpu}
out=${TCBENCH_GPU_CHECK_OUT:-$build/gpu-check}
budget=${TCBENCH_GPU_CHECK_BUDGET:-450}
# more options for every tcbench run (--processes 1 for a quicker pass)
read -r -a extra <<<"${TCBENCH_GPU_CHECK_ARGS:-}"
start=$(date +%s)
mkdir -p "$out"
status=0
declare -a summary tables

say() { printf '[gpu-check %3ds] %s\n' "$(($(date +%s) - start))" "$*"; }
note() { summary+=("$1"); }
# seconds left of the budget, at most $1
left() {
  local l=$((budget - ($(date +%s) - start)))
  [ "$l" -gt "$1" ] && l=$1
  [ "$l" -lt 1 ] && l=1
  echo "$l"
}
# run NAME CAP CMD...: the command under a time limit, its output in a log
run_step() {
  local name=$1 cap=$2
  shift 2
  local t rc
  t=$(left "$cap")
  say "$name (at most ${t}s)"
  timeout --kill-after=10 "$t" "$@" >"$out/$name.log" 2>&1
  rc=$?
  [ $rc -eq 124 ] && echo "(timed out after ${t}s)" >>"$out/$name.log"
  return $rc
}
finish() {
  echo
  say "summary"
  for s in "${summary[@]}"; do echo "  $s"; done
  for t in "${tables[@]}"; do
    echo
    cat "$t"
  done
  exit "$status"
}

# ---- 0. the toolkit -----------------------------------------------------------
if ! command -v nvcc >/dev/null; then
  for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
    [ -x "$d/nvcc" ] && export PATH="$d:$PATH" && break
  done
fi
if ! command -v nvcc >/dev/null; then
  say "no nvcc on PATH or in /usr/local/cuda/bin: install the CUDA toolkit"
  status=2
  note "toolkit: MISSING"
  finish
fi
cuda_bin=$(dirname "$(command -v nvcc)")
LD_LIBRARY_PATH="$(dirname "$cuda_bin")/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
note "toolkit: $(nvcc --version | tail -n 2 | head -n 1)"

# ---- 1. Debian packages ---------------------------------------------------------
prebuilt=${TCBENCH_GPU_CHECK_PREBUILT:-0}
if [ "$prebuilt" = 1 ]; then
  # scripts/gpu-bundle.sh's libraries first, then the machine's CUDA
  # (above); of its fallbacks (libstdc++, OpenMP, cuDNN's loader) only those
  # the machine lacks, since a directory on LD_LIBRARY_PATH is searched
  # before the system's own, newer ones
  [ -d "$build/bundle-libs" ] && LD_LIBRARY_PATH="$build/bundle-libs:$LD_LIBRARY_PATH"
  if [ -d "$build/bundle-fallback" ]; then
    rm -rf "$build/bundle-missing"
    mkdir -p "$build/bundle-missing"
    for f in "$build/bundle-fallback"/*; do
      n=$(basename "$f")
      ldconfig -p 2>/dev/null | grep -q "^[[:space:]]*$n " ||
        [ -e "$(dirname "$cuda_bin")/lib64/$n" ] || ln -s "$f" "$build/bundle-missing/$n"
    done
    LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$build/bundle-missing"
  fi
  export LD_LIBRARY_PATH
  if [ ! -x "$build/cli/tcbench" ]; then
    say "TCBENCH_GPU_CHECK_PREBUILT=1 but there is no $build/cli/tcbench"
    status=2
    note "prebuilt build: MISSING ($build/cli/tcbench)"
    finish
  fi
  missing=$(ldd "$build/cli/tcbench" "$build/cli/tcbench-engine" 2>&1 | grep "not found" | sort -u)
  if [ -n "$missing" ]; then
    say "the prebuilt binaries lack shared libraries (LD_LIBRARY_PATH):"
    echo "$missing"
    status=2
    note "prebuilt build: libraries missing: $(tr '\n' ' ' <<<"$missing")"
    finish
  fi
  note "packages: skipped (prebuilt build in $build)"
elif [ -n "${TCBENCH_DEBS:-}" ] && ls "$TCBENCH_DEBS"/*.deb >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  run_step debs-local 120 $sudo dpkg -i "$TCBENCH_DEBS"/*.deb ||
    say "dpkg -i of \$TCBENCH_DEBS reported errors (see $out/debs-local.log)"
fi
if [ "$prebuilt" = 1 ]; then
  :
elif ! run_step deps 180 scripts/deps.sh; then
  say "scripts/deps.sh failed; the last lines:"
  tail -n 5 "$out/deps.log"
  missing=""
  for p in yaml-0.1 jansson libxxhash openblas cmocka; do
    pkg-config --exists "$p" 2>/dev/null || missing="$missing $p"
  done
  command -v meson >/dev/null || missing="$missing meson"
  command -v ninja >/dev/null || missing="$missing ninja"
  if [ -n "$missing" ]; then
    say "missing:$missing (offline? put the .deb files in a folder and set TCBENCH_DEBS)"
    status=2
    note "packages: MISSING$missing"
    finish
  fi
  note "packages: deps.sh failed, but everything needed is present"
else
  note "packages: ok"
fi

# ---- 2. the GPU --------------------------------------------------------------------
if command -v nvidia-smi >/dev/null; then
  gpu=$(nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap,clocks.max.sm \
    --format=csv,noheader 2>&1 | head -n 1)
  say "GPU: $gpu"
  note "GPU: $gpu"
else
  say "no nvidia-smi"
  note "GPU: no nvidia-smi"
fi

# ---- 3. configure and build -----------------------------------------------------------
if [ "$prebuilt" = 1 ]; then
  note "build: prebuilt ($build)"
elif [ ! -f "$build/build.ninja" ]; then
  if ! run_step setup 120 meson setup "$build" -Dcuda=enabled -Dbuildtype=release; then
    tail -n 20 "$out/setup.log"
    status=2
    note "meson setup -Dcuda=enabled: FAILED ($out/setup.log)"
    finish
  fi
fi
if [ "$prebuilt" = 1 ]; then
  :
elif ! run_step build 300 ninja -C "$build"; then
  grep -E "error|FAILED" "$out/build.log" | head -n 20
  status=1
  note "build: FAILED ($out/build.log)"
  finish
else
  note "build: ok ($build)"
fi

# ---- 4. unit tests, the CUDA ones included ---------------------------------------------
if [ "$prebuilt" = 1 ]; then
  # the tests that run kernels on the GPU or build them with NVRTC, each
  # under its own limit, side by side
  tests_list=${TCBENCH_GPU_CHECK_TESTS-$gpu_tests}
  [ -z "$tests_list" ] && note "unit tests: none (TCBENCH_GPU_CHECK_TESTS is empty)"
  t=$(left "${TCBENCH_GPU_CHECK_TEST_CAP:-240}")
  say "unit tests ($tests_list; at most ${t}s)"
  rm -f "$out"/test-*.log # an earlier run's, which the notes below would read
  for name in $tests_list; do
    (
      TCBENCH_SOURCE_DIR=$root timeout --kill-after=10 "$t" "$build/tests/$name" >"$out/test-$name.log" 2>&1
      echo "exit $?" >>"$out/test-$name.log"
    ) &
  done
  wait
  failed=""
  for name in $tests_list; do
    rc=$(tail -n 1 "$out/test-$name.log" | awk '{print $2}')
    ok=$(grep -c "^\[       OK \]" "$out/test-$name.log")
    bad=$(grep -c "^\[  FAILED  \]" "$out/test-$name.log")
    echo "  $name: exit $rc, $ok OK, $bad FAILED lines"
    [ "$rc" = 0 ] || failed="$failed $name"
  done
  if [ -z "$tests_list" ]; then
    :
  elif [ -z "$failed" ]; then
    note "unit tests ($tests_list): ok"
  else
    status=1
    note "unit tests FAILED:$failed ($out/test-*.log)"
    for name in $failed; do
      echo "---- $name"
      grep -E "FAILED|Error|error|fail" "$out/test-$name.log" | head -n 15
    done
  fi
  [ -f "$out/test-test_op_table.log" ] &&
    note "test_op_table: $(grep -m1 "^op table" "$out/test-test_op_table.log" || echo "no header line")"
  if grep -qs "no GPU, the CUDA executors are skipped" "$out/test-test_op_table.log" &&
    command -v nvidia-smi >/dev/null; then
    status=1
    note "test_op_table skipped its CUDA executors on a machine with a GPU: $(grep -m1 'no GPU, the CUDA executors are skipped' "$out/test-test_op_table.log")"
  fi
else
  if run_step tests 240 meson test -C "$build" --suite unit --print-errorlogs --num-processes 4; then
    note "unit tests: ok"
  else
    status=1
    note "unit tests: FAILED ($out/tests.log)"
  fi
  grep -E "^ *[0-9]+/[0-9]+ " "$out/tests.log" | sed 's/^/  /'
  ops=$(grep -E "test_op_table +(OK|FAIL|SKIP)" "$out/tests.log" | awk '{print $5}')
  note "test_op_table: ${ops:-did not run}"
  if grep -q "no GPU, the CUDA executors are skipped" "$build/meson-logs/testlog.txt" 2>/dev/null &&
    command -v nvidia-smi >/dev/null; then
    status=1 # nvidia-smi sees a GPU, yet the backend found none usable
    note "test_op_table skipped its CUDA executors on a machine with a GPU: $(grep -m1 'no GPU, the CUDA executors are skipped' "$build/meson-logs/testlog.txt")"
  fi
  cp "$build/meson-logs/testlog.txt" "$out/testlog.txt" 2>/dev/null
fi

# ---- 5. the smoke suite on the GPU --------------------------------------------------------
tcbench="$build/cli/tcbench"
# what a run says of a part the backend does not have yet
unavailable="not available|not in this build|CPU only in this build"
# whether step $1 is to run (TCBENCH_GPU_CHECK_STEPS)
want() {
  [ -z "${TCBENCH_GPU_CHECK_STEPS:-}" ] || [[ " $TCBENCH_GPU_CHECK_STEPS " == *" $1 "* ]]
}
smoke() {
  local name=$1
  shift
  want "$name" || return 0
  local res="$out/$name.json" rc
  run_step "$name" 120 "$tcbench" run suites/smoke.yaml --device cuda --mode eager,compiled \
    --repeat 10 -o "$res" "$@" "${extra[@]}"
  rc=$?
  if [ $rc -eq 0 ]; then
    note "smoke $name: ok"
  elif grep -q -E "$unavailable" "$out/$name.log"; then
    note "smoke $name: not available yet ($(grep -m1 -E "$unavailable" "$out/$name.log"))"
    return
  else
    status=1
    note "smoke $name: FAILED (exit $rc, $out/$name.log)"
  fi
  tables+=("$out/$name.log")
}
# ---- 6. generation on the GPU --------------------------------------------------------------
# eager's step models (the past handed from step to step on the device) and
# the compiled prefill and decode step (one captured graph replayed a
# token), every entry checked against the fp64 decode (docs/generation.md)
gen() {
  local name=$1 cap=$2 workload=$3 precision=$4
  shift 4
  want "$name" || return 0
  local res="$out/$name.json" rc
  run_step "$name" "$cap" "$tcbench" run suites/generate.yaml --size cpu --device cuda \
    --workload "$workload" --precision "$precision" --mode eager,compiled --repeat 3 \
    --max-time 2 -o "$res" "$@" "${extra[@]}"
  rc=$?
  if [ $rc -eq 0 ] && [ -f "$res" ] &&
    ! grep -Eq '"status": "(fail_accuracy|fail_to_run|error|oom|crash|timeout)"' "$res"; then
    note "$workload $name: ok"
  else
    status=1
    note "$workload $name: FAILED (exit $rc, $out/$name.log)"
  fi
  if [ -f "$res" ]; then # each entry's case, mode, status, tokens a second and check
    grep -E '^ *"(name|mode|status|tokens_per_s|ttft_s|ttft_reuse_s|ttft_anew_s|rule|message)": ' "$res" |
      sed 's/^ */  /' >"$out/$name.figures"
    tables+=("$out/$name.figures")
  fi
  tables+=("$out/$name.log")
}
# where eager's time goes: the host's time an op (TCBENCH_PROFILE=eager
# times each op's call, which on the GPU only queues it) beside the step's;
# and the GEMM library path, cuBLASLt against cublasGemmEx (the mlp)
probe() {
  want probe || return 0
  local log="$out/probe.log"
  run_step probe-eager 60 env TCBENCH_PROFILE=eager TCBENCH_LOG=cudnn "$tcbench" run \
    suites/smoke.yaml --device cuda --mode eager --precision fp32,amp --workload infer \
    --only resnet,mobilenet_v2,gpt2 --repeat 5 --processes 1 -o "$out/probe-eager.json" &&
    note "probe eager: ok" || note "probe eager: FAILED ($out/probe-eager.log)"
  # the convolutions through cuDNN's legacy call instead of cached plans
  run_step probe-legacy 60 env TCBENCH_PROFILE=eager TCBENCH_CUDNN_LEGACY=1 "$tcbench" run \
    suites/smoke.yaml --device cuda --mode eager --precision fp32,amp --workload infer \
    --only resnet,mobilenet_v2 --repeat 5 --processes 1 -o "$out/probe-legacy.json" &&
    note "probe cuDNN legacy: ok" || note "probe cuDNN legacy: FAILED ($out/probe-legacy.log)"
  run_step probe-nolt 60 env TCBENCH_CUDA_DISABLE_LT=1 "$tcbench" run suites/smoke.yaml \
    --device cuda --mode eager,compiled --precision fp32 --workload infer --only mlp \
    --repeat 10 --processes 1 -o "$out/probe-nolt.json" &&
    note "probe no cuBLASLt: ok" || note "probe no cuBLASLt: FAILED ($out/probe-nolt.log)"
  {
    echo "== eager's host time an op kind (TCBENCH_PROFILE=eager), fp32 and amp"
    grep -E "eager profile|^(resnet|gpt2) " "$out/probe-eager.log" | head -n 80
    echo "== cuDNN: convolutions with an execution plan, and with the legacy call"
    grep -c "an execution plan" "$out/probe-eager.log"
    grep -c "no plan\|no execution plan" "$out/probe-eager.log"
    grep -m3 "no execution plan" "$out/probe-eager.log"
    echo "== the same with TCBENCH_CUDNN_LEGACY=1 (resnet, mobilenet_v2)"
    grep -E "eager profile: conv2d|^(resnet|mobilenet_v2) " "$out/probe-legacy.log"
    echo "== mlp with TCBENCH_CUDA_DISABLE_LT=1"
    grep -E "^mlp " "$out/probe-nolt.log"
  } >"$log"
  tables+=("$log")
}
# in order of what they tell: inference, generation, then training
smoke fp32-infer --precision fp32 --workload infer
smoke amp-infer --precision amp --workload infer
probe
gen generate-fp32 100 generate fp32
gen generate-amp 100 generate amp
gen generate-int4 100 generate fp32 --weights int4 --only llama,chatglm2
# four rounds, the cache kept and not: every way gives eager's tokens
gen chat 100 chat fp32 --only llama,chatglm2 --rounds 4 --prompt-len 16 --new-tokens 16
smoke amp-train --precision amp --workload train
smoke fp32-train --precision fp32 --workload train
smoke flush-tf32 --precision fp32 --workload infer --flush-l2 --tf32 --only mlp,gpt2 --repeat 5

finish
