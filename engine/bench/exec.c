// The runner's view of one executor (exec.h): the engine's executor
// interface, looked up by the case's device and family.
#include "exec.h"

#include "../exec.h" // the engine's executor interface, not this folder's

#include <stdio.h>
#include <stdlib.h>

struct bench_exec {
    exec *x;
    bool flush_l2;
};

static int exec_open(const char *family, const model *m, const compile_opts *co,
                     const bench_exec_opts *o, bench_exec **out, char *err, size_t cap) {
    *out = NULL;
    bench_exec *b = calloc(1, sizeof *b);
    if (!b) {
        snprintf(err, cap, "calloc: out of host memory");
        return -1;
    }
    b->flush_l2 = o->flush_l2;
    exec_opts eo = {.tf32 = o->tf32, .compile = co, .share = o->share};
    const char *device = bench_axis_value(BENCH_AXIS_DEVICE, o->device);
    if (exec_new(device, family, m, &eo, &b->x, err, cap) < 0) {
        free(b);
        return -1;
    }
    *out = b;
    return 0;
}

int bench_exec_eager(const model *m, const bench_exec_opts *o, bench_exec **out, char *err,
                     size_t cap) {
    return exec_open("eager", m, NULL, o, out, err, cap);
}

int bench_exec_compile(const model *m, const compile_opts *co, const bench_exec_opts *o,
                       bench_exec **out, char *err, size_t cap) {
    return exec_open("compiled", m, co, o, out, err, cap);
}

void bench_exec_set_step(bench_exec *b, uint64_t step) { exec_set_step(b->x, step); }

int bench_exec_run(bench_exec *b, tensor **outputs, bench_exec_stats *st) {
    exec_stats s;
    if (exec_run(b->x, outputs, &s) < 0)
        return -1;
    if (st)
        *st = (bench_exec_stats){s.kernels, s.cast_kernels, s.peak_bytes, s.arena_bytes};
    return 0;
}

int bench_exec_sync(bench_exec *b) { return exec_sync(b->x); }

const char *bench_exec_error(const bench_exec *b) { return exec_error(b->x); }

const char *bench_exec_what(const bench_exec *b) { return exec_iface_of(b->x)->call; }

bool bench_exec_has_clock(const bench_exec *b) { return exec_has_clock(b->x); }

int bench_exec_sample_start(bench_exec *b) { return exec_sample_start(b->x, b->flush_l2); }

int bench_exec_sample_stop(bench_exec *b, double *seconds) {
    return exec_sample_stop(b->x, seconds);
}

void bench_exec_compile_info(const bench_exec *b, bool *cache_hit, size_t *arena_bytes) {
    exec_compile_figures info;
    exec_compile_info(b->x, &info);
    *cache_hit = info.cache_hit;
    *arena_bytes = info.arena_bytes;
}

int bench_exec_share_new(int device, exec_share **out, char *err, size_t cap) {
    return exec_share_new(bench_axis_value(BENCH_AXIS_DEVICE, device), out, err, cap);
}

void bench_exec_share_free(exec_share *s) { exec_share_free(s); }

int bench_exec_output(bench_exec *b, int k, tensor **out) { return exec_output(b->x, k, out); }

int bench_exec_pass(bench_exec *from, int k, bench_exec *to, int input) {
    return exec_pass(from->x, k, to->x, input);
}

void bench_exec_free(bench_exec *b) {
    if (!b)
        return;
    exec_free(b->x);
    free(b);
}
