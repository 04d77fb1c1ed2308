// The CUDA eager executor (eager_cuda.h) behind exec.h; built with the
// CUDA backend only.
#include "eager_cuda.h"

#include "backend/cuda/cuda_device.h"
#include "exec_internal.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct cuda_eager {
    eager_cuda *e;
    exec_cuda_clock *clock;
} cuda_eager;

static void cuda_eager_free(void *ctx) {
    cuda_eager *x = ctx;
    if (!x)
        return;
    exec_cuda_clock_free(x->clock); // before the executor: the context may go with it
    eager_cuda_free(x->e);
    free(x);
}

static int cuda_eager_create(const model *m, const exec_opts *o, void **ctx, char *err,
                             size_t cap) {
    char why[600];
    cuda_eager *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(err, cap, "calloc: out of host memory");
        return -1;
    }
    eager_cuda_opts eo = {.allow_tf32 = o->tf32, .share = exec_share_impl(o->share)};
    if (eager_cuda_new(m, &eo, &x->e, why, sizeof why) < 0) {
        snprintf(err, cap, "eager_cuda_new: %s", why);
        cuda_eager_free(x);
        return -1;
    }
    if (exec_cuda_clock_new(&x->clock, err, cap) < 0) {
        cuda_eager_free(x);
        return -1;
    }
    *ctx = x;
    return 0;
}

static void cuda_eager_set_step(void *ctx, uint64_t step) {
    eager_cuda_set_step(((cuda_eager *)ctx)->e, step);
}

static int cuda_eager_run(void *ctx, tensor **outputs, exec_stats *st) {
    cuda_eager *x = ctx;
    eager_stats es = {0};
    if (eager_cuda_run(x->e, &es) < 0 || (outputs && eager_cuda_outputs(x->e, outputs) < 0))
        return -1;
    *st = (exec_stats){es.kernels, es.cast_kernels, es.peak_bytes, 0};
    return 0;
}

static int cuda_eager_sync(void *ctx) { return eager_cuda_sync(((cuda_eager *)ctx)->e); }

static int cuda_eager_outputs(void *ctx, tensor **outputs) {
    return eager_cuda_outputs(((cuda_eager *)ctx)->e, outputs);
}

static int cuda_eager_output(void *ctx, int k, tensor **out) {
    return eager_cuda_output(((cuda_eager *)ctx)->e, k, out);
}

static int cuda_eager_pass(void *from, int k, void *to, int input) {
    return eager_cuda_pass(((cuda_eager *)from)->e, k, ((cuda_eager *)to)->e, input);
}

static const char *cuda_eager_error(const void *ctx) {
    return eager_cuda_error(((const cuda_eager *)ctx)->e);
}

static int cuda_eager_sample_start(void *ctx, bool flush_l2, char *err, size_t cap) {
    cuda_eager *x = ctx;
    return exec_cuda_clock_start(x->clock, eager_cuda_stream(x->e), flush_l2, err, cap);
}

static int cuda_eager_sample_stop(void *ctx, double *seconds, char *err, size_t cap) {
    cuda_eager *x = ctx;
    return exec_cuda_clock_stop(x->clock, eager_cuda_stream(x->e), seconds, err, cap);
}

const exec_iface exec_cuda_eager = {
    .device = "cuda",
    .family = "eager",
    .call = "eager_cuda_run",
    .probe = cuda_probe,
    .create = cuda_eager_create,
    .set_step = cuda_eager_set_step,
    .run = cuda_eager_run,
    .sync = cuda_eager_sync,
    .outputs = cuda_eager_outputs,
    .error = cuda_eager_error,
    .sample_start = cuda_eager_sample_start,
    .sample_stop = cuda_eager_sample_stop,
    .share_new = exec_cuda_share_new,
    .share_free = exec_cuda_share_free,
    .output = cuda_eager_output,
    .pass = cuda_eager_pass,
    .free = cuda_eager_free,
};
