// Built into test_rpc_ops beside test_backend_ops.cpp: before the tests are
// registered (gtest evaluates the suite's device list in InitGoogleTest,
// after static initialisation), a server on a free loopback port is
// started in the process and added to the registry, so the conformance
// suite runs on its device "RPC[127.0.0.1:<port>]CPU" like on any other.

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "ggml-backend.h"
#include "ggml-rpc.h"

namespace {

struct InProcessServer {
    InProcessServer() {
        loom_rpc_server_params p{};
        p.endpoint = "127.0.0.1:0";
        p.token    = "conformance-token";
        p.n_threads = 2;
        server     = loom_rpc_server_start(&p);
        if (server == nullptr) {
            std::fprintf(stderr, "test_rpc_ops: the RPC server did not start\n");
            return;
        }
        loom_rpc_set_token(p.token);
        loom_rpc_set_timeouts(10000, 60000);
        const std::string endpoint = "127.0.0.1:" + std::to_string(loom_rpc_server_port(server));
        if (ggml_backend_rpc_add_server(endpoint.c_str()) == nullptr) {
            std::fprintf(stderr, "test_rpc_ops: cannot add the RPC server %s\n", endpoint.c_str());
            return;
        }
        added = true;
    }
    // The server runs until the process ends: its devices stay registered.
    loom_rpc_server_t server = nullptr;
    bool              added  = false;
};

const InProcessServer g_server;

// Without the server, no RPC case exists and the conformance run on RPC
// would pass having compared nothing.
TEST(RpcOpsServer, StartedAndRegistered) {
    ASSERT_NE(g_server.server, nullptr) << "the RPC server did not start";
    EXPECT_TRUE(g_server.added) << "the RPC server's devices are not in the registry";
    bool found = false;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        found = found || std::string(ggml_backend_dev_name(ggml_backend_dev_get(i))).rfind("RPC[", 0) == 0;
    }
    EXPECT_TRUE(found) << "no RPC device in the registry";
}

} // namespace
