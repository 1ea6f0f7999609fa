// Op constructors for the backward operators (gradients of forward ops), the
// loss and the optimizer steps. Source order and op_params follow ggml.
// Each builds its node, then checks it with its operator's rule
// (fits_backward.cpp, Note [Shape rules] in fits.h).

#include <cstring>

#include "common.h"
#include "context.h"
#include "fits.h"
#include "ops_rope.h"
#include "types.h"

using namespace loom;

namespace {

ggml_tensor * soft_max_back_impl(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, float scale, float max_bias,
                                 bool inplace, const char * caller) {
    ggml_tensor * r         = inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
    const float   params[2] = {scale, max_bias};
    set_op_params(r, params, sizeof(params));
    r->op     = GGML_OP_SOFT_MAX_BACK;
    r->src[0] = a;
    r->src[1] = b;
    require_fits(r, caller);
    return r;
}

} // namespace

extern "C" {

ggml_tensor * ggml_silu_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    ggml_tensor * r = ggml_dup_tensor(ctx, a);
    r->op           = GGML_OP_SILU_BACK;
    r->src[0]       = a;
    r->src[1]       = b;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_rms_norm_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, float eps) {
    ggml_tensor * r = ggml_dup_tensor(ctx, a);
    set_op_param_f32(r, 0, eps);
    r->op     = GGML_OP_RMS_NORM_BACK;
    r->src[0] = a;
    r->src[1] = b;
    require_fits(r, __func__);
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
    // c gives the node its shape and is no source of it.
    LOOM_REQUIRE(ggml_is_matrix(c), "%s must be a matrix with rows of %lld values", describe(c).text,
                 (long long) a->ne[0]);
    ggml_tensor * r = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, c->ne[0], c->ne[1]);
    r->op           = GGML_OP_GET_ROWS_BACK;
    r->src[0]       = a;
    r->src[1]       = b;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_im2col_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int64_t * ne, int s0, int s1,
                               int p0, int p1, int d0, int d1, bool is_2D) {
    LOOM_REQUIRE(ne != nullptr, "no input shape given for gradient %s", describe(a).text);
    ggml_tensor *  r         = new_tensor_impl(ctx, GGML_TYPE_F32, 4, ne, nullptr, 0, __func__);
    const int32_t params[7] = {s0, s1, p0, p1, d0, d1, is_2D ? 1 : 0};
    set_op_params(r, params, sizeof(params));
    r->op     = GGML_OP_IM2COL_BACK;
    r->src[0] = a;
    r->src[1] = b;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_pool_2d_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * af, ggml_op_pool op, int k0,
                                int k1, int s0, int s1, float p0, float p1) {
    ggml_tensor * r = new_tensor_impl(ctx, GGML_TYPE_F32, 4, af->ne, nullptr, 0, __func__);
    // ggml stores the paddings as integers.
    const int32_t params[7] = {int32_t(op), k0, k1, s0, s1, int32_t(p0), int32_t(p1)};
    set_op_params(r, params, sizeof(params));
    r->op     = GGML_OP_POOL_2D_BACK;
    r->src[0] = a;
    r->src[1] = af;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_flash_attn_back(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v,
                                   ggml_tensor * d, bool masked) {
    // The rule refuses every such node (as ggml 0.25.1 has no such backward).
    (void) masked;
    ggml_tensor * r = ggml_dup_tensor(ctx, q);
    r->op           = GGML_OP_FLASH_ATTN_BACK;
    r->src[0]       = q;
    r->src[1]       = k;
    r->src[2]       = v;
    r->src[3]       = d;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_cross_entropy_loss(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    ggml_tensor * r = ggml_new_tensor_1d(ctx, a->type, 1);
    r->op           = GGML_OP_CROSS_ENTROPY_LOSS;
    r->src[0]       = a;
    r->src[1]       = b;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_cross_entropy_loss_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c) {
    ggml_tensor * r = ggml_dup_tensor(ctx, b);
    r->op           = GGML_OP_CROSS_ENTROPY_LOSS_BACK;
    r->src[0]       = a;
    r->src[1]       = b;
    r->src[2]       = c;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_opt_step_adamw(ggml_context * ctx, ggml_tensor * a, ggml_tensor * grad, ggml_tensor * m,
                                  ggml_tensor * v, ggml_tensor * adamw_params) {
    // The caller's role for a, not a rule of the node.
    LOOM_REQUIRE((a->flags & GGML_TENSOR_FLAG_PARAM) != 0, "%s is not a parameter (ggml_set_param)",
                 describe(a).text);
    ggml_tensor * r = ggml_view_tensor(ctx, a);
    r->op           = GGML_OP_OPT_STEP_ADAMW;
    r->src[0]       = a;
    r->src[1]       = grad;
    r->src[2]       = m;
    r->src[3]       = v;
    r->src[4]       = adamw_params;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_opt_step_sgd(ggml_context * ctx, ggml_tensor * a, ggml_tensor * grad, ggml_tensor * sgd_params) {
    // The caller's role for a, not a rule of the node.
    LOOM_REQUIRE((a->flags & GGML_TENSOR_FLAG_PARAM) != 0, "%s is not a parameter (ggml_set_param)",
                 describe(a).text);
    ggml_tensor * r = ggml_view_tensor(ctx, a);
    r->op           = GGML_OP_OPT_STEP_SGD;
    r->src[0]       = a;
    r->src[1]       = grad;
    r->src[2]       = sgd_params;
    require_fits(r, __func__);
    return r;
}

} // extern "C"
