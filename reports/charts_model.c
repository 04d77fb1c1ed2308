// The per-model bar charts of one group (charts_int.h): speedup, compile
// time, compile break-even and memory compression, one bar per
// compiled-family entry, sorted by the figure.
//
// Nothing is dropped: an entry without the figure (failed, not measured,
// a break-even of "never") keeps an empty slot at the right, labelled with
// why; an unstable entry is a grey hatched bar, a failed one with a figure a
// red hatched bar, a sweep's batch that does not count a pale bar. The
// speedup axis is clipped at 1.5 x the largest median, so that one wide
// interval cannot flatten every other bar: a clipped interval ends in a
// triangle at the top, labelled with where it really ends.
#include "charts_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// How a bar is drawn. timing: the figure comes from the timed samples, so
// an unstable entry is marked (compile time and memory are not timed).
enum { CLS_OK, CLS_UNSTABLE, CLS_FAILED, CLS_OTHER_BATCH, CLS_COUNT };

typedef struct slot {
    const resfile_entry *e;
    double v;        // the bar; NAN: an empty slot
    int cls;         // CLS_*
    const char *why; // an empty slot's label
} slot;

typedef struct bars {
    const rp_set *set;
    slot *s;
    int n, nvalued;
    bool timing;
} bars;

static int slot_cmp(const void *pa, const void *pb) {
    const slot *a = pa, *b = pb;
    bool va = isfinite(a->v), vb = isfinite(b->v);
    if (va != vb)
        return va ? -1 : 1; // empty slots last
    return va ? (a->v > b->v) - (a->v < b->v) : 0;
}

typedef double (*key_fn)(const rp_set *set, const resfile_entry *e, const char **why);

// The compiled-family entries of group s, with key's figure, sorted; *n == 0: none.
static int bars_collect(const rp_set *set, const rp_sel *s, key_fn key, bool timing, bars *b,
                        char *err, size_t cap) {
    memset(b, 0, sizeof *b);
    b->set = set;
    b->timing = timing;
    b->s = malloc(((size_t)set->n + 1) * sizeof *b->s);
    if (!b->s) {
        snprintf(err, cap, "malloc: out of memory for a chart");
        return -1;
    }
    for (int i = 0; i < set->n; i++) {
        const resfile_entry *e = set->e[i];
        if (!e->compiled || !rp_match(e, s))
            continue;
        slot *x = &b->s[b->n++];
        x->e = e;
        x->why = e->good ? "no data" : e->status;
        x->v = key(set, e, &x->why);
        x->cls = !e->good                ? CLS_FAILED
                 : timing && e->unstable ? CLS_UNSTABLE
                 : !set->at_batch[i]     ? CLS_OTHER_BATCH
                                         : CLS_OK;
        b->nvalued += isfinite(x->v);
    }
    qsort(b->s, (size_t)b->n, sizeof *b->s, slot_cmp);
    return 0;
}

// The title, x tics (one escaped label per slot) and the empty slots' labels.
static void bars_begin(bars *b, chart *c, const rp_sel *s, const char *kind, const char *what,
                       const char *ylabel) {
    char stem[160], title[400];
    chart_group_stem(stem, sizeof stem, kind, s);
    snprintf(title, sizeof title, "%s: %s, %s, %s, %s (%d of %d entries have one)", what,
             s->v[RP_MODE], s->v[RP_PRECISION], chart_workload(s->v[RP_WORKLOAD]), s->v[RP_DEVICE],
             b->nvalued, b->n);
    int w = b->n * 26 + 160;
    chart_init(c, stem, title, w < 760 ? 760 : w > 2400 ? 2400 : w, 520);
    chart_gp(c, "set title %s\n", title);
    // the key between the title and the plot, where no bar or label can hide it
    sbuf_puts(&c->body, "set style fill solid 0.7 border -1\nset grid ytics\n"
                        "set key outside top center horizontal samplen 2 maxrows 2\n"
                        "set style textbox opaque noborder\n");
    sbuf_printf(&c->body, "set xrange [-0.6:%d.4]\n", b->n - 1);
    chart_gp(c, "set ylabel %s\n", ylabel);
    sbuf_puts(&c->body, "set xtics rotate by 45 right scale 0 (");
    for (int i = 0; i < b->n; i++) {
        char label[512];
        rp_label(b->set, b->s[i].e, label, sizeof label);
        chart_gp(c, i ? ", %s" : "%s", label);
        sbuf_printf(&c->body, " %d", i);
    }
    sbuf_puts(&c->body, ")\n");
    for (int i = 0; i < b->n; i++) {
        if (isfinite(b->s[i].v))
            continue;
        sbuf_printf(&c->body, "set label %d ", 100 + i);
        chart_gp(c, "%s", b->s[i].why);
        sbuf_printf(&c->body, " at first %d, graph 0.02 rotate by 90 left font ',8' tc rgb '%s'\n",
                    i, strcmp(b->s[i].why, "never") ? "#aa3333" : "#444444");
    }
}

// The class columns of one slot's .dat row: its value under its class, '?' elsewhere.
static void bars_row(chart *c, const slot *x) {
    for (int k = 0; k < CLS_COUNT; k++) {
        if (isfinite(x->v) && x->cls == k)
            sbuf_printf(&c->dat, " %.6g", x->v);
        else
            sbuf_puts(&c->dat, " ?");
    }
}

// Plots the classes present, first column col; width: the boxes' width, off: their shift.
static void bars_plot(bars *b, chart *c, int col, const char *color, const char *ok_title,
                      double off, bool *first) {
    bool has[CLS_COUNT] = {false};
    for (int i = 0; i < b->n; i++)
        has[b->s[i].cls] |= isfinite(b->s[i].v);
    static const char *const style[CLS_COUNT] = {
        "fs solid 0.7 border -1",
        "fs pattern 4 border -1 lc rgb 'gray40'",
        "fs pattern 2 border -1 lc rgb '#aa3333'",
        "fs solid 0.25 border -1",
    };
    static const char *const titles[CLS_COUNT] = {
        NULL,
        "unstable (not in the geomeans)",
        "did not pass",
        "other batch of a sweep (not counted)",
    };
    for (int k = 0; k < CLS_COUNT; k++) {
        if (!has[k])
            continue;
        sbuf_printf(&c->body, "%s'%s.dat' using ($1%+.2f):%d with boxes %s", *first ? "" : ", ",
                    c->stem, off, col + k, style[k]);
        if (k == CLS_OK || k == CLS_OTHER_BATCH)
            sbuf_printf(&c->body, " lc rgb '%s'", color);
        chart_gp(c, " title %s", titles[k] ? titles[k] : ok_title);
        *first = false;
    }
}

static double key_speedup(const rp_set *set, const resfile_entry *e, const char **why) {
    (void)set;
    if (e->good && !isfinite(e->speedup))
        *why = "no speedup";
    return e->speedup;
}

static double key_compile(const rp_set *set, const resfile_entry *e, const char **why) {
    (void)set;
    if (e->good && !isfinite(e->x->compile_cold_s))
        *why = "not compiled";
    return e->x->compile_cold_s > 0 ? e->x->compile_cold_s : NAN;
}

static double key_breakeven(const rp_set *set, const resfile_entry *e, const char **why) {
    double steps = rp_breakeven(set, e);
    if (isinf(steps))
        *why = "never";
    return isfinite(steps) ? fmax(steps, 1) : NAN;
}

static double key_compression(const rp_set *set, const resfile_entry *e, const char **why) {
    (void)set;
    (void)why;
    return e->compression_ratio;
}

// Where the speedup axis ends: 1.5 x the largest stable median at most, so
// that neither one wide interval nor one unstable figure sets the scale.
static double speedup_top(const bars *b) {
    double med = 0, any = 0, hi = 0;
    for (int i = 0; i < b->n; i++) {
        const resfile_entry *e = b->s[i].e;
        if (!isfinite(b->s[i].v))
            continue;
        any = fmax(any, b->s[i].v);
        if (b->s[i].cls != CLS_UNSTABLE)
            med = fmax(med, b->s[i].v);
        hi = fmax(hi, isfinite(e->x->ci95_hi) ? e->x->ci95_hi : b->s[i].v);
    }
    med = med > 0 ? med : any;
    double top = fmin(fmax(hi, any) * 1.05, 1.5 * med);
    return fmax(fmax(top, med * 1.1), 1.1);
}

int chart_speedup(const rp_set *set, const rp_sel *s, const char *dir, rp_charts *out, char *err,
                  size_t cap) {
    bars b;
    if (bars_collect(set, s, key_speedup, true, &b, err, cap) < 0)
        return -1;
    if (b.nvalued == 0) {
        free(b.s);
        return 0;
    }
    chart c;
    bars_begin(&b, &c, s, "speedup", "Speedup over eager per model",
               "speedup over eager (median; bars: 95% CI)");
    double top = speedup_top(&b);
    bool ci = false, clipped = false;
    sbuf_puts(&c.dat, "# index speedup ci95_lo ci95_hi (clipped to the axis) clipped_at, then "
                      "the speedup per class: ok unstable failed other_batch (names in the .gp)\n");
    for (int i = 0; i < b.n; i++) {
        slot *x = &b.s[i];
        bool has = isfinite(x->v) && isfinite(x->e->x->ci95_lo) && isfinite(x->e->x->ci95_hi);
        bool clip = isfinite(x->v) && (x->v > top || (has && x->e->x->ci95_hi > top));
        ci |= has;
        clipped |= clip;
        sbuf_printf(&c.dat, "%d", i);
        if (isfinite(x->v))
            sbuf_printf(&c.dat, " %.6g", fmin(x->v, top));
        else
            sbuf_puts(&c.dat, " ?");
        if (has)
            sbuf_printf(&c.dat, " %.6g %.6g", fmin(x->e->x->ci95_lo, top),
                        fmin(x->e->x->ci95_hi, top));
        else
            sbuf_puts(&c.dat, " ? ?");
        if (clip) {
            sbuf_printf(&c.dat, " %.6g", top);
            char to[64];
            if (x->v > top && has)
                snprintf(to, sizeof to, "%.3gx [%.3g, %.3g]", x->v, x->e->x->ci95_lo,
                         x->e->x->ci95_hi);
            else if (x->v > top)
                snprintf(to, sizeof to, "%.3gx", x->v);
            else
                snprintf(to, sizeof to, "CI to %.3g", x->e->x->ci95_hi);
            sbuf_printf(&c.body, "set label %d ", 1000 + i);
            chart_gp(&c, "%s", to);
            sbuf_printf(&c.body,
                        " at first %d, first %.6g center offset 0,-1.3 boxed front "
                        "font ',8'\n",
                        i, top);
        } else
            sbuf_puts(&c.dat, " ?");
        double v = x->v;
        x->v = fmin(v, top); // the bar stops at the axis; its label gives the figure
        bars_row(&c, x);
        x->v = v;
        sbuf_puts(&c.dat, "\n");
    }
    sbuf_printf(&c.body, "set boxwidth 0.7\nset yrange [0:%.6g]\n", top);
    chart_one_line(&c);
    sbuf_puts(&c.body, "plot ");
    bool first = true;
    bars_plot(&b, &c, 6, "#4477aa", "speedup", 0, &first);
    if (ci)
        sbuf_puts(&c.body,
                  ", '' using 1:2:3:4 with yerrorbars lc rgb 'black' pt 7 ps 0.3 title '95% CI'");
    if (clipped)
        sbuf_puts(&c.body, ", '' using 1:5 with points pt 9 ps 1.3 lc rgb 'black' "
                           "title 'clipped (label: the figure)'");
    sbuf_puts(&c.body, "\n");
    free(b.s);
    return chart_end(&c, dir, out, err, cap);
}

int chart_compile(const rp_set *set, const rp_sel *s, const char *dir, rp_charts *out, char *err,
                  size_t cap) {
    bars b;
    if (bars_collect(set, s, key_compile, false, &b, err, cap) < 0)
        return -1;
    if (b.nvalued == 0) {
        free(b.s);
        return 0;
    }
    chart c;
    bars_begin(&b, &c, s, "compile", "Compile time per model", "seconds");
    double lo = INFINITY, hi = 0;
    bool warm = false;
    sbuf_puts(&c.dat, "# index warm_s, then cold_s per class: ok unstable failed other_batch "
                      "(sorted by cold compile time)\n");
    for (int i = 0; i < b.n; i++) {
        const slot *x = &b.s[i];
        double w = x->e->x->compile_warm_s;
        sbuf_printf(&c.dat, "%d", i);
        if (isfinite(w) && w > 0) {
            sbuf_printf(&c.dat, " %.6g", w);
            lo = fmin(lo, w);
            hi = fmax(hi, w);
            warm = true;
        } else
            sbuf_puts(&c.dat, " ?");
        if (isfinite(x->v)) {
            lo = fmin(lo, x->v);
            hi = fmax(hi, x->v);
        }
        bars_row(&c, x);
        sbuf_puts(&c.dat, "\n");
    }
    // cold compiles take seconds, cache hits milliseconds: a log axis shows both
    sbuf_puts(&c.body, hi > 100 * lo ? "set logscale y\n" : "set yrange [0:*]\n");
    sbuf_puts(&c.body, "set boxwidth 0.38\nplot ");
    bool first = true;
    bars_plot(&b, &c, 3, "#cc6677", "cold (empty kernel cache)", -0.2, &first);
    if (warm)
        sbuf_puts(&c.body,
                  ", '' using ($1+0.2):2 with boxes lc rgb '#88ccee' title 'warm (cache hit)'");
    sbuf_puts(&c.body, "\n");
    free(b.s);
    return chart_end(&c, dir, out, err, cap);
}

int chart_breakeven(const rp_set *set, const rp_sel *s, const char *dir, rp_charts *out, char *err,
                    size_t cap) {
    bars b;
    if (bars_collect(set, s, key_breakeven, true, &b, err, cap) < 0)
        return -1;
    bool any = false; // a "never" is worth a chart too: it is the finding
    for (int i = 0; i < b.n; i++)
        any |= isfinite(b.s[i].v) || !strcmp(b.s[i].why, "never");
    if (!any) {
        free(b.s);
        return 0;
    }
    chart c;
    bars_begin(&b, &c, s, "breakeven",
               "Compile break-even: steps until the cold compile is paid back",
               "steps (cold compile s / (eager step - this step))");
    double lo = INFINITY, hi = 0;
    sbuf_puts(&c.dat, "# index, then the steps per class: ok unstable failed other_batch "
                      "(sorted; never and unknown: empty slots, labelled in the .gp)\n");
    for (int i = 0; i < b.n; i++) {
        if (isfinite(b.s[i].v)) {
            lo = fmin(lo, b.s[i].v);
            hi = fmax(hi, b.s[i].v);
        }
        sbuf_printf(&c.dat, "%d", i);
        bars_row(&c, &b.s[i]);
        sbuf_puts(&c.dat, "\n");
    }
    // steps span decades (a model that gains 1% needs 100x the steps of one that gains 2x)
    if (isfinite(lo) && hi > 20 * lo)
        sbuf_printf(&c.body, "set logscale y\nset yrange [%.6g:%.6g]\n", lo / 2, hi * 2);
    else
        sbuf_printf(&c.body, "set yrange [0:%.6g]\n", isfinite(lo) ? hi * 1.15 : 1.0);
    sbuf_puts(&c.body, "set boxwidth 0.7\nplot ");
    bool first = true;
    bars_plot(&b, &c, 2, "#aa7733", "steps to break even", 0, &first);
    if (first) // every slot is a "never": an empty frame with its labels
        sbuf_puts(&c.body, "-1 notitle");
    sbuf_puts(&c.body, "\n");
    free(b.s);
    return chart_end(&c, dir, out, err, cap);
}

int chart_memory(const rp_set *set, const rp_sel *s, const char *dir, rp_charts *out, char *err,
                 size_t cap) {
    bars b;
    if (bars_collect(set, s, key_compression, false, &b, err, cap) < 0)
        return -1;
    if (b.nvalued == 0) {
        free(b.s);
        return 0;
    }
    chart c;
    bars_begin(&b, &c, s, "memory", "Peak memory compression (eager peak / this peak)",
               "compression ratio (above 1: less memory than eager)");
    sbuf_puts(&c.dat, "# index, then the compression ratio per class: ok unstable failed "
                      "other_batch (sorted)\n");
    for (int i = 0; i < b.n; i++) {
        sbuf_printf(&c.dat, "%d", i);
        bars_row(&c, &b.s[i]);
        sbuf_puts(&c.dat, "\n");
    }
    sbuf_puts(&c.body, "set boxwidth 0.7\nset yrange [0:*]\n");
    chart_one_line(&c);
    sbuf_puts(&c.body, "plot ");
    bool first = true;
    bars_plot(&b, &c, 2, "#117733", "compression", 0, &first);
    sbuf_puts(&c.body, "\n");
    free(b.s);
    return chart_end(&c, dir, out, err, cap);
}
