// planfile: the plan file `tcbench plan -o FILE` writes (the memory-budget
// study, docs/results-schema.md "The plan file"), read and checked for
// `tcbench report`, and its report: the longest context against the budget,
// one line per case and mode, and the same numbers as tables.
//
//   if (planfile_sniff(path)) {               // "kind": "plan" at the top
//       planfile *p;
//       diag d;
//       if (planfile_load(path, &p, &d) < 0) {
//           diag_print(&d, stderr);           // "plan.json:14:22: rows[3]: ..." -> exit 2
//           return 2;
//       }
//       report_options o = {.outdir = "report"};
//       plan_report_write(p, &o, err, sizeof err);
//       planfile_free(p);
//   }
//
// Every field a row needs must be there and well typed, or loading fails
// naming the row and the field at its line and column; so does a row that
// repeats another's case, mode and budget. Keys a reader does not know are
// ignored, as in results files; a plan of a newer schema_version is refused.
#pragma once
#include "base/diag.h"
#include "report.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define PLANFILE_SCHEMA_VERSION 1

typedef struct planfile_row {
    const char *suite, *name, *mode; // strings of the file's JSON
    int64_t batch, prompt_len;
    int64_t budget_bytes, max_tokens; // max_tokens 0: not even the prefill fits
    bool capped;                      // the model's positions, not the budget, ended it
    bool weights_exceed_budget;
    int64_t weights_bytes, kv_bytes_per_token;
    int64_t fixed_bytes; // -1 when the file has null (no context fits)
} planfile_row;

typedef struct planfile {
    char path[1024];
    json_t *root;
    const char *tool_version, *timestamp, *cpu_model;
    const char *weights, *weight_scales, *precision, *attention;
    int64_t weight_group;
    planfile_row *rows;
    int nrows;
} planfile;

// Whether path is a regular file whose top-level object has "kind": "plan"
// among its keys in the first 4 KiB (the writer puts it first).
bool planfile_sniff(const char *path);
// 0, or -1 with d set: FILE:LINE:COL for malformed JSON and for a value
// that fails the checks.
int planfile_load(const char *path, planfile **out, diag *d);
void planfile_free(planfile *p);

// Writes, under o->outdir: summary.md and index.html (the chart, the
// longest context per budget, the figures per case and mode), plan.csv
// (one row per case, mode and budget) and charts/plan-tokens.{gp,dat} with
// its PNG and SVG when gnuplot runs (as report_write, report.h). 0, or -1
// with err naming the failed call.
int plan_report_write(const planfile *p, const report_options *o, char *err, size_t cap);
