// tcbench history: results across commits in one SQLite file
// (history/history.h, docs/history.md).
#include "cli.h"

#include "history/history.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static const char usage[] =
    "usage: tcbench history add RESULTS.json [--db FILE] [--commit SHA] --branch NAME\n"
    "       tcbench history list [--db FILE]\n"
    "       tcbench history show ENTRY [--db FILE] [--host HOST]\n"
    "       tcbench history report [--db FILE] [-o DIR]\n"
    "\n"
    "Keep every run's results in one SQLite database (WAL mode; docs/history.md).\n"
    "add stores a run: its machine, settings, commit and branch, and each entry's\n"
    "samples with their median, mean, noise, n, status and speedup, in one\n"
    "transaction; the same run twice, a file the results reader refuses and a file\n"
    "with an invalid entry are refused (exit 2). list prints the runs; show prints\n"
    "one entry's series on one machine (ENTRY: 'suite/name mode precision workload\n"
    "device batch', or its start when that names one entry); report draws a chart\n"
    "per entry and machine over the runs with the steps found, listed in\n"
    "DIR/history.md. tcbench compare history:BRANCH CUR.json gates against the\n"
    "last runs of a branch (tcbench compare --help).\n"
    "\n"
    "  --db FILE            the database (default: $TCBENCH_HISTORY, else\n"
    "                       " HISTORY_DEFAULT_DB "); add creates it\n"
    "  --commit SHA         add: the run's commit (default: the results' git_commit)\n"
    "  --branch NAME        add: the branch the commit is on (required)\n"
    "  --host HOST          show: the machine, a hostname or the start of the\n"
    "                       fingerprint list prints (default: the newest run's)\n"
    "  -o, --output DIR     report: where to write (default: history-report)\n"
    "  --gnuplot PROG       report: the gnuplot to run (default: gnuplot)\n"
    "  -h, --help           this help\n";

enum { OPT_DB = 256, OPT_COMMIT, OPT_BRANCH, OPT_HOST, OPT_GNUPLOT };

static const struct option long_opts[] = {
    {"db", required_argument, NULL, OPT_DB},
    {"commit", required_argument, NULL, OPT_COMMIT},
    {"branch", required_argument, NULL, OPT_BRANCH},
    {"host", required_argument, NULL, OPT_HOST},
    {"output", required_argument, NULL, 'o'},
    {"gnuplot", required_argument, NULL, OPT_GNUPLOT},
    {"help", no_argument, NULL, 'h'},
    {0},
};

typedef struct hist_args {
    const char *db, *commit, *branch, *host, *output, *gnuplot;
} hist_args;

// What each action takes: its operands, and the options that are its own.
static const struct action {
    const char *name;
    int operands;
    int own[3]; // the action's options, by their codes (0 ends)
} actions[] = {
    {"add", 1, {OPT_COMMIT, OPT_BRANCH}},
    {"list", 0, {0}},
    {"show", 1, {OPT_HOST}},
    {"report", 0, {'o', OPT_GNUPLOT}},
};

static bool action_takes(const struct action *ac, int o) {
    for (int i = 0; i < 3 && ac->own[i]; i++)
        if (ac->own[i] == o)
            return true;
    return o == OPT_DB;
}

static int run_action(const char *act, history_db *h, char **ops, const hist_args *a, char *err,
                      size_t cap) {
    if (!strcmp(act, "add"))
        return history_add(h, ops[0], &(history_add_opts){a->commit, a->branch}, stdout, err, cap);
    if (!strcmp(act, "list"))
        return history_list(h, stdout, err, cap);
    if (!strcmp(act, "show"))
        return history_show(h, ops[0], a->host, stdout, err, cap);
    return history_report(h, a->output ? a->output : "history-report",
                          a->gnuplot ? a->gnuplot : "gnuplot", stderr, err, cap);
}

int cmd_history(int argc, char **argv) {
    const char *cmd = "history";
    hist_args a = {0};
    int c;
    char seen[OPT_GNUPLOT + 1] = {0};
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":ho:", long_opts, NULL)) != -1) {
        switch (c) {
        case OPT_DB: a.db = optarg; break;
        case OPT_COMMIT: a.commit = optarg; break;
        case OPT_BRANCH: a.branch = optarg; break;
        case OPT_HOST: a.host = optarg; break;
        case 'o': a.output = optarg; break;
        case OPT_GNUPLOT: a.gnuplot = optarg; break;
        case 'h': fputs(usage, stdout); return 0;
        default: return cli_bad_option(cmd, c, argv);
        }
        seen[c] = 1;
    }
    if (optind >= argc)
        return cli_fail(cmd, "expected an action: add, list, show or report (see tcbench history "
                             "--help)");
    const char *act = argv[optind++];
    const struct action *ac = NULL;
    for (size_t i = 0; i < sizeof actions / sizeof actions[0]; i++)
        if (!strcmp(actions[i].name, act))
            ac = &actions[i];
    if (!ac)
        return cli_fail(cmd, "unknown action '%s' (actions: add, list, show, report)", act);
    if (argc - optind != ac->operands)
        return cli_fail(cmd, "%s takes %s (see tcbench history --help)", act,
                        ac->operands ? (!strcmp(act, "add") ? "one results file" : "one ENTRY")
                                     : "no operand");
    for (int o = 0; o <= OPT_GNUPLOT; o++) {
        if (!seen[o] || action_takes(ac, o))
            continue;
        for (const struct option *lo = long_opts; lo->name; lo++)
            if (lo->val == o)
                return cli_fail(cmd, "--%s does not apply to history %s", lo->name, act);
    }
    if (!strcmp(act, "add") && !a.branch)
        return cli_fail(cmd, "add needs --branch NAME (the branch of the run's commit, e.g. "
                             "main)");
    char err[2048];
    history_db *h;
    const char *path = history_default_path(a.db);
    if (history_open(path, !strcmp(act, "add"), &h, err, sizeof err) < 0)
        return cli_fail(cmd, "%s", err);
    int rc = run_action(act, h, argv + optind, &a, err, sizeof err);
    history_close(h);
    return rc < 0 ? cli_fail(cmd, "%s", err) : 0;
}
