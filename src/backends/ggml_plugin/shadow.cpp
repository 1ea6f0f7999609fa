// Shadow tensors and graphs: what the plugin computes on instead of loom's.

#include "shadow.h"

#include <algorithm>
#include <cstdio>

#include "core/graph.h"
#include "core/op_table.h"
#include "hosted.h"

namespace loom::ggml_plugin {

namespace {

// Per shadow: the slots of its sources, then of its view source.
constexpr size_t k_links = GGML_MAX_SRC + 1;

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

// Note [Views left behind]
// A scheduler's split can hold view nodes (VIEW, RESHAPE, PERMUTE,
// TRANSPOSE) of tensors in another device's memory whose reader in the
// split takes a copy instead (ggml's scheduler places a view with its view
// source, and copies what a split reads from memory its backend cannot
// use). They compute nothing and the plugin never touches their data, so
// the shadow graph leaves them out, with anything else in a foreign buffer
// that no computing node reads; a tensor a computing node reads from a
// foreign buffer is an error.

// Note [Shadow graphs]
// A shadow graph holds what ggml's graph would hold for the plugin:
// - use counts: the loom graph's, slot by slot (core/graph.h), so a view the
//   scheduler hands over shows the uses after its last node and the plugin
//   fuses exactly what it would fuse in ggml; a tensor the loom graph does
//   not count (no hash set, or outside it) has none, as in ggml.
// - uid: a plugin may take a graph whose uid it saw before as unchanged and
//   keep using what it derived from it, pointers to its tensors included
//   (ggml's CUDA, RPC and Hexagon backends do). A loom graph's uid cannot be
//   passed on as it is: the shadows of two computations of it are other
//   objects unless the same ShadowGraph built both from the same tensors. So
//   the shadow graph has uid 0 where the loom graph has 0, and otherwise a
//   uid of its own: new when the loom graph's uid differs from the last
//   build's or the build gave other tensors, links or addresses; kept when
//   it gave the same shadows at the same addresses (HostedBackend builds a
//   loom graph's shadows again in the same ShadowGraph).

bool ShadowGraph::build(const ggml_cgraph * graph, const HostedReg & reg, std::string * why) {
    std::swap(origs_, prev_origs_);
    std::swap(links_, prev_links_);
    origs_.clear();
    links_.clear();
    index_.clear();
    const int n_nodes = graph->n_nodes;
    const int n_leafs = graph->n_leafs;
    // The graph's own tensors first, so that those come in with their
    // sources; tensors outside it come in with none.
    for (int i = 0; i < n_nodes; ++i) {
        collect(graph->nodes[i]);
    }
    for (int i = 0; i < n_leafs; ++i) {
        collect(graph->leafs[i]);
    }
    for (int i = 0; i < n_nodes; ++i) {
        const int node = index_.at(graph->nodes[i]);
        for (int j = 0; j < GGML_MAX_SRC; ++j) {
            const int src                              = collect(graph->nodes[i]->src[j]);
            links_[size_t(node) * k_links + size_t(j)] = src;
        }
    }

    // What the plugin reads or writes (Note [Views left behind]): the
    // computing nodes, their sources and the view sources of those.
    std::vector<bool> read(origs_.size(), false);
    auto              mark = [&](int t) {
        for (; t >= 0 && !read[size_t(t)]; t = links_[size_t(t) * k_links + GGML_MAX_SRC]) {
            read[size_t(t)] = true;
        }
    };
    for (int i = 0; i < n_nodes; ++i) {
        if (is_view_op(graph->nodes[i]->op)) {
            continue;
        }
        const int node = index_.at(graph->nodes[i]);
        mark(node);
        for (int j = 0; j < GGML_MAX_SRC; ++j) {
            mark(links_[size_t(node) * k_links + size_t(j)]);
        }
    }

    const ggml_tensor * const before = tensors_.data();
    tensors_.resize(origs_.size());
    std::vector<bool> left(origs_.size(), false);
    for (size_t i = 0; i < origs_.size(); ++i) {
        ggml_tensor & s = tensors_[i];
        s               = *origs_[i];
        if (!translate(s, origs_[i], reg)) {
            if (!read[i]) {
                left[i] = true;
                continue;
            }
            *why = std::string("tensor '") + origs_[i]->name + "' lies in buffer " +
                   ggml_backend_buffer_name(origs_[i]->buffer) + ", which is not the plugin's";
            return false;
        }
        const int * links = &links_[i * k_links];
        for (int j = 0; j < GGML_MAX_SRC; ++j) {
            s.src[j] = links[j] >= 0 ? &tensors_[size_t(links[j])] : nullptr;
        }
        s.view_src = links[GGML_MAX_SRC] >= 0 ? &tensors_[size_t(links[GGML_MAX_SRC])] : nullptr;
    }
    nodes_.clear();
    leafs_.clear();
    for (int i = 0; i < n_nodes; ++i) {
        const int k = index_.at(graph->nodes[i]);
        if (!left[size_t(k)]) {
            nodes_.push_back(&tensors_[size_t(k)]);
        }
    }
    for (int i = 0; i < n_leafs; ++i) {
        const int k = index_.at(graph->leafs[i]);
        if (!left[size_t(k)]) {
            leafs_.push_back(&tensors_[size_t(k)]);
        }
    }

    const size_t n_keys = 2 * tensors_.size() + 1;
    keys_.assign(n_keys, nullptr);
    used_.assign((n_keys + 31) / 32, 0);
    use_counts_.assign(n_keys, 0);
    graph_.visited_hash_set = {n_keys, used_.data(), keys_.data()};
    const TensorHashSet & counted = graph->visited_hash_set;
    for (size_t i = 0; i < tensors_.size(); ++i) {
        insert(&tensors_[i]);
        const size_t from = counted.find(origs_[i]);
        if (from != TensorHashSet::npos && counted.is_used(from)) {
            use_counts_[slot(&tensors_[i])] = graph->use_counts[from];
        }
    }

    const bool same = graph->uid != 0 && graph->uid == loom_uid_ && tensors_.data() == before &&
                      origs_ == prev_origs_ && links_ == prev_links_;
    if (!same) {
        graph_.uid = graph->uid != 0 ? ggml_graph_next_uid() : 0;
    }
    loom_uid_ = graph->uid;

    graph_.size       = int(std::max(nodes_.size(), leafs_.size()));
    graph_.n_nodes    = int(nodes_.size());
    graph_.n_leafs    = int(leafs_.size());
    graph_.nodes      = nodes_.data();
    graph_.grads      = nullptr;
    graph_.grad_accs  = nullptr;
    graph_.leafs      = leafs_.data();
    graph_.use_counts = use_counts_.data();
    graph_.order      = graph->order;
    return true;
}

// The slot of t's shadow, made with its view source's when t is new; -1
// for NULL. The sources are linked by build, for nodes only.
int ShadowGraph::collect(const ggml_tensor * t) {
    if (t == nullptr) {
        return -1;
    }
    if (auto it = index_.find(t); it != index_.end()) {
        return it->second;
    }
    const int i = int(origs_.size());
    index_.emplace(t, i);
    origs_.push_back(t);
    links_.resize(links_.size() + k_links, -1);
    const int view                              = collect(t->view_src);
    links_[size_t(i) * k_links + GGML_MAX_SRC] = view;
    return i;
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
