// Every instruction-set specific kernel against its portable twin, then the
// whole mul_mat through the graph API with the SIMD and the portable paths,
// and its independence from the thread count.
//
// Tolerances:
//  - conversions (f16/bf16 <-> f32) and the Q8_0 quantizer: same bits (a
//    signaling NaN half may become a quiet NaN float);
//  - dot products and gemv: |simd - portable| <= 1e-5 * sum |x_i * y_i|
//    (the two differ only in the order of the fp32 additions; each order is
//    within n * 2^-24 of the exact sum relative to sum |x_i y_i|, and random
//    data stays far below that worst case; vdpbf16ps also rounds each
//    addition to fp32, and its subnormal inputs have a test of their own);
//  - GEMM: each element against a double-precision sum of the same f32
//    operands (b rounded to bf16 where a BF16 GEMM multiplies bf16
//    weights), within 1e-5 * sum |a_k * b_k|; cutting the product into
//    rectangles or changing the cache blocks gives the same bits; the BF16
//    GEMM's packing gives the bits of the layout in kernel_table.h;
//  - mul_mat through the graph: NMSE between the paths <= 1e-9 for f32 and
//    f16/bf16 weights (the f32 GEMM keeps b in f32 where the reference
//    rounds it to the weights' type, so f16 gets 1e-6, bf16 5e-5 unless the
//    table has a BF16 GEMM, which rounds b as the reference does), 1e-9 for
//    Q8_0/Q4_0 (both quantize b to the same bits); 1..4 threads: same bits.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/features.h"
#include "backends/cpu/kernels/gemm.h"
#include "backends/cpu/simd/avx512/avx512.h"
#include "backends/cpu/simd/kernel_table.h"
#include "core/fp16.h"
#include "core/types.h"
#include "test_util.h"

using namespace loom;
using namespace loom::cpu;
using namespace loomtest;

namespace {

// The tables this processor can run besides the portable one.
std::vector<const KernelTable *> simd_tables() {
    std::vector<const KernelTable *> out = runnable_kernels();
    out.erase(out.begin()); // the portable table, the reference
    return out;
}

#define FOR_EACH_SIMD_TABLE(var)                                                    \
    const auto tables_ = simd_tables();                                             \
    if (tables_.empty()) {                                                          \
        GTEST_SKIP() << "no SIMD kernel table runs on this processor";              \
    }                                                                               \
    for (const KernelTable * var : tables_)

constexpr double kDotTol = 1e-5;

// Sizes around the vector widths and unroll factors, and a few long ones.
const int64_t kSizes[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 255, 257, 1000, 4099};

std::vector<float> random_floats(std::mt19937 & rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float>                    v(n);
    for (float & x : v) {
        x = d(rng);
    }
    return v;
}

std::vector<uint16_t> random_halves(std::mt19937 & rng, size_t n) {
    const std::vector<float> f = random_floats(rng, n, -2.0f, 2.0f);
    std::vector<uint16_t>    v(n);
    for (size_t i = 0; i < n; ++i) {
        v[i] = fp32_to_fp16(f[i]);
    }
    return v;
}

std::vector<uint16_t> random_bf16(std::mt19937 & rng, size_t n) {
    const std::vector<float> f = random_floats(rng, n, -2.0f, 2.0f);
    std::vector<uint16_t>    v(n);
    for (size_t i = 0; i < n; ++i) {
        v[i] = fp32_to_bf16(f[i]);
    }
    return v;
}

// Q8_0 blocks with values in [lo, 127] and scales in [0.001, 0.1).
std::vector<block_q8_0> random_q8(std::mt19937 & rng, size_t nb, int lo) {
    std::uniform_int_distribution<int>    q(lo, 127);
    std::uniform_real_distribution<float> d(0.001f, 0.1f);
    std::vector<block_q8_0>               v(nb);
    for (block_q8_0 & b : v) {
        b.d = fp32_to_fp16(d(rng));
        for (int8_t & x : b.qs) {
            x = int8_t(q(rng));
        }
    }
    return v;
}

std::vector<block_q4_0> random_q4(std::mt19937 & rng, size_t nb) {
    std::uniform_int_distribution<int>    q(0, 255);
    std::uniform_real_distribution<float> d(0.001f, 0.1f);
    std::vector<block_q4_0>               v(nb);
    for (block_q4_0 & b : v) {
        b.d = fp32_to_fp16(d(rng));
        for (uint8_t & x : b.qs) {
            x = uint8_t(q(rng));
        }
    }
    return v;
}

// sum |x_i y_i| of two rows of any weight type, from their float values.
double abs_dot(const std::vector<float> & x, const std::vector<float> & y) {
    double s = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
        s += std::fabs(double(x[i]) * double(y[i]));
    }
    return s;
}

template <typename T> std::vector<float> to_floats(ggml_type type, const T * p, int64_t n) {
    std::vector<float> out(size_t(std::max<int64_t>(n, 1)));
    if (n > 0) {
        type_info(type, "test").to_float(p, out.data(), n);
    }
    out.resize(size_t(n));
    return out;
}

// A copy of v placed one element alignment past a 32-byte boundary, so
// vector loads cannot rely on alignment (elements stay naturally aligned, as
// in any tensor).
template <typename T> struct Unaligned {
    std::vector<unsigned char> storage;
    T *                        ptr;
    explicit Unaligned(const std::vector<T> & v) : storage(v.size() * sizeof(T) + 64) {
        auto base = reinterpret_cast<uintptr_t>(storage.data());
        ptr       = reinterpret_cast<T *>(((base + 31) & ~uintptr_t(31)) + alignof(T));
        for (size_t i = 0; i < v.size(); ++i) {
            ptr[i] = v[i];
        }
    }
};

} // namespace

// ---- dot products ----

TEST(Simd, DotF32) {
    FOR_EACH_SIMD_TABLE(kt) {
        std::mt19937 rng(1);
        for (int64_t n : kSizes) {
            const auto           x = random_floats(rng, size_t(n));
            const auto           y = random_floats(rng, size_t(n));
            const Unaligned<float> ux(x), uy(y);
            const float          want = portable_kernels().dot_f32(n, x.data(), y.data());
            const float          got  = kt->dot_f32(n, ux.ptr, uy.ptr);
            EXPECT_NEAR(got, want, kDotTol * abs_dot(x, y) + 1e-30) << kt->name << " n " << n;
        }
    }
}

TEST(Simd, DotF16AndBf16) {
    FOR_EACH_SIMD_TABLE(kt) {
        std::mt19937 rng(2);
        for (int64_t n : kSizes) {
            const auto h1 = random_halves(rng, size_t(n)), h2 = random_halves(rng, size_t(n));
            const Unaligned<uint16_t> u1(h1), u2(h2);
            const double bound16 =
                kDotTol * abs_dot(to_floats(GGML_TYPE_F16, h1.data(), n), to_floats(GGML_TYPE_F16, h2.data(), n));
            EXPECT_NEAR(kt->dot_f16(n, u1.ptr, u2.ptr), portable_kernels().dot_f16(n, h1.data(), h2.data()),
                        bound16 + 1e-30)
                << kt->name << " f16 n " << n;

            const auto b1 = random_bf16(rng, size_t(n)), b2 = random_bf16(rng, size_t(n));
            const Unaligned<uint16_t> v1(b1), v2(b2);
            const double bound_bf =
                kDotTol * abs_dot(to_floats(GGML_TYPE_BF16, b1.data(), n), to_floats(GGML_TYPE_BF16, b2.data(), n));
            EXPECT_NEAR(kt->dot_bf16(n, v1.ptr, v2.ptr), portable_kernels().dot_bf16(n, b1.data(), b2.data()),
                        bound_bf + 1e-30)
                << kt->name << " bf16 n " << n;
        }
    }
}

TEST(Simd, DotQuantized) {
    FOR_EACH_SIMD_TABLE(kt) {
        std::mt19937 rng(3);
        for (int64_t nb : {1, 2, 3, 5, 8, 127, 128}) {
            const int64_t n  = nb * QK8_0;
            // Weights may hold -128; quantized activations never do.
            const auto    xq8 = random_q8(rng, size_t(nb), -128);
            const auto    xq4 = random_q4(rng, size_t(nb));
            const auto    y   = random_q8(rng, size_t(nb), -127);
            const Unaligned<block_q8_0> ux8(xq8), uy(y);
            const Unaligned<block_q4_0> ux4(xq4);
            const auto yf = to_floats(GGML_TYPE_Q8_0, y.data(), n);

            const double b8 = kDotTol * abs_dot(to_floats(GGML_TYPE_Q8_0, xq8.data(), n), yf);
            EXPECT_NEAR(kt->dot_q8_0_q8_0(n, ux8.ptr, uy.ptr), portable_kernels().dot_q8_0_q8_0(n, xq8.data(), y.data()),
                        b8)
                << kt->name << " q8_0 blocks " << nb;
            const double b4 = kDotTol * abs_dot(to_floats(GGML_TYPE_Q4_0, xq4.data(), n), yf);
            EXPECT_NEAR(kt->dot_q4_0_q8_0(n, ux4.ptr, uy.ptr), portable_kernels().dot_q4_0_q8_0(n, xq4.data(), y.data()),
                        b4)
                << kt->name << " q4_0 blocks " << nb;
        }
    }
}

// ---- conversions ----

TEST(Simd, QuantizeQ8_0SameBits) {
    FOR_EACH_SIMD_TABLE(kt) {
        std::mt19937 rng(4);
        for (int64_t nb : {1, 2, 7, 64}) {
            const int64_t n = nb * QK8_0;
            auto          x = random_floats(rng, size_t(n), -3.0f, 3.0f);
            // Block 0: amax 127 makes the scale 1, and halves test the
            // rounding of ties (away from zero, as the reference).
            for (int j = 0; j < QK8_0; ++j) {
                x[size_t(j)] = float(j - 16) + 0.5f;
            }
            x[0] = 127.0f;
            if (nb > 1) { // an all-zero block
                std::fill(x.begin() + QK8_0, x.begin() + 2 * QK8_0, 0.0f);
            }
            const Unaligned<float>  ux(x);
            std::vector<block_q8_0> want(static_cast<size_t>(nb)), got(static_cast<size_t>(nb));
            portable_kernels().quantize_row_q8_0(x.data(), want.data(), n);
            kt->quantize_row_q8_0(ux.ptr, got.data(), n);
            EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(block_q8_0)))
                << kt->name << " blocks " << nb;
        }
    }
}

TEST(Simd, HalfConversionsSameBits) {
    FOR_EACH_SIMD_TABLE(kt) {
        // Every half, NaNs and subnormals included.
        std::vector<uint16_t> all(65536 + 3);
        for (size_t i = 0; i < all.size(); ++i) {
            all[i] = uint16_t(i);
        }
        const Unaligned<uint16_t> ua(all);
        std::vector<float>        want(all.size()), got(all.size());
        portable_kernels().fp16_to_fp32_row(all.data(), want.data(), int64_t(all.size()));
        kt->fp16_to_fp32_row(ua.ptr, got.data(), int64_t(all.size()));
        for (size_t i = 0; i < all.size(); ++i) {
            // A signaling NaN may come out quiet (the conversion instruction
            // sets the quiet bit); everything else is exact.
            const uint32_t quiet = std::isnan(want[i]) ? 0x00400000u : 0u;
            ASSERT_EQ(f32_bits(want[i]) | quiet, f32_bits(got[i]) | quiet) << kt->name << " half " << all[i];
        }

        portable_kernels().bf16_to_fp32_row(all.data(), want.data(), int64_t(all.size()));
        kt->bf16_to_fp32_row(ua.ptr, got.data(), int64_t(all.size()));
        EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float))) << kt->name;

        // Floats: normal range, around the half's limits and subnormals,
        // ties, infinities and NaNs.
        std::mt19937          rng(5);
        std::vector<float>    f = random_floats(rng, 4001, -70000.0f, 70000.0f);
        const auto            g = random_floats(rng, 1003, -1e-4f, 1e-4f);
        f.insert(f.end(), g.begin(), g.end());
        for (float v : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e-8f, 2.9802322e-8f, 5.9604645e-8f,
                        1.0f + 1.0f / 2048.0f, 1.0f + 3.0f / 2048.0f, INFINITY, -INFINITY, NAN}) {
            f.push_back(v);
            f.push_back(-v);
        }
        const Unaligned<float> uf(f);
        std::vector<uint16_t>  hw(f.size()), hg(f.size());
        portable_kernels().fp32_to_fp16_row(f.data(), hw.data(), int64_t(f.size()));
        kt->fp32_to_fp16_row(uf.ptr, hg.data(), int64_t(f.size()));
        for (size_t i = 0; i < f.size(); ++i) {
            ASSERT_EQ(hw[i], hg[i]) << kt->name << " value " << f[i];
        }
    }
}

// ---- exponentials ----

namespace {

// |got - want| <= rel * |want| elementwise, NaN matching NaN.
::testing::AssertionResult close_rel(const std::vector<float> & got, const std::vector<float> & want, double rel) {
    for (size_t i = 0; i < want.size(); ++i) {
        if (std::isnan(want[i]) && std::isnan(got[i])) {
            continue;
        }
        if (std::isinf(want[i]) || std::isinf(got[i])) {
            if (want[i] != got[i]) {
                return ::testing::AssertionFailure() << "element " << i << ": " << got[i] << " vs " << want[i];
            }
            continue;
        }
        // Results below the smallest normal float may be flushed to zero.
        const double tol = rel * std::fabs(double(want[i])) + 1.2e-38;
        if (!(std::fabs(double(got[i]) - double(want[i])) <= tol)) {
            return ::testing::AssertionFailure() << "element " << i << ": " << got[i] << " vs " << want[i];
        }
    }
    return ::testing::AssertionSuccess();
}

} // namespace

// Exponentials within 5e-7 relative (a few ulp) of the portable std::exp
// results; row sums (in double) within 1e-6 relative.
TEST(Simd, SoftmaxHelpersAndSilu) {
    FOR_EACH_SIMD_TABLE(kt) {
        std::mt19937 rng(11);
        for (int64_t n : kSizes) {
            auto x = random_floats(rng, size_t(n), -30.0f, 30.0f);
            // Specials: range edges of exp, infinities, NaN.
            const float specials[] = {88.72f, 88.5f, 88.3f, -87.3f, -87.4f, -100.0f, -103.0f, 0.0f, -0.0f,
                                      INFINITY, -INFINITY, NAN};
            for (size_t i = 0; i < x.size() && i < std::size(specials); ++i) {
                x[i * 3 % x.size()] = specials[i];
            }
            const Unaligned<float> ux(x);
            EXPECT_EQ(f32_bits(kt->max_f32(n, ux.ptr)), f32_bits(portable_kernels().max_f32(n, x.data())))
                << kt->name << " max, n " << n;

            // exp(y - max) with the max of the row, and with 0 to reach the
            // overflow side.
            for (float m : {portable_kernels().max_f32(n, x.data()), 0.0f}) {
                std::vector<float>     want = x;
                const Unaligned<float> got(x);
                const double           sw = portable_kernels().exp_sub_sum_f32(n, want.data(), m);
                const double           sg = kt->exp_sub_sum_f32(n, got.ptr, m);
                const std::vector<float> g(got.ptr, got.ptr + n);
                EXPECT_TRUE(close_rel(g, want, 5e-7)) << kt->name << " exp, n " << n << " max " << m;
                if (std::isfinite(sw)) {
                    EXPECT_NEAR(sg, sw, 1e-6 * std::fabs(sw) + 1e-30) << kt->name << " sum, n " << n;
                } else {
                    EXPECT_EQ(std::isnan(sg), std::isnan(sw));
                }
            }

            std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
            portable_kernels().silu_f32(n, x.data(), want.data());
            kt->silu_f32(n, ux.ptr, got.data());
            EXPECT_TRUE(close_rel(got, want, 5e-7)) << kt->name << " silu, n " << n;
        }
        // Every float exponent range, densely.
        std::vector<float> x;
        for (float v = -104.0f; v < 90.0f; v += 0.0137f) {
            x.push_back(v);
        }
        std::vector<float> want = x, got = x;
        portable_kernels().exp_sub_sum_f32(int64_t(x.size()), want.data(), 0.0f);
        kt->exp_sub_sum_f32(int64_t(x.size()), got.data(), 0.0f);
        EXPECT_TRUE(close_rel(got, want, 5e-7)) << kt->name << " exp sweep";
    }
}

// ---- matrix-vector products ----

namespace {

// A weight matrix of nrows rows K elements long, rows lda bytes apart (with
// padding), and ncols operand columns ldb bytes apart.
struct GemvCase {
    ggml_type                  type;
    int64_t                    K, nrows;
    int                        ncols;
    size_t                     lda, ldb;
    std::vector<unsigned char> a, b;
};

constexpr size_t kOff = 4;

GemvCase make_gemv_case(std::mt19937 & rng, ggml_type type, int64_t K, int64_t nrows, int ncols) {
    GemvCase c;
    c.type              = type;
    c.K                 = K;
    c.nrows             = nrows;
    c.ncols             = ncols;
    const ggml_type opnd = (type == GGML_TYPE_Q4_0) ? GGML_TYPE_Q8_0 : type;
    // Padding that keeps elements aligned but moves rows off vector
    // boundaries; buffers start kOff bytes in.
    c.lda               = ggml_row_size(type, K) + 12;
    c.ldb               = ggml_row_size(opnd, K) + 20;
    c.a.assign(c.lda * size_t(nrows) + kOff, 0);
    c.b.assign(c.ldb * size_t(ncols) + kOff, 0);
    auto fill_rows = [&](ggml_type t, std::vector<unsigned char> & buf, size_t ld, int64_t rows, bool activations) {
        for (int64_t r = 0; r < rows; ++r) {
            unsigned char * row = buf.data() + kOff + size_t(r) * ld;
            const size_t    nb  = size_t(K / ggml_blck_size(t));
            switch (t) {
                case GGML_TYPE_F32: {
                    const auto v = random_floats(rng, size_t(K));
                    std::memcpy(row, v.data(), v.size() * sizeof(float));
                    break;
                }
                case GGML_TYPE_F16: {
                    const auto v = random_halves(rng, size_t(K));
                    std::memcpy(row, v.data(), v.size() * 2);
                    break;
                }
                case GGML_TYPE_BF16: {
                    const auto v = random_bf16(rng, size_t(K));
                    std::memcpy(row, v.data(), v.size() * 2);
                    break;
                }
                case GGML_TYPE_Q8_0: {
                    const auto v = random_q8(rng, nb, activations ? -127 : -128);
                    std::memcpy(row, v.data(), v.size() * sizeof(block_q8_0));
                    break;
                }
                default: {
                    const auto v = random_q4(rng, nb);
                    std::memcpy(row, v.data(), v.size() * sizeof(block_q4_0));
                    break;
                }
            }
        }
    };
    fill_rows(type, c.a, c.lda, nrows, false);
    fill_rows(opnd, c.b, c.ldb, ncols, true);
    return c;
}

GemvFn gemv_of(const KernelTable & kt, ggml_type t) {
    switch (t) {
        case GGML_TYPE_F32: return kt.gemv_f32;
        case GGML_TYPE_F16: return kt.gemv_f16;
        case GGML_TYPE_BF16: return kt.gemv_bf16;
        case GGML_TYPE_Q8_0: return kt.gemv_q8_0;
        default: return kt.gemv_q4_0;
    }
}

} // namespace

TEST(Simd, GemvAllTypes) {
    FOR_EACH_SIMD_TABLE(kt) {
        std::mt19937 rng(6);
        for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
            const bool    quant = ggml_is_quantized(type);
            const int64_t Ks_f[] = {1, 7, 8, 9, 31, 32, 33, 64, 100, 515};
            const int64_t Ks_q[] = {32, 64, 96, 320, 4096};
            for (int64_t K : quant ? std::vector<int64_t>(std::begin(Ks_q), std::end(Ks_q))
                                   : std::vector<int64_t>(std::begin(Ks_f), std::end(Ks_f))) {
                for (int64_t nrows : {1, 2, 3, 4, 5, 7, 16, 19}) {
                    for (int ncols = 1; ncols <= GEMV_MAX_COLS; ++ncols) {
                        SCOPED_TRACE(std::string(kt->name) + " " + ggml_type_name(type) + " K " + std::to_string(K) +
                                     " rows " + std::to_string(nrows) + " cols " + std::to_string(ncols));
                        GemvCase     c   = make_gemv_case(rng, type, K, nrows, ncols);
                        const size_t ldd = size_t(nrows) + 3;
                        std::vector<float> want(ldd * size_t(ncols), -1.0f), got(ldd * size_t(ncols) + 1, -1.0f);
                        gemv_of(portable_kernels(), type)(K, c.a.data() + kOff, c.lda, nrows, c.b.data() + kOff, c.ldb,
                                                          ncols, want.data(), ldd);
                        // dst unaligned too
                        gemv_of(*kt, type)(K, c.a.data() + kOff, c.lda, nrows, c.b.data() + kOff, c.ldb, ncols,
                                           got.data() + 1, ldd);
                        const ggml_type opnd = type == GGML_TYPE_Q4_0 ? GGML_TYPE_Q8_0 : type;
                        for (int col = 0; col < ncols; ++col) {
                            const auto bf = to_floats(opnd, c.b.data() + kOff + size_t(col) * c.ldb, K);
                            for (int64_t r = 0; r < nrows; ++r) {
                                const auto af = to_floats(type, c.a.data() + kOff + size_t(r) * c.lda, K);
                                const size_t i = size_t(col) * ldd + size_t(r);
                                ASSERT_NEAR(got[i + 1], want[i], kDotTol * abs_dot(af, bf) + 1e-30)
                                    << "row " << r << " col " << col;
                            }
                            // Padding between columns is left alone.
                            for (size_t i = size_t(col) * ldd + size_t(nrows); i < size_t(col + 1) * ldd; ++i) {
                                ASSERT_EQ(got[i + 1], -1.0f);
                            }
                        }
                    }
                }
            }
        }
    }
}

// Every product on prepared columns a table offers (and the AVX-512
// four-rows kernel for Q4_0, which processors without VBMI use).
struct QGemmCase {
    std::string  name;
    ggml_type    type;
    QGemmKernels k;
};

std::vector<QGemmCase> qgemm_cases() {
    std::vector<QGemmCase> out;
    for (const KernelTable * kt : simd_tables()) {
        if (kt->qgemm_q4_0.gemm != nullptr) out.push_back({std::string(kt->name) + " q4_0", GGML_TYPE_Q4_0, kt->qgemm_q4_0});
        if (kt->qgemm_q8_0.gemm != nullptr) out.push_back({std::string(kt->name) + " q8_0", GGML_TYPE_Q8_0, kt->qgemm_q8_0});
#if defined(__x86_64__) || defined(__i386__)
        if (kt == avx512_kernels() && kt->qgemm_q4_0.gemm != avx512::qgemm_q4_0) {
            out.push_back({"avx512 q4_0, four rows per register", GGML_TYPE_Q4_0,
                           {avx512::qcols_bytes, avx512::qcols_prepare_q4_0, avx512::qgemm_q4_0}});
        }
#endif
    }
    return out;
}

// Products on prepared columns: within the gemv tolerance of the portable
// table; K cut into parts gives the same bits; the preparation writes
// exactly its bytes.
TEST(Simd, PreparedColumnProducts) {
    const auto cases = qgemm_cases();
    if (cases.empty()) {
        GTEST_SKIP() << "no kernel table here prepares columns";
    }
    std::mt19937 rng(16);
    for (const QGemmCase & qc : cases) {
        for (int64_t K : {32, 64, 96, 160, 320, 4096}) {
            for (int64_t nrows : {1, 2, 3, 4, 5, 8, 12, 16, 19}) {
                for (int ncols = 1; ncols <= QGEMM_COLS; ++ncols) {
                    SCOPED_TRACE(qc.name + " K " + std::to_string(K) + " rows " + std::to_string(nrows) + " cols " +
                                 std::to_string(ncols));
                    GemvCase           c   = make_gemv_case(rng, qc.type, K, nrows, ncols);
                    const int64_t      nb  = K / QK8_0;
                    const size_t       ldd = size_t(nrows) + 3;
                    const size_t       pb  = qc.k.cols_bytes(K);
                    std::vector<float> want(ldd * size_t(ncols), -1.0f), got(ldd * size_t(ncols), -1.0f);
                    std::vector<char>  prep(pb + 8, 'x');
                    // Only 4-byte alignment is promised.
                    qc.k.prepare(K, c.b.data() + kOff, c.ldb, ncols, prep.data() + 4);
                    ASSERT_EQ(prep[3], 'x');
                    ASSERT_EQ(prep[4 + pb], 'x');
                    gemv_of(portable_kernels(), qc.type)(K, c.a.data() + kOff, c.lda, nrows, c.b.data() + kOff,
                                                         c.ldb, ncols, want.data(), ldd);
                    qc.k.gemm(K, 0, nb, c.a.data() + kOff, c.lda, nrows, prep.data() + 4, c.b.data() + kOff, c.ldb,
                              ncols, nullptr, got.data(), ldd);
                    for (int col = 0; col < ncols; ++col) {
                        const auto bf = to_floats(GGML_TYPE_Q8_0, c.b.data() + kOff + size_t(col) * c.ldb, K);
                        for (int64_t r = 0; r < nrows; ++r) {
                            const auto   af = to_floats(qc.type, c.a.data() + kOff + size_t(r) * c.lda, K);
                            const size_t i  = size_t(col) * ldd + size_t(r);
                            ASSERT_NEAR(got[i], want[i], kDotTol * abs_dot(af, bf) + 1e-30) << "row " << r << " col " << col;
                        }
                        for (size_t i = size_t(col) * ldd + size_t(nrows); i < size_t(col + 1) * ldd; ++i) {
                            ASSERT_EQ(got[i], -1.0f); // padding between columns is left alone
                        }
                    }
                    // K in parts, the partial sums carried: the same bits.
                    for (int64_t part : {QGEMM_K_ALIGN, 2 * QGEMM_K_ALIGN}) {
                        std::vector<float> parts(ldd * size_t(ncols), -1.0f);
                        std::vector<float> acc(qgemm_acc_floats(nrows) + 1, 0.0f);
                        for (int64_t i0 = 0; i0 < nb; i0 += part) {
                            qc.k.gemm(K, i0, std::min(nb, i0 + part), c.a.data() + kOff, c.lda, nrows, prep.data() + 4,
                                      c.b.data() + kOff, c.ldb, ncols, acc.data() + 1, parts.data(), ldd);
                        }
                        ASSERT_EQ(std::memcmp(parts.data(), got.data(), got.size() * sizeof(float)), 0) << "parts of " << part;
                    }
                }
            }
        }
    }
}

// BF16 products on a BF16 dot-product instruction may take subnormal inputs
// as zero (kernel_table.h): every result must match the portable one on the
// values as they are or on the values with subnormals zeroed. Subnormal
// weights meet activations large enough that zeroing them changes the sum.
TEST(Simd, GemvBf16Subnormals) {
    FOR_EACH_SIMD_TABLE(kt) {
        std::mt19937  rng(14);
        const int64_t K = 77, nrows = 5;
        const int     ncols = 3;
        auto          a     = random_bf16(rng, size_t(K * nrows));
        auto          b     = random_bf16(rng, size_t(K) * ncols);
        for (size_t i = 0; i < a.size(); i += 7) {
            a[i] = uint16_t((rng() % 127 + 1) | (rng() % 2 ? 0x8000u : 0u)); // subnormal
            for (int c = 0; c < ncols; ++c) {
                b[size_t(c * K) + i % size_t(K)] = fp32_to_bf16(c % 2 ? -1e37f : 3e36f);
            }
        }
        std::vector<uint16_t> a0 = a, b0 = b;
        for (auto * v : {&a0, &b0}) {
            for (uint16_t & x : *v) {
                if ((x & 0x7f80u) == 0) x = 0;
            }
        }
        const size_t       lda = size_t(K) * 2, ldb = size_t(K) * 2;
        std::vector<float> want(size_t(nrows * ncols)), want0(want.size()), got(want.size());
        portable_kernels().gemv_bf16(K, a.data(), lda, nrows, b.data(), ldb, ncols, want.data(), size_t(nrows));
        portable_kernels().gemv_bf16(K, a0.data(), lda, nrows, b0.data(), ldb, ncols, want0.data(), size_t(nrows));
        kt->gemv_bf16(K, a.data(), lda, nrows, b.data(), ldb, ncols, got.data(), size_t(nrows));
        for (int c = 0; c < ncols; ++c) {
            const auto bf = to_floats(GGML_TYPE_BF16, b.data() + c * K, K);
            for (int64_t r = 0; r < nrows; ++r) {
                const double tol = kDotTol * abs_dot(to_floats(GGML_TYPE_BF16, a.data() + r * K, K), bf) + 1e-30;
                const size_t i   = size_t(c * nrows + r);
                ASSERT_GT(std::fabs(double(want[i]) - double(want0[i])), 2 * tol) << "the case does not tell them apart";
                EXPECT_TRUE(std::fabs(double(got[i]) - double(want[i])) <= tol ||
                            std::fabs(double(got[i]) - double(want0[i])) <= tol)
                    << kt->name << " row " << r << " col " << c << ": " << got[i] << " vs " << want[i] << " or "
                    << want0[i];
            }
        }
    }
}

// ---- GEMM ----

namespace {

struct GemmData {
    ggml_type                  a_type;
    int64_t                    M, N, K;
    size_t                     lda, ldb, b_step, ldc;
    std::vector<unsigned char> a, b;
    std::vector<float>         af; // a as floats, M x K
    std::vector<float>         bf; // b as floats, N x K
};

GemmData make_gemm(std::mt19937 & rng, ggml_type a_type, int64_t M, int64_t N, int64_t K, bool strided_b) {
    GemmData d;
    d.a_type = a_type;
    d.M = M, d.N = N, d.K = K;
    const size_t es = ggml_type_size(a_type);
    d.lda           = size_t(K) * es + 2 * es; // padded rows
    d.a.assign(d.lda * size_t(M), 0);
    d.af.resize(size_t(M * K));
    for (int64_t m = 0; m < M; ++m) {
        const auto v = random_floats(rng, size_t(K));
        for (int64_t k = 0; k < K; ++k) {
            unsigned char * p = d.a.data() + size_t(m) * d.lda + size_t(k) * es;
            float           f = v[size_t(k)];
            if (a_type == GGML_TYPE_F16) {
                const uint16_t h = fp32_to_fp16(f);
                std::memcpy(p, &h, 2);
                f = fp16_to_fp32(h);
            } else if (a_type == GGML_TYPE_BF16) {
                const uint16_t h = fp32_to_bf16(f);
                std::memcpy(p, &h, 2);
                f = bf16_to_fp32(h);
            } else {
                std::memcpy(p, &f, 4);
            }
            d.af[size_t(m * K + k)] = f;
        }
    }
    // b: columns of K values; strided: the values of a column 3 floats apart.
    d.b_step = strided_b ? 3 * sizeof(float) : sizeof(float);
    d.ldb    = size_t(K) * d.b_step + 4;
    d.b.assign(d.ldb * size_t(N) + 16, 0);
    d.bf.resize(size_t(N * K));
    for (int64_t n = 0; n < N; ++n) {
        const auto v = random_floats(rng, size_t(K));
        for (int64_t k = 0; k < K; ++k) {
            std::memcpy(d.b.data() + size_t(n) * d.ldb + size_t(k) * d.b_step, &v[size_t(k)], 4);
            d.bf[size_t(n * K + k)] = v[size_t(k)];
        }
    }
    d.ldc = size_t(M) + 5;
    return d;
}

GemmProblem problem_of(const GemmData & d, float * c) {
    GemmProblem pr;
    pr.a_type = d.a_type;
    pr.a      = reinterpret_cast<const char *>(d.a.data());
    pr.lda    = d.lda;
    pr.b      = reinterpret_cast<const char *>(d.b.data());
    pr.ldb    = d.ldb;
    pr.b_step = d.b_step;
    pr.c      = c;
    pr.ldc    = d.ldc;
    pr.K      = d.K;
    return pr;
}

// 64-byte aligned scratch for one gemm caller.
struct AlignedScratch {
    std::vector<unsigned char> mem;
    void *                     ptr;
    explicit AlignedScratch(size_t n) : mem(n + 64) {
        ptr = reinterpret_cast<void *>((reinterpret_cast<uintptr_t>(mem.data()) + 63) & ~uintptr_t(63));
    }
};

// gemm on one thread with its own scratch.
void gemm_alone(const KernelTable & kt, const GemmProblem & pr, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                int64_t N) {
    const size_t   bb = gemm_b_block_bytes(kt, pr.a_type, N);
    AlignedScratch s(bb + gemm_private_bytes(kt, pr.a_type));
    gemm(kt, pr, m0, m1, n0, n1, s.ptr, static_cast<char *>(s.ptr) + bb, nullptr);
}

// A copy of a table with small cache blocks, so that small products cross
// every block edge (several row chunks, depth blocks and column blocks), in
// the f32 GEMM and in the BF16 one.
struct SmallBlocks {
    GemmBf16    bf16{};
    KernelTable table;
    explicit SmallBlocks(const KernelTable & kt) : table(kt) {
        table.mc = 2 * kt.mr;
        table.kc = 40;
        table.nc = 2 * kt.nr;
        if (kt.gemm_bf16 != nullptr) {
            bf16            = *kt.gemm_bf16;
            bf16.mc         = 2 * bf16.mr;
            bf16.kc         = 40;
            bf16.nc         = bf16.nr;
            table.gemm_bf16 = &bf16;
        }
    }
    SmallBlocks(const SmallBlocks &)             = delete;
    SmallBlocks & operator=(const SmallBlocks &) = delete;
};

// b as the product sees it: rounded to bf16 where the table multiplies bf16
// weights on its BF16 GEMM.
float b_value(const KernelTable & kt, const GemmData & d, size_t i) {
    return gemm_uses_bf16(kt, d.a_type) ? bf16_to_fp32(fp32_to_bf16(d.bf[i])) : d.bf[i];
}

void check_gemm_against_double(const KernelTable & kt, const GemmData & d) {
    std::vector<float> c(d.ldc * size_t(d.N), -7.0f);
    gemm_alone(kt, problem_of(d, c.data()), 0, d.M, 0, d.N, d.N);
    for (int64_t n = 0; n < d.N; ++n) {
        for (int64_t m = 0; m < d.M; ++m) {
            double exact = 0.0, mag = 0.0;
            for (int64_t k = 0; k < d.K; ++k) {
                const double p = double(d.af[size_t(m * d.K + k)]) * double(b_value(kt, d, size_t(n * d.K + k)));
                exact += p;
                mag += std::fabs(p);
            }
            ASSERT_NEAR(c[size_t(n) * d.ldc + size_t(m)], exact, kDotTol * mag + 1e-30)
                << kt.name << " m " << m << " n " << n;
        }
        for (size_t m = size_t(d.M); m < d.ldc; ++m) {
            ASSERT_EQ(c[size_t(n) * d.ldc + m], -7.0f) << "wrote past row " << d.M;
        }
    }
}

} // namespace

TEST(Simd, GemmPackSameBits) {
    FOR_EACH_SIMD_TABLE(kt) {
        std::mt19937 rng(13);
        for (int width : {kt->mr, kt->nr, 5}) {
            for (int nrows = 1; nrows <= width; ++nrows) {
                for (int64_t kb : {1, 7, 8, 9, 33, 256}) {
                    std::vector<std::vector<float>> data;
                    const float *                   rows[16];
                    for (int i = 0; i < nrows; ++i) {
                        data.push_back(random_floats(rng, size_t(kb) + 1));
                        rows[i] = data.back().data() + 1; // not vector aligned
                    }
                    std::vector<float> want(size_t(kb * width), -1.0f), got(size_t(kb * width), -2.0f);
                    portable_kernels().gemm_pack(rows, nrows, width, kb, want.data());
                    kt->gemm_pack(rows, nrows, width, kb, got.data());
                    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
                        << kt->name << " width " << width << " rows " << nrows << " kb " << kb;
                }
            }
        }
    }
}

TEST(Simd, GemmOddShapesAllTables) {
    std::vector<const KernelTable *> tables = {&portable_kernels()};
    for (const KernelTable * t : simd_tables()) {
        tables.push_back(t);
    }
    std::mt19937 rng(7);
    struct Shape3 {
        int64_t M, N, K;
    };
    // Edges of the register tile, of the cache blocks (mc 144, kc 256) and
    // K deeper than one block.
    const Shape3 shapes[] = {{1, 1, 1},     {5, 3, 7},      {16, 6, 33},    {17, 7, 64}, {33, 13, 255},
                             {47, 11, 257}, {150, 20, 300}, {64, 25, 65},  {31, 9, 600}};
    for (const KernelTable * table : tables) {
        const SmallBlocks small(*table);
        for (const KernelTable * ktp : {table, &small.table}) {
            const KernelTable & kt = *ktp;
            for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16}) {
                for (const Shape3 & s : shapes) {
                    for (bool strided : {false, true}) {
                        SCOPED_TRACE(std::string(kt.name) + " mc " + std::to_string(kt.mc) + " " +
                                     ggml_type_name(type) + " M " + std::to_string(s.M) + " N " +
                                     std::to_string(s.N) + " K " + std::to_string(s.K) +
                                     (strided ? " strided b" : ""));
                        check_gemm_against_double(kt, make_gemm(rng, type, s.M, s.N, s.K, strided));
                    }
                }
            }
        }
    }
}

TEST(Simd, GemmRectanglesGiveSameBits) {
    std::vector<const KernelTable *> tables = {&portable_kernels()};
    for (const KernelTable * t : simd_tables()) {
        tables.push_back(t);
    }
    std::mt19937 rng(8);
    for (const KernelTable * kt : tables) {
        for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_BF16}) {
            SCOPED_TRACE(std::string(kt->name) + " " + ggml_type_name(type));
            const GemmData     d = make_gemm(rng, type, 203, 37, 521, false);
            std::vector<float> whole(d.ldc * size_t(d.N), 0.0f), parts(d.ldc * size_t(d.N), 0.0f);
            std::vector<float> small(d.ldc * size_t(d.N), 0.0f);
            gemm_alone(*kt, problem_of(d, whole.data()), 0, d.M, 0, d.N, d.N);
            // Other block sizes: the same bits.
            gemm_alone(SmallBlocks(*kt).table, problem_of(d, small.data()), 0, d.M, 0, d.N, d.N);
            EXPECT_EQ(0, std::memcmp(whole.data(), small.data(), whole.size() * sizeof(float)));
            // Rectangles cut at tile multiples: the same bits.
            const bool    bf16   = gemm_uses_bf16(*kt, type);
            const int64_t mr     = bf16 ? kt->gemm_bf16->mr : kt->mr;
            const int64_t nr     = bf16 ? kt->gemm_bf16->nr : kt->nr;
            const int64_t mcut[] = {0, mr * 3, std::min<int64_t>(mr * 5, d.M - 1), d.M};
            const int64_t ncut[] = {0, nr * 2, d.N};
            for (int i = 0; i + 1 < 4; ++i) {
                for (int j = 0; j + 1 < 3; ++j) {
                    gemm_alone(*kt, problem_of(d, parts.data()), mcut[i], mcut[i + 1], ncut[j], ncut[j + 1], d.N);
                }
            }
            EXPECT_EQ(0, std::memcmp(whole.data(), parts.data(), whole.size() * sizeof(float)));
        }
    }
}

// The packing of the BF16 GEMM against the layout of kernel_table.h: pairs
// of k in 32-bit words, zero partners and zero rows, activations rounded as
// the core's fp32_to_bf16 (specials, ties and subnormals included).
TEST(Simd, GemmBf16PackSameBits) {
    bool any = false;
    for (const KernelTable * kt : runnable_kernels()) {
        if (kt->gemm_bf16 == nullptr) {
            continue;
        }
        any                 = true;
        const GemmBf16 & g  = *kt->gemm_bf16;
        std::mt19937     rng(15);
        for (int64_t kb : {1, 2, 3, 31, 32, 33, 64, 77, 256}) {
            const int64_t kp = (kb + 1) / 2;
            for (int nrows = 1; nrows <= g.mr; nrows += nrows < 4 ? 1 : 7) {
                SCOPED_TRACE(std::string(kt->name) + " a kb " + std::to_string(kb) + " rows " + std::to_string(nrows));
                // Rows starting one element into their allocation, ending
                // where it ends (ASan sees a read past them).
                std::vector<std::vector<uint16_t>> data;
                const uint16_t *                   rows[32];
                for (int i = 0; i < nrows; ++i) {
                    auto v = random_bf16(rng, size_t(kb) + 1);
                    data.push_back(std::move(v));
                }
                for (int i = 0; i < nrows; ++i) rows[i] = data[size_t(i)].data() + 1;
                std::vector<uint32_t> got(size_t(kp * g.mr) + 5, 0xdeadbeefu);
                g.pack_a(rows, nrows, kb, got.data());
                for (int64_t p = 0; p < kp; ++p) {
                    for (int i = 0; i < g.mr; ++i) {
                        uint32_t want = 0;
                        if (i < nrows) {
                            want = rows[i][2 * p];
                            if (2 * p + 1 < kb) want |= uint32_t(rows[i][2 * p + 1]) << 16;
                        }
                        ASSERT_EQ(got[size_t(p * g.mr + i)], want) << "pair " << p << " row " << i;
                    }
                }
                for (size_t i = size_t(kp * g.mr); i < got.size(); ++i) ASSERT_EQ(got[i], 0xdeadbeefu);
            }
            for (size_t step : {sizeof(float), 3 * sizeof(float)}) {
                for (int ncols = 1; ncols <= g.nr; ++ncols) {
                    SCOPED_TRACE(std::string(kt->name) + " b kb " + std::to_string(kb) + " cols " +
                                 std::to_string(ncols) + " step " + std::to_string(step));
                    const float specials[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -3e-39f,
                                              1.00390625f /* tie, to even */, 1.01171875f /* tie, up */,
                                              3.4e38f /* rounds to infinity */};
                    std::vector<std::vector<float>> data;
                    const char *                    cols[16];
                    for (int j = 0; j < ncols; ++j) {
                        auto v = random_floats(rng, size_t(kb) * (step / sizeof(float)) + 1, -3.0f, 3.0f);
                        for (size_t i = 0; i < std::size(specials); ++i) {
                            v[(size_t(j) * 5 + i * 7) % v.size()] = specials[i];
                        }
                        uint32_t snan = 0x7f800001u; // a signaling NaN
                        std::memcpy(&v[size_t(j) % v.size()], &snan, 4);
                        data.push_back(std::move(v));
                    }
                    for (int j = 0; j < ncols; ++j) cols[j] = reinterpret_cast<const char *>(data[size_t(j)].data() + 1);
                    std::vector<uint32_t> got(size_t(kp * g.nr) + 5, 0xdeadbeefu);
                    g.pack_b(cols, step, ncols, kb, got.data());
                    auto value = [&](int j, int64_t k) {
                        float f;
                        std::memcpy(&f, cols[j] + size_t(k) * step, sizeof(f));
                        return uint32_t(fp32_to_bf16(f));
                    };
                    for (int64_t p = 0; p < kp; ++p) {
                        for (int j = 0; j < g.nr; ++j) {
                            uint32_t want = 0;
                            if (j < ncols) {
                                want = value(j, 2 * p);
                                if (2 * p + 1 < kb) want |= value(j, 2 * p + 1) << 16;
                            }
                            ASSERT_EQ(got[size_t(p * g.nr + j)], want) << "pair " << p << " col " << j;
                        }
                    }
                    for (size_t i = size_t(kp * g.nr); i < got.size(); ++i) ASSERT_EQ(got[i], 0xdeadbeefu);
                }
            }
        }
    }
    if (!any) {
        GTEST_SKIP() << "no kernel table with a BF16 GEMM runs on this processor";
    }
}

// ---- mul_mat through the graph ----

namespace {

struct MulMatShape {
    ggml_type type;
    int64_t   K, M, N;
    int64_t   a2, a3, b2, b3; // batches, b broadcast over a
    bool      transposed_b;
};

std::string describe(const MulMatShape & s) {
    return std::string(ggml_type_name(s.type)) + " K " + std::to_string(s.K) + " M " + std::to_string(s.M) + " N " +
           std::to_string(s.N) + " batches a " + std::to_string(s.a2) + "x" + std::to_string(s.a3) + " b " +
           std::to_string(s.b2) + "x" + std::to_string(s.b3) + (s.transposed_b ? " transposed b" : "");
}

ggml_tensor * build_mul_mat(ggml_context * ctx, const MulMatShape & s, std::mt19937 & rng) {
    ggml_tensor * a = ggml_new_tensor_4d(ctx, s.type, s.K, s.M, s.a2, s.a3);
    fill_random(a, rng);
    ggml_tensor * b = nullptr;
    if (s.transposed_b) {
        ggml_tensor * bt = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, s.N, s.K, s.b2, s.b3);
        fill_random(bt, rng);
        b = ggml_transpose(ctx, bt);
    } else {
        b = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, s.K, s.N, s.b2, s.b3);
        fill_random(b, rng);
    }
    return ggml_mul_mat(ctx, a, b);
}

std::vector<MulMatShape> graph_shapes() {
    std::vector<MulMatShape> out;
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
        const bool    q  = ggml_is_quantized(t);
        const int64_t K1 = q ? 96 : 77;
        const int64_t K2 = q ? 320 : 301;
        // gemv: 1..4 columns; GEMM (float weights): 5 and more.
        for (int64_t N : {1, 2, 3, 4, 5, 9, 40}) {
            out.push_back({t, K1, 37, N, 1, 1, 1, 1, false});
        }
        out.push_back({t, K2, 150, 23, 1, 1, 1, 1, false});
        out.push_back({t, K1, 19, 3, 2, 1, 4, 3, false}); // broadcast, gemv
        out.push_back({t, K1, 21, 7, 1, 2, 3, 2, false}); // broadcast, GEMM
        out.push_back({t, K1, 13, 2, 1, 1, 1, 1, true});  // strided b, gemv
        out.push_back({t, K1, 13, 11, 1, 1, 2, 1, true}); // strided b, GEMM
        out.push_back({t, K2, 3, 70, 1, 1, 1, 1, false}); // few rows, many columns
        if (!q) {
            out.push_back({t, 20, 150, 4100, 1, 1, 1, 1, false}); // several row chunks and column blocks
        } else {
            out.push_back({t, 8192, 150, 19, 1, 1, 1, 1, false}); // K in parts, row tails (prepared columns)
        }
    }
    return out;
}

double path_tolerance(ggml_type t) {
    switch (t) {
        case GGML_TYPE_F16: return 1e-6;
        // A BF16 GEMM rounds b as the reference does.
        case GGML_TYPE_BF16: return gemm_uses_bf16(best_kernels(), t) ? 1e-9 : 5e-5;
        default: return 1e-9;
    }
}

} // namespace

TEST(Simd, MulMatSimdAgainstPortable) {
    std::mt19937 rng(9);
    for (const MulMatShape & s : graph_shapes()) {
        SCOPED_TRACE(describe(s));
        Context       ctx;
        ggml_tensor * out = build_mul_mat(ctx, s, rng);
        ASSERT_EQ(compute(ctx, out, RunMode{2, true}), GGML_STATUS_SUCCESS);
        const Array ref = read_tensor(out);
        ASSERT_EQ(compute(ctx, out, RunMode{2, false}), GGML_STATUS_SUCCESS);
        EXPECT_TRUE(matches(read_tensor(out), ref, path_tolerance(s.type)));
    }
}

TEST(Simd, MulMatSameBitsFor1To4Threads) {
    std::mt19937 rng(10);
    for (const MulMatShape & s : graph_shapes()) {
        SCOPED_TRACE(describe(s));
        Context       ctx;
        ggml_tensor * out = build_mul_mat(ctx, s, rng);
        std::vector<float> first;
        for (bool use_ref : {false, true}) {
            for (int nth = 1; nth <= 4; ++nth) {
                std::memset(out->data, 0xff, ggml_nbytes(out));
                ASSERT_EQ(compute(ctx, out, RunMode{nth, use_ref}), GGML_STATUS_SUCCESS);
                std::vector<float> got(size_t(ggml_nelements(out)));
                std::memcpy(got.data(), out->data, ggml_nbytes(out));
                if (nth == 1) {
                    first = got;
                } else {
                    EXPECT_EQ(0, std::memcmp(first.data(), got.data(), got.size() * sizeof(float)))
                        << nth << " threads" << (use_ref ? ", portable" : "");
                }
            }
        }
    }
}

// Weighted sums of rows (attention's values): each table against the
// portable one within the dot tolerance; rows of weight 0 are skipped even
// when they hold NaN.
TEST(Simd, MadRowsAgainstPortable) {
    FOR_EACH_SIMD_TABLE(kt) {
        std::mt19937 rng(18);
        for (bool f16 : {false, true}) {
            for (int64_t n : {1, 7, 8, 31, 32, 33, 64, 100}) {
                for (int64_t nrows : {1, 5, 64}) {
                    SCOPED_TRACE(std::string(kt->name) + (f16 ? " f16" : " f32") + " n " + std::to_string(n) +
                                 " rows " + std::to_string(nrows));
                    const size_t ld   = size_t(n + 3) * (f16 ? 2 : 4);
                    std::vector<char> x(ld * size_t(nrows));
                    auto              w = random_floats(rng, size_t(nrows));
                    for (int64_t i = 0; i < nrows; ++i) {
                        char * row = x.data() + size_t(i) * ld;
                        if (f16) {
                            const auto v = random_halves(rng, size_t(n));
                            std::memcpy(row, v.data(), v.size() * 2);
                        } else {
                            const auto v = random_floats(rng, size_t(n));
                            std::memcpy(row, v.data(), v.size() * 4);
                        }
                        if (i % 3 == 1) {
                            w[size_t(i)] = 0.0f;
                            std::memset(row, 0xff, ld); // NaN in either type
                        }
                    }
                    const auto         y0 = random_floats(rng, size_t(n));
                    std::vector<float> want(y0), got(y0);
                    (f16 ? portable_kernels().mad_rows_f16 : portable_kernels().mad_rows_f32)(n, want.data(), x.data(),
                                                                                              ld, nrows, w.data());
                    (f16 ? kt->mad_rows_f16 : kt->mad_rows_f32)(n, got.data(), x.data(), ld, nrows, w.data());
                    for (int64_t d = 0; d < n; ++d) {
                        double mag = std::fabs(y0[size_t(d)]);
                        for (int64_t i = 0; i < nrows; ++i) {
                            if (w[size_t(i)] == 0.0f) continue;
                            const char * row = x.data() + size_t(i) * ld;
                            const double v   = f16 ? double(fp16_to_fp32(reinterpret_cast<const ggml_fp16_t *>(row)[d]))
                                                   : double(reinterpret_cast<const float *>(row)[d]);
                            mag += std::fabs(v * w[size_t(i)]);
                        }
                        ASSERT_FALSE(std::isnan(got[size_t(d)])) << "d " << d;
                        ASSERT_NEAR(got[size_t(d)], want[size_t(d)], kDotTol * mag) << "d " << d;
                    }
                }
            }
        }
    }
}

TEST(Simd, BinaryOpsSameBits) {
    FOR_EACH_SIMD_TABLE(kt) {
        std::mt19937 rng(12);
        for (int op = 0; op < 4; ++op) {
            for (int64_t n : kSizes) {
                SCOPED_TRACE(std::string(kt->name) + " op " + std::to_string(op) + " n " + std::to_string(n));
                const auto         a = random_floats(rng, size_t(n) + 1);
                const auto         b = random_floats(rng, size_t(n) + 1, 0.5f, 2.0f);
                std::vector<float> want(size_t(n) + 1, -7.0f), got(size_t(n) + 1, -7.0f);
                portable_kernels().binary_f32[op](n, a.data(), b.data(), want.data());
                kt->binary_f32[op](n, a.data() + 1, b.data() + 1, got.data() + 1); // unaligned
                std::vector<float> want_shift(size_t(n) + 1, -7.0f);
                portable_kernels().binary_f32[op](n, a.data() + 1, b.data() + 1, want_shift.data() + 1);
                ASSERT_EQ(0, std::memcmp(got.data(), want_shift.data(), got.size() * sizeof(float)));
                // In place: d is a.
                std::vector<float> inplace(a);
                kt->binary_f32[op](n, inplace.data(), b.data(), inplace.data());
                ASSERT_EQ(0, std::memcmp(inplace.data(), want.data(), size_t(n) * sizeof(float)));
            }
        }
    }
}

TEST(Simd, TableIsChosenOnce) {
    const KernelTable & t = best_kernels();
    EXPECT_EQ(&t, &best_kernels());
    EXPECT_STRNE(t.name, nullptr);
    const Features & f          = features();
    const bool       avx2       = avx2_kernels() != nullptr && f.avx2 && f.fma && f.f16c;
    const bool       avx512     = avx2 && avx512_kernels() != nullptr && f.avx512f && f.avx512bw && f.avx512vl &&
                        f.avx512vnni;
    const bool       avx512bf16 = avx512 && avx512bf16_kernels() != nullptr && f.avx512bf16;
    const char *     best       = avx512bf16 ? "avx512_bf16" : avx512 ? "avx512" : avx2 ? "avx2" : "portable";
    const auto       runnable   = runnable_kernels();
    // LOOM_CPU_KERNELS names a table to take instead, if this processor runs it.
    const char * override = std::getenv("LOOM_CPU_KERNELS");
    const char * want     = best;
    for (const KernelTable * r : runnable) {
        if (override != nullptr && std::strcmp(override, r->name) == 0) want = r->name;
    }
    EXPECT_STREQ(t.name, want);
    EXPECT_STREQ(kernels(true).name, "portable");
    // The runnable tables start with the portable one, end with the best one
    // and hold the chosen one.
    EXPECT_EQ(runnable.front(), &portable_kernels());
    EXPECT_STREQ(runnable.back()->name, best);
    EXPECT_NE(std::find(runnable.begin(), runnable.end(), &t), runnable.end());
}

TEST(Simd, SoftmaxAndSiluSimdAgainstPortable) {
    std::mt19937 rng(12);
    for (int64_t n : {1, 7, 8, 33, 256, 1001}) {
        SCOPED_TRACE("n " + std::to_string(n));
        Context       ctx;
        ggml_tensor * x    = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, n, 5, 3);
        ggml_tensor * mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, n, 5);
        fill_random(x, rng, -8.0, 8.0);
        fill_random(mask, rng, -2.0, 0.0);
        ggml_tensor * sm   = ggml_soft_max_ext(ctx, x, mask, 0.7f, 0.0f);
        ggml_tensor * silu = ggml_silu(ctx, x);
        for (ggml_tensor * out : {sm, silu}) {
            ASSERT_EQ(compute(ctx, out, RunMode{2, true}), GGML_STATUS_SUCCESS);
            const Array ref = read_tensor(out);
            ASSERT_EQ(compute(ctx, out, RunMode{2, false}), GGML_STATUS_SUCCESS);
            EXPECT_TRUE(matches(read_tensor(out), ref, 1e-12, 1e-6)) << ggml_op_desc(out);
        }
    }
}
