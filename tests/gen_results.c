// gen_results: writes a results file of N synthetic entries, for the scale
// test of the readers (tests/scale.sh).
//
//   gen_results OUT.json N [SLOWDOWN]
//
// Entries are eager / compiled pairs of models m0, m1, ... spread over four
// suites, fp32 inference on the CPU at batch 1, each with three samples
// (too few for compare's test: the scale test times the reader and the
// matching, not the bootstrap) except every 1000th pair, which has twelve.
// SLOWDOWN (default 1) multiplies the compiled entries' samples, so a
// second file compares against the first.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int case_write(FILE *f, long i, double slowdown) {
    long model = i / 2;
    int compiled = (int)(i % 2);
    int nsamples = model % 1000 == 0 ? 12 : 3;
    double base = 1e-3 * (1 + (double)(model % 97) / 97);
    if (compiled)
        base *= 0.8 * slowdown;
    if (fprintf(f,
                "%s\n    {\"suite\": \"s%ld\", \"name\": \"m%ld\", \"mode\": \"%s\", "
                "\"precision\": \"fp32\", \"workload\": \"infer\", \"device\": \"cpu\", "
                "\"batch\": 1, \"status\": \"%s\", \"samples_s\": [",
                i ? "," : "", model % 4, model, compiled ? "compiled" : "eager",
                compiled ? "pass" : "ok") < 0)
        return -1;
    for (int k = 0; k < nsamples; k++)
        if (fprintf(f, "%s%.6g", k ? ", " : "", base * (1 + 0.001 * (k % 5))) < 0)
            return -1;
    return fprintf(f, "]%s}", compiled ? ", \"speedup\": {\"median\": 1.25}" : "") < 0 ? -1 : 0;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: gen_results OUT.json N [SLOWDOWN]\n");
        return 2;
    }
    char *end;
    long n = strtol(argv[2], &end, 10);
    double slowdown = argc == 4 ? strtod(argv[3], NULL) : 1;
    if (*end || n < 0 || !(slowdown > 0)) {
        fprintf(stderr, "gen_results: N must be a count and SLOWDOWN positive\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "w");
    if (!f) {
        fprintf(stderr, "gen_results: fopen %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    int rc = fprintf(f, "{\n  \"schema_version\": 1,\n  \"tool\": {\"name\": \"tcbench\", "
                        "\"version\": \"gen\", \"git_commit\": \"none\"},\n  \"timestamp\": "
                        "\"2026-01-01T00:00:00Z\",\n  \"command_line\": [\"gen_results\"],\n  "
                        "\"host\": {\"hostname\": \"gen\", \"os\": \"Linux\", \"cpu_model\": "
                        "\"gen\", \"cores\": 2, \"threads_used\": 2},\n  \"config\": {},\n  "
                        "\"cases\": [") < 0
                 ? -1
                 : 0;
    for (long i = 0; i < n && rc == 0; i++)
        rc = case_write(f, i, slowdown);
    if (rc == 0 && fprintf(f, "\n  ],\n  \"wall_s\": 1\n}\n") < 0)
        rc = -1;
    if (fclose(f) != 0 || rc < 0) {
        fprintf(stderr, "gen_results: writing %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    return 0;
}
