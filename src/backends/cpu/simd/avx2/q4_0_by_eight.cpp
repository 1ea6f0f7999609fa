// Q4_0 rows interleaved by eight (Note [Q4_0 rows by eight] in repack.h)
// on the AVX2 table: its qgemm_q4_0_x8 entries, every column count.
//
// Note [Q4_0 by eight on 256-bit registers]
// A register of weights is one word w of qs of a group's eight rows, row r
// in lane r: its low nibbles are each row's values 4w .. 4w + 3, its high
// ones values 16 + 4w .. 16 + 4w + 3. Each meets the column's four matching
// bytes, broadcast to every lane, in one maddubs, and a row's products stay
// in its own lane: nothing is summed across lanes, and one conversion, one
// product of scales and one FMA serve eight rows.
//
// The sums are those of the four-row tiles of ggml's layout (Notes [Two
// rows per register] and [Four rows per conversion] in rows2.cpp), which
// keep per row and block two exact int32 sums, of words 0 and 1 and of
// words 2 and 3 (each with the column's starting value: minus 8 times the
// column's sum over the same 16 bytes), each converted, scaled by the row's
// d times the column's and added into an f32 accumulator of its own, the
// row's result the sum of the two. Here the four maddubs of words 0 and 1
// add in int16 (each lane at most 4 * 2 * 15 * 128 < 2^15 in magnitude),
// one madd with ones gives every row's int32 sum of the two words, the
// starting value (prepared once per column and block) is added; words 2
// and 3 likewise. So every result has the bits of gemv2_q4_0 and
// qgemm2_q4_0 on the same weights in ggml's layout, for any column count,
// K cut into parts or not.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backends/cpu/simd/kernel_table.h"
#include "core/types.h"

#include "target_begin.h"
#include "avx2.h"

namespace loom::cpu::avx2 {

namespace {

constexpr size_t BY8_QUAD = 8 * 4 * sizeof(block_q4_0); // a quad of blocks of a group: 576 bytes
constexpr size_t BY8_QS   = 64;                          // the quad's qs, after its 32 scales

// A prepared column block: the 32 values, the starting values of words 0
// and 1 and of words 2 and 3, and the scale as a float. Block i of column
// c of a call at (i * ncols + c) * PREP_BYTES.
constexpr size_t PREP_BYTES   = 48;
constexpr size_t PREP_START01 = 32;
constexpr size_t PREP_START23 = 36;
constexpr size_t PREP_D       = 40;

// Ahead of the block being read, the same group's bytes fetched early.
constexpr size_t BY8_PREFETCH = 2048;

[[gnu::always_inline]] inline __m256i bcast4(const uint8_t * p) {
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

[[gnu::always_inline]] inline int32_t load_i32(const uint8_t * p) {
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// Block i of a group: its eight rows' scales and their words of qs split
// into low and high nibbles.
struct Block8 {
    __m256  d;
    __m256i lo[4], hi[4];
};

[[gnu::always_inline]] inline void load_block(const uint8_t * g, int64_t i, Block8 & w) {
    const uint8_t * q = g + size_t(i / 4) * BY8_QUAD;
    const size_t    k = size_t(i % 4);
    w.d               = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(q + 16 * k)));
    const __m256i m   = _mm256_set1_epi8(0x0f);
    for (size_t j = 0; j < 4; ++j) {
        // Word j in slot 2 (j % 2) + j / 2 (Note [Q4_0 rows by eight]).
        const __m256i x =
            _mm256_loadu_si256(reinterpret_cast<const __m256i *>(q + BY8_QS + 128 * k + 32 * (2 * (j % 2) + j / 2)));
        w.lo[j]         = _mm256_and_si256(x, m);
        w.hi[j]         = _mm256_and_si256(_mm256_srli_epi16(x, 4), m);
    }
}

// acc[0] and acc[1] (the sums of words 0, 1 and of words 2, 3) + the
// block's products with one prepared column block y.
[[gnu::always_inline]] inline void add_block(const Block8 & w, const uint8_t * y, __m256 * acc) {
    const __m256i s01 = _mm256_add_epi16(
        _mm256_add_epi16(_mm256_maddubs_epi16(w.lo[0], bcast4(y)), _mm256_maddubs_epi16(w.hi[0], bcast4(y + 16))),
        _mm256_add_epi16(_mm256_maddubs_epi16(w.lo[1], bcast4(y + 4)), _mm256_maddubs_epi16(w.hi[1], bcast4(y + 20))));
    const __m256i s23 = _mm256_add_epi16(
        _mm256_add_epi16(_mm256_maddubs_epi16(w.lo[2], bcast4(y + 8)), _mm256_maddubs_epi16(w.hi[2], bcast4(y + 24))),
        _mm256_add_epi16(_mm256_maddubs_epi16(w.lo[3], bcast4(y + 12)), _mm256_maddubs_epi16(w.hi[3], bcast4(y + 28))));
    const __m256i one = _mm256_set1_epi16(1);
    const __m256i a   = _mm256_add_epi32(_mm256_madd_epi16(s01, one), _mm256_set1_epi32(load_i32(y + PREP_START01)));
    const __m256i b   = _mm256_add_epi32(_mm256_madd_epi16(s23, one), _mm256_set1_epi32(load_i32(y + PREP_START23)));
    const __m256  s   = _mm256_mul_ps(w.d, _mm256_broadcast_ss(reinterpret_cast<const float *>(y + PREP_D)));
    acc[0]            = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(a), acc[0]);
    acc[1]            = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(b), acc[1]);
}

// Where a group's accumulators wait between parts of K: register h of
// column c at carry + 8 * (2 c + h).
struct Part {
    bool first, last;
};

// One group (rows r .. r + 7 at dst) x columns c0 .. c0 + C - 1 of ncols
// over blocks [i0, i1).
template <int C>
void group_cols(const uint8_t * g, int64_t i0, int64_t i1, const uint8_t * prep, int ncols, int c0, float * carry,
                Part part, bool fetch, float * dst, size_t ldd) {
    __m256 acc[C][2];
    for (int c = 0; c < C; ++c) {
        for (int h = 0; h < 2; ++h) {
            acc[c][h] = part.first ? _mm256_setzero_ps() : _mm256_loadu_ps(carry + 8 * (2 * (c0 + c) + h));
        }
    }
    for (int64_t i = i0; i < i1; ++i) {
        if (fetch && i % 4 == 0) {
            const uint8_t * q = g + size_t(i / 4) * BY8_QUAD + BY8_PREFETCH;
            for (size_t l = 0; l < BY8_QUAD; l += 64) _mm_prefetch(reinterpret_cast<const char *>(q + l), _MM_HINT_T0);
        }
        Block8 w;
        load_block(g, i, w);
        for (int c = 0; c < C; ++c) {
            add_block(w, prep + (size_t(i) * size_t(ncols) + size_t(c0 + c)) * PREP_BYTES, acc[c]);
        }
    }
    for (int c = 0; c < C; ++c) {
        if (part.last) {
            _mm256_storeu_ps(dst + size_t(c0 + c) * ldd, _mm256_add_ps(acc[c][0], acc[c][1]));
        } else {
            for (int h = 0; h < 2; ++h) _mm256_storeu_ps(carry + 8 * (2 * (c0 + c) + h), acc[c][h]);
        }
    }
}

// The same for all ncols columns of a call (three or more): the block's
// weights stay in registers while every column meets them, the columns'
// accumulators in memory (two loads and two stores a column and block,
// beside its 23 vector instructions), so a block is loaded and split into
// nibbles once for all the columns rather than once per pair.
void group_all_cols(const uint8_t * g, int64_t i0, int64_t i1, const uint8_t * prep, int ncols, float * carry,
                    Part part, float * dst, size_t ldd) {
    alignas(32) float acc[QGEMM_COLS][2][8];
    for (int c = 0; c < ncols; ++c) {
        for (int h = 0; h < 2; ++h) {
            const __m256 v = part.first ? _mm256_setzero_ps() : _mm256_loadu_ps(carry + 8 * (2 * c + h));
            _mm256_store_ps(acc[c][h], v);
        }
    }
    for (int64_t i = i0; i < i1; ++i) {
        Block8 w;
        load_block(g, i, w);
        const uint8_t * y = prep + size_t(i) * size_t(ncols) * PREP_BYTES;
        for (int c = 0; c < ncols; ++c) {
            __m256 a[2] = {_mm256_load_ps(acc[c][0]), _mm256_load_ps(acc[c][1])};
            add_block(w, y + size_t(c) * PREP_BYTES, a);
            _mm256_store_ps(acc[c][0], a[0]);
            _mm256_store_ps(acc[c][1], a[1]);
        }
    }
    for (int c = 0; c < ncols; ++c) {
        if (part.last) {
            _mm256_storeu_ps(dst + size_t(c) * ldd, _mm256_add_ps(_mm256_load_ps(acc[c][0]), _mm256_load_ps(acc[c][1])));
        } else {
            for (int h = 0; h < 2; ++h) _mm256_storeu_ps(carry + 8 * (2 * c + h), _mm256_load_ps(acc[c][h]));
        }
    }
}

} // namespace

size_t qcols_bytes_q4_0_by8(int64_t K) {
    return size_t(K / QK8_0) * size_t(QGEMM_COLS) * PREP_BYTES;
}

void qcols_prepare_q4_0_by8(int64_t K, const void * b, size_t ldb, int ncols, void * out) {
    const int64_t nb = K / QK8_0;
    auto *        o  = static_cast<uint8_t *>(out);
    for (int c = 0; c < ncols; ++c) {
        const auto * bc = reinterpret_cast<const block_q8_0 *>(static_cast<const char *>(b) + size_t(c) * ldb);
        for (int64_t i = 0; i < nb; ++i) {
            uint8_t * p = o + (size_t(i) * size_t(ncols) + size_t(c)) * PREP_BYTES;
            std::memcpy(p, bc[i].qs, QK8_0);
            int32_t s01 = 0, s23 = 0;
            for (int k = 0; k < 8; ++k) {
                s01 += bc[i].qs[k] + bc[i].qs[16 + k];
                s23 += bc[i].qs[8 + k] + bc[i].qs[24 + k];
            }
            s01 *= -8;
            s23 *= -8;
            const float d = half_to_float(bc[i].d);
            std::memcpy(p + PREP_START01, &s01, sizeof s01);
            std::memcpy(p + PREP_START23, &s23, sizeof s23);
            std::memcpy(p + PREP_D, &d, sizeof d);
            std::memset(p + PREP_D + sizeof d, 0, PREP_BYTES - PREP_D - sizeof d);
        }
    }
}

void qgemm_q4_0_by8(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
                    const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd) {
    (void) b;
    (void) ldb;
    const int64_t nb     = K / QK8_0;
    const Part    part   = {i0 == 0, i1 == nb};
    const bool    stream = part.first && part.last; // weights read once, from memory
    const size_t  gbytes = 8 * lda;
    const auto *  ac     = static_cast<const uint8_t *>(a);
    const auto *  pc     = static_cast<const uint8_t *>(prep);
    for (int64_t g = 0; g < nrows / 8; ++g) {
        const uint8_t * base  = ac + size_t(g) * gbytes;
        float *         carry = acc != nullptr && !stream ? acc + size_t(g) * 16 * QGEMM_COLS : nullptr;
        float *         out   = dst + 8 * g;
        if (ncols > 2) {
            group_all_cols(base, i0, i1, pc, ncols, carry, part, out, ldd);
            continue;
        }
        int             c0    = 0;
        // One or two columns: their accumulators in registers.
        for (; c0 + 2 <= ncols; c0 += 2) {
            group_cols<2>(base, i0, i1, pc, ncols, c0, carry, part, stream && c0 == 0, out, ldd);
        }
        if (c0 < ncols) group_cols<1>(base, i0, i1, pc, ncols, c0, carry, part, stream && c0 == 0, out, ldd);
    }
}

} // namespace loom::cpu::avx2

#include "target_end.h"

#endif // x86
