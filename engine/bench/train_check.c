// The training workload's accuracy check (train_check.h): every executor
// runs two optimizer steps from the same starting values; the loss and
// every gradient of the second step, and every parameter after it, are
// compared with eager's and with the fp64 reference's two steps.
#include "train_check.h"

#include "accuracy.h"
#include "core/op_rules.h"
#include "ref/ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int train_snapshot_take(const model *m, train_snapshot *s) {
    const graph *g = m->g;
    s->n = g->n;
    s->data = calloc((size_t)(g->n ? g->n : 1), sizeof *s->data);
    if (!s->data)
        return -1;
    for (int i = 0; i < g->n; i++) {
        if (op_kind(g->nodes[i].op) != OPK_SOURCE || !m->values[i])
            continue;
        size_t b = tensor_numel(m->values[i]) * dtype_size(m->values[i]->dtype);
        if (!(s->data[i] = malloc(b ? b : 1))) {
            train_snapshot_free(s);
            return -1;
        }
        memcpy(s->data[i], tensor_data(m->values[i]), b);
    }
    return 0;
}

void train_snapshot_restore(const model *m, const train_snapshot *s) {
    for (int i = 0; i < s->n; i++)
        if (s->data[i])
            memcpy(tensor_data(m->values[i]), s->data[i],
                   tensor_numel(m->values[i]) * dtype_size(m->values[i]->dtype));
}

void train_snapshot_free(train_snapshot *s) {
    for (int i = 0; s->data && i < s->n; i++)
        free(s->data[i]);
    free(s->data);
    s->data = NULL;
}

uint64_t train_check_steps(bool amp) {
    const char *e = getenv("TCBENCH_CHECK_STEPS");
    long def = amp ? 1 : 2, v = e ? strtol(e, NULL, 10) : def;
    return v >= 1 && v <= 100 ? (uint64_t)v : (uint64_t)def;
}

int train_check_items(const model *m) { return 2 * m->g->noutputs - 1; }

int train_check_fill(const model *m, tensor *const *outputs, tensor **items) {
    const graph *g = m->g;
    for (int k = 0; k < g->noutputs; k++)
        items[k] = outputs[k];
    for (int k = 1; k < g->noutputs; k++) {
        int p = autograd_param_of_output(g, k);
        if (p < 0 || !(items[g->noutputs + k - 1] = tensor_contiguous(m->values[p])))
            return -1;
    }
    return 0;
}

static double inf_norm_t(const tensor *t) {
    tensor *c = tensor_contiguous(t);
    double m = 0;
    if (!c)
        return NAN;
    const float *v = tensor_f32(c);
    for (int64_t i = 0; i < tensor_numel(c); i++)
        m = fabs(v[i]) > m || v[i] != v[i] ? fabs(v[i]) : m;
    tensor_free(c);
    return m;
}

static double inf_norm_d(const double *v, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        m = fabs(v[i]) > m || v[i] != v[i] ? fabs(v[i]) : m;
    return m;
}

int train_check_skips(const model *m, double *const *ref, tensor *const *eitems, bool *skip) {
    const graph *g = m->g;
    int nout = g->noutputs, n = 0;
    double *norm = calloc((size_t)nout, sizeof *norm), top = 0;
    if (!norm)
        return -1;
    for (int k = 1; k < nout; k++) {
        norm[k] = ref ? inf_norm_d(ref[k], graph_node_numel(&g->nodes[g->outputs[k]]))
                      : inf_norm_t(eitems[k]);
        top = norm[k] > top ? norm[k] : top;
    }
    for (int k = 0; k < 2 * nout - 1; k++)
        skip[k] = false;
    for (int k = 1; k < nout; k++)
        if (norm[k] <= 1e-5 * top) { // also true for 0: a parameter nothing trains
            skip[nout + k - 1] = true;
            n++;
        }
    free(norm);
    return n;
}

static int sgn(double x) { return (x > 0) - (x < 0); }

// Parameter item p's elements where grad's sign differs from yard's (or,
// with yard2, from either) take src's value (src_d when not NULL).
static int64_t mask_item(tensor *p, const tensor *grad, const tensor *yard, const double *yard_d,
                         const tensor *yard2, const tensor *src, const double *src_d) {
    if (p->dtype != DT_F32 || !tensor_is_contiguous(p))
        return 0;
    float *w = tensor_f32(p);
    int64_t n = tensor_numel(p), set = 0;
    for (int64_t i = 0; i < n; i++) {
        int s = sgn(tensor_get_flat(grad, i));
        bool flip = s != sgn(yard_d ? yard_d[i] : tensor_get_flat(yard, i));
        flip |= yard2 && s != sgn(tensor_get_flat(yard2, i));
        if (!flip)
            continue;
        w[i] = (float)(src_d ? src_d[i] : tensor_get_flat(src, i));
        set++;
    }
    return set;
}

int64_t train_mask_eager(const model *m, tensor *const *eitems, double *const *ref) {
    int nout = m->g->noutputs;
    int64_t set = 0;
    for (int k = 1; k < nout; k++)
        set += mask_item(eitems[nout + k - 1], eitems[k], NULL, ref[k], NULL, NULL,
                         ref[nout + k - 1]);
    return set;
}

int64_t train_mask_mode(const model *m, tensor *const *xitems, tensor *const *eitems,
                        double *const *ref) {
    int nout = m->g->noutputs;
    int64_t set = 0;
    for (int k = 1; k < nout; k++)
        set += mask_item(xitems[nout + k - 1], xitems[k], eitems[k], ref ? ref[k] : NULL,
                         ref ? eitems[k] : NULL, eitems[nout + k - 1], NULL);
    return set;
}

double train_item_error(const tensor *x, const double *ref, double tol) {
    bench_accuracy_out o;
    bench_accuracy_compare(x, ref, &o);
    double n = (double)tensor_numel(x), r2 = 0;
    for (int64_t i = 0; i < (int64_t)n; i++)
        r2 += ref[i] * ref[i];
    double floor = tol * sqrt(n), rl = sqrt(r2);
    return o.rmse * sqrt(n) / (rl > floor ? rl : floor);
}

int train_reference_rounded(const model *m, const train_snapshot *s0, enum dtype low, uint64_t steps,
                            double **items, char *err, size_t cap) {
    const graph *g = m->g;
    // from the step's starting values: the executors that ran before this
    // trained m's parameters in place
    train_snapshot_restore(m, s0);
    for (int i = 0; i < g->n; i++) {
        const graph_node *n = &g->nodes[i];
        tensor *t = m->values[i];
        if ((n->op != OP_PARAM && n->op != OP_INPUT) || !t || t->dtype != DT_F32 ||
            !tensor_is_contiguous(t))
            continue;
        float *f = tensor_f32(t);
        for (int64_t e = 0; e < tensor_numel(t); e++) {
            if (low != DT_F32) {
                f[e] = (float)op_cast_value(low, f[e]);
                continue;
            }
            // one ulp up or down, a fixed pattern (a hash of node and index)
            uint64_t h = ((uint64_t)i << 40 ^ (uint64_t)e) * 0x9E3779B97F4A7C15ull;
            if (f[e] != 0)
                f[e] = nextafterf(f[e], h >> 63 ? INFINITY : -INFINITY);
        }
    }
    int rc = train_reference(m, steps, items, err, cap);
    train_snapshot_restore(m, s0);
    return rc;
}

void train_check_free_items(int n, tensor **items) {
    for (int i = 0; i < n; i++) {
        tensor_free(items[i]);
        items[i] = NULL;
    }
}

int train_reference(const model *m, uint64_t steps, double **items, char *err, size_t cap) {
    const graph *g = m->g;
    ref_session *s = ref_session_new(m, err, cap);
    if (!s)
        return -1;
    int rc = -1;
    for (uint64_t step = 1; step <= steps; step++) {
        for (int k = 0; k < g->noutputs; k++) {
            free(items[k]);
            items[k] = NULL;
        }
        if (ref_session_run(s, step, items, err, cap) < 0)
            goto done;
    }
    for (int k = 1; k < g->noutputs; k++) {
        int p = autograd_param_of_output(g, k);
        size_t b = (size_t)graph_node_numel(&g->nodes[p]) * sizeof(double);
        if (!(items[g->noutputs + k - 1] = malloc(b ? b : 1))) {
            snprintf(err, cap, "out of memory copying the reference's parameters");
            goto done;
        }
        memcpy(items[g->noutputs + k - 1], ref_session_source(s, p), b);
    }
    rc = 0;
done:
    ref_session_free(s);
    return rc;
}

// "the gradient of blocks.0.attn.q.weight" for item k.
void train_item_name(const model *m, int k, char *buf, size_t cap) {
    const graph *g = m->g;
    if (k == 0) {
        snprintf(buf, cap, "the loss");
        return;
    }
    if (k < g->noutputs) {
        int p = autograd_param_of_output(g, k);
        snprintf(buf, cap, "the gradient of %s",
                 p >= 0 && g->nodes[p].name ? g->nodes[p].name : "a parameter");
        return;
    }
    int p = autograd_param_of_output(g, k - g->noutputs + 1);
    snprintf(buf, cap, "%s after two steps", p >= 0 && g->nodes[p].name ? g->nodes[p].name : "a parameter");
}
