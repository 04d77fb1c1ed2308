// gen_results: writes a results file of N synthetic entries, for the scale
// test of the readers (tests/scale.sh).
//
//   gen_results OUT.json N [SLOWDOWN]
//   gen_results OUT.jsonl N --journal
//
// Entries are eager / compiled pairs of models m0, m1, ... spread over four
// suites, fp32 inference on the CPU at batch 1, each with three samples
// (too few for compare's test: the scale test times the reader and the
// matching, not the bootstrap) except every 1000th pair, which has twelve.
// SLOWDOWN (default 1) multiplies the compiled entries' samples, so a
// second file compares against the first. --journal writes what a run
// writes while it runs (results/journal.h): a header line, one case a
// line, then the first case measured again (fail_accuracy: a resumed run's
// later line, which readers keep) and a cut last line (no newline).
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int case_write(FILE *f, long i, double slowdown, bool line, const char *status) {
    long model = i / 2;
    int compiled = (int)(i % 2);
    int nsamples = model % 1000 == 0 ? 12 : 3;
    double base = 1e-3 * (1 + (double)(model % 97) / 97);
    if (compiled)
        base *= 0.8 * slowdown;
    if (!status)
        status = compiled ? "pass" : "ok";
    if (fprintf(f,
                "%s{\"suite\": \"s%ld\", \"name\": \"m%ld\", \"mode\": \"%s\", "
                "\"precision\": \"fp32\", \"workload\": \"infer\", \"device\": \"cpu\", "
                "\"batch\": 1, \"status\": \"%s\", \"samples_s\": [",
                line ? ""
                : i  ? ",\n    "
                     : "\n    ",
                model % 4, model, compiled ? "compiled" : "eager", status) < 0)
        return -1;
    for (int k = 0; k < nsamples; k++)
        if (fprintf(f, "%s%.6g", k ? ", " : "", base * (1 + 0.001 * (k % 5))) < 0)
            return -1;
    return fprintf(f, "]%s}%s", compiled ? ", \"speedup\": {\"median\": 1.25}" : "",
                   line ? "\n" : "") < 0
               ? -1
               : 0;
}

static const char doc_fields[] =
    "\"schema_version\": 1, \"tool\": {\"name\": \"tcbench\", \"version\": \"gen\", "
    "\"git_commit\": \"none\"}, \"timestamp\": \"2026-01-01T00:00:00Z\", \"command_line\": "
    "[\"gen_results\"], \"host\": {\"hostname\": \"gen\", \"os\": \"Linux\", \"cpu_model\": "
    "\"gen\", \"cores\": 2, \"threads_used\": 2}, \"config\": {}";

static int journal_write(FILE *f, long n) {
    if (fprintf(f, "{\"journal\": 1, %s}\n", doc_fields) < 0)
        return -1;
    for (long i = 0; i < n; i++)
        if (case_write(f, i, 1, true, NULL) < 0)
            return -1;
    if (n > 0 && case_write(f, 0, 1, true, "fail_accuracy") < 0)
        return -1;
    return fprintf(f, "{\"suite\": \"s0\", \"name\": \"cut") < 0 ? -1 : 0;
}

static int results_write(FILE *f, long n, double slowdown) {
    if (fprintf(f, "{%s,\n  \"cases\": [", doc_fields) < 0)
        return -1;
    for (long i = 0; i < n; i++)
        if (case_write(f, i, slowdown, false, NULL) < 0)
            return -1;
    return fprintf(f, "\n  ],\n  \"wall_s\": 1\n}\n") < 0 ? -1 : 0;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: gen_results OUT.json N [SLOWDOWN | --journal]\n");
        return 2;
    }
    char *end;
    long n = strtol(argv[2], &end, 10);
    bool journal = argc == 4 && !strcmp(argv[3], "--journal");
    double slowdown = argc == 4 && !journal ? strtod(argv[3], NULL) : 1;
    if (*end || n < 0 || !(slowdown > 0)) {
        fprintf(stderr, "gen_results: N must be a count and SLOWDOWN positive\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "w");
    if (!f) {
        fprintf(stderr, "gen_results: fopen %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    int rc = journal ? journal_write(f, n) : results_write(f, n, slowdown);
    if (fclose(f) != 0 || rc < 0) {
        fprintf(stderr, "gen_results: writing %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    return 0;
}
