#pragma once

// A naive double-precision reference for the ops of ggml.h, written from the
// mathematical definition of each op, plus helpers to move data between
// tensors (host memory) and dense double arrays.
//
// Every reference function takes and returns Arrays: dense 4-d arrays in
// ggml's index order (dimension 0 varies fastest). Inputs are read back from
// the tensors after they were filled, so a reference sees exactly the values
// the kernel sees (already rounded to f16/bf16 or dequantised).

#include <array>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "ggml.h"

namespace loomtest {

using Shape = std::array<int64_t, 4>;

struct Array {
    Shape               ne{1, 1, 1, 1};
    std::vector<double> v;

    Array() : v(1, 0.0) {}
    explicit Array(Shape shape, double fill = 0.0);

    int64_t size() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    int64_t index(int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) const {
        return i0 + ne[0] * (i1 + ne[1] * (i2 + ne[2] * i3));
    }
    double & operator()(int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
        return v[size_t(index(i0, i1, i2, i3))];
    }
    double operator()(int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) const {
        return v[size_t(index(i0, i1, i2, i3))];
    }
};

std::string shape_str(const Shape & ne);
Shape       shape_of(const ggml_tensor * t);

//
// Tensor access (tensors with host data)
//

// One element of a tensor of a non-quantized type (F32, F16, BF16, I8, I16, I32, I64), any strides.
double read_element(const ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3);

// Every element of t. Quantized tensors are dequantized row by row with the
// type's to_float (their rows must be contiguous runs of blocks).
Array read_tensor(const ggml_tensor * t);

// Stores a into t (same shape), converting to t's type. Quantized types are
// quantized row by row with ggml_quantize_chunk.
void write_tensor(ggml_tensor * t, const Array & a);

// Uniform random values in [lo, hi).
Array random_array(const Shape & ne, std::mt19937 & rng, double lo = -1.0, double hi = 1.0);

// Fills t with uniform random values in [lo, hi) and returns what t holds
// afterwards (the values after conversion to t's type).
Array fill_random(ggml_tensor * t, std::mt19937 & rng, double lo = -1.0, double hi = 1.0);

// Round to nearest (ties to even) into f16 / bf16, overflowing to infinity.
// Written from the IEEE definitions, independently of the library.
double round_to_f16(double x);
double round_to_bf16(double x);
// The value a float x becomes when stored as type (F32, F16, BF16; other types unchanged).
double round_to_type(ggml_type type, double x);

//
// Error metrics
//

// The one error metric of the tests, for every element type they read.
// nmse: sum((got - want)^2) / sum(want^2) over the elements where want is
// finite (the plain sum of squares when want is all zero); max_abs_diff:
// the largest |got - want| there. Where want is not finite, got must be
// the same (NaN for NaN, the same infinity) and the element is left out of
// the sums. A non-finite got where want is finite, or a mismatch where want
// is not, is an infinite error, and so are arrays of different lengths:
// a NaN never compares below a tolerance.
double nmse(std::span<const double> got, std::span<const double> want);
double nmse(std::span<const float> got, std::span<const float> want);
double nmse(const Array & got, const Array & want);
double max_abs_diff(std::span<const double> got, std::span<const double> want);
double max_abs_diff(std::span<const float> got, std::span<const float> want);
double max_abs_diff(const Array & got, const Array & want);
// The first element where a non-finite value of one side is not matched
// on the other (by the rules above), or -1.
int64_t first_nonfinite_mismatch(std::span<const double> got, std::span<const double> want);

//
// Reference ops
//

namespace ref {

enum class BinaryOp { add, sub, mul, div };

// a op b with b repeated to the shape of a.
Array binary(BinaryOp op, const Array & a, const Array & b);
Array add1(const Array & a, double s);
Array scale(const Array & a, double s, double bias);

double unary_value(ggml_unary_op op, double x);
Array  unary(ggml_unary_op op, const Array & a);

// Element-wise sqr, sqrt, log, sin, cos (op is one of those GGML_OP values).
double math_value(ggml_op op, double x);
Array  math(ggml_op op, const Array & a);

Array sum(const Array & a);      // [1]
Array sum_rows(const Array & a); // [1, ne1, ne2, ne3]
Array mean(const Array & a);     // [1, ne1, ne2, ne3]
Array argmax(const Array & a);   // [ne1] indices of the first maximum of each row

// The elements of a in order, under the shape ne (same count).
Array reshape(const Array & a, const Shape & ne);
// ggml_permute: dimension i of a becomes dimension axes[i] of the result.
Array permute(const Array & a, const std::array<int, 4> & axes);

Array repeat(const Array & a, const Shape & ne);
Array concat(const Array & a, const Array & b, int dim);

Array norm(const Array & a, double eps);
Array rms_norm(const Array & a, double eps);
// Channels (dim 2) form groups of ceil(ne2 / n_groups); each group of each
// batch (dim 3) is normalised over all its elements.
Array group_norm(const Array & a, int n_groups, double eps);

// a [K, M, p, q], b [K, N, r*p, s*q] -> [M, N, r*p, s*q]: sum_k a[k, m] b[k, n].
Array mul_mat(const Array & a, const Array & b);
// a [M, K, p, q], b [N, K, r*p, s*q] -> [M, N, r*p, s*q]: sum_k a[m, k] b[n, k].
Array out_prod(const Array & a, const Array & b);

// The ALiBi slope of head h among n_head heads.
double alibi_slope(int64_t h, int64_t n_head, double max_bias);
// softmax over dim 0 of a*scale + slope(head = i2)*mask; mask (may be null) is
// [ne0, >= ne1, broadcast over dims 2 and 3].
// sinks (may be null): one logit per head (i2) added to the denominator.
Array soft_max(const Array & a, const Array * mask, double scale, double max_bias,
               const std::vector<double> * sinks = nullptr);
Array diag_mask_inf(const Array & a, int n_past);

struct RopeParams {
    int    n_dims      = 0;
    int    mode        = GGML_ROPE_TYPE_NORMAL;
    int    n_ctx_orig  = 0;
    double freq_base   = 10000.0;
    double freq_scale  = 1.0;
    double ext_factor  = 0.0;
    double attn_factor = 1.0;
    double beta_fast   = 32.0;
    double beta_slow   = 1.0;
    // The YaRN correction range (from ggml_rope_yarn_corr_dims); used when ext_factor != 0.
    double corr_dims[2] = {0.0, 0.0};
};
// a [head_dim, n_head, n_tokens, ne3]; pos[n_tokens]; freq_factors (may be null) [>= n_dims/2].
Array rope(const Array & a, const std::vector<int32_t> & pos, const std::vector<double> * freq_factors,
           const RopeParams & p);

// a [n0, n1, n2, n3], idx [k, n2, n3] -> [n0, k, n2, n3].
Array get_rows(const Array & a, const Array & idx);
// dst [n0, n1, n2, n3] with rows of src [n0, k, n2, n3] stored at idx [k, i2 % c1, i3 % c2];
// each stored value passes through convert (the destination's rounding).
Array set_rows(const Array & dst, const Array & src, const Array & idx, double (*convert)(double));

// Per row: the indices of a stable sort (ascending or descending).
Array argsort(const Array & a, ggml_sort_order order);

// q [d, n_q, n_head, ne3], k [d, n_kv, n_head_kv, ne3], v [dv, n_kv, n_head_kv, ne3],
// mask (may be null) [n_kv, >= n_q, broadcast over 2, 3] -> [dv, n_head, n_q, ne3].
// sinks (may be null): one logit per head added to the denominator, with no value.
Array flash_attn(const Array & q, const Array & k, const Array & v, const Array * mask, double scale,
                 double max_bias, double logit_softcap, const std::vector<double> * sinks = nullptr);

} // namespace ref

} // namespace loomtest
