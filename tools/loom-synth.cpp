// loom-synth: writes a llama-architecture GGUF model with random weights, for
// measuring speed at sizes no bundled model has (its outputs are noise).
//
//   loom-synth -o OUT.gguf --vocab-from SRC.gguf [--type T] [--embd N] [--ff N]
//              [--layers N] [--heads N] [--heads-kv N] [--ctx N] [--seed N]
//              [--experts N --experts-used K]
//
// The tokenizer (every tokenizer.* key) comes from SRC, which may be a full
// model or a vocabulary-only file such as llama.cpp's ggml-vocab-*.gguf; the
// vocabulary size is the length of its tokenizer.ggml.tokens. T is either
//   - a tensor type (f32, f16, bf16, q8_0, q4_0; default q4_0): every weight
//     matrix and the output matrix of that type, the embeddings F32; or
//   - a llama.cpp file type by its llama-quantize name (Q4_K_M, Q4_K_S,
//     Q5_K_M, Q5_K_S, Q6_K, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K_M,
//     IQ4_NL, IQ4_XS, MXFP4_MOE, F16, BF16, F32): each matrix, the embeddings
//     included, of the type llama.cpp's quantizer gives it (synth_recipes.h).
// Norms are F32. The defaults give TinyLlama 1.1B's shape: embd 2048,
// ff 5632, 22 layers, 32 heads, 4 KV heads.
//
// With --experts N, every layer's feed-forward part is a mixture of N
// experts of which K are used per token, laid out as llama.cpp's llama
// architecture reads Mixtral-style models: ffn_gate_inp (embd x N, F32, as
// llama.cpp's quantizer leaves it) and ffn_gate_exps, ffn_up_exps (embd x ff
// x N), ffn_down_exps (ff x embd x N) of the --type tensor type, with
// llama.expert_count and llama.expert_used_count set. The file types'
// recipes are not modelled for experts (llama.cpp's quantizer has rules of
// its own for them), so --experts takes a tensor type only.

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
#include "synth_recipes.h"

namespace {

struct Shape {
    ggml_type                  type     = GGML_TYPE_Q4_0; // without a recipe: every matrix's type
    const loom_synth::Recipe * recipe   = nullptr;        // a llama.cpp file type
    std::string                type_name;                 // what --type said
    int64_t                    embd     = 2048;
    int64_t                    ff       = 5632;
    int64_t                    layers   = 22;
    int64_t                    heads    = 32;
    int64_t                    heads_kv = 4;
    int64_t                    ctx      = 2048;
    uint32_t                   seed     = 1234;
    int64_t                    experts      = 0; // 0: dense feed-forward layers
    int64_t                    experts_used = 0;
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
            case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_0:
            case GGML_TYPE_Q8_1: case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K:
            case GGML_TYPE_Q6_K: case GGML_TYPE_Q8_K: case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS:
            case GGML_TYPE_IQ3_XXS: case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ3_S:
            case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ4_XS: case GGML_TYPE_I8: case GGML_TYPE_I16: case GGML_TYPE_I32:
            case GGML_TYPE_I64: case GGML_TYPE_F64: case GGML_TYPE_IQ1_M: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0:
            case GGML_TYPE_MXFP4: case GGML_TYPE_NVFP4: case GGML_TYPE_Q1_0: case GGML_TYPE_Q2_0: case GGML_TYPE_COUNT:
                ggml_quantize_chunk(t->type, v.data(), row, 0, 1, n_per_row, nullptr); break;
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
    if (m.experts > 0) {
        gguf_set_val_u32(out.get(), "llama.expert_count", uint32_t(m.experts));
        gguf_set_val_u32(out.get(), "llama.expert_used_count", uint32_t(m.experts_used));
    }

    // The matrices and their types: the recipe's, or --type for all but the
    // embeddings.
    struct Matrix {
        std::string name;
        int64_t     ne0, ne1;
        ggml_type   type;
        int64_t     ne2 = 1; // experts
    };
    const loom_synth::ModelShape shape{m.embd, m.ff, m.layers, m.heads, m.heads_kv};
    std::vector<Matrix>          matrices;
    auto matrix = [&](std::string name, loom_synth::Role role, int64_t layer, int64_t ne0, int64_t ne1) {
        ggml_type type = m.type;
        if (m.recipe != nullptr) {
            type = loom_synth::recipe_tensor_type(*m.recipe, shape, role, layer, ne0);
        } else if (role == loom_synth::Role::token_embd) {
            type = GGML_TYPE_F32;
        }
        matrices.push_back({std::move(name), ne0, ne1, type});
    };
    using loom_synth::Role;
    matrix("token_embd.weight", Role::token_embd, -1, m.embd, n_vocab);
    for (int64_t l = 0; l < m.layers; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        matrix(p + "attn_q.weight", Role::attn_q, l, m.embd, m.embd);
        matrix(p + "attn_k.weight", Role::attn_k, l, m.embd, head_dim * m.heads_kv);
        matrix(p + "attn_v.weight", Role::attn_v, l, m.embd, head_dim * m.heads_kv);
        matrix(p + "attn_output.weight", Role::attn_output, l, m.embd, m.embd);
        if (m.experts == 0) {
            matrix(p + "ffn_gate.weight", Role::ffn_gate, l, m.embd, m.ff);
            matrix(p + "ffn_up.weight", Role::ffn_up, l, m.embd, m.ff);
            matrix(p + "ffn_down.weight", Role::ffn_down, l, m.ff, m.embd);
        } else {
            matrices.push_back({p + "ffn_gate_inp.weight", m.embd, m.experts, GGML_TYPE_F32});
            matrices.push_back({p + "ffn_gate_exps.weight", m.embd, m.ff, m.type, m.experts});
            matrices.push_back({p + "ffn_up_exps.weight", m.embd, m.ff, m.type, m.experts});
            matrices.push_back({p + "ffn_down_exps.weight", m.ff, m.embd, m.type, m.experts});
        }
    }
    matrix("output.weight", Role::output, -1, m.embd, n_vocab);

    uint32_t file_type = 0;
    if (m.recipe != nullptr) {
        file_type = loom_synth::recipe_file_type(*m.recipe);
    } else {
        file_type = m.type == GGML_TYPE_Q4_0   ? 2u
                    : m.type == GGML_TYPE_Q8_0 ? 7u
                    : m.type == GGML_TYPE_F16  ? 1u
                    : m.type == GGML_TYPE_BF16 ? 32u
                                               : 0u;
    }
    gguf_set_val_u32(out.get(), "general.file_type", file_type);
    gguf_set_val_u32(out.get(), "general.quantization_version", 2);

    // Every tensor's data in one arena.
    const size_t n_norms = size_t(2 * m.layers + 1);
    size_t       bytes   = 4 * size_t(m.embd) * n_norms + ggml_tensor_overhead() * (matrices.size() + n_norms) +
                   (size_t(1) << 20);
    for (const Matrix & x : matrices) {
        bytes += ggml_row_size(x.type, x.ne0) * size_t(x.ne1 * x.ne2) + 64;
    }
    ggml_init_params ip = {bytes, nullptr, false};
    ggml_context_ptr ctx(ggml_init(ip));
    if (!ctx) {
        std::fprintf(stderr, "loom-synth: out of memory for %zu bytes of weights\n", bytes);
        return 1;
    }
    std::mt19937 rng(m.seed);
    // Each layer's tensors in the file in the order they are used; values
    // drawn in the order of the matrices above.
    auto add = [&](const std::string & name, ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2 = 1) {
        ggml_tensor * t = ne1 == 0   ? ggml_new_tensor_1d(ctx.get(), type, ne0)
                          : ne2 == 1 ? ggml_new_tensor_2d(ctx.get(), type, ne0, ne1)
                                     : ggml_new_tensor_3d(ctx.get(), type, ne0, ne1, ne2);
        ggml_set_name(t, name.c_str());
        if (ne1 == 0) {
            std::vector<float> ones(static_cast<size_t>(ne0), 1.0f); // norm weights
            std::memcpy(t->data, ones.data(), ggml_nbytes(t));
        } else {
            fill_normal(t, rng, 1.0f / std::sqrt(float(ne0)));
        }
        gguf_add_tensor(out.get(), t);
    };
    auto add_matrix = [&](const Matrix & x) { add(x.name, x.type, x.ne0, x.ne1, x.ne2); };
    size_t next = 0;
    add_matrix(matrices[next++]); // token_embd
    for (int64_t l = 0; l < m.layers; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        add(p + "attn_norm.weight", GGML_TYPE_F32, m.embd, 0);
        for (int i = 0; i < 4; ++i) add_matrix(matrices[next++]); // q, k, v, output
        add(p + "ffn_norm.weight", GGML_TYPE_F32, m.embd, 0);
        // gate, up, down; or the router and the experts' gate, up, down
        for (int i = 0; i < (m.experts == 0 ? 3 : 4); ++i) add_matrix(matrices[next++]);
    }
    add("output_norm.weight", GGML_TYPE_F32, m.embd, 0);
    add_matrix(matrices[next++]); // output

    if (!gguf_write_to_file(out.get(), out_path, false)) {
        std::fprintf(stderr, "loom-synth: cannot write %s\n", out_path);
        return 1;
    }
    const int64_t kv     = head_dim * m.heads_kv;
    const int64_t ffn    = m.experts == 0 ? 3 * m.embd * m.ff : m.experts * (3 * m.embd * m.ff + m.embd);
    const double  params = double(m.layers) * double(2 * m.embd * m.embd + 2 * m.embd * kv + ffn) +
                          2.0 * double(n_vocab * m.embd);
    char experts[64] = "";
    if (m.experts > 0) {
        std::snprintf(experts, sizeof(experts), ", %lld experts (%lld used)", (long long) m.experts,
                      (long long) m.experts_used);
    }
    std::printf("wrote %s: %lld layers, embd %lld, ff %lld%s, %lld/%lld heads, vocab %lld, %s weights, %.2f B parameters\n",
                out_path, (long long) m.layers, (long long) m.embd, (long long) m.ff, experts, (long long) m.heads,
                (long long) m.heads_kv, (long long) n_vocab,
                m.recipe != nullptr ? m.type_name.c_str() : ggml_type_name(m.type), params * 1e-9);
    return 0;
}

int usage(const char * argv0) {
    std::fprintf(stderr,
                 "usage: %s -o OUT.gguf --vocab-from SRC.gguf [--type T] [--embd N] [--ff N]\n"
                 "       [--layers N] [--heads N] [--heads-kv N] [--ctx N] [--seed N]\n"
                 "       [--experts N --experts-used K]\n"
                 "  T: a type for every matrix (f32, f16, bf16, q8_0, q4_0) or a llama.cpp file type:\n"
                 "    ",
                 argv0);
    for (const std::string & name : loom_synth::recipe_names()) std::fprintf(stderr, " %s", name.c_str());
    std::fprintf(stderr, "\n");
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
            m.type   = GGML_TYPE_COUNT;
            m.recipe = loom_synth::find_recipe(v);
            for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
                if (std::strcmp(v, ggml_type_name(t)) == 0) m.type = t;
            }
            m.type_name = v;
            ok          = m.type != GGML_TYPE_COUNT || m.recipe != nullptr;
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
        } else if (a == "--experts" && (ok = parse_int(v, 1, 512, &n))) {
            m.experts = n;
        } else if (a == "--experts-used" && (ok = parse_int(v, 1, 512, &n))) {
            m.experts_used = n;
        } else if (ok) {
            return usage(argv[0]);
        }
        if (!ok) {
            std::fprintf(stderr, "loom-synth: bad value for %s: %s\n", a.c_str(), v);
            return 2;
        }
    }
    if (out_path == nullptr || from_path == nullptr) return usage(argv[0]);
    if ((m.experts > 0) != (m.experts_used > 0) || m.experts_used > m.experts) {
        std::fprintf(stderr, "loom-synth: --experts N and --experts-used K go together, with K <= N\n");
        return 2;
    }
    if (m.experts > 0 && m.recipe != nullptr) {
        std::fprintf(stderr, "loom-synth: --experts takes a tensor type (f32, f16, bf16, q8_0, q4_0), not a file type\n");
        return 2;
    }
    // A recipe falls back to other types for rows that are not whole blocks.
    const int64_t blck = m.recipe != nullptr ? 1 : ggml_blck_size(m.type);
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
