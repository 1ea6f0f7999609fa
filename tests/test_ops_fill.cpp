// Element-wise functions with parameters, fills, masks, running sums and the
// ops that write into part of a tensor or move its elements, against naive
// double-precision references written here from each op's definition.
//
// Thresholds (NMSE unless stated):
//   clamp, leaky_relu, fill, tri, diag, masks, set, roll, pad    exact (f16: the rounding of the result)
//   cumsum, l2_norm, acc, repeat_back, add_id                    1e-10  float sums
//   arange                                                       exact within 1e-6 of start + i step
//   timestep_embedding                                           1e-9   float angles up to 50 rad

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <vector>

#include "log_capture.h"
#include "test_util.h"

using namespace loomtest;

namespace {

constexpr double kExact = 0.0;
constexpr double kSum   = 1e-10;

ggml_tensor * new_tensor(ggml_context * ctx, ggml_type type, const Shape & ne) {
    return ggml_new_tensor_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]);
}

template <typename F> Array map(const Array & a, F f) {
    Array r(a.ne);
    for (size_t i = 0; i < a.v.size(); ++i) {
        r.v[i] = f(a.v[i]);
    }
    return r;
}

// Calls f(i0, i1, i2, i3) for every index of shape ne.
template <typename F> void each(const Shape & ne, F f) {
    for (int64_t i3 = 0; i3 < ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < ne[1]; ++i1) {
                for (int64_t i0 = 0; i0 < ne[0]; ++i0) {
                    f(i0, i1, i2, i3);
                }
            }
        }
    }
}

int64_t mod(int64_t i, int64_t n) {
    return ((i % n) + n) % n;
}

// A permuted view of a fresh tensor: [ne0, ne1, ne2, ne3] with dimensions 1
// and 2 swapped in memory, filled with random values.
ggml_tensor * permuted_input(ggml_context * ctx, ggml_type type, const Shape & ne, std::mt19937 & rng,
                             double lo = -1.0, double hi = 1.0) {
    ggml_tensor * base = ggml_new_tensor_4d(ctx, type, ne[0], ne[2], ne[1], ne[3]);
    fill_random(base, rng, lo, hi);
    return ggml_permute(ctx, base, 0, 2, 1, 3);
}

} // namespace

TEST(OpsFill, ClampAndLeakyRelu) {
    for (unsigned seed : seeds()) {
        std::mt19937 rng(seed);
        const Shape  s = {odd_size(rng, 1, 67), odd_size(rng, 1, 7), rand_int(rng, 1, 3), rand_int(rng, 1, 2)};
        SCOPED_TRACE(shape_str(s));
        for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) {
            Context       ctx;
            ggml_tensor * a  = new_tensor(ctx, t, s);
            const Array   A  = fill_random(a, rng, -3.0, 3.0);
            ggml_tensor * ap = permuted_input(ctx, t, s, rng, -3.0, 3.0);
            const Array   AP = read_tensor(ap);
            const float   lo = -0.75f, hi = 1.5f, slope = 0.1f;
            auto          clamp = [&](double x) { return round_to_type(t, std::min(std::max(x, double(lo)), double(hi))); };
            auto leaky = [&](double x) { return round_to_type(t, x > 0 ? x : double(float(double(slope) * x))); };
            check_modes(ctx, ggml_clamp(ctx, a, lo, hi), map(A, clamp), kExact);
            check_modes(ctx, ggml_clamp(ctx, ap, lo, hi), map(AP, clamp), kExact);
            // f32: slope * x in float, as ggml; f16 results are that rounded to f16.
            check_modes(ctx, ggml_leaky_relu(ctx, a, slope, false), map(A, leaky), kExact);
            check_modes(ctx, ggml_leaky_relu(ctx, ap, slope, false), map(AP, leaky), kExact);
        }
    }
}

TEST(OpsFill, ClampNanAndInplace) {
    Context       ctx;
    ggml_tensor * a      = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 5);
    const float   v[5]   = {NAN, -INFINITY, INFINITY, 0.25f, -2.0f};
    std::memcpy(a->data, v, sizeof(v));
    ggml_tensor * out = ggml_clamp_inplace(ctx, a, -1.0f, 1.0f);
    ASSERT_EQ(out->data, a->data);
    ASSERT_EQ(compute(ctx, out, 2), GGML_STATUS_SUCCESS);
    const float * r = static_cast<const float *>(a->data);
    EXPECT_EQ(r[0], 1.0f); // a NaN becomes max, as in ggml
    EXPECT_EQ(r[1], -1.0f);
    EXPECT_EQ(r[2], 1.0f);
    EXPECT_EQ(r[3], 0.25f);
    EXPECT_EQ(r[4], -1.0f);

    ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3);
    const float   w[3] = {-2.0f, 0.0f, 3.0f};
    std::memcpy(b->data, w, sizeof(w));
    ggml_tensor * lr = ggml_leaky_relu(ctx, b, 0.5f, true);
    ASSERT_EQ(lr->data, b->data);
    ASSERT_EQ(compute(ctx, lr, 1), GGML_STATUS_SUCCESS);
    EXPECT_EQ(static_cast<const float *>(b->data)[0], -1.0f);
    EXPECT_EQ(static_cast<const float *>(b->data)[2], 3.0f);
    EXPECT_EQ(lr->op_params[0], [] {
        const float f = 0.5f;
        int32_t     i;
        std::memcpy(&i, &f, sizeof(i));
        return i;
    }());
}

TEST(OpsFill, FillAndArange) {
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        Context       ctx;
        std::mt19937  rng(5);
        ggml_tensor * a = ggml_new_tensor_3d(ctx, t, 13, 5, 3);
        fill_random(a, rng);
        check_modes(ctx, ggml_fill(ctx, a, 0.3f), Array(shape_of(a), round_to_type(t, 0.3f)), kExact);
        ggml_tensor * in = ggml_fill_inplace(ctx, a, -2.5f);
        ASSERT_EQ(in->data, a->data);
        ASSERT_EQ(compute(ctx, in, 2), GGML_STATUS_SUCCESS);
        EXPECT_TRUE(matches(a, Array(shape_of(a), -2.5), kExact));
    }
    struct Case {
        float start, stop, step;
        int64_t n;
    };
    const Case cases[] = {{0.0f, 10.0f, 1.0f, 10}, {-3.0f, 2.0f, 0.7f, 8}, {1.5f, 1.75f, 1.0f, 1}, {0.0f, 1000.0f, 0.37f, 2703}};
    for (const Case & c : cases) {
        Context       ctx;
        ggml_tensor * r = ggml_arange(ctx, c.start, c.stop, c.step);
        ASSERT_EQ(r->ne[0], c.n);
        Array want({c.n, 1, 1, 1});
        for (int64_t i = 0; i < c.n; ++i) {
            want(i) = double(c.start) + double(c.step) * double(i);
        }
        check_modes(ctx, r, want, 1e-12, 1e-6 * (1.0 + std::fabs(double(c.stop))));
    }
}

TEST(OpsFill, TriAndDiag) {
    std::mt19937 rng(11);
    const Shape  shapes[] = {{7, 7, 3, 2}, {1, 1, 1, 1}, {33, 33, 1, 1}};
    for (const Shape & s : shapes) {
        SCOPED_TRACE(shape_str(s));
        Context       ctx;
        ggml_tensor * a = new_tensor(ctx, GGML_TYPE_F32, s);
        const Array   A = fill_random(a, rng);
        for (int type = 0; type < 4; ++type) {
            Array want = A;
            each(s, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                const bool keep = type == GGML_TRI_TYPE_UPPER_DIAG ? i0 >= i1
                                  : type == GGML_TRI_TYPE_UPPER    ? i0 > i1
                                  : type == GGML_TRI_TYPE_LOWER_DIAG ? i0 <= i1
                                                                     : i0 < i1;
                if (!keep) {
                    want(i0, i1, i2, i3) = 0.0;
                }
            });
            ggml_tensor * r = ggml_tri(ctx, a, ggml_tri_type(type));
            EXPECT_EQ(r->op_params[0], type);
            check_modes(ctx, r, want, kExact);
        }
    }
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        Context       ctx;
        ggml_tensor * base = ggml_new_tensor_4d(ctx, t, 9, 3, 1, 2);
        fill_random(base, rng);
        // A strided row: [9, 1, 3, 2] out of [9, 3, 1, 2].
        ggml_tensor * a = ggml_view_4d(ctx, base, 9, 1, 3, 2, base->nb[1] * 3, base->nb[1], base->nb[3], 0);
        const Array   A = read_tensor(a);
        Array         want({9, 9, 3, 2});
        each(want.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
            want(i0, i1, i2, i3) = i0 == i1 ? A(i0, 0, i2, i3) : 0.0;
        });
        check_modes(ctx, ggml_diag(ctx, a), want, kExact);
    }
}

TEST(OpsFill, Cumsum) {
    for (unsigned seed : seeds()) {
        std::mt19937 rng(seed);
        const Shape  s = {odd_size(rng, 1, 301), odd_size(rng, 1, 7), rand_int(rng, 1, 3), rand_int(rng, 1, 2)};
        SCOPED_TRACE(shape_str(s));
        Context       ctx;
        ggml_tensor * a  = new_tensor(ctx, GGML_TYPE_F32, s);
        ggml_tensor * ap = permuted_input(ctx, GGML_TYPE_F32, s, rng);
        for (ggml_tensor * in : {a, ap}) {
            const Array A = in == a ? fill_random(a, rng) : read_tensor(ap);
            Array       want(A.ne);
            each(s, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                want(i0, i1, i2, i3) = A(i0, i1, i2, i3) + (i0 > 0 ? want(i0 - 1, i1, i2, i3) : 0.0);
            });
            check_modes(ctx, ggml_cumsum(ctx, in), want, kSum);
        }
    }
}

TEST(OpsFill, CountEqual) {
    for (unsigned seed : seeds()) {
        std::mt19937 rng(seed);
        const Shape  s = {odd_size(rng, 1, 99), odd_size(rng, 1, 9), rand_int(rng, 1, 3), rand_int(rng, 1, 3)};
        SCOPED_TRACE(shape_str(s));
        Context       ctx;
        ggml_tensor * a = new_tensor(ctx, GGML_TYPE_I32, s);
        ggml_tensor * b = permuted_input(ctx, GGML_TYPE_I32, s, rng);
        Array         A = random_array(s, rng, 0.0, 4.0);
        for (double & x : A.v) {
            x = std::floor(x);
        }
        write_tensor(a, A);
        Array B = random_array(s, rng, 0.0, 4.0);
        for (double & x : B.v) {
            x = std::floor(x);
        }
        // Write B through the permuted view's base, element by element.
        each(s, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
            auto * p = reinterpret_cast<int32_t *>(static_cast<char *>(b->data) + i0 * b->nb[0] + i1 * b->nb[1] +
                                                   i2 * b->nb[2] + i3 * b->nb[3]);
            *p = int32_t(B(i0, i1, i2, i3));
        });
        int64_t n = 0;
        for (size_t i = 0; i < A.v.size(); ++i) {
            n += A.v[i] == B.v[i] ? 1 : 0;
        }
        ggml_tensor * r = ggml_count_equal(ctx, a, b);
        EXPECT_EQ(r->type, GGML_TYPE_I64);
        check_modes(ctx, r, Array({1, 1, 1, 1}, double(n)), kExact);
    }
}

TEST(OpsFill, L2Norm) {
    for (unsigned seed : seeds()) {
        std::mt19937 rng(seed);
        const Shape  s = {odd_size(rng, 1, 129), odd_size(rng, 1, 9), rand_int(rng, 1, 3), rand_int(rng, 1, 2)};
        SCOPED_TRACE(shape_str(s));
        Context       ctx;
        ggml_tensor * a  = new_tensor(ctx, GGML_TYPE_F32, s);
        const Array   A  = fill_random(a, rng, -1.0, 2.0);
        ggml_tensor * ap = permuted_input(ctx, GGML_TYPE_F32, s, rng);
        const Array   AP = read_tensor(ap);
        for (float eps : {1e-6f, 10.0f}) {
            for (ggml_tensor * in : {a, ap}) {
                const Array & X = in == a ? A : AP;
                Array         want(X.ne);
                for (int64_t r = 0; r < s[1] * s[2] * s[3]; ++r) {
                    double sum = 0.0;
                    for (int64_t i = 0; i < s[0]; ++i) {
                        sum += X.v[size_t(r * s[0] + i)] * X.v[size_t(r * s[0] + i)];
                    }
                    const double scale = 1.0 / std::max(std::sqrt(sum), double(eps));
                    for (int64_t i = 0; i < s[0]; ++i) {
                        want.v[size_t(r * s[0] + i)] = X.v[size_t(r * s[0] + i)] * scale;
                    }
                }
                check_modes(ctx, ggml_l2_norm(ctx, in, eps), want, kSum);
            }
        }
    }
}

TEST(OpsFill, DiagMaskZero) {
    std::mt19937 rng(13);
    for (int n_past : {0, 2, 40}) {
        Context       ctx;
        ggml_tensor * a = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 11, 7, 3, 2);
        const Array   A = fill_random(a, rng);
        Array         want = A;
        each(want.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
            if (i0 > n_past + i1) {
                want(i0, i1, i2, i3) = 0.0;
            }
        });
        check_modes(ctx, ggml_diag_mask_zero(ctx, a, n_past), want, kExact);
        ggml_tensor * in = ggml_diag_mask_zero_inplace(ctx, a, n_past);
        ASSERT_EQ(in->data, a->data);
        check_modes(ctx, in, want, kExact); // masking twice gives the same
    }
}

namespace {

// a with b's elements combined into the view (b's shape, strides es, nb1..3,
// offset in bytes) by f(old, new).
Array into_view(const Array & a, const Array & b, size_t es, size_t nb1, size_t nb2, size_t nb3, size_t offset,
                const std::function<double(double, double)> & f) {
    Array r = a;
    each(b.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        const size_t byte = offset + size_t(i0) * es + size_t(i1) * nb1 + size_t(i2) * nb2 + size_t(i3) * nb3;
        const size_t k    = byte / es;
        r.v[k]            = f(a.v[k], b(i0, i1, i2, i3));
    });
    return r;
}

} // namespace

TEST(OpsFill, AccAndSet) {
    std::mt19937  rng(17);
    Context       ctx;
    ggml_tensor * a  = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 10, 6, 3);
    const Array   A  = fill_random(a, rng);
    ggml_tensor * b  = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 4, 3, 2);
    const Array   B  = fill_random(b, rng);
    ggml_tensor * bp = permuted_input(ctx, GGML_TYPE_F32, {4, 3, 2, 1}, rng);
    const Array   BP = read_tensor(bp);
    auto          add = [](double x, double y) { return double(float(x) + float(y)); };
    auto          put = [](double, double y) { return y; };
    // Rows 1..3 of matrices 1..2, columns 5..8.
    const size_t off = a->nb[2] + a->nb[1] + 5 * sizeof(float);
    check_modes(ctx, ggml_acc(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], off),
                into_view(A, B, 4, a->nb[1], a->nb[2], a->nb[3], off, add), kSum);
    check_modes(ctx, ggml_acc(ctx, a, bp, a->nb[1], a->nb[2], a->nb[3], off),
                into_view(A, BP, 4, a->nb[1], a->nb[2], a->nb[3], off, add), kSum);
    check_modes(ctx, ggml_set(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], off),
                into_view(A, B, 4, a->nb[1], a->nb[2], a->nb[3], off, put), kExact);
    // Overlapping rows (stride of 2 elements for rows of 4): the last row written wins.
    check_modes(ctx, ggml_set(ctx, a, b, 2 * sizeof(float), a->nb[2], a->nb[3], 0),
                into_view(A, B, 4, 8, a->nb[2], a->nb[3], 0, put), kExact);
    // 1d and 2d forms.
    ggml_tensor * v  = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 17);
    const Array   V  = fill_random(v, rng);
    check_modes(ctx, ggml_set_1d(ctx, a, v, 3 * sizeof(float)), into_view(A, V, 4, 0, 0, 0, 12, put), kExact);
    ggml_tensor * m  = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 5);
    const Array   M  = fill_random(m, rng);
    check_modes(ctx, ggml_set_2d(ctx, a, m, 7 * sizeof(float), 4), into_view(A, M, 4, 28, 0, 0, 4, put), kExact);

    // I32 set.
    ggml_tensor * ai = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 5, 4);
    ggml_tensor * bi = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 2, 3);
    for (int i = 0; i < 20; ++i) static_cast<int32_t *>(ai->data)[i] = i;
    for (int i = 0; i < 6; ++i) static_cast<int32_t *>(bi->data)[i] = 100 + i;
    const Array AI = read_tensor(ai), BI = read_tensor(bi);
    check_modes(ctx, ggml_set_2d(ctx, ai, bi, ai->nb[1], 2 * sizeof(int32_t)),
                into_view(AI, BI, 4, ai->nb[1], 0, 0, 8, put), kExact);
}

TEST(OpsFill, AccAndSetInplace) {
    std::mt19937  rng(19);
    Context       ctx;
    ggml_tensor * a   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 9, 5);
    const Array   A   = fill_random(a, rng);
    ggml_tensor * b   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 4);
    const Array   B   = fill_random(b, rng);
    ggml_tensor * out = ggml_acc_inplace(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], sizeof(float));
    EXPECT_EQ(out->op_params[4], 1);
    ASSERT_EQ(out->data, a->data);
    ASSERT_EQ(compute(ctx, out, 3), GGML_STATUS_SUCCESS);
    const Array after_acc =
        into_view(A, B, 4, a->nb[1], a->nb[2], a->nb[3], 4, [](double x, double y) { return double(float(x) + float(y)); });
    EXPECT_TRUE(matches(a, after_acc, kSum));
    ggml_tensor * s = ggml_set_inplace(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], 0);
    ASSERT_EQ(compute(ctx, s, 2), GGML_STATUS_SUCCESS);
    EXPECT_TRUE(matches(a, into_view(after_acc, B, 4, a->nb[1], 0, 0, 0, [](double, double y) { return y; }), kExact));
    ggml_tensor * s1 = ggml_set_1d_inplace(ctx, a, b, 0);
    ggml_tensor * s2 = ggml_set_2d_inplace(ctx, a, b, a->nb[1], 0);
    EXPECT_EQ(s1->data, a->data);
    EXPECT_EQ(s2->data, a->data);
}

TEST(OpsFill, RepeatBack) {
    std::mt19937 rng(23);
    const std::pair<Shape, Shape> cases[] = {
        {{3, 2, 1, 1}, {6, 4, 3, 2}}, {{5, 1, 3, 1}, {5, 7, 3, 2}}, {{1, 1, 1, 1}, {7, 3, 2, 1}}, {{4, 3, 2, 2}, {4, 3, 2, 2}}};
    for (const auto & [small, big] : cases) {
        SCOPED_TRACE(shape_str(small) + " <- " + shape_str(big));
        Context       ctx;
        ggml_tensor * b = new_tensor(ctx, GGML_TYPE_F32, small);
        ggml_tensor * a = new_tensor(ctx, GGML_TYPE_F32, big);
        const Array   A = fill_random(a, rng);
        Array         want(small);
        each(big, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
            want(i0 % small[0], i1 % small[1], i2 % small[2], i3 % small[3]) += A(i0, i1, i2, i3);
        });
        check_modes(ctx, ggml_repeat_back(ctx, a, b), want, kSum);
        ggml_tensor * ap = permuted_input(ctx, GGML_TYPE_F32, big, rng);
        const Array   AP = read_tensor(ap);
        Array         want_p(small);
        each(big, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
            want_p(i0 % small[0], i1 % small[1], i2 % small[2], i3 % small[3]) += AP(i0, i1, i2, i3);
        });
        check_modes(ctx, ggml_repeat_back(ctx, ap, b), want_p, kSum);
    }
}

TEST(OpsFill, AddId) {
    std::mt19937  rng(29);
    Context       ctx;
    ggml_tensor * a   = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 13, 4, 5);
    const Array   A   = fill_random(a, rng);
    ggml_tensor * b   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 13, 6);
    const Array   B   = fill_random(b, rng);
    ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 4, 5);
    for (int i = 0; i < 20; ++i) {
        static_cast<int32_t *>(ids->data)[i] = int32_t(rng() % 6);
    }
    const Array I = read_tensor(ids);
    Array       want(A.ne);
    each(A.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        want(i0, i1, i2, i3) = double(float(A(i0, i1, i2, i3)) + float(B(i0, int64_t(I(i1, i2)))));
    });
    check_modes(ctx, ggml_add_id(ctx, a, b, ids), want, kExact);
    // An id outside b's rows: test_bad_indices.cpp.
}

TEST(OpsFill, Roll) {
    std::mt19937 rng(31);
    const int    shifts[][4] = {{0, 0, 0, 0}, {3, -1, 2, 0}, {-10, 4, -2, 1}, {1, 0, 0, -1}};
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        Context       ctx;
        const Shape   s  = {11, 5, 3, 2};
        ggml_tensor * a  = new_tensor(ctx, t, s);
        const Array   A  = fill_random(a, rng);
        ggml_tensor * ap = permuted_input(ctx, t, s, rng);
        const Array   AP = read_tensor(ap);
        for (const auto & sh : shifts) {
            for (ggml_tensor * in : {a, ap}) {
                const Array & X = in == a ? A : AP;
                Array         want(s);
                each(s, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                    want(mod(i0 + sh[0], s[0]), mod(i1 + sh[1], s[1]), mod(i2 + sh[2], s[2]), mod(i3 + sh[3], s[3])) =
                        X(i0, i1, i2, i3);
                });
                check_modes(ctx, ggml_roll(ctx, in, sh[0], sh[1], sh[2], sh[3]), want, kExact);
            }
        }
    }
}

TEST(OpsFill, Pad) {
    std::mt19937 rng(37);
    const int    pads[][8] = {{0, 3, 0, 1, 0, 2, 0, 1}, {2, 1, 1, 2, 0, 1, 1, 0}, {-1, 2, 1, -2, 0, 0, 0, 0},
                              {5, 0, 0, 4, 2, 0, 0, 0}};
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        for (bool circular : {false, true}) {
            Context       ctx;
            const Shape   s  = {4, 3, 2, 1};
            ggml_tensor * ap = permuted_input(ctx, t, s, rng);
            const Array   A  = read_tensor(ap);
            for (const auto & p : pads) {
                const Shape out = {s[0] + p[0] + p[1], s[1] + p[2] + p[3], s[2] + p[4] + p[5], s[3] + p[6] + p[7]};
                Array       want(out);
                each(out, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                    const int64_t j[4] = {i0 - p[0], i1 - p[2], i2 - p[4], i3 - p[6]};
                    bool          in   = true;
                    for (int d = 0; d < 4; ++d) {
                        in = in && j[d] >= 0 && j[d] < s[size_t(d)];
                    }
                    if (circular) {
                        want(i0, i1, i2, i3) = A(mod(j[0], s[0]), mod(j[1], s[1]), mod(j[2], s[2]), mod(j[3], s[3]));
                    } else {
                        want(i0, i1, i2, i3) = in ? A(j[0], j[1], j[2], j[3]) : 0.0;
                    }
                });
                ggml_tensor * r = circular ? ggml_pad_ext_circular(ctx, ap, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7])
                                           : ggml_pad_ext(ctx, ap, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]);
                EXPECT_EQ(r->op_params[8], circular ? 1 : 0);
                check_modes(ctx, r, want, kExact);
            }
            ggml_tensor * r = circular ? ggml_pad_circular(ctx, ap, 1, 2, 0, 1) : ggml_pad(ctx, ap, 1, 2, 0, 1);
            EXPECT_EQ(r->ne[0], 5);
            EXPECT_EQ(r->ne[1], 5);
            EXPECT_EQ(r->op_params[0], 0);
            EXPECT_EQ(r->op_params[1], 1);
        }
    }
}

TEST(OpsFill, PadReflect1d) {
    std::mt19937 rng(41);
    const std::pair<int, int> pads[] = {{0, 0}, {1, 2}, {6, 6}, {3, 0}};
    for (const auto & [p0, p1] : pads) {
        Context       ctx;
        ggml_tensor * a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 7, 3, 2);
        const Array   A = fill_random(a, rng);
        Array         want({7 + p0 + p1, 3, 2, 1});
        each(want.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
            int64_t j = i0 - p0;
            j         = j < 0 ? -j : j;
            j         = j > 6 ? 12 - j : j;
            want(i0, i1, i2, i3) = A(j, i1, i2, i3);
        });
        check_modes(ctx, ggml_pad_reflect_1d(ctx, a, p0, p1), want, kExact);
    }
}

TEST(OpsFill, TimestepEmbedding) {
    std::mt19937 rng(43);
    for (int dim : {8, 15, 1, 64}) {
        Context       ctx;
        ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 5);
        const Array   T = fill_random(t, rng, 0.0, 50.0);
        const int     max_period = 10000;
        const int     half       = dim / 2;
        Array         want({dim, 5, 1, 1});
        for (int64_t i = 0; i < 5; ++i) {
            for (int j = 0; j < half; ++j) {
                const double f        = std::exp(-std::log(double(max_period)) * j / half);
                want(j, i)            = std::cos(T(i) * f);
                want(j + half, i)     = std::sin(T(i) * f);
            }
        }
        ggml_tensor * r = ggml_timestep_embedding(ctx, t, dim, max_period);
        ASSERT_EQ(r->ne[0], dim);
        check_modes(ctx, r, want, 1e-9, 2e-5);
    }
}

TEST(OpsFill, ArgsortTopK) {
    Context       ctx;
    ggml_tensor * a    = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 6, 2);
    const float   v[12] = {0.5f, 3.0f, -1.0f, 2.0f, 7.0f, 0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
    std::memcpy(a->data, v, sizeof(v));
    ggml_tensor * r = ggml_argsort_top_k(ctx, a, 3);
    ASSERT_EQ(r->ne[0], 3);
    ASSERT_EQ(r->type, GGML_TYPE_I32);
    ASSERT_EQ(compute(ctx, r, 2), GGML_STATUS_SUCCESS);
    Array want({3, 2, 1, 1});
    want(0, 0) = 4, want(1, 0) = 1, want(2, 0) = 3;
    want(0, 1) = 5, want(1, 1) = 4, want(2, 1) = 3;
    EXPECT_TRUE(matches(r, want, kExact));
}

TEST(OpsFill, ContiguousToAndSetZero) {
    Context       ctx;
    ggml_tensor * a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 4, 3, 4);
    EXPECT_TRUE(ggml_is_contiguous_to_1(a) && ggml_is_contiguous_to_2(a) && ggml_is_contiguous_to_3(a));
    // Rows of 3 out of rows of 4: dimension 0 contiguous, dimension 1 not.
    ggml_tensor * v = ggml_view_3d(ctx, a, 3, 3, 4, a->nb[1], a->nb[2], 0);
    EXPECT_TRUE(ggml_is_contiguous_to_1(v));
    EXPECT_FALSE(ggml_is_contiguous_to_2(v));
    EXPECT_FALSE(ggml_is_contiguous_to_3(v));
    // Every other matrix of a: contiguous below dimension 2, not below 3.
    ggml_tensor * w = ggml_view_3d(ctx, a, 4, 3, 2, a->nb[1], a->nb[2] * 2, 0);
    EXPECT_TRUE(ggml_is_contiguous_to_2(w));
    EXPECT_FALSE(ggml_is_contiguous_to_3(w));
    EXPECT_FALSE(ggml_is_contiguous(w));
    ggml_tensor * t = ggml_transpose(ctx, a);
    EXPECT_FALSE(ggml_is_contiguous_to_1(t));

    std::mt19937 rng(3);
    fill_random(a, rng, 1.0, 2.0);
    EXPECT_EQ(ggml_set_zero(a), a);
    EXPECT_TRUE(matches(a, Array(shape_of(a), 0.0), kExact));
}

TEST(OpsFill, PrintObjects) {
    Context ctx(1 << 16);
    ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
    LogCapture log;
    ggml_print_objects(ctx);
    const std::string text = log.text();
    size_t            n    = 0;
    for (size_t at = text.find("ggml_object: type = 0"); at != std::string::npos;
         at        = text.find("ggml_object: type = 0", at + 1)) {
        ++n;
    }
    EXPECT_EQ(n, 2u) << text;
    EXPECT_NE(text.find("--- end ---"), std::string::npos);
}

TEST(OpsFill, OpParamsAsGgml) {
    Context       ctx;
    ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 8);
    ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2, 2);
    ggml_tensor * r = ggml_set(ctx, a, b, 32, 256, 256, 12);
    EXPECT_EQ(r->op, GGML_OP_SET);
    EXPECT_EQ(r->op_params[0], 32);
    EXPECT_EQ(r->op_params[1], 256);
    EXPECT_EQ(r->op_params[3], 12);
    EXPECT_EQ(r->op_params[4], 0);
    ggml_tensor * roll = ggml_roll(ctx, a, 1, -2, 0, 0);
    EXPECT_EQ(roll->op_params[1], -2);
    ggml_tensor * te = ggml_timestep_embedding(ctx, ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3), 7, 100);
    EXPECT_EQ(te->op_params[0], 7);
    EXPECT_EQ(te->op_params[1], 100);
    EXPECT_EQ(ggml_diag_mask_zero(ctx, a, 3)->op_params[0], 3);
    EXPECT_EQ(ggml_pad_reflect_1d(ctx, a, 2, 3)->op_params[1], 3);
    EXPECT_STREQ(ggml_op_name(GGML_OP_PAD_REFLECT_1D), "PAD_REFLECT_1D");
}

TEST(OpsFillDeath, BrokenPreconditions) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    Context       ctx;
    ggml_tensor * a  = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 4);
    ggml_tensor * b  = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2);
    ggml_tensor * nc = ggml_transpose(ctx, a);
    EXPECT_DEATH(ggml_set(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], 3 * a->nb[1] - sizeof(float)),
                 "ggml_set.*past the 128 bytes");
    EXPECT_DEATH(ggml_acc(ctx, a, b, 200, a->nb[2], a->nb[3], 0), "ggml_acc.*ends at byte");
    EXPECT_DEATH(ggml_acc(ctx, nc, b, a->nb[1], a->nb[2], a->nb[3], 0), "ggml_acc.*not contiguous");
    EXPECT_DEATH(ggml_set_1d(ctx, b, a, 0), "ggml_set_1d.*more elements");
    EXPECT_DEATH(ggml_arange(ctx, 2.0f, 1.0f, 1.0f), "ggml_arange.*stop = 1");
    EXPECT_DEATH(ggml_arange(ctx, 0.0f, 1.0f, -1.0f), "ggml_arange.*step");
    EXPECT_DEATH(ggml_tri(ctx, a, GGML_TRI_TYPE_LOWER), "ggml_tri.*not square");
    EXPECT_DEATH(ggml_fill(ctx, nc, 1.0f), "ggml_fill.*not contiguous");
    EXPECT_DEATH(ggml_cumsum(ctx, ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 3)), "ggml_cumsum.*not F32");
    EXPECT_DEATH(ggml_count_equal(ctx, a, b), "ggml_count_equal.*differ in shape");
    EXPECT_DEATH(ggml_diag(ctx, a), "ggml_diag.*not a row");
    EXPECT_DEATH(ggml_diag_mask_zero(ctx, a, -1), "ggml_diag_mask_zero.*n_past = -1");
    EXPECT_DEATH(ggml_repeat_back(ctx, b, a), "ggml_repeat_back.*not a repetition");
    EXPECT_DEATH(ggml_add_id(ctx, a, b, ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 4)), "ggml_add_id.*differ in length");
    EXPECT_DEATH(ggml_roll(ctx, a, 8, 0, 0, 0), "ggml_roll.*shift 8 of dimension 0");
    EXPECT_DEATH(ggml_pad_ext(ctx, a, -5, -4, 0, 0, 0, 0, 0, 0), "ggml_pad_ext.*leaves -1");
    EXPECT_DEATH(ggml_pad_reflect_1d(ctx, a, 8, 0), "ggml_pad_reflect_1d.*not below the row length");
    EXPECT_DEATH(ggml_timestep_embedding(ctx, a, 4, 100), "ggml_timestep_embedding.*not a vector");
    EXPECT_DEATH(ggml_argsort_top_k(ctx, a, 9), "ggml_argsort_top_k.*k = 9");
    EXPECT_DEATH(ggml_l2_norm(ctx, a, -1.0f), "ggml_l2_norm.*eps");
}

namespace {

float input_value(int i) {
    return 2.0f * std::sin(0.37f * float(i) + 0.1f);
}

ggml_tensor * formula_input(ggml_context * ctx, int64_t ne0, int64_t ne1, int64_t ne2) {
    ggml_tensor * t = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, ne0, ne1, ne2);
    for (int64_t i = 0; i < ggml_nelements(t); ++i) {
        static_cast<float *>(t->data)[i] = input_value(int(i));
    }
    return t;
}

std::map<std::string, std::vector<double>> read_reference() {
    std::map<std::string, std::vector<double>> cases;
    std::ifstream                              in(std::string(LOOM_TEST_DATA) + "/ops-fill/reference.txt");
    std::string                                line;
    while (std::getline(in, line)) {
        std::istringstream ls(line);
        std::string        name;
        size_t             n = 0;
        ls >> name >> n;
        std::vector<double> v(n);
        for (double & x : v) {
            ls >> x;
        }
        cases[name] = v;
    }
    return cases;
}

} // namespace

// The cases of tests/data/ops-fill/generate.c against ggml 0.25.1's results.
TEST(OpsFill, GgmlReference) {
    const auto ref = read_reference();
    ASSERT_EQ(ref.size(), 15u);
    Context       ctx;
    ggml_tensor * ts   = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 6);
    const float   tv[6] = {0.0f, 1.0f, 2.5f, 10.0f, 99.5f, 500.0f};
    std::memcpy(ts->data, tv, sizeof(tv));
    const std::pair<const char *, ggml_tensor *> cases[] = {
        {"arange", ggml_arange(ctx, -3.0f, 7.5f, 0.7f)},
        {"timestep_embedding_16", ggml_timestep_embedding(ctx, ts, 16, 10000)},
        {"timestep_embedding_15", ggml_timestep_embedding(ctx, ts, 15, 100)},
        {"pad_reflect_1d", ggml_pad_reflect_1d(ctx, formula_input(ctx, 7, 3, 1), 2, 4)},
        {"roll", ggml_roll(ctx, formula_input(ctx, 5, 4, 3), 2, -1, 1, 0)},
        {"pad_ext_circular", ggml_pad_ext_circular(ctx, formula_input(ctx, 4, 3, 1), 1, 2, 2, 1, 0, 0, 0, 0)},
        {"pad_ext", ggml_pad_ext(ctx, formula_input(ctx, 4, 3, 2), 1, 2, 0, 1, 1, 0, 0, 0)},
        {"cumsum", ggml_cumsum(ctx, formula_input(ctx, 9, 3, 1))},
        {"l2_norm", ggml_l2_norm(ctx, formula_input(ctx, 10, 3, 1), 1e-6f)},
        {"tri_lower_diag", ggml_tri(ctx, formula_input(ctx, 5, 5, 1), GGML_TRI_TYPE_LOWER_DIAG)},
        {"leaky_relu", ggml_leaky_relu(ctx, formula_input(ctx, 12, 1, 1), 0.2f, false)},
        {"clamp", ggml_clamp(ctx, formula_input(ctx, 12, 1, 1), -0.5f, 0.7f)},
        {"repeat_back", ggml_repeat_back(ctx, formula_input(ctx, 6, 4, 1), ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2))},
        {"acc", ggml_acc(ctx, formula_input(ctx, 6, 4, 1), formula_input(ctx, 2, 2, 1), 24, 96, 96, 4)},
        {"diag_mask_zero", ggml_diag_mask_zero(ctx, formula_input(ctx, 6, 4, 2), 1)},
    };
    for (const auto & [name, r] : cases) {
        SCOPED_TRACE(name);
        ASSERT_EQ(ref.count(name), 1u);
        const std::vector<double> & want = ref.at(name);
        ASSERT_EQ(size_t(ggml_nelements(r)), want.size());
        Array w(shape_of(r));
        w.v = want;
        // Sines and cosines of angles up to 500 rad may differ in the last bits between libms.
        check_modes(ctx, r, w, 1e-12, 2e-6);
    }
}

namespace {

// What a kernel written against ggml declares; src1 may be NULL.
int64_t locals_sum(const ggml_tensor * dst, const ggml_tensor * src0, const ggml_tensor * src1,
                   const ggml_tensor * src2) {
    GGML_TENSOR_TERNARY_OP_LOCALS
    GGML_UNUSED_VARS(nb00, nb10, nb20, nb0);
    return ne00 + ne01 + ne10 + ne13 + ne20 + ne0 + ne3;
}

} // namespace

TEST(OpsFill, TensorLocalsMacros) {
    Context       ctx;
    ggml_tensor * a = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 2, 3, 4, 5);
    ggml_tensor * b = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 7, 1, 1, 11);
    EXPECT_EQ(locals_sum(a, a, b, nullptr), 2 + 3 + 7 + 11 + 0 + 2 + 5);
    EXPECT_EQ(locals_sum(a, b, nullptr, a), 7 + 1 + 0 + 0 + 2 + 2 + 5);
}

TEST(OpsFill, PrecisionAndHints) {
    Context       ctx;
    ggml_tensor * a  = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 3);
    ggml_tensor * b  = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 2);
    ggml_tensor * mm = ggml_mul_mat(ctx, a, b);
    EXPECT_TRUE(ggml_prec_set_acc(mm, GGML_PREC_F32));
    EXPECT_EQ(mm->op_params[0], GGML_PREC_F32);
    EXPECT_TRUE(ggml_prec_set_src(mm, GGML_PREC_Q8, 1));
    EXPECT_EQ(mm->op_params[3], GGML_PREC_Q8);
    EXPECT_FALSE(ggml_prec_set_src(mm, GGML_PREC_Q8, 0));
    EXPECT_EQ(mm->op_params[2], 0);
    ggml_mul_mat_set_hint(mm, GGML_HINT_SRC0_IS_HADAMARD);
    EXPECT_EQ(mm->op_params[1], GGML_HINT_SRC0_IS_HADAMARD);

    ggml_tensor * q    = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 8, 2, 1);
    ggml_tensor * k    = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, 8, 4, 1);
    ggml_tensor * fa   = ggml_flash_attn_ext(ctx, q, k, k, nullptr, 1.0f, 0.0f, 0.0f);
    EXPECT_TRUE(ggml_prec_set_acc(fa, GGML_PREC_F32));
    EXPECT_EQ(ggml_flash_attn_ext_get_prec(fa), GGML_PREC_F32);
    EXPECT_FALSE(ggml_prec_set_src(fa, GGML_PREC_F16, 1));

    ggml_tensor * sum       = ggml_add(ctx, a, a);
    int32_t       before[4] = {};
    std::memcpy(before, sum->op_params, sizeof(before));
    EXPECT_FALSE(ggml_prec_set_acc(sum, GGML_PREC_F16));
    EXPECT_EQ(std::memcmp(before, sum->op_params, sizeof(before)), 0);
    EXPECT_EQ(int(GGML_PREC_UNDEFINED), int(GGML_PREC_DEFAULT));

    // The hinted product is the product of the data.
    std::mt19937 rng(7);
    const Array  A = fill_random(a, rng);
    const Array  B = fill_random(b, rng);
    check_modes(ctx, mm, ref::mul_mat(A, B), 1e-10);
}

TEST(OpsFillDeath, PrecisionAndHints) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    Context       ctx;
    ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 3);
    EXPECT_DEATH(ggml_mul_mat_set_hint(ggml_add(ctx, a, a), GGML_HINT_NONE), "ggml_mul_mat_set_hint.*not a mul_mat");
    EXPECT_DEATH(ggml_prec_set_src(ggml_mul_mat(ctx, a, a), GGML_PREC_F16, GGML_MAX_SRC), "ggml_prec_set_src.*index");
}
