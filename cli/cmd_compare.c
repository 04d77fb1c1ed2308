// tcbench compare: the regression gate (reports/compare.h).
#include "cli.h"

#include "reports/compare.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char usage[] =
    "usage: tcbench compare BASELINE.json CURRENT.json [options]\n"
    "\n"
    "A verdict per entry: regression, improvement, ambiguous, noisy, same,\n"
    "insufficient (fewer than 10 samples a side), missing, new. A regression is slower\n"
    "by all of: a Mann-Whitney U test (p-values adjusted by Benjamini-Hochberg over all\n"
    "tested entries) below --alpha, a change of the median above max(--threshold,\n"
    "3 x noise), and a bootstrap 95% interval of the ratio of medians beyond that; or\n"
    "an entry that was ok/pass and now fails. A side's noise is 1.4826 MAD / median of\n"
    "its samples; above --noise-cap on a side, or marked unstable by its run, an entry\n"
    "is noisy: not called, listed apart. Results of different machines are refused.\n"
    "Either file may be a run's journal (OUTPUT.jsonl: cut lines skipped with a\n"
    "warning, an entry's later line kept).\n"
    "Exit status: 0 no regression, 1 a regression (or a noisy entry with\n"
    "--fail-on-noisy), 2 bad or incomparable input: malformed JSON, a directory or\n"
    "FIFO, a file holding an invalid entry (a sample that is no plausible time).\n"
    "\n"
    "  --threshold F        smallest relative change that counts (default 0.05)\n"
    "  --alpha F            false discovery rate (default 0.01)\n"
    "  --noise-cap F        a side's noise above this makes an entry noisy (default 0.10)\n"
    "  --fail-on-noisy      exit 1 when an entry is noisy (default: noisy passes)\n"
    "  --force              compare results of different machines anyway\n"
    "  --format FMT         text (default), md (CI job summaries), json, junit\n"
    "  -h, --help           this help\n";

enum { OPT_THRESHOLD = 256, OPT_ALPHA, OPT_NOISE_CAP, OPT_FAIL_ON_NOISY, OPT_FORCE, OPT_FORMAT };

static const struct option long_opts[] = {
    {"threshold", required_argument, NULL, OPT_THRESHOLD},
    {"alpha", required_argument, NULL, OPT_ALPHA},
    {"noise-cap", required_argument, NULL, OPT_NOISE_CAP},
    {"fail-on-noisy", no_argument, NULL, OPT_FAIL_ON_NOISY},
    {"force", no_argument, NULL, OPT_FORCE},
    {"format", required_argument, NULL, OPT_FORMAT},
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

int cmd_compare(int argc, char **argv) {
    const char *cmd = "compare";
    compare_options o;
    compare_options_init(&o);
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
        case 'h': fputs(usage, stdout); return 0;
        default: return cli_bad_option(cmd, c, argv);
        }
    }
    if (argc - optind != 2)
        return cli_fail(cmd, "expected two results files, BASELINE and CURRENT (see tcbench "
                             "compare --help)");
    return compare_main(argv[optind], argv[optind + 1], &o, stdout, stderr);
}
