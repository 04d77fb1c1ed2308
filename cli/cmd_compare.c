// tcbench compare: the regression gate (reports/compare.h).
#include "cli.h"

#include "history/history.h"
#include "reports/compare.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: tcbench compare BASELINE.json CURRENT.json [options]\n"
    "       tcbench compare history:BRANCH CURRENT.json [--db FILE] [--history-runs K]\n"
    "\n"
    "A verdict per entry: regression, improvement, ambiguous, noisy, same,\n"
    "insufficient (fewer than 10 samples a side), missing, new. A regression is slower\n"
    "by all of: a Mann-Whitney U test (p-values adjusted by Benjamini-Hochberg over all\n"
    "tested entries) below --alpha, a change of the median above max(--threshold,\n"
    "3 x noise), and a bootstrap 95% interval of the ratio of medians beyond that; or\n"
    "an entry that was ok/pass and now fails. A side's noise is 1.4826 MAD / median of\n"
    "its samples; above --noise-cap on a side, or marked unstable by its run, an entry\n"
    "is noisy: not called, listed apart. Results of different machines are refused;\n"
    "another thread count on one machine is compared, with a warning.\n"
    "Either file may be a run's journal (OUTPUT.jsonl: cut lines skipped with a\n"
    "warning, an entry's later line kept).\n"
    "Exit status: 0 no regression, 1 a regression (or a noisy entry with\n"
    "--fail-on-noisy), 2 bad or incomparable input: malformed JSON, a directory or\n"
    "FIFO, a file holding an invalid entry (a sample that is no plausible time).\n"
    "BASELINE history:BRANCH (or --baseline history:BRANCH) is the last K runs of\n"
    "BRANCH in the history database on CURRENT's machine (docs/history.md), each\n"
    "entry's samples pooled, every run's processes kept apart (./history:x is a file).\n"
    "\n"
    "  --threshold F        smallest relative change that counts (default 0.05)\n"
    "  --alpha F            false discovery rate (default 0.01)\n"
    "  --noise-cap F        a side's noise above this makes an entry noisy (default 0.10)\n"
    "  --fail-on-noisy      exit 1 when an entry is noisy (default: noisy passes)\n"
    "  --force              compare results of different machines anyway\n"
    "  --format FMT         text (default), md (CI job summaries), json, junit\n"
    "  --baseline B         the baseline, as the first operand would give it\n"
    "  --db FILE            history:BRANCH's database (default: $TCBENCH_HISTORY, else\n"
    "                       " HISTORY_DEFAULT_DB ")\n"
    "  --history-runs K     history:BRANCH pools its last K runs (default 5, at most 64)\n"
    "  -h, --help           this help\n";

enum {
    OPT_THRESHOLD = 256,
    OPT_ALPHA,
    OPT_NOISE_CAP,
    OPT_FAIL_ON_NOISY,
    OPT_FORCE,
    OPT_FORMAT,
    OPT_BASELINE,
    OPT_DB,
    OPT_HISTORY_RUNS
};

static const struct option long_opts[] = {
    {"threshold", required_argument, NULL, OPT_THRESHOLD},
    {"alpha", required_argument, NULL, OPT_ALPHA},
    {"noise-cap", required_argument, NULL, OPT_NOISE_CAP},
    {"fail-on-noisy", no_argument, NULL, OPT_FAIL_ON_NOISY},
    {"force", no_argument, NULL, OPT_FORCE},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"baseline", required_argument, NULL, OPT_BASELINE},
    {"db", required_argument, NULL, OPT_DB},
    {"history-runs", required_argument, NULL, OPT_HISTORY_RUNS},
    {"help", no_argument, NULL, 'h'},
    {0},
};

// A fraction in (0, 1); -1 with one line otherwise.
static int parse_fraction(const char *cmd, const char *opt, const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno == ERANGE || !isfinite(v) || v <= 0 || v >= 1) {
        cli_fail(cmd, "%s %s: expected a number between 0 and 1 (0.05 is 5%%)", opt, s);
        return -1;
    }
    *out = v;
    return 0;
}

// A positive number (a noise cap may pass 1: a bimodal sample's noise
// does); -1 with one line otherwise.
static int parse_positive(const char *cmd, const char *opt, const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno == ERANGE || !isfinite(v) || v <= 0) {
        cli_fail(cmd, "%s %s: expected a positive number (0.10 is 10%%)", opt, s);
        return -1;
    }
    *out = v;
    return 0;
}

#define HISTORY_PREFIX "history:"

// CUR against the rolling baseline of a branch in the history (history.h).
static int compare_history(const char *cmd, const char *branch, const char *db, int runs,
                           const char *cur_path, const compare_options *o) {
    if (!*branch)
        return cli_fail(cmd, "history: names no branch (history:main)");
    resfile *cur = NULL, *base = NULL;
    diag d;
    if (resfile_load(cur_path, &cur, &d) < 0) {
        diag_print(&d, stderr);
        return 2;
    }
    char err[2048];
    history_db *h = NULL;
    int rc = 2;
    if (history_open(history_default_path(db), false, &h, err, sizeof err) < 0 ||
        history_baseline(h, branch, cur, runs, &base, err, sizeof err) < 0)
        cli_fail(cmd, "%s", err);
    else
        rc = compare_loaded(base, cur, o, stdout, stderr);
    history_close(h);
    resfile_free(base);
    resfile_free(cur);
    return rc;
}

int cmd_compare(int argc, char **argv) {
    const char *cmd = "compare";
    compare_options o;
    compare_options_init(&o);
    const char *baseline = NULL, *db = NULL;
    long long runs = 5;
    bool runs_set = false;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", long_opts, NULL)) != -1) {
        switch (c) {
        case OPT_THRESHOLD:
            if (parse_fraction(cmd, "--threshold", optarg, &o.threshold) < 0)
                return 2;
            break;
        case OPT_ALPHA:
            if (parse_fraction(cmd, "--alpha", optarg, &o.alpha) < 0)
                return 2;
            break;
        case OPT_NOISE_CAP:
            if (parse_positive(cmd, "--noise-cap", optarg, &o.noise_cap) < 0)
                return 2;
            break;
        case OPT_FAIL_ON_NOISY: o.fail_on_noisy = true; break;
        case OPT_FORCE: o.force = true; break;
        case OPT_FORMAT: {
            int f = compare_format_parse(optarg);
            if (f < 0)
                return cli_fail(cmd, "--format %s: expected text, md, json or junit", optarg);
            o.format = f;
            break;
        }
        case OPT_BASELINE: baseline = optarg; break;
        case OPT_DB: db = optarg; break;
        case OPT_HISTORY_RUNS: {
            char *end;
            errno = 0;
            runs = strtoll(optarg, &end, 10);
            if (!*optarg || *end || errno || runs < 1 || runs > HISTORY_MAX_RUNS)
                return cli_fail(cmd, "--history-runs %s: expected a whole number from 1 to %d",
                                optarg, HISTORY_MAX_RUNS);
            runs_set = true;
            break;
        }
        case 'h': fputs(usage, stdout); return 0;
        default: return cli_bad_option(cmd, c, argv);
        }
    }
    if (argc - optind != (baseline ? 1 : 2))
        return cli_fail(cmd, "expected two results files, BASELINE and CURRENT (see tcbench "
                             "compare --help)");
    if (!baseline)
        baseline = argv[optind++];
    const char *cur = argv[optind];
    if (!strncmp(baseline, HISTORY_PREFIX, strlen(HISTORY_PREFIX)))
        return compare_history(cmd, baseline + strlen(HISTORY_PREFIX), db, (int)runs, cur, &o);
    if (db || runs_set)
        return cli_fail(cmd, "%s applies to a history:BRANCH baseline only",
                        db ? "--db" : "--history-runs");
    return compare_main(baseline, cur, &o, stdout, stderr);
}
