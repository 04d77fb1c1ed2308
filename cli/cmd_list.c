// tcbench list: the cases of suites, with the size of each model.
#include "cli.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static const char usage[] =
    "usage: tcbench list SUITE... [--size NAME]\n"
    "\n"
    "Load the suites, build every case's model (shapes only) and print one row per\n"
    "case: case, model, batch, params (the suite's overrides), parameter count and\n"
    "GFLOPs per inference step. A case whose model uses a layer not built yet has\n"
    "'-' for both, and ends model_fail_to_load in a run.\n"
    "\n"
    "  --size NAME          apply the suite's size NAME\n"
    "  --exact              the parameter count as a whole number (109514298, not 109.5M)\n"
    "  -h, --help           this help\n";

static const struct option long_opts[] = {
    {"size", required_argument, NULL, 's'},
    {"exact", no_argument, NULL, 'x'},
    {"help", no_argument, NULL, 'h'},
    {0},
};

static void params_str(const suite_case *c, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < c->noverrides && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%s=%s", i ? "," : "", c->overrides[i].key,
                              c->overrides[i].expr);
    if (!buf[0])
        snprintf(buf, cap, "-");
}

static void print_table(const bench_plan *p, bool exact) {
    int wc = 4, wm = 5, wp = 6;
    char params[1024];
    for (int i = 0; i < p->ncases; i++) {
        const bench_case *bc = &p->cases[i];
        const char *model = modeldef_name(bc->md);
        params_str(bc->c, params, sizeof params);
        if ((int)strlen(bc->c->name) > wc)
            wc = (int)strlen(bc->c->name);
        if (model && (int)strlen(model) > wm)
            wm = (int)strlen(model);
        if ((int)strlen(params) > wp)
            wp = (int)strlen(params);
    }
    printf("%-*s %-*s %6s %-*s %10s %12s\n", wc, "case", wm, "model", "batch", wp, "params",
           "param count", "GFLOPs/step");
    for (int i = 0; i < p->ncases; i++) {
        const bench_case *bc = &p->cases[i];
        const char *model = modeldef_name(bc->md);
        char count[32], gflops[32];
        params_str(bc->c, params, sizeof params);
        if (bc->fail_to_load[0])
            snprintf(count, sizeof count, "-");
        else if (exact)
            snprintf(count, sizeof count, "%lld", (long long)bc->param_count);
        else
            cli_format_count((double)bc->param_count, count, sizeof count);
        if (bc->fail_to_load[0])
            snprintf(gflops, sizeof gflops, "-");
        else
            snprintf(gflops, sizeof gflops, "%.4g", bc->flops / 1e9);
        printf("%-*s %-*s %6lld %-*s %11s %12s\n", wc, bc->c->name, wm, model ? model : "-",
               (long long)bc->batch, wp, params, count, gflops);
    }
}

int cmd_list(int argc, char **argv) {
    const char *cmd = "list";
    bench_config cfg;
    bench_config_init(&cfg);
    bool exact = false;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", long_opts, NULL)) != -1) {
        switch (c) {
        case 's': cfg.size = optarg; break;
        case 'x': exact = true; break;
        case 'h': fputs(usage, stdout); return 0;
        default: return cli_bad_option(cmd, c, argv);
        }
    }
    if (optind >= argc)
        return cli_fail(cmd, "no SUITE given (see tcbench list --help)");
    cfg.suites = (const char *const *)argv + optind;
    cfg.nsuites = argc - optind;
    bench_plan *p;
    diag d = {0};
    if (bench_plan_new(&cfg, &p, &d) < 0) {
        cli_diag(cmd, &d);
        return 2;
    }
    print_table(p, exact);
    bench_plan_free(p);
    return 0;
}
