// config: what a run is asked to do (the flags of `tcbench run`), before
// any suite is read.
//
//   bench_config cfg;
//   bench_config_init(&cfg);                      // defaults: repeat 10, timeout 600 s, ...
//   cfg.suites = (const char *[]){"suites/smoke.yaml"};
//   cfg.nsuites = 1;
//   bench_plan_new(&cfg, &p, &d);                 // plan.h
#pragma once
#include "axes.h"
#include "core/dtype.h"
#include "results/results.h"

#include <stdbool.h>
#include <stdint.h>

#define BENCH_DEFAULT_TIMEOUT_S 600.0
// The measuring budget's defaults (timing.h): timed rounds go on at least
// min_time_s per entry, add rounds while a speedup's 95% interval is wider
// than BENCH_CI_TARGET of it, and take no extra round past max_time_s.
#define BENCH_DEFAULT_MIN_TIME_S 0.1
#define BENCH_DEFAULT_MAX_TIME_S 1.0
#define BENCH_CI_TARGET          0.05
// Each group is measured in this many child processes by default, one
// after the other, and their samples pooled (--processes; pyperf's remedy
// for what a process's memory layout does to its times), at most
// BENCH_MAX_PROCESSES (results.h).
#define BENCH_DEFAULT_PROCESSES 3
#define BENCH_MAX_BATCHES       16

typedef struct bench_config {
    const char *const *suites; // suite file paths
    int nsuites;
    const char *size;                   // --size NAME, or NULL
    int64_t batch;                      // > 0 replaces every case's batch
    int64_t batches[BENCH_MAX_BATCHES]; // --batch-sizes: each case once per batch (a sweep)
    int64_t prompt_len, new_tokens;     // > 0: the generate workload's, over every case's
    int64_t rounds;                     // > 0: the chat workload's rounds, over every case's
    int nbatches;
    int threads;        // OpenMP / OpenBLAS / oneDNN threads in each child
    int repeat;         // interleaved rounds per task at least (one sample each)
    int warmup;         // --warmup N iterations; 0: until the step time settles
    double min_time_s;  // timed rounds at least this long per entry
    double max_time_s;  // no extra round past this per entry
    int processes;      // --processes: child processes per group, samples pooled
    bool processes_set; // --processes given: it wins over a suite's defaults.processes
    bool pin;           // --pin: each measuring thread pinned to one CPU
    double timeout_s;   // per task, build and measurement together
    uint64_t seed;      // parameter and input values
    const char *output; // results JSON path; NULL: results/tcbench-YYYYmmdd-HHMMSS.json
    // Values to run on each axis; naxis[a] == 0 takes the suites' defaults
    // (only those this build can run; the rest are named in plan->skipped).
    int axis[BENCH_AXIS_COUNT][BENCH_AXIS_MAX];
    int naxis[BENCH_AXIS_COUNT];
    bool accuracy;               // check against the fp64 reference
    bool grad_scaler;            // --grad-scaler: dynamic loss scaling in AMP training
    enum dtype amp_dtype;        // --amp-dtype: autocast's low dtype, DT_F16 (default) or DT_BF16
    int weight_bits;             // --weights: 0 (f32 weights, the default), 8 or 4
    int weight_group;            // --weight-group: 32, 64 or 128; 0: 32 for int4, 128 for int8
    enum dtype weight_scales;    // --weight-scales: DT_F32 (default) or DT_F16
    bool fused_attention;        // --attention sdpa: attention layers as one ATTENTION op
    double accuracy_flops_limit; // skip the check above this many FLOPs per step
    const char *const *only;     // exact case names
    int nonly;
    const char *filter, *exclude; // POSIX extended regexes on case names, or NULL
    const char *dump_dir;         // --dump: generated source under DIR/CASE/MODE, or NULL
    bool tf32;                    // --tf32: the GPU's f32 GEMMs and convolutions may use TF32
    bool flush_l2;                // --flush-l2: the GPU's L2 flushed before each sample
    size_t memory_limit;          // --memory-limit: a cap on each case's tensor bytes, or 0
    // --device auto (asked, or the default): why it did not choose cuda,
    // "" when it did (it found a usable GPU), recorded in the results; NULL
    // when the devices were named
    const char *device_auto;
    // --shard K/N: run shard K (1 .. N) of the selection's N shards
    // (shard.h); shard_count 0: the whole selection
    int shard_index, shard_count;
    int argc; // the command line, recorded in the results
    char *const *argv;
} bench_config;

// Defaults: threads = online cores, repeat 10, warm-up until settled,
// min_time 0.1 s, max_time 1 s, timeout 600 s, seed 0, accuracy on with the
// 2e10 FLOPs limit, everything else empty.
void bench_config_init(bench_config *cfg);
