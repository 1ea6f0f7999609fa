#pragma once

// The starting lanes of a quantized product whose weights are stored
// unsigned, as n + Offset (Q4_0 nibbles: Offset 8; Q8_0 flipped: 128):
// minus Offset times the sums of four of an activation block, lane l
// covering bytes 4l..4l+3 of its low half and of its high half. A product
// started from them ends as the exact integer product with the true
// weights. Include between a file's AVX-512 VNNI target pragmas.

#include <immintrin.h>

#include "core/types.h"

namespace loom::cpu::avx512 {

template <int Offset> [[gnu::always_inline]] inline __m128i start_lanes(const block_q8_0 & y) {
    const __m128i off = _mm_set1_epi8(char(Offset));
    const __m128i lo  = _mm_loadu_si128(reinterpret_cast<const __m128i *>(y.qs));
    const __m128i hi  = _mm_loadu_si128(reinterpret_cast<const __m128i *>(y.qs + 16));
    const __m128i sum = _mm_dpbusd_epi32(_mm_dpbusd_epi32(_mm_setzero_si128(), off, lo), off, hi);
    return _mm_sub_epi32(_mm_setzero_si128(), sum);
}

} // namespace loom::cpu::avx512
