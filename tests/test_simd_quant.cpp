// The quantized kernels of the SIMD tables beyond Q8_0 and Q4_0
// (KernelTable::gemv_quant: Q2_K..Q6_K, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4,
// IQ4_XS, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, TQ2_0,
// TQ1_0; and quantize_row_q8_K) against their portable twins, the dot products of
// kernels/quant_dot.h, and mul_mat with those weights through the graph.
//
// Weights are random bytes (every level, scale and min pattern, Q6_K's
// scale -128 included, every grid index and sign pattern of the i-quants)
// with finite random block scales; activations are
// random floats quantized to the operand type (Q8_K, Q8_1, Q8_0) by the
// core's reference quantizers.
//
// Bounds: with a_k the dequantized weights, y_k the dequantized Q8_K
// activations and z_k the weights' constant part (the row dequantized with
// every level field zeroed: -dmin * min, or the level offset times the
// scale; none, z = 0, for the grid i-quants and the ternary types, whose
// levels are signed and meet the column as exact integer sums with no
// offset to cancel), M = sum |a_k y_k| + sum |z_k y_k| is the size of the
// terms before cancellation:
//  - the portable dot product against sum a_k y_k in double: <= 1e-5 M
//    (integer sums exact, a few f32 roundings per super-block);
//  - every SIMD gemv against the portable dot product: <= 1e-5 M (the
//    integer sums are the same, the f32 additions in another order);
//  - each block alone with weight and column scales of 1 (types with a
//    constant part or a lookup table): the same bits, its integer totals;
//  - the Q8_K quantizer: the same bytes as the reference one;
//  - mul_mat through the graph, on a table with the K-quant kernels: each
//    element against the double-precision sum of a_k y_k (b quantized by
//    the reference quantizer), <= 1e-5 M; on a table without them (the
//    portable one) against the f32 b, <= 1e-5 sum |a_k b_k|; 1..4 threads
//    and every column count give the same bits.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/kernels/quant_dot.h"
#include "backends/cpu/simd/kernel_table.h"
#include "core/fp16.h"
#include "core/types.h"
#include "core/types/i_quants.h"
#include "core/types/legacy_k.h"
#include "core/types/other.h"
#include "simd_test_util.h"
#include "test_util.h"

using namespace loom;
using namespace loom::cpu;
using namespace loomtest;
using namespace loomtest::simd;

namespace {

// Every weight type with SIMD kernels here.
constexpr ggml_type kTypes[] = {GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K,   GGML_TYPE_Q5_K,
                                GGML_TYPE_Q6_K, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0,   GGML_TYPE_Q5_1,
                                GGML_TYPE_IQ4_NL, GGML_TYPE_MXFP4, GGML_TYPE_IQ4_XS, GGML_TYPE_IQ2_XXS,
                                GGML_TYPE_IQ2_XS, GGML_TYPE_IQ2_S, GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S,
                                GGML_TYPE_IQ1_S, GGML_TYPE_IQ1_M, GGML_TYPE_TQ2_0, GGML_TYPE_TQ1_0};

// The types of kernels/iquant_dot.cpp: signed levels, no constant part.
bool signed_levels(ggml_type t) {
    switch (t) {
        case GGML_TYPE_IQ2_XXS:
        case GGML_TYPE_IQ2_XS:
        case GGML_TYPE_IQ2_S:
        case GGML_TYPE_IQ3_XXS:
        case GGML_TYPE_IQ3_S:
        case GGML_TYPE_IQ1_S:
        case GGML_TYPE_IQ1_M:
        case GGML_TYPE_TQ2_0:
        case GGML_TYPE_TQ1_0: return true;
        default: return false;
    }
}

using DotFn = float (*)(int64_t n, const void * x, const void * y);

DotFn portable_dot(ggml_type t) {
    switch (t) {
        case GGML_TYPE_Q2_K: return dot_q2_K_q8_K;
        case GGML_TYPE_Q3_K: return dot_q3_K_q8_K;
        case GGML_TYPE_Q4_K: return dot_q4_K_q8_K;
        case GGML_TYPE_Q5_K: return dot_q5_K_q8_K;
        case GGML_TYPE_Q6_K: return dot_q6_K_q8_K;
        case GGML_TYPE_Q4_1: return dot_q4_1_q8_1;
        case GGML_TYPE_Q5_0: return dot_q5_0_q8_0;
        case GGML_TYPE_Q5_1: return dot_q5_1_q8_1;
        case GGML_TYPE_IQ4_NL: return dot_iq4_nl_q8_0;
        case GGML_TYPE_MXFP4: return dot_mxfp4_q8_0;
        case GGML_TYPE_IQ4_XS: return dot_iq4_xs_q8_K;
        case GGML_TYPE_IQ2_XXS: return dot_iq2_xxs_q8_K;
        case GGML_TYPE_IQ2_XS: return dot_iq2_xs_q8_K;
        case GGML_TYPE_IQ2_S: return dot_iq2_s_q8_K;
        case GGML_TYPE_IQ3_XXS: return dot_iq3_xxs_q8_K;
        case GGML_TYPE_IQ3_S: return dot_iq3_s_q8_K;
        case GGML_TYPE_IQ1_S: return dot_iq1_s_q8_K;
        case GGML_TYPE_IQ1_M: return dot_iq1_m_q8_K;
        case GGML_TYPE_TQ2_0: return dot_tq2_0_q8_K;
        case GGML_TYPE_TQ1_0: return dot_tq1_0_q8_K;
        default: return nullptr;
    }
}

// Random bytes for nb blocks of type t, with finite positive scales (all
// 1 with unit_scales: MXFP4's E8M0 128, whose half is 1).
void random_blocks(std::mt19937 & rng, ggml_type t, int64_t nb, unsigned char * out, bool unit_scales = false) {
    std::uniform_int_distribution<int>    byte(0, 255);
    std::uniform_real_distribution<float> scale(0.0005f, 0.02f);
    const size_t                          bs = ggml_type_size(t);
    for (size_t i = 0; i < size_t(nb) * bs; ++i) {
        out[i] = uint8_t(byte(rng));
    }
    for (int64_t i = 0; i < nb; ++i) {
        unsigned char * b = out + size_t(i) * bs;
        uint16_t        d = fp32_to_fp16(scale(rng)), m = fp32_to_fp16(scale(rng));
        if (unit_scales) {
            d = m = fp32_to_fp16(1.0f);
        }
        switch (t) {
            case GGML_TYPE_Q2_K: {
                auto * x = reinterpret_cast<block_q2_K *>(b);
                x->d     = d;
                x->dmin  = m;
                break;
            }
            case GGML_TYPE_Q3_K: reinterpret_cast<block_q3_K *>(b)->d = d; break;
            case GGML_TYPE_Q4_K: {
                auto * x = reinterpret_cast<block_q4_K *>(b);
                x->d     = d;
                x->dmin  = m;
                break;
            }
            case GGML_TYPE_Q5_K: {
                auto * x = reinterpret_cast<block_q5_K *>(b);
                x->d     = d;
                x->dmin  = m;
                break;
            }
            case GGML_TYPE_Q6_K: reinterpret_cast<block_q6_K *>(b)->d = d; break;
            case GGML_TYPE_Q4_1: {
                auto * x = reinterpret_cast<block_q4_1 *>(b);
                x->d     = d;
                x->m     = m;
                break;
            }
            case GGML_TYPE_Q5_0: reinterpret_cast<block_q5_0 *>(b)->d = d; break;
            case GGML_TYPE_Q5_1: {
                auto * x = reinterpret_cast<block_q5_1 *>(b);
                x->d     = d;
                x->m     = m;
                break;
            }
            case GGML_TYPE_IQ4_NL: reinterpret_cast<block_iq4_nl *>(b)->d = d; break;
            case GGML_TYPE_IQ4_XS: reinterpret_cast<block_iq4_xs *>(b)->d = d; break;
            case GGML_TYPE_MXFP4: // scales 2^-12 .. 2^-4 (E8M0 115 .. 123)
                reinterpret_cast<block_mxfp4 *>(b)->e = unit_scales ? uint8_t(128) : uint8_t(115 + byte(rng) % 9);
                break;
            case GGML_TYPE_IQ2_XXS: reinterpret_cast<block_iq2_xxs *>(b)->d = d; break;
            case GGML_TYPE_IQ2_XS: reinterpret_cast<block_iq2_xs *>(b)->d = d; break;
            case GGML_TYPE_IQ2_S: reinterpret_cast<block_iq2_s *>(b)->d = d; break;
            case GGML_TYPE_IQ3_XXS: reinterpret_cast<block_iq3_xxs *>(b)->d = d; break;
            case GGML_TYPE_IQ3_S: reinterpret_cast<block_iq3_s *>(b)->d = d; break;
            case GGML_TYPE_IQ1_S: reinterpret_cast<block_iq1_s *>(b)->d = d; break;
            case GGML_TYPE_IQ1_M: {
                // The scale's nibble i is the top nibble of scale word i.
                auto *   x = reinterpret_cast<block_iq1_m *>(b);
                uint16_t sc[4];
                std::memcpy(sc, x->scales, sizeof(sc));
                for (int w = 0; w < 4; ++w) {
                    sc[w] = uint16_t((sc[w] & 0x0fff) | (((d >> (4 * w)) & 0xf) << 12));
                }
                std::memcpy(x->scales, sc, sizeof(sc));
                break;
            }
            case GGML_TYPE_TQ2_0: reinterpret_cast<block_tq2_0 *>(b)->d = d; break;
            case GGML_TYPE_TQ1_0: reinterpret_cast<block_tq1_0 *>(b)->d = d; break;
            default: FAIL() << "not a type of these kernels";
        }
    }
}

// The row's constant part: the row with its level fields zeroed.
std::vector<float> constant_part(ggml_type t, const unsigned char * row, int64_t K) {
    if (signed_levels(t)) {
        return std::vector<float>(size_t(K), 0.0f);
    }
    const size_t               bs = ggml_type_size(t);
    const int64_t              nb = K / ggml_blck_size(t);
    std::vector<unsigned char> z(row, row + size_t(nb) * bs);
    for (int64_t i = 0; i < nb; ++i) {
        unsigned char * b = z.data() + size_t(i) * bs;
        switch (t) {
            case GGML_TYPE_Q2_K: std::memset(reinterpret_cast<block_q2_K *>(b)->qs, 0, QK_K / 4); break;
            case GGML_TYPE_Q3_K: {
                auto * x = reinterpret_cast<block_q3_K *>(b);
                std::memset(x->qs, 0, sizeof(x->qs));
                std::memset(x->hmask, 0, sizeof(x->hmask));
                break;
            }
            case GGML_TYPE_Q4_K: std::memset(reinterpret_cast<block_q4_K *>(b)->qs, 0, QK_K / 2); break;
            case GGML_TYPE_Q5_K: {
                auto * x = reinterpret_cast<block_q5_K *>(b);
                std::memset(x->qs, 0, sizeof(x->qs));
                std::memset(x->qh, 0, sizeof(x->qh));
                break;
            }
            case GGML_TYPE_Q6_K: {
                auto * x = reinterpret_cast<block_q6_K *>(b);
                std::memset(x->ql, 0, sizeof(x->ql));
                std::memset(x->qh, 0, sizeof(x->qh));
                break;
            }
            case GGML_TYPE_Q4_1: std::memset(reinterpret_cast<block_q4_1 *>(b)->qs, 0, 16); break;
            case GGML_TYPE_Q5_0: {
                auto * x = reinterpret_cast<block_q5_0 *>(b);
                std::memset(x->qs, 0, sizeof(x->qs));
                std::memset(x->qh, 0, sizeof(x->qh));
                break;
            }
            case GGML_TYPE_Q5_1: {
                auto * x = reinterpret_cast<block_q5_1 *>(b);
                std::memset(x->qs, 0, sizeof(x->qs));
                std::memset(x->qh, 0, sizeof(x->qh));
                break;
            }
            // Level 0 of IQ4_NL and IQ4_XS is the table's -127.
            case GGML_TYPE_IQ4_NL: std::memset(reinterpret_cast<block_iq4_nl *>(b)->qs, 0, 16); break;
            case GGML_TYPE_IQ4_XS: std::memset(reinterpret_cast<block_iq4_xs *>(b)->qs, 0, QK_K / 2); break;
            case GGML_TYPE_MXFP4: std::memset(reinterpret_cast<block_mxfp4 *>(b)->qs, 0, 16); break;
            default: break;
        }
    }
    return to_floats(t, z.data(), K);
}

struct Bound {
    double exact; // sum a_k y_k in double
    double mag;   // M
};

// op's values of a quantized column q (for the bound below) and, for Q8_1,
// what its fp16 block sums s are off the sums of its values: s_b - sum y.
std::vector<double> s_errors(ggml_type op, const void * q, int64_t K) {
    std::vector<double> err;
    if (op != GGML_TYPE_Q8_1) {
        return err;
    }
    const auto * blocks = static_cast<const block_q8_1 *>(q);
    for (int64_t i = 0; i < K / 32; ++i) {
        double sum = 0.0;
        for (int j = 0; j < 32; ++j) {
            sum += double(fp16_to_fp32(blocks[i].d)) * double(blocks[i].qs[j]);
        }
        err.push_back(double(fp16_to_fp32(blocks[i].s)) - sum);
    }
    return err;
}

// exact: the product as the types define it (Q4_1 and Q5_1: each block's
// min m meets the column's s, which differs from the sum of its values by
// its fp16 rounding: exact adds m (s_b - sum y) per block).
Bound bound_of(ggml_type t, const unsigned char * row, const std::vector<float> & y, int64_t K,
               const std::vector<double> & s_err = {}) {
    const std::vector<float> a = to_floats(t, row, K);
    const std::vector<float> z = constant_part(t, row, K);
    Bound                    b{0.0, 0.0};
    for (size_t i = 0; i < s_err.size(); ++i) {
        b.exact += double(z[32 * i]) * s_err[i];
    }
    for (int64_t k = 0; k < K; ++k) {
        b.exact += double(a[size_t(k)]) * double(y[size_t(k)]);
        b.mag += std::fabs(double(a[size_t(k)]) * double(y[size_t(k)])) +
                 std::fabs(double(z[size_t(k)]) * double(y[size_t(k)]));
    }
    return b;
}

// The values of a Q8_K row (the type table gives Q8_K no to_float).
std::vector<float> q8_K_floats(const block_q8_K * q, int64_t K) {
    std::vector<float> out(static_cast<size_t>(K));
    dequantize_row_q8_K(q, out.data(), K);
    return out;
}

// A column of K floats in operand type op (Q8_K, Q8_1 or Q8_0) by the
// reference quantizer, and its values.
void quantize_column(ggml_type op, const float * x, void * out, int64_t K) {
    switch (op) {
        case GGML_TYPE_Q8_K: quantize_row_q8_K_ref(x, out, K); break;
        case GGML_TYPE_Q8_1: quantize_row_q8_1_ref(x, out, K); break;
        default: quantize_row_q8_0_ref(x, out, K); break;
    }
}
std::vector<float> column_floats(ggml_type op, const void * q, int64_t K) {
    if (op == GGML_TYPE_Q8_K) {
        return q8_K_floats(static_cast<const block_q8_K *>(q), K);
    }
    std::vector<float> out(static_cast<size_t>(K));
    for (int64_t i = 0; i < K / 32; ++i) {
        // Q8_0 and Q8_1 both start with the half d, then (Q8_1) s.
        const auto * b  = static_cast<const unsigned char *>(q) + size_t(i) * ggml_type_size(op);
        uint16_t     dh;
        std::memcpy(&dh, b, sizeof(dh));
        const auto * qs = reinterpret_cast<const int8_t *>(b + (op == GGML_TYPE_Q8_1 ? 4 : 2));
        for (int j = 0; j < 32; ++j) {
            out[size_t(32 * i + j)] = fp16_to_fp32(dh) * float(qs[j]);
        }
    }
    return out;
}

// Bytes placed off a 32-byte boundary by the alignment of the element.
struct OffBuffer {
    std::vector<unsigned char> storage;
    unsigned char *            ptr;
    OffBuffer(size_t bytes, size_t align) : storage(bytes + 64) {
        auto base = reinterpret_cast<uintptr_t>(storage.data());
        ptr       = reinterpret_cast<unsigned char *>(((base + 31) & ~uintptr_t(31)) + align);
    }
};

} // namespace

TEST(SimdQuant, PortableDotAgainstDequantized) {
    std::mt19937 rng(21);
    for (ggml_type t : kTypes) {
        const ggml_type op = quant_operand_type(t);
        for (int64_t K : {256, 512, 1280, 4096}) {
            SCOPED_TRACE(std::string(ggml_type_name(t)) + " K " + std::to_string(K));
            std::vector<unsigned char> a(ggml_row_size(t, K));
            random_blocks(rng, t, K / ggml_blck_size(t), a.data());
            const std::vector<float>   x = random_floats(rng, size_t(K));
            std::vector<unsigned char> q(ggml_row_size(op, K));
            quantize_column(op, x.data(), q.data(), K);
            const std::vector<float> y   = column_floats(op, q.data(), K);
            const Bound              b   = bound_of(t, a.data(), y, K, s_errors(op, q.data(), K));
            const float              got = portable_dot(t)(K, a.data(), q.data());
            EXPECT_NEAR(got, b.exact, 1e-5 * b.mag + 1e-30);
        }
    }
}

// The x86 tables have a product of every type of kTypes; a table without
// one leaves the type to the dequantizing path (the Arm tables, so far).
bool has_every_quant_product(const KernelTable * kt) {
    return std::string(kt->name).rfind("avx", 0) == 0;
}

TEST(SimdQuant, GemvAgainstPortable) {
    int checked = 0;
    FOR_EACH_SIMD_TABLE(kt) {
        std::mt19937 rng(22);
        for (ggml_type t : kTypes) {
            if (kt->gemv_quant[t] == nullptr) {
                EXPECT_FALSE(has_every_quant_product(kt)) << kt->name << " " << ggml_type_name(t);
                continue;
            }
            ++checked;
            const ggml_type op   = quant_operand_type(t);
            const bool      kq   = op == GGML_TYPE_Q8_K;
            const bool      q81  = t == GGML_TYPE_Q4_1 || t == GGML_TYPE_Q5_1;
            ASSERT_EQ(op, kq ? GGML_TYPE_Q8_K : q81 ? GGML_TYPE_Q8_1 : GGML_TYPE_Q8_0);
            for (int64_t K : kq ? std::vector<int64_t>{256, 768, 4096} : std::vector<int64_t>{32, 96, 320, 4096}) {
                const int64_t nb = K / ggml_blck_size(t);
                for (int64_t nrows : {1, 2, 3, 5, 7, 16, 19, 37}) {
                    // Rows with a gap after them, at an address only 2-byte
                    // aligned; columns 4-byte aligned.
                    const size_t lda = ggml_row_size(t, K) + 2;
                    const size_t ldb = ggml_row_size(op, K) + 4;
                    OffBuffer    a(lda * size_t(nrows), 2);
                    OffBuffer    b(ldb * GEMV_MAX_COLS, kq ? 4 : 2);
                    for (int64_t r = 0; r < nrows; ++r) {
                        random_blocks(rng, t, nb, a.ptr + size_t(r) * lda);
                    }
                    std::vector<std::vector<float>> ys;
                    for (int c = 0; c < GEMV_MAX_COLS; ++c) {
                        const std::vector<float> x = random_floats(rng, size_t(K));
                        unsigned char *          col = b.ptr + size_t(c) * ldb;
                        quantize_column(op, x.data(), col, K);
                        ys.push_back(column_floats(op, col, K));
                    }
                    for (int ncols = 1; ncols <= GEMV_MAX_COLS; ++ncols) {
                        SCOPED_TRACE(std::string(kt->name) + " " + ggml_type_name(t) + " K " + std::to_string(K) +
                                     " rows " + std::to_string(nrows) + " cols " + std::to_string(ncols));
                        const size_t       ldd = size_t(nrows) + 3;
                        std::vector<float> got(ldd * size_t(ncols) + 1, -1.0f);
                        kt->gemv_quant[t](K, a.ptr, lda, nrows, b.ptr, ldb, ncols, got.data() + 1, ldd);
                        for (int c = 0; c < ncols; ++c) {
                            for (int64_t r = 0; r < nrows; ++r) {
                                const unsigned char * row  = a.ptr + size_t(r) * lda;
                                const float           want = portable_dot(t)(K, row, b.ptr + size_t(c) * ldb);
                                const Bound           bd =
                                    bound_of(t, row, ys[size_t(c)], K, s_errors(op, b.ptr + size_t(c) * ldb, K));
                                ASSERT_NEAR(got[size_t(c) * ldd + size_t(r) + 1], want, 1e-5 * bd.mag + 1e-30)
                                    << "row " << r << " col " << c;
                            }
                            for (size_t i = size_t(c) * ldd + size_t(nrows); i < size_t(c + 1) * ldd; ++i) {
                                ASSERT_EQ(got[i + 1], -1.0f) << "padding after column " << c;
                            }
                        }
                        ASSERT_EQ(got[0], -1.0f);
                    }
                }
            }
        }
    }
    if (checked == 0) {
        GTEST_SKIP() << "no kernel table here has these types' products: " << lacking();
    }
}

// The integer totals of every block are the portable dot product's, bit for
// bit: with weight and column scales of 1, a block's product is its integer
// totals with at most one rounding (of Q4_1's isum + m s, of the K-quants'
// isum - msum), whatever the order or fusing of the float operations.
// Each block of longer rows is multiplied alone (a gemv of one block's K at
// the block's address), every column count, rows 2-byte aligned. Types of
// signed levels are left out: their constant factors (1/8, 1/4 ...) are not
// all exact in every order.
TEST(SimdQuant, BlockIntegerTotalsSameBits) {
    int checked = 0;
    FOR_EACH_SIMD_TABLE(kt) {
        std::mt19937 rng(27);
        for (ggml_type t : kTypes) {
            if (kt->gemv_quant[t] == nullptr || signed_levels(t)) {
                continue;
            }
            ++checked;
            const ggml_type op  = quant_operand_type(t);
            const int64_t   bk  = ggml_blck_size(t) > ggml_blck_size(op) ? ggml_blck_size(t) : ggml_blck_size(op);
            const int64_t   K   = 3 * bk;
            const int64_t   nrows = 7;
            const size_t    lda = ggml_row_size(t, K) + 2;
            const size_t    ldb = ggml_row_size(op, K) + 4;
            OffBuffer       a(lda * size_t(nrows), 2);
            OffBuffer       b(ldb * GEMV_MAX_COLS, op == GGML_TYPE_Q8_K ? 4 : 2);
            for (int64_t r = 0; r < nrows; ++r) {
                random_blocks(rng, t, K / ggml_blck_size(t), a.ptr + size_t(r) * lda, true);
            }
            for (int c = 0; c < GEMV_MAX_COLS; ++c) {
                const std::vector<float> x   = random_floats(rng, size_t(K));
                unsigned char *          col = b.ptr + size_t(c) * ldb;
                quantize_column(op, x.data(), col, K);
                for (int64_t i = 0; i < K / ggml_blck_size(op); ++i) {
                    unsigned char * blk = col + size_t(i) * ggml_type_size(op);
                    if (op == GGML_TYPE_Q8_K) {
                        reinterpret_cast<block_q8_K *>(blk)->d = 1.0f;
                    } else {
                        // d, and Q8_1's s after it
                        const uint16_t one = fp32_to_fp16(1.0f);
                        std::memcpy(blk, &one, sizeof(one));
                        if (op == GGML_TYPE_Q8_1) {
                            std::memcpy(blk + 2, &one, sizeof(one));
                        }
                    }
                }
            }
            const size_t wbytes = ggml_row_size(t, bk), cbytes = ggml_row_size(op, bk);
            for (int64_t i = 0; i < K / bk; ++i) {
                for (int ncols = 1; ncols <= GEMV_MAX_COLS; ++ncols) {
                    SCOPED_TRACE(std::string(kt->name) + " " + ggml_type_name(t) + " block " + std::to_string(i) +
                                 " cols " + std::to_string(ncols));
                    std::vector<float> got(size_t(nrows) * size_t(ncols));
                    kt->gemv_quant[t](bk, a.ptr + size_t(i) * wbytes, lda, nrows, b.ptr + size_t(i) * cbytes, ldb,
                                      ncols, got.data(), size_t(nrows));
                    for (int c = 0; c < ncols; ++c) {
                        for (int64_t r = 0; r < nrows; ++r) {
                            const float want = portable_dot(t)(bk, a.ptr + size_t(r) * lda + size_t(i) * wbytes,
                                                               b.ptr + size_t(c) * ldb + size_t(i) * cbytes);
                            ASSERT_EQ(f32_bits(got[size_t(c) * size_t(nrows) + size_t(r)]), f32_bits(want))
                                << "row " << r << " col " << c << ": " << got[size_t(c) * size_t(nrows) + size_t(r)]
                                << " vs " << want;
                        }
                    }
                }
            }
        }
    }
    if (checked == 0) {
        GTEST_SKIP() << "no kernel table here has these types' products: " << lacking();
    }
}

TEST(SimdQuant, Mxfp4ScalesOverTheE8M0Range) {
    constexpr uint8_t kBytes[] = {0, 1, 2, 3, 64, 120, 127, 128, 140};
    const ggml_type   t = GGML_TYPE_MXFP4, op = GGML_TYPE_Q8_0;
    constexpr int64_t K = 320, nrows = 13;
    const size_t      lda = ggml_row_size(t, K), ldb = ggml_row_size(op, K);
    int checked = 0;
    FOR_EACH_SIMD_TABLE(kt) {
        if (kt->gemv_quant[t] == nullptr) {
            EXPECT_FALSE(has_every_quant_product(kt)) << kt->name;
            continue;
        }
        ++checked;
        std::mt19937               rng(23);
        std::vector<unsigned char> a(lda * nrows), b(ldb * 3);
        for (int64_t r = 0; r < nrows; ++r) {
            auto * blocks = reinterpret_cast<block_mxfp4 *>(a.data() + size_t(r) * lda);
            random_blocks(rng, t, K / 32, a.data() + size_t(r) * lda);
            for (int64_t i = 0; i < K / 32; ++i) {
                // Rows 0-8 all of one byte; the others mixed.
                blocks[i].e = kBytes[size_t(r < 9 ? r : (r + i) % 9)];
            }
        }
        std::vector<std::vector<float>> ys;
        for (int c = 0; c < 3; ++c) {
            const std::vector<float> x = random_floats(rng, size_t(K));
            quantize_column(op, x.data(), b.data() + size_t(c) * ldb, K);
            ys.push_back(column_floats(op, b.data() + size_t(c) * ldb, K));
        }
        for (int ncols = 1; ncols <= 3; ++ncols) {
            std::vector<float> got(size_t(nrows * ncols), 0.0f);
            kt->gemv_quant[t](K, a.data(), lda, nrows, b.data(), ldb, ncols, got.data(), size_t(nrows));
            for (int c = 0; c < ncols; ++c) {
                for (int64_t r = 0; r < nrows; ++r) {
                    const unsigned char * row  = a.data() + size_t(r) * lda;
                    const float           want = portable_dot(t)(K, row, b.data() + size_t(c) * ldb);
                    const Bound           bd   = bound_of(t, row, ys[size_t(c)], K);
                    ASSERT_NE(want, 0.0f) << kt->name << " row " << r;
                    ASSERT_NEAR(got[size_t(c * nrows + r)], want, 1e-5 * bd.mag + 1e-44)
                        << kt->name << " row " << r << " col " << c << " cols " << ncols;
                }
            }
        }
    }
    if (checked == 0) {
        GTEST_SKIP() << "no kernel table here has an MXFP4 product: " << lacking();
    }
}


// Note [Rows decoded once] (kernels/matmul.cpp): rows decoded by the
// table's decode_rows (one by one, or in VNNI panels of 16 rows: Note
// [Decoded panels]) and multiplied by gemv_decoded give the bits of the
// type's gemv_quant entry, for every row and column count (whole panels
// of 8 or 16 rows and parts of one).
TEST(SimdQuant, DecodedRowsGiveTheGemvBits) {
    int checked = 0;
    FOR_EACH_SIMD_TABLE(kt) {
        std::mt19937 rng(26);
        for (ggml_type t : kTypes) {
            if (kt->decode_rows[t] == nullptr) {
                continue;
            }
            ASSERT_NE(kt->gemv_decoded[t], nullptr) << kt->name;
            ASSERT_EQ(quant_operand_type(t), GGML_TYPE_Q8_K);
            // K 2304: a group of eight blocks and one more; K 33024: 129
            // blocks, past the 128 whose column scales the block-total
            // products read from memory (kq_totals_rows) instead of gathering.
            for (int64_t K : {256, 1280, 2304, 33024}) {
                const int64_t nrows = 70; // past the 64 rows the AVX2 stored-row products keep at once
                const size_t  lda   = ggml_row_size(t, K) + 2;
                const size_t  ldb   = ggml_row_size(GGML_TYPE_Q8_K, K) + 4;
                OffBuffer     a(lda * size_t(nrows), 2);
                OffBuffer     b(ldb * GEMV_MAX_COLS, 4);
                for (int64_t r = 0; r < nrows; ++r) {
                    random_blocks(rng, t, K / ggml_blck_size(t), a.ptr + size_t(r) * lda);
                }
                for (int c = 0; c < GEMV_MAX_COLS; ++c) {
                    const std::vector<float> x = random_floats(rng, size_t(K));
                    quantize_column(GGML_TYPE_Q8_K, x.data(), b.ptr + size_t(c) * ldb, K);
                }
                // 4-byte aligned (the format's contract), off 32-byte boundaries.
                OffBuffer dec(decoded_rows_bytes(K, nrows), 4);
                kt->decode_rows[t](K, a.ptr, lda, nrows, dec.ptr);
                for (int64_t rows : {int64_t(1), int64_t(7), int64_t(8), int64_t(9), nrows}) {
                    for (int ncols = 1; ncols <= GEMV_MAX_COLS; ++ncols) {
                        SCOPED_TRACE(std::string(kt->name) + " " + ggml_type_name(t) + " K " + std::to_string(K) +
                                     " rows " + std::to_string(rows) + " cols " + std::to_string(ncols));
                        const size_t       ldd = size_t(rows);
                        std::vector<float> want(ldd * size_t(ncols)), got(ldd * size_t(ncols));
                        kt->gemv_quant[t](K, a.ptr, lda, rows, b.ptr, ldb, ncols, want.data(), ldd);
                        kt->gemv_decoded[t](K, dec.ptr, decoded_row_bytes(K), rows, b.ptr, ldb, ncols,
                                         got.data(), ldd);
                        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
                    }
                }
                ++checked;
            }
        }
    }
    if (checked == 0) {
        GTEST_SKIP() << "no kernel table here decodes rows once: " << lacking();
    }
}

TEST(SimdQuant, QuantizeQ8_KSameBits) {
    int checked = 0;
    FOR_EACH_SIMD_TABLE(kt) {
        if (kt->quantize_row_q8_K == nullptr) {
            EXPECT_FALSE(has_every_quant_product(kt)) << kt->name;
            continue;
        }
        ++checked;
        std::mt19937 rng(23);
        for (int64_t n : {256, 512, 2560}) {
            for (int variant = 0; variant < 6; ++variant) {
                SCOPED_TRACE(std::string(kt->name) + " n " + std::to_string(n) + " variant " +
                             std::to_string(variant));
                std::vector<float> x = random_floats(rng, size_t(n), -3.0f, 3.0f);
                switch (variant) {
                    case 1: // equal magnitudes of both signs: the first one sets the sign
                        x[17] = -5.0f;
                        x[200] = 5.0f;
                        break;
                    case 2: // a zero block and a block of one value
                        std::fill(x.begin(), x.begin() + QK_K, 0.0f);
                        std::fill(x.end() - QK_K, x.end(), -0.25f);
                        break;
                    case 3: // large and tiny values
                        for (size_t i = 0; i < x.size(); ++i) {
                            x[i] *= (i % 3 == 0) ? 1e30f : 1e-30f;
                        }
                        break;
                    case 4: // halves between levels (rounding to even)
                        for (size_t i = 0; i < x.size(); ++i) {
                            x[i] = float(int(i % 255) - 127) + 0.5f;
                        }
                        x[0] = 127.0f;
                        break;
                    case 5: // a NaN is skipped by the search for the largest value
                        x[3] = std::nanf("");
                        break;
                    default: break;
                }
                const Unaligned<float>  ux(x);
                std::vector<block_q8_K> want(size_t(n / QK_K)), got(size_t(n / QK_K));
                quantize_row_q8_K_ref(x.data(), want.data(), n);
                kt->quantize_row_q8_K(ux.ptr, got.data(), n);
                for (size_t i = 0; i < want.size(); ++i) {
                    if (variant == 5 && i == 0) {
                        // The NaN's own byte is unspecified; the rest of its block is not.
                        EXPECT_EQ(std::memcmp(&got[i].d, &want[i].d, sizeof(float)), 0);
                        for (int j = 0; j < QK_K; ++j) {
                            if (j != 3) {
                                EXPECT_EQ(got[i].qs[j], want[i].qs[j]) << j;
                            }
                        }
                        continue;
                    }
                    EXPECT_EQ(std::memcmp(&got[i], &want[i], sizeof(block_q8_K)), 0) << "block " << i;
                }
            }
        }
    }
    if (checked == 0) {
        GTEST_SKIP() << "no kernel table here has a Q8_K quantizer: " << lacking();
    }
}

namespace {

struct KShape {
    ggml_type t;
    int64_t   K, M, N, a2, b2;
    bool      transposed_b;
};

std::vector<KShape> k_shapes() {
    std::vector<KShape> out;
    for (ggml_type t : kTypes) {
        for (int64_t N : {1, 2, 3, 7, 16, 33}) {
            out.push_back({t, 512, 37, N, 1, 1, false});
        }
        out.push_back({t, 256, 19, 3, 2, 4, false}); // broadcast over batches
        out.push_back({t, 768, 21, 5, 1, 1, true});  // strided b
        out.push_back({t, 256, 13, 1, 2, 6, false}); // one column, heads sharing a matrix
    }
    return out;
}

std::string describe(const KShape & s) {
    return std::string(ggml_type_name(s.t)) + " K " + std::to_string(s.K) + " M " + std::to_string(s.M) + " N " +
           std::to_string(s.N) + " a2 " + std::to_string(s.a2) + " b2 " + std::to_string(s.b2) +
           (s.transposed_b ? " transposed b" : "");
}

struct KProblem {
    ggml_tensor * a;
    ggml_tensor * b;
    ggml_tensor * out;
};

KProblem build(ggml_context * ctx, const KShape & s, std::mt19937 & rng) {
    KProblem p;
    p.a = ggml_new_tensor_3d(ctx, s.t, s.K, s.M, s.a2);
    random_blocks(rng, s.t, ggml_nelements(p.a) / ggml_blck_size(s.t), static_cast<unsigned char *>(p.a->data));
    if (s.transposed_b) {
        ggml_tensor * bt = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, s.N, s.K, s.b2);
        fill_random(bt, rng);
        p.b = ggml_transpose(ctx, bt);
    } else {
        p.b = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, s.K, s.N, s.b2);
        fill_random(p.b, rng);
    }
    p.out = ggml_mul_mat(ctx, p.a, p.b);
    return p;
}

} // namespace

TEST(SimdQuant, MulMatThroughTheGraph) {
    std::mt19937 rng(24);
    for (const KShape & s : k_shapes()) {
        SCOPED_TRACE(describe(s) + " table " + best_kernels().name);
        Context        ctx;
        const KProblem p          = build(ctx, s, rng);
        const bool     quantizes  = best_kernels().gemv_quant[s.t] != nullptr;
        std::vector<float> first;
        for (int nth = 1; nth <= 4; ++nth) {
            std::memset(p.out->data, 0xff, ggml_nbytes(p.out));
            ASSERT_EQ(compute(ctx, p.out, RunMode{nth, false}), GGML_STATUS_SUCCESS);
            std::vector<float> got(size_t(ggml_nelements(p.out)));
            std::memcpy(got.data(), p.out->data, ggml_nbytes(p.out));
            if (nth == 1) {
                first = got;
                continue;
            }
            ASSERT_EQ(0, std::memcmp(first.data(), got.data(), got.size() * sizeof(float))) << nth << " threads";
        }
        const int64_t r2 = s.b2 / s.a2;
        for (int64_t i2 = 0; i2 < s.b2; ++i2) {
            for (int64_t n = 0; n < s.N; ++n) {
                std::vector<float> col(size_t(s.K));
                const char * bcol = static_cast<const char *>(p.b->data) + n * p.b->nb[1] + i2 * p.b->nb[2];
                for (int64_t k = 0; k < s.K; ++k) {
                    std::memcpy(&col[size_t(k)], bcol + k * p.b->nb[0], sizeof(float));
                }
                std::vector<double> s_err;
                if (quantizes) {
                    const ggml_type            op = quant_operand_type(s.t);
                    std::vector<unsigned char> q(ggml_row_size(op, s.K));
                    quantize_column(op, col.data(), q.data(), s.K);
                    col   = column_floats(op, q.data(), s.K);
                    s_err = s_errors(op, q.data(), s.K);
                }
                for (int64_t m = 0; m < s.M; ++m) {
                    const auto * row = static_cast<const unsigned char *>(p.a->data) + m * p.a->nb[1] +
                                       (i2 / r2) * p.a->nb[2];
                    const Bound  bd  = bound_of(s.t, row, col, s.K, s_err);
                    const float  got = first[size_t((i2 * s.N + n) * s.M + m)];
                    ASSERT_NEAR(got, bd.exact, 1e-5 * bd.mag + 1e-30) << "m " << m << " n " << n << " i2 " << i2;
                }
            }
        }
    }
}

TEST(SimdQuant, PreparedColumnsGiveTheGemvBits) {
    // qgemm_quant's products on prepared columns against the table's
    // gemv_quant for the same type: the same bits, over all of K and with K
    // cut into parts (the partial sums carried between calls).
    int checked = 0;
    FOR_EACH_SIMD_TABLE(kt) {
        std::mt19937 rng(27);
        for (ggml_type t : kTypes) {
            const QGemmKernels & q = kt->qgemm_quant[t];
            if (q.gemm == nullptr) {
                continue;
            }
            ++checked;
            const ggml_type op = quant_operand_type(t);
            for (int64_t K : {32, 96, 320, 4096}) {
                const int64_t nb = K / ggml_blck_size(t);
                for (int64_t nrows : {1, 3, 4, 5, 8, 16, 19}) {
                    const size_t lda = ggml_row_size(t, K) + 2;
                    const size_t ldb = ggml_row_size(op, K) + 4;
                    OffBuffer    a(lda * size_t(nrows), 2);
                    OffBuffer    b(ldb * QGEMM_COLS, 2);
                    for (int64_t r = 0; r < nrows; ++r) {
                        random_blocks(rng, t, nb, a.ptr + size_t(r) * lda);
                    }
                    for (int c = 0; c < QGEMM_COLS; ++c) {
                        const std::vector<float> x = random_floats(rng, size_t(K));
                        quantize_column(op, x.data(), b.ptr + size_t(c) * ldb, K);
                    }
                    for (int ncols = 1; ncols <= QGEMM_COLS; ++ncols) {
                        SCOPED_TRACE(std::string(kt->name) + " " + ggml_type_name(t) + " K " + std::to_string(K) +
                                     " rows " + std::to_string(nrows) + " cols " + std::to_string(ncols));
                        const size_t       ldd = size_t(nrows) + 3;
                        std::vector<float> want(ldd * size_t(ncols), -1.0f), got(want), parts(want);
                        std::vector<char>  prep(q.cols_bytes(K) + 8, 'x');
                        q.prepare(K, b.ptr, ldb, ncols, prep.data() + 4);
                        ASSERT_EQ(prep[3], 'x');
                        ASSERT_EQ(prep[4 + q.cols_bytes(K)], 'x');
                        kt->gemv_quant[t](K, a.ptr, lda, nrows, b.ptr, ldb, ncols, want.data(), ldd);
                        q.gemm(K, 0, nb, a.ptr, lda, nrows, prep.data() + 4, b.ptr, ldb, ncols, nullptr, got.data(), ldd);
                        ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
                        std::vector<float> acc(qgemm_acc_floats(nrows), 0.0f);
                        for (int64_t i0 = 0; i0 < nb; i0 += QGEMM_K_ALIGN) {
                            q.gemm(K, i0, std::min(nb, i0 + QGEMM_K_ALIGN), a.ptr, lda, nrows, prep.data() + 4, b.ptr,
                                   ldb, ncols, acc.data(), parts.data(), ldd);
                        }
                        ASSERT_EQ(0, std::memcmp(parts.data(), want.data(), got.size() * sizeof(float)));
                    }
                }
            }
        }
    }
    if (checked == 0) {
        GTEST_SKIP() << "no kernel table here has prepared-column products for these types: " << lacking();
    }
}

TEST(SimdQuant, ColumnCountsGiveSameBits) {
    // A column's results do not depend on how many other columns the
    // product has (the gemv groups of columns meet each column alone).
    // Only the prepared-column products (gemv_quant) promise that: the
    // general path's f32 products are blocked by the shape.
    std::mt19937 rng(25);
    int          checked = 0;
    std::string  without;
    for (ggml_type t : kTypes) {
        SCOPED_TRACE(ggml_type_name(t));
        if (best_kernels().gemv_quant[t] == nullptr) {
            without += std::string(without.empty() ? "" : ", ") + ggml_type_name(t);
            continue;
        }
        ++checked;
        Context       ctx;
        ggml_tensor * a = ggml_new_tensor_2d(ctx, t, 512, 29);
        random_blocks(rng, t, ggml_nelements(a) / ggml_blck_size(t), static_cast<unsigned char *>(a->data));
        ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 512, 33);
        fill_random(b, rng);
        ggml_tensor * all = ggml_mul_mat(ctx, a, b);
        ASSERT_EQ(compute(ctx, all, RunMode{2, false}), GGML_STATUS_SUCCESS);
        for (int64_t n : {1, 3, 7, 16}) {
            ggml_tensor * part = ggml_mul_mat(ctx, a, ggml_view_2d(ctx, b, 512, n, b->nb[1], 0));
            ASSERT_EQ(compute(ctx, part, RunMode{3, false}), GGML_STATUS_SUCCESS);
            EXPECT_EQ(0, std::memcmp(part->data, all->data, size_t(n) * 29 * sizeof(float))) << n << " columns";
        }
    }
    if (checked == 0) {
        GTEST_SKIP() << "kernel table " << best_kernels().name
                     << " has no matrix-vector product on prepared columns (gemv_quant) for " << without;
    }
}

TEST(SimdQuant, MulMatIdThroughTheGraph) {
    // Experts of every type: each (slot, token) column against the double
    // sum with its chosen expert (b quantized as the path quantizes it, the
    // same on both paths), the table's kernels and the portable dot
    // products, 1..4 threads giving the same bits.
    std::mt19937 rng(26);
    for (ggml_type t : kTypes) {
        for (int64_t n_b1 : {1, 2}) { // b's columns per token: shared or one per slot
            SCOPED_TRACE(std::string(ggml_type_name(t)) + " b columns " + std::to_string(n_b1));
            const int64_t K = 512, M = 23, n_as = 5, n_used = 2, n_tok = 7;
            Context       ctx;
            ggml_tensor * as = ggml_new_tensor_3d(ctx, t, K, M, n_as);
            random_blocks(rng, t, ggml_nelements(as) / ggml_blck_size(t), static_cast<unsigned char *>(as->data));
            ggml_tensor * b = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, K, n_b1, n_tok);
            fill_random(b, rng);
            ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, n_used, n_tok);
            for (int64_t i = 0; i < n_used * n_tok; ++i) {
                static_cast<int32_t *>(ids->data)[i] = int32_t((i * 3 + i / n_used) % n_as);
            }
            ggml_tensor * out = ggml_mul_mat_id(ctx, as, b, ids);
            const ggml_type op = quant_operand_type(t);
            for (bool use_ref : {false, true}) {
                std::vector<float> first;
                for (int nth = 1; nth <= 4; ++nth) {
                    std::memset(out->data, 0xff, ggml_nbytes(out));
                    ASSERT_EQ(compute(ctx, out, RunMode{nth, use_ref}), GGML_STATUS_SUCCESS);
                    std::vector<float> got(size_t(ggml_nelements(out)));
                    std::memcpy(got.data(), out->data, ggml_nbytes(out));
                    if (nth == 1) {
                        first = got;
                        continue;
                    }
                    ASSERT_EQ(0, std::memcmp(first.data(), got.data(), got.size() * sizeof(float)))
                        << nth << " threads" << (use_ref ? ", portable" : "");
                }
                for (int64_t tok = 0; tok < n_tok; ++tok) {
                    for (int64_t e = 0; e < n_used; ++e) {
                        const int32_t id = static_cast<const int32_t *>(ids->data)[tok * n_used + e];
                        const auto *  x  = reinterpret_cast<const float *>(static_cast<const char *>(b->data) +
                                                                          (e % n_b1) * b->nb[1] + tok * b->nb[2]);
                        std::vector<unsigned char> q(ggml_row_size(op, K));
                        quantize_column(op, x, q.data(), K);
                        const std::vector<float> y = column_floats(op, q.data(), K);
                        for (int64_t m = 0; m < M; ++m) {
                            const auto * row = static_cast<const unsigned char *>(as->data) + id * as->nb[2] +
                                               m * as->nb[1];
                            const Bound bd  = bound_of(t, row, y, K, s_errors(op, q.data(), K));
                            const float got = first[size_t((tok * n_used + e) * M + m)];
                            ASSERT_NEAR(got, bd.exact, 1e-5 * bd.mag + 1e-30)
                                << "m " << m << " slot " << e << " token " << tok << (use_ref ? ", portable" : "");
                        }
                    }
                }
            }
        }
    }
}

TEST(SimdQuant, ProductsSharingAColumnGiveSameBits) {
    // A Q4_K_M-style FFN: gate and up (Q4_K and Q6_K) reading the same b,
    // computed as one group of products, give the bits of each alone.
    std::mt19937 rng(27);
    for (int64_t N : {1, 3}) {
        SCOPED_TRACE("columns " + std::to_string(N));
        Context       ctx;
        ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 768, N);
        fill_random(b, rng);
        ggml_tensor * g = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_K, 768, 45);
        ggml_tensor * u = ggml_new_tensor_2d(ctx, GGML_TYPE_Q6_K, 768, 45);
        random_blocks(rng, GGML_TYPE_Q4_K, ggml_nelements(g) / QK_K, static_cast<unsigned char *>(g->data));
        random_blocks(rng, GGML_TYPE_Q6_K, ggml_nelements(u) / QK_K, static_cast<unsigned char *>(u->data));
        ggml_tensor * gb = ggml_mul_mat(ctx, g, b);
        ggml_tensor * ub = ggml_mul_mat(ctx, u, b);
        ASSERT_EQ(compute(ctx, gb, RunMode{2, false}), GGML_STATUS_SUCCESS);
        const std::vector<float> g_alone(static_cast<const float *>(gb->data),
                                         static_cast<const float *>(gb->data) + ggml_nelements(gb));
        ASSERT_EQ(compute(ctx, ub, RunMode{2, false}), GGML_STATUS_SUCCESS);
        const std::vector<float> u_alone(static_cast<const float *>(ub->data),
                                         static_cast<const float *>(ub->data) + ggml_nelements(ub));
        for (int nth = 1; nth <= 4; ++nth) {
            std::memset(gb->data, 0xff, ggml_nbytes(gb));
            std::memset(ub->data, 0xff, ggml_nbytes(ub));
            ASSERT_EQ(compute(ctx, {gb, ub}, RunMode{nth, false}), GGML_STATUS_SUCCESS);
            EXPECT_EQ(0, std::memcmp(gb->data, g_alone.data(), ggml_nbytes(gb))) << nth << " threads";
            EXPECT_EQ(0, std::memcmp(ub->data, u_alone.data(), ggml_nbytes(ub))) << nth << " threads";
        }
    }
}

TEST(SimdQuant, CpuTypeTraitsNameThePortableDots) {
    // ggml_get_type_traits_cpu: the activation type of every type here is
    // quant_operand_type's, and its vec_dot gives the portable dot's bits.
    std::mt19937 rng(28);
    for (ggml_type t : kTypes) {
        SCOPED_TRACE(ggml_type_name(t));
        const ggml_type_traits_cpu * ct = ggml_get_type_traits_cpu(t);
        ASSERT_NE(ct->vec_dot, nullptr);
        ASSERT_EQ(ct->vec_dot_type, quant_operand_type(t));
        const int64_t              K = 512;
        std::vector<unsigned char> a(ggml_row_size(t, K)), q(ggml_row_size(ct->vec_dot_type, K));
        random_blocks(rng, t, K / ggml_blck_size(t), a.data());
        const std::vector<float> x = random_floats(rng, size_t(K));
        quantize_column(ct->vec_dot_type, x.data(), q.data(), K);
        float got = 0.0f;
        ct->vec_dot(int(K), &got, 0, a.data(), 0, q.data(), 0, 1);
        const float want = portable_dot(t)(K, a.data(), q.data());
        EXPECT_EQ(std::memcmp(&got, &want, sizeof(float)), 0);
    }
}
