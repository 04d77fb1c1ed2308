// runner: runs the cases of one or more suites, each in its own child
// process, and writes the results (docs/results-schema.md).
//
//   bench_config cfg;
//   bench_config_init(&cfg);                      // defaults: repeat 10, timeout 600 s, ...
//   cfg.suites = (const char *[]){"suites/smoke.yaml"};
//   cfg.nsuites = 1;
//   bench_plan *p; diag d;
//   if (bench_plan_new(&cfg, &p, &d) < 0) { diag_print(&d, stderr); exit(2); }  // bad input
//   bench_report *r; char err[512];
//   if (bench_report_open(p, &r, err, sizeof err) < 0) ...   // output path, journal, host
//   bench_run(p, r, &(bench_hooks){.on_done = show});        // one child per task
//   if (bench_report_write(r, err, sizeof err) < 0) ...      // atomic results JSON
//   ... r->results[i].status ...
//   bench_report_free(r); bench_plan_free(p);
//
// Planning does everything that can find bad input before anything runs:
// it loads every suite, selects cases (--only, --filter, --exclude), loads
// and builds every selected case's model (cheap: shapes only, no values)
// and resolves the modes, precisions, workloads and devices to run. A task
// is one case under one value of each axis, and becomes one entry of the
// results. A group is the tasks of one case that differ only in mode: eager
// first (added whenever a compiled-family mode is asked for, as speedups
// need it), then the compiled-family modes in the order asked.
//
// Running forks one child per group. The child builds the model once,
// fills its values from the seed, compiles each compiled-family mode twice
// (cold: into an empty temporary kernel cache; warm: a cache hit, the
// program measured), checks every mode's first step (eager against the
// fp64 reference; compiled-family modes against eager and fp64 by
// PyTorch's rule, accuracy.h), times all modes interleaved (timing.h) and
// sends a JSON array, one object per task, back through a pipe. The parent
// enforces the time limit and turns a signal, a timeout or an out-of-memory
// exit into the status of every task of the group; the run always goes on
// with the next group. With --processes N (default BENCH_DEFAULT_PROCESSES)
// the group then runs in N - 1 more children, one after the other, each
// building the model anew, loading the first child's programs from a kernel
// cache the group's children share, and timing again; their samples are
// pooled into the first child's results (bench_group_pool), and the spread
// of the processes' medians is recorded beside the noise. A crash or
// timeout in a later child fails the entry as in the first. Each finished
// task is appended to OUTPUT.jsonl at
// once (flushed and fsync'd), so a killed run loses nothing already
// measured.
//
// A cuda group runs the same steps with the GPU's executors (exec.h), made
// in its child: a CUDA context does not survive fork(), so the parent never
// makes one (bench_report_open describes the GPU for host.gpus in a forked
// child of its own). Its samples are CUDA event times, the host's beside
// them (host_samples).
//
// The parent must not have run an OpenMP parallel region with more than one
// thread before bench_run: libgomp's thread pool does not survive fork, and
// a child that needs it would hang until its timeout. (The CLI's parent only
// loads and builds; bench_group_measure in-process is fine with threads = 1.)
//
// Every entry with samples carries its stability (bench_stability): its
// noise, its speedup interval's width, and what the machine did during the
// timed rounds (involuntary context switches of the child, steal time,
// load). bench_stability_judge calls it unstable past the caps below
// (docs/results-schema.md, "stability"); an unstable entry keeps its status
// and is left out of every geomean.
//
// Test-only: TCBENCH_TEST_FAULT=crash:NAME,hang:NAME,oom:NAME makes the
// child of case NAME raise SIGSEGV, sleep forever, or exit as out of memory
// (crash-later:NAME: every child of the case but the first, --processes);
// TCBENCH_TEST_NOISE=NAME[:MODE][,...] stretches the samples of case NAME
// (every mode, or MODE's) by 1x, 2x, 3x, 1x, 2x, ... once they are measured,
// before any statistics, so that the entry comes out unstable (docs/cli.md).
#pragma once
#include "accuracy.h"
#include "axes.h"
#include "base/diag.h"
#include "calibrate.h"
#include "model/modeldef.h"
#include "stats.h"
#include "model/suite.h"

#include <jansson.h>
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
// for what a process's memory layout does to its times).
#define BENCH_DEFAULT_PROCESSES 3
#define BENCH_MAX_PROCESSES     64
// An entry is unstable above these (docs/results-schema.md, "stability"):
// its noise (bench_stats_noise), its speedup's 95% interval relative to the
// speedup, involuntary context switches per second of timed rounds and per
// measuring thread, the measuring threads' time waiting for a CPU as a
// fraction of theirs, steal time as a fraction of the CPUs' time.
#define BENCH_NOISE_CAP        0.10
#define BENCH_CI_CAP           0.25
#define BENCH_NIVCSW_CAP_PER_S 50.0
#define BENCH_RUN_DELAY_CAP    0.05
#define BENCH_STEAL_CAP        0.05
// Eager on the run's threads slower than this times eager on one thread:
// a threading stall, not the workload (every entry of the case unstable).
#define BENCH_THREAD_STALL 1.5
#define BENCH_MAX_BATCHES  16
// A child that runs out of memory exits with this code.
#define BENCH_EXIT_OOM 99

typedef struct bench_config {
    const char *const *suites; // suite file paths
    int nsuites;
    const char *size;                   // --size NAME, or NULL
    int64_t batch;                      // > 0 replaces every case's batch
    int64_t batches[BENCH_MAX_BATCHES]; // --batch-sizes: each case once per batch (a sweep)
    int nbatches;
    int threads;        // OpenMP / OpenBLAS / oneDNN threads in each child
    int repeat;         // interleaved rounds per task at least (one sample each)
    int warmup;         // --warmup N iterations; 0: until the step time settles
    double min_time_s;  // timed rounds at least this long per entry
    double max_time_s;  // no extra round past this per entry
    int processes;      // --processes: child processes per group, samples pooled
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
    double accuracy_flops_limit; // skip the check above this many FLOPs per step
    const char *const *only;     // exact case names
    int nonly;
    const char *filter, *exclude; // POSIX extended regexes on case names, or NULL
    const char *dump_dir;         // --dump: generated source under DIR/CASE/MODE, or NULL
    bool tf32;                    // --tf32: the GPU's f32 GEMMs and convolutions may use TF32
    bool flush_l2;                // --flush-l2: the GPU's L2 flushed before each sample
    // --device auto (asked, or the default): why it did not choose cuda,
    // "" when it did (it found a usable GPU), recorded in the results; NULL
    // when the devices were named
    const char *device_auto;
    int argc; // the command line, recorded in the results
    char *const *argv;
} bench_config;

// Defaults: threads = online cores, repeat 10, warm-up until settled,
// min_time 0.1 s, max_time 1 s, timeout 600 s, seed 0, accuracy on with the
// 2e10 FLOPs limit, everything else empty.
void bench_config_init(bench_config *cfg);

typedef struct bench_case {
    const suite *s;
    const suite_case *c;
    modeldef *md;
    int64_t batch;       // after --batch-size
    int64_t param_count; // of the inference graph
    double flops;        // per inference step
    double min_bytes;    // fewest bytes a step must move (graph_min_bytes)
} bench_case;

typedef struct bench_task {
    int case_index;
    int group;                  // index into plan->groups
    int axis[BENCH_AXIS_COUNT]; // one value per axis
} bench_task;

// Tasks first .. first + ntasks - 1: one case, one precision, workload and
// device, every mode; eager first when any mode is compiled-family.
typedef struct bench_group {
    int first, ntasks;
} bench_group;

typedef struct bench_plan {
    bench_config cfg; // a copy; the strings stay the caller's
    suite **suites;
    int nsuites;
    bench_case *cases; // selected, in suite order
    int ncases;
    bench_task *tasks; // case-major, the mode fastest: every mode of a group together
    int ntasks;
    bench_group *groups; // one child process each
    int ngroups;
    bool used[BENCH_AXIS_COUNT][BENCH_AXIS_MAX]; // values some task runs
    // Suite defaults this build cannot run yet: "mode compiled; precision amp", or "".
    char skipped[256];
} bench_plan;

// 0 on success; -1 on bad input with a located message in d.
int bench_plan_new(const bench_config *cfg, bench_plan **out, diag *d);
void bench_plan_free(bench_plan *p);
// Loads a case's model and builds its inference graph; the caller frees
// both. Shared by planning and `tcbench check`.
int bench_case_build(const suite_case *c, int64_t batch, modeldef **md, model **m, diag *d);

typedef struct bench_compile {
    bool done;      // both compiles succeeded
    double cold_s;  // compile_model into an empty kernel cache
    double warm_s;  // again, against that cache: the program measured
    bool cache_hit; // the warm compile hit the cache (it should)
} bench_compile;

#define BENCH_MAX_REASONS 6
typedef struct bench_stability {
    int rounds;          // interleaved rounds its samples came from; 0: no samples
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

// Sets s->unstable and s->reasons from its figures (the caps above).
void bench_stability_judge(bench_stability *s);
// Adds a reason (at most BENCH_MAX_REASONS kept); the entry is then unstable.
void bench_stability_add(bench_stability *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

// Eager's median on `threads` threads against its median on one: above
// BENCH_THREAD_STALL, adds the reason (the entry is then unstable) and
// returns true.
bool bench_thread_stall_judge(bench_stability *s, double eager_s, double one_thread_s, int threads);

typedef struct bench_result {
    int task; // index into plan->tasks
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
} bench_result;

typedef struct bench_report {
    const bench_plan *plan;
    bench_result *results; // one per task, in order; nresults so far
    int nresults;
    char output[4096];  // results JSON path
    char journal[4104]; // output + ".jsonl"
    char timestamp[32]; // start of the run, ISO 8601 UTC
    double wall_s;      // whole run
    json_t *host;
    FILE *journal_file;
    bench_calibration calib; // `tcbench calibrate`'s, when has_calib
    bool has_calib;
} bench_report;

// Resolves the output path (creating its directory), opens the journal,
// reads the host description and loads the calibration (host.calibration,
// null when there is none for this CPU and thread count). -1 with a message naming the failed call.
int bench_report_open(const bench_plan *p, bench_report **out, char *err, size_t cap);
// Writes OUTPUT.tmp.PID, fsyncs it and renames it over OUTPUT.
int bench_report_write(const bench_report *r, char *err, size_t cap);
void bench_report_free(bench_report *r);
// The whole document / one case object, as in docs/results-schema.md; calib
// may be NULL (the roofline then has no ceilings).
json_t *bench_report_json(const bench_report *r);
json_t *bench_result_json(const bench_plan *p, const bench_result *r,
                          const bench_calibration *calib);
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

typedef struct bench_hooks {
    void (*on_start)(const bench_plan *p, int group, void *user);
    // about every 0.25 s while a group's child runs
    void (*on_tick)(const bench_plan *p, int group, double elapsed_s, void *user);
    // once per task, in order, when its group's child has ended
    void (*on_done)(const bench_plan *p, const bench_result *r, void *user);
    void *user;
} bench_hooks;

// Runs every group of p into r, once per report (hooks may be NULL).
// Returns the number of tasks that did not end ok or pass; a journal line
// that cannot be written is reported once on stderr and the run goes on.
int bench_run(const bench_plan *p, bench_report *r, const bench_hooks *hooks);
// The group's own measurement, in this process (what the child does,
// threads set from the config included): rs[0 .. ntasks - 1], task set.
// Process 0 does everything; a later process of the same group (process >
// 0) only builds, compiles and times: its results carry samples and
// stability, and the parent pools them into process 0's (bench_group_pool).
// kcache: NULL, or a directory the group's processes share (CPU): process
// 0 compiles cold into KCACHE/MODE and leaves it, later processes load the
// same programs from it (a cache hit) instead of compiling them again.
void bench_group_measure(const bench_plan *p, int group, int process, const char *kcache,
                         bench_result *rs);
// Removes dir and everything under it, depth first, never following a
// link out of it nor crossing into another file system.
void bench_remove_tree(const char *dir);
// Pools the samples of a later process's results `more` (rs's group, the
// same tasks) into rs: samples appended, their count kept by process,
// interference summed (the caller then recomputes rs's stats). A task that failed there while it was good in rs
// takes that status, its message prefixed by the process. `more` is left
// to the caller to free.
void bench_group_pool(bench_result *rs, const bench_result *more, int n, int process);
// Once a group's samples are final (one process, or pooled): each passing
// compiled-family entry's speedup over rs[0], and every entry's stability
// (its noise over the processes, the caps, a noisy eager baseline, a
// threading stall against rs[0]'s one-thread time), judged anew.
void bench_group_judge(bench_result *rs, int n, int threads);
// Fills rs[0 .. n - 1] from the JSON array the child sent; -1 (every
// result error) when it is not an array of n case objects.
int bench_results_from_child(const char *text, size_t len, bench_result *rs, int n);
void bench_result_free(bench_result *r);
// TCBENCH_TEST_NOISE (test-only, above): whether it names case `name`
// under `mode` (NAME alone names every mode).
bool bench_test_noise(const char *name, const char *mode);

// `tcbench check`: a suite file (top-level `cases:`) is loaded and every
// case's model built for the default size and each size a case defines; a
// model file is loaded and built with batch 2. 0, or -1 with d set.
int bench_check_file(const char *path, diag *d);
