// Running groups: one child process each, its results back through a pipe
// (runner.h). The measurement itself is measure.c.
#include "runner.h"

#include "faults.h"
#include "measure.h"
#include "oomkill.h"

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
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

// A child may not send more than this; anything larger is a runaway.
#define CHILD_MAX_BYTES ((size_t)64 << 20)
#define TICK_S          0.25

volatile sig_atomic_t bench_stop;
// The child being measured, for a second interrupt to kill at once.
static volatile sig_atomic_t running_child;

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
                                 int fd, pid_t parent) {
    // The parent's handlers (a test framework's, say) must not catch a
    // crash here: the parent reads the signal from the exit status.
    const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; i++)
        signal(crash_signals[i], SIG_DFL);
    signal(SIGPIPE, SIG_IGN);
    // Its own process group, so that a kill reaches what it started (cc);
    // the parent does the same from its side, whichever runs first.
    if (setpgid(0, 0) < 0)
        fprintf(stderr, "tcbench: setpgid: %s\n", strerror(errno));
    // A parent killed outright cannot kill its child: the child goes too
    // (and lets go of the output's lock, which it shares).
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        fprintf(stderr, "tcbench: prctl PR_SET_PDEATHSIG: %s\n", strerror(errno));
    if (getppid() != parent)
        _exit(3); // it died before prctl

    const bench_group *g = &p->groups[group];
    const char *fault = bench_test_fault(p->cases[p->tasks[g->first].case_index].c->name);
    if (fault && (!strcmp(fault, "crash") || (!strcmp(fault, "crash-later") && process > 0)))
        raise(SIGSEGV);
    if (fault && !strcmp(fault, "hang-child")) {
        // a grandchild that outlives a killed child unless its group dies
        pid_t sleeper = fork();
        if (sleeper == 0) {
            execlp("sleep", "sleep", "300", (char *)NULL);
            _exit(127);
        }
        if (sleeper < 0)
            fprintf(stderr, "tcbench: fork: %s\n", strerror(errno));
    }
    if (fault && (!strcmp(fault, "hang") || !strcmp(fault, "hang-child")))
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

int bench_results_from_child(const char *text, size_t len, bench_result *rs, int n) {
    json_error_t jerr;
    json_t *j = json_loadb(text, len, 0, &jerr);
    int rc = 0;
    char why[700] = "";
    if (!j)
        snprintf(why, sizeof why, "child sent a malformed result: %s", jerr.text);
    else if (!json_is_array(j) || json_array_size(j) != (size_t)n)
        snprintf(why, sizeof why, "child sent %zu results for a group of %d",
                 json_is_array(j) ? json_array_size(j) : 0, n);
    for (int i = 0; i < n && !why[0]; i++) {
        results_entry e;
        diag d;
        if (results_entry_read(json_array_get(j, i), "child", i, &e, &d) < 0) {
            snprintf(why, sizeof why, "child sent a malformed result: %s", d.msg);
            continue;
        }
        if (!e.status_known) {
            snprintf(why, sizeof why, "child sent an unknown status \"%s\"", e.status);
            results_entry_free(&e);
            continue;
        }
        // what identifies the entry stays the parent's (the plan's)
        int task = rs[i].task;
        rs[i] = e.r;
        rs[i].task = task;
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

static void reap(pid_t pid, int *wstatus) {
    while (waitpid(pid, wstatus, 0) < 0 && errno == EINTR)
        ;
}

// SIGKILL to the child's whole process group (what it started dies with
// it), or to the child alone when it has no group of its own. Only before
// the child is reaped, while its pid is still its own; the caller reaps it.
static void child_kill(pid_t pid) {
    if (kill(-pid, SIGKILL) == 0 || errno != ESRCH)
        return;
    if (kill(pid, SIGKILL) < 0 && errno != ESRCH)
        fprintf(stderr, "tcbench: kill %ld: %s\n", (long)pid, strerror(errno));
}

// Reads the child's result until EOF and reaps it, both within the deadline.
// Returns 1 when the deadline passed (the child is still running), 0 when it
// was reaped into *wstatus, -1 on a failed system call (message in r), and
// -1 too when bench_stop is set (the child is still running: killed by the
// caller, the group dropped by bench_run).
static int child_wait(const bench_plan *p, int group, const bench_hooks *h, pid_t pid, int fd,
                      double t0, char **buf, size_t *len, int *wstatus, bench_result *r) {
    double deadline = t0 + p->cfg.timeout_s, next_tick = t0 + TICK_S;
    size_t cap = 0;
    running_child = (sig_atomic_t)pid;
    for (bool eof = false; !eof;) {
        if (bench_stop)
            return fail_status(r, BENCH_ERROR, "interrupted");
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
        siginfo_t si = {0};
        int w = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT);
        if (w == 0 && si.si_pid == pid) {
            // not reaped yet, so its group is still its own: what it left
            // running (a compiler it started before a crash) goes too
            child_kill(pid);
            reap(pid, wstatus);
            return 0;
        }
        if (w < 0 && errno != EINTR)
            return fail_status(r, BENCH_ERROR, "waitid: %s", strerror(errno));
        if (bench_stop)
            return fail_status(r, BENCH_ERROR, "interrupted");
        if (base_now() >= deadline)
            return 1;
        sleep_ms(2);
        tick(p, group, h, t0, &next_tick);
    }
}

// The child's end, from its wait status: a signal is a crash unless the
// cgroup's OOM-kill counter rose while it ran (oom_before < 0: unknown).
static void child_status(int wstatus, long long oom_before, size_t len, bench_result *r) {
    long long oom_after;
    if (WIFSIGNALED(wstatus)) {
        int sig = WTERMSIG(wstatus);
        const char *abbrev = sigabbrev_np(sig);
        if (sig == SIGKILL && oom_before >= 0 && bench_oom_kills(&oom_after) == 0 &&
            oom_after > oom_before)
            fail_status(r, BENCH_OOM,
                        "killed by the kernel's OOM killer (cgroup oom_kill %lld -> %lld)",
                        oom_before, oom_after);
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
    }
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
    long long oom_before;
    if (bench_oom_kills(&oom_before) < 0)
        oom_before = -1;
    pid_t parent = getpid();
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
        child_main(p, group, process, kcache, fds[1], parent);
    }
    close(fds[1]);
    // EACCES: the child has run exec already; ESRCH: it is gone. Either
    // way its own setpgid decided.
    if (setpgid(pid, pid) < 0 && errno != EACCES && errno != ESRCH)
        fprintf(stderr, "tcbench: setpgid %ld: %s\n", (long)pid, strerror(errno));

    char *buf = NULL;
    size_t len = 0;
    int wstatus = 0;
    int rc = child_wait(p, group, h, pid, fds[0], t0, &buf, &len, &wstatus, r);
    close(fds[0]);
    if (rc != 0) {
        child_kill(pid);
        reap(pid, &wstatus);
        if (rc == 1)
            fail_status(r, BENCH_TIMEOUT, "no result within --timeout %g s; killed",
                        p->cfg.timeout_s);
    } else if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0 && len > 0) {
        bench_results_from_child(buf, len, rs, n);
        rc = 2; // each result its own
    } else {
        child_status(wstatus, oom_before, len, r);
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

// The group in its processes' children (--processes or the suite's), one after the other, their samples
// pooled into the first's (bench_group_pool); a failed first process ends it.
static void run_group(const bench_plan *p, int group, const bench_hooks *h, bench_result *rs) {
    int n = p->groups[group].ntasks;
    int procs = p->groups[group].processes > 1 ? p->groups[group].processes : 1;
    if (procs > BENCH_MAX_PROCESSES)
        procs = BENCH_MAX_PROCESSES;
    // The group's kernel cache, the parent's to remove whatever becomes of
    // the children: process 0 compiles into it, the others load from it.
    char kcache[1024] = "";
    char err[512];
    if (base_mkdtemp("tcbench-group", kcache, sizeof kcache, err, sizeof err) < 0) {
        fprintf(stderr, "tcbench: %s; each process compiles its own\n", err);
        kcache[0] = '\0';
    }
    run_child(p, group, 0, kcache[0] ? kcache : NULL, h, rs);
    for (int k = 1; k < procs && !bench_stop; k++) {
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
    double t0 = base_now();
    for (int gi = 0; gi < p->ngroups; gi++) {
        const bench_group *g = &p->groups[gi];
        int n = g->ntasks;
        if (rep->done[g->first]) { // resumed: measured by an earlier run
            for (int i = 0; i < n; i++)
                failed += !bench_status_good(rep->results[g->first + i].status);
            continue;
        }
        if (bench_stop)
            break;
        if (h && h->on_start)
            h->on_start(p, gi, h->user);
        bench_result *rs = &rep->results[g->first];
        run_group(p, gi, h, rs);
        running_child = 0; // reaped: its pid may be another's soon
        rep->wall_s = base_now() - t0;
        // a group the interrupt cut short was not measured: none of it counts
        if (bench_stop) {
            for (int i = 0; i < n; i++)
                bench_result_free(&rs[i]);
            break;
        }
        for (int i = 0; i < n; i++) {
            bench_result *r = &rs[i];
            rep->done[g->first + i] = true;
            rep->nresults++;
            failed += !bench_status_good(r->status);
            bench_report_journal(rep, g->first + i); // says so once when it fails
            if (h && h->on_done)
                h->on_done(p, r, h->user);
        }
    }
    rep->interrupted = rep->nresults < p->ntasks;
    return failed;
}

static void on_interrupt(int sig) {
    (void)sig;
    if (!bench_stop) {
        bench_stop = 1;
        return;
    }
    // a second interrupt while stopping: now, the child (its group when
    // it leads one) first
    pid_t c = (pid_t)running_child;
    if (c > 0 && kill(-c, SIGKILL) < 0)
        kill(c, SIGKILL);
    _exit(BENCH_EXIT_INTERRUPTED);
}

int bench_catch_interrupt(char *err, size_t cap) {
    struct sigaction sa = {.sa_handler = on_interrupt}; // no SA_RESTART: waits end at once
    if (sigemptyset(&sa.sa_mask) < 0 || sigaction(SIGINT, &sa, NULL) < 0) {
        snprintf(err, cap, "sigaction SIGINT: %s", strerror(errno));
        return -1;
    }
    return 0;
}
