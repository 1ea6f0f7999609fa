// Convolutions, pooling, resampling and SAM's window and relative-position
// operators against naive double-precision references written here from the
// definitions.
//
// Thresholds (NMSE):
//   f32 results                 1e-10  float sums of at most a few hundred terms
//   f16 patches / f16 results   1e-6   values rounded to f16 (2^-11 relative)
//   im2col, pooling, windows    exact  values are moved, not combined (max: exact; averages 1e-12)
//   resampling                  1e-10  positions computed in float as ggml does, weights in double

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "conv_ggml_cases.h"
#include "test_util.h"

using namespace loomtest;

namespace {

constexpr double kF32   = 1e-10;
constexpr double kF16   = 1e-6;
constexpr double kExact = 0.0;

ggml_tensor * new_tensor(ggml_context * ctx, ggml_type type, const Shape & ne) {
    return ggml_new_tensor_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]);
}

int64_t conv_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

Array rounded(const Array & a, ggml_type type) {
    Array r = a;
    for (double & v : r.v) {
        v = round_to_type(type, v);
    }
    return r;
}

struct Conv {
    int64_t s[3] = {1, 1, 1};
    int64_t p[3] = {0, 0, 0};
    int64_t d[3] = {1, 1, 1};
};

// x[ix, iy, iz] of a 3D volume given as a lookup, zero outside.
template <typename Get>
double conv_at(const Conv & c, const int64_t k[3], const int64_t in[3], const int64_t o[3], Get get) {
    double sum = 0.0;
    for (int64_t kz = 0; kz < k[2]; ++kz) {
        for (int64_t ky = 0; ky < k[1]; ++ky) {
            for (int64_t kx = 0; kx < k[0]; ++kx) {
                const int64_t ix = o[0] * c.s[0] + kx * c.d[0] - c.p[0];
                const int64_t iy = o[1] * c.s[1] + ky * c.d[1] - c.p[1];
                const int64_t iz = o[2] * c.s[2] + kz * c.d[2] - c.p[2];
                if (ix >= 0 && ix < in[0] && iy >= 0 && iy < in[1] && iz >= 0 && iz < in[2]) {
                    sum += get(kx, ky, kz, ix, iy, iz);
                }
            }
        }
    }
    return sum;
}

// kernel [KW, KH, IC, OC], image [W, H, IC, N] -> [OW, OH, OC, N].
Array conv2d(const Array & w, const Array & x, const Conv & c) {
    const int64_t k[3]  = {w.ne[0], w.ne[1], 1};
    const int64_t in[3] = {x.ne[0], x.ne[1], 1};
    Array         r({conv_size(x.ne[0], k[0], c.s[0], c.p[0], c.d[0]), conv_size(x.ne[1], k[1], c.s[1], c.p[1], c.d[1]),
                     w.ne[3], x.ne[3]});
    for (int64_t n = 0; n < r.ne[3]; ++n) {
        for (int64_t oc = 0; oc < r.ne[2]; ++oc) {
            for (int64_t oy = 0; oy < r.ne[1]; ++oy) {
                for (int64_t ox = 0; ox < r.ne[0]; ++ox) {
                    const int64_t o[3] = {ox, oy, 0};
                    double        sum  = 0.0;
                    for (int64_t ic = 0; ic < x.ne[2]; ++ic) {
                        sum += conv_at(c, k, in, o, [&](int64_t kx, int64_t ky, int64_t, int64_t ix, int64_t iy, int64_t) {
                            return w(kx, ky, ic, oc) * x(ix, iy, ic, n);
                        });
                    }
                    r(ox, oy, oc, n) = sum;
                }
            }
        }
    }
    return r;
}

// kernel [KW, KH, KD, IC*OC], image [W, H, D, IC*N] -> [OW, OH, OD, OC*N].
Array conv3d(const Array & w, const Array & x, int64_t IC, const Conv & c) {
    const int64_t OC = w.ne[3] / IC, N = x.ne[3] / IC;
    const int64_t k[3]  = {w.ne[0], w.ne[1], w.ne[2]};
    const int64_t in[3] = {x.ne[0], x.ne[1], x.ne[2]};
    Array         r({conv_size(in[0], k[0], c.s[0], c.p[0], c.d[0]), conv_size(in[1], k[1], c.s[1], c.p[1], c.d[1]),
                     conv_size(in[2], k[2], c.s[2], c.p[2], c.d[2]), OC * N});
    for (int64_t n = 0; n < N; ++n) {
        for (int64_t oc = 0; oc < OC; ++oc) {
            for (int64_t oz = 0; oz < r.ne[2]; ++oz) {
                for (int64_t oy = 0; oy < r.ne[1]; ++oy) {
                    for (int64_t ox = 0; ox < r.ne[0]; ++ox) {
                        const int64_t o[3] = {ox, oy, oz};
                        double        sum  = 0.0;
                        for (int64_t ic = 0; ic < IC; ++ic) {
                            sum += conv_at(c, k, in, o,
                                           [&](int64_t kx, int64_t ky, int64_t kz, int64_t ix, int64_t iy, int64_t iz) {
                                               return w(kx, ky, kz, oc * IC + ic) * x(ix, iy, iz, n * IC + ic);
                                           });
                        }
                        r(ox, oy, oz, n * OC + oc) = sum;
                    }
                }
            }
        }
    }
    return r;
}

// kernel [KW, KH, 1, C], image [W, H, C, N] -> [OW, OH, C, N].
Array conv2d_dw(const Array & w, const Array & x, const Conv & c) {
    const int64_t k[3]  = {w.ne[0], w.ne[1], 1};
    const int64_t in[3] = {x.ne[0], x.ne[1], 1};
    Array         r({conv_size(x.ne[0], k[0], c.s[0], c.p[0], c.d[0]), conv_size(x.ne[1], k[1], c.s[1], c.p[1], c.d[1]),
                     x.ne[2], x.ne[3]});
    for (int64_t n = 0; n < r.ne[3]; ++n) {
        for (int64_t ch = 0; ch < r.ne[2]; ++ch) {
            for (int64_t oy = 0; oy < r.ne[1]; ++oy) {
                for (int64_t ox = 0; ox < r.ne[0]; ++ox) {
                    const int64_t o[3] = {ox, oy, 0};
                    r(ox, oy, ch, n)   = conv_at(c, k, in, o,
                                                 [&](int64_t kx, int64_t ky, int64_t, int64_t ix, int64_t iy, int64_t) {
                                                   return w(kx, ky, 0, ch) * x(ix, iy, ch, n);
                                               });
                }
            }
        }
    }
    return r;
}

// im2col of image [W, H, IC, N] (2D) under a kernel of KW x KH: [IC*KH*KW, OW, OH, N].
Array im2col2d(const Array & x, int64_t KW, int64_t KH, const Conv & c) {
    const int64_t OW = conv_size(x.ne[0], KW, c.s[0], c.p[0], c.d[0]);
    const int64_t OH = conv_size(x.ne[1], KH, c.s[1], c.p[1], c.d[1]);
    Array         r({x.ne[2] * KH * KW, OW, OH, x.ne[3]});
    for (int64_t n = 0; n < x.ne[3]; ++n) {
        for (int64_t oy = 0; oy < OH; ++oy) {
            for (int64_t ox = 0; ox < OW; ++ox) {
                for (int64_t ic = 0; ic < x.ne[2]; ++ic) {
                    for (int64_t ky = 0; ky < KH; ++ky) {
                        for (int64_t kx = 0; kx < KW; ++kx) {
                            const int64_t ix = ox * c.s[0] + kx * c.d[0] - c.p[0];
                            const int64_t iy = oy * c.s[1] + ky * c.d[1] - c.p[1];
                            const bool    in = ix >= 0 && ix < x.ne[0] && iy >= 0 && iy < x.ne[1];
                            r((ic * KH + ky) * KW + kx, ox, oy, n) = in ? x(ix, iy, ic, n) : 0.0;
                        }
                    }
                }
            }
        }
    }
    return r;
}

// im2col_3d of image [W, H, D, IC*N]: [IC*KD*KH*KW, OW, OH, OD*N].
Array im2col3d(const Array & x, const int64_t k[3], int64_t IC, const Conv & c) {
    const int64_t N = x.ne[3] / IC;
    int64_t       o[3];
    for (int i = 0; i < 3; ++i) {
        o[i] = conv_size(x.ne[i], k[i], c.s[i], c.p[i], c.d[i]);
    }
    Array r({IC * k[0] * k[1] * k[2], o[0], o[1], o[2] * N});
    for (int64_t n = 0; n < N; ++n) {
        for (int64_t oz = 0; oz < o[2]; ++oz) {
            for (int64_t oy = 0; oy < o[1]; ++oy) {
                for (int64_t ox = 0; ox < o[0]; ++ox) {
                    for (int64_t ic = 0; ic < IC; ++ic) {
                        for (int64_t kz = 0; kz < k[2]; ++kz) {
                            for (int64_t ky = 0; ky < k[1]; ++ky) {
                                for (int64_t kx = 0; kx < k[0]; ++kx) {
                                    const int64_t ix = ox * c.s[0] + kx * c.d[0] - c.p[0];
                                    const int64_t iy = oy * c.s[1] + ky * c.d[1] - c.p[1];
                                    const int64_t iz = oz * c.s[2] + kz * c.d[2] - c.p[2];
                                    const bool    in = ix >= 0 && ix < x.ne[0] && iy >= 0 && iy < x.ne[1] && iz >= 0 &&
                                                    iz < x.ne[2];
                                    r(((ic * k[2] + kz) * k[1] + ky) * k[0] + kx, ox, oy, n * o[2] + oz) =
                                        in ? x(ix, iy, iz, n * IC + ic) : 0.0;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    return r;
}

// Transposed convolution: kernel [KW, KH, OC, IC], image [W, H, IC, N] -> [(W-1)s + KW, (H-1)s + KH, OC, N].
Array conv_transpose2d(const Array & w, const Array & x, int64_t s) {
    Array r({(x.ne[0] - 1) * s + w.ne[0], (x.ne[1] - 1) * s + w.ne[1], w.ne[2], x.ne[3]});
    for (int64_t n = 0; n < x.ne[3]; ++n) {
        for (int64_t ic = 0; ic < x.ne[2]; ++ic) {
            for (int64_t y = 0; y < x.ne[1]; ++y) {
                for (int64_t xx = 0; xx < x.ne[0]; ++xx) {
                    for (int64_t oc = 0; oc < w.ne[2]; ++oc) {
                        for (int64_t ky = 0; ky < w.ne[1]; ++ky) {
                            for (int64_t kx = 0; kx < w.ne[0]; ++kx) {
                                r(xx * s + kx, y * s + ky, oc, n) += w(kx, ky, oc, ic) * x(xx, y, ic, n);
                            }
                        }
                    }
                }
            }
        }
    }
    return r;
}

Array pool(const Array & a, bool avg, int64_t k0, int64_t k1, int64_t s0, int64_t s1, int64_t p0, int64_t p1,
           int64_t OW, int64_t OH, bool two_d) {
    Array r({OW, two_d ? OH : a.ne[1], a.ne[2], a.ne[3]});
    for (int64_t i3 = 0; i3 < r.ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < r.ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < r.ne[1]; ++i1) {
                for (int64_t ox = 0; ox < OW; ++ox) {
                    double  acc   = avg ? 0.0 : -double(FLT_MAX);
                    int64_t count = 0;
                    for (int64_t ky = 0; ky < k1; ++ky) {
                        const int64_t iy = two_d ? i1 * s1 - p1 + ky : i1;
                        for (int64_t kx = 0; kx < k0; ++kx) {
                            const int64_t ix = ox * s0 - p0 + kx;
                            if (ix < 0 || ix >= a.ne[0] || iy < 0 || iy >= a.ne[1]) {
                                continue;
                            }
                            acc = avg ? acc + a(ix, iy, i2, i3) : std::max(acc, a(ix, iy, i2, i3));
                            ++count;
                        }
                    }
                    if (avg) {
                        acc = two_d ? acc / double(k0 * k1) : (count > 0 ? acc / double(count) : 0.0);
                    }
                    r(ox, i1, i2, i3) = acc;
                }
            }
        }
    }
    return r;
}

// Resampling: source positions from float arithmetic (ggml's), weights in double.
Array interpolate(const Array & a, const Shape & ne, uint32_t mode) {
    float sf[4];
    for (int i = 0; i < 4; ++i) {
        sf[i] = float(ne[i]) / float(a.ne[i]);
    }
    float off = 0.5f;
    if (mode & GGML_SCALE_FLAG_ALIGN_CORNERS) {
        off = 0.0f;
        for (int i = 0; i < 2; ++i) {
            if (ne[i] > 1 && a.ne[i] > 1) {
                sf[i] = float(ne[i] - 1) / float(a.ne[i] - 1);
            }
        }
    }
    auto clampi = [](int64_t v, int64_t n) { return std::min(std::max(v, int64_t(0)), n - 1); };
    auto near   = [&](int64_t i, int d) { return clampi(int64_t(float(i) / sf[d]), a.ne[d]); };
    auto cubic  = [](const double v[4], double t) {
        const double A  = -0.75;
        auto         w1 = [A](double x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };
        auto         w2 = [A](double x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };
        return v[0] * w2(t + 1) + v[1] * w1(t) + v[2] * w1(1 - t) + v[3] * w2(2 - t);
    };
    Array r(ne);
    for (int64_t i3 = 0; i3 < ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < ne[2]; ++i2) {
            const int64_t j2 = near(i2, 2), j3 = near(i3, 3);
            auto          at = [&](int64_t x, int64_t y) { return a(clampi(x, a.ne[0]), clampi(y, a.ne[1]), j2, j3); };
            for (int64_t i1 = 0; i1 < ne[1]; ++i1) {
                for (int64_t i0 = 0; i0 < ne[0]; ++i0) {
                    double v = 0.0;
                    switch (mode & 0xFF) {
                        case GGML_SCALE_MODE_NEAREST: v = at(near(i0, 0), near(i1, 1)); break;
                        case GGML_SCALE_MODE_BILINEAR:
                            if (mode & GGML_SCALE_FLAG_ANTIALIAS) {
                                const float   x  = (float(i0) + off) / sf[0];
                                const float   y  = (float(i1) + off) / sf[1];
                                const float   sx = std::max(1.0f, 1.0f / sf[0]), sy = std::max(1.0f, 1.0f / sf[1]);
                                double        total = 0.0;
                                const int64_t x0 = std::max<int64_t>(int64_t(x - sx + off), 0);
                                const int64_t x1 = std::min<int64_t>(int64_t(x + sx + off), a.ne[0]);
                                const int64_t y0 = std::max<int64_t>(int64_t(y - sy + off), 0);
                                const int64_t y1 = std::min<int64_t>(int64_t(y + sy + off), a.ne[1]);
                                for (int64_t yy = y0; yy < y1; ++yy) {
                                    for (int64_t xx = x0; xx < x1; ++xx) {
                                        const double w =
                                            std::max(0.0, 1.0 - std::fabs((double(xx) - x + off) / sx)) *
                                            std::max(0.0, 1.0 - std::fabs((double(yy) - y + off) / sy));
                                        if (w > 0.0) {
                                            v += w * at(xx, yy);
                                            total += w;
                                        }
                                    }
                                }
                                v = total > 0.0 ? v / total : 0.0;
                            } else {
                                const float   x  = (float(i0) + off) / sf[0] - off;
                                const float   y  = (float(i1) + off) / sf[1] - off;
                                const int64_t x0 = clampi(int64_t(std::floor(x)), a.ne[0]);
                                const int64_t y0 = clampi(int64_t(std::floor(y)), a.ne[1]);
                                const int64_t xf = int64_t(std::floor(x)), yf = int64_t(std::floor(y));
                                const double  dx = std::clamp(double(x) - double(x0), 0.0, 1.0);
                                const double  dy = std::clamp(double(y) - double(y0), 0.0, 1.0);
                                v = at(x0, y0) * (1 - dx) * (1 - dy) + at(xf + 1, y0) * dx * (1 - dy) +
                                    at(x0, yf + 1) * (1 - dx) * dy + at(xf + 1, yf + 1) * dx * dy;
                            }
                            break;
                        default: {
                            const float   x  = (float(i0) + off) / sf[0] - off;
                            const float   y  = (float(i1) + off) / sf[1] - off;
                            const int64_t x0 = int64_t(std::floor(x)), y0 = int64_t(std::floor(y));
                            double        rows[4];
                            for (int64_t k = 0; k < 4; ++k) {
                                const double line[4] = {at(x0 - 1, y0 + k - 1), at(x0, y0 + k - 1),
                                                        at(x0 + 1, y0 + k - 1), at(x0 + 2, y0 + k - 1)};
                                rows[k]              = cubic(line, double(x) - double(x0));
                            }
                            v = cubic(rows, double(y) - double(y0));
                        }
                    }
                    r(i0, i1, i2, i3) = v;
                }
            }
        }
    }
    return r;
}

} // namespace

// ---- im2col and the products built on it ----

TEST(OpsConv, Im2Col2D) {
    struct Case {
        Shape kernel, image;
        Conv  c;
    };
    const Case cases[] = {
        {{3, 3, 2, 4}, {9, 7, 2, 2}, {{1, 1, 1}, {1, 1, 0}, {1, 1, 1}}},
        {{2, 3, 3, 1}, {11, 8, 3, 1}, {{2, 3, 1}, {0, 2, 0}, {2, 1, 1}}},
        {{5, 1, 1, 2}, {6, 5, 1, 3}, {{1, 2, 1}, {3, 0, 0}, {1, 1, 1}}},
    };
    std::mt19937 rng(101);
    for (const Case & k : cases) {
        for (ggml_type src : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16}) {
            for (ggml_type dst : {GGML_TYPE_F32, GGML_TYPE_F16}) {
                SCOPED_TRACE(shape_str(k.image) + " " + ggml_type_name(src) + " -> " + ggml_type_name(dst));
                Context       ctx;
                ggml_tensor * a = new_tensor(ctx, GGML_TYPE_F16, k.kernel);
                ggml_tensor * b = new_tensor(ctx, src, k.image);
                const Array   B = fill_random(b, rng);
                ggml_tensor * r = ggml_im2col(ctx, a, b, int(k.c.s[0]), int(k.c.s[1]), int(k.c.p[0]), int(k.c.p[1]),
                                              int(k.c.d[0]), int(k.c.d[1]), true, dst);
                check_modes(ctx, r, rounded(im2col2d(B, k.kernel[0], k.kernel[1], k.c), dst), kExact, 0.0);
            }
        }
    }
}

TEST(OpsConv, Im2Col1DAndPermutedImage) {
    std::mt19937 rng(103);
    Context      ctx;
    // 1D: kernel [K, IC, OC], signal [L, IC, N]; the result is [IC*K, OL, N].
    ggml_tensor * a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 3, 5, 2);
    ggml_tensor * b = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 13, 5, 3);
    const Array   B = fill_random(b, rng);
    ggml_tensor * r = ggml_im2col(ctx, a, b, 2, 0, 1, 0, 2, 0, false, GGML_TYPE_F32);
    const Conv    c{{2, 1, 1}, {1, 0, 0}, {2, 1, 1}};
    // The 1D patches are the 2D ones of a one-row image with the channels at dim 2.
    const Array want = ref::reshape(im2col2d(ref::reshape(B, {13, 1, 5, 3}), 3, 1, c), {15, 6, 3, 1});
    check_modes(ctx, r, want, kExact, 0.0);

    // A permuted (non-contiguous) image: [H, W, C] stored, read as [W, H, C].
    ggml_tensor * base = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 6, 9, 2);
    fill_random(base, rng);
    ggml_tensor * img = ggml_permute(ctx, base, 1, 0, 2, 3);
    const Array   I   = read_tensor(img);
    ggml_tensor * k2  = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 3, 2, 2, 1);
    const Conv    c2{{1, 2, 1}, {1, 1, 0}, {1, 1, 1}};
    check_modes(ctx, ggml_im2col(ctx, k2, img, 1, 2, 1, 1, 1, 1, true, GGML_TYPE_F16),
                rounded(im2col2d(I, 3, 2, c2), GGML_TYPE_F16), kExact, 0.0);
}

TEST(OpsConv, Conv2DThroughIm2Col) {
    struct Case {
        Shape kernel, image;
        Conv  c;
    };
    const Case cases[] = {
        {{3, 3, 3, 5}, {10, 9, 3, 2}, {{1, 1, 1}, {1, 1, 0}, {1, 1, 1}}},
        {{2, 3, 2, 3}, {13, 8, 2, 1}, {{2, 1, 1}, {0, 2, 0}, {1, 2, 1}}},
    };
    std::mt19937 rng(107);
    for (const Case & k : cases) {
        Context       ctx;
        ggml_tensor * a = new_tensor(ctx, GGML_TYPE_F32, k.kernel);
        ggml_tensor * b = new_tensor(ctx, GGML_TYPE_F32, k.image);
        const Array   A = fill_random(a, rng);
        const Array   B = fill_random(b, rng);
        // The patches are f16 (the kernel is not bf16).
        ggml_tensor * r = ggml_conv_2d(ctx, a, b, int(k.c.s[0]), int(k.c.s[1]), int(k.c.p[0]), int(k.c.p[1]),
                                       int(k.c.d[0]), int(k.c.d[1]));
        check_modes(ctx, r, conv2d(A, rounded(B, GGML_TYPE_F16), k.c), kF16);
    }
    Context       ctx;
    ggml_tensor * a = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 3, 3, 2, 4);
    ggml_tensor * b = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 7, 6, 2, 1);
    const Array   A = fill_random(a, rng);
    const Array   B = rounded(fill_random(b, rng), GGML_TYPE_F16);
    check_modes(ctx, ggml_conv_2d_s1_ph(ctx, a, b), conv2d(A, B, Conv{{1, 1, 1}, {1, 1, 0}, {1, 1, 1}}), kF16);
    check_modes(ctx, ggml_conv_2d_sk_p0(ctx, a, b), conv2d(A, B, Conv{{3, 3, 1}, {0, 0, 0}, {1, 1, 1}}), kF16);
}

TEST(OpsConv, Conv1DThroughIm2Col) {
    std::mt19937  rng(109);
    Context       ctx;
    ggml_tensor * a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 5, 3, 4); // [K, IC, OC]
    ggml_tensor * b = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 17, 3, 2); // [L, IC, N]
    const Array   A = fill_random(a, rng);
    const Array   B = rounded(fill_random(b, rng), GGML_TYPE_F16);
    // As a 2D convolution of one-row images: kernel [K, 1, IC, OC], image [L, 1, IC, N]. As
    // ggml builds it, the product's [OL, N, OC] values are reshaped to [OL, OC, N] unpermuted.
    auto want = [&](int64_t s, int64_t p, int64_t d) {
        const Array r = conv2d(ref::reshape(A, {5, 1, 3, 4}), ref::reshape(B, {17, 1, 3, 2}),
                               Conv{{s, 1, 1}, {p, 0, 0}, {d, 1, 1}});
        const Array per_batch = ref::permute(ref::reshape(r, {r.ne[0], 4, 2, 1}), {0, 2, 1, 3}); // [OL, N, OC]
        return ref::reshape(per_batch, {r.ne[0], 4, 2, 1});
    };
    check_modes(ctx, ggml_conv_1d(ctx, a, b, 2, 1, 1), want(2, 1, 1), kF16);
    check_modes(ctx, ggml_conv_1d(ctx, a, b, 1, 0, 3), want(1, 0, 3), kF16);
    check_modes(ctx, ggml_conv_1d_ph(ctx, a, b, 1, 2), want(1, 2, 2), kF16);
}

TEST(OpsConv, DepthwiseThroughIm2Col) {
    std::mt19937 rng(113);
    {
        Context       ctx;
        ggml_tensor * a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 3, 1, 5); // [K, 1, C]
        ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 14, 5);   // [L, C]
        const Array   A = fill_random(a, rng);
        const Array   B = rounded(fill_random(b, rng), GGML_TYPE_F16);
        auto          want = [&](int64_t s, int64_t p, int64_t d) {
            const Array r = conv2d_dw(ref::reshape(A, {3, 1, 1, 5}), ref::reshape(B, {14, 1, 5, 1}),
                                               Conv{{s, 1, 1}, {p, 0, 0}, {d, 1, 1}});
            return ref::reshape(r, {r.ne[0], 5, 1, 1});
        };
        check_modes(ctx, ggml_conv_1d_dw(ctx, a, b, 2, 1, 1), want(2, 1, 1), kF16);
        check_modes(ctx, ggml_conv_1d_dw_ph(ctx, a, b, 1, 2), want(1, 1, 2), kF16);
    }
    {
        // With a bf16 kernel the patches are f32 and the kernel is the product's weights.
        Context       ctx;
        ggml_tensor * a = ggml_new_tensor_4d(ctx, GGML_TYPE_BF16, 3, 2, 1, 4);
        ggml_tensor * b = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 9, 7, 4, 2);
        const Array   A = fill_random(a, rng);
        const Array   B = rounded(fill_random(b, rng), GGML_TYPE_BF16);
        const Conv    c{{2, 1, 1}, {1, 1, 0}, {1, 2, 1}};
        check_modes(ctx, ggml_conv_2d_dw(ctx, a, b, 2, 1, 1, 1, 1, 2), conv2d_dw(A, B, c), 1e-5);
    }
}

TEST(OpsConv, Conv3DAndIm2Col3D) {
    std::mt19937  rng(127);
    Context       ctx;
    const int64_t IC = 2, OC = 3, N = 2;
    ggml_tensor * a = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 3, 2, 2, IC * OC);
    ggml_tensor * b = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 7, 6, 5, IC * N);
    const Array   A = fill_random(a, rng);
    const Array   B = fill_random(b, rng);
    const Conv    c{{2, 1, 2}, {1, 0, 1}, {1, 2, 1}};
    const int64_t k[3] = {3, 2, 2};
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        check_modes(ctx, ggml_im2col_3d(ctx, a, b, IC, 2, 1, 2, 1, 0, 1, 1, 2, 1, t), rounded(im2col3d(B, k, IC, c), t),
                    kExact, 0.0);
    }
    // im2col_3d reads only the kernel's sizes: a kernel whose dim 3 the
    // channels do not divide is accepted, as in ggml (its tests use one);
    // an image of more channels than dim 3 holds gives an empty result.
    ggml_tensor * a1 = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 3, 2, 2, 1);
    check_modes(ctx, ggml_im2col_3d(ctx, a1, b, IC, 2, 1, 2, 1, 0, 1, 1, 2, 1, GGML_TYPE_F32), im2col3d(B, k, IC, c),
                kExact, 0.0);
    ggml_tensor * none = ggml_im2col_3d(ctx, a1, b, 5, 2, 1, 2, 1, 0, 1, 1, 2, 1, GGML_TYPE_F32);
    EXPECT_EQ(ggml_nelements(none), 0);
    EXPECT_EQ(compute(ctx, none, 2), GGML_STATUS_SUCCESS);
    // Channels past the last whole batch are not read: 5 channels of IC 2
    // are two batches, the same as the first 4 channels alone.
    ggml_tensor * b5  = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 7, 6, 5, 5);
    fill_random(b5, rng);
    ggml_tensor * b4  = ggml_view_4d(ctx, b5, 7, 6, 5, 4, b5->nb[1], b5->nb[2], b5->nb[3], 0);
    ggml_tensor * odd = ggml_im2col_3d(ctx, a, b5, IC, 2, 1, 2, 1, 0, 1, 1, 2, 1, GGML_TYPE_F32);
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ASSERT_NE(cpu, nullptr);
    EXPECT_TRUE(ggml_backend_supports_op(cpu, odd));
    EXPECT_TRUE(ggml_backend_supports_op(cpu, none));
    ggml_backend_free(cpu);
    check_modes(ctx, odd, im2col3d(read_tensor(b4), k, IC, c), kExact, 0.0);
    check_modes(ctx, ggml_conv_3d(ctx, a, b, IC, 2, 1, 2, 1, 0, 1, 1, 2, 1),
                conv3d(A, rounded(B, GGML_TYPE_F16), IC, c), kF16);
    check_modes(ctx, ggml_conv_3d_direct(ctx, a, b, 2, 1, 2, 1, 0, 1, 1, 2, 1, int(IC), int(N), int(OC)),
                conv3d(A, B, IC, c), kF32);
    ggml_tensor * a16 = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, 3, 2, 2, IC * OC);
    const Array   A16 = fill_random(a16, rng);
    check_modes(ctx, ggml_conv_3d_direct(ctx, a16, b, 1, 1, 1, 0, 1, 0, 1, 1, 1, int(IC), int(N), int(OC)),
                conv3d(A16, B, IC, Conv{{1, 1, 1}, {0, 1, 0}, {1, 1, 1}}), kF32);
}

// ---- direct convolutions ----

TEST(OpsConv, Conv2DDirect) {
    for (unsigned seed : seeds()) {
        std::mt19937 rng(seed);
        const Conv   c{{rand_int(rng, 1, 3), rand_int(rng, 1, 3), 1},
                       {rand_int(rng, 0, 2), rand_int(rng, 0, 2), 0},
                       {rand_int(rng, 1, 2), rand_int(rng, 1, 2), 1}};
        const Shape  ks = {odd_size(rng, 1, 3), rand_int(rng, 1, 3), rand_int(rng, 1, 5), rand_int(rng, 1, 9)};
        const Shape  is = {odd_size(rng, 7, 15), odd_size(rng, 6, 11), ks[2], rand_int(rng, 1, 2)};
        for (ggml_type kt : {GGML_TYPE_F32, GGML_TYPE_F16}) {
            for (ggml_type it : {GGML_TYPE_F32, GGML_TYPE_F16}) {
                SCOPED_TRACE(shape_str(ks) + " * " + shape_str(is) + " " + ggml_type_name(kt) + " " +
                             ggml_type_name(it));
                Context       ctx;
                ggml_tensor * a = new_tensor(ctx, kt, ks);
                ggml_tensor * b = new_tensor(ctx, it, is);
                const Array   A = fill_random(a, rng);
                const Array   B = fill_random(b, rng);
                ggml_tensor * r = ggml_conv_2d_direct(ctx, a, b, int(c.s[0]), int(c.s[1]), int(c.p[0]), int(c.p[1]),
                                                      int(c.d[0]), int(c.d[1]));
                ASSERT_EQ(r->type, it);
                check_modes(ctx, r, rounded(conv2d(A, B, c), it), it == GGML_TYPE_F32 ? kF32 : kF16);
            }
        }
    }
}

TEST(OpsConv, Conv2DDirectPermutedImage) {
    std::mt19937  rng(131);
    Context       ctx;
    ggml_tensor * a    = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 3, 3, 4, 6);
    const Array   A    = fill_random(a, rng);
    ggml_tensor * base = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 4, 11, 9, 2); // [C, W, H, N]
    fill_random(base, rng);
    ggml_tensor * b = ggml_permute(ctx, base, 2, 0, 1, 3); // [W, H, C, N], channels innermost in memory
    const Array   B = read_tensor(b);
    const Conv    c{{2, 1, 1}, {1, 1, 0}, {1, 1, 1}};
    check_modes(ctx, ggml_conv_2d_direct(ctx, a, b, 2, 1, 1, 1, 1, 1), conv2d(A, B, c), kF32);
}

TEST(OpsConv, Conv2DDepthwiseDirect) {
    std::mt19937 rng(137);
    const Conv   c{{2, 1, 1}, {1, 2, 0}, {1, 2, 1}};
    for (ggml_type kt : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        SCOPED_TRACE(ggml_type_name(kt));
        Context       ctx;
        ggml_tensor * a = ggml_new_tensor_4d(ctx, kt, 3, 3, 1, 5);
        const Array   A = fill_random(a, rng);
        ggml_tensor * b = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 12, 9, 5, 2);
        const Array   B = fill_random(b, rng);
        check_modes(ctx, ggml_conv_2d_dw_direct(ctx, a, b, 2, 1, 1, 2, 1, 2), conv2d_dw(A, B, c), kF32);

        // Channels innermost: the result takes the same layout.
        ggml_tensor * base = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 5, 12, 9, 2);
        fill_random(base, rng);
        ggml_tensor * cwhn = ggml_permute(ctx, base, 2, 0, 1, 3);
        ASSERT_TRUE(ggml_is_contiguous_channels(cwhn));
        ggml_tensor * r = ggml_conv_2d_dw_direct(ctx, a, cwhn, 2, 1, 1, 2, 1, 2);
        EXPECT_EQ(r->nb[2], sizeof(float));
        EXPECT_EQ(r->nb[0], 5 * sizeof(float));
        check_modes(ctx, r, conv2d_dw(A, read_tensor(cwhn), c), kF32);
    }
}

TEST(OpsConv, ConvTranspose) {
    std::mt19937 rng(139);
    for (ggml_type kt : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        SCOPED_TRACE(ggml_type_name(kt));
        Context ctx;
        for (int s : {1, 2, 3}) {
            // 1D: kernel [K, OC, IC], signal [L, IC] -> [(L-1)s + K, OC].
            ggml_tensor * a = ggml_new_tensor_3d(ctx, kt, 4, 3, 5);
            ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 9, 5);
            const Array   A = fill_random(a, rng);
            const Array   B = fill_random(b, rng);
            const Array   r = conv_transpose2d(ref::reshape(A, {4, 1, 3, 5}), ref::reshape(B, {9, 1, 5, 1}), s);
            check_modes(ctx, ggml_conv_transpose_1d(ctx, a, b, s, 0, 1), ref::reshape(r, {r.ne[0], 3, 1, 1}), kF32);

            ggml_tensor * a2 = ggml_new_tensor_4d(ctx, kt, 3, 2, 4, 3); // [KW, KH, OC, IC]
            ggml_tensor * b2 = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 5, 7, 3, 2);
            const Array   A2 = fill_random(a2, rng);
            const Array   B2 = fill_random(b2, rng);
            check_modes(ctx, ggml_conv_transpose_2d_p0(ctx, a2, b2, s), conv_transpose2d(A2, B2, s), kF32);
        }
    }
}

TEST(OpsConv, Col2Im1D) {
    std::mt19937 rng(149);
    struct Case {
        int64_t K, OC, T;
        int     s, p;
    };
    for (const Case & c : {Case{4, 3, 7, 2, 1}, Case{5, 1, 9, 3, 0}, Case{3, 2, 5, 1, 1}}) {
        for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16}) {
            Context       ctx;
            ggml_tensor * a = ggml_new_tensor_2d(ctx, t, c.K * c.OC, c.T);
            const Array   A = fill_random(a, rng);
            const int64_t T = (c.T - 1) * c.s + c.K - 2 * c.p;
            Array         want({T, c.OC, 1, 1});
            for (int64_t j = 0; j < c.T; ++j) {
                for (int64_t oc = 0; oc < c.OC; ++oc) {
                    for (int64_t k = 0; k < c.K; ++k) {
                        const int64_t pos = j * c.s + k - c.p;
                        if (pos >= 0 && pos < T) {
                            want(pos, oc) += A(oc * c.K + k, j);
                        }
                    }
                }
            }
            check_modes(ctx, ggml_col2im_1d(ctx, a, c.s, int(c.OC), c.p), rounded(want, t),
                        t == GGML_TYPE_F32 ? kF32 : 1e-4);
        }
    }
}

// ---- pooling and resampling ----

TEST(OpsPool, Pool1D) {
    std::mt19937 rng(151);
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        Context       ctx;
        ggml_tensor * a = ggml_new_tensor_3d(ctx, t, 17, 3, 2);
        const Array   A = fill_random(a, rng, -3.0, 1.0);
        for (ggml_op_pool op : {GGML_OP_POOL_MAX, GGML_OP_POOL_AVG}) {
            for (int k : {1, 3, 4}) {
                for (int s : {1, 2, 3}) {
                    for (int p : {0, 1, 2}) {
                        if (p > k / 2 + 1) {
                            continue;
                        }
                        SCOPED_TRACE(std::to_string(k) + " " + std::to_string(s) + " " + std::to_string(p));
                        ggml_tensor * r = ggml_pool_1d(ctx, a, op, k, s, p);
                        ASSERT_EQ(r->ne[0], (17 + 2 * p - k) / s + 1);
                        check_modes(ctx, r, pool(A, op == GGML_OP_POOL_AVG, k, 1, s, 1, p, 0, r->ne[0], 0, false),
                                    1e-12);
                    }
                }
            }
        }
    }
}

TEST(OpsPool, Pool2D) {
    std::mt19937 rng(157);
    struct Case {
        int   k0, k1, s0, s1;
        float p0, p1;
    };
    for (const Case & c : {Case{2, 2, 2, 2, 0, 0}, Case{3, 3, 1, 1, 1, 1}, Case{3, 2, 2, 1, 1.5f, 0.5f},
                           Case{1, 4, 1, 3, 0, 2}}) {
        Context       ctx;
        ggml_tensor * base = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 11, 10, 3, 2);
        fill_random(base, rng, -2.0, 2.0);
        // A view skipping the first column: rows are not contiguous.
        ggml_tensor * a = ggml_view_4d(ctx, base, 10, 9, 3, 2, base->nb[1], base->nb[2], base->nb[3], sizeof(float));
        const Array   A = read_tensor(a);
        for (ggml_op_pool op : {GGML_OP_POOL_MAX, GGML_OP_POOL_AVG}) {
            ggml_tensor * r = ggml_pool_2d(ctx, a, op, c.k0, c.k1, c.s0, c.s1, c.p0, c.p1);
            // The size uses the fractional padding, the windows its integer part.
            EXPECT_EQ(r->ne[0], int64_t((10 + 2 * c.p0 - c.k0) / c.s0 + 1));
            check_modes(ctx, r,
                        pool(A, op == GGML_OP_POOL_AVG, c.k0, c.k1, c.s0, c.s1, int64_t(c.p0), int64_t(c.p1), r->ne[0],
                             r->ne[1], true),
                        1e-12);
        }
    }
}

TEST(OpsPool, Interpolate) {
    std::mt19937 rng(163);
    const Shape  in = {5, 4, 3, 2};
    const Shape  outs[] = {{10, 8, 3, 2}, {13, 7, 3, 2}, {3, 3, 3, 2}, {2, 1, 2, 1}, {1, 9, 5, 3}, {7, 3, 6, 4}};
    const uint32_t modes[] = {
        GGML_SCALE_MODE_NEAREST,
        GGML_SCALE_MODE_BILINEAR,
        GGML_SCALE_MODE_BICUBIC,
        uint32_t(GGML_SCALE_MODE_NEAREST) | GGML_SCALE_FLAG_ALIGN_CORNERS,
        uint32_t(GGML_SCALE_MODE_BILINEAR) | GGML_SCALE_FLAG_ALIGN_CORNERS,
        uint32_t(GGML_SCALE_MODE_BICUBIC) | GGML_SCALE_FLAG_ALIGN_CORNERS,
        uint32_t(GGML_SCALE_MODE_BILINEAR) | GGML_SCALE_FLAG_ANTIALIAS,
    };
    for (const Shape & out : outs) {
        for (uint32_t mode : modes) {
            SCOPED_TRACE(shape_str(out) + " mode " + std::to_string(mode));
            Context       ctx;
            ggml_tensor * a = new_tensor(ctx, GGML_TYPE_F32, in);
            const Array   A = fill_random(a, rng);
            check_modes(ctx, ggml_interpolate(ctx, a, out[0], out[1], out[2], out[3], mode), interpolate(A, out, mode),
                        kF32);
        }
    }
    Context       ctx;
    ggml_tensor * base = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 6, 5, 3);
    fill_random(base, rng);
    ggml_tensor * a = ggml_transpose(ctx, base); // [5, 6, 3], non-contiguous
    const Array   A = read_tensor(a);
    check_modes(ctx, ggml_upscale(ctx, a, 2, GGML_SCALE_MODE_BILINEAR), interpolate(A, {10, 12, 3, 1}, 1), kF32);
    check_modes(ctx, ggml_upscale(ctx, a, 3, GGML_SCALE_MODE_NEAREST), interpolate(A, {15, 18, 3, 1}, 0), kF32);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    ggml_tensor * e = ggml_upscale_ext(ctx, a, 4, 9, 2, 1, GGML_SCALE_MODE_BICUBIC);
#pragma GCC diagnostic pop
    EXPECT_EQ(e->op_params[0], GGML_SCALE_MODE_BICUBIC);
    check_modes(ctx, e, interpolate(A, {4, 9, 2, 1}, 2), kF32);
}

// ---- SAM's window and relative-position operators ----

TEST(OpsSam, WinPartAndUnpart) {
    std::mt19937 rng(167);
    for (int w : {3, 4, 7}) {
        SCOPED_TRACE(w);
        Context       ctx;
        ggml_tensor * a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 5, 10, 8); // [C, W, H]
        const Array   A = fill_random(a, rng);
        ggml_tensor * p = ggml_win_part(ctx, a, w);
        const int64_t npx = (10 + w - 1) / w, npy = (8 + w - 1) / w;
        ASSERT_EQ(p->ne[3], npx * npy);
        Array want({5, w, w, npx * npy});
        for (int64_t i3 = 0; i3 < want.ne[3]; ++i3) {
            for (int64_t i2 = 0; i2 < w; ++i2) {
                for (int64_t i1 = 0; i1 < w; ++i1) {
                    const int64_t x = (i3 % npx) * w + i1, y = (i3 / npx) * w + i2;
                    for (int64_t c = 0; c < 5; ++c) {
                        want(c, i1, i2, i3) = x < 10 && y < 8 ? A(c, x, y) : 0.0;
                    }
                }
            }
        }
        check_modes(ctx, p, want, kExact, 0.0);
        // Unpartitioning the windows gives the image back.
        ggml_tensor * u = ggml_win_unpart(ctx, p, 10, 8, w);
        check_modes(ctx, u, A, kExact, 0.0);
    }
}

TEST(OpsSam, RelPos) {
    std::mt19937 rng(173);
    Context      ctx;
    for (ggml_type t : {GGML_TYPE_F16, GGML_TYPE_F32}) {
        ggml_tensor * a = ggml_new_tensor_2d(ctx, t, 6, 9); // [C, 2*5 - 1]
        const Array   A = fill_random(a, rng);
        Array         want({6, 5, 5, 1});
        for (int64_t q = 0; q < 5; ++q) {
            for (int64_t k = 0; k < 5; ++k) {
                for (int64_t c = 0; c < 6; ++c) {
                    want(c, k, q) = round_to_f16(A(c, 5 - 1 - k + q));
                }
            }
        }
        ggml_tensor * r = ggml_get_rel_pos(ctx, a, 5, 5);
        ASSERT_EQ(r->type, GGML_TYPE_F16);
        check_modes(ctx, r, want, kExact, 0.0);
    }

    // a [K*K, q1*q2, B, 2], pw and ph [K, q1, q2, B]; the second half of a (dim 3) is copied.
    const int64_t K = 3, q1 = 4, q2 = 2, B = 3;
    ggml_tensor * a  = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, K * K, q1 * q2, B, 2);
    ggml_tensor * pw = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, K, q1, q2, B);
    ggml_tensor * ph = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, K, q1, q2, B);
    const Array   A  = fill_random(a, rng);
    const Array   W  = fill_random(pw, rng);
    const Array   H  = fill_random(ph, rng);
    Array         want = A;
    for (int64_t b = 0; b < B; ++b) {
        for (int64_t q = 0; q < q1 * q2; ++q) {
            for (int64_t k = 0; k < K * K; ++k) {
                want(k, q, b, 0) += H(k / K, q % q1, q / q1, b) + W(k % K, q % q1, q / q1, b);
            }
        }
    }
    check_modes(ctx, ggml_add_rel_pos(ctx, a, pw, ph), want, kF32);
    ggml_tensor * in = ggml_add_rel_pos_inplace(ctx, a, pw, ph);
    ASSERT_EQ(in->data, a->data);
    ASSERT_EQ(compute(ctx, in, 2), GGML_STATUS_SUCCESS);
    EXPECT_TRUE(matches(a, want, kF32));
}

// ---- op_params as ggml lays them out ----

TEST(OpsConv, OpParams) {
    Context       ctx;
    ggml_tensor * a = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 3, 3, 2, 4);
    ggml_tensor * b = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 9, 8, 2, 1);
    ggml_tensor * r = ggml_im2col(ctx, a, b, 1, 2, 3, 4, 1, 2, true, GGML_TYPE_F16);
    EXPECT_EQ(r->op, GGML_OP_IM2COL);
    const int32_t im2col_params[7] = {1, 2, 3, 4, 1, 2, 1};
    for (int i = 0; i < 7; ++i) {
        EXPECT_EQ(r->op_params[i], im2col_params[i]);
    }
    ggml_tensor * p = ggml_pool_2d(ctx, b, GGML_OP_POOL_AVG, 2, 3, 1, 2, 1.5f, 0.5f);
    const int32_t pool_params[7] = {GGML_OP_POOL_AVG, 2, 3, 1, 2, 1, 0};
    for (int i = 0; i < 7; ++i) {
        EXPECT_EQ(p->op_params[i], pool_params[i]);
    }
    ggml_tensor * u = ggml_interpolate(ctx, b, 4, 4, 2, 1, uint32_t(GGML_SCALE_MODE_BICUBIC) | GGML_SCALE_FLAG_ALIGN_CORNERS);
    EXPECT_EQ(u->op_params[0], 2 | 256);
    ggml_tensor * w = ggml_win_part(ctx, ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 4, 10, 7), 4);
    EXPECT_EQ(w->op_params[0], 3);
    EXPECT_EQ(w->op_params[1], 2);
    EXPECT_EQ(w->op_params[2], 4);
    ggml_tensor * c3 = ggml_conv_3d_direct(ctx, ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 2, 2, 2, 6),
                                           ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 5, 5, 5, 4), 1, 1, 1, 0, 0, 0, 1, 1,
                                           1, 2, 2, 3);
    EXPECT_EQ(c3->op_params[9], 2);
    EXPECT_EQ(c3->op_params[10], 2);
    EXPECT_EQ(c3->op_params[11], 3);
    EXPECT_EQ(c3->ne[3], 6);
}

// ---- broken preconditions ----

TEST(OpsConvDeath, Preconditions) {
    Context       ctx;
    ggml_tensor * k = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 3, 3, 2, 4);
    ggml_tensor * x = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 9, 8, 3, 1);
    ggml_tensor * s = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 2, 2, 2, 1);
    EXPECT_DEATH(ggml_im2col(ctx, k, x, 1, 1, 0, 0, 1, 1, true, GGML_TYPE_F32), "ggml_im2col.*channels");
    EXPECT_DEATH(ggml_im2col(ctx, k, s, 1, 1, 0, 0, 1, 1, true, GGML_TYPE_F32), "ggml_im2col.*too small");
    EXPECT_DEATH(ggml_im2col(ctx, k, k, 0, 1, 0, 0, 1, 1, true, GGML_TYPE_F32), "ggml_im2col.*stride 0");
    EXPECT_DEATH(ggml_im2col(ctx, k, k, 1, 1, 0, 0, 1, 1, true, GGML_TYPE_Q8_0), "ggml_im2col.*q8_0");
    EXPECT_DEATH(ggml_conv_2d_direct(ctx, k, x, 1, 1, 0, 0, 1, 1), "ggml_conv_2d_direct.*channels");
    EXPECT_DEATH(ggml_conv_2d_dw_direct(ctx, k, x, 1, 1, 0, 0, 1, 1), "ggml_conv_2d_dw_direct");
    EXPECT_DEATH(ggml_conv_transpose_1d(ctx, ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 3, 2, 4),
                                        ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 9, 4), 1, 1, 1),
                 "ggml_conv_transpose_1d.*padding 1");
    EXPECT_DEATH(ggml_conv_transpose_2d_p0(ctx, k, x, 1), "ggml_conv_transpose_2d_p0");
    EXPECT_DEATH(ggml_conv_3d_direct(ctx, k, x, 1, 1, 1, 0, 0, 0, 1, 1, 1, 2, 1, 3), "ggml_conv_3d_direct");
    EXPECT_DEATH(ggml_im2col_3d(ctx, k, x, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1, GGML_TYPE_F32), "ggml_im2col_3d.*0 channels");
    EXPECT_DEATH(ggml_conv_3d(ctx, k, ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 9, 8, 3, 3), 3, 1, 1, 1, 0, 0, 0, 1, 1, 1),
                 "ggml_conv_3d.*3 channels do not divide dim 3 of kernel");
    EXPECT_DEATH(ggml_conv_3d(ctx, ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 3, 3, 2, 6), x, 3, 1, 1, 1, 0, 0, 0, 1, 1, 1),
                 "ggml_conv_3d.*3 channels do not divide");
    EXPECT_DEATH(ggml_col2im_1d(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 7, 3), 1, 2, 0), "ggml_col2im_1d");
    EXPECT_DEATH(ggml_pool_1d(ctx, x, GGML_OP_POOL_COUNT, 2, 1, 0), "ggml_pool_1d.*pool op 2");
    EXPECT_DEATH(ggml_pool_2d(ctx, x, GGML_OP_POOL_MAX, 20, 2, 1, 1, 0, 0), "ggml_pool_2d.*too small");
    EXPECT_DEATH(ggml_upscale(ctx, x, 1, GGML_SCALE_MODE_NEAREST), "ggml_upscale.*scale factor 1");
    EXPECT_DEATH(ggml_interpolate(ctx, x, 4, 4, 3, 1, uint32_t(GGML_SCALE_MODE_BICUBIC) | GGML_SCALE_FLAG_ANTIALIAS),
                 "ggml_interpolate.*antialias");
    EXPECT_DEATH(ggml_interpolate(ctx, x, 4, 4, 3, 1, 7), "ggml_interpolate.*scale mode 7");
    EXPECT_DEATH(ggml_interpolate(ctx, ggml_new_tensor_1d(ctx, GGML_TYPE_F16, 4), 8, 1, 1, 1, 0),
                 "ggml_interpolate.*f32");
    EXPECT_DEATH(ggml_win_part(ctx, x, 0), "ggml_win_part.*window size 0");
    EXPECT_DEATH(ggml_get_rel_pos(ctx, ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 4, 8), 4, 4), "ggml_get_rel_pos");
    EXPECT_DEATH(ggml_add_rel_pos(ctx, x, s, s), "ggml_add_rel_pos");
}

// ---- against ggml 0.25.1's own results (tests/data/ops-conv/README.md) ----

TEST(OpsConvGgml, SameResultsAsGgml) {
    std::string why;
    auto        want = read_named_values(std::string(LOOM_TEST_DATA) + "/ops-conv/ggml-0.25.1.txt", &why);
    ASSERT_FALSE(want.empty()) << why;
    ASSERT_EQ(want.size(), conv_ggml_cases::cases().size());
    for (const conv_ggml_cases::Case & c : conv_ggml_cases::cases()) {
        SCOPED_TRACE(c.name);
        ASSERT_EQ(want.count(c.name), 1u);
        Context       ctx;
        ggml_tensor * out = c.build(ctx);
        ASSERT_TRUE(ggml_is_contiguous(out));
        // The im2col products multiply f16 patches; ggml rounds the kernel to f16 as well.
        const bool product = std::string(c.name) == "conv_1d" || std::string(c.name) == "conv_2d";
        for (const RunMode & mode : run_modes()) {
            SCOPED_TRACE(describe(mode));
            ASSERT_EQ(compute(ctx, out, mode), GGML_STATUS_SUCCESS);
            const std::vector<float> got = conv_ggml_cases::values(out);
            ASSERT_EQ(got.size(), want[c.name].size());
            Array g({int64_t(got.size()), 1, 1, 1}), w({int64_t(got.size()), 1, 1, 1});
            for (size_t i = 0; i < got.size(); ++i) {
                g.v[i] = got[i];
                w.v[i] = want[c.name][i];
            }
            EXPECT_TRUE(matches(g, w, product ? 1e-5 : 1e-10));
        }
    }
}
