// Reading results JSON into plain data (resfile.h).
#include "resfile.h"

#include "bench/axes.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// A number the file has, or NAN (null, missing, another type).
static double num(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static int64_t count(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : -1;
}

static const char *str(json_t *o, const char *key, const char *dflt) {
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : dflt;
}

static int need_string(const char *path, json_t *c, int i, const char *key, const char **out,
                       diag *d) {
    json_t *v = json_object_get(c, key);
    if (!json_is_string(v))
        return diag_set(d, path, 0, 0, "cases[%d]: \"%s\" %s; is this a tcbench results file?", i,
                        key, v ? "must be a string" : "is missing");
    *out = json_string_value(v);
    return 0;
}

// --- stability and kill switches (issue 14) --------------------------------
// Both are optional: files written before they existed read as stable, with
// no kill switch; a field of the wrong type reads as unknown.

static void stability_load(resfile_entry *e, json_t *c) {
    json_t *st = json_object_get(c, "stability");
    // noise and spread from the samples themselves, as the run computed
    // them (stats.h): split by process_samples where those add up to the
    // samples, else one process's
    e->noise = NAN;
    e->process_spread = NAN;
    e->processes = e->nsamples > 0 ? 1 : -1;
    json_t *cnt = json_object_get(st, "process_samples");
    size_t np = json_array_size(cnt);
    int *counts = np ? malloc(np * sizeof *counts) : NULL;
    for (size_t k = 0; counts && k < np; k++)
        counts[k] = json_is_integer(json_array_get(cnt, k))
                        ? (int)json_integer_value(json_array_get(cnt, k))
                        : 0;
    double noise, spread;
    if (counts && np <= INT32_MAX &&
        bench_stats_processes(e->samples, e->nsamples, counts, (int)np, &noise, &spread, NULL) ==
            0) {
        e->noise = noise;
        e->process_spread = spread;
        e->processes = (int64_t)np;
    } else if (e->nsamples > 0) {
        e->noise = bench_stats_noise(&e->stats);
    }
    free(counts);
    e->ci_rel_width = num(st, "ci_rel_width");
    e->load_start = num(st, "load_start");
    e->load_end = num(st, "load_end");
    e->nivcsw = count(st, "nivcsw");
    e->rounds = count(st, "rounds");
    e->unstable = json_is_true(json_object_get(st, "unstable"));
    json_t *r = json_object_get(st, "reasons");
    for (size_t k = 0; k < json_array_size(r) && e->nreasons < RESFILE_MAX_REASONS; k++)
        if (json_is_string(json_array_get(r, k)))
            e->reasons[e->nreasons++] = json_string_value(json_array_get(r, k));
    json_t *sb = json_object_get(c, "suite_batch");
    e->suite_batch = json_is_integer(sb) ? (int64_t)json_integer_value(sb) : -1;
    // an entry that never got to timing has no kernels or memory to count:
    // a 0 there means "not measured", and reads as unknown
    if (e->nsamples == 0 && !e->good) {
        e->kernels = e->kernels > 0 ? e->kernels : -1;
        e->peak_bytes = e->peak_bytes > 0 ? e->peak_bytes : -1;
        e->iterations_per_sample = e->iterations_per_sample > 0 ? e->iterations_per_sample : -1;
    }
}

static void disabled_load(resfile *f) {
    json_t *dis = json_object_get(json_object_get(f->root, "config"), "disabled");
    for (size_t k = 0; k < json_array_size(dis) && f->ndisabled < RESFILE_MAX_DISABLED; k++)
        if (json_is_string(json_array_get(dis, k)))
            f->disabled[f->ndisabled++] = json_string_value(json_array_get(dis, k));
    f->loadavg_start = num(json_object_get(f->root, "host"), "loadavg_start");
}

// ---------------------------------------------------------------------------

static int entry_load(resfile *f, json_t *c, int i, diag *d) {
    resfile_entry *e = &f->entries[i];
    e->file = f;
    e->index = i;
    if (!json_is_object(c))
        return diag_set(d, f->path, 0, 0, "cases[%d] must be an object", i);
    static const char *const keys[] = {"suite",    "name",   "mode",  "precision",
                                       "workload", "device", "status"};
    const char **dst[] = {&e->suite,    &e->name,   &e->mode,  &e->precision,
                          &e->workload, &e->device, &e->status};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        if (need_string(f->path, c, i, keys[k], dst[k], d) < 0)
            return -1;
    json_t *batch = json_object_get(c, "batch");
    if (!json_is_integer(batch))
        return diag_set(d, f->path, 0, 0, "cases[%d] (%s): \"batch\" %s", i, e->name,
                        batch ? "must be an integer" : "is missing");
    e->batch = (int64_t)json_integer_value(batch);
    e->model = str(c, "model", e->name);
    e->message = str(c, "message", "");
    e->compiled = strcmp(e->mode, "eager") != 0;
    e->good = !strcmp(e->status, "ok") || !strcmp(e->status, "pass");

    json_t *samples = json_object_get(c, "samples_s");
    if (!json_is_array(samples))
        return diag_set(d, f->path, 0, 0, "cases[%d] (%s): \"samples_s\" %s", i, e->name,
                        samples ? "must be an array of numbers" : "is missing");
    size_t ns = json_array_size(samples);
    if (ns && !(e->samples = malloc(ns * sizeof *e->samples)))
        return diag_set(d, f->path, 0, 0, "malloc: out of memory for %zu samples", ns);
    for (size_t k = 0; k < ns; k++) {
        json_t *v = json_array_get(samples, k);
        if (json_is_null(v))
            continue; // a sample that was not finite (schema: written as null)
        if (!json_is_number(v))
            return diag_set(d, f->path, 0, 0, "cases[%d] (%s): samples_s[%zu] must be a number", i,
                            e->name, k);
        e->samples[e->nsamples++] = json_number_value(v);
    }
    if (e->nsamples > 0 && bench_stats_compute(e->samples, e->nsamples, &e->stats) < 0)
        return diag_set(d, f->path, 0, 0, "bench_stats_compute: out of memory");

    e->iterations_per_sample = count(c, "iterations_per_sample");
    e->kernels = count(c, "kernels");
    e->peak_bytes = count(c, "peak_bytes");
    e->param_count = count(c, "param_count");
    e->flops = num(c, "flops");
    e->min_bytes = num(c, "min_bytes");
    e->rel_l2 = num(json_object_get(c, "accuracy"), "rel_l2");
    json_t *comp = json_object_get(c, "compile");
    e->compile_cold_s = num(comp, "cold_s");
    e->compile_warm_s = num(comp, "warm_s");
    json_t *sp = json_object_get(c, "speedup");
    e->speedup = num(sp, "median");
    e->ci95_lo = num(sp, "ci95_lo");
    e->ci95_hi = num(sp, "ci95_hi");
    e->compression_ratio = num(c, "compression_ratio");
    json_t *roof = json_object_get(c, "roofline");
    e->intensity = num(roof, "intensity");
    e->achieved_GFLOPs = num(roof, "achieved_GFLOPs");
    stability_load(e, c);
    return 0;
}

int resfile_load(const char *path, resfile **out, diag *d) {
    *out = NULL;
    resfile *f = calloc(1, sizeof *f);
    if (!f)
        return diag_set(d, path, 0, 0, "calloc: out of memory");
    snprintf(f->path, sizeof f->path, "%s", path);
    FILE *fp = fopen(path, "r");
    if (!fp) {
        diag_set(d, path, 0, 0, "fopen: %s", strerror(errno));
        free(f);
        return -1;
    }
    json_error_t je;
    f->root = json_loadf(fp, JSON_REJECT_DUPLICATES, &je);
    fclose(fp); // read-only: nothing to lose
    if (!f->root) {
        diag_set(d, path, je.line, je.column, "%s (not valid JSON; is the file complete?)",
                 je.text);
        free(f);
        return -1;
    }
    int rc = -1;
    json_t *r = f->root, *ver = json_object_get(r, "schema_version");
    json_t *cases = json_object_get(r, "cases");
    if (!json_is_object(r)) {
        diag_set(d, path, 0, 0, "the results must be a JSON object (docs/results-schema.md)");
    } else if (!json_is_integer(ver)) {
        diag_set(d, path, 0, 0,
                 "no integer \"schema_version\": not a tcbench results file "
                 "(docs/results-schema.md)");
    } else if (json_integer_value(ver) > RESFILE_SCHEMA_VERSION || json_integer_value(ver) < 1) {
        diag_set(d, path, 0, 0,
                 "schema_version %lld: this tcbench reads version %d; use the "
                 "tcbench that wrote it",
                 (long long)json_integer_value(ver), RESFILE_SCHEMA_VERSION);
    } else if (!json_is_array(cases)) {
        diag_set(d, path, 0, 0, "\"cases\" %s", cases ? "must be an array" : "is missing");
    } else if (json_array_size(cases) &&
               !(f->entries = calloc(json_array_size(cases), sizeof *f->entries))) {
        diag_set(d, path, 0, 0, "calloc: out of memory for %zu cases", json_array_size(cases));
    } else {
        rc = 0;
        for (size_t i = 0; i < json_array_size(cases) && rc == 0; i++, f->nentries++)
            rc = entry_load(f, json_array_get(cases, i), (int)i, d);
    }
    if (rc < 0) {
        resfile_free(f);
        return -1;
    }
    json_t *tool = json_object_get(r, "tool"), *host = json_object_get(r, "host");
    json_t *argv0 = json_array_get(json_object_get(r, "command_line"), 0);
    f->timestamp = str(r, "timestamp", "");
    f->tool_version = str(tool, "version", "unknown");
    f->git_commit = str(tool, "git_commit", "unknown");
    f->hostname = str(host, "hostname", "unknown");
    f->os = str(host, "os", "unknown");
    f->cpu_model = str(host, "cpu_model", "unknown");
    f->cores = count(host, "cores");
    f->threads_used = count(host, "threads_used");
    f->command = json_is_string(argv0) ? json_string_value(argv0) : "tcbench";
    json_t *cal = json_object_get(host, "calibration");
    f->calib_GBps = num(cal, "bandwidth_GBps");
    f->calib_GFLOPs = num(cal, "gemm_GFLOPs");
    f->gpus = json_is_array(json_object_get(host, "gpus")) ? json_object_get(host, "gpus") : NULL;
    disabled_load(f);
    *out = f;
    return 0;
}

void resfile_free(resfile *f) {
    if (!f)
        return;
    for (int i = 0; i < f->nentries; i++)
        free(f->entries[i].samples);
    free(f->entries);
    json_decref(f->root);
    free(f);
}

bool resfile_entry_same(const resfile_entry *a, const resfile_entry *b) {
    return a->batch == b->batch && !strcmp(a->suite, b->suite) && !strcmp(a->name, b->name) &&
           !strcmp(a->mode, b->mode) && !strcmp(a->precision, b->precision) &&
           !strcmp(a->workload, b->workload) && !strcmp(a->device, b->device);
}

void resfile_entry_label(const resfile_entry *e, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%s %s %s %s %s batch %lld", e->suite, e->name, e->mode, e->precision,
             e->workload, e->device, (long long)e->batch);
}

int resfile_rank(const char *axis, const char *value) {
    for (int a = 0; a < BENCH_AXIS_COUNT; a++)
        if (!strcmp(bench_axis_name(a), axis)) {
            int v = bench_axis_parse(a, value);
            return v >= 0 ? v : BENCH_AXIS_MAX;
        }
    return BENCH_AXIS_MAX;
}
