// ggml's own CPU backend, the best variant of npm's prebuilt
// @node-llama-cpp/linux-x64@3.22.1 that this processor runs, hosted as a loom
// family (src/backends/ggml_plugin): its buffers, copies between its buffers
// and loom's, and graphs computed on it against loom's CPU.
//
// Skipped when npm's package is not installed (scripts/fetch-npm-llama.sh
// build/npm-llama, or LOOM_NPM_LLAMA_BINS naming its folder of libraries);
// not built under sanitizers, which refuse the RTLD_DEEPBIND hosting needs.

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

class GgmlPlugin : public ::testing::Test {
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

    ggml_backend_dev_t  dev_ = nullptr;
    ggml_backend_ptr    hosted_;
    ggml_backend_ptr    loom_;
    std::mt19937        rng_{1234};
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

// Builds a graph in a context of its own, fills its inputs, computes it on
// the plugin's device and on loom's CPU (a copy made by
// ggml_backend_graph_copy, which copies the plugin's buffers into loom's)
// and compares every output.
class GgmlPluginGraphs : public GgmlPlugin {
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
};

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

} // namespace
