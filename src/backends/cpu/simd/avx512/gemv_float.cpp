// F32 and F16 matrix-vector products with AVX-512 (kernel_table.h GemvFn).
//
// Note [All columns in one pass]
// Thirty-two registers hold R x C accumulators of 16 lanes and the C
// columns' current values for every column count a call takes (up to
// GEMV_MAX_COLS), so each weight row is read once for all its columns. The
// AVX2 version has 16 registers: five columns there are four and then one,
// and the weights of an item are read twice (with 14336-value rows, the
// second time from memory, not from L2). Rows go in tiles of R, more rows
// where fewer columns leave room: 8 rows for 1-2 columns, 4 for 3-5 and 2
// for 6-8. The K tail is read under a mask, so lanes past K add 0 * 0.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "backends/cpu/repack.h"
#include "backends/cpu/simd/kernel_table.h"

#include "target_begin.h"
#include "avx512.h"
#include "sum.h"

namespace loom::cpu::avx512 {

namespace {

constexpr __mmask16 k_all = 0xffff;

// load16(p): 16 values; load16(p, m): the lanes of m, zeros elsewhere.
struct F32 {
    using T = float;
    static __m512 load16(const T * p) { return _mm512_loadu_ps(p); }
    static __m512 load16(const T * p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};

struct F16 {
    using T = uint16_t;
    static __m512 load16(const T * p) {
        return _mm512_maskz_cvtph_ps(k_all, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
    }
    static __m512 load16(const T * p, __mmask16 m) { return _mm512_maskz_cvtph_ps(k_all, _mm256_maskz_loadu_epi16(m, p)); }
};

// Note [Sixteen sums at once]
// With short rows (attention's keys: 64 values, 4 FMAs per row and column)
// the horizontal sums of the accumulators cost more than the products. A
// tile with 16 accumulators sums them all in four levels of two
// permutations and one addition per output register, 45 instructions in
// place of 16 stores and 240 scalar additions. Each level adds the pairs
// sum16() adds, in the same order (lanes 4 apart, then 8 apart, then
// neighbours twice), so every result has the same bits as sum16 gives it.
[[gnu::always_inline]] inline __m512 pair_sums(__m512 a, __m512 b, __m512i lo, __m512i hi) {
    return _mm512_add_ps(_mm512_permutex2var_ps(a, lo, b), _mm512_permutex2var_ps(a, hi, b));
}

// Lane j of the result: sum16(v[j]).
[[gnu::always_inline]] inline __m512 sum16x16(const __m512 * v) {
    // Levels 1 and 2: lanes 4 apart, then lanes 8 apart (as sum16's s[i]).
    const __m512i far_lo  = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
    const __m512i far_hi  = _mm512_setr_epi32(4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
    // Levels 3 and 4: neighbours ((s0 + s1), (s2 + s3), then their sum).
    const __m512i near_lo = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i near_hi = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    __m512        l1[8], l2[4], l3[2];
    for (int i = 0; i < 8; ++i) l1[i] = pair_sums(v[2 * i], v[2 * i + 1], far_lo, far_hi);
    for (int i = 0; i < 4; ++i) l2[i] = pair_sums(l1[2 * i], l1[2 * i + 1], far_lo, far_hi);
    for (int i = 0; i < 2; ++i) l3[i] = pair_sums(l2[2 * i], l2[2 * i + 1], near_lo, near_hi);
    return pair_sums(l3[0], l3[1], near_lo, near_hi);
}

// The rows of a tile: R rows lda bytes apart (ggml's layout).
template <class T, int R> struct PlainRows {
    const T * ar[R];
    size_t    lda;
    PlainRows(const char * a, size_t lda_) : lda(lda_) {
        for (int r = 0; r < R; ++r) ar[r] = reinterpret_cast<const T *>(a + size_t(r) * lda);
    }
    const T * at(int r, int64_t k) const { return ar[r] + k; }
    // The same line of the next tile's rows.
    const char * ahead(int r, int64_t k) const { return reinterpret_cast<const char *>(ar[r] + k) + R * lda; }
};

// Note [Repacked F16]
// F16 weights in the CPU_REPACK buffer (repack.h): rows in groups of 8, and
// in a group values [32 j, 32 j + 32) of its row q at 512 j + 64 q bytes, so
// a tile's rows are read as one run of whole lines. The tile's arithmetic is
// the one over ggml's layout (the same values meet the same lanes in the
// same order), so the results are the same bits.
constexpr size_t F16X8_PREFETCH = 4096; // bytes ahead in the run

// A tile's rows in the repacked layout: rows q0, q0 + 1, ... of group[0],
// continuing with group[1] past its eighth row (one column reads the groups
// of two halves side by side, 16 rows a tile).
struct RepackedF16Rows {
    const char * group[2];
    int          q0;
    const char * line(int r, int64_t k) const {
        const int q = q0 + r;
        return group[q / 8] + repacked_f16_chunk(size_t(q % 8), size_t(k) / REPACK_F16_CHUNK);
    }
    const uint16_t * at(int r, int64_t k) const {
        return reinterpret_cast<const uint16_t *>(line(r, k)) + size_t(k) % REPACK_F16_CHUNK;
    }
    const char * ahead(int r, int64_t k) const { return line(r, k) + F16X8_PREFETCH; }
};

// R rows x C columns over all of K.
template <class Ops, int R, int C, class Rows>
[[gnu::always_inline]] inline void tile(int64_t K, const Rows & ar, const char * b, size_t ldb, float * dst,
                                        size_t ldd) {
    using T = typename Ops::T;
    const T * bc[C];
    for (int c = 0; c < C; ++c) bc[c] = reinterpret_cast<const T *>(b + size_t(c) * ldb);
    __m512 acc[R][C];
    for (int r = 0; r < R; ++r) {
        for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    }
    auto step = [&](int64_t k, auto... m) {
        __m512 bv[C];
        for (int c = 0; c < C; ++c) bv[c] = Ops::load16(bc[c] + k, m...);
        for (int r = 0; r < R; ++r) {
            const __m512 av = Ops::load16(ar.at(r, k), m...);
            for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(av, bv[c], acc[r][c]);
        }
    };
    // Elements per cache line: a line of every row is fetched ahead once.
    constexpr int64_t LINE = 64 / sizeof(T);
    int64_t           k    = 0;
    for (; k + 16 <= K; k += 16) {
        if (k % LINE == 0) {
            for (int r = 0; r < R; ++r) _mm_prefetch(ar.ahead(r, k), _MM_HINT_T0);
        }
        step(k);
    }
    if (k < K) {
        step(k, __mmask16((1u << (K - k)) - 1));
    }
    if constexpr (R * C == 16) {
        // Note [Sixteen sums at once]
        alignas(64) float sums[16];
        _mm512_store_ps(sums, sum16x16(&acc[0][0]));
        for (int r = 0; r < R; ++r) {
            for (int c = 0; c < C; ++c) dst[size_t(c) * ldd + size_t(r)] = sums[r * C + c];
        }
    } else {
        for (int r = 0; r < R; ++r) {
            for (int c = 0; c < C; ++c) dst[size_t(c) * ldd + size_t(r)] = sum16(acc[r][c]);
        }
    }
}

// Rows per tile for C columns.
template <int C> constexpr int tile_rows() {
    return C == 1 ? 8 : C <= 5 ? 4 : 2;
}

// Rows in tiles of R, then one at a time (callers start row ranges at
// multiples of GEMV_ROW_ALIGN, which R divides, so a row always meets the
// same code).
template <class Ops, int C>
void rows(int64_t K, const char * a, size_t lda, int64_t nrows, const char * b, size_t ldb, float * dst, size_t ldd) {
    using T         = typename Ops::T;
    constexpr int R = tile_rows<C>();
    static_assert(GEMV_ROW_ALIGN % R == 0);
    static_assert(R * C + C + 1 <= 32, "accumulators, columns and a row fit in the registers");
    int64_t r = 0;
    for (; r + R <= nrows; r += R) {
        tile<Ops, R, C>(K, PlainRows<T, R>(a + size_t(r) * lda, lda), b, ldb, dst + r, ldd);
    }
    for (; r < nrows; ++r) tile<Ops, 1, C>(K, PlainRows<T, 1>(a + size_t(r) * lda, lda), b, ldb, dst + r, ldd);
}

// Note [Repacked F16]: whole groups of 8 rows, R of them a tile.
template <int C>
void rows_f16_x8(int64_t K, const char * a, size_t lda, int64_t nrows, const char * b, size_t ldb, float * dst,
                 size_t ldd) {
    constexpr int R = tile_rows<C>();
    static_assert(8 % R == 0);
    int64_t r0 = 0;
    if constexpr (C == 1) {
        // One column: the groups of the first and the second half side by
        // side, sixteen rows a tile (the same sums as two tiles of eight).
        const int64_t half = nrows / 8 / 2;
        const size_t  gb   = 8 * lda;
        for (int64_t g = 0; g < half; ++g) {
            float                      out[16];
            const RepackedF16Rows rr{{a + size_t(g) * gb, a + size_t(half + g) * gb}, 0};
            tile<F16, 16, 1>(K, rr, b, ldb, out, 16);
            for (int i = 0; i < 8; ++i) {
                dst[8 * g + i]          = out[i];
                dst[8 * (half + g) + i] = out[8 + i];
            }
        }
        r0 = 2 * half * 8;
    }
    for (int64_t r = r0; r + R <= nrows; r += R) {
        const char *          group = a + size_t(r / 8) * 8 * lda;
        const RepackedF16Rows rr{{group, group}, int(r % 8)};
        tile<F16, R, C>(K, rr, b, ldb, dst + r, ldd);
    }
}

// f(std::integral_constant<int, ncols>{}), ncols from 1 to GEMV_MAX_COLS.
template <class F> void by_columns(int ncols, F && f) {
    static_assert(GEMV_MAX_COLS == 8);
    switch (ncols) {
        case 1: f(std::integral_constant<int, 1>{}); break;
        case 2: f(std::integral_constant<int, 2>{}); break;
        case 3: f(std::integral_constant<int, 3>{}); break;
        case 4: f(std::integral_constant<int, 4>{}); break;
        case 5: f(std::integral_constant<int, 5>{}); break;
        case 6: f(std::integral_constant<int, 6>{}); break;
        case 7: f(std::integral_constant<int, 7>{}); break;
        default: f(std::integral_constant<int, 8>{}); break;
    }
}

template <class Ops>
void gemv(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols, float * dst,
          size_t ldd) {
    const auto * ac = static_cast<const char *>(a);
    const auto * bc = static_cast<const char *>(b);
    by_columns(ncols, [&](auto c) { rows<Ops, decltype(c)::value>(K, ac, lda, nrows, bc, ldb, dst, ldd); });
}

} // namespace

void gemv_f32(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols, float * dst,
              size_t ldd) {
    gemv<F32>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void gemv_f16(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols, float * dst,
              size_t ldd) {
    gemv<F16>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void gemv_f16_x8(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                 float * dst, size_t ldd) {
    const auto * ac = static_cast<const char *>(a);
    const auto * bc = static_cast<const char *>(b);
    by_columns(ncols, [&](auto c) { rows_f16_x8<decltype(c)::value>(K, ac, lda, nrows, bc, ldb, dst, ldd); });
}

} // namespace loom::cpu::avx512

#include "target_end.h"

#endif // x86
