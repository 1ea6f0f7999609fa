// Backward operators, the loss and the optimizer steps against naive double
// references written here, and each *_back operator against a central finite
// difference of its forward operator (computed in double here): for the
// loss L(x) = sum(dy * f(x)), the gradient the operator returns is dL/dx.
//
// Thresholds (NMSE):
//   analytic references             1e-10  float arithmetic over short rows
//   finite differences              1e-8   h = 1e-4 on smooth functions in double
//   rope                            1e-9   float angles (see test_ops_nn.cpp)
//   f16 silu_back                   1e-5   the result is stored in f16
//   AdamW, SGD after 5 steps        1e-10
//   against ggml 0.25.1's results   1e-10  and max abs 1e-5 (tests/data/ops-backward)

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "backward_ggml_cases.h"
#include "test_util.h"

using namespace loomtest;

namespace {

constexpr double kF32  = 1e-10;
constexpr double kFd   = 1e-8;
constexpr double kRope = 1e-9;

ggml_tensor * new_tensor(ggml_context * ctx, ggml_type type, const Shape & ne) {
    return ggml_new_tensor_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]);
}

int64_t rows(const Array & a) {
    return a.ne[1] * a.ne[2] * a.ne[3];
}

// dL/dx of L(x) = sum(dy * f(x)) by central differences.
Array fd_grad(const Array & x, const Array & dy, const std::function<Array(const Array &)> & f, double h = 1e-4) {
    Array g(x.ne);
    Array xp = x;
    for (size_t j = 0; j < x.v.size(); ++j) {
        xp.v[j]          = x.v[j] + h;
        const Array up   = f(xp);
        xp.v[j]          = x.v[j] - h;
        const Array down = f(xp);
        xp.v[j]          = x.v[j];
        double s         = 0.0;
        for (size_t i = 0; i < dy.v.size(); ++i) {
            s += dy.v[i] * (up.v[i] - down.v[i]);
        }
        g.v[j] = s / (2.0 * h);
    }
    return g;
}

// ---- forward functions in double ----

double sigmoid(double x) {
    return 1.0 / (1.0 + std::exp(-x));
}

Array silu(const Array & x) {
    Array y(x.ne);
    for (size_t i = 0; i < x.v.size(); ++i) {
        y.v[i] = x.v[i] * sigmoid(x.v[i]);
    }
    return y;
}

Array rms_norm(const Array & x, double eps) {
    Array         y(x.ne);
    const int64_t n = x.ne[0];
    for (int64_t r = 0; r < rows(x); ++r) {
        double ss = 0.0;
        for (int64_t i = 0; i < n; ++i) {
            ss += x.v[size_t(r * n + i)] * x.v[size_t(r * n + i)];
        }
        const double inv = 1.0 / std::sqrt(ss / double(n) + eps);
        for (int64_t i = 0; i < n; ++i) {
            y.v[size_t(r * n + i)] = x.v[size_t(r * n + i)] * inv;
        }
    }
    return y;
}

Array soft_max(const Array & x, double scale) {
    Array         y(x.ne);
    const int64_t n = x.ne[0];
    for (int64_t r = 0; r < rows(x); ++r) {
        double mx = -INFINITY, sum = 0.0;
        for (int64_t i = 0; i < n; ++i) {
            mx = std::max(mx, scale * x.v[size_t(r * n + i)]);
        }
        for (int64_t i = 0; i < n; ++i) {
            sum += std::exp(scale * x.v[size_t(r * n + i)] - mx);
        }
        for (int64_t i = 0; i < n; ++i) {
            y.v[size_t(r * n + i)] = std::exp(scale * x.v[size_t(r * n + i)] - mx) / sum;
        }
    }
    return y;
}

Array cross_entropy(const Array & logits, const Array & labels) {
    const Array   p = soft_max(logits, 1.0);
    double        s = 0.0;
    for (size_t i = 0; i < p.v.size(); ++i) {
        s += labels.v[i] * std::log(p.v[i]);
    }
    Array out({1, 1, 1, 1});
    out.v[0] = -s / double(rows(logits));
    return out;
}

Array get_rows(const Array & a, const std::vector<int32_t> & idx) {
    Array out({a.ne[0], int64_t(idx.size()), 1, 1});
    for (size_t j = 0; j < idx.size(); ++j) {
        for (int64_t i = 0; i < a.ne[0]; ++i) {
            out(i, int64_t(j)) = a(i, idx[j]);
        }
    }
    return out;
}

struct Pool {
    ggml_op_pool op;
    int          k0, k1, s0, s1, p0, p1;
};

Shape pool_shape(const Shape & in, const Pool & p) {
    return {(in[0] + 2 * p.p0 - p.k0) / p.s0 + 1, (in[1] + 2 * p.p1 - p.k1) / p.s1 + 1, in[2], in[3]};
}

// ggml's pool_2d: windows over padded positions; AVG divides by the whole window.
Array pool_2d(const Array & x, const Pool & p) {
    Array out(pool_shape(x.ne, p));
    for (int64_t i3 = 0; i3 < x.ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < x.ne[2]; ++i2) {
            for (int64_t oy = 0; oy < out.ne[1]; ++oy) {
                for (int64_t ox = 0; ox < out.ne[0]; ++ox) {
                    double acc = p.op == GGML_OP_POOL_MAX ? -INFINITY : 0.0;
                    for (int ky = 0; ky < p.k1; ++ky) {
                        for (int kx = 0; kx < p.k0; ++kx) {
                            const int64_t xx = ox * p.s0 - p.p0 + kx, yy = oy * p.s1 - p.p1 + ky;
                            if (xx < 0 || xx >= x.ne[0] || yy < 0 || yy >= x.ne[1]) {
                                continue;
                            }
                            const double v = x(xx, yy, i2, i3);
                            acc            = p.op == GGML_OP_POOL_MAX ? std::max(acc, v) : acc + v;
                        }
                    }
                    out(ox, oy, i2, i3) = p.op == GGML_OP_POOL_MAX ? acc : acc / double(p.k0 * p.k1);
                }
            }
        }
    }
    return out;
}

struct Im2col {
    int s0, s1, p0, p1, d0, d1;
};

// 2-D im2col of x [W, H, C, N] with a KW x KH kernel: [C*KH*KW, OW, OH, N].
Array im2col(const Array & x, int64_t kw, int64_t kh, const Im2col & g) {
    const int64_t ow = (x.ne[0] + 2 * g.p0 - g.d0 * (kw - 1) - 1) / g.s0 + 1;
    const int64_t oh = (x.ne[1] + 2 * g.p1 - g.d1 * (kh - 1) - 1) / g.s1 + 1;
    Array         out({x.ne[2] * kh * kw, ow, oh, x.ne[3]});
    for (int64_t n = 0; n < x.ne[3]; ++n) {
        for (int64_t oy = 0; oy < oh; ++oy) {
            for (int64_t ox = 0; ox < ow; ++ox) {
                for (int64_t c = 0; c < x.ne[2]; ++c) {
                    for (int64_t ky = 0; ky < kh; ++ky) {
                        for (int64_t kx = 0; kx < kw; ++kx) {
                            const int64_t xx = ox * g.s0 - g.p0 + kx * g.d0, yy = oy * g.s1 - g.p1 + ky * g.d1;
                            const bool    in = xx >= 0 && xx < x.ne[0] && yy >= 0 && yy < x.ne[1];
                            out((c * kh + ky) * kw + kx, ox, oy, n) = in ? x(xx, yy, c, n) : 0.0;
                        }
                    }
                }
            }
        }
    }
    return out;
}

// Rotary embedding in double, written from the definitions of the modes
// (see ggml_rope_multi): sign -1 gives the inverse rotation.
struct Rope {
    int   n_dims;
    int   mode;
    int   sections[4];
    int   n_offs;
    float freq_base, freq_scale, attn_factor;
};

Array rope(const Array & x, const std::vector<int32_t> & pos, const std::vector<double> * ff, const Rope & r,
           double sign) {
    Array         y         = x;
    const bool    vision    = r.mode == GGML_ROPE_TYPE_VISION;
    const bool    multi     = (r.mode & GGML_ROPE_TYPE_MROPE) != 0;
    const int     pairs     = vision ? r.n_dims : r.n_dims / 2;
    const int *   sec       = r.sections;
    const int     sect_dims = sec[0] + sec[1] + sec[2] + sec[3];
    const int64_t ne2       = x.ne[2];
    for (int64_t i3 = 0; i3 < x.ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < ne2; ++i2) {
            for (int64_t i1 = 0; i1 < x.ne[1]; ++i1) {
                for (int i = 0; i < pairs; ++i) {
                    int coord = 0, first = 0; // the pair's coordinate and its section's first pair
                    if (multi) {
                        const int s = i % sect_dims;
                        if (r.mode == GGML_ROPE_TYPE_IMROPE) {
                            coord = (s % 3 == 1 && s < 3 * sec[1])   ? 1
                                    : (s % 3 == 2 && s < 3 * sec[2]) ? 2
                                    : (s % 3 == 0 && s < 3 * sec[0]) ? 0
                                                                     : 3;
                        } else {
                            coord = s < sec[0] ? 0 : s < sec[0] + sec[1] ? 1 : s < sec[0] + sec[1] + sec[2] ? 2 : 3;
                            first = coord == 0 ? 0 : coord == 1 ? sec[0] : coord == 2 ? sec[0] + sec[1]
                                                                                       : sec[0] + sec[1] + sec[2];
                        }
                    }
                    const double p     = pos[size_t(multi ? i2 + coord * ne2 : i2)];
                    const int    e     = vision ? i - first : i;
                    double       theta = p * std::pow(double(r.freq_base), -2.0 * e / r.n_dims);
                    if (ff != nullptr) {
                        theta /= (*ff)[size_t(i)];
                    }
                    theta *= r.freq_scale;
                    const double c = std::cos(theta) * r.attn_factor, s = std::sin(theta) * r.attn_factor * sign;
                    int64_t      a = 0, b = 0;
                    if (r.mode == GGML_ROPE_TYPE_NORMAL) {
                        a = r.n_offs + 2 * i;
                        b = a + 1;
                    } else {
                        a = r.n_offs + i;
                        b = a + pairs;
                    }
                    const double x0 = x(a, i1, i2, i3), x1 = x(b, i1, i2, i3);
                    y(a, i1, i2, i3) = x0 * c - x1 * s;
                    y(b, i1, i2, i3) = x0 * s + x1 * c;
                }
            }
        }
    }
    return y;
}

ggml_tensor * positions(ggml_context * ctx, std::mt19937 & rng, int64_t n, std::vector<int32_t> & out) {
    ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n);
    out.resize(size_t(n));
    for (int64_t i = 0; i < n; ++i) {
        out[size_t(i)]                   = int32_t(rand_int(rng, 0, 40));
        static_cast<int32_t *>(t->data)[i] = out[size_t(i)];
    }
    return t;
}

} // namespace

TEST(OpsBackward, SiluBack) {
    for (unsigned seed : seeds()) {
        std::mt19937  rng(seed);
        const Shape   s = {odd_size(rng, 1, 67), odd_size(rng, 1, 7), rand_int(rng, 1, 3), rand_int(rng, 1, 2)};
        Context       ctx;
        ggml_tensor * dy = new_tensor(ctx, GGML_TYPE_F32, s);
        ggml_tensor * x  = new_tensor(ctx, GGML_TYPE_F32, s);
        const Array   DY = fill_random(dy, rng), X = fill_random(x, rng, -4.0, 4.0);
        Array         want(s);
        for (size_t i = 0; i < X.v.size(); ++i) {
            const double sg = sigmoid(X.v[i]);
            want.v[i]       = DY.v[i] * sg * (1.0 + X.v[i] * (1.0 - sg));
        }
        SCOPED_TRACE(shape_str(s));
        check_modes(ctx, ggml_silu_back(ctx, dy, x), want, kF32);
        check_modes(ctx, ggml_silu_back(ctx, dy, x), fd_grad(X, DY, silu), kFd);
    }
}

TEST(OpsBackward, SiluBackF16AndPermuted) {
    std::mt19937  rng(7);
    Context       ctx;
    ggml_tensor * dy = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 33, 5);
    ggml_tensor * x  = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 33, 5);
    const Array   DY = fill_random(dy, rng), X = fill_random(x, rng, -3.0, 3.0);
    Array         want = fd_grad(X, DY, silu);
    for (double & v : want.v) {
        v = round_to_f16(v);
    }
    ggml_tensor * out = ggml_silu_back(ctx, dy, x);
    ASSERT_EQ(out->type, GGML_TYPE_F16);
    check_modes(ctx, out, want, 1e-5);

    // Rows of a permuted (dims 1 and 2 swapped) f32 tensor.
    ggml_tensor * base = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 9, 3, 5);
    ggml_tensor * dyb  = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 9, 3, 5);
    fill_random(base, rng);
    fill_random(dyb, rng);
    ggml_tensor * xp  = ggml_permute(ctx, base, 0, 2, 1, 3);
    ggml_tensor * dyp = ggml_permute(ctx, dyb, 0, 2, 1, 3);
    check_modes(ctx, ggml_silu_back(ctx, dyp, xp), fd_grad(read_tensor(xp), read_tensor(dyp), silu), kFd);
}

TEST(OpsBackward, RmsNormBack) {
    for (unsigned seed : seeds()) {
        std::mt19937  rng(seed);
        const Shape   s = {odd_size(rng, 1, 41), odd_size(rng, 1, 7), rand_int(rng, 1, 3), 1};
        Context       ctx;
        ggml_tensor * dy = new_tensor(ctx, GGML_TYPE_F32, s);
        ggml_tensor * x  = new_tensor(ctx, GGML_TYPE_F32, s);
        const Array   DY = fill_random(dy, rng), X = fill_random(x, rng, -2.0, 2.0);
        for (float eps : {1e-6f, 1e-1f}) {
            const double e = double(eps);
            Array        want(s);
            const int64_t n = s[0];
            for (int64_t r = 0; r < rows(X); ++r) {
                double xx = 0.0, xg = 0.0;
                for (int64_t i = 0; i < n; ++i) {
                    xx += X.v[size_t(r * n + i)] * X.v[size_t(r * n + i)];
                    xg += X.v[size_t(r * n + i)] * DY.v[size_t(r * n + i)];
                }
                const double ms = xx / double(n) + e;
                for (int64_t i = 0; i < n; ++i) {
                    want.v[size_t(r * n + i)] = (DY.v[size_t(r * n + i)] - X.v[size_t(r * n + i)] * xg / (n * ms)) /
                                                std::sqrt(ms);
                }
            }
            SCOPED_TRACE(shape_str(s));
            check_modes(ctx, ggml_rms_norm_back(ctx, dy, x, eps), want, kF32);
            check_modes(ctx, ggml_rms_norm_back(ctx, dy, x, eps),
                        fd_grad(X, DY, [&](const Array & a) { return rms_norm(a, e); }), kFd);
        }
    }
}

TEST(OpsBackward, SoftMaxBack) {
    for (unsigned seed : seeds()) {
        std::mt19937  rng(seed);
        const Shape   s = {odd_size(rng, 1, 37), odd_size(rng, 1, 7), rand_int(rng, 1, 3), rand_int(rng, 1, 2)};
        Context       ctx;
        ggml_tensor * dy = new_tensor(ctx, GGML_TYPE_F32, s);
        ggml_tensor * x  = new_tensor(ctx, GGML_TYPE_F32, s);
        const Array   DY = fill_random(dy, rng), X = fill_random(x, rng, -2.0, 2.0);
        for (float scale : {1.0f, 0.37f}) {
            ggml_tensor * y = ggml_soft_max_ext(ctx, x, nullptr, scale, 0.0f);
            ASSERT_EQ(compute(ctx, y, 1), GGML_STATUS_SUCCESS);
            const Array Y = read_tensor(y);
            Array       want(s);
            const int64_t n = s[0];
            for (int64_t r = 0; r < rows(Y); ++r) {
                double dot = 0.0;
                for (int64_t i = 0; i < n; ++i) {
                    dot += Y.v[size_t(r * n + i)] * DY.v[size_t(r * n + i)];
                }
                for (int64_t i = 0; i < n; ++i) {
                    want.v[size_t(r * n + i)] = scale * Y.v[size_t(r * n + i)] * (DY.v[size_t(r * n + i)] - dot);
                }
            }
            // The forward result as a leaf, so each run recomputes only the backward node.
            ggml_tensor * yl = new_tensor(ctx, GGML_TYPE_F32, s);
            write_tensor(yl, Y);
            SCOPED_TRACE(shape_str(s));
            check_modes(ctx, ggml_soft_max_ext_back(ctx, dy, yl, scale, 0.0f), want, kF32);
            check_modes(ctx, ggml_soft_max_ext_back(ctx, dy, yl, scale, 0.0f),
                        fd_grad(X, DY, [&](const Array & a) { return soft_max(a, scale); }), kFd);
        }
    }
}

TEST(OpsBackward, SoftMaxBackInplace) {
    std::mt19937  rng(5);
    Context       ctx;
    ggml_tensor * dy = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 13, 3);
    ggml_tensor * y  = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 13, 3);
    const Array   DY = fill_random(dy, rng), Y = fill_random(y, rng, 0.0, 0.2);
    ggml_tensor * out = ggml_soft_max_ext_back_inplace(ctx, dy, y, 2.0f, 0.0f);
    ASSERT_EQ(out->data, dy->data);
    ASSERT_EQ(compute(ctx, out, 2), GGML_STATUS_SUCCESS);
    Array want(DY.ne);
    for (int64_t r = 0; r < 3; ++r) {
        double dot = 0.0;
        for (int64_t i = 0; i < 13; ++i) {
            dot += Y(i, r) * DY(i, r);
        }
        for (int64_t i = 0; i < 13; ++i) {
            want(i, r) = 2.0 * Y(i, r) * (DY(i, r) - dot);
        }
    }
    EXPECT_TRUE(matches(out, want, kF32));
    // max_bias is not computed by the CPU.
    ggml_tensor * biased = ggml_soft_max_ext_back(ctx, dy, y, 1.0f, 1.0f);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    EXPECT_FALSE(ggml_backend_supports_op(cpu, biased));
    ggml_backend_free(cpu);
}

TEST(OpsBackward, CrossEntropyLoss) {
    for (unsigned seed : seeds()) {
        std::mt19937  rng(seed);
        const Shape   s = {odd_size(rng, 1, 53), odd_size(rng, 1, 9), rand_int(rng, 1, 3), 1};
        Context       ctx;
        ggml_tensor * logits = new_tensor(ctx, GGML_TYPE_F32, s);
        ggml_tensor * labels = new_tensor(ctx, GGML_TYPE_F32, s);
        const Array   L      = fill_random(logits, rng, -3.0, 3.0);
        Array         Y      = random_array(s, rng, 0.0, 1.0);
        for (int64_t r = 0; r < rows(Y); ++r) { // each row a distribution
            double sum = 0.0;
            for (int64_t i = 0; i < s[0]; ++i) {
                sum += Y.v[size_t(r * s[0] + i)];
            }
            for (int64_t i = 0; i < s[0]; ++i) {
                Y.v[size_t(r * s[0] + i)] /= sum;
            }
        }
        write_tensor(labels, Y);
        const Array Yr = read_tensor(labels);
        SCOPED_TRACE(shape_str(s));
        ggml_tensor * loss = ggml_cross_entropy_loss(ctx, logits, labels);
        ASSERT_TRUE(ggml_is_scalar(loss));
        check_modes(ctx, loss, cross_entropy(L, Yr), kF32);

        ggml_tensor * g = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1);
        static_cast<float *>(g->data)[0] = 0.75f;
        Array want(s);
        const Array P = soft_max(L, 1.0);
        for (size_t i = 0; i < want.v.size(); ++i) {
            want.v[i] = (P.v[i] - Yr.v[i]) * 0.75 / double(rows(L));
        }
        Array dl({1, 1, 1, 1});
        dl.v[0] = 0.75;
        check_modes(ctx, ggml_cross_entropy_loss_back(ctx, g, logits, labels), want, kF32);
        check_modes(ctx, ggml_cross_entropy_loss_back(ctx, g, logits, labels),
                    fd_grad(L, dl, [&](const Array & a) { return cross_entropy(a, Yr); }), kFd);
    }
}

TEST(OpsBackward, GetRowsBack) {
    for (unsigned seed : seeds()) {
        std::mt19937         rng(seed);
        const int64_t        n0 = odd_size(rng, 1, 31), n1 = odd_size(rng, 1, 9), k = odd_size(rng, 1, 15);
        Context              ctx;
        ggml_tensor *        data = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n0, n1);
        ggml_tensor *        idx  = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, k);
        std::vector<int32_t> I(static_cast<size_t>(k));
        for (int64_t j = 0; j < k; ++j) { // repeated indices accumulate
            I[size_t(j)]                         = int32_t(rand_int(rng, 0, n1 - 1));
            static_cast<int32_t *>(idx->data)[j] = I[size_t(j)];
        }
        const Array D = fill_random(data, rng);
        for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) {
            // Rows past the indices (as in a view of fewer indices) take no part.
            const int64_t extra = rand_int(rng, 0, 2);
            ggml_tensor * dy    = ggml_new_tensor_2d(ctx, t, n0, k + extra);
            const Array   DY = fill_random(dy, rng);
            Array         want({n0, n1, 1, 1});
            Array         dy_used({n0, k, 1, 1}); // the rows that take part
            for (int64_t j = 0; j < k; ++j) {
                for (int64_t i = 0; i < n0; ++i) {
                    want(i, I[size_t(j)]) += DY(i, j);
                    dy_used(i, j) = DY(i, j);
                }
            }
            SCOPED_TRACE(ggml_type_name(t));
            check_modes(ctx, ggml_get_rows_back(ctx, dy, idx, data), want, kF32);
            check_modes(ctx, ggml_get_rows_back(ctx, dy, idx, data),
                        fd_grad(D, dy_used, [&](const Array & a) { return get_rows(a, I); }), kFd);
        }
    }
}

TEST(OpsBackward, GetRowsBackBadIndexFails) {
    Context       ctx;
    ggml_tensor * data = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 3);
    ggml_tensor * idx  = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 2);
    ggml_tensor * dy   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 2);
    static_cast<int32_t *>(idx->data)[0] = 1;
    static_cast<int32_t *>(idx->data)[1] = 3;
    EXPECT_EQ(compute(ctx, ggml_get_rows_back(ctx, dy, idx, data), 2), GGML_STATUS_FAILED);
}

TEST(OpsBackward, Pool2dBack) {
    const Pool cases[] = {{GGML_OP_POOL_MAX, 2, 2, 2, 2, 0, 0}, {GGML_OP_POOL_AVG, 3, 2, 2, 1, 1, 0},
                          {GGML_OP_POOL_MAX, 3, 3, 2, 2, 1, 1}, {GGML_OP_POOL_AVG, 2, 3, 1, 2, 0, 1}};
    std::mt19937 rng(11);
    for (const Pool & p : cases) {
        Context       ctx;
        const Shape   s  = {odd_size(rng, 5, 13), odd_size(rng, 5, 11), 3, 2};
        ggml_tensor * x  = new_tensor(ctx, GGML_TYPE_F32, s);
        const Array   X  = fill_random(x, rng); // distinct values: the maximum of each window is unique
        const Shape   so = pool_shape(s, p);
        ggml_tensor * dy = new_tensor(ctx, GGML_TYPE_F32, so);
        const Array   DY = fill_random(dy, rng);
        Array         want(s);
        for (int64_t i3 = 0; i3 < s[3]; ++i3) {
            for (int64_t i2 = 0; i2 < s[2]; ++i2) {
                for (int64_t oy = 0; oy < so[1]; ++oy) {
                    for (int64_t ox = 0; ox < so[0]; ++ox) {
                        int64_t bx = -1, by = -1;
                        double  best = -INFINITY;
                        for (int ky = 0; ky < p.k1; ++ky) {
                            for (int kx = 0; kx < p.k0; ++kx) {
                                const int64_t xx = ox * p.s0 - p.p0 + kx, yy = oy * p.s1 - p.p1 + ky;
                                if (xx < 0 || xx >= s[0] || yy < 0 || yy >= s[1]) {
                                    continue;
                                }
                                if (p.op == GGML_OP_POOL_AVG) {
                                    want(xx, yy, i2, i3) += DY(ox, oy, i2, i3) / double(p.k0 * p.k1);
                                } else if (X(xx, yy, i2, i3) > best) {
                                    best = X(xx, yy, i2, i3);
                                    bx   = xx;
                                    by   = yy;
                                }
                            }
                        }
                        if (p.op == GGML_OP_POOL_MAX && bx >= 0) {
                            want(bx, by, i2, i3) += DY(ox, oy, i2, i3);
                        }
                    }
                }
            }
        }
        SCOPED_TRACE(shape_str(s));
        auto back = [&] {
            return ggml_pool_2d_back(ctx, dy, x, p.op, p.k0, p.k1, p.s0, p.s1, float(p.p0), float(p.p1));
        };
        check_modes(ctx, back(), want, kF32);
        check_modes(ctx, back(), fd_grad(X, DY, [&](const Array & a) { return pool_2d(a, p); }, 1e-6), kFd);
    }
}

// A window of 2^20 x 2^20 over a 3 x 2 plane: the one window holds the whole
// plane; the kernel visits only the taps inside it (a walk over the whole
// window would take hours).
TEST(OpsBackward, Pool2dBackWindowFarLargerThanThePlane) {
    const int k = 1 << 20;
    for (ggml_op_pool op : {GGML_OP_POOL_MAX, GGML_OP_POOL_AVG}) {
        Context       ctx;
        ggml_tensor * x  = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2);
        ggml_tensor * dy = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 1, 1);
        const float   xs[6] = {0.5f, -1.0f, 4.0f, 2.0f, 3.5f, -7.0f};
        std::memcpy(x->data, xs, sizeof(xs));
        static_cast<float *>(dy->data)[0] = 3.0f;
        ggml_tensor * g = ggml_pool_2d_back(ctx, dy, x, op, k, k, 1, 1, 0.0f, 0.0f);
        ASSERT_EQ(compute(ctx, g, 2), GGML_STATUS_SUCCESS);
        const float * out = static_cast<const float *>(g->data);
        for (int i = 0; i < 6; ++i) {
            // MAX: all of the gradient to the largest value (4.0 at 2);
            // AVG: the gradient shared by the window's 2^40 taps.
            const float want = op == GGML_OP_POOL_MAX ? (i == 2 ? 3.0f : 0.0f) : float(3.0 / std::ldexp(1.0, 40));
            EXPECT_EQ(out[i], want) << "op " << int(op) << ", element " << i;
        }
    }
}

TEST(OpsBackward, Im2colBack) {
    const Im2col cases[] = {{1, 1, 0, 0, 1, 1}, {2, 1, 1, 0, 1, 2}, {2, 3, 1, 2, 2, 1}};
    std::mt19937 rng(13);
    for (const Im2col & g : cases) {
        Context       ctx;
        const int64_t kw = 3, kh = 2;
        int64_t       ne[4] = {odd_size(rng, 5, 11), odd_size(rng, 5, 9), 3, 2};
        ggml_tensor * kern  = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, kw, kh, 3, 4);
        const Shape   s     = {ne[0], ne[1], ne[2], ne[3]};
        const Array   X     = random_array(s, rng);
        const Array   cols  = im2col(X, kw, kh, g);
        ggml_tensor * dy    = new_tensor(ctx, GGML_TYPE_F32, cols.ne);
        const Array   DY    = fill_random(dy, rng);
        // The adjoint of im2col: every column entry goes back to the input it was read from.
        Array want(s);
        for (int64_t n = 0; n < s[3]; ++n) {
            for (int64_t oy = 0; oy < cols.ne[2]; ++oy) {
                for (int64_t ox = 0; ox < cols.ne[1]; ++ox) {
                    for (int64_t c = 0; c < s[2]; ++c) {
                        for (int64_t ky = 0; ky < kh; ++ky) {
                            for (int64_t kx = 0; kx < kw; ++kx) {
                                const int64_t xx = ox * g.s0 - g.p0 + kx * g.d0, yy = oy * g.s1 - g.p1 + ky * g.d1;
                                if (xx >= 0 && xx < s[0] && yy >= 0 && yy < s[1]) {
                                    want(xx, yy, c, n) += DY((c * kh + ky) * kw + kx, ox, oy, n);
                                }
                            }
                        }
                    }
                }
            }
        }
        SCOPED_TRACE(shape_str(s));
        auto back = [&] { return ggml_im2col_back(ctx, dy, kern, ne, g.s0, g.s1, g.p0, g.p1, g.d0, g.d1, true); };
        check_modes(ctx, back(), want, kF32);
        check_modes(ctx, back(), fd_grad(X, DY, [&](const Array & a) { return im2col(a, kw, kh, g); }), kFd);
        // The forward im2col of loom agrees with this test's.
        ggml_tensor * xt = new_tensor(ctx, GGML_TYPE_F32, s);
        write_tensor(xt, X);
        check_modes(ctx, ggml_im2col(ctx, kern, xt, g.s0, g.s1, g.p0, g.p1, g.d0, g.d1, true, GGML_TYPE_F32), cols,
                    kF32);
    }
}

TEST(OpsBackward, Im2colBack1d) {
    std::mt19937  rng(17);
    Context       ctx;
    const int64_t k = 3;
    int64_t       ne[4] = {13, 4, 2, 1}; // [L, C, N]
    ggml_tensor * kern  = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, k, 4, 5);
    const Im2col  g     = {2, 0, 1, 0, 2, 0};
    // As a 2-D im2col with H = 1, kh = 1.
    const Array   X    = random_array({13, 1, 4, 2}, rng);
    const Array   cols = im2col(X, k, 1, {g.s0, 1, g.p0, 0, g.d0, 1});
    ggml_tensor * dy   = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, cols.ne[0], cols.ne[1], 2);
    Array         DY   = random_array({cols.ne[0], cols.ne[1], 1, 2}, rng);
    Array         DY3({cols.ne[0], cols.ne[1], 2, 1});
    DY3.v = DY.v;
    write_tensor(dy, DY3);
    Array want = fd_grad(X, DY, [&](const Array & a) { return im2col(a, k, 1, {g.s0, 1, g.p0, 0, g.d0, 1}); });
    want.ne    = {13, 4, 2, 1};
    check_modes(ctx, ggml_im2col_back(ctx, dy, kern, ne, g.s0, 0, g.p0, 0, g.d0, 0, false), want, kFd);
}

TEST(OpsBackward, RopeModesAndBack) {
    struct Case {
        Rope r;
        int  head_dim;
        bool factors;
    };
    const Case cases[] = {
        {{8, GGML_ROPE_TYPE_NORMAL, {0, 0, 0, 0}, 0, 10000.0f, 1.0f, 1.0f}, 12, false},
        {{8, GGML_ROPE_TYPE_NEOX, {0, 0, 0, 0}, 2, 10000.0f, 0.5f, 1.0f}, 14, true},
        {{6, GGML_ROPE_TYPE_NORMAL, {0, 0, 0, 0}, 4, 500.0f, 1.0f, 0.8f}, 11 + 1, false},
        {{16, GGML_ROPE_TYPE_MROPE, {4, 2, 2, 0}, 0, 10000.0f, 1.0f, 1.0f}, 18, false},
        {{12, GGML_ROPE_TYPE_MROPE, {2, 2, 1, 1}, 2, 1000.0f, 0.7f, 1.0f}, 16, true},
        {{16, GGML_ROPE_TYPE_IMROPE, {3, 3, 2, 0}, 0, 10000.0f, 1.0f, 1.0f}, 18, false},
        {{4, GGML_ROPE_TYPE_VISION, {2, 2, 0, 0}, 0, 100.0f, 1.0f, 1.0f}, 8, false},
        {{6, GGML_ROPE_TYPE_VISION, {3, 3, 0, 0}, 0, 1000.0f, 1.0f, 1.2f}, 12, true},
    };
    for (const Case & c : cases) {
        for (ggml_op op : {GGML_OP_ROPE, GGML_OP_ROPE_BACK}) {
            SCOPED_TRACE(testing::Message() << "mode " << c.r.mode << " n_dims " << c.r.n_dims << " offs " << c.r.n_offs
                                            << " " << ggml_op_name(op));
            std::mt19937         rng(19);
            Context              ctx;
            const int64_t        n_head = 3, n_tokens = 5;
            const bool           multi = (c.r.mode & GGML_ROPE_TYPE_MROPE) != 0;
            ggml_tensor *        a     = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, c.head_dim, n_head, n_tokens);
            const Array          A     = fill_random(a, rng);
            std::vector<int32_t> P;
            ggml_tensor *        pos   = positions(ctx, rng, multi ? 4 * n_tokens : n_tokens, P);
            const int            pairs = c.r.mode == GGML_ROPE_TYPE_VISION ? c.r.n_dims : c.r.n_dims / 2;
            ggml_tensor *        ff    = nullptr;
            std::vector<double>  F;
            if (c.factors) {
                ff = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, pairs);
                const Array FF = fill_random(ff, rng, 0.5, 2.0);
                F              = FF.v;
            }
            int           sections[4] = {c.r.sections[0], c.r.sections[1], c.r.sections[2], c.r.sections[3]};
            ggml_tensor * out         = nullptr;
            if (op == GGML_OP_ROPE) {
                out = multi ? ggml_rope_multi(ctx, a, pos, ff, c.r.n_dims, sections, c.r.mode, 0, c.r.freq_base,
                                              c.r.freq_scale, 0.0f, c.r.attn_factor, 32.0f, 1.0f)
                            : ggml_rope_ext(ctx, a, pos, ff, c.r.n_dims, c.r.mode, 0, c.r.freq_base, c.r.freq_scale,
                                            0.0f, c.r.attn_factor, 32.0f, 1.0f);
            } else {
                out = multi ? ggml_rope_multi_back(ctx, a, pos, ff, c.r.n_dims, sections, c.r.mode, 0, c.r.freq_base,
                                                   c.r.freq_scale, 0.0f, c.r.attn_factor, 32.0f, 1.0f)
                            : ggml_rope_ext_back(ctx, a, pos, ff, c.r.n_dims, c.r.mode, 0, c.r.freq_base,
                                                 c.r.freq_scale, 0.0f, c.r.attn_factor, 32.0f, 1.0f);
            }
            if (c.r.n_offs != 0) {
                ASSERT_EQ(ggml_rope_set_offset(out, c.r.n_offs), out);
            }
            const double sign = op == GGML_OP_ROPE ? 1.0 : -1.0;
            check_modes(ctx, out, rope(A, P, c.factors ? &F : nullptr, c.r, sign), kRope);
            if (op == GGML_OP_ROPE_BACK) {
                // dy = A: the gradient of sum(dy * rope(x)) with respect to x.
                const Array fd =
                    fd_grad(A, A, [&](const Array & x) { return rope(x, P, c.factors ? &F : nullptr, c.r, 1.0); });
                check_modes(ctx, out, fd, kFd);
            }
        }
    }
}

TEST(OpsBackward, RopeF16Multi) {
    std::mt19937         rng(23);
    Context              ctx;
    ggml_tensor *        a = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, 18, 2, 3);
    const Array          A = fill_random(a, rng);
    std::vector<int32_t> P;
    ggml_tensor *        pos         = positions(ctx, rng, 12, P);
    int                  sections[4] = {4, 2, 2, 0};
    const Rope           r           = {16, GGML_ROPE_TYPE_IMROPE, {4, 2, 2, 0}, 0, 10000.0f, 1.0f, 1.0f};
    ggml_tensor *        out = ggml_rope_multi_back(ctx, a, pos, nullptr, 16, sections, r.mode, 0, 10000.0f, 1.0f,
                                                    0.0f, 1.0f, 32.0f, 1.0f);
    Array want = rope(A, P, nullptr, r, -1.0);
    for (double & v : want.v) {
        v = round_to_f16(v);
    }
    check_modes(ctx, out, want, 1e-6);
}

// Several steps of AdamW and SGD against the update written out in double.
TEST(OpsTrain, AdamWAndSgdSteps) {
    std::mt19937  rng(29);
    const Shape   s = {37, 5, 3, 1};
    Context       ctx;
    ggml_tensor * w  = new_tensor(ctx, GGML_TYPE_F32, s);
    ggml_tensor * g  = new_tensor(ctx, GGML_TYPE_F32, s);
    ggml_tensor * m  = new_tensor(ctx, GGML_TYPE_F32, s);
    ggml_tensor * v  = new_tensor(ctx, GGML_TYPE_F32, s);
    ggml_tensor * pa = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 7);
    ggml_set_param(w);
    Array W = fill_random(w, rng), M(s), V(s);
    write_tensor(m, M);
    write_tensor(v, V);
    const double alpha = 1e-2, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, wd = 0.1;
    const int    threads[] = {1, 3, 4, 2, 5};
    for (int t = 1; t <= 5; ++t) {
        const Array  G      = fill_random(g, rng);
        const double beta1h = 1.0 / (1.0 - std::pow(beta1, t)), beta2h = 1.0 / (1.0 - std::pow(beta2, t));
        const float  params[7] = {float(alpha), float(beta1), float(beta2), float(eps), float(wd), float(beta1h),
                                  float(beta2h)};
        std::memcpy(pa->data, params, sizeof(params));
        // The hyperparameters as the kernel gets them (rounded to float).
        const double a = params[0], b1 = params[1], b2 = params[2], e = params[3], d = params[4];
        for (size_t i = 0; i < W.v.size(); ++i) {
            M.v[i] = b1 * M.v[i] + (1.0 - b1) * G.v[i];
            V.v[i] = b2 * V.v[i] + (1.0 - b2) * G.v[i] * G.v[i];
            W.v[i] = W.v[i] * (1.0 - a * d) -
                     a * (M.v[i] * double(params[5])) / (std::sqrt(V.v[i] * double(params[6])) + e);
        }
        ggml_tensor * step = ggml_opt_step_adamw(ctx, w, g, m, v, pa);
        ASSERT_EQ(step->data, w->data);
        ASSERT_EQ(compute(ctx, step, threads[t - 1]), GGML_STATUS_SUCCESS);
        EXPECT_TRUE(matches(w, W, kF32));
        EXPECT_TRUE(matches(m, M, kF32));
        EXPECT_TRUE(matches(v, V, kF32));
    }

    ggml_tensor * ps = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2);
    for (int t = 1; t <= 5; ++t) {
        const Array G         = fill_random(g, rng);
        const float params[2] = {0.05f, t % 2 == 0 ? 0.0f : 0.2f};
        std::memcpy(ps->data, params, sizeof(params));
        for (size_t i = 0; i < W.v.size(); ++i) {
            W.v[i] = W.v[i] * (1.0 - double(params[0]) * double(params[1])) - double(params[0]) * G.v[i];
        }
        ggml_tensor * step = ggml_opt_step_sgd(ctx, w, g, ps);
        ASSERT_EQ(compute(ctx, step, threads[t - 1]), GGML_STATUS_SUCCESS);
        EXPECT_TRUE(matches(w, W, kF32));
    }
}

TEST(OpsBackwardDeath, BrokenPreconditions) {
    Context       ctx;
    ggml_tensor * a  = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 3);
    ggml_tensor * b  = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 4);
    ggml_tensor * s1 = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1);
    ggml_tensor * i3 = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 3);
    EXPECT_DEATH(ggml_silu_back(ctx, a, b), "ggml_silu_back.*differ in shape");
    EXPECT_DEATH(ggml_rms_norm_back(ctx, a, b, 1e-6f), "ggml_rms_norm_back.*differ in shape");
    EXPECT_DEATH(ggml_soft_max_ext_back(ctx, a, b, 1.0f, 0.0f), "ggml_soft_max_ext_back.*differ in shape");
    EXPECT_DEATH(ggml_cross_entropy_loss(ctx, a, b), "ggml_cross_entropy_loss.*differ in shape");
    EXPECT_DEATH(ggml_cross_entropy_loss_back(ctx, a, a, a), "must be a scalar");
    EXPECT_DEATH(ggml_cross_entropy_loss_back(ctx, s1, a, b), "differ in shape");
    EXPECT_DEATH(ggml_get_rows_back(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 2), i3, a),
                 "ggml_get_rows_back.*a row for each i32 index");
    EXPECT_DEATH(ggml_get_rows_back(ctx, a, i3, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 7, 5)), "rows of 8 values");
    EXPECT_DEATH(ggml_flash_attn_back(ctx, a, a, a, a, false), "ggml_flash_attn_back.*not available");
    EXPECT_DEATH(ggml_opt_step_sgd(ctx, a, a, ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2)), "not a parameter");
    ggml_set_param(a);
    EXPECT_DEATH(ggml_opt_step_sgd(ctx, a, b, ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 2)), "differ in shape");
    EXPECT_DEATH(ggml_opt_step_sgd(ctx, a, a, ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3)), "2 f32 values");
    EXPECT_DEATH(ggml_opt_step_adamw(ctx, a, a, a, b, ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 7)), "differ in shape");
    EXPECT_DEATH(ggml_opt_step_adamw(ctx, a, a, a, a, ggml_new_tensor_1d(ctx, GGML_TYPE_F16, 7)), "7 f32 values");
    int64_t ne[4] = {9, 7, 2, 1};
    ggml_tensor * kern = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 3, 3, 2, 1);
    EXPECT_DEATH(ggml_im2col_back(ctx, b, kern, ne, 1, 1, 0, 0, 1, 1, true), "ggml_im2col_back.*not the im2col result");
    EXPECT_DEATH(ggml_pool_2d_back(ctx, a, ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 8, 3, 2), GGML_OP_POOL_MAX, 2, 2,
                                   2, 2, 0, 0),
                 "differ in dims 2, 3");

    ggml_tensor * x    = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 16, 2, 3);
    ggml_tensor * pos3 = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 3);
    ggml_tensor * pos12 = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 12);
    int           sec[4] = {4, 2, 2, 0};
    int           zero[4] = {0, 0, 0, 0};
    EXPECT_DEATH(ggml_rope_multi(ctx, x, pos3, nullptr, 16, sec, GGML_ROPE_TYPE_MROPE, 0, 1e4f, 1, 0, 1, 32, 1),
                 "ggml_rope_multi.*positions");
    EXPECT_DEATH(ggml_rope_multi(ctx, x, pos12, nullptr, 16, zero, GGML_ROPE_TYPE_MROPE, 0, 1e4f, 1, 0, 1, 32, 1),
                 "needs sections");
    EXPECT_DEATH(ggml_rope_multi(ctx, x, pos12, nullptr, 6, sec, GGML_ROPE_TYPE_VISION, 0, 1e4f, 1, 0, 1, 32, 1),
                 "n_dims 6 = ne0/2");
    EXPECT_DEATH(ggml_rope_ext_back(ctx, x, pos3, nullptr, 16, 1, 0, 1e4f, 1, 0, 1, 32, 1), "rope mode 1");
    ggml_tensor * r = ggml_rope_ext(ctx, x, pos3, nullptr, 12, GGML_ROPE_TYPE_NEOX, 0, 1e4f, 1, 0, 1, 32, 1);
    EXPECT_DEATH(ggml_rope_set_offset(r, 6), "offset 6");
    EXPECT_DEATH(ggml_rope_set_offset(r, 1), "offset 1");
    EXPECT_DEATH(ggml_rope_set_offset(a, 0), "not a rope");
    ggml_tensor * vis =
        ggml_rope_multi(ctx, x, pos12, nullptr, 8, sec, GGML_ROPE_TYPE_VISION, 0, 1e4f, 1, 0, 1, 32, 1);
    EXPECT_DEATH(ggml_rope_set_offset(vis, 2), "vision rope takes no offset");
}

TEST(OpsBackwardGgml, SameResultsAsGgml) {
    std::string why;
    auto        want = read_named_values(std::string(LOOM_TEST_DATA) + "/ops-backward/ggml-0.25.1.txt", &why);
    ASSERT_FALSE(want.empty()) << why;
    ASSERT_EQ(want.size(), backward_ggml_cases::cases().size());
    for (const backward_ggml_cases::Case & c : backward_ggml_cases::cases()) {
        SCOPED_TRACE(c.name);
        ASSERT_EQ(want.count(c.name), 1u);
        Context       ctx;
        ggml_tensor * out = c.build(ctx);
        ASSERT_TRUE(ggml_is_contiguous(out));
        Array w({int64_t(want[c.name].size()), 1, 1, 1});
        w.v = want[c.name];
        for (const RunMode & mode : run_modes()) {
            SCOPED_TRACE(describe(mode));
            ASSERT_EQ(compute(ctx, out, mode), GGML_STATUS_SUCCESS);
            const std::vector<float> got = backward_ggml_cases::values(out);
            ASSERT_EQ(got.size(), w.v.size());
            Array g(w.ne);
            for (size_t i = 0; i < got.size(); ++i) {
                g.v[i] = got[i];
            }
            EXPECT_TRUE(matches(g, w, 1e-10, 1e-5));
        }
    }
}

// The deprecated rope_custom is rope_ext without frequency factors; the
// _inplace variants write into their input.
TEST(OpsBackward, RopeCustomAndInplaceVariants) {
    std::mt19937         rng(31);
    Context              ctx;
    ggml_tensor *        a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 18, 2, 3);
    const Array          A = fill_random(a, rng);
    std::vector<int32_t> P;
    ggml_tensor *        pos3 = positions(ctx, rng, 3, P);
    const Rope           neox = {8, GGML_ROPE_TYPE_NEOX, {0, 0, 0, 0}, 0, 10000.0f, 1.0f, 1.0f};
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    check_modes(ctx, ggml_rope_custom(ctx, a, pos3, 8, GGML_ROPE_TYPE_NEOX, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f),
                rope(A, P, nullptr, neox, 1.0), kRope);
    ggml_tensor * c = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 18, 2, 3);
    write_tensor(c, A);
    ggml_tensor * ci = ggml_rope_custom_inplace(ctx, c, pos3, 8, GGML_ROPE_TYPE_NEOX, 0, 10000.0f, 1.0f, 0.0f, 1.0f,
                                                32.0f, 1.0f);
#pragma GCC diagnostic pop
    ASSERT_EQ(ci->data, c->data);
    ASSERT_EQ(compute(ctx, ci, 2), GGML_STATUS_SUCCESS);
    EXPECT_TRUE(matches(c, rope(A, P, nullptr, neox, 1.0), kRope));

    std::vector<int32_t> P12;
    ggml_tensor *        pos12 = positions(ctx, rng, 12, P12);
    int                  sec[4] = {4, 2, 2, 0};
    const Rope           mr     = {16, GGML_ROPE_TYPE_MROPE, {4, 2, 2, 0}, 0, 10000.0f, 1.0f, 1.0f};
    ggml_tensor *        m      = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 18, 2, 3);
    write_tensor(m, A);
    ggml_tensor * mi =
        ggml_rope_multi_inplace(ctx, m, pos12, nullptr, 16, sec, GGML_ROPE_TYPE_MROPE, 0, 10000.0f, 1.0f, 0.0f, 1.0f,
                                32.0f, 1.0f);
    ASSERT_EQ(mi->data, m->data);
    ASSERT_EQ(compute(ctx, mi, 3), GGML_STATUS_SUCCESS);
    EXPECT_TRUE(matches(m, rope(A, P12, nullptr, mr, 1.0), kRope));
}
