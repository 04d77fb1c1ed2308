// Shared between the layer files of engine/nn: argument access and error
// reporting for one nn_build call.
#pragma once
#include "nn.h"

typedef struct nn_ctx {
    graph *g;
    const nn_call *c;
    nn_result *r;
} nn_ctx;

typedef int (*nn_build_fn)(nn_ctx *x);

// Argument access (keys were checked against the layer's table first).
int nn_arg_index(const nn_ctx *x, const char *key); // -1 when absent
bool nn_has(const nn_ctx *x, const char *key);
int64_t nn_int(const nn_ctx *x, const char *key, int64_t dflt);
double nn_float(const nn_ctx *x, const char *key, double dflt);
// An activation layer's keys, in its table row's order, are its op's fa
// attributes: each one given replaces fa[k] (the caller's default). Their count.
int nn_activation_attrs(const nn_ctx *x, double *fa, int cap);
bool nn_bool(const nn_ctx *x, const char *key, bool dflt);
const char *nn_str(const nn_ctx *x, const char *key, const char *dflt);
// An int or a list of n ints ([kh, kw]); a single int is repeated.
int nn_ints(nn_ctx *x, const char *key, int n, int64_t *out, int64_t dflt);
// A list of any length (reshape's shape, permute's dims); returns its length or -1.
int nn_list(nn_ctx *x, const char *key, int max, int64_t *out);

// Errors: message, at a key (or the layer when key is NULL). Return -1.
int nn_fail(nn_ctx *x, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
// Turn a graph builder failure (id < 0) into the layer's error.
int nn_check(nn_ctx *x, int id);

// "prefix.role" parameter names.
void nn_pname(const nn_ctx *x, const char *role, char *buf, size_t cap);
int nn_param(nn_ctx *x, const char *role, int ndim, const int64_t *shape, enum init_kind init,
             double scale);
// A buffer shared by every layer that asks for the same name (masks, rotary tables).
int nn_shared_buffer(nn_ctx *x, const char *name, enum dtype t, int ndim, const int64_t *shape,
                     enum init_kind init, double arg);
int nn_emit(nn_ctx *x, int id); // set the single output; returns 0 or -1
int nn_in(const nn_ctx *x, int i);
const graph_node *nn_node(const nn_ctx *x, int id);

// Layer builders, by file.
int nn_lstm(nn_ctx *x); // nn_rnn.c
int nn_normalize(nn_ctx *x);
int nn_ctc(nn_ctx *x);
int nn_l2_normalize(nn_ctx *x, int t); // nn_xcit.c
int nn_attention(nn_ctx *x); // nn_attention.c
int nn_convbert_attention(nn_ctx *x);
int nn_relative_position_bias(nn_ctx *x);
int nn_levit_attention_bias(nn_ctx *x);
int nn_gpsa(nn_ctx *x);
int nn_linear_to(nn_ctx *x, int in, int64_t out, bool bias, const char *role); // nn_layers.c
