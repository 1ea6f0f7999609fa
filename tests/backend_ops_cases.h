#pragma once

// The op cases of the conformance suite (test_backend_ops.cpp): every op of
// the core in the type combinations and layouts the per-op numeric tests
// (test_ops_*.cpp) check against the double reference. Each case builds
// its graph in a no_alloc context and says how its inputs are filled and
// how closely a device must match the CPU.

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ggml.h"

namespace loomtest::ops {

using Shape = std::array<int64_t, 4>;

// How an input tensor is filled.
struct Init {
    enum Kind {
        uniform,          // values in [lo, hi)
        integers,         // whole numbers in [lo, hi]
        distinct_indices, // each row (ne0 values) distinct whole numbers in [0, hi]
        mask,             // values in [-1, 1) and -inf at about a quarter of the places, never in column 0
        causal_mask,      // values in [-1, 1), -inf after a random column (never column 0) of each row
        distinct,         // every value different (for sorting and argmax)
    };
    Kind   kind = uniform;
    double lo   = -1.0;
    double hi   = 1.0;
};

inline Init uniform(double lo, double hi) {
    return {Init::uniform, lo, hi};
}
inline Init integers(double lo, double hi) {
    return {Init::integers, lo, hi};
}

// Creates a case's tensors and remembers which of them are inputs.
class Builder {
  public:
    explicit Builder(ggml_context * ctx) : ctx_(ctx) {}

    ggml_context * ctx() const { return ctx_; }
    ggml_tensor *  input(ggml_type type, const Shape & ne, Init init = {});

    const std::vector<std::pair<ggml_tensor *, Init>> & inputs() const { return inputs_; }

  private:
    ggml_context *                              ctx_;
    std::vector<std::pair<ggml_tensor *, Init>> inputs_;
};

enum class Compare {
    values, // normalised mean squared error within max_nmse; non-finite values in the same places
    top_k,  // each row holds the same set of indices (ggml leaves their order open)
};

struct OpCase {
    std::string                           name; // letters, digits and '_' only
    std::function<ggml_tensor *(Builder &)> build;
    double                                max_nmse;
    Compare                               compare = Compare::values;
};

const std::vector<OpCase> & all_cases();

} // namespace loomtest::ops
