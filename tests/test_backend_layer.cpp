// The backend layer beyond the CPU: devices, non-host buffers, multi-buffers,
// copies between memories, events, graph copies and backend comparison; with
// the error path of each. Plugin loading is tested in test_backend_loader.cpp.
//
// The second device is the test plugin (tests/plugin): memory behind the
// buffer interface, an asynchronous stream, events, a configurable op set.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend_test_helpers.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml-cpu.h"

using namespace loomtest;

namespace {

// Death tests fork; the test device runs stream threads, so the child starts afresh.
void use_threadsafe_death_tests() {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
}

class BackendLayer : public ::testing::Test {
  protected:
    void SetUp() override {
        reg_ = testdev_reg();
        ASSERT_NE(reg_, nullptr) << "cannot load " << LOOM_TESTDEV_PATH;
        testdev_reset();
        dev0_ = ggml_backend_dev_by_name("TestDev0");
        dev1_ = ggml_backend_dev_by_name("TestDev1");
        cpu_  = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
        ASSERT_NE(dev0_, nullptr);
        ASSERT_NE(dev1_, nullptr);
        ASSERT_NE(cpu_, nullptr);
    }
    void TearDown() override { testdev_reset(); }

    ggml_backend_reg_t testdev() const { return reg_; }

    ggml_backend_reg_t reg_  = nullptr;
    ggml_backend_dev_t dev0_ = nullptr;
    ggml_backend_dev_t dev1_ = nullptr;
    ggml_backend_dev_t cpu_  = nullptr;
};

std::vector<float> random_floats(size_t n, unsigned seed) {
    std::mt19937                          rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float>                    v(n);
    for (float & x : v) {
        x = dist(rng);
    }
    return v;
}

std::vector<float> get_floats(const ggml_tensor * t) {
    std::vector<float> v(size_t(ggml_nelements(t)));
    ggml_backend_tensor_get(t, v.data(), 0, ggml_nbytes(t));
    return v;
}

// One f32 tensor of n elements alone in a new buffer of buft.
struct PlacedTensor {
    ggml_context_ptr        ctx;
    ggml_backend_buffer_ptr buffer;
    ggml_tensor *           t = nullptr;
};

PlacedTensor place(ggml_backend_buffer_type_t buft, int64_t n, const char * name) {
    PlacedTensor p;
    p.ctx = no_alloc_context(4);
    p.t   = ggml_new_tensor_1d(p.ctx.get(), GGML_TYPE_F32, n);
    ggml_set_name(p.t, name);
    p.buffer.reset(ggml_backend_alloc_ctx_tensors_from_buft(p.ctx.get(), buft));
    return p;
}

} // namespace

TEST_F(BackendLayer, DeviceProperties) {
    ggml_backend_dev_props props{};
    ggml_backend_dev_get_props(dev0_, &props);
    EXPECT_STREQ(props.name, "TestDev0");
    EXPECT_NE(std::string(props.description).find("test device"), std::string::npos);
    EXPECT_EQ(props.type, GGML_BACKEND_DEVICE_TYPE_GPU);
    EXPECT_TRUE(props.caps.async);
    EXPECT_TRUE(props.caps.events);
    EXPECT_FALSE(props.caps.host_buffer);
    EXPECT_FALSE(props.caps.buffer_from_host_ptr);
    EXPECT_EQ(props.memory_total, size_t(1) << 30);
    EXPECT_LE(props.memory_free, props.memory_total);
    EXPECT_EQ(ggml_backend_dev_host_buffer_type(dev0_), nullptr);
    float host[4];
    EXPECT_EQ(ggml_backend_dev_buffer_from_host_ptr(dev0_, host, sizeof(host), sizeof(host)), nullptr);

    ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(dev0_);
    EXPECT_EQ(ggml_backend_buft_get_device(buft), dev0_);
    EXPECT_FALSE(ggml_backend_buft_is_host(buft));
    EXPECT_TRUE(ggml_backend_dev_supports_buft(dev0_, buft));
    EXPECT_FALSE(ggml_backend_dev_supports_buft(dev1_, buft));
    EXPECT_FALSE(ggml_backend_dev_supports_buft(dev0_, ggml_backend_cpu_buffer_type()));
    EXPECT_FALSE(ggml_backend_dev_supports_buft(cpu_, buft));

    EXPECT_TRUE(testdev_configure(dev0_, "memory", "4096"));
    ggml_backend_dev_get_props(dev0_, &props);
    EXPECT_EQ(props.memory_total, 4096u);
    EXPECT_FALSE(testdev_configure(dev0_, "no such key", "1"));
    EXPECT_FALSE(testdev_configure(dev0_, "ops", "NOT_AN_OP"));
    EXPECT_FALSE(testdev_configure(dev0_, "memory", "lots"));
}

// ---- devices and buffers ---------------------------------------------------------------

TEST_F(BackendLayer, ZeroSizeBuffersAreValid) {
    for (ggml_backend_dev_t dev : {cpu_, dev0_}) {
        SCOPED_TRACE(ggml_backend_dev_name(dev));
        ggml_backend_buffer_ptr buf(ggml_backend_buft_alloc_buffer(ggml_backend_dev_buffer_type(dev), 0));
        ASSERT_NE(buf, nullptr);
        EXPECT_EQ(ggml_backend_buffer_get_size(buf.get()), 0u);
        EXPECT_EQ(ggml_backend_buffer_get_base(buf.get()), nullptr);
        ggml_backend_buffer_clear(buf.get(), 0);
        ggml_backend_buffer_reset(buf.get());
        EXPECT_FALSE(ggml_backend_buffer_is_multi_buffer(buf.get()));
    }
}

TEST_F(BackendLayer, NonHostBufferKeepsDataBehindItsInterface) {
    ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(dev0_);
    EXPECT_STREQ(ggml_backend_buft_name(buft), "TestDev0");
    EXPECT_EQ(ggml_backend_buft_get_alignment(buft), 128u);

    ggml_context_ptr ctx = no_alloc_context();
    ggml_tensor *    a   = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 7, 5);
    ggml_set_name(a, "a");
    // A view of rows 1..3 and one of column 2.
    ggml_tensor * rows = ggml_view_2d(ctx.get(), a, 7, 3, a->nb[1], a->nb[1]);
    ggml_tensor * col  = ggml_view_2d(ctx.get(), a, 1, 5, a->nb[1], 2 * sizeof(float));
    EXPECT_GE(ggml_backend_buft_get_alloc_size(buft, a), ggml_nbytes(a));

    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors_from_buft(ctx.get(), buft));
    ASSERT_NE(buf, nullptr);
    EXPECT_FALSE(ggml_backend_buffer_is_host(buf.get()));
    EXPECT_EQ(a->buffer, buf.get());
    EXPECT_EQ(rows->buffer, buf.get());
    EXPECT_NE(ggml_backend_buffer_get_base(buf.get()), nullptr);

    const std::vector<float> v = random_floats(35, 1);
    ggml_backend_tensor_set(a, v.data(), 0, ggml_nbytes(a));
    EXPECT_EQ(get_floats(a), v);

    // Writes through a view land in the source.
    const std::vector<float> w = random_floats(21, 2);
    ggml_backend_tensor_set(rows, w.data(), 0, ggml_nbytes(rows));
    std::vector<float> expect = v;
    std::copy(w.begin(), w.end(), expect.begin() + 7);
    EXPECT_EQ(get_floats(a), expect);

    // 2-d transfers: the column, one element per row.
    std::vector<float> column(5);
    ggml_backend_tensor_get_2d(col, column.data(), 0, sizeof(float), 5, a->nb[1], sizeof(float));
    for (int r = 0; r < 5; ++r) {
        EXPECT_EQ(column[size_t(r)], expect[size_t(r * 7 + 2)]);
    }
    const float minus[5] = {-1, -2, -3, -4, -5};
    ggml_backend_tensor_set_2d(col, minus, 0, sizeof(float), 5, a->nb[1], sizeof(float));
    for (int r = 0; r < 5; ++r) {
        expect[size_t(r * 7 + 2)] = minus[r];
    }
    EXPECT_EQ(get_floats(a), expect);

    ggml_backend_tensor_memset(a, 0, 4 * sizeof(float), 3 * sizeof(float));
    std::fill(expect.begin() + 4, expect.begin() + 7, 0.0f);
    EXPECT_EQ(get_floats(a), expect);

    ggml_backend_buffer_clear(buf.get(), 0);
    EXPECT_EQ(get_floats(a), std::vector<float>(35, 0.0f));

    ggml_backend_buffer_set_usage(buf.get(), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    EXPECT_EQ(ggml_backend_buffer_get_usage(buf.get()), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    EXPECT_EQ(ggml_backend_buffer_get_type(buf.get()), buft);
}

TEST_F(BackendLayer, BufferLimitsFailCleanly) {
    ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(dev0_);
    ASSERT_TRUE(testdev_configure(dev0_, "max_buffer_size", "4096"));
    EXPECT_EQ(ggml_backend_buft_get_max_size(buft), 4096u);
    {
        LogCapture log;
        EXPECT_EQ(ggml_backend_buft_alloc_buffer(buft, 8192), nullptr);
        EXPECT_TRUE(log.contains("exceeds the maximum")) << log.text();
    }
    ASSERT_TRUE(testdev_configure(dev0_, "max_buffer_size", "0"));
    ASSERT_TRUE(testdev_configure(dev0_, "memory", "65536"));
    ggml_backend_buffer_ptr first(ggml_backend_buft_alloc_buffer(buft, 40000));
    ASSERT_NE(first, nullptr);
    size_t free = 0, total = 0;
    ggml_backend_dev_memory(dev0_, &free, &total);
    EXPECT_EQ(free, 65536u - 40000u);
    {
        LogCapture log;
        EXPECT_EQ(ggml_backend_buft_alloc_buffer(buft, 40000), nullptr);
        EXPECT_TRUE(log.contains("out of device memory")) << log.text();
    }
    first.reset();
    ggml_backend_buffer_ptr second(ggml_backend_buft_alloc_buffer(buft, 40000));
    EXPECT_NE(second, nullptr);

    // Allocating a context's tensors fails as a whole, leaving them unallocated.
    ggml_context_ptr ctx = no_alloc_context();
    ggml_tensor *    big = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 100000);
    LogCapture       log;
    EXPECT_EQ(ggml_backend_alloc_ctx_tensors_from_buft(ctx.get(), buft), nullptr);
    EXPECT_EQ(big->buffer, nullptr);
    EXPECT_EQ(big->data, nullptr);
}

// The streamed 2D transfers: every other float of a tensor in each device's
// memory, written and read back in the backend's stream.
TEST_F(BackendLayer, TwoDimensionalTransfersInTheStream) {
    for (ggml_backend_dev_t dev : {cpu_, dev0_}) {
        SCOPED_TRACE(ggml_backend_dev_name(dev));
        ggml_backend_ptr backend(ggml_backend_dev_init(dev, nullptr));
        ASSERT_NE(backend, nullptr);
        PlacedTensor p = place(ggml_backend_dev_buffer_type(dev), 12, "rows");
        ASSERT_NE(p.buffer, nullptr);
        const std::vector<float> zeros(12, 0.0f);
        ggml_backend_tensor_set(p.t, zeros.data(), 0, ggml_nbytes(p.t));
        const float in[6] = {1, 2, 3, 4, 5, 6};
        ggml_backend_tensor_set_2d_async(backend.get(), p.t, in, sizeof(float), sizeof(float), 6, 2 * sizeof(float),
                                         sizeof(float));
        float out[12] = {};
        ggml_backend_tensor_get_2d_async(backend.get(), p.t, out, sizeof(float), sizeof(float), 6, 2 * sizeof(float),
                                         2 * sizeof(float));
        ggml_backend_synchronize(backend.get());
        std::vector<float> all(12);
        ggml_backend_tensor_get(p.t, all.data(), 0, ggml_nbytes(p.t));
        for (int i = 0; i < 6; ++i) {
            EXPECT_EQ(all[size_t(2 * i)], 0.0f);
            EXPECT_EQ(all[size_t(2 * i + 1)], in[i]);
            EXPECT_EQ(out[2 * i], in[i]);
            EXPECT_EQ(out[2 * i + 1], 0.0f);
        }
        use_threadsafe_death_tests();
        EXPECT_DEATH(ggml_backend_tensor_set_2d_async(backend.get(), p.t, in, 8, 4, 3, 20, 4),
                     "ggml_backend_tensor_set_2d_async.*out of bounds.*rows");
        EXPECT_DEATH(ggml_backend_tensor_get_2d_async(backend.get(), p.t, out, 0, 4, 2, SIZE_MAX / 2, 4),
                     "ggml_backend_tensor_get_2d_async.*out of bounds.*rows");
    }
}

TEST_F(BackendLayer, OutOfBoundsAccessAbortsNamingTheTensor) {
    use_threadsafe_death_tests();
    for (ggml_backend_dev_t dev : {cpu_, dev0_}) {
        SCOPED_TRACE(ggml_backend_dev_name(dev));
        PlacedTensor p = place(ggml_backend_dev_buffer_type(dev), 8, "victim");
        ASSERT_NE(p.buffer, nullptr);
        float data[16] = {};
        EXPECT_DEATH(ggml_backend_tensor_set(p.t, data, 4, 32), "ggml_backend_tensor_set.*out of bounds.*victim");
        EXPECT_DEATH(ggml_backend_tensor_get(p.t, data, 0, 36), "ggml_backend_tensor_get.*out of bounds.*victim");
        EXPECT_DEATH(ggml_backend_tensor_memset(p.t, 0, 33, 0), "ggml_backend_tensor_memset.*victim");
        EXPECT_DEATH(ggml_backend_tensor_set_2d(p.t, data, 0, 8, 3, 16, 8), "ggml_backend_tensor_set_2d.*victim");
        EXPECT_DEATH(ggml_backend_tensor_get_2d(p.t, data, 8, 8, 2, 20, 8), "ggml_backend_tensor_get_2d.*victim");
        // In bounds, right up to the end: fine.
        ggml_backend_tensor_set(p.t, data, 0, 32);
        ggml_backend_tensor_get(p.t, data, 28, 4);
        ggml_backend_tensor_set(p.t, data, 32, 0);
    }
}

TEST_F(BackendLayer, UnallocatedTensorAccessAborts) {
    use_threadsafe_death_tests();
    ggml_context_ptr ctx = no_alloc_context();
    ggml_tensor *    t   = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 4);
    ggml_set_name(t, "nowhere");
    float data[4] = {};
    EXPECT_DEATH(ggml_backend_tensor_set(t, data, 0, sizeof(data)), "nowhere.*no buffer");
}

TEST_F(BackendLayer, TensorAllocAndViewInit) {
    use_threadsafe_death_tests();
    ggml_backend_buffer_ptr buf(ggml_backend_buft_alloc_buffer(ggml_backend_dev_buffer_type(dev0_), 1024));
    ASSERT_NE(buf, nullptr);
    char *           base = static_cast<char *>(ggml_backend_buffer_get_base(buf.get()));
    ggml_context_ptr ctx  = no_alloc_context();
    ggml_tensor *    t    = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 16);
    ggml_tensor *    v    = ggml_view_1d(ctx.get(), t, 4, 8 * sizeof(float));
    ASSERT_EQ(ggml_backend_tensor_alloc(buf.get(), t, base + 256), GGML_STATUS_SUCCESS);
    EXPECT_EQ(t->buffer, buf.get());
    ASSERT_EQ(ggml_backend_view_init(v), GGML_STATUS_SUCCESS);
    EXPECT_EQ(v->buffer, buf.get());
    EXPECT_EQ(v->data, base + 256 + 8 * sizeof(float));
    const float four[4] = {1, 2, 3, 4};
    ggml_backend_tensor_set(v, four, 0, sizeof(four));
    std::vector<float> all = get_floats(t);
    EXPECT_EQ(all[8], 1.0f);
    EXPECT_EQ(all[11], 4.0f);

    ggml_tensor * u = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 64);
    ggml_set_name(u, "too_far");
    EXPECT_DEATH(ggml_backend_tensor_alloc(buf.get(), u, base + 1024 - 128), "too_far.*does not fit");
}

// ---- multi-buffers ---------------------------------------------------------

TEST_F(BackendLayer, MultiBufferOwnsItsPartsAndPassesUsageOn) {
    ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(dev0_);
    ggml_backend_buffer_t      parts[3];
    for (size_t i = 0; i < 3; ++i) {
        parts[i] = ggml_backend_buft_alloc_buffer(buft, 512 * (i + 1));
        ASSERT_NE(parts[i], nullptr);
    }
    ggml_backend_buffer_ptr multi(ggml_backend_multi_buffer_alloc_buffer(parts, 3));
    ASSERT_NE(multi, nullptr);
    EXPECT_TRUE(ggml_backend_buffer_is_multi_buffer(multi.get()));
    EXPECT_FALSE(ggml_backend_buffer_is_multi_buffer(parts[0]));
    EXPECT_EQ(ggml_backend_buffer_get_size(multi.get()), 512u + 1024u + 1536u);
    EXPECT_EQ(ggml_backend_buffer_get_type(multi.get()), buft);
    EXPECT_FALSE(ggml_backend_buffer_is_host(multi.get()));

    ggml_backend_buffer_set_usage(multi.get(), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    for (ggml_backend_buffer_t p : parts) {
        EXPECT_EQ(ggml_backend_buffer_get_usage(p), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    }
    ggml_backend_multi_buffer_set_usage(multi.get(), GGML_BACKEND_BUFFER_USAGE_COMPUTE);
    EXPECT_EQ(ggml_backend_buffer_get_usage(multi.get()), GGML_BACKEND_BUFFER_USAGE_COMPUTE);
    for (ggml_backend_buffer_t p : parts) {
        EXPECT_EQ(ggml_backend_buffer_get_usage(p), GGML_BACKEND_BUFFER_USAGE_COMPUTE);
    }

    // Tensors live in the parts; clearing the multi-buffer clears every part.
    ggml_context_ptr ctx = no_alloc_context();
    ggml_tensor *    t[3];
    for (size_t i = 0; i < 3; ++i) {
        t[i] = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 32);
        ASSERT_EQ(ggml_backend_tensor_alloc(parts[i], t[i], ggml_backend_buffer_get_base(parts[i])),
                  GGML_STATUS_SUCCESS);
        const std::vector<float> v = random_floats(32, unsigned(i));
        ggml_backend_tensor_set(t[i], v.data(), 0, ggml_nbytes(t[i]));
    }
    ggml_backend_buffer_clear(multi.get(), 0);
    for (ggml_tensor * x : t) {
        EXPECT_EQ(get_floats(x), std::vector<float>(32, 0.0f));
    }
    // Freeing the multi-buffer frees the parts (the sanitizer build checks).
}

TEST_F(BackendLayer, MultiBufferMisuseAborts) {
    use_threadsafe_death_tests();
    EXPECT_DEATH(ggml_backend_multi_buffer_alloc_buffer(nullptr, 0), "no buffers given");
    ggml_backend_buffer_ptr a(ggml_backend_buft_alloc_buffer(ggml_backend_dev_buffer_type(dev0_), 64));
    ggml_backend_buffer_ptr b(ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), 64));
    ggml_backend_buffer_t   mixed[2] = {a.get(), b.get()};
    EXPECT_DEATH(ggml_backend_multi_buffer_alloc_buffer(mixed, 2), "one type");
    EXPECT_DEATH(ggml_backend_multi_buffer_set_usage(a.get(), GGML_BACKEND_BUFFER_USAGE_WEIGHTS),
                 "not a multi-buffer");
}

// ---- copies ----------------------------------------------------------------

TEST_F(BackendLayer, CopiesAcrossHostAndNonHostMemory) {
    const int64_t      n   = 1000;
    PlacedTensor       h1  = place(ggml_backend_cpu_buffer_type(), n, "h1");
    PlacedTensor       d0a = place(ggml_backend_dev_buffer_type(dev0_), n, "d0a");
    PlacedTensor       d0b = place(ggml_backend_dev_buffer_type(dev0_), n, "d0b");
    PlacedTensor       d1  = place(ggml_backend_dev_buffer_type(dev1_), n, "d1");
    PlacedTensor       h2  = place(ggml_backend_cpu_buffer_type(), n, "h2");
    const std::vector<float> v = random_floats(size_t(n), 3);
    ggml_backend_tensor_set(h1.t, v.data(), 0, ggml_nbytes(h1.t));

    ggml_backend_tensor_copy(h1.t, d0a.t);  // host -> device
    ggml_backend_tensor_copy(d0a.t, d0b.t); // within a device
    ggml_backend_tensor_copy(d0b.t, d1.t);  // between devices: staged through the host
    ggml_backend_tensor_copy(d1.t, h2.t);   // device -> host
    EXPECT_EQ(get_floats(d0a.t), v);
    EXPECT_EQ(get_floats(d0b.t), v);
    EXPECT_EQ(get_floats(d1.t), v);
    EXPECT_EQ(get_floats(h2.t), v);

    // Into a view of device memory.
    ggml_context_ptr ctx  = no_alloc_context();
    ggml_tensor *    part = ggml_view_1d(ctx.get(), d1.t, 10, 20 * sizeof(float));
    ggml_tensor *    src  = ggml_view_1d(ctx.get(), h1.t, 10, 0);
    ASSERT_EQ(ggml_backend_view_init(part), GGML_STATUS_SUCCESS);
    ASSERT_EQ(ggml_backend_view_init(src), GGML_STATUS_SUCCESS);
    ggml_backend_tensor_copy(src, part);
    std::vector<float> expect = v;
    std::copy(v.begin(), v.begin() + 10, expect.begin() + 20);
    EXPECT_EQ(get_floats(d1.t), expect);
}

TEST_F(BackendLayer, AsyncTransfersAndCopies) {
    ggml_backend_ptr b0(ggml_backend_dev_init(dev0_, nullptr));
    ggml_backend_ptr b1(ggml_backend_dev_init(dev1_, nullptr));
    ggml_backend_ptr cpu(ggml_backend_cpu_init());
    ASSERT_NE(b0, nullptr);
    ASSERT_NE(b1, nullptr);
    ASSERT_NE(cpu, nullptr);
    const int64_t            n  = 4096;
    PlacedTensor             h1 = place(ggml_backend_cpu_buffer_type(), n, "h1");
    PlacedTensor             d0 = place(ggml_backend_dev_buffer_type(dev0_), n, "d0");
    PlacedTensor             d1 = place(ggml_backend_dev_buffer_type(dev1_), n, "d1");
    PlacedTensor             h2 = place(ggml_backend_cpu_buffer_type(), n, "h2");
    const std::vector<float> v  = random_floats(size_t(n), 4);
    ggml_backend_tensor_set(h1.t, v.data(), 0, ggml_nbytes(h1.t));

    ggml_backend_tensor_copy_async(cpu.get(), b0.get(), h1.t, d0.t); // on b0's stream
    ggml_backend_tensor_copy_async(b0.get(), b1.get(), d0.t, d1.t);  // after b0's work, on b1's stream
    ggml_backend_tensor_copy_async(b1.get(), cpu.get(), d1.t, h2.t); // the CPU has no async copy: waits, copies
    EXPECT_EQ(get_floats(h2.t), v);

    // set/get on the stream complete by synchronize.
    std::vector<float> w = random_floats(size_t(n), 5);
    std::vector<float> back(size_t(n), 0.0f);
    ggml_backend_tensor_set_async(b0.get(), d0.t, w.data(), 0, ggml_nbytes(d0.t));
    ggml_backend_tensor_get_async(b0.get(), d0.t, back.data(), 0, ggml_nbytes(d0.t));
    ggml_backend_synchronize(b0.get());
    EXPECT_EQ(back, w);

    // A tensor outside the stream's device: done at once.
    ggml_backend_tensor_set_async(b0.get(), h2.t, w.data(), 0, ggml_nbytes(h2.t));
    EXPECT_EQ(get_floats(h2.t), w);
}

TEST_F(BackendLayer, CopyOfDifferentShapesAborts) {
    use_threadsafe_death_tests();
    PlacedTensor a = place(ggml_backend_dev_buffer_type(dev0_), 8, "a8");
    PlacedTensor b = place(ggml_backend_cpu_buffer_type(), 9, "b9");
    EXPECT_DEATH(ggml_backend_tensor_copy(a.t, b.t), "a8.*b9.*differ");
}

// ---- events ----------------------------------------------------------------

TEST_F(BackendLayer, TheCpuHasNoEvents) {
    EXPECT_EQ(ggml_backend_event_new(cpu_), nullptr);
    EXPECT_EQ(ggml_backend_event_new(nullptr), nullptr);
    ggml_backend_event_free(nullptr);
    ggml_backend_dev_props props{};
    ggml_backend_dev_get_props(cpu_, &props);
    EXPECT_FALSE(props.caps.events);
}

TEST_F(BackendLayer, EventsOrderStreamsAndTheHost) {
    ggml_backend_ptr b0(ggml_backend_dev_init(dev0_, nullptr));
    ggml_backend_ptr b1(ggml_backend_dev_init(dev1_, nullptr));
    ggml_backend_ptr cpu(ggml_backend_cpu_init());
    ggml_backend_event_t ev = ggml_backend_event_new(dev0_);
    ASSERT_NE(ev, nullptr);

    // Enough data that the stream is still copying when the host looks.
    const int64_t            n = 1 << 22;
    PlacedTensor             d = place(ggml_backend_dev_buffer_type(dev0_), n, "big");
    const std::vector<float> v = random_floats(size_t(n), 6);
    for (int round = 0; round < 3; ++round) {
        ggml_backend_tensor_set_async(b0.get(), d.t, v.data(), 0, ggml_nbytes(d.t));
        ggml_backend_event_record(ev, b0.get());
        switch (round) {
            case 0: ggml_backend_event_synchronize(ev); break;      // the host waits
            case 1: ggml_backend_event_wait(cpu.get(), ev); break;  // a backend without events waits on the host
            case 2:                                                 // another stream waits, the host waits for it
                ggml_backend_event_wait(b1.get(), ev);
                ggml_backend_synchronize(b1.get());
                break;
        }
        std::vector<float> got(static_cast<size_t>(n));
        ggml_backend_tensor_get(d.t, got.data(), 0, ggml_nbytes(d.t));
        EXPECT_TRUE(got == v) << "round " << round;
        ggml_backend_tensor_memset(d.t, 0, 0, ggml_nbytes(d.t));
    }
    // An event never recorded is complete.
    ggml_backend_event_t fresh = ggml_backend_event_new(dev1_);
    ggml_backend_event_synchronize(fresh);
    ggml_backend_event_wait(b0.get(), fresh);
    ggml_backend_synchronize(b0.get());
    ggml_backend_event_free(fresh);
    ggml_backend_event_free(ev);
}

TEST_F(BackendLayer, RecordingOnAnotherDevicesBackendAborts) {
    use_threadsafe_death_tests();
    ggml_backend_ptr     cpu(ggml_backend_cpu_init());
    ggml_backend_event_t ev = ggml_backend_event_new(dev0_);
    EXPECT_DEATH(ggml_backend_event_record(ev, cpu.get()), "TestDev0.*CPU");
    EXPECT_DEATH(ggml_backend_event_record(nullptr, cpu.get()), "NULL event");
    EXPECT_DEATH(ggml_backend_event_synchronize(nullptr), "NULL event");
    ggml_backend_event_free(ev);
}

// ---- computing on the test device ------------------------------------------

namespace {

// a + b and then (a + b) * b, all f32 [n].
struct SmallGraph {
    ggml_context_ptr ctx;
    ggml_tensor *    a   = nullptr;
    ggml_tensor *    b   = nullptr;
    ggml_tensor *    sum = nullptr;
    ggml_tensor *    out = nullptr;
    ggml_cgraph *    gf  = nullptr;
};

SmallGraph small_graph(int64_t n) {
    SmallGraph g;
    g.ctx = no_alloc_context();
    g.a   = ggml_new_tensor_1d(g.ctx.get(), GGML_TYPE_F32, n);
    g.b   = ggml_new_tensor_1d(g.ctx.get(), GGML_TYPE_F32, n);
    g.sum = ggml_add(g.ctx.get(), g.a, g.b);
    g.out = ggml_mul(g.ctx.get(), g.sum, g.b);
    g.gf  = ggml_new_graph(g.ctx.get());
    ggml_build_forward_expand(g.gf, g.out);
    return g;
}

} // namespace

TEST_F(BackendLayer, TestDeviceComputesOnlyWhatItSupports) {
    SmallGraph              g = small_graph(100);
    ggml_backend_ptr        b0(ggml_backend_dev_init(dev0_, nullptr));
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(g.ctx.get(), b0.get()));
    ASSERT_NE(buf, nullptr);
    const std::vector<float> av = random_floats(100, 7), bv = random_floats(100, 8);
    ggml_backend_tensor_set(g.a, av.data(), 0, ggml_nbytes(g.a));
    ggml_backend_tensor_set(g.b, bv.data(), 0, ggml_nbytes(g.b));

    ASSERT_TRUE(testdev_configure(dev0_, "ops", "add"));
    EXPECT_TRUE(ggml_backend_supports_op(b0.get(), g.sum));
    EXPECT_FALSE(ggml_backend_supports_op(b0.get(), g.out));
    {
        LogCapture log;
        EXPECT_EQ(ggml_backend_graph_compute(b0.get(), g.gf), GGML_STATUS_FAILED);
        EXPECT_TRUE(log.contains("MUL")) << log.text();
    }

    ASSERT_TRUE(testdev_configure(dev0_, "ops", "ADD,MUL"));
    ASSERT_EQ(ggml_backend_graph_compute(b0.get(), g.gf), GGML_STATUS_SUCCESS);
    std::vector<float> got = get_floats(g.out);
    for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_FLOAT_EQ(got[i], (av[i] + bv[i]) * bv[i]) << i;
    }

    // The default plan of a backend without plans of its own.
    ggml_backend_tensor_memset(g.out, 0, 0, ggml_nbytes(g.out));
    ggml_backend_graph_plan_t plan = ggml_backend_graph_plan_create(b0.get(), g.gf);
    ASSERT_NE(plan, nullptr);
    EXPECT_EQ(ggml_backend_graph_plan_compute(b0.get(), plan), GGML_STATUS_SUCCESS);
    ggml_backend_synchronize(b0.get()); // a plan computes on the stream, like graph_compute_async
    ggml_backend_graph_plan_free(b0.get(), plan);
    EXPECT_EQ(get_floats(g.out), got);

    // offload_op follows its own setting.
    EXPECT_FALSE(ggml_backend_offload_op(b0.get(), g.out));
    ASSERT_TRUE(testdev_configure(dev0_, "offload_ops", "MUL"));
    EXPECT_TRUE(ggml_backend_dev_offload_op(dev0_, g.out));
    EXPECT_FALSE(ggml_backend_dev_offload_op(dev0_, g.sum));
}

// supports_op says whether a device computes an op; which memory it can
// read is supports_buft's answer. Computing operands in other memory fails
// cleanly (the scheduler copies them first).
TEST_F(BackendLayer, OperandsInOtherMemoryFailCleanly) {
    SmallGraph              g = small_graph(16);
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors_from_buft(g.ctx.get(), ggml_backend_cpu_buffer_type()));
    ASSERT_NE(buf, nullptr);
    EXPECT_TRUE(ggml_backend_dev_supports_op(dev0_, g.sum));
    EXPECT_TRUE(ggml_backend_dev_supports_op(cpu_, g.sum));
    EXPECT_FALSE(ggml_backend_dev_supports_buft(dev0_, ggml_backend_cpu_buffer_type()));
    EXPECT_TRUE(ggml_backend_dev_supports_buft(dev0_, ggml_backend_dev_buffer_type(dev0_)));
    EXPECT_FALSE(ggml_backend_dev_supports_buft(dev1_, ggml_backend_dev_buffer_type(dev0_)));
    EXPECT_FALSE(ggml_backend_dev_supports_buft(cpu_, ggml_backend_dev_buffer_type(dev0_)));

    // A graph in host memory on the test device, and one in device memory on the CPU.
    ggml_backend_ptr b0(ggml_backend_dev_init(dev0_, nullptr));
    ggml_backend_ptr bc(ggml_backend_dev_init(cpu_, nullptr));
    LogCapture       log;
    EXPECT_EQ(ggml_backend_graph_compute(b0.get(), g.gf), GGML_STATUS_FAILED);
    SmallGraph              h = small_graph(16);
    ggml_backend_buffer_ptr dbuf(ggml_backend_alloc_ctx_tensors_from_buft(h.ctx.get(), ggml_backend_dev_buffer_type(dev0_)));
    ASSERT_NE(dbuf, nullptr);
    EXPECT_EQ(ggml_backend_graph_compute(bc.get(), h.gf), GGML_STATUS_FAILED);
    EXPECT_TRUE(log.contains("not host memory"));
}

// ---- graph copies and backend comparison -----------------------------------

namespace {

// a [6, 4] -> transpose -> cont -> reshape [24] -> sqr: view nodes at 0 and 2.
struct ViewGraph {
    ggml_context_ptr ctx;
    ggml_tensor *    a = nullptr;
    ggml_cgraph *    gf = nullptr;
};

ViewGraph view_graph() {
    ViewGraph g;
    g.ctx              = no_alloc_context();
    g.a                = ggml_new_tensor_2d(g.ctx.get(), GGML_TYPE_F32, 6, 4);
    ggml_tensor * t    = ggml_transpose(g.ctx.get(), g.a);
    ggml_tensor * c    = ggml_cont(g.ctx.get(), t);
    ggml_tensor * r    = ggml_reshape_1d(g.ctx.get(), c, 24);
    ggml_tensor * s    = ggml_sqr(g.ctx.get(), r);
    ggml_set_name(s, "squares");
    g.gf = ggml_new_graph(g.ctx.get());
    ggml_build_forward_expand(g.gf, s);
    return g;
}

struct CallbackLog {
    std::vector<int> indices;
    int              stop_after = -1; // stop after this many calls
    double           max_diff   = 0.0;
};

bool record_node(int index, ggml_tensor * t1, ggml_tensor * t2, void * user_data) {
    auto * log = static_cast<CallbackLog *>(user_data);
    log->indices.push_back(index);
    const std::vector<float> x = get_floats(t1), y = get_floats(t2);
    for (size_t i = 0; i < x.size(); ++i) {
        log->max_diff = std::max(log->max_diff, double(std::fabs(x[i] - y[i])));
    }
    return log->stop_after < 0 || int(log->indices.size()) < log->stop_after;
}

} // namespace

TEST_F(BackendLayer, GraphCopyMovesDataAndPlacesViews) {
    ViewGraph               g = view_graph();
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors_from_buft(g.ctx.get(), ggml_backend_cpu_buffer_type()));
    ASSERT_NE(buf, nullptr);
    const std::vector<float> v = random_floats(24, 9);
    ggml_backend_tensor_set(g.a, v.data(), 0, ggml_nbytes(g.a));

    ggml_backend_ptr        b0(ggml_backend_dev_init(dev0_, nullptr));
    struct ggml_backend_graph_copy copy = ggml_backend_graph_copy(b0.get(), g.gf);
    ASSERT_NE(copy.buffer, nullptr);
    ASSERT_NE(copy.graph, nullptr);
    EXPECT_NE(copy.ctx_allocated, nullptr);
    EXPECT_NE(copy.ctx_unallocated, nullptr);
    ASSERT_EQ(ggml_graph_n_nodes(copy.graph), ggml_graph_n_nodes(g.gf));
    for (int i = 0; i < ggml_graph_n_nodes(g.gf); ++i) {
        ggml_tensor * orig = ggml_graph_node(g.gf, i);
        ggml_tensor * twin = ggml_graph_node(copy.graph, i);
        EXPECT_EQ(twin->op, orig->op);
        EXPECT_STREQ(twin->name, orig->name);
        EXPECT_EQ(twin->buffer, copy.buffer) << i;
        EXPECT_EQ(twin->view_src != nullptr, orig->view_src != nullptr) << i;
    }
    // The leaf's data came along; the copy computes on the test device.
    ggml_tensor * a_copy = ggml_graph_node(copy.graph, 0)->src[0];
    EXPECT_EQ(get_floats(a_copy), v);
    ASSERT_EQ(ggml_backend_graph_compute(b0.get(), copy.graph), GGML_STATUS_SUCCESS);
    const std::vector<float> sq = get_floats(ggml_graph_node(copy.graph, -1));
    for (int i = 0; i < 6; ++i) {
        for (int j = 0; j < 4; ++j) {
            EXPECT_FLOAT_EQ(sq[size_t(i * 4 + j)], v[size_t(j * 6 + i)] * v[size_t(j * 6 + i)]);
        }
    }
    ggml_backend_graph_copy_free(copy);
}

TEST_F(BackendLayer, GraphCopyFailsCleanlyWithoutMemory) {
    ViewGraph               g = view_graph();
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors_from_buft(g.ctx.get(), ggml_backend_cpu_buffer_type()));
    ggml_backend_ptr        b0(ggml_backend_dev_init(dev0_, nullptr));
    ASSERT_TRUE(testdev_configure(dev0_, "memory", "64"));
    LogCapture              log;
    struct ggml_backend_graph_copy copy = ggml_backend_graph_copy(b0.get(), g.gf);
    EXPECT_EQ(copy.buffer, nullptr);
    EXPECT_EQ(copy.graph, nullptr);
    EXPECT_EQ(copy.ctx_allocated, nullptr);
    EXPECT_EQ(copy.ctx_unallocated, nullptr);
    EXPECT_TRUE(log.contains("ggml_backend_graph_copy")) << log.text();
    CallbackLog calls;
    EXPECT_FALSE(ggml_backend_compare_graph_backend(b0.get(), b0.get(), g.gf, record_node, &calls, nullptr, 0));
    EXPECT_TRUE(calls.indices.empty());
}

TEST_F(BackendLayer, GraphCopyOfAnUnallocatedGraphAborts) {
    use_threadsafe_death_tests();
    ViewGraph        g = view_graph();
    ggml_backend_ptr cpu(ggml_backend_cpu_init());
    EXPECT_DEATH(ggml_backend_graph_copy(cpu.get(), g.gf), "not allocated");
}

TEST_F(BackendLayer, CompareVisitsEveryNodeButViews) {
    ViewGraph               g = view_graph();
    ggml_backend_ptr        cpu(ggml_backend_cpu_init());
    ggml_backend_ptr        b1(ggml_backend_dev_init(dev1_, nullptr));
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(g.ctx.get(), cpu.get()));
    const std::vector<float> v = random_floats(24, 10);
    ggml_backend_tensor_set(g.a, v.data(), 0, ggml_nbytes(g.a));

    CallbackLog all;
    EXPECT_TRUE(ggml_backend_compare_graph_backend(cpu.get(), b1.get(), g.gf, record_node, &all, nullptr, 0));
    EXPECT_EQ(all.indices, (std::vector<int>{1, 3})); // CONT and SQR; TRANSPOSE and RESHAPE skipped
    EXPECT_EQ(all.max_diff, 0.0);

    CallbackLog first;
    first.stop_after = 1;
    EXPECT_TRUE(ggml_backend_compare_graph_backend(cpu.get(), b1.get(), g.gf, record_node, &first, nullptr, 0));
    EXPECT_EQ(first.indices, (std::vector<int>{1}));

    CallbackLog                only_last;
    const ggml_tensor * const  test_nodes[] = {ggml_graph_node(g.gf, -1)};
    EXPECT_TRUE(ggml_backend_compare_graph_backend(cpu.get(), b1.get(), g.gf, record_node, &only_last, test_nodes, 1));
    EXPECT_EQ(only_last.indices, (std::vector<int>{3}));
    EXPECT_EQ(only_last.max_diff, 0.0);
}

TEST_F(BackendLayer, CompareReportsAFailedComputation) {
    ViewGraph               g = view_graph();
    ggml_backend_ptr        cpu(ggml_backend_cpu_init());
    ggml_backend_ptr        b0(ggml_backend_dev_init(dev0_, nullptr));
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(g.ctx.get(), cpu.get()));
    ASSERT_TRUE(testdev_configure(dev0_, "ops", ""));
    CallbackLog calls;
    LogCapture  log;
    EXPECT_FALSE(ggml_backend_compare_graph_backend(cpu.get(), b0.get(), g.gf, record_node, &calls, nullptr, 0));
    EXPECT_TRUE(calls.indices.empty());
    EXPECT_TRUE(log.contains("failed to compute")) << log.text();
}

namespace {

// ggml-cpp.h's owners of allocators, events and schedulers free what they hold.
TEST(BackendOwners, GallocrEventAndSchedulerPointers) {
    ggml_backend_ptr backend(ggml_backend_cpu_init());
    ASSERT_TRUE(backend);
    ggml_gallocr_ptr galloc(ggml_gallocr_new(ggml_backend_cpu_buffer_type()));
    ASSERT_TRUE(galloc);
    ggml_backend_event_ptr event(ggml_backend_event_new(ggml_backend_get_device(backend.get())));
    if (event) {
        ggml_backend_event_record(event.get(), backend.get());
        ggml_backend_event_synchronize(event.get());
    }
    ggml_backend_t         backends[1] = {backend.get()};
    ggml_backend_sched_ptr sched(ggml_backend_sched_new(backends, nullptr, 1, 64, false, true));
    ASSERT_TRUE(sched);
    EXPECT_EQ(ggml_backend_sched_get_n_backends(sched.get()), 1);
    sched.reset();
    galloc.reset();
    EXPECT_FALSE(sched || galloc);
}

} // namespace
