// tcbench plan: the memory-budget study. For each decoder case of the
// suites and each memory budget, the longest context each mode reaches,
// planned from its step models' memory plans without values and without
// running anything (engine/bench/generate.h: gen_plan_tokens).
#include "cli.h"

#include "bench/generate.h"
#include "bench/host.h"
#include "model/suite.h"
#include "results/results.h"
#include "tcbench_config.h"

#include <getopt.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char usage[] =
    "usage: tcbench plan SUITE... [--memory LIST] [-o PLAN.json] [options]\n"
    "\n"
    "The memory-budget study of generation: for every case of the suites and every\n"
    "budget, the longest context (prompt and generated tokens) each mode reaches\n"
    "before its memory plan exceeds the budget: eager with the cache concatenated\n"
    "anew each step and unfused attention, compiled with a static cache and fused\n"
    "attention. Planned from the graphs alone: no values are made, nothing runs, so\n"
    "full-size models plan on a laptop (docs/generation.md).\n"
    "\n"
    "  --memory LIST        budgets, comma separated (6GiB, 512MiB, 1e9; default 6GiB);\n"
    "                       FROM..TO[:STEP] is FROM, FROM + STEP, ... up to TO (STEP\n"
    "                       defaults to FROM): 2GiB..24GiB is 2, 4, ..., 24 GiB\n"
    "  -o, --output FILE    also write the plan as JSON (tcbench report FILE draws it)\n"
    "  --precision P        fp32 (default) or amp: autocast to f16, the caches in f16\n"
    "  --weights TYPE       f32 (default), int8 or int4: weight-only quantization\n"
    "  --weight-group N     32, 64 or 128 (default: 32 for int4, 128 for int8)\n"
    "  --weight-scales T    f32 (default) or f16\n"
    "  --prompt-len N       prompt tokens (default: the case's prompt_len, else 32)\n"
    "  --batch-size N       sequences generated together (default: the case's batch)\n"
    "  --attention MODE     eager's attention: math (default) or sdpa\n"
    "  --size NAME          apply the suite's size NAME\n"
    "  --only NAMES         plan only these cases (comma separated, repeatable)\n"
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
    {"output", required_argument, NULL, 'o'},
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
    const char *output; // -o: the plan file, or NULL
} plan_args;

// One item of --memory: a budget, or a range FROM..TO[:STEP] (STEP
// defaults to FROM), TO one of its steps.
static int parse_budget_item(const char *cmd, char *t, plan_args *a) {
    char *dots = strstr(t, ".."), *colon = dots ? strchr(dots, ':') : NULL;
    size_t from, to, step;
    if (!dots) {
        if (a->nbudgets == PLAN_MAX_BUDGETS)
            return cli_fail(cmd, "--memory: at most %d budgets", PLAN_MAX_BUDGETS);
        return cli_parse_bytes(cmd, "--memory", t, &a->budgets[a->nbudgets++]) < 0 ? 2 : 0;
    }
    *dots = '\0';
    if (colon)
        *colon = '\0';
    if (cli_parse_bytes(cmd, "--memory", t, &from) < 0 ||
        cli_parse_bytes(cmd, "--memory", dots + 2, &to) < 0 ||
        (colon && cli_parse_bytes(cmd, "--memory", colon + 1, &step) < 0))
        return 2;
    step = colon ? step : from;
    if (to < from || (to - from) % step != 0)
        return cli_fail(cmd,
                        "--memory %s..%s: the range must end at or above its start, on one of "
                        "its steps",
                        t, dots + 2);
    if ((to - from) / step + 1 > (size_t)(PLAN_MAX_BUDGETS - a->nbudgets))
        return cli_fail(cmd, "--memory %s..%s: at most %d budgets", t, dots + 2, PLAN_MAX_BUDGETS);
    for (size_t b = from; b <= to; b += step)
        a->budgets[a->nbudgets++] = b;
    return 0;
}

static int parse_budgets(const char *cmd, const char *list, plan_args *a) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", list);
    a->nbudgets = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (parse_budget_item(cmd, t, a))
            return 2;
    return a->nbudgets ? 0 : cli_fail(cmd, "--memory: no budget given");
}

static int parse_args(int argc, char **argv, plan_args *a) {
    const char *cmd = "plan";
    long long n;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":ho:", long_opts, NULL)) != -1) {
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
        case 'o': a->output = optarg; break;
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

// Whether name is one of --only's names (each option a comma list).
static bool selected(const plan_args *a, const char *name) {
    size_t len = strlen(name);
    for (int i = 0; i < a->nonly; i++)
        for (const char *w = a->only[i]; w; w = strchr(w, ',') ? strchr(w, ',') + 1 : NULL)
            if (!strncmp(w, name, len) && (w[len] == ',' || w[len] == '\0'))
                return true;
    return a->nonly == 0;
}

static void gib(size_t b, char *buf, size_t cap) {
    snprintf(buf, cap, "%.2f GiB", (double)b / (1024.0 * 1024.0 * 1024.0));
}

// A row of the plan file (docs/results-schema.md, "The plan file"); NULL
// when memory runs out.
static json_t *plan_row_json(const char *suite, const suite_case *c, const gen_opts *o,
                             gen_kind kind, size_t budget, const gen_plan_out *po) {
    size_t peak = po->tokens ? po->peak_at_tokens : po->prefill_peak;
    // what the longest step holds besides the weights and one cache of its context
    long long cache = (long long)o->batch * po->tokens * po->kv_bytes_per_token,
              fixed = (long long)peak - (long long)po->weights_bytes - cache;
    return json_pack(
        "{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:b, s:b, s:I, s:I, s:o, s:I, s:I}", "suite", suite,
        "name", c->name, "mode", kind == GEN_EAGER ? "eager" : "compiled", "batch",
        (json_int_t)o->batch, "prompt_len", (json_int_t)o->prompt_len, "budget_bytes",
        (json_int_t)budget, "max_tokens", (json_int_t)po->tokens, "capped", po->capped,
        "weights_exceed_budget", po->weights_bytes > budget, "weights_bytes",
        (json_int_t)po->weights_bytes, "kv_bytes_per_token", (json_int_t)po->kv_bytes_per_token,
        "fixed_bytes", po->tokens && fixed >= 0 ? json_integer(fixed) : json_null(), "peak_bytes",
        (json_int_t)peak, "prefill_peak_bytes", (json_int_t)po->prefill_peak);
}

// One case at every budget, both modes: rows of the table, and of the plan
// file when rows is not NULL. -1 with the message printed (a model that is
// no decoder, a bad file, no memory for a row); 2 when no budget holds its
// weights.
static int plan_case(const plan_args *a, const char *suite, const suite_case *c, json_t *rows) {
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
            if (rows && json_array_append_new(
                            rows, plan_row_json(suite, c, &o, kind, a->budgets[b], &po)) < 0) {
                fprintf(stderr, "tcbench plan: %s: json_pack: out of memory for a row\n", c->name);
                rc = -1;
            }
        }
    modeldef_free(md);
    return rc;
}

static const char *weights_name(int bits) {
    return bits == 8 ? "int8" : bits == 4 ? "int4" : "f32";
}

static json_t *strings_json(char *const *v, int n) {
    json_t *j = json_array();
    for (int i = 0; j && i < n; i++)
        if (json_array_append_new(j, json_string(v[i])) < 0) {
            json_decref(j);
            return NULL;
        }
    return j;
}

// The plan file's document less its rows (docs/results-schema.md, "The plan
// file"); NULL when memory runs out.
static json_t *plan_doc_json(const plan_args *a, json_t *command_line, char *const *suites,
                             int nsuites) {
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *budgets = json_array();
    for (int b = 0; budgets && b < a->nbudgets; b++)
        if (json_array_append_new(budgets, json_integer((json_int_t)a->budgets[b])) < 0)
            json_decref(budgets), budgets = NULL;
    // the precision the plan used: fp32, or amp with f16 caches (docs/generation.md)
    json_t *cfg = json_pack(
        "{s:o, s:o, s:o, s:s, s:I, s:s, s:s, s:s, s:I, s:I, s:o}", "suites",
        strings_json(suites, nsuites), "size", a->size ? json_string(a->size) : json_null(), "only",
        strings_json((char *const *)a->only, a->nonly), "weights", weights_name(a->o.weight_bits),
        "weight_group", (json_int_t)a->o.weight_group, "weight_scales",
        a->o.weight_scales == DT_F16 ? "f16" : "f32", "precision", a->o.amp == DT_F32 ? "fp32" : "amp", "attention",
        a->o.fused_attention ? "sdpa" : "math", "batch_size", (json_int_t)a->o.batch, "prompt_len",
        (json_int_t)a->o.prompt_len, "budgets_bytes", budgets);
    // "kind" first: readers tell a plan from results by it (planfile_sniff)
    return json_pack("{s:s, s:i, s:{s:s, s:s, s:s}, s:s, s:o, s:o, s:o, s:[]}", "kind", "plan",
                     "schema_version", 1, "tool", "name", "tcbench", "version", TCBENCH_VERSION,
                     "git_commit", TCBENCH_GIT_COMMIT, "timestamp", stamp, "command_line",
                     command_line, "host", bench_host_json(1), "config", cfg, "rows");
}

int cmd_plan(int argc, char **argv) {
    plan_args a = {.nbudgets = 1, .budgets = {(size_t)6 << 30}, .o.weight_scales = DT_F32};
    // the command line as typed: getopt_long permutes argv
    json_t *command_line = json_pack("[s]", "tcbench");
    for (int i = 0; command_line && i < argc; i++)
        if (json_array_append_new(command_line, json_string(argv[i])) < 0)
            json_decref(command_line), command_line = NULL;
    int rc = parse_args(argc, argv, &a);
    if (rc) {
        json_decref(command_line);
        return rc < 0 ? 0 : rc;
    }
    json_t *doc = NULL, *rows = NULL;
    if (a.output) {
        doc = plan_doc_json(&a, command_line, argv + optind, argc - optind);
        if (!(rows = json_object_get(doc, "rows")))
            return cli_fail("plan", "json_pack: out of memory for the plan file");
    } else {
        json_decref(command_line);
    }
    printf("%s weights%s, batch %s, prompt %s tokens; %s, caches %s\n", weights_name(a.o.weight_bits),
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
            json_decref(doc);
            return 2;
        }
        for (int k = 0; k < s->ncases && !bad; k++)
            if (selected(&a, s->cases[k].name)) {
                found++;
                int r = plan_case(&a, s->name, &s->cases[k], rows);
                failed += r < 0;
                bad = r == 2;
            }
        suite_free(s);
    }
    rc = bad ? 2 : !found ? cli_fail("plan", "no case matches --only") : failed ? 1 : 0;
    char err[4400];
    if (doc && rc == 0 && results_file_write(a.output, doc, err, sizeof err) < 0)
        rc = cli_fail("plan", "%s", err);
    else if (doc && rc == 0)
        printf("plan: %s\n", a.output);
    else if (doc && rc == 1)
        fprintf(stderr, "tcbench plan: %s not written: a case could not be planned\n", a.output);
    json_decref(doc);
    return rc;
}
