// resume: going on with a run that was stopped (killed, interrupted) from
// its journal (results/journal.h), so that what it measured is not
// measured again.
//
//   bench_journal *j; diag d;
//   if (bench_journal_load("results/x.json.jsonl", &j, stderr, &d) < 0) ...  // bad input
//   ... j->argc, j->argv: the run's command line as typed, to parse again ...
//   cfg.output = "results/x.json";            // the journal's path less ".jsonl"
//   bench_plan_new(&cfg, &p, &d);
//   char err[1024];
//   int k = bench_report_resume(p, j, &rep, err, sizeof err);  // -2: another run's journal
//   bench_run(p, rep, &hooks);                // measures only the groups it lacks
//   bench_report_write(rep, err, sizeof err); // every entry once, in plan order
//   bench_journal_free(j);
//
// An entry is matched to the plan by what identifies it (suite, name, mode,
// precision, workload, device, batch); the last line of an entry wins. A
// group is taken from the journal only when every entry of it is there;
// else it is measured again and its old lines are left out of the
// results. Failed entries (a crash, a timeout) count as measured.
#pragma once
#include "output.h"
#include "plan.h"

#include "base/diag.h"

#include <jansson.h>
#include <stdio.h>

typedef struct bench_journal {
    char path[4096];
    json_t *header; // the header line's object
    json_t *cases;  // the case objects, in file order
    int *lines;     // the line of each, for messages
    int argc;       // the header's command_line (argv[0] "tcbench", argv[1] "run")
    char **argv;
} bench_journal;

// Reads the journal at path: its header, then its case lines (cut and
// garbled lines skipped with a warning on warn). -1 with d set when it
// cannot be read or has no header.
int bench_journal_load(const char *path, bench_journal **out, FILE *warn, diag *d);
void bench_journal_free(bench_journal *j);

// A report (output.h) for p holding the entries of j's complete groups
// (done, counted in resumed and journaled), its journal's cut last line
// cut off and the journal opened to append. Case lines that match no entry
// of p are skipped with a warning on stderr. -2 when p's configuration is
// not the journal's (err: "--resume J: the journal's run had --repeat 10,
// this one 5"), -1 on a failed call (err names it).
int bench_report_resume(const bench_plan *p, const bench_journal *j, bench_report **out, char *err,
                        size_t cap);
