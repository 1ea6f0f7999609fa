// The recurrent and state-space operators against double-precision
// references written here from their definitions (include/ggml.h).
//
// Each result packs the outputs and the states in ggml 0.25.1's layout; the
// references build the same flat layout. Snapshot slots an operator leaves
// unwritten are expected to keep check_modes' 0xff fill (NaN).
//
// Thresholds (NMSE): 1e-9 for every operator: float sums over at most a few
// hundred terms, carried through a dozen recurrence steps; solve_tri 1e-9 on
// well-conditioned (diagonally dominant) systems.

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "data/ops-recurrent/cases.h"
#include "test_util.h"

using namespace loomtest;

namespace {

constexpr double kTol = 1e-9;
const double     kNaN = std::numeric_limits<double>::quiet_NaN();

ggml_tensor * new_tensor(ggml_context * ctx, const Shape & ne) {
    return ggml_new_tensor_4d(ctx, GGML_TYPE_F32, ne[0], ne[1], ne[2], ne[3]);
}

// A flat expected result reshaped to dst's shape.
Array shaped(const std::vector<double> & flat, const ggml_tensor * dst) {
    Array a(shape_of(dst));
    EXPECT_EQ(size_t(a.size()), flat.size());
    a.v = flat;
    return a;
}

double softplus(double x) {
    return x > 20.0 ? x : std::log1p(std::exp(x));
}

// ---- ssm_conv ----

Array ssm_conv_ref(const Array & sx, const Array & c) {
    const int64_t d_conv = c.ne[0], d_inner = c.ne[1], n_t = sx.ne[0] - d_conv + 1, n_s = sx.ne[2];
    Array         out({d_inner, n_t, n_s, 1});
    for (int64_t s = 0; s < n_s; ++s) {
        for (int64_t t = 0; t < n_t; ++t) {
            for (int64_t i = 0; i < d_inner; ++i) {
                double sum = 0.0;
                for (int64_t j = 0; j < d_conv; ++j) sum += sx(t + j, i, s) * c(j, i);
                out(i, t, s) = sum;
            }
        }
    }
    return out;
}

// ---- ssm_scan ----

std::vector<double> ssm_scan_ref(const Array & s0, const Array & x, const Array & dt, const Array & A, const Array & B,
                                 const Array & C, const std::vector<int32_t> & ids, int64_t K) {
    const int64_t ds = s0.ne[0], hd = x.ne[0], nh = x.ne[1], nt = x.ne[2], ns = x.ne[3], ng = B.ne[1];
    const int64_t head = ds * hd, per_slot = head * nh * ns;
    std::vector<double> out(size_t(x.size() + K * per_slot), kNaN);
    const size_t        s_off = size_t(x.size());
    for (int64_t seq = 0; seq < ns; ++seq) {
        for (int64_t h = 0; h < nh; ++h) {
            std::vector<double> st(static_cast<size_t>(head));
            for (int64_t i = 0; i < hd; ++i) {
                for (int64_t j = 0; j < ds; ++j) st[size_t(i * ds + j)] = s0(j, i, h, ids[size_t(seq)]);
            }
            const int64_t g = h / (nh / ng);
            for (int64_t t = 0; t < nt; ++t) {
                const double dts = softplus(dt(h, t, seq));
                for (int64_t i = 0; i < hd; ++i) {
                    double y = 0.0;
                    for (int64_t j = 0; j < ds; ++j) {
                        const double dA = std::exp(dts * A(A.ne[0] == 1 ? 0 : j, h));
                        double &     s  = st[size_t(i * ds + j)];
                        s               = s * dA + B(j, g, t, seq) * x(i, h, t, seq) * dts;
                        y += s * C(j, g, t, seq);
                    }
                    out[size_t(((seq * nt + t) * nh + h) * hd + i)] = y;
                }
                const int64_t slot = nt - 1 - t;
                if (slot >= 0 && slot < K) {
                    for (int64_t e = 0; e < head; ++e) {
                        out[s_off + size_t(slot * per_slot + (seq * nh + h) * head + e)] = st[size_t(e)];
                    }
                }
            }
        }
    }
    return out;
}

// ---- RWKV-6, GLA, RWKV-7 ----
// Per-token inputs [S, H, T]; state flat (seq, h, i, j); result flat.

enum class Rwkv { wkv6, gla, wkv7 };

struct RwkvIn {
    std::vector<Array> in; // wkv6: k v r tf td; gla: k v q g; wkv7: r w k v a b
    Array              state;
    double             scale = 1.0;
};

std::vector<double> rwkv_ref(Rwkv kind, const RwkvIn & d, int64_t S, int64_t H, int64_t T, int64_t n_seqs) {
    std::vector<double> out(size_t(S * H * (T + S * n_seqs)));
    const size_t        s_off = size_t(S * H * T);
    const int64_t       per   = T / n_seqs;
    for (int64_t seq = 0; seq < n_seqs; ++seq) {
        for (int64_t h = 0; h < H; ++h) {
            std::vector<double> st(size_t(S * S));
            for (int64_t e = 0; e < S * S; ++e) st[size_t(e)] = d.state.v[size_t((seq * H + h) * S * S + e)];
            auto m = [&](int64_t i, int64_t j) -> double & { return st[size_t(i * S + j)]; };
            for (int64_t tt = 0; tt < per; ++tt) {
                const int64_t t = seq * per + tt;
                double *      o = out.data() + t * S * H + h * S;
                if (kind == Rwkv::wkv6) {
                    const Array &k = d.in[0], &v = d.in[1], &r = d.in[2], &tf = d.in[3], &td = d.in[4];
                    for (int64_t j = 0; j < S; ++j) {
                        double sum = 0.0;
                        for (int64_t i = 0; i < S; ++i) {
                            sum += r(i, h, t) * (tf.v[size_t(h * S + i)] * k(i, h, t) * v(j, h, t) + m(i, j));
                        }
                        o[j] = sum;
                    }
                    for (int64_t i = 0; i < S; ++i) {
                        for (int64_t j = 0; j < S; ++j) m(i, j) = m(i, j) * td(i, h, t) + k(i, h, t) * v(j, h, t);
                    }
                } else if (kind == Rwkv::gla) {
                    const Array &k = d.in[0], &v = d.in[1], &q = d.in[2], &g = d.in[3];
                    for (int64_t i = 0; i < S; ++i) {
                        for (int64_t j = 0; j < S; ++j) m(i, j) = m(i, j) * g(i, h, t) + k(i, h, t) * v(j, h, t);
                    }
                    for (int64_t j = 0; j < S; ++j) {
                        double sum = 0.0;
                        for (int64_t i = 0; i < S; ++i) sum += d.scale * q(i, h, t) * m(i, j);
                        o[j] = sum;
                    }
                } else {
                    const Array &r = d.in[0], &w = d.in[1], &k = d.in[2], &v = d.in[3], &a = d.in[4], &b = d.in[5];
                    for (int64_t i = 0; i < S; ++i) {
                        double sa = 0.0;
                        for (int64_t j = 0; j < S; ++j) sa += a(j, h, t) * m(i, j);
                        double sum = 0.0;
                        for (int64_t j = 0; j < S; ++j) {
                            m(i, j) = m(i, j) * w(j, h, t) + v(i, h, t) * k(j, h, t) + sa * b(j, h, t);
                            sum += m(i, j) * r(j, h, t);
                        }
                        o[i] = sum;
                    }
                }
            }
            for (int64_t e = 0; e < S * S; ++e) out[s_off + size_t((seq * H + h) * S * S + e)] = st[size_t(e)];
        }
    }
    return out;
}

// ---- gated delta rule ----

std::vector<double> gdn_ref(const Array & q, const Array & k, const Array & v, const Array & g, const Array & beta,
                            const Array & state, int64_t K) {
    const int64_t S = v.ne[0], H = v.ne[1], T = v.ne[2], ns = v.ne[3];
    const int64_t hq = q.ne[1], rq = ns / q.ne[3];
    const int64_t mat = S * S, per_slot = mat * H * ns, s_off = S * H * T * ns;
    std::vector<double> out(size_t(s_off + K * per_slot), kNaN);
    for (int64_t seq = 0; seq < ns; ++seq) {
        for (int64_t h = 0; h < H; ++h) {
            // M[j][i] = S[i][j]
            std::vector<double> M(static_cast<size_t>(mat));
            for (int64_t e = 0; e < mat; ++e) M[size_t(e)] = state.v[size_t((seq * H + h) * mat + e)];
            for (int64_t t = 0; t < T; ++t) {
                for (int64_t j = 0; j < S; ++j) {
                    for (int64_t i = 0; i < S; ++i) {
                        M[size_t(j * S + i)] *= std::exp(g(g.ne[0] == 1 ? 0 : i, h, t, seq));
                    }
                }
                const double bt = beta(0, h, t, seq);
                for (int64_t j = 0; j < S; ++j) {
                    double sk = 0.0;
                    for (int64_t i = 0; i < S; ++i) sk += M[size_t(j * S + i)] * k(i, h % hq, t, seq / rq);
                    const double dl = (v(j, h, t, seq) - sk) * bt;
                    double       sq = 0.0;
                    for (int64_t i = 0; i < S; ++i) {
                        M[size_t(j * S + i)] += k(i, h % hq, t, seq / rq) * dl;
                        sq += M[size_t(j * S + i)] * q(i, h % hq, t, seq / rq);
                    }
                    out[size_t(((seq * T + t) * H + h) * S + j)] = sq / std::sqrt(double(S));
                }
                const int64_t slot = T - 1 - t;
                if (slot < K) {
                    for (int64_t e = 0; e < mat; ++e) {
                        out[size_t(s_off + slot * per_slot + (seq * H + h) * mat + e)] = M[size_t(e)];
                    }
                }
            }
        }
    }
    return out;
}

} // namespace

TEST(OpsSsm, Conv) {
    for (unsigned seed : seeds()) {
        std::mt19937  rng(seed);
        const int64_t d_conv = rand_int(rng, 1, 5), d_inner = odd_size(rng, 1, 41), n_t = rand_int(rng, 1, 7);
        const int64_t n_s = rand_int(rng, 1, 3);
        SCOPED_TRACE("d_conv " + std::to_string(d_conv) + " d_inner " + std::to_string(d_inner));
        Context       ctx;
        ggml_tensor * sx = new_tensor(ctx, {d_conv - 1 + n_t, d_inner, n_s, 1});
        ggml_tensor * c  = new_tensor(ctx, {d_conv, d_inner, 1, 1});
        const Array   X  = fill_random(sx, rng);
        const Array   W  = fill_random(c, rng);
        check_modes(ctx, ggml_ssm_conv(ctx, sx, c), ssm_conv_ref(X, W), kTol);
    }
}

TEST(OpsSsm, ConvPermutedInput) {
    // sx as a permutation of [d_inner, window, n_s], as a model's transposed
    // convolution state is.
    std::mt19937  rng(5);
    Context       ctx;
    ggml_tensor * base = new_tensor(ctx, {13, 4 + 6, 2, 1});
    fill_random(base, rng);
    ggml_tensor * sx = ggml_permute(ctx, base, 1, 0, 2, 3);
    ggml_tensor * c  = new_tensor(ctx, {4, 13, 1, 1});
    const Array   W  = fill_random(c, rng);
    check_modes(ctx, ggml_ssm_conv(ctx, sx, c), ssm_conv_ref(read_tensor(sx), W), kTol);
}

namespace {

struct ScanCase {
    int64_t d_state, head_dim, n_head, n_group, n_tok, n_seqs, n_states;
    bool    mamba1;
    int64_t K;
    bool    strided_x; // x, B and C views of larger tensors (gaps between tokens)
};

void run_scan(const ScanCase & sc, unsigned seed) {
    std::mt19937  rng(seed);
    Context       ctx;
    ggml_tensor * s  = new_tensor(ctx, {sc.d_state, sc.head_dim, sc.n_head, sc.n_states});
    ggml_tensor * dt = new_tensor(ctx, {sc.n_head, sc.n_tok, sc.n_seqs, 1});
    ggml_tensor * A  = new_tensor(ctx, {sc.mamba1 ? sc.d_state : 1, sc.n_head, 1, 1});
    auto          strided = [&](const Shape & ne) {
        if (!sc.strided_x) return new_tensor(ctx, ne);
        ggml_tensor * big = new_tensor(ctx, {ne[0], ne[1], ne[2] + 2, ne[3]});
        return ggml_view_4d(ctx, big, ne[0], ne[1], ne[2], ne[3], big->nb[1], big->nb[2], big->nb[3], big->nb[2]);
    };
    ggml_tensor * x   = strided({sc.head_dim, sc.n_head, sc.n_tok, sc.n_seqs});
    ggml_tensor * B   = strided({sc.d_state, sc.n_group, sc.n_tok, sc.n_seqs});
    ggml_tensor * C   = strided({sc.d_state, sc.n_group, sc.n_tok, sc.n_seqs});
    ggml_tensor * ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, sc.n_seqs);
    const Array   S0  = fill_random(s, rng);
    const Array   X   = fill_random(x, rng, -2.0, 2.0);
    const Array   DT  = fill_random(dt, rng, -3.0, 1.0);
    const Array   AA  = fill_random(A, rng, -2.0, -0.1);
    const Array   BB  = fill_random(B, rng);
    const Array   CC  = fill_random(C, rng);
    std::vector<int32_t> id(size_t(sc.n_seqs));
    for (int64_t i = 0; i < sc.n_seqs; ++i) {
        id[size_t(i)] = int32_t(rand_int(rng, 0, sc.n_states - 1));
        static_cast<int32_t *>(ids->data)[i] = id[size_t(i)];
    }
    ggml_tensor * out = ggml_ssm_scan(ctx, s, x, dt, A, B, C, ids, sc.K);
    ASSERT_EQ(out->op_params[0], sc.K);
    check_modes(ctx, out, shaped(ssm_scan_ref(S0, X, DT, AA, BB, CC, id, sc.K), out), kTol);
}

} // namespace

TEST(OpsSsm, ScanMamba1AndMamba2) {
    const ScanCase cases[] = {
        // Mamba-1: d_state 16, one head of d_inner channels, element-wise A.
        {16, 37, 1, 1, 5, 2, 3, true, 1, false},
        {5, 7, 1, 1, 1, 1, 1, true, 1, true},
        // Mamba-2: scalar A per head, heads in groups.
        {16, 8, 6, 2, 4, 3, 4, false, 1, false},
        {17, 5, 3, 3, 3, 1, 2, false, 1, true},
        // Snapshots: more slots than tokens leaves the rest unwritten.
        {8, 4, 4, 1, 5, 2, 2, false, 3, false},
        {8, 4, 4, 2, 2, 2, 3, false, 4, true},
    };
    unsigned seed = 100;
    for (const ScanCase & c : cases) {
        SCOPED_TRACE("d_state " + std::to_string(c.d_state) + " heads " + std::to_string(c.n_head) + " tokens " +
                     std::to_string(c.n_tok) + " K " + std::to_string(c.K));
        run_scan(c, seed++);
    }
}

namespace {

void run_rwkv(Rwkv kind, int64_t S, int64_t H, int64_t T, int64_t n_seqs, unsigned seed) {
    std::mt19937  rng(seed);
    Context       ctx;
    RwkvIn        d;
    const int     n_in = kind == Rwkv::wkv7 ? 6 : (kind == Rwkv::wkv6 ? 5 : 4);
    ggml_tensor * t[6] = {};
    for (int i = 0; i < n_in; ++i) {
        const bool tf = kind == Rwkv::wkv6 && i == 3;
        t[i]          = new_tensor(ctx, tf ? Shape{S, H, 1, 1} : Shape{S, H, T, 1});
        // Decays in (0, 1); wkv7's a and b small so the state stays bounded.
        const bool decay = (kind == Rwkv::wkv6 && i == 4) || (kind == Rwkv::gla && i == 3) ||
                           (kind == Rwkv::wkv7 && i == 1);
        const bool small = kind == Rwkv::wkv7 && (i == 4 || i == 5);
        d.in.push_back(decay ? fill_random(t[i], rng, 0.5, 1.0) : fill_random(t[i], rng, small ? -0.2 : -1.0,
                                                                                         small ? 0.2 : 1.0));
    }
    ggml_tensor * state = new_tensor(ctx, {S * H * S, n_seqs, 1, 1});
    d.state             = fill_random(state, rng);
    ggml_tensor * out   = nullptr;
    switch (kind) {
        case Rwkv::wkv6: out = ggml_rwkv_wkv6(ctx, t[0], t[1], t[2], t[3], t[4], state); break;
        case Rwkv::gla:
            d.scale = 0.37;
            out     = ggml_gated_linear_attn(ctx, t[0], t[1], t[2], t[3], state, 0.37f);
            d.scale = double(0.37f);
            break;
        case Rwkv::wkv7: out = ggml_rwkv_wkv7(ctx, t[0], t[1], t[2], t[3], t[4], t[5], state); break;
    }
    ASSERT_EQ(out->ne[0], S * H);
    ASSERT_EQ(out->ne[1], T + S * n_seqs);
    check_modes(ctx, out, shaped(rwkv_ref(kind, d, S, H, T, n_seqs), out), kTol);
}

struct RwkvCase {
    int64_t S, H, T, n_seqs;
};
const RwkvCase kRwkvCases[] = {{8, 3, 6, 2}, {5, 1, 3, 1}, {16, 2, 9, 3}, {64, 2, 2, 1}};

} // namespace

TEST(OpsRecurrent, RwkvWkv6) {
    unsigned seed = 200;
    for (const RwkvCase & c : kRwkvCases) {
        SCOPED_TRACE("S " + std::to_string(c.S) + " H " + std::to_string(c.H) + " T " + std::to_string(c.T));
        run_rwkv(Rwkv::wkv6, c.S, c.H, c.T, c.n_seqs, seed++);
    }
}

TEST(OpsRecurrent, GatedLinearAttn) {
    unsigned seed = 300;
    for (const RwkvCase & c : kRwkvCases) {
        SCOPED_TRACE("S " + std::to_string(c.S) + " H " + std::to_string(c.H) + " T " + std::to_string(c.T));
        run_rwkv(Rwkv::gla, c.S, c.H, c.T, c.n_seqs, seed++);
    }
}

TEST(OpsRecurrent, RwkvWkv7) {
    unsigned seed = 400;
    for (const RwkvCase & c : kRwkvCases) {
        SCOPED_TRACE("S " + std::to_string(c.S) + " H " + std::to_string(c.H) + " T " + std::to_string(c.T));
        run_rwkv(Rwkv::wkv7, c.S, c.H, c.T, c.n_seqs, seed++);
    }
}

namespace {

struct GdnCase {
    int64_t S, H, H_k, T, n_seqs, n_seqs_k;
    bool    vector_gate;
    int64_t K;
    bool    padded_rows; // q, k, v views with gaps between rows
};

void run_gdn(const GdnCase & c, unsigned seed) {
    std::mt19937  rng(seed);
    Context       ctx;
    auto          rows = [&](const Shape & ne) {
        if (!c.padded_rows) return new_tensor(ctx, ne);
        ggml_tensor * big = new_tensor(ctx, {ne[0] + 3, ne[1], ne[2], ne[3]});
        return ggml_view_4d(ctx, big, ne[0], ne[1], ne[2], ne[3], big->nb[1], big->nb[2], big->nb[3], 0);
    };
    ggml_tensor * q     = rows({c.S, c.H_k, c.T, c.n_seqs_k});
    ggml_tensor * k     = rows({c.S, c.H_k, c.T, c.n_seqs_k});
    ggml_tensor * v     = rows({c.S, c.H, c.T, c.n_seqs});
    ggml_tensor * g     = new_tensor(ctx, {c.vector_gate ? c.S : 1, c.H, c.T, c.n_seqs});
    ggml_tensor * beta  = new_tensor(ctx, {1, c.H, c.T, c.n_seqs});
    ggml_tensor * state = new_tensor(ctx, {c.S, c.S, c.H, c.n_seqs});
    const Array   Q     = fill_random(q, rng);
    // Normalised keys, as the models feed them, keep the rule stable.
    Array K = fill_random(k, rng);
    for (int64_t i3 = 0; i3 < K.ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < K.ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < K.ne[1]; ++i1) {
                double n = 0.0;
                for (int64_t i0 = 0; i0 < K.ne[0]; ++i0) n += K(i0, i1, i2, i3) * K(i0, i1, i2, i3);
                for (int64_t i0 = 0; i0 < K.ne[0]; ++i0) K(i0, i1, i2, i3) /= std::sqrt(n);
            }
        }
    }
    write_tensor(k, K);
    K                  = read_tensor(k);
    const Array V      = fill_random(v, rng);
    const Array G      = fill_random(g, rng, -1.0, 0.0);
    const Array BETA   = fill_random(beta, rng, 0.0, 1.0);
    const Array STATE  = fill_random(state, rng);
    ggml_tensor * out  = ggml_gated_delta_net(ctx, q, k, v, g, beta, state, c.K);
    ASSERT_EQ(out->ne[0], c.S * c.H);
    ASSERT_EQ(out->ne[1], c.T * c.n_seqs + c.K * c.S * c.n_seqs);
    check_modes(ctx, out, shaped(gdn_ref(Q, K, V, G, BETA, STATE, c.K), out), kTol);
}

} // namespace

TEST(OpsRecurrent, GatedDeltaNet) {
    const GdnCase cases[] = {
        {8, 2, 2, 5, 1, 1, false, 1, false},
        {16, 4, 2, 3, 2, 1, false, 1, true}, // q, k heads and sequences broadcast
        {7, 3, 3, 4, 2, 2, true, 1, false},  // vector gate (KDA)
        {8, 2, 1, 5, 2, 2, true, 3, true},   // snapshots
        {4, 2, 2, 2, 1, 1, false, 4, false}, // more slots than tokens
        {32, 1, 1, 1, 1, 1, false, 1, false},
    };
    unsigned seed = 500;
    for (const GdnCase & c : cases) {
        SCOPED_TRACE("S " + std::to_string(c.S) + " H " + std::to_string(c.H) + " T " + std::to_string(c.T) + " K " +
                     std::to_string(c.K));
        run_gdn(c, seed++);
    }
}

TEST(OpsRecurrent, SolveTri) {
    std::mt19937 rng(600);
    const Shape  shapes[][2] = {
        {{5, 5, 1, 1}, {3, 5, 1, 1}},
        {{1, 1, 2, 1}, {4, 1, 2, 1}},
        {{17, 17, 3, 2}, {9, 17, 3, 2}},
        {{64, 64, 1, 1}, {1, 64, 1, 1}},
    };
    for (const auto & sh : shapes) {
        SCOPED_TRACE(shape_str(sh[0]) + " " + shape_str(sh[1]));
        Context       ctx;
        ggml_tensor * a = new_tensor(ctx, sh[0]);
        ggml_tensor * b = new_tensor(ctx, sh[1]);
        // Random everywhere (the upper triangle must be ignored), a
        // dominant diagonal of either sign.
        Array A = random_array(sh[0], rng, -1.0, 1.0);
        const int64_t n = sh[0][0];
        for (int64_t i3 = 0; i3 < A.ne[3]; ++i3) {
            for (int64_t i2 = 0; i2 < A.ne[2]; ++i2) {
                for (int64_t i = 0; i < n; ++i) {
                    for (int64_t j = 0; j < i; ++j) A(j, i, i2, i3) /= double(n);
                    A(i, i, i2, i3) = (i % 2 == 0 ? 1.0 : -1.0) * (1.0 + 0.5 * std::abs(A(i, i, i2, i3)));
                }
            }
        }
        write_tensor(a, A);
        const Array B = fill_random(b, rng);
        Array       X(sh[1]);
        for (int64_t i3 = 0; i3 < X.ne[3]; ++i3) {
            for (int64_t i2 = 0; i2 < X.ne[2]; ++i2) {
                for (int64_t col = 0; col < X.ne[0]; ++col) {
                    for (int64_t i = 0; i < n; ++i) {
                        double s = B(col, i, i2, i3);
                        for (int64_t j = 0; j < i; ++j) s -= A(j, i, i2, i3) * X(col, j, i2, i3);
                        X(col, i, i2, i3) = s / A(i, i, i2, i3);
                    }
                }
            }
        }
        check_modes(ctx, ggml_solve_tri(ctx, a, b, true, true, false), X, kTol);
    }
}

TEST(OpsRecurrentDeathTest, Preconditions) {
    Context       ctx;
    ggml_tensor * k   = new_tensor(ctx, {4, 2, 6, 1});
    ggml_tensor * k5  = new_tensor(ctx, {4, 2, 5, 1});
    ggml_tensor * st  = new_tensor(ctx, {32, 2, 1, 1});
    ggml_tensor * st3 = new_tensor(ctx, {30, 3, 1, 1}); // 3 sequences of 30 values, not 32
    ggml_tensor * tf  = new_tensor(ctx, {4, 2, 1, 1});
    EXPECT_DEATH(ggml_rwkv_wkv6(ctx, k, k5, k, tf, k, st), "ggml_rwkv_wkv6: .* must be \\[4, 2, 6\\]");
    EXPECT_DEATH(ggml_rwkv_wkv6(ctx, k, k, k, tf, k, st3), "must hold 4 x 4 x 2 values per sequence");
    EXPECT_DEATH(ggml_rwkv_wkv6(ctx, k, k, k, k, k, st), "tf .* must be contiguous with 4 x 2 values");
    EXPECT_DEATH(ggml_gated_linear_attn(ctx, k, ggml_transpose(ctx, k), k, k, st, 1.0f), "must be contiguous");
    ggml_tensor * st4 = new_tensor(ctx, {32, 4, 1, 1});
    EXPECT_DEATH(ggml_rwkv_wkv7(ctx, k, k, k, k, k, k, st4), "6 tokens do not split into 4 sequences");

    ggml_tensor * sx = new_tensor(ctx, {6, 8, 2, 1});
    EXPECT_DEATH(ggml_ssm_conv(ctx, sx, new_tensor(ctx, {4, 7, 1, 1})), "ggml_ssm_conv: sx .* must have 7 channels");
    EXPECT_DEATH(ggml_ssm_conv(ctx, sx, new_tensor(ctx, {8, 8, 1, 1})), "shorter than");

    ggml_tensor * s   = new_tensor(ctx, {16, 4, 3, 2});
    ggml_tensor * x   = new_tensor(ctx, {4, 3, 5, 2});
    ggml_tensor * dt  = new_tensor(ctx, {3, 5, 2, 1});
    ggml_tensor * A1  = new_tensor(ctx, {16, 3, 1, 1});
    ggml_tensor * A2  = new_tensor(ctx, {1, 3, 1, 1});
    ggml_tensor * B   = new_tensor(ctx, {16, 1, 5, 2});
    ggml_tensor * B2  = new_tensor(ctx, {16, 2, 5, 2});
    ggml_tensor * ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 2);
    EXPECT_DEATH(ggml_ssm_scan(ctx, s, x, dt, A2, B, B, ids, 0), "ggml_ssm_scan: K 0");
    EXPECT_DEATH(ggml_ssm_scan(ctx, s, x, dt, A1, B, B, ids, 2), "with K == 1");
    EXPECT_DEATH(ggml_ssm_scan(ctx, s, x, dt, A2, B2, B2, ids, 1), "3 heads do not split");
    EXPECT_DEATH(ggml_ssm_scan(ctx, s, x, dt, A2, B, B2, ids, 1), "must have the same shape");
    EXPECT_DEATH(ggml_ssm_scan(ctx, s, x, new_tensor(ctx, {3, 4, 2, 1}), A2, B, B, ids, 1), "dt .* must be");

    ggml_tensor * a  = new_tensor(ctx, {5, 5, 1, 1});
    ggml_tensor * bb = new_tensor(ctx, {3, 5, 1, 1});
    EXPECT_DEATH(ggml_solve_tri(ctx, a, bb, true, false, false), "ggml_solve_tri: .*only left, lower");
    EXPECT_DEATH(ggml_solve_tri(ctx, new_tensor(ctx, {5, 4, 1, 1}), bb, true, true, false), "must be square");
    EXPECT_DEATH(ggml_solve_tri(ctx, a, new_tensor(ctx, {3, 4, 1, 1}), true, true, false), "must have 5 rows");

    ggml_tensor * q  = new_tensor(ctx, {8, 2, 3, 1});
    ggml_tensor * v  = new_tensor(ctx, {8, 4, 3, 1});
    ggml_tensor * g  = new_tensor(ctx, {1, 4, 3, 1});
    ggml_tensor * be = new_tensor(ctx, {1, 4, 3, 1});
    ggml_tensor * gs = new_tensor(ctx, {8, 8, 4, 1});
    EXPECT_DEATH(ggml_gated_delta_net(ctx, q, q, v, g, be, gs, 0), "ggml_gated_delta_net: K 0");
    EXPECT_DEATH(ggml_gated_delta_net(ctx, new_tensor(ctx, {8, 3, 3, 1}), new_tensor(ctx, {8, 3, 3, 1}), v, g, be,
                                      gs, 1),
                 "a divisor of 4");
    EXPECT_DEATH(ggml_gated_delta_net(ctx, q, q, v, new_tensor(ctx, {2, 4, 3, 1}), be, gs, 1), "g .* must be");
    EXPECT_DEATH(ggml_gated_delta_net(ctx, q, q, v, g, be, new_tensor(ctx, {8, 8, 2, 1}), 1), "state .* must be");
}

// The fixed cases of tests/data/ops-recurrent/cases.h against the results
// ggml 0.25.1 computed for them (expected.txt, see the README there).
TEST(OpsRecurrent, MatchesGgml) {
    std::ifstream in(std::string(LOOM_TEST_DATA) + "/ops-recurrent/expected.txt");
    ASSERT_TRUE(in.good());
    std::map<std::string, std::vector<double>> expected;
    std::string                                name;
    long long                                  n = 0;
    while (in >> name >> n) {
        std::vector<double> & v = expected[name];
        v.resize(size_t(n));
        for (double & x : v) {
            std::string token; // "-inf" too, which operator>> does not read
            in >> token;
            x = std::strtod(token.c_str(), nullptr);
        }
    }
    ASSERT_EQ(expected.size(), size_t(refcases::kCount));
    for (int i = 0; i < refcases::kCount; ++i) {
        SCOPED_TRACE(refcases::name(i));
        Context       ctx;
        ggml_tensor * out = refcases::build(ctx, i);
        ASSERT_NE(out, nullptr);
        const auto it = expected.find(refcases::name(i));
        ASSERT_NE(it, expected.end());
        check_modes(ctx, out, shaped(it->second, out), kTol);
    }
}
