#pragma once

// The fixture and small helpers of the RPC client tests (test_rpc.cpp,
// test_rpc_content.cpp): every test sets the token and the timeouts.

#include <gtest/gtest.h>

#include <vector>

#include "ggml-cpp.h"
#include "ggml-rpc.h"
#include "ggml.h"
#include "rpc_test_util.h"

namespace loomtest::rpc_client {

using loomtest::rpc::kToken;

class Rpc : public ::testing::Test {
  protected:
    void SetUp() override {
        loom_rpc_set_token(kToken);
        loom_rpc_set_timeouts(5000, 20000);
    }
};

inline ggml_context_ptr context(size_t n = 64) {
    ggml_init_params p{};
    p.mem_size = n * ggml_tensor_overhead() + ggml_graph_overhead();
    p.no_alloc = true;
    return ggml_context_ptr(ggml_init(p));
}

inline std::vector<float> iota_values(size_t n, float scale = 0.25f) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) {
        v[i] = float(int(i % 97) - 48) * scale;
    }
    return v;
}

} // namespace loomtest::rpc_client
