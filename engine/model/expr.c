// Expressions of model files: a recursive-descent parser to a small tree,
// and its evaluation with checked integer arithmetic (expr.h).
#include "expr.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Parentheses nested deeper than this are not a model parameter.
#define EXPR_MAX_DEPTH 64

struct expr {
    char op; // 'i' integer, 'f' float, 'v' $name, '+', '-', '*', '/', 'u' (negate)
    int off; // where it starts in the text (for '/', where the operator is)
    int64_t i;
    double f;
    char *name;
    struct expr *a, *b;
};

typedef struct {
    const char *s;
    int pos;
    int depth;
    int err_off;
    char *err;
    size_t cap;
} expr_parser;

static int perr(expr_parser *p, int off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int perr(expr_parser *p, int off, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, p->cap, fmt, ap);
    va_end(ap);
    p->err_off = off;
    return -1;
}

static void skip_space(expr_parser *p) {
    while (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' ||
           p->s[p->pos] == '\r')
        p->pos++;
}

static expr *node(char op, int off, expr *a, expr *b) {
    expr *e = calloc(1, sizeof *e);
    if (!e) {
        expr_free(a);
        expr_free(b);
        return NULL;
    }
    e->op = op;
    e->off = off;
    e->a = a;
    e->b = b;
    return e;
}

static bool is_ident_start(int c) { return isalpha(c) || c == '_'; }
static bool is_ident(int c) { return isalnum(c) || c == '_'; }

// What the parser found at pos, for messages: "'x'" or "the end".
static const char *found(expr_parser *p, char *buf, size_t cap) {
    int c = (unsigned char)p->s[p->pos];
    if (!c)
        return "the end";
    snprintf(buf, cap, "'%c'", c);
    return buf;
}

static expr *parse_sum(expr_parser *p);

static expr *parse_number(expr_parser *p) {
    const char *s = p->s;
    int start = p->pos, i = start;
    bool is_float = false;
    while (isdigit((unsigned char)s[i]))
        i++;
    if (s[i] == '.') {
        is_float = true;
        i++;
        while (isdigit((unsigned char)s[i]))
            i++;
    }
    if ((s[i] == 'e' || s[i] == 'E') &&
        (isdigit((unsigned char)s[i + 1]) ||
         ((s[i + 1] == '+' || s[i + 1] == '-') && isdigit((unsigned char)s[i + 2])))) {
        is_float = true;
        i += 2;
        while (isdigit((unsigned char)s[i]))
            i++;
    }
    if (is_ident(s[i])) {
        perr(p, i, "'%c' cannot follow a number", s[i]);
        return NULL;
    }
    char buf[64];
    if (i - start >= (int)sizeof buf) {
        perr(p, start, "number too long");
        return NULL;
    }
    memcpy(buf, s + start, (size_t)(i - start));
    buf[i - start] = 0;
    expr *e = node(is_float ? 'f' : 'i', start, NULL, NULL);
    if (!e) {
        perr(p, start, "out of memory");
        return NULL;
    }
    errno = 0;
    if (is_float) {
        e->f = strtod(buf, NULL);
        if (!isfinite(e->f)) {
            expr_free(e);
            perr(p, start, "number %s is too large", buf);
            return NULL;
        }
    } else {
        e->i = strtoll(buf, NULL, 10);
        if (errno == ERANGE) {
            expr_free(e);
            perr(p, start, "integer %s is too large (at most %lld)", buf, (long long)INT64_MAX);
            return NULL;
        }
        e->f = (double)e->i;
    }
    p->pos = i;
    return e;
}

static expr *parse_primary(expr_parser *p) {
    skip_space(p);
    const char *s = p->s;
    int c = (unsigned char)s[p->pos];
    char fb[8];
    if (isdigit(c) || (c == '.' && isdigit((unsigned char)s[p->pos + 1])))
        return parse_number(p);
    if (c == '$') {
        int start = p->pos++;
        if (!is_ident_start((unsigned char)s[p->pos])) {
            perr(p, p->pos, "expected a parameter name after '$', found %s",
                 found(p, fb, sizeof fb));
            return NULL;
        }
        int n0 = p->pos;
        while (is_ident((unsigned char)s[p->pos]))
            p->pos++;
        expr *e = node('v', start, NULL, NULL);
        if (!e || !(e->name = strndup(s + n0, (size_t)(p->pos - n0)))) {
            expr_free(e);
            perr(p, start, "out of memory");
            return NULL;
        }
        return e;
    }
    if (c == '(') {
        int open = p->pos++;
        if (++p->depth > EXPR_MAX_DEPTH) {
            perr(p, open, "parentheses nested deeper than %d", EXPR_MAX_DEPTH);
            return NULL;
        }
        expr *e = parse_sum(p);
        if (!e)
            return NULL;
        p->depth--;
        skip_space(p);
        if (s[p->pos] != ')') {
            expr_free(e);
            perr(p, p->pos, "expected ')' to close a '(', found %s", found(p, fb, sizeof fb));
            return NULL;
        }
        p->pos++;
        return e;
    }
    if (is_ident_start(c)) {
        int n0 = p->pos, n1 = n0;
        while (is_ident((unsigned char)s[n1]))
            n1++;
        perr(p, n0, "'%.*s' is not a number; write $%.*s for a parameter", n1 - n0, s + n0, n1 - n0,
             s + n0);
        return NULL;
    }
    if (!c)
        perr(p, p->pos, "expected a number, $name or '(' but the expression ends");
    else
        perr(p, p->pos, "expected a number, $name or '(', found %s", found(p, fb, sizeof fb));
    return NULL;
}

static expr *parse_unary(expr_parser *p) {
    skip_space(p);
    char c = p->s[p->pos];
    if (c == '-' || c == '+') {
        int off = p->pos++;
        if (++p->depth > EXPR_MAX_DEPTH) {
            perr(p, off, "expression nested deeper than %d", EXPR_MAX_DEPTH);
            return NULL;
        }
        expr *a = parse_unary(p);
        p->depth--;
        if (!a || c == '+')
            return a;
        expr *e = node('u', off, a, NULL);
        if (!e)
            perr(p, off, "out of memory");
        return e;
    }
    return parse_primary(p);
}

static expr *parse_product(expr_parser *p) {
    expr *a = parse_unary(p);
    for (;;) {
        if (!a)
            return NULL;
        skip_space(p);
        char c = p->s[p->pos];
        if (c != '*' && c != '/')
            return a;
        int off = p->pos++;
        expr *b = parse_unary(p);
        if (!b) {
            expr_free(a);
            return NULL;
        }
        a = node(c, off, a, b);
        if (!a)
            perr(p, off, "out of memory");
    }
}

static expr *parse_sum(expr_parser *p) {
    expr *a = parse_product(p);
    for (;;) {
        if (!a)
            return NULL;
        skip_space(p);
        char c = p->s[p->pos];
        if (c != '+' && c != '-')
            return a;
        int off = p->pos++;
        expr *b = parse_product(p);
        if (!b) {
            expr_free(a);
            return NULL;
        }
        a = node(c, off, a, b);
        if (!a)
            perr(p, off, "out of memory");
    }
}

int expr_parse(const char *s, expr **out, int *err_off, char *err, size_t cap) {
    expr_parser p = {.s = s, .err = err, .cap = cap};
    *out = NULL;
    skip_space(&p);
    if (!s[p.pos]) {
        perr(&p, 0, "empty expression");
        *err_off = p.err_off;
        return -1;
    }
    expr *e = parse_sum(&p);
    if (e) {
        skip_space(&p);
        if (s[p.pos]) {
            char c = s[p.pos];
            if (c == ')')
                perr(&p, p.pos, "')' without a matching '('");
            else
                perr(&p, p.pos, "unexpected '%c' after a complete expression", c);
            expr_free(e);
            e = NULL;
        }
    }
    if (!e) {
        *err_off = p.err_off;
        return -1;
    }
    *out = e;
    return 0;
}

void expr_free(expr *e) {
    if (!e)
        return;
    expr_free(e->a);
    expr_free(e->b);
    free(e->name);
    free(e);
}

expr_value expr_int(int64_t i) { return (expr_value){.is_float = false, .i = i, .f = (double)i}; }
expr_value expr_float(double f) { return (expr_value){.is_float = true, .f = f}; }

typedef struct {
    expr_lookup_fn lookup;
    void *ctx;
    int err_off;
    char *err;
    size_t cap;
} expr_evaluator;

static int eerr(expr_evaluator *ev, int off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int eerr(expr_evaluator *ev, int off, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ev->err, ev->cap, fmt, ap);
    va_end(ap);
    ev->err_off = off;
    return -1;
}

static int eval(expr_evaluator *ev, const expr *e, expr_value *out) {
    expr_value a, b;
    switch (e->op) {
    case 'i': *out = expr_int(e->i); return 0;
    case 'f': *out = expr_float(e->f); return 0;
    case 'v':
        if (!ev->lookup)
            return eerr(ev, e->off, "unknown parameter $%s", e->name);
        if (ev->lookup(ev->ctx, e->name, e->off, out) < 0) {
            ev->err_off = -1;
            return -1;
        }
        return 0;
    case 'u':
        if (eval(ev, e->a, &a) < 0)
            return -1;
        if (a.is_float)
            *out = expr_float(-a.f);
        else if (a.i == INT64_MIN)
            return eerr(ev, e->off, "integer overflow in negation");
        else
            *out = expr_int(-a.i);
        return 0;
    default: break;
    }
    if (eval(ev, e->a, &a) < 0 || eval(ev, e->b, &b) < 0)
        return -1;
    bool ints = !a.is_float && !b.is_float;
    int64_t r = 0;
    double f = 0;
    switch (e->op) {
    case '+':
        if (ints && __builtin_add_overflow(a.i, b.i, &r))
            return eerr(ev, e->off, "integer overflow in %lld + %lld", (long long)a.i,
                        (long long)b.i);
        f = a.f + b.f;
        break;
    case '-':
        if (ints && __builtin_sub_overflow(a.i, b.i, &r))
            return eerr(ev, e->off, "integer overflow in %lld - %lld", (long long)a.i,
                        (long long)b.i);
        f = a.f - b.f;
        break;
    case '*':
        if (ints && __builtin_mul_overflow(a.i, b.i, &r))
            return eerr(ev, e->off, "integer overflow in %lld * %lld", (long long)a.i,
                        (long long)b.i);
        f = a.f * b.f;
        break;
    case '/':
        if (b.f == 0 && (!ints || b.i == 0))
            return eerr(ev, e->off, "division by zero");
        if (ints) {
            if (a.i == INT64_MIN && b.i == -1)
                return eerr(ev, e->off, "integer overflow in division");
            if (a.i % b.i == 0) {
                r = a.i / b.i;
                break;
            }
            ints = false; // inexact: the result is a float
        }
        f = a.f / b.f;
        break;
    }
    if (ints) {
        *out = expr_int(r);
        return 0;
    }
    if (!isfinite(f))
        return eerr(ev, e->off, "the result is too large for a number");
    *out = expr_float(f);
    return 0;
}

int expr_eval(const expr *e, expr_lookup_fn lookup, void *ctx, expr_value *out, int *err_off,
              char *err, size_t cap) {
    expr_evaluator ev = {.lookup = lookup, .ctx = ctx, .err = err, .cap = cap};
    if (eval(&ev, e, out) < 0) {
        *err_off = ev.err_off;
        return -1;
    }
    return 0;
}

bool expr_looks_like(const char *s) { return strpbrk(s, "$+-*/()") != NULL; }

const char *expr_single_var(const expr *e) { return e && e->op == 'v' ? e->name : NULL; }

void expr_each_var(const expr *e, void (*fn)(void *ctx, const char *name, int off), void *ctx) {
    if (!e)
        return;
    if (e->op == 'v')
        fn(ctx, e->name, e->off);
    expr_each_var(e->a, fn, ctx);
    expr_each_var(e->b, fn, ctx);
}

void expr_value_str(expr_value v, char *buf, size_t cap) {
    if (!v.is_float) {
        snprintf(buf, cap, "%lld", (long long)v.i);
        return;
    }
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, v.f);
        if (strtod(buf, NULL) == v.f)
            return;
    }
}
