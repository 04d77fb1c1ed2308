// cpu_formulas: core/pointwise.h's formulas in the CPU's dialect (cpu_math.h
// defines it), for the eager kernels and constant folding.
#pragma once
#include "cpu_math.h"

// after the dialect
#include "core/pointwise.h"
