// DeepSeek's lightning indexer and V4 hyper-connection operators against
// double-precision references written from their definitions (include/ggml.h).
//
// Thresholds (NMSE): 1e-10, float sums of a few dozen terms; -inf from the
// indexer's mask matched exactly.

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "test_util.h"

using namespace loomtest;

namespace {

constexpr double kTol = 1e-10;

ggml_tensor * new_tensor(ggml_context * ctx, ggml_type type, const Shape & ne) {
    return ggml_new_tensor_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]);
}

Array indexer_ref(const Array & q, const Array & k, const Array & w, const Array & m) {
    const int64_t n_embd = q.ne[0], n_head = q.ne[1], n_batch = q.ne[2], n_stream = q.ne[3], n_kv = k.ne[2];
    Array         out({n_kv, n_batch, 1, n_stream});
    for (int64_t s = 0; s < n_stream; ++s) {
        for (int64_t t = 0; t < n_batch; ++t) {
            for (int64_t j = 0; j < n_kv; ++j) {
                double score = 0.0;
                for (int64_t h = 0; h < n_head; ++h) {
                    double qk = 0.0;
                    for (int64_t e = 0; e < n_embd; ++e) qk += q(e, h, t, s) * k(e, 0, j, s);
                    score += std::max(qk, 0.0) * w(h, t, 0, s);
                }
                out(j, t, 0, s) = score + m(j, t, 0, s % m.ne[3]);
            }
        }
    }
    return out;
}

Array hc_comb_ref(const Array & mixes, const Array & scale, const Array & base, double eps, int n_iter) {
    const int64_t hc = 4, n_tokens = mixes.ne[1];
    Array         out({hc, hc, n_tokens, 1});
    for (int64_t t = 0; t < n_tokens; ++t) {
        double c[4][4]; // [src][dst]
        for (int64_t s = 0; s < hc; ++s) {
            double max = -INFINITY;
            for (int64_t d = 0; d < hc; ++d) {
                c[s][d] = mixes(2 * hc + d + hc * s, t) * scale(2) + base(2 * hc + d + hc * s);
                max     = std::max(max, c[s][d]);
            }
            double sum = 0.0;
            for (int64_t d = 0; d < hc; ++d) sum += std::exp(c[s][d] - max);
            for (int64_t d = 0; d < hc; ++d) c[s][d] = std::exp(c[s][d] - max) / sum + eps;
        }
        auto over_src = [&] {
            for (int64_t d = 0; d < hc; ++d) {
                double sum = eps;
                for (int64_t s = 0; s < hc; ++s) sum += c[s][d];
                for (int64_t s = 0; s < hc; ++s) c[s][d] /= sum;
            }
        };
        auto over_dst = [&] {
            for (int64_t s = 0; s < hc; ++s) {
                double sum = eps;
                for (int64_t d = 0; d < hc; ++d) sum += c[s][d];
                for (int64_t d = 0; d < hc; ++d) c[s][d] /= sum;
            }
        };
        over_src();
        for (int i = 1; i < n_iter; ++i) {
            over_dst();
            over_src();
        }
        for (int64_t s = 0; s < hc; ++s) {
            for (int64_t d = 0; d < hc; ++d) out(d, s, t) = c[s][d];
        }
    }
    return out;
}

Array hc_pre_ref(const Array & x, const Array & w, bool gated, double scale) {
    const int64_t n_embd = x.ne[0], hc = x.ne[1], n_tokens = x.ne[2];
    Array         out({n_embd, n_tokens, 1, 1});
    for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t i = 0; i < n_embd; ++i) {
            double sum = 0.0;
            for (int64_t h = 0; h < hc; ++h) {
                sum += x(i, h, t) * (gated ? 1.0 / (1.0 + std::exp(-w(i, h, t))) : w(h, t));
            }
            out(i, t) = scale * sum;
        }
    }
    return out;
}

Array hc_post_ref(const Array & x, const Array & res, const Array & post, const Array * comb) {
    const int64_t n_embd = x.ne[0], n_tokens = x.ne[1], hc = res.ne[1];
    Array         out({n_embd, hc, n_tokens, 1});
    for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t d = 0; d < hc; ++d) {
            for (int64_t i = 0; i < n_embd; ++i) {
                double sum = x(i, t) * post(d, t);
                if (comb != nullptr) {
                    for (int64_t s = 0; s < hc; ++s) sum += res(i, s, t) * (*comb)(d, s, t);
                } else {
                    sum += res(i, d, t);
                }
                out(i, d, t) = sum;
            }
        }
    }
    return out;
}

} // namespace

TEST(OpsDsv4, LightningIndexer) {
    for (unsigned seed : seeds()) {
        std::mt19937 rng(seed);
        // Block-type keys (a quantized indexer cache) decoded whole.
        for (ggml_type kt : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_1}) {
            const int64_t n_embd = ggml_is_quantized(kt) ? 32 * rand_int(rng, 1, 3) : odd_size(rng, 1, 33);
            const int64_t n_head = rand_int(rng, 1, 5), n_batch = odd_size(rng, 1, 7);
            const int64_t n_kv = odd_size(rng, 1, 19), n_stream = rand_int(rng, 1, 2) * 2, n_mask = n_stream / 2;
            SCOPED_TRACE(std::string(ggml_type_name(kt)) + " embd " + std::to_string(n_embd) + " kv " +
                         std::to_string(n_kv));
            Context       ctx;
            ggml_tensor * q = new_tensor(ctx, GGML_TYPE_F32, {n_embd, n_head, n_batch, n_stream});
            ggml_tensor * k = new_tensor(ctx, kt, {n_embd, 1, n_kv, n_stream});
            ggml_tensor * w = new_tensor(ctx, GGML_TYPE_F32, {n_head, n_batch, 1, n_stream});
            ggml_tensor * m = new_tensor(ctx, GGML_TYPE_F16, {n_kv, n_batch, 1, n_mask});
            const Array   Q = fill_random(q, rng);
            const Array   K = fill_random(k, rng);
            const Array   W = fill_random(w, rng, 0.0, 1.0);
            Array         M = random_array(shape_of(m), rng);
            for (size_t i = 0; i < M.v.size(); i += 3) M.v[i] = -INFINITY;
            write_tensor(m, M);
            M = read_tensor(m);
            check_modes(ctx, ggml_lightning_indexer(ctx, q, k, w, m), indexer_ref(Q, K, W, M), kTol);
        }
    }
}

TEST(OpsDsv4, LightningIndexerPermutedQuery) {
    std::mt19937  rng(3);
    Context       ctx;
    ggml_tensor * qb = new_tensor(ctx, GGML_TYPE_F32, {16, 5, 3, 1}); // [n_embd, n_batch, n_head]
    fill_random(qb, rng);
    ggml_tensor * q = ggml_permute(ctx, qb, 0, 2, 1, 3);
    ggml_tensor * k = new_tensor(ctx, GGML_TYPE_F16, {16, 1, 9, 1});
    ggml_tensor * w = new_tensor(ctx, GGML_TYPE_F32, {3, 5, 1, 1});
    ggml_tensor * m = new_tensor(ctx, GGML_TYPE_F16, {9, 5, 1, 1});
    const Array   K = fill_random(k, rng);
    const Array   W = fill_random(w, rng);
    const Array   M = fill_random(m, rng);
    check_modes(ctx, ggml_lightning_indexer(ctx, q, k, w, m), indexer_ref(read_tensor(q), K, W, M), kTol);
}

TEST(OpsDsv4, HcComb) {
    std::mt19937 rng(5);
    for (int n_iter : {1, 2, 7}) {
        SCOPED_TRACE("n_iter " + std::to_string(n_iter));
        Context       ctx;
        ggml_tensor * mixes = new_tensor(ctx, GGML_TYPE_F32, {24, 9, 1, 1});
        ggml_tensor * scale = new_tensor(ctx, GGML_TYPE_F32, {3, 1, 1, 1});
        ggml_tensor * base  = new_tensor(ctx, GGML_TYPE_F32, {24, 1, 1, 1});
        const Array   X     = fill_random(mixes, rng, -3.0, 3.0);
        const Array   S     = fill_random(scale, rng);
        const Array   B     = fill_random(base, rng);
        ggml_tensor * out   = ggml_dsv4_hc_comb(ctx, mixes, scale, base, 1e-6f, n_iter);
        ASSERT_EQ(out->op_params[1], n_iter);
        check_modes(ctx, out, hc_comb_ref(X, S, B, double(1e-6f), n_iter), kTol);
    }
}

TEST(OpsDsv4, HcPre) {
    std::mt19937  rng(7);
    Context       ctx;
    ggml_tensor * x = new_tensor(ctx, GGML_TYPE_F32, {33, 4, 5, 1});
    ggml_tensor * w = new_tensor(ctx, GGML_TYPE_F32, {4, 5, 1, 1});
    ggml_tensor * g = new_tensor(ctx, GGML_TYPE_F32, {33, 4, 5, 1});
    const Array   X = fill_random(x, rng);
    const Array   W = fill_random(w, rng);
    const Array   G = fill_random(g, rng, -4.0, 4.0);
    check_modes(ctx, ggml_dsv4_hc_pre(ctx, x, w), hc_pre_ref(X, W, false, 1.0), kTol);
    check_modes(ctx, ggml_dsv4_hc_pre_gated(ctx, x, g, 0.75f), hc_pre_ref(X, G, true, double(0.75f)), kTol);
    // x with its streams and tokens swapped in memory.
    ggml_tensor * xb = new_tensor(ctx, GGML_TYPE_F32, {33, 5, 4, 1});
    fill_random(xb, rng);
    ggml_tensor * xp = ggml_permute(ctx, xb, 0, 2, 1, 3);
    check_modes(ctx, ggml_dsv4_hc_pre(ctx, xp, w), hc_pre_ref(read_tensor(xp), W, false, 1.0), kTol);
}

TEST(OpsDsv4, HcPost) {
    std::mt19937  rng(9);
    Context       ctx;
    ggml_tensor * x    = new_tensor(ctx, GGML_TYPE_F32, {17, 6, 1, 1});
    ggml_tensor * res  = new_tensor(ctx, GGML_TYPE_F32, {17, 4, 6, 1});
    ggml_tensor * post = new_tensor(ctx, GGML_TYPE_F32, {4, 6, 1, 1});
    ggml_tensor * comb = new_tensor(ctx, GGML_TYPE_F32, {4, 4, 6, 1});
    const Array   X    = fill_random(x, rng);
    const Array   R    = fill_random(res, rng);
    const Array   P    = fill_random(post, rng);
    const Array   C    = fill_random(comb, rng);
    check_modes(ctx, ggml_dsv4_hc_post(ctx, x, res, post, comb), hc_post_ref(X, R, P, &C), kTol);
    check_modes(ctx, ggml_dsv4_hc_post(ctx, x, res, post, nullptr), hc_post_ref(X, R, P, nullptr), kTol);
}

TEST(OpsDsv4DeathTest, Preconditions) {
    Context       ctx;
    ggml_tensor * q = new_tensor(ctx, GGML_TYPE_F32, {8, 2, 3, 1});
    ggml_tensor * k = new_tensor(ctx, GGML_TYPE_F32, {8, 1, 5, 1});
    ggml_tensor * w = new_tensor(ctx, GGML_TYPE_F32, {2, 3, 1, 1});
    ggml_tensor * m = new_tensor(ctx, GGML_TYPE_F16, {5, 3, 1, 1});
    EXPECT_DEATH(ggml_lightning_indexer(ctx, q, k, w, new_tensor(ctx, GGML_TYPE_F32, {5, 3, 1, 1})),
                 "ggml_lightning_indexer: the mask .* must be f16");
    EXPECT_DEATH(ggml_lightning_indexer(ctx, q, new_tensor(ctx, GGML_TYPE_F32, {8, 2, 5, 1}), w, m), "k .* must be");
    EXPECT_DEATH(ggml_lightning_indexer(ctx, q, k, w, new_tensor(ctx, GGML_TYPE_F16, {4, 3, 1, 1})),
                 "mask .* must be \\[5, 3");

    ggml_tensor * mixes = new_tensor(ctx, GGML_TYPE_F32, {24, 2, 1, 1});
    ggml_tensor * scale = new_tensor(ctx, GGML_TYPE_F32, {3, 1, 1, 1});
    ggml_tensor * base  = new_tensor(ctx, GGML_TYPE_F32, {24, 1, 1, 1});
    EXPECT_DEATH(ggml_dsv4_hc_comb(ctx, mixes, scale, base, 1e-6f, 0), "ggml_dsv4_hc_comb: n_iter 0");
    EXPECT_DEATH(ggml_dsv4_hc_comb(ctx, new_tensor(ctx, GGML_TYPE_F32, {15, 2, 1, 1}), scale, base, 1e-6f, 1),
                 "hc = 4");

    ggml_tensor * x = new_tensor(ctx, GGML_TYPE_F32, {8, 4, 3, 1});
    EXPECT_DEATH(ggml_dsv4_hc_pre(ctx, x, new_tensor(ctx, GGML_TYPE_F32, {3, 3, 1, 1})),
                 "ggml_dsv4_hc_pre: weights .* must be \\[4, 3\\]");
    EXPECT_DEATH(ggml_dsv4_hc_pre_gated(ctx, x, new_tensor(ctx, GGML_TYPE_F32, {4, 3, 1, 1}), 1.0f),
                 "ggml_dsv4_hc_pre_gated: gate .* must have the shape of x");
    ggml_tensor * x2 = new_tensor(ctx, GGML_TYPE_F32, {8, 3, 1, 1});
    EXPECT_DEATH(ggml_dsv4_hc_post(ctx, x2, x, new_tensor(ctx, GGML_TYPE_F32, {3, 3, 1, 1}), nullptr),
                 "post .* must be \\[4, 3\\]");
    EXPECT_DEATH(ggml_dsv4_hc_post(ctx, x2, x, new_tensor(ctx, GGML_TYPE_F32, {4, 3, 1, 1}),
                                   new_tensor(ctx, GGML_TYPE_F32, {4, 3, 3, 1})),
                 "comb .* must be f32 \\[4, 4, 3\\]");
}
