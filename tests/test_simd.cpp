// Every instruction-set specific kernel against its portable twin: dot
// products, conversions, exponentials, matrix-vector products, weighted row
// sums and element-wise arithmetic (the GEMM and mul_mat through the graph:
// test_simd_gemm.cpp).
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
#include <cstdio>
#include <cstdlib>
#if defined(__aarch64__) && defined(__linux__)
#    include <sys/auxv.h>
#endif
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/features.h"
#include "backends/cpu/kernels/gemm.h"
#include "backends/cpu/simd/kernel_table.h"
#include "core/fp16.h"
#include "core/types.h"
#include "simd_test_util.h"
#include "test_util.h"

using namespace loom;
using namespace loom::cpu;
using namespace loomtest;
using namespace loomtest::simd;

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

// The Q8_1 quantizer of the tables that have one: the reference's bits,
// the sum s included, on halves between levels, a zero block and random data.
TEST(Simd, QuantizeQ8_1SameBits) {
    int checked = 0;
    FOR_EACH_SIMD_TABLE(kt) {
        if (kt->quantize_row_q8_1 == nullptr) {
            continue;
        }
        ++checked;
        std::mt19937 rng(5);
        for (int64_t nb : {1, 3, 64}) {
            const int64_t n = nb * QK8_1;
            auto          x = random_floats(rng, size_t(n), -3.0f, 3.0f);
            for (int j = 0; j < QK8_1; ++j) {
                x[size_t(j)] = float(j - 16) + 0.5f;
            }
            x[0] = -127.0f;
            if (nb > 1) {
                std::fill(x.begin() + QK8_1, x.begin() + 2 * QK8_1, 0.0f);
            }
            const Unaligned<float>  ux(x);
            std::vector<block_q8_1> want(static_cast<size_t>(nb)), got(static_cast<size_t>(nb));
            quantize_row_q8_1_ref(x.data(), want.data(), n);
            kt->quantize_row_q8_1(ux.ptr, got.data(), n);
            for (size_t b = 0; b < want.size(); ++b) {
                EXPECT_EQ(0, std::memcmp(&want[b], &got[b], sizeof(block_q8_1)))
                    << kt->name << " blocks " << nb << ", block " << b << ": s " << got[b].s << " want " << want[b].s;
            }
        }
    }
    if (checked == 0) {
        GTEST_SKIP() << "no kernel table here has a Q8_1 quantizer (the Arm tables have one): " << lacking();
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
    // boundaries; buffers start kOff bytes in. The padding bytes are 0xff
    // (NaN as f32, f16 or bf16), so a kernel that reads past K shows.
    c.lda               = ggml_row_size(type, K) + 12;
    c.ldb               = ggml_row_size(opnd, K) + 20;
    c.a.assign(c.lda * size_t(nrows) + kOff, 0xff);
    c.b.assign(c.ldb * size_t(ncols) + kOff, 0xff);
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
            const int64_t Ks_f[] = {1, 7, 8, 9, 31, 32, 33, 64, 100, 515, 2100}; // 515, 2100: blocks of K
            const int64_t Ks_q[] = {32, 64, 96, 320, 4096};
            for (int64_t K : quant ? std::vector<int64_t>(std::begin(Ks_q), std::end(Ks_q))
                                   : std::vector<int64_t>(std::begin(Ks_f), std::end(Ks_f))) {
                for (int64_t nrows : {1, 2, 3, 4, 5, 7, 16, 19, 37}) { // 37: groups of rows
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

// The Arm tables' Q8_0 and Q4_0 products (widening products, SDOT, SMMLA
// tiles of two rows and two columns) give the same bits: each block's
// integer sum is exact and meets the scales in the same order on each.
TEST(Simd, ArmQuantGemvSameBitsOnEveryArmTable) {
    const KernelTable * base = neon_kernels();
    if (base == nullptr) {
        GTEST_SKIP() << "no Arm table runs here: " << lacking();
    }
    int compared = 0;
    FOR_EACH_SIMD_TABLE(kt) {
        if (kt == base || std::string(kt->name).rfind("neon", 0) != 0) continue;
        ++compared;
        std::mt19937 rng(31);
        for (ggml_type type : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
            for (int64_t K : {32, 64, 96, 1056}) {
                for (int64_t nrows : {1, 2, 3, 5, 8, 19}) {
                    for (int ncols = 1; ncols <= GEMV_MAX_COLS; ++ncols) {
                        SCOPED_TRACE(std::string(kt->name) + " " + ggml_type_name(type) + " K " + std::to_string(K) +
                                     " rows " + std::to_string(nrows) + " cols " + std::to_string(ncols));
                        GemvCase           c   = make_gemv_case(rng, type, K, nrows, ncols);
                        const size_t       ldd = size_t(nrows) + 1;
                        std::vector<float> want(ldd * size_t(ncols), -1.0f), got(want);
                        gemv_of(*base, type)(K, c.a.data() + kOff, c.lda, nrows, c.b.data() + kOff, c.ldb, ncols,
                                             want.data(), ldd);
                        gemv_of(*kt, type)(K, c.a.data() + kOff, c.lda, nrows, c.b.data() + kOff, c.ldb, ncols,
                                           got.data(), ldd);
                        ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
                    }
                }
            }
        }
    }
    if (compared == 0) {
        GTEST_SKIP() << "only the neon table runs here";
    }
}

// Q4_0 and Q8_0 in ggml's layout give the AVX2 table's bits on every x86
// table (Note [Q4_0 rows in pairs of lanes]), as their rows interleaved by
// eight do: every row count (tiles of eight and four, and the last rows),
// every column count, and on prepared columns with K cut into parts.
TEST(Simd, X86Q4_0AndQ8_0SameBitsOnEveryX86Table) {
    const KernelTable * base = avx2_kernels();
    if (base == nullptr) {
        GTEST_SKIP() << "the AVX2 table does not run here: " << lacking();
    }
    int compared = 0;
    FOR_EACH_SIMD_TABLE(kt) {
        if (kt == base || std::string(kt->name).rfind("avx", 0) != 0) continue;
        ++compared;
        std::mt19937 rng(33);
        for (ggml_type type : {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0}) {
            const bool           q4    = type == GGML_TYPE_Q4_0;
            const GemvFn         want_fn = q4 ? base->gemv_q4_0 : base->gemv_q8_0;
            const GemvFn         got_fn  = q4 ? kt->gemv_q4_0 : kt->gemv_q8_0;
            const QGemmKernels & q       = q4 ? kt->qgemm_q4_0 : kt->qgemm_q8_0;
            ASSERT_NE(q.gemm, nullptr);
            for (int64_t K : {32, 128, 1056}) {
                const int64_t nb = K / QK8_0;
                for (int64_t nrows : {1, 2, 3, 4, 6, 8, 12, 19, 24}) {
                    for (int ncols = 1; ncols <= GEMV_MAX_COLS; ++ncols) {
                        SCOPED_TRACE(std::string(kt->name) + " " + ggml_type_name(type) + " K " + std::to_string(K) +
                                     " rows " + std::to_string(nrows) + " cols " + std::to_string(ncols));
                        GemvCase           c   = make_gemv_case(rng, type, K, nrows, ncols);
                        const size_t       ldd = size_t(nrows) + 1;
                        std::vector<float> want(ldd * size_t(ncols), -1.0f), got(want), parts(want);
                        const char *       a = reinterpret_cast<const char *>(c.a.data() + kOff);
                        const char *       b = reinterpret_cast<const char *>(c.b.data() + kOff);
                        want_fn(K, a, c.lda, nrows, b, c.ldb, ncols, want.data(), ldd);
                        got_fn(K, a, c.lda, nrows, b, c.ldb, ncols, got.data(), ldd);
                        ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
                        std::vector<char>  prep(q.cols_bytes(K));
                        std::vector<float> acc(qgemm_acc_floats(nrows), 0.0f);
                        q.prepare(K, b, c.ldb, ncols, prep.data());
                        for (int64_t i0 = 0; i0 < nb; i0 += QGEMM_K_ALIGN) {
                            q.gemm(K, i0, std::min(nb, i0 + QGEMM_K_ALIGN), a, c.lda, nrows, prep.data(), b, c.ldb,
                                   ncols, acc.data(), parts.data(), ldd);
                        }
                        ASSERT_EQ(0, std::memcmp(parts.data(), want.data(), parts.size() * sizeof(float)));
                    }
                }
            }
        }
    }
    if (compared == 0) {
        GTEST_SKIP() << "only the AVX2 table runs here";
    }
}

// More than four float columns over long rows: the rows go in blocks
// (several per pass of four columns); each column's results are those of a
// call with its group of four columns alone, bit for bit, and near the
// portable table's.
TEST(Simd, FloatGemvRowBlocksKeepTheBits) {
    FOR_EACH_SIMD_TABLE(kt) {
        std::mt19937 rng(17);
        for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16}) {
            const int64_t K = 40000; // rows of 80 KiB or more: a few per block
            for (int64_t nrows : {9, 37}) {
                for (int ncols = 5; ncols <= GEMV_MAX_COLS; ++ncols) {
                    SCOPED_TRACE(std::string(kt->name) + " " + ggml_type_name(type) + " rows " +
                                 std::to_string(nrows) + " cols " + std::to_string(ncols));
                    GemvCase     c   = make_gemv_case(rng, type, K, nrows, ncols);
                    const size_t ldd = size_t(nrows);
                    std::vector<float> got(ldd * size_t(ncols)), alone(ldd * size_t(ncols)), want(ldd * size_t(ncols));
                    const uint8_t * a = c.a.data() + kOff;
                    const uint8_t * b = c.b.data() + kOff;
                    gemv_of(*kt, type)(K, a, c.lda, nrows, b, c.ldb, ncols, got.data(), ldd);
                    for (int c0 = 0; c0 < ncols; c0 += 4) {
                        gemv_of(*kt, type)(K, a, c.lda, nrows, b + size_t(c0) * c.ldb, c.ldb, std::min(4, ncols - c0),
                                           alone.data() + size_t(c0) * ldd, ldd);
                    }
                    gemv_of(portable_kernels(), type)(K, a, c.lda, nrows, b, c.ldb, ncols, want.data(), ldd);
                    for (size_t i = 0; i < got.size(); ++i) {
                        ASSERT_EQ(got[i], alone[i]) << "result " << i;
                        ASSERT_NEAR(got[i], want[i], 1e-3f * (1.0f + std::fabs(want[i]))) << "result " << i;
                    }
                }
            }
        }
    }
}

// Every product on prepared columns a table offers.
struct QGemmCase {
    std::string          name;
    ggml_type            type;
    QGemmKernels         k;
    const KernelTable *  table = nullptr; // whose gemv gives the same bits, if any
};

std::vector<QGemmCase> qgemm_cases() {
    std::vector<QGemmCase> out;
    for (const KernelTable * kt : simd_tables()) {
        if (kt->qgemm_q4_0.gemm != nullptr) {
            out.push_back({std::string(kt->name) + " q4_0", GGML_TYPE_Q4_0, kt->qgemm_q4_0, kt});
        }
        if (kt->qgemm_q8_0.gemm != nullptr) {
            out.push_back({std::string(kt->name) + " q8_0", GGML_TYPE_Q8_0, kt->qgemm_q8_0, kt});
        }
    }
    return out;
}

// Products on prepared columns: within the gemv tolerance of the portable
// table and the bits of the same table's gemv; K cut into parts gives the
// same bits; the preparation writes exactly its bytes.
TEST(Simd, PreparedColumnProducts) {
    const auto cases = qgemm_cases();
    if (cases.empty()) {
        GTEST_SKIP() << "no kernel table here prepares columns: " << lacking();
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
                    if (qc.table != nullptr) {
                        std::vector<float> gemv(ldd * size_t(ncols), -1.0f);
                        gemv_of(*qc.table, qc.type)(K, c.a.data() + kOff, c.lda, nrows, c.b.data() + kOff, c.ldb,
                                                    ncols, gemv.data(), ldd);
                        ASSERT_EQ(std::memcmp(gemv.data(), got.data(), got.size() * sizeof(float)), 0)
                            << "the table's gemv";
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
                // A value on each side of the output must stay as it is.
                std::vector<float> want(size_t(n) + 1, -7.0f), got(size_t(n) + 2, -7.0f);
                portable_kernels().binary_f32[op](n, a.data(), b.data(), want.data());
                kt->binary_f32[op](n, a.data() + 1, b.data() + 1, got.data() + 1); // unaligned
                std::vector<float> want_shift(size_t(n) + 2, -7.0f);
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

TEST(Simd, ScaleSameBits) {
    FOR_EACH_SIMD_TABLE(kt) {
        std::mt19937 rng(13);
        for (int64_t n : kSizes) {
            SCOPED_TRACE(std::string(kt->name) + " n " + std::to_string(n));
            auto x = random_floats(rng, size_t(n) + 1);
            if (n > 3) {
                x[1] = INFINITY;
                x[2] = NAN;
                x[3] = 1e-40f; // subnormal
            }
            for (float s : {0.37f, -3.0e30f, 0.0f}) {
                // A value on each side of the output must stay as it is.
                std::vector<float> want(size_t(n) + 2, -7.0f), got(size_t(n) + 2, -7.0f);
                for (int64_t i = 0; i < n; ++i) want[size_t(i) + 1] = x[size_t(i) + 1] * s;
                kt->scale_f32(n, x.data() + 1, s, got.data() + 1); // unaligned
                ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << "s " << s;
                std::vector<float> inplace(x);
                kt->scale_f32(n, inplace.data() + 1, s, inplace.data() + 1);
                ASSERT_EQ(0, std::memcmp(inplace.data() + 1, want.data() + 1, size_t(n) * sizeof(float)));
            }
        }
    }
}

// The normalisations' sums in eight double lanes: the portable table's bits
// for sizes with and without a tail, unaligned rows, lanes that start from
// earlier sums, and infinities and NaNs in the row.
TEST(Simd, NormLaneSumsSameBits) {
    FOR_EACH_SIMD_TABLE(kt) {
        std::mt19937 rng(17);
        for (int64_t n : kSizes) {
            for (bool odd : {false, true}) {
                SCOPED_TRACE(std::string(kt->name) + " n " + std::to_string(n) + (odd ? " with inf/nan" : ""));
                auto x = random_floats(rng, size_t(n) + 1, -3.0e4f, 3.0e4f);
                if (odd && n > 10) {
                    x[3] = 1e-40f; // subnormal
                    x[5] = INFINITY;
                    x[9] = NAN;
                }
                for (int sq = 0; sq < 2; ++sq) {
                    double want[8], got[8];
                    for (int j = 0; j < 8; ++j) want[j] = got[j] = j * 0.37 - 1.0;
                    auto pf = sq ? portable_kernels().sum_sq_lanes_f64 : portable_kernels().sum_lanes_f64;
                    auto kf = sq ? kt->sum_sq_lanes_f64 : kt->sum_lanes_f64;
                    pf(n, x.data() + 1, want);
                    kf(n, x.data() + 1, got); // unaligned
                    ASSERT_EQ(0, std::memcmp(got, want, sizeof(got))) << "squares " << sq;
                    // Lane i % 8 holds value i's part: against a double
                    // evaluation of each lane.
                    if (!odd) {
                        for (int j = 0; j < 8; ++j) {
                            double lane = j * 0.37 - 1.0;
                            for (int64_t i = j; i < n; i += 8) {
                                const double v = x[size_t(i) + 1];
                                lane += sq ? v * v : v;
                            }
                            EXPECT_NEAR(want[j], lane, 1e-9 * (std::fabs(lane) + 1.0) * double(n + 1)) << j;
                        }
                    }
                }
            }
        }
    }
}

// NORM, RMS_NORM and GROUP_NORM through the graph: the table's sums and
// scaling give the portable kernels' bits.
TEST(Simd, NormsSameBitsAsPortable) {
    std::mt19937 rng(19);
    for (int64_t n : {1, 7, 8, 33, 256, 1001}) {
        SCOPED_TRACE("n " + std::to_string(n));
        Context       ctx;
        ggml_tensor * x = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, n, 5, 6);
        fill_random(x, rng, -8.0, 8.0);
        ggml_tensor * outs[] = {ggml_norm(ctx, x, 1e-5f), ggml_rms_norm(ctx, x, 1e-6f), ggml_group_norm(ctx, x, 4, 1e-6f)};
        for (ggml_tensor * out : outs) {
            ASSERT_EQ(compute(ctx, out, RunMode{2, true}), GGML_STATUS_SUCCESS);
            const Array ref = read_tensor(out);
            ASSERT_EQ(compute(ctx, out, RunMode{2, false}), GGML_STATUS_SUCCESS);
            const Array got = read_tensor(out);
            ASSERT_EQ(got.v.size(), ref.v.size());
            EXPECT_EQ(0, std::memcmp(got.v.data(), ref.v.data(), ref.v.size() * sizeof(double))) << ggml_op_desc(out);
        }
    }
}

// The AdamW step gives the portable table's bits for sizes with and without
// a tail, unaligned rows, zero and huge gradients; values past n stay.
TEST(Simd, AdamwSameBits) {
    const AdamwStep s{0.9f, 0.999f, 1.0f - 0.9f, 1.0f - 0.999f, 1.0f / (1.0f - 0.9f), 1.0f / (1.0f - 0.999f),
                      1e-8f, 1e-3f, 1.0f - 1e-3f * 0.01f};
    FOR_EACH_SIMD_TABLE(kt) {
        std::mt19937 rng(15);
        for (int64_t n : kSizes) {
            SCOPED_TRACE(std::string(kt->name) + " n " + std::to_string(n));
            const size_t sz = size_t(n) + 2;
            auto         g  = random_floats(rng, sz);
            auto         w0 = random_floats(rng, sz);
            auto         m0 = random_floats(rng, sz);
            auto         v0 = random_floats(rng, sz);
            for (float & x : v0) x = std::fabs(x);
            if (n > 3) {
                g[1] = 0.0f;
                g[2] = 3.0e18f;
                g[3] = -1e-30f;
            }
            std::vector<float> w = w0, m = m0, v = v0, ww = w0, wm = m0, wv = v0;
            portable_kernels().adamw_f32(n, ww.data() + 1, g.data() + 1, wm.data() + 1, wv.data() + 1, s);
            kt->adamw_f32(n, w.data() + 1, g.data() + 1, m.data() + 1, v.data() + 1, s);
            ASSERT_EQ(0, std::memcmp(w.data(), ww.data(), sz * sizeof(float)));
            ASSERT_EQ(0, std::memcmp(m.data(), wm.data(), sz * sizeof(float)));
            ASSERT_EQ(0, std::memcmp(v.data(), wv.data(), sz * sizeof(float)));
        }
    }
}

// Rotations give the portable table's bits in both modes, for pair counts
// with and without a tail, into another row and in place; values past the
// rotated ones stay as they are.
TEST(Simd, RopeSameBits) {
    FOR_EACH_SIMD_TABLE(kt) {
        std::mt19937 rng(14);
        for (int64_t half : {1, 3, 7, 8, 10, 16, 17, 32, 40, 64, 67}) {
            for (bool neox : {false, true}) {
                SCOPED_TRACE(std::string(kt->name) + " half " + std::to_string(half) + (neox ? " neox" : " normal"));
                const auto x   = random_floats(rng, size_t(2 * half) + 2, -4.0f, 4.0f);
                const auto ang = random_floats(rng, size_t(half), -100.0f, 100.0f);
                std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
                for (size_t i = 0; i < cs.size(); ++i) {
                    cs[i] = std::cos(ang[i]);
                    sn[i] = std::sin(ang[i]);
                }
                std::vector<float> want(x.size(), -7.0f), got(x.size(), -7.0f);
                portable_kernels().rope_f32(half, x.data() + 1, want.data() + 1, cs.data(), sn.data(), neox);
                kt->rope_f32(half, x.data() + 1, got.data() + 1, cs.data(), sn.data(), neox); // unaligned
                ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
                // An independent check of one pair in each mode.
                const size_t a = 1, b = neox ? size_t(half) + 1 : 2;
                EXPECT_NEAR(want[a], double(x[a]) * cs[0] - double(x[b]) * sn[0], 1e-5);
                EXPECT_NEAR(want[b], double(x[a]) * sn[0] + double(x[b]) * cs[0], 1e-5);
                std::vector<float> inplace(x);
                kt->rope_f32(half, inplace.data() + 1, inplace.data() + 1, cs.data(), sn.data(), neox);
                ASSERT_EQ(0, std::memcmp(inplace.data() + 1, want.data() + 1, size_t(2 * half) * sizeof(float)));
                EXPECT_EQ(f32_bits(inplace.back()), f32_bits(x.back()));
            }
        }
    }
}

TEST(Simd, TableIsChosenOnce) {
    const KernelTable & t = best_kernels();
    EXPECT_EQ(&t, &best_kernels());
    EXPECT_STRNE(t.name, nullptr);
    // What this processor runs, asked of the compiler's own CPU model
    // (libgcc's, which also checks that the OS saves the vector state), not
    // of loom's feature reader.
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    const bool avx2   = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
    const bool avx512bf16 = avx512 && __builtin_cpu_supports("avx512bf16");
#else
    const bool avx2 = false, avx512 = false, avx512bf16 = false;
#endif
    // On 64-bit Arm, the kernel's capability bits read here (HWCAP_ASIMD,
    // HWCAP_ASIMDDP, HWCAP2_I8MM).
#if defined(__aarch64__) && defined(__linux__)
    const bool neon    = getauxval(AT_HWCAP) & (1ul << 1);
    const bool dotprod = neon && (getauxval(AT_HWCAP) & (1ul << 20));
    const bool i8mm    = dotprod && (getauxval(AT_HWCAP2) & (1ul << 13));
#else
    const bool neon = false, dotprod = false, i8mm = false;
#endif
    EXPECT_EQ(neon_table_runs(), neon);
    EXPECT_EQ(neon_dotprod_table_runs(), dotprod);
    EXPECT_EQ(neon_i8mm_table_runs(), i8mm);
    EXPECT_EQ(neon_kernels() != nullptr, neon);
    EXPECT_EQ(neon_dotprod_kernels() != nullptr, dotprod);
    EXPECT_EQ(neon_i8mm_kernels() != nullptr, i8mm);
    EXPECT_EQ(avx2_table_runs(), avx2);
    EXPECT_EQ(avx512_table_runs(), avx512);
    EXPECT_EQ(avx512bf16_table_runs(), avx512bf16);
    // A table the processor cannot run is never built nor offered.
    EXPECT_EQ(avx2_kernels() != nullptr, avx2);
    EXPECT_EQ(avx512_kernels() != nullptr, avx512);
    EXPECT_EQ(avx512bf16_kernels() != nullptr, avx512bf16);
    std::vector<std::string> names = {"portable"};
    if (avx2) names.push_back("avx2");
    if (avx512) names.push_back("avx512");
    if (avx512bf16) names.push_back("avx512_bf16");
    if (neon) names.push_back("neon");
    if (dotprod) names.push_back("neon_dotprod");
    if (i8mm) names.push_back("neon_i8mm");
    std::vector<std::string> runnable;
    for (const KernelTable * r : runnable_kernels()) runnable.emplace_back(r->name);
    EXPECT_EQ(runnable, names);
    // LOOM_CPU_KERNELS names a table to take instead, if this processor runs it.
    const char * override = std::getenv("LOOM_CPU_KERNELS");
    std::string  want     = names.back();
    if (override != nullptr && std::find(names.begin(), names.end(), override) != names.end()) want = override;
    EXPECT_EQ(t.name, want);
    EXPECT_STREQ(kernels(true).name, "portable");
    EXPECT_EQ(runnable_kernels().front(), &portable_kernels());
    std::printf("kernel table: %s (runs:", t.name);
    for (const std::string & n : names) std::printf(" %s", n.c_str());
    std::printf(")\n");
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

// The recurrences' row steps: decay_dot's new state has the portable table's
// bits (from another row and in place, with and without a vector of
// decays and a second term), its dot product is within the tolerance of
// the dot products of a double-precision sum over the new state; the delta
// rule's row and RWKV-7's rows, with their results, follow a double-precision
// evaluation of the same formulas.
TEST(Simd, RecurrenceRowsAgainstPortable) {
    FOR_EACH_SIMD_TABLE(kt) {
        std::mt19937 rng(16);
        for (int64_t n : kSizes) {
            const size_t sz = size_t(n) + 2;
            const auto   s0 = random_floats(rng, sz), a = random_floats(rng, sz), b = random_floats(rng, sz);
            const auto   c = random_floats(rng, sz), r = random_floats(rng, sz);
            for (int variant = 0; variant < 8; ++variant) {
                const bool vec_a = variant & 1, has_c = variant & 2, inplace = variant & 4;
                SCOPED_TRACE(std::string(kt->name) + " n " + std::to_string(n) + " variant " +
                             std::to_string(variant));
                std::vector<float> want(sz, -7.0f), got(sz, -7.0f);
                if (inplace) {
                    want = s0;
                    got  = s0;
                }
                const float * from_w = inplace ? want.data() + 1 : s0.data() + 1;
                const float * from_g = inplace ? got.data() + 1 : s0.data() + 1;
                const float   dw = portable_kernels().decay_dot_f32(n, from_w, want.data() + 1,
                                                                    vec_a ? a.data() + 1 : nullptr, 0.83f,
                                                                    b.data() + 1, -1.7f,
                                                                    has_c ? c.data() + 1 : nullptr, 0.4f, r.data() + 1);
                const float dg = kt->decay_dot_f32(n, from_g, got.data() + 1, vec_a ? a.data() + 1 : nullptr, 0.83f,
                                                   b.data() + 1, -1.7f, has_c ? c.data() + 1 : nullptr, 0.4f,
                                                   r.data() + 1);
                ASSERT_EQ(0, std::memcmp(got.data(), want.data(), sz * sizeof(float)));
                double exact = 0.0, mag = 0.0;
                for (int64_t i = 1; i <= n; ++i) {
                    const double ai = vec_a ? a[size_t(i)] : 0.83;
                    const double v  = double(s0[size_t(i)]) * ai + double(b[size_t(i)]) * -1.7 +
                                     (has_c ? double(c[size_t(i)]) * 0.4f : 0.0);
                    EXPECT_NEAR(want[size_t(i)], v, 1e-5 * (std::fabs(v) + 1.0));
                    exact += double(want[size_t(i)]) * r[size_t(i)];
                    mag += std::fabs(double(want[size_t(i)]) * r[size_t(i)]);
                }
                EXPECT_NEAR(dw, exact, 1e-5 * mag + 1e-30);
                EXPECT_NEAR(dg, exact, 1e-5 * mag + 1e-30);
            }
            for (bool inplace : {false, true}) {
                // RWKV-7's rows against a double-precision evaluation: each
                // row's sa, new state and output.
                SCOPED_TRACE(std::string(kt->name) + " wkv7 n " + std::to_string(n) + (inplace ? " in place" : ""));
                const int64_t rows = std::min<int64_t>(n, 5);
                const size_t  m    = size_t(rows * n) + 2;
                const auto    st = random_floats(rng, m), w = random_floats(rng, sz, 0.5f, 1.0f);
                const auto    k = random_floats(rng, sz), v = random_floats(rng, size_t(rows) + 1);
                std::vector<float> got = inplace ? st : std::vector<float>(m, -7.0f);
                std::vector<float> out(size_t(rows) + 2, -7.0f);
                kt->wkv7_rows_f32(n, rows, inplace ? got.data() + 1 : st.data() + 1, got.data() + 1, r.data() + 1,
                                  w.data() + 1, k.data() + 1, v.data(), a.data() + 1, b.data() + 1, out.data() + 1);
                for (int64_t i = 0; i < rows; ++i) {
                    const float * row = st.data() + 1 + i * n;
                    double        sa = 0.0, mag = 0.0;
                    for (int64_t j = 0; j < n; ++j) {
                        sa += double(row[j]) * a[size_t(j) + 1];
                        mag += std::fabs(double(row[j]) * a[size_t(j) + 1]);
                    }
                    double o = 0.0, omag = 0.0;
                    for (int64_t j = 0; j < n; ++j) {
                        const size_t jj = size_t(j) + 1;
                        const double y  = double(row[j]) * w[jj] + double(k[jj]) * v[size_t(i)] + double(b[jj]) * sa;
                        const double tol = 1e-5 * (std::fabs(y) + std::fabs(b[jj]) * (mag + 1.0));
                        ASSERT_NEAR(got[size_t(i * n) + jj], y, tol) << i << " " << j;
                        o += y * r[jj];
                        omag += std::fabs(y * r[jj]) + std::fabs(double(r[jj]) * b[jj]) * (mag + 1.0);
                    }
                    EXPECT_NEAR(out[size_t(i) + 1], o, 1e-5 * (omag + 1.0)) << i;
                }
                EXPECT_EQ(f32_bits(out[0]), f32_bits(-7.0f));
                EXPECT_EQ(f32_bits(out[size_t(rows) + 1]), f32_bits(-7.0f));
                EXPECT_EQ(f32_bits(got[0]), f32_bits(inplace ? st[0] : -7.0f));
                EXPECT_EQ(f32_bits(got.back()), f32_bits(inplace ? st.back() : -7.0f));
            }
            for (bool vec_g : {false, true}) {
                SCOPED_TRACE(std::string(kt->name) + " delta n " + std::to_string(n) + (vec_g ? " vector" : ""));
                const auto  g = random_floats(rng, sz, 0.5f, 1.0f), k = random_floats(rng, sz);
                const auto  q = random_floats(rng, sz);
                auto        got = s0;
                const float out = kt->delta_row_f32(n, got.data() + 1, vec_g ? g.data() + 1 : nullptr, 0.9f,
                                                    k.data() + 1, 0.6f, 0.3f, q.data() + 1);
                std::vector<double> s(sz);
                double              sk = 0.0, mag = 0.0;
                for (size_t i = 1; i <= size_t(n); ++i) {
                    s[i] = double(s0[i]) * (vec_g ? g[i] : 0.9f);
                    sk += s[i] * k[i];
                    mag += std::fabs(s[i] * k[i]);
                }
                const double d = (0.6f - sk) * 0.3f;
                double       sq = 0.0, qmag = 0.0;
                for (size_t i = 1; i <= size_t(n); ++i) {
                    s[i] += k[i] * d;
                    sq += s[i] * q[i];
                    qmag += std::fabs(s[i] * q[i]);
                    const double tol = 1e-5 * (std::fabs(s[i]) + std::fabs(k[i]) * (mag + 1.0));
                    ASSERT_NEAR(got[i], s[i], tol) << i;
                }
                EXPECT_NEAR(out, sq, 1e-5 * (qmag + mag + 1.0));
                EXPECT_EQ(f32_bits(got[0]), f32_bits(s0[0]));
                EXPECT_EQ(f32_bits(got.back()), f32_bits(s0.back()));
            }
        }
    }
}
