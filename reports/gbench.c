// Results as Google Benchmark JSON (export.h).
#include "export.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifndef TCBENCH_BUILD_TYPE
#define TCBENCH_BUILD_TYPE "release"
#endif

// "Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz" -> 2100; NAN when it does not say.
static double mhz_of(const char *cpu) {
    const char *at = strrchr(cpu, '@');
    if (!at)
        return NAN;
    char *end;
    double v = strtod(at + 1, &end);
    while (*end == ' ')
        end++;
    if (!(v > 0))
        return NAN;
    if (!strncmp(end, "GHz", 3))
        return v * 1000;
    if (!strncmp(end, "MHz", 3))
        return v;
    return NAN;
}

static json_t *context(const resfile *f) {
    // Google Benchmark writes the date with an explicit offset
    char date[64];
    size_t n = strlen(f->timestamp);
    if (n && f->timestamp[n - 1] == 'Z')
        snprintf(date, sizeof date, "%.*s+00:00", (int)(n - 1), f->timestamp);
    else
        snprintf(date, sizeof date, "%s", f->timestamp);
    json_t *c =
        json_pack("{s:s, s:s, s:s, s:I, s:[], s:[], s:s, s:s, s:s, s:s, s:I, s:s}", "date", date,
                  "host_name", f->hostname, "executable", f->command, "num_cpus",
                  (json_int_t)(f->cores > 0 ? f->cores : 0), "caches", "load_avg",
                  "library_build_type", strcmp(TCBENCH_BUILD_TYPE, "debug") ? "release" : "debug",
                  "tcbench_version", f->tool_version, "git_commit", f->git_commit, "cpu_model",
                  f->cpu_model, "threads_used", (json_int_t)f->threads_used, "source", f->path);
    double mhz = mhz_of(f->cpu_model);
    if (c && isfinite(mhz) && json_object_set_new(c, "mhz_per_cpu", json_integer((json_int_t)mhz)))
        return json_decref(c), NULL;
    // Google Benchmark's load_avg is getloadavg's 1, 5 and 15 minutes; the
    // results record the 1-minute figure at the start of the run
    if (c && isfinite(f->loadavg_start) &&
        json_array_append_new(json_object_get(c, "load_avg"), json_real(f->loadavg_start)))
        return json_decref(c), NULL;
    return c;
}

static json_t *run(const char *name, int family, const char *run_type, int reps) {
    return json_pack("{s:s, s:i, s:i, s:s, s:s, s:i, s:i}", "name", name, "family_index", family,
                     "per_family_instance_index", 0, "run_name", name, "run_type", run_type,
                     "repetitions", reps, "threads", 1);
}

static int times(json_t *j, long long iterations, double v, const char *unit) {
    int rc = 0;
    rc |= json_object_set_new(j, "iterations", json_integer(iterations));
    rc |= json_object_set_new(j, "real_time", json_real(v));
    rc |= json_object_set_new(j, "cpu_time", json_real(v));
    rc |= json_object_set_new(j, "time_unit", json_string(unit));
    return rc;
}

// error_occurred and error_message when error is not empty; label when label is not.
static int marks(json_t *j, const char *error, const char *label) {
    int rc = 0;
    if (error[0])
        rc |= json_object_set_new(j, "error_occurred", json_true()) ||
              json_object_set_new(j, "error_message", json_string(error));
    if (label[0])
        rc |= json_object_set_new(j, "label", json_string(label));
    return rc;
}

// The repetitions and aggregates of one entry, appended to arr; an entry
// without samples: one run with its error.
static int entry_runs(const resfile_entry *e, int family, json_t *arr) {
    char name[1200];
    if (!strcmp(e->device, "cpu"))
        snprintf(name, sizeof name, "%s/%s/%s/%s/%s/batch:%lld", e->suite, e->name, e->mode,
                 e->precision, e->workload, (long long)e->batch);
    else
        snprintf(name, sizeof name, "%s/%s/%s/%s/%s/%s/batch:%lld", e->suite, e->name, e->mode,
                 e->precision, e->workload, e->device, (long long)e->batch);
    long long iters = e->x->iterations_per_sample > 0 ? e->x->iterations_per_sample : 1;
    char error[700] = "", label[700] = "";
    if (!e->good)
        snprintf(error, sizeof error, "%s%s%s", e->status, *e->message ? ": " : "", e->message);
    if (e->unstable) { // Google Benchmark's label: a string shown beside the run
        int n = snprintf(label, sizeof label, "unstable");
        for (int k = 0; k < e->nreasons && n >= 0 && (size_t)n < sizeof label; k++)
            n += snprintf(label + n, sizeof label - (size_t)n, "%s%s", k ? "; " : ": ",
                          e->reasons[k]);
    }
    int rc = 0;
    if (e->nsamples == 0) {
        // nothing was timed: one run that says why, as a benchmark that
        // called SkipWithError does (iterations and times 0)
        json_t *j = run(name, family, "iteration", 1);
        rc = !j || json_object_set_new(j, "repetition_index", json_integer(0)) ||
             times(j, 0, 0, "ms") || marks(j, error[0] ? error : "no samples", label);
        if (j && (rc || json_array_append_new(arr, j)))
            rc = -1;
        return rc ? -1 : 0;
    }
    for (int k = 0; k < e->nsamples && rc == 0; k++) {
        json_t *j = run(name, family, "iteration", e->nsamples);
        rc = !j || json_object_set_new(j, "repetition_index", json_integer(k)) ||
             times(j, iters, e->samples[k] * 1e3, "ms") || marks(j, error, label);
        if (j && (rc || json_array_append_new(arr, j)))
            rc = -1;
    }
    struct {
        const char *name, *unit;
        double v;
        const char *time_unit;
    } aggs[] = {
        {"mean", "time", e->stats.mean * 1e3, "ms"},
        {"median", "time", e->stats.median * 1e3, "ms"},
        {"stddev", "time", e->stats.stddev * 1e3, "ms"},
        {"cv", "percentage", e->stats.cv, "ms"},
    };
    for (size_t a = 0; a < sizeof aggs / sizeof aggs[0] && rc == 0; a++) {
        char aname[1300];
        snprintf(aname, sizeof aname, "%s_%s", name, aggs[a].name);
        json_t *j = run(aname, family, "aggregate", e->nsamples);
        rc = !j || json_object_set_new(j, "run_name", json_string(name)) ||
             json_object_set_new(j, "aggregate_name", json_string(aggs[a].name)) ||
             json_object_set_new(j, "aggregate_unit", json_string(aggs[a].unit)) ||
             times(j, e->nsamples, isfinite(aggs[a].v) ? aggs[a].v : 0, aggs[a].time_unit) ||
             marks(j, error, label);
        if (j && (rc || json_array_append_new(arr, j)))
            rc = -1;
    }
    return rc ? -1 : 0;
}

int export_gbench(const resfile *f, FILE *out, char *err, size_t cap) {
    json_t *benchmarks = json_array(), *ctx = context(f);
    int rc = benchmarks && ctx ? 0 : -1;
    int family = 0;
    for (int i = 0; i < f->nentries && rc == 0; i++)
        rc = entry_runs(&f->entries[i], family++, benchmarks);
    json_t *doc =
        rc == 0 ? json_pack("{s:o, s:o}", "context", ctx, "benchmarks", benchmarks) : NULL;
    if (!doc) {
        if (rc == 0) // json_pack took both references even though it failed
            ctx = benchmarks = NULL;
        json_decref(ctx);
        json_decref(benchmarks);
        snprintf(err, cap, "json_pack: out of memory building the export");
        return -1;
    }
    rc = json_dumpf(doc, out, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    json_decref(doc);
    if (rc < 0 || fputc('\n', out) == EOF || fflush(out) != 0) {
        snprintf(err, cap, "json_dumpf: writing failed");
        return -1;
    }
    return 0;
}
