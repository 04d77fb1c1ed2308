// quantize: weight-only quantization of a model's linear layers (--weights
// int8|int4), as gpt-fast and llama.cpp do it: every LINEAR whose weight is
// a 2-D parameter reads DEQUANT(NAME.qweight, NAME.scales) instead, two
// buffers quantized from the parameter's seeded values (symmetric, per
// group of input features; engine/backend/cpu/cpu_quant.h), and the
// parameter goes away.
//
//   model_prepare(...);                          // values drawn (model_init_values)
//   model_quant_stats st;
//   if (model_quantize_weights(m, 4, 32, DT_F32, &st, err, sizeof err) < 0)
//       fail("%s", err);
//   printf("%d weights, rel. RMS error %.4f\n", st.weights, st.rel_rms);
//
// Inference graphs only (a training graph is refused: the weights it would
// update are gone). A weight read by anything but linears (tied embeddings)
// stays f32. Eager then runs each DEQUANT into a temporary before the
// linear; the compiler fuses the pair into one QLINEAR (compile/quant.c).
#pragma once
#include "model.h"

#include <stddef.h>

typedef struct model_quant_stats {
    int weights;         // linear weights quantized
    int64_t params;      // their elements
    size_t bytes_before; // f32 bytes of those weights
    size_t bytes_after;  // quantized values and scales
    double rel_rms;      // sqrt(sum (w - dq(q(w)))^2 / sum w^2) over all of them
} model_quant_stats;

// bits 4 or 8, group >= 1 (32, 64 or 128 from the command line), scales
// DT_F32 or DT_F16. Rebuilds m->g and moves m->values with it (a model
// without values, m->values NULL, is rewritten alone: for memory plans,
// its quantization error 0). st may be
// NULL. -1 with err set on a bad argument, a training graph or no memory
// (m is then unchanged).
int model_quantize_weights(model *m, int bits, int64_t group, enum dtype scale_dtype,
                           model_quant_stats *st, char *err, size_t cap);
