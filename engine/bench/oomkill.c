// The cgroup's OOM-kill counter (oomkill.h).
#include "oomkill.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bench_oom_kills_parse(const char *text, long long *n) {
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        // "oom_kill_disable 0" (v1) and "oom_group_kill 0" (v2) are other lines
        if (len > 9 && !strncmp(line, "oom_kill ", 9)) {
            char *stop;
            errno = 0;
            long long v = strtoll(line + 9, &stop, 10);
            if (stop > line + 9 && stop == line + len && errno == 0 && v >= 0) {
                *n = v;
                return 0;
            }
        }
        line = end ? end + 1 : NULL;
    }
    return -1;
}

// Whether the comma list c[0 .. n - 1] names controller want ("" only for
// an empty list, cgroup v2's).
static bool names(const char *c, size_t n, const char *want) {
    size_t wl = strlen(want);
    if (wl == 0)
        return n == 0;
    for (const char *end = c + n; c < end;) {
        const char *comma = memchr(c, ',', (size_t)(end - c));
        size_t l = comma ? (size_t)(comma - c) : (size_t)(end - c);
        if (l == wl && !strncmp(c, want, wl))
            return true;
        c += l + 1;
    }
    return false;
}

// The PATH of the line "ID:CONTROLLERS:PATH" whose controllers name want
// ("" for cgroup v2's "0::PATH"); NULL when there is none.
static const char *cgroup_path(const char *text, const char *want, size_t *len) {
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        const char *c1 = memchr(line, ':', n);
        const char *c2 = c1 ? memchr(c1 + 1, ':', n - (size_t)(c1 + 1 - line)) : NULL;
        if (c2 && names(c1 + 1, (size_t)(c2 - c1 - 1), want)) {
            *len = n - (size_t)(c2 + 1 - line);
            return c2 + 1;
        }
        line = end ? end + 1 : NULL;
    }
    return NULL;
}

int bench_oom_kills_files(const char *proc_cgroup, const char *root, char (*paths)[512], int max) {
    int k = 0;
    size_t len;
    // PATH starts with '/'; "/" alone is the root cgroup, whose counter
    // (v1) is the root file below, and which has no memory.events (v2)
    const char *p = cgroup_path(proc_cgroup, "", &len);
    if (p && k < max && len > 1)
        snprintf(paths[k++], sizeof paths[0], "%s%.*s/memory.events", root, (int)len, p);
    p = cgroup_path(proc_cgroup, "memory", &len);
    if (p && k < max && len > 1)
        snprintf(paths[k++], sizeof paths[0], "%s/memory%.*s/memory.oom_control", root, (int)len,
                 p);
    if (p && k < max)
        snprintf(paths[k++], sizeof paths[0], "%s/memory/memory.oom_control", root);
    return k;
}

// The whole of a small file into buf; -1 when it cannot be read.
static int read_small(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    int bad = ferror(f);
    fclose(f); // read-only: nothing to lose
    buf[n] = '\0';
    return bad ? -1 : 0;
}

int bench_oom_kills(long long *n) {
    char text[4096], paths[3][512];
    if (read_small("/proc/self/cgroup", text, sizeof text) < 0)
        return -1;
    const char *root = getenv("TCBENCH_CGROUP_ROOT");
    int k = bench_oom_kills_files(text, root && *root ? root : "/sys/fs/cgroup", paths, 3);
    for (int i = 0; i < k; i++) {
        char body[4096];
        if (read_small(paths[i], body, sizeof body) == 0 && bench_oom_kills_parse(body, n) == 0)
            return 0;
    }
    return -1;
}

int bench_meminfo_available(const char *text, size_t *bytes) {
    for (const char *line = text; line && *line;) {
        if (!strncmp(line, "MemAvailable:", 13)) {
            char *stop;
            errno = 0;
            unsigned long long kb = strtoull(line + 13, &stop, 10);
            while (*stop == ' ')
                stop++;
            if (stop > line + 13 && errno == 0 && !strncmp(stop, "kB", 2)) {
                *bytes = (size_t)kb * 1024;
                return 0;
            }
            return -1;
        }
        const char *end = strchr(line, '\n');
        line = end ? end + 1 : NULL;
    }
    return -1;
}

// A whole decimal number of bytes, with at most a trailing newline.
static int read_count(const char *text, unsigned long long *v) {
    char *stop;
    errno = 0;
    *v = strtoull(text, &stop, 10);
    return stop > text && errno == 0 && (*stop == '\0' || !strcmp(stop, "\n")) ? 0 : -1;
}

int bench_cgroup_room(const char *max_text, const char *current_text, size_t *bytes) {
    unsigned long long max, cur;
    if (read_count(max_text, &max) < 0 || read_count(current_text, &cur) < 0)
        return -1; // "max\n": no limit of its own
    *bytes = cur < max ? (size_t)(max - cur) : 0;
    return 0;
}

int bench_mem_available(size_t *bytes) {
    char text[8192];
    size_t avail = 0;
    bool known = read_small("/proc/meminfo", text, sizeof text) == 0 &&
                 bench_meminfo_available(text, &avail) == 0;
    size_t len;
    const char *p;
    if (read_small("/proc/self/cgroup", text, sizeof text) == 0 &&
        (p = cgroup_path(text, "", &len)) != NULL) {
        const char *root = getenv("TCBENCH_CGROUP_ROOT");
        char path[600], maxt[64], curt[64];
        size_t room;
        root = root && *root ? root : "/sys/fs/cgroup";
        snprintf(path, sizeof path, "%s%.*s/memory.max", root, len > 1 ? (int)len : 0, p);
        bool got = read_small(path, maxt, sizeof maxt) == 0;
        snprintf(path, sizeof path, "%s%.*s/memory.current", root, len > 1 ? (int)len : 0, p);
        if (got && read_small(path, curt, sizeof curt) == 0 &&
            bench_cgroup_room(maxt, curt, &room) == 0 && (!known || room < avail)) {
            avail = room;
            known = true;
        }
    }
    if (!known)
        return -1;
    *bytes = avail;
    return 0;
}
