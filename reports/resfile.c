// Reading results JSON, or a run's journal, into plain data (resfile.h).
#include "resfile.h"

#include "jscan.h"

#include "results/axes.h"
#include "results/journal.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// --- the store: the entries' strings and samples -----------------------------
// A bump allocator in chunks, and a hash set of the strings in it, so the
// suite, mode, status, ... that a million entries repeat are kept once.

typedef struct store_chunk {
    struct store_chunk *next;
    size_t used, cap;
    _Alignas(16) char data[];
} store_chunk;

struct resfile_store {
    store_chunk *chunks;
    const char **strs; // the interned strings, NULL for an empty slot
    size_t nstrs, mask;
    size_t failed; // bytes of the allocation that failed, for the message
};

#define STORE_CHUNK ((size_t)1 << 20)

static void *store_alloc(struct resfile_store *st, size_t n) {
    n = (n + 15) & ~(size_t)15;
    store_chunk *c = st->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > STORE_CHUNK ? n : STORE_CHUNK;
        if (!(c = malloc(sizeof *c + cap))) {
            st->failed = sizeof *c + cap;
            return NULL;
        }
        c->next = st->chunks;
        c->used = 0;
        c->cap = cap;
        st->chunks = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

static uint64_t str_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull; // FNV-1a
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

// Grows the set to twice its slots (or 256), rehashing what it holds.
static int store_grow(struct resfile_store *st) {
    size_t slots = st->strs ? 2 * (st->mask + 1) : 256;
    const char **t = calloc(slots, sizeof *t);
    if (!t) {
        st->failed = slots * sizeof *t;
        return -1;
    }
    for (size_t i = 0; st->strs && i <= st->mask; i++) {
        if (!st->strs[i])
            continue;
        size_t k = str_hash(st->strs[i]) & (slots - 1);
        while (t[k])
            k = (k + 1) & (slots - 1);
        t[k] = st->strs[i];
    }
    free(st->strs);
    st->strs = t;
    st->mask = slots - 1;
    return 0;
}

const char *resfile_store_intern(struct resfile_store *st, const char *s) {
    if (!st->strs || 2 * (st->nstrs + 1) > st->mask + 1)
        if (store_grow(st) < 0)
            return NULL;
    size_t k = str_hash(s) & st->mask;
    for (; st->strs[k]; k = (k + 1) & st->mask)
        if (!strcmp(st->strs[k], s))
            return st->strs[k];
    size_t len = strlen(s) + 1;
    char *copy = store_alloc(st, len);
    if (!copy)
        return NULL;
    memcpy(copy, s, len);
    st->nstrs++;
    return st->strs[k] = copy;
}

struct resfile_store *resfile_store_new(void) {
    return calloc(1, sizeof(struct resfile_store));
}

void resfile_store_free(struct resfile_store *st) {
    if (!st)
        return;
    for (store_chunk *c = st->chunks, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(st->strs);
    free(st);
}

// --- one case, from its JSON into a compact entry ---------------------------

// "812,345"
static const char *thousands(char *buf, size_t cap, long long v) {
    char raw[32];
    int n = snprintf(raw, sizeof raw, "%lld", v), o = 0;
    for (int i = 0; i < n && (size_t)o + 2 < cap; i++) {
        if (i && (n - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = raw[i];
    }
    buf[o] = '\0';
    return buf;
}

static int out_of_memory(resfile *f, diag *d, const char *what) {
    char n[32];
    return diag_set(d, f->path, 0, 0, "out of memory after %s of the cases (%s)",
                    thousands(n, sizeof n, f->nentries), what);
}

static int store_failed(resfile *f, diag *d) {
    char what[64];
    snprintf(what, sizeof what, "malloc %zu bytes", f->store->failed);
    return out_of_memory(f, d, what);
}

// noise and spread from the samples themselves, as the run computed them
// (stats.h): split by process_samples where those add up to the samples,
// else one process's. Stability is optional: a file without it reads as
// stable.
static int stability_take(resfile *f, resfile_entry *e, resfile_extra *x, const results_entry *res,
                          diag *d) {
    const bench_stability *st = &res->r.stab;
    e->noise = NAN;
    x->process_spread = NAN;
    e->processes = e->nsamples > 0 ? 1 : -1;
    double noise, spread;
    if (st->processes > 0 && bench_stats_processes(e->samples, e->nsamples, st->process_samples,
                                                   st->processes, &noise, &spread, NULL) == 0) {
        e->noise = noise;
        x->process_spread = spread;
        e->processes = st->processes;
    } else if (e->nsamples > 0) {
        e->noise = bench_stats_noise(&e->stats);
    }
    bool has = res->has_stability;
    x->ci_rel_width = has ? st->ci_rel_width : NAN;
    x->load_start = has ? st->load_start : NAN;
    x->load_end = has ? st->load_end : NAN;
    x->nivcsw = has ? st->nivcsw : -1;
    e->rounds = has ? st->rounds : -1;
    e->unstable = st->unstable;
    if (st->nreasons > 0) {
        const char **why = store_alloc(f->store, (size_t)st->nreasons * sizeof *why);
        if (!why)
            return store_failed(f, d);
        for (int k = 0; k < st->nreasons; k++)
            if (!(why[k] = resfile_store_intern(f->store, st->reasons[k])))
                return store_failed(f, d);
        e->reasons = why;
        e->nreasons = st->nreasons;
    }
    // an entry that never got to timing has no kernels or memory to count:
    // a 0 there means "not measured", and reads as unknown
    if (e->nsamples == 0 && !e->good) {
        x->kernels = x->kernels > 0 ? x->kernels : -1;
        x->peak_bytes = x->peak_bytes > 0 ? x->peak_bytes : -1;
        x->iterations_per_sample = x->iterations_per_sample > 0 ? x->iterations_per_sample : -1;
    }
    return 0;
}

const resfile_extra resfile_extra_none = {.iterations_per_sample = -1,
                                          .kernels = -1,
                                          .peak_bytes = -1,
                                          .param_count = -1,
                                          .flops = NAN,
                                          .min_bytes = NAN,
                                          .rel_l2 = NAN,
                                          .compile_cold_s = NAN,
                                          .compile_warm_s = NAN,
                                          .ci95_lo = NAN,
                                          .ci95_hi = NAN,
                                          .intensity = NAN,
                                          .achieved_GFLOPs = NAN,
                                          .ci_rel_width = NAN,
                                          .load_start = NAN,
                                          .load_end = NAN,
                                          .nivcsw = -1,
                                          .process_spread = NAN};

static_assert(sizeof(resfile_extra) == 18 * 8,
              "resfile_extra has padding or a new field: extra_keep compares it bit for bit");

// e->x: the shared none, or a copy of x in the store.
static int extra_keep(resfile *f, resfile_entry *e, const resfile_extra *x, diag *d) {
    // bit for bit (the struct has no padding): a NAN of another sign or
    // payload is kept as read
    if (!memcmp(x, &resfile_extra_none, sizeof *x)) {
        e->x = &resfile_extra_none;
        return 0;
    }
    resfile_extra *kept = store_alloc(f->store, sizeof *kept);
    if (!kept)
        return store_failed(f, d);
    *kept = *x;
    e->x = kept;
    return 0;
}

static int entry_fill(resfile *f, resfile_entry *e, const results_entry *res, diag *d) {
    const results_case *id = &res->id;
    const bench_result *r = &res->r;
    struct resfile_store *st = f->store;
    const char *src[] = {id->suite,  id->name,    id->model,  id->mode,    id->precision,
                         id->workload, id->device, res->status, res->message};
    const char **dst[] = {&e->suite,    &e->name,   &e->model,  &e->mode,   &e->precision,
                          &e->workload, &e->device, &e->status, &e->message};
    for (size_t k = 0; k < sizeof src / sizeof src[0]; k++)
        if (!(*dst[k] = resfile_store_intern(st, src[k])))
            return store_failed(f, d);
    if (r->nsamples > 0) {
        double *s = store_alloc(st, (size_t)r->nsamples * sizeof *s);
        if (!s)
            return store_failed(f, d);
        memcpy(s, r->samples, (size_t)r->nsamples * sizeof *s);
        e->samples = s;
    }
    e->nsamples = r->nsamples;
    e->batch = id->batch;
    e->suite_batch = id->suite_batch;
    e->study = id->study;
    e->compiled = resfile_mode_compiled(e->mode);
    e->good = !strcmp(e->status, "ok") || !strcmp(e->status, "pass");
    e->stats = r->stats;
    resfile_extra x = {.iterations_per_sample = r->iters_per_sample,
                       .kernels = r->kernels,
                       .peak_bytes = r->peak_bytes,
                       .param_count = id->param_count,
                       .flops = id->flops,
                       .min_bytes = id->min_bytes,
                       .rel_l2 = r->acc.rel_l2,
                       .compile_cold_s = r->compile.cold_s,
                       .compile_warm_s = r->compile.warm_s,
                       .ci95_lo = r->speedup.ci95_lo,
                       .ci95_hi = r->speedup.ci95_hi,
                       .intensity = res->intensity,
                       .achieved_GFLOPs = res->achieved_GFLOPs};
    e->speedup = r->speedup.median;
    e->compression_ratio = r->compression_ratio;
    if (stability_take(f, e, &x, res, d) < 0)
        return -1;
    return extra_keep(f, e, &x, d);
}

// Reads case object c as f's next entry.
static int entry_take(resfile *f, const json_t *c, diag *d) {
    int i = f->nentries;
    results_entry res;
    if (results_entry_read(c, f->path, i, &res, d) < 0) {
        if (!strstr(d->msg, "out of memory"))
            return -1;
        char what[sizeof d->msg];
        snprintf(what, sizeof what, "%s", d->msg);
        return out_of_memory(f, d, what);
    }
    results_entry_check_samples(&res);
    resfile_entry *e = &f->entries[i];
    memset(e, 0, sizeof *e);
    e->file = f;
    e->index = i;
    int rc = entry_fill(f, e, &res, d);
    results_entry_free(&res);
    if (rc == 0) {
        f->ninvalid += !strcmp(e->status, bench_status_name(BENCH_INVALID));
        f->nentries++;
    }
    return rc;
}

// Room for n more entries (a journal's, whose count is not known ahead).
static int entries_reserve(resfile *f, size_t *cap, diag *d) {
    if ((size_t)f->nentries < *cap)
        return 0;
    size_t n = *cap ? 2 * *cap : 1024;
    resfile_entry *e = realloc(f->entries, n * sizeof *e);
    if (!e) {
        char what[64];
        snprintf(what, sizeof what, "realloc %zu bytes", n * sizeof *e);
        return out_of_memory(f, d, what);
    }
    f->entries = e;
    *cap = n;
    return 0;
}

// --- the document's fields ---------------------------------------------------

static int doc_take(resfile *f, json_t *root, diag *d) {
    f->root = root;
    results_doc doc;
    if (results_doc_read(root, f->path, &doc, d) < 0)
        return -1;
    f->timestamp = doc.timestamp;
    f->tool_version = doc.tool_version;
    f->git_commit = doc.git_commit;
    f->hostname = doc.hostname;
    f->os = doc.os;
    f->cpu_model = doc.cpu_model;
    f->cores = doc.cores;
    f->threads_used = doc.threads_used;
    f->command = doc.command;
    f->calib_GBps = doc.calib_GBps;
    f->calib_GFLOPs = doc.calib_GFLOPs;
    f->gpus = doc.gpus;
    f->loadavg_start = doc.loadavg_start;
    for (int k = 0; k < doc.ndisabled; k++)
        f->disabled[f->ndisabled++] = doc.disabled[k];
    return 0;
}

// --- a journal ---------------------------------------------------------------

// The later of two lines of one case wins (a resumed run measured it
// again); the entries keep the order of the lines that won.
static int journal_dedup(resfile *f, diag *d) {
    resfile_index x;
    if (resfile_index_init(&x, (size_t)f->nentries) < 0)
        return out_of_memory(f, d, "calloc of the index");
    bool *gone = calloc((size_t)f->nentries + 1, sizeof *gone);
    if (!gone) {
        resfile_index_free(&x);
        return out_of_memory(f, d, "calloc of the index");
    }
    for (int i = 0; i < f->nentries; i++) {
        const resfile_entry *before = resfile_index_put(&x, &f->entries[i]);
        if (before)
            gone[before - f->entries] = true;
    }
    resfile_index_free(&x);
    int n = 0;
    for (int i = 0; i < f->nentries; i++)
        if (!gone[i]) {
            f->entries[n] = f->entries[i];
            f->entries[n].index = n;
            n++;
        }
    free(gone);
    f->nentries = n;
    f->ninvalid = 0;
    for (int i = 0; i < n; i++)
        f->ninvalid += !strcmp(f->entries[i].status, bench_status_name(BENCH_INVALID));
    return 0;
}

static int journal_load(resfile *f, diag *d) {
    results_journal_reader r;
    if (results_journal_open(&r, f->path, d) < 0)
        return -1;
    json_t *o;
    int k, rc = 0;
    size_t cap = 0;
    while (rc == 0 && (k = results_journal_next(&r, &o, stderr, d)) > 0) {
        if (!f->root) {
            if (!results_journal_is_header(o)) {
                rc = diag_set(d, f->path, r.line, 0, "the journal's first line is no header");
            } else if (json_object_set_new(o, "cases", json_array()) < 0) {
                rc = out_of_memory(f, d, "json_object_set_new");
            } else {
                rc = doc_take(f, o, d);
                o = NULL; // f->root owns it
            }
        } else if (results_journal_is_header(o)) {
            rc = diag_set(d, f->path, r.line, 0, "a second journal header");
        } else if ((rc = entries_reserve(f, &cap, d)) == 0) {
            rc = entry_take(f, o, d);
            if (rc < 0 && !d->line)
                d->line = r.line;
        }
        json_decref(o);
    }
    if (rc == 0 && k < 0)
        rc = -1;
    if (rc == 0 && !f->root)
        rc = diag_set(d, f->path, 0, 0, "an empty journal: no header line");
    f->cut_lines = r.cut;
    results_journal_close(&r);
    f->journal = true;
    return rc < 0 ? -1 : journal_dedup(f, d);
}

// --- a results file, one case at a time --------------------------------------
// The JSON's grammar is jansson's business: the scanner only finds where
// the "cases" array and each of its elements begin and end, by strings
// (with their escapes) and nesting. Each element, and the document without
// the elements, are then parsed by jansson, and its errors located in the
// file.

static void drop_behind(const char *b, size_t upto, size_t *dropped);

// Counting the cases: what is scanned leaves the resident set as it goes,
// not only once the whole file is.
typedef struct comma_count {
    const char *b;
    size_t commas, dropped;
} comma_count;

static void count_comma(void *ctx, size_t at) {
    comma_count *c = ctx;
    c->commas++;
    drop_behind(c->b, at, &c->dropped);
}

// Just past the value at b[p], or JSCAN_NOWHERE at the end of the file. An array
// counts in *commas the commas between its own elements.
static size_t skip_value(const char *b, size_t n, size_t p, size_t *commas) {
    comma_count c = {.b = b};
    size_t end = jscan_value(b, n, p, commas ? count_comma : NULL, &c);
    if (commas)
        *commas += c.commas;
    return end;
}

// Where the top-level "cases" array lies: its '[' at *open and ']' at
// *close, and its element count. 1 when found; 0 when the document is not
// laid out so (not an object, no such key, an error, a second "cases"):
// then jansson reads the whole file and says what is wrong; -1 when the
// file ends inside the array (*close: its end).
static int find_cases(const char *b, size_t n, size_t *open, size_t *close, size_t *count) {
    size_t p = jscan_ws(b, n, 0);
    int found = 0;
    if (p >= n || b[p] != '{')
        return 0;
    for (p = jscan_ws(b, n, p + 1); p < n && b[p] == '"';) {
        size_t k = p, v;
        if ((p = jscan_string(b, n, p)) == JSCAN_NOWHERE)
            return 0;
        bool cases = p - k == 7 && !memcmp(b + k, "\"cases\"", 7);
        p = jscan_ws(b, n, p);
        if (p >= n || b[p] != ':')
            return 0;
        p = jscan_ws(b, n, p + 1);
        if (cases && found)
            return 0;
        if (cases && p < n && b[p] == '[') {
            size_t commas = 0;
            v = skip_value(b, n, p, &commas);
            *open = p;
            *count = jscan_ws(b, n, p + 1) < n && b[jscan_ws(b, n, p + 1)] != ']' ? commas + 1 : 0;
            if (v == JSCAN_NOWHERE) {
                *close = n;
                *count = commas;
                return -1;
            }
            *close = v - 1;
            found = 1;
        } else if ((v = skip_value(b, n, p, NULL)) == JSCAN_NOWHERE) {
            return 0;
        }
        p = jscan_ws(b, n, v);
        if (p < n && b[p] == ',')
            p = jscan_ws(b, n, p + 1);
        else
            break;
    }
    if (p >= n || b[p] != '}' || jscan_ws(b, n, p + 1) != n)
        return 0;
    return found;
}

static int json_failed(resfile *f, const json_error_t *je, int line, int col, diag *d) {
    if (json_error_code(je) == json_error_out_of_memory)
        return out_of_memory(f, d, "json_loadb");
    return diag_set(d, f->path, line, col, "%s (not valid JSON; is the file complete?)", je->text);
}

// The document with an empty "cases": b[0 .. open] and b[close ..].
static int header_load(resfile *f, const char *b, size_t n, size_t open, size_t close, diag *d) {
    size_t head = open + 1, len = head + (n - close);
    char *text = malloc(len);
    if (!text)
        return out_of_memory(f, d, "malloc of the document's fields");
    memcpy(text, b, head);
    memcpy(text + head, b + close, n - close);
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!root) {
        int line = je.line, col = je.column;
        if ((size_t)je.position > head) // past the elements left out: where it is in the file
            jscan_line_col(b, (size_t)je.position - 1 - head + close, &line, &col);
        return json_failed(f, &je, line, col, d);
    }
    return doc_take(f, root, d);
}

// The mapped file's pages before b[upto] leave the resident set once there
// are DROP_BEHIND of them (the page cache keeps them; a touch maps them
// again): reading a 200 MB file then holds a few MB of it, not all.
#define DROP_BEHIND ((size_t)16 << 20)
static void drop_behind(const char *b, size_t upto, size_t *dropped) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), end = upto / page * page;
    if (end < *dropped + DROP_BEHIND)
        return;
    // advice only: where it fails, the pages stay resident and nothing else changes
    (void)madvise((char *)b + *dropped, end - *dropped, MADV_DONTNEED);
    *dropped = end;
}

// Each element of b[open .. close], parsed alone.
static int cases_load(resfile *f, const char *b, size_t open, size_t close, diag *d) {
    size_t p = jscan_ws(b, close, open + 1), dropped = 0;
    while (p < close) {
        drop_behind(b, p, &dropped);
        size_t end = skip_value(b, close, p, NULL);
        if (end == JSCAN_NOWHERE)
            end = close;
        if (f->nentries == f->ncap)
            return diag_set(d, f->path, 0, 0, "more cases than counted");
        json_error_t je;
        json_t *c = json_loadb(b + p, end - p, JSON_REJECT_DUPLICATES, &je);
        if (!c) {
            int line, col;
            jscan_line_col(b, p, &line, &col);
            if (je.line > 1)
                col = je.column;
            else
                col += je.column - 1;
            return json_failed(f, &je, line + je.line - 1, col, d);
        }
        int rc = entry_take(f, c, d);
        json_decref(c);
        if (rc < 0)
            return -1;
        p = jscan_ws(b, close, end);
        if (p < close && b[p] != ',') {
            int line, col;
            jscan_line_col(b, p, &line, &col);
            return diag_set(d, f->path, line, col,
                            "',' or ']' expected after cases[%d] (not valid JSON; is the file "
                            "complete?)",
                            f->nentries - 1);
        }
        p = jscan_ws(b, close, p + 1);
    }
    return 0;
}

static int entries_alloc(resfile *f, size_t n, diag *d) {
    if (n > INT32_MAX)
        return diag_set(d, f->path, 0, 0, "%zu cases: more than this build reads", n);
    if (n && !(f->entries = malloc(n * sizeof *f->entries))) {
        char what[64];
        snprintf(what, sizeof what, "malloc %zu bytes", n * sizeof *f->entries);
        return out_of_memory(f, d, what);
    }
    f->ncap = (int)n;
    return 0;
}

// The whole document as one tree (taken): its fields, then every case.
static int tree_load(resfile *f, json_t *root, diag *d) {
    if (doc_take(f, root, d) < 0)
        return -1;
    const json_t *cases = json_object_get(root, "cases");
    if (entries_alloc(f, json_array_size(cases), d) < 0)
        return -1;
    for (size_t i = 0; i < json_array_size(cases); i++)
        if (entry_take(f, json_array_get(cases, i), d) < 0)
            return -1;
    return 0;
}

static int json_file_load(resfile *f, const char *b, size_t n, diag *d) {
    size_t open = 0, close = 0, count = 0;
    int found = find_cases(b, n, &open, &close, &count);
    size_t dropped = 0;
    drop_behind(b, n, &dropped); // the scan touched them all
    if (found < 0) {
        int line, col;
        char k[32];
        jscan_line_col(b, n, &line, &col);
        return diag_set(d, f->path, line, col,
                        "the file ends inside \"cases\", after %s of them (not valid JSON; is "
                        "the file complete?)",
                        thousands(k, sizeof k, (long long)count));
    }
    if (found) {
        if (header_load(f, b, n, open, close, d) < 0 || entries_alloc(f, count, d) < 0)
            return -1;
        return cases_load(f, b, open, close, d);
    }
    // laid out otherwise: jansson reads it all, and says what is wrong
    json_error_t je;
    json_t *root = json_loadb(b, n, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return json_failed(f, &je, je.line, je.column, d);
    return tree_load(f, root, d);
}

static const char *not_a_file(mode_t m) {
    return S_ISDIR(m)    ? "is a directory"
           : S_ISFIFO(m) ? "is a FIFO"
           : S_ISCHR(m)  ? "is a character device"
           : S_ISBLK(m)  ? "is a block device"
           : S_ISSOCK(m) ? "is a socket"
                         : "is not a regular file";
}

int resfile_load(const char *path, resfile **out, diag *d) {
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) < 0)
        return diag_set(d, path, 0, 0, "stat: %s", strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return diag_set(d, path, 0, 0, "%s, not a results file", not_a_file(sb.st_mode));
    resfile *f = calloc(1, sizeof *f);
    if (!f || !(f->store = resfile_store_new())) {
        free(f);
        return diag_set(d, path, 0, 0, "calloc: out of memory");
    }
    snprintf(f->path, sizeof f->path, "%s", path);
    int rc;
    if (results_journal_sniff(path)) {
        rc = journal_load(f, d);
    } else {
        int fd = open(path, O_RDONLY);
        if (fd < 0) {
            resfile_free(f);
            return diag_set(d, path, 0, 0, "open: %s", strerror(errno));
        }
        size_t n = (size_t)sb.st_size;
        void *map = n ? mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
        int e = errno;
        close(fd); // read-only: nothing to lose
        if (map == MAP_FAILED) {
            resfile_free(f);
            return diag_set(d, path, 0, 0, "mmap: %s", strerror(e));
        }
        rc = json_file_load(f, map ? map : "", n, d);
        if (map)
            munmap(map, n);
    }
    if (rc < 0) {
        resfile_free(f);
        return -1;
    }
    *out = f;
    return 0;
}

int resfile_from_json(json_t *root, const char *label, resfile **out, diag *d) {
    *out = NULL;
    resfile *f = calloc(1, sizeof *f);
    if (!f || !(f->store = resfile_store_new())) {
        free(f);
        json_decref(root);
        return diag_set(d, label, 0, 0, "calloc: out of memory");
    }
    snprintf(f->path, sizeof f->path, "%s", label);
    if (tree_load(f, root, d) < 0) {
        if (!f->root) // doc_take did not take it
            json_decref(root);
        resfile_free(f);
        return -1;
    }
    *out = f;
    return 0;
}

void resfile_free(resfile *f) {
    if (!f)
        return;
    free(f->entries);
    resfile_store_free(f->store);
    json_decref(f->root);
    free(f);
}

// --- identity ----------------------------------------------------------------

bool resfile_entry_same(const resfile_entry *a, const resfile_entry *b) {
    return a->batch == b->batch && !strcmp(a->suite, b->suite) && !strcmp(a->name, b->name) &&
           !strcmp(a->mode, b->mode) && !strcmp(a->precision, b->precision) &&
           !strcmp(a->workload, b->workload) && !strcmp(a->device, b->device);
}

static uint64_t entry_hash(const resfile_entry *e) {
    const char *part[] = {e->suite, e->name, e->mode, e->precision, e->workload, e->device};
    uint64_t h = (uint64_t)e->batch * 0x9e3779b97f4a7c15ull;
    for (size_t k = 0; k < sizeof part / sizeof part[0]; k++)
        h = (h ^ str_hash(part[k])) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

int resfile_index_init(resfile_index *x, size_t n) {
    size_t slots = 16;
    while (slots < 2 * n)
        slots *= 2;
    x->mask = slots - 1;
    x->slot = calloc(slots, sizeof *x->slot);
    return x->slot ? 0 : -1;
}

const resfile_entry *resfile_index_put(resfile_index *x, const resfile_entry *e) {
    size_t k = entry_hash(e) & x->mask;
    for (; x->slot[k]; k = (k + 1) & x->mask)
        if (resfile_entry_same(x->slot[k], e)) {
            const resfile_entry *before = x->slot[k];
            x->slot[k] = e;
            return before;
        }
    x->slot[k] = e;
    return NULL;
}

const resfile_entry *resfile_index_find(const resfile_index *x, const resfile_entry *key) {
    for (size_t k = entry_hash(key) & x->mask; x->slot[k]; k = (k + 1) & x->mask)
        if (resfile_entry_same(x->slot[k], key))
            return x->slot[k];
    return NULL;
}

void resfile_index_free(resfile_index *x) {
    free(x->slot);
    x->slot = NULL;
}

void resfile_entry_label(const resfile_entry *e, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%s %s %s %s %s batch %lld", e->suite, e->name, e->mode, e->precision,
             e->workload, e->device, (long long)e->batch);
}

bool resfile_mode_compiled(const char *mode) {
    // a mode no table knows is measured against eager, as the readers always took it
    return bench_mode_baseline(mode) || bench_mode_rank(mode) < 0;
}

const char *resfile_entry_baseline(const resfile_entry *e) {
    const char *b = bench_mode_baseline(e->mode);
    return b ? b : e->compiled ? "eager" : NULL;
}

int resfile_rank(const char *axis, const char *value) {
    if (!strcmp(axis, "mode")) {
        int r = bench_mode_rank(value);
        return r >= 0 ? r : INT_MAX;
    }
    for (int a = 0; a < BENCH_AXIS_COUNT; a++)
        if (!strcmp(bench_axis_name(a), axis)) {
            int v = bench_axis_parse(a, value);
            return v >= 0 ? v : BENCH_AXIS_MAX;
        }
    return BENCH_AXIS_MAX;
}
