// E8M0 scales (MXFP4's) as floats on 128-bit integer lanes, shared by the
// AVX2 two-row tiles (rows2_impl.h) and the AVX-512 four-row ones
// (avx512/gemv.cpp). Include inside the ISA's namespace, under a target
// with AVX2.
#pragma once

namespace {

// e8m0_to_fp32_half of the bytes in int32 lanes: 2^(e - 128), whose float
// bits are (e - 1) << 23, or the subnormal 0x00200000 << e for e < 2.
[[gnu::always_inline]] inline __m128 e8m0_scales(__m128i e) {
    const __m128i normal = _mm_slli_epi32(_mm_sub_epi32(e, _mm_set1_epi32(1)), 23);
    const __m128i sub    = _mm_sllv_epi32(_mm_set1_epi32(0x00200000), e);
    return _mm_castsi128_ps(_mm_blendv_epi8(normal, sub, _mm_cmplt_epi32(e, _mm_set1_epi32(2))));
}

} // namespace
