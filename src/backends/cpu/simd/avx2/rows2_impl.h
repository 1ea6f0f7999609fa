// The tiles of two rows per register (Note [Two rows per register] in
// rows2.cpp), written once for every type whose blocks are 32 weights of one
// scale: rows2.cpp instantiates them for Q4_0 and Q8_0, rows2_legacy.cpp for
// Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4. Include inside loom::cpu::avx2,
// between target_begin.h and target_end.h.
//
// A type Q gives: W (its block), Y (the column's block: block_q8_0, or
// block_q8_1 for types with a min), offset (what its stored levels add to
// the weight: the column's starting value is minus offset times its sums),
// pairs, cols and dec_cols (Note [Rows decoded per chunk]), Dec with
// decode(a, b, Dec) of one block of two rows, product(Dec, Col), and
// one_row, the one-row kernel that takes a matrix's last odd row. Optional:
// has_min (value d u + m: the block adds m times the column's s), e8m0
// (the scale is an E8M0 byte e instead of an fp16 d).

#include "e8m0.h"

namespace {

[[gnu::always_inline]] inline __m128i load128(const void * p) {
    return _mm_loadu_si128(static_cast<const __m128i *>(p));
}

[[gnu::always_inline]] inline __m256i pair(const void * lo_lane, const void * hi_lane) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(load128(lo_lane)), load128(hi_lane), 1);
}

template <class Q, class = void> struct has_min : std::false_type {};
template <class Q> struct has_min<Q, std::void_t<decltype(Q::has_min)>> : std::bool_constant<Q::has_min> {};

template <class Q, class = void> struct has_e8m0 : std::false_type {};
template <class Q> struct has_e8m0<Q, std::void_t<decltype(Q::e8m0)>> : std::bool_constant<Q::e8m0> {};

// An activation block broadcast to both lanes, with its starting value
// and, for Q8_1 columns, its s (d times the sum of its values).
struct Col {
    __m256i lo, hi, start;
    __m256  s;
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

// The nibbles of one block of two rows: lo holds weights 0..15, hi 16..31.
[[gnu::always_inline]] inline void nibble_pair(const uint8_t * a, const uint8_t * b, __m256i & lo, __m256i & hi) {
    const __m256i q = pair(a, b);
    const __m256i m = _mm256_set1_epi8(0x0f);
    lo              = _mm256_and_si256(q, m);
    hi              = _mm256_and_si256(_mm256_srli_epi16(q, 4), m);
}

// The types whose levels are stored unsigned (at most 31, so the two
// maddubs sums of a pair of halves still fit int16 when added): lo and hi
// meet the column's halves, and the column's starting value takes the
// offset off. A type adds its decode and one_row (and has_min or e8m0).
struct UnsignedDec {
    __m256i lo, hi;
};

template <int Offset>
[[gnu::always_inline]] inline __m256i unsigned_product(const UnsignedDec & d, const Col & c) {
    const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(d.lo, c.lo), _mm256_maddubs_epi16(d.hi, c.hi));
    const __m256i p   = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
    if constexpr (Offset == 0) {
        return p;
    } else {
        return _mm256_add_epi32(p, c.start);
    }
}

template <class W_, class Y_, int Offset, int Cols> struct UnsignedQ {
    using W                       = W_;
    using Y                       = Y_;
    using Dec                     = UnsignedDec;
    static constexpr int offset   = Offset;
    static constexpr int pairs    = 2; // pairs of rows per tile
    static constexpr int cols     = Cols; // columns a tile meets per pass
    static constexpr int dec_cols = 4; // the same on decoded rows (Note [Rows decoded per chunk])
    [[gnu::always_inline]] static __m256i product(const Dec & d, const Col & c) { return unsigned_product<Offset>(d, c); }
};

// Prepared columns: for a group of QGEMM_COLS columns, block i holds the
// columns' low halves (16 bytes each), high halves, starting values (four
// int32 each) and scales as floats, in PREP_BLOCK bytes.
constexpr size_t PREP_LO    = 0;
constexpr size_t PREP_HI    = 16 * QGEMM_COLS;
constexpr size_t PREP_START = 32 * QGEMM_COLS;
constexpr size_t PREP_D     = 48 * QGEMM_COLS;
constexpr size_t PREP_BLOCK = 52 * QGEMM_COLS;

template <int C, class Y = block_q8_0> struct RawCols {
    const Y * bc[C] = {};
    RawCols(const char * b, size_t ldb, int ncols) {
        for (int c = 0; c < C && c < ncols; ++c) bc[c] = reinterpret_cast<const Y *>(b + size_t(c) * ldb);
    }
    template <int Offset> [[gnu::always_inline]] void get(int64_t i, int c, Col & col, __m256 & dy) const {
        const __m128i lo = load128(bc[c][i].qs);
        const __m128i hi = load128(bc[c][i].qs + 16);
        col.lo           = _mm256_broadcastsi128_si256(lo);
        col.hi           = _mm256_broadcastsi128_si256(hi);
        col.start        = _mm256_broadcastsi128_si256(start_lanes<Offset>(lo, hi));
        dy               = _mm256_set1_ps(half_to_float(bc[c][i].d));
        if constexpr (std::is_same_v<Y, block_q8_1>) {
            col.s = _mm256_set1_ps(half_to_float(bc[c][i].s));
        }
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
// within halves), and so are the scales, the four rows' put there by one
// permute.
// Tiles of one pair keep a register per pair.
template <int G> constexpr int n_acc = G == 2 ? 1 : G;

// The scales of a tile's rows for its accumulators: the pairs' own, or for
// two pairs the four rows' in the layout above.
template <int G> struct TileScales {
    __m256 v[n_acc<G>];
};

// Four fp16 values in the low four 16-bit lanes, zeros above.
[[gnu::always_inline]] inline __m128i halves4(uint16_t a, uint16_t b, uint16_t c, uint16_t d) {
    __m128i h = _mm_cvtsi32_si128(int(uint32_t(a) | uint32_t(b) << 16));
    h         = _mm_insert_epi16(h, c, 2);
    return _mm_insert_epi16(h, d, 3);
}

// Block i's scales of the tile's 2G rows (fp16 d, or E8M0 e), as floats
// in lanes 0 .. 2G - 1.
template <class Q, int G>
[[gnu::always_inline]] inline __m128 row_scales(const typename Q::W * const * ar, int64_t i) {
    if constexpr (has_e8m0<Q>::value) {
        return e8m0_scales(G == 2 ? _mm_setr_epi32(ar[0][i].e, ar[1][i].e, ar[2][i].e, ar[3][i].e)
                                  : _mm_setr_epi32(ar[0][i].e, ar[1][i].e, 0, 0));
    } else {
        return _mm_cvtph_ps(G == 2 ? halves4(ar[0][i].d, ar[1][i].d, ar[2][i].d, ar[3][i].d)
                                   : halves4(ar[0][i].d, ar[1][i].d, 0, 0));
    }
}

// The scales in the accumulators' layout: rows 0, 0, 2, 2 and 1, 1, 3, 3
// for two pairs, a pair's two rows in its halves for one.
template <class Q, int G>
[[gnu::always_inline]] inline TileScales<G> tile_scales(const typename Q::W * const * ar, int64_t i) {
    static_assert(G == 1 || G == 2);
    const __m256i idx = G == 2 ? _mm256_setr_epi32(0, 0, 2, 2, 1, 1, 3, 3) : _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
    return {{_mm256_permutevar8x32_ps(_mm256_castps128_ps256(row_scales<Q, G>(ar, i)), idx)}};
}

// The rows' mins m (has_min types) in the same layout, each row's m in one
// of its lanes and zero in the others, so that a row's lanes add it once.
template <class Q, int G>
[[gnu::always_inline]] inline TileScales<G> tile_mins(const typename Q::W * const * ar, int64_t i) {
    static_assert(G == 1 || G == 2);
    const __m128i h = G == 2 ? halves4(ar[0][i].m, ar[1][i].m, ar[2][i].m, ar[3][i].m)
                             : halves4(ar[0][i].m, ar[1][i].m, 0, 0);
    const __m256  m   = _mm256_zextps128_ps256(_mm_cvtph_ps(h)); // lanes from 2G on are zero
    const __m256i idx = G == 2 ? _mm256_setr_epi32(0, 4, 2, 4, 1, 4, 3, 4) : _mm256_setr_epi32(0, 4, 4, 4, 1, 4, 4, 4);
    return {{_mm256_permutevar8x32_ps(m, idx)}};
}

// Both at once for two pairs of rows whose d and m are adjacent fp16
// (Q4_1, Q5_1): each row's (d, m) word, two rows to a 64-bit register, one
// conversion of all eight, then the two permutes; the same floats, with
// fewer moves into vector registers than two rounds of halves4.
template <class Q>
[[gnu::always_inline]] inline void tile_scales_mins(const typename Q::W * const * ar, int64_t i, TileScales<2> & ts,
                                                    TileScales<2> & tm) {
    using W = typename Q::W;
    static_assert(offsetof(W, m) == offsetof(W, d) + sizeof(uint16_t));
    uint32_t dm[4];
    for (int r = 0; r < 4; ++r) std::memcpy(&dm[r], &ar[r][i].d, sizeof dm[r]);
    const __m128i h = _mm_set_epi64x(int64_t(uint64_t(dm[3]) << 32 | dm[2]), int64_t(uint64_t(dm[1]) << 32 | dm[0]));
    const __m256  v = _mm256_cvtph_ps(h); // d0 m0 d1 m1 d2 m2 d3 m3
    ts.v[0]         = _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(0, 0, 4, 4, 2, 2, 6, 6));
    tm.v[0]         = _mm256_blend_ps(_mm256_permutevar8x32_ps(v, _mm256_setr_epi32(1, 1, 5, 5, 3, 3, 7, 7)),
                                      _mm256_setzero_ps(), 0xaa);
}

// acc + the products of a tile's G decoded pairs with one column; for
// has_min types macc + the rows' mins times the column's s.
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

template <int G>
[[gnu::always_inline]] inline void add_mins(const TileScales<G> & mx, const Col & col, __m256 * macc) {
    for (int k = 0; k < n_acc<G>; ++k) macc[k] = _mm256_fmadd_ps(mx.v[k], col.s, macc[k]);
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
    __m256        acc[C][NA];
    __m256        macc[C][NA]; // the mins' terms (has_min types)
    for (int c = 0; c < C; ++c) {
        for (int k = 0; k < NA; ++k) acc[c][k] = macc[c][k] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < nb; ++i) {
        // The same place in the next tile's rows, which follow in memory.
        for (int r = 0; r < 2 * G; ++r) {
            _mm_prefetch(reinterpret_cast<const char *>(ar[r] + i) + 2 * G * lda, _MM_HINT_T0);
        }
        typename Q::Dec w[G];
        for (int g = 0; g < G; ++g) Q::decode(ar[2 * g][i], ar[2 * g + 1][i], w[g]);
        TileScales<G> ts{};
        TileScales<G> tm{};
        if constexpr (has_min<Q>::value && G == 2) {
            tile_scales_mins<Q>(ar, i, ts, tm);
        } else {
            ts = tile_scales<Q, G>(ar, i);
            if constexpr (has_min<Q>::value) tm = tile_mins<Q, G>(ar, i);
        }
        for (int c = 0; c < C; ++c) {
            Col    col;
            __m256 dy;
            cols.template get<Q::offset>(i, c, col, dy);
            add_products<Q, G>(w, ts, col, dy, acc[c]);
            if constexpr (has_min<Q>::value) add_mins<G>(tm, col, macc[c]);
        }
    }
    for (int c = 0; c < C; ++c) {
        alignas(32) float v[NA][8];
        for (int k = 0; k < NA; ++k) {
            if constexpr (has_min<Q>::value) acc[c][k] = _mm256_add_ps(acc[c][k], macc[c][k]);
            _mm256_store_ps(v[k], acc[c][k]);
        }
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
    for (int64_t j = 0; j < n; ++j) {
        const int64_t i = i0 + j;
        for (int r = 0; r < 2 * G; ++r) {
            _mm_prefetch(reinterpret_cast<const char *>(ar[r] + i) + 2 * G * lda, _MM_HINT_T0);
        }
        for (int g = 0; g < G; ++g) Q::decode(ar[2 * g][i], ar[2 * g + 1][i], out[j].w[g]);
        out[j].dx = tile_scales<Q, G>(ar, i);
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
    Q::one_row(K, a + size_t(r) * lda, lda, 1, b, ldb, ncols, dst + r, ldd);
}

template <class Q>
void gemv2(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols, float * dst,
           size_t ldd) {
    const auto * ac = static_cast<const char *>(a);
    const auto * bc = static_cast<const char *>(b);
    auto at = [&](int c0) { return RawCols<Q::cols, typename Q::Y>(bc + size_t(c0) * ldb, ldb, ncols - c0); };
    all_cols<Q>(K / QK8_0, ac, lda, nrows, ncols, at, dst, ldd);
    last_row<Q>(K, ac, lda, nrows, bc, ldb, ncols, dst, ldd);
}

template <class Q>
void qgemm2(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
            const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd) {
    static_assert(!has_min<Q>::value, "prepared columns hold Q8_0 blocks");
    const auto *  ac = static_cast<const char *>(a);
    const int64_t nb = K / QK8_0;
    const Carry   carry{acc, i0 == 0, i1 == nb};
    rows_decoded<Q>(i0, i1, ac, lda, nrows, static_cast<const char *>(prep), ncols, dst, ldd, carry);
    if (carry.last) {
        last_row<Q>(K, ac, lda, nrows, static_cast<const char *>(b), ldb, ncols, dst, ldd);
    }
}

} // namespace
