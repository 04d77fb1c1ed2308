// faults: test-only switches from the environment that make a case fail
// or its samples noisy, so the tests can see the runner cope (docs/cli.md).
//
//   TCBENCH_TEST_FAULT=crash:NAME,hang:NAME,oom:NAME makes the child of case
//   NAME raise SIGSEGV, sleep forever, or exit as out of memory
//   (crash-later:NAME: every child of the case but the first, --processes;
//   hang-child:NAME: hang after starting a `sleep 300` of its own);
//   TCBENCH_TEST_NOISE=NAME[:MODE][,...] stretches the samples of case NAME
//   (every mode, or MODE's) by 1x, 2x, 3x, 1x, 2x, ... once they are
//   measured, before any statistics, so that the entry comes out unstable.
//
//   const char *f = bench_test_fault("mlp");   // "crash", "hang", ..., or NULL
#pragma once
#include <stdbool.h>

// The fault TCBENCH_TEST_FAULT asks of case `name`: "crash", "crash-later",
// "hang", "hang-child", "oom", or NULL.
const char *bench_test_fault(const char *name);
// Whether TCBENCH_TEST_NOISE names case `name` under `mode` (NAME alone
// names every mode).
bool bench_test_noise(const char *name, const char *mode);
