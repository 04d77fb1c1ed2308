// compile: the compiled mode. Turns a model's graph into a program the way
// torch.compile does: decompose composite ops into primitives, simplify,
// fuse, plan memory into one arena, generate C for every fused kernel and a
// whole-step function, build it with the system C compiler and dlopen it.
//
//   compile_opts o = compile_opts_default();     // reads TCBENCH_DISABLE_*
//   compiled *c;
//   if (compile_model(m, &o, &c, err, sizeof err) < 0) ...   // err: why
//   tensor *out[8]; compiled_stats st;
//   compiled_run(c, out, &st);       // one step; outputs borrow the program's memory:
//                                    // tensor_free them; valid until the next run
//   compiled_free(c);
//
// Training graphs (engine/autodiff/autograd.h: forward, backward and optimizer as one
// graph) run the same way; each run is one optimizer step and updates the
// model's parameters and optimizer state (m->values) in place. Set the step
// number t (from 1; Adam's bias correction, dropout masks) before each run:
//   for (uint64_t t = 1; t <= steps; t++) { compiled_set_step(c, t); compiled_run(c, out, &st); }
//
// Modes (the study's two ideas and their ablations):
//   compiled  fusion on,  capture on  (one generated step(), planned arena)
//   fused     fusion on,  capture off (runtime loop calls each kernel,
//                                      outputs allocated per kernel)
//   captured  fusion off, capture on  (one kernel per original op, as eager,
//                                      but one step() and one arena)
// The passes and their data live in cprog (compile_internal.h).
#pragma once
#include "model/model.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct compile_opts {
    bool fusion;          // fuse across ops (TCBENCH_DISABLE_FUSION=1 turns off)
    bool capture;         // one whole-step function (TCBENCH_DISABLE_CAPTURE=1 turns off)
    const char *dump_dir; // write source and fused graph here, or NULL
    const char *cache_dir; // NULL: $XDG_CACHE_HOME/tcbench or ~/.cache/tcbench
    FILE *log;            // fusion decisions (TCBENCH_LOG=fusion), or NULL
} compile_opts;

compile_opts compile_opts_default(void);

typedef struct compiled_stats {
    int64_t kernels;      // kernels run per step
    int64_t cast_kernels; // of which do nothing but cast (the rest fused into neighbours)
    size_t peak_bytes;    // parameters + inputs + arena (or live peak, fused mode)
    size_t arena_bytes;   // the planned arena
    double compile_s;     // wall time of compile_model
    bool cache_hit;       // the shared object came from the kernel cache
} compiled_stats;

typedef struct compiled compiled;

int compile_model(const model *m, const compile_opts *o, compiled **out, char *err, size_t cap);
int compiled_run(compiled *c, tensor **outputs, compiled_stats *st);
// The optimizer step t of the next runs (default 1), as eager_set_step.
void compiled_set_step(compiled *c, uint64_t step);
void compiled_info(const compiled *c, compiled_stats *st);
const char *compiled_error(const compiled *c);
void compiled_free(compiled *c);

// The compiled mode's memory planned without compiling: the passes up to
// the memory plan (decompose, simplify, fuse, layouts, plan) and no code
// generation, C compiler or values, so a model built without values (a
// full-size one) plans in seconds.
//
//   compile_memory_figures f;
//   if (compile_plan_memory(m, &o, &f, err, sizeof err) < 0) ...
//
// peak_bytes is compiled_stats.peak_bytes of the captured program (the
// CPU's; oneDNN's prepacked convolution weights of a frozen inference
// program aside): fused mode (o->capture off) allocates per kernel instead
// and is not planned here.
typedef struct compile_memory_figures {
    size_t sources_bytes; // parameters, buffers, inputs, read in place
    size_t arena_bytes;   // every intermediate, planned into one arena
    size_t const_bytes;   // filled constants the runtime allocates beside them
    size_t peak_bytes;    // sources + arena
    int kernels;          // kernels a step runs
} compile_memory_figures;

int compile_plan_memory(const model *m, const compile_opts *o, compile_memory_figures *out,
                        char *err, size_t cap);
