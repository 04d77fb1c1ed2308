// The report's charts: a gnuplot script and its data per chart
// (report_int.h: charts_write; gnuplot.c draws them).
//
// Every string in a script goes through esc_gnuplot (single-quoted: gnuplot
// expands nothing there, where a double-quoted string would run `backquoted`
// shell commands); data files hold only numbers; the terminals are
// noenhanced, so '_' and '^' in names print as themselves. Each script
// draws its chart twice, PNG then SVG, and picks pngcairo when this gnuplot
// has it, else png (libgd).
#include "charts_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void chart_init(chart *c, const char *stem, const char *caption, int w, int h) {
    memset(c, 0, sizeof *c);
    snprintf(c->stem, sizeof c->stem, "%s", stem);
    snprintf(c->caption, sizeof c->caption, "%s", caption);
    c->w = w;
    c->h = h;
}

// body text with one escaped string: chart_gp(c, "set title %s\n", title)
void chart_gp(chart *c, const char *fmt, const char *s) {
    sbuf q = {0};
    esc_gnuplot(&q, s);
    sbuf_printf(&c->body, fmt, q.s ? q.s : "''");
    c->body.oom |= q.oom;
    free(q.s);
}

static void comment(sbuf *b, const char *s) {
    sbuf_puts(b, "# ");
    for (; *s; s++)
        sbuf_printf(b, "%c", (unsigned char)*s < 0x20 ? ' ' : *s);
    sbuf_puts(b, "\n");
}

static int write_text(const char *dir, const char *stem, const char *ext, const sbuf *b, char *err,
                      size_t cap) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s.%s", dir, stem, ext);
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, cap, "fopen %s: %s", path, strerror(errno));
        return -1;
    }
    bool ok = b->len == 0 || fwrite(b->s, 1, b->len, f) == b->len;
    if (!ok)
        snprintf(err, cap, "fwrite %s: %s", path, strerror(errno));
    if (fclose(f) != 0 && ok) {
        snprintf(err, cap, "fclose %s: %s", path, strerror(errno));
        ok = false;
    }
    return ok ? 0 : -1;
}

static const char terminals[] = "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
                                "    set terminal pngcairo noenhanced size %d,%d font 'sans,9'\n"
                                "} else {\n"
                                "    set terminal png noenhanced size %d,%d\n"
                                "}\n";

// Writes STEM.gp and STEM.dat and adds the chart to the list; frees c's buffers.
int chart_end(chart *c, const char *dir, rp_charts *out, char *err, size_t cap) {
    // a stem already taken (odd names that sanitize alike) gets a number
    char stem[160];
    snprintf(stem, sizeof stem, "%s", c->stem);
    for (int k = 2, i = 0; i < out->n; i++)
        if (!strcmp(out->c[i].stem, stem)) {
            snprintf(stem, sizeof stem, "%.140s-%d", c->stem, k++);
            i = -1;
        }
    sbuf s = {0};
    comment(&s, c->caption);
    sbuf_printf(&s, "# written by tcbench report; the numbers are in %s.dat.\n", stem);
    sbuf_printf(&s, "# Draw it again with: gnuplot %s.gp\n", stem);
    sbuf_puts(&s, "set encoding utf8\nset datafile missing '?'\n");
    sbuf_printf(&s, terminals, c->w, c->h, c->w, c->h);
    sbuf_printf(&s, "set output '%s.png'\n%s", stem, c->body.s ? c->body.s : "");
    sbuf_printf(&s,
                "unset output\nset terminal svg noenhanced size %d,%d font 'sans,9' "
                "background '#ffffff'\n",
                c->w, c->h);
    sbuf_printf(&s, "set output '%s.svg'\n%sunset output\n", stem, c->body.s ? c->body.s : "");
    int rc = 0;
    if (s.oom || c->body.oom || c->dat.oom) {
        snprintf(err, cap, "chart %s: out of memory", stem);
        rc = -1;
    }
    if (rc == 0)
        rc = write_text(dir, stem, "gp", &s, err, cap);
    if (rc == 0)
        rc = write_text(dir, stem, "dat", &c->dat, err, cap);
    if (rc == 0 && out->n == out->cap) {
        int ncap = out->cap ? 2 * out->cap : 16;
        rp_chart *p = realloc(out->c, (size_t)ncap * sizeof *p);
        if (!p) {
            snprintf(err, cap, "realloc: out of memory for the chart list");
            rc = -1;
        } else {
            out->c = p;
            out->cap = ncap;
        }
    }
    if (rc == 0) {
        rp_chart *r = &out->c[out->n++];
        memset(r, 0, sizeof *r);
        snprintf(r->stem, sizeof r->stem, "%s", stem);
        snprintf(r->caption, sizeof r->caption, "%s", c->caption);
    }
    free(s.s);
    free(c->body.s);
    free(c->dat.s);
    return rc;
}

int chart_drop(chart *c) {
    free(c->body.s);
    free(c->dat.s);
    return 0;
}

// "speedup-compiled-fp32-infer-cpu"
void chart_group_stem(char *buf, size_t cap, const char *kind, const rp_sel *s) {
    static const enum rp_field parts[] = {RP_MODE, RP_PRECISION, RP_WORKLOAD, RP_DEVICE};
    int n = snprintf(buf, cap, "%s", kind);
    for (size_t k = 0; k < sizeof parts / sizeof parts[0] && n >= 0 && (size_t)n < cap; k++) {
        if (!s->v[parts[k]])
            continue;
        char part[64];
        esc_filename(part, sizeof part, s->v[parts[k]]);
        n += snprintf(buf + n, cap - (size_t)n, "-%s", part);
    }
}

const char *chart_workload(const char *w) {
    return !strcmp(w, "infer") ? "inference" : !strcmp(w, "train") ? "training" : w;
}

void chart_one_line(chart *c) {
    sbuf_puts(&c->body, "set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead dt 2 "
                        "lc rgb 'gray40'\n");
}

// The study's charts: per suite, bars per precision, one panel per workload
// (inference and training side by side): the geomean speedup, or the pass
// rate "87%, 47/54". A precision that ran and has no figure keeps its slot,
// labelled ("none passed, 0/6"; a 0% pass rate), never dropped.
enum suite_kind { SUITE_GEOMEAN, SUITE_PASSRATE };

// the state column of each workload x precision
enum { ST_NONE, ST_VALUE, ST_NONE_PASSED, ST_NONE_STABLE };

static void suite_plot(chart *c, enum suite_kind kind, const char *stem, int w, int np,
                       const char *const *precs, const int state[][RP_MAX_VALUES]) {
    static const char *const colors[] = {"#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee"};
    bool first = true;
    for (int p = 0; p < np; p++) {
        if (!state[w][p])
            continue;
        int v = 2 + 4 * (w * np + p), st = v + 1, ps = v + 2, t = v + 3;
        double off = (p - (np - 1) / 2.0) * 0.8 / np;
        sbuf_printf(&c->body,
                    "%s'%s.dat' using ($1%+.3f):(column(%d) == %d && column(%d) > 0 ? column(%d) "
                    ": 1/0) with boxes lc rgb '%s' title ",
                    first ? "" : ", ", stem, off, st, ST_VALUE, v, v, colors[p % 5]);
        chart_gp(c, "%s", precs[p]);
        if (kind == SUITE_GEOMEAN)
            sbuf_printf(&c->body,
                        ", '' using ($1%+.3f):(column(%d) == %d ? column(%d) : 0):(column(%d) == "
                        "%d ? sprintf('%%.2fx', column(%d)) : '') with labels offset 0,0.7 "
                        "notitle, '' using ($1%+.3f):(0):(column(%d) == %d ? sprintf('none "
                        "passed, 0/%%d', int(column(%d))) : column(%d) == %d ? sprintf('%%d "
                        "passed, none stable', int(column(%d))) : '') with labels rotate by 90 "
                        "left offset 0,0.5 font ',8' notitle",
                        off, st, ST_VALUE, v, st, ST_VALUE, v, off, st, ST_NONE_PASSED, t, st,
                        ST_NONE_STABLE, ps);
        else
            sbuf_printf(&c->body,
                        ", '' using ($1%+.3f):%d:(column(%d) > 0 ? sprintf('%%d%%%%, %%d/%%d', "
                        "int(column(%d)), int(column(%d)), int(column(%d))) : '') with labels "
                        "rotate by 90 left offset 0,0.5 font ',8' notitle",
                        off, v, st, v, ps, t);
        first = false;
    }
    sbuf_puts(&c->body, "\n");
}

// One .dat row per suite of group s (mode, device): per workload x
// precision the value, state, passed and total; state[w][p] says which were
// measured anywhere. Returns the top of the y axis, one for every panel so
// that bars compare across them.
static double suite_data(const rp_set *set, enum suite_kind kind, const rp_sel *g, chart *c,
                         int state[][RP_MAX_VALUES]) {
    const char *suites[RP_MAX_VALUES], *precs[RP_MAX_VALUES], *wls[RP_MAX_VALUES];
    int ns = rp_values(set, g, RP_SUITE, suites, RP_MAX_VALUES);
    int np = rp_values(set, g, RP_PRECISION, precs, RP_MAX_VALUES);
    int nw = rp_values(set, g, RP_WORKLOAD, wls, RP_MAX_VALUES);
    double top = 1.2;
    sbuf_puts(&c->dat, "# suite_index, then per workload x precision: value state passed "
                       "total (state 0: not measured, 1: value, 2: none passed, 3: none "
                       "stable):");
    for (int w = 0; w < nw; w++)
        for (int p = 0; p < np; p++)
            sbuf_printf(&c->dat, " %s/%s", wls[w], precs[p]);
    sbuf_puts(&c->dat, " (names in the .gp)\n");
    rp_sel s = *g;
    for (int k = 0; k < ns; k++) {
        sbuf_printf(&c->dat, "%d", k);
        s.v[RP_SUITE] = suites[k];
        for (int w = 0; w < nw; w++)
            for (int p = 0; p < np; p++) {
                s.v[RP_WORKLOAD] = wls[w];
                s.v[RP_PRECISION] = precs[p];
                rp_agg a;
                rp_agg_compute(set, &s, &a);
                int st = a.total == 0                           ? ST_NONE
                         : kind == SUITE_PASSRATE || a.ngeo > 0 ? ST_VALUE
                         : a.passed == 0                        ? ST_NONE_PASSED
                                                                : ST_NONE_STABLE;
                // the pass rate as the tables print it, rounded half to even
                double v = kind == SUITE_PASSRATE ? (a.total ? rint(100.0 * a.passed / a.total) : 0)
                           : st == ST_VALUE       ? a.geomean
                                                  : 0;
                if (st == ST_VALUE && kind == SUITE_GEOMEAN)
                    top = fmax(top, v * 1.15);
                state[w][p] = state[w][p] ? state[w][p] : st;
                sbuf_printf(&c->dat, " %.6g %d %d %d", v, st, a.passed, a.total);
            }
        sbuf_puts(&c->dat, "\n");
    }
    return top;
}

static int suite_chart(const rp_set *set, enum suite_kind kind, const char *dir, rp_charts *out,
                       char *err, size_t cap) {
    rp_sel s = {0};
    s.v[RP_MODE] = set->primary;
    const char *suites[RP_MAX_VALUES], *precs[RP_MAX_VALUES], *wls[RP_MAX_VALUES],
        *devs[RP_MAX_VALUES];
    int ns = rp_values(set, &s, RP_SUITE, suites, RP_MAX_VALUES);
    int np = rp_values(set, &s, RP_PRECISION, precs, RP_MAX_VALUES);
    int nw = rp_values(set, &s, RP_WORKLOAD, wls, RP_MAX_VALUES);
    int nd = rp_values(set, &s, RP_DEVICE, devs, RP_MAX_VALUES);
    const char *kname = kind == SUITE_GEOMEAN ? "geomean" : "passrate";
    for (int di = 0; di < nd; di++) {
        s.v[RP_DEVICE] = devs[di];
        char stem[160], title[400], dev[64];
        esc_filename(dev, sizeof dev, devs[di]);
        if (nd > 1)
            snprintf(stem, sizeof stem, "%s-%s", kname, dev);
        else
            snprintf(stem, sizeof stem, "%s", kname);
        if (kind == SUITE_GEOMEAN)
            snprintf(title, sizeof title,
                     "Geomean speedup of %s over eager, stable entries that passed (%s)",
                     set->primary, devs[di]);
        else
            snprintf(title, sizeof title,
                     "Pass rate of %s: entries that passed accuracy / all entries (%s)",
                     set->primary, devs[di]);
        chart c;
        int w = 120 + nw * (160 + 90 * ns);
        chart_init(&c, stem, title, w < 640 ? 640 : w > 2400 ? 2400 : w, 460);
        int state[RP_MAX_VALUES][RP_MAX_VALUES] = {{0}};
        double top = suite_data(set, kind, &s, &c, state);
        s.v[RP_SUITE] = s.v[RP_WORKLOAD] = s.v[RP_PRECISION] = NULL;
        int panels = 0;
        for (int w = 0; w < nw; w++) {
            bool any = false;
            for (int p = 0; p < np; p++)
                any |= state[w][p] != ST_NONE;
            panels += any;
        }
        if (!panels) {
            free(c.body.s);
            free(c.dat.s);
            continue;
        }
        sbuf_printf(&c.body, "set multiplot layout 1,%d title ", panels);
        chart_gp(&c, "%s\n", title);
        sbuf_puts(&c.body, "set style fill solid 0.7 border -1\nset grid ytics\n"
                           "set key top left\n");
        sbuf_printf(&c.body, "set xrange [-0.6:%d.6]\nset boxwidth %.3f\n", ns - 1,
                    0.8 / (np > 0 ? np : 1));
        if (kind == SUITE_GEOMEAN) {
            sbuf_printf(&c.body, "set yrange [0:%.3g]\n", top);
            chart_gp(&c, "set ylabel %s\n", "geomean speedup over eager");
            chart_one_line(&c);
        } else {
            // room above 100% for the labels, which stand upright over the bars
            sbuf_puts(&c.body, "set yrange [0:150]\nset ytics 0,20,100\n");
            chart_gp(&c, "set ylabel %s\n", "pass rate (%)");
        }
        sbuf_puts(&c.body, "set xtics scale 0 (");
        for (int k = 0; k < ns; k++) {
            chart_gp(&c, k ? ", %s" : "%s", suites[k]);
            sbuf_printf(&c.body, " %d", k);
        }
        sbuf_puts(&c.body, ")\n");
        for (int w = 0; w < nw; w++) {
            bool any = false;
            for (int p = 0; p < np; p++)
                any |= state[w][p] != ST_NONE;
            if (!any)
                continue;
            chart_gp(&c, "set title %s\nplot ", chart_workload(wls[w]));
            suite_plot(&c, kind, stem, w, np, precs, (const int(*)[RP_MAX_VALUES])state);
        }
        sbuf_puts(&c.body, "unset multiplot\n");
        if (chart_end(&c, dir, out, err, cap) < 0)
            return -1;
    }
    return 0;
}

static int geomean_chart(const rp_set *set, const char *dir, rp_charts *out, char *err,
                         size_t cap) {
    return suite_chart(set, SUITE_GEOMEAN, dir, out, err, cap);
}

static int passrate_chart(const rp_set *set, const char *dir, rp_charts *out, char *err,
                          size_t cap) {
    return suite_chart(set, SUITE_PASSRATE, dir, out, err, cap);
}

// Eager and compiled-family points under the ceilings of one calibrated run.
static int roofline_chart(const rp_set *set, int fi, const char *dir, rp_charts *out, char *err,
                          size_t cap) {
    const resfile *f = set->files[fi];
    if (!isfinite(f->calib_GBps) || !isfinite(f->calib_GFLOPs) || f->calib_GBps <= 0 ||
        f->calib_GFLOPs <= 0)
        return 0;
    const char *modes[RP_MAX_VALUES];
    int nm = rp_values(set, &(rp_sel){0}, RP_MODE, modes, RP_MAX_VALUES);
    double xmin = f->calib_GFLOPs / f->calib_GBps, xmax = xmin, ymin = f->calib_GFLOPs;
    int npoints = 0;
    char stem[160], title[400];
    if (set->nfiles > 1)
        snprintf(stem, sizeof stem, "roofline-%d", fi + 1);
    else
        snprintf(stem, sizeof stem, "roofline");
    snprintf(title, sizeof title, "Roofline: %.160s, %.100s (%.1f GB/s, %.1f GFLOP/s)", f->path,
             f->cpu_model, f->calib_GBps, f->calib_GFLOPs);
    chart c;
    chart_init(&c, stem, title, 860, 560);
    sbuf_puts(&c.dat, "# intensity_flop_per_byte achieved_GFLOPs; one block per mode (mode names "
                      "in the .gp)\n");
    int block[RP_MAX_VALUES], nblocks = 0; // gnuplot index of each mode's points, or -1
    for (int m = 0; m < nm; m++) {
        block[m] = -1;
        for (int i = 0; i < set->n; i++) {
            const resfile_entry *e = set->e[i];
            if (e->file != f || strcmp(e->mode, modes[m]) != 0 || !(e->x->intensity > 0) ||
                !(e->x->achieved_GFLOPs > 0))
                continue;
            if (block[m] < 0) {
                // two empty lines end a block; gnuplot counts only blocks with data
                if (nblocks)
                    sbuf_puts(&c.dat, "\n\n");
                block[m] = nblocks++;
            }
            sbuf_printf(&c.dat, "%.6g %.6g\n", e->x->intensity, e->x->achieved_GFLOPs);
            xmin = fmin(xmin, e->x->intensity);
            xmax = fmax(xmax, e->x->intensity);
            ymin = fmin(ymin, e->x->achieved_GFLOPs);
            npoints++;
        }
    }
    if (!npoints) {
        free(c.body.s);
        free(c.dat.s);
        return 0;
    }
    chart_gp(&c, "set title %s\n", title);
    sbuf_puts(&c.body, "set logscale xy\nset grid\nset key bottom right\nset samples 400\n");
    chart_gp(&c, "set xlabel %s\n",
             "arithmetic intensity (FLOP per byte of the fewest bytes moved)");
    chart_gp(&c, "set ylabel %s\n", "GFLOP/s");
    sbuf_printf(&c.body, "bw = %.6g\npeak = %.6g\nroof(x) = x * bw < peak ? x * bw : peak\n",
                f->calib_GBps, f->calib_GFLOPs);
    sbuf_printf(&c.body, "set xrange [%.6g:%.6g]\nset yrange [%.6g:%.6g]\n", xmin / 4, xmax * 4,
                ymin / 4, f->calib_GFLOPs * 3);
    // names beside the points of the headline mode, while they stay readable
    int labels = 0;
    for (int i = 0; i < set->n && npoints <= 40; i++) {
        const resfile_entry *e = set->e[i];
        if (e->file != f || !set->primary || strcmp(e->mode, set->primary) != 0 ||
            !(e->x->intensity > 0) || !(e->x->achieved_GFLOPs > 0))
            continue;
        char label[512];
        rp_label(set, e, label, sizeof label);
        sbuf_printf(&c.body, "set label %d ", ++labels);
        chart_gp(&c, "%s", label);
        sbuf_printf(&c.body, " at %.6g,%.6g offset 0.6,0 font ',8'\n", e->x->intensity,
                    e->x->achieved_GFLOPs);
    }
    sbuf_puts(&c.body, "plot roof(x) with lines lw 2 lc rgb 'black' title "
                       "'roof: min(GEMM rate, intensity x bandwidth)'");
    static const int pts[] = {7, 5, 9, 13, 11};
    for (int m = 0; m < nm; m++) {
        if (block[m] < 0)
            continue;
        sbuf_printf(&c.body, ", '%s.dat' index %d using 1:2 with points pt %d ps 1.2 title ", stem,
                    block[m], pts[m % 5]);
        chart_gp(&c, "%s", modes[m]);
    }
    sbuf_puts(&c.body, "\n");
    return chart_end(&c, dir, out, err, cap);
}

// Speedup against batch size for the cases run at several batch sizes.
static int sweep_chart(const rp_set *set, const rp_sel *s, const char *dir, rp_charts *out,
                       char *err, size_t cap) {
    char stem[160], title[400];
    chart_group_stem(stem, sizeof stem, "sweep", s);
    snprintf(title, sizeof title, "Speedup against batch size: %s, %s, %s, %s", s->v[RP_MODE],
             s->v[RP_PRECISION], chart_workload(s->v[RP_WORKLOAD]), s->v[RP_DEVICE]);
    chart c;
    chart_init(&c, stem, title, 760, 480);
    // the axis ends as the per-model chart's: at most 1.5 x the largest median
    double med = 0, hi = 0;
    for (int i = 0; i < set->n; i++) {
        const resfile_entry *e = set->e[i];
        if (rp_match(e, s) && isfinite(e->speedup) && rp_swept(set, e)) {
            med = fmax(med, e->speedup);
            hi = fmax(hi, isfinite(e->x->ci95_hi) ? e->x->ci95_hi : e->speedup);
        }
    }
    double top = fmax(fmax(fmin(hi * 1.05, 1.5 * med), med * 1.1), 1.1);
    sbuf_puts(&c.dat, "# batch speedup ci95_lo ci95_hi (clipped to the axis) unstable counted "
                      "clipped_at; one block per case (names in the .gp)\n");
    int blocks = 0;
    long long bmin = 0, bmax = 0;
    bool unstable = false, clipped = false;
    sbuf plot = {0};
    const resfile_entry *prev = NULL;
    for (int i = 0; i < set->n; i++) {
        const resfile_entry *e = set->e[i];
        if (!rp_match(e, s) || !isfinite(e->speedup) || !rp_swept(set, e))
            continue;
        bool new_case = !prev || strcmp(prev->suite, e->suite) || strcmp(prev->name, e->name);
        if (new_case) {
            if (prev)
                sbuf_puts(&c.dat, "\n\n");
            sbuf q = {0};
            char label[512];
            snprintf(label, sizeof label, "%s/%s", e->suite, e->name);
            esc_gnuplot(&q, label);
            sbuf_printf(&plot, "%s'%s.dat' index %d using 1:2:3:4 with yerrorlines lw 2 title %s",
                        blocks ? ", " : "", stem, blocks, q.s ? q.s : "''");
            plot.oom |= q.oom;
            free(q.s);
            blocks++;
        }
        bmin = !bmin || e->batch < bmin ? e->batch : bmin;
        bmax = e->batch > bmax ? e->batch : bmax;
        bool ci = isfinite(e->x->ci95_lo) && isfinite(e->x->ci95_hi),
             clip = ci && e->x->ci95_hi > top;
        sbuf_printf(&c.dat, "%lld %.6g %.6g %.6g", (long long)e->batch, e->speedup,
                    ci ? e->x->ci95_lo : e->speedup, ci ? fmin(e->x->ci95_hi, top) : e->speedup);
        if (e->unstable)
            sbuf_printf(&c.dat, " %.6g", e->speedup);
        else
            sbuf_puts(&c.dat, " ?");
        if (set->at_batch[i])
            sbuf_printf(&c.dat, " %.6g", e->speedup);
        else
            sbuf_puts(&c.dat, " ?");
        if (clip)
            sbuf_printf(&c.dat, " %.6g\n", top);
        else
            sbuf_puts(&c.dat, " ?\n");
        unstable |= e->unstable;
        clipped |= clip;
        prev = e;
    }
    if (!blocks) {
        free(plot.s);
        return chart_drop(&c);
    }
    chart_gp(&c, "set title %s\n", title);
    sbuf_printf(&c.body, "set logscale x 2\nset grid\nset key bottom right\nset yrange [0:%.6g]\n",
                top);
    // a margin on both sides, so the first and last error bars show whole
    sbuf_printf(&c.body, "set xrange [%.6g:%.6g]\n", bmin / 1.5, bmax * 1.5);
    chart_gp(&c, "set xlabel %s\n", "batch size");
    chart_gp(&c, "set ylabel %s\n", "speedup over eager (median; bars: 95% CI)");
    chart_one_line(&c);
    sbuf_printf(&c.body, "plot %s", plot.s ? plot.s : "");
    sbuf_printf(&c.body,
                ", '%s.dat' using 1:6 with points pt 4 ps 2 lc rgb 'black' title "
                "'the batch that counts in the geomeans'",
                stem);
    if (unstable)
        sbuf_puts(&c.body, ", '' using 1:5 with points pt 6 ps 2.6 lc rgb 'gray40' title "
                           "'unstable (left out)'");
    if (clipped)
        sbuf_puts(&c.body, ", '' using 1:7 with points pt 9 ps 1.3 lc rgb 'black' title "
                           "'95% CI beyond the axis (clipped)'");
    sbuf_puts(&c.body, "\n");
    c.body.oom |= plot.oom;
    free(plot.s);
    return chart_end(&c, dir, out, err, cap);
}

int charts_write(const rp_set *set, const char *dir, rp_charts *out, char *err, size_t cap) {
    if (set->primary &&
        (geomean_chart(set, dir, out, err, cap) < 0 || passrate_chart(set, dir, out, err, cap) < 0))
        return -1;
    const char *modes[RP_MAX_VALUES], *devs[RP_MAX_VALUES], *precs[RP_MAX_VALUES],
        *wls[RP_MAX_VALUES];
    int nm = rp_values(set, &(rp_sel){0}, RP_MODE, modes, RP_MAX_VALUES);
    typedef int (*chart_fn)(const rp_set *, const rp_sel *, const char *, rp_charts *, char *,
                            size_t);
    // per group, side by side: speedup, compile time and its break-even, memory, sweep
    static const chart_fn per_group[] = {chart_speedup, chart_compile, chart_breakeven,
                                         chart_memory, sweep_chart};
    for (int mi = 0; mi < nm; mi++) {
        if (!resfile_mode_compiled(modes[mi]))
            continue;
        rp_sel s = {0};
        s.v[RP_MODE] = modes[mi];
        int nd = rp_values(set, &s, RP_DEVICE, devs, RP_MAX_VALUES);
        for (int di = 0; di < nd; di++) {
            s.v[RP_DEVICE] = devs[di];
            int np = rp_values(set, &s, RP_PRECISION, precs, RP_MAX_VALUES);
            for (int pi = 0; pi < np; pi++) {
                s.v[RP_PRECISION] = precs[pi];
                int nw = rp_values(set, &s, RP_WORKLOAD, wls, RP_MAX_VALUES);
                for (int wi = 0; wi < nw; wi++) {
                    s.v[RP_WORKLOAD] = wls[wi];
                    for (size_t k = 0; k < sizeof per_group / sizeof per_group[0]; k++)
                        if (per_group[k](set, &s, dir, out, err, cap) < 0)
                            return -1;
                }
                s.v[RP_WORKLOAD] = NULL;
            }
            s.v[RP_PRECISION] = NULL;
        }
    }
    for (int fi = 0; fi < set->nfiles; fi++)
        if (roofline_chart(set, fi, dir, out, err, cap) < 0)
            return -1;
    return set->foreign ? side_charts(set, dir, out, err, cap) : 0;
}
