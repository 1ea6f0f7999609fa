#pragma once

// Pooling, resampling and SAM's window and relative-position operators
// (kernels/pool.cpp); added to the table by add_conv_kernels.

#include "backends/cpu/kernels/kernels.h"

namespace loom::cpu {

void add_pool_kernels(OpKernels & t);

} // namespace loom::cpu
