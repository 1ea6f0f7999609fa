// The Vulkan backend: registry and device properties, device and pinned
// buffers (transfers, offsets, copies, out of memory), the stream's async
// transfers and events, and the scheduler with [Vulkan, CPU]: a transformer
// block whose weights live in device memory matches a CPU-only run while
// the ops Vulkan declines run on the CPU, also in pipeline-parallel mode.
//
// Runs on whatever Vulkan device the registry has; CTest opts in to CPU
// devices such as Mesa's lavapipe with GGML_VK_VISIBLE_DEVICES. Without any
// device every test skips, saying why.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend_test_helpers.h"
#include "reference.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml-cpu.h"
#include "ggml-vulkan.h"
#include "vulkan_test_util.h"

using loomtest::LogCapture;
using loomtest::no_alloc_context;

using loomtest::nmse;

namespace {

std::vector<float> random_values(size_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937                          rng(seed);
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float>                    v(n);
    for (float & x : v) x = u(rng);
    return v;
}

// Fills t (contiguous, F32/F16/quantized) with random values.
void fill(ggml_tensor * t, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
    const int64_t            n = ggml_nelements(t);
    const std::vector<float> v = random_values(size_t(n), seed, lo, hi);
    std::vector<uint8_t>     bytes(ggml_nbytes(t));
    switch (t->type) {
        case GGML_TYPE_F32: std::memcpy(bytes.data(), v.data(), bytes.size()); break;
        case GGML_TYPE_F16: ggml_fp32_to_fp16_row(v.data(), reinterpret_cast<ggml_fp16_t *>(bytes.data()), n); break;
        default: ggml_quantize_chunk(t->type, v.data(), bytes.data(), 0, ggml_nrows(t), t->ne[0], nullptr); break;
    }
    ggml_backend_tensor_set(t, bytes.data(), 0, bytes.size());
}

std::vector<float> read_f32(const ggml_tensor * t) {
    std::vector<float> v(size_t(ggml_nelements(t)));
    ggml_backend_tensor_get(t, v.data(), 0, ggml_nbytes(t));
    return v;
}


ggml_backend_dev_t vk_device() {
    return ggml_backend_reg_dev_get(ggml_backend_vk_reg(), 0);
}

// ---- registry and device ---------------------------------------------------

TEST(VulkanRegistry, DevicesBeforeTheCpu) {
    // The registry lists the family only when it has a device.
    ggml_backend_reg_t reg = ggml_backend_reg_by_name("Vulkan");
    EXPECT_EQ(ggml_backend_reg_dev_count(ggml_backend_vk_reg()), size_t(ggml_backend_vk_get_device_count()));
    if (ggml_backend_vk_get_device_count() == 0) {
        EXPECT_EQ(reg, nullptr);
    } else {
        EXPECT_EQ(reg, ggml_backend_vk_reg());
    }
    SKIP_WITHOUT_VULKAN();

    size_t vk_at = SIZE_MAX, cpu_at = SIZE_MAX;
    for (size_t i = 0; i < ggml_backend_reg_count(); ++i) {
        if (ggml_backend_reg_get(i) == reg) vk_at = i;
        if (ggml_backend_reg_get(i) == ggml_backend_cpu_reg()) cpu_at = i;
    }
    EXPECT_LT(vk_at, cpu_at);
    // The CPU is still the answer for type CPU.
    EXPECT_EQ(ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU), ggml_backend_dev_by_name("CPU"));

    for (int i = 0; i < ggml_backend_vk_get_device_count(); ++i) {
        ggml_backend_dev_t dev = ggml_backend_reg_dev_get(reg, size_t(i));
        EXPECT_EQ(std::string(ggml_backend_dev_name(dev)), "Vulkan" + std::to_string(i));
        const auto type = ggml_backend_dev_type(dev);
        EXPECT_TRUE(type == GGML_BACKEND_DEVICE_TYPE_GPU || type == GGML_BACKEND_DEVICE_TYPE_IGPU);

        ggml_backend_dev_props props;
        ggml_backend_dev_get_props(dev, &props);
        char desc[256];
        ggml_backend_vk_get_device_description(i, desc, sizeof(desc));
        EXPECT_STREQ(props.description, desc);
        EXPECT_GT(std::strlen(desc), 0u);
        // A device on the CPU says so.
        if (std::strstr(desc, "llvmpipe") != nullptr || std::strstr(desc, "lavapipe") != nullptr) {
            EXPECT_NE(std::strstr(desc, "CPU device"), nullptr) << desc;
        }
        EXPECT_TRUE(props.caps.async);
        EXPECT_TRUE(props.caps.events);
        EXPECT_TRUE(props.caps.host_buffer);
        size_t free = 0, total = 0;
        ggml_backend_vk_get_device_memory(i, &free, &total);
        EXPECT_GT(total, 0u);
        EXPECT_LE(free, total);
        EXPECT_EQ(props.memory_total, total);

        ggml_backend_buffer_type_t buft = ggml_backend_vk_buffer_type(size_t(i));
        ASSERT_NE(buft, nullptr);
        EXPECT_EQ(ggml_backend_dev_buffer_type(dev), buft);
        EXPECT_FALSE(ggml_backend_buft_is_host(buft));
        EXPECT_GT(ggml_backend_buft_get_max_size(buft), size_t(1) << 20);
        EXPECT_TRUE(ggml_backend_dev_supports_buft(dev, buft));
        EXPECT_FALSE(ggml_backend_dev_supports_buft(dev, ggml_backend_cpu_buffer_type()));
    }
    ggml_backend_buffer_type_t host = ggml_backend_vk_host_buffer_type();
    ASSERT_NE(host, nullptr);
    EXPECT_TRUE(ggml_backend_buft_is_host(host));
    EXPECT_EQ(ggml_backend_dev_host_buffer_type(vk_device()), host);

    ggml_backend_ptr vk(ggml_backend_vk_init(0));
    ASSERT_TRUE(vk);
    EXPECT_TRUE(ggml_backend_is_vk(vk.get()));
    EXPECT_STREQ(ggml_backend_name(vk.get()), "Vulkan0");
    EXPECT_EQ(ggml_backend_get_device(vk.get()), vk_device());
    ggml_backend_ptr cpu(ggml_backend_cpu_init());
    EXPECT_FALSE(ggml_backend_is_vk(cpu.get()));
    EXPECT_FALSE(ggml_backend_is_vk(nullptr));
}

TEST(VulkanRegistry, OutOfRangeDevices) {
    LogCapture log;
    EXPECT_EQ(ggml_backend_vk_init(GGML_VK_MAX_DEVICES + 3), nullptr);
    EXPECT_TRUE(log.contains("no Vulkan device"));
    EXPECT_EQ(ggml_backend_vk_buffer_type(GGML_VK_MAX_DEVICES + 3), nullptr);
    size_t free = 1, total = 1;
    ggml_backend_vk_get_device_memory(-1, &free, &total);
    EXPECT_EQ(free, 0u);
    EXPECT_EQ(total, 0u);
    char desc[8] = "x";
    ggml_backend_vk_get_device_description(GGML_VK_MAX_DEVICES + 3, desc, sizeof(desc));
    EXPECT_STREQ(desc, "");
}

// Without GGML_VK_VISIBLE_DEVICES only GPUs are devices (run by CTest
// without the variable).
TEST(VulkanRegistry, CpuDevicesOnlyWhenAskedFor) {
    if (std::getenv("GGML_VK_VISIBLE_DEVICES") != nullptr) {
        GTEST_SKIP() << "GGML_VK_VISIBLE_DEVICES is set";
    }
    for (int i = 0; i < ggml_backend_vk_get_device_count(); ++i) {
        char desc[256];
        ggml_backend_vk_get_device_description(i, desc, sizeof(desc));
        EXPECT_EQ(std::strstr(desc, "CPU device"), nullptr) << desc;
    }
}

TEST(VulkanRegistry, SupportsOpDeclinesWhatItCannotCompute) {
    SKIP_WITHOUT_VULKAN();
    ggml_backend_dev_t dev = vk_device();
    ggml_context_ptr   ctx = no_alloc_context(128);
    ggml_context *     c   = ctx.get();
    ggml_tensor *      x   = ggml_new_tensor_2d(c, GGML_TYPE_F32, 64, 8);
    EXPECT_TRUE(ggml_backend_dev_supports_op(dev, ggml_rms_norm(c, x, 1e-5f)));
    EXPECT_TRUE(ggml_backend_dev_supports_op(dev, ggml_silu(c, x)));
    EXPECT_TRUE(ggml_backend_dev_supports_op(dev, ggml_transpose(c, x)));
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
        EXPECT_TRUE(ggml_backend_dev_supports_op(dev, ggml_mul_mat(c, ggml_new_tensor_2d(c, t, 64, 16), x)))
            << ggml_type_name(t);
    }
    EXPECT_FALSE(ggml_backend_dev_supports_op(dev, ggml_mul_mat(c, ggml_new_tensor_2d(c, GGML_TYPE_BF16, 64, 16), x)));
    // The block types of shaders/quants.glsl, in products and get_rows; the
    // other block types are left to the CPU.
    ggml_tensor * x256 = ggml_new_tensor_2d(c, GGML_TYPE_F32, 256, 3);
    ggml_tensor * rows = ggml_new_tensor_1d(c, GGML_TYPE_I32, 2);
    for (ggml_type t : {GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K,
                        GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS}) {
        ggml_tensor * w = ggml_new_tensor_2d(c, t, 256, 5);
        EXPECT_TRUE(ggml_backend_dev_supports_op(dev, ggml_mul_mat(c, w, x256))) << ggml_type_name(t);
        EXPECT_TRUE(ggml_backend_dev_supports_op(dev, ggml_get_rows(c, w, rows))) << ggml_type_name(t);
    }
    for (ggml_type t : {GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ3_S, GGML_TYPE_IQ1_S, GGML_TYPE_TQ2_0, GGML_TYPE_MXFP4}) {
        ggml_tensor * w = ggml_new_tensor_2d(c, t, 256, 5);
        EXPECT_FALSE(ggml_backend_dev_supports_op(dev, ggml_mul_mat(c, w, x256))) << ggml_type_name(t);
        EXPECT_FALSE(ggml_backend_dev_supports_op(dev, ggml_get_rows(c, w, rows))) << ggml_type_name(t);
    }
    EXPECT_FALSE(ggml_backend_dev_supports_op(dev, ggml_abs(c, x)));
    EXPECT_FALSE(ggml_backend_dev_supports_op(dev, ggml_sum_rows(c, x)));
    EXPECT_FALSE(ggml_backend_dev_supports_op(dev, ggml_cpy(c, x, ggml_new_tensor_2d(c, GGML_TYPE_Q8_0, 64, 8))));
    EXPECT_FALSE(ggml_backend_dev_supports_op(dev, ggml_sin(c, x)));
    EXPECT_FALSE(ggml_backend_dev_supports_op(dev, ggml_argsort(c, x, GGML_SORT_ORDER_ASC)));
    // A tensor larger than one buffer the device can bind (its buffer
    // type's maximum), as a source or as the result.
    const size_t  max = ggml_backend_buft_get_max_size(ggml_backend_dev_buffer_type(dev));
    ggml_tensor * big = ggml_new_tensor_2d(c, GGML_TYPE_F32, 1024, int64_t(max / 4096 + 1));
    EXPECT_GT(ggml_nbytes(big), max);
    EXPECT_FALSE(ggml_backend_dev_supports_op(dev, ggml_silu(c, big)));
    ggml_tensor * fits = ggml_view_2d(c, big, 1024, int64_t(max / 4096), big->nb[1], 0);
    EXPECT_TRUE(ggml_backend_dev_supports_op(dev, ggml_silu(c, fits)));
    EXPECT_FALSE(ggml_backend_dev_supports_op(dev, ggml_get_rows(c, ggml_new_tensor_2d(c, GGML_TYPE_F32, 1024, 4),
                                                                 ggml_new_tensor_1d(c, GGML_TYPE_I32, int64_t(max / 4096 + 1)))));

    // Large products are worth moving; small ones and other ops are not.
    ggml_tensor * w = ggml_new_tensor_2d(c, GGML_TYPE_Q4_0, 64, 64);
    EXPECT_TRUE(ggml_backend_dev_offload_op(dev, ggml_mul_mat(c, w, ggml_new_tensor_2d(c, GGML_TYPE_F32, 64, 32))));
    EXPECT_FALSE(ggml_backend_dev_offload_op(dev, ggml_mul_mat(c, w, ggml_new_tensor_2d(c, GGML_TYPE_F32, 64, 4))));
    EXPECT_FALSE(ggml_backend_dev_offload_op(dev, ggml_silu(c, x)));
}

// ---- buffers ----------------------------------------------------------------

TEST(VulkanBuffer, SetGetMemsetAtOffsets) {
    SKIP_WITHOUT_VULKAN();
    ggml_context_ptr ctx = no_alloc_context(8);
    ggml_tensor *    a   = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 1000);
    ggml_tensor *    b   = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_I8, 333);
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors_from_buft(ctx.get(), ggml_backend_vk_buffer_type(0)));
    ASSERT_TRUE(buf);
    EXPECT_FALSE(ggml_backend_buffer_is_host(buf.get()));
    EXPECT_NE(ggml_backend_buffer_get_base(buf.get()), nullptr);
    EXPECT_NE(a->data, b->data);

    ggml_backend_buffer_clear(buf.get(), 0x7f);
    std::vector<uint8_t> bytes(333);
    ggml_backend_tensor_get(b, bytes.data(), 0, bytes.size());
    for (uint8_t x : bytes) ASSERT_EQ(x, 0x7f);

    std::vector<float> v(1000);
    std::iota(v.begin(), v.end(), 0.0f);
    ggml_backend_tensor_set(a, v.data(), 0, ggml_nbytes(a));
    // A part at an odd offset, and a memset of an unaligned range.
    const float part[3] = {-1.0f, -2.0f, -3.0f};
    ggml_backend_tensor_set(a, part, 101 * sizeof(float), sizeof(part));
    ggml_backend_tensor_memset(a, 0, 500 * sizeof(float) + 1, 6);
    std::vector<float> got(1000);
    ggml_backend_tensor_get(a, got.data(), 0, ggml_nbytes(a));
    v[101] = -1.0f;
    v[102] = -2.0f;
    v[103] = -3.0f;
    uint8_t * raw = reinterpret_cast<uint8_t *>(v.data());
    std::memset(raw + 500 * sizeof(float) + 1, 0, 6);
    EXPECT_EQ(got, v);
    float three[3];
    ggml_backend_tensor_get(a, three, 101 * sizeof(float), sizeof(three));
    EXPECT_EQ(three[2], -3.0f);
    ggml_backend_tensor_get(b, bytes.data(), 0, bytes.size());
    for (uint8_t x : bytes) ASSERT_EQ(x, 0x7f); // untouched by the writes to a
}

TEST(VulkanBuffer, CopiesBetweenBuffers) {
    SKIP_WITHOUT_VULKAN();
    ggml_context_ptr dctx = no_alloc_context(8), hctx = no_alloc_context(8), cctx = no_alloc_context(8);
    ggml_tensor *    d1 = ggml_new_tensor_1d(dctx.get(), GGML_TYPE_F32, 4096);
    ggml_tensor *    d2 = ggml_new_tensor_1d(dctx.get(), GGML_TYPE_F32, 4096);
    ggml_tensor *    h  = ggml_new_tensor_1d(hctx.get(), GGML_TYPE_F32, 4096);
    ggml_tensor *    c  = ggml_new_tensor_1d(cctx.get(), GGML_TYPE_F32, 4096);
    ggml_backend_buffer_ptr dbuf(ggml_backend_alloc_ctx_tensors_from_buft(dctx.get(), ggml_backend_vk_buffer_type(0)));
    ggml_backend_buffer_ptr hbuf(ggml_backend_alloc_ctx_tensors_from_buft(hctx.get(), ggml_backend_vk_host_buffer_type()));
    ggml_backend_buffer_ptr cbuf(ggml_backend_alloc_ctx_tensors_from_buft(cctx.get(), ggml_backend_cpu_buffer_type()));
    ASSERT_TRUE(dbuf && hbuf && cbuf);
    EXPECT_TRUE(ggml_backend_buffer_is_host(hbuf.get()));

    // Pinned memory is plain host memory to the CPU.
    const std::vector<float> v = random_values(4096, 3);
    std::memcpy(h->data, v.data(), ggml_nbytes(h));
    ggml_backend_tensor_copy(h, d1);  // pinned -> device, without staging
    ggml_backend_tensor_copy(d1, d2); // device -> device
    ggml_backend_tensor_copy(d2, c);  // device -> CPU
    EXPECT_EQ(read_f32(d2), v);
    EXPECT_EQ(std::memcmp(c->data, v.data(), ggml_nbytes(c)), 0);

    const std::vector<float> w = random_values(4096, 4);
    std::memcpy(c->data, w.data(), ggml_nbytes(c));
    ggml_backend_tensor_copy(c, d1); // CPU -> device
    ggml_backend_tensor_copy(d1, h); // device -> pinned
    EXPECT_EQ(std::memcmp(h->data, w.data(), ggml_nbytes(h)), 0);
}

TEST(VulkanBuffer, OutOfMemoryReturnsNull) {
    SKIP_WITHOUT_VULKAN();
    for (ggml_backend_buffer_type_t buft : {ggml_backend_vk_buffer_type(0), ggml_backend_vk_host_buffer_type()}) {
        LogCapture log;
        const size_t max = ggml_backend_buft_get_max_size(buft);
        EXPECT_EQ(ggml_backend_buft_alloc_buffer(buft, max + 1), nullptr);
        EXPECT_EQ(ggml_backend_buft_alloc_buffer(buft, SIZE_MAX / 2), nullptr);
        EXPECT_TRUE(log.contains("exceeds")) << log.text();
    }
    // Still usable afterwards.
    ggml_backend_buffer_ptr ok(ggml_backend_buft_alloc_buffer(ggml_backend_vk_buffer_type(0), 1024));
    EXPECT_TRUE(ok);
}

// ---- the stream: async transfers and events ----------------------------------

TEST(VulkanBackend, AsyncTransfersInOrder) {
    SKIP_WITHOUT_VULKAN();
    ggml_backend_ptr vk(ggml_backend_vk_init(0));
    ggml_backend_ptr cpu(ggml_backend_cpu_init());
    ASSERT_TRUE(vk && cpu);
    ggml_context_ptr dctx = no_alloc_context(8), cctx = no_alloc_context(8);
    ggml_tensor *    a = ggml_new_tensor_1d(dctx.get(), GGML_TYPE_F32, 10000);
    ggml_tensor *    b = ggml_new_tensor_1d(dctx.get(), GGML_TYPE_F32, 10000);
    ggml_tensor *    c = ggml_new_tensor_1d(cctx.get(), GGML_TYPE_F32, 10000);
    ggml_backend_buffer_ptr dbuf(ggml_backend_alloc_ctx_tensors(dctx.get(), vk.get()));
    ggml_backend_buffer_ptr cbuf(ggml_backend_alloc_ctx_tensors(cctx.get(), cpu.get()));
    ASSERT_TRUE(dbuf && cbuf);

    const std::vector<float> v = random_values(10000, 5), w = random_values(10000, 6);
    std::vector<float>       got_a(10000), got_b(10000);
    // set a, copy a -> b, set a again, read both: each sees what came before it.
    ggml_backend_tensor_set_async(vk.get(), a, v.data(), 0, ggml_nbytes(a));
    ggml_backend_tensor_copy_async(vk.get(), vk.get(), a, b);
    ggml_backend_tensor_set_async(vk.get(), a, w.data(), 0, ggml_nbytes(a));
    ggml_backend_tensor_get_async(vk.get(), a, got_a.data(), 0, ggml_nbytes(a));
    ggml_backend_tensor_get_async(vk.get(), b, got_b.data(), 0, ggml_nbytes(b));
    ggml_backend_synchronize(vk.get());
    EXPECT_EQ(got_a, w);
    EXPECT_EQ(got_b, v);

    // Host memory is staged when the copy is queued: changing it afterwards
    // does not change what arrives.
    std::memcpy(c->data, v.data(), ggml_nbytes(c));
    ggml_backend_tensor_copy_async(cpu.get(), vk.get(), c, a);
    std::memset(c->data, 0, ggml_nbytes(c));
    ggml_backend_synchronize(vk.get());
    EXPECT_EQ(read_f32(a), v);

    // From and into pinned memory: copied directly, in order with the rest.
    ggml_context_ptr        hctx = no_alloc_context(8);
    ggml_tensor *           h    = ggml_new_tensor_1d(hctx.get(), GGML_TYPE_F32, 10000);
    ggml_backend_buffer_ptr hbuf(ggml_backend_alloc_ctx_tensors_from_buft(hctx.get(), ggml_backend_vk_host_buffer_type()));
    ASSERT_TRUE(hbuf);
    auto * pinned = static_cast<float *>(h->data);
    std::memcpy(pinned, w.data(), ggml_nbytes(h));
    ggml_backend_tensor_set_async(vk.get(), b, pinned, 0, ggml_nbytes(b));
    ggml_backend_tensor_copy_async(vk.get(), vk.get(), b, a);
    ggml_backend_tensor_get_async(vk.get(), a, pinned + 5000, 100 * sizeof(float), 10 * sizeof(float));
    ggml_backend_synchronize(vk.get());
    EXPECT_EQ(read_f32(b), w);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(pinned[5000 + i], w[size_t(100 + i)]);
}

TEST(VulkanBackend, EventsOrderTwoStreams) {
    SKIP_WITHOUT_VULKAN();
    ggml_backend_ptr producer(ggml_backend_vk_init(0)), consumer(ggml_backend_vk_init(0));
    ASSERT_TRUE(producer && consumer);
    ggml_backend_event_t ev = ggml_backend_event_new(vk_device());
    ASSERT_NE(ev, nullptr);
    ggml_backend_event_synchronize(ev); // never recorded: returns at once

    ggml_context_ptr ctx = no_alloc_context(8);
    ggml_tensor *    a   = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 1 << 16);
    ggml_tensor *    b   = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 1 << 16);
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(ctx.get(), producer.get()));
    ASSERT_TRUE(buf);
    for (int round = 0; round < 3; ++round) {
        const std::vector<float> v = random_values(size_t(1) << 16, unsigned(10 + round));
        ggml_backend_tensor_set_async(producer.get(), a, v.data(), 0, ggml_nbytes(a));
        ggml_backend_event_record(ev, producer.get());
        ggml_backend_event_wait(consumer.get(), ev);
        ggml_backend_tensor_copy_async(consumer.get(), consumer.get(), a, b);
        std::vector<float> got(v.size());
        ggml_backend_tensor_get_async(consumer.get(), b, got.data(), 0, ggml_nbytes(b));
        ggml_backend_synchronize(consumer.get());
        EXPECT_EQ(got, v) << "round " << round;
        ggml_backend_event_synchronize(ev);
    }
    ggml_backend_event_free(ev);
}

TEST(VulkanBackend, GraphWithHazardsBetweenNodes) {
    SKIP_WITHOUT_VULKAN();
    // A chain of in-place ops on one tensor and reads of earlier results:
    // each node must see the previous one's writes.
    ggml_backend_ptr vk(ggml_backend_vk_init(0));
    ggml_backend_ptr cpu(ggml_backend_cpu_init());
    ASSERT_TRUE(vk && cpu);
    ggml_context_ptr ctx = no_alloc_context(64);
    ggml_context *   c   = ctx.get();
    ggml_tensor *    x   = ggml_new_tensor_2d(c, GGML_TYPE_F32, 300, 7);
    ggml_set_input(x);
    ggml_tensor * y = x;
    for (int i = 0; i < 6; ++i) {
        y = ggml_add_inplace(c, ggml_scale_inplace(c, y, 0.9f), x);
    }
    ggml_tensor * out = ggml_soft_max(c, ggml_rms_norm(c, y, 1e-6f));
    ggml_cgraph * gf  = ggml_new_graph(c);
    ggml_build_forward_expand(gf, out);
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(c, vk.get()));
    ASSERT_TRUE(buf);
    const std::vector<float> v = random_values(300 * 7, 8);
    ggml_backend_tensor_set(x, v.data(), 0, ggml_nbytes(x));
    ASSERT_EQ(ggml_backend_graph_compute(vk.get(), gf), GGML_STATUS_SUCCESS);
    const std::vector<float> got = read_f32(out);

    // The same on the CPU.
    std::vector<float> want_y = v;
    for (int i = 0; i < 6; ++i) {
        for (size_t k = 0; k < v.size(); ++k) want_y[k] = want_y[k] * 0.9f + v[k];
    }
    for (int r = 0; r < 7; ++r) {
        double ss = 0;
        for (int k = 0; k < 300; ++k) ss += double(want_y[size_t(r * 300 + k)]) * want_y[size_t(r * 300 + k)];
        const double scale = 1.0 / std::sqrt(ss / 300 + 1e-6);
        double       mx = -INFINITY, sum = 0;
        for (int k = 0; k < 300; ++k) mx = std::max(mx, want_y[size_t(r * 300 + k)] * scale);
        for (int k = 0; k < 300; ++k) sum += std::exp(want_y[size_t(r * 300 + k)] * scale - mx);
        for (int k = 0; k < 300; ++k) {
            const double want = std::exp(want_y[size_t(r * 300 + k)] * scale - mx) / sum;
            ASSERT_NEAR(got[size_t(r * 300 + k)], want, 1e-5) << "row " << r << " col " << k;
        }
    }
}

// Indices read from data outside their bound: test_vulkan_indices.cpp.

// ---- the scheduler with [Vulkan, CPU] -----------------------------------------

constexpr int64_t kDim = 128, kHeads = 4, kHeadDim = kDim / kHeads, kFF = 256, kVocab = 64;

// The weights of a small transformer block, in one buffer of buft.
struct Weights {
    ggml_context_ptr        ctx;
    ggml_backend_buffer_ptr buf;
    ggml_tensor *tok = nullptr, *attn_norm = nullptr, *wq = nullptr, *wk = nullptr, *wv = nullptr, *wo = nullptr,
                *ffn_norm = nullptr, *up = nullptr, *gate = nullptr, *down = nullptr, *head = nullptr;
};

Weights make_weights(ggml_backend_buffer_type_t buft) {
    Weights          w;
    ggml_init_params p = {16 * ggml_tensor_overhead(), nullptr, true};
    w.ctx.reset(ggml_init(p));
    ggml_context * c = w.ctx.get();
    w.tok            = ggml_new_tensor_2d(c, GGML_TYPE_Q8_0, kDim, kVocab);
    w.attn_norm      = ggml_new_tensor_1d(c, GGML_TYPE_F32, kDim);
    w.wq             = ggml_new_tensor_2d(c, GGML_TYPE_Q8_0, kDim, kDim);
    w.wk             = ggml_new_tensor_2d(c, GGML_TYPE_Q4_0, kDim, kDim);
    w.wv             = ggml_new_tensor_2d(c, GGML_TYPE_F16, kDim, kDim);
    w.wo             = ggml_new_tensor_2d(c, GGML_TYPE_F32, kDim, kDim);
    w.ffn_norm       = ggml_new_tensor_1d(c, GGML_TYPE_F32, kDim);
    w.up             = ggml_new_tensor_2d(c, GGML_TYPE_Q4_0, kDim, kFF);
    w.gate           = ggml_new_tensor_2d(c, GGML_TYPE_F16, kDim, kFF);
    w.down           = ggml_new_tensor_2d(c, GGML_TYPE_Q8_0, kFF, kDim);
    w.head           = ggml_new_tensor_2d(c, GGML_TYPE_F32, kDim, kVocab);
    w.buf.reset(ggml_backend_alloc_ctx_tensors_from_buft(c, buft));
    EXPECT_TRUE(w.buf);
    ggml_backend_buffer_set_usage(w.buf.get(), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    unsigned seed = 100;
    for (ggml_tensor * t : {w.tok, w.wq, w.wk, w.wv, w.wo, w.up, w.gate, w.down, w.head}) fill(t, seed++, -0.3f, 0.3f);
    fill(w.attn_norm, seed++, 0.5f, 1.5f);
    fill(w.ffn_norm, seed++, 0.5f, 1.5f);
    return w;
}

struct Block {
    ggml_context_ptr ctx;
    ggml_cgraph *    graph = nullptr;
    ggml_tensor *    ids = nullptr, *pos = nullptr, *mask = nullptr, *logits = nullptr;
};

// Embedding lookup, attention (rope NeoX on q, normal on k, masked soft_max),
// a gated feed-forward with silu and gelu, and the output head. SUM_ROWS
// (which Vulkan declines) sits in the middle, so the graph splits.
Block make_block(const Weights & w, int64_t T) {
    Block            b;
    ggml_init_params p = {256 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    b.ctx.reset(ggml_init(p));
    ggml_context * c = b.ctx.get();
    b.ids            = ggml_new_tensor_1d(c, GGML_TYPE_I32, T);
    b.pos            = ggml_new_tensor_1d(c, GGML_TYPE_I32, T);
    b.mask           = ggml_new_tensor_2d(c, GGML_TYPE_F16, T, T);
    for (ggml_tensor * t : {b.ids, b.pos, b.mask}) ggml_set_input(t);

    ggml_tensor * x = ggml_get_rows(c, w.tok, b.ids); // [dim, T]
    ggml_tensor * n = ggml_mul(c, ggml_rms_norm(c, x, 1e-5f), w.attn_norm);
    ggml_tensor * q = ggml_reshape_3d(c, ggml_mul_mat(c, w.wq, n), kHeadDim, kHeads, T);
    ggml_tensor * k = ggml_reshape_3d(c, ggml_mul_mat(c, w.wk, n), kHeadDim, kHeads, T);
    ggml_tensor * v = ggml_reshape_3d(c, ggml_mul_mat(c, w.wv, n), kHeadDim, kHeads, T);
    q = ggml_rope_ext(c, q, b.pos, nullptr, kHeadDim, GGML_ROPE_TYPE_NEOX, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
    k = ggml_rope_ext(c, k, b.pos, nullptr, kHeadDim, GGML_ROPE_TYPE_NORMAL, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
    ggml_tensor * qp  = ggml_permute(c, q, 0, 2, 1, 3);                  // [hd, T, H]
    ggml_tensor * kp  = ggml_cont(c, ggml_permute(c, k, 0, 2, 1, 3));   // [hd, T, H]
    ggml_tensor * kq  = ggml_mul_mat(c, kp, qp);                         // [T_k, T_q, H]
    kq                = ggml_soft_max_ext(c, kq, b.mask, 1.0f / std::sqrt(float(kHeadDim)), 0.0f);
    ggml_tensor * vt  = ggml_cont(c, ggml_permute(c, v, 1, 2, 0, 3));   // [T, hd, H]
    ggml_tensor * kqv = ggml_mul_mat(c, vt, kq);                         // [hd, T_q, H]
    ggml_tensor * att = ggml_cont_2d(c, ggml_permute(c, kqv, 0, 2, 1, 3), kDim, T);
    ggml_tensor * h   = ggml_add(c, x, ggml_mul_mat(c, w.wo, att));

    // Declined by Vulkan: runs on the CPU between Vulkan splits.
    ggml_tensor * energy = ggml_sum_rows(c, ggml_mul(c, h, h));         // [1, T]
    h                    = ggml_div(c, h, ggml_scale_bias(c, energy, 1.0f / float(kDim), 1.0f));

    ggml_tensor * m  = ggml_mul(c, ggml_rms_norm(c, h, 1e-5f), w.ffn_norm);
    ggml_tensor * ff = ggml_mul(c, ggml_silu(c, ggml_mul_mat(c, w.gate, m)), ggml_gelu(c, ggml_mul_mat(c, w.up, m)));
    h                = ggml_add(c, h, ggml_mul_mat(c, w.down, ff));
    b.logits         = ggml_mul_mat(c, w.head, ggml_norm(c, h, 1e-5f));
    ggml_set_output(b.logits);
    b.graph = ggml_new_graph(c);
    ggml_build_forward_expand(b.graph, b.logits);
    return b;
}

struct Inputs {
    std::vector<int32_t>     ids, pos;
    std::vector<ggml_fp16_t> mask;
};

Inputs make_inputs(int64_t T, unsigned seed) {
    Inputs       in;
    std::mt19937 rng(seed);
    for (int64_t i = 0; i < T; ++i) {
        in.ids.push_back(int32_t(rng() % kVocab));
        in.pos.push_back(int32_t(i + int64_t(seed % 7)));
    }
    for (int64_t i = 0; i < T; ++i) {
        for (int64_t j = 0; j < T; ++j) in.mask.push_back(ggml_fp32_to_fp16(j <= i ? 0.0f : -INFINITY));
    }
    return in;
}

void set_inputs(const Block & b, const Inputs & in) {
    ggml_backend_tensor_set(b.ids, in.ids.data(), 0, ggml_nbytes(b.ids));
    ggml_backend_tensor_set(b.pos, in.pos.data(), 0, ggml_nbytes(b.pos));
    ggml_backend_tensor_set(b.mask, in.mask.data(), 0, ggml_nbytes(b.mask));
}

class VulkanSched : public ::testing::Test {
  protected:
    void SetUp() override {
        SKIP_WITHOUT_VULKAN();
        vk.reset(ggml_backend_vk_init(0));
        cpu.reset(ggml_backend_cpu_init());
        ASSERT_TRUE(vk && cpu);
        ggml_backend_cpu_set_n_threads(cpu.get(), 2);
    }

    // logits of the block on the CPU alone, weights in CPU memory.
    std::vector<float> cpu_logits(const Weights & w, int64_t T, const Inputs & in) {
        ggml_backend_t       b = cpu.get();
        ggml_backend_sched_t s = ggml_backend_sched_new(&b, nullptr, 1, GGML_DEFAULT_GRAPH_SIZE, false, true);
        Block                blk = make_block(w, T);
        EXPECT_TRUE(ggml_backend_sched_alloc_graph(s, blk.graph));
        set_inputs(blk, in);
        EXPECT_EQ(ggml_backend_sched_graph_compute(s, blk.graph), GGML_STATUS_SUCCESS);
        std::vector<float> out = read_f32(blk.logits);
        ggml_backend_sched_free(s);
        return out;
    }

    ggml_backend_ptr vk, cpu;
};

// Quantized weights: the CPU multiplies 8-bit quantized activations, Vulkan
// F32 ones.
constexpr double kBlockTolerance = 2e-3;

TEST_F(VulkanSched, TransformerBlockMatchesTheCpu) {
    const Weights on_vk  = make_weights(ggml_backend_vk_buffer_type(0));
    const Weights on_cpu = make_weights(ggml_backend_cpu_buffer_type());
    for (int64_t T : {1, 7, 40}) {
        SCOPED_TRACE("tokens " + std::to_string(T));
        const Inputs           in = make_inputs(T, unsigned(T));
        std::vector<ggml_backend_t> backends = {vk.get(), cpu.get()};
        ggml_backend_sched_t s = ggml_backend_sched_new(backends.data(), nullptr, 2, GGML_DEFAULT_GRAPH_SIZE, false, true);
        Block                blk = make_block(on_vk, T);
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, blk.graph));
        set_inputs(blk, in);
        ASSERT_EQ(ggml_backend_sched_graph_compute(s, blk.graph), GGML_STATUS_SUCCESS);
        const std::vector<float> got = read_f32(blk.logits);

        // Splits where Vulkan declines; every supported node of the weights'
        // products ran on Vulkan, the declined ones on the CPU.
        EXPECT_GT(ggml_backend_sched_get_n_splits(s), 1);
        int on_vk_nodes = 0;
        for (int i = 0; i < ggml_graph_n_nodes(blk.graph); ++i) {
            ggml_tensor *  node = ggml_graph_node(blk.graph, i);
            ggml_backend_t on   = ggml_backend_sched_get_tensor_backend(s, node);
            if (node->op == GGML_OP_SUM_ROWS) {
                EXPECT_EQ(on, cpu.get()) << ggml_op_desc(node);
            }
            if (node->op == GGML_OP_MUL_MAT && node->src[0]->buffer == on_vk.buf.get()) {
                EXPECT_EQ(on, vk.get()) << node->src[0]->name;
            }
            on_vk_nodes += on == vk.get();
        }
        EXPECT_GT(on_vk_nodes, 10);
        ggml_backend_sched_free(s);

        const std::vector<float> want = cpu_logits(on_cpu, T, in);
        ASSERT_EQ(got.size(), want.size());
        EXPECT_LE(nmse(got, want), kBlockTolerance);
    }
}

TEST_F(VulkanSched, PipelineParallelOverConsecutiveGraphs) {
    const Weights on_vk  = make_weights(ggml_backend_vk_buffer_type(0));
    const Weights on_cpu = make_weights(ggml_backend_cpu_buffer_type());
    const int64_t T      = 12;
    std::vector<ggml_backend_t> backends = {vk.get(), cpu.get()};
    ggml_backend_sched_t s = ggml_backend_sched_new(backends.data(), nullptr, 2, GGML_DEFAULT_GRAPH_SIZE, true, true);
    ASSERT_NE(s, nullptr);
    EXPECT_GT(ggml_backend_sched_get_n_copies(s), 1);
    Block blk = make_block(on_vk, T);
    for (unsigned round = 0; round < 5; ++round) {
        SCOPED_TRACE("graph " + std::to_string(round));
        const Inputs in = make_inputs(T, 20 + round);
        ggml_backend_sched_reset(s); // the next pipeline copy
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, blk.graph));
        set_inputs(blk, in);
        ASSERT_EQ(ggml_backend_sched_graph_compute_async(s, blk.graph), GGML_STATUS_SUCCESS);
        ggml_backend_sched_synchronize(s);
        EXPECT_GT(ggml_backend_sched_get_n_splits(s), 1);
        const std::vector<float> got  = read_f32(blk.logits);
        const std::vector<float> want = cpu_logits(on_cpu, T, in);
        EXPECT_LE(nmse(got, want), kBlockTolerance);
    }
    ggml_backend_sched_free(s);
}

TEST_F(VulkanSched, LargeProductsOfHostWeightsAreOffloaded) {
    // Weights in CPU memory: a batch of 64 moves the products to Vulkan
    // (the weights are copied there), one token stays on the CPU.
    const Weights on_cpu = make_weights(ggml_backend_cpu_buffer_type());
    for (int64_t T : {1, 64}) {
        SCOPED_TRACE("tokens " + std::to_string(T));
        std::vector<ggml_backend_t> backends = {vk.get(), cpu.get()};
        ggml_backend_sched_t s = ggml_backend_sched_new(backends.data(), nullptr, 2, GGML_DEFAULT_GRAPH_SIZE, false, true);
        Block                blk = make_block(on_cpu, T);
        const Inputs         in  = make_inputs(T, 3);
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, blk.graph));
        set_inputs(blk, in);
        ASSERT_EQ(ggml_backend_sched_graph_compute(s, blk.graph), GGML_STATUS_SUCCESS);
        const std::vector<float> got = read_f32(blk.logits);
        int weight_products_on_vk = 0;
        for (int i = 0; i < ggml_graph_n_nodes(blk.graph); ++i) {
            ggml_tensor * node = ggml_graph_node(blk.graph, i);
            if (node->op == GGML_OP_MUL_MAT && node->src[0]->buffer == on_cpu.buf.get()) {
                weight_products_on_vk += ggml_backend_sched_get_tensor_backend(s, node) == vk.get();
            }
        }
        if (T == 1) {
            EXPECT_EQ(weight_products_on_vk, 0);
        } else {
            EXPECT_GT(weight_products_on_vk, 0);
        }
        ggml_backend_sched_free(s);
        EXPECT_LE(nmse(got, cpu_logits(on_cpu, T, in)), kBlockTolerance);
    }
}

} // namespace
