// Q4_0 products on prepared columns, one weight row at a time, with AVX-512
// VNNI and VBMI.
//
// Note [One row, four blocks]
// Four consecutive Q4_0 blocks of a row are 72 contiguous bytes. One 64-byte
// load and one 8-byte load hold them; a byte permutation (vpermt2b) gathers
// their 4 x 16 weight bytes into one register, block q in 128-bit lane q, and
// a word permutation their four scales, each repeated over its lane's four
// floats. So one row's four blocks cost two loads and two permutations, where
// Note [Four rows per register] spends four inserts and four scale loads per
// block. The activation side is prepared once per product (Note [Prepared
// columns]) in the same shape: for four blocks of a column, their low and
// high halves (block q in lane q), the starting values (minus 8 times the
// sums of four, which turns the unsigned nibbles back into n - 8) and the
// scales as floats, 256 bytes. Every (row, column) pair has one accumulator
// of 16 lanes, reduced once at the end, so a result does not depend on which
// rows share a tile. Columns need four registers each where a row needs
// three, so this pays for up to four columns; more take the layout and
// kernel of gemv.cpp (Q4_0 row results then come out of another order of
// additions). In L1, one thread (bench_kernels): one column 54-57 GB/s of
// weights, where gemv.cpp's kernel reads 41.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backends/cpu/simd/kernel_table.h"
#include "core/types.h"

#if defined(__clang__)
#    pragma clang attribute push(                                                                                  \
        __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx2,fma,f16c"))), apply_to = function)
#elif defined(__GNUC__)
#    pragma GCC push_options
#    pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx2,fma,f16c")
#endif

#include "avx512.h"
#include "start.h"
#include "sum.h"

namespace loom::cpu::avx512 {

namespace {

constexpr __mmask16 k_all = 0xffff;

// Prepared quad of one column: lo[64], hi[64], start[16] int32, d[16] float.
constexpr size_t QUAD_LO    = 0;
constexpr size_t QUAD_HI    = 64;
constexpr size_t QUAD_START = 128;
constexpr size_t QUAD_D     = 192;
constexpr size_t QUAD_BYTES = 256;
constexpr int    Q4_OFFSET  = 8;

constexpr int64_t quads_of(int64_t nb) {
    return (nb + 3) / 4;
}

// Byte j of the gathered weights: block j / 16, byte j % 16 of its qs.
inline __m512i qs_index() {
    alignas(64) static const uint8_t idx[64] = {
#define LOOM_Q(q) \
    uint8_t(18 * q + 2), uint8_t(18 * q + 3), uint8_t(18 * q + 4), uint8_t(18 * q + 5), uint8_t(18 * q + 6),     \
        uint8_t(18 * q + 7), uint8_t(18 * q + 8), uint8_t(18 * q + 9), uint8_t(18 * q + 10), uint8_t(18 * q + 11), \
        uint8_t(18 * q + 12), uint8_t(18 * q + 13), uint8_t(18 * q + 14), uint8_t(18 * q + 15),                   \
        uint8_t(18 * q + 16), uint8_t(18 * q + 17)
        LOOM_Q(0), LOOM_Q(1), LOOM_Q(2), LOOM_Q(3)
#undef LOOM_Q
    };
    return _mm512_load_si512(idx);
}

// Word w < 16 of the scales: the scale of block w / 4 (word 9q of the quad).
inline __m512i d_index() {
    return _mm512_setr_epi32(0, 0, 9 | (9 << 16), 9 | (9 << 16), 18 | (18 << 16), 18 | (18 << 16), 27 | (27 << 16),
                             27 | (27 << 16), 0, 0, 0, 0, 0, 0, 0, 0);
}

struct Quad {
    __m512i lo, hi; // unsigned nibbles n, weights n - 8
    __m512  d;      // block q's scale in lane q's four floats
};

// Blocks 4j .. 4j + n - 1 of a row (n <= 4) from p (their first byte).
template <bool Full> [[gnu::always_inline]] inline Quad load_quad(const char * p, int n, __m512i qidx, __m512i didx) {
    __m512i a, b;
    if constexpr (Full) {
        a = _mm512_loadu_si512(p);
        b = _mm512_zextsi128_si512(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(p + 64)));
    } else {
        // The last quad of a row: only its n blocks are read; missing
        // blocks are zero bytes (nibbles 0, scale 0) and meet prepared zeros.
        a = _mm512_maskz_loadu_epi8((__mmask64(1) << (18 * n)) - 1, p);
        b = _mm512_setzero_si512();
    }
    const __m512i q    = _mm512_permutex2var_epi8(a, qidx, b);
    const __m512i mask = _mm512_set1_epi8(0x0f);
    Quad          w;
    w.lo = _mm512_and_si512(q, mask);
    w.hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), mask);
    // (The zero-masked extract is the low half, as _mm512_castsi512_si256
    // would give, without GCC 12's warning about the cast's unset inputs.)
    w.d = _mm512_maskz_cvtph_ps(k_all, _mm512_maskz_extracti64x4_epi64(0xff, _mm512_permutexvar_epi16(didx, a), 0));
    return w;
}

// R rows x C columns over quads [j0, j1) of K; the last quad may be partial
// (nb blocks in all). Accumulators start from zero or continue from carry
// (first), and end in dst or go back to carry (last).
template <int R, int C>
void tile(int64_t nb, int64_t j0, int64_t j1, const char * a, size_t lda, const char * prep, float * carry, bool first,
          bool last, float * dst, size_t ldd) {
    const __m512i qidx = qs_index();
    const __m512i didx = d_index();
    __m512        acc[R][C];
    for (int r = 0; r < R; ++r) {
        for (int c = 0; c < C; ++c) {
            acc[r][c] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(carry + 16 * (r * C + c));
        }
    }
    const int64_t nq_full = nb / 4;
    auto          step    = [&]<bool Full>(int64_t j) {
        const int n = Full ? 4 : int(nb - 4 * j);
        const char * pc = prep + size_t(j) * C * QUAD_BYTES;
        auto         meet = [&](const Quad & w, int c, __m512 & sum) {
            const char *  q     = pc + size_t(c) * QUAD_BYTES;
            const __m512i clo   = _mm512_loadu_si512(q + QUAD_LO);
            const __m512i chi   = _mm512_loadu_si512(q + QUAD_HI);
            const __m512i start = _mm512_loadu_si512(q + QUAD_START);
            const __m512  dy    = _mm512_loadu_ps(reinterpret_cast<const float *>(q + QUAD_D));
            const __m512i prod  = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start, w.lo, clo), w.hi, chi);
            sum = _mm512_fmadd_ps(_mm512_mul_ps(w.d, dy), _mm512_maskz_cvtepi32_ps(k_all, prod), sum);
        };
        auto load_row = [&](int r) {
            const char * p = a + size_t(r) * lda + size_t(j) * 4 * sizeof(block_q4_0);
            // The same place in the rows of the next tile (they follow in
            // memory): fetched early, a quad and its next line.
            _mm_prefetch(p + R * lda, _MM_HINT_T0);
            _mm_prefetch(p + R * lda + 64, _MM_HINT_T0);
            return load_quad<Full>(p, n, qidx, didx);
        };
        if constexpr (C <= 2) {
            // One row at a time, met by the one or two columns.
            for (int r = 0; r < R; ++r) {
                const Quad w = load_row(r);
                for (int c = 0; c < C; ++c) meet(w, c, acc[r][c]);
            }
        } else {
            // The tile's rows decoded, then each column meets them all.
            Quad w[R];
            for (int r = 0; r < R; ++r) w[r] = load_row(r);
            for (int c = 0; c < C; ++c) {
                for (int r = 0; r < R; ++r) meet(w[r], c, acc[r][c]);
            }
        }
    };
    for (int64_t j = j0; j < j1; ++j) {
        if (j < nq_full) {
            step.template operator()<true>(j);
        } else {
            step.template operator()<false>(j);
        }
    }
    for (int r = 0; r < R; ++r) {
        for (int c = 0; c < C; ++c) {
            if (last) {
                dst[size_t(c) * ldd + size_t(r)] = sum16(acc[r][c]);
            } else {
                _mm512_storeu_ps(carry + 16 * (r * C + c), acc[r][c]);
            }
        }
    }
}

// Rows in tiles of R (fewer columns, more rows per tile), then one by one.
template <int C>
void rows(int64_t nb, int64_t j0, int64_t j1, const char * a, size_t lda, int64_t nrows, const char * prep,
          float * carry, bool first, bool last, float * dst, size_t ldd) {
    constexpr int R  = C == 1 ? 8 : 4;
    int64_t       r  = 0;
    auto          at = [&](int64_t row) { return carry != nullptr ? carry + 16 * size_t(row) * C : nullptr; };
    for (; r + R <= nrows; r += R) {
        tile<R, C>(nb, j0, j1, a + size_t(r) * lda, lda, prep, at(r), first, last, dst + r, ldd);
    }
    for (; r < nrows; ++r) {
        tile<1, C>(nb, j0, j1, a + size_t(r) * lda, lda, prep, at(r), first, last, dst + r, ldd);
    }
}

// Columns prepared as quads (any count up to QGEMM_COLS): quad j of column
// c at (j * ncols + c) * QUAD_BYTES.
void prepare_quads(int64_t K, const void * b, size_t ldb, int ncols, void * out) {
    const int64_t nb = K / QK8_0;
    const int64_t nq = quads_of(nb);
    auto *        o  = static_cast<char *>(out);
    for (int c = 0; c < ncols; ++c) {
        const auto * bc = reinterpret_cast<const block_q8_0 *>(static_cast<const char *>(b) + size_t(c) * ldb);
        for (int64_t j = 0; j < nq; ++j) {
            char * pc = o + (size_t(j) * size_t(ncols) + size_t(c)) * QUAD_BYTES;
            std::memset(pc, 0, QUAD_BYTES);
            for (int q = 0; q < 4 && 4 * j + q < nb; ++q) {
                const block_q8_0 & y     = bc[4 * j + q];
                const __m128i      lo    = _mm_loadu_si128(reinterpret_cast<const __m128i *>(y.qs));
                const __m128i      hi    = _mm_loadu_si128(reinterpret_cast<const __m128i *>(y.qs + 16));
                const __m128i      start = start_lanes<Q4_OFFSET>(y);
                _mm_storeu_si128(reinterpret_cast<__m128i *>(pc + QUAD_LO + 16 * q), lo);
                _mm_storeu_si128(reinterpret_cast<__m128i *>(pc + QUAD_HI + 16 * q), hi);
                _mm_storeu_si128(reinterpret_cast<__m128i *>(pc + QUAD_START + 16 * q), start);
                _mm_storeu_ps(reinterpret_cast<float *>(pc + QUAD_D + 16 * q), _mm_set1_ps(_cvtsh_ss(y.d)));
            }
        }
    }
}

// Note [Repacked quads]
// Weights repacked by the CPU_REPACK buffer (Note [Repacked weights] in
// repack.h) hold, per group of eight rows and quad of four blocks, a line of
// the 32 scales and then each row's four blocks of weight bytes in one line,
// in the order load_quad() gathers them. So a row's quad is one aligned load
// and its scales a permutation of the line converted once for the group;
// the products and sums are those of tile() above, which gives the same bits
// as the same weights in ggml's layout with up to four columns. More columns
// take gemv.cpp's kernel with four rows per register, as ggml's layout does,
// reading the repacked rows in place. A matrix-vector product reads two runs of groups side by
// side, each fetched XQ_PREFETCH bytes ahead: two streams a thread, and
// fetches that cross 4 KiB pages, where the hardware prefetcher stops.
constexpr size_t XQ_BYTES    = 576;
constexpr size_t XQ_PREFETCH = 8192;

// Spreads row k's four scales (floats 4k .. 4k + 3 of s) over the quad's
// lanes: block q's scale in lane q's four floats.
inline __m512i xq_spread(int k) {
    const int b = 4 * k;
    return _mm512_setr_epi32(b, b, b, b, b + 1, b + 1, b + 1, b + 1, b + 2, b + 2, b + 2, b + 2, b + 3, b + 3, b + 3,
                             b + 3);
}

// S runs of R rows (R = 8: a group; R = 4: rows r0 .. r0 + 3 of one) x C
// columns (c0 .. c0 + C - 1 of the ncols prepared) over quads [j0, j1).
// Row r of run s: result dst[s][c * ldd + r], partial sums at
// carry[s] + 16 * ((r0 + r) * ncols + c0 + c).
template <int S, int R, int C>
void xq_tile(int64_t j0, int64_t j1, const char * const * base, int r0, const char * prep, int ncols, int c0,
             float * const * carry, bool first, bool last, bool fetch, float * const * dst, size_t ldd) {
    static_assert(S * R * C <= 16, "accumulators fit in registers");
    __m512i spread[4];
    for (int k = 0; k < 4; ++k) spread[k] = xq_spread(k);
    __m512 acc[S][R][C];
    for (int s = 0; s < S; ++s) {
        for (int r = 0; r < R; ++r) {
            for (int c = 0; c < C; ++c) {
                acc[s][r][c] = first ? _mm512_setzero_ps()
                                     : _mm512_loadu_ps(carry[s] + 16 * (size_t(r0 + r) * ncols + size_t(c0 + c)));
            }
        }
    }
    const __m512i mask = _mm512_set1_epi8(0x0f);
    for (int64_t j = j0; j < j1; ++j) {
        __m512i clo[C], chi[C], start[C];
        __m512  dy[C];
        for (int c = 0; c < C; ++c) {
            const char * q = prep + (size_t(j) * size_t(ncols) + size_t(c0 + c)) * QUAD_BYTES;
            clo[c]         = _mm512_loadu_si512(q + QUAD_LO);
            chi[c]         = _mm512_loadu_si512(q + QUAD_HI);
            start[c]       = _mm512_loadu_si512(q + QUAD_START);
            dy[c]          = _mm512_loadu_ps(reinterpret_cast<const float *>(q + QUAD_D));
        }
        for (int s = 0; s < S; ++s) {
            const char * qp = base[s] + size_t(j) * XQ_BYTES;
            if (fetch) {
                for (size_t l = 0; l < XQ_BYTES; l += 64) _mm_prefetch(qp + XQ_PREFETCH + l, _MM_HINT_T0);
            }
            // The scales of the quad's rows r0 .. r0 + R - 1, as floats.
            const __m512i raw = _mm512_loadu_si512(qp);
            __m512        sc[2];
            if (R == 8 || r0 == 0) {
                sc[0] = _mm512_maskz_cvtph_ps(k_all, _mm512_maskz_extracti64x4_epi64(0xff, raw, 0));
            } else {
                sc[0] = _mm512_maskz_cvtph_ps(k_all, _mm512_maskz_extracti64x4_epi64(0xff, raw, 1));
            }
            if (R == 8) {
                sc[1] = _mm512_maskz_cvtph_ps(k_all, _mm512_maskz_extracti64x4_epi64(0xff, raw, 1));
            }
            for (int r = 0; r < R; ++r) {
                const __m512i q  = _mm512_loadu_si512(qp + 64 + 64 * size_t(r0 + r));
                const __m512i lo = _mm512_and_si512(q, mask);
                const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), mask);
                const __m512  d  = _mm512_maskz_permutexvar_ps(k_all, spread[r % 4], sc[r / 4]);
                for (int c = 0; c < C; ++c) {
                    const __m512i prod = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start[c], lo, clo[c]), hi, chi[c]);
                    acc[s][r][c] =
                        _mm512_fmadd_ps(_mm512_mul_ps(d, dy[c]), _mm512_maskz_cvtepi32_ps(k_all, prod), acc[s][r][c]);
                }
            }
        }
    }
    for (int s = 0; s < S; ++s) {
        for (int r = 0; r < R; ++r) {
            for (int c = 0; c < C; ++c) {
                if (last) {
                    dst[s][size_t(c) * ldd + size_t(r)] = sum16(acc[s][r][c]);
                } else {
                    _mm512_storeu_ps(carry[s] + 16 * (size_t(r0 + r) * ncols + size_t(c0 + c)), acc[s][r][c]);
                }
            }
        }
    }
}

} // namespace

// Up to QUAD_MAX_COLS columns go a row at a time; more columns share the
// decoding of four rows per register better (Note [Four rows per register]),
// so they take gemv.cpp's layout and kernel.
constexpr int QUAD_MAX_COLS = 4;

size_t qcols_bytes_q4_0_quads(int64_t K) {
    return std::max(size_t(quads_of(K / QK8_0)) * QUAD_MAX_COLS * QUAD_BYTES, qcols_bytes(K));
}

void qcols_prepare_q4_0_quads(int64_t K, const void * b, size_t ldb, int ncols, void * out) {
    if (ncols > QUAD_MAX_COLS) {
        qcols_prepare_q4_0(K, b, ldb, ncols, out);
        return;
    }
    prepare_quads(K, b, ldb, ncols, out);
}

void qgemm_q4_0_quads(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
                      const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd) {
    if (ncols > QUAD_MAX_COLS) {
        qgemm_q4_0(K, i0, i1, a, lda, nrows, prep, b, ldb, ncols, acc, dst, ldd);
        return;
    }
    const int64_t nb    = K / QK8_0;
    const int64_t j0    = i0 / 4;
    const int64_t j1    = quads_of(i1);
    const bool    first = i0 == 0;
    const bool    last  = i1 == nb;
    const auto *  ac    = static_cast<const char *>(a);
    const auto *  pc    = static_cast<const char *>(prep);
    float * const carry = (first && last) ? nullptr : acc;
    auto          go    = [&]<int C>() { rows<C>(nb, j0, j1, ac, lda, nrows, pc, carry, first, last, dst, ldd); };
    switch (ncols) {
        case 1: go.template operator()<1>(); break;
        case 2: go.template operator()<2>(); break;
        case 3: go.template operator()<3>(); break;
        default: go.template operator()<4>(); break;
    }
}


// Note [Repacked quads]. a: the first of nrows / 8 groups (lda: ggml's row
// size, so a group is 8 lda bytes).
void qgemm_q4_0_x8(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
                   const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd) {
    (void) b;
    (void) ldb;
    if (ncols > QUAD_MAX_COLS) {
        qgemm_q4_0_repacked_rows(K, i0, i1, a, lda, nrows, prep, ncols, acc, dst, ldd);
        return;
    }
    const int64_t nb      = K / QK8_0;
    const int64_t j0      = i0 / 4;
    const int64_t j1      = i1 / 4;
    const bool    first   = i0 == 0;
    const bool    last    = i1 == nb;
    const bool    stream  = first && last; // one pass over K: weights are read once, from memory
    const size_t  gbytes  = 8 * lda;
    const int64_t ngroups = nrows / 8;
    const auto *  ac      = static_cast<const char *>(a);
    const auto *  pc      = static_cast<const char *>(prep);
    auto          at      = [&](int64_t g) { return acc != nullptr && !stream ? acc + 16 * size_t(8 * g) * ncols : nullptr; };
    int64_t       g       = 0;
    if (ncols == 1) {
        // Two runs of groups side by side, the second from the middle.
        const int64_t half = stream ? ngroups / 2 : 0;
        for (; g < half; ++g) {
            const char * base[2]  = {ac + size_t(g) * gbytes, ac + size_t(half + g) * gbytes};
            float *      carry[2] = {nullptr, nullptr};
            float *      out[2]   = {dst + 8 * g, dst + 8 * (half + g)};
            xq_tile<2, 8, 1>(j0, j1, base, 0, pc, 1, 0, carry, first, last, true, out, ldd);
        }
        g = 2 * half;
    }
    for (; g < ngroups; ++g) {
        const char * base[1]  = {ac + size_t(g) * gbytes};
        float *      carry[1] = {at(g)};
        float *      out[1]   = {dst + 8 * g};
        switch (ncols) {
            case 1: xq_tile<1, 8, 1>(j0, j1, base, 0, pc, 1, 0, carry, first, last, stream, out, ldd); continue;
            case 2: xq_tile<1, 8, 2>(j0, j1, base, 0, pc, 2, 0, carry, first, last, stream, out, ldd); continue;
            default: break;
        }
        // Three or four columns: half a group at a time.
        for (int r0 = 0; r0 < 8; r0 += 4) {
            float * o[1] = {dst + 8 * g + r0};
            if (ncols == 3) {
                xq_tile<1, 4, 3>(j0, j1, base, r0, pc, 3, 0, carry, first, last, false, o, ldd);
            } else {
                xq_tile<1, 4, 4>(j0, j1, base, r0, pc, 4, 0, carry, first, last, false, o, ldd);
            }
        }
    }
}
} // namespace loom::cpu::avx512

#if defined(__clang__)
#    pragma clang attribute pop
#elif defined(__GNUC__)
#    pragma GCC pop_options
#endif

#endif // x86
