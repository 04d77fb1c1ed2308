// A run's journal: one JSON object a line (journal.h).
#include "journal.h"

#include "results.h"
#include "tcbench_config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

json_t *results_journal_header(const char *timestamp, json_t *command_line, const json_t *host,
                               json_t *config) {
    return json_pack("{s:i, s:i, s:{s:s, s:s, s:s}, s:s, s:o, s:O, s:o}", "journal", 1,
                     "schema_version", RESULTS_SCHEMA_VERSION, "tool", "name", "tcbench", "version",
                     TCBENCH_VERSION, "git_commit", TCBENCH_GIT_COMMIT, "timestamp", timestamp,
                     "command_line", command_line, "host", host, "config", config);
}

bool results_journal_is_header(const json_t *o) {
    return json_is_integer(json_object_get(o, "journal"));
}

int results_journal_append(FILE *f, const char *path, const json_t *obj, char *err, size_t cap) {
    char *text = json_dumps(obj, JSON_COMPACT | JSON_REAL_PRECISION(10));
    if (!text) {
        snprintf(err, cap, "json_dumps: out of memory writing %s", path);
        return -1;
    }
    size_t len = strlen(text);
    // one buffer, line and newline together, so a cut shows as a missing '\n'
    char *line = realloc(text, len + 2);
    if (!line) {
        free(text);
        snprintf(err, cap, "realloc: out of memory writing %s", path);
        return -1;
    }
    line[len] = '\n';
    line[len + 1] = '\0';
    const char *call = NULL;
    if (fwrite(line, 1, len + 1, f) != len + 1)
        call = "write";
    else if (fflush(f) != 0)
        call = "write"; // stdio writes on flush: a full disk shows here
    else if (fsync(fileno(f)) != 0)
        call = "fsync";
    int e = errno;
    free(line);
    if (call) {
        snprintf(err, cap, "%s %s: %s", call, path, strerror(e));
        clearerr(f);
        return -1;
    }
    return 0;
}

int results_journal_open(results_journal_reader *r, const char *path, diag *d) {
    memset(r, 0, sizeof *r);
    snprintf(r->path, sizeof r->path, "%s", path);
    if (!(r->f = fopen(path, "r")))
        return diag_set(d, path, 0, 0, "fopen: %s", strerror(errno));
    return 0;
}

// Reads one line into r->buf (without its newline). 1 with *nl telling
// whether it ended in a newline, 0 at the end, -1 with d set.
static int read_line(results_journal_reader *r, size_t *len, bool *nl, diag *d) {
    *len = 0;
    *nl = false;
    for (;;) {
        if (*len + 2 > r->cap) {
            size_t cap = r->cap ? 2 * r->cap : 4096;
            if (cap > RESULTS_JOURNAL_MAX_LINE + 2)
                return diag_set(d, r->path, r->line + 1, 0,
                                "a line over %zu bytes: not a tcbench journal",
                                RESULTS_JOURNAL_MAX_LINE);
            char *b = realloc(r->buf, cap);
            if (!b)
                return diag_set(d, r->path, r->line + 1, 0,
                                "realloc: out of memory for a line of %zu bytes", cap);
            r->buf = b;
            r->cap = cap;
        }
        if (!fgets(r->buf + *len, (int)(r->cap - *len), r->f)) { // cap <= 64 MiB + 2
            if (ferror(r->f))
                return diag_set(d, r->path, r->line + 1, 0, "read: %s", strerror(errno));
            break;
        }
        size_t k = strlen(r->buf + *len);
        *len += k;
        if (*len > 0 && r->buf[*len - 1] == '\n') {
            r->buf[--*len] = '\0';
            *nl = true;
            break;
        }
    }
    if (*len == 0 && !*nl)
        return 0;
    r->line++;
    return 1;
}

int results_journal_next(results_journal_reader *r, json_t **obj, FILE *warn, diag *d) {
    *obj = NULL;
    for (;;) {
        size_t len;
        bool nl;
        int k = read_line(r, &len, &nl, d);
        if (k <= 0)
            return k;
        if (len == 0 && nl)
            continue; // an empty line carries nothing
        json_error_t je;
        json_t *o = nl ? json_loadb(r->buf, len, JSON_REJECT_DUPLICATES, &je) : NULL;
        if (o && json_is_object(o)) {
            *obj = o;
            return 1;
        }
        json_decref(o);
        r->cut++;
        if (warn)
            fprintf(warn, "%s:%d: warning: %s, skipped\n", r->path, r->line,
                    !nl  ? "a cut line (no newline: the run was stopped while writing it?)"
                    : !o ? "a garbled line (not valid JSON)"
                         : "a line that is not a JSON object");
    }
}

void results_journal_close(results_journal_reader *r) {
    if (r->f)
        fclose(r->f); // read-only: nothing to lose
    free(r->buf);
    memset(r, 0, sizeof *r);
}

long results_journal_trim(const char *path, char *err, size_t cap) {
    FILE *f = fopen(path, "r+");
    if (!f) {
        snprintf(err, cap, "fopen %s: %s", path, strerror(errno));
        return -1;
    }
    // the last newline, read backwards a block at a time
    char buf[4096];
    const char *call = NULL;
    long keep = 0, size = -1;
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0)
        call = "fseek";
    for (long end = size; !call && end > 0 && keep == 0;) {
        long start = end > (long)sizeof buf ? end - (long)sizeof buf : 0;
        size_t n = (size_t)(end - start);
        if (fseek(f, start, SEEK_SET) != 0)
            call = "fseek";
        else if (fread(buf, 1, n, f) != n)
            call = "read";
        for (size_t i = n; !call && i > 0 && keep == 0; i--)
            if (buf[i - 1] == '\n')
                keep = start + (long)i;
        end = start;
    }
    if (!call && keep < size && ftruncate(fileno(f), keep) != 0)
        call = "ftruncate";
    if (!call && keep < size && fsync(fileno(f)) != 0)
        call = "fsync";
    int e = errno;
    if (fclose(f) != 0 && !call) {
        call = "fclose";
        e = errno;
    }
    if (call) {
        snprintf(err, cap, "%s %s: %s", call, path, strerror(e));
        return -1;
    }
    return size - keep;
}

bool results_journal_sniff(const char *path) {
    results_journal_reader r;
    diag d;
    if (results_journal_open(&r, path, &d) < 0)
        return false;
    size_t len;
    bool nl;
    bool yes = false;
    if (read_line(&r, &len, &nl, &d) > 0 && nl) {
        json_t *o = json_loadb(r.buf, len, 0, NULL);
        yes = results_journal_is_header(o);
        json_decref(o);
    }
    results_journal_close(&r);
    return yes;
}
