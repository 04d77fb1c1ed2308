// The end-of-run table of `tcbench run` (runtable.h).
#include "runtable.h"

#include "results/stats.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static bool is_amp(const results_case *id) {
    return !strcmp(id->precision, bench_axis_value(BENCH_AXIS_PRECISION, BENCH_PREC_AMP));
}

static bool is_compiled(const results_case *id) {
    return strcmp(id->mode, bench_axis_value(BENCH_AXIS_MODE, BENCH_MODE_EAGER)) != 0;
}

static void print_row(FILE *out, const runtable *t, const runtable_row *row, int w, int ws) {
    const bench_result *r = row->r;
    char cell[64];
    bool good = bench_status_good(r->status);
    fprintf(out, "%-*s %-9s %s%-*s%s", w, row->label, row->id->mode, good ? t->green : t->red, ws,
            bench_status_name(r->status), t->reset);
    if (r->stats.n > 0)
        fprintf(out, " %10.4f", r->stats.median * 1e3);
    else
        fprintf(out, " %10s", "-");
    // the noise, ~ marking an unstable entry (its reasons are under the table)
    if (r->stab.rounds > 0 && isfinite(r->stab.noise))
        snprintf(cell, sizeof cell, "%s%.1f%%", r->stab.unstable ? "~" : "", 100 * r->stab.noise);
    else
        snprintf(cell, sizeof cell, "%s", r->stab.unstable ? "~" : "-");
    fprintf(out, " %7s", cell);
    const bench_speedup *sp = &r->speedup;
    if (isfinite(sp->median))
        snprintf(cell, sizeof cell, "%.2fx [%.2f, %.2f]", sp->median, sp->ci95_lo, sp->ci95_hi);
    else
        snprintf(cell, sizeof cell, "-");
    fprintf(out, " %-21s", cell);
    if (r->compile.done && isfinite(r->compile.warm_s))
        snprintf(cell, sizeof cell, "%.2f/%.2f", r->compile.cold_s, r->compile.warm_s);
    else if (r->compile.done) // cuda: one compile, no kernel cache to be warm against
        snprintf(cell, sizeof cell, "%.2f/-", r->compile.cold_s);
    else
        snprintf(cell, sizeof cell, "-");
    fprintf(out, " %11s", cell);
    // mixed precision: kernels/casts, the casts that run as kernels of their own
    if (is_amp(row->id))
        snprintf(cell, sizeof cell, "%lld/%lld", (long long)r->kernels, (long long)r->cast_kernels);
    else
        snprintf(cell, sizeof cell, "%lld", (long long)r->kernels);
    if (r->stats.n > 0)
        fprintf(out, " %8s %9.2f", cell, (double)r->peak_bytes / (1024.0 * 1024.0));
    else
        fprintf(out, " %8s %9s", "-", "-");
    if (isfinite(r->compression_ratio))
        fprintf(out, " %10.2fx", r->compression_ratio);
    else
        fprintf(out, " %11s", "-");
    // a compiled-family entry can be checked against eager alone (reason says why)
    bool fp64 = r->acc.checked && !r->acc.reason[0];
    if (fp64 && isfinite(r->acc.rel_l2))
        fprintf(out, " %9.1e\n", r->acc.rel_l2);
    else
        fprintf(out, " %9s\n", fp64 ? "nan/inf" : "-");
}

// Whether entries a and b fall in the same summary line.
static bool same_line(const results_case *a, const results_case *b) {
    return !strcmp(a->mode, b->mode) && !strcmp(a->precision, b->precision) &&
           !strcmp(a->workload, b->workload) && !strcmp(a->device, b->device);
}

// One line per compiled-family mode x precision x workload (x device), in
// the order they first ran.
void runtable_summary(FILE *out, const runtable *t) {
    for (int i = 0; i < t->n; i++) {
        const results_case *ti = t->rows[i].id;
        bool first = is_compiled(ti);
        for (int j = 0; j < i && first; j++)
            first = !same_line(t->rows[j].id, ti);
        if (!first)
            continue;
        int n = 0, pass = 0, unstable = 0;
        bench_geomean g = {0};
        for (int j = i; j < t->n; j++) {
            const bench_result *r = t->rows[j].r;
            if (!same_line(t->rows[j].id, ti))
                continue;
            n++;
            if (r->status != BENCH_PASS)
                continue;
            pass++;
            if (r->stab.unstable)
                unstable++;
            else if (isfinite(r->speedup.median) && r->speedup.median > 0)
                bench_geomean_add(&g, r->speedup.median);
        }
        fprintf(out, "%s %s %s%s%s: pass rate %d/%d (%.0f%%), geomean speedup ", ti->mode,
                ti->precision, ti->workload, t->by_device ? " " : "",
                t->by_device ? ti->device : "", pass, n, n ? 100.0 * pass / n : 0.0);
        if (g.n)
            fprintf(out, "%.2fx over %d passing case%s", bench_geomean_value(&g), g.n,
                    g.n == 1 ? "" : "s");
        else
            fprintf(out, "- (%s)", pass ? "every passing case unstable" : "none passed");
        if (unstable)
            fprintf(out, " (%d unstable left out)", unstable);
        fprintf(out, "\n");
    }
}

// Every unstable entry by name, with its reasons.
static void print_unstable(FILE *out, const runtable *t) {
    char why[BENCH_MAX_REASONS * 100];
    for (int i = 0; i < t->n; i++) {
        const bench_result *r = t->rows[i].r;
        if (!r->stab.unstable)
            continue;
        why[0] = '\0';
        for (int k = 0; k < r->stab.nreasons; k++)
            snprintf(why + strlen(why), sizeof why - strlen(why), "%s%s", k ? "; " : "",
                     r->stab.reasons[k]);
        fprintf(out, "warning: %s: unstable%s: %s\n", t->rows[i].long_label,
                r->status == BENCH_PASS ? ", left out of the geomean" : "", why);
    }
}

void runtable_print(FILE *out, const runtable *t) {
    int w = 4, ws = 13; // the status column widens for model_fail_to_load
    for (int i = 0; i < t->n; i++) {
        if ((int)strlen(t->rows[i].label) > w)
            w = (int)strlen(t->rows[i].label);
        if ((int)strlen(bench_status_name(t->rows[i].r->status)) > ws)
            ws = (int)strlen(bench_status_name(t->rows[i].r->status));
    }
    fprintf(out, "%-*s %-9s %-*s %10s %7s %-21s %11s %8s %9s %11s %9s\n", w, "case", "mode", ws,
            "status", "median ms", "noise", "speedup [95% CI]", "compile s", "kernels", "peak MiB",
            "compression", "rel-err");
    bool amp = false, unstable = false;
    for (int i = 0; i < t->n; i++) {
        print_row(out, t, &t->rows[i], w, ws);
        amp |= is_amp(t->rows[i].id);
        unstable |= t->rows[i].r->stab.unstable;
    }
    if (amp)
        fprintf(out, "(amp rows: kernels/casts, casts = the kernels that do nothing but cast)\n");
    if (unstable)
        fprintf(out, "(~: unstable, left out of the geomeans; the reasons are below)\n");
    runtable_summary(out, t);
    for (int i = 0; i < t->n; i++) {
        const bench_result *r = t->rows[i].r;
        if (!bench_status_good(r->status))
            fprintf(out, "%s: %s: %s\n", t->rows[i].long_label, bench_status_name(r->status),
                    r->message);
    }
    print_unstable(out, t);
    if (t->output)
        fprintf(out, "total wall time %.1f s; results: %s\n", t->wall_s, t->output);
}
