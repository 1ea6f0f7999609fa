// Q4_1, Q5_0, Q5_1 and Q8_1: block layouts bit-identical to ggml's, their
// reference codecs, and ggml_quantize_chunk's quantizers of the 32-value
// types (Q4_0 ... Q5_1), which fit each block to the importance matrix when
// one is given.

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/common.h"
#include "core/fp16.h"
#include "core/types.h"
#include "core/types/legacy_k.h"
#include "core/types/quant_search.h"

namespace loom {

namespace {

// Scale and offset of an affine 32-value block: (d, min) over the range.
struct Range32 {
    float min = FLT_MAX, max = -FLT_MAX;
};
Range32 range_of(const float * x, int n) {
    Range32 r;
    for (int j = 0; j < n; ++j) {
        r.min = x[j] < r.min ? x[j] : r.min;
        r.max = x[j] > r.max ? x[j] : r.max;
    }
    return r;
}

// The value of largest magnitude with its sign (the first one on ties).
float signed_absmax(const float * x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; ++j) {
        if (amax < std::fabs(x[j])) {
            amax = std::fabs(x[j]);
            max  = x[j];
        }
    }
    return max;
}

// Five-bit levels of 32 weights into the nibbles and the bit field qh.
void pack5(const uint8_t * L, uint8_t * qs, uint8_t * qh_bytes) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
        qs[j] = uint8_t((L[j] & 0x0f) | ((L[j + 16] & 0x0f) << 4));
        qh |= uint32_t((L[j] & 0x10u) >> 4) << j;
        qh |= uint32_t((L[j + 16] & 0x10u) >> 4) << (j + 16);
    }
    std::memcpy(qh_bytes, &qh, sizeof(qh));
}

// The fifth bits of weights j and j + 16 as 0 or 16.
void high_bits5(const uint8_t * qh_bytes, int j, int & h0, int & h1) {
    uint32_t qh;
    std::memcpy(&qh, qh_bytes, sizeof(qh));
    h0 = int(((qh >> j) << 4) & 0x10);
    h1 = int((qh >> (j + 12)) & 0x10);
}

// Mean square of a row: the spread the importance weights are scaled by.
float row_sigma2(const float * x, int64_t n) {
    float sum_x2 = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
        sum_x2 += x[j] * x[j];
    }
    return sum_x2 / float(n);
}

void block_weights(const float * x, const float * qw, float sigma2, float * w) {
    for (int j = 0; j < 32; ++j) {
        w[j] = qw[j] * std::sqrt(sigma2 + x[j] * x[j]);
    }
}

// ggml_quantize_chunk for the 32-value types: without an importance matrix
// the reference rows; with one, row by row, each block fitted by `fit`.
template <typename Block, void (*Ref)(const float *, void *, int64_t),
          void (*Fit)(const float * x, const float * w, Block & b)>
size_t quantize_rows32(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix) {
    const size_t row_size = sizeof(Block) * size_t(n_per_row / 32);
    if (imatrix == nullptr) {
        Ref(src, dst, nrows * n_per_row);
        return size_t(nrows) * row_size;
    }
    for (int64_t r = 0; r < nrows; ++r) {
        const float * x      = src + r * n_per_row;
        auto *        y      = reinterpret_cast<Block *>(static_cast<char *>(dst) + size_t(r) * row_size);
        const float   sigma2 = row_sigma2(x, n_per_row);
        for (int64_t b = 0; b < n_per_row / 32; ++b) {
            float w[32];
            block_weights(x + 32 * b, imatrix + 32 * b, sigma2, w);
            Fit(x + 32 * b, w, y[b]);
        }
    }
    return size_t(nrows) * row_size;
}

void fit_q4_0(const float * x, const float * w, block_q4_0 & b) {
    int8_t L[32];
    b.d = fp32_to_fp16(quant::fit_symmetric(32, 8, x, L, w));
    for (int j = 0; j < 16; ++j) {
        b.qs[j] = uint8_t(L[j] | (L[j + 16] << 4));
    }
}

void fit_q4_1(const float * x, const float * w, block_q4_1 & b) {
    uint8_t L[32], Laux[32];
    float   min;
    const float d = quant::fit_affine(32, 15, x, w, L, &min, Laux, -0.9f, 0.05f, 36, false);
    b.d           = fp32_to_fp16(d);
    b.m           = fp32_to_fp16(-min);
    for (int j = 0; j < 16; ++j) {
        b.qs[j] = uint8_t(L[j] | (L[j + 16] << 4));
    }
}

void fit_q5_0(const float * x, const float * w, block_q5_0 & b) {
    int8_t L[32];
    b.d = fp32_to_fp16(quant::fit_symmetric(32, 16, x, L, w));
    pack5(reinterpret_cast<const uint8_t *>(L), b.qs, b.qh);
}

void fit_q5_1(const float * x, const float * w, block_q5_1 & b) {
    uint8_t L[32], Laux[32];
    float   min;
    const float d = quant::fit_affine(32, 31, x, w, L, &min, Laux, -0.9f, 0.05f, 36, false);
    b.d           = fp32_to_fp16(d);
    b.m           = fp32_to_fp16(-min);
    pack5(L, b.qs, b.qh);
}

void q4_0_ref(const float * x, void * y, int64_t k) {
    quantize_row_q4_0_ref(x, y, k);
}

size_t quantize_q8_0_rows(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float *) {
    quantize_row_q8_0_ref(src, dst, nrows * n_per_row);
    return size_t(nrows) * sizeof(block_q8_0) * size_t(n_per_row / QK8_0);
}

} // namespace

void quantize_row_q4_1_ref(const float * x, void * vy, int64_t k) {
    LOOM_ASSERT(k % QK4_1 == 0);
    auto * y = static_cast<block_q4_1 *>(vy);
    for (int64_t b = 0; b < k / QK4_1; ++b) {
        const float * xb = x + b * QK4_1;
        const Range32 r  = range_of(xb, QK4_1);
        const float   d  = (r.max - r.min) / 15.0f;
        const float   id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d           = fp32_to_fp16(d);
        y[b].m           = fp32_to_fp16(r.min);
        for (int j = 0; j < 16; ++j) {
            const auto q0 = uint8_t(std::min(15, int(int8_t((xb[j] - r.min) * id + 0.5f))));
            const auto q1 = uint8_t(std::min(15, int(int8_t((xb[j + 16] - r.min) * id + 0.5f))));
            y[b].qs[j]    = uint8_t(q0 | (q1 << 4));
        }
    }
}

void dequantize_row_q4_1(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK4_1 == 0);
    const auto * x = static_cast<const block_q4_1 *>(vx);
    for (int64_t b = 0; b < k / QK4_1; ++b) {
        const float d = fp16_to_fp32(x[b].d);
        const float m = fp16_to_fp32(x[b].m);
        for (int j = 0; j < 16; ++j) {
            y[b * 32 + j]      = float(x[b].qs[j] & 0x0f) * d + m;
            y[b * 32 + j + 16] = float(x[b].qs[j] >> 4) * d + m;
        }
    }
}

void quantize_row_q5_0_ref(const float * x, void * vy, int64_t k) {
    LOOM_ASSERT(k % QK5_0 == 0);
    auto * y = static_cast<block_q5_0 *>(vy);
    for (int64_t b = 0; b < k / QK5_0; ++b) {
        const float * xb = x + b * QK5_0;
        const float   d  = signed_absmax(xb, QK5_0) / -16.0f;
        const float   id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d           = fp32_to_fp16(d);
        uint8_t L[32];
        for (int j = 0; j < 32; ++j) {
            L[j] = uint8_t(std::min(31, int(int8_t(xb[j] * id + 16.5f))));
        }
        pack5(L, y[b].qs, y[b].qh);
    }
}

void dequantize_row_q5_0(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK5_0 == 0);
    const auto * x = static_cast<const block_q5_0 *>(vx);
    for (int64_t b = 0; b < k / QK5_0; ++b) {
        const float d = fp16_to_fp32(x[b].d);
        for (int j = 0; j < 16; ++j) {
            int h0, h1;
            high_bits5(x[b].qh, j, h0, h1);
            y[b * 32 + j]      = float(((x[b].qs[j] & 0x0f) | h0) - 16) * d;
            y[b * 32 + j + 16] = float(((x[b].qs[j] >> 4) | h1) - 16) * d;
        }
    }
}

void quantize_row_q5_1_ref(const float * x, void * vy, int64_t k) {
    LOOM_ASSERT(k % QK5_1 == 0);
    auto * y = static_cast<block_q5_1 *>(vy);
    for (int64_t b = 0; b < k / QK5_1; ++b) {
        const float * xb = x + b * QK5_1;
        const Range32 r  = range_of(xb, QK5_1);
        const float   d  = (r.max - r.min) / 31.0f;
        const float   id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d           = fp32_to_fp16(d);
        y[b].m           = fp32_to_fp16(r.min);
        uint8_t L[32];
        for (int j = 0; j < 32; ++j) {
            L[j] = uint8_t(int((xb[j] - r.min) * id + 0.5f));
        }
        pack5(L, y[b].qs, y[b].qh);
    }
}

void dequantize_row_q5_1(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK5_1 == 0);
    const auto * x = static_cast<const block_q5_1 *>(vx);
    for (int64_t b = 0; b < k / QK5_1; ++b) {
        const float d = fp16_to_fp32(x[b].d);
        const float m = fp16_to_fp32(x[b].m);
        for (int j = 0; j < 16; ++j) {
            int h0, h1;
            high_bits5(x[b].qh, j, h0, h1);
            y[b * 32 + j]      = float((x[b].qs[j] & 0x0f) | h0) * d + m;
            y[b * 32 + j + 16] = float((x[b].qs[j] >> 4) | h1) * d + m;
        }
    }
}

void quantize_row_q8_1_ref(const float * x, void * vy, int64_t k) {
    LOOM_ASSERT(k % QK8_1 == 0);
    auto * y = static_cast<block_q8_1 *>(vy);
    for (int64_t b = 0; b < k / QK8_1; ++b) {
        const float * xb   = x + b * QK8_1;
        float         amax = 0.0f;
        for (int j = 0; j < QK8_1; ++j) {
            amax = std::max(amax, std::fabs(xb[j]));
        }
        const float d  = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d         = fp32_to_fp16(d);
        int sum        = 0;
        for (int j = 0; j < QK8_1; ++j) {
            y[b].qs[j] = int8_t(std::round(xb[j] * id));
            sum += y[b].qs[j];
        }
        y[b].s = fp32_to_fp16(float(sum) * d);
    }
}

void add_legacy_types(TypeRows & rows) {
    rows[GGML_TYPE_Q4_1] = {"q4_1", QK4_1, sizeof(block_q4_1), true, dequantize_row_q4_1, quantize_row_q4_1_ref};
    rows[GGML_TYPE_Q5_0] = {"q5_0", QK5_0, sizeof(block_q5_0), true, dequantize_row_q5_0, quantize_row_q5_0_ref};
    rows[GGML_TYPE_Q5_1] = {"q5_1", QK5_1, sizeof(block_q5_1), true, dequantize_row_q5_1, quantize_row_q5_1_ref};
    // Activations only: ggml has no dequantization of Q8_1, and
    // ggml_validate_row_data rejects its data.
    rows[GGML_TYPE_Q8_1] = {"q8_1", QK8_1, sizeof(block_q8_1), true, nullptr, quantize_row_q8_1_ref};

    rows[GGML_TYPE_Q4_0].quantize = quantize_rows32<block_q4_0, q4_0_ref, fit_q4_0>;
    rows[GGML_TYPE_Q4_1].quantize = quantize_rows32<block_q4_1, quantize_row_q4_1_ref, fit_q4_1>;
    rows[GGML_TYPE_Q5_0].quantize = quantize_rows32<block_q5_0, quantize_row_q5_0_ref, fit_q5_0>;
    rows[GGML_TYPE_Q5_1].quantize = quantize_rows32<block_q5_1, quantize_row_q5_1_ref, fit_q5_1>;
    rows[GGML_TYPE_Q8_0].quantize = quantize_q8_0_rows; // the importance matrix does not change Q8_0

    rows[GGML_TYPE_Q4_0].validate = validate_halves<sizeof(block_q4_0), 0>;
    rows[GGML_TYPE_Q8_0].validate = validate_halves<sizeof(block_q8_0), 0>;
    rows[GGML_TYPE_Q4_1].validate = validate_halves<sizeof(block_q4_1), 0, 2>;
    rows[GGML_TYPE_Q5_0].validate = validate_halves<sizeof(block_q5_0), 0>;
    rows[GGML_TYPE_Q5_1].validate = validate_halves<sizeof(block_q5_1), 0, 2>;
}

} // namespace loom
