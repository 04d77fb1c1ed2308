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
// small. ref_run is one run at optimizer step 1 whose updates (SGD, ADAMW,
// RUNNING_STAT, training batch_norm) write only its own copies; a session
// keeps fp64 copies of the sources across runs, so training can be checked
// over several steps:
//
//   ref_session *s = ref_session_new(m, err, sizeof err);
//   for (uint64_t step = 1; step <= 3; step++)
//       ref_session_run(s, step, out, err, sizeof err);   // outputs as ref_run
//   const double *w = ref_session_source(s, wid);         // the updated parameter
//   ref_session_free(s);
#pragma once
#include "model/model.h"

#include <stddef.h>
#include <stdint.h>

int ref_run(const model *m, double **outputs, char *err, size_t errcap);
// ref_run with some sources' fp64 values given: given[i] (g->n entries,
// the array itself may be NULL) is borrowed for source i where set, the
// rest are converted from m->values. How a generation's reference hands
// one step's fp64 keys and values to the next: no rounding to f32 between.
int ref_run_given(const model *m, double *const *given, double **outputs, char *err,
                  size_t errcap);
// All node values (n doubles per node, NULL for nodes it skipped), for tests
// that look inside; caller frees each and the array.
double **ref_run_all(const model *m, char *err, size_t errcap);

typedef struct ref_session ref_session;
// fp64 copies of every source's current value (from m->values); m->values
// is never written. NULL with err set when a value is missing or memory runs out.
ref_session *ref_session_new(const model *m, char *err, size_t errcap);
// One run at optimizer step `step` (from 1): outputs as ref_run; update ops
// and training batch_norm write the session's copies, so the next run sees them.
// INPUT nodes are read again from m->values (the batch of this step, as
// model_init_inputs draws it); PARAM, BUFFER and FULL values are the session's.
int ref_session_run(ref_session *s, uint64_t step, double **outputs, char *err, size_t errcap);
// A source node's current value (numel doubles, row-major); NULL for other nodes.
const double *ref_session_source(const ref_session *s, int node);
void ref_session_free(ref_session *s);
