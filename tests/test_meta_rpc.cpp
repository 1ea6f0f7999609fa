// The meta device over remote devices (RPC servers on loopback): the same
// results as one CPU backend, and a server that stops gives an error status.

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "ggml-backend.h"
#include "ggml-rpc.h"
#include "log_capture.h"
#include "meta_test_util.h"
#include "rpc_test_util.h"

using namespace loomtest::meta;
using loomtest::rpc::TestServer;

namespace {

class MetaRpc : public ::testing::Test {
  protected:
    void SetUp() override {
        loom_rpc_set_token(loomtest::rpc::kToken);
        loom_rpc_set_timeouts(5000, 20000);
    }
    static ggml_backend_dev_t device_of(const TestServer & s) {
        ggml_backend_reg_t reg = ggml_backend_rpc_add_server(s.endpoint().c_str());
        return reg != nullptr ? ggml_backend_reg_dev_get(reg, 0) : nullptr;
    }
};

TEST_F(MetaRpc, TwoServersEqualOneDevice) {
    TestServer s1, s2;
    ASSERT_TRUE(s1.running() && s2.running());
    ggml_backend_dev_t d1 = device_of(s1), d2 = device_of(s2);
    ASSERT_NE(d1, nullptr);
    ASSERT_NE(d2, nullptr);
    static Plan plan = block_plan({2, 4}, {10, 8});
    for (bool sched : {false, true}) {
        ggml_backend_dev_t devs[2] = {d1, d2};
        ggml_backend_dev_t meta    = ggml_backend_meta_device(devs, 2, plan_state, &plan);
        ggml_backend_t     mb      = ggml_backend_dev_init(meta, nullptr);
        ASSERT_NE(mb, nullptr);
        ggml_status        st = GGML_STATUS_FAILED;
        std::vector<float> y  = run_block(mb, ggml_backend_dev_buffer_type(meta), sched, &st);
        ASSERT_EQ(st, GGML_STATUS_SUCCESS);
        expect_close(y, reference_block());
        ggml_backend_free(mb);
    }
}

// Three servers reduce among themselves (Note [Peer links]), streamed
// between the pieces of the computation: the same bits as the client's own
// sum through the host (LOOM_RPC_PEER_LINKS=0), with and without the
// scheduler, and an empty slice on one member.
TEST_F(MetaRpc, ServersReduceAmongThemselvesAsTheClientWould) {
    TestServer s1, s2, s3;
    ASSERT_TRUE(s1.running() && s2.running() && s3.running());
    ggml_backend_dev_t devs[3] = {device_of(s1), device_of(s2), device_of(s3)};
    for (ggml_backend_dev_t d : devs) ASSERT_NE(d, nullptr);
    static Plan plan = block_plan({2, 3, 1}, {7, 0, 11});
    ggml_backend_dev_t meta = ggml_backend_meta_device(devs, 3, plan_state, &plan);
    for (bool sched : {false, true}) {
        std::vector<float> y[2];
        for (int peers = 1; peers >= 0; --peers) {
            if (peers == 0) setenv("LOOM_RPC_PEER_LINKS", "0", 1);
            loomtest::LogCapture log;
            ggml_backend_t       mb = ggml_backend_dev_init(meta, nullptr);
            unsetenv("LOOM_RPC_PEER_LINKS");
            ASSERT_NE(mb, nullptr);
            EXPECT_EQ(log.contains("3 servers sum partial results among themselves"), peers == 1) << log.text();
            ggml_status st = GGML_STATUS_FAILED;
            y[peers]       = run_block(mb, ggml_backend_dev_buffer_type(meta), sched, &st);
            ASSERT_EQ(st, GGML_STATUS_SUCCESS);
            EXPECT_FALSE(log.contains("declined")) << log.text();
            ggml_backend_free(mb);
        }
        expect_close(y[1], reference_block());
        ASSERT_EQ(y[0].size(), y[1].size());
        EXPECT_EQ(std::memcmp(y[0].data(), y[1].data(), y[0].size() * sizeof(float)), 0);
    }
}

TEST_F(MetaRpc, ServerBesideTheCpu) {
    TestServer s1;
    ASSERT_TRUE(s1.running());
    ggml_backend_dev_t d1 = device_of(s1);
    ASSERT_NE(d1, nullptr);
    static Plan        plan    = block_plan({1, 2, 3}, {6, 0, 12});
    ggml_backend_dev_t devs[3] = {cpu_dev(), d1, cpu_dev()};
    ggml_backend_dev_t meta    = ggml_backend_meta_device(devs, 3, plan_state, &plan);
    ggml_backend_t     mb      = ggml_backend_dev_init(meta, nullptr);
    ASSERT_NE(mb, nullptr);
    ggml_status        st = GGML_STATUS_FAILED;
    std::vector<float> y  = run_block(mb, ggml_backend_dev_buffer_type(meta), true, &st);
    ASSERT_EQ(st, GGML_STATUS_SUCCESS);
    expect_close(y, reference_block());
    ggml_backend_free(mb);
}

TEST_F(MetaRpc, StoppedServerIsAnErrorStatus) {
    TestServer s1, s2;
    ASSERT_TRUE(s1.running() && s2.running());
    ggml_backend_dev_t d1 = device_of(s1), d2 = device_of(s2);
    ASSERT_NE(d1, nullptr);
    ASSERT_NE(d2, nullptr);
    static Plan        plan    = block_plan({3, 3}, {9, 9});
    ggml_backend_dev_t devs[2] = {d1, d2};
    ggml_backend_dev_t meta    = ggml_backend_meta_device(devs, 2, plan_state, &plan);
    ggml_backend_t     mb      = ggml_backend_dev_init(meta, nullptr);
    ASSERT_NE(mb, nullptr);
    ggml_status st = GGML_STATUS_SUCCESS;
    run_block(mb, ggml_backend_dev_buffer_type(meta), false, &st, [&] { s2.stop(); });
    EXPECT_NE(st, GGML_STATUS_SUCCESS);
    ggml_backend_free(mb);
}

} // namespace
