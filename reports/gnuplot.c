// Drawing the report's charts: gnuplot run on each script through fork and
// execvp, never a shell (report_int.h: charts_draw).
#include "report_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

// What failed in the child before gnuplot ran: which call, and its errno.
enum child_call { CHILD_OPEN_NULL, CHILD_CHDIR, CHILD_OPEN_LOG, CHILD_DUP2, CHILD_EXECVP };
static const char *const child_call_names[] = {"open /dev/null", "chdir", "open", "dup2", "execvp"};

typedef struct child_failure {
    int call, err;
} child_failure;

// Runs `gnuplot STEM.gp` in dir, its output into STEM.log. 0 when gnuplot
// ran (*status: its wait status) or the child failed before it did
// (*failed: which call; ENOENT from execvp: no gnuplot on PATH); -1 with
// err when pipe2, fork, read or waitpid failed here.
static int run_gnuplot(const char *gnuplot, const char *dir, const char *stem, int *status,
                       child_failure *failed, char *err, size_t cap) {
    char script[200], log[200];
    snprintf(script, sizeof script, "%s.gp", stem);
    snprintf(log, sizeof log, "%s.log", stem);
    failed->call = -1;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0) {
        snprintf(err, cap, "pipe2: %s", strerror(errno));
        return -1;
    }
    fflush(NULL); // nothing buffered is written twice
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, cap, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        // the child: only async-signal-safe calls until execvp; the pipe
        // closes on a successful exec, or carries what failed
        close(fds[0]);
        child_failure f = {CHILD_OPEN_NULL, 0};
        int in = open("/dev/null", O_RDONLY), out = -1;
        if (in >= 0 && (f.call = CHILD_CHDIR, chdir(dir) == 0) &&
            (f.call = CHILD_OPEN_LOG, (out = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0666)) >= 0) &&
            (f.call = CHILD_DUP2, dup2(in, 0) >= 0 && dup2(out, 1) >= 0 && dup2(out, 2) >= 0)) {
            char *argv[] = {(char *)gnuplot, script, NULL};
            f.call = CHILD_EXECVP;
            execvp(gnuplot, argv);
        }
        f.err = errno;
        ssize_t w = write(fds[1], &f, sizeof f);
        (void)w; // nothing more a child can do about it
        _exit(127);
    }
    close(fds[1]);
    child_failure f;
    ssize_t r;
    do
        r = read(fds[0], &f, sizeof f);
    while (r < 0 && errno == EINTR);
    int read_errno = errno;
    close(fds[0]);
    while (waitpid(pid, status, 0) < 0) {
        if (errno != EINTR) {
            snprintf(err, cap, "waitpid: %s", strerror(errno));
            return -1;
        }
    }
    if (r < 0) {
        snprintf(err, cap, "read (from the gnuplot child): %s", strerror(read_errno));
        return -1;
    }
    if (r == (ssize_t)sizeof f)
        *failed = f;
    return 0;
}

static bool exists(const char *dir, const char *stem, const char *ext) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s.%s", dir, stem, ext);
    return access(path, F_OK) == 0;
}

int charts_draw(rp_charts *c, const char *dir, const char *gnuplot, const char *who, FILE *warn,
                char *err, size_t cap) {
    for (int i = 0; i < c->n; i++) {
        int status = 0;
        child_failure f;
        if (run_gnuplot(gnuplot, dir, c->c[i].stem, &status, &f, err, cap) < 0)
            return -1;
        if (f.call == CHILD_EXECVP && (f.err == ENOENT || f.err == EACCES)) {
            fprintf(warn,
                    "%s: warning: %s not found on PATH (%s): tables written, no "
                    "charts drawn; the scripts are kept in %s (install gnuplot-nox and run "
                    "gnuplot NAME.gp there)\n",
                    who, gnuplot, strerror(f.err), dir);
            return 0;
        }
        if (f.call >= 0) {
            snprintf(err, cap, "%s %s (to run gnuplot on %s.gp): %s", child_call_names[f.call],
                     f.call == CHILD_EXECVP ? gnuplot : dir, c->c[i].stem, strerror(f.err));
            return -1;
        }
        char log[4400];
        snprintf(log, sizeof log, "%s/%s.log", dir, c->c[i].stem);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(warn, "%s: warning: %s failed on %s/%s.gp (%s %d); see %s\n", who, gnuplot, dir,
                    c->c[i].stem, WIFEXITED(status) ? "exit" : "signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), log);
            continue;
        }
        c->c[i].drawn = exists(dir, c->c[i].stem, "png");
        FILE *lf = fopen(log, "r");
        if (lf) { // an empty log says nothing: drop it
            bool empty = fgetc(lf) == EOF;
            fclose(lf);
            if (empty && unlink(log) < 0) {
                snprintf(err, cap, "unlink %s: %s", log, strerror(errno));
                return -1;
            }
        }
    }
    return 0;
}
