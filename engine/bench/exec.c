// One executor behind one interface, CPU or GPU (exec.h).
#include "exec.h"

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_program.h"
#include "eager/eager.h"
#include "eager/eager_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bench_exec {
    int device;
    bool flush_l2;
    int noutputs;
    eager *e;          // CPU eager
    compiled *c;       // CPU compiled
    eager_cuda *ge;    // GPU eager
    cuda_program *gc;  // GPU compiled
    cuda_timer *timer; // GPU: the sample's event pair
    tensor **scratch;  // noutputs: outputs that are dropped
    char err[640];
};

static int exec_alloc(const model *m, const bench_exec_opts *o, bench_exec **out, char *err,
                      size_t cap) {
    *out = NULL;
    bench_exec *x = calloc(1, sizeof *x);
    int n = m->g->noutputs;
    if (!x || !(x->scratch = calloc((size_t)(n ? n : 1), sizeof *x->scratch))) {
        free(x);
        snprintf(err, cap, "out of host memory");
        return -1;
    }
    x->device = o->device;
    x->flush_l2 = o->flush_l2;
    x->noutputs = n;
    *out = x;
    return 0;
}

// The GPU's event pair, made once the executor (and so the context) exists.
static int exec_timer(bench_exec *x, char *err, size_t cap) {
    char why[400];
    if (cuda_timer_new(&x->timer, why, sizeof why) < 0) {
        snprintf(err, cap, "cuda_timer_new: %s", why);
        return -1;
    }
    return 0;
}

int bench_exec_eager(const model *m, const bench_exec_opts *o, bench_exec **out, char *err,
                     size_t cap) {
    bench_exec *x;
    if (exec_alloc(m, o, &x, err, cap) < 0)
        return -1;
    if (o->device == BENCH_DEV_CUDA) {
        char why[600];
        eager_cuda_opts eo = {.allow_tf32 = o->tf32};
        if (eager_cuda_new(m, &eo, &x->ge, why, sizeof why) < 0) {
            snprintf(err, cap, "eager_cuda_new: %s", why);
            bench_exec_free(x);
            return -1;
        }
        if (exec_timer(x, err, cap) < 0) {
            bench_exec_free(x);
            return -1;
        }
    } else if (!(x->e = eager_new(m))) {
        snprintf(err, cap, "eager_new: out of memory");
        bench_exec_free(x);
        return -1;
    }
    *out = x;
    return 0;
}

int bench_exec_compile(const model *m, const compile_opts *co, const bench_exec_opts *o,
                       bench_exec **out, char *err, size_t cap) {
    bench_exec *x;
    if (exec_alloc(m, o, &x, err, cap) < 0)
        return -1;
    int rc = o->device == BENCH_DEV_CUDA ? cuda_program_new(m, co, o->tf32, &x->gc, err, cap)
                                         : compile_model(m, co, &x->c, err, cap);
    if (rc == 0 && o->device == BENCH_DEV_CUDA)
        rc = exec_timer(x, err, cap);
    if (rc < 0) {
        bench_exec_free(x);
        return -1;
    }
    *out = x;
    return 0;
}

void bench_exec_set_step(bench_exec *x, uint64_t step) {
    if (x->e)
        eager_set_step(x->e, step);
    if (x->c)
        compiled_set_step(x->c, step);
    if (x->ge)
        eager_cuda_set_step(x->ge, step);
    if (x->gc)
        cuda_program_set_step(x->gc, step);
}

static int fail(bench_exec *x, const char *why) {
    if (why != x->err)
        snprintf(x->err, sizeof x->err, "%s", why);
    return -1;
}

int bench_exec_run(bench_exec *x, tensor **outputs, bench_exec_stats *st) {
    tensor **out = outputs ? outputs : x->scratch;
    bench_exec_stats s = {0};
    int rc;
    x->err[0] = '\0';
    if (x->e) {
        eager_stats es = {0};
        if ((rc = eager_run(x->e, out, &es)) < 0)
            fail(x, eager_error(x->e));
        s = (bench_exec_stats){es.kernels, es.cast_kernels, es.peak_bytes, 0};
    } else if (x->c) {
        compiled_stats cs = {0};
        if ((rc = compiled_run(x->c, out, &cs)) < 0)
            fail(x, compiled_error(x->c));
        s = (bench_exec_stats){cs.kernels, cs.cast_kernels, cs.peak_bytes, cs.arena_bytes};
    } else if (x->ge) {
        eager_stats es = {0};
        rc = eager_cuda_run(x->ge, &es);
        if (rc == 0 && outputs)
            rc = eager_cuda_outputs(x->ge, outputs);
        if (rc < 0)
            fail(x, eager_cuda_error(x->ge));
        s = (bench_exec_stats){es.kernels, es.cast_kernels, es.peak_bytes, 0};
    } else {
        compiled_stats cs = {0};
        rc = cuda_program_run(x->gc, &cs);
        if (rc == 0 && outputs)
            rc = cuda_program_outputs(x->gc, outputs);
        if (rc < 0)
            fail(x, cuda_program_error(x->gc));
        s = (bench_exec_stats){cs.kernels, cs.cast_kernels, cs.peak_bytes, cs.arena_bytes};
    }
    if (rc == 0 && !outputs && (x->e || x->c)) // the CPU's outputs exist on return
        for (int i = 0; i < x->noutputs; i++) {
            tensor_free(x->scratch[i]);
            x->scratch[i] = NULL;
        }
    if (rc == 0 && st)
        *st = s;
    return rc;
}

int bench_exec_sync(bench_exec *x) {
    if (x->ge && eager_cuda_sync(x->ge) < 0)
        return fail(x, eager_cuda_error(x->ge));
    if (x->gc && cuda_program_sync(x->gc) < 0)
        return fail(x, cuda_program_error(x->gc));
    return 0;
}

const char *bench_exec_error(const bench_exec *x) { return x->err; }

const char *bench_exec_what(const bench_exec *x) {
    return x->e    ? "eager_run"
           : x->c  ? "compiled_run"
           : x->ge ? "eager_cuda_run"
                   : "cuda_program_run";
}

bool bench_exec_has_clock(const bench_exec *x) { return x->timer != NULL; }

static void *exec_stream(const bench_exec *x) {
    return x->ge ? eager_cuda_stream(x->ge) : cuda_program_stream(x->gc);
}

int bench_exec_sample_start(bench_exec *x) {
    char why[400];
    void *stream = exec_stream(x);
    // the flush is enqueued before the start event, so it is not timed
    if (x->flush_l2 && cuda_l2_flush(stream, why, sizeof why) < 0) {
        snprintf(x->err, sizeof x->err, "cuda_l2_flush: %s", why);
        return -1;
    }
    if (cuda_timer_start(x->timer, stream, why, sizeof why) < 0) {
        snprintf(x->err, sizeof x->err, "cuda_timer_start: %s", why);
        return -1;
    }
    return 0;
}

int bench_exec_sample_stop(bench_exec *x, double *seconds) {
    char why[400];
    if (cuda_timer_stop(x->timer, exec_stream(x), seconds, why, sizeof why) < 0) {
        snprintf(x->err, sizeof x->err, "cuda_timer_stop: %s", why);
        return -1;
    }
    return 0;
}

void bench_exec_compile_info(const bench_exec *x, bool *cache_hit, size_t *arena_bytes) {
    compiled_stats st = {0};
    if (x->c)
        compiled_info(x->c, &st);
    *cache_hit = st.cache_hit;
    *arena_bytes = st.arena_bytes;
}

void bench_exec_free(bench_exec *x) {
    if (!x)
        return;
    cuda_timer_free(x->timer); // before the executors: their context may go with them
    eager_free(x->e);
    compiled_free(x->c);
    eager_cuda_free(x->ge);
    cuda_program_free(x->gc);
    free(x->scratch);
    free(x);
}
