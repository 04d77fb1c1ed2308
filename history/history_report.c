// tcbench history report: per entry and machine, its medians over the
// runs as a chart, with the steps history_steps finds, and DIR/history.md
// listing them (history.h).
#include "history_internal.h"

#include "base/files.h"
#include "reports/chart.h"
#include "reports/escape.h"
#include "reports/rdoc.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STEPS 16

// One entry's medians on one machine, oldest run first.
typedef struct series {
    char key[700], fp[32], desc[512];
    char (*commit)[16];
    double *ms; // medians, milliseconds
    int n, cap;
} series;

static int series_push(series *s, const char *commit, double ms) {
    if (s->n == s->cap) {
        int ncap = s->cap ? 2 * s->cap : 32;
        char(*c)[16] = realloc(s->commit, (size_t)ncap * sizeof *c);
        if (c)
            s->commit = c;
        double *m = realloc(s->ms, (size_t)ncap * sizeof *m);
        if (m)
            s->ms = m;
        if (!c || !m)
            return -1;
        s->cap = ncap;
    }
    snprintf(s->commit[s->n], sizeof s->commit[0], "%s", commit);
    s->ms[s->n++] = ms;
    return 0;
}

// The chart of s: medians, each segment's mean, a dashed line at each step.
static int series_chart(const series *s, const history_step *st, int nst, const char *dir,
                        rp_charts *list, char *stem, size_t scap, char *err, size_t cap) {
    char name[160];
    esc_filename(name, sizeof name, s->key);
    snprintf(stem, scap, "history-%.100s-%.8s", name, s->fp);
    chart c;
    char caption[800];
    snprintf(caption, sizeof caption, "%.400s on %.300s: median over the runs", s->key, s->desc);
    chart_init(&c, stem, caption, 900, 420);
    chart_gp(&c, "set title %s\n", s->key);
    sbuf_puts(&c.body, "set ylabel 'median (ms)'\nset grid ytics\nset key top left\n"
                       "set xtics rotate by 45 right font ',8' (");
    for (int i = 0; i < s->n; i++) {
        esc_gnuplot(&c.body, s->commit[i]);
        sbuf_printf(&c.body, " %d%s", i, i + 1 < s->n ? ", " : ")\n");
    }
    sbuf_printf(&c.body, "set xrange [-0.5:%d.5]\n", s->n - 1);
    for (int k = 0; k < nst; k++) {
        sbuf_printf(&c.body,
                    "set arrow %d from first %.1f, graph 0 to first %.1f, graph 1 nohead dt 2 "
                    "lc rgb '#cc3311'\nset label %d sprintf('%%+.1f%%%%', %.3f) at first %.1f, "
                    "graph 0.95 left offset 0.5,0 tc rgb '#cc3311'\n",
                    k + 1, st[k].at - 0.5, st[k].at - 0.5, k + 1, st[k].change * 100,
                    st[k].at - 0.5);
    }
    sbuf_printf(&c.body,
                "plot '%s.dat' using 1:2 with linespoints pt 7 ps 0.6 lc rgb '#4477aa' "
                "title 'median', '' using 1:3 with histeps lw 2 lc rgb '#228833' title "
                "'segment mean'\n",
                stem);
    // each segment between steps at its own mean
    for (int k = 0, a = 0; k <= nst; k++) {
        int b = k < nst ? st[k].at : s->n;
        double mean = 0;
        for (int i = a; i < b; i++)
            mean += s->ms[i] / (b - a);
        for (int i = a; i < b; i++)
            sbuf_printf(&c.dat, "%d %.6g %.6g\n", i, s->ms[i], mean);
        a = b;
    }
    return chart_end(&c, dir, list, err, cap);
}

// Chart and steps of one series, into the document's step table (rows)
// and its chart list (charts).
static int series_done(const series *s, const char *dir, rp_charts *list, rdoc *rows, rdoc *charts,
                       int *nsteps, char *err, size_t cap) {
    history_step st[MAX_STEPS];
    int nst = history_steps(s->ms, s->n, st, MAX_STEPS);
    if (nst < 0) {
        snprintf(err, cap, "history_steps: out of memory on a series of %d runs", s->n);
        return -1;
    }
    char stem[200];
    if (series_chart(s, st, nst, dir, list, stem, sizeof stem, err, cap) < 0)
        return -1;
    for (int k = 0; k < nst; k++) {
        rdoc_cell(rows, "%s", s->key);
        rdoc_cell(rows, "%.8s", s->fp);
        rdoc_cell(rows, "%s", s->commit[st[k].at - 1]);
        rdoc_cell(rows, "%s", s->commit[st[k].at]);
        rdoc_cell(rows, "%+.1f%%", st[k].change * 100);
        rdoc_cell(rows, "%.4f", st[k].before);
        rdoc_cell(rows, "%.4f", st[k].after);
    }
    *nsteps += nst;
    char caption[800];
    snprintf(caption, sizeof caption, "%.400s on %.300s (%.8s): %d runs, %d step%s", s->key,
             s->desc, s->fp, s->n, nst, nst == 1 ? "" : "s");
    rdoc_chart(charts, list->c[list->n - 1].stem, caption, false);
    return 0;
}

// Every good entry's median, by entry and machine, oldest run first.
static const char series_sql[] =
    "SELECT e.key, r.host_fp, r.host_desc, r.commit_sha, e.median_s FROM entry e JOIN run r ON "
    "r.id = e.run_id WHERE e.median_s IS NOT NULL AND e.status IN ('ok', 'pass') "
    "ORDER BY e.key, r.host_fp, r.timestamp, r.id";

// Walks the series: a chart each, the steps into rows.
static int walk(history_db *h, const char *dir, rp_charts *list, rdoc *rows, rdoc *charts,
                int *nseries, int *nsteps, char *err, size_t cap) {
    sqlite3_stmt *st;
    if (hdb_prepare(h, series_sql, NULL, 0, &st, err, cap) < 0)
        return -1;
    series s = {0};
    int rc;
    do {
        rc = hdb_step(h, st, err, cap);
        bool same = rc == 1 && !strcmp(hdb_text(st, 0), s.key) && !strcmp(hdb_text(st, 1), s.fp);
        if (s.n > 0 && !same) {
            (*nseries)++;
            if (series_done(&s, dir, list, rows, charts, nsteps, err, cap) < 0)
                rc = -1;
            s.n = 0;
        }
        if (rc != 1)
            break;
        if (!same) {
            snprintf(s.key, sizeof s.key, "%s", hdb_text(st, 0));
            snprintf(s.fp, sizeof s.fp, "%s", hdb_text(st, 1));
            snprintf(s.desc, sizeof s.desc, "%s", hdb_text(st, 2));
        }
        if (series_push(&s, hdb_text(st, 3), sqlite3_column_double(st, 4) * 1e3) < 0) {
            snprintf(err, cap, "realloc: out of memory for a series of %d runs", s.n);
            rc = -1;
        }
    } while (rc == 1);
    free(s.commit);
    free(s.ms);
    return hdb_finalize(h, st, rc, err, cap);
}

// dir/history.md: the documents one after the other.
static int write_md(rdoc *const *docs, int n, const char *dir, char *err, size_t cap) {
    char path[4200];
    snprintf(path, sizeof path, "%s/history.md", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, cap, "fopen %s: %s", path, strerror(errno));
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        rc = rdoc_write_md(docs[i], f, err, cap);
    if (fclose(f) != 0 && rc == 0) {
        snprintf(err, cap, "fclose %s: %s", path, strerror(errno));
        rc = -1;
    }
    return rc;
}

int history_report(history_db *h, const char *dir, const char *gnuplot, FILE *warn, char *err,
                   size_t cap) {
    char chart_dir[4200];
    snprintf(chart_dir, sizeof chart_dir, "%s/charts", dir);
    if (base_mkdir_p(chart_dir, 0777, err, cap) < 0)
        return -1;
    rp_charts list = {0};
    rdoc head = {0}, rows = {0}, charts = {0};
    int nseries = 0, nsteps = 0;
    rdoc_table(&rows, 7, "entry", "machine", "last run before", "first run after", "change",
               "before (ms)", "after (ms)");
    rdoc_heading(&charts, 2, "Charts");
    int rc = walk(h, chart_dir, &list, &rows, &charts, &nseries, &nsteps, err, cap);
    if (rc == 0)
        rc = charts_draw(&list, chart_dir, gnuplot, "tcbench history report", warn, err, cap);
    // the charts' blocks follow the heading, one per chart, in list order
    for (int i = 0; rc == 0 && i < list.n && i + 1 < charts.n; i++)
        charts.b[i + 1].drawn = list.c[i].drawn;
    rdoc_heading(&head, 1, "Performance history");
    rdoc_para(&head,
              "%d series (an entry on one machine) from %s. A step is a change of at least "
              "%.0f%% between the mean medians of the runs before and after it, at least %.0f "
              "standard errors of their difference, with at least %d runs on each side "
              "(binary segmentation on the squared error, as asv finds steps).",
              nseries, h->path, HISTORY_STEP_MIN * 100, HISTORY_STEP_Z, HISTORY_STEP_MINSEG);
    rdoc_heading(&head, 2, "Steps");
    if (nsteps == 0)
        rdoc_para(&head, "No steps found.");
    rdoc *docs[] = {&head, &rows, &charts};
    if (rc == 0 && (head.oom || rows.oom || charts.oom)) {
        snprintf(err, cap, "%s/history.md: out of memory", dir);
        rc = -1;
    }
    if (rc == 0)
        rc = write_md(nsteps ? docs : (rdoc *[]){&head, &charts}, 2 + (nsteps > 0), dir, err, cap);
    rdoc_free(&head);
    rdoc_free(&rows);
    rdoc_free(&charts);
    free(list.c);
    return rc;
}
