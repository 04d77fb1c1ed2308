// check: `tcbench check`, bad input found without running anything.
//
//   diag d;
//   if (bench_check_file("suites/smoke.yaml", &d) < 0) { diag_print(&d, stderr); exit(2); }
//
// A suite file (top-level `cases:`) is loaded and every case's model built
// for the default size and each size a case defines; a model file is
// loaded and built with batch 2.
#pragma once
#include "base/diag.h"

// 0, or -1 with d set.
int bench_check_file(const char *path, diag *d);
