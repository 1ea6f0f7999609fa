#pragma once

// An evaluation context for a Model: the KV cache (each layer's in a buffer
// of the device that runs the layer), the graphs of the forward pass built
// with the ggml API, and the scheduler that places and runs them.
//
// Forward pass of a batch of n tokens at positions [n_past, n_past + n):
//   x = token_embd[tokens]
//   per layer: h = rms_norm(x) * attn_norm
//              q, k, v = Wq h, Wk h, Wv h; q, k rotated (RoPE, adjacent pairs)
//              k, v written into the cache rows of their positions (set_rows)
//              a = softmax(q k^T / sqrt(head_dim) + causal mask) v over the
//                  cache's first n_kv rows, query heads sharing KV heads
//              x = x + Wo a
//              h = rms_norm(x) * ffn_norm
//              x = x + W_down (silu(W_gate h) * W_up h)
//   logits = W_out (rms_norm(x_last) * output_norm), for the last token only
// n_kv is n_past + n rounded up to a multiple of 256 (at most the context
// size); the mask hides every row beyond the batch's positions. Rounding
// keeps the graphs of consecutive steps identical, so the scheduler reuses
// its placement instead of planning each token afresh.
//
// Not thread-safe: one thread drives a session.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml.h"

namespace loom_run {

class Backends;
class Model;

struct SessionOptions {
    uint32_t    n_ctx      = 512; // tokens the cache holds
    uint32_t    n_batch    = 512; // tokens per graph; longer inputs go in several
    ggml_type   type_k     = GGML_TYPE_F32;
    ggml_type   type_v     = GGML_TYPE_F32;
    bool        flash_attn = false; // ggml_flash_attn_ext instead of mul_mat + soft_max_ext
    std::string trace_path;         // scheduler trace (loom_sched_set_trace); empty: none
};

class Session {
  public:
    // Allocates the KV cache and the scheduler and plans the compute memory
    // of the largest batch. Returns NULL with *error set when an option does
    // not suit the model or memory runs out. model and backends must outlive
    // the session.
    static std::unique_ptr<Session> create(const Model & model, Backends & backends, const SessionOptions & options,
                                           std::string * error);
    ~Session();
    Session(const Session &)             = delete;
    Session & operator=(const Session &) = delete;

    // Evaluates tokens at the positions after those already cached, adds
    // them to the cache and puts the logits of the last one in *logits
    // (n_vocab values). Returns false with *error set, the cache unchanged,
    // when tokens is empty, would not fit the context, holds an id outside
    // the vocabulary, or the computation fails.
    bool eval(std::span<const int32_t> tokens, std::vector<float> * logits, std::string * error);

    // Forgets the cached tokens.
    void clear() { n_past_ = 0; }

    uint32_t n_past() const { return n_past_; }
    uint32_t n_ctx() const { return options_.n_ctx; }

    // Bytes of KV cache and of compute buffer on a device (index into Backends).
    size_t kv_bytes(size_t device) const;
    size_t compute_bytes(size_t device) const;
    // Splits of the graph computed last.
    int    n_splits() const;

    ggml_backend_sched_t sched() const { return sched_; }
    // Writes the trace file now (it is also written when the session ends).
    bool                 write_trace();

  private:
    struct Inputs {
        ggml_tensor * tokens = nullptr; // I32 [n]
        ggml_tensor * pos    = nullptr; // I32 [n]
        ggml_tensor * k_idx  = nullptr; // I64 [n]: cache rows of the batch
        ggml_tensor * v_idx  = nullptr; // I64 [n * n_embd_kv]: cache elements (transposed V only)
        ggml_tensor * mask   = nullptr; // F32 (F16 with flash attention) [n_kv, n]
        ggml_tensor * logits = nullptr; // F32 [n_vocab, 1]
    };

    Session(const Model & model, Backends & backends, const SessionOptions & options);
    ggml_cgraph * build(uint32_t n_tokens, uint32_t n_kv, Inputs * in);
    uint32_t      kv_length(uint32_t n_end) const;
    bool          eval_batch(std::span<const int32_t> tokens, std::vector<float> * logits, std::string * error);

    const Model &  model_;
    Backends &     backends_;
    SessionOptions options_;
    size_t         graph_size_ = 0;

    std::vector<ggml_context *>        kv_contexts_; // one per device
    std::vector<ggml_backend_buffer_t> kv_buffers_;
    std::vector<size_t>                kv_bytes_;
    std::vector<ggml_tensor *>         k_;           // per layer [n_embd_kv, n_ctx]
    std::vector<ggml_tensor *>         v_;           // per layer [n_ctx, n_embd_kv], or as k_ with flash attention

    std::vector<uint8_t> graph_meta_;          // arena for the graph's tensor metadata
    ggml_context *       graph_ctx_ = nullptr; // the current graph's tensors
    ggml_backend_sched_t sched_  = nullptr;
    uint32_t             n_past_ = 0;

    // Host staging of the inputs.
    std::vector<int32_t>     pos_data_;
    std::vector<int64_t>     k_idx_data_, v_idx_data_;
    std::vector<float>       mask_f32_;
    std::vector<ggml_fp16_t> mask_f16_;
};

} // namespace loom_run
