// st_dump: lists safetensors files through the C reader
// (engine/results/safetensors.h) in scripts/safetensors_read.py's format,
// for tests/weights_cli.sh to compare the two readers.
//
//   st_dump FILE...
#include "results/safetensors.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_data(const void *a, const void *b) {
    const char *x = (*(const st_tensor *const *)a)->data, *y = (*(const st_tensor *const *)b)->data;
    return x < y ? -1 : x > y;
}

static int by_key(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
    for (int a = 1; a < argc; a++) {
        st_file *f;
        char err[600];
        if (safetensors_read(argv[a], &f, err, sizeof err) < 0) {
            fprintf(stderr, "%s\n", err);
            return 2;
        }
        printf("# %s: %d tensors\n", argv[a], f->n);
        char **keys = malloc((size_t)(f->nmeta + 1) * sizeof *keys);
        if (!keys)
            return 2;
        for (int i = 0; i < f->nmeta; i++)
            keys[i] = f->meta[2 * i];
        qsort(keys, (size_t)f->nmeta, sizeof *keys, by_key);
        for (int i = 0; i < f->nmeta; i++)
            printf("# %s=%s\n", keys[i], safetensors_meta(f, keys[i]));
        free(keys);
        const st_tensor **order = malloc((size_t)(f->n + 1) * sizeof *order);
        if (!order)
            return 2;
        for (int i = 0; i < f->n; i++)
            order[i] = &f->tensors[i];
        qsort(order, (size_t)f->n, sizeof *order, by_data); // data order, as the script's
        for (int i = 0; i < f->n; i++) {
            const st_tensor *t = order[i];
            uint64_t h = 0xcbf29ce484222325ull;
            for (size_t k = 0; k < t->bytes; k++)
                h = (h ^ ((const unsigned char *)t->data)[k]) * 0x100000001b3ull;
            printf("%s %s [", t->name, t->dtype);
            for (int d = 0; d < t->ndim; d++)
                printf("%s%lld", d ? "," : "", (long long)t->shape[d]);
            printf("] %zu %016llx\n", t->bytes, (unsigned long long)h);
        }
        free(order);
        safetensors_free(f);
    }
    return 0;
}
