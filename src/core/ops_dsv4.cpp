// Op constructors of DeepSeek's lightning indexer and V4 hyper-connection
// operators.

#include "common.h"
#include "context.h"

using namespace loom;

namespace {

constexpr int64_t k_hc = 4; // streams ggml 0.25.1 defines hc_comb for

ggml_tensor * hc_pre_impl(ggml_context * ctx, ggml_tensor * x, ggml_tensor * weights, float scale, bool gated,
                          const char * caller) {
    LOOM_REQUIRE(x->type == GGML_TYPE_F32 && weights->type == GGML_TYPE_F32,
                 "called from %s: x %s and weights %s must be f32", caller, describe(x).text, describe(weights).text);
    const int64_t n_embd = x->ne[0], hc = x->ne[1], n_tokens = x->ne[2];
    LOOM_REQUIRE(hc > 0 && x->ne[3] == 1, "called from %s: x %s must be [n_embd, hc > 0, n_tokens]", caller,
                 describe(x).text);
    if (gated) {
        LOOM_REQUIRE(weights->ne[0] == n_embd && weights->ne[1] == hc && weights->ne[2] == n_tokens &&
                         weights->ne[3] == 1,
                     "called from %s: gate %s must have the shape of x %s", caller, describe(weights).text,
                     describe(x).text);
    } else {
        LOOM_REQUIRE(weights->ne[0] == hc && weights->ne[1] == n_tokens && weights->ne[2] == 1 && weights->ne[3] == 1,
                     "called from %s: weights %s must be [%lld, %lld]", caller, describe(weights).text,
                     (long long) hc, (long long) n_tokens);
    }
    const int64_t ne[4] = {n_embd, n_tokens, 1, 1};
    ggml_tensor * r     = new_tensor_impl(ctx, GGML_TYPE_F32, 2, ne, nullptr, 0, caller);
    set_op_param_f32(r, 0, scale);
    set_op_param_i32(r, 1, gated ? 1 : 0);
    r->op     = GGML_OP_DSV4_HC_PRE;
    r->src[0] = x;
    r->src[1] = weights;
    return r;
}

} // namespace

extern "C" {

ggml_tensor * ggml_lightning_indexer(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * weights,
                                     ggml_tensor * mask) {
    LOOM_REQUIRE(q->type == GGML_TYPE_F32 && weights->type == GGML_TYPE_F32, "q %s and weights %s must be f32",
                 describe(q).text, describe(weights).text);
    LOOM_REQUIRE(mask != nullptr && mask->type == GGML_TYPE_F16, "the mask (%s) must be f16",
                 mask != nullptr ? describe(mask).text : "NULL");
    LOOM_REQUIRE(k->ne[0] == q->ne[0] && k->ne[1] == 1 && k->ne[3] == q->ne[3],
                 "k %s must be [%lld, 1, n_kv, %lld] for q %s", describe(k).text, (long long) q->ne[0],
                 (long long) q->ne[3], describe(q).text);
    LOOM_REQUIRE(weights->ne[0] == q->ne[1] && weights->ne[1] == q->ne[2] && weights->ne[2] == 1 &&
                     weights->ne[3] == q->ne[3],
                 "weights %s must be [%lld, %lld, 1, %lld] for q %s", describe(weights).text, (long long) q->ne[1],
                 (long long) q->ne[2], (long long) q->ne[3], describe(q).text);
    LOOM_REQUIRE(mask->ne[0] == k->ne[2] && mask->ne[1] == q->ne[2] && mask->ne[2] == 1 && mask->ne[3] > 0 &&
                     q->ne[3] % mask->ne[3] == 0,
                 "mask %s must be [%lld, %lld, 1, a divisor of %lld]", describe(mask).text, (long long) k->ne[2],
                 (long long) q->ne[2], (long long) q->ne[3]);
    const int64_t ne[4] = {k->ne[2], q->ne[2], 1, q->ne[3]};
    ggml_tensor * r     = new_tensor_impl(ctx, GGML_TYPE_F32, 4, ne, nullptr, 0, __func__);
    r->op               = GGML_OP_LIGHTNING_INDEXER;
    r->src[0]           = q;
    r->src[1]           = k;
    r->src[2]           = weights;
    r->src[3]           = mask;
    return r;
}

ggml_tensor * ggml_dsv4_hc_comb(ggml_context * ctx, ggml_tensor * mixes, ggml_tensor * scale, ggml_tensor * base,
                                float eps, int32_t n_iter) {
    LOOM_REQUIRE(mixes->type == GGML_TYPE_F32 && scale->type == GGML_TYPE_F32 && base->type == GGML_TYPE_F32,
                 "mixes %s, scale %s and base %s must be f32", describe(mixes).text, describe(scale).text,
                 describe(base).text);
    LOOM_REQUIRE(n_iter > 0, "n_iter %d must be positive", n_iter);
    const int64_t mix_dim = (2 + k_hc) * k_hc;
    LOOM_REQUIRE(mixes->ne[0] == mix_dim && mixes->ne[2] == 1 && mixes->ne[3] == 1,
                 "mixes %s must be [%lld, n_tokens] ((2 + hc) * hc values a token, hc = %lld)", describe(mixes).text,
                 (long long) mix_dim, (long long) k_hc);
    LOOM_REQUIRE(scale->ne[0] >= 3 && scale->ne[1] == 1 && scale->ne[2] == 1 && scale->ne[3] == 1,
                 "scale %s must be a vector of at least 3 values", describe(scale).text);
    LOOM_REQUIRE(base->ne[0] == mix_dim && base->ne[1] == 1 && base->ne[2] == 1 && base->ne[3] == 1,
                 "base %s must be a vector of %lld values", describe(base).text, (long long) mix_dim);
    const int64_t ne[4] = {k_hc, k_hc, mixes->ne[1], 1};
    ggml_tensor * r     = new_tensor_impl(ctx, GGML_TYPE_F32, 3, ne, nullptr, 0, __func__);
    set_op_param_f32(r, 0, eps);
    set_op_param_i32(r, 1, n_iter);
    r->op     = GGML_OP_DSV4_HC_COMB;
    r->src[0] = mixes;
    r->src[1] = scale;
    r->src[2] = base;
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
    LOOM_REQUIRE(x->type == GGML_TYPE_F32 && residual->type == GGML_TYPE_F32 && post->type == GGML_TYPE_F32,
                 "x %s, residual %s and post %s must be f32", describe(x).text, describe(residual).text,
                 describe(post).text);
    const int64_t n_embd = x->ne[0], n_tokens = x->ne[1], hc = residual->ne[1];
    LOOM_REQUIRE(x->ne[2] == 1 && x->ne[3] == 1, "x %s must be [n_embd, n_tokens]", describe(x).text);
    LOOM_REQUIRE(hc > 0 && residual->ne[0] == n_embd && residual->ne[2] == n_tokens && residual->ne[3] == 1,
                 "residual %s must be [%lld, hc > 0, %lld]", describe(residual).text, (long long) n_embd,
                 (long long) n_tokens);
    LOOM_REQUIRE(post->ne[0] == hc && post->ne[1] == n_tokens && post->ne[2] == 1 && post->ne[3] == 1,
                 "post %s must be [%lld, %lld]", describe(post).text, (long long) hc, (long long) n_tokens);
    if (comb != nullptr) {
        LOOM_REQUIRE(comb->type == GGML_TYPE_F32 && comb->ne[0] == hc && comb->ne[1] == hc &&
                         comb->ne[2] == n_tokens && comb->ne[3] == 1,
                     "comb %s must be f32 [%lld, %lld, %lld]", describe(comb).text, (long long) hc, (long long) hc,
                     (long long) n_tokens);
    }
    const int64_t ne[4] = {n_embd, hc, n_tokens, 1};
    ggml_tensor * r     = new_tensor_impl(ctx, GGML_TYPE_F32, 3, ne, nullptr, 0, __func__);
    r->op               = GGML_OP_DSV4_HC_POST;
    r->src[0]           = x;
    r->src[1]           = residual;
    r->src[2]           = post;
    r->src[3]           = comb;
    return r;
}

} // extern "C"
