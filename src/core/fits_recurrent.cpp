// Rules of the recurrent and state-space operators (Mamba's convolution and
// scan, the RWKV-6/7 and gated linear attention recurrences, the gated
// delta rule, the triangular solve) and of DeepSeek's lightning indexer and
// V4 hyper-connections (constructors in ops_recurrent.cpp, ops_dsv4.cpp).
// Their op params are all their constructors set: any other is refused.
// Note [Shape rules] in fits.h.

#include "fits_impl.h"

namespace loom {

using namespace fits;

namespace {

// The three RWKV-style recurrences: every per-token input (the sources in
// inputs) is [S, H, n_tokens] and contiguous, like src[shape]; the state
// (src[state]) holds S * S * H * n_seqs values with ne1 = n_seqs, and the
// tokens split evenly into sequences. The result (F32) puts the outputs
// first, then the final states. The sources' types are each device's.
bool rwkv_fits(const ggml_tensor * n, std::string * why, std::initializer_list<int> inputs, int shape, int state) {
    const ggml_tensor * k = n->src[shape];
    const int64_t       S = k->ne[0], H = k->ne[1], T = k->ne[2];
    for (int i : inputs) {
        const ggml_tensor * t = n->src[i];
        LOOM_FITS(ggml_is_contiguous(t), "src[%d] %s must be contiguous", i, describe(t).text);
        LOOM_FITS(t->ne[0] == S && t->ne[1] == H && t->ne[2] == T && t->ne[3] == 1,
                  "src[%d] %s must be [%lld, %lld, %lld] like src[%d] %s", i, describe(t).text, (long long) S,
                  (long long) H, (long long) T, shape, describe(k).text);
    }
    const ggml_tensor * s      = n->src[state];
    const int64_t       n_seqs = s->ne[1];
    LOOM_FITS(ggml_is_contiguous(s), "state (src[%d]) %s must be contiguous", state, describe(s).text);
    LOOM_FITS(n_seqs > 0 && ggml_nelements(s) == wide(S) * S * H * n_seqs,
              "state (src[%d]) %s must hold %lld x %lld x %lld values per sequence (ne1)", state, describe(s).text,
              (long long) S, (long long) S, (long long) H);
    LOOM_FITS(T % n_seqs == 0, "%lld tokens do not split into %lld sequences", (long long) T, (long long) n_seqs);
    return node_type_is(n, why, GGML_TYPE_F32) && node_shape_is(n, why, wide(S) * H, T + wide(S) * n_seqs, 1, 1);
}

} // namespace

bool fits_ssm_conv(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * sx = n->src[0];
    const ggml_tensor * c  = n->src[1];
    LOOM_FITS(ggml_is_3d(sx), "sx (src[0]) %s must be 3-d", describe(sx).text);
    LOOM_FITS(ggml_is_matrix(c), "c (src[1]) %s must be a matrix", describe(c).text);
    const int64_t d_conv = c->ne[0], d_inner = c->ne[1];
    LOOM_FITS(sx->ne[1] == d_inner, "sx (src[0]) %s must have %lld channels (ne1) like c (src[1]) %s",
              describe(sx).text, (long long) d_inner, describe(c).text);
    LOOM_FITS(sx->ne[0] - d_conv + 1 >= 0, "sx (src[0]) %s is shorter than the %lld - 1 values before the first token",
              describe(sx).text, (long long) d_conv);
    return params_unset_from(n, why, 0) && node_type_is(n, why, GGML_TYPE_F32) &&
           node_shape_is(n, why, d_inner, sx->ne[0] - d_conv + 1, sx->ne[2], 1);
}

// SSM_SCAN: op params [K], the states saved per sequence.
bool fits_ssm_scan(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * s   = n->src[0];
    const ggml_tensor * x   = n->src[1];
    const ggml_tensor * dt  = n->src[2];
    const ggml_tensor * A   = n->src[3];
    const ggml_tensor * B   = n->src[4];
    const ggml_tensor * C   = n->src[5];
    const ggml_tensor * ids = n->src[6];
    const int32_t       K   = op_param_i32(n, 0);
    LOOM_FITS(K >= 1, "K %d must be in [1, INT32_MAX]", int(K));
    LOOM_FITS(ggml_is_contiguous(s), "s (src[0]) %s must be contiguous", describe(s).text);
    LOOM_FITS(ggml_is_contiguous(dt), "dt (src[2]) %s must be contiguous", describe(dt).text);
    LOOM_FITS(ggml_is_contiguous(A), "A (src[3]) %s must be contiguous", describe(A).text);
    for (int i : {1, 4, 5}) {
        const ggml_tensor * t = n->src[i];
        LOOM_FITS(t->nb[0] == ggml_type_size(t->type) && t->nb[1] == size_t(t->ne[0]) * t->nb[0],
                  "src[%d] %s must have contiguous rows and matrices", i, describe(t).text);
    }
    LOOM_FITS(ggml_are_same_shape(B, C), "B (src[4]) %s and C (src[5]) %s must have the same shape", describe(B).text,
              describe(C).text);
    LOOM_FITS(ids->type == GGML_TYPE_I32, "ids (src[6]) %s must be i32", describe(ids).text);
    const int64_t d_state = s->ne[0], head_dim = x->ne[0], n_head = x->ne[1], n_tokens = x->ne[2], n_seqs = x->ne[3];
    LOOM_FITS(ggml_is_3d(dt) && dt->ne[0] == n_head && dt->ne[1] == n_tokens && dt->ne[2] == n_seqs,
              "dt (src[2]) %s must be [%lld, %lld, %lld] for x (src[1]) %s", describe(dt).text, (long long) n_head,
              (long long) n_tokens, (long long) n_seqs, describe(x).text);
    LOOM_FITS(s->ne[1] == head_dim && s->ne[2] == n_head, "s (src[0]) %s must be [d_state, %lld, %lld, n] for x (src[1]) %s",
              describe(s).text, (long long) head_dim, (long long) n_head, describe(x).text);
    LOOM_FITS(B->ne[0] == d_state && B->ne[2] == n_tokens && B->ne[3] == n_seqs,
              "B (src[4]) %s must be [%lld, n_group, %lld, %lld]", describe(B).text, (long long) d_state,
              (long long) n_tokens, (long long) n_seqs);
    LOOM_FITS(B->ne[1] > 0 && n_head % B->ne[1] == 0, "B (src[4]) %s: %lld heads do not split into its groups (ne1)",
              describe(B).text, (long long) n_head);
    LOOM_FITS(ggml_is_vector(ids) && ids->ne[0] == n_seqs, "ids (src[6]) %s must be a vector of %lld sequence ids",
              describe(ids).text, (long long) n_seqs);
    LOOM_FITS(ggml_is_matrix(A) && A->ne[1] == n_head, "A (src[3]) %s must be [d_state or 1, %lld]", describe(A).text,
              (long long) n_head);
    LOOM_FITS(A->ne[0] == 1 || (A->ne[0] == d_state && K == 1),
              "A (src[3]) %s must be [1, n_head], or [%lld, n_head] with K == 1 (K is %d)", describe(A).text,
              (long long) d_state, int(K));
    return params_unset_from(n, why, 1) && node_type_is(n, why, GGML_TYPE_F32) &&
           node_shape_is(n, why, ggml_nelements(x) + wide(K) * d_state * head_dim * n_head * n_seqs, 1, 1, 1);
}

// RWKV_WKV6: k, v, r, tf, td, state.
bool fits_rwkv_wkv6(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * k  = n->src[0];
    const ggml_tensor * tf = n->src[3];
    LOOM_FITS(ggml_is_contiguous(tf) && ggml_nelements(tf) == wide(k->ne[0]) * k->ne[1],
              "tf (src[3]) %s must be contiguous with %lld x %lld values", describe(tf).text, (long long) k->ne[0],
              (long long) k->ne[1]);
    return rwkv_fits(n, why, {0, 1, 2, 4}, 0, 5) && params_unset_from(n, why, 0);
}

// GATED_LINEAR_ATTN: k, v, q, gate, state; op params [scale].
bool fits_gated_linear_attn(const ggml_tensor * n, std::string * why) {
    return rwkv_fits(n, why, {0, 1, 2, 3}, 0, 4) && params_unset_from(n, why, 1);
}

// RWKV_WKV7: r, w, k, v, a, b, state.
bool fits_rwkv_wkv7(const ggml_tensor * n, std::string * why) {
    return rwkv_fits(n, why, {0, 1, 2, 3, 4, 5}, 2, 6) && params_unset_from(n, why, 0);
}

// SOLVE_TRI: A X = B for X, A lower triangular (the only form ggml 0.25.1
// defines; the constructor's left, lower and uni are not kept).
bool fits_solve_tri(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    LOOM_FITS(a->type == GGML_TYPE_F32 && b->type == GGML_TYPE_F32, "a (src[0]) %s and b (src[1]) %s must be f32",
              describe(a).text, describe(b).text);
    LOOM_FITS(a->ne[0] == a->ne[1], "a (src[0]) %s must be square", describe(a).text);
    LOOM_FITS(b->ne[1] == a->ne[1] && b->ne[2] == a->ne[2] && b->ne[3] == a->ne[3],
              "b (src[1]) %s must have %lld rows and the batch dimensions of a (src[0]) %s", describe(b).text,
              (long long) a->ne[1], describe(a).text);
    LOOM_FITS(ggml_is_contiguous(a) && ggml_is_contiguous(b), "a (src[0]) %s and b (src[1]) %s must be contiguous",
              describe(a).text, describe(b).text);
    return params_unset_from(n, why, 0) && node_type_is(n, why, GGML_TYPE_F32) &&
           node_shape_is(n, why, b->ne[0], b->ne[1], b->ne[2], b->ne[3]);
}

// GATED_DELTA_NET: q, k, v, g, beta, state; op params [K].
bool fits_gated_delta_net(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * q = n->src[0], *k = n->src[1], *v = n->src[2];
    const ggml_tensor * g = n->src[3], *beta = n->src[4], *state = n->src[5];
    const int32_t       K = op_param_i32(n, 0);
    for (int i : {0, 1, 2}) {
        LOOM_FITS(ggml_is_contiguous_rows(n->src[i]), "src[%d] %s must have contiguous rows", i,
                  describe(n->src[i]).text);
    }
    for (int i : {3, 4, 5}) {
        LOOM_FITS(ggml_is_contiguous(n->src[i]), "src[%d] %s must be contiguous", i, describe(n->src[i]).text);
    }
    if (!srcs_type_is(n, why, 0, 6, GGML_TYPE_F32)) {
        return false;
    }
    const int64_t S = v->ne[0], H = v->ne[1], n_tokens = v->ne[2], n_seqs = v->ne[3];
    LOOM_FITS(ggml_are_same_shape(q, k), "q (src[0]) %s and k (src[1]) %s must have the same shape", describe(q).text,
              describe(k).text);
    LOOM_FITS(q->ne[0] == S && q->ne[1] > 0 && H % q->ne[1] == 0 && q->ne[2] == n_tokens && q->ne[3] > 0 &&
                  n_seqs % q->ne[3] == 0,
              "q (src[0]) %s must be [%lld, a divisor of %lld, %lld, a divisor of %lld] for v (src[2]) %s",
              describe(q).text, (long long) S, (long long) H, (long long) n_tokens, (long long) n_seqs,
              describe(v).text);
    LOOM_FITS((g->ne[0] == 1 || g->ne[0] == S) && g->ne[1] == H && g->ne[2] == n_tokens && g->ne[3] == n_seqs,
              "g (src[3]) %s must be [1 or %lld, %lld, %lld, %lld]", describe(g).text, (long long) S, (long long) H,
              (long long) n_tokens, (long long) n_seqs);
    LOOM_FITS(beta->ne[0] == 1 && beta->ne[1] == H && beta->ne[2] == n_tokens && beta->ne[3] == n_seqs,
              "beta (src[4]) %s must be [1, %lld, %lld, %lld]", describe(beta).text, (long long) H,
              (long long) n_tokens, (long long) n_seqs);
    LOOM_FITS(state->ne[0] == S && state->ne[1] == S && state->ne[2] == H && state->ne[3] == n_seqs,
              "state (src[5]) %s must be [%lld, %lld, %lld, %lld]", describe(state).text, (long long) S,
              (long long) S, (long long) H, (long long) n_seqs);
    LOOM_FITS(K >= 1, "K %d must be in [1, INT32_MAX]", int(K));
    return params_unset_from(n, why, 1) && node_type_is(n, why, GGML_TYPE_F32) &&
           node_shape_is(n, why, wide(S) * H, wide(n_tokens) * n_seqs + wide(K) * S * n_seqs, 1, 1);
}

// ---- DeepSeek ----

// LIGHTNING_INDEXER: q, k, weights, mask (which it needs).
bool fits_lightning_indexer(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * q = n->src[0], *k = n->src[1], *w = n->src[2], *mask = n->src[3];
    LOOM_FITS(q->type == GGML_TYPE_F32 && w->type == GGML_TYPE_F32, "q (src[0]) %s and weights (src[2]) %s must be f32",
              describe(q).text, describe(w).text);
    LOOM_FITS(mask != nullptr && mask->type == GGML_TYPE_F16, "the mask (src[3]) %s must be f16", describe(mask).text);
    LOOM_FITS(k->ne[0] == q->ne[0] && k->ne[1] == 1 && k->ne[3] == q->ne[3],
              "k (src[1]) %s must be [%lld, 1, n_kv, %lld] for q (src[0]) %s", describe(k).text, (long long) q->ne[0],
              (long long) q->ne[3], describe(q).text);
    LOOM_FITS(w->ne[0] == q->ne[1] && w->ne[1] == q->ne[2] && w->ne[2] == 1 && w->ne[3] == q->ne[3],
              "weights (src[2]) %s must be [%lld, %lld, 1, %lld] for q (src[0]) %s", describe(w).text,
              (long long) q->ne[1], (long long) q->ne[2], (long long) q->ne[3], describe(q).text);
    LOOM_FITS(mask->ne[0] == k->ne[2] && mask->ne[1] == q->ne[2] && mask->ne[2] == 1 && divides(mask->ne[3], q->ne[3]),
              "mask (src[3]) %s must be [%lld, %lld, 1, a divisor of %lld]", describe(mask).text, (long long) k->ne[2],
              (long long) q->ne[2], (long long) q->ne[3]);
    return params_unset_from(n, why, 0) && node_type_is(n, why, GGML_TYPE_F32) &&
           node_shape_is(n, why, k->ne[2], q->ne[2], 1, q->ne[3]);
}

namespace {
constexpr int64_t k_hc = 4; // streams ggml 0.25.1 defines hc_comb for
} // namespace

// DSV4_HC_COMB: mixes, scale, base; op params [eps, n_iter].
bool fits_dsv4_hc_comb(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * mixes = n->src[0], *scale = n->src[1], *base = n->src[2];
    const int64_t       mix_dim = (2 + k_hc) * k_hc;
    LOOM_FITS(mixes->type == GGML_TYPE_F32 && scale->type == GGML_TYPE_F32 && base->type == GGML_TYPE_F32,
              "mixes (src[0]) %s, scale (src[1]) %s and base (src[2]) %s must be f32", describe(mixes).text,
              describe(scale).text, describe(base).text);
    LOOM_FITS(op_param_i32(n, 1) > 0, "n_iter %d must be positive", op_param_i32(n, 1));
    LOOM_FITS(mixes->ne[0] == mix_dim && mixes->ne[2] == 1 && mixes->ne[3] == 1,
              "mixes (src[0]) %s must be [%lld, n_tokens] ((2 + hc) * hc values a token, hc = %lld)",
              describe(mixes).text, (long long) mix_dim, (long long) k_hc);
    LOOM_FITS(scale->ne[0] >= 3 && scale->ne[1] == 1 && scale->ne[2] == 1 && scale->ne[3] == 1,
              "scale (src[1]) %s must be a vector of at least 3 values", describe(scale).text);
    LOOM_FITS(base->ne[0] == mix_dim && base->ne[1] == 1 && base->ne[2] == 1 && base->ne[3] == 1,
              "base (src[2]) %s must be a vector of %lld values", describe(base).text, (long long) mix_dim);
    return params_unset_from(n, why, 2) && node_type_is(n, why, GGML_TYPE_F32) &&
           node_shape_is(n, why, k_hc, k_hc, mixes->ne[1], 1);
}

// DSV4_HC_PRE: x, weights (a gate of x's shape when gated); op params
// [scale, gated], the scale 1 unless gated.
bool fits_dsv4_hc_pre(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * x = n->src[0], *w = n->src[1];
    const int32_t       gated = op_param_i32(n, 1);
    LOOM_FITS(x->type == GGML_TYPE_F32 && w->type == GGML_TYPE_F32, "x (src[0]) %s and weights (src[1]) %s must be f32",
              describe(x).text, describe(w).text);
    const int64_t n_embd = x->ne[0], hc = x->ne[1], n_tokens = x->ne[2];
    LOOM_FITS(hc > 0 && x->ne[3] == 1, "x (src[0]) %s must be [n_embd, hc > 0, n_tokens]", describe(x).text);
    LOOM_FITS(gated == 0 || gated == 1, "op_params[1] = %d: gated is 0 or 1", int(gated));
    if (gated) {
        LOOM_FITS(w->ne[0] == n_embd && w->ne[1] == hc && w->ne[2] == n_tokens && w->ne[3] == 1,
                  "gate (src[1]) %s must have the shape of x (src[0]) %s", describe(w).text, describe(x).text);
    } else {
        LOOM_FITS(w->ne[0] == hc && w->ne[1] == n_tokens && w->ne[2] == 1 && w->ne[3] == 1,
                  "weights (src[1]) %s must be [%lld, %lld]", describe(w).text, (long long) hc, (long long) n_tokens);
        LOOM_FITS(op_param_f32(n, 0) == 1.0f, "op_params[0] = %g: op params the constructor does not set (the scale "
                  "is 1 unless gated)", double(op_param_f32(n, 0)));
    }
    return params_unset_from(n, why, 2) && node_type_is(n, why, GGML_TYPE_F32) &&
           node_shape_is(n, why, n_embd, n_tokens, 1, 1);
}

// DSV4_HC_POST: x, residual, post, comb (optional).
bool fits_dsv4_hc_post(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * x = n->src[0], *res = n->src[1], *post = n->src[2], *comb = n->src[3];
    LOOM_FITS(x->type == GGML_TYPE_F32 && res->type == GGML_TYPE_F32 && post->type == GGML_TYPE_F32,
              "x (src[0]) %s, residual (src[1]) %s and post (src[2]) %s must be f32", describe(x).text,
              describe(res).text, describe(post).text);
    const int64_t n_embd = x->ne[0], n_tokens = x->ne[1], hc = res->ne[1];
    LOOM_FITS(x->ne[2] == 1 && x->ne[3] == 1, "x (src[0]) %s must be [n_embd, n_tokens]", describe(x).text);
    LOOM_FITS(hc > 0 && res->ne[0] == n_embd && res->ne[2] == n_tokens && res->ne[3] == 1,
              "residual (src[1]) %s must be [%lld, hc > 0, %lld]", describe(res).text, (long long) n_embd,
              (long long) n_tokens);
    LOOM_FITS(post->ne[0] == hc && post->ne[1] == n_tokens && post->ne[2] == 1 && post->ne[3] == 1,
              "post (src[2]) %s must be [%lld, %lld]", describe(post).text, (long long) hc, (long long) n_tokens);
    LOOM_FITS(comb == nullptr || (comb->type == GGML_TYPE_F32 && comb->ne[0] == hc && comb->ne[1] == hc &&
                                  comb->ne[2] == n_tokens && comb->ne[3] == 1),
              "comb (src[3]) %s must be f32 [%lld, %lld, %lld]", describe(comb).text, (long long) hc, (long long) hc,
              (long long) n_tokens);
    return params_unset_from(n, why, 0) && node_type_is(n, why, GGML_TYPE_F32) &&
           node_shape_is(n, why, n_embd, hc, n_tokens, 1);
}

} // namespace loom
