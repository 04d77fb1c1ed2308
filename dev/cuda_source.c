// Prints the CUDA C that the compiled mode would build for a model, with no
// GPU: the same passes as cuda_program_new, then compile_codegen_cuda.
//
//   build/dev/cuda_source models/gpt2.yaml [amp|fp32] [train] [key=value ...] > gpt2.cu
//
// The key=value pairs override the model's params (the smoke suite's sizes,
// for example vocab=512 seq=32 d_model=64 layers=2 heads=4); the batch is 2.
#include "autodiff/autograd.h"
#include "compile/codegen_cuda.h"
#include "compile/compile_internal.h"
#include "model/model_prepare.h"
#include "model/modeldef.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.yaml [amp|fp32] [train] [key=value ...]\n", argv[0]);
        return 2;
    }
    modeldef *md;
    diag d = {0};
    char err[1024];
    if (modeldef_load(argv[1], &md, &d) < 0) {
        diag_format(&d, err, sizeof err);
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    model_prep mp = {0};
    train_opts to = train_opts_default();
    modeldef_override ov[32];
    int nov = 0;
    for (int i = 2; i < argc && nov < 32; i++) {
        char *eq = strchr(argv[i], '=');
        if (strcmp(argv[i], "amp") == 0)
            mp.amp = DT_F16;
        else if (strcmp(argv[i], "train") == 0)
            mp.train = &to;
        else if (eq) {
            *eq = 0;
            ov[nov++] = (modeldef_override){argv[i], eq + 1, "argv", i, 1};
        }
    }
    model *m;
    if (model_prepare(md, ov, nov, 2, &mp, &m, err, sizeof err) != MODEL_PREP_DONE) {
        fprintf(stderr, "model_prepare: %s\n", err);
        return 1;
    }
    cprog *p = calloc(1, sizeof *p);
    if (!p)
        return 1;
    if (compile_cuda_passes(p, m, !getenv("TCBENCH_DISABLE_FUSION"), NULL) < 0) {
        fprintf(stderr, "passes: %s\n", p->err);
        return 1;
    }
    char *cu = compile_codegen_cuda(p);
    if (!cu) {
        fprintf(stderr, "codegen: %s\n", p->err);
        return 1;
    }
    fputs(cu, stdout);
    free(cu);
    compile_prog_free(p);
    free(p);
    model_free(m);
    modeldef_free(md);
    return 0;
}
