// cuda_alloc: a caching device allocator, as PyTorch's CUDACachingAllocator:
// cudaMalloc is slow and synchronizes the device, so eager frameworks keep
// freed blocks and hand them out again.
//
//   cuda_alloc *a = cuda_alloc_new(cuda_alloc_device_backend(), err, sizeof err);
//   void *p;
//   cuda_alloc_get(a, 1000, stream, &p, err, sizeof err); // 1024 bytes of a 2 MiB segment
//   cuda_alloc_put(a, p);          // back to the free lists, reusable at once on `stream`
//   cuda_alloc_stats st;
//   cuda_alloc_get_stats(a, &st);  // live, peak and reserved bytes
//   cuda_alloc_free(a);            // returns every segment
//
// The rules are PyTorch's: sizes round up to 512 bytes; requests up to
// 1 MiB come from 2 MiB segments (the small pool), larger ones from 20 MiB
// segments below 10 MiB and from segments rounded to 2 MiB above (the large
// pool); a free block is split when the rest is worth keeping (512 bytes in
// the small pool, more than 1 MiB in the large); a freed block merges with
// free neighbours of its segment. Free blocks sit in size-binned lists (one
// per power of two) and the best fit of the first bin with a fit is taken.
//
// Reuse is stream-ordered: a block remembers the stream it was allocated
// for and is only handed out again for that stream, where every later
// kernel runs after every earlier use, so a block freed while kernels that
// read it are still queued can be reused without a synchronization. Using a
// block on another stream is not supported (PyTorch's record_stream).
//
// When the backend cannot allocate, every cached segment with no live
// block is released and the request retried once; then the error says how
// much was asked, live and reserved. The device is reached only through the
// backend, so the bookkeeping is tested on the host (tests/test_cuda_build.c)
// with a malloc backend.
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cuda_alloc_backend {
    // 0 and *out set, or -1 with err set (the driver's words)
    int (*raw_alloc)(void *ctx, size_t bytes, void **out, char *err, size_t cap);
    void (*raw_free)(void *ctx, void *p);
    void *ctx;
} cuda_alloc_backend;

typedef struct cuda_alloc_stats {
    size_t live_bytes;      // in blocks handed out (rounded sizes)
    size_t peak_bytes;      // most live_bytes since the last reset
    size_t reserved_bytes;  // in segments held from the backend
    size_t requested_bytes; // as asked, before rounding, of the live blocks
    int64_t segments;       // held now
    int64_t raw_allocs;     // backend allocations ever (cudaMalloc calls)
    int64_t raw_frees;
    int64_t gets, hits; // requests, and those served from the cache
} cuda_alloc_stats;

typedef struct cuda_alloc cuda_alloc;

#define CUDA_ALLOC_ROUND       512
#define CUDA_ALLOC_SMALL_MAX   ((size_t)1 << 20)  // small pool: requests up to 1 MiB
#define CUDA_ALLOC_SMALL_SEG   ((size_t)2 << 20)  // in 2 MiB segments
#define CUDA_ALLOC_LARGE_SEG   ((size_t)20 << 20) // large requests below 10 MiB: 20 MiB segments
#define CUDA_ALLOC_LARGE_ROUND ((size_t)2 << 20)

cuda_alloc *cuda_alloc_new(cuda_alloc_backend b, char *err, size_t cap);
// Returns every segment to the backend, live blocks included.
void cuda_alloc_free(cuda_alloc *a);
// bytes 0 gives a valid 512-byte block. stream: an opaque stream id.
int cuda_alloc_get(cuda_alloc *a, size_t bytes, const void *stream, void **out, char *err,
                   size_t cap);
// p must come from cuda_alloc_get; NULL is fine.
void cuda_alloc_put(cuda_alloc *a, void *p);
// Releases segments whose blocks are all free (torch.cuda.empty_cache).
void cuda_alloc_trim(cuda_alloc *a);
void cuda_alloc_get_stats(const cuda_alloc *a, cuda_alloc_stats *st);
void cuda_alloc_reset_peak(cuda_alloc *a); // peak = live
// The size a request of `bytes` is rounded to, and the segment it would come from.
size_t cuda_alloc_round(size_t bytes);
size_t cuda_alloc_segment_size(size_t rounded);

// cudaMalloc / cudaFree on the current device; only in builds with the
// CUDA backend (cuda_rt.c).
cuda_alloc_backend cuda_alloc_device_backend(void);
