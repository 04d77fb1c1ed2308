// Running groups: one child process each, its results back through a pipe
// (runner.h). The measurement itself is measure.c.
#include "runner.h"

#include "base/clock.h"
#include "base/files.h"
#include "timing.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

// A child may not send more than this; anything larger is a runaway.
#define CHILD_MAX_BYTES ((size_t)64 << 20)
#define TICK_S          0.25

static int fail_status(bench_result *r, enum bench_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail_status(bench_result *r, enum bench_status s, const char *fmt, ...) {
    r->status = s;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->message, sizeof r->message, fmt, ap);
    va_end(ap);
    return -1;
}

void bench_result_free(bench_result *r) {
    free(r->samples);
    free(r->host_samples);
    r->samples = NULL;
    r->host_samples = NULL;
    r->nsamples = 0;
}

// The fault a test asked for with TCBENCH_TEST_FAULT=kind:NAME[,kind:NAME...],
// kind one of crash, hang, oom, crash-later (a crash in every process of
// the group but the first: --processes).
static const char *test_fault(const char *name) {
    const char *p = getenv("TCBENCH_TEST_FAULT");
    size_t nlen = strlen(name);
    while (p && *p) {
        size_t len = strcspn(p, ",");
        const char *colon = memchr(p, ':', len);
        if (colon && len - (size_t)(colon + 1 - p) == nlen && !strncmp(colon + 1, name, nlen)) {
            size_t klen = (size_t)(colon - p);
            if (klen == 5 && !strncmp(p, "crash", 5))
                return "crash";
            if (klen == 11 && !strncmp(p, "crash-later", 11))
                return "crash-later";
            if (klen == 4 && !strncmp(p, "hang", 4))
                return "hang";
            if (klen == 3 && !strncmp(p, "oom", 3))
                return "oom";
        }
        p += len;
        p += *p == ',';
    }
    return NULL;
}

bool bench_test_noise(const char *name, const char *mode) {
    const char *p = getenv("TCBENCH_TEST_NOISE");
    size_t nlen = strlen(name), mlen = strlen(mode);
    while (p && *p) {
        size_t len = strcspn(p, ",");
        const char *colon = memchr(p, ':', len);
        size_t klen = colon ? (size_t)(colon - p) : len;
        if (klen == nlen && !strncmp(p, name, nlen) &&
            (!colon || (len - klen - 1 == mlen && !strncmp(colon + 1, mode, mlen))))
            return true;
        p += len;
        p += *p == ',';
    }
    return false;
}

static int write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t k = write(fd, buf, len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        buf += k;
        len -= (size_t)k;
    }
    return 0;
}

static _Noreturn void child_main(const bench_plan *p, int group, int process, const char *kcache,
                                 int fd) {
    // The parent's handlers (a test framework's, say) must not catch a
    // crash here: the parent reads the signal from the exit status.
    const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; i++)
        signal(crash_signals[i], SIG_DFL);
    signal(SIGPIPE, SIG_IGN);

    const bench_group *g = &p->groups[group];
    const char *fault = test_fault(p->cases[p->tasks[g->first].case_index].c->name);
    if (fault && (!strcmp(fault, "crash") || (!strcmp(fault, "crash-later") && process > 0)))
        raise(SIGSEGV);
    if (fault && !strcmp(fault, "hang"))
        for (;;)
            pause();
    if (fault && !strcmp(fault, "oom"))
        _exit(BENCH_EXIT_OOM); // as an allocation failure in the child would

    bench_result rs[BENCH_MODE_COUNT];
    bench_group_measure(p, group, process, kcache, rs);
    json_t *arr = json_array();
    for (int i = 0; i < g->ntasks; i++)
        if (json_array_append_new(arr, bench_result_json(p, &rs[i], NULL)) < 0)
            _exit(BENCH_EXIT_OOM);
    char *text = arr ? json_dumps(arr, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    if (!text)
        _exit(BENCH_EXIT_OOM);
    _exit(write_all(fd, text, strlen(text)) < 0 ? 3 : 0);
}

static double getnum(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static int64_t getint(const json_t *o, const char *key) {
    return (int64_t)json_integer_value(json_object_get(o, key));
}

static void getstr(const json_t *o, const char *key, char *buf, size_t cap) {
    const char *v = json_string_value(json_object_get(o, key));
    snprintf(buf, cap, "%s", v ? v : "");
}

// The stability object as bench_result_json wrote it (null: no samples).
static void stability_from_json(const json_t *j, bench_stability *s) {
    if (!json_is_object(j))
        return;
    s->noise = getnum(j, "noise");
    s->ci_rel_width = getnum(j, "ci_rel_width");
    s->rounds = (int)getint(j, "rounds");
    s->timed_s = getnum(j, "timed_s");
    s->nivcsw = getint(j, "nivcsw");
    s->steal_s = getnum(j, "steal_s");
    s->run_delay_s = getnum(j, "run_delay_s");
    s->load_start = getnum(j, "load_start");
    s->load_end = getnum(j, "load_end");
    s->one_thread_s = getnum(j, "one_thread_s");
    s->process_spread = getnum(j, "process_spread");
    const json_t *med = json_object_get(j, "process_medians_s");
    const json_t *cnt = json_object_get(j, "process_samples");
    s->processes = 0;
    for (size_t i = 0; i < json_array_size(med) && i < BENCH_MAX_PROCESSES; i++) {
        s->process_medians_s[s->processes] = json_number_value(json_array_get(med, i));
        s->process_samples[s->processes++] = (int)json_integer_value(json_array_get(cnt, i));
    }
    s->unstable = json_is_true(json_object_get(j, "unstable"));
    const json_t *why = json_object_get(j, "reasons");
    s->nreasons = 0;
    for (size_t i = 0; i < json_array_size(why) && s->nreasons < BENCH_MAX_REASONS; i++) {
        const char *w = json_string_value(json_array_get(why, i));
        snprintf(s->reasons[s->nreasons++], sizeof s->reasons[0], "%s", w ? w : "");
    }
}

// One case object as bench_result_json wrote it.
static int result_from_json(const json_t *j, bench_result *r) {
    const char *status = json_string_value(json_object_get(j, "status"));
    const json_t *samples = json_object_get(j, "samples_s");
    const json_t *acc = json_object_get(j, "accuracy");
    int st = status ? bench_status_parse(status) : -1;
    if (st < 0 || !json_is_array(samples) || !json_is_object(acc))
        return fail_status(r, BENCH_ERROR,
                           "child sent a result without status, samples_s or accuracy");
    r->status = st;
    getstr(j, "message", r->message, sizeof r->message);
    r->nsamples = 0;
    size_t n = json_array_size(samples);
    if (n > 0) {
        if (!(r->samples = malloc(n * sizeof *r->samples)))
            return fail_status(r, BENCH_OOM, "malloc: out of memory reading %zu samples", n);
        for (size_t i = 0; i < n; i++)
            r->samples[r->nsamples++] = json_number_value(json_array_get(samples, i));
    }
    // cuda: the host's times beside the events', one per sample
    const json_t *host = json_object_get(j, "host_samples_s");
    if (r->nsamples > 0 && json_array_size(host) == (size_t)r->nsamples) {
        if (!(r->host_samples = malloc(n * sizeof *r->host_samples)))
            return fail_status(r, BENCH_OOM, "malloc: out of memory reading %zu samples", n);
        for (size_t i = 0; i < n; i++)
            r->host_samples[i] = json_number_value(json_array_get(host, i));
    }
    bench_stats_compute(r->samples, r->nsamples, &r->stats);
    r->iters_per_sample = getint(j, "iterations_per_sample");
    r->kernels = getint(j, "kernels");
    r->cast_kernels = getint(j, "cast_kernels");
    r->peak_bytes = getint(j, "peak_bytes");
    r->arena_bytes = getint(j, "arena_bytes");
    r->compression_ratio = getnum(j, "compression_ratio");
    const json_t *sp = json_object_get(j, "speedup");
    r->speedup =
        (bench_speedup){getnum(sp, "median"), getnum(sp, "ci95_lo"), getnum(sp, "ci95_hi")};
    const json_t *cm = json_object_get(j, "compile");
    if (json_is_object(cm))
        r->compile = (bench_compile){true, getnum(cm, "cold_s"), getnum(cm, "warm_s"),
                                     json_is_true(json_object_get(cm, "cache_hit"))};
    bench_accuracy *a = &r->acc;
    a->checked = json_is_true(json_object_get(acc, "checked"));
    getstr(acc, "reason", a->reason, sizeof a->reason);
    a->rel_l2 = getnum(acc, "rel_l2");
    a->max_abs = getnum(acc, "max_abs");
    a->rmse = getnum(acc, "rmse");
    a->tol = getnum(acc, "tolerance");
    a->cosine = getnum(acc, "cosine");
    a->cosine_fallback = json_is_true(json_object_get(acc, "cosine_fallback"));
    a->baseline_fallback = json_is_true(json_object_get(acc, "baseline_fallback"));
    const json_t *outs = json_object_get(acc, "outputs");
    for (size_t i = 0; i < json_array_size(outs) && i < BENCH_MAX_OUTPUTS; i++) {
        const json_t *o = json_array_get(outs, i);
        a->outputs[a->noutputs++] = (bench_accuracy_out){
            getnum(o, "rel_l2"), getnum(o, "max_abs"), getnum(o, "rmse"), getnum(o, "cosine"), NAN};
    }
    a->vs_eager = json_object_get(acc, "rule") != NULL;
    a->vs_eager_max_abs = getnum(acc, "vs_eager_max_abs");
    a->vs_eager_rel_l2 = getnum(acc, "vs_eager_rel_l2");
    a->eager_rmse = getnum(acc, "eager_rmse_vs_fp64");
    getstr(acc, "rule", a->rule, sizeof a->rule);
    stability_from_json(json_object_get(j, "stability"), &r->stab);
    return 0;
}

int bench_results_from_child(const char *text, size_t len, bench_result *rs, int n) {
    json_error_t jerr;
    json_t *j = json_loadb(text, len, 0, &jerr);
    int rc = 0;
    char why[300] = "";
    if (!j)
        snprintf(why, sizeof why, "child sent a malformed result: %s", jerr.text);
    else if (!json_is_array(j) || json_array_size(j) != (size_t)n)
        snprintf(why, sizeof why, "child sent %zu results for a group of %d",
                 json_is_array(j) ? json_array_size(j) : 0, n);
    for (int i = 0; i < n && !why[0]; i++)
        if (result_from_json(json_array_get(j, i), &rs[i]) < 0) {
            snprintf(why, sizeof why, "%s", rs[i].message);
            rc = -1;
        }
    if (why[0]) {
        for (int i = 0; i < n; i++) {
            bench_result_free(&rs[i]);
            fail_status(&rs[i], BENCH_ERROR, "%s", why);
        }
        rc = -1;
    }
    json_decref(j);
    return rc;
}

static void tick(const bench_plan *p, int group, const bench_hooks *h, double t0, double *next) {
    double now = base_now();
    if (h && h->on_tick && now >= *next) {
        h->on_tick(p, group, now - t0, h->user);
        *next = now + TICK_S;
    }
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

// Reads the child's result until EOF and reaps it, both within the deadline.
// Returns 1 when the deadline passed (the child is still running), 0 when it
// was reaped into *wstatus, -1 on a failed system call (message in r).
static int child_wait(const bench_plan *p, int group, const bench_hooks *h, pid_t pid, int fd,
                      double t0, char **buf, size_t *len, int *wstatus, bench_result *r) {
    double deadline = t0 + p->cfg.timeout_s, next_tick = t0 + TICK_S;
    size_t cap = 0;
    for (bool eof = false; !eof;) {
        double left = deadline - base_now();
        if (left <= 0)
            return 1;
        double wait_s = left < TICK_S ? left : TICK_S;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int n = poll(&pf, 1, (int)(wait_s * 1000) + 1);
        if (n < 0 && errno != EINTR)
            return fail_status(r, BENCH_ERROR, "poll: %s", strerror(errno));
        if (n > 0) {
            if (*len + 65536 > cap) {
                cap = cap ? 2 * cap : 65536 * 2;
                char *nb = cap <= CHILD_MAX_BYTES ? realloc(*buf, cap) : NULL;
                if (!nb)
                    return fail_status(r, BENCH_ERROR, "realloc: child result over %zu bytes",
                                       *len);
                *buf = nb;
            }
            ssize_t k = read(fd, *buf + *len, cap - *len);
            if (k < 0 && errno != EINTR && errno != EAGAIN)
                return fail_status(r, BENCH_ERROR, "read: %s", strerror(errno));
            if (k == 0)
                eof = true;
            if (k > 0)
                *len += (size_t)k;
        }
        tick(p, group, h, t0, &next_tick);
    }
    // The pipe closes when the child exits; reaping follows within
    // milliseconds, but a child that closed it early is still timed.
    for (;;) {
        pid_t w = waitpid(pid, wstatus, WNOHANG);
        if (w == pid)
            return 0;
        if (w < 0 && errno != EINTR)
            return fail_status(r, BENCH_ERROR, "waitpid: %s", strerror(errno));
        if (base_now() >= deadline)
            return 1;
        sleep_ms(2);
        tick(p, group, h, t0, &next_tick);
    }
}

static void reap(pid_t pid, int *wstatus) {
    while (waitpid(pid, wstatus, 0) < 0 && errno == EINTR)
        ;
}

// The results of one process of group g, rs[0 .. ntasks - 1], from its own child.
static void run_child(const bench_plan *p, int group, int process, const char *kcache,
                      const bench_hooks *h, bench_result *rs) {
    const bench_group *g = &p->groups[group];
    int n = g->ntasks;
    for (int i = 0; i < n; i++) {
        memset(&rs[i], 0, sizeof rs[i]);
        rs[i].task = g->first + i;
        rs[i].speedup = (bench_speedup){NAN, NAN, NAN};
        rs[i].compression_ratio = NAN;
        rs[i].stab.ci_rel_width = rs[i].stab.run_delay_s = rs[i].stab.one_thread_s = NAN;
        rs[i].stab.load_start = rs[i].stab.load_end = NAN;
    }
    bench_result *r = &rs[0]; // a failure is set here, then copied to all
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0) {
        fail_status(r, BENCH_ERROR, "pipe2: %s", strerror(errno));
        goto copy;
    }
    // Buffered output would otherwise be written twice, once by the child.
    fflush(stdout);
    fflush(stderr);
    double t0 = base_now();
    pid_t pid = fork();
    if (pid < 0) {
        fail_status(r, BENCH_ERROR, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        goto copy;
    }
    if (pid == 0) {
        close(fds[0]);
        child_main(p, group, process, kcache, fds[1]);
    }
    close(fds[1]);

    char *buf = NULL;
    size_t len = 0;
    int wstatus = 0;
    int rc = child_wait(p, group, h, pid, fds[0], t0, &buf, &len, &wstatus, r);
    close(fds[0]);
    if (rc != 0) {
        if (kill(pid, SIGKILL) < 0 && errno != ESRCH)
            fprintf(stderr, "tcbench: kill: %s\n", strerror(errno));
        reap(pid, &wstatus);
        if (rc == 1)
            fail_status(r, BENCH_TIMEOUT, "no result within --timeout %g s; killed",
                        p->cfg.timeout_s);
    } else if (WIFSIGNALED(wstatus)) {
        int sig = WTERMSIG(wstatus);
        const char *abbrev = sigabbrev_np(sig);
        // SIGKILL that we did not send: the kernel's out-of-memory killer
        if (sig == SIGKILL)
            fail_status(r, BENCH_OOM, "killed by SIGKILL (out of memory?)");
        else if (abbrev)
            fail_status(r, BENCH_CRASH, "killed by SIG%s", abbrev);
        else
            fail_status(r, BENCH_CRASH, "killed by signal %d", sig);
    } else if (WEXITSTATUS(wstatus) == BENCH_EXIT_OOM) {
        fail_status(r, BENCH_OOM, "out of memory (child exit code %d)", BENCH_EXIT_OOM);
    } else if (WEXITSTATUS(wstatus) != 0) {
        fail_status(r, BENCH_ERROR, "child exited with status %d", WEXITSTATUS(wstatus));
    } else if (len == 0) {
        fail_status(r, BENCH_ERROR, "child exited without a result");
    } else {
        bench_results_from_child(buf, len, rs, n);
        rc = 2; // each result its own
    }
    free(buf);
    double wall = base_now() - t0;
    for (int i = 0; i < n; i++)
        rs[i].wall_s = wall;
    if (rc == 2)
        return;
copy:
    for (int i = 1; i < n; i++) {
        rs[i].status = r->status;
        snprintf(rs[i].message, sizeof rs[i].message, "%s", r->message);
    }
}

// The group in cfg.processes children, one after the other, their samples
// pooled into the first's (bench_group_pool); a failed first process ends it.
static void run_group(const bench_plan *p, int group, const bench_hooks *h, bench_result *rs) {
    int n = p->groups[group].ntasks;
    int procs = p->cfg.processes > 1 ? p->cfg.processes : 1;
    if (procs > BENCH_MAX_PROCESSES)
        procs = BENCH_MAX_PROCESSES;
    // the processes' shared kernel cache: process 0 compiles, the others load
    char kcache[1024] = "";
    char err[512];
    if (procs > 1 && base_mkdtemp("tcbench-group", kcache, sizeof kcache, err, sizeof err) < 0) {
        fprintf(stderr, "tcbench: %s; each process compiles its own\n", err);
        kcache[0] = '\0';
    }
    run_child(p, group, 0, kcache[0] ? kcache : NULL, h, rs);
    for (int k = 1; k < procs; k++) {
        bool any = false;
        for (int i = 0; i < n; i++)
            any |= bench_status_good(rs[i].status) && rs[i].nsamples > 0;
        if (!any)
            break;
        bench_result more[BENCH_MODE_COUNT];
        run_child(p, group, k, kcache[0] ? kcache : NULL, h, more);
        bench_group_pool(rs, more, n, k);
        for (int i = 0; i < n; i++) {
            rs[i].wall_s += more[i].wall_s;
            bench_result_free(&more[i]);
        }
    }
    if (kcache[0])
        bench_remove_tree(kcache);
    if (procs > 1) { // the pooled samples' statistics, then their judgement
        for (int i = 0; i < n; i++)
            bench_stats_compute(rs[i].samples, rs[i].nsamples, &rs[i].stats);
        bench_group_judge(rs, n, p->cfg.threads);
    }
}

int bench_run(const bench_plan *p, bench_report *rep, const bench_hooks *h) {
    int failed = 0;
    bool journal_warned = false;
    double t0 = base_now();
    for (int gi = 0; gi < p->ngroups; gi++) {
        if (h && h->on_start)
            h->on_start(p, gi, h->user);
        bench_result *rs = &rep->results[rep->nresults];
        int n = p->groups[gi].ntasks;
        run_group(p, gi, h, rs);
        rep->nresults += n;
        rep->wall_s = base_now() - t0;
        for (int i = 0; i < n; i++) {
            bench_result *r = &rs[i];
            failed += !bench_status_good(r->status);
            json_t *j = bench_result_json(p, r, rep->has_calib ? &rep->calib : NULL);
            char *line = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;
            json_decref(j);
            FILE *f = rep->journal_file;
            bool ok =
                line && fprintf(f, "%s\n", line) >= 0 && fflush(f) == 0 && fsync(fileno(f)) == 0;
            if (!ok && !journal_warned) {
                fprintf(stderr, "tcbench: %s: writing the journal failed: %s\n", rep->journal,
                        line ? strerror(errno) : "json_dumps: out of memory");
                journal_warned = true;
            }
            free(line);
            if (h && h->on_done)
                h->on_done(p, r, h->user);
        }
    }
    return failed;
}
