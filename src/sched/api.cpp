// The C API of the scheduler: argument checks, then one call into the object.

#include <cstdio>
#include <cstdlib>

#include "backend/backend_impl.h"
#include "core/common.h"
#include "sched.h"
#include "trace.h"

using namespace loom::sched;

ggml_backend_sched::ggml_backend_sched(ggml_backend_t * backend_list, ggml_backend_buffer_type_t * buft_list,
                                       int n_backends, size_t size, bool parallel, bool offload)
    : graph_size(size), op_offload(offload), n_copies(parallel ? 4 : 1) {
    if (const char * v = std::getenv("GGML_SCHED_DEBUG")) config.debug = std::atoi(v);
    if (const char * v = std::getenv("LOOM_SCHED_TRACE")) config.trace_path = v;
    if (const char * v = std::getenv("LOOM_SCHED_REUSE")) config.reuse_plans = std::atoi(v) != 0;

    for (int b = 0; b < n_backends; ++b) {
        backends.push_back(backend_list[b]);
        ggml_backend_buffer_type_t buft = buft_list != nullptr ? buft_list[b]
                                                               : ggml_backend_get_default_buffer_type(backend_list[b]);
        LOOM_REQUIRE(ggml_backend_supports_buft(backend_list[b], buft), "backend %s cannot use buffer type %s",
                     ggml_backend_name(backend_list[b]), ggml_backend_buft_name(buft));
        bufts.push_back(buft);
    }
    if (n_copies > 1) {
        events.resize(backends.size());
        for (size_t b = 0; b < backends.size(); ++b) {
            for (int c = 0; c < n_copies; ++c) {
                events[b].push_back(ggml_backend_event_new(ggml_backend_get_device(backends[b])));
            }
        }
    }
    galloc = ggml_gallocr_new_n(bufts.data(), n_backends);
    if (!config.trace_path.empty()) {
        trace       = std::make_unique<Trace>();
        trace->path = config.trace_path;
        for (ggml_backend_t b : backends) trace->track_names.push_back(ggml_backend_name(b));
    }
    reset();
}

ggml_backend_sched::~ggml_backend_sched() {
    if (trace) trace->write();
    reset();
    for (auto & per_backend : events) {
        for (ggml_backend_event_t e : per_backend) ggml_backend_event_free(e);
    }
    ggml_gallocr_free(galloc);
    ggml_free(ctx);
}

int ggml_backend_sched::backend_index(ggml_backend_t b) const {
    for (size_t i = 0; i < backends.size(); ++i) {
        if (backends[i] == b) return int(i);
    }
    return -1;
}

namespace {

int checked_index(ggml_backend_sched_t sched, ggml_backend_t backend, const char * caller) {
    const int i = sched->backend_index(backend);
    LOOM_REQUIRE(i >= 0, "called from %s with backend %s, which is not one of the scheduler's", caller,
                 backend ? ggml_backend_name(backend) : "(null)");
    return i;
}

} // namespace

extern "C" {

ggml_backend_sched_t ggml_backend_sched_new(ggml_backend_t * backends, ggml_backend_buffer_type_t * bufts,
                                            int n_backends, size_t graph_size, bool parallel, bool op_offload) {
    LOOM_REQUIRE(backends != nullptr && n_backends > 0, "at least one backend is needed (got %d)", n_backends);
    for (int b = 0; b < n_backends; ++b) {
        LOOM_REQUIRE(backends[b] != nullptr, "backend %d is NULL", b);
    }
    LOOM_REQUIRE(ggml_backend_dev_type(ggml_backend_get_device(backends[n_backends - 1])) ==
                     GGML_BACKEND_DEVICE_TYPE_CPU,
                 "the last backend must be a CPU device (got %s)", ggml_backend_name(backends[n_backends - 1]));
    LOOM_REQUIRE(graph_size > 0, "graph_size must be positive");
    return new ggml_backend_sched(backends, bufts, n_backends, graph_size, parallel, op_offload);
}

void ggml_backend_sched_free(ggml_backend_sched_t sched) {
    delete sched;
}

void ggml_backend_sched_reset(ggml_backend_sched_t sched) {
    sched->reset();
}

bool ggml_backend_sched_reserve(ggml_backend_sched_t sched, ggml_cgraph * measure_graph) {
    LOOM_REQUIRE(measure_graph != nullptr, "NULL graph");
    sched->synchronize();
    sched->reset();
    sched->split_graph(measure_graph);
    const bool ok = ggml_gallocr_reserve_n(sched->galloc, sched->graph, sched->node_ids.data(), sched->leaf_ids.data());
    if (!ok) {
        LOOM_LOG_ERROR("ggml_backend_sched_reserve: failed to allocate the compute buffers\n");
    }
    sched->prev_node_ids = sched->node_ids;
    sched->prev_leaf_ids = sched->leaf_ids;
    sched->reset();
    return ok;
}

void ggml_backend_sched_reserve_size(ggml_backend_sched_t sched, ggml_cgraph * measure_graph, size_t * sizes) {
    LOOM_REQUIRE(measure_graph != nullptr && sizes != nullptr, "NULL graph or sizes");
    sched->synchronize();
    sched->reset();
    sched->split_graph(measure_graph);
    ggml_gallocr_reserve_n_size(sched->galloc, sched->graph, sched->node_ids.data(), sched->leaf_ids.data(), sizes);
    sched->reset();
}

int ggml_backend_sched_get_n_backends(ggml_backend_sched_t sched) {
    return int(sched->backends.size());
}

ggml_backend_t ggml_backend_sched_get_backend(ggml_backend_sched_t sched, int i) {
    LOOM_REQUIRE(i >= 0 && i < int(sched->backends.size()), "backend index %d out of range (%zu backends)", i,
                 sched->backends.size());
    return sched->backends[size_t(i)];
}

int ggml_backend_sched_get_n_splits(ggml_backend_sched_t sched) {
    return int(sched->splits.size());
}

int ggml_backend_sched_get_n_copies(ggml_backend_sched_t sched) {
    return sched->n_copies;
}

ggml_backend_buffer_type_t ggml_backend_sched_get_buffer_type(ggml_backend_sched_t sched, ggml_backend_t backend) {
    return sched->bufts[size_t(checked_index(sched, backend, __func__))];
}

size_t ggml_backend_sched_get_buffer_size(ggml_backend_sched_t sched, ggml_backend_t backend) {
    return ggml_gallocr_get_buffer_size(sched->galloc, checked_index(sched, backend, __func__));
}

void ggml_backend_sched_set_tensor_backend(ggml_backend_sched_t sched, ggml_tensor * node, ggml_backend_t backend) {
    LOOM_REQUIRE(node != nullptr, "NULL tensor");
    const int b = checked_index(sched, backend, __func__);
    sched->backend_of[node] = b;
    sched->cause_of[node]   = Cause::user;
    sched->pinned[node]     = true;
    sched->is_reset         = false;
}

ggml_backend_t ggml_backend_sched_get_tensor_backend(ggml_backend_sched_t sched, ggml_tensor * node) {
    const int b = sched->id(node);
    return b < 0 ? nullptr : sched->backends[size_t(b)];
}

void ggml_backend_sched_split_graph(ggml_backend_sched_t sched, ggml_cgraph * graph) {
    LOOM_REQUIRE(graph != nullptr, "NULL graph");
    sched->split_graph(graph);
}

bool ggml_backend_sched_alloc_graph(ggml_backend_sched_t sched, ggml_cgraph * graph) {
    LOOM_REQUIRE(graph != nullptr, "NULL graph");
    LOOM_REQUIRE(!sched->is_alloc, "a graph is already allocated; call ggml_backend_sched_reset first");
    sched->cur_copy  = sched->next_copy;
    sched->next_copy = (sched->next_copy + 1) % sched->n_copies;
    sched->split_graph(graph);
    if (!sched->alloc_splits()) {
        return false;
    }
    sched->is_alloc = true;
    return true;
}

ggml_status ggml_backend_sched_graph_compute(ggml_backend_sched_t sched, ggml_cgraph * graph) {
    ggml_status st = ggml_backend_sched_graph_compute_async(sched, graph);
    ggml_backend_sched_synchronize(sched);
    for (ggml_backend_t b : sched->backends) {
        if (const ggml_status later = b->take_async_status(); st == GGML_STATUS_SUCCESS) {
            st = later;
        }
    }
    return st;
}

ggml_status ggml_backend_sched_graph_compute_async(ggml_backend_sched_t sched, ggml_cgraph * graph) {
    LOOM_REQUIRE(graph != nullptr, "NULL graph");
    // A different graph than the allocated one is placed anew (ggml would
    // compute the stale plan).
    if (sched->is_alloc && (sched->user_graph != graph || sched->user_nodes != graph->n_nodes)) {
        sched->reset();
    }
    if (!sched->is_reset && !sched->is_alloc) {
        sched->reset();
    }
    if (!sched->is_alloc && !ggml_backend_sched_alloc_graph(sched, graph)) {
        return GGML_STATUS_ALLOC_FAILED;
    }
    return sched->compute_splits();
}

void ggml_backend_sched_synchronize(ggml_backend_sched_t sched) {
    sched->synchronize();
}

void ggml_backend_sched_set_eval_callback(ggml_backend_sched_t sched, ggml_backend_sched_eval_callback callback,
                                          void * user_data) {
    sched->eval_cb      = callback;
    sched->eval_cb_data = user_data;
}

void loom_sched_get_stats(ggml_backend_sched_t sched, loom_sched_stats * stats) {
    LOOM_REQUIRE(stats != nullptr, "NULL stats");
    stats->n_plans      = sched->n_plans;
    stats->n_reused     = sched->n_reused;
    stats->n_splits     = int(sched->splits.size());
    stats->bytes_copied = sched->bytes_copied;
    stats->n_refreshed  = sched->n_refreshed;
}

void loom_sched_set_trace(ggml_backend_sched_t sched, const char * path) {
    if (path == nullptr) {
        sched->trace.reset();
        return;
    }
    sched->trace       = std::make_unique<Trace>();
    sched->trace->path = path;
    for (ggml_backend_t b : sched->backends) sched->trace->track_names.push_back(ggml_backend_name(b));
}

bool loom_sched_write_trace(ggml_backend_sched_t sched) {
    return sched->trace != nullptr && sched->trace->write();
}

bool loom_sched_dump_dot(ggml_backend_sched_t sched, const ggml_cgraph * graph, const char * path) {
    static const char * const colors[] = {"lightskyblue", "palegreen", "gold", "plum", "lightsalmon", "khaki"};
    FILE *                    f        = std::fopen(path, "w");
    if (f == nullptr) {
        LOOM_LOG_ERROR("loom_sched_dump_dot: cannot open %s for writing\n", path);
        return false;
    }
    auto color = [&](const ggml_tensor * t) {
        const int b = sched->id(t);
        if (b < 0) return "white";
        if (b == sched->cpu()) return "lightgray";
        return colors[size_t(b) % (sizeof(colors) / sizeof(colors[0]))];
    };
    std::fprintf(f, "digraph sched {\n  rankdir = TB;\n  node [shape = record, style = filled];\n");
    for (size_t b = 0; b < sched->backends.size(); ++b) {
        std::fprintf(f, "  \"legend_%zu\" [label = \"%s\", fillcolor = %s, shape = box];\n", b,
                     ggml_backend_name(sched->backends[b]),
                     int(b) == sched->cpu() ? "lightgray" : colors[b % (sizeof(colors) / sizeof(colors[0]))]);
    }
    auto emit = [&](const ggml_tensor * t, bool leaf) {
        const int b = sched->id(t);
        std::fprintf(f, "  \"%p\" [label = \"%s|%s|%s\", fillcolor = %s%s];\n", static_cast<const void *>(t), t->name,
                     leaf ? ggml_type_name(t->type) : ggml_op_desc(t),
                     b >= 0 ? ggml_backend_name(sched->backends[size_t(b)]) : "?", color(t),
                     leaf ? ", shape = box" : "");
    };
    for (int i = 0; i < graph->n_leafs; ++i) emit(graph->leafs[i], true);
    for (int i = 0; i < graph->n_nodes; ++i) {
        const ggml_tensor * t = graph->nodes[i];
        emit(t, false);
        for (int j = 0; j < GGML_MAX_SRC; ++j) {
            if (t->src[j] != nullptr) {
                const bool cross = sched->id(t->src[j]) != sched->id(t);
                std::fprintf(f, "  \"%p\" -> \"%p\"%s;\n", static_cast<const void *>(t->src[j]),
                             static_cast<const void *>(t), cross ? " [color = red, penwidth = 2]" : "");
            }
        }
    }
    std::fprintf(f, "}\n");
    return std::fclose(f) == 0;
}

} // extern "C"
