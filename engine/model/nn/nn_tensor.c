// Layers a model composes its own blocks from, where no module of the layer
// library fits: the product of two tensors (matmul), a learned tensor of any
// shape (parameter) and the table of relative sinusoidal positions
// (relative_sinusoid). XLNet's relative attention is written with them
// (models/hf/xlnet_lm.yaml), as its class writes it with einsums.
#include "nn_internal.h"

#include <stdio.h>

#define X0 nn_in(x, 0)

int nn_matmul(nn_ctx *x) {
    // (..., M, K) @ (..., K, N) -> (..., M, N); the batch dims broadcast
    const graph_node *a = nn_node(x, X0), *b = nn_node(x, nn_in(x, 1));
    if (!dtype_is_float(a->dtype) || !dtype_is_float(b->dtype))
        return nn_fail(x, NULL, "matmul multiplies float tensors, got %s and %s",
                       dtype_name(a->dtype), dtype_name(b->dtype));
    return nn_emit(x, graph_binary(x->g, OP_MATMUL, X0, nn_in(x, 1)));
}

int nn_parameter(nn_ctx *x) {
    // a learned tensor `shape`, N(0, std^2); the input only places the layer
    // in the chain (XLNet's r_w_bias (H, dh), or one its forward never reads)
    int64_t s[TENSOR_MAX_DIMS];
    int n = nn_list(x, "shape", TENSOR_MAX_DIMS, s);
    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (s[i] <= 0)
            return nn_fail(x, "shape", "parameter: dimension %d is %lld; sizes are positive", i,
                           (long long)s[i]);
    double std = nn_float(x, "std", 0.02);
    if (!(std >= 0))
        return nn_fail(x, "std", "parameter: std must be 0 or more, got %g", std);
    return nn_emit(x, nn_param(x, "weight", n, s, INIT_NORMAL, std));
}

int nn_relative_sinusoid(nn_ctx *x) {
    // (..., T, D) -> (2T, dim): row p holds relative position T - p (T down
    // to -T + 1), [sin(pos f) | cos(pos f)] with f_i = 10000^(-2i / dim), the
    // table of Transformer-XL and XLNet for a sequence without memory
    const graph_node *in = nn_node(x, X0);
    if (in->ndim < 2)
        return nn_fail(x, NULL, "relative_sinusoid needs (..., T, D) input");
    int64_t T = in->shape[in->ndim - 2], dim = nn_int(x, "dim", in->shape[in->ndim - 1]);
    if (dim <= 0 || dim % 2)
        return nn_fail(x, "dim", "relative_sinusoid: dim must be positive and even, got %lld",
                       (long long)dim);
    char name[96];
    snprintf(name, sizeof name, "relative_sinusoid.%lldx%lld", (long long)(2 * T), (long long)dim);
    return nn_emit(
        x, nn_shared_buffer(x, name, DT_F32, 2, (int64_t[]){2 * T, dim}, INIT_REL_SINUSOID, 10000));
}
