// safetensors files (safetensors.h): one writer, one checking reader.
#include "safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
    const char *name;
    size_t size;
} st_dtypes[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
                 {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};

size_t safetensors_dtype_size(const char *dtype) {
    for (size_t i = 0; dtype && i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (!strcmp(dtype, st_dtypes[i].name))
            return st_dtypes[i].size;
    return 0;
}

static int st_fail(char *err, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return -1;
}

// numel * size, or 0 with *ok false on a negative dimension or overflow
static size_t st_bytes(const char *dtype, int ndim, const int64_t *shape, int *ok) {
    size_t b = safetensors_dtype_size(dtype);
    *ok = b > 0 && ndim >= 0 && ndim <= ST_MAX_DIMS;
    for (int i = 0; *ok && i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] > 0 && b > SIZE_MAX / (size_t)shape[i]))
            *ok = 0;
        else
            b *= (size_t)shape[i];
    }
    return *ok ? b : 0;
}

// The header: metadata first, then each tensor in order, spaces to 8 bytes.
static char *st_header(const st_tensor *t, int n, const char *const *meta, int nmeta,
                       const char *path, size_t *len, char *err, size_t cap) {
    json_t *h = json_object(), *m = nmeta ? json_object() : NULL;
    if (!h || (nmeta && !m))
        goto oom;
    for (int i = 0; i < nmeta; i++)
        if (json_object_set_new(m, meta[2 * i], json_string(meta[2 * i + 1])) < 0)
            goto oom;
    if (m && json_object_set_new(h, "__metadata__", m) < 0) {
        m = NULL;
        goto oom;
    }
    m = NULL;
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        int ok;
        size_t b = st_bytes(t[i].dtype, t[i].ndim, t[i].shape, &ok);
        if (!ok || b != t[i].bytes || !t[i].name || !t[i].name[0] ||
            !strcmp(t[i].name, "__metadata__")) {
            json_decref(h);
            st_fail(err, cap, "%s: tensor '%s': dtype %s, %d dims, %zu bytes do not agree", path,
                    t[i].name ? t[i].name : "(null)", t[i].dtype ? t[i].dtype : "(null)",
                    t[i].ndim, t[i].bytes);
            return NULL;
        }
        if (json_object_get(h, t[i].name)) {
            json_decref(h);
            st_fail(err, cap, "%s: tensor '%s' given twice", path, t[i].name);
            return NULL;
        }
        json_t *shape = json_array(), *e = json_object();
        if (!shape || !e) {
            json_decref(shape);
            json_decref(e);
            goto oom;
        }
        for (int d = 0; d < t[i].ndim; d++)
            json_array_append_new(shape, json_integer(t[i].shape[d]));
        json_object_set_new(e, "dtype", json_string(t[i].dtype));
        json_object_set_new(e, "shape", shape);
        json_object_set_new(e, "data_offsets",
                            json_pack("[I, I]", (json_int_t)at, (json_int_t)(at + b)));
        if (json_object_set_new(h, t[i].name, e) < 0)
            goto oom;
        at += b;
    }
    char *s = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(h);
    h = NULL;
    if (!s)
        goto oom;
    size_t l = strlen(s), pad = (8 - l % 8) % 8;
    char *out = realloc(s, l + pad + 1);
    if (!out) {
        free(s);
        goto oom;
    }
    memset(out + l, ' ', pad);
    out[l + pad] = '\0';
    *len = l + pad;
    return out;
oom:
    json_decref(m);
    json_decref(h);
    st_fail(err, cap, "%s: out of memory building the header", path);
    return NULL;
}

int safetensors_write(const char *path, const st_tensor *t, int n, const char *const *meta,
                      int nmeta, char *err, size_t cap) {
    size_t len;
    char *hdr = st_header(t, n, meta, nmeta, path, &len, err, cap);
    if (!hdr)
        return -1;
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) {
        free(hdr);
        return st_fail(err, cap, "%s: path too long", path);
    }
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        free(hdr);
        return st_fail(err, cap, "%s: fopen: %s", tmp, strerror(errno));
    }
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)((uint64_t)len >> (8 * i));
    int bad = fwrite(le, 1, 8, f) != 8 || fwrite(hdr, 1, len, f) != len;
    for (int i = 0; !bad && i < n; i++)
        bad = t[i].bytes && fwrite(t[i].data, 1, t[i].bytes, f) != t[i].bytes;
    int e = errno;
    free(hdr);
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        unlink(tmp);
        return st_fail(err, cap, "%s: fwrite: %s", tmp, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        unlink(tmp);
        return st_fail(err, cap, "%s: rename from %s: %s", path, tmp, strerror(e));
    }
    return 0;
}

void safetensors_free(st_file *f) {
    if (!f)
        return;
    for (int i = 0; i < f->n; i++) {
        free((char *)f->tensors[i].name);
        free((char *)f->tensors[i].dtype);
    }
    for (int i = 0; i < 2 * f->nmeta; i++)
        free(f->meta[i]);
    free(f->meta);
    free(f->tensors);
    free(f->blob);
    free(f);
}

static int by_offset(const void *a, const void *b) {
    const st_tensor *x = a, *y = b;
    const char *bx = x->data, *by = y->data;
    return bx < by ? -1 : bx > by;
}

// One header entry into t (data set to blob-relative pointers later).
static int st_entry(const char *path, const char *name, json_t *e, const char *base, size_t nbytes,
                    st_tensor *t, char *err, size_t cap) {
    json_t *dt = json_object_get(e, "dtype"), *sh = json_object_get(e, "shape"),
           *off = json_object_get(e, "data_offsets");
    if (!json_is_object(e) || !json_is_string(dt) || !json_is_array(sh) ||
        !json_is_array(off) || json_array_size(off) != 2 ||
        !json_is_integer(json_array_get(off, 0)) || !json_is_integer(json_array_get(off, 1)))
        return st_fail(err, cap, "%s: tensor '%s': needs dtype, shape and data_offsets [begin, end]",
                       path, name);
    if (json_array_size(sh) > ST_MAX_DIMS)
        return st_fail(err, cap, "%s: tensor '%s': more than %d dimensions", path, name,
                       ST_MAX_DIMS);
    t->ndim = (int)json_array_size(sh);
    for (int d = 0; d < t->ndim; d++) {
        json_t *v = json_array_get(sh, (size_t)d);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return st_fail(err, cap, "%s: tensor '%s': shape entry %d is not a size", path, name,
                           d);
        t->shape[d] = json_integer_value(v);
    }
    int ok;
    size_t want = st_bytes(json_string_value(dt), t->ndim, t->shape, &ok);
    if (!safetensors_dtype_size(json_string_value(dt)))
        return st_fail(err, cap, "%s: tensor '%s': unknown dtype '%s'", path, name,
                       json_string_value(dt));
    json_int_t b = json_integer_value(json_array_get(off, 0)),
               en = json_integer_value(json_array_get(off, 1));
    if (!ok || b < 0 || en < b || (uint64_t)en > nbytes || (size_t)(en - b) != want)
        return st_fail(err, cap,
                       "%s: tensor '%s': data_offsets [%lld, %lld] do not hold its %zu bytes "
                       "within the %zu bytes of data",
                       path, name, (long long)b, (long long)en, want, nbytes);
    t->name = strdup(name);
    t->dtype = strdup(json_string_value(dt));
    t->data = base + b;
    t->bytes = want;
    if (!t->name || !t->dtype)
        return st_fail(err, cap, "%s: out of memory", path);
    return 0;
}

static int st_meta(const char *path, json_t *m, st_file *f, char *err, size_t cap) {
    if (!json_is_object(m))
        return st_fail(err, cap, "%s: __metadata__ is not an object", path);
    f->meta = calloc(2 * json_object_size(m) + 1, sizeof *f->meta);
    if (!f->meta)
        return st_fail(err, cap, "%s: out of memory", path);
    const char *k;
    json_t *v;
    json_object_foreach(m, k, v) {
        if (!json_is_string(v))
            return st_fail(err, cap, "%s: __metadata__ '%s' is not a string", path, k);
        f->meta[2 * f->nmeta] = strdup(k);
        f->meta[2 * f->nmeta + 1] = strdup(json_string_value(v));
        f->nmeta++;
        if (!f->meta[2 * f->nmeta - 2] || !f->meta[2 * f->nmeta - 1])
            return st_fail(err, cap, "%s: out of memory", path);
    }
    return 0;
}

static int st_parse(const char *path, st_file *f, char *err, size_t cap) {
    const unsigned char *p = f->blob;
    if (f->size < 8)
        return st_fail(err, cap, "%s: %zu bytes, shorter than the 8-byte header length", path,
                       f->size);
    uint64_t n = 0;
    for (int i = 0; i < 8; i++)
        n |= (uint64_t)p[i] << (8 * i);
    if (n < 2 || n > f->size - 8)
        return st_fail(err, cap, "%s: header length %llu does not fit the file's %zu bytes", path,
                       (unsigned long long)n, f->size);
    json_error_t je;
    json_t *h = json_loadb((const char *)p + 8, (size_t)n, 0, &je);
    if (!json_is_object(h)) {
        json_decref(h);
        return st_fail(err, cap, "%s: header: %s", path, h ? "not a JSON object" : je.text);
    }
    const char *base = (const char *)p + 8 + n;
    size_t nbytes = f->size - 8 - (size_t)n;
    f->tensors = calloc(json_object_size(h) + 1, sizeof *f->tensors);
    int rc = f->tensors ? 0 : st_fail(err, cap, "%s: out of memory", path);
    const char *k;
    json_t *v;
    json_object_foreach(h, k, v) {
        if (rc < 0)
            break;
        if (!strcmp(k, "__metadata__"))
            rc = st_meta(path, v, f, err, cap);
        else if ((rc = st_entry(path, k, v, base, nbytes, &f->tensors[f->n], err, cap)) == 0)
            f->n++;
    }
    json_decref(h);
    if (rc < 0)
        return -1;
    // packed in order without holes: sorted by start, each ends where the next begins
    st_tensor *s = malloc((size_t)(f->n ? f->n : 1) * sizeof *s);
    if (!s)
        return st_fail(err, cap, "%s: out of memory", path);
    memcpy(s, f->tensors, (size_t)f->n * sizeof *s);
    qsort(s, (size_t)f->n, sizeof *s, by_offset);
    const char *at = base;
    for (int i = 0; i < f->n && rc == 0; i++) {
        if ((const char *)s[i].data != at)
            rc = st_fail(err, cap, "%s: tensor '%s' starts at byte %td, where %td was expected "
                                   "(tensors overlap or leave a hole)",
                         path, s[i].name, (const char *)s[i].data - base, at - base);
        at += s[i].bytes;
    }
    if (rc == 0 && at != base + nbytes)
        rc = st_fail(err, cap, "%s: %td bytes of data after the last tensor", path,
                     base + nbytes - at);
    free(s);
    return rc;
}

int safetensors_read(const char *path, st_file **out, char *err, size_t cap) {
    *out = NULL;
    st_file *f = calloc(1, sizeof *f);
    if (!f)
        return st_fail(err, cap, "%s: out of memory", path);
    FILE *fp = fopen(path, "rb");
    struct stat st;
    if (!fp) {
        free(f);
        return st_fail(err, cap, "%s: fopen: %s", path, strerror(errno));
    }
    errno = 0;
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = errno;
        fclose(fp);
        free(f);
        return st_fail(err, cap, "%s: %s", path, e ? strerror(e) : "not a regular file");
    }
    f->size = (size_t)st.st_size;
    f->blob = malloc(f->size ? f->size : 1);
    int rc = 0;
    if (!f->blob)
        rc = st_fail(err, cap, "%s: out of memory for %zu bytes", path, f->size);
    else if (fread(f->blob, 1, f->size, fp) != f->size)
        rc = st_fail(err, cap, "%s: fread: %s", path, ferror(fp) ? strerror(errno) : "short read");
    fclose(fp);
    if (rc == 0)
        rc = st_parse(path, f, err, cap);
    if (rc < 0) {
        safetensors_free(f);
        return -1;
    }
    *out = f;
    return 0;
}

const st_tensor *safetensors_find(const st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->tensors[i].name, name))
            return &f->tensors[i];
    return NULL;
}

const char *safetensors_meta(const st_file *f, const char *key) {
    for (int i = 0; i < f->nmeta; i++)
        if (!strcmp(f->meta[2 * i], key))
            return f->meta[2 * i + 1];
    return NULL;
}
