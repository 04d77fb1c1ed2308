// autocast: automatic mixed precision as a graph pass, with PyTorch's CUDA
// autocast policy (torch.autocast for float16), used by both modes.
//
//   graph *amp;
//   if (autocast_build(m->g, DT_F16, &amp, err, sizeof err) < 0) ...
//
// Every op gets a rule (autocast_rule):
//   low      matmul, linear, convolutions, fused attention (and the math
//            form's matmuls): every
//            floating input cast to the low dtype; the GEMM accumulates in f32
//   f32      exp, log, rsqrt, recip, softmax, log_softmax, the norms, the
//            losses, sum and mean: every floating input cast to f32
//   promote  binary ops, where, concat: floating inputs of different dtypes
//            cast to the widest
//   keep     everything else (activations, views, pooling, embedding,
//            dropout, noise, casts): runs in its input's dtype
// Parameters stay f32 (master weights). A value is cast to a dtype once and
// the copy shared by every reader, so a weight's f16 copy is made once per
// step however often it is used. Integer and bool inputs are never cast.
// The pass runs on the forward graph, before autograd (autograd.h), whose
// backward of a cast is the cast back.
#pragma once
#include "core/graph.h"

#include <stdbool.h>
#include <stddef.h>

typedef enum { AC_KEEP, AC_LOW, AC_F32, AC_PROMOTE } autocast_rule_kind;

autocast_rule_kind autocast_rule(enum op op);
const char *autocast_rule_name(autocast_rule_kind r); // "keep", "low", "f32", "promote"

// A new graph: in's nodes in order with the casts the policy asks for
// (sources keep their names, dtypes and initializers). low is DT_F16 or
// DT_BF16 (PyTorch's policy is one table for both). 0, or
// -1 with err set.
int autocast_build(const graph *in, enum dtype low, graph **out, char *err, size_t cap);
// autocast_build with some values held in low whatever the policy says (a
// generation's KV caches, as the cache a framework keeps in the projections'
// dtype). pin: in->n flags. A pinned input or buffer is made in low; a
// pinned view, copy, concat or kv_write casts its floating inputs to low; any
// other pinned op has its result cast. kv_write, the one update a forward
// graph holds, keeps its sources' dtypes unless pinned.
int autocast_build_pinned(const graph *in, enum dtype low, const bool *pin, graph **out, char *err,
                          size_t cap);

// Autocast's cache of its casts of parameters, as torch.autocast keeps one
// within an enabled region (a leaf tensor that requires grad is cast once,
// and every later use in the region reads that copy): the decode steps of
// a generation read the copies its first step made. Each autocast cast of
// an f32 PARAM to f16 or bf16 in g becomes, in place (no node moves), a
// BUFFER of that dtype named "<param>:<dtype>", initializer INIT_ZEROS and
// ia1 AUTOCAST_CACHED (a value no other buffer's ia1 holds: autocast_copy),
// for the caller to fill with the cast of the parameter's values. Returns
// how many, or -1 out of memory.
#define AUTOCAST_CACHED 0x41430001
int autocast_cache_params(graph *g);
// Whether n is such a buffer.
static inline bool autocast_copy(const graph_node *n) {
    return n->op == OP_BUFFER && n->ia[0] == INIT_ZEROS && n->ia[1] == AUTOCAST_CACHED;
}
// The PARAM that cached cast v (autocast_cache_params) stands for, or -1
// when v is none.
int autocast_cached_param(const graph *g, int v);
