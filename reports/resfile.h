// resfile: a results JSON (docs/results-schema.md), or the journal a run
// writes while it runs (OUTPUT.jsonl, results/journal.h), read into plain
// data for the readers: `tcbench report`, `compare` and `export`.
//
//   resfile *f;
//   diag d;
//   if (resfile_load("results.json", &f, &d) < 0) {
//       diag_print(&d, stderr);            // "results.json:12:5: ..." -> exit 2
//       return 2;
//   }
//   for (int i = 0; i < f->nentries; i++) {
//       const resfile_entry *e = &f->entries[i];
//       printf("%s/%s %s %.3f ms\n", e->suite, e->name, e->mode, e->stats.median * 1e3);
//   }
//   resfile_free(f);
//
// The schema is read by results.h (the runner's own reader), one case at a
// time: the file is mapped, a small scanner finds the elements of "cases"
// one after another, and each is parsed alone, read by results_entry_read,
// kept as a compact resfile_entry and its JSON freed; so a file of a
// million cases costs its entries, not a million JSON trees. Strings (the
// suite, mode, status, ... that repeat) are interned in the resfile, and
// so are the samples. A figure the file has as null, lacks, or has with the
// wrong type reads NAN (counts: -1), as the schema lets later versions add
// fields and write null for what could not be computed. What identifies an
// entry (suite, name, mode, precision, workload, device, batch, status) and
// its samples must be there and well typed, or loading fails with a
// message naming the case. Each case's `stability` and the config's
// `disabled` kill switches are read when present; older files read as
// stable with none disabled. stats, noise and the processes' spread are
// recomputed from samples_s with the runner's own code, so every reader
// sees the figures `tcbench run` printed. An entry with a sample that is no
// plausible time (results_entry_check_samples) reads as status "invalid".
//
// Malformed JSON gives FILE:LINE:COL; a file of a newer schema_version than
// this build reads is refused; a directory, device or FIFO is refused by
// name; running out of memory says so, and after how many cases. A journal
// (results_journal_sniff) reads its header line as the document and its
// lines as the cases: cut lines are skipped with a warning on stderr, and
// a case measured twice (a resumed run) keeps its later line.
#pragma once
#include "base/diag.h"
#include "results/results.h"
#include "results/stats.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define RESFILE_SCHEMA_VERSION RESULTS_SCHEMA_VERSION
#define RESFILE_MAX_REASONS    BENCH_MAX_REASONS
#define RESFILE_MAX_DISABLED   RESULTS_MAX_DISABLED

struct resfile;

// The figures an entry often lacks (a case that failed, a file of an older
// schema, a generated one), kept apart: an entry with none of them points
// at resfile_extra_none, so a million such entries cost a pointer each.
typedef struct resfile_extra {
    int64_t iterations_per_sample, kernels, peak_bytes, param_count; // -1: unknown
    double flops, min_bytes;
    double rel_l2;                         // against the fp64 reference
    double compile_cold_s, compile_warm_s; // NAN unless it compiled
    double ci95_lo, ci95_hi;               // the speedup's interval, NAN unless it passed
    double intensity, achieved_GFLOPs;     // the roofline object's
    // stability: the speedup's 95% interval / its median (NAN unknown), the
    // 1-minute load average around the timed rounds, involuntary context
    // switches (-1 unknown)
    double ci_rel_width, load_start, load_end;
    int64_t nivcsw;
    // --processes: the standard deviation of the log of the processes'
    // medians (NAN below 2)
    double process_spread;
} resfile_extra;

// Every figure unknown: NAN, counts -1.
extern const resfile_extra resfile_extra_none;

typedef struct resfile_entry {
    // (the ints and bools side by side: no padding, at a million entries a file)
    const struct resfile *file; // where it came from
    int index;                  // position in the file's cases
    int nsamples;               // of samples
    int nreasons;               // of reasons
    bool compiled;              // measured against a baseline: anything but eager, torch-eager
    bool good;                  // status ok or pass: ran, and its accuracy counts
    // stability (read by stability_load; a file without it reads as stable):
    // whether the entry's timing can be trusted, and why not (reasons)
    bool unstable;
    const char *suite, *name, *model, *mode, *precision, *workload, *device, *status, *message;
    int64_t batch;
    double *samples;          // seconds per iteration (nulls in the file left out)
    bench_stats stats;        // of samples; n == 0 without samples
    const resfile_extra *x;   // never NULL; resfile_extra_none when it has none
    double speedup;           // NAN unless it passed
    double compression_ratio; // eager peak / this one's
    // robust relative dispersion of samples_s within a process, recomputed
    // from the samples (bench_stats_processes); NAN without samples
    double noise;
    int64_t rounds; // -1 unknown
    // --processes: how many processes' samples are pooled (stability's
    // process_samples; 1 without them, -1 without samples); their spread
    // is x->process_spread
    int64_t processes;
    const char *const *reasons; // nreasons of them (interned), NULL when none
    int64_t suite_batch; // the case's own batch (before a sweep's); -1 when not recorded
    bool study;          // one of the study's own models (`study: true` in its suite)
} resfile_entry;

struct resfile_store;

typedef struct resfile {
    char path[1024];
    json_t *root;
    const char *timestamp, *tool_version, *git_commit, *hostname, *os, *cpu_model;
    int64_t cores, threads_used;     // -1 when missing
    const char *command;             // command_line[0], or "tcbench"
    double calib_GBps, calib_GFLOPs; // host.calibration, NAN when none
    json_t *gpus;                    // host.gpus (CUDA runs), or NULL
    double loadavg_start;            // host.loadavg_start, NAN when missing
    // config.disabled: the TCBENCH_DISABLE_* kill switches in effect, "NAME=VALUE"
    // (none in files written before they were recorded)
    const char *disabled[RESFILE_MAX_DISABLED];
    int ndisabled;
    resfile_entry *entries;
    int nentries, ncap;
    int ninvalid;      // entries with status "invalid"
    bool journal;      // read from a run's journal
    int cut_lines;     // the journal's lines skipped as cut
    struct resfile_store *store; // what the entries' strings and samples live in
} resfile;

// 0, or -1 with d set (the file, and line and column for a JSON error).
int resfile_load(const char *path, resfile **out, diag *d);
void resfile_free(resfile *f);
// The same from a document built in memory (root is taken, even on
// failure); label stands for the path in messages ("history:main").
int resfile_from_json(json_t *root, const char *label, resfile **out, diag *d);

// A pool of strings, each kept once (what the entries' strings live in;
// other readers may keep theirs in one too). NULL: out of memory.
struct resfile_store *resfile_store_new(void);
const char *resfile_store_intern(struct resfile_store *st, const char *s);
void resfile_store_free(struct resfile_store *st);

// Entries match across files on suite, name, mode, precision, workload,
// device and batch.
bool resfile_entry_same(const resfile_entry *a, const resfile_entry *b);

// Entries by that identity, in a hash table: finding an entry's match
// costs the same in ten entries or a million.
//
//   resfile_index x;
//   if (resfile_index_init(&x, f->nentries) < 0) ... out of memory
//   const resfile_entry *before = resfile_index_put(&x, e);   // NULL, or what e replaced
//   const resfile_entry *m = resfile_index_find(&x, other);    // same identity, or NULL
//   resfile_index_free(&x);
typedef struct resfile_index {
    const resfile_entry **slot;
    size_t mask; // slots - 1 (a power of two)
} resfile_index;
// Room for n entries; 0, or -1 when memory runs out.
int resfile_index_init(resfile_index *x, size_t n);
// Adds e (at most the n of init); returns the entry of e's identity it
// replaced, or NULL.
const resfile_entry *resfile_index_put(resfile_index *x, const resfile_entry *e);
const resfile_entry *resfile_index_find(const resfile_index *x, const resfile_entry *key);
void resfile_index_free(resfile_index *x);
// "smoke/gpt2 compiled fp32 infer cpu batch 2", for messages.
void resfile_entry_label(const resfile_entry *e, char *buf, size_t cap);
// Whether a mode is measured against a baseline (resfile_entry.compiled):
// compiled, fused, captured, torch-compile, and a mode no table knows.
bool resfile_mode_compiled(const char *mode);
// The mode e's speedup is over (bench_mode_baseline: "eager", or
// "torch-eager" for torch-compile; "eager" for a mode no table knows), or
// NULL for a baseline.
const char *resfile_entry_baseline(const resfile_entry *e);
// Sort order of axis values: the schema's order (eager, compiled, fused,
// captured, then torch-eager, torch-compile; fp32, amp; infer, train; cpu,
// cuda), unknown values after.
int resfile_rank(const char *axis, const char *value);
