#include "model.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "devices.h"
#include "gguf.h"

namespace loom_run {

namespace {

// Hyperparameters beyond these are not a model anyone runs here; capping
// them keeps every product of two of them far from overflowing.
constexpr uint64_t MAX_DIM    = uint64_t(1) << 24;
constexpr uint64_t MAX_LAYERS = 4096;

// Weight types the CPU kernels multiply and gather: the floats and every
// block type that decodes to F32 (the K-quants and i-quants of llama.cpp's
// file types among them).
bool is_weight_type(ggml_type type) {
    switch (type) {
        case GGML_TYPE_F32:
        case GGML_TYPE_F16:
        case GGML_TYPE_BF16: return true;
        case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_0:
        case GGML_TYPE_Q8_1: case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K:
        case GGML_TYPE_Q6_K: case GGML_TYPE_Q8_K: case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ3_XXS:
        case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ4_XS:
        case GGML_TYPE_I8: case GGML_TYPE_I16: case GGML_TYPE_I32: case GGML_TYPE_I64: case GGML_TYPE_F64:
        case GGML_TYPE_IQ1_M: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0: case GGML_TYPE_MXFP4: case GGML_TYPE_NVFP4:
        case GGML_TYPE_Q1_0: case GGML_TYPE_Q2_0: case GGML_TYPE_COUNT:
            return ggml_is_quantized(type) && ggml_get_type_traits(type)->to_float != nullptr;
    }
    return ggml_is_quantized(type) && ggml_get_type_traits(type)->to_float != nullptr;
}

// Reads metadata keys with type checks: the gguf accessors abort on a type
// mismatch, and a file can hold any type under any key.
class Keys {
  public:
    Keys(const gguf_context * g, std::string prefix) : g_(g), prefix_(std::move(prefix)) {}

    // An unsigned integer of any integer type. Absent: *out unchanged and
    // true, unless required.
    bool get_uint(const char * key, uint64_t * out, bool required, std::string * error) const {
        const std::string full = prefix_ + key;
        const int64_t     id   = gguf_find_key(g_, full.c_str());
        if (id < 0) {
            if (required) {
                *error = "the file has no key " + full;
            }
            return !required;
        }
        int64_t  s        = 0;
        uint64_t u        = 0;
        bool     unsigned_ = true;
        switch (gguf_get_kv_type(g_, id)) {
            case GGUF_TYPE_UINT8: u = gguf_get_val_u8(g_, id); break;
            case GGUF_TYPE_UINT16: u = gguf_get_val_u16(g_, id); break;
            case GGUF_TYPE_UINT32: u = gguf_get_val_u32(g_, id); break;
            case GGUF_TYPE_UINT64: u = gguf_get_val_u64(g_, id); break;
            case GGUF_TYPE_INT8: s = gguf_get_val_i8(g_, id), unsigned_ = false; break;
            case GGUF_TYPE_INT16: s = gguf_get_val_i16(g_, id), unsigned_ = false; break;
            case GGUF_TYPE_INT32: s = gguf_get_val_i32(g_, id), unsigned_ = false; break;
            case GGUF_TYPE_INT64: s = gguf_get_val_i64(g_, id), unsigned_ = false; break;
            case GGUF_TYPE_ARRAY:
                *error = "key " + full + " holds an array (per-layer values are not supported)";
                return false;
            default: *error = "key " + full + " is not an integer"; return false;
        }
        if (!unsigned_) {
            if (s < 0) {
                *error = "key " + full + " is negative (" + std::to_string(s) + ")";
                return false;
            }
            u = uint64_t(s);
        }
        *out = u;
        return true;
    }

    bool get_float(const char * key, float * out, bool required, std::string * error) const {
        const std::string full = prefix_ + key;
        const int64_t     id   = gguf_find_key(g_, full.c_str());
        if (id < 0) {
            if (required) {
                *error = "the file has no key " + full;
            }
            return !required;
        }
        double v = 0;
        switch (gguf_get_kv_type(g_, id)) {
            case GGUF_TYPE_FLOAT32: v = gguf_get_val_f32(g_, id); break;
            case GGUF_TYPE_FLOAT64: v = gguf_get_val_f64(g_, id); break;
            default: *error = "key " + full + " is not a floating-point number"; return false;
        }
        if (!std::isfinite(v) || std::fabs(v) > 3.0e38) {
            *error = "key " + full + " is not a finite number";
            return false;
        }
        *out = float(v);
        return true;
    }

    // A string key; absent or of another type: empty.
    std::string get_string(const char * key) const {
        const std::string full = prefix_ + key;
        const int64_t     id   = gguf_find_key(g_, full.c_str());
        if (id < 0 || gguf_get_kv_type(g_, id) != GGUF_TYPE_STRING) {
            return {};
        }
        return gguf_get_val_str(g_, id);
    }

  private:
    const gguf_context * g_;
    std::string          prefix_;
};

bool read_hparams(const gguf_context * g, HParams * hp, std::string * error) {
    const std::string arch = Keys(g, "").get_string("general.architecture");
    if (arch != "llama") {
        *error = arch.empty() ? "the file has no string key general.architecture; not a model"
                              : "architecture '" + arch + "' is not supported (only llama)";
        return false;
    }
    const Keys k(g, "llama.");

    uint64_t n_ctx = 0, n_embd = 0, n_layer = 0, n_ff = 0, n_head = 0;
    if (!k.get_uint("context_length", &n_ctx, true, error) || !k.get_uint("embedding_length", &n_embd, true, error) ||
        !k.get_uint("block_count", &n_layer, true, error) || !k.get_uint("feed_forward_length", &n_ff, true, error) ||
        !k.get_uint("attention.head_count", &n_head, true, error)) {
        return false;
    }
    uint64_t n_head_kv = n_head;
    if (!k.get_uint("attention.head_count_kv", &n_head_kv, false, error)) {
        return false;
    }
    auto in_range = [&](const char * what, uint64_t v, uint64_t max) {
        if (v < 1 || v > max) {
            *error = std::string("llama.") + what + " = " + std::to_string(v) + " is out of range [1, " +
                     std::to_string(max) + "]";
            return false;
        }
        return true;
    };
    if (!in_range("context_length", n_ctx, MAX_DIM) || !in_range("embedding_length", n_embd, MAX_DIM) ||
        !in_range("block_count", n_layer, MAX_LAYERS) || !in_range("feed_forward_length", n_ff, MAX_DIM) ||
        !in_range("attention.head_count", n_head, MAX_DIM) || !in_range("attention.head_count_kv", n_head_kv, MAX_DIM)) {
        return false;
    }
    if (n_head % n_head_kv != 0) {
        *error = "attention.head_count " + std::to_string(n_head) + " is not a multiple of attention.head_count_kv " +
                 std::to_string(n_head_kv);
        return false;
    }

    uint64_t head_dim = n_embd % n_head == 0 ? n_embd / n_head : 0;
    if (!k.get_uint("attention.key_length", &head_dim, false, error)) {
        return false;
    }
    if (head_dim == 0) {
        *error = "embedding_length " + std::to_string(n_embd) + " is not a multiple of attention.head_count " +
                 std::to_string(n_head);
        return false;
    }
    uint64_t head_dim_v = head_dim;
    if (!k.get_uint("attention.value_length", &head_dim_v, false, error)) {
        return false;
    }
    if (!in_range("attention.key_length", head_dim, MAX_DIM) || head_dim * n_head > MAX_DIM) {
        return false;
    }
    if (head_dim_v != head_dim) {
        *error = "attention.value_length differs from attention.key_length; not supported";
        return false;
    }
    uint64_t n_rot = head_dim;
    if (!k.get_uint("rope.dimension_count", &n_rot, false, error)) {
        return false;
    }
    if (n_rot < 2 || n_rot > head_dim || n_rot % 2 != 0) {
        *error = "rope.dimension_count " + std::to_string(n_rot) + " must be even and within [2, " +
                 std::to_string(head_dim) + "]";
        return false;
    }

    float eps = 0;
    if (!k.get_float("attention.layer_norm_rms_epsilon", &eps, true, error)) {
        return false;
    }
    if (!(eps > 0.0f) || eps > 1.0f) {
        *error = "attention.layer_norm_rms_epsilon " + std::to_string(eps) + " is out of range (0, 1]";
        return false;
    }
    float base = 10000.0f;
    if (!k.get_float("rope.freq_base", &base, false, error)) {
        return false;
    }
    if (!(base > 0.0f)) {
        *error = "rope.freq_base must be positive";
        return false;
    }
    float              scale = 1.0f;
    const std::string  type  = k.get_string("rope.scaling.type");
    if (type == "linear") {
        float factor = 1.0f;
        if (!k.get_float("rope.scaling.factor", &factor, true, error)) {
            return false;
        }
        if (!(factor > 0.0f)) {
            *error = "rope.scaling.factor must be positive";
            return false;
        }
        scale = 1.0f / factor;
    } else if (!type.empty() && type != "none") {
        *error = "rope scaling '" + type + "' is not supported (only linear)";
        return false;
    } else {
        // The key of older files.
        float linear = 1.0f;
        if (!k.get_float("rope.scale_linear", &linear, false, error)) {
            return false;
        }
        if (!(linear > 0.0f)) {
            *error = "rope.scale_linear must be positive";
            return false;
        }
        scale = 1.0f / linear;
    }

    // Mixtral-style experts: as many as llama.cpp takes (LLAMA_MAX_EXPERTS).
    uint64_t n_expert = 0, n_expert_used = 0;
    if (!k.get_uint("expert_count", &n_expert, false, error) ||
        !k.get_uint("expert_used_count", &n_expert_used, false, error)) {
        return false;
    }
    if (n_expert > 512 || (n_expert > 0 && (n_expert_used < 1 || n_expert_used > n_expert)) ||
        (n_expert == 0 && n_expert_used != 0)) {
        *error = "llama.expert_count " + std::to_string(n_expert) + " with expert_used_count " +
                 std::to_string(n_expert_used) + ": want at most 512 experts and 1 to expert_count of them used";
        return false;
    }

    hp->n_ctx_train = uint32_t(n_ctx);
    hp->n_embd      = uint32_t(n_embd);
    hp->n_layer     = uint32_t(n_layer);
    hp->n_ff        = uint32_t(n_ff);
    hp->n_head      = uint32_t(n_head);
    hp->n_head_kv   = uint32_t(n_head_kv);
    hp->head_dim    = uint32_t(head_dim);
    hp->n_rot       = uint32_t(n_rot);
    hp->rms_eps     = eps;
    hp->rope_base   = base;
    hp->rope_scale  = scale;
    hp->n_expert      = uint32_t(n_expert);
    hp->n_expert_used = uint32_t(n_expert_used);
    return true;
}

// A tensor of the file and where it goes.
struct Planned {
    int64_t       id;     // in the gguf context (the file tensor whose data it gets)
    std::string   name;   // in the device context
    int           device; // index into Backends
    ggml_tensor * tensor = nullptr;
    bool          repack = false; // in the CPU's CPU_REPACK buffer
};

// The weight types the CPU_REPACK buffer repacks (the CPU's feature
// REPACK_TYPES: type names, comma-separated).
std::vector<ggml_type> cpu_repacked_types(ggml_backend_dev_t cpu) {
    std::vector<ggml_type> out;
    for (const std::string & name : split_list(backend_feature(cpu, "REPACK_TYPES"))) {
        for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
            const char * tn = ggml_type_name(ggml_type(t));
            if (tn != nullptr && name == tn) {
                out.push_back(ggml_type(t));
            }
        }
    }
    return out;
}

// The CPU device's extra buffer type CPU_REPACK (Note [Repacked weights] in
// the CPU backend), or NULL when it offers none.
ggml_backend_buffer_type_t cpu_repack_buffer_type(ggml_backend_dev_t cpu) {
    auto fn = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
        ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(cpu), "ggml_backend_dev_get_extra_bufts"));
    for (ggml_backend_buffer_type_t * b = fn != nullptr ? fn(cpu) : nullptr; b != nullptr && *b != nullptr; ++b) {
        if (std::strcmp(ggml_backend_buft_name(*b), "CPU_REPACK") == 0) {
            return *b;
        }
    }
    return nullptr;
}

const char * shape_text(const int64_t * ne, char (&buf)[96]) {
    std::snprintf(buf, sizeof buf, "[%lld, %lld, %lld, %lld]", (long long) ne[0], (long long) ne[1],
                  (long long) ne[2], (long long) ne[3]);
    return buf;
}

// Reads size bytes at offset, retrying short reads.
bool read_at(int fd, void * dst, size_t size, uint64_t offset) {
    auto * p = static_cast<uint8_t *>(dst);
    while (size > 0) {
        const ssize_t n = ::pread(fd, p, size, off_t(offset));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return false;
        }
        p += n;
        size -= size_t(n);
        offset += uint64_t(n);
    }
    return true;
}

} // namespace

Model::~Model() {
    for (ggml_backend_buffer_t b : buffers_) {
        ggml_backend_buffer_free(b);
    }
    for (ggml_context * c : contexts_) {
        ggml_free(c);
    }
    if (map_ != nullptr) {
        ::munmap(map_, map_size_);
    }
    gguf_free(gguf_);
}

std::unique_ptr<Model> Model::load(const std::string & path, const Backends & backends, const LoadOptions & options,
                                   std::string * error) {
    std::unique_ptr<Model> m(new Model());

    gguf_init_params gp{};
    gp.no_alloc = true;
    gp.ctx      = nullptr;
    m->gguf_    = gguf_init_from_file(path.c_str(), gp);
    if (m->gguf_ == nullptr) {
        *error = path + ": cannot read the file as GGUF (the reason is logged above)";
        return nullptr;
    }
    const gguf_context * g = m->gguf_;
    if (!read_hparams(g, &m->hp_, error)) {
        *error = path + ": " + *error;
        return nullptr;
    }
    m->name_ = Keys(g, "").get_string("general.name");
    HParams & hp = m->hp_;

    // The vocabulary size comes from the embedding matrix.
    const int64_t embd_id = gguf_find_tensor(g, "token_embd.weight");
    if (embd_id < 0) {
        *error = path + ": the file has no tensor token_embd.weight";
        return nullptr;
    }
    {
        const int64_t * ne = gguf_get_tensor_ne(g, embd_id);
        if (ne[1] < 1 || uint64_t(ne[1]) > MAX_DIM) {
            *error = path + ": token_embd.weight has an unusable vocabulary size";
            return nullptr;
        }
        hp.n_vocab = uint32_t(ne[1]);
    }

    if (options.on_hparams) {
        options.on_hparams(hp);
    }
    // Layer placement.
    const int cpu = int(backends.cpu_index());
    if (options.place_layers) {
        if (!options.place_layers(hp.n_layer, &m->layer_device_, error)) {
            return nullptr;
        }
    } else {
        m->layer_device_.assign(hp.n_layer, cpu);
    }
    if (m->layer_device_.size() != hp.n_layer) {
        *error = "the layer placement does not cover every layer";
        return nullptr;
    }
    m->output_device_ = m->layer_device_.back();

    // Every tensor the model needs, checked against the hyperparameters.
    std::vector<Planned> planned;
    const ggml_backend_buffer_type_t repack_buft =
        options.use_repack ? cpu_repack_buffer_type(backends.device(size_t(cpu))) : nullptr;
    const std::vector<ggml_type> repacked_types =
        repack_buft != nullptr ? cpu_repacked_types(backends.device(size_t(cpu))) : std::vector<ggml_type>{};
    auto want = [&](const std::string & name, std::vector<int64_t> shape, bool norm, int device, bool required,
                    int64_t * found_id) {
        for (const auto & [re, d] : options.tensor_overrides) {
            if (std::regex_search(name, re)) {
                m->n_overridden_ += d != device ? 1 : 0;
                device = d;
                break;
            }
        }
        *found_id        = gguf_find_tensor(g, name.c_str());
        if (*found_id < 0) {
            if (required) {
                *error = path + ": the file has no tensor " + name;
            }
            return !required;
        }
        int64_t expect[GGML_MAX_DIMS] = {1, 1, 1, 1};
        std::copy(shape.begin(), shape.end(), expect);
        const int64_t * ne = gguf_get_tensor_ne(g, *found_id);
        if (!std::equal(expect, expect + GGML_MAX_DIMS, ne)) {
            char a[96], b[96];
            *error = path + ": tensor " + name + " has shape " + shape_text(ne, a) + ", the hyperparameters ask for " +
                     shape_text(expect, b);
            return false;
        }
        const ggml_type type = gguf_get_tensor_type(g, *found_id);
        if (norm ? type != GGML_TYPE_F32 : !is_weight_type(type)) {
            *error = path + ": tensor " + name + " has type " + ggml_type_name(type) + ", which is not supported here" +
                     (norm ? " (norm weights must be f32)" : " (f32, f16, bf16 or a block type that decodes to f32)");
            return false;
        }
        // Matrices of the CPU whose type CPU_REPACK repacks (Q4_0, Q8_0 and
        // F16 with AVX-512, Q4_K with AVX2), which only matrix products read
        // (not the token embeddings, which get_rows reads), go there.
        const bool repack = repack_buft != nullptr && !norm && device == cpu &&
                            std::find(repacked_types.begin(), repacked_types.end(), type) != repacked_types.end() &&
                            name != "token_embd.weight" && shape.size() == 2;
        planned.push_back({*found_id, name, device, nullptr, repack});
        return true;
    };

    const int64_t n_embd = hp.n_embd, n_ff = hp.n_ff, n_q = hp.n_embd_q(), n_kv = hp.n_embd_kv();
    int64_t       id     = -1;
    if (!want("token_embd.weight", {n_embd, hp.n_vocab}, false, cpu, true, &id)) {
        return nullptr;
    }
    const size_t i_tok_embd = planned.size() - 1;
    std::vector<size_t> layer_first(hp.n_layer);
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        const int         d = m->layer_device_[il];
        layer_first[il]     = planned.size();
        if (!want(p + "attn_norm.weight", {n_embd}, true, d, true, &id) ||
            !want(p + "attn_q.weight", {n_embd, n_q}, false, d, true, &id) ||
            !want(p + "attn_k.weight", {n_embd, n_kv}, false, d, true, &id) ||
            !want(p + "attn_v.weight", {n_embd, n_kv}, false, d, true, &id) ||
            !want(p + "attn_output.weight", {n_q, n_embd}, false, d, true, &id) ||
            !want(p + "ffn_norm.weight", {n_embd}, true, d, true, &id)) {
            return nullptr;
        }
        const int64_t ne = hp.n_expert;
        if (ne == 0 ? (!want(p + "ffn_gate.weight", {n_embd, n_ff}, false, d, true, &id) ||
                       !want(p + "ffn_up.weight", {n_embd, n_ff}, false, d, true, &id) ||
                       !want(p + "ffn_down.weight", {n_ff, n_embd}, false, d, true, &id))
                    : (!want(p + "ffn_gate_inp.weight", {n_embd, ne}, false, d, true, &id) ||
                       !want(p + "ffn_gate_exps.weight", {n_embd, n_ff, ne}, false, d, true, &id) ||
                       !want(p + "ffn_up_exps.weight", {n_embd, n_ff, ne}, false, d, true, &id) ||
                       !want(p + "ffn_down_exps.weight", {n_ff, n_embd, ne}, false, d, true, &id))) {
            return nullptr;
        }
    }
    if (!want("output_norm.weight", {n_embd}, true, m->output_device_, true, &id)) {
        return nullptr;
    }
    const size_t i_output_norm = planned.size() - 1;
    if (!want("output.weight", {n_embd, hp.n_vocab}, false, m->output_device_, false, &id)) {
        return nullptr;
    }
    // Tied output: the embedding matrix serves as output projection. On
    // another device than the CPU it is loaded there a second time.
    size_t i_output = id >= 0 ? planned.size() - 1 : i_tok_embd;
    if (id < 0 && m->output_device_ != cpu) {
        planned.push_back({embd_id, "output.weight", m->output_device_, nullptr});
        i_output = planned.size() - 1;
    }

    // Every tensor's data must lie inside the file; the reader checked it,
    // and the mapping below relies on it, so it is checked here again.
    struct stat st{};
    const int   fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::fstat(fd, &st) != 0) {
        *error = path + ": cannot open: " + std::strerror(errno);
        if (fd >= 0) ::close(fd);
        return nullptr;
    }
    struct FdCloser {
        int fd;
        ~FdCloser() { ::close(fd); }
    } closer{fd};
    const uint64_t file_size   = uint64_t(st.st_size);
    const uint64_t data_offset = gguf_get_data_offset(g);
    for (const Planned & p : planned) {
        const uint64_t off  = gguf_get_tensor_offset(g, p.id);
        const uint64_t size = gguf_get_tensor_size(g, p.id);
        if (data_offset > file_size || off > file_size - data_offset || size > file_size - data_offset - off) {
            *error = path + ": the data of tensor " + p.name + " lies beyond the end of the file";
            return nullptr;
        }
    }

    if (options.use_mmap && file_size > 0) {
        void * addr = ::mmap(nullptr, size_t(file_size), PROT_READ, MAP_PRIVATE, fd, 0);
        if (addr == MAP_FAILED) {
            // Not fatal: the weights are read instead.
            std::fprintf(stderr, "loom-run: cannot map %s (%s); reading it instead\n", path.c_str(),
                         std::strerror(errno));
        } else {
            m->map_      = addr;
            m->map_size_ = size_t(file_size);
            // 2 MiB pages where the system allows them for a file, as the
            // weights read into memory get (cpu_backend.cpp): asked before
            // the read-ahead, so that a file the page cache does not hold yet
            // is read into huge folios. (Linux 6.18, ext4, the 845 MB test
            // model read from disk: 823 MB of the mapping on 2 MiB pages
            // with this, 782 MB without; generation then runs as fast as
            // with --no-mmap. A file the cache holds in small pages, such as
            // one just written, stays on 4 KiB pages: 15-20% slower.)
            ::madvise(addr, size_t(file_size), MADV_HUGEPAGE);
            ::madvise(addr, size_t(file_size), MADV_WILLNEED);
            // Kernels read weights with vector loads; a tensor that is not
            // aligned in the file is copied rather than mapped.
            for (const Planned & p : planned) {
                if (p.device == cpu && (data_offset + gguf_get_tensor_offset(g, p.id)) % 32 != 0) {
                    ::munmap(m->map_, m->map_size_);
                    m->map_ = nullptr;
                    break;
                }
            }
        }
    }

    // One metadata context per device, and one more, last, for the CPU's
    // repacked matrices; tensors keep the file's types and shapes.
    const size_t repack_slot = backends.size();
    auto         slot_of     = [&](const Planned & p) { return p.repack ? repack_slot : size_t(p.device); };
    m->contexts_.assign(backends.size() + 1, nullptr);
    m->weight_bytes_.assign(backends.size(), 0);
    for (size_t d = 0; d <= backends.size(); ++d) {
        const size_t n = size_t(std::count_if(planned.begin(), planned.end(),
                                              [&](const Planned & p) { return slot_of(p) == d; }));
        if (n == 0) {
            continue;
        }
        ggml_init_params ip{};
        ip.mem_size        = ggml_tensor_overhead() * (n + 1);
        ip.no_alloc        = true;
        m->contexts_[d]    = ggml_init(ip);
        if (m->contexts_[d] == nullptr) {
            *error = "out of memory for tensor metadata";
            return nullptr;
        }
    }
    for (Planned & p : planned) {
        const int64_t * ne = gguf_get_tensor_ne(g, p.id);
        p.tensor = ggml_new_tensor(m->contexts_[slot_of(p)], gguf_get_tensor_type(g, p.id), GGML_MAX_DIMS, ne);
        ggml_set_name(p.tensor, p.name.c_str());
        m->weight_bytes_[size_t(p.device)] += ggml_nbytes(p.tensor);
        m->n_repacked_ += p.repack ? 1 : 0;
        if (p.id != embd_id || p.name == "token_embd.weight") {
            m->n_params_ += size_t(ggml_nelements(p.tensor));
        }
    }

    // Memory: the CPU's weights are the mapped file when there is one; every
    // other device (and the CPU without a mapping) gets a buffer of its own,
    // and so do the CPU's repacked matrices.
    for (size_t d = 0; d <= backends.size(); ++d) {
        ggml_context * ctx = m->contexts_[d];
        if (ctx == nullptr) {
            continue;
        }
        ggml_backend_buffer_t buf = nullptr;
        if (d == repack_slot) {
            buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, repack_buft);
            if (buf == nullptr) {
                *error = "not enough memory for the CPU's repacked weights";
                return nullptr;
            }
            m->buffers_.push_back(buf);
        } else if (int(d) == cpu && m->map_ != nullptr) {
            buf = ggml_backend_cpu_buffer_from_ptr(m->map_, m->map_size_);
            if (buf == nullptr) {
                *error = "cannot wrap the mapped file in a CPU buffer";
                return nullptr;
            }
            m->buffers_.push_back(buf);
            for (const Planned & p : planned) {
                if (p.device == cpu && !p.repack) {
                    auto * addr = static_cast<char *>(m->map_) + data_offset + gguf_get_tensor_offset(g, p.id);
                    if (ggml_backend_tensor_alloc(buf, p.tensor, addr) != GGML_STATUS_SUCCESS) {
                        *error = "cannot place tensor " + p.name + " in the mapped file";
                        return nullptr;
                    }
                }
            }
        } else {
            buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_dev_buffer_type(backends.device(d)));
            if (buf == nullptr) {
                char mib[32];
                std::snprintf(mib, sizeof mib, "%.1f", double(m->weight_bytes_[d]) / (1024.0 * 1024.0));
                *error = std::string("not enough memory on device ") + backends.name(d) + " for " + mib +
                         " MiB of weights";
                return nullptr;
            }
            m->buffers_.push_back(buf);
        }
        ggml_backend_buffer_set_usage(buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    }

    // Data. Mapped tensors are touched page by page so that the file is read
    // now, with progress shown, and not during the first token.
    size_t total = 0;
    for (const Planned & p : planned) {
        total += ggml_nbytes(p.tensor);
    }
    size_t done = 0;
    if (options.progress) {
        options.progress(0, total);
    }
    constexpr size_t     CHUNK = size_t(16) << 20;
    std::vector<uint8_t> staging;
    for (const Planned & p : planned) {
        const size_t   size = ggml_nbytes(p.tensor);
        const uint64_t src  = data_offset + gguf_get_tensor_offset(g, p.id);
        const bool     mapped_here = p.device == cpu && !p.repack && m->map_ != nullptr;
        for (size_t off = 0; off < size; off += CHUNK) {
            const size_t n = std::min(CHUNK, size - off);
            if (mapped_here) {
                const volatile uint8_t * bytes = static_cast<const uint8_t *>(m->map_) + src + off;
                uint8_t                  sink  = 0;
                for (size_t i = 0; i < n; i += 4096) {
                    sink ^= bytes[i];
                }
                (void) sink;
            } else if (m->map_ != nullptr) {
                ggml_backend_tensor_set(p.tensor, static_cast<const uint8_t *>(m->map_) + src + off, off, n);
            } else {
                staging.resize(std::max(staging.size(), n));
                errno = 0;
                if (!read_at(fd, staging.data(), n, src + off)) {
                    *error = path + ": cannot read the data of tensor " + p.name + ": " +
                             (errno != 0 ? std::strerror(errno) : "unexpected end of file");
                    return nullptr;
                }
                ggml_backend_tensor_set(p.tensor, staging.data(), off, n);
            }
            done += n;
            if (options.progress) {
                options.progress(done, total);
            }
        }
    }

    // Hand out the tensors.
    m->tok_embd_    = planned[i_tok_embd].tensor;
    m->output_norm_ = planned[i_output_norm].tensor;
    m->output_      = planned[i_output].tensor;
    m->layers_.resize(hp.n_layer);
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const size_t   f = layer_first[il];
        LayerWeights & l = m->layers_[il];
        l.attn_norm      = planned[f + 0].tensor;
        l.wq             = planned[f + 1].tensor;
        l.wk             = planned[f + 2].tensor;
        l.wv             = planned[f + 3].tensor;
        l.wo             = planned[f + 4].tensor;
        l.ffn_norm       = planned[f + 5].tensor;
        if (hp.n_expert == 0) {
            l.ffn_gate = planned[f + 6].tensor;
            l.ffn_up   = planned[f + 7].tensor;
            l.ffn_down = planned[f + 8].tensor;
        } else {
            l.ffn_gate_inp  = planned[f + 6].tensor;
            l.ffn_gate_exps = planned[f + 7].tensor;
            l.ffn_up_exps   = planned[f + 8].tensor;
            l.ffn_down_exps = planned[f + 9].tensor;
        }
    }
    return m;
}

bool Model::mapped_pages(size_t * resident, size_t * on_huge_pages) const {
    if (map_ == nullptr) {
        return false;
    }
    FILE * f = std::fopen("/proc/self/smaps", "r");
    if (f == nullptr) {
        return false;
    }
    // The mapping's header line starts with its address range; its fields
    // follow until the next header.
    const uintptr_t start = reinterpret_cast<uintptr_t>(map_);
    bool            in    = false;
    bool            found = false;
    size_t          rss = 0, pmd = 0;
    char            line[512];
    while (std::fgets(line, sizeof(line), f) != nullptr) {
        unsigned long lo = 0, hi = 0;
        char          dash = 0;
        if (std::sscanf(line, "%lx%c%lx", &lo, &dash, &hi) == 3 && dash == '-') {
            if (in) {
                break;
            }
            in = lo == start;
            continue;
        }
        unsigned long kb = 0;
        if (in && std::sscanf(line, "Rss: %lu kB", &kb) == 1) {
            rss   = size_t(kb) << 10;
            found = true;
        } else if (in && std::sscanf(line, "FilePmdMapped: %lu kB", &kb) == 1) {
            pmd = size_t(kb) << 10;
        }
    }
    std::fclose(f);
    if (found) {
        *resident      = rss;
        *on_huge_pages = pmd;
    }
    return found;
}

size_t Model::token_bytes() const {
    // Every weight, but one row of the token embeddings unless they are the
    // output matrix too.
    size_t bytes = std::accumulate(weight_bytes_.begin(), weight_bytes_.end(), size_t(0));
    if (output_ != tok_embd_) {
        bytes -= ggml_nbytes(tok_embd_) - tok_embd_->nb[1];
    }
    return bytes;
}

} // namespace loom_run
