// jscan: where things lie in JSON text, without parsing it into a tree.
// jansson says where a syntax error is, but not where a well-formed value
// lies; the readers use this to find the start of a value (cases[3], or
// rows[12].max_tokens) and name it as FILE:LINE:COL, and resfile.c to walk
// a large "cases" array one element at a time. Offsets are into b[0, n);
// JSCAN_NOWHERE means not found, or the text ends first.
//
//   size_t p = jscan_member(b, n, jscan_ws(b, n, 0), "rows");   // the array
//   p = jscan_element(b, n, p, 12);                              // rows[12]
//   p = jscan_member(b, n, p, "max_tokens");                     // its value
//   int line, col;
//   jscan_line_col(b, p, &line, &col);
#pragma once
#include <stddef.h>
#include <stdint.h>

#define JSCAN_NOWHERE SIZE_MAX

// Past the whitespace at b[p].
size_t jscan_ws(const char *b, size_t n, size_t p);
// b[p] is '"': just past the closing quote.
size_t jscan_string(const char *b, size_t n, size_t p);
// Just past the value at b[p]. on_comma (may be NULL) is called with the
// offset of each comma between the elements or members of that value
// itself (not of values nested in it).
size_t jscan_value(const char *b, size_t n, size_t p, void (*on_comma)(void *ctx, size_t at),
                   void *ctx);
// The value of member key in the object at b[p] (its first one).
size_t jscan_member(const char *b, size_t n, size_t p, const char *key);
// Element i of the array at b[p].
size_t jscan_element(const char *b, size_t n, size_t p, size_t i);
// Line and column (1-based) of b[off].
void jscan_line_col(const char *b, size_t off, int *line, int *col);
