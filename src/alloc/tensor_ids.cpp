#include "tensor_ids.h"

#include <algorithm>

#include "core/common.h"
#include "core/graph.h"

namespace loom::alloc {

void TensorIds::reset(size_t expected) {
    size_t cap = 16;
    while (cap < expected * 2) {
        cap *= 2;
    }
    if (keys_.size() != cap) {
        keys_.assign(cap, nullptr);
        values_.assign(cap, -1);
    } else {
        std::fill(keys_.begin(), keys_.end(), nullptr);
    }
    mask_ = cap - 1;
    by_id_.clear();
}

size_t TensorIds::slot(const ggml_tensor * t) const {
    // Tensors are arena objects a few hundred bytes apart: drop the low bits
    // that are equal for all of them, then mix so neighbours spread out.
    uint64_t h = uint64_t(reinterpret_cast<uintptr_t>(t)) >> 4;
    h *= 0x9E3779B97F4A7C15ull;
    size_t i = size_t(h >> 17) & mask_;
    while (keys_[i] != nullptr && keys_[i] != t) {
        i = (i + 1) & mask_;
    }
    return i;
}

int32_t TensorIds::add(const ggml_tensor * t) {
    const size_t i = slot(t);
    if (keys_[i] == t) {
        return values_[i];
    }
    if ((by_id_.size() + 1) * 2 > keys_.size()) {
        // More tensors than the estimate (views of views of outsiders):
        // rehash into a table twice as large.
        std::vector<const ggml_tensor *> old = by_id_;
        reset(keys_.size());
        for (const ggml_tensor * o : old) {
            add(o);
        }
        return add(t);
    }
    keys_[i]   = t;
    values_[i] = int32_t(by_id_.size());
    by_id_.push_back(t);
    return values_[i];
}

int32_t TensorIds::find(const ggml_tensor * t) const {
    if (t == nullptr || keys_.empty()) {
        return -1;
    }
    const size_t i = slot(t);
    return keys_[i] == t ? values_[i] : -1;
}

int32_t TensorIds::id(const ggml_tensor * t) const {
    const int32_t r = find(t);
    LOOM_ASSERT(r >= 0);
    return r;
}

void TensorIds::build(const ggml_cgraph & graph) {
    // Nodes usually have one or two sources outside the node list (leafs),
    // so nodes + leafs is a good first estimate.
    reset(size_t(graph.n_nodes) + size_t(graph.n_leafs) + 16);
    for (int i = 0; i < graph.n_nodes; ++i) {
        add(graph.nodes[i]);
    }
    for (int i = 0; i < graph.n_leafs; ++i) {
        add(graph.leafs[i]);
    }
    for (int i = 0; i < graph.n_nodes; ++i) {
        for (const ggml_tensor * s : graph.nodes[i]->src) {
            if (s != nullptr) {
                add(s);
            }
        }
    }
    // A view source may itself be new; the list grows while it is walked.
    for (size_t k = 0; k < by_id_.size(); ++k) {
        if (by_id_[k]->view_src != nullptr) {
            add(by_id_[k]->view_src);
        }
    }
}

} // namespace loom::alloc
