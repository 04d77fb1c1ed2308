// The runner: timing loop, planning, measurement, isolation and results.
// Works on a tiny suite written to a temporary directory.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

// after the four above, which it needs
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/cuda/cuda_device.h"
#include "base/clock.h"
#include "base/files.h"
#include "bench/accuracy.h"
#include "bench/calibrate.h"
#include "bench/check.h"
#include "bench/estimate.h"
#include "bench/faults.h"
#include "bench/host.h"
#include "bench/measure.h"
#include "bench/oomkill.h"
#include "bench/resume.h"
#include "bench/runner.h"
#include "bench/stability.h"
#include "bench/timing.h"
#include "exec.h"
#include "results/journal.h"

static char dir[512], suite_path[600], model_path[600], tmp_dir[600];

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

// The JSON document at path; fails the test, saying why, when it does not parse.
static json_t *load_json(const char *path) {
    json_error_t jerr;
    json_t *doc = json_load_file(path, 0, &jerr);
    if (!doc)
        fail_msg("%s:%d: %s", path, jerr.line, jerr.text);
    return doc;
}

static const char tiny_mlp[] = "name: tiny_mlp\n"
                               "family: mlp\n"
                               "params: {hidden: 32}\n"
                               "inputs:\n"
                               "  x: {shape: [$batch, 16]}\n"
                               "body:\n"
                               "  - linear: {out: $hidden}\n"
                               "  - relu: {}\n"
                               "  - linear: {out: 8}\n";

static const char tiny_suite[] = "name: tiny\n"
                                 "defaults:\n"
                                 "  modes: [eager, compiled]\n"
                                 "cases:\n"
                                 "  - name: fine\n"
                                 "    model: tiny_mlp\n"
                                 "    batch: 4\n"
                                 "    params: {hidden: 24}\n"
                                 "    sizes: {big: {batch: 8}}\n"
                                 "  - name: crashes\n"
                                 "    model: tiny_mlp\n"
                                 "    batch: 2\n"
                                 "  - name: hangs\n"
                                 "    model: tiny_mlp\n"
                                 "    batch: 2\n";

static int setup(void **state) {
    (void)state;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/tcbench-runner-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return -1;
    char sub[600];
    snprintf(sub, sizeof sub, "%s/models", dir);
    if (mkdir(sub, 0777) < 0)
        return -1;
    snprintf(sub, sizeof sub, "%s/suites", dir);
    if (mkdir(sub, 0777) < 0)
        return -1;
    // the kernel cache and the runner's temporary caches stay in here
    snprintf(sub, sizeof sub, "%s/cache", dir);
    setenv("XDG_CACHE_HOME", sub, 1);
    snprintf(tmp_dir, sizeof tmp_dir, "%s/tmp", dir);
    if (mkdir(tmp_dir, 0777) < 0)
        return -1;
    setenv("TMPDIR", tmp_dir, 1);
    snprintf(model_path, sizeof model_path, "%s/models/tiny_mlp.yaml", dir);
    snprintf(suite_path, sizeof suite_path, "%s/suites/tiny.yaml", dir);
    write_file(model_path, tiny_mlp);
    write_file(suite_path, tiny_suite);
    // the suite must find its model beside it, not wherever the caller points
    unsetenv("TCBENCH_MODELS");
    unsetenv("TCBENCH_TEST_FAULT");
    unsetenv("TCBENCH_TEST_NOISE");
    unsetenv("TCBENCH_CC");
    unsetenv("TCBENCH_DISABLE_FUSION");
    unsetenv("TCBENCH_DISABLE_CAPTURE");
    return 0;
}

// Entries in the private TMPDIR: the runner's temporary kernel caches must
// all be gone.
static int tmp_entries(void) {
    int n = 0;
    DIR *d = opendir(tmp_dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int teardown(void **state) {
    (void)state;
    return nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static bench_config tiny_config(void) {
    static const char *suites[1];
    suites[0] = suite_path;
    bench_config cfg;
    bench_config_init(&cfg);
    cfg.suites = suites;
    cfg.nsuites = 1;
    cfg.threads = 1;
    cfg.repeat = 3;
    // the default budget's floor, a tighter cap: the tests stay quick
    cfg.max_time_s = 0.3;
    return cfg;
}

// ~20 us of work the compiler cannot drop
static int spin_step(void *ctx) {
    int *calls = ctx;
    double t0 = base_now();
    while (base_now() - t0 < 20e-6)
        ;
    (*calls)++;
    return 0;
}

static void test_timing_loop(void **state) {
    (void)state;
    int calls = 0;
    bench_timing t;
    double t0 = base_now();
    assert_int_equal(bench_time(spin_step, &calls, &(bench_timing_opts){.repeat = 5}, &t), 0);
    double total = base_now() - t0;
    assert_true(t.warmup_iters >= 3);
    assert_true(t.warmup_s >= 0.2);
    assert_int_equal(t.nsamples, 5);
    // 1 ms of work per sample needs about 50 iterations of 20 us
    assert_true(t.iters_per_sample >= 2);
    for (int i = 0; i < t.nsamples; i++) {
        assert_true(t.samples[i] >= 20e-6);
        assert_true(t.samples[i] * (double)t.iters_per_sample >= 1e-3);
    }
    assert_true(calls >= t.warmup_iters + 5 * t.iters_per_sample);
    assert_true(total < 5);
    bench_timing_free(&t);
}

// Steps of different lengths that log which one ran, to see the order.
static int order_log[1 << 16], norder;
typedef struct logged_step {
    int id;
    double secs;
} logged_step;

static int logged(void *ctx) {
    logged_step *s = ctx;
    double t0 = base_now();
    while (base_now() - t0 < s->secs)
        ;
    if (norder < (int)(sizeof order_log / sizeof order_log[0]))
        order_log[norder++] = s->id;
    return 0;
}

static void test_timing_interleaved(void **state) {
    (void)state;
    logged_step a = {0, 20e-6}, b = {1, 100e-6};
    bench_step steps[] = {{logged, &a, NULL}, {logged, &b, NULL}};
    bench_timing t[2];
    int bad = 7;
    norder = 0;
    bench_timing_opts opts = {.repeat = 4, .warmup_s = 0.05};
    assert_int_equal(bench_time_interleaved(steps, 2, &opts, t, &bad), 0);
    assert_int_equal(bad, -1);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(t[k].nsamples, 4);
        assert_true(t[k].warmup_iters >= 3 && t[k].warmup_s >= 0.05);
        for (int i = 0; i < 4; i++)
            assert_true(t[k].samples[i] * (double)t[k].iters_per_sample >= 1e-3);
    }
    // each step chose its own group: the shorter step takes more iterations
    assert_true(t[0].iters_per_sample > t[1].iters_per_sample);
    // the faster step measures faster: compare the minima, which a preempted
    // sample on a busy machine cannot disturb
    double min0 = t[0].samples[0], min1 = t[1].samples[0];
    for (int i = 1; i < 4; i++) {
        min0 = fmin(min0, t[0].samples[i]);
        min1 = fmin(min1, t[1].samples[i]);
    }
    assert_true(min0 < min1);
    // the order rotates: rounds a b, b a, a b, b a. Whatever came before
    // (warm-up, a regroup's restart), the log ends with round 2's b, round
    // 3's b, round 3's a: one group of a after two groups of b.
    int end = norder, runs[3] = {0}, ids[3] = {-1, -1, -1};
    for (int r = 0; r < 3; r++) {
        ids[r] = order_log[end - 1];
        while (end > 0 && order_log[end - 1] == ids[r]) {
            end--;
            runs[r]++;
        }
    }
    assert_int_equal(ids[0], 0);
    assert_int_equal(runs[0], t[0].iters_per_sample);
    assert_int_equal(ids[1], 1);
    assert_int_equal(runs[1], 2 * t[1].iters_per_sample);
    assert_int_equal(ids[2], 0);
    bench_timing_free(&t[0]);
    bench_timing_free(&t[1]);
}

static int failing_step(void *ctx) {
    int *calls = ctx;
    return ++*calls == 2 ? -1 : 0;
}

static void test_timing_step_failure(void **state) {
    (void)state;
    int calls = 0;
    bench_timing t;
    assert_int_equal(bench_time(failing_step, &calls, NULL, &t), -1);
    assert_int_equal(calls, 2);
    bench_timing_free(&t);
    // interleaved: the failing step is named
    int spins = 0, bad = -1;
    calls = 0;
    bench_timing ts[2];
    bench_step steps[] = {{spin_step, &spins, NULL}, {failing_step, &calls, NULL}};
    assert_int_equal(bench_time_interleaved(steps, 2, NULL, ts, &bad), -1);
    assert_int_equal(bad, 1);
    bench_timing_free(&ts[0]);
    bench_timing_free(&ts[1]);
}

// A device's clock, faked: each step takes FAKE_STEP_S of "device" time,
// whatever the host's clock says; start and stop are counted. Powers of
// two, so that the group size comes out exact.
#define FAKE_STEP_S (1.0 / 32768)
#define FAKE_MIN_S  (1.0 / 1024)
typedef struct fake_device {
    int steps, starts, stops;
    int steps_at_start;
    bool fail_stop;
} fake_device;

static int fake_step(void *ctx) {
    ((fake_device *)ctx)->steps++;
    return 0;
}

static int fake_start(void *ctx) {
    fake_device *f = ctx;
    f->starts++;
    f->steps_at_start = f->steps;
    return 0;
}

static int fake_stop(void *ctx, double *seconds) {
    fake_device *f = ctx;
    f->stops++;
    *seconds = FAKE_STEP_S * (f->steps - f->steps_at_start);
    return f->fail_stop && f->stops > 4 ? -1 : 0;
}

static const bench_clock fake_clock = {fake_start, fake_stop};

static void test_timing_device_clock(void **state) {
    (void)state;
    fake_device f = {0};
    bench_step steps[] = {{fake_step, &f, &fake_clock}};
    bench_timing t;
    int bad;
    bench_timing_opts opts = {.repeat = 4, .warmup_s = 0.01, .sample_min_s = FAKE_MIN_S};
    assert_int_equal(bench_time_interleaved(steps, 1, &opts, &t, &bad), 0);
    // the clock's time decides the group, not the host's (a step takes
    // nothing on the host)
    assert_int_equal(t.iters_per_sample, 32);
    assert_int_equal(t.nsamples, 4);
    assert_non_null(t.host_samples);
    for (int i = 0; i < 4; i++) {
        assert_true(t.samples[i] == FAKE_STEP_S);
        assert_true(t.host_samples[i] >= 0);
    }
    // every warm-up step and every sample is one start and one stop
    assert_int_equal(f.starts, f.stops);
    assert_int_equal(f.starts, (int)t.warmup_iters + 4);
    bench_timing_free(&t);
    assert_null(t.host_samples);

    // one step per sample (an L2 flush before each): nothing is grouped
    f = (fake_device){0};
    opts.one_step_samples = true;
    assert_int_equal(bench_time_interleaved(steps, 1, &opts, &t, &bad), 0);
    assert_int_equal(t.iters_per_sample, 1);
    assert_int_equal(t.nsamples, 4);
    assert_int_equal(f.steps, (int)t.warmup_iters + 4);
    bench_timing_free(&t);

    // a clock that fails names its step
    int spins = 0;
    f = (fake_device){.fail_stop = true};
    bench_step two[] = {{spin_step, &spins, NULL}, {fake_step, &f, &fake_clock}};
    bench_timing ts[2];
    opts = (bench_timing_opts){.repeat = 4, .warmup_s = 0.01, .sample_min_s = FAKE_MIN_S};
    assert_int_equal(bench_time_interleaved(two, 2, &opts, ts, &bad), -1);
    assert_int_equal(bad, 1);
    assert_null(ts[0].host_samples); // the host's clock alone: nothing beside it
    bench_timing_free(&ts[0]);
    bench_timing_free(&ts[1]);
}

// A "device" step whose time falls linearly from 2 ms to 1 ms over its
// first `falling` steps, then stays (falling < 0: falls by 4% every 256
// steps, a warm-up window, for ever); the host's time of a step is next to
// nothing.
typedef struct falling_device {
    int steps, steps_at_start, falling;
} falling_device;

static double falling_time(const falling_device *f, int step) {
    if (f->falling < 0)
        return 1e-3 * pow(0.96, step / 256.0);
    return step < f->falling ? 1e-3 * (2.0 - (double)step / f->falling) : 1e-3;
}

static int falling_step(void *ctx) {
    ((falling_device *)ctx)->steps++;
    return 0;
}

static int falling_start(void *ctx) {
    falling_device *f = ctx;
    f->steps_at_start = f->steps;
    return 0;
}

static int falling_stop(void *ctx, double *seconds) {
    falling_device *f = ctx;
    *seconds = 0;
    for (int i = f->steps_at_start; i < f->steps; i++)
        *seconds += falling_time(f, i);
    return 0;
}

static const bench_clock falling_clock = {falling_start, falling_stop};

// The warm-up rule (timing.h): it goes on while the step gets faster, stops
// once it has settled, stops at its cap when it never does, and runs
// exactly N steps under --warmup N.
static void test_timing_warm_up(void **state) {
    (void)state;
    bench_timing t;
    int bad;
    // constant: settled as soon as the minimum is met and two windows compare
    falling_device f = {.falling = 0};
    bench_step s = {falling_step, &f, &falling_clock};
    // (a minimum of 3 steps and next to no time: the windows decide)
    bench_timing_opts opts = {.repeat = 2, .warmup_s = 1e-9};
    assert_int_equal(bench_time_warm_up(&s, 1, &opts, &t, &bad), 0);
    assert_true(t.warmup_settled);
    assert_true(t.warmup_iters >= 3 && t.warmup_iters <= 2 * BENCH_WARMUP_WINDOW_MAX);
    bench_timing_free(&t);
    // falling over 600 steps: windows of 256 steps keep falling until the
    // fourth, which the third does not beat by 3%
    f = (falling_device){.falling = 600};
    assert_int_equal(bench_time_warm_up(&s, 1, &opts, &t, &bad), 0);
    assert_true(t.warmup_settled);
    assert_true(t.warmup_iters >= 600);
    assert_true(t.warmup_iters <= 5 * BENCH_WARMUP_WINDOW_MAX);
    // the fastest warm-up step sizes the group: 1 ms a step
    assert_int_equal(t.iters_per_sample, 1);
    bench_timing_free(&t);
    // never settles: the cap ends it
    f = (falling_device){.falling = -1};
    opts.warmup_max_s = 0.05;
    double t0 = base_now();
    assert_int_equal(bench_time_warm_up(&s, 1, &opts, &t, &bad), 0);
    assert_false(t.warmup_settled);
    assert_true(t.warmup_s >= 0.05);
    assert_true(base_now() - t0 < 2);
    bench_timing_free(&t);
    // --warmup 7: exactly 7, whatever the step does
    f = (falling_device){.falling = 600};
    opts = (bench_timing_opts){.repeat = 2, .warmup_fixed = 7};
    assert_int_equal(bench_time_warm_up(&s, 1, &opts, &t, &bad), 0);
    assert_int_equal(t.warmup_iters, 7);
    assert_int_equal(f.steps, 7);
    assert_false(t.warmup_settled);
    bench_timing_free(&t);
}

// ~100 us of work, or 100 us more every third call: a step whose speedup
// over spin_step's has a wide interval for ever.
static int jumpy_step(void *ctx) {
    int *calls = ctx;
    double t0 = base_now(), len = ++*calls % 3 ? 100e-6 : 200e-6;
    while (base_now() - t0 < len)
        ;
    return 0;
}

// How many rounds (timing.h): --repeat at least, then --min-time, the
// interval's target, and --max-time's cap over both.
static void test_timing_rounds(void **state) {
    (void)state;
    bench_timing t[2];
    int bad;
    // constant device steps: the interval is 0 wide, so --repeat rounds and no more
    fake_device f0 = {0}, f1 = {0};
    bench_step fake[] = {{fake_step, &f0, &fake_clock}, {fake_step, &f1, &fake_clock}};
    bench_timing_opts opts = {
        .repeat = 5, .warmup_s = 0.001, .sample_min_s = FAKE_MIN_S, .ci_target = 0.05};
    assert_int_equal(bench_time_interleaved(fake, 2, &opts, t, &bad), 0);
    assert_int_equal(t[0].nsamples, 5);
    assert_int_equal(t[1].nsamples, 5);
    bench_timing_free(&t[0]);
    bench_timing_free(&t[1]);

    // --min-time: every step has that much of samples, the rounds aligned
    int a = 0, b = 0;
    bench_step spin[] = {{spin_step, &a, NULL}, {jumpy_step, &b, NULL}};
    opts = (bench_timing_opts){.repeat = 2, .warmup_s = 0.01, .min_time_s = 0.2};
    assert_int_equal(bench_time_interleaved(spin, 2, &opts, t, &bad), 0);
    assert_int_equal(t[0].nsamples, t[1].nsamples);
    assert_true(t[0].nsamples > 2);
    assert_true(t[0].timed_s >= 0.2 && t[1].timed_s >= 0.2);
    bench_timing_free(&t[0]);
    bench_timing_free(&t[1]);

    // an interval that never gets to its target: rounds until --max-time. The cap
    // is wide enough that a preempted sample or two (a loaded machine) still
    // leaves rounds past --repeat.
    const double cap = 0.3;
    // Short samples (2 ms of work) leave room for many rounds under the cap;
    // only when preemption stretched the --repeat rounds past it may the
    // loop stop there. The target is one no measured interval reaches (at
    // 0.1%, the long samples' averaged ratios sometimes did, and the loop
    // rightly stopped at --repeat).
    opts = (bench_timing_opts){.repeat = 2, .warmup_s = 0.01, .sample_min_s = 0.002,
                               .ci_target = 1e-9, .max_time_s = cap};
    double t0 = base_now();
    assert_int_equal(bench_time_interleaved(spin, 2, &opts, t, &bad), 0);
    assert_int_equal(t[0].nsamples, t[1].nsamples);
    assert_true(t[0].timed_s >= cap || t[1].timed_s >= cap);
    assert_true(t[0].nsamples > 2);
    // one round past the cap at most: before the last round both were under it
    for (int k = 0; k < 2; k++) {
        double last = t[k].samples[t[k].nsamples - 1] * (double)t[k].iters_per_sample;
        assert_true(t[k].timed_s - last < cap * (1 + 1e-9));
    }
    assert_true(base_now() - t0 < 10);
    bench_timing_free(&t[0]);
    bench_timing_free(&t[1]);

    // the cap never cuts --repeat
    opts = (bench_timing_opts){.repeat = 6, .warmup_s = 0.01, .max_time_s = 1e-6};
    assert_int_equal(bench_time_interleaved(spin, 2, &opts, t, &bad), 0);
    assert_int_equal(t[0].nsamples, 6);
    bench_timing_free(&t[0]);
    bench_timing_free(&t[1]);
}

static bool has_reason(const bench_stability *s, const char *prefix) {
    for (int i = 0; i < s->nreasons; i++)
        if (!strncmp(s->reasons[i], prefix, strlen(prefix)))
            return true;
    return false;
}

// The threading-stall rule: eager on the run's threads more than 1.5x
// slower than on one thread makes the entry unstable, with the figures.
static void test_thread_stall_judge(void **state) {
    (void)state;
    bench_stability s = {.rounds = 10};
    assert_false(bench_thread_stall_judge(&s, 2.4e-3, 1.9e-3, 2)); // 1.26x: threads that don't pay
    assert_false(s.unstable);
    assert_false(bench_thread_stall_judge(&s, 1.0e-3, 2.0e-3, 2)); // threads that do
    assert_false(bench_thread_stall_judge(&s, 9.0e-3, 2.0e-3, 1)); // one thread: nothing to compare
    assert_false(bench_thread_stall_judge(&s, 2.0e-3, NAN, 2));    // not timed
    assert_false(s.unstable);
    assert_true(bench_thread_stall_judge(&s, 22.6e-3, 2.47e-3, 2)); // vit's training step, before
    assert_true(s.unstable);
    assert_string_equal(s.reasons[0], "eager on 2 threads 9.15x slower than on one (22.6 ms "
                                      "against 2.47 ms): a threading stall");
}

// One synthetic process's results for an eager / compiled pair: n samples
// each, eager at e seconds and compiled at c, scattered by +-1%.
static void fake_process(bench_result *rs, double e, double c, int n) {
    for (int k = 0; k < 2; k++) {
        bench_result *r = &rs[k];
        memset(r, 0, sizeof *r);
        r->task = k;
        r->status = k ? BENCH_PASS : BENCH_OK;
        r->samples = malloc((size_t)n * sizeof *r->samples);
        assert_non_null(r->samples);
        for (int i = 0; i < n; i++)
            r->samples[i] = (k ? c : e) * (1 + 0.01 * ((i % 3) - 1));
        r->nsamples = n;
        bench_stats_compute(r->samples, n, &r->stats);
        r->stab = (bench_stability){.rounds = n,
                                    .noise = bench_stats_noise(&r->stats),
                                    .processes = 1,
                                    .process_spread = NAN,
                                    .process_medians_s = {r->stats.median},
                                    .process_samples = {n},
                                    .timed_s = 0.5,
                                    .nivcsw = 2,
                                    .run_delay_s = 0.001,
                                    .one_thread_s = NAN,
                                    .load_start = 0.5,
                                    .load_end = 0.5,
                                    .threads = 2,
                                    .cpus = 2};
        r->speedup = (bench_speedup){NAN, NAN, NAN};
    }
}

// --processes: the samples pooled, the medians kept, the spread of their
// logs and the speedup over the pooled rounds; a later failure fails the
// entry and keeps the samples.
static void test_group_pool(void **state) {
    (void)state;
    bench_result rs[2], more[2];
    fake_process(rs, 2e-3, 1e-3, 20);
    fake_process(more, 3e-3, 1.5e-3, 10); // a slower process, the same speedup
    bench_group_pool(rs, more, 2, 1);
    for (int k = 0; k < 2; k++) { // as run_group: the pooled stats, then the judgement
        bench_result_free(&more[k]);
        bench_stats_compute(rs[k].samples, rs[k].nsamples, &rs[k].stats);
    }
    bench_group_judge(rs, 2, 2);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(rs[k].nsamples, 30);
        assert_int_equal(rs[k].stab.processes, 2);
        assert_int_equal(rs[k].stab.rounds, 30);
        assert_int_equal(rs[k].stab.nivcsw, 4);
        assert_true(rs[k].stab.timed_s == 1.0);
        assert_int_equal(rs[k].stats.n, 30);
    }
    assert_true(rs[0].stab.process_medians_s[0] == 2e-3);
    assert_true(rs[0].stab.process_medians_s[1] == 3e-3);
    // sd of {log 2, log 3} (n - 1): |log 1.5| / sqrt 2
    assert_true(fabs(rs[0].stab.process_spread - log(1.5) / sqrt(2)) < 1e-12);
    // the noise within the processes, weighted by their samples (stats.h)
    double within, spread;
    assert_int_equal(
        bench_stats_processes(rs[0].samples, 30, (int[]){20, 10}, 2, &within, &spread, NULL), 0);
    assert_true(fabs(rs[0].stab.noise - within) < 1e-15);
    assert_false(rs[0].stab.unstable);
    assert_true(fabs(rs[1].speedup.median - 2.0) < 0.05); // paired rounds of both processes
    assert_true(rs[1].speedup.ci95_lo <= 2.0 && rs[1].speedup.ci95_hi >= 1.95);

    // the third process crashes: the entry fails, its samples stay
    memset(more, 0, sizeof more);
    more[0].status = more[1].status = BENCH_CRASH;
    snprintf(more[0].message, sizeof more[0].message, "killed by SIGSEGV");
    snprintf(more[1].message, sizeof more[1].message, "killed by SIGSEGV");
    bench_group_pool(rs, more, 2, 2);
    assert_int_equal(rs[0].status, BENCH_CRASH);
    assert_string_equal(rs[0].message, "process 3: killed by SIGSEGV");
    assert_int_equal(rs[0].nsamples, 30);
    bench_group_judge(rs, 2, 2);
    assert_false(isfinite(rs[1].speedup.median) && rs[1].status != BENCH_PASS);
    for (int k = 0; k < 2; k++)
        bench_result_free(&rs[k]);
}

// The stability verdict on synthetic figures and samples.
static void test_stability_judge(void **state) {
    (void)state;
    bench_stability quiet = {.rounds = 20,
                             .noise = 0.02,
                             .ci_rel_width = 0.03,
                             .timed_s = 1.0,
                             .nivcsw = 10,
                             .run_delay_s = 0.01,
                             .steal_s = 0,
                             .threads = 2,
                             .cpus = 2};
    bench_stability s = quiet;
    bench_stability_judge(&s);
    assert_false(s.unstable);
    assert_int_equal(s.nreasons, 0);
    s.ci_rel_width = NAN; // eager: no interval, nothing to judge there
    bench_stability_judge(&s);
    assert_false(s.unstable);

    s = quiet;
    s.noise = 0.31;
    bench_stability_judge(&s);
    assert_true(s.unstable);
    assert_int_equal(s.nreasons, 1);
    assert_string_equal(s.reasons[0], "noise 31.0% > 10%");
    s.noise = INFINITY; // a zero median with scattered samples
    bench_stability_judge(&s);
    assert_true(s.unstable);

    s = quiet;
    s.ci_rel_width = 0.42;
    bench_stability_judge(&s);
    assert_true(s.unstable);
    assert_string_equal(s.reasons[0], "95% interval 42% of the speedup > 25%");
    s.ci_rel_width = 0.24; // wide, but callable
    bench_stability_judge(&s);
    assert_false(s.unstable);

    s = quiet;
    s.nivcsw = 812;
    s.timed_s = 1.02;
    bench_stability_judge(&s);
    assert_true(s.unstable);
    assert_true(has_reason(&s, "interference: 812 involuntary context switches in 1.02 s"));
    s.nivcsw = 90; // 44 a second per thread of two: under the cap
    bench_stability_judge(&s);
    assert_false(s.unstable);

    s = quiet;
    s.run_delay_s = 0.66; // two threads over a second: a third of their time waiting
    bench_stability_judge(&s);
    assert_true(s.unstable);
    assert_string_equal(s.reasons[0], "interference: waited for a CPU 33% of the time > 5%");
    s.run_delay_s = 0.08; // 4%
    bench_stability_judge(&s);
    assert_false(s.unstable);
    s.run_delay_s = NAN; // a kernel that does not say
    bench_stability_judge(&s);
    assert_false(s.unstable);

    s = quiet;
    s.steal_s = 0.2; // 10% of two CPUs over a second
    bench_stability_judge(&s);
    assert_true(s.unstable);
    assert_string_equal(s.reasons[0], "interference: steal time 10% of the CPUs > 5%");

    // every reason at once, and more added: kept up to the limit
    s = (bench_stability){.rounds = 5,
                          .noise = 0.5,
                          .ci_rel_width = 1,
                          .timed_s = 1,
                          .nivcsw = 1000,
                          .run_delay_s = 1,
                          .steal_s = 1,
                          .threads = 1,
                          .cpus = 1};
    bench_stability_judge(&s);
    assert_int_equal(s.nreasons, 5);
    bench_stability_add(&s, "eager baseline noise 50.0%% > 10%%");
    bench_stability_add(&s, "one too many");
    assert_int_equal(s.nreasons, BENCH_MAX_REASONS);
    assert_string_equal(s.reasons[5], "eager baseline noise 50.0% > 10%");
    // no samples: nothing to judge
    s = (bench_stability){.noise = 1};
    bench_stability_judge(&s);
    assert_false(s.unstable);

    // from samples: one wild sample in twenty leaves the noise alone; the
    // test hook's stretch (1x, 2x, 3x, ...) does not
    double x[21];
    bench_stats st;
    for (int i = 0; i < 20; i++)
        x[i] = 1e-3 * (1 + 0.001 * (i % 5));
    x[7] *= 50;
    bench_stats_compute(x, 20, &st);
    s = quiet;
    s.noise = bench_stats_noise(&st);
    bench_stability_judge(&s);
    assert_false(s.unstable);
    for (int i = 0; i < 21; i++)
        x[i] = 1e-3 * (1 + i % 3);
    bench_stats_compute(x, 21, &st);
    s.noise = bench_stats_noise(&st);
    assert_true(s.noise > 0.5);
    bench_stability_judge(&s);
    assert_true(s.unstable && has_reason(&s, "noise "));
}

// host.gpus' entry from a device's facts; the facts are faked, so this
// runs on any machine.
static void test_gpu_json(void **state) {
    (void)state;
    cuda_device_info info = {.index = 1,
                             .cc_major = 9,
                             .cc_minor = 0,
                             .sm_count = 132,
                             .memory_bytes = (size_t)141 << 30,
                             .l2_bytes = (size_t)60 << 20,
                             .driver_version = 12080,
                             .runtime_version = 13000,
                             .clock_khz = 1980000,
                             .memory_clock_khz = 3201000,
                             .memory_bus_bits = 6144};
    snprintf(info.name, sizeof info.name, "NVIDIA H200");
    json_t *j = bench_gpu_json(&info, NULL);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "index")), 1);
    assert_string_equal(json_string_value(json_object_get(j, "name")), "NVIDIA H200");
    assert_string_equal(json_string_value(json_object_get(j, "compute_capability")), "9.0");
    assert_int_equal(json_integer_value(json_object_get(j, "sm_count")), 132);
    assert_true(json_integer_value(json_object_get(j, "memory_bytes")) == (json_int_t)141 << 30);
    assert_true(json_integer_value(json_object_get(j, "l2_bytes")) == (json_int_t)60 << 20);
    assert_true(json_number_value(json_object_get(j, "sm_clock_mhz")) == 1980);
    assert_true(json_number_value(json_object_get(j, "memory_clock_mhz")) == 3201);
    assert_int_equal(json_integer_value(json_object_get(j, "memory_bus_bits")), 6144);
    assert_string_equal(json_string_value(json_object_get(j, "driver")), "12.8");
    assert_string_equal(json_string_value(json_object_get(j, "runtime")), "13.0");
    assert_null(json_object_get(j, "error"));
    json_decref(j);
    // a GPU that could not be described: its index and why
    j = bench_gpu_json(&info, "no usable CUDA GPU: the driver reports no devices");
    assert_int_equal(json_integer_value(json_object_get(j, "index")), 1);
    assert_string_equal(json_string_value(json_object_get(j, "error")),
                        "no usable CUDA GPU: the driver reports no devices");
    assert_null(json_object_get(j, "name"));
    json_decref(j);
}

// The plan's device and capability checks (plan.h): a named device that is
// not usable says why; GPU-only settings on the CPU and bf16 amp on CUDA
// are refused naming the option; a CPU run passes.
static void test_device_checks(void **state) {
    (void)state;
    char err[1024];
    bench_config cfg = tiny_config();
    cfg.axis[BENCH_AXIS_DEVICE][0] = BENCH_DEV_CPU;
    cfg.naxis[BENCH_AXIS_DEVICE] = 1;
    assert_int_equal(bench_config_check_devices(&cfg, err, sizeof err), 0);

    cfg.tf32 = true;
    assert_int_equal(bench_config_check_devices(&cfg, err, sizeof err), -1);
    assert_non_null(strstr(err, "--tf32: a GPU setting"));
    cfg.tf32 = false, cfg.flush_l2 = true;
    assert_int_equal(bench_config_check_devices(&cfg, err, sizeof err), -1);
    assert_non_null(strstr(err, "--flush-l2: a GPU setting"));
    cfg.flush_l2 = false;

    // no device named: auto decides, and says why when it is the CPU
    cfg.naxis[BENCH_AXIS_DEVICE] = 0;
    assert_int_equal(bench_config_check_devices(&cfg, err, sizeof err), 0);
    assert_int_equal(cfg.naxis[BENCH_AXIS_DEVICE], 1);
    assert_non_null(cfg.device_auto);
    bool gpu = cfg.axis[BENCH_AXIS_DEVICE][0] == BENCH_DEV_CUDA;
    assert_true(gpu == (cfg.device_auto[0] == '\0'));

    cfg.axis[BENCH_AXIS_DEVICE][0] = BENCH_DEV_CUDA;
    cfg.device_auto = NULL;
    cfg.amp_dtype = DT_BF16;
    cfg.axis[BENCH_AXIS_PRECISION][0] = BENCH_PREC_AMP;
    cfg.naxis[BENCH_AXIS_PRECISION] = 1;
    assert_int_equal(bench_config_check_devices(&cfg, err, sizeof err), -1);
    if (gpu) // a usable GPU: bf16 amp is what is refused
        assert_non_null(strstr(err, "--amp-dtype bf16: the CUDA backend runs amp in fp16 only"));
    else // none: the device itself, with the registry's reason
        assert_non_null(strstr(err, "--device cuda: "));
}

static void test_plan(void **state) {
    (void)state;
    bench_config cfg = tiny_config();
    bench_plan *p;
    diag d = {0};
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    assert_int_equal(p->ncases, 3);
    // the suite's eager and compiled: one group (child) per case, eager first
    assert_int_equal(p->ntasks, 6);
    assert_int_equal(p->ngroups, 3);
    assert_string_equal(p->skipped, "");
    assert_true(p->used[BENCH_AXIS_MODE][BENCH_MODE_EAGER]);
    assert_true(p->used[BENCH_AXIS_MODE][BENCH_MODE_COMPILED]);
    assert_false(p->used[BENCH_AXIS_MODE][BENCH_MODE_FUSED]);
    for (int g = 0; g < 3; g++) {
        assert_int_equal(p->groups[g].first, 2 * g);
        assert_int_equal(p->groups[g].ntasks, 2);
        assert_int_equal(p->tasks[2 * g].axis[BENCH_AXIS_MODE], BENCH_MODE_EAGER);
        assert_int_equal(p->tasks[2 * g + 1].axis[BENCH_AXIS_MODE], BENCH_MODE_COMPILED);
        assert_int_equal(p->tasks[2 * g + 1].case_index, g);
        assert_int_equal(p->tasks[2 * g + 1].group, g);
    }
    assert_int_equal(p->tasks[1].axis[BENCH_AXIS_PRECISION], BENCH_PREC_FP32);
    assert_true(p->cases[0].min_bytes > 4.0 * 608);
    // 16 * 24 + 24 + 24 * 8 + 8
    assert_int_equal(p->cases[0].param_count, 608);
    assert_int_equal(p->cases[0].batch, 4);
    assert_true(p->cases[0].flops > 2.0 * 4 * 16 * 24);
    bench_plan_free(p);

    cfg.only = (const char *[]){"fine", "hangs"};
    cfg.nonly = 2;
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    assert_int_equal(p->ncases, 2);
    assert_string_equal(p->cases[1].c->name, "hangs");
    bench_plan_free(p);

    cfg.only = (const char *[]){"nosuch"};
    cfg.nonly = 1;
    assert_int_equal(bench_plan_new(&cfg, &p, &d), -1);
    assert_non_null(strstr(d.msg, "--only nosuch"));
    cfg.nonly = 0;

    cfg.filter = "^f";
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    assert_int_equal(p->ncases, 1);
    bench_plan_free(p);
    cfg.filter = NULL;
    cfg.exclude = "s$";
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    assert_int_equal(p->ncases, 1);
    assert_string_equal(p->cases[0].c->name, "fine");
    bench_plan_free(p);

    cfg.exclude = "(";
    assert_int_equal(bench_plan_new(&cfg, &p, &d), -1);
    assert_non_null(strstr(d.msg, "--exclude"));
    cfg.exclude = NULL;

    cfg.size = "big";
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    assert_int_equal(p->cases[0].batch, 8);
    assert_int_equal(p->cases[1].batch, 2);
    bench_plan_free(p);
    cfg.size = "huge";
    assert_int_equal(bench_plan_new(&cfg, &p, &d), -1);
    assert_non_null(strstr(d.msg, "huge"));
    cfg.size = NULL;

    cfg.batch = 5;
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    assert_int_equal(p->cases[0].batch, 5);
    bench_plan_free(p);
    cfg.batch = 0;

    // a compiled-family mode alone brings eager along, first
    cfg.axis[BENCH_AXIS_MODE][0] = BENCH_MODE_CAPTURED;
    cfg.axis[BENCH_AXIS_MODE][1] = BENCH_MODE_FUSED;
    cfg.naxis[BENCH_AXIS_MODE] = 2;
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    assert_int_equal(p->ntasks, 9);
    assert_int_equal(p->groups[1].first, 3);
    assert_int_equal(p->tasks[3].axis[BENCH_AXIS_MODE], BENCH_MODE_EAGER);
    assert_int_equal(p->tasks[4].axis[BENCH_AXIS_MODE], BENCH_MODE_CAPTURED);
    assert_int_equal(p->tasks[5].axis[BENCH_AXIS_MODE], BENCH_MODE_FUSED);
    assert_true(p->used[BENCH_AXIS_MODE][BENCH_MODE_EAGER]);
    assert_false(p->used[BENCH_AXIS_MODE][BENCH_MODE_COMPILED]);
    bench_plan_free(p);
    // eager alone: one task per group
    cfg.axis[BENCH_AXIS_MODE][0] = BENCH_MODE_EAGER;
    cfg.naxis[BENCH_AXIS_MODE] = 1;
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    assert_int_equal(p->ntasks, 3);
    assert_int_equal(p->ngroups, 3);
    assert_int_equal(p->groups[2].ntasks, 1);
    bench_plan_free(p);
    cfg.naxis[BENCH_AXIS_MODE] = 0;
    // amp plans like fp32; a value this build cannot run is refused
    cfg.axis[BENCH_AXIS_PRECISION][0] = BENCH_PREC_AMP;
    cfg.naxis[BENCH_AXIS_PRECISION] = 1;
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    assert_int_equal(p->ntasks, 6);
    bench_plan_free(p);
    cfg.naxis[BENCH_AXIS_PRECISION] = 0;
    // cuda plans like cpu in a build with the backend (the GPU itself is
    // the CLI's question, and the child's); a build without it refuses
    cfg.axis[BENCH_AXIS_DEVICE][0] = BENCH_DEV_CUDA;
    cfg.naxis[BENCH_AXIS_DEVICE] = 1;
    if (exec_device_built("cuda")) {
        assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
        assert_int_equal(p->ntasks, 6);
        assert_int_equal(p->tasks[1].axis[BENCH_AXIS_DEVICE], BENCH_DEV_CUDA);
        assert_true(p->used[BENCH_AXIS_DEVICE][BENCH_DEV_CUDA]);
        assert_false(p->used[BENCH_AXIS_DEVICE][BENCH_DEV_CPU]);
        bench_plan_free(p);
    } else {
        assert_int_equal(bench_plan_new(&cfg, &p, &d), -1);
        assert_string_equal(d.msg, "--device cuda: not available in this build yet");
    }
}

static bench_config all_modes(bench_config cfg) {
    const int modes[] = {BENCH_MODE_EAGER, BENCH_MODE_COMPILED, BENCH_MODE_FUSED,
                         BENCH_MODE_CAPTURED};
    for (int i = 0; i < 4; i++)
        cfg.axis[BENCH_AXIS_MODE][i] = modes[i];
    cfg.naxis[BENCH_AXIS_MODE] = 4;
    return cfg;
}

// Sends rs through JSON as the child does and reads them back.
static void round_trip(const bench_plan *p, const bench_result *rs, int n, bench_result *back) {
    json_t *arr = json_array();
    for (int i = 0; i < n; i++)
        assert_int_equal(json_array_append_new(arr, bench_result_json(p, &rs[i], NULL)), 0);
    char *text = json_dumps(arr, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(arr);
    memset(back, 0, (size_t)n * sizeof *back);
    assert_int_equal(bench_results_from_child(text, strlen(text), back, n), 0);
    free(text);
}

static void test_measure_in_process(void **state) {
    (void)state;
    bench_config cfg = all_modes(tiny_config());
    bench_plan *p;
    diag d = {0};
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    assert_int_equal(p->groups[0].ntasks, 4);
    bench_result rs[4];
    bench_group_measure(p, 0, 0, NULL, rs);
    const bench_result *e = &rs[0];
    assert_int_equal(e->task, 0);
    assert_int_equal(e->status, BENCH_OK);
    assert_string_equal(e->message, "");
    // at least --repeat rounds; more for --min-time (0.1 s by default)
    assert_true(e->nsamples >= 3);
    assert_int_equal(e->stats.n, e->nsamples);
    assert_int_equal(e->stab.rounds, e->nsamples);
    assert_true(e->stab.timed_s > 0 && e->stab.noise >= 0);
    assert_true(isnan(e->stab.ci_rel_width)); // eager has no interval
    assert_true(e->stats.median > 0);
    assert_true(e->iters_per_sample >= 1);
    assert_true(e->kernels > 0);
    assert_true(e->peak_bytes > 0);
    assert_true(e->acc.checked);
    assert_int_equal(e->acc.noutputs, 1);
    assert_true(e->acc.rel_l2 < BENCH_TOL_FP32);
    assert_false(e->compile.done);
    assert_true(isnan(e->speedup.median));
    for (int k = 1; k < 4; k++) {
        const bench_result *r = &rs[k];
        if (r->status != BENCH_PASS)
            fail_msg("mode %d: %s: %s", k, bench_status_name(r->status), r->message);
        assert_int_equal(r->task, k);
        assert_string_equal(r->message, "");
        // sample i of every mode is from round i
        assert_int_equal(r->nsamples, e->nsamples);
        assert_int_equal(r->stab.rounds, r->nsamples);
        assert_true(r->stab.ci_rel_width ==
                    (r->speedup.ci95_hi - r->speedup.ci95_lo) / r->speedup.median);
        assert_int_equal(r->stab.nivcsw, e->stab.nivcsw); // the group's rounds, shared
        assert_true(r->stats.median > 0);
        assert_true(r->kernels > 0);
        assert_true(r->peak_bytes > 0);
        // both compiles recorded; the warm one hit the cache the cold one filled
        assert_true(r->compile.done);
        assert_true(r->compile.cold_s > 0);
        assert_true(r->compile.warm_s >= 0);
        assert_true(r->compile.cache_hit);
        assert_true(isfinite(r->speedup.median) && r->speedup.median > 0);
        assert_true(isfinite(r->speedup.ci95_lo) && isfinite(r->speedup.ci95_hi));
        assert_true(r->speedup.ci95_lo <= r->speedup.ci95_hi);
        assert_true(isfinite(r->compression_ratio) && r->compression_ratio > 0);
        assert_true(r->acc.checked && r->acc.vs_eager);
        assert_true(!strcmp(r->acc.rule, "allclose") || !strcmp(r->acc.rule, "rmse"));
        assert_true(r->acc.vs_eager_max_abs <= 1e-3);
        assert_true(r->acc.rmse < 1e-4 && r->acc.eager_rmse == e->acc.rmse);
    }
    // the hidden activation lives in the planned arena
    assert_true(rs[1].arena_bytes > 0 && rs[3].arena_bytes > 0);
    // fusion takes the relu into the first linear: fewer kernels than eager and
    // than captured (one kernel per op)
    assert_true(rs[1].kernels < e->kernels);
    assert_true(rs[1].kernels < rs[3].kernels);
    assert_int_equal(rs[2].kernels, rs[1].kernels);
    assert_int_equal(tmp_entries(), 0);

    // what the child sends reads back the same
    bench_result back[4];
    round_trip(p, rs, 4, back);
    for (int k = 0; k < 4; k++) {
        assert_int_equal(back[k].status, rs[k].status);
        assert_int_equal(back[k].nsamples, rs[k].nsamples);
        for (int i = 0; i < rs[k].nsamples; i++)
            assert_true(back[k].samples[i] == rs[k].samples[i]);
        // the stability travels with the result, the verdict included
        const bench_stability *bs = &back[k].stab, *ss = &rs[k].stab;
        assert_int_equal(bs->rounds, ss->rounds);
        assert_true(bs->noise == ss->noise && bs->timed_s == ss->timed_s);
        assert_int_equal(bs->nivcsw, ss->nivcsw);
        assert_true(bs->steal_s == ss->steal_s);
        assert_true(bs->run_delay_s == ss->run_delay_s || isnan(ss->run_delay_s));
        assert_true(k == 0 ? isnan(bs->ci_rel_width) : bs->ci_rel_width == ss->ci_rel_width);
        assert_true(bs->unstable == ss->unstable);
        assert_int_equal(bs->nreasons, ss->nreasons);
        for (int i = 0; i < ss->nreasons; i++)
            assert_string_equal(bs->reasons[i], ss->reasons[i]);
        assert_true(back[k].stats.median == rs[k].stats.median);
        assert_int_equal(back[k].kernels, rs[k].kernels);
        assert_int_equal(back[k].peak_bytes, rs[k].peak_bytes);
        assert_int_equal(back[k].iters_per_sample, rs[k].iters_per_sample);
        assert_true(back[k].acc.checked);
        assert_true(back[k].acc.rel_l2 == rs[k].acc.rel_l2);
        assert_true(back[k].compile.done == rs[k].compile.done);
        assert_string_equal(back[k].acc.rule, rs[k].acc.rule);
    }
    for (int k = 1; k < 4; k++) {
        assert_true(back[k].speedup.median == rs[k].speedup.median);
        assert_true(back[k].speedup.ci95_lo == rs[k].speedup.ci95_lo);
        assert_true(back[k].compile.cold_s == rs[k].compile.cold_s);
        assert_true(back[k].compile.cache_hit);
        assert_int_equal(back[k].arena_bytes, rs[k].arena_bytes);
        assert_true(back[k].compression_ratio == rs[k].compression_ratio);
        assert_true(back[k].acc.vs_eager_rel_l2 == rs[k].acc.vs_eager_rel_l2);
    }
    assert_true(isnan(back[0].speedup.median));
    for (int k = 0; k < 4; k++) {
        bench_result_free(&back[k]);
        bench_result_free(&rs[k]);
    }
    // a wrong count or no array fails every result
    assert_int_equal(bench_results_from_child("[{\"status\": 3}]", 15, back, 1), -1);
    assert_int_equal(back[0].status, BENCH_ERROR);
    assert_int_equal(bench_results_from_child("[]", 2, back, 2), -1);
    assert_non_null(strstr(back[1].message, "0 results for a group of 2"));
    assert_int_equal(bench_results_from_child("not json", 8, back, 1), -1);
    assert_non_null(strstr(back[0].message, "malformed"));
    // a status this build does not name fails the result, naming it
    json_t *arr = json_array(), *c = bench_result_json(p, &rs[0], NULL);
    assert_non_null(c);
    assert_int_equal(json_object_set_new(c, "status", json_string("bogus")), 0);
    assert_int_equal(json_array_append_new(arr, c), 0);
    char *text = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
    assert_non_null(text);
    assert_int_equal(bench_results_from_child(text, strlen(text), back, 1), -1);
    free(text);
    assert_int_equal(back[0].status, BENCH_ERROR);
    assert_non_null(strstr(back[0].message, "unknown status \"bogus\""));
    bench_plan_free(p);

    // the reference check is skipped on request: nothing checked, compiled still passes
    cfg = tiny_config();
    cfg.accuracy = false;
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    bench_group_measure(p, 0, 0, NULL, rs);
    assert_int_equal(rs[0].status, BENCH_OK);
    assert_false(rs[0].acc.checked);
    assert_non_null(strstr(rs[0].acc.reason, "--no-accuracy"));
    assert_int_equal(rs[1].status, BENCH_PASS);
    assert_false(rs[1].acc.checked);
    assert_string_equal(rs[1].acc.rule, "");
    assert_true(isfinite(rs[1].speedup.median));
    bench_result_free(&rs[0]);
    bench_result_free(&rs[1]);
    bench_plan_free(p);
    // above the FLOPs limit: no fp64 reference; compiled is checked against eager alone
    cfg.accuracy = true;
    cfg.accuracy_flops_limit = 100;
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    bench_group_measure(p, 0, 0, NULL, rs);
    assert_int_equal(rs[0].status, BENCH_OK);
    assert_false(rs[0].acc.checked);
    assert_non_null(strstr(rs[0].acc.reason, "limit"));
    assert_int_equal(rs[1].status, BENCH_PASS);
    assert_true(rs[1].acc.checked);
    assert_non_null(strstr(rs[1].acc.reason, "limit"));
    assert_true(!strcmp(rs[1].acc.rule, "allclose") || !strcmp(rs[1].acc.rule, "cosine"));
    assert_true(isnan(rs[1].acc.rmse) && isnan(rs[1].acc.eager_rmse));
    bench_result_free(&rs[0]);
    bench_result_free(&rs[1]);
    bench_plan_free(p);
}

static int ndone;
static void count_done(const bench_plan *p, const bench_result *r, void *user) {
    (void)p;
    (void)r;
    (void)user;
    ndone++;
}

static const char *const case_keys[] = {"suite",       "name",           "model",
                                        "family",      "device",         "mode",
                                        "precision",   "workload",       "batch",
                                        "params",      "status",         "message",
                                        "samples_s",   "stats",          "iterations_per_sample",
                                        "param_count", "flops",          "peak_bytes",
                                        "kernels",     "accuracy",       "compile",
                                        "arena_bytes", "speedup",        "compression_ratio",
                                        "min_bytes",   "roofline",       "wall_s",
                                        "clock",       "host_samples_s", "stability",
                                        NULL};

static void check_case_keys(const json_t *c) {
    for (int k = 0; case_keys[k]; k++)
        if (!json_object_get(c, case_keys[k]))
            fail_msg("case object lacks '%s'", case_keys[k]);
}

static void test_run_isolated(void **state) {
    (void)state;
    bench_config cfg = tiny_config();
    char out[700];
    snprintf(out, sizeof out, "%s/res/out.json", dir); // res/ does not exist yet
    cfg.output = out;
    // the fine case compiles and warms up two modes well within it
    cfg.timeout_s = 6;
    // two threads in the children, after this process ran OpenMP with one
    // (test_measure_in_process): the pool must not be inherited broken
    cfg.threads = 2;
    char *argv[] = {"tcbench", "run", suite_path};
    cfg.argc = 3;
    cfg.argv = argv;
    setenv("TCBENCH_TEST_FAULT", "crash:crashes,hang:hangs", 1);
    // kill switches (made up: nothing reads them) are recorded, sorted
    setenv("TCBENCH_DISABLE_ZZZ_TEST", "1", 1);
    setenv("TCBENCH_DISABLE_AAA_TEST", "", 1);
    bench_plan *p;
    diag d = {0};
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    // a calibration for this CPU and thread count: the roofline gets its ceilings
    json_t *h = bench_host_json(2);
    bench_calibration cal = {.bandwidth_Bps = 10e9, .gemm_flops = 100e9, .threads = 2};
    snprintf(cal.cpu_model, sizeof cal.cpu_model, "%s",
             json_string_value(json_object_get(h, "cpu_model")));
    json_decref(h);
    char err[512];
    assert_int_equal(bench_calibration_save(&cal, NULL, err, sizeof err), 0);
    bench_report *rep;
    assert_int_equal(bench_report_open(p, &rep, err, sizeof err), 0);
    assert_true(rep->has_calib);
    ndone = 0;
    int failed = bench_run(p, rep, &(bench_hooks){.on_done = count_done});
    unsetenv("TCBENCH_TEST_FAULT");
    assert_int_equal(failed, 4);
    assert_int_equal(ndone, 6);
    assert_int_equal(rep->nresults, 6);

    bench_result *ok = &rep->results[0], *pass = &rep->results[1];
    assert_int_equal(ok->status, BENCH_OK);
    assert_true(ok->nsamples >= 3);
    assert_int_equal(ok->stats.n, ok->nsamples);
    assert_true(ok->acc.checked);
    if (pass->status != BENCH_PASS)
        fail_msg("compiled: %s: %s", bench_status_name(pass->status), pass->message);
    assert_int_equal(pass->nsamples, ok->nsamples);
    assert_int_equal(pass->stab.rounds, ok->nsamples); // the parent's copy has it
    assert_true(pass->compile.cache_hit);
    assert_true(isfinite(pass->speedup.median));
    // a crash or a timeout is every mode's of the case
    for (int i = 2; i < 4; i++) {
        assert_int_equal(rep->results[i].status, BENCH_CRASH);
        assert_string_equal(rep->results[i].message, "killed by SIGSEGV");
        assert_int_equal(rep->results[i].nsamples, 0);
        assert_int_equal(rep->results[i].task, i);
    }
    for (int i = 4; i < 6; i++) {
        assert_int_equal(rep->results[i].status, BENCH_TIMEOUT);
        assert_true(rep->results[i].wall_s >= 6 && rep->results[i].wall_s < 14);
    }

    assert_int_equal(bench_report_write(rep, err, sizeof err), 0);
    json_t *doc = load_json(out);
    assert_int_equal(json_integer_value(json_object_get(doc, "schema_version")), 1);
    json_t *tool = json_object_get(doc, "tool");
    assert_string_equal(json_string_value(json_object_get(tool, "name")), "tcbench");
    assert_non_null(json_string_value(json_object_get(tool, "version")));
    assert_non_null(json_string_value(json_object_get(tool, "git_commit")));
    const char *ts = json_string_value(json_object_get(doc, "timestamp"));
    assert_non_null(ts);
    assert_int_equal(strlen(ts), 20); // 2024-01-02T03:04:05Z
    assert_int_equal(ts[19], 'Z');
    json_t *cl = json_object_get(doc, "command_line");
    assert_int_equal(json_array_size(cl), 3);
    assert_string_equal(json_string_value(json_array_get(cl, 1)), "run");
    json_t *host = json_object_get(doc, "host");
    const char *host_keys[] = {"hostname", "os",     "cpu_model", "cores", "threads_used",
                               "blas",     "onednn", "cpu_flags", NULL};
    for (int k = 0; host_keys[k]; k++)
        if (!json_object_get(host, host_keys[k]))
            fail_msg("host lacks '%s'", host_keys[k]);
    assert_int_equal(json_integer_value(json_object_get(host, "threads_used")), 2);
    assert_string_equal(json_string_value(json_object_get(json_object_get(host, "blas"), "name")),
                        "OpenBLAS");
    assert_non_null(json_string_value(json_object_get(json_object_get(host, "blas"), "config")));
    assert_non_null(json_string_value(json_object_get(json_object_get(host, "onednn"), "version")));
    assert_true(json_is_boolean(json_object_get(json_object_get(host, "cpu_flags"), "avx2")));
    json_t *hc = json_object_get(host, "calibration");
    assert_true(json_number_value(json_object_get(hc, "bandwidth_GBps")) == 10);
    assert_true(json_number_value(json_object_get(hc, "gemm_GFLOPs")) == 100);
    json_t *config = json_object_get(doc, "config");
    const char *config_keys[] = {
        "suites",     "size",       "seed",       "repeat",   "threads", "timeout_s", "modes",
        "precisions", "workloads",  "device",     "dump_dir", "tf32",    "flush_l2",  "device_auto",
        "warmup",     "min_time_s", "max_time_s", "pin",      "order",   "disabled",  NULL};
    for (int k = 0; config_keys[k]; k++)
        if (!json_object_get(config, config_keys[k]))
            fail_msg("config lacks '%s'", config_keys[k]);
    assert_int_equal(json_integer_value(json_object_get(config, "repeat")), 3);
    assert_true(json_is_null(json_object_get(config, "warmup"))); // until settled
    assert_true(json_number_value(json_object_get(config, "min_time_s")) == 0.1);
    assert_true(json_number_value(json_object_get(config, "max_time_s")) == 0.3);
    assert_true(json_is_false(json_object_get(config, "pin")));
    assert_string_equal(json_string_value(json_object_get(config, "order")), "rotate");
    json_t *dis = json_object_get(config, "disabled");
    size_t ndis = json_array_size(dis), aaa = ndis, zzz = ndis;
    for (size_t i = 0; i < ndis; i++) {
        const char *v = json_string_value(json_array_get(dis, i));
        if (!strcmp(v, "TCBENCH_DISABLE_AAA_TEST="))
            aaa = i;
        if (!strcmp(v, "TCBENCH_DISABLE_ZZZ_TEST=1"))
            zzz = i;
        if (i > 0)
            assert_true(strcmp(json_string_value(json_array_get(dis, i - 1)), v) < 0);
    }
    assert_true(aaa < zzz && zzz < ndis);
    unsetenv("TCBENCH_DISABLE_ZZZ_TEST");
    unsetenv("TCBENCH_DISABLE_AAA_TEST");
    assert_string_equal(json_string_value(json_object_get(config, "device")), "cpu");
    assert_true(json_is_false(json_object_get(config, "tf32")));
    assert_true(json_is_false(json_object_get(config, "flush_l2")));
    assert_true(json_is_null(json_object_get(config, "memory_limit"))); // no cap
    assert_true(json_is_null(json_object_get(config, "device_auto"))); // the devices were named
    // no case on a GPU: none described
    assert_int_equal(json_array_size(json_object_get(host, "gpus")), 0);
    assert_true(json_is_array(json_object_get(host, "gpus")));
    json_t *modes = json_object_get(config, "modes");
    assert_int_equal(json_array_size(modes), 2);
    assert_string_equal(json_string_value(json_array_get(modes, 0)), "eager");
    assert_string_equal(json_string_value(json_array_get(modes, 1)), "compiled");

    json_t *cases = json_object_get(doc, "cases");
    assert_int_equal(json_array_size(cases), 6);
    for (size_t i = 0; i < 6; i++)
        check_case_keys(json_array_get(cases, i));
    json_t *c0 = json_array_get(cases, 0), *c1 = json_array_get(cases, 2);
    assert_string_equal(json_string_value(json_object_get(c0, "status")), "ok");
    assert_string_equal(json_string_value(json_object_get(c0, "suite")), "tiny");
    assert_string_equal(json_string_value(json_object_get(c0, "model")), "tiny_mlp");
    assert_string_equal(json_string_value(json_object_get(c0, "mode")), "eager");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(c0, "params"), "hidden")),
                     24);
    assert_true(json_array_size(json_object_get(c0, "samples_s")) >= 3);
    json_t *stab = json_object_get(c0, "stability");
    const char *stab_keys[] = {"run_delay_s", "noise",    "ci_rel_width", "rounds",
                               "timed_s",     "nivcsw",   "steal_s",      "load_start",
                               "load_end",    "unstable", "reasons",      NULL};
    for (int k = 0; stab_keys[k]; k++)
        if (!json_object_get(stab, stab_keys[k]))
            fail_msg("stability lacks '%s'", stab_keys[k]);
    assert_true(json_is_number(json_object_get(stab, "noise")));
    assert_true(json_is_null(json_object_get(stab, "ci_rel_width")));
    assert_true((size_t)json_integer_value(json_object_get(stab, "rounds")) ==
                json_array_size(json_object_get(c0, "samples_s")));
    assert_true(json_is_integer(json_object_get(stab, "nivcsw")));
    assert_true(json_is_number(json_object_get(stab, "steal_s")));
    assert_true(json_is_boolean(json_object_get(stab, "unstable")));
    assert_true(json_is_array(json_object_get(stab, "reasons")));
    assert_string_equal(json_string_value(json_object_get(c0, "clock")), "host");
    assert_true(json_is_null(json_object_get(c0, "host_samples_s")));
    json_t *stats = json_object_get(c0, "stats");
    const char *stat_keys[] = {"median_s", "q1_s", "q3_s",  "min_s",    "max_s", "mean_s",
                               "stddev_s", "cv",   "mad_s", "outliers", "n",     NULL};
    for (int k = 0; stat_keys[k]; k++)
        if (!json_object_get(stats, stat_keys[k]))
            fail_msg("stats lacks '%s'", stat_keys[k]);
    json_t *acc = json_object_get(c0, "accuracy");
    assert_true(json_is_true(json_object_get(acc, "checked")));
    assert_true(json_is_number(json_object_get(acc, "rel_l2")));
    assert_true(json_number_value(json_object_get(acc, "tolerance")) == BENCH_TOL_FP32);
    assert_null(json_object_get(acc, "rule")); // compiled-family only
    assert_true(json_is_null(json_object_get(c0, "speedup")));
    assert_true(json_is_null(json_object_get(c0, "compile")));
    json_t *roof = json_object_get(c0, "roofline");
    assert_true(json_number_value(json_object_get(roof, "flops")) > 0);
    assert_true(json_number_value(json_object_get(roof, "fraction_of_roof")) > 0);
    assert_non_null(json_string_value(json_object_get(roof, "bound")));

    json_t *cc = json_array_get(cases, 1);
    assert_string_equal(json_string_value(json_object_get(cc, "mode")), "compiled");
    assert_string_equal(json_string_value(json_object_get(cc, "status")), "pass");
    json_t *sp = json_object_get(cc, "speedup");
    const char *sp_keys[] = {"median", "ci95_lo", "ci95_hi", NULL};
    for (int k = 0; sp_keys[k]; k++)
        if (!json_is_number(json_object_get(sp, sp_keys[k])))
            fail_msg("speedup.%s is not a number", sp_keys[k]);
    json_t *comp = json_object_get(cc, "compile");
    assert_true(json_number_value(json_object_get(comp, "cold_s")) > 0);
    assert_true(json_is_number(json_object_get(comp, "warm_s")));
    assert_true(json_is_true(json_object_get(comp, "cache_hit")));
    assert_true(json_is_integer(json_object_get(cc, "arena_bytes")));
    assert_true(json_number_value(json_object_get(cc, "compression_ratio")) > 0);
    json_t *cacc = json_object_get(cc, "accuracy");
    const char *acc_keys[] = {"vs_eager_max_abs", "vs_eager_rel_l2", "rmse_vs_fp64",
                              "eager_rmse_vs_fp64", NULL};
    for (int k = 0; acc_keys[k]; k++)
        if (!json_is_number(json_object_get(cacc, acc_keys[k])))
            fail_msg("accuracy.%s is not a number", acc_keys[k]);
    assert_non_null(json_string_value(json_object_get(cacc, "rule")));

    assert_string_equal(json_string_value(json_object_get(c1, "status")), "crash");
    assert_true(json_is_null(json_object_get(c1, "stats")));
    assert_true(json_is_null(json_object_get(c1, "stability")));
    assert_true(json_is_null(json_object_get(c1, "roofline")));
    assert_string_equal(json_string_value(json_object_get(json_array_get(cases, 4), "status")),
                        "timeout");

    // the journal: the header (the document's fields less the cases), then
    // one parseable line per case, in order
    results_journal_reader jr;
    assert_int_equal(results_journal_open(&jr, rep->journal, &d), 0);
    json_t *c;
    assert_int_equal(results_journal_next(&jr, &c, stderr, &d), 1);
    assert_true(results_journal_is_header(c));
    assert_null(json_object_get(c, "cases"));
    const char *same[] = {"schema_version", "tool", "timestamp", "command_line", "host", "config"};
    for (size_t k = 0; k < sizeof same / sizeof same[0]; k++)
        if (!json_equal(json_object_get(c, same[k]), json_object_get(doc, same[k])))
            fail_msg("the journal's header and the results differ in \"%s\"", same[k]);
    json_decref(c);
    json_decref(doc);
    int lines = 0;
    const char *want[] = {"ok", "pass", "crash", "crash", "timeout", "timeout"};
    while (results_journal_next(&jr, &c, stderr, &d) == 1) {
        assert_true(lines < 6);
        assert_false(results_journal_is_header(c));
        check_case_keys(c);
        assert_string_equal(json_string_value(json_object_get(c, "status")), want[lines]);
        json_decref(c);
        lines++;
    }
    assert_int_equal(jr.cut, 0);
    results_journal_close(&jr);
    assert_int_equal(lines, 6);
    assert_int_equal(rep->journaled, 6);
    // the temporary file was renamed away
    char tmp[800];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out, (long)getpid());
    assert_int_equal(access(tmp, F_OK), -1);
    bench_report_free(rep);
    bench_plan_free(p);
}

// The plan of cfg and its report, the results going to DIR/SUB/r.json
// (out keeps the path: the plan's cfg.output points to it).
static bench_report *open_report(bench_config *cfg, const char *sub, char out[700],
                                 bench_plan **p) {
    snprintf(out, 700, "%s/%s/r.json", dir, sub);
    cfg->output = out;
    diag d = {0};
    assert_int_equal(bench_plan_new(cfg, p, &d), 0);
    bench_report *rep;
    char err[512];
    if (bench_report_open(*p, &rep, err, sizeof err) < 0)
        fail_msg("bench_report_open: %s", err);
    return rep;
}

// SIGINT while a group's child hangs: the child is killed at once (not at
// --timeout), nothing of its group is journaled or counted, no other group
// starts, and the report says it was interrupted.
static void test_run_interrupted(void **state) {
    (void)state;
    bench_config cfg = tiny_config();
    cfg.timeout_s = 30;
    char out[700], err[512];
    bench_plan *p;
    bench_report *rep = open_report(&cfg, "int", out, &p);
    struct sigaction old;
    assert_int_equal(sigaction(SIGINT, NULL, &old), 0);
    assert_int_equal(bench_catch_interrupt(err, sizeof err), 0);
    timer_t timer;
    struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGINT};
    assert_int_equal(timer_create(CLOCK_MONOTONIC, &ev, &timer), 0);
    struct itimerspec in_1s = {.it_value = {1, 0}};
    assert_int_equal(timer_settime(timer, 0, &in_1s, NULL), 0);
    setenv("TCBENCH_TEST_FAULT", "hang:fine", 1);
    ndone = 0;
    double t0 = base_now();
    bench_run(p, rep, &(bench_hooks){.on_done = count_done});
    double took = base_now() - t0;
    unsetenv("TCBENCH_TEST_FAULT");
    assert_int_equal(timer_delete(timer), 0);
    assert_int_equal(sigaction(SIGINT, &old, NULL), 0);
    assert_true(bench_stop);
    bench_stop = 0;
    assert_true(took >= 0.9 && took < 10);
    assert_true(rep->interrupted);
    assert_int_equal(rep->nresults, 0);
    assert_int_equal(rep->journaled, 0);
    assert_int_equal(ndone, 0);
    assert_false(rep->done[0] || rep->done[1]);
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1); // the child was reaped
    assert_int_equal(errno, ECHILD);
    bench_report_free(rep);
    bench_plan_free(p);
}

// Out of memory, three ways: a child that exits as one out of memory does
// (the fault hook); a case planned to need more than --memory-limit, which
// ends `oom` before it allocates with the plan's figures; and with room
// under the cap, no oom at all.
static void test_run_oom(void **state) {
    (void)state;
    for (int way = 0; way < 3; way++) {
        bench_config cfg = tiny_config();
        char out[700];
        snprintf(out, sizeof out, "%s/oom.json", dir);
        cfg.output = out;
        cfg.only = (const char *[]){"fine"};
        cfg.nonly = 1;
        if (way == 0)
            setenv("TCBENCH_TEST_FAULT", "oom:fine", 1);
        else
            cfg.memory_limit = way == 1 ? 1024 : (size_t)1 << 30;
        bench_plan *p;
        diag d = {0};
        assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
        bench_report *rep;
        char err[512];
        assert_int_equal(bench_report_open(p, &rep, err, sizeof err), 0);
        int rc = bench_run(p, rep, NULL);
        unsetenv("TCBENCH_TEST_FAULT");
        assert_int_equal(rc, way < 2 ? 2 : 0);
        for (int k = 0; k < 2; k++) {
            const bench_result *r = &rep->results[k];
            assert_int_equal(r->status == BENCH_OOM, way < 2);
            if (way == 1 && (!strstr(r->message, "needs at least") ||
                             !strstr(r->message, "before it allocates") ||
                             !strstr(r->message, "--memory-limit")))
                fail_msg("message: %s", r->message);
        }
        bench_report_free(rep);
        bench_plan_free(p);
    }
}

// TCBENCH_TEST_NOISE: the stretched entry is unstable for its noise, in the
// child and in the parent's copy and the results file; the other is not
// (unless the machine itself interfered, which says so).
static void test_noise_hook(void **state) {
    (void)state;
    bench_config cfg = tiny_config();
    char out[700];
    snprintf(out, sizeof out, "%s/noise.json", dir);
    cfg.output = out;
    cfg.only = (const char *[]){"fine"};
    cfg.nonly = 1;
    setenv("TCBENCH_TEST_NOISE", "other,fine:compiled", 1);
    bench_plan *p;
    diag d = {0};
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    bench_report *rep;
    char err[512];
    assert_int_equal(bench_report_open(p, &rep, err, sizeof err), 0);
    assert_int_equal(bench_run(p, rep, NULL), 0); // unstable is no failure
    const bench_result *e = &rep->results[0], *c = &rep->results[1];
    assert_int_equal(c->status, BENCH_PASS);
    assert_true(c->stab.unstable);
    assert_true(has_reason(&c->stab, "noise "));
    // the stretch alone gives about 74% (what real noise adds moves it)
    assert_true(c->stab.noise > 3 * BENCH_NOISE_CAP);
    // eager's own samples were not stretched: the stretch never reaches it
    // (its noise is its own, a machine that flips speed can still scatter
    // a 5 us step by 15%: that is all it may be unstable for)
    for (int i = 0; i < e->stab.nreasons; i++)
        assert_true(!strncmp(e->stab.reasons[i], "noise ", 6) ||
                    !strncmp(e->stab.reasons[i], "interference", 12));
    assert_true(e->stab.noise < c->stab.noise);
    if (!has_reason(&e->stab, "noise "))
        assert_false(has_reason(&c->stab, "eager baseline"));
    assert_int_equal(bench_report_write(rep, err, sizeof err), 0);
    json_error_t jerr;
    json_t *doc = json_load_file(out, 0, &jerr);
    assert_non_null(doc);
    json_t *cs = json_object_get(json_array_get(json_object_get(doc, "cases"), 1), "stability");
    assert_true(json_is_true(json_object_get(cs, "unstable")));
    const char *why = json_string_value(json_array_get(json_object_get(cs, "reasons"), 0));
    assert_non_null(why);
    assert_non_null(strstr(why, "noise "));
    json_decref(doc);
    bench_report_free(rep);

    // every mode of the case (in this process): eager is unstable, and so
    // is the speedup over it
    setenv("TCBENCH_TEST_NOISE", "fine", 1);
    bench_result rs[2];
    bench_group_measure(p, 0, 0, NULL, rs);
    unsetenv("TCBENCH_TEST_NOISE");
    assert_true(rs[0].stab.unstable && has_reason(&rs[0].stab, "noise "));
    assert_true(rs[1].stab.unstable && has_reason(&rs[1].stab, "eager baseline noise "));
    assert_int_equal(rs[1].status, BENCH_PASS); // unstable, still measured and kept
    assert_true(isfinite(rs[1].speedup.median));
    bench_result_free(&rs[0]);
    bench_result_free(&rs[1]);
    bench_plan_free(p);
}

// A compiler that fails: every compiled-family mode ends fail_to_run with
// the compiler's words; eager still runs, and the results are whole.
static void test_compile_fails(void **state) {
    (void)state;
    bench_config cfg = all_modes(tiny_config());
    char out[700];
    snprintf(out, sizeof out, "%s/cc.json", dir);
    cfg.output = out;
    cfg.only = (const char *[]){"fine"};
    cfg.nonly = 1;
    setenv("TCBENCH_CC", "false", 1);
    bench_plan *p;
    diag d = {0};
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    bench_report *rep;
    char err[512];
    assert_int_equal(bench_report_open(p, &rep, err, sizeof err), 0);
    assert_int_equal(bench_run(p, rep, NULL), 3);
    unsetenv("TCBENCH_CC");
    assert_int_equal(rep->nresults, 4);
    assert_int_equal(rep->results[0].status, BENCH_OK);
    assert_true(rep->results[0].nsamples >= 3);
    for (int k = 1; k < 4; k++) {
        const bench_result *r = &rep->results[k];
        assert_int_equal(r->status, BENCH_FAIL_TO_RUN);
        if (!strstr(r->message, "the C compiler 'false' failed"))
            fail_msg("message: %s", r->message);
        assert_int_equal(r->nsamples, 0);
        assert_true(isnan(r->speedup.median));
    }
    assert_int_equal(bench_report_write(rep, err, sizeof err), 0);
    json_t *doc = load_json(out);
    json_t *cases = json_object_get(doc, "cases");
    assert_int_equal(json_array_size(cases), 4);
    assert_string_equal(json_string_value(json_object_get(json_array_get(cases, 0), "status")),
                        "ok");
    for (size_t k = 1; k < 4; k++) {
        json_t *c = json_array_get(cases, k);
        check_case_keys(c);
        assert_string_equal(json_string_value(json_object_get(c, "status")), "fail_to_run");
        assert_true(json_is_null(json_object_get(c, "speedup")));
        assert_true(json_is_null(json_object_get(c, "stats")));
    }
    json_decref(doc);
    bench_report_free(rep);
    bench_plan_free(p);
    // the temporary caches were removed, failure or not
    assert_int_equal(tmp_entries(), 0);
}

// --dump DIR: each compiled-family mode's source and fused graph under DIR/CASE/MODE.
static void test_dump(void **state) {
    (void)state;
    bench_config cfg = all_modes(tiny_config());
    char dump[700];
    snprintf(dump, sizeof dump, "%s/dump", dir);
    cfg.dump_dir = dump;
    cfg.repeat = 1;
    bench_plan *p;
    diag d = {0};
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    bench_result rs[4];
    bench_group_measure(p, 0, 0, NULL, rs);
    const char *modes[] = {"compiled", "fused", "captured"};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(rs[k + 1].status, BENCH_PASS);
        char path[1000];
        snprintf(path, sizeof path, "%s/fine/%s/tiny_mlp.c", dump, modes[k]);
        assert_int_equal(access(path, R_OK), 0);
        snprintf(path, sizeof path, "%s/fine/%s/tiny_mlp.graph.txt", dump, modes[k]);
        assert_int_equal(access(path, R_OK), 0);
    }
    char eager_dir[800];
    snprintf(eager_dir, sizeof eager_dir, "%s/fine/eager", dump);
    assert_int_equal(access(eager_dir, F_OK), -1);
    for (int k = 0; k < 4; k++)
        bench_result_free(&rs[k]);
    bench_plan_free(p);
}

// What a cuda case records, through the child's JSON and into the results:
// the CUDA event times as samples_s with the host's times beside them, one
// compile and no warm one, the GPU settings in config. The results are
// made up, so this runs in every build, with or without a GPU.
static void test_cuda_results(void **state) {
    (void)state;
    bench_config cfg = tiny_config();
    char out[700];
    snprintf(out, sizeof out, "%s/cuda_results.json", dir);
    cfg.output = out;
    cfg.only = (const char *[]){"fine"};
    cfg.nonly = 1;
    cfg.tf32 = true;
    cfg.flush_l2 = true;
    cfg.memory_limit = (size_t)6 << 30;
    cfg.device_auto = ""; // --device auto found a GPU
    bench_plan *p;
    diag d = {0};
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    assert_int_equal(p->ntasks, 2);
    for (int i = 0; i < 2; i++)
        p->tasks[i].axis[BENCH_AXIS_DEVICE] = BENCH_DEV_CUDA;
    p->used[BENCH_AXIS_DEVICE][BENCH_DEV_CPU] = false;
    p->used[BENCH_AXIS_DEVICE][BENCH_DEV_CUDA] = true;
    bench_result rs[2];
    double ev[2][3] = {{1e-3, 2e-3, 3e-3}, {0.5e-3, 1e-3, 1.5e-3}};
    double host[2][3] = {{1.1e-3, 2.1e-3, 3.1e-3}, {0.6e-3, 1.1e-3, 1.6e-3}};
    for (int k = 0; k < 2; k++) {
        memset(&rs[k], 0, sizeof rs[k]);
        rs[k].task = k;
        rs[k].status = k ? BENCH_PASS : BENCH_OK;
        rs[k].samples = ev[k];
        rs[k].host_samples = host[k];
        rs[k].nsamples = 3;
        rs[k].iters_per_sample = 1;
        rs[k].speedup = (bench_speedup){NAN, NAN, NAN};
        rs[k].compression_ratio = NAN;
        bench_stats_compute(rs[k].samples, 3, &rs[k].stats);
    }
    rs[1].compile = (bench_compile){true, 0.5, NAN, false};
    bench_result back[2];
    round_trip(p, rs, 2, back);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(back[k].nsamples, 3);
        assert_non_null(back[k].host_samples);
        for (int i = 0; i < 3; i++) {
            assert_true(back[k].samples[i] == ev[k][i]);
            assert_true(back[k].host_samples[i] == host[k][i]);
        }
        // the statistics are the events'
        assert_true(back[k].stats.median == ev[k][1]);
    }
    assert_true(back[1].compile.done && back[1].compile.cold_s == 0.5);
    assert_true(isnan(back[1].compile.warm_s));
    assert_false(back[1].compile.cache_hit);

    bench_report *rep;
    char err[512];
    assert_int_equal(bench_report_open(p, &rep, err, sizeof err), 0);
    memcpy(rep->results, back, sizeof back); // the report's now: freed with it
    rep->done[0] = rep->done[1] = true;
    rep->nresults = 2;
    json_t *doc = bench_report_json(rep);
    assert_non_null(doc);
    json_t *config = json_object_get(doc, "config");
    assert_string_equal(json_string_value(json_object_get(config, "device")), "cuda");
    assert_true(json_is_true(json_object_get(config, "tf32")));
    assert_true(json_is_true(json_object_get(config, "flush_l2")));
    assert_int_equal(json_integer_value(json_object_get(config, "memory_limit")),
                     (json_int_t)6 << 30);
    json_t *da = json_object_get(config, "device_auto");
    assert_string_equal(json_string_value(json_object_get(da, "chose")), "cuda");
    assert_string_equal(json_string_value(json_object_get(da, "reason")), "");
    // the GPU is described by a child of its own; here it may be absent
    json_t *gpus = json_object_get(json_object_get(doc, "host"), "gpus");
    assert_int_equal(json_array_size(gpus), 1);
    json_t *g0 = json_array_get(gpus, 0);
    char why[400];
    if (exec_device_probe("cuda", why, sizeof why) == 0)
        assert_true(strlen(json_string_value(json_object_get(g0, "name"))) > 0);
    else
        assert_string_equal(json_string_value(json_object_get(g0, "error")), why);
    json_t *cases = json_object_get(doc, "cases");
    for (size_t k = 0; k < 2; k++) {
        json_t *c = json_array_get(cases, k);
        check_case_keys(c);
        assert_string_equal(json_string_value(json_object_get(c, "device")), "cuda");
        assert_string_equal(json_string_value(json_object_get(c, "clock")), "cuda_events");
        json_t *hs = json_object_get(c, "host_samples_s");
        assert_int_equal(json_array_size(hs), 3);
        assert_true(json_number_value(json_array_get(hs, 2)) == host[k][2]);
    }
    json_t *comp = json_object_get(json_array_get(cases, 1), "compile");
    assert_true(json_is_null(json_object_get(comp, "warm_s")));
    assert_true(json_is_false(json_object_get(comp, "cache_hit")));
    json_decref(doc);
    bench_report_free(rep);
    bench_plan_free(p);
}

// A cuda run end to end, each case in its child. Without a usable GPU (as
// in CI) eager cannot be made: it and the compiled mode, never tried, end
// eager_fail_to_run, both with the driver's reason, and nothing crashes. With a
// GPU both run and pass, timed by CUDA events.
static void test_cuda_run(void **state) {
    (void)state;
    if (!exec_device_built("cuda"))
        skip();
    bench_config cfg = tiny_config();
    char out[700];
    snprintf(out, sizeof out, "%s/cuda_run.json", dir);
    cfg.output = out;
    cfg.only = (const char *[]){"fine"};
    cfg.nonly = 1;
    cfg.axis[BENCH_AXIS_DEVICE][0] = BENCH_DEV_CUDA;
    cfg.naxis[BENCH_AXIS_DEVICE] = 1;
    bench_plan *p;
    diag d = {0};
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    bench_report *rep;
    char err[512], why[400];
    assert_int_equal(bench_report_open(p, &rep, err, sizeof err), 0);
    bool gpu = exec_device_probe("cuda", why, sizeof why) == 0;
    int failed = bench_run(p, rep, NULL);
    assert_int_equal(rep->nresults, 2);
    const bench_result *e = &rep->results[0], *c = &rep->results[1];
    if (gpu) {
        if (failed)
            fail_msg("eager %s: %s; compiled %s: %s", bench_status_name(e->status), e->message,
                     bench_status_name(c->status), c->message);
        assert_int_equal(e->status, BENCH_OK);
        assert_int_equal(c->status, BENCH_PASS);
        assert_non_null(c->host_samples);
        assert_true(c->stats.median > 0 && c->kernels > 0 && c->peak_bytes > 0);
        assert_true(c->compile.done && isnan(c->compile.warm_s));
    } else {
        assert_int_equal(failed, 2);
        assert_int_equal(e->status, BENCH_EAGER_FAIL_TO_RUN);
        assert_int_equal(c->status, BENCH_EAGER_FAIL_TO_RUN);
        char want[600];
        snprintf(want, sizeof want, "eager_cuda_new: %s", why);
        assert_string_equal(e->message, want);
        assert_string_equal(c->message, want);
        assert_int_equal(e->nsamples, 0);
    }
    bench_report_free(rep);
    bench_plan_free(p);
}

// calibrate keeps one calibration per CPU model x threads; a run finds its own.
static void test_calibration_per_threads(void **state) {
    (void)state;
    char path[600], err[256];
    snprintf(path, sizeof path, "%s/calibration.json", dir);
    bench_calibration c = {.bandwidth_Bps = 10e9, .gemm_flops = 100e9, .threads = 1};
    bench_calibration_cpu_model(c.cpu_model, sizeof c.cpu_model);
    assert_int_equal(bench_calibration_save(&c, path, err, sizeof err), 0);
    c.threads = 2;
    c.gemm_flops = 190e9;
    assert_int_equal(bench_calibration_save(&c, path, err, sizeof err), 0);
    c.threads = 1;
    c.gemm_flops = 101e9; // measured again: replaces only threads 1
    assert_int_equal(bench_calibration_save(&c, path, err, sizeof err), 0);
    bench_calibration got, all[8];
    assert_int_equal(bench_calibration_list(path, all, 8), 2);
    assert_int_equal(bench_calibration_load(path, 1, &got), 0);
    assert_true(fabs(got.gemm_flops - 101e9) < 1e3);
    assert_int_equal(bench_calibration_load(path, 2, &got), 0);
    assert_true(fabs(got.gemm_flops - 190e9) < 1e3);
    assert_int_equal(bench_calibration_load(path, 4, &got), -1);
    // the single object older tcbench wrote still loads
    json_t *old = bench_calibration_json(&c);
    assert_int_equal(json_dump_file(old, path, 0), 0);
    json_decref(old);
    assert_int_equal(bench_calibration_load(path, 1, &got), 0);
    assert_int_equal(bench_calibration_load(path, 2, &got), -1);
}

static void test_report_open_fails(void **state) {
    (void)state;
    bench_config cfg = tiny_config();
    char out[700];
    // a regular file where a directory should be
    snprintf(out, sizeof out, "%s/suites/tiny.yaml/out.json", dir);
    cfg.output = out;
    bench_plan *p;
    diag d = {0};
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    bench_report *rep;
    char err[512];
    assert_int_equal(bench_report_open(p, &rep, err, sizeof err), -2);
    assert_null(rep);
    assert_non_null(strstr(err, "mkdir"));
    bench_plan_free(p);
}

// The journal's reader skips what a kill or a full disk leaves (a cut last
// line) and garbled lines, each with a warning naming the line; trimming
// cuts the cut line off; a failed append names the call and the file.
static void test_journal_reader(void **state) {
    (void)state;
    char path[700];
    snprintf(path, sizeof path, "%s/cut.json.jsonl", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    json_t *h =
        results_journal_header("2024-01-02T03:04:05Z", json_pack("[s, s]", "tcbench", "run"),
                               json_object(), json_pack("{s:i}", "repeat", 2));
    char err[512];
    assert_int_equal(results_journal_append(f, path, h, err, sizeof err), 0);
    json_decref(h);
    fputs("{\"n\": 1}\n"
          "{\"n\": 2, \"cut\n"
          "[1, 2]\n"
          "\n"
          "{\"n\": 3}\n"
          "{\"n\": 4, \"status\": \"o",
          f);
    assert_int_equal(fclose(f), 0);

    for (int pass = 0; pass < 2; pass++) {
        FILE *warn = tmpfile();
        assert_non_null(warn);
        results_journal_reader r;
        diag d = {0};
        assert_int_equal(results_journal_open(&r, path, &d), 0);
        json_t *o;
        assert_int_equal(results_journal_next(&r, &o, warn, &d), 1);
        assert_true(results_journal_is_header(o));
        assert_int_equal(json_integer_value(json_object_get(o, "schema_version")), 1);
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(o, "config"), "repeat")), 2);
        json_decref(o);
        for (int n = 1; n <= 3; n += 2) {
            assert_int_equal(results_journal_next(&r, &o, warn, &d), 1);
            assert_int_equal(json_integer_value(json_object_get(o, "n")), n);
            assert_false(results_journal_is_header(o));
            json_decref(o);
        }
        assert_int_equal(results_journal_next(&r, &o, warn, &d), 0);
        assert_null(o);
        assert_int_equal(r.cut, pass == 0 ? 3 : 2);
        results_journal_close(&r);
        char text[2048] = "";
        rewind(warn);
        size_t len = fread(text, 1, sizeof text - 1, warn);
        text[len] = '\0';
        fclose(warn);
        char want[800];
        snprintf(want, sizeof want, "%s:3: warning: a garbled line (not valid JSON), skipped\n",
                 path);
        assert_non_null(strstr(text, want));
        snprintf(want, sizeof want, "%s:4: warning: a line that is not a JSON object, skipped\n",
                 path);
        assert_non_null(strstr(text, want));
        snprintf(want, sizeof want, "%s:7: warning: a cut line", path);
        assert_true((strstr(text, want) != NULL) == (pass == 0));
        // the cut line goes; a whole last line stays
        assert_int_equal(results_journal_trim(path, err, sizeof err),
                         pass == 0 ? (long)strlen("{\"n\": 4, \"status\": \"o") : 0);
    }
    assert_true(results_journal_sniff(path));

    // a full disk: the call and the file named, errno's words
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        json_t *o = json_pack("{s:i}", "n", 1);
        assert_int_equal(results_journal_append(full, "/dev/full", o, err, sizeof err), -1);
        assert_string_equal(err, "write /dev/full: No space left on device");
        json_decref(o);
        fclose(full); // the failed write's bytes were dropped: nothing left to flush
    }
    snprintf(path, sizeof path, "%s/none.jsonl", dir);
    assert_int_equal(results_journal_trim(path, err, sizeof err), -1);
    assert_non_null(strstr(err, "fopen "));
    assert_non_null(strstr(err, "No such file"));
}

// A made-up result of task, as a child would have sent it.
static void fake_result(bench_result *r, int task, enum bench_status s) {
    memset(r, 0, sizeof *r);
    r->task = task;
    r->status = s;
    snprintf(r->message, sizeof r->message, "fake %d", task);
    r->speedup = (bench_speedup){NAN, NAN, NAN};
    r->compression_ratio = NAN;
    r->stab.ci_rel_width = r->stab.run_delay_s = r->stab.one_thread_s = NAN;
    r->stab.load_start = r->stab.load_end = NAN;
}

// --resume's bookkeeping, without children: a journal with one whole group,
// half of another and a cut line gives back the whole group alone, its cut
// line cut off; the results then hold every entry once, in plan order; a
// run of another config is refused, naming the first difference.
static void test_resume(void **state) {
    (void)state;
    bench_config cfg = tiny_config(); // 3 cases x eager, compiled: 3 groups of 2
    char *argv[] = {"tcbench", "run", suite_path, "--repeat", "3"};
    cfg.argc = 5;
    cfg.argv = argv;
    char out[700], err[1024];
    bench_plan *p;
    bench_report *rep = open_report(&cfg, "resume", out, &p);
    diag d = {0};
    assert_int_equal(p->ngroups, 3);
    assert_int_equal(p->ntasks, 6);
    // failed entries count as measured: the whole group is kept
    for (int t = 0; t < 3; t++) {
        fake_result(&rep->results[t], t, BENCH_CRASH);
        rep->done[t] = true;
        assert_int_equal(bench_report_journal(rep, t), 0);
    }
    assert_int_equal(rep->journaled, 3);
    assert_true(fputs("{\"suite\": \"tiny\", \"na", rep->journal_file) >= 0);
    bench_report_free(rep);

    char journal[800];
    snprintf(journal, sizeof journal, "%s.jsonl", out);
    bench_journal *j;
    assert_int_equal(bench_journal_load(journal, &j, NULL, &d), 0);
    assert_int_equal(j->argc, 5);
    assert_string_equal(j->argv[3], "--repeat");
    assert_int_equal(json_array_size(j->cases), 3);
    assert_int_equal(bench_report_resume(p, j, &rep, err, sizeof err), 0);
    assert_int_equal(rep->resumed, 2);
    assert_int_equal(rep->journaled, 2);
    assert_int_equal(rep->nresults, 2);
    for (int t = 0; t < 6; t++)
        assert_int_equal(rep->done[t], t < 2);
    assert_int_equal(rep->results[1].status, BENCH_CRASH);
    assert_int_equal(rep->results[1].task, 1);
    assert_string_equal(rep->results[1].message, "fake 1");
    for (int t = 2; t < 6; t++) { // measured again: the old line of task 2 is dropped
        fake_result(&rep->results[t], t, t % 2 ? BENCH_PASS : BENCH_OK);
        rep->done[t] = true;
        rep->nresults++;
        assert_int_equal(bench_report_journal(rep, t), 0);
    }
    assert_int_equal(rep->journaled, 6);
    assert_int_equal(bench_report_write(rep, err, sizeof err), 0);
    bench_report_free(rep);

    json_t *doc = load_json(out);
    assert_int_equal(json_array_size(json_object_get(doc, "command_line")), 5);
    json_t *cases = json_object_get(doc, "cases");
    assert_int_equal(json_array_size(cases), 6);
    const char *names[] = {"fine", "fine", "crashes", "crashes", "hangs", "hangs"};
    for (size_t i = 0; i < 6; i++) {
        json_t *c = json_array_get(cases, i);
        assert_string_equal(json_string_value(json_object_get(c, "name")), names[i]);
        assert_string_equal(json_string_value(json_object_get(c, "mode")),
                            i % 2 ? "compiled" : "eager");
        const char *want = i < 2 ? "crash" : i % 2 ? "pass" : "ok";
        assert_string_equal(json_string_value(json_object_get(c, "status")), want);
    }
    json_decref(doc);
    // the journal: its header, the 3 old lines, the 4 new ones, all whole
    results_journal_reader r;
    assert_int_equal(results_journal_open(&r, journal, &d), 0);
    json_t *o;
    int lines = 0;
    while (results_journal_next(&r, &o, stderr, &d) == 1) {
        json_decref(o);
        lines++;
    }
    assert_int_equal(r.cut, 0);
    results_journal_close(&r);
    assert_int_equal(lines, 8);

    // another run's config
    bench_plan *p2;
    cfg.repeat = 4;
    assert_int_equal(bench_plan_new(&cfg, &p2, &d), 0);
    assert_int_equal(bench_report_resume(p2, j, &rep, err, sizeof err), -2);
    assert_null(rep);
    char want[1200];
    snprintf(want, sizeof want, "--resume %s: the journal's run had --repeat 3, this one 4",
             journal);
    assert_string_equal(err, want);
    bench_plan_free(p2);
    bench_journal_free(j);
    bench_plan_free(p);
}

// A journal that fills up: the first failed line is said once and named,
// nothing more is appended (the count stays what the file holds), and the
// results file is still written with every entry.
static void test_journal_full(void **state) {
    (void)state;
    FILE *full = fopen("/dev/full", "w");
    if (!full)
        skip();
    bench_config cfg = tiny_config();
    char out[700], err[512];
    bench_plan *p;
    bench_report *rep = open_report(&cfg, "full", out, &p);
    assert_false(rep->journal_failed);
    fake_result(&rep->results[0], 0, BENCH_OK);
    rep->done[0] = true;
    assert_int_equal(bench_report_journal(rep, 0), 0);
    assert_int_equal(fclose(rep->journal_file), 0);
    rep->journal_file = full; // from here on the disk is full
    for (int t = 1; t < p->ntasks; t++) {
        fake_result(&rep->results[t], t, BENCH_OK);
        rep->done[t] = true;
        assert_int_equal(bench_report_journal(rep, t), t == 1 ? -1 : 0);
    }
    rep->nresults = p->ntasks;
    assert_true(rep->journal_failed);
    assert_int_equal(rep->journaled, 1);
    char want[4200];
    snprintf(want, sizeof want, "write %s: No space left on device", rep->journal);
    assert_string_equal(rep->journal_err, want);
    assert_int_equal(bench_report_write(rep, err, sizeof err), 0);
    json_t *doc = load_json(out);
    assert_int_equal(json_array_size(json_object_get(doc, "cases")), (size_t)p->ntasks);
    json_decref(doc);
    bench_report_free(rep);
    bench_plan_free(p);
}

static void test_check_file(void **state) {
    (void)state;
    diag d = {0};
    assert_int_equal(bench_check_file(suite_path, NULL, &d), 0);
    assert_int_equal(bench_check_file(model_path, NULL, &d), 0);
    char bad[700];
    snprintf(bad, sizeof bad, "%s/models/bad.yaml", dir);
    write_file(bad, "name: bad\n"
                    "inputs:\n"
                    "  x: {shape: [$batch, 16]}\n"
                    "body:\n"
                    "  - linaer: {out: 4}\n");
    assert_int_equal(bench_check_file(bad, NULL, &d), -1);
    assert_string_equal(d.file, bad);
    assert_int_equal(d.line, 5);
    // a suite whose size points a case at an impossible override
    char bad_suite[700];
    snprintf(bad_suite, sizeof bad_suite, "%s/suites/bad_size.yaml", dir);
    write_file(bad_suite, "cases:\n"
                          "  - model: tiny_mlp\n"
                          "    batch: 2\n"
                          "    sizes: {odd: {params: {nosuch: 3}}}\n");
    assert_int_equal(bench_check_file(bad_suite, NULL, &d), -1);
    assert_int_equal(d.line, 4);
    char missing[700];
    snprintf(missing, sizeof missing, "%s/nope.yaml", dir);
    assert_int_equal(bench_check_file(missing, NULL, &d), -1);
    assert_non_null(strstr(d.file, "nope.yaml"));
}

// The plan of one suite file under tiny_config, its results to out (NULL:
// none). The plan keeps the suite list: it stays here, spath the caller's.
static bench_plan *plan_of(const char *spath, const char *out) {
    static const char *suites[1];
    suites[0] = spath;
    bench_config cfg = tiny_config();
    cfg.suites = suites;
    cfg.output = out;
    bench_plan *p;
    diag d = {0};
    if (bench_plan_new(&cfg, &p, &d) < 0)
        fail_msg("%s:%d:%d: %s", d.file, d.line, d.col, d.msg);
    return p;
}

// A model that names a layer not built yet is no bad input: the plan keeps
// its case, every entry of it ends model_fail_to_load with the layer's
// place and reason while the other case runs and passes, check says so in
// one line of its notes and returns 0, and the results record each case's
// `study`.
static void test_model_fail_to_load(void **state) {
    (void)state;
    char mpath[700], spath[700], out[700];
    snprintf(mpath, sizeof mpath, "%s/models/hashing.yaml", dir);
    write_file(mpath, "name: hashing\n"
                      "inputs:\n"
                      "  x: {shape: [$batch, 4, 16]}\n"
                      "body:\n"
                      "  - lsh_attention: {heads: 2}\n"
                      "  - linear: {out: 8}\n");
    snprintf(spath, sizeof spath, "%s/suites/zoo.yaml", dir);
    write_file(spath, "name: zoo\n"
                      "cases:\n"
                      "  - {name: fine, model: tiny_mlp, batch: 2, study: true}\n"
                      "  - {name: Reformer, model: hashing, batch: 1}\n");
    snprintf(out, sizeof out, "%s/zoo.json", dir);
    bench_plan *p = plan_of(spath, out);
    diag d = {0};
    assert_int_equal(p->ncases, 2);
    assert_string_equal(p->cases[0].fail_to_load, "");
    char want[1600];
    // the model as the suite found it: <dir>/suites/../models/hashing.yaml
    assert_non_null(strstr(p->cases[1].fail_to_load,
                           "/models/hashing.yaml:5:5: layer "
                           "'lsh_attention' is not built yet (Reformer's"));
    assert_int_equal(p->cases[1].param_count, -1);
    bench_report *rep;
    char err[512];
    assert_int_equal(bench_report_open(p, &rep, err, sizeof err), 0);
    assert_int_equal(bench_run(p, rep, NULL), 2);
    assert_int_equal(rep->nresults, 4);
    for (int i = 0; i < rep->nresults; i++) {
        const bench_result *r = &rep->results[i];
        if (p->tasks[r->task].case_index == 1) {
            assert_int_equal(r->status, BENCH_MODEL_FAIL_TO_LOAD);
            assert_non_null(strstr(r->message, "layer 'lsh_attention' is not built yet"));
            assert_int_equal(r->nsamples, 0);
        } else if (!bench_status_good(r->status)) {
            fail_msg("fine: %s: %s", bench_status_name(r->status), r->message);
        }
    }
    assert_int_equal(bench_report_write(rep, err, sizeof err), 0);
    json_t *doc = load_json(out);
    json_t *cases = json_object_get(doc, "cases");
    assert_int_equal(json_array_size(cases), 4);
    for (size_t i = 0; i < json_array_size(cases); i++) {
        json_t *c = json_array_get(cases, i);
        bool fine = !strcmp(json_string_value(json_object_get(c, "name")), "fine");
        assert_true(json_is_boolean(json_object_get(c, "study")));
        assert_int_equal(json_is_true(json_object_get(c, "study")), fine);
        if (!fine) {
            assert_string_equal(json_string_value(json_object_get(c, "status")),
                                "model_fail_to_load");
            assert_int_equal(json_integer_value(json_object_get(c, "param_count")), -1);
        }
    }
    json_decref(doc);
    bench_report_free(rep);
    bench_plan_free(p);
    // check: one line of notes, no error
    char *buf = NULL;
    size_t len = 0;
    FILE *notes = open_memstream(&buf, &len);
    assert_non_null(notes);
    assert_int_equal(bench_check_file(spath, notes, &d), 0);
    assert_int_equal(bench_check_file(mpath, notes, &d), 0);
    assert_int_equal(fclose(notes), 0);
    snprintf(want, sizeof want,
             "%s: case 'Reformer': model_fail_to_load: %s/suites/../models/"
             "hashing.yaml:5:5: layer",
             spath, dir);
    assert_non_null(strstr(buf, want));
    snprintf(want, sizeof want, "\nmodel_fail_to_load: %s:5:5: layer 'lsh_attention'", mpath);
    assert_non_null(strstr(buf, want)); // the model file alone
    int lines = 0;
    for (char *c = buf; *c; c++)
        lines += *c == '\n';
    assert_int_equal(lines, 2);
    free(buf);
}

// A model whose training needs what the engine lacks (`train_needs:`): its
// infer entries run and pass, its train entries end model_fail_to_load with
// the located reason, and the estimate leaves them out.
static void test_train_needs(void **state) {
    (void)state;
    char mpath[700], spath[700];
    snprintf(mpath, sizeof mpath, "%s/models/second_order.yaml", dir);
    write_file(mpath, "name: second_order\n"
                      "inputs:\n"
                      "  x: {shape: [$batch, 8]}\n"
                      "body:\n"
                      "  - linear: {out: 8}\n"
                      "  - tanh\n"
                      "train_needs: second_order_gradients\n");
    snprintf(spath, sizeof spath, "%s/suites/train_needs.yaml", dir);
    write_file(spath, "name: train_needs\n"
                      "defaults: {modes: [eager], workloads: [infer, train]}\n"
                      "cases:\n"
                      "  - {name: forces, model: second_order, batch: 2}\n");
    bench_plan *p = plan_of(spath, NULL);
    assert_int_equal(p->ncases, 1);
    assert_string_equal(p->cases[0].fail_to_load, "");
    assert_non_null(strstr(p->cases[0].train_fail_to_load,
                           "/models/second_order.yaml:7:14: training needs second-order "
                           "gradients: "));
    assert_true(p->cases[0].param_count > 0);
    bench_report *rep;
    char err[512];
    assert_int_equal(bench_report_open(p, &rep, err, sizeof err), 0);
    bench_run(p, rep, NULL);
    assert_int_equal(rep->nresults, 2);
    for (int i = 0; i < rep->nresults; i++) {
        const bench_result *r = &rep->results[i];
        if (p->tasks[r->task].axis[BENCH_AXIS_WORKLOAD] == BENCH_WL_TRAIN) {
            assert_int_equal(r->status, BENCH_MODEL_FAIL_TO_LOAD);
            assert_non_null(strstr(r->message, "training needs second-order gradients"));
            assert_int_equal(r->nsamples, 0);
        } else if (!bench_status_good(r->status)) {
            fail_msg("infer: %s: %s", bench_status_name(r->status), r->message);
        }
    }
    bench_report_free(rep);
    bench_plan_free(p);
}

// A suite's defaults.processes measures its cases' groups in that many
// processes unless --processes says otherwise; the results' config then
// records the suite's figure when every group shares it.
static void test_suite_processes(void **state) {
    (void)state;
    char spath[700];
    snprintf(spath, sizeof spath, "%s/suites/one_proc.yaml", dir);
    write_file(spath, "name: one_proc\n"
                      "defaults: {processes: 1}\n"
                      "cases:\n"
                      "  - {name: fine, model: tiny_mlp, batch: 2}\n");
    const char *suites[] = {spath, suite_path};
    for (int set = 0; set < 2; set++) {
        bench_config cfg = tiny_config();
        cfg.suites = suites;
        cfg.nsuites = 1;
        if (set) {
            cfg.processes = 2;
            cfg.processes_set = true;
        }
        bench_plan *p;
        diag d = {0};
        assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
        assert_true(p->ngroups > 0);
        for (int g = 0; g < p->ngroups; g++)
            assert_int_equal(p->groups[g].processes, set ? 2 : 1);
        assert_int_equal(p->cfg.processes, set ? 2 : 1);
        bench_plan_free(p);
    }
    // beside a suite without it: each keeps its own, the config the default
    bench_config cfg = tiny_config();
    cfg.suites = suites;
    cfg.nsuites = 2;
    bench_plan *p;
    diag d = {0};
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    for (int g = 0; g < p->ngroups; g++) {
        const suite *s = p->cases[p->tasks[p->groups[g].first].case_index].s;
        assert_int_equal(p->groups[g].processes, s->processes ? 1 : BENCH_DEFAULT_PROCESSES);
    }
    assert_int_equal(p->cfg.processes, BENCH_DEFAULT_PROCESSES);
    bench_plan_free(p);
}

// The estimate (estimate.h): the floors of warm-up and timing for a tiny
// model; on a machine too slow for it, its steps at the calibrated rate,
// in proportion; a case that does not build counts nothing.
static void test_estimate(void **state) {
    (void)state;
    bench_config cfg = tiny_config();
    cfg.only = (const char *[]){"fine"};
    cfg.nonly = 1;
    bench_plan *p;
    diag d = {0};
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    assert_int_equal(p->ntasks, 2);
    int procs = p->cfg.processes;
    bench_calibration c = {.bandwidth_Bps = 1e10, .gemm_flops = 1e11, .threads = 1};
    bench_estimate e;
    bench_plan_estimate(p, &c, &e);
    assert_int_equal(e.entries, 2);
    double floors = 2 * procs * (BENCH_DEFAULT_WARMUP_S + p->cfg.min_time_s);
    assert_true(e.seconds >= floors && e.seconds < floors * 1.01);
    assert_true(e.seconds < BENCH_ESTIMATE_WARN_S);
    // one FLOP a second, bandwidth to spare: every step is its FLOPs in seconds
    c.gemm_flops = 1;
    c.bandwidth_Bps = 1e30;
    bench_plan_estimate(p, &c, &e);
    double step = p->cases[0].flops;
    assert_true(step > 1);
    double want = 2 * (procs * (BENCH_DEFAULT_WARMUP_ITERS + p->cfg.repeat) + 1) * step;
    assert_true(fabs(e.seconds - want) < 1e-9 * want);
    assert_true(e.seconds > BENCH_ESTIMATE_WARN_S);
    // twice the rate, half the time
    c.gemm_flops = 2;
    bench_estimate e2;
    bench_plan_estimate(p, &c, &e2);
    assert_true(fabs(e2.seconds - want / 2) < 1e-9 * want);
    // a case that does not build is left out
    p->cases[0].fail_to_load[0] = 'x';
    bench_plan_estimate(p, &c, &e2);
    assert_int_equal(e2.entries, 0);
    assert_true(e2.seconds == 0);
    bench_plan_free(p);
}

// --- killed children, no litter, output safety --------------------------------

// Available memory: meminfo's MemAvailable in kB, a cgroup's limit less
// its use ("max": no limit of its own), junk refused.
static void test_mem_available_parse(void **state) {
    (void)state;
    size_t b = 7;
    assert_int_equal(bench_meminfo_available("MemTotal:       24572972 kB\n"
                                             "MemFree:        20000000 kB\n"
                                             "MemAvailable:   23386052 kB\n",
                                             &b),
                     0);
    assert_true(b == (size_t)23386052 * 1024);
    assert_int_equal(bench_meminfo_available("MemTotal: 5 kB\n", &b), -1);
    assert_int_equal(bench_meminfo_available("MemAvailable: lots\n", &b), -1);
    assert_int_equal(bench_cgroup_room("8589934592\n", "1073741824\n", &b), 0);
    assert_true(b == (size_t)7 << 30);
    assert_int_equal(bench_cgroup_room("100\n", "200\n", &b), 0); // over: no room
    assert_true(b == 0);
    assert_int_equal(bench_cgroup_room("max\n", "200\n", &b), -1);
    assert_int_equal(bench_cgroup_room("12x\n", "200\n", &b), -1);
    b = 0; // Linux has /proc/meminfo: this machine's figure is there
    assert_int_equal(bench_mem_available(&b), 0);
    assert_true(b > 0);
}

// Only the exact "oom_kill N" line counts: not v1's oom_kill_disable, not
// v2's oom_group_kill, not a line with more after the number.
static void test_oom_kills_parse(void **state) {
    (void)state;
    long long n = -7;
    assert_int_equal(bench_oom_kills_parse("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(bench_oom_kills_parse("low 0\nhigh 0\nmax 2\noom 2\noom_kill 12\n"
                                           "oom_group_kill 1\n",
                                           &n),
                     0);
    assert_int_equal(n, 12);
    assert_int_equal(bench_oom_kills_parse("oom_kill 5", &n), 0); // no final newline
    assert_int_equal(n, 5);
    n = -7;
    assert_int_equal(bench_oom_kills_parse("oom_kill_disable 0\nunder_oom 0\n", &n), -1);
    assert_int_equal(bench_oom_kills_parse("oom_group_kill 4\n", &n), -1);
    assert_int_equal(bench_oom_kills_parse("oom_kill 4x\noom_kill \noom_kill -1\n", &n), -1);
    assert_int_equal(bench_oom_kills_parse("", &n), -1);
    assert_int_equal(n, -7);

    char paths[3][512];
    const char *v1 = "9:name=systemd:/\n4:memory:/job/abc\n0::/\n";
    assert_int_equal(bench_oom_kills_files(v1, "/cg", paths, 3), 2);
    assert_string_equal(paths[0], "/cg/memory/job/abc/memory.oom_control");
    assert_string_equal(paths[1], "/cg/memory/memory.oom_control");
    assert_int_equal(bench_oom_kills_files("0::/user.slice/a.scope\n", "/cg", paths, 3), 1);
    assert_string_equal(paths[0], "/cg/user.slice/a.scope/memory.events");
    assert_int_equal(bench_oom_kills_files("3:memory:/\n", "/cg", paths, 3), 1);
    assert_string_equal(paths[0], "/cg/memory/memory.oom_control");
    assert_int_equal(bench_oom_kills_files("3:cpu,memory:/x\n", "/cg", paths, 3), 2);
    assert_string_equal(paths[0], "/cg/memory/x/memory.oom_control");
    assert_int_equal(bench_oom_kills_files("5:cpu:/x\n6:memoryx:/y\n", "/cg", paths, 3), 0);
    long long here;
    if (bench_oom_kills(&here) == 0) // readable on this machine: a count
        assert_true(here >= 0);
}

// The tiny suite's plan, its results to be written to out.
static bench_plan *plan_writing(const char *out) {
    bench_config cfg = tiny_config();
    cfg.output = out;
    bench_plan *p;
    diag d = {0};
    assert_int_equal(bench_plan_new(&cfg, &p, &d), 0);
    return p;
}

// -o a directory, an output another run holds, and the lock's end.
static void test_output_refused(void **state) {
    (void)state;
    char out[700], lock[720], err[512];
    snprintf(out, sizeof out, "%s/suites", dir);
    bench_plan *p = plan_writing(out);
    bench_report *rep;
    assert_int_equal(bench_report_open(p, &rep, err, sizeof err), -2);
    assert_null(rep);
    assert_non_null(strstr(err, "/suites: is a directory"));

    bench_plan_free(p);
    snprintf(out, sizeof out, "%s/held.json", dir);
    snprintf(lock, sizeof lock, "%s.lock", out);
    p = plan_writing(out);
    int fd;
    long holder;
    assert_int_equal(base_lock_take(lock, &fd, &holder, err, sizeof err), 0);
    assert_int_equal(bench_report_open(p, &rep, err, sizeof err), -2);
    char want[1600];
    snprintf(want, sizeof want, "%s is being written by another tcbench run (pid %ld; lock %s)",
             out, (long)getpid(), lock);
    assert_string_equal(err, want);
    base_lock_drop(lock, fd);
    assert_int_equal(access(lock, F_OK), -1);
    // a lock file nobody holds is simply taken, then removed with the report
    write_file(lock, "1\n");
    assert_int_equal(bench_report_open(p, &rep, err, sizeof err), 0);
    assert_int_equal(base_lock_take(lock, &fd, &holder, err, sizeof err), 1);
    assert_int_equal(holder, (long)getpid());
    bench_report_free(rep);
    assert_int_equal(access(lock, F_OK), -1);
    bench_plan_free(p);
}

// A run removes OUTPUT.tmp.<pid> of a dead pid, and nothing else.
static void test_stale_tmp(void **state) {
    (void)state;
    pid_t dead = fork();
    assert_true(dead >= 0);
    if (dead == 0)
        _exit(0);
    int ws;
    assert_int_equal(waitpid(dead, &ws, 0), dead);
    char out[700], path[800];
    snprintf(out, sizeof out, "%s/stale/out.json", dir);
    const char *keep[] = {"out.json.tmp.%ld", "out.json.tmp.%ldx", "other.json.tmp.%ld",
                          "out.json.tmp."};
    long pids[] = {(long)getpid(), (long)dead, (long)dead, 0};
    snprintf(path, sizeof path, "%s/stale", dir);
    assert_int_equal(mkdir(path, 0777), 0);
    for (int i = 0; i < 4; i++) {
        char name[100];
        snprintf(name, sizeof name, keep[i], pids[i]);
        snprintf(path, sizeof path, "%s/stale/%s", dir, name);
        write_file(path, "");
    }
    snprintf(path, sizeof path, "%s.tmp.%ld", out, (long)dead);
    write_file(path, "{\"cut");
    assert_int_equal(base_tmp_sweep(out), 1);
    assert_int_equal(access(path, F_OK), -1);
    for (int i = 0; i < 4; i++) {
        char name[100];
        snprintf(name, sizeof name, keep[i], pids[i]);
        snprintf(path, sizeof path, "%s/stale/%s", dir, name);
        assert_int_equal(access(path, F_OK), 0);
    }
    // bench_report_open sweeps
    snprintf(path, sizeof path, "%s.tmp.%ld", out, (long)dead);
    write_file(path, "");
    bench_plan *p = plan_writing(out);
    bench_report *rep;
    char err[512];
    assert_int_equal(bench_report_open(p, &rep, err, sizeof err), 0);
    assert_int_equal(access(path, F_OK), -1);
    bench_report_free(rep);
    bench_plan_free(p);
}

// A corrupted calibration file is said; a missing one is not.
static void test_calibration_check(void **state) {
    (void)state;
    char path[600], err[512] = "";
    snprintf(path, sizeof path, "%s/calib-check.json", dir);
    assert_int_equal(bench_calibration_check(path, err, sizeof err), 0);
    write_file(path, "{\"calibrations\": [");
    assert_int_equal(bench_calibration_check(path, err, sizeof err), -1);
    assert_non_null(strstr(err, "calibration file unreadable"));
    assert_non_null(strstr(err, path));
    write_file(path, "{\"calibrations\": [{\"threads\": 1}]}");
    assert_int_equal(bench_calibration_check(path, err, sizeof err), -1);
    assert_non_null(strstr(err, "a calibration without its figures"));
    write_file(path, "[]");
    assert_int_equal(bench_calibration_check(path, err, sizeof err), -1);
    assert_non_null(strstr(err, "no calibrations"));
    bench_calibration c = {.bandwidth_Bps = 10e9, .gemm_flops = 100e9, .threads = 1};
    snprintf(c.cpu_model, sizeof c.cpu_model, "x");
    assert_int_equal(unlink(path), 0);
    assert_int_equal(bench_calibration_save(&c, path, err, sizeof err), 0);
    assert_int_equal(bench_calibration_check(path, err, sizeof err), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timing_loop),
        cmocka_unit_test(test_timing_interleaved),
        cmocka_unit_test(test_timing_step_failure),
        cmocka_unit_test(test_timing_device_clock),
        cmocka_unit_test(test_timing_warm_up),
        cmocka_unit_test(test_timing_rounds),
        cmocka_unit_test(test_stability_judge),
        cmocka_unit_test(test_group_pool),
        cmocka_unit_test(test_thread_stall_judge),
        cmocka_unit_test(test_gpu_json),
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_device_checks),
        cmocka_unit_test(test_measure_in_process),
        cmocka_unit_test(test_run_isolated),
        cmocka_unit_test(test_run_oom),
        cmocka_unit_test(test_run_interrupted),
        cmocka_unit_test(test_noise_hook),
        cmocka_unit_test(test_compile_fails),
        cmocka_unit_test(test_dump),
        cmocka_unit_test(test_cuda_results),
        cmocka_unit_test(test_cuda_run),
        cmocka_unit_test(test_calibration_per_threads),
        cmocka_unit_test(test_report_open_fails),
        cmocka_unit_test(test_check_file),
        cmocka_unit_test(test_model_fail_to_load),
        cmocka_unit_test(test_train_needs),
        cmocka_unit_test(test_suite_processes),
        cmocka_unit_test(test_estimate),
        cmocka_unit_test(test_journal_reader),
        cmocka_unit_test(test_resume),
        cmocka_unit_test(test_journal_full),
        cmocka_unit_test(test_oom_kills_parse),
        cmocka_unit_test(test_mem_available_parse),
        cmocka_unit_test(test_output_refused),
        cmocka_unit_test(test_stale_tmp),
        cmocka_unit_test(test_calibration_check),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
