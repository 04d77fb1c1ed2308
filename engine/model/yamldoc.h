// yamldoc: a YAML file as a small tree of mappings, sequences and scalars,
// each node with its 1-based line and column, for loaders that must point at
// the exact spot of a mistake (modeldef, suite).
//
//   yd_doc *doc; diag d;
//   if (yd_load("models/gpt2.yaml", &doc, &d) < 0) { diag_print(&d, stderr); ... }
//   const yd_node *root = doc->root;              // NULL for an empty file
//   const yd_node *name = yd_get(root, "name");   // NULL when absent
//   if (name && name->kind == YD_SCALAR) puts(name->str);
//   yd_free(doc);
//
// Only the first document of a stream is read; a second one is an error.
// Mapping keys must be scalars and unique within their mapping. Aliases
// point at the anchored node (positions are the anchor's). Every node is
// owned by the doc and freed with it.
#pragma once
#include "base/diag.h"

#include <stdbool.h>
#include <stddef.h>

typedef enum { YD_SCALAR, YD_MAP, YD_SEQ } yd_kind;

typedef struct yd_node {
    yd_kind kind;
    int line, col; // 1-based, where the node starts (a quoted scalar: at its quote)
    // YD_SCALAR
    char *str;    // the scalar's text, escapes resolved
    bool plain;   // written without quotes or block indicators
    int text_col; // column of the first character of str's text when it sits on
                  // one line (after the quote of a quoted scalar)
    // YD_MAP: keys[i] -> vals[i]; YD_SEQ: vals[i]
    int n, cap;
    struct yd_node **keys;
    struct yd_node **vals;
} yd_node;

typedef struct yd_doc {
    char *path;
    yd_node *root;
    // every node, for freeing
    yd_node **all;
    int nall, capall;
} yd_doc;

// A model or suite file is a regular file of at most 16 MiB, checked before
// reading: a directory, a device (/dev/zero), a FIFO or a larger file is
// refused by name. Text that is not UTF-8 or holds control characters is
// refused at its line and column; so is a NUL byte inside any scalar.
#define YD_MAX_FILE_BYTES (16 << 20)
int yd_load(const char *path, yd_doc **out, diag *d);
// The same from memory; path names it in errors.
int yd_parse(const char *text, size_t len, const char *path, yd_doc **out, diag *d);
void yd_free(yd_doc *doc);

// Lookups on a mapping (NULL on anything else or when absent).
const yd_node *yd_get(const yd_node *map, const char *key);
const yd_node *yd_get_key(const yd_node *map, const char *key); // the key node
// A plain null: empty, ~, null, Null, NULL.
bool yd_is_null(const yd_node *n);
// A plain true/false (also True/TRUE/False/FALSE); *out gets the value.
bool yd_is_bool(const yd_node *n, bool *out);
const char *yd_kind_name(yd_kind k); // "a scalar", "a mapping", "a list"

// Checks that every key of map is in allowed (NULL-terminated); the error
// names the key, where it stands, and the keys allowed in `what`:
//   unknown key 'bdy' in model; expected one of name, family, ...
int yd_check_keys(const yd_doc *doc, const yd_node *map, const char *what,
                  const char *const *allowed, diag *d);
// Fails unless n is of kind k: "'what' must be a mapping, not a list".
int yd_expect(const yd_doc *doc, const yd_node *n, yd_kind k, const char *what, diag *d);
// Names (of models, cases, suites, tensors, parameters; every mapping key
// is checked on load) are printable UTF-8 without control characters, not
// empty, at most YD_NAME_MAX bytes: they end up in messages, in file names
// of charts and dumps. A file_name may not hold '/' nor be "." or "..".
// Fails with "<what> ...", at n; n is a scalar.
#define YD_NAME_MAX 128
int yd_check_name(const yd_doc *doc, const yd_node *n, const char *what, bool file_name, diag *d);
