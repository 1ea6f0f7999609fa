// The meta device over remote devices (RPC servers on loopback): the same
// results as one CPU backend, and a server that stops gives an error status.

#include <gtest/gtest.h>

#include "ggml-backend.h"
#include "ggml-rpc.h"
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
