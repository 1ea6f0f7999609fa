// AVX2 exponentials: the softmax row helpers and SiLU.
//
// exp(x) = 2^k * exp(r) with k = round(x / ln 2) and r = x - k ln 2, |r| <=
// ln 2 / 2, ln 2 split in two parts so that r is exact to a few ulp; exp(r)
// by its Taylor polynomial of degree 7 (the first term left out is below
// 2^-27 relative), and 2^k built in the exponent field. Results are within a
// few ulp of std::exp for normal results; those below the smallest normal
// float are flushed to zero, NaN stays NaN.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "backends/cpu/simd/kernel_table.h"
#include "core/fp16.h"
#include "core/types.h"

#include "target_begin.h"
#include "avx2.h"

namespace loom::cpu::avx2 {

namespace {

inline __m256 exp8(__m256 x) {
    const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
    r        = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);

    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p        = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p        = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p        = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p        = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p        = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p        = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p        = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));

    // k = 128 (x just below ln FLT_MAX) does not fit the exponent field:
    // scale by 2^127 and double p.
    const __m256 big = _mm256_cmp_ps(k, _mm256_set1_ps(127.0f), _CMP_GT_OQ);
    p                = _mm256_add_ps(p, _mm256_and_ps(big, p));
    const __m256i e  = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_min_ps(k, _mm256_set1_ps(127.0f))), _mm256_set1_epi32(127)), 23);
    __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));

    // Out of range: zero below ln(smallest normal), infinity above ln FLT_MAX;
    // NaN passes through.
    const __m256 lo = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3365447f), _CMP_LT_OQ);
    const __m256 hi = _mm256_cmp_ps(x, _mm256_set1_ps(88.7228391f), _CMP_GT_OQ);
    y               = _mm256_andnot_ps(lo, y);
    y               = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), hi);
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

} // namespace

float max_f32(int64_t n, const float * x) {
    // maxps returns its second operand when either is NaN: NaNs are skipped.
    __m256  m = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        m = _mm256_max_ps(_mm256_loadu_ps(x + i), m);
    }
    __m128 h = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
    h        = _mm_max_ps(_mm_movehl_ps(h, h), h);
    h        = _mm_max_ss(_mm_movehdup_ps(h), h);
    float r  = _mm_cvtss_f32(h);
    for (; i < n; ++i) {
        r = x[i] > r ? x[i] : r;
    }
    return r;
}

double exp_sub_sum_f32(int64_t n, float * y, float max) {
    const __m256 vm   = _mm256_set1_ps(max);
    __m256d      acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
    int64_t      i    = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(y + i), vm));
        _mm256_storeu_ps(y + i, e);
        acc0 = _mm256_add_pd(acc0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        acc1 = _mm256_add_pd(acc1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    alignas(32) double lanes[4];
    _mm256_store_pd(lanes, _mm256_add_pd(acc0, acc1));
    double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    for (; i < n; ++i) {
        y[i] = std::exp(y[i] - max);
        sum += double(y[i]);
    }
    return sum;
}

void silu_f32(int64_t n, const float * x, float * y) {
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t      i   = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), v));
        _mm256_storeu_ps(y + i, _mm256_div_ps(v, _mm256_add_ps(one, e)));
    }
    for (; i < n; ++i) {
        y[i] = x[i] / (1.0f + std::exp(-x[i]));
    }
}

void scale_f32(int64_t n, const float * x, float s, float * y) {
    const __m256 vs = _mm256_set1_ps(s);
    int64_t      i  = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
    }
    for (; i < n; ++i) {
        y[i] = x[i] * s;
    }
}

namespace {

// The normalisations' eight double lanes in two registers: value i of a run
// of eight to lane i, the tail's values to lanes 0.. in order, as the
// portable loop. A float's square is exact in double, so the fused
// multiply-add of the squares rounds only the sum, as the addition would.
template <bool Squares> void sum_lanes(int64_t n, const float * x, double * acc) {
    __m256d lo = _mm256_loadu_pd(acc), hi = _mm256_loadu_pd(acc + 4);
    int64_t i  = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256d a = _mm256_cvtps_pd(_mm_loadu_ps(x + i)), b = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4));
        lo              = Squares ? _mm256_fmadd_pd(a, a, lo) : _mm256_add_pd(lo, a);
        hi              = Squares ? _mm256_fmadd_pd(b, b, hi) : _mm256_add_pd(hi, b);
    }
    _mm256_storeu_pd(acc, lo);
    _mm256_storeu_pd(acc + 4, hi);
    for (int64_t j = 0; i < n; ++i, ++j) {
        const double v = x[i];
        acc[j] += Squares ? v * v : v;
    }
}

} // namespace

void sum_lanes_f64(int64_t n, const float * x, double * acc) {
    sum_lanes<false>(n, x, acc);
}

void sum_sq_lanes_f64(int64_t n, const float * x, double * acc) {
    sum_lanes<true>(n, x, acc);
}

// The same operations as the portable loop, 8 values at a time (no FMA
// contraction in the SIMD sources, so the scalar tail rounds alike).
void adamw_f32(int64_t n, float * w, const float * g, float * m, float * v, const AdamwStep & s) {
    const __m256 b1 = _mm256_set1_ps(s.beta1), b2 = _mm256_set1_ps(s.beta2);
    const __m256 c1 = _mm256_set1_ps(s.one_minus_beta1), c2 = _mm256_set1_ps(s.one_minus_beta2);
    const __m256 h1 = _mm256_set1_ps(s.beta1h), h2 = _mm256_set1_ps(s.beta2h);
    const __m256 eps = _mm256_set1_ps(s.eps), alpha = _mm256_set1_ps(s.alpha), keep = _mm256_set1_ps(s.keep);
    int64_t      i   = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 gi = _mm256_loadu_ps(g + i);
        const __m256 mi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(m + i), b1), _mm256_mul_ps(gi, c1));
        const __m256 vi =
            _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(v + i), b2), _mm256_mul_ps(_mm256_mul_ps(gi, gi), c2));
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        const __m256 num = _mm256_mul_ps(alpha, _mm256_mul_ps(mi, h1));
        const __m256 den = _mm256_add_ps(_mm256_sqrt_ps(_mm256_mul_ps(vi, h2)), eps);
        _mm256_storeu_ps(w + i, _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(w + i), keep), _mm256_div_ps(num, den)));
    }
    for (; i < n; ++i) {
        adamw_one(i, w, g, m, v, s);
    }
}

// Products rounded, then the sum, as the portable loop (the SIMD sources
// are compiled without FMA contraction, so the scalar tails round alike).
void rope_f32(int64_t half, const float * x, float * y, const float * cos, const float * sin, bool neox) {
    const int64_t other = neox ? half : 1;
    const int64_t step  = neox ? 1 : 2;
    int64_t       i     = 0;
    if (neox) {
        for (; i + 8 <= half; i += 8) {
            const __m256 x0 = _mm256_loadu_ps(x + i);
            const __m256 x1 = _mm256_loadu_ps(x + i + half);
            const __m256 c  = _mm256_loadu_ps(cos + i);
            const __m256 s  = _mm256_loadu_ps(sin + i);
            _mm256_storeu_ps(y + i, _mm256_sub_ps(_mm256_mul_ps(x0, c), _mm256_mul_ps(x1, s)));
            _mm256_storeu_ps(y + i + half, _mm256_add_ps(_mm256_mul_ps(x0, s), _mm256_mul_ps(x1, c)));
        }
    } else {
        // Four pairs per register: cos and sin each repeated over their
        // pair, the pair's values swapped for the cross terms; even lanes
        // a - b, odd lanes b + a (addition commutes, bit for bit).
        const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
        for (; i + 4 <= half; i += 4) {
            const __m256 v  = _mm256_loadu_ps(x + 2 * i);
            const __m256 sw = _mm256_permute_ps(v, 0xb1);
            const __m256 c  = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(cos + i)), dup);
            const __m256 s  = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(sin + i)), dup);
            _mm256_storeu_ps(y + 2 * i, _mm256_addsub_ps(_mm256_mul_ps(v, c), _mm256_mul_ps(sw, s)));
        }
    }
    for (; i < half; ++i) {
        const int64_t j  = i * step;
        const float   x0 = x[j], x1 = x[j + other];
        y[j]             = x0 * cos[i] - x1 * sin[i];
        y[j + other]     = x0 * sin[i] + x1 * cos[i];
    }
}

namespace {

template <int Op> inline __m256 apply8(__m256 a, __m256 b) {
    if constexpr (Op == 0) return _mm256_add_ps(a, b);
    if constexpr (Op == 1) return _mm256_sub_ps(a, b);
    if constexpr (Op == 2) return _mm256_mul_ps(a, b);
    return _mm256_div_ps(a, b);
}

template <int Op> inline float apply1(float a, float b) {
    if constexpr (Op == 0) return a + b;
    if constexpr (Op == 1) return a - b;
    if constexpr (Op == 2) return a * b;
    return a / b;
}

} // namespace

// Both operands of a step are loaded before its store, so d may be a or b.
template <int Op> void binary_f32(int64_t n, const float * a, const float * b, float * d) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 r0 = apply8<Op>(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
        const __m256 r1 = apply8<Op>(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8));
        _mm256_storeu_ps(d + i, r0);
        _mm256_storeu_ps(d + i + 8, r1);
    }
    for (; i < n; ++i) {
        d[i] = apply1<Op>(a[i], b[i]);
    }
}
namespace {

template <bool F16> inline __m256 load8_as_f32(const void * row, int64_t d) {
    if constexpr (F16) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(static_cast<const uint16_t *>(row) + d)));
    } else {
        return _mm256_loadu_ps(static_cast<const float *>(row) + d);
    }
}

// 32 lanes of y at a time stay in registers while the rows pass; each lane
// takes the rows in order, as the portable loop does.
template <bool F16> void mad_rows(int64_t n, float * y, const void * x, size_t ldx, int64_t nrows, const float * w) {
    auto row = [&](int64_t i) { return static_cast<const char *>(x) + size_t(i) * ldx; };
    int64_t d = 0;
    for (; d + 32 <= n; d += 32) {
        __m256 a0 = _mm256_loadu_ps(y + d), a1 = _mm256_loadu_ps(y + d + 8);
        __m256 a2 = _mm256_loadu_ps(y + d + 16), a3 = _mm256_loadu_ps(y + d + 24);
        for (int64_t i = 0; i < nrows; ++i) {
            if (w[i] == 0.0f) continue;
            const __m256 wv = _mm256_set1_ps(w[i]);
            const void * r  = row(i);
            a0              = _mm256_fmadd_ps(load8_as_f32<F16>(r, d), wv, a0);
            a1              = _mm256_fmadd_ps(load8_as_f32<F16>(r, d + 8), wv, a1);
            a2              = _mm256_fmadd_ps(load8_as_f32<F16>(r, d + 16), wv, a2);
            a3              = _mm256_fmadd_ps(load8_as_f32<F16>(r, d + 24), wv, a3);
        }
        _mm256_storeu_ps(y + d, a0);
        _mm256_storeu_ps(y + d + 8, a1);
        _mm256_storeu_ps(y + d + 16, a2);
        _mm256_storeu_ps(y + d + 24, a3);
    }
    for (; d + 8 <= n; d += 8) {
        __m256 a = _mm256_loadu_ps(y + d);
        for (int64_t i = 0; i < nrows; ++i) {
            if (w[i] == 0.0f) continue;
            a = _mm256_fmadd_ps(load8_as_f32<F16>(row(i), d), _mm256_set1_ps(w[i]), a);
        }
        _mm256_storeu_ps(y + d, a);
    }
    for (; d < n; ++d) {
        float a = y[d];
        for (int64_t i = 0; i < nrows; ++i) {
            if (w[i] == 0.0f) continue;
            float v;
            if constexpr (F16) {
                v = _cvtsh_ss(reinterpret_cast<const uint16_t *>(row(i))[d]);
            } else {
                v = reinterpret_cast<const float *>(row(i))[d];
            }
            a = std::fma(v, w[i], a);
        }
        y[d] = a;
    }
}

} // namespace

void mad_rows_f32(int64_t n, float * y, const void * x, size_t ldx, int64_t nrows, const float * w) {
    mad_rows<false>(n, y, x, ldx, nrows, w);
}

void mad_rows_f16(int64_t n, float * y, const void * x, size_t ldx, int64_t nrows, const float * w) {
    mad_rows<true>(n, y, x, ldx, nrows, w);
}

template void binary_f32<0>(int64_t, const float *, const float *, float *);
template void binary_f32<1>(int64_t, const float *, const float *, float *);
template void binary_f32<2>(int64_t, const float *, const float *, float *);
template void binary_f32<3>(int64_t, const float *, const float *, float *);

} // namespace loom::cpu::avx2

#include "target_end.h"

#endif // x86
