// cuda_device: the GPU as the rest of tcbench sees it, without CUDA headers:
// is there a usable GPU, which one, and how to time work on it.
//
//   char why[256];
//   if (cuda_probe(why, sizeof why) < 0) {                 // no GPU, no driver, too old
//       fprintf(stderr, "tcbench: --device cuda: %s\n", why);
//       exit(2);
//   }
//   cuda_timer *t;
//   cuda_timer_new(&t, err, sizeof err);                   // a CUDA event pair
//   cuda_l2_flush(stream, err, sizeof err);                // optional: cold L2
//   cuda_timer_start(t, stream);
//   ... enqueue one sample's work on stream ...
//   double s;
//   cuda_timer_stop(t, stream, &s, err, sizeof err);       // waits, seconds between events
//   cuda_timer_free(t);
//
// Built only with the CUDA backend (TCBENCH_HAVE_CUDA): code that must also
// build without it asks the executor registry instead (exec_device_probe in
// engine/exec.h), which says when the backend is missing.
// `stream` is a cudaStream_t passed as void * (NULL: the default stream);
// eager_cuda_stream() gives the executor's.
//
// cuda_probe forks a short-lived child to ask the driver, so the caller's
// process holds no CUDA state afterwards: a CUDA context does not survive
// fork(), and the runner forks one child per case. Call cuda_probe_here
// inside a process that will use the GPU itself.
#pragma once
#include <stdbool.h>
#include <stddef.h>

// Whether this build has the CUDA backend (TCBENCH_HAVE_CUDA).
bool cuda_built(void);

// 0 when device TCBENCH_CUDA_DEVICE (default 0) is a usable GPU: the driver
// loads, the device exists, its compute capability is 8.0 or newer (the
// kernels are built for sm_80 and sm_90), and a context can be made on it.
// Otherwise -1 with a one-line reason, the driver's words included
// ("cudaGetDeviceCount: CUDA driver version is insufficient for CUDA
// runtime version").
int cuda_probe(char *reason, size_t cap);
// The same check in this process (it creates the context).
int cuda_probe_here(char *reason, size_t cap);

typedef struct cuda_device_info {
    int index;
    char name[256]; // "NVIDIA H200"
    int cc_major, cc_minor;
    int sm_count;
    size_t memory_bytes;
    size_t l2_bytes;
    int driver_version, runtime_version; // 12080 = 12.8
    // filled by cuda_device_describe (0 from cuda_device_query)
    int clock_khz;        // the SMs' peak clock
    int memory_clock_khz; // the memory's peak clock
    int memory_bus_bits;  // the memory bus width
} cuda_device_info;

// Facts about the selected device (creates the context).
int cuda_device_query(cuda_device_info *info, char *err, size_t cap);
// cuda_device_query and the clocks, in this process.
int cuda_device_describe(cuda_device_info *info, char *err, size_t cap);
// cuda_probe and then cuda_device_describe, both in a forked child, so the
// caller holds no CUDA state afterwards (the runner's parent describes the
// GPU for the results before it forks a child per case). 0 with info
// filled, or -1 with the probe's one-line reason.
int cuda_probe_describe(cuda_device_info *info, char *reason, size_t cap);
// The device tcbench uses: TCBENCH_CUDA_DEVICE, default 0.
int cuda_device_index(void);

// CUDA events around a sample: start and stop are recorded on the stream,
// stop waits for the stop event. Timing resolution is about 0.5 us.
typedef struct cuda_timer cuda_timer;
int cuda_timer_new(cuda_timer **out, char *err, size_t cap);
int cuda_timer_start(cuda_timer *t, void *stream, char *err, size_t cap);
int cuda_timer_stop(cuda_timer *t, void *stream, double *seconds, char *err, size_t cap);
void cuda_timer_free(cuda_timer *t);

// Writes a device buffer twice the size of the L2 cache on the stream, so
// the next sample starts with nothing of its data in L2 (Triton's
// do_bench does the same). The buffer is made on first use and kept.
int cuda_l2_flush(void *stream, char *err, size_t cap);
