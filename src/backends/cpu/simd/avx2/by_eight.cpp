// Q4_0 and Q8_0 rows interleaved by eight (Notes [Q4_0 rows by eight] and
// [Q8_0 rows by eight] in repack.h) on the AVX2 table: its qgemm_q4_0_x8
// and qgemm_q8_0_x8 entries, every column count. Both types prepare their
// columns alike (the values, two starting values and the scale, one block
// in PREP_BYTES) and walk the groups alike (gemm()); each meets a group's
// blocks in its own way (Q4By8::group, Q8By8::group).
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

// Note [Q8_0 by eight on 256-bit registers]
// A register of weights is one word of a group's eight rows (four values of
// each, row r in lane r), stored plus 128. Back to signed bytes (one XOR),
// its magnitudes meet the column's four matching bytes, broadcast and
// given the weights' signs, in one maddubs: the products of a row stay in
// its lane. Each maddubs lane may reach 2 * 127 * 128, so every word takes
// its own madd with ones (as the two-rows-per-register tiles take one per
// half, Note [Two rows per register] in rows2.cpp), and the words of
// values 0-7 and 16-23 add into one int32 sum per row, the others into a
// second: the two exact sums per row and block of those tiles (Note [Four
// rows per conversion]), each converted, scaled by the row's d times the
// column's and added into an f32 accumulator of its own, a row's result the
// sum of the two. So the results have the bits of gemv2_q8_0 and
// qgemm2_q8_0 on the same weights in ggml's layout.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backends/cpu/repack.h"
#include "backends/cpu/simd/kernel_table.h"
#include "backends/cpu/simd/stream_prefetch.h"
#include "core/types.h"

#include "target_begin.h"
#include "avx2.h"

namespace loom::cpu::avx2 {

namespace {

constexpr size_t BY8_QS       = 64;   // a quad's qs, after its 32 scales
constexpr size_t BY8_PREFETCH = STREAM_AHEAD; // Note [Reading ahead of interleaved rows]

// A prepared column block: the 32 values, the starting values of the sums
// of values 0-7 and 16-23 and of the rest (Q4_0: minus 8 times the
// column's sums over the same bytes; Q8_0: 0), and the scale as a float.
// Block i of column c of a call at (i * ncols + c) * PREP_BYTES.
constexpr size_t PREP_BYTES   = 48;
constexpr size_t PREP_START01 = 32;
constexpr size_t PREP_START23 = 36;
constexpr size_t PREP_D       = 40;

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

// Where a group's accumulators wait between parts of K: register h of
// column c at carry + 8 * (2 c + h).
struct Part {
    bool first, last;
};

// Column c's two f32 sums of a group (values 0-7 and 16-23, the rest):
// from zero or from the carry, and at the end into dst (their sum, the
// rows' results) or back to the carry.
[[gnu::always_inline]] inline void sums_in(Part part, const float * carry, int c, __m256 * acc) {
    for (int h = 0; h < 2; ++h) {
        acc[h] = part.first ? _mm256_setzero_ps() : _mm256_loadu_ps(carry + 8 * (2 * c + h));
    }
}
[[gnu::always_inline]] inline void sums_out(Part part, float * carry, int c, const __m256 * acc, float * dst, size_t ldd) {
    if (part.last) {
        _mm256_storeu_ps(dst + size_t(c) * ldd, _mm256_add_ps(acc[0], acc[1]));
    } else {
        for (int h = 0; h < 2; ++h) _mm256_storeu_ps(carry + 8 * (2 * c + h), acc[h]);
    }
}

constexpr size_t Q4_QUAD = 8 * 4 * sizeof(block_q4_0); // a quad of blocks of a group: 576 bytes
constexpr size_t Q8_QUAD = 8 * 4 * sizeof(block_q8_0); // 1088 bytes

// Q8_0's columns a pass meets: their int32 sums, the word being read and
// the f32 sums fit the 16 registers.
constexpr int PASS_COLS = 4;

// Block i of a group: its eight rows' scales and their words of qs split
// into low and high nibbles.
struct Block8 {
    __m256  d;
    __m256i lo[4], hi[4];
};

[[gnu::always_inline]] inline void load_block(const uint8_t * g, int64_t i, Block8 & w) {
    const uint8_t * q = g + size_t(i / 4) * Q4_QUAD;
    const size_t    k = size_t(i % 4);
    w.d               = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(q + 16 * k)));
    const __m256i m   = _mm256_set1_epi8(0x0f);
    for (size_t j = 0; j < 4; ++j) {
        const __m256i x =
            _mm256_loadu_si256(reinterpret_cast<const __m256i *>(q + BY8_QS + 128 * k + 32 * by_eight_slot(j)));
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

// One group (rows r .. r + 7 at dst) x columns c0 .. c0 + C - 1 of ncols
// over blocks [i0, i1).
template <int C>
void group_cols(const uint8_t * g, int64_t i0, int64_t i1, const uint8_t * prep, int ncols, int c0, float * carry,
                Part part, bool fetch, float * dst, size_t ldd) {
    __m256 acc[C][2];
    for (int c = 0; c < C; ++c) sums_in(part, carry, c0 + c, acc[c]);
    for (int64_t i = i0; i < i1; ++i) {
        if (fetch && i % 4 == 0) {
            const uint8_t * q = g + size_t(i / 4) * Q4_QUAD + BY8_PREFETCH;
            for (size_t l = 0; l < Q4_QUAD; l += 64) _mm_prefetch(reinterpret_cast<const char *>(q + l), _MM_HINT_T0);
        }
        Block8 w;
        load_block(g, i, w);
        for (int c = 0; c < C; ++c) {
            add_block(w, prep + (size_t(i) * size_t(ncols) + size_t(c0 + c)) * PREP_BYTES, acc[c]);
        }
    }
    for (int c = 0; c < C; ++c) sums_out(part, carry, c0 + c, acc[c], dst, ldd);
}

// The same for all ncols columns of a call (three or more): the block's
// weights stay in registers while every column meets them, the columns'
// accumulators in memory (two loads and two stores a column and block,
// beside its 23 vector instructions), so a block is loaded and split into
// nibbles once for all the columns rather than once per pair.
void group_all_cols(const uint8_t * g, int64_t i0, int64_t i1, const uint8_t * prep, int ncols, float * carry,
                    Part part, float * dst, size_t ldd) {
    __m256 acc[QGEMM_COLS][2];
    for (int c = 0; c < ncols; ++c) sums_in(part, carry, c, acc[c]);
    for (int64_t i = i0; i < i1; ++i) {
        Block8 w;
        load_block(g, i, w);
        const uint8_t * y = prep + size_t(i) * size_t(ncols) * PREP_BYTES;
        for (int c = 0; c < ncols; ++c) add_block(w, y + size_t(c) * PREP_BYTES, acc[c]);
    }
    for (int c = 0; c < ncols; ++c) sums_out(part, carry, c, acc[c], dst, ldd);
}

// One group (its rows' results at dst) x columns c0 .. c0 + C - 1 of ncols
// over blocks [i0, i1); register h of column c waits at carry + 8 (2 c + h)
// between parts of K.
template <int C>
void q8_group_cols(const uint8_t * g, int64_t i0, int64_t i1, const uint8_t * prep, int ncols, int c0, float * carry,
                Part part, bool fetch, float * dst, size_t ldd) {
    __m256 acc[C][2];
    for (int c = 0; c < C; ++c) sums_in(part, carry, c0 + c, acc[c]);
    const __m256i flip = _mm256_set1_epi8(char(0x80));
    const __m256i one  = _mm256_set1_epi16(1);
    for (int64_t i = i0; i < i1; ++i) {
        const uint8_t * q = g + size_t(i / 4) * Q8_QUAD;
        const size_t    k = size_t(i % 4);
        if (fetch && k == 0) {
            for (size_t l = 0; l < Q8_QUAD; l += 64) {
                _mm_prefetch(reinterpret_cast<const char *>(q + BY8_PREFETCH + l), _MM_HINT_T0);
            }
        }
        const uint8_t * y[C];
        for (int c = 0; c < C; ++c) y[c] = prep + (size_t(i) * size_t(ncols) + size_t(c0 + c)) * PREP_BYTES;
        __m256i sum[C][2];
        for (int c = 0; c < C; ++c) sum[c][0] = sum[c][1] = _mm256_setzero_si256();
        for (size_t w = 0; w < 8; ++w) {
            const __m256i x = _mm256_xor_si256(
                _mm256_loadu_si256(reinterpret_cast<const __m256i *>(q + BY8_QS + 256 * k + 32 * by_eight_slot(w))), flip);
            const __m256i ax = _mm256_sign_epi8(x, x);
            const int     h  = (w / 2) % 2; // words 0, 1, 4, 5: values 0-7 and 16-23
            for (int c = 0; c < C; ++c) {
                const __m256i p = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(bcast4(y[c] + 4 * w), x));
                sum[c][h]       = _mm256_add_epi32(sum[c][h], _mm256_madd_epi16(p, one));
            }
        }
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(q + 16 * k)));
        for (int c = 0; c < C; ++c) {
            const __m256 s = _mm256_mul_ps(d, _mm256_broadcast_ss(reinterpret_cast<const float *>(y[c] + PREP_D)));
            acc[c][0]      = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(sum[c][0]), acc[c][0]);
            acc[c][1]      = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(sum[c][1]), acc[c][1]);
        }
    }
    for (int c = 0; c < C; ++c) sums_out(part, carry, c0 + c, acc[c], dst, ldd);
}

// More columns than a pass takes: a group's blocks are turned back to
// signed bytes and their magnitudes once, Q8_CHUNK blocks at a time, into a
// buffer on the stack (in L1), and every pass of PASS_COLS columns reads
// them there instead of decoding them again; the f32 sums of all ncols
// columns wait in memory between passes. Each sum takes the same
// operations in the same order as in group_cols(): the same bits.
constexpr int64_t Q8_CHUNK = 16;

struct Q8Decoded {
    __m256i x[8], ax[8]; // words 0..7: signed, and their magnitudes
    __m256  d;
};

template <int C>
void q8_chunk_cols(const Q8Decoded * dec, int64_t i0, int64_t n, const uint8_t * prep, int ncols, int c0,
                   __m256 (*sums)[2]) {
    __m256 acc[C][2];
    for (int c = 0; c < C; ++c) {
        for (int h = 0; h < 2; ++h) acc[c][h] = sums[c0 + c][h];
    }
    const __m256i one = _mm256_set1_epi16(1);
    for (int64_t j = 0; j < n; ++j) {
        const Q8Decoded & b = dec[j];
        const uint8_t * y[C];
        for (int c = 0; c < C; ++c) y[c] = prep + (size_t(i0 + j) * size_t(ncols) + size_t(c0 + c)) * PREP_BYTES;
        __m256i sum[C][2];
        for (int c = 0; c < C; ++c) sum[c][0] = sum[c][1] = _mm256_setzero_si256();
        for (size_t w = 0; w < 8; ++w) {
            const int h = (w / 2) % 2;
            for (int c = 0; c < C; ++c) {
                const __m256i p = _mm256_maddubs_epi16(b.ax[w], _mm256_sign_epi8(bcast4(y[c] + 4 * w), b.x[w]));
                sum[c][h]       = _mm256_add_epi32(sum[c][h], _mm256_madd_epi16(p, one));
            }
        }
        for (int c = 0; c < C; ++c) {
            const __m256 s = _mm256_mul_ps(b.d, _mm256_broadcast_ss(reinterpret_cast<const float *>(y[c] + PREP_D)));
            acc[c][0]      = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(sum[c][0]), acc[c][0]);
            acc[c][1]      = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(sum[c][1]), acc[c][1]);
        }
    }
    for (int c = 0; c < C; ++c) {
        for (int h = 0; h < 2; ++h) sums[c0 + c][h] = acc[c][h];
    }
}

void q8_group_chunked(const uint8_t * g, int64_t i0, int64_t i1, const uint8_t * prep, int ncols, float * carry,
                      Part part, float * dst, size_t ldd) {
    __m256 sums[QGEMM_COLS][2];
    for (int c = 0; c < ncols; ++c) sums_in(part, carry, c, sums[c]);
    const __m256i flip = _mm256_set1_epi8(char(0x80));
    Q8Decoded     dec[Q8_CHUNK];
    for (int64_t s0 = i0; s0 < i1; s0 += Q8_CHUNK) {
        const int64_t n = std::min(Q8_CHUNK, i1 - s0);
        for (int64_t j = 0; j < n; ++j) {
            const uint8_t * q = g + size_t((s0 + j) / 4) * Q8_QUAD;
            const size_t    k = size_t((s0 + j) % 4);
            for (size_t w = 0; w < 8; ++w) {
                dec[j].x[w] = _mm256_xor_si256(
                    _mm256_loadu_si256(reinterpret_cast<const __m256i *>(q + BY8_QS + 256 * k + 32 * by_eight_slot(w))), flip);
                dec[j].ax[w] = _mm256_sign_epi8(dec[j].x[w], dec[j].x[w]);
            }
            dec[j].d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(q + 16 * k)));
        }
        for (int c0 = 0; c0 < ncols; c0 += PASS_COLS) {
            switch (std::min(PASS_COLS, ncols - c0)) {
                case 1: q8_chunk_cols<1>(dec, s0, n, prep, ncols, c0, sums); break;
                case 2: q8_chunk_cols<2>(dec, s0, n, prep, ncols, c0, sums); break;
                case 3: q8_chunk_cols<3>(dec, s0, n, prep, ncols, c0, sums); break;
                default: q8_chunk_cols<4>(dec, s0, n, prep, ncols, c0, sums); break;
            }
        }
    }
    for (int c = 0; c < ncols; ++c) sums_out(part, carry, c, sums[c], dst, ldd);
}

// A group (its rows' results at out) against all ncols columns over blocks
// [i0, i1): Q4_0 with one or two columns in registers, more with the
// block's weights held once (group_all_cols); Q8_0 four columns a pass,
// more than four on blocks decoded once per chunk.
struct Q4By8 {
    static constexpr int OFFSET = 8;
    static void group(const uint8_t * g, int64_t i0, int64_t i1, const uint8_t * prep, int ncols, float * carry,
                      Part part, bool stream, float * out, size_t ldd) {
        if (ncols > 2) {
            group_all_cols(g, i0, i1, prep, ncols, carry, part, out, ldd);
        } else if (ncols == 2) {
            group_cols<2>(g, i0, i1, prep, ncols, 0, carry, part, stream, out, ldd);
        } else {
            group_cols<1>(g, i0, i1, prep, ncols, 0, carry, part, stream, out, ldd);
        }
    }
};

struct Q8By8 {
    static constexpr int OFFSET = 0;
    static void group(const uint8_t * g, int64_t i0, int64_t i1, const uint8_t * prep, int ncols, float * carry,
                      Part part, bool stream, float * out, size_t ldd) {
        switch (ncols) {
            case 1: q8_group_cols<1>(g, i0, i1, prep, ncols, 0, carry, part, stream, out, ldd); break;
            case 2: q8_group_cols<2>(g, i0, i1, prep, ncols, 0, carry, part, stream, out, ldd); break;
            case 3: q8_group_cols<3>(g, i0, i1, prep, ncols, 0, carry, part, false, out, ldd); break;
            case 4: q8_group_cols<4>(g, i0, i1, prep, ncols, 0, carry, part, false, out, ldd); break;
            default: q8_group_chunked(g, i0, i1, prep, ncols, carry, part, out, ldd); break;
        }
    }
};

template <class T>
void gemm(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep, int ncols,
          float * acc, float * dst, size_t ldd) {
    const int64_t nb     = K / QK8_0;
    const Part    part   = {i0 == 0, i1 == nb};
    const bool    stream = part.first && part.last; // weights read once, from memory
    const auto *  ac     = static_cast<const uint8_t *>(a);
    const auto *  pc     = static_cast<const uint8_t *>(prep);
    for (int64_t g = 0; g < nrows / 8; ++g) {
        float * carry = acc != nullptr && !stream ? acc + size_t(g) * 16 * QGEMM_COLS : nullptr;
        T::group(ac + size_t(g) * 8 * lda, i0, i1, pc, ncols, carry, part, stream, dst + 8 * g, ldd);
    }
}

} // namespace

#include "../by_eight.inc"

} // namespace loom::cpu::avx2

#include "target_end.h"

#endif // x86
