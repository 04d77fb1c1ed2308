// tcbench: benchmark eager against compiled execution of neural networks.
// main dispatches to one subcommand; docs/cli.md describes them all.
//
// This program is the lean half: it links base, results and reports only,
// so `report`, `compare` and `export` start without loading BLAS, oneDNN or
// CUDA. The commands that measure (run, list, check, calibrate) live in
// tcbench-engine (engine_main.c), which main execs with the command line
// unchanged: argv[0] and the results' command_line stay as the user typed.
#include "cli.h"

#include "tcbench_config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
    "usage: tcbench COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  run [SUITE...]       measure the cases of suites, write results JSON\n"
    "  list SUITE...        the cases of suites, with parameter counts and FLOPs\n"
    "  check FILE...        check suite and model files; silent when they are right\n"
    "  plan SUITE...        the memory-budget study: the longest context each mode of a\n"
    "                       decoder reaches within --memory, planned without running\n"
    "  calibrate            measure memory bandwidth and GEMM rate for the roofline\n"
    "  weights SUITE... -o DIR  each case's seeded weights, inputs and eager outputs as\n"
    "                       safetensors, for PyTorch to load (docs/torch.md)\n"
    "  report RESULTS...    the study's tables and charts (md, csv, html, gnuplot)\n"
    "  compare BASE CUR     the regression gate: a verdict per entry, exit 1 on a regression\n"
    "  export RESULTS       results as Google Benchmark JSON (--format gbench)\n"
    "  merge SHARD... -o F  the results of a run's shards (run --shard K/N) as one file\n"
    "  history ACTION       results across commits in SQLite: add, list, show, report\n"
    "\n"
    "  tcbench COMMAND --help   options of a command\n"
    "  tcbench --version        version and git commit\n"
    "\n"
    "run, list, check, calibrate, plan and weights are carried out by the program\n"
    "tcbench-engine, found beside tcbench or in " TCBENCH_LIBEXEC_DIR ";\n"
    "exit 2 with one line naming it when it cannot be run.\n";

// run == NULL: the command is tcbench-engine's.
static const struct command {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"run", NULL},          {"list", NULL},           {"check", NULL},
    {"calibrate", NULL},    {"plan", NULL},           {"weights", NULL},
    {"report", cmd_report}, {"compare", cmd_compare}, {"export", cmd_export},
    {"merge", cmd_merge},   {"history", cmd_history},
};
enum { NCOMMANDS = sizeof commands / sizeof commands[0] };

#define ENGINE_NAME "tcbench-engine"

// Where tcbench-engine may be, in order: beside this program (the build
// tree), where `meson install` puts it relative to bindir (which also holds
// under a DESTDIR or a moved prefix), and the configured libexecdir.
// Returns how many paths it wrote; *why gets readlink's error, if any.
static int engine_paths(char paths[3][PATH_MAX], const char **why) {
    int n = 0;
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    *why = NULL;
    if (len < 0) {
        *why = strerror(errno);
    } else {
        self[len] = '\0';
        char *slash = strrchr(self, '/');
        int dl = slash ? (int)(slash - self) : 0;
        snprintf(paths[n++], PATH_MAX, "%.*s/" ENGINE_NAME, dl, self);
        if (TCBENCH_LIBEXEC_FROM_BIN[0])
            snprintf(paths[n++], PATH_MAX, "%.*s/%s/" ENGINE_NAME, dl, self,
                     TCBENCH_LIBEXEC_FROM_BIN);
    }
    snprintf(paths[n++], PATH_MAX, "%s/" ENGINE_NAME, TCBENCH_LIBEXEC_DIR);
    return n;
}

// Runs tcbench-engine with argv as it is; returns (2) only when it could not.
static int exec_engine(const char *cmd, char **argv) {
    char paths[3][PATH_MAX];
    const char *why;
    int n = engine_paths(paths, &why);
    for (int i = 0; i < n; i++) {
        execv(paths[i], argv);
        // a path without the program: try the next; anything else is its error
        if (errno != ENOENT && errno != ENOTDIR)
            return cli_fail(cmd, "execv %s: %s", paths[i], strerror(errno));
    }
    if (why)
        return cli_fail(cmd, "execv %s: %s (readlink /proc/self/exe: %s)", paths[n - 1],
                        strerror(ENOENT), why);
    return cli_fail(cmd, "execv %s: %s (nor %s%s%s)", paths[0], strerror(ENOENT), paths[1],
                    n > 2 ? ", " : "", n > 2 ? paths[2] : "");
}

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
    for (int i = 0; i < NCOMMANDS; i++) {
        if (strcmp(cmd, commands[i].name))
            continue;
        if (!commands[i].run)
            return exec_engine(cmd, argv);
        return commands[i].run(argc - 1, argv + 1);
    }
    fprintf(stderr,
            "tcbench: unknown command '%s' (commands: run, list, check, calibrate, plan, "
            "weights, report, compare, export, merge, history; see tcbench --help)\n",
            cmd);
    return 2;
}
