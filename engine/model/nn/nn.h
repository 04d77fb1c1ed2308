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

// Generation (engine/bench/generate.h): how the attention layers keep keys
// and values across the steps of a decode, and where the step's tokens
// stand. NULL in nn_call: the model as written (one forward over its
// sequence). The node ids are the step graph's inputs, made by
// modeldef_build; the layers fill the lists, one entry per attention
// layer in build order.
typedef enum {
    NN_KV_CONCAT, // Hugging Face's eager cache: each step's inputs hold the past keys and values,
                  // concatenated with the new ones into fresh tensors that are its outputs
    NN_KV_STATIC, // gpt-fast's: one buffer per layer of max_len rows, written in place at a
                  // position given at run time (kv_write), read by fused attention up to kv_len
} nn_kv_mode;

#define NN_GEN_MAX_LAYERS 128

typedef struct nn_gen {
    nn_kv_mode kv;
    int64_t past;    // NN_KV_CONCAT: tokens the past inputs hold (0: the prefill)
    int64_t max_len; // the longest context: rotary tables, the static cache's rows
    int position_ids; // (T) i32: the absolute positions of the step's tokens
    int cache_pos;    // NN_KV_STATIC: () i32, the first row this step writes (position_ids[0])
    int kv_len;       // NN_KV_STATIC: () i32, rows valid after the write (cache_pos + T)
    int nlayers;
    int past_k[NN_GEN_MAX_LAYERS], past_v[NN_GEN_MAX_LAYERS];       // CONCAT inputs, -1 when past 0
    int present_k[NN_GEN_MAX_LAYERS], present_v[NN_GEN_MAX_LAYERS]; // CONCAT: the grown caches
    // the dtype the caches hold: set by the caller (DT_F32 as built; under AMP
    // the caller's autocast holds them in the low dtype, generate.c)
    enum dtype kv_dtype;
    int64_t kv_bytes_per_token; // bytes (in kv_dtype) of keys and values a token adds, every layer
} nn_gen;

typedef struct nn_call {
    const char *type;   // layer name: "linear"
    const char *prefix; // parameter name prefix: "layers.3.mlp.fc1"
    int nargs;
    const nn_arg *args;
    int ninputs;
    const int *inputs; // node ids; inputs[0] is the main input
    bool training;
    nn_gen *gen; // NULL, or a generation step's cache mode (above)
    bool fused_attention; // modeldef_opts.fused_attention
    // inside a shared repeat (docs/yaml.md): a parameter whose name exists
    // already is that one, used again, and must have its shape
    bool shared;
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
// A layer the study's models use that the engine knows of but has not
// built: why it is missing ("Reformer's hashing attention: ..."), or NULL
// for any other name. A model naming one loads, and its cases end
// model_fail_to_load with this reason instead of failing the whole run.
const char *nn_layer_unbuilt(const char *type);
// Their names, NULL-terminated.
const char *const *nn_unbuilt_names(void);

// The graph pieces of two composite layers (nn_vision.c), for tests that run
// them on every executor. NFNet's weight standardization: w (O, ...) with
// gain (O, 1, ...) -> (w - mean) / sqrt(var + eps) * gain * scale per
// output row. Drop path: x (N, ...) times a per-sample mask, 0 or 1 / (1 -
// p), dropout's mask stream `stream`.
int nn_standardize_weight(graph *g, int w, int gain, double scale, double eps);
int nn_drop_path_apply(graph *g, int x, double p, int64_t stream);
