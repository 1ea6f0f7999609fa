// Row gathers and scatters, copies with type conversion, and views,
// permutations and reshapes feeding ops.
//
// Conversions between f32, f16 and bf16 are correctly rounded (to nearest,
// ties to even), so copies are compared exactly against values rounded by
// the reference. Copies into Q8_0/Q4_0 are checked against the block error
// bound and against ggml_quantize_chunk of the same data.

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "log_capture.h"
#include "test_util.h"

using namespace loomtest;

namespace {

ggml_tensor * new_tensor(ggml_context * ctx, ggml_type type, const Shape & ne) {
    return ggml_new_tensor_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]);
}

Array convert_all(const Array & a, ggml_type type) {
    Array r = a;
    for (double & x : r.v) {
        x = round_to_type(type, x);
    }
    return r;
}

} // namespace

TEST(OpsGetRows, AllSourceTypes) {
    const ggml_type types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16,
                               GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_I32};
    for (unsigned seed : seeds()) {
        for (ggml_type type : types) {
            std::mt19937  rng(seed);
            const int64_t n0 = ggml_is_quantized(type) ? 32 * rand_int(rng, 1, 4) : odd_size(rng, 1, 37);
            const Shape   sa = {n0, odd_size(rng, 3, 15), rand_int(rng, 1, 3), rand_int(rng, 1, 2)};
            const int64_t k  = odd_size(rng, 1, 9);
            SCOPED_TRACE(std::string(ggml_type_name(type)) + " " + shape_str(sa) + " k " + std::to_string(k));
            Context       ctx;
            ggml_tensor * a   = new_tensor(ctx, type, sa);
            ggml_tensor * idx = ggml_new_tensor_3d(ctx, GGML_TYPE_I32, k, sa[2], sa[3]);
            const Array   A   = type == GGML_TYPE_I32 ? fill_random(a, rng, -1000.0, 1000.0) : fill_random(a, rng);
            Array         I(shape_of(idx));
            for (double & x : I.v) {
                x = double(rand_int(rng, 0, sa[1] - 1)); // repeats allowed
            }
            write_tensor(idx, I);
            ggml_tensor * out = ggml_get_rows(ctx, a, idx);
            ASSERT_EQ(out->type, type == GGML_TYPE_I32 ? GGML_TYPE_I32 : GGML_TYPE_F32);
            check_modes(ctx, out, ref::get_rows(A, I), 0.0, 0.0);
        }
    }
}

// Note [Index sources] in core/op_table.h: an index outside the
// source's rows fails the computation (on any number of threads) instead
// of aborting the process, the destination keeps its bytes, and the nodes
// after it are not computed.
TEST(OpsGetRows, IndexOutsideTheRowsFailsTheGraph) {
    for (const int bad : {7, -1}) {
        for (const RunMode & mode : run_modes()) {
            SCOPED_TRACE("index " + std::to_string(bad) + ", " + describe(mode));
            Context       ctx;
            ggml_tensor * a   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 7);
            ggml_tensor * idx = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 6);
            std::mt19937  rng(3);
            fill_random(a, rng);
            const int32_t rows[6] = {0, 3, 6, bad, 2, 1};
            std::memcpy(idx->data, rows, sizeof(rows));
            ggml_tensor * out  = ggml_get_rows(ctx, a, idx);
            ggml_tensor * next = ggml_scale(ctx, out, 2.0f);
            std::memset(out->data, 0x5a, ggml_nbytes(out));
            std::memset(next->data, 0x3c, ggml_nbytes(next));
            LogCapture log(true);
            EXPECT_EQ(compute(ctx, next, mode), GGML_STATUS_FAILED);
            EXPECT_TRUE(log.contains("index " + std::to_string(bad) + " at [3, 0, 0, 0]")) << log.text();
            EXPECT_TRUE(log.contains("GET_ROWS")) << log.text();
            const std::vector<uint8_t> out_bytes(static_cast<uint8_t *>(out->data),
                                                 static_cast<uint8_t *>(out->data) + ggml_nbytes(out));
            const std::vector<uint8_t> next_bytes(static_cast<uint8_t *>(next->data),
                                                  static_cast<uint8_t *>(next->data) + ggml_nbytes(next));
            EXPECT_EQ(out_bytes, std::vector<uint8_t>(ggml_nbytes(out), 0x5a));
            EXPECT_EQ(next_bytes, std::vector<uint8_t>(ggml_nbytes(next), 0x3c));
        }
    }
}

TEST(OpsSetRows, IndexOutsideTheRowsFailsTheGraph) {
    for (const ggml_type idx_type : {GGML_TYPE_I64, GGML_TYPE_I32}) {
        for (const RunMode & mode : run_modes()) {
            SCOPED_TRACE(std::string(ggml_type_name(idx_type)) + ", " + describe(mode));
            Context       ctx;
            ggml_tensor * dst = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 5, 9);
            ggml_tensor * src = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 5, 4);
            ggml_tensor * idx = ggml_new_tensor_1d(ctx, idx_type, 4);
            std::mt19937  rng(5);
            fill_random(src, rng);
            const int64_t rows[4] = {8, 0, 4, int64_t(1) << 33};
            for (int i = 0; i < 4; ++i) {
                if (idx_type == GGML_TYPE_I64) {
                    static_cast<int64_t *>(idx->data)[i] = rows[i];
                } else {
                    static_cast<int32_t *>(idx->data)[i] = i == 3 ? 9 : int32_t(rows[i]);
                }
            }
            std::memset(dst->data, 0x5a, ggml_nbytes(dst));
            ggml_tensor * out = ggml_set_rows(ctx, dst, src, idx);
            LogCapture    log(true);
            EXPECT_EQ(compute(ctx, out, mode), GGML_STATUS_FAILED);
            const std::string bad = idx_type == GGML_TYPE_I64 ? std::to_string(int64_t(1) << 33) : "9";
            EXPECT_TRUE(log.contains("index " + bad + " at [3, 0, 0, 0]")) << log.text();
            EXPECT_TRUE(log.contains("SET_ROWS")) << log.text();
            const std::vector<uint8_t> bytes(static_cast<uint8_t *>(dst->data),
                                             static_cast<uint8_t *>(dst->data) + ggml_nbytes(dst));
            EXPECT_EQ(bytes, std::vector<uint8_t>(ggml_nbytes(dst), 0x5a));
        }
    }
}

TEST(OpsSetRows, IndexAndDestinationTypes) {
    struct Case {
        ggml_type dst, src, idx;
        int64_t   idx_ne1, idx_ne2; // broadcast of the indices over dims 2 and 3
    };
    const Case cases[] = {
        {GGML_TYPE_F32, GGML_TYPE_F32, GGML_TYPE_I64, 2, 2},
        {GGML_TYPE_F32, GGML_TYPE_F32, GGML_TYPE_I32, 1, 1},
        {GGML_TYPE_F16, GGML_TYPE_F32, GGML_TYPE_I64, 2, 1},
        {GGML_TYPE_F16, GGML_TYPE_F32, GGML_TYPE_I32, 1, 2},
        {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_I32, 2, 2},
        {GGML_TYPE_F16, GGML_TYPE_F16, GGML_TYPE_I64, 1, 1},
    };
    for (unsigned seed : seeds()) {
        for (const Case & c : cases) {
            std::mt19937  rng(seed);
            const Shape   sd = {odd_size(rng, 1, 33), odd_size(rng, 5, 17), 2, 2};
            const int64_t k  = rand_int(rng, 1, sd[1]);
            SCOPED_TRACE(std::string(ggml_type_name(c.src)) + " rows into " + ggml_type_name(c.dst) + " with " +
                         ggml_type_name(c.idx) + " indices, dst " + shape_str(sd) + " k " + std::to_string(k));
            Context       ctx;
            ggml_tensor * dst = new_tensor(ctx, c.dst, sd);
            ggml_tensor * src = ggml_new_tensor_4d(ctx, c.src, sd[0], k, sd[2], sd[3]);
            ggml_tensor * idx = ggml_new_tensor_3d(ctx, c.idx, k, c.idx_ne1, c.idx_ne2);
            const Array   D   = fill_random(dst, rng);
            const Array   S   = fill_random(src, rng, -3.0, 3.0);
            // Distinct rows per index vector.
            Array                I(shape_of(idx));
            std::vector<int64_t> rows(static_cast<size_t>(sd[1]));
            for (int64_t j = 0; j < c.idx_ne1 * c.idx_ne2; ++j) {
                std::iota(rows.begin(), rows.end(), int64_t(0));
                std::shuffle(rows.begin(), rows.end(), rng);
                for (int64_t i = 0; i < k; ++i) {
                    I.v[size_t(j * k + i)] = double(rows[size_t(i)]);
                }
            }
            write_tensor(idx, I);
            ggml_tensor * out = ggml_set_rows(ctx, dst, src, idx);
            ASSERT_EQ(out->type, c.dst);
            double (*convert)(double) = c.dst == GGML_TYPE_F16 ? round_to_f16 : [](double x) {
                return double(float(x));
            };
            const Array want = ref::set_rows(D, S, I, convert);
            ASSERT_EQ(compute(ctx, out, 2), GGML_STATUS_SUCCESS);
            EXPECT_TRUE(matches(dst, want, 0.0, 0.0));
        }
    }
}

TEST(OpsCpy, FloatConversions) {
    const ggml_type types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16};
    std::mt19937    rng(173);
    for (ggml_type from : types) {
        for (ggml_type to : types) {
            SCOPED_TRACE(std::string(ggml_type_name(from)) + " -> " + ggml_type_name(to));
            const Shape   s = {odd_size(rng, 1, 41), odd_size(rng, 1, 7), rand_int(rng, 1, 3), rand_int(rng, 1, 2)};
            Context       ctx;
            ggml_tensor * a = new_tensor(ctx, from, s);
            ggml_tensor * b = new_tensor(ctx, to, s);
            const Array   A = fill_random(a, rng, -70000.0, 70000.0);
            check_modes(ctx, ggml_cpy(ctx, a, b), convert_all(A, to), 0.0, 0.0);
            ggml_tensor * c = ggml_cast(ctx, a, to);
            ASSERT_EQ(c->type, to);
            check_modes(ctx, c, convert_all(A, to), 0.0, 0.0);
        }
    }
}

// F32 to I32 truncates toward zero (NaN gives 0, out-of-range values
// saturate); I32 to F32 rounds to the nearest float. Through a permuted
// source and a strided destination view, as ggml's CPU copies them.
TEST(OpsCpy, F32AndI32) {
    const float special[] = {2.9f, -2.9f, 0.5f, -0.5f, NAN, 3e9f, -3e9f, 16777217.0f, -7.0f, 0.0f};
    for (int n_threads : {1, 3}) {
        Context       ctx;
        ggml_tensor * base = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 5, 6);
        auto *        bv   = static_cast<float *>(base->data);
        for (int i = 0; i < 30; ++i) bv[i] = i < 10 ? special[i] : float(i * 37 % 101) - 50.25f;
        ggml_tensor * src = ggml_transpose(ctx, base); // [6, 5], strided
        ggml_tensor * dst = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 6, 5);
        ASSERT_EQ(compute(ctx, ggml_cpy(ctx, src, dst), n_threads), GGML_STATUS_SUCCESS);
        for (int i1 = 0; i1 < 5; ++i1) {
            for (int i0 = 0; i0 < 6; ++i0) {
                const float   v = bv[i0 * 5 + i1];
                const int32_t want = std::isnan(v) ? 0 : v >= 2147483648.0f ? INT32_MAX
                                                     : v <= -2147483648.0f  ? INT32_MIN
                                                                            : int32_t(v);
                EXPECT_EQ(static_cast<const int32_t *>(dst->data)[i1 * 6 + i0], want) << "from " << v;
            }
        }
        // Back: I32 to F32 into every other element of a wider row.
        ggml_tensor * ints = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 7);
        const int32_t iv[7] = {0, -1, 123456789, INT32_MAX, INT32_MIN, 16777217, 42};
        std::memcpy(ints->data, iv, sizeof(iv));
        ggml_tensor * wide = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 14);
        ggml_tensor * view = ggml_view_2d(ctx, wide, 1, 7, 2 * sizeof(float), 0);
        ASSERT_EQ(compute(ctx, ggml_cpy(ctx, ggml_reshape_2d(ctx, ints, 1, 7), view), n_threads), GGML_STATUS_SUCCESS);
        for (int i = 0; i < 7; ++i) {
            EXPECT_EQ(static_cast<const float *>(wide->data)[2 * i], float(iv[i]));
        }
    }
}

TEST(OpsCpy, SmallMagnitudesAndTies) {
    // Values around the f16 subnormal range and exact halfway points.
    Context       ctx;
    const int64_t n = 12;
    ggml_tensor * a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
    const double  vals[n] = {std::ldexp(1.0, -24), std::ldexp(1.0, -25), std::ldexp(3.0, -25),
                             std::ldexp(1.0, -15), 1.0 + std::ldexp(1.0, -11), 1.0 + std::ldexp(3.0, -11),
                             65519.0, 65520.0, -65504.0, 1.0 + std::ldexp(1.0, -8), 1.0 + std::ldexp(3.0, -8),
                             std::ldexp(1.0, -130)};
    Array         A(Shape{n, 1, 1, 1});
    std::copy(vals, vals + n, A.v.begin());
    write_tensor(a, A);
    for (ggml_type to : {GGML_TYPE_F16, GGML_TYPE_BF16}) {
        SCOPED_TRACE(ggml_type_name(to));
        ggml_tensor * b = ggml_new_tensor_1d(ctx, to, n);
        check_modes(ctx, ggml_cpy(ctx, a, b), convert_all(A, to), 0.0, 0.0);
    }
}

TEST(OpsCpy, DifferentShapeSameCount) {
    std::mt19937  rng(179);
    Context       ctx;
    ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 12, 5);
    ggml_tensor * b = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, 6, 5, 2);
    const Array   A = fill_random(a, rng);
    check_modes(ctx, ggml_cpy(ctx, a, b), ref::reshape(convert_all(A, GGML_TYPE_F16), {6, 5, 2, 1}), 0.0, 0.0);
}

TEST(OpsCpy, NonContiguousSource) {
    std::mt19937 rng(181);
    for (ggml_type to : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16}) {
        SCOPED_TRACE(ggml_type_name(to));
        Context       ctx;
        ggml_tensor * base = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 5, 7, 3, 2);
        const Array   B    = fill_random(base, rng);
        ggml_tensor * a    = ggml_permute(ctx, base, 2, 0, 3, 1); // [7, 2, 5, 3]
        ggml_tensor * b    = ggml_new_tensor_4d(ctx, to, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
        const Array   want = convert_all(ref::permute(B, {2, 0, 3, 1}), to);
        check_modes(ctx, ggml_cpy(ctx, a, b), want, 0.0, 0.0);
    }
}

TEST(OpsCpy, IntoNonContiguousDestination) {
    std::mt19937  rng(191);
    Context       ctx;
    ggml_tensor * a      = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 6, 9);
    ggml_tensor * d_base = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 9, 6);
    const Array   A      = fill_random(a, rng);
    fill_random(d_base, rng);
    ggml_tensor * out    = ggml_cpy(ctx, a, ggml_transpose(ctx, d_base)); // writes d_base transposed
    ASSERT_EQ(compute(ctx, out, 2), GGML_STATUS_SUCCESS);
    EXPECT_TRUE(matches(d_base, ref::permute(convert_all(A, GGML_TYPE_F16), {1, 0, 2, 3}), 0.0, 0.0));
}

TEST(OpsCpy, DupAndCont) {
    std::mt19937 rng(193);
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16}) {
        SCOPED_TRACE(ggml_type_name(type));
        Context       ctx;
        ggml_tensor * x = ggml_new_tensor_3d(ctx, type, 9, 5, 4);
        const Array   X = fill_random(x, rng);

        // dup of a contiguous tensor and of a transposed view.
        check_modes(ctx, ggml_dup(ctx, x), X, 0.0, 0.0);
        ggml_tensor * xt = ggml_transpose(ctx, x);
        check_modes(ctx, ggml_dup(ctx, xt), ref::permute(X, {1, 0, 2, 3}), 0.0, 0.0);

        // cont of permutations, with and without a new shape.
        check_modes(ctx, ggml_cont(ctx, xt), ref::permute(X, {1, 0, 2, 3}), 0.0, 0.0);
        ggml_tensor * xp = ggml_permute(ctx, x, 1, 2, 0, 3); // [4, 9, 5]
        const Array   P  = ref::permute(X, {1, 2, 0, 3});
        check_modes(ctx, ggml_cont(ctx, xp), P, 0.0, 0.0);
        check_modes(ctx, ggml_cont_1d(ctx, xp, 180), ref::reshape(P, {180, 1, 1, 1}), 0.0, 0.0);
        check_modes(ctx, ggml_cont_2d(ctx, xp, 36, 5), ref::reshape(P, {36, 5, 1, 1}), 0.0, 0.0);
        check_modes(ctx, ggml_cont_3d(ctx, xp, 4, 45, 1), ref::reshape(P, {4, 45, 1, 1}), 0.0, 0.0);
        check_modes(ctx, ggml_cont_4d(ctx, xp, 2, 2, 9, 5), ref::reshape(P, {2, 2, 9, 5}), 0.0, 0.0);
    }
}

namespace {

// Checks a copy into a quantized tensor: every element within the block's
// rounding bound of its source, and the blocks as ggml_quantize_chunk makes them.
void check_quantized_copy(ggml_type type, const ggml_tensor * q, const Array & src) {
    const int64_t n0      = src.ne[0];
    const int64_t n_rows  = src.size() / n0;
    const size_t  row_sz  = ggml_row_size(type, n0);
    const Array   got     = read_tensor(q);
    std::vector<float> flat(src.v.begin(), src.v.end());
    std::vector<uint8_t> expect(row_sz * size_t(n_rows));
    ASSERT_EQ(ggml_quantize_chunk(type, flat.data(), expect.data(), 0, n_rows, n0, nullptr), expect.size());

    const ggml_type_traits * traits = ggml_get_type_traits(type);
    std::vector<float>       deq(flat.size());
    traits->to_float(expect.data(), deq.data(), int64_t(flat.size()));

    int64_t n_diff = 0;
    for (int64_t b = 0; b < src.size() / 32; ++b) {
        double amax = 0.0, maxv = 0.0;
        for (int64_t j = 0; j < 32; ++j) {
            const double x = src.v[size_t(b * 32 + j)];
            if (std::fabs(x) > amax) {
                amax = std::fabs(x);
                maxv = x;
            }
        }
        // The step between representable values: amax/127 (Q8_0) or |max|/8 (Q4_0).
        // Rounding is to the nearest step, except at Q4_0's clamped top level (a whole
        // step); the step stored in f16 adds up to 2^-11 of it per level (127 or 8 levels).
        const bool   q8    = type == GGML_TYPE_Q8_0;
        const double step  = q8 ? amax / 127.0 : std::fabs(maxv) / 8.0;
        const double bound = step * (q8 ? 0.5 + 127.0 / 2048.0 : 1.0 + 8.0 / 2048.0) + 1e-7;
        for (int64_t j = 0; j < 32; ++j) {
            const size_t i = size_t(b * 32 + j);
            EXPECT_LE(std::fabs(got.v[i] - src.v[i]), bound) << "element " << i << ": " << src.v[i] << " became "
                                                             << got.v[i];
            if (got.v[i] != double(deq[i])) {
                ++n_diff;
                EXPECT_LE(std::fabs(got.v[i] - double(deq[i])), step * 1.01) << "element " << i;
            }
        }
    }
    // Only values exactly halfway between two steps may round differently.
    EXPECT_LE(n_diff, src.size() / 100) << "elements that differ from ggml_quantize_chunk";
}

} // namespace

TEST(OpsCpy, ToQuantized) {
    for (ggml_type type : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
        for (unsigned seed : seeds()) {
            SCOPED_TRACE(ggml_type_name(type));
            std::mt19937  rng(seed);
            Context       ctx;
            const Shape   s = {32 * rand_int(rng, 1, 6), odd_size(rng, 1, 7), rand_int(rng, 1, 2), 1};
            ggml_tensor * a = new_tensor(ctx, GGML_TYPE_F32, s);
            ggml_tensor * q = new_tensor(ctx, type, s);
            const Array   A = fill_random(a, rng, -4.0, 4.0);
            for (const RunMode & mode : run_modes()) {
                SCOPED_TRACE(describe(mode));
                std::memset(q->data, 0, ggml_nbytes(q));
                ASSERT_EQ(compute(ctx, ggml_cpy(ctx, a, q), mode), GGML_STATUS_SUCCESS);
                check_quantized_copy(type, q, A);
            }
        }
    }
}

TEST(OpsViews, FeedingOps) {
    std::mt19937  rng(197);
    Context       ctx;
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 12, 10);
    const Array   X = fill_random(x, rng);

    // reshape, then a reduction over the new rows.
    check_modes(ctx, ggml_sum_rows(ctx, ggml_reshape_3d(ctx, x, 4, 3, 10)),
                ref::sum_rows(ref::reshape(X, {4, 3, 10, 1})), 1e-10);

    // a window of x: 5 columns from column 3, 4 rows from row 2.
    ggml_tensor * win = ggml_view_2d(ctx, x, 5, 4, x->nb[1], 2 * x->nb[1] + 3 * sizeof(float));
    Array         W(Shape{5, 4, 1, 1});
    for (int64_t i1 = 0; i1 < 4; ++i1) {
        for (int64_t i0 = 0; i0 < 5; ++i0) {
            W(i0, i1) = X(i0 + 3, i1 + 2);
        }
    }
    ggml_tensor * y = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 5, 4);
    const Array   Y = fill_random(y, rng);
    check_modes(ctx, ggml_mul(ctx, win, y), ref::binary(ref::BinaryOp::mul, W, Y), 1e-10);
    check_modes(ctx, ggml_scale(ctx, ggml_cont(ctx, win), 2.0f), ref::scale(W, 2.0, 0.0), 1e-10);

    // a 1-d view with an offset.
    check_modes(ctx, ggml_neg(ctx, ggml_view_1d(ctx, x, 17, 30 * sizeof(float))),
                ref::unary(GGML_UNARY_OP_NEG, [&] {
                    Array v(Shape{17, 1, 1, 1});
                    for (int64_t i = 0; i < 17; ++i) {
                        v(i) = X.v[size_t(30 + i)];
                    }
                    return v;
                }()),
                0.0, 0.0);

    // transpose feeding a product: x^T as src1 (non-contiguous).
    ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 10, 3);
    const Array   Wt = fill_random(w, rng);
    check_modes(ctx, ggml_mul_mat(ctx, w, ggml_transpose(ctx, x)),
                ref::mul_mat(Wt, ref::permute(X, {1, 0, 2, 3})), 1e-10);

    // a 4-d permutation made contiguous, then reshaped back into a matrix.
    ggml_tensor * x4 = ggml_reshape_4d(ctx, x, 2, 6, 5, 2);
    ggml_tensor * p  = ggml_cont(ctx, ggml_permute(ctx, x4, 3, 1, 0, 2));
    ggml_tensor * m  = ggml_reshape_2d(ctx, p, p->ne[0] * p->ne[1], p->ne[2] * p->ne[3]);
    const Array   P  = ref::permute(ref::reshape(X, {2, 6, 5, 2}), {3, 1, 0, 2});
    check_modes(ctx, ggml_sqr(ctx, m), ref::math(GGML_OP_SQR, ref::reshape(P, {P.ne[0] * P.ne[1], P.ne[2] * P.ne[3], 1, 1})),
                1e-10);
}
