// train_check: what the training workload compares, and how to replay it.
//
//   train_snapshot s0;  train_snapshot_take(m, &s0);    // every source's bytes
//   ... eager: two steps (eager_set_step 1, 2) ...
//   tensor *items[train_check_items(m)];
//   train_check_fill(m, eager_outputs, items);          // loss, gradients, then parameters
//   train_snapshot_restore(m, &s0);                     // the next executor starts alike
//
// The items of one executor's check are the outputs of its second step (the
// loss and each parameter's gradient, autograd.h) followed by each of those
// parameters' value after that step; train_reference gives the same list
// from the fp64 reference's own two steps.
//
// Two rules differ from inference. Eager's error against fp64 is relative
// with a floor: ||x - ref|| / max(||ref||, tol sqrt(n)), since some
// gradients are zero in exact arithmetic (a key bias under softmax, a bias
// right before a batch norm) and rounding leaves noise there. And a
// parameter whose gradient is such noise (at most 1e-5 of the largest
// gradient) is not compared after the steps: Adam's normalized update turns
// noise into steps of +-lr whose signs no two executors share.
#pragma once
#include "autodiff/autograd.h"
#include "model/model.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct train_snapshot {
    int n;
    void **data; // per node: a source's bytes, else NULL
} train_snapshot;

int train_snapshot_take(const model *m, train_snapshot *s);
void train_snapshot_restore(const model *m, const train_snapshot *s);
void train_snapshot_free(train_snapshot *s);

// Optimizer steps the check runs: 2, so that the second update (moments,
// bias correction at t = 2) is checked too; 1 under mixed precision, whose
// f16 gradients carry rounding noise that Adam's first update, lr * sign(g)
// in effect, turns into whole +-lr steps wherever a gradient is near zero:
// the second step's gradients then differ from fp64 by several percent in
// eager itself (docs/amp.md). TCBENCH_CHECK_STEPS overrides, for debugging.
uint64_t train_check_steps(bool amp);
int train_check_items(const model *m);
// items[0 .. noutputs) take the outputs (ownership moves); the parameters
// are copied. -1 when memory runs out.
int train_check_fill(const model *m, tensor *const *outputs, tensor **items);
void train_check_free_items(int n, tensor **items);
// Adam's first update is lr * g / (|g| + eps), about lr * sign(g), and a
// later one normalizes by moments that are themselves small where the
// gradient is: an element whose gradient's sign (in the checked, last step)
// is rounding noise moves its parameter by +lr in one executor and -lr in
// the other, however close the gradients. Such elements (the gradient's
// sign differs from the yardstick's) take the yardstick's value after the
// step, in the parameter items only; the gradients themselves are still
// compared. Both precisions, every check.
// train_mask_eager: eager against fp64 (eitems changed); train_mask_mode: a
// compiled-family mode's xitems against eager's (masked) eitems, by fp64's
// signs when ref is not NULL and also by eager's. Each returns the elements
// it set.
int64_t train_mask_eager(const model *m, tensor *const *eitems, double *const *ref);
int64_t train_mask_mode(const model *m, tensor *const *xitems, tensor *const *eitems,
                        double *const *ref);

// The fp64 reference's items after `steps` steps of its own (numel doubles each).
int train_reference(const model *m, uint64_t steps, double **items, char *err, size_t cap);
// The same from m's parameters and inputs rounded to low (f16, bf16), or,
// for low DT_F32, each moved by one ulp up or down (a fixed pattern): how
// far exact arithmetic moves when only the model's own values carry low's
// rounding, the baseline eager is held to in training (accuracy.h,
// base_rmse). Deep batch-normed convnets at random initialization, trained
// by Adam's normalized steps, are that sensitive. m's values are put back
// from s0.
int train_reference_rounded(const model *m, const train_snapshot *s0, enum dtype low, uint64_t steps,
                            double **items, char *err, size_t cap);
void train_item_name(const model *m, int k, char *buf, size_t cap);
// skip[k] for the parameters whose gradient is rounding noise (from ref, or
// eager's items when ref is NULL); returns how many, -1 without memory.
int train_check_skips(const model *m, double *const *ref, tensor *const *eitems, bool *skip);
// ||x - ref|| / max(||ref||, tol sqrt(n))
double train_item_error(const tensor *x, const double *ref, double tol);
