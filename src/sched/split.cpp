// Splitting a placed graph and building the scheduler's own graph.
//
// Note [Clones]
// ggml's scheduler rewires the sources of the user's nodes to point at the
// copies of split inputs. loom leaves the user's graph as it was: every
// node of the user graph (and every leaf without memory) gets a clone in the
// scheduler's context, a copy of the tensor struct whose sources point at
// other clones or at the per-backend copies. The graph allocator plans the
// clones; afterwards each user tensor receives its clone's buffer, data and
// extra (what allocating the user's graph would have set, the backend's
// init_tensor included), so inputs are written and outputs read through the
// user's own tensors.
//
// Note [Graph contract]
// ggml's scheduler hands each backend a view of the user's graph per split:
// the view shares the user graph's hash set and use counts (a node used in a
// later split still shows that use, so no backend fuses it away) and carries
// a uid of its own, new each time the graph is split. loom's split views are
// of the scheduler graph, whose hash set holds the clones with the use counts
// of their user tensors (copies of split inputs and their dependency views
// are in no set: as in ggml, they have no counted uses), and whose splits get
// new uids each time a graph is placed, reused placement or not. The user's
// graph gets a uid too, as ggml gives it one.

#include <algorithm>
#include <cstring>

#include "core/common.h"
#include "sched.h"

using loom::is_view_op;

using loom::sched::Cause;
using loom::sched::Split;

namespace {

// A description of the graph that is equal for two graphs exactly when the
// cached placement and splits of one are valid for the other: topology,
// types, shapes, strides, op parameters, flags, pre-allocated locations and
// user pins. The fields are written out, not hashed, so equal descriptions
// mean equal graphs (no collisions) and building one costs a few stores per
// field.
void signature(const ggml_backend_sched & s, const ggml_cgraph * g, const loom::PtrMap<int64_t> & ref,
               loom::sched::Signature & sig) {
    constexpr size_t k_words = 6 + 2 * GGML_MAX_DIMS + GGML_MAX_OP_PARAMS / sizeof(uint64_t) + GGML_MAX_SRC;
    uint64_t *       w       = sig.prepare(2 + size_t(g->n_nodes + g->n_leafs) * k_words);
    *w++         = uint64_t(g->n_nodes);
    *w++         = uint64_t(g->n_leafs);
    // A graph tensor by position, anything else by address.
    auto id_of = [&](const ggml_tensor * t) -> uint64_t {
        if (t == nullptr) return ~0ull;
        const int64_t * r = ref.find(t);
        return r != nullptr ? uint64_t(*r) : reinterpret_cast<uintptr_t>(t);
    };
    auto describe = [&](const ggml_tensor * t) {
        const ggml_backend_buffer_t buf = s.location(t);
        *w++ = uint64_t(t->op) | uint64_t(t->type) << 16 | uint64_t(uint32_t(t->flags)) << 32;
        *w++ = uint64_t(int64_t(s.id(t)) + 1) << 8 |
               (buf != nullptr ? uint64_t(ggml_backend_buffer_get_usage(buf)) + 1 : 0); // pins and usage
        *w++ = reinterpret_cast<uintptr_t>(buf);
        std::memcpy(w, t->ne, sizeof(t->ne));
        w += GGML_MAX_DIMS;
        std::memcpy(w, t->nb, sizeof(t->nb));
        w += GGML_MAX_DIMS;
        std::memcpy(w, t->op_params, sizeof(t->op_params));
        w += sizeof(t->op_params) / (sizeof(uint64_t));
        int n_src = GGML_MAX_SRC;
        while (n_src > 0 && t->src[n_src - 1] == nullptr) --n_src;
        for (int j = 0; j < n_src; ++j) *w++ = id_of(t->src[j]);
        *w++ = uint64_t(n_src);
        if (t->view_src != nullptr) {
            *w++ = id_of(t->view_src);
            *w++ = uint64_t(t->view_offs);
        }
    };
    static_assert(sizeof(ggml_tensor::op_params) % sizeof(uint64_t) == 0);
    for (int i = 0; i < g->n_leafs; ++i) describe(g->leafs[i]);
    for (int i = 0; i < g->n_nodes; ++i) describe(g->nodes[i]);
    sig.finish(w);
}

} // namespace

void ggml_backend_sched::split_graph(ggml_cgraph * g) {
    LOOM_REQUIRE(size_t(g->n_nodes) + size_t(g->n_leafs) <= graph_size * 2 && size_t(g->n_nodes) <= graph_size,
                 "the graph has %d nodes and %d leafs, more than the scheduler's graph_size %zu allows", g->n_nodes,
                 g->n_leafs, graph_size);
    is_reset = false;

    // Identity of every graph tensor by position, for the signature and the cache.
    loom::PtrMap<int64_t> & ref = ref_of_graph;
    ref.clear();
    ref.reserve(size_t(g->n_nodes + g->n_leafs));
    for (int i = 0; i < g->n_leafs; ++i) ref[g->leafs[i]] = -1 - int64_t(i);
    for (int i = 0; i < g->n_nodes; ++i) ref[g->nodes[i]] = int64_t(i);

    loom::sched::Signature & sig = graph_signature;
    signature(*this, g, ref, sig);
    const bool reuse = config.reuse_plans && !plan_signature.empty() && sig == plan_signature;

    if (reuse) {
        ++n_reused;
        for (int i = 0; i < g->n_leafs; ++i) backend_of[g->leafs[i]] = cached_leaf_ids[size_t(i)];
        for (int i = 0; i < g->n_nodes; ++i) backend_of[g->nodes[i]] = cached_node_ids[size_t(i)];
        // The cached splits hold the previous graph's tensors: map them by position.
        for (Split & sp : splits) {
            for (ggml_tensor *& in : sp.inputs) {
                const int64_t * rp = ref_of_cached.find(in);
                LOOM_ASSERT(rp != nullptr);
                const int64_t r = *rp;
                in              = r >= 0 ? g->nodes[r] : g->leafs[-1 - r];
            }
        }
    } else {
        ++n_plans;
        assign_backends(g);

        // Pass 5: cut into splits.
        splits.clear();
        int i = 0;
        while (i < g->n_nodes && is_view_op(g->nodes[i]->op)) ++i;
        Split cur;
        cur.backend = i < g->n_nodes ? id(g->nodes[i]) : cpu();
        cur.i_start = 0;
        loom::PtrMap<bool> in_cur; // inputs of the current split
        for (; i < g->n_nodes; ++i) {
            ggml_tensor * node = g->nodes[i];
            if (is_view_op(node->op)) continue;
            const int nb = id(node);
            LOOM_ASSERT(nb != -1);

            bool new_split = nb != cur.backend;
            if (!new_split && !cur.inputs.empty()) {
                int extra = 0;
                for (const ggml_tensor * src : node->src) {
                    if (src == nullptr) continue;
                    // A weight on an incompatible backend: a new split lets the
                    // memory of the weights copied for the previous one be reused.
                    if (location(src) != nullptr &&
                        ggml_backend_buffer_get_usage(location(src)) == GGML_BACKEND_BUFFER_USAGE_WEIGHTS &&
                        id(src) != cur.backend && !buffer_supported(src, cur.backend)) {
                        new_split = true;
                        break;
                    }
                    if (id(src) != cur.backend && !buffer_supported(src, cur.backend) && !in_cur.contains(src)) ++extra;
                }
                if (int(cur.inputs.size()) + extra > config.max_split_inputs) new_split = true;
            }
            if (new_split) {
                cur.i_end = i;
                splits.push_back(std::move(cur));
                cur         = Split{};
                cur.backend = nb;
                cur.i_start = i;
                in_cur.clear();
            }
            for (ggml_tensor * src : node->src) {
                if (src == nullptr) continue;
                const int sb = id(src);
                LOOM_ASSERT(sb != -1);
                if (sb != cur.backend && !buffer_supported(src, cur.backend) && !in_cur.contains(src)) {
                    in_cur[src] = true;
                    cur.inputs.push_back(src);
                }
            }
        }
        cur.i_end = g->n_nodes;
        splits.push_back(std::move(cur));

        std::swap(plan_signature, sig);
        cached_leaf_ids.resize(size_t(g->n_leafs));
        cached_node_ids.resize(size_t(g->n_nodes));
        for (int k = 0; k < g->n_leafs; ++k) cached_leaf_ids[size_t(k)] = id(g->leafs[k]);
        for (int k = 0; k < g->n_nodes; ++k) cached_node_ids[size_t(k)] = id(g->nodes[k]);
    }
    std::swap(ref_of_cached, ref_of_graph); // ref_of_cached: this graph; ref_of_graph: the previous one

    refreshed = reuse && graph_refreshable && built_copy == cur_copy;
    if (refreshed) {
        ++n_refreshed;
        refresh_graph(g, ref_of_graph);
    } else {
        build_graph(g);
        record_refresh(ref_of_cached);
    }

    take_use_counts(g);
    g->uid = ggml_graph_next_uid();
    for (Split & sp : splits) sp.uid = ggml_graph_next_uid();

    if (config.debug > 0) {
        print_plan(g);
    }
    user_graph = g;
    user_nodes = g->n_nodes;
}

// Note [Graph contract]: the clones take their user tensors' use counts.
void ggml_backend_sched::take_use_counts(const ggml_cgraph * g) {
    loom::TensorHashSet & set = graph->visited_hash_set;
    set.clear();
    for (const auto & [user, c] : clones) {
        bool         inserted = false;
        const size_t slot     = set.insert_slot(c, &inserted);
        const size_t from     = g->visited_hash_set.find(user);
        graph->use_counts[slot] =
            from != loom::TensorHashSet::npos && g->visited_hash_set.is_used(from) ? g->use_counts[from] : 0;
    }
}

void ggml_backend_sched::build_graph(ggml_cgraph * g) {
    graph_refreshable = false;
    built_copy        = cur_copy;

    // Graph inputs get one copy per pipeline stage so that a later graph
    // computation can write them while an earlier one still reads.
    graph_inputs.clear();
    copies.clear();
    clone_of.clear();
    user_of_clone.clear();
    clones.clear();

    size_t n_inputs = 0;
    for (const Split & sp : splits) n_inputs += sp.inputs.size();
    const size_t n_tensors = size_t(g->n_nodes + g->n_leafs) * (1 + size_t(n_copies)) + n_inputs * (2 + size_t(n_copies));
    const size_t sg_size   = size_t(g->n_nodes) + n_inputs * 2 + 1;
    const size_t sg_leafs  = size_t(g->n_leafs) + (n_inputs + size_t(g->n_leafs)) * size_t(n_copies) + 1;
    const size_t cap       = std::max(sg_size, sg_leafs);

    // The context is kept between graphs and only grows.
    const size_t need = n_tensors * ggml_tensor_overhead() + ggml_graph_overhead_custom(cap, false);
    if (ctx != nullptr && ggml_get_mem_size(ctx) >= need) {
        ggml_reset(ctx);
    } else {
        ggml_free(ctx);
        ggml_init_params params = {need + need / 2, nullptr, true};
        ctx                     = ggml_init(params);
        LOOM_REQUIRE(ctx != nullptr, "cannot allocate the scheduler's context (%zu bytes)", params.mem_size);
    }
    graph = ggml_new_graph_custom(ctx, cap, false);

    auto dup_layout = [&](const ggml_tensor * t, const char * backend_name, int c) {
        ggml_tensor * d = ggml_new_tensor(ctx, t->type, GGML_MAX_DIMS, t->ne);
        for (int k = 0; k < GGML_MAX_DIMS; ++k) d->nb[k] = t->nb[k];
        ggml_format_name(d, "%s#%s#%d", backend_name, t->name, c);
        return d;
    };
    auto copies_of = [&](const ggml_tensor * t, int b) -> std::vector<ggml_tensor *> & {
        auto & per_backend = copies[t];
        if (per_backend.empty()) per_backend.resize(backends.size());
        return per_backend[size_t(b)];
    };

    // Clones of every node and every leaf without memory, in graph order so
    // that sources are cloned before their users.
    auto clone = [&](ggml_tensor * t) {
        ggml_tensor * c = ggml_new_tensor(ctx, t->type, GGML_MAX_DIMS, t->ne);
        *c              = *t;
        if (t->data != nullptr && location(t) == nullptr) {
            // memory of an earlier plan: planned again
            c->data   = nullptr;
            c->buffer = nullptr;
        }
        clone_of[t]      = c;
        user_of_clone[c] = t;
        clones.emplace_back(t, c);
        return c;
    };
    auto mapped = [&](ggml_tensor * t) -> ggml_tensor * {
        if (t == nullptr) return nullptr;
        ggml_tensor * const * c = clone_of.find(t);
        return c != nullptr ? *c : t;
    };
    for (int i = 0; i < g->n_leafs; ++i) {
        ggml_tensor * leaf = g->leafs[i];
        if (leaf->data == nullptr || location(leaf) == nullptr) {
            ggml_tensor * c = clone(leaf);
            c->view_src     = mapped(leaf->view_src);
        }
    }

    for (Split & sp : splits) {
        const char * bname = ggml_backend_name(backends[size_t(sp.backend)]);
        for (ggml_tensor * in : sp.inputs) {
            auto & cps = copies_of(in, sp.backend);
            if (!cps.empty()) continue;
            for (int c = 0; c < n_copies; ++c) {
                ggml_tensor * cp = dup_layout(in, bname, c);
                if (n_copies > 1) {
                    // Pipeline copies must survive until their stage runs again.
                    ggml_set_input(cp);
                    ggml_set_output(cp);
                }
                cps.push_back(cp);
            }
        }
    }
    // Pipeline copies of graph inputs that stay on their own backend.
    if (n_copies > 1) {
        for (int i = 0; i < g->n_leafs; ++i) {
            ggml_tensor * leaf = g->leafs[i];
            if (!(leaf->flags & GGML_TENSOR_FLAG_INPUT) || location(leaf) != nullptr) continue;
            const int b   = id(leaf);
            auto &    cps = copies_of(leaf, b);
            for (int c = 0; c < n_copies; ++c) {
                ggml_tensor * cp = c == cur_copy ? mapped(leaf) : dup_layout(leaf, ggml_backend_name(backends[size_t(b)]), c);
                ggml_set_input(cp);
                ggml_set_output(cp);
                cps.push_back(cp);
            }
            graph_inputs.push_back(leaf);
        }
    }

    node_ids.clear();
    leaf_ids.clear();
    auto add_node = [&](ggml_tensor * t, int b) {
        graph->nodes[graph->n_nodes++] = t;
        node_ids.push_back(b);
    };
    loom::PtrMap<bool> leaf_added;
    auto add_leaf = [&](ggml_tensor * t, int b) {
        bool & added = leaf_added[t];
        if (added) return; // a graph input is also its own current pipeline copy
        added                          = true;
        graph->leafs[graph->n_leafs++] = t;
        leaf_ids.push_back(b);
    };

    for (Split & sp : splits) {
        loom::PtrMap<bool> is_input;
        for (ggml_tensor * in : sp.inputs) {
            is_input[in]       = true;
            ggml_tensor * src  = mapped(in);
            // Keeps the source alive until the copy is made, and places the
            // copy's memory at the start of the split.
            ggml_tensor * dep  = ggml_view_tensor(ctx, src);
            dep->src[0]        = src;
            add_node(dep, id(in));
            add_node(copies_of(in, sp.backend)[size_t(cur_copy)], sp.backend);
        }
        sp.sg_start = graph->n_nodes;
        for (int i = sp.i_start; i < sp.i_end; ++i) {
            ggml_tensor * node = g->nodes[i];
            ggml_tensor * c    = clone(node);
            c->view_src        = mapped(node->view_src);
            for (int j = 0; j < GGML_MAX_SRC; ++j) {
                ggml_tensor * src = node->src[j];
                if (src == nullptr) continue;
                if (!is_view_op(node->op) && is_input.contains(src)) {
                    c->src[j] = copies_of(src, sp.backend)[size_t(cur_copy)];
                } else {
                    c->src[j] = mapped(src);
                }
            }
            add_node(c, id(node));
        }
        sp.sg_end = graph->n_nodes;
    }

    if (n_copies > 1) {
        for (ggml_tensor * in : graph_inputs) {
            const int b = id(in);
            for (ggml_tensor * cp : copies_of(in, b)) add_leaf(cp, b);
        }
        for (const Split & sp : splits) {
            for (ggml_tensor * in : sp.inputs) {
                for (ggml_tensor * cp : copies_of(in, sp.backend)) add_leaf(cp, sp.backend);
            }
        }
    }
    for (int i = 0; i < g->n_leafs; ++i) {
        add_leaf(mapped(g->leafs[i]), id(g->leafs[i]));
    }
}

// Note [Refresh]
// When a graph has the placement of the previous one (the signature
// matched), the scheduler graph built for the previous one fits it too:
// the same clones, copies and nodes in the same order, only the user
// tensors behind them are other objects (a runner builds a new graph per
// token). Instead of building it again, the clones take the fields of their
// new user tensors, the few fields that point at user tensors directly
// (pre-allocated weights, a KV cache) are patched by position, and the
// graph allocator is told the graph is the one it planned, so it skips its
// own check. record_refresh notes, after a build, what a refresh must redo.

void ggml_backend_sched::record_refresh(const loom::PtrMap<int64_t> & ref) {
    clone_refs.clear();
    patches.clear();
    own_tensors.clear();
    for (const auto & [user, c] : clones) {
        const int64_t * r = ref.find(user);
        LOOM_ASSERT(r != nullptr);
        clone_refs.push_back(*r);
    }
    auto note = [&](ggml_tensor *& field) {
        if (field == nullptr) return;
        if (const int64_t * r = ref.find(field)) patches.push_back(Patch{&field, *r});
    };
    auto visit = [&](ggml_tensor * t) {
        for (ggml_tensor *& src : t->src) note(src);
        note(t->view_src);
        if (!user_of_clone.contains(t)) own_tensors.push_back(t);
    };
    for (int i = 0; i < graph->n_nodes; ++i) {
        LOOM_ASSERT(!ref.contains(graph->nodes[i]));
        visit(graph->nodes[i]);
    }
    for (int i = 0; i < graph->n_leafs; ++i) {
        if (ref.contains(graph->leafs[i])) {
            note(graph->leafs[i]); // a user tensor with memory, used as it is
        } else {
            visit(graph->leafs[i]);
        }
    }
    graph_refreshable = true;
}

void ggml_backend_sched::refresh_graph(ggml_cgraph * g, const loom::PtrMap<int64_t> & prev_ref) {
    auto user_at = [g](int64_t r) { return r >= 0 ? g->nodes[r] : g->leafs[-1 - r]; };

    // The clones, as clone() in build_graph makes them, keeping their sources.
    for (size_t k = 0; k < clones.size(); ++k) {
        ggml_tensor * user = user_at(clone_refs[k]);
        ggml_tensor * c    = clones[k].second;
        ggml_tensor * src[GGML_MAX_SRC];
        std::memcpy(src, c->src, sizeof(src));
        ggml_tensor * view_src = c->view_src;
        *c                     = *user;
        std::memcpy(c->src, src, sizeof(src));
        c->view_src = view_src;
        if (user->data != nullptr && location(user) == nullptr) {
            c->data   = nullptr;
            c->buffer = nullptr;
        }
        clones[k].first = user;
    }
    for (const Patch & p : patches) *p.field = user_at(p.ref);
    // Copies have no memory until planned; views take their source's.
    for (ggml_tensor * t : own_tensors) {
        if (t->view_src == nullptr) {
            t->data   = nullptr;
            t->buffer = nullptr;
        } else {
            t->buffer = t->view_src->buffer;
            t->data   = t->view_src->data != nullptr ? static_cast<char *>(t->view_src->data) + t->view_offs : nullptr;
        }
    }

    // The maps keyed by user tensors.
    clone_of.clear();
    user_of_clone.clear();
    for (const auto & [user, c] : clones) {
        clone_of[user]   = c;
        user_of_clone[c] = user;
    }
    auto now_at = [&](const ggml_tensor * prev) {
        const int64_t * r = prev_ref.find(prev);
        LOOM_ASSERT(r != nullptr);
        return user_at(*r);
    };
    if (!copies.empty()) {
        decltype(copies) rekeyed;
        rekeyed.reserve(copies.size());
        for (auto & [prev, per_backend] : copies) rekeyed.emplace(now_at(prev), std::move(per_backend));
        copies.swap(rekeyed);
    }
    for (ggml_tensor *& in : graph_inputs) in = now_at(in);
}
