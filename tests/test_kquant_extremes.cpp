// The K-quant products of rows decoded once (KernelTable::decode_rows and
// gemv_decoded: the AVX2 table's panels of eight rows, the AVX-512 table's
// VNNI panels) at the ends of their integer ranges, where a sum kept in
// 16 bits would overflow first: every level at its least or greatest value,
// every scale at its ends (Q6_K's -128 and 127, Q4_K's 63, IQ4_XS's -32 and
// 31) and every column byte at the quantizer's ends, -127 and 127, in
// patterns of signs that line up with the weights' or cancel them.
//
// Weight and column scales are 1, so every product is an integer: each
// result against the exact sum in double precision (<= 1e-6 of the sum of
// |a_k y_k|: the f32 roundings of the block totals and their additions),
// and the decoded rows against the same table's gemv_quant, bit for bit.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/simd/kernel_table.h"
#include "core/fp16.h"
#include "core/types.h"
#include "core/types/i_quants.h"
#include "core/types/legacy_k.h"
#include "simd_test_util.h"

using namespace loom;
using namespace loom::cpu;
using namespace loomtest::simd;

namespace {

constexpr int64_t kBlocks = 9;  // a group of eight blocks and one more
constexpr int64_t kRows   = 19; // a panel of sixteen rows and three of the next
constexpr int64_t K       = kBlocks * QK_K;

// Row r's bytes of levels, a pattern per row: all levels least, all
// greatest, and mixtures.
uint8_t level_byte(int64_t r) {
    constexpr uint8_t kPatterns[] = {0x00, 0xff, 0x0f, 0xf0, 0x55, 0xaa, 0x33, 0xcc};
    return kPatterns[r % 8];
}

// One weight row of type t at out: levels from level_byte(r), scales at
// their ends (by row), block scales 1.
void extreme_row(ggml_type t, int64_t r, uint8_t * out) {
    const uint8_t  lb  = level_byte(r);
    const uint16_t one = fp32_to_fp16(1.0f);
    for (int64_t i = 0; i < kBlocks; ++i) {
        switch (t) {
            case GGML_TYPE_Q6_K: {
                auto & x = reinterpret_cast<block_q6_K *>(out)[i];
                std::memset(x.ql, lb, sizeof x.ql);
                std::memset(x.qh, lb, sizeof x.qh);
                for (int g = 0; g < QK_K / 16; ++g) {
                    // -128 and 127 by row, or alternating by group.
                    x.scales[g] = (r / 8) % 2 == 0 ? int8_t(r % 2 == 0 ? -128 : 127) : int8_t(g % 2 == 0 ? -128 : 127);
                }
                x.d = one;
                break;
            }
            case GGML_TYPE_Q4_K: {
                auto & x = reinterpret_cast<block_q4_K *>(out)[i];
                std::memset(x.qs, lb, sizeof x.qs);
                // Every six-bit scale and min 63, or on every third row the
                // first four mins 0 and the others 48.
                std::memset(x.scales, 0xff, sizeof x.scales);
                if (r % 3 == 1) {
                    for (int k = 4; k < 8; ++k) x.scales[k] &= 0xc0;
                    for (int k = 8; k < 12; ++k) x.scales[k] &= 0x0f;
                }
                x.d = x.dmin = one;
                break;
            }
            case GGML_TYPE_IQ4_XS: {
                auto & x = reinterpret_cast<block_iq4_xs *>(out)[i];
                std::memset(x.qs, lb, sizeof x.qs);
                // Scales 31 (all bits set) or -32 (all clear).
                const uint8_t s = r % 2 == 0 ? 0xff : 0x00;
                std::memset(x.scales_l, s, sizeof x.scales_l);
                x.scales_h = s == 0 ? 0 : 0xffff;
                x.d        = one;
                break;
            }
            default: FAIL() << ggml_type_name(t);
        }
    }
}

// Column c: every byte 127 or -127, signs by pattern c.
int8_t column_byte(int c, int64_t k) {
    switch (c % 8) {
        case 0: return 127;
        case 1: return -127;
        case 2: return (k / 16) % 2 == 0 ? 127 : -127; // by group of 16
        case 3: return (k / 32) % 2 == 0 ? -127 : 127; // by group of 32
        case 4: return k % 2 == 0 ? 127 : -127;
        case 5: return (k / 4) % 2 == 0 ? 127 : -127;  // by word
        case 6: return (k / 128) % 2 == 0 ? 127 : -127;
        default: return (k % 16) < 8 ? -127 : 127;
    }
}

void extreme_column(int c, block_q8_K * y) {
    for (int64_t i = 0; i < kBlocks; ++i) {
        y[i].d = 1.0f;
        for (int k = 0; k < QK_K; ++k) {
            y[i].qs[k] = column_byte(c, i * QK_K + k);
        }
        for (int g = 0; g < QK_K / 16; ++g) {
            int sum = 0;
            for (int k = 0; k < 16; ++k) sum += y[i].qs[16 * g + k];
            y[i].bsums[g] = int16_t(sum);
        }
    }
}

TEST(KQuantExtremes, DecodedRowsAgainstExactSums) {
    int checked = 0;
    FOR_EACH_SIMD_TABLE(kt) {
        for (ggml_type t : {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ4_XS}) {
            if (kt->decode_rows[t] == nullptr) {
                continue;
            }
            const size_t         lda = ggml_row_size(t, K);
            std::vector<uint8_t> a(lda * size_t(kRows));
            for (int64_t r = 0; r < kRows; ++r) {
                extreme_row(t, r, a.data() + size_t(r) * lda);
            }
            const size_t            ldb = ggml_row_size(GGML_TYPE_Q8_K, K);
            std::vector<block_q8_K> b(size_t(kBlocks) * GEMV_MAX_COLS);
            for (int c = 0; c < GEMV_MAX_COLS; ++c) {
                extreme_column(c, b.data() + size_t(c) * kBlocks);
            }
            // The weights as floats (exact: small integers).
            std::vector<float> w(size_t(K * kRows));
            ggml_get_type_traits(t)->to_float(a.data(), w.data(), K * kRows);

            std::vector<uint8_t> dec(decoded_rows_bytes(K, kRows) + 32);
            auto * dp = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(dec.data()) + 31) & ~uintptr_t(31));
            kt->decode_rows[t](K, a.data(), lda, kRows, dp);
            for (int ncols = 1; ncols <= GEMV_MAX_COLS; ++ncols) {
                SCOPED_TRACE(std::string(kt->name) + " " + ggml_type_name(t) + " cols " + std::to_string(ncols));
                std::vector<float> want(size_t(kRows) * ncols), got(size_t(kRows) * ncols);
                kt->gemv_quant[t](K, a.data(), lda, kRows, b.data(), ldb, ncols, want.data(), kRows);
                kt->gemv_decoded[t](K, dp, decoded_row_bytes(K), kRows, b.data(), ldb, ncols, got.data(), kRows);
                ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
                for (int c = 0; c < ncols; ++c) {
                    for (int64_t r = 0; r < kRows; ++r) {
                        double exact = 0.0, mag = 0.0;
                        for (int64_t k = 0; k < K; ++k) {
                            const double p = double(w[size_t(r * K + k)]) * column_byte(c, k);
                            exact += p;
                            mag += std::fabs(p);
                        }
                        ASSERT_LE(std::fabs(got[size_t(c) * kRows + size_t(r)] - exact), 1e-6 * mag + 1e-3)
                            << "row " << r << " column " << c << " exact " << exact;
                    }
                }
            }
            ++checked;
        }
    }
    if (checked == 0) {
        GTEST_SKIP() << "no kernel table here decodes rows of Q4_K, Q6_K or IQ4_XS";
    }
}

} // namespace
