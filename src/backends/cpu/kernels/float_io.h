#pragma once

// Reading and writing F32/F16/BF16 values that may sit any number of bytes
// apart (views with a permuted dimension 0). Shared by the element-wise,
// reduction and copy kernels; unit-stride runs go through the type's row
// converters, which SIMD versions will replace.

#include <cstdint>
#include <cstring>

#include "backends/cpu/simd/kernel_table.h"
#include "core/fp16.h"
#include "core/types.h"
#include "ggml.h"

namespace loom::cpu {

inline bool is_float_type(ggml_type t) {
    return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16;
}

inline float load_float(ggml_type type, const char * p) {
    uint16_t h;
    float    f;
    switch (type) {
        case GGML_TYPE_F16: std::memcpy(&h, p, 2); return fp16_to_fp32(h);
        case GGML_TYPE_BF16: std::memcpy(&h, p, 2); return bf16_to_fp32(h);
        case GGML_TYPE_F32: case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1:
        case GGML_TYPE_Q8_0: case GGML_TYPE_Q8_1: case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K:
        case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K: case GGML_TYPE_Q8_K: case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS:
        case GGML_TYPE_IQ3_XXS: case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ2_S:
        case GGML_TYPE_IQ4_XS: case GGML_TYPE_I8: case GGML_TYPE_I16: case GGML_TYPE_I32: case GGML_TYPE_I64:
        case GGML_TYPE_F64: case GGML_TYPE_IQ1_M: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0: case GGML_TYPE_MXFP4:
        case GGML_TYPE_NVFP4: case GGML_TYPE_Q1_0: case GGML_TYPE_Q2_0: case GGML_TYPE_COUNT:
            std::memcpy(&f, p, 4); return f;
    }
    std::memcpy(&f, p, 4);
    return f;
}

inline void store_float(ggml_type type, char * p, float v) {
    uint16_t h;
    switch (type) {
        case GGML_TYPE_F16: h = fp32_to_fp16(v); std::memcpy(p, &h, 2); break;
        case GGML_TYPE_BF16: h = fp32_to_bf16(v); std::memcpy(p, &h, 2); break;
        case GGML_TYPE_F32: case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1:
        case GGML_TYPE_Q8_0: case GGML_TYPE_Q8_1: case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K:
        case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K: case GGML_TYPE_Q8_K: case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS:
        case GGML_TYPE_IQ3_XXS: case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ2_S:
        case GGML_TYPE_IQ4_XS: case GGML_TYPE_I8: case GGML_TYPE_I16: case GGML_TYPE_I32: case GGML_TYPE_I64:
        case GGML_TYPE_F64: case GGML_TYPE_IQ1_M: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0: case GGML_TYPE_MXFP4:
        case GGML_TYPE_NVFP4: case GGML_TYPE_Q1_0: case GGML_TYPE_Q2_0: case GGML_TYPE_COUNT:
            std::memcpy(p, &v, 4); break;
    }
}

// n values `stride` bytes apart, to and from a float array. Unit-stride
// runs of halves go through the kernel table's converters (same bits as the
// core's, see kernel_table.h).
inline void load_floats(ggml_type type, const char * p, size_t stride, int64_t n, float * out) {
    const TypeInfo & ti = type_info(type, "cpu kernel");
    if (stride == ti.type_size) {
        if (type == GGML_TYPE_F16) {
            best_kernels().fp16_to_fp32_row(reinterpret_cast<const ggml_fp16_t *>(p), out, n);
        } else if (type == GGML_TYPE_BF16) {
            best_kernels().bf16_to_fp32_row(reinterpret_cast<const uint16_t *>(p), out, n);
        } else {
            ti.to_float(p, out, n);
        }
        return;
    }
    for (int64_t i = 0; i < n; ++i) {
        out[i] = load_float(type, p + size_t(i) * stride);
    }
}

inline void store_floats(ggml_type type, const float * in, char * p, size_t stride, int64_t n) {
    const TypeInfo & ti = type_info(type, "cpu kernel");
    if (stride == ti.type_size) {
        if (type == GGML_TYPE_F16) {
            best_kernels().fp32_to_fp16_row(in, reinterpret_cast<ggml_fp16_t *>(p), n);
        } else {
            ti.from_float(in, p, n);
        }
        return;
    }
    for (int64_t i = 0; i < n; ++i) {
        store_float(type, p + size_t(i) * stride, in[i]);
    }
}

} // namespace loom::cpu
