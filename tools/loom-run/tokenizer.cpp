#include "tokenizer.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <queue>
#include <utility>

#include "gguf.h"

namespace loom_run {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81"; // U+2581, SentencePiece's visible space

// Bytes of the UTF-8 sequence a lead byte starts (1 for stray continuation
// bytes, so malformed text still advances).
size_t utf8_len(uint8_t lead) {
    static constexpr uint8_t lengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lengths[lead >> 4];
}

std::string escape_spaces(std::string_view text) {
    std::string out;
    out.reserve(text.size() + text.size() / 2);
    for (char c : text) {
        if (c == ' ') {
            out += kSpace;
        } else {
            out += c;
        }
    }
    return out;
}

std::string unescape_spaces(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        if (text.substr(i, kSpace.size()) == kSpace) {
            out += ' ';
            i += kSpace.size();
        } else {
            out += text[i++];
        }
    }
    return out;
}

// Parses "<0xXX>" (the byte token form); -1 for any other text.
int byte_of_token_text(const std::string & s) {
    if (s.size() != 6 || s.compare(0, 3, "<0x") != 0 || s[5] != '>') {
        return -1;
    }
    int value = 0;
    for (int i = 3; i < 5; ++i) {
        const char c = s[size_t(i)];
        int        d;
        if (c >= '0' && c <= '9') {
            d = c - '0';
        } else if (c >= 'A' && c <= 'F') {
            d = c - 'A' + 10;
        } else if (c >= 'a' && c <= 'f') {
            d = c - 'a' + 10;
        } else {
            return -1;
        }
        value = value * 16 + d;
    }
    return value;
}

// Reads an integer key of any integer type into [0, n); absent keys keep *out.
bool read_token_id(const gguf_context * ctx, const char * key, int32_t n, int32_t * out, std::string * error) {
    const int64_t id = gguf_find_key(ctx, key);
    if (id < 0) {
        return true;
    }
    int64_t v = -1;
    switch (gguf_get_kv_type(ctx, id)) {
        case GGUF_TYPE_UINT8: v = gguf_get_val_u8(ctx, id); break;
        case GGUF_TYPE_INT8: v = gguf_get_val_i8(ctx, id); break;
        case GGUF_TYPE_UINT16: v = gguf_get_val_u16(ctx, id); break;
        case GGUF_TYPE_INT16: v = gguf_get_val_i16(ctx, id); break;
        case GGUF_TYPE_UINT32: v = gguf_get_val_u32(ctx, id); break;
        case GGUF_TYPE_INT32: v = gguf_get_val_i32(ctx, id); break;
        case GGUF_TYPE_UINT64: v = int64_t(std::min<uint64_t>(gguf_get_val_u64(ctx, id), uint64_t(INT64_MAX))); break;
        case GGUF_TYPE_INT64: v = gguf_get_val_i64(ctx, id); break;
        default: *error = std::string(key) + " is not an integer"; return false;
    }
    if (v < 0 || v >= n) {
        *error = std::string(key) + " = " + std::to_string(v) + " is not a token id (vocabulary of " +
                 std::to_string(n) + ")";
        return false;
    }
    *out = int32_t(v);
    return true;
}

bool read_flag(const gguf_context * ctx, const char * key, bool * out, std::string * error) {
    const int64_t id = gguf_find_key(ctx, key);
    if (id < 0) {
        return true;
    }
    if (gguf_get_kv_type(ctx, id) != GGUF_TYPE_BOOL) {
        *error = std::string(key) + " is not a bool";
        return false;
    }
    *out = gguf_get_val_bool(ctx, id);
    return true;
}

// A numeric array key of n elements of the given type, or absent (NULL).
const void * read_array(const gguf_context * ctx, const char * key, gguf_type type, size_t n, std::string * error,
                        bool * bad) {
    const int64_t id = gguf_find_key(ctx, key);
    if (id < 0) {
        return nullptr;
    }
    if (gguf_get_kv_type(ctx, id) != GGUF_TYPE_ARRAY || gguf_get_arr_type(ctx, id) != type ||
        gguf_get_arr_n(ctx, id) != n) {
        *error = std::string(key) + " must be an array of " + std::to_string(n) + " " + gguf_type_name(type);
        *bad   = true;
        return nullptr;
    }
    return gguf_get_arr_data(ctx, id);
}

// One symbol of the text being merged: a byte range and its neighbours in
// the chain of symbols still alive.
struct Symbol {
    size_t begin;
    size_t len; // 0 once merged into its left neighbour
    int    prev;
    int    next;
};

struct Bigram {
    int    left;
    int    right;
    float  score;
    size_t len;
};

// Highest score first; among equal scores, the leftmost pair.
struct BigramOrder {
    bool operator()(const Bigram & a, const Bigram & b) const {
        return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
};

} // namespace

bool Tokenizer::load(const gguf_context * ctx, std::string * error) {
    const int64_t model_id = gguf_find_key(ctx, "tokenizer.ggml.model");
    if (model_id < 0 || gguf_get_kv_type(ctx, model_id) != GGUF_TYPE_STRING) {
        *error = "no tokenizer.ggml.model string";
        return false;
    }
    if (std::strcmp(gguf_get_val_str(ctx, model_id), "llama") != 0) {
        *error = std::string("tokenizer model '") + gguf_get_val_str(ctx, model_id) +
                 "' is not supported (only 'llama', SentencePiece)";
        return false;
    }
    const int64_t tokens_id = gguf_find_key(ctx, "tokenizer.ggml.tokens");
    if (tokens_id < 0 || gguf_get_kv_type(ctx, tokens_id) != GGUF_TYPE_ARRAY ||
        gguf_get_arr_type(ctx, tokens_id) != GGUF_TYPE_STRING) {
        *error = "no tokenizer.ggml.tokens string array";
        return false;
    }
    const size_t n = gguf_get_arr_n(ctx, tokens_id);
    if (n == 0 || n > size_t(INT32_MAX)) {
        *error = "the vocabulary has " + std::to_string(n) + " tokens";
        return false;
    }

    bool bad    = false;
    auto scores = static_cast<const float *>(read_array(ctx, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, n, error, &bad));
    auto types = static_cast<const int32_t *>(read_array(ctx, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, n, error, &bad));
    if (bad) {
        return false;
    }

    texts_.assign(n, {});
    scores_.assign(n, 0.0f);
    types_.assign(n, TokenType::Normal);
    ids_.clear();
    user_defined_.clear();
    for (size_t i = 0; i < n; ++i) {
        texts_[i] = gguf_get_arr_str(ctx, tokens_id, i);
        if (scores) {
            scores_[i] = scores[i];
        }
        if (types) {
            types_[i] = TokenType(types[i]);
        }
        if (!texts_[i].empty()) {
            ids_[texts_[i]] = int32_t(i); // a repeated text maps to its last id
        }
        if (types_[i] == TokenType::UserDefined && !texts_[i].empty()) {
            user_defined_.push_back(int32_t(i));
        }
    }
    std::stable_sort(user_defined_.begin(), user_defined_.end(),
                     [&](int32_t a, int32_t b) { return texts_[size_t(a)].size() > texts_[size_t(b)].size(); });

    // SentencePiece defaults, overridden by the keys that are present; a
    // vocabulary too small for the default ids falls back to id 0.
    const int32_t nv  = int32_t(n);
    bos_              = nv > 1 ? 1 : 0;
    eos_              = nv > 2 ? 2 : 0;
    unk_              = 0;
    add_bos_          = true;
    add_eos_          = false;
    add_space_prefix_ = true;
    if (!read_token_id(ctx, "tokenizer.ggml.bos_token_id", nv, &bos_, error) ||
        !read_token_id(ctx, "tokenizer.ggml.eos_token_id", nv, &eos_, error) ||
        !read_token_id(ctx, "tokenizer.ggml.unknown_token_id", nv, &unk_, error) ||
        !read_flag(ctx, "tokenizer.ggml.add_bos_token", &add_bos_, error) ||
        !read_flag(ctx, "tokenizer.ggml.add_eos_token", &add_eos_, error) ||
        !read_flag(ctx, "tokenizer.ggml.add_space_prefix", &add_space_prefix_, error)) {
        return false;
    }

    // Byte fallback: <0xXX> tokens, else a token holding the single byte, else UNK.
    for (int b = 0; b < 256; ++b) {
        static const char hex[] = "0123456789ABCDEF";
        const char        name[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
        int32_t           id      = find(name);
        if (id < 0) {
            const char single = char(b);
            id                = find(std::string_view(&single, 1));
        }
        byte_ids_[b] = id >= 0 ? id : unk_;
    }
    return true;
}

int32_t Tokenizer::find(std::string_view text) const {
    const auto it = ids_.find(text);
    return it == ids_.end() ? -1 : it->second;
}

int32_t Tokenizer::byte_token(uint8_t byte) const {
    return byte_ids_[byte];
}

void Tokenizer::tokenize_run(std::string_view text, std::vector<int32_t> & out) const {
    std::vector<Symbol> symbols;
    for (size_t offs = 0; offs < text.size();) {
        const size_t len = std::min(utf8_len(uint8_t(text[offs])), text.size() - offs);
        const int    idx = int(symbols.size());
        symbols.push_back({offs, len, idx - 1, offs + len == text.size() ? -1 : idx + 1});
        offs += len;
    }

    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    // The two symbols each merged text came from, to split symbols that are
    // not tokens back along their merges (the last pair seen for a text wins).
    std::map<std::string_view, std::pair<int, int>> merged_from;

    auto try_pair = [&](int left, int right) {
        if (left < 0 || right < 0) {
            return;
        }
        const std::string_view pair = text.substr(symbols[size_t(left)].begin,
                                                  symbols[size_t(left)].len + symbols[size_t(right)].len);
        const int32_t          id   = find(pair);
        if (id < 0) {
            return;
        }
        queue.push({left, right, scores_[size_t(id)], pair.size()});
        merged_from[pair] = {left, right};
    };

    for (int i = 1; i < int(symbols.size()); ++i) {
        try_pair(i - 1, i);
    }
    while (!queue.empty()) {
        const Bigram b = queue.top();
        queue.pop();
        Symbol & l = symbols[size_t(b.left)];
        Symbol & r = symbols[size_t(b.right)];
        // Stale entries: one side was merged elsewhere since the pair was queued.
        if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) {
            continue;
        }
        l.len += r.len;
        r.len  = 0;
        l.next = r.next;
        if (r.next >= 0) {
            symbols[size_t(r.next)].prev = b.left;
        }
        try_pair(l.prev, b.left);
        try_pair(b.left, l.next);
    }

    // Emits a symbol's token, or the tokens of the two symbols it was merged
    // from, or its bytes.
    auto emit = [&](auto && self, const Symbol & s) -> void {
        const std::string_view piece = text.substr(s.begin, s.len);
        const int32_t          id    = find(piece);
        if (id >= 0) {
            out.push_back(id);
            return;
        }
        const auto it = merged_from.find(piece);
        if (it == merged_from.end()) {
            for (char c : piece) {
                out.push_back(byte_token(uint8_t(c)));
            }
            return;
        }
        // Both halves keep their original begin; their len was consumed by the
        // merge, so rebuild them from the recorded split point.
        const Symbol & left  = symbols[size_t(it->second.first)];
        const Symbol & right = symbols[size_t(it->second.second)];
        const size_t   split = right.begin - left.begin;
        self(self, Symbol{s.begin, split, -1, -1});
        self(self, Symbol{right.begin, s.len - split, -1, -1});
    };
    for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[size_t(i)].next) {
        emit(emit, symbols[size_t(i)]);
    }
}

std::vector<int32_t> Tokenizer::tokenize(std::string_view text, bool add_special) const {
    std::vector<int32_t> out;
    if (add_special && add_bos_) {
        out.push_back(bos_);
    }

    // Cut user-defined tokens out of the text, longest first: a list of
    // (token id or -1 for text, range).
    struct Fragment {
        int32_t id;
        size_t  begin;
        size_t  len;
    };
    std::vector<Fragment> fragments;
    if (!text.empty()) {
        fragments.push_back({-1, 0, text.size()});
    }
    for (int32_t tok : user_defined_) {
        const std::string &   t = texts_[size_t(tok)];
        std::vector<Fragment> next;
        for (const Fragment & f : fragments) {
            if (f.id >= 0) {
                next.push_back(f);
                continue;
            }
            size_t pos = f.begin;
            for (;;) {
                const size_t hit = text.substr(0, f.begin + f.len).find(t, pos);
                if (hit == std::string_view::npos) {
                    break;
                }
                if (hit > pos) {
                    next.push_back({-1, pos, hit - pos});
                }
                next.push_back({tok, hit, t.size()});
                pos = hit + t.size();
            }
            if (pos < f.begin + f.len) {
                next.push_back({-1, pos, f.begin + f.len - pos});
            }
        }
        fragments.swap(next);
    }

    bool after_special = true; // the text's start counts as following a special token
    for (const Fragment & f : fragments) {
        if (f.id >= 0) {
            out.push_back(f.id);
            after_special = true;
            continue;
        }
        std::string run;
        if (add_space_prefix_ && after_special) {
            run = " ";
        }
        run += text.substr(f.begin, f.len);
        tokenize_run(escape_spaces(run), out);
        after_special = false;
    }

    if (add_special && add_eos_) {
        out.push_back(eos_);
    }
    return out;
}

std::string Tokenizer::piece(int32_t id) const {
    if (id < 0 || id >= n_vocab()) {
        return {};
    }
    const std::string & t = texts_[size_t(id)];
    switch (types_[size_t(id)]) {
        case TokenType::Normal: return unescape_spaces(t);
        case TokenType::Unknown:
        case TokenType::UserDefined: return t;
        case TokenType::Byte: {
            const int b = byte_of_token_text(t);
            return b >= 0 ? std::string(1, char(b)) : std::string();
        }
        default: return {}; // control, unused, undefined
    }
}

std::string Tokenizer::detokenize(std::span<const int32_t> ids) const {
    std::string out;
    for (int32_t id : ids) {
        out += piece(id);
    }
    return out;
}

} // namespace loom_run
