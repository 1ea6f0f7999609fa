#pragma once

// Fixed cases of the recurrent, state-space and mixture-of-experts
// operators, written against the ggml C API only, so that the same code
// builds them in generate.cpp (linked with ggml 0.25.1, which wrote
// expected.txt) and in tests/test_ops_recurrent.cpp (linked with loom).
// Every input is a fixed function of its element index.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ggml.h"

namespace refcases {

// lo + (hi - lo) * (1 + sin(0.61 j + 1.7 tag + 0.3)) / 2 for element j.
inline float value(int tag, int64_t j, float lo, float hi) {
    return lo + (hi - lo) * 0.5f * float(1.0 + std::sin(0.61 * double(j) + 1.7 * double(tag) + 0.3));
}

// A new tensor of type (F32, or a quantized type filled through
// ggml_quantize_chunk) with the values of tag in [lo, hi].
inline ggml_tensor * input(ggml_context * ctx, ggml_type type, int tag, int64_t ne0, int64_t ne1, int64_t ne2,
                           int64_t ne3, float lo = -1.0f, float hi = 1.0f) {
    ggml_tensor *      t = ggml_new_tensor_4d(ctx, type, ne0, ne1, ne2, ne3);
    std::vector<float> v(size_t(ggml_nelements(t)));
    for (size_t j = 0; j < v.size(); ++j) v[j] = value(tag, int64_t(j), lo, hi);
    if (type == GGML_TYPE_F32) {
        std::memcpy(t->data, v.data(), v.size() * sizeof(float));
    } else {
        ggml_quantize_chunk(type, v.data(), t->data, 0, ggml_nrows(t), ne0, nullptr);
    }
    return t;
}

inline ggml_tensor * ids(ggml_context * ctx, int64_t ne0, int64_t ne1, const std::vector<int32_t> & v) {
    ggml_tensor * t = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, ne0, ne1);
    std::memcpy(t->data, v.data(), v.size() * sizeof(int32_t));
    return t;
}

constexpr int kCount = 17;

inline const char * name(int i) {
    static const char * const names[kCount] = {
        "mul_mat_id_f32", "mul_mat_id_q8_0", "ssm_conv",        "ssm_scan_mamba1", "ssm_scan_mamba2_k2",
        "rwkv_wkv6",      "gated_linear_attn", "rwkv_wkv7",     "gated_delta_net_scalar_k2",
        "gated_delta_net_vector", "solve_tri", "ssm_scan_mamba2", "lightning_indexer", "dsv4_hc_comb",
        "dsv4_hc_pre",    "dsv4_hc_pre_gated", "dsv4_hc_post",
    };
    return names[i];
}

// Case i's result, its inputs filled (ctx must allocate data).
inline ggml_tensor * build(ggml_context * ctx, int i) {
    const ggml_type F = GGML_TYPE_F32;
    switch (i) {
        case 0:
            return ggml_mul_mat_id(ctx, input(ctx, F, 1, 8, 5, 3, 1), input(ctx, F, 2, 8, 2, 3, 1),
                                   ids(ctx, 4, 3, {0, 2, 1, 2, 1, 1, 0, 2, 2, 0, 0, 1}));
        case 1:
            return ggml_mul_mat_id(ctx, input(ctx, GGML_TYPE_Q8_0, 3, 64, 7, 4, 1), input(ctx, F, 4, 64, 1, 3, 1),
                                   ids(ctx, 2, 3, {3, 0, 1, 3, 2, 2}));
        case 2: return ggml_ssm_conv(ctx, input(ctx, F, 5, 3 + 4, 6, 2, 1), input(ctx, F, 6, 4, 6, 1, 1));
        case 3:
            return ggml_ssm_scan(ctx, input(ctx, F, 7, 4, 6, 1, 3), input(ctx, F, 8, 6, 1, 3, 2),
                                 input(ctx, F, 9, 1, 3, 2, 1, -3.0f, 1.0f), input(ctx, F, 10, 4, 1, 1, 1, -2.0f, -0.1f),
                                 input(ctx, F, 11, 4, 1, 3, 2), input(ctx, F, 12, 4, 1, 3, 2), ids(ctx, 2, 1, {2, 0}),
                                 1);
        case 4:
        case 11:
            return ggml_ssm_scan(ctx, input(ctx, F, 13, 5, 3, 4, 2), input(ctx, F, 14, 3, 4, 4, 2),
                                 input(ctx, F, 15, 4, 4, 2, 1, -3.0f, 1.0f), input(ctx, F, 16, 1, 4, 1, 1, -2.0f, -0.1f),
                                 input(ctx, F, 17, 5, 2, 4, 2), input(ctx, F, 18, 5, 2, 4, 2), ids(ctx, 2, 1, {1, 0}),
                                 i == 4 ? 2 : 1);
        case 5:
            return ggml_rwkv_wkv6(ctx, input(ctx, F, 19, 4, 2, 6, 1), input(ctx, F, 20, 4, 2, 6, 1),
                                  input(ctx, F, 21, 4, 2, 6, 1), input(ctx, F, 22, 4, 2, 1, 1),
                                  input(ctx, F, 23, 4, 2, 6, 1, 0.5f, 1.0f), input(ctx, F, 24, 32, 2, 1, 1));
        case 6:
            return ggml_gated_linear_attn(ctx, input(ctx, F, 25, 4, 2, 6, 1), input(ctx, F, 26, 4, 2, 6, 1),
                                          input(ctx, F, 27, 4, 2, 6, 1), input(ctx, F, 28, 4, 2, 6, 1, 0.5f, 1.0f),
                                          input(ctx, F, 29, 32, 2, 1, 1), 0.5f);
        case 7:
            // ggml's vector path takes S in whole steps of its registers: RWKV-7's 64.
            return ggml_rwkv_wkv7(ctx, input(ctx, F, 30, 64, 1, 4, 1), input(ctx, F, 31, 64, 1, 4, 1, 0.5f, 1.0f),
                                  input(ctx, F, 32, 64, 1, 4, 1, -0.3f, 0.3f), input(ctx, F, 33, 64, 1, 4, 1),
                                  input(ctx, F, 34, 64, 1, 4, 1, -0.05f, 0.05f),
                                  input(ctx, F, 35, 64, 1, 4, 1, -0.05f, 0.05f), input(ctx, F, 36, 64 * 64, 2, 1, 1));
        case 8:
            return ggml_gated_delta_net(ctx, input(ctx, F, 37, 4, 1, 3, 1, -0.5f, 0.5f),
                                        input(ctx, F, 38, 4, 1, 3, 1, -0.5f, 0.5f), input(ctx, F, 39, 4, 2, 3, 2),
                                        input(ctx, F, 40, 1, 2, 3, 2, -1.0f, 0.0f),
                                        input(ctx, F, 41, 1, 2, 3, 2, 0.0f, 1.0f), input(ctx, F, 42, 4, 4, 2, 2), 2);
        case 9:
            return ggml_gated_delta_net(ctx, input(ctx, F, 43, 4, 2, 3, 1, -0.5f, 0.5f),
                                        input(ctx, F, 44, 4, 2, 3, 1, -0.5f, 0.5f), input(ctx, F, 45, 4, 2, 3, 1),
                                        input(ctx, F, 46, 4, 2, 3, 1, -1.0f, 0.0f),
                                        input(ctx, F, 47, 1, 2, 3, 1, 0.0f, 1.0f), input(ctx, F, 48, 4, 4, 2, 1), 1);
        case 10: {
            // Values in [1, 2] everywhere: a well-scaled lower triangle, an upper one to be ignored.
            return ggml_solve_tri(ctx, input(ctx, F, 49, 5, 5, 2, 1, 1.0f, 2.0f), input(ctx, F, 50, 3, 5, 2, 1), true,
                                  true, false);
        }
        case 12: {
            ggml_tensor *      mask = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, 6, 3, 1, 1);
            std::vector<float> m(18);
            for (size_t j = 0; j < m.size(); ++j) m[j] = j % 5 == 4 ? -INFINITY : value(54, int64_t(j), -1.0f, 1.0f);
            ggml_fp32_to_fp16_row(m.data(), static_cast<ggml_fp16_t *>(mask->data), int64_t(m.size()));
            return ggml_lightning_indexer(ctx, input(ctx, F, 51, 8, 4, 3, 2), input(ctx, GGML_TYPE_F16, 52, 8, 1, 6, 2),
                                          input(ctx, F, 53, 4, 3, 1, 2, 0.0f, 0.5f), mask);
        }
        case 13:
            return ggml_dsv4_hc_comb(ctx, input(ctx, F, 55, 24, 3, 1, 1, -2.0f, 2.0f), input(ctx, F, 56, 3, 1, 1, 1),
                                     input(ctx, F, 57, 24, 1, 1, 1), 1e-6f, 3);
        case 14: return ggml_dsv4_hc_pre(ctx, input(ctx, F, 58, 5, 4, 3, 1), input(ctx, F, 59, 4, 3, 1, 1));
        case 15:
            return ggml_dsv4_hc_pre_gated(ctx, input(ctx, F, 60, 5, 4, 3, 1), input(ctx, F, 61, 5, 4, 3, 1, -3.0f, 3.0f),
                                          0.7f);
        case 16:
            return ggml_dsv4_hc_post(ctx, input(ctx, F, 62, 5, 3, 1, 1), input(ctx, F, 63, 5, 4, 3, 1),
                                     input(ctx, F, 64, 4, 3, 1, 1), input(ctx, F, 65, 4, 4, 3, 1));
        default: return nullptr;
    }
}

} // namespace refcases
