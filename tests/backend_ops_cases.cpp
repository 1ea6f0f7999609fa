// The op cases of the conformance suite. They mirror the numeric op tests:
// the same ops, type combinations, broadcasts and non-contiguous layouts.
//
// Thresholds are normalised mean squared errors against the CPU, chosen for
// what a correct device may legitimately do differently (summation order,
// fused multiply-adds, its own rounding of f16/bf16 results):
//   f32 results                      1e-7
//   f16 results                      1e-6   one f16 rounding step apart (2^-11) everywhere stays below
//   bf16 results                     2e-5   one bf16 step (2^-8) everywhere stays below
//   results stored quantized         1e-3   a few values one quantisation step apart
//   products (mul_mat, out_prod) by the weights' type, measured against BLAS and
//   Vulkan (lavapipe) with a margin of about 50 or more:
//     f32 weights, out_prod           1e-11  measured 1.2e-13 (BLAS), 4.9e-14 (Vulkan), out_prod 8.6e-15;
//                                            one f16 rounding of the operands gives ~1e-7
//     f16 weights                     1e-6   measured 4.4e-8: the CPU rounds activations to f16 on its
//                                            matrix-vector path, as ggml does
//     bf16 weights                    5e-5   measured 2.5e-6 (BLAS; activations rounded to bf16 on the CPU)
//     quantized weights               5e-4   measured 1.9e-5: the CPU quantises activations to 8 bits
//   flash_attn                        5e-4   other summation orders and blockings of long dot products
//                                            (no independent device computes it yet)
//   copies, gathers, masks, sorts    exact

#include "backend_ops_cases.h"

#include <string>

namespace loomtest::ops {

ggml_tensor * Builder::input(ggml_type type, const Shape & ne, Init init) {
    ggml_tensor * t = ggml_new_tensor_4d(ctx_, type, ne[0], ne[1], ne[2], ne[3]);
    ggml_format_name(t, "in%zu", inputs_.size());
    inputs_.emplace_back(t, init);
    return t;
}

namespace {

constexpr double kExact   = 0.0;
constexpr double kF32     = 1e-7;
constexpr double kF16     = 1e-6;
constexpr double kBF16    = 2e-5;
constexpr double kQuant   = 1e-3;
constexpr double kProduct = 5e-4;
constexpr double kProductF32  = 1e-11;
constexpr double kProductF16  = 1e-6;
constexpr double kProductBF16 = 5e-5;

// The tolerance of a matrix product with weights of this type (the table above).
double product_nmse(ggml_type weights) {
    switch (weights) {
        case GGML_TYPE_F32: return kProductF32;
        case GGML_TYPE_F16: return kProductF16;
        case GGML_TYPE_BF16: return kProductBF16;
        default: return kProduct;
    }
}

double for_type(ggml_type t) {
    switch (t) {
        case GGML_TYPE_F16: return kF16;
        case GGML_TYPE_BF16: return kBF16;
        default: return ggml_is_quantized(t) ? kQuant : kF32;
    }
}

std::string dims(const Shape & s) {
    return std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]) + "x" + std::to_string(s[3]);
}

std::string tn(ggml_type t) {
    return ggml_type_name(t);
}

// Where the cases are collected.
class Cases {
  public:
    void add(std::string name, std::function<ggml_tensor *(Builder &)> build, double max_nmse,
             Compare compare = Compare::values) {
        list_.push_back({std::move(name), std::move(build), max_nmse, compare});
    }
    std::vector<OpCase> take() { return std::move(list_); }

  private:
    std::vector<OpCase> list_;
};

using BinaryFn = ggml_tensor * (*) (ggml_context *, ggml_tensor *, ggml_tensor *);

struct BinaryOp {
    const char * name;
    BinaryFn     fn;
    BinaryFn     inplace;
};

const BinaryOp kBinaryOps[] = {
    {"ADD", ggml_add, ggml_add_inplace},
    {"SUB", ggml_sub, ggml_sub_inplace},
    {"MUL", ggml_mul, ggml_mul_inplace},
    {"DIV", ggml_div, ggml_div_inplace},
};

// The divisor stays away from zero.
Init operand_b(const BinaryOp & op) {
    return std::string(op.name) == "DIV" ? uniform(0.5, 2.0) : Init{};
}

void binary_cases(Cases & cases) {
    const Shape a = {10, 5, 4, 3};
    const Shape broadcasts[] = {a, {10, 1, 1, 1}, {1, 5, 1, 3}, {10, 5, 1, 1}, {1, 1, 1, 1}, {10, 1, 4, 1}};
    for (const BinaryOp & op : kBinaryOps) {
        for (const Shape & b : broadcasts) {
            cases.add(std::string(op.name) + "_f32_f32_" + dims(a) + "_" + dims(b),
                      [op, a, b](Builder & g) {
                          return op.fn(g.ctx(), g.input(GGML_TYPE_F32, a), g.input(GGML_TYPE_F32, b, operand_b(op)));
                      },
                      kF32);
        }
        // b repeated 3, 2, 2 and 2 times.
        cases.add(std::string(op.name) + "_f32_f32_15x6x4x2_5x3x2x1",
                  [op](Builder & g) {
                      return op.fn(g.ctx(), g.input(GGML_TYPE_F32, {15, 6, 4, 2}),
                                   g.input(GGML_TYPE_F32, {5, 3, 2, 1}, operand_b(op)));
                  },
                  kF32);
        const std::pair<ggml_type, ggml_type> types[] = {{GGML_TYPE_F16, GGML_TYPE_F16},
                                                         {GGML_TYPE_F16, GGML_TYPE_F32},
                                                         {GGML_TYPE_BF16, GGML_TYPE_BF16},
                                                         {GGML_TYPE_BF16, GGML_TYPE_F32}};
        for (const auto & [ta, tb] : types) {
            cases.add(std::string(op.name) + "_" + tn(ta) + "_" + tn(tb) + "_" + dims(a) + "_10x1x4x1",
                      [op, a, ta, tb](Builder & g) {
                          return op.fn(g.ctx(), g.input(ta, a), g.input(tb, {10, 1, 4, 1}, operand_b(op)));
                      },
                      for_type(ta));
        }
        cases.add(std::string(op.name) + "_f32_noncontiguous",
                  [op](Builder & g) {
                      // a: dims 1 and 2 swapped; b: rows of a wider tensor.
                      ggml_tensor * a_base = g.input(GGML_TYPE_F32, {13, 5, 7, 2});
                      ggml_tensor * b_base = g.input(GGML_TYPE_F32, {16, 7, 1, 1}, operand_b(op));
                      ggml_tensor * pa     = ggml_permute(g.ctx(), a_base, 0, 2, 1, 3);
                      ggml_tensor * vb = ggml_view_2d(g.ctx(), b_base, 13, 7, b_base->nb[1], sizeof(float));
                      return op.fn(g.ctx(), pa, vb);
                  },
                  kF32);
        cases.add(std::string(op.name) + "_f32_transposed_b",
                  [op](Builder & g) {
                      ggml_tensor * b_base = g.input(GGML_TYPE_F32, {9, 11, 1, 1}, operand_b(op));
                      return op.fn(g.ctx(), g.input(GGML_TYPE_F32, {11, 9, 1, 1}), ggml_transpose(g.ctx(), b_base));
                  },
                  kF32);
        cases.add(std::string(op.name) + "_f32_inplace",
                  [op, a](Builder & g) {
                      return op.inplace(g.ctx(), g.input(GGML_TYPE_F32, a),
                                        g.input(GGML_TYPE_F32, {10, 1, 1, 1}, operand_b(op)));
                  },
                  kF32);
    }
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        cases.add("ADD1_" + tn(t) + "_" + dims(a),
                  [a, t](Builder & g) { return ggml_add1(g.ctx(), g.input(t, a), g.input(t, {1, 1, 1, 1})); },
                  for_type(t));
    }
    const ggml_type add_cast[][3] = {{GGML_TYPE_F16, GGML_TYPE_F32, GGML_TYPE_F32},
                                     {GGML_TYPE_BF16, GGML_TYPE_F32, GGML_TYPE_F32},
                                     {GGML_TYPE_F32, GGML_TYPE_F32, GGML_TYPE_F16}};
    for (const auto & t : add_cast) {
        const ggml_type ta = t[0], tb = t[1], to = t[2];
        cases.add("ADD_cast_" + tn(ta) + "_" + tn(tb) + "_to_" + tn(to),
                  [a, ta, tb, to](Builder & g) {
                      return ggml_add_cast(g.ctx(), g.input(ta, a), g.input(tb, {10, 5, 1, 1}), to);
                  },
                  for_type(to));
    }
}

void scale_cases(Cases & cases) {
    const Shape a = {10, 5, 4, 3};
    cases.add("SCALE_f32", [a](Builder & g) { return ggml_scale(g.ctx(), g.input(GGML_TYPE_F32, a), 0.7f); }, kF32);
    cases.add("SCALE_bias_f32",
              [a](Builder & g) { return ggml_scale_bias(g.ctx(), g.input(GGML_TYPE_F32, a), 1.5f, -0.25f); }, kF32);
    cases.add("SCALE_f32_inplace",
              [a](Builder & g) { return ggml_scale_inplace(g.ctx(), g.input(GGML_TYPE_F32, a), -2.0f); }, kF32);
}

using UnaryFn = ggml_tensor * (*) (ggml_context *, ggml_tensor *);

void math_cases(Cases & cases) {
    struct MathOp {
        const char * name;
        UnaryFn      fn;
        Init         init;
    };
    const MathOp ops[] = {
        {"SQR", ggml_sqr, {}},
        {"SQRT", ggml_sqrt, uniform(0.1, 3.0)},
        {"LOG", ggml_log, uniform(0.1, 3.0)},
        {"SIN", ggml_sin, uniform(-3.0, 3.0)},
        {"COS", ggml_cos, uniform(-3.0, 3.0)},
    };
    for (const MathOp & op : ops) {
        for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) {
            cases.add(std::string(op.name) + "_" + tn(t),
                      [op, t](Builder & g) { return op.fn(g.ctx(), g.input(t, {17, 5, 3, 2}, op.init)); },
                      for_type(t));
        }
    }
}

void unary_cases(Cases & cases) {
    for (int u = 0; u < GGML_UNARY_OP_COUNT; ++u) {
        const auto op = ggml_unary_op(u);
        for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) {
            cases.add(std::string(ggml_unary_op_name(op)) + "_" + tn(t),
                      [op, t](Builder & g) { return ggml_unary(g.ctx(), g.input(t, {17, 5, 3, 2}, uniform(-3, 3)), op); },
                      for_type(t));
        }
    }
    for (ggml_unary_op op : {GGML_UNARY_OP_GELU, GGML_UNARY_OP_SILU, GGML_UNARY_OP_TANH, GGML_UNARY_OP_NEG}) {
        cases.add(std::string(ggml_unary_op_name(op)) + "_f32_noncontiguous_rows",
                  [op](Builder & g) {
                      ggml_tensor * base = g.input(GGML_TYPE_F32, {24, 7, 3, 1}, uniform(-3, 3));
                      ggml_tensor * v    = ggml_view_3d(g.ctx(), base, 17, 7, 3, base->nb[1], base->nb[2], 0);
                      return ggml_unary(g.ctx(), v, op);
                  },
                  kF32);
    }
    for (ggml_unary_op op : {GGML_UNARY_OP_RELU, GGML_UNARY_OP_EXP}) {
        cases.add(std::string(ggml_unary_op_name(op)) + "_f32_inplace",
                  [op](Builder & g) {
                      return ggml_unary_inplace(g.ctx(), g.input(GGML_TYPE_F32, {17, 5, 3, 2}, uniform(-3, 3)), op);
                  },
                  kF32);
    }
}

void glu_cases(Cases & cases) {
    for (int u = 0; u < GGML_GLU_OP_COUNT; ++u) {
        const auto op = ggml_glu_op(u);
        for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) {
            if (op != GGML_GLU_OP_SWIGLU_OAI) {
                for (bool swapped : {false, true}) {
                    cases.add(std::string(ggml_glu_op_name(op)) + "_" + tn(t) + (swapped ? "_swapped" : ""),
                              [op, t, swapped](Builder & g) {
                                  return ggml_glu(g.ctx(), g.input(t, {34, 5, 3, 2}, uniform(-3, 3)), op, swapped);
                              },
                              for_type(t));
                }
            }
            cases.add(std::string(ggml_glu_op_name(op)) + "_" + tn(t) + "_split",
                      [op, t](Builder & g) {
                          ggml_tensor * a = g.input(t, {17, 5, 3, 2}, uniform(-3, 3));
                          ggml_tensor * b = g.input(t, {17, 5, 3, 2}, uniform(-3, 3));
                          if (op == GGML_GLU_OP_SWIGLU_OAI) return ggml_swiglu_oai(g.ctx(), a, b, 1.702f, 2.0f);
                          if (op == GGML_GLU_OP_SWIGLU_CLAMP) return ggml_swiglu_clamp(g.ctx(), a, b, 2.0f);
                          return ggml_glu_split(g.ctx(), a, b, op);
                      },
                      for_type(t));
        }
    }
}

void reduce_cases(Cases & cases) {
    struct ReduceOp {
        const char * name;
        UnaryFn      fn;
    };
    const ReduceOp ops[] = {{"SUM", ggml_sum}, {"SUM_ROWS", ggml_sum_rows}, {"MEAN", ggml_mean}};
    for (const ReduceOp & op : ops) {
        cases.add(std::string(op.name) + "_f32",
                  [op](Builder & g) { return op.fn(g.ctx(), g.input(GGML_TYPE_F32, {37, 5, 4, 3})); }, kF32);
        cases.add(std::string(op.name) + "_f32_permuted",
                  [op](Builder & g) {
                      ggml_tensor * base = g.input(GGML_TYPE_F32, {11, 5, 4, 3});
                      return op.fn(g.ctx(), ggml_permute(g.ctx(), base, 1, 0, 2, 3));
                  },
                  kF32);
    }
    cases.add("ARGMAX_f32",
              [](Builder & g) { return ggml_argmax(g.ctx(), g.input(GGML_TYPE_F32, {37, 9, 1, 1}, {Init::distinct})); },
              kExact);
}

void repeat_concat_cases(Cases & cases) {
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        cases.add("REPEAT_" + tn(t) + "_3x2x1x1_to_6x4x3x2",
                  [t](Builder & g) {
                      return ggml_repeat(g.ctx(), g.input(t, {3, 2, 1, 1}), g.input(t, {6, 4, 3, 2}));
                  },
                  kExact);
    }
    cases.add("REPEAT_f32_scalar_to_5x3x2x1",
              [](Builder & g) { return ggml_repeat_4d(g.ctx(), g.input(GGML_TYPE_F32, {1, 1, 1, 1}), 5, 3, 2, 1); },
              kExact);
    for (int dim = 0; dim < 4; ++dim) {
        cases.add("CONCAT_f32_dim" + std::to_string(dim),
                  [dim](Builder & g) {
                      Shape b = {4, 3, 2, 2};
                      b[size_t(dim)] = 5;
                      return ggml_concat(g.ctx(), g.input(GGML_TYPE_F32, {4, 3, 2, 2}), g.input(GGML_TYPE_F32, b), dim);
                  },
                  kExact);
    }
    cases.add("CONCAT_f32_dim1_permuted_operand",
              [](Builder & g) {
                  ggml_tensor * b_base = g.input(GGML_TYPE_F32, {6, 4, 3, 1});
                  ggml_tensor * b      = ggml_permute(g.ctx(), b_base, 0, 2, 1, 3); // [6, 3, 4, 1]
                  return ggml_concat(g.ctx(), g.input(GGML_TYPE_F32, {6, 2, 4, 1}), b, 1);
              },
              kExact);
}

void norm_cases(Cases & cases) {
    struct NormOp {
        const char * name;
        ggml_tensor * (*fn)(ggml_context *, ggml_tensor *, float);
        ggml_tensor * (*inplace)(ggml_context *, ggml_tensor *, float);
    };
    const NormOp ops[] = {{"NORM", ggml_norm, ggml_norm_inplace}, {"RMS_NORM", ggml_rms_norm, ggml_rms_norm_inplace}};
    for (const NormOp & op : ops) {
        cases.add(std::string(op.name) + "_f32",
                  [op](Builder & g) { return op.fn(g.ctx(), g.input(GGML_TYPE_F32, {64, 5, 4, 3}, uniform(-1, 3)), 1e-5f); },
                  kF32);
        cases.add(std::string(op.name) + "_f32_noncontiguous",
                  [op](Builder & g) {
                      ggml_tensor * base = g.input(GGML_TYPE_F32, {80, 5, 4, 1}, uniform(-1, 3));
                      ggml_tensor * v    = ggml_view_3d(g.ctx(), base, 64, 5, 4, base->nb[1], base->nb[2], 16 * sizeof(float));
                      return op.fn(g.ctx(), v, 1e-6f);
                  },
                  kF32);
        cases.add(std::string(op.name) + "_f32_inplace",
                  [op](Builder & g) {
                      return op.inplace(g.ctx(), g.input(GGML_TYPE_F32, {33, 7, 1, 1}, uniform(-1, 3)), 1e-5f);
                  },
                  kF32);
    }
    const std::pair<Shape, int> groups[] = {{{8, 6, 12, 1}, 4}, {{5, 5, 6, 2}, 3}};
    for (const auto & [shape, n_groups] : groups) {
        cases.add("GROUP_NORM_f32_" + dims(shape) + "_groups" + std::to_string(n_groups),
                  [shape, n_groups](Builder & g) {
                      return ggml_group_norm(g.ctx(), g.input(GGML_TYPE_F32, shape, uniform(-1, 3)), n_groups, 1e-6f);
                  },
                  kF32);
    }
}

const ggml_type kWeightTypes[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0};
const ggml_type kMoreWeightTypes[] = {GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q2_K,
                                      GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K,
                                      GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS};

void matmul_cases(Cases & cases) {
    const std::pair<Shape, Shape> batches[] = {
        {{1, 1, 1, 1}, {1, 1, 1, 1}}, {{2, 1, 1, 1}, {6, 2, 1, 1}}, {{1, 1, 1, 1}, {3, 2, 1, 1}}, {{3, 2, 1, 1}, {3, 2, 1, 1}}};
    for (ggml_type type : kWeightTypes) {
        const int64_t K = ggml_is_quantized(type) ? 96 : 37;
        for (const auto & [ba, bb] : batches) {
            const Shape sa = {K, 13, ba[0], ba[1]};
            const Shape sb = {K, 7, bb[0], bb[1]};
            cases.add("MUL_MAT_" + tn(type) + "_f32_" + dims(sa) + "_" + dims(sb),
                      [type, sa, sb](Builder & g) {
                          return ggml_mul_mat(g.ctx(), g.input(type, sa), g.input(GGML_TYPE_F32, sb));
                      },
                      product_nmse(type));
        }
        cases.add("MUL_MAT_" + tn(type) + "_f32_vector",
                  [type, K](Builder & g) {
                      return ggml_mul_mat(g.ctx(), g.input(type, {K, 21, 1, 1}), g.input(GGML_TYPE_F32, {K, 1, 1, 1}));
                  },
                  product_nmse(type));
        // A few columns over rows of 70 blocks of 32: more blocks per row
        // than a matrix-vector workgroup has invocations, rows starting at
        // every even byte offset, broadcast batches.
        cases.add("MUL_MAT_" + tn(type) + "_f32_3_columns_2240_deep",
                  [type](Builder & g) {
                      return ggml_mul_mat(g.ctx(), g.input(type, {2240, 9, 2, 1}),
                                          g.input(GGML_TYPE_F32, {2240, 3, 2, 2}));
                  },
                  product_nmse(type));
        cases.add("MUL_MAT_" + tn(type) + "_f32_256x33_256x17",
                  [type](Builder & g) {
                      return ggml_mul_mat(g.ctx(), g.input(type, {256, 33, 1, 1}),
                                          g.input(GGML_TYPE_F32, {256, 17, 1, 1}));
                  },
                  product_nmse(type));
        if (!ggml_is_quantized(type)) {
            // More columns than a matrix-vector call takes, with an odd K
            // (and with broadcast batches): the CPU's many-column path.
            const std::pair<Shape, Shape> wide[] = {{{77, 37, 1, 1}, {77, 19, 1, 1}},
                                                    {{301, 45, 2, 1}, {301, 13, 4, 2}}};
            for (const auto & [sa, sb] : wide) {
                cases.add("MUL_MAT_" + tn(type) + "_f32_" + dims(sa) + "_" + dims(sb),
                          [type, sa, sb](Builder & g) {
                              return ggml_mul_mat(g.ctx(), g.input(type, sa), g.input(GGML_TYPE_F32, sb));
                          },
                          product_nmse(type));
            }
        }
    }
    // The legacy types past Q4_0/Q8_0, the K-quants and IQ4_NL/IQ4_XS (rows
    // of whole 256-value super-blocks): odd row counts, 1 to 33 columns
    // (matrix-vector and tiled paths on the devices), broadcast batches.
    for (ggml_type type : kMoreWeightTypes) {
        const std::pair<Shape, Shape> shapes[] = {{{512, 13, 1, 1}, {512, 7, 1, 1}},
                                                  {{512, 21, 1, 1}, {512, 1, 1, 1}},
                                                  {{256, 9, 2, 1}, {256, 3, 2, 2}},
                                                  {{256, 33, 1, 1}, {256, 17, 1, 1}},
                                                  {{256, 13, 1, 1}, {256, 2, 1, 1}},
                                                  {{256, 7, 1, 1}, {256, 16, 1, 1}},
                                                  {{256, 11, 1, 1}, {256, 33, 1, 1}}};
        for (const auto & [sa, sb] : shapes) {
            cases.add("MUL_MAT_" + tn(type) + "_f32_" + dims(sa) + "_" + dims(sb),
                      [type, sa, sb](Builder & g) {
                          return ggml_mul_mat(g.ctx(), g.input(type, sa), g.input(GGML_TYPE_F32, sb));
                      },
                      kProduct);
        }
    }
    cases.add("MUL_MAT_f32_transposed_b",
              [](Builder & g) {
                  ggml_tensor * bt = g.input(GGML_TYPE_F32, {13, 5, 1, 1});
                  return ggml_mul_mat(g.ctx(), g.input(GGML_TYPE_F32, {5, 9, 1, 1}), ggml_transpose(g.ctx(), bt));
              },
              kProductF32);
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        cases.add("MUL_MAT_" + tn(type) + "_permuted_b",
                  [type](Builder & g) {
                      ggml_tensor * b_base = g.input(GGML_TYPE_F32, {32, 3, 5, 1});
                      ggml_tensor * b      = ggml_permute(g.ctx(), b_base, 0, 2, 1, 3); // [32, 5, 3, 1]
                      return ggml_mul_mat(g.ctx(), g.input(type, {32, 11, 3, 1}), b);
                  },
                  product_nmse(type));
    }
    for (ggml_type type : kMoreWeightTypes) {
        cases.add("MUL_MAT_" + tn(type) + "_permuted_b",
                  [type](Builder & g) {
                      ggml_tensor * b_base = g.input(GGML_TYPE_F32, {256, 3, 5, 1});
                      ggml_tensor * b      = ggml_permute(g.ctx(), b_base, 0, 2, 1, 3); // [256, 5, 3, 1]
                      return ggml_mul_mat(g.ctx(), g.input(type, {256, 11, 3, 1}), b);
                  },
                  kProduct);
    }
    cases.add("MUL_MAT_f16_rows_of_a_view",
              [](Builder & g) {
                  ggml_tensor * a_base = g.input(GGML_TYPE_F16, {40, 20, 1, 1});
                  ggml_tensor * a      = ggml_view_2d(g.ctx(), a_base, 40, 9, a_base->nb[1], 4 * a_base->nb[1]);
                  return ggml_mul_mat(g.ctx(), a, g.input(GGML_TYPE_F32, {40, 6, 1, 1}));
              },
              kProductF16);
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        const std::pair<Shape, Shape> shapes[] = {{{11, 16, 1, 1}, {7, 16, 1, 1}}, {{11, 16, 2, 1}, {7, 16, 4, 3}}};
        for (const auto & [sa, sb] : shapes) {
            cases.add("OUT_PROD_" + tn(type) + "_f32_" + dims(sa) + "_" + dims(sb),
                      [type, sa, sb](Builder & g) {
                          return ggml_out_prod(g.ctx(), g.input(type, sa), g.input(GGML_TYPE_F32, sb));
                      },
                      kProductF32);
        }
    }
    cases.add("OUT_PROD_f32_transposed_b",
              [](Builder & g) {
                  ggml_tensor * bt = g.input(GGML_TYPE_F32, {16, 7, 1, 1});
                  return ggml_out_prod(g.ctx(), g.input(GGML_TYPE_F32, {11, 16, 1, 1}), ggml_transpose(g.ctx(), bt));
              },
              kProductF32);
}

void copy_cases(Cases & cases) {
    const ggml_type floats[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16};
    for (ggml_type from : floats) {
        for (ggml_type to : floats) {
            cases.add("CPY_" + tn(from) + "_to_" + tn(to),
                      [from, to](Builder & g) {
                          return ggml_cpy(g.ctx(), g.input(from, {41, 7, 3, 2}), g.input(to, {41, 7, 3, 2}));
                      },
                      for_type(to));
        }
    }
    for (ggml_type q : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1}) {
        cases.add("CPY_f32_to_" + tn(q),
                  [q](Builder & g) {
                      return ggml_cpy(g.ctx(), g.input(GGML_TYPE_F32, {96, 5, 2, 1}, uniform(-4, 4)),
                                      g.input(q, {96, 5, 2, 1}));
                  },
                  kQuant);
    }
    cases.add("CPY_f32_to_f16_permuted_source",
              [](Builder & g) {
                  ggml_tensor * a = ggml_permute(g.ctx(), g.input(GGML_TYPE_F32, {9, 6, 4, 1}), 1, 2, 0, 3);
                  return ggml_cpy(g.ctx(), a, g.input(GGML_TYPE_F16, {4, 9, 6, 1}));
              },
              kF16);
    cases.add("CPY_f32_into_transposed_destination",
              [](Builder & g) {
                  ggml_tensor * dst = ggml_transpose(g.ctx(), g.input(GGML_TYPE_F32, {6, 9, 1, 1}));
                  return ggml_cpy(g.ctx(), g.input(GGML_TYPE_F32, {9, 6, 1, 1}), dst);
              },
              kExact);
    cases.add("DUP_f16", [](Builder & g) { return ggml_dup(g.ctx(), g.input(GGML_TYPE_F16, {13, 5, 2, 1})); }, kExact);
    cases.add("CONT_f32_permuted",
              [](Builder & g) {
                  return ggml_cont(g.ctx(), ggml_permute(g.ctx(), g.input(GGML_TYPE_F32, {7, 5, 3, 2}), 2, 0, 3, 1));
              },
              kExact);
    cases.add("CONT_2d_f32_transposed",
              [](Builder & g) {
                  return ggml_cont_2d(g.ctx(), ggml_transpose(g.ctx(), g.input(GGML_TYPE_F32, {8, 6, 1, 1})), 3, 16);
              },
              kExact);
    cases.add("CAST_f32_to_f16",
              [](Builder & g) { return ggml_cast(g.ctx(), g.input(GGML_TYPE_F32, {33, 4, 1, 1}), GGML_TYPE_F16); },
              kF16);
    cases.add("VIEWS_feeding_SCALE_and_MUL",
              [](Builder & g) {
                  ggml_tensor * x   = g.input(GGML_TYPE_F32, {12, 10, 1, 1});
                  ggml_tensor * win = ggml_view_2d(g.ctx(), x, 5, 4, x->nb[1], 2 * x->nb[1] + 3 * sizeof(float));
                  ggml_tensor * r   = ggml_reshape_2d(g.ctx(), ggml_cont(g.ctx(), win), 4, 5);
                  return ggml_mul(g.ctx(), ggml_scale(g.ctx(), r, 2.0f), g.input(GGML_TYPE_F32, {4, 5, 1, 1}));
              },
              kF32);

    const ggml_type sources[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_I32};
    for (ggml_type type : sources) {
        cases.add("GET_ROWS_" + tn(type),
                  [type](Builder & g) {
                      const int64_t n0   = ggml_is_quantized(type) ? 64 : 19;
                      const Init    init = type == GGML_TYPE_I32 ? integers(-1000, 1000) : Init{};
                      ggml_tensor * a    = g.input(type, {n0, 11, 2, 2}, init);
                      return ggml_get_rows(g.ctx(), a, g.input(GGML_TYPE_I32, {7, 2, 2, 1}, integers(0, 10)));
                  },
                  kExact);
    }
    for (ggml_type type : kMoreWeightTypes) {
        cases.add("GET_ROWS_" + tn(type),
                  [type](Builder & g) {
                      ggml_tensor * a = g.input(type, {256, 11, 2, 1});
                      return ggml_get_rows(g.ctx(), a, g.input(GGML_TYPE_I32, {5, 2, 1, 1}, integers(0, 10)));
                  },
                  kExact);
        cases.add("CPY_" + tn(type) + "_to_f32",
                  [type](Builder & g) {
                      return ggml_cpy(g.ctx(), g.input(type, {256, 3, 2, 1}), g.input(GGML_TYPE_F32, {256, 3, 2, 1}));
                  },
                  kExact);
    }
    struct SetRows {
        ggml_type dst, src, idx;
        int64_t   idx_ne1, idx_ne2;
    };
    const SetRows set_rows[] = {
        {GGML_TYPE_F32, GGML_TYPE_F32, GGML_TYPE_I64, 2, 2}, {GGML_TYPE_F32, GGML_TYPE_F32, GGML_TYPE_I32, 1, 1},
        {GGML_TYPE_F16, GGML_TYPE_F32, GGML_TYPE_I64, 2, 1}, {GGML_TYPE_F16, GGML_TYPE_F32, GGML_TYPE_I32, 1, 2},
        {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_I32, 2, 2}, {GGML_TYPE_F16, GGML_TYPE_F16, GGML_TYPE_I64, 1, 1},
    };
    for (const SetRows & c : set_rows) {
        cases.add("SET_ROWS_" + tn(c.src) + "_into_" + tn(c.dst) + "_" + tn(c.idx) + "_" + std::to_string(c.idx_ne1) +
                      "x" + std::to_string(c.idx_ne2),
                  [c](Builder & g) {
                      ggml_tensor * dst = g.input(c.dst, {17, 9, 2, 2});
                      ggml_tensor * src = g.input(c.src, {17, 5, 2, 2}, uniform(-3, 3));
                      ggml_tensor * idx = g.input(c.idx, {5, c.idx_ne1, c.idx_ne2, 1}, {Init::distinct_indices, 0, 8});
                      return ggml_set_rows(g.ctx(), dst, src, idx);
                  },
                  for_type(c.dst) == kF32 ? kExact : for_type(c.dst));
    }
}

void softmax_cases(Cases & cases) {
    for (int n_past : {0, 3}) {
        cases.add("DIAG_MASK_INF_f32_past" + std::to_string(n_past),
                  [n_past](Builder & g) {
                      return ggml_diag_mask_inf(g.ctx(), g.input(GGML_TYPE_F32, {11, 7, 3, 1}), n_past);
                  },
                  kExact);
    }
    cases.add("SOFT_MAX_f32",
              [](Builder & g) { return ggml_soft_max(g.ctx(), g.input(GGML_TYPE_F32, {65, 9, 3, 2}, uniform(-5, 5))); },
              kF16);
    struct Ext {
        Shape a, mask;
        float scale, max_bias;
    };
    const Ext ext[] = {
        {{37, 7, 4, 2}, {37, 7, 1, 1}, 0.7f, 0.0f},   {{37, 7, 4, 2}, {37, 10, 1, 1}, 1.3f, 0.0f},
        {{21, 5, 6, 2}, {21, 5, 6, 2}, 0.125f, 0.0f}, {{21, 5, 6, 2}, {21, 5, 3, 1}, 1.0f, 0.0f},
        {{19, 3, 4, 1}, {19, 3, 1, 1}, 0.5f, 8.0f},   {{19, 3, 6, 2}, {19, 4, 2, 1}, 0.9f, 8.0f},
        {{1, 3, 5, 1}, {1, 3, 1, 1}, 2.0f, 4.0f},
    };
    for (ggml_type mask_type : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        for (const Ext & c : ext) {
            cases.add("SOFT_MAX_ext_mask_" + tn(mask_type) + "_" + dims(c.a) + "_" + dims(c.mask) +
                          (c.max_bias > 0 ? "_alibi" : ""),
                      [mask_type, c](Builder & g) {
                          ggml_tensor * a    = g.input(GGML_TYPE_F32, c.a, uniform(-4, 4));
                          ggml_tensor * mask = g.input(mask_type, c.mask, {Init::mask});
                          return ggml_soft_max_ext(g.ctx(), a, mask, c.scale, c.max_bias);
                      },
                      kF16);
        }
    }
    cases.add("SOFT_MAX_ext_no_mask",
              [](Builder & g) {
                  return ggml_soft_max_ext(g.ctx(), g.input(GGML_TYPE_F32, {33, 5, 2, 1}, uniform(-3, 3)), nullptr, 0.3f,
                                           0.0f);
              },
              kF16);
    cases.add("SOFT_MAX_ext_inplace",
              [](Builder & g) {
                  ggml_tensor * a    = g.input(GGML_TYPE_F32, {17, 4, 3, 1}, uniform(-3, 3));
                  ggml_tensor * mask = g.input(GGML_TYPE_F16, {17, 4, 1, 1}, {Init::mask});
                  return ggml_soft_max_ext_inplace(g.ctx(), a, mask, 0.5f, 0.0f);
              },
              kF16);
    cases.add("SOFT_MAX_after_DIAG_MASK_INF",
              [](Builder & g) {
                  ggml_tensor * a = g.input(GGML_TYPE_F32, {9, 9, 2, 1}, uniform(-2, 2));
                  return ggml_soft_max(g.ctx(), ggml_diag_mask_inf_inplace(g.ctx(), ggml_scale(g.ctx(), a, 0.5f), 0));
              },
              kF16);
}

struct RopeCase {
    int64_t head_dim;
    int     n_dims;
    int     mode;
    float   freq_base, freq_scale, ext_factor, attn_factor;
    bool    freq_factors;
    int     n_ctx_orig;
};

const RopeCase kRopeCases[] = {
    {32, 32, GGML_ROPE_TYPE_NORMAL, 10000.0f, 1.0f, 0.0f, 1.0f, false, 0},
    {32, 32, GGML_ROPE_TYPE_NEOX, 10000.0f, 1.0f, 0.0f, 1.0f, false, 0},
    {40, 24, GGML_ROPE_TYPE_NORMAL, 10000.0f, 1.0f, 0.0f, 1.0f, false, 0},
    {40, 24, GGML_ROPE_TYPE_NEOX, 500000.0f, 1.0f, 0.0f, 1.0f, false, 0},
    {24, 16, GGML_ROPE_TYPE_NEOX, 10000.0f, 0.25f, 0.0f, 0.8f, false, 0},
    {24, 16, GGML_ROPE_TYPE_NORMAL, 10000.0f, 0.5f, 0.0f, 1.0f, true, 0},
    {32, 32, GGML_ROPE_TYPE_NEOX, 1000000.0f, 1.0f, 0.0f, 1.0f, true, 0},
    {32, 32, GGML_ROPE_TYPE_NORMAL, 10000.0f, 0.25f, 1.0f, 1.0f, false, 4096},
    {48, 32, GGML_ROPE_TYPE_NEOX, 10000.0f, 0.125f, 1.0f, 0.9f, true, 2048},
    {32, 32, GGML_ROPE_TYPE_NEOX, 10000.0f, 0.5f, 0.5f, 1.0f, false, 4096},
};

ggml_tensor * rope(Builder & g, ggml_tensor * a, const RopeCase & c, int64_t n_tokens) {
    ggml_tensor * pos = g.input(GGML_TYPE_I32, {n_tokens, 1, 1, 1}, integers(0, 200));
    ggml_tensor * ff  = c.freq_factors ? g.input(GGML_TYPE_F32, {c.n_dims / 2, 1, 1, 1}, uniform(1, 4)) : nullptr;
    return ggml_rope_ext(g.ctx(), a, pos, ff, c.n_dims, c.mode, c.n_ctx_orig, c.freq_base, c.freq_scale,
                         c.ext_factor, c.attn_factor, 32.0f, 1.0f);
}

void rope_cases(Cases & cases) {
    for (size_t i = 0; i < std::size(kRopeCases); ++i) {
        const RopeCase & c = kRopeCases[i];
        for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) {
            cases.add("ROPE_" + tn(t) + "_" + std::string(c.mode == GGML_ROPE_TYPE_NEOX ? "neox" : "normal") + "_case" +
                          std::to_string(i),
                      [c, t](Builder & g) { return rope(g, g.input(t, {c.head_dim, 3, 5, 1}), c, 5); }, kF16);
        }
    }
    cases.add("ROPE_f32_noncontiguous_heads",
              [](Builder & g) {
                  const RopeCase & c     = kRopeCases[3];
                  ggml_tensor *    fused = g.input(GGML_TYPE_F32, {3 * c.head_dim, 3, 7, 1});
                  ggml_tensor *    a     = ggml_view_3d(g.ctx(), fused, c.head_dim, 3, 7, fused->nb[1], fused->nb[2],
                                                        size_t(c.head_dim) * sizeof(float));
                  return rope(g, a, c, 7);
              },
              kF16);
    cases.add("ROPE_plain_inplace",
              [](Builder & g) {
                  ggml_tensor * a   = g.input(GGML_TYPE_F32, {16, 3, 5, 1});
                  ggml_tensor * pos = g.input(GGML_TYPE_I32, {5, 1, 1, 1}, integers(0, 200));
                  return ggml_rope_inplace(g.ctx(), a, pos, 12, GGML_ROPE_TYPE_NORMAL);
              },
              kF16);
}

void sort_cases(Cases & cases) {
    for (ggml_sort_order order : {GGML_SORT_ORDER_ASC, GGML_SORT_ORDER_DESC}) {
        cases.add(std::string("ARGSORT_f32_") + (order == GGML_SORT_ORDER_ASC ? "asc" : "desc"),
                  [order](Builder & g) {
                      return ggml_argsort(g.ctx(), g.input(GGML_TYPE_F32, {65, 9, 3, 2}, {Init::distinct}), order);
                  },
                  kExact);
    }
    cases.add("ARGSORT_f32_long_rows",
              [](Builder & g) {
                  return ggml_argsort(g.ctx(), g.input(GGML_TYPE_F32, {1001, 3, 1, 1}, {Init::distinct}),
                                      GGML_SORT_ORDER_DESC);
              },
              kExact);
    for (int k : {1, 5, 37}) {
        cases.add("TOP_K_f32_k" + std::to_string(k),
                  [k](Builder & g) { return ggml_top_k(g.ctx(), g.input(GGML_TYPE_F32, {37, 7, 3, 1}, {Init::distinct}), k); },
                  kExact, Compare::top_k);
    }
}

struct AttnCase {
    int64_t   d, dv, n_q, n_kv, n_head, n_head_kv, ne3;
    ggml_type kv_type;
    bool      mask;
    ggml_type mask_type;
    Shape     mask_shape; // ne2, ne3 of the mask in [0], [1]; extra rows in [2]
    float     scale, max_bias, softcap;
    bool      permuted_q, kv_views;
};

const AttnCase kAttnCases[] = {
    {64, 64, 5, 37, 4, 2, 1, GGML_TYPE_F16, true, GGML_TYPE_F16, {1, 1, 0, 0}, 0.125f, 0.0f, 0.0f, false, false},
    {64, 64, 5, 37, 4, 2, 1, GGML_TYPE_F32, true, GGML_TYPE_F16, {1, 1, 0, 0}, 0.125f, 0.0f, 0.0f, false, false},
    {40, 40, 1, 19, 3, 3, 2, GGML_TYPE_F32, false, GGML_TYPE_F16, {1, 1, 0, 0}, 0.158f, 0.0f, 0.0f, false, false},
    {40, 40, 1, 19, 3, 3, 2, GGML_TYPE_F16, false, GGML_TYPE_F16, {1, 1, 0, 0}, 0.158f, 0.0f, 0.0f, false, false},
    {32, 24, 7, 33, 6, 2, 1, GGML_TYPE_F16, true, GGML_TYPE_F16, {6, 1, 0, 0}, 1.0f, 0.0f, 20.0f, false, false},
    {32, 24, 7, 33, 6, 2, 1, GGML_TYPE_F32, true, GGML_TYPE_F16, {6, 1, 0, 0}, 1.0f, 0.0f, 20.0f, false, false},
    {32, 32, 3, 17, 8, 1, 2, GGML_TYPE_F32, true, GGML_TYPE_F16, {1, 2, 0, 0}, 0.18f, 8.0f, 0.0f, false, false},
    {32, 32, 3, 17, 6, 3, 2, GGML_TYPE_F16, true, GGML_TYPE_F16, {2, 1, 3, 0}, 0.18f, 8.0f, 0.0f, true, false},
    {48, 48, 9, 41, 4, 4, 1, GGML_TYPE_F16, true, GGML_TYPE_F16, {1, 1, 3, 0}, 0.144f, 0.0f, 0.0f, true, true},
    {48, 48, 9, 41, 4, 2, 1, GGML_TYPE_F32, true, GGML_TYPE_F32, {1, 1, 0, 0}, 0.144f, 0.0f, 0.0f, true, true},
    {64, 64, 3, 301, 2, 1, 1, GGML_TYPE_F16, true, GGML_TYPE_F16, {1, 1, 0, 0}, 0.125f, 0.0f, 0.0f, false, false},
    {64, 64, 3, 301, 2, 1, 1, GGML_TYPE_F32, false, GGML_TYPE_F16, {1, 1, 0, 0}, 0.125f, 0.0f, 0.0f, false, false},
    // Queries in groups of four and a remainder, each with its own masked
    // blocks of positions (the random mask ends anywhere in 200).
    {64, 64, 10, 200, 3, 1, 1, GGML_TYPE_F16, true, GGML_TYPE_F16, {1, 1, 0, 0}, 0.125f, 0.0f, 0.0f, false, false},
    {32, 32, 11, 150, 2, 2, 1, GGML_TYPE_F32, true, GGML_TYPE_F32, {1, 1, 0, 0}, 0.2f, 0.0f, 30.0f, true, false},
    // Quantized and bf16 caches.
    {64, 64, 5, 37, 4, 2, 1, GGML_TYPE_Q8_0, true, GGML_TYPE_F16, {1, 1, 0, 0}, 0.125f, 0.0f, 0.0f, false, true},
    {32, 32, 3, 17, 6, 3, 2, GGML_TYPE_Q4_0, true, GGML_TYPE_F16, {2, 1, 3, 0}, 0.18f, 8.0f, 0.0f, true, true},
    {64, 64, 5, 70, 4, 2, 1, GGML_TYPE_BF16, true, GGML_TYPE_F16, {1, 1, 0, 0}, 0.125f, 0.0f, 0.0f, false, false},
};

void attention_cases(Cases & cases) {
    for (size_t i = 0; i < std::size(kAttnCases); ++i) {
        const AttnCase & c = kAttnCases[i];
        cases.add("FLASH_ATTN_EXT_kv_" + tn(c.kv_type) + "_d" + std::to_string(c.d) + "_kv" + std::to_string(c.n_kv) +
                      "_case" + std::to_string(i),
                  [c](Builder & g) {
                      ggml_context * ctx = g.ctx();
                      ggml_tensor *  q;
                      if (c.permuted_q) {
                          ggml_tensor * q_base = g.input(GGML_TYPE_F32, {c.d, c.n_head, c.n_q, c.ne3}, uniform(-2, 2));
                          q                    = ggml_permute(ctx, q_base, 0, 2, 1, 3);
                      } else {
                          q = g.input(GGML_TYPE_F32, {c.d, c.n_q, c.n_head, c.ne3}, uniform(-2, 2));
                      }
                      ggml_tensor * k;
                      ggml_tensor * v;
                      if (c.kv_views) {
                          ggml_tensor * kc = g.input(c.kv_type, {c.d, c.n_kv + 10, c.n_head_kv, c.ne3});
                          ggml_tensor * vc = g.input(c.kv_type, {c.dv, c.n_kv + 10, c.n_head_kv, c.ne3});
                          k = ggml_view_4d(ctx, kc, c.d, c.n_kv, c.n_head_kv, c.ne3, kc->nb[1], kc->nb[2], kc->nb[3], 0);
                          v = ggml_view_4d(ctx, vc, c.dv, c.n_kv, c.n_head_kv, c.ne3, vc->nb[1], vc->nb[2], vc->nb[3], 0);
                      } else {
                          k = g.input(c.kv_type, {c.d, c.n_kv, c.n_head_kv, c.ne3});
                          v = g.input(c.kv_type, {c.dv, c.n_kv, c.n_head_kv, c.ne3});
                      }
                      ggml_tensor * mask = nullptr;
                      if (c.mask) {
                          mask = g.input(c.mask_type, {c.n_kv, c.n_q + c.mask_shape[2], c.mask_shape[0], c.mask_shape[1]},
                                         {Init::causal_mask});
                      }
                      return ggml_flash_attn_ext(ctx, q, k, v, mask, c.scale, c.max_bias, c.softcap);
                  },
                  kProduct);
    }
}

// Element-wise functions with parameters, fills, masks and the ops that
// write into part of a tensor or move its elements.
void fill_cases(Cases & cases) {
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        cases.add("CLAMP_" + tn(t),
                  [t](Builder & g) { return ggml_clamp(g.ctx(), g.input(t, {37, 5, 3, 2}, uniform(-3, 3)), -0.5f, 1.25f); },
                  kExact);
        cases.add("LEAKY_RELU_" + tn(t) + "_permuted",
                  [t](Builder & g) {
                      ggml_tensor * base = g.input(t, {11, 5, 4, 1}, uniform(-3, 3));
                      return ggml_leaky_relu(g.ctx(), ggml_permute(g.ctx(), base, 0, 2, 1, 3), 0.1f, false);
                  },
                  for_type(t));
        cases.add("FILL_" + tn(t), [t](Builder & g) { return ggml_fill(g.ctx(), g.input(t, {13, 4, 3, 1}), 0.75f); },
                  kExact);
        cases.add("ROLL_" + tn(t),
                  [t](Builder & g) { return ggml_roll(g.ctx(), g.input(t, {9, 5, 3, 2}), 4, -2, 1, 1); }, kExact);
        cases.add("PAD_" + tn(t) + "_ext_permuted",
                  [t](Builder & g) {
                      ggml_tensor * base = g.input(t, {5, 3, 4, 2});
                      return ggml_pad_ext(g.ctx(), ggml_permute(g.ctx(), base, 0, 2, 1, 3), 2, 1, 0, 3, 1, 1, 0, 1);
                  },
                  kExact);
        cases.add("PAD_" + tn(t) + "_circular",
                  [t](Builder & g) { return ggml_pad_ext_circular(g.ctx(), g.input(t, {5, 3, 2, 1}), 2, 3, 1, 2, 0, 1, 0, 0); },
                  kExact);
        cases.add("DIAG_" + tn(t), [t](Builder & g) { return ggml_diag(g.ctx(), g.input(t, {17, 1, 3, 2})); }, kExact);
    }
    cases.add("ARANGE_f32", [](Builder & g) { return ggml_arange(g.ctx(), -2.0f, 40.0f, 0.3f); }, kF32);
    for (int type = 0; type < 4; ++type) {
        cases.add("TRI_f32_type" + std::to_string(type),
                  [type](Builder & g) { return ggml_tri(g.ctx(), g.input(GGML_TYPE_F32, {15, 15, 3, 1}), ggml_tri_type(type)); },
                  kExact);
    }
    cases.add("CUMSUM_f32", [](Builder & g) { return ggml_cumsum(g.ctx(), g.input(GGML_TYPE_F32, {129, 7, 3, 1})); },
              kF32);
    cases.add("COUNT_EQUAL_i32",
              [](Builder & g) {
                  return ggml_count_equal(g.ctx(), g.input(GGML_TYPE_I32, {33, 9, 2, 1}, integers(0, 3)),
                                          g.input(GGML_TYPE_I32, {33, 9, 2, 1}, integers(0, 3)));
              },
              kExact);
    cases.add("L2_NORM_f32",
              [](Builder & g) { return ggml_l2_norm(g.ctx(), g.input(GGML_TYPE_F32, {64, 5, 3, 2}), 1e-6f); }, kF32);
    cases.add("DIAG_MASK_ZERO_f32",
              [](Builder & g) { return ggml_diag_mask_zero(g.ctx(), g.input(GGML_TYPE_F32, {13, 9, 3, 2}), 2); }, kExact);
    cases.add("ACC_f32",
              [](Builder & g) {
                  ggml_tensor * a = g.input(GGML_TYPE_F32, {10, 6, 3, 1});
                  return ggml_acc(g.ctx(), a, g.input(GGML_TYPE_F32, {4, 3, 2, 1}), a->nb[1], a->nb[2], a->nb[3],
                                  a->nb[2] + a->nb[1] + 5 * sizeof(float));
              },
              kF32);
    cases.add("SET_f32_2d",
              [](Builder & g) {
                  ggml_tensor * a = g.input(GGML_TYPE_F32, {10, 6, 3, 1});
                  return ggml_set_2d(g.ctx(), a, g.input(GGML_TYPE_F32, {3, 5, 1, 1}), 7 * sizeof(float), 4);
              },
              kExact);
    cases.add("SET_i32",
              [](Builder & g) {
                  ggml_tensor * a = g.input(GGML_TYPE_I32, {8, 5, 2, 1}, integers(-50, 50));
                  return ggml_set(g.ctx(), a, g.input(GGML_TYPE_I32, {3, 2, 2, 1}, integers(-50, 50)), a->nb[1],
                                  a->nb[2], a->nb[3], 2 * sizeof(int32_t));
              },
              kExact);
    cases.add("REPEAT_BACK_f32",
              [](Builder & g) {
                  return ggml_repeat_back(g.ctx(), g.input(GGML_TYPE_F32, {6, 4, 3, 2}), g.input(GGML_TYPE_F32, {3, 2, 1, 1}));
              },
              kF32);
    cases.add("ADD_ID_f32",
              [](Builder & g) {
                  return ggml_add_id(g.ctx(), g.input(GGML_TYPE_F32, {13, 4, 5, 1}), g.input(GGML_TYPE_F32, {13, 6, 1, 1}),
                                     g.input(GGML_TYPE_I32, {4, 5, 1, 1}, integers(0, 5)));
              },
              kF32);
    cases.add("PAD_REFLECT_1D_f32",
              [](Builder & g) { return ggml_pad_reflect_1d(g.ctx(), g.input(GGML_TYPE_F32, {9, 4, 2, 1}), 3, 5); }, kExact);
    cases.add("TIMESTEP_EMBEDDING_f32",
              [](Builder & g) {
                  return ggml_timestep_embedding(g.ctx(), g.input(GGML_TYPE_F32, {7, 1, 1, 1}, uniform(0, 50)), 33, 10000);
              },
              kF32);
}

// Mixture-of-experts products, the recurrent and state-space operators, and
// DeepSeek's lightning indexer and hyper-connection operators.
// Snapshot counts never exceed the token counts, so every element of a
// result is written.
void recurrent_cases(Cases & cases) {
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
        for (int64_t n_b : {1, 4}) {
            cases.add("MUL_MAT_ID_" + tn(t) + "_b" + std::to_string(n_b),
                      [t, n_b](Builder & g) {
                          ggml_tensor * as  = g.input(t, {64, 19, 6, 1});
                          ggml_tensor * b   = g.input(GGML_TYPE_F32, {64, n_b, 7, 1});
                          ggml_tensor * ids = g.input(GGML_TYPE_I32, {4, 7, 1, 1}, integers(0, 5));
                          return ggml_mul_mat_id(g.ctx(), as, b, ids);
                      },
                      kProduct);
        }
    }
    cases.add("SSM_CONV",
              [](Builder & g) {
                  return ggml_ssm_conv(g.ctx(), g.input(GGML_TYPE_F32, {3 + 5, 33, 2, 1}),
                                       g.input(GGML_TYPE_F32, {4, 33, 1, 1}));
              },
              kF32);
    for (bool mamba1 : {true, false}) {
        for (int64_t K : {1, 2}) {
            if (mamba1 && K > 1) {
                continue;
            }
            cases.add(std::string("SSM_SCAN_") + (mamba1 ? "mamba1" : "mamba2") + "_K" + std::to_string(K),
                      [mamba1, K](Builder & g) {
                          const int64_t ds = 16, hd = mamba1 ? 24 : 8, nh = mamba1 ? 1 : 4, ng = mamba1 ? 1 : 2;
                          ggml_tensor * s  = g.input(GGML_TYPE_F32, {ds, hd, nh, 3});
                          ggml_tensor * x  = g.input(GGML_TYPE_F32, {hd, nh, 5, 2});
                          ggml_tensor * dt = g.input(GGML_TYPE_F32, {nh, 5, 2, 1}, uniform(-3, 1));
                          ggml_tensor * A  = g.input(GGML_TYPE_F32, {mamba1 ? ds : 1, nh, 1, 1}, uniform(-2, -0.1));
                          ggml_tensor * B  = g.input(GGML_TYPE_F32, {ds, ng, 5, 2});
                          ggml_tensor * C  = g.input(GGML_TYPE_F32, {ds, ng, 5, 2});
                          ggml_tensor * id = g.input(GGML_TYPE_I32, {2, 1, 1, 1}, integers(0, 2));
                          return ggml_ssm_scan(g.ctx(), s, x, dt, A, B, C, id, K);
                      },
                      kF32);
        }
    }
    cases.add("RWKV_WKV6",
              [](Builder & g) {
                  const Shape   tok = {16, 3, 6, 1};
                  ggml_tensor * k   = g.input(GGML_TYPE_F32, tok);
                  ggml_tensor * v   = g.input(GGML_TYPE_F32, tok);
                  ggml_tensor * r   = g.input(GGML_TYPE_F32, tok);
                  ggml_tensor * tf  = g.input(GGML_TYPE_F32, {16, 3, 1, 1});
                  ggml_tensor * td  = g.input(GGML_TYPE_F32, tok, uniform(0.5, 1));
                  ggml_tensor * s   = g.input(GGML_TYPE_F32, {16 * 16 * 3, 2, 1, 1});
                  return ggml_rwkv_wkv6(g.ctx(), k, v, r, tf, td, s);
              },
              kF32);
    cases.add("GATED_LINEAR_ATTN",
              [](Builder & g) {
                  const Shape   tok = {16, 3, 6, 1};
                  ggml_tensor * k   = g.input(GGML_TYPE_F32, tok);
                  ggml_tensor * v   = g.input(GGML_TYPE_F32, tok);
                  ggml_tensor * q   = g.input(GGML_TYPE_F32, tok);
                  ggml_tensor * gt  = g.input(GGML_TYPE_F32, tok, uniform(0.5, 1));
                  ggml_tensor * s   = g.input(GGML_TYPE_F32, {16 * 16 * 3, 2, 1, 1});
                  return ggml_gated_linear_attn(g.ctx(), k, v, q, gt, s, 0.25f);
              },
              kF32);
    cases.add("RWKV_WKV7",
              [](Builder & g) {
                  const Shape   tok = {16, 3, 6, 1};
                  ggml_tensor * r   = g.input(GGML_TYPE_F32, tok);
                  ggml_tensor * w   = g.input(GGML_TYPE_F32, tok, uniform(0.5, 1));
                  ggml_tensor * k   = g.input(GGML_TYPE_F32, tok);
                  ggml_tensor * v   = g.input(GGML_TYPE_F32, tok);
                  ggml_tensor * a   = g.input(GGML_TYPE_F32, tok, uniform(-0.2, 0.2));
                  ggml_tensor * b   = g.input(GGML_TYPE_F32, tok, uniform(-0.2, 0.2));
                  ggml_tensor * s   = g.input(GGML_TYPE_F32, {16 * 16 * 3, 2, 1, 1});
                  return ggml_rwkv_wkv7(g.ctx(), r, w, k, v, a, b, s);
              },
              kF32);
    for (bool vector_gate : {false, true}) {
        cases.add(std::string("GATED_DELTA_NET_") + (vector_gate ? "vector" : "scalar") + "_gate",
                  [vector_gate](Builder & g) {
                      ggml_tensor * q    = g.input(GGML_TYPE_F32, {16, 2, 4, 2}, uniform(-0.25, 0.25));
                      ggml_tensor * k    = g.input(GGML_TYPE_F32, {16, 2, 4, 2}, uniform(-0.25, 0.25));
                      ggml_tensor * v    = g.input(GGML_TYPE_F32, {16, 4, 4, 2});
                      ggml_tensor * gt   = g.input(GGML_TYPE_F32, {vector_gate ? 16 : 1, 4, 4, 2}, uniform(-1, 0));
                      ggml_tensor * beta = g.input(GGML_TYPE_F32, {1, 4, 4, 2}, uniform(0, 1));
                      ggml_tensor * s    = g.input(GGML_TYPE_F32, {16, 16, 4, 2});
                      return ggml_gated_delta_net(g.ctx(), q, k, v, gt, beta, s, vector_gate ? 1 : 3);
                  },
                  kF32);
    }
    cases.add("SOLVE_TRI",
              [](Builder & g) {
                  // Entries in [1, 2]: forward substitution over 7 rows stays well scaled.
                  ggml_tensor * a = g.input(GGML_TYPE_F32, {7, 7, 2, 3}, uniform(1, 2));
                  ggml_tensor * b = g.input(GGML_TYPE_F32, {5, 7, 2, 3});
                  return ggml_solve_tri(g.ctx(), a, b, true, true, false);
              },
              kF32);
    for (ggml_type kt : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        cases.add("LIGHTNING_INDEXER_k_" + tn(kt),
                  [kt](Builder & g) {
                      ggml_tensor * q = g.input(GGML_TYPE_F32, {32, 4, 5, 2});
                      ggml_tensor * k = g.input(kt, {32, 1, 11, 2});
                      ggml_tensor * w = g.input(GGML_TYPE_F32, {4, 5, 1, 2}, uniform(0, 1));
                      ggml_tensor * m = g.input(GGML_TYPE_F16, {11, 5, 1, 1}, {Init::mask});
                      return ggml_lightning_indexer(g.ctx(), q, k, w, m);
                  },
                  kF32);
    }
    cases.add("DSV4_HC_COMB",
              [](Builder & g) {
                  return ggml_dsv4_hc_comb(g.ctx(), g.input(GGML_TYPE_F32, {24, 7, 1, 1}, uniform(-3, 3)),
                                           g.input(GGML_TYPE_F32, {3, 1, 1, 1}), g.input(GGML_TYPE_F32, {24, 1, 1, 1}),
                                           1e-6f, 4);
              },
              kF32);
    cases.add("DSV4_HC_PRE",
              [](Builder & g) {
                  return ggml_dsv4_hc_pre(g.ctx(), g.input(GGML_TYPE_F32, {33, 4, 5, 1}),
                                          g.input(GGML_TYPE_F32, {4, 5, 1, 1}));
              },
              kF32);
    cases.add("DSV4_HC_PRE_gated",
              [](Builder & g) {
                  return ggml_dsv4_hc_pre_gated(g.ctx(), g.input(GGML_TYPE_F32, {33, 4, 5, 1}),
                                                g.input(GGML_TYPE_F32, {33, 4, 5, 1}, uniform(-4, 4)), 0.5f);
              },
              kF32);
    for (bool comb : {true, false}) {
        cases.add(std::string("DSV4_HC_POST_") + (comb ? "comb" : "identity"),
                  [comb](Builder & g) {
                      ggml_tensor * x    = g.input(GGML_TYPE_F32, {33, 5, 1, 1});
                      ggml_tensor * res  = g.input(GGML_TYPE_F32, {33, 4, 5, 1});
                      ggml_tensor * post = g.input(GGML_TYPE_F32, {4, 5, 1, 1});
                      ggml_tensor * c    = comb ? g.input(GGML_TYPE_F32, {4, 4, 5, 1}) : nullptr;
                      return ggml_dsv4_hc_post(g.ctx(), x, res, post, c);
                  },
                  kF32);
    }
}

// Convolution, pooling and resampling (test_ops_conv.cpp has the numeric tests).
void conv_cases(Cases & cases) {
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        cases.add("IM2COL_2d_" + tn(t),
                  [t](Builder & g) {
                      ggml_tensor * k = g.input(GGML_TYPE_F32, {3, 3, 3, 4});
                      return ggml_im2col(g.ctx(), k, g.input(GGML_TYPE_F32, {11, 9, 3, 2}), 2, 1, 1, 1, 1, 2, true, t);
                  },
                  kExact);
        cases.add("IM2COL_1d_" + tn(t),
                  [t](Builder & g) {
                      ggml_tensor * k = g.input(GGML_TYPE_F32, {5, 3, 2, 1});
                      return ggml_im2col(g.ctx(), k, g.input(GGML_TYPE_F32, {20, 3, 2, 1}), 3, 0, 2, 0, 1, 0, false, t);
                  },
                  kExact);
        cases.add("IM2COL_3D_" + tn(t),
                  [t](Builder & g) {
                      ggml_tensor * k = g.input(GGML_TYPE_F32, {2, 3, 2, 6});
                      return ggml_im2col_3d(g.ctx(), k, g.input(GGML_TYPE_F32, {7, 6, 5, 4}), 2, 1, 2, 1, 0, 1, 1,
                                            1, 1, 2, t);
                  },
                  kExact);
        cases.add("CONV_2D_direct_kernel_" + tn(t),
                  [t](Builder & g) {
                      ggml_tensor * k = g.input(t, {3, 3, 4, 5});
                      return ggml_conv_2d_direct(g.ctx(), k, g.input(GGML_TYPE_F32, {12, 10, 4, 2}), 1, 2, 1, 1, 1, 1);
                  },
                  kF32);
        cases.add("CONV_3D_direct_kernel_" + tn(t),
                  [t](Builder & g) {
                      ggml_tensor * k = g.input(t, {3, 2, 2, 6});
                      return ggml_conv_3d_direct(g.ctx(), k, g.input(GGML_TYPE_F32, {8, 7, 5, 4}), 1, 2, 1, 1, 0, 1,
                                                 1, 1, 2, 2, 2, 3);
                  },
                  kF32);
        cases.add("CONV_2D_DW_kernel_" + tn(t),
                  [t](Builder & g) {
                      ggml_tensor * k = g.input(t, {3, 3, 1, 6});
                      return ggml_conv_2d_dw_direct(g.ctx(), k, g.input(GGML_TYPE_F32, {13, 9, 6, 2}), 2, 1, 1, 1, 1,
                                                    2);
                  },
                  kF32);
        cases.add("CONV_TRANSPOSE_1D_kernel_" + tn(t),
                  [t](Builder & g) {
                      ggml_tensor * k = g.input(t, {5, 3, 4, 1});
                      return ggml_conv_transpose_1d(g.ctx(), k, g.input(GGML_TYPE_F32, {11, 4, 1, 1}), 2, 0, 1);
                  },
                  kF32);
        cases.add("CONV_TRANSPOSE_2D_kernel_" + tn(t),
                  [t](Builder & g) {
                      ggml_tensor * k = g.input(t, {3, 3, 4, 5});
                      return ggml_conv_transpose_2d_p0(g.ctx(), k, g.input(GGML_TYPE_F32, {6, 5, 5, 2}), 2);
                  },
                  kF32);
        cases.add("COL2IM_1D_" + tn(t),
                  [t](Builder & g) { return ggml_col2im_1d(g.ctx(), g.input(t, {12, 9, 1, 1}), 2, 3, 1); },
                  for_type(t));
        cases.add("POOL_1D_" + tn(t),
                  [t](Builder & g) {
                      return ggml_pool_1d(g.ctx(), g.input(t, {19, 3, 2, 1}), GGML_OP_POOL_AVG, 3, 2, 1);
                  },
                  kF32);
        cases.add("POOL_2D_" + tn(t),
                  [t](Builder & g) {
                      return ggml_pool_2d(g.ctx(), g.input(t, {12, 11, 3, 2}), GGML_OP_POOL_MAX, 3, 2, 2, 2, 1, 1);
                  },
                  kExact);
    }
    cases.add("CONV_2D_im2col_f32",
              [](Builder & g) {
                  ggml_tensor * k = g.input(GGML_TYPE_F32, {3, 3, 3, 8});
                  return ggml_conv_2d(g.ctx(), k, g.input(GGML_TYPE_F32, {14, 12, 3, 1}), 1, 1, 1, 1, 1, 1);
              },
              kProduct);
    cases.add("CONV_1D_im2col_f32",
              [](Builder & g) {
                  ggml_tensor * k = g.input(GGML_TYPE_F32, {3, 4, 6, 1});
                  return ggml_conv_1d(g.ctx(), k, g.input(GGML_TYPE_F32, {30, 4, 2, 1}), 1, 1, 1);
              },
              kProduct);
    const uint32_t modes[] = {GGML_SCALE_MODE_NEAREST, GGML_SCALE_MODE_BILINEAR, GGML_SCALE_MODE_BICUBIC,
                              uint32_t(GGML_SCALE_MODE_BILINEAR) | GGML_SCALE_FLAG_ALIGN_CORNERS,
                              uint32_t(GGML_SCALE_MODE_BILINEAR) | GGML_SCALE_FLAG_ANTIALIAS};
    for (uint32_t mode : modes) {
        cases.add("UPSCALE_mode" + std::to_string(mode),
                  [mode](Builder & g) {
                      return ggml_interpolate(g.ctx(), g.input(GGML_TYPE_F32, {7, 6, 3, 2}), 11, 4, 3, 2, mode);
                  },
                  kF32);
    }
    cases.add("WIN_PART_f32", [](Builder & g) { return ggml_win_part(g.ctx(), g.input(GGML_TYPE_F32, {6, 10, 9, 1}), 4); },
              kExact);
    cases.add("WIN_UNPART_f32",
              [](Builder & g) { return ggml_win_unpart(g.ctx(), g.input(GGML_TYPE_F32, {6, 4, 4, 9}), 10, 9, 4); },
              kExact);
    cases.add("GET_REL_POS_f16",
              [](Builder & g) { return ggml_get_rel_pos(g.ctx(), g.input(GGML_TYPE_F16, {8, 9, 1, 1}), 5, 5); },
              kExact);
    cases.add("ADD_REL_POS_f32",
              [](Builder & g) {
                  ggml_tensor * a  = g.input(GGML_TYPE_F32, {9, 8, 2, 1});
                  ggml_tensor * pw = g.input(GGML_TYPE_F32, {3, 4, 2, 2});
                  return ggml_add_rel_pos(g.ctx(), a, pw, g.input(GGML_TYPE_F32, {3, 4, 2, 2}));
              },
              kF32);
}

// Backward operators, the loss and the optimizer steps (CPU kernels in
// kernels/backward.cpp, kernels/train.cpp), and the multi-section rope modes.
void backward_cases(Cases & cases) {
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        cases.add("SILU_BACK_" + tn(t),
                  [t](Builder & g) {
                      return ggml_silu_back(g.ctx(), g.input(t, {33, 5, 3, 1}),
                                            g.input(t, {33, 5, 3, 1}, uniform(-4, 4)));
                  },
                  for_type(t));
    }
    cases.add("RMS_NORM_BACK_f32",
              [](Builder & g) {
                  return ggml_rms_norm_back(g.ctx(), g.input(GGML_TYPE_F32, {31, 7, 2, 1}),
                                            g.input(GGML_TYPE_F32, {31, 7, 2, 1}), 1e-6f);
              },
              kF32);
    cases.add("SOFT_MAX_BACK_f32_scale",
              [](Builder & g) {
                  return ggml_soft_max_ext_back(g.ctx(), g.input(GGML_TYPE_F32, {29, 5, 3, 1}),
                                                g.input(GGML_TYPE_F32, {29, 5, 3, 1}, uniform(0, 0.1)), 0.5f, 0.0f);
              },
              kF32);
    cases.add("CROSS_ENTROPY_LOSS_f32",
              [](Builder & g) {
                  return ggml_cross_entropy_loss(g.ctx(), g.input(GGML_TYPE_F32, {37, 9, 1, 1}, uniform(-3, 3)),
                                                 g.input(GGML_TYPE_F32, {37, 9, 1, 1}, uniform(0, 0.05)));
              },
              kF32);
    cases.add("CROSS_ENTROPY_LOSS_BACK_f32",
              [](Builder & g) {
                  return ggml_cross_entropy_loss_back(g.ctx(), g.input(GGML_TYPE_F32, {1, 1, 1, 1}),
                                                      g.input(GGML_TYPE_F32, {37, 9, 1, 1}, uniform(-3, 3)),
                                                      g.input(GGML_TYPE_F32, {37, 9, 1, 1}, uniform(0, 0.05)));
              },
              kF32);
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        cases.add("GET_ROWS_BACK_" + tn(t),
                  [t](Builder & g) {
                      return ggml_get_rows_back(g.ctx(), g.input(t, {19, 11, 1, 1}),
                                                g.input(GGML_TYPE_I32, {11, 1, 1, 1}, integers(0, 6)),
                                                g.input(GGML_TYPE_F32, {19, 7, 1, 1}));
                  },
                  kF32);
    }
    for (ggml_op_pool op : {GGML_OP_POOL_MAX, GGML_OP_POOL_AVG}) {
        cases.add(std::string("POOL_2D_BACK_") + (op == GGML_OP_POOL_MAX ? "max" : "avg"),
                  [op](Builder & g) {
                      ggml_tensor * af = g.input(GGML_TYPE_F32, {11, 9, 3, 2}, {Init::distinct, -1, 1});
                      return ggml_pool_2d_back(g.ctx(), g.input(GGML_TYPE_F32, {5, 5, 3, 2}), af, op, 3, 2, 2, 2,
                                               1, 1);
                  },
                  kF32);
    }
    cases.add("IM2COL_BACK_2d",
              [](Builder & g) {
                  int64_t ne[4] = {9, 7, 3, 2};
                  // im2col of [9, 7, 3, 2] under a 3x2 kernel, s (2, 1), p (1, 0), d (1, 2): OW 5, OH 5.
                  return ggml_im2col_back(g.ctx(), g.input(GGML_TYPE_F32, {18, 5, 5, 2}),
                                          g.input(GGML_TYPE_F16, {3, 2, 3, 4}), ne, 2, 1, 1, 0, 1, 2, true);
              },
              kF32);
    cases.add("OPT_STEP_ADAMW_f32",
              [](Builder & g) {
                  ggml_tensor * w = g.input(GGML_TYPE_F32, {23, 5, 2, 1});
                  ggml_set_param(w);
                  return ggml_opt_step_adamw(g.ctx(), w, g.input(GGML_TYPE_F32, {23, 5, 2, 1}),
                                             g.input(GGML_TYPE_F32, {23, 5, 2, 1}),
                                             g.input(GGML_TYPE_F32, {23, 5, 2, 1}, uniform(0, 1)),
                                             g.input(GGML_TYPE_F32, {7, 1, 1, 1}, uniform(0.1, 0.9)));
              },
              kF32);
    cases.add("OPT_STEP_SGD_f32",
              [](Builder & g) {
                  ggml_tensor * w = g.input(GGML_TYPE_F32, {23, 5, 2, 1});
                  ggml_set_param(w);
                  return ggml_opt_step_sgd(g.ctx(), w, g.input(GGML_TYPE_F32, {23, 5, 2, 1}),
                                           g.input(GGML_TYPE_F32, {2, 1, 1, 1}, uniform(0, 0.5)));
              },
              kF32);
    struct Multi {
        const char * name;
        int          mode, head, n_dims, sections[4], n_offs;
    };
    const Multi multi[] = {{"mrope", GGML_ROPE_TYPE_MROPE, 18, 16, {4, 2, 2, 0}, 0},
                           {"imrope_offset", GGML_ROPE_TYPE_IMROPE, 20, 16, {3, 3, 2, 0}, 2},
                           {"vision", GGML_ROPE_TYPE_VISION, 8, 4, {2, 2, 0, 0}, 0}};
    for (const Multi & m : multi) {
        for (bool back : {false, true}) {
            for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) {
                cases.add(std::string(back ? "ROPE_BACK_" : "ROPE_") + tn(t) + "_" + m.name,
                          [m, back, t](Builder & g) {
                              ggml_tensor * a   = g.input(t, {m.head, 3, 5, 1});
                              ggml_tensor * pos = g.input(GGML_TYPE_I32, {20, 1, 1, 1}, integers(0, 60));
                              int           sec[4] = {m.sections[0], m.sections[1], m.sections[2], m.sections[3]};
                              ggml_tensor * r =
                                  back ? ggml_rope_multi_back(g.ctx(), a, pos, nullptr, m.n_dims, sec, m.mode, 0,
                                                              10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f)
                                       : ggml_rope_multi(g.ctx(), a, pos, nullptr, m.n_dims, sec, m.mode, 0, 10000.0f,
                                                         1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
                              return m.n_offs != 0 ? ggml_rope_set_offset(r, m.n_offs) : r;
                          },
                          kF16);
            }
        }
    }
}

} // namespace

const std::vector<OpCase> & all_cases() {
    static const std::vector<OpCase> list = [] {
        Cases cases;
        binary_cases(cases);
        scale_cases(cases);
        math_cases(cases);
        unary_cases(cases);
        glu_cases(cases);
        reduce_cases(cases);
        repeat_concat_cases(cases);
        norm_cases(cases);
        matmul_cases(cases);
        copy_cases(cases);
        softmax_cases(cases);
        rope_cases(cases);
        sort_cases(cases);
        attention_cases(cases);
        conv_cases(cases);
        fill_cases(cases);
        recurrent_cases(cases);
        backward_cases(cases);
        return cases.take();
    }();
    return list;
}

} // namespace loomtest::ops
