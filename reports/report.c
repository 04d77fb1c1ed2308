// tcbench report: merging results files, the dashboard's aggregates, and
// writing the report's files (report.h).
#include "report_internal.h"

#include "base/files.h"
#include "results/stats.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *rp_get(const resfile_entry *e, enum rp_field f) {
    switch (f) {
    case RP_SUITE: return e->suite;
    case RP_MODE: return e->mode;
    case RP_PRECISION: return e->precision;
    case RP_WORKLOAD: return e->workload;
    case RP_DEVICE: return e->device;
    default: return "";
    }
}

// the schema's axis behind each field (the suite has no order but its name)
static const char *const field_axis[RP_FIELD_COUNT] = {
    [RP_SUITE] = "suite",       [RP_MODE] = "mode",     [RP_PRECISION] = "precision",
    [RP_WORKLOAD] = "workload", [RP_DEVICE] = "device",
};

static int value_cmp(enum rp_field f, const char *a, const char *b) {
    int ra = resfile_rank(field_axis[f], a), rb = resfile_rank(field_axis[f], b);
    return ra != rb ? (ra > rb) - (ra < rb) : strcmp(a, b);
}

bool rp_match(const resfile_entry *e, const rp_sel *s) {
    if (s->study && !e->study)
        return false;
    for (int f = 0; f < RP_FIELD_COUNT; f++)
        if (s->v[f] && strcmp(s->v[f], rp_get(e, f)) != 0)
            return false;
    return true;
}

int rp_values(const rp_set *set, const rp_sel *s, enum rp_field f, const char **out, int cap) {
    int n = 0;
    for (int i = 0; i < set->n; i++) {
        if (!rp_match(set->e[i], s))
            continue;
        const char *v = rp_get(set->e[i], f);
        int k = 0;
        while (k < n && strcmp(out[k], v) != 0)
            k++;
        if (k < n || n == cap)
            continue;
        // insertion keeps the schema's order
        int at = n++;
        while (at > 0 && value_cmp(f, out[at - 1], v) > 0) {
            out[at] = out[at - 1];
            at--;
        }
        out[at] = v;
    }
    return n;
}

static bool same_case(const resfile_entry *a, const resfile_entry *b) {
    return !strcmp(a->suite, b->suite) && !strcmp(a->name, b->name) &&
           !strcmp(a->precision, b->precision) && !strcmp(a->workload, b->workload) &&
           !strcmp(a->device, b->device);
}

void rp_agg_compute(const rp_set *set, const rp_sel *s, rp_agg *a) {
    memset(a, 0, sizeof *a);
    bench_geomean g = {0};
    for (int i = 0; i < set->n; i++) {
        const resfile_entry *e = set->e[i];
        if (!e->compiled || !rp_match(e, s) || !set->at_batch[i])
            continue;
        a->total++;
        if (strcmp(e->status, "pass") != 0)
            continue;
        a->passed++;
        if (rp_in_geomean(set, i))
            bench_geomean_add(&g, e->speedup);
        else if (e->unstable)
            a->unstable++;
        if (isfinite(e->x->compile_cold_s)) {
            a->compile_s += e->x->compile_cold_s;
            a->ncompile++;
        }
        if (isfinite(e->compression_ratio) && e->compression_ratio > 0) {
            a->compression += e->compression_ratio;
            a->ncompression++;
        }
    }
    a->ngeo = g.n;
    a->geomean = bench_geomean_value(&g);
    a->compile_s = a->ncompile ? a->compile_s / a->ncompile : NAN;
    a->compression = a->ncompression ? a->compression / a->ncompression : NAN;
}

// Where e lies in the sorted set, or -1 when it is not one of its entries.
static int set_pos(const rp_set *set, const resfile_entry *e) {
    for (int k = 0; k < set->nfiles; k++)
        if (set->files[k] == e->file && e->index >= 0 && e->index < e->file->nentries)
            return set->pos[set->first[k] + e->index];
    return -1;
}

// The entries of e's case: [*lo, *hi) of the sorted set.
static void case_span(const rp_set *set, const resfile_entry *e, int *lo, int *hi) {
    int i = set_pos(set, e);
    *lo = i < 0 ? 0 : set->case_start[i];
    *hi = i < 0 ? set->n : set->case_end[i];
}

int64_t rp_case_batch(const rp_set *set, const resfile_entry *e) {
    int64_t want = -1, best = -1;
    int lo, hi;
    case_span(set, e, &lo, &hi);
    for (int i = lo; i < hi && want < 0; i++)
        if (same_case(set->e[i], e) && set->e[i]->suite_batch > 0)
            want = set->e[i]->suite_batch;
    for (int i = lo; i < hi; i++) {
        const resfile_entry *x = set->e[i];
        if (!same_case(x, e))
            continue;
        if (best < 0)
            best = x->batch;
        else if (want < 0)
            best = x->batch < best ? x->batch : best;
        else {
            // the nearest to the suite's batch; of two as near, the smaller
            int64_t dx = llabs(x->batch - want), db = llabs(best - want);
            if (dx < db || (dx == db && x->batch < best))
                best = x->batch;
        }
    }
    return best;
}

bool rp_in_geomean(const rp_set *set, int i) {
    const resfile_entry *e = set->e[i];
    return e->compiled && set->at_batch[i] && !strcmp(e->status, "pass") && !e->unstable &&
           isfinite(e->speedup) && e->speedup > 0;
}

const char *rp_left_out(const rp_set *set, int i, char *buf, size_t cap) {
    const resfile_entry *e = set->e[i];
    if (!e->compiled || rp_in_geomean(set, i))
        return NULL;
    if (strcmp(e->status, "pass") != 0)
        snprintf(buf, cap, "%s", e->status);
    else if (e->unstable) {
        int n = snprintf(buf, cap, "unstable");
        for (int k = 0; k < e->nreasons && n >= 0 && (size_t)n < cap; k++)
            n += snprintf(buf + n, cap - (size_t)n, "%s%s", k ? "; " : ": ", e->reasons[k]);
    } else if (!set->at_batch[i])
        snprintf(buf, cap, "batch %lld of a sweep: the case counts at batch %lld",
                 (long long)e->batch, (long long)rp_case_batch(set, e));
    else
        snprintf(buf, cap, "no speedup");
    return buf;
}

// the entry of the other precision, same model, mode, batch, workload, device
static int other_precision(const rp_set *set, int i, const char *prec) {
    resfile_entry key = *set->e[i];
    key.precision = prec;
    const resfile_entry *x = resfile_index_find(&set->ids, &key);
    return x ? set_pos(set, x) : -1;
}

void rp_headline_compute(const rp_set *set, const rp_sel *s, rp_headline *h) {
    memset(h, 0, sizeof *h);
    bench_geomean gf = {0}, ga = {0};
    rp_sel sel = *s;
    sel.v[RP_PRECISION] = NULL;
    sel.v[RP_MODE] = set->primary;
    for (int i = 0; i < set->n; i++) {
        const resfile_entry *e = set->e[i];
        if (!rp_match(e, &sel) || !rp_in_geomean(set, i))
            continue;
        bool fp32 = !strcmp(e->precision, "fp32");
        if (!fp32 && strcmp(e->precision, "amp") != 0)
            continue;
        *(fp32 ? &h->nfp32 : &h->namp) += 1;
        if (!fp32)
            continue;
        int k = other_precision(set, i, "amp");
        if (k < 0 || !rp_in_geomean(set, k))
            continue;
        h->nboth++;
        bench_geomean_add(&gf, e->speedup);
        bench_geomean_add(&ga, set->e[k]->speedup);
    }
    h->fp32 = bench_geomean_value(&gf);
    h->amp = bench_geomean_value(&ga);
    h->value = h->nboth ? report_headline(h->amp, h->fp32) : NAN;
}

double rp_breakeven(const rp_set *set, const resfile_entry *e) {
    if (!e->compiled)
        return NAN;
    const resfile_entry *eager = rp_eager_of(set, e);
    return report_breakeven(e->x->compile_cold_s,
                            eager && eager->stats.n ? eager->stats.median : NAN,
                            e->stats.n ? e->stats.median : NAN);
}

void rp_fmt_steps(char *buf, size_t cap, double steps) {
    if (isinf(steps))
        snprintf(buf, cap, "never");
    else
        rp_fmt(buf, cap, "%.0f", steps);
}

double report_breakeven(double cold_s, double eager_s, double mode_s) {
    if (!isfinite(cold_s) || !isfinite(eager_s) || !isfinite(mode_s) || cold_s < 0 ||
        !(eager_s > 0) || !(mode_s > 0))
        return NAN;
    if (mode_s >= eager_s)
        return INFINITY;
    return ceil(cold_s / (eager_s - mode_s));
}

const resfile_entry *rp_eager_of(const rp_set *set, const resfile_entry *e) {
    const resfile_entry *found = NULL;
    const char *base = resfile_entry_baseline(e);
    int lo, hi;
    case_span(set, e, &lo, &hi);
    for (int i = lo; base && i < hi; i++) {
        const resfile_entry *x = set->e[i];
        if (!strcmp(x->mode, base) && x->batch == e->batch && same_case(x, e)) {
            if (x->file == e->file)
                return x; // measured in the same run, interleaved: the real baseline
            found = found ? found : x;
        }
    }
    return found;
}

bool rp_swept(const rp_set *set, const resfile_entry *e) {
    int lo, hi;
    case_span(set, e, &lo, &hi);
    for (int i = lo; i < hi; i++) {
        const resfile_entry *x = set->e[i];
        if (x->batch != e->batch && !strcmp(x->mode, e->mode) && same_case(x, e))
            return true;
    }
    return false;
}

void rp_label(const rp_set *set, const resfile_entry *e, char *buf, size_t cap) {
    int n = set->several_suites ? snprintf(buf, cap, "%s/%s", e->suite, e->name)
                    : snprintf(buf, cap, "%s", e->name);
    if (n >= 0 && (size_t)n < cap && rp_swept(set, e))
        snprintf(buf + n, cap - (size_t)n, " b=%lld", (long long)e->batch);
}

void rp_fmt(char *buf, size_t cap, const char *fmt, double v) {
    if (isfinite(v))
        snprintf(buf, cap, fmt, v);
    else
        snprintf(buf, cap, "%s", "");
}

void report_pass_rate(int passed, int total, char *buf, size_t cap) {
    // Python's round(): halves to even, which rint does in the default mode
    double pct = total > 0 ? rint(100.0 * passed / total) : 0;
    snprintf(buf, cap, "%d%%, %d/%d", (int)pct, passed, total);
}

double report_headline(double amp, double fp32) { return 0.75 * amp + 0.25 * fp32; }

static int entry_cmp(const void *pa, const void *pb) {
    const resfile_entry *a = *(const resfile_entry *const *)pa,
                        *b = *(const resfile_entry *const *)pb;
    static const enum rp_field order[] = {RP_DEVICE, RP_PRECISION, RP_WORKLOAD, RP_SUITE};
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        int c = value_cmp(order[k], rp_get(a, order[k]), rp_get(b, order[k]));
        if (c)
            return c;
    }
    int c = strcmp(a->name, b->name);
    if (c)
        return c;
    if (a->batch != b->batch)
        return (a->batch > b->batch) - (a->batch < b->batch);
    c = value_cmp(RP_MODE, a->mode, b->mode);
    if (c)
        return c;
    // the same entry twice: keep file order, so the message names them in order
    return (a->file > b->file) - (a->file < b->file);
}

// The set's indexes (rp_set), once it is sorted and free of duplicates.
static int set_index(rp_set *set, char *err, size_t cap) {
    size_t n = (size_t)set->n + 1;
    set->at_batch = malloc(n * sizeof *set->at_batch);
    set->pos = malloc(n * sizeof *set->pos);
    set->first = malloc(((size_t)set->nfiles + 1) * sizeof *set->first);
    set->case_start = malloc(n * sizeof *set->case_start);
    set->case_end = malloc(n * sizeof *set->case_end);
    if (!set->at_batch || !set->pos || !set->first || !set->case_start || !set->case_end ||
        resfile_index_init(&set->ids, n) < 0) {
        snprintf(err, cap, "malloc: out of memory indexing %d entries", set->n);
        return -1;
    }
    for (int k = 0, at = 0; k < set->nfiles; k++) {
        set->first[k] = at;
        at += set->files[k]->nentries;
    }
    for (int i = 0; i < set->n; i++) {
        const resfile_entry *e = set->e[i];
        int k = 0;
        while (set->files[k] != e->file)
            k++;
        set->pos[set->first[k] + e->index] = i;
        resfile_index_put(&set->ids, e);
        set->foreign |= bench_mode_foreign(e->mode);
    }
    for (int i = 0; i < set->n;) {
        int j = i + 1;
        while (j < set->n && same_case(set->e[i], set->e[j]))
            j++;
        for (int k = i; k < j; k++) {
            set->case_start[k] = i;
            set->case_end[k] = j;
        }
        i = j;
    }
    for (int i = 1; i < set->n && !set->several_suites; i++)
        set->several_suites = strcmp(set->e[i]->suite, set->e[0]->suite) != 0;
    return 0;
}

static void set_free(rp_set *set) {
    free(set->at_batch);
    free(set->pos);
    free(set->first);
    free(set->case_start);
    free(set->case_end);
    resfile_index_free(&set->ids);
    free(set->e);
}

// What the report's documents are written from.
typedef struct rp_doc_src {
    const rp_set *set;
    const rp_charts *charts;
    const char *dir;
} rp_doc_src;

static int write_md(const void *ctx, FILE *f, char *err, size_t cap) {
    const rp_doc_src *s = ctx;
    rdoc d = {0};
    summary_build(s->set, s->charts, &d);
    int rc =
        d.oom ? (snprintf(err, cap, "summary: out of memory"), -1) : rdoc_write_md(&d, f, err, cap);
    rdoc_free(&d);
    return rc;
}

static int write_html(const void *ctx, FILE *f, char *err, size_t cap) {
    const rp_doc_src *s = ctx;
    rdoc d = {0};
    summary_build(s->set, s->charts, &d);
    char chart_dir[4200];
    snprintf(chart_dir, sizeof chart_dir, "%s/charts", s->dir);
    int rc = d.oom ? (snprintf(err, cap, "summary: out of memory"), -1)
                   : rdoc_write_html(&d, "tcbench report", chart_dir, f, err, cap);
    rdoc_free(&d);
    return rc;
}

static int write_csv(const void *ctx, FILE *f, char *err, size_t cap) {
    const rp_doc_src *s = ctx;
    return csv_write(s->set, f, err, cap);
}

int rp_sbuf_flush(sbuf *b, FILE *f, const char *name, char *err, size_t cap) {
    int rc = 0;
    if (b->oom) {
        snprintf(err, cap, "%s: out of memory", name);
        rc = -1;
    } else if (b->len && fwrite(b->s, 1, b->len, f) != b->len) {
        snprintf(err, cap, "fwrite %s: %s", name, strerror(errno));
        rc = -1;
    }
    free(b->s);
    b->s = NULL;
    return rc;
}

int rp_write_file(const char *dir, const char *name, rp_writer_fn fn, const void *ctx, char *err,
                  size_t cap) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, cap, "fopen %s: %s", path, strerror(errno));
        return -1;
    }
    int rc = fn(ctx, f, err, cap);
    if (fclose(f) != 0 && rc == 0) {
        snprintf(err, cap, "fclose %s: %s", path, strerror(errno));
        rc = -1;
    }
    return rc;
}

int report_write(resfile *const *files, int nfiles, const report_options *o, char *err,
                 size_t cap) {
    rp_set set = {.files = files, .nfiles = nfiles};
    int total = 0;
    for (int i = 0; i < nfiles; i++)
        total += files[i]->nentries;
    if (total && !(set.e = malloc((size_t)total * sizeof *set.e))) {
        snprintf(err, cap, "malloc: out of memory for %d entries", total);
        return -1;
    }
    for (int i = 0; i < nfiles; i++)
        for (int k = 0; k < files[i]->nentries; k++)
            set.e[set.n++] = &files[i]->entries[k];
    if (set.n)
        qsort(set.e, (size_t)set.n, sizeof *set.e, entry_cmp);
    int rc = 0;
    for (int i = 1; i < set.n && rc == 0; i++)
        if (resfile_entry_same(set.e[i - 1], set.e[i])) {
            char label[600];
            resfile_entry_label(set.e[i], label, sizeof label);
            snprintf(err, cap, "%s: %s is also in %s; report one measurement of each entry",
                     set.e[i]->file->path, label, set.e[i - 1]->file->path);
            rc = -1;
        }
    if (rc == 0)
        rc = set_index(&set, err, cap);
    for (int i = 0; i < set.n && rc == 0; i++)
        set.at_batch[i] = set.e[i]->batch == rp_case_batch(&set, set.e[i]);
    const char *modes[RP_MAX_VALUES];
    int nmodes = rp_values(&set, &(rp_sel){0}, RP_MODE, modes, RP_MAX_VALUES);
    for (int m = 0; m < nmodes && !set.primary; m++)
        if (resfile_mode_compiled(modes[m]))
            set.primary = modes[m]; // "compiled" sorts first of the compiled family

    char chart_dir[4200];
    snprintf(chart_dir, sizeof chart_dir, "%s/charts", o->outdir);
    rp_charts charts = {0};
    if (rc == 0)
        rc = base_mkdir_p(chart_dir, 0777, err, cap);
    if (rc == 0)
        rc = charts_write(&set, chart_dir, &charts, err, cap);
    if (rc == 0)
        rc = charts_draw(&charts, chart_dir, o->gnuplot ? o->gnuplot : "gnuplot", "tcbench report",
                         o->warn ? o->warn : stderr, err, cap);
    rp_doc_src src = {&set, &charts, o->outdir};
    if (rc == 0)
        rc = rp_write_file(o->outdir, "summary.md", write_md, &src, err, cap);
    if (rc == 0)
        rc = rp_write_file(o->outdir, "results.csv", write_csv, &src, err, cap);
    if (rc == 0)
        rc = rp_write_file(o->outdir, "index.html", write_html, &src, err, cap);
    free(charts.c);
    set_free(&set);
    return rc;
}
