// Op constructors of the recurrent and state-space operators: Mamba's
// convolution and scan, the RWKV-6/7 and gated linear attention recurrences,
// the gated delta rule and the triangular solve its chunked form uses. Their
// results put the outputs first and the final states after them, in the
// layout ggml 0.25.1 gives them (models read the states back with views).

#include "common.h"
#include "context.h"

using namespace loom;

namespace {

// Shared by the three RWKV-style recurrences: every per-token input is
// [S, H, n_tokens] and contiguous, state holds S * S * H * n_seqs values
// with state->ne[1] == n_seqs, and the tokens split evenly into sequences.
void check_rwkv_inputs(const char * caller, ggml_tensor * const * inputs, int n, const ggml_tensor * shape,
                       const ggml_tensor * state) {
    const int64_t S = shape->ne[0], H = shape->ne[1], T = shape->ne[2];
    for (int i = 0; i < n; ++i) {
        const ggml_tensor * t = inputs[i];
        LOOM_REQUIRE(ggml_is_contiguous(t), "called from %s: %s must be contiguous", caller, describe(t).text);
        LOOM_REQUIRE(t->ne[0] == S && t->ne[1] == H && t->ne[2] == T && t->ne[3] == 1,
                     "called from %s: %s must be [%lld, %lld, %lld] like %s", caller, describe(t).text,
                     (long long) S, (long long) H, (long long) T, describe(shape).text);
    }
    LOOM_REQUIRE(ggml_is_contiguous(state), "called from %s: state %s must be contiguous", caller,
                 describe(state).text);
    const int64_t n_seqs = state->ne[1];
    LOOM_REQUIRE(n_seqs > 0 && ggml_nelements(state) == S * S * H * n_seqs,
                 "called from %s: state %s must hold %lld x %lld x %lld values per sequence (ne1)", caller,
                 describe(state).text, (long long) S, (long long) S, (long long) H);
    LOOM_REQUIRE(T % n_seqs == 0, "called from %s: %lld tokens do not split into %lld sequences", caller,
                 (long long) T, (long long) n_seqs);
}

ggml_tensor * rwkv_result(ggml_context * ctx, const ggml_tensor * shape, const ggml_tensor * state,
                          const char * caller) {
    const int64_t S = shape->ne[0], H = shape->ne[1], T = shape->ne[2];
    const int64_t ne[4] = {S * H, T + S * state->ne[1], 1, 1};
    return new_tensor_impl(ctx, GGML_TYPE_F32, 4, ne, nullptr, 0, caller);
}

} // namespace

extern "C" {

ggml_tensor * ggml_ssm_conv(ggml_context * ctx, ggml_tensor * sx, ggml_tensor * c) {
    LOOM_REQUIRE(ggml_is_3d(sx), "sx %s must be 3-d", describe(sx).text);
    LOOM_REQUIRE(ggml_is_matrix(c), "c %s must be a matrix", describe(c).text);
    const int64_t d_conv  = c->ne[0];
    const int64_t d_inner = c->ne[1];
    const int64_t n_t     = sx->ne[0] - d_conv + 1;
    LOOM_REQUIRE(sx->ne[1] == d_inner, "sx %s must have %lld channels (ne1) like c %s", describe(sx).text,
                 (long long) d_inner, describe(c).text);
    LOOM_REQUIRE(n_t >= 0, "sx %s is shorter than the %lld - 1 values before the first token", describe(sx).text,
                 (long long) d_conv);
    const int64_t ne[4] = {d_inner, n_t, sx->ne[2], 1};
    ggml_tensor * r     = new_tensor_impl(ctx, GGML_TYPE_F32, 3, ne, nullptr, 0, __func__);
    r->op               = GGML_OP_SSM_CONV;
    r->src[0]           = sx;
    r->src[1]           = c;
    return r;
}

ggml_tensor * ggml_ssm_scan(ggml_context * ctx, ggml_tensor * s, ggml_tensor * x, ggml_tensor * dt, ggml_tensor * A,
                            ggml_tensor * B, ggml_tensor * C, ggml_tensor * ids, int64_t K) {
    LOOM_REQUIRE(K >= 1 && K <= INT32_MAX, "K %lld must be in [1, INT32_MAX]", (long long) K);
    LOOM_REQUIRE(ggml_is_contiguous(s), "s %s must be contiguous", describe(s).text);
    LOOM_REQUIRE(ggml_is_contiguous(dt), "dt %s must be contiguous", describe(dt).text);
    LOOM_REQUIRE(ggml_is_contiguous(A), "A %s must be contiguous", describe(A).text);
    for (const ggml_tensor * t : {x, B, C}) {
        LOOM_REQUIRE(t->nb[0] == ggml_type_size(t->type) && t->nb[1] == size_t(t->ne[0]) * t->nb[0],
                     "%s must have contiguous rows and matrices", describe(t).text);
    }
    LOOM_REQUIRE(ggml_are_same_shape(B, C), "B %s and C %s must have the same shape", describe(B).text,
                 describe(C).text);
    LOOM_REQUIRE(ids->type == GGML_TYPE_I32, "ids %s must be i32", describe(ids).text);

    const int64_t d_state  = s->ne[0];
    const int64_t head_dim = x->ne[0];
    const int64_t n_head   = x->ne[1];
    const int64_t n_tokens = x->ne[2];
    const int64_t n_seqs   = x->ne[3];
    LOOM_REQUIRE(ggml_is_3d(dt) && dt->ne[0] == n_head && dt->ne[1] == n_tokens && dt->ne[2] == n_seqs,
                 "dt %s must be [%lld, %lld, %lld] for x %s", describe(dt).text, (long long) n_head,
                 (long long) n_tokens, (long long) n_seqs, describe(x).text);
    LOOM_REQUIRE(s->ne[1] == head_dim && s->ne[2] == n_head, "s %s must be [d_state, %lld, %lld, n] for x %s",
                 describe(s).text, (long long) head_dim, (long long) n_head, describe(x).text);
    LOOM_REQUIRE(B->ne[0] == d_state && B->ne[2] == n_tokens && B->ne[3] == n_seqs,
                 "B %s must be [%lld, n_group, %lld, %lld]", describe(B).text, (long long) d_state,
                 (long long) n_tokens, (long long) n_seqs);
    LOOM_REQUIRE(B->ne[1] > 0 && n_head % B->ne[1] == 0, "B %s: %lld heads do not split into its groups (ne1)",
                 describe(B).text, (long long) n_head);
    LOOM_REQUIRE(ggml_is_vector(ids) && ids->ne[0] == n_seqs, "ids %s must be a vector of %lld sequence ids",
                 describe(ids).text, (long long) n_seqs);
    LOOM_REQUIRE(ggml_is_matrix(A) && A->ne[1] == n_head, "A %s must be [d_state or 1, %lld]", describe(A).text,
                 (long long) n_head);
    LOOM_REQUIRE(A->ne[0] == 1 || (A->ne[0] == d_state && K == 1),
                 "A %s must be [1, n_head], or [%lld, n_head] with K == 1 (K is %lld)", describe(A).text,
                 (long long) d_state, (long long) K);

    const int64_t ne = ggml_nelements(x) + K * d_state * head_dim * n_head * n_seqs;
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
    return r;
}

ggml_tensor * ggml_rwkv_wkv6(ggml_context * ctx, ggml_tensor * k, ggml_tensor * v, ggml_tensor * r, ggml_tensor * tf,
                             ggml_tensor * td, ggml_tensor * state) {
    ggml_tensor * inputs[] = {k, v, r, td};
    check_rwkv_inputs(__func__, inputs, 4, k, state);
    LOOM_REQUIRE(ggml_is_contiguous(tf) && ggml_nelements(tf) == k->ne[0] * k->ne[1],
                 "tf %s must be contiguous with %lld x %lld values", describe(tf).text, (long long) k->ne[0],
                 (long long) k->ne[1]);
    ggml_tensor * res = rwkv_result(ctx, k, state, __func__);
    res->op           = GGML_OP_RWKV_WKV6;
    res->src[0]       = k;
    res->src[1]       = v;
    res->src[2]       = r;
    res->src[3]       = tf;
    res->src[4]       = td;
    res->src[5]       = state;
    return res;
}

ggml_tensor * ggml_gated_linear_attn(ggml_context * ctx, ggml_tensor * k, ggml_tensor * v, ggml_tensor * q,
                                     ggml_tensor * g, ggml_tensor * state, float scale) {
    ggml_tensor * inputs[] = {k, v, q, g};
    check_rwkv_inputs(__func__, inputs, 4, k, state);
    ggml_tensor * res = rwkv_result(ctx, k, state, __func__);
    set_op_param_f32(res, 0, scale);
    res->op     = GGML_OP_GATED_LINEAR_ATTN;
    res->src[0] = k;
    res->src[1] = v;
    res->src[2] = q;
    res->src[3] = g;
    res->src[4] = state;
    return res;
}

ggml_tensor * ggml_rwkv_wkv7(ggml_context * ctx, ggml_tensor * r, ggml_tensor * w, ggml_tensor * k, ggml_tensor * v,
                             ggml_tensor * a, ggml_tensor * b, ggml_tensor * state) {
    ggml_tensor * inputs[] = {r, w, k, v, a, b};
    check_rwkv_inputs(__func__, inputs, 6, k, state);
    ggml_tensor * res = rwkv_result(ctx, k, state, __func__);
    res->op           = GGML_OP_RWKV_WKV7;
    res->src[0]       = r;
    res->src[1]       = w;
    res->src[2]       = k;
    res->src[3]       = v;
    res->src[4]       = a;
    res->src[5]       = b;
    res->src[6]       = state;
    return res;
}

ggml_tensor * ggml_solve_tri(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, bool left, bool lower, bool uni) {
    LOOM_REQUIRE(a->type == GGML_TYPE_F32 && b->type == GGML_TYPE_F32, "a %s and b %s must be f32", describe(a).text,
                 describe(b).text);
    LOOM_REQUIRE(a->ne[0] == a->ne[1], "a %s must be square", describe(a).text);
    LOOM_REQUIRE(b->ne[1] == a->ne[1] && b->ne[2] == a->ne[2] && b->ne[3] == a->ne[3],
                 "b %s must have %lld rows and the batch dimensions of a %s", describe(b).text, (long long) a->ne[1],
                 describe(a).text);
    LOOM_REQUIRE(ggml_is_contiguous(a) && ggml_is_contiguous(b), "a %s and b %s must be contiguous", describe(a).text,
                 describe(b).text);
    LOOM_REQUIRE(left && lower && !uni, "left %d, lower %d, uni %d: only left, lower, not unit-diagonal is defined",
                 int(left), int(lower), int(uni));
    ggml_tensor * r = new_tensor_impl(ctx, GGML_TYPE_F32, 4, b->ne, nullptr, 0, __func__);
    r->op           = GGML_OP_SOLVE_TRI;
    r->src[0]       = a;
    r->src[1]       = b;
    return r;
}

ggml_tensor * ggml_gated_delta_net(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v,
                                   ggml_tensor * g, ggml_tensor * beta, ggml_tensor * state, int64_t K) {
    for (const ggml_tensor * t : {q, k, v}) {
        LOOM_REQUIRE(ggml_is_contiguous_rows(t), "%s must have contiguous rows", describe(t).text);
    }
    for (const ggml_tensor * t : {g, beta, state}) {
        LOOM_REQUIRE(ggml_is_contiguous(t), "%s must be contiguous", describe(t).text);
    }
    for (const ggml_tensor * t : {q, k, v, g, beta, state}) {
        LOOM_REQUIRE(t->type == GGML_TYPE_F32, "%s must be f32", describe(t).text);
    }
    const int64_t S = v->ne[0], H = v->ne[1], n_tokens = v->ne[2], n_seqs = v->ne[3];
    LOOM_REQUIRE(ggml_are_same_shape(q, k), "q %s and k %s must have the same shape", describe(q).text,
                 describe(k).text);
    LOOM_REQUIRE(q->ne[0] == S && q->ne[1] > 0 && H % q->ne[1] == 0 && q->ne[2] == n_tokens && q->ne[3] > 0 &&
                     n_seqs % q->ne[3] == 0,
                 "q %s must be [%lld, a divisor of %lld, %lld, a divisor of %lld] for v %s", describe(q).text,
                 (long long) S, (long long) H, (long long) n_tokens, (long long) n_seqs, describe(v).text);
    LOOM_REQUIRE((g->ne[0] == 1 || g->ne[0] == S) && g->ne[1] == H && g->ne[2] == n_tokens && g->ne[3] == n_seqs,
                 "g %s must be [1 or %lld, %lld, %lld, %lld]", describe(g).text, (long long) S, (long long) H,
                 (long long) n_tokens, (long long) n_seqs);
    LOOM_REQUIRE(beta->ne[0] == 1 && beta->ne[1] == H && beta->ne[2] == n_tokens && beta->ne[3] == n_seqs,
                 "beta %s must be [1, %lld, %lld, %lld]", describe(beta).text, (long long) H, (long long) n_tokens,
                 (long long) n_seqs);
    LOOM_REQUIRE(state->ne[0] == S && state->ne[1] == S && state->ne[2] == H && state->ne[3] == n_seqs,
                 "state %s must be [%lld, %lld, %lld, %lld]", describe(state).text, (long long) S, (long long) S,
                 (long long) H, (long long) n_seqs);
    LOOM_REQUIRE(K >= 1 && K <= INT32_MAX, "K %lld must be in [1, INT32_MAX]", (long long) K);
    const int64_t ne[4] = {S * H, n_tokens * n_seqs + K * S * n_seqs, 1, 1};
    ggml_tensor * r     = new_tensor_impl(ctx, GGML_TYPE_F32, 4, ne, nullptr, 0, __func__);
    set_op_param_i32(r, 0, int32_t(K));
    r->op     = GGML_OP_GATED_DELTA_NET;
    r->src[0] = q;
    r->src[1] = k;
    r->src[2] = v;
    r->src[3] = g;
    r->src[4] = beta;
    r->src[5] = state;
    return r;
}

} // extern "C"
