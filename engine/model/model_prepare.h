// model_prepare: a model ready to run, as the runner measures it: built,
// autocast for AMP, the training step appended, values drawn from the seed.
//
//   train_opts o = train_opts_default();
//   model_prep mp = {.amp = DT_F16, .train = &o, .keep_grads = true, .seed = 7};
//   model *m; char err[512];
//   enum model_prep_step s = model_prepare(md, ov, nov, batch, &mp, &m, err, sizeof err);
//   if (s != MODEL_PREP_DONE) fail("%s: %s", model_prep_step_name(s), err);
//
// The order is fixed: autocast before autograd (autocast.h: the backward of
// a cast is the cast back), both before the values (autograd adds the
// optimizer's state buffers). A graph built by hand goes through the same
// steps after model_new with model_prepare_built.
#pragma once
#include "autodiff/autograd.h"
#include "core/dtype.h"
#include "model.h"
#include "modeldef.h"
#include "quantize.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct model_prep {
    enum dtype amp;          // DT_F16 or DT_BF16: autocast to it (AMP); DT_F32 (0): fp32
    const train_opts *train; // NULL: inference; else the training step with these options
    bool keep_grads;         // training: every gradient an output too (autograd.h)
    uint64_t seed;           // model_init_values
    bool no_values;          // the graph alone (m->values NULL): for the memory planners
    // weight-only quantization of the linears after the values (quantize.h):
    // weight_bits 0 (none), 8 or 4, per group of weight_group inputs, scales
    // of weight_scales (DT_F32 or DT_F16); inference only
    int weight_bits;
    int64_t weight_group;
    enum dtype weight_scales;
    model_quant_stats *quant; // out, may be NULL: what quantization did
    bool fused_attention;    // modeldef_opts.fused_attention (--attention sdpa)
    bool output_mean_loss;   // modeldef_opts.output_mean_loss (a suite's `loss: output_mean`)
} model_prep;

// The step that failed: a bad definition, a pass that refused the graph
// (both bad input), or memory for the values.
enum model_prep_step {
    MODEL_PREP_DONE,
    MODEL_PREP_BUILD,    // modeldef_build: err holds the located diagnostic
    MODEL_PREP_AUTOCAST, // autocast_build's message
    MODEL_PREP_AUTOGRAD, // autograd_build's message
    MODEL_PREP_VALUES,   // model_init_values: out of memory
    MODEL_PREP_QUANTIZE, // model_quantize_weights's message
    MODEL_PREP_STEP_COUNT
};

const char *model_prep_step_name(enum model_prep_step s); // "build", "autocast", ...

// md with its overrides at batch, prepared as o says. On failure *out is
// NULL and err says why.
enum model_prep_step model_prepare(const modeldef *md, const modeldef_override *ov, int nov,
                                   int64_t batch, const model_prep *o, model **out, char *err,
                                   size_t cap);
// The same steps on a model whose values are not drawn yet (model_new over
// a hand-built graph; g->loss set for training). On failure m is left for
// the caller to free.
enum model_prep_step model_prepare_built(model *m, const model_prep *o, char *err, size_t cap);
