// Op constructors of DeepSeek's lightning indexer and V4 hyper-connection
// operators. Each builds its node, then checks it with its operator's rule
// (fits_recurrent.cpp, Note [Shape rules] in fits.h).

#include "common.h"
#include "context.h"
#include "fits.h"

using namespace loom;

namespace {

constexpr int64_t k_hc = 4; // streams ggml 0.25.1 defines hc_comb for

// DSV4_HC_PRE: op params [scale, gated].
ggml_tensor * hc_pre_impl(ggml_context * ctx, ggml_tensor * x, ggml_tensor * weights, float scale, bool gated,
                          const char * caller) {
    const int64_t ne[4] = {x->ne[0], x->ne[2], 1, 1};
    ggml_tensor * r     = new_tensor_impl(ctx, GGML_TYPE_F32, 2, ne, nullptr, 0, caller);
    set_op_param_f32(r, 0, scale);
    set_op_param_i32(r, 1, gated ? 1 : 0);
    r->op     = GGML_OP_DSV4_HC_PRE;
    r->src[0] = x;
    r->src[1] = weights;
    require_fits(r, caller);
    return r;
}

} // namespace

extern "C" {

ggml_tensor * ggml_lightning_indexer(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * weights,
                                     ggml_tensor * mask) {
    const int64_t ne[4] = {k->ne[2], q->ne[2], 1, q->ne[3]};
    ggml_tensor * r     = new_tensor_impl(ctx, GGML_TYPE_F32, 4, ne, nullptr, 0, __func__);
    r->op               = GGML_OP_LIGHTNING_INDEXER;
    r->src[0]           = q;
    r->src[1]           = k;
    r->src[2]           = weights;
    r->src[3]           = mask;
    require_fits(r, __func__);
    return r;
}

// DSV4_HC_COMB: op params [eps, n_iter].
ggml_tensor * ggml_dsv4_hc_comb(ggml_context * ctx, ggml_tensor * mixes, ggml_tensor * scale, ggml_tensor * base,
                                float eps, int32_t n_iter) {
    const int64_t ne[4] = {k_hc, k_hc, mixes->ne[1], 1};
    ggml_tensor * r     = new_tensor_impl(ctx, GGML_TYPE_F32, 3, ne, nullptr, 0, __func__);
    set_op_param_f32(r, 0, eps);
    set_op_param_i32(r, 1, n_iter);
    r->op     = GGML_OP_DSV4_HC_COMB;
    r->src[0] = mixes;
    r->src[1] = scale;
    r->src[2] = base;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_dsv4_hc_pre(ggml_context * ctx, ggml_tensor * x, ggml_tensor * weights) {
    return hc_pre_impl(ctx, x, weights, 1.0f, false, __func__);
}

ggml_tensor * ggml_dsv4_hc_pre_gated(ggml_context * ctx, ggml_tensor * x, ggml_tensor * gate, float scale) {
    return hc_pre_impl(ctx, x, gate, scale, true, __func__);
}

ggml_tensor * ggml_dsv4_hc_post(ggml_context * ctx, ggml_tensor * x, ggml_tensor * residual, ggml_tensor * post,
                                ggml_tensor * comb) {
    const int64_t ne[4] = {x->ne[0], residual->ne[1], x->ne[1], 1};
    ggml_tensor * r     = new_tensor_impl(ctx, GGML_TYPE_F32, 3, ne, nullptr, 0, __func__);
    r->op               = GGML_OP_DSV4_HC_POST;
    r->src[0]           = x;
    r->src[1]           = residual;
    r->src[2]           = post;
    r->src[3]           = comb;
    require_fits(r, __func__);
    return r;
}

} // extern "C"
