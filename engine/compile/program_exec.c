// The CPU compiled executor (compile.h, program.c) behind exec.h.
#include "compile.h"

#include "exec_internal.h"

static int cpu_compiled_create(const model *m, const exec_opts *o, void **ctx, char *err,
                               size_t cap) {
    compiled *c;
    if (compile_model(m, o->compile, &c, err, cap) < 0)
        return -1;
    *ctx = c;
    return 0;
}

static void cpu_compiled_set_step(void *ctx, uint64_t step) { compiled_set_step(ctx, step); }

static int cpu_compiled_run(void *ctx, tensor **outputs, exec_stats *st) {
    compiled_stats cs = {0};
    if (compiled_run(ctx, outputs, &cs) < 0)
        return -1;
    *st = (exec_stats){cs.kernels, cs.cast_kernels, cs.peak_bytes, cs.arena_bytes};
    return 0;
}

static const char *cpu_compiled_error(const void *ctx) { return compiled_error(ctx); }

static void cpu_compiled_info(const void *ctx, exec_compile_figures *info) {
    compiled_stats cs = {0};
    compiled_info(ctx, &cs);
    *info = (exec_compile_figures){cs.cache_hit, cs.arena_bytes};
}

static void cpu_compiled_free(void *ctx) { compiled_free(ctx); }

const exec_iface exec_cpu_compiled = {
    .device = "cpu",
    .family = "compiled",
    .call = "compiled_run",
    .create = cpu_compiled_create,
    .set_step = cpu_compiled_set_step,
    .run = cpu_compiled_run,
    .error = cpu_compiled_error,
    .compile_info = cpu_compiled_info,
    .free = cpu_compiled_free,
};
