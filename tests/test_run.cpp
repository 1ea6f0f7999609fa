// loom-run's model code on the stories260K model against llama.cpp's
// reference (tests/data/stories260k-reference.json): greedy continuations
// token for token and the logits of the last prompt position, on the CPU and
// with the layers split between the test device plugin and the CPU; the
// GGUF v1 file; the sampler, the command line and rejected inputs.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "tensor_split.h"
#include "ggml-rpc.h"
#include "log_capture.h"
#include "args.h"
#include "backend_test_helpers.h"
#include "devices.h"
#include "gguf.h"
#include "model.h"
#include "sampler.h"
#include "session.h"
#include "tokenizer.h"

namespace {

std::string data_path(const std::string & name) {
    return name.starts_with("/") ? name : std::string(LOOM_TEST_DATA) + "/" + name;
}

struct RefPrompt {
    std::string          prompt;
    std::vector<int32_t> prompt_ids;
    std::vector<int32_t> generated;
    std::string          generated_text;
    std::vector<float>   first16;
    int32_t              argmax = -1;
    float                max    = 0;
};

const std::vector<RefPrompt> & reference() {
    static const std::vector<RefPrompt> prompts = [] {
        std::ifstream  in(data_path("stories260k-reference.json"));
        nlohmann::json root = nlohmann::json::parse(in, nullptr, false);
        if (root.is_discarded()) {
            ADD_FAILURE() << "cannot parse stories260k-reference.json";
            return std::vector<RefPrompt>{};
        }
        std::vector<RefPrompt> out;
        for (const nlohmann::json & p : root.at("prompts")) {
            RefPrompt r;
            r.prompt               = p.at("prompt").get<std::string>();
            r.prompt_ids           = p.at("prompt_token_ids").get<std::vector<int32_t>>();
            r.generated            = p.at("generated_token_ids").get<std::vector<int32_t>>();
            r.generated_text       = p.at("generated_text").get<std::string>();
            const nlohmann::json & lg = p.at("last_prompt_position_logits");
            r.first16              = lg.at("first16").get<std::vector<float>>();
            r.argmax               = lg.at("argmax").get<int32_t>();
            r.max                  = lg.at("max").get<float>();
            out.push_back(std::move(r));
        }
        return out;
    }();
    return prompts;
}

// A loaded model with its devices, tokenizer and session.
struct Runner {
    loom_run::TensorSplit               split; // outlives the backends
    std::unique_ptr<loom_run::Backends> backends;
    std::unique_ptr<loom_run::Model>    model;
    loom_run::Tokenizer                 tokenizer;
    std::unique_ptr<loom_run::Session>  session;
};

struct RunConfig {
    std::string                              file = "stories260k-f32.gguf";
    std::vector<std::string>                 devices;
    std::vector<std::string>                 rpc_servers;
    std::vector<std::pair<std::string, int>> layers_on;
    bool                                     use_test_device = false;
    bool                                     use_mmap        = true;
    bool                                     tensor_split    = false; // --split-mode tensor
    int                                      n_threads       = 1;
    loom_run::SessionOptions                 session;
};

std::unique_ptr<Runner> open_runner(const RunConfig & cfg, std::string * error) {
    auto                     r = std::make_unique<Runner>();
    std::vector<std::string> plugins;
    if (cfg.use_test_device) {
        plugins.push_back(LOOM_TESTDEV_PATH);
    }
    r->backends = loom_run::Backends::create(cfg.devices, plugins, cfg.n_threads, error, cfg.rpc_servers);
    if (!r->backends) return nullptr;
    if (cfg.tensor_split) {
        if (!r->backends->combine_for_tensor_split(loom_run::tensor_split_state, &r->split, error)) return nullptr;
        r->split.n_members = r->backends->n_members();
    }
    loom_run::LoadOptions lo;
    lo.use_mmap     = cfg.use_mmap;
    lo.on_hparams   = [&](const loom_run::HParams & hp) { r->split.set_hparams(hp); };
    lo.place_layers = [&](uint32_t n_layer, std::vector<int> * dev, std::string * err) {
        return loom_run::assign_layers(*r->backends, int(n_layer), cfg.layers_on, dev, err);
    };
    r->model = loom_run::Model::load(data_path(cfg.file), *r->backends, lo, error);
    if (!r->model) return nullptr;
    if (!r->tokenizer.load(r->model->gguf(), error)) return nullptr;
    r->session = loom_run::Session::create(*r->model, *r->backends, cfg.session, error);
    if (!r->session) return nullptr;
    return r;
}

RunConfig cpu_config() {
    RunConfig c;
    c.devices       = {"cpu"};
    c.session.n_ctx = 128;
    return c;
}

// Last-position logits of a prompt in a fresh context.
std::vector<float> prompt_logits(Runner & r, const std::vector<int32_t> & ids) {
    std::vector<float> logits;
    std::string        error;
    r.session->clear();
    EXPECT_TRUE(r.session->eval(ids, &logits, &error)) << error;
    return logits;
}

// The first n_prompts reference prompts: token ids, last-position logits,
// 64 greedy tokens.
void check_reference(Runner & r, const char * label, size_t n_prompts = SIZE_MAX) {
    ASSERT_FALSE(reference().empty());
    for (size_t p = 0; p < std::min(n_prompts, reference().size()); ++p) {
        const RefPrompt & ref = reference()[p];
        SCOPED_TRACE(std::string(label) + ", prompt \"" + ref.prompt + "\"");
        const std::vector<int32_t> ids = r.tokenizer.tokenize(ref.prompt, true);
        ASSERT_EQ(ids, ref.prompt_ids);

        std::vector<float> logits = prompt_logits(r, ids);
        ASSERT_EQ(logits.size(), 512u);
        for (size_t i = 0; i < ref.first16.size(); ++i) {
            EXPECT_NEAR(logits[i], ref.first16[i], 1e-4 * std::fabs(ref.first16[i])) << "logit " << i;
        }
        const int32_t best = loom_run::Sampler::argmax(logits);
        EXPECT_EQ(best, ref.argmax);
        EXPECT_NEAR(logits[size_t(best)], ref.max, 1e-4 * std::fabs(ref.max));

        std::vector<int32_t> generated;
        std::string          error;
        for (size_t t = 0; t < ref.generated.size(); ++t) {
            const int32_t id = loom_run::Sampler::argmax(logits);
            generated.push_back(id);
            if (t + 1 < ref.generated.size()) {
                ASSERT_TRUE(r.session->eval(std::span<const int32_t>(&id, 1), &logits, &error)) << error;
            }
        }
        EXPECT_EQ(generated, ref.generated);
    }
}

TEST(RunReference, GreedyOnCpu) {
    std::string error;
    auto        r = open_runner(cpu_config(), &error);
    ASSERT_TRUE(r) << error;
    EXPECT_TRUE(r->model->mapped());
    check_reference(*r, "CPU");
    EXPECT_EQ(r->session->n_splits(), 1);
}

// One prompt is enough for the threaded kernels: on a busy machine every
// barrier of a tiny graph can cost a context switch.
TEST(RunReference, GreedyOnCpuWithTwoThreads) {
    RunConfig c = cpu_config();
    c.n_threads = 2;
    std::string error;
    auto        r = open_runner(c, &error);
    ASSERT_TRUE(r) << error;
    check_reference(*r, "CPU, 2 threads", 1);
}

TEST(RunReference, GreedyWithFlashAttention) {
    RunConfig c          = cpu_config();
    c.session.flash_attn = true;
    std::string error;
    auto        r = open_runner(c, &error);
    ASSERT_TRUE(r) << error;
    check_reference(*r, "CPU, flash attention");
}

TEST(RunReference, GreedyWithPromptInSmallBatches) {
    RunConfig c       = cpu_config();
    c.session.n_batch = 2;
    std::string error;
    auto        r = open_runner(c, &error);
    ASSERT_TRUE(r) << error;
    check_reference(*r, "CPU, batches of 2");
}

TEST(RunReference, LayersSplitBetweenTestDeviceAndCpu) {
    RunConfig c       = cpu_config();
    c.devices         = {"TestDev0", "cpu"};
    c.layers_on       = {{"TestDev0", 3}};
    c.use_test_device = true;
    std::string error;
    auto        r = open_runner(c, &error);
    ASSERT_TRUE(r) << error;
    ASSERT_EQ(r->backends->size(), 2u);
    EXPECT_STREQ(r->backends->name(0), "TestDev0");
    EXPECT_EQ(r->model->layer_devices(), (std::vector<int>{0, 0, 0, 1, 1}));
    EXPECT_GT(r->model->weight_bytes(0), 0u);
    EXPECT_GT(r->session->kv_bytes(0), 0u);
    EXPECT_GT(r->session->kv_bytes(1), 0u);
    check_reference(*r, "TestDev0 + CPU");
    // Embedding on the CPU, three layers on the device, the rest on the CPU.
    EXPECT_GE(r->session->n_splits(), 3);
}

// --split-mode tensor over the two test devices (memory that is not host
// memory): every layer on both, attention heads and FFN rows split, the
// output projections' partial sums reduced; the reference's logits and
// greedy tokens, as on one device.
TEST(RunReference, TensorSplitOverTwoTestDevices) {
    RunConfig c          = cpu_config();
    c.devices            = {"TestDev0", "TestDev1"};
    c.use_test_device    = true;
    c.tensor_split       = true;
    c.session.flash_attn = true;
    std::string error;
    auto        r = open_runner(c, &error);
    ASSERT_TRUE(r) << error;
    ASSERT_EQ(r->backends->size(), 2u);
    EXPECT_EQ(r->backends->n_members(), 2u);
    EXPECT_STREQ(r->backends->name(0), "Meta(TestDev0,TestDev1)");
    EXPECT_EQ(r->model->layer_devices(), (std::vector<int>(5, 0)));
    check_reference(*r, "tensor split over TestDev0 and TestDev1");
}

TEST(RunReference, TensorSplitNeedsTwoDevices) {
    RunConfig c          = cpu_config();
    c.devices            = {"TestDev0"};
    c.use_test_device    = true;
    c.tensor_split       = true;
    c.session.flash_attn = true;
    std::string error;
    EXPECT_FALSE(open_runner(c, &error));
    EXPECT_NE(error.find("at least two devices"), std::string::npos) << error;
}

TEST(RunReference, AllLayersOnTestDevice) {
    RunConfig c       = cpu_config();
    c.devices         = {"testdev0"}; // names are case-insensitive; the CPU is added
    c.use_test_device = true;
    std::string error;
    auto        r = open_runner(c, &error);
    ASSERT_TRUE(r) << error;
    ASSERT_EQ(r->backends->size(), 2u);
    EXPECT_EQ(r->model->layer_devices(), (std::vector<int>(5, 0)));
    EXPECT_EQ(r->model->output_device(), 0);
    EXPECT_EQ(r->session->kv_bytes(1), 0u);
    check_reference(*r, "TestDev0");
}

// On the first Vulkan device, when the registry has one (CTest shows Mesa's
// lavapipe with GGML_VK_VISIBLE_DEVICES=0): every layer and its KV cache in
// the device's memory, which SET_ROWS writes there; then three layers there
// and the rest on the CPU.
bool has_vulkan() {
    return ggml_backend_dev_by_name("Vulkan0") != nullptr;
}

TEST(RunReference, AllLayersOnVulkan) {
    if (!has_vulkan()) {
        GTEST_SKIP() << "no Vulkan device";
    }
    RunConfig c = cpu_config();
    c.devices   = {"Vulkan0"};
    std::string error;
    auto        r = open_runner(c, &error);
    ASSERT_TRUE(r) << error;
    EXPECT_EQ(r->model->layer_devices(), (std::vector<int>(5, 0)));
    EXPECT_GT(r->session->kv_bytes(0), 0u);
    EXPECT_EQ(r->session->kv_bytes(1), 0u);
    check_reference(*r, "Vulkan0");
}

#ifdef LOOM_TEST_HAS_RPC
// --rpc: a server's device leads the default list, every layer runs there
// (the default placement shares layers among non-CPU devices) and the greedy
// tokens are the reference's; an unreachable server is an error.
TEST(RunReference, AllLayersOnARemoteDevice) {
    loom_rpc_server_params sp{};
    sp.endpoint              = "127.0.0.1:0";
    sp.token                 = "run-test-token";
    loom_rpc_server_t server = loom_rpc_server_start(&sp);
    ASSERT_NE(server, nullptr);
    loom_rpc_set_token("run-test-token");
    const std::string endpoint = "127.0.0.1:" + std::to_string(loom_rpc_server_port(server));
    {
        RunConfig c   = cpu_config();
        c.devices     = {}; // the default list: the remote device, then the CPU
        c.rpc_servers = {endpoint};
        std::string error;
        auto        r = open_runner(c, &error);
        ASSERT_TRUE(r) << error;
        ASSERT_GE(r->backends->size(), 2u); // and accelerators such as BLAS
        EXPECT_EQ(std::string(r->backends->name(0)).rfind("RPC[" + endpoint + "]", 0), 0u) << r->backends->name(0);
        EXPECT_EQ(r->model->layer_devices(), (std::vector<int>(5, 0)));
        check_reference(*r, r->backends->name(0));
    }
    {
        RunConfig c   = cpu_config();
        c.rpc_servers = {"127.0.0.1:1"};
        std::string error;
        loomtest::LogCapture log(true);
        EXPECT_FALSE(open_runner(c, &error));
        EXPECT_NE(error.find("127.0.0.1:1"), std::string::npos) << error;
    }
    loom_rpc_set_token(nullptr);
    loom_rpc_server_stop(server);
}
#endif

TEST(RunReference, LayersSplitBetweenVulkanAndCpuWithF16Cache) {
    if (!has_vulkan()) {
        GTEST_SKIP() << "no Vulkan device";
    }
    RunConfig c       = cpu_config();
    c.devices         = {"Vulkan0", "cpu"};
    c.layers_on       = {{"Vulkan0", 3}};
    c.session.type_k  = GGML_TYPE_F16;
    c.session.type_v  = GGML_TYPE_F16;
    std::string error;
    auto        r = open_runner(c, &error);
    ASSERT_TRUE(r) << error;
    EXPECT_EQ(r->model->layer_devices(), (std::vector<int>{0, 0, 0, 1, 1}));
    EXPECT_GT(r->session->kv_bytes(0), 0u);
    EXPECT_GT(r->session->kv_bytes(1), 0u);
    EXPECT_GE(r->session->n_splits(), 3);
    const RefPrompt &  ref    = reference().at(0);
    std::vector<float> logits = prompt_logits(*r, ref.prompt_ids);
    EXPECT_EQ(loom_run::Sampler::argmax(logits), ref.argmax);
    for (size_t i = 0; i < 16; ++i) {
        EXPECT_NEAR(logits[i], ref.first16[i], 2e-2) << i; // f16 rounding of K and V, as on the CPU
    }
}

// A cache type the device cannot write is a clear error, not an abort in
// the scheduler.
TEST(RunReference, CacheTypeTheDeviceCannotWriteIsAnError) {
    if (!has_vulkan()) {
        GTEST_SKIP() << "no Vulkan device";
    }
    RunConfig c      = cpu_config();
    c.devices        = {"Vulkan0"};
    c.session.type_k = GGML_TYPE_BF16;
    std::string error;
    EXPECT_FALSE(open_runner(c, &error));
    EXPECT_NE(error.find("device Vulkan0 cannot write a K cache of type bf16"), std::string::npos) << error;
}

TEST(RunReference, V1FileGivesIdenticalLogits) {
    if (::access(data_path("stories260k-f32-v1.gguf").c_str(), R_OK) != 0) {
        GTEST_SKIP() << "no stories260k-f32-v1.gguf in the test data";
    }
    std::string error;
    auto        v3 = open_runner(cpu_config(), &error);
    ASSERT_TRUE(v3) << error;
    RunConfig c = cpu_config();
    c.file      = "stories260k-f32-v1.gguf";
    auto v1     = open_runner(c, &error);
    ASSERT_TRUE(v1) << error;
    for (const RefPrompt & ref : reference()) {
        EXPECT_EQ(prompt_logits(*v1, ref.prompt_ids), prompt_logits(*v3, ref.prompt_ids)) << ref.prompt;
    }
}

TEST(RunReference, ReadWeightsGiveTheSameLogitsAsMappedOnes) {
    std::string error;
    auto        mapped = open_runner(cpu_config(), &error);
    ASSERT_TRUE(mapped) << error;
    RunConfig c = cpu_config();
    c.use_mmap  = false;
    auto read   = open_runner(c, &error);
    ASSERT_TRUE(read) << error;
    EXPECT_FALSE(read->model->mapped());
    const std::vector<int32_t> & ids = reference().at(0).prompt_ids;
    EXPECT_EQ(prompt_logits(*read, ids), prompt_logits(*mapped, ids));

    // The mapping's pages in memory, as the system counts them: after a
    // prompt every CPU weight was read, and no more than the file's size.
    size_t resident = 0, huge = 0;
    size_t read_resident = 0, read_huge = 0;
    EXPECT_FALSE(read->model->mapped_pages(&read_resident, &read_huge));
    ASSERT_TRUE(mapped->model->mapped());
    ASSERT_TRUE(mapped->model->mapped_pages(&resident, &huge));
    EXPECT_GT(resident, mapped->model->weight_bytes(0) / 2);
    EXPECT_LE(huge, resident);
    EXPECT_LE(resident, std::filesystem::file_size(data_path(cpu_config().file)) + 4096);
}

TEST(RunReference, F16CacheKeepsTheGreedyTokens) {
    RunConfig c      = cpu_config();
    c.session.type_k = GGML_TYPE_F16;
    c.session.type_v = GGML_TYPE_F16;
    std::string error;
    auto        r = open_runner(c, &error);
    ASSERT_TRUE(r) << error;
    const RefPrompt &  ref    = reference().at(0);
    std::vector<float> logits = prompt_logits(*r, ref.prompt_ids);
    EXPECT_EQ(loom_run::Sampler::argmax(logits), ref.argmax);
    for (size_t i = 0; i < 16; ++i) {
        EXPECT_NEAR(logits[i], ref.first16[i], 2e-2) << i; // f16 rounding of K and V
    }
}

// Without output.weight the embedding matrix is the output projection; on a
// device other than the CPU it is loaded there a second time.
TEST(RunReference, TiedOutputOnCpuAndTestDevice) {
    char dir[] = "/tmp/loom_test_run_XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    const std::string tied = std::string(dir) + "/tied.gguf";
    {
        ggml_context *   data = nullptr;
        gguf_init_params p{};
        p.no_alloc         = false;
        p.ctx              = &data;
        gguf_context * src = gguf_init_from_file(data_path("stories260k-f32.gguf").c_str(), p);
        ASSERT_NE(src, nullptr);
        gguf_context * dst = gguf_init_empty();
        gguf_set_kv(dst, src);
        for (int64_t i = 0; i < gguf_get_n_tensors(src); ++i) {
            if (std::strcmp(gguf_get_tensor_name(src, i), "output.weight") != 0) {
                gguf_add_tensor(dst, ggml_get_tensor(data, gguf_get_tensor_name(src, i)));
            }
        }
        ASSERT_TRUE(gguf_write_to_file(dst, tied.c_str(), false));
        gguf_free(dst);
        gguf_free(src);
        ggml_free(data);
    }
    RunConfig cpu = cpu_config();
    cpu.file      = tied; // data_path of an absolute path below
    RunConfig dev = cpu;
    dev.devices         = {"TestDev0", "cpu"};
    dev.use_test_device = true;
    std::string error;
    auto        a = open_runner(cpu, &error);
    ASSERT_TRUE(a) << error;
    auto b = open_runner(dev, &error);
    ASSERT_TRUE(b) << error;
    EXPECT_EQ(a->model->output(), a->model->tok_embd());
    EXPECT_NE(b->model->output(), b->model->tok_embd());
    EXPECT_EQ(b->model->output_device(), 0);
    // The device holds the layers and its copy of the 512 x 64 matrix.
    EXPECT_GT(b->model->weight_bytes(0), size_t(512 * 64 * 4));
    const std::vector<int32_t> & ids = reference().at(0).prompt_ids;
    const std::vector<float>     la  = prompt_logits(*a, ids);
    const std::vector<float>     lb  = prompt_logits(*b, ids);
    ASSERT_EQ(la.size(), lb.size());
    for (size_t i = 0; i < la.size(); ++i) {
        EXPECT_NEAR(la[i], lb[i], 1e-4 * std::max(1.0f, std::fabs(la[i]))) << i;
    }
    std::remove(tied.c_str());
    ::rmdir(dir);
}

// The context is full exactly at n_ctx; a failed eval leaves the cache as it was.
TEST(RunSession, RejectsOverflowAndBadTokens) {
    RunConfig c     = cpu_config();
    c.session.n_ctx = 8;
    std::string error;
    auto        r = open_runner(c, &error);
    ASSERT_TRUE(r) << error;
    std::vector<float> logits;
    const std::vector<int32_t> six = {1, 403, 407, 261, 378, 432};
    ASSERT_TRUE(r->session->eval(six, &logits, &error)) << error;
    EXPECT_FALSE(r->session->eval(six, &logits, &error));
    EXPECT_NE(error.find("full"), std::string::npos) << error;
    EXPECT_EQ(r->session->n_past(), 6u);
    const std::vector<int32_t> bad = {512};
    EXPECT_FALSE(r->session->eval(bad, &logits, &error));
    EXPECT_NE(error.find("vocabulary"), std::string::npos) << error;
    const std::vector<int32_t> negative = {-1};
    EXPECT_FALSE(r->session->eval(negative, &logits, &error));
    EXPECT_FALSE(r->session->eval({}, &logits, &error));
    const std::vector<int32_t> two = {383, 286};
    EXPECT_TRUE(r->session->eval(two, &logits, &error)) << error;
    EXPECT_EQ(r->session->n_past(), 8u);
}

TEST(RunSession, QuantizedVNeedsFlashAttention) {
    RunConfig c      = cpu_config();
    c.session.type_v = GGML_TYPE_Q8_0;
    std::string error;
    EXPECT_FALSE(open_runner(c, &error));
    EXPECT_NE(error.find("flash attention"), std::string::npos) << error;
    // With flash attention the head size (8) must still be whole blocks of 32.
    c.session.flash_attn = true;
    EXPECT_FALSE(open_runner(c, &error));
    EXPECT_NE(error.find("multiple of 32"), std::string::npos) << error;
}

// Files that are not usable models give an error, not a crash.
class RunBadFiles : public ::testing::Test {
  protected:
    void SetUp() override {
        char dir[] = "/tmp/loom_test_run_XXXXXX";
        ASSERT_NE(::mkdtemp(dir), nullptr);
        dir_ = dir;
    }
    void TearDown() override {
        for (const std::string & f : files_) std::remove(f.c_str());
        ::rmdir(dir_.c_str());
    }
    std::string path(const std::string & name) {
        files_.push_back(dir_ + "/" + name);
        return files_.back();
    }
    // The load error of a file.
    std::string load_error(const std::string & file) {
        loomtest::LogCapture quiet; // the GGUF reader logs why it refuses
        std::string          error;
        auto                 backends = loom_run::Backends::create({"cpu"}, {}, 1, &error);
        EXPECT_TRUE(backends) << error;
        auto model = loom_run::Model::load(file, *backends, loom_run::LoadOptions{}, &error);
        EXPECT_FALSE(model);
        EXPECT_FALSE(error.empty());
        return error;
    }
    // The model with some keys changed, tensors unchanged.
    std::string modified(const std::string & name, const std::function<void(gguf_context *)> & change) {
        ggml_context *   data = nullptr;
        gguf_init_params p{};
        p.no_alloc         = false;
        p.ctx              = &data;
        gguf_context * src = gguf_init_from_file(data_path("stories260k-f32.gguf").c_str(), p);
        EXPECT_NE(src, nullptr);
        gguf_context * dst = gguf_init_empty();
        gguf_set_kv(dst, src);
        change(dst);
        for (int64_t i = 0; i < gguf_get_n_tensors(src); ++i) {
            gguf_add_tensor(dst, ggml_get_tensor(data, gguf_get_tensor_name(src, i)));
        }
        const std::string out = path(name);
        EXPECT_TRUE(gguf_write_to_file(dst, out.c_str(), false));
        gguf_free(dst);
        gguf_free(src);
        ggml_free(data);
        return out;
    }

    std::string              dir_;
    std::vector<std::string> files_;
};

TEST_F(RunBadFiles, MissingFile) {
    EXPECT_NE(load_error(dir_ + "/nothing.gguf").find("nothing.gguf"), std::string::npos);
}

TEST_F(RunBadFiles, NotGguf) {
    EXPECT_NE(load_error(data_path("README.md")).find("GGUF"), std::string::npos);
}

TEST_F(RunBadFiles, VocabularyWithoutModel) {
    const std::string e = load_error(data_path("tokenizer/ggml-vocab-llama-spm.gguf"));
    EXPECT_TRUE(e.find("no key") != std::string::npos || e.find("no tensor") != std::string::npos) << e;
}

TEST_F(RunBadFiles, TruncatedFiles) {
    std::ifstream     in(data_path("stories260k-f32.gguf"), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GT(bytes.size(), 100000u);
    for (size_t keep : {size_t(0), size_t(3), size_t(24), size_t(4000), size_t(20000), bytes.size() / 2,
                        bytes.size() - 1}) {
        const std::string out = path("cut" + std::to_string(keep) + ".gguf");
        std::ofstream(out, std::ios::binary).write(bytes.data(), std::streamsize(keep));
        load_error(out);
    }
}

TEST_F(RunBadFiles, WrongArchitecture) {
    const std::string f =
        modified("arch.gguf", [](gguf_context * g) { gguf_set_val_str(g, "general.architecture", "gpt2"); });
    EXPECT_NE(load_error(f).find("gpt2"), std::string::npos);
}

TEST_F(RunBadFiles, HyperparametersThatDoNotMatchTheTensors) {
    const std::string f =
        modified("ff.gguf", [](gguf_context * g) { gguf_set_val_u32(g, "llama.feed_forward_length", 100); });
    const std::string e = load_error(f);
    EXPECT_NE(e.find("blk.0.ffn_gate.weight has shape [64, 172, 1, 1]"), std::string::npos) << e;
}

TEST_F(RunBadFiles, InconsistentHeads) {
    const std::string heads =
        modified("heads.gguf", [](gguf_context * g) { gguf_set_val_u32(g, "llama.attention.head_count_kv", 3); });
    EXPECT_NE(load_error(heads).find("head_count_kv"), std::string::npos);
    const std::string zero =
        modified("zero.gguf", [](gguf_context * g) { gguf_set_val_u32(g, "llama.attention.head_count", 0); });
    EXPECT_NE(load_error(zero).find("out of range"), std::string::npos);
    const std::string typed =
        modified("typed.gguf", [](gguf_context * g) { gguf_set_val_str(g, "llama.block_count", "five"); });
    EXPECT_NE(load_error(typed).find("not an integer"), std::string::npos);
    const std::string rope =
        modified("rope.gguf", [](gguf_context * g) { gguf_set_val_u32(g, "llama.rope.dimension_count", 7); });
    EXPECT_NE(load_error(rope).find("rope.dimension_count"), std::string::npos);
}

TEST_F(RunBadFiles, MissingEpsilon) {
    const std::string f = modified(
        "eps.gguf", [](gguf_context * g) { gguf_remove_key(g, "llama.attention.layer_norm_rms_epsilon"); });
    EXPECT_NE(load_error(f).find("layer_norm_rms_epsilon"), std::string::npos);
}

TEST(RunDevices, UnknownNamesAreErrors) {
    std::string error;
    EXPECT_FALSE(loom_run::Backends::create({"NoSuchDevice"}, {}, 1, &error));
    EXPECT_NE(error.find("NoSuchDevice"), std::string::npos);
    EXPECT_NE(error.find("CPU"), std::string::npos) << "the message lists the devices: " << error;

    EXPECT_FALSE(loom_run::Backends::create({"cpu", "CPU"}, {}, 1, &error));
    EXPECT_NE(error.find("twice"), std::string::npos);

    loomtest::LogCapture quiet;
    EXPECT_FALSE(loom_run::Backends::create({"cpu"}, {"/nonexistent/libloom-x.so"}, 1, &error));

    // --rpc-backend: a family that is not loaded, or one without
    // ggml_backend_rpc_add_server.
    std::vector<ggml_backend_dev_t> added;
    EXPECT_FALSE(loom_run::add_rpc_servers({"127.0.0.1:1"}, "ggml:RPC", &added, &error));
    EXPECT_NE(error.find("no backend named ggml:RPC"), std::string::npos) << error;
    EXPECT_FALSE(loom_run::add_rpc_servers({"127.0.0.1:1"}, "CPU", &added, &error));
    EXPECT_NE(error.find("does not offer ggml_backend_rpc_add_server"), std::string::npos) << error;
    EXPECT_TRUE(added.empty());

    auto backends = loom_run::Backends::create({"cpu"}, {}, 1, &error);
    ASSERT_TRUE(backends) << error;
    std::vector<int> dev;
    EXPECT_FALSE(loom_run::assign_layers(*backends, 4, {{"TestDev1", 2}}, &dev, &error));
    EXPECT_NE(error.find("TestDev1"), std::string::npos);
}

TEST(RunDevices, LayerAssignment) {
    std::string error;
    auto        b = loom_run::Backends::create({"TestDev0", "TestDev1"}, {LOOM_TESTDEV_PATH}, 1, &error);
    ASSERT_TRUE(b) << error;
    ASSERT_EQ(b->size(), 3u);
    std::vector<int> dev;
    ASSERT_TRUE(loom_run::assign_layers(*b, 5, {}, &dev, &error));
    EXPECT_EQ(dev, (std::vector<int>{0, 0, 0, 1, 1})); // evenly, the first device taking the odd one
    ASSERT_TRUE(loom_run::assign_layers(*b, 5, {{"testdev1", 1}, {"TestDev0", 2}}, &dev, &error));
    EXPECT_EQ(dev, (std::vector<int>{0, 0, 1, 2, 2})); // in device order; the rest on the CPU
    ASSERT_TRUE(loom_run::assign_layers(*b, 5, {{"TestDev0", 99}}, &dev, &error));
    EXPECT_EQ(dev, (std::vector<int>(5, 0)));
    ASSERT_TRUE(loom_run::assign_layers(*b, 5, {{"TestDev0", 0}}, &dev, &error));
    EXPECT_EQ(dev, (std::vector<int>(5, 2)));
}

TEST(RunSampler, GreedyAndLimits) {
    const std::vector<float> logits = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f};
    EXPECT_EQ(loom_run::Sampler::argmax(logits), 1); // the first of equal maxima

    loom_run::SamplerParams p;
    p.temp = 0.0f;
    EXPECT_EQ(loom_run::Sampler(p).sample(logits), 1);
    p.temp  = 1.0f;
    p.top_k = 1;
    EXPECT_EQ(loom_run::Sampler(p).sample(logits), 1);
    p.top_k = 0;
    p.top_p = 0.0f; // the most likely token alone reaches any p
    loom_run::Sampler tiny_p(p);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(tiny_p.sample(logits), 1);

    // top-k 3 leaves ids 1, 3, 4.
    p.top_k = 3;
    p.top_p = 1.0f;
    loom_run::Sampler k3(p);
    for (int i = 0; i < 200; ++i) {
        const int32_t id = k3.sample(logits);
        EXPECT_TRUE(id == 1 || id == 3 || id == 4) << id;
    }
}

TEST(RunSampler, SeedAndDistribution) {
    loom_run::SamplerParams p;
    p.temp  = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.seed  = 1234;
    const std::vector<float> logits = {0.0f, std::log(3.0f)}; // probabilities 1/4, 3/4
    loom_run::Sampler        a(p), b(p);
    int                      ones = 0;
    const int                n    = 8000;
    for (int i = 0; i < n; ++i) {
        const int32_t x = a.sample(logits);
        EXPECT_EQ(x, b.sample(logits));
        ones += x;
    }
    EXPECT_NEAR(double(ones) / n, 0.75, 0.03);

    // A low temperature sharpens: 1/4 vs 3/4 becomes about 1/82 vs 81/82.
    p.temp = 0.25f;
    loom_run::Sampler cold(p);
    ones = 0;
    for (int i = 0; i < n; ++i) ones += cold.sample(logits);
    EXPECT_GT(double(ones) / n, 0.97);
}

TEST(RunArgs, Flags) {
    const char *      argv[] = {"loom-run", "-m",       "x.gguf",    "-p",      "hi",         "-n",
                                "12",       "--temp",   "0",         "--top-k", "5",          "--top-p",
                                "0.5",      "-s",       "42",        "-t",      "3",          "--device",
                                "TestDev0,cpu", "--layers-on", "TestDev0=2", "--trace", "t.json", "-fa",
                                "-ctk",     "f16",      "--no-mmap", "-c",      "256",        "--rpc",
                                "10.0.0.1:50052,host:7", "-sm", "tensor", "-ot", "exps=CPU,attn_(q|k)=TestDev0",
                                "--override-tensor", "output=TestDev1", "--rpc-backend", "ggml:RPC"};
    loom_run::Options o;
    std::string       error;
    ASSERT_TRUE(loom_run::parse_args(int(std::size(argv)), argv, &o, &error)) << error;
    EXPECT_EQ(o.model, "x.gguf");
    EXPECT_EQ(o.prompt, "hi");
    EXPECT_EQ(o.n_predict, 12);
    EXPECT_EQ(o.temp, 0.0f);
    EXPECT_EQ(o.top_k, 5);
    EXPECT_FLOAT_EQ(o.top_p, 0.5f);
    EXPECT_EQ(o.seed, 42);
    EXPECT_EQ(o.n_threads, 3);
    EXPECT_EQ(o.devices, (std::vector<std::string>{"TestDev0", "cpu"}));
    ASSERT_EQ(o.layers_on.size(), 1u);
    EXPECT_EQ(o.layers_on[0], (std::pair<std::string, int>{"TestDev0", 2}));
    EXPECT_EQ(o.trace_path, "t.json");
    EXPECT_TRUE(o.flash_attn);
    EXPECT_EQ(o.type_k, GGML_TYPE_F16);
    EXPECT_FALSE(o.use_mmap);
    EXPECT_EQ(o.n_ctx, 256);
    EXPECT_EQ(o.rpc_servers, (std::vector<std::string>{"10.0.0.1:50052", "host:7"}));
    EXPECT_EQ(o.rpc_backend, "ggml:RPC");
    EXPECT_EQ(loom_run::Options().rpc_backend, "RPC");
    EXPECT_EQ(o.split_mode, loom_run::Options::SplitMode::tensor);
    EXPECT_EQ(o.tensor_overrides, (std::vector<std::pair<std::string, std::string>>{
                                      {"exps", "CPU"}, {"attn_(q|k)", "TestDev0"}, {"output", "TestDev1"}}));

    for (std::vector<const char *> bad : {std::vector<const char *>{"loom-run", "--bogus"},
                                          {"loom-run", "-n"},
                                          {"loom-run", "-n", "12x"},
                                          {"loom-run", "-t", "0"},
                                          {"loom-run", "--temp", "warm"},
                                          {"loom-run", "--layers-on", "TestDev0"},
                                          {"loom-run", "--layers-on", "=3"},
                                          {"loom-run", "-ctk", "q5_1"},
                                          {"loom-run", "-s", "99999999999"},
                                          {"loom-run", "--rpc", "nohost"},
                                          {"loom-run", "--rpc", "host:"},
                                          {"loom-run", "--rpc-backend"},
                                          {"loom-run", "--split-mode", "rows"},
                                          {"loom-run", "-ot", "exps"},
                                          {"loom-run", "-ot", "=CPU"},
                                          {"loom-run", "-ot", "exps="}}) {
        loom_run::Options o2;
        EXPECT_FALSE(loom_run::parse_args(int(bad.size()), bad.data(), &o2, &error)) << bad.back();
        EXPECT_FALSE(error.empty());
    }
}

// The executable: its output, its exit status.
struct Cli {
    int         status = -1;
    std::string out;
};

Cli run_cli(const std::string & args, bool with_stderr = false) {
    Cli               r;
    const std::string cmd  = std::string(LOOM_RUN_PATH) + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
    FILE *            pipe = ::popen(cmd.c_str(), "r");
    if (pipe == nullptr) return r;
    char   buf[4096];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
    const int st = ::pclose(pipe);
    r.status     = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    return r;
}

TEST(RunCli, GreedyTextAndExitStatus) {
    // With no model named, the bundled one; the prompt, then llama.cpp's text.
    const RefPrompt & ref  = reference().at(0);
    const Cli         full = run_cli("--temp 0 -n 64 --device cpu -t 1");
    EXPECT_EQ(full.status, 0);
    EXPECT_EQ(full.out, ref.prompt + ref.generated_text + "\n");

    const Cli ok = run_cli("--temp 0 -n 20 --device cpu -t 1");
    EXPECT_EQ(ok.status, 0);
    EXPECT_EQ(ok.out.rfind("Once upon a time, there was a little girl named Lily.", 0), 0u) << ok.out;
    const Cli none = run_cli("--temp 0 -n 0 --device cpu -t 1");
    EXPECT_EQ(none.status, 0);
    EXPECT_EQ(none.out, "Once upon a time\n");

    // Layers split with a plugin loaded by path; the scheduler's trace.
    const std::string trace = "/tmp/loom_test_run_trace_" + std::to_string(::getpid()) + ".json";
    const Cli split = run_cli(std::string("--temp 0 -n 20 -t 1 --load-backend ") + LOOM_TESTDEV_PATH +
                              " --device TestDev0,cpu --layers-on TestDev0=2 --trace " + trace);
    EXPECT_EQ(split.status, 0);
    EXPECT_EQ(split.out, ok.out);
    std::ifstream     tf(trace);
    const std::string trace_text((std::istreambuf_iterator<char>(tf)), std::istreambuf_iterator<char>());
    EXPECT_NE(trace_text.find("TestDev0"), std::string::npos);
    std::remove(trace.c_str());

    // Weights that --override-tensor names leave their layer's device: the
    // feed-forward matrices of the five layers on TestDev0 go to the CPU
    // (ten weights), the text stays. A device not in use or an expression
    // that does not parse is an error.
    const std::string on_testdev =
        std::string("--temp 0 -n 20 -t 1 --load-backend ") + LOOM_TESTDEV_PATH + " --device TestDev0,cpu --layers-on TestDev0=5";
    const Cli moved = run_cli(on_testdev + " -ot 'ffn_(up|down)=CPU'");
    EXPECT_EQ(moved.status, 0);
    EXPECT_EQ(moved.out, ok.out);
    EXPECT_NE(run_cli(on_testdev + " -ot 'ffn_(up|down)=CPU' --no-display-prompt", true)
                  .out.find("10 weights placed by --override-tensor"),
              std::string::npos);
    EXPECT_NE(run_cli(on_testdev + " -ot 'blk\\.0\\.=TestDev0'", true).out.find("0 weights placed"), std::string::npos);
    EXPECT_EQ(run_cli(on_testdev + " -ot ffn=TestDev9").status, 1);
    EXPECT_EQ(run_cli(on_testdev + " -ot 'ffn(=CPU'").status, 1);

    // Every layer split over both test devices by heads and rows: the same
    // greedy tokens as one device, with flash attention, which it needs.
    const Cli one_fa = run_cli("--temp 0 -n 20 -t 1 -fa --device cpu");
    EXPECT_EQ(one_fa.status, 0);
    const Cli tensor = run_cli(std::string("--temp 0 -n 20 -t 1 -fa --load-backend ") + LOOM_TESTDEV_PATH +
                               " --device TestDev0,TestDev1 --split-mode tensor");
    EXPECT_EQ(tensor.status, 0);
    EXPECT_EQ(tensor.out, one_fa.out);
    EXPECT_EQ(run_cli(std::string("--temp 0 -n 4 --load-backend ") + LOOM_TESTDEV_PATH +
                      " --device TestDev0,TestDev1 -sm tensor")
                  .status,
              1);

    EXPECT_EQ(run_cli("-m " + data_path("README.md")).status, 1);
    EXPECT_EQ(run_cli("-m /nonexistent.gguf").status, 1);
    EXPECT_EQ(run_cli("--device NoSuchDevice").status, 1);
    EXPECT_EQ(run_cli("--bogus").status, 2);
    EXPECT_EQ(run_cli("--help").status, 0);
}

} // namespace
