// AVX2 row conversions: activations to Q8_0, and half/bfloat16 to float and
// back with F16C. Each gives the same bits as the core's scalar conversion.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "core/fp16.h"
#include "core/types.h"

#include "backends/cpu/simd/kernel_table.h"

#include "target_begin.h"
#include "avx2.h"

namespace loom::cpu::avx2 {

namespace {

// Rounds half away from zero, as std::round does (the reference quantizer's
// rounding), rather than to nearest even as the conversion instructions do:
// truncate, then step away from zero when the dropped fraction is >= 0.5.
// v - trunc(v) is exact, so the test is exact.
inline __m256 round_half_away(__m256 v) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 t    = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 frac = _mm256_andnot_ps(sign, _mm256_sub_ps(v, t));
    const __m256 away = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    const __m256 step = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, sign)); // +-1 with v's sign
    return _mm256_add_ps(t, _mm256_and_ps(away, step));
}

} // namespace

void quantize_row_q8_0(const float * x, block_q8_0 * y, int64_t n) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    // Packing int32 -> int16 -> int8 works within 128-bit halves; this puts
    // the groups of four bytes back in order.
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t b = 0; b < n / QK8_0; ++b) {
        const float * xb = x + b * QK8_0;
        const __m256  v0 = _mm256_loadu_ps(xb);
        const __m256  v1 = _mm256_loadu_ps(xb + 8);
        const __m256  v2 = _mm256_loadu_ps(xb + 16);
        const __m256  v3 = _mm256_loadu_ps(xb + 24);

        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                                 _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h        = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h        = _mm_max_ss(h, _mm_movehdup_ps(h));
        const float amax = _mm_cvtss_f32(h);

        const float d  = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d         = fp32_to_fp16(d);

        const __m256  s  = _mm256_set1_ps(id);
        const __m256i i0 = _mm256_cvtps_epi32(round_half_away(_mm256_mul_ps(v0, s)));
        const __m256i i1 = _mm256_cvtps_epi32(round_half_away(_mm256_mul_ps(v1, s)));
        const __m256i i2 = _mm256_cvtps_epi32(round_half_away(_mm256_mul_ps(v2, s)));
        const __m256i i3 = _mm256_cvtps_epi32(round_half_away(_mm256_mul_ps(v3, s)));
        const __m256i w  = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(y[b].qs), _mm256_permutevar8x32_epi32(w, order));
    }
}

void fp16_to_fp32_row(const ggml_fp16_t * x, float * y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i, load_f16x8(x + i));
    }
    for (; i < n; ++i) {
        y[i] = half_to_float(x[i]);
    }
}

void fp32_to_fp16_row(const float * x, ggml_fp16_t * y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128(reinterpret_cast<__m128i *>(y + i), h);
    }
    for (; i < n; ++i) {
        y[i] = fp32_to_fp16(x[i]);
    }
}

void bf16_to_fp32_row(const uint16_t * x, float * y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i, load_bf16x8(x + i));
    }
    for (; i < n; ++i) {
        y[i] = bf16_to_fp32(x[i]);
    }
}

} // namespace loom::cpu::avx2

#include "target_end.h"

#endif // x86
