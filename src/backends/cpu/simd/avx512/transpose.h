#pragma once

// In-register transpose of 16 x 16 32-bit words, shared by the AVX-512
// GEMM packers (f32 values in avx512/gemm.cpp, bf16 pairs in
// avx512bf16/gemm.cpp). Include between a target_begin.h and its
// target_end.h. The function has internal linkage: each file compiles its
// own copy for its own target, so no copy built for one instruction set can
// stand in for another's.

#include <immintrin.h>

namespace loom::cpu {
namespace {

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
