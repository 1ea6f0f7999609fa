// BF16 matrix-vector products with AVX-512 BF16.
//
// Note [BF16 pairs]
// vdpbf16ps multiplies two registers of 32 bf16 values element by element
// and adds the products of elements 2i and 2i+1 into fp32 lane i of an
// accumulator. A weight row and an activation column both hold k in
// increasing order, so 32 values of each loaded from the same k meet
// pairwise as they are: nothing is rearranged. The instruction takes bf16
// subnormal inputs as zero, flushes subnormal results to zero and rounds to
// nearest even whatever MXCSR says (the kernel table contract allows it).
//
// A K that is not a multiple of 32 ends with a masked load: elements past K
// read as zeros (and are not touched in memory), so an odd K leaves the
// last value paired with a zero.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "backends/cpu/simd/kernel_table.h"

#include "target_begin.h"
#include "avx512bf16.h"

namespace loom::cpu::avx512bf16 {

namespace {

inline __m512bh as_bf16(__m512i v) {
    return (__m512bh) v;
}

inline __m512i load32(const uint16_t * p) {
    return _mm512_loadu_si512(p);
}

// Sum of the 16 lanes: halves added, then as the AVX2 kernels do. GCC 12
// reports the undefined input of the unmasked extract (which
// _mm512_reduce_add_ps and _mm512_castps512_ps256 use) as uninitialized;
// the zero-masked form with every lane selected is the same instruction.
inline __m256 half(__m512 v, int i) {
    const __m512d d = _mm512_castps_pd(v);
    return _mm256_castpd_ps(i == 0 ? _mm512_maskz_extractf64x4_pd(0x0f, d, 0) : _mm512_maskz_extractf64x4_pd(0x0f, d, 1));
}

inline float hsum(__m512 v) {
    const __m256 s8 = _mm256_add_ps(half(v, 0), half(v, 1));
    __m128       s  = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s               = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s               = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// The first n < 32 values at p, zeros after them.
inline __m512i load_first(const uint16_t * p, int64_t n) {
    return _mm512_maskz_loadu_epi16(__mmask32((uint32_t(1) << n) - 1), p);
}

// R rows x C columns. Every (row, column) pair has its own accumulator and
// the same sequence of operations whatever R and C are, so a row's result
// does not depend on the tile it falls in.
template <int R, int C>
void tile(int64_t K, const char * a, size_t lda, const char * b, size_t ldb, float * dst, size_t ldd) {
    const uint16_t * ar[R];
    const uint16_t * bc[C];
    for (int r = 0; r < R; ++r) ar[r] = reinterpret_cast<const uint16_t *>(a + size_t(r) * lda);
    for (int c = 0; c < C; ++c) bc[c] = reinterpret_cast<const uint16_t *>(b + size_t(c) * ldb);
    __m512 acc[R][C];
    for (int r = 0; r < R; ++r) {
        for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    }
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
        // 64 bytes per row and step: fetch the same place in the rows of
        // the next tile, which follow in memory (see avx512/gemv.cpp).
        for (int r = 0; r < R; ++r) {
            _mm_prefetch(reinterpret_cast<const char *>(ar[r] + k) + R * lda, _MM_HINT_T0);
        }
        __m512i bv[C];
        for (int c = 0; c < C; ++c) bv[c] = load32(bc[c] + k);
        for (int r = 0; r < R; ++r) {
            const __m512i av = load32(ar[r] + k);
            for (int c = 0; c < C; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], as_bf16(av), as_bf16(bv[c]));
        }
    }
    if (k < K) {
        __m512i bv[C];
        for (int c = 0; c < C; ++c) bv[c] = load_first(bc[c] + k, K - k);
        for (int r = 0; r < R; ++r) {
            const __m512i av = load_first(ar[r] + k, K - k);
            for (int c = 0; c < C; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], as_bf16(av), as_bf16(bv[c]));
        }
    }
    for (int r = 0; r < R; ++r) {
        for (int c = 0; c < C; ++c) dst[size_t(c) * ldd + size_t(r)] = hsum(acc[r][c]);
    }
}

// Rows in groups of R, then one at a time. R * C accumulators, C columns
// and a row fit in the 32 registers.
template <int C>
void cols(int64_t K, const char * a, size_t lda, int64_t nrows, const char * b, size_t ldb, float * dst,
          size_t ldd) {
    constexpr int R = C == 1 ? 8 : C <= 4 ? 4 : 2;
    static_assert(GEMV_ROW_ALIGN % R == 0);
    int64_t r = 0;
    for (; r + R <= nrows; r += R) tile<R, C>(K, a + size_t(r) * lda, lda, b, ldb, dst + r, ldd);
    for (; r < nrows; ++r) tile<1, C>(K, a + size_t(r) * lda, lda, b, ldb, dst + r, ldd);
}

} // namespace

void gemv_bf16(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    const auto * ac = static_cast<const char *>(a);
    const auto * bc = static_cast<const char *>(b);
    switch (ncols) {
        case 1: cols<1>(K, ac, lda, nrows, bc, ldb, dst, ldd); break;
        case 2: cols<2>(K, ac, lda, nrows, bc, ldb, dst, ldd); break;
        case 3: cols<3>(K, ac, lda, nrows, bc, ldb, dst, ldd); break;
        case 4: cols<4>(K, ac, lda, nrows, bc, ldb, dst, ldd); break;
        case 5: cols<5>(K, ac, lda, nrows, bc, ldb, dst, ldd); break;
        case 6: cols<6>(K, ac, lda, nrows, bc, ldb, dst, ldd); break;
        case 7: cols<7>(K, ac, lda, nrows, bc, ldb, dst, ldd); break;
        default: cols<8>(K, ac, lda, nrows, bc, ldb, dst, ldd); break;
    }
}

} // namespace loom::cpu::avx512bf16

#include "target_end.h"

#endif // x86
