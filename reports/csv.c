// results.csv: one row per entry, PyTorch's column names first (report_int.h).
#include "report_internal.h"

#include "escape.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// PyTorch's benchmarks/dynamo CSV columns (and units: latency in ms,
// compile in s, memory in GB), then ours. docs/reports.md describes each.
static const char *const columns[] = {
    "dev",
    "name",
    "batch_size",
    "speedup",
    "abs_latency",
    "compilation_latency",
    "compression_ratio",
    "eager_peak_mem",
    "dynamo_peak_mem",
    "suite",
    "model",
    "mode",
    "precision",
    "workload",
    "status",
    "ci95_lo",
    "ci95_hi",
    "kernels",
    "eager_latency",
    "warm_compilation_latency",
    "samples",
    "message",
    "noise",
    "unstable",
    "unstable_reasons",
    "breakeven_steps",
    "in_geomean",
    "study",
};

static void num(sbuf *b, double v) {
    sbuf_puts(b, ",");
    if (isfinite(v))
        sbuf_printf(b, "%.6g", v);
}

static void text(sbuf *b, const char *s) {
    sbuf_puts(b, ",");
    esc_csv(b, s);
}

int csv_write(const rp_set *set, FILE *f, char *err, size_t cap) {
    sbuf b = {0};
    for (size_t c = 0; c < sizeof columns / sizeof columns[0]; c++)
        sbuf_printf(&b, "%s%s", c ? "," : "", columns[c]);
    // only beside PyTorch's entries, so that tcbench's files alone keep their columns
    if (set->foreign)
        sbuf_puts(&b, ",time_vs_torch");
    sbuf_puts(&b, "\r\n"); // RFC 4180 ends records with CRLF, as Python's csv module does
    for (int i = 0; i < set->n; i++) {
        const resfile_entry *e = set->e[i];
        const resfile_entry *eager = e->compiled ? rp_eager_of(set, e) : e;
        double ms = e->stats.n ? e->stats.median * 1e3 : NAN;
        double eager_ms = eager && eager->stats.n ? eager->stats.median * 1e3 : NAN;
        double eager_gb = eager && eager->x->peak_bytes >= 0 ? eager->x->peak_bytes / 1e9 : NAN;
        double own_gb = e->compiled && e->x->peak_bytes >= 0 ? e->x->peak_bytes / 1e9 : NAN;
        esc_csv(&b, e->device);
        text(&b, e->name);
        sbuf_printf(&b, ",%lld", (long long)e->batch);
        num(&b, e->speedup);
        num(&b, ms);
        num(&b, e->x->compile_cold_s);
        num(&b, e->compression_ratio);
        num(&b, eager_gb);
        num(&b, own_gb);
        text(&b, e->suite);
        text(&b, e->model);
        text(&b, e->mode);
        text(&b, e->precision);
        text(&b, e->workload);
        text(&b, e->status);
        num(&b, e->x->ci95_lo);
        num(&b, e->x->ci95_hi);
        if (e->x->kernels >= 0)
            sbuf_printf(&b, ",%lld", (long long)e->x->kernels);
        else
            sbuf_puts(&b, ",");
        num(&b, eager_ms);
        num(&b, e->x->compile_warm_s);
        sbuf_printf(&b, ",%d", e->nsamples);
        text(&b, e->message);
        num(&b, e->noise);
        sbuf_puts(&b, e->unstable ? ",true" : ",false");
        sbuf reasons = {0};
        for (int k = 0; k < e->nreasons; k++)
            sbuf_printf(&reasons, "%s%s", k ? "; " : "", e->reasons[k]);
        text(&b, reasons.s ? reasons.s : "");
        b.oom |= reasons.oom;
        free(reasons.s);
        char steps[32];
        rp_fmt_steps(steps, sizeof steps, rp_breakeven(set, e));
        text(&b, steps);
        sbuf_puts(&b, !e->compiled ? "," : rp_in_geomean(set, i) ? ",true" : ",false");
        sbuf_puts(&b, e->study ? ",true" : ",false");
        if (set->foreign)
            num(&b, rp_peer_ratio(set, e, false));
        sbuf_puts(&b, "\r\n");
    }
    return rp_sbuf_flush(&b, f, "results.csv", err, cap);
}
