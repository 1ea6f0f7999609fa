// The SentencePiece tokenizer of loom-run against llama.cpp's test vectors
// for the 32k LLaMA vocabulary, the stories260K reference prompts, and small
// vocabularies built here for the rules the vectors do not reach.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "gguf.h"
#include "tokenizer.h"

namespace {

using loom_run::Tokenizer;

struct GgufDeleter {
    void operator()(gguf_context * ctx) const { gguf_free(ctx); }
};
using GgufPtr = std::unique_ptr<gguf_context, GgufDeleter>;

std::string data_path(const std::string & name) {
    return std::string(LOOM_TEST_DATA) + "/" + name;
}

std::string read_text(const std::string & path) {
    std::ifstream      f(path, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

Tokenizer load_tokenizer(const std::string & file) {
    GgufPtr g(gguf_init_from_file(data_path(file).c_str(), {true, nullptr}));
    EXPECT_TRUE(g) << file;
    Tokenizer   tok;
    std::string error;
    EXPECT_TRUE(g && tok.load(g.get(), &error)) << error;
    return tok;
}


// ---------------------------------------------------------------------------

// llama.cpp's test-tokenizer-0 vectors: no BOS, SentencePiece leading space.
TEST(Tokenizer, LlamaVocabularyTestVectors) {
    const Tokenizer tok = load_tokenizer("tokenizer/ggml-vocab-llama-spm.gguf");
    ASSERT_EQ(tok.n_vocab(), 32000);
    EXPECT_EQ(tok.bos(), 1);
    EXPECT_EQ(tok.eos(), 2);
    EXPECT_TRUE(tok.add_bos());
    EXPECT_FALSE(tok.add_eos());

    const std::string        inp = read_text(data_path("tokenizer/ggml-vocab-llama-spm.gguf.inp"));
    const std::string        sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> inputs;
    for (size_t pos = 0; pos < inp.size();) {
        const size_t end = inp.find(sep, pos);
        ASSERT_NE(end, std::string::npos);
        inputs.push_back(inp.substr(pos, end - pos));
        pos = end + sep.size();
    }
    std::istringstream                expected_lines(read_text(data_path("tokenizer/ggml-vocab-llama-spm.gguf.out")));
    std::vector<std::vector<int32_t>> expected;
    for (std::string line; std::getline(expected_lines, line);) {
        std::istringstream   ls(line);
        std::vector<int32_t> ids;
        for (int32_t id; ls >> id;) {
            ids.push_back(id);
        }
        expected.push_back(ids);
    }
    ASSERT_EQ(inputs.size(), 46u);
    ASSERT_EQ(expected.size(), inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
        EXPECT_EQ(tok.tokenize(inputs[i], false), expected[i]) << "input " << i << ": '" << inputs[i] << "'";
    }

    // Decoding gives the text back with the leading space the encoding added.
    for (const std::string & s : inputs) {
        if (!s.empty()) {
            EXPECT_EQ(tok.detokenize(tok.tokenize(s, false)), " " + s);
        }
    }
    EXPECT_EQ(tok.tokenize("Hello", true), (std::vector<int32_t>{1, 15043}));
    EXPECT_EQ(tok.tokenize("", true), std::vector<int32_t>{1});
}

// The stories260K prompts as llama.cpp tokenized them, and the generated
// tokens decoded to the reference text.
TEST(Tokenizer, Stories260kReference) {
    const Tokenizer tok = load_tokenizer("stories260k-f32.gguf");
    ASSERT_EQ(tok.n_vocab(), 512);
    const nlohmann::json ref = nlohmann::json::parse(read_text(data_path("stories260k-reference.json")));
    ASSERT_EQ(ref.at("prompts").size(), 4u);
    for (const nlohmann::json & p : ref.at("prompts")) {
        const std::string          prompt = p.at("prompt").get<std::string>();
        const std::vector<int32_t> ids    = tok.tokenize(prompt, true);
        EXPECT_EQ(ids, p.at("prompt_token_ids").get<std::vector<int32_t>>()) << prompt;
        const auto pieces = p.at("prompt_token_pieces").get<std::vector<std::string>>();
        ASSERT_EQ(pieces.size(), ids.size());
        for (size_t i = 0; i < ids.size(); ++i) {
            EXPECT_EQ(tok.text(ids[i]), pieces[i]);
        }
        EXPECT_EQ(tok.detokenize(p.at("generated_token_ids").get<std::vector<int32_t>>()),
                  p.at("generated_text").get<std::string>())
            << prompt;
    }
}

TEST(Tokenizer, ByteFallbackAndPieces) {
    const Tokenizer tok = load_tokenizer("stories260k-f32.gguf");
    // No piece of the 512-token vocabulary holds the Cyrillic 'zhe' or the newline: bytes.
    const std::vector<int32_t> ids = tok.tokenize("caf\xD0\xB6\n", false);
    ASSERT_GE(ids.size(), 3u);
    EXPECT_EQ(tok.text(ids[ids.size() - 3]), "<0xD0>");
    EXPECT_EQ(tok.text(ids[ids.size() - 2]), "<0xB6>");
    EXPECT_EQ(tok.text(ids.back()), "<0x0A>");
    EXPECT_EQ(tok.detokenize(ids), " caf\xD0\xB6\n");
    EXPECT_EQ(tok.piece(tok.find("<0x0A>")), "\n");
    EXPECT_EQ(tok.piece(tok.bos()), ""); // control
    EXPECT_EQ(tok.piece(tok.unk()), "<unk>");
    EXPECT_EQ(tok.piece(-1), "");
    EXPECT_EQ(tok.piece(100000), "");
    // Control token texts in the input are plain text (special tokens are not parsed).
    const std::vector<int32_t> s = tok.tokenize("<s>", false);
    EXPECT_EQ(std::count(s.begin(), s.end(), tok.bos()), 0);
    EXPECT_EQ(tok.detokenize(s), " <s>");
}

// A vocabulary built in memory: tokens with scores and types, and the keys.
GgufPtr make_vocab(const std::vector<std::string> & tokens, const std::vector<float> & scores,
                   const std::vector<int32_t> & types, bool space_prefix = true) {
    GgufPtr g(gguf_init_empty());
    gguf_set_val_str(g.get(), "tokenizer.ggml.model", "llama");
    std::vector<const char *> ptrs;
    for (const std::string & t : tokens) {
        ptrs.push_back(t.c_str());
    }
    gguf_set_arr_str(g.get(), "tokenizer.ggml.tokens", ptrs.data(), ptrs.size());
    gguf_set_arr_data(g.get(), "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores.data(), scores.size());
    gguf_set_arr_data(g.get(), "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types.data(), types.size());
    gguf_set_val_bool(g.get(), "tokenizer.ggml.add_space_prefix", space_prefix);
    return g;
}

TEST(Tokenizer, HighestScoringPairMergesFirst) {
    const std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "a", "b", "c", "ab", "bc"};
    const std::vector<int32_t>     types  = {2, 3, 3, 1, 1, 1, 1, 1};
    {
        GgufPtr     g = make_vocab(tokens, {0, 0, 0, -1, -1, -1, -2, -3}, types, false);
        Tokenizer   tok;
        std::string error;
        ASSERT_TRUE(tok.load(g.get(), &error)) << error;
        EXPECT_EQ(tok.tokenize("abc", false), (std::vector<int32_t>{6, 5})); // ab c
    }
    {
        GgufPtr     g = make_vocab(tokens, {0, 0, 0, -1, -1, -1, -3, -2}, types, false);
        Tokenizer   tok;
        std::string error;
        ASSERT_TRUE(tok.load(g.get(), &error)) << error;
        EXPECT_EQ(tok.tokenize("abc", false), (std::vector<int32_t>{3, 7})); // a bc
        // Equal scores: the leftmost pair first.
        GgufPtr g2 = make_vocab(tokens, {0, 0, 0, -1, -1, -1, -2, -2}, types, false);
        ASSERT_TRUE(tok.load(g2.get(), &error)) << error;
        EXPECT_EQ(tok.tokenize("abc", false), (std::vector<int32_t>{6, 5}));
        // No byte tokens and no token for 'z': UNK.
        EXPECT_EQ(tok.tokenize("za", true), (std::vector<int32_t>{1, 0, 3}));
    }
}

TEST(Tokenizer, UserDefinedTokensAreCutOut) {
    const std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "\xE2\x96\x81" "a", "<|x|>"};
    GgufPtr     g = make_vocab(tokens, {0, 0, 0, -1, -2, -1, 0}, {2, 3, 3, 1, 1, 1, 4});
    Tokenizer   tok;
    std::string error;
    ASSERT_TRUE(tok.load(g.get(), &error)) << error;
    // The text after a user-defined token gets the leading space again.
    EXPECT_EQ(tok.tokenize("a<|x|>a", false), (std::vector<int32_t>{5, 6, 5}));
    EXPECT_EQ(tok.tokenize("<|x|>", true), (std::vector<int32_t>{1, 6}));
    EXPECT_EQ(tok.piece(6), "<|x|>");
}

TEST(Tokenizer, RejectsBadVocabularies) {
    std::string error;
    {
        GgufPtr   g(gguf_init_empty());
        Tokenizer tok;
        EXPECT_FALSE(tok.load(g.get(), &error));
        EXPECT_NE(error.find("tokenizer.ggml.model"), std::string::npos);
    }
    {
        GgufPtr g = make_vocab({"a", "b", "c"}, {0, 0, 0}, {1, 1, 1});
        gguf_set_val_str(g.get(), "tokenizer.ggml.model", "gpt2");
        Tokenizer tok;
        EXPECT_FALSE(tok.load(g.get(), &error));
        EXPECT_NE(error.find("gpt2"), std::string::npos);
    }
    {
        GgufPtr   g = make_vocab({"a", "b", "c"}, {0, 0}, {1, 1, 1});
        Tokenizer tok;
        EXPECT_FALSE(tok.load(g.get(), &error));
        EXPECT_NE(error.find("scores"), std::string::npos);
    }
    {
        GgufPtr g = make_vocab({"a", "b", "c"}, {0, 0, 0}, {1, 1, 1});
        gguf_set_val_u32(g.get(), "tokenizer.ggml.bos_token_id", 3);
        Tokenizer tok;
        EXPECT_FALSE(tok.load(g.get(), &error));
        EXPECT_NE(error.find("bos_token_id"), std::string::npos);
    }
    {
        GgufPtr g = make_vocab({"a", "b", "c"}, {0, 0, 0}, {1, 1, 1});
        gguf_set_val_str(g.get(), "tokenizer.ggml.add_bos_token", "yes");
        Tokenizer tok;
        EXPECT_FALSE(tok.load(g.get(), &error));
        EXPECT_NE(error.find("add_bos_token"), std::string::npos);
    }
}

} // namespace
