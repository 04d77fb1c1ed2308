// Side by side with PyTorch (report_int.h): another harness's entries
// (torch-eager, torch-compile: scripts/torch_side_by_side.py, docs/torch.md)
// beside tcbench's eager and compiled, as a section of summary.md, a column
// of results.csv and two charts per suite x precision x workload x device.
// The summary and the charts cover the groups that hold such entries only,
// so a report of tcbench's files alone is what it was.
//
// An entry's peer is the other harness's entry of the same case, precision,
// workload, device and batch that does the same thing (bench_mode_peer).
// The time ratios divide tcbench's median step by its peer's: below 1,
// tcbench is faster.
#include "charts_internal.h"

#include "results/stats.h"

#include <jansson.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

// e's entry of another mode (same case, precision, workload, device, batch), or NULL.
static const resfile_entry *with_mode(const rp_set *set, const resfile_entry *e, const char *mode) {
    if (!mode)
        return NULL;
    resfile_entry key = *e;
    key.mode = mode;
    return resfile_index_find(&set->ids, &key);
}

const resfile_entry *rp_peer_of(const rp_set *set, const resfile_entry *e) {
    return with_mode(set, e, bench_mode_peer(e->mode));
}

static bool timed_good(const resfile_entry *e, bool stable) {
    return e->good && e->stats.n > 0 && e->stats.median > 0 && !(stable && e->unstable);
}

double rp_peer_ratio(const rp_set *set, const resfile_entry *e, bool stable) {
    const resfile_entry *p = bench_mode_foreign(e->mode) ? NULL : rp_peer_of(set, e);
    if (!p || !timed_good(e, stable) || !timed_good(p, stable))
        return NAN;
    return e->stats.median / p->stats.median;
}

// The groups: runs of the sorted set (device, precision, workload, suite)
// that hold another harness's entries; fn gets the group and its run
// [lo, hi) of set->e.
typedef int (*side_group_fn)(const rp_set *set, const rp_sel *g, int lo, int hi, void *ctx);

static int side_groups(const rp_set *set, side_group_fn fn, void *ctx) {
    static const enum rp_field by[] = {RP_SUITE, RP_PRECISION, RP_WORKLOAD, RP_DEVICE};
    for (int i = 0, j; i < set->n; i = j) {
        rp_sel g = {0};
        for (size_t k = 0; k < sizeof by / sizeof by[0]; k++)
            g.v[by[k]] = rp_get(set->e[i], by[k]);
        bool foreign = false;
        for (j = i; j < set->n && rp_match(set->e[j], &g); j++)
            foreign |= bench_mode_foreign(set->e[j]->mode);
        if (foreign && fn(set, &g, i, j, ctx) < 0)
            return -1;
    }
    return 0;
}

// --- summary.md --------------------------------------------------------------

// The figures of one group.
typedef struct side_agg {
    rp_agg ours, theirs;           // compiled over eager; torch-compile over torch-eager
    bench_geomean eager, compiled; // time ratios to the peer, stable pairs at the suite's batch
    double compile[2];             // summed cold compile of compiled and of torch-compile,
    int ncompile;                  // over the models where both passed and compiled
} side_agg;

static void side_compute(const rp_set *set, const rp_sel *g, int lo, int hi, side_agg *a) {
    memset(a, 0, sizeof *a);
    rp_sel s = *g;
    s.v[RP_MODE] = "compiled";
    rp_agg_compute(set, &s, &a->ours);
    s.v[RP_MODE] = "torch-compile";
    rp_agg_compute(set, &s, &a->theirs);
    for (int i = lo; i < hi; i++) {
        const resfile_entry *e = set->e[i], *p;
        bool compiled = !strcmp(e->mode, "compiled");
        if (!set->at_batch[i] || (!compiled && strcmp(e->mode, "eager")))
            continue;
        double r = rp_peer_ratio(set, e, true);
        if (isfinite(r))
            bench_geomean_add(compiled ? &a->compiled : &a->eager, r);
        if (compiled && (p = rp_peer_of(set, e)) && !strcmp(e->status, "pass") &&
            !strcmp(p->status, "pass") && isfinite(e->x->compile_cold_s) &&
            isfinite(p->x->compile_cold_s)) {
            a->compile[0] += e->x->compile_cold_s;
            a->compile[1] += p->x->compile_cold_s;
            a->ncompile++;
        }
    }
}

// "2.00x (3 models)", or blank when no model counts.
static void counted_cell(rdoc *d, const char *fmt, double v, int n) {
    char num[32];
    rp_fmt(num, sizeof num, fmt, n ? v : NAN);
    if (*num)
        rdoc_cell(d, "%s (%d model%s)", num, n, n == 1 ? "" : "s");
    else
        rdoc_cell(d, "%s", "");
}

static int side_row(const rp_set *set, const rp_sel *g, int lo, int hi, void *ctx) {
    rdoc *d = ctx;
    side_agg a;
    side_compute(set, g, lo, hi, &a);
    rdoc_cell(d, "%s: %s, %s, %s", g->v[RP_SUITE], g->v[RP_PRECISION],
              chart_workload(g->v[RP_WORKLOAD]), g->v[RP_DEVICE]);
    counted_cell(d, "%.2fx", a.ours.geomean, a.ours.ngeo);
    counted_cell(d, "%.2fx", a.theirs.geomean, a.theirs.ngeo);
    counted_cell(d, "%.2fx", bench_geomean_value(&a.eager), a.eager.n);
    counted_cell(d, "%.2fx", bench_geomean_value(&a.compiled), a.compiled.n);
    for (int k = 0; k < 2; k++)
        counted_cell(d, "%.2f", a.ncompile ? a.compile[k] / a.ncompile : NAN, a.ncompile);
    return 0;
}

// A file's amp low dtype: config.amp_dtype, "fp16" in files from before
// --amp-dtype (they ran fp16).
static const char *file_amp(const resfile *f) {
    const char *amp =
        json_string_value(json_object_get(json_object_get(f->root, "config"), "amp_dtype"));
    return amp ? amp : "fp16";
}

// A line per PyTorch file (its version, torch.compile's mode, amp's dtype),
// and a warning when the files ran amp in different low dtypes (PyTorch's
// f16 and tcbench's bf16 are not the same arithmetic).
static void side_files(const rp_set *set, rdoc *d) {
    const char *amp0 = NULL;
    bool amp_differs = false;
    for (int k = 0; k < set->nfiles; k++) {
        json_t *root = set->files[k]->root, *cfg = json_object_get(root, "config");
        const char *mode = json_string_value(json_object_get(cfg, "torch_compile_mode"));
        const char *amp = file_amp(set->files[k]);
        const char *version = json_string_value(
            json_object_get(json_object_get(json_object_get(root, "host"), "torch"), "version"));
        amp_differs |= amp0 && strcmp(amp0, amp) != 0;
        amp0 = amp0 ? amp0 : amp;
        if (version) // PyTorch's file; one written before the mode was recorded ran the default
            rdoc_para(d, "%s: PyTorch %s, torch.compile mode %s, amp as %s.", set->files[k]->path,
                      version, mode ? mode : "default", amp);
    }
    if (!amp_differs)
        return;
    char list[2048] = "";
    size_t n = 0;
    for (int k = 0; k < set->nfiles && n < sizeof list; k++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%s %s", k ? ", " : "",
                              set->files[k]->path, file_amp(set->files[k]));
    rdoc_para(d,
              "Warning: the files ran amp in different low dtypes (%s), so their amp rows "
              "compare different arithmetic.",
              list);
}

void side_summary(const rp_set *set, rdoc *d) {
    rdoc_heading(d, 2, "Side by side with PyTorch");
    rdoc_para(d, "PyTorch's entries (torch-eager: PyTorch eager; torch-compile: torch.compile; "
                 "scripts/torch_side_by_side.py, docs/torch.md) beside tcbench's. The speedups are "
                 "the executive summary's geomeans: tcbench compiled over tcbench eager, and "
                 "torch.compile over PyTorch eager, each over its own stable entries that passed. "
                 "The time ratios are geomeans over the models both sides ran (ok or pass, stable, "
                 "at the suite's batch) of tcbench's median step / PyTorch's: lower is better for "
                 "tcbench, 0.50x is twice as fast as PyTorch. Compile is the mean cold compile "
                 "(tcbench: an empty kernel cache; torch.compile: its first call, one step "
                 "included) over the models where both compiled modes passed. Each cell names "
                 "the models it covers. In the other tables torch-compile's speedup, break-even "
                 "and warnings are against torch-eager.");
    side_files(set, d);
    rdoc_table(d, 7, "suite: precision, workload, device", "tcbench compiled / eager (speedup)",
               "torch.compile / PyTorch eager (speedup)",
               "tcbench eager / PyTorch eager (time; lower is better)",
               "tcbench compiled / torch.compile (time; lower is better)",
               "compile s: tcbench cold", "compile s: torch.compile first call");
    side_groups(set, side_row, d);
}

// --- charts ------------------------------------------------------------------

// One chart: per model of a group, a bar of each side.
typedef struct side_chart {
    const char *kind, *what, *ylabel, *series[2];
    double (*value)(const rp_set *set, const resfile_entry *e, int side);
} side_chart;

// tcbench compiled's speedup over eager (side 0), torch.compile's over PyTorch eager (1).
static double speedup_of(const rp_set *set, const resfile_entry *e, int side) {
    const resfile_entry *x = with_mode(set, e, side ? "torch-compile" : "compiled");
    return x && x->good ? x->speedup : NAN;
}

// tcbench eager's time over PyTorch eager's (side 0), compiled's over torch.compile's (1).
static double ratio_of(const rp_set *set, const resfile_entry *e, int side) {
    const resfile_entry *x = with_mode(set, e, side ? "compiled" : "eager");
    return x ? rp_peer_ratio(set, x, false) : NAN;
}

static const side_chart side_kinds[] = {
    {"torch-speedup",
     "Speedup per model beside PyTorch's",
     "speedup (median; over its own eager)",
     {"tcbench compiled / tcbench eager", "torch.compile / PyTorch eager"},
     speedup_of},
    {"torch-time",
     "Step time against PyTorch per model (lower: tcbench faster)",
     "tcbench median step / PyTorch's",
     {"tcbench eager / PyTorch eager", "tcbench compiled / torch.compile"},
     ratio_of},
};

// The .dat rows (index, side 0, side 1) and the x tics of the models of
// [lo, hi) at the suite's batch with a figure; returns how many, the
// largest figure in *top, and which sides have one in has.
static int side_rows(const rp_set *set, const side_chart *k, int lo, int hi, chart *c, double *top,
                     bool has[2]) {
    int n = 0, last = -1;
    sbuf_printf(&c->dat, "# index, %s, %s (names in the .gp)\n", k->series[0], k->series[1]);
    sbuf_puts(&c->body, "set xtics rotate by 45 right scale 0 (");
    for (int i = lo; i < hi; i++) {
        const resfile_entry *e = set->e[i];
        if (!set->at_batch[i] || set->case_start[i] == last)
            continue; // one row per case, at its suite batch
        last = set->case_start[i];
        double v[2] = {k->value(set, e, 0), k->value(set, e, 1)};
        if (!isfinite(v[0]) && !isfinite(v[1]))
            continue;
        sbuf_printf(&c->dat, "%d", n);
        for (int s = 0; s < 2; s++)
            if (isfinite(v[s])) {
                sbuf_printf(&c->dat, " %.6g", v[s]);
                *top = fmax(*top, v[s]);
                has[s] = true;
            } else
                sbuf_puts(&c->dat, " ?");
        sbuf_puts(&c->dat, "\n");
        char label[512];
        rp_label(set, e, label, sizeof label);
        chart_gp(c, n ? ", %s" : "%s", label);
        sbuf_printf(&c->body, " %d", n++);
    }
    sbuf_puts(&c->body, ")\n");
    return n;
}

static int side_chart_write(const rp_set *set, const rp_sel *g, int lo, int hi, const side_chart *k,
                            const char *dir, rp_charts *out, char *err, size_t cap) {
    char kind[200], stem[160], title[400];
    esc_filename(stem, sizeof stem, g->v[RP_SUITE]);
    snprintf(kind, sizeof kind, "%s-%s", k->kind, stem);
    chart_group_stem(stem, sizeof stem, kind, g);
    snprintf(title, sizeof title, "%s: %s, %s, %s, %s", k->what, g->v[RP_SUITE], g->v[RP_PRECISION],
             chart_workload(g->v[RP_WORKLOAD]), g->v[RP_DEVICE]);
    chart c;
    chart_init(&c, stem, title, 760, 520);
    double top = 1; // the line at 1 stays in view
    bool has[2] = {false, false};
    int n = side_rows(set, k, lo, hi, &c, &top, has);
    if (!n)
        return chart_drop(&c);
    int w = n * 48 + 160;
    c.w = w < 760 ? 760 : w > 2400 ? 2400 : w;
    chart_gp(&c, "set title %s\n", title);
    sbuf_puts(&c.body, "set style fill solid 0.7 border -1\nset grid ytics\n"
                       "set key outside top center horizontal samplen 2\n");
    sbuf_printf(&c.body, "set xrange [-0.6:%d.4]\nset yrange [0:%.6g]\nset boxwidth 0.38\n", n - 1,
                top * 1.15);
    chart_gp(&c, "set ylabel %s\n", k->ylabel);
    chart_one_line(&c);
    static const char *const colors[] = {"#4477aa", "#ee6677"};
    sbuf_puts(&c.body, "plot ");
    for (int s = 0; s < 2; s++) {
        if (!has[s])
            continue; // gnuplot warns of a column with no point
        double off = s ? 0.2 : -0.2;
        sbuf_printf(&c.body, "%s'%s.dat' using ($1%+.2f):%d with boxes lc rgb '%s' title ",
                    s && has[0] ? ", " : "", c.stem, off, 2 + s, colors[s]);
        chart_gp(&c, "%s", k->series[s]);
        sbuf_printf(&c.body,
                    ", '' using ($1%+.2f):%d:(sprintf('%%.2fx', column(%d))) with labels "
                    "offset 0,0.7 font ',8' notitle",
                    off, 2 + s, 2 + s);
    }
    sbuf_puts(&c.body, "\n");
    return chart_end(&c, dir, out, err, cap);
}

typedef struct side_out {
    const char *dir;
    rp_charts *out;
    char *err;
    size_t cap;
} side_out;

static int side_group_charts(const rp_set *set, const rp_sel *g, int lo, int hi, void *ctx) {
    const side_out *o = ctx;
    for (size_t k = 0; k < sizeof side_kinds / sizeof side_kinds[0]; k++)
        if (side_chart_write(set, g, lo, hi, &side_kinds[k], o->dir, o->out, o->err, o->cap) < 0)
            return -1;
    return 0;
}

int side_charts(const rp_set *set, const char *dir, rp_charts *out, char *err, size_t cap) {
    side_out o = {dir, out, err, cap};
    return side_groups(set, side_group_charts, &o);
}
