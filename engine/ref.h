// ref: the fp64 reference interpreter. Naive loops, obviously right: the
// oracle that eager and compiled results are checked against.
//
//   double *out[8];
//   if (ref_run(m, out, err, sizeof err) < 0) ...   // g->noutputs arrays
//   // out[i] holds numel(g->outputs[i]) doubles in row-major order
//   free(out[0]);
//
// It reads the same m->values (converted to double) and computes every op in
// double precision, materializing views. Slow by design; models in tests are
// small.
#pragma once
#include "model.h"

#include <stddef.h>

int ref_run(const model *m, double **outputs, char *err, size_t errcap);
// All node values (n doubles per node, NULL for nodes it skipped), for tests
// that look inside; caller frees each and the array.
double **ref_run_all(const model *m, char *err, size_t errcap);
