#include "vec.h"

#include <array>
#include <cmath>
#include <cstring>

#include "core/common.h"
#include "backends/cpu/simd/kernel_table.h"
#include "core/fp16.h"
#include "quant_dot.h"

namespace loom::cpu {

namespace {

// Independent partial sums, one per lane, summed pairwise at the end: the
// shape a vector unit of LANES floats computes, and shorter dependency
// chains than a single running sum.
constexpr int LANES = 8;

inline float reduce_lanes(float (&acc)[LANES]) {
    for (int w = LANES / 2; w > 0; w /= 2) {
        for (int j = 0; j < w; ++j) {
            acc[j] += acc[j + w];
        }
    }
    return acc[0];
}

template <typename Load>
inline float dot_lanes(int64_t n, Load load) {
    float         acc[LANES] = {};
    const int64_t nv         = n - n % LANES;
    for (int64_t i = 0; i < nv; i += LANES) {
        for (int j = 0; j < LANES; ++j) {
            acc[j] += load(i + j);
        }
    }
    for (int64_t i = nv; i < n; ++i) {
        acc[i - nv] += load(i);
    }
    return reduce_lanes(acc);
}

float dot_f32_v(int64_t n, const void * x, const void * y) {
    return dot_f32(n, static_cast<const float *>(x), static_cast<const float *>(y));
}
float dot_f16_v(int64_t n, const void * x, const void * y) {
    return dot_f16(n, static_cast<const ggml_fp16_t *>(x), static_cast<const ggml_fp16_t *>(y));
}
float dot_bf16_v(int64_t n, const void * x, const void * y) {
    return dot_bf16(n, static_cast<const uint16_t *>(x), static_cast<const uint16_t *>(y));
}
float dot_q8_0_v(int64_t n, const void * x, const void * y) {
    return dot_q8_0_q8_0(n, static_cast<const block_q8_0 *>(x), static_cast<const block_q8_0 *>(y));
}
float dot_q4_0_v(int64_t n, const void * x, const void * y) {
    return dot_q4_0_q8_0(n, static_cast<const block_q4_0 *>(x), static_cast<const block_q8_0 *>(y));
}

// The selected table's dot products behind the untyped signature.
float best_dot_f32(int64_t n, const void * x, const void * y) {
    return best_kernels().dot_f32(n, static_cast<const float *>(x), static_cast<const float *>(y));
}
float best_dot_f16(int64_t n, const void * x, const void * y) {
    return best_kernels().dot_f16(n, static_cast<const ggml_fp16_t *>(x), static_cast<const ggml_fp16_t *>(y));
}
float best_dot_bf16(int64_t n, const void * x, const void * y) {
    return best_kernels().dot_bf16(n, static_cast<const uint16_t *>(x), static_cast<const uint16_t *>(y));
}
float best_dot_q8_0(int64_t n, const void * x, const void * y) {
    return best_kernels().dot_q8_0_q8_0(n, static_cast<const block_q8_0 *>(x), static_cast<const block_q8_0 *>(y));
}
float best_dot_q4_0(int64_t n, const void * x, const void * y) {
    return best_kernels().dot_q4_0_q8_0(n, static_cast<const block_q4_0 *>(x), static_cast<const block_q8_0 *>(y));
}

} // namespace

float dot_f32(int64_t n, const float * x, const float * y) {
    return dot_lanes(n, [&](int64_t i) { return x[i] * y[i]; });
}

float dot_f16(int64_t n, const ggml_fp16_t * x, const ggml_fp16_t * y) {
    return dot_lanes(n, [&](int64_t i) { return fp16_to_fp32(x[i]) * fp16_to_fp32(y[i]); });
}

float dot_bf16(int64_t n, const uint16_t * x, const uint16_t * y) {
    return dot_lanes(n, [&](int64_t i) { return bf16_to_fp32(x[i]) * bf16_to_fp32(y[i]); });
}

float dot_q8_0_q8_0(int64_t n, const block_q8_0 * x, const block_q8_0 * y) {
    LOOM_ASSERT(n % QK8_0 == 0);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK8_0; ++b) {
        int32_t isum = 0;
        for (int j = 0; j < QK8_0; ++j) {
            isum += int32_t(x[b].qs[j]) * int32_t(y[b].qs[j]);
        }
        sum += float(isum) * (fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d));
    }
    return sum;
}

float dot_q4_0_q8_0(int64_t n, const block_q4_0 * x, const block_q8_0 * y) {
    static_assert(QK4_0 == QK8_0, "q4_0 and q8_0 blocks must line up");
    LOOM_ASSERT(n % QK4_0 == 0);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK4_0; ++b) {
        int32_t isum = 0;
        for (int j = 0; j < QK4_0 / 2; ++j) {
            const int32_t lo = int32_t(x[b].qs[j] & 0x0f) - 8;
            const int32_t hi = int32_t(x[b].qs[j] >> 4) - 8;
            isum += lo * int32_t(y[b].qs[j]) + hi * int32_t(y[b].qs[j + QK4_0 / 2]);
        }
        sum += float(isum) * (fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d));
    }
    return sum;
}

namespace {

// Note [Dot rows]
// The one list of the CPU's dot products: per weight type, the portable dot
// product against a row of its activation type, and that type (ggml's
// vec_dot and vec_dot_type: ggml_get_type_traits_cpu reads them here).
// F32, F16, BF16, Q8_0 and Q4_0 have entries of their own in the kernel
// tables (a dot product and a gemv: vec_dot_info); the other block types
// have gemv_quant's.
struct DotRow {
    ggml_type             operand = GGML_TYPE_COUNT; // GGML_TYPE_COUNT where dot is null
    VecDotFn              dot     = nullptr;
    VecDotFn              best    = nullptr; // the selected table's dot product, for the types of vec_dot_info
    GemvFn KernelTable::* gemv    = nullptr; // the kernel table's gemv, for the same types
};

constexpr std::array<DotRow, GGML_TYPE_COUNT> k_dot_rows = [] {
    std::array<DotRow, GGML_TYPE_COUNT> r{};
    r[GGML_TYPE_F32]  = {GGML_TYPE_F32, dot_f32_v, best_dot_f32, &KernelTable::gemv_f32};
    r[GGML_TYPE_F16]  = {GGML_TYPE_F16, dot_f16_v, best_dot_f16, &KernelTable::gemv_f16};
    r[GGML_TYPE_BF16] = {GGML_TYPE_BF16, dot_bf16_v, best_dot_bf16, &KernelTable::gemv_bf16};
    r[GGML_TYPE_Q8_0] = {GGML_TYPE_Q8_0, dot_q8_0_v, best_dot_q8_0, &KernelTable::gemv_q8_0};
    r[GGML_TYPE_Q4_0] = {GGML_TYPE_Q8_0, dot_q4_0_v, best_dot_q4_0, &KernelTable::gemv_q4_0};
    auto quant        = [&r](ggml_type t, ggml_type operand, VecDotFn dot) { r[t] = {operand, dot}; };
    quant(GGML_TYPE_Q4_1, GGML_TYPE_Q8_1, dot_q4_1_q8_1);
    quant(GGML_TYPE_Q5_0, GGML_TYPE_Q8_0, dot_q5_0_q8_0);
    quant(GGML_TYPE_Q5_1, GGML_TYPE_Q8_1, dot_q5_1_q8_1);
    quant(GGML_TYPE_Q2_K, GGML_TYPE_Q8_K, dot_q2_K_q8_K);
    quant(GGML_TYPE_Q3_K, GGML_TYPE_Q8_K, dot_q3_K_q8_K);
    quant(GGML_TYPE_Q4_K, GGML_TYPE_Q8_K, dot_q4_K_q8_K);
    quant(GGML_TYPE_Q5_K, GGML_TYPE_Q8_K, dot_q5_K_q8_K);
    quant(GGML_TYPE_Q6_K, GGML_TYPE_Q8_K, dot_q6_K_q8_K);
    quant(GGML_TYPE_IQ2_XXS, GGML_TYPE_Q8_K, dot_iq2_xxs_q8_K);
    quant(GGML_TYPE_IQ2_XS, GGML_TYPE_Q8_K, dot_iq2_xs_q8_K);
    quant(GGML_TYPE_IQ2_S, GGML_TYPE_Q8_K, dot_iq2_s_q8_K);
    quant(GGML_TYPE_IQ3_XXS, GGML_TYPE_Q8_K, dot_iq3_xxs_q8_K);
    quant(GGML_TYPE_IQ3_S, GGML_TYPE_Q8_K, dot_iq3_s_q8_K);
    quant(GGML_TYPE_IQ1_S, GGML_TYPE_Q8_K, dot_iq1_s_q8_K);
    quant(GGML_TYPE_IQ1_M, GGML_TYPE_Q8_K, dot_iq1_m_q8_K);
    quant(GGML_TYPE_IQ4_NL, GGML_TYPE_Q8_0, dot_iq4_nl_q8_0);
    quant(GGML_TYPE_IQ4_XS, GGML_TYPE_Q8_K, dot_iq4_xs_q8_K);
    quant(GGML_TYPE_TQ1_0, GGML_TYPE_Q8_K, dot_tq1_0_q8_K);
    quant(GGML_TYPE_TQ2_0, GGML_TYPE_Q8_K, dot_tq2_0_q8_K);
    quant(GGML_TYPE_MXFP4, GGML_TYPE_Q8_0, dot_mxfp4_q8_0);
    // No SIMD products (quant_operand_type gives none): ggml's Q8_0.
    quant(GGML_TYPE_NVFP4, GGML_TYPE_Q8_0, dot_nvfp4_q8_0);
    quant(GGML_TYPE_Q1_0, GGML_TYPE_Q8_0, dot_q1_0_q8_0);
    quant(GGML_TYPE_Q2_0, GGML_TYPE_Q8_0, dot_q2_0_q8_0);
    return r;
}();

// The row of a weight type; an empty row for a value that is not a type.
const DotRow & dot_row(ggml_type t) {
    static constexpr DotRow none{};
    return int(t) >= 0 && int(t) < GGML_TYPE_COUNT ? k_dot_rows[size_t(t)] : none;
}

} // namespace

VecDotInfo vec_dot_info(ggml_type weight_type) {
    const DotRow & r = dot_row(weight_type);
    return r.gemv != nullptr ? VecDotInfo{r.operand, r.dot} : VecDotInfo{GGML_TYPE_COUNT, nullptr};
}

VecDotInfo vec_dot_info(ggml_type weight_type, bool use_ref) {
    VecDotInfo info = vec_dot_info(weight_type);
    if (!use_ref && info.dot != nullptr) {
        info.dot = dot_row(weight_type).best;
    }
    return info;
}

VecDotInfo row_dot_info(ggml_type t) {
    const DotRow & r = dot_row(t);
    return {r.operand, r.dot};
}

GemvFn table_gemv(const KernelTable & kt, ggml_type t) {
    const DotRow & r = dot_row(t);
    return r.gemv != nullptr ? kt.*r.gemv : kt.gemv_quant[t];
}

namespace {

// The reference quantizers of the activation types.
void quantize_block_row(ggml_type type, const float * x, void * y, int64_t n) {
    switch (type) {
        case GGML_TYPE_Q8_0: quantize_row_q8_0_ref(x, y, n); return;
        case GGML_TYPE_Q8_1: quantize_row_q8_1_ref(x, y, n); return;
        case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0:
        case GGML_TYPE_Q5_1: case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K:
        case GGML_TYPE_Q6_K: case GGML_TYPE_Q8_K: case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ3_XXS:
        case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ4_XS:
        case GGML_TYPE_I8: case GGML_TYPE_I16: case GGML_TYPE_I32: case GGML_TYPE_I64: case GGML_TYPE_F64:
        case GGML_TYPE_IQ1_M: case GGML_TYPE_BF16: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0: case GGML_TYPE_MXFP4:
        case GGML_TYPE_NVFP4: case GGML_TYPE_Q1_0: case GGML_TYPE_Q2_0: case GGML_TYPE_COUNT:
            quantize_row_q8_K_ref(x, y, n); return;
    }
}

} // namespace

void convert_f32_row(ggml_type type, const char * src, size_t stride, void * dst, int64_t n) {
    if (stride == sizeof(float)) {
        const auto * x = reinterpret_cast<const float *>(src);
        switch (type) {
            case GGML_TYPE_F32:
                std::memcpy(dst, x, size_t(n) * sizeof(float));
                return;
            case GGML_TYPE_Q8_0:
            case GGML_TYPE_Q8_1:
            case GGML_TYPE_Q8_K:
                quantize_block_row(type, x, dst, n);
                return;
            case GGML_TYPE_F16: case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1:
            case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K:
            case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ3_XXS: case GGML_TYPE_IQ1_S:
            case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ4_XS: case GGML_TYPE_I8:
            case GGML_TYPE_I16: case GGML_TYPE_I32: case GGML_TYPE_I64: case GGML_TYPE_F64: case GGML_TYPE_IQ1_M:
            case GGML_TYPE_BF16: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0: case GGML_TYPE_MXFP4: case GGML_TYPE_NVFP4:
            case GGML_TYPE_Q1_0: case GGML_TYPE_Q2_0: case GGML_TYPE_COUNT:
                break;
        }
    }
    auto load = [&](int64_t i) {
        float v;
        std::memcpy(&v, src + size_t(i) * stride, sizeof(v));
        return v;
    };
    switch (type) {
        case GGML_TYPE_F32: {
            auto * y = static_cast<float *>(dst);
            for (int64_t i = 0; i < n; ++i) {
                y[i] = load(i);
            }
            return;
        }
        case GGML_TYPE_F16: {
            auto * y = static_cast<ggml_fp16_t *>(dst);
            for (int64_t i = 0; i < n; ++i) {
                y[i] = fp32_to_fp16(load(i));
            }
            return;
        }
        case GGML_TYPE_BF16: {
            auto * y = static_cast<uint16_t *>(dst);
            for (int64_t i = 0; i < n; ++i) {
                y[i] = fp32_to_bf16(load(i));
            }
            return;
        }
        case GGML_TYPE_Q8_0:
        case GGML_TYPE_Q8_1:
        case GGML_TYPE_Q8_K: {
            // Gather one block at a time so the reference quantizer sees a
            // contiguous row without scratch memory.
            const int64_t bs = ggml_blck_size(type);
            const size_t  bb = ggml_type_size(type);
            LOOM_ASSERT(n % bs == 0);
            float block[QK_K];
            for (int64_t b = 0; b < n / bs; ++b) {
                for (int64_t j = 0; j < bs; ++j) {
                    block[j] = load(b * bs + j);
                }
                quantize_block_row(type, block, static_cast<char *>(dst) + size_t(b) * bb, bs);
            }
            return;
        }
        case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1: case GGML_TYPE_Q2_K:
        case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K: case GGML_TYPE_IQ2_XXS:
        case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ3_XXS: case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ4_NL:
        case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ4_XS: case GGML_TYPE_I8: case GGML_TYPE_I16:
        case GGML_TYPE_I32: case GGML_TYPE_I64: case GGML_TYPE_F64: case GGML_TYPE_IQ1_M: case GGML_TYPE_TQ1_0:
        case GGML_TYPE_TQ2_0: case GGML_TYPE_MXFP4: case GGML_TYPE_NVFP4: case GGML_TYPE_Q1_0: case GGML_TYPE_Q2_0:
        case GGML_TYPE_COUNT:
            LOOM_ASSERT(false && "convert_f32_row: unsupported operand type");
    }
}

void mad_f32(int64_t n, float * y, const float * x, float s) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] += x[i] * s;
    }
}

void mad_f16(int64_t n, float * y, const ggml_fp16_t * x, float s) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] += fp16_to_fp32(x[i]) * s;
    }
}

void mask_terms(const KernelTable & kt, const void * m, bool f16, float slope, int64_t n, float * out) {
    if (f16) {
        kt.fp16_to_fp32_row(static_cast<const ggml_fp16_t *>(m), out, n);
        kt.scale_f32(n, out, slope, out);
    } else {
        kt.scale_f32(n, static_cast<const float *>(m), slope, out);
    }
}

float max_f32(int64_t n, const float * x) {
    float m = -INFINITY;
    for (int64_t i = 0; i < n; ++i) {
        m = x[i] > m ? x[i] : m;
    }
    return m;
}

double exp_sub_sum_f32(int64_t n, float * y, float max) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const float e = std::exp(y[i] - max);
        y[i]          = e;
        sum += double(e);
    }
    return sum;
}

float alibi_slope(float max_bias, int64_t n_head, int64_t h) {
    if (!(max_bias > 0.0f)) {
        return 1.0f;
    }
    const uint32_t n_log2 = 1u << uint32_t(std::floor(std::log2(double(n_head))));
    if (uint32_t(h) < n_log2) {
        const float m0 = std::pow(2.0f, -max_bias / float(n_log2));
        return std::pow(m0, float(h + 1));
    }
    const float m1 = std::pow(2.0f, -(max_bias / 2.0f) / float(n_log2));
    return std::pow(m1, float(2 * (int64_t(h) - int64_t(n_log2)) + 1));
}

} // namespace loom::cpu
