// Shadow tensors and graphs: what the plugin computes on instead of loom's.

#include "shadow.h"

#include <algorithm>
#include <cstdio>

#include "core/graph.h"
#include "hosted.h"

namespace loom::ggml_plugin {

namespace {

// Points copy at the plugin's side of what t refers to; false when t lies
// in a buffer that is not the plugin's.
bool translate(ggml_tensor & copy, const ggml_tensor * t, const HostedReg & reg) {
    ggml_abi::Buffer * foreign = foreign_buffer(t->buffer, reg);
    copy.buffer                = reinterpret_cast<ggml_backend_buffer *>(foreign);
    copy.extra                 = foreign != nullptr ? t->extra : nullptr;
    std::fill(std::begin(copy.src), std::end(copy.src), nullptr);
    copy.view_src = nullptr;
    return t->buffer == nullptr || foreign != nullptr;
}

} // namespace

TensorShadow::TensorShadow(const ggml_tensor * t, const HostedReg & reg, bool with_srcs) {
    ggml_tensor * s = add(t, reg);
    if (with_srcs) {
        for (int i = 0; i < GGML_MAX_SRC; ++i) {
            if (t->src[i] != nullptr) {
                s->src[i] = add(t->src[i], reg);
            }
        }
    }
}

ggml_tensor * TensorShadow::add(const ggml_tensor * t, const HostedReg & reg) {
    ggml_tensor & s = tensors_[n_++];
    s               = *t;
    translate(s, t, reg);
    if (t->view_src != nullptr) {
        ggml_tensor & v = tensors_[n_++];
        v               = *t->view_src;
        translate(v, t->view_src, reg);
        s.view_src = &v;
    }
    return &s;
}

// Note [Use counts of shadow graphs]
// ggml's graph carries, per hash slot, how many nodes of the graph use a
// tensor as a source; backends fuse a node into the next one only when that
// next node is its only user (ggml_can_fuse). A whole graph's counts are
// counted here over its nodes, as ggml_build_forward_expand counts them. A
// graph view (no hash set of its own: ggml_graph_view's slice of a bigger
// graph) does not show the users after its last node, so every node of one
// gets one use more than the slice shows: it may be read later, and no
// backend fuses it away.

bool ShadowGraph::build(const ggml_cgraph * graph, const HostedReg & reg, std::string * why) {
    reg_ = &reg;
    error_.clear();
    const int n_nodes = graph->n_nodes;
    const int n_leafs = graph->n_leafs;
    nodes_.resize(n_nodes);
    leafs_.resize(n_leafs);
    // Shadows of the graph's own tensors first, so that those come in with
    // their sources; tensors outside it come in with none.
    for (int i = 0; i < n_nodes; ++i) {
        nodes_[i] = shadow(graph->nodes[i]);
    }
    for (int i = 0; i < n_leafs; ++i) {
        leafs_[i] = shadow(graph->leafs[i]);
    }
    for (int i = 0; i < n_nodes; ++i) {
        for (int j = 0; j < GGML_MAX_SRC; ++j) {
            nodes_[i]->src[j] = shadow(graph->nodes[i]->src[j]);
        }
    }
    if (!error_.empty()) {
        *why = error_;
        return false;
    }

    const size_t n_keys = 2 * tensors_.size() + 1;
    keys_.assign(n_keys, nullptr);
    used_.assign((n_keys + 31) / 32, 0);
    use_counts_.assign(n_keys, 0);
    graph_.visited_hash_set = {n_keys, used_.data(), keys_.data()};
    for (ggml_tensor & t : tensors_) {
        insert(&t);
    }
    const bool is_view = graph->visited_hash_set.size == 0;
    for (ggml_tensor * node : nodes_) {
        for (ggml_tensor * src : node->src) {
            if (src != nullptr) {
                ++use_counts_[slot(src)];
            }
        }
        if (is_view) {
            ++use_counts_[slot(node)];
        }
    }

    graph_.size       = std::max(n_nodes, n_leafs);
    graph_.n_nodes    = n_nodes;
    graph_.n_leafs    = n_leafs;
    graph_.nodes      = nodes_.data();
    graph_.grads      = nullptr;
    graph_.grad_accs  = nullptr;
    graph_.leafs      = leafs_.data();
    graph_.use_counts = use_counts_.data();
    graph_.order      = graph->order;
    graph_.uid        = 0; // not kept from loom's: the plugin must not take two shadows for one graph
    return true;
}

ggml_tensor * ShadowGraph::shadow(const ggml_tensor * t) {
    if (t == nullptr) {
        return nullptr;
    }
    if (auto it = map_.find(t); it != map_.end()) {
        return it->second;
    }
    ggml_tensor & s = tensors_.emplace_back(*t);
    map_.emplace(t, &s);
    if (!translate(s, t, *reg_) && error_.empty()) {
        error_ = std::string("tensor '") + t->name + "' lies in buffer " + ggml_backend_buffer_name(t->buffer) +
                 ", which is not the plugin's";
    }
    s.view_src = shadow(t->view_src);
    return &s;
}

// ggml's hash of a tensor pointer and its linear probing (ggml-impl.h:
// ggml_hash, ggml_hash_find): the plugin finds slots with its own copy.
size_t ShadowGraph::slot(const ggml_tensor * t) const {
    const size_t size = keys_.size();
    size_t       i    = (reinterpret_cast<uintptr_t>(t) >> 4) % size;
    while (((used_[i >> 5] >> (i & 31)) & 1u) != 0 && keys_[i] != t) {
        i = (i + 1) % size;
    }
    return i;
}

void ShadowGraph::insert(ggml_tensor * t) {
    const size_t i = slot(t);
    used_[i >> 5] |= 1u << (i & 31);
    keys_[i] = t;
}

} // namespace loom::ggml_plugin
