// axes: the names of what a case can vary (results/axes.h, the schema's),
// and which values this build can run.
//
//   int v = bench_axis_parse(BENCH_AXIS_PRECISION, "amp");   // BENCH_PREC_AMP, or -1
//   if (!bench_axis_available(BENCH_AXIS_PRECISION, v))
//       fprintf(stderr, "--precision amp: not available in this build yet\n");
//
// bench_axis_available is the one place that says which values run: every
// value but cuda, which needs the CUDA backend in the build.
#pragma once
#include "results/axes.h"

#include <stdbool.h>

bool bench_axis_available(enum bench_axis a, int v);
