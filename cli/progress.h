// progress: what `tcbench run` shows on stderr while it runs, and colour.
//
//   progress pg;
//   progress_init(&pg, ntasks, quiet);
//   progress_start(&pg, i, "bert_tiny");           // terminal: redraws one line
//   progress_tick(&pg, i, "bert_tiny", 3.2);       // ... as time passes
//   progress_done(&pg, i, "bert_tiny", "ok", true, "1.23 ms");   // not a terminal: one line
//   progress_finish(&pg);                           // clears the live line
//
// A resumed run sets nresumed to the entries its journal already holds:
// they are left out of the estimate of the time left.
//
// On a terminal (isatty(stderr)) one live line is redrawn in place with
// \r: case i of n, its name, time elapsed, and time left estimated from the
// average case so far. Cases that end together (the modes of one child)
// are started once and done one by one. Anywhere else, one plain line per finished case, so
// logs stay readable. Colour only on a terminal and never when NO_COLOR is
// set to anything non-empty (https://no-color.org).
#pragma once
#include <stdbool.h>
#include <stdio.h>

typedef struct progress {
    bool live;  // stderr is a terminal
    bool color; // on stderr
    bool quiet;
    int ntasks, ndone;
    int nresumed;   // taken from a journal (--resume): neither shown nor timed
    double t0;      // start of the run
    double done_s;  // time of finished cases, for the estimate
    double case_t0; // start of the current case
} progress;

void progress_init(progress *pg, int ntasks, bool quiet);
void progress_start(progress *pg, int i, const char *name);
void progress_tick(progress *pg, int i, const char *name, double case_elapsed_s);
// detail: a short summary or the failure message
void progress_done(progress *pg, int i, const char *name, const char *status, bool ok,
                   const char *detail);
void progress_finish(progress *pg);

// Whether to colour what goes to f (a terminal, NO_COLOR unset or empty).
bool term_color(FILE *f);
// ANSI sequences, "" when colour is off.
const char *term_green(bool on);
const char *term_red(bool on);
const char *term_reset(bool on);
