// Q4_0 and Q8_0 products with two rows per register on AVX2.
//
// Note [Two rows per register]
// A 256-bit register holds 16 weight bytes of each of two rows, one row per
// 128-bit lane, and meets 16 activation bytes of a column broadcast to both
// lanes: each maddubs then multiplies 32 weights of two rows, and the madd,
// the conversion and the FMA that follow serve both rows at once, where a
// register holding one row's 32 weights needs all of them for one row.
//  - Q4_0: the nibbles stay unsigned (0..15); lo holds weights 0..15 of the
//    two rows, hi weights 16..31. The int16 sums of the two maddubs are
//    added (|sum| <= 4 * 15 * 127), madd with ones gives four int32 per
//    row, and the offset, 8 times the column's sum over the same bytes, is
//    subtracted: the column's starting value, computed once per block.
//  - Q8_0: signed weights meet the column through the sign trick (maddubs
//    of |w| and y with w's sign), each half through its own madd (two int16
//    sums could overflow), with no offset.
// Every int32 lane is exact; lanes are scaled by their row's block scale
// times the column's and added in f32, and a row's lanes are summed at the
// end. A tile is four rows (two registers, whose lanes are added in pairs:
// Note [Four rows per conversion]) or two; a matrix's last row, where the
// count is odd, takes the one-row kernel of dot.cpp.
// Columns are either prepared per tile (gemv) or once per product (qgemm,
// Note [Prepared columns] in the AVX-512 table: the same contract); both
// give the tile the same values, so every column count gives the same bits.
// On prepared columns the rows are decoded once for all the columns of a
// call (Note [Rows decoded per chunk]).

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backends/cpu/simd/kernel_table.h"
#include "core/types.h"

#include "target_begin.h"
#include "avx2.h"

namespace loom::cpu::avx2 {

#include "rows2_impl.h"

namespace {

struct Q4 : UnsignedQ<block_q4_0, block_q8_0, 8, 3> {
    [[gnu::always_inline]] static void decode(const W & a, const W & b, Dec & d) { nibble_pair(a.qs, b.qs, d.lo, d.hi); }
    static constexpr GemvFn one_row = gemv_q4_0;
};

struct Q8 {
    using W                     = block_q8_0;
    using Y                     = block_q8_0;
    static constexpr int offset = 0;
    static constexpr int pairs  = 2;
    static constexpr int cols   = 2;
    static constexpr int dec_cols = 4;
    struct Dec {
        __m256i lo, hi;   // the weights, signed (their signs go to the column)
        __m256i alo, ahi; // their magnitudes
    };
    [[gnu::always_inline]] static void decode(const W & a, const W & b, Dec & d) {
        d.lo  = pair(a.qs, b.qs);
        d.hi  = pair(a.qs + 16, b.qs + 16);
        d.alo = _mm256_sign_epi8(d.lo, d.lo);
        d.ahi = _mm256_sign_epi8(d.hi, d.hi);
    }
    [[gnu::always_inline]] static __m256i product(const Dec & d, const Col & c) {
        const __m256i one = _mm256_set1_epi16(1);
        const __m256i plo = _mm256_madd_epi16(_mm256_maddubs_epi16(d.alo, _mm256_sign_epi8(c.lo, d.lo)), one);
        const __m256i phi = _mm256_madd_epi16(_mm256_maddubs_epi16(d.ahi, _mm256_sign_epi8(c.hi, d.hi)), one);
        return _mm256_add_epi32(plo, phi);
    }
    static constexpr GemvFn one_row = gemv_q8_0;
};

} // namespace

void gemv2_q4_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd) {
    gemv2<Q4>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void gemv2_q8_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd) {
    gemv2<Q8>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

size_t qcols2_bytes(int64_t K) {
    return size_t(K / QK8_0) * PREP_BLOCK;
}

void qcols2_prepare_q4_0(int64_t K, const void * b, size_t ldb, int ncols, void * out) {
    prepare_cols<Q4::offset>(K, b, ldb, ncols, out);
}

void qcols2_prepare_q8_0(int64_t K, const void * b, size_t ldb, int ncols, void * out) {
    prepare_cols<Q8::offset>(K, b, ldb, ncols, out);
}

void qgemm2_q4_0(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
                 const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd) {
    qgemm2<Q4>(K, i0, i1, a, lda, nrows, prep, b, ldb, ncols, acc, dst, ldd);
}

void qgemm2_q8_0(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
                 const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd) {
    qgemm2<Q8>(K, i0, i1, a, lda, nrows, prep, b, ldb, ncols, acc, dst, ldd);
}

} // namespace loom::cpu::avx2

#include "target_end.h"

#endif // x86
