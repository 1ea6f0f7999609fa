// The scheduler on CPU backends: results equal a direct computation,
// placement follows pins and priorities, plans are reused, the eval
// callback sees computed data and can stop, pipeline copies stay correct,
// and the user's graph is left as it was built.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml-cpu.h"

#include "backend_test_helpers.h"
#include "core/graph.h"
#include "log_capture.h"

namespace {

struct Weights {
    ggml_context_ptr        ctx;
    ggml_backend_buffer_ptr buf;
    ggml_tensor *           w1 = nullptr;
    ggml_tensor *           w2 = nullptr;
    ggml_tensor *           g  = nullptr;
};

// Weights of a small MLP block in one WEIGHTS buffer of the given backend.
Weights make_weights(ggml_backend_t backend, int d, int f, unsigned seed) {
    Weights          w;
    ggml_init_params p = {8 * ggml_tensor_overhead(), nullptr, true};
    w.ctx.reset(ggml_init(p));
    w.w1 = ggml_new_tensor_2d(w.ctx.get(), GGML_TYPE_F32, d, f);
    w.w2 = ggml_new_tensor_2d(w.ctx.get(), GGML_TYPE_F16, f, d);
    w.g  = ggml_new_tensor_1d(w.ctx.get(), GGML_TYPE_F32, d);
    ggml_set_name(w.w1, "w1");
    ggml_set_name(w.w2, "w2");
    ggml_set_name(w.g, "g");
    w.buf.reset(ggml_backend_alloc_ctx_tensors(w.ctx.get(), backend));
    ggml_backend_buffer_set_usage(w.buf.get(), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    std::mt19937                          rng(seed);
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    std::vector<float>                    v(size_t(d) * size_t(f));
    for (float & x : v) x = u(rng);
    ggml_backend_tensor_set(w.w1, v.data(), 0, ggml_nbytes(w.w1));
    std::vector<ggml_fp16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = ggml_fp32_to_fp16(u(rng));
    ggml_backend_tensor_set(w.w2, h.data(), 0, ggml_nbytes(w.w2));
    std::vector<float> gv(static_cast<size_t>(d));
    for (float & x : gv) x = 1.0f + u(rng);
    ggml_backend_tensor_set(w.g, gv.data(), 0, ggml_nbytes(w.g));
    return w;
}

struct Block {
    ggml_context_ptr ctx;
    ggml_cgraph *    graph = nullptr;
    ggml_tensor *    x     = nullptr;
    ggml_tensor *    h     = nullptr; // intermediate
    ggml_tensor *    out   = nullptr;
};

// out = x + w2 * silu(w1 * (rms_norm(x) * g)), built fresh each call.
Block make_block(const Weights & w, int d, int n_tokens) {
    Block            b;
    ggml_init_params p = {64 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    b.ctx.reset(ggml_init(p));
    ggml_context * c = b.ctx.get();
    b.x              = ggml_new_tensor_2d(c, GGML_TYPE_F32, d, n_tokens);
    ggml_set_name(b.x, "x");
    ggml_set_input(b.x);
    ggml_tensor * n = ggml_mul(c, ggml_rms_norm(c, b.x, 1e-5f), w.g);
    b.h             = ggml_silu(c, ggml_mul_mat(c, w.w1, n));
    ggml_set_name(b.h, "h");
    b.out = ggml_add(c, b.x, ggml_mul_mat(c, w.w2, b.h));
    ggml_set_name(b.out, "out");
    ggml_set_output(b.out);
    b.graph = ggml_new_graph(c);
    ggml_build_forward_expand(b.graph, b.out);
    return b;
}

std::vector<float> random_input(int n, unsigned seed) {
    std::mt19937                          rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float>                    v(static_cast<size_t>(n));
    for (float & x : v) x = u(rng);
    return v;
}

// The same block computed directly on a CPU backend with its own buffer.
std::vector<float> direct(ggml_backend_t cpu, const Weights & w, int d, int t, const std::vector<float> & x) {
    Block                   b = make_block(w, d, t);
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(b.ctx.get(), cpu));
    ggml_backend_tensor_set(b.x, x.data(), 0, ggml_nbytes(b.x));
    EXPECT_EQ(ggml_backend_graph_compute(cpu, b.graph), GGML_STATUS_SUCCESS);
    std::vector<float> out(size_t(d) * size_t(t));
    ggml_backend_tensor_get(b.out, out.data(), 0, ggml_nbytes(b.out));
    return out;
}

class Sched : public ::testing::Test {
  protected:
    void SetUp() override {
        cpu.reset(ggml_backend_cpu_init());
        cpu2.reset(ggml_backend_cpu_init());
        ggml_backend_cpu_set_n_threads(cpu.get(), 2);
        ggml_backend_cpu_set_n_threads(cpu2.get(), 1);
    }
    ggml_backend_ptr cpu, cpu2;
    const int        d = 48, f = 80, t = 5;
};

TEST_F(Sched, CpuAloneEqualsDirect) {
    Weights        w = make_weights(cpu.get(), d, f, 1);
    ggml_backend_t backends[1] = {cpu.get()};
    ggml_backend_sched_t s = ggml_backend_sched_new(backends, nullptr, 1, GGML_DEFAULT_GRAPH_SIZE, false, true);
    const auto     x = random_input(d * t, 7);
    const auto     ref = direct(cpu.get(), w, d, t, x);

    Block b = make_block(w, d, t);
    ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, b.graph));
    EXPECT_EQ(ggml_backend_sched_get_n_splits(s), 1);
    ggml_backend_tensor_set(b.x, x.data(), 0, ggml_nbytes(b.x));
    ASSERT_EQ(ggml_backend_sched_graph_compute(s, b.graph), GGML_STATUS_SUCCESS);
    std::vector<float> out(ref.size());
    ggml_backend_tensor_get(b.out, out.data(), 0, ggml_nbytes(b.out));
    EXPECT_EQ(out, ref);
    EXPECT_GT(ggml_backend_sched_get_buffer_size(s, cpu.get()), 0u);
    EXPECT_EQ(ggml_backend_sched_get_tensor_backend(s, b.out), cpu.get());
    ggml_backend_sched_free(s);
}

TEST_F(Sched, UserGraphIsNotRewired) {
    Weights        w           = make_weights(cpu.get(), d, f, 2);
    ggml_backend_t backends[2] = {cpu.get(), cpu2.get()};
    ggml_backend_sched_t s = ggml_backend_sched_new(backends, nullptr, 2, GGML_DEFAULT_GRAPH_SIZE, false, true);
    Block b = make_block(w, d, t);
    std::vector<std::vector<ggml_tensor *>> srcs;
    for (int i = 0; i < ggml_graph_n_nodes(b.graph); ++i) {
        ggml_tensor * n = ggml_graph_node(b.graph, i);
        srcs.emplace_back(n->src, n->src + GGML_MAX_SRC);
    }
    ggml_backend_sched_set_tensor_backend(s, b.h, cpu2.get()); // forces splits
    ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, b.graph));
    const auto x = random_input(d * t, 3);
    ggml_backend_tensor_set(b.x, x.data(), 0, ggml_nbytes(b.x));
    ASSERT_EQ(ggml_backend_sched_graph_compute(s, b.graph), GGML_STATUS_SUCCESS);
    for (int i = 0; i < ggml_graph_n_nodes(b.graph); ++i) {
        ggml_tensor * n = ggml_graph_node(b.graph, i);
        EXPECT_EQ(std::vector<ggml_tensor *>(n->src, n->src + GGML_MAX_SRC), srcs[size_t(i)]) << n->name;
    }
    ggml_backend_sched_free(s);
}

TEST_F(Sched, PinsAndPriorityUpgrade) {
    Weights        w           = make_weights(cpu.get(), d, f, 3);
    ggml_backend_t backends[2] = {cpu.get(), cpu2.get()};
    ggml_backend_sched_t s = ggml_backend_sched_new(backends, nullptr, 2, GGML_DEFAULT_GRAPH_SIZE, false, true);
    const auto     x   = random_input(d * t, 9);
    const auto     ref = direct(cpu.get(), w, d, t, x);

    // Without pins, everything moves up to the first backend: it uses the
    // same buffer type as the CPU fallback.
    {
        Block b = make_block(w, d, t);
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, b.graph));
        EXPECT_EQ(ggml_backend_sched_get_n_splits(s), 1);
        for (int i = 0; i < ggml_graph_n_nodes(b.graph); ++i) {
            EXPECT_EQ(ggml_backend_sched_get_tensor_backend(s, ggml_graph_node(b.graph, i)), cpu.get());
        }
        ggml_backend_sched_reset(s);
    }
    // A pin in the middle makes three splits; results do not change.
    {
        Block b = make_block(w, d, t);
        ggml_backend_sched_set_tensor_backend(s, b.h, cpu2.get());
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, b.graph));
        EXPECT_EQ(ggml_backend_sched_get_tensor_backend(s, b.h), cpu2.get());
        EXPECT_EQ(ggml_backend_sched_get_n_splits(s), 3);
        ggml_backend_tensor_set(b.x, x.data(), 0, ggml_nbytes(b.x));
        ASSERT_EQ(ggml_backend_sched_graph_compute(s, b.graph), GGML_STATUS_SUCCESS);
        std::vector<float> out(ref.size());
        ggml_backend_tensor_get(b.out, out.data(), 0, ggml_nbytes(b.out));
        EXPECT_EQ(out, ref);
    }
    ggml_backend_sched_free(s);
}

TEST_F(Sched, SameTopologyReusesThePlan) {
    Weights        w           = make_weights(cpu.get(), d, f, 4);
    ggml_backend_t backends[1] = {cpu.get()};
    ggml_backend_sched_t s = ggml_backend_sched_new(backends, nullptr, 1, GGML_DEFAULT_GRAPH_SIZE, false, true);
    loom_sched_stats st{};
    for (int step = 0; step < 3; ++step) {
        ggml_backend_sched_reset(s);
        Block      b = make_block(w, d, t); // a new graph, same topology and shapes
        const auto x = random_input(d * t, 100 + unsigned(step));
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, b.graph));
        ggml_backend_tensor_set(b.x, x.data(), 0, ggml_nbytes(b.x));
        ASSERT_EQ(ggml_backend_sched_graph_compute(s, b.graph), GGML_STATUS_SUCCESS);
        std::vector<float> out(size_t(d * t));
        ggml_backend_tensor_get(b.out, out.data(), 0, ggml_nbytes(b.out));
        EXPECT_EQ(out, direct(cpu.get(), w, d, t, x)) << "step " << step;
    }
    loom_sched_get_stats(s, &st);
    EXPECT_EQ(st.n_plans, 1u);
    EXPECT_EQ(st.n_reused, 2u);
    EXPECT_EQ(st.n_refreshed, 2u);

    // A different batch size is a different graph: placed anew.
    ggml_backend_sched_reset(s);
    Block b = make_block(w, d, t + 1);
    ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, b.graph));
    loom_sched_get_stats(s, &st);
    EXPECT_EQ(st.n_plans, 2u);
    ggml_backend_sched_free(s);
}

struct CallbackLog {
    std::vector<std::string> asked;
    std::vector<std::string> seen;
    float                    h0        = 0;
    bool                     stop_at_h = false;
};

TEST_F(Sched, EvalCallbackSeesDataAndCanStop) {
    Weights        w           = make_weights(cpu.get(), d, f, 5);
    ggml_backend_t backends[1] = {cpu.get()};
    ggml_backend_sched_t s = ggml_backend_sched_new(backends, nullptr, 1, GGML_DEFAULT_GRAPH_SIZE, false, true);
    const auto     x = random_input(d * t, 11);

    // Reference value of h[0] from a plain run.
    float h0_ref = 0;
    {
        Block b = make_block(w, d, t);
        ggml_set_output(b.h);
        ggml_backend_sched_reset(s);
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, b.graph));
        ggml_backend_tensor_set(b.x, x.data(), 0, ggml_nbytes(b.x));
        ASSERT_EQ(ggml_backend_sched_graph_compute(s, b.graph), GGML_STATUS_SUCCESS);
        ggml_backend_tensor_get(b.h, &h0_ref, 0, sizeof(float));
    }

    CallbackLog log;
    auto        cb = [](ggml_tensor * t, bool ask, void * ud) {
        auto * l = static_cast<CallbackLog *>(ud);
        if (ask) {
            l->asked.push_back(t->name);
            return std::string(t->name) == "h";
        }
        l->seen.push_back(t->name);
        float v = 0;
        ggml_backend_tensor_get(t, &v, 0, sizeof(v));
        l->h0 = v;
        return !l->stop_at_h;
    };
    ggml_backend_sched_set_eval_callback(s, cb, &log);
    {
        Block b = make_block(w, d, t);
        ggml_set_output(b.h);
        ggml_backend_sched_reset(s);
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, b.graph));
        ggml_backend_tensor_set(b.x, x.data(), 0, ggml_nbytes(b.x));
        ASSERT_EQ(ggml_backend_sched_graph_compute(s, b.graph), GGML_STATUS_SUCCESS);
        EXPECT_EQ(log.seen, std::vector<std::string>{"h"});
        EXPECT_EQ(log.h0, h0_ref);
        EXPECT_EQ(log.asked.size(), size_t(ggml_graph_n_nodes(b.graph)));
    }
    // Stopping at h: no node after it is asked for or computed.
    log           = CallbackLog{};
    log.stop_at_h = true;
    {
        Block b = make_block(w, d, t);
        ggml_backend_sched_reset(s);
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, b.graph));
        ggml_backend_tensor_set(b.x, x.data(), 0, ggml_nbytes(b.x));
        ASSERT_EQ(ggml_backend_sched_graph_compute(s, b.graph), GGML_STATUS_SUCCESS);
        EXPECT_EQ(log.seen, std::vector<std::string>{"h"});
        ASSERT_FALSE(log.asked.empty());
        EXPECT_EQ(log.asked.back(), "h");
        EXPECT_LT(log.asked.size(), size_t(ggml_graph_n_nodes(b.graph)));
    }
    ggml_backend_sched_free(s);
}

TEST_F(Sched, PipelineCopiesGiveCorrectResults) {
    Weights        w           = make_weights(cpu.get(), d, f, 6);
    ggml_backend_t backends[2] = {cpu.get(), cpu2.get()};
    ggml_backend_sched_t s = ggml_backend_sched_new(backends, nullptr, 2, GGML_DEFAULT_GRAPH_SIZE, true, true);
    EXPECT_EQ(ggml_backend_sched_get_n_copies(s), 4);
    for (int step = 0; step < 6; ++step) {
        ggml_backend_sched_reset(s);
        Block b = make_block(w, d, t);
        ggml_backend_sched_set_tensor_backend(s, b.h, cpu2.get());
        const auto x = random_input(d * t, 200 + unsigned(step));
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, b.graph));
        ggml_backend_tensor_set(b.x, x.data(), 0, ggml_nbytes(b.x));
        ASSERT_EQ(ggml_backend_sched_graph_compute_async(s, b.graph), GGML_STATUS_SUCCESS);
        ggml_backend_sched_synchronize(s);
        std::vector<float> out(size_t(d * t));
        ggml_backend_tensor_get(b.out, out.data(), 0, ggml_nbytes(b.out));
        EXPECT_EQ(out, direct(cpu.get(), w, d, t, x)) << "step " << step;
    }
    ggml_backend_sched_free(s);
}

TEST_F(Sched, TraceAndDotFiles) {
    Weights        w           = make_weights(cpu.get(), d, f, 8);
    ggml_backend_t backends[2] = {cpu.get(), cpu2.get()};
    ggml_backend_sched_t s = ggml_backend_sched_new(backends, nullptr, 2, GGML_DEFAULT_GRAPH_SIZE, false, true);
    const std::string trace = ::testing::TempDir() + "loom_sched_trace.json";
    const std::string dot   = ::testing::TempDir() + "loom_sched.dot";
    loom_sched_set_trace(s, trace.c_str());
    Block b = make_block(w, d, t);
    ggml_backend_sched_set_tensor_backend(s, b.h, cpu2.get());
    ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, b.graph));
    const auto x = random_input(d * t, 1);
    ggml_backend_tensor_set(b.x, x.data(), 0, ggml_nbytes(b.x));
    ASSERT_EQ(ggml_backend_sched_graph_compute(s, b.graph), GGML_STATUS_SUCCESS);
    ASSERT_TRUE(loom_sched_write_trace(s));
    ASSERT_TRUE(loom_sched_dump_dot(s, b.graph, dot.c_str()));
    std::ifstream      in(trace);
    const std::string  json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(json.rfind("{\"traceEvents\":[", 0), 0u);
    EXPECT_NE(json.find("\"cat\":\"split\""), std::string::npos);
    size_t n_splits = 0;
    for (size_t p = json.find("\"cat\":\"split\""); p != std::string::npos; p = json.find("\"cat\":\"split\"", p + 1)) ++n_splits;
    EXPECT_EQ(n_splits, 3u);
    std::ifstream     din(dot);
    const std::string dtext((std::istreambuf_iterator<char>(din)), std::istreambuf_iterator<char>());
    EXPECT_NE(dtext.find("digraph"), std::string::npos);
    EXPECT_NE(dtext.find("color = red"), std::string::npos); // an edge crossing backends
    ggml_backend_sched_free(s);
}

TEST_F(Sched, GraphLargerThanGraphSizeIsAClearError) {
    Weights        w           = make_weights(cpu.get(), d, f, 9);
    ggml_backend_t backends[1] = {cpu.get()};
    ggml_backend_sched_t s = ggml_backend_sched_new(backends, nullptr, 1, 4, false, true);
    Block b = make_block(w, d, t);
    EXPECT_DEATH(ggml_backend_sched_alloc_graph(s, b.graph), "more than the scheduler's graph_size");
    ggml_backend_sched_free(s);
}

// ---- with the non-host test device (tests/plugin) ----

class SchedDevices : public Sched {
  protected:
    void SetUp() override {
        Sched::SetUp();
        reg = loomtest::testdev_reg();
        ASSERT_NE(reg, nullptr);
        loomtest::testdev_reset();
        dev0 = ggml_backend_reg_dev_get(reg, 0);
        dev1 = ggml_backend_reg_dev_get(reg, 1);
        be0.reset(ggml_backend_dev_init(dev0, nullptr));
        be1.reset(ggml_backend_dev_init(dev1, nullptr));
    }
    void TearDown() override { loomtest::testdev_reset(); }

    // Computes a fresh block with s, pinning nothing, and compares with the CPU.
    void expect_equal_to_cpu(ggml_backend_sched_t s, const Weights & w, const Weights & w_cpu, unsigned seed) {
        const auto x   = random_input(d * t, seed);
        const auto ref = direct(cpu.get(), w_cpu, d, t, x);
        ggml_backend_sched_reset(s);
        Block b = make_block(w, d, t);
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, b.graph));
        ggml_backend_tensor_set(b.x, x.data(), 0, ggml_nbytes(b.x));
        ASSERT_EQ(ggml_backend_sched_graph_compute(s, b.graph), GGML_STATUS_SUCCESS);
        std::vector<float> out(ref.size());
        ggml_backend_tensor_get(b.out, out.data(), 0, ggml_nbytes(b.out));
        EXPECT_EQ(out, ref);
        last = std::move(b);
    }

    ggml_backend_reg_t reg  = nullptr;
    ggml_backend_dev_t dev0 = nullptr, dev1 = nullptr;
    ggml_backend_ptr   be0, be1;
    Block              last;
};

TEST_F(SchedDevices, WeightsOnDevicePullTheGraphThere) {
    Weights        w     = make_weights(be0.get(), d, f, 20);
    Weights        w_cpu = make_weights(cpu.get(), d, f, 20);
    ggml_backend_t backends[2] = {be0.get(), cpu.get()};
    ggml_backend_sched_t s = ggml_backend_sched_new(backends, nullptr, 2, GGML_DEFAULT_GRAPH_SIZE, false, true);
    expect_equal_to_cpu(s, w, w_cpu, 21);
    // The input starts on the CPU and is copied once; everything else runs on the device.
    EXPECT_EQ(ggml_backend_sched_get_n_splits(s), 1);
    EXPECT_EQ(ggml_backend_sched_get_tensor_backend(s, last.out), be0.get());
    EXPECT_EQ(ggml_backend_sched_get_tensor_backend(s, last.x), cpu.get());
    loom_sched_stats st{};
    loom_sched_get_stats(s, &st);
    EXPECT_EQ(st.bytes_copied, ggml_nbytes(last.x));
    EXPECT_GT(ggml_backend_sched_get_buffer_size(s, be0.get()), 0u);
    ggml_backend_sched_free(s);
}

TEST_F(SchedDevices, UnsupportedOpsFallBackToCpuWithCopies) {
    ASSERT_TRUE(loomtest::testdev_configure(dev0, "ops", "MUL_MAT,ADD"));
    Weights        w     = make_weights(be0.get(), d, f, 30);
    Weights        w_cpu = make_weights(cpu.get(), d, f, 30);
    ggml_backend_t backends[2] = {be0.get(), cpu.get()};
    ggml_backend_sched_t s = ggml_backend_sched_new(backends, nullptr, 2, GGML_DEFAULT_GRAPH_SIZE, false, true);
    expect_equal_to_cpu(s, w, w_cpu, 31);
    // rms_norm, mul and silu run on the CPU (g is copied there), the products on the device.
    EXPECT_EQ(ggml_backend_sched_get_tensor_backend(s, last.h), cpu.get());
    EXPECT_GE(ggml_backend_sched_get_n_splits(s), 3);
    ggml_backend_sched_free(s);
}

TEST_F(SchedDevices, OffloadTakesProductsOfHostWeights) {
    ASSERT_TRUE(loomtest::testdev_configure(dev0, "ops", "MUL_MAT"));
    ASSERT_TRUE(loomtest::testdev_configure(dev0, "offload_ops", "MUL_MAT"));
    Weights        w = make_weights(cpu.get(), d, f, 40);
    ggml_backend_t backends[2] = {be0.get(), cpu.get()};
    ggml_backend_sched_t s = ggml_backend_sched_new(backends, nullptr, 2, GGML_DEFAULT_GRAPH_SIZE, false, true);
    expect_equal_to_cpu(s, w, w, 41);
    int on_device = 0;
    for (int i = 0; i < ggml_graph_n_nodes(last.graph); ++i) {
        ggml_tensor * n = ggml_graph_node(last.graph, i);
        if (ggml_backend_sched_get_tensor_backend(s, n) == be0.get()) {
            EXPECT_EQ(n->op, GGML_OP_MUL_MAT) << n->name;
            ++on_device;
        }
    }
    EXPECT_EQ(on_device, 2);
    ggml_backend_sched_free(s);

    // Without op_offload the products stay next to their weights.
    s = ggml_backend_sched_new(backends, nullptr, 2, GGML_DEFAULT_GRAPH_SIZE, false, false);
    expect_equal_to_cpu(s, w, w, 42);
    EXPECT_EQ(ggml_backend_sched_get_n_splits(s), 1);
    ggml_backend_sched_free(s);
}

TEST_F(SchedDevices, TwoDevicesAndCpu) {
    // w1 and g on device 0, w2 on device 1: the graph crosses both.
    Weights w0    = make_weights(be0.get(), d, f, 50);
    Weights w1    = make_weights(be1.get(), d, f, 50);
    Weights w_cpu = make_weights(cpu.get(), d, f, 50);
    Weights mixed;
    mixed.w1 = w0.w1;
    mixed.g  = w0.g;
    mixed.w2 = w1.w2;
    ggml_backend_t backends[3] = {be0.get(), be1.get(), cpu.get()};
    ggml_backend_sched_t s = ggml_backend_sched_new(backends, nullptr, 3, GGML_DEFAULT_GRAPH_SIZE, false, true);
    expect_equal_to_cpu(s, mixed, w_cpu, 51);
    EXPECT_EQ(ggml_backend_sched_get_tensor_backend(s, last.h), be0.get());
    EXPECT_EQ(ggml_backend_sched_get_tensor_backend(s, last.out), be1.get());
    EXPECT_GE(ggml_backend_sched_get_n_splits(s), 2);
    ggml_backend_sched_free(s);
}

TEST_F(SchedDevices, PipelineParallelAcrossDeviceAndCpu) {
    ASSERT_TRUE(loomtest::testdev_configure(dev0, "ops", "MUL_MAT,ADD"));
    Weights        w     = make_weights(be0.get(), d, f, 60);
    Weights        w_cpu = make_weights(cpu.get(), d, f, 60);
    ggml_backend_t backends[2] = {be0.get(), cpu.get()};
    ggml_backend_sched_t s = ggml_backend_sched_new(backends, nullptr, 2, GGML_DEFAULT_GRAPH_SIZE, true, true);
    // Several graphs in flight: each is allocated with the next pipeline
    // copy and computed asynchronously; outputs are read after a final sync.
    std::vector<Block>              blocks;
    std::vector<std::vector<float>> inputs;
    for (int step = 0; step < 4; ++step) {
        ggml_backend_sched_reset(s);
        blocks.push_back(make_block(w, d, t));
        Block & b = blocks.back();
        ggml_set_output(b.out);
        inputs.push_back(random_input(d * t, 600 + unsigned(step)));
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, b.graph));
        ggml_backend_tensor_set(b.x, inputs.back().data(), 0, ggml_nbytes(b.x));
        ASSERT_EQ(ggml_backend_sched_graph_compute_async(s, b.graph), GGML_STATUS_SUCCESS);
        ggml_backend_sched_synchronize(s);
        std::vector<float> out(size_t(d * t));
        ggml_backend_tensor_get(b.out, out.data(), 0, ggml_nbytes(b.out));
        EXPECT_EQ(out, direct(cpu.get(), w_cpu, d, t, inputs.back())) << "step " << step;
    }
    ggml_backend_sched_free(s);
}

// Graphs of one layout built anew each step reuse the plan and the
// scheduler's own graph; each step must still read its own tensors: a new
// input, one of two pre-allocated host tensors of the same buffer and shape
// (copied to the device as a split input), and one of two such tensors in
// device memory (read where they are).
TEST_F(SchedDevices, ReusedPlanReadsEachGraphsOwnTensors) {
    ASSERT_TRUE(loomtest::testdev_configure(dev0, "ops", "MUL_MAT,ADD"));
    Weights        w     = make_weights(be0.get(), d, f, 80);
    Weights        w_cpu = make_weights(cpu.get(), d, f, 80);
    ggml_init_params bp = {2 * ggml_tensor_overhead(), nullptr, true};
    ggml_context_ptr bctx(ggml_init(bp)), dctx(ggml_init(bp));
    ggml_tensor *    bias[2] = {ggml_new_tensor_2d(bctx.get(), GGML_TYPE_F32, d, t),
                                ggml_new_tensor_2d(bctx.get(), GGML_TYPE_F32, d, t)};
    ggml_tensor *    dev_bias[2] = {ggml_new_tensor_2d(dctx.get(), GGML_TYPE_F32, d, t),
                                    ggml_new_tensor_2d(dctx.get(), GGML_TYPE_F32, d, t)};
    ggml_backend_buffer_ptr bbuf(ggml_backend_alloc_ctx_tensors(bctx.get(), cpu.get()));
    ggml_backend_buffer_ptr dbuf(ggml_backend_alloc_ctx_tensors(dctx.get(), be0.get()));
    std::vector<float> bias_data[2] = {random_input(d * t, 81), random_input(d * t, 82)};
    std::vector<float> dev_data[2]  = {random_input(d * t, 83), random_input(d * t, 84)};
    for (int k = 0; k < 2; ++k) {
        ggml_backend_tensor_set(bias[k], bias_data[k].data(), 0, ggml_nbytes(bias[k]));
        ggml_backend_tensor_set(dev_bias[k], dev_data[k].data(), 0, ggml_nbytes(dev_bias[k]));
    }

    ggml_backend_t backends[2] = {be0.get(), cpu.get()};
    ggml_backend_sched_t s = ggml_backend_sched_new(backends, nullptr, 2, GGML_DEFAULT_GRAPH_SIZE, false, true);
    for (int step = 0; step < 5; ++step) {
        const auto x   = random_input(d * t, 800 + unsigned(step));
        auto       ref = direct(cpu.get(), w_cpu, d, t, x);
        for (size_t i = 0; i < ref.size(); ++i) ref[i] = (ref[i] + bias_data[step % 2][i]) + dev_data[step % 2][i];

        ggml_backend_sched_reset(s);
        Block         b   = make_block(w, d, t);
        ggml_tensor * out = ggml_add(b.ctx.get(), ggml_add(b.ctx.get(), b.out, bias[step % 2]), dev_bias[step % 2]);
        ggml_set_output(out);
        ggml_build_forward_expand(b.graph, out);
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, b.graph));
        ggml_backend_tensor_set(b.x, x.data(), 0, ggml_nbytes(b.x));
        ASSERT_EQ(ggml_backend_sched_graph_compute(s, b.graph), GGML_STATUS_SUCCESS);
        std::vector<float> got(ref.size());
        ggml_backend_tensor_get(out, got.data(), 0, ggml_nbytes(out));
        EXPECT_EQ(got, ref) << "step " << step;
        EXPECT_EQ(ggml_backend_sched_get_tensor_backend(s, out), be0.get());

        // The same graph object once more, with another input.
        const auto x2   = random_input(d * t, 900 + unsigned(step));
        auto       ref2 = direct(cpu.get(), w_cpu, d, t, x2);
        for (size_t i = 0; i < ref2.size(); ++i) ref2[i] = (ref2[i] + bias_data[step % 2][i]) + dev_data[step % 2][i];
        ggml_backend_sched_reset(s);
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, b.graph));
        ggml_backend_tensor_set(b.x, x2.data(), 0, ggml_nbytes(b.x));
        ASSERT_EQ(ggml_backend_sched_graph_compute(s, b.graph), GGML_STATUS_SUCCESS);
        ggml_backend_tensor_get(out, got.data(), 0, ggml_nbytes(out));
        EXPECT_EQ(got, ref2) << "step " << step << ", same graph";
    }
    loom_sched_stats st{};
    loom_sched_get_stats(s, &st);
    EXPECT_EQ(st.n_plans, 1u);
    EXPECT_EQ(st.n_reused, 9u);
    EXPECT_EQ(st.n_refreshed, 9u);
    ggml_backend_sched_free(s);
}

TEST_F(SchedDevices, WeightInABufferNoBackendCanUseIsAClearError) {
    Weights        w           = make_weights(be0.get(), d, f, 70);
    ggml_backend_t backends[1] = {cpu.get()};
    ggml_backend_sched_t s = ggml_backend_sched_new(backends, nullptr, 1, GGML_DEFAULT_GRAPH_SIZE, false, true);
    // A node pre-allocated in device memory that only the device could run.
    ggml_init_params p = {8 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    ggml_context_ptr c(ggml_init(p));
    ggml_tensor *    v = ggml_view_1d(c.get(), w.w1, 4, 0);
    ggml_tensor *    y = ggml_scale(c.get(), v, 2.0f);
    ggml_cgraph *    g = ggml_new_graph(c.get());
    ggml_build_forward_expand(g, y);
    EXPECT_DEATH(ggml_backend_sched_alloc_graph(s, g), "pre-allocated tensor .*w1.* is in buffer .*TestDev");
    ggml_backend_sched_free(s);
}

// A row index outside the rows (data, not a broken precondition) fails the
// computation through the scheduler as on the backend: the status comes
// back, the output keeps its bytes, and the scheduler computes the next
// graph (Note [Index sources] in core/op_table.h).
// ggml's graph contract as a backend sees it through the scheduler (Note
// [Graph contract] in src/sched/split.cpp): the split's view counts the uses
// of its nodes in the whole user graph, later splits included; every
// placement gives the split a new uid, kept while the placement is computed
// again; and the user's tensors get the extra their device's buffer set.
TEST_F(SchedDevices, SplitsKeepGgmlsGraphContract) {
    ASSERT_TRUE(loomtest::testdev_configure(dev0, "ops", "RMS_NORM,MUL"));
    ASSERT_TRUE(loomtest::testdev_configure(dev0, "extra", "1"));
    auto last_graph = reinterpret_cast<loom_testdev_last_graph_t>(
        ggml_backend_reg_get_proc_address(reg, "loom_testdev_last_graph"));
    ASSERT_NE(last_graph, nullptr);
    ggml_backend_t       backends[2] = {be0.get(), cpu.get()};
    ggml_backend_sched_t s = ggml_backend_sched_new(backends, nullptr, 2, GGML_DEFAULT_GRAPH_SIZE, false, true);

    auto             ctx = loomtest::no_alloc_context();
    ggml_tensor *    x   = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 32, 2);
    ggml_set_input(x);
    ggml_tensor * n   = ggml_rms_norm(ctx.get(), x, 1e-6f); // used by m, p and q
    ggml_tensor * m   = ggml_mul(ctx.get(), n, x);
    ggml_tensor * p   = ggml_mul(ctx.get(), m, n);
    ggml_tensor * q   = ggml_scale(ctx.get(), n, 3.0f);      // on the CPU
    ggml_tensor * out = ggml_add(ctx.get(), ggml_scale(ctx.get(), p, 2.0f), q);
    ggml_set_output(out);
    ggml_cgraph * g = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(g, out);
    ggml_set_name(n, "n");
    ggml_set_name(m, "m");
    ggml_set_name(p, "p");
    for (ggml_tensor * t : {n, m, p}) {
        ggml_backend_sched_set_tensor_backend(s, t, be0.get());
    }

    ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, g));
    EXPECT_NE(g->uid, 0u);
    EXPECT_EQ(n->extra, static_cast<void *>(dev0));
    EXPECT_EQ(p->extra, static_cast<void *>(dev0));
    EXPECT_EQ(q->extra, nullptr);
    std::vector<float> xv(64, 0.5f);
    ggml_backend_tensor_set(x, xv.data(), 0, ggml_nbytes(x));
    ASSERT_EQ(ggml_backend_sched_graph_compute(s, g), GGML_STATUS_SUCCESS);

    uint64_t      uid = 0;
    ggml_tensor * nodes[8];
    int32_t       counts[8];
    ASSERT_EQ(last_graph(dev0, &uid, nodes, counts, 8), 3u);
    EXPECT_STREQ(nodes[0]->name, "n");
    EXPECT_STREQ(nodes[1]->name, "m");
    EXPECT_STREQ(nodes[2]->name, "p");
    EXPECT_EQ(counts[0], 3); // m, p and, in the CPU's split, q
    EXPECT_EQ(counts[1], 1);
    EXPECT_EQ(counts[2], 1);
    EXPECT_NE(uid, 0u);
    EXPECT_NE(uid, g->uid);

    // Computed again as placed: the same uid.
    ASSERT_EQ(ggml_backend_sched_graph_compute(s, g), GGML_STATUS_SUCCESS);
    uint64_t again = 0;
    last_graph(dev0, &again, nodes, counts, 8);
    EXPECT_EQ(again, uid);
    // Placed again (the cached placement reused): a new one.
    ggml_backend_sched_reset(s);
    for (ggml_tensor * t : {n, m, p}) {
        ggml_backend_sched_set_tensor_backend(s, t, be0.get());
    }
    ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, g));
    ASSERT_EQ(ggml_backend_sched_graph_compute(s, g), GGML_STATUS_SUCCESS);
    uint64_t replaced = 0;
    ASSERT_EQ(last_graph(dev0, &replaced, nodes, counts, 8), 3u);
    EXPECT_NE(replaced, uid);
    EXPECT_NE(replaced, 0u);
    EXPECT_EQ(counts[0], 3);
    ggml_backend_sched_free(s);
}

TEST_F(Sched, RowIndexOutsideTheRowsFailsTheGraph) {
    ggml_backend_t       backends[1] = {cpu.get()};
    ggml_backend_sched_t s = ggml_backend_sched_new(backends, nullptr, 1, GGML_DEFAULT_GRAPH_SIZE, false, true);
    ggml_init_params     p = {16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    ggml_context_ptr     ctx(ggml_init(p));
    ggml_tensor *        a   = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 16, 5);
    ggml_tensor *        idx = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_I32, 4);
    ggml_set_input(a);
    ggml_set_input(idx);
    ggml_tensor * out = ggml_get_rows(ctx.get(), a, idx);
    ggml_set_output(out);
    ggml_cgraph * g = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(g, out);
    for (const int32_t bad : {5, 4}) {
        SCOPED_TRACE("last index " + std::to_string(bad));
        ggml_backend_sched_reset(s);
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, g));
        const std::vector<float> av = random_input(16 * 5, 11);
        ggml_backend_tensor_set(a, av.data(), 0, ggml_nbytes(a));
        const int32_t rows[4] = {1, 0, 3, bad};
        ggml_backend_tensor_set(idx, rows, 0, sizeof(rows));
        const std::vector<float> before(16 * 4, 42.0f);
        ggml_backend_tensor_set(out, before.data(), 0, ggml_nbytes(out));
        loomtest::LogCapture log(true);
        const ggml_status    st = ggml_backend_sched_graph_compute(s, g);
        std::vector<float>   got(before.size());
        ggml_backend_tensor_get(out, got.data(), 0, ggml_nbytes(out));
        if (bad == 5) {
            EXPECT_EQ(st, GGML_STATUS_FAILED);
            EXPECT_TRUE(log.contains("index 5 at [3, 0, 0, 0]")) << log.text();
            EXPECT_EQ(got, before);
        } else {
            EXPECT_EQ(st, GGML_STATUS_SUCCESS);
            EXPECT_EQ(std::vector<float>(got.begin() + 48, got.end()), std::vector<float>(av.begin() + 64, av.end()));
        }
    }
    ggml_backend_sched_free(s);
}

TEST_F(Sched, LastBackendMustBeCpu) {
    ggml_backend_t none[1] = {nullptr};
    EXPECT_DEATH(ggml_backend_sched_new(none, nullptr, 1, 16, false, true), "NULL");
}

} // namespace
