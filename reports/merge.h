// merge: the results of a run's shards (`tcbench run --shard K/N`) as one
// results file, which report, compare and export read as any other
// (docs/cli.md, "tcbench merge").
//
//   merge_result m;
//   diag d;
//   if (merge_shards(paths, n, stderr, &m, &d) < 0) ...  // d: one line, exit 2
//   for (int i = 0; i < m.nmissing; i++) puts(m.missing[i]);        // "smoke/t5 eager ... (shard
//   3/4)" if ((m.nmissing || m.nduplicates) && !allow_partial) ...         // exit 2, nothing
//   written results_file_write("ALL.json", m.doc, err, sizeof err); merge_result_free(&m);
//
// Each input is a shard's results file or its journal (OUTPUT.jsonl, cut
// lines skipped, an entry's later line kept). Every input must come from
// `run --shard` with the same N, tcbench version and git commit, and the
// same config but the shard (the suites, the selection, the settings and
// the shard plan: config.shard_plan, the whole selection's groups and their
// shards, which every shard records); the first difference is refused as
// "A and B differ in --repeat: 10 vs 5". The expected entries are the shard
// plan's; an entry no input holds is missing, one that two inputs hold a
// duplicate (the first input's kept), one the plan lacks refused.
//
// The document: the first shard's schema_version, tool, host and config
// (config.shard null), the earliest timestamp, the command line without
// --shard, the longest wall_s, the cases in plan order (the order of one
// unsharded run), each with "input", its index into "inputs": one object
// per input file, by shard, with its path, shard, timestamp, command_line,
// host and wall_s, so every entry keeps the host that measured it. Inputs
// whose machines differ (compare.h's test) get one warning on warn.
#pragma once
#include "base/diag.h"

#include <jansson.h>
#include <stdio.h>

typedef struct merge_result {
    json_t *doc;      // the merged document (NULL on failure)
    int expected;     // entries of the shard plan
    int merged;       // entries in doc
    int count;        // N of the shards
    char absent[256]; // the shards no input holds: "3, 4" ("" none)
    char **missing;   // "smoke/t5 eager fp32 infer cpu batch 2 (shard 3/4)"
    int nmissing;
    char **duplicates; // "smoke/mlp eager ... batch 16: in a.json and b.json"
    int nduplicates;
} merge_result;

// 0 with m filled; -1 with d set when an input cannot be read (d names the
// file) or the inputs do not go together. warn: the machines' warning (or NULL).
int merge_shards(const char *const *paths, int n, FILE *warn, merge_result *m, diag *d);
void merge_result_free(merge_result *m);
