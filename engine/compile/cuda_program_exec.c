// The CUDA compiled executor (cuda_program.h) behind exec.h; built with the
// CUDA backend only.
#include "cuda_program.h"

#include "backend/cuda/cuda_device.h"
#include "exec_internal.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct cuda_compiled {
    cuda_program *p;
    exec_cuda_clock *clock;
} cuda_compiled;

static void cuda_compiled_free(void *ctx) {
    cuda_compiled *x = ctx;
    if (!x)
        return;
    exec_cuda_clock_free(x->clock); // before the program: the context may go with it
    cuda_program_free(x->p);
    free(x);
}

static int cuda_compiled_create(const model *m, const exec_opts *o, void **ctx, char *err,
                                size_t cap) {
    cuda_compiled *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(err, cap, "calloc: out of host memory");
        return -1;
    }
    if (cuda_program_new_shared(m, o->compile, o->tf32, exec_share_impl(o->share), &x->p, err,
                                cap) < 0 ||
        exec_cuda_clock_new(&x->clock, err, cap) < 0) {
        cuda_compiled_free(x);
        return -1;
    }
    *ctx = x;
    return 0;
}

static void cuda_compiled_set_step(void *ctx, uint64_t step) {
    cuda_program_set_step(((cuda_compiled *)ctx)->p, step);
}

static int cuda_compiled_run(void *ctx, tensor **outputs, exec_stats *st) {
    cuda_compiled *x = ctx;
    compiled_stats cs = {0};
    if (cuda_program_run(x->p, &cs) < 0 || (outputs && cuda_program_outputs(x->p, outputs) < 0))
        return -1;
    *st = (exec_stats){cs.kernels, cs.cast_kernels, cs.peak_bytes, cs.arena_bytes};
    return 0;
}

static int cuda_compiled_sync(void *ctx) { return cuda_program_sync(((cuda_compiled *)ctx)->p); }

static int cuda_compiled_outputs(void *ctx, tensor **outputs) {
    return cuda_program_outputs(((cuda_compiled *)ctx)->p, outputs);
}

static int cuda_compiled_output(void *ctx, int k, tensor **out) {
    return cuda_program_output(((cuda_compiled *)ctx)->p, k, out);
}

static const char *cuda_compiled_error(const void *ctx) {
    return cuda_program_error(((const cuda_compiled *)ctx)->p);
}

static int cuda_compiled_sample_start(void *ctx, bool flush_l2, char *err, size_t cap) {
    cuda_compiled *x = ctx;
    return exec_cuda_clock_start(x->clock, cuda_program_stream(x->p), flush_l2, err, cap);
}

static int cuda_compiled_sample_stop(void *ctx, double *seconds, char *err, size_t cap) {
    cuda_compiled *x = ctx;
    return exec_cuda_clock_stop(x->clock, cuda_program_stream(x->p), seconds, err, cap);
}

const exec_iface exec_cuda_compiled = {
    .device = "cuda",
    .family = "compiled",
    .call = "cuda_program_run",
    .probe = cuda_probe,
    .create = cuda_compiled_create,
    .set_step = cuda_compiled_set_step,
    .run = cuda_compiled_run,
    .sync = cuda_compiled_sync,
    .outputs = cuda_compiled_outputs,
    .error = cuda_compiled_error,
    .sample_start = cuda_compiled_sample_start,
    .sample_stop = cuda_compiled_sample_stop,
    .share_new = exec_cuda_share_new,
    .share_free = exec_cuda_share_free,
    .output = cuda_compiled_output,
    .free = cuda_compiled_free,
};
