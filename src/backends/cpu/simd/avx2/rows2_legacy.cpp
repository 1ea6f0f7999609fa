// Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 with two rows per register on AVX2
// (the tiles: rows2_impl.h, Note [Two rows per register] in rows2.cpp).
//
// Note [Legacy rows per register]
// Each type gives the tiles one block of two rows as registers of bytes,
// row a in the low lane, row b in the high one, weights 0..15 in lo and
// 16..31 in hi, stored so that maddubs takes them unsigned where it can:
//  - Q5_0: nibble plus 16 where the block's qh bit is set, 0..31 (offset
//    16); two maddubs sums of 31 * 127 * 2 still fit int16 when added.
//  - MXFP4: the doubled E2M1 value of the nibble plus 12, 0..24 (offset
//    12); its scale is half the power of two of its E8M0 byte.
//  - Q4_1 and Q5_1 (value d u + m): u as stored (offset 0) against Q8_1
//    columns; each block's m meets the column's s in a register of its own
//    per accumulator, with one lane per row (the portable dot product adds
//    m s per block too).
//  - IQ4_NL: its levels (-127..113) cannot be made unsigned and small, so
//    they take Q8_0's path: magnitudes against the column with the level's
//    sign, each half through its own madd.
// The matrix's last row, where the count is odd, takes the type's one-row
// kernel (legacy_impl.h), as Q4_0's takes dot.cpp's. Q5_0, IQ4_NL and
// MXFP4 also take prepared columns (Note [Rows decoded per chunk]); Q4_1
// and Q5_1, whose columns are Q8_1, do not.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backends/cpu/simd/kernel_table.h"
#include "core/types.h"
#include "core/types/i_quants.h"
#include "core/types/iq_tables.h"
#include "core/types/legacy_k.h"
#include "core/types/other.h"

#include "target_begin.h"
#include "avx2.h"

namespace loom::cpu::avx2 {

#include "rows2_impl.h"

namespace {

#include "core/types/fp4_values.inc"

// 16 added to each weight of two rows whose bit in its block's qh is set.
[[gnu::always_inline]] inline void add_fifth_bits(const uint8_t * qa, const uint8_t * qb, __m256i & lo, __m256i & hi) {
    uint32_t ha, hb;
    std::memcpy(&ha, qa, sizeof ha);
    std::memcpy(&hb, qb, sizeof hb);
    // Broadcasts from memory and a blend: no move into a vector register
    // on the shuffle port.
    const __m256i v = _mm256_blend_epi32(_mm256_set1_epi32(int(ha)), _mm256_set1_epi32(int(hb)), 0xf0);
    // Byte j of a lane of lo takes byte j / 8 of its row's qh (weights
    // 0..15), of hi byte 2 + j / 8 (weights 16..31); then keeps bit j % 8.
    const __m256i blo = _mm256_shuffle_epi8(v, _mm256_setr_epi64x(0, 0x0101010101010101, 0, 0x0101010101010101));
    const __m256i bhi = _mm256_shuffle_epi8(v, _mm256_setr_epi64x(0x0202020202020202, 0x0303030303030303,
                                                                   0x0202020202020202, 0x0303030303030303));
    const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201));
    const __m256i sixteen = _mm256_set1_epi8(16);
    lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(blo, bit), bit), sixteen));
    hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bhi, bit), bit), sixteen));
}

struct Q41 : UnsignedQ<block_q4_1, block_q8_1, 0, 2> {
    static constexpr bool has_min = true;
    [[gnu::always_inline]] static void decode(const W & a, const W & b, Dec & d) { nibble_pair(a.qs, b.qs, d.lo, d.hi); }
    static constexpr GemvFn one_row = gemv_q4_1;
};

struct Q51 : UnsignedQ<block_q5_1, block_q8_1, 0, 2> {
    static constexpr bool has_min = true;
    [[gnu::always_inline]] static void decode(const W & a, const W & b, Dec & d) {
        nibble_pair(a.qs, b.qs, d.lo, d.hi);
        add_fifth_bits(a.qh, b.qh, d.lo, d.hi);
    }
    static constexpr GemvFn one_row = gemv_q5_1;
};

struct Q50 : UnsignedQ<block_q5_0, block_q8_0, 16, 3> {
    [[gnu::always_inline]] static void decode(const W & a, const W & b, Dec & d) {
        nibble_pair(a.qs, b.qs, d.lo, d.hi);
        add_fifth_bits(a.qh, b.qh, d.lo, d.hi);
    }
    static constexpr GemvFn one_row = gemv_q5_0;
};

// The smallest doubled E2M1 value is -12.
struct MXFP4 : UnsignedQ<block_mxfp4, block_q8_0, 12, 3> {
    static constexpr bool e8m0 = true;
    [[gnu::always_inline]] static void decode(const W & a, const W & b, Dec & d) {
        nibble_pair(a.qs, b.qs, d.lo, d.hi);
        const __m256i table = _mm256_add_epi8(_mm256_broadcastsi128_si256(load128(kvalues_fp4)),
                                              _mm256_set1_epi8(char(offset)));
        d.lo = _mm256_shuffle_epi8(table, d.lo);
        d.hi = _mm256_shuffle_epi8(table, d.hi);
    }
    static constexpr GemvFn one_row = gemv_mxfp4;
};

struct IQ4NL {
    using W                       = block_iq4_nl;
    using Y                       = block_q8_0;
    static constexpr int offset   = 0;
    static constexpr int pairs    = 2;
    static constexpr int cols     = 2;
    static constexpr int dec_cols = 4;
    struct Dec {
        __m256i lo, hi;   // the levels, signed (their signs go to the column)
        __m256i alo, ahi; // their magnitudes
    };
    [[gnu::always_inline]] static void decode(const W & a, const W & b, Dec & d) {
        nibble_pair(a.qs, b.qs, d.lo, d.hi);
        const __m256i table = _mm256_broadcastsi128_si256(load128(iq::kvalues_iq4nl));
        d.lo                = _mm256_shuffle_epi8(table, d.lo);
        d.hi                = _mm256_shuffle_epi8(table, d.hi);
        d.alo               = _mm256_sign_epi8(d.lo, d.lo);
        d.ahi               = _mm256_sign_epi8(d.hi, d.hi);
    }
    [[gnu::always_inline]] static __m256i product(const Dec & d, const Col & c) {
        const __m256i one = _mm256_set1_epi16(1);
        const __m256i plo = _mm256_madd_epi16(_mm256_maddubs_epi16(d.alo, _mm256_sign_epi8(c.lo, d.lo)), one);
        const __m256i phi = _mm256_madd_epi16(_mm256_maddubs_epi16(d.ahi, _mm256_sign_epi8(c.hi, d.hi)), one);
        return _mm256_add_epi32(plo, phi);
    }
    static constexpr GemvFn one_row = gemv_iq4_nl;
};

} // namespace

void gemv2_q4_1(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd) {
    gemv2<Q41>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void gemv2_q5_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd) {
    gemv2<Q50>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void gemv2_q5_1(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd) {
    gemv2<Q51>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void gemv2_iq4_nl(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                  float * dst, size_t ldd) {
    gemv2<IQ4NL>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void gemv2_mxfp4(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                 float * dst, size_t ldd) {
    gemv2<MXFP4>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void qcols2_prepare_q5_0(int64_t K, const void * b, size_t ldb, int ncols, void * out) {
    prepare_cols<Q50::offset>(K, b, ldb, ncols, out);
}

void qcols2_prepare_iq4_nl(int64_t K, const void * b, size_t ldb, int ncols, void * out) {
    prepare_cols<IQ4NL::offset>(K, b, ldb, ncols, out);
}

void qcols2_prepare_mxfp4(int64_t K, const void * b, size_t ldb, int ncols, void * out) {
    prepare_cols<MXFP4::offset>(K, b, ldb, ncols, out);
}

void qgemm2_q5_0(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
                 const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd) {
    qgemm2<Q50>(K, i0, i1, a, lda, nrows, prep, b, ldb, ncols, acc, dst, ldd);
}

void qgemm2_iq4_nl(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
                   const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd) {
    qgemm2<IQ4NL>(K, i0, i1, a, lda, nrows, prep, b, ldb, ncols, acc, dst, ldd);
}

void qgemm2_mxfp4(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
                  const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd) {
    qgemm2<MXFP4>(K, i0, i1, a, lda, nrows, prep, b, ldb, ncols, acc, dst, ldd);
}

} // namespace loom::cpu::avx2

#include "target_end.h"

#endif // x86
