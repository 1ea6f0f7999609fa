#pragma once

// --split-mode tensor: the split states of a llama model's tensors over the
// members of a meta device (ggml_backend_meta_device). Attention is split by
// heads (the rows of Q, K and V and the KV cache by head, the columns of the
// output projection, whose products are then summed over the members), the
// feed-forward network by its hidden rows (gate and up by rows, down by
// columns); norms, embeddings, the output matrix and every input are mirrored.

#include <cstddef>
#include <cstdint>

#include "ggml-backend.h"
#include "model.h"

namespace loom_run {

struct TensorSplit {
    size_t   n_members = 0;
    uint32_t head_dim  = 0;
    uint32_t n_head    = 0;
    uint32_t n_head_kv = 0;
    uint32_t n_ff      = 0;

    void set_hparams(const HParams & hp) {
        head_dim  = hp.head_dim;
        n_head    = hp.n_head;
        n_head_kv = hp.n_head_kv;
        n_ff      = hp.n_ff;
    }
};

// The split-state callback; userdata is a TensorSplit, filled before any
// weight is placed.
ggml_backend_meta_split_state tensor_split_state(const ggml_tensor * tensor, void * userdata);

} // namespace loom_run
