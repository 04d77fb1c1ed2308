// The report's document: the study's executive summary, headline,
// warnings, ablation split, sweeps and per-model tables (report_int.h).
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// The dashboard's warning thresholds (reference/README.md).
#define WARN_SPEEDUP     0.95
#define WARN_COMPILE_S   120.0
#define WARN_COMPRESSION 0.9

static const char *workload_word(const char *w) {
    return !strcmp(w, "infer") ? "inference" : !strcmp(w, "train") ? "training" : w;
}

static void entry_where(const resfile_entry *e, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%s (%s, %s, %s, %s, batch %lld)", e->suite, e->name, e->mode,
             e->precision, e->workload, e->device, (long long)e->batch);
}

// The TCBENCH_DISABLE_* switches of one file: "none", or "A=1, B=1". As a
// paragraph (para) or a cell.
static void kill_switches(const resfile *f, rdoc *d, bool para) {
    char buf[2048] = "";
    size_t n = 0;
    for (int k = 0; k < f->ndisabled; k++) {
        int w = snprintf(buf + n, sizeof buf - n, "%s%s", k ? ", " : "", f->disabled[k]);
        if (w > 0 && (size_t)w < sizeof buf - n)
            n += (size_t)w;
    }
    if (!para)
        rdoc_cell(d, "%s", f->ndisabled ? buf : "none");
    else if (f->ndisabled)
        rdoc_para(d,
                  "Kill switches in effect in %s: %s. The modes they touch do not measure what "
                  "their names say (docs/compiler.md).",
                  f->path, buf);
}

// Under the title: the kill switches of every file, or that there were none.
static void kill_switch_header(const rp_set *set, rdoc *d) {
    int any = 0;
    for (int i = 0; i < set->nfiles; i++)
        any += set->files[i]->ndisabled > 0;
    if (!any) {
        rdoc_para(d, "Kill switches in effect (TCBENCH_DISABLE_*): none.");
        return;
    }
    for (int i = 0; i < set->nfiles; i++)
        kill_switches(set->files[i], d, true);
}

static void sources(const rp_set *set, rdoc *d) {
    rdoc_heading(d, 2, "Results");
    rdoc_table(d, 10, "file", "run started", "host", "cpu", "cores / threads", "load at start",
               "tcbench", "entries", "calibration", "kill switches");
    for (int i = 0; i < set->nfiles; i++) {
        const resfile *f = set->files[i];
        rdoc_cell(d, "%s", f->path);
        rdoc_cell(d, "%s", f->timestamp);
        rdoc_cell(d, "%s", f->hostname);
        rdoc_cell(d, "%s", f->cpu_model);
        rdoc_cell(d, "%lld / %lld", (long long)f->cores, (long long)f->threads_used);
        char load[32];
        rp_fmt(load, sizeof load, "%.2f", f->loadavg_start);
        rdoc_cell(d, "%s", load);
        rdoc_cell(d, "%s (git %s)", f->tool_version, f->git_commit);
        rdoc_cell(d, "%d", f->nentries);
        if (isfinite(f->calib_GBps) && isfinite(f->calib_GFLOPs))
            rdoc_cell(d, "%.1f GB/s, %.1f GFLOP/s", f->calib_GBps, f->calib_GFLOPs);
        else
            rdoc_cell(d, "none (tcbench calibrate)");
        kill_switches(f, d, false);
    }
}

static void headline_row(const rp_set *set, const rp_sel *s, rdoc *d) {
    rp_headline h;
    rp_headline_compute(set, s, &h);
    rdoc_cell(d, "%d (fp32 %d, AMP %d)", h.nboth, h.nfp32, h.namp);
    char f[32], a[32];
    rp_fmt(f, sizeof f, "%.2fx", h.fp32);
    rp_fmt(a, sizeof a, "%.2fx", h.amp);
    rdoc_cell(d, "%s", f);
    rdoc_cell(d, "%s", a);
    if (h.nboth)
        rdoc_cell(d, "%.2fx (%+.0f%%)", h.value, (h.value - 1) * 100);
    else if (h.nfp32 && h.namp)
        rdoc_cell(d, "needs both: no model in both");
    else
        rdoc_cell(d, "needs both: %s%s%s", !h.nfp32 ? "no fp32" : "",
                  !h.nfp32 && !h.namp ? ", " : "", !h.namp ? "no AMP" : "");
}

static void headline(const rp_set *set, rdoc *d) {
    rdoc_heading(d, 2, "Headline");
    rdoc_para(d,
              "PyTorch 2.0 summed up its 163 models in one figure per workload: 0.75 x AMP + "
              "0.25 x fp32, of the geomean speedups over the models that passed (training on an "
              "A100: 0.75 x 51%% + 0.25 x 21%% = 43%% faster). The same weighting of %s over "
              "eager here, over the same models in both precisions: those that passed in fp32 "
              "and in AMP, with a stable figure, at the suite's batch. The executive summary "
              "below has each precision's own geomean over all that passed.",
              set->primary);
    const char *devs[RP_MAX_VALUES], *wls[RP_MAX_VALUES], *suites[RP_MAX_VALUES];
    rp_sel all = {0};
    all.v[RP_MODE] = set->primary;
    int nd = rp_values(set, &all, RP_DEVICE, devs, RP_MAX_VALUES);
    int ns = rp_values(set, &all, RP_SUITE, suites, RP_MAX_VALUES);
    rdoc_table(d, 6, "workload", "suites", "models in both", "fp32 geomean", "AMP geomean",
               "0.75 x AMP + 0.25 x fp32");
    for (int di = 0; di < nd; di++) {
        rp_sel s = all;
        s.v[RP_DEVICE] = devs[di];
        s.v[RP_WORKLOAD] = NULL;
        int nw = rp_values(set, &s, RP_WORKLOAD, wls, RP_MAX_VALUES);
        for (int wi = 0; wi < nw; wi++) {
            s.v[RP_WORKLOAD] = wls[wi];
            // all suites together, then each when there are several
            for (int k = -1; k < (ns > 1 ? ns : 0); k++) {
                s.v[RP_SUITE] = k < 0 ? NULL : suites[k];
                if (nd > 1)
                    rdoc_cell(d, "%s (%s)", workload_word(wls[wi]), devs[di]);
                else
                    rdoc_cell(d, "%s", workload_word(wls[wi]));
                rdoc_cell(d, "%s", k < 0 ? "all" : suites[k]);
                headline_row(set, &s, d);
            }
        }
    }
}

// The executive summary's figures of one aggregate, as its cells print them
// ("" when there is none).
typedef void (*agg_fmt)(const rp_agg *a, char *buf, size_t cap);
static void fmt_pass_rate(const rp_agg *a, char *buf, size_t cap) {
    report_pass_rate(a->passed, a->total, buf, cap);
}
static void fmt_geomean(const rp_agg *a, char *buf, size_t cap) {
    rp_fmt(buf, cap, "%.2fx", a->geomean);
}
static void fmt_compile(const rp_agg *a, char *buf, size_t cap) {
    rp_fmt(buf, cap, "%.2f", a->compile_s);
}
static void fmt_compression(const rp_agg *a, char *buf, size_t cap) {
    rp_fmt(buf, cap, "%.2fx", a->compression);
}
static void fmt_unstable(const rp_agg *a, char *buf, size_t cap) {
    snprintf(buf, cap, "%d", a->unstable);
}

// One row of the executive summary: per suite column, "figure (study) ·
// figure (all)" when the column has study cases (the study's subset, then
// every row), else the figure of all rows.
static void exec_row(rdoc *d, const char *label, const rp_agg *all, const rp_agg *study, int ns,
                     agg_fmt fmt) {
    rdoc_cell(d, "%s", label);
    for (int k = 0; k < ns; k++) {
        char a[64], s[64];
        fmt(&all[k], a, sizeof a);
        if (!study[k].total) {
            rdoc_cell(d, "%s", a);
            continue;
        }
        fmt(&study[k], s, sizeof s);
        rdoc_cell(d, "%s (study) \u00b7 %s (all)", *s ? s : "none", *a ? a : "none");
    }
}

static void executive(const rp_set *set, rdoc *d) {
    rdoc_heading(d, 2, "Executive summary");
    rdoc_para(d, "As the PyTorch dashboard: pass rate of all entries; geomean speedup over the "
                 "entries that passed accuracy with a stable figure, slowdowns counted as they "
                 "are (not clipped to 1.0x) and the rest listed; mean cold compile time and mean "
                 "peak memory compression ratio (eager peak / compiled peak; higher is better) "
                 "of the entries that passed. A case run at several batch sizes counts once, at "
                 "the suite's batch. Every status counts in the pass rate, including the "
                 "study's model_fail_to_load and eager_fail_to_run; no row is dropped. Where a "
                 "suite marks the study's own models (study: true), a cell reads "
                 "\"figure (study) \u00b7 figure (all)\": the study's subset, then every row.");
    const char *modes[RP_MAX_VALUES], *devs[RP_MAX_VALUES], *precs[RP_MAX_VALUES],
        *wls[RP_MAX_VALUES], *suites[RP_MAX_VALUES];
    int nm = rp_values(set, &(rp_sel){0}, RP_MODE, modes, RP_MAX_VALUES);
    for (int mi = 0; mi < nm; mi++) {
        if (!resfile_mode_compiled(modes[mi]))
            continue;
        rp_sel s = {0};
        s.v[RP_MODE] = modes[mi];
        s.v[RP_DEVICE] = NULL;
        int nd = rp_values(set, &s, RP_DEVICE, devs, RP_MAX_VALUES);
        for (int di = 0; di < nd; di++) {
            s.v[RP_DEVICE] = devs[di];
            s.v[RP_PRECISION] = NULL;
            int np = rp_values(set, &s, RP_PRECISION, precs, RP_MAX_VALUES);
            for (int pi = 0; pi < np; pi++) {
                s.v[RP_PRECISION] = precs[pi];
                s.v[RP_WORKLOAD] = NULL;
                int nw = rp_values(set, &s, RP_WORKLOAD, wls, RP_MAX_VALUES);
                for (int wi = 0; wi < nw; wi++) {
                    s.v[RP_WORKLOAD] = wls[wi];
                    s.v[RP_SUITE] = NULL;
                    int ns = rp_values(set, &s, RP_SUITE, suites, RP_MAX_VALUES);
                    rdoc_heading(d, 3, "%s, %s, %s, %s", modes[mi], precs[pi],
                                 workload_word(wls[wi]), devs[di]);
                    rdoc_table_open(d, ns + 1);
                    rdoc_cell(d, "%s", "");
                    for (int k = 0; k < ns; k++)
                        rdoc_cell(d, "%s", suites[k]);
                    // each column over all rows, and over the study's subset
                    rp_agg a[RP_MAX_VALUES], st[RP_MAX_VALUES];
                    for (int k = 0; k < ns; k++) {
                        s.v[RP_SUITE] = suites[k];
                        rp_agg_compute(set, &s, &a[k]);
                        s.study = true;
                        rp_agg_compute(set, &s, &st[k]);
                        s.study = false;
                    }
                    exec_row(d, "Pass rate", a, st, ns, fmt_pass_rate);
                    exec_row(d, "Geomean speedup", a, st, ns, fmt_geomean);
                    exec_row(d, "Mean compile time (s)", a, st, ns, fmt_compile);
                    exec_row(d, "Peak memory compression ratio", a, st, ns, fmt_compression);
                    exec_row(d, "Passed but unstable (not in the geomean)", a, st, ns,
                             fmt_unstable);
                    // the entries the geomean leaves out, by name
                    s.v[RP_SUITE] = NULL;
                    int out = 0;
                    for (int i = 0; i < set->n; i++) {
                        char label[512], why[600];
                        if (!rp_match(set->e[i], &s) || !rp_left_out(set, i, why, sizeof why))
                            continue;
                        rp_label(set, set->e[i], label, sizeof label);
                        rdoc_item(d, "Not in the geomean: %s (%s)", label, why);
                        out++;
                    }
                    if (!out)
                        rdoc_para(d, "Every entry passed; the geomean covers all of them.");
                }
            }
        }
    }
}

// The study's own figures (reference facts: PyTorch 2.0 on one A100, at the
// suites' full sizes): the AMP dashboard snapshot per suite and the
// training headline.
static const struct {
    const char *suite;
    int passed, total;
    double geomean, compile_s;
} study_amp[] = {
    {"huggingface", 34, 44, 1.60, 120},
    {"timm", 45, 61, 1.23, 427},
    {"torchbench", 48, 55, 1.38, 278},
};
#define STUDY_FP32 1.21
#define STUDY_AMP  1.51

// Ours beside the study's, for the suites of the study this run has: its
// subset (study: true) of each, in AMP training, and the headline.
static void against_study(const rp_set *set, rdoc *d) {
    const char *devs[RP_MAX_VALUES];
    rp_sel all = {0};
    all.v[RP_MODE] = set->primary;
    int nd = rp_values(set, &all, RP_DEVICE, devs, RP_MAX_VALUES);
    const char *suites[RP_MAX_VALUES];
    rp_sel study = all;
    study.study = true;
    int ns = rp_values(set, &study, RP_SUITE, suites, RP_MAX_VALUES);
    bool have[3] = {false};
    int any = 0;
    for (int k = 0; k < 3; k++) {
        for (int j = 0; j < ns && !have[k]; j++)
            have[k] = !strcmp(suites[j], study_amp[k].suite);
        any += have[k];
    }
    if (!any)
        return;
    rdoc_heading(d, 2, "Against the study");
    rdoc_para(d,
              "The study's figures are PyTorch 2.0's own: torch.compile against PyTorch eager "
              "on one NVIDIA A100, at the suites' full sizes, as its release and its dashboard "
              "reported them (the AMP columns are the dashboard's snapshot of the time). Ours "
              "are %s against tcbench's eager in these results, on this machine, at the size "
              "they were run at, over the study's own models (study: true). They sit side by "
              "side to compare shape, not to meet: the hardware, the sizes and the compilers "
              "differ.",
              set->primary);
    for (int di = 0; di < nd; di++) {
        rp_sel s = all;
        s.v[RP_DEVICE] = devs[di];
        s.v[RP_WORKLOAD] = "train";
        s.study = true;
        rdoc_heading(d, 3, "Training headline (%s)", devs[di]);
        rp_headline h;
        rp_headline_compute(set, &s, &h);
        rdoc_table(d, 3, "", "ours (study's models)", "the study's (A100)");
        char f[32], a[32], v[48];
        rp_fmt(f, sizeof f, "%.2fx", h.fp32);
        rp_fmt(a, sizeof a, "%.2fx", h.amp);
        rp_fmt(v, sizeof v, "%.2fx", h.value);
        rdoc_cell(d, "fp32 geomean");
        rdoc_cell(d, "%s", *f ? f : "none");
        rdoc_cell(d, "%.2fx", STUDY_FP32);
        rdoc_cell(d, "AMP geomean");
        rdoc_cell(d, "%s", *a ? a : "none");
        rdoc_cell(d, "%.2fx", STUDY_AMP);
        rdoc_cell(d, "0.75 x AMP + 0.25 x fp32");
        if (h.nboth)
            rdoc_cell(d, "%s over %d models in both", v, h.nboth);
        else
            rdoc_cell(d, "none");
        rdoc_cell(d, "%.3fx (the release: 43%% faster)", report_headline(STUDY_AMP, STUDY_FP32));
        rdoc_heading(d, 3, "AMP training per suite (%s)", devs[di]);
        rdoc_table(d, 7, "suite", "pass rate: ours", "the study's", "geomean: ours", "the study's",
                   "mean compile s: ours", "the study's");
        s.v[RP_PRECISION] = "amp";
        for (int k = 0; k < 3; k++) {
            if (!have[k])
                continue;
            s.v[RP_SUITE] = study_amp[k].suite;
            rp_agg g;
            rp_agg_compute(set, &s, &g);
            char pr[64], spr[64], gm[32], cs[32];
            report_pass_rate(g.passed, g.total, pr, sizeof pr);
            report_pass_rate(study_amp[k].passed, study_amp[k].total, spr, sizeof spr);
            rp_fmt(gm, sizeof gm, "%.2fx", g.geomean);
            rp_fmt(cs, sizeof cs, "%.2f", g.compile_s);
            rdoc_cell(d, "%s", study_amp[k].suite);
            rdoc_cell(d, "%s", *pr ? pr : "none");
            rdoc_cell(d, "%s", spr);
            rdoc_cell(d, "%s", *gm ? gm : "none");
            rdoc_cell(d, "%.2fx", study_amp[k].geomean);
            rdoc_cell(d, "%s", *cs ? cs : "none");
            rdoc_cell(d, "%.0f", study_amp[k].compile_s);
        }
    }
}

static void warnings(const rp_set *set, rdoc *d) {
    rdoc_heading(d, 2, "Warnings");
    int n = 0;
    char where[600];
    for (int i = 0; i < set->n; i++) {
        const resfile_entry *e = set->e[i];
        entry_where(e, where, sizeof where);
        if (!e->good) {
            rdoc_item(d, "%s: %s, not passing%s%s", where, e->status, *e->message ? ": " : "",
                      e->message);
            n++;
        }
        if (e->unstable) {
            char why[600];
            int w = snprintf(why, sizeof why, "%s", e->nreasons ? "" : "no reason recorded");
            for (int k = 0; k < e->nreasons && w >= 0 && (size_t)w < sizeof why; k++)
                w +=
                    snprintf(why + w, sizeof why - (size_t)w, "%s%s", k ? "; " : "", e->reasons[k]);
            rdoc_item(d, "%s: unstable (%s): left out of every geomean and the headline", where,
                      why);
            n++;
        }
        if (e->compiled && !e->unstable && e->speedup < WARN_SPEEDUP) {
            rdoc_item(d, "%s: speedup %.2fx < %.2fx", where, e->speedup, WARN_SPEEDUP);
            n++;
        }
        if (e->x->compile_cold_s > WARN_COMPILE_S) {
            rdoc_item(d, "%s: compile time %.1f s > %.0f s", where, e->x->compile_cold_s,
                      WARN_COMPILE_S);
            n++;
        }
        if (e->compiled && e->compression_ratio < WARN_COMPRESSION) {
            rdoc_item(d, "%s: memory compression %.2fx < %.1fx", where, e->compression_ratio,
                      WARN_COMPRESSION);
            n++;
        }
    }
    for (int i = 0; i < set->nfiles; i++)
        if (set->files[i]->ndisabled) {
            kill_switches(set->files[i], d, true);
            n++;
        }
    if (!n)
        rdoc_para(d,
                  "None: every entry passed with a stable figure, no speedup under %.2fx, no "
                  "compile over %.0f s, no memory compression under %.1fx, no kill switch.",
                  WARN_SPEEDUP, WARN_COMPILE_S, WARN_COMPRESSION);
}

// Calls fn for each device x precision x workload that has entries.
typedef void (*group_fn)(const rp_set *set, const rp_sel *s, rdoc *d, void *user);
static void each_group(const rp_set *set, rdoc *d, group_fn fn, void *user) {
    const char *devs[RP_MAX_VALUES], *precs[RP_MAX_VALUES], *wls[RP_MAX_VALUES];
    rp_sel s = {0};
    s.v[RP_DEVICE] = NULL;
    int nd = rp_values(set, &s, RP_DEVICE, devs, RP_MAX_VALUES);
    for (int di = 0; di < nd; di++) {
        s.v[RP_DEVICE] = devs[di];
        s.v[RP_PRECISION] = NULL;
        int np = rp_values(set, &s, RP_PRECISION, precs, RP_MAX_VALUES);
        for (int pi = 0; pi < np; pi++) {
            s.v[RP_PRECISION] = precs[pi];
            s.v[RP_WORKLOAD] = NULL;
            int nw = rp_values(set, &s, RP_WORKLOAD, wls, RP_MAX_VALUES);
            for (int wi = 0; wi < nw; wi++) {
                s.v[RP_WORKLOAD] = wls[wi];
                fn(set, &s, d, user);
            }
        }
    }
}

static bool same_row(const resfile_entry *a, const resfile_entry *b) {
    return !strcmp(a->suite, b->suite) && !strcmp(a->name, b->name) && a->batch == b->batch;
}

static void ablation_group(const rp_set *set, const rp_sel *g, rdoc *d, void *user) {
    bool *any = user;
    const char *modes[RP_MAX_VALUES];
    int nm = rp_values(set, g, RP_MODE, modes, RP_MAX_VALUES);
    // the ablation's order: fusion alone, capture alone, both; then any other
    static const char *const order[] = {"fused", "captured", "compiled"};
    const char *cm[RP_MAX_VALUES];
    int ncm = 0;
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++)
        for (int m = 0; m < nm; m++)
            if (!strcmp(modes[m], order[k]))
                cm[ncm++] = modes[m];
    // (of tcbench's: another harness's modes are not measured against its eager)
    for (int m = 0; m < nm; m++)
        if (resfile_mode_compiled(modes[m]) && !bench_mode_foreign(modes[m]) &&
            strcmp(modes[m], "fused") && strcmp(modes[m], "captured") &&
            strcmp(modes[m], "compiled"))
            cm[ncm++] = modes[m];
    bool ablation = false;
    for (int m = 0; m < ncm; m++)
        ablation |= !strcmp(cm[m], "fused") || !strcmp(cm[m], "captured");
    if (!ablation)
        return;
    if (!*any)
        rdoc_heading(d, 2, "Ablation: what fusion and what capture buy");
    *any = true;
    rdoc_heading(d, 3, "%s, %s, %s", g->v[RP_PRECISION], workload_word(g->v[RP_WORKLOAD]),
                 g->v[RP_DEVICE]);
    rdoc_para(d, "fused: fusion without capture; captured: capture without fusion; compiled: "
                 "both. Each is the median speedup over eager, measured interleaved in one "
                 "process.");
    rdoc_table_open(d, 2 + ncm);
    rdoc_cell(d, "case");
    rdoc_cell(d, "batch");
    for (int m = 0; m < ncm; m++)
        rdoc_cell(d, "%s vs eager", cm[m]);
    const resfile_entry *prev = NULL;
    for (int i = 0; i < set->n; i++) {
        const resfile_entry *e = set->e[i];
        if (!rp_match(e, g) || (prev && same_row(prev, e)))
            continue;
        prev = e;
        char label[512];
        rp_label(set, e, label, sizeof label);
        rdoc_cell(d, "%s", label);
        rdoc_cell(d, "%lld", (long long)e->batch);
        for (int m = 0; m < ncm; m++) {
            const resfile_entry *x = NULL;
            for (int k = i; k < set->n && !x && same_row(set->e[k], e); k++)
                if (rp_match(set->e[k], g) && !strcmp(set->e[k]->mode, cm[m]))
                    x = set->e[k];
            if (!x)
                rdoc_cell(d, "%s", "");
            else if (isfinite(x->speedup))
                rdoc_cell(d, "%s%.2fx", x->unstable ? "~" : "", x->speedup);
            else
                rdoc_cell(d, "%s", x->status);
        }
    }
    rdoc_cell(d, "geomean (passed)");
    rdoc_cell(d, "%s", "");
    char line[512] = "";
    size_t len = 0;
    for (int m = 0; m < ncm; m++) {
        rp_sel s = *g;
        s.v[RP_MODE] = cm[m];
        rp_agg a;
        rp_agg_compute(set, &s, &a);
        char gm[32];
        rp_fmt(gm, sizeof gm, "%.2fx", a.geomean);
        rdoc_cell(d, "%s (%d/%d)", gm, a.passed, a.total);
        const char *what = !strcmp(cm[m], "fused")      ? "fusion alone"
                           : !strcmp(cm[m], "captured") ? "capture alone"
                           : !strcmp(cm[m], "compiled") ? "both"
                                                        : cm[m];
        int w =
            snprintf(line + len, sizeof line - len, "%s%s (%s) %s", m ? ", " : "", what, cm[m], gm);
        if (w > 0 && (size_t)w < sizeof line - len)
            len += (size_t)w;
    }
    rdoc_para(d, "Geomean speedup over eager: %s.", line);
}

// "~8.14x [0.99, 97.55]" ("~": unstable), or blank when there is no speedup.
static void speedup_cell(const resfile_entry *e, rdoc *d) {
    char sp[32], lo[32], hi[32];
    rp_fmt(sp, sizeof sp, "%.2fx", e->speedup);
    rp_fmt(lo, sizeof lo, "%.2f", e->x->ci95_lo);
    rp_fmt(hi, sizeof hi, "%.2f", e->x->ci95_hi);
    if (!isfinite(e->speedup))
        rdoc_cell(d, "%s", "");
    else if (isfinite(e->x->ci95_lo) && isfinite(e->x->ci95_hi))
        rdoc_cell(d, "%s%s [%s, %s]", e->unstable ? "~" : "", sp, lo, hi);
    else
        rdoc_cell(d, "%s%s", e->unstable ? "~" : "", sp);
}

// "3.1%", "31.0% unstable", or blank when not recorded.
static void noise_cell(const resfile_entry *e, rdoc *d) {
    char nz[32];
    rp_fmt(nz, sizeof nz, "%.1f%%", e->noise * 100);
    rdoc_cell(d, "%s%s%s", nz, *nz && e->unstable ? " " : "", e->unstable ? "unstable" : "");
}

static void sweep_group(const rp_set *set, const rp_sel *g, rdoc *d, void *user) {
    bool *any = user;
    bool header = false;
    for (int i = 0; i < set->n; i++) {
        const resfile_entry *e = set->e[i];
        if (!e->compiled || !rp_match(e, g) || !rp_swept(set, e))
            continue;
        if (!*any) {
            rdoc_heading(d, 2, "Batch-size sweeps");
            rdoc_para(d, "A case swept over batch sizes counts once in the geomeans, at the "
                         "suite's batch (the last column).");
        }
        *any = true;
        if (!header) {
            rdoc_heading(d, 3, "%s, %s, %s", g->v[RP_PRECISION], workload_word(g->v[RP_WORKLOAD]),
                         g->v[RP_DEVICE]);
            rdoc_table(d, 8, "case", "mode", "batch", "eager ms", "ms", "speedup [95% CI]", "noise",
                       "in the geomeans");
            header = true;
        }
        const resfile_entry *eager = rp_eager_of(set, e);
        char name[512], em[32], ms[32];
        snprintf(name, sizeof name, "%s/%s", e->suite, e->name);
        rp_fmt(em, sizeof em, "%.4f", eager && eager->stats.n ? eager->stats.median * 1e3 : NAN);
        rp_fmt(ms, sizeof ms, "%.4f", e->stats.n ? e->stats.median * 1e3 : NAN);
        rdoc_cell(d, "%s", name);
        rdoc_cell(d, "%s", e->mode);
        rdoc_cell(d, "%lld", (long long)e->batch);
        rdoc_cell(d, "%s", em);
        rdoc_cell(d, "%s", ms);
        if (isfinite(e->speedup))
            speedup_cell(e, d);
        else
            rdoc_cell(d, "%s", e->status);
        noise_cell(e, d);
        char why[600];
        const char *out = rp_left_out(set, i, why, sizeof why);
        rdoc_cell(d, "%s%s", out ? "no: " : "yes", out ? out : "");
    }
}

static void per_model_group(const rp_set *set, const rp_sel *g, rdoc *d, void *user) {
    (void)user;
    const char *suites[RP_MAX_VALUES];
    int ns = rp_values(set, g, RP_SUITE, suites, RP_MAX_VALUES);
    for (int k = 0; k < ns; k++) {
        rp_sel s = *g;
        s.v[RP_SUITE] = suites[k];
        rdoc_heading(d, 3, "%s: %s, %s, %s", suites[k], g->v[RP_PRECISION],
                     workload_word(g->v[RP_WORKLOAD]), g->v[RP_DEVICE]);
        rdoc_table(d, 12, "case", "batch", "mode", "status", "speedup [95% CI]", "latency ms",
                   "noise", "compile s cold / warm", "break-even steps", "peak MiB", "compression",
                   "kernels");
        for (int i = 0; i < set->n; i++) {
            const resfile_entry *e = set->e[i];
            if (!rp_match(e, &s))
                continue;
            char ms[32], cold[32], warm[32], mib[32], cr[32], be[32];
            rp_fmt(ms, sizeof ms, "%.4f", e->stats.n ? e->stats.median * 1e3 : NAN);
            rp_fmt(cold, sizeof cold, "%.2f", e->x->compile_cold_s);
            rp_fmt(warm, sizeof warm, "%.2f", e->x->compile_warm_s);
            rp_fmt(mib, sizeof mib, "%.2f",
                   e->x->peak_bytes >= 0 ? e->x->peak_bytes / 1048576.0 : NAN);
            rp_fmt(cr, sizeof cr, "%.2fx", e->compression_ratio);
            rp_fmt_steps(be, sizeof be, rp_breakeven(set, e));
            rdoc_cell(d, "%s", e->name);
            rdoc_cell(d, "%lld", (long long)e->batch);
            rdoc_cell(d, "%s", e->mode);
            rdoc_cell(d, "%s", e->status);
            speedup_cell(e, d);
            rdoc_cell(d, "%s", ms);
            noise_cell(e, d);
            if (isfinite(e->x->compile_cold_s))
                rdoc_cell(d, "%s / %s", cold, warm);
            else
                rdoc_cell(d, "%s", "");
            rdoc_cell(d, "%s", be);
            rdoc_cell(d, "%s", mib);
            rdoc_cell(d, "%s", cr);
            if (e->x->kernels >= 0)
                rdoc_cell(d, "%lld", (long long)e->x->kernels);
            else
                rdoc_cell(d, "%s", "");
        }
    }
}

void summary_build(const rp_set *set, const rp_charts *charts, rdoc *d) {
    rdoc_heading(d, 1, "tcbench report");
    kill_switch_header(set, d);
    sources(set, d);
    if (set->primary) {
        headline(set, d);
        against_study(set, d);
        executive(set, d);
    } else if (set->n == 0) {
        rdoc_para(d, "These results have no entries.");
    } else {
        rdoc_para(d, "Only eager was measured: there are no speedups. Run a compiled-family "
                     "mode (tcbench run --mode eager,compiled) for the study's tables.");
    }
    if (set->foreign)
        side_summary(set, d);
    warnings(set, d);
    bool any = false;
    each_group(set, d, ablation_group, &any);
    any = false;
    each_group(set, d, sweep_group, &any);
    rdoc_heading(d, 2, "Per-model results");
    rdoc_para(d, "latency: median time of one step. speedup: median eager / median of the "
                 "mode, with its bootstrap 95%% interval; it counts only for entries that "
                 "pass; ~ marks an unstable figure, left out of the geomeans. noise: the "
                 "samples' robust dispersion (1.4826 x MAD / median), and whether the entry "
                 "is unstable (Warnings says why). compile: cold (empty kernel cache) / warm "
                 "(cache hit). break-even: steps after which the cold compile is paid back, "
                 "cold compile s / (eager step - this step); never where this mode is not "
                 "faster. peak: most tensor memory live during a step. compression: eager "
                 "peak / this peak. A blank cell: not measured.");
    each_group(set, d, per_model_group, NULL);
    if (charts->n) {
        rdoc_heading(d, 2, "Charts");
        for (int i = 0; i < charts->n; i++)
            rdoc_chart(d, charts->c[i].stem, charts->c[i].caption, charts->c[i].drawn);
    }
}
