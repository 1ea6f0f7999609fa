#pragma once

// Dense ids for the tensors of a graph, so that per-tensor state of the
// graph allocator lives in plain vectors instead of a hash map of structs.
//
// The numbering is a function of the graph alone (not of pointer values):
// node positions first, then leafs, then the sources of nodes that are in
// neither list, then the view sources of everything numbered so far. Two
// graphs built the same way get the same ids, which is what lets
// ggml_gallocr_alloc_graph recognise a graph it has a plan for.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ggml.h"

namespace loom::alloc {

class TensorIds {
  public:
    // Numbers every tensor the allocator may have to look at in graph.
    void build(const ggml_cgraph & graph);

    // The id of t, or -1 when t is not part of the numbered graph.
    int32_t find(const ggml_tensor * t) const;
    // The id of t, which must be part of the graph (an internal invariant).
    int32_t id(const ggml_tensor * t) const;

    size_t              size() const { return by_id_.size(); }
    const ggml_tensor * tensor(int32_t id) const { return by_id_[size_t(id)]; }
    ggml_tensor *       mutable_tensor(int32_t id) const { return const_cast<ggml_tensor *>(by_id_[size_t(id)]); }

  private:
    void    reset(size_t expected);
    int32_t add(const ggml_tensor * t);
    size_t  slot(const ggml_tensor * t) const;

    // Open addressing with linear probing; a power-of-two table kept at most
    // half full, so probes stay short. The vectors are reused across calls.
    std::vector<const ggml_tensor *> keys_;
    std::vector<int32_t>             values_;
    std::vector<const ggml_tensor *> by_id_;
    size_t                           mask_ = 0;
};

} // namespace loom::alloc
