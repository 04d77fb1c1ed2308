// libyaml events -> yd_node tree with positions (yamldoc.h).
#include "yamldoc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

// Deeper nesting than this is a mistake or an attack, not a model.
#define YD_MAX_DEPTH 256

typedef struct {
    char *name;
    yd_node *node;
} yd_anchor;

typedef struct {
    yaml_parser_t parser;
    const char *text; // the input, to turn the reader's byte offsets into line:col
    size_t len;
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

// The 1-based line and column of byte off, columns in characters as
// libyaml counts them (a UTF-8 continuation byte starts none).
static void offset_line_col(const char *text, size_t len, size_t off, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off && i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '\n' || (c == '\r' && (i + 1 >= len || text[i + 1] != '\n'))) {
            ++*line;
            *col = 1;
        } else if ((c & 0xC0) != 0x80 && c != '\r') {
            ++*col;
        }
    }
}

// The reader refuses bytes that are not UTF-8 and control characters; it
// gives a byte offset, which becomes a line and column here.
static int reader_error(yd_state *st) {
    yaml_parser_t *p = &st->parser;
    int line, col;
    offset_line_col(st->text, st->len, p->problem_offset, &line, &col);
    const char *problem = p->problem ? p->problem : "unreadable text";
    int v = p->problem_value;
    if (strstr(problem, "control"))
        return diag_set(st->d, st->doc->path, line, col,
                        "control character U+%04X in the file; a model or suite is printable "
                        "text (tabs only inside quotes)",
                        (unsigned)v);
    if (strstr(problem, "UTF-8") && p->problem_offset < st->len)
        return diag_set(st->d, st->doc->path, line, col,
                        "byte 0x%02X is not UTF-8 (%s); save the file as UTF-8",
                        (unsigned char)st->text[p->problem_offset], problem);
    return diag_set(st->d, st->doc->path, line, col, "YAML reader: %s", problem);
}

// The parser's own message, at its mark.
static int parser_error(yd_state *st) {
    yaml_parser_t *p = &st->parser;
    const char *problem = p->problem ? p->problem : "malformed YAML";
    if (p->error == YAML_MEMORY_ERROR)
        return oom(st);
    if (p->error == YAML_READER_ERROR)
        return reader_error(st);
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
            // keys name things (tensors, parameters, sizes) and end up in messages
            if (yd_check_name(st->doc, key, "a key", false, st->d) < 0)
                return -1;
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
        // a quoted "\0" would cut the text short where C reads it
        if (strlen(n->str) != ev->data.scalar.length)
            return diag_set(st->d, st->doc->path, n->line, n->col,
                            "a NUL byte (\\0) at byte %zu of this text; names and values are "
                            "printable text",
                            strlen(n->str) + 1);
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
    st.text = text;
    st.len = len;
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

// What a path is when it is not a regular file, for the refusal.
static const char *file_kind(mode_t m) {
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
                         : "not a regular file";
}

// Reads the whole of fd (a regular file of at most YD_MAX_FILE_BYTES) into
// *buf; a file that grew past the limit since fstat is refused too.
static int read_all(int fd, const char *path, size_t size, char **buf, size_t *len, diag *d) {
    size_t cap = size + 1;
    *len = 0;
    if (!(*buf = malloc(cap + 1)))
        return diag_set(d, path, 0, 0, "out of memory reading the file (%zu bytes)", size);
    for (;;) {
        ssize_t got = read(fd, *buf + *len, cap - *len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return diag_set(d, path, 0, 0, "read: %s", strerror(errno));
        if (got == 0)
            return 0;
        *len += (size_t)got;
        if (*len > YD_MAX_FILE_BYTES)
            return diag_set(d, path, 0, 0, "the file grew past %d MiB while being read",
                            YD_MAX_FILE_BYTES >> 20);
        if (*len == cap) { // grew since fstat, still under the limit
            size_t ncap = cap * 2 > YD_MAX_FILE_BYTES + 1 ? YD_MAX_FILE_BYTES + 1 : cap * 2;
            char *p = realloc(*buf, ncap + 1);
            if (!p)
                return diag_set(d, path, 0, 0, "out of memory reading the file");
            *buf = p;
            cap = ncap;
        }
    }
}

int yd_load(const char *path, yd_doc **out, diag *d) {
    *out = NULL;
    // O_NONBLOCK: opening a FIFO must not wait for a writer before fstat refuses it
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return diag_set(d, path, 0, 0, "open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return diag_set(d, path, 0, 0, "fstat: %s", strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return diag_set(d, path, 0, 0, "is %s, not a model or suite file", file_kind(sb.st_mode));
    }
    if (sb.st_size > YD_MAX_FILE_BYTES) {
        close(fd);
        return diag_set(d, path, 0, 0,
                        "%.1f MiB, above the %d MiB limit of a model or suite file (docs/yaml.md)",
                        (double)sb.st_size / (1 << 20), YD_MAX_FILE_BYTES >> 20);
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
        int e = errno;
        close(fd);
        return diag_set(d, path, 0, 0, "fcntl: %s", strerror(e));
    }
    char *buf;
    size_t len;
    int rc = read_all(fd, path, (size_t)sb.st_size, &buf, &len, d);
    if (close(fd) != 0 && rc == 0)
        rc = diag_set(d, path, 0, 0, "close: %s", strerror(errno));
    if (rc == 0)
        rc = yd_parse(buf, len, path, out, d);
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

// The code point of the UTF-8 sequence at s, *n its bytes. libyaml's
// reader has refused text that is not UTF-8, and its escapes (\x, \u, \U)
// make valid code points, so scalars here are valid UTF-8.
static long utf8_decode(const unsigned char *s, int *n) {
    *n = s[0] < 0x80 ? 1 : s[0] < 0xE0 ? 2 : s[0] < 0xF0 ? 3 : 4;
    long cp = *n == 1 ? s[0] : s[0] & (0x7F >> *n);
    for (int i = 1; i < *n && s[i]; i++)
        cp = cp << 6 | (s[i] & 0x3F);
    return cp;
}

int yd_check_name(const yd_doc *doc, const yd_node *n, const char *what, bool file_name, diag *d) {
    const unsigned char *s = (const unsigned char *)n->str;
    size_t len = strlen(n->str);
    if (len == 0)
        return diag_set(d, doc->path, n->line, n->col, "%s is empty; a name needs a character",
                        what);
    if (len > YD_NAME_MAX)
        return diag_set(d, doc->path, n->line, n->col,
                        "%s is %zu bytes long; a name has at most %d (it becomes a file name)",
                        what, len, YD_NAME_MAX);
    int nchar = 1;
    for (size_t i = 0; i < len; nchar++) {
        int k;
        long cp = utf8_decode(s + i, &k);
        if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0) || cp == 0x2028 || cp == 0x2029)
            return diag_set(d, doc->path, n->line, n->col,
                            "%s has the control character U+%04lX at its character %d; a name "
                            "is printable text",
                            what, (unsigned long)cp, nchar);
        i += (size_t)k;
    }
    if (file_name && (strchr(n->str, '/') || !strcmp(n->str, ".") || !strcmp(n->str, "..")))
        return diag_set(d, doc->path, n->line, n->col,
                        "%s '%s' cannot be a file name (a '/', or '.' or '..'); it names files "
                        "of dumps and charts",
                        what, n->str);
    return 0;
}
