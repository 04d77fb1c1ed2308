// The registry's side of exec.h: the descriptors exec.c lists, each defined
// in its executor's adapter (eager/eager_exec.c, compile/program_exec.c and,
// with the CUDA backend, eager/eager_cuda_exec.c, compile/cuda_program_exec.c),
// and the sample clock the two CUDA adapters share (exec_cuda.c).
#pragma once
#include "exec.h"

#include <stdbool.h>
#include <stddef.h>

extern const exec_iface exec_cpu_eager;
extern const exec_iface exec_cpu_compiled;
extern const exec_iface exec_cuda_eager;    // TCBENCH_HAVE_CUDA only
extern const exec_iface exec_cuda_compiled; // TCBENCH_HAVE_CUDA only

// A CUDA event pair on an executor's stream (cuda_timer), with an L2 flush
// enqueued before the start event when asked, so the flush is not timed.
// Made after the executor (its context must exist); freed before it.
typedef struct exec_cuda_clock exec_cuda_clock;
int exec_cuda_clock_new(exec_cuda_clock **out, char *err, size_t cap);
int exec_cuda_clock_start(exec_cuda_clock *c, void *stream, bool flush_l2, char *err, size_t cap);
int exec_cuda_clock_stop(exec_cuda_clock *c, void *stream, double *seconds, char *err, size_t cap);
void exec_cuda_clock_free(exec_cuda_clock *c);

// The CUDA executors' share (exec_share_new): a cuda_share (cuda_share.h).
int exec_cuda_share_new(void **share, char *err, size_t cap);
void exec_cuda_share_free(void *share);
// The device's own share behind an exec_share (NULL: none).
void *exec_share_impl(const exec_share *s);
