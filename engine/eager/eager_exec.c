// The CPU eager executor (eager.h) behind exec.h.
#include "eager.h"

#include "exec_internal.h"

#include <stdio.h>

static int cpu_eager_create(const model *m, const exec_opts *o, void **ctx, char *err, size_t cap) {
    (void)o; // tf32 is a device's; the CPU computes f32 in f32
    if (!(*ctx = eager_new(m))) {
        snprintf(err, cap, "eager_new: out of memory");
        return -1;
    }
    return 0;
}

static void cpu_eager_set_step(void *ctx, uint64_t step) { eager_set_step(ctx, step); }

static int cpu_eager_run(void *ctx, tensor **outputs, exec_stats *st) {
    eager_stats es = {0};
    if (eager_run(ctx, outputs, &es) < 0)
        return -1;
    *st = (exec_stats){es.kernels, es.cast_kernels, es.peak_bytes, 0};
    return 0;
}

static const char *cpu_eager_error(const void *ctx) { return eager_error(ctx); }

static void cpu_eager_free(void *ctx) { eager_free(ctx); }

const exec_iface exec_cpu_eager = {
    .device = "cpu",
    .family = "eager",
    .call = "eager_run",
    .create = cpu_eager_create,
    .set_step = cpu_eager_set_step,
    .run = cpu_eager_run,
    .error = cpu_eager_error,
    .free = cpu_eager_free,
};
