// host: the machine a run measures on: its description for the results,
// its load, and what it does during the timed rounds.
//
//   json_t *h = bench_host_json(threads);   // hostname, os, cpu_model, cores, ...
//   bench_probe a, b;
//   bench_probe_read(&a); ... timed rounds ...; bench_probe_read(&b);
//   bench_probe_diff(&a, &b, &result.stab);  // switches, steal, run delay, load
#pragma once
#include "results/results.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// The host object: hostname, os, cpu_model, cores, threads_used, blas, onednn, cpu_flags.
json_t *bench_host_json(int threads_used);
// One entry of host.gpus from the device's facts (cuda_device.h), or, when
// why is not NULL, {index, error: why} for a GPU that could not be described.
struct cuda_device_info;
json_t *bench_gpu_json(const struct cuda_device_info *info, const char *why);
// The 1-minute load average (-1 when unknown), and whether it says other
// work competes with `threads` threads on this machine's cores.
double bench_loadavg(void);
bool bench_host_busy(int threads, double *load, int *cores);
// What the machine is doing, read before and after the timed rounds.
typedef struct bench_probe {
    double t;           // base_now()
    int64_t nivcsw;     // getrusage(RUSAGE_SELF): every thread of this process
    double steal_s;     // /proc/stat's steal, all CPUs; NaN unknown
    double run_delay_s; // this process's threads' time waiting for a CPU; NaN unknown
    double load;        // 1-minute load average; -1 unknown
} bench_probe;
void bench_probe_read(bench_probe *p);
// Fills s's interference fields from the probes around its timed rounds.
void bench_probe_diff(const bench_probe *start, const bench_probe *end, bench_stability *s);
// --pin: each of `threads` OpenMP threads pins itself to one CPU this
// process may run on, thread i to the i-th (modulo their count). 0, or -1
// with err naming the failed call.
int bench_threads_pin(int threads, char *err, size_t cap);
