#include "data.h"

#include <cmath>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

namespace loom_train {

namespace {

// Uniform in [0, 1) from mt19937's standard-fixed numbers (the standard
// distributions differ between libraries).
float uniform(std::mt19937 & rng) {
    return float(rng() >> 8) / 16777216.0f;
}

} // namespace

ggml_opt_dataset_t make_spirals(int classes, int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    // Point i of the spirals goes to position order[i] of the dataset.
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t(0));
    for (int64_t i = n - 1; i > 0; --i) {
        const int64_t j = int64_t(rng() % uint32_t(i + 1));
        std::swap(order[size_t(i)], order[size_t(j)]);
    }

    ggml_opt_dataset_t ds     = ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, 2, classes, n, 1);
    float *            data   = ggml_get_data_f32(ggml_opt_dataset_data(ds));
    float *            labels = ggml_get_data_f32(ggml_opt_dataset_labels(ds));
    const int64_t      per    = (n + classes - 1) / classes;
    const float        two_pi = 6.28318531f;
    for (int64_t i = 0; i < n; ++i) {
        const int64_t c     = i % classes;
        const float   r     = (float(i / classes) + 0.5f) / float(per);
        const float   angle = 3.0f * r + two_pi * float(c) / float(classes) + 0.25f * (uniform(rng) - 0.5f);
        const int64_t k     = order[size_t(i)];
        data[2 * k]         = r * std::cos(angle);
        data[2 * k + 1]     = r * std::sin(angle);
        for (int64_t j = 0; j < classes; ++j) {
            labels[k * classes + j] = j == c ? 1.0f : 0.0f;
        }
    }
    return ds;
}

} // namespace loom_train
