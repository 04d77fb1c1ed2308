// One device context and named device values for several executors
// (cuda_share.h).
#include "cuda_share.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct share_entry {
    char *name; // the key: op, name, dtype and shape (dev's)
    enum op op;
    tensor *dev;
} share_entry;

struct cuda_share {
    cuda_ctx c;
    bool ctx_ok;
    share_entry *v;
    int nv, cap;
};

int cuda_share_new(cuda_share **out, char *err, size_t cap) {
    *out = NULL;
    char why[400];
    if (cuda_probe_here(why, sizeof why) < 0) {
        snprintf(err, cap, "%s", why);
        return -1;
    }
    cuda_share *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, cap, "calloc: out of host memory");
        return -1;
    }
    s->ctx_ok = true;
    if (cuda_ctx_init(&s->c, cuda_device_index(), false) < 0) {
        snprintf(err, cap, "CUDA set-up: %s", s->c.err);
        cuda_share_free(s);
        return -1;
    }
    *out = s;
    return 0;
}

void cuda_share_free(cuda_share *s) {
    if (!s)
        return;
    if (s->ctx_ok) {
        for (int i = 0; i < s->nv; i++)
            cuda_tensor_free(&s->c, s->v[i].dev);
        cuda_ctx_free(&s->c);
    }
    for (int i = 0; i < s->nv; i++)
        free(s->v[i].name);
    free(s->v);
    free(s);
}

cuda_ctx *cuda_share_ctx(cuda_share *s) { return &s->c; }

bool cuda_share_lends(const model *m, int i) {
    const graph_node *n = &m->g->nodes[i];
    return n->name && (n->op == OP_PARAM || n->op == OP_BUFFER);
}

static bool same(const share_entry *e, const graph_node *n) {
    const tensor *d = e->dev;
    return e->op == n->op && !strcmp(e->name, n->name) && d->dtype == n->dtype &&
           d->ndim == n->ndim && !memcmp(d->shape, n->shape, (size_t)n->ndim * sizeof *n->shape);
}

tensor *cuda_share_value(cuda_share *s, const model *m, int i, char *err, size_t cap) {
    const graph_node *n = &m->g->nodes[i];
    for (int k = 0; k < s->nv; k++)
        if (same(&s->v[k], n))
            return s->v[k].dev;
    if (!m->values || !m->values[i]) {
        snprintf(err, cap, "%s %%%d (%s) has no value: call model_init_values first",
                 op_name(n->op), i, n->name);
        return NULL;
    }
    if (s->nv == s->cap) {
        int c = s->cap ? 2 * s->cap : 64;
        share_entry *v = realloc(s->v, (size_t)c * sizeof *v);
        if (!v) {
            snprintf(err, cap, "realloc: out of host memory");
            return NULL;
        }
        s->v = v, s->cap = c;
    }
    char *name = strdup(n->name);
    tensor *d = name ? cuda_tensor_upload(&s->c, m->values[i]) : NULL;
    if (!d) {
        snprintf(err, cap, "copying %s to the GPU: %s", n->name,
                 name ? s->c.err : "out of host memory");
        free(name);
        return NULL;
    }
    s->v[s->nv++] = (share_entry){name, n->op, d};
    return d;
}

int cuda_share_send(cuda_ctx *c, tensor *dev, const tensor *host, char *err, size_t cap) {
    if (!tensor_is_contiguous(host)) { // a staged contiguous copy, synchronized
        if (cuda_tensor_copy_in(c, dev, host) < 0)
            return snprintf(err, cap, "%s", c->err), -1;
        return 0;
    }
    CUDA_TRY(err, cap,
             cudaMemcpyAsync(tensor_data(dev), tensor_data(host), tensor_nbytes(host),
                             cudaMemcpyHostToDevice, c->stream));
    return 0;
}
