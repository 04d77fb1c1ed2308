// check: `tcbench check`, bad input found without running anything.
//
//   diag d;
//   if (bench_check_file("suites/smoke.yaml", stdout, &d) < 0) { diag_print(&d, stderr); exit(2); }
//
// A suite file (top-level `cases:`) is loaded and every case's model built
// for the default size and each size a case defines; a model file is
// loaded and built with batch 2. A model that names a layer not built yet
// (nn_layer_unbuilt) is no error: one line on notes (NULL: none) says
// "suites/x.yaml: case 'Reformer': model_fail_to_load: models/x.yaml:9:7:
// layer 'lsh_attention' is not built yet (...)", and the rest goes on.
#pragma once
#include "base/diag.h"

#include <stdio.h>

// 0, or -1 with d set.
int bench_check_file(const char *path, FILE *notes, diag *d);
