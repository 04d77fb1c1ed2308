// Reading and checking a plan file (planfile.h). A plan is small (a row per
// case, mode and budget), so the file is read whole and parsed by jansson;
// jscan finds where a value that fails a check lies, for FILE:LINE:COL.
#include "planfile.h"

#include "jscan.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SNIFF_BYTES 4096

bool planfile_sniff(const char *path) {
    struct stat sb;
    if (stat(path, &sb) < 0 || !S_ISREG(sb.st_mode))
        return false;
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    char b[SNIFF_BYTES];
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    size_t v = jscan_member(b, n, jscan_ws(b, n, 0), "kind");
    return v != JSCAN_NOWHERE && n - v >= 6 && !memcmp(b + v, "\"plan\"", 6);
}

// What a failed check needs: the text, to say where the value lies.
typedef struct checker {
    planfile *p;
    const char *text;
    size_t n;
    diag *d;
} checker;

// A failed check at obj (a top-level key), its element row (SIZE_MAX: obj
// itself) and its member key (NULL: the element): where the value is, else
// where its container is.
static int fail_at(const checker *c, const char *obj, size_t row, const char *key, const char *fmt,
                   ...) __attribute__((format(printf, 5, 6)));
static int fail_at(const checker *c, const char *obj, size_t row, const char *key, const char *fmt,
                   ...) {
    const char *b = c->text;
    size_t at = jscan_ws(b, c->n, 0), v = obj ? jscan_member(b, c->n, at, obj) : at;
    if (v != JSCAN_NOWHERE && row != SIZE_MAX)
        v = jscan_element(b, c->n, v, row);
    if (v != JSCAN_NOWHERE) {
        at = v;
        v = key ? jscan_member(b, c->n, v, key) : v;
        at = v != JSCAN_NOWHERE ? v : at;
    }
    int line = 0, col = 0;
    if (at < c->n)
        jscan_line_col(b, at, &line, &col);
    char msg[sizeof c->d->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return diag_set(c->d, c->p->path, line, col, "%s", msg);
}

// The member key of o as a string / an integer at least min / a boolean;
// -1 after fail_at naming where (what: "rows[3]", "config").
static int want_str(const checker *c, const json_t *o, const char *obj, size_t row,
                    const char *what, const char *key, const char **out) {
    *out = json_string_value(json_object_get(o, key));
    return *out ? 0 : fail_at(c, obj, row, key, "%s: \"%s\" must be a string", what, key);
}

static int want_int(const checker *c, const json_t *o, const char *obj, size_t row,
                    const char *what, const char *key, int64_t min, bool null_ok, int64_t *out) {
    const json_t *v = json_object_get(o, key);
    *out = -1;
    if (null_ok && json_is_null(v))
        return 0;
    if (json_is_integer(v) && json_integer_value(v) >= min) {
        *out = (int64_t)json_integer_value(v);
        return 0;
    }
    return fail_at(c, obj, row, key, "%s: \"%s\" must be an integer of at least %lld%s", what, key,
                   (long long)min, null_ok ? ", or null" : "");
}

static int want_bool(const checker *c, const json_t *o, const char *obj, size_t row,
                     const char *what, const char *key, bool *out) {
    const json_t *v = json_object_get(o, key);
    *out = json_is_true(v);
    return json_is_boolean(v)
               ? 0
               : fail_at(c, obj, row, key, "%s: \"%s\" must be true or false", what, key);
}

static int row_read(const checker *c, const json_t *r, size_t i, planfile_row *w) {
    char what[600];
    snprintf(what, sizeof what, "rows[%zu]", i);
    if (!json_is_object(r))
        return fail_at(c, "rows", i, NULL, "%s: a row is an object", what);
    if (want_str(c, r, "rows", i, what, "suite", &w->suite) < 0 ||
        want_str(c, r, "rows", i, what, "name", &w->name) < 0 ||
        want_str(c, r, "rows", i, what, "mode", &w->mode) < 0)
        return -1;
    snprintf(what, sizeof what, "rows[%zu] (%.200s/%.200s %.40s)", i, w->suite, w->name, w->mode);
    if (want_int(c, r, "rows", i, what, "batch", 1, false, &w->batch) < 0 ||
        want_int(c, r, "rows", i, what, "prompt_len", 1, false, &w->prompt_len) < 0 ||
        want_int(c, r, "rows", i, what, "budget_bytes", 1, false, &w->budget_bytes) < 0 ||
        want_int(c, r, "rows", i, what, "max_tokens", 0, false, &w->max_tokens) < 0 ||
        want_bool(c, r, "rows", i, what, "capped", &w->capped) < 0 ||
        want_int(c, r, "rows", i, what, "weights_bytes", 0, false, &w->weights_bytes) < 0 ||
        want_int(c, r, "rows", i, what, "kv_bytes_per_token", 0, false, &w->kv_bytes_per_token) <
            0 ||
        want_int(c, r, "rows", i, what, "fixed_bytes", 0, true, &w->fixed_bytes) < 0 ||
        want_bool(c, r, "rows", i, what, "weights_exceed_budget", &w->weights_exceed_budget) < 0)
        return -1;
    if (w->weights_exceed_budget && w->max_tokens > 0)
        return fail_at(c, "rows", i, "max_tokens",
                       "%s: %lld tokens where the weights alone exceed the budget", what,
                       (long long)w->max_tokens);
    return 0;
}

static int rows_read(const checker *c, const json_t *rows) {
    planfile *p = c->p;
    if (!json_is_array(rows))
        return fail_at(c, "rows", SIZE_MAX, NULL, "\"rows\" must be an array");
    size_t n = json_array_size(rows);
    if (n == 0)
        return fail_at(c, "rows", SIZE_MAX, NULL, "\"rows\" is empty: nothing to report");
    if (n > INT32_MAX || !(p->rows = calloc(n, sizeof *p->rows)))
        return diag_set(c->d, p->path, 0, 0, "calloc: out of memory for %zu rows", n);
    for (size_t i = 0; i < n; i++) {
        planfile_row *w = &p->rows[i];
        if (row_read(c, json_array_get(rows, i), i, w) < 0)
            return -1;
        for (int k = 0; k < p->nrows; k++) {
            const planfile_row *x = &p->rows[k];
            if (x->budget_bytes == w->budget_bytes && !strcmp(x->suite, w->suite) &&
                !strcmp(x->name, w->name) && !strcmp(x->mode, w->mode))
                return fail_at(c, "rows", i, NULL,
                               "rows[%zu]: %s/%s %s at %lld bytes is also rows[%d]", i, w->suite,
                               w->name, w->mode, (long long)w->budget_bytes, k);
        }
        p->nrows++;
    }
    return 0;
}

static int doc_read(const checker *c) {
    planfile *p = c->p;
    const json_t *root = p->root;
    if (!json_is_object(root))
        return fail_at(c, NULL, SIZE_MAX, NULL, "a plan file is a JSON object");
    const char *kind = json_string_value(json_object_get(root, "kind"));
    if (!kind || strcmp(kind, "plan") != 0)
        return fail_at(c, "kind", SIZE_MAX, NULL, "\"kind\" must be \"plan\"");
    const json_t *v = json_object_get(root, "schema_version");
    if (!json_is_integer(v) || json_integer_value(v) < 1)
        return fail_at(c, "schema_version", SIZE_MAX, NULL,
                       "\"schema_version\" must be an integer of at least 1");
    if (json_integer_value(v) > PLANFILE_SCHEMA_VERSION)
        return fail_at(c, "schema_version", SIZE_MAX, NULL,
                       "plan schema_version %lld is newer than this build reads (%d); use a "
                       "newer tcbench",
                       (long long)json_integer_value(v), PLANFILE_SCHEMA_VERSION);
    const json_t *tool = json_object_get(root, "tool"), *host = json_object_get(root, "host");
    p->tool_version = json_string_value(json_object_get(tool, "version"));
    p->timestamp = json_string_value(json_object_get(root, "timestamp"));
    p->cpu_model = json_string_value(json_object_get(host, "cpu_model"));
    const json_t *cfg = json_object_get(root, "config");
    if (!json_is_object(cfg))
        return fail_at(c, "config", SIZE_MAX, NULL, "\"config\" must be an object");
    if (want_str(c, cfg, "config", SIZE_MAX, "config", "weights", &p->weights) < 0 ||
        want_int(c, cfg, "config", SIZE_MAX, "config", "weight_group", 0, false, &p->weight_group) <
            0 ||
        want_str(c, cfg, "config", SIZE_MAX, "config", "weight_scales", &p->weight_scales) < 0 ||
        want_str(c, cfg, "config", SIZE_MAX, "config", "precision", &p->precision) < 0 ||
        want_str(c, cfg, "config", SIZE_MAX, "config", "attention", &p->attention) < 0)
        return -1;
    return rows_read(c, json_object_get(root, "rows"));
}

static char *read_all(const char *path, size_t *n, diag *d) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        diag_set(d, path, 0, 0, "fopen: %s", strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap);
    while (b) {
        len += fread(b + len, 1, cap - len, f);
        if (len < cap)
            break;
        char *nb = realloc(b, cap *= 2);
        if (!nb)
            free(b);
        b = nb;
    }
    bool failed = ferror(f);
    fclose(f);
    if (!b) {
        diag_set(d, path, 0, 0, "malloc: out of memory reading the plan");
        return NULL;
    }
    if (failed) {
        free(b);
        diag_set(d, path, 0, 0, "fread: %s", strerror(errno));
        return NULL;
    }
    *n = len;
    return b;
}

int planfile_load(const char *path, planfile **out, diag *d) {
    *out = NULL;
    planfile *p = calloc(1, sizeof *p);
    if (!p)
        return diag_set(d, path, 0, 0, "calloc: out of memory");
    snprintf(p->path, sizeof p->path, "%s", path);
    size_t n = 0;
    char *text = read_all(path, &n, d);
    int rc = -1;
    if (text) {
        json_error_t je;
        p->root = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
        if (!p->root)
            diag_set(d, path, je.line, je.column, "%s (not valid JSON; is the file complete?)",
                     je.text);
        else
            rc = doc_read(&(checker){.p = p, .text = text, .n = n, .d = d});
        free(text);
    }
    if (rc < 0) {
        planfile_free(p);
        return -1;
    }
    *out = p;
    return 0;
}

void planfile_free(planfile *p) {
    if (!p)
        return;
    free(p->rows);
    json_decref(p->root);
    free(p);
}
