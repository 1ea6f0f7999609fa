#include "quant_dot.h"

#include <algorithm>

#include "core/common.h"
#include "core/fp16.h"
#include "core/types.h"
#include "core/types/i_quants.h"
#include "core/types/iq_tables.h"
#include "core/types/legacy_k.h"
#include "core/types/other.h"

namespace loom::cpu {

namespace {

#include "core/types/fp4_values.inc"

// Weights of a 32-value block as integers: the nibble j (j < 16 low, else
// high) plus the fifth bit for the Q5 types.
inline int nibble(const uint8_t * qs, int j) {
    return j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4;
}
inline int fifth_bit(const uint8_t * qh_bytes, int j) {
    uint32_t qh;
    std::memcpy(&qh, qh_bytes, sizeof(qh));
    return int((qh >> j) & 1u) << 4;
}

// Sum over the 16 groups of 16 of scale(g) * sum(level * q8) for K-quant
// levels already unpacked into q (signed) and one scale per group.
inline int grouped_sum16(const int8_t * q, const int8_t * q8, const int * scale) {
    int total = 0;
    for (int g = 0; g < QK_K / 16; ++g) {
        int s = 0;
        for (int l = 0; l < 16; ++l) {
            s += int(q[16 * g + l]) * int(q8[16 * g + l]);
        }
        total += scale[g] * s;
    }
    return total;
}

} // namespace

float dot_q4_1_q8_1(int64_t n, const void * vx, const void * vy) {
    LOOM_ASSERT(n % QK8_1 == 0);
    const auto * x   = static_cast<const block_q4_1 *>(vx);
    const auto * y   = static_cast<const block_q8_1 *>(vy);
    float        sum = 0.0f;
    for (int64_t b = 0; b < n / QK8_1; ++b) {
        int isum = 0;
        for (int j = 0; j < 32; ++j) {
            isum += nibble(x[b].qs, j) * int(y[b].qs[j]);
        }
        sum += fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d) * float(isum) +
               fp16_to_fp32(x[b].m) * fp16_to_fp32(y[b].s);
    }
    return sum;
}

float dot_q5_0_q8_0(int64_t n, const void * vx, const void * vy) {
    LOOM_ASSERT(n % QK8_0 == 0);
    const auto * x   = static_cast<const block_q5_0 *>(vx);
    const auto * y   = static_cast<const block_q8_0 *>(vy);
    float        sum = 0.0f;
    for (int64_t b = 0; b < n / QK8_0; ++b) {
        int isum = 0;
        for (int j = 0; j < 32; ++j) {
            isum += ((nibble(x[b].qs, j) | fifth_bit(x[b].qh, j)) - 16) * int(y[b].qs[j]);
        }
        sum += fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d) * float(isum);
    }
    return sum;
}

float dot_q5_1_q8_1(int64_t n, const void * vx, const void * vy) {
    LOOM_ASSERT(n % QK8_1 == 0);
    const auto * x   = static_cast<const block_q5_1 *>(vx);
    const auto * y   = static_cast<const block_q8_1 *>(vy);
    float        sum = 0.0f;
    for (int64_t b = 0; b < n / QK8_1; ++b) {
        int isum = 0;
        for (int j = 0; j < 32; ++j) {
            isum += (nibble(x[b].qs, j) | fifth_bit(x[b].qh, j)) * int(y[b].qs[j]);
        }
        sum += fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d) * float(isum) +
               fp16_to_fp32(x[b].m) * fp16_to_fp32(y[b].s);
    }
    return sum;
}

float dot_q2_K_q8_K(int64_t n, const void * vx, const void * vy) {
    LOOM_ASSERT(n % QK_K == 0);
    const auto * x   = static_cast<const block_q2_K *>(vx);
    const auto * y   = static_cast<const block_q8_K *>(vy);
    float        sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int8_t q[QK_K];
        int    scale[16];
        int    mins = 0;
        for (int g = 0; g < 16; ++g) {
            const uint8_t * qs    = x[i].qs + 32 * (g / 8) + 16 * (g % 2);
            const int       shift = 2 * (g / 2 % 4);
            for (int l = 0; l < 16; ++l) {
                q[16 * g + l] = int8_t((qs[l] >> shift) & 3);
            }
            scale[g] = x[i].scales[g] & 0xf;
            mins += int(y[i].bsums[g]) * (x[i].scales[g] >> 4);
        }
        const int isum = grouped_sum16(q, y[i].qs, scale);
        sum += y[i].d * fp16_to_fp32(x[i].d) * float(isum) - y[i].d * fp16_to_fp32(x[i].dmin) * float(mins);
    }
    return sum;
}

float dot_q3_K_q8_K(int64_t n, const void * vx, const void * vy) {
    LOOM_ASSERT(n % QK_K == 0);
    const auto * x   = static_cast<const block_q3_K *>(vx);
    const auto * y   = static_cast<const block_q8_K *>(vy);
    float        sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int8_t q[QK_K];
        int    scale[16];
        for (int g = 0; g < 16; ++g) {
            const uint8_t * qs    = x[i].qs + 32 * (g / 8) + 16 * (g % 2);
            const uint8_t * hm    = x[i].hmask + 16 * (g % 2);
            const int       shift = 2 * (g / 2 % 4);
            const uint8_t   m     = uint8_t(1u << (g / 2));
            for (int l = 0; l < 16; ++l) {
                q[16 * g + l] = int8_t(((qs[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
            }
            scale[g] = scale_q3_K(x[i].scales, g);
        }
        sum += fp16_to_fp32(x[i].d) * y[i].d * float(grouped_sum16(q, y[i].qs, scale));
    }
    return sum;
}

namespace {

// Q4_K and Q5_K: levels of group g (32 values) as the low nibbles, plus 16
// for the fifth bit when qh is given.
template <typename Block>
float dot_k4(int64_t n, const Block * x, const block_q8_K * y, const uint8_t * (*qh_of)(const Block &)) {
    LOOM_ASSERT(n % QK_K == 0);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const uint8_t * qh   = qh_of != nullptr ? qh_of(x[i]) : nullptr;
        int             isum = 0, msum = 0;
        for (int g = 0; g < 8; ++g) {
            uint8_t sc, m;
            scale_min_k4(g, x[i].scales, sc, m);
            const uint8_t * q     = x[i].qs + 32 * (g / 2);
            const int       shift = 4 * (g % 2);
            int             s     = 0;
            for (int l = 0; l < 32; ++l) {
                int v = (q[l] >> shift) & 0xf;
                if (qh != nullptr && (qh[l] & (1u << g)) != 0) {
                    v += 16;
                }
                s += v * int(y[i].qs[32 * g + l]);
            }
            isum += int(sc) * s;
            msum += int(m) * (int(y[i].bsums[2 * g]) + int(y[i].bsums[2 * g + 1]));
        }
        sum += fp16_to_fp32(x[i].d) * y[i].d * float(isum) - fp16_to_fp32(x[i].dmin) * y[i].d * float(msum);
    }
    return sum;
}

const uint8_t * qh_q5_K(const block_q5_K & b) {
    return b.qh;
}

} // namespace

float dot_q4_K_q8_K(int64_t n, const void * vx, const void * vy) {
    return dot_k4<block_q4_K>(n, static_cast<const block_q4_K *>(vx), static_cast<const block_q8_K *>(vy), nullptr);
}

float dot_q5_K_q8_K(int64_t n, const void * vx, const void * vy) {
    return dot_k4<block_q5_K>(n, static_cast<const block_q5_K *>(vx), static_cast<const block_q8_K *>(vy), qh_q5_K);
}

float dot_q6_K_q8_K(int64_t n, const void * vx, const void * vy) {
    LOOM_ASSERT(n % QK_K == 0);
    const auto * x   = static_cast<const block_q6_K *>(vx);
    const auto * y   = static_cast<const block_q8_K *>(vy);
    float        sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int8_t q[QK_K];
        int    scale[16];
        for (int h = 0; h < 2; ++h) {
            const uint8_t * ql = x[i].ql + 64 * h;
            const uint8_t * qh = x[i].qh + 32 * h;
            for (int l = 0; l < 32; ++l) {
                q[128 * h + l]      = int8_t(((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32);
                q[128 * h + l + 32] = int8_t(((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32);
                q[128 * h + l + 64] = int8_t(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                q[128 * h + l + 96] = int8_t(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
        }
        for (int g = 0; g < 16; ++g) {
            scale[g] = x[i].scales[g];
        }
        sum += fp16_to_fp32(x[i].d) * y[i].d * float(grouped_sum16(q, y[i].qs, scale));
    }
    return sum;
}

float dot_iq4_nl_q8_0(int64_t n, const void * vx, const void * vy) {
    LOOM_ASSERT(n % QK8_0 == 0);
    const auto * x   = static_cast<const block_iq4_nl *>(vx);
    const auto * y   = static_cast<const block_q8_0 *>(vy);
    float        sum = 0.0f;
    for (int64_t b = 0; b < n / QK8_0; ++b) {
        int isum = 0;
        for (int j = 0; j < 32; ++j) {
            isum += int(iq::kvalues_iq4nl[nibble(x[b].qs, j)]) * int(y[b].qs[j]);
        }
        sum += fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d) * float(isum);
    }
    return sum;
}

float dot_mxfp4_q8_0(int64_t n, const void * vx, const void * vy) {
    LOOM_ASSERT(n % QK8_0 == 0);
    const auto * x   = static_cast<const block_mxfp4 *>(vx);
    const auto * y   = static_cast<const block_q8_0 *>(vy);
    float        sum = 0.0f;
    for (int64_t b = 0; b < n / QK8_0; ++b) {
        int isum = 0;
        for (int j = 0; j < 32; ++j) {
            isum += int(kvalues_fp4[nibble(x[b].qs, j)]) * int(y[b].qs[j]);
        }
        // The doubled E2M1 values meet the halved E8M0 scale.
        sum += e8m0_to_fp32_half(x[b].e) * fp16_to_fp32(y[b].d) * float(isum);
    }
    return sum;
}

float dot_iq4_xs_q8_K(int64_t n, const void * vx, const void * vy) {
    LOOM_ASSERT(n % QK_K == 0);
    const auto * x   = static_cast<const block_iq4_xs *>(vx);
    const auto * y   = static_cast<const block_q8_K *>(vy);
    float        sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int isum = 0;
        for (int g = 0; g < QK_K / 32; ++g) {
            // Six-bit scale: low nibble from scales_l, two high bits from scales_h; offset 32.
            const int ls = ((x[i].scales_l[g / 2] >> (4 * (g % 2))) & 0xf) | (((x[i].scales_h >> (2 * g)) & 3) << 4);
            int       s  = 0;
            for (int j = 0; j < 32; ++j) {
                s += int(iq::kvalues_iq4nl[nibble(x[i].qs + 16 * g, j)]) * int(y[i].qs[32 * g + j]);
            }
            isum += (ls - 32) * s;
        }
        sum += fp16_to_fp32(x[i].d) * y[i].d * float(isum);
    }
    return sum;
}

namespace {

// The dot product of a row of X with a row of Y by decoding both, a chunk
// of whole blocks of each at a time, and summing in double: the portable
// vec_dot of the types without a dot product of their own (NVFP4, Q1_0,
// Q2_0), against ggml's vec_dot_type.
template <ggml_type X, ggml_type Y>
float dot_decoded(int64_t n, const void * x, const void * y) {
    constexpr int64_t k_chunk = 256;
    const TypeInfo &  tx      = type_row(X);
    const TypeInfo &  ty      = type_row(Y);
    // Q8_K, an activation type only, has no to_float in the type table.
    ggml_to_float_t   y_float = Y == GGML_TYPE_Q8_K ? dequantize_row_q8_K : ty.to_float;
    LOOM_ASSERT(tx.to_float != nullptr && y_float != nullptr);
    LOOM_ASSERT(k_chunk % tx.blck_size == 0 && k_chunk % ty.blck_size == 0);
    float       fx[k_chunk], fy[k_chunk];
    double      sum = 0.0;
    const auto * px = static_cast<const char *>(x);
    const auto * py = static_cast<const char *>(y);
    for (int64_t i = 0; i < n; i += k_chunk) {
        const int64_t m = std::min(k_chunk, n - i);
        tx.to_float(px + (i / tx.blck_size) * int64_t(tx.type_size), fx, m);
        y_float(py + (i / ty.blck_size) * int64_t(ty.type_size), fy, m);
        for (int64_t j = 0; j < m; ++j) {
            sum += double(fx[j]) * double(fy[j]);
        }
    }
    return float(sum);
}

} // namespace

float dot_nvfp4_q8_0(int64_t n, const void * x, const void * y) {
    return dot_decoded<GGML_TYPE_NVFP4, GGML_TYPE_Q8_0>(n, x, y);
}
float dot_q1_0_q8_0(int64_t n, const void * x, const void * y) {
    return dot_decoded<GGML_TYPE_Q1_0, GGML_TYPE_Q8_0>(n, x, y);
}
float dot_q2_0_q8_0(int64_t n, const void * x, const void * y) {
    return dot_decoded<GGML_TYPE_Q2_0, GGML_TYPE_Q8_0>(n, x, y);
}

} // namespace loom::cpu
