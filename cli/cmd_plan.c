// tcbench plan: the memory-budget study. For each decoder case of the
// suites and each memory budget, the longest context each mode reaches,
// planned from its step models' memory plans without values and without
// running anything (engine/bench/generate.h: gen_plan_tokens).
#include "cli.h"

#include "bench/generate.h"
#include "model/suite.h"

#include <getopt.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: tcbench plan SUITE... [--memory LIST] [options]\n"
    "\n"
    "The memory-budget study of generation: for every case of the suites and every\n"
    "budget, the longest context (prompt and generated tokens) each mode reaches\n"
    "before its memory plan exceeds the budget: eager with the cache concatenated\n"
    "anew each step and unfused attention, compiled with a static cache and fused\n"
    "attention. Planned from the graphs alone: no values are made, nothing runs, so\n"
    "full-size models plan on a laptop (docs/generation.md).\n"
    "\n"
    "  --memory LIST        budgets, comma separated (6GiB, 512MiB, 1e9; default 6GiB)\n"
    "  --precision P        fp32 (default) or amp: autocast to f16, the caches in f16\n"
    "  --weights TYPE       f32 (default), int8 or int4: weight-only quantization\n"
    "  --weight-group N     32, 64 or 128 (default: 32 for int4, 128 for int8)\n"
    "  --weight-scales T    f32 (default) or f16\n"
    "  --prompt-len N       prompt tokens (default: the case's prompt_len, else 32)\n"
    "  --batch-size N       sequences generated together (default: the case's batch)\n"
    "  --attention MODE     eager's attention: math (default) or sdpa\n"
    "  --size NAME          apply the suite's size NAME\n"
    "  --only NAME          plan only the case NAME (repeatable)\n"
    "  -h, --help           this help\n";

enum { OPT_MEMORY = 256, OPT_WEIGHTS, OPT_GROUP, OPT_SCALES, OPT_PROMPT, OPT_BATCH, OPT_ATTN,
       OPT_SIZE, OPT_ONLY, OPT_PRECISION };

static const struct option long_opts[] = {
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"weights", required_argument, NULL, OPT_WEIGHTS},
    {"weight-group", required_argument, NULL, OPT_GROUP},
    {"weight-scales", required_argument, NULL, OPT_SCALES},
    {"prompt-len", required_argument, NULL, OPT_PROMPT},
    {"batch-size", required_argument, NULL, OPT_BATCH},
    {"attention", required_argument, NULL, OPT_ATTN},
    {"size", required_argument, NULL, OPT_SIZE},
    {"only", required_argument, NULL, OPT_ONLY},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"help", no_argument, NULL, 'h'},
    {0},
};

#define PLAN_MAX_BUDGETS 32
#define PLAN_MAX_ONLY    64

typedef struct plan_args {
    size_t budgets[PLAN_MAX_BUDGETS];
    int nbudgets;
    gen_opts o; // batch and prompt 0: the case's
    const char *size;
    const char *only[PLAN_MAX_ONLY];
    int nonly;
} plan_args;

static int parse_budgets(const char *cmd, const char *list, plan_args *a) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", list);
    a->nbudgets = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (a->nbudgets == PLAN_MAX_BUDGETS)
            return cli_fail(cmd, "--memory: at most %d budgets", PLAN_MAX_BUDGETS);
        if (cli_parse_bytes(cmd, "--memory", t, &a->budgets[a->nbudgets]) < 0)
            return 2;
        a->nbudgets++;
    }
    return a->nbudgets ? 0 : cli_fail(cmd, "--memory: no budget given");
}

static int parse_args(int argc, char **argv, plan_args *a) {
    const char *cmd = "plan";
    long long n;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", long_opts, NULL)) != -1) {
        switch (c) {
        case OPT_MEMORY:
            if (parse_budgets(cmd, optarg, a))
                return 2;
            break;
        case OPT_WEIGHTS:
        case OPT_GROUP:
        case OPT_SCALES:
        case OPT_ATTN: {
            cli_gen_opts go = {&a->o.weight_bits, &a->o.weight_group, &a->o.weight_scales,
                               &a->o.fused_attention};
            const char *opt = c == OPT_WEIGHTS ? "--weights"
                              : c == OPT_GROUP ? "--weight-group"
                              : c == OPT_SCALES ? "--weight-scales"
                                                : "--attention";
            if (cli_parse_gen_option(cmd, opt, optarg, &go))
                return 2;
            break;
        }
        case OPT_PROMPT:
            if (cli_parse_int(cmd, "--prompt-len", optarg, 1, 1 << 24, &n) < 0)
                return 2;
            a->o.prompt_len = n;
            break;
        case OPT_BATCH:
            if (cli_parse_int(cmd, "--batch-size", optarg, 1, 1 << 20, &n) < 0)
                return 2;
            a->o.batch = n;
            break;
        case OPT_PRECISION: {
            int v = bench_axis_parse(BENCH_AXIS_PRECISION, optarg);
            if (v < 0)
                return cli_fail(cmd, "--precision %s: fp32 or amp", optarg);
            a->o.amp = v == BENCH_PREC_AMP ? DT_F16 : DT_F32;
            break;
        }
        case OPT_SIZE: a->size = optarg; break;
        case OPT_ONLY:
            if (a->nonly == PLAN_MAX_ONLY)
                return cli_fail(cmd, "--only: at most %d names", PLAN_MAX_ONLY);
            a->only[a->nonly++] = optarg;
            break;
        case 'h': fputs(usage, stdout); return -1;
        default: return cli_bad_option(cmd, c, argv);
        }
    }
    if (optind >= argc)
        return cli_fail(cmd, "no SUITE given (see tcbench plan --help)");
    if (a->o.weight_bits && !a->o.weight_group)
        a->o.weight_group = a->o.weight_bits == 4 ? 32 : 128;
    return 0;
}

static bool selected(const plan_args *a, const char *name) {
    for (int i = 0; i < a->nonly; i++)
        if (!strcmp(a->only[i], name))
            return true;
    return a->nonly == 0;
}

static void gib(size_t b, char *buf, size_t cap) {
    snprintf(buf, cap, "%.2f GiB", (double)b / (1024.0 * 1024.0 * 1024.0));
}

// One case at every budget, both modes: rows of the table. -1 with the
// message printed (a model that is no decoder, a bad file); 2 when no
// budget holds its weights.
static int plan_case(const plan_args *a, const suite_case *c) {
    modeldef *md;
    diag d = {0};
    if (modeldef_load(c->model_path, &md, &d) < 0) {
        diag_print(&d, stderr);
        return -1;
    }
    gen_opts o = a->o;
    o.batch = o.batch ? o.batch : c->batch;
    o.prompt_len = o.prompt_len ? o.prompt_len : c->prompt_len ? c->prompt_len : 32;
    int rc = 0;
    size_t most = 0;
    for (int b = 0; b < a->nbudgets; b++)
        most = a->budgets[b] > most ? a->budgets[b] : most;
    for (int b = 0; b < a->nbudgets && rc == 0; b++)
        for (int k = 0; k < 2 && rc == 0; k++) {
            gen_plan_out po;
            char err[600], w[32], pre[32], bud[32];
            gen_kind kind = k ? GEN_COMPILED : GEN_EAGER;
            if (gen_plan_tokens(md, c->overrides, c->noverrides, &o, kind, a->budgets[b], &po,
                                err, sizeof err) < 0) {
                fprintf(stderr, "tcbench plan: %s: %s\n", c->name, err);
                rc = -1;
                break;
            }
            gib(a->budgets[b], bud, sizeof bud);
            gib(po.weights_bytes, w, sizeof w);
            if (po.weights_bytes > most) { // no budget holds even the weights: bad input
                gib(most, pre, sizeof pre);
                fprintf(stderr,
                        "tcbench plan: %s: its weights alone need %s, more than the largest "
                        "budget, %s (--memory; --weights int4 shrinks them)\n",
                        c->name, w, pre);
                rc = 2;
                break;
            }
            gib(po.prefill_peak, pre, sizeof pre);
            printf("%-12s %-9s %10s %10lld %12s %14s %12lld%s\n", c->name, k ? "compiled" : "eager",
                   bud, (long long)po.kv_bytes_per_token, w, pre,
                   (long long)po.tokens,
                   po.tokens == 0 ? " (the prefill does not fit)"
                   : po.capped    ? " (the model's positions)"
                                  : "");
        }
    modeldef_free(md);
    return rc;
}

int cmd_plan(int argc, char **argv) {
    plan_args a = {.nbudgets = 1, .budgets = {(size_t)6 << 30}, .o.weight_scales = DT_F32};
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    printf("%s weights%s, batch %s, prompt %s tokens; %s, caches %s\n",
           a.o.weight_bits == 8   ? "int8"
           : a.o.weight_bits == 4 ? "int4"
                                  : "f32",
           a.o.fused_attention ? ", eager attention sdpa" : "", a.o.batch ? "given" : "the case's",
           a.o.prompt_len ? "given" : "the case's", a.o.amp == DT_F32 ? "fp32" : "amp",
           dtype_name(a.o.amp));
    printf("%-12s %-9s %10s %10s %12s %14s %12s\n", "case", "mode", "budget", "kv B/token",
           "weights", "prefill peak", "max tokens");
    int found = 0, failed = 0;
    bool bad = false;
    for (int i = optind; i < argc && !bad; i++) {
        suite *s;
        diag d = {0};
        if (suite_load(argv[i], a.size, &s, &d) < 0) {
            diag_print(&d, stderr);
            return 2;
        }
        for (int k = 0; k < s->ncases && !bad; k++)
            if (selected(&a, s->cases[k].name)) {
                found++;
                int r = plan_case(&a, &s->cases[k]);
                failed += r < 0;
                bad = r == 2;
            }
        suite_free(s);
    }
    if (bad)
        return 2;
    if (!found)
        return cli_fail("plan", "no case matches --only");
    return failed ? 1 : 0;
}
