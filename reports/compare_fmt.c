// The verdicts of `tcbench compare` as text, Markdown, JSON and JUnit XML
// (compare.h).
#include "compare.h"

#include "escape.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const resfile_entry *either(const compare_row *r) { return r->cur ? r->cur : r->base; }

static void fmt(char *buf, size_t cap, const char *f, double v) {
    if (isfinite(v))
        snprintf(buf, cap, f, v);
    else
        snprintf(buf, cap, "-");
}

// The figures of a row as the text and Markdown tables print them.
typedef struct cells {
    char entry[600], base[32], cur[32], change[32], ci[48], q[32], noise[48], limit[32];
} cells;

static void row_cells(const compare_row *r, cells *c) {
    resfile_entry_label(either(r), c->entry, sizeof c->entry);
    fmt(c->base, sizeof c->base, "%.4f", r->base_ms);
    fmt(c->cur, sizeof c->cur, "%.4f", r->cur_ms);
    fmt(c->change, sizeof c->change, "%+.1f%%", (r->ratio - 1) * 100);
    if (isfinite(r->ci_lo) && isfinite(r->ci_hi))
        snprintf(c->ci, sizeof c->ci, "[%.3f, %.3f]", r->ci_lo, r->ci_hi);
    else
        snprintf(c->ci, sizeof c->ci, "-");
    fmt(c->q, sizeof c->q, "%.2g", r->q);
    if (isfinite(r->noise_base) && isfinite(r->noise_cur))
        snprintf(c->noise, sizeof c->noise, "%.1f/%.1f%%", r->noise_base * 100, r->noise_cur * 100);
    else
        snprintf(c->noise, sizeof c->noise, "-");
    fmt(c->limit, sizeof c->limit, "%.1f%%", r->threshold * 100);
}

static void counts_line(const compare_result *r, sbuf *b) {
    sbuf_printf(b, "%s: %d regression%s", compare_result_failed(r) ? "FAIL" : "PASS",
                r->count[CMP_REGRESSION], r->count[CMP_REGRESSION] == 1 ? "" : "s");
    for (int v = CMP_IMPROVEMENT; v < CMP_VERDICT_COUNT; v++)
        sbuf_printf(b, ", %d %s", r->count[v], compare_verdict_name(v));
    sbuf_printf(b,
                " (threshold %.1f%%, alpha %g, noise cap %.1f%%%s; Mann-Whitney U, "
                "Benjamini-Hochberg, bootstrap)",
                r->opts.threshold * 100, r->opts.alpha, r->opts.noise_cap * 100,
                r->opts.fail_on_noisy ? ", --fail-on-noisy" : "");
}

// What a noisy entry is, for the line above the rows listed apart.
static void noisy_title(const compare_result *r, sbuf *b) {
    int n = r->count[CMP_NOISY];
    sbuf_printf(b,
                "%d entr%s too noisy to call (a side's noise above %.1f%%, or marked unstable "
                "by its run)%s",
                n, n == 1 ? "y" : "ies", r->opts.noise_cap * 100,
                r->opts.fail_on_noisy ? "; --fail-on-noisy fails the gate"
                                      : "; not a failure: rerun on a quieter machine");
}

// Writes what b holds once it passes a block's worth, so a million rows
// never sit whole in memory. A failed write marks b as failed (oom: the
// text is incomplete), which compare_write reports as it does a short
// write.
static void spill(sbuf *b, FILE *out) {
    if (b->len < (1 << 16) || b->oom)
        return;
    if (fwrite(b->s, 1, b->len, out) != b->len)
        b->oom = true;
    sbuf_reset(b);
}

// The text table of the rows that are (noisy) or are not (!noisy) noisy.
static void text_table(const compare_result *r, sbuf *b, FILE *out, size_t w, bool noisy) {
    sbuf_printf(b, "%-12s %-*s %10s %10s %8s %-17s %8s %13s %7s  %s\n", "verdict", (int)w, "entry",
                "base ms", "new ms", "change", "95% CI of ratio", "q", "noise b/n", "limit", "why");
    for (int i = 0; i < r->nrows; i++) {
        const compare_row *row = &r->rows[i];
        if ((row->verdict == CMP_NOISY) != noisy)
            continue;
        cells c;
        row_cells(row, &c);
        sbuf_printf(b, "%-12s %-*s %10s %10s %8s %-17s %8s %13s %7s  %s\n",
                    compare_verdict_name(row->verdict), (int)w, c.entry, c.base, c.cur, c.change,
                    c.ci, c.q, c.noise, c.limit, row->reason);
        spill(b, out);
    }
}

static void write_text(const compare_result *r, sbuf *b, FILE *out) {
    sbuf_printf(b, "tcbench compare: %s -> %s\n", r->base->path, r->cur->path);
    if (r->machines[0])
        sbuf_printf(b, "different machines, compared under --force: %s\n", r->machines);
    if (r->settings[0])
        sbuf_printf(b, "other settings, compared as they are: %s\n", r->settings);
    size_t w = strlen("entry");
    cells c;
    for (int i = 0; i < r->nrows; i++) {
        row_cells(&r->rows[i], &c);
        w = strlen(c.entry) > w ? strlen(c.entry) : w;
    }
    text_table(r, b, out, w, false);
    if (r->count[CMP_NOISY]) {
        sbuf_puts(b, "\nnoisy: ");
        noisy_title(r, b);
        sbuf_puts(b, ":\n");
        text_table(r, b, out, w, true);
        sbuf_puts(b, "\n");
    }
    counts_line(r, b);
    sbuf_puts(b, "\n");
}

enum md_rows { MD_NOTABLE, MD_NOISY, MD_ALL };

static bool md_row_in(const compare_row *row, enum md_rows which) {
    switch (which) {
    case MD_NOTABLE: return row->verdict != CMP_SAME && row->verdict != CMP_NOISY;
    case MD_NOISY: return row->verdict == CMP_NOISY;
    default: return true;
    }
}

static void md_table(const compare_result *r, sbuf *b, FILE *out, enum md_rows which) {
    sbuf_puts(b,
              "| verdict | entry | base ms | new ms | change | 95% CI of ratio | q | noise b/n | "
              "limit | why |\n| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- "
              "|\n");
    for (int i = 0; i < r->nrows; i++) {
        const compare_row *row = &r->rows[i];
        if (!md_row_in(row, which))
            continue;
        cells c;
        row_cells(row, &c);
        sbuf_printf(b, "| %s%s%s | ", row->verdict == CMP_REGRESSION ? "**" : "",
                    compare_verdict_name(row->verdict), row->verdict == CMP_REGRESSION ? "**" : "");
        esc_md(b, c.entry);
        sbuf_printf(b, " | %s | %s | %s | %s | %s | %s | %s | ", c.base, c.cur, c.change, c.ci, c.q,
                    c.noise, c.limit);
        esc_md(b, row->reason);
        sbuf_puts(b, " |\n");
        spill(b, out);
    }
}

static void write_md(const compare_result *r, sbuf *b, FILE *out) {
    sbuf_puts(b, "### tcbench compare: ");
    counts_line(r, b);
    sbuf_puts(b, "\n\n");
    sbuf_puts(b, "Baseline `");
    esc_md(b, r->base->path);
    sbuf_puts(b, "`, current `");
    esc_md(b, r->cur->path);
    sbuf_puts(b, "`.\n\n");
    if (r->machines[0]) {
        sbuf_puts(b, "Different machines, compared under --force: ");
        esc_md(b, r->machines);
        sbuf_puts(b, "\n\n");
    }
    if (r->settings[0]) {
        sbuf_puts(b, "Other settings, compared as they are: ");
        esc_md(b, r->settings);
        sbuf_puts(b, "\n\n");
    }
    if (r->nrows > r->count[CMP_SAME] + r->count[CMP_NOISY]) {
        md_table(r, b, out, MD_NOTABLE);
        sbuf_puts(b, "\n");
    } else {
        sbuf_printf(b, "Every entry%s is the same within its limit.\n\n",
                    r->count[CMP_NOISY] ? " but the noisy ones" : "");
    }
    if (r->count[CMP_NOISY]) {
        sbuf_puts(b, "**Noisy**: ");
        noisy_title(r, b);
        sbuf_puts(b, ".\n\n");
        md_table(r, b, out, MD_NOISY);
        sbuf_puts(b, "\n");
    }
    sbuf_printf(b, "<details><summary>All %d entries</summary>\n\n", r->nrows);
    md_table(r, b, out, MD_ALL);
    sbuf_puts(b, "\n</details>\n");
}

static json_t *jnum(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static int write_json(const compare_result *r, FILE *out) {
    json_t *rows = json_array(), *counts = json_object(), *noisy = json_array();
    int bad = !rows || !counts || !noisy;
    for (int v = 0; v < CMP_VERDICT_COUNT && !bad; v++)
        bad = json_object_set_new(counts, compare_verdict_name(v), json_integer(r->count[v]));
    if (bad) {
        json_decref(rows);
        json_decref(counts);
        json_decref(noisy);
        return -1;
    }
    for (int i = 0; i < r->nrows; i++) {
        const compare_row *row = &r->rows[i];
        const resfile_entry *e = either(row);
        json_t *j = json_pack(
            "{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, "
            "s:o, s:o, s:o, s:o}",
            "suite", e->suite, "name", e->name, "mode", e->mode, "precision", e->precision,
            "workload", e->workload, "device", e->device, "batch", (json_int_t)e->batch, "verdict",
            compare_verdict_name(row->verdict), "reason", row->reason, "base_median_s",
            jnum(row->base_ms / 1e3), "current_median_s", jnum(row->cur_ms / 1e3), "ratio",
            jnum(row->ratio), "ci95_lo", jnum(row->ci_lo), "ci95_hi", jnum(row->ci_hi), "noise",
            jnum(row->noise), "noise_base", jnum(row->noise_base), "noise_current",
            jnum(row->noise_cur), "threshold", jnum(row->threshold), "p", jnum(row->p), "q",
            jnum(row->q));
        // a noisy entry is listed apart too, the same object in both lists
        if (!j || json_array_append_new(rows, j) < 0 ||
            (row->verdict == CMP_NOISY && json_array_append(noisy, j) < 0)) {
            json_decref(rows);
            json_decref(counts);
            json_decref(noisy);
            return -1;
        }
    }
    json_t *doc = json_pack(
        "{s:s, s:s, s:s, s:f, s:f, s:f, s:b, s:o, s:o, s:o, s:o, s:o}", "baseline", r->base->path,
        "current", r->cur->path, "result", compare_result_failed(r) ? "fail" : "pass", "threshold",
        r->opts.threshold, "alpha", r->opts.alpha, "noise_cap", r->opts.noise_cap, "fail_on_noisy",
        r->opts.fail_on_noisy, "machines", r->machines[0] ? json_string(r->machines) : json_null(),
        "settings", r->settings[0] ? json_string(r->settings) : json_null(),
        "counts", counts, "entries", rows, "noisy", noisy);
    if (!doc)
        return -1;
    int rc = json_dumpf(doc, out, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    json_decref(doc);
    return rc < 0 || fputc('\n', out) == EOF ? -1 : 0;
}

static void xml_attr(sbuf *b, const char *name, const char *value) {
    sbuf_printf(b, " %s=\"", name);
    esc_html(b, value);
    sbuf_puts(b, "\"");
}

// In JUnit a noisy entry is skipped with its reason, or a failure where
// --fail-on-noisy makes it fail the gate.
static bool junit_fails(const compare_result *r, const compare_row *row) {
    return row->verdict == CMP_REGRESSION || (row->verdict == CMP_NOISY && r->opts.fail_on_noisy);
}

static bool junit_skips(const compare_result *r, const compare_row *row) {
    return row->verdict == CMP_INSUFFICIENT || row->verdict == CMP_MISSING ||
           row->verdict == CMP_NEW || (row->verdict == CMP_NOISY && !r->opts.fail_on_noisy);
}

static void write_junit(const compare_result *r, sbuf *b, FILE *out) {
    int fails = 0, skips = 0;
    for (int i = 0; i < r->nrows; i++) {
        fails += junit_fails(r, &r->rows[i]);
        skips += junit_skips(r, &r->rows[i]);
    }
    sbuf_puts(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    sbuf_printf(b,
                "<testsuites name=\"tcbench compare\" tests=\"%d\" failures=\"%d\" errors=\"0\" "
                "skipped=\"%d\">\n",
                r->nrows, fails, skips);
    sbuf_puts(b, "  <testsuite");
    xml_attr(b, "name", r->cur->path);
    sbuf_printf(b, " tests=\"%d\" failures=\"%d\" errors=\"0\" skipped=\"%d\">\n", r->nrows, fails,
                skips);
    for (int i = 0; i < r->nrows; i++) {
        const compare_row *row = &r->rows[i];
        const resfile_entry *e = either(row);
        char cls[600], name[700];
        snprintf(cls, sizeof cls, "tcbench.%s", e->suite);
        snprintf(name, sizeof name, "%s/%s/%s/%s/%s/batch:%lld", e->name, e->mode, e->precision,
                 e->workload, e->device, (long long)e->batch);
        sbuf_puts(b, "    <testcase");
        xml_attr(b, "classname", cls);
        xml_attr(b, "name", name);
        sbuf_puts(b, ">");
        const char *v = compare_verdict_name(row->verdict);
        if (junit_fails(r, row)) {
            sbuf_puts(b, "<failure");
            xml_attr(b, "type", v);
            xml_attr(b, "message", row->reason);
            sbuf_puts(b, ">");
            cells c;
            row_cells(row, &c);
            char detail[900];
            snprintf(detail, sizeof detail,
                     "%s: base %s ms, new %s ms, change %s, CI %s, q %s, noise %s", c.entry, c.base,
                     c.cur, c.change, c.ci, c.q, c.noise);
            esc_html(b, detail);
            sbuf_puts(b, "</failure>");
        } else if (junit_skips(r, row)) {
            char msg[400];
            snprintf(msg, sizeof msg, "%s: %s", v, row->reason);
            sbuf_puts(b, "<skipped");
            xml_attr(b, "message", msg);
            sbuf_puts(b, "/>");
        } else {
            char msg[400];
            snprintf(msg, sizeof msg, "%s: %s", v, row->reason);
            sbuf_puts(b, "<system-out>");
            esc_html(b, msg);
            sbuf_puts(b, "</system-out>");
        }
        sbuf_puts(b, "</testcase>\n");
        spill(b, out);
    }
    sbuf_puts(b, "  </testsuite>\n</testsuites>\n");
}

int compare_write(const compare_result *r, FILE *out) {
    if (r->opts.format == CMP_JSON)
        return write_json(r, out);
    sbuf b = {0};
    switch (r->opts.format) {
    case CMP_MD: write_md(r, &b, out); break;
    case CMP_JUNIT: write_junit(r, &b, out); break;
    default: write_text(r, &b, out); break;
    }
    int rc = b.oom || (b.len && fwrite(b.s, 1, b.len, out) != b.len) || fflush(out) != 0 ? -1 : 0;
    free(b.s);
    return rc;
}
