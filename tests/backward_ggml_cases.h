#pragma once

// Graphs of the multi-section rope modes, the rope offset, ROPE_BACK and the
// cross-entropy loss on fixed inputs, written against the ggml C API only:
// tests/data/ops-backward/generate.cpp builds them with ggml 0.25.1 to record
// its results, test_ops_backward.cpp with loom to compare (see
// tests/data/ops-backward/README.md).

#include <cstdint>
#include <cstring>
#include <vector>

#include "ggml.h"

namespace backward_ggml_cases {

// Input values in [-1, 1] from integers only, the same on every machine.
inline float input_value(int64_t i, int seed) {
    return float((i * 7919 + int64_t(seed) * 104729) % 2001 - 1000) / 1000.0f;
}

inline ggml_tensor * input(ggml_context * ctx, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, int seed) {
    ggml_tensor * t = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, ne0, ne1, ne2, ne3);
    for (int64_t i = 0; i < ggml_nelements(t); ++i) {
        reinterpret_cast<float *>(t->data)[i] = input_value(i, seed);
    }
    return t;
}

// Positions 0..47 from integers (n values).
inline ggml_tensor * positions(ggml_context * ctx, int64_t n, int seed) {
    ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n);
    for (int64_t i = 0; i < n; ++i) {
        reinterpret_cast<int32_t *>(t->data)[i] = int32_t((i * 37 + seed * 11) % 48);
    }
    return t;
}

// Labels: each row a distribution (positive values divided by their sum).
inline ggml_tensor * labels(ggml_context * ctx, int64_t ne0, int64_t ne1, int seed) {
    ggml_tensor * t = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, ne0, ne1);
    auto *        v = reinterpret_cast<float *>(t->data);
    for (int64_t r = 0; r < ne1; ++r) {
        float sum = 0.0f;
        for (int64_t i = 0; i < ne0; ++i) {
            v[r * ne0 + i] = input_value(r * ne0 + i, seed) + 1.5f;
            sum += v[r * ne0 + i];
        }
        for (int64_t i = 0; i < ne0; ++i) {
            v[r * ne0 + i] /= sum;
        }
    }
    return t;
}

struct Case {
    const char * name;
    ggml_tensor * (*build)(ggml_context * ctx);
};

inline ggml_tensor * multi(ggml_context * c, bool back, int mode, int64_t head, int n_dims, int s0, int s1, int s2,
                           int s3, float freq_scale, float ext_factor, bool factors, int n_offs) {
    const int64_t n_tokens = 5;
    ggml_tensor * a        = input(c, head, 3, n_tokens, 1, 1);
    ggml_tensor * pos      = positions(c, 4 * n_tokens, 2);
    ggml_tensor * ff       = factors ? input(c, head / 2, 1, 1, 1, 3) : nullptr;
    if (ff != nullptr) {
        for (int64_t i = 0; i < ff->ne[0]; ++i) {
            reinterpret_cast<float *>(ff->data)[i] += 1.5f; // in [0.5, 2.5]
        }
    }
    int           sections[4] = {s0, s1, s2, s3};
    ggml_tensor * r           = back ? ggml_rope_multi_back(c, a, pos, ff, n_dims, sections, mode, 64, 10000.0f,
                                                            freq_scale, ext_factor, 1.0f, 32.0f, 1.0f)
                                     : ggml_rope_multi(c, a, pos, ff, n_dims, sections, mode, 64, 10000.0f, freq_scale,
                                                       ext_factor, 1.0f, 32.0f, 1.0f);
    if (n_offs != 0) {
        ggml_rope_set_offset(r, n_offs);
    }
    return r;
}

inline ggml_tensor * neox_offset(ggml_context * c, bool back) {
    ggml_tensor * a   = input(c, 14, 2, 4, 1, 4);
    ggml_tensor * pos = positions(c, 4, 5);
    ggml_tensor * r   = back ? ggml_rope_ext_back(c, a, pos, nullptr, 8, GGML_ROPE_TYPE_NEOX, 64, 10000.0f, 0.5f, 1.0f,
                                                  1.0f, 32.0f, 1.0f)
                             : ggml_rope_ext(c, a, pos, nullptr, 8, GGML_ROPE_TYPE_NEOX, 64, 10000.0f, 0.5f, 1.0f,
                                             1.0f, 32.0f, 1.0f);
    return ggml_rope_set_offset(r, 4);
}

inline const std::vector<Case> & cases() {
    static const std::vector<Case> list = {
        // multi(ctx, back, mode, head, n_dims, sections..., freq_scale, ext_factor, factors, n_offs)
        {"mrope",
         [](ggml_context * c) { return multi(c, false, GGML_ROPE_TYPE_MROPE, 18, 16, 4, 2, 2, 0, 1, 0, false, 0); }},
        {"mrope_back",
         [](ggml_context * c) { return multi(c, true, GGML_ROPE_TYPE_MROPE, 18, 16, 4, 2, 2, 0, 1, 0, false, 0); }},
        {"mrope_yarn_factors_offset",
         [](ggml_context * c) { return multi(c, false, GGML_ROPE_TYPE_MROPE, 20, 12, 2, 2, 1, 1, 0.25f, 1, true, 4); }},
        {"imrope",
         [](ggml_context * c) { return multi(c, false, GGML_ROPE_TYPE_IMROPE, 18, 16, 3, 3, 2, 0, 1, 0, false, 0); }},
        {"imrope_back_offset",
         [](ggml_context * c) { return multi(c, true, GGML_ROPE_TYPE_IMROPE, 22, 16, 2, 3, 3, 0, 0.5f, 1, false, 2); }},
        {"vision",
         [](ggml_context * c) { return multi(c, false, GGML_ROPE_TYPE_VISION, 8, 4, 2, 2, 0, 0, 1, 0, false, 0); }},
        {"vision_back_factors",
         [](ggml_context * c) { return multi(c, true, GGML_ROPE_TYPE_VISION, 12, 6, 3, 3, 0, 0, 1, 0, true, 0); }},
        {"neox_offset", [](ggml_context * c) { return neox_offset(c, false); }},
        {"neox_back_offset", [](ggml_context * c) { return neox_offset(c, true); }},
        {"cross_entropy_loss",
         [](ggml_context * c) { return ggml_cross_entropy_loss(c, input(c, 11, 7, 1, 1, 6), labels(c, 11, 7, 7)); }},
        {"cross_entropy_loss_back",
         [](ggml_context * c) {
             ggml_tensor * g = ggml_new_tensor_1d(c, GGML_TYPE_F32, 1);
             reinterpret_cast<float *>(g->data)[0] = 0.625f;
             return ggml_cross_entropy_loss_back(c, g, input(c, 11, 7, 1, 1, 6), labels(c, 11, 7, 7));
         }},
    };
    return list;
}

// The values of a contiguous F32 tensor.
inline std::vector<float> values(const ggml_tensor * t) {
    std::vector<float> v(size_t(ggml_nelements(t)));
    std::memcpy(v.data(), t->data, v.size() * sizeof(float));
    return v;
}

} // namespace backward_ggml_cases
