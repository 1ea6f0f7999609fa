// Q4_0 and Q8_0 rows interleaved by eight (Notes [Q4_0 rows by eight] and
// [Q8_0 rows by eight] in repack.h) on the AVX-512 table: its
// qgemm_q4_0_x8 and qgemm_q8_0_x8 entries, every column count.
//
// Note [Q4_0 by eight on 512-bit registers]
// One 64-byte line of a block's qs is words 0 and 2 of the group's eight
// rows (row r in lanes r and r + 8), the next words 1 and 3. Their low
// and high nibbles meet the column's matching bytes in four vpdpbusd into
// one register: lanes 0-7 collect each row's products of words 0 and 1,
// lanes 8-15 those of words 2 and 3, starting from the column's starting
// values (minus 8 times its sums over the same bytes). Those are the two
// exact int32 sums per row and block of Note [Q4_0 by eight on 256-bit
// registers] (avx2/by_eight.cpp), so one conversion, one product of
// the scales (the eight rows' d in both halves, times the column's) and
// one FMA into an accumulator whose halves are the two f32 sums, and a
// row's result the sum of its two lanes, give the AVX2 table's bits: the
// bits of qgemm2_q4_0 and gemv2_q4_0 on ggml's layout, which this table's
// Q4_0 products in ggml's layout give too (Note [Q4_0 rows in pairs of
// lanes] in gemv.cpp). A prepared column block is one line, its bytes
// spread over the lanes that meet them by one vpermd each. With two or
// more columns, two groups go at once (pair_cols()): a register holds one
// word of sixteen rows, and a column's four matching bytes meet it as one
// broadcast, vpdpbusd's memory operand.
//
// Q8_0 (Note [Q8_0 rows by eight]) takes the same kernels: its words are
// stored plus 128 (unsigned, as vpdpbusd takes them; the starting values
// take 128 times the column's sums off), four lines a block, words 0 and 2,
// 1 and 3, 4 and 6, 5 and 7, where a Q4_0 block's two lines split into
// the same four registers (values 0-3 and 8-11, 4-7 and 12-15, 16-19 and
// 24-27, 20-23 and 28-31). The two sums per row and block are over values
// 0-7 and 16-23 and over the rest, as the AVX2 table's Q8_0 tiles keep
// them (Note [Four rows per conversion]), so Q8_0 gives the bits of
// gemv2_q8_0 as well.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backends/cpu/repack.h"
#include "backends/cpu/simd/kernel_table.h"
#include "backends/cpu/simd/stream_prefetch.h"
#include "core/types.h"

#include "target_begin.h"
#include "avx512.h"

namespace loom::cpu::avx512 {

namespace {

constexpr __mmask16 k_all = 0xffff;

constexpr size_t BY8_QS = 64; // a quad's qs, after its 32 scales

// lo in the low half, hi in the high one. (Broadcasts under masks: GCC 12
// reports the undefined inputs of the plain casts and inserts as maybe
// uninitialized.)
inline __m512i join(__m256i lo, __m256i hi) {
    return _mm512_mask_broadcast_i64x4(_mm512_maskz_broadcast_i64x4(0x0f, lo), 0xf0, hi);
}
inline __m512 join(__m256 lo, __m256 hi) {
    return _mm512_castpd_ps(_mm512_mask_broadcast_f64x4(_mm512_maskz_broadcast_f64x4(0x0f, _mm256_castps_pd(lo)),
                                                        0xf0, _mm256_castps_pd(hi)));
}

inline __m256i load256(const uint8_t * p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
}

// The two types' blocks of a group: QUAD bytes a quad, block k of a quad's
// qs at BY8_QS + BLOCK_QS * k, values stored plus OFFSET.
// lines(qs, r): a group's block as the four registers add_block() meets
// with its spread column (values 0-3 | 8-11, 16-19 | 24-27, 4-7 | 12-15,
// 20-23 | 28-31, rows in lanes 0-7 | 8-15); words(q0, q1, w): two groups'
// block as eight registers, w[j] and w[4 + j] values 4j .. 4j + 3 and 16 +
// 4j .. 16 + 4j + 3 of the sixteen rows.
struct Q4By8 {
    static constexpr size_t QUAD = 8 * 4 * sizeof(block_q4_0); // 576
    static constexpr size_t BLOCK_QS = 128;
    static constexpr int    OFFSET   = 8;
    [[gnu::always_inline]] static void lines(const uint8_t * qs, __m512i * r) {
        const __m512i m   = _mm512_set1_epi8(0x0f);
        const __m512i x02 = _mm512_loadu_si512(qs);
        const __m512i x13 = _mm512_loadu_si512(qs + 64);
        r[0]              = _mm512_and_si512(x02, m);
        r[1]              = _mm512_and_si512(_mm512_srli_epi16(x02, 4), m);
        r[2]              = _mm512_and_si512(x13, m);
        r[3]              = _mm512_and_si512(_mm512_srli_epi16(x13, 4), m);
    }
    [[gnu::always_inline]] static void words(const uint8_t * q0, const uint8_t * q1, __m512i * w) {
        const __m512i m = _mm512_set1_epi8(0x0f);
        for (size_t j = 0; j < 4; ++j) {
            const size_t  slot = 32 * by_eight_slot(j);
            const __m512i x    = join(load256(q0 + slot), load256(q1 + slot));
            w[j]               = _mm512_and_si512(x, m);
            w[4 + j]           = _mm512_and_si512(_mm512_srli_epi16(x, 4), m);
        }
    }
};

struct Q8By8 {
    static constexpr size_t QUAD = 8 * 4 * sizeof(block_q8_0); // 1088
    static constexpr size_t BLOCK_QS = 256;
    static constexpr int    OFFSET   = 128;
    [[gnu::always_inline]] static void lines(const uint8_t * qs, __m512i * r) {
        r[0] = _mm512_loadu_si512(qs);       // words 0, 2
        r[1] = _mm512_loadu_si512(qs + 128); // words 4, 6
        r[2] = _mm512_loadu_si512(qs + 64);  // words 1, 3
        r[3] = _mm512_loadu_si512(qs + 192); // words 5, 7
    }
    [[gnu::always_inline]] static void words(const uint8_t * q0, const uint8_t * q1, __m512i * w) {
        for (size_t j = 0; j < 8; ++j) {
            const size_t slot = 32 * by_eight_slot(j);
            w[j]              = join(load256(q0 + slot), load256(q1 + slot));
        }
    }
};

// A prepared column block is one line: the 32 values, the starting values
// of the sums of values 0-7 and 16-23 and of the rest, and the scale as a
// float (by_eight.inc prepares it). Block i
// of column c of a call at (i * ncols + c) * PREP_BYTES. One vpermd with
// the line as its memory operand puts the bytes a register of weights
// meets in its lanes (spread()).
constexpr size_t PREP_START01 = 32;
constexpr size_t PREP_START23 = 36;
constexpr size_t PREP_D       = 40;
constexpr size_t PREP_BYTES   = 64;

constexpr size_t BY8_PREFETCH = STREAM_AHEAD; // Note [Reading ahead of interleaved rows]

// From this many columns on, groups go two at a time (pair_cols()). One
// column reads its groups one at a time: on the Zen 5 of bench/RESULTS.md,
// loom-run's one-column Q4_0 products of a 1.1 B file took 125-133 us
// that way against 152-179 us in pairs, alternated (from memory; with the
// weights in L2, pairs are faster: bench_kernels 91 against 80 GMAC/s).
constexpr int PAIR_MIN_COLS = 2;

// Dword indices into a prepared line: the column's word a (bytes 4a ..
// 4a + 3) in lanes 0-7, word b in lanes 8-15.
inline __m512i spread(int a, int b) {
    return _mm512_mask_blend_epi32(0xff00, _mm512_set1_epi32(a), _mm512_set1_epi32(b));
}

// acc + block i of a group against C prepared columns (their blocks at
// y[c]).
template <class T, int C>
[[gnu::always_inline]] inline void add_block(const uint8_t * g, int64_t i, const uint8_t * const * y, __m512 * acc) {
    const uint8_t * q = g + size_t(i / 4) * T::QUAD;
    const size_t    k = size_t(i % 4);
    const __m512    d = _mm512_maskz_cvtph_ps(
        k_all, _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(q + 16 * k))));
    __m512i r[4];
    T::lines(q + BY8_QS + T::BLOCK_QS * k, r);
    // The column's words 0 and 2 (its values 0-3, 8-11) meet r[0], words 4
    // and 6 r[1], 1 and 3 r[2], 5 and 7 r[3]; dwords 8 and 9 of the line are
    // the starting values.
    const __m512i i02 = spread(0, 2), i46 = spread(4, 6), i13 = spread(1, 3), i57 = spread(5, 7);
    const __m512i ist = spread(8, 9);
    for (int c = 0; c < C; ++c) {
        const __m512i line = _mm512_loadu_si512(y[c]);
        __m512i       t    = _mm512_maskz_permutexvar_epi32(k_all, ist, line);
        t                  = _mm512_dpbusd_epi32(t, r[0], _mm512_maskz_permutexvar_epi32(k_all, i02, line));
        t                  = _mm512_dpbusd_epi32(t, r[1], _mm512_maskz_permutexvar_epi32(k_all, i46, line));
        t                  = _mm512_dpbusd_epi32(t, r[2], _mm512_maskz_permutexvar_epi32(k_all, i13, line));
        t                  = _mm512_dpbusd_epi32(t, r[3], _mm512_maskz_permutexvar_epi32(k_all, i57, line));
        const __m512 s     = _mm512_mul_ps(d, _mm512_set1_ps(*reinterpret_cast<const float *>(y[c] + PREP_D)));
        acc[c]             = _mm512_fmadd_ps(s, _mm512_maskz_cvtepi32_ps(k_all, t), acc[c]);
    }
}

// One group (its rows' results at dst) x columns c0 .. c0 + C - 1 of ncols
// over blocks [i0, i1); partial sums wait at carry + 16 c between parts of K.
template <class T, int C>
void group_cols(const uint8_t * g, int64_t i0, int64_t i1, const uint8_t * prep, int ncols, int c0, float * carry,
                bool first, bool last, bool fetch, float * dst, size_t ldd) {
    __m512 acc[C];
    for (int c = 0; c < C; ++c) {
        acc[c] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(carry + 16 * (c0 + c));
    }
    for (int64_t i = i0; i < i1; ++i) {
        if (fetch && i % 4 == 0) {
            const uint8_t * q = g + size_t(i / 4) * T::QUAD + BY8_PREFETCH;
            for (size_t l = 0; l < T::QUAD; l += 64) _mm_prefetch(reinterpret_cast<const char *>(q + l), _MM_HINT_T0);
        }
        const uint8_t * y[C];
        for (int c = 0; c < C; ++c) y[c] = prep + (size_t(i) * size_t(ncols) + size_t(c0 + c)) * PREP_BYTES;
        add_block<T, C>(g, i, y, acc);
    }
    for (int c = 0; c < C; ++c) {
        if (last) {
            // (The zero-masked extracts are the halves, without GCC 12's
            // warning about the plain forms' unset inputs.)
            const __m256 lo = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, _mm512_castps_pd(acc[c]), 0));
            const __m256 hi = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, _mm512_castps_pd(acc[c]), 1));
            _mm256_storeu_ps(dst + size_t(c0 + c) * ldd, _mm256_add_ps(lo, hi));
        } else {
            _mm512_storeu_ps(carry + 16 * (c0 + c), acc[c]);
        }
    }
}

// Two groups at once (16 rows, row r of the second in lane r + 8) x C
// columns: a register holds one word of the 16 rows (the same slot of
// both groups, one insert), so a column's matching four bytes meet it as
// one broadcast, the memory operand of vpdpbusd; the sums of words 0 and
// 1 and of words 2 and 3 take a register each, as do their f32 sums.
template <class T, int C>
void pair_cols(const uint8_t * g0, const uint8_t * g1, int64_t i0, int64_t i1, const uint8_t * prep, int ncols,
               float * carry0, float * carry1, bool first, bool last, bool fetch, float * dst0, float * dst1,
               size_t ldd) {
    __m512 acc[C][2];
    for (int c = 0; c < C; ++c) {
        for (int h = 0; h < 2; ++h) {
            if (first) {
                acc[c][h] = _mm512_setzero_ps();
                continue;
            }
            // Group 0's register h of the column in lanes 0-7, group 1's in 8-15.
            const __m256 lo = _mm256_loadu_ps(carry0 + 16 * c + 8 * h);
            const __m256 hi = _mm256_loadu_ps(carry1 + 16 * c + 8 * h);
            acc[c][h]       = join(lo, hi);
        }
    }
    for (int64_t i = i0; i < i1; ++i) {
        const size_t    at = size_t(i / 4) * T::QUAD;
        const size_t    k  = size_t(i % 4);
        const uint8_t * q0 = g0 + at;
        const uint8_t * q1 = g1 + at;
        if (fetch && k == 0) {
            for (size_t l = 0; l < T::QUAD; l += 64) {
                _mm_prefetch(reinterpret_cast<const char *>(q0 + BY8_PREFETCH + l), _MM_HINT_T0);
                _mm_prefetch(reinterpret_cast<const char *>(q1 + BY8_PREFETCH + l), _MM_HINT_T0);
            }
        }
        const __m512    d  = _mm512_maskz_cvtph_ps(
            k_all, _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(q0 + 16 * k))),
                                           _mm_loadu_si128(reinterpret_cast<const __m128i *>(q1 + 16 * k)), 1));
        __m512i w[8];
        T::words(q0 + BY8_QS + T::BLOCK_QS * k, q1 + BY8_QS + T::BLOCK_QS * k, w);
        for (int c = 0; c < C; ++c) {
            const uint8_t * y = prep + (size_t(i) * size_t(ncols) + size_t(c)) * PREP_BYTES;
            auto            word = [&](size_t at_byte) {
                int32_t v;
                std::memcpy(&v, y + at_byte, sizeof v);
                return _mm512_set1_epi32(v);
            };
            __m512i a = word(PREP_START01);
            a         = _mm512_dpbusd_epi32(a, w[0], word(0));
            a         = _mm512_dpbusd_epi32(a, w[4], word(16));
            a         = _mm512_dpbusd_epi32(a, w[1], word(4));
            a         = _mm512_dpbusd_epi32(a, w[5], word(20));
            __m512i b = word(PREP_START23);
            b         = _mm512_dpbusd_epi32(b, w[2], word(8));
            b         = _mm512_dpbusd_epi32(b, w[6], word(24));
            b         = _mm512_dpbusd_epi32(b, w[3], word(12));
            b         = _mm512_dpbusd_epi32(b, w[7], word(28));
            const __m512 s = _mm512_mul_ps(d, _mm512_set1_ps(*reinterpret_cast<const float *>(y + PREP_D)));
            acc[c][0]      = _mm512_fmadd_ps(s, _mm512_maskz_cvtepi32_ps(k_all, a), acc[c][0]);
            acc[c][1]      = _mm512_fmadd_ps(s, _mm512_maskz_cvtepi32_ps(k_all, b), acc[c][1]);
        }
    }
    for (int c = 0; c < C; ++c) {
        if (last) {
            const __m512 r = _mm512_add_ps(acc[c][0], acc[c][1]);
            _mm256_storeu_ps(dst0 + size_t(c) * ldd,
                             _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, _mm512_castps_pd(r), 0)));
            _mm256_storeu_ps(dst1 + size_t(c) * ldd,
                             _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, _mm512_castps_pd(r), 1)));
            continue;
        }
        // In group_cols()'s layout: a group's column c at carry + 16 c, its
        // f32 sum of words 0 and 1 in the first eight floats.
        for (int h = 0; h < 2; ++h) {
            _mm256_storeu_ps(carry0 + 16 * c + 8 * h,
                             _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, _mm512_castps_pd(acc[c][h]), 0)));
            _mm256_storeu_ps(carry1 + 16 * c + 8 * h,
                             _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, _mm512_castps_pd(acc[c][h]), 1)));
        }
    }
}

template <class T>
void gemm(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep, int ncols,
          float * acc, float * dst, size_t ldd) {
    const int64_t nb     = K / QK8_0;
    const bool    first  = i0 == 0;
    const bool    last   = i1 == nb;
    const bool    stream = first && last; // weights read once, from memory
    const auto *  ac     = static_cast<const uint8_t *>(a);
    const auto *  pc     = static_cast<const uint8_t *>(prep);
    const int64_t ngroups = nrows / 8;
    auto          carry_of = [&](int64_t g) { return acc != nullptr && !stream ? acc + size_t(g) * 16 * QGEMM_COLS : nullptr; };
    int64_t       g        = 0;
    if (ncols >= PAIR_MIN_COLS) {
        for (; g + 2 <= ngroups; g += 2) {
            const uint8_t * g0 = ac + size_t(g) * 8 * lda;
            const uint8_t * g1 = g0 + 8 * lda;
            float *         c0 = carry_of(g);
            float *         c1 = carry_of(g + 1);
            float *         o0 = dst + 8 * g;
            float *         o1 = o0 + 8;
            with_gemv_cols(ncols, [&](auto cols) {
                pair_cols<T, decltype(cols)::value>(g0, g1, i0, i1, pc, ncols, c0, c1, first, last, stream && ncols <= 2, o0,
                                                 o1, ldd);
            });
        }
    }
    for (; g < ngroups; ++g) {
        const uint8_t * base  = ac + size_t(g) * 8 * lda;
        float *         carry = carry_of(g);
        float *         out   = dst + 8 * g;
        with_gemv_cols(ncols, [&](auto cols) {
            constexpr int C = decltype(cols)::value;
            group_cols<T, C>(base, i0, i1, pc, C, 0, carry, first, last, stream && C <= 2, out, ldd);
        });
    }
}

} // namespace

#include "../by_eight.inc"

} // namespace loom::cpu::avx512

#include "target_end.h"

#endif // x86
