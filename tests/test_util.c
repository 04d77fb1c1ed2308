// Helpers the cmocka tests share (test_util.h).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/modeldef.h"
#include "test_util.h"

#include <unistd.h>

suite *load_smoke_suite(void) {
    const char *root = getenv("TCBENCH_SOURCE_DIR");
    assert_non_null(root);
    char path[600];
    snprintf(path, sizeof path, "%s/suites/smoke.yaml", root);
    suite *s;
    diag d;
    if (suite_load(path, NULL, &s, &d) < 0)
        fail_msg("%s:%d:%d: %s", path, d.line, d.col, d.msg);
    return s;
}

model *build_model_text(const char *text, int64_t batch) {
    const char *tmp = getenv("TMPDIR");
    char path[512];
    snprintf(path, sizeof path, "%s/tcbench_model_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
    modeldef *md;
    model *m = NULL;
    diag d = {0};
    int rc = modeldef_load(path, &md, &d);
    if (rc == 0) {
        modeldef_build(md, NULL, 0, batch, &(modeldef_opts){0}, &m, &d);
        modeldef_free(md);
    }
    assert_int_equal(unlink(path), 0);
    if (!m)
        fail_msg("%d:%d: %s", d.line, d.col, d.msg);
    return m;
}

int model_node(const model *m, enum op op, const char *name) {
    for (int i = 0; i < m->g->n; i++)
        if (m->g->nodes[i].op == op && m->g->nodes[i].name && !strcmp(m->g->nodes[i].name, name))
            return i;
    fail_msg("no node %s", name);
    return -1;
}

const float *model_param_f32(const model *m, const char *name) {
    return tensor_f32(m->values[model_node(m, OP_PARAM, name)]);
}
