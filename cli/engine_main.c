// tcbench-engine: the commands of tcbench that load models and measure, and
// so link the engine (BLAS, oneDNN, CUDA): run, list, check, calibrate, plan.
// tcbench (main.c) execs it with the command line as the user typed it, so
// argv[1] is the command and argv[0] is tcbench's; it is not meant to be
// run by hand, and `tcbench --help` is the usage of both.
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    const char *cmd = argc >= 2 ? argv[1] : "";
    if (!strcmp(cmd, "run")) {
        // getopt_long permutes argv; the results keep the line as typed
        char **orig = malloc((size_t)(argc + 1) * sizeof *orig);
        if (!orig) {
            fprintf(stderr, "tcbench run: malloc: out of memory\n");
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
    if (!strcmp(cmd, "plan"))
        return cmd_plan(argc - 1, argv + 1);
    if (!strcmp(cmd, "calibrate"))
        return cmd_calibrate(argc - 1, argv + 1);
    if (!strcmp(cmd, "weights"))
        return cmd_weights(argc - 1, argv + 1);
    fprintf(stderr,
            "tcbench-engine: '%s' is none of run, list, check, calibrate, plan, weights; this program is "
            "run by tcbench for those (see tcbench --help)\n",
            cmd);
    return 2;
}
