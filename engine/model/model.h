// model: a built graph plus the values of its sources, ready to execute.
//
//   model *m;  diag d;
//   modeldef_build(def, overrides, nover, batch, &opts, &m, &d);   // modeldef.h
//   model_init_values(m, seed);     // parameters, buffers, inputs from the seed
//   eager_run(...); ref_run(...);   // both read m->values
//   model_free(m);
//
// values[i] is set for every source node (INPUT, PARAM, BUFFER, FULL) and NULL
// for the rest. The same seed gives the same values on every run and machine:
// each node draws from its own counter-based stream, keyed by seed and node id.
#pragma once
#include "core/graph.h"
#include "core/tensor.h"

#include <stdint.h>

typedef struct model {
    graph *g;
    char *name;   // "gpt2"
    char *family; // "decoder"
    int64_t batch;
    tensor **values; // g->n entries
} model;

model *model_new(graph *g, const char *name, const char *family, int64_t batch);
void model_free(model *m);
// Allocates and fills values for every source node. 0 on success, -1 when
// memory runs out.
int model_init_values(model *m, uint64_t seed);
// model_init_values, but each PARAM and BUFFER that `from` has under the
// same name, shape and dtype shares from's value (a view: the same
// storage) instead of drawing its own: the step models of a generation
// hold one set of weights, and a static cache that one step writes is the
// one the next reads.
int model_init_values_from(model *m, uint64_t seed, const model *from);
// Re-draw only the INPUT nodes (a new batch), from (seed, step).
int model_init_inputs(model *m, uint64_t seed, uint64_t step);
// T5's bucket of a relative position rel = key - query (Hugging Face's
// T5Attention._relative_position_bucket, in its float32 arithmetic): exact
// buckets for the first half, log-spaced ones up to max_distance, the last
// bucket past it; bidirectional splits the buckets by sign, else positive
// (future) positions all go to bucket 0.
int64_t model_relative_bucket(int64_t rel, int64_t buckets, int64_t max_distance,
                              bool bidirectional);
// The weight of input sample `in` in output sample `out` of torch's bicubic
// resize from n_in to n_out samples (F.interpolate(mode='bicubic',
// align_corners=False) without a scale factor): four taps around the source
// position (out + 0.5) n_in / n_out - 0.5, the cubic convolution with
// A = -0.75, indices clamped to the edges (an edge sample gathers the
// weights of the taps past it).
double model_bicubic_weight(int64_t out, int64_t in, int64_t n_out, int64_t n_in);
