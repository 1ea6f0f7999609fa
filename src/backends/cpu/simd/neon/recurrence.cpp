// Row steps of the linear recurrences on NEON registers (kernel_table.h:
// decay_dot_f32, wkv7_rows_f32, delta_row_f32). The state updates round as
// the portable loops do (each product rounded, then the sums in the order
// written; this file is compiled without FMA contraction), so the states
// carry the same bits; the dot products accumulate on fused multiply-adds
// in four registers of four lanes, then the scalar tail.

#if defined(__aarch64__)

#include <arm_neon.h>

#include "neon.h"

namespace loom::cpu::neon {

namespace {

// Four running sums of four lanes, for 16 values a step.
struct Sums {
    float32x4_t s[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    float       total() const { return vaddvq_f32(vaddq_f32(vaddq_f32(s[0], s[1]), vaddq_f32(s[2], s[3]))); }
};

// step(i, sum) for i = 0, 4, ... while four values remain, 16 a turn over
// the four sums; returns the first index left for the scalar tail.
template <class Step> inline int64_t by_fours(int64_t n, Sums & acc, Step && step) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        step(i, acc.s[0]);
        step(i + 4, acc.s[1]);
        step(i + 8, acc.s[2]);
        step(i + 12, acc.s[3]);
    }
    for (; i + 4 <= n; i += 4) {
        step(i, acc.s[0]);
    }
    return i;
}

inline float dot(int64_t n, const float * x, const float * y, int64_t & tail) {
    Sums acc;
    tail = by_fours(n, acc, [&](int64_t i, float32x4_t & sum) { sum = vfmaq_f32(sum, vld1q_f32(x + i), vld1q_f32(y + i)); });
    return acc.total();
}

template <bool VecA, bool HasC>
float decay_dot(int64_t n, const float * s0, float * s, const float * a, float a0, const float * b, float bx,
                const float * c, float cx, const float * r) {
    const float32x4_t va0 = vdupq_n_f32(a0);
    Sums              acc;
    int64_t           i = by_fours(n, acc, [&](int64_t at, float32x4_t & sum) {
        float32x4_t v = vmulq_f32(vld1q_f32(s0 + at), VecA ? vld1q_f32(a + at) : va0);
        v             = vaddq_f32(v, vmulq_n_f32(vld1q_f32(b + at), bx));
        if constexpr (HasC) {
            v = vaddq_f32(v, vmulq_n_f32(vld1q_f32(c + at), cx));
        }
        vst1q_f32(s + at, v);
        sum = vfmaq_f32(sum, v, vld1q_f32(r + at));
    });
    float sum = acc.total();
    for (; i < n; ++i) {
        float v = s0[i] * (VecA ? a[i] : a0) + b[i] * bx;
        if constexpr (HasC) {
            v = v + c[i] * cx;
        }
        s[i] = v;
        sum += v * r[i];
    }
    return sum;
}

// One pass applies the gate and takes the dot product with k, the second
// adds k d and takes the one with q; the row stays in L1 between them.
template <bool VecG>
float delta_row(int64_t n, float * s, const float * g, float g0, const float * k, float v, float beta,
                const float * q) {
    const float32x4_t vg0 = vdupq_n_f32(g0);
    Sums              acc;
    int64_t           i = by_fours(n, acc, [&](int64_t at, float32x4_t & sum) {
        const float32x4_t x = vmulq_f32(vld1q_f32(s + at), VecG ? vld1q_f32(g + at) : vg0);
        vst1q_f32(s + at, x);
        sum = vfmaq_f32(sum, x, vld1q_f32(k + at));
    });
    float sk = acc.total();
    for (; i < n; ++i) {
        s[i] *= VecG ? g[i] : g0;
        sk += s[i] * k[i];
    }
    const float d = (v - sk) * beta;
    Sums        out;
    i = by_fours(n, out, [&](int64_t at, float32x4_t & sum) {
        const float32x4_t x = vaddq_f32(vld1q_f32(s + at), vmulq_n_f32(vld1q_f32(k + at), d));
        vst1q_f32(s + at, x);
        sum = vfmaq_f32(sum, x, vld1q_f32(q + at));
    });
    float sq = out.total();
    for (; i < n; ++i) {
        s[i] += k[i] * d;
        sq += s[i] * q[i];
    }
    return sq;
}

} // namespace

void wkv7_rows_f32(int64_t n, int64_t rows, const float * s0, float * s, const float * r, const float * w,
                   const float * k, const float * v, const float * a, const float * b, float * out) {
    for (int64_t i = 0; i < rows; ++i) {
        const float * from = s0 + i * n;
        float *       to   = s + i * n;
        int64_t       j;
        float         sa = dot(n, from, a, j);
        for (; j < n; ++j) {
            sa += from[j] * a[j];
        }
        // (from w + k v_i) + b sa, as decay_dot_f32 with the second term.
        const float vi = v[i];
        Sums        acc;
        j = by_fours(n, acc, [&](int64_t at, float32x4_t & sum) {
            float32x4_t y = vaddq_f32(vmulq_f32(vld1q_f32(from + at), vld1q_f32(w + at)),
                                      vmulq_n_f32(vld1q_f32(k + at), vi));
            y             = vaddq_f32(y, vmulq_n_f32(vld1q_f32(b + at), sa));
            vst1q_f32(to + at, y);
            sum = vfmaq_f32(sum, y, vld1q_f32(r + at));
        });
        float sum = acc.total();
        for (; j < n; ++j) {
            const float y = (from[j] * w[j] + k[j] * vi) + b[j] * sa;
            to[j]         = y;
            sum += y * r[j];
        }
        out[i] = sum;
    }
}

float decay_dot_f32(int64_t n, const float * s0, float * s, const float * a, float a0, const float * b, float bx,
                    const float * c, float cx, const float * r) {
    if (a != nullptr) {
        return c != nullptr ? decay_dot<true, true>(n, s0, s, a, a0, b, bx, c, cx, r)
                            : decay_dot<true, false>(n, s0, s, a, a0, b, bx, c, cx, r);
    }
    return c != nullptr ? decay_dot<false, true>(n, s0, s, a, a0, b, bx, c, cx, r)
                        : decay_dot<false, false>(n, s0, s, a, a0, b, bx, c, cx, r);
}

float delta_row_f32(int64_t n, float * s, const float * g, float g0, const float * k, float v, float beta,
                    const float * q) {
    return g != nullptr ? delta_row<true>(n, s, g, g0, k, v, beta, q) : delta_row<false>(n, s, g, g0, k, v, beta, q);
}

} // namespace loom::cpu::neon

#endif // __aarch64__
