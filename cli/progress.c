// Progress on stderr and terminal colour (progress.h).
#include "progress.h"

#include "base/clock.h"

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

bool term_color(FILE *f) {
    const char *nc = getenv("NO_COLOR");
    return isatty(fileno(f)) && !(nc && *nc);
}

const char *term_green(bool on) { return on ? "\033[32m" : ""; }
const char *term_red(bool on) { return on ? "\033[31m" : ""; }
const char *term_reset(bool on) { return on ? "\033[0m" : ""; }

static void clock_str(double s, char *buf, size_t cap) {
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, cap, "%02ld:%02ld", t / 60, t % 60);
}

static int term_width(void) {
    struct winsize ws;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20)
        return ws.ws_col;
    return 80;
}

void progress_init(progress *pg, int ntasks, bool quiet) {
    memset(pg, 0, sizeof *pg);
    pg->live = isatty(STDERR_FILENO);
    pg->color = term_color(stderr);
    pg->quiet = quiet;
    pg->ntasks = ntasks;
    pg->t0 = base_now();
}

static void draw(progress *pg, int i, const char *name, double case_elapsed) {
    char elapsed[32], left[48] = "estimating";
    clock_str(base_now() - pg->t0, elapsed, sizeof elapsed);
    if (pg->ndone > 0) {
        // average so far times what is left, less what this case has used
        int left_n = pg->ntasks - pg->nresumed - pg->ndone;
        double est = pg->done_s / pg->ndone * left_n - case_elapsed;
        char t[32];
        clock_str(est > 0 ? est : 0, t, sizeof t);
        snprintf(left, sizeof left, "~%s left", t);
    }
    char line[512];
    snprintf(line, sizeof line, "[%d/%d] %s  %s elapsed, %s", i + 1, pg->ntasks, name, elapsed,
             left);
    int w = term_width() - 1;
    if ((int)strlen(line) > w)
        line[w] = '\0';
    // \033[K clears what a longer previous line left behind
    fprintf(stderr, "\r%s\033[K", line);
    fflush(stderr);
}

void progress_start(progress *pg, int i, const char *name) {
    pg->case_t0 = base_now();
    if (pg->live && !pg->quiet)
        draw(pg, i, name, 0);
}

void progress_tick(progress *pg, int i, const char *name, double case_elapsed_s) {
    if (pg->live && !pg->quiet)
        draw(pg, i, name, case_elapsed_s);
}

void progress_done(progress *pg, int i, const char *name, const char *status, bool ok,
                   const char *detail) {
    // the entries of a group end together: the first takes the group's time
    double now = base_now();
    pg->ndone++;
    pg->done_s += now - pg->case_t0;
    pg->case_t0 = now;
    if (pg->quiet)
        return;
    if (pg->live) {
        // a failure stays on screen above the live line; successes just advance it
        if (!ok)
            fprintf(stderr, "\r\033[K[%d/%d] %s: %s%s%s %s\n", i + 1, pg->ntasks, name,
                    term_red(pg->color), status, term_reset(pg->color), detail);
        return;
    }
    fprintf(stderr, "[%d/%d] %s: %s %s\n", i + 1, pg->ntasks, name, status, detail);
}

void progress_finish(progress *pg) {
    if (pg->live && !pg->quiet) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
    }
}
