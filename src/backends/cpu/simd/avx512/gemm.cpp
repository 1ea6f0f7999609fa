// The AVX-512 f32 GEMM micro-kernel and its packing.
//
// Tile: MR = 32 rows (two registers of 16 lanes) x NR = 14 columns, 28
// accumulators (with the two a values and a broadcast, 31 of the 32
// registers). Per k the kernel loads the 32 values of the a panel and
// broadcasts each of the 14 values of the b panel, for 28 FMAs of 16 lanes:
// twice the work per instruction of the AVX2 tile (16 x 6), on a processor
// whose FMA units are 512 bits wide (14 columns measured 1-3% faster than
// 12 in loom-bench). Each element of C is one running sum over k in
// increasing order (Note [GEMM panels] in kernels/gemm.cpp).
//
// Packing transposes 16 x 16 blocks of floats in registers
// (avx512/gemm_common.h): 16 rows (or columns) times 16 values of k in, 16
// values of k times 16 rows out. Loads past the end of k are masked, so no
// byte past a row is read.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "backends/cpu/simd/kernel_table.h"

#include "target_begin.h"
#include "avx512.h"
#include "gemm_common.h"

namespace loom::cpu::avx512 {

namespace {

constexpr int MR = GEMM_MR;
constexpr int NR = GEMM_NR;
constexpr int G  = MR / 16; // registers per column of the tile

inline void tile_loop(int64_t kc, const float * ap, const float * bp, __m512 (&acc)[NR][G]) {
#pragma GCC unroll 2
    for (int64_t k = 0; k < kc; ++k) {
        __m512 a[G];
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) a[g] = _mm512_loadu_ps(ap + 16 * g);
#pragma GCC unroll 14
        for (int j = 0; j < NR; ++j) {
            const __m512 b = _mm512_set1_ps(bp[j]);
#pragma GCC unroll 2
            for (int g = 0; g < G; ++g) acc[j][g] = _mm512_fmadd_ps(a[g], b, acc[j][g]);
        }
        ap += MR;
        bp += NR;
    }
}

} // namespace

void gemm_micro(int64_t kc, const float * ap, const float * bp, float * c, size_t ldc, int m, int n,
                bool accumulate) {
    gemm_tile<NR, G>(c, ldc, m, n, accumulate, [&](__m512 (&acc)[NR][G]) { tile_loop(kc, ap, bp, acc); });
}

// Any width up to 32 in groups of 16 rows; rows past nrows are zeros.
void gemm_pack(const float * const * rows, int nrows, int width, int64_t kb, float * panel) {
    for (int g = 0; 16 * g < width; ++g) {
        const __mmask16 keep = first16(width - 16 * g);
        for (int64_t k = 0; k < kb; k += 16) {
            const int       n    = int(kb - k < 16 ? kb - k : 16);
            const __mmask16 load = first16(n);
            __m512i         r[16];
            for (int i = 0; i < 16; ++i) {
                const int row = 16 * g + i;
                r[i] = row < nrows ? _mm512_castps_si512(_mm512_maskz_loadu_ps(load, rows[row] + k))
                                   : _mm512_setzero_si512();
            }
            transpose16_words(r);
            for (int t = 0; t < n; ++t) {
                _mm512_mask_storeu_epi32(panel + size_t(k + t) * size_t(width) + 16 * g, keep, r[t]);
            }
        }
    }
}

} // namespace loom::cpu::avx512

#include "target_end.h"

#endif // x86
