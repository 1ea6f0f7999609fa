// The reference ops: each computed in double straight from its definition.

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "reference.h"

namespace loomtest {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

} // namespace

namespace ref {

namespace {

// The index of a repeated operand that covers i of a larger dimension.
int64_t wrap(int64_t i, int64_t n) {
    return i % n;
}

template <typename F> Array map_elements(const Array & a, F f) {
    Array r(a.ne);
    for (size_t i = 0; i < a.v.size(); ++i) {
        r.v[i] = f(a.v[i]);
    }
    return r;
}

double sigmoid(double x) {
    return 1.0 / (1.0 + std::exp(-x));
}

} // namespace

Array binary(BinaryOp op, const Array & a, const Array & b) {
    Array r(a.ne);
    for (int64_t i3 = 0; i3 < a.ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < a.ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < a.ne[1]; ++i1) {
                for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) {
                    const double x = a(i0, i1, i2, i3);
                    const double y =
                        b(wrap(i0, b.ne[0]), wrap(i1, b.ne[1]), wrap(i2, b.ne[2]), wrap(i3, b.ne[3]));
                    double z = 0.0;
                    switch (op) {
                        case BinaryOp::add: z = x + y; break;
                        case BinaryOp::sub: z = x - y; break;
                        case BinaryOp::mul: z = x * y; break;
                        case BinaryOp::div: z = x / y; break;
                    }
                    r(i0, i1, i2, i3) = z;
                }
            }
        }
    }
    return r;
}

Array add1(const Array & a, double s) {
    return map_elements(a, [s](double x) { return x + s; });
}

Array scale(const Array & a, double s, double bias) {
    return map_elements(a, [s, bias](double x) { return x * s + bias; });
}

double unary_value(ggml_unary_op op, double x) {
    switch (op) {
        case GGML_UNARY_OP_ABS: return std::fabs(x);
        case GGML_UNARY_OP_SGN: return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : 0.0);
        case GGML_UNARY_OP_NEG: return -x;
        case GGML_UNARY_OP_STEP: return x > 0.0 ? 1.0 : 0.0;
        case GGML_UNARY_OP_TANH: return std::tanh(x);
        case GGML_UNARY_OP_ELU: return x > 0.0 ? x : std::expm1(x);
        case GGML_UNARY_OP_RELU: return x > 0.0 ? x : 0.0;
        case GGML_UNARY_OP_SIGMOID: return sigmoid(x);
        case GGML_UNARY_OP_GELU: {
            const double c = std::sqrt(2.0 / M_PI);
            return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
        }
        case GGML_UNARY_OP_GELU_QUICK: return x * sigmoid(1.702 * x);
        case GGML_UNARY_OP_SILU: return x * sigmoid(x);
        case GGML_UNARY_OP_HARDSWISH: return x * std::min(1.0, std::max(0.0, (x + 3.0) / 6.0));
        case GGML_UNARY_OP_HARDSIGMOID: return std::min(1.0, std::max(0.0, (x + 3.0) / 6.0));
        case GGML_UNARY_OP_EXP: return std::exp(x);
        case GGML_UNARY_OP_EXPM1: return std::expm1(x);
        case GGML_UNARY_OP_SOFTPLUS: return x > 20.0 ? x : std::log1p(std::exp(x));
        case GGML_UNARY_OP_GELU_ERF: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
        case GGML_UNARY_OP_FLOOR: return std::floor(x);
        case GGML_UNARY_OP_CEIL: return std::ceil(x);
        case GGML_UNARY_OP_ROUND: return std::round(x);
        case GGML_UNARY_OP_TRUNC: return std::trunc(x);
        default: throw std::invalid_argument("unary_value: unknown op");
    }
}

Array unary(ggml_unary_op op, const Array & a) {
    return map_elements(a, [op](double x) { return unary_value(op, x); });
}

double math_value(ggml_op op, double x) {
    switch (op) {
        case GGML_OP_SQR: return x * x;
        case GGML_OP_SQRT: return std::sqrt(x);
        case GGML_OP_LOG: return std::log(x);
        case GGML_OP_SIN: return std::sin(x);
        case GGML_OP_COS: return std::cos(x);
        default: throw std::invalid_argument("math_value: not an element-wise math op");
    }
}

Array math(ggml_op op, const Array & a) {
    return map_elements(a, [op](double x) { return math_value(op, x); });
}

Array sum(const Array & a) {
    Array r(Shape{1, 1, 1, 1});
    r.v[0] = std::accumulate(a.v.begin(), a.v.end(), 0.0);
    return r;
}

Array sum_rows(const Array & a) {
    Array r(Shape{1, a.ne[1], a.ne[2], a.ne[3]});
    for (int64_t i3 = 0; i3 < a.ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < a.ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < a.ne[1]; ++i1) {
                double s = 0.0;
                for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) {
                    s += a(i0, i1, i2, i3);
                }
                r(0, i1, i2, i3) = s;
            }
        }
    }
    return r;
}

Array mean(const Array & a) {
    Array r = sum_rows(a);
    for (double & x : r.v) {
        x /= double(a.ne[0]);
    }
    return r;
}

Array argmax(const Array & a) {
    Array r(Shape{a.ne[1], 1, 1, 1});
    for (int64_t i1 = 0; i1 < a.ne[1]; ++i1) {
        int64_t best = 0;
        for (int64_t i0 = 1; i0 < a.ne[0]; ++i0) {
            if (a(i0, i1) > a(best, i1)) {
                best = i0;
            }
        }
        r(i1) = double(best);
    }
    return r;
}

Array reshape(const Array & a, const Shape & ne) {
    Array r(ne);
    if (r.size() != a.size()) {
        throw std::invalid_argument("reshape: " + shape_str(a.ne) + " into " + shape_str(ne));
    }
    r.v = a.v;
    return r;
}

Array permute(const Array & a, const std::array<int, 4> & axes) {
    Shape ne{};
    for (size_t d = 0; d < 4; ++d) {
        ne[size_t(axes[d])] = a.ne[d];
    }
    Array r(ne);
    for (int64_t i3 = 0; i3 < a.ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < a.ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < a.ne[1]; ++i1) {
                for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) {
                    const int64_t          src[4] = {i0, i1, i2, i3};
                    std::array<int64_t, 4> j{};
                    for (size_t d = 0; d < 4; ++d) {
                        j[size_t(axes[d])] = src[d];
                    }
                    r(j[0], j[1], j[2], j[3]) = a(i0, i1, i2, i3);
                }
            }
        }
    }
    return r;
}

Array repeat(const Array & a, const Shape & ne) {
    Array r(ne);
    for (int64_t i3 = 0; i3 < ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < ne[1]; ++i1) {
                for (int64_t i0 = 0; i0 < ne[0]; ++i0) {
                    r(i0, i1, i2, i3) = a(wrap(i0, a.ne[0]), wrap(i1, a.ne[1]), wrap(i2, a.ne[2]), wrap(i3, a.ne[3]));
                }
            }
        }
    }
    return r;
}

Array concat(const Array & a, const Array & b, int dim) {
    Shape ne = a.ne;
    ne[size_t(dim)] += b.ne[size_t(dim)];
    Array r(ne);
    for (int64_t i3 = 0; i3 < ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < ne[1]; ++i1) {
                for (int64_t i0 = 0; i0 < ne[0]; ++i0) {
                    std::array<int64_t, 4> i = {i0, i1, i2, i3};
                    if (i[size_t(dim)] < a.ne[size_t(dim)]) {
                        r(i0, i1, i2, i3) = a(i0, i1, i2, i3);
                    } else {
                        i[size_t(dim)] -= a.ne[size_t(dim)];
                        r(i0, i1, i2, i3) = b(i[0], i[1], i[2], i[3]);
                    }
                }
            }
        }
    }
    return r;
}

Array norm(const Array & a, double eps) {
    Array r(a.ne);
    for (int64_t i3 = 0; i3 < a.ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < a.ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < a.ne[1]; ++i1) {
                double m = 0.0;
                for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) {
                    m += a(i0, i1, i2, i3);
                }
                m /= double(a.ne[0]);
                double var = 0.0;
                for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) {
                    const double d = a(i0, i1, i2, i3) - m;
                    var += d * d;
                }
                var /= double(a.ne[0]);
                const double inv = 1.0 / std::sqrt(var + eps);
                for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) {
                    r(i0, i1, i2, i3) = (a(i0, i1, i2, i3) - m) * inv;
                }
            }
        }
    }
    return r;
}

Array rms_norm(const Array & a, double eps) {
    Array r(a.ne);
    for (int64_t i3 = 0; i3 < a.ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < a.ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < a.ne[1]; ++i1) {
                double ms = 0.0;
                for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) {
                    ms += a(i0, i1, i2, i3) * a(i0, i1, i2, i3);
                }
                ms /= double(a.ne[0]);
                const double inv = 1.0 / std::sqrt(ms + eps);
                for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) {
                    r(i0, i1, i2, i3) = a(i0, i1, i2, i3) * inv;
                }
            }
        }
    }
    return r;
}

Array group_norm(const Array & a, int n_groups, double eps) {
    Array         r(a.ne);
    const int64_t per_group = (a.ne[2] + n_groups - 1) / n_groups;
    for (int64_t i3 = 0; i3 < a.ne[3]; ++i3) {
        for (int64_t c0 = 0; c0 < a.ne[2]; c0 += per_group) {
            const int64_t c1 = std::min(a.ne[2], c0 + per_group);
            double        m  = 0.0;
            int64_t       n  = 0;
            for (int64_t i2 = c0; i2 < c1; ++i2) {
                for (int64_t i1 = 0; i1 < a.ne[1]; ++i1) {
                    for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) {
                        m += a(i0, i1, i2, i3);
                        ++n;
                    }
                }
            }
            m /= double(n);
            double var = 0.0;
            for (int64_t i2 = c0; i2 < c1; ++i2) {
                for (int64_t i1 = 0; i1 < a.ne[1]; ++i1) {
                    for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) {
                        const double d = a(i0, i1, i2, i3) - m;
                        var += d * d;
                    }
                }
            }
            var /= double(n);
            const double inv = 1.0 / std::sqrt(var + eps);
            for (int64_t i2 = c0; i2 < c1; ++i2) {
                for (int64_t i1 = 0; i1 < a.ne[1]; ++i1) {
                    for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) {
                        r(i0, i1, i2, i3) = (a(i0, i1, i2, i3) - m) * inv;
                    }
                }
            }
        }
    }
    return r;
}

Array mul_mat(const Array & a, const Array & b) {
    const int64_t K = a.ne[0];
    Array         r(Shape{a.ne[1], b.ne[1], b.ne[2], b.ne[3]});
    const int64_t r2 = b.ne[2] / a.ne[2];
    const int64_t r3 = b.ne[3] / a.ne[3];
    for (int64_t i3 = 0; i3 < r.ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < r.ne[2]; ++i2) {
            for (int64_t n = 0; n < r.ne[1]; ++n) {
                for (int64_t m = 0; m < r.ne[0]; ++m) {
                    double s = 0.0;
                    for (int64_t k = 0; k < K; ++k) {
                        s += a(k, m, i2 / r2, i3 / r3) * b(k, n, i2, i3);
                    }
                    r(m, n, i2, i3) = s;
                }
            }
        }
    }
    return r;
}

Array out_prod(const Array & a, const Array & b) {
    const int64_t K = a.ne[1];
    Array         r(Shape{a.ne[0], b.ne[0], b.ne[2], b.ne[3]});
    const int64_t r2 = b.ne[2] / a.ne[2];
    const int64_t r3 = b.ne[3] / a.ne[3];
    for (int64_t i3 = 0; i3 < r.ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < r.ne[2]; ++i2) {
            for (int64_t n = 0; n < r.ne[1]; ++n) {
                for (int64_t m = 0; m < r.ne[0]; ++m) {
                    double s = 0.0;
                    for (int64_t k = 0; k < K; ++k) {
                        s += a(m, k, i2 / r2, i3 / r3) * b(n, k, i2, i3);
                    }
                    r(m, n, i2, i3) = s;
                }
            }
        }
    }
    return r;
}

double alibi_slope(int64_t h, int64_t n_head, double max_bias) {
    if (max_bias <= 0.0) {
        return 1.0;
    }
    int64_t n_head_log2 = 1;
    while (n_head_log2 * 2 <= n_head) {
        n_head_log2 *= 2;
    }
    const double m0 = std::pow(2.0, -max_bias / double(n_head_log2));
    const double m1 = std::pow(2.0, -max_bias / 2.0 / double(n_head_log2));
    return h < n_head_log2 ? std::pow(m0, double(h + 1)) : std::pow(m1, double(2 * (h - n_head_log2) + 1));
}

Array soft_max(const Array & a, const Array * mask, double scale, double max_bias, const std::vector<double> * sinks) {
    Array               r(a.ne);
    std::vector<double> w(size_t(a.ne[0]));
    for (int64_t i3 = 0; i3 < a.ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < a.ne[2]; ++i2) {
            const double slope = alibi_slope(i2, a.ne[2], max_bias);
            for (int64_t i1 = 0; i1 < a.ne[1]; ++i1) {
                double mx = -kInf;
                for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) {
                    double x = a(i0, i1, i2, i3) * scale;
                    if (mask != nullptr) {
                        x += slope * (*mask)(i0, i1, i2 % mask->ne[2], i3 % mask->ne[3]);
                    }
                    w[size_t(i0)] = x;
                    mx            = std::max(mx, x);
                }
                if (sinks != nullptr) {
                    mx = std::max(mx, (*sinks)[size_t(i2)]);
                }
                double s = sinks != nullptr ? std::exp((*sinks)[size_t(i2)] - mx) : 0.0;
                for (double & x : w) {
                    x = std::exp(x - mx);
                    s += x;
                }
                for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) {
                    r(i0, i1, i2, i3) = w[size_t(i0)] / s;
                }
            }
        }
    }
    return r;
}

Array diag_mask_inf(const Array & a, int n_past) {
    Array r = a;
    for (int64_t i3 = 0; i3 < a.ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < a.ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < a.ne[1]; ++i1) {
                for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) {
                    if (i0 > n_past + i1) {
                        r(i0, i1, i2, i3) = -kInf;
                    }
                }
            }
        }
    }
    return r;
}

Array rope(const Array & a, const std::vector<int32_t> & pos, const std::vector<double> * freq_factors,
           const RopeParams & p) {
    Array         r        = a;
    const int64_t n_pairs  = p.n_dims / 2;
    const bool    neox     = p.mode == GGML_ROPE_TYPE_NEOX;
    double        mscale   = p.attn_factor;
    if (p.ext_factor != 0.0) {
        mscale *= 1.0 + 0.1 * std::log(1.0 / p.freq_scale);
    }
    for (int64_t i3 = 0; i3 < a.ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < a.ne[2]; ++i2) {
            const double position = double(pos[size_t(i2)]);
            for (int64_t i1 = 0; i1 < a.ne[1]; ++i1) {
                for (int64_t j = 0; j < n_pairs; ++j) {
                    // Pair j turns by position * base^(-2j/n_dims), divided by its frequency factor.
                    const double ff = freq_factors != nullptr ? (*freq_factors)[size_t(j)] : 1.0;
                    const double theta_extrap =
                        position * std::pow(p.freq_base, -2.0 * double(j) / double(p.n_dims)) / ff;
                    const double theta_interp = p.freq_scale * theta_extrap;
                    double       theta        = theta_interp;
                    if (p.ext_factor != 0.0) {
                        const double y    = (double(j) - p.corr_dims[0]) / std::max(0.001, p.corr_dims[1] - p.corr_dims[0]);
                        const double ramp = 1.0 - std::min(1.0, std::max(0.0, y));
                        const double mix  = ramp * p.ext_factor;
                        theta             = theta_interp * (1.0 - mix) + theta_extrap * mix;
                    }
                    const double  c  = std::cos(theta) * mscale;
                    const double  s  = std::sin(theta) * mscale;
                    const int64_t k0 = neox ? j : 2 * j;
                    const int64_t k1 = neox ? j + n_pairs : 2 * j + 1;
                    const double  x0 = a(k0, i1, i2, i3);
                    const double  x1 = a(k1, i1, i2, i3);
                    r(k0, i1, i2, i3) = x0 * c - x1 * s;
                    r(k1, i1, i2, i3) = x0 * s + x1 * c;
                }
            }
        }
    }
    return r;
}

Array get_rows(const Array & a, const Array & idx) {
    Array r(Shape{a.ne[0], idx.ne[0], idx.ne[1], idx.ne[2]});
    for (int64_t i3 = 0; i3 < r.ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < r.ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < r.ne[1]; ++i1) {
                const auto row = int64_t(idx(i1, i2, i3));
                for (int64_t i0 = 0; i0 < r.ne[0]; ++i0) {
                    r(i0, i1, i2, i3) = a(i0, row, i2, i3);
                }
            }
        }
    }
    return r;
}

Array set_rows(const Array & dst, const Array & src, const Array & idx, double (*convert)(double)) {
    Array r = dst;
    for (int64_t i3 = 0; i3 < src.ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < src.ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < src.ne[1]; ++i1) {
                const auto row = int64_t(idx(i1, i2 % idx.ne[1], i3 % idx.ne[2]));
                for (int64_t i0 = 0; i0 < src.ne[0]; ++i0) {
                    r(i0, row, i2, i3) = convert(src(i0, i1, i2, i3));
                }
            }
        }
    }
    return r;
}

Array argsort(const Array & a, ggml_sort_order order) {
    Array                r(a.ne);
    std::vector<int64_t> ix(size_t(a.ne[0]));
    for (int64_t i3 = 0; i3 < a.ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < a.ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < a.ne[1]; ++i1) {
                std::iota(ix.begin(), ix.end(), int64_t(0));
                std::stable_sort(ix.begin(), ix.end(), [&](int64_t x, int64_t y) {
                    const double vx = a(x, i1, i2, i3);
                    const double vy = a(y, i1, i2, i3);
                    return order == GGML_SORT_ORDER_ASC ? vx < vy : vx > vy;
                });
                for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) {
                    r(i0, i1, i2, i3) = double(ix[size_t(i0)]);
                }
            }
        }
    }
    return r;
}

Array flash_attn(const Array & q, const Array & k, const Array & v, const Array * mask, double scale,
                 double max_bias, double logit_softcap, const std::vector<double> * sinks) {
    const int64_t d      = q.ne[0];
    const int64_t n_q    = q.ne[1];
    const int64_t n_head = q.ne[2];
    const int64_t n_kv   = k.ne[1];
    const int64_t dv     = v.ne[0];
    const int64_t rk     = n_head / k.ne[2];
    const int64_t rv     = n_head / v.ne[2];
    Array         r(Shape{dv, n_head, n_q, q.ne[3]});
    std::vector<double> s(static_cast<size_t>(n_kv));
    for (int64_t i3 = 0; i3 < q.ne[3]; ++i3) {
        for (int64_t h = 0; h < n_head; ++h) {
            const double slope = alibi_slope(h, n_head, max_bias);
            for (int64_t iq = 0; iq < n_q; ++iq) {
                double mx = -kInf;
                for (int64_t j = 0; j < n_kv; ++j) {
                    double dot = 0.0;
                    for (int64_t c = 0; c < d; ++c) {
                        dot += q(c, iq, h, i3) * k(c, j, h / rk, i3);
                    }
                    double x = dot * scale;
                    if (logit_softcap != 0.0) {
                        x = logit_softcap * std::tanh(x / logit_softcap);
                    }
                    if (mask != nullptr) {
                        x += slope * (*mask)(j, iq, h % mask->ne[2], i3 % mask->ne[3]);
                    }
                    s[size_t(j)] = x;
                    mx           = std::max(mx, x);
                }
                if (sinks != nullptr) {
                    mx = std::max(mx, (*sinks)[size_t(h)]);
                }
                double total = sinks != nullptr && mx > -kInf ? std::exp((*sinks)[size_t(h)] - mx) : 0.0;
                for (double & x : s) {
                    x = mx > -kInf ? std::exp(x - mx) : 0.0;
                    total += x;
                }
                for (int64_t c = 0; c < dv; ++c) {
                    double acc = 0.0;
                    for (int64_t j = 0; j < n_kv; ++j) {
                        acc += s[size_t(j)] * v(c, j, h / rv, i3);
                    }
                    r(c, h, iq, i3) = total > 0.0 ? acc / total : 0.0; // a fully masked row gives zeros
                }
            }
        }
    }
    return r;
}

} // namespace ref

} // namespace loomtest
