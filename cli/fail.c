// The one-line messages every subcommand prints on bad usage (cli.h).
// Linked by both programs, tcbench and tcbench-engine, so it uses nothing
// but the C library, getopt's globals and base/diag.
#include "cli.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int cli_fail(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tcbench %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

void cli_diag(const char *cmd, const diag *d) {
    if (!d->file[0])
        fprintf(stderr, "tcbench %s: ", cmd);
    diag_print(d, stderr);
}

int cli_bad_option(const char *cmd, int c, char **argv) {
    const char *arg = argv[optind - 1];
    if (c == ':')
        return cli_fail(cmd, "option '%s' needs a value (see tcbench %s --help)", arg, cmd);
    // a long option given a value it does not take: getopt names it in optopt
    if (optopt != 0 && strncmp(arg, "--", 2) == 0 && strchr(arg, '='))
        return cli_fail(cmd, "option '%.*s' takes no value (see tcbench %s --help)",
                        (int)(strchr(arg, '=') - arg), arg, cmd);
    if (optopt > ' ' && optopt < 127 && strncmp(arg, "--", 2) != 0)
        return cli_fail(cmd, "unknown option '-%c' (see tcbench %s --help)", optopt, cmd);
    return cli_fail(cmd, "unknown option '%s' (see tcbench %s --help)", arg, cmd);
}
