// tcbench: benchmark eager against compiled execution of neural networks.
// main dispatches to one subcommand; docs/cli.md describes them all.
#include "cli.h"

#include "tcbench_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: tcbench COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  run [SUITE...]       measure the cases of suites, write results JSON\n"
    "  list SUITE...        the cases of suites, with parameter counts and FLOPs\n"
    "  check FILE...        check suite and model files; silent when they are right\n"
    "  calibrate            measure memory bandwidth and GEMM rate for the roofline\n"
    "  report RESULTS...    the study's tables and charts (md, csv, html, gnuplot)\n"
    "  compare BASE CUR     the regression gate: a verdict per entry, exit 1 on a regression\n"
    "  export RESULTS       results as Google Benchmark JSON (--format gbench)\n"
    "\n"
    "  tcbench COMMAND --help   options of a command\n"
    "  tcbench --version        version and git commit\n";

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        fputs(usage, stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
        printf("tcbench %s (git %s)\n", TCBENCH_VERSION, TCBENCH_GIT_COMMIT);
        return 0;
    }
    if (!strcmp(cmd, "run")) {
        // getopt_long permutes argv; the results keep the line as typed
        char **orig = malloc((size_t)(argc + 1) * sizeof *orig);
        if (!orig) {
            fprintf(stderr, "tcbench: malloc: out of memory\n");
            return 2;
        }
        memcpy(orig, argv, (size_t)(argc + 1) * sizeof *orig);
        int rc = cmd_run(argc - 1, argv + 1, argc, orig);
        free(orig);
        return rc;
    }
    if (!strcmp(cmd, "list"))
        return cmd_list(argc - 1, argv + 1);
    if (!strcmp(cmd, "check"))
        return cmd_check(argc - 1, argv + 1);
    if (!strcmp(cmd, "calibrate"))
        return cmd_calibrate(argc - 1, argv + 1);
    if (!strcmp(cmd, "report"))
        return cmd_report(argc - 1, argv + 1);
    if (!strcmp(cmd, "compare"))
        return cmd_compare(argc - 1, argv + 1);
    if (!strcmp(cmd, "export"))
        return cmd_export(argc - 1, argv + 1);
    fprintf(stderr,
            "tcbench: unknown command '%s' (commands: run, list, check, calibrate, report, "
            "compare, export; see tcbench --help)\n",
            cmd);
    return 2;
}
