// ggml_get_type_traits_cpu: per type, the conversion of f32 activations
// into the type, the dot product against its activation type, and that type
// (ggml's vec_dot_type), as ggml-cpu.h describes them. The dot products are
// the portable ones (kernels/vec.h, kernels/quant_dot.h); the conversions the
// reference ones of the type table.

#include <algorithm>
#include <cstring>

#include "core/common.h"
#include "core/types.h"
#include "core/types/legacy_k.h"
#include "ggml-cpu.h"
#include "kernels/quant_dot.h"
#include "kernels/vec.h"

namespace loom::cpu {

namespace {

using DotFn = float (*)(int64_t n, const void * x, const void * y);

// ggml's vec_dot signature over one of loom's dot products: one row (nrc 1),
// the strides unused.
template <DotFn Dot>
void vec_dot(int n, float * s, size_t bs, const void * x, size_t bx, const void * y, size_t by, int nrc) {
    (void) bs;
    (void) bx;
    (void) by;
    LOOM_REQUIRE(nrc == 1, "vec_dot takes one row at a time here (nrows is 1), nrc = %d", nrc);
    *s = Dot(n, x, y);
}

float dot_f32_any(int64_t n, const void * x, const void * y) {
    return dot_f32(n, static_cast<const float *>(x), static_cast<const float *>(y));
}
float dot_f16_any(int64_t n, const void * x, const void * y) {
    return dot_f16(n, static_cast<const ggml_fp16_t *>(x), static_cast<const ggml_fp16_t *>(y));
}
float dot_bf16_any(int64_t n, const void * x, const void * y) {
    return dot_bf16(n, static_cast<const uint16_t *>(x), static_cast<const uint16_t *>(y));
}
float dot_q4_0_any(int64_t n, const void * x, const void * y) {
    return dot_q4_0_q8_0(n, static_cast<const block_q4_0 *>(x), static_cast<const block_q8_0 *>(y));
}
float dot_q8_0_any(int64_t n, const void * x, const void * y) {
    return dot_q8_0_q8_0(n, static_cast<const block_q8_0 *>(x), static_cast<const block_q8_0 *>(y));
}

void fp32_to_i32(const float * x, void * y, int64_t n) {
    auto * out = static_cast<int32_t *>(y);
    for (int64_t i = 0; i < n; ++i) {
        out[i] = int32_t(x[i]);
    }
}

struct CpuTraitsTable {
    ggml_type_traits_cpu row[GGML_TYPE_COUNT] = {};

    void set(ggml_type t, ggml_vec_dot_t dot, ggml_type dot_type) {
        row[t] = {type_row(t).from_float, dot, dot_type, 1};
    }

    CpuTraitsTable() {
        set(GGML_TYPE_F32, vec_dot<dot_f32_any>, GGML_TYPE_F32);
        set(GGML_TYPE_F16, vec_dot<dot_f16_any>, GGML_TYPE_F16);
        set(GGML_TYPE_BF16, vec_dot<dot_bf16_any>, GGML_TYPE_BF16);
        set(GGML_TYPE_Q4_0, vec_dot<dot_q4_0_any>, GGML_TYPE_Q8_0);
        set(GGML_TYPE_Q8_0, vec_dot<dot_q8_0_any>, GGML_TYPE_Q8_0);
        set(GGML_TYPE_Q4_1, vec_dot<dot_q4_1_q8_1>, GGML_TYPE_Q8_1);
        set(GGML_TYPE_Q5_0, vec_dot<dot_q5_0_q8_0>, GGML_TYPE_Q8_0);
        set(GGML_TYPE_Q5_1, vec_dot<dot_q5_1_q8_1>, GGML_TYPE_Q8_1);
        set(GGML_TYPE_Q2_K, vec_dot<dot_q2_K_q8_K>, GGML_TYPE_Q8_K);
        set(GGML_TYPE_Q3_K, vec_dot<dot_q3_K_q8_K>, GGML_TYPE_Q8_K);
        set(GGML_TYPE_Q4_K, vec_dot<dot_q4_K_q8_K>, GGML_TYPE_Q8_K);
        set(GGML_TYPE_Q5_K, vec_dot<dot_q5_K_q8_K>, GGML_TYPE_Q8_K);
        set(GGML_TYPE_Q6_K, vec_dot<dot_q6_K_q8_K>, GGML_TYPE_Q8_K);
        set(GGML_TYPE_IQ2_XXS, vec_dot<dot_iq2_xxs_q8_K>, GGML_TYPE_Q8_K);
        set(GGML_TYPE_IQ2_XS, vec_dot<dot_iq2_xs_q8_K>, GGML_TYPE_Q8_K);
        set(GGML_TYPE_IQ2_S, vec_dot<dot_iq2_s_q8_K>, GGML_TYPE_Q8_K);
        set(GGML_TYPE_IQ3_XXS, vec_dot<dot_iq3_xxs_q8_K>, GGML_TYPE_Q8_K);
        set(GGML_TYPE_IQ3_S, vec_dot<dot_iq3_s_q8_K>, GGML_TYPE_Q8_K);
        set(GGML_TYPE_IQ1_S, vec_dot<dot_iq1_s_q8_K>, GGML_TYPE_Q8_K);
        set(GGML_TYPE_IQ1_M, vec_dot<dot_iq1_m_q8_K>, GGML_TYPE_Q8_K);
        set(GGML_TYPE_IQ4_NL, vec_dot<dot_iq4_nl_q8_0>, GGML_TYPE_Q8_0);
        set(GGML_TYPE_IQ4_XS, vec_dot<dot_iq4_xs_q8_K>, GGML_TYPE_Q8_K);
        set(GGML_TYPE_TQ1_0, vec_dot<dot_tq1_0_q8_K>, GGML_TYPE_Q8_K);
        set(GGML_TYPE_TQ2_0, vec_dot<dot_tq2_0_q8_K>, GGML_TYPE_Q8_K);
        set(GGML_TYPE_MXFP4, vec_dot<dot_mxfp4_q8_0>, GGML_TYPE_Q8_0);
        set(GGML_TYPE_NVFP4, vec_dot<dot_nvfp4_q8_0>, GGML_TYPE_Q8_0);
        set(GGML_TYPE_Q1_0, vec_dot<dot_q1_0_q8_0>, GGML_TYPE_Q8_0);
        set(GGML_TYPE_Q2_0, vec_dot<dot_q2_0_q8_0>, GGML_TYPE_Q8_0);
        // As in ggml, these take no f32 activations (their encoders search,
        // too slow for activations).
        for (ggml_type t : {GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S, GGML_TYPE_IQ2_S}) {
            row[t].from_float = nullptr;
        }
        // Activation types: a conversion, no dot product of their own (Q8_1
        // names itself as its vec_dot_type, as in ggml).
        row[GGML_TYPE_Q8_1]            = {quantize_row_q8_1_ref, nullptr, GGML_TYPE_Q8_1, 1};
        row[GGML_TYPE_Q8_K].from_float = quantize_row_q8_K_ref;
        row[GGML_TYPE_I32].from_float  = fp32_to_i32;
    }
};

const CpuTraitsTable & cpu_traits() {
    static const CpuTraitsTable t;
    return t;
}

} // namespace

} // namespace loom::cpu

extern "C" {

const ggml_type_traits_cpu * ggml_get_type_traits_cpu(ggml_type type) {
    LOOM_REQUIRE(int(type) >= 0 && int(type) < GGML_TYPE_COUNT, "ggml_type %d is outside [0, %d)", int(type),
                 int(GGML_TYPE_COUNT));
    return &loom::cpu::cpu_traits().row[type];
}

void ggml_cpu_init(void) {
    (void) loom::cpu::cpu_traits();
    (void) ggml_get_type_traits(GGML_TYPE_F32);
}

} // extern "C"
