#pragma once

// What the Vulkan tests share: a test without a Vulkan device skips, saying
// why (CTest sets GGML_VK_VISIBLE_DEVICES=0, which opts in to Mesa's
// lavapipe where the machine has no GPU).

#include <gtest/gtest.h>

#include "ggml-vulkan.h"

#define SKIP_WITHOUT_VULKAN()                                                                                       \
    do {                                                                                                            \
        if (ggml_backend_vk_get_device_count() == 0) {                                                              \
            GTEST_SKIP() << "no Vulkan device (no loader, driver or GPU; GGML_VK_VISIBLE_DEVICES=<index> "          \
                            "opts in to CPU devices such as lavapipe)";                                             \
        }                                                                                                           \
    } while (0)
