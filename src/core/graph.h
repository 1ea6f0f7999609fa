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
    // Inserts t when absent; returns its slot either way.
    size_t insert_slot(const ggml_tensor * t, bool * inserted);
    void clear();

    static size_t capacity_for(size_t min_size); // a prime >= min_size
    static size_t bitset_words(size_t n) { return (n + 31) / 32; }
};

} // namespace loom

// Laid out as ggml's (ggml-impl.h), which ggml's backends read directly:
// use_counts[i] is how many times the nodes of the graph name the tensor in
// hash slot i as a source (ggml_node_get_use_count, ggml_can_fuse); uid,
// when not 0, identifies a graph whose nodes have not changed since a
// backend last saw that uid (the scheduler gives its splits one each).
struct ggml_cgraph {
    int size    = 0; // capacity of nodes and of leafs; 0 for a view
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

// The nodes [i0, i1) of cgraph as a graph that shares its arrays: its hash
// set and use counts are the parent's (so a node used after i1 still shows
// that use), it has no leafs, no gradients and uid 0, and it cannot grow.
// As in ggml, this is internal: the graph type is opaque to users.
extern "C" ggml_cgraph ggml_graph_view(ggml_cgraph * cgraph, int i0, int i1);

// A new graph identity, never 0 (ggml's ggml_graph_next_uid). Thread-safe.
extern "C" uint64_t ggml_graph_next_uid(void);
