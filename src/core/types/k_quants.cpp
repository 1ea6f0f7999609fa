// The K-quants, Q2_K to Q8_K: block layouts bit-identical to ggml's, the
// reference codecs, and ggml_quantize_chunk's quantizers, which with an
// importance matrix fit every group and the super-block's scales to it.

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/common.h"
#include "core/fp16.h"
#include "core/types.h"
#include "core/types/legacy_k.h"
#include "core/types/quant_search.h"

namespace loom {

namespace {

using quant::nearest_int;

template <typename T> T * blocks(void * p) {
    return static_cast<T *>(p);
}
template <typename T> const T * blocks(const void * p) {
    return static_cast<const T *>(p);
}

// Two-bit levels of 256 weights: byte 32 h + l holds the weights
// 128 h + l + 32 s at bits 2 s (Q2_K, Q3_K).
void pack2(const uint8_t * L, uint8_t * qs) {
    for (int j = 0; j < QK_K; j += 128) {
        for (int l = 0; l < 32; ++l) {
            qs[j / 4 + l] =
                uint8_t(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
        }
    }
}

// Q4_K/Q5_K: six-bit scale ls and min lm of group j into the 12 bytes.
void set_scale_min_k4(int j, uint8_t ls, uint8_t lm, uint8_t * s) {
    if (j < 4) {
        s[j]     = ls;
        s[j + 4] = lm;
    } else {
        s[j + 4] = uint8_t((ls & 0xf) | ((lm & 0xf) << 4));
        s[j - 4] |= uint8_t((ls >> 4) << 6);
        s[j] |= uint8_t((lm >> 4) << 6);
    }
}

// Q3_K: six-bit scale l (biased by 32) of group j into the 12 bytes (zeroed first).
void set_scale_q3_K(int j, int l, uint8_t * s) {
    if (j < 8) {
        s[j] = uint8_t(l & 0xf);
    } else {
        s[j - 8] |= uint8_t((l & 0xf) << 4);
    }
    s[j % 4 + 8] |= uint8_t((l >> 4) << (2 * (j / 4)));
}

float sum_squares(const float * x, int n) {
    float s = 0.0f;
    for (int l = 0; l < n; ++l) {
        s += x[l] * x[l];
    }
    return s;
}

// Levels of Q2_K given its quantized scales: nearest to (x + m) / d.
void requantize_q2_K(const float * x, const block_q2_K & y, uint8_t * L) {
    const float dm = fp16_to_fp32(y.d);
    const float mm = fp16_to_fp32(y.dmin);
    for (int j = 0; j < QK_K / 16; ++j) {
        const float d = dm * float(y.scales[j] & 0xf);
        if (d == 0.0f) {
            continue;
        }
        const float m = mm * float(y.scales[j] >> 4);
        for (int i = 0; i < 16; ++i) {
            L[16 * j + i] = uint8_t(std::clamp(nearest_int((x[16 * j + i] + m) / d), 0, 3));
        }
    }
}

// Q3_K: levels from the quantized scales, then the high bits into hmask
// (the high bit of weight 32 s + m is bit s of hmask[m]) and the low bits.
void finish_q3_K(const float * x, int8_t * L, block_q3_K & y) {
    const float d_all = fp16_to_fp32(y.d);
    for (int j = 0; j < QK_K / 16; ++j) {
        const float d = d_all * float(scale_q3_K(y.scales, j));
        if (d == 0.0f) {
            continue;
        }
        for (int i = 0; i < 16; ++i) {
            L[16 * j + i] = int8_t(std::clamp(nearest_int(x[16 * j + i] / d), -4, 3) + 4);
        }
    }
    std::memset(y.hmask, 0, sizeof(y.hmask));
    uint8_t U[QK_K];
    for (int j = 0; j < QK_K; ++j) {
        int l = L[j];
        if (l > 3) {
            y.hmask[j % 32] |= uint8_t(1u << (j / 32));
            l -= 4;
        }
        U[j] = uint8_t(l);
    }
    pack2(U, y.qs);
}

// Q4_K/Q5_K levels in [0, nmax] from the quantized scales and mins.
void requantize_k4(const float * x, uint16_t dh, uint16_t dminh, const uint8_t * scales, int nmax, uint8_t * L) {
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t sc, m;
        scale_min_k4(j, scales, sc, m);
        const float d = fp16_to_fp32(dh) * float(sc);
        if (d == 0.0f) {
            continue;
        }
        const float dm = fp16_to_fp32(dminh) * float(m);
        for (int i = 0; i < 32; ++i) {
            L[32 * j + i] = uint8_t(std::clamp(nearest_int((x[32 * j + i] + dm) / d), 0, nmax));
        }
    }
}

void pack_q4_K(const uint8_t * L, uint8_t * q) {
    for (int j = 0; j < QK_K; j += 64, q += 32) {
        for (int l = 0; l < 32; ++l) {
            q[l] = uint8_t(L[j + l] | (L[j + l + 32] << 4));
        }
    }
}

// Q5_K: the low nibbles as Q4_K's, the fifth bit of weight 64 p + 32 h + l
// at bit 2 p + h of qh[l].
void pack_q5_K(const uint8_t * L, block_q5_K & y) {
    std::memset(y.qh, 0, sizeof(y.qh));
    uint8_t * ql = y.qs;
    for (int n = 0, p = 0; n < QK_K; n += 64, ++p, ql += 32) {
        for (int j = 0; j < 32; ++j) {
            int l1 = L[n + j], l2 = L[n + j + 32];
            if (l1 > 15) {
                l1 -= 16;
                y.qh[j] |= uint8_t(1u << (2 * p));
            }
            if (l2 > 15) {
                l2 -= 16;
                y.qh[j] |= uint8_t(2u << (2 * p));
            }
            ql[j] = uint8_t(l1 | (l2 << 4));
        }
    }
}

// Q6_K levels (biased by 32) from the quantized scales, then packed: low
// nibbles of weights 128 h + l and + 64 in ql[64 h + l], of + 32 and + 96 in
// ql[64 h + 32 + l]; the top two bits of the four in qh[32 h + l].
void finish_q6_K(const float * x, int8_t * L, block_q6_K & y) {
    const float d_all = fp16_to_fp32(y.d);
    for (int j = 0; j < QK_K / 16; ++j) {
        const float d = d_all * float(y.scales[j]);
        if (d == 0.0f) {
            continue;
        }
        for (int i = 0; i < 16; ++i) {
            L[16 * j + i] = int8_t(std::clamp(nearest_int(x[16 * j + i] / d), -32, 31) + 32);
        }
    }
    for (int j = 0, h = 0; j < QK_K; j += 128, ++h) {
        for (int l = 0; l < 32; ++l) {
            const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
            y.ql[64 * h + l]      = uint8_t((q1 & 0xf) | ((q3 & 0xf) << 4));
            y.ql[64 * h + l + 32] = uint8_t((q2 & 0xf) | ((q4 & 0xf) << 4));
            y.qh[32 * h + l]      = uint8_t((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
        }
    }
}

// ---- ggml_quantize_chunk's fits with an importance matrix ----

void fit_q2_K(const float * x, const float * qw, block_q2_K & y) {
    uint8_t L[QK_K], Laux[16], Ls[16], Lm[16];
    float   scales[16], mins[16], sw[16], w[16];
    const float sigma2 = sum_squares(x, QK_K) / float(QK_K);
    for (int j = 0; j < QK_K / 16; ++j) {
        sw[j] = 0.0f;
        for (int l = 0; l < 16; ++l) {
            w[l] = qw[16 * j + l] * std::sqrt(sigma2 + x[16 * j + l] * x[16 * j + l]);
            sw[j] += w[l];
        }
        scales[j] = quant::fit_affine(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
    }
    const float dm = quant::fit_positive(16, 15, scales, Ls, sw);
    const float mm = quant::fit_positive(16, 15, mins, Lm, sw);
    y.d            = fp32_to_fp16(dm);
    y.dmin         = fp32_to_fp16(mm);
    for (int j = 0; j < 16; ++j) {
        y.scales[j] = uint8_t(Ls[j] | (Lm[j] << 4));
    }
    requantize_q2_K(x, y, L);
    pack2(L, y.qs);
}

void fit_q3_K(const float * x, const float * qw, block_q3_K & y) {
    int8_t L[QK_K], Ls[16];
    float  scales[16], sw[16], w[16];
    const float sigma2 = 2.0f * sum_squares(x, QK_K) / float(QK_K);
    for (int j = 0; j < QK_K / 16; ++j) {
        for (int l = 0; l < 16; ++l) {
            w[l] = qw[16 * j + l] * std::sqrt(sigma2 + x[16 * j + l] * x[16 * j + l]);
        }
        float sumw = 0.0f;
        for (int l = 0; l < 16; ++l) {
            sumw += w[l];
        }
        sw[j]     = sumw;
        scales[j] = quant::fit_symmetric(16, 4, x + 16 * j, L + 16 * j, w);
    }
    std::memset(y.scales, 0, sizeof(y.scales));
    const float d_block = quant::fit_symmetric(16, 32, scales, Ls, sw);
    for (int j = 0; j < 16; ++j) {
        set_scale_q3_K(j, Ls[j], y.scales);
    }
    y.d = fp32_to_fp16(d_block);
    finish_q3_K(x, L, y);
}

// Q4_K and Q5_K with an importance matrix: groups fitted with weights
// qw sqrt(sigma2 + x^2), then the eight scales and mins fitted in six bits.
template <typename Block, int NMAX>
void fit_k4(const float * x, const float * qw, Block & y, uint8_t * L) {
    uint8_t Laux[32], Ls[8], Lm[8];
    float   w[32], sw[8], mins[8], scales[8];
    const float sigma2 = 2.0f * sum_squares(x, QK_K) / float(QK_K);
    for (int j = 0; j < QK_K / 32; ++j) {
        for (int l = 0; l < 32; ++l) {
            w[l] = qw[32 * j + l] * std::sqrt(sigma2 + x[32 * j + l] * x[32 * j + l]);
        }
        float sumw = 0.0f;
        for (int l = 0; l < 32; ++l) {
            sumw += w[l];
        }
        sw[j]     = sumw;
        scales[j] = quant::fit_affine(32, NMAX, x + 32 * j, w, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
    }
    const float d_block = quant::fit_positive(8, 63, scales, Ls, sw);
    const float m_block = quant::fit_positive(8, 63, mins, Lm, sw);
    for (int j = 0; j < 8; ++j) {
        set_scale_min_k4(j, Ls[j], Lm[j], y.scales);
    }
    y.d    = fp32_to_fp16(d_block);
    y.dmin = fp32_to_fp16(m_block);
    requantize_k4(x, y.d, y.dmin, y.scales, NMAX, L);
}

void fit_q4_K(const float * x, const float * qw, block_q4_K & y) {
    uint8_t L[QK_K];
    fit_k4<block_q4_K, 15>(x, qw, y, L);
    pack_q4_K(L, y.qs);
}

void fit_q5_K(const float * x, const float * qw, block_q5_K & y) {
    uint8_t L[QK_K];
    fit_k4<block_q5_K, 31>(x, qw, y, L);
    pack_q5_K(L, y);
}

// Q6_K: the groups fitted with the importance weights themselves (qw NULL:
// with x^2), the super-block scale from the largest group scale.
void q6_K_block(const float * x, const float * qw, block_q6_K & y) {
    int8_t L[QK_K];
    float  scales[16];
    float  max_scale = 0.0f, max_abs_scale = 0.0f;
    for (int ib = 0; ib < QK_K / 16; ++ib) {
        const float scale =
            quant::fit_symmetric(16, 32, x + 16 * ib, L + 16 * ib, qw != nullptr ? qw + 16 * ib : nullptr);
        scales[ib] = scale;
        if (std::fabs(scale) > max_abs_scale) {
            max_abs_scale = std::fabs(scale);
            max_scale     = scale;
        }
    }
    if (max_abs_scale < quant::GROUP_MAX_EPS) {
        std::memset(&y, 0, sizeof(y));
        return;
    }
    const float iscale = -128.0f / max_scale;
    y.d                = fp32_to_fp16(1.0f / iscale);
    for (int ib = 0; ib < QK_K / 16; ++ib) {
        y.scales[ib] = int8_t(std::min(127, nearest_int(iscale * scales[ib])));
    }
    finish_q6_K(x, L, y);
}

void fit_q6_K(const float * x, const float * qw, block_q6_K & y) {
    q6_K_block(x, qw, y);
}

// ggml_quantize_chunk for the K-quants: the reference rows without an
// importance matrix, the fits with one.
template <typename Block, void (*Ref)(const float *, void *, int64_t),
          void (*Fit)(const float * x, const float * qw, Block & y)>
size_t quantize_rows_k(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix) {
    const size_t row_size = sizeof(Block) * size_t(n_per_row / QK_K);
    if (imatrix == nullptr) {
        Ref(src, dst, nrows * n_per_row);
        return size_t(nrows) * row_size;
    }
    for (int64_t r = 0; r < nrows; ++r) {
        const float * x = src + r * n_per_row;
        auto *        y = reinterpret_cast<Block *>(static_cast<char *>(dst) + size_t(r) * row_size);
        for (int64_t b = 0; b < n_per_row / QK_K; ++b) {
            Fit(x + QK_K * b, imatrix + QK_K * b, y[b]);
        }
    }
    return size_t(nrows) * row_size;
}

bool validate_q8_K(const void * data, size_t nblocks, size_t * bad_block, float * bad_value) {
    const auto * x = blocks<block_q8_K>(data);
    for (size_t i = 0; i < nblocks; ++i) {
        if (!std::isfinite(x[i].d)) {
            *bad_block = i;
            *bad_value = x[i].d;
            return false;
        }
    }
    return true;
}

} // namespace

// ---- Q2_K ----

void quantize_row_q2_K_ref(const float * x, void * vy, int64_t k) {
    LOOM_ASSERT(k % QK_K == 0);
    auto * y = blocks<block_q2_K>(vy);
    for (int64_t i = 0; i < k / QK_K; ++i, x += QK_K) {
        uint8_t L[QK_K], Laux[16];
        float   w[16], mins[16], scales[16];
        float   max_scale = 0.0f, max_min = 0.0f;
        for (int j = 0; j < QK_K / 16; ++j) {
            for (int l = 0; l < 16; ++l) {
                w[l] = std::fabs(x[16 * j + l]);
            }
            scales[j] = quant::fit_affine(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
            max_scale = std::max(max_scale, scales[j]);
            max_min   = std::max(max_min, mins[j]);
        }
        if (max_scale > 0.0f) {
            const float iscale = 15.0f / max_scale;
            for (int j = 0; j < 16; ++j) {
                y[i].scales[j] = uint8_t(nearest_int(iscale * scales[j]));
            }
            y[i].d = fp32_to_fp16(max_scale / 15.0f);
        } else {
            std::memset(y[i].scales, 0, sizeof(y[i].scales));
            y[i].d = fp32_to_fp16(0.0f);
        }
        if (max_min > 0.0f) {
            const float iscale = 15.0f / max_min;
            for (int j = 0; j < 16; ++j) {
                y[i].scales[j] |= uint8_t(nearest_int(iscale * mins[j]) << 4);
            }
            y[i].dmin = fp32_to_fp16(max_min / 15.0f);
        } else {
            y[i].dmin = fp32_to_fp16(0.0f);
        }
        requantize_q2_K(x, y[i], L);
        pack2(L, y[i].qs);
    }
}

void dequantize_row_q2_K(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK_K == 0);
    const auto * x = blocks<block_q2_K>(vx);
    for (int64_t i = 0; i < k / QK_K; ++i) {
        const float d   = fp16_to_fp32(x[i].d);
        const float min = fp16_to_fp32(x[i].dmin);
        // Group g (16 weights) lies in byte half g % 2, shift 2 * (g / 2 % 4), part g / 8.
        for (int g = 0; g < 16; ++g) {
            const uint8_t   sc    = x[i].scales[g];
            const float     dl    = d * float(sc & 0xf);
            const float     ml    = min * float(sc >> 4);
            const uint8_t * q     = x[i].qs + 32 * (g / 8) + 16 * (g % 2);
            const int       shift = 2 * (g / 2 % 4);
            for (int l = 0; l < 16; ++l) {
                y[16 * g + l] = dl * float((q[l] >> shift) & 3) - ml;
            }
        }
        y += QK_K;
    }
}

// ---- Q3_K ----

void quantize_row_q3_K_ref(const float * x, void * vy, int64_t k) {
    LOOM_ASSERT(k % QK_K == 0);
    auto * y = blocks<block_q3_K>(vy);
    for (int64_t i = 0; i < k / QK_K; ++i, x += QK_K) {
        int8_t L[QK_K];
        float  scales[16];
        float  max_scale = 0.0f, amax = 0.0f;
        for (int j = 0; j < QK_K / 16; ++j) {
            scales[j] = quant::fit_symmetric_refined(16, 4, x + 16 * j, L + 16 * j);
            if (std::fabs(scales[j]) > amax) {
                amax      = std::fabs(scales[j]);
                max_scale = scales[j];
            }
        }
        std::memset(y[i].scales, 0, sizeof(y[i].scales));
        if (max_scale != 0.0f) {
            const float iscale = -32.0f / max_scale;
            for (int j = 0; j < 16; ++j) {
                const int l = std::clamp(int(int8_t(nearest_int(iscale * scales[j]))), -32, 31) + 32;
                set_scale_q3_K(j, l, y[i].scales);
            }
            y[i].d = fp32_to_fp16(1.0f / iscale);
        } else {
            y[i].d = fp32_to_fp16(0.0f);
        }
        finish_q3_K(x, L, y[i]);
    }
}

void dequantize_row_q3_K(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK_K == 0);
    const auto * x = blocks<block_q3_K>(vx);
    for (int64_t i = 0; i < k / QK_K; ++i) {
        const float d_all = fp16_to_fp32(x[i].d);
        // Group g: low bits as Q2_K's, high bit s = g / 2 of hmask[16 (g % 2) + l].
        for (int g = 0; g < 16; ++g) {
            const float     dl    = d_all * float(scale_q3_K(x[i].scales, g));
            const uint8_t * q     = x[i].qs + 32 * (g / 8) + 16 * (g % 2);
            const uint8_t * hm    = x[i].hmask + 16 * (g % 2);
            const int       shift = 2 * (g / 2 % 4);
            const uint8_t   m     = uint8_t(1u << (g / 2));
            for (int l = 0; l < 16; ++l) {
                y[16 * g + l] = dl * float(int((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
            }
        }
        y += QK_K;
    }
}

// ---- Q4_K and Q5_K ----

namespace {

// The reference fit of Q4_K/Q5_K: groups weighted by rms + |x|, scales and
// mins of the super-block from the largest ones.
template <typename Block>
void ref_k4(const float * x, Block & y, int nmax, float rmin, int nstep, uint8_t * L) {
    uint8_t Laux[32];
    float   w[32], mins[8], scales[8];
    float   max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < QK_K / 32; ++j) {
        const float av_x = std::sqrt(sum_squares(x + 32 * j, 32) / 32.0f);
        for (int l = 0; l < 32; ++l) {
            w[l] = av_x + std::fabs(x[32 * j + l]);
        }
        scales[j] = quant::fit_affine(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
        max_scale = std::max(max_scale, scales[j]);
        max_min   = std::max(max_min, mins[j]);
    }
    const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
    const float inv_min   = max_min > 0.0f ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < QK_K / 32; ++j) {
        const auto ls = uint8_t(nearest_int(inv_scale * scales[j]));
        const auto lm = uint8_t(nearest_int(inv_min * mins[j]));
        set_scale_min_k4(j, std::min<uint8_t>(63, ls), std::min<uint8_t>(63, lm), y.scales);
    }
    y.d    = fp32_to_fp16(max_scale / 63.0f);
    y.dmin = fp32_to_fp16(max_min / 63.0f);
    requantize_k4(x, y.d, y.dmin, y.scales, nmax, L);
}

} // namespace

void quantize_row_q4_K_ref(const float * x, void * vy, int64_t k) {
    LOOM_ASSERT(k % QK_K == 0);
    auto * y = blocks<block_q4_K>(vy);
    for (int64_t i = 0; i < k / QK_K; ++i, x += QK_K) {
        uint8_t L[QK_K];
        ref_k4(x, y[i], 15, -1.0f, 20, L);
        pack_q4_K(L, y[i].qs);
    }
}

void dequantize_row_q4_K(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK_K == 0);
    const auto * x = blocks<block_q4_K>(vx);
    for (int64_t i = 0; i < k / QK_K; ++i) {
        const float d   = fp16_to_fp32(x[i].d);
        const float min = fp16_to_fp32(x[i].dmin);
        for (int g = 0; g < 8; ++g) {
            uint8_t sc, m;
            scale_min_k4(g, x[i].scales, sc, m);
            const float     dl    = d * float(sc);
            const float     ml    = min * float(m);
            const uint8_t * q     = x[i].qs + 32 * (g / 2);
            const int       shift = 4 * (g % 2);
            for (int l = 0; l < 32; ++l) {
                y[32 * g + l] = dl * float((q[l] >> shift) & 0xf) - ml;
            }
        }
        y += QK_K;
    }
}

void quantize_row_q5_K_ref(const float * x, void * vy, int64_t k) {
    LOOM_ASSERT(k % QK_K == 0);
    auto * y = blocks<block_q5_K>(vy);
    for (int64_t i = 0; i < k / QK_K; ++i, x += QK_K) {
        uint8_t L[QK_K];
        ref_k4(x, y[i], 31, -0.5f, 15, L);
        pack_q5_K(L, y[i]);
    }
}

void dequantize_row_q5_K(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK_K == 0);
    const auto * x = blocks<block_q5_K>(vx);
    for (int64_t i = 0; i < k / QK_K; ++i) {
        const float d   = fp16_to_fp32(x[i].d);
        const float min = fp16_to_fp32(x[i].dmin);
        for (int g = 0; g < 8; ++g) {
            uint8_t sc, m;
            scale_min_k4(g, x[i].scales, sc, m);
            const float     dl    = d * float(sc);
            const float     ml    = min * float(m);
            const uint8_t * q     = x[i].qs + 32 * (g / 2);
            const int       shift = 4 * (g % 2);
            const uint8_t   u     = uint8_t(1u << g);
            for (int l = 0; l < 32; ++l) {
                y[32 * g + l] = dl * float(((q[l] >> shift) & 0xf) + ((x[i].qh[l] & u) ? 16 : 0)) - ml;
            }
        }
        y += QK_K;
    }
}

// ---- Q6_K ----

void quantize_row_q6_K_ref(const float * x, void * vy, int64_t k) {
    LOOM_ASSERT(k % QK_K == 0);
    auto * y = blocks<block_q6_K>(vy);
    for (int64_t i = 0; i < k / QK_K; ++i) {
        q6_K_block(x + i * QK_K, nullptr, y[i]);
    }
}

void dequantize_row_q6_K(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK_K == 0);
    const auto * x = blocks<block_q6_K>(vx);
    for (int64_t i = 0; i < k / QK_K; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        for (int h = 0; h < 2; ++h) {
            const uint8_t * ql = x[i].ql + 64 * h;
            const uint8_t * qh = x[i].qh + 32 * h;
            const int8_t *  sc = x[i].scales + 8 * h;
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[128 * h + l]      = d * float(sc[is]) * float(q1);
                y[128 * h + l + 32] = d * float(sc[is + 2]) * float(q2);
                y[128 * h + l + 64] = d * float(sc[is + 4]) * float(q3);
                y[128 * h + l + 96] = d * float(sc[is + 6]) * float(q4);
            }
        }
        y += QK_K;
    }
}

// ---- Q8_K ----

void quantize_row_q8_K_ref(const float * x, void * vy, int64_t k) {
    LOOM_ASSERT(k % QK_K == 0);
    auto * y = blocks<block_q8_K>(vy);
    for (int64_t i = 0; i < k / QK_K; ++i, x += QK_K) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK_K; ++j) {
            if (std::fabs(x[j]) > amax) {
                amax = std::fabs(x[j]);
                max  = x[j];
            }
        }
        if (amax == 0.0f) {
            std::memset(&y[i], 0, sizeof(y[i]));
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < QK_K; ++j) {
            y[i].qs[j] = int8_t(std::min(127, nearest_int(iscale * x[j])));
        }
        for (int g = 0; g < QK_K / 16; ++g) {
            int sum = 0;
            for (int l = 0; l < 16; ++l) {
                sum += y[i].qs[16 * g + l];
            }
            y[i].bsums[g] = int16_t(sum);
        }
        y[i].d = 1.0f / iscale;
    }
}

void dequantize_row_q8_K(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK_K == 0);
    const auto * x = blocks<block_q8_K>(vx);
    for (int64_t i = 0; i < k / QK_K; ++i) {
        for (int j = 0; j < QK_K; ++j) {
            *y++ = x[i].d * float(x[i].qs[j]);
        }
    }
}

void add_k_types(TypeRows & rows) {
    rows[GGML_TYPE_Q2_K] = {"q2_K", QK_K, sizeof(block_q2_K), true, dequantize_row_q2_K, quantize_row_q2_K_ref};
    rows[GGML_TYPE_Q3_K] = {"q3_K", QK_K, sizeof(block_q3_K), true, dequantize_row_q3_K, quantize_row_q3_K_ref};
    rows[GGML_TYPE_Q4_K] = {"q4_K", QK_K, sizeof(block_q4_K), true, dequantize_row_q4_K, quantize_row_q4_K_ref};
    rows[GGML_TYPE_Q5_K] = {"q5_K", QK_K, sizeof(block_q5_K), true, dequantize_row_q5_K, quantize_row_q5_K_ref};
    rows[GGML_TYPE_Q6_K] = {"q6_K", QK_K, sizeof(block_q6_K), true, dequantize_row_q6_K, quantize_row_q6_K_ref};
    // Activations of the K-quant products. As in ggml, the row has no
    // conversions (dequantize_row_q8_K and quantize_row_q8_K_ref exist for
    // the CPU's products); programs that test every type with a to_float
    // would otherwise look for a dot product Q8_K does not have.
    rows[GGML_TYPE_Q8_K] = {"q8_K", QK_K, sizeof(block_q8_K), true, nullptr, nullptr};

    rows[GGML_TYPE_Q2_K].quantize = quantize_rows_k<block_q2_K, quantize_row_q2_K_ref, fit_q2_K>;
    rows[GGML_TYPE_Q3_K].quantize = quantize_rows_k<block_q3_K, quantize_row_q3_K_ref, fit_q3_K>;
    rows[GGML_TYPE_Q4_K].quantize = quantize_rows_k<block_q4_K, quantize_row_q4_K_ref, fit_q4_K>;
    rows[GGML_TYPE_Q5_K].quantize = quantize_rows_k<block_q5_K, quantize_row_q5_K_ref, fit_q5_K>;
    rows[GGML_TYPE_Q6_K].quantize = quantize_rows_k<block_q6_K, quantize_row_q6_K_ref, fit_q6_K>;

    rows[GGML_TYPE_Q2_K].validate = validate_halves<sizeof(block_q2_K), offsetof(block_q2_K, d), offsetof(block_q2_K, dmin)>;
    rows[GGML_TYPE_Q3_K].validate = validate_halves<sizeof(block_q3_K), offsetof(block_q3_K, d)>;
    rows[GGML_TYPE_Q4_K].validate = validate_halves<sizeof(block_q4_K), offsetof(block_q4_K, d), offsetof(block_q4_K, dmin)>;
    rows[GGML_TYPE_Q5_K].validate = validate_halves<sizeof(block_q5_K), offsetof(block_q5_K, d), offsetof(block_q5_K, dmin)>;
    rows[GGML_TYPE_Q6_K].validate = validate_halves<sizeof(block_q6_K), offsetof(block_q6_K, d)>;
    rows[GGML_TYPE_Q8_K].validate = validate_q8_K;
}

} // namespace loom
