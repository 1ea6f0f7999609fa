// Op constructors of the recurrent and state-space operators: Mamba's
// convolution and scan, the RWKV-6/7 and gated linear attention recurrences,
// the gated delta rule and the triangular solve its chunked form uses. Their
// results put the outputs first and the final states after them, in the
// layout ggml 0.25.1 gives them (models read the states back with views).
// Each builds its node, then checks it with its operator's rule
// (fits_recurrent.cpp, Note [Shape rules] in fits.h).

#include "common.h"
#include "context.h"
#include "fits.h"

using namespace loom;

namespace {

// The result of the three RWKV-style recurrences: the outputs, then the
// final states.
ggml_tensor * rwkv_result(ggml_context * ctx, const ggml_tensor * shape, const ggml_tensor * state,
                          const char * caller) {
    const int64_t S = shape->ne[0], H = shape->ne[1], T = shape->ne[2];
    const int64_t ne[4] = {S * H, size_or_zero(T + S * state->ne[1]), 1, 1};
    return new_tensor_impl(ctx, GGML_TYPE_F32, 4, ne, nullptr, 0, caller);
}

} // namespace

extern "C" {

ggml_tensor * ggml_ssm_conv(ggml_context * ctx, ggml_tensor * sx, ggml_tensor * c) {
    const int64_t ne[4] = {c->ne[1], size_or_zero(sx->ne[0] - c->ne[0] + 1), sx->ne[2], 1};
    ggml_tensor * r     = new_tensor_impl(ctx, GGML_TYPE_F32, 3, ne, nullptr, 0, __func__);
    r->op               = GGML_OP_SSM_CONV;
    r->src[0]           = sx;
    r->src[1]           = c;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_ssm_scan(ggml_context * ctx, ggml_tensor * s, ggml_tensor * x, ggml_tensor * dt, ggml_tensor * A,
                            ggml_tensor * B, ggml_tensor * C, ggml_tensor * ids, int64_t K) {
    // K as its op param can hold it; the rule checks the rest.
    LOOM_REQUIRE(K == int32_t(K), "K %lld must be in [1, INT32_MAX]", (long long) K);
    const int64_t d_state = s->ne[0], head_dim = x->ne[0], n_head = x->ne[1], n_seqs = x->ne[3];
    const int64_t ne = size_or_zero(ggml_nelements(x) + K * d_state * head_dim * n_head * n_seqs);
    ggml_tensor * r  = new_tensor_impl(ctx, GGML_TYPE_F32, 1, &ne, nullptr, 0, __func__);
    set_op_param_i32(r, 0, int32_t(K));
    r->op     = GGML_OP_SSM_SCAN;
    r->src[0] = s;
    r->src[1] = x;
    r->src[2] = dt;
    r->src[3] = A;
    r->src[4] = B;
    r->src[5] = C;
    r->src[6] = ids;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_rwkv_wkv6(ggml_context * ctx, ggml_tensor * k, ggml_tensor * v, ggml_tensor * r, ggml_tensor * tf,
                             ggml_tensor * td, ggml_tensor * state) {
    ggml_tensor * res = rwkv_result(ctx, k, state, __func__);
    res->op           = GGML_OP_RWKV_WKV6;
    res->src[0]       = k;
    res->src[1]       = v;
    res->src[2]       = r;
    res->src[3]       = tf;
    res->src[4]       = td;
    res->src[5]       = state;
    require_fits(res, __func__);
    return res;
}

ggml_tensor * ggml_gated_linear_attn(ggml_context * ctx, ggml_tensor * k, ggml_tensor * v, ggml_tensor * q,
                                     ggml_tensor * g, ggml_tensor * state, float scale) {
    ggml_tensor * res = rwkv_result(ctx, k, state, __func__);
    set_op_param_f32(res, 0, scale);
    res->op     = GGML_OP_GATED_LINEAR_ATTN;
    res->src[0] = k;
    res->src[1] = v;
    res->src[2] = q;
    res->src[3] = g;
    res->src[4] = state;
    require_fits(res, __func__);
    return res;
}

ggml_tensor * ggml_rwkv_wkv7(ggml_context * ctx, ggml_tensor * r, ggml_tensor * w, ggml_tensor * k, ggml_tensor * v,
                             ggml_tensor * a, ggml_tensor * b, ggml_tensor * state) {
    ggml_tensor * res = rwkv_result(ctx, k, state, __func__);
    res->op           = GGML_OP_RWKV_WKV7;
    res->src[0]       = r;
    res->src[1]       = w;
    res->src[2]       = k;
    res->src[3]       = v;
    res->src[4]       = a;
    res->src[5]       = b;
    res->src[6]       = state;
    require_fits(res, __func__);
    return res;
}

ggml_tensor * ggml_solve_tri(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, bool left, bool lower, bool uni) {
    // The node does not keep these: the one form defined is its rule's.
    LOOM_REQUIRE(left && lower && !uni, "left %d, lower %d, uni %d: only left, lower, not unit-diagonal is defined",
                 int(left), int(lower), int(uni));
    ggml_tensor * r = new_tensor_impl(ctx, GGML_TYPE_F32, 4, b->ne, nullptr, 0, __func__);
    r->op           = GGML_OP_SOLVE_TRI;
    r->src[0]       = a;
    r->src[1]       = b;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_gated_delta_net(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v,
                                   ggml_tensor * g, ggml_tensor * beta, ggml_tensor * state, int64_t K) {
    // K as its op param can hold it; the rule checks the rest.
    LOOM_REQUIRE(K == int32_t(K), "K %lld must be in [1, INT32_MAX]", (long long) K);
    const int64_t S = v->ne[0], H = v->ne[1], n_tokens = v->ne[2], n_seqs = v->ne[3];
    const int64_t ne[4] = {S * H, size_or_zero(n_tokens * n_seqs + K * S * n_seqs), 1, 1};
    ggml_tensor * r     = new_tensor_impl(ctx, GGML_TYPE_F32, 4, ne, nullptr, 0, __func__);
    set_op_param_i32(r, 0, int32_t(K));
    r->op     = GGML_OP_GATED_DELTA_NET;
    r->src[0] = q;
    r->src[1] = k;
    r->src[2] = v;
    r->src[3] = g;
    r->src[4] = beta;
    r->src[5] = state;
    require_fits(r, __func__);
    return r;
}

} // extern "C"
