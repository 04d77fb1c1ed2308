// compile_plan_memory (compile.h): the compile passes up to the memory plan
// (compile_passes, the same ones compile_model runs), then the figures the
// runtime would report, read off the plan.
#include "compile_internal.h"

#include <stdio.h>
#include <string.h>

int compile_plan_memory(const model *m, const compile_opts *o, compile_memory_figures *out,
                        char *err, size_t cap) {
    memset(out, 0, sizeof *out);
    cprog p = {0};
    if (compile_passes(&p, m, o) < 0) {
        snprintf(err, cap, "%s", p.err);
        compile_prog_free(&p);
        return -1;
    }
    out->sources_bytes = compile_sources_bytes(m->g);
    out->arena_bytes = p.arena_bytes;
    out->peak_bytes = out->sources_bytes + out->arena_bytes;
    out->kernels = p.ngroups;
    // compile_model's constants: one tensor per filled node it keeps
    for (int v = 0; v < p.g->n; v++) {
        const graph_node *n = &p.g->nodes[v];
        if (p.info[v].store == CS_CONST && n->ndim <= TENSOR_MAX_DIMS)
            out->const_bytes += tensor_mem_round(graph_node_bytes(n));
    }
    compile_prog_free(&p);
    return 0;
}
