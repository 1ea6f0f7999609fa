#pragma once

// A llama-architecture model read from a GGUF file: hyperparameters from
// the llama.* keys, weights in backend buffers of the devices that run them.
//
// The file is untrusted: every key, tensor name, type and shape is checked
// before use, and a file that does not describe a usable model gives an
// error message, never an abort.
//
// Placement: token_embd on the CPU (its rows are gathered there); layer l on
// layer_device[l]; output_norm and output on the device of the last layer
// (the output matrix is loaded a second time there when it is tied to
// token_embd and that device is not the CPU). Weight buffers are marked
// GGML_BACKEND_BUFFER_USAGE_WEIGHTS, so the scheduler runs each operation
// where its weights are. With use_mmap, the CPU's weights are the pages of
// the mapped file (ggml_backend_cpu_buffer_from_ptr), not a copy. With
// use_repack, the CPU's Q4_0 and Q8_0 matrices go instead into the CPU device's extra
// buffer type CPU_REPACK where it has one: a layout of the CPU kernels' own,
// which products read faster.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "ggml-backend.h"
#include "ggml.h"

struct gguf_context;

namespace loom_run {

class Backends;

struct HParams {
    uint32_t n_ctx_train = 0; // context_length
    uint32_t n_embd      = 0; // embedding_length
    uint32_t n_layer     = 0; // block_count
    uint32_t n_ff        = 0; // feed_forward_length
    uint32_t n_head      = 0; // attention.head_count
    uint32_t n_head_kv   = 0; // attention.head_count_kv (default n_head)
    uint32_t head_dim    = 0; // attention.key_length (default n_embd / n_head)
    uint32_t n_rot       = 0; // rope.dimension_count (default head_dim)
    uint32_t n_vocab     = 0; // rows of token_embd
    float    rms_eps     = 0; // attention.layer_norm_rms_epsilon
    float    rope_base   = 10000.0f;
    float    rope_scale  = 1.0f; // 1 / rope.scaling.factor for linear scaling
    uint32_t n_expert    = 0; // expert_count (0: dense feed-forward layers)
    uint32_t n_expert_used = 0; // expert_used_count

    uint32_t n_embd_q() const { return head_dim * n_head; }
    uint32_t n_embd_kv() const { return head_dim * n_head_kv; }
};

struct LayerWeights {
    ggml_tensor * attn_norm = nullptr;
    ggml_tensor * wq        = nullptr;
    ggml_tensor * wk        = nullptr;
    ggml_tensor * wv        = nullptr;
    ggml_tensor * wo        = nullptr;
    ggml_tensor * ffn_norm  = nullptr;
    ggml_tensor * ffn_gate  = nullptr;
    ggml_tensor * ffn_up    = nullptr;
    ggml_tensor * ffn_down  = nullptr;
    // A mixture of experts instead of ffn_gate/up/down (HParams::n_expert
    // > 0): the router and the experts' matrices, one per expert along ne2.
    ggml_tensor * ffn_gate_inp  = nullptr;
    ggml_tensor * ffn_gate_exps = nullptr;
    ggml_tensor * ffn_up_exps   = nullptr;
    ggml_tensor * ffn_down_exps = nullptr;
};

struct LoadOptions {
    bool use_mmap   = true;
    bool use_repack = true;
    // The device index of each layer (see assign_layers); called once the
    // layer count is known. Empty function: every layer on the CPU.
    std::function<bool(uint32_t n_layer, std::vector<int> * layer_device, std::string * error)> place_layers;
    // -ot: the device index of each weight whose name the expression finds,
    // the first match winning, instead of its layer's device.
    std::vector<std::pair<std::regex, int>> tensor_overrides;
    // Called with the hyperparameters once they are read, before any weight
    // is placed (the split states of --split-mode tensor need them).
    std::function<void(const HParams & hparams)> on_hparams;
    // Progress of reading weights: bytes done of bytes in all.
    std::function<void(size_t done, size_t total)> progress;
};

class Model {
  public:
    // Reads the file at path and loads its weights onto backends' devices.
    // Returns NULL with *error set when the file cannot be read, is not a
    // llama model, has inconsistent hyperparameters or tensors, or device
    // memory runs out. backends must outlive the model.
    static std::unique_ptr<Model> load(const std::string & path, const Backends & backends,
                                       const LoadOptions & options, std::string * error);
    ~Model();
    Model(const Model &)             = delete;
    Model & operator=(const Model &) = delete;

    const HParams &      hparams() const { return hp_; }
    // The file's metadata, for the tokenizer; lives as long as the model.
    const gguf_context * gguf() const { return gguf_; }
    const std::string &  name() const { return name_; }

    ggml_tensor *                      tok_embd() const { return tok_embd_; }
    ggml_tensor *                      output_norm() const { return output_norm_; }
    ggml_tensor *                      output() const { return output_; }
    const std::vector<LayerWeights> &  layers() const { return layers_; }
    // Device index (into the Backends) of a layer and of the output.
    int                                layer_device(uint32_t il) const { return layer_device_.at(il); }
    int                                output_device() const { return output_device_; }
    const std::vector<int> &           layer_devices() const { return layer_device_; }

    // Bytes of weights held on a device (mapped ones included).
    size_t weight_bytes(size_t device) const { return device < weight_bytes_.size() ? weight_bytes_[device] : 0; }
    size_t n_params() const { return n_params_; }
    // Bytes of weights one generated token reads (every matrix, one row of
    // the token embeddings): the memory traffic generation is bound by.
    size_t token_bytes() const;
    bool   mapped() const { return map_ != nullptr; }
    // The mapped file's pages the process has in memory, and how many of
    // them are 2 MiB pages (Linux's smaps: Rss and FilePmdMapped), in bytes;
    // false when the weights are not mapped or the system does not say.
    // Generation can read the weights faster on 2 MiB pages (1-15% in
    // alternated runs on a VM); a file the page cache already holds in 4 KiB
    // pages keeps them.
    bool mapped_pages(size_t * resident, size_t * on_huge_pages) const;
    // Matrices in the CPU's CPU_REPACK buffer (none without its kernels or with --no-repack).
    size_t n_repacked() const { return n_repacked_; }
    // Weights that --override-tensor moved off their layer's device.
    size_t n_overridden() const { return n_overridden_; }

  private:
    Model() = default;

    HParams                     hp_;
    std::string                 name_;
    gguf_context *              gguf_ = nullptr;
    std::vector<ggml_context *> contexts_;  // tensor metadata, one per device
    std::vector<ggml_backend_buffer_t> buffers_;
    void *                      map_      = nullptr;
    size_t                      map_size_ = 0;

    ggml_tensor *             tok_embd_    = nullptr;
    ggml_tensor *             output_norm_ = nullptr;
    ggml_tensor *             output_      = nullptr;
    std::vector<LayerWeights> layers_;
    std::vector<int>          layer_device_;
    int                       output_device_ = 0;
    std::vector<size_t>       weight_bytes_;
    size_t                    n_params_ = 0;
    size_t                    n_repacked_ = 0;
    size_t                    n_overridden_ = 0;
};

} // namespace loom_run
