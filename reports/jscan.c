// Finding values in JSON text by strings (with their escapes) and nesting
// alone (jscan.h). The grammar is jansson's business: text that is not
// JSON gives JSCAN_NOWHERE or a value's end, never a read past b[n - 1].
#include "jscan.h"

#include <stdbool.h>
#include <string.h>

size_t jscan_ws(const char *b, size_t n, size_t p) {
    while (p < n && (b[p] == ' ' || b[p] == '\t' || b[p] == '\n' || b[p] == '\r'))
        p++;
    return p;
}

size_t jscan_string(const char *b, size_t n, size_t p) {
    for (p++; p < n; p++) {
        if (b[p] == '\\')
            p++;
        else if (b[p] == '"')
            return p + 1;
    }
    return JSCAN_NOWHERE;
}

size_t jscan_value(const char *b, size_t n, size_t p, void (*on_comma)(void *ctx, size_t at),
                   void *ctx) {
    if (p >= n)
        return JSCAN_NOWHERE;
    if (b[p] == '"')
        return jscan_string(b, n, p);
    if (b[p] != '{' && b[p] != '[') {
        while (p < n && !strchr(",]} \t\r\n", b[p]))
            p++;
        return p;
    }
    size_t depth = 0;
    for (; p < n; p++) {
        char ch = b[p];
        if (ch == '"') {
            if ((p = jscan_string(b, n, p)) == JSCAN_NOWHERE)
                return JSCAN_NOWHERE;
            p--;
        } else if (ch == '{' || ch == '[') {
            depth++;
        } else if (ch == '}' || ch == ']') {
            if (--depth == 0)
                return p + 1;
        } else if (ch == ',' && depth == 1 && on_comma) {
            on_comma(ctx, p);
        }
    }
    return JSCAN_NOWHERE;
}

// Past the value at b[p] and the comma after it: the next member or
// element; JSCAN_NOWHERE at the end of the container.
static size_t next_item(const char *b, size_t n, size_t p) {
    if ((p = jscan_value(b, n, p, NULL, NULL)) == JSCAN_NOWHERE)
        return JSCAN_NOWHERE;
    p = jscan_ws(b, n, p);
    return p < n && b[p] == ',' ? jscan_ws(b, n, p + 1) : JSCAN_NOWHERE;
}

size_t jscan_member(const char *b, size_t n, size_t p, const char *key) {
    if (p >= n || b[p] != '{')
        return JSCAN_NOWHERE;
    size_t klen = strlen(key);
    for (p = jscan_ws(b, n, p + 1); p < n && b[p] == '"';) {
        size_t k = p;
        if ((p = jscan_string(b, n, p)) == JSCAN_NOWHERE)
            return JSCAN_NOWHERE;
        bool match = p - k == klen + 2 && !memcmp(b + k + 1, key, klen);
        p = jscan_ws(b, n, p);
        if (p >= n || b[p] != ':')
            return JSCAN_NOWHERE;
        p = jscan_ws(b, n, p + 1);
        if (match)
            return p;
        if ((p = next_item(b, n, p)) == JSCAN_NOWHERE)
            return JSCAN_NOWHERE;
    }
    return JSCAN_NOWHERE;
}

size_t jscan_element(const char *b, size_t n, size_t p, size_t i) {
    if (p >= n || b[p] != '[')
        return JSCAN_NOWHERE;
    p = jscan_ws(b, n, p + 1);
    for (size_t k = 0; p < n && b[p] != ']'; k++) {
        if (k == i)
            return p;
        if ((p = next_item(b, n, p)) == JSCAN_NOWHERE)
            return JSCAN_NOWHERE;
    }
    return JSCAN_NOWHERE;
}

void jscan_line_col(const char *b, size_t off, int *line, int *col) {
    int l = 1;
    size_t start = 0;
    for (size_t i = 0; i < off; i++)
        if (b[i] == '\n') {
            l++;
            start = i + 1;
        }
    *line = l;
    *col = (int)(off - start) + 1;
}
