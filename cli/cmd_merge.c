// tcbench merge: the shards' results as one results file (reports/merge.h).
#include "cli.h"

#include "reports/merge.h"
#include "results/results.h"

#include <getopt.h>
#include <stdio.h>

static const char usage[] =
    "usage: tcbench merge SHARD.json... -o ALL.json [--allow-partial]\n"
    "\n"
    "Join the results of a run's shards (tcbench run --shard K/N) into one results\n"
    "file, which report, compare and export read as any other. An input is a shard's\n"
    "results file or its journal (OUTPUT.jsonl). The inputs must come from the same\n"
    "tcbench (version and git commit), the same N and the same config but the shard\n"
    "(suites, selection, settings, shard plan); else one line names two of them and\n"
    "what differs. Entries of the shard plan that no input holds (missing) or that two\n"
    "inputs hold (duplicates: the first by shard kept) are listed, and nothing is\n"
    "written unless --allow-partial. Each entry keeps the host that measured it\n"
    "(inputs[its \"input\"].host).\n"
    "Exit status: 0 merged, 2 bad input, inputs that do not go together, or missing or\n"
    "duplicate entries without --allow-partial.\n"
    "\n"
    "  -o, --output FILE    the merged results (required)\n"
    "  --allow-partial      write what there is despite missing or duplicate entries\n"
    "  -h, --help           this help\n";

enum { OPT_ALLOW_PARTIAL = 256 };

static const struct option long_opts[] = {
    {"output", required_argument, NULL, 'o'},
    {"allow-partial", no_argument, NULL, OPT_ALLOW_PARTIAL},
    {"help", no_argument, NULL, 'h'},
    {0},
};

// the most lines of a list; the rest are counted
#define MERGE_LIST_MAX 50

static void print_list(const char *head, char *const *lines, int n) {
    fprintf(stderr, "tcbench merge: %s:\n", head);
    for (int i = 0; i < n && i < MERGE_LIST_MAX; i++)
        fprintf(stderr, "  %s\n", lines[i]);
    if (n > MERGE_LIST_MAX)
        fprintf(stderr, "  ... and %d more\n", n - MERGE_LIST_MAX);
}

// The missing and duplicate entries on stderr; whether there were any.
static bool report_gaps(const merge_result *m) {
    char head[512];
    if (m->nduplicates) {
        snprintf(head, sizeof head, "%d entr%s in more than one input (the first by shard kept)",
                 m->nduplicates, m->nduplicates == 1 ? "y" : "ies");
        print_list(head, m->duplicates, m->nduplicates);
    }
    if (m->nmissing) {
        int o = snprintf(head, sizeof head, "%d of %d entries missing", m->nmissing, m->expected);
        if (m->absent[0] && o > 0 && (size_t)o < sizeof head)
            snprintf(head + o, sizeof head - (size_t)o, " (no input for shard %s of %d)", m->absent,
                     m->count);
        print_list(head, m->missing, m->nmissing);
    }
    return m->nduplicates || m->nmissing;
}

int cmd_merge(int argc, char **argv) {
    const char *cmd = "merge", *output = NULL;
    bool partial = false;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:h", long_opts, NULL)) != -1) {
        switch (c) {
        case 'o': output = optarg; break;
        case OPT_ALLOW_PARTIAL: partial = true; break;
        case 'h': fputs(usage, stdout); return 0;
        default: return cli_bad_option(cmd, c, argv);
        }
    }
    if (!output)
        return cli_fail(cmd, "-o ALL.json is required: where the merged results go");
    if (argc - optind < 1)
        return cli_fail(cmd, "expected the shards' results files (see tcbench merge --help)");
    merge_result m;
    diag d = {0};
    if (merge_shards((const char *const *)argv + optind, argc - optind, stderr, &m, &d) < 0) {
        cli_diag(cmd, &d);
        return 2;
    }
    char err[1024];
    int rc = 0;
    if (report_gaps(&m) && !partial) {
        rc = cli_fail(cmd, "nothing written; --allow-partial writes the %d entries there are",
                      m.merged);
    } else if (results_file_write(output, m.doc, err, sizeof err) < 0) {
        rc = cli_fail(cmd, "%s", err);
    } else if (m.nmissing) {
        printf("merged %d of %d entries (%d missing) of %d shards into %s\n", m.merged, m.expected,
               m.nmissing, m.count, output);
    } else {
        printf("merged %d entries of %d shards into %s\n", m.merged, m.count, output);
    }
    merge_result_free(&m);
    return rc;
}
