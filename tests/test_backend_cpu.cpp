// The backend layer as the CPU backend provides it: buffer types, buffers,
// tensor data access, allocation, devices, the registry and graph plans.

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml-cpu.h"

namespace {

ggml_context_ptr make_ctx(size_t n_tensors) {
    ggml_init_params p = {n_tensors * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    return ggml_context_ptr(ggml_init(p));
}

TEST(BackendCpu, BufferTypeProperties) {
    ggml_backend_buffer_type_t buft = ggml_backend_cpu_buffer_type();
    EXPECT_STREQ(ggml_backend_buft_name(buft), "CPU");
    EXPECT_TRUE(ggml_backend_buft_is_host(buft));
    EXPECT_EQ(ggml_backend_buft_get_alignment(buft), size_t(32)); // ggml's TENSOR_ALIGNMENT
    EXPECT_EQ(ggml_backend_buft_get_device(buft), ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU));

    ggml_backend_buffer_ptr buf(ggml_backend_buft_alloc_buffer(buft, 1000));
    ASSERT_TRUE(buf);
    EXPECT_EQ(ggml_backend_buffer_get_size(buf.get()), 1000u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(ggml_backend_buffer_get_base(buf.get())) %
                  ggml_backend_buft_get_alignment(buft),
              0u);
    EXPECT_EQ(ggml_backend_buffer_get_usage(buf.get()), GGML_BACKEND_BUFFER_USAGE_ANY);
    ggml_backend_buffer_set_usage(buf.get(), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    EXPECT_EQ(ggml_backend_buffer_get_usage(buf.get()), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    ggml_backend_buffer_clear(buf.get(), 0xab);
    EXPECT_EQ(static_cast<uint8_t *>(ggml_backend_buffer_get_base(buf.get()))[999], 0xab);
}

TEST(BackendCpu, ZeroSizeBufferIsValid) {
    ggml_backend_buffer_ptr buf(ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), 0));
    ASSERT_TRUE(buf);
    EXPECT_EQ(ggml_backend_buffer_get_size(buf.get()), 0u);
    EXPECT_EQ(ggml_backend_buffer_get_base(buf.get()), nullptr);
    ggml_backend_buffer_clear(buf.get(), 0); // no effect, no crash
}

TEST(BackendCpu, TensorSetGetAndBounds) {
    auto          ctx = make_ctx(4);
    ggml_tensor * t   = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 6, 5);
    ggml_set_name(t, "weights");
    ggml_tensor * v = ggml_view_1d(ctx.get(), t, 6, t->nb[1] * 2);
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors_from_buft(ctx.get(), ggml_backend_cpu_buffer_type()));
    ASSERT_TRUE(buf);
    ASSERT_NE(t->data, nullptr);
    EXPECT_EQ(v->data, static_cast<char *>(t->data) + t->nb[1] * 2);
    EXPECT_EQ(v->buffer, buf.get());

    std::vector<float> in(30);
    std::iota(in.begin(), in.end(), 0.0f);
    ggml_backend_tensor_set(t, in.data(), 0, ggml_nbytes(t));
    std::vector<float> out(6);
    ggml_backend_tensor_get(v, out.data(), 0, ggml_nbytes(v)); // views read through to the source
    EXPECT_EQ(out[0], 12.0f);
    EXPECT_EQ(out[5], 17.0f);

    const float nine[2] = {9.0f, 9.0f};
    ggml_backend_tensor_set(v, nine, sizeof(float), sizeof(nine)); // writes through to the source
    ggml_backend_tensor_get(t, in.data(), 0, ggml_nbytes(t));
    EXPECT_EQ(in[13], 9.0f);
    EXPECT_EQ(in[14], 9.0f);
    EXPECT_EQ(in[15], 15.0f);

    ggml_backend_tensor_memset(t, 0, 4 * sizeof(float), 2 * sizeof(float));
    ggml_backend_tensor_get(t, in.data(), 0, ggml_nbytes(t));
    EXPECT_EQ(in[3], 3.0f);
    EXPECT_EQ(in[4], 0.0f);
    EXPECT_EQ(in[5], 0.0f);

    // 2-D transfers: column 1 of each row
    std::vector<float> col = {100, 101, 102, 103, 104};
    ggml_backend_tensor_set_2d(t, col.data(), sizeof(float), sizeof(float), 5, t->nb[1], sizeof(float));
    std::vector<float> got(5);
    ggml_backend_tensor_get_2d(t, got.data(), sizeof(float), sizeof(float), 5, t->nb[1], sizeof(float));
    EXPECT_EQ(got, col);

    EXPECT_DEATH(ggml_backend_tensor_set(t, in.data(), 4, ggml_nbytes(t)), "out of bounds of tensor 'weights'");
    EXPECT_DEATH(ggml_backend_tensor_get(v, out.data(), 0, ggml_nbytes(v) + 4), "out of bounds");
    EXPECT_DEATH(ggml_backend_tensor_memset(t, 0, ggml_nbytes(t) + 1, 0), "out of bounds");
}

TEST(BackendCpu, UnallocatedTensorAccessIsAClearError) {
    auto          ctx = make_ctx(2);
    ggml_tensor * t   = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 4);
    ggml_set_name(t, "loose");
    float x[4] = {};
    EXPECT_DEATH(ggml_backend_tensor_set(t, x, 0, sizeof(x)), "'loose'.*not allocated");
}

TEST(BackendCpu, AllocCtxTensorsEmptyAndTooSmall) {
    auto ctx = make_ctx(2);
    EXPECT_EQ(ggml_backend_alloc_ctx_tensors_from_buft(ctx.get(), ggml_backend_cpu_buffer_type()), nullptr);

    // tallocr refuses a tensor that does not fit and leaves the buffer usable
    ggml_backend_buffer_ptr buf(ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), 64));
    ggml_tallocr            ta = ggml_tallocr_new(buf.get());
    ggml_tensor *           a  = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 16);
    ggml_tensor *           b  = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 1);
    EXPECT_EQ(ggml_tallocr_alloc(&ta, a), GGML_STATUS_SUCCESS);
    EXPECT_EQ(ggml_tallocr_alloc(&ta, b), GGML_STATUS_ALLOC_FAILED);
    EXPECT_EQ(b->data, nullptr);
}

TEST(BackendCpu, BufferFromPtrWrapsCallerMemory) {
    alignas(64) static float storage[16];
    ggml_backend_buffer_ptr  buf(ggml_backend_cpu_buffer_from_ptr(storage, sizeof(storage)));
    ASSERT_TRUE(buf);
    EXPECT_TRUE(ggml_backend_buffer_is_host(buf.get()));
    EXPECT_EQ(ggml_backend_buffer_get_base(buf.get()), storage);
    auto          ctx = make_ctx(1);
    ggml_tensor * t   = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 16);
    ASSERT_EQ(ggml_backend_tensor_alloc(buf.get(), t, storage), GGML_STATUS_SUCCESS);
    const float v = 3.5f;
    ggml_backend_tensor_set(t, &v, 4 * sizeof(float), sizeof(v));
    EXPECT_EQ(storage[4], 3.5f);
    // the CPU device accepts host buffers of other types
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    EXPECT_TRUE(ggml_backend_dev_supports_buft(dev, ggml_backend_buffer_get_type(buf.get())));
}

TEST(BackendCpu, DeviceAndRegistry) {
    ASSERT_GE(ggml_backend_reg_count(), 1u);
    ggml_backend_reg_t reg = ggml_backend_reg_by_name("cpu"); // case-insensitive
    ASSERT_NE(reg, nullptr);
    EXPECT_EQ(reg, ggml_backend_cpu_reg());
    ASSERT_EQ(ggml_backend_reg_dev_count(reg), 1u);
    ggml_backend_dev_t dev = ggml_backend_reg_dev_get(reg, 0);
    EXPECT_EQ(ggml_backend_dev_by_name("CPU"), dev);
    EXPECT_EQ(ggml_backend_dev_backend_reg(dev), reg);
    EXPECT_EQ(ggml_backend_dev_type(dev), GGML_BACKEND_DEVICE_TYPE_CPU);
    EXPECT_GT(std::strlen(ggml_backend_dev_description(dev)), 0u);

    ggml_backend_dev_props props;
    ggml_backend_dev_get_props(dev, &props);
    EXPECT_STREQ(props.name, "CPU");
    EXPECT_GT(props.memory_total, size_t(1) << 26);
    EXPECT_LE(props.memory_free, props.memory_total);
    EXPECT_TRUE(props.caps.buffer_from_host_ptr);
    EXPECT_FALSE(props.caps.events);

    EXPECT_EQ(ggml_backend_dev_by_name("no-such-device"), nullptr);
    EXPECT_EQ(ggml_backend_init_by_name("no-such-device", nullptr), nullptr);

    ggml_backend_ptr best(ggml_backend_init_best());
    ASSERT_TRUE(best);
    EXPECT_TRUE(ggml_backend_is_cpu(best.get()));
    EXPECT_STREQ(ggml_backend_name(best.get()), "CPU");
    EXPECT_EQ(ggml_backend_get_device(best.get()), dev);

    auto set_threads = reinterpret_cast<ggml_backend_set_n_threads_t>(
        ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads"));
    ASSERT_NE(set_threads, nullptr);
    set_threads(best.get(), 3);
    EXPECT_EQ(ggml_backend_reg_get_proc_address(reg, "no_such_function"), nullptr);

    auto features = reinterpret_cast<ggml_backend_get_features_t>(
        ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features"));
    ASSERT_NE(features, nullptr);
    int n = 0;
    for (ggml_backend_feature * f = features(reg); f->name != nullptr; ++f) ++n;
    // At least the kernel table in use, by its name.
    EXPECT_GT(n, 0);
    bool kernels = false;
    for (ggml_backend_feature * f = features(reg); f->name != nullptr; ++f) {
        if (std::string(f->name) == "KERNELS") kernels = std::string(f->value).size() > 0;
    }
    EXPECT_TRUE(kernels);

    // The names ggml's CPU family answers, each the public function of that name (llama.cpp's
    // common code creates its thread pools through them).
    EXPECT_EQ(ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_new"),
              reinterpret_cast<void *>(&ggml_threadpool_new));
    EXPECT_EQ(ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_free"),
              reinterpret_cast<void *>(&ggml_threadpool_free));
    EXPECT_EQ(ggml_backend_reg_get_proc_address(reg, "ggml_backend_cpu_set_threadpool"),
              reinterpret_cast<void *>(&ggml_backend_cpu_set_threadpool));
    EXPECT_EQ(ggml_backend_reg_get_proc_address(reg, "ggml_backend_cpu_numa_init"),
              reinterpret_cast<void *>(&ggml_numa_init));
    EXPECT_EQ(ggml_backend_reg_get_proc_address(reg, "ggml_backend_cpu_is_numa"),
              reinterpret_cast<void *>(&ggml_is_numa));
    EXPECT_EQ(ggml_backend_reg_get_proc_address(reg, "ggml_backend_cpu_set_use_ref"),
              reinterpret_cast<void *>(&ggml_backend_cpu_set_use_ref));
    EXPECT_NE(ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts"), nullptr);
    EXPECT_NE(ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_abort_callback"), nullptr);
}

TEST(BackendCpu, GraphComputeAndPlans) {
    ggml_backend_ptr backend(ggml_backend_cpu_init());
    ASSERT_TRUE(backend);
    ggml_backend_cpu_set_n_threads(backend.get(), 2);
    auto          ctx = make_ctx(8);
    ggml_tensor * a   = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 5);
    ggml_tensor * b   = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 5);
    ggml_tensor * c   = ggml_mul(ctx.get(), ggml_add(ctx.get(), a, b), b);
    ggml_cgraph * g   = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(g, c);
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(ctx.get(), backend.get()));
    ASSERT_TRUE(buf);
    const float av[5] = {1, 2, 3, 4, 5}, bv[5] = {2, 2, 2, -1, 0.5f};
    ggml_backend_tensor_set(a, av, 0, sizeof(av));
    ggml_backend_tensor_set(b, bv, 0, sizeof(bv));
    ASSERT_EQ(ggml_backend_graph_compute(backend.get(), g), GGML_STATUS_SUCCESS);
    float cv[5];
    ggml_backend_tensor_get(c, cv, 0, sizeof(cv));
    for (int i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(cv[i], (av[i] + bv[i]) * bv[i]);

    ggml_backend_graph_plan_t plan = ggml_backend_graph_plan_create(backend.get(), g);
    ASSERT_NE(plan, nullptr);
    const float bv2[5] = {1, 1, 1, 1, 1};
    ggml_backend_tensor_set(b, bv2, 0, sizeof(bv2));
    EXPECT_EQ(ggml_backend_graph_plan_compute(backend.get(), plan), GGML_STATUS_SUCCESS);
    ggml_backend_graph_plan_free(backend.get(), plan);
    ggml_backend_tensor_get(c, cv, 0, sizeof(cv));
    for (int i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(cv[i], av[i] + 1.0f);
    EXPECT_TRUE(ggml_backend_supports_op(backend.get(), c));
    EXPECT_TRUE(ggml_backend_supports_buft(backend.get(), ggml_backend_cpu_buffer_type()));
}

TEST(BackendCpu, UnallocatedGraphFailsCleanly) {
    ggml_backend_ptr backend(ggml_backend_cpu_init());
    auto             ctx = make_ctx(4);
    ggml_tensor *    a   = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 5);
    ggml_cgraph *    g   = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(g, ggml_neg(ctx.get(), a));
    EXPECT_EQ(ggml_backend_graph_compute(backend.get(), g), GGML_STATUS_FAILED);
}

TEST(BackendCpu, WorkBufferTooSmallFailsCleanly) {
    ggml_init_params p   = {1 << 20, nullptr, false};
    ggml_context_ptr ctx(ggml_init(p));
    ggml_tensor *    a = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_Q8_0, 64, 4);
    ggml_tensor *    b = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 64, 3);
    ggml_cgraph *    g = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(g, ggml_mul_mat(ctx.get(), a, b));
    ggml_cplan plan = ggml_graph_plan(g, 2, nullptr);
    ASSERT_GT(plan.work_size, 0u); // activations are quantised into the work buffer
    plan.work_data = nullptr;
    EXPECT_EQ(ggml_graph_compute(g, &plan), GGML_STATUS_FAILED);
}

TEST(BackendCpu, ElementAccessors) {
    ggml_init_params p = {1 << 16, nullptr, false};
    ggml_context_ptr ctx(ggml_init(p));
    ggml_tensor *    t = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F16, 3, 2);
    ggml_set_f32(t, 1.5f);
    EXPECT_EQ(ggml_get_f32_nd(t, 2, 1, 0, 0), 1.5f);
    ggml_set_f32_nd(t, 1, 1, 0, 0, -2.0f);
    EXPECT_EQ(ggml_get_f32_1d(t, 4), -2.0f);
    ggml_tensor * i = ggml_new_i32(ctx.get(), 7);
    EXPECT_EQ(ggml_get_i32_1d(i, 0), 7);
    EXPECT_DEATH(ggml_get_f32_nd(t, 3, 0, 0, 0), "out of bounds");
}

} // namespace

namespace {

// A product computed by the backend with the portable kernels only is the
// one ggml_graph_compute gives with a plan that asks for them, bit for bit.
TEST(BackendCpu, UseRefRunsThePortableKernels) {
    ggml_backend_ptr backend(ggml_backend_cpu_init());
    ASSERT_TRUE(backend);
    ggml_backend_cpu_set_n_threads(backend.get(), 2);
    ggml_backend_cpu_set_use_ref(backend.get(), true);
    auto          ctx = make_ctx(8);
    ggml_tensor * a   = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 67, 33);
    ggml_tensor * b   = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 67, 19);
    ggml_tensor * c   = ggml_mul_mat(ctx.get(), a, b);
    ggml_cgraph * g   = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(g, c);
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(ctx.get(), backend.get()));
    ASSERT_TRUE(buf);
    std::vector<float> av(67 * 33), bv(67 * 19);
    for (size_t i = 0; i < av.size(); ++i) av[i] = float(int(i * 7919 % 201) - 100) / 37.0f;
    for (size_t i = 0; i < bv.size(); ++i) bv[i] = float(int(i * 104729 % 199) - 99) / 41.0f;
    ggml_backend_tensor_set(a, av.data(), 0, av.size() * sizeof(float));
    ggml_backend_tensor_set(b, bv.data(), 0, bv.size() * sizeof(float));
    ASSERT_EQ(ggml_backend_graph_compute(backend.get(), g), GGML_STATUS_SUCCESS);
    std::vector<float> by_backend(33 * 19), by_plan(33 * 19);
    ggml_backend_tensor_get(c, by_backend.data(), 0, ggml_nbytes(c));

    ggml_cplan plan = ggml_graph_plan(g, 2, nullptr);
    std::vector<uint8_t> work(plan.work_size);
    plan.work_data = work.data();
    plan.use_ref   = true;
    ASSERT_EQ(ggml_graph_compute(g, &plan), GGML_STATUS_SUCCESS);
    ggml_backend_tensor_get(c, by_plan.data(), 0, ggml_nbytes(c));
    EXPECT_EQ(std::memcmp(by_backend.data(), by_plan.data(), ggml_nbytes(c)), 0);
    for (int i = 0; i < 33; ++i) {
        double ref = 0;
        for (int k = 0; k < 67; ++k) ref += double(av[size_t(i * 67 + k)]) * double(bv[size_t(k)]);
        EXPECT_NEAR(by_backend[size_t(i)], ref, 1e-4 * (1.0 + std::abs(ref)));
    }
}

// The features the processor reports hang together, other families' are
// absent, and the row conversions give the core's values.
TEST(BackendCpu, FeatureQueriesAndConversions) {
    EXPECT_TRUE(!ggml_cpu_has_avx512() || ggml_cpu_has_avx2());
    EXPECT_TRUE(!ggml_cpu_has_avx2() || (ggml_cpu_has_avx() && ggml_cpu_has_ssse3() && ggml_cpu_has_sse3()));
    EXPECT_TRUE(!ggml_cpu_has_avx_vnni() || ggml_cpu_has_avx2());
    EXPECT_EQ(ggml_cpu_has_riscv_v() + ggml_cpu_get_rvv_vlen() + ggml_cpu_has_vsx() + ggml_cpu_has_wasm_simd(), 0);
#if defined(__aarch64__)
    // Advanced SIMD is part of the base architecture; the extensions imply it.
    EXPECT_EQ(ggml_cpu_has_neon(), 1);
    EXPECT_EQ(ggml_cpu_has_arm_fma(), 1);
    EXPECT_EQ(ggml_cpu_has_sse3() + ggml_cpu_has_avx() + ggml_cpu_has_avx2() + ggml_cpu_has_avx512(), 0);
    EXPECT_EQ(ggml_cpu_has_sve() != 0, ggml_cpu_get_sve_cnt() > 0);
    EXPECT_TRUE(!ggml_cpu_has_sme2() || ggml_cpu_has_sme());
#else
    EXPECT_EQ(ggml_cpu_has_neon() + ggml_cpu_has_arm_fma() + ggml_cpu_has_dotprod() + ggml_cpu_has_matmul_int8() +
                  ggml_cpu_has_sve() + ggml_cpu_get_sve_cnt() + ggml_cpu_has_sme() + ggml_cpu_has_fp16_va(),
              0);
#endif
    ggml_numa_init(GGML_NUMA_STRATEGY_DISTRIBUTE);
    int nodes = 0;
    while (nodes < 4096 && access(("/sys/devices/system/node/node" + std::to_string(nodes)).c_str(), F_OK) == 0) {
        ++nodes;
    }
    EXPECT_EQ(ggml_is_numa(), nodes > 1);

    const float x[6] = {1.5f, -2.75f, 65504.0f, 1e-8f, -0.0f, 3.9999f};
    int32_t     i32[6];
    ggml_cpu_fp32_to_i32(x, i32, 6);
    const int32_t want_i32[6] = {1, -2, 65504, 0, 0, 3};
    for (int i = 0; i < 6; ++i) EXPECT_EQ(i32[i], want_i32[i]);
    ggml_fp16_t h[6];
    float       back[6];
    ggml_cpu_fp32_to_fp16(x, h, 6);
    ggml_cpu_fp16_to_fp32(h, back, 6);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(back[i], ggml_fp16_to_fp32(ggml_fp32_to_fp16(x[i])));
    ggml_bf16_t b[6];
    ggml_cpu_fp32_to_bf16(x, b, 6);
    ggml_cpu_bf16_to_fp32(b, back, 6);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(back[i], ggml_bf16_to_fp32(ggml_fp32_to_bf16(x[i])));
    float copy[6];
    ggml_cpu_fp32_to_fp32(x, copy, 6);
    EXPECT_EQ(std::memcmp(copy, x, sizeof(x)), 0);
}

} // namespace
