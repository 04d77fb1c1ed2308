// `tcbench check`: load and build everything a file describes (check.h).
#include "check.h"
#include "plan.h"

#include "model/yamldoc.h"

#include <stdlib.h>
#include <string.h>

// Builds every case of the suite loaded with size (NULL: none). A case
// whose model names a layer not built yet is said on notes, once (at the
// default size), and is no error.
static int check_suite_size(const char *path, const char *size, FILE *notes, diag *d) {
    suite *s;
    if (suite_load(path, size, &s, d) < 0)
        return -1;
    for (int i = 0; i < s->ncases; i++) {
        modeldef *md;
        model *m;
        int rc = bench_case_build(&s->cases[i], s->cases[i].batch, true, &md, &m, d);
        if (rc < 0) {
            suite_free(s);
            return -1;
        }
        if (rc > 0 && !size && notes) {
            char why[1100];
            diag_format(d, why, sizeof why);
            fprintf(notes, "%s: case '%s': %s: %s\n", path, s->cases[i].name,
                    bench_status_name(BENCH_MODEL_FAIL_TO_LOAD), why);
        }
        *d = (diag){0};
        model_free(m);
        modeldef_free(md);
    }
    suite_free(s);
    return 0;
}

// Size names some case defines that an earlier case did not.
static bool size_is_new(const yd_node *cases, int ci, const char *name) {
    for (int i = 0; i < ci; i++) {
        const yd_node *sz = yd_get(cases->vals[i], "sizes");
        if (sz && yd_get(sz, name))
            return false;
    }
    return true;
}

static int check_suite(const char *path, const yd_node *cases, FILE *notes, diag *d) {
    if (check_suite_size(path, NULL, notes, d) < 0)
        return -1;
    // suite_load accepted the file, so cases is a list of mappings here
    for (int i = 0; i < cases->n; i++) {
        const yd_node *sz = yd_get(cases->vals[i], "sizes");
        for (int k = 0; sz && sz->kind == YD_MAP && k < sz->n; k++)
            if (size_is_new(cases, i, sz->keys[k]->str) &&
                check_suite_size(path, sz->keys[k]->str, notes, d) < 0)
                return -1;
    }
    return 0;
}

static int check_model(const char *path, FILE *notes, diag *d) {
    modeldef *md;
    model *m;
    if (modeldef_load(path, &md, d) < 0)
        return -1;
    if (modeldef_unbuilt(md, d)) {
        char why[1100];
        diag_format(d, why, sizeof why);
        if (notes)
            fprintf(notes, "%s: %s\n", bench_status_name(BENCH_MODEL_FAIL_TO_LOAD), why);
        *d = (diag){0};
        modeldef_free(md);
        return 0;
    }
    // the file's rightness, not this machine's memory: no values are made
    int rc = modeldef_build(md, NULL, 0, 2, &(modeldef_opts){.graph_only = true}, &m, d);
    if (rc == 0)
        model_free(m);
    modeldef_free(md);
    return rc;
}

int bench_check_file(const char *path, FILE *notes, diag *d) {
    yd_doc *doc;
    // a file that is not YAML at all gets yd_load's located error
    if (yd_load(path, &doc, d) < 0)
        return -1;
    const yd_node *cases =
        doc->root && doc->root->kind == YD_MAP ? yd_get(doc->root, "cases") : NULL;
    int rc = cases ? check_suite(path, cases, notes, d) : check_model(path, notes, d);
    yd_free(doc);
    return rc;
}
