// nn: the layer library. Expands one layer of a model file (linear,
// attention, conv2d, ...) into graph ops and the parameters it owns.
//
//   nn_arg args[] = {{.key = "out", .v = {.type = NN_V_INT, .i = 64}}};
//   nn_call c = {.type = "linear", .prefix = "blocks.0.fc1",
//                .nargs = 1, .args = args, .ninputs = 1, .inputs = &x};
//   nn_result r;
//   if (nn_build(g, &c, &r) < 0)   // r.err says why; r.bad_arg names the key at fault
//       ...
//   int y = r.out[0];
//
// Each layer checks its keys against a table (unknown key, wrong type,
// missing required key are errors naming the key) and its inputs' shapes,
// then calls the graph builder. Parameters are named prefix + "." + role
// ("blocks.0.fc1.weight"). Layers build the inference graph or, with
// c.training, the training one (dropout kept, batch norm in batch statistics).
// docs/yaml.md lists every layer with its keys.
#pragma once
#include "core/graph.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum { NN_V_INT, NN_V_FLOAT, NN_V_BOOL, NN_V_STR, NN_V_LIST } nn_vtype;

typedef struct nn_value {
    nn_vtype type;
    int64_t i;  // NN_V_INT (and NN_V_BOOL as 0/1)
    double f;   // NN_V_FLOAT (and NN_V_INT converted)
    const char *s;
    int n;      // NN_V_LIST
    struct nn_value *items;
    int line, col; // where the value stands in the YAML file
} nn_value;

typedef struct nn_arg {
    const char *key;
    nn_value v;
    int line, col; // where the key stands
} nn_arg;

typedef struct nn_call {
    const char *type;   // layer name: "linear"
    const char *prefix; // parameter name prefix: "layers.3.mlp.fc1"
    int nargs;
    const nn_arg *args;
    int ninputs;
    const int *inputs; // node ids; inputs[0] is the main input
    bool training;
    bool fused_attention; // modeldef_opts.fused_attention
} nn_call;

#define NN_MAX_OUT 8

typedef struct nn_result {
    int out[NN_MAX_OUT];
    int nout;
    int bad_arg; // index into args of the key at fault, or -1
    char err[320];
} nn_result;

int nn_build(graph *g, const nn_call *c, nn_result *r);
bool nn_layer_known(const char *type);
// For the loss: keys and inputs as for a layer ("cross_entropy", "mse").
bool nn_loss_known(const char *type);
// Names of all layers, NULL-terminated (for docs and "did you mean").
const char *const *nn_layer_names(void);
