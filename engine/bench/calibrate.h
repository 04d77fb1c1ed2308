// calibrate: this machine's ceilings, and where a result sits under them.
//
//   bench_calibration c;
//   bench_calibrate_measure(2, &c);                 // STREAM triad + SGEMM, ~2 s
//   bench_calibration_save(&c, NULL, err, sizeof err);   //
//   $XDG_CACHE_HOME/tcbench/calibration.json,
//                                                         // one kept per CPU model x threads
//   ...
//   if (bench_calibration_load(NULL, 2, &c) == 0)   // a run reads it back
//       j = bench_roofline_json(flops, min_bytes, median_s, &c);
//
// Bandwidth is the best of several STREAM-style triads (a[i] = b[i] + s*c[i])
// over arrays far larger than the caches, counting 3 x 4 bytes per element
// moved (the write-allocate read is not counted, as STREAM does not). The
// GEMM rate is the best of several OpenBLAS SGEMMs of 2048^3. Both use the
// given number of threads. The roofline of a step: its FLOPs, the fewest
// bytes it must move (every parameter and input read once, every output
// written once), the rates it reached, and the fraction of the roof
// min(peak FLOP/s, intensity x bandwidth) it ran at.
#pragma once
#include <jansson.h>
#include <stdbool.h>

typedef struct bench_calibration {
    double bandwidth_Bps; // bytes per second
    double gemm_flops;    // FLOP per second
    int threads;
    char cpu_model[128];
    char timestamp[32];
} bench_calibration;

#define BENCH_CALIBRATIONS_MAX 256

int bench_calibrate_measure(int threads, bench_calibration *c);
// Adds c to the file, replacing only the one of the same CPU model and
// thread count (one calibration is kept per CPU model x threads). path
// NULL: <kernel cache dir>/calibration.json. -1 with err.
int bench_calibration_save(const bench_calibration *c, const char *path, char *err, size_t cap);
// 0 when a calibration for this CPU model and thread count is stored; -1 otherwise.
int bench_calibration_load(const char *path, int threads, bench_calibration *c);
// Why the calibrations cannot be used, in the words a run warns with and
// calibrate says: the kernel cache directory is unsafe (kcache_dir), or
// the file is there but unreadable. 0 when it reads or is missing (path
// NULL: as bench_calibration_save); -1 with err.
int bench_calibration_check(const char *path, char *err, size_t cap);
// Every calibration the file keeps (at most cap), sorted by CPU model and
// threads; 0 when there is no file.
int bench_calibration_list(const char *path, bench_calibration *out, int cap);
// This machine's CPU model, the first "model name" of /proc/cpuinfo ("unknown").
void bench_calibration_cpu_model(char *buf, size_t cap);
json_t *bench_calibration_json(const bench_calibration *c);
// NULL c: only the step's own figures.
json_t *bench_roofline_json(double flops, double min_bytes, double seconds,
                            const bench_calibration *c);
