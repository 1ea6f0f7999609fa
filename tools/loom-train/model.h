#pragma once

// The model loom-train trains: an MLP from the 2 coordinates of a point
// through ReLU hidden layers to one logit per class, its weights in a
// backend buffer, written to and read from GGUF files.
//
// GGUF layout: general.architecture = "loom-mlp"; loom-mlp.hidden_size,
// loom-mlp.hidden_layers, loom-mlp.classes (u32); the data and training
// settings under train.* (see TrainInfo); tensors fc{i}.weight [in, out] and
// fc{i}.bias [out], F32, for i = 1 .. hidden_layers + 1.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml.h"

namespace loom_train {

struct ModelShape {
    int hidden  = 32;
    int layers  = 2;
    int classes = 3;
};

// What a model file records besides its weights: how its data was drawn
// (so that --eval draws the same points) and how it was trained.
struct TrainInfo {
    uint32_t    seed       = 0;
    int64_t     points     = 0;
    int64_t     batch      = 0;
    float       val_split  = 0.0f;
    int32_t     epochs     = 0;
    float       lr         = 0.0f;
    std::string optimizer;
    // Of the trained weights, over the training and the validation batches.
    double      train_loss = 0.0, train_accuracy = 0.0;
    double      val_loss   = 0.0, val_accuracy   = 0.0;
};

class Mlp {
  public:
    // Weights of that shape in a buffer of `backend`'s default buffer type.
    // NULL with *error set when the buffer cannot be allocated.
    static std::unique_ptr<Mlp> create(const ModelShape & shape, ggml_backend_t backend, std::string * error);
    // A model written by save(). NULL with *error set when the file is not
    // GGUF, lacks a key, or its tensors are not those of the shape it states.
    static std::unique_ptr<Mlp> load(const std::string & path, ggml_backend_t backend, TrainInfo * info,
                                     std::string * error);
    ~Mlp();
    Mlp(const Mlp &)             = delete;
    Mlp & operator=(const Mlp &) = delete;

    // Uniform weights in +-1/sqrt(fan in), zero biases, drawn from seed.
    void init_random(uint32_t seed);
    // Marks the weights as trainable (ggml_set_param).
    void set_params();
    // The logits [classes, n] of x [2, n], built in ctx.
    ggml_tensor * forward(ggml_context * ctx, ggml_tensor * x) const;
    // Writes the weights and info to path. False with *error set on failure.
    bool save(const std::string & path, const TrainInfo & info, std::string * error) const;

    const ModelShape & shape() const { return shape_; }
    int64_t            n_params() const;

  private:
    Mlp() = default;

    ModelShape                 shape_;
    ggml_context *             ctx_    = nullptr;
    ggml_backend_buffer_t      buffer_ = nullptr;
    std::vector<ggml_tensor *> weights_, biases_;
};

} // namespace loom_train
