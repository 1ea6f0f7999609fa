#pragma once

// The general path of GGML_OP_MUL_MAT (matmul_dequant.cpp): weights of any
// quantized type with a to_float in the type table, converted to f32 a few
// rows at a time, times f32 activations. matmul.cpp sends the types without
// a dot product of their own in vec.h here.

#include <cstddef>

#include "ggml.h"
#include "kernels.h"

namespace loom::cpu {

// Quantized types with a to_float.
bool   mul_mat_dequantizes(ggml_type weight_type);
// Scratch for a (weights) times b on n_threads threads.
size_t work_size_mul_mat_dequant(const ggml_tensor * a, const ggml_tensor * b, int n_threads);
// dst = a b; every thread calls it (it may sync once).
void   compute_mul_mat_dequant(const ComputeParams & p, ggml_tensor * dst);

} // namespace loom::cpu
