// ggml plugins hosted as loom families (src/backends/ggml_plugin):
// - a probe plugin written to ggml's ABI (tests/plugin/ggml_probe.cpp), which
//   records the graphs it is given: ggml's graph contract (use counts, uid,
//   extra) as a plugin sees it, directly and through the scheduler;
// - ggml's own CPU backend, the best variant of npm's prebuilt
//   @node-llama-cpp/linux-x64@3.22.1 that this processor runs: its buffers,
//   copies between its buffers and loom's, and graphs computed on it against
//   loom's CPU;
// - ggml's Vulkan backend of npm's @node-llama-cpp/linux-x64-vulkan@3.22.1 on
//   the first Vulkan device (GGML_VK_VISIBLE_DEVICES=0 unless set; lavapipe
//   here): its host buffers, events, asynchronous copies, graphs against
//   loom's CPU and the scheduler with loom's CPU.
//
// The npm tests are skipped when their package is not installed
// (scripts/fetch-npm-llama.sh [--vulkan] build/npm-llama, or
// LOOM_NPM_LLAMA_BINS / LOOM_NPM_LLAMA_VULKAN_BINS naming the folder of
// libraries), the Vulkan ones also when no Vulkan device can be used. Not
// built under sanitizers, which refuse the RTLD_DEEPBIND hosting needs.

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "log_capture.h"

namespace fs = std::filesystem;

namespace {

std::string npm_bins() {
    const char * env = std::getenv("LOOM_NPM_LLAMA_BINS");
    return env != nullptr ? env : LOOM_NPM_LLAMA_BINS;
}

bool npm_installed() {
    std::error_code ec;
    return fs::exists(fs::path(npm_bins()) / "libggml-base.so", ec);
}

ggml_backend_dev_t hosted_cpu() {
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        if (std::strcmp(ggml_backend_dev_name(dev), "ggml:CPU") == 0) {
            return dev;
        }
    }
    return nullptr;
}

// A hosted device (dev_, a backend on it in hosted_) beside loom's CPU
// (loom_). check builds a graph in a context of its own, fills its inputs,
// computes it on the hosted device and on loom's CPU (a copy made by
// ggml_backend_graph_copy, which copies the plugin's buffers into loom's)
// and compares the output.
class HostedGraphs : public ::testing::Test {
  protected:
    using Build = ggml_tensor * (*) (ggml_context * ctx, std::vector<ggml_tensor *> & inputs);

    void check(Build build, double max_nmse) {
        ggml_init_params params = {ggml_tensor_overhead() * 64 + ggml_graph_overhead(), nullptr, true};
        ggml_context_ptr ctx(ggml_init(params));
        std::vector<ggml_tensor *> inputs;
        ggml_tensor *              out = build(ctx.get(), inputs);
        ggml_set_output(out);
        ggml_cgraph * graph = ggml_new_graph(ctx.get());
        ggml_build_forward_expand(graph, out);
        for (int i = 0; i < ggml_graph_n_nodes(graph); ++i) {
            ASSERT_TRUE(ggml_backend_supports_op(hosted_.get(), ggml_graph_node(graph, i)))
                << ggml_op_desc(ggml_graph_node(graph, i));
        }
        ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(ctx.get(), hosted_.get()));
        ASSERT_NE(buf, nullptr);
        for (ggml_tensor * t : inputs) {
            fill(t);
        }
        struct ggml_backend_graph_copy copy = ggml_backend_graph_copy(loom_.get(), graph);
        ASSERT_NE(copy.buffer, nullptr);
        ASSERT_EQ(ggml_backend_graph_compute(hosted_.get(), graph), GGML_STATUS_SUCCESS);
        ASSERT_EQ(ggml_backend_graph_compute(loom_.get(), copy.graph), GGML_STATUS_SUCCESS);
        ggml_tensor * ref = ggml_graph_node(copy.graph, -1);
        std::vector<float> got(ggml_nelements(out)), want(ggml_nelements(ref));
        ggml_backend_tensor_get(out, got.data(), 0, ggml_nbytes(out));
        ggml_backend_tensor_get(ref, want.data(), 0, ggml_nbytes(ref));
        ggml_backend_graph_copy_free(copy);
        double err = 0.0, norm = 0.0;
        for (size_t i = 0; i < got.size(); ++i) {
            ASSERT_TRUE(std::isfinite(got[i])) << "element " << i;
            err += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
            norm += double(want[i]) * want[i];
        }
        EXPECT_LE(err / std::max(norm, 1e-30), max_nmse) << ggml_op_desc(out);
    }

    void fill(ggml_tensor * t) {
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        if (t->type == GGML_TYPE_I32) {
            std::vector<int32_t> v(ggml_nelements(t));
            for (size_t i = 0; i < v.size(); ++i) {
                v[i] = int32_t((i * 7 + 3) % 17); // rows, positions: small and repeated
            }
            ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
            return;
        }
        std::vector<float> v(ggml_nelements(t));
        for (float & x : v) {
            x = u(rng_);
        }
        if (t->type == GGML_TYPE_F32) {
            ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
            return;
        }
        std::vector<uint8_t> q(ggml_nbytes(t));
        ggml_quantize_chunk(t->type, v.data(), q.data(), 0, ggml_nrows(t), t->ne[0], nullptr);
        ggml_backend_tensor_set(t, q.data(), 0, q.size());
    }

    ggml_backend_dev_t dev_ = nullptr;
    ggml_backend_ptr   hosted_;
    ggml_backend_ptr   loom_;
    std::mt19937       rng_{1234};
};

class GgmlPlugin : public HostedGraphs {
  protected:
    static void SetUpTestSuite() {
        if (!npm_installed()) {
            return;
        }
        // The loader reads LOOM_GGML_PLUGINS once, on its first search.
        setenv("LOOM_GGML_PLUGINS", "cpu", 1);
        ggml_backend_load_all_from_path(npm_bins().c_str());
    }

    void SetUp() override {
        if (!npm_installed()) {
            GTEST_SKIP() << "npm's @node-llama-cpp/linux-x64@3.22.1 is not installed in " << npm_bins()
                         << " (scripts/fetch-npm-llama.sh build/npm-llama, or set LOOM_NPM_LLAMA_BINS)";
        }
        dev_ = hosted_cpu();
        ASSERT_NE(dev_, nullptr) << "no ggml:CPU device after loading " << npm_bins();
        hosted_.reset(ggml_backend_dev_init(dev_, nullptr));
        loom_.reset(ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_CPU, nullptr));
        ASSERT_NE(hosted_, nullptr);
        ASSERT_NE(loom_, nullptr);
        ASSERT_STRNE(ggml_backend_dev_name(ggml_backend_get_device(loom_.get())), "ggml:CPU");
    }
};

TEST_F(GgmlPlugin, LoadsTheBestVariantAsItsOwnFamily) {
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev_);
    EXPECT_STREQ(ggml_backend_reg_name(reg), "ggml:CPU");
    EXPECT_EQ(ggml_backend_dev_type(dev_), GGML_BACKEND_DEVICE_TYPE_CPU);
    EXPECT_STRNE(ggml_backend_dev_description(dev_), "");
    EXPECT_STREQ(ggml_backend_name(hosted_.get()), "ggml:CPU");
    // Offered functions take loom's handles.
    auto set_n_threads = reinterpret_cast<ggml_backend_set_n_threads_t>(
        ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads"));
    ASSERT_NE(set_n_threads, nullptr);
    set_n_threads(hosted_.get(), 2);
    auto get_features = reinterpret_cast<ggml_backend_get_features_t>(
        ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features"));
    ASSERT_NE(get_features, nullptr);
    EXPECT_NE(get_features(reg)->name, nullptr);
    auto extra = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
        ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts"));
    ASSERT_NE(extra, nullptr);
    for (ggml_backend_buffer_type_t * b = extra(dev_); *b != nullptr; ++b) {
        EXPECT_EQ(ggml_backend_buft_get_device(*b), dev_) << ggml_backend_buft_name(*b);
    }
    // Functions that would hand the plugin a handle loom cannot translate are not offered.
    EXPECT_EQ(ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_new"), nullptr);
    // Loading the same family again changes nothing.
    const size_t regs = ggml_backend_reg_count();
    ggml_backend_load_all_from_path(npm_bins().c_str());
    EXPECT_EQ(ggml_backend_reg_count(), regs);
}

TEST_F(GgmlPlugin, RefusesLibrariesThatAreNotPlugins) {
    loomtest::LogCapture log;
    const std::string base = npm_bins() + "/libggml-base.so";
    EXPECT_EQ(ggml_backend_load(base.c_str()), nullptr);
    EXPECT_TRUE(log.contains("libggml-base.so")) << log.text();
}

TEST_F(GgmlPlugin, BufferSetGetMemsetClear) {
    ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(dev_);
    EXPECT_TRUE(ggml_backend_dev_supports_buft(dev_, buft));
    EXPECT_FALSE(ggml_backend_dev_supports_buft(dev_, ggml_backend_cpu_buffer_type()));
    EXPECT_TRUE(ggml_backend_buft_is_host(buft));
    EXPECT_EQ(ggml_backend_buft_get_device(buft), dev_);

    ggml_init_params params = {ggml_tensor_overhead() * 4, nullptr, true};
    ggml_context_ptr ctx(ggml_init(params));
    ggml_tensor *    a = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 1000);
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors_from_buft(ctx.get(), buft));
    ASSERT_NE(buf, nullptr);
    EXPECT_NE(ggml_backend_buffer_get_base(buf.get()), nullptr);
    EXPECT_GE(ggml_backend_buffer_get_size(buf.get()), ggml_nbytes(a));

    ggml_backend_buffer_clear(buf.get(), 0x7f);
    std::vector<uint8_t> bytes(ggml_nbytes(a));
    ggml_backend_tensor_get(a, bytes.data(), 0, bytes.size());
    EXPECT_EQ(bytes.front(), 0x7f);
    EXPECT_EQ(bytes.back(), 0x7f);

    std::vector<float> in(1000), out(1000);
    for (size_t i = 0; i < in.size(); ++i) {
        in[i] = float(i) * 0.5f;
    }
    ggml_backend_tensor_set(a, in.data(), 0, ggml_nbytes(a));
    ggml_backend_tensor_memset(a, 0, 4 * sizeof(float), 2 * sizeof(float));
    ggml_backend_tensor_get(a, out.data(), 0, ggml_nbytes(a));
    in[4] = in[5] = 0.0f;
    EXPECT_EQ(in, out);

    // Between a loom buffer and the plugin's, both ways.
    ggml_context_ptr ctx2(ggml_init(params));
    ggml_tensor *    b = ggml_new_tensor_1d(ctx2.get(), GGML_TYPE_F32, 1000);
    ggml_backend_buffer_ptr loom_buf(ggml_backend_alloc_ctx_tensors(ctx2.get(), loom_.get()));
    ggml_backend_tensor_copy(a, b);
    std::vector<float> via(1000);
    ggml_backend_tensor_get(b, via.data(), 0, ggml_nbytes(b));
    EXPECT_EQ(via, in);
    for (float & v : via) {
        v += 1.0f;
    }
    ggml_backend_tensor_set(b, via.data(), 0, ggml_nbytes(b));
    ggml_backend_tensor_copy(b, a);
    ggml_backend_tensor_get(a, out.data(), 0, ggml_nbytes(a));
    EXPECT_EQ(out, via);
}

class GgmlPluginGraphs : public GgmlPlugin {};

ggml_tensor * input(ggml_context * ctx, std::vector<ggml_tensor *> & inputs, ggml_type type, int64_t n0, int64_t n1,
                    int64_t n2 = 1) {
    ggml_tensor * t = ggml_new_tensor_3d(ctx, type, n0, n1, n2);
    ggml_set_input(t);
    inputs.push_back(t);
    return t;
}

TEST_F(GgmlPluginGraphs, MulMatF32) {
    check(
        [](ggml_context * ctx, std::vector<ggml_tensor *> & in) {
            return ggml_mul_mat(ctx, input(ctx, in, GGML_TYPE_F32, 96, 33), input(ctx, in, GGML_TYPE_F32, 96, 7));
        },
        1e-9);
}

TEST_F(GgmlPluginGraphs, MulMatQ4_0) {
    check(
        [](ggml_context * ctx, std::vector<ggml_tensor *> & in) {
            return ggml_mul_mat(ctx, input(ctx, in, GGML_TYPE_Q4_0, 256, 40), input(ctx, in, GGML_TYPE_F32, 256, 9));
        },
        1e-5);
}

TEST_F(GgmlPluginGraphs, AddRmsNormMul) {
    // RMS_NORM then MUL, which ggml's CPU fuses when the norm has no other use.
    check(
        [](ggml_context * ctx, std::vector<ggml_tensor *> & in) {
            ggml_tensor * x = ggml_add(ctx, input(ctx, in, GGML_TYPE_F32, 64, 5), input(ctx, in, GGML_TYPE_F32, 64, 5));
            return ggml_mul(ctx, ggml_rms_norm(ctx, x, 1e-6f), input(ctx, in, GGML_TYPE_F32, 64, 1));
        },
        1e-10);
}

TEST_F(GgmlPluginGraphs, SoftMax) {
    check(
        [](ggml_context * ctx, std::vector<ggml_tensor *> & in) {
            return ggml_soft_max_ext(ctx, input(ctx, in, GGML_TYPE_F32, 40, 6), nullptr, 0.7f, 0.0f);
        },
        1e-10);
}

TEST_F(GgmlPluginGraphs, Rope) {
    check(
        [](ggml_context * ctx, std::vector<ggml_tensor *> & in) {
            ggml_tensor * x   = input(ctx, in, GGML_TYPE_F32, 32, 4, 5); // head size, heads, tokens
            ggml_tensor * pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 5);
            ggml_set_input(pos);
            in.push_back(pos);
            return ggml_rope_ext(ctx, x, pos, nullptr, 32, GGML_ROPE_TYPE_NEOX, 4096, 10000.0f, 1.0f, 0.0f, 1.0f,
                                 32.0f, 1.0f);
        },
        1e-10);
}

TEST_F(GgmlPluginGraphs, GetRows) {
    check(
        [](ggml_context * ctx, std::vector<ggml_tensor *> & in) {
            ggml_tensor * rows = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 11);
            ggml_set_input(rows);
            ggml_tensor * table = input(ctx, in, GGML_TYPE_Q4_0, 64, 20);
            in.push_back(rows);
            return ggml_get_rows(ctx, table, rows);
        },
        1e-12);
}

// ---- the probe plugin: ggml's graph contract as a plugin sees it ------------

// What the probe recorded of the last graph it was given.
struct Seen {
    uint64_t                         uid = 0;
    std::vector<const ggml_tensor *> nodes;
    std::vector<int32_t>             use_counts;
    std::vector<void *>              extras;
};

class GgmlProbe : public ::testing::Test {
  protected:
    void SetUp() override {
        reg_ = ggml_backend_load(LOOM_GGML_PROBE_PATH);
        ASSERT_NE(reg_, nullptr);
        EXPECT_STREQ(ggml_backend_reg_name(reg_), "ggml:Probe");
        ASSERT_EQ(ggml_backend_reg_dev_count(reg_), 1u);
        dev_ = ggml_backend_reg_dev_get(reg_, 0);
        EXPECT_STREQ(ggml_backend_dev_name(dev_), "ggml:Probe0");
        // The library loom opened, for the probe's own functions.
        void * lib = dlopen(LOOM_GGML_PROBE_PATH, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        ASSERT_NE(lib, nullptr);
        last_graph_ = reinterpret_cast<LastGraph>(dlsym(lib, "ggml_probe_last_graph"));
        auto tag    = reinterpret_cast<const void * (*) ()>(dlsym(lib, "ggml_probe_extra_tag"));
        ASSERT_NE(last_graph_, nullptr);
        ASSERT_NE(tag, nullptr);
        tag_ = tag();
        dlclose(lib);
        probe_.reset(ggml_backend_dev_init(dev_, nullptr));
        cpu_.reset(ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_CPU, nullptr));
        ASSERT_NE(probe_, nullptr);
        ASSERT_NE(cpu_, nullptr);
    }

    Seen seen() const {
        Seen           s;
        const ggml_tensor * nodes[16];
        int32_t        counts[16];
        void *         extras[16];
        const size_t   n = last_graph_(&s.uid, nodes, counts, extras, 16);
        EXPECT_LE(n, 16u);
        s.nodes.assign(nodes, nodes + std::min<size_t>(n, 16));
        s.use_counts.assign(counts, counts + std::min<size_t>(n, 16));
        s.extras.assign(extras, extras + std::min<size_t>(n, 16));
        return s;
    }

    // x (an input) -> n = rms_norm(x) -> m = n * x -> p = m * n, then q =
    // scale(n) and out = scale(p) + q, which the probe does not compute
    // (it supports no SCALE).
    struct Graph {
        ggml_context_ptr ctx;
        ggml_cgraph *    g = nullptr;
        ggml_tensor *    x = nullptr, *n = nullptr, *m = nullptr, *p = nullptr, *q = nullptr, *out = nullptr;
    };
    static Graph make_graph(bool with_cpu_part) {
        Graph            r;
        ggml_init_params params = {ggml_tensor_overhead() * 16 + ggml_graph_overhead(), nullptr, true};
        r.ctx.reset(ggml_init(params));
        ggml_context * ctx = r.ctx.get();
        r.x                = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 32, 2);
        ggml_set_input(r.x);
        r.n = ggml_rms_norm(ctx, r.x, 1e-6f);
        r.m = ggml_mul(ctx, r.n, r.x);
        r.p = ggml_mul(ctx, r.m, r.n);
        ggml_set_name(r.n, "n");
        ggml_set_name(r.m, "m");
        ggml_set_name(r.p, "p");
        r.out = r.p;
        if (with_cpu_part) {
            r.q   = ggml_scale(ctx, r.n, 3.0f);
            r.out = ggml_add(ctx, ggml_scale(ctx, r.p, 2.0f), r.q);
        }
        ggml_set_output(r.out);
        r.g = ggml_new_graph(ctx);
        ggml_build_forward_expand(r.g, r.out);
        return r;
    }

    using LastGraph = size_t (*)(uint64_t *, const ggml_tensor **, int32_t *, void **, size_t);
    ggml_backend_reg_t reg_ = nullptr;
    ggml_backend_dev_t dev_ = nullptr;
    LastGraph          last_graph_ = nullptr;
    const void *       tag_        = nullptr;
    ggml_backend_ptr   probe_;
    ggml_backend_ptr   cpu_;
};

// A graph computed directly: the use counts of ggml_build_forward_expand,
// uid 0 (ggml's graphs have none until a scheduler gives them one), the
// plugin's extra on its tensors, and the same shadows for the same graph.
TEST_F(GgmlProbe, WholeGraphKeepsUseCountsAndExtra) {
    Graph                   gr = make_graph(false);
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(gr.ctx.get(), probe_.get()));
    ASSERT_NE(buf, nullptr);
    EXPECT_EQ(gr.n->extra, tag_); // kept by loom's tensor for the shadows
    ASSERT_EQ(ggml_backend_graph_compute(probe_.get(), gr.g), GGML_STATUS_SUCCESS);
    const Seen first = seen();
    ASSERT_EQ(first.nodes.size(), 3u);
    EXPECT_STREQ(first.nodes[0]->name, "n");
    EXPECT_STREQ(first.nodes[2]->name, "p");
    EXPECT_EQ(first.use_counts, (std::vector<int32_t>{2, 1, 0}));
    EXPECT_EQ(first.uid, 0u);
    for (void * extra : first.extras) {
        EXPECT_EQ(extra, tag_);
    }
    ASSERT_EQ(ggml_backend_graph_compute(probe_.get(), gr.g), GGML_STATUS_SUCCESS);
    EXPECT_EQ(seen().nodes, first.nodes);
}

// Through the scheduler, beside loom's CPU: the split shows the uses of its
// nodes in the later CPU split, a uid the plugin sees again while the
// placement is computed again and a new one when the graph is placed again,
// and the user's tensors hold the plugin's extra.
TEST_F(GgmlProbe, SchedulerSplitsKeepGgmlsGraphContract) {
    ggml_backend_t       backends[2] = {probe_.get(), cpu_.get()};
    ggml_backend_sched_t s = ggml_backend_sched_new(backends, nullptr, 2, GGML_DEFAULT_GRAPH_SIZE, false, true);
    Graph                gr = make_graph(true);
    auto                 place = [&] {
        for (ggml_tensor * t : {gr.n, gr.m, gr.p}) {
            ggml_backend_sched_set_tensor_backend(s, t, probe_.get());
        }
        ggml_backend_sched_set_tensor_backend(s, gr.out, cpu_.get());
        return ggml_backend_sched_alloc_graph(s, gr.g);
    };
    ASSERT_TRUE(place());
    EXPECT_EQ(gr.n->extra, tag_);
    EXPECT_EQ(gr.p->extra, tag_);
    EXPECT_EQ(gr.q->extra, nullptr);
    std::vector<float> x(64, 0.25f);
    ggml_backend_tensor_set(gr.x, x.data(), 0, ggml_nbytes(gr.x));
    ASSERT_EQ(ggml_backend_sched_graph_compute(s, gr.g), GGML_STATUS_SUCCESS);
    const Seen first = seen();
    ASSERT_EQ(first.nodes.size(), 3u);
    EXPECT_STREQ(first.nodes[0]->name, "n");
    EXPECT_EQ(first.use_counts, (std::vector<int32_t>{3, 1, 1})); // n: m, p and q on the CPU
    EXPECT_NE(first.uid, 0u);
    for (void * extra : first.extras) {
        EXPECT_EQ(extra, tag_);
    }

    ASSERT_EQ(ggml_backend_sched_graph_compute(s, gr.g), GGML_STATUS_SUCCESS);
    const Seen again = seen();
    EXPECT_EQ(again.uid, first.uid);
    EXPECT_EQ(again.nodes, first.nodes);

    ggml_backend_sched_reset(s);
    ASSERT_TRUE(place());
    ASSERT_EQ(ggml_backend_sched_graph_compute(s, gr.g), GGML_STATUS_SUCCESS);
    const Seen replaced = seen();
    EXPECT_NE(replaced.uid, first.uid);
    EXPECT_NE(replaced.uid, 0u);
    EXPECT_EQ(replaced.use_counts, first.use_counts);
    ggml_backend_sched_free(s);
}

// ---- ggml's Vulkan plugin ---------------------------------------------------

std::string npm_vulkan_bins() {
    const char * env = std::getenv("LOOM_NPM_LLAMA_VULKAN_BINS");
    return env != nullptr ? env : LOOM_NPM_LLAMA_VULKAN_BINS;
}

class GgmlVulkan : public HostedGraphs {
  protected:
    static std::string plugin() { return npm_vulkan_bins() + "/libggml-vulkan.so"; }

    static void SetUpTestSuite() {
        std::error_code ec;
        if (!fs::exists(plugin(), ec)) {
            return;
        }
        setenv("GGML_VK_VISIBLE_DEVICES", "0", 0);
        loomtest::LogCapture log;
        reg_ = ggml_backend_load(plugin().c_str());
        if (reg_ == nullptr) {
            why_ = log.text();
        }
    }

    void SetUp() override {
        std::error_code ec;
        if (!fs::exists(plugin(), ec)) {
            GTEST_SKIP() << "npm's @node-llama-cpp/linux-x64-vulkan@3.22.1 is not installed in "
                         << npm_vulkan_bins()
                         << " (scripts/fetch-npm-llama.sh --vulkan build/npm-llama, or set LOOM_NPM_LLAMA_VULKAN_BINS)";
        }
        if (reg_ == nullptr || ggml_backend_reg_dev_count(reg_) == 0) {
            GTEST_SKIP() << "ggml's Vulkan plugin found no Vulkan device (no Vulkan driver?): " << why_;
        }
        dev_ = ggml_backend_reg_dev_get(reg_, 0);
        hosted_.reset(ggml_backend_dev_init(dev_, nullptr));
        loom_.reset(ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_CPU, nullptr));
        ASSERT_NE(hosted_, nullptr);
        ASSERT_NE(loom_, nullptr);
    }

    static inline ggml_backend_reg_t reg_ = nullptr;
    static inline std::string        why_;
};

TEST_F(GgmlVulkan, LoadsAsItsOwnFamily) {
    EXPECT_STREQ(ggml_backend_reg_name(reg_), "ggml:Vulkan");
    EXPECT_STREQ(ggml_backend_dev_name(dev_), "ggml:Vulkan0");
    EXPECT_STREQ(ggml_backend_name(hosted_.get()), "ggml:Vulkan0");
    EXPECT_EQ(ggml_backend_dev_by_name("ggml:Vulkan0"), dev_);
    ggml_backend_dev_props props;
    ggml_backend_dev_get_props(dev_, &props);
    EXPECT_STREQ(props.name, "ggml:Vulkan0");
    EXPECT_TRUE(props.caps.async);
    EXPECT_TRUE(props.caps.host_buffer);
    EXPECT_TRUE(props.caps.events);
    EXPECT_GT(props.memory_total, 0u);
    // The plugin offers no functions through get_proc_address.
    for (const char * fn : {"ggml_backend_set_n_threads", "ggml_backend_dev_get_extra_bufts",
                            "ggml_backend_get_features", "ggml_backend_set_abort_callback"}) {
        EXPECT_EQ(ggml_backend_reg_get_proc_address(reg_, fn), nullptr) << fn;
    }
    ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(dev_);
    EXPECT_FALSE(ggml_backend_buft_is_host(buft));
    EXPECT_TRUE(ggml_backend_dev_supports_buft(dev_, buft));
    EXPECT_FALSE(ggml_backend_dev_supports_buft(dev_, ggml_backend_cpu_buffer_type()));
    EXPECT_EQ(ggml_backend_buft_get_device(buft), dev_);
}

// The host buffer type's memory is the host's (pinned by the plugin), copies
// go to and from the device synchronously and asynchronously, events order
// the stream.
TEST_F(GgmlVulkan, HostBuffersEventsAndCopies) {
    ggml_backend_buffer_type_t host = ggml_backend_dev_host_buffer_type(dev_);
    ASSERT_NE(host, nullptr);
    EXPECT_STREQ(ggml_backend_buft_name(host), "ggml:Vulkan_Host");
    EXPECT_TRUE(ggml_backend_buft_is_host(host));
    EXPECT_EQ(ggml_backend_buft_get_device(host), dev_);

    ggml_init_params params = {ggml_tensor_overhead() * 4, nullptr, true};
    ggml_context_ptr hctx(ggml_init(params)), dctx(ggml_init(params)), lctx(ggml_init(params));
    ggml_tensor *    h = ggml_new_tensor_1d(hctx.get(), GGML_TYPE_F32, 4096);
    ggml_tensor *    d = ggml_new_tensor_1d(dctx.get(), GGML_TYPE_F32, 4096);
    ggml_tensor *    l = ggml_new_tensor_1d(lctx.get(), GGML_TYPE_F32, 4096);
    ggml_backend_buffer_ptr hbuf(ggml_backend_alloc_ctx_tensors_from_buft(hctx.get(), host));
    ggml_backend_buffer_ptr dbuf(ggml_backend_alloc_ctx_tensors(dctx.get(), hosted_.get()));
    ggml_backend_buffer_ptr lbuf(ggml_backend_alloc_ctx_tensors(lctx.get(), loom_.get()));
    ASSERT_NE(hbuf, nullptr);
    ASSERT_NE(dbuf, nullptr);
    ASSERT_NE(lbuf, nullptr);
    ASSERT_TRUE(ggml_backend_buffer_is_host(hbuf.get()));

    std::vector<float> v(4096), got(4096);
    for (size_t i = 0; i < v.size(); ++i) {
        v[i] = float(i) - 100.0f;
    }
    std::memcpy(h->data, v.data(), ggml_nbytes(h)); // host memory, written directly
    ggml_backend_tensor_copy_async(loom_.get(), hosted_.get(), h, d);
    ggml_backend_event_t ev = ggml_backend_event_new(dev_);
    ASSERT_NE(ev, nullptr);
    ggml_backend_event_record(ev, hosted_.get());
    ggml_backend_event_synchronize(ev);
    ggml_backend_tensor_get(d, got.data(), 0, ggml_nbytes(d));
    EXPECT_EQ(got, v);

    for (float & x : v) {
        x *= 0.5f;
    }
    ggml_backend_tensor_set_async(hosted_.get(), d, v.data(), 0, ggml_nbytes(d));
    ggml_backend_event_record(ev, hosted_.get());
    ggml_backend_event_wait(hosted_.get(), ev);
    ggml_backend_tensor_get_async(hosted_.get(), d, got.data(), 0, ggml_nbytes(d));
    ggml_backend_synchronize(hosted_.get());
    EXPECT_EQ(got, v);
    ggml_backend_event_free(ev);

    // Device to loom's CPU and back, and into the host buffer.
    ggml_backend_tensor_copy(d, l);
    ggml_backend_tensor_get(l, got.data(), 0, ggml_nbytes(l));
    EXPECT_EQ(got, v);
    ggml_backend_tensor_memset(d, 0, 0, ggml_nbytes(d));
    ggml_backend_tensor_copy(l, d);
    ggml_backend_tensor_copy(d, h);
    EXPECT_EQ(std::memcmp(h->data, v.data(), ggml_nbytes(h)), 0);
}

TEST_F(GgmlVulkan, AddRmsNormMul) {
    // RMS_NORM then MUL, which ggml's Vulkan backend fuses when the norm has
    // no other use (the graph's use counts).
    check(
        [](ggml_context * ctx, std::vector<ggml_tensor *> & in) {
            ggml_tensor * x = ggml_add(ctx, input(ctx, in, GGML_TYPE_F32, 64, 5), input(ctx, in, GGML_TYPE_F32, 64, 5));
            return ggml_mul(ctx, ggml_rms_norm(ctx, x, 1e-6f), input(ctx, in, GGML_TYPE_F32, 64, 1));
        },
        1e-9);
}

TEST_F(GgmlVulkan, RmsNormUsedTwice) {
    // The norm is used after the MUL too: fusing it away would lose it.
    check(
        [](ggml_context * ctx, std::vector<ggml_tensor *> & in) {
            ggml_tensor * n = ggml_rms_norm(ctx, input(ctx, in, GGML_TYPE_F32, 64, 5), 1e-6f);
            return ggml_add(ctx, ggml_mul(ctx, n, input(ctx, in, GGML_TYPE_F32, 64, 1)), n);
        },
        1e-9);
}

TEST_F(GgmlVulkan, MulMatQ4_0) {
    check(
        [](ggml_context * ctx, std::vector<ggml_tensor *> & in) {
            return ggml_mul_mat(ctx, input(ctx, in, GGML_TYPE_Q4_0, 256, 40), input(ctx, in, GGML_TYPE_F32, 256, 1));
        },
        5e-4); // test-backend-ops' bound: the device may quantize the activations to q8_1
}

TEST_F(GgmlVulkan, GetRows) {
    check(
        [](ggml_context * ctx, std::vector<ggml_tensor *> & in) {
            ggml_tensor * rows = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 11);
            ggml_set_input(rows);
            ggml_tensor * table = input(ctx, in, GGML_TYPE_F32, 64, 20);
            in.push_back(rows);
            return ggml_get_rows(ctx, table, rows);
        },
        1e-12);
}

// loom's scheduler with the hosted device first and loom's CPU last, with
// pipeline copies (events between the two): a product of weights on the
// device, each run equal to loom's CPU alone.
TEST_F(GgmlVulkan, SchedulerBesideLoomsCpu) {
    constexpr int           d = 64, f = 96, t = 3;
    ggml_init_params        wp = {ggml_tensor_overhead() * 4, nullptr, true};
    ggml_context_ptr        wctx(ggml_init(wp)), cwctx(ggml_init(wp));
    ggml_tensor *           w  = ggml_new_tensor_2d(wctx.get(), GGML_TYPE_F32, d, f);
    ggml_tensor *           cw = ggml_new_tensor_2d(cwctx.get(), GGML_TYPE_F32, d, f);
    ggml_backend_buffer_ptr wbuf(ggml_backend_alloc_ctx_tensors(wctx.get(), hosted_.get()));
    ggml_backend_buffer_ptr cwbuf(ggml_backend_alloc_ctx_tensors(cwctx.get(), loom_.get()));
    ggml_backend_buffer_set_usage(wbuf.get(), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    fill(w);
    ggml_backend_tensor_copy(w, cw);

    auto run = [&](ggml_backend_sched_t s, ggml_tensor * weights, const std::vector<float> & x) {
        ggml_init_params p = {ggml_tensor_overhead() * 16 + ggml_graph_overhead(), nullptr, true};
        ggml_context_ptr ctx(ggml_init(p));
        ggml_tensor *    in = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, d, t);
        ggml_set_input(in);
        ggml_tensor * h   = ggml_mul_mat(ctx.get(), weights, ggml_rms_norm(ctx.get(), in, 1e-6f));
        ggml_tensor * out = ggml_add(ctx.get(), ggml_scale(ctx.get(), h, 0.5f), h);
        ggml_set_output(out);
        ggml_cgraph * g = ggml_new_graph(ctx.get());
        ggml_build_forward_expand(g, out);
        ggml_backend_sched_reset(s);
        EXPECT_TRUE(ggml_backend_sched_alloc_graph(s, g));
        ggml_backend_tensor_set(in, x.data(), 0, ggml_nbytes(in));
        EXPECT_EQ(ggml_backend_sched_graph_compute(s, g), GGML_STATUS_SUCCESS);
        std::vector<float> r(size_t(ggml_nelements(out)));
        ggml_backend_tensor_get(out, r.data(), 0, ggml_nbytes(out));
        return r;
    };
    ggml_backend_t       both[2] = {hosted_.get(), loom_.get()};
    ggml_backend_t       alone[1] = {loom_.get()};
    ggml_backend_sched_t s  = ggml_backend_sched_new(both, nullptr, 2, GGML_DEFAULT_GRAPH_SIZE, true, true);
    ggml_backend_sched_t sc = ggml_backend_sched_new(alone, nullptr, 1, GGML_DEFAULT_GRAPH_SIZE, false, true);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int k = 0; k < 3; ++k) {
        std::vector<float> x(size_t(d) * t);
        for (float & v : x) {
            v = u(rng_);
        }
        const std::vector<float> got  = run(s, w, x);
        const std::vector<float> want = run(sc, cw, x);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) {
            EXPECT_NEAR(got[i], want[i], 1e-5f) << "run " << k << ", element " << i;
        }
    }
    EXPECT_GE(ggml_backend_sched_get_n_splits(s), 1);
    ggml_backend_sched_free(s);
    ggml_backend_sched_free(sc);
}

} // namespace
