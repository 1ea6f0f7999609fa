#include "sampler.h"

#include <algorithm>
#include <cmath>

namespace loom_run {

Sampler::Sampler(const SamplerParams & params) : params_(params), rng_(params.seed) {}

int32_t Sampler::argmax(std::span<const float> logits) {
    int32_t best = 0;
    for (size_t i = 1; i < logits.size(); ++i) {
        // NaN never wins: a comparison with it is false.
        if (logits[i] > logits[size_t(best)]) {
            best = int32_t(i);
        }
    }
    return best;
}

int32_t Sampler::sample(std::span<const float> logits) {
    if (params_.temp <= 0.0f || params_.top_k == 1) {
        return argmax(logits);
    }

    // Top-k: the k largest logits, largest first.
    candidates_.clear();
    candidates_.reserve(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) {
        if (!std::isnan(logits[i])) {
            candidates_.emplace_back(logits[i], int32_t(i));
        }
    }
    if (candidates_.empty()) {
        return argmax(logits);
    }
    auto larger = [](const std::pair<float, int32_t> & a, const std::pair<float, int32_t> & b) {
        return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    size_t k = candidates_.size();
    if (params_.top_k > 0 && size_t(params_.top_k) < k) {
        k = size_t(params_.top_k);
    }
    std::partial_sort(candidates_.begin(), candidates_.begin() + ptrdiff_t(k), candidates_.end(), larger);
    candidates_.resize(k);

    // Top-p on the distribution at temperature 1: the shortest prefix whose
    // probability reaches p (always at least one token).
    const float max_logit = candidates_.front().first;
    if (params_.top_p < 1.0f) {
        probs_.resize(k);
        double sum = 0;
        for (size_t i = 0; i < k; ++i) {
            probs_[i] = std::exp(candidates_[i].first - max_logit);
            sum += probs_[i];
        }
        double cum  = 0;
        size_t keep = k;
        for (size_t i = 0; i < k; ++i) {
            cum += probs_[i] / sum;
            if (cum >= double(params_.top_p)) {
                keep = i + 1;
                break;
            }
        }
        candidates_.resize(keep);
    }

    // The draw, at the temperature.
    probs_.resize(candidates_.size());
    double sum = 0;
    for (size_t i = 0; i < candidates_.size(); ++i) {
        probs_[i] = std::exp((candidates_[i].first - max_logit) / params_.temp);
        sum += probs_[i];
    }
    // 24 random bits as a float in [0, 1): the same on every platform.
    const double u      = double(rng_() >> 8) * (1.0 / 16777216.0) * sum;
    double       cum    = 0;
    for (size_t i = 0; i < candidates_.size(); ++i) {
        cum += probs_[i];
        if (u < cum) {
            return candidates_[i].second;
        }
    }
    return candidates_.back().second; // rounding left u at the very end
}

} // namespace loom_run
