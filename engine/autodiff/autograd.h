// autograd: a training step as one graph (the AOT Autograd idea).
//
//   modeldef_opts mo = {.training = true};        // the graph has g->loss
//   modeldef_build(def, ..., &mo, &m, &d);
//   train_opts o = train_opts_default();           // AdamW, lr 0.01
//   if (autograd_build(m->g, &o, true, err, sizeof err) < 0) ...   // before model_init_values
//   model_init_values(m, seed);                    // optimizer state starts at zero
//   eager_set_step(e, t); eager_run(e, out, &st);  // out: loss, then one gradient per parameter
//
// autograd_build appends to the forward graph (a) the backward: for each op,
// in reverse order, the ops of its derivative (engine/core/ops.def's backward
// rows, or forward ops such as matmul on transposed views), gradients of a
// value read twice summed with add, as PyTorch's engine accumulates them;
// and (b) the optimizer: one update node per parameter that has a gradient,
// with its state as BUFFER sources ("<param>.exp_avg" ...), placed after
// every other node so that it runs after every read of the parameter. The
// outputs become the loss and, for checks, each parameter's gradient, so
// that a step's results can be compared between executors.
//
// Both executors run this one graph: eager op by op (each gradient freed
// after its last use, as autograd frees what a backward node saved), the
// compiler through its passes (fusion across forward and backward, one
// fused optimizer kernel).
//
// With grad_scaler (dynamic loss scaling, PyTorch's torch.amp.GradScaler;
// docs/amp.md) the step also holds the scaler: three BUFFER scalars,
// "grad_scaler.scale" (init_scale), "grad_scaler.growth_tracker" (0) and
// "optimizer.step" (0, the optimizer steps taken: PyTorch's state['step']);
// the backward is seeded with the scale instead of 1 (the gradient of
// loss * scale; the loss output stays unscaled); found_inf nodes check
// every gradient times 1/scale; each update takes (scale, found_inf, step)
// as extra sources, skips itself when found_inf is set, unscales its
// gradient in f32 and uses step + 1 as Adam's t and SGD's first-step rule,
// so a skipped step advances nothing, as in PyTorch; and one scaler_update
// after every update backs the scale off or grows it. Gradient outputs
// (keep_grads) are unscaled, as p.grad after scaler.step.
#pragma once
#include "core/graph.h"

#include <stdbool.h>
#include <stddef.h>

typedef enum { OPTIM_ADAMW, OPTIM_SGD } optim_kind;

typedef struct train_opts {
    optim_kind optim;
    double lr;
    double beta1, beta2, eps;    // AdamW
    double weight_decay;
    double momentum, dampening;  // SGD
    bool nesterov;
    // dynamic loss scaling (PyTorch's GradScaler; off by default, as in its harness)
    bool grad_scaler;
    double init_scale;     // 2^16
    double growth_factor;  // 2: the scale after growth_interval good steps in a row
    double backoff_factor; // 0.5: the scale after a step with an inf or NaN gradient
    int growth_interval;   // 2000
    // DP-SGD (opacus' PrivacyEngine; functorch's per-sample recipe): off
    // when dp_max_grad_norm is 0. Otherwise the backward keeps one gradient
    // per sample (linear, conv2d and group_norm weights; any other use of a
    // parameter is an error), clips each sample's to this norm over all
    // parameters, sums them over the batch and adds Gaussian noise of
    // standard deviation dp_noise_multiplier * dp_max_grad_norm / batch
    // (OP_NOISE, the seeded generator). The gradient outputs are the clipped
    // sums divided by the batch, before the noise.
    double dp_max_grad_norm, dp_noise_multiplier;
} train_opts;

// AdamW with PyTorch's defaults (betas 0.9, 0.999; eps 1e-8; weight decay
// 0.01) and lr 0.01, the rate PyTorch's benchmark harness trains with; the
// grad scaler off, with GradScaler's defaults for when it is turned on.
train_opts train_opts_default(void);
// SGD with PyTorch's defaults except momentum 0.9 and lr 0.01 (scaler as above).
train_opts train_opts_sgd(void);
const char *optim_name(optim_kind k); // "adamw", "sgd"

// Appends the backward of g->loss and the optimizer; 0 or -1 with err set.
// The outputs become the loss, then (keep_grads) each trained parameter's
// gradient, in parameter order. Without keep_grads a gradient lives only
// until its update, which a compiler may run as soon as it is complete.
int autograd_build(graph *g, const train_opts *o, bool keep_grads, char *err, size_t cap);

// After autograd_build: number of parameters with gradients (the outputs
// after the loss) and, for output i >= 1, the parameter node it belongs to.
int autograd_param_of_output(const graph *g, int output);
// After autograd_build with grad_scaler: the node of one of its state
// buffers ("grad_scaler.scale", "grad_scaler.growth_tracker",
// "optimizer.step"), or -1.
int autograd_scaler_state(const graph *g, const char *name);
