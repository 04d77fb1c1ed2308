// suite: a YAML list of cases (docs/yaml.md, "Suites").
//
//   suite *s; diag d;
//   if (suite_load("suites/smoke.yaml", "small", &s, &d) < 0) { diag_print(&d, stderr); ... }
//   for (int i = 0; i < s->ncases; i++) {
//       suite_case *c = &s->cases[i];   // c->name, c->model_path, c->batch, c->overrides
//       modeldef_load(c->model_path, ...); modeldef_build(md, c->overrides, c->noverrides, ...);
//   }
//   suite_free(s);
//
// A case names a model (`model: gpt2` is <suite dir>/../models/gpt2.yaml, or
// under $TCBENCH_MODELS when set; a value with '/' or ending .yaml is a path
// relative to the suite file), a batch size, parameter overrides, and
// optional named sizes; --size NAME applies that size's overrides over the
// case's own. Suite-level defaults give the modes, precisions, workloads and
// the optimizer of training (`optimizer: sgd`, or `{adamw: {lr: 0.001}}`),
// which a case may override.
#pragma once
#include "autodiff/autograd.h"
#include "base/diag.h"
#include "modeldef.h"

#include <stdint.h>

// the most child processes defaults.processes may ask for: BENCH_MAX_PROCESSES
// (results.h; engine/bench/plan.c asserts they agree)
#define SUITE_MAX_PROCESSES 64

// tolerance: the accuracy checks' tolerance per workload in both precisions,
// over the built-in ones (engine/bench/accuracy.c); 0: the built-in
typedef struct suite_tolerance {
    double infer, train;
} suite_tolerance;

typedef struct suite_case {
    char *name;       // unique within the suite; defaults to the model name
    char *model_path; // resolved file path
    int64_t batch;
    // the generate workload: prompt tokens and tokens decoded after them
    // (0: not given, the runner's defaults)
    int64_t prompt_len, new_tokens;
    int64_t rounds; // the chat workload: user turns of prompt_len, new_tokens answered each
    modeldef_override *overrides; // strings owned by the suite
    int noverrides;
    int line, col; // where the case starts
    bool study;    // one of the PyTorch 2.0 study's own models (`study: true`)
    train_opts optim; // the training workload's optimizer (suite default, or the case's)
    suite_tolerance tol; // the suite's defaults.tolerance, then the case's keys over it
    // `loss: output_mean`: train on the mean of the model's outputs
    // (modeldef_opts.output_mean_loss), not its `loss:`
    bool output_mean_loss;
} suite_case;

typedef struct suite {
    char *path;
    char *name;
    suite_case *cases;
    int ncases;
    // defaults, as lists of words: {"eager", "compiled"}, {"fp32"}, {"infer"}
    char **modes;
    int nmodes;
    char **precisions;
    int nprecisions;
    char **workloads;
    int nworkloads;
    train_opts optim; // defaults.optimizer; AdamW, lr 0.01 when unset
    suite_tolerance tol; // defaults.tolerance; 0s when unset
    bool output_mean_loss; // defaults.loss: output_mean
    // defaults.processes: child processes per group for this suite's cases
    // when the run does not say (--processes); 0: not given
    int processes;
} suite;

// size may be NULL (no size). A size the suite does not define is an error.
int suite_load(const char *path, const char *size, suite **out, diag *d);
void suite_free(suite *s);
