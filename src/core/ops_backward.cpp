// Op constructors for the backward operators (gradients of forward ops), the
// loss and the optimizer steps. Source order and op_params follow ggml.

#include <cstring>

#include "common.h"
#include "context.h"
#include "ops_rope.h"
#include "types.h"

using namespace loom;

namespace {

ggml_tensor * soft_max_back_impl(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, float scale, float max_bias,
                                 bool inplace, const char * caller) {
    LOOM_REQUIRE(ggml_are_same_shape(a, b), "called from %s: gradient %s and softmax result %s differ in shape",
                 caller, describe(a).text, describe(b).text);
    ggml_tensor * r         = inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
    const float   params[2] = {scale, max_bias};
    set_op_params(r, params, sizeof(params));
    r->op     = GGML_OP_SOFT_MAX_BACK;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

} // namespace

extern "C" {

ggml_tensor * ggml_silu_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    LOOM_REQUIRE(ggml_are_same_shape(a, b), "gradient %s and input %s differ in shape", describe(a).text,
                 describe(b).text);
    ggml_tensor * r = ggml_dup_tensor(ctx, a);
    r->op           = GGML_OP_SILU_BACK;
    r->src[0]       = a;
    r->src[1]       = b;
    return r;
}

ggml_tensor * ggml_rms_norm_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, float eps) {
    LOOM_REQUIRE(ggml_are_same_shape(a, b), "gradient %s and input %s differ in shape", describe(a).text,
                 describe(b).text);
    ggml_tensor * r = ggml_dup_tensor(ctx, a);
    set_op_param_f32(r, 0, eps);
    r->op     = GGML_OP_RMS_NORM_BACK;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

ggml_tensor * ggml_soft_max_ext_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, float scale,
                                     float max_bias) {
    return soft_max_back_impl(ctx, a, b, scale, max_bias, false, __func__);
}
ggml_tensor * ggml_soft_max_ext_back_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, float scale,
                                             float max_bias) {
    return soft_max_back_impl(ctx, a, b, scale, max_bias, true, __func__);
}

ggml_tensor * ggml_rope_ext_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, int n_dims,
                                 int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
                                 float attn_factor, float beta_fast, float beta_slow) {
    return rope_impl(ctx, a, b, c, n_dims, nullptr, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor,
                     beta_fast, beta_slow, false, GGML_OP_ROPE_BACK, __func__);
}
ggml_tensor * ggml_rope_multi_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, int n_dims,
                                   int sections[4], int mode, int n_ctx_orig, float freq_base, float freq_scale,
                                   float ext_factor, float attn_factor, float beta_fast, float beta_slow) {
    return rope_impl(ctx, a, b, c, n_dims, sections, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor,
                     beta_fast, beta_slow, false, GGML_OP_ROPE_BACK, __func__);
}

ggml_tensor * ggml_get_rows_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c) {
    // As in ggml, gradient rows past the indices take no part (ggml's own
    // tests pass a view of fewer indices than the gradient has rows).
    LOOM_REQUIRE(ggml_is_matrix(a) && ggml_is_vector(b) && b->type == GGML_TYPE_I32 && b->ne[0] <= a->ne[1],
                 "gradient %s must be a matrix with a row for each i32 index of the vector %s", describe(a).text,
                 describe(b).text);
    LOOM_REQUIRE(ggml_is_matrix(c) && c->ne[0] == a->ne[0], "%s must be a matrix with rows of %lld values",
                 describe(c).text, (long long) a->ne[0]);
    ggml_tensor * r = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, c->ne[0], c->ne[1]);
    r->op           = GGML_OP_GET_ROWS_BACK;
    r->src[0]       = a;
    r->src[1]       = b;
    return r;
}

ggml_tensor * ggml_im2col_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int64_t * ne, int s0, int s1,
                               int p0, int p1, int d0, int d1, bool is_2D) {
    LOOM_REQUIRE(ne != nullptr, "no input shape given for gradient %s", describe(a).text);
    LOOM_REQUIRE(s0 > 0 && d0 > 0 && (!is_2D || (s1 > 0 && d1 > 0)),
                 "strides %d, %d and dilations %d, %d must be positive", s0, s1, d0, d1);
    // The shape im2col makes of an input of shape ne with the kernel b.
    const int64_t kw  = b->ne[0];
    const int64_t kh  = is_2D ? b->ne[1] : 1;
    const int64_t ic  = is_2D ? ne[2] : ne[1];
    const int64_t n   = is_2D ? ne[3] : ne[2];
    const int64_t ow  = (ne[0] + 2 * p0 - d0 * (kw - 1) - 1) / s0 + 1;
    const int64_t oh  = is_2D ? (ne[1] + 2 * p1 - d1 * (kh - 1) - 1) / s1 + 1 : 1;
    const bool    fit = is_2D ? (a->ne[0] == ic * kh * kw && a->ne[1] == ow && a->ne[2] == oh && a->ne[3] == n)
                              : (a->ne[0] == ic * kw && a->ne[1] == ow && a->ne[2] == n && a->ne[3] == 1);
    LOOM_REQUIRE(fit, "gradient %s is not the im2col result of an input [%lld, %lld, %lld, %lld] and kernel %s",
                 describe(a).text, (long long) ne[0], (long long) ne[1], (long long) ne[2], (long long) ne[3],
                 describe(b).text);
    ggml_tensor *  r         = new_tensor_impl(ctx, GGML_TYPE_F32, 4, ne, nullptr, 0, __func__);
    const int32_t params[7] = {s0, s1, p0, p1, d0, d1, is_2D ? 1 : 0};
    set_op_params(r, params, sizeof(params));
    r->op     = GGML_OP_IM2COL_BACK;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

ggml_tensor * ggml_pool_2d_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * af, ggml_op_pool op, int k0,
                                int k1, int s0, int s1, float p0, float p1) {
    LOOM_REQUIRE(op == GGML_OP_POOL_MAX || op == GGML_OP_POOL_AVG, "unknown pool op %d", int(op));
    LOOM_REQUIRE(k0 > 0 && k1 > 0 && s0 > 0 && s1 > 0, "kernel %d x %d and strides %d, %d must be positive", k0, k1,
                 s0, s1);
    LOOM_REQUIRE(a->ne[2] == af->ne[2] && a->ne[3] == af->ne[3],
                 "gradient %s and forward input %s differ in dims 2, 3", describe(a).text, describe(af).text);
    ggml_tensor * r = new_tensor_impl(ctx, GGML_TYPE_F32, 4, af->ne, nullptr, 0, __func__);
    // ggml stores the paddings as integers.
    const int32_t params[7] = {int32_t(op), k0, k1, s0, s1, int32_t(p0), int32_t(p1)};
    set_op_params(r, params, sizeof(params));
    r->op     = GGML_OP_POOL_2D_BACK;
    r->src[0] = a;
    r->src[1] = af;
    return r;
}

ggml_tensor * ggml_flash_attn_back(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v,
                                   ggml_tensor * d, bool masked) {
    (void) ctx;
    (void) k;
    (void) v;
    (void) d;
    (void) masked;
    LOOM_REQUIRE(false, "not available (as in ggml 0.25.1): no backward of flash attention for %s",
                 describe(q).text);
    return nullptr;
}

ggml_tensor * ggml_cross_entropy_loss(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    LOOM_REQUIRE(ggml_are_same_shape(a, b), "logits %s and labels %s differ in shape", describe(a).text,
                 describe(b).text);
    ggml_tensor * r = ggml_new_tensor_1d(ctx, a->type, 1);
    r->op           = GGML_OP_CROSS_ENTROPY_LOSS;
    r->src[0]       = a;
    r->src[1]       = b;
    return r;
}

ggml_tensor * ggml_cross_entropy_loss_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c) {
    LOOM_REQUIRE(ggml_is_scalar(a), "loss gradient %s must be a scalar", describe(a).text);
    LOOM_REQUIRE(ggml_are_same_shape(b, c), "logits %s and labels %s differ in shape", describe(b).text,
                 describe(c).text);
    ggml_tensor * r = ggml_dup_tensor(ctx, b);
    r->op           = GGML_OP_CROSS_ENTROPY_LOSS_BACK;
    r->src[0]       = a;
    r->src[1]       = b;
    r->src[2]       = c;
    return r;
}

ggml_tensor * ggml_opt_step_adamw(ggml_context * ctx, ggml_tensor * a, ggml_tensor * grad, ggml_tensor * m,
                                  ggml_tensor * v, ggml_tensor * adamw_params) {
    LOOM_REQUIRE((a->flags & GGML_TENSOR_FLAG_PARAM) != 0, "%s is not a parameter (ggml_set_param)",
                 describe(a).text);
    LOOM_REQUIRE(ggml_are_same_shape(a, grad) && ggml_are_same_shape(a, m) && ggml_are_same_shape(a, v),
                 "parameter %s, gradient %s, moments %s and %s differ in shape", describe(a).text,
                 describe(grad).text, describe(m).text, describe(v).text);
    LOOM_REQUIRE(adamw_params->type == GGML_TYPE_F32 && ggml_nelements(adamw_params) == 7,
                 "adamw parameters %s must be 7 f32 values", describe(adamw_params).text);
    ggml_tensor * r = ggml_view_tensor(ctx, a);
    r->op           = GGML_OP_OPT_STEP_ADAMW;
    r->src[0]       = a;
    r->src[1]       = grad;
    r->src[2]       = m;
    r->src[3]       = v;
    r->src[4]       = adamw_params;
    return r;
}

ggml_tensor * ggml_opt_step_sgd(ggml_context * ctx, ggml_tensor * a, ggml_tensor * grad, ggml_tensor * sgd_params) {
    LOOM_REQUIRE((a->flags & GGML_TENSOR_FLAG_PARAM) != 0, "%s is not a parameter (ggml_set_param)",
                 describe(a).text);
    LOOM_REQUIRE(ggml_are_same_shape(a, grad), "parameter %s and gradient %s differ in shape", describe(a).text,
                 describe(grad).text);
    LOOM_REQUIRE(sgd_params->type == GGML_TYPE_F32 && ggml_nelements(sgd_params) == 2,
                 "sgd parameters %s must be 2 f32 values", describe(sgd_params).text);
    ggml_tensor * r = ggml_view_tensor(ctx, a);
    r->op           = GGML_OP_OPT_STEP_SGD;
    r->src[0]       = a;
    r->src[1]       = grad;
    r->src[2]       = sgd_params;
    return r;
}

} // extern "C"
