// The CUDA executors' sample clock (exec_internal.h): cuda_timer and
// cuda_l2_flush, with the failing call named; and their share, a cuda_share.
#include "exec_internal.h"

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_share.h"

#include <stdio.h>
#include <stdlib.h>

struct exec_cuda_clock {
    cuda_timer *t;
};

int exec_cuda_clock_new(exec_cuda_clock **out, char *err, size_t cap) {
    char why[400];
    *out = calloc(1, sizeof **out);
    if (!*out) {
        snprintf(err, cap, "calloc: out of host memory");
        return -1;
    }
    if (cuda_timer_new(&(*out)->t, why, sizeof why) < 0) {
        snprintf(err, cap, "cuda_timer_new: %s", why);
        free(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

int exec_cuda_clock_start(exec_cuda_clock *c, void *stream, bool flush_l2, char *err, size_t cap) {
    char why[400];
    if (flush_l2 && cuda_l2_flush(stream, why, sizeof why) < 0) {
        snprintf(err, cap, "cuda_l2_flush: %s", why);
        return -1;
    }
    if (cuda_timer_start(c->t, stream, why, sizeof why) < 0) {
        snprintf(err, cap, "cuda_timer_start: %s", why);
        return -1;
    }
    return 0;
}

int exec_cuda_clock_stop(exec_cuda_clock *c, void *stream, double *seconds, char *err, size_t cap) {
    char why[400];
    if (cuda_timer_stop(c->t, stream, seconds, why, sizeof why) < 0) {
        snprintf(err, cap, "cuda_timer_stop: %s", why);
        return -1;
    }
    return 0;
}

int exec_cuda_share_new(void **share, char *err, size_t cap) {
    char why[500];
    cuda_share *s;
    if (cuda_share_new(&s, why, sizeof why) < 0) {
        snprintf(err, cap, "cuda_share_new: %s", why);
        return -1;
    }
    *share = s;
    return 0;
}

void exec_cuda_share_free(void *share) { cuda_share_free(share); }

void exec_cuda_clock_free(exec_cuda_clock *c) {
    if (!c)
        return;
    cuda_timer_free(c->t);
    free(c);
}
