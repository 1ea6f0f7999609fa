#pragma once

// The sum of a register's 16 lanes, in a fixed order (the same bits
// wherever it is used). Include between a file's AVX-512 target pragmas.

#include <immintrin.h>

namespace loom::cpu::avx512 {

[[gnu::always_inline]] inline float sum16(__m512 v) {
    alignas(64) float x[16];
    _mm512_store_ps(x, v);
    float s[4];
    for (int i = 0; i < 4; ++i) s[i] = (x[i] + x[i + 4]) + (x[i + 8] + x[i + 12]);
    return (s[0] + s[1]) + (s[2] + s[3]);
}

} // namespace loom::cpu::avx512
