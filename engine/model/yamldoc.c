// libyaml events -> yd_node tree with positions (yamldoc.h).
#include "yamldoc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

// Deeper nesting than this is a mistake or an attack, not a model.
#define YD_MAX_DEPTH 256

typedef struct {
    char *name;
    yd_node *node;
} yd_anchor;

typedef struct {
    yaml_parser_t parser;
    yd_doc *doc;
    diag *d;
    yd_anchor *anchors;
    int nanchors, capanchors;
} yd_state;

static int oom(yd_state *st) {
    return diag_set(st->d, st->doc->path, 0, 0, "out of memory reading YAML");
}

static yd_node *node_new(yd_state *st, yd_kind kind, yaml_mark_t m) {
    yd_doc *doc = st->doc;
    if (doc->nall == doc->capall) {
        int cap = doc->capall ? doc->capall * 2 : 64;
        yd_node **p = realloc(doc->all, (size_t)cap * sizeof *p);
        if (!p)
            return NULL;
        doc->all = p;
        doc->capall = cap;
    }
    yd_node *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->kind = kind;
    n->line = (int)m.line + 1;
    n->col = (int)m.column + 1;
    doc->all[doc->nall++] = n;
    return n;
}

static int node_push(yd_node *n, yd_node *key, yd_node *val) {
    if (n->n == n->cap) {
        int cap = n->cap ? n->cap * 2 : 4;
        yd_node **v = realloc(n->vals, (size_t)cap * sizeof *v);
        if (!v)
            return -1;
        n->vals = v;
        if (n->kind == YD_MAP) {
            yd_node **k = realloc(n->keys, (size_t)cap * sizeof *k);
            if (!k)
                return -1;
            n->keys = k;
        }
        n->cap = cap;
    }
    if (n->kind == YD_MAP)
        n->keys[n->n] = key;
    n->vals[n->n++] = val;
    return 0;
}

// The parser's own message, at its mark.
static int parser_error(yd_state *st) {
    yaml_parser_t *p = &st->parser;
    const char *problem = p->problem ? p->problem : "malformed YAML";
    if (p->error == YAML_MEMORY_ERROR)
        return oom(st);
    if (p->error == YAML_READER_ERROR)
        return diag_set(st->d, st->doc->path, 0, 0, "YAML reader: %s at byte %zu", problem,
                        p->problem_offset);
    if (p->context)
        return diag_set(st->d, st->doc->path, (int)p->problem_mark.line + 1,
                        (int)p->problem_mark.column + 1, "YAML syntax: %s %s", problem, p->context);
    return diag_set(st->d, st->doc->path, (int)p->problem_mark.line + 1,
                    (int)p->problem_mark.column + 1, "YAML syntax: %s", problem);
}

static int next_event(yd_state *st, yaml_event_t *ev) {
    if (!yaml_parser_parse(&st->parser, ev))
        return parser_error(st);
    return 0;
}

static int anchor_add(yd_state *st, const yaml_char_t *name, yd_node *n) {
    if (!name)
        return 0;
    if (st->nanchors == st->capanchors) {
        int cap = st->capanchors ? st->capanchors * 2 : 8;
        yd_anchor *p = realloc(st->anchors, (size_t)cap * sizeof *p);
        if (!p)
            return oom(st);
        st->anchors = p;
        st->capanchors = cap;
    }
    char *s = strdup((const char *)name);
    if (!s)
        return oom(st);
    st->anchors[st->nanchors++] = (yd_anchor){s, n};
    return 0;
}

// A later anchor of the same name wins, as YAML says.
static yd_node *anchor_find(yd_state *st, const char *name) {
    for (int i = st->nanchors - 1; i >= 0; i--)
        if (!strcmp(st->anchors[i].name, name))
            return st->anchors[i].node;
    return NULL;
}

static int parse_node(yd_state *st, yaml_event_t *ev, int depth, yd_node **out);

// Reads the children of a sequence or mapping until its end event.
static int parse_children(yd_state *st, yd_node *n, yaml_event_type_t end, int depth) {
    for (;;) {
        yaml_event_t ev;
        if (next_event(st, &ev) < 0)
            return -1;
        if (ev.type == end) {
            yaml_event_delete(&ev);
            return 0;
        }
        yd_node *key = NULL, *val = NULL;
        int rc = parse_node(st, &ev, depth + 1, n->kind == YD_MAP ? &key : &val);
        yaml_event_delete(&ev);
        if (rc < 0)
            return -1;
        if (n->kind == YD_MAP) {
            if (key->kind != YD_SCALAR)
                return diag_set(st->d, st->doc->path, key->line, key->col,
                                "a mapping key must be a plain word, not %s",
                                yd_kind_name(key->kind));
            for (int i = 0; i < n->n; i++)
                if (!strcmp(n->keys[i]->str, key->str))
                    return diag_set(st->d, st->doc->path, key->line, key->col,
                                    "duplicate key '%s' (first at line %d, column %d)", key->str,
                                    n->keys[i]->line, n->keys[i]->col);
            if (next_event(st, &ev) < 0)
                return -1;
            rc = parse_node(st, &ev, depth + 1, &val);
            yaml_event_delete(&ev);
            if (rc < 0)
                return -1;
        }
        if (node_push(n, key, val) < 0)
            return oom(st);
    }
}

static int parse_node(yd_state *st, yaml_event_t *ev, int depth, yd_node **out) {
    if (depth > YD_MAX_DEPTH)
        return diag_set(st->d, st->doc->path, (int)ev->start_mark.line + 1,
                        (int)ev->start_mark.column + 1, "YAML nested deeper than %d levels",
                        YD_MAX_DEPTH);
    yd_node *n;
    switch (ev->type) {
    case YAML_SCALAR_EVENT: {
        n = node_new(st, YD_SCALAR, ev->start_mark);
        if (!n || !(n->str = malloc(ev->data.scalar.length + 1)))
            return oom(st);
        memcpy(n->str, ev->data.scalar.value, ev->data.scalar.length);
        n->str[ev->data.scalar.length] = 0;
        yaml_scalar_style_t style = ev->data.scalar.style;
        n->plain = style == YAML_PLAIN_SCALAR_STYLE && ev->data.scalar.plain_implicit;
        bool quoted =
            style == YAML_SINGLE_QUOTED_SCALAR_STYLE || style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
        n->text_col = n->col + (quoted ? 1 : 0);
        if (anchor_add(st, ev->data.scalar.anchor, n) < 0)
            return -1;
        break;
    }
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
        bool seq = ev->type == YAML_SEQUENCE_START_EVENT;
        n = node_new(st, seq ? YD_SEQ : YD_MAP, ev->start_mark);
        if (!n)
            return oom(st);
        const yaml_char_t *anchor =
            seq ? ev->data.sequence_start.anchor : ev->data.mapping_start.anchor;
        if (anchor_add(st, anchor, n) < 0)
            return -1;
        if (parse_children(st, n, seq ? YAML_SEQUENCE_END_EVENT : YAML_MAPPING_END_EVENT, depth) <
            0)
            return -1;
        break;
    }
    case YAML_ALIAS_EVENT:
        n = anchor_find(st, (const char *)ev->data.alias.anchor);
        if (!n)
            return diag_set(st->d, st->doc->path, (int)ev->start_mark.line + 1,
                            (int)ev->start_mark.column + 1, "alias '*%s' names no anchor",
                            (const char *)ev->data.alias.anchor);
        break;
    default:
        return diag_set(st->d, st->doc->path, (int)ev->start_mark.line + 1,
                        (int)ev->start_mark.column + 1, "unexpected YAML event %d", (int)ev->type);
    }
    *out = n;
    return 0;
}

static int parse_stream(yd_state *st) {
    yaml_event_t ev;
    if (next_event(st, &ev) < 0) // STREAM-START
        return -1;
    yaml_event_delete(&ev);
    if (next_event(st, &ev) < 0)
        return -1;
    if (ev.type == YAML_STREAM_END_EVENT) { // an empty file
        yaml_event_delete(&ev);
        return 0;
    }
    yaml_event_delete(&ev); // DOCUMENT-START
    if (next_event(st, &ev) < 0)
        return -1;
    int rc = parse_node(st, &ev, 0, &st->doc->root);
    yaml_event_delete(&ev);
    if (rc < 0)
        return -1;
    if (next_event(st, &ev) < 0) // DOCUMENT-END
        return -1;
    yaml_event_delete(&ev);
    if (next_event(st, &ev) < 0)
        return -1;
    if (ev.type != YAML_STREAM_END_EVENT) {
        rc = diag_set(st->d, st->doc->path, (int)ev.start_mark.line + 1,
                      (int)ev.start_mark.column + 1,
                      "a second YAML document; a file holds one (remove the '---')");
        yaml_event_delete(&ev);
        return rc;
    }
    yaml_event_delete(&ev);
    return 0;
}

int yd_parse(const char *text, size_t len, const char *path, yd_doc **out, diag *d) {
    *out = NULL;
    yd_doc *doc = calloc(1, sizeof *doc);
    if (!doc || !(doc->path = strdup(path))) {
        free(doc);
        return diag_set(d, path, 0, 0, "out of memory reading YAML");
    }
    yd_state st = {.doc = doc, .d = d};
    if (!yaml_parser_initialize(&st.parser)) {
        yd_free(doc);
        return diag_set(d, path, 0, 0, "yaml_parser_initialize failed");
    }
    yaml_parser_set_input_string(&st.parser, (const unsigned char *)text, len);
    int rc = parse_stream(&st);
    yaml_parser_delete(&st.parser);
    for (int i = 0; i < st.nanchors; i++)
        free(st.anchors[i].name);
    free(st.anchors);
    if (rc < 0) {
        yd_free(doc);
        return -1;
    }
    *out = doc;
    return 0;
}

int yd_load(const char *path, yd_doc **out, diag *d) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return diag_set(d, path, 0, 0, "fopen: %s", strerror(errno));
    size_t cap = 1 << 14, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fclose(f);
            return diag_set(d, path, 0, 0, "out of memory reading the file");
        }
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap)
            break;
        cap *= 2;
        char *p = realloc(buf, cap);
        if (!p)
            free(buf);
        buf = p;
    }
    if (ferror(f)) {
        int e = errno;
        free(buf);
        fclose(f);
        return diag_set(d, path, 0, 0, "fread: %s", strerror(e));
    }
    if (fclose(f) != 0) {
        int e = errno;
        free(buf);
        return diag_set(d, path, 0, 0, "fclose: %s", strerror(e));
    }
    int rc = yd_parse(buf, len, path, out, d);
    free(buf);
    return rc;
}

void yd_free(yd_doc *doc) {
    if (!doc)
        return;
    for (int i = 0; i < doc->nall; i++) {
        free(doc->all[i]->str);
        free(doc->all[i]->keys);
        free(doc->all[i]->vals);
        free(doc->all[i]);
    }
    free(doc->all);
    free(doc->path);
    free(doc);
}

const yd_node *yd_get_key(const yd_node *map, const char *key) {
    if (!map || map->kind != YD_MAP)
        return NULL;
    for (int i = 0; i < map->n; i++)
        if (!strcmp(map->keys[i]->str, key))
            return map->keys[i];
    return NULL;
}

const yd_node *yd_get(const yd_node *map, const char *key) {
    if (!map || map->kind != YD_MAP)
        return NULL;
    for (int i = 0; i < map->n; i++)
        if (!strcmp(map->keys[i]->str, key))
            return map->vals[i];
    return NULL;
}

bool yd_is_null(const yd_node *n) {
    if (!n || n->kind != YD_SCALAR || !n->plain)
        return false;
    const char *s = n->str;
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

bool yd_is_bool(const yd_node *n, bool *out) {
    if (!n || n->kind != YD_SCALAR || !n->plain)
        return false;
    const char *s = n->str;
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")) {
        *out = true;
        return true;
    }
    if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE")) {
        *out = false;
        return true;
    }
    return false;
}

const char *yd_kind_name(yd_kind k) {
    switch (k) {
    case YD_SCALAR: return "a scalar";
    case YD_MAP: return "a mapping";
    case YD_SEQ: return "a list";
    }
    return "?";
}

int yd_check_keys(const yd_doc *doc, const yd_node *map, const char *what,
                  const char *const *allowed, diag *d) {
    for (int i = 0; i < map->n; i++) {
        const char *k = map->keys[i]->str;
        bool ok = false;
        for (int j = 0; allowed[j] && !ok; j++)
            ok = !strcmp(allowed[j], k);
        if (ok)
            continue;
        char list[256];
        size_t o = 0;
        list[0] = 0;
        for (int j = 0; allowed[j] && o < sizeof list; j++)
            o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", j ? ", " : "", allowed[j]);
        return diag_set(d, doc->path, map->keys[i]->line, map->keys[i]->col,
                        "unknown key '%s' in %s; expected one of %s", k, what, list);
    }
    return 0;
}

int yd_expect(const yd_doc *doc, const yd_node *n, yd_kind k, const char *what, diag *d) {
    if (n->kind == k)
        return 0;
    if (yd_is_null(n))
        return diag_set(d, doc->path, n->line, n->col, "%s is empty; it must be %s", what,
                        yd_kind_name(k));
    return diag_set(d, doc->path, n->line, n->col, "%s must be %s, not %s", what, yd_kind_name(k),
                    yd_kind_name(n->kind));
}
