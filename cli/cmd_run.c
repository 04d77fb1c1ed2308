// tcbench run: measure the cases of suites and write the results JSON.
#include "cli.h"
#include "progress.h"

#include "base/files.h"
#include "bench/estimate.h"
#include "bench/resume.h"
#include "bench/shard.h"
#include "reports/runtable.h"
#include "tcbench_config.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
    "usage: tcbench run [SUITE...] [options]\n"
    "\n"
    "Measure every case of the suites (default: the smoke suite) in each mode, eager and\n"
    "compiled interleaved in one process per case, check accuracy first (eager against\n"
    "the fp64 reference, compiled against eager and fp64), and write the results JSON.\n"
    "\n"
    "selection:\n"
    "  --only NAME          run only the case NAME (repeatable, or a comma list); a name\n"
    "                       no suite has is an error that names the closest case\n"
    "  --filter REGEX       run only cases whose name matches (POSIX extended regex)\n"
    "  --exclude REGEX      skip cases whose name matches (a selection that leaves no\n"
    "                       case is an error that lists the cases)\n"
    "  --size NAME          apply the suite's size NAME (e.g. tiny, small)\n"
    "  --batch-size N       replace every case's batch size with N\n"
    "  --batch-sizes LIST   sweep: run every case at each batch size (1,4,16,64), each\n"
    "                       size once; not with --batch-size\n"
    "  --prompt-len N       generate workload: N prompt tokens in every case (over the\n"
    "                       suite's prompt_len; default 32)\n"
    "  --new-tokens N       generate workload: N tokens decoded after the prompt (over\n"
    "                       new_tokens; default 32)\n"
    "  --rounds N           chat workload: N rounds of a user turn (the prompt length)\n"
    "                       and its answer (the new tokens); over rounds; default 4\n"
    "  --shard K/N          only shard K of N (1 <= K <= N): a share of the selection,\n"
    "                       balanced by estimated cost, the same on every machine\n"
    "                       (Slurm: --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT\n"
    "                       with --array=1-N); tcbench merge joins the shards' results\n"
    "what to run:\n"
    "  --mode LIST          eager, compiled, fused (fusion only), captured (capture only);\n"
    "                       any compiled-family mode brings eager along as its baseline\n"
    "  --precision LIST     fp32, amp (autocast to f16 with PyTorch's CUDA policy, f32\n"
    "                       master weights; docs/amp.md)\n"
    "  --amp-dtype TYPE     amp's low dtype: fp16 (default) or bf16 (autocast's same\n"
    "                       policy; 8 mantissa bits instead of 11, f32's range)\n"
    "  --attention KIND     math (default: attention layers as matmul, softmax, matmul)\n"
    "                       or sdpa (one fused attention op, as PyTorch's SDPA)\n"
    "  --workload LIST      infer, train (a whole step: forward, loss, backward and the\n"
    "                       suite's optimizer, AdamW lr 0.01 by default)\n"
    "                       (default for the three lists above: the suite's defaults\n"
    "                       that this build can run)\n"
    "  --device LIST        cpu, cuda (an NVIDIA GPU; without a usable one, exit 2 with\n"
    "                       the driver's reason), auto (default: cuda when a usable GPU\n"
    "                       is found, else cpu)\n"
    "  --grad-scaler        dynamic loss scaling (PyTorch's GradScaler) for --precision amp\n"
    "                       --workload train; off by default, as in PyTorch's harness\n"
    "  --weights TYPE       f32 (default), int8, int4: weight-only quantization of the\n"
    "                       linear layers, inference only (docs/cli.md)\n"
    "  --weight-group N     inputs per scale: 32, 64, 128 (default 32 for int4, 128 for int8)\n"
    "  --weight-scales TYPE the scales' dtype: f32 (default) or f16\n"
    "measuring:\n"
    "  --threads N          threads per case (default: online cores; more than that\n"
    "                       warns, as threads then share cores)\n"
    "  --repeat N           interleaved rounds per case at least, one sample of every\n"
    "                       mode each (default 10); more while a speedup's 95% interval\n"
    "                       is wider than 5% of it, within --max-time\n"
    "  --warmup N           N warm-up steps per mode (default: until the step time\n"
    "                       settles: at least 3 steps and 0.2 s, at most 1 s)\n"
    "  --min-time S         timed rounds last at least S seconds per entry (default 0.1)\n"
    "  --max-time S         no extra round once an entry has S seconds of samples\n"
    "                       (default 1; --repeat rounds are always taken)\n"
    "  --processes N        measure each case in N processes, one after the other, and\n"
    "                       pool their samples (default 3): a process's memory layout\n"
    "                       moves its times, and the spread of the processes' medians\n"
    "                       goes into the entry's noise; the budget above is per process\n"
    "  --pin                pin each measuring thread to one CPU\n"
    "  --timeout S          seconds per case before it is killed (default 600)\n"
    "  --seed N             seed for parameters and inputs (default 0)\n"
    "  --no-accuracy        skip the accuracy checks (fp64 reference and against eager)\n"
    "  --tf32               cuda: f32 GEMMs and convolutions may use TF32 tensor cores\n"
    "                       (off by default, as PyTorch's matmul default)\n"
    "  --flush-l2           cuda: flush the GPU's L2 cache before every sample, one step\n"
    "                       per sample (cold-cache timing)\n"
    "  --memory-limit BYTES cap each case's tensor memory (6GiB, 512MiB, 1e9): a step\n"
    "                       that needs more ends oom, naming the node\n"
    "output:\n"
    "  --dump DIR           write each compiled-family mode's generated C and fused graph\n"
    "                       under DIR/CASE/MODE\n"
    "  -o, --output FILE    results JSON (default results/tcbench-YYYYmmdd-HHMMSS.json);\n"
    "                       finished cases stream to FILE.jsonl as they end\n"
    "  --resume FILE.jsonl  go on with a stopped run from its journal: what it holds is\n"
    "                       kept, the rest measured, FILE written; with no other option,\n"
    "                       the run's own options (else they must match its config)\n"
    "  -q, --quiet          no progress on stderr (the busy-machine warning stays)\n"
    "  -h, --help           this help\n"
    "\n"
    "exit status: 0 every entry ok (eager) or pass (compiled-family), 1 some entry\n"
    "failed (results still written), 2 bad input or usage (an -o that is a directory,\n"
    "cannot be written, or that another run is writing), 3 the results or the\n"
    "journal could not be written (a line says which entries are safe, and where),\n"
    "130 interrupted (Ctrl-C: the journal keeps the finished entries; a second\n"
    "Ctrl-C stops at once). An entry whose figure cannot be called (noise, a wide\n"
    "interval, other work on the machine) is marked unstable (~) and left out of the\n"
    "geomeans; it does not change the exit status.\n"
    "The compile step obeys TCBENCH_DISABLE_FUSION, TCBENCH_DISABLE_CAPTURE,\n"
    "TCBENCH_LOG=fusion, TCBENCH_CC (docs/cli.md).\n";

enum {
    OPT_ONLY = 256,
    OPT_FILTER,
    OPT_EXCLUDE,
    OPT_SIZE,
    OPT_BATCH,
    OPT_BATCHES,
    OPT_THREADS,
    OPT_REPEAT,
    OPT_TIMEOUT,
    OPT_SEED,
    OPT_MODE,
    OPT_PRECISION,
    OPT_WORKLOAD,
    OPT_DEVICE,
    OPT_NO_ACC,
    OPT_DUMP,
    OPT_GRAD_SCALER,
    OPT_AMP_DTYPE,
    OPT_WEIGHTS,
    OPT_PROMPT_LEN,
    OPT_NEW_TOKENS,
    OPT_ROUNDS,
    OPT_WEIGHT_GROUP,
    OPT_WEIGHT_SCALES,
    OPT_ATTENTION,
    OPT_TF32,
    OPT_FLUSH_L2,
    OPT_MEMORY_LIMIT,
    OPT_WARMUP,
    OPT_MIN_TIME,
    OPT_MAX_TIME,
    OPT_PROCESSES,
    OPT_PIN,
    OPT_RESUME,
    OPT_SHARD
};

// the axis options are consecutive, in axis order, for `c - OPT_MODE`
_Static_assert(OPT_PRECISION - OPT_MODE == BENCH_AXIS_PRECISION &&
                   OPT_WORKLOAD - OPT_MODE == BENCH_AXIS_WORKLOAD &&
                   OPT_DEVICE - OPT_MODE == BENCH_AXIS_DEVICE,
               "axis options follow enum bench_axis");

static const struct option long_opts[] = {
    {"only", required_argument, NULL, OPT_ONLY},
    {"filter", required_argument, NULL, OPT_FILTER},
    {"exclude", required_argument, NULL, OPT_EXCLUDE},
    {"size", required_argument, NULL, OPT_SIZE},
    {"batch-size", required_argument, NULL, OPT_BATCH},
    {"batch-sizes", required_argument, NULL, OPT_BATCHES},
    {"prompt-len", required_argument, NULL, OPT_PROMPT_LEN},
    {"new-tokens", required_argument, NULL, OPT_NEW_TOKENS},
    {"rounds", required_argument, NULL, OPT_ROUNDS},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"repeat", required_argument, NULL, OPT_REPEAT},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"seed", required_argument, NULL, OPT_SEED},
    {"output", required_argument, NULL, 'o'},
    {"mode", required_argument, NULL, OPT_MODE},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"workload", required_argument, NULL, OPT_WORKLOAD},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"no-accuracy", no_argument, NULL, OPT_NO_ACC},
    {"dump", required_argument, NULL, OPT_DUMP},
    {"grad-scaler", no_argument, NULL, OPT_GRAD_SCALER},
    {"amp-dtype", required_argument, NULL, OPT_AMP_DTYPE},
    {"weights", required_argument, NULL, OPT_WEIGHTS},
    {"weight-group", required_argument, NULL, OPT_WEIGHT_GROUP},
    {"weight-scales", required_argument, NULL, OPT_WEIGHT_SCALES},
    {"attention", required_argument, NULL, OPT_ATTENTION},
    {"tf32", no_argument, NULL, OPT_TF32},
    {"flush-l2", no_argument, NULL, OPT_FLUSH_L2},
    {"memory-limit", required_argument, NULL, OPT_MEMORY_LIMIT},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"min-time", required_argument, NULL, OPT_MIN_TIME},
    {"max-time", required_argument, NULL, OPT_MAX_TIME},
    {"processes", required_argument, NULL, OPT_PROCESSES},
    {"pin", no_argument, NULL, OPT_PIN},
    {"resume", required_argument, NULL, OPT_RESUME},
    {"shard", required_argument, NULL, OPT_SHARD},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {0},
};

// The smoke suite: $TCBENCH_SUITES_DIR, else the source tree (the
// environment's TCBENCH_SOURCE_DIR over the configured one) when it has
// one, else the installed data directory.
static void default_suite(char *buf, size_t cap) {
    const char *dir = getenv("TCBENCH_SUITES_DIR");
    if (dir && *dir) {
        snprintf(buf, cap, "%s/smoke.yaml", dir);
        return;
    }
    const char *src = getenv("TCBENCH_SOURCE_DIR");
    snprintf(buf, cap, "%s/suites/smoke.yaml", src && *src ? src : TCBENCH_SOURCE_DIR);
    if (access(buf, R_OK) != 0)
        snprintf(buf, cap, "%s/suites/smoke.yaml", TCBENCH_DATA_DIR);
}

// "bert_tiny", or "bert_tiny [fp32 infer]" when tasks differ in more than
// the case and the mode (the mode has its own column; with_mode adds it).
static void task_label(const bench_plan *p, int task, bool with_mode, char *buf, size_t cap) {
    const bench_task *t = &p->tasks[task];
    size_t o = (size_t)snprintf(buf, cap, "%s", p->cases[t->case_index].c->name);
    if (p->cfg.nbatches > 0 && o < cap) // a batch-size sweep: name the batch
        o += (size_t)snprintf(buf + o, cap - o, " b%lld", (long long)p->cases[t->case_index].batch);
    bool open = false;
    for (int a = 0; a < BENCH_AXIS_COUNT && o < cap; a++) {
        int used = 0;
        for (int v = 0; v < bench_axis_size(a); v++)
            used += p->used[a][v];
        if (used > 1 && (a != BENCH_AXIS_MODE || with_mode)) {
            o += (size_t)snprintf(buf + o, cap - o, "%s%s", open ? " " : " [",
                                  bench_axis_value(a, t->axis[a]));
            open = true;
        }
    }
    if (open && o < cap)
        snprintf(buf + o, cap - o, "]");
}

typedef struct run_ui {
    progress pg;
} run_ui;

static void on_start(const bench_plan *p, int group, void *user) {
    char label[300];
    int first = p->groups[group].first;
    task_label(p, first, false, label, sizeof label);
    progress_start(&((run_ui *)user)->pg, first, label);
}

static void on_tick(const bench_plan *p, int group, double elapsed, void *user) {
    char label[300];
    int first = p->groups[group].first;
    task_label(p, first, false, label, sizeof label);
    progress_tick(&((run_ui *)user)->pg, first, label, elapsed);
}

static void on_done(const bench_plan *p, const bench_result *r, void *user) {
    char label[300], detail[600];
    task_label(p, r->task, true, label, sizeof label);
    bool good = bench_status_good(r->status);
    if (good && isfinite(r->speedup.median))
        snprintf(detail, sizeof detail, "median %.4g ms, speedup %.2fx (%.1f s)",
                 r->stats.median * 1e3, r->speedup.median, r->wall_s);
    else if (good)
        snprintf(detail, sizeof detail, "median %.4g ms (%.1f s)", r->stats.median * 1e3,
                 r->wall_s);
    else
        snprintf(detail, sizeof detail, "(%s)", r->message);
    if (r->stab.unstable)
        snprintf(detail + strlen(detail), sizeof detail - strlen(detail), ", unstable");
    progress_done(&((run_ui *)user)->pg, r->task, label, bench_status_name(r->status), good,
                  detail);
}

// The table and summary lines (reports/runtable.h) of every entry.
static int print_table(const bench_report *rep) {
    const bench_plan *p = rep->plan;
    int n = rep->nresults;
    runtable_row *rows = calloc((size_t)n + 1, sizeof *rows);
    results_case *ids = calloc((size_t)n + 1, sizeof *ids);
    struct {
        char label[300], long_label[300];
    } *labels = calloc((size_t)n + 1, sizeof *labels);
    if (!rows || !ids || !labels) {
        free(rows);
        free(ids);
        free(labels);
        cli_fail("run", "calloc: out of memory for the table of %d entries", n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const bench_result *r = &rep->results[i];
        bench_result_case(p, r->task, &ids[i]);
        task_label(p, r->task, false, labels[i].label, sizeof labels[i].label);
        task_label(p, r->task, true, labels[i].long_label, sizeof labels[i].long_label);
        rows[i] = (runtable_row){labels[i].label, labels[i].long_label, &ids[i], r};
    }
    int ndev = 0;
    for (int v = 0; v < BENCH_DEV_COUNT; v++)
        ndev += p->used[BENCH_AXIS_DEVICE][v];
    bool color = term_color(stdout);
    // the results line only once the file is written (run)
    runtable_print(stdout, &(runtable){rows, n, ndev > 1, term_green(color), term_red(color),
                                       term_reset(color), rep->wall_s, NULL});
    free(rows);
    free(ids);
    free(labels);
    return 0;
}

typedef struct run_args {
    bench_config cfg;
    cli_strings suites, only;
    bool quiet;
    const char *resume; // --resume: the journal
    int given;          // options and suites other than --resume and -q
    char output[4096];  // --resume: the journal's path less ".jsonl"
} run_args;

// 0 to go on, 2 on bad usage, 1 after --help (exit 0).
static int parse(int argc, char **argv, run_args *a) {
    const char *cmd = "run";
    long long n;
    long cores;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:qh", long_opts, NULL)) != -1) {
        switch (c) {
        case OPT_ONLY:
            if (cli_strings_add_list(&a->only, cmd, "--only", optarg) < 0)
                return 2;
            break;
        case OPT_FILTER: a->cfg.filter = optarg; break;
        case OPT_EXCLUDE: a->cfg.exclude = optarg; break;
        case OPT_SIZE: a->cfg.size = optarg; break;
        case OPT_BATCH:
            if (cli_parse_int(cmd, "--batch-size", optarg, 1, 1 << 20, &n) < 0)
                return 2;
            a->cfg.batch = n;
            break;
        case OPT_PROMPT_LEN:
            if (cli_parse_int(cmd, "--prompt-len", optarg, 1, 1 << 20, &n) < 0)
                return 2;
            a->cfg.prompt_len = n;
            break;
        case OPT_NEW_TOKENS:
            if (cli_parse_int(cmd, "--new-tokens", optarg, 1, 1 << 20, &n) < 0)
                return 2;
            a->cfg.new_tokens = n;
            break;
        case OPT_ROUNDS:
            if (cli_parse_int(cmd, "--rounds", optarg, 1, BENCH_MAX_CHAT_ROUNDS, &n) < 0)
                return 2;
            a->cfg.rounds = n;
            break;
        case OPT_BATCHES: {
            long long sizes[BENCH_MAX_BATCHES];
            if (cli_parse_int_list(cmd, "--batch-sizes", optarg, 1, 1 << 20, sizes,
                                   BENCH_MAX_BATCHES, &a->cfg.nbatches) < 0)
                return 2;
            for (int i = 0; i < a->cfg.nbatches; i++)
                a->cfg.batches[i] = sizes[i];
            break;
        }
        case OPT_THREADS:
            if (cli_parse_int(cmd, "--threads", optarg, 1, 4096, &n) < 0)
                return 2;
            a->cfg.threads = (int)n;
            if ((cores = sysconf(_SC_NPROCESSORS_ONLN)) > 0 && n > cores)
                fprintf(stderr,
                        "tcbench run: warning: --threads %lld is above the %ld online cores; "
                        "threads will share cores and timings will scatter\n",
                        n, cores);
            break;
        case OPT_REPEAT:
            if (cli_parse_int(cmd, "--repeat", optarg, 1, 1000000, &n) < 0)
                return 2;
            a->cfg.repeat = (int)n;
            break;
        case OPT_PROCESSES:
            if (cli_parse_int(cmd, "--processes", optarg, 1, BENCH_MAX_PROCESSES, &n) < 0)
                return 2;
            a->cfg.processes = (int)n;
            a->cfg.processes_set = true;
            break;
        case OPT_TIMEOUT:
            if (cli_parse_seconds(cmd, "--timeout", optarg, &a->cfg.timeout_s) < 0)
                return 2;
            break;
        case OPT_WARMUP:
            if (cli_parse_int(cmd, "--warmup", optarg, 1, 1000000, &n) < 0)
                return 2;
            a->cfg.warmup = (int)n;
            break;
        case OPT_MIN_TIME:
            if (cli_parse_seconds_or_zero(cmd, "--min-time", optarg, &a->cfg.min_time_s) < 0)
                return 2;
            break;
        case OPT_MAX_TIME:
            if (cli_parse_seconds(cmd, "--max-time", optarg, &a->cfg.max_time_s) < 0)
                return 2;
            break;
        case OPT_PIN: a->cfg.pin = true; break;
        case OPT_SEED:
            // JSON integers are signed 64-bit: the seed must fit the results
            if (cli_parse_int(cmd, "--seed", optarg, 0, INT64_MAX, &n) < 0)
                return 2;
            a->cfg.seed = (uint64_t)n;
            break;
        case 'o': a->cfg.output = optarg; break;
        case OPT_MODE:
        case OPT_PRECISION:
        case OPT_WORKLOAD:
        case OPT_DEVICE:
            if (cli_parse_axis(cmd, (enum bench_axis)(c - OPT_MODE), optarg, &a->cfg) < 0)
                return 2;
            break;
        case OPT_NO_ACC: a->cfg.accuracy = false; break;
        case OPT_DUMP: a->cfg.dump_dir = optarg; break;
        case OPT_GRAD_SCALER: a->cfg.grad_scaler = true; break;
        case OPT_AMP_DTYPE:
            if (strcmp(optarg, "fp16") == 0) {
                a->cfg.amp_dtype = DT_F16;
            } else if (strcmp(optarg, "bf16") == 0) {
                a->cfg.amp_dtype = DT_BF16;
            } else {
                fprintf(stderr, "tcbench run: --amp-dtype %s: expected fp16 or bf16\n", optarg);
                return 2;
            }
            break;
        case OPT_WEIGHTS:
        case OPT_WEIGHT_GROUP:
        case OPT_WEIGHT_SCALES:
        case OPT_ATTENTION: {
            int64_t group = a->cfg.weight_group;
            cli_gen_opts go = {&a->cfg.weight_bits, &group, &a->cfg.weight_scales,
                               &a->cfg.fused_attention};
            const char *opt = c == OPT_WEIGHTS        ? "--weights"
                              : c == OPT_WEIGHT_GROUP ? "--weight-group"
                              : c == OPT_WEIGHT_SCALES ? "--weight-scales"
                                                       : "--attention";
            if (cli_parse_gen_option(cmd, opt, optarg, &go))
                return 2;
            a->cfg.weight_group = (int)group;
            break;
        }
        case OPT_TF32: a->cfg.tf32 = true; break;
        case OPT_FLUSH_L2: a->cfg.flush_l2 = true; break;
        case OPT_MEMORY_LIMIT:
            if (cli_parse_bytes(cmd, "--memory-limit", optarg, &a->cfg.memory_limit) < 0)
                return 2;
            break;
        case OPT_SHARD:
            if (cli_parse_shard(cmd, optarg, &a->cfg.shard_index, &a->cfg.shard_count) < 0)
                return 2;
            break;
        case 'q': a->quiet = true; break;
        case OPT_RESUME: a->resume = optarg; break;
        case 'h': fputs(usage, stdout); return 1;
        default: return cli_bad_option(cmd, c, argv);
        }
        a->given += c != 'q' && c != OPT_RESUME;
    }
    if (a->cfg.batch > 0 && a->cfg.nbatches > 0)
        return cli_fail(cmd, "--batch-size and --batch-sizes together: give one (a single size "
                             "is --batch-sizes N)");
    a->given += argc - optind;
    char why[1024];
    if (bench_config_check_devices(&a->cfg, why, sizeof why) < 0)
        return cli_fail(cmd, "%s", why);
    if (a->cfg.min_time_s > a->cfg.max_time_s)
        return cli_fail(cmd, "--min-time %g: above --max-time %g (the budget's cap)",
                        a->cfg.min_time_s, a->cfg.max_time_s);
    for (int i = optind; i < argc; i++)
        if (cli_strings_add(&a->suites, argv[i]) < 0)
            return cli_fail(cmd, "strdup: out of memory");
    if (a->suites.n == 0) {
        char path[4096];
        default_suite(path, sizeof path);
        if (cli_strings_add(&a->suites, path) < 0)
            return cli_fail(cmd, "strdup: out of memory");
    }
    return 0;
}

// "5 of 12 entries are in J", and why no more when a journal write failed.
static void journal_held(const bench_report *rep, char *buf, size_t cap) {
    int n = rep->journaled;
    size_t o = (size_t)snprintf(buf, cap, "%d of %d entries are in %s", n, rep->plan->ntasks,
                                rep->journal);
    if (!rep->journal_failed || o >= cap)
        return;
    // journal_err names the call and the file; the file is named already
    const char *why = strrchr(rep->journal_err, ':');
    why = why ? why + 2 : rep->journal_err;
    int k = (n + 1) % 100;
    const char *th = k / 10 == 1         ? "th"
                     : (n + 1) % 10 == 1 ? "st"
                     : (n + 1) % 10 == 2 ? "nd"
                     : (n + 1) % 10 == 3 ? "rd"
                                         : "th";
    if (n == 0 && rep->resumed == 0)
        snprintf(buf + o, cap - o, " (writing it failed: %.300s)", why);
    else
        snprintf(buf + o, cap - o, " (writing the %d%s failed: %.300s)", n + 1, th, why);
}

// One line before a run whose estimate (estimate.h) is over ten minutes,
// with the smaller sizes as the way out; nothing without a calibration.
static void warn_long_run(const bench_plan *p) {
    bench_calibration c;
    if (bench_calibration_load(NULL, p->cfg.threads, &c) < 0)
        return;
    bench_estimate e;
    bench_plan_estimate(p, &c, &e);
    if (e.seconds <= BENCH_ESTIMATE_WARN_S)
        return;
    bool cpu = p->cfg.size && !strcmp(p->cfg.size, "cpu");
    fprintf(stderr,
            "tcbench run: estimate: at least %.0f min for %d entries (their FLOPs and bytes at "
            "this machine's calibrated %.3g GFLOP/s and %.3g GB/s); %s\n",
            e.seconds / 60, e.entries, c.gemm_flops / 1e9, c.bandwidth_Bps / 1e9,
            cpu ? "fewer cases (--only) or fewer axes make it shorter"
                : "--size cpu runs the same architectures, smaller");
}

// What --shard K/N runs of the selection; an empty shard (more shards than
// groups) still writes its results, with no entries, for merge.
static void shard_note(const bench_plan *p) {
    const bench_shard *s = p->shard;
    if (p->ngroups == 0) {
        fprintf(stderr,
                "tcbench run: --shard %d/%d: no entries (the selection has %d group%s of a case's "
                "modes for %d shards); the results will hold none\n",
                s->index, s->count, s->ngroups, s->ngroups == 1 ? "" : "s", s->count);
        return;
    }
    fprintf(stderr,
            "tcbench run: --shard %d/%d: %d of %d entries (%d of %d groups), %.0f%% of the "
            "estimated cost\n",
            s->index, s->count, p->ntasks, s->ntasks, p->ngroups, s->ngroups,
            s->cost_ms > 0 ? 100.0 * (double)s->shard_cost_ms / (double)s->cost_ms : 0.0);
}

static int run(run_args *a, const bench_journal *j) {
    bench_plan *p;
    diag d = {0};
    if (bench_plan_new(&a->cfg, &p, &d) < 0) {
        cli_diag("run", &d);
        return 2;
    }
    int rc = 2;
    bench_report *rep = NULL;
    char err[1024], held[1600];
    if (p->skipped[0])
        fprintf(stderr,
                "tcbench run: skipping %s from the suite defaults (not available in this "
                "build yet)\n",
                p->skipped);
    if (a->cfg.dump_dir && base_mkdir_p(a->cfg.dump_dir, 0777, err, sizeof err) < 0) {
        cli_fail("run", "--dump %s: %s", a->cfg.dump_dir, err);
        goto done;
    }
    if (p->ntasks == 0 && (!p->shard || p->shard->ntasks == 0)) {
        cli_fail("run", "nothing to run: no selected case has a mode, precision and workload "
                        "this build can run");
        goto done;
    }
    if (bench_catch_interrupt(err, sizeof err) < 0) {
        cli_fail("run", "%s", err);
        goto done;
    }
    int k = j ? bench_report_resume(p, j, &rep, err, sizeof err)
              : bench_report_open(p, &rep, err, sizeof err);
    if (k < 0) {
        cli_fail("run", "%s", err);
        rc = k == -2 ? 2 : 3;
        goto done;
    }
    if (p->shard && !a->quiet) // after --resume's check, so that a refusal is one line
        shard_note(p);
    double load;
    int cores;
    // even under -q: it says the figures that follow may not hold (after
    // --resume's check, so that a refusal is one line)
    if (bench_host_busy(p->cfg.threads, &load, &cores))
        fprintf(stderr,
                "tcbench run: warning: load average %.2f on %d cores: other work competes with "
                "the %d threads of this run, so timings will scatter\n",
                load, cores, p->cfg.threads);
    if (j && !a->quiet)
        fprintf(stderr, "tcbench run: resumed: %d of %d entries from %s\n", rep->resumed, p->ntasks,
                j->path);
    if (bench_calibration_check(NULL, err, sizeof err) < 0) // a missing one is normal
        fprintf(stderr, "tcbench run: warning: %s; host.calibration is null\n", err);
    warn_long_run(p);
    run_ui ui;
    progress_init(&ui.pg, p->ntasks, a->quiet);
    ui.pg.nresumed = rep->resumed;
    int failed = bench_run(p, rep, &(bench_hooks){on_start, on_tick, on_done, &ui});
    progress_finish(&ui.pg);
    journal_held(rep, held, sizeof held);
    if (rep->interrupted) {
        fprintf(stderr, "tcbench run: interrupted; %s (go on with: tcbench run --resume %s)\n",
                held, rep->journal);
        rc = BENCH_EXIT_INTERRUPTED;
        goto done;
    }
    rc = failed ? 1 : 0;
    if (rep->nresults > 0 && print_table(rep) < 0)
        rc = 1;
    if (bench_report_write(rep, err, sizeof err) < 0) {
        printf("total wall time %.1f s\n", rep->wall_s);
        fflush(stdout);
        fprintf(stderr,
                "tcbench run: the results file was not written (%s); %s (go on with: tcbench "
                "run --resume %s)\n",
                err, held, rep->journal);
        rc = 3;
        goto done;
    }
    printf("total wall time %.1f s; results: %s\n", rep->wall_s, rep->output);
    fflush(stdout);
    if (rep->journal_failed) {
        fprintf(stderr, "tcbench run: warning: only %s; the results file has every entry\n", held);
        rc = 3;
    }
done:
    bench_report_free(rep);
    bench_plan_free(p);
    return rc;
}

// --resume J: the journal read, the output set beside it, and, when no
// other option or suite was given, the options the run was started with.
static int resume_args(run_args *a, bench_journal **j) {
    const char *path = a->resume;
    size_t n = strlen(path);
    if (n <= 6 || strcmp(path + n - 6, ".jsonl") != 0 || n - 6 >= sizeof a->output)
        return cli_fail("run", "--resume %s: not a journal's name (RESULTS.jsonl)", path);
    diag d;
    if (bench_journal_load(path, j, stderr, &d) < 0) {
        cli_diag("run", &d);
        return 2;
    }
    if (a->given == 0) {
        run_args b = {0};
        bench_config_init(&b.cfg);
        b.cfg.argc = (*j)->argc;
        b.cfg.argv = (*j)->argv;
        int rc = parse((*j)->argc - 1, (*j)->argv + 1, &b);
        if (rc != 0) { // parse said why
            cli_strings_free(&b.suites);
            cli_strings_free(&b.only);
            return 2;
        }
        b.quiet = a->quiet;
        b.resume = a->resume;
        b.given = a->given;
        cli_strings_free(&a->suites);
        cli_strings_free(&a->only);
        *a = b;
    }
    snprintf(a->output, n - 6 + 1, "%s", path);
    if (a->given > 0 && a->cfg.output && strcmp(a->cfg.output, a->output) != 0)
        return cli_fail("run", "--resume %s: its results file is %s, not -o %s", path, a->output,
                        a->cfg.output);
    a->cfg.output = a->output;
    return 0;
}

int cmd_run(int argc, char **argv, int orig_argc, char **orig_argv) {
    run_args a = {0};
    bench_config_init(&a.cfg);
    a.cfg.argc = orig_argc;
    a.cfg.argv = orig_argv;
    bench_journal *j = NULL;
    int rc = parse(argc, argv, &a);
    if (rc == 0 && a.resume)
        rc = resume_args(&a, &j);
    if (rc == 0) {
        a.cfg.suites = (const char *const *)a.suites.v;
        a.cfg.nsuites = a.suites.n;
        a.cfg.only = (const char *const *)a.only.v;
        a.cfg.nonly = a.only.n;
        rc = run(&a, j);
    } else if (rc == 1) {
        rc = 0; // --help
    }
    cli_strings_free(&a.suites);
    cli_strings_free(&a.only);
    bench_journal_free(j);
    return rc;
}
