// The executor registry and the calls every executor shares (exec.h).
#include "exec.h"

#include "exec_internal.h"
#include "tcbench_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The registry: a table, so a build lists exactly what it compiled.
static const exec_iface *const executors[] = {
    &exec_cpu_eager,
    &exec_cpu_compiled,
#if TCBENCH_HAVE_CUDA
    &exec_cuda_eager,
    &exec_cuda_compiled,
#endif
};
#define NEXECUTORS ((int)(sizeof executors / sizeof executors[0]))

// Every device tcbench knows, and what a build without it lacks.
static const struct {
    const char *name;
    const char *missing;
} devices[] = {
    {"cpu", "the CPU executors are always built"},
    {"cuda", "this tcbench was built without the CUDA backend (no CUDA toolkit found, or "
             "-Dcuda=disabled); reconfigure with -Dcuda=enabled"},
};

static const char *device_missing(const char *device) {
    for (size_t k = 0; k < sizeof devices / sizeof devices[0]; k++)
        if (strcmp(devices[k].name, device) == 0)
            return devices[k].missing;
    return NULL;
}

const exec_iface *const *exec_list(int *n) {
    *n = NEXECUTORS;
    return executors;
}

bool exec_device_built(const char *device) {
    for (int k = 0; k < NEXECUTORS; k++)
        if (strcmp(executors[k]->device, device) == 0)
            return true;
    return false;
}

static int not_built(const char *device, char *err, size_t cap) {
    const char *why = device_missing(device);
    if (why)
        snprintf(err, cap, "%s", why);
    else
        snprintf(err, cap, "unknown device '%s'; expected cpu or cuda", device);
    return -1;
}

const exec_iface *exec_find(const char *device, const char *family, char *err, size_t cap) {
    if (!exec_device_built(device)) {
        not_built(device, err, cap);
        return NULL;
    }
    for (int k = 0; k < NEXECUTORS; k++)
        if (strcmp(executors[k]->device, device) == 0 && strcmp(executors[k]->family, family) == 0)
            return executors[k];
    snprintf(err, cap, "no %s executor on %s; expected eager or compiled", family, device);
    return NULL;
}

int exec_device_probe(const char *device, char *why, size_t cap) {
    if (!exec_device_built(device))
        return not_built(device, why, cap);
    for (int k = 0; k < NEXECUTORS; k++)
        if (strcmp(executors[k]->device, device) == 0 && executors[k]->probe)
            return executors[k]->probe(why, cap);
    return 0;
}

struct exec {
    const exec_iface *i;
    void *ctx;
    int noutputs;
    tensor **scratch; // noutputs: where a dropped step's host outputs go
    char err[640];
};

int exec_new_from(const exec_iface *i, const model *m, const exec_opts *o, exec **out, char *err,
                  size_t cap) {
    *out = NULL;
    exec *x = calloc(1, sizeof *x);
    int n = m->g->noutputs;
    if (!x || !(x->scratch = calloc((size_t)(n ? n : 1), sizeof *x->scratch))) {
        free(x);
        snprintf(err, cap, "calloc: out of host memory");
        return -1;
    }
    x->i = i;
    x->noutputs = n;
    exec_opts d = {0};
    compile_opts co;
    if (!o)
        o = &d;
    if (!o->compile && strcmp(i->family, "compiled") == 0) {
        co = compile_opts_default();
        d = *o;
        d.compile = &co;
        o = &d;
    }
    if (i->create(m, o, &x->ctx, err, cap) < 0) {
        free(x->scratch);
        free(x);
        return -1;
    }
    *out = x;
    return 0;
}

int exec_new(const char *device, const char *family, const model *m, const exec_opts *o, exec **out,
             char *err, size_t cap) {
    *out = NULL;
    const exec_iface *i = exec_find(device, family, err, cap);
    return i ? exec_new_from(i, m, o, out, err, cap) : -1;
}

const exec_iface *exec_iface_of(const exec *x) { return x->i; }

void exec_set_step(exec *x, uint64_t step) { x->i->set_step(x->ctx, step); }

static int fail(exec *x) {
    snprintf(x->err, sizeof x->err, "%s", x->i->error(x->ctx));
    return -1;
}

int exec_run(exec *x, tensor **outputs, exec_stats *st) {
    // an executor whose run makes the outputs (the CPU's) drops them here
    bool drop = !outputs && !x->i->outputs;
    exec_stats s = {0};
    x->err[0] = '\0';
    if (x->i->run(x->ctx, drop ? x->scratch : outputs, &s) < 0)
        return fail(x);
    if (drop)
        for (int k = 0; k < x->noutputs; k++) {
            tensor_free(x->scratch[k]);
            x->scratch[k] = NULL;
        }
    if (st)
        *st = s;
    return 0;
}

int exec_sync(exec *x) { return x->i->sync && x->i->sync(x->ctx) < 0 ? fail(x) : 0; }

int exec_outputs(exec *x, tensor **outputs) {
    if (!x->i->outputs) {
        snprintf(x->err, sizeof x->err, "exec_outputs: %s %s returns its outputs from exec_run",
                 x->i->device, x->i->family);
        return -1;
    }
    return x->i->outputs(x->ctx, outputs) < 0 ? fail(x) : 0;
}

bool exec_has_clock(const exec *x) { return x->i->sample_start != NULL; }

static int no_clock(exec *x) {
    snprintf(x->err, sizeof x->err, "%s %s has no device clock; time it on the host", x->i->device,
             x->i->family);
    return -1;
}

int exec_sample_start(exec *x, bool flush_l2) {
    if (!x->i->sample_start)
        return no_clock(x);
    return x->i->sample_start(x->ctx, flush_l2, x->err, sizeof x->err);
}

int exec_sample_stop(exec *x, double *seconds) {
    if (!x->i->sample_stop)
        return no_clock(x);
    return x->i->sample_stop(x->ctx, seconds, x->err, sizeof x->err);
}

void exec_compile_info(const exec *x, exec_compile_figures *info) {
    *info = (exec_compile_figures){0};
    if (x->i->compile_info)
        x->i->compile_info(x->ctx, info);
}

const char *exec_error(const exec *x) { return x->err; }

int exec_output(exec *x, int k, tensor **out) {
    if (out)
        *out = NULL;
    if (!x->i->output) {
        snprintf(x->err, sizeof x->err, "exec_output: %s %s returns its outputs from exec_run",
                 x->i->device, x->i->family);
        return -1;
    }
    return x->i->output(x->ctx, k, out) < 0 ? fail(x) : 0;
}

int exec_pass(exec *from, int k, exec *to, int input) {
    if (!to->i->pass || from->i != to->i) {
        snprintf(to->err, sizeof to->err, "exec_pass: %s %s cannot take %s %s's outputs",
                 to->i->device, to->i->family, from->i->device, from->i->family);
        return -1;
    }
    return to->i->pass(from->ctx, k, to->ctx, input) < 0 ? fail(to) : 0;
}

struct exec_share {
    const exec_iface *i; // the device's executor that made it
    void *impl;
};

int exec_share_new(const char *device, exec_share **out, char *err, size_t cap) {
    *out = NULL;
    if (!exec_device_built(device))
        return not_built(device, err, cap);
    const exec_iface *i = NULL;
    for (int k = 0; k < NEXECUTORS && !i; k++)
        if (strcmp(executors[k]->device, device) == 0 && executors[k]->share_new)
            i = executors[k];
    if (!i) {
        snprintf(err, cap, "exec_share_new: %s executors share nothing on a device", device);
        return -1;
    }
    exec_share *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, cap, "calloc: out of host memory");
        return -1;
    }
    s->i = i;
    if (i->share_new(&s->impl, err, cap) < 0) {
        free(s);
        return -1;
    }
    *out = s;
    return 0;
}

void exec_share_free(exec_share *s) {
    if (!s)
        return;
    s->i->share_free(s->impl);
    free(s);
}

void *exec_share_impl(const exec_share *s) { return s ? s->impl : NULL; }

void exec_free(exec *x) {
    if (!x)
        return;
    x->i->free(x->ctx);
    free(x->scratch);
    free(x);
}
