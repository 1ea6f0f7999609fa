#include "model.h"

#include <cmath>
#include <cstring>
#include <random>

#include "ggml-alloc.h"
#include "gguf.h"

namespace loom_train {

namespace {

constexpr int64_t kInputs = 2;

const char * const kArch = "loom-mlp";

std::string weight_name(size_t i) {
    return "fc" + std::to_string(i + 1) + ".weight";
}

std::string bias_name(size_t i) {
    return "fc" + std::to_string(i + 1) + ".bias";
}

// Reads a key of one type; false (with *error) when absent or of another type.
template <typename T> bool read_key(const gguf_context * g, const char * key, gguf_type type, T * out,
                                    std::string * error) {
    const int64_t id = gguf_find_key(g, key);
    if (id < 0) {
        *error = std::string("key ") + key + " is missing";
        return false;
    }
    if (gguf_get_kv_type(g, id) != type) {
        *error = std::string("key ") + key + " is " + gguf_type_name(gguf_get_kv_type(g, id)) + ", not " +
                 gguf_type_name(type);
        return false;
    }
    if constexpr (std::is_same_v<T, std::string>) {
        *out = gguf_get_val_str(g, id);
    } else if constexpr (std::is_same_v<T, uint32_t>) {
        *out = gguf_get_val_u32(g, id);
    } else if constexpr (std::is_same_v<T, int32_t>) {
        *out = gguf_get_val_i32(g, id);
    } else if constexpr (std::is_same_v<T, int64_t>) {
        *out = gguf_get_val_i64(g, id);
    } else if constexpr (std::is_same_v<T, float>) {
        *out = gguf_get_val_f32(g, id);
    } else {
        static_assert(std::is_same_v<T, double>);
        *out = gguf_get_val_f64(g, id);
    }
    return true;
}

bool read_shape(const gguf_context * g, ModelShape * shape, std::string * error) {
    std::string arch;
    if (!read_key(g, "general.architecture", GGUF_TYPE_STRING, &arch, error)) return false;
    if (arch != kArch) {
        *error = "general.architecture is '" + arch + "', not '" + kArch + "'";
        return false;
    }
    uint32_t hidden = 0, layers = 0, classes = 0;
    if (!read_key(g, "loom-mlp.hidden_size", GGUF_TYPE_UINT32, &hidden, error) ||
        !read_key(g, "loom-mlp.hidden_layers", GGUF_TYPE_UINT32, &layers, error) ||
        !read_key(g, "loom-mlp.classes", GGUF_TYPE_UINT32, &classes, error)) {
        return false;
    }
    // The limits of the command line, so that a file cannot ask for more.
    if (hidden < 1 || hidden > 65536 || layers < 1 || layers > 64 || classes < 2 || classes > 64) {
        *error = "the model's shape (hidden_size " + std::to_string(hidden) + ", hidden_layers " +
                 std::to_string(layers) + ", classes " + std::to_string(classes) + ") is out of range";
        return false;
    }
    shape->hidden  = int(hidden);
    shape->layers  = int(layers);
    shape->classes = int(classes);
    return true;
}

bool read_info(const gguf_context * g, TrainInfo * info, std::string * error) {
    if (!read_key(g, "train.seed", GGUF_TYPE_UINT32, &info->seed, error) ||
        !read_key(g, "train.points", GGUF_TYPE_INT64, &info->points, error) ||
        !read_key(g, "train.batch", GGUF_TYPE_INT64, &info->batch, error) ||
        !read_key(g, "train.val_split", GGUF_TYPE_FLOAT32, &info->val_split, error) ||
        !read_key(g, "train.epochs", GGUF_TYPE_INT32, &info->epochs, error) ||
        !read_key(g, "train.learning_rate", GGUF_TYPE_FLOAT32, &info->lr, error) ||
        !read_key(g, "train.optimizer", GGUF_TYPE_STRING, &info->optimizer, error) ||
        !read_key(g, "train.train_loss", GGUF_TYPE_FLOAT64, &info->train_loss, error) ||
        !read_key(g, "train.train_accuracy", GGUF_TYPE_FLOAT64, &info->train_accuracy, error) ||
        !read_key(g, "train.val_loss", GGUF_TYPE_FLOAT64, &info->val_loss, error) ||
        !read_key(g, "train.val_accuracy", GGUF_TYPE_FLOAT64, &info->val_accuracy, error)) {
        return false;
    }
    if (info->points < 1 || info->points > (int64_t(1) << 24) || info->batch < 1 || info->batch > (int64_t(1) << 20) ||
        !(info->val_split >= 0.0f && info->val_split < 1.0f)) {
        *error = "train.points, train.batch or train.val_split is out of range";
        return false;
    }
    return true;
}

} // namespace

std::unique_ptr<Mlp> Mlp::create(const ModelShape & shape, ggml_backend_t backend, std::string * error) {
    std::unique_ptr<Mlp> m(new Mlp);
    m->shape_            = shape;
    const size_t n_layer = size_t(shape.layers) + 1;
    ggml_init_params p   = {2 * n_layer * ggml_tensor_overhead(), nullptr, true};
    m->ctx_              = ggml_init(p);
    if (m->ctx_ == nullptr) {
        *error = "cannot create the weights' context";
        return nullptr;
    }
    for (size_t i = 0; i < n_layer; ++i) {
        const int64_t n_in  = i == 0 ? kInputs : shape.hidden;
        const int64_t n_out = i + 1 == n_layer ? shape.classes : shape.hidden;
        ggml_tensor * w     = ggml_new_tensor_2d(m->ctx_, GGML_TYPE_F32, n_in, n_out);
        ggml_tensor * b     = ggml_new_tensor_1d(m->ctx_, GGML_TYPE_F32, n_out);
        ggml_set_name(w, weight_name(i).c_str());
        ggml_set_name(b, bias_name(i).c_str());
        m->weights_.push_back(w);
        m->biases_.push_back(b);
    }
    m->buffer_ = ggml_backend_alloc_ctx_tensors(m->ctx_, backend);
    if (m->buffer_ == nullptr) {
        *error = std::string("cannot allocate the weights on ") + ggml_backend_name(backend);
        return nullptr;
    }
    ggml_backend_buffer_set_usage(m->buffer_, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    return m;
}

Mlp::~Mlp() {
    ggml_backend_buffer_free(buffer_);
    ggml_free(ctx_);
}

int64_t Mlp::n_params() const {
    int64_t n = 0;
    for (size_t i = 0; i < weights_.size(); ++i) {
        n += ggml_nelements(weights_[i]) + ggml_nelements(biases_[i]);
    }
    return n;
}

void Mlp::init_random(uint32_t seed) {
    // mt19937's numbers are fixed by the standard; the conversion to floats
    // is ours, so every standard library draws the same weights.
    std::mt19937 rng(seed ^ 0x5eed5eedu);
    for (size_t i = 0; i < weights_.size(); ++i) {
        const float        scale = 1.0f / std::sqrt(float(weights_[i]->ne[0]));
        std::vector<float> v(size_t(ggml_nelements(weights_[i])));
        for (float & e : v) {
            e = scale * (float(rng() >> 8) * (2.0f / 16777216.0f) - 1.0f);
        }
        ggml_backend_tensor_set(weights_[i], v.data(), 0, ggml_nbytes(weights_[i]));
        ggml_backend_tensor_memset(biases_[i], 0, 0, ggml_nbytes(biases_[i]));
    }
}

void Mlp::set_params() {
    for (size_t i = 0; i < weights_.size(); ++i) {
        ggml_set_param(weights_[i]);
        ggml_set_param(biases_[i]);
    }
}

ggml_tensor * Mlp::forward(ggml_context * ctx, ggml_tensor * x) const {
    ggml_tensor * h = x;
    for (size_t i = 0; i < weights_.size(); ++i) {
        h = ggml_add(ctx, ggml_mul_mat(ctx, weights_[i], h), biases_[i]);
        if (i + 1 < weights_.size()) {
            h = ggml_relu(ctx, h);
        }
    }
    return h;
}

bool Mlp::save(const std::string & path, const TrainInfo & info, std::string * error) const {
    gguf_context * g = gguf_init_empty();
    gguf_set_val_str(g, "general.architecture", kArch);
    gguf_set_val_str(g, "general.name", "spirals MLP trained by loom-train");
    gguf_set_val_u32(g, "loom-mlp.hidden_size", uint32_t(shape_.hidden));
    gguf_set_val_u32(g, "loom-mlp.hidden_layers", uint32_t(shape_.layers));
    gguf_set_val_u32(g, "loom-mlp.classes", uint32_t(shape_.classes));
    gguf_set_val_u32(g, "train.seed", info.seed);
    gguf_set_val_i64(g, "train.points", info.points);
    gguf_set_val_i64(g, "train.batch", info.batch);
    gguf_set_val_f32(g, "train.val_split", info.val_split);
    gguf_set_val_i32(g, "train.epochs", info.epochs);
    gguf_set_val_f32(g, "train.learning_rate", info.lr);
    gguf_set_val_str(g, "train.optimizer", info.optimizer.c_str());
    gguf_set_val_f64(g, "train.train_loss", info.train_loss);
    gguf_set_val_f64(g, "train.train_accuracy", info.train_accuracy);
    gguf_set_val_f64(g, "train.val_loss", info.val_loss);
    gguf_set_val_f64(g, "train.val_accuracy", info.val_accuracy);

    // gguf_add_tensor takes tensors in host memory: copy the weights out of
    // their buffer into a context that holds their data.
    ggml_init_params p    = {ggml_backend_buffer_get_size(buffer_) + 2 * weights_.size() * (ggml_tensor_overhead() + 64),
                             nullptr, false};
    ggml_context *   host = ggml_init(p);
    if (host == nullptr) {
        gguf_free(g);
        *error = "out of memory";
        return false;
    }
    for (size_t i = 0; i < weights_.size(); ++i) {
        for (const ggml_tensor * t : {weights_[i], biases_[i]}) {
            ggml_tensor * c = ggml_dup_tensor(host, t);
            ggml_set_name(c, t->name);
            ggml_backend_tensor_get(t, c->data, 0, ggml_nbytes(t));
            gguf_add_tensor(g, c);
        }
    }
    const bool ok = gguf_write_to_file(g, path.c_str(), false);
    gguf_free(g);
    ggml_free(host);
    if (!ok) {
        *error = "cannot write " + path;
    }
    return ok;
}

std::unique_ptr<Mlp> Mlp::load(const std::string & path, ggml_backend_t backend, TrainInfo * info,
                               std::string * error) {
    ggml_context *   data = nullptr;
    gguf_init_params p    = {false, &data};
    gguf_context *   g    = gguf_init_from_file(path.c_str(), p);
    if (g == nullptr) {
        *error = path + " is not a readable GGUF file";
        return nullptr;
    }
    auto done = [&](std::unique_ptr<Mlp> m, const std::string & message) {
        if (!message.empty()) {
            *error = path + ": " + message;
        }
        gguf_free(g);
        ggml_free(data);
        return m;
    };
    ModelShape shape;
    std::string why;
    if (!read_shape(g, &shape, &why) || !read_info(g, info, &why)) {
        return done(nullptr, why);
    }
    const int64_t n_expected = 2 * (int64_t(shape.layers) + 1);
    if (gguf_get_n_tensors(g) != n_expected) {
        return done(nullptr, "has " + std::to_string(gguf_get_n_tensors(g)) + " tensors, the model's shape needs " +
                                 std::to_string(n_expected));
    }
    std::unique_ptr<Mlp> m = create(shape, backend, error);
    if (m == nullptr) {
        return done(nullptr, *error);
    }
    for (size_t i = 0; i < m->weights_.size(); ++i) {
        for (ggml_tensor * t : {m->weights_[i], m->biases_[i]}) {
            const ggml_tensor * s = ggml_get_tensor(data, t->name);
            if (s == nullptr) {
                return done(nullptr, std::string("tensor ") + t->name + " is missing");
            }
            if (s->type != GGML_TYPE_F32 || !ggml_are_same_shape(s, t)) {
                return done(nullptr, std::string("tensor ") + t->name + " is " + ggml_type_name(s->type) + " [" +
                                         std::to_string(s->ne[0]) + ", " + std::to_string(s->ne[1]) + ", " +
                                         std::to_string(s->ne[2]) + ", " + std::to_string(s->ne[3]) +
                                         "], the model needs f32 [" + std::to_string(t->ne[0]) + ", " +
                                         std::to_string(t->ne[1]) + ", 1, 1]");
            }
            ggml_backend_tensor_set(t, s->data, 0, ggml_nbytes(t));
        }
    }
    return done(std::move(m), "");
}

} // namespace loom_train
