// op_table: the one table of op cases tests/test_op_table.c runs on every
// executor against the fp64 reference (engine/ref/ref.h), as ggml's
// test-backend-ops does. A case is one row of op_cases (op_table_cases.c):
// a builder that adds its ops to a graph, the shapes and attributes the
// builder reads, the tolerances, the CPU eager kernel count and the 16-bit
// variants it also runs in.
//
//   graph *g = graph_new();
//   op_case c = op_cases[i];
//   c.dt = DT_BF16;                 // a variant: the case's inputs in bf16
//   c.build(g, &c);                 // adds the case's ops and outputs to g
//
// Builders only add nodes: several cases can share one graph (how the
// compiled modes run the table in a few compiles).
#pragma once
#include "core/graph.h"
#include "model/model.h"

#include <stdbool.h>
#include <stdint.h>

// Where a case runs: the CPU and CUDA executors of engine/bench/exec.h, and
// NVRTC compiling the generated CUDA without a GPU.
enum op_mode {
    OPM_EAGER,
    OPM_COMPILED,
    OPM_FUSED,
    OPM_CAPTURED,
    OPM_CUDA_EAGER,
    OPM_CUDA_COMPILED,
    OPM_CUDA_FUSED,
    OPM_CUDA_CAPTURED,
    OPM_NVRTC,
    OPM_COUNT
};

#define OPM_BIT(m) (1u << (m))

// the 16-bit variants of a case (op_case.half)
#define HALF_F16  1u
#define HALF_BF16 2u

typedef struct op_case op_case;
typedef int (*op_build_fn)(graph *g, const op_case *tc);

struct op_case {
    const char *name;
    op_build_fn build;
    enum op op;    // for the generic builders
    enum dtype dt; // main input dtype (f32 when 0); a variant sets it
    int nd, nd2;   // main and second input shapes
    int64_t shape[4], shape2[4];
    int64_t ia[GRAPH_MAX_IA];
    double fa[GRAPH_MAX_FA];
    double rtol, atol; // 0: by dtype (1e-5 and 1e-6 for f32, 2e-3 and 2e-3 for f16)
    int kernels;       // CPU eager kernels in a step; -1: some (not counted)
    bool nhwc;         // b_conv_grad: channels-last dy and x
    int bias;  // h_conv, h_linear: 0 none, 1 an input of the case's dtype, 2 an f32 parameter
    bool perm; // h_ builders: the main input a permuted (strided) view
    // half: also run with f16 and/or bf16 inputs. Tolerance: rtol16 and
    // atol16; where both are 0, for a one-kernel row the format's rounding
    // (2u |ref| + u max(1, max |ref|), u = 2^-10 for f16, 2^-7 for bf16),
    // else 2e-3 each. A one-kernel row's 16-bit variant is also checked in
    // CPU eager against the f32 step rounded once (exactly, unless own: the
    // kernel has its own 16-bit loop).
    unsigned half;
    double rtol16, atol16;
    bool own;
    // modes (OPM_BIT) where the case is known to fail, and where its 16-bit
    // variants are: left out there, with the reason beside the row
    unsigned known_fail, known_fail16;
};

extern const op_case op_cases[];
extern const int op_ncases;

// The case's model (tc->dt as given), values drawn from a fixed seed;
// inputs named "pos" get |N(0, 1)| + 0.1, "wide" 4 N(0, 1).
model *op_case_model(const op_case *tc);
// The same for models built by hand: pos and wide inputs as above.
void op_values_shape(model *m);

// builders the extra tests reuse
int b_unary(graph *g, const op_case *tc);
int b_binary(graph *g, const op_case *tc);
int b_binary_int(graph *g, const op_case *tc);
int b_matmul(graph *g, const op_case *tc);
int b_pool_perm(graph *g, const op_case *tc);
int b_embedding_bad(graph *g, const op_case *tc);
int b_embedding_grad(graph *g, const op_case *tc);
int b_cross_entropy(graph *g, const op_case *tc);
int b_act_grad(graph *g, const op_case *tc);
int b_channel_norm(graph *g, const op_case *tc);
int b_norm_grad(graph *g, const op_case *tc);
int g_matmul(graph *g, const op_case *tc);

// Whether a GPU is there (the registry's CUDA probe, asked once).
bool op_have_gpu(void);

// The extra tests (not table rows): op_table_extra.c, op_table_half.c.
struct CMUnitTest;
extern const struct CMUnitTest *const op_extra_tests;
extern const int op_nextra_tests;
extern const struct CMUnitTest *const op_half_tests;
extern const int op_nhalf_tests;
