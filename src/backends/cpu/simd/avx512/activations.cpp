// AVX-512 exponentials (softmax's row helpers and SiLU) and the scaling of
// rows.
//
// exp(x) = 2^k * exp(r) as in the AVX2 version (avx2/activations.cpp): k =
// round(x / ln 2), r = x - k ln 2 with ln 2 in two parts, exp(r) by its
// Taylor polynomial of degree 7. vscalefps applies 2^k to the polynomial in
// one instruction and covers k = 128 (x just below ln FLT_MAX) by itself,
// where the AVX2 version builds 2^k in the exponent field and doubles p.
// The range rules are the AVX2 version's: zero below ln(smallest normal),
// infinity above ln FLT_MAX, NaN passes through. Sixteen lanes per step
// where AVX2 has eight; softmax over one thread spends most of its time here.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "backends/cpu/simd/kernel_table.h"

#include "target_begin.h"
#include "avx512.h"

namespace loom::cpu::avx512 {

namespace {

constexpr __mmask16 k_all = 0xffff;

[[gnu::always_inline]] inline __m512 exp16(__m512 x) {
    const __m512 k =
        _mm512_maskz_roundscale_ps(k_all, _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
    r        = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);

    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p        = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p        = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p        = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p        = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p        = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p        = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p        = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __m512 y = _mm512_maskz_scalef_ps(k_all, p, k);

    const __mmask16 lo  = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3365447f), _CMP_LT_OQ);
    const __mmask16 hi  = _mm512_cmp_ps_mask(x, _mm512_set1_ps(88.7228391f), _CMP_GT_OQ);
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    y                   = _mm512_maskz_mov_ps(__mmask16(~lo), y);
    y                   = _mm512_mask_mov_ps(y, hi, _mm512_set1_ps(INFINITY));
    return _mm512_mask_mov_ps(y, nan, x);
}

// Lanes below n - i (a mask for the tail of a row).
[[gnu::always_inline]] inline __mmask16 tail_mask(int64_t left) {
    return __mmask16((1u << left) - 1);
}

// The lanes of t to p. Masked stores are slow on some processors (this
// AMD one among them) even with every lane set, when the line is not in
// cache: a whole register is stored plainly.
[[gnu::always_inline]] inline void store16(float * p, __m512 v, __mmask16 t) {
    if (t == k_all) {
        _mm512_storeu_ps(p, v);
    } else {
        _mm512_mask_storeu_ps(p, t, v);
    }
}

} // namespace

float max_f32(int64_t n, const float * x) {
    // maxps returns its second operand when either is NaN: NaNs are
    // skipped, and masked-off lanes keep -inf.
    __m512  m0 = _mm512_set1_ps(-INFINITY), m1 = m0;
    int64_t i  = 0;
    for (; i + 32 <= n; i += 32) {
        m0 = _mm512_maskz_max_ps(k_all, _mm512_loadu_ps(x + i), m0);
        m1 = _mm512_maskz_max_ps(k_all, _mm512_loadu_ps(x + i + 16), m1);
    }
    for (; i < n; i += 16) {
        const __mmask16 t = n - i >= 16 ? k_all : tail_mask(n - i);
        m0 = _mm512_maskz_max_ps(k_all, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), t, x + i), m0);
    }
    // (The reductions of immintrin.h use unmasked forms that GCC 12 warns
    // about; lanes are never NaN here.)
    alignas(64) float v[16];
    _mm512_store_ps(v, _mm512_maskz_max_ps(k_all, m0, m1));
    float r = v[0];
    for (int l = 1; l < 16; ++l) r = v[l] > r ? v[l] : r;
    return r;
}

double exp_sub_sum_f32(int64_t n, float * y, float max) {
    const __m512 vm   = _mm512_set1_ps(max);
    __m512d      acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
    auto         step = [&](int64_t i, __mmask16 t) {
        // Lanes past n are zeros after the mask and add nothing.
        const __m512 e = _mm512_maskz_mov_ps(t, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(t, y + i), vm)));
        store16(y + i, e, t);
        const __m512d h = _mm512_castps_pd(e);
        acc0 = _mm512_add_pd(acc0, _mm512_maskz_cvtps_pd(0xff, _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, h, 0))));
        acc1 = _mm512_add_pd(acc1, _mm512_maskz_cvtps_pd(0xff, _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, h, 1))));
    };
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) step(i, k_all);
    if (i < n) step(i, tail_mask(n - i));
    alignas(64) double v[8];
    _mm512_store_pd(v, _mm512_add_pd(acc0, acc1));
    return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

void silu_f32(int64_t n, const float * x, float * y) {
    const __m512 one  = _mm512_set1_ps(1.0f);
    auto         step = [&](int64_t i, __mmask16 t) {
        const __m512 v = _mm512_maskz_loadu_ps(t, x + i);
        const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), v));
        const __m512 r = _mm512_div_ps(v, _mm512_add_ps(one, e));
        store16(y + i, r, t);
    };
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) step(i, k_all);
    if (i < n) step(i, tail_mask(n - i));
}

// The portable loop's operations, 16 values at a time, the tail under a mask.
void adamw_f32(int64_t n, float * w, const float * g, float * m, float * v, const AdamwStep & s) {
    const __m512 b1 = _mm512_set1_ps(s.beta1), b2 = _mm512_set1_ps(s.beta2);
    const __m512 c1 = _mm512_set1_ps(s.one_minus_beta1), c2 = _mm512_set1_ps(s.one_minus_beta2);
    const __m512 h1 = _mm512_set1_ps(s.beta1h), h2 = _mm512_set1_ps(s.beta2h);
    const __m512 eps = _mm512_set1_ps(s.eps), alpha = _mm512_set1_ps(s.alpha), keep = _mm512_set1_ps(s.keep);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 t  = n - i >= 16 ? k_all : tail_mask(n - i);
        const __m512    gi = _mm512_maskz_loadu_ps(t, g + i);
        const __m512 mi = _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(t, m + i), b1), _mm512_mul_ps(gi, c1));
        const __m512 vi = _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(t, v + i), b2),
                                        _mm512_mul_ps(_mm512_mul_ps(gi, gi), c2));
        _mm512_mask_storeu_ps(m + i, t, mi);
        _mm512_mask_storeu_ps(v + i, t, vi);
        const __m512 num = _mm512_mul_ps(alpha, _mm512_mul_ps(mi, h1));
        const __m512 den = _mm512_add_ps(_mm512_maskz_sqrt_ps(t, _mm512_mul_ps(vi, h2)), eps);
        const __m512 wi  = _mm512_sub_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(t, w + i), keep), _mm512_div_ps(num, den));
        _mm512_mask_storeu_ps(w + i, t, wi);
    }
}

void scale_f32(int64_t n, const float * x, float s, float * y) {
    const __m512 vs = _mm512_set1_ps(s);
    int64_t      i  = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 a = _mm512_mul_ps(_mm512_loadu_ps(x + i), vs);
        const __m512 b = _mm512_mul_ps(_mm512_loadu_ps(x + i + 16), vs);
        _mm512_storeu_ps(y + i, a);
        _mm512_storeu_ps(y + i + 16, b);
    }
    for (; i < n; i += 16) {
        const __mmask16 t = n - i >= 16 ? k_all : tail_mask(n - i);
        store16(y + i, _mm512_mul_ps(_mm512_maskz_loadu_ps(t, x + i), vs), t);
    }
}

// Products rounded, then the sum, as the portable loop (no FMA): the same
// bits. A tail of fewer than 16 (NeoX) or 8 (normal) pairs runs under a mask.
void rope_f32(int64_t half, const float * x, float * y, const float * cos, const float * sin, bool neox) {
    if (neox) {
        auto turn = [&](int64_t i, __mmask16 t) {
            const __m512 x0 = _mm512_maskz_loadu_ps(t, x + i);
            const __m512 x1 = _mm512_maskz_loadu_ps(t, x + i + half);
            const __m512 c  = _mm512_maskz_loadu_ps(t, cos + i);
            const __m512 s  = _mm512_maskz_loadu_ps(t, sin + i);
            const __m512 r0 = _mm512_sub_ps(_mm512_mul_ps(x0, c), _mm512_mul_ps(x1, s));
            const __m512 r1 = _mm512_add_ps(_mm512_mul_ps(x0, s), _mm512_mul_ps(x1, c));
            store16(y + i, r0, t);
            store16(y + i + half, r1, t);
        };
        int64_t i = 0;
        for (; i + 16 <= half; i += 16) turn(i, k_all);
        if (i < half) turn(i, tail_mask(half - i));
        return;
    }
    // Eight pairs per register: cos and sin each repeated over their pair,
    // the pair's values swapped for the cross terms; even lanes a - b, odd
    // lanes b + a (addition commutes, bit for bit).
    const __m512i dup  = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    auto          turn = [&](int64_t i, __mmask16 tv, __mmask16 tp) {
        const __m512 v  = _mm512_maskz_loadu_ps(tv, x + 2 * i);
        const __m512 sw = _mm512_maskz_permute_ps(k_all, v, 0xb1);
        const __m512 c  = _mm512_maskz_permutexvar_ps(k_all, dup, _mm512_maskz_loadu_ps(tp, cos + i));
        const __m512 s  = _mm512_maskz_permutexvar_ps(k_all, dup, _mm512_maskz_loadu_ps(tp, sin + i));
        const __m512 a  = _mm512_mul_ps(v, c);
        const __m512 b  = _mm512_mul_ps(sw, s);
        const __m512 r  = _mm512_mask_add_ps(_mm512_sub_ps(a, b), __mmask16(0xaaaa), b, a);
        store16(y + 2 * i, r, tv);
    };
    int64_t i = 0;
    for (; i + 8 <= half; i += 8) turn(i, k_all, __mmask16(0xff));
    if (i < half) turn(i, tail_mask(2 * (half - i)), tail_mask(half - i));
}

} // namespace loom::cpu::avx512

#include "target_end.h"

#endif // x86
