// tcbench report: results files to tables and charts (reports/report.h).
#include "cli.h"

#include "reports/planfile.h"
#include "reports/report.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

static const char usage[] =
    "usage: tcbench report RESULTS.json... [-o DIR]\n"
    "       tcbench report PLAN.json [-o DIR]\n"
    "\n"
    "Write the study's report of one or more results files (merged) into DIR:\n"
    "summary.md (the kill switches in effect; executive summary per suite x\n"
    "precision x workload: pass rate, geomean speedup over the stable entries that\n"
    "passed, each swept case once at its suite's batch, mean compile time, memory\n"
    "compression; the 0.75 x AMP + 0.25 x fp32 headline over the models in both;\n"
    "warnings, failed and unstable entries by name; ablation; per-model tables with\n"
    "noise and compile break-even), results.csv (one row per entry, PyTorch's\n"
    "column names, blank where nothing was measured), index.html (one\n"
    "self-contained page) and charts/ (gnuplot scripts, data, PNG and SVG: pass\n"
    "rate, geomean, and per model speedup, compile time, break-even, memory, with\n"
    "failed and unstable entries marked). Without gnuplot on PATH the tables are\n"
    "written, the scripts kept, and one warning printed. docs/reports.md describes\n"
    "every figure. A results file may be a run's journal (OUTPUT.jsonl: cut lines\n"
    "skipped with a warning); an entry with a sample that is no plausible time is\n"
    "shown as invalid. Exit status 2 for bad input (malformed JSON, a directory or\n"
    "FIFO, the same entry in two files).\n"
    "\n"
    "A plan file (tcbench plan -o PLAN.json: the memory-budget study) is reported\n"
    "alone: summary.md and index.html (the longest context against the budget,\n"
    "one line per case and mode, charts/plan-tokens; the numbers per budget),\n"
    "plan.csv (one row per case, mode and budget). A plan beside results files, or\n"
    "two plans, is refused (exit 2).\n"
    "\n"
    "  -o, --output DIR     where to write (default: report); created when missing\n"
    "  -h, --help           this help\n";

static const struct option long_opts[] = {
    {"output", required_argument, NULL, 'o'},
    {"help", no_argument, NULL, 'h'},
    {0},
};

// The report of a plan file (reports/planfile.h).
static int report_plan(const char *path, const char *outdir) {
    planfile *p;
    diag d;
    if (planfile_load(path, &p, &d) < 0) {
        diag_print(&d, stderr);
        return 2;
    }
    char err[1024];
    report_options o = {.outdir = outdir, .gnuplot = "gnuplot", .warn = stderr};
    int rc = 0;
    if (plan_report_write(p, &o, err, sizeof err) < 0)
        rc = cli_fail("report", "%s", err);
    else
        printf("report: %s/summary.md, %s/plan.csv, %s/index.html, %s/charts/\n", outdir, outdir,
               outdir, outdir);
    planfile_free(p);
    return rc;
}

int cmd_report(int argc, char **argv) {
    const char *cmd = "report", *outdir = "report";
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:h", long_opts, NULL)) != -1) {
        switch (c) {
        case 'o': outdir = optarg; break;
        case 'h': fputs(usage, stdout); return 0;
        default: return cli_bad_option(cmd, c, argv);
        }
    }
    int n = argc - optind;
    if (n < 1)
        return cli_fail(cmd, "no results file given (see tcbench report --help)");
    const char *plan = NULL, *other = NULL;
    for (int i = optind; i < argc; i++)
        *(planfile_sniff(argv[i]) ? plan ? &other : &plan : &other) = argv[i];
    if (plan)
        return other ? cli_fail(cmd, "%s is a plan file, reported alone: not with %s", plan, other)
                     : report_plan(plan, outdir);
    resfile **files = calloc((size_t)n, sizeof *files);
    if (!files)
        return cli_fail(cmd, "calloc: out of memory");
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        diag d;
        if (resfile_load(argv[optind + i], &files[i], &d) < 0) {
            diag_print(&d, stderr);
            rc = 2;
        }
    }
    char err[1024];
    report_options o = {.outdir = outdir, .gnuplot = "gnuplot", .warn = stderr};
    if (rc == 0 && report_write(files, n, &o, err, sizeof err) < 0)
        rc = cli_fail(cmd, "%s", err);
    if (rc == 0)
        printf("report: %s/summary.md, %s/results.csv, %s/index.html, %s/charts/\n", outdir, outdir,
               outdir, outdir);
    for (int i = 0; i < n; i++)
        resfile_free(files[i]);
    free(files);
    return rc;
}
