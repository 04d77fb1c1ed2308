// tensor: a typed, strided view into a reference-counted buffer.
//
//   int64_t shape[] = {2, 3};
//   tensor *t = tensor_new(DT_F32, 2, shape);      // contiguous, zeroed
//   float *p = tensor_f32(t);                      // base + offset
//   tensor *v = tensor_permute(t, (int[]){1, 0});  // view, shares storage
//   tensor_free(v); tensor_free(t);                // storage freed last
//
// Strides and offset count elements, not bytes. A tensor owns one reference
// to its storage; views take another. Allocation is 64-byte aligned and
// counted process-wide (tensor_mem_live / tensor_mem_peak), which is how the
// eager executor reports peak live bytes, as PyTorch's allocator stats do.
#pragma once
#include "dtype.h"

#include <stdbool.h>
#include <stdint.h>

#define TENSOR_MAX_DIMS 6

typedef struct tensor_storage {
    void *data;
    size_t bytes;
    int refs;
    bool borrowed; // data belongs to someone else (tensor_wrap): not freed, not counted
} tensor_storage;

typedef struct tensor {
    enum dtype dtype;
    int ndim;
    int64_t shape[TENSOR_MAX_DIMS];
    int64_t stride[TENSOR_MAX_DIMS]; // elements
    int64_t offset;                  // elements
    tensor_storage *storage;
} tensor;

tensor *tensor_new(enum dtype t, int ndim, const int64_t *shape);       // zeroed
tensor *tensor_new_empty(enum dtype t, int ndim, const int64_t *shape); // uninit
void tensor_free(tensor *t);                                            // NULL is fine
// A contiguous tensor over memory the caller owns and keeps alive.
tensor *tensor_wrap(enum dtype t, int ndim, const int64_t *shape, void *data);

int64_t tensor_numel(const tensor *t);
size_t tensor_nbytes(const tensor *t); // numel * element size
bool tensor_is_contiguous(const tensor *t);
void *tensor_data(const tensor *t); // storage base + offset, as bytes
static inline float *tensor_f32(const tensor *t) { return (float *)tensor_data(t); }

// Views (share storage). reshape returns NULL when the strides cannot express
// the new shape without a copy; callers then copy with tensor_contiguous.
tensor *tensor_view(const tensor *t); // same shape and strides
tensor *tensor_permute(const tensor *t, const int *perm);
tensor *tensor_reshape(const tensor *t, int ndim, const int64_t *shape);
tensor *tensor_slice(const tensor *t, int axis, int64_t start, int64_t len);
tensor *tensor_expand(const tensor *t, int ndim, const int64_t *shape);
tensor *tensor_contiguous(const tensor *t); // always a new buffer

// Element access through strides; slow, for tests and the reference.
double tensor_get(const tensor *t, const int64_t *idx);
void tensor_set(tensor *t, const int64_t *idx, double v);
// Flat index i of the logical (row-major) order.
double tensor_get_flat(const tensor *t, int64_t i);

void tensor_strides_contiguous(int ndim, const int64_t *shape, int64_t *stride);
// Whether stride is the contiguous one for shape (dims of 1 aside).
bool tensor_strides_are_contiguous(int ndim, const int64_t *shape, const int64_t *stride);
// Strides for viewing (oshape, ostride) as shape without a copy; false when
// no such strides exist. tensor_reshape and the compiler's views share it.
bool tensor_strides_reshape(int ondim, const int64_t *oshape, const int64_t *ostride, int ndim,
                            const int64_t *shape, int64_t *nstride);
int64_t shape_numel(int ndim, const int64_t *shape);

// Process-wide byte counters for tensor storage: the bytes tensors hold
// (each request rounded up to 64), not the cached blocks behind them.
size_t tensor_mem_live(void);
size_t tensor_mem_peak(void);
void tensor_mem_reset_peak(void);
// The bytes a request of `bytes` counts for in those counters (64-byte
// steps, at least 64): what a planner must add up to predict them.
size_t tensor_mem_round(size_t bytes);

// A cap on the live bytes (--memory-limit; 0, the default: none). A request
// that would take the live bytes past it fails, as a device out of memory
// would; each such refusal is counted, so that a caller can tell the cap's
// refusals from other failures. A planned allocation made elsewhere (the
// compiled arena) asks tensor_mem_admit, which counts a refusal the same way.
// Setting the cap starts the count of refusals again from 0.
void tensor_mem_set_limit(size_t bytes);
size_t tensor_mem_limit(void);
int64_t tensor_mem_refusals(void);
// false (and one refusal counted) when `bytes` beyond `held` pass the cap.
bool tensor_mem_admit(size_t held, size_t bytes);
// "needs 64.0 MiB with 5.97 GiB of 6.00 GiB live": a refused request of
// `bytes` beside `held`, for the refusal's message.
void tensor_mem_refusal(char *buf, size_t cap, size_t bytes, size_t held);

// Storage comes from a caching allocator, as PyTorch's CUDA allocator (and
// jemalloc or tcmalloc under PyTorch on CPUs) serves it: a freed buffer is
// kept on a free list of its size class (64-byte steps to 1 KiB, then four
// classes a doubling, so at most 25% over the request) and the next request
// of that class reuses it. An eager step that frees and allocates the same
// shapes each step then touches the same pages every step, whatever glibc's
// dynamic mmap threshold happens to be after what ran before it in the
// process (without it, a fresh process mmapped every large tensor anew,
// page faults included, and eager's time depended on whether the accuracy
// check had run first). TCBENCH_DISABLE_ALLOC_CACHE=1 turns it off (plain
// aligned_alloc and free). Under AddressSanitizer cached blocks are
// poisoned, and so is each block's tail past the request, so a use after
// free or an overflow is still reported.
typedef struct tensor_cache_stats {
    bool enabled;
    size_t cached_bytes; // held on the free lists now
    size_t cached_peak;  // most ever held
    int64_t hits, misses;
} tensor_cache_stats;
tensor_cache_stats tensor_cache_get_stats(void);
// Frees every cached block (also done once when an allocation fails).
void tensor_cache_release(void);
