// results: the results schema (docs/results-schema.md) as plain data, its
// one writer and its one reader. The runner writes with it and reads its
// children's results back with it; reports/ reads results files with it.
// It uses only base/ and jansson, so reports link it without the engine.
//
//   // writing one entry: what identifies it, and what was measured
//   results_case id = {.suite = "smoke", .name = "mlp", .model = "mlp", .family = "mlp",
//                      .mode = "eager", .precision = "fp32", .workload = "infer",
//                      .device = "cpu", .batch = 2, .suite_batch = 2, ...};
//   json_t *c = results_entry_json(&id, &result, NULL, NULL);   // one case object
//
//   // reading it back
//   results_entry e;
//   diag d;
//   if (results_entry_read(c, "results.json", 0, &e, &d) < 0) diag_print(&d, stderr);
//   ... e.id.name, e.status, e.r.stats.median, e.r.stab.unstable ...
//   results_entry_free(&e);
//
// A figure the JSON has as null, lacks or has with the wrong type reads NAN
// (counts: -1): the schema lets later versions add fields, and writes null
// for what could not be computed. What identifies an entry (suite, name,
// mode, precision, workload, device, batch, status) and its samples must be
// there and well typed. stats are recomputed from the samples, so every
// reader sees the figures the run printed.
#pragma once
#include "axes.h"
#include "base/diag.h"
#include "stats.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define RESULTS_SCHEMA_VERSION 1

#define BENCH_MAX_OUTPUTS 8
// Each group is measured in at most this many child processes (--processes).
#define BENCH_MAX_PROCESSES 64
#define BENCH_MAX_REASONS   6

typedef struct bench_accuracy_out {
    double rel_l2, max_abs, rmse;
    double cosine; // cosine similarity with the reference (1 when both are 0)
    // eager in training: the RMSE that rounding the model's own values to
    // f16 / bf16 (mixed precision) or moving them by one f32 ulp (fp32)
    // causes in fp64 (NaN when not measured); the output also passes when
    // its RMSE is at most twice that + tol / 10, PyTorch's RMSE rule with
    // exact arithmetic on perturbed values as the baseline
    double base_rmse;
} bench_accuracy_out;

typedef struct bench_accuracy {
    bool checked;
    char reason[160]; // why not checked (or, compiled-family, why fp64 was not)
    double rel_l2, max_abs, rmse;
    int noutputs;
    bench_accuracy_out outputs[BENCH_MAX_OUTPUTS];
    double tol;
    // mixed precision: an output (item) also passes when its cosine
    // similarity with fp64 is at least BENCH_COSINE_MIN (bench_accuracy_passes)
    bool cosine_fallback;
    // fp32 training, eager: an item also passes when its RMSE is at most
    // twice what moving the model's values by one f32 ulp causes in fp64
    // (base_rmse) + tol / 10: a step is checked no tighter than the model's
    // own sensitivity to f32 rounding (bench_accuracy_passes)
    bool baseline_fallback;
    double cosine;    // the lowest over outputs
    int failed_items; // outputs above tol and (with the fallback) below the cosine
    // compiled-family modes only (vs_eager set): against eager, worst over outputs
    bool vs_eager;
    double vs_eager_max_abs, vs_eager_rel_l2;
    double eager_rmse; // eager's RMSE against fp64, NaN without the reference
    char rule[200];    // "allclose", "rmse", "cosine", "failed: ...", "" when not checked
    char worst[96];    // training: the item furthest from fp64 ("the gradient of fc.weight")
} bench_accuracy;

typedef struct bench_compile {
    bool done;      // both compiles succeeded
    double cold_s;  // compile_model into an empty kernel cache
    double warm_s;  // again, against that cache: the program measured
    bool cache_hit; // the warm compile hit the cache (it should)
} bench_compile;

// The generate workload's figures (engine/bench/generate.h); done false
// for other workloads. samples_s are then each generation's median decode
// step (seconds per token).
#define BENCH_MAX_CHAT_ROUNDS 16 // the chat workload's rounds at most

typedef struct bench_gen {
    bool done;
    int64_t prompt_len, new_tokens;
    double ttft_s;         // time to first token: the prefill and its argmax, median
    double decode_s;       // a decode step (one token a row), median over steps and generations
    double tokens_per_s;   // batch / decode_s
    int64_t kv_bytes_per_token; // f32 keys and values a token adds over every layer
    int64_t prefill_kernels;    // kernels of the prefill (kernels: of a decode step)
    double weight_error;        // --weights: quantized weights' relative RMS error, else NaN
    // the chat workload: rounds (0 otherwise), each round's time to first
    // token with the earlier rounds' cache kept and with the dialogue
    // prefilled anew, medians; samples_s are the last round's, kept
    int64_t rounds;
    double ttft_reuse_s[BENCH_MAX_CHAT_ROUNDS], ttft_anew_s[BENCH_MAX_CHAT_ROUNDS];
} bench_gen;

typedef struct bench_stability {
    int rounds; // interleaved rounds its samples came from; 0: no samples
    // The entry's noise, what the cap judges: bench_stats_noise of a
    // process's samples, their mean over the processes weighted by samples
    // (a shift between processes is not noise within one: it is
    // process_spread, which `compare` adds as process_spread / sqrt(processes))
    double noise;
    int processes;         // processes whose samples are pooled (1 or more)
    double process_spread; // standard deviation of the log of their medians; NaN below 2
    int process_samples[BENCH_MAX_PROCESSES];      // how many of the samples each gave, in order
    double process_medians_s[BENCH_MAX_PROCESSES]; // each one's median (bench_group_judge)
    double ci_rel_width; // compiled-family that passed: (ci95_hi - ci95_lo) / median; else NaN
    double timed_s;      // wall time of the group's timed rounds
    int64_t nivcsw;      // the child's involuntary context switches during them
    double steal_s;      // the machine's steal time during them (0 where unknown)
    double run_delay_s;  // the child's threads' time runnable but not running, NaN unknown
    double load_start, load_end; // 1-minute load average around them, NaN unknown
    // eager entries run on several threads: eager's median step on one
    // thread, timed right after the rounds (NaN when not timed)
    double one_thread_s;
    int threads; // measuring threads, for the switches' rate
    int cpus;    // online CPUs, for the steal fraction
    bool unstable;
    int nreasons;
    char reasons[BENCH_MAX_REASONS][96];
} bench_stability;

// What was measured for one entry.
typedef struct bench_result {
    int task; // the runner's: index into plan->tasks
    enum bench_status status;
    char message[512];
    double *samples;      // seconds per iteration (cuda: by CUDA events)
    double *host_samples; // cuda: the host's seconds per iteration beside them, else NULL
    int nsamples;
    bench_stats stats; // stats.n == 0 when there are no samples
    int64_t iters_per_sample;
    int64_t kernels;
    int64_t cast_kernels; // of which dtype casts alone (mixed precision)
    int64_t peak_bytes;
    bench_accuracy acc;
    double wall_s; // fork to exit of the group's child, as the parent saw it
    // compiled-family entries only
    bench_compile compile;
    int64_t arena_bytes;
    bench_speedup speedup;    // NaN unless the entry passed
    double compression_ratio; // eager peak_bytes / this one's, NaN when unknown
    bench_stability stab;     // rounds == 0 when there are no samples
    bench_gen gen;            // the generate workload's figures
} bench_result;

void bench_result_free(bench_result *r);

// What identifies an entry, and the facts of its case.
typedef struct results_case {
    const char *suite, *name, *model, *family;
    const char *mode, *precision, *workload, *device; // the axes' values (axes.h)
    int64_t batch;
    int64_t suite_batch; // the case's own batch before a sweep's; -1 when not recorded
    bool study;          // one of the study's own models (suite key `study`); false when absent
    int64_t param_count; // -1 unknown
    double flops;        // per step, NAN unknown
    double min_bytes;    // fewest bytes a step must move, NAN unknown
} results_case;

// One case object as read. Strings point into the JSON read from, which
// must outlive the entry.
typedef struct results_entry {
    results_case id;
    const char *status;  // as written; r.status is BENCH_ERROR when unknown
    bool status_known;   // a status this build names
    const char *message; // "" when missing
    bool has_stability;  // the file has a stability object
    double intensity;    // the roofline object's, NAN when none
    double achieved_GFLOPs;
    bench_result r;
} results_entry;

// One case object (docs/results-schema.md). params: the case's overrides
// (an object, or NULL for {}); roofline: an object, or NULL for null; both
// are taken. NULL when memory runs out.
json_t *results_entry_json(const results_case *id, const bench_result *r, json_t *params,
                           json_t *roofline);
// Reads cases[index] of a file at path (for messages). 0, or -1 with d set
// ("cases[3] (mlp): \"batch\" is missing"); e is then freed.
int results_entry_read(const json_t *c, const char *path, int index, results_entry *e, diag *d);
void results_entry_free(results_entry *e);

// A figure as the schema writes it: JSON has no NaN or infinity, so those
// are null.
json_t *results_real(double v);

// A timing sample is a plausible time when finite and within
// [RESULTS_SAMPLE_MIN_S, RESULTS_SAMPLE_MAX_S]: no step of a model runs in
// under a nanosecond (one clock cycle), and none of a benchmark in over a
// day; 0, negative, 1e200 or 1e308 seconds is a broken writer or an edited
// file, and would pass a comparison as `same` or `ambiguous`.
#define RESULTS_SAMPLE_MIN_S 1e-9
#define RESULTS_SAMPLE_MAX_S 86400.0
// Whether e's samples are all plausible times. When one is not, e becomes
// invalid (status "invalid", BENCH_INVALID) with a message naming the first
// ("samples_s[3] = 1e+200 s: not a plausible time"), and false is returned.
bool results_entry_check_samples(results_entry *e);

// The whole document; host is borrowed, the rest taken.
json_t *results_doc_json(const char *timestamp, json_t *command_line, json_t *host, json_t *config,
                         json_t *cases, double wall_s);

// The document-level facts a reader needs (strings point into root).
#define RESULTS_MAX_DISABLED 32
typedef struct results_doc {
    const char *timestamp, *tool_version, *git_commit, *hostname, *os, *cpu_model;
    int64_t cores, threads_used;     // -1 when missing
    const char *command;             // command_line[0], or "tcbench"
    double calib_GBps, calib_GFLOPs; // host.calibration, NAN when none
    json_t *gpus;                    // host.gpus (CUDA runs), or NULL
    double loadavg_start;            // host.loadavg_start, NAN when missing
    // config.disabled: the TCBENCH_DISABLE_* kill switches in effect,
    // "NAME=VALUE" (none in files written before they were recorded)
    const char *disabled[RESULTS_MAX_DISABLED];
    int ndisabled;
    const json_t *cases; // the cases array
} results_doc;

// Checks root (an object of a schema_version this build reads, with a
// cases array) and reads its facts. 0, or -1 with d set (path for messages).
int results_doc_read(const json_t *root, const char *path, results_doc *doc, diag *d);

// Writes doc to PATH.tmp.PID, fsyncs it, renames it over path and syncs the
// directory. 0, or -1 with err naming the failed call.
int results_file_write(const char *path, const json_t *doc, char *err, size_t cap);
