#pragma once

// Helpers shared by the backend-layer tests and the conformance suite:
// loading the test device plugin, configuring it, capturing log output.

#include <cstdarg>
#include <mutex>
#include <string>

#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "log_capture.h"
#include "testdev_api.h"

namespace loomtest {

// The test device's reg, loaded on first use (NULL, logged, if it cannot be).
// Loading an already loaded plugin returns the registered reg, so this is
// cheap and stays right after a test unloads and reloads the plugin.
inline ggml_backend_reg_t testdev_reg() {
    return ggml_backend_load(LOOM_TESTDEV_PATH);
}

// Sets key to value on a test device (see testdev_api.h).
inline bool testdev_configure(ggml_backend_dev_t dev, const char * key, const char * value) {
    auto fn = reinterpret_cast<loom_testdev_configure_t>(
        ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(dev), "loom_testdev_configure"));
    return fn != nullptr && fn(dev, key, value);
}

// Every test device back to its defaults.
inline void testdev_reset() {
    ggml_backend_reg_t reg = testdev_reg();
    if (reg == nullptr) {
        return;
    }
    for (size_t i = 0; i < ggml_backend_reg_dev_count(reg); ++i) {
        testdev_configure(ggml_backend_reg_dev_get(reg, i), "reset", "");
    }
}

// A context whose tensors get memory from backend buffers, not the arena.
inline ggml_context_ptr no_alloc_context(size_t n_tensors = 64) {
    ggml_init_params params{};
    params.mem_size = ggml_tensor_overhead() * n_tensors + ggml_graph_overhead();
    params.no_alloc = true;
    return ggml_context_ptr(ggml_init(params));
}

} // namespace loomtest
