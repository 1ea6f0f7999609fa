// The meta device with Vulkan members (Mesa's lavapipe in CTest, any GPU
// elsewhere): a transformer block split over two Vulkan members, and over
// Vulkan and the CPU, equals the block on the CPU alone, with the meta
// backend alone and inside a scheduler beside the CPU. Without a Vulkan
// device the tests skip.

#include <gtest/gtest.h>

#include "ggml-backend.h"
#include "ggml-vulkan.h"
#include "meta_test_util.h"

using namespace loomtest::meta;

namespace {

class MetaVulkan : public ::testing::Test {
  protected:
    void SetUp() override {
        if (ggml_backend_vk_get_device_count() == 0) {
            GTEST_SKIP() << "no Vulkan device (GGML_VK_VISIBLE_DEVICES=<index> opts in to CPU devices such as "
                            "lavapipe)";
        }
        vk_ = ggml_backend_reg_dev_get(ggml_backend_vk_reg(), 0);
    }
    void expect_block(std::vector<ggml_backend_dev_t> devs, Plan * plan, bool sched) {
        expect_block_on(devs, plan, sched);
    }

    ggml_backend_dev_t vk_ = nullptr;
};

// The same device twice: two members with buffers and streams of their own.
TEST_F(MetaVulkan, TwoVulkanMembers) {
    static Plan plan = block_plan({2, 4}, {11, 7});
    expect_block({vk_, vk_}, &plan, false);
    expect_block({vk_, vk_}, &plan, true);
}

// Vulkan beside the CPU, one member's FFN slice empty.
TEST_F(MetaVulkan, VulkanAndCpuWithAnEmptySlice) {
    static Plan plan = block_plan({3, 1, 2}, {0, 9, 9});
    expect_block({vk_, cpu_dev(), vk_}, &plan, true);
}

} // namespace
