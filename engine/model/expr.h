// expr: the arithmetic of model files: numbers, $name, + - * / ( ), unary
// minus. Values are int64 or double; integer + - * stay integers (overflow is
// an error), integer / integer is exact when it divides and a double when it
// does not.
//
//   expr *e; int off; char err[256];
//   if (expr_parse("4 * $d_model", &e, &off, err, sizeof err) < 0)
//       ... err happened at byte `off` of the text ...
//   expr_value v;
//   if (expr_eval(e, lookup, ctx, &v, &off, err, sizeof err) < 0)
//       ... off < 0: lookup reported the error itself ...
//   expr_free(e);
//
// Offsets are bytes into the parsed text, so a caller that knows where the
// text starts in a file can point at the exact column.
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct expr_value {
    bool is_float;
    int64_t i; // when !is_float
    double f;  // always set (i converted when an integer)
} expr_value;

typedef struct expr expr;

// Looks $name up (off: the byte offset of the '$'). Returns 0 and fills
// *out, or -1 after reporting the error in its own way.
typedef int (*expr_lookup_fn)(void *ctx, const char *name, int off, expr_value *out);

int expr_parse(const char *s, expr **out, int *err_off, char *err, size_t cap);
int expr_eval(const expr *e, expr_lookup_fn lookup, void *ctx, expr_value *out, int *err_off,
              char *err, size_t cap);
void expr_free(expr *e);

// Whether a YAML string should be read as an expression: it holds '$' or an
// operator (a plain number is read as a number before this is asked).
bool expr_looks_like(const char *s);
// The name when the whole expression is one $name (a repeat's count names
// its parameter prefix: `repeat: $layers` -> "layers.0"), else NULL.
const char *expr_single_var(const expr *e);
// Calls fn for every $name the expression uses, in order.
void expr_each_var(const expr *e, void (*fn)(void *ctx, const char *name, int off), void *ctx);
expr_value expr_int(int64_t i);
expr_value expr_float(double f);
// "12" or "0.5" (shortest %g that reads back).
void expr_value_str(expr_value v, char *buf, size_t cap);
