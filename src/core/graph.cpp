#include "graph.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <vector>

#include "common.h"
#include "context.h"
#include "types.h"

using namespace loom;

namespace loom {

size_t TensorHashSet::capacity_for(size_t min_size) {
    auto is_prime = [](size_t n) {
        if (n < 2) return false;
        for (size_t d = 2; d * d <= n; ++d) {
            if (n % d == 0) return false;
        }
        return true;
    };
    size_t n = min_size < 2 ? 2 : min_size;
    while (!is_prime(n)) {
        ++n;
    }
    return n;
}

size_t TensorHashSet::find(const ggml_tensor * t) const {
    if (size == 0) {
        return npos;
    }
    const size_t h = (reinterpret_cast<uintptr_t>(t) >> 4) % size;
    size_t       i = h;
    do {
        if (!is_used(i) || keys[i] == t) {
            return i;
        }
        i = (i + 1) % size;
    } while (i != h);
    return npos;
}

bool TensorHashSet::insert(const ggml_tensor * t) {
    bool inserted = false;
    insert_slot(t, &inserted);
    return inserted;
}

size_t TensorHashSet::insert_slot(const ggml_tensor * t, bool * inserted) {
    const size_t i = find(t);
    LOOM_ASSERT(i != npos);
    *inserted = !is_used(i);
    if (*inserted) {
        used[i >> 5] |= 1u << (i & 31);
        keys[i] = t;
    }
    return i;
}

void TensorHashSet::clear() {
    if (used != nullptr) {
        std::memset(used, 0, bitset_words(size) * sizeof(uint32_t));
    }
}

} // namespace loom

namespace {

size_t graph_nbytes(size_t size, bool grads) {
    const size_t hash_size = TensorHashSet::capacity_for(size * 2);
    size_t       n         = sizeof(ggml_cgraph);
    n += size * sizeof(ggml_tensor *) * 2; // nodes, leafs
    n += hash_size * sizeof(int32_t);      // use_counts
    n += hash_size * sizeof(ggml_tensor *); // hash keys
    if (grads) {
        n += hash_size * sizeof(ggml_tensor *) * 2;
    }
    n += TensorHashSet::bitset_words(hash_size) * sizeof(uint32_t);
    return n;
}

template <typename T> T * carve(char *& p, size_t count) {
    T * r = reinterpret_cast<T *>(p);
    p += count * sizeof(T);
    return r;
}

// Marks t, and every source reachable from it that lacks the mark, as to be
// computed (GGML_TENSOR_FLAG_COMPUTE; leafs are never marked). Used when a
// node already in the graph is reached from one that computes.
void mark_compute(ggml_tensor * t) {
    std::vector<ggml_tensor *> stack{t};
    while (!stack.empty()) {
        ggml_tensor * n = stack.back();
        stack.pop_back();
        if (n->op == GGML_OP_NONE) {
            continue;
        }
        n->flags |= GGML_TENSOR_FLAG_COMPUTE;
        for (ggml_tensor * s : n->src) {
            if (s != nullptr && s->op != GGML_OP_NONE && !(s->flags & GGML_TENSOR_FLAG_COMPUTE)) {
                stack.push_back(s);
            }
        }
    }
}

// Depth-first, sources before consumers, in source order; iterative so
// that long chains do not exhaust the stack. With compute, every node
// reached gets GGML_TENSOR_FLAG_COMPUTE, including nodes already in the
// graph (ggml_build_forward_order adds nodes without it; the backends skip
// nodes that lack it). Each node added counts one use of each of its
// sources (a source named twice counts twice); a tensor's count starts at 0
// when it joins the graph, as ggml's ggml_visit_parents_graph counts.
void visit(ggml_cgraph * g, ggml_tensor * root, bool compute) {
    struct Frame {
        ggml_tensor * t;
        int           next_src;
    };
    bool         inserted  = false;
    const size_t root_slot = g->visited_hash_set.insert_slot(root, &inserted);
    if (!inserted) {
        if (compute) {
            mark_compute(root);
        }
        return;
    }
    g->use_counts[root_slot] = 0;
    std::vector<Frame> stack;
    stack.push_back({root, 0});
    while (!stack.empty()) {
        Frame & f = stack.back();
        if (f.next_src < GGML_MAX_SRC) {
            ggml_tensor * s = f.t->src[f.next_src++];
            if (s != nullptr) {
                const size_t slot = g->visited_hash_set.insert_slot(s, &inserted);
                if (inserted) {
                    g->use_counts[slot] = 0;
                    stack.push_back({s, 0});
                } else if (compute) {
                    mark_compute(s);
                }
                ++g->use_counts[slot];
            }
            continue;
        }
        ggml_tensor * t = f.t;
        stack.pop_back();
        if (compute && t->op != GGML_OP_NONE) {
            t->flags |= GGML_TENSOR_FLAG_COMPUTE;
        }
        if (t->op == GGML_OP_NONE && !(t->flags & GGML_TENSOR_FLAG_PARAM)) {
            LOOM_REQUIRE(g->n_leafs < g->size, "graph is full: more than %d leafs (while adding %s)", g->size,
                         describe(t).text);
            if (t->name[0] == '\0') {
                ggml_format_name(t, "leaf_%d", g->n_leafs);
            }
            g->leafs[g->n_leafs++] = t;
        } else {
            LOOM_REQUIRE(g->n_nodes < g->size, "graph is full: more than %d nodes (while adding %s)", g->size,
                         describe(t).text);
            if (t->name[0] == '\0') {
                ggml_format_name(t, "node_%d", g->n_nodes);
            }
            g->nodes[g->n_nodes++] = t;
        }
    }
}

const char * dot_color(const ggml_tensor * t) {
    if (t->flags & GGML_TENSOR_FLAG_OUTPUT) return "lightcoral";
    if (t->flags & GGML_TENSOR_FLAG_INPUT) return "palegreen";
    if (t->flags & GGML_TENSOR_FLAG_PARAM) return "gold";
    return "white";
}

} // namespace

extern "C" {

size_t ggml_graph_overhead_custom(size_t size, bool grads) {
    return sizeof(Object) + GGML_PAD(graph_nbytes(size, grads), GGML_MEM_ALIGN);
}

size_t ggml_graph_overhead(void) {
    return ggml_graph_overhead_custom(GGML_DEFAULT_GRAPH_SIZE, false);
}

ggml_cgraph * ggml_new_graph_custom(ggml_context * ctx, size_t size, bool grads) {
    LOOM_REQUIRE(size > 0 && size <= size_t(INT32_MAX / 2), "graph size %zu out of range", size);
    Object * obj       = ctx->new_object(ObjectType::Graph, graph_nbytes(size, grads), __func__);
    char *   p         = static_cast<char *>(ctx->payload(obj));
    const size_t hsize = TensorHashSet::capacity_for(size * 2);

    auto * g = new (carve<ggml_cgraph>(p, 1)) ggml_cgraph();
    g->size  = int(size);
    g->nodes = carve<ggml_tensor *>(p, size);
    g->leafs = carve<ggml_tensor *>(p, size);
    g->visited_hash_set.size  = hsize;
    g->visited_hash_set.keys  = const_cast<const ggml_tensor **>(carve<ggml_tensor *>(p, hsize));
    if (grads) {
        g->grads     = carve<ggml_tensor *>(p, hsize);
        g->grad_accs = carve<ggml_tensor *>(p, hsize);
        std::memset(g->grads, 0, hsize * sizeof(ggml_tensor *) * 2);
    }
    g->use_counts             = carve<int32_t>(p, hsize);
    g->visited_hash_set.used = carve<uint32_t>(p, TensorHashSet::bitset_words(hsize));
    g->visited_hash_set.clear();
    return g;
}

ggml_cgraph * ggml_new_graph(ggml_context * ctx) {
    return ggml_new_graph_custom(ctx, GGML_DEFAULT_GRAPH_SIZE, false);
}

ggml_cgraph ggml_graph_view(ggml_cgraph * g, int i0, int i1) {
    LOOM_REQUIRE(i0 >= 0 && i0 <= i1 && i1 <= g->n_nodes, "range [%d, %d) out of the graph's %d nodes", i0, i1,
                 g->n_nodes);
    ggml_cgraph v;
    v.size             = 0;
    v.n_nodes          = i1 - i0;
    v.n_leafs          = 0;
    v.nodes            = g->nodes + i0;
    v.use_counts       = g->use_counts;
    v.visited_hash_set = g->visited_hash_set;
    v.order            = g->order;
    v.uid              = 0;
    return v;
}

uint64_t ggml_graph_next_uid(void) {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
}

void ggml_graph_cpy(ggml_cgraph * src, ggml_cgraph * dst) {
    LOOM_REQUIRE(dst->size >= src->n_nodes && dst->size >= src->n_leafs,
                 "destination graph of size %d is smaller than the source (%d nodes, %d leafs)", dst->size,
                 src->n_nodes, src->n_leafs);
    dst->n_nodes = src->n_nodes;
    dst->n_leafs = src->n_leafs;
    dst->order   = src->order;
    for (int i = 0; i < src->n_leafs; ++i) dst->leafs[i] = src->leafs[i];
    for (int i = 0; i < src->n_nodes; ++i) dst->nodes[i] = src->nodes[i];
    // The leafs and nodes join the destination's hash set with the use
    // counts the source has for them (ggml copies the source's set, which
    // holds exactly its leafs and nodes; a view's set is its parent's, of
    // which only the view's own nodes are copied; a node added with
    // ggml_graph_add_node is in no set and has no uses).
    dst->visited_hash_set.clear();
    auto add = [&](const ggml_tensor * t) {
        bool         inserted = false;
        const size_t d        = dst->visited_hash_set.insert_slot(t, &inserted);
        if (inserted) {
            const size_t s     = src->visited_hash_set.find(t);
            dst->use_counts[d] = s != TensorHashSet::npos && src->visited_hash_set.is_used(s) ? src->use_counts[s] : 0;
        }
    };
    for (int i = 0; i < src->n_leafs; ++i) add(src->leafs[i]);
    for (int i = 0; i < src->n_nodes; ++i) add(src->nodes[i]);

    // The gradients follow their nodes into the destination's hash slots.
    if (dst->grads != nullptr) {
        std::memset(dst->grads, 0, dst->visited_hash_set.size * sizeof(ggml_tensor *));
        std::memset(dst->grad_accs, 0, dst->visited_hash_set.size * sizeof(ggml_tensor *));
    }
    if (src->grads != nullptr) {
        LOOM_REQUIRE(dst->grads != nullptr, "the source has gradients, the destination no room for them");
        for (int i = 0; i < src->n_nodes; ++i) {
            const size_t is = src->visited_hash_set.find(src->nodes[i]);
            const size_t id = dst->visited_hash_set.find(src->nodes[i]);
            LOOM_ASSERT(is != TensorHashSet::npos && id != TensorHashSet::npos);
            dst->grads[id]     = src->grads[is];
            dst->grad_accs[id] = src->grad_accs[is];
        }
    }
}

ggml_cgraph * ggml_graph_dup(ggml_context * ctx, ggml_cgraph * g, bool force_grads) {
    ggml_cgraph * r = ggml_new_graph_custom(ctx, size_t(std::max(g->size, 1)), force_grads || g->grads != nullptr);
    ggml_graph_cpy(g, r);
    return r;
}

void ggml_graph_clear(ggml_cgraph * g) {
    g->n_nodes = 0;
    g->n_leafs = 0;
    g->visited_hash_set.clear();
}

void ggml_build_forward_expand(ggml_cgraph * g, ggml_tensor * tensor) {
    LOOM_REQUIRE(g != nullptr && tensor != nullptr, "NULL graph or tensor");
    LOOM_REQUIRE(g->size > 0, "graph views cannot be expanded");
    visit(g, tensor, true);
}

void ggml_build_forward_order(ggml_cgraph * g, ggml_tensor * tensor) {
    LOOM_REQUIRE(g != nullptr && tensor != nullptr, "NULL graph or tensor");
    LOOM_REQUIRE(g->size > 0, "graph views cannot be expanded");
    visit(g, tensor, false);
}

ggml_tensor * ggml_build_forward_select(ggml_cgraph * g, ggml_tensor ** tensors, int n_tensors, int idx) {
    LOOM_REQUIRE(g != nullptr && tensors != nullptr, "NULL graph or tensor list");
    LOOM_REQUIRE(idx >= 0 && idx < n_tensors, "index %d out of the %d tensors", idx, n_tensors);
    LOOM_REQUIRE(g->size > 0, "graph views cannot be expanded");
    for (int i = 0; i < n_tensors; ++i) {
        LOOM_REQUIRE(tensors[i] != nullptr, "tensor %d of %d is NULL", i, n_tensors);
        visit(g, tensors[i], i == idx);
    }
    return tensors[idx];
}

int ggml_graph_size(ggml_cgraph * g) {
    return g->size;
}

ggml_tensor * ggml_graph_node(ggml_cgraph * g, int i) {
    if (i < 0) {
        LOOM_REQUIRE(g->n_nodes + i >= 0, "index %d out of the graph's %d nodes", i, g->n_nodes);
        return g->nodes[g->n_nodes + i];
    }
    LOOM_REQUIRE(i < g->n_nodes, "index %d out of the graph's %d nodes", i, g->n_nodes);
    return g->nodes[i];
}

ggml_tensor ** ggml_graph_nodes(ggml_cgraph * g) {
    return g->nodes;
}

int ggml_graph_n_nodes(ggml_cgraph * g) {
    return g->n_nodes;
}

void ggml_graph_add_node(ggml_cgraph * g, ggml_tensor * tensor) {
    LOOM_REQUIRE(g->n_nodes < g->size, "graph is full (%d nodes)", g->size);
    g->nodes[g->n_nodes++] = tensor;
}

ggml_tensor * ggml_graph_get_tensor(const ggml_cgraph * g, const char * name) {
    for (int i = 0; i < g->n_leafs; ++i) {
        if (std::strcmp(g->leafs[i]->name, name) == 0) return g->leafs[i];
    }
    for (int i = 0; i < g->n_nodes; ++i) {
        if (std::strcmp(g->nodes[i]->name, name) == 0) return g->nodes[i];
    }
    return nullptr;
}

void ggml_graph_print(const ggml_cgraph * g) {
    LOOM_LOG_INFO("=== GRAPH ===\n");
    LOOM_LOG_INFO("n_nodes = %d\n", g->n_nodes);
    for (int i = 0; i < g->n_nodes; ++i) {
        const ggml_tensor * t = g->nodes[i];
        LOOM_LOG_INFO(" - %3d: [ %5lld, %5lld, %5lld, %5lld] %16s %s\n", i, (long long) t->ne[0], (long long) t->ne[1],
                      (long long) t->ne[2], (long long) t->ne[3], ggml_op_desc(t), t->name);
    }
    LOOM_LOG_INFO("n_leafs = %d\n", g->n_leafs);
    for (int i = 0; i < g->n_leafs; ++i) {
        const ggml_tensor * t = g->leafs[i];
        LOOM_LOG_INFO(" - %3d: [ %5lld, %5lld, %5lld, %5lld] %8s %s\n", i, (long long) t->ne[0], (long long) t->ne[1],
                      (long long) t->ne[2], (long long) t->ne[3], ggml_type_name(t->type), t->name);
    }
    LOOM_LOG_INFO("========================================\n");
}

void ggml_graph_dump_dot(const ggml_cgraph * gb, const ggml_cgraph * gf, const char * filename) {
    (void) gf;
    FILE * fp = std::fopen(filename, "w");
    if (fp == nullptr) {
        LOOM_LOG_ERROR("ggml_graph_dump_dot: cannot open %s for writing\n", filename);
        return;
    }
    std::fprintf(fp, "digraph G {\n  newrank = true;\n  rankdir = TB;\n");
    for (int i = 0; i < gb->n_leafs; ++i) {
        const ggml_tensor * t = gb->leafs[i];
        std::fprintf(fp, "  \"%p\" [style = filled; fillcolor = %s; shape = record; label = \"%s | %s [%lld, %lld]\"];\n",
                     static_cast<const void *>(t), dot_color(t), t->name, ggml_type_name(t->type),
                     (long long) t->ne[0], (long long) t->ne[1]);
    }
    for (int i = 0; i < gb->n_nodes; ++i) {
        const ggml_tensor * t = gb->nodes[i];
        std::fprintf(fp,
                     "  \"%p\" [style = filled; fillcolor = %s; shape = record; label = \"%s | %s [%lld, %lld, %lld, "
                     "%lld] | <x>%s\"];\n",
                     static_cast<const void *>(t), dot_color(t), t->name, ggml_type_name(t->type),
                     (long long) t->ne[0], (long long) t->ne[1], (long long) t->ne[2], (long long) t->ne[3],
                     ggml_op_desc(t));
        for (int j = 0; j < GGML_MAX_SRC; ++j) {
            if (t->src[j] != nullptr) {
                std::fprintf(fp, "  \"%p\" -> \"%p\" [label = \"src%d\"];\n", static_cast<const void *>(t->src[j]),
                             static_cast<const void *>(t), j);
            }
        }
    }
    std::fprintf(fp, "}\n");
    std::fclose(fp);
    LOOM_LOG_INFO("ggml_graph_dump_dot: wrote %s (dot -Tpng %s -o %s.png)\n", filename, filename, filename);
}

} // extern "C"
