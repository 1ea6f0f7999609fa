#pragma once

// What the AVX-512 GEMMs share (f32 values in avx512/gemm.cpp, bf16 pairs
// in avx512bf16/gemm.cpp): the tile of C around their k loops, and the
// in-register transpose of their packers. Include between a target_begin.h
// and its target_end.h. The functions have internal linkage: each file
// compiles its own copies for its own target, so no copy built for one
// instruction set can stand in for another's.

#include <immintrin.h>

#include <cstddef>

#include "backends/cpu/simd/tile_prefetch.h"

namespace loom::cpu {
namespace {

// A mask of the first n of 16 lanes (n may be below 0 or above 16).
[[gnu::always_inline]] inline __mmask16 first16(int n) {
    return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// An m x n tile of C (column j at c + j * ldc; m <= 16 G, n <= NR) whose
// sums loop(acc) continues: from C's values (accumulate) or from zero. A
// full tile takes plain loads and stores, an edge tile masked ones around
// the same loop, so each element sees the same sequence of operations.
template <int NR, int G, class Loop>
[[gnu::always_inline]] inline void gemm_tile(float * c, size_t ldc, int m, int n, bool accumulate, Loop && loop) {
    __m512 acc[NR][G];
    prefetch_next_tile<NR>(c, ldc, 64 * G); // Note [C lines ahead]
    if (m == 16 * G && n == NR) {
        for (int j = 0; j < NR; ++j) {
            for (int g = 0; g < G; ++g) {
                acc[j][g] = accumulate ? _mm512_loadu_ps(c + size_t(j) * ldc + 16 * g) : _mm512_setzero_ps();
            }
        }
        loop(acc);
        for (int j = 0; j < NR; ++j) {
            for (int g = 0; g < G; ++g) _mm512_storeu_ps(c + size_t(j) * ldc + 16 * g, acc[j][g]);
        }
        return;
    }
    __mmask16 rows[G];
    for (int g = 0; g < G; ++g) rows[g] = first16(m - 16 * g);
    for (int j = 0; j < NR; ++j) {
        for (int g = 0; g < G; ++g) {
            acc[j][g] = accumulate && j < n ? _mm512_maskz_loadu_ps(rows[g], c + size_t(j) * ldc + 16 * g)
                                            : _mm512_setzero_ps();
        }
    }
    loop(acc);
    for (int j = 0; j < n; ++j) {
        for (int g = 0; g < G; ++g) _mm512_mask_storeu_ps(c + size_t(j) * ldc + 16 * g, rows[g], acc[j][g]);
    }
}

// On return r[t] holds word t of every input row (lane i from row i).
// (The zero-masked forms with every lane selected are the plain
// instructions; GCC 12 warns about the undefined inputs of some unmasked
// intrinsics.)
[[gnu::always_inline]] inline void transpose16_words(__m512i (&r)[16]) {
    constexpr __mmask16 all = 0xffff;
    // Rows 2k and 2k+1 interleaved: per 128-bit lane L, words 4L, 4L+1 (lo)
    // and 4L+2, 4L+3 (hi) of the two rows.
    __m512i lo[8], hi[8];
    for (int k = 0; k < 8; ++k) {
        lo[k] = _mm512_maskz_unpacklo_epi32(all, r[2 * k], r[2 * k + 1]);
        hi[k] = _mm512_maskz_unpackhi_epi32(all, r[2 * k], r[2 * k + 1]);
    }
    // v[q][c], lane L: word 4L + c of rows 4q..4q+3.
    __m512i v[4][4];
    for (int q = 0; q < 4; ++q) {
        v[q][0] = _mm512_maskz_unpacklo_epi64(0xff, lo[2 * q], lo[2 * q + 1]);
        v[q][1] = _mm512_maskz_unpackhi_epi64(0xff, lo[2 * q], lo[2 * q + 1]);
        v[q][2] = _mm512_maskz_unpacklo_epi64(0xff, hi[2 * q], hi[2 * q + 1]);
        v[q][3] = _mm512_maskz_unpackhi_epi64(0xff, hi[2 * q], hi[2 * q + 1]);
    }
    // Word 4L + c of all rows: lane L of v[0..3][c], gathered by two rounds
    // of 128-bit lane shuffles.
    for (int c = 0; c < 4; ++c) {
        const __m512i w0 = _mm512_maskz_shuffle_i32x4(all, v[0][c], v[1][c], 0x44);
        const __m512i w1 = _mm512_maskz_shuffle_i32x4(all, v[0][c], v[1][c], 0xee);
        const __m512i w2 = _mm512_maskz_shuffle_i32x4(all, v[2][c], v[3][c], 0x44);
        const __m512i w3 = _mm512_maskz_shuffle_i32x4(all, v[2][c], v[3][c], 0xee);
        r[c]             = _mm512_maskz_shuffle_i32x4(all, w0, w2, 0x88);
        r[4 + c]         = _mm512_maskz_shuffle_i32x4(all, w0, w2, 0xdd);
        r[8 + c]         = _mm512_maskz_shuffle_i32x4(all, w1, w3, 0x88);
        r[12 + c]        = _mm512_maskz_shuffle_i32x4(all, w1, w3, 0xdd);
    }
}

} // namespace
} // namespace loom::cpu
