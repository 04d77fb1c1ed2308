// The report of a plan file (planfile.h: plan_report_write): the longest
// context against the budget, one line per case and mode, drawn as the
// other charts are (charts.c, gnuplot.c), and the same numbers as tables.
#include "planfile.h"

#include "base/files.h"
#include "charts_internal.h"
#include "escape.h"
#include "rdoc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GIB (1024.0 * 1024.0 * 1024.0)

// The rows in line order: each case and mode's rows (a line), by budget;
// lines in the order of their first row in the file.
typedef struct plan_view {
    const planfile *p;
    int *order;      // row indexes, line by line
    int *line_start; // nlines + 1 offsets into order
    int nlines;
    int64_t *budgets; // the distinct budgets, ascending
    int nbudgets;
    bool several_suites;
} plan_view;

static const planfile_row *view_row(const plan_view *v, int line, int k) {
    return &v->p->rows[v->order[v->line_start[line] + k]];
}

static int view_len(const plan_view *v, int line) {
    return v->line_start[line + 1] - v->line_start[line];
}

static bool same_line(const planfile_row *a, const planfile_row *b) {
    return !strcmp(a->suite, b->suite) && !strcmp(a->name, b->name) && !strcmp(a->mode, b->mode);
}

static const planfile *sort_file; // qsort has no context argument
static int *sort_line;

static int order_cmp(const void *pa, const void *pb) {
    int a = *(const int *)pa, b = *(const int *)pb;
    if (sort_line[a] != sort_line[b])
        return sort_line[a] - sort_line[b];
    int64_t x = sort_file->rows[a].budget_bytes, y = sort_file->rows[b].budget_bytes;
    return (x > y) - (x < y);
}

static int i64_cmp(const void *pa, const void *pb) {
    int64_t x = *(const int64_t *)pa, y = *(const int64_t *)pb;
    return (x > y) - (x < y);
}

static int view_init(plan_view *v, const planfile *p, char *err, size_t cap) {
    memset(v, 0, sizeof *v);
    v->p = p;
    size_t n = (size_t)p->nrows;
    int *line = malloc(n * sizeof *line);
    v->order = malloc(n * sizeof *v->order);
    v->line_start = malloc((n + 1) * sizeof *v->line_start);
    v->budgets = malloc(n * sizeof *v->budgets);
    if (!line || !v->order || !v->line_start || !v->budgets) {
        free(line);
        snprintf(err, cap, "malloc: out of memory for %d plan rows", p->nrows);
        return -1;
    }
    for (int i = 0; i < p->nrows; i++) {
        // a line's number: its first row's
        line[i] = i;
        for (int k = 0; k < i && line[i] == i; k++)
            if (same_line(&p->rows[k], &p->rows[i]))
                line[i] = line[k];
        v->order[i] = i;
        v->budgets[i] = p->rows[i].budget_bytes;
        v->several_suites |= strcmp(p->rows[i].suite, p->rows[0].suite) != 0;
    }
    sort_file = p;
    sort_line = line;
    qsort(v->order, n, sizeof *v->order, order_cmp);
    for (int i = 0; i < p->nrows; i++)
        if (i == 0 || line[v->order[i]] != line[v->order[i - 1]])
            v->line_start[v->nlines++] = i;
    v->line_start[v->nlines] = p->nrows;
    free(line);
    qsort(v->budgets, n, sizeof *v->budgets, i64_cmp);
    for (size_t i = 0; i < n; i++)
        if (i == 0 || v->budgets[i] != v->budgets[v->nbudgets - 1])
            v->budgets[v->nbudgets++] = v->budgets[i];
    return 0;
}

static void view_free(plan_view *v) {
    free(v->order);
    free(v->line_start);
    free(v->budgets);
}

// "chatglm2 compiled", or "generate/chatglm2 compiled" when suites differ.
static void line_label(const plan_view *v, int line, char *buf, size_t cap) {
    const planfile_row *r = view_row(v, line, 0);
    if (v->several_suites)
        snprintf(buf, cap, "%s/%s %s", r->suite, r->name, r->mode);
    else
        snprintf(buf, cap, "%s %s", r->name, r->mode);
}

static bool same_case(const planfile_row *a, const planfile_row *b) {
    return !strcmp(a->suite, b->suite) && !strcmp(a->name, b->name);
}

// The case of a line, counted in the order cases first appear: its colour,
// which its modes share.
static int case_index(const plan_view *v, int line) {
    const planfile_row *r = view_row(v, line, 0);
    int n = 0;
    for (int q = 0; q < v->nlines; q++) {
        const planfile_row *x = view_row(v, q, 0);
        if (same_case(x, r))
            return n;
        bool first = true;
        for (int m = 0; m < q && first; m++)
            first = !same_case(view_row(v, m, 0), x);
        n += first;
    }
    return n;
}

// A point of the chart: a context that fits.
static bool plotted(const planfile_row *r) {
    return !r->weights_exceed_budget && r->max_tokens > 0;
}

// "int4 weights (groups of 32, f32 scales), fp32, eager attention math"
static void plan_settings(const planfile *p, char *buf, size_t cap) {
    if (!strcmp(p->weights, "f32"))
        snprintf(buf, cap, "f32 weights, %s, eager attention %s", p->precision, p->attention);
    else
        snprintf(buf, cap, "%s weights (groups of %lld, %s scales), %s, eager attention %s",
                 p->weights, (long long)p->weight_group, p->weight_scales, p->precision,
                 p->attention);
}

static int tokens_chart(const plan_view *v, const char *dir, rp_charts *out, char *err,
                        size_t cap) {
    static const char *const colors[] = {"#4477aa", "#ee6677", "#228833", "#ccbb44",
                                         "#66ccee", "#aa3377", "#444444"};
    const char *stem = "plan-tokens";
    char title[600];
    snprintf(title, sizeof title, "Longest context within a memory budget: %.100s weights, %.100s",
             v->p->weights, v->p->precision);
    chart c;
    chart_init(&c, stem, title, 860, 600);
    sbuf_puts(&c.dat, "# budget_GiB max_tokens capped_tokens ('?': no context fits); one block "
                      "per case and mode (names in the .gp)\n");
    sbuf plot = {0};
    double lo = INFINITY, hi = 0, xmax = 0;
    int blocks = 0;
    bool capped = false;
    for (int l = 0; l < v->nlines; l++) {
        bool any = false;
        for (int k = 0; k < view_len(v, l); k++)
            any |= plotted(view_row(v, l, k));
        const planfile_row *r0 = view_row(v, l, 0);
        if (!any)
            continue; // no context fits at any budget: the tables say so
        if (blocks)
            sbuf_puts(&c.dat, "\n\n");
        for (int k = 0; k < view_len(v, l); k++) {
            const planfile_row *r = view_row(v, l, k);
            double gib = (double)r->budget_bytes / GIB;
            xmax = fmax(xmax, gib);
            if (!plotted(r)) {
                sbuf_printf(&c.dat, "%.6g ? ?\n", gib);
                continue;
            }
            lo = fmin(lo, (double)r->max_tokens);
            hi = fmax(hi, (double)r->max_tokens);
            capped |= r->capped;
            sbuf_printf(&c.dat, "%.6g %lld ", gib, (long long)r->max_tokens);
            if (r->capped)
                sbuf_printf(&c.dat, "%lld\n", (long long)r->max_tokens);
            else
                sbuf_puts(&c.dat, "?\n");
        }
        char label[600];
        line_label(v, l, label, sizeof label);
        bool eager = !strcmp(r0->mode, "eager");
        sbuf q = {0};
        esc_gnuplot(&q, label);
        sbuf_printf(&plot,
                    "%s'%s.dat' index %d using 1:2 with linespoints lw 2 pt %d ps %s dt %d lc "
                    "rgb '%s' title %s",
                    blocks ? ", " : "", stem, blocks, eager ? 4 : 7, eager ? "1.5" : "1",
                    eager ? 2 : 1, colors[case_index(v, l) % 7], q.s ? q.s : "''");
        plot.oom |= q.oom;
        free(q.s);
        blocks++;
    }
    if (!blocks) {
        free(plot.s);
        return chart_drop(&c);
    }
    chart_gp(&c, "set title %s\n", title);
    // the key below the plot: it would hide lines inside it
    sbuf_puts(&c.body, "set grid\nset key below maxrows 3\n");
    chart_gp(&c, "set xlabel %s\n", "memory budget (GiB)");
    chart_gp(&c, "set ylabel %s\n", "longest context (prompt and generated tokens)");
    sbuf_printf(&c.body, "set xrange [0:%.6g]\n", xmax * 1.05);
    // a log axis when the contexts span more than 20x
    if (hi > 20 * lo)
        sbuf_printf(&c.body, "set logscale y\nset yrange [%.6g:%.6g]\n", lo / 2, hi * 3);
    else
        sbuf_printf(&c.body, "set yrange [0:%.6g]\n", hi * 1.15);
    sbuf_puts(&c.body, "set format y '%.0f'\n");
    sbuf_printf(&c.body, "plot %s", plot.s ? plot.s : "");
    if (capped)
        sbuf_printf(&c.body,
                    ", '%s.dat' using 1:3 with points pt 6 ps 2.2 lc rgb 'black' title "
                    "'at the model''s positions'",
                    stem);
    sbuf_puts(&c.body, "\n");
    c.body.oom |= plot.oom;
    free(plot.s);
    return chart_end(&c, dir, out, err, cap);
}

// A cell of the longest-context table: "28343", "8192 (positions)", ...
static void tokens_cell(rdoc *d, const planfile_row *r) {
    if (!r)
        rdoc_cell(d, "%s", "");
    else if (r->weights_exceed_budget)
        rdoc_cell(d, "%s", "weights exceed it");
    else if (r->max_tokens == 0)
        rdoc_cell(d, "%s", "0: the prefill does not fit");
    else
        rdoc_cell(d, "%lld%s", (long long)r->max_tokens, r->capped ? " (positions)" : "");
}

static const planfile_row *row_at(const plan_view *v, int line, int64_t budget) {
    for (int k = 0; k < view_len(v, line); k++)
        if (view_row(v, line, k)->budget_bytes == budget)
            return view_row(v, line, k);
    return NULL;
}

static void plan_doc(const plan_view *v, const rp_charts *charts, rdoc *d) {
    const planfile *p = v->p;
    char settings[400], label[600];
    plan_settings(p, settings, sizeof settings);
    rdoc_heading(d, 1, "Memory-budget study");
    rdoc_para(d,
              "The longest context (prompt and generated tokens) each mode of each case reaches "
              "before a step's planned memory exceeds the budget: %s. Planned from the graphs "
              "alone by tcbench plan; nothing was run. From %s (tcbench %s, %s, %s).",
              settings, p->path, p->tool_version ? p->tool_version : "?",
              p->timestamp ? p->timestamp : "no timestamp",
              p->cpu_model ? p->cpu_model : "unknown CPU");
    for (int i = 0; i < charts->n; i++)
        rdoc_chart(d, charts->c[i].stem, charts->c[i].caption, charts->c[i].drawn);
    rdoc_heading(d, 2, "Longest context per budget (tokens)");
    rdoc_table_open(d, v->nlines + 1);
    rdoc_cell(d, "%s", "budget (GiB)");
    for (int l = 0; l < v->nlines; l++) {
        line_label(v, l, label, sizeof label);
        rdoc_cell(d, "%s", label);
    }
    for (int b = 0; b < v->nbudgets; b++) {
        rdoc_cell(d, "%.3g", (double)v->budgets[b] / GIB);
        for (int l = 0; l < v->nlines; l++)
            tokens_cell(d, row_at(v, l, v->budgets[b]));
    }
    rdoc_para(d, "(positions): the model's positions ended the context before the budget did.");
    rdoc_heading(d, 2, "Per case and mode");
    rdoc_table(d, 6, "case and mode", "batch", "prompt", "weights (GiB)", "KV bytes a token",
               "budgets with no context");
    for (int l = 0; l < v->nlines; l++) {
        // the figures at the largest budget (the weights' bytes do not depend on it)
        const planfile_row *r = view_row(v, l, view_len(v, l) - 1);
        int none = 0;
        for (int k = 0; k < view_len(v, l); k++)
            none += !plotted(view_row(v, l, k));
        line_label(v, l, label, sizeof label);
        rdoc_cell(d, "%s", label);
        rdoc_cell(d, "%lld", (long long)r->batch);
        rdoc_cell(d, "%lld", (long long)r->prompt_len);
        rdoc_cell(d, "%.2f", (double)r->weights_bytes / GIB);
        rdoc_cell(d, "%lld", (long long)r->kv_bytes_per_token);
        rdoc_cell(d, "%d of %d", none, view_len(v, l));
    }
}

// What the documents are written from.
typedef struct plan_src {
    const plan_view *v;
    const rp_charts *charts;
    const char *dir;
} plan_src;

static int write_doc(const plan_src *s, bool html, FILE *f, char *err, size_t cap) {
    rdoc d = {0};
    plan_doc(s->v, s->charts, &d);
    char chart_dir[4200];
    snprintf(chart_dir, sizeof chart_dir, "%s/charts", s->dir);
    int rc = d.oom  ? (snprintf(err, cap, "summary: out of memory"), -1)
             : html ? rdoc_write_html(&d, "tcbench plan report", chart_dir, f, err, cap)
                    : rdoc_write_md(&d, f, err, cap);
    rdoc_free(&d);
    return rc;
}

static int write_md(const void *ctx, FILE *f, char *err, size_t cap) {
    return write_doc(ctx, false, f, err, cap);
}

static int write_html(const void *ctx, FILE *f, char *err, size_t cap) {
    return write_doc(ctx, true, f, err, cap);
}

static int write_csv(const void *ctx, FILE *f, char *err, size_t cap) {
    const plan_view *v = ((const plan_src *)ctx)->v;
    sbuf b = {0};
    // RFC 4180 ends records with CRLF, as results.csv does
    sbuf_puts(&b, "suite,name,mode,batch,prompt_len,budget_bytes,budget_gib,max_tokens,capped,"
                  "weights_exceed_budget,weights_bytes,kv_bytes_per_token,fixed_bytes\r\n");
    for (int l = 0; l < v->nlines; l++)
        for (int k = 0; k < view_len(v, l); k++) {
            const planfile_row *r = view_row(v, l, k);
            esc_csv(&b, r->suite);
            sbuf_puts(&b, ",");
            esc_csv(&b, r->name);
            sbuf_puts(&b, ",");
            esc_csv(&b, r->mode);
            sbuf_printf(&b, ",%lld,%lld,%lld,%.6g,%lld,%s,%s,%lld,%lld,", (long long)r->batch,
                        (long long)r->prompt_len, (long long)r->budget_bytes,
                        (double)r->budget_bytes / GIB, (long long)r->max_tokens,
                        r->capped ? "true" : "false", r->weights_exceed_budget ? "true" : "false",
                        (long long)r->weights_bytes, (long long)r->kv_bytes_per_token);
            if (r->fixed_bytes >= 0)
                sbuf_printf(&b, "%lld", (long long)r->fixed_bytes);
            sbuf_puts(&b, "\r\n");
        }
    return rp_sbuf_flush(&b, f, "plan.csv", err, cap);
}

int plan_report_write(const planfile *p, const report_options *o, char *err, size_t cap) {
    plan_view v;
    if (view_init(&v, p, err, cap) < 0) {
        view_free(&v);
        return -1;
    }
    char chart_dir[4200];
    snprintf(chart_dir, sizeof chart_dir, "%s/charts", o->outdir);
    rp_charts charts = {0};
    int rc = base_mkdir_p(chart_dir, 0777, err, cap);
    if (rc == 0)
        rc = tokens_chart(&v, chart_dir, &charts, err, cap);
    if (rc == 0)
        rc = charts_draw(&charts, chart_dir, o->gnuplot ? o->gnuplot : "gnuplot", "tcbench report",
                         o->warn ? o->warn : stderr, err, cap);
    plan_src src = {&v, &charts, o->outdir};
    if (rc == 0)
        rc = rp_write_file(o->outdir, "summary.md", write_md, &src, err, cap);
    if (rc == 0)
        rc = rp_write_file(o->outdir, "plan.csv", write_csv, &src, err, cap);
    if (rc == 0)
        rc = rp_write_file(o->outdir, "index.html", write_html, &src, err, cap);
    free(charts.c);
    view_free(&v);
    return rc;
}
