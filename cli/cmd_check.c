// tcbench check: load and build suites and models, saying nothing unless wrong.
#include "cli.h"

#include <getopt.h>
#include <stdio.h>

static const char usage[] =
    "usage: tcbench check FILE...\n"
    "\n"
    "Check suite and model files without running anything. A suite (a file with a\n"
    "top-level 'cases:' key) is loaded, and every case's model built for the default\n"
    "size and for each size a case defines; a model file is loaded and built with\n"
    "batch 2 and its default parameters. Silent, exit 0, when all is well; otherwise\n"
    "the first error as one line 'file:line:col: message' on stderr, exit 2.\n"
    "A model that uses a layer known but not built yet (docs/yaml.md) is no error:\n"
    "one line on stdout names the case, 'model_fail_to_load' and the layer, and the\n"
    "check goes on (exit 0); `run` records that status for the case's entries.\n"
    "\n"
    "  -h, --help           this help\n";

static const struct option long_opts[] = {
    {"help", no_argument, NULL, 'h'},
    {0},
};

int cmd_check(int argc, char **argv) {
    const char *cmd = "check";
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", long_opts, NULL)) != -1) {
        if (c == 'h') {
            fputs(usage, stdout);
            return 0;
        }
        return cli_bad_option(cmd, c, argv);
    }
    if (optind >= argc)
        return cli_fail(cmd, "no FILE given (see tcbench check --help)");
    for (int i = optind; i < argc; i++) {
        diag d = {0};
        if (bench_check_file(argv[i], stdout, &d) < 0) {
            diag_print(&d, stderr);
            return 2;
        }
    }
    return 0;
}
