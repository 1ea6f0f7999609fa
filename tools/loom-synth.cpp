// loom-synth: writes a llama-architecture GGUF model with random weights, for
// measuring speed at sizes no bundled model has (its outputs are noise).
//
//   loom-synth -o OUT.gguf --vocab-from SRC.gguf [--type T] [--embd N] [--ff N]
//              [--layers N] [--heads N] [--heads-kv N] [--ctx N] [--seed N]
//
// The tokenizer (every tokenizer.* key) comes from SRC, which may be a full
// model or a vocabulary-only file such as llama.cpp's ggml-vocab-*.gguf; the
// vocabulary size is the length of its tokenizer.ggml.tokens. Weight matrices
// are of type T (f32, f16, bf16, q8_0, q4_0; default q4_0), the embeddings
// and norms F32, the output matrix of type T. The defaults give TinyLlama
// 1.1B's shape: embd 2048, ff 5632, 22 layers, 32 heads, 4 KV heads.

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggml-cpp.h"
#include "ggml.h"
#include "gguf.h"

namespace {

struct Shape {
    ggml_type type     = GGML_TYPE_Q4_0;
    int64_t   embd     = 2048;
    int64_t   ff       = 5632;
    int64_t   layers   = 22;
    int64_t   heads    = 32;
    int64_t   heads_kv = 4;
    int64_t   ctx      = 2048;
    uint32_t  seed     = 1234;
};

// Values of a layer initialised as networks are before training: normal with
// a spread of 1/sqrt(fan-in), so activations stay of order one. Row by row,
// so a large matrix needs no float copy of itself.
void fill_normal(ggml_tensor * t, std::mt19937 & rng, float stddev) {
    std::normal_distribution<float> dist(0.0f, stddev);
    const int64_t                   n_per_row = t->ne[0];
    std::vector<float>              v(static_cast<size_t>(n_per_row));
    const size_t                    row_bytes = ggml_row_size(t->type, n_per_row);
    for (int64_t r = 0; r < ggml_nrows(t); ++r) {
        for (float & x : v) x = dist(rng);
        char * row = static_cast<char *>(t->data) + size_t(r) * row_bytes;
        switch (t->type) {
            case GGML_TYPE_F32: std::memcpy(row, v.data(), row_bytes); break;
            case GGML_TYPE_F16: ggml_fp32_to_fp16_row(v.data(), reinterpret_cast<ggml_fp16_t *>(row), n_per_row); break;
            case GGML_TYPE_BF16: ggml_fp32_to_bf16_row(v.data(), reinterpret_cast<ggml_bf16_t *>(row), n_per_row); break;
            default: ggml_quantize_chunk(t->type, v.data(), row, 0, 1, n_per_row, nullptr); break;
        }
    }
}

int write_model(const char * out_path, const char * src_path, const Shape & m) {
    gguf_init_params gp  = {true, nullptr};
    gguf_context_ptr src(gguf_init_from_file(src_path, gp));
    if (!src) {
        std::fprintf(stderr, "loom-synth: cannot read %s\n", src_path);
        return 1;
    }
    const int64_t tokens_key = gguf_find_key(src.get(), "tokenizer.ggml.tokens");
    if (tokens_key < 0 || gguf_get_kv_type(src.get(), tokens_key) != GGUF_TYPE_ARRAY) {
        std::fprintf(stderr, "loom-synth: %s has no tokenizer.ggml.tokens array\n", src_path);
        return 1;
    }
    const int64_t n_vocab  = int64_t(gguf_get_arr_n(src.get(), tokens_key));
    const int64_t head_dim = m.embd / m.heads;

    // The tokenizer of the source: gguf_set_kv copies every key, then the
    // ones that describe another model go.
    gguf_context_ptr out(gguf_init_empty());
    gguf_set_kv(out.get(), src.get());
    std::vector<std::string> drop;
    for (int64_t k = 0; k < gguf_get_n_kv(out.get()); ++k) {
        const char * key = gguf_get_key(out.get(), k);
        if (std::strncmp(key, "tokenizer.", 10) != 0) drop.emplace_back(key);
    }
    for (const std::string & key : drop) gguf_remove_key(out.get(), key.c_str());
    gguf_set_val_str(out.get(), "general.architecture", "llama");
    gguf_set_val_str(out.get(), "general.name", "loom-synth random weights");
    gguf_set_val_u32(out.get(), "llama.context_length", uint32_t(m.ctx));
    gguf_set_val_u32(out.get(), "llama.embedding_length", uint32_t(m.embd));
    gguf_set_val_u32(out.get(), "llama.feed_forward_length", uint32_t(m.ff));
    gguf_set_val_u32(out.get(), "llama.block_count", uint32_t(m.layers));
    gguf_set_val_u32(out.get(), "llama.attention.head_count", uint32_t(m.heads));
    gguf_set_val_u32(out.get(), "llama.attention.head_count_kv", uint32_t(m.heads_kv));
    gguf_set_val_u32(out.get(), "llama.rope.dimension_count", uint32_t(head_dim));
    gguf_set_val_f32(out.get(), "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    gguf_set_val_f32(out.get(), "llama.rope.freq_base", 10000.0f);
    gguf_set_val_u32(out.get(), "general.file_type", m.type == GGML_TYPE_Q4_0   ? 2u
                                                     : m.type == GGML_TYPE_Q8_0 ? 7u
                                                     : m.type == GGML_TYPE_F16  ? 1u
                                                     : m.type == GGML_TYPE_BF16 ? 32u
                                                                                : 0u);

    // Every tensor's data in one arena.
    const int64_t kv    = head_dim * m.heads_kv;
    const size_t  per_w = ggml_row_size(m.type, m.embd);
    const size_t  bytes = size_t(m.layers) * (size_t(2 * m.embd + 2 * kv + 2 * m.ff) * per_w +
                                              ggml_row_size(m.type, m.ff) * size_t(m.embd) + 2 * 4 * size_t(m.embd)) +
                         size_t(n_vocab) * (per_w + 4 * size_t(m.embd)) + 4 * size_t(m.embd) +
                         ggml_tensor_overhead() * size_t(16 * m.layers + 16) + (size_t(1) << 20);
    ggml_init_params ip = {bytes, nullptr, false};
    ggml_context_ptr ctx(ggml_init(ip));
    if (!ctx) {
        std::fprintf(stderr, "loom-synth: out of memory for %zu bytes of weights\n", bytes);
        return 1;
    }
    std::mt19937 rng(m.seed);
    auto         add = [&](const std::string & name, ggml_type type, int64_t ne0, int64_t ne1) {
        ggml_tensor * t = ne1 == 0 ? ggml_new_tensor_1d(ctx.get(), type, ne0) : ggml_new_tensor_2d(ctx.get(), type, ne0, ne1);
        ggml_set_name(t, name.c_str());
        if (ne1 == 0) {
            std::vector<float> ones(static_cast<size_t>(ne0), 1.0f); // norm weights
            std::memcpy(t->data, ones.data(), ggml_nbytes(t));
        } else {
            fill_normal(t, rng, 1.0f / std::sqrt(float(ne0)));
        }
        gguf_add_tensor(out.get(), t);
    };
    add("token_embd.weight", GGML_TYPE_F32, m.embd, n_vocab);
    for (int64_t l = 0; l < m.layers; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        add(p + "attn_norm.weight", GGML_TYPE_F32, m.embd, 0);
        add(p + "attn_q.weight", m.type, m.embd, m.embd);
        add(p + "attn_k.weight", m.type, m.embd, kv);
        add(p + "attn_v.weight", m.type, m.embd, kv);
        add(p + "attn_output.weight", m.type, m.embd, m.embd);
        add(p + "ffn_norm.weight", GGML_TYPE_F32, m.embd, 0);
        add(p + "ffn_gate.weight", m.type, m.embd, m.ff);
        add(p + "ffn_up.weight", m.type, m.embd, m.ff);
        add(p + "ffn_down.weight", m.type, m.ff, m.embd);
    }
    add("output_norm.weight", GGML_TYPE_F32, m.embd, 0);
    add("output.weight", m.type, m.embd, n_vocab);

    if (!gguf_write_to_file(out.get(), out_path, false)) {
        std::fprintf(stderr, "loom-synth: cannot write %s\n", out_path);
        return 1;
    }
    const double params = double(m.layers) * double(2 * m.embd * m.embd + 2 * m.embd * kv + 3 * m.embd * m.ff) +
                          2.0 * double(n_vocab * m.embd);
    std::printf("wrote %s: %lld layers, embd %lld, ff %lld, %lld/%lld heads, vocab %lld, %s weights, %.2f B parameters\n",
                out_path, (long long) m.layers, (long long) m.embd, (long long) m.ff, (long long) m.heads,
                (long long) m.heads_kv, (long long) n_vocab, ggml_type_name(m.type), params * 1e-9);
    return 0;
}

int usage(const char * argv0) {
    std::fprintf(stderr,
                 "usage: %s -o OUT.gguf --vocab-from SRC.gguf [--type f32|f16|bf16|q8_0|q4_0] [--embd N] [--ff N]\n"
                 "       [--layers N] [--heads N] [--heads-kv N] [--ctx N] [--seed N]\n",
                 argv0);
    return 2;
}

bool parse_int(const char * s, int64_t lo, int64_t hi, int64_t * out) {
    char *        end = nullptr;
    const int64_t v   = std::strtoll(s, &end, 10);
    if (end == s || *end != '\0' || v < lo || v > hi) return false;
    *out = v;
    return true;
}

} // namespace

int main(int argc, char ** argv) {
    Shape        m;
    const char * out_path  = nullptr;
    const char * from_path = nullptr;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc) return usage(argv[0]);
        const char * v  = argv[++i];
        int64_t      n  = 0;
        bool         ok = true;
        if (a == "-o" || a == "--output") {
            out_path = v;
        } else if (a == "--vocab-from") {
            from_path = v;
        } else if (a == "--type") {
            m.type = GGML_TYPE_COUNT;
            for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
                if (std::strcmp(v, ggml_type_name(t)) == 0) m.type = t;
            }
            ok = m.type != GGML_TYPE_COUNT;
        } else if (a == "--embd" && (ok = parse_int(v, 32, 1 << 16, &n))) {
            m.embd = n;
        } else if (a == "--ff" && (ok = parse_int(v, 32, 1 << 18, &n))) {
            m.ff = n;
        } else if (a == "--layers" && (ok = parse_int(v, 1, 1024, &n))) {
            m.layers = n;
        } else if (a == "--heads" && (ok = parse_int(v, 1, 1024, &n))) {
            m.heads = n;
        } else if (a == "--heads-kv" && (ok = parse_int(v, 1, 1024, &n))) {
            m.heads_kv = n;
        } else if (a == "--ctx" && (ok = parse_int(v, 1, 1 << 20, &n))) {
            m.ctx = n;
        } else if (a == "--seed" && (ok = parse_int(v, 0, UINT32_MAX, &n))) {
            m.seed = uint32_t(n);
        } else if (ok) {
            return usage(argv[0]);
        }
        if (!ok) {
            std::fprintf(stderr, "loom-synth: bad value for %s: %s\n", a.c_str(), v);
            return 2;
        }
    }
    if (out_path == nullptr || from_path == nullptr) return usage(argv[0]);
    const int64_t blck = ggml_blck_size(m.type);
    if (m.embd % m.heads != 0 || m.heads % m.heads_kv != 0 || (m.embd / m.heads) % 2 != 0 || m.embd % blck != 0 ||
        m.ff % blck != 0) {
        std::fprintf(stderr,
                     "loom-synth: embd must split into an even head size, heads into KV heads, and embd and ff into "
                     "blocks of %lld\n",
                     (long long) blck);
        return 2;
    }
    return write_model(out_path, from_path, m);
}
