// Multi-turn chat's time to first token a round, with the earlier rounds'
// KV cache kept and without (each round prefills the whole dialogue):
// llama at suites/generate.yaml's cpu size, eager and compiled, medians of
// REPEAT runs. Usage: dev/chat [ROUNDS [TURN [GEN [REPEAT]]]] (4 64 32 5),
// from the source tree (models/llama.yaml), OMP_NUM_THREADS as wanted.
#include "bench/axes.h"
#include "bench/generate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OV(k, v) {k, v, "dev/chat", 1, 1}
static const modeldef_override cpu_size[] = {OV("vocab", "8192"), OV("seq", "1024"),
                                             OV("d_model", "256"), OV("layers", "4"),
                                             OV("heads", "8"),     OV("kv_heads", "2"),
                                             OV("ffn", "688")};

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int64_t R = argc > 1 ? atoll(argv[1]) : 4, U = argc > 2 ? atoll(argv[2]) : 64;
    int64_t G = argc > 3 ? atoll(argv[3]) : 32;
    int rep = argc > 4 ? atoi(argv[4]) : 5;
    if (R < 1 || R > 64 || U < 1 || G < 1 || rep < 1 || rep > 100) {
        fprintf(stderr, "usage: dev/chat [ROUNDS [TURN [GEN [REPEAT]]]]\n");
        return 2;
    }
    modeldef *md;
    diag d = {0};
    if (modeldef_load("models/llama.yaml", &md, &d) < 0) {
        diag_print(&d, stderr);
        return 1;
    }
    gen_opts o = {.batch = 1, .device = BENCH_DEV_CPU};
    int32_t *turns = malloc((size_t)(R * U) * sizeof *turns);
    int32_t *tokens = malloc((size_t)(R * G) * sizeof *tokens);
    double *t = malloc((size_t)(R * rep) * sizeof *t), *col = malloc((size_t)rep * sizeof *col);
    if (!turns || !tokens || !t || !col)
        return 1;
    for (int64_t i = 0; i < R * U; i++)
        turns[i] = (int32_t)((i * 7919 + 13) % 8192);
    printf("llama cpu size, %lld rounds of %lld user tokens and %lld generated, median of %d\n",
           (long long)R, (long long)U, (long long)G, rep);
    gen_chat *base = NULL;
    for (int k = 0; k < 4; k++) {
        gen_chat_opts c = {.rounds = R, .turn_len = U, .gen_len = G, .reuse = k % 2 == 0};
        gen_kind kind = k < 2 ? GEN_EAGER : GEN_COMPILED;
        gen_chat *ch;
        char err[600];
        if (gen_chat_new(md, cpu_size, 7, &o, &c, kind, base, &ch, err, sizeof err) < 0) {
            fprintf(stderr, "dev/chat: %s\n", err);
            return 1;
        }
        for (int i = 0; i <= rep; i++) // the first run warms up
            if (gen_chat_run(ch, turns, tokens, t + (i ? i - 1 : 0) * R) < 0) {
                fprintf(stderr, "dev/chat: %s\n", gen_chat_error(ch));
                return 1;
            }
        printf("%-8s %-8s", kind == GEN_EAGER ? "eager" : "compiled", c.reuse ? "reuse" : "anew");
        for (int64_t r = 0; r < R; r++) {
            for (int i = 0; i < rep; i++)
                col[i] = t[i * R + r];
            qsort(col, (size_t)rep, sizeof *col, cmp);
            printf("  round %lld %8.2f ms", (long long)r + 1, col[rep / 2] * 1e3);
        }
        printf("\n");
        if (k == 0)
            base = ch;
        else
            gen_chat_free(ch);
    }
    gen_chat_free(base);
    modeldef_free(md);
    free(turns);
    free(tokens);
    free(t);
    free(col);
    return 0;
}
