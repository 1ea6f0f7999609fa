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

#include "backends/cpu/simd/kernel_table.h"
#include "core/types.h"

#include "target_begin.h"
#include "avx2.h"

namespace loom::cpu::avx2 {

namespace {

[[gnu::always_inline]] inline __m128i load128(const void * p) {
    return _mm_loadu_si128(static_cast<const __m128i *>(p));
}

[[gnu::always_inline]] inline __m256i pair(const void * lo_lane, const void * hi_lane) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(load128(lo_lane)), load128(hi_lane), 1);
}

// An activation block broadcast to both lanes, with its starting value.
struct Col {
    __m256i lo, hi, start;
};

// Minus offset times the sums of four of lo and the same four of hi: the
// value a product with weights stored offset too high starts from.
template <int Offset> [[gnu::always_inline]] inline __m128i start_lanes(__m128i lo, __m128i hi) {
    if constexpr (Offset == 0) {
        return _mm_setzero_si128();
    } else {
        const __m128i off = _mm_set1_epi8(char(Offset));
        const __m128i s16 = _mm_add_epi16(_mm_maddubs_epi16(off, lo), _mm_maddubs_epi16(off, hi));
        return _mm_sub_epi32(_mm_setzero_si128(), _mm_madd_epi16(s16, _mm_set1_epi16(1)));
    }
}

struct Q4 {
    using W                     = block_q4_0;
    static constexpr int offset = 8;
    static constexpr int pairs  = 2; // pairs of rows per tile
    static constexpr int cols   = 3; // columns a tile meets per pass
    static constexpr int dec_cols = 4; // the same on decoded rows (Note [Rows decoded per chunk])
    struct Dec {
        __m256i lo, hi;
    };
    [[gnu::always_inline]] static void decode(const W & a, const W & b, Dec & d) {
        const __m256i q = pair(a.qs, b.qs);
        const __m256i m = _mm256_set1_epi8(0x0f);
        d.lo            = _mm256_and_si256(q, m);
        d.hi            = _mm256_and_si256(_mm256_srli_epi16(q, 4), m);
    }
    [[gnu::always_inline]] static __m256i product(const Dec & d, const Col & c) {
        const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(d.lo, c.lo), _mm256_maddubs_epi16(d.hi, c.hi));
        return _mm256_add_epi32(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)), c.start);
    }
};

struct Q8 {
    using W                     = block_q8_0;
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
};

// Prepared columns: for a group of QGEMM_COLS columns, block i holds the
// columns' low halves (16 bytes each), high halves, starting values (four
// int32 each) and scales as floats, in PREP_BLOCK bytes.
constexpr size_t PREP_LO    = 0;
constexpr size_t PREP_HI    = 16 * QGEMM_COLS;
constexpr size_t PREP_START = 32 * QGEMM_COLS;
constexpr size_t PREP_D     = 48 * QGEMM_COLS;
constexpr size_t PREP_BLOCK = 52 * QGEMM_COLS;

template <int C> struct RawCols {
    const block_q8_0 * bc[C] = {};
    RawCols(const char * b, size_t ldb, int ncols) {
        for (int c = 0; c < C && c < ncols; ++c) bc[c] = reinterpret_cast<const block_q8_0 *>(b + size_t(c) * ldb);
    }
    template <int Offset> [[gnu::always_inline]] void get(int64_t i, int c, Col & col, __m256 & dy) const {
        const __m128i lo = load128(bc[c][i].qs);
        const __m128i hi = load128(bc[c][i].qs + 16);
        col.lo           = _mm256_broadcastsi128_si256(lo);
        col.hi           = _mm256_broadcastsi128_si256(hi);
        col.start        = _mm256_broadcastsi128_si256(start_lanes<Offset>(lo, hi));
        dy               = _mm256_set1_ps(half_to_float(bc[c][i].d));
    }
};

// Columns c0 + c of a prepared group.
struct PreparedCols {
    const char * base;
    int          c0;
    template <int Offset> [[gnu::always_inline]] void get(int64_t i, int c, Col & col, __m256 & dy) const {
        const char * pb = base + size_t(i) * PREP_BLOCK;
        const size_t k  = size_t(c0 + c);
        col.lo          = _mm256_broadcastsi128_si256(load128(pb + PREP_LO + 16 * k));
        col.hi          = _mm256_broadcastsi128_si256(load128(pb + PREP_HI + 16 * k));
        col.start       = _mm256_broadcastsi128_si256(load128(pb + PREP_START + 16 * k));
        dy              = _mm256_broadcast_ss(reinterpret_cast<const float *>(pb + PREP_D) + k);
    }
};

template <int Offset> void prepare_cols(int64_t K, const void * b, size_t ldb, int ncols, void * out) {
    const int64_t nb = K / QK8_0;
    auto *        o  = static_cast<char *>(out);
    std::memset(o, 0, size_t(nb) * PREP_BLOCK);
    for (int c = 0; c < ncols; ++c) {
        const auto * bc = reinterpret_cast<const block_q8_0 *>(static_cast<const char *>(b) + size_t(c) * ldb);
        for (int64_t i = 0; i < nb; ++i) {
            char *        pb = o + size_t(i) * PREP_BLOCK;
            const __m128i lo = load128(bc[i].qs);
            const __m128i hi = load128(bc[i].qs + 16);
            _mm_storeu_si128(reinterpret_cast<__m128i *>(pb + PREP_LO + 16 * c), lo);
            _mm_storeu_si128(reinterpret_cast<__m128i *>(pb + PREP_HI + 16 * c), hi);
            _mm_storeu_si128(reinterpret_cast<__m128i *>(pb + PREP_START + 16 * c), start_lanes<Offset>(lo, hi));
            const float d = half_to_float(bc[i].d);
            std::memcpy(pb + PREP_D + 4 * size_t(c), &d, sizeof d);
        }
    }
}

// The block scales of two rows, each in its row's lane.
template <class W> [[gnu::always_inline]] inline __m256 pair_scales(const W & a, const W & b, __m256i spread) {
    const __m128i h = _mm_insert_epi16(_mm_cvtsi32_si128(a.d), b.d, 1);
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_cvtph_ps(h)), spread);
}

// Where a tile's partial sums live between calls that cover parts of K: the
// k-th register of column c of the tile whose first pair is p is at
// acc + 8 * ((p + k) * QGEMM_COLS + c).
struct Carry {
    float * acc   = nullptr; // 8 floats per register
    bool    first = true;
    bool    last  = true;
};

// Note [Four rows per conversion]
// A tile of two pairs of rows adds the int32 lanes of its two product
// registers in pairs (hadd, exact) into one register holding two lanes of
// each of its four rows: one conversion, one scale product and one FMA then
// serve four rows, where a register per pair took two of each. On the Zen 5
// of bench/RESULTS.md, f32 multiplies and FMAs issue on the same two ports
// as vpmaddwd and vpmaddubsw (a mix of them runs at two a cycle), so Q8_0
// goes from six such instructions per 64 products to five, Q4_0 from five
// to four; measured, 2-5% faster at 1024 x 4096 x 512. The lanes are rows
// 0, 0, 2, 2 in the low half and 1, 1, 3, 3 in the high one (hadd works
// within halves), and so are the scales, from the two pairs' by a shuffle.
// Tiles of one pair keep a register per pair.
template <int G> constexpr int n_acc = G == 2 ? 1 : G;

// The scales of a tile's rows for its accumulators: the pairs' own, or for
// two pairs the four rows' in the layout above.
template <int G> struct TileScales {
    __m256 v[n_acc<G>];
};

template <int G> [[gnu::always_inline]] inline TileScales<G> tile_scales(const __m256 * dx) {
    TileScales<G> t;
    if constexpr (G == 2) {
        t.v[0] = _mm256_shuffle_ps(dx[0], dx[1], 0);
    } else {
        for (int g = 0; g < G; ++g) t.v[g] = dx[g];
    }
    return t;
}

// acc + the products of a tile's G decoded pairs with one column.
template <class Q, int G>
[[gnu::always_inline]] inline void add_products(const typename Q::Dec * w, const TileScales<G> & dx, const Col & col,
                                                __m256 dy, __m256 * acc) {
    if constexpr (G == 2) {
        const __m256i h = _mm256_hadd_epi32(Q::product(w[0], col), Q::product(w[1], col));
        acc[0]          = _mm256_fmadd_ps(_mm256_mul_ps(dx.v[0], dy), _mm256_cvtepi32_ps(h), acc[0]);
    } else {
        for (int g = 0; g < G; ++g) {
            acc[g] = _mm256_fmadd_ps(_mm256_mul_ps(dx.v[g], dy), _mm256_cvtepi32_ps(Q::product(w[g], col)), acc[g]);
        }
    }
}

// The 2G row results of a column's accumulators (8 floats each).
template <int G> [[gnu::always_inline]] inline void store_rows(const float (*v)[8], float * out) {
    if constexpr (G == 2) {
        out[0] = v[0][0] + v[0][1];
        out[1] = v[0][4] + v[0][5];
        out[2] = v[0][2] + v[0][3];
        out[3] = v[0][6] + v[0][7];
    } else {
        for (int g = 0; g < G; ++g) {
            out[2 * g]     = (v[g][0] + v[g][1]) + (v[g][2] + v[g][3]);
            out[2 * g + 1] = (v[g][4] + v[g][5]) + (v[g][6] + v[g][7]);
        }
    }
}

// 2G rows (G registers of two rows) x C columns over all nb blocks.
template <class Q, int G, int C, class Cols>
void tile(int64_t nb, const char * a, size_t lda, const Cols & cols, float * dst, size_t ldd) {
    using W             = typename Q::W;
    constexpr int NA    = n_acc<G>;
    const W *     ar[2 * G];
    for (int r = 0; r < 2 * G; ++r) ar[r] = reinterpret_cast<const W *>(a + size_t(r) * lda);
    const __m256i spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
    __m256        acc[C][NA];
    for (int c = 0; c < C; ++c) {
        for (int k = 0; k < NA; ++k) acc[c][k] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < nb; ++i) {
        // The same place in the next tile's rows, which follow in memory.
        for (int r = 0; r < 2 * G; ++r) {
            _mm_prefetch(reinterpret_cast<const char *>(ar[r] + i) + 2 * G * lda, _MM_HINT_T0);
        }
        typename Q::Dec w[G];
        __m256          dx[G]; // the two rows' block scales, each in its lane
        for (int g = 0; g < G; ++g) {
            Q::decode(ar[2 * g][i], ar[2 * g + 1][i], w[g]);
            dx[g] = pair_scales(ar[2 * g][i], ar[2 * g + 1][i], spread);
        }
        const TileScales<G> ts = tile_scales<G>(dx);
        for (int c = 0; c < C; ++c) {
            Col    col;
            __m256 dy;
            cols.template get<Q::offset>(i, c, col, dy);
            add_products<Q, G>(w, ts, col, dy, acc[c]);
        }
    }
    for (int c = 0; c < C; ++c) {
        alignas(32) float v[NA][8];
        for (int k = 0; k < NA; ++k) _mm256_store_ps(v[k], acc[c][k]);
        store_rows<G>(v, dst + size_t(c) * ldd);
    }
}

// A tile of Q::pairs pairs of rows meets Q::cols columns a pass: the
// accumulators, the decoded weights and a column fill the 16 registers.

// Rows in tiles of 2 Q::pairs, then two; the last row of a matrix with an
// odd row count is last_row()'s.
template <class Q, int C, class Cols>
void rows(int64_t nb, const char * a, size_t lda, int64_t nrows, const Cols & cols, float * dst, size_t ldd) {
    static_assert(GEMV_ROW_ALIGN % (2 * Q::pairs) == 0);
    int64_t r = 0;
    for (; r + 2 * Q::pairs <= nrows; r += 2 * Q::pairs) {
        tile<Q, Q::pairs, C>(nb, a + size_t(r) * lda, lda, cols, dst + r, ldd);
    }
    for (; r + 2 <= nrows; r += 2) {
        tile<Q, 1, C>(nb, a + size_t(r) * lda, lda, cols, dst + r, ldd);
    }
}

// Columns [c0, c0 + C) of a call, through cols shifted to them.
template <class Q, class ColsAt>
void all_cols(int64_t nb, const char * a, size_t lda, int64_t nrows, int ncols, const ColsAt & cols_at, float * dst,
              size_t ldd) {
    static_assert(Q::cols >= 2 && Q::cols <= 4);
    int c0 = 0;
    for (; c0 + Q::cols <= ncols; c0 += Q::cols) {
        rows<Q, Q::cols>(nb, a, lda, nrows, cols_at(c0), dst + size_t(c0) * ldd, ldd);
    }
    const int left = ncols - c0; // fewer than Q::cols
    if constexpr (Q::cols > 3) {
        if (left == 3) rows<Q, 3>(nb, a, lda, nrows, cols_at(c0), dst + size_t(c0) * ldd, ldd);
    }
    if constexpr (Q::cols > 2) {
        if (left == 2) rows<Q, 2>(nb, a, lda, nrows, cols_at(c0), dst + size_t(c0) * ldd, ldd);
    }
    if (left == 1) rows<Q, 1>(nb, a, lda, nrows, cols_at(c0), dst + size_t(c0) * ldd, ldd);
}

// Note [Rows decoded per chunk]
// On prepared columns a tile meets every column of the call (up to
// QGEMM_COLS), a few at a time, and tile() decodes its rows again for each
// such pass: for Q8_0 two inserts, two signs and the scales per pair of rows
// and block, for every two columns. The prepared-column path instead decodes
// a tile's rows QCHUNK blocks at a time into a buffer on the stack (10 KiB
// for four Q8_0 rows, 6 KiB for Q4_0; in L1 beside the 13 KiB of the
// columns' blocks), and every pass of Q::dec_cols columns reads the decoded
// blocks; the accumulators of all the call's columns wait in a small array
// between passes. On 1024 x 4096 x 512, one thread, this took Q8_0 from 99
// to 111 GFLOP/s and Q4_0 from 124 to 134. Each accumulator still takes one
// FMA per block, in block order, with tile()'s operands, so the bits are
// tile()'s.
constexpr int64_t QCHUNK   = 32;

template <class Q, int G> struct Decoded {
    typename Q::Dec w[G];
    TileScales<G>   dx;
};

template <class Q, int G>
void decode_chunk(const typename Q::W * const * ar, int64_t i0, int64_t n, size_t lda, Decoded<Q, G> * out) {
    const __m256i spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
    for (int64_t j = 0; j < n; ++j) {
        const int64_t i = i0 + j;
        for (int r = 0; r < 2 * G; ++r) {
            _mm_prefetch(reinterpret_cast<const char *>(ar[r] + i) + 2 * G * lda, _MM_HINT_T0);
        }
        __m256 dx[G];
        for (int g = 0; g < G; ++g) {
            Q::decode(ar[2 * g][i], ar[2 * g + 1][i], out[j].w[g]);
            dx[g] = pair_scales(ar[2 * g][i], ar[2 * g + 1][i], spread);
        }
        out[j].dx = tile_scales<G>(dx);
    }
}

// A tile's accumulators between passes: column c's n_acc<G> registers.
template <int G> using TileAccs = float[QGEMM_COLS][n_acc<G>][8];

// Columns [c0, c0 + C) of a tile over the n decoded blocks from block i0.
template <class Q, int G, int C>
void decoded_cols(const Decoded<Q, G> * dec, int64_t i0, int64_t n, const PreparedCols & cols, TileAccs<G> & accs) {
    constexpr int NA = n_acc<G>;
    __m256        acc[C][NA];
    for (int c = 0; c < C; ++c) {
        for (int k = 0; k < NA; ++k) acc[c][k] = _mm256_load_ps(accs[cols.c0 + c][k]);
    }
    for (int64_t j = 0; j < n; ++j) {
        for (int c = 0; c < C; ++c) {
            Col    col;
            __m256 dy;
            cols.template get<Q::offset>(i0 + j, c, col, dy);
            add_products<Q, G>(dec[j].w, dec[j].dx, col, dy, acc[c]);
        }
    }
    for (int c = 0; c < C; ++c) {
        for (int k = 0; k < NA; ++k) _mm256_store_ps(accs[cols.c0 + c][k], acc[c][k]);
    }
}

// 2G rows x ncols prepared columns over blocks [i0, i1), the rows decoded
// a chunk at a time; carry.acc points at the tile's first pair, whose
// slots (and the next pair's, for two pairs) hold the tile's registers.
template <class Q, int G>
void tile_decoded(int64_t i0, int64_t i1, const char * a, size_t lda, const char * prep, int ncols, float * dst,
                  size_t ldd, const Carry & carry) {
    using W          = typename Q::W;
    constexpr int NA = n_acc<G>;
    const W *     ar[2 * G];
    for (int r = 0; r < 2 * G; ++r) ar[r] = reinterpret_cast<const W *>(a + size_t(r) * lda);
    alignas(32) TileAccs<G> accs;
    auto slot = [&](int k, int c) { return carry.acc + 8 * (k * QGEMM_COLS + c); };
    for (int c = 0; c < ncols; ++c) {
        for (int k = 0; k < NA; ++k) {
            for (int l = 0; l < 8; ++l) accs[c][k][l] = carry.first ? 0.0f : slot(k, c)[l];
        }
    }
    Decoded<Q, G> dec[QCHUNK];
    for (int64_t s = i0; s < i1; s += QCHUNK) {
        const int64_t n = std::min(QCHUNK, i1 - s);
        decode_chunk<Q, G>(ar, s, n, lda, dec);
        int c0 = 0;
        for (; c0 + Q::dec_cols <= ncols; c0 += Q::dec_cols) decoded_cols<Q, G, Q::dec_cols>(dec, s, n, {prep, c0}, accs);
        const int left = ncols - c0; // fewer than Q::dec_cols
        if constexpr (Q::dec_cols > 3) {
            if (left == 3) decoded_cols<Q, G, 3>(dec, s, n, {prep, c0}, accs);
        }
        if constexpr (Q::dec_cols > 2) {
            if (left == 2) decoded_cols<Q, G, 2>(dec, s, n, {prep, c0}, accs);
        }
        if (left == 1) decoded_cols<Q, G, 1>(dec, s, n, {prep, c0}, accs);
    }
    for (int c = 0; c < ncols; ++c) {
        if (!carry.last) {
            for (int k = 0; k < NA; ++k) std::memcpy(slot(k, c), accs[c][k], 8 * sizeof(float));
            continue;
        }
        store_rows<G>(accs[c], dst + size_t(c) * ldd);
    }
}

// Rows in tiles of 2 Q::pairs, then two, as rows() cuts them, on prepared
// columns.
template <class Q>
void rows_decoded(int64_t i0, int64_t i1, const char * a, size_t lda, int64_t nrows, const char * prep, int ncols,
                  float * dst, size_t ldd, Carry carry) {
    float * const acc0 = carry.acc;
    auto          at   = [&](int64_t r) { return acc0 != nullptr ? acc0 + 8 * size_t(r / 2) * QGEMM_COLS : nullptr; };
    int64_t       r    = 0;
    for (; r + 2 * Q::pairs <= nrows; r += 2 * Q::pairs) {
        carry.acc = at(r);
        tile_decoded<Q, Q::pairs>(i0, i1, a + size_t(r) * lda, lda, prep, ncols, dst + r, ldd, carry);
    }
    for (; r + 2 <= nrows; r += 2) {
        carry.acc = at(r);
        tile_decoded<Q, 1>(i0, i1, a + size_t(r) * lda, lda, prep, ncols, dst + r, ldd, carry);
    }
}

// The last row of a matrix with an odd row count, over all of K.
template <class Q>
void last_row(int64_t K, const char * a, size_t lda, int64_t nrows, const char * b, size_t ldb, int ncols, float * dst,
              size_t ldd) {
    if (nrows % 2 == 0) {
        return;
    }
    const int64_t r = nrows - 1;
    if constexpr (Q::offset == 0) {
        gemv_q8_0(K, a + size_t(r) * lda, lda, 1, b, ldb, ncols, dst + r, ldd);
    } else {
        gemv_q4_0(K, a + size_t(r) * lda, lda, 1, b, ldb, ncols, dst + r, ldd);
    }
}

template <class Q>
void gemv2(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols, float * dst,
           size_t ldd) {
    const auto * ac = static_cast<const char *>(a);
    const auto * bc = static_cast<const char *>(b);
    auto at = [&](int c0) { return RawCols<Q::cols>(bc + size_t(c0) * ldb, ldb, ncols - c0); };
    all_cols<Q>(K / QK8_0, ac, lda, nrows, ncols, at, dst, ldd);
    last_row<Q>(K, ac, lda, nrows, bc, ldb, ncols, dst, ldd);
}

template <class Q>
void qgemm2(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
            const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd) {
    const auto *  ac = static_cast<const char *>(a);
    const int64_t nb = K / QK8_0;
    const Carry   carry{acc, i0 == 0, i1 == nb};
    rows_decoded<Q>(i0, i1, ac, lda, nrows, static_cast<const char *>(prep), ncols, dst, ldd, carry);
    if (carry.last) {
        last_row<Q>(K, ac, lda, nrows, static_cast<const char *>(b), ldb, ncols, dst, ldd);
    }
}

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
