// modeldef: YAML model templates (docs/yaml.md) and their instantiation.
//
//   modeldef *md; diag d;
//   if (modeldef_load("models/gpt2.yaml", &md, &d) < 0) { diag_print(&d, stderr); ... }
//   modeldef_override ov[] = {{"layers", "2", "suites/smoke.yaml", 7, 12}};
//   model *m;
//   if (modeldef_build(md, ov, 1, 4, &(modeldef_opts){0}, &m, &d) < 0) ...
//   ... model_init_values(m, seed) ...
//   model_free(m); modeldef_free(md);
//
// Loading parses and checks the file's structure (keys, layer names,
// expression syntax); building evaluates expressions with the overrides and
// $batch, expands repeat / residual / names, calls the layer library and
// infers every shape. Every error is located: file, line, column.
#pragma once
#include "base/diag.h"
#include "model.h"
#include "nn/nn.h"

#include <stdbool.h>

typedef struct modeldef modeldef;

typedef struct modeldef_override {
    const char *key;  // parameter name
    const char *expr; // a number or an expression over the model's params
    const char *file; // where the override was written, for errors
    int line, col;
} modeldef_override;

typedef struct modeldef_opts {
    bool training;   // build the training graph (loss as g->loss)
    bool graph_only; // no values will be made: a model larger than this machine is not refused
    // A generation step (nn.h): inputs whose dimension is written `$seq`
    // take gen_tokens (the step's tokens) instead, position_ids and (static
    // cache) cache_pos and kv_len inputs are made, and the outputs are the
    // model's, then each layer's present keys and values (CONCAT). NULL:
    // the model as written. The lists in *gen are filled.
    nn_gen *gen;
    int64_t gen_tokens;
    // attention layers emit one ATTENTION node (ops.def) in place of the
    // matmul-softmax-matmul chain (--attention sdpa)
    bool fused_attention;
    // training: the loss is the mean of each floating output's elements,
    // averaged over the outputs (PyTorch's harness's reduce_to_scalar_loss,
    // which it trains TorchBench's models with), in place of the model's
    // `loss:`; a model without one trains too (a suite's `loss: output_mean`)
    bool output_mean_loss;
} modeldef_opts;

int modeldef_load(const char *path, modeldef **out, diag *d);
void modeldef_free(modeldef *md);
const char *modeldef_name(const modeldef *md);
const char *modeldef_family(const modeldef *md);
// A model that names a layer not built yet (nn_layer_unbuilt) loads, but
// does not build: modeldef_build fails with the message below.
int modeldef_build(const modeldef *md, const modeldef_override *ov, int nov, int64_t batch,
                   const modeldef_opts *opts, model **out, diag *d);
// Whether the model names a layer the engine has not built yet; if so, d
// gets its place and "layer 'lsh_attention' is not built yet (reason)":
// the message of the study's model_fail_to_load.
bool modeldef_unbuilt(const modeldef *md, diag *d);
// Whether the model's training needs what the engine lacks (`train_needs:`);
// if so, d gets its place and "training needs second-order gradients: ...;
// not built yet", the message its train entries end model_fail_to_load
// with. Inference builds and runs as usual.
bool modeldef_train_unbuilt(const modeldef *md, diag *d);
