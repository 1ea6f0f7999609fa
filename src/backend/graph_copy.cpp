// Copying a graph to another backend, and comparing two backends node by node.

#include <algorithm>
#include <cstring>
#include <new>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend_impl.h"
#include "core/common.h"
#include "core/graph.h"
#include "ggml-alloc.h"
#include "ggml-cpp.h"

using namespace loom;

namespace {

// Every tensor the nodes of graph reach through their sources and view sources.
std::vector<ggml_tensor *> reachable_tensors(ggml_cgraph * graph) {
    std::vector<ggml_tensor *>              out;
    std::unordered_set<const ggml_tensor *> seen;
    std::vector<ggml_tensor *>              stack(graph->nodes, graph->nodes + graph->n_nodes);
    while (!stack.empty()) {
        ggml_tensor * t = stack.back();
        stack.pop_back();
        if (t == nullptr || !seen.insert(t).second) {
            continue;
        }
        out.push_back(t);
        stack.push_back(t->view_src);
        for (ggml_tensor * s : t->src) {
            stack.push_back(s);
        }
    }
    return out;
}

// Makes the tensors of the copy and fills them, remembering which original
// each copy stands for.
class GraphCopier {
  public:
    GraphCopier(ggml_context * allocated, ggml_context * unallocated)
        : allocated_(allocated), unallocated_(unallocated) {}

    // The copy of t, with its sources, view source, op and layout; created on first use.
    ggml_tensor * dup(ggml_tensor * t) {
        if (auto it = copies_.find(t); it != copies_.end()) {
            return it->second;
        }
        LOOM_REQUIRE(t->data != nullptr, "called from ggml_backend_graph_copy: tensor %s is not allocated",
                     describe(t).text);
        ggml_context * ctx = t->view_src != nullptr ? unallocated_ : allocated_;
        ggml_tensor *  c   = ggml_new_tensor(ctx, t->type, GGML_MAX_DIMS, t->ne);
        std::copy(std::begin(t->nb), std::end(t->nb), std::begin(c->nb));
        // Registered before the sources are visited: a tensor may be its own
        // source (ggml_cast makes the result its second operand).
        copies_.emplace(t, c);
        if (t->view_src != nullptr) {
            c->view_src  = dup(t->view_src);
            c->view_offs = t->view_offs;
        }
        c->op    = t->op;
        c->flags = t->flags;
        std::memcpy(c->op_params, t->op_params, sizeof(c->op_params));
        ggml_set_name(c, t->name);
        for (int i = 0; i < GGML_MAX_SRC; ++i) {
            if (t->src[i] != nullptr) {
                c->src[i] = dup(t->src[i]);
            }
        }
        return c;
    }

    // Gives the copy of t (and of everything it depends on) its data: views
    // are placed in their sources, other tensors get t's bytes.
    ggml_status init(ggml_tensor * t) {
        if (!initialised_.insert(t).second) {
            return GGML_STATUS_SUCCESS;
        }
        ggml_tensor * c = copies_.at(t);
        if (t->view_src != nullptr) {
            if (ggml_status st = init(t->view_src); st != GGML_STATUS_SUCCESS) {
                return st;
            }
            if (ggml_status st = ggml_backend_view_init(c); st != GGML_STATUS_SUCCESS) {
                return st;
            }
        } else {
            ggml_backend_tensor_copy(t, c);
        }
        for (ggml_tensor * s : t->src) {
            if (s != nullptr) {
                if (ggml_status st = init(s); st != GGML_STATUS_SUCCESS) {
                    return st;
                }
            }
        }
        return GGML_STATUS_SUCCESS;
    }

  private:
    ggml_context *                                         allocated_;
    ggml_context *                                         unallocated_;
    std::unordered_map<const ggml_tensor *, ggml_tensor *> copies_;
    std::unordered_set<const ggml_tensor *>                initialised_;
};

// The copy owns its contexts and buffer only once it is complete; until then
// the owners below free them on every way out, exceptions included.
struct ggml_backend_graph_copy make_graph_copy(ggml_backend * backend, ggml_cgraph * graph) {
    const size_t     n_tensors  = reachable_tensors(graph).size();
    const size_t     graph_size = size_t(std::max(graph->n_nodes, 1));
    ggml_init_params params{};
    params.mem_size = ggml_tensor_overhead() * n_tensors + ggml_graph_overhead_custom(graph_size, false);
    params.no_alloc = true;
    ggml_context_ptr allocated(ggml_init(params));
    ggml_context_ptr unallocated(ggml_init(params));
    if (allocated == nullptr || unallocated == nullptr) {
        LOOM_LOG_ERROR("ggml_backend_graph_copy: cannot allocate the contexts of the copy\n");
        return {};
    }

    GraphCopier copier(allocated.get(), unallocated.get());
    for (int i = 0; i < graph->n_nodes; ++i) {
        copier.dup(graph->nodes[i]);
    }
    ggml_backend_buffer_ptr buffer(ggml_backend_alloc_ctx_tensors(allocated.get(), backend));
    if (buffer == nullptr) {
        LOOM_LOG_ERROR("ggml_backend_graph_copy: cannot allocate the tensors of the copy on backend %s\n",
                       backend->name());
        return {};
    }
    for (int i = 0; i < graph->n_nodes; ++i) {
        if (copier.init(graph->nodes[i]) != GGML_STATUS_SUCCESS) {
            LOOM_LOG_ERROR("ggml_backend_graph_copy: cannot place a view of the copy on backend %s\n",
                           backend->name());
            return {};
        }
    }

    ggml_cgraph * copy_graph = ggml_new_graph_custom(allocated.get(), graph_size, false);
    for (int i = 0; i < graph->n_nodes; ++i) {
        ggml_graph_add_node(copy_graph, copier.dup(graph->nodes[i]));
    }
    struct ggml_backend_graph_copy copy{};
    copy.buffer          = buffer.release();
    copy.ctx_allocated   = allocated.release();
    copy.ctx_unallocated = unallocated.release();
    copy.graph           = copy_graph;
    return copy;
}

bool compare_graphs(ggml_backend * backend1, ggml_backend * backend2, ggml_cgraph * g1, ggml_cgraph * g2,
                    ggml_backend_eval_callback callback, void * user_data, const ggml_tensor * const * test_nodes,
                    size_t num_test_nodes) {
    auto computed = [](ggml_backend * backend, ggml_cgraph * g) {
        const ggml_status st = ggml_backend_graph_compute(backend, g);
        if (st != GGML_STATUS_SUCCESS) {
            LOOM_LOG_ERROR("ggml_backend_compare_graph_backend: backend %s failed to compute: %s\n", backend->name(),
                           ggml_status_to_string(st));
        }
        return st == GGML_STATUS_SUCCESS;
    };

    if (num_test_nodes > 0) {
        if (!computed(backend1, g1) || !computed(backend2, g2)) {
            return false;
        }
        for (int i = 0; i < g1->n_nodes; ++i) {
            if (std::find(test_nodes, test_nodes + num_test_nodes, g1->nodes[i]) != test_nodes + num_test_nodes) {
                if (!callback(i, g1->nodes[i], g2->nodes[i], user_data)) {
                    break;
                }
            }
        }
        return true;
    }

    for (int i = 0; i < g1->n_nodes; ++i) {
        ggml_cgraph v1 = ggml_graph_view(g1, i, i + 1);
        ggml_cgraph v2 = ggml_graph_view(g2, i, i + 1);
        if (!computed(backend1, &v1) || !computed(backend2, &v2)) {
            return false;
        }
        if (is_view_op(g1->nodes[i]->op)) {
            continue;
        }
        if (!callback(i, g1->nodes[i], g2->nodes[i], user_data)) {
            break;
        }
    }
    return true;
}

// Runs graph (on backend1) and its copy on backend2 side by side.
bool compare_backends(ggml_backend * backend1, ggml_backend * backend2, ggml_cgraph * graph,
                      ggml_backend_eval_callback callback, void * user_data, const ggml_tensor * const * test_nodes,
                      size_t num_test_nodes) {
    struct ggml_backend_graph_copy copy = ggml_backend_graph_copy(backend2, graph);
    if (copy.buffer == nullptr) {
        return false;
    }
    bool ok = false;
    try {
        ok = compare_graphs(backend1, backend2, graph, copy.graph, callback, user_data, test_nodes, num_test_nodes);
    } catch (const std::bad_alloc &) {
        LOOM_LOG_ERROR("ggml_backend_compare_graph_backend: out of memory\n");
    }
    ggml_backend_graph_copy_free(copy);
    return ok;
}

} // namespace

extern "C" {

struct ggml_backend_graph_copy ggml_backend_graph_copy(ggml_backend_t backend, ggml_cgraph * graph) {
    LOOM_REQUIRE(backend != nullptr && graph != nullptr, "NULL backend or graph");
    try {
        return make_graph_copy(backend, graph);
    } catch (const std::bad_alloc &) {
        LOOM_LOG_ERROR("%s: out of memory\n", __func__);
        return {};
    }
}

void ggml_backend_graph_copy_free(struct ggml_backend_graph_copy copy) {
    ggml_backend_buffer_free(copy.buffer);
    ggml_free(copy.ctx_allocated);
    ggml_free(copy.ctx_unallocated);
}

bool ggml_backend_compare_graph_backend(ggml_backend_t backend1, ggml_backend_t backend2, ggml_cgraph * graph,
                                        ggml_backend_eval_callback callback, void * user_data,
                                        const ggml_tensor * const * test_nodes, size_t num_test_nodes) {
    LOOM_REQUIRE(backend1 != nullptr && backend2 != nullptr && graph != nullptr && callback != nullptr,
                 "NULL backend, graph or callback");
    LOOM_REQUIRE(num_test_nodes == 0 || test_nodes != nullptr, "%zu test nodes given as NULL", num_test_nodes);
    for (size_t j = 0; j < num_test_nodes; ++j) {
        LOOM_REQUIRE(std::find(graph->nodes, graph->nodes + graph->n_nodes, test_nodes[j]) !=
                         graph->nodes + graph->n_nodes,
                     "test node %zu (%s) is not a node of the graph", j, describe(test_nodes[j]).text);
    }
    return compare_backends(backend1, backend2, graph, callback, user_data, test_nodes, num_test_nodes);
}

} // extern "C"
