// Element-wise ops, reductions, repeat and concat against the double reference.
//
// Thresholds (NMSE unless stated):
//   f32 results        1e-10  one float rounding per element (or a float sum of a short row)
//   f16 results        1e-6   storing into f16 loses up to 2^-11 relatively (NMSE <= 2.4e-7)
//   bf16 results       5e-5   storing into bf16 loses up to 2^-8 relatively (NMSE <= 1.5e-5)
//   gelu, gelu_quick   1e-6   ggml evaluates them through an f16 table of the input
//   copies, selections exact  (max abs diff 0)

#include <algorithm>
#include <cmath>
#include <vector>

#include "test_util.h"

using namespace loomtest;

namespace {

constexpr double kF32   = 1e-10;
constexpr double kF16   = 1e-6;
constexpr double kBF16  = 5e-5;
constexpr double kExact = 0.0;

double threshold_for(ggml_type t) {
    switch (t) {
        case GGML_TYPE_F16: return kF16;
        case GGML_TYPE_BF16: return kBF16;
        default: return kF32;
    }
}

Shape random_shape(std::mt19937 & rng) {
    return {odd_size(rng, 1, 37), odd_size(rng, 1, 9), rand_int(rng, 1, 4), rand_int(rng, 1, 3)};
}

ggml_tensor * new_tensor(ggml_context * ctx, ggml_type type, const Shape & ne) {
    return ggml_new_tensor_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]);
}

using BinaryFn = ggml_tensor * (*) (ggml_context *, ggml_tensor *, ggml_tensor *);

struct BinaryOpCase {
    const char *  name;
    BinaryFn      fn;
    ref::BinaryOp op;
};

const BinaryOpCase kBinaryOps[] = {
    {"add", ggml_add, ref::BinaryOp::add},
    {"sub", ggml_sub, ref::BinaryOp::sub},
    {"mul", ggml_mul, ref::BinaryOp::mul},
    {"div", ggml_div, ref::BinaryOp::div},
};

// Shapes of b that repeat to a: each dimension is a's, 1, or a divisor.
std::vector<Shape> broadcast_shapes(const Shape & a) {
    return {
        a,
        {a[0], 1, 1, 1},
        {1, a[1], 1, a[3]},
        {a[0], a[1], 1, 1},
        {1, 1, 1, 1},
        {a[0], 1, a[2], 1},
    };
}

// b values for division stay away from zero.
Array fill_operand(ggml_tensor * t, std::mt19937 & rng, ref::BinaryOp op) {
    if (op == ref::BinaryOp::div) {
        Array v = random_array(shape_of(t), rng, 0.5, 2.0);
        for (size_t i = 0; i < v.v.size(); i += 2) {
            v.v[i] = -v.v[i];
        }
        write_tensor(t, v);
        return read_tensor(t);
    }
    return fill_random(t, rng);
}

} // namespace

TEST(OpsBinary, BroadcastF32) {
    for (unsigned seed : seeds()) {
        std::mt19937 rng(seed);
        const Shape  sa = random_shape(rng);
        for (const Shape & sb : broadcast_shapes(sa)) {
            for (const BinaryOpCase & c : kBinaryOps) {
                SCOPED_TRACE(std::string(c.name) + " a " + shape_str(sa) + " b " + shape_str(sb));
                Context       ctx;
                ggml_tensor * a = new_tensor(ctx, GGML_TYPE_F32, sa);
                ggml_tensor * b = new_tensor(ctx, GGML_TYPE_F32, sb);
                const Array   A = fill_random(a, rng);
                const Array   B = fill_operand(b, rng, c.op);
                check_modes(ctx, c.fn(ctx, a, b), ref::binary(c.op, A, B), kF32);
            }
        }
    }
}

TEST(OpsBinary, LongRows) {
    // Rows much longer than any vector width, with a ragged tail.
    std::mt19937 rng(13);
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16}) {
        for (const BinaryOpCase & c : kBinaryOps) {
            SCOPED_TRACE(std::string(c.name) + " " + ggml_type_name(type));
            Context       ctx;
            ggml_tensor * a = ggml_new_tensor_2d(ctx, type, 1031, 3);
            ggml_tensor * b = ggml_new_tensor_2d(ctx, type, 1031, 1);
            const Array   A = fill_random(a, rng);
            const Array   B = fill_operand(b, rng, c.op);
            check_modes(ctx, c.fn(ctx, a, b), ref::binary(c.op, A, B), threshold_for(type));
        }
    }
}

TEST(OpsBinary, RepeatByDivisors) {
    // b is repeated 3, 2, 2 and 2 times along the four dimensions.
    std::mt19937 rng(7);
    const Shape  sa = {15, 6, 4, 2};
    const Shape  sb = {5, 3, 2, 1};
    for (const BinaryOpCase & c : kBinaryOps) {
        SCOPED_TRACE(c.name);
        Context       ctx;
        ggml_tensor * a = new_tensor(ctx, GGML_TYPE_F32, sa);
        ggml_tensor * b = new_tensor(ctx, GGML_TYPE_F32, sb);
        const Array   A = fill_random(a, rng);
        const Array   B = fill_operand(b, rng, c.op);
        check_modes(ctx, c.fn(ctx, a, b), ref::binary(c.op, A, B), kF32);
    }
}

TEST(OpsBinary, MixedTypes) {
    struct TypeCase {
        ggml_type a, b;
    };
    const TypeCase types[] = {
        {GGML_TYPE_F16, GGML_TYPE_F16},
        {GGML_TYPE_F16, GGML_TYPE_F32},
        {GGML_TYPE_BF16, GGML_TYPE_BF16},
        {GGML_TYPE_BF16, GGML_TYPE_F32},
    };
    for (unsigned seed : seeds()) {
        std::mt19937 rng(seed);
        const Shape  sa = random_shape(rng);
        const Shape  sb = {sa[0], 1, sa[2], 1};
        for (const TypeCase & t : types) {
            for (const BinaryOpCase & c : kBinaryOps) {
                SCOPED_TRACE(std::string(c.name) + " " + ggml_type_name(t.a) + " x " + ggml_type_name(t.b) + " a " +
                             shape_str(sa));
                Context       ctx;
                ggml_tensor * a   = new_tensor(ctx, t.a, sa);
                ggml_tensor * b   = new_tensor(ctx, t.b, sb);
                const Array   A   = fill_random(a, rng);
                const Array   B   = fill_operand(b, rng, c.op);
                ggml_tensor * out = c.fn(ctx, a, b);
                ASSERT_EQ(out->type, t.a);
                check_modes(ctx, out, ref::binary(c.op, A, B), threshold_for(t.a));
            }
        }
    }
}

TEST(OpsBinary, AddCast) {
    struct TypeCase {
        ggml_type a, b, out;
    };
    const TypeCase types[] = {
        {GGML_TYPE_F16, GGML_TYPE_F32, GGML_TYPE_F32},
        {GGML_TYPE_BF16, GGML_TYPE_F32, GGML_TYPE_F32},
        {GGML_TYPE_F32, GGML_TYPE_F32, GGML_TYPE_F16},
    };
    std::mt19937 rng(11);
    for (const TypeCase & t : types) {
        SCOPED_TRACE(std::string(ggml_type_name(t.a)) + " + " + ggml_type_name(t.b) + " -> " +
                     ggml_type_name(t.out));
        const Shape   sa = random_shape(rng);
        Context       ctx;
        ggml_tensor * a   = new_tensor(ctx, t.a, sa);
        ggml_tensor * b   = new_tensor(ctx, t.b, {sa[0], sa[1], 1, 1});
        const Array   A   = fill_random(a, rng);
        const Array   B   = fill_random(b, rng);
        ggml_tensor * out = ggml_add_cast(ctx, a, b, t.out);
        ASSERT_EQ(out->type, t.out);
        check_modes(ctx, out, ref::binary(ref::BinaryOp::add, A, B), threshold_for(t.out));
    }
}

TEST(OpsBinary, NonContiguousOperands) {
    std::mt19937 rng(3);
    for (const BinaryOpCase & c : kBinaryOps) {
        SCOPED_TRACE(c.name);
        Context ctx;
        // a: dims 1 and 2 of a contiguous tensor swapped (rows stay contiguous).
        ggml_tensor * a_base = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 13, 5, 7, 2);
        fill_random(a_base, rng);
        ggml_tensor * a = ggml_permute(ctx, a_base, 0, 2, 1, 3);
        // b: rows of a padded tensor, broadcast over dims 2 and 3.
        ggml_tensor * b_base = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 16, 7);
        fill_operand(b_base, rng, c.op);
        ggml_tensor * b = ggml_view_2d(ctx, b_base, 13, 7, b_base->nb[1], sizeof(float));
        check_modes(ctx, c.fn(ctx, a, b), ref::binary(c.op, read_tensor(a), read_tensor(b)), kF32);
    }
}

TEST(OpsBinary, TransposedSecondOperand) {
    std::mt19937 rng(5);
    for (const BinaryOpCase & c : kBinaryOps) {
        SCOPED_TRACE(c.name);
        Context       ctx;
        ggml_tensor * a      = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 11, 9);
        ggml_tensor * b_base = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 9, 11);
        const Array   A      = fill_random(a, rng);
        fill_operand(b_base, rng, c.op);
        ggml_tensor * b = ggml_transpose(ctx, b_base);
        check_modes(ctx, c.fn(ctx, a, b), ref::binary(c.op, A, read_tensor(b)), kF32);
    }
}

TEST(OpsBinary, Inplace) {
    using InplaceFn = ggml_tensor * (*) (ggml_context *, ggml_tensor *, ggml_tensor *);
    const std::pair<InplaceFn, ref::BinaryOp> ops[] = {
        {ggml_add_inplace, ref::BinaryOp::add},
        {ggml_sub_inplace, ref::BinaryOp::sub},
        {ggml_mul_inplace, ref::BinaryOp::mul},
        {ggml_div_inplace, ref::BinaryOp::div},
    };
    std::mt19937 rng(17);
    for (const auto & [fn, op] : ops) {
        for (const RunMode & mode : run_modes()) {
            SCOPED_TRACE(describe(mode));
            Context       ctx;
            ggml_tensor * a   = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 21, 5, 3);
            ggml_tensor * b   = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 21, 1, 3);
            const Array   A   = fill_random(a, rng);
            const Array   B   = fill_operand(b, rng, op);
            ggml_tensor * out = fn(ctx, a, b);
            ASSERT_EQ(out->data, a->data);
            ASSERT_EQ(compute(ctx, out, mode), GGML_STATUS_SUCCESS);
            EXPECT_TRUE(matches(a, ref::binary(op, A, B), kF32));
        }
    }
}

TEST(OpsBinary, Add1) {
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        SCOPED_TRACE(ggml_type_name(type));
        std::mt19937  rng(23);
        Context       ctx;
        ggml_tensor * a = new_tensor(ctx, type, random_shape(rng));
        ggml_tensor * s = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1);
        const Array   A = fill_random(a, rng);
        const Array   S = fill_random(s, rng, -2.0, 2.0);
        check_modes(ctx, ggml_add1(ctx, a, s), ref::add1(A, S.v[0]), threshold_for(type));
    }
}

TEST(OpsScale, ScaleAndBias) {
    for (unsigned seed : seeds()) {
        std::mt19937  rng(seed);
        Context       ctx;
        ggml_tensor * a = new_tensor(ctx, GGML_TYPE_F32, random_shape(rng));
        const Array   A = fill_random(a, rng);
        check_modes(ctx, ggml_scale(ctx, a, 0.37f), ref::scale(A, double(0.37f), 0.0), kF32);
        check_modes(ctx, ggml_scale_bias(ctx, a, -1.25f, 0.5f), ref::scale(A, -1.25, 0.5), kF32);
    }
}

TEST(OpsScale, Inplace) {
    std::mt19937 rng(29);
    Context       ctx;
    ggml_tensor * a   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 33, 7);
    const Array   A   = fill_random(a, rng);
    ggml_tensor * out = ggml_scale_bias_inplace(ctx, a, 3.0f, -0.25f);
    ASSERT_EQ(compute(ctx, out, 2), GGML_STATUS_SUCCESS);
    EXPECT_TRUE(matches(a, ref::scale(A, 3.0, -0.25), kF32));
}

namespace {

struct MathCase {
    const char * name;
    ggml_tensor * (*fn)(ggml_context *, ggml_tensor *);
    ggml_op op;
    double  lo, hi;
};

const MathCase kMathOps[] = {
    {"sqr", ggml_sqr, GGML_OP_SQR, -3.0, 3.0},
    {"sqrt", ggml_sqrt, GGML_OP_SQRT, 0.0, 5.0},
    {"log", ggml_log, GGML_OP_LOG, 0.05, 5.0},
    {"sin", ggml_sin, GGML_OP_SIN, -6.0, 6.0},
    {"cos", ggml_cos, GGML_OP_COS, -6.0, 6.0},
};

} // namespace

TEST(OpsMath, ElementWise) {
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        for (const MathCase & c : kMathOps) {
            SCOPED_TRACE(std::string(c.name) + " " + ggml_type_name(type));
            std::mt19937  rng(31);
            Context       ctx;
            ggml_tensor * a = new_tensor(ctx, type, random_shape(rng));
            const Array   A = fill_random(a, rng, c.lo, c.hi);
            check_modes(ctx, c.fn(ctx, a), ref::math(c.op, A), threshold_for(type));
        }
    }
}

namespace {

// GELU and GELU_QUICK in F32: measured 1.6e-15 and 2.8e-15 (every kernel
// table, every thread count; the kernels compute in float, no table of F16
// values); a limit about 35 times that. Results of F16 precision reach
// ~1e-8 (OpsUnary.F16PrecisionFailsTheF32Limits).
constexpr double kF32Gelu = 1e-13;

struct UnaryCase {
    ggml_unary_op op;
    ggml_tensor * (*fn)(ggml_context *, ggml_tensor *);
    double f32_threshold;
};

const UnaryCase kUnaryOps[] = {
    {GGML_UNARY_OP_ABS, ggml_abs, kExact},
    {GGML_UNARY_OP_SGN, ggml_sgn, kExact},
    {GGML_UNARY_OP_NEG, ggml_neg, kExact},
    {GGML_UNARY_OP_STEP, ggml_step, kExact},
    {GGML_UNARY_OP_TANH, ggml_tanh, kF32},
    {GGML_UNARY_OP_ELU, ggml_elu, kF32},
    {GGML_UNARY_OP_RELU, ggml_relu, kExact},
    {GGML_UNARY_OP_SIGMOID, ggml_sigmoid, kF32},
    {GGML_UNARY_OP_GELU, ggml_gelu, kF32Gelu},
    {GGML_UNARY_OP_GELU_QUICK, ggml_gelu_quick, kF32Gelu},
    {GGML_UNARY_OP_SILU, ggml_silu, kF32},
    {GGML_UNARY_OP_HARDSWISH, ggml_hardswish, kF32},
    {GGML_UNARY_OP_HARDSIGMOID, ggml_hardsigmoid, kF32},
    {GGML_UNARY_OP_EXP, ggml_exp, kF32},
    {GGML_UNARY_OP_EXPM1, ggml_expm1, kF32},
    {GGML_UNARY_OP_SOFTPLUS, ggml_softplus, kF32},
    {GGML_UNARY_OP_GELU_ERF, ggml_gelu_erf, kF32},
    {GGML_UNARY_OP_FLOOR, ggml_floor, kExact},
    {GGML_UNARY_OP_CEIL, ggml_ceil, kExact},
    {GGML_UNARY_OP_ROUND, ggml_round, kExact},
    {GGML_UNARY_OP_TRUNC, ggml_trunc, kExact},
};

// Inputs in [-5, 5] plus the points where the functions change form.
Array unary_input(ggml_tensor * t, std::mt19937 & rng) {
    Array        v       = random_array(shape_of(t), rng, -5.0, 5.0);
    const double specials[] = {0.0, -0.0, -3.0, 3.0, 1.0, -1.0, 2.5, -0.5, -2.5};
    for (size_t i = 0; i < v.v.size() && i < std::size(specials); ++i) {
        v.v[i * 3 % v.v.size()] = specials[i];
    }
    write_tensor(t, v);
    return read_tensor(t);
}

} // namespace

TEST(OpsUnary, AllOpsF32) {
    for (unsigned seed : seeds()) {
        for (const UnaryCase & c : kUnaryOps) {
            SCOPED_TRACE(ggml_unary_op_name(c.op));
            std::mt19937  rng(seed);
            Context       ctx;
            ggml_tensor * a   = new_tensor(ctx, GGML_TYPE_F32, random_shape(rng));
            const Array   A   = unary_input(a, rng);
            ggml_tensor * out = c.fn(ctx, a);
            ASSERT_EQ(ggml_get_unary_op(out), c.op);
            check_modes(ctx, out, ref::unary(c.op, A), c.f32_threshold, c.f32_threshold == kExact ? 0.0 : -1.0);
        }
    }
}

// The F32 limits see a loss of precision: the reference's results rounded
// to F16 (what a kernel computing in F16 would give at best) fail each
// inexact one.
TEST(OpsUnary, F16PrecisionFailsTheF32Limits) {
    for (const UnaryCase & c : kUnaryOps) {
        if (c.f32_threshold == kExact) {
            continue;
        }
        SCOPED_TRACE(ggml_unary_op_name(c.op));
        std::mt19937  rng(43);
        Context       ctx;
        ggml_tensor * a    = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 257, 3);
        const Array   want = ref::unary(c.op, unary_input(a, rng));
        Array         f16  = want;
        for (double & x : f16.v) {
            x = round_to_f16(x);
        }
        EXPECT_GT(nmse(f16, want), c.f32_threshold);
        EXPECT_FALSE(matches(f16, want, c.f32_threshold));
    }
}

TEST(OpsUnary, AllOpsThroughGgmlUnary) {
    std::mt19937 rng(37);
    for (const UnaryCase & c : kUnaryOps) {
        SCOPED_TRACE(ggml_unary_op_name(c.op));
        Context       ctx;
        ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 17, 3);
        const Array   A = unary_input(a, rng);
        check_modes(ctx, ggml_unary(ctx, a, c.op), ref::unary(c.op, A), c.f32_threshold);
    }
}

TEST(OpsUnary, AllOpsF16) {
    std::mt19937 rng(41);
    for (const UnaryCase & c : kUnaryOps) {
        SCOPED_TRACE(ggml_unary_op_name(c.op));
        Context       ctx;
        ggml_tensor * a = new_tensor(ctx, GGML_TYPE_F16, random_shape(rng));
        const Array   A = unary_input(a, rng);
        check_modes(ctx, c.fn(ctx, a), ref::unary(c.op, A), kF16);
    }
}

TEST(OpsUnary, LongRows) {
    std::mt19937 rng(45);
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        for (const UnaryCase & c : kUnaryOps) {
            SCOPED_TRACE(std::string(ggml_unary_op_name(c.op)) + " " + ggml_type_name(type));
            Context       ctx;
            ggml_tensor * a = ggml_new_tensor_2d(ctx, type, 1031, 2);
            const Array   A = unary_input(a, rng);
            check_modes(ctx, c.fn(ctx, a), ref::unary(c.op, A), type == GGML_TYPE_F32 ? c.f32_threshold : kF16);
        }
    }
}

TEST(OpsUnary, NonContiguousRows) {
    std::mt19937 rng(43);
    for (const UnaryCase & c : kUnaryOps) {
        SCOPED_TRACE(ggml_unary_op_name(c.op));
        Context       ctx;
        ggml_tensor * base = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 20, 6, 5);
        unary_input(base, rng);
        // Rows of 15 elements starting at element 2 of rows of 20, dims 1 and 2 swapped.
        ggml_tensor * view = ggml_view_3d(ctx, base, 15, 6, 5, base->nb[1], base->nb[2], 2 * sizeof(float));
        ggml_tensor * a    = ggml_permute(ctx, view, 0, 2, 1, 3);
        check_modes(ctx, c.fn(ctx, a), ref::unary(c.op, read_tensor(a)), c.f32_threshold);
    }
}

TEST(OpsUnary, Inplace) {
    std::mt19937  rng(47);
    Context       ctx;
    ggml_tensor * a   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 31, 3);
    const Array   A   = fill_random(a, rng, -3.0, 3.0);
    ggml_tensor * out = ggml_silu_inplace(ctx, a);
    ASSERT_EQ(out->data, a->data);
    ASSERT_EQ(compute(ctx, out, 2), GGML_STATUS_SUCCESS);
    EXPECT_TRUE(matches(a, ref::unary(GGML_UNARY_OP_SILU, A), kF32));
}

TEST(OpsReduce, SumSumRowsMean) {
    for (unsigned seed : seeds()) {
        std::mt19937  rng(seed);
        Context       ctx;
        const Shape   s = {odd_size(rng, 1, 101), odd_size(rng, 1, 9), rand_int(rng, 1, 4), rand_int(rng, 1, 3)};
        ggml_tensor * a = new_tensor(ctx, GGML_TYPE_F32, s);
        const Array   A = fill_random(a, rng);
        SCOPED_TRACE(shape_str(s));
        check_modes(ctx, ggml_sum(ctx, a), ref::sum(A), kF32);
        check_modes(ctx, ggml_sum_rows(ctx, a), ref::sum_rows(A), kF32);
        ggml_tensor * m = ggml_mean(ctx, a);
        ASSERT_EQ(m->type, GGML_TYPE_F32);
        check_modes(ctx, m, ref::mean(A), kF32);
    }
}

TEST(OpsReduce, LargeSum) {
    // Enough elements for the sum to be shared between threads.
    std::mt19937  rng(51);
    Context       ctx;
    ggml_tensor * a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 1001, 97, 3);
    const Array   A = fill_random(a, rng);
    check_modes(ctx, ggml_sum(ctx, a), ref::sum(A), kF32);
    check_modes(ctx, ggml_sum_rows(ctx, a), ref::sum_rows(A), kF32);
}

TEST(OpsReduce, NonContiguousSource) {
    std::mt19937  rng(53);
    Context       ctx;
    ggml_tensor * base = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 9, 7, 5);
    fill_random(base, rng);
    ggml_tensor * a = ggml_permute(ctx, base, 0, 2, 1, 3);
    const Array   A = read_tensor(a);
    check_modes(ctx, ggml_sum(ctx, a), ref::sum(A), kF32);
    check_modes(ctx, ggml_sum_rows(ctx, a), ref::sum_rows(A), kF32);
    check_modes(ctx, ggml_mean(ctx, a), ref::mean(A), kF32);
}

TEST(OpsReduce, Argmax) {
    for (unsigned seed : seeds()) {
        std::mt19937  rng(seed);
        Context       ctx;
        ggml_tensor * a   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, odd_size(rng, 1, 201), odd_size(rng, 1, 15));
        const Array   A   = fill_random(a, rng, -10.0, 10.0);
        ggml_tensor * out = ggml_argmax(ctx, a);
        ASSERT_EQ(out->type, GGML_TYPE_I32);
        check_modes(ctx, out, ref::argmax(A), kExact, 0.0);
    }
}

TEST(OpsRepeat, Repeat) {
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        for (unsigned seed : seeds()) {
            std::mt19937 rng(seed);
            const Shape  sa = {odd_size(rng, 1, 9), odd_size(rng, 1, 5), rand_int(rng, 1, 3), rand_int(rng, 1, 2)};
            const Shape  sr = {sa[0] * rand_int(rng, 1, 3), sa[1] * rand_int(rng, 1, 3), sa[2] * rand_int(rng, 1, 3),
                               sa[3] * rand_int(rng, 1, 3)};
            SCOPED_TRACE(std::string(ggml_type_name(type)) + " " + shape_str(sa) + " -> " + shape_str(sr));
            Context       ctx;
            ggml_tensor * a    = new_tensor(ctx, type, sa);
            ggml_tensor * like = new_tensor(ctx, type, sr);
            const Array   A    = fill_random(a, rng);
            check_modes(ctx, ggml_repeat(ctx, a, like), ref::repeat(A, sr), kExact, 0.0);
            check_modes(ctx, ggml_repeat_4d(ctx, a, sr[0], sr[1], sr[2], sr[3]), ref::repeat(A, sr), kExact, 0.0);
        }
    }
}

TEST(OpsConcat, EachDim) {
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        for (int dim = 0; dim < 4; ++dim) {
            std::mt19937 rng(59 + unsigned(dim));
            Shape        sa = {odd_size(rng, 1, 11), odd_size(rng, 1, 5), rand_int(rng, 1, 3), rand_int(rng, 1, 3)};
            Shape        sb = sa;
            sb[size_t(dim)] = odd_size(rng, 1, 5);
            SCOPED_TRACE(std::string(ggml_type_name(type)) + " dim " + std::to_string(dim) + " " + shape_str(sa) +
                         " + " + shape_str(sb));
            Context       ctx;
            ggml_tensor * a = new_tensor(ctx, type, sa);
            ggml_tensor * b = new_tensor(ctx, type, sb);
            const Array   A = fill_random(a, rng);
            const Array   B = fill_random(b, rng);
            check_modes(ctx, ggml_concat(ctx, a, b, dim), ref::concat(A, B, dim), kExact, 0.0);
        }
    }
}

// Block types: rows of whole blocks copied as they are (the result dequantizes
// to exactly the operands' values); dim 0 only in whole blocks.
TEST(OpsConcat, BlockTypes) {
    for (ggml_type type : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_K}) {
        const int64_t blk = ggml_blck_size(type);
        for (int dim = 0; dim < 4; ++dim) {
            std::mt19937 rng(83 + unsigned(dim));
            Shape        sa = {blk * rand_int(rng, 1, 2), odd_size(rng, 1, 5), rand_int(rng, 1, 3), rand_int(rng, 1, 3)};
            Shape        sb = sa;
            sb[size_t(dim)] = dim == 0 ? blk : odd_size(rng, 1, 5);
            SCOPED_TRACE(std::string(ggml_type_name(type)) + " dim " + std::to_string(dim));
            Context       ctx;
            ggml_tensor * a = new_tensor(ctx, type, sa);
            ggml_tensor * b = new_tensor(ctx, type, sb);
            const Array   A = fill_random(a, rng);
            const Array   B = fill_random(b, rng);
            check_modes(ctx, ggml_concat(ctx, a, b, dim), ref::concat(A, B, dim), kExact, 0.0);
        }
    }
    Context       ctx;
    ggml_tensor * a   = ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_0, 32, 2);
    ggml_tensor * b   = ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_0, 32, 2);
    ggml_tensor * out = ggml_concat(ctx, a, b, 0);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ASSERT_NE(cpu, nullptr);
    EXPECT_TRUE(ggml_backend_supports_op(cpu, out));
    // Rows that are runs of blocks, reached through other strides.
    ggml_tensor * a3  = ggml_new_tensor_3d(ctx, GGML_TYPE_Q8_0, 32, 2, 3);
    ggml_tensor * t   = ggml_permute(ctx, a3, 0, 2, 1, 3);
    ggml_tensor * odd = ggml_concat(ctx, ggml_cont(ctx, t), t, 2);
    EXPECT_TRUE(ggml_backend_supports_op(cpu, odd)); // rows are still runs of blocks
    ggml_backend_free(cpu);
}

TEST(OpsConcat, NonContiguousOperand) {
    std::mt19937  rng(61);
    Context       ctx;
    ggml_tensor * a      = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 7, 4);
    ggml_tensor * b_base = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 5, 7);
    const Array   A      = fill_random(a, rng);
    fill_random(b_base, rng);
    ggml_tensor * b = ggml_transpose(ctx, b_base); // [7, 5], not contiguous
    check_modes(ctx, ggml_concat(ctx, a, b, 1), ref::concat(A, read_tensor(b), 1), kExact, 0.0);
}

// ---- gated linear units ----

namespace {

struct GluCase {
    ggml_glu_op op;
    ggml_tensor * (*fn)(ggml_context *, ggml_tensor *);
    ggml_tensor * (*swapped)(ggml_context *, ggml_tensor *);
    ggml_tensor * (*split)(ggml_context *, ggml_tensor *, ggml_tensor *);
    double f32_threshold;
};

const GluCase kGluOps[] = {
    {GGML_GLU_OP_REGLU, ggml_reglu, ggml_reglu_swapped, ggml_reglu_split, kF32},
    {GGML_GLU_OP_GEGLU, ggml_geglu, ggml_geglu_swapped, ggml_geglu_split, 1e-6},
    {GGML_GLU_OP_SWIGLU, ggml_swiglu, ggml_swiglu_swapped, ggml_swiglu_split, kF32},
    {GGML_GLU_OP_GEGLU_ERF, ggml_geglu_erf, ggml_geglu_erf_swapped, ggml_geglu_erf_split, kF32},
    {GGML_GLU_OP_GEGLU_QUICK, ggml_geglu_quick, ggml_geglu_quick_swapped, ggml_geglu_quick_split, 1e-6},
};

// act(x) g in double, from the definitions.
double glu_ref(ggml_glu_op op, double x, double g, double alpha = 0, double limit = 0) {
    const double sq2pi = std::sqrt(2.0 / M_PI);
    switch (op) {
        case GGML_GLU_OP_REGLU: return (x > 0 ? x : 0.0) * g;
        case GGML_GLU_OP_GEGLU: return 0.5 * x * (1.0 + std::tanh(sq2pi * (x + 0.044715 * x * x * x))) * g;
        case GGML_GLU_OP_SWIGLU: return x / (1.0 + std::exp(-x)) * g;
        case GGML_GLU_OP_GEGLU_ERF: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))) * g;
        case GGML_GLU_OP_GEGLU_QUICK: return x / (1.0 + std::exp(-1.702 * x)) * g;
        case GGML_GLU_OP_SWIGLU_OAI: {
            const double xc = std::min(x, limit);
            const double gc = std::clamp(g, -limit, limit);
            return xc / (1.0 + std::exp(-alpha * xc)) * (gc + 1.0);
        }
        case GGML_GLU_OP_SWIGLU_CLAMP: {
            const double xc = std::min(x, limit);
            return xc / (1.0 + std::exp(-xc)) * std::clamp(g, -limit, limit);
        }
        default: return NAN;
    }
}

// The reference of a one-input unit: rows of A are [x | g], or [g | x] swapped.
Array glu_ref_rows(ggml_glu_op op, const Array & A, bool swapped) {
    const int64_t n = A.ne[0] / 2;
    Array         out({n, A.ne[1], A.ne[2], A.ne[3]});
    for (int64_t i3 = 0; i3 < A.ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < A.ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < A.ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < n; ++i0) {
                    const double x = A(swapped ? i0 + n : i0, i1, i2, i3);
                    const double g = A(swapped ? i0 : i0 + n, i1, i2, i3);
                    out(i0, i1, i2, i3) = glu_ref(op, x, g);
                }
    return out;
}

Array glu_ref_split(ggml_glu_op op, const Array & X, const Array & G, double alpha = 0, double limit = 0) {
    Array out(X.ne);
    for (size_t i = 0; i < out.v.size(); ++i) out.v[i] = glu_ref(op, X.v[i], G.v[i], alpha, limit);
    return out;
}

} // namespace

TEST(OpsGlu, OneInputAndSwapped) {
    for (unsigned seed : seeds()) {
        for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16}) {
            for (const GluCase & c : kGluOps) {
                SCOPED_TRACE(std::string(ggml_glu_op_name(c.op)) + " " + ggml_type_name(type));
                std::mt19937 rng(seed);
                Shape        ne = random_shape(rng);
                ne[0]           = 2 * ne[0];
                Context       ctx;
                ggml_tensor * a = new_tensor(ctx, type, ne);
                const Array   A = unary_input(a, rng);
                const double  t = type == GGML_TYPE_F32 ? c.f32_threshold : kF16;
                ggml_tensor * out = c.fn(ctx, a);
                ASSERT_EQ(out->ne[0], ne[0] / 2);
                ASSERT_EQ(ggml_get_glu_op(out), c.op);
                ASSERT_STREQ(ggml_op_desc(out), ggml_glu_op_name(c.op));
                check_modes(ctx, out, glu_ref_rows(c.op, A, false), t);
                check_modes(ctx, c.swapped(ctx, a), glu_ref_rows(c.op, A, true), t);
                check_modes(ctx, ggml_glu(ctx, a, c.op, true), glu_ref_rows(c.op, A, true), t);
            }
        }
    }
}

TEST(OpsGlu, TwoInputs) {
    for (unsigned seed : seeds()) {
        for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16}) {
            for (const GluCase & c : kGluOps) {
                SCOPED_TRACE(std::string(ggml_glu_op_name(c.op)) + " " + ggml_type_name(type));
                std::mt19937  rng(seed);
                const Shape   ne = random_shape(rng);
                Context       ctx;
                ggml_tensor * x  = new_tensor(ctx, type, ne);
                ggml_tensor * g  = new_tensor(ctx, type, ne);
                const Array   X  = unary_input(x, rng);
                const Array   G  = fill_random(g, rng, -3.0, 3.0);
                const double  t  = type == GGML_TYPE_F32 ? c.f32_threshold : kF16;
                check_modes(ctx, c.split(ctx, x, g), glu_ref_split(c.op, X, G), t);
                check_modes(ctx, ggml_glu_split(ctx, x, g, c.op), glu_ref_split(c.op, X, G), t);
            }
        }
    }
}

TEST(OpsGlu, SwigluOaiClampsAtTheLimit) {
    std::mt19937  rng(53);
    Context       ctx;
    ggml_tensor * x = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 300, 3, 2); // rows longer than one step of 256
    ggml_tensor * g = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 300, 3, 2);
    const Array   X = fill_random(x, rng, -12.0, 12.0);
    const Array   G = fill_random(g, rng, -12.0, 12.0);
    ggml_tensor * out = ggml_swiglu_oai(ctx, x, g, 1.702f, 7.0f);
    ASSERT_EQ(ggml_get_glu_op(out), GGML_GLU_OP_SWIGLU_OAI);
    check_modes(ctx, out, glu_ref_split(GGML_GLU_OP_SWIGLU_OAI, X, G, double(1.702f), 7.0), kF32);
}

TEST(OpsGlu, SwigluClampClampsBothHalves) {
    std::mt19937  rng(54);
    Context       ctx;
    ggml_tensor * x = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 300, 3, 2);
    ggml_tensor * g = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 300, 3, 2);
    const Array   X = fill_random(x, rng, -12.0, 12.0);
    const Array   G = fill_random(g, rng, -12.0, 12.0);
    ggml_tensor * out = ggml_swiglu_clamp(ctx, x, g, 7.0f);
    ASSERT_EQ(ggml_get_glu_op(out), GGML_GLU_OP_SWIGLU_CLAMP);
    check_modes(ctx, out, glu_ref_split(GGML_GLU_OP_SWIGLU_CLAMP, X, G, 0.0, 7.0), kF32);
}

// xIELU against its definition, with the parameters ggml_xielu derives.
TEST(OpsUnary, Xielu) {
    std::mt19937  rng(55);
    Context       ctx;
    ggml_tensor * a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 37, 5, 2);
    const Array   A = fill_random(a, rng, -6.0, 6.0);
    const double  an = 0.8, ap = 0.3, beta = 0.5, eps = -1e-6;
    auto          softplus = [](double v) { return v > 20.0 ? v : std::log1p(std::exp(v)); };
    const double  an2 = beta + softplus(double(float(an))), ap2 = softplus(double(float(ap)));
    Array         R = A;
    for (double & v : R.v) {
        v = v > 0.0 ? ap2 * v * v + beta * v : (std::expm1(std::min(v, eps)) - v) * an2 + beta * v;
    }
    ggml_tensor * out = ggml_xielu(ctx, a, float(an), float(ap), float(beta), float(eps));
    ASSERT_EQ(ggml_get_unary_op(out), GGML_UNARY_OP_XIELU);
    check_modes(ctx, out, R, kF32);
}

// Rows of the inputs are contiguous, the rest of their layout is not: a
// view of every other row of a wider tensor, and a permuted second input.
TEST(OpsGlu, StridedRows) {
    std::mt19937  rng(59);
    Context       ctx;
    ggml_tensor * base = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 40, 10, 3);
    fill_random(base, rng, -4.0, 4.0);
    ggml_tensor * a = ggml_view_3d(ctx, base, 34, 5, 3, 2 * base->nb[1], base->nb[2], 3 * sizeof(float));
    check_modes(ctx, ggml_swiglu(ctx, a), glu_ref_rows(GGML_GLU_OP_SWIGLU, read_tensor(a), false), kF32);

    ggml_tensor * gb = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 34, 3, 5);
    fill_random(gb, rng, -4.0, 4.0);
    ggml_tensor * g = ggml_permute(ctx, gb, 0, 2, 1, 3); // [34, 5, 3], rows contiguous
    check_modes(ctx, ggml_swiglu_split(ctx, a, g),
                glu_ref_split(GGML_GLU_OP_SWIGLU, read_tensor(a), read_tensor(g)), kF32);
}

// An odd row, as in ggml: x and the gate are its first and second
// ne0 / 2 values, and the last value takes no part.
TEST(OpsGlu, OddRowsLeaveTheLastValueOut) {
    std::mt19937 rng(733);
    for (bool swapped : {false, true}) {
        Context       ctx;
        ggml_tensor * a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 13, 7, 3);
        const Array   A = fill_random(a, rng, -4.0, 4.0);
        ggml_tensor * out = ggml_glu(ctx, a, GGML_GLU_OP_REGLU, swapped);
        ASSERT_EQ(out->ne[0], 6);
        check_modes(ctx, out, glu_ref_rows(GGML_GLU_OP_REGLU, A, swapped), kF32);
    }
}

// Inputs that differ and unknown units are refused where the node is made.
TEST(OpsGluDeath, BadInputs) {
    Context       ctx;
    ggml_tensor * a   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 2);
    ggml_tensor * b   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 3);
    ggml_tensor * h   = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 8, 2);
    EXPECT_DEATH(ggml_swiglu_split(ctx, a, b), "differ in shape or type");
    EXPECT_DEATH(ggml_swiglu_split(ctx, a, h), "differ in shape or type");
    EXPECT_DEATH(ggml_glu(ctx, a, GGML_GLU_OP_COUNT, false), "unknown gated linear unit");
    EXPECT_DEATH(ggml_swiglu(ctx, ggml_transpose(ctx, a)), "not contiguous");
}

// The one error metric (reference.h): a NaN or an infinity where the
// reference has a finite value is an infinite error, whatever the element
// type, and non-finite values of the reference must be matched.
TEST(ErrorMetric, NonFiniteWhereTheReferenceIsFiniteIsAnInfiniteError) {
    const double nan = std::nan(""), inf = INFINITY;
    const std::vector<double> want = {1.0, 2.0, -inf, nan};
    EXPECT_EQ(nmse(std::vector<double>{1.0, 2.0, -inf, nan}, want), 0.0);
    EXPECT_EQ(max_abs_diff(std::vector<double>{1.0, 2.5, -inf, nan}, want), 0.5);
    for (const std::vector<double> & got : {std::vector<double>{1.0, nan, -inf, nan}, std::vector<double>{inf, 2.0, -inf, nan},
                                           std::vector<double>{1.0, 2.0, inf, nan}, std::vector<double>{1.0, 2.0, -inf, 0.0},
                                           std::vector<double>{1.0, 2.0, -inf}}) {
        EXPECT_EQ(nmse(got, want), inf);
        EXPECT_EQ(max_abs_diff(got, want), inf);
    }
    const std::vector<float> wf = {0.5f, -1.0f}, gf = {0.5f, std::nanf("")};
    EXPECT_EQ(nmse(gf, wf), inf);
    EXPECT_EQ(max_abs_diff(gf, wf), inf);
    Array a(Shape{2, 1, 1, 1}, 1.0), b = a;
    b.v[1] = nan;
    EXPECT_EQ(nmse(b, a), inf);
    EXPECT_EQ(max_abs_diff(b, a), inf);
    EXPECT_FALSE(matches(b, a, 1.0, 1.0));
}
