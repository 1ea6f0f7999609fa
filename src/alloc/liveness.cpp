#include "liveness.h"

#include "core/common.h"
#include "core/graph.h"

namespace loom::alloc {

bool op_can_inplace(ggml_op op) {
    return op_has(op, k_op_in_place);
}

namespace {

bool same_layout(const ggml_tensor * a, const ggml_tensor * b) {
    if (a->type != b->type) {
        return false;
    }
    for (int i = 0; i < GGML_MAX_DIMS; ++i) {
        if (a->ne[i] != b->ne[i] || a->nb[i] != b->nb[i]) {
            return false;
        }
    }
    return true;
}

// Memory of the caller (a weight, a KV cache, a tensor allocated by an
// earlier call) or a view: the allocator gives it nothing.
bool takes_memory(const ggml_tensor * t) {
    return t->view_src == nullptr && t->data == nullptr && t->buffer == nullptr;
}

constexpr int32_t k_pinned = GGML_TENSOR_FLAG_INPUT | GGML_TENSOR_FLAG_OUTPUT;

// Note [Differences from ggml's lifetimes]
// The walk below takes and releases memory in the order ggml's allocator
// does, so a graph gets the same lifetimes, except where ggml's rules allow
// a wrong result or do not say what happens:
//   - an input is never the source of an in-place node (ggml allows it),
//     since the caller may read its input back or compute again;
//   - a node is computed in place only on a block of its own buffer type
//     and only when it fills the whole block (ggml moves the node to the
//     source's buffer, and frees the unused tail of a larger source);
//   - a view that is a leaf, or a source outside the node list, keeps its
//     source alive like any view node (ggml counts view nodes only, so the
//     source of such a view may be freed while it is still read);
//   - a view flagged as an output keeps its source alive to the end (ggml
//     frees the source after the view's last reader);
//   - a view is computed over in place only when it starts at its source's
//     first byte (ggml compares data pointers, which are NULL while
//     planning, so it cannot tell).
// Markers with op NONE that a scheduler puts in the node list to extend
// the life of their src[0] behave as in ggml.

// The walk over the graph: records blocks instead of placing them.
class Walk {
  public:
    Walk(const ggml_cgraph & graph, const TensorIds & ids, const BufferIds & buffers, const std::vector<PoolDesc> & pools,
         Liveness & out)
        : graph_(graph), ids_(ids), buffers_(buffers), pools_(pools), out_(out), state_(ids.size()) {}

    void run();

  private:
    struct State {
        int32_t consumers  = 0;     // node sources not yet executed
        int32_t views      = 0;     // registered views not yet released (for a view source)
        int32_t block      = -1;    // the block holding its data, once it has one
        bool    holds      = false; // the block is this tensor's to release
        bool    registered = false; // a view counted in its source's views
    };

    int32_t buffer_of_node(int i) const;
    int32_t buffer_of_leaf(int i) const;
    void    take(int32_t id, int32_t buffer_id, int32_t step);
    bool    take_inplace(int32_t id, int slot, int32_t pool, size_t size);
    void    release(int32_t id, int32_t step);
    void    after_node(const ggml_tensor * node, int32_t step);

    const ggml_cgraph &           graph_;
    const TensorIds &             ids_;
    const BufferIds &             buffers_;
    const std::vector<PoolDesc> & pools_;
    Liveness &                    out_;
    std::vector<State>            state_;
};

int32_t Walk::buffer_of_node(int i) const {
    if (buffers_.node_ids == nullptr) {
        return 0;
    }
    const int b = buffers_.node_ids[i];
    if (b < 0 || b >= buffers_.n_buffers) {
        fail(buffers_.caller, "node %d (%s) has buffer id %d; the allocator has %d buffers", i,
             describe(graph_.nodes[i]).text, b, buffers_.n_buffers);
    }
    return b;
}

int32_t Walk::buffer_of_leaf(int i) const {
    if (buffers_.leaf_ids == nullptr) {
        return 0;
    }
    const int b = buffers_.leaf_ids[i];
    if (b < 0 || b >= buffers_.n_buffers) {
        fail(buffers_.caller, "leaf %d (%s) has buffer id %d; the allocator has %d buffers", i,
             describe(graph_.leafs[i]).text, b, buffers_.n_buffers);
    }
    return b;
}

void Walk::take(int32_t id, int32_t buffer_id, int32_t step) {
    State &             st = state_[size_t(id)];
    const ggml_tensor * t  = ids_.tensor(id);
    if (st.block >= 0 || !takes_memory(t)) {
        return;
    }
    const int32_t    pool = (*buffers_.pool_of)[size_t(buffer_id)];
    const PoolDesc & pd   = pools_[size_t(pool)];
    const size_t     size = align_up(ggml_backend_buft_get_alloc_size(pd.buft, t), pd.alignment);
    if (op_can_inplace(t->op)) {
        for (int j = 0; j < GGML_MAX_SRC; ++j) {
            if (t->src[j] != nullptr && take_inplace(id, j, pool, size)) {
                return;
            }
        }
    }
    st.block = int32_t(out_.blocks.size());
    st.holds = true;
    out_.blocks.push_back(Block{pool, size, step, out_.n_steps - 1});
}

// Note [In-place reuse]
// A node may be computed into the memory of its source p (saving one block)
// when nothing can observe p's old contents afterwards and the kernel can
// overwrite its input:
//   - the op is in op_can_inplace and the node has p's exact layout, so each
//     element is read before the same address is written;
//   - this node is p's last consumer (and reads it once) and no view of p is
//     still live;
//   - p is neither an input (the caller may read it back or compute again
//     without filling it anew) nor an output;
//   - p's memory is the allocator's and is still held by p, in the same pool
//     as the node, and the node fills the whole block (a smaller node would
//     leave a dead tail inside a live block; a fresh block is then better).
// A view p qualifies when it starts at its source's first byte and is the
// only thing still reading that source; the node then takes the source's
// block.
bool Walk::take_inplace(int32_t id, int slot, int32_t pool, size_t size) {
    const ggml_tensor * t = ids_.tensor(id);
    const ggml_tensor * p = t->src[slot];
    if ((p->flags & k_pinned) != 0 || !same_layout(t, p)) {
        return false;
    }
    const State & ps = state_[size_t(ids_.id(p))];
    if (ps.consumers != 1 || ps.views != 0) {
        return false;
    }
    int32_t owner = ids_.id(p);
    if (p->view_src != nullptr) {
        if (p->view_offs != 0 || !ps.registered || (p->view_src->flags & k_pinned) != 0) {
            return false;
        }
        owner                = ids_.id(p->view_src);
        const State & source = state_[size_t(owner)];
        if (source.views != 1 || source.consumers != 0) {
            return false;
        }
    }
    State & os = state_[size_t(owner)];
    if (!os.holds) {
        return false;
    }
    const Block & b = out_.blocks[size_t(os.block)];
    if (b.pool != pool || b.size != size) {
        return false;
    }
    State & st = state_[size_t(id)];
    st.block   = os.block;
    st.holds   = true;
    os.holds   = false;
    out_.inplace.push_back(InplaceUse{id, int32_t(slot)});
    return true;
}

void Walk::release(int32_t id, int32_t step) {
    State &             st = state_[size_t(id)];
    const ggml_tensor * t  = ids_.tensor(id);
    if (!st.holds || (t->flags & GGML_TENSOR_FLAG_OUTPUT) != 0) {
        return;
    }
    out_.blocks[size_t(st.block)].end = step;
    st.holds                          = false;
}

void Walk::after_node(const ggml_tensor * node, int32_t step) {
    for (const ggml_tensor * p : node->src) {
        if (p == nullptr) {
            continue;
        }
        const int32_t pid = ids_.id(p);
        State &       ps  = state_[size_t(pid)];
        ps.consumers -= 1;
        if (ps.consumers != 0 || ps.views != 0) {
            continue;
        }
        if (p->view_src == nullptr) {
            release(pid, step);
            continue;
        }
        // The last reader of a view is done: the view lets go of its source,
        // unless the view is an output (its data must outlive the graph).
        if (!ps.registered || (p->flags & GGML_TENSOR_FLAG_OUTPUT) != 0) {
            continue;
        }
        ps.registered         = false;
        const int32_t rid     = ids_.id(p->view_src);
        State &       source  = state_[size_t(rid)];
        source.views -= 1;
        if (source.views == 0 && source.consumers == 0) {
            release(rid, step);
        }
    }
}

void Walk::run() {
    out_.n_steps = graph_.n_nodes + 2;
    out_.blocks.clear();
    out_.inplace.clear();

    // Every view keeps its source alive while it is live, except the
    // view-typed markers with op NONE that a scheduler adds to the node
    // list only to extend the life of their src[0]: they are never read.
    std::vector<bool> is_node(ids_.size(), false);
    for (int i = 0; i < graph_.n_nodes; ++i) {
        is_node[size_t(ids_.id(graph_.nodes[i]))] = true;
    }
    for (size_t k = 0; k < ids_.size(); ++k) {
        const ggml_tensor * t = ids_.tensor(int32_t(k));
        if (t->view_src == nullptr || (is_node[k] && t->op == GGML_OP_NONE)) {
            continue;
        }
        state_[k].registered = true;
        state_[size_t(ids_.id(t->view_src))].views += 1;
    }

    // Prologue: leafs, then inputs, in non-overlapping memory before any
    // node runs, since the caller writes them before the computation.
    for (int i = 0; i < graph_.n_leafs; ++i) {
        take(ids_.id(graph_.leafs[i]), buffer_of_leaf(i), 0);
    }
    for (int i = 0; i < graph_.n_nodes; ++i) {
        const ggml_tensor * node = graph_.nodes[i];
        const int32_t       b    = buffer_of_node(i);
        if ((node->flags & GGML_TENSOR_FLAG_INPUT) != 0) {
            take(ids_.id(node), b, 0);
        }
        for (const ggml_tensor * s : node->src) {
            if (s == nullptr) {
                continue;
            }
            state_[size_t(ids_.id(s))].consumers += 1;
            if ((s->flags & GGML_TENSOR_FLAG_INPUT) != 0) {
                take(ids_.id(s), b, 0);
            }
        }
    }

    for (int i = 0; i < graph_.n_nodes; ++i) {
        const ggml_tensor * node = graph_.nodes[i];
        const int32_t       b    = buffer_of_node(i);
        const int32_t       step = i + 1;
        // Sources outside the graph's lists get memory when first needed.
        for (const ggml_tensor * s : node->src) {
            if (s != nullptr) {
                take(ids_.id(s), b, step);
            }
        }
        take(ids_.id(node), b, step);
        after_node(node, step);
    }

    out_.block_of.resize(ids_.size());
    for (size_t k = 0; k < ids_.size(); ++k) {
        out_.block_of[k] = state_[k].block;
    }
}

uint64_t tensor_signature(const ggml_tensor * t, const TensorIds & ids) {
    uint64_t h = hash_mix(0, uint64_t(uint32_t(ids.find(t))));
    h          = hash_mix(h, uint64_t(t->op));
    h          = hash_mix(h, uint64_t(uint32_t(t->flags & k_pinned)));
    h          = hash_mix(h, uint64_t(uint32_t(ids.find(t->view_src))));
    h          = hash_mix(h, uint64_t(t->view_offs));
    for (const ggml_tensor * s : t->src) {
        h = hash_mix(h, uint64_t(uint32_t(ids.find(s))));
    }
    return h;
}

} // namespace

void analyse_liveness(const ggml_cgraph & graph, const TensorIds & ids, const BufferIds & buffers,
                      const std::vector<PoolDesc> & pools, Liveness & out) {
    Walk(graph, ids, buffers, pools, out).run();
}

void graph_signature(const ggml_cgraph & graph, const TensorIds & ids, std::vector<uint64_t> & out) {
    out.clear();
    out.reserve(size_t(graph.n_nodes) + size_t(graph.n_leafs) + 1);
    out.push_back(ids.size());
    for (int i = 0; i < graph.n_nodes; ++i) {
        out.push_back(tensor_signature(graph.nodes[i], ids));
    }
    for (int i = 0; i < graph.n_leafs; ++i) {
        out.push_back(tensor_signature(graph.leafs[i], ids));
    }
}

bool inplace_still_valid(const ggml_tensor * node, const ggml_tensor * src) {
    return src != nullptr && same_layout(node, src) && (src->view_src == nullptr || src->view_offs == 0);
}

} // namespace loom::alloc
