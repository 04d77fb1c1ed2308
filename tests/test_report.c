// tcbench report on the hand-made fixture (tests/fixtures/report_fixture.json):
// the executive summary's numbers against values computed here from the
// JSON itself, the CSV's columns and quoting, escaping of a model named
// <script>"x in HTML and in the gnuplot scripts, and the run without gnuplot.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

// after the four above, which it needs
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reports/escape.h"
#include "reports/report.h"

static char fixture[4096], outdir[256];

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = '\0';
    fclose(f);
    return s;
}

static char *out_file(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", outdir, name);
    return slurp(path);
}

// The line of `table` that starts with `row` in the section under `heading`.
static void expect_row(const char *doc, const char *heading, const char *row) {
    const char *h = strstr(doc, heading);
    if (!h) {
        print_error("no heading '%s' in summary.md\n", heading);
        fail();
    }
    const char *end = strstr(h + strlen(heading), "\n#");
    const char *r = strstr(h, row);
    if (!r || (end && r > end)) {
        print_error("under '%s' expected the line '%s'\n", heading, row);
        fail();
    }
}

// The fixture's own figures for one compiled group, computed from the JSON.
typedef struct expect {
    int passed, total;
    double geomean, compile;
} expect;

static expect from_json(json_t *doc, const char *suite, const char *prec, const char *wl) {
    expect x = {0};
    double logs = 0, comp = 0;
    int nc = 0;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(doc, "cases"), i, c) {
        if (strcmp(json_string_value(json_object_get(c, "mode")), "compiled") ||
            (suite && strcmp(json_string_value(json_object_get(c, "suite")), suite)) ||
            strcmp(json_string_value(json_object_get(c, "precision")), prec) ||
            strcmp(json_string_value(json_object_get(c, "workload")), wl))
            continue;
        x.total++;
        if (strcmp(json_string_value(json_object_get(c, "status")), "pass"))
            continue;
        x.passed++;
        logs += log(json_number_value(json_object_get(json_object_get(c, "speedup"), "median")));
        comp += json_number_value(json_object_get(json_object_get(c, "compile"), "cold_s"));
        nc++;
    }
    x.geomean = x.passed ? exp(logs / x.passed) : NAN;
    x.compile = nc ? comp / nc : NAN;
    return x;
}

static int setup(void **state) {
    (void)state;
    const char *src = getenv("TCBENCH_SOURCE_DIR");
    snprintf(fixture, sizeof fixture, "%s/tests/fixtures/report_fixture.json", src ? src : ".");
    const char *t = getenv("TMPDIR");
    snprintf(outdir, sizeof outdir, "%s/tcbench-test-report-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(outdir))
        return -1;
    resfile *f;
    diag d;
    if (resfile_load(fixture, &f, &d) < 0) {
        diag_print(&d, stderr);
        return -1;
    }
    // a gnuplot that is not there: the tables must still be written
    char warn_path[300];
    snprintf(warn_path, sizeof warn_path, "%s/warn.txt", outdir);
    FILE *warn = fopen(warn_path, "w");
    char err[512];
    report_options o = {.outdir = outdir, .gnuplot = "tcbench-no-such-gnuplot", .warn = warn};
    int rc = warn ? report_write(&f, 1, &o, err, sizeof err) : -1;
    if (rc < 0)
        fprintf(stderr, "report_write: %s\n", err);
    if (warn)
        fclose(warn);
    resfile_free(f);
    return rc;
}

static int teardown(void **state) {
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", outdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_pass_rate(void **state) {
    (void)state;
    char b[64];
    report_pass_rate(47, 54, b, sizeof b);
    assert_string_equal(b, "87%, 47/54"); // the dashboard's own example
    report_pass_rate(48, 55, b, sizeof b);
    assert_string_equal(b, "87%, 48/55");
    report_pass_rate(34, 44, b, sizeof b);
    assert_string_equal(b, "77%, 34/44");
    report_pass_rate(1, 8, b, sizeof b); // 12.5: Python's round goes to even
    assert_string_equal(b, "12%, 1/8");
    report_pass_rate(3, 8, b, sizeof b); // 37.5 -> 38
    assert_string_equal(b, "38%, 3/8");
    report_pass_rate(0, 0, b, sizeof b);
    assert_string_equal(b, "0%, 0/0");
}

static void test_geomean_headline(void **state) {
    (void)state;
    double x[] = {1, 4, 0.5, 8};
    assert_true(fabs(report_geomean(x, 4) - 2) < 1e-12);
    assert_true(isnan(report_geomean(x, 0)));
    // PyTorch 2.0: 0.75 x 51% + 0.25 x 21% = 43.5%
    assert_true(fabs(report_headline(1.51, 1.21) - 1.435) < 1e-12);
}

static void test_escapes(void **state) {
    (void)state;
    sbuf b = {0};
    esc_html(&b, "<script>\"x&'");
    assert_string_equal(b.s, "&lt;script&gt;&quot;x&amp;&#39;");
    sbuf_reset(&b);
    esc_csv(&b, "plain");
    assert_string_equal(b.s, "plain");
    sbuf_reset(&b);
    esc_csv(&b, "t5, \"large\"");
    assert_string_equal(b.s, "\"t5, \"\"large\"\"\"");
    sbuf_reset(&b);
    esc_csv(&b, "two\nlines");
    assert_string_equal(b.s, "\"two\nlines\"");
    sbuf_reset(&b);
    // single quotes: no backslash escapes, no `backquote` shell substitution
    esc_gnuplot(&b, "it's `rm` \\ \"q\"\n");
    assert_string_equal(b.s, "'it''s `rm` \\ \"q\" '");
    sbuf_reset(&b);
    esc_md(&b, "a|b <i> *c* mobilenet_v2 _x [l](u)");
    assert_string_equal(b.s, "a\\|b &lt;i&gt; \\*c\\* mobilenet_v2 \\_x [l\\](u)");
    free(b.s);
}

static void test_summary_numbers(void **state) {
    (void)state;
    char *md = out_file("summary.md");
    char *text = slurp(fixture);
    assert_non_null(md);
    assert_non_null(text);
    json_t *doc = json_loads(text, 0, NULL);
    assert_non_null(doc);
    static const char *const precs[] = {"fp32", "amp"}, *const wls[] = {"infer", "train"},
                             *const words[] = {"inference", "training"};
    for (int p = 0; p < 2; p++)
        for (int w = 0; w < 2; w++) {
            char heading[128], row[256];
            snprintf(heading, sizeof heading, "### compiled, %s, %s, cpu", precs[p], words[w]);
            expect hf = from_json(doc, "huggingface", precs[p], wls[w]);
            expect tm = from_json(doc, "timm", precs[p], wls[w]);
            assert_true(hf.total > 0 && tm.total > 0);
            char a[32], b[32];
            report_pass_rate(hf.passed, hf.total, a, sizeof a);
            report_pass_rate(tm.passed, tm.total, b, sizeof b);
            snprintf(row, sizeof row, "| Pass rate | %s | %s |", a, b);
            expect_row(md, heading, row);
            snprintf(row, sizeof row, "| Geomean speedup | %.2fx | %.2fx |", hf.geomean,
                     tm.geomean);
            expect_row(md, heading, row);
            snprintf(row, sizeof row, "| Mean compile time (s) | %.2f | %.2f |", hf.compile,
                     tm.compile);
            expect_row(md, heading, row);
        }
    // the fixture's failures are listed, not averaged in
    expect_row(md, "### compiled, fp32, training, cpu",
               "- Not in the geomean: timm/vit_base (fail_to_run)");
    expect_row(md, "### compiled, amp, training, cpu",
               "- Not in the geomean: huggingface/gpt2 (fail_accuracy)");
    // the headline over all suites: 0.75 x AMP + 0.25 x fp32
    for (int w = 0; w < 2; w++) {
        expect f = from_json(doc, NULL, "fp32", wls[w]), a = from_json(doc, NULL, "amp", wls[w]);
        double h = 0.75 * a.geomean + 0.25 * f.geomean;
        char row[256];
        snprintf(row, sizeof row, "| %s | all | %.2fx | %.2fx | %.2fx (%+.0f%%) |", words[w],
                 f.geomean, a.geomean, h, (h - 1) * 100);
        expect_row(md, "## Headline", row);
    }
    // every warning the dashboard knows, from the fixture's planted cases
    assert_non_null(strstr(md, "timm/resnet50 (compiled, amp, train, cpu, batch 1): compile "
                               "time 150.0 s &gt; 120 s"));
    assert_non_null(strstr(md, "huggingface/bert (compiled, amp, infer, cpu, batch 1): memory "
                               "compression 0.85x &lt; 0.9x"));
    assert_non_null(strstr(md, "(compiled, fp32, infer, cpu, batch 1): speedup 0.9"));
    assert_non_null(strstr(md, "fail_accuracy, not passing"));
    // ablation and sweep sections exist for the fixture's fused/captured and bert batches
    assert_non_null(strstr(md, "## Ablation: what fusion and what capture buy"));
    assert_non_null(strstr(md, "| huggingface/bert | compiled | 16 |"));
    // the name is escaped for Markdown: no raw tag survives
    assert_null(strstr(md, "<script>"));
    assert_non_null(strstr(md, "&lt;script&gt;\"x"));
    json_decref(doc);
    free(text);
    free(md);
}

// One RFC 4180 record from *p into fields; returns the count.
static int csv_record(const char **p, char fields[][256], int max) {
    int n = 0;
    const char *s = *p;
    for (;;) {
        char *f = fields[n];
        size_t len = 0;
        if (*s == '"') {
            for (s++;; s++) {
                if (*s == '"' && s[1] == '"')
                    f[len++] = *s++;
                else if (*s == '"') {
                    s++;
                    break;
                } else if (!*s)
                    return -1;
                else
                    f[len++] = *s;
            }
        } else {
            while (*s && *s != ',' && *s != '\r' && *s != '\n')
                f[len++] = *s++;
        }
        f[len] = '\0';
        n++;
        if (*s == ',' && n < max) {
            s++;
            continue;
        }
        if (*s == '\r' && s[1] == '\n') {
            *p = s + 2;
            return n;
        }
        return -1; // every record ends with CRLF
    }
}

static void test_csv(void **state) {
    (void)state;
    char *csv = out_file("results.csv");
    assert_non_null(csv);
    static const char *const want[] = {"dev",
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
                                       "message"};
    int ncol = (int)(sizeof want / sizeof want[0]);
    static char f[32][256];
    const char *p = csv;
    assert_int_equal(csv_record(&p, f, 32), ncol);
    for (int i = 0; i < ncol; i++)
        assert_string_equal(f[i], want[i]);
    int rows = 0;
    bool script = false, t5 = false;
    while (*p) {
        assert_int_equal(csv_record(&p, f, 32), ncol);
        rows++;
        if (!strcmp(f[1], "<script>\"x") && !strcmp(f[11], "compiled") && !strcmp(f[12], "fp32") &&
            !strcmp(f[13], "infer")) {
            script = true;
            assert_string_equal(f[14], "pass");
            assert_true(atof(f[3]) < 0.95); // the fixture's slow one
        }
        if (!strcmp(f[1], "t5, \"large\""))
            t5 = true;
        if (!strcmp(f[1], "vit_base") && !strcmp(f[14], "fail_to_run"))
            assert_string_equal(f[3], ""); // no speedup for a failed entry
    }
    assert_true(script && t5);
    char *text = slurp(fixture);
    json_t *doc = text ? json_loads(text, 0, NULL) : NULL;
    assert_non_null(doc);
    assert_int_equal(rows, (int)json_array_size(json_object_get(doc, "cases"))); // one per entry
    json_decref(doc);
    free(text);
    assert_non_null(strstr(csv, "\"<script>\"\"x\""));
    assert_non_null(strstr(csv, "\"t5, \"\"large\"\"\""));
    free(csv);
}

static void test_html_escaped(void **state) {
    (void)state;
    char *html = out_file("index.html");
    assert_non_null(html);
    assert_non_null(strstr(html, "&lt;script&gt;&quot;x"));
    assert_null(strstr(html, "<script"));
    assert_null(strstr(html, "\"x<"));
    assert_non_null(strstr(html, "t5, &quot;large&quot;"));
    // charts were not drawn (no gnuplot): the page says so and points at the scripts
    assert_non_null(strstr(html, "not drawn"));
    free(html);
}

static void test_gnuplot_script(void **state) {
    (void)state;
    char *gp = out_file("charts/speedup-compiled-fp32-infer-cpu.gp");
    char *dat = out_file("charts/speedup-compiled-fp32-infer-cpu.dat");
    assert_non_null(gp);
    assert_non_null(dat);
    // single-quoted, the double quote inside left as it is
    assert_non_null(strstr(gp, "'huggingface/<script>\"x'"));
    assert_non_null(strstr(gp, "'huggingface/t5, \"large\"'"));
    assert_null(strstr(gp, "\"huggingface/"));
    assert_non_null(strstr(gp, "noenhanced"));
    // the data holds numbers only
    assert_null(strstr(dat, "script"));
    free(gp);
    free(dat);
    char *geo = out_file("charts/geomean.gp");
    assert_non_null(geo); // the study's chart
    free(geo);
    char *roof = out_file("charts/roofline.dat"); // the fixture has a calibration
    assert_non_null(roof);
    free(roof);
    char *sweep = out_file("charts/sweep-compiled-fp32-infer-cpu.gp");
    assert_non_null(sweep);
    free(sweep);
}

static void test_no_gnuplot_one_warning(void **state) {
    (void)state;
    char *warn = out_file("warn.txt");
    assert_non_null(warn);
    int lines = 0;
    for (const char *p = warn; *p; p++)
        lines += *p == '\n';
    assert_int_equal(lines, 1);
    assert_non_null(strstr(warn, "not found"));
    free(warn);
    char path[400];
    snprintf(path, sizeof path, "%s/charts/geomean.png", outdir);
    assert_int_equal(access(path, F_OK), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pass_rate),
        cmocka_unit_test(test_geomean_headline),
        cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_summary_numbers),
        cmocka_unit_test(test_csv),
        cmocka_unit_test(test_html_escaped),
        cmocka_unit_test(test_gnuplot_script),
        cmocka_unit_test(test_no_gnuplot_one_warning),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
