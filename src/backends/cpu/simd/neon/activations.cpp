// NEON exponentials: softmax's exp(y - max) with its row sum, and SiLU.
//
// exp(x) = 2^k exp(r), k the integer nearest x / ln 2 and r = x - k ln 2
// (ln 2 in a short high part, exact in a product with k, and a low part, so
// that r is exact to a few ulp); |r| <= ln 2 / 2, where the Taylor polynomial
// of degree 7 is within 2^-27 of exp(r). 2^k is written straight into the
// exponent field. Normal results are a few ulp from std::exp's; results
// below the smallest normal float are flushed to zero, overflow gives
// infinity and NaN stays NaN.

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cmath>

#include "neon.h"

namespace loom::cpu::neon {

namespace {

inline float32x4_t exp4(float32x4_t x) {
    const float32x4_t k = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
    float32x4_t       r = vfmsq_f32(x, k, vdupq_n_f32(0.693359375f)); // 8 significant bits: k * this is exact
    r                   = vfmsq_f32(r, k, vdupq_n_f32(-2.12194440e-4f));

    // Horner's rule from the term of degree 7 down.
    float32x4_t p = vdupq_n_f32(1.0f / 5040.0f);
    p             = vfmaq_f32(vdupq_n_f32(1.0f / 720.0f), p, r);
    p             = vfmaq_f32(vdupq_n_f32(1.0f / 120.0f), p, r);
    p             = vfmaq_f32(vdupq_n_f32(1.0f / 24.0f), p, r);
    p             = vfmaq_f32(vdupq_n_f32(1.0f / 6.0f), p, r);
    p             = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
    p             = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p             = vfmaq_f32(vdupq_n_f32(1.0f), p, r);

    // k = 128 (x just below ln FLT_MAX) is past the exponent field: 2^127
    // times 2p instead.
    const uint32x4_t top = vcgtq_f32(k, vdupq_n_f32(127.0f));
    p                    = vbslq_f32(top, vaddq_f32(p, p), p);
    const int32x4_t  e   = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(vminq_f32(k, vdupq_n_f32(127.0f))), vdupq_n_s32(127)), 23);
    float32x4_t      y   = vmulq_f32(p, vreinterpretq_f32_s32(e));

    // Below ln(smallest normal): 0; above ln FLT_MAX: infinity; NaN: itself.
    y = vbslq_f32(vcltq_f32(x, vdupq_n_f32(-87.3365447f)), vdupq_n_f32(0.0f), y);
    y = vbslq_f32(vcgtq_f32(x, vdupq_n_f32(88.7228391f)), vdupq_n_f32(INFINITY), y);
    return vbslq_f32(vceqq_f32(x, x), y, x);
}

} // namespace

double exp_sub_sum_f32(int64_t n, float * y, float max) {
    const float32x4_t vm = vdupq_n_f32(max);
    float64x2_t       s0 = vdupq_n_f64(0.0), s1 = s0;
    int64_t           i  = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t e = exp4(vsubq_f32(vld1q_f32(y + i), vm));
        vst1q_f32(y + i, e);
        s0 = vaddq_f64(s0, vcvt_f64_f32(vget_low_f32(e)));
        s1 = vaddq_f64(s1, vcvt_high_f64_f32(e));
    }
    double sum = vaddvq_f64(vaddq_f64(s0, s1));
    for (; i < n; ++i) {
        y[i] = std::exp(y[i] - max);
        sum += double(y[i]);
    }
    return sum;
}

void silu_f32(int64_t n, const float * x, float * y) {
    // x / (1 + e^-x), as the portable loop: one rounding fewer than x times
    // the sigmoid.
    const float32x4_t one = vdupq_n_f32(1.0f);
    int64_t           i   = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        vst1q_f32(y + i, vdivq_f32(v, vaddq_f32(one, exp4(vnegq_f32(v)))));
    }
    for (; i < n; ++i) {
        y[i] = x[i] / (1.0f + std::exp(-x[i]));
    }
}

} // namespace loom::cpu::neon

#endif // __aarch64__
