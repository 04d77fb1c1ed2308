// history: results of many runs across commits, kept in one SQLite file
// (docs/history.md): `tcbench history add | list | show | report` and the
// rolling baseline of `tcbench compare history:BRANCH`.
//
//   history_db *h;
//   char err[1024];
//   if (history_open("results/history.sqlite", true, &h, err, sizeof err) < 0) ... exit 2
//   history_add_opts a = {.commit = "1a2b3c", .branch = "main"};
//   if (history_add(h, "results/run.json", &a, stdout, err, sizeof err) < 0) ... exit 2
//   history_close(h);
//
// The file is in WAL mode (readers never block the writer) with a busy
// timeout, so adds from concurrent processes queue and all land. Each add
// is one BEGIN IMMEDIATE ... COMMIT: a crash mid-insert leaves the file as
// it was. Its schema is versioned (table schema_version) and migrated on
// open; a file of a newer version, a file with tables but no
// schema_version (another program's database) and a file that is no
// SQLite database are refused with one line naming it. Every failed sqlite3
// call is reported with the call's name and the file.
#pragma once
#include "reports/compare.h"
#include "reports/resfile.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

// The schema this build writes (history_db.c: one migration per version).
#define HISTORY_SCHEMA_VERSION 1
// The default database, when neither --db nor TCBENCH_HISTORY names one.
#define HISTORY_DEFAULT_DB "results/history.sqlite"
// Runs a rolling baseline pools at most (each its processes: stats.h's cap).
#define HISTORY_MAX_RUNS 64

typedef struct history_db history_db;

// --db, else $TCBENCH_HISTORY, else HISTORY_DEFAULT_DB.
const char *history_default_path(const char *db_opt);
// Opens (create: and creates) the database at path and brings its schema
// to HISTORY_SCHEMA_VERSION. 0, or -1 with err naming the file.
int history_open(const char *path, bool create, history_db **out, char *err, size_t cap);
void history_close(history_db *h);

// What identifies a machine: its CPU model, cores and GPUs (name, memory),
// the fields compare checks besides threads_used (a run setting). Into buf.
void history_fingerprint(const resfile *f, char *buf, size_t cap);

typedef struct history_add_opts {
    const char *commit; // NULL: the results' tool.git_commit ("unknown" is refused)
    const char *branch; // required
} history_add_opts;
// Stores the run of the results file at path. 0 (one line on out: the run's
// id and entries), or -1 with err: a file the results reader refuses, an
// invalid entry, the same run already stored, a failed sqlite3 call.
int history_add(history_db *h, const char *path, const history_add_opts *o, FILE *out, char *err,
                size_t cap);

// The runs, oldest first: id, commit, branch, date, host, entries.
int history_list(history_db *h, FILE *out, char *err, size_t cap);

// The series of one entry ("suite/name mode precision workload device
// batch", or the start of one that names a single entry) on one machine
// (host: a hostname or the start of a fingerprint hash; NULL: the machine
// of its newest run): commit, date, median, noise, n, status, speedup.
int history_show(history_db *h, const char *entry, const char *host, FILE *out, char *err,
                 size_t cap);

// The rolling baseline for cur: the last runs (at most HISTORY_MAX_RUNS) of
// branch on cur's machine fingerprint (and the newest one's threads; cur's
// own run left out), each entry's samples pooled over them as a results
// file with one process per run's process, named "history:BRANCH" in
// messages. 0, or -1 with err.
int history_baseline(history_db *h, const char *branch, const resfile *cur, int runs, resfile **out,
                     char *err, size_t cap);

// Every entry's series per machine as a chart over commits, with its steps,
// into dir (created), and dir/history.md listing the steps.
int history_report(history_db *h, const char *dir, const char *gnuplot, FILE *warn, char *err,
                   size_t cap);

// --- steps (history_steps.c) ---------------------------------------------------

// A step in a series: y[at - 1] is the last point before it, y[at] the first after.
typedef struct history_step {
    int at;
    double before, after; // means of the segments on either side (up to the next steps)
    double change;        // after / before - 1
} history_step;

// Steps found at least this large (relative), at least this many standard
// errors of the difference, with at least this many points on each side.
#define HISTORY_STEP_MIN    0.05
#define HISTORY_STEP_Z      3.0
#define HISTORY_STEP_MINSEG 2

// Change points of y[0 .. n), asv-style: the split that most reduces the
// squared error, kept when its step is at least HISTORY_STEP_MIN and
// significant against the segments' own scatter, then each side again.
// Writes at most cap steps, ordered by at; returns how many, or -1 when
// memory runs out.
int history_steps(const double *y, int n, history_step *out, int cap);
