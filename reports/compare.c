// The regression gate's statistics and verdicts (compare.h).
#include "compare.h"

#include "results/axes.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *const verdict_names[] = {
    [CMP_REGRESSION] = "regression",
    [CMP_IMPROVEMENT] = "improvement",
    [CMP_AMBIGUOUS] = "ambiguous",
    [CMP_NOISY] = "noisy",
    [CMP_SAME] = "same",
    [CMP_INSUFFICIENT] = "insufficient",
    [CMP_MISSING] = "missing",
    [CMP_NEW] = "new",
};
_Static_assert(sizeof verdict_names / sizeof verdict_names[0] == CMP_VERDICT_COUNT,
               "one name per verdict");

static const char *const format_names[] = {
    [CMP_TEXT] = "text", [CMP_MD] = "md", [CMP_JSON] = "json", [CMP_JUNIT] = "junit"};
_Static_assert(sizeof format_names / sizeof format_names[0] == CMP_FORMAT_COUNT,
               "one name per format");

const char *compare_verdict_name(enum compare_verdict v) { return verdict_names[v]; }

bool compare_result_failed(const compare_result *r) {
    return r->count[CMP_REGRESSION] > 0 || (r->opts.fail_on_noisy && r->count[CMP_NOISY] > 0);
}

int compare_format_parse(const char *s) {
    for (int i = 0; i < CMP_FORMAT_COUNT; i++)
        if (!strcmp(format_names[i], s))
            return i;
    return -1;
}

void compare_options_init(compare_options *o) {
    memset(o, 0, sizeof *o);
    o->threshold = 0.05;
    o->alpha = 0.01;
    o->noise_cap = COMPARE_NOISE_CAP;
    o->format = CMP_TEXT;
}

typedef struct ranked {
    double v;
    int group; // 0: a, 1: b
} ranked;

static int ranked_cmp(const void *x, const void *y) {
    double a = ((const ranked *)x)->v, b = ((const ranked *)y)->v;
    return (a > b) - (a < b);
}

double compare_mann_whitney(const double *a, int na, const double *b, int nb) {
    int n = na + nb;
    if (na < 1 || nb < 1)
        return NAN;
    ranked *x = malloc((size_t)n * sizeof *x);
    if (!x)
        return NAN;
    for (int i = 0; i < na; i++)
        x[i] = (ranked){a[i], 0};
    for (int i = 0; i < nb; i++)
        x[na + i] = (ranked){b[i], 1};
    qsort(x, (size_t)n, sizeof *x, ranked_cmp);
    // ranks 1..n, ties sharing their average; the tie term sums t^3 - t
    double r1 = 0, ties = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && x[j + 1].v == x[i].v)
            j++;
        double rank = (i + j + 2) / 2.0, t = j - i + 1;
        ties += t * t * t - t;
        for (int k = i; k <= j; k++)
            if (x[k].group == 0)
                r1 += rank;
        i = j + 1;
    }
    free(x);
    double u1 = r1 - na * (na + 1.0) / 2, mu = (double)na * nb / 2;
    double var = (double)na * nb / 12 * ((n + 1) - ties / ((double)n * (n - 1)));
    if (!(var > 0))
        return 1;
    double z = (fabs(u1 - mu) - 0.5) / sqrt(var);
    if (z < 0)
        z = 0;
    double p = erfc(z / sqrt(2)); // two-sided: 2 (1 - Phi(z))
    return p > 1 ? 1 : p;
}

typedef struct pidx {
    double p;
    int i;
} pidx;

static int pidx_cmp(const void *x, const void *y) {
    double a = ((const pidx *)x)->p, b = ((const pidx *)y)->p;
    return (a > b) - (a < b);
}

void compare_bh_adjust(const double *p, int n, double *q) {
    if (n <= 0)
        return;
    pidx *s = malloc((size_t)n * sizeof *s);
    if (!s) { // without memory, the stricter Bonferroni bound still holds
        for (int i = 0; i < n; i++)
            q[i] = fmin(1, p[i] * n);
        return;
    }
    for (int i = 0; i < n; i++)
        s[i] = (pidx){p[i], i};
    qsort(s, (size_t)n, sizeof *s, pidx_cmp);
    double run = 1;
    for (int k = n - 1; k >= 0; k--) {
        run = fmin(run, s[k].p * n / (k + 1));
        q[s[k].i] = run;
    }
    free(s);
}

static void gpus_text(const resfile *f, char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; f->gpus && i < json_array_size(f->gpus); i++) {
        json_t *g = json_array_get(f->gpus, i);
        const char *name = json_string_value(json_object_get(g, "name"));
        const char *drv = json_string_value(json_object_get(g, "driver"));
        int w = snprintf(buf + len, cap - len, "%s%s (driver %s)", i ? ", " : "", name ? name : "?",
                         drv ? drv : "?");
        if (w < 0 || (size_t)w >= cap - len)
            return;
        len += (size_t)w;
    }
}

void compare_machines(const resfile *a, const resfile *b, char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = '\0';
#define DIFFER(...)                                                                                \
    do {                                                                                           \
        int w_ = snprintf(buf + len, cap - len, "%s", len ? "; " : "");                            \
        if (w_ > 0 && (size_t)w_ < cap - len)                                                      \
            len += (size_t)w_;                                                                     \
        w_ = snprintf(buf + len, cap - len, __VA_ARGS__);                                          \
        if (w_ > 0 && (size_t)w_ < cap - len)                                                      \
            len += (size_t)w_;                                                                     \
    } while (0)
    if (strcmp(a->cpu_model, b->cpu_model) != 0)
        DIFFER("cpu_model '%s' vs '%s'", a->cpu_model, b->cpu_model);
    if (a->cores != b->cores)
        DIFFER("cores %lld vs %lld", (long long)a->cores, (long long)b->cores);
    char ga[512], gb[512];
    gpus_text(a, ga, sizeof ga);
    gpus_text(b, gb, sizeof gb);
    if (strcmp(ga, gb) != 0)
        DIFFER("gpus '%s' vs '%s'", ga, gb);
#undef DIFFER
}

void compare_settings(const resfile *a, const resfile *b, char *buf, size_t cap) {
    buf[0] = '\0';
    if (a->threads_used != b->threads_used)
        snprintf(buf, cap, "threads_used %lld vs %lld", (long long)a->threads_used,
                 (long long)b->threads_used);
}

// Indexes f's entries by identity into x; -1 with err when one is there
// twice, or memory runs out.
static int index_file(const resfile *f, resfile_index *x, char *err, size_t cap) {
    if (resfile_index_init(x, (size_t)f->nentries) < 0) {
        snprintf(err, cap, "calloc: out of memory indexing %d entries of %s", f->nentries,
                 f->path);
        return -1;
    }
    for (int k = 0; k < f->nentries; k++) {
        const resfile_entry *before = resfile_index_put(x, &f->entries[k]);
        if (before) {
            char label[600];
            resfile_entry_label(before, label, sizeof label);
            snprintf(err, cap, "%s: cases[%d] and cases[%d] are both %s; one run per file",
                     f->path, before->index, k, label);
            resfile_index_free(x);
            return -1;
        }
    }
    return 0;
}

// Appends "; " and the formatted text to a row's reason (why, of
// COMPARE_REASON_MAX), cut at its size.
static void reason_add(char *why, const char *fmt, ...) {
    size_t len = strlen(why);
    if (len + 3 >= COMPARE_REASON_MAX)
        return;
    if (len) {
        strcpy(why + len, "; ");
        len += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why + len, COMPARE_REASON_MAX - len, fmt, ap);
    va_end(ap);
}

static void reason_add_unstable(char *why, const char *side, const resfile_entry *e) {
    if (!e->unstable)
        return;
    reason_add(why, "%s marked unstable", side);
    for (int i = 0; i < e->nreasons; i++)
        reason_add(why, "%s", e->reasons[i]);
}

// Too noisy to call: a side's noise above the cap, or an entry its run
// marked unstable. The reason says which, with the file's own reasons.
static bool noisy(compare_row *r, const compare_options *o, char *why) {
    bool nb = r->noise_base > o->noise_cap, nc = r->noise_cur > o->noise_cap;
    if (!nb && !nc && !r->base->unstable && !r->cur->unstable)
        return false;
    r->verdict = CMP_NOISY;
    why[0] = '\0';
    double cap = o->noise_cap * 100;
    if (nb && nc)
        reason_add(why, "noise baseline %.1f%%, current %.1f%% > cap %.1f%%", r->noise_base * 100,
                   r->noise_cur * 100, cap);
    else if (nb || nc)
        reason_add(why, "%s noise %.1f%% > cap %.1f%%", nb ? "baseline" : "current",
                   (nb ? r->noise_base : r->noise_cur) * 100, cap);
    reason_add_unstable(why, "baseline", r->base);
    reason_add_unstable(why, "current", r->cur);
    return true;
}

// A side's noise: its samples' dispersion within a process (resfile.h),
// and, when several processes were pooled, what their disagreement leaves
// in the pooled figure: the spread of their medians over sqrt(processes),
// the standard error of a mean of that many draws.
static double side_noise(const resfile_entry *e) {
    double n = e->noise;
    if (e->processes < 2 || !isfinite(e->x->process_spread))
        return n;
    return sqrt(n * n + e->x->process_spread * e->x->process_spread / (double)e->processes);
}

// Everything up to the U test; the verdict of a tested pair waits for BH.
static int pair(compare_row *r, const compare_options *o, char *why, char *err, size_t cap) {
    const resfile_entry *b = r->base, *c = r->cur;
    if (b->good && !c->good) {
        r->verdict = CMP_REGRESSION;
        snprintf(why, COMPARE_REASON_MAX, "status %s -> %s%s%.180s", b->status, c->status,
                 *c->message ? ": " : "", c->message);
        return 0;
    }
    if (!b->good) {
        r->verdict = c->good ? CMP_IMPROVEMENT : CMP_SAME;
        snprintf(why, COMPARE_REASON_MAX,
                 c->good ? "status %s -> %s" : "still failing: %s -> %s", b->status, c->status);
        return 0;
    }
    r->base_ms = b->stats.n ? b->stats.median * 1e3 : NAN;
    r->cur_ms = c->stats.n ? c->stats.median * 1e3 : NAN;
    if (b->nsamples < COMPARE_MIN_SAMPLES || c->nsamples < COMPARE_MIN_SAMPLES) {
        r->verdict = CMP_INSUFFICIENT;
        snprintf(why, COMPARE_REASON_MAX,
                 "%d and %d samples; the test needs %d a side (tcbench run --repeat %d)",
                 b->nsamples, c->nsamples, COMPARE_MIN_SAMPLES, COMPARE_MIN_SAMPLES);
        return 0;
    }
    if (!(r->base_ms > 0) || !(r->cur_ms > 0)) {
        r->verdict = CMP_INSUFFICIENT;
        snprintf(why, COMPARE_REASON_MAX, "a median time is not positive");
        return 0;
    }
    bench_speedup boot;
    if (bench_speedup_bootstrap(c->samples, c->nsamples, b->samples, b->nsamples, &boot) < 0) {
        snprintf(err, cap, "bench_speedup_bootstrap: out of memory");
        return -1;
    }
    r->ratio = boot.median;
    r->ci_lo = boot.ci95_lo;
    r->ci_hi = boot.ci95_hi;
    r->noise_base = side_noise(b);
    r->noise_cur = side_noise(c);
    r->noise = sqrt(r->noise_base * r->noise_base + r->noise_cur * r->noise_cur);
    r->threshold = fmax(o->threshold, 3 * r->noise);
    r->p = compare_mann_whitney(b->samples, b->nsamples, c->samples, c->nsamples);
    if (isnan(r->p)) {
        snprintf(err, cap, "compare_mann_whitney: out of memory");
        return -1;
    }
    // A noisy pair's p-value is shown, but it is no test: it stays out of
    // Benjamini-Hochberg, whose adjustment counts only the entries called.
    r->tested = !noisy(r, o, why);
    return 0;
}

static void decide(compare_row *r, const compare_options *o, char *why) {
    double change = r->ratio - 1, t = r->threshold;
    bool significant = r->q < o->alpha;
    if (fabs(change) <= t) {
        r->verdict = CMP_SAME;
        snprintf(why, COMPARE_REASON_MAX, "%+.1f%%, within %.1f%%", change * 100, t * 100);
        return;
    }
    bool slower = change > 0;
    bool interval = slower ? r->ci_lo > 1 + t : r->ci_hi < 1 - t;
    if (significant && interval) {
        r->verdict = slower ? CMP_REGRESSION : CMP_IMPROVEMENT;
        snprintf(why, COMPARE_REASON_MAX,
                 "%s by %.1f%% (limit %.1f%%), 95%% CI of the ratio [%.3f, %.3f], q %.2g",
                 slower ? "slower" : "faster", fabs(change) * 100, t * 100, r->ci_lo, r->ci_hi,
                 r->q);
        return;
    }
    r->verdict = CMP_AMBIGUOUS;
    snprintf(why, COMPARE_REASON_MAX, "%+.1f%% but %s%s%s; rerun with a larger --repeat",
             change * 100, significant ? "" : "the U test is not significant",
             !significant && !interval ? " and " : "",
             interval ? "" : "the 95% interval reaches the limit");
}

// The row's reason, from why into the result's pool (reasons repeat: one
// copy of each).
static int keep_reason(compare_result *r, compare_row *row, const char *why, char *err,
                       size_t cap) {
    if ((row->reason = resfile_store_intern(r->pool, why)))
        return 0;
    snprintf(err, cap, "malloc: out of memory for the verdicts' reasons");
    return -1;
}

static void row_clear(compare_row *r) {
    r->ratio = r->ci_lo = r->ci_hi = r->p = r->q = NAN;
    r->noise = r->noise_base = r->noise_cur = NAN;
    r->base_ms = r->cur_ms = r->threshold = NAN;
}

int compare_files(const resfile *base, const resfile *cur, const compare_options *o,
                  compare_result *r, char *err, size_t cap) {
    memset(r, 0, sizeof *r);
    r->base = base;
    r->cur = cur;
    r->opts = *o;
    resfile_index bx, cx;
    if (index_file(base, &bx, err, cap) < 0)
        return -1;
    resfile_index_free(&bx); // base's only to refuse a duplicate
    if (index_file(cur, &cx, err, cap) < 0)
        return -1;
    char why[COMPARE_REASON_MAX];
    size_t most = (size_t)base->nentries + (size_t)cur->nentries;
    bool *matched = calloc((size_t)cur->nentries + 1, sizeof *matched);
    r->rows = calloc(most + 1, sizeof *r->rows);
    double *p = malloc((most + 1) * sizeof *p), *q = malloc((most + 1) * sizeof *q);
    int *tested = malloc((most + 1) * sizeof *tested);
    int rc = 0;
    r->pool = resfile_store_new();
    if (!matched || !r->rows || !p || !q || !tested || !r->pool) {
        snprintf(err, cap, "calloc: out of memory for %zu entries", most);
        rc = -1;
    }
    int nt = 0;
    for (int i = 0; i < base->nentries && rc == 0; i++) {
        compare_row *row = &r->rows[r->nrows++];
        row->base = &base->entries[i];
        row_clear(row);
        // no file holds an entry twice, so a match is never taken twice
        row->cur = resfile_index_find(&cx, row->base);
        if (!row->cur) {
            row->verdict = CMP_MISSING;
            snprintf(why, sizeof why, "not in %.200s", cur->path);
            rc = keep_reason(r, row, why, err, cap);
            continue;
        }
        matched[row->cur - cur->entries] = true;
        why[0] = '\0';
        rc = pair(row, o, why, err, cap);
        if (rc == 0 && !row->tested)
            rc = keep_reason(r, row, why, err, cap);
        if (rc == 0 && row->tested) {
            p[nt] = row->p;
            tested[nt++] = r->nrows - 1;
        }
    }
    resfile_index_free(&cx);
    for (int k = 0; k < cur->nentries && rc == 0; k++) {
        if (matched[k])
            continue;
        compare_row *row = &r->rows[r->nrows++];
        row->cur = &cur->entries[k];
        row_clear(row);
        row->verdict = CMP_NEW;
        snprintf(why, sizeof why, "not in %.200s", base->path);
        rc = keep_reason(r, row, why, err, cap);
    }
    if (rc == 0) {
        compare_bh_adjust(p, nt, q);
        for (int k = 0; k < nt && rc == 0; k++) {
            r->rows[tested[k]].q = q[k];
            decide(&r->rows[tested[k]], o, why);
            rc = keep_reason(r, &r->rows[tested[k]], why, err, cap);
        }
        for (int i = 0; i < r->nrows; i++)
            r->count[r->rows[i].verdict]++;
    }
    free(matched);
    free(p);
    free(q);
    free(tested);
    if (rc < 0)
        compare_result_free(r);
    return rc;
}

void compare_result_free(compare_result *r) {
    resfile_store_free(r->pool);
    r->pool = NULL;
    free(r->rows);
    r->rows = NULL;
    r->nrows = 0;
}

int compare_main(const char *base_path, const char *cur_path, const compare_options *o, FILE *out,
                 FILE *err) {
    resfile *base = NULL, *cur = NULL;
    diag d;
    if (resfile_load(base_path, &base, &d) < 0 || resfile_load(cur_path, &cur, &d) < 0) {
        diag_print(&d, err);
        resfile_free(base);
        return 2;
    }
    int rc = compare_loaded(base, cur, o, out, err);
    resfile_free(base);
    resfile_free(cur);
    return rc;
}

int compare_loaded(const resfile *base, const resfile *cur, const compare_options *o, FILE *out,
                   FILE *err) {
    const char *base_path = base->path, *cur_path = cur->path;
    int rc = 2;
    char machines[512], msg[1024];
    const resfile *bad = base->ninvalid ? base : cur->ninvalid ? cur : NULL;
    for (int i = 0; bad && i < bad->nentries; i++) {
        const resfile_entry *e = &bad->entries[i];
        if (strcmp(e->status, bench_status_name(BENCH_INVALID)) != 0)
            continue;
        resfile_entry_label(e, msg, sizeof msg);
        fprintf(err,
                "tcbench compare: %s: cases[%d] (%s) is invalid: %s; %d invalid entr%s, no "
                "verdict on such a file\n",
                bad->path, e->index, msg, e->message, bad->ninvalid,
                bad->ninvalid == 1 ? "y" : "ies");
        return 2;
    }
    compare_machines(base, cur, machines, sizeof machines);
    char settings[256];
    compare_settings(base, cur, settings, sizeof settings);
    compare_result r;
    if (machines[0] && !o->force) {
        fprintf(err,
                "tcbench compare: %s and %s come from different machines (%s); compare runs "
                "of one machine, or pass --force\n",
                base_path, cur_path, machines);
    } else if (compare_files(base, cur, o, &r, msg, sizeof msg) < 0) {
        fprintf(err, "tcbench compare: %s\n", msg);
    } else {
        if (machines[0]) {
            fprintf(err,
                    "tcbench compare: warning: different machines, compared under --force (%s)\n",
                    machines);
            snprintf(r.machines, sizeof r.machines, "%s", machines);
        }
        if (settings[0]) {
            fprintf(err,
                    "tcbench compare: warning: run with other settings (%s); their times are "
                    "compared as they are, so a change may be the settings'\n",
                    settings);
            snprintf(r.settings, sizeof r.settings, "%s", settings);
        }
        if (compare_write(&r, out) < 0)
            fprintf(err, "tcbench compare: writing the verdicts: %s\n", strerror(errno));
        else
            rc = compare_result_failed(&r) ? 1 : 0;
        compare_result_free(&r);
    }
    return rc;
}
