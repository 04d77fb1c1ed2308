// tcbench export: results in other tools' formats (reports/export.h).
#include "cli.h"

#include "reports/export.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

static const char usage[] =
    "usage: tcbench export --format gbench RESULTS.json [-o FILE]\n"
    "\n"
    "Write a results file in another tool's format. gbench: Google Benchmark's JSON\n"
    "(each sample a repetition, then mean/median/stddev/cv aggregates; an entry\n"
    "that did not pass is an error with its message), so its tools/compare.py and\n"
    "dashboards read it. docs/reports.md has the mapping. RESULTS.json may be a\n"
    "run's journal (OUTPUT.jsonl). Exit status 2 for bad input (malformed JSON, a\n"
    "directory or FIFO).\n"
    "\n"
    "  --format gbench      the format (the only one so far)\n"
    "  -o, --output FILE    where to write (default: stdout)\n"
    "  -h, --help           this help\n";

enum { OPT_FORMAT = 256 };

static const struct option long_opts[] = {
    {"format", required_argument, NULL, OPT_FORMAT},
    {"output", required_argument, NULL, 'o'},
    {"help", no_argument, NULL, 'h'},
    {0},
};

int cmd_export(int argc, char **argv) {
    const char *cmd = "export", *format = NULL, *output = NULL;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:h", long_opts, NULL)) != -1) {
        switch (c) {
        case OPT_FORMAT: format = optarg; break;
        case 'o': output = optarg; break;
        case 'h': fputs(usage, stdout); return 0;
        default: return cli_bad_option(cmd, c, argv);
        }
    }
    if (!format)
        return cli_fail(cmd, "--format is required (gbench)");
    if (strcmp(format, "gbench") != 0)
        return cli_fail(cmd, "--format %s: expected gbench", format);
    if (argc - optind != 1)
        return cli_fail(cmd, "expected one results file (see tcbench export --help)");
    resfile *f;
    diag d;
    if (resfile_load(argv[optind], &f, &d) < 0) {
        diag_print(&d, stderr);
        return 2;
    }
    FILE *out = output ? fopen(output, "w") : stdout;
    if (!out) {
        int rc = cli_fail(cmd, "fopen %s: %s", output, strerror(errno));
        resfile_free(f);
        return rc;
    }
    char err[512];
    int rc = export_gbench(f, out, err, sizeof err) < 0 ? cli_fail(cmd, "%s", err) : 0;
    if (output && fclose(out) != 0 && rc == 0)
        rc = cli_fail(cmd, "fclose %s: %s", output, strerror(errno));
    resfile_free(f);
    return rc;
}
