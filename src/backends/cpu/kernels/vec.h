#pragma once

// Row primitives shared by the matrix, softmax and attention kernels: dot
// products per weight type, scaled accumulation, and conversion of f32 rows
// into the operand type a dot product expects. These are the functions a
// SIMD path replaces; the portable versions here are the reference.
//
// Every function is a pure function of its arguments (same inputs, same
// bits), so a kernel that calls them per output element is independent of
// the thread count. Accumulation is in fp32 unless stated.

#include <cstddef>
#include <cstdint>

#include "backends/cpu/simd/kernel_table.h"
#include "core/types.h"
#include "ggml.h"

namespace loom::cpu {

// ---- dot products (n elements; for block types n is a multiple of 32) ----

float dot_f32(int64_t n, const float * x, const float * y);
float dot_f16(int64_t n, const ggml_fp16_t * x, const ggml_fp16_t * y);
float dot_bf16(int64_t n, const uint16_t * x, const uint16_t * y);
// Integer products per block, then scaled by both block scales.
float dot_q8_0_q8_0(int64_t n, const block_q8_0 * x, const block_q8_0 * y);
float dot_q4_0_q8_0(int64_t n, const block_q4_0 * x, const block_q8_0 * y);

// A dot product between a row of some weight type and a row already in that
// type's operand type (see VecDotInfo::operand).
using VecDotFn = float (*)(int64_t n, const void * x, const void * y);

struct VecDotInfo {
    ggml_type operand; // the type the other side is converted to
    VecDotFn  dot;     // nullptr when the weight type has no dot product
};

// F32->F32, F16->F16, BF16->BF16, Q8_0 and Q4_0 -> Q8_0; dot == nullptr otherwise.
// These are the portable dot products.
VecDotInfo vec_dot_info(ggml_type weight_type);
// The same with the dot products of the selected kernel table, or the
// portable ones when use_ref is set.
VecDotInfo vec_dot_info(ggml_type weight_type, bool use_ref);

// vec_dot_info's dot products, and for the other block types that have one
// the portable dot product of quant_dot.h against their activation type
// (ggml's vec_dot_type); dot == nullptr (operand GGML_TYPE_COUNT) for the
// rest, values that are not types included. Note [Dot rows] in vec.cpp.
VecDotInfo row_dot_info(ggml_type weight_type);
// The kernel table's matrix-vector product for the weight type (null where
// the table has none), with the operands of row_dot_info.
GemvFn table_gemv(const KernelTable & kt, ggml_type weight_type);

// ---- conversions ----

// Converts n f32 values, read stride bytes apart, into a row of type
// (F32, F16, BF16, Q8_0, Q8_1 or Q8_K, the quantized ones by the core's
// reference quantizers; n a multiple of the block size).
void convert_f32_row(ggml_type type, const char * src, size_t stride, void * dst, int64_t n);
// The types convert_f32_row produces.
inline bool convertible_operand(ggml_type t) {
    return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16 || t == GGML_TYPE_Q8_0 ||
           t == GGML_TYPE_Q8_1 || t == GGML_TYPE_Q8_K;
}

// ---- element-wise helpers ----

// out[i] = slope * m[i] for n values of an f32 or f16 mask row: one
// rounding after an exact conversion, through the kernel table's row
// functions (the same bits as a scalar loop).
void mask_terms(const KernelTable & kt, const void * m, bool f16, float slope, int64_t n, float * out);

// y[i] += x[i] * s
void mad_f32(int64_t n, float * y, const float * x, float s);
void mad_f16(int64_t n, float * y, const ggml_fp16_t * x, float s);
// Largest element (-INFINITY for n == 0; NaN elements are ignored).
float max_f32(int64_t n, const float * x);
// y[i] = exp(y[i] - max); returns the sum of the results accumulated in double.
double exp_sub_sum_f32(int64_t n, float * y, float max);

// ---- attention helpers ----

// ALiBi bias slope of head h out of n_head (1 when max_bias <= 0). The
// first 2^floor(log2(n_head)) heads take powers of m0 = 2^(-max_bias / n),
// the rest odd powers of m1 = 2^(-max_bias / 2n), n that power of two.
float alibi_slope(float max_bias, int64_t n_head, int64_t h);

} // namespace loom::cpu
