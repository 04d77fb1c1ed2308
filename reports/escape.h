// escape: text from a results file made safe for each format the readers
// write. Names come from suite files, so they can hold anything: quotes,
// markup, commas, newlines.
//
//   sbuf b = {0};
//   esc_html(&b, "<script>\"x");   // &lt;script&gt;&quot;x
//   esc_gnuplot(&b, "it's");       // 'it''s'  (a whole gnuplot string literal)
//   ... b.s ...; free(b.s);
//
// Every function appends to b (sbuf.h: b->oom says an append failed).
#pragma once
#include "base/sbuf.h"

#include <stddef.h>

// HTML and XML text and attribute values: & < > " ' as entities; control
// characters other than tab, newline and return (not allowed in XML 1.0)
// as '?'.
void esc_html(sbuf *b, const char *s);
// Markdown (GitHub's) text, in a paragraph or a table cell: & < > as
// entities (no raw HTML gets through); | \ ` * ~ # and a ] that would close
// a link backslash-escaped; _ too, except inside a word (mobilenet_v2 stays
// readable, and GitHub does not take it for emphasis); newlines folded.
void esc_md(sbuf *b, const char *s);
// One CSV field (RFC 4180): quoted when it holds a comma, a quote, a
// newline or a return, or starts or ends with a space; quotes doubled.
void esc_csv(sbuf *b, const char *s);
// A whole gnuplot string literal, single-quoted: inside single quotes
// gnuplot expands nothing (no backslash escapes, and, unlike double quotes,
// no `backquote` shell substitution), so the only escape is '' for a quote.
// Control characters become spaces: a newline would end the command.
void esc_gnuplot(sbuf *b, const char *s);
// Standard base64 (RFC 4648, padded), for data: URIs.
void esc_base64(sbuf *b, const unsigned char *data, size_t n);
// A file-name stem: letters, digits, '.', '-' and '_' kept, anything else '_'.
void esc_filename(char *buf, size_t cap, const char *s);
