// The constant tables of the vision transformers' layers against timm's
// own (timm 1.0, torch 2): LeViT's attention-bias offsets
// (levit_attention_bias, INIT_LEVIT_OFFSET) for a 2x2 grid and for the
// stride-2 queries of a 3x3 one (AttentionDownsample), and ConViT's
// rel_indices (gpsa, INIT_CONVIT_REL) for a 2x2 grid of patches, read from
// built models' buffers.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "model/model.h"
#include "model/modeldef.h"
#include "test_util.h"

// the first buffer whose name starts with prefix, its values initialized
static const void *buffer(model *m, const char *prefix, int64_t *numel) {
    for (int i = 0; i < m->g->n; i++) {
        const graph_node *n = &m->g->nodes[i];
        if (n->op == OP_BUFFER && n->name && strncmp(n->name, prefix, strlen(prefix)) == 0) {
            *numel = tensor_numel(m->values[i]);
            return tensor_data(m->values[i]);
        }
    }
    fail_msg("no buffer named %s...", prefix);
    return NULL;
}

static void test_levit_offsets(void **state) {
    (void)state;
    // Attention(resolution=2).attention_bias_idxs and
    // AttentionDownsample(resolution=3, stride=2).attention_bias_idxs
    static const int32_t grid2[] = {0, 1, 2, 3, 1, 0, 3, 2, 2, 3, 0, 1, 3, 2, 1, 0};
    static const int32_t down3[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 2, 1, 0, 5, 4, 3, 8, 7, 6,
                                    6, 7, 8, 3, 4, 5, 0, 1, 2, 8, 7, 6, 5, 4, 3, 2, 1, 0};
    static const char *text = "name: lab\n"
                              "inputs: {x: {shape: [2, 4, 8]}}\n"
                              "body:\n"
                              "  - levit_attention_bias: {heads: 2, resolution: 2, input: x}\n"
                              "  - levit_attention_bias: {heads: 2, resolution: 3, stride: 2,\n"
                              "                           input: x, as: down}\n";
    model *m = build_model_text(text, 2);
    assert_int_equal(model_init_values(m, 1), 0);
    int64_t n;
    const int32_t *v = buffer(m, "levit_offsets.2.1", &n);
    assert_int_equal(n, 16);
    assert_memory_equal(v, grid2, sizeof grid2);
    v = buffer(m, "levit_offsets.3.2", &n);
    assert_int_equal(n, 36);
    assert_memory_equal(v, down3, sizeof down3);
    // the output: (heads, Nq, Nk)
    const graph_node *out = &m->g->nodes[m->g->n - 1];
    assert_int_equal(out->ndim, 3);
    assert_int_equal(out->shape[0], 2);
    assert_int_equal(out->shape[1], 4);
    assert_int_equal(out->shape[2], 9);
    model_free(m);
}

static void test_convit_rel(void **state) {
    (void)state;
    // GPSA.get_rel_indices(4): (1, 4, 4, 3) of [dx, dy, dx^2 + dy^2]
    static const float rel[] = {0, 0, 0,  1, 0,  1,  0, 1, 1,  1,  1,  2, -1, 0, 1, 0,
                                0, 0, -1, 1, 2,  0,  1, 1, 0,  -1, 1,  1, -1, 2, 0, 0,
                                0, 1, 0,  1, -1, -1, 2, 0, -1, 1,  -1, 0, 1,  0, 0, 0};
    static const char *text = "name: gp\n"
                              "inputs: {x: {shape: [2, 4, 8]}}\n"
                              "body:\n"
                              "  - gpsa: {heads: 2}\n";
    model *m = build_model_text(text, 2);
    assert_int_equal(model_init_values(m, 1), 0);
    int64_t n;
    const float *v = buffer(m, "convit_rel.4", &n);
    assert_int_equal(n, 48);
    assert_memory_equal(v, rel, sizeof rel);
    model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levit_offsets),
        cmocka_unit_test(test_convit_rel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
