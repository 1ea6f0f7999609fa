// NEON Q8_0 and Q8_K quantizers, and the quantized products of the base
// architecture: widening byte products (SMULL, SMLAL) added pairwise into
// 32-bit lanes.

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <utility>

#include "core/fp16.h"
#include "core/types/i_quants.h"
#include "core/types/iq_tables.h"
#include "core/types/legacy_k.h"
#include "core/types/other.h"
#include "neon.h"

namespace loom::cpu::neon {

namespace {

// The products of 32 signed bytes (x0, x1 with y0, y1) as four 32-bit lanes
// whose sum is the exact total: two byte products per 16-bit lane (at most
// 2 * 128 * 127, which fits), then added pairwise.
inline int32x4_t dot32(int8x16_t x0, int8x16_t x1, int8x16_t y0, int8x16_t y1) {
    const int16x8_t p0 = vmlal_high_s8(vmull_s8(vget_low_s8(x0), vget_low_s8(y0)), x0, y0);
    const int16x8_t p1 = vmlal_high_s8(vmull_s8(vget_low_s8(x1), vget_low_s8(y1)), x1, y1);
    return vpadalq_s16(vpaddlq_s16(p0), p1);
}

inline int32_t block_sum(int8x16_t x0, int8x16_t x1, int8x16_t y0, int8x16_t y1) {
    return vaddvq_s32(dot32(x0, x1, y0, y1));
}

inline int sum32(int8x16_t x0, int8x16_t x1, int8x16_t y0, int8x16_t y1) {
    return block_sum(x0, x1, y0, y1);
}

inline int sum16(int8x16_t q, int8x16_t y) {
    // Two products of at most 32 * 128 per 16-bit lane.
    return vaddlvq_s16(vmlal_high_s8(vmull_s8(vget_low_s8(q), vget_low_s8(y)), q, y));
}

#include "core/types/fp4_values.inc"
#include "quants_impl.h"
#include "kquants_impl.h"

} // namespace

namespace {

// One block of 32 as the reference quantizes Q8_0 and Q8_1: d = amax / 127,
// q = round(x / d) half away from zero (FRINTA), with the reference's
// multiplication by 1 / d. Writes the 32 levels and their sum; returns d.
float quantize_block_32(const float * xb, int8_t * qs, int32_t * sum) {
    float32x4_t v[8];
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int j = 0; j < 8; ++j) {
        v[j] = vld1q_f32(xb + 4 * j);
        m    = vmaxq_f32(m, vabsq_f32(v[j]));
    }
    const float amax = vmaxvq_f32(m);
    const float d    = amax / 127.0f;
    const float id   = d != 0.0f ? 1.0f / d : 0.0f;
    int32x4_t   q[8];
    int32x4_t   s = vdupq_n_s32(0);
    for (int j = 0; j < 8; ++j) {
        q[j] = vcvtq_s32_f32(vrndaq_f32(vmulq_n_f32(v[j], id)));
        s    = vaddq_s32(s, q[j]);
    }
    for (int j = 0; j < 8; j += 2) {
        const int16x8_t h = vcombine_s16(vmovn_s32(q[j]), vmovn_s32(q[j + 1]));
        vst1_s8(qs + 4 * j, vmovn_s16(h));
    }
    *sum = vaddvq_s32(s);
    return d;
}

} // namespace

void quantize_row_q8_0(const float * x, block_q8_0 * y, int64_t n) {
    for (int64_t b = 0; b < n / QK8_0; ++b) {
        int32_t sum;
        y[b].d = fp32_to_fp16(quantize_block_32(x + b * QK8_0, y[b].qs, &sum));
    }
}

void quantize_row_q8_1(const float * x, block_q8_1 * y, int64_t n) {
    // The reference's s: the levels' sum times d, rounded once to half.
    for (int64_t b = 0; b < n / QK8_1; ++b) {
        int32_t     sum;
        const float d = quantize_block_32(x + b * QK8_1, y[b].qs, &sum);
        y[b].d        = fp32_to_fp16(d);
        y[b].s        = fp32_to_fp16(float(sum) * d);
    }
}

void quantize_row_q8_K(const float * x, block_q8_K * y, int64_t n) {
    // As the reference: the first value of the largest magnitude sets
    // iscale = -127 / max, q = min(127, round(iscale x)) half to even
    // (FCVTNS), bsums the sums of 16, d = 1 / iscale. FMAXNM skips NaNs
    // as the reference's comparisons do.
    for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
        float32x4_t m = vdupq_n_f32(0.0f);
        for (int j = 0; j < QK_K; j += 4) {
            m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(x + j)));
        }
        const float amax = vmaxnmvq_f32(m);
        if (amax == 0.0f) {
            std::memset(&y[i], 0, sizeof(y[i]));
            continue;
        }
        float max = 0.0f;
        for (int j = 0; j < QK_K; ++j) {
            if (std::fabs(x[j]) == amax) {
                max = x[j];
                break;
            }
        }
        const float iscale = -127.0f / max;
        if (!(std::fabs(iscale) <= FLT_MAX)) {
            // A block of tiny values scales past the float range, where the
            // reference's rounding of infinities and FCVTNS's differ.
            quantize_row_q8_K_ref(x, &y[i], QK_K);
            continue;
        }
        const int32x4_t top = vdupq_n_s32(127);
        for (int g = 0; g < QK_K / 16; ++g) {
            int32x4_t q[4];
            for (int v = 0; v < 4; ++v) {
                q[v] = vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + 16 * g + 4 * v), iscale)), top);
            }
            const int16x8_t h0 = vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1]));
            const int16x8_t h1 = vcombine_s16(vmovn_s32(q[2]), vmovn_s32(q[3]));
            const int8x16_t b  = vcombine_s8(vmovn_s16(h0), vmovn_s16(h1));
            vst1q_s8(y[i].qs + 16 * g, b);
            y[i].bsums[g] = int16_t(vaddlvq_s8(b));
        }
        y[i].d = 1.0f / iscale;
    }
}

#include "quants_entries.h"

} // namespace loom::cpu::neon

#endif // __aarch64__
