// cuda_share: one device context and one device copy of each named model
// value, for executors that run in turn on the same data: a generation's
// prefill and decode steps, whose static KV cache one step writes and the
// next reads (docs/generation.md).
//
//   cuda_share *s;
//   if (cuda_share_new(&s, err, sizeof err) < 0) ...  // no GPU: the driver's reason
//   eager_cuda_new(m1, &(eager_cuda_opts){.share = s}, &e1, err, cap);
//   cuda_program_new_shared(m2, &o, false, s, &p2, err, cap);
//   ...                                               // m1's and m2's weights: one copy
//   eager_cuda_free(e1); cuda_program_free(p2);
//   cuda_share_free(s);                               // last: the executors borrow it
//
// The executors of a share use its context (one stream, one caching
// allocator, one set of library handles), so their steps run in the order
// they are enqueued and a device tensor one makes another may hold and
// free. A PARAM or BUFFER with a name is uploaded once, by the first
// executor that asks, and lent to every later one whose node has the same
// op, name, dtype and shape: model_init_values_from's rule, so the device
// shares what the host shares. Nothing else is shared. A graph one program
// captures records the context's library workspaces: they must not grow
// after it (cuBLASLt's is fixed; cuDNN's grows for a larger convolution), so
// a share serves models without convolutions, as a generation's are.
#pragma once
#include "cuda_rt.h"
#include "model/model.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct cuda_share cuda_share;

// Probes the device and makes the context. -1 with err (no GPU: the
// driver's reason, as cuda_probe_here says it).
int cuda_share_new(cuda_share **out, char *err, size_t cap);
void cuda_share_free(cuda_share *s);
cuda_ctx *cuda_share_ctx(cuda_share *s);
// Whether node i of m is one the share lends (a named PARAM or BUFFER).
bool cuda_share_lends(const model *m, int i);
// The share's device copy of node i of m (cuda_share_lends), uploaded from
// m->values[i] on first use. Borrowed: the share frees it. NULL with err.
tensor *cuda_share_value(cuda_share *s, const model *m, int i, char *err, size_t cap);
// A host value into its device copy (the same shape, contiguous), enqueued
// on c's stream: a step's inputs, sent before it runs. Pageable memory is
// staged before cudaMemcpyAsync returns, so the host may change it at once.
int cuda_share_send(cuda_ctx *c, tensor *dev, const tensor *host, char *err, size_t cap);
