// Bulk transfers to and from an RPC server through ggml's API, whichever
// RPC client the loader gives (bench/rpc_vs_ggml.sh builds this against
// npm's prebuilt ggml with ggml's RPC plugin). Prints one JSON line:
// {"up": MB/s, "down": MB/s}, the best of ROUNDS uploads and downloads of
// MIB MiB each (ggml_backend_tensor_set / _get of one tensor).
//
//   rpc_transfer HOST:PORT MIB ROUNDS PLUGIN_DIR

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../../tests/prebuilt/rpc_device.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"

int main(int argc, char ** argv) {
    if (argc < 5) {
        std::fprintf(stderr, "usage: %s HOST:PORT MIB ROUNDS PLUGIN_DIR\n", argv[0]);
        return 2;
    }
    const size_t n = size_t(std::atoi(argv[2])) << 20;
    const int    rounds = std::atoi(argv[3]);
    ggml_backend_load_all_from_path(argv[4]);
    ggml_backend_dev_t dev = add_rpc_device(argv[1]);
    if (dev == nullptr) {
        std::fprintf(stderr, "cannot use the RPC server %s\n", argv[1]);
        return 1;
    }
    ggml_init_params      ip{ggml_tensor_overhead() * 2, nullptr, true};
    ggml_context *        ctx = ggml_init(ip);
    ggml_tensor *         t   = ggml_new_tensor_1d(ctx, GGML_TYPE_I8, int64_t(n));
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_dev_buffer_type(dev));
    if (buf == nullptr) {
        return 1;
    }
    std::vector<char> data(n), back(n);
    for (size_t i = 0; i < n; ++i) {
        data[i] = char(i * 131 + (i >> 12));
    }
    double up = 0, down = 0;
    for (int r = 0; r < rounds; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        ggml_backend_tensor_set(t, data.data(), 0, n);
        // (the upload is complete once a later request is answered)
        ggml_backend_tensor_get(t, back.data(), 0, 1);
        auto t1 = std::chrono::steady_clock::now();
        ggml_backend_tensor_get(t, back.data(), 0, n);
        auto t2 = std::chrono::steady_clock::now();
        up   = std::max(up, double(n) / std::chrono::duration<double>(t1 - t0).count() / 1e6);
        down = std::max(down, double(n) / std::chrono::duration<double>(t2 - t1).count() / 1e6);
    }
    if (back != data) {
        std::fprintf(stderr, "the bytes read back differ from those written\n");
        return 1;
    }
    std::printf("{\"up\": %.1f, \"down\": %.1f}\n", up, down);
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
    return 0;
}
