// NEON element-wise rows whose results are the portable table's bits
// (kernel_table.h): arithmetic of two rows, row scaling, the normalisations'
// sums in double lanes, rotary embedding and the AdamW step. Each lane does the scalar code's IEEE operations in
// its order; this file is compiled without FMA contraction (CMakeLists.txt),
// so neither the vector code nor the scalar tails fuse a product into an
// addition. NaNs propagate as in scalar code (the default-NaN mode is off
// in user space).

#if defined(__aarch64__)

#include <arm_neon.h>

#include "neon.h"

namespace loom::cpu::neon {

namespace {

template <int Op> inline float32x4_t apply4(float32x4_t a, float32x4_t b) {
    if constexpr (Op == 0) return vaddq_f32(a, b);
    if constexpr (Op == 1) return vsubq_f32(a, b);
    if constexpr (Op == 2) return vmulq_f32(a, b);
    return vdivq_f32(a, b);
}

template <int Op> inline float apply1(float a, float b) {
    if constexpr (Op == 0) return a + b;
    if constexpr (Op == 1) return a - b;
    if constexpr (Op == 2) return a * b;
    return a / b;
}

} // namespace

template <int Op> void binary_f32(int64_t n, const float * a, const float * b, float * d) {
    // Both operands loaded before the results are stored: d may be a or b.
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const float32x4x4_t x = vld1q_f32_x4(a + i), y = vld1q_f32_x4(b + i);
        float32x4x4_t       r;
        r.val[0] = apply4<Op>(x.val[0], y.val[0]);
        r.val[1] = apply4<Op>(x.val[1], y.val[1]);
        r.val[2] = apply4<Op>(x.val[2], y.val[2]);
        r.val[3] = apply4<Op>(x.val[3], y.val[3]);
        vst1q_f32_x4(d + i, r);
    }
    for (; i + 4 <= n; i += 4) {
        vst1q_f32(d + i, apply4<Op>(vld1q_f32(a + i), vld1q_f32(b + i)));
    }
    for (; i < n; ++i) {
        d[i] = apply1<Op>(a[i], b[i]);
    }
}

template void binary_f32<0>(int64_t, const float *, const float *, float *);
template void binary_f32<1>(int64_t, const float *, const float *, float *);
template void binary_f32<2>(int64_t, const float *, const float *, float *);
template void binary_f32<3>(int64_t, const float *, const float *, float *);

void scale_f32(int64_t n, const float * x, float s, float * y) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        float32x4x4_t v = vld1q_f32_x4(x + i);
        v.val[0]        = vmulq_n_f32(v.val[0], s);
        v.val[1]        = vmulq_n_f32(v.val[1], s);
        v.val[2]        = vmulq_n_f32(v.val[2], s);
        v.val[3]        = vmulq_n_f32(v.val[3], s);
        vst1q_f32_x4(y + i, v);
    }
    for (; i + 4 <= n; i += 4) {
        vst1q_f32(y + i, vmulq_n_f32(vld1q_f32(x + i), s));
    }
    for (; i < n; ++i) {
        y[i] = x[i] * s;
    }
}

namespace {

// Four values as two pairs of doubles, squared where asked (exact: a
// float's 24-bit significand squared fits in a double's 53 bits, so the
// fused multiply-add rounds only the sum, as the addition alone would).
template <bool Squares> inline float64x2_t add_low(float64x2_t acc, float32x4_t v) {
    const float64x2_t d = vcvt_f64_f32(vget_low_f32(v));
    return Squares ? vfmaq_f64(acc, d, d) : vaddq_f64(acc, d);
}

template <bool Squares> inline float64x2_t add_high(float64x2_t acc, float32x4_t v) {
    const float64x2_t d = vcvt_high_f64_f32(v);
    return Squares ? vfmaq_f64(acc, d, d) : vaddq_f64(acc, d);
}

// Lanes 0-7 in four registers of two; value i of a run of eight goes to
// lane i, the tail's values to lanes 0.. in order: the portable order.
template <bool Squares> void sum_lanes(int64_t n, const float * x, double * acc) {
    float64x2_t   a0 = vld1q_f64(acc), a1 = vld1q_f64(acc + 2), a2 = vld1q_f64(acc + 4), a3 = vld1q_f64(acc + 6);
    int64_t       i  = 0;
    for (; i + 8 <= n; i += 8) {
        const float32x4_t v0 = vld1q_f32(x + i), v1 = vld1q_f32(x + i + 4);
        a0                   = add_low<Squares>(a0, v0);
        a1                   = add_high<Squares>(a1, v0);
        a2                   = add_low<Squares>(a2, v1);
        a3                   = add_high<Squares>(a3, v1);
    }
    vst1q_f64(acc, a0);
    vst1q_f64(acc + 2, a1);
    vst1q_f64(acc + 4, a2);
    vst1q_f64(acc + 6, a3);
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

void rope_f32(int64_t half, const float * x, float * y, const float * cos, const float * sin, bool neox) {
    // Per pair: a = x0 c, b = x1 s, c' = x0 s, d = x1 c, each rounded; then
    // a - b and c' + d, as the portable loop.
    int64_t i = 0;
    if (neox) {
        for (; i + 4 <= half; i += 4) {
            const float32x4_t x0 = vld1q_f32(x + i), x1 = vld1q_f32(x + i + half);
            const float32x4_t c = vld1q_f32(cos + i), s = vld1q_f32(sin + i);
            vst1q_f32(y + i, vsubq_f32(vmulq_f32(x0, c), vmulq_f32(x1, s)));
            vst1q_f32(y + i + half, vaddq_f32(vmulq_f32(x0, s), vmulq_f32(x1, c)));
        }
    } else {
        // Four pairs de-interleaved by LD2 (first values, second values),
        // interleaved again by ST2.
        for (; i + 4 <= half; i += 4) {
            const float32x4x2_t v = vld2q_f32(x + 2 * i);
            const float32x4_t   c = vld1q_f32(cos + i), s = vld1q_f32(sin + i);
            float32x4x2_t       r;
            r.val[0] = vsubq_f32(vmulq_f32(v.val[0], c), vmulq_f32(v.val[1], s));
            r.val[1] = vaddq_f32(vmulq_f32(v.val[0], s), vmulq_f32(v.val[1], c));
            vst2q_f32(y + 2 * i, r);
        }
    }
    const int64_t other = neox ? half : 1;
    const int64_t step  = neox ? 1 : 2;
    for (; i < half; ++i) {
        const int64_t j  = i * step;
        const float   x0 = x[j], x1 = x[j + other];
        y[j]             = x0 * cos[i] - x1 * sin[i];
        y[j + other]     = x0 * sin[i] + x1 * cos[i];
    }
}

void adamw_f32(int64_t n, float * w, const float * g, float * m, float * v, const AdamwStep & s) {
    // FSQRT and FDIV round correctly, as std::sqrt and the division do.
    const float32x4_t b1 = vdupq_n_f32(s.beta1), b2 = vdupq_n_f32(s.beta2);
    const float32x4_t c1 = vdupq_n_f32(s.one_minus_beta1), c2 = vdupq_n_f32(s.one_minus_beta2);
    const float32x4_t h1 = vdupq_n_f32(s.beta1h), h2 = vdupq_n_f32(s.beta2h);
    const float32x4_t eps = vdupq_n_f32(s.eps), alpha = vdupq_n_f32(s.alpha), keep = vdupq_n_f32(s.keep);
    int64_t           i   = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t gi = vld1q_f32(g + i);
        const float32x4_t mi = vaddq_f32(vmulq_f32(vld1q_f32(m + i), b1), vmulq_f32(gi, c1));
        const float32x4_t vi = vaddq_f32(vmulq_f32(vld1q_f32(v + i), b2), vmulq_f32(vmulq_f32(gi, gi), c2));
        vst1q_f32(m + i, mi);
        vst1q_f32(v + i, vi);
        const float32x4_t num = vmulq_f32(alpha, vmulq_f32(mi, h1));
        const float32x4_t den = vaddq_f32(vsqrtq_f32(vmulq_f32(vi, h2)), eps);
        vst1q_f32(w + i, vsubq_f32(vmulq_f32(vld1q_f32(w + i), keep), vdivq_f32(num, den)));
    }
    for (; i < n; ++i) {
        adamw_one(i, w, g, m, v, s);
    }
}

} // namespace loom::cpu::neon

#endif // __aarch64__
