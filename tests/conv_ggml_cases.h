#pragma once

// Graphs of the convolution, pooling and resampling operators on fixed
// inputs, written against the ggml C API only: tests/data/ops-conv/generate.cpp
// builds them with ggml 0.25.1 to record its results, test_ops_conv.cpp with
// loom to compare (see tests/data/ops-conv/README.md).

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ggml.h"

namespace conv_ggml_cases {

// Input values in [-1, 1] from integers only, the same on every machine.
inline float input_value(int64_t i, int seed) {
    return float((i * 7919 + int64_t(seed) * 104729) % 2001 - 1000) / 1000.0f;
}

inline ggml_tensor * input(ggml_context * ctx, ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                           int seed) {
    ggml_tensor * t = ggml_new_tensor_4d(ctx, type, ne0, ne1, ne2, ne3);
    for (int64_t i = 0; i < ggml_nelements(t); ++i) {
        const float v = input_value(i, seed);
        if (type == GGML_TYPE_F16) {
            reinterpret_cast<ggml_fp16_t *>(t->data)[i] = ggml_fp32_to_fp16(v);
        } else {
            reinterpret_cast<float *>(t->data)[i] = v;
        }
    }
    return t;
}

struct Case {
    const char * name;
    ggml_tensor * (*build)(ggml_context * ctx);
};

inline ggml_tensor * in32(ggml_context * c, int64_t a, int64_t b, int64_t d, int64_t e, int seed) {
    return input(c, GGML_TYPE_F32, a, b, d, e, seed);
}

inline const std::vector<Case> & cases() {
    static const std::vector<Case> list = {
        {"conv_1d", [](ggml_context * c) { return ggml_conv_1d(c, in32(c, 5, 3, 4, 1, 1), in32(c, 17, 3, 2, 1, 2), 2, 1, 1); }},
        {"conv_2d",
         [](ggml_context * c) {
             return ggml_conv_2d(c, in32(c, 3, 3, 3, 5, 3), in32(c, 10, 9, 3, 2, 4), 1, 2, 1, 1, 1, 1);
         }},
        {"conv_2d_direct",
         [](ggml_context * c) {
             return ggml_conv_2d_direct(c, in32(c, 3, 2, 4, 3, 5), in32(c, 9, 8, 4, 2, 6), 2, 1, 1, 0, 1, 2);
         }},
        {"conv_2d_dw_direct",
         [](ggml_context * c) {
             return ggml_conv_2d_dw_direct(c, in32(c, 3, 3, 1, 5, 7), in32(c, 12, 9, 5, 2, 8), 2, 1, 1, 1, 1, 2);
         }},
        {"conv_3d_direct",
         [](ggml_context * c) {
             return ggml_conv_3d_direct(c, in32(c, 3, 2, 2, 6, 9), in32(c, 7, 6, 5, 4, 10), 2, 1, 2, 1, 0, 1, 1, 2, 1,
                                        2, 2, 3);
         }},
        {"conv_transpose_1d",
         [](ggml_context * c) {
             return ggml_conv_transpose_1d(c, in32(c, 4, 3, 5, 1, 11), in32(c, 9, 5, 1, 1, 12), 2, 0, 1);
         }},
        {"conv_transpose_2d",
         [](ggml_context * c) {
             return ggml_conv_transpose_2d_p0(c, in32(c, 3, 2, 4, 3, 13), in32(c, 5, 7, 3, 2, 14), 2);
         }},
        {"im2col_f16",
         [](ggml_context * c) {
             return ggml_im2col(c, in32(c, 3, 2, 3, 1, 15), in32(c, 9, 7, 3, 2, 16), 2, 1, 1, 1, 1, 2, true,
                                GGML_TYPE_F16);
         }},
        {"col2im_1d", [](ggml_context * c) { return ggml_col2im_1d(c, in32(c, 12, 9, 1, 1, 17), 2, 3, 1); }},
        {"pool_1d_avg",
         [](ggml_context * c) { return ggml_pool_1d(c, in32(c, 17, 3, 2, 1, 18), GGML_OP_POOL_AVG, 3, 2, 1); }},
        {"pool_1d_max",
         [](ggml_context * c) { return ggml_pool_1d(c, in32(c, 17, 3, 2, 1, 19), GGML_OP_POOL_MAX, 4, 3, 2); }},
        {"pool_2d_avg",
         [](ggml_context * c) {
             return ggml_pool_2d(c, in32(c, 11, 10, 3, 1, 20), GGML_OP_POOL_AVG, 3, 3, 2, 2, 1, 1);
         }},
        {"pool_2d_max",
         [](ggml_context * c) {
             return ggml_pool_2d(c, in32(c, 11, 10, 3, 1, 21), GGML_OP_POOL_MAX, 2, 3, 1, 2, 0.5f, 1.5f);
         }},
        {"upscale_nearest",
         [](ggml_context * c) { return ggml_interpolate(c, in32(c, 5, 4, 3, 2, 22), 13, 7, 5, 1, GGML_SCALE_MODE_NEAREST); }},
        {"upscale_bilinear",
         [](ggml_context * c) { return ggml_interpolate(c, in32(c, 5, 4, 3, 2, 23), 13, 7, 3, 2, GGML_SCALE_MODE_BILINEAR); }},
        {"upscale_bicubic",
         [](ggml_context * c) { return ggml_interpolate(c, in32(c, 5, 4, 3, 2, 24), 13, 7, 3, 2, GGML_SCALE_MODE_BICUBIC); }},
        {"upscale_bilinear_corners",
         [](ggml_context * c) {
             return ggml_interpolate(c, in32(c, 5, 4, 3, 2, 25), 9, 3, 3, 2,
                                     uint32_t(GGML_SCALE_MODE_BILINEAR) | GGML_SCALE_FLAG_ALIGN_CORNERS);
         }},
        {"upscale_bicubic_corners",
         [](ggml_context * c) {
             return ggml_interpolate(c, in32(c, 5, 4, 3, 2, 26), 11, 9, 3, 2,
                                     uint32_t(GGML_SCALE_MODE_BICUBIC) | GGML_SCALE_FLAG_ALIGN_CORNERS);
         }},
        {"upscale_bilinear_antialias_down",
         [](ggml_context * c) {
             return ggml_interpolate(c, in32(c, 17, 13, 2, 1, 27), 5, 4, 2, 1,
                                     uint32_t(GGML_SCALE_MODE_BILINEAR) | GGML_SCALE_FLAG_ANTIALIAS);
         }},
        {"upscale_bilinear_antialias_up",
         [](ggml_context * c) {
             return ggml_interpolate(c, in32(c, 5, 4, 2, 1, 28), 9, 11, 2, 1,
                                     uint32_t(GGML_SCALE_MODE_BILINEAR) | GGML_SCALE_FLAG_ANTIALIAS);
         }},
        {"win_part", [](ggml_context * c) { return ggml_win_part(c, in32(c, 5, 10, 8, 1, 29), 4); }},
        {"win_unpart", [](ggml_context * c) { return ggml_win_unpart(c, in32(c, 5, 4, 4, 6, 30), 10, 8, 4); }},
        {"get_rel_pos",
         [](ggml_context * c) { return ggml_get_rel_pos(c, input(c, GGML_TYPE_F16, 6, 9, 1, 1, 31), 5, 5); }},
        {"add_rel_pos",
         [](ggml_context * c) {
             return ggml_add_rel_pos(c, in32(c, 9, 8, 3, 1, 32), in32(c, 3, 4, 2, 3, 33), in32(c, 3, 4, 2, 3, 34));
         }},
    };
    return list;
}

// The values of a contiguous F32 or F16 result.
inline std::vector<float> values(const ggml_tensor * t) {
    std::vector<float> v(size_t(ggml_nelements(t)));
    for (size_t i = 0; i < v.size(); ++i) {
        v[i] = t->type == GGML_TYPE_F16 ? ggml_fp16_to_fp32(reinterpret_cast<const ggml_fp16_t *>(t->data)[i])
                                        : reinterpret_cast<const float *>(t->data)[i];
    }
    return v;
}

} // namespace conv_ggml_cases
