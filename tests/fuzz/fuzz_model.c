// The model loader (engine/model/modeldef.h) on any bytes: load (the YAML
// tree, keys, layer names, expression syntax) and, when that succeeds,
// build at batch 1 with the file's own parameters (expressions evaluated,
// layers expanded, every shape inferred; no tensor data is allocated).
#include "fuzz_input.h"
#include "model/modeldef.h"

#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    int fd = fuzz_input_open(data, size, path, sizeof path);
    modeldef *md;
    diag d;
    if (modeldef_load(path, &md, &d) == 0) {
        model *m;
        if (modeldef_build(md, NULL, 0, 1, &(modeldef_opts){0}, &m, &d) == 0)
            model_free(m);
        modeldef_free(md);
    }
    close(fd);
    return 0;
}
