// journal: a run's OUTPUT.jsonl, written while it runs so that a killed run
// loses nothing it measured (docs/results-schema.md).
//
// Line 1 is the header: the results document's own fields (schema_version,
// tool, timestamp, command_line, host, config) with "journal": 1 and no
// "cases". Each later line is one case object, as in the results file's
// "cases". Every line is one compact JSON object ended by '\n', written
// with one write and fsync'd: a line without its newline, or one that does
// not parse as an object, was cut (a kill, a full disk) and readers skip
// it with a warning.
//
//   // writing
//   FILE *f = fopen(path, "w");
//   json_t *h = results_journal_header(timestamp, argv_json, host, config);
//   if (results_journal_append(f, path, h, err, sizeof err) < 0) ...  // err names the call
//
//   // reading
//   results_journal_reader r;
//   if (results_journal_open(&r, path, &d) < 0) ...   // d: FILE: message
//   json_t *o;
//   int k;
//   while ((k = results_journal_next(&r, &o, stderr, &d)) > 0) {
//       if (results_journal_is_header(o)) ... else ... a case ...
//       json_decref(o);
//   }
//   results_journal_close(&r);   // k < 0: d says what failed
#pragma once
#include "base/diag.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

// A line longer than this is not one this build wrote: it is refused.
#define RESULTS_JOURNAL_MAX_LINE ((size_t)64 << 20)

// The header line's object: host is borrowed, command_line and config are
// taken. NULL when memory runs out.
json_t *results_journal_header(const char *timestamp, json_t *command_line, const json_t *host,
                               json_t *config);
bool results_journal_is_header(const json_t *o);

// Appends obj as one line to f (path for messages), flushed and fsync'd.
// 0, or -1 with err naming the failed call, the file and errno's words
// ("write results/x.json.jsonl: No space left on device").
int results_journal_append(FILE *f, const char *path, const json_t *obj, char *err, size_t cap);

typedef struct results_journal_reader {
    FILE *f;
    char path[1024];
    int line;  // of the last line read (1-based)
    int cut;   // lines skipped as cut or garbled
    char *buf; // the current line
    size_t cap;
} results_journal_reader;

// Whether the file at path starts with a journal header (reads its first
// line only). false for anything else, unreadable files included.
bool results_journal_sniff(const char *path);

// 0, or -1 with d set ("FILE: fopen: ...").
int results_journal_open(results_journal_reader *r, const char *path, diag *d);
// The next line's object in *obj (a new reference): 1; 0 at the end of the
// file; -1 with d set on a read error or a line over RESULTS_JOURNAL_MAX_LINE.
// Cut or garbled lines are skipped, each with one warning line on warn (when
// not NULL): "FILE:LINE: warning: a cut line (no newline: the run was
// killed while writing it?), skipped".
int results_journal_next(results_journal_reader *r, json_t **obj, FILE *warn, diag *d);
void results_journal_close(results_journal_reader *r);

// Cuts a cut last line (bytes after the last '\n') off the file at path,
// so lines appended after it stay whole. The bytes removed (0 when the
// file ends in a newline), or -1 with err naming the call and the file.
long results_journal_trim(const char *path, char *err, size_t cap);
