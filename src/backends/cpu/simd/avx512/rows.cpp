// Weighted sums of f32 and f16 rows with AVX-512 (attention's values), and
// element-wise add, sub, mul and div of f32 rows.
//
// A row's 128 first values fill eight registers, so for rows of up to 128
// values (the head sizes of most models) every row is read once, front to
// back, while the sums stay in registers; the AVX2 version holds 32 values
// and reads a long row in several strided passes. Each lane takes the rows
// in order, as the portable loop does.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "target_begin.h"
#include "avx512.h"

namespace loom::cpu::avx512 {

namespace {

constexpr __mmask16 k_all = 0xffff;

template <bool F16> inline __m512 load16(const char * row, int64_t d, __mmask16 m = k_all) {
    if constexpr (F16) {
        const __m256i h = _mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t *>(row) + d);
        return _mm512_maskz_cvtph_ps(k_all, h);
    } else {
        return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float *>(row) + d);
    }
}

template <bool F16, int V>
inline void chunk(float * y, const char * x, size_t ldx, int64_t nrows, const float * w, int64_t d,
                  __mmask16 last = k_all) {
    __m512 a[V];
    for (int j = 0; j < V; ++j) a[j] = _mm512_maskz_loadu_ps(j == V - 1 ? last : k_all, y + d + 16 * j);
    for (int64_t i = 0; i < nrows; ++i) {
        if (w[i] == 0.0f) continue;
        const __m512 wv  = _mm512_set1_ps(w[i]);
        const char * row = x + size_t(i) * ldx;
        for (int j = 0; j < V; ++j) {
            a[j] = _mm512_fmadd_ps(load16<F16>(row, d + 16 * j, j == V - 1 ? last : k_all), wv, a[j]);
        }
    }
    for (int j = 0; j < V; ++j) _mm512_mask_storeu_ps(y + d + 16 * j, j == V - 1 ? last : k_all, a[j]);
}

template <bool F16> void mad_rows(int64_t n, float * y, const void * xv, size_t ldx, int64_t nrows, const float * w) {
    const char * x = static_cast<const char *>(xv);
    int64_t      d = 0;
    for (; d + 128 <= n; d += 128) chunk<F16, 8>(y, x, ldx, nrows, w, d);
    // The rest in one pass: up to eight registers, the last one masked.
    const int64_t rest = n - d;
    if (rest == 0) return;
    const int       regs = int((rest + 15) / 16);
    const __mmask16 last = rest % 16 == 0 ? k_all : __mmask16((1u << (rest % 16)) - 1);
    switch (regs) {
        case 1: chunk<F16, 1>(y, x, ldx, nrows, w, d, last); break;
        case 2: chunk<F16, 2>(y, x, ldx, nrows, w, d, last); break;
        case 3: chunk<F16, 3>(y, x, ldx, nrows, w, d, last); break;
        case 4: chunk<F16, 4>(y, x, ldx, nrows, w, d, last); break;
        case 5: chunk<F16, 5>(y, x, ldx, nrows, w, d, last); break;
        case 6: chunk<F16, 6>(y, x, ldx, nrows, w, d, last); break;
        case 7: chunk<F16, 7>(y, x, ldx, nrows, w, d, last); break;
        default: chunk<F16, 8>(y, x, ldx, nrows, w, d, last); break;
    }
}

} // namespace

void mad_rows_f32(int64_t n, float * y, const void * x, size_t ldx, int64_t nrows, const float * w) {
    mad_rows<false>(n, y, x, ldx, nrows, w);
}

void mad_rows_f16(int64_t n, float * y, const void * x, size_t ldx, int64_t nrows, const float * w) {
    mad_rows<true>(n, y, x, ldx, nrows, w);
}

// Element-wise ops of f32 rows (kernel_table.h BinaryFn): 32 values a step,
// the tail under a mask. IEEE operations round once, so every table gives
// the same bits; d may be a or b.
template <int Op> inline __m512 apply16(__m512 a, __m512 b) {
    if constexpr (Op == 0) {
        return _mm512_add_ps(a, b);
    } else if constexpr (Op == 1) {
        return _mm512_sub_ps(a, b);
    } else if constexpr (Op == 2) {
        return _mm512_mul_ps(a, b);
    } else {
        return _mm512_div_ps(a, b);
    }
}

template <int Op> void binary_f32(int64_t n, const float * a, const float * b, float * d) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 r0 = apply16<Op>(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i));
        const __m512 r1 = apply16<Op>(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16));
        _mm512_storeu_ps(d + i, r0);
        _mm512_storeu_ps(d + i + 16, r1);
    }
    for (; i < n; i += 16) {
        // Lanes past n are loaded as zeros and never stored.
        const __mmask16 m = n - i >= 16 ? k_all : __mmask16((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(d + i, m, apply16<Op>(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
    }
}

template void binary_f32<0>(int64_t, const float *, const float *, float *);
template void binary_f32<1>(int64_t, const float *, const float *, float *);
template void binary_f32<2>(int64_t, const float *, const float *, float *);
template void binary_f32<3>(int64_t, const float *, const float *, float *);

} // namespace loom::cpu::avx512

#include "target_end.h"

#endif // x86
