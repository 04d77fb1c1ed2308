// The report's charts: a gnuplot script and its data per chart
// (report_int.h: charts_write; gnuplot.c draws them).
//
// Every string in a script goes through esc_gnuplot (single-quoted: gnuplot
// expands nothing there, where a double-quoted string would run `backquoted`
// shell commands); data files hold only numbers; the terminals are
// noenhanced, so '_' and '^' in names print as themselves. Each script
// draws its chart twice, PNG then SVG, and picks pngcairo when this gnuplot
// has it, else png (libgd).
#include "report_int.h"

#include "escape.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct chart {
    char stem[160];
    char caption[400];
    sbuf body, dat; // the drawing commands (run once per terminal) and the numbers
    int w, h;
} chart;

static void chart_init(chart *c, const char *stem, const char *caption, int w, int h) {
    memset(c, 0, sizeof *c);
    snprintf(c->stem, sizeof c->stem, "%s", stem);
    snprintf(c->caption, sizeof c->caption, "%s", caption);
    c->w = w;
    c->h = h;
}

// body text with one escaped string: gp(c, "set title %s\n", title)
static void gp(chart *c, const char *fmt, const char *s) {
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
static int chart_end(chart *c, const char *dir, rp_charts *out, char *err, size_t cap) {
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

// "speedup-compiled-fp32-infer-cpu"
static void group_stem(char *buf, size_t cap, const char *kind, const rp_sel *s) {
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

static const char *workload_word(const char *w) {
    return !strcmp(w, "infer") ? "inference" : !strcmp(w, "train") ? "training" : w;
}

// The x tics of bar charts: one escaped label per bar.
static void xtics(chart *c, const rp_set *set, const resfile_entry *const *e, int n) {
    sbuf_puts(&c->body, "set xtics rotate by 45 right scale 0 (");
    for (int i = 0; i < n; i++) {
        char label[512];
        rp_label(set, e[i], label, sizeof label);
        gp(c, i ? ", %s" : "%s", label);
        sbuf_printf(&c->body, " %d", i);
    }
    sbuf_puts(&c->body, ")\n");
}

static void one_line(chart *c) {
    sbuf_puts(&c->body, "set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead dt 2 "
                        "lc rgb 'gray40'\n");
}

typedef struct keyed {
    double key;
    const resfile_entry *e;
} keyed;

static int keyed_cmp(const void *a, const void *b) {
    double x = ((const keyed *)a)->key, y = ((const keyed *)b)->key;
    return (x > y) - (x < y);
}

static double key_speedup(const resfile_entry *e) { return e->speedup; }
static double key_compile(const resfile_entry *e) { return e->compile_cold_s; }
static double key_compression(const resfile_entry *e) { return e->compression_ratio; }

// A bar chart of the compiled-family entries of group s that have a key,
// sorted by it: *e (malloc'd) and *n of them; stem KIND-MODE-..., its title
// and x tics written. *n == 0: no chart (nothing allocated). -1: no memory.
static int bar_begin(const rp_set *set, const rp_sel *s, double (*key)(const resfile_entry *),
                     const char *kind, const char *what, const char *ylabel, chart *c,
                     const resfile_entry ***e, int *n, char *err, size_t cap) {
    keyed *k = malloc(((size_t)set->n + 1) * sizeof *k);
    *e = malloc(((size_t)set->n + 1) * sizeof **e);
    *n = 0;
    if (!k || !*e) {
        free(k);
        free(*e);
        snprintf(err, cap, "malloc: out of memory for a chart");
        return -1;
    }
    int total = 0;
    for (int i = 0; i < set->n; i++) {
        if (!set->e[i]->compiled || !rp_match(set->e[i], s))
            continue;
        total++;
        if (isfinite(key(set->e[i])))
            k[(*n)++] = (keyed){key(set->e[i]), set->e[i]};
    }
    qsort(k, (size_t)*n, sizeof *k, keyed_cmp);
    for (int i = 0; i < *n; i++)
        (*e)[i] = k[i].e;
    free(k);
    if (*n == 0) {
        free(*e);
        return 0;
    }
    char stem[160], title[400];
    group_stem(stem, sizeof stem, kind, s);
    snprintf(title, sizeof title, "%s: %s, %s, %s, %s (%d of %d entries)", what, s->v[RP_MODE],
             s->v[RP_PRECISION], workload_word(s->v[RP_WORKLOAD]), s->v[RP_DEVICE], *n, total);
    int w = *n * 26 + 160;
    chart_init(c, stem, title, w < 720 ? 720 : w > 2400 ? 2400 : w, 480);
    gp(c, "set title %s\n", title);
    sbuf_puts(&c->body, "set style fill solid 0.7 border -1\nset grid ytics\nset key top left\n");
    sbuf_printf(&c->body, "set xrange [-0.6:%d.4]\n", *n - 1);
    gp(c, "set ylabel %s\n", ylabel);
    xtics(c, set, *e, *n);
    return 0;
}

static int speedup_chart(const rp_set *set, const rp_sel *s, const char *dir, rp_charts *out,
                         char *err, size_t cap) {
    chart c;
    const resfile_entry **e;
    int n;
    if (bar_begin(set, s, key_speedup, "speedup", "Speedup over eager per model",
                  "speedup over eager (median; bars: 95% CI)", &c, &e, &n, err, cap) < 0)
        return -1;
    if (n == 0)
        return 0;
    bool ci = false;
    sbuf_puts(&c.dat, "# index speedup ci95_lo ci95_hi (sorted by speedup; names in the .gp)\n");
    for (int i = 0; i < n; i++) {
        bool has = isfinite(e[i]->ci95_lo) && isfinite(e[i]->ci95_hi);
        ci |= has;
        sbuf_printf(&c.dat, "%d %.6g", i, e[i]->speedup);
        if (has)
            sbuf_printf(&c.dat, " %.6g %.6g\n", e[i]->ci95_lo, e[i]->ci95_hi);
        else
            sbuf_puts(&c.dat, " ? ?\n");
    }
    sbuf_puts(&c.body, "set boxwidth 0.7\nset yrange [0:*]\n");
    one_line(&c);
    sbuf_printf(&c.body, "plot '%s.dat' using 1:2 with boxes lc rgb '#4477aa' title 'speedup'",
                c.stem);
    if (ci)
        sbuf_puts(&c.body,
                  ", '' using 1:2:3:4 with yerrorbars lc rgb 'black' pt 7 ps 0.3 title '95% CI'");
    sbuf_puts(&c.body, "\n");
    free(e);
    return chart_end(&c, dir, out, err, cap);
}

static int compile_chart(const rp_set *set, const rp_sel *s, const char *dir, rp_charts *out,
                         char *err, size_t cap) {
    chart c;
    const resfile_entry **e;
    int n;
    if (bar_begin(set, s, key_compile, "compile", "Compile time per model", "seconds", &c, &e, &n,
                  err, cap) < 0)
        return -1;
    if (n == 0)
        return 0;
    double lo = INFINITY, hi = 0;
    bool warm = false;
    sbuf_puts(&c.dat, "# index cold_s warm_s (sorted by cold compile time)\n");
    for (int i = 0; i < n; i++) {
        double cw[2] = {e[i]->compile_cold_s, e[i]->compile_warm_s};
        sbuf_printf(&c.dat, "%d", i);
        for (int j = 0; j < 2; j++) {
            if (isfinite(cw[j]) && cw[j] > 0) {
                sbuf_printf(&c.dat, " %.6g", cw[j]);
                lo = fmin(lo, cw[j]);
                hi = fmax(hi, cw[j]);
                warm |= j == 1;
            } else
                sbuf_puts(&c.dat, " ?");
        }
        sbuf_puts(&c.dat, "\n");
    }
    // cold compiles take seconds, cache hits milliseconds: a log axis shows both
    sbuf_puts(&c.body, hi > 100 * lo ? "set logscale y\n" : "set yrange [0:*]\n");
    sbuf_puts(&c.body, "set boxwidth 0.38\n");
    sbuf_printf(&c.body,
                "plot '%s.dat' using ($1-0.2):2 with boxes lc rgb '#cc6677' "
                "title 'cold (empty kernel cache)'",
                c.stem);
    if (warm)
        sbuf_puts(&c.body,
                  ", '' using ($1+0.2):3 with boxes lc rgb '#88ccee' title 'warm (cache hit)'");
    sbuf_puts(&c.body, "\n");
    free(e);
    return chart_end(&c, dir, out, err, cap);
}

static int memory_chart(const rp_set *set, const rp_sel *s, const char *dir, rp_charts *out,
                        char *err, size_t cap) {
    chart c;
    const resfile_entry **e;
    int n;
    if (bar_begin(set, s, key_compression, "memory",
                  "Peak memory compression (eager peak / this peak)",
                  "compression ratio (above 1: less memory than eager)", &c, &e, &n, err, cap) < 0)
        return -1;
    if (n == 0)
        return 0;
    sbuf_puts(&c.dat, "# index compression_ratio (sorted)\n");
    for (int i = 0; i < n; i++)
        sbuf_printf(&c.dat, "%d %.6g\n", i, e[i]->compression_ratio);
    sbuf_puts(&c.body, "set boxwidth 0.7\nset yrange [0:*]\n");
    one_line(&c);
    sbuf_printf(&c.body,
                "plot '%s.dat' using 1:2 with boxes lc rgb '#117733' title 'compression'\n",
                c.stem);
    free(e);
    return chart_end(&c, dir, out, err, cap);
}

// The study's chart: geomean speedup per suite, bars per precision, one
// panel per workload (inference and training side by side).
static int geomean_chart(const rp_set *set, const char *dir, rp_charts *out, char *err,
                         size_t cap) {
    rp_sel s = {0};
    s.v[RP_MODE] = set->primary;
    const char *suites[RP_MAX_VALUES], *precs[RP_MAX_VALUES], *wls[RP_MAX_VALUES],
        *devs[RP_MAX_VALUES];
    int ns = rp_values(set, &s, RP_SUITE, suites, RP_MAX_VALUES);
    int np = rp_values(set, &s, RP_PRECISION, precs, RP_MAX_VALUES);
    int nw = rp_values(set, &s, RP_WORKLOAD, wls, RP_MAX_VALUES);
    int nd = rp_values(set, &s, RP_DEVICE, devs, RP_MAX_VALUES);
    static const char *const colors[] = {"#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee"};
    for (int di = 0; di < nd; di++) {
        s.v[RP_DEVICE] = devs[di];
        char stem[160], title[400], dev[64];
        esc_filename(dev, sizeof dev, devs[di]);
        if (nd > 1)
            snprintf(stem, sizeof stem, "geomean-%s", dev);
        else
            snprintf(stem, sizeof stem, "geomean");
        snprintf(title, sizeof title, "Geomean speedup of %s over eager, entries that passed (%s)",
                 set->primary, devs[di]);
        chart c;
        int w = 120 + nw * (160 + 90 * ns);
        chart_init(&c, stem, title, w < 640 ? 640 : w > 2400 ? 2400 : w, 460);
        // columns: 2 + w * np + p
        bool has[RP_MAX_VALUES][RP_MAX_VALUES] = {{false}};
        int panels = 0;
        double top = 1.2; // one y axis for every panel, so bars compare across them
        sbuf_puts(&c.dat, "# suite_index, then the geomean per workload x precision:");
        for (int w = 0; w < nw; w++)
            for (int p = 0; p < np; p++)
                sbuf_printf(&c.dat, " %s/%s", wls[w], precs[p]);
        sbuf_puts(&c.dat, " (names in the .gp)\n");
        for (int k = 0; k < ns; k++) {
            sbuf_printf(&c.dat, "%d", k);
            s.v[RP_SUITE] = suites[k];
            for (int w = 0; w < nw; w++)
                for (int p = 0; p < np; p++) {
                    s.v[RP_WORKLOAD] = wls[w];
                    s.v[RP_PRECISION] = precs[p];
                    rp_agg a;
                    rp_agg_compute(set, &s, &a);
                    if (isfinite(a.geomean)) {
                        sbuf_printf(&c.dat, " %.6g", a.geomean);
                        has[w][p] = true;
                        top = fmax(top, a.geomean * 1.15);
                    } else
                        sbuf_puts(&c.dat, " ?");
                }
            sbuf_puts(&c.dat, "\n");
        }
        s.v[RP_SUITE] = s.v[RP_WORKLOAD] = s.v[RP_PRECISION] = NULL;
        for (int w = 0; w < nw; w++) {
            bool any = false;
            for (int p = 0; p < np; p++)
                any |= has[w][p];
            panels += any;
        }
        if (!panels) {
            free(c.body.s);
            free(c.dat.s);
            continue;
        }
        sbuf_printf(&c.body, "set multiplot layout 1,%d title ", panels);
        gp(&c, "%s\n", title);
        sbuf_puts(&c.body, "set style fill solid 0.7 border -1\nset grid ytics\n"
                           "set key top left\n");
        sbuf_printf(&c.body, "set yrange [0:%.3g]\n", top);
        sbuf_printf(&c.body, "set xrange [-0.6:%d.6]\nset boxwidth %.3f\n", ns - 1,
                    0.8 / (np > 0 ? np : 1));
        gp(&c, "set ylabel %s\n", "geomean speedup over eager");
        one_line(&c);
        sbuf_puts(&c.body, "set xtics scale 0 (");
        for (int k = 0; k < ns; k++) {
            gp(&c, k ? ", %s" : "%s", suites[k]);
            sbuf_printf(&c.body, " %d", k);
        }
        sbuf_puts(&c.body, ")\n");
        for (int w = 0; w < nw; w++) {
            bool any = false;
            for (int p = 0; p < np; p++)
                any |= has[w][p];
            if (!any)
                continue;
            gp(&c, "set title %s\nplot ", workload_word(wls[w]));
            bool first = true;
            for (int p = 0; p < np; p++) {
                if (!has[w][p])
                    continue;
                int col = 2 + w * np + p;
                double off = (p - (np - 1) / 2.0) * 0.8 / np;
                sbuf_printf(&c.body, "%s'%s.dat' using ($1%+.3f):%d with boxes lc rgb '%s' title ",
                            first ? "" : ", ", stem, off, col, colors[p % 5]);
                gp(&c, "%s", precs[p]);
                sbuf_printf(&c.body,
                            ", '' using ($1%+.3f):%d:(sprintf('%%.2fx', column(%d))) with labels "
                            "offset 0,0.7 notitle",
                            off, col, col);
                first = false;
            }
            sbuf_puts(&c.body, "\n");
        }
        sbuf_puts(&c.body, "unset multiplot\n");
        if (chart_end(&c, dir, out, err, cap) < 0)
            return -1;
    }
    return 0;
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
            if (e->file != f || strcmp(e->mode, modes[m]) != 0 || !(e->intensity > 0) ||
                !(e->achieved_GFLOPs > 0))
                continue;
            if (block[m] < 0) {
                // two empty lines end a block; gnuplot counts only blocks with data
                if (nblocks)
                    sbuf_puts(&c.dat, "\n\n");
                block[m] = nblocks++;
            }
            sbuf_printf(&c.dat, "%.6g %.6g\n", e->intensity, e->achieved_GFLOPs);
            xmin = fmin(xmin, e->intensity);
            xmax = fmax(xmax, e->intensity);
            ymin = fmin(ymin, e->achieved_GFLOPs);
            npoints++;
        }
    }
    if (!npoints) {
        free(c.body.s);
        free(c.dat.s);
        return 0;
    }
    gp(&c, "set title %s\n", title);
    sbuf_puts(&c.body, "set logscale xy\nset grid\nset key bottom right\nset samples 400\n");
    gp(&c, "set xlabel %s\n", "arithmetic intensity (FLOP per byte of the fewest bytes moved)");
    gp(&c, "set ylabel %s\n", "GFLOP/s");
    sbuf_printf(&c.body, "bw = %.6g\npeak = %.6g\nroof(x) = x * bw < peak ? x * bw : peak\n",
                f->calib_GBps, f->calib_GFLOPs);
    sbuf_printf(&c.body, "set xrange [%.6g:%.6g]\nset yrange [%.6g:%.6g]\n", xmin / 4, xmax * 4,
                ymin / 4, f->calib_GFLOPs * 3);
    // names beside the points of the headline mode, while they stay readable
    int labels = 0;
    for (int i = 0; i < set->n && npoints <= 40; i++) {
        const resfile_entry *e = set->e[i];
        if (e->file != f || !set->primary || strcmp(e->mode, set->primary) != 0 ||
            !(e->intensity > 0) || !(e->achieved_GFLOPs > 0))
            continue;
        char label[512];
        rp_label(set, e, label, sizeof label);
        sbuf_printf(&c.body, "set label %d ", ++labels);
        gp(&c, "%s", label);
        sbuf_printf(&c.body, " at %.6g,%.6g offset 0.6,0 font ',8'\n", e->intensity,
                    e->achieved_GFLOPs);
    }
    sbuf_puts(&c.body, "plot roof(x) with lines lw 2 lc rgb 'black' title "
                       "'roof: min(GEMM rate, intensity x bandwidth)'");
    static const int pts[] = {7, 5, 9, 13, 11};
    for (int m = 0; m < nm; m++) {
        if (block[m] < 0)
            continue;
        sbuf_printf(&c.body, ", '%s.dat' index %d using 1:2 with points pt %d ps 1.2 title ", stem,
                    block[m], pts[m % 5]);
        gp(&c, "%s", modes[m]);
    }
    sbuf_puts(&c.body, "\n");
    return chart_end(&c, dir, out, err, cap);
}

// Speedup against batch size for the cases run at several batch sizes.
static int sweep_chart(const rp_set *set, const rp_sel *s, const char *dir, rp_charts *out,
                       char *err, size_t cap) {
    char stem[160], title[400];
    group_stem(stem, sizeof stem, "sweep", s);
    snprintf(title, sizeof title, "Speedup against batch size: %s, %s, %s, %s", s->v[RP_MODE],
             s->v[RP_PRECISION], workload_word(s->v[RP_WORKLOAD]), s->v[RP_DEVICE]);
    chart c;
    chart_init(&c, stem, title, 760, 480);
    sbuf_puts(&c.dat, "# batch speedup ci95_lo ci95_hi; one block per case (names in the .gp)\n");
    int blocks = 0;
    long long bmin = 0, bmax = 0;
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
        sbuf_printf(&c.dat, "%lld %.6g", (long long)e->batch, e->speedup);
        if (isfinite(e->ci95_lo) && isfinite(e->ci95_hi))
            sbuf_printf(&c.dat, " %.6g %.6g\n", e->ci95_lo, e->ci95_hi);
        else
            sbuf_printf(&c.dat, " %.6g %.6g\n", e->speedup, e->speedup);
        prev = e;
    }
    if (!blocks) {
        free(plot.s);
        free(c.body.s);
        free(c.dat.s);
        return 0;
    }
    gp(&c, "set title %s\n", title);
    sbuf_puts(&c.body, "set logscale x 2\nset grid\nset key bottom right\nset yrange [0:*]\n");
    // a margin on both sides, so the first and last error bars show whole
    sbuf_printf(&c.body, "set xrange [%.6g:%.6g]\n", bmin / 1.5, bmax * 1.5);
    gp(&c, "set xlabel %s\n", "batch size");
    gp(&c, "set ylabel %s\n", "speedup over eager (median; bars: 95% CI)");
    one_line(&c);
    sbuf_printf(&c.body, "plot %s\n", plot.s ? plot.s : "");
    c.body.oom |= plot.oom;
    free(plot.s);
    return chart_end(&c, dir, out, err, cap);
}

int charts_write(const rp_set *set, const char *dir, rp_charts *out, char *err, size_t cap) {
    if (set->primary && geomean_chart(set, dir, out, err, cap) < 0)
        return -1;
    const char *modes[RP_MAX_VALUES], *devs[RP_MAX_VALUES], *precs[RP_MAX_VALUES],
        *wls[RP_MAX_VALUES];
    int nm = rp_values(set, &(rp_sel){0}, RP_MODE, modes, RP_MAX_VALUES);
    typedef int (*chart_fn)(const rp_set *, const rp_sel *, const char *, rp_charts *, char *,
                            size_t);
    static const chart_fn per_group[] = {speedup_chart, compile_chart, memory_chart, sweep_chart};
    for (size_t kind = 0; kind < sizeof per_group / sizeof per_group[0]; kind++)
        for (int mi = 0; mi < nm; mi++) {
            if (!strcmp(modes[mi], "eager"))
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
                        if (per_group[kind](set, &s, dir, out, err, cap) < 0)
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
    return 0;
}
