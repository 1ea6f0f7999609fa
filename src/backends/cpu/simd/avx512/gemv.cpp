// Quantized matrix-vector products with AVX-512 VNNI.
//
// Note [Four rows per register]
// A Q4_0 or Q8_0 block holds 32 weights in 16 or 32 bytes. One 512-bit
// register takes 16 bytes of each of four rows, one row per 128-bit lane,
// and meets the activation block broadcast to all four lanes, so one
// vpdpbusd multiplies 64 weight bytes by their activations and sums them in
// groups of four into 16 int32 lanes: lanes 4r..4r+3 belong to row r.
// vpdpbusd takes its first operand as unsigned bytes, so weights are kept
// or made unsigned: Q4_0 nibbles are 0..15 as stored (the weight is n - 8),
// Q8_0 weights get 128 added (x ^ 0x80). The offset times the sum of the
// activations, the same for every row, is computed once per column block
// with the same instruction and subtracted: every lane is an exact integer.
// Lanes are converted and scaled by their row's block scale times the
// column's, as the AVX2 kernel does with its 8 lanes.
// Two more types of 32 weights and one fp16 scale per block take the same
// tiles: Q5_0 (the nibbles plus 16 where the block's qh bit is set, 0..31,
// offset 16) and IQ4_NL (the nibbles looked up in the type's table plus
// 128, offset 128); and MXFP4 as IQ4_NL, with the doubled E2M1 values for
// table and half its E8M0 byte's power of two for scale.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backends/cpu/simd/kernel_table.h"
#include "core/types.h"
#include "core/types/i_quants.h"
#include "core/types/iq_tables.h"
#include "core/types/legacy_k.h"
#include "core/types/other.h"

#include "target_begin.h"
#include "../avx2/avx2.h"
#include "avx512.h"
#include "start.h"

namespace loom::cpu::avx512 {

#include "../avx2/e8m0.h"

namespace {

// GCC 12 reports the undefined inputs that the unmasked forms of some
// AVX-512 intrinsics pass to their builtins as maybe uninitialized; the
// zero-masked forms with every lane selected are the same instructions.
constexpr __mmask16 k_all = 0xffff;

[[gnu::always_inline]] inline __m128i load128(const void * p) {
    return _mm_loadu_si128(static_cast<const __m128i *>(p));
}

// Weights of block i of four rows as two registers of unsigned bytes: lo
// holds weights 0..15 of each row, hi weights 16..31. decode takes the
// rows' blocks.
struct Q4 {
    using W                     = block_q4_0;
    static constexpr int offset = 8;
    // Note [Q4_0 rows in pairs of lanes]
    static constexpr bool paired = true;
    [[gnu::always_inline]] static void decode(const uint8_t * const * qs, __m512i & lo, __m512i & hi) {
        __m512i q = _mm512_zextsi128_si512(load128(qs[0]));
        q         = _mm512_inserti32x4(q, load128(qs[1]), 1);
        q         = _mm512_inserti32x4(q, load128(qs[2]), 2);
        q         = _mm512_inserti32x4(q, load128(qs[3]), 3);
        const __m512i mask = _mm512_set1_epi8(0x0f);
        lo                 = _mm512_and_si512(q, mask);
        hi                 = _mm512_and_si512(_mm512_srli_epi16(q, 4), mask);
    }
    template <class B> [[gnu::always_inline]] static void decode(const B * const * x, __m512i & lo, __m512i & hi) {
        const uint8_t * qs[4] = {x[0]->qs, x[1]->qs, x[2]->qs, x[3]->qs};
        decode(qs, lo, hi);
    }
};

// Q5_0: bit j of a block's qh is the fifth bit of weight j.
struct Q5 {
    using W                     = block_q5_0;
    static constexpr int offset = 16;
    template <class B> [[gnu::always_inline]] static void decode(const B * const * x, __m512i & lo, __m512i & hi) {
        Q4::decode(x, lo, hi);
        uint64_t ml = 0, mh = 0; // byte 16 r + j of lo (hi): weight j (16 + j) of row r
        for (int r = 0; r < 4; ++r) {
            uint32_t h;
            std::memcpy(&h, x[r]->qh, sizeof h);
            ml |= uint64_t(h & 0xffff) << (16 * r);
            mh |= uint64_t(h >> 16) << (16 * r);
        }
        const __m512i sixteen = _mm512_set1_epi8(16);
        lo                    = _mm512_mask_add_epi8(lo, ml, lo, sixteen);
        hi                    = _mm512_mask_add_epi8(hi, mh, hi, sixteen);
    }
};

// Q4_1 and Q5_1 (value d u + m, u = 0..15 or 0..31) against Q8_1: the
// levels as they are (offset 0, no starting value); each block's m meets
// the column's s (d times the sum of its values) in the first lane of its
// row's quarter, as the portable dot product adds m s per block.
struct Q41 {
    using W                       = block_q4_1;
    static constexpr int  offset  = 0;
    static constexpr bool has_min = true;
    [[gnu::always_inline]] static void decode(const W * const * x, __m512i & lo, __m512i & hi) {
        Q4::decode(x, lo, hi);
    }
};
struct Q51 {
    using W                       = block_q5_1;
    static constexpr int  offset  = 0;
    static constexpr bool has_min = true;
    [[gnu::always_inline]] static void decode(const W * const * x, __m512i & lo, __m512i & hi) {
        Q5::decode(x, lo, hi);
    }
};

// The nibbles of four rows' blocks looked up in a table of 16 signed
// levels, plus 128 (offset 128).
template <class B>
[[gnu::always_inline]] inline void table_decode(const B * const * x, const int8_t * values, __m512i & lo,
                                                __m512i & hi) {
    Q4::decode(x, lo, hi);
    const __m512i table =
        _mm512_maskz_broadcast_i32x4(k_all, _mm_xor_si128(load128(values), _mm_set1_epi8(char(0x80))));
    lo = _mm512_shuffle_epi8(table, lo);
    hi = _mm512_shuffle_epi8(table, hi);
}

// IQ4_NL: a nibble is an index into the type's table of 16 levels.
struct IQ4NL {
    using W                     = block_iq4_nl;
    static constexpr int offset = 128;
    [[gnu::always_inline]] static void decode(const W * const * x, __m512i & lo, __m512i & hi) {
        table_decode(x, iq::kvalues_iq4nl, lo, hi);
    }
};

#include "core/types/fp4_values.inc"

// MXFP4: as IQ4_NL with the E2M1 table; its scale is an E8M0 byte
// (e8m0_scales).
struct MXFP4 {
    using W                     = block_mxfp4;
    static constexpr int offset = 128;
    static constexpr bool e8m0  = true;
    [[gnu::always_inline]] static void decode(const W * const * x, __m512i & lo, __m512i & hi) {
        table_decode(x, kvalues_fp4, lo, hi);
    }
};

// Whether Q's blocks add a min m times the column's s (Q8_1 columns).
template <class Q, class = void> struct has_min : std::false_type {};
template <class Q> struct has_min<Q, std::void_t<decltype(Q::has_min)>> : std::bool_constant<Q::has_min> {};

// Whether Q's tiles add each row's four lanes in pairs before converting
// them (Note [Q4_0 rows in pairs of lanes]).
template <class Q, class = void> struct paired : std::false_type {};
template <class Q> struct paired<Q, std::void_t<decltype(Q::paired)>> : std::bool_constant<Q::paired> {};

// Whether Q's blocks scale by an E8M0 byte e instead of an fp16 d.
template <class Q, class = void> struct has_e8m0 : std::false_type {};
template <class Q> struct has_e8m0<Q, std::void_t<decltype(Q::e8m0)>> : std::bool_constant<Q::e8m0> {};

struct Q8 {
    using W                     = block_q8_0;
    static constexpr int offset = 128;
    // Note [Q4_0 rows in pairs of lanes]: Q8_0 too.
    static constexpr bool paired = true;
    [[gnu::always_inline]] static void decode(const uint8_t * const * qs, __m512i & lo, __m512i & hi) {
        __m512i a = _mm512_zextsi128_si512(load128(qs[0]));
        __m512i b = _mm512_zextsi128_si512(load128(qs[0] + 16));
        a         = _mm512_inserti32x4(a, load128(qs[1]), 1);
        b         = _mm512_inserti32x4(b, load128(qs[1] + 16), 1);
        a         = _mm512_inserti32x4(a, load128(qs[2]), 2);
        b         = _mm512_inserti32x4(b, load128(qs[2] + 16), 2);
        a         = _mm512_inserti32x4(a, load128(qs[3]), 3);
        b         = _mm512_inserti32x4(b, load128(qs[3] + 16), 3);
        const __m512i flip = _mm512_set1_epi8(char(0x80));
        lo                 = _mm512_xor_si512(a, flip);
        hi                 = _mm512_xor_si512(b, flip);
    }
    [[gnu::always_inline]] static void decode(const W * const * x, __m512i & lo, __m512i & hi) {
        const uint8_t * qs[4] = {reinterpret_cast<const uint8_t *>(x[0]->qs), reinterpret_cast<const uint8_t *>(x[1]->qs),
                                 reinterpret_cast<const uint8_t *>(x[2]->qs), reinterpret_cast<const uint8_t *>(x[3]->qs)};
        decode(qs, lo, hi);
    }
};

// Where a tile's rows are: ggml's layout, rows lda bytes apart (PlainRows),
// or groups of eight rows repacked by the CPU_REPACK buffer (Note [Repacked
// weights] in repack.h). Every source hands the tile the same register
// contents for the same weights, so results are the same bits.
// decode(g, i, lo, hi): block i of rows 4g .. 4g + 3 (Q::decode's form);
// scales(g, i): their four scales as floats; prefetch(i):
// fetch what block i of the next tile's rows needs early; out(g): offset of
// row 4g's result from the tile's dst.
template <class Q, int R> struct PlainRows {
    using W = typename Q::W;
    const W * ar[R];
    size_t    ahead; // bytes to the next tile's rows
    PlainRows(const char * a, size_t lda) : ahead(R * lda) {
        for (int r = 0; r < R; ++r) ar[r] = reinterpret_cast<const W *>(a + size_t(r) * lda);
    }
    [[gnu::always_inline]] void decode(int g, int64_t i, __m512i & lo, __m512i & hi) const {
        const W * x[4];
        for (int k = 0; k < 4; ++k) x[k] = &ar[4 * g + k][i];
        Q::decode(x, lo, hi);
    }
    [[gnu::always_inline]] __m128 scales(int g, int64_t i) const {
        if constexpr (has_e8m0<Q>::value) {
            return e8m0_scales(_mm_setr_epi32(ar[4 * g][i].e, ar[4 * g + 1][i].e, ar[4 * g + 2][i].e,
                                              ar[4 * g + 3][i].e));
        } else {
            __m128i h = _mm_cvtsi32_si128(ar[4 * g][i].d);
            h         = _mm_insert_epi16(h, ar[4 * g + 1][i].d, 1);
            h         = _mm_insert_epi16(h, ar[4 * g + 2][i].d, 2);
            return _mm_cvtph_ps(_mm_insert_epi16(h, ar[4 * g + 3][i].d, 3));
        }
    }
    // The four rows' mins m as floats (has_min types).
    [[gnu::always_inline]] __m128 mins(int g, int64_t i) const {
        __m128i h = _mm_cvtsi32_si128(ar[4 * g][i].m);
        h         = _mm_insert_epi16(h, ar[4 * g + 1][i].m, 1);
        h         = _mm_insert_epi16(h, ar[4 * g + 2][i].m, 2);
        return _mm_cvtph_ps(_mm_insert_epi16(h, ar[4 * g + 3][i].m, 3));
    }
    [[gnu::always_inline]] void prefetch(int64_t i) const {
        // The rows of the next tile follow in memory: fetch them early (the
        // streams are too short for the hardware prefetcher to ramp up).
        for (int r = 0; r < R; ++r) {
            _mm_prefetch(reinterpret_cast<const char *>(ar[r] + i) + ahead, _MM_HINT_T0);
        }
    }
    static size_t out(int g) { return 4 * size_t(g); }
};

// An activation block broadcast to the four lanes, with minus the weights'
// offset times its sums of four: the value the products start from.
struct Col {
    __m512i lo, hi, start;
};

template <int Offset, class Y = block_q8_0> [[gnu::always_inline]] inline Col prepare(const Y & y) {
    Col c;
    c.lo              = _mm512_maskz_broadcast_i32x4(k_all, load128(y.qs));
    c.hi              = _mm512_maskz_broadcast_i32x4(k_all, load128(y.qs + 16));
    if constexpr (Offset == 0) {
        c.start = _mm512_setzero_si512();
        return c;
    }
    // start_lanes() in all four quarters, from the broadcast halves (per
    // tile, this is cheaper than a broadcast of start_lanes()).
    const __m512i off = _mm512_set1_epi8(char(Offset));
    c.start           = _mm512_sub_epi32(_mm512_setzero_si512(),
                                         _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), off, c.lo), off, c.hi));
    return c;
}

// Sum of the four lanes of each 128-bit quarter: row r's result.
[[gnu::always_inline]] inline void store_rows(__m512 acc, float * dst) {
    alignas(64) float v[16];
    _mm512_store_ps(v, acc);
    for (int r = 0; r < 4; ++r) {
        dst[r] = (v[4 * r] + v[4 * r + 1]) + (v[4 * r + 2] + v[4 * r + 3]);
    }
}

// Activation columns as the tile reads them: Q8_0 blocks, prepared per
// tile (Raw), or prepared once for every tile (Prepared, Note [Prepared
// columns]). Both give the tile the same values.
template <int C, class Y = block_q8_0> struct RawCols {
    const Y * bc[C];
    RawCols(const char * b, size_t ldb) {
        for (int c = 0; c < C; ++c) bc[c] = reinterpret_cast<const Y *>(b + size_t(c) * ldb);
    }
    template <int Offset> [[gnu::always_inline]] void get(int64_t i, int c, Col & col, __m512 & dy) const {
        col = prepare<Offset>(bc[c][i]);
        dy  = _mm512_set1_ps(_cvtsh_ss(bc[c][i].d));
    }
    // Q8_1's s of block i of column c, in every lane.
    [[gnu::always_inline]] __m512 sums(int64_t i, int c) const { return _mm512_set1_ps(_cvtsh_ss(bc[c][i].s)); }
};

// Note [Prepared columns]
// Products with many columns meet every activation block once per tile of
// rows. Preparing the blocks once per product saves that work: for a group
// of QGEMM_COLS columns, block i is stored as the columns' low halves (16
// bytes each), high halves, starting values (four int32 each, minus the
// weights' offset times the sums of four) and scales as floats, in
// PREP_BLOCK bytes. The starting values depend on the offset, so a group is
// prepared for one weight type.
constexpr size_t PREP_LO    = 0;
constexpr size_t PREP_HI    = 16 * QGEMM_COLS;
constexpr size_t PREP_START = 32 * QGEMM_COLS;
constexpr size_t PREP_D     = 48 * QGEMM_COLS;
constexpr size_t PREP_BLOCK = 52 * QGEMM_COLS;

struct PreparedCols {
    const char * base;
    template <int Offset> [[gnu::always_inline]] void get(int64_t i, int c, Col & col, __m512 & dy) const {
        const char * pb = base + size_t(i) * PREP_BLOCK;
        col.lo          = _mm512_maskz_broadcast_i32x4(k_all, load128(pb + PREP_LO + 16 * c));
        col.hi          = _mm512_maskz_broadcast_i32x4(k_all, load128(pb + PREP_HI + 16 * c));
        col.start       = _mm512_maskz_broadcast_i32x4(k_all, load128(pb + PREP_START + 16 * c));
        dy              = _mm512_set1_ps(reinterpret_cast<const float *>(pb + PREP_D)[c]);
    }
};

template <int Offset>
void prepare_cols(int64_t K, const void * b, size_t ldb, int ncols, void * out) {
    const int64_t nb = K / QK8_0;
    auto *        o  = static_cast<char *>(out);
    std::memset(o, 0, size_t(nb) * PREP_BLOCK);
    for (int c = 0; c < ncols; ++c) {
        const auto * bc = reinterpret_cast<const block_q8_0 *>(static_cast<const char *>(b) + size_t(c) * ldb);
        for (int64_t i = 0; i < nb; ++i) {
            char *    pb  = o + size_t(i) * PREP_BLOCK;
            const __m128i start = start_lanes<Offset>(bc[i]);
            std::memcpy(pb + PREP_LO + 16 * c, bc[i].qs, 16);
            std::memcpy(pb + PREP_HI + 16 * c, bc[i].qs + 16, 16);
            _mm_storeu_si128(reinterpret_cast<__m128i *>(pb + PREP_START + 16 * c), start);
            const float d = _cvtsh_ss(bc[i].d);
            std::memcpy(pb + PREP_D + 4 * size_t(c), &d, sizeof d);
        }
    }
}

// Where a tile's partial sums live between calls that cover parts of K:
// nowhere (the tile covers all of K), or G x C registers in memory.
struct Carry {
    float * acc   = nullptr; // 16 floats per register
    bool    first = true;    // start from zero (else from acc)
    bool    last  = true;    // write dst (else store to acc)
};

// Note [Q4_0 rows in pairs of lanes]
// Q4_0 and Q8_0 in ggml's layout give the bits of the AVX2 table here too,
// those of their rows interleaved by eight (Note [Q4_0 by eight on 512-bit
// registers] in by_eight.cpp), which need them: a row's four int32
// lanes of a block (bytes 4k .. 4k + 3 of its qs, k = 0..3, with their
// starting values) are added in pairs, k = 0, 1 and k = 2, 3, as the AVX2
// table's four-row tiles add them (Note [Four rows per conversion] in
// avx2/rows2.cpp), and each pair sum is converted, scaled and added into
// an f32 lane of its own; a row's result is the sum of its two lanes.
// The two registers of a tile of eight rows pair up in one (hadd's lanes:
// rows l and l + 4 in quarter l, pair sums k01, k23 of row l, then of row
// l + 4), so one conversion and one FMA serve eight rows; a tile of four
// pairs its register with itself and keeps the first two lanes of each
// quarter. The last rows of a matrix, fewer than four, go to the AVX2
// table's gemv2_q4_0 (gemv2_q8_0).
[[gnu::always_inline]] inline __m512i pair_sums(__m512i p0, __m512i p1) {
    const __m512 a = _mm512_castsi512_ps(p0), b = _mm512_castsi512_ps(p1);
    return _mm512_add_epi32(_mm512_castps_si512(_mm512_maskz_shuffle_ps(k_all, a, b, _MM_SHUFFLE(2, 0, 2, 0))),
                            _mm512_castps_si512(_mm512_maskz_shuffle_ps(k_all, a, b, _MM_SHUFFLE(3, 1, 3, 1))));
}

// The scales of a paired tile's rows in pair_sums()'s lanes.
template <int G, class Rows> [[gnu::always_inline]] inline __m512 paired_scales(const Rows & rows, int64_t i) {
    if constexpr (G == 1) {
        const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
        return _mm512_maskz_permutexvar_ps(k_all, idx, _mm512_zextps128_ps512(rows.scales(0, i)));
    } else {
        const __m512i idx = _mm512_setr_epi32(0, 0, 4, 4, 1, 1, 5, 5, 2, 2, 6, 6, 3, 3, 7, 7);
        const __m512  s   = _mm512_maskz_insertf32x4(k_all, _mm512_zextps128_ps512(rows.scales(0, i)), rows.scales(1, i), 1);
        return _mm512_maskz_permutexvar_ps(k_all, idx, s);
    }
}

// A paired tile's rows from its column's register (Note [Q4_0 rows in
// pairs of lanes]).
template <int G> [[gnu::always_inline]] inline void store_paired(__m512 acc, float * dst) {
    alignas(64) float v[16];
    _mm512_store_ps(v, acc);
    for (int l = 0; l < 4; ++l) {
        dst[l] = v[4 * l] + v[4 * l + 1];
        if constexpr (G == 2) dst[4 + l] = v[4 * l + 2] + v[4 * l + 3];
    }
}

// A paired tile's partial sums to and from the carry. (Out of line: where
// a call passes no carry, GCC 12 sees the null pointer in the branch not
// taken and reports it as out of bounds.)
[[gnu::noinline]] inline __m512 carried(const float * p) {
    return _mm512_loadu_ps(p);
}
[[gnu::noinline]] inline void carry_out(float * p, __m512 v) {
    _mm512_storeu_ps(p, v);
}

// Note [Q4_0 rows in pairs of lanes]: tile() for such types, G = 1 or 2,
// one register a column (the first of the column's carry slots).
template <class Q, int G, int C, class Cols, class Rows>
void paired_tile(int64_t i0, int64_t i1, const Rows & rows, const Cols & cols, float * dst, size_t ldd,
                 const Carry & carry) {
    static_assert(G == 1 || G == 2);
    __m512 acc[C];
    for (int c = 0; c < C; ++c) {
        acc[c] = carry.first ? _mm512_setzero_ps() : carried(carry.acc + 16 * c);
    }
    for (int64_t i = i0; i < i1; ++i) {
        rows.prefetch(i);
        __m512i lo[G], hi[G];
        for (int g = 0; g < G; ++g) rows.decode(g, i, lo[g], hi[g]);
        const __m512 dx = paired_scales<G>(rows, i);
        for (int c = 0; c < C; ++c) {
            Col    col;
            __m512 dy;
            cols.template get<Q::offset>(i, c, col, dy);
            __m512i p[G];
            for (int g = 0; g < G; ++g) {
                p[g] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(col.start, lo[g], col.lo), hi[g], col.hi);
            }
            const __m512i h = pair_sums(p[0], p[G - 1]);
            acc[c]          = _mm512_fmadd_ps(_mm512_mul_ps(dx, dy), _mm512_maskz_cvtepi32_ps(k_all, h), acc[c]);
        }
    }
    for (int c = 0; c < C; ++c) {
        if (carry.last) {
            store_paired<G>(acc[c], dst + size_t(c) * ldd);
        } else {
            carry_out(carry.acc + 16 * c, acc[c]);
        }
    }
}

// 4G rows (G registers of four rows) x C columns over blocks [i0, i1): each
// activation block is prepared once for all of them.
template <class Q, int G, int C, class Cols, class Rows>
void tile(int64_t i0, int64_t i1, const Rows & rows, const Cols & cols, float * dst, size_t ldd, const Carry & carry) {
    if constexpr (paired<Q>::value) {
        paired_tile<Q, G, C>(i0, i1, rows, cols, dst, ldd, carry);
        return;
    } else {
    const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    __m512        acc[G][C];
    for (int g = 0; g < G; ++g) {
        for (int c = 0; c < C; ++c) {
            acc[g][c] = carry.first ? _mm512_setzero_ps() : _mm512_loadu_ps(carry.acc + 16 * (g * C + c));
        }
    }
    for (int64_t i = i0; i < i1; ++i) {
        rows.prefetch(i);
        __m512i lo[G], hi[G];
        __m512  dx[G]; // row g's block scale in its four lanes
        __m512  mx[G]; // has_min: row g's m in the first of its lanes, 0 in the others
        for (int g = 0; g < G; ++g) {
            rows.decode(g, i, lo[g], hi[g]);
            dx[g] = _mm512_maskz_permutexvar_ps(k_all, spread, _mm512_zextps128_ps512(rows.scales(g, i)));
            if constexpr (has_min<Q>::value) {
                mx[g] = _mm512_maskz_permutexvar_ps(0x1111, spread, _mm512_zextps128_ps512(rows.mins(g, i)));
            }
        }
        for (int c = 0; c < C; ++c) {
            Col    col;
            __m512 dy;
            cols.template get<Q::offset>(i, c, col, dy);
            for (int g = 0; g < G; ++g) {
                const __m512i p = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(col.start, lo[g], col.lo), hi[g], col.hi);
                acc[g][c]       = _mm512_fmadd_ps(_mm512_mul_ps(dx[g], dy), _mm512_maskz_cvtepi32_ps(k_all, p), acc[g][c]);
            }
            if constexpr (has_min<Q>::value) {
                const __m512 sy = cols.sums(i, c);
                for (int g = 0; g < G; ++g) {
                    acc[g][c] = _mm512_fmadd_ps(mx[g], sy, acc[g][c]);
                }
            }
        }
    }
    for (int g = 0; g < G; ++g) {
        for (int c = 0; c < C; ++c) {
            if (carry.last) {
                store_rows(acc[g][c], dst + size_t(c) * ldd + rows.out(g));
            } else {
                _mm512_storeu_ps(carry.acc + 16 * (g * C + c), acc[g][c]);
            }
        }
    }
}
    }

// Rows in tiles of eight, then four, then the tail function for the last
// fewer than four rows of a matrix. With a carry, tile t's registers are at
// acc + 16 * QGEMM_COLS * 2 * t (eight rows per tile).
template <class Q, int C, class Cols>
void rows(int64_t i0, int64_t i1, const char * a, size_t lda, int64_t nrows, const Cols & cols, const char * b,
          size_t ldb, float * dst, size_t ldd, GemvFn tail, Carry carry) {
    static_assert(GEMV_ROW_ALIGN % 8 == 0);
    constexpr size_t tile_floats = 16 * QGEMM_COLS * 2;
    float * const    acc0        = carry.acc;
    int64_t          r           = 0;
    for (; r + 8 <= nrows; r += 8) {
        carry.acc = acc0 != nullptr ? acc0 + size_t(r / 8) * tile_floats : nullptr;
        tile<Q, 2, C>(i0, i1, PlainRows<Q, 8>(a + size_t(r) * lda, lda), cols, dst + r, ldd, carry);
    }
    for (; r + 4 <= nrows; r += 4) {
        carry.acc = acc0 != nullptr ? acc0 + size_t(r / 8) * tile_floats : nullptr;
        tile<Q, 1, C>(i0, i1, PlainRows<Q, 4>(a + size_t(r) * lda, lda), cols, dst + r, ldd, carry);
    }
    if (r < nrows && carry.last) {
        // Fewer than four rows, at the end of a matrix only (callers start
        // row ranges at multiples of GEMV_ROW_ALIGN): over all of K, once.
        tail(i1 * QK8_0, a + size_t(r) * lda, lda, nrows - r, b, ldb, C, dst + r, ldd);
    }
}

// go.template operator()<C>() with C = ncols (1 to 8) as a constant.
template <class F> void with_cols(int ncols, F & go) {
    switch (ncols) {
        case 1: go.template operator()<1>(); break;
        case 2: go.template operator()<2>(); break;
        case 3: go.template operator()<3>(); break;
        case 4: go.template operator()<4>(); break;
        case 5: go.template operator()<5>(); break;
        case 6: go.template operator()<6>(); break;
        case 7: go.template operator()<7>(); break;
        default: go.template operator()<8>(); break;
    }
}

// The column blocks Q's weights meet: Q8_1 for the types with a min, else
// Q8_0.
template <class Q> using column_block = std::conditional_t<has_min<Q>::value, block_q8_1, block_q8_0>;

template <class Q>
void gemv(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols, float * dst,
          size_t ldd, GemvFn tail) {
    const int64_t nb = K / QK8_0;
    const auto *  ac = static_cast<const char *>(a);
    const auto *  bc = static_cast<const char *>(b);
    auto          go = [&]<int C>() {
        rows<Q, C>(0, nb, ac, lda, nrows, RawCols<C, column_block<Q>>(bc, ldb), bc, ldb, dst, ldd, tail, {});
    };
    with_cols(ncols, go);
}

template <class Q>
void qgemm(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
           const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd, GemvFn tail) {
    static_assert(QGEMM_COLS == 8);
    const auto * ac = static_cast<const char *>(a);
    const auto * bc = static_cast<const char *>(b);
    const Carry  carry{acc, i0 == 0, i1 == K / QK8_0};
    auto         go = [&]<int C>() {
        rows<Q, C>(i0, i1, ac, lda, nrows, PreparedCols{static_cast<const char *>(prep)}, bc, ldb, dst, ldd, tail, carry);
    };
    with_cols(ncols, go);
}

} // namespace

void gemv_q4_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    gemv<Q4>(K, a, lda, nrows, b, ldb, ncols, dst, ldd, avx2::gemv2_q4_0);
}

void gemv_q8_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    gemv<Q8>(K, a, lda, nrows, b, ldb, ncols, dst, ldd, avx2::gemv2_q8_0);
}

void gemv4_q5_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd) {
    gemv<Q5>(K, a, lda, nrows, b, ldb, ncols, dst, ldd, gemv_q5_0);
}

void gemv4_iq4_nl(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                  float * dst, size_t ldd) {
    gemv<IQ4NL>(K, a, lda, nrows, b, ldb, ncols, dst, ldd, gemv_iq4_nl);
}

void gemv4_q4_1(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd) {
    gemv<Q41>(K, a, lda, nrows, b, ldb, ncols, dst, ldd, gemv_q4_1);
}

void gemv4_q5_1(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd) {
    gemv<Q51>(K, a, lda, nrows, b, ldb, ncols, dst, ldd, gemv_q5_1);
}

void gemv4_mxfp4(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                 float * dst, size_t ldd) {
    gemv<MXFP4>(K, a, lda, nrows, b, ldb, ncols, dst, ldd, gemv_mxfp4);
}

size_t qcols_bytes(int64_t K) {
    return size_t(K / QK8_0) * PREP_BLOCK;
}

void qcols_prepare_q4_0(int64_t K, const void * b, size_t ldb, int ncols, void * out) {
    prepare_cols<Q4::offset>(K, b, ldb, ncols, out);
}

void qcols_prepare_q8_0(int64_t K, const void * b, size_t ldb, int ncols, void * out) {
    prepare_cols<Q8::offset>(K, b, ldb, ncols, out);
}

void qcols_prepare_q5_0(int64_t K, const void * b, size_t ldb, int ncols, void * out) {
    prepare_cols<Q5::offset>(K, b, ldb, ncols, out);
}

void qcols_prepare_iq4_nl(int64_t K, const void * b, size_t ldb, int ncols, void * out) {
    prepare_cols<IQ4NL::offset>(K, b, ldb, ncols, out);
}

void qgemm_q5_0(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
                const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd) {
    qgemm<Q5>(K, i0, i1, a, lda, nrows, prep, b, ldb, ncols, acc, dst, ldd, gemv_q5_0);
}

void qgemm_iq4_nl(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
                  const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd) {
    qgemm<IQ4NL>(K, i0, i1, a, lda, nrows, prep, b, ldb, ncols, acc, dst, ldd, gemv_iq4_nl);
}

void qgemm_mxfp4(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
                 const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd) {
    static_assert(MXFP4::offset == IQ4NL::offset, "columns prepared by qcols_prepare_iq4_nl");
    qgemm<MXFP4>(K, i0, i1, a, lda, nrows, prep, b, ldb, ncols, acc, dst, ldd, gemv_mxfp4);
}

void qgemm_q4_0(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
                const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd) {
    qgemm<Q4>(K, i0, i1, a, lda, nrows, prep, b, ldb, ncols, acc, dst, ldd, avx2::gemv2_q4_0);
}

void qgemm_q8_0(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
                const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd) {
    qgemm<Q8>(K, i0, i1, a, lda, nrows, prep, b, ldb, ncols, acc, dst, ldd, avx2::gemv2_q8_0);
}

} // namespace loom::cpu::avx512

#include "target_end.h"

#endif // x86
