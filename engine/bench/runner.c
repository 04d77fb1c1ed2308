// Running tasks: the measurement, and one child process per task (runner.h).
#include "runner.h"

#include "eager.h"
#include "ref.h"
#include "timing.h"

#include <cblas.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <omp.h>
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

// One eager step; outputs are dropped at once, as a benchmark loop does.
typedef struct step_ctx {
    eager *e;
    int noutputs;
    eager_stats st;
    bool failed;
} step_ctx;

static int eager_step(void *ctx) {
    step_ctx *s = ctx;
    tensor *out[8] = {0};
    if (eager_run(s->e, out, &s->st) < 0) {
        s->failed = true;
        return -1;
    }
    for (int i = 0; i < s->noutputs; i++)
        tensor_free(out[i]);
    return 0;
}

static int check_accuracy(const bench_plan *p, const bench_case *bc, const model *m, eager *e,
                          bench_result *r) {
    bench_accuracy *acc = &r->acc;
    if (!p->cfg.accuracy) {
        snprintf(acc->reason, sizeof acc->reason, "disabled by --no-accuracy");
        return 0;
    }
    if (bc->flops > p->cfg.accuracy_flops_limit) {
        snprintf(acc->reason, sizeof acc->reason,
                 "skipped: %.3g FLOPs per step is above the %.3g limit of the fp64 reference",
                 bc->flops, p->cfg.accuracy_flops_limit);
        return 0;
    }
    int nout = m->g->noutputs;
    tensor *out[8] = {0};
    double *ref[8] = {0};
    eager_stats st;
    char err[256] = "";
    int rc = 0;
    if (eager_run(e, out, &st) < 0)
        return fail_status(r, BENCH_OOM, "eager_run: %s", eager_error(e));
    if (ref_run(m, ref, err, sizeof err) < 0) {
        rc = fail_status(r, BENCH_ERROR, "fp64 reference: %s", err);
    } else {
        for (int i = 0; i < nout; i++) {
            bench_accuracy_out o;
            bench_accuracy_compare(out[i], ref[i], &o);
            bench_accuracy_merge(acc, &o);
        }
        acc->checked = true;
    }
    for (int i = 0; i < nout; i++) {
        tensor_free(out[i]);
        free(ref[i]);
    }
    return rc;
}

void bench_task_measure(const bench_plan *p, int task, bench_result *r) {
    memset(r, 0, sizeof *r);
    r->task = task;
    r->status = BENCH_ERROR;
    const bench_task *t = &p->tasks[task];
    const bench_case *bc = &p->cases[t->case_index];
    for (int a = 0; a < BENCH_AXIS_COUNT; a++)
        if (!bench_axis_available(a, t->axis[a])) {
            fail_status(r, BENCH_ERROR, "%s %s: not available in this build yet",
                        bench_axis_name(a), bench_axis_value(a, t->axis[a]));
            return;
        }

    // oneDNN follows OpenMP's setting; OpenBLAS keeps its own.
    omp_set_num_threads(p->cfg.threads);
    openblas_set_num_threads(p->cfg.threads);

    modeldef_opts opts = {.training = t->axis[BENCH_AXIS_WORKLOAD] == BENCH_WL_TRAIN};
    model *m = NULL;
    eager *e = NULL;
    diag d = {0};
    bench_timing tm = {0};
    if (modeldef_build(bc->md, bc->c->overrides, bc->c->noverrides, bc->batch, &opts, &m, &d) < 0) {
        diag_format(&d, r->message, sizeof r->message);
        return;
    }
    if (model_init_values(m, p->cfg.seed) < 0) {
        fail_status(r, BENCH_OOM, "model_init_values: out of memory");
        goto done;
    }
    if (!(e = eager_new(m))) {
        fail_status(r, BENCH_OOM, "eager_new: out of memory");
        goto done;
    }
    if (check_accuracy(p, bc, m, e, r) < 0)
        goto done;

    step_ctx sc = {.e = e, .noutputs = m->g->noutputs};
    if (bench_time(eager_step, &sc, &(bench_timing_opts){.repeat = p->cfg.repeat}, &tm) < 0) {
        if (sc.failed)
            fail_status(r, BENCH_OOM, "eager_run: %s", eager_error(e));
        else
            fail_status(r, BENCH_OOM, "malloc: out of memory for %d samples", p->cfg.repeat);
        bench_timing_free(&tm);
        goto done;
    }
    r->samples = tm.samples;
    r->nsamples = tm.nsamples;
    r->iters_per_sample = tm.iters_per_sample;
    r->kernels = sc.st.kernels;
    r->peak_bytes = (int64_t)sc.st.peak_bytes;
    if (bench_stats_compute(r->samples, r->nsamples, &r->stats) < 0) {
        fail_status(r, BENCH_OOM, "malloc: out of memory for statistics");
        goto done;
    }
    r->status = BENCH_OK;
    r->message[0] = '\0';
    if (!bench_accuracy_passes(&r->acc, BENCH_TOL_FP32))
        fail_status(r, BENCH_FAIL_ACCURACY,
                    "rel_l2 %.3g vs the fp64 reference is above %.0e (fp32)", r->acc.rel_l2,
                    BENCH_TOL_FP32);
done:
    eager_free(e);
    model_free(m);
}

void bench_result_free(bench_result *r) {
    free(r->samples);
    r->samples = NULL;
    r->nsamples = 0;
}

// The fault a test asked for with TCBENCH_TEST_FAULT=kind:NAME[,kind:NAME...],
// kind one of crash, hang, oom.
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

static _Noreturn void child_main(const bench_plan *p, int task, int fd) {
    // The parent's handlers (a test framework's, say) must not catch a
    // crash here: the parent reads the signal from the exit status.
    const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; i++)
        signal(crash_signals[i], SIG_DFL);
    signal(SIGPIPE, SIG_IGN);

    const char *fault = test_fault(p->cases[p->tasks[task].case_index].c->name);
    if (fault && !strcmp(fault, "crash"))
        raise(SIGSEGV);
    if (fault && !strcmp(fault, "hang"))
        for (;;)
            pause();
    if (fault && !strcmp(fault, "oom"))
        _exit(BENCH_EXIT_OOM); // as an allocation failure in the child would

    bench_result r;
    bench_task_measure(p, task, &r);
    json_t *j = bench_result_json(p, &r);
    char *text = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    if (!text)
        _exit(BENCH_EXIT_OOM);
    _exit(write_all(fd, text, strlen(text)) < 0 ? 3 : 0);
}

static double getnum(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

int bench_result_from_child(const char *text, size_t len, bench_result *r) {
    json_error_t jerr;
    json_t *j = json_loadb(text, len, 0, &jerr);
    if (!j)
        return fail_status(r, BENCH_ERROR, "child sent a malformed result: %s", jerr.text);
    const char *status = json_string_value(json_object_get(j, "status"));
    const json_t *samples = json_object_get(j, "samples_s");
    const json_t *acc = json_object_get(j, "accuracy");
    int st = status ? bench_status_parse(status) : -1;
    if (st < 0 || !json_is_array(samples) || !json_is_object(acc)) {
        json_decref(j);
        return fail_status(r, BENCH_ERROR,
                           "child sent a result without status, samples_s or "
                           "accuracy");
    }
    r->status = st;
    const char *msg = json_string_value(json_object_get(j, "message"));
    snprintf(r->message, sizeof r->message, "%s", msg ? msg : "");
    r->nsamples = 0;
    size_t n = json_array_size(samples);
    if (n > 0) {
        if (!(r->samples = malloc(n * sizeof *r->samples))) {
            json_decref(j);
            return fail_status(r, BENCH_OOM, "malloc: out of memory reading %zu samples", n);
        }
        for (size_t i = 0; i < n; i++)
            r->samples[r->nsamples++] = json_number_value(json_array_get(samples, i));
    }
    bench_stats_compute(r->samples, r->nsamples, &r->stats);
    r->iters_per_sample = (int64_t)json_integer_value(json_object_get(j, "iterations_per_sample"));
    r->kernels = (int64_t)json_integer_value(json_object_get(j, "kernels"));
    r->peak_bytes = (int64_t)json_integer_value(json_object_get(j, "peak_bytes"));
    r->acc.checked = json_is_true(json_object_get(acc, "checked"));
    const char *reason = json_string_value(json_object_get(acc, "reason"));
    snprintf(r->acc.reason, sizeof r->acc.reason, "%s", reason ? reason : "");
    r->acc.rel_l2 = getnum(acc, "rel_l2");
    r->acc.max_abs = getnum(acc, "max_abs");
    r->acc.rmse = getnum(acc, "rmse");
    const json_t *outs = json_object_get(acc, "outputs");
    for (size_t i = 0; i < json_array_size(outs) && i < BENCH_MAX_OUTPUTS; i++) {
        const json_t *o = json_array_get(outs, i);
        r->acc.outputs[r->acc.noutputs++] =
            (bench_accuracy_out){getnum(o, "rel_l2"), getnum(o, "max_abs"), getnum(o, "rmse")};
    }
    json_decref(j);
    return 0;
}

static void tick(const bench_plan *p, int task, const bench_hooks *h, double t0, double *next) {
    double now = bench_now();
    if (h && h->on_tick && now >= *next) {
        h->on_tick(p, task, now - t0, h->user);
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
static int child_wait(const bench_plan *p, int task, const bench_hooks *h, pid_t pid, int fd,
                      double t0, char **buf, size_t *len, int *wstatus, bench_result *r) {
    double deadline = t0 + p->cfg.timeout_s, next_tick = t0 + TICK_S;
    size_t cap = 0;
    for (bool eof = false; !eof;) {
        double left = deadline - bench_now();
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
        tick(p, task, h, t0, &next_tick);
    }
    // The pipe closes when the child exits; reaping follows within
    // milliseconds, but a child that closed it early is still timed.
    for (;;) {
        pid_t w = waitpid(pid, wstatus, WNOHANG);
        if (w == pid)
            return 0;
        if (w < 0 && errno != EINTR)
            return fail_status(r, BENCH_ERROR, "waitpid: %s", strerror(errno));
        if (bench_now() >= deadline)
            return 1;
        sleep_ms(2);
        tick(p, task, h, t0, &next_tick);
    }
}

static void reap(pid_t pid, int *wstatus) {
    while (waitpid(pid, wstatus, 0) < 0 && errno == EINTR)
        ;
}

static void run_task(const bench_plan *p, int task, const bench_hooks *h, bench_result *r) {
    memset(r, 0, sizeof *r);
    r->task = task;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0) {
        fail_status(r, BENCH_ERROR, "pipe2: %s", strerror(errno));
        return;
    }
    // Buffered output would otherwise be written twice, once by the child.
    fflush(stdout);
    fflush(stderr);
    double t0 = bench_now();
    pid_t pid = fork();
    if (pid < 0) {
        fail_status(r, BENCH_ERROR, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return;
    }
    if (pid == 0) {
        close(fds[0]);
        child_main(p, task, fds[1]);
    }
    close(fds[1]);

    char *buf = NULL;
    size_t len = 0;
    int wstatus = 0;
    int rc = child_wait(p, task, h, pid, fds[0], t0, &buf, &len, &wstatus, r);
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
        bench_result_from_child(buf, len, r);
    }
    free(buf);
    r->wall_s = bench_now() - t0;
}

int bench_run(const bench_plan *p, bench_report *rep, const bench_hooks *h) {
    int failed = 0;
    bool journal_warned = false;
    double t0 = bench_now();
    for (int i = 0; i < p->ntasks; i++) {
        if (h && h->on_start)
            h->on_start(p, i, h->user);
        bench_result *r = &rep->results[rep->nresults];
        run_task(p, i, h, r);
        rep->nresults++;
        failed += r->status != BENCH_OK;
        rep->wall_s = bench_now() - t0;

        json_t *j = bench_result_json(p, r);
        char *line = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;
        json_decref(j);
        FILE *f = rep->journal_file;
        bool ok = line && fprintf(f, "%s\n", line) >= 0 && fflush(f) == 0 && fsync(fileno(f)) == 0;
        if (!ok && !journal_warned) {
            fprintf(stderr, "tcbench: %s: writing the journal failed: %s\n", rep->journal,
                    line ? strerror(errno) : "json_dumps: out of memory");
            journal_warned = true;
        }
        free(line);
        if (h && h->on_done)
            h->on_done(p, r, h->user);
    }
    return failed;
}
