// Reading results JSON into plain data (resfile.h).
#include "resfile.h"

#include "results/axes.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// --- stability and kill switches (issue 14) --------------------------------
// Both are optional: files written before they existed read as stable, with
// no kill switch; a field of the wrong type reads as unknown.

static void stability_load(resfile_entry *e) {
    const bench_stability *st = &e->res.r.stab;
    // noise and spread from the samples themselves, as the run computed
    // them (stats.h): split by process_samples where those add up to the
    // samples, else one process's
    e->noise = NAN;
    e->process_spread = NAN;
    e->processes = e->nsamples > 0 ? 1 : -1;
    double noise, spread;
    if (st->processes > 0 && bench_stats_processes(e->samples, e->nsamples, st->process_samples,
                                                   st->processes, &noise, &spread, NULL) == 0) {
        e->noise = noise;
        e->process_spread = spread;
        e->processes = st->processes;
    } else if (e->nsamples > 0) {
        e->noise = bench_stats_noise(&e->stats);
    }
    bool has = e->res.has_stability;
    e->ci_rel_width = has ? st->ci_rel_width : NAN;
    e->load_start = has ? st->load_start : NAN;
    e->load_end = has ? st->load_end : NAN;
    e->nivcsw = has ? st->nivcsw : -1;
    e->rounds = has ? st->rounds : -1;
    e->unstable = st->unstable;
    for (int k = 0; k < st->nreasons; k++)
        e->reasons[e->nreasons++] = st->reasons[k];
    // an entry that never got to timing has no kernels or memory to count:
    // a 0 there means "not measured", and reads as unknown
    if (e->nsamples == 0 && !e->good) {
        e->kernels = e->kernels > 0 ? e->kernels : -1;
        e->peak_bytes = e->peak_bytes > 0 ? e->peak_bytes : -1;
        e->iterations_per_sample = e->iterations_per_sample > 0 ? e->iterations_per_sample : -1;
    }
}

// ---------------------------------------------------------------------------

static int entry_load(resfile *f, json_t *c, int i, diag *d) {
    resfile_entry *e = &f->entries[i];
    e->file = f;
    e->index = i;
    if (results_entry_read(c, f->path, i, &e->res, d) < 0)
        return -1;
    const results_case *id = &e->res.id;
    const bench_result *r = &e->res.r;
    e->suite = id->suite;
    e->name = id->name;
    e->model = id->model;
    e->mode = id->mode;
    e->precision = id->precision;
    e->workload = id->workload;
    e->device = id->device;
    e->status = e->res.status;
    e->message = e->res.message;
    e->batch = id->batch;
    e->suite_batch = id->suite_batch;
    e->compiled = strcmp(e->mode, "eager") != 0;
    e->good = !strcmp(e->status, "ok") || !strcmp(e->status, "pass");
    e->samples = r->samples;
    e->nsamples = r->nsamples;
    e->stats = r->stats;
    e->iterations_per_sample = r->iters_per_sample;
    e->kernels = r->kernels;
    e->peak_bytes = r->peak_bytes;
    e->param_count = id->param_count;
    e->flops = id->flops;
    e->min_bytes = id->min_bytes;
    e->rel_l2 = r->acc.rel_l2;
    e->compile_cold_s = r->compile.cold_s;
    e->compile_warm_s = r->compile.warm_s;
    e->speedup = r->speedup.median;
    e->ci95_lo = r->speedup.ci95_lo;
    e->ci95_hi = r->speedup.ci95_hi;
    e->compression_ratio = r->compression_ratio;
    e->intensity = e->res.intensity;
    e->achieved_GFLOPs = e->res.achieved_GFLOPs;
    stability_load(e);
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
    results_doc doc;
    size_t n = 0;
    int rc = results_doc_read(f->root, path, &doc, d);
    if (rc == 0)
        n = json_array_size(doc.cases);
    if (n && !(f->entries = calloc(n, sizeof *f->entries)))
        rc = diag_set(d, path, 0, 0, "calloc: out of memory for %zu cases", n);
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc = entry_load(f, json_array_get(doc.cases, i), (int)i, d);
        f->nentries += rc == 0;
    }
    if (rc < 0) {
        resfile_free(f);
        return -1;
    }
    f->timestamp = doc.timestamp;
    f->tool_version = doc.tool_version;
    f->git_commit = doc.git_commit;
    f->hostname = doc.hostname;
    f->os = doc.os;
    f->cpu_model = doc.cpu_model;
    f->cores = doc.cores;
    f->threads_used = doc.threads_used;
    f->command = doc.command;
    f->calib_GBps = doc.calib_GBps;
    f->calib_GFLOPs = doc.calib_GFLOPs;
    f->gpus = doc.gpus;
    f->loadavg_start = doc.loadavg_start;
    for (int k = 0; k < doc.ndisabled; k++)
        f->disabled[f->ndisabled++] = doc.disabled[k];
    *out = f;
    return 0;
}

void resfile_free(resfile *f) {
    if (!f)
        return;
    for (int i = 0; i < f->nentries; i++)
        results_entry_free(&f->entries[i].res);
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
