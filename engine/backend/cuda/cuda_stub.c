// The CUDA entry points in a build without the CUDA backend (cuda_device.h,
// eager_cuda.h, cuda_program.h): each fails with the same reason, so callers need no #if.
#include "cuda_device.h"
#include "cuda_program.h"
#include "eager/eager_cuda.h"

#include <stdio.h>

#define NOT_BUILT                                                                                  \
    "this tcbench was built without the CUDA backend (no CUDA toolkit found, or "                  \
    "-Dcuda=disabled); "                                                                           \
    "reconfigure with -Dcuda=enabled"

static int not_built(char *err, size_t cap) {
    if (err && cap)
        snprintf(err, cap, "%s", NOT_BUILT);
    return -1;
}

bool cuda_built(void) { return false; }
int cuda_probe(char *reason, size_t cap) { return not_built(reason, cap); }
int cuda_probe_here(char *reason, size_t cap) { return not_built(reason, cap); }
int cuda_device_index(void) { return 0; }

int cuda_device_query(cuda_device_info *info, char *err, size_t cap) {
    (void)info;
    return not_built(err, cap);
}

int cuda_device_describe(cuda_device_info *info, char *err, size_t cap) {
    *info = (cuda_device_info){0};
    return not_built(err, cap);
}

int cuda_probe_describe(cuda_device_info *info, char *reason, size_t cap) {
    *info = (cuda_device_info){0};
    return not_built(reason, cap);
}

int cuda_timer_new(cuda_timer **out, char *err, size_t cap) {
    *out = NULL;
    return not_built(err, cap);
}

int cuda_timer_start(cuda_timer *t, void *stream, char *err, size_t cap) {
    (void)t, (void)stream;
    return not_built(err, cap);
}

int cuda_timer_stop(cuda_timer *t, void *stream, double *seconds, char *err, size_t cap) {
    (void)t, (void)stream;
    *seconds = 0;
    return not_built(err, cap);
}

void cuda_timer_free(cuda_timer *t) { (void)t; }

int cuda_l2_flush(void *stream, char *err, size_t cap) {
    (void)stream;
    return not_built(err, cap);
}

int eager_cuda_new(const model *m, const eager_cuda_opts *o, eager_cuda **out, char *err,
                   size_t cap) {
    (void)m, (void)o;
    *out = NULL;
    return not_built(err, cap);
}

void eager_cuda_set_step(eager_cuda *e, uint64_t step) { (void)e, (void)step; }

int eager_cuda_upload_inputs(eager_cuda *e) {
    (void)e;
    return -1;
}

int eager_cuda_run(eager_cuda *e, eager_stats *st) {
    (void)e, (void)st;
    return -1;
}

int eager_cuda_sync(eager_cuda *e) {
    (void)e;
    return -1;
}

int eager_cuda_outputs(eager_cuda *e, tensor **outputs) {
    (void)e, (void)outputs;
    return -1;
}

const char *eager_cuda_error(const eager_cuda *e) {
    (void)e;
    return NOT_BUILT;
}

void *eager_cuda_stream(const eager_cuda *e) {
    (void)e;
    return NULL;
}

void eager_cuda_free(eager_cuda *e) { (void)e; }

int cuda_program_new(const model *m, const compile_opts *o, bool allow_tf32, cuda_program **out,
                     char *err, size_t cap) {
    (void)m, (void)o, (void)allow_tf32;
    *out = NULL;
    return not_built(err, cap);
}

void cuda_program_set_step(cuda_program *c, uint64_t step) { (void)c, (void)step; }

int cuda_program_run(cuda_program *c, compiled_stats *st) {
    (void)c, (void)st;
    return -1;
}

int cuda_program_sync(cuda_program *c) {
    (void)c;
    return -1;
}

int cuda_program_outputs(cuda_program *c, tensor **outputs) {
    (void)c, (void)outputs;
    return -1;
}

int cuda_program_download_state(cuda_program *c) {
    (void)c;
    return -1;
}

const char *cuda_program_error(const cuda_program *c) {
    (void)c;
    return NOT_BUILT;
}

void *cuda_program_stream(const cuda_program *c) {
    (void)c;
    return NULL;
}

void cuda_program_free(cuda_program *c) { (void)c; }
