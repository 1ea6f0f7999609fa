#pragma once

// Picks the next token from logits: greedy (temperature <= 0), or random
// among the top-k, then top-p tokens with probabilities softmax(logits / T).
// The order follows llama.cpp's default chain: top-k and top-p look at the
// distribution at temperature 1, the temperature shapes the draw.
//
// The random numbers come from std::mt19937, whose sequence the C++
// standard fixes, turned into floats by this code, so a seed gives the same
// tokens on every platform.

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace loom_run {

struct SamplerParams {
    float    temp  = 0.8f;  // <= 0: greedy
    int      top_k = 40;    // <= 0: every token
    float    top_p = 0.95f; // >= 1: every token left by top-k
    uint32_t seed  = 0;
};

class Sampler {
  public:
    explicit Sampler(const SamplerParams & params);

    // The chosen token id; logits must not be empty.
    int32_t sample(std::span<const float> logits);

    // The index of the largest value, the first one on ties.
    static int32_t argmax(std::span<const float> logits);

  private:
    SamplerParams                     params_;
    std::mt19937                      rng_;
    std::vector<std::pair<float, int32_t>> candidates_; // (logit, id), reused between calls
    std::vector<float>                probs_;
};

} // namespace loom_run
