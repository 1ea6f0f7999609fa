#pragma once

// SentencePiece-style tokenizer of llama-family GGUF models
// (tokenizer.ggml.model = "llama"), built on the public gguf API only.
//
// Tokenization follows llama.cpp's SPM tokenizer with parse_special = false,
// so that models reproduce llama.cpp's token ids:
//   - tokens of type USER_DEFINED are cut out of the text first, as whole tokens;
//   - each remaining run of text gets a leading space when it starts the text or
//     follows such a token (tokenizer.ggml.add_space_prefix, default true), every
//     ' ' becomes U+2581, and the run is split into UTF-8 characters;
//   - adjacent symbols are merged, always the pair whose concatenation is the
//     vocabulary token of highest score first (leftmost on ties), while any
//     such pair exists;
//   - each final symbol becomes its token, or is split back along its merges,
//     or (for text with no token at all) becomes byte tokens <0xXX>;
//   - BOS first when asked; EOS last when tokenizer.ggml.add_eos_token says so.
//
// Thread-safety: a loaded Tokenizer is immutable; its const methods may be
// called from several threads.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

struct gguf_context;

namespace loom_run {

// Values of tokenizer.ggml.token_type.
enum class TokenType : int32_t {
    Undefined   = 0,
    Normal      = 1,
    Unknown     = 2,
    Control     = 3,
    UserDefined = 4,
    Unused      = 5,
    Byte        = 6,
};

class Tokenizer {
public:
    // Reads tokenizer.ggml.{model, tokens, scores, token_type, bos_token_id,
    // eos_token_id, unknown_token_id, add_bos_token, add_eos_token,
    // add_space_prefix}. Returns false with *error set when the vocabulary is
    // missing, is not a "llama" one, or is inconsistent (the file is untrusted).
    bool load(const gguf_context * ctx, std::string * error);

    // Token ids of text. add_special adds BOS (and EOS) as the model asks.
    std::vector<int32_t> tokenize(std::string_view text, bool add_special) const;

    // The text a token stands for in output: U+2581 as space, byte tokens as
    // their byte, control tokens as nothing, other tokens as their text.
    std::string piece(int32_t id) const;
    // The pieces of ids joined.
    std::string detokenize(std::span<const int32_t> ids) const;

    int32_t            n_vocab() const { return int32_t(texts_.size()); }
    int32_t            bos() const { return bos_; }
    int32_t            eos() const { return eos_; }
    int32_t            unk() const { return unk_; }
    bool               add_bos() const { return add_bos_; }
    bool               add_eos() const { return add_eos_; }
    const std::string & text(int32_t id) const { return texts_.at(size_t(id)); }
    TokenType          type(int32_t id) const { return types_.at(size_t(id)); }
    float              score(int32_t id) const { return scores_.at(size_t(id)); }

    // The id of a token's exact text, or -1.
    int32_t find(std::string_view text) const;

private:
    struct StringHash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };

    void    tokenize_run(std::string_view text, std::vector<int32_t> & out) const;
    int32_t byte_token(uint8_t byte) const;

    std::vector<std::string> texts_;
    std::vector<float>       scores_;
    std::vector<TokenType>   types_;
    std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> ids_;
    std::vector<int32_t>     user_defined_; // longest text first
    int32_t                  byte_ids_[256] = {};

    int32_t bos_              = 1;
    int32_t eos_              = 2;
    int32_t unk_              = 0;
    bool    add_bos_          = true;
    bool    add_eos_          = false;
    bool    add_space_prefix_ = true;
};

} // namespace loom_run
