#include "model_prepare.h"

#include "autodiff/autocast.h"

#include <assert.h>
#include <stdio.h>

static const char *const step_names[] = {"done", "build", "autocast", "autograd", "values",
                                          "quantize"};
static_assert(sizeof step_names / sizeof step_names[0] == MODEL_PREP_STEP_COUNT,
              "a model_prep_step without its name");

const char *model_prep_step_name(enum model_prep_step s) {
    return (unsigned)s < MODEL_PREP_STEP_COUNT ? step_names[s] : "?";
}

enum model_prep_step model_prepare_built(model *m, const model_prep *o, char *err, size_t cap) {
    if (o->amp != DT_F32) {
        graph *amp;
        if (autocast_build(m->g, o->amp, &amp, err, cap) < 0)
            return MODEL_PREP_AUTOCAST;
        graph_free(m->g);
        m->g = amp;
    }
    // the training step as one graph, before its values exist
    if (o->train && autograd_build(m->g, o->train, o->keep_grads, err, cap) < 0)
        return MODEL_PREP_AUTOGRAD;
    if (!o->no_values && model_init_values(m, o->seed) < 0) {
        snprintf(err, cap, "model_init_values: out of memory");
        return MODEL_PREP_VALUES;
    }
    if (o->weight_bits &&
        model_quantize_weights(m, o->weight_bits, o->weight_group, o->weight_scales, o->quant, err,
                               cap) < 0)
        return MODEL_PREP_QUANTIZE;
    return MODEL_PREP_DONE;
}

enum model_prep_step model_prepare(const modeldef *md, const modeldef_override *ov, int nov,
                                   int64_t batch, const model_prep *o, model **out, char *err,
                                   size_t cap) {
    modeldef_opts mo = {.training = o->train != NULL,
                        .fused_attention = o->fused_attention,
                        .output_mean_loss = o->output_mean_loss};
    diag d = {0};
    *out = NULL;
    model *m;
    if (modeldef_build(md, ov, nov, batch, &mo, &m, &d) < 0) {
        diag_format(&d, err, cap);
        return MODEL_PREP_BUILD;
    }
    enum model_prep_step s = model_prepare_built(m, o, err, cap);
    if (s != MODEL_PREP_DONE) {
        model_free(m);
        return s;
    }
    *out = m;
    return MODEL_PREP_DONE;
}
