// configdiff: the first setting in which two runs' "config" objects
// (docs/results-schema.md) differ, named as the user sets it, for the
// messages of `run --resume` and `merge`.
//
//   results_config_diff df;
//   const char *skip[] = {"shard", NULL};        // keys not compared
//   if (results_config_diff_find(was, now, skip, &df))
//       fprintf(stderr, "the journal's run had %s %s, this one %s\n", df.option, df.a, df.b);
//       // "the journal's run had --repeat 10, this one 5"
//
// Keys are compared in a's order, then the keys only b has. Values print
// as typed: strings bare, lists of strings comma-separated, null as
// "(none)", a missing key as "(no such setting)", anything else as JSON.
#pragma once
#include <jansson.h>
#include <stdbool.h>

typedef struct results_config_diff {
    const char *key;    // the config key ("repeat")
    const char *option; // what sets it ("--repeat"), or the key itself
    char a[256], b[256];
} results_config_diff;

// true with *df filled when a and b differ outside skip (NULL-ended, or NULL).
bool results_config_diff_find(const json_t *a, const json_t *b, const char *const *skip,
                              results_config_diff *df);
