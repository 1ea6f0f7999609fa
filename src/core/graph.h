#pragma once

// The computation graph: nodes in execution order, leafs (constants and
// inputs), and a set of visited tensors. Its arrays live in the context's
// arena after the struct, as ggml lays them out.

#include <cstddef>
#include <cstdint>

#include "ggml.h"

namespace loom {

// Open-addressing set of tensor pointers with a fixed capacity.
struct TensorHashSet {
    size_t                size = 0;
    uint32_t *            used = nullptr; // bitset
    const ggml_tensor **  keys = nullptr;

    static constexpr size_t npos = SIZE_MAX;

    // Slot holding t, or the free slot where it would go; npos when full.
    size_t find(const ggml_tensor * t) const;
    bool   contains(const ggml_tensor * t) const {
        const size_t i = find(t);
        return i != npos && is_used(i);
    }
    bool is_used(size_t i) const { return (used[i >> 5] >> (i & 31)) & 1u; }
    // Inserts t; returns false when it was already present.
    bool insert(const ggml_tensor * t);
    void clear();

    static size_t capacity_for(size_t min_size); // a prime >= min_size
    static size_t bitset_words(size_t n) { return (n + 31) / 32; }
};

} // namespace loom

struct ggml_cgraph {
    int size    = 0; // capacity of nodes and of leafs
    int n_nodes = 0;
    int n_leafs = 0;

    ggml_tensor ** nodes     = nullptr;
    ggml_tensor ** grads     = nullptr; // by hash slot; NULL unless made with grads
    ggml_tensor ** grad_accs = nullptr; // by hash slot: the gradient accumulators
    ggml_tensor ** leafs     = nullptr;
    int32_t *      use_counts = nullptr;

    loom::TensorHashSet visited_hash_set;

    int      order = 0;
    uint64_t uid   = 0;
};

// The nodes [i0, i1) of cgraph as a graph that shares its arrays (no leafs).
// As in ggml, this is internal: the graph type is opaque to users.
extern "C" ggml_cgraph ggml_graph_view(ggml_cgraph * cgraph, int i0, int i1);
