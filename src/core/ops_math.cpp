// Op constructors for element-wise arithmetic, unary functions, reductions
// and normalisations. Each builds its node, then checks it with its
// operator's rule (fits_math.cpp, Note [Shape rules] in fits.h).

#include <cmath>
#include "common.h"
#include "context.h"
#include "fits.h"
#include "types.h"

using namespace loom;

namespace {

ggml_tensor * binary_impl(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_op op, bool inplace,
                          const char * caller) {
    ggml_tensor * r = inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
    r->op           = op;
    r->src[0]       = a;
    r->src[1]       = b;
    require_fits(r, caller);
    return r;
}

ggml_tensor * simple_unary(ggml_context * ctx, ggml_tensor * a, ggml_op op, bool inplace, const char * caller) {
    ggml_tensor * r = inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
    r->op           = op;
    r->src[0]       = a;
    require_fits(r, caller);
    return r;
}

ggml_tensor * unary_impl(ggml_context * ctx, ggml_tensor * a, ggml_unary_op op, bool inplace, const char * caller) {
    ggml_tensor * r = inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
    set_op_param_i32(r, 0, int32_t(op));
    r->op     = GGML_OP_UNARY;
    r->src[0] = a;
    require_fits(r, caller);
    return r;
}

ggml_tensor * scale_impl(ggml_context * ctx, ggml_tensor * a, float s, float b, bool inplace, const char * caller) {
    ggml_tensor * r         = inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
    const float   params[2] = {s, b};
    set_op_params(r, params, sizeof(params));
    r->op     = GGML_OP_SCALE;
    r->src[0] = a;
    require_fits(r, caller);
    return r;
}

ggml_tensor * norm_impl(ggml_context * ctx, ggml_tensor * a, float eps, ggml_op op, bool inplace,
                        const char * caller) {
    ggml_tensor * r = inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
    set_op_param_f32(r, 0, eps);
    r->op     = op;
    r->src[0] = a;
    require_fits(r, caller);
    return r;
}

ggml_tensor * group_norm_impl(ggml_context * ctx, ggml_tensor * a, int n_groups, float eps, bool inplace,
                              const char * caller) {
    ggml_tensor * r = inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
    set_op_param_i32(r, 0, n_groups);
    set_op_param_f32(r, 1, eps);
    r->op     = GGML_OP_GROUP_NORM;
    r->src[0] = a;
    require_fits(r, caller);
    return r;
}

// GGML_OP_GLU: op params [op, swapped, alpha, limit].
ggml_tensor * glu_impl(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_glu_op op, bool swapped,
                       const char * caller) {
    // As in ggml, x and the gate are the first and second ne0 / 2 values of
    // a row of a alone; the last value of an odd row takes no part.
    int64_t ne[GGML_MAX_DIMS] = {b != nullptr ? a->ne[0] : a->ne[0] / 2, a->ne[1], a->ne[2], a->ne[3]};
    ggml_tensor * r = new_tensor_impl(ctx, a->type, GGML_MAX_DIMS, ne, nullptr, 0, caller);
    set_op_param_i32(r, 0, int32_t(op));
    set_op_param_i32(r, 1, swapped ? 1 : 0);
    r->op     = GGML_OP_GLU;
    r->src[0] = a;
    r->src[1] = b;
    require_fits(r, caller);
    return r;
}

} // namespace

extern "C" {

ggml_tensor * ggml_add(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    return binary_impl(ctx, a, b, GGML_OP_ADD, false, __func__);
}
ggml_tensor * ggml_add_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    return binary_impl(ctx, a, b, GGML_OP_ADD, true, __func__);
}
ggml_tensor * ggml_add_cast(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_type type) {
    // The rule leaves an ADD node's type free; this constructor's is a float.
    LOOM_REQUIRE(type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16,
                 "result type %s must be a float type", ggml_type_name(type));
    ggml_tensor * r = new_tensor_impl(ctx, type, GGML_MAX_DIMS, a->ne, nullptr, 0, __func__);
    r->op           = GGML_OP_ADD;
    r->src[0]       = a;
    r->src[1]       = b;
    require_fits(r, __func__);
    return r;
}
ggml_tensor * ggml_sub(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    return binary_impl(ctx, a, b, GGML_OP_SUB, false, __func__);
}
ggml_tensor * ggml_sub_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    return binary_impl(ctx, a, b, GGML_OP_SUB, true, __func__);
}
ggml_tensor * ggml_mul(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    return binary_impl(ctx, a, b, GGML_OP_MUL, false, __func__);
}
ggml_tensor * ggml_mul_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    return binary_impl(ctx, a, b, GGML_OP_MUL, true, __func__);
}
ggml_tensor * ggml_div(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    return binary_impl(ctx, a, b, GGML_OP_DIV, false, __func__);
}
ggml_tensor * ggml_div_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    return binary_impl(ctx, a, b, GGML_OP_DIV, true, __func__);
}

ggml_tensor * ggml_add1(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    // Of this constructor, not of ADD1 (ggml_add1_inplace takes any rows).
    LOOM_REQUIRE(ggml_is_contiguous_rows(a), "rows of %s must be contiguous", describe(a).text);
    ggml_tensor * r = ggml_dup_tensor(ctx, a);
    r->op           = GGML_OP_ADD1;
    r->src[0]       = a;
    r->src[1]       = b;
    require_fits(r, __func__);
    return r;
}
ggml_tensor * ggml_add1_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    ggml_tensor * r = ggml_view_tensor(ctx, a);
    r->op           = GGML_OP_ADD1;
    r->src[0]       = a;
    r->src[1]       = b;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_sqr(ggml_context * ctx, ggml_tensor * a) {
    return simple_unary(ctx, a, GGML_OP_SQR, false, __func__);
}
ggml_tensor * ggml_sqr_inplace(ggml_context * ctx, ggml_tensor * a) {
    return simple_unary(ctx, a, GGML_OP_SQR, true, __func__);
}
ggml_tensor * ggml_sqrt(ggml_context * ctx, ggml_tensor * a) {
    return simple_unary(ctx, a, GGML_OP_SQRT, false, __func__);
}
ggml_tensor * ggml_sqrt_inplace(ggml_context * ctx, ggml_tensor * a) {
    return simple_unary(ctx, a, GGML_OP_SQRT, true, __func__);
}
ggml_tensor * ggml_log(ggml_context * ctx, ggml_tensor * a) {
    return simple_unary(ctx, a, GGML_OP_LOG, false, __func__);
}
ggml_tensor * ggml_log_inplace(ggml_context * ctx, ggml_tensor * a) {
    return simple_unary(ctx, a, GGML_OP_LOG, true, __func__);
}
ggml_tensor * ggml_sin(ggml_context * ctx, ggml_tensor * a) {
    return simple_unary(ctx, a, GGML_OP_SIN, false, __func__);
}
ggml_tensor * ggml_sin_inplace(ggml_context * ctx, ggml_tensor * a) {
    return simple_unary(ctx, a, GGML_OP_SIN, true, __func__);
}
ggml_tensor * ggml_cos(ggml_context * ctx, ggml_tensor * a) {
    return simple_unary(ctx, a, GGML_OP_COS, false, __func__);
}
ggml_tensor * ggml_cos_inplace(ggml_context * ctx, ggml_tensor * a) {
    return simple_unary(ctx, a, GGML_OP_COS, true, __func__);
}

ggml_tensor * ggml_sum(ggml_context * ctx, ggml_tensor * a) {
    const int64_t one = 1;
    ggml_tensor * r   = new_tensor_impl(ctx, a->type, 1, &one, nullptr, 0, __func__);
    r->op             = GGML_OP_SUM;
    r->src[0]         = a;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_sum_rows(ggml_context * ctx, ggml_tensor * a) {
    const int64_t ne[4] = {1, a->ne[1], a->ne[2], a->ne[3]};
    ggml_tensor * r     = new_tensor_impl(ctx, a->type, 4, ne, nullptr, 0, __func__);
    r->op               = GGML_OP_SUM_ROWS;
    r->src[0]           = a;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_mean(ggml_context * ctx, ggml_tensor * a) {
    const int64_t ne[4] = {1, a->ne[1], a->ne[2], a->ne[3]};
    ggml_tensor * r     = new_tensor_impl(ctx, GGML_TYPE_F32, 4, ne, nullptr, 0, __func__);
    r->op               = GGML_OP_MEAN;
    r->src[0]           = a;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_argmax(ggml_context * ctx, ggml_tensor * a) {
    ggml_tensor * r = new_tensor_impl(ctx, GGML_TYPE_I32, 1, &a->ne[1], nullptr, 0, __func__);
    r->op           = GGML_OP_ARGMAX;
    r->src[0]       = a;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_unary(ggml_context * ctx, ggml_tensor * a, ggml_unary_op op) {
    return unary_impl(ctx, a, op, false, __func__);
}
ggml_tensor * ggml_unary_inplace(ggml_context * ctx, ggml_tensor * a, ggml_unary_op op) {
    return unary_impl(ctx, a, op, true, __func__);
}

#define LOOM_UNARY_PAIR(fn, OP) \
    ggml_tensor * ggml_##fn(ggml_context * ctx, ggml_tensor * a) { \
        return unary_impl(ctx, a, GGML_UNARY_OP_##OP, false, __func__); \
    } \
    ggml_tensor * ggml_##fn##_inplace(ggml_context * ctx, ggml_tensor * a) { \
        return unary_impl(ctx, a, GGML_UNARY_OP_##OP, true, __func__); \
    }

LOOM_UNARY_PAIR(abs, ABS)
LOOM_UNARY_PAIR(sgn, SGN)
LOOM_UNARY_PAIR(neg, NEG)
LOOM_UNARY_PAIR(step, STEP)
LOOM_UNARY_PAIR(tanh, TANH)
LOOM_UNARY_PAIR(elu, ELU)
LOOM_UNARY_PAIR(relu, RELU)
LOOM_UNARY_PAIR(sigmoid, SIGMOID)
LOOM_UNARY_PAIR(gelu, GELU)
LOOM_UNARY_PAIR(gelu_quick, GELU_QUICK)
LOOM_UNARY_PAIR(silu, SILU)
LOOM_UNARY_PAIR(exp, EXP)
LOOM_UNARY_PAIR(expm1, EXPM1)
LOOM_UNARY_PAIR(softplus, SOFTPLUS)
LOOM_UNARY_PAIR(gelu_erf, GELU_ERF)
LOOM_UNARY_PAIR(floor, FLOOR)
LOOM_UNARY_PAIR(ceil, CEIL)
LOOM_UNARY_PAIR(round, ROUND)
LOOM_UNARY_PAIR(trunc, TRUNC)
#undef LOOM_UNARY_PAIR

namespace {
// softplus as ggml's constructors apply it to XIELU's parameters.
float softplus_f32(float x) {
    return x > 20.0f ? x : std::log(1.0f + std::exp(x));
}
} // namespace

ggml_tensor * ggml_xielu(ggml_context * ctx, ggml_tensor * a, float alpha_n, float alpha_p, float beta, float eps) {
    ggml_tensor * r = unary_impl(ctx, a, GGML_UNARY_OP_XIELU, false, __func__);
    set_op_param_f32(r, 1, beta + softplus_f32(alpha_n));
    set_op_param_f32(r, 2, softplus_f32(alpha_p));
    set_op_param_f32(r, 3, beta);
    set_op_param_f32(r, 4, eps);
    return r;
}

ggml_tensor * ggml_glu(ggml_context * ctx, ggml_tensor * a, ggml_glu_op op, bool swapped) {
    return glu_impl(ctx, a, nullptr, op, swapped, __func__);
}
ggml_tensor * ggml_glu_split(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_glu_op op) {
    LOOM_REQUIRE(b != nullptr, "ggml_glu_split: NULL gate");
    return glu_impl(ctx, a, b, op, false, __func__);
}

#define LOOM_GLU_FAMILY(fn, OP) \
    ggml_tensor * ggml_##fn(ggml_context * ctx, ggml_tensor * a) { \
        return glu_impl(ctx, a, nullptr, GGML_GLU_OP_##OP, false, __func__); \
    } \
    ggml_tensor * ggml_##fn##_swapped(ggml_context * ctx, ggml_tensor * a) { \
        return glu_impl(ctx, a, nullptr, GGML_GLU_OP_##OP, true, __func__); \
    } \
    ggml_tensor * ggml_##fn##_split(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) { \
        LOOM_REQUIRE(b != nullptr, "ggml_" #fn "_split: NULL gate"); \
        return glu_impl(ctx, a, b, GGML_GLU_OP_##OP, false, __func__); \
    }

LOOM_GLU_FAMILY(reglu, REGLU)
LOOM_GLU_FAMILY(geglu, GEGLU)
LOOM_GLU_FAMILY(swiglu, SWIGLU)
LOOM_GLU_FAMILY(geglu_erf, GEGLU_ERF)
LOOM_GLU_FAMILY(geglu_quick, GEGLU_QUICK)
#undef LOOM_GLU_FAMILY

ggml_tensor * ggml_swiglu_oai(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, float alpha, float limit) {
    LOOM_REQUIRE(b != nullptr, "ggml_swiglu_oai: NULL gate");
    ggml_tensor * r = glu_impl(ctx, a, b, GGML_GLU_OP_SWIGLU_OAI, false, __func__);
    set_op_param_f32(r, 2, alpha);
    set_op_param_f32(r, 3, limit);
    return r;
}

ggml_tensor * ggml_swiglu_clamp(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, float limit) {
    ggml_tensor * r = glu_impl(ctx, a, b, GGML_GLU_OP_SWIGLU_CLAMP, false, __func__);
    set_op_param_f32(r, 3, limit);
    return r;
}

ggml_tensor * ggml_hardswish(ggml_context * ctx, ggml_tensor * a) {
    return unary_impl(ctx, a, GGML_UNARY_OP_HARDSWISH, false, __func__);
}
ggml_tensor * ggml_hardsigmoid(ggml_context * ctx, ggml_tensor * a) {
    return unary_impl(ctx, a, GGML_UNARY_OP_HARDSIGMOID, false, __func__);
}

ggml_tensor * ggml_scale(ggml_context * ctx, ggml_tensor * a, float s) {
    return scale_impl(ctx, a, s, 0.0f, false, __func__);
}
ggml_tensor * ggml_scale_inplace(ggml_context * ctx, ggml_tensor * a, float s) {
    return scale_impl(ctx, a, s, 0.0f, true, __func__);
}
ggml_tensor * ggml_scale_bias(ggml_context * ctx, ggml_tensor * a, float s, float b) {
    return scale_impl(ctx, a, s, b, false, __func__);
}
ggml_tensor * ggml_scale_bias_inplace(ggml_context * ctx, ggml_tensor * a, float s, float b) {
    return scale_impl(ctx, a, s, b, true, __func__);
}

ggml_tensor * ggml_norm(ggml_context * ctx, ggml_tensor * a, float eps) {
    return norm_impl(ctx, a, eps, GGML_OP_NORM, false, __func__);
}
ggml_tensor * ggml_norm_inplace(ggml_context * ctx, ggml_tensor * a, float eps) {
    return norm_impl(ctx, a, eps, GGML_OP_NORM, true, __func__);
}
ggml_tensor * ggml_rms_norm(ggml_context * ctx, ggml_tensor * a, float eps) {
    return norm_impl(ctx, a, eps, GGML_OP_RMS_NORM, false, __func__);
}
ggml_tensor * ggml_rms_norm_inplace(ggml_context * ctx, ggml_tensor * a, float eps) {
    return norm_impl(ctx, a, eps, GGML_OP_RMS_NORM, true, __func__);
}
ggml_tensor * ggml_group_norm(ggml_context * ctx, ggml_tensor * a, int n_groups, float eps) {
    return group_norm_impl(ctx, a, n_groups, eps, false, __func__);
}
ggml_tensor * ggml_group_norm_inplace(ggml_context * ctx, ggml_tensor * a, int n_groups, float eps) {
    return group_norm_impl(ctx, a, n_groups, eps, true, __func__);
}

} // extern "C"
