// loom-synth's llama.cpp file-type recipes: the type of every matrix
// against lists written out here from the rules of llama.cpp's quantizer
// (src/llama-quant.cpp, llama_tensor_get_type, read for a dense llama model
// without an importance matrix), the files loom-synth writes for each, and
// loom-run's model code running every recipe on the CPU and the Q4_K_M one
// on the Vulkan device.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <ostream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "devices.h"
#include "ggml-backend.h"
#include "gguf.h"
#include "model.h"
#include "sampler.h"
#include "session.h"
#include "synth_recipes.h"
#include "tokenizer.h"

namespace {

using loom_synth::ModelShape;
using loom_synth::Role;

const char * tn(ggml_type t) {
    return ggml_type_name(t);
}

// ---- the recipes as data -------------------------------------------------

// Q4_K_M on TinyLlama 1.1B's shape (22 layers, embd 2048, ff 5632, 32/4
// heads). use_more_bits picks the layers below 22 / 8 = 2, from 7 * 22 / 8 =
// 19 on, and those with (layer - 2) % 3 == 2 between: 0, 1, 4, 7, 10, 13,
// 16, 19, 20, 21. There attn_v and ffn_down are Q6_K; every other matrix of
// a layer and the embeddings are Q4_K, the output matrix Q6_K. (Derived by
// following llama_tensor_get_type for this shape by hand: the tensors are
// visited in layer order, so its attn_v counter is the layer index.)
TEST(SynthRecipes, Q4KMOnTheTinyLlamaShape) {
    const loom_synth::Recipe * r = loom_synth::find_recipe("Q4_K_M");
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(loom_synth::recipe_file_type(*r), 15u);
    const ModelShape shape{2048, 5632, 22, 32, 4};
    const bool       six[22] = {1, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 1, 1};
    EXPECT_STREQ(tn(recipe_tensor_type(*r, shape, Role::token_embd, -1, 2048)), "q4_K");
    EXPECT_STREQ(tn(recipe_tensor_type(*r, shape, Role::output, -1, 2048)), "q6_K");
    for (int l = 0; l < 22; ++l) {
        SCOPED_TRACE("layer " + std::to_string(l));
        const char * more = six[l] ? "q6_K" : "q4_K";
        EXPECT_STREQ(tn(recipe_tensor_type(*r, shape, Role::attn_v, l, 2048)), more);
        EXPECT_STREQ(tn(recipe_tensor_type(*r, shape, Role::ffn_down, l, 5632)), more);
        for (Role role : {Role::attn_q, Role::attn_k, Role::attn_output, Role::ffn_gate, Role::ffn_up}) {
            EXPECT_STREQ(tn(recipe_tensor_type(*r, shape, role, l, 2048)), "q4_K");
        }
    }
    // Two layers: 2 / 8 = 0 and 7 * 2 / 8 = 1, so only layer 1 gets more bits.
    const ModelShape two{2048, 5632, 2, 32, 4};
    EXPECT_STREQ(tn(recipe_tensor_type(*r, two, Role::attn_v, 0, 2048)), "q4_K");
    EXPECT_STREQ(tn(recipe_tensor_type(*r, two, Role::ffn_down, 0, 5632)), "q4_K");
    EXPECT_STREQ(tn(recipe_tensor_type(*r, two, Role::attn_v, 1, 2048)), "q6_K");
    EXPECT_STREQ(tn(recipe_tensor_type(*r, two, Role::ffn_down, 1, 5632)), "q6_K");
}

TEST(SynthRecipes, FallbacksForRowsThatAreNotWholeBlocks) {
    const ModelShape shape{96, 160, 2, 4, 2};
    auto             type = [&](const char * recipe, Role role, int64_t row) {
        return tn(recipe_tensor_type(*loom_synth::find_recipe(recipe), shape, role, 1, row));
    };
    EXPECT_STREQ(type("Q4_K_M", Role::attn_q, 96), "q5_0");   // Q4_K -> Q5_0
    EXPECT_STREQ(type("Q4_K_M", Role::attn_v, 96), "q8_0");   // Q6_K -> Q8_0
    EXPECT_STREQ(type("Q5_K_S", Role::ffn_up, 96), "q5_1");   // Q5_K -> Q5_1
    EXPECT_STREQ(type("Q2_K", Role::ffn_gate, 96), "q4_0");   // Q2_K -> Q4_0
    EXPECT_STREQ(type("Q2_K", Role::ffn_down, 160), "q4_0");  // Q3_K -> Q4_0
    EXPECT_STREQ(type("IQ4_XS", Role::attn_k, 96), "iq4_nl"); // IQ4_XS -> IQ4_NL
    // The output matrix: Q8_0 when its rows are not whole base blocks.
    EXPECT_STREQ(type("Q4_K_M", Role::output, 96), "q8_0");
    EXPECT_STREQ(type("Q4_0", Role::output, 96), "q8_0");
    // Rows that are not whole blocks of 32 either: F16.
    EXPECT_STREQ(type("Q4_K_M", Role::attn_q, 40), "f16");
    EXPECT_STREQ(type("Q8_0", Role::attn_q, 40), "f16");
    EXPECT_STREQ(type("IQ4_NL", Role::ffn_up, 40), "f16");
    // The 70B shape's V matrices.
    const ModelShape b70{8192, 28672, 80, 64, 8};
    EXPECT_STREQ(tn(recipe_tensor_type(*loom_synth::find_recipe("Q4_K_S"), b70, Role::attn_v, 10, 8192)), "q5_K");
    EXPECT_STREQ(tn(recipe_tensor_type(*loom_synth::find_recipe("Q4_K_M"), b70, Role::attn_v, 11, 8192)), "q5_K");
    EXPECT_EQ(loom_synth::find_recipe("q4_k_m"), nullptr);
    EXPECT_EQ(loom_synth::find_recipe("Q4_K"), nullptr);
}

// ---- files written by loom-synth -----------------------------------------

// The shape of the files below: 8 layers, embd 256, ff 640 (not a whole
// number of 256-value blocks: ffn_down takes the fallbacks), 4 heads sharing
// one K/V head (n_gqa 4). use_more_bits(layer, 8): layers 0, 3, 6, 7.
struct Expected {
    const char * recipe;
    uint32_t     file_type;
    const char * token_embd, *output, *plain, *attn_output;
    const char * attn_v[8];
    const char * ffn_down[8];
};

void PrintTo(const Expected & e, std::ostream * os) {
    *os << e.recipe;
}

#define ALL8(t) {t, t, t, t, t, t, t, t}
#define MORE8(a, b) {a, b, b, a, b, b, a, a}

const Expected kExpected[] = {
    {"F32", 0, "f32", "f32", "f32", "f32", ALL8("f32"), ALL8("f32")},
    {"F16", 1, "f16", "f16", "f16", "f16", ALL8("f16"), ALL8("f16")},
    {"BF16", 32, "bf16", "bf16", "bf16", "bf16", ALL8("bf16"), ALL8("bf16")},
    {"Q4_0", 2, "q4_0", "q6_K", "q4_0", "q4_0", ALL8("q4_0"), ALL8("q4_0")},
    {"Q4_1", 3, "q4_1", "q6_K", "q4_1", "q4_1", ALL8("q4_1"), ALL8("q4_1")},
    {"Q5_0", 8, "q5_0", "q6_K", "q5_0", "q5_0", ALL8("q5_0"), ALL8("q5_0")},
    {"Q5_1", 9, "q5_1", "q6_K", "q5_1", "q5_1", ALL8("q5_1"), ALL8("q5_1")},
    {"Q8_0", 7, "q8_0", "q8_0", "q8_0", "q8_0", ALL8("q8_0"), ALL8("q8_0")},
    // attn_v Q4_K (n_gqa >= 4), ffn_down Q3_K -> Q4_0, attn_output Q3_K.
    {"Q2_K", 10, "q2_K", "q6_K", "q2_K", "q3_K", ALL8("q4_K"), ALL8("q4_0")},
    // attn_v Q5_K in the first two layers; ffn_down Q4_K -> Q5_0 (8 / 16 = 0
    // layers of Q5_K); attn_output Q4_K.
    {"Q3_K_M", 12, "q3_K", "q6_K", "q3_K", "q4_K",
     {"q5_K", "q5_K", "q4_K", "q4_K", "q4_K", "q4_K", "q4_K", "q4_K"}, ALL8("q5_0")},
    // attn_v Q5_K in the first four layers; ffn_down Q5_K -> Q5_1 in the
    // first eighth, Q4_K -> Q5_0 after.
    {"Q4_K_S", 14, "q4_K", "q6_K", "q4_K", "q4_K",
     {"q5_K", "q5_K", "q5_K", "q5_K", "q4_K", "q4_K", "q4_K", "q4_K"},
     {"q5_1", "q5_0", "q5_0", "q5_0", "q5_0", "q5_0", "q5_0", "q5_0"}},
    {"Q4_K_M", 15, "q4_K", "q6_K", "q4_K", "q4_K", MORE8("q6_K", "q4_K"), MORE8("q8_0", "q5_0")},
    {"Q5_K_S", 16, "q5_K", "q6_K", "q5_K", "q5_K", ALL8("q5_K"), ALL8("q5_1")},
    {"Q5_K_M", 17, "q5_K", "q6_K", "q5_K", "q5_K", MORE8("q6_K", "q5_K"), MORE8("q8_0", "q5_1")},
    {"Q6_K", 18, "q6_K", "q6_K", "q6_K", "q6_K", ALL8("q6_K"), ALL8("q8_0")},
    // attn_v Q5_K (n_gqa >= 4); ffn_down Q5_K -> Q5_1 in the first eighth.
    {"IQ4_NL", 25, "iq4_nl", "q6_K", "iq4_nl", "iq4_nl", ALL8("q5_K"),
     {"q5_1", "iq4_nl", "iq4_nl", "iq4_nl", "iq4_nl", "iq4_nl", "iq4_nl", "iq4_nl"}},
    {"IQ4_XS", 30, "iq4_xs", "q6_K", "iq4_xs", "iq4_xs", ALL8("q5_K"),
     {"q5_1", "iq4_nl", "iq4_nl", "iq4_nl", "iq4_nl", "iq4_nl", "iq4_nl", "iq4_nl"}},
    // A dense model has no expert tensors to be MXFP4.
    {"MXFP4_MOE", 38, "q8_0", "q8_0", "q8_0", "q8_0", ALL8("q8_0"), ALL8("q8_0")},
};

#undef ALL8
#undef MORE8

std::string out_dir() {
    return LOOM_TEST_OUT_DIR;
}

// Runs loom-synth; the path of the file it wrote.
std::string synth(const std::string & type, const std::string & shape_args, const std::string & tag) {
    const std::string path = out_dir() + "/synth-recipe-" + tag + "-" + type + ".gguf";
    const std::string cmd  = std::string("\"") + LOOM_SYNTH_PATH + "\" -o \"" + path + "\" --vocab-from \"" +
                            LOOM_TEST_DATA + "/stories260k-f32.gguf\" --type " + type + " " + shape_args + " >/dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return path;
}

class SynthFile : public testing::TestWithParam<Expected> {};

TEST_P(SynthFile, TensorTypesAreTheRecipes) {
    const Expected &  e    = GetParam();
    const std::string path = synth(e.recipe, "--embd 256 --ff 640 --layers 8 --heads 4 --heads-kv 1", "types");
    gguf_init_params  gp   = {true, nullptr};
    gguf_context *    g    = gguf_init_from_file(path.c_str(), gp);
    ASSERT_NE(g, nullptr);
    const int64_t ft = gguf_find_key(g, "general.file_type");
    ASSERT_GE(ft, 0);
    EXPECT_EQ(gguf_get_val_u32(g, ft), e.file_type);

    std::map<std::string, std::string> want;
    want["token_embd.weight"]  = e.token_embd;
    want["output.weight"]      = e.output;
    want["output_norm.weight"] = "f32";
    for (int l = 0; l < 8; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        for (const char * role : {"attn_q", "attn_k", "ffn_gate", "ffn_up"}) want[p + role + ".weight"] = e.plain;
        want[p + "attn_output.weight"] = e.attn_output;
        want[p + "attn_v.weight"]      = e.attn_v[l];
        want[p + "ffn_down.weight"]    = e.ffn_down[l];
        want[p + "attn_norm.weight"]   = "f32";
        want[p + "ffn_norm.weight"]    = "f32";
    }
    ASSERT_EQ(gguf_get_n_tensors(g), int64_t(want.size()));
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
        const std::string name = gguf_get_tensor_name(g, i);
        ASSERT_TRUE(want.count(name)) << name;
        EXPECT_EQ(tn(gguf_get_tensor_type(g, i)), want[name]) << name;
    }
    gguf_free(g);
    std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Recipes, SynthFile, testing::ValuesIn(kExpected),
                         [](const testing::TestParamInfo<Expected> & p) { return std::string(p.param.recipe); });

TEST(SynthRecipes, EveryRecipeIsListed) {
    const std::vector<std::string> names = loom_synth::recipe_names();
    ASSERT_EQ(names.size(), std::size(kExpected));
    for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(names[i], kExpected[i].recipe);
}

// ---- running them --------------------------------------------------------

struct Loaded {
    std::unique_ptr<loom_run::Backends> backends;
    std::unique_ptr<loom_run::Model>    model;
    loom_run::Tokenizer                 tokenizer;
    std::unique_ptr<loom_run::Session>  session;
};

std::unique_ptr<Loaded> load(const std::string & path, const std::string & device, int n_threads = 1) {
    auto        r = std::make_unique<Loaded>();
    std::string error;
    r->backends = loom_run::Backends::create({device}, {}, n_threads, &error);
    EXPECT_TRUE(r->backends) << error;
    if (!r->backends) return nullptr;
    loom_run::LoadOptions lo;
    lo.place_layers = [&](uint32_t n_layer, std::vector<int> * dev, std::string * err) {
        return loom_run::assign_layers(*r->backends, int(n_layer), {}, dev, err);
    };
    r->model = loom_run::Model::load(path, *r->backends, lo, &error);
    EXPECT_TRUE(r->model) << error;
    if (!r->model) return nullptr;
    EXPECT_TRUE(r->tokenizer.load(r->model->gguf(), &error)) << error;
    loom_run::SessionOptions so;
    so.n_ctx   = 64;
    r->session = loom_run::Session::create(*r->model, *r->backends, so, &error);
    EXPECT_TRUE(r->session) << error;
    if (!r->session) return nullptr;
    return r;
}

// The logits of the prompt's last position and of n greedy tokens after it.
struct Generated {
    std::vector<std::vector<float>> logits;
    std::vector<int32_t>            tokens;
};

Generated greedy(Loaded & r, int n) {
    Generated         out;
    std::string       error;
    std::vector<float> logits;
    const std::vector<int32_t> ids = r.tokenizer.tokenize("Once upon a time there was", true);
    EXPECT_TRUE(r.session->eval(ids, &logits, &error)) << error;
    for (int t = 0; t < n; ++t) {
        out.logits.push_back(logits);
        const int32_t id = loom_run::Sampler::argmax(logits);
        out.tokens.push_back(id);
        EXPECT_TRUE(r.session->eval(std::span<const int32_t>(&id, 1), &logits, &error)) << error;
    }
    return out;
}

const char * kRunShape = "--embd 256 --ff 512 --layers 2 --heads 4 --heads-kv 2";

class SynthRun : public testing::TestWithParam<Expected> {};

// Each recipe loads and generates with finite logits on the CPU.
TEST_P(SynthRun, GeneratesOnTheCpu) {
    const std::string path = synth(GetParam().recipe, kRunShape, "run");
    auto              r    = load(path, "cpu");
    ASSERT_TRUE(r);
    const Generated run = greedy(*r, 4);
    ASSERT_EQ(run.logits.size(), 4u);
    for (const std::vector<float> & l : run.logits) {
        ASSERT_EQ(l.size(), 512u);
        for (float v : l) ASSERT_TRUE(std::isfinite(v));
    }
    std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Recipes, SynthRun, testing::ValuesIn(kExpected),
                         [](const testing::TestParamInfo<Expected> & p) { return std::string(p.param.recipe); });

// The largest difference between two logit vectors, relative to the largest
// magnitude of the first.
double relative_gap(const std::vector<float> & a, const std::vector<float> & b) {
    double gap = 0, scale = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        gap   = std::max(gap, std::fabs(double(a[i]) - double(b[i])));
        scale = std::max(scale, std::fabs(double(a[i])));
    }
    return gap / scale;
}

// The root mean square of the difference relative to that of the first.
double relative_rms(const std::vector<float> & a, const std::vector<float> & b) {
    double d2 = 0, a2 = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        d2 += (double(a[i]) - double(b[i])) * (double(a[i]) - double(b[i]));
        a2 += double(a[i]) * double(a[i]);
    }
    return std::sqrt(d2 / a2);
}

// Q8_0 beside F16 (the same random values, seed for seed): the logits of
// the prompt, fed the same tokens, stay close.
TEST(SynthRecipes, Q80LogitsCloseToF16) {
    const std::string f16 = synth("F16", kRunShape, "cmp");
    const std::string q8  = synth("Q8_0", kRunShape, "cmp");
    auto              a   = load(f16, "cpu");
    auto              b   = load(q8, "cpu");
    ASSERT_TRUE(a && b);
    const Generated ra = greedy(*a, 1), rb = greedy(*b, 1);
    const double gap = relative_gap(ra.logits[0], rb.logits[0]);
    const double rms = relative_rms(ra.logits[0], rb.logits[0]);
    std::printf("Q8_0 against F16: largest logit difference %.3g of the largest logit, rms %.3g of the logits' rms\n",
                gap, rms);
    EXPECT_LT(gap, 0.05);
    EXPECT_LT(rms, 0.05);
    std::remove(f16.c_str());
    std::remove(q8.c_str());
}

// Q4_K_M on the Vulkan device (Q4_K, Q6_K and the fallbacks' Q5_0/Q8_0 in
// its matrix products) against the CPU: the same greedy tokens, logits
// close. The CPU's products round the activations to Q8_K/Q8_0 blocks, the
// device's take them as F32: the bounds are about twice the differences
// measured (3.3% of the largest logit at most, 2.4% in rms). CTest runs it
// with GGML_VK_VISIBLE_DEVICES=0 (Mesa's lavapipe); without a Vulkan device
// it skips.
TEST(SynthVulkan, Q4KMGivesTheCpusGreedyTokens) {
    if (ggml_backend_dev_by_name("Vulkan0") == nullptr) {
        GTEST_SKIP() << "no Vulkan device";
    }
    const std::string path = synth("Q4_K_M", "--embd 256 --ff 640 --layers 3 --heads 4 --heads-kv 1", "vk");
    auto              cpu  = load(path, "cpu");
    auto              vk   = load(path, "Vulkan0");
    ASSERT_TRUE(cpu && vk);
    EXPECT_EQ(vk->model->layer_devices(), (std::vector<int>(3, 0)));
    const Generated a = greedy(*cpu, 6), b = greedy(*vk, 6);
    EXPECT_EQ(a.tokens, b.tokens);
    double gap = 0, rms = 0;
    for (size_t t = 0; t < a.logits.size(); ++t) {
        gap = std::max(gap, relative_gap(a.logits[t], b.logits[t]));
        rms = std::max(rms, relative_rms(a.logits[t], b.logits[t]));
    }
    std::printf("Q4_K_M on Vulkan0 against the CPU: largest logit difference %.3g of the largest logit, rms %.3g\n",
                gap, rms);
    EXPECT_LT(gap, 0.07);
    EXPECT_LT(rms, 0.05);
    std::remove(path.c_str());
}

// ---- mixtures of experts against llama.cpp -------------------------------

// Models with experts (loom-synth --experts) against llama.cpp on ggml
// 0.25.1 (tests/data/moe-reference.json): for each expert type and prompt,
// the prompt's token ids, the logits of its last position within 1e-4 of
// the largest, and 16 greedy tokens, with 1 and 2 threads. The router's
// softmax, the top-k choice, the renormalised weights and the experts'
// products (mul_mat_id) all feed the logits.
TEST(SynthExperts, GreedyTokensAndLogitsOfLlamaCpp) {
    std::ifstream  in(std::string(LOOM_TEST_DATA) + "/moe-reference.json");
    nlohmann::json ref = nlohmann::json::parse(in, nullptr, false);
    ASSERT_FALSE(ref.is_discarded()) << "cannot parse moe-reference.json";
    std::string args;
    for (const auto & a : ref.at("synth_args")) args += a.get<std::string>() + " ";
    for (const auto & m : ref.at("models")) {
        const std::string type = m.at("type").get<std::string>();
        const std::string path = synth(type, args, "experts");
        for (int threads : {1, 2}) {
            SCOPED_TRACE(type + " experts, " + std::to_string(threads) + " thread(s)");
            auto r = load(path, "cpu", threads);
            ASSERT_TRUE(r);
            ASSERT_EQ(r->model->hparams().n_expert, 8u);
            for (const auto & p : m.at("prompts")) {
                const std::string prompt = p.at("prompt").get<std::string>();
                SCOPED_TRACE("prompt \"" + prompt + "\"");
                const std::vector<int32_t> ids = r->tokenizer.tokenize(prompt, true);
                ASSERT_EQ(ids, p.at("prompt_token_ids").get<std::vector<int32_t>>());
                const auto         want = p.at("last_prompt_position_logits").get<std::vector<float>>();
                std::vector<float> logits;
                std::string        error;
                r->session->clear();
                ASSERT_TRUE(r->session->eval(ids, &logits, &error)) << error;
                ASSERT_EQ(logits.size(), want.size());
                float scale = 0;
                for (float v : want) scale = std::max(scale, std::fabs(v));
                for (size_t i = 0; i < want.size(); ++i) {
                    ASSERT_NEAR(logits[i], want[i], 1e-4 * scale) << "logit " << i;
                }
                std::vector<int32_t> generated;
                const auto           want_ids = p.at("generated_token_ids").get<std::vector<int32_t>>();
                for (size_t t = 0; t < want_ids.size(); ++t) {
                    const int32_t id = loom_run::Sampler::argmax(logits);
                    generated.push_back(id);
                    ASSERT_TRUE(r->session->eval(std::span<const int32_t>(&id, 1), &logits, &error)) << error;
                }
                EXPECT_EQ(generated, want_ids);
            }
        }
        std::remove(path.c_str());
    }
}

// A file whose expert counts disagree is refused with the reason.
TEST(SynthExperts, BadExpertCountsAreRefused) {
    const std::string path = synth("f32", "--embd 64 --ff 128 --layers 1 --heads 4 --heads-kv 2 --experts 4 --experts-used 2",
                                   "experts-bad");
    ggml_context *   data = nullptr;
    gguf_init_params gp   = {false, &data};
    gguf_context *   g    = gguf_init_from_file(path.c_str(), gp);
    ASSERT_NE(g, nullptr);
    for (ggml_tensor * t = ggml_get_first_tensor(data); t != nullptr; t = ggml_get_next_tensor(data, t)) {
        if (gguf_find_tensor(g, ggml_get_name(t)) >= 0) gguf_set_tensor_data(g, ggml_get_name(t), t->data);
    }
    gguf_set_val_u32(g, "llama.expert_used_count", 5); // more than the 4 experts
    const std::string bad = path + ".bad.gguf";
    ASSERT_TRUE(gguf_write_to_file(g, bad.c_str(), false));
    gguf_free(g);
    ggml_free(data);
    std::string error;
    auto        backends = loom_run::Backends::create({"cpu"}, {}, 1, &error);
    ASSERT_TRUE(backends) << error;
    loom_run::LoadOptions lo;
    EXPECT_EQ(loom_run::Model::load(bad, *backends, lo, &error), nullptr);
    EXPECT_NE(error.find("expert_used_count 5"), std::string::npos) << error;
    std::remove(path.c_str());
    std::remove(bad.c_str());
}

} // namespace
