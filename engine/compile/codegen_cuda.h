// codegen_cuda: the compiler's kernel groups as one CUDA C translation unit
// for NVRTC, the GPU form of codegen_c.c (same groups; the same index math
// and expressions, both written by lower.h), plus how to launch each group.
//
//   cprog p = {0};
//   compile_cuda_passes(&p, m, true, NULL);         // -1: p.err says why
//   char *src = compile_codegen_cuda(&p);          // NULL: p.err says why
//   cuda_nvrtc_compile(src, "m.cu", 90, &r, ...);   // backend/cuda/cuda_nvrtc.h
//   for (int gi = 0; gi < p.ngroups; gi++) {
//       cuda_launch l;
//       compile_cuda_launch(&p, gi, &l);
//       // l.lib first (cuBLAS GEMM, cuDNN convolution, an eager kernel), then
//       // kernel "tk<l.kernel>" (when l.kernel >= 0) with <<<l.grid, l.block>>>
//   }
//
// Every kernel is `extern "C" __global__ void tkN(const tc_args a)`: a.p[i]
// is the data pointer of kgroup.args[i] (the same operands, in the same
// order, as codegen_c's a[i]), or for an update group (launch.table) a.p[0]
// is a device array of its operands' pointers; a.step points to a device
// word holding the training step t (uint64_t; 0 counts as 1) that the
// runtime sets before each step. A launch passes one struct by value and a
// CUDA graph can capture it (the step is read at each replay). Kernels are
// keyed by their text (shapes, strides, ops, constants; never pointers): the
// identical layers of a model share one kernel. Group kinds:
//   KG_POINTWISE, KG_COPY  grid-stride elementwise loop, 256 threads, 4
//                          elements each, over codegen_c's coalesced dims
//   KG_ROWREDUCE           one block per row (rows beyond the grid by a
//                          grid-stride loop); lower_row's levels, each
//                          reduction a warp-shuffle + shared-memory tree
//   KG_GEMM                cuBLAS by the runtime (l.gemm says how), then the
//                          epilogue in place over the output, if any
//   KG_CONV                cuDNN by the runtime, then the epilogue
//   KG_EXTERN              the runtime runs the op's eager CUDA kernel;
//                          dropout is generated instead (its mask's key from
//                          the step in device memory)
//   KG_UPDATE              the multi-tensor optimizer update: one block per
//                          chunk of every tensor, a table of the tensors
// The unit begins with cuda_prelude.cuh (embedded at build time), so the
// generated math is the eager kernels' math. Indices are 32-bit where every
// offset fits, else 64-bit.
#pragma once
#include "lower.h"

// What the runtime calls before a group's generated kernel.
enum cuda_lib { CUDA_LIB_NONE, CUDA_LIB_GEMM, CUDA_LIB_CONV, CUDA_LIB_EXTERN };

// C (..., M, N) contiguous = A B over the output's batch dims, row-major
// terms as cuda_blas.c: an operand is row-major with leading dimension ld,
// or transposed (t). Batch strides in elements, 0 where an operand
// broadcasts; the output's are contiguous (M * N per batch). Slots: A is
// kgroup.args[0], B args[1], C args[2].
typedef lower_gemm cuda_gemm_desc;

typedef struct cuda_launch {
    int kernel; // tk<kernel>, or -1: the group is only a library call
    enum cuda_lib lib;
    unsigned grid, block; // 1-d
    unsigned smem;        // dynamic shared memory bytes (0: kernels declare theirs)
    // the operands are too many for tc_args (KG_UPDATE): a.p[0] is a device
    // array of the compile_group_operands pointers, in that order
    bool table;
    cuda_gemm_desc gemm; // lib == CUDA_LIB_GEMM
} cuda_launch;

// The translation unit; caller frees. Sets every group's kernel index.
char *compile_codegen_cuda(cprog *p);
// The passes up to the memory plan as the CUDA program runs them, on m's
// graph: decompose, quant, simplify, fuse, plan; no layouts and no GEMM rows
// in place (cuBLAS would overwrite rows it has yet to read), and an epilogue
// ends at a value of its GEMM's or convolution's dtype (cprog's
// epilogue_keeps_dtype). 0, or -1 with p->err; compile_prog_free releases
// what it made either way.
int compile_cuda_passes(cprog *p, const model *m, bool fusion, FILE *log);
// Group gi's launch (after compile_codegen_cuda). 0, or -1 with p->err.
int compile_cuda_launch(cprog *p, int gi, cuda_launch *out);
